//! The read path against the real control plane: what a new user would try first.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{
    SOON, Server, TestNamespace, deployment, eventually, eventually_shown, names, pod,
};

#[tokio::test]
async fn a_deployment_appears_scales_lists_its_pods_and_disappears() {
    let ns = TestNamespace::new("lifecycle").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let deployments = ns.api::<Deployment>();
    deployments
        .create(
            &PostParams::default(),
            &deployment("web", 2, &[("tier", "frontend")]),
        )
        .await
        .unwrap();

    let list = format!("/deployments?namespace={}", ns.name);
    // How soon is bench/run's write-to-visible figure; here, that it shows.
    eventually(SOON, "the new deployment in the list", || async {
        let (status, body) = server.get(&list).await;
        (status == 200 && names(&body) == ["web"]).then_some(())
    })
    .await;

    let (status, body) = server
        .get(&format!("/deployments/web?namespace={}", ns.name))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["code"], 0);
    assert_eq!(body["data"]["replicas"], 2);
    assert_eq!(body["data"]["images"], json!(["nginx:1.27"]));
    assert_eq!(body["data"]["labelSelector"], json!({"app": "web"}));
    assert_eq!(body["data"]["labels"]["tier"], "frontend");

    // kube-controller-manager makes a ReplicaSet and its Pods; we find them by ownerReferences.
    let pods_path = format!("/deployments/web/pods?namespace={}", ns.name);
    let (pods, _) = eventually(SOON, "two pods of web", || async {
        let (_, body) = server.get(&pods_path).await;
        (names(&body).len() == 2).then_some(body)
    })
    .await;
    for pod in pods["data"].as_array().unwrap() {
        assert!(pod["name"].as_str().unwrap().starts_with("web-"));
        assert_eq!(pod["deployment"], "web");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["ready"], "0/1");
    }

    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    eventually(SOON, "replicas 3 in the answer", || async {
        let (_, body) = server
            .get(&format!("/deployments/web?namespace={}", ns.name))
            .await;
        (body["data"]["replicas"] == 3).then_some(())
    })
    .await;
    eventually(SOON, "a third pod", || async {
        let (_, body) = server.get(&pods_path).await;
        (names(&body).len() == 3).then_some(())
    })
    .await;

    deployments
        .delete("web", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(SOON, "the deployment to be gone", || async {
        let (status, body) = server
            .get(&format!("/deployments/web?namespace={}", ns.name))
            .await;
        (status == 404 && body["code"] == 404).then_some(())
    })
    .await;
    let (_, body) = server.get(&list).await;
    assert!(names(&body).is_empty());
}

