use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::UtoipaMethodRouter;
use utoipa_axum::routes;

use super::dispatch::Declared;
use super::docs::{DeploymentDoc, KubernetesObjectDoc, PodDoc};
use super::envelope::{
    ApiError, ApiJson, ApiPath, ApiQuery, Envelope, ErrorEnvelope, ok, ok_json, ok_page_json,
};
use super::{AppState, kinds, watch};
use biz::{
    CreateDeployment, CreateIngress, CreateService, DeploymentRecord, EventDto, IngressDto, Kind,
    ListRequest, OutputFormat, ReadAt, ServiceDto, Typed, Visibility,
};

/// Every API route: each is declared together with its OpenAPI description.
pub(super) fn api(mount: &str) -> Declared<AppState> {
    Declared::new()
        .routes(mounted(mount, routes!(ping)))
        .routes(mounted(mount, routes!(list_deployments)))
        .routes(mounted(mount, routes!(get_deployment, create_deployment, delete_deployment)))
        .routes(mounted(mount, routes!(deployment_output)))
        .routes(mounted(mount, routes!(scale_deployment)))
        .routes(mounted(mount, routes!(pods_of_deployment)))
        .routes(mounted(mount, routes!(services_of_deployment)))
        .routes(mounted(mount, routes!(ingresses_of_deployment)))
        .routes(mounted(mount, routes!(pods_of_service)))
        .routes(mounted(mount, routes!(list_pods)))
        .routes(mounted(mount, routes!(get_pod, delete_pod)))
        .routes(mounted(mount, routes!(pod_output)))
        .routes(mounted(mount, routes!(latest_pod_event)))
        .routes(mounted(mount, routes!(pod_events)))
        // Beside the generic GET of their path.
        .routes(mounted(mount, routes!(create_service)))
        .routes(mounted(mount, routes!(create_ingress)))
        .merge(kinds::routes(mount))
        .merge(kinds::resource_routes(mount))
}

/// `routes` under `mount`, in the route table and its OpenAPI description alike.
pub(super) fn mounted(
    mount: &str,
    (schemas, mut paths, router): UtoipaMethodRouter<AppState>,
) -> UtoipaMethodRouter<AppState> {
    paths.paths = std::mem::take(&mut paths.paths)
        .into_iter()
        .map(|(path, item)| (format!("{mount}{path}"), item))
        .collect();
    (schemas, paths, router)
}

#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct ListParams {
    /// Namespace to list; absent or empty: all namespaces (with `--auth delegated`, those
    /// where the caller may list (watch) the kind; `metadata.accessFiltered` says so).
    namespace: Option<String>,
    /// Label selector in kubectl syntax: `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`.
    label_selector: Option<String>,
    /// Field selector: `field=value`, `field==value`, `field!=value`, comma-separated; the
    /// fields the apiserver supports for the kind.
    field_selector: Option<String>,
    /// Page size; absent or 0: everything.
    limit: Option<usize>,
    /// `metadata.continue` of the previous page; an expired one is a 410.
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    continue_token: Option<String>,
    /// `name`, `namespace`, `creationTimestamp`, comma-separated, `-` for descending; default
    /// namespace then name.
    sort: Option<String>,
    /// `true`: instead of answering once, send every selected object as an ADDED event, a
    /// BOOKMARK, then each change (ADDED, MODIFIED, DELETED, as the apiserver's watch); as
    /// Server-Sent Events when `Accept` names `text/event-stream`, else as newline-delimited
    /// JSON. Not with `limit`, `continue` or `sort`.
    pub(super) watch: Option<String>,
    /// With `watch=true`: the last resourceVersion the client saw (a BOOKMARK's or an
    /// event's; Server-Sent Events carry it as their `id`, and EventSource sends it back as
    /// `Last-Event-ID` when it reconnects, which counts the same). Only the changes after it
    /// are sent; 410 when they are no longer all kept, as the apiserver answers. Absent or 0:
    /// from the current state.
    resource_version: Option<String>,
}

