//! Logs through k8sailor: the control plane's kwok nodes (`hack/cluster up --log-nodes`) serve
//! every container's log from a file that grows by a numbered line every half second
//! (hack/demo-logs/), through their kubelet endpoint, so `kubectl logs` and k8sailor both read
//! real logs from the apiserver. Pods here name their node (there is no scheduler).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::access::{account, grant, rule};
use crate::deploy::kubectl;
use crate::support::{SOON, Server, TestNamespace, cluster, eventually};

/// A node kwok plays (hack/cluster names them demo-node-N).
const NODE: &str = "demo-node-1";

/// A pod on a kwok node with these containers.
fn running_pod(name: &str, containers: &[&str], labels: Value) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox:1.36"}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": NODE, "containers": containers}
    }))
    .unwrap()
}

/// The spec of a workload of `replicas` pods labelled `app: NAME`, each on a kwok node.
fn workload_spec(name: &str, replicas: i32) -> Value {
    json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "nginx:1.27"}]}
        }
    })
}

/// A Deployment whose pods run on a kwok node.
fn running_deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": workload_spec(name, replicas)}),
    )
    .unwrap()
}

/// A StatefulSet whose pods (started at once) run on a kwok node.
fn running_statefulset(name: &str, replicas: i32) -> StatefulSet {
    let mut spec = workload_spec(name, replicas);
    spec["serviceName"] = name.into();
    spec["podManagementPolicy"] = "Parallel".into();
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// A Job of `parallelism` pods at once, on a kwok node (where they run until deleted).
fn running_job(name: &str, parallelism: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {"nodeName": NODE, "restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "busybox:1.36"}]}
            }
        }
    }))
    .unwrap()
}

/// The line's number in the demo log (`[000123] ...`, after a timestamp if any).
fn number(line: &str) -> u64 {
    let start = line
        .find('[')
        .unwrap_or_else(|| panic!("a numbered line: {line:?}"));
    line[start + 1..start + 7]
        .parse()
        .unwrap_or_else(|e| panic!("a numbered line: {line:?}: {e}"))
}

/// `kubectl logs ARGS` against the apiserver, as lines.
fn kubectl_logs(ns: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["logs", "-n", ns])
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl logs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The lines a following command (`kubectl logs -f`) prints in `seconds`, when it is stopped.
pub(crate) fn followed_for(command: Command, seconds: u32) -> Vec<String> {
    let out = Command::new("timeout")
        .arg(seconds.to_string())
        .arg(command.get_program())
        .args(command.get_args())
        .output()
        .expect("the command runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// An open streamed answer, read line by line as it arrives.
struct Lines {
    response: reqwest::Response,
    pending: Vec<u8>,
}

impl Lines {
    async fn open(
        server: &Server,
        path: &str,
        headers: &[(&str, &str)],
        token: Option<&str>,
    ) -> Lines {
        let mut req = server.http.get(format!("{}{path}", server.base));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let response = req.send().await.expect("k8sailor answers");
        assert_eq!(response.status(), 200, "GET {path}");
        Lines {
            response,
            pending: Vec::new(),
        }
    }

    /// The next line, waiting at most `SOON`.
    async fn next(&mut self) -> String {
        let deadline = Instant::now() + SOON;
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return String::from_utf8_lossy(&line[..i]).into_owned();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .expect("a line within SOON")
                .expect("the stream goes on")
                .expect("the stream is not over");
            self.pending.extend_from_slice(&chunk);
        }
    }

    /// The next Server-Sent Event: its `event` name (default `message`) and its data.
    async fn next_event(&mut self) -> (String, String) {
        let (mut event, mut data) = ("message".to_string(), None::<String>);
        loop {
            let line = self.next().await;
            if line.is_empty() {
                match data.take() {
                    Some(data) => return (event, data),
                    None => continue,
                }
            }
            if let Some(name) = line.strip_prefix("event: ") {
                event = name.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d.to_string());
            }
        }
    }
}

