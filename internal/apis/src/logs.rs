//! Logs: a pod's container log, and the merged log of a workload's or a selector's pods,
//! relayed from the apiserver line by line. As plain text (a merged line prefixed
//! `[pod/NAME/CONTAINER] `, as `kubectl logs --prefix` writes it), or with `follow=true` and an
//! `Accept` preferring `text/event-stream`, as Server-Sent Events: a pod's lines one `data:`
//! each, then an `ended` event if the container's log itself ended; a merged log's as `line`
//! events of `{"pod","container","line"}`, and what happens to the set of pods as `joined`,
//! `left`, `cut`, `refused` and `ended` events. A stream ends when its log does, when the
//! client goes (the upstream requests are closed with it), and at shutdown or after its
//! randomised lifetime (`--min-request-timeout` times [1, 2)), as watches do: cleanly and
//! without `ended`, so the client opens it again (from its last line's time, `sinceTime`).

use k8sdao::catalog::PODS;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use confk8s::Access;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use axum::routing::get;
use utoipa::PartialSchema;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, Paths,
};
use utoipa::openapi::{Content, Required, ResponseBuilder, ResponsesBuilder};
use utoipa_axum::router::UtoipaMethodRouter;

use super::auth::access;
use super::dispatch::Declared;
use super::envelope::{ApiError, ApiPath, ApiQuery, ErrorEnvelope};
use super::routes::mounted;
use super::{AppState, watch};
use biz::{LogRequest, MergedEvent, MergedLog, PodAllowed, PodGate};
use k8sdao::catalog::{BuiltIn, PodOwnership, built_in_rows};

/// The content type of a log as text; never compressed (see [`super::router`]): a compressor
/// holds lines back until it has enough of them.
pub const LOG_TEXT: &str = "text/plain; charset=utf-8";

/// How many pods one merged log follows at once (`--max-log-streams`).
#[derive(Clone, Copy, Debug)]
pub struct LogLimits {
    pub max_streams: usize,
}

/// The log routes: a pod's, a label selector's, and one per kind whose objects run pods
/// (its catalog row's `pods`); `limits` bound what each merged log may follow.
pub(super) fn routes(limits: LogLimits, mount: &str) -> Declared<AppState> {
    let declared = Declared::new()
        .routes(mounted(mount, routes!(pod_log)))
        .routes(mounted(mount, routes!(selected_pods_log)));
    workloads()
        .fold(declared, |declared, (row, ownership)| {
            declared.routes(mounted(mount, workload_route(row, ownership)))
        })
        .with_extension(limits)
}

/// The kinds whose objects run pods, and how they own them: each has a merged log at
/// `/{plural}/{name}/logs`.
fn workloads() -> impl Iterator<Item = (&'static BuiltIn, PodOwnership)> {
    built_in_rows()
        .iter()
        .filter_map(|row| Some((*row, row.pods?)))
}

/// Whether `route` (a template) is a log's: its answer is a stream, held in the fairness
/// share of open streams, and ended once its caller may no longer read it.
pub(super) fn is_log_route(route: &str) -> bool {
    route.ends_with("/logs")
}

