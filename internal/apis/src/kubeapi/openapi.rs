//! `/openapi/v2`, `/openapi/v3` and `/openapi/v3/{group-version}?hash=`: the apiserver's
//! documents as the dao keeps them (`k8sdao::OpenApiDocs`), so `kubectl explain` works
//! against k8sailor. JSON only: a client that accepts only protobuf gets 406, as the
//! apiserver's other endpoints answer what they cannot encode.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8sdao::OpenApiAnswer;

use super::status::Status;
use crate::AppState;
use crate::envelope::json_response;
use crate::watch::preference;

/// Whether the client takes JSON: no `Accept`, or a range of it that matches with a quality
/// above zero.
fn accepts_json(headers: &HeaderMap) -> bool {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    accept.is_empty() || preference(&accept, ("application", "json")).is_some_and(|(q, _)| q > 0)
}

/// Whether `If-None-Match` names this validator (or `*`).
fn unchanged(headers: &HeaderMap, etag: &axum::http::HeaderValue) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|given| given == "*" || etag.to_str().is_ok_and(|e| e == given))
}

pub(super) async fn document(State(s): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    if !accepts_json(&headers) {
        return Status::new(
            StatusCode::NOT_ACCEPTABLE,
            "only application/json is served for OpenAPI documents here",
        )
        .into_response();
    }
    let source = s.workloads.source();
    let docs = match source.openapi() {
        Ok(docs) => docs,
        Err(e) => {
            return Status::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response();
        }
    };
    let hash = uri
        .query()
        .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("hash=")));
    match docs.get(uri.path(), hash).await {
        Ok(OpenApiAnswer::Document(document)) => {
            let mut response = if let Some(etag) = &document.etag
                && unchanged(&headers, etag)
            {
                StatusCode::NOT_MODIFIED.into_response()
            } else {
                json_response(document.body.clone())
            };
            let answer = response.headers_mut();
            if let Some(etag) = &document.etag {
                answer.insert(header::ETAG, etag.clone());
            }
            if let Some(cache_control) = &document.cache_control {
                answer.insert(header::CACHE_CONTROL, cache_control.clone());
            }
            response
        }
        Ok(OpenApiAnswer::Moved { status, location }) => {
            (status, [(header::LOCATION, location)]).into_response()
        }
        Ok(OpenApiAnswer::NotFound) => Status::no_such_path().into_response(),
        Err(e) => Status::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}
