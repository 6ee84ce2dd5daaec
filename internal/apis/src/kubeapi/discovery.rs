//! Discovery as the apiserver serves it, listing exactly what is served here: `/version`
//! (the apiserver's, read once at start), the legacy documents (`/api`, `/api/v1`, `/apis`,
//! `/apis/{group}[/{version}]`) and aggregated discovery (`APIGroupDiscoveryList`, v2), which
//! kubectl asks for first. Each resource is listed with the verbs it is answered: under
//! `--auth none` the reads memory answers; under `--auth delegated`, where every other verb
//! and every subresource is relayed, the apiserver's own entry for it (its verbs and
//! subresources), read from the apiserver's discovery as the dao keeps it.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::reads::served;
use super::status::Status;
use super::{accepts, json_answer};
use crate::AppState;
use biz::Resource;
use k8sdao::OpenApiAnswer;

/// What memory answers of every served resource: reads only (also what a review under
/// `--auth none` allows).
pub(super) const VERBS: [&str; 3] = ["get", "list", "watch"];

/// The apiserver's discovery document as the dao keeps it, decoded; None unless every verb
/// is relayed (`--auth delegated`), or when it cannot be read (then memory's reads are
/// listed, and the failure logged).
async fn apiserver_document(
    s: &AppState,
    what: &str,
    read: impl AsyncFnOnce(&k8sdao::OpenApiDocs) -> Result<OpenApiAnswer, k8sdao::DaoError>,
) -> Option<Value> {
    s.reviewer.as_ref()?;
    let source = s.workloads.source();
    let docs = source.openapi().ok()?;
    match read(docs).await {
        Ok(OpenApiAnswer::Document(document)) => match serde_json::from_slice(&document.body) {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(what, %error, "the apiserver's discovery is not JSON: listing reads only");
                None
            }
        },
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(what, %error, "cannot read the apiserver's discovery: listing reads only");
            None
        }
    }
}

/// The apiserver's legacy entries of `group`/`version`: each resource and each
/// `resource/subresource` it serves there.
async fn apiserver_entries(s: &AppState, group: &str, version: &str) -> Option<Vec<Value>> {
    let list = apiserver_document(s, "resource list", async |docs: &k8sdao::OpenApiDocs| {
        docs.resource_list(group, version).await
    })
    .await?;
    list.get("resources")?.as_array().cloned()
}

/// The apiserver's aggregated discovery of the core group (`core`) or the named ones: its
/// `APIGroupDiscovery` items.
async fn apiserver_groups(s: &AppState, core: bool) -> Option<Vec<Value>> {
    let list = apiserver_document(
        s,
        "aggregated discovery",
        async |docs: &k8sdao::OpenApiDocs| docs.aggregated_discovery(core).await,
    )
    .await?;
    list.get("items")?.as_array().cloned()
}

/// The apiserver's aggregated entry of `r`, among its group items.
fn apiserver_entry<'a>(groups: &'a [Value], r: &Resource) -> Option<&'a Value> {
    groups
        .iter()
        .find(|g| g["metadata"]["name"].as_str().unwrap_or("") == r.group)?["versions"]
        .as_array()?
        .iter()
        .find(|v| v["version"].as_str() == Some(&*r.version))?["resources"]
        .as_array()?
        .iter()
        .find(|e| e["resource"].as_str() == Some(&*r.plural))
}

/// The legacy entries of `r`: the apiserver's for it and its subresources, where it lists
/// it among `theirs`; else memory's (reads).
fn legacy_entries(r: &Resource, theirs: Option<&[Value]>) -> Vec<Value> {
    let subresource_of = format!("{}/", r.plural);
    let entries: Vec<Value> = theirs
        .unwrap_or_default()
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n == r.plural || n.starts_with(&subresource_of))
        })
        .cloned()
        .collect();
    if entries
        .iter()
        .any(|e| e["name"].as_str() == Some(&*r.plural))
    {
        return entries;
    }
    let resource = json!({
        "name": r.plural,
        "singularName": r.singular(),
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    vec![with_names(resource, r)]
}

/// The media type of aggregated discovery, as kubectl asks for it and the apiserver answers.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether `Accept` asks for aggregated discovery (v2).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    accepts(
        headers,
        &["as=APIGroupDiscoveryList", "g=apidiscovery.k8s.io", "v=v2"],
    )
}

/// `resource` with the short names and categories of `r`, where it has some.
fn with_names(mut resource: Value, r: &Resource) -> Value {
    if !r.short_names.is_empty() {
        resource["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        resource["categories"] = json!(r.categories);
    }
    resource
}

/// `GET /version`: the apiserver's, as it answered at start.
pub(super) async fn version(State(s): State<AppState>) -> Response {
    match s.kube_version.get() {
        Some(version) => json_answer("application/json", version),
        None => Status::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the apiserver's version was not read at start",
        )
        .into_response(),
    }
}

/// The served resources by group, then version; the core group first, then by name.
fn by_group_version(resources: Vec<Resource>) -> BTreeMap<String, BTreeMap<String, Vec<Resource>>> {
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<Resource>>> = BTreeMap::new();
    for r in resources {
        groups
            .entry(r.group.to_string())
            .or_default()
            .entry(r.version.to_string())
            .or_default()
            .push(r);
    }
    groups
}