/// What a request to the log route `route` (a template under the prefix) needs in RBAC
/// terms; None for a route that is not a log's. A merged log's pods are checked as they
/// join ([`pod_log_access`]).
pub(super) fn access_of(
    route: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Option<Vec<Access>> {
    let list_pods = || access("list", &PODS, namespace, None);
    Some(match route {
        "/pods/{name}/logs" => vec![
            access("get", &PODS, namespace, name),
            pod_log_access(namespace, name),
        ],
        "/pods/logs" => vec![list_pods()],
        _ => {
            let plural = route.strip_prefix('/')?.strip_suffix("/{name}/logs")?;
            let (row, _) = workloads().find(|(row, _)| row.plural == plural)?;
            vec![access("get", row, namespace, name), list_pods()]
        }
    })
}

/// The caller a delegated access check reviewed, for the checks a merged log makes as pods
/// join (set by auth; absent without authentication).
#[derive(Clone)]
pub(super) struct Reviewed {
    pub token: Arc<str>,
    pub from: IpAddr,
}

#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct LogParams {
    /// The namespace; default `default`.
    namespace: Option<String>,
    /// A pod's log: the container (default: the pod's
    /// `kubectl.kubernetes.io/default-container`, else its only one). A merged log: only
    /// this container of each pod (default: all of `spec.containers`).
    container: Option<String>,
    /// `true`: the log of the container's previous run (it restarted).
    previous: Option<String>,
    /// Only the last lines, 0 to 100000 (per container).
    tail_lines: Option<String>,
    /// Only lines newer than this many seconds, 1 to 316224000.
    since_seconds: Option<String>,
    /// Only lines from this RFC 3339 time on (from the start of its second, as the apiserver
    /// reads it); not with `sinceSeconds`. What a client following a log that ended sends
    /// to read on from its last line (with `timestamps=true`).
    since_time: Option<String>,
    /// `true`: each line begins with its RFC 3339 timestamp.
    timestamps: Option<String>,
    /// `true`: the stream stays open and sends lines as they are written (a merged log:
    /// pods join as their containers start and leave when they go).
    follow: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct SelectedParams {
    /// The pods whose logs are merged, kubectl syntax; required.
    label_selector: Option<String>,
}

impl LogParams {
    fn request(self) -> LogRequest {
        LogRequest {
            namespace: self.namespace,
            container: self.container,
            previous: self.previous,
            tail_lines: self.tail_lines,
            since_seconds: self.since_seconds,
            since_time: self.since_time,
            timestamps: self.timestamps,
            follow: self.follow,
        }
    }
}

/// A line as SSE data carries it: text, without the carriage return a CRLF line leaves.
fn text_of(line: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line))
}

/// What a pod's log stream sends: its lines, then whether the log itself ended.
#[derive(Debug, PartialEq)]
enum PodLogItem {
    Line(Bytes),
    /// The container's log ended (the container stopped, or the previous run's log was
    /// read whole): a client following it has nothing to open again.
    Over,
}

/// The lines of a pod's log, then `Over` if it ended by itself. A failure after the first
/// line can only end the stream (the status is sent), without `Over`: the log may go on.
fn pod_log_items<E: std::fmt::Display + Send + 'static>(
    lines: impl Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
) -> impl Stream<Item = PodLogItem> + Send + 'static {
    futures::stream::unfold(Some(lines), |lines| async move {
        let mut lines = lines?;
        match lines.next().await {
            Some(Ok(line)) => Some((PodLogItem::Line(line), Some(lines))),
            Some(Err(e)) => {
                tracing::debug!(error = %e, "a log stream ends early");
                None
            }
            None => Some((PodLogItem::Over, None)),
        }
    })
}

/// Ends with the server's shutdown or after a watch's randomised lifetime
/// ([`AppState::watch_end`]): a followed log holds its place as a watch does, so it must not
/// pin its client to one replica for ever. Counts itself as an open stream while it lasts.
fn until_end<S: Stream + Send + 'static>(
    s: &AppState,
    stream: S,
) -> impl Stream<Item = S::Item> + Send + 'static {
    let guard = s.metrics.watch_opened("pods/log".into());
    stream
        .take_until(s.watch_end())
        .inspect(move |_| guard.sent())
}

fn text_response<S>(chunks: S) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(LOG_TEXT)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(chunks.map(Ok::<_, Infallible>)),
    )
        .into_response()
}

fn sse_response<S>(s: &AppState, events: S) -> Response
where
    S: Stream<Item = Event> + Send + 'static,
{
    Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::new().interval(s.keep_alive))
        .into_response()
}

#[utoipa::path(get, path = "/pods/{name}/logs", tag = "pods",
    params(("name" = String, Path, description = "Pod name"), LogParams),
    responses(
        (status = 200, description = "The container's log as text; with `follow=true`, its lines as they come, as text or (Accept: text/event-stream) one `data:` event a line, then an `ended` event if the container's log ended (a stream that ends without it is to be opened again, with `sinceTime`)",
            content((String = "text/plain"), (String = "text/event-stream"))),
        (status = 400, description = "Invalid option; the pod has no such container (the answer lists its containers) or several (choose one); the container has not started, or has no previous run", body = ErrorEnvelope),
        (status = 404, description = "No such pod", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet, or the apiserver unreachable", body = ErrorEnvelope),
    ))]
