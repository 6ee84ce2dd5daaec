//! What the command line promises, against the real apiserver: start-up refused with one line
//! when RBAC denies a list, `k8sailor version`, and each setting (`--context`, `--prefix`,
//! `--request-timeout`, `--max-body-bytes`, `--dashboard=false`, `--log-format`, `--config`)
//! doing what it says, as a flag, as its `K8SAILOR_*` variable and as a file key, flags over
//! the environment over the file.

use std::process::{Command, Stdio};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use crate::deploy::{ClusterScoped, ShippedRbac, TempDir, account_with_rules, token_kubeconfig};
use crate::support::{SOON, Server, TestNamespace, cluster, pod};

/// Runs `command` until it exits (bounded by [`SOON`]): its exit code, stdout and stderr.
fn run_to_exit(mut command: Command) -> (Option<i32>, String, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start k8sailor");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > SOON {
            let _ = child.kill();
            panic!("k8sailor still running after {SOON:?}: {command:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `http://127.0.0.1:PORT` of a server whatever its prefix.
fn origin(server: &Server) -> String {
    let after_scheme = server.base.find("//").unwrap() + 2;
    match server.base[after_scheme..].find('/') {
        Some(at) => server.base[..after_scheme + at].to_string(),
        None => server.base.clone(),
    }
}

/// The lines k8sailor writes itself on a failed start, not its log records.
fn own_lines(stderr: &str) -> Vec<String> {
    let own: Vec<String> = stderr
        .lines()
        .filter(|l| l.starts_with("k8sailor: "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        stderr.lines().last(),
        own.last().map(String::as_str),
        "the last line is k8sailor's: {stderr}"
    );
    own
}

fn kubeconfig() -> &'static str {
    cluster().kubeconfig.to_str().unwrap()
}

#[tokio::test]
async fn without_list_on_a_kind_it_exits_1_with_one_line_naming_the_permission() {
    let ns = TestNamespace::new("nolist").await;
    let rbac = ShippedRbac::load();
    let mut rules = rbac.rules();
    let services = rules
        .iter_mut()
        .find(|r| {
            r.api_groups.as_deref() == Some(&["".to_string()])
                && r.resources
                    .as_deref()
                    .is_some_and(|res| res.contains(&"services".to_string()))
        })
        .expect("a rule for core services in config/rbac.yaml");
    assert!(services.verbs.contains(&"list".to_string()), "{services:?}");
    // Services only: a rule that also names pods keeps them listable.
    services.resources = Some(vec!["services".to_string()]);
    services.verbs.retain(|v| v != "list");
    let others = rbac
        .rules()
        .into_iter()
        .filter(|r| r.api_groups.as_deref() == Some(&["".to_string()]))
        .flat_map(|r| r.resources.unwrap_or_default())
        .filter(|res| res != "services");
    let mut rest = rbac.rules()[0].clone();
    rest.resources = Some(others.collect());
    rules.push(rest);
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rules, &mut cleanup).await;
    let dir = TempDir::new("nolist");
    let kubeconfig = token_kubeconfig(&dir, &token);

    let (code, stdout, stderr) = run_to_exit(Server::command(&kubeconfig, &[]));
    assert_eq!(code, Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "", "it never said it was listening");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        ["k8sailor: forbidden by RBAC: cannot list Service (services) in all namespaces"],
        "one line naming the permission"
    );
}

