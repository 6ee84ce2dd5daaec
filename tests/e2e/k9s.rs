//! k9s (v0.50.16, built from the Go module proxy by `hack/k9s build`), the terminal dashboard
//! platform teams use: a client-go program that reads discovery, asks a
//! SelfSubjectAccessReview before it lists, and lists and watches through dynamic informers
//! (Tables for the kinds it has no renderer of its own for). It runs in a detached tmux
//! session of fixed size, once against k8sailor and once against the apiserver with the same
//! token, and the tables on its screens must be the same, ages aside: the pods view, the
//! Deployments view, Leases, Events (events.k8s.io), Endpoints, and what changes made
//! through the apiserver while it watches bring. The screens compared are saved under `target/k9s/` as the record of the session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::deploy::{TempDir, admin_token};
use crate::kubeapi::Kubectl;
use crate::support::{Server, TestNamespace, cluster, deployment, eventually, pod, repo};
use crate::tls::{start_tls, test_ca};

/// A node kwok plays, whose pods run (hack/cluster up --log-nodes).
const NODE: &str = "demo-node-1";

/// How long k9s may take to show what both servers hold: it redraws every 2 s, and its
/// informers back off after a failure.
const PATIENCE: Duration = Duration::from_secs(90);

/// Between two captures of the screens.
const POLL: Duration = Duration::from_millis(250);

/// k9s's configuration: no header, logo, crumbs or splash, so the screen is the table alone;
/// no check of its latest release (a request to GitHub).
const K9S_CONFIG: &str = "k9s:
  skipLatestRevCheck: true
  readOnly: true
  ui:
    headless: true
    logoless: true
    crumbsless: true
    splashless: true
    noIcons: true
";

/// The k9s hack/test builds (`hack/k9s build`).
fn program() -> PathBuf {
    std::env::var_os("K8SAILOR_TEST_K9S")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "K8SAILOR_TEST_K9S is not set: hack/test builds k9s and sets it \
                 (or: export K8SAILOR_TEST_K9S=$(hack/k9s build))"
            )
        })
}

/// k9s in a tmux server of its own (its own socket, so no other tmux is touched), ended with
/// that server when dropped.
struct K9s {
    socket: PathBuf,
    /// `k8sailor` or `apiserver`: the name of its screens' files.
    side: &'static str,
    /// Where its screens and log are kept.
    record: PathBuf,
}

impl K9s {
    /// Starts k9s on the server of `kubeconfig`, in `namespace`, showing its pods; its
    /// configuration and home in `scratch`, its log in `record`.
    fn start(
        side: &'static str,
        kubeconfig: &Path,
        namespace: &str,
        scratch: &Path,
        record: &Path,
    ) -> K9s {
        let home = scratch.join(side);
        let config = home.join("k9s");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.yaml"), K9S_CONFIG).unwrap();
        // No status line: the pane is the whole 200x50 window. A k9s that exits leaves its
        // last screen, which the failure then shows.
        let tmux_conf = home.join("tmux.conf");
        std::fs::write(&tmux_conf, "set -g status off\nset -g remain-on-exit on\n").unwrap();
        let k9s = K9s {
            socket: home.join("tmux.sock"),
            side,
            record: record.to_path_buf(),
        };
        let log = record.join(format!("{side}-k9s.log"));
        let path = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
        let args: Vec<String> = vec![
            "-f".into(),
            path(&tmux_conf),
            "new-session".into(),
            "-d".into(),
            "-s".into(),
            "k9s".into(),
            "-x".into(),
            "200".into(),
            "-y".into(),
            "50".into(),
            "--".into(),
            // Nothing of the test's environment (a KUBECONFIG, the user's k9s settings);
            // every request to another host goes to a closed loopback port (Go never proxies
            // loopback addresses).
            "env".into(),
            "-i".into(),
            format!("HOME={}", path(&home)),
            format!("K9S_CONFIG_DIR={}", path(&config)),
            format!("K9S_LOGS_DIR={}", path(record)),
            "TERM=xterm-256color".into(),
            "LANG=C.UTF-8".into(),
            "HTTPS_PROXY=http://127.0.0.1:9".into(),
            "HTTP_PROXY=http://127.0.0.1:9".into(),
            path(&program()),
            "--kubeconfig".into(),
            path(kubeconfig),
            "--namespace".into(),
            namespace.into(),
            "--command".into(),
            "pods".into(),
            "--readonly".into(),
            "--logLevel".into(),
            "debug".into(),
            "--logFile".into(),
            path(&log),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        k9s.tmux(&args);
        k9s
    }

    /// Runs `tmux -S <socket> args`; its stdout.
    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            // A UTF-8 locale, or tmux writes k9s's box drawing as `_`.
            .env("LC_ALL", "C.UTF-8")
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run tmux (hack/k9s build installs it): {e}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen as text.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "k9s"])
    }

    /// Types `:{view}` and Enter, as a user switches k9s's view.
    fn show(&self, view: &str) {
        self.tmux(&["send-keys", "-t", "k9s", "-l", &format!(":{view}")]);
        self.tmux(&["send-keys", "-t", "k9s", "Enter"]);
    }

    /// Keeps `screen` as this side's record of `step`.
    fn keep(&self, step: &str, screen: &str) {
        let file = self.record.join(format!("{step}-{}.txt", self.side));
        std::fs::write(&file, screen)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
    }
}

