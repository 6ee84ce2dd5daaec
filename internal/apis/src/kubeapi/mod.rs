//! The Kubernetes API itself, served from memory at the server's root beside the prefix:
//! discovery, the apiserver's OpenAPI documents (relayed and kept), and the reads (lists,
//! objects, Tables, watches) of every served resource whose whole object the cache keeps,
//! answered as the apiserver answers them, so that kubectl and client-go can be pointed at
//! k8sailor.

mod access;
mod discovery;
mod openapi;
mod reads;
mod status;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
pub(super) use access::check;
pub(super) use reads::is_streamed;

/// The routes of the Kubernetes API. Every path under `/api` and `/apis` goes to one handler
/// that reads it as a [`Target`], so that the handler and the access check read it alike.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::core_versions))
        .route("/apis", get(discovery::groups))
        .route("/api/{*path}", get(reads::core))
        .route("/apis/{*path}", get(reads::grouped))
        .route("/openapi/v2", get(openapi::document))
        .route("/openapi/v3", get(openapi::document))
        .route("/openapi/v3/{*path}", get(openapi::document))
}

/// Whether some media range of `Accept` has every one of `params` (`as=Table`, `v=v1`...):
/// how clients ask for a Table or aggregated discovery instead of the plain document.
fn accepts(headers: &HeaderMap, params: &[&str]) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let given: Vec<&str> = range.split(';').map(str::trim).collect();
            params.iter().all(|p| given.contains(p))
        })
}

/// A JSON document as the apiserver answers it, of `content_type`.
fn json_answer(content_type: &'static str, body: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body.to_string(),
    )
        .into_response()
}

/// What a path under `/api` or `/apis` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `/apis/{group}`: the group's versions.
    Group { group: String },
    /// `/api/v1`, `/apis/{group}/{version}`: the resources served in it.
    GroupVersion { group: String, version: String },
    /// `.../{resource}`, `.../namespaces/{ns}/{resource}`.
    Collection {
        group: String,
        version: String,
        resource: String,
        namespace: Option<String>,
    },
    /// `.../{resource}/{name}`, `.../namespaces/{ns}/{resource}/{name}`.
    Object {
        group: String,
        version: String,
        resource: String,
        namespace: Option<String>,
        name: String,
    },
}

impl Target {
    /// `path` under `/api` (`core`) or `/apis`, without its leading slash; None for what the
    /// apiserver would not serve either (subresources among them: none is served yet).
    pub(super) fn parse(core: bool, path: &str) -> Option<Target> {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        let (group, rest) = if core {
            ("", &segments[..])
        } else {
            let (group, rest) = segments.split_first()?;
            if rest.is_empty() {
                return Some(Target::Group {
                    group: group.to_string(),
                });
            }
            (*group, rest)
        };
        let (version, rest) = rest.split_first()?;
        let (group, version) = (group.to_string(), version.to_string());
        Some(match rest {
            [] => Target::GroupVersion { group, version },
            [resource] => Target::Collection {
                group,
                version,
                resource: resource.to_string(),
                namespace: None,
            },
            [resource, name] => Target::Object {
                group,
                version,
                resource: resource.to_string(),
                namespace: None,
                name: name.to_string(),
            },
            ["namespaces", namespace, resource] => Target::Collection {
                group,
                version,
                resource: resource.to_string(),
                namespace: Some(namespace.to_string()),
            },
            ["namespaces", namespace, resource, name] => Target::Object {
                group,
                version,
                resource: resource.to_string(),
                namespace: Some(namespace.to_string()),
                name: name.to_string(),
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_what_the_apiserver_serves_there() {
        assert_eq!(
            Target::parse(true, "v1"),
            Some(Target::GroupVersion {
                group: "".into(),
                version: "v1".into()
            })
        );
        assert_eq!(
            Target::parse(false, "apps"),
            Some(Target::Group {
                group: "apps".into()
            })
        );
        assert_eq!(
            Target::parse(true, "v1/namespaces/ns/configmaps/web"),
            Some(Target::Object {
                group: "".into(),
                version: "v1".into(),
                resource: "configmaps".into(),
                namespace: Some("ns".into()),
                name: "web".into(),
            })
        );
        assert_eq!(
            Target::parse(false, "apps/v1/statefulsets"),
            Some(Target::Collection {
                group: "apps".into(),
                version: "v1".into(),
                resource: "statefulsets".into(),
                namespace: None,
            })
        );
        assert_eq!(
            Target::parse(true, "v1/nodes/n1"),
            Some(Target::Object {
                group: "".into(),
                version: "v1".into(),
                resource: "nodes".into(),
                namespace: None,
                name: "n1".into(),
            })
        );
        for unserved in [
            "v1/namespaces/ns/pods/web/log",
            "v1//pods",
            "",
            "v1/a/b/c/d/e",
        ] {
            assert_eq!(Target::parse(true, unserved), None, "{unserved}");
        }
    }
}
