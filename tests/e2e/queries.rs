//! The list query beyond what other modules check, against the real apiserver: every sort
//! field and direction (paged too), the field selectors of Deployments, Services and
//! Namespaces, the continue-token answers a client must handle (410 for an old token or one
//! older than the change history, 503 with `Retry-After` from a replica behind), and the
//! keep-alive comments of a quiet event stream.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{SOON, Server, TestNamespace, deployment, eventually, names, pod};

/// The JSON inside a continue token.
fn open_token(token: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token).expect("base64")).expect("JSON")
}

fn seal_token(token: &Value) -> String {
    URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The continue token of the first page of `path` (which must have more than one page).
async fn first_token(server: &Server, path: &str) -> String {
    let (status, page) = server.get(path).await;
    assert_eq!(status, 200, "{page}");
    page["metadata"]["continue"]
        .as_str()
        .unwrap_or_else(|| panic!("a continue token: {page}"))
        .to_string()
}

/// Two pods in `namespace` and a continue token for `/pods?namespace=..&limit=1` whose
/// version is far ahead of what any cache has seen, as a token from a replica ahead of this
/// one would be.
pub(crate) async fn token_ahead(server: &Server, namespace: &str) -> String {
    let ns_pods = Api::<Pod>::namespaced(crate::support::cluster().client().await, namespace);
    for name in ["a", "b"] {
        ns_pods
            .create(&PostParams::default(), &pod(name, &[]))
            .await
            .unwrap();
    }
    let list = format!("/pods?namespace={namespace}");
    eventually(SOON, "two pods", || async {
        server.names(&list).await.filter(|n| n.len() == 2)
    })
    .await;
    let mut token = open_token(&first_token(server, &format!("{list}&limit=1")).await);
    let version = token["rv"].as_u64().expect("a version in the token");
    token["rv"] = json!(version + 1_000_000_000);
    seal_token(&token)
}

#[tokio::test]
async fn every_sort_field_and_direction_orders_lists_and_their_pages() {
    // Named by a sequence number ("-9" sorts after "-10"): the first is the one named first.
    let (a, b) = (
        TestNamespace::new("sort").await,
        TestNamespace::new("sort").await,
    );
    let (first, second) = if a.name < b.name { (a, b) } else { (b, a) };
    let label = format!("sort-run={}", first.name);
    let labels = [("sort-run", first.name.as_str())];
    // Created c, a, b (one second apart: timestamps have whole seconds) in the first
    // namespace, then d in the second: creation order is not name order.
    let mut created = Vec::new();
    for (ns, name) in [(&first, "c"), (&first, "a"), (&first, "b"), (&second, "d")] {
        let pod = ns
            .api::<Pod>()
            .create(&PostParams::default(), &pod(name, &labels))
            .await
            .unwrap();
        created.push(pod.metadata.creation_timestamp.unwrap().0);
        let second_of = |t: &jiff::Timestamp| t.as_second();
        eventually(SOON, "the next second", || async {
            let now = jiff::Timestamp::now();
            (second_of(&now) > second_of(created.last().unwrap())).then_some(())
        })
        .await;
    }
    let server = Server::start(&[]);
    let list = format!("/pods?labelSelector={label}");
    eventually(SOON, "four pods", || async {
        server.names(&list).await.filter(|n| n.len() == 4)
    })
    .await;

    let (ns1, ns2) = (first.name.as_str(), second.name.as_str());
    let in_order = |sort: &str| format!("{list}&sort={sort}");
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        // The default: namespace, then name.
        ("", vec![(ns1, "a"), (ns1, "b"), (ns1, "c"), (ns2, "d")]),
        ("name", vec![(ns1, "a"), (ns1, "b"), (ns1, "c"), (ns2, "d")]),
        (
            "creationTimestamp",
            vec![(ns1, "c"), (ns1, "a"), (ns1, "b"), (ns2, "d")],
        ),
        (
            "-creationTimestamp",
            vec![(ns2, "d"), (ns1, "b"), (ns1, "a"), (ns1, "c")],
        ),
        (
            "namespace,-name",
            vec![(ns1, "c"), (ns1, "b"), (ns1, "a"), (ns2, "d")],
        ),
        (
            "-namespace,creationTimestamp",
            vec![(ns2, "d"), (ns1, "c"), (ns1, "a"), (ns1, "b")],
        ),
    ];
    assert!(
        ns1 < ns2,
        "the namespaces are named in their order: {ns1} {ns2}"
    );
    for (sort, want) in cases {
        let path = if sort.is_empty() {
            list.clone()
        } else {
            in_order(sort)
        };
        let (status, body) = server.get(&path).await;
        assert_eq!(status, 200, "{sort}: {body}");
        let got: Vec<(String, String)> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["namespace"].as_str().unwrap().to_string(),
                    p["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(ns, n)| (ns.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want, "sort={sort}");

        // One item a page, following the tokens: the same order.
        let mut paged = Vec::new();
        let mut page_path = format!("{path}&limit=1");
        loop {
            let (status, page) = server.get(&page_path).await;
            assert_eq!(status, 200, "{sort}: {page}");
            paged.extend(names(&page));
            match page["metadata"]["continue"].as_str() {
                Some(token) => page_path = format!("{path}&limit=1&continue={token}"),
                None => break,
            }
        }
        let want_names: Vec<String> = want.iter().map(|(_, n)| n.clone()).collect();
        assert_eq!(paged, want_names, "sort={sort}, one a page");
    }

    // Deployments share the generic list: one check that they sort by creation too.
    for name in ["y", "x"] {
        first
            .api::<Deployment>()
            .create(&PostParams::default(), &deployment(name, 0, &[]))
            .await
            .unwrap();
        let created = jiff::Timestamp::now().as_second();
        eventually(SOON, "the next second", || async {
            (jiff::Timestamp::now().as_second() > created).then_some(())
        })
        .await;
    }
    let deployments = format!("/deployments?namespace={ns1}");
    eventually(SOON, "two deployments", || async {
        server.names(&deployments).await.filter(|n| n.len() == 2)
    })
    .await;
    let (_, by_age) = server
        .get(&format!("{deployments}&sort=creationTimestamp"))
        .await;
    assert_eq!(names(&by_age), ["y", "x"]);
    let (_, by_name) = server.get(&format!("{deployments}&sort=name")).await;
    assert_eq!(names(&by_name), ["x", "y"]);
}

/// The fields list routes accept for a kind: each selects exactly what the apiserver's own
/// field selector would, and any other field is a 400 naming it.
async fn assert_selects(server: &Server, list: &str, selector: &str, want: &[&str]) {
    let path = format!("{list}&fieldSelector={}", selector.replace('=', "%3D"));
    let (status, body) = server.get(&path).await;
    assert_eq!(status, 200, "{selector}: {body}");
    assert_eq!(names(&body), want, "fieldSelector={selector}");
}

#[tokio::test]
async fn field_selectors_on_deployments_services_and_namespaces() {
    let ns = TestNamespace::new("fields").await;
    let pp = PostParams::default();
    for name in ["a", "b"] {
        ns.api::<Deployment>()
            .create(&pp, &deployment(name, 0, &[]))
            .await
            .unwrap();
    }
    let service = |name: &str, spec: Value| -> Service {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let port = json!([{"port": 80}]);
    let services = ns.api::<Service>();
    let cluster_ip = services
        .create(&pp, &service("cip", json!({"ports": port})))
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .expect("a cluster IP");
    services
        .create(
            &pp,
            &service("np", json!({"type": "NodePort", "ports": port})),
        )
        .await
        .unwrap();
    services
        .create(
            &pp,
            &service("hl", json!({"clusterIP": "None", "ports": port})),
        )
        .await
        .unwrap();
    let server = Server::start(&[]);
    let deployments = format!("/deployments?namespace={}", ns.name);
    let services = format!("/services?namespace={}", ns.name);
    eventually(SOON, "two deployments and three services", || async {
        let d = server.names(&deployments).await?;
        let s = server.names(&services).await?;
        (d.len() == 2 && s.len() == 3).then_some(())
    })
    .await;

    assert_selects(&server, &deployments, "metadata.name=a", &["a"]).await;
    assert_selects(&server, &deployments, "metadata.name!=a", &["b"]).await;
    assert_selects(&server, &deployments, "metadata.name==b", &["b"]).await;
    let here = format!("metadata.namespace={}", ns.name);
    assert_selects(&server, "/deployments?x=", &here, &["a", "b"]).await;
    assert_selects(&server, &deployments, "metadata.namespace=elsewhere", &[]).await;

    assert_selects(&server, &services, "spec.type=NodePort", &["np"]).await;
    assert_selects(&server, &services, "spec.type!=NodePort", &["cip", "hl"]).await;
    assert_selects(&server, &services, "spec.type=ClusterIP", &["cip", "hl"]).await;
    assert_selects(&server, &services, "spec.clusterIP=None", &["hl"]).await;
    let by_ip = format!("spec.clusterIP={cluster_ip}");
    assert_selects(&server, &services, &by_ip, &["cip"]).await;
    assert_selects(
        &server,
        &services,
        "metadata.name=np,spec.type=NodePort",
        &["np"],
    )
    .await;

    for (list, field, kind) in [
        (&deployments, "spec.replicas", "Deployment"),
        (&services, "spec.selector", "Service"),
    ] {
        let (status, body) = server
            .get(&format!("{list}&fieldSelector={field}%3D1"))
            .await;
        assert_eq!(status, 400, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains(field) && error.contains("field label not supported"),
            "{kind}: {error}"
        );
    }

    // Namespaces: two labelled for this test, one held Terminating by a finalizer on a pod.
    let held = TestNamespace::new("fields-held").await;
    let run = format!("fields-run={}", ns.name);
    for name in [&ns.name, &held.name] {
        Api::<Namespace>::all(ns.client.clone())
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"fields-run": ns.name}}})),
            )
            .await
            .unwrap();
    }
    let holder: Pod = serde_json::from_value(json!({
        "metadata": {"name": "holder", "finalizers": ["e2e.k8sailor.io/hold"]},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    held.api::<Pod>().create(&pp, &holder).await.unwrap();
    Api::<Namespace>::all(ns.client.clone())
        .delete(&held.name, &DeleteParams::background())
        .await
        .unwrap();
    let namespaces = format!("/namespaces?labelSelector={run}");
    let phase_of = |body: &Value, name: &str| {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .map(|n| n["status"].clone())
    };
    eventually(SOON, "the held namespace Terminating", || async {
        let (status, body) = server.get(&namespaces).await;
        (status == 200
            && names(&body).len() == 2
            && phase_of(&body, &held.name) == Some(json!("Terminating")))
        .then_some(())
    })
    .await;
    let mut both = vec![ns.name.as_str(), held.name.as_str()];
    both.sort();
    assert_selects(
        &server,
        &namespaces,
        "status.phase=Active",
        &[ns.name.as_str()],
    )
    .await;
    assert_selects(
        &server,
        &namespaces,
        "status.phase=Terminating",
        &[held.name.as_str()],
    )
    .await;
    assert_selects(
        &server,
        &namespaces,
        "status.phase!=Active",
        &[held.name.as_str()],
    )
    .await;
    let by_name = format!("metadata.name={}", held.name);
    assert_selects(&server, &namespaces, &by_name, &[held.name.as_str()]).await;
    let by_name = format!("metadata.name!={}", held.name);
    assert_selects(&server, &namespaces, &by_name, &[ns.name.as_str()]).await;
    assert_selects(&server, &namespaces, "metadata.name!=x", &both).await;

    // Let the held namespace go.
    held.api::<Pod>()
        .patch(
            "holder",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_old_token_is_410_and_one_ahead_of_the_cache_is_503_with_retry_after() {
    let ns = TestNamespace::new("tokens").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let list = format!("/pods?namespace={}&limit=1", ns.name);
    let ahead = token_ahead(&server, &ns.name).await;
    let expired = json!({"code": 410, "data": null,
        "error": "the continue token has expired: restart the list without it"});

    // Issued more than 5 minutes ago.
    let mut old = open_token(&first_token(&server, &list).await);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    old["t"] = json!(now - 301);
    let (status, answer) = server
        .get(&format!("{list}&continue={}", seal_token(&old)))
        .await;
    assert_eq!((status, &answer), (410, &expired));
    // Four minutes is not too old: the same token otherwise unchanged is served.
    old["t"] = json!(now - 240);
    let (status, answer) = server
        .get(&format!("{list}&continue={}", seal_token(&old)))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(names(&answer), ["b"]);

    // A version this cache has not reached: it waits for it (up to 2 s), then says to retry.
    let version = open_token(&ahead)["rv"].as_u64().unwrap();
    let (status, headers, body) = server
        .request(
            "GET",
            &format!(
                "/k8sailor/v0/pods?namespace={}&limit=1&continue={ahead}",
                ns.name
            ),
            &[],
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(headers["retry-after"], "1");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (&answer["code"], &answer["data"]),
        (&json!(503), &Value::Null)
    );
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "resourceVersion {version} is newer than this cache ("
        )),
        "{error}"
    );

    // Older than the change history of a replica that did not keep the list: 410. The
    // second replica keeps 2 changes of pods; the token's version is followed by 3.
    let short = Server::start(&["--namespace", &ns.name, "--change-history", "2"]);
    let token = first_token(&server, &list).await;
    for name in ["c", "d", "e"] {
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod(name, &[]))
            .await
            .unwrap();
    }
    let all = format!("/pods?namespace={}", ns.name);
    eventually(SOON, "five pods on the short-history replica", || async {
        short.names(&all).await.filter(|n| n.len() == 5)
    })
    .await;
    let (status, answer) = short.get(&format!("{list}&continue={token}")).await;
    assert_eq!((status, &answer), (410, &expired));
    // The replica that issued it still pages the list as it was: the token is no forgery.
    let (status, answer) = server.get(&format!("{list}&continue={token}")).await;
    assert_eq!((status, names(&answer)), (200, vec!["b".to_string()]));
}