/// The list request, with what the access check decided the caller may see (none without
/// authentication: everything), and for a watch the version it resumes after.
pub(super) fn list_request(
    q: ListParams,
    visibility: Option<Extension<Visibility>>,
    headers: &HeaderMap,
) -> Result<ListRequest, ApiError> {
    let resource_version = watch::resume_after(q.resource_version, q.watch.as_deref(), headers)?;
    Ok(ListRequest {
        namespace: q.namespace,
        label_selector: q.label_selector,
        field_selector: q.field_selector,
        limit: q.limit,
        continue_token: q.continue_token,
        sort: q.sort,
        resource_version,
        read_at: ReadAt::Newest,
        visibility: visibility.map(|v| v.0).unwrap_or_default(),
    })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ObjectParams {
    /// The object's namespace; default `default`.
    pub(super) namespace: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct OutputParams {
    /// The object's namespace; default `default`.
    pub(super) namespace: Option<String>,
    /// `json` (default) or `yaml`.
    pub(super) output_format: Option<String>,
}

#[utoipa::path(get, path = "/ping", tag = "k8sailor",
    responses((status = 200, description = "Always `pong`", body = String, content_type = "text/plain")))]
async fn ping() -> &'static str {
    "pong"
}

#[utoipa::path(get, path = "/deployments", tag = "deployments", params(ListParams),
    responses(
        (status = 200, description = "Deployments, with list metadata; with `watch=true`, a stream of `{\"type\":\"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR\",\"object\":Deployment}` events",
            content((Envelope<Vec<DeploymentDoc>> = "application/json"), (String = "text/event-stream"), (String = "application/x-ndjson"))),
        (status = 400, description = "Invalid namespace, selector, sort or continue token", body = ErrorEnvelope),
        (status = 404, description = "Namespace not served by this k8sailor", body = ErrorEnvelope),
        (status = 410, description = "The continue token expired: restart the list", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet, or the apiserver unreachable (live source)", body = ErrorEnvelope),
    ))]
async fn list_deployments(
    State(s): State<AppState>,
    headers: HeaderMap,
    visibility: Option<Extension<Visibility>>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    kinds::list::<DeploymentRecord>(
        s,
        DeploymentRecord::resource().clone(),
        headers,
        visibility,
        q,
    )
    .await
}

/// Caches holding at most this many objects are listed on the runtime's worker: a list over
/// them all takes at most about 2 ms, less than handing it to the blocking pool costs in
/// throughput (a 50-pod list: 49k/s inline, 25k/s on the pool, measured side by side).
const INLINE_LIST_OBJECTS: usize = 2_000;

/// Lists over a large cache run on the blocking pool: they are tens of milliseconds of CPU
/// in one poll (measured over 50,000 pods: 20-60 ms for all of them, 100 ms sorted by
/// creationTimestamp, 11 ms for a first page of 500, which sorts and keeps them all), which
/// would hold a runtime worker and every request queued on it. The live source's lists wait
/// on the apiserver instead, and stay on the worker.
pub(super) async fn off_the_workers<F, Fut>(s: AppState, work: F) -> Result<Response, ApiError>
where
    F: FnOnce(AppState) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    if s.workloads.source().cached_objects() <= INLINE_LIST_OBJECTS {
        return work(s).await;
    }
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work(s)))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: the list failed: {e}"),
            )
        })?
}

#[utoipa::path(get, path = "/deployments/{name}", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ObjectParams),
    responses(
        (status = 200, description = "The Deployment", body = Envelope<DeploymentDoc>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn get_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    kinds::get_one::<DeploymentRecord>(s, DeploymentRecord::resource(), name, q).await
}

/// The raw Deployment, not enveloped, as `kubectl get deployment -o json|yaml` prints it:
/// without this route `/deployments/{name}/output` would reach the generic one, which serves
/// only kinds without routes of their own.
#[utoipa::path(get, path = "/deployments/{name}/output", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), OutputParams),
    responses(
        (status = 200, description = "The Deployment object as kubectl prints it (keys sorted, no managedFields)",
            content((Object = "application/json"), (String = "application/yaml"))),
        (status = 400, description = "Invalid namespace, name or outputFormat", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
    ))]
