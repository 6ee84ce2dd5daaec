//! `--auth none`: a SelfSubjectAccessReview is answered here, with what k8sailor lets any
//! caller do, since the apiserver does not know the anonymous caller k8sailor serves: a get,
//! list or watch of a resource served from memory, and a get of discovery or the OpenAPI
//! documents, are allowed; anything else is not (a write is 405 here, nothing is relayed).
//! Clients that ask before they read then read: k9s asks before each list and shows nothing
//! it was refused, `kubectl auth can-i` prints the answer.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Target;
use super::reads::served;
use super::status::{Status, qualified};
use crate::AppState;
use biz::Resource;

const GROUP: &str = "authorization.k8s.io";
const KIND: &str = "SelfSubjectAccessReview";

/// The verbs a caller without auth is served.
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// Whether `method` and `target` create a SelfSubjectAccessReview.
pub(super) fn is_self_review(method: &Method, target: Option<&Target>) -> bool {
    *method == Method::POST
        && matches!(
            target,
            Some(Target::Collection { group, version, resource, namespace: None })
                if group == GROUP && version == "v1" && resource == "selfsubjectaccessreviews"
        )
}

/// `spec` of a review: exactly one of the two is given.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    resource_attributes: Option<ResourceAttributes>,
    non_resource_attributes: Option<NonResourceAttributes>,
}

/// An absent attribute is empty, as the apiserver reads it: `namespace` "" is every
/// namespace, `version` "" any.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ResourceAttributes {
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NonResourceAttributes {
    verb: String,
    path: String,
}

/// The answer to a review: whether it is allowed, and why.
#[derive(Debug, PartialEq, Eq)]
struct Decision {
    allowed: bool,
    reason: String,
}

/// The paths of discovery and the OpenAPI documents, which any caller may get.
fn is_discovery(path: &str) -> bool {
    matches!(path, "/version" | "/api" | "/apis" | "/openapi")
        || ["/api/", "/apis/", "/openapi/"]
            .iter()
            .any(|prefix| path.starts_with(prefix))
}

