//! Versions only go forward: after a restart, when the last change was a deletion, the list's
//! resourceVersion is not lower than the one served before, and a watch resumed from that
//! version is answered (its changes, or 410 to start again), never 503 "newer than this
//! cache" until something unrelated happens to change.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use serde_json::Value;

use crate::support::{SOON, Server, TestNamespace, eventually, names, pod};
use crate::watch::{Watch, summary};

fn version_of(list: &Value) -> u64 {
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a list with a numeric resourceVersion: {list}"))
}

/// The events up to the BOOKMARK, and the version the BOOKMARK says the watch is synced at.
async fn until_synced(events: &mut Watch) -> (Vec<(String, String)>, u64) {
    let mut before = Vec::new();
    loop {
        let event = events.next().await;
        if event["type"] == "BOOKMARK" {
            let version = event["object"]["resourceVersion"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("a numeric version: {event}"));
            return (before, version);
        }
        before.push(summary(&event));
    }
}

#[tokio::test]
async fn a_restart_after_a_deletion_never_takes_a_version_back() {
    let ns = TestNamespace::new("versions-restart").await;
    for name in ["a", "b"] {
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod(name, &[]))
            .await
            .unwrap();
    }
    let list = format!("/pods?namespace={}", ns.name);
    let watch = format!("{list}&watch=true");
    // The live source's versions are the apiserver's own: it needs no care, and shows it.
    for source in ["cache", "live"] {
        let args = ["--namespace", ns.name.as_str(), "--source", source];
        let server = Server::start(&args);
        if source == "cache" {
            eventually(SOON, "both pods", || async {
                (names(&server.get(&list).await.1).len() == 2).then_some(())
            })
            .await;
            // The last change of the kind is a deletion.
            ns.api::<Pod>()
                .delete("b", &DeleteParams::default().grace_period(0))
                .await
                .unwrap();
        }
        let (body, _) = eventually(SOON, "b gone", || async {
            let (_, body) = server.get(&list).await;
            (names(&body) == ["a"]).then_some(body)
        })
        .await;
        let listed = version_of(&body);
        let (_, synced) = until_synced(&mut Watch::open(&server, &watch, false).await).await;
        let served = synced.max(listed);
        drop(server);

        let server = Server::start(&args);
        let (status, body) = server.get(&list).await;
        assert_eq!(status, 200, "{source}: {body}");
        assert_eq!(names(&body), ["a"], "{source}");
        let relisted = version_of(&body);
        assert!(
            relisted >= served,
            "{source}: listed at {relisted} after the restart, {served} was served before"
        );

        // Resumed from the version served: its changes, or start again; not "ahead".
        let resume = format!("{watch}&resourceVersion={served}");
        let answer = server
            .http
            .get(format!("{}{resume}", server.base))
            .send()
            .await
            .expect("k8sailor answers");
        let status = answer.status().as_u16();
        drop(answer);
        let mut events = match status {
            200 => Watch::open(&server, &resume, false).await,
            // As the apiserver answers a version it no longer keeps: list and watch again.
            410 => Watch::open(&server, &watch, false).await,
            other => panic!("{source}: a watch resumed from {served} after a restart: {other}"),
        };
        let (before, synced) = until_synced(&mut events).await;
        assert!(before.len() <= 1, "{source}: {before:?}");
        assert!(
            synced >= served,
            "{source}: synced at {synced}, {served} served before"
        );
        // And it goes on with what happens next.
        let name = format!("c-{source}");
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod(&name, &[]))
            .await
            .unwrap();
        let next = events.until(|e| summary(e).1 == name).await;
        assert_eq!(next.last(), Some(&("ADDED".to_string(), name)), "{source}");
        ns.api::<Pod>()
            .delete(
                &format!("c-{source}"),
                &DeleteParams::default().grace_period(0),
            )
            .await
            .unwrap();
    }
}