async fn pod_log(
    State(s): State<AppState>,
    headers: HeaderMap,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<LogParams>,
) -> Result<Response, ApiError> {
    let log = s.workloads.pod_log(&name, &q.request()).await?;
    let items = until_end(&s, pod_log_items(log.lines));
    if log.follow && watch::accepts_event_stream(&headers) {
        return Ok(sse_response(
            &s,
            items.map(|item| match item {
                PodLogItem::Line(line) => Event::default().data(text_of(&line)),
                PodLogItem::Over => Event::default()
                    .event("ended")
                    .data(serde_json::json!({"reason": "the container's log ended"}).to_string()),
            }),
        ));
    }
    Ok(text_response(items.filter_map(|item| {
        std::future::ready(match item {
            PodLogItem::Line(line) => {
                let mut chunk = Vec::with_capacity(line.len() + 1);
                chunk.extend_from_slice(&line);
                chunk.push(b'\n');
                Some(Bytes::from(chunk))
            }
            PodLogItem::Over => None,
        })
    })))
}

/// The per-pod check of a merged log with `--auth delegated`: the caller's own
/// `get pods/log` on each pod as it joins, and again on those followed whenever the
/// caller's rights may have changed.
fn gate(s: &AppState, namespace: Option<&str>, reviewed: Option<Reviewed>) -> Option<PodGate> {
    let (reviewer, caller) = (s.reviewer.clone()?, reviewed?);
    let namespace = biz::namespace_of_object(namespace).to_string();
    let rechecks = reviewer.rights_may_change();
    let allows: PodAllowed = Arc::new(move |pod: String| {
        let (reviewer, caller, namespace) = (reviewer.clone(), caller.clone(), namespace.clone());
        Box::pin(async move {
            let access = pod_log_access(Some(&namespace), Some(&pod));
            reviewer
                .review(&caller.token, caller.from, &access)
                .await
                .is_ok()
        })
    });
    Some(PodGate { allows, rechecks })
}

/// `get pods/log`, the right to read a pod's log: the one rule for the routes' checks
/// ([`access_of`]) and the per-pod ones.
fn pod_log_access(namespace: Option<&str>, pod: Option<&str>) -> Access {
    Access {
        subresource: "log",
        ..access("get", &PODS, namespace, pod)
    }
}

fn merged_response(
    s: &AppState,
    headers: &HeaderMap,
    log: MergedLog,
    limits: LogLimits,
) -> Response {
    let events = until_end(s, log.events);
    let mut response = if log.follow && watch::accepts_event_stream(headers) {
        sse_response(s, events.map(|event| sse_event(&event)))
    } else {
        text_response(events.filter_map(|event| std::future::ready(text_line(&event))))
    };
    let h = response.headers_mut();
    if let Ok(selector) = HeaderValue::from_str(&log.selector) {
        h.insert("k8sailor-log-selector", selector);
    }
    h.insert(
        "k8sailor-max-log-streams",
        HeaderValue::from(limits.max_streams),
    );
    response
}

/// A merged event as a line of text: lines prefixed as `kubectl logs --prefix` does, the
/// set's changes that lose lines (a pod cut, refused, the end) as `[k8sailor] ` notices.
fn text_line(event: &MergedEvent) -> Option<Bytes> {
    let text = match event {
        MergedEvent::Line {
            pod,
            container,
            line,
        } => {
            let mut out = Vec::with_capacity(line.len() + pod.len() + container.len() + 10);
            out.extend_from_slice(format!("[pod/{pod}/{container}] ").as_bytes());
            out.extend_from_slice(line);
            out.push(b'\n');
            return Some(Bytes::from(out));
        }
        MergedEvent::Joined { .. } | MergedEvent::Left { .. } => return None,
        MergedEvent::Cut { pod, limit } => format!(
            "[k8sailor] pod/{pod} is not followed: {limit} pods are (--max-log-streams); it joins when one leaves\n"
        ),
        MergedEvent::Refused { pod, reason } => {
            format!("[k8sailor] pod/{pod} is not followed: {reason}\n")
        }
        MergedEvent::Ended { reason } => format!("[k8sailor] the log ends: {reason}\n"),
    };
    Some(Bytes::from(text))
}

