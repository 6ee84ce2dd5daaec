//! Failures as the apiserver answers them: a `metav1.Status` object, never our envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::envelope::status_of;
use crate::fairness::Refused;
use biz::{BizError, Resource};

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

    /// A request past its caller's fair share, as the apiserver's priority and fairness
    /// answers one it turns away.
    pub fn too_many_requests(refused: Refused) -> Status {
        Status {
            retry_after: Some(refused.retry_after),
            ..Status::new(StatusCode::TOO_MANY_REQUESTS, refused.message)
        }
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
        Status::new(status_of(e.failure()), e.to_string())
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
            StatusCode::CONFLICT => "Conflict",
            StatusCode::GONE => "Expired",
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
        let mut response = (self.code, axum::Json(self.to_json())).into_response();
        let retry_after = self
            .retry_after
            .or((self.code == StatusCode::SERVICE_UNAVAILABLE).then_some(1));
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
