//! Operating k8sailor: probes, SIGTERM under load, and the apiserver going away.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;

use crate::support::{
    SOON, Server, TestNamespace, cluster, deployment, eventually, names, timing_sensitive,
};

#[tokio::test]
async fn probes_report_each_informer() {
    let ns = TestNamespace::new("probes").await;
    let server = Server::start(&["--namespace", &ns.name]);
    assert_eq!(server.probe("/livez").await, (200, "ok".to_string()));
    assert_eq!(server.probe("/readyz").await, (200, "ok".to_string()));
    let (status, body) = server.probe("/readyz?verbose").await;
    assert_eq!(status, 200);
    for line in [
        "[+]informer-Deployment ok",
        "[+]informer-Pod ok",
        "[+]informer-ReplicaSet ok",
        "[+]shutdown ok",
        "readyz check passed",
    ] {
        assert!(body.contains(line), "{line} in:\n{body}");
    }
    let (status, metrics) = server.probe("/metrics").await;
    assert_eq!(status, 200);
    for needle in [
        r#"k8sailor_cache_objects{kind="Pod"} 0"#,
        r#"k8sailor_informer_synced{kind="Deployment"} 1"#,
        r#"k8sailor_watch_relists_total{kind="ReplicaSet"} 1"#,
        r#"k8sailor_http_requests_total{route="/readyz",method="GET",code="200"}"#,
    ] {
        assert!(metrics.contains(needle), "{needle} in:\n{metrics}");
    }
    // Start-up told by its parts: each informer's first list ended within the phases that
    // started the informers and waited for them.
    let gauge = |name: &str| -> f64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in:\n{metrics}"));
        line[name.len()..].trim().parse().unwrap()
    };
    let phases = ["connect", "auth", "start", "sync", "bind"]
        .map(|p| gauge(&format!(r#"k8sailor_startup_seconds{{phase="{p}"}}"#)));
    assert!(
        phases.iter().all(|s| s.is_finite() && *s >= 0.0),
        "{phases:?}"
    );
    for kind in ["Pod", "Deployment", "ReplicaSet"] {
        let listed = gauge(&format!(
            r#"k8sailor_informer_first_list_seconds{{kind="{kind}"}}"#
        ));
        let indexed = gauge(&format!(
            r#"k8sailor_informer_first_index_seconds{{kind="{kind}"}}"#
        ));
        assert!(
            listed > 0.0 && indexed >= 0.0 && listed + indexed <= phases[2] + phases[3],
            "{kind}: listed {listed}, indexed {indexed}, phases {phases:?}"
        );
    }
}

/// `hack/run > log`, a container runtime or a CI job reads the log through a file or a pipe,
/// where colour codes are noise; the test harness reads stderr through a pipe.
#[tokio::test]
async fn logs_into_a_pipe_carry_no_colour_codes() {
    let ns = TestNamespace::new("nocolour").await;
    let mut command = Server::command(
        cluster().kubeconfig.to_str().unwrap(),
        &["--namespace", &ns.name],
    );
    command.env("RUST_LOG", "info").env_remove("NO_COLOR");
    let server = Server::start_command(command).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server.probe("/readyz").await.0, 200);
    // An info line: "serving" comes after the "listening" line, on another pipe.
    let logs = server.logged("serving").await;
    assert!(!logs.contains("\x1b["), "colour codes in:\n{logs:?}");
}

#[tokio::test]
async fn sigterm_fails_readiness_first_and_drops_no_request() {
    let _timed = timing_sensitive().await;
    let ns = TestNamespace::new("sigterm").await;
    // A delay long enough for the waits below to end well inside it on a loaded machine.
    let mut server = Server::start(&[
        "--namespace",
        &ns.name,
        "--shutdown-delay",
        "5s",
        "--shutdown-grace",
        "5s",
    ]);
    let url = format!("{}/deployments?namespace={}", server.base, ns.name);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (http, url, stop, ok, failed) = (
                server.http.clone(),
                url.clone(),
                stop.clone(),
                ok.clone(),
                failed.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match http.get(&url).send().await {
                        Ok(r) if r.status().is_success() => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    let answered = |at_least: usize| {
        let ok = ok.clone();
        async move { (ok.load(Ordering::Relaxed) >= at_least).then_some(()) }
    };
    eventually(SOON, "the load answered", || answered(10)).await;
    server.signal("-TERM");
    // Readiness fails as soon as the signal is handled, while requests keep being served
    // during the delay.
    let (body, _) = eventually(SOON, "/readyz to fail", || async {
        let (status, body) = server.probe("/readyz?verbose").await;
        (status == 503).then_some(body)
    })
    .await;
    assert!(body.contains("[-]shutdown failed: shutting down"), "{body}");
    let before = ok.load(Ordering::Relaxed);
    eventually(SOON, "answers after readiness failed", || {
        answered(before + 10)
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no request failed before the delay ended"
    );
    assert_eq!(server.exit_code(SOON), Some(0));
}

/// A control plane of this test's own, so that stopping its apiserver disturbs no other test.
struct PrivateCluster {
    dir: PathBuf,
}

/// Runs `hack/cluster ARGS`; panics with its output if it fails.
fn hack_cluster(args: &[&str]) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join("hack/cluster"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hack/cluster {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PrivateCluster {
    fn up() -> PrivateCluster {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("e2e-private-{}", std::process::id()));
        let owner = std::process::id().to_string();
        hack_cluster(&["up", dir.to_str().unwrap(), "--owner-pid", &owner]);
        PrivateCluster { dir }
    }

    fn kubeconfig(&self) -> String {
        self.dir.join("kubeconfig").to_str().unwrap().to_string()
    }

    fn restart_apiserver(&self) {
        hack_cluster(&["restart", "kube-apiserver", self.dir.to_str().unwrap()]);
    }

    fn kill_apiserver(&self) {
        let pid = std::fs::read_to_string(self.dir.join("kube-apiserver.pid")).unwrap();
        assert!(
            Command::new("kill")
                .args(["-KILL", pid.trim()])
                .status()
                .unwrap()
                .success()
        );
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let _ = Command::new(repo.join("hack/cluster"))
            .args(["down", self.dir.to_str().unwrap()])
            .status();
    }
}

#[tokio::test]
async fn when_the_apiserver_goes_away_we_keep_serving_and_say_how_old() {
    let cluster = PrivateCluster::up();
    let client = {
        let kc = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    kube::Api::<Deployment>::namespaced(client, "default")
        .create(&PostParams::default(), &deployment("survivor", 1, &[]))
        .await
        .unwrap();
    let server = Server::start_with(&cluster.kubeconfig(), &[]).unwrap();
    let list = "/deployments?namespace=default";
    eventually(SOON, "the deployment", || async {
        (names(&server.get(list).await.1) == ["survivor"]).then_some(())
    })
    .await;

    cluster.kill_apiserver();
    let (stale, _) = eventually(Duration::from_secs(60), "the stale header", || async {
        let res = server
            .http
            .get(format!("{}{list}", server.base))
            .send()
            .await
            .ok()?;
        let age = res
            .headers()
            .get("k8sailor-stale-seconds")?
            .to_str()
            .ok()?
            .to_string();
        let body: serde_json::Value = res.json().await.ok()?;
        Some((age, body))
    })
    .await;
    assert!(
        stale.0.parse::<u64>().is_ok(),
        "age in seconds: {}",
        stale.0
    );
    assert_eq!(
        names(&stale.1),
        ["survivor"],
        "the cached answer is still served"
    );
    let (status, body) = server.probe("/readyz?verbose").await;
    assert_eq!(
        status, 200,
        "an outage is not our fault: stay ready\n{body}"
    );
    assert!(body.contains("serving cached data"), "{body}");

    // Back on the same port, with nothing changed meanwhile: the watches reconnect and the
    // answers stop saying they are stale, without waiting for some object to change.
    cluster.restart_apiserver();
    eventually(Duration::from_secs(60), "fresh answers again", || async {
        let res = server
            .http
            .get(format!("{}{list}", server.base))
            .send()
            .await
            .ok()?;
        let fresh = res.status() == 200 && res.headers().get("k8sailor-stale-seconds").is_none();
        fresh.then_some(())
    })
    .await;
    let (status, body) = server.probe("/readyz?verbose").await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("serving cached data"), "{body}");
}
