//! The demo of `hack/run`: on kwok's fake nodes (`hack/cluster up --demo-nodes`) the demo
//! workloads start, become ready, restart and fail, and k8sailor's watch shows each step.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::deploy::kubectl;
use crate::support::{Cluster, Server, repo};
use crate::watch::Watch;

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