/// A namespace of the test's own, holding `pod`.
async fn namespace_with(test: &str, pod: Pod) -> TestNamespace {
    let ns = TestNamespace::new(test).await;
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    ns
}

async fn wait_running(server: &Server, ns: &str, pod: &str) {
    eventually(SOON, &format!("pod {pod} running"), || async {
        let (status, body) = server.get(&format!("/pods/{pod}?namespace={ns}")).await;
        (status == 200 && body["data"]["statusText"] == "Running").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_pods_log_is_read_tailed_and_followed_as_kubectl_shows_it() {
    let ns = namespace_with("logs-pod", running_pod("web", &["app"], json!({}))).await;
    let server = Server::start(&[]);
    wait_running(&server, &ns.name, "web").await;
    let path = |q: &str| format!("/pods/web/logs?namespace={}{q}", ns.name);

    // The whole log: what kubectl reads a moment later starts with it (the log only grows).
    let (status, ours) = server.get_text(&path("")).await;
    assert_eq!(status, 200, "{ours}");
    let theirs = kubectl_logs(&ns.name, &["web"]);
    let ours: Vec<&str> = ours.lines().collect();
    assert!(!ours.is_empty());
    assert!(
        theirs.len() >= ours.len() && theirs[..ours.len()] == ours[..],
        "k8sailor's log is not what kubectl shows:\n{ours:?}\n{theirs:?}"
    );

    // Tailed: the last 3 lines, a run of kubectl's log, at least as new as kubectl's before.
    let before = kubectl_logs(&ns.name, &["web", "--tail=1"]);
    let (_, tail) = server.get_text(&path("&tailLines=3")).await;
    let tail: Vec<&str> = tail.lines().collect();
    assert_eq!(tail.len(), 3, "{tail:?}");
    assert!(
        number(tail[2]) >= number(&before[0]),
        "{tail:?} is older than {before:?}"
    );
    let after = kubectl_logs(&ns.name, &["web"]);
    assert!(
        after.windows(3).any(|w| w == tail),
        "{tail:?} is not a run of kubectl's log"
    );

    // Timestamps, as the kubelet writes them.
    let (_, stamped) = server.get_text(&path("&tailLines=1&timestamps=true")).await;
    let stamp = stamped.split(' ').next().unwrap();
    assert!(
        stamp.len() > 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
        "{stamped:?}"
    );

    // Followed, as text: new lines arrive, in order, as kubectl logs -f shows them.
    let mut followed = Lines::open(&server, &path("&tailLines=1&follow=true"), &[], None).await;
    let mut ours = Vec::new();
    while ours.len() < 4 {
        ours.push(followed.next().await);
    }
    let seen: Vec<u64> = ours.iter().map(|l| number(l)).collect();
    assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
    // kubectl logs -f for a while: every line it followed, k8sailor's stream sends alike.
    let mut follow = Command::new(kubectl());
    follow
        .arg("--kubeconfig")
        .arg(&cluster().kubeconfig)
        .args(["logs", "-f", "-n", &ns.name, "web", "--tail=1"]);
    let theirs = followed_for(follow, 3);
    assert!(theirs.len() >= 3, "kubectl logs -f followed {theirs:?}");
    while ours
        .last()
        .is_none_or(|l: &String| number(l) < number(theirs.last().unwrap()))
    {
        ours.push(followed.next().await);
    }
    for line in &theirs {
        assert!(
            ours.contains(line),
            "{line:?} followed by kubectl is not in k8sailor's stream {ours:?} {theirs:?}"
        );
    }

    // Followed, as Server-Sent Events: one `data:` a line.
    let mut events = Lines::open(
        &server,
        &path("&tailLines=2&follow=true"),
        &[("accept", "text/event-stream")],
        None,
    )
    .await;
    let (a, b, c) = (
        events.next_event().await,
        events.next_event().await,
        events.next_event().await,
    );
    assert_eq!(a.0, "message");
    assert_eq!(number(&b.1), number(&a.1) + 1);
    assert_eq!(number(&c.1), number(&b.1) + 1);
}

/// `sinceTime`, as a client following a log asks to read on from its last line: the log from
/// the start of that time's second, as the apiserver reads it for `kubectl logs --since-time`.
#[tokio::test]
async fn a_pods_log_since_a_time_starts_where_kubectls_does() {
    let ns = namespace_with("logs-since", running_pod("web", &["app"], json!({}))).await;
    let server = Server::start(&[]);
    wait_running(&server, &ns.name, "web").await;
    let (stamped, _) = eventually(SOON, "three lines logged", || async {
        let lines = kubectl_logs(&ns.name, &["web", "--timestamps", "--tail=3"]);
        (lines.len() == 3).then_some(lines)
    })
    .await;
    // The last instant of a logged line's second: that line is read (rounded to the second,
    // as kube would send it, the time would be the next second and the line left out).
    let line = &stamped[1];
    let stamp = line.split(' ').next().unwrap();
    let since = format!("{}.999999999Z", &stamp[..19]);
    let (status, ours) = server
        .get_text(&format!(
            "/pods/web/logs?namespace={}&timestamps=true&sinceTime={since}",
            ns.name
        ))
        .await;
    assert_eq!(status, 200, "{ours}");
    let theirs = kubectl_logs(
        &ns.name,
        &["web", "--timestamps", &format!("--since-time={since}")],
    );
    let ours: Vec<&str> = ours.lines().collect();
    assert!(
        ours.contains(&line.as_str()),
        "{line:?}, of {since}'s second, is not in {ours:?}"
    );
    assert!(
        theirs.len() >= ours.len() && theirs[..ours.len()] == ours[..],
        "k8sailor's log since {since} is not what kubectl shows:\n{ours:?}\n{theirs:?}"
    );
}

#[tokio::test]
async fn logs_that_cannot_be_read_are_clear_4xx() {
    let ns = TestNamespace::new("logs-refused").await;
    let pods = ns.api::<Pod>();
    for pod in [
        running_pod("one", &["app"], json!({})),
        running_pod("two", &["app", "sidecar"], json!({})),
    ] {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // No node and no scheduler: it never starts.
    let mut pending = running_pod("pending", &["app"], json!({}));
    pending.spec.as_mut().unwrap().node_name = None;
    pods.create(&PostParams::default(), &pending).await.unwrap();
    let server = Server::start(&[]);
    wait_running(&server, &ns.name, "one").await;
    wait_running(&server, &ns.name, "two").await;
    let get = |path: String| {
        let server = &server;
        async move { server.get(&path).await }
    };
    let n = &ns.name;
    for (path, status, says) in [
        (format!("/pods/nope/logs?namespace={n}"), 404, "not found"),
        (
            format!("/pods/one/logs?namespace={n}&container=db"),
            400,
            "its containers are app",
        ),
        (format!("/pods/two/logs?namespace={n}"), 400, "app, sidecar"),
        (
            format!("/pods/pending/logs?namespace={n}"),
            400,
            "has not started",
        ),
        (
            format!("/pods/one/logs?namespace={n}&previous=true"),
            400,
            "no previous run",
        ),
        (
            format!("/pods/one/logs?namespace={n}&tailLines=-1"),
            400,
            "tailLines",
        ),
        (
            format!("/pods/one/logs?namespace={n}&sinceSeconds=0"),
            400,
            "sinceSeconds",
        ),
        (
            format!("/pods/one/logs?namespace={n}&follow=maybe"),
            400,
            "follow",
        ),
        (
            format!("/pods/one/logs?namespace={n}&sinceTime=yesterday"),
            400,
            "sinceTime",
        ),
        (
            format!("/pods/one/logs?namespace={n}&sinceTime=2026-01-01T00:00:00Z&sinceSeconds=5"),
            400,
            "at most one of sinceTime or sinceSeconds",
        ),
        (
            format!("/pods/logs?namespace={n}"),
            400,
            "labelSelector is required",
        ),
        (
            format!("/deployments/nope/logs?namespace={n}"),
            404,
            "not found",
        ),
        (
            format!("/replicasets/nope/logs?namespace={n}"),
            404,
            "not found",
        ),
        (format!("/jobs/nope/logs?namespace={n}"), 404, "not found"),
    ] {
        let (got, body) = get(path.clone()).await;
        assert_eq!(got, status, "{path}: {body}");
        assert_eq!(body["code"], status, "{path}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(says), "{path}: {error}");
    }
    // The second container is read when named.
    let (status, _) = server
        .get_text(&format!(
            "/pods/two/logs?namespace={n}&container=sidecar&tailLines=1"
        ))
        .await;
    assert_eq!(status, 200);
}

/// The merged log's events until `done` says enough, each (event, pod).
async fn events_until(
    stream: &mut Lines,
    mut done: impl FnMut(&[(String, Value)]) -> bool,
) -> Vec<(String, Value)> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&seen) {
        assert!(
            Instant::now() < deadline,
            "not within 60s; joined {:?}, left {:?}, cut {:?}, refused {:?}, lines from {:?}",
            pods_with(&seen, "joined"),
            pods_with(&seen, "left"),
            pods_with(&seen, "cut"),
            pods_with(&seen, "refused"),
            pods_with(&seen, "line"),
        );
        let (event, data) = stream.next_event().await;
        seen.push((event, serde_json::from_str(&data).unwrap()));
    }
    seen
}

fn pods_with(seen: &[(String, Value)], event: &str) -> BTreeSet<String> {
    seen.iter()
        .filter(|(e, _)| e == event)
        .map(|(_, d)| d["pod"].as_str().unwrap().to_string())
        .collect()
}

async fn scale(ns: &TestNamespace, name: &str, replicas: i32) {
    ns.api::<Deployment>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_deployments_merged_log_follows_its_pods_as_it_scales() {
    let ns = TestNamespace::new("logs-merged").await;
    ns.api::<Deployment>()
        .create(&PostParams::default(), &running_deployment("shop", 1))
        .await
        .unwrap();
    let server = Server::start(&[]);
    let path = format!(
        "/deployments/shop/logs?namespace={}&tailLines=1&follow=true",
        ns.name
    );
    let sse = [("accept", "text/event-stream")];
    let mut stream = Lines::open(&server, &path, &sse, None).await;
    let seen = events_until(&mut stream, |seen| !pods_with(seen, "line").is_empty()).await;
    assert_eq!(pods_with(&seen, "joined"), pods_with(&seen, "line"));
    let first = pods_with(&seen, "line");

    // Scaled up: the new pods join once they run, their lines tagged with them.
    scale(&ns, "shop", 3).await;
    let seen = events_until(&mut stream, |seen| {
        pods_with(seen, "line").difference(&first).count() == 2
    })
    .await;
    let joined = pods_with(&seen, "joined");
    assert_eq!(joined.len(), 2, "{seen:?}");
    assert!(joined.is_disjoint(&first), "{joined:?} {first:?}");
    let line = seen
        .iter()
        .find(|(e, d)| e == "line" && joined.contains(d["pod"].as_str().unwrap()))
        .unwrap();
    assert_eq!(line.1["container"], "app");
    number(line.1["line"].as_str().unwrap());

    // Scaled down: two pods leave as they go, the one left goes on.
    scale(&ns, "shop", 1).await;
    let seen = events_until(&mut stream, |seen| pods_with(seen, "left").len() == 2).await;
    let left: Vec<_> = seen.iter().filter(|(e, _)| e == "left").collect();
    assert!(
        left.iter().all(|(_, d)| d["reason"] == "the pod is gone"),
        "{left:?}"
    );
    let gone = pods_with(&seen, "left");
    let seen = events_until(&mut stream, |seen| seen.len() >= 6).await;
    let still = pods_with(&seen, "line");
    assert!(
        !still.is_empty() && still.is_disjoint(&gone),
        "{still:?} after {gone:?} left"
    );

    // As text, each line prefixed as kubectl logs --prefix does.
    let mut text = Lines::open(&server, &path, &[], None).await;
    let line = text.next().await;
    assert!(
        line.starts_with("[pod/shop-") && line.contains("/app] ["),
        "{line:?}"
    );

    // At most --max-log-streams pods: the answer says which pod was cut.
    scale(&ns, "shop", 3).await;
    let limited = Server::start(&["--max-log-streams", "2"]);
    eventually(SOON, "3 pods running", || async {
        let (_, body) = limited
            .get(&format!("/deployments/shop/pods?namespace={}", ns.name))
            .await;
        let running = body["data"].as_array().map_or(0, |pods| {
            pods.iter().filter(|p| p["statusText"] == "Running").count()
        });
        (running == 3).then_some(())
    })
    .await;
    let mut cut = Lines::open(&limited, &path, &sse, None).await;
    let seen = events_until(&mut cut, |seen| {
        !pods_with(seen, "cut").is_empty() && pods_with(seen, "joined").len() == 2
    })
    .await;
    let cut_event = seen.iter().find(|(e, _)| e == "cut").unwrap();
    assert_eq!(cut_event.1["maxLogStreams"], 2);
    assert!(!pods_with(&seen, "joined").contains(cut_event.1["pod"].as_str().unwrap()));
}

#[tokio::test]
async fn with_delegated_auth_logs_need_the_callers_own_get_pods_log() {
    let ns = namespace_with(
        "logs-auth",
        running_pod("web", &["app"], json!({"app": "web"})),
    )
    .await;
    let reader = account(&ns, "log-reader").await;
    let viewer = account(&ns, "pod-viewer").await;
    grant(
        &ns,
        &ns,
        &reader,
        vec![
            rule("", &["pods"], &["get", "list"]),
            rule("", &["pods/log"], &["get"]),
        ],
    )
    .await;
    grant(
        &ns,
        &ns,
        &viewer,
        vec![rule("", &["pods"], &["get", "list"])],
    )
    .await;
    let server = Server::start(&["--auth", "delegated"]);
    let pod_path = format!("/pods/web/logs?namespace={}&tailLines=1", ns.name);
    eventually(SOON, "the reader reads the log", || async {
        let (status, _) = server
            .send_as(
                Some(&reader.token),
                "GET",
                &format!("/pods/web?namespace={}", ns.name),
                None,
            )
            .await;
        (status == 200).then_some(())
    })
    .await;
    let (status, body) = eventually(SOON, "the pod running", || async {
        let res = server
            .http
            .get(format!("{}{pod_path}", server.base))
            .bearer_auth(&reader.token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        (status != 400).then_some((status, body))
    })
    .await
    .0;
    assert_eq!(status, 200, "{body}");
    number(body.lines().next().unwrap());

    let (status, body) = server
        .send_as(Some(&viewer.token), "GET", &pod_path, None)
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("pods/log"),
        "{body}"
    );

    // A merged log: the viewer may list the pods, but each pod's log is refused as it joins.
    let merged = format!(
        "/pods/logs?namespace={}&labelSelector=app%3Dweb&tailLines=1&follow=true",
        ns.name
    );
    let sse = [("accept", "text/event-stream")];
    let mut refused = Lines::open(&server, &merged, &sse, Some(&viewer.token)).await;
    let seen = events_until(&mut refused, |seen| !seen.is_empty()).await;
    assert_eq!(seen[0].0, "refused", "{seen:?}");
    assert!(
        seen[0].1["reason"].as_str().unwrap().contains("pods/log"),
        "{seen:?}"
    );
    let mut allowed = Lines::open(&server, &merged, &sse, Some(&reader.token)).await;
    let seen = events_until(&mut allowed, |seen| !pods_with(seen, "line").is_empty()).await;
    assert_eq!(
        pods_with(&seen, "line"),
        BTreeSet::from(["web".to_string()])
    );
}

/// Pods running in `ns` that `selector` picks, as k8sailor's cache shows them.
async fn running_pods(server: &Server, ns: &str, selector: &str) -> BTreeSet<String> {
    let (_, body) = server
        .get(&format!("/pods?namespace={ns}&labelSelector={selector}"))
        .await;
    body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["statusText"] == "Running")
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_statefulsets_and_a_jobs_logs_are_merged_and_tagged_with_their_own_pods() {
    let ns = TestNamespace::new("logs-kinds").await;
    ns.api::<StatefulSet>()
        .create(&PostParams::default(), &running_statefulset("db", 2))
        .await
        .unwrap();
    ns.api::<Job>()
        .create(&PostParams::default(), &running_job("batch", 2))
        .await
        .unwrap();
    // Picked by the StatefulSet's selector, yet not its pod: not in its log.
    ns.api::<Pod>()
        .create(
            &PostParams::default(),
            &running_pod("db-impostor", &["app"], json!({"app": "db"})),
        )
        .await
        .unwrap();
    let server = Server::start(&[]);
    let db = BTreeSet::from(["db-0".to_string(), "db-1".to_string()]);
    eventually(
        SOON,
        "the StatefulSet's pods and the impostor running",
        || async { (running_pods(&server, &ns.name, "app%3Ddb").await.len() == 3).then_some(()) },
    )
    .await;

    let path = format!(
        "/statefulsets/db/logs?namespace={}&tailLines=1&follow=true",
        ns.name
    );
    let mut stream = Lines::open(&server, &path, &[("accept", "text/event-stream")], None).await;
    let seen = events_until(&mut stream, |seen| {
        pods_with(seen, "line") == db && seen.iter().filter(|(e, _)| e == "line").count() >= 6
    })
    .await;
    assert_eq!(pods_with(&seen, "joined"), db, "{seen:?}");
    assert!(
        seen.iter()
            .filter(|(e, _)| e == "line")
            .all(|(_, d)| d["container"] == "app"),
        "{seen:?}"
    );

    // A Job's pods, as text: each line prefixed with its pod and container.
    let batch = eventually(SOON, "the Job's two pods running", || async {
        let pods = running_pods(&server, &ns.name, "job-name%3Dbatch").await;
        (pods.len() == 2).then_some(pods)
    })
    .await
    .0;
    let (status, text) = server
        .get_text(&format!(
            "/jobs/batch/logs?namespace={}&tailLines=2",
            ns.name
        ))
        .await;
    assert_eq!(status, 200, "{text}");
    let tagged: BTreeSet<String> = text
        .lines()
        .map(|line| {
            let (tag, rest) = line
                .strip_prefix("[pod/")
                .and_then(|l| l.split_once("/work] "))
                .unwrap_or_else(|| panic!("a tagged line: {line:?}"));
            number(rest);
            tag.to_string()
        })
        .collect();
    assert_eq!(tagged, batch, "{text}");
    assert_eq!(text.lines().count(), 4, "{text}");
}

/// A Role of `rules` and its binding to `user`, both named `name`.
async fn bind(ns: &TestNamespace, user: &crate::access::User, name: &str, rules: Value) {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": name}, "rules": rules
    }))
    .unwrap();
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": user.name, "namespace": ns.name}]
    }))
    .unwrap();
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Reads a stream until it ends, within `deadline`; what it sent meanwhile.
async fn ends_within(stream: &mut Lines, deadline: Duration, what: &str) -> String {
    let mut text = String::from_utf8_lossy(&stream.pending).into_owned();
    let ended = tokio::time::timeout(deadline, async {
        while let Ok(Some(chunk)) = stream.response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(ended.is_ok(), "{what}: still open after {deadline:?}");
    text
}

#[tokio::test]
async fn a_followed_log_ends_once_its_caller_may_no_longer_read_it() {
    let ns = namespace_with(
        "logs-revoked",
        running_pod("web", &["app"], json!({"app": "web"})),
    )
    .await;
    let reader = account(&ns, "reader").await;
    // Two bindings: the pods stay readable, their logs are taken away.
    bind(
        &ns,
        &reader,
        "see-pods",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
    )
    .await;
    bind(
        &ns,
        &reader,
        "read-logs",
        json!([{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]),
    )
    .await;
    let server = Server::start(&["--auth", "delegated"]);
    eventually(SOON, "RBAC evaluated in memory", || async {
        let (_, body) = server.probe("/readyz?verbose").await;
        body.contains("RBAC evaluated in memory").then_some(())
    })
    .await;
    let token = Some(reader.token.as_str());
    eventually(SOON, "pod web running", || async {
        let path = format!("/pods/web?namespace={}", ns.name);
        let (status, body) = server.send_as(token, "GET", &path, None).await;
        (status == 200 && body["data"]["statusText"] == "Running").then_some(())
    })
    .await;
    let pod_path = format!(
        "/pods/web/logs?namespace={}&tailLines=1&follow=true",
        ns.name
    );
    let mut pod_log = Lines::open(&server, &pod_path, &[], token).await;
    number(&pod_log.next().await);
    let merged_path = format!(
        "/pods/logs?namespace={}&labelSelector=app%3Dweb&tailLines=1&follow=true",
        ns.name
    );
    let sse = [("accept", "text/event-stream")];
    let mut merged = Lines::open(&server, &merged_path, &sse, token).await;
    events_until(&mut merged, |seen| !pods_with(seen, "line").is_empty()).await;

    ns.api::<RoleBinding>()
        .delete("read-logs", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Duration::from_secs(5);
    ends_within(&mut pod_log, deadline, "the pod's log").await;
    let rest = ends_within(&mut merged, deadline, "the merged log").await;
    assert!(
        rest.contains("event: ended") && rest.contains("no get pods/log on pod web"),
        "the merged log ends saying why: {rest}"
    );
    // The pods are still readable: only their logs were taken.
    let (status, _) = server
        .send_as(
            token,
            "GET",
            &format!("/pods/web?namespace={}", ns.name),
            None,
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn log_streams_count_in_their_clients_share_of_open_watches() {
    let ns = namespace_with(
        "logs-fair",
        running_pod("web", &["app"], json!({"app": "web"})),
    )
    .await;
    let server = Server::start(&["--max-watches", "2"]);
    wait_running(&server, &ns.name, "web").await;
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let (hog, quiet) = (from([127, 0, 0, 2]), from([127, 0, 0, 3]));
    let url = |path: &str| {
        format!(
            "{}{path}?namespace={}&tailLines=1&follow=true",
            server.base, ns.name
        )
    };
    let open = |client: &reqwest::Client, path: &str| client.get(url(path)).send();
    // A pod's log and a merged one: both are streams held in the share.
    let first = open(&hog, "/pods/web/logs").await.unwrap();
    assert_eq!(first.status(), 200);
    let second = hog
        .get(format!("{}&labelSelector=app%3Dweb", url("/pods/logs")))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let refused = open(&hog, "/pods/web/logs").await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = tokio::time::timeout(SOON, refused.json())
        .await
        .expect("a refusal, not a stream")
        .unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("client 127.0.0.2 holds 2 open watches, its share of 2"),
        "{body}"
    );
    // Another client is served as if the hog were not there.
    let served = open(&quiet, "/pods/web/logs").await.unwrap();
    assert_eq!(served.status(), 200);
    // Streams closed give their places back.
    drop((first, served));
    eventually(SOON, "the hog's place given back", || async {
        let again = open(&hog, "/pods/web/logs").await.unwrap();
        (again.status() == 200).then_some(())
    })
    .await;
    drop(second);
}

/// The server's count of open log streams, from /metrics.
async fn open_log_streams(server: &Server) -> u64 {
    let (_, metrics) = server.probe("/metrics").await;
    metrics
        .lines()
        .find(|l| l.starts_with("k8sailor_api_watches{") && l.contains("kind=\"pods/log\""))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn a_followed_log_ends_when_its_client_goes_and_at_shutdown() {
    let ns = namespace_with("logs-end", running_pod("web", &["app"], json!({}))).await;
    let server = Server::start(&[]);
    wait_running(&server, &ns.name, "web").await;
    let path = format!(
        "/pods/web/logs?namespace={}&tailLines=1&follow=true",
        ns.name
    );
    let mut followed = Lines::open(&server, &path, &[], None).await;
    followed.next().await;
    assert_eq!(open_log_streams(&server).await, 1);
    // The client goes: its stream, and the upstream request with it, is dropped.
    drop(followed);
    eventually(SOON, "the stream dropped", || async {
        (open_log_streams(&server).await == 0).then_some(())
    })
    .await;

    // Shutdown ends a followed log, as it ends watches: the body ends cleanly.
    let mut followed = Lines::open(&server, &path, &[], None).await;
    followed.next().await;
    server.signal("-TERM");
    let end = until_its_end(&mut followed, "a followed log at shutdown").await;
    assert!(end.is_ok(), "the stream broke instead of ending: {end:?}");
}

/// Reads a streamed answer until its end: Ok once it ended cleanly (the chunked body
/// complete), the error if it broke; panics if it is still open after SOON.
async fn until_its_end(lines: &mut Lines, what: &str) -> reqwest::Result<()> {
    tokio::time::timeout(SOON, async {
        loop {
            match lines.response.chunk().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: still open after {SOON:?}"))
}

/// A followed log ends after a watch's randomised lifetime (`--min-request-timeout` times
/// [1, 2); 1 s here, not the default 30 minutes), cleanly, and the client opens it again.
#[tokio::test]
async fn a_followed_log_ends_cleanly_after_its_lifetime_and_is_opened_again() {
    let ns = namespace_with(
        "logs-lifetime",
        running_pod("web", &["app"], json!({"app": "web"})),
    )
    .await;
    let server = Server::start(&["--min-request-timeout", "1s"]);
    wait_running(&server, &ns.name, "web").await;
    for path in [
        format!(
            "/pods/web/logs?namespace={}&tailLines=1&follow=true",
            ns.name
        ),
        format!(
            "/pods/logs?namespace={}&labelSelector=app%3Dweb&tailLines=1&follow=true",
            ns.name
        ),
    ] {
        let mut followed = Lines::open(&server, &path, &[], None).await;
        followed.next().await;
        let end = until_its_end(&mut followed, &path).await;
        assert!(
            end.is_ok(),
            "{path}: the stream broke instead of ending: {end:?}"
        );
        // The client resumes: the log is there to follow again.
        let mut again = Lines::open(&server, &path, &[], None).await;
        assert!(
            !again.next().await.is_empty(),
            "{path}: a line once opened again"
        );
    }
}

/// The server process's resident memory, in KiB.
fn resident_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A client that stops reading a 25 MB log costs the server a bounded amount of memory: the
/// upstream is read only as fast as the client reads, so what waits is in the sockets'
/// buffers, not in k8sailor.
#[tokio::test]
async fn a_client_that_stops_reading_does_not_grow_the_servers_memory() {
    let ns = namespace_with("logs-slow", running_pod("big", &["flood"], json!({}))).await;
    let server = Server::start(&[]);
    wait_running(&server, &ns.name, "big").await;
    let path = format!("/pods/big/logs?namespace={}", ns.name);
    // Warm up the route with a line of the log, never more: memory once taken stays taken.
    let (status, _) = server.get_text(&format!("{path}&tailLines=1")).await;
    assert_eq!(status, 200);
    let before = resident_kib(&server);
    let mut stalled = Lines::open(&server, &path, &[], None).await;
    assert!(stalled.next().await.starts_with("flood: "));
    // The client reads nothing more for a while; the server could have read it all by then.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = resident_kib(&server);
    let grown = during.saturating_sub(before);
    eprintln!("a stalled 25 MB log: the server's RSS {before} KiB, then {during} KiB");
    assert!(
        grown < 8 * 1024,
        "a stalled reader grew the server by {grown} KiB (from {before} to {during})"
    );
    // Yet far more than that was there to be read: the stalled client reads on.
    let mut bytes = 0;
    while bytes < 16 * 1024 * 1024 {
        bytes += stalled.next().await.len() + 1;
    }
}
