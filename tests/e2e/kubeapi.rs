//! The Kubernetes API served from memory: the real kubectl (v1.35.4, built by hack/cluster)
//! pointed at k8sailor and at the apiserver must print the same thing for the same command:
//! `get` of every kind `/resources` serves (one fixture each, shared with resources.rs) in
//! one namespace and across namespaces, `-o wide`, `-o json` (objects equal, managedFields
//! aside), selectors, `--chunk-size`, `--show-labels`, `api-resources`, errors, and `get -w`
//! sees a change; a large list is kept and sent again, gzipped as kubectl asks, until its
//! kind changes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::Role;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::deploy::kubectl;
use crate::resources::fixtures::{FIXTURES, Fixture, Which};
use crate::resources::{Leftovers, apiserver_api};
use crate::support::{SOON, Server, TestNamespace, cluster, eventually, eventually_shown, repo};

/// kubectl with a kubeconfig of its own and a cache of its own, so no discovery cached for
/// another server is read; shared by the tests of the Kubernetes API.
pub(crate) struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    pub(crate) fn new(kubeconfig: PathBuf, cache: PathBuf) -> Kubectl {
        Kubectl { kubeconfig, cache }
    }

    pub(crate) fn for_apiserver(dir: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: cluster().kubeconfig.clone(),
            cache: dir.join("cache-apiserver"),
        }
    }

    /// For `server` without credentials (`--auth none`).
    pub(crate) fn for_k8sailor(dir: &Path, server: &Server) -> Kubectl {
        Kubectl::at(dir, "k8sailor", json!({"server": server.root()}), json!({}))
    }

    /// For k8sailor behind TLS at `url` (kubectl sends a token over TLS only), whose
    /// certificate is `ca` (PEM), as the owner of `token` (`--auth delegated`); `name` tells
    /// this kubectl's files from others'.
    pub(crate) fn for_k8sailor_as(
        dir: &Path,
        name: &str,
        url: &str,
        ca: &str,
        token: &str,
    ) -> Kubectl {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let cluster = json!({"server": url, "certificate-authority-data": ca});
        Kubectl::at(dir, name, cluster, json!({ "token": token }))
    }

    /// For the apiserver (its address and CA from the cluster's kubeconfig) as the owner of
    /// `token`, nothing else of the admin's credentials.
    pub(crate) fn for_apiserver_as(dir: &Path, name: &str, token: &str) -> Kubectl {
        let text =
            std::fs::read_to_string(&cluster().kubeconfig).expect("the cluster's kubeconfig");
        let mut config: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
        for user in config["users"].as_array_mut().expect("users") {
            user["user"] = json!({ "token": token });
        }
        let kubeconfig = dir.join(format!("kubeconfig-{name}"));
        std::fs::write(&kubeconfig, config.to_string()).unwrap();
        Kubectl {
            kubeconfig,
            cache: dir.join(format!("cache-{name}")),
        }
    }

    fn at(dir: &Path, name: &str, cluster: Value, user: Value) -> Kubectl {
        let kubeconfig = dir.join(format!("kubeconfig-{name}"));
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "k8sailor", "cluster": cluster}],
            "contexts": [{"name": "k8sailor", "context": {"cluster": "k8sailor", "user": "caller"}}],
            "users": [{"name": "caller", "user": user}],
            "current-context": "k8sailor",
        });
        std::fs::write(&kubeconfig, config.to_string()).unwrap();
        Kubectl {
            kubeconfig,
            cache: dir.join(format!("cache-{name}")),
        }
    }

    /// The kubeconfig it reads, for another client of the same server (k9s).
    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(kubectl());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Exit success, stdout and stderr.
    pub(crate) fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.command(args).output().expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// An age as kubectl prints it (`5s`, `3m2s`, `2d`): the two runs may print it a second apart.
fn is_age(token: &str) -> bool {
    let mut digits = false;
    let mut unit = false;
    for c in token.chars() {
        if c.is_ascii_digit() {
            digits = true;
        } else if "smhdy".contains(c) && digits {
            unit = true;
            digits = false;
        } else {
            return false;
        }
    }
    unit && !digits
}

/// kubectl's table with each age as `<age>` and columns' spacing ignored.
pub(crate) fn normalized(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(|t| {
                    if is_age(t) {
                        "<age>".to_string()
                    } else {
                        t.to_string()
                    }
                })
                .collect()
        })
        .collect()
}

/// The objects of a `-o json` answer (a List or one object), managedFields aside. Explicit
/// nulls count: the apiserver writes some (an Event's `eventTime`, an HPA's
/// `status.currentMetrics`), and k8sailor keeps each object as it was sent.
fn objects(json: &str) -> Vec<Value> {
    let value: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let mut items = match value.get("items") {
        Some(Value::Array(items)) => items.clone(),
        _ => vec![value],
    };
    for item in &mut items {
        if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    items
}

/// Whether `value` holds an explicit null, at any depth.
fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(members) => members.values().any(has_null),
        Value::Array(items) => items.iter().any(has_null),
        _ => false,
    }
}

struct Setup {
    ns: TestNamespace,
    server: Server,
    apiserver: Kubectl,
    k8sailor: Kubectl,
}