impl Drop for K9s {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stdin(Stdio::null())
            .output();
    }
}

/// The table k9s draws: its title (view, namespace, count), its column names and its rows,
/// each age as `<age>`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Table {
    title: String,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// The table on `screen`, if one is drawn: the box from `┌` to `└`, its header the first
    /// line inside. Columns are told apart by the character positions that are blank in every
    /// line (k9s aligns some columns left, some right).
    fn on(screen: &str) -> Option<Table> {
        let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
        let top = lines.iter().position(|l| l.first() == Some(&'┌'))?;
        let title: String = lines[top]
            .iter()
            .filter(|c| !matches!(c, '┌' | '┐' | '─'))
            .collect();
        let inside: Vec<Vec<char>> = lines[top + 1..]
            .iter()
            .take_while(|l| l.first() != Some(&'└'))
            .map(|l| {
                let l = l.strip_prefix(&['│']).unwrap_or(l.as_slice());
                l.strip_suffix(&['│']).unwrap_or(l).to_vec()
            })
            .filter(|l| l.iter().any(|c| !c.is_whitespace()))
            .collect();
        let (header, _) = inside.split_first()?;
        let width = inside.iter().map(Vec::len).max().unwrap_or(0);
        let blank = |i: usize| {
            inside
                .iter()
                .all(|l| l.get(i).is_none_or(|c| c.is_whitespace()))
        };
        let mut spans = Vec::new();
        let mut start = None;
        for i in 0..=width {
            match (start, i < width && !blank(i)) {
                (None, true) => start = Some(i),
                (Some(s), false) => {
                    spans.push(s..i);
                    start = None;
                }
                _ => {}
            }
        }
        let cells = |line: &[char]| -> Vec<String> {
            spans
                .iter()
                .map(|span| {
                    let end = span.end.min(line.len());
                    let start = span.start.min(end);
                    line[start..end]
                        .iter()
                        .collect::<String>()
                        .trim()
                        .to_string()
                })
                .collect()
        };
        // A column's name without the arrow of the sort order.
        let columns: Vec<String> = cells(header)
            .into_iter()
            .map(|c| c.trim_end_matches(['↑', '↓']).to_string())
            .collect();
        // Ages, and an Event's times (ages too), as each server rendered them then.
        let ages: Vec<usize> = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.as_str(), "AGE" | "LAST SEEN" | "FIRST SEEN"))
            .map(|(i, _)| i)
            .collect();
        let rows = inside[1..]
            .iter()
            .map(|line| {
                let mut row = cells(line);
                for i in &ages {
                    if let Some(cell) = row.get_mut(*i) {
                        *cell = "<age>".into();
                    }
                }
                row
            })
            .collect();
        Some(Table {
            title: title.trim().to_string(),
            columns,
            rows,
        })
    }

    /// Each row by column name.
    fn records(&self) -> Vec<BTreeMap<&str, &str>> {
        self.rows
            .iter()
            .map(|row| {
                self.columns
                    .iter()
                    .map(String::as_str)
                    .zip(row.iter().map(String::as_str))
                    .collect()
            })
            .collect()
    }

    /// The row named `name`.
    fn row(&self, name: &str) -> Option<BTreeMap<&str, &str>> {
        self.records()
            .into_iter()
            .find(|r| r.get("NAME") == Some(&name))
    }

    /// The names of the rows, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .records()
            .iter()
            .filter_map(|r| r.get("NAME").map(|n| n.to_string()))
            .collect();
        names.sort();
        names
    }
}

