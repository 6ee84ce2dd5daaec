//! `--auth none`: a SelfSubjectAccessReview is answered here, with what k8sailor lets any
//! caller do, since the apiserver does not know the anonymous caller k8sailor serves: a get,
//! list or watch of a resource served from memory (with `--namespace`, in that namespace
//! alone: never across namespaces nor of a cluster-scoped kind, which are not served), and a
//! get of discovery or the OpenAPI documents, are allowed; anything else is not (a write is
//! 405 here, nothing is relayed).
//! Clients that ask before they read then read: k9s asks before each list and shows nothing
//! it was refused, `kubectl auth can-i` prints the answer.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Target;
use super::discovery::VERBS;
use super::reads::served;
use super::status::{Status, qualified};
use crate::AppState;
use biz::Resource;

const GROUP: &str = "authorization.k8s.io";
const KIND: &str = "SelfSubjectAccessReview";

/// Whether `method` and `target` create a SelfSubjectAccessReview.
pub(super) fn is_self_review(method: &Method, target: Option<&Target<'_>>) -> bool {
    *method == Method::POST
        && matches!(
            target,
            Some(&Target::Collection { group, version, resource, namespace: None })
                if group == GROUP && version == "v1" && resource == "selfsubjectaccessreviews"
        )
}

/// `spec` of a review: exactly one of the two is given.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_attributes: Option<ResourceAttributes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    non_resource_attributes: Option<NonResourceAttributes>,
}

/// An absent attribute is empty, as the apiserver reads it: `namespace` "" is every
/// namespace, `version` "" any. The selectors a review may also carry narrow nothing here.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
struct ResourceAttributes {
    #[serde(skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    verb: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    subresource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
struct NonResourceAttributes {
    #[serde(skip_serializing_if = "String::is_empty")]
    path: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    verb: String,
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

/// What k8sailor serves: its resources, and the one namespace it is scoped to, if any (then
/// nothing of another namespace, nor across namespaces, is served).
struct Served<'a> {
    resources: &'a [Resource],
    scope: Option<&'a str>,
}

impl Served<'_> {
    /// Whether a read in `namespace` ("": across namespaces, or of a cluster-scoped
    /// `resource`) is served. A server scoped to a namespace keeps no cluster-scoped object.
    fn serves_in(&self, resource: &Resource, namespace: &str) -> bool {
        match self.scope {
            None => true,
            Some(scope) => resource.namespaced && namespace == scope,
        }
    }
}