async fn setup(test: &str) -> Setup {
    let ns = TestNamespace::new(test).await;
    // Before k8sailor starts, so that its first list holds them: `get configmaps` and
    // `get serviceaccounts` print them.
    ns.wait_for_defaults().await;
    let dir = repo()
        .join("target")
        .join(format!("e2e-kubeapi-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, app) in [("cm-a", "a"), ("cm-b", "b"), ("cm-c", "a")] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app, "e2e-kubeapi": ns.name}},
            "data": {"key": name, "n": "1"},
        }))
        .unwrap();
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "reader", "labels": {"app": "a"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/web:1"}]},
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let server = Server::start(&["--auth", "none"]);
    let apiserver = Kubectl::for_apiserver(&dir);
    let k8sailor = Kubectl::for_k8sailor(&dir, &server);
    // Until k8sailor's caches hold what was created.
    let path = format!("/api/v1/namespaces/{}/pods/web", ns.name);
    eventually(SOON, "k8sailor serves the objects", || async {
        let (status, _, _) = server.request("GET", &path, &[]).await;
        let (cm, _, _) = server
            .request(
                "GET",
                &format!(
                    "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/roles/reader",
                    ns.name
                ),
                &[],
            )
            .await;
        (status == 200 && cm == 200).then_some(())
    })
    .await;
    Setup {
        ns,
        server,
        apiserver,
        k8sailor,
    }
}

impl Setup {
    /// Runs `args` with both and asserts they print the same (ages aside); the output.
    fn same(&self, args: &[&str]) -> String {
        let (ok_a, out_a, err_a) = self.apiserver.run(args);
        let (ok_k, out_k, err_k) = self.k8sailor.run(args);
        assert!(ok_a, "kubectl {args:?} against the apiserver: {err_a}");
        assert!(ok_k, "kubectl {args:?} against k8sailor: {err_k}");
        assert_eq!(
            normalized(&out_k),
            normalized(&out_a),
            "kubectl {args:?}\nk8sailor:\n{out_k}\napiserver:\n{out_a}"
        );
        out_k
    }
}

/// Runs `args` with both until they print the same (ages aside; a controller may still be
/// writing a status, or k8sailor's cache catching up with it); the output. A difference is
/// logged each time it changes, so a failure shows the last one.
async fn agree(apiserver: &Kubectl, k8sailor: &Kubectl, args: &[&str]) -> String {
    agree_by(apiserver, k8sailor, args, |out| {
        format!("{:?}", normalized(out))
    })
    .await
}

/// As [`agree`], comparing what `view` makes of each output.
async fn agree_by(
    apiserver: &Kubectl,
    k8sailor: &Kubectl,
    args: &[&str],
    view: impl Fn(&str) -> String,
) -> String {
    let mut last = String::new();
    let what = format!(
        "kubectl {args:?} to print the same against both (the last difference is logged above)"
    );
    eventually(SOON, &what, || {
        let (ok_a, out_a, err_a) = apiserver.run(args);
        let (ok_k, out_k, err_k) = k8sailor.run(args);
        let (a, k) = (view(&out_a), view(&out_k));
        let same = ok_a && ok_k && a == k;
        let difference = format!(
            "kubectl {args:?}\nk8sailor ({ok_k}):\n{out_k}{err_k}\napiserver ({ok_a}):\n{out_a}{err_a}"
        );
        if !same && difference != last {
            eprintln!("{difference}");
            last = difference;
        }
        std::future::ready(same.then_some(out_k))
    })
    .await
    .0
}

/// A `kubectl get -w` running, its lines read by a thread of its own; killed when dropped.
struct KubectlWatch {
    child: Child,
    lines: Receiver<String>,
    args: Vec<String>,
}

impl KubectlWatch {
    fn start(kubectl: &Kubectl, args: &[&str]) -> KubectlWatch {
        let mut child = kubectl
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        KubectlWatch {
            child,
            lines,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The next line `wanted` accepts; a panic naming `what` if none comes.
    fn next(&self, what: &str, wanted: impl Fn(&[&str]) -> bool) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if wanted(&line.split_whitespace().collect::<Vec<_>>()) => return line,
                Ok(_) => continue,
                Err(e) => panic!("kubectl {:?}: no line with {what}: {e}", self.args),
            }
        }
    }
}

impl Drop for KubectlWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn kubectl_get_prints_what_it_prints_against_the_apiserver() {
    let s = setup("kubeapi-get").await;
    let ns = s.ns.name.as_str();
    let kinds = "pods,configmaps,roles,serviceaccounts";
    let out = s.same(&["get", kinds, "-n", ns]);
    assert!(
        out.contains("cm-b") && out.contains("pod/web") && out.contains("role.rbac"),
        "{out}"
    );
    s.same(&["get", kinds, "-n", ns, "-o", "wide"]);
    s.same(&["get", "configmaps", "-n", ns, "--show-labels"]);
    let out = s.same(&["get", "configmaps,roles,pods", "-n", ns, "-l", "app=a"]);
    assert!(!out.contains("cm-b") && out.contains("cm-c"), "{out}");
    let out = s.same(&[
        "get",
        "configmaps",
        "-n",
        ns,
        "--field-selector",
        "metadata.name=cm-b",
    ]);
    assert!(out.contains("cm-b") && !out.contains("cm-a"), "{out}");
    let selector = format!("e2e-kubeapi={ns}");
    let out = s.same(&["get", "configmaps", "-A", "-l", &selector]);
    assert!(out.contains(ns), "{out}");
    s.same(&[
        "get",
        "configmaps",
        "-A",
        "-l",
        &selector,
        "--chunk-size",
        "1",
    ]);
    s.same(&["get", "configmap", "cm-a", "-n", ns]);
    s.same(&["get", "configmap", "cm-a", "-n", ns, "-o", "wide"]);
    s.same(&["get", "pods", "-n", ns, "-o", "wide"]);
    s.same(&["get", "namespace", ns]);
    s.same(&["get", "configmaps", "-n", "e2e-kubeapi-no-such-namespace"]);
}