async fn deployment_output(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<OutputParams>,
) -> Result<Response, ApiError> {
    let output = s
        .workloads
        .object_output::<DeploymentRecord>(
            q.namespace.as_deref(),
            &name,
            q.output_format.as_deref(),
        )
        .await?;
    Ok(printed(output))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ScaleParams {
    /// The Deployment's namespace; default `default`.
    namespace: Option<String>,
    /// The new number of replicas, 0 or more.
    replicas: Option<String>,
}

/// Writes go to the apiserver; the answer comes once the cache shows the change, so the next
/// read sees it.
#[utoipa::path(put, path = "/deployments/{name}/replicas", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ScaleParams),
    responses(
        (status = 200, description = "Scaled: `data` is true", body = Envelope<bool>),
        (status = 400, description = "Invalid namespace, name or replicas", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account may not scale Deployments (RBAC)", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
    ))]
async fn scale_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ScaleParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .scale_deployment(q.namespace.as_deref(), &name, q.replicas.as_deref())
        .await?))
}

/// Labels, selector and Pod labels are `app: <name>`, as `kubectl create deployment` makes them.
#[utoipa::path(post, path = "/deployments/{name}", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ObjectParams),
    request_body = CreateDeployment,
    responses(
        (status = 200, description = "The Deployment as created", body = Envelope<DeploymentDoc>),
        (status = 400, description = "Invalid namespace, name or body", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account may not create Deployments (RBAC)", body = ErrorEnvelope),
        (status = 409, description = "A Deployment of that name exists", body = ErrorEnvelope),
        (status = 415, description = "The body is not application/json", body = ErrorEnvelope),
    ))]
async fn create_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
    ApiJson(body): ApiJson<CreateDeployment>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .create_deployment(q.namespace.as_deref(), &name, &body)
            .await?,
    ))
}

/// In the background: the garbage collector then removes its ReplicaSets and Pods.
#[utoipa::path(delete, path = "/deployments/{name}", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ObjectParams),
    responses(
        (status = 200, description = "Deleted: `data` is true", body = Envelope<bool>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account may not delete Deployments (RBAC)", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
    ))]
async fn delete_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .delete_deployment(q.namespace.as_deref(), &name)
        .await?))
}

#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct RelationParams {
    /// The Deployment's namespace; default `default`.
    namespace: Option<String>,
    /// `true`: the Pods as ADDED events, a BOOKMARK, then each change to the set (a Pod
    /// joining or leaving it, as a rollout's new ReplicaSet brings and the old one takes
    /// away), as `watch=true` on `/pods`.
    watch: Option<String>,
    /// Refused with 410 (as is `Last-Event-ID`): membership is read through the ReplicaSets
    /// as they are now, so this watch always starts from the current state.
    resource_version: Option<String>,
}

#[utoipa::path(get, path = "/deployments/{name}/pods", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), RelationParams),
    responses(
        (status = 200, description = "Pods the Deployment controls through its ReplicaSets (ownerReferences); with `watch=true`, a stream of events",
            content((Envelope<Vec<PodDoc>> = "application/json"), (String = "text/event-stream"), (String = "application/x-ndjson"))),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn pods_of_deployment(
    State(s): State<AppState>,
    headers: HeaderMap,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<RelationParams>,
) -> Result<Response, ApiError> {
    if watch::is_watch(q.watch.as_deref())? {
        let resume = watch::resume_after(q.resource_version, q.watch.as_deref(), &headers)?;
        let frames = s
            .workloads
            .watch_pods_of_deployment(q.namespace.as_deref(), &name, resume.as_deref())
            .await?;
        let guard = s.metrics.watch_opened(Kind::Pod.name().into());
        return Ok(watch::respond(frames, &headers, &s, guard));
    }
    off_the_workers(s, move |s| async move {
        Ok(ok_json(
            &s.workloads
                .pods_of_deployment(q.namespace.as_deref(), &name)
                .await?,
        ))
    })
    .await
}

#[utoipa::path(get, path = "/deployments/{name}/services", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ObjectParams),
    responses(
        (status = 200, description = "Services in the Deployment's namespace whose selector picks its pods (by its pod template's labels)", body = Envelope<Vec<ServiceDto>>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn services_of_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .services_of_deployment(q.namespace.as_deref(), &name)
            .await?,
    ))
}

