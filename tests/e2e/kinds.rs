//! The reads every kind has, checked the same way for each kind served by the generic
//! routes: list, get, label and field selectors, paging, sorting and `watch=true`, from the
//! cache and from the live source.

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, eventually, names};
use crate::watch::{Watch, summary};

/// Checks one kind's generic reads over three objects the caller made in `ns`: `a` and `b`
/// labelled `tier=web`, `c` labelled `tier=db`. `relabel` moves `a` to `tier=db`; `remove`
/// deletes `b`.
async fn check_reads<R, RF, D, DF>(ns: &TestNamespace, resource: &str, relabel: R, remove: D)
where
    R: FnOnce() -> RF,
    RF: Future<Output = ()>,
    D: FnOnce() -> DF,
    DF: Future<Output = ()>,
{
    for source in ["cache", "live"] {
        let server = Server::start(&["--namespace", &ns.name, "--source", source]);
        let list = format!("/{resource}?namespace={}", ns.name);
        eventually(SOON, "the three objects listed", || async {
            (server.names(&list).await? == ["a", "b", "c"]).then_some(())
        })
        .await;

        let (status, one) = server
            .get(&format!("/{resource}/c?namespace={}", ns.name))
            .await;
        assert_eq!(status, 200, "{source}: {one}");
        assert_eq!(
            (&one["data"]["name"], &one["data"]["namespace"]),
            (&json!("c"), &json!(ns.name)),
            "{source}"
        );
        let (status, missing) = server
            .get(&format!("/{resource}/nope?namespace={}", ns.name))
            .await;
        assert_eq!(status, 404, "{source}: {missing}");
        assert!(
            missing["error"].as_str().unwrap().contains("\"nope\""),
            "{missing}"
        );

        let (_, web) = server
            .get(&format!("{list}&labelSelector=tier%3Dweb"))
            .await;
        assert_eq!(names(&web), ["a", "b"], "{source}");
        let (_, not_a) = server
            .get(&format!("{list}&fieldSelector=metadata.name!%3Da"))
            .await;
        assert_eq!(names(&not_a), ["b", "c"], "{source}");
        let (status, bad) = server
            .get(&format!("{list}&fieldSelector=spec.nodeName%3Dx"))
            .await;
        assert_eq!(status, 400, "{source}: {bad}");
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .contains("field label not supported"),
            "{bad}"
        );

        let (_, sorted) = server.get(&format!("{list}&sort=-name")).await;
        assert_eq!(names(&sorted), ["c", "b", "a"], "{source}");
        let (_, first) = server.get(&format!("{list}&limit=2")).await;
        assert_eq!(names(&first), ["a", "b"], "{source}");
        let token = first["metadata"]["continue"]
            .as_str()
            .expect("a continue token");
        let (_, rest) = server
            .get(&format!("{list}&limit=2&continue={token}"))
            .await;
        assert_eq!(names(&rest), ["c"], "{source}");
    }

    let cache = Server::start(&["--namespace", &ns.name]);
    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let path = format!(
        "/{resource}?namespace={}&labelSelector=tier%3Dweb&watch=true",
        ns.name
    );
    let mut watches = vec![
        Watch::open(&cache, &path, false).await,
        Watch::open(&live, &path, true).await,
    ];
    for watch in &mut watches {
        let mut initial = vec![summary(&watch.next().await), summary(&watch.next().await)];
        initial.sort();
        assert_eq!(
            initial,
            [("ADDED".into(), "a".into()), ("ADDED".into(), "b".into())]
        );
        assert_eq!(watch.next().await["type"], "BOOKMARK");
    }
    relabel().await;
    remove().await;
    for watch in &mut watches {
        let mut changes = Vec::new();
        while changes.len() < 2 {
            let event: Value = watch.next().await;
            let change = summary(&event);
            // Status updates of `b` before its deletion are MODIFIED; skip them.
            if change.0 != "MODIFIED" {
                changes.push(change);
            }
        }
        changes.sort();
        assert_eq!(
            changes,
            [
                ("DELETED".into(), "a".into()),
                ("DELETED".into(), "b".into())
            ],
            "a left the selector, b was deleted"
        );
    }
}

fn replicaset(name: &str, tier: &str) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": tier}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"rs": name}},
            "template": {
                "metadata": {"labels": {"rs": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn replicasets_are_listed_got_selected_paged_and_watched() {
    let ns = TestNamespace::new("kind-rs").await;
    let api = ns.api::<ReplicaSet>();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(&PostParams::default(), &replicaset(name, tier))
            .await
            .expect("create the ReplicaSet");
    }
    let server = Server::start(&["--namespace", &ns.name]);
    let (a, _) = eventually(SOON, "kubectl's columns", || async {
        let (status, body) = server
            .get(&format!("/replicasets/a?namespace={}", ns.name))
            .await;
        (status == 200).then_some(body["data"].clone())
    })
    .await;
    drop(server);
    assert_eq!(
        (&a["desired"], &a["current"], &a["ready"], &a["images"]),
        (&json!(0), &json!(0), &json!(0), &json!(["nginx:1.27"])),
        "{a}"
    );
    check_reads(
        &ns,
        "replicasets",
        || async {
            let patch = json!({"metadata": {"labels": {"tier": "db"}}});
            api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("relabel a");
        },
        || async {
            api.delete("b", &DeleteParams::default())
                .await
                .expect("delete b");
        },
    )
    .await;
}