#[test]
fn version_prints_the_package_version() {
    let (code, stdout, stderr) = run_to_exit({
        let mut c = Command::new(env!("CARGO_BIN_EXE_k8sailor"));
        c.arg("version");
        c
    });
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    assert_eq!(stdout, format!("k8sailor {}\n", env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn context_picks_the_kubeconfig_context_and_a_wrong_one_is_named() {
    let ns = TestNamespace::new("context").await;
    let dir = TempDir::new("context");
    // The current context points at a port nothing listens on; "real" at the test cluster.
    let mut kc = Kubeconfig::read_from(kubeconfig()).unwrap();
    let current = kc.current_context.clone().unwrap();
    let real = kc.contexts.iter().find(|c| c.name == current).unwrap();
    let mut real = real.clone();
    real.name = "real".into();
    let mut dead = real.clone();
    dead.name = "dead".into();
    let cluster_name = real.context.as_ref().unwrap().cluster.clone();
    let mut dead_cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .unwrap()
        .clone();
    dead_cluster.name = "dead".into();
    dead_cluster.cluster.as_mut().unwrap().server = Some("https://127.0.0.1:1".into());
    dead.context.as_mut().unwrap().cluster = "dead".into();
    kc.clusters.push(dead_cluster);
    kc.contexts.push(real);
    kc.contexts.push(dead);
    kc.current_context = Some("dead".into());
    let path = dir.write("kubeconfig", serde_json::to_string(&kc).unwrap().as_bytes());
    let path = path.to_str().unwrap();

    // kube's client logs the failed connection too: the one line is k8sailor's own.
    let (code, _, stderr) = run_to_exit(Server::command(path, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        own_lines(&stderr),
        [format!(
            "k8sailor: the Kubernetes API at https://127.0.0.1:1/ (kubeconfig {path} \
             (context \"dead\")) is not reachable: ServiceError: client error (Connect): \
             tcp connect error: Connection refused (os error 111)"
        )]
    );

    let (code, _, stderr) = run_to_exit(Server::command(path, &["--context", "nope"]));
    assert_eq!(code, Some(1), "{stderr}");
    let own = own_lines(&stderr);
    assert_eq!(own.len(), 1, "{stderr}");
    assert!(own[0].contains("\"nope\""), "names the context: {stderr}");

    let server = Server::start_with(path, &["--context", "real", "--namespace", &ns.name])
        .unwrap_or_else(|e| panic!("{e}"));
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("in-real", &[]))
        .await
        .unwrap();
    let list = format!("/pods?namespace={}", ns.name);
    crate::support::eventually(SOON, "the pod of the real context", || async {
        server.names(&list).await.filter(|n| n == &["in-real"])
    })
    .await;
}

#[tokio::test]
async fn prefix_moves_the_api_and_nothing_is_left_at_the_default() {
    let server = Server::start(&["--prefix", "/api/sailor"]);
    assert!(server.base.ends_with("/api/sailor"), "{}", server.base);
    let res = reqwest::get(format!("{}/api/sailor/ping", origin(&server)))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "pong");
    let res = reqwest::get(format!("{}/k8sailor/v0/ping", origin(&server)))
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let body = res.text().await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"code": 404, "data": null, "error": "no route for GET /k8sailor/v0/ping"})
    );
    // Under /api/, the prefix's paths are the prefix's, and the rest the Kubernetes API's.
    let res = reqwest::get(format!("{}/api/sailor/nope", origin(&server)))
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], 404, "the prefix's envelope: {body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("resource \"nope\" is not served")),
        "{body}"
    );
    let res = reqwest::get(format!("{}/api/v1/namespaces?limit=1", origin(&server)))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let list: Value = res.json().await.unwrap();
    assert_eq!(list["kind"], "NamespaceList");
}

#[tokio::test]
async fn dashboard_false_serves_no_page() {
    let on = Server::start(&[]);
    let (status, headers, page) = on.request("GET", "/", &[]).await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.contains("<html"), "{page}");

    let off = Server::start(&["--dashboard=false"]);
    let (status, _, body) = off.request("GET", "/", &[]).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"code": 404, "data": null, "error": "no route for GET /"})
    );
    let (status, _, body) = off.request("GET", "/k8sailor/v0/ping", &[]).await;
    assert_eq!((status, body.as_str()), (200, "pong"), "the API stays");
}

#[tokio::test]
async fn max_body_bytes_refuses_a_larger_body_and_reads_a_smaller_one() {
    let ns = TestNamespace::new("maxbody").await;
    let server = Server::start(&["--max-body-bytes", "100", "--namespace", &ns.name]);
    let path = format!("/deployments/web?namespace={}", ns.name);
    // 101 bytes: one over.
    let big = json!({"containers": [{"image": format!("nginx:{}", "1".repeat(66))}]});
    assert_eq!(big.to_string().len(), 101);
    let (status, answer) = server.send("POST", &path, Some(big)).await;
    assert_eq!(status, 413, "{answer}");
    assert_eq!(
        answer,
        json!({"code": 413, "data": null,
            "error": "the body may be at most 100 bytes (maxBodyBytes); it is 101 bytes"})
    );
    // Within the limit, the same route creates.
    let small = json!({"containers": [{"image": "nginx:1.27"}]});
    let (status, answer) = server.send("POST", &path, Some(small)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["name"], "web");
}

/// A continue token for a version far ahead of the cache: a replica behind waits up to 2 s
/// for it, then answers 503 (see `queries.rs`). The request timeout, when shorter, answers
/// first, with its own reason.
#[tokio::test]
async fn request_timeout_ends_a_request_that_takes_longer() {
    let ns = TestNamespace::new("reqtimeout").await;
    let server = Server::start(&["--request-timeout", "100ms", "--namespace", &ns.name]);
    let token = crate::queries::token_ahead(&server, &ns.name).await;
    let (status, answer) = server
        .get(&format!(
            "/pods?namespace={}&limit=1&continue={token}",
            ns.name
        ))
        .await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(
        answer,
        json!({"code": 503, "data": null, "error": "the request took longer than 100ms"})
    );
}