/// k9s on k8sailor and on the apiserver, side by side.
struct Both {
    ours: K9s,
    theirs: K9s,
}

impl Both {
    /// k9s in `namespace` on the k8sailor of `k8sailor` (a kubeconfig) and on the apiserver
    /// (the cluster's admin kubeconfig).
    fn start(k8sailor: &Path, namespace: &str, scratch: &Path, record: &Path) -> Both {
        Both {
            ours: K9s::start("k8sailor", k8sailor, namespace, scratch, record),
            theirs: K9s::start(
                "apiserver",
                &cluster().kubeconfig,
                namespace,
                scratch,
                record,
            ),
        }
    }

    /// Waits until both screens show the same table (ages aside) and `wanted` holds for it;
    /// keeps both screens as the record of `step`.
    async fn agree(&self, step: &str, wanted: impl Fn(&Table) -> bool) -> Table {
        let mut last: Option<(String, String)> = None;
        let what = format!(
            "k9s on k8sailor and on the apiserver to show the same {step} (screens in {})",
            self.ours.record.display()
        );
        let (table, _) = eventually(PATIENCE, &what, || {
            let screens = (self.ours.screen(), self.theirs.screen());
            if last.as_ref() != Some(&screens) {
                self.ours.keep(step, &screens.0);
                self.theirs.keep(step, &screens.1);
                last = Some(screens.clone());
            }
            let agreed = match (Table::on(&screens.0), Table::on(&screens.1)) {
                (Some(ours), Some(theirs)) if ours == theirs && wanted(&ours) => Some(ours),
                _ => None,
            };
            async move {
                if agreed.is_none() {
                    tokio::time::sleep(POLL).await;
                }
                agreed
            }
        })
        .await;
        table
    }

    fn show(&self, view: &str) {
        self.ours.show(view);
        self.theirs.show(view);
    }
}

/// The test's objects: a pod that runs (on a kwok node), one that waits (no node), a
/// Deployment of two running pods, a Lease (a kind k9s reads as a Table), and Endpoints (a
/// deprecated kind, which k9s renders itself).
async fn objects(ns: &TestNamespace) {
    let pp = PostParams::default();
    let mut running = pod("web", &[("app", "web")]);
    running.spec.as_mut().unwrap().node_name = Some(NODE.into());
    ns.api::<Pod>().create(&pp, &running).await.unwrap();
    ns.api::<Pod>()
        .create(&pp, &pod("waiting", &[("app", "waiting")]))
        .await
        .unwrap();
    let mut shop = deployment("shop", 2, &[("app", "shop")]);
    let template = &mut shop.spec.as_mut().unwrap().template;
    template.spec.as_mut().unwrap().node_name = Some(NODE.into());
    ns.api::<Deployment>().create(&pp, &shop).await.unwrap();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "web-lock"},
        "spec": {"holderIdentity": "web", "leaseDurationSeconds": 30},
    }))
    .unwrap();
    ns.api::<Lease>().create(&pp, &lease).await.unwrap();
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "manual"},
        "subsets": [{"addresses": [{"ip": "10.4.0.1"}], "ports": [{"port": 80}]}],
    }))
    .unwrap();
    ns.api::<Endpoints>().create(&pp, &endpoints).await.unwrap();
}

/// Whether `table` is the Deployments view with `shop` alone, `ready` ready.
fn deployments_view(table: &Table, ready: &str) -> bool {
    table.title.to_lowercase().starts_with("deployments")
        && table.names() == ["shop"]
        && table
            .row("shop")
            .is_some_and(|r| r.get("READY") == Some(&ready))
}

/// Whether `table` is the pods view with these pods: `web` and each `shop-` pod running and
/// ready, `waiting` pending, none restarted.
fn pods_view(table: &Table, shop_pods: usize, waiting: bool) -> bool {
    let records = table.records();
    let shop = records
        .iter()
        .filter(|r| r.get("NAME").is_some_and(|n| n.starts_with("shop-")))
        .count();
    table.title.to_lowercase().starts_with("pods")
        && records.len() == shop_pods + 1 + usize::from(waiting)
        && shop == shop_pods
        && records.iter().all(|r| r.get("RESTARTS") == Some(&"0"))
        && records
            .iter()
            .filter(|r| r.get("NAME") != Some(&"waiting"))
            .all(|r| r.get("READY") == Some(&"1/1") && r.get("STATUS") == Some(&"Running"))
        && table.row("waiting").is_some() == waiting
        && table
            .row("waiting")
            .is_none_or(|r| r.get("READY") == Some(&"0/1") && r.get("STATUS") == Some(&"Pending"))
}