fn sse_event(event: &MergedEvent) -> Event {
    let (name, data) = match event {
        MergedEvent::Line {
            pod,
            container,
            line,
        } => (
            "line",
            serde_json::json!({"pod": &**pod, "container": &**container, "line": text_of(line)}),
        ),
        MergedEvent::Joined { pod, container } => (
            "joined",
            serde_json::json!({"pod": &**pod, "container": &**container}),
        ),
        MergedEvent::Left {
            pod,
            container,
            reason,
        } => (
            "left",
            serde_json::json!({"pod": &**pod, "container": &**container, "reason": reason}),
        ),
        MergedEvent::Cut { pod, limit } => (
            "cut",
            serde_json::json!({"pod": &**pod, "maxLogStreams": limit}),
        ),
        MergedEvent::Refused { pod, reason } => (
            "refused",
            serde_json::json!({"pod": &**pod, "reason": reason}),
        ),
        MergedEvent::Ended { reason } => ("ended", serde_json::json!({"reason": reason})),
    };
    Event::default().event(name).data(data.to_string())
}

#[utoipa::path(get, path = "/pods/logs", tag = "pods",
    params(SelectedParams, LogParams),
    responses(
        (status = 200, description = "The logs of the pods the selector picks, merged: text lines prefixed `[pod/NAME/CONTAINER] `, or (follow=true, Accept: text/event-stream) `line`, `joined`, `left`, `cut`, `refused` and `ended` events. At most --max-log-streams pods at once (header `k8sailor-max-log-streams`); a pod cut is said in the stream",
            content((String = "text/plain"), (String = "text/event-stream"))),
        (status = 400, description = "Invalid option or selector, or none", body = ErrorEnvelope),
        (status = 503, description = "Caches not synced yet", body = ErrorEnvelope),
    ))]
async fn selected_pods_log(
    State(s): State<AppState>,
    headers: HeaderMap,
    Extension(limits): Extension<LogLimits>,
    reviewed: Option<Extension<Reviewed>>,
    ApiQuery(selected): ApiQuery<SelectedParams>,
    ApiQuery(q): ApiQuery<LogParams>,
) -> Result<Response, ApiError> {
    let req = q.request();
    let gate = gate(&s, req.namespace.as_deref(), reviewed.map(|r| r.0));
    let log = s
        .workloads
        .selected_pods_log(
            selected.label_selector.as_deref(),
            &req,
            limits.max_streams,
            gate,
        )
        .await?;
    Ok(merged_response(&s, &headers, log, limits))
}

