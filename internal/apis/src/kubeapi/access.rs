//! `--auth delegated` for the Kubernetes API: each read is authorized as the apiserver
//! authorizes it, for its exact verb, resource, namespace and name (a list across namespaces
//! needs the right across the cluster). Discovery is open, as the apiserver's is to any
//! caller: it names what is served, never an object. The OpenAPI documents need an
//! authenticated caller, as the apiserver serves them to any (`system:discovery`).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use confk8s::{Access, ReviewError};

use super::Target;
use super::reads::{KubeQuery, served_resource};
use super::status::Status;
use crate::AppState;
use crate::auth::{access_to, bearer_token, client_address};

/// The access a read of `target` needs; None for discovery (open).
fn access_of(s: &AppState, target: &Target, watch: bool) -> Option<Access> {
    let (group, version, resource, namespace, name) = match target {
        Target::Group { .. } | Target::GroupVersion { .. } => return None,
        Target::Collection {
            group,
            version,
            resource,
            namespace,
        } => (group, version, resource, namespace, None),
        Target::Object {
            group,
            version,
            resource,
            namespace,
            name,
        } => (group, version, resource, namespace, Some(name)),
    };
    // What is not served is the handler's 404, whoever asks.
    let served = served_resource(s, group, version, resource)?;
    let verb = match (name, watch) {
        (Some(_), _) => "get",
        (None, true) => "watch",
        (None, false) => "list",
    };
    // RBAC names the resource by its group and plural: the catalog row's, or the CRD's.
    Some(access_to(
        verb,
        served.group.clone(),
        served.plural.clone(),
        namespace.as_deref(),
        name.map(String::as_str),
    ))
}

/// Refuses a read unless the caller's token may do exactly it.
pub(crate) async fn check(State(s): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/openapi/v2" || path.starts_with("/openapi/v3") {
        return authenticated(&s, request, next).await;
    }
    let target = if let Some(rest) = path.strip_prefix("/api/") {
        Target::parse(true, rest)
    } else if let Some(rest) = path.strip_prefix("/apis/") {
        Target::parse(false, rest)
    } else {
        None
    };
    let watch = axum::extract::Query::<KubeQuery>::try_from_uri(request.uri())
        .ok()
        .and_then(|q| q.0.watch)
        .is_some_and(|w| w == "true" || w == "1");
    let Some(access) = target.and_then(|t| access_of(&s, &t, watch)) else {
        return next.run(request).await;
    };
    let Some(reviewer) = s.reviewer.clone() else {
        return Status::new(StatusCode::FORBIDDEN, "no reviewer for --auth delegated")
            .into_response();
    };
    let Some(token) = bearer_token(&request).map(str::to_string) else {
        return Status::new(StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    match reviewer
        .review(&token, client_address(&request), &access)
        .await
    {
        Ok(()) => next.run(request).await,
        Err(e) => refused(&e),
    }
}

/// Serves the request to a caller whose token the apiserver knows, whoever it is.
async fn authenticated(s: &AppState, request: Request, next: Next) -> Response {
    let Some(reviewer) = s.reviewer.clone() else {
        return Status::new(StatusCode::FORBIDDEN, "no reviewer for --auth delegated")
            .into_response();
    };
    let Some(token) = bearer_token(&request).map(str::to_string) else {
        return Status::new(StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    match reviewer.user(&token, client_address(&request)).await {
        Ok(_) => next.run(request).await,
        Err(e) => refused(&e),
    }
}

/// A review's refusal as the apiserver's Status.
fn refused(e: &ReviewError) -> Response {
    let code = match e {
        ReviewError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        ReviewError::Forbidden { .. } => StatusCode::FORBIDDEN,
        ReviewError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
        ReviewError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    Status::new(code, e.to_string()).into_response()
}