#[tokio::test]
async fn errors_are_enveloped_with_the_right_status() {
    let ns = TestNamespace::new("errors").await;
    let server = Server::start(&[]);
    for (path, status) in [
        (format!("/deployments/nope?namespace={}", ns.name), 404),
        (format!("/pods/nope?namespace={}", ns.name), 404),
        (format!("/deployments/nope/pods?namespace={}", ns.name), 404),
        ("/deployments?namespace=Not_A_Namespace".to_string(), 400),
        ("/pods?labelSelector=app%20in%20(a".to_string(), 400),
        (format!("/deployments/UPPER?namespace={}", ns.name), 400),
    ] {
        let (got, body) = server.get(&path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert_eq!(body["code"], status, "{path}");
        assert!(!body["error"].as_str().unwrap().is_empty(), "{path}");
    }
    // A namespace with nothing in it lists empty, as the apiserver does.
    let (status, body) = server.get(&format!("/pods?namespace={}", ns.name)).await;
    assert_eq!((status, names(&body).len()), (200, 0));
}

#[tokio::test]
async fn all_namespaces_when_namespace_is_absent_or_empty() {
    let a = TestNamespace::new("all-a").await;
    let b = TestNamespace::new("all-b").await;
    let server = Server::start(&[]);
    a.api::<Deployment>()
        .create(&PostParams::default(), &deployment("first", 0, &[]))
        .await
        .unwrap();
    b.api::<Deployment>()
        .create(&PostParams::default(), &deployment("second", 0, &[]))
        .await
        .unwrap();
    for query in ["", "?namespace="] {
        eventually(SOON, "both namespaces' deployments", || async {
            let (_, body) = server.get(&format!("/deployments{query}")).await;
            let items = body["data"].as_array().cloned().unwrap_or_default();
            let found = |ns: &str, name: &str| {
                items
                    .iter()
                    .any(|d| d["namespace"] == ns && d["name"] == name)
            };
            (found(&a.name, "first") && found(&b.name, "second")).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn overlapping_selectors_never_claim_each_others_pods() {
    let ns = TestNamespace::new("overlap").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let deployments = ns.api::<Deployment>();
    // Both select app=shared; the second adds a label so the apiserver accepts both.
    let mut one = deployment("one", 1, &[]);
    let mut two = deployment("two", 2, &[]);
    for (d, extra) in [(&mut one, "one"), (&mut two, "two")] {
        let spec = d.spec.as_mut().unwrap();
        spec.selector.match_labels = Some([("app".to_string(), "shared".to_string())].into());
        spec.template.metadata.as_mut().unwrap().labels = Some(
            [
                ("app".to_string(), "shared".to_string()),
                ("which".to_string(), extra.to_string()),
            ]
            .into(),
        );
    }
    deployments
        .create(&PostParams::default(), &one)
        .await
        .unwrap();
    deployments
        .create(&PostParams::default(), &two)
        .await
        .unwrap();
    let count = |name: &'static str| {
        let path = format!("/deployments/{name}/pods?namespace={}", ns.name);
        let server = &server;
        async move { server.names(&path).await.map(|n| n.len()) }
    };
    eventually(SOON, "1 pod of one and 2 of two", || async {
        (count("one").await == Some(1) && count("two").await == Some(2)).then_some(())
    })
    .await;
    let (_, all) = server
        .get(&format!(
            "/pods?namespace={}&labelSelector=app%3Dshared",
            ns.name
        ))
        .await;
    assert_eq!(names(&all).len(), 3, "the label selector sees all three");
}

#[tokio::test]
async fn pod_output_is_the_object_as_kubectl_prints_it() {
    let ns = TestNamespace::new("output").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let pod = pod("solo", &[("app", "solo")]);
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let path = format!("/pods/solo/output?namespace={}", ns.name);
    let (json_text, _) = eventually(SOON, "the pod's output", || async {
        let (status, text) = server.get_text(&path).await;
        (status == 200).then_some(text)
    })
    .await;
    let raw: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(raw["kind"], "Pod");
    assert_eq!(raw["metadata"]["name"], "solo");
    assert!(raw["metadata"].get("managedFields").is_none());
    let (status, yaml) = server.get_text(&format!("{path}&outputFormat=yaml")).await;
    assert_eq!(status, 200);
    assert!(yaml.starts_with("apiVersion: v1\nkind: Pod\n"), "{yaml}");
    let (_, body) = server
        .get(&format!("/pods/solo?namespace={}", ns.name))
        .await;
    assert_eq!(body["data"]["statusText"], "Pending");
    assert_eq!(body["data"]["deployment"], serde_json::Value::Null);
}

/// Waits until the cache answers `path` as the live source does: the controllers go on
/// updating a new Deployment's status, and the cache sees each update a moment after a fresh
/// read does. The two must agree once the objects settle; on timeout the last two answers are
/// shown.
async fn same_answer(cache: &Server, live: &Server, path: &str) {
    let what = format!("{path}: the cache's answer to be the live source's");
    eventually_shown(SOON, &what, || async {
        let (cache_status, mut from_cache) = cache.get(path).await;
        let (live_status, mut from_live) = live.get(path).await;
        // List resourceVersions legitimately differ between a cache and a fresh LIST.
        from_cache.as_object_mut().unwrap().remove("metadata");
        from_live.as_object_mut().unwrap().remove("metadata");
        if (cache_status, live_status) == (200, 200) && from_cache == from_live {
            Ok(())
        } else {
            Err(format!(
                "\ncache {cache_status} {from_cache}\nlive  {live_status} {from_live}"
            ))
        }
    })
    .await;
}

#[tokio::test]
async fn the_live_source_answers_like_the_cache() {
    let ns = TestNamespace::new("live").await;
    let cache = Server::start(&["--namespace", &ns.name]);
    let live = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web", 2, &[]))
        .await
        .unwrap();
    let pods = format!("/deployments/web/pods?namespace={}", ns.name);
    eventually(SOON, "two pods in both sources", || async {
        let c = cache.names(&pods).await?;
        let l = live.names(&pods).await?;
        (c.len() == 2 && c == l).then_some(())
    })
    .await;
    for path in [
        format!("/deployments/web?namespace={}", ns.name),
        format!("/pods?namespace={}", ns.name),
    ] {
        same_answer(&cache, &live, &path).await;
    }
    let (status, _) = live
        .get(&format!("/deployments/nope?namespace={}", ns.name))
        .await;
    assert_eq!(status, 404);

    // A generic kind, read live through the DynamicObject API: the same records, the same
    // answers, selectors, pages, objects and 404 as the cache's.
    let config_maps = ns.api::<ConfigMap>();
    for (name, app) in [("one", "web"), ("two", "db"), ("three", "web")] {
        let mut config_map = ConfigMap::default();
        config_map.metadata.name = Some(name.into());
        config_map.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        config_map.data = Some([("k".to_string(), name.to_string())].into());
        config_maps
            .create(&PostParams::default(), &config_map)
            .await
            .unwrap();
    }
    let list = format!("/configmaps?namespace={}", ns.name);
    eventually(SOON, "the config maps in both sources", || async {
        let c = cache.names(&list).await?;
        let l = live.names(&list).await?;
        (c.len() >= 3 && c == l).then_some(())
    })
    .await;
    for path in [
        list.clone(),
        format!("{list}&labelSelector=app%3Dweb"),
        format!("{list}&fieldSelector=metadata.name%3Dtwo"),
        format!("{list}&limit=2"),
        format!("/configmaps/one?namespace={}", ns.name),
    ] {
        same_answer(&cache, &live, &path).await;
    }
    let (_, web) = live.get(&format!("{list}&labelSelector=app%3Dweb")).await;
    assert_eq!(names(&web), ["one", "three"], "{web}");
    let (_, page) = live.get(&format!("{list}&limit=2")).await;
    assert!(
        page["metadata"]["continue"].is_string(),
        "a live page of a generic kind continues: {page}"
    );
    let (status, body) = live
        .get(&format!("/configmaps/nope?namespace={}", ns.name))
        .await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn a_namespace_scoped_server_refuses_other_namespaces() {
    let ns = TestNamespace::new("scoped").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let (status, body) = server.get("/deployments?namespace=kube-system").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains(&ns.name));
}

#[tokio::test]
async fn without_a_reachable_cluster_the_server_exits_with_one_line() {
    let dir = std::env::temp_dir().join(format!("k8sailor-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: gone\n  context: {cluster: c, user: u}\ncurrent-context: gone\n",
    )
    .unwrap();
    let err = match Server::start_with(kubeconfig.to_str().unwrap(), &[]) {
        Ok(_) => panic!("started without a cluster"),
        Err(e) => e,
    };
    assert!(err.contains("exit status: 1"), "{err}");
    assert!(err.contains("127.0.0.1:1") && err.contains("gone"), "{err}");
    assert_eq!(
        err.trim_end().lines().count(),
        2,
        "one line of error after our own prefix: {err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn paging_while_pods_change_returns_the_first_pages_set_exactly_once() {
    let ns = TestNamespace::new("paging").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let pods = ns.api::<Pod>();
    let mk = |name: String| pod(&name, &[]);
    for i in 0..10 {
        pods.create(&PostParams::default(), &mk(format!("p{i}")))
            .await
            .unwrap();
    }
    let list = format!("/pods?namespace={}", ns.name);
    eventually(SOON, "ten pods", || async {
        (names(&server.get(&list).await.1).len() == 10).then_some(())
    })
    .await;

    let (_, first) = server.get(&format!("{list}&limit=3")).await;
    let mut seen = names(&first);
    let rv = first["metadata"]["resourceVersion"].clone();
    let mut token = first["metadata"]["continue"].as_str().map(str::to_string);
    // Change the namespace while paging: one pod not yet returned goes, a new one comes.
    pods.delete("p8", &DeleteParams::default()).await.unwrap();
    pods.create(&PostParams::default(), &mk("p10".into()))
        .await
        .unwrap();
    eventually(SOON, "the cache to see the changes", || async {
        let now = names(&server.get(&list).await.1);
        (now.contains(&"p10".to_string()) && !now.contains(&"p8".to_string())).then_some(())
    })
    .await;
    while let Some(t) = token {
        let (status, page) = server.get(&format!("{list}&limit=3&continue={t}")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            page["metadata"]["resourceVersion"], rv,
            "every page is as of the first"
        );
        seen.extend(names(&page));
        token = page["metadata"]["continue"].as_str().map(str::to_string);
    }
    let expected: Vec<String> = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn pod_events_are_read_live_newest_first() {
    use k8s_openapi::api::core::v1::Event;
    let ns = TestNamespace::new("events").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let pod = pod("noisy", &[]);
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    // Nothing here runs a kubelet or scheduler, so the events are written as they would.
    for (name, reason, last) in [
        ("noisy.1", "Scheduled", "2026-11-01T10:00:00Z"),
        ("noisy.2", "BackOff", "2026-11-01T10:05:00Z"),
    ] {
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": ns.name, "name": "noisy", "apiVersion": "v1"},
            "reason": reason, "message": format!("{reason} happened"), "type": "Normal", "count": 1,
            "firstTimestamp": last, "lastTimestamp": last, "source": {"component": "kubelet"}
        }))
        .unwrap();
        ns.api::<Event>()
            .create(&PostParams::default(), &event)
            .await
            .unwrap();
    }
    let events = format!("/pods/noisy/events?namespace={}", ns.name);
    let (body, _) = eventually(SOON, "the pod and its events", || async {
        let (status, body) = server.get(&events).await;
        (status == 200 && body["data"].as_array().is_some_and(|a| a.len() == 2)).then_some(body)
    })
    .await;
    assert_eq!(body["data"][0]["reason"], "BackOff");
    assert_eq!(body["data"][1]["reason"], "Scheduled");
    let (_, latest) = server
        .get(&format!("/pods/noisy/event?namespace={}", ns.name))
        .await;
    assert_eq!(latest["data"]["reason"], "BackOff");
    assert_eq!(latest["data"]["name"], "noisy");
    assert_eq!(latest["data"]["namespace"], ns.name.as_str());
    assert_eq!(latest["data"]["message"], "BackOff happened");
    let (status, _) = server
        .get(&format!("/pods/ghost/events?namespace={}", ns.name))
        .await;
    assert_eq!(status, 404);
    let (status, _) = server
        .get(&format!("/pods/ghost/event?namespace={}", ns.name))
        .await;
    assert_eq!(status, 404);

    // A pod without events: never null, the original client reads data.message unguarded.
    ns.api::<Pod>()
        .create(&PostParams::default(), &crate::support::pod("quiet", &[]))
        .await
        .unwrap();
    let quiet = format!("/pods/quiet/event?namespace={}", ns.name);
    let (latest, _) = eventually(SOON, "the quiet pod", || async {
        let (status, body) = server.get(&quiet).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(
        latest["data"],
        json!({"namespace": ns.name, "name": "quiet", "message": "", "reason": "", "type": "",
               "count": 0, "firstTimestamp": null, "lastTimestamp": null, "source": ""}),
        "{latest}"
    );
}