#[tokio::test]
async fn objects_are_the_apiservers_managed_fields_aside() {
    let s = setup("kubeapi-json").await;
    let ns = s.ns.name.as_str();
    for args in [
        &["get", "configmaps,roles,pods", "-n", ns, "-o", "json"][..],
        &["get", "configmap", "cm-a", "-n", ns, "-o", "json"],
        &["get", "namespace", ns, "-o", "json"],
        &[
            "get",
            "configmaps",
            "-n",
            ns,
            "-o",
            "json",
            "--chunk-size",
            "1",
        ],
    ] {
        let (_, a, err_a) = s.apiserver.run(args);
        let (_, k, err_k) = s.k8sailor.run(args);
        let (a, k) = (objects(&a), objects(&k));
        assert!(!a.is_empty(), "{err_a}");
        assert_eq!(k, a, "kubectl {args:?}: {err_k}");
    }
    // The raw list: the apiserver's items (no kind or apiVersion on them), its List kind.
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let (_, a, _) = s.apiserver.run(&["get", "--raw", &path]);
    let (_, k, err) = s.k8sailor.run(&["get", "--raw", &path]);
    let (a, k): (Value, Value) = (
        serde_json::from_str(&a).unwrap(),
        serde_json::from_str(&k).unwrap_or_else(|e| panic!("{e}: {k} {err}")),
    );
    assert_eq!(
        (&k["kind"], &k["apiVersion"]),
        (&a["kind"], &a["apiVersion"])
    );
    assert_eq!(objects(&k.to_string()), objects(&a.to_string()));

    // A Pod kwok runs: its conditions carry the apiserver's `lastProbeTime: null`, which the
    // typed Pods' cache keeps as sent.
    let ran: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ran"},
        "spec": {"nodeName": "demo-node-1",
            "containers": [{"name": "c", "image": "registry.invalid/ran:1"}]},
    }))
    .unwrap();
    s.ns.api::<Pod>()
        .create(&PostParams::default(), &ran)
        .await
        .unwrap();
    let pods = s.ns.api::<Pod>();
    eventually(SOON, "kwok runs the pod", || async {
        let pod = pods.get("ran").await.ok()?;
        let conditions = pod.status?.conditions?;
        (!conditions.is_empty()).then_some(())
    })
    .await;
    let args = ["get", "pod", "ran", "-n", ns, "-o", "json"];
    let out = agree_by(&s.apiserver, &s.k8sailor, &args, |out| {
        serde_json::from_str::<Value>(out)
            .map(|_| format!("{:?}", objects(out)))
            .unwrap_or_else(|e| format!("not JSON: {e}"))
    })
    .await;
    let pod = &objects(&out)[0];
    assert!(has_null(&pod["status"]["conditions"]), "{pod}");
}

