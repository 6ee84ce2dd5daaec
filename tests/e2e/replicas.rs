//! Replicas that share nothing: two k8sailor processes watching the same apiserver page one
//! list between them, and a watch resumes on either from the version the client last saw.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, eventually, names, pod};
use crate::watch::{Watch, summary};

/// Two servers of one namespace reading from `source`, both synced and both showing the same
/// `count` pods.
async fn replicas(ns: &TestNamespace, source: &str, count: usize) -> [Server; 2] {
    let args = ["--namespace", &ns.name, "--source", source];
    let servers = [Server::start(&args), Server::start(&args)];
    let list = format!("/pods?namespace={}", ns.name);
    for server in &servers {
        eventually(SOON, "both replicas to see every pod", || async {
            (names(&server.get(&list).await.1).len() == count).then_some(())
        })
        .await;
    }
    servers
}

async fn create_pods(ns: &TestNamespace, names: impl IntoIterator<Item = String>) {
    for name in names {
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod(&name, &[("round", "1")]))
            .await
            .unwrap();
    }
}

async fn relabel(ns: &TestNamespace, name: &str, round: &str) {
    let patch = json!({"metadata": {"labels": {"round": round}}});
    ns.api::<Pod>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until every server shows the pods of `list` exactly as `expected` says (name, round).
async fn all_show(servers: &[Server], list: &str, expected: &[(&str, &str)]) {
    for server in servers {
        eventually(SOON, "every replica to see the changes", || async {
            let (_, body) = server.get(list).await;
            let shown: Vec<(String, String)> = body["data"]
                .as_array()?
                .iter()
                .map(|p| {
                    let round = p["labels"]["round"].as_str().unwrap_or_default();
                    (p["name"].as_str().unwrap().to_string(), round.to_string())
                })
                .collect();
            let want: Vec<(String, String)> = expected
                .iter()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect();
            (shown == want).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn a_list_paged_alternately_through_two_replicas_returns_each_object_once() {
    paged_alternately("cache").await;
}

/// The live source rebuilds a page with the apiserver's list at the token's version.
#[tokio::test]
async fn live_replicas_page_alternately_too() {
    paged_alternately("live").await;
}

async fn paged_alternately(source: &str) {
    let ns = TestNamespace::new(&format!("replica-paging-{source}")).await;
    let servers = replicas(&ns, source, 0).await;
    // Created after both started: both replicas' histories hold every one of them.
    create_pods(&ns, (0..12).map(|i| format!("p{i:02}"))).await;
    let list = format!("/pods?namespace={}", ns.name);
    let all: Vec<(String, &str)> = (0..12).map(|i| (format!("p{i:02}"), "1")).collect();
    let all: Vec<(&str, &str)> = all.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    all_show(&servers, &list, &all).await;

    let (status, first) = servers[0].get(&format!("{list}&limit=3")).await;
    assert_eq!(status, 200, "{first}");
    let rv = first["metadata"]["resourceVersion"].clone();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut record = |page: &Value| {
        for p in page["data"].as_array().unwrap() {
            seen.push((
                p["name"].as_str().unwrap().to_string(),
                p["labels"]["round"].as_str().unwrap().to_string(),
            ));
        }
    };
    record(&first);
    let mut token = first["metadata"]["continue"].as_str().map(str::to_string);

    // The cluster changes while the list is paged: a pod not yet returned goes, one is
    // relabelled, one is new. Both replicas see it all before the next page is asked for.
    ns.api::<Pod>()
        .delete("p08", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    relabel(&ns, "p10", "2").await;
    create_pods(&ns, ["p12".to_string()]).await;
    let mut now = all.clone();
    now.retain(|(n, _)| *n != "p08");
    now.iter_mut()
        .filter(|(n, _)| *n == "p10")
        .for_each(|p| p.1 = "2");
    now.push(("p12", "1"));
    all_show(&servers, &list, &now).await;

    let mut pages = 1;
    while let Some(t) = token {
        // Each page from the other replica than the page before.
        let server = &servers[pages % 2];
        let (status, page) = server.get(&format!("{list}&limit=3&continue={t}")).await;
        assert_eq!(status, 200, "page {pages}: {page}");
        assert_eq!(
            page["metadata"]["resourceVersion"], rv,
            "every page is of the first page's version"
        );
        record(&page);
        token = page["metadata"]["continue"].as_str().map(str::to_string);
        pages += 1;
    }
    // Exactly the list at the first page's version: p08 still there, p10 as it was, no p12.
    let expected: Vec<(String, String)> = all
        .iter()
        .map(|(n, r)| (n.to_string(), r.to_string()))
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(pages, 4);
}

/// The pod changes the apiserver's own watch reports after `version`, as (type, name), up to
/// and including `last`.
async fn apiserver_changes_after(
    ns: &TestNamespace,
    version: &str,
    last: (&str, &str),
) -> Vec<(String, String)> {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};
    let mut events = ns
        .api::<Pod>()
        .watch(&WatchParams::default().timeout(20), version)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        let (kind, pod) = match event {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("the apiserver's watch failed: {e:?}"),
        };
        let name = pod.metadata.name.unwrap();
        let done = (kind, name.as_str()) == last;
        seen.push((kind.to_string(), name));
        if done {
            return seen;
        }
    }
    panic!("the apiserver's watch ended before {last:?}: {seen:?}");
}

#[tokio::test]
async fn a_watch_resumed_on_another_replica_gets_exactly_the_changes_after_its_version() {
    let ns = TestNamespace::new("replica-resume").await;
    let servers = replicas(&ns, "cache", 0).await;
    create_pods(&ns, ["a", "b", "c"].map(String::from)).await;
    let list = format!("/pods?namespace={}", ns.name);
    all_show(&servers, &list, &[("a", "1"), ("b", "1"), ("c", "1")]).await;

    // A client watches replica 0 until it is synced, then goes away.
    let watch = format!("/pods?namespace={}&watch=true", ns.name);
    let mut first = Watch::open(&servers[0], &watch, false).await;
    let mut initial = Vec::new();
    let bookmark = loop {
        let event = first.next().await;
        if event["type"] == "BOOKMARK" {
            break event;
        }
        initial.push(summary(&event));
    };
    assert_eq!(initial.len(), 3);
    let version = bookmark["object"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    drop(first);

    // What it misses: an update, a deletion, an addition, in this order.
    relabel(&ns, "a", "2").await;
    ns.api::<Pod>()
        .delete("b", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    create_pods(&ns, ["d".to_string()]).await;
    all_show(&servers, &list, &[("a", "2"), ("c", "1"), ("d", "1")]).await;

    // Resumed on the other replica: what the apiserver's own watch from that version tells
    // (a deletion may come as a MODIFIED, deletionTimestamp set, then DELETED), then a
    // BOOKMARK; nothing else.
    let mut expected = apiserver_changes_after(&ns, &version, ("ADDED", "d")).await;
    assert!(expected.len() >= 3, "{expected:?}");
    expected.push(("BOOKMARK".to_string(), String::new()));
    let resume = format!("{watch}&resourceVersion={version}");
    let mut resumed = Watch::open(&servers[1], &resume, false).await;
    let missed = resumed.until(|e| e["type"] == "BOOKMARK").await;
    assert_eq!(missed, expected);
    // Then live changes, as any watch.
    relabel(&ns, "c", "2").await;
    assert_eq!(
        summary(&resumed.next().await),
        ("MODIFIED".to_string(), "c".to_string())
    );

    // An EventSource reconnecting sends the id of the last event it got: each event's id is
    // the version it brought the client to, so it misses nothing and gets nothing twice.
    let mut events = Watch::open(&servers[0], &resume, true).await;
    assert_eq!(
        summary(&events.next().await),
        ("MODIFIED".to_string(), "a".to_string())
    );
    let last_id = events
        .last_id
        .clone()
        .expect("events carry their version as id");
    drop(events);
    let mut reconnected =
        Watch::open_with(&servers[1], &watch, true, &[("Last-Event-ID", &last_id)]).await;
    let rest = reconnected.until(|e| e["type"] == "BOOKMARK").await;
    // Everything after the first change, the change to c made since included.
    let mut after_a = expected[1..expected.len() - 1].to_vec();
    after_a.push(("MODIFIED".to_string(), "c".to_string()));
    after_a.push(("BOOKMARK".to_string(), String::new()));
    assert_eq!(rest, after_a);
}

#[tokio::test]
async fn a_watch_from_a_version_older_than_the_history_is_told_to_start_again() {
    let ns = TestNamespace::new("replica-expired").await;
    let server = Server::start(&["--namespace", &ns.name, "--change-history", "2"]);
    create_pods(&ns, ["a", "b", "c", "d"].map(String::from)).await;
    let list = format!("/pods?namespace={}", ns.name);
    let (body, _) = eventually(SOON, "four pods", || async {
        let (_, body) = server.get(&list).await;
        (names(&body).len() == 4).then_some(body)
    })
    .await;
    let versions: Vec<u64> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["resourceVersion"].as_str().unwrap().parse().unwrap())
        .collect();
    let watch = format!("/pods?namespace={}&watch=true", ns.name);
    // Two changes are kept: from the second-newest version on, a watch resumes...
    let kept = versions.iter().max().unwrap() - 1;
    let mut resumed = Watch::open(&server, &format!("{watch}&resourceVersion={kept}"), false).await;
    assert_eq!(
        summary(&resumed.next().await),
        ("ADDED".to_string(), "d".to_string())
    );
    // ...before them it is 410 in the envelope, as the apiserver answers a compacted version.
    let oldest = versions.iter().min().unwrap();
    for path in [
        format!("{watch}&resourceVersion={oldest}"),
        format!("{watch}&resourceVersion=1"),
    ] {
        let (status, body) = server.get(&path).await;
        assert_eq!(status, 410, "{path}: {body}");
        assert_eq!(body["code"], 410);
        assert!(
            body["error"].as_str().unwrap().contains("too old"),
            "{body}"
        );
    }
    // Not a version at all: the client's mistake.
    let (status, body) = server.get(&format!("{watch}&resourceVersion=soon")).await;
    assert_eq!(status, 400, "{body}");
    // A list is of the newest state; a version there is refused rather than ignored.
    let (status, body) = server.get(&format!("{list}&resourceVersion={kept}")).await;
    assert_eq!(status, 400, "{body}");
}
