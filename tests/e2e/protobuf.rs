//! The protobuf intake (pkg/kubeproto) against the apiserver's own JSON: every built-in kind
//! the apiserver lists, its protobuf list written as JSON, equal as a value to the JSON list
//! the apiserver sends at the same resourceVersion.

use http_body_util::BodyExt;
use kube::Client;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::discovery::{Discovery, Scope, verbs};
use serde_json::Value;

use crate::resources::Leftovers;
use crate::resources::fixtures::{FIXTURES, Which};
use crate::support::{TestNamespace, built_in_discovery};

/// The apiserver's answer to `path` when asked for `accept`: its status, content type and
/// bytes.
async fn answer(client: &Client, path: &str, accept: &str) -> (http::StatusCode, String, Vec<u8>) {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status();
    let content_type = response.headers()[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, bytes.to_vec())
}

/// A successful answer's content type and bytes.
async fn get(client: &Client, path: &str, accept: &str) -> (String, Vec<u8>) {
    let (status, content_type, bytes) = answer(client, path, accept).await;
    assert!(status.is_success(), "{path}: {status}");
    (content_type, bytes)
}

fn list_path(resource: &ApiResource, plural: &str) -> String {
    if resource.group.is_empty() {
        format!("/api/{}/{plural}", resource.version)
    } else {
        format!("/apis/{}/{}/{plural}", resource.group, resource.version)
    }
}

/// One object of every fixture kind in `ns` (both of each), so that every kind has items;
/// the cluster's own objects (its pods, nodes, leases, events) give the rest their shapes.
/// The cluster-scoped ones are returned, to be deleted when the test ends. CRDs are left
/// out: they have no protobuf, and a CRD makes every k8sailor of the other tests serve it.
async fn make_objects(ns: &TestNamespace, discovery: &Discovery) -> Leftovers {
    let mut leftovers = Leftovers::default();
    for fixture in FIXTURES {
        let Some((resource, caps)) = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(r, _)| r.plural == fixture.resource)
        else {
            continue;
        };
        if resource.group == "apiextensions.k8s.io" {
            continue;
        }
        let api: kube::Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            kube::Api::namespaced_with(ns.client.clone(), &ns.name, &resource)
        } else {
            kube::Api::all_with(ns.client.clone(), &resource)
        };
        for which in [Which::Selected, Which::Other] {
            let name = (fixture.name)(&ns.name, which);
            let object: DynamicObject =
                serde_json::from_value((fixture.object)(&name, which, &ns.name)).unwrap();
            // Cluster-scoped ones may exist from an earlier run of this test.
            let _ = api.create(&PostParams::default(), &object).await;
            if caps.scope == Scope::Cluster {
                leftovers.0.push((resource.clone(), name));
            }
        }
    }
    leftovers
}

/// The text of a JSON list's items, from its `"items":[` to its end.
fn items_text(list: &[u8]) -> &[u8] {
    let from = list
        .windows(9)
        .position(|w| w == b"\"items\":[")
        .expect("a list has items");
    let to = list
        .iter()
        .rposition(|&b| b == b']')
        .expect("a list's items end");
    &list[from..=to]
}

#[tokio::test]
async fn every_built_in_kind_reads_from_protobuf_as_the_apiserver_writes_it_in_json() {
    let ns = TestNamespace::new("protobuf").await;
    let discovery = built_in_discovery(&ns.client).await;
    let _leftovers = make_objects(&ns, &discovery).await;
    let mut compared = Vec::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || resource.plural.contains('/') {
                continue;
            }
            let Some(kind) =
                kubeproto::ListKind::find(&resource.group, &resource.version, &resource.kind)
            else {
                // Custom resources have no protobuf; the apiserver answers them in JSON.
                continue;
            };
            let path = list_path(&resource, &resource.plural);
            let (_, json_text) = get(&ns.client, &path, "application/json").await;
            let json: Value = serde_json::from_slice(&json_text).unwrap();
            // ComponentStatuses are not stored (no version, probed anew in any order): not a
            // kind a cache serves.
            let Some(version) = json["metadata"]["resourceVersion"].as_str() else {
                continue;
            };
            let at = format!("{path}?resourceVersion={version}&resourceVersionMatch=Exact");
            let (content_type, proto) = get(&ns.client, &at, kubeproto::ACCEPT).await;
            assert!(
                content_type.starts_with(kubeproto::PROTOBUF),
                "{path}: {content_type}"
            );
            let written = kubeproto::testing::list_json(kind, &proto)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            let written_text = written;
            let written: Value = serde_json::from_slice(&written_text).unwrap_or_else(|e| {
                panic!("{path}: {e}: {}", String::from_utf8_lossy(&written_text))
            });
            let items = json["items"].as_array().unwrap();
            assert_eq!(
                written["items"].as_array().unwrap().len(),
                items.len(),
                "{path}"
            );
            for (mine, theirs) in written["items"].as_array().unwrap().iter().zip(items) {
                assert_eq!(mine, theirs, "{path}: an item differs");
            }
            assert_eq!(written["metadata"], json["metadata"], "{path}");
            // Byte for byte too: what a cache keeps of each item is its text.
            let (mine, theirs) = (items_text(&written_text), items_text(&json_text));
            if let Some(at) = mine.iter().zip(theirs).position(|(a, b)| a != b) {
                let around = |text: &[u8]| {
                    String::from_utf8_lossy(&text[at.saturating_sub(80)..(at + 80).min(text.len())])
                        .into_owned()
                };
                panic!(
                    "{path}: the items' text differs at byte {at}:\n mine:   {}\n theirs: {}",
                    around(mine),
                    around(theirs)
                );
            }
            assert_eq!(mine.len(), theirs.len(), "{path}: the items' text");
            compared.push(format!("{} ({})", resource.plural, items.len()));
        }
    }
    assert!(compared.len() > 30, "{compared:?}");
    eprintln!("compared: {}", compared.join(", "));
}

#[tokio::test]
async fn an_error_in_protobuf_reads_as_the_apiservers_json_status() {
    let ns = TestNamespace::new("protobuf-status").await;
    let path = format!("/api/v1/namespaces/{}/pods/absent", ns.name);
    let (json_status, _, json_text) = answer(&ns.client, &path, "application/json").await;
    let (proto_status, content_type, proto) = answer(&ns.client, &path, kubeproto::ACCEPT).await;
    assert_eq!((json_status.as_u16(), proto_status.as_u16()), (404, 404));
    assert!(
        content_type.starts_with(kubeproto::PROTOBUF),
        "{content_type}"
    );
    let mut json: Value = serde_json::from_slice(&json_text).unwrap();
    let object = json.as_object_mut().unwrap();
    assert_eq!(object.remove("kind"), Some("Status".into()));
    assert_eq!(object.remove("apiVersion"), Some("v1".into()));
    let written: Value = serde_json::from_slice(&kubeproto::status_json(&proto).unwrap()).unwrap();
    assert_eq!(written, json);
}
