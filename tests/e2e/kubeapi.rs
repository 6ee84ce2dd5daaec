//! The Kubernetes API served from memory: the real kubectl (v1.35.4, built by hack/cluster)
//! pointed at k8sailor and at the apiserver must print the same thing for the same command:
//! `get` of several kinds in one namespace and across namespaces, `-o wide`, `-o json`
//! (objects equal, managedFields aside), selectors, `--chunk-size`, `api-resources`, errors,
//! and `get -w` sees a change.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::deploy::kubectl;
use crate::support::{SOON, Server, TestNamespace, cluster, eventually, repo};

/// A kubeconfig for `server` (no credentials: `--auth none`) and a kubectl cache of its own,
/// so no discovery cached for another server is read.
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

    fn for_k8sailor(dir: &Path, server: &Server) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig-k8sailor");
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "k8sailor", "cluster": {"server": server.root()}}],
            "contexts": [{"name": "k8sailor", "context": {"cluster": "k8sailor", "user": "anonymous"}}],
            "users": [{"name": "anonymous", "user": {}}],
            "current-context": "k8sailor",
        });
        std::fs::write(&kubeconfig, config.to_string()).unwrap();
        Kubectl {
            kubeconfig,
            cache: dir.join("cache-k8sailor"),
        }
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

/// The objects of a `-o json` answer (a List or one object), managedFields aside.
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

struct Setup {
    ns: TestNamespace,
    server: Server,
    apiserver: Kubectl,
    k8sailor: Kubectl,
}

async fn setup(test: &str) -> Setup {
    let ns = TestNamespace::new(test).await;
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
    let (ok, ours, err) = s.k8sailor.run(&["api-resources", "--no-headers"]);
    assert!(ok, "{err}");
    let (ok, theirs, err) = s.apiserver.run(&["api-resources", "--no-headers"]);
    assert!(ok, "{err}");
    let theirs = normalized(&theirs);
    let ours = normalized(&ours);
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
    // Kinds whose whole object is not kept are not served (yet).
    for unserved in ["secrets", "deployments", "services"] {
        assert!(!names.contains(&unserved), "{unserved} in {names:?}");
    }
    for row in &ours {
        assert!(theirs.contains(row), "{row:?} is not the apiserver's");
    }
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
    let mut child = s
        .k8sailor
        .command(&[
            "get",
            "configmaps",
            "-n",
            &ns,
            "-w",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> String {
        loop {
            match lines_rx.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if line.contains(what) => return line,
                Ok(_) => continue,
                Err(e) => panic!("no line with {what:?}: {e}"),
            }
        }
    };
    next("cm-c");
    let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
    s.ns.api::<ConfigMap>()
        .patch("cm-b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let line = next("MODIFIED");
    assert!(line.contains("cm-b"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
}
