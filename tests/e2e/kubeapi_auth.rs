//! `--auth delegated` on the Kubernetes API, compared with the apiserver as the same caller:
//! a read from memory the caller may not do is answered with exactly the apiserver's 403
//! Status (its message, reason, code and details), for lists, watches and gets, namespaced
//! and across the cluster, of core and grouped kinds, and kubectl prints the same error.

use http_body_util::BodyExt;
use serde_json::Value;

use crate::access::account;
use crate::kubeapi_writes::{Both, TlsFront, scratch};
use crate::support::{Server, TestNamespace};

/// The apiserver's answer to a GET of `path` by `client`'s owner: status and body.
async fn apiserver_get(client: &kube::Client, path: &str) -> (u16, Value) {
    let request = http::Request::get(path)
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = client.send(request).await.expect("the apiserver answers");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the answer's body")
        .to_bytes();
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("GET {path}: {e}: {}", String::from_utf8_lossy(&body)));
    (status, body)
}

#[tokio::test]
async fn a_read_refused_is_the_apiservers_forbidden() {
    let ns = TestNamespace::new("kubeapi-forbidden").await;
    let dir = scratch(&ns);
    let nobody = account(&ns, "nobody").await;
    let server = Server::start(&["--auth", "delegated"]);
    let n = ns.name.as_str();
    let bearer = format!("Bearer {}", nobody.token);
    for path in [
        format!("/api/v1/namespaces/{n}/pods"),
        "/api/v1/pods".to_string(),
        format!("/api/v1/namespaces/{n}/configmaps?watch=true"),
        format!("/api/v1/namespaces/{n}/configmaps/kube-root-ca.crt"),
        format!("/api/v1/namespaces/{n}/pods/none-such"),
        format!("/apis/apps/v1/namespaces/{n}/deployments"),
        "/apis/apps/v1/statefulsets?watch=1".to_string(),
        format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{n}/roles/reader"),
        "/api/v1/nodes".to_string(),
        "/api/v1/namespaces".to_string(),
        format!("/api/v1/namespaces/{n}"),
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin".to_string(),
    ] {
        let (code, _, body) = server
            .request("GET", &path, &[("authorization", bearer.as_str())])
            .await;
        let ours: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"));
        let theirs = apiserver_get(&nobody.client, &path).await;
        assert_eq!((code, ours), theirs, "GET {path}");
        assert_eq!(code, 403, "GET {path}");
    }

    let front = TlsFront::before(&dir, &server);
    let both = Both::new(&dir, &front, &nobody);
    for args in [
        &["get", "pods", "-n", n][..],
        &["get", "pods", "-A"],
        &["get", "configmap", "kube-root-ca.crt", "-n", n],
        &["get", "deployments.apps", "-n", n],
        &["get", "nodes"],
        &["get", "namespace", n],
    ] {
        let (ok, _, err) = both.same(args);
        assert!(
            !ok && err.contains("(Forbidden)"),
            "kubectl {args:?}: {err}"
        );
    }
}
