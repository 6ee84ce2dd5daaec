//! The reads every kind has, checked the same way for each kind served by the generic
//! routes: list, get, label and field selectors, paging, sorting and `watch=true`, from the
//! cache and from the live source.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::{
    SOON, Server, TestNamespace, deployment, eventually, eventually_shown, names,
};
use crate::watch::{Watch, summary};

/// Checks one kind's generic reads over three objects the caller made in `ns` through `api`:
/// `a` and `b` labelled `tier=web`, `c` labelled `tier=db`. The watch sees `a` relabelled
/// `tier=db` and `b` deleted.
async fn check_reads<K>(ns: &TestNamespace, resource: &str, api: &Api<K>)
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
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
    let patch = json!({"metadata": {"labels": {"tier": "db"}}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("relabel a");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
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
    check_reads(&ns, "replicasets", &api).await;
}

/// A Service of `tier`: a NodePort one for the db tier, ClusterIP for the others.
fn service(name: &str, tier: &str) -> Service {
    let kind = if tier == "db" {
        "NodePort"
    } else {
        "ClusterIP"
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": tier}},
        "spec": {"type": kind, "selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
    .unwrap()
}

fn ingress(name: &str, tier: &str, backend: &str) -> Ingress {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": tier}},
        "spec": {"rules": [{"host": format!("{name}.example"), "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": backend, "port": {"number": 80}}}}]}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn services_are_listed_got_selected_paged_and_watched() {
    let ns = TestNamespace::new("kind-svc").await;
    let api = ns.api::<Service>();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(&PostParams::default(), &service(name, tier))
            .await
            .expect("create the Service");
    }
    let server = Server::start(&["--namespace", &ns.name]);
    let (a, _) = eventually(SOON, "kubectl's columns", || async {
        let (status, body) = server
            .get(&format!("/services/a?namespace={}", ns.name))
            .await;
        (status == 200).then_some(body["data"].clone())
    })
    .await;
    assert_eq!(
        (&a["type"], &a["externalIp"], &a["ports"], &a["selector"]),
        (
            &json!("ClusterIP"),
            &json!("<none>"),
            &json!("80/TCP"),
            &json!({"app": "a"})
        ),
        "{a}"
    );
    assert!(
        a["clusterIp"].as_str().unwrap().starts_with("10.0.0."),
        "{a}"
    );
    for (selector, selected) in [
        ("spec.type%3DNodePort", vec!["c"]),
        ("spec.type%3DClusterIP", vec!["a", "b"]),
        ("spec.type!%3DClusterIP", vec!["c"]),
        ("spec.type%3DLoadBalancer", vec![]),
    ] {
        let (status, by_type) = server
            .get(&format!(
                "/services?namespace={}&fieldSelector={selector}",
                ns.name
            ))
            .await;
        assert_eq!(status, 200, "{selector}: {by_type}");
        assert_eq!(names(&by_type), selected, "{selector}: {by_type}");
    }
    drop(server);
    check_reads(&ns, "services", &api).await;
}

#[tokio::test]
async fn ingresses_are_listed_got_selected_paged_and_watched() {
    let ns = TestNamespace::new("kind-ing").await;
    let api = ns.api::<Ingress>();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(&PostParams::default(), &ingress(name, tier, "backend"))
            .await
            .expect("create the Ingress");
    }
    let server = Server::start(&["--namespace", &ns.name]);
    let (a, _) = eventually(SOON, "kubectl's columns", || async {
        let (status, body) = server
            .get(&format!("/ingresses/a?namespace={}", ns.name))
            .await;
        (status == 200).then_some(body["data"].clone())
    })
    .await;
    assert_eq!(
        (&a["class"], &a["hosts"], &a["ports"], &a["paths"][0]),
        (
            &json!("<none>"),
            &json!("a.example"),
            &json!("80"),
            &json!({"host": "a.example", "path": "/", "pathType": "Prefix",
                    "service": "backend", "port": "80"})
        ),
        "{a}"
    );
    drop(server);
    check_reads(&ns, "ingresses", &api).await;
}

