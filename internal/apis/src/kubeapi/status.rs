//! Failures as the apiserver answers them: a `metav1.Status` object, never our envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::envelope::{retry_after_of, status_of};
use crate::fairness::Refused;
use biz::{BizError, Resource};
use confk8s::Access;
use k8sdao::{DaoError, HistoryError};

/// A failed request, as a `Status`.
#[derive(Debug)]
pub(super) struct Status {
    pub code: StatusCode,
    pub message: String,
    pub details: Option<Value>,
    /// When to try again, in whole seconds: the `Retry-After` header and
    /// `details.retryAfterSeconds`, as the apiserver sends both.
    pub retry_after: Option<u64>,
}

/// A query parameter the apiserver's validation refuses, as it words it (apimachinery's
/// `field.Error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum FieldError {
    Forbidden {
        field: &'static str,
        detail: String,
    },
    NotSupported {
        field: &'static str,
        value: String,
        supported: &'static [&'static str],
    },
}

impl FieldError {
    fn field(&self) -> &'static str {
        match self {
            FieldError::Forbidden { field, .. } | FieldError::NotSupported { field, .. } => field,
        }
    }

    /// The cause's `reason`.
    fn cause_type(&self) -> &'static str {
        match self {
            FieldError::Forbidden { .. } => "FieldValueForbidden",
            FieldError::NotSupported { .. } => "FieldValueNotSupported",
        }
    }

    /// What is wrong, without the field: the cause's `message`.
    fn body(&self) -> String {
        match self {
            FieldError::Forbidden { detail, .. } => format!("Forbidden: {detail}"),
            FieldError::NotSupported {
                value, supported, ..
            } => {
                let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                format!(
                    "Unsupported value: {value:?}: supported values: {}",
                    supported.join(", ")
                )
            }
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field(), self.body())
    }
}

impl Status {
    pub fn new(code: StatusCode, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// What the apiserver answers a method a resource does not take; with `--auth none`,
    /// every write, since k8sailor never writes with its own identity for an anonymous caller.
    pub fn method_not_allowed() -> Status {
        Status::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "the server does not allow this method on the requested resource",
        )
    }

