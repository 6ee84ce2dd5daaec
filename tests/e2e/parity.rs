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
