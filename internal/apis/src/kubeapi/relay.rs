//! `--auth delegated`: what memory does not answer (writes, subresources such as `pods/log`
//! and `deployments/scale`, SelfSubjectAccessReviews, kinds not kept) is relayed to the
//! apiserver with the caller's own token, through the dao's passthrough, and its answer is
//! presented as the apiserver gave it: status, the headers a client reads, and the body,
//! streamed.
//!
//! A relayed stream (`pods/log?follow=true`, a watch of a kind not kept) is not ended when
//! its caller's access is revoked later (a RoleBinding deleted, a ServiceAccount's token
//! invalidated), unlike a watch memory serves. The same request sent to the apiserver is
//! authorized once, at its start, and its stream outlives any later change of RBAC or of the
//! token until it ends; here the apiserver made that very decision, as the caller, with the
//! caller's own token, and a client of the Kubernetes API expects what the apiserver does.
//! A watch from memory is another matter: k8sailor serves it with its own identity, so it is
//! the authorizer there and keeps its decision current. A relayed stream is still bounded:
//! it ends at shutdown and after a watch's randomised lifetime, as ours do, and the
//! apiserver ends its watches after its own timeout.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;

use super::Target;
use super::reads::{Streamed, cached_resource};
use super::status::Status;
use crate::AppState;
use crate::auth::bearer_token;
use biz::BizError;
use k8sdao::WrittenTo;

/// The request headers the apiserver's answer depends on; the caller's token is added by the
/// dao, and nothing else of the request (cookies, our own hop's headers) goes up.
const REQUEST_HEADERS: [HeaderName; 4] = [
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::CONTENT_TYPE,
    header::USER_AGENT,
];

/// The answer's headers a client reads: its media type and encoding, the apiserver's
/// warnings (deprecations, `kubectl apply`'s), when to retry, and the audit id that finds the
/// request in the apiserver's audit log.
const ANSWER_HEADERS: [&str; 5] = [
    "content-type",
    "content-encoding",
    "warning",
    "retry-after",
    "audit-id",
];

/// Subresources that need a protocol upgrade (SPDY or WebSocket) on both sides.
const UPGRADED: [&str; 3] = ["exec", "attach", "portforward"];

/// The caller's headers that go up: [`REQUEST_HEADERS`] and impersonation, which the
/// apiserver authorizes for the caller itself.
fn headers_up(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| {
            REQUEST_HEADERS.contains(name) || name.as_str().starts_with("impersonate-")
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The object a write through `target` changes, if the cache keeps its resource: a
/// subresource's write (`scale`, `status`) changes its object, whose version the answer
/// carries.
fn written(s: &AppState, target: Option<&Target>) -> Option<(k8sdao::Resource, Option<String>)> {
    let (group, version, resource, namespace) = match target? {
        Target::Collection {
            group,
            version,
            resource,
            namespace,
        }
        | Target::Object {
            group,
            version,
            resource,
            namespace,
            ..
        }
        | Target::Subresource {
            group,
            version,
            resource,
            namespace,
            ..
        } => (group, version, resource, namespace),
        Target::Group { .. } | Target::GroupVersion { .. } => return None,
    };
    let resource = cached_resource(s, group, version, resource)?;
    Some((resource, namespace.clone()))
}

/// Relays `request` as its caller, and presents the apiserver's answer.
pub(super) async fn forward(s: AppState, target: Option<Target>, request: Request) -> Response {
    let upgrade = request.headers().contains_key(header::UPGRADE)
        || matches!(&target, Some(Target::Subresource { subresource, .. }) if UPGRADED.contains(&subresource.as_str()));
    if upgrade {
        return Status::new(
            StatusCode::BAD_REQUEST,
            "k8sailor does not relay exec, attach or port-forward (they need a protocol upgrade): ask the apiserver for them",
        )
        .into_response();
    }
    // The access check let no request without a token through; this is that token.
    let Some(token) = bearer_token(&request).map(str::to_string) else {
        return Status::new(StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    let (parts, body) = request.into_parts();
    // Read already, within --max-body-bytes, by the edge layer.
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return Status::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )
            .into_response();
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let mut up = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(path);
    if let Some(headers) = up.headers_mut() {
        *headers = headers_up(&parts.headers);
    }
    let up = match up.body(body) {
        Ok(up) => up,
        Err(e) => {
            return Status::new(StatusCode::BAD_REQUEST, format!("invalid request: {e}"))
                .into_response();
        }
    };
    let written = written(&s, target.as_ref());
    let written = written.as_ref().map(|(resource, namespace)| WrittenTo {
        resource,
        namespace: namespace.as_deref(),
    });
    let answer = match s.workloads.source().relay(up, &token, written).await {
        Ok(answer) => answer,
        Err(e) => return Status::of(&BizError::Source(e)).into_response(),
    };
    let (upstream, body) = answer.into_parts();
    // A stream (a log followed, a watch of a kind not kept) ends as our own watches do: at
    // shutdown, or after its randomised lifetime; not on revocation, as the apiserver's own
    // (see the module's documentation).
    let body = Body::from_stream(body.take_until(s.watch_end()));
    let mut response = Response::new(body);
    *response.status_mut() = upstream.status;
    for name in ANSWER_HEADERS {
        for value in upstream.headers.get_all(name) {
            response.headers_mut().append(name, value.clone());
        }
    }
    // Sent as the apiserver encoded it: never held back to be compressed again.
    response.extensions_mut().insert(Streamed);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_what_the_answer_depends_on_goes_up() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("accept", "application/json"),
            ("content-type", "application/merge-patch+json"),
            ("authorization", "Bearer theirs"),
            ("cookie", "session=1"),
            ("impersonate-user", "alice"),
            ("x-forwarded-for", "10.0.0.1"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let up = headers_up(&headers);
        let mut names: Vec<&str> = up.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        // The token is added by the dao, from the checked caller, not copied.
        assert_eq!(names, ["accept", "content-type", "impersonate-user"]);
    }
}