#[utoipa::path(get, path = "/deployments/{name}/ingresses", tag = "deployments",
    params(("name" = String, Path, description = "Deployment name"), ObjectParams),
    responses(
        (status = 200, description = "Ingresses in the Deployment's namespace with a path (or default backend) to one of its Services", body = Envelope<Vec<IngressDto>>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Deployment", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn ingresses_of_deployment(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .ingresses_of_deployment(q.namespace.as_deref(), &name)
            .await?,
    ))
}

#[utoipa::path(get, path = "/services/{name}/pods", tag = "services",
    params(("name" = String, Path, description = "Service name"), ObjectParams),
    responses(
        (status = 200, description = "Pods the Service's selector picks (none without a selector)", body = Envelope<Vec<PodDoc>>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Service", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn pods_of_service(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    off_the_workers(s, move |s| async move {
        Ok(ok_json(
            &s.workloads
                .pods_of_service(q.namespace.as_deref(), &name)
                .await?,
        ))
    })
    .await
}

#[utoipa::path(get, path = "/pods", tag = "pods", params(ListParams),
    responses(
        (status = 200, description = "Pods, with list metadata; with `watch=true`, a stream of `{\"type\":\"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR\",\"object\":Pod}` events",
            content((Envelope<Vec<PodDoc>> = "application/json"), (String = "text/event-stream"), (String = "application/x-ndjson"))),
        (status = 400, description = "Invalid namespace, selector, sort or continue token", body = ErrorEnvelope),
        (status = 404, description = "Namespace not served by this k8sailor", body = ErrorEnvelope),
        (status = 410, description = "The continue token expired: restart the list", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn list_pods(
    State(s): State<AppState>,
    headers: HeaderMap,
    visibility: Option<Extension<Visibility>>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let is_watch = watch::is_watch(q.watch.as_deref())?;
    let req = list_request(q, visibility, &headers)?;
    if is_watch {
        let frames = s.workloads.watch_pods(&req).await?;
        let guard = s.metrics.watch_opened(Kind::Pod.name().into());
        return Ok(watch::respond(frames, &headers, &s, guard));
    }
    off_the_workers(s, move |s| async move {
        Ok(ok_page_json(s.workloads.list_pods(&req).await?))
    })
    .await
}

#[utoipa::path(get, path = "/pods/{name}", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), ObjectParams),
    responses(
        (status = 200, description = "The Pod", body = Envelope<PodDoc>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Pod", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn get_pod(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads.get_pod(q.namespace.as_deref(), &name).await?,
    ))
}

/// A Pod on a node is Terminating until its kubelet confirms; an unscheduled one goes at once.
#[utoipa::path(delete, path = "/pods/{name}", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), ObjectParams),
    responses(
        (status = 200, description = "Deleted: `data` is true", body = Envelope<bool>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account may not delete Pods (RBAC)", body = ErrorEnvelope),
        (status = 404, description = "No such Pod", body = ErrorEnvelope),
    ))]
async fn delete_pod(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
) -> Result<Response, ApiError> {
    Ok(ok(s
        .workloads
        .delete_pod(q.namespace.as_deref(), &name)
        .await?))
}

#[utoipa::path(get, path = "/pods/{name}/event", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), ObjectParams),
    responses(
        (status = 200, description = "The Pod's newest event; for a Pod without events, its namespace and name with empty message and reason (never null)", body = Envelope<EventDto>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Pod", body = ErrorEnvelope),
    ))]
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

