//! The original client's writes, through k8sailor to the real apiserver; each answer comes
//! once the cache shows the write, so the very next read sees it (no waiting in these tests).

use serde_json::json;

use crate::support::{SOON, Server, TestNamespace, eventually, names};

#[tokio::test]
async fn writes_reach_the_apiserver_and_the_next_read_sees_them() {
    let ns = TestNamespace::new("writes").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let at = |path: &str| format!("{path}?namespace={}", ns.name);

    let body = json!({"replicas": 2, "containers": [{"image": "nginx:1.27", "ports": [80]}]});
    let (status, created) = server
        .send("POST", &at("/deployments/web"), Some(body.clone()))
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["code"], 0);
    assert_eq!(created["data"]["name"], "web");
    assert_eq!(created["data"]["labelSelector"], json!({"app": "web"}));
    assert_eq!(created["data"]["images"], json!(["nginx:1.27"]));
    let (status, read) = server.get(&at("/deployments/web")).await;
    assert_eq!((status, &read["data"]["replicas"]), (200, &json!(2)));

    let (status, again) = server
        .send("POST", &at("/deployments/web"), Some(body))
        .await;
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"].as_str().unwrap().contains("already exists"),
        "{again}"
    );

    let (status, scaled) = server
        .send(
            "PUT",
            &format!("{}&replicas=3", at("/deployments/web/replicas")),
            None,
        )
        .await;
    assert_eq!((status, &scaled["data"]), (200, &json!(true)), "{scaled}");
    let (_, read) = server.get(&at("/deployments/web")).await;
    assert_eq!(read["data"]["replicas"], 3);

    // kube-controller-manager makes the pods; one deleted is gone from the next read (pods on
    // no node are deleted at once).
    let pods_path = at("/deployments/web/pods");
    let (pods, _) = eventually(SOON, "three pods of web", || async {
        server.names(&pods_path).await.filter(|p| p.len() == 3)
    })
    .await;
    let (status, deleted) = server
        .send("DELETE", &at(&format!("/pods/{}", pods[0])), None)
        .await;
    assert_eq!((status, &deleted["data"]), (200, &json!(true)), "{deleted}");
    let (status, _) = server.get(&at(&format!("/pods/{}", pods[0]))).await;
    assert_eq!(status, 404, "the deleted pod is gone from the next read");
    // The apiserver's answer carries a deletionTimestamp although the pod is gone: the write
    // settles on its absence instead of waiting out the timeout for a version never shown.
    assert!(
        !server.logs().contains("has not shown a write yet"),
        "{}",
        server.logs()
    );

    let (status, deleted) = server.send("DELETE", &at("/deployments/web"), None).await;
    assert_eq!((status, &deleted["data"]), (200, &json!(true)), "{deleted}");
    let (status, _) = server.get(&at("/deployments/web")).await;
    assert_eq!(
        status, 404,
        "the deleted deployment is gone from the next read"
    );
    let (_, list) = server.get(&at("/deployments")).await;
    assert!(names(&list).is_empty());

    for (method, path) in [
        ("DELETE", at("/deployments/web")),
        ("DELETE", at("/pods/nope")),
        (
            "PUT",
            format!("{}&replicas=1", at("/deployments/web/replicas")),
        ),
    ] {
        let (status, answer) = server.send(method, &path, None).await;
        assert_eq!(
            (status, &answer["code"]),
            (404, &json!(404)),
            "{method} {path}: {answer}"
        );
        assert!(
            answer["error"].as_str().unwrap().contains("not found"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_write_the_apiserver_refuses_says_why() {
    let ns = TestNamespace::new("refused").await;
    let all = Server::start(&[]);
    let body = json!({"containers": [{"image": "nginx"}]});
    let missing = format!("{}-missing", ns.name);
    let (status, answer) = all
        .send(
            "POST",
            &format!("/deployments/web?namespace={missing}"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("namespaces \"{missing}\" not found")),
        "{error}"
    );
    // Outside the served namespace nothing is written.
    let scoped = Server::start(&["--namespace", &ns.name]);
    let (status, answer) = scoped
        .send("POST", "/deployments/web?namespace=default", Some(body))
        .await;
    assert_eq!(status, 404, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("not served"),
        "{answer}"
    );
}

#[tokio::test]
async fn writes_work_the_same_with_the_live_source() {
    let ns = TestNamespace::new("livewrites").await;
    let server = Server::start(&["--namespace", &ns.name, "--source", "live"]);
    let at = |path: &str| format!("{path}?namespace={}", ns.name);
    let body = json!({"replicas": 1, "containers": [{"image": "nginx:1.27"}]});
    let (status, created) = server
        .send("POST", &at("/deployments/web"), Some(body))
        .await;
    assert_eq!(status, 200, "{created}");
    let (status, _) = server
        .send(
            "PUT",
            &format!("{}&replicas=2", at("/deployments/web/replicas")),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (_, read) = server.get(&at("/deployments/web")).await;
    assert_eq!(read["data"]["replicas"], 2);
    let (status, _) = server.send("DELETE", &at("/deployments/web"), None).await;
    assert_eq!(status, 200);
    let (status, _) = server.get(&at("/deployments/web")).await;
    assert_eq!(status, 404);
}