#[tokio::test]
async fn errors_are_the_apiservers() {
    let s = setup("kubeapi-errors").await;
    let ns = s.ns.name.as_str();
    for args in [
        &["get", "configmap", "nope", "-n", ns][..],
        &["get", "roles.rbac.authorization.k8s.io", "nope", "-n", ns],
        &[
            "get",
            "configmaps",
            "-n",
            ns,
            "--field-selector",
            "data.key=x",
        ],
        &["get", "configmaps", "-n", ns, "-l", "a in (b"],
    ] {
        let (ok_a, _, err_a) = s.apiserver.run(args);
        let (ok_k, _, err_k) = s.k8sailor.run(args);
        assert!(!ok_a && !ok_k, "kubectl {args:?}");
        let first = |e: &str| {
            e.lines()
                .next()
                .unwrap_or_default()
                .split(':')
                .next()
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(
            first(&err_k),
            first(&err_a),
            "kubectl {args:?}\n{err_k}\n{err_a}"
        );
    }
    for args in [
        &["get", "configmap", "nope", "-n", ns][..],
        &["get", "roles.rbac.authorization.k8s.io", "nope", "-n", ns],
    ] {
        let (_, _, err_a) = s.apiserver.run(args);
        let (_, _, err_k) = s.k8sailor.run(args);
        assert_eq!(err_k, err_a, "kubectl {args:?}");
    }
    let (_, _, err) = s.k8sailor.run(&["get", "configmap", "nope", "-n", ns]);
    assert!(
        err.contains("(NotFound): configmaps \"nope\" not found"),
        "{err}"
    );
    // A watch from a version older than the history: the apiserver's 410 event.
    let (status, _, body) = s
        .server
        .request(
            "GET",
            &format!(
                "/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=1&timeoutSeconds=5"
            ),
            &[],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let event: Value = serde_json::from_str(body.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(event["type"], "ERROR", "{body}");
    assert_eq!(event["object"]["code"], 410, "{body}");
    assert_eq!(event["object"]["reason"], "Expired", "{body}");
}

#[tokio::test]
async fn api_resources_lists_exactly_what_is_served_as_the_apiserver_does() {
    let s = setup("kubeapi-discovery").await;
    // Other tests' CRDs come and go meanwhile, each in the apiserver's discovery and in
    // k8sailor's a moment apart: until every row of ours is the apiserver's.
    let ours = eventually_shown(
        SOON,
        "k8sailor's api-resources among the apiserver's",
        || {
            let (ok, ours, err) = s.k8sailor.run(&["api-resources", "--no-headers"]);
            assert!(ok, "{err}");
            let (ok, theirs, err) = s.apiserver.run(&["api-resources", "--no-headers"]);
            assert!(ok, "{err}");
            let (ours, theirs) = (normalized(&ours), normalized(&theirs));
            let not_theirs: Vec<&Vec<String>> =
                ours.iter().filter(|row| !theirs.contains(row)).collect();
            let answer = if not_theirs.is_empty() {
                Ok(ours)
            } else {
                Err(format!("not the apiserver's: {not_theirs:?}"))
            };
            std::future::ready(answer)
        },
    )
    .await;
    let names: Vec<&str> = ours.iter().map(|row| row[0].as_str()).collect();
    for served in [
        "configmaps",
        "pods",
        "namespaces",
        "roles",
        "statefulsets",
        "nodes",
        "customresourcedefinitions",
    ] {
        assert!(names.contains(&served), "{served} in {names:?}");
    }
    // Secrets are kept as their metadata alone: their objects would not be the apiserver's.
    assert!(!names.contains(&"secrets"), "{names:?}");
    // The version is the apiserver's.
    let (_, a, _) = s.apiserver.run(&["version", "-o", "json"]);
    let (_, k, _) = s.k8sailor.run(&["version", "-o", "json"]);
    let server_version =
        |v: &str| serde_json::from_str::<Value>(v).unwrap()["serverVersion"].clone();
    assert_eq!(server_version(&k), server_version(&a));
}

#[tokio::test]
async fn kubectl_get_watch_sees_a_change() {
    let s = setup("kubeapi-watch").await;
    let ns = s.ns.name.clone();
    let watch = KubectlWatch::start(
        &s.k8sailor,
        &[
            "get",
            "configmaps",
            "-n",
            &ns,
            "-w",
            "--output-watch-events",
        ],
    );
    watch.next("cm-c", |tokens| tokens.contains(&"cm-c"));
    let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
    s.ns.api::<ConfigMap>()
        .patch("cm-b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let line = watch.next("MODIFIED", |tokens| tokens.first() == Some(&"MODIFIED"));
    assert!(line.contains("cm-b"), "{line}");
}

/// A pod of about 50 KB (an annotation of its own): three make a namespace's list larger than
/// k8sailor keeps answers from (128 KiB).
fn large_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": "large"},
            "annotations": {"e2e.k8sailor.io/filler": "x".repeat(50_000)},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/large:1"}]},
    }))
    .unwrap()
}

/// k8sailor's counts of lists answered with a kept answer, and of lists built: (hits, misses).
async fn kept_answer_counts(server: &Server) -> (u64, u64) {
    let (status, text) = server.probe("/metrics").await;
    assert_eq!(status, 200, "{text}");
    let count = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    };
    (
        count("k8sailor_kube_answers_hits_total "),
        count("k8sailor_kube_answers_misses_total "),
    )
}

/// A gzip body inflated.
fn inflated(gzipped: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("not gzip of UTF-8: {e}"));
    text
}

/// k8sailor's answer to `path` asked as kubectl asks (`Accept-Encoding: gzip`), as sent:
/// its `Content-Encoding` and body.
async fn gzip_answer_of_k8sailor(server: &Server, path: &str) -> (Option<String>, Vec<u8>) {
    let response = server
        .http
        .get(format!("{}{path}", server.root()))
        .header("Accept", "application/json")
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .expect("k8sailor answers");
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let coding = response
        .headers()
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_string());
    (coding, response.bytes().await.unwrap().to_vec())
}

/// The apiserver's answer to `path` asked the same way, as sent.
async fn gzip_answer_of_apiserver(path: &str) -> (Option<String>, Vec<u8>) {
    use http_body_util::BodyExt;
    let client = cluster().client().await;
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::ACCEPT_ENCODING, "gzip")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let response = client.send(request).await.expect("the apiserver answers");
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let coding = response
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (coding, body.to_vec())
}