#[utoipa::path(get, path = "/pods/{name}/events", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), ObjectParams),
    responses(
        (status = 200, description = "The Pod's events, newest first, read from the apiserver", body = Envelope<Vec<EventDto>>),
        (status = 400, description = "Invalid namespace or name", body = ErrorEnvelope),
        (status = 404, description = "No such Pod", body = ErrorEnvelope),
    ))]
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
#[utoipa::path(get, path = "/pods/{name}/output", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), OutputParams),
    responses(
        (status = 200, description = "The Pod object as kubectl prints it (keys sorted, no managedFields)",
            content((Object = "application/json"), (String = "application/yaml"))),
        (status = 400, description = "Invalid namespace, name or outputFormat", body = ErrorEnvelope),
        (status = 404, description = "No such Pod", body = ErrorEnvelope),
    ))]
async fn pod_output(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<OutputParams>,
) -> Result<Response, ApiError> {
    let output = s
        .workloads
        .pod_output(q.namespace.as_deref(), &name, q.output_format.as_deref())
        .await?;
    Ok(printed(output))
}

/// An object as kubectl prints it, not enveloped.
pub(super) fn printed((format, body): (OutputFormat, String)) -> Response {
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// The Service's selector is `app: <name>`, the label of a Deployment's Pods created here.
#[utoipa::path(post, path = "/services/{name}", tag = "services",
    params(("name" = String, Path, description = "Service name (a DNS-1035 label)"), ObjectParams),
    request_body(content = CreateService, description = "Either the original's DSL, `{\"services\": [\"80:8080\", \"!30080:80:8080\", \"#80:8080\", \"@db.example.com\"]}`: `port[:target]` ClusterIP; `!port:target` NodePort, `!node:port:target` with that node port; `#port:target` headless; `@host` ExternalName (the first drops every other entry); one `!` or `#` entry sets the type of the whole Service; ports named `<port>-<target>`. Or the structured form: `{\"type\": \"NodePort\", \"ports\": [{\"port\": 80, \"targetPort\": 8080, \"nodePort\": 30080}]}`, `{\"type\": \"ExternalName\", \"externalName\": \"db.example.com\"}`. At most 100 ports (entries) of 256 bytes."),
    responses(
        (status = 200, description = "The Service as the apiserver stored it (as `kubectl get -o json` prints it)", body = Envelope<KubernetesObjectDoc>),
        (status = 400, description = "Invalid namespace, name or body; `error` names the bad entry and why", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account (or, with --auth delegated, the caller) may not create Services", body = ErrorEnvelope),
        (status = 404, description = "No such namespace", body = ErrorEnvelope),
        (status = 409, description = "A Service of that name exists", body = ErrorEnvelope),
        (status = 415, description = "The body is not application/json", body = ErrorEnvelope),
        (status = 422, description = "The body is JSON of another shape (an unknown field or type)", body = ErrorEnvelope),
    ))]
async fn create_service(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
    ApiJson(body): ApiJson<CreateService>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .create_service(q.namespace.as_deref(), &name, &body)
            .await?,
    ))
}