/// What k8sailor without auth lets any caller do, among the `served` resources.
fn decide(served: &[Resource], spec: &Spec) -> Result<Decision, Status> {
    let invalid = |message: &str| {
        Status::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{KIND}.{GROUP} \"\" is invalid: {message}"),
        )
    };
    let allowed = |reason: String| Decision {
        allowed: true,
        reason,
    };
    let refused = Decision {
        allowed: false,
        reason: "k8sailor without auth serves only reads (get, list, watch) of what it keeps, \
                 discovery and the OpenAPI documents"
            .into(),
    };
    match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(r), None) => {
            let any_version = matches!(r.version.as_str(), "" | "*");
            let resource = served.iter().find(|s| {
                s.group == r.group
                    && s.plural == r.resource
                    && (any_version || s.version == r.version)
            });
            Ok(match resource {
                Some(resource)
                    if r.subresource.is_empty() && READ_VERBS.contains(&r.verb.as_str()) =>
                {
                    allowed(format!(
                        "k8sailor without auth serves {} {} to any caller",
                        r.verb,
                        qualified(resource)
                    ))
                }
                _ => refused,
            })
        }
        (None, Some(n)) => Ok(if n.verb == "get" && is_discovery(&n.path) {
            allowed(format!(
                "k8sailor without auth serves {} to any caller",
                n.path
            ))
        } else {
            refused
        }),
        (Some(_), Some(_)) => Err(invalid(
            "spec.nonResourceAttributes: Invalid value: \"object\": cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            "spec.resourceAttributes: Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// Answers the review `request` creates, as the apiserver does: the review, with its status.
pub(super) async fn answer(s: &AppState, request: Request) -> Response {
    match review(s, request).await {
        Ok(review) => (
            StatusCode::CREATED,
            [(header::CONTENT_TYPE, "application/json")],
            review.to_string(),
        )
            .into_response(),
        Err(status) => status.into_response(),
    }
}

async fn review(s: &AppState, request: Request) -> Result<Value, Status> {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(Status::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body of the request was in an unknown format - accepted media types include: application/json",
        ));
    }
    // Read already, within --max-body-bytes, by the edge layer.
    let body = request
        .into_body()
        .collect()
        .await
        .map_err(|e| {
            Status::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )
        })?
        .to_bytes();
    let mut review: Value = serde_json::from_slice(&body).map_err(|e| {
        Status::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not a {KIND}: {e}"),
        )
    })?;
    if !review.is_object() {
        return Err(Status::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not a {KIND}: not a JSON object"),
        ));
    }
    if let Some(kind) = review.get("kind").filter(|k| !k.is_null())
        && kind != KIND
    {
        return Err(Status::new(
            StatusCode::BAD_REQUEST,
            format!("the object provided is unrecognized (must be of type {KIND}): {kind}"),
        ));
    }
    let spec: Spec = match review.get("spec") {
        Some(spec) => Spec::deserialize(spec).map_err(|e| {
            Status::new(
                StatusCode::BAD_REQUEST,
                format!("the body is not a {KIND}: spec: {e}"),
            )
        })?,
        None => Spec::default(),
    };
    let decision = decide(&served(s), &spec)?;
    review["kind"] = json!(KIND);
    review["apiVersion"] = json!(format!("{GROUP}/v1"));
    if review.get("metadata").is_none_or(Value::is_null) {
        review["metadata"] = json!({"creationTimestamp": null});
    }
    review["status"] = json!({"allowed": decision.allowed, "reason": decision.reason});
    Ok(review)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Vec<Resource> {
        // Secrets are kept as metadata alone: never served, so never among these.
        ["pods", "deployments"]
            .map(|name| model::built_in(name).unwrap().resource())
            .into()
    }

    fn resource(verb: &str, group: &str, version: &str, resource: &str, sub: &str) -> Spec {
        Spec {
            resource_attributes: Some(ResourceAttributes {
                verb: verb.into(),
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                subresource: sub.into(),
            }),
            non_resource_attributes: None,
        }
    }

    fn allowed(spec: &Spec) -> bool {
        decide(&served(), spec).unwrap().allowed
    }

    #[test]
    fn reads_of_what_is_served_are_allowed_and_nothing_else() {
        for verb in READ_VERBS {
            assert!(allowed(&resource(verb, "", "v1", "pods", "")), "{verb}");
            assert!(allowed(&resource(verb, "apps", "", "deployments", "")));
        }
        assert!(allowed(&resource("list", "apps", "*", "deployments", "")));
        for refused in [
            resource("create", "", "v1", "pods", ""),
            resource("delete", "apps", "v1", "deployments", ""),
            resource("*", "", "v1", "pods", ""),
            resource("get", "", "v1", "pods", "log"),
            resource("update", "apps", "v1", "deployments", "scale"),
            // Not served: kept as metadata alone, or not kept, or in another group or version.
            resource("list", "", "v1", "secrets", ""),
            resource("list", "", "v1", "nodes", ""),
            resource("list", "", "v1", "deployments", ""),
            resource("list", "apps", "v1beta1", "deployments", ""),
        ] {
            assert!(!allowed(&refused), "{refused:?}");
        }
        let nonresource = |verb: &str, path: &str| Spec {
            resource_attributes: None,
            non_resource_attributes: Some(NonResourceAttributes {
                verb: verb.into(),
                path: path.into(),
            }),
        };
        for path in ["/version", "/api", "/apis/apps/v1", "/openapi/v3"] {
            assert!(allowed(&nonresource("get", path)), "{path}");
        }
        assert!(!allowed(&nonresource("post", "/api")));
        assert!(!allowed(&nonresource("get", "/metrics")));
        assert!(!allowed(&nonresource("get", "/apiary")));
    }

    #[test]
    fn a_spec_names_exactly_one_kind_of_attributes() {
        for spec in [
            Spec::default(),
            Spec {
                non_resource_attributes: Some(NonResourceAttributes::default()),
                ..resource("get", "", "v1", "pods", "")
            },
        ] {
            let refused = decide(&served(), &spec).unwrap_err();
            assert_eq!(refused.code, StatusCode::UNPROCESSABLE_ENTITY, "{spec:?}");
        }
    }
}
