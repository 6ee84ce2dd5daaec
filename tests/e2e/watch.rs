//! Live updates against the real control plane: `watch=true` on the list routes, from the
//! cache and from the live source, as JSON lines and as Server-Sent Events.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, deployment};

/// An open watch answer, read event by event.
pub(crate) struct Watch {
    response: reqwest::Response,
    buffer: String,
    /// Server-Sent Events (blocks ending in a blank line) rather than JSON lines.
    sse: bool,
    /// The `id` of the last Server-Sent Event read: what an EventSource sends back as
    /// `Last-Event-ID` when it reconnects.
    pub(crate) last_id: Option<String>,
}

impl Watch {
    pub(crate) async fn open(server: &Server, path: &str, sse: bool) -> Watch {
        Watch::open_with(server, path, sse, &[]).await
    }

    /// [`Watch::open`] with extra request headers.
    pub(crate) async fn open_with(
        server: &Server,
        path: &str,
        sse: bool,
        headers: &[(&str, &str)],
    ) -> Watch {
        let mut req = server.http.get(format!("{}{path}", server.base));
        if sse {
            req = req.header("Accept", "text/event-stream");
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let response = req.send().await.expect("k8sailor answers");
        assert_eq!(response.status(), 200, "GET {path}");
        let content_type = response.headers()["content-type"].to_str().unwrap();
        let expected = if sse {
            "text/event-stream"
        } else {
            "application/x-ndjson"
        };
        assert_eq!(content_type, expected);
        Watch {
            response,
            buffer: String::new(),
            sse,
            last_id: None,
        }
    }

    /// The next event, `{"type":..,"object":..}`; panics if none comes within `SOON`.
    pub(crate) async fn next(&mut self) -> Value {
        let deadline = Instant::now() + SOON;
        loop {
            let separator = if self.sse { "\n\n" } else { "\n" };
            if let Some(end) = self.buffer.find(separator) {
                let block: String = self.buffer.drain(..end + separator.len()).collect();
                let json = if self.sse {
                    if let Some(id) = block.lines().find_map(|l| l.strip_prefix("id: ")) {
                        self.last_id = Some(id.to_string());
                    }
                    // Keep-alive comments carry no data.
                    match block.lines().find_map(|l| l.strip_prefix("data: ")) {
                        Some(data) => data.to_string(),
                        None => continue,
                    }
                } else {
                    block
                };
                return serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no event within {SOON:?}; so far: {}", self.buffer))
                .expect("the stream reads")
                .expect("the stream goes on");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events until one satisfies `done`; all of them, that one included, as (type, name).
    pub(crate) async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            seen.push(summary(&event));
            if done(&event) {
                return seen;
            }
        }
    }
}

pub(crate) fn summary(event: &Value) -> (String, String) {
    let object = &event["object"];
    let name = object["name"].as_str().unwrap_or_default();
    (
        event["type"].as_str().unwrap().to_string(),
        name.to_string(),
    )
}

fn is(event: &Value, kind: &str, name: &str) -> bool {
    summary(event) == (kind.to_string(), name.to_string())
}

#[tokio::test]
async fn a_watch_follows_deployments_in_and_out_of_its_selector_from_cache_and_live() {
    let ns = TestNamespace::new("watch").await;
    let deployments = ns.api::<Deployment>();
    let pp = PostParams::default();
    deployments
        .create(&pp, &deployment("before", 1, &[("tier", "web")]))
        .await
        .unwrap();
    let cache = Server::start(&["--namespace", &ns.name]);
    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let path = format!(
        "/deployments?namespace={}&labelSelector=tier%3Dweb&watch=true",
        ns.name
    );
    let mut watches = vec![
        Watch::open(&cache, &path, false).await,
        Watch::open(&live, &path, false).await,
    ];
    for watch in &mut watches {
        assert_eq!(
            summary(&watch.next().await),
            ("ADDED".into(), "before".into())
        );
        let bookmark = watch.next().await;
        assert_eq!(bookmark["type"], "BOOKMARK");
        assert_eq!(bookmark["object"]["initialEventsEnd"], true);
    }

    deployments
        .create(&pp, &deployment("web", 1, &[("tier", "web")]))
        .await
        .unwrap();
    deployments
        .create(&pp, &deployment("db", 1, &[("tier", "db")]))
        .await
        .unwrap();
    let merge = |patch: Value| Patch::Merge(patch);
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"tier": "db"}}})),
        )
        .await
        .unwrap();
    deployments
        .delete("before", &DeleteParams::default())
        .await
        .unwrap();

    for (source, watch) in ["cache", "live"].iter().zip(&mut watches) {
        let mut scaled = false;
        let mut seen = Vec::new();
        loop {
            let event = watch.next().await;
            if is(&event, "MODIFIED", "web") && event["object"]["replicas"] == 3 {
                scaled = true;
            }
            seen.push(summary(&event));
            if is(&event, "DELETED", "before") {
                break;
            }
        }
        // The deployment controller updates statuses meanwhile: as many MODIFIED events as
        // it makes; what must hold is the order of the rest, and that db never shows.
        let changes: Vec<_> = seen.iter().filter(|(t, _)| t != "MODIFIED").collect();
        assert_eq!(
            changes,
            [
                &("ADDED".to_string(), "web".to_string()),
                &("DELETED".to_string(), "web".to_string()),
                &("DELETED".to_string(), "before".to_string()),
            ],
            "{source}: {seen:?}"
        );
        assert!(scaled, "{source}: the scale shows as MODIFIED: {seen:?}");
        assert!(
            !seen.iter().any(|(_, name)| name == "db"),
            "{source}: {seen:?}"
        );
    }
}