#[tokio::test]
async fn log_format_json_writes_one_object_per_line_and_plain_does_not() {
    let start = |format: &str| {
        let mut command = Server::command(kubeconfig(), &["--log-format", format]);
        command.env("RUST_LOG", "info");
        Server::start_command(command).unwrap_or_else(|e| panic!("{e}"))
    };
    let json_server = start("json");
    let plain_server = start("plain");
    // The line itself, not another that says "serving" (a custom resource's, when another
    // test's CRD is there), which may come first.
    let logs = json_server.logged(r#""message":"serving""#).await;
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let serving = lines
        .iter()
        .find(|l| l["fields"]["message"] == "serving")
        .unwrap_or_else(|| panic!("a serving line: {logs}"));
    assert_eq!(serving["level"], "INFO", "{serving}");
    assert_eq!(serving["fields"]["prefix"], "/k8sailor/v0", "{serving}");

    let logs = plain_server.logged("prefix=/k8sailor/v0").await;
    let serving = logs
        .lines()
        // Not "serving custom resource": other tests' CRDs may come and go meanwhile.
        .find(|l| l.contains(": serving ") && l.contains("prefix="))
        .unwrap_or_else(|| panic!("a serving line: {logs}"));
    assert!(serde_json::from_str::<Value>(serving).is_err(), "{serving}");
    assert!(serving.contains(" INFO "), "{serving}");
    assert!(serving.contains("prefix=/k8sailor/v0"), "{serving}");
}

/// Each layer set in turn on the same key (the prefix, seen in the "listening" line), and a
/// second key (the dashboard) given only by the file or only by the environment.
#[tokio::test]
async fn flags_beat_the_environment_which_beats_the_file() {
    let dir = TempDir::new("precedence");
    let file = dir.write("k8sailor.yaml", b"prefix: /from-file\ndashboard: false\n");
    let file = file.to_str().unwrap();
    let start = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Server::command(kubeconfig(), args);
        for (k, v) in env {
            command.env(k, v);
        }
        Server::start_command(command).unwrap_or_else(|e| panic!("{e}"))
    };
    let dashboard = |server: &Server| {
        let server = origin(server);
        async move {
            reqwest::get(format!("{server}/"))
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };

    let s = start(&["--config", file], &[]);
    assert!(s.base.ends_with("/from-file"), "{}", s.base);
    assert_eq!(dashboard(&s).await, 404, "the file turns the dashboard off");

    let s = start(&[], &[("K8SAILOR_CONFIG", file)]);
    assert!(
        s.base.ends_with("/from-file"),
        "K8SAILOR_CONFIG: {}",
        s.base
    );

    let s = start(
        &["--config", file],
        &[
            ("K8SAILOR_PREFIX", "/from-env"),
            ("K8SAILOR_DASHBOARD", "true"),
        ],
    );
    assert!(s.base.ends_with("/from-env"), "{}", s.base);
    assert_eq!(dashboard(&s).await, 200, "the environment beats the file");

    let s = start(
        &["--config", file, "--prefix", "/from-flag"],
        &[("K8SAILOR_PREFIX", "/from-env")],
    );
    assert!(s.base.ends_with("/from-flag"), "{}", s.base);
    assert_eq!(
        dashboard(&s).await,
        404,
        "the file still sets what nothing else does"
    );

    // Each other setting the tests above give as flags, given by its variable.
    let s = start(
        &[],
        &[
            ("K8SAILOR_DASHBOARD", "false"),
            ("K8SAILOR_MAX_BODY_BYTES", "10"),
            ("K8SAILOR_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
        ],
    );
    assert_eq!(dashboard(&s).await, 404);
    let logs = s.logged("serving").await;
    for line in logs.lines() {
        assert!(serde_json::from_str::<Value>(line).is_ok(), "{line:?}");
    }
    let (status, answer) = s
        .send(
            "POST",
            "/deployments/web?namespace=default",
            Some(json!({"a": 1234567})),
        )
        .await;
    assert_eq!((status, &answer["code"]), (413, &json!(413)), "{answer}");
    drop(s);

    let (code, _, stderr) = run_to_exit(Server::command(
        kubeconfig(),
        &["--config", &format!("{file}.missing")],
    ));
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "k8sailor: cannot read config file {file}.missing: No such file or directory (os error 2)"
        )]
    );
}