/// A large list is kept and sent again to the next caller asking the same, until the kind
/// changes: then the next answer shows the change, never the kept one. Its gzip, as kubectl
/// asks, holds the apiserver's objects, and kubectl's `get pods -A -o json` through k8sailor
/// is still the apiserver's.
#[tokio::test]
async fn a_kept_list_is_sent_again_until_its_kind_changes() {
    let s = setup("kubeapi-kept").await;
    let ns = s.ns.name.as_str();
    let pods = s.ns.api::<Pod>();
    for name in ["large-a", "large-b", "large-c"] {
        pods.create(&PostParams::default(), &large_pod(name))
            .await
            .unwrap();
    }
    // Scoped to the test's namespace, so that no other test's pods change its pod cache.
    let scoped = Server::start(&["--auth", "none", "--namespace", ns]);
    let path = format!("/api/v1/namespaces/{ns}/pods");
    let json_accepted = [("Accept", "application/json")];
    eventually(SOON, "k8sailor lists the four pods", || async {
        let (status, _, body) = scoped.request("GET", &path, &json_accepted).await;
        (status == 200 && objects(&body).len() == 4).then_some(())
    })
    .await;
    // Asked twice, the same answer, the second sent again (a bookmark may move the cache's
    // version between two asks: then they are asked again).
    let (kept, _) = eventually(SOON, "the list sent again", || async {
        let (hits, _) = kept_answer_counts(&scoped).await;
        let (_, _, first) = scoped.request("GET", &path, &json_accepted).await;
        let (_, _, second) = scoped.request("GET", &path, &json_accepted).await;
        let (hits_after, _) = kept_answer_counts(&scoped).await;
        (second == first && hits_after > hits).then_some(first)
    })
    .await;
    assert!(kept.len() >= 128 * 1024, "{} bytes: not kept", kept.len());

    let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
    let patched = pods
        .patch("large-b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let version = patched.metadata.resource_version.unwrap();
    let one = format!("{path}/large-b");
    eventually(SOON, "k8sailor's cache shows the change", || async {
        let (_, _, body) = scoped.request("GET", &one, &json_accepted).await;
        let pod: Value = serde_json::from_str(&body).ok()?;
        (pod["metadata"]["resourceVersion"] == version.as_str()).then_some(())
    })
    .await;
    let (_, misses) = kept_answer_counts(&scoped).await;
    let (status, _, after) = scoped.request("GET", &path, &json_accepted).await;
    assert_eq!(status, 200, "{after}");
    let changed = objects(&after)
        .into_iter()
        .find(|pod| pod["metadata"]["name"] == "large-b")
        .expect("large-b listed");
    assert_eq!(
        changed["metadata"]["labels"]["changed"], "yes",
        "the list sent after the change is the one kept before it"
    );
    assert!(
        kept_answer_counts(&scoped).await.1 > misses,
        "not built anew"
    );

    // As kubectl asks: gzip, made once and sent again, holding the apiserver's objects.
    let (coding, ours) = gzip_answer_of_k8sailor(&scoped, &path).await;
    assert_eq!(coding.as_deref(), Some("gzip"));
    let (coding, theirs) = gzip_answer_of_apiserver(&path).await;
    assert_eq!(
        coding.as_deref(),
        Some("gzip"),
        "the apiserver gzips answers over 128 KiB"
    );
    let (ours, theirs) = (inflated(&ours), inflated(&theirs));
    assert_eq!(objects(&ours), objects(&theirs));
    assert_eq!(objects(&ours), objects(&after));
    let (_, again) = gzip_answer_of_k8sailor(&scoped, &path).await;
    assert_eq!(objects(&inflated(&again)), objects(&ours));

    // kubectl's own full LIST (pages of 500, gzip) through a k8sailor of the whole cluster.
    agree_by(
        &s.apiserver,
        &s.k8sailor,
        &["get", "pods", "-A", "-o", "json"],
        |out| {
            serde_json::from_str::<Value>(out)
                .map(|_| format!("{:?}", objects(out)))
                .unwrap_or_else(|e| format!("not JSON: {e}"))
        },
    )
    .await;
}

/// Whether a printed row names the object `name`: in its NAME column, or (an Event's, which
/// has none) in its OBJECT column, `pod/x` (the fixture's Events are about a Pod of their
/// name).
fn names(row: &[&str], name: &str) -> bool {
    row.iter()
        .any(|cell| *cell == name || cell.strip_suffix(name).is_some_and(|k| k.ends_with('/')))
}

/// One kind `/resources` serves, with its fixture: how kubectl names it unambiguously
/// (`deployments.apps`; a core kind by its plural) and the apiserver's API of it.
struct ServedKind {
    fixture: &'static Fixture,
    kubectl_name: String,
    /// As the apiserver's discovery lists it.
    plural: String,
    api_version: String,
    namespaced: bool,
    api: Api<DynamicObject>,
}

impl ServedKind {
    /// `kind/name` of its selected object, as kubectl takes it.
    fn selected(&self, ns: &str) -> String {
        format!(
            "{}/{}",
            self.kubectl_name,
            (self.fixture.name)(ns, Which::Selected)
        )
    }
}

/// Every kind `/resources` serves but Secrets (kept as metadata alone, which the Kubernetes
/// API does not serve) must have a fixture and print through kubectl as the apiserver
/// prints it: a kind served without a comparison fails here.
#[tokio::test]
async fn every_served_kind_prints_as_the_apiserver_prints_it() {
    let ns = TestNamespace::new("kubeapi-kinds").await;
    let dir = repo()
        .join("target")
        .join(format!("e2e-kubeapi-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    let server = Server::start(&["--auth", "none", "--resources", "*,secrets"]);
    let apiserver = Kubectl::for_apiserver(&dir);
    let k8sailor = Kubectl::for_k8sailor(&dir, &server);
    let (status, all) = server.get("/resources").await;
    assert_eq!(status, 200, "{all}");
    let run = format!("e2e-kubeapi={}", ns.name);
    let mut leftovers = Leftovers::default();
    let mut kinds = Vec::new();
    for served in all["data"].as_array().unwrap() {
        let name = served["name"].as_str().unwrap();
        if served["builtIn"] == false {
            continue;
        }
        let fixture = FIXTURES
            .iter()
            .find(|f| f.resource == name)
            .unwrap_or_else(|| panic!("{name} is served without a fixture to compare it by"));
        if name == "secrets" {
            continue;
        }
        let (resource, namespaced, api) = apiserver_api(&ns, served);
        for which in [Which::Selected, Which::Other] {
            let name = (fixture.name)(&ns.name, which);
            if !namespaced {
                leftovers.0.push((resource.clone(), name.clone()));
            }
            let mut manifest = (fixture.object)(&name, which, &ns.name);
            manifest["metadata"]["labels"] = json!({"e2e-kubeapi": ns.name});
            if which == Which::Selected {
                manifest["metadata"]["labels"]["selected"] = json!("yes");
            }
            let object: DynamicObject = serde_json::from_value(manifest).unwrap();
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create {} {name}: {e}", fixture.resource));
        }
        let (group, plural) = (
            served["group"].as_str().unwrap(),
            served["plural"].as_str().unwrap(),
        );
        kinds.push(ServedKind {
            fixture,
            kubectl_name: if group.is_empty() {
                plural.to_string()
            } else {
                format!("{plural}.{group}")
            },
            plural: plural.to_string(),
            api_version: resource.api_version.clone(),
            namespaced,
            api,
        });
    }
    assert!(
        kinds.iter().any(|k| k.fixture.resource == "deployments") && kinds.len() > 20,
        "the built-in kinds are served: {all}"
    );

    let (ok, discovered, err) = k8sailor.run(&["api-resources", "--no-headers"]);
    assert!(ok, "{err}");
    // Each row: its name (the plural) first, its group/version among the rest.
    let discovered = normalized(&discovered);
    assert!(
        !discovered.iter().any(|row| row[0] == "secrets"),
        "{discovered:?}"
    );
    for kind in &kinds {
        assert!(
            discovered
                .iter()
                .any(|row| row[0] == kind.plural && row.contains(&kind.api_version)),
            "{} ({}) in {discovered:?}",
            kind.fixture.resource,
            kind.api_version
        );
    }

    let ns = ns.name.as_str();
    let selected = format!("{run},selected");
    for namespaced in [true, false] {
        let kinds: Vec<&ServedKind> = kinds
            .iter()
            .filter(|k| k.namespaced == namespaced)
            .collect();
        let list = kinds
            .iter()
            .map(|k| k.kubectl_name.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let scope: &[&str] = if namespaced { &["-n", ns] } else { &[] };
        let get = |rest: &[&str]| -> Vec<String> {
            ["get", list.as_str()]
                .iter()
                .chain(scope)
                .chain(rest)
                .map(|a| a.to_string())
                .collect()
        };
        let mut commands = vec![
            get(&["-l", run.as_str()]),
            get(&["-l", run.as_str(), "-o", "wide"]),
            get(&["-l", run.as_str(), "--show-labels"]),
            get(&["-l", selected.as_str()]),
            get(&["-l", run.as_str(), "--chunk-size", "1"]),
        ];
        if namespaced {
            commands.push(vec![
                "get".into(),
                list.clone(),
                "-A".into(),
                "-l".into(),
                run.clone(),
            ]);
        }
        // The selected objects' names differ by kind (a CRD's is its plural and group).
        let mut by_name: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
        for kind in &kinds {
            by_name
                .entry((kind.fixture.name)(ns, Which::Selected))
                .or_default()
                .push(&kind.kubectl_name);
        }
        for (name, names) in &by_name {
            let mut command: Vec<String> = vec!["get".into(), names.join(",")];
            command.extend(scope.iter().map(|a| a.to_string()));
            command.extend(["-l".into(), run.clone()]);
            command.extend(["--field-selector".into(), format!("metadata.name={name}")]);
            commands.push(command);
        }
        let objects_of: Vec<String> = kinds.iter().map(|k| k.selected(ns)).collect();
        let mut one_each: Vec<String> = vec!["get".into()];
        one_each.extend(objects_of);
        one_each.extend(scope.iter().map(|a| a.to_string()));
        commands.push(one_each.clone());
        for command in &commands {
            let args: Vec<&str> = command.iter().map(String::as_str).collect();
            let out = agree(&apiserver, &k8sailor, &args).await;
            for kind in &kinds {
                assert!(
                    out.contains(&format!("/{}", (kind.fixture.name)(ns, Which::Selected)))
                        || !args.contains(&list.as_str()),
                    "kubectl {args:?}: {} printed\n{out}",
                    kind.fixture.resource
                );
            }
        }
        // Objects equal, managedFields aside: of a list, paged, and one by one.
        let mut json_commands = vec![
            get(&["-l", run.as_str(), "-o", "json"]),
            get(&["-l", run.as_str(), "-o", "json", "--chunk-size", "1"]),
        ];
        let mut one_each_json = one_each;
        one_each_json.extend(["-o".into(), "json".into()]);
        json_commands.push(one_each_json);
        for command in &json_commands {
            let args: Vec<&str> = command.iter().map(String::as_str).collect();
            let out = agree_by(&apiserver, &k8sailor, &args, |out| {
                serde_json::from_str::<Value>(out)
                    .map(|_| format!("{:?}", objects(out)))
                    .unwrap_or_else(|e| format!("not JSON: {e}"))
            })
            .await;
            let objects = objects(&out);
            // The Events' `eventTime` at least: the comparison holds explicit nulls.
            assert!(
                !namespaced || objects.iter().any(has_null),
                "kubectl {args:?}: no explicit null to compare"
            );
            for kind in &kinds {
                let name = (kind.fixture.name)(ns, Which::Selected);
                assert!(
                    objects
                        .iter()
                        .any(|o| o["metadata"]["name"] == name.as_str()
                            && o["metadata"]["labels"]["selected"] == "yes"),
                    "kubectl {args:?}: {} {name} among the objects",
                    kind.fixture.resource
                );
            }
        }
    }

    // `get -w` of each kind sees its object change.
    let watches: Vec<KubectlWatch> = kinds
        .iter()
        .map(|kind| {
            let mut args = vec![
                "get",
                kind.kubectl_name.as_str(),
                "-l",
                selected.as_str(),
                "-w",
                "--output-watch-events",
                "-L",
                "changed",
            ];
            if kind.namespaced {
                args.extend(["-n", ns]);
            }
            KubectlWatch::start(&k8sailor, &args)
        })
        .collect();
    let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
    for (kind, watch) in kinds.iter().zip(&watches) {
        let name = (kind.fixture.name)(ns, Which::Selected);
        watch.next(
            &format!("{} {name} added", kind.fixture.resource),
            |tokens| tokens.first() == Some(&"ADDED") && names(tokens, &name),
        );
        kind.api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", kind.fixture.resource));
    }
    for (kind, watch) in kinds.iter().zip(&watches) {
        let name = (kind.fixture.name)(ns, Which::Selected);
        watch.next(
            &format!(
                "{} {name} modified with its new label",
                kind.fixture.resource
            ),
            |tokens| {
                tokens.first() == Some(&"MODIFIED")
                    && names(tokens, &name)
                    && tokens.last() == Some(&"yes")
            },
        );
    }
    drop(leftovers);
}

/// Events of both APIs (one object, two shapes) and Endpoints (deprecated, served with the
/// apiserver's warning), through kubectl as against the apiserver: tables, `-o wide`,
/// `-o json`, each API's own field selectors, the one the new API does not take, short
/// names, and the warning kubectl prints. The test's Events are about a pod that does not
/// exist, so the scheduler's own Events (about the setup's pod) select apart from them.
#[tokio::test]
async fn events_of_both_apis_and_endpoints_are_the_apiservers() {
    use k8s_openapi::api::core::v1::{Endpoints, Event};
    use k8s_openapi::api::events::v1::Event as NewEvent;
    let s = setup("kubeapi-events").await;
    let ns = s.ns.name.as_str();
    let pp = PostParams::default();
    let core: Event = serde_json::from_value(json!({
        "metadata": {"name": "core-ev"},
        "involvedObject": {"kind": "Pod", "name": "ghost", "namespace": ns,
            "fieldPath": "spec.containers{c}"},
        "reason": "E2eStarted", "type": "Normal", "message": "started c",
        "source": {"component": "e2e-kubelet", "host": "node-1"}, "count": 2,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z",
    }))
    .unwrap();
    s.ns.api::<Event>().create(&pp, &core).await.unwrap();
    let new: NewEvent = serde_json::from_value(json!({
        "metadata": {"name": "new-ev"},
        "regarding": {"kind": "Pod", "name": "ghost", "namespace": ns},
        "reason": "E2eFailed", "type": "Warning", "note": "failed c", "action": "Start",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "e2e.example.com/ctl", "reportingInstance": "i-1",
        "series": {"count": 3, "lastObservedTime": "2026-01-01T00:09:00.000000Z"},
    }))
    .unwrap();
    s.ns.api::<NewEvent>().create(&pp, &new).await.unwrap();
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "ep-a", "labels": {"app": "a"}},
        "subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}],
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}],
    }))
    .unwrap();
    s.ns.api::<Endpoints>()
        .create(&pp, &endpoints)
        .await
        .unwrap();
    let paths = [
        format!("/api/v1/namespaces/{ns}/events/core-ev"),
        format!("/api/v1/namespaces/{ns}/events/new-ev"),
        format!("/apis/events.k8s.io/v1/namespaces/{ns}/events/core-ev"),
        format!("/apis/events.k8s.io/v1/namespaces/{ns}/events/new-ev"),
        format!("/api/v1/namespaces/{ns}/endpoints/ep-a"),
    ];
    eventually(SOON, "k8sailor serves the Events and Endpoints", || async {
        for path in &paths {
            let (status, _, _) = s.server.request("GET", path, &[]).await;
            if status != 200 {
                return None;
            }
        }
        Some(())
    })
    .await;

    // The scheduler may still be writing Events of its own: until both agree.
    let json_view = |out: &str| {
        serde_json::from_str::<Value>(out)
            .map(|_| format!("{:?}", objects(out)))
            .unwrap_or_else(|e| format!("not JSON: {e}"))
    };
    for kind in ["events", "events.events.k8s.io", "ev", "endpoints", "ep"] {
        let out = agree(&s.apiserver, &s.k8sailor, &["get", kind, "-n", ns]).await;
        assert!(
            out.contains("ep-a") || out.contains("pod/ghost"),
            "{kind}: {out}"
        );
        agree(
            &s.apiserver,
            &s.k8sailor,
            &["get", kind, "-n", ns, "-o", "wide"],
        )
        .await;
        let args = ["get", kind, "-n", ns, "-o", "json"];
        let out = agree_by(&s.apiserver, &s.k8sailor, &args, json_view).await;
        assert!(!objects(&out).is_empty(), "kubectl {args:?}: {out}");
    }
    let out = s.same(&[
        "get",
        "events.events.k8s.io",
        "new-ev",
        "-n",
        ns,
        "-o",
        "wide",
    ]);
    assert!(out.contains("e2e.example.com/ctl, i-1"), "{out}");
    let out = s.same(&["get", "events", "core-ev", "-n", ns, "-o", "wide"]);
    assert!(out.contains("e2e-kubelet, node-1"), "{out}");

    // Each API's own field names, as the apiserver maps them.
    for (kind, selector, expected) in [
        (
            "events.events.k8s.io",
            "regarding.name=ghost",
            &["core-ev", "new-ev"][..],
        ),
        ("events.events.k8s.io", "reason=E2eFailed", &["new-ev"]),
        (
            "events.events.k8s.io",
            "reportingController=e2e.example.com/ctl",
            &["new-ev"],
        ),
        ("events", "source=e2e-kubelet", &["core-ev"]),
        (
            "events.events.k8s.io",
            "type=Normal,regarding.name=ghost",
            &["core-ev"],
        ),
        (
            "events",
            "involvedObject.name=ghost,reason=E2eFailed",
            &["new-ev"],
        ),
        (
            "events",
            "reportingComponent=e2e.example.com/ctl",
            &["new-ev"],
        ),
        ("endpoints", "metadata.name=ep-a", &["ep-a"]),
    ] {
        let args = [
            "get",
            kind,
            "-n",
            ns,
            "--field-selector",
            selector,
            "-o",
            "custom-columns=NAME:.metadata.name",
            "--no-headers",
        ];
        let out = s.same(&args);
        let names: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(names, expected, "kubectl {args:?}");
    }
    // A field of the core API that the new one does not take, and the reverse, and one
    // Endpoints do not have: the apiserver's 400.
    for (kind, selector) in [
        ("events.events.k8s.io", "involvedObject.name=ghost"),
        ("events.events.k8s.io", "source=e2e-kubelet"),
        ("events", "regarding.name=ghost"),
        ("endpoints", "subsets=x"),
    ] {
        let args = ["get", kind, "-n", ns, "--field-selector", selector];
        let (ok_a, _, err_a) = s.apiserver.run(&args);
        let (ok_k, _, err_k) = s.k8sailor.run(&args);
        assert!(!ok_a && !ok_k, "kubectl {args:?}: {err_k}");
        assert!(
            err_a.contains("(BadRequest)") && err_k.contains("(BadRequest)"),
            "kubectl {args:?}\n{err_k}\n{err_a}"
        );
    }

    // Every answer about Endpoints carries the apiserver's warning, which kubectl prints.
    let warnings = |err: &str| -> Vec<String> {
        err.lines()
            .filter(|l| l.starts_with("Warning:"))
            .map(str::to_string)
            .collect()
    };
    for args in [
        &["get", "endpoints", "-n", ns][..],
        &["get", "endpoints", "ep-a", "-n", ns, "-o", "json"],
        &["get", "endpoints", "none-such", "-n", ns],
    ] {
        let (_, _, err_a) = s.apiserver.run(args);
        let (_, _, err_k) = s.k8sailor.run(args);
        assert_eq!(warnings(&err_k), warnings(&err_a), "kubectl {args:?}");
        assert_eq!(
            warnings(&err_k),
            [
                "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
            ],
            "kubectl {args:?}: {err_k}"
        );
    }
    let (_, _, err) = s.k8sailor.run(&["get", "endpointslices", "-n", ns]);
    assert!(warnings(&err).is_empty(), "{err}");
}

