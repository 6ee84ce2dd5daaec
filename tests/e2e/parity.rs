//! What the original k8sailor web client relies on, checked against the real apiserver.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{SOON, Server, TestNamespace, eventually, pod};

/// The client shows a Pod's waiting reason and asks for its event only when `status.reason` is
/// set: a container stuck pulling its image must say so there, as the original did.
#[tokio::test]
async fn a_pod_waiting_on_its_image_says_why_in_status_reason() {
    let ns = TestNamespace::new("parity-reason").await;
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod("stuck", &[]))
        .await
        .expect("create the pod");
    // What a kubelet writes when the image cannot be pulled (the test cluster has no nodes).
    let status = json!({"status": {"phase": "Pending", "containerStatuses": [{
        "name": "c", "image": "nginx:no-such-tag", "imageID": "", "ready": false,
        "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
        "message": "Back-off pulling image \"nginx:no-such-tag\""}}}]}});
    pods.patch_status("stuck", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the pod's status");

    for source in ["cache", "live"] {
        let server = Server::start(&["--source", source]);
        let path = format!("/pods/stuck?namespace={}", ns.name);
        let (body, _) = eventually(SOON, "the pod's waiting reason", || async {
            let (status, body) = server.get(&path).await;
            (status == 200 && body["data"]["status"]["reason"] != "").then_some(body)
        })
        .await;
        let status = &body["data"]["status"];
        assert_eq!(status["reason"], "ImagePullBackOff", "{source}: {body}");
        assert_eq!(
            status["message"], "Back-off pulling image \"nginx:no-such-tag\"",
            "{source}"
        );
        assert_eq!(status["phase"], "Pending", "{source}");
        let (_, list) = server.get(&format!("/pods?namespace={}", ns.name)).await;
        assert_eq!(
            list["data"][0]["status"]["reason"], "ImagePullBackOff",
            "{source}"
        );
    }
}

/// The original (gin) redirected a route's path with a trailing slash, keeping CORS headers so
/// that its web client on another origin could follow, and answered a bare preflight 204.
#[tokio::test]
async fn trailing_slashes_redirect_and_bare_preflights_answer_204() {
    let ns = TestNamespace::new("parity-slash").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let origin = ("Origin", "http://127.0.0.1:8080");
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (method, path, status, location) in [
        (
            "GET",
            format!("/k8sailor/v0/deployments/?namespace={}", ns.name),
            301,
            format!("/k8sailor/v0/deployments?namespace={}", ns.name),
        ),
        (
            "GET",
            "/k8sailor/v0/pods/web/".to_string(),
            301,
            "/k8sailor/v0/pods/web".to_string(),
        ),
        (
            "DELETE",
            format!("/k8sailor/v0/pods/web/?namespace={}", ns.name),
            307,
            format!("/k8sailor/v0/pods/web?namespace={}", ns.name),
        ),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let res = no_redirects
            .request(method.clone(), format!("{}{path}", server.root()))
            .header(origin.0, origin.1)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), status, "{method} {path}");
        assert_eq!(
            res.headers()["location"],
            location.as_str(),
            "{method} {path}"
        );
        assert_eq!(
            res.headers()["access-control-allow-origin"],
            origin.1,
            "{method} {path}: a browser may follow it"
        );
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["code"], status, "{body}");
    }
    // Followed, the redirect lands on the list.
    let (status, body) = server
        .get(&format!("/deployments/?namespace={}", ns.name))
        .await;
    assert_eq!((status, &body["code"]), (200, &json!(0)), "{body}");
    // A path that names no route stays a 404, slash or not.
    let (status, _, _) = server.request("GET", "/k8sailor/v0/nothing/", &[]).await;
    assert_eq!(status, 404);

    let (status, _, body) = server
        .request("OPTIONS", "/k8sailor/v0/deployments", &[])
        .await;
    assert_eq!((status, body.as_str()), (204, ""), "a bare preflight");
}
