//! `--auth delegated` on the Kubernetes API, compared with the apiserver as the same caller:
//! a read from memory the caller may not do is answered with exactly the apiserver's 403
//! Status (its message, reason, code and details), for lists, watches and gets, namespaced
//! and across the cluster, of core and grouped kinds, and kubectl prints the same error.
//! Discovery lists the verbs each resource is answered: the apiserver's (and its
//! subresources) when every verb is relayed, memory's reads without auth.

use http_body_util::BodyExt;
use serde_json::Value;

use crate::access::account;
use crate::kubeapi::{Kubectl, normalized};
use crate::kubeapi_writes::{Both, TlsFront, scratch};
use crate::support::{Server, TestNamespace, built_in_group};

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

/// The words of a printed row, its lists (`[get list]`, `get,list`) split into their items.
fn words(row: &[String]) -> Vec<String> {
    row.join(" ")
        .replace(['[', ']', ','], " ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The media type of aggregated discovery, as kubectl asks for it.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The built-in group-versions a legacy `/apis` document (and the core `v1`) names, as paths.
fn group_version_paths(apis: &Value) -> Vec<String> {
    let mut paths = vec!["/api/v1".to_string()];
    for group in apis["groups"].as_array().expect("groups") {
        if !built_in_group(group["name"].as_str().expect("a name")) {
            continue;
        }
        for version in group["versions"].as_array().expect("versions") {
            let gv = version["groupVersion"].as_str().expect("a groupVersion");
            paths.push(format!("/apis/{gv}"));
        }
    }
    paths
}

/// The aggregated entries of a discovery list, by `group/version/resource`, of the built-in
/// groups.
fn aggregated_entries(list: &Value) -> Vec<(String, Value)> {
    let mut entries = Vec::new();
    for group in list["items"].as_array().expect("items") {
        let name = group["metadata"]["name"].as_str().unwrap_or("");
        if !built_in_group(name) {
            continue;
        }
        for version in group["versions"].as_array().expect("versions") {
            for resource in version["resources"].as_array().expect("resources") {
                let key = format!(
                    "{name}/{}/{}",
                    version["version"].as_str().unwrap_or(""),
                    resource["resource"].as_str().unwrap_or("")
                );
                entries.push((key, resource.clone()));
            }
        }
    }
    entries
}

#[tokio::test]
async fn discovery_lists_the_verbs_each_resource_is_answered() {
    let ns = TestNamespace::new("kubeapi-verbs").await;
    let dir = scratch(&ns);
    let caller = account(&ns, "caller").await;
    let bearer = format!("Bearer {}", caller.token);
    let auth = [("authorization", bearer.as_str())];
    let delegated = Server::start(&["--auth", "delegated"]);

    // Legacy: each resource of each group-version, and its subresources, as the apiserver
    // lists them.
    let (code, _, apis) = delegated.request("GET", "/apis", &auth).await;
    assert_eq!(code, 200, "{apis}");
    let apis: Value = serde_json::from_str(&apis).unwrap();
    let mut subresources = 0;
    for path in group_version_paths(&apis) {
        let (code, _, ours) = delegated.request("GET", &path, &auth).await;
        assert_eq!(code, 200, "GET {path}: {ours}");
        let ours: Value = serde_json::from_str(&ours).unwrap();
        let (code, theirs) = apiserver_get(&caller.client, &path).await;
        assert_eq!(code, 200, "GET {path} of the apiserver");
        let theirs = theirs["resources"].as_array().unwrap().clone();
        for entry in ours["resources"].as_array().unwrap() {
            let name = entry["name"].as_str().unwrap();
            subresources += usize::from(name.contains('/'));
            let their = theirs.iter().find(|t| t["name"] == name);
            assert_eq!(Some(entry), their, "GET {path}: {name}");
        }
        for their in &theirs {
            let name = their["name"].as_str().unwrap();
            if let Some((resource, _)) = name.split_once('/') {
                let listed = |n: &str| {
                    ours["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|e| e["name"] == n)
                };
                assert!(
                    !listed(resource) || listed(name),
                    "GET {path}: {name} of a listed resource"
                );
            }
        }
    }
    assert!(
        subresources > 5,
        "pods/log, deployments/scale and more are listed"
    );

    // Aggregated: each entry the apiserver's, subresources and all.
    for (path, listed) in [("/api", "/v1/pods"), ("/apis", "apps/v1/deployments")] {
        let (code, _, ours) = delegated
            .request("GET", path, &[auth[0], ("accept", AGGREGATED)])
            .await;
        assert_eq!(code, 200, "GET {path}: {ours}");
        let ours = aggregated_entries(&serde_json::from_str(&ours).unwrap());
        let request = http::Request::get(path)
            .header("accept", AGGREGATED)
            .body(kube::client::Body::empty())
            .unwrap();
        let response = caller.client.send(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let theirs = aggregated_entries(&serde_json::from_slice(&body).unwrap());
        assert!(ours.iter().any(|(key, _)| key == listed), "{ours:?}");
        for (key, entry) in &ours {
            let their = theirs.iter().find(|(k, _)| k == key).map(|(_, e)| e);
            assert_eq!(Some(entry), their, "GET {path}: {key}");
        }
    }

    // kubectl prints each resource k8sailor lists as it prints the apiserver's.
    let front = TlsFront::before(&dir, &delegated);
    let both = Both::new(&dir, &front, &caller);
    let (ok, ours, err) = both
        .k8sailor
        .run(&["api-resources", "-o", "wide", "--no-headers"]);
    assert!(ok, "{err}");
    let (ok, theirs, err) = both
        .apiserver
        .run(&["api-resources", "-o", "wide", "--no-headers"]);
    assert!(ok, "{err}");
    let (ours, theirs) = (normalized(&ours), normalized(&theirs));
    assert!(
        ours.iter()
            .any(|row| row[0] == "pods" && words(row).contains(&"create".to_string())),
        "{ours:?}"
    );
    for row in ours
        .iter()
        .filter(|row| !row.iter().any(|t| t.contains(".example.com/")))
    {
        assert!(theirs.contains(row), "{row:?} is not the apiserver's");
    }

    // Without auth, memory's reads alone: writes and subresources are refused there.
    let open = Server::start(&["--auth", "none"]);
    let (code, _, core) = open.request("GET", "/api/v1", &[]).await;
    assert_eq!(code, 200, "{core}");
    let core: Value = serde_json::from_str(&core).unwrap();
    for entry in core["resources"].as_array().unwrap() {
        assert!(!entry["name"].as_str().unwrap().contains('/'), "{entry}");
        assert_eq!(
            entry["verbs"],
            serde_json::json!(["get", "list", "watch"]),
            "{entry}"
        );
    }
    let kubectl = Kubectl::for_k8sailor(&dir, &open);
    let (ok, rows, err) = kubectl.run(&["api-resources", "-o", "wide", "--no-headers"]);
    assert!(ok, "{err}");
    for row in normalized(&rows) {
        let words = words(&row);
        let has = |verb: &str| words.iter().any(|w| w == verb);
        assert!(
            has("get") && has("list") && has("watch") && !has("create") && !has("delete"),
            "{row:?}"
        );
    }
}