/// `--auth none --namespace`: k8sailor's answer to `kubectl auth can-i` is what a caller
/// allowed to read in that namespace alone hears from the apiserver: reads there, nothing in
/// another namespace, across namespaces, of a cluster-scoped kind, nor any write.
#[tokio::test]
async fn scoped_to_a_namespace_can_i_is_what_the_apiserver_says_of_a_reader_there() {
    use k8s_openapi::api::rbac::v1::PolicyRule;
    let ns = TestNamespace::new("kubeapi-scoped").await;
    let dir = repo()
        .join("target")
        .join(format!("e2e-kubeapi-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    let reader = crate::access::account(&ns, "reader").await;
    let rule = PolicyRule {
        api_groups: Some(vec![String::new(), "apps".into()]),
        resources: Some(vec![
            "pods".into(),
            "configmaps".into(),
            "deployments".into(),
        ]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..PolicyRule::default()
    };
    crate::access::grant(&ns, &ns, &reader, vec![rule]).await;
    let server = Server::start(&["--auth", "none", "--namespace", &ns.name]);
    let k8sailor = Kubectl::for_k8sailor(&dir, &server);
    let apiserver = Kubectl::for_apiserver_as(&dir, "reader", &reader.token);
    let n = ns.name.as_str();
    for (args, allowed) in [
        (&["list", "pods", "-n", n][..], true),
        (&["watch", "configmaps", "-n", n], true),
        (&["get", "deployments.apps", "-n", n], true),
        (&["list", "pods", "-n", "default"], false),
        (&["get", "configmaps", "-n", "kube-system"], false),
        (&["list", "pods", "-A"], false),
        (&["watch", "deployments.apps", "-A"], false),
        (&["list", "nodes"], false),
        (&["get", "namespaces"], false),
        (&["create", "pods", "-n", n], false),
    ] {
        let mut command = vec!["auth", "can-i"];
        command.extend(args);
        // The apiserver's RBAC may take a moment to see the new binding.
        let what = format!("kubectl {command:?}: the apiserver says {allowed}");
        eventually(SOON, &what, || {
            let (yes, _, _) = apiserver.run(&command);
            std::future::ready((yes == allowed).then_some(()))
        })
        .await;
        let (yes, out, err) = k8sailor.run(&command);
        assert_eq!(
            yes, allowed,
            "kubectl {command:?} against k8sailor: {out}{err}"
        );
        let answer = out.split_whitespace().next().unwrap_or_default();
        assert_eq!(answer, if allowed { "yes" } else { "no" }, "{out}{err}");
    }
}