/// One rule per entry, without an ingress class (the cluster's default class takes it).
#[utoipa::path(post, path = "/ingresses/{name}", tag = "ingresses",
    params(("name" = String, Path, description = "Ingress name"), ObjectParams),
    request_body(content = CreateIngress, description = "Either the original's DSL, `{\"endpoints\": [\"http://host[:port]/path[*]?backend=service[:port|portName]&tls=secretName\"]}`: the host is kept (the URL's port is not an Ingress's), a trailing `*` makes a Prefix path (else Exact, `/` when empty), the backend defaults to `<name>:80` and an empty port to 80, `tls` adds the host with that Secret. Or the structured form: `{\"rules\": [{\"host\": \"a.example.com\", \"path\": \"/api\", \"pathType\": \"Prefix\", \"backend\": {\"service\": \"api\", \"port\": 8080}}], \"tls\": [{\"hosts\": [\"a.example.com\"], \"secretName\": \"a-cert\"}]}` (host absent: every host; path `/` and pathType Exact by default; port 80 by default). At most 100 rules (entries) of 2,048 bytes."),
    responses(
        (status = 200, description = "The Ingress as the apiserver stored it (as `kubectl get -o json` prints it)", body = Envelope<KubernetesObjectDoc>),
        (status = 400, description = "Invalid namespace, name or body; `error` names the bad entry and why", body = ErrorEnvelope),
        (status = 403, description = "k8sailor's account (or, with --auth delegated, the caller) may not create Ingresses", body = ErrorEnvelope),
        (status = 404, description = "No such namespace", body = ErrorEnvelope),
        (status = 409, description = "An Ingress of that name exists", body = ErrorEnvelope),
        (status = 415, description = "The body is not application/json", body = ErrorEnvelope),
        (status = 422, description = "The body is JSON of another shape (an unknown field or pathType)", body = ErrorEnvelope),
    ))]
async fn create_ingress(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectParams>,
    ApiJson(body): ApiJson<CreateIngress>,
) -> Result<Response, ApiError> {
    Ok(ok_json(
        &s.workloads
            .create_ingress(q.namespace.as_deref(), &name, &body)
            .await?,
    ))
}

/// The path templates served (`/k8sailor/v0/pods/{name}`), to tell a path that names a route
/// but for a trailing slash from one that names nothing.
#[derive(Clone, Debug)]
pub struct RouteTemplates(Arc<[Vec<String>]>);

impl RouteTemplates {
    pub fn new<'a>(templates: impl IntoIterator<Item = &'a str>) -> Self {
        RouteTemplates(
            templates
                .into_iter()
                .map(|t| t.split('/').map(str::to_string).collect())
                .collect(),
        )
    }

    fn serves(&self, path: &str) -> bool {
        let segments: Vec<&str> = path.split('/').collect();
        self.0.iter().any(|template| {
            template.len() == segments.len()
                && template.iter().zip(&segments).all(|(t, s)| {
                    t == s || (t.starts_with('{') && t.ends_with('}') && !s.is_empty())
                })
        })
    }
}

/// What no route answers. A route's path with a trailing slash is redirected to the route, as
/// the original (gin) did and its client relies on: 301 for GET and HEAD, 307 for the others
/// so that the method and body are kept. The redirect passes through the CORS layer, so a
/// browser on another origin may follow it.
pub async fn no_route(
    State(templates): State<RouteTemplates>,
    method: Method,
    uri: Uri,
) -> Response {
    let path = uri.path();
    if let Some(route) = path.strip_suffix('/')
        && !route.is_empty()
        && templates.serves(route)
    {
        let location = match uri.query() {
            Some(query) => format!("{route}?{query}"),
            None => route.to_string(),
        };
        let status = if method == Method::GET || method == Method::HEAD {
            StatusCode::MOVED_PERMANENTLY
        } else {
            StatusCode::TEMPORARY_REDIRECT
        };
        let mut response = ApiError::new(
            status,
            format!("{path} is served at {route}, without the trailing slash"),
        )
        .into_response();
        if let Ok(location) = header::HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return response;
    }
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {method} {path}"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::RouteTemplates;

    #[test]
    fn templates_serve_their_paths_and_nothing_else() {
        let templates = RouteTemplates::new(["/k8sailor/v0/pods", "/k8sailor/v0/pods/{name}"]);
        assert!(templates.serves("/k8sailor/v0/pods"));
        assert!(templates.serves("/k8sailor/v0/pods/web-1"));
        for other in [
            "/k8sailor/v0",
            "/k8sailor/v0/pods/",
            "/k8sailor/v0/pods/web/output",
            "/k8sailor/v0/services",
            "",
        ] {
            assert!(!templates.serves(other), "{other}");
        }
    }
}
