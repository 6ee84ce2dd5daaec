//! Discovery as the apiserver serves it, listing exactly what is served here: `/version`
//! (the apiserver's, read once at start), the legacy documents (`/api`, `/api/v1`, `/apis`,
//! `/apis/{group}[/{version}]`) and aggregated discovery (`APIGroupDiscoveryList`, v2), which
//! kubectl asks for first.

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

/// What every served resource may be asked: reads only.
const VERBS: [&str; 3] = ["get", "list", "watch"];

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

/// One group of aggregated discovery.
fn discovery_group(group: &str, versions: &BTreeMap<String, Vec<Resource>>) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(version, resources)| {
            let resources: Vec<Value> = resources
                .iter()
                .map(|r| {
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
        let core: Vec<Value> = groups
            .get("")
            .map(|versions| discovery_group("", versions))
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
        return discovery_list(named.map(|(g, v)| discovery_group(g, v)).collect());
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
pub(super) fn resources(s: &AppState, group: &str, version: &str) -> Response {
    let groups = by_group_version(served(s));
    let Some(resources) = groups.get(group).and_then(|v| v.get(version)) else {
        return Status::no_such_path().into_response();
    };
    let listed: Vec<Value> = resources
        .iter()
        .map(|r| {
            let resource = json!({
                "name": r.plural,
                "singularName": r.singular(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": VERBS,
            });
            with_names(resource, r)
        })
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