/// A quiet stream of Server-Sent Events gets a comment every `--watch-keep-alive`; a stream
/// of JSON lines does not (its clients parse every line).
#[tokio::test]
async fn a_quiet_event_stream_gets_keep_alive_comments() {
    let ns = TestNamespace::new("keepalive").await;
    let server = Server::start(&["--namespace", &ns.name, "--watch-keep-alive", "100ms"]);
    let url = format!("{}/pods?namespace={}&watch=true", server.base, ns.name);
    let mut res = server
        .http
        .get(&url)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut text = String::new();
    let bookmark = "event: BOOKMARK\n";
    let has_comment = |text: &str| {
        text.find(bookmark)
            .is_some_and(|at| text[at..].contains("\n:\n\n"))
    };
    let deadline = tokio::time::Instant::now() + SOON;
    while !has_comment(&text) {
        let chunk = tokio::time::timeout_at(deadline, res.chunk())
            .await
            .unwrap_or_else(|_| panic!("no keep-alive comment after the BOOKMARK: {text:?}"))
            .expect("the stream goes on")
            .expect("a chunk");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    // Nothing but comments after the BOOKMARK event: no object changed.
    let after = &text[text.find(bookmark).unwrap()..];
    let events = after.matches("event: ").count();
    assert_eq!(events, 1, "{text}");
}

#[tokio::test]
async fn post_deployments_fills_in_what_kubectl_create_deployment_would() {
    let ns = TestNamespace::new("defaults").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let path = |name: &str| format!("/deployments/{name}?namespace={}", ns.name);
    let (status, answer) = server
        .send(
            "POST",
            &path("plain"),
            Some(json!({"containers": [
                {"image": "registry.example.com:5000/team/api_server.v2:1.0@sha256:abc"},
                {"image": "busybox", "name": "side", "ports": [8080, 9090]}
            ]})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let created = ns.api::<Deployment>().get("plain").await.unwrap();
    let stored = serde_json::to_value(&created).unwrap();
    assert_eq!(stored["metadata"]["labels"], json!({"app": "plain"}));
    assert_eq!(stored["spec"]["replicas"], 1, "replicas defaults to 1");
    assert_eq!(
        stored["spec"]["selector"],
        json!({"matchLabels": {"app": "plain"}})
    );
    assert_eq!(
        stored["spec"]["template"]["metadata"]["labels"],
        json!({"app": "plain"})
    );
    let containers: Vec<Value> = stored["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"name": c["name"], "image": c["image"], "ports": c["ports"]}))
        .collect();
    assert_eq!(
        containers,
        [
            json!({"name": "api-server-v2",
                "image": "registry.example.com:5000/team/api_server.v2:1.0@sha256:abc",
                "ports": null}),
            json!({"name": "side", "image": "busybox", "ports": [
                {"containerPort": 8080, "protocol": "TCP"},
                {"containerPort": 9090, "protocol": "TCP"}]}),
        ]
    );
    // The answer is the DTO of what was stored.
    assert_eq!(answer["code"], 0);
    assert_eq!(
        (
            &answer["data"]["replicas"],
            &answer["data"]["labels"],
            &answer["data"]["labelSelector"]
        ),
        (
            &json!(1),
            &json!({"app": "plain"}),
            &json!({"app": "plain"})
        )
    );
    assert_eq!(
        answer["data"]["images"],
        json!([
            "registry.example.com:5000/team/api_server.v2:1.0@sha256:abc",
            "busybox"
        ])
    );

    let (status, answer) = server
        .send(
            "POST",
            &path("zero"),
            Some(json!({"replicas": 0, "containers": [{"image": "nginx"}]})),
        )
        .await;
    assert_eq!(
        (status, &answer["data"]["replicas"]),
        (200, &json!(0)),
        "{answer}"
    );
    let created = ns.api::<Deployment>().get("zero").await.unwrap();
    assert_eq!(
        created.spec.unwrap().replicas,
        Some(0),
        "an explicit 0 is kept"
    );
}