/// The route of the merged log of a `row` object's pods, with its OpenAPI description.
fn workload_route(row: &'static BuiltIn, ownership: PodOwnership) -> UtoipaMethodRouter<AppState> {
    let path = format!("/{}/{{name}}/logs", row.plural);
    let handler = get(
        move |State(s): State<AppState>,
              headers: HeaderMap,
              Extension(limits): Extension<LogLimits>,
              reviewed: Option<Extension<Reviewed>>,
              ApiPath(name): ApiPath<String>,
              ApiQuery(q): ApiQuery<LogParams>| async move {
            let registry = s.workloads.source().registry();
            let resource = registry
                .resource(row.plural)
                .ok_or_else(|| super::kinds::not_served(registry, row.plural))?;
            let req = q.request();
            let gate = gate(&s, req.namespace.as_deref(), reviewed.map(|r| r.0));
            let log = s
                .workloads
                .workload_log(&resource, ownership, &name, &req, limits.max_streams, gate)
                .await?;
            Ok::<_, ApiError>(merged_response(&s, &headers, log, limits))
        },
    );
    let whose = match ownership {
        PodOwnership::Controller => "the pods it controls among those its selector picks",
        PodOwnership::ThroughReplicaSets => "the pods of the ReplicaSets it controls",
    };
    let ok = ResponseBuilder::new()
        .description(format!(
            "The logs of {whose}, merged, as on /pods/logs; pods join and leave as it runs them"
        ))
        .content("text/plain", Content::new(Some(String::schema())))
        .content("text/event-stream", Content::new(Some(String::schema())));
    let mut parameters = vec![
        ParameterBuilder::new()
            .name("name")
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some(format!("{} name", row.kind)))
            .schema(Some(String::schema()))
            .build(),
    ];
    parameters.extend(LogParams::into_params(|| Some(ParameterIn::Query)));
    let operation = OperationBuilder::new()
        .tag(row.plural)
        .operation_id(Some(format!("{}_logs", row.plural)))
        .parameters(Some(parameters))
        .responses(
            [
                ("400", "Invalid option, or it has no pod selector"),
                ("404", "Not found, or the kind is not served"),
                ("503", "Caches not synced yet, or the apiserver unreachable"),
            ]
            .into_iter()
            .fold(
                ResponsesBuilder::new().response("200", ok),
                |r, (status, text)| r.response(status, super::kinds::error(text)),
            )
            .build(),
        );
    let mut paths = Paths::new();
    paths
        .paths
        .insert(path, PathItem::new(HttpMethod::Get, operation));
    (Vec::new(), paths, handler)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use futures::StreamExt;

    use super::{PodLogItem, pod_log_items, until_end};
    use crate::{AppState, FairShares};

    fn state(min_request_timeout: Duration) -> AppState {
        let shares = FairShares {
            min_request_timeout,
            ..FairShares::default()
        };
        AppState::new(
            Arc::new(biz::Workloads::new(k8sdao::Source::fake(
                k8sdao::fake::small_cluster(),
                None,
            ))),
            None,
            shares,
            Duration::from_secs(15),
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        )
    }

    #[tokio::test]
    async fn a_followed_log_ends_cleanly_after_a_watchs_lifetime() {
        let lifetime = Duration::from_millis(50);
        let s = state(lifetime);
        let opened = Instant::now();
        // A log that never ends by itself, as a followed one of a quiet container.
        let log = until_end(&s, futures::stream::pending::<()>()).collect::<Vec<()>>();
        // A bound for a stream that would never end, far above the lifetime: not a timing.
        let lines = tokio::time::timeout(Duration::from_secs(60), log)
            .await
            .expect("the log ends by itself once its lifetime is over");
        assert!(lines.is_empty());
        assert!(
            opened.elapsed() >= lifetime,
            "not before minRequestTimeout: {:?}",
            opened.elapsed()
        );
    }

    #[tokio::test]
    async fn a_pods_log_says_when_it_ended_but_not_when_it_broke() {
        let line = |text: &'static str| Ok::<_, String>(Bytes::from_static(text.as_bytes()));
        let over: Vec<PodLogItem> = pod_log_items(futures::stream::iter([line("a"), line("b")]))
            .collect()
            .await;
        assert_eq!(
            over,
            [
                PodLogItem::Line(Bytes::from_static(b"a")),
                PodLogItem::Line(Bytes::from_static(b"b")),
                PodLogItem::Over
            ]
        );
        let broke: Vec<PodLogItem> = pod_log_items(futures::stream::iter([
            line("a"),
            Err("the log stream broke".to_string()),
            line("never"),
        ]))
        .collect()
        .await;
        assert_eq!(broke, [PodLogItem::Line(Bytes::from_static(b"a"))]);
    }

    #[tokio::test]
    async fn a_followed_log_ends_at_shutdown_before_its_lifetime() {
        let s = state(Duration::from_secs(3600));
        let log = until_end(&s, futures::stream::pending::<()>());
        s.streams.cancel();
        assert_eq!(log.collect::<Vec<()>>().await, Vec::<()>::new());
    }
}
