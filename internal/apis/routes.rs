use axum::Router;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::AppState;
use super::envelope::{ApiError, ApiPath, ApiQuery, ok, ok_page};
use crate::biz::ListRequest;

pub fn api() -> Router<AppState> {
    Router::new()
        .route("/ping", get(ping))
        .route("/deployments", get(list_deployments))
        .route("/deployments/{name}", get(get_deployment))
        .route("/deployments/{name}/pods", get(pods_of_deployment))
        .route("/pods", get(list_pods))
        .route("/pods/{name}", get(get_pod))
        .route("/pods/{name}/output", get(pod_output))
        .route("/pods/{name}/event", get(latest_pod_event))
        .route("/pods/{name}/events", get(pod_events))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    limit: Option<usize>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
    sort: Option<String>,
}

impl From<ListParams> for ListRequest {
    fn from(p: ListParams) -> Self {
        ListRequest {
            namespace: p.namespace,
            label_selector: p.label_selector,
            field_selector: p.field_selector,
            limit: p.limit,
            continue_token: p.continue_token,
            sort: p.sort,
        }
    }
}

#[derive(Deserialize)]
struct ObjectParams {
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OutputParams {
    namespace: Option<String>,
    output_format: Option<String>,
}

async fn ping() -> &'static str {
    "pong"
}

async fn list_deployments(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    Ok(ok_page(s.workloads.list_deployments(&q.into()).await?))
}

async fn get_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .get_deployment(q.namespace.as_deref(), &name)
        .await?))
}

async fn pods_of_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .pods_of_deployment(q.namespace.as_deref(), &name)
        .await?))
}

async fn list_pods(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    Ok(ok_page(s.workloads.list_pods(&q.into()).await?))
}

async fn get_pod(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .get_pod(q.namespace.as_deref(), &name)
        .await?))
}

async fn latest_pod_event(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .latest_pod_event(q.namespace.as_deref(), &name)
        .await?))
}

async fn pod_events(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .pod_events(q.namespace.as_deref(), &name)
        .await?))
}

/// The raw Pod, not enveloped, as `kubectl get pod -o json|yaml` prints it.
async fn pod_output(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<OutputParams>,
) -> Result<Response, ApiError> {
    let (format, body) = s
        .workloads
        .pod_output(q.namespace.as_deref(), &name, q.output_format.as_deref())
        .await?;
    Ok(([(header::CONTENT_TYPE, format.content_type())], body).into_response())
}

pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {method} {}", uri.path()),
    )
}
