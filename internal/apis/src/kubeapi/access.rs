//! `--auth delegated` for the Kubernetes API: each read from memory is authorized as the
//! apiserver authorizes it, for its exact verb, resource, namespace and name (a list across
//! namespaces needs the right across the cluster). Discovery is open, as the apiserver's is to
//! any caller: it names what is served, never an object. A request that is relayed is
//! authorized by the apiserver itself, and the OpenAPI documents are served to any caller the
//! apiserver knows (`system:discovery`); here their token is only authenticated (a cached
//! TokenReview), so that it counts against its user's fair share.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use confk8s::{Access, ReviewError};

use super::query::{KubeQuery, flag};
use super::status::Status;
use super::websocket::take_protocol_token;
use super::{Routed, Target};
use crate::AppState;
use crate::auth::{access_to, bearer_token, client_address};
use crate::fairness::Caller;

/// The access a read of `target`, of the served resource `served`, needs; None for
/// discovery (open).
fn access_of(served: &biz::Resource, target: &Target<'_>, watch: bool) -> Option<Access> {
    let (group, resource, namespace, name) = match *target {
        Target::Group { .. } | Target::GroupVersion { .. } | Target::Subresource { .. } => {
            return None;
        }
        Target::Collection {
            group,
            resource,
            namespace,
            ..
        } => (group, resource, namespace, None),
        Target::Object {
            group,
            resource,
            namespace,
            name,
            ..
        } => (group, resource, namespace, Some(name)),
    };
    let verb = match (name, watch) {
        (Some(_), _) => "get",
        (None, true) => "watch",
        (None, false) => "list",
    };
    // The apiserver reads `/api/v1/namespaces/{name}` as a request in that namespace (its
    // RequestInfo does), so a RoleBinding there may allow it, and its refusal names it.
    let namespace = match (namespace, name) {
        (None, Some(name)) if group.is_empty() && resource == "namespaces" => Some(name),
        (namespace, _) => namespace,
    };
    // RBAC names the resource by its group and plural: the catalog row's, or the CRD's.
    Some(access_to(
        verb,
        served.group.clone(),
        served.plural.clone(),
        namespace,
        name,
    ))
}

/// The apiserver's answer to a failed review of `access` (None: the token's alone).
fn refusal(e: ReviewError, access: Option<&Access>) -> Response {
    let status = match &e {
        ReviewError::Unauthenticated(_) => Status::new(StatusCode::UNAUTHORIZED, "Unauthorized"),
        ReviewError::Forbidden { user, reason, .. } => match access {
            Some(access) => Status::forbidden(user, access, reason),
            None => Status::new(StatusCode::FORBIDDEN, e.to_string()),
        },
        ReviewError::Throttled { retry_after } => Status {
            retry_after: Some(retry_after.as_secs()),
            ..Status::new(StatusCode::TOO_MANY_REQUESTS, e.to_string())
        },
        ReviewError::Unavailable(_) => Status::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    status.into_response()
}

/// The caller's bearer token: `Authorization`'s, else one a WebSocket carries as a
/// subprotocol (a browser's), which is then taken out of the subprotocols and put in
/// `Authorization`, so that the handshake and a relay read it as any other; None without one,
/// or for one the apiserver would refuse to read.
fn caller_token(request: &mut Request) -> Option<String> {
    if let Some(token) = bearer_token(request) {
        return Some(token.to_string());
    }
    let token = match take_protocol_token(request.headers_mut()) {
        Ok(token) => token?,
        Err(e) => {
            tracing::debug!(error = %e, "a WebSocket's token is refused");
            return None;
        }
    };
    let authorization = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    request
        .headers_mut()
        .insert(header::AUTHORIZATION, authorization);
    Some(token)
}

/// Refuses a read from memory unless the caller's token may do exactly it, and a relayed
/// request unless it carries a token the apiserver knows; the caller, once known, is put
/// among the request's extensions for its fair share.
pub(crate) async fn check(State(s): State<AppState>, mut request: Request, next: Next) -> Response {
    let routed = Routed::of(&s, request.method(), request.uri().path());
    let watch = axum::extract::Query::<KubeQuery>::try_from_uri(request.uri())
        .ok()
        .and_then(|q| flag(q.0.watch.as_deref(), "watch").ok())
        .unwrap_or(false);
    let access = match &routed.target {
        // What is not served is the handler's 404, whoever asks.
        Some(target) if routed.from_memory => {
            match (routed.resource.as_ref()).and_then(|served| access_of(served, target, watch)) {
                Some(access) => Some(access),
                None => return next.run(request).await,
            }
        }
        _ if routed.from_memory => return next.run(request).await,
        // Relayed: the apiserver authorizes it.
        _ => None,
    };
    let Some(reviewer) = s.reviewer.clone() else {
        return Status::new(StatusCode::FORBIDDEN, "no reviewer for --auth delegated")
            .into_response();
    };
    let Some(token) = caller_token(&mut request) else {
        return Status::new(StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    let from = client_address(&request);
    if let Some(access) = access
        && let Err(e) = reviewer.review(&token, from, &access).await
    {
        return refusal(e, Some(&access));
    }
    match reviewer.user(&token, from).await {
        Ok(user) if !user.username.is_empty() => {
            request.extensions_mut().insert(Caller {
                user: user.username,
            });
        }
        Ok(_) => {}
        Err(e) => return refusal(e, None),
    }
    next.run(request).await
}
