//! `hack/run` and its demo: it says where the dashboard is once the server is ready, and on
//! kwok's fake nodes (`hack/cluster up --demo-nodes`) the demo workloads start, become ready,
//! restart and fail, and k8sailor's watch shows each step.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::deploy::kubectl;
use crate::support::{Cluster, SOON, Server, cluster, repo};
use crate::watch::Watch;

/// `hack/run`, stopped as Ctrl-C would stop it, and so also when a test fails before it does:
/// no server outlives the test.
struct HackRun(Child);

impl HackRun {
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
}

impl Drop for HackRun {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.terminate();
            let _ = self.0.wait();
        }
    }
}

/// A person who runs `hack/run` looks for the URL to open: its last line on stdout, printed
/// only once the server is ready, so the first page load works.
#[tokio::test]
async fn hack_run_prints_the_dashboards_url_once_it_serves() {
    let mut child = Command::new(repo().join("hack/run"))
        .args(["--listen", "127.0.0.1:0", "--sync-timeout", "30s"])
        .env("KUBECONFIG", &cluster().kubeconfig)
        .env("K8SAILOR_RUN_BINARY", env!("CARGO_BIN_EXE_k8sailor"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hack/run starts");
    let stdout = child.stdout.take().unwrap();
    let run = HackRun(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next_line = || lines.recv_timeout(SOON);

    let listening = next_line().expect("the server's 'listening on' line");
    let base = listening
        .strip_prefix("k8sailor listening on ")
        .unwrap_or_else(|| panic!("not the listening line: {listening}"));
    let root = base.trim_end_matches("/k8sailor/v0");
    assert_eq!(
        next_line().expect("the dashboard's line"),
        format!("k8sailor: dashboard at {root}/")
    );
    let readyz = reqwest::get(format!("{root}/readyz"))
        .await
        .expect("k8sailor answers");
    assert_eq!(readyz.status(), 200, "ready when the URL was printed");

    // Ctrl-C or SIGTERM reach the server; nothing more is printed, and both end.
    run.terminate();
    let exit = tokio::task::spawn_blocking(move || {
        let mut run = run;
        run.0.wait()
    })
    .await
    .expect("waited")
    .expect("hack/run ends");
    assert!(exit.success(), "hack/run ended with {exit}");
    // Disconnected once the reading thread has seen the pipe close, however long that takes
    // it on a loaded machine; a line after the URL comes first.
    assert_eq!(
        lines.recv_timeout(SOON),
        Err(mpsc::RecvTimeoutError::Disconnected),
        "the URL is the last line"
    );
    assert!(
        reqwest::get(format!("{root}/livez")).await.is_err(),
        "the server stopped with hack/run"
    );
}

/// A control plane of its own: the shared one has no nodes, and other tests rely on pods that
/// stay Pending there.
struct DemoCluster {
    dir: PathBuf,
    cluster: Cluster,
}

impl DemoCluster {
    fn up() -> DemoCluster {
        let dir = repo()
            .join("target")
            .join(format!("demo-cluster-{}", std::process::id()));
        let cluster = Cluster::up(&dir, &["--demo-nodes"]).unwrap_or_else(|e| panic!("{e}"));
        DemoCluster { dir, cluster }
    }

    /// `kubectl apply -f hack/demo.yaml`, as hack/run does.
    fn apply_demo(&self) {
        let output = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&self.cluster.kubeconfig)
            .arg("apply")
            .arg("-f")
            .arg(repo().join("hack/demo.yaml"))
            .output()
            .expect("kubectl runs");
        assert!(
            output.status.success(),
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for DemoCluster {
    fn drop(&mut self) {
        // The demo's namespaces go first: were the control plane kept (its state dir reused,
        // `hack/cluster down` failing), no later run would find them in its lists.
        let _ = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&self.cluster.kubeconfig)
            .args(["delete", "--ignore-not-found", "--wait=false", "-f"])
            .arg(repo().join("hack/demo.yaml"))
            .output();
        let _ = Command::new(repo().join("hack/cluster"))
            .arg("down")
            .arg(&self.dir)
            .output();
    }
}

/// What a pod's change shows, in kubectl's terms, if it is one the demo promises.
fn demo_step(pod: &Value) -> Option<&'static str> {
    let status = pod["statusText"].as_str()?;
    let restarts = pod["restarts"].as_i64()?;
    let all_ready = pod["ready"]
        .as_str()
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(ready, total)| ready == total && ready != "0");
    let on_a_demo_node = pod["nodeName"]
        .as_str()
        .is_some_and(|n| n.starts_with("demo-node-"));
    match status {
        "Running" if all_ready && restarts >= 1 && on_a_demo_node => Some("restarted, ready again"),
        "CrashLoopBackOff" if restarts >= 1 => Some("crash-loop back-off"),
        "ErrImagePull" | "ImagePullBackOff" => Some("image pull failing"),
        "Error" if pod["status"]["phase"] == "Failed" => Some("failed"),
        _ => None,
    }
}

#[tokio::test]
async fn demo_pods_start_restart_and_fail_on_the_demo_nodes() {
    let demo = DemoCluster::up();
    demo.apply_demo();
    let kubeconfig = demo.cluster.kubeconfig.to_str().unwrap();
    let server = Server::start_with(kubeconfig, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut watch = Watch::open(&server, "/pods?watch=true", false).await;

    // Changes only (MODIFIED): the demo must move while one watches, not only have moved.
    let wanted = [
        "restarted, ready again",
        "crash-loop back-off",
        "image pull failing",
        "failed",
    ];
    let limit = Duration::from_secs(120);
    let deadline = Instant::now() + limit;
    let mut seen = BTreeSet::new();
    while !wanted.iter().all(|w| seen.contains(w)) {
        assert!(
            Instant::now() < deadline,
            "within {limit:?} the watch showed only {seen:?} of {wanted:?}"
        );
        let event = watch.next().await;
        if event["type"] == "MODIFIED"
            && let Some(step) = demo_step(&event["object"])
        {
            seen.insert(step);
        }
    }
}