    /// The apiserver's 403 for a request its authorizers refuse `user`, worded as its
    /// `responsewriters.Forbidden` and apimachinery's `NewForbidden` word it: `pods "web" is
    /// forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "ns"`,
    /// the authorizer's `reason` after a colon when it gave one.
    pub fn forbidden(user: &str, access: &Access, reason: &str) -> Status {
        let resource = if access.subresource.is_empty() {
            access.resource.to_string()
        } else {
            format!("{}/{}", access.resource, access.subresource)
        };
        let scope = match &access.namespace {
            Some(namespace) if !namespace.is_empty() => format!("in the namespace {namespace:?}"),
            _ => "at the cluster scope".to_string(),
        };
        let mut refused = format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            access.verb, access.group
        );
        if !reason.is_empty() {
            refused = format!("{refused}: {reason}");
        }
        // The group and resource, without the subresource.
        let qualified = if access.group.is_empty() {
            access.resource.to_string()
        } else {
            format!("{}.{}", access.resource, access.group)
        };
        let name = access.name.as_deref().filter(|n| !n.is_empty());
        let message = match name {
            Some(name) => format!("{qualified} {name:?} is forbidden: {refused}"),
            None => format!("{qualified} is forbidden: {refused}"),
        };
        // metav1.StatusDetails leaves its empty members out.
        let mut details = serde_json::Map::new();
        if let Some(name) = name {
            details.insert("name".into(), json!(name));
        }
        if !access.group.is_empty() {
            details.insert("group".into(), json!(access.group));
        }
        details.insert("kind".into(), json!(access.resource));
        Status {
            details: Some(Value::Object(details)),
            ..Status::new(StatusCode::FORBIDDEN, message)
        }
    }

    /// A request past its caller's fair share, as the apiserver's priority and fairness
    /// answers one it turns away.
    pub fn too_many_requests(refused: Refused) -> Status {
        Status {
            retry_after: Some(refused.retry_after),
            ..Status::new(StatusCode::TOO_MANY_REQUESTS, refused.message)
        }
    }

    /// The apiserver's 422 for query parameters its validation of `ListOptions` refuses.
    pub fn invalid_list_options(errors: &[FieldError]) -> Status {
        let mut messages: Vec<String> = Vec::new();
        for error in errors {
            let message = error.to_string();
            if !messages.contains(&message) {
                messages.push(message);
            }
        }
        // apimachinery's aggregate error: one message as it is, several in brackets.
        let aggregate = match messages.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.cause_type(), "message": e.body(), "field": e.field()}))
            .collect();
        Status {
            details: Some(json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes})),
            ..Status::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("ListOptions.meta.k8s.io \"\" is invalid: {aggregate}"),
            )
        }
    }

    /// The apiserver's answer to a read at a version it has not reached after waiting for
    /// it: come back in a second.
    pub fn too_large_resource_version(requested: u64, current: Option<u64>) -> Status {
        Status {
            details: Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            })),
            retry_after: Some(TOO_LARGE_RETRY_SECONDS),
            ..Status::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "Timeout: Too large resource version: {requested}, current: {}",
                    current.unwrap_or(0)
                ),
            )
        }
    }

    /// The apiserver's 410 for a list at a version no longer kept.
    pub fn list_too_old() -> Status {
        Status::new(
            StatusCode::GONE,
            "The resourceVersion for the provided list is too old.",
        )
    }

    /// The apiserver's 406 for an `Accept` none of whose media types its route serves.
    pub fn no_representation(available: &[&str]) -> Status {
        Status {
            details: Some(json!({})),
            ..Status::new(
                StatusCode::NOT_ACCEPTABLE,
                format!(
                    "406: Not Acceptable\n\nAvailable representations: {}",
                    available.join(", ")
                ),
            )
        }
    }

    /// The apiserver's 406 for an `Accept` whose served types ask what cannot be answered
    /// (a conversion not served, or a stream without a stream encoding).
    pub fn not_acceptable(served: &[&str]) -> Status {
        Status::new(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "only the following media types are accepted: {}",
                served.join(", ")
            ),
        )
    }

    /// What the apiserver answers for a path it does not serve.
    pub fn no_such_path() -> Status {
        Status {
            details: Some(json!({})),
            ..Status::new(
                StatusCode::NOT_FOUND,
                "the server could not find the requested resource",
            )
        }
    }

    /// The apiserver's 404 for an object that does not exist.
    pub fn not_found(resource: &Resource, name: &str) -> Status {
        Status {
            details: Some(json!({"name": name, "group": resource.group, "kind": resource.plural})),
            ..Status::new(
                StatusCode::NOT_FOUND,
                format!("{} \"{name}\" not found", qualified(resource)),
            )
        }
    }

    /// `biz`'s failure as the apiserver would say it.
    pub fn of(e: &BizError) -> Status {
        match e {
            BizError::Source(DaoError::Version(HistoryError::Ahead { requested, current })) => {
                Status::too_large_resource_version(*requested, *current)
            }
            // The watch cache's wording, with the oldest version it could still resume.
            BizError::Source(DaoError::Version(HistoryError::Expired {
                requested,
                complete_after,
            })) => Status::new(
                StatusCode::GONE,
                format!(
                    "too old resource version: {requested} ({})",
                    complete_after.unwrap_or(0)
                ),
            ),
            // What the apiserver answers while its watch cache of the kind initializes
            // (ResilientWatchCacheInitialization, on since 1.31, locked since 1.34: the
            // cacher's `NewTooManyRequests("storage is (re)initializing", retryAfter)`).
            BizError::Source(DaoError::Initializing { .. }) => Status {
                retry_after: retry_after_of(e),
                ..Status::new(StatusCode::TOO_MANY_REQUESTS, "storage is (re)initializing")
            },
            other => Status::new(status_of(other.failure()), other.to_string()),
        }
    }

    /// The apiserver's `reason` for each code it answers.
    fn reason(&self) -> &'static str {
        match self.code {
            StatusCode::BAD_REQUEST => "BadRequest",
            StatusCode::UNAUTHORIZED => "Unauthorized",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::NOT_FOUND => "NotFound",
            StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
            StatusCode::NOT_ACCEPTABLE => "NotAcceptable",
            StatusCode::UNPROCESSABLE_ENTITY => "Invalid",
            StatusCode::CONFLICT => "Conflict",
            StatusCode::GONE => "Expired",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
            StatusCode::TOO_MANY_REQUESTS => "TooManyRequests",
            StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
            StatusCode::GATEWAY_TIMEOUT => "Timeout",
            _ => "InternalError",
        }
    }

    /// The `Status` object.
    pub fn to_json(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason(),
            "code": self.code.as_u16(),
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(seconds) = self.retry_after {
            status["details"]["retryAfterSeconds"] = json!(seconds);
        }
        status
    }
}

/// The seconds the apiserver tells a client to wait before asking again for a version it has
/// not reached.
const TOO_LARGE_RETRY_SECONDS: u64 = 1;

/// `configmaps`, `statefulsets.apps`: a resource as the apiserver's messages name it.
pub(super) fn qualified(resource: &Resource) -> String {
    if resource.group.is_empty() {
        resource.plural.to_string()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        if self.code.is_server_error() {
            tracing::warn!(status = %self.code, error = %self.message, "request failed");
        }
        let retry_after = self
            .retry_after
            .or((self.code == StatusCode::SERVICE_UNAVAILABLE).then_some(1));
        let mut response = (self.code, axum::Json(self.to_json())).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_worded_as_the_apiservers() {
        let list = Access {
            verb: "list",
            group: "".into(),
            resource: "pods".into(),
            subresource: "",
            namespace: Some("y".into()),
            name: None,
        };
        let status = Status::forbidden("x", &list, "").to_json();
        assert_eq!(
            status["message"],
            r#"pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace "y""#
        );
        assert_eq!(status["details"], json!({"kind": "pods"}));
        assert_eq!(
            (&status["reason"], &status["code"]),
            (&json!("Forbidden"), &json!(403))
        );
        let get = Access {
            verb: "get",
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale",
            namespace: None,
            name: Some("web".into()),
        };
        let status = Status::forbidden("x", &get, "RBAC: role \"r\" not found").to_json();
        assert_eq!(
            status["message"],
            r#"deployments.apps "web" is forbidden: User "x" cannot get resource "deployments/scale" in API group "apps" at the cluster scope: RBAC: role "r" not found"#
        );
        assert_eq!(
            status["details"],
            json!({"name": "web", "group": "apps", "kind": "deployments"})
        );
    }
}
