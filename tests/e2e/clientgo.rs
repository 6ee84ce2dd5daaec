//! client-go's informers (tests/clientgo: typed Pods and ConfigMaps, metadata-only
//! ConfigMaps) pointed at k8sailor must end with exactly the objects, at exactly the
//! versions, that the same informers pointed at the apiserver hold: with WatchList (client-go
//! 1.35's default) and without, while objects change, and after k8sailor restarts under them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{
    Server, TestNamespace, anonymous_kubeconfig, cluster, eventually_shown, pod, repo,
};

/// The informer program hack/test builds (tests/clientgo).
fn program() -> PathBuf {
    std::env::var_os("K8SAILOR_TEST_CLIENTGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "K8SAILOR_TEST_CLIENTGO is not set: hack/test builds tests/clientgo and sets it \
                 (or: cd tests/clientgo && GOTOOLCHAIN=local go build -o /tmp/clientgo . and \
                 export K8SAILOR_TEST_CLIENTGO=/tmp/clientgo)"
            )
        })
}

/// A running informer program; killed when dropped.
struct Informers {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

/// How long the program may take to sync or answer: it retries with client-go's backoff.
const PATIENCE: Duration = Duration::from_secs(90);

impl Informers {
    /// Starts the informers of `namespace` on the server of `kubeconfig`, with client-go's
    /// WatchList or without, and waits until they have synced.
    fn start(kubeconfig: &Path, namespace: &str, watch_list: bool) -> Informers {
        let mut child = Command::new(program())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .env(
                "KUBE_FEATURE_WatchListClient",
                if watch_list { "true" } else { "false" },
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", program()));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let informers = Informers {
            child,
            stdin,
            lines,
        };
        let first = informers.line();
        assert_eq!(first, "synced", "the informers' first line");
        informers
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("the informer program said nothing: {e}"))
    }

    /// Every informer's store: namespace, name and resourceVersion of each object.
    fn stores(&mut self) -> Value {
        writeln!(self.stdin, "dump").unwrap();
        self.stdin.flush().unwrap();
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

impl Drop for Informers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"key": name}})).unwrap()
}