#[tokio::test]
async fn an_event_source_sees_a_deployments_pods_appear_with_their_deployment() {
    let ns = TestNamespace::new("watch-sse").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let mut watch = Watch::open(
        &server,
        &format!("/pods?namespace={}&watch=true", ns.name),
        true,
    )
    .await;
    assert_eq!(watch.next().await["type"], "BOOKMARK", "no pods yet");

    // How soon is bench/run's watch-delivery figure; here, that they come, each once named.
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web", 2, &[]))
        .await
        .unwrap();
    // Pods and ReplicaSets come on separate watches: a pod's first event may precede its
    // ReplicaSet's, so its Deployment may show on a later event of the pod.
    let mut added = std::collections::BTreeSet::new();
    let mut of_web = std::collections::BTreeSet::new();
    while added.len() < 2 || of_web.len() < 2 {
        let event = watch.next().await;
        let name = event["object"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match event["type"].as_str() {
            Some("ADDED") => added.insert(name.clone()),
            Some("MODIFIED") => true,
            _ => panic!("only pods appearing: {event}"),
        };
        if event["object"]["deployment"] == "web" {
            of_web.insert(name);
        }
    }
    assert_eq!(added, of_web);
    assert!(added.iter().all(|n| n.starts_with("web-")), "{added:?}");
    let first = added.first().unwrap().clone();

    ns.api::<Deployment>()
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    let seen = watch
        .until(|e| e["type"] == "DELETED" && e["object"]["name"] == first.as_str())
        .await;
    assert!(seen.iter().all(|(t, _)| t != "ERROR"), "{seen:?}");
}

#[tokio::test]
async fn open_watches_end_on_sigterm_and_do_not_hold_the_exit() {
    let ns = TestNamespace::new("watch-term").await;
    let mut server = Server::start(&[
        "--namespace",
        &ns.name,
        "--shutdown-delay",
        "0s",
        "--shutdown-grace",
        "60s",
    ]);
    let path = format!("/deployments?namespace={}&watch=true", ns.name);
    let mut ndjson = Watch::open(&server, &path, false).await;
    let mut sse = Watch::open(&server, &path, true).await;
    for watch in [&mut ndjson, &mut sse] {
        assert_eq!(watch.next().await["type"], "BOOKMARK");
    }
    server.signal("-TERM");
    // Well within the 60 s grace: the open watches did not hold the exit.
    assert_eq!(server.exit_code(Duration::from_secs(10)), Some(0));
    for watch in [&mut ndjson, &mut sse] {
        let rest = tokio::time::timeout(SOON, watch.response.chunk()).await;
        assert!(
            matches!(rest, Ok(Ok(None))),
            "the stream ended cleanly: {rest:?}"
        );
    }
}

#[tokio::test]
async fn a_deployments_pods_watch_takes_a_rollouts_new_pods_and_no_lookalike() {
    let ns = TestNamespace::new("watch-rel").await;
    let deployments = ns.api::<Deployment>();
    deployments
        .create(&PostParams::default(), &deployment("web", 1, &[]))
        .await
        .unwrap();
    let cache = Server::start(&["--namespace", &ns.name]);
    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let pods = format!("/deployments/web/pods?namespace={}", ns.name);
    let (first, _) = crate::support::eventually(SOON, "web's pod", || async {
        cache
            .names(&pods)
            .await
            .and_then(|names| names.first().cloned())
    })
    .await;
    let path = format!("{pods}&watch=true");
    let mut watches = vec![
        Watch::open(&cache, &path, false).await,
        Watch::open(&live, &path, true).await,
    ];
    for watch in &mut watches {
        assert_eq!(
            summary(&watch.next().await),
            ("ADDED".into(), first.clone())
        );
        assert_eq!(watch.next().await["type"], "BOOKMARK");
    }

    // Same labels as web's pods, but no owner: never web's.
    ns.api::<k8s_openapi::api::core::v1::Pod>()
        .create(
            &PostParams::default(),
            &crate::support::pod("lookalike", &[("app", "web")]),
        )
        .await
        .unwrap();
    // A new template: the rollout's new ReplicaSet brings a pod of its own.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    for (source, watch) in ["cache", "live"].iter().zip(&mut watches) {
        let seen = watch
            .until(|e| e["type"] == "ADDED" && e["object"]["name"] != first.as_str())
            .await;
        assert!(
            !seen.iter().any(|(_, name)| name == "lookalike"),
            "{source}: {seen:?}"
        );
        let (_, new_pod) = seen.last().unwrap();
        assert!(new_pod.starts_with("web-"), "{source}: {seen:?}");
    }
}