fn scope(r: &Resource) -> &'static str {
    if r.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    }
}

/// One group of aggregated discovery; each resource the apiserver's entry among `theirs`
/// (its group items) where it lists it, else memory's (reads).
fn discovery_group(
    group: &str,
    versions: &BTreeMap<String, Vec<Resource>>,
    theirs: Option<&[Value]>,
) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(version, resources)| {
            let resources: Vec<Value> = resources
                .iter()
                .map(|r| {
                    if let Some(entry) = theirs.and_then(|groups| apiserver_entry(groups, r)) {
                        return entry.clone();
                    }
                    let resource = json!({
                        "resource": r.plural,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "scope": scope(r),
                        "singularResource": r.singular(),
                        "verbs": VERBS,
                    });
                    with_names(resource, r)
                })
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({"metadata": metadata, "versions": versions})
}

fn discovery_list(groups: Vec<Value>) -> Response {
    json_answer(
        AGGREGATED,
        &json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": groups,
        }),
    )
}

/// `GET /api`.
pub(super) async fn core_versions(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let groups = by_group_version(served(&s));
    if wants_aggregated(&headers) {
        let theirs = apiserver_groups(&s, true).await;
        let core: Vec<Value> = groups
            .get("")
            .map(|versions| discovery_group("", versions, theirs.as_deref()))
            .into_iter()
            .collect();
        return discovery_list(core);
    }
    json_answer(
        "application/json",
        &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
    )
}

/// A legacy `APIGroup` document.
fn api_group(group: &str, versions: &BTreeMap<String, Vec<Resource>>) -> Value {
    let versions: Vec<Value> = versions
        .keys()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first(),
    })
}

/// `GET /apis`.
pub(super) async fn groups(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let groups = by_group_version(served(&s));
    let named = groups.iter().filter(|(group, _)| !group.is_empty());
    if wants_aggregated(&headers) {
        let theirs = apiserver_groups(&s, false).await;
        return discovery_list(
            named
                .map(|(g, v)| discovery_group(g, v, theirs.as_deref()))
                .collect(),
        );
    }
    let groups: Vec<Value> = named.map(|(g, v)| api_group(g, v)).collect();
    json_answer(
        "application/json",
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `GET /apis/{group}`.
pub(super) fn group(s: &AppState, group: &str) -> Response {
    let groups = by_group_version(served(s));
    match groups.get(group).filter(|_| !group.is_empty()) {
        Some(versions) => {
            let mut doc = api_group(group, versions);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            json_answer("application/json", &doc)
        }
        None => Status::no_such_path().into_response(),
    }
}

/// `GET /api/v1`, `GET /apis/{group}/{version}`.
pub(super) async fn resources(s: &AppState, group: &str, version: &str) -> Response {
    let groups = by_group_version(served(s));
    let Some(resources) = groups.get(group).and_then(|v| v.get(version)) else {
        return Status::no_such_path().into_response();
    };
    let theirs = apiserver_entries(s, group, version).await;
    let listed: Vec<Value> = resources
        .iter()
        .flat_map(|r| legacy_entries(r, theirs.as_deref()))
        .collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json_answer(
        "application/json",
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": listed}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, header};

    #[test]
    fn with_every_verb_relayed_a_resource_is_the_apiservers_entry() {
        let pods = k8sdao::built_in("pods").unwrap().resource();
        let theirs = vec![
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": ["create", "delete", "get", "list", "watch"], "shortNames": ["po"],
                "categories": ["all"]}),
            json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod",
                "verbs": ["get"]}),
            json!({"name": "podtemplates", "singularName": "podtemplate", "namespaced": true,
                "kind": "PodTemplate", "verbs": ["get"]}),
        ];
        assert_eq!(legacy_entries(&pods, Some(&theirs)), theirs[..2]);
        // Without the apiserver's entry: memory's reads.
        let ours = legacy_entries(&pods, None);
        assert_eq!(
            ours,
            [
                json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": ["get", "list", "watch"], "shortNames": ["po"], "categories": ["all"]})
            ]
        );
        assert_eq!(legacy_entries(&pods, Some(&theirs[2..])), ours);

        let deployments = k8sdao::built_in("deployments").unwrap().resource();
        let groups = [
            json!({"metadata": {"name": "apps"}, "versions": [{"version": "v1",
            "resources": [{"resource": "deployments", "verbs": ["get", "patch"],
                "subresources": [{"subresource": "scale", "verbs": ["get"]}]}]}]}),
        ];
        assert_eq!(
            apiserver_entry(&groups, &deployments),
            Some(&groups[0]["versions"][0]["resources"][0])
        );
        assert_eq!(apiserver_entry(&groups, &pods), None);
    }

    #[test]
    fn aggregated_discovery_is_what_kubectl_asks_for_first() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"),
        );
        assert!(wants_aggregated(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_aggregated(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            ),
        );
        assert!(!wants_aggregated(&headers));
    }
}