/// The names in an informer's store.
fn names(stores: &Value, informer: &str) -> Vec<String> {
    stores[informer]
        .as_array()
        .unwrap_or_else(|| panic!("{informer} in {stores}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

struct Setup {
    ns: TestNamespace,
    dir: PathBuf,
}

async fn setup(test: &str) -> Setup {
    let ns = TestNamespace::new(test).await;
    for name in ["cm-a", "cm-b", "cm-c"] {
        ns.api::<ConfigMap>()
            .create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("web-1", &[("app", "web")]))
        .await
        .unwrap();
    let dir = repo()
        .join("target")
        .join(format!("e2e-clientgo-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    Setup { ns, dir }
}

impl Setup {
    /// Changes of every kind to every informer's objects: ConfigMaps created, changed and
    /// deleted (one created and deleted at once), a Pod created and one changed.
    async fn change(&self, round: &str) {
        let configmaps = self.ns.api::<ConfigMap>();
        for name in [format!("cm-new-{round}"), format!("cm-brief-{round}")] {
            configmaps
                .create(&PostParams::default(), &configmap(&name))
                .await
                .unwrap();
        }
        configmaps
            .delete(&format!("cm-brief-{round}"), &DeleteParams::default())
            .await
            .unwrap();
        let patch = json!({"data": {"round": round}});
        configmaps
            .patch("cm-a", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        if let Err(e) = configmaps.delete("cm-b", &DeleteParams::default()).await {
            assert!(
                matches!(&e, kube::Error::Api(s) if s.code == 404),
                "delete cm-b: {e}"
            );
        }
        let pods = self.ns.api::<Pod>();
        pods.create(
            &PostParams::default(),
            &pod(&format!("web-{round}"), &[("app", "web")]),
        )
        .await
        .unwrap();
        let patch = json!({"metadata": {"labels": {"round": round}}});
        pods.patch("web-1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    fn apiserver_kubeconfig(&self) -> PathBuf {
        cluster().kubeconfig.clone()
    }

    fn k8sailor_kubeconfig(&self, server: &Server) -> PathBuf {
        let path = self.dir.join("kubeconfig-k8sailor");
        anonymous_kubeconfig(&path, server.root());
        path
    }
}

/// What every informer of `ns` must end up holding: the apiserver's objects as it lists them
/// now, as the program dumps its stores.
async fn listed(ns: &TestNamespace) -> Value {
    fn entries<K: kube::Resource>(items: &[K]) -> Value {
        let mut entries: Vec<(String, Value)> = items
            .iter()
            .map(|o| {
                let meta = o.meta();
                let name = meta.name.clone().unwrap_or_default();
                let entry = json!({"namespace": meta.namespace, "name": name,
                    "resourceVersion": meta.resource_version});
                (name, entry)
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.into_iter().map(|(_, entry)| entry).collect()
    }
    let all = ListParams::default();
    let configmaps = entries(&ns.api::<ConfigMap>().list(&all).await.unwrap().items);
    let pods = entries(&ns.api::<Pod>().list(&all).await.unwrap().items);
    json!({"pods": pods, "configmaps": configmaps, "configmaps-metadata": configmaps})
}

/// Until both programs hold the apiserver's objects, with the ConfigMaps `rounds` of
/// [`Setup::change`] leave. Both must have caught up with every change: two programs equally
/// behind (each informer's watch is its own) would be equal without being right.
async fn until_equal(
    ns: &TestNamespace,
    ours: &mut Informers,
    theirs: &mut Informers,
    rounds: &[&str],
) {
    // The controller-manager gives every namespace its kube-root-ca.crt.
    let mut expected: Vec<String> = ["cm-a", "cm-c", "kube-root-ca.crt"]
        .map(String::from)
        .to_vec();
    expected.extend(rounds.iter().map(|r| format!("cm-new-{r}")));
    expected.sort();
    let last = std::cell::RefCell::new(Value::Null);
    eventually_shown(
        PATIENCE,
        "the informers on k8sailor and on the apiserver to hold the apiserver's objects",
        || {
            let stores = json!({"k8sailor": ours.stores(), "apiserver": theirs.stores()});
            let (last, expected) = (&last, &expected);
            async move {
                let mut stores = stores;
                stores["listed"] = listed(ns).await;
                let done = stores["k8sailor"] == stores["listed"]
                    && stores["apiserver"] == stores["listed"]
                    && names(&stores["listed"], "configmaps") == *expected;
                if done {
                    return Ok(());
                }
                if stores != *last.borrow() {
                    eprintln!("not yet equal: {stores}");
                    *last.borrow_mut() = stores.clone();
                }
                Err(stores.to_string())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn informers_on_k8sailor_end_with_the_apiservers_objects() {
    let s = setup("clientgo-sync").await;
    let server = Server::start(&["--auth", "none"]);
    let kubeconfig = s.k8sailor_kubeconfig(&server);
    for (watch_list, round) in [(true, "watchlist"), (false, "listwatch")] {
        let mut ours = Informers::start(&kubeconfig, &s.ns.name, watch_list);
        let mut theirs = Informers::start(&s.apiserver_kubeconfig(), &s.ns.name, watch_list);
        s.change(round).await;
        let rounds = ["watchlist", "listwatch"];
        let done = rounds.iter().position(|r| *r == round).unwrap() + 1;
        until_equal(&s.ns, &mut ours, &mut theirs, &rounds[..done]).await;
        let stores = ours.stores();
        assert_eq!(
            names(&stores, "configmaps-metadata"),
            names(&stores, "configmaps"),
            "{stores}"
        );
        assert!(
            names(&stores, "pods").contains(&format!("web-{round}")),
            "{stores}"
        );
    }
}

#[tokio::test]
async fn a_resumed_watch_after_a_restart_misses_nothing() {
    let s = setup("clientgo-restart").await;
    // A port of our own, so k8sailor can come back on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_k8sailor"));
        command
            .args(["httpserver", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--kubeconfig")
            .arg(&cluster().kubeconfig)
            .args(["--sync-timeout", "30s", "--auth", "none"])
            .env("RUST_LOG", "warn");
        Server::start_command(command).unwrap_or_else(|e| panic!("{e}"))
    };
    let mut server = start();
    let kubeconfig = s.k8sailor_kubeconfig(&server);
    let mut ours = Informers::start(&kubeconfig, &s.ns.name, true);
    let mut theirs = Informers::start(&s.apiserver_kubeconfig(), &s.ns.name, true);
    s.change("before").await;
    until_equal(&s.ns, &mut ours, &mut theirs, &["before"]).await;
    // Gone abruptly while objects change; back on the same port.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    s.change("during").await;
    let _server = start();
    drop(server);
    s.change("after").await;
    until_equal(
        &s.ns,
        &mut ours,
        &mut theirs,
        &["before", "during", "after"],
    )
    .await;
}