/// A Deployment `web`, the Service `web` selecting its pods, an Ingress to that Service, and
/// decoys: a Service selecting other pods, an Ingress to that one.
#[tokio::test]
async fn services_and_ingresses_lead_to_a_deployments_pods() {
    let ns = TestNamespace::new("kind-rel").await;
    let pp = PostParams::default();
    ns.api::<Deployment>()
        .create(&pp, &deployment("web", 2, &[]))
        .await
        .unwrap();
    let services = ns.api::<Service>();
    services.create(&pp, &service("web", "x")).await.unwrap();
    services.create(&pp, &service("other", "x")).await.unwrap();
    let ingresses = ns.api::<Ingress>();
    ingresses
        .create(&pp, &ingress("site", "x", "web"))
        .await
        .unwrap();
    ingresses
        .create(&pp, &ingress("decoy", "x", "other"))
        .await
        .unwrap();
    for source in ["cache", "live"] {
        let server = Server::start(&["--namespace", &ns.name, "--source", source]);
        // The Service selects the pods by their labels, but their Deployment is found through
        // their ReplicaSet, which the cache's watch of ReplicaSets may bring after the pods.
        let what = format!("{source}: the Service's two pods, each of web");
        let pods = eventually_shown(SOON, &what, || async {
            let (status, body) = server
                .get(&format!("/services/web/pods?namespace={}", ns.name))
                .await;
            let of_web = |pods: &[Value]| pods.iter().all(|p| p["deployment"] == "web");
            match body["data"].as_array() {
                Some(pods) if status == 200 && pods.len() == 2 && of_web(pods) => Ok(body),
                _ => Err(format!("{status} {body}")),
            }
        })
        .await;
        assert_eq!(pods["data"][0]["deployment"], "web", "{source}: {pods}");
        let (_, none) = server
            .get(&format!("/services/other/pods?namespace={}", ns.name))
            .await;
        assert_eq!(names(&none), Vec::<String>::new(), "{source}");
        let (_, routed) = server
            .get(&format!("/deployments/web/services?namespace={}", ns.name))
            .await;
        assert_eq!(names(&routed), ["web"], "{source}: {routed}");
        let (_, entered) = server
            .get(&format!("/deployments/web/ingresses?namespace={}", ns.name))
            .await;
        assert_eq!(names(&entered), ["site"], "{source}: {entered}");
        let (status, missing) = server
            .get(&format!("/deployments/nope/services?namespace={}", ns.name))
            .await;
        assert_eq!(status, 404, "{source}: {missing}");
    }
}

/// Namespaces are cluster-scoped: each is taken to be in itself, so `?namespace=` and the
/// caller's namespaces apply to it as to what it holds. Two test namespaces, `a` labelled
/// with the test's tag, `b` without, then `b` labelled and `a` unlabelled.
#[tokio::test]
async fn namespaces_are_listed_got_selected_and_watched() {
    let a = TestNamespace::new("kind-ns-a").await;
    let b = TestNamespace::new("kind-ns-b").await;
    let api: Api<Namespace> = Api::all(a.client.clone());
    let tag = a.name.clone();
    let label = |name: &str, value: Option<&str>| {
        let api = api.clone();
        let patch = json!({"metadata": {"labels": {"k8sailor-e2e": value}}});
        let name = name.to_string();
        async move {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("label the namespace");
        }
    };
    label(&a.name, Some(&tag)).await;
    let selected = format!("/namespaces?labelSelector=k8sailor-e2e%3D{tag}");
    for source in ["cache", "live"] {
        let server = Server::start(&["--source", source]);
        eventually(SOON, "the labelled namespace", || async {
            (server.names(&selected).await? == [a.name.as_str()]).then_some(())
        })
        .await;
        let (status, one) = server.get(&format!("/namespaces/{}", b.name)).await;
        assert_eq!(status, 200, "{source}: {one}");
        assert_eq!(
            (&one["data"]["name"], &one["data"]["status"]),
            (&json!(b.name), &json!("Active")),
            "{source}"
        );
        let (status, _) = server.get("/namespaces/e2e-no-such-namespace").await;
        assert_eq!(status, 404, "{source}");
        let (_, by_name) = server
            .get(&format!(
                "/namespaces?fieldSelector=metadata.name%3D{},status.phase%3DActive",
                a.name
            ))
            .await;
        assert_eq!(names(&by_name), [a.name.as_str()], "{source}: {by_name}");
        let (status, bad) = server
            .get("/namespaces?fieldSelector=metadata.namespace%3Dx")
            .await;
        assert_eq!(status, 400, "{source}: {bad}");
        // Paged and sorted as every kind: the second page follows the first, name descending.
        let (_, first) = server.get("/namespaces?limit=1&sort=-name").await;
        let token = first["metadata"]["continue"]
            .as_str()
            .expect("a continue token");
        let (_, second) = server
            .get(&format!("/namespaces?limit=1&sort=-name&continue={token}"))
            .await;
        assert!(
            names(&first)[0] > names(&second)[0],
            "{source}: {first} then {second}"
        );
        // A namespace is in itself: asking for one namespace's objects finds it alone.
        let (_, within) = server
            .get(&format!("/namespaces?namespace={}", b.name))
            .await;
        assert_eq!(names(&within), [b.name.as_str()], "{source}: {within}");
    }

    let cache = Server::start(&[]);
    let live = Server::start(&["--source", "live"]);
    let path = format!("{selected}&watch=true");
    let mut watches = vec![
        Watch::open(&cache, &path, false).await,
        Watch::open(&live, &path, true).await,
    ];
    for watch in &mut watches {
        assert_eq!(
            summary(&watch.next().await),
            ("ADDED".into(), a.name.clone())
        );
        assert_eq!(watch.next().await["type"], "BOOKMARK");
    }
    label(&b.name, Some(&tag)).await;
    label(&a.name, None).await;
    for watch in &mut watches {
        assert_eq!(
            summary(&watch.next().await),
            ("ADDED".into(), b.name.clone())
        );
        assert_eq!(
            summary(&watch.next().await),
            ("DELETED".into(), a.name.clone()),
            "a left the selector"
        );
    }
}