/// The record's directory of one test, emptied first.
fn record(test: &str) -> PathBuf {
    let dir = repo().join("target").join("k9s").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn k9s_shows_through_k8sailor_what_it_shows_through_the_apiserver() {
    let ns = TestNamespace::new("k9s").await;
    objects(&ns).await;
    // Delegated: k9s's SelfSubjectAccessReviews (and any list of a kind not kept) are
    // relayed as the caller; TLS, since a token is not sent in clear text.
    let server = start_tls(&test_ca().issue(), &["--auth", "delegated"]);
    let scratch = TempDir::new("k9s");
    let record = record("delegated");
    let ca = std::fs::read_to_string(&test_ca().cert).unwrap();
    let k8sailor =
        Kubectl::for_k8sailor_as(scratch.path(), "k9s", server.root(), &ca, &admin_token());
    let both = Both::start(k8sailor.kubeconfig(), &ns.name, scratch.path(), &record);

    let pods = both.agree("1-pods", |t| pods_view(t, 2, true)).await;
    assert!(pods.title.contains(&ns.name), "{pods:?}");

    both.show("deploy");
    both.agree("2-deployments", |t| deployments_view(t, "2/2"))
        .await;

    // A change while k9s watches: scaled through the apiserver, both show the third pod ready.
    let scale = json!({"spec": {"replicas": 3}});
    ns.api::<Deployment>()
        .patch("shop", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    both.agree("3-deployments-scaled", |t| deployments_view(t, "3/3"))
        .await;

    both.show("leases");
    both.agree("4-leases", |t| {
        t.title.to_lowercase().starts_with("leases") && t.names() == ["web-lock"]
    })
    .await;

    both.show("pods");
    both.agree("5-pods-scaled", |t| pods_view(t, 3, true)).await;
    // And one deleted while the pods view watches.
    ns.api::<Pod>()
        .delete("waiting", &DeleteParams::default())
        .await
        .unwrap();
    both.agree("6-pods-deleted", |t| pods_view(t, 3, false))
        .await;
}

#[tokio::test]
async fn k9s_reads_k8sailor_without_auth_as_the_apiserver() {
    let ns = TestNamespace::new("k9s-noauth").await;
    objects(&ns).await;
    // No auth: k9s's SelfSubjectAccessReviews are answered by k8sailor itself, with what it
    // lets anyone do: read what it serves.
    let server = Server::start(&["--auth", "none"]);
    let scratch = TempDir::new("k9s-noauth");
    let record = record("none");
    let kubectl = Kubectl::for_k8sailor(scratch.path(), &server);
    let both = Both::start(kubectl.kubeconfig(), &ns.name, scratch.path(), &record);
    both.agree("1-pods", |t| pods_view(t, 2, true)).await;
    // kubectl reads the same answers: reads yes, writes no.
    let n = ns.name.as_str();
    let (yes, out, err) = kubectl.run(&["auth", "can-i", "watch", "pods", "-n", n]);
    assert!(yes && out.trim() == "yes", "{out}{err}");
    // kubectl prints the reason after a no: k8sailor says what it serves.
    let (yes, out, err) = kubectl.run(&["auth", "can-i", "delete", "pods", "-n", n]);
    assert!(
        !yes && out.starts_with("no - k8sailor without auth serves only reads"),
        "{out}{err}"
    );
    both.show("deploy");
    both.agree("2-deployments", |t| deployments_view(t, "2/2"))
        .await;
    // k9s reads Events from events.k8s.io, as a Table, and Endpoints as objects.
    both.show("events");
    both.agree("3-events", |t| {
        t.title.to_lowercase().starts_with("events") && !t.rows.is_empty()
    })
    .await;
    both.show("ep");
    both.agree("4-endpoints", |t| {
        t.title.to_lowercase().starts_with("endpoints") && t.names() == ["manual"]
    })
    .await;
}