/// What k8sailor without auth lets any caller do, among what it `served`.
fn decide(served: &Served<'_>, spec: &Spec) -> Result<Decision, Status> {
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
        reason: match served.scope {
            None => "k8sailor without auth serves only reads (get, list, watch) of what it \
                     keeps, discovery and the OpenAPI documents"
                .into(),
            Some(scope) => format!(
                "k8sailor without auth serves only reads (get, list, watch) of what it keeps \
                 in namespace {scope}, discovery and the OpenAPI documents"
            ),
        },
    };
    match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(r), None) => {
            let any_version = matches!(r.version.as_str(), "" | "*");
            let resource = served.resources.iter().find(|s| {
                s.group == r.group
                    && s.plural == r.resource
                    && (any_version || s.version == r.version)
            });
            Ok(match resource {
                Some(resource)
                    if r.subresource.is_empty()
                        && VERBS.contains(&r.verb.as_str())
                        && served.serves_in(resource, &r.namespace) =>
                {
                    let scope = match served.scope {
                        Some(scope) => format!(" in namespace {scope}"),
                        None => String::new(),
                    };
                    allowed(format!(
                        "k8sailor without auth serves {} {}{scope} to any caller",
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

/// The media types a review may be sent in.
const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

async fn review(s: &AppState, request: Request) -> Result<Value, Status> {
    let media = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|media| media.trim().to_ascii_lowercase());
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
    let (mut review, spec) = match media.as_deref() {
        Some(JSON) => from_json(&body)?,
        // The answer is JSON, which client-go accepts beside protobuf.
        Some(PROTOBUF) => from_json(&from_protobuf(&body)?)?,
        _ => {
            return Err(Status::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {JSON}, {PROTOBUF}"
                ),
            ));
        }
    };
    let resources = served(s);
    let source = s.workloads.source();
    let served = Served {
        resources: &resources,
        scope: source.scope(),
    };
    let decision = decide(&served, &spec)?;
    review["kind"] = json!(KIND);
    review["apiVersion"] = json!(format!("{GROUP}/v1"));
    if review.get("metadata").is_none_or(Value::is_null) {
        review["metadata"] = json!({"creationTimestamp": null});
    }
    review["status"] = json!({"allowed": decision.allowed, "reason": decision.reason});
    Ok(review)
}

/// The apiserver's 400 for a body it cannot decode as a review.
fn not_a_review(e: &dyn std::fmt::Display) -> Status {
    Status::new(
        StatusCode::BAD_REQUEST,
        format!("the body is not a {KIND}: {e}"),
    )
}

/// A review sent as protobuf, as the JSON it would have been sent as.
fn from_protobuf(body: &[u8]) -> Result<Vec<u8>, Status> {
    kubeproto::ObjectKind::find(GROUP, "v1", KIND)
        .ok_or_else(|| {
            Status::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("kubeproto's schema has no {KIND}"),
            )
        })?
        .enveloped_json(body)
        .map_err(|e| not_a_review(&e))
}

/// A review sent as JSON, kept as it came to be answered with its status, and its spec.
fn from_json(body: &[u8]) -> Result<(Value, Spec), Status> {
    let review: Value = serde_json::from_slice(body).map_err(|e| not_a_review(&e))?;
    if !review.is_object() {
        return Err(not_a_review(&"not a JSON object"));
    }
    if let Some(kind) = review.get("kind").filter(|k| !k.is_null())
        && kind != KIND
    {
        return Err(Status::new(
            StatusCode::BAD_REQUEST,
            format!("the object provided is unrecognized (must be of type {KIND}): {kind}"),
        ));
    }
    let spec = match review.get("spec") {
        Some(spec) => Spec::deserialize(spec).map_err(|e| not_a_review(&format!("spec: {e}")))?,
        None => Spec::default(),
    };
    Ok((review, spec))
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

    fn decide_unscoped(spec: &Spec) -> Result<Decision, Status> {
        let resources = served();
        let served = Served {
            resources: &resources,
            scope: None,
        };
        decide(&served, spec)
    }

    fn resource(verb: &str, group: &str, version: &str, resource: &str, sub: &str) -> Spec {
        Spec {
            resource_attributes: Some(ResourceAttributes {
                verb: verb.into(),
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                subresource: sub.into(),
                ..ResourceAttributes::default()
            }),
            non_resource_attributes: None,
        }
    }

    fn allowed(spec: &Spec) -> bool {
        decide_unscoped(spec).unwrap().allowed
    }

    #[test]
    fn reads_of_what_is_served_are_allowed_and_nothing_else() {
        for verb in VERBS {
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
    fn scoped_to_a_namespace_reads_are_allowed_there_alone() {
        let mut resources = served();
        resources.push(model::built_in("nodes").unwrap().resource());
        let served = Served {
            resources: &resources,
            scope: Some("shop"),
        };
        let in_namespace = |verb: &str, resource_name: &str, group: &str, namespace: &str| {
            let mut spec = resource(verb, group, "", resource_name, "");
            if let Some(attributes) = spec.resource_attributes.as_mut() {
                attributes.namespace = namespace.into();
            }
            decide(&served, &spec).unwrap()
        };
        for verb in VERBS {
            let decision = in_namespace(verb, "pods", "", "shop");
            assert!(decision.allowed, "{verb}");
            assert!(
                decision.reason.contains("in namespace shop"),
                "{decision:?}"
            );
            assert!(in_namespace(verb, "deployments", "apps", "shop").allowed);
            // Another namespace, or all of them, is not served.
            assert!(!in_namespace(verb, "pods", "", "default").allowed, "{verb}");
            assert!(!in_namespace(verb, "pods", "", "").allowed, "{verb}");
            // Nor is a cluster-scoped kind.
            assert!(!in_namespace(verb, "nodes", "", "").allowed, "{verb}");
            assert!(!in_namespace(verb, "nodes", "", "shop").allowed, "{verb}");
        }
        let refused = in_namespace("list", "pods", "", "default");
        assert!(refused.reason.contains("in namespace shop"), "{refused:?}");
        assert!(!in_namespace("delete", "pods", "", "shop").allowed);
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
            let refused = decide_unscoped(&spec).unwrap_err();
            assert_eq!(refused.code, StatusCode::UNPROCESSABLE_ENTITY, "{spec:?}");
        }
    }

    #[test]
    fn a_review_sent_as_protobuf_is_read_as_sent_as_json() {
        use kubeproto::testing::message;
        let enveloped =
            |review: &[u8]| kubeproto::testing::enveloped(&format!("{GROUP}/v1"), KIND, review);
        let spec_of = |review: &[u8]| from_json(&from_protobuf(&enveloped(review)).unwrap());
        let attributes = message(&[(1, b"shop"), (2, b"list"), (4, b"v1"), (5, b"pods")]);
        let metadata = message(&[(1, b"mine")]);
        let (review, spec) = spec_of(&message(&[
            (1, &metadata),
            (2, &message(&[(1, &attributes)])),
        ]))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"resourceAttributes": {
                "namespace": "shop", "verb": "list", "version": "v1", "resource": "pods",
            }})
        );
        assert_eq!(review["metadata"]["name"], "mine", "kept as sent: {review}");
        assert!(allowed(&spec));
        let non_resource = message(&[(1, b"/version"), (2, b"get")]);
        let (_, spec) = spec_of(&message(&[(2, &message(&[(2, &non_resource)]))])).unwrap();
        assert!(allowed(&spec));
        // No spec is the validation's 422; a body that is not protobuf is a 400.
        let (_, empty) = spec_of(&[]).unwrap();
        assert!(decide_unscoped(&empty).is_err());
        let refused = from_protobuf(b"{}").unwrap_err();
        assert_eq!(refused.code, StatusCode::BAD_REQUEST);
    }
}
