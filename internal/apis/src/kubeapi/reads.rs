//! The reads of the Kubernetes API: a list (`{Kind}List`, or a `Table` for kubectl), one
//! object, and `watch=true`, each from the objects the records keep whole, through the same
//! biz list, get and watch as `/k8sailor/v0`.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};

use super::answers::{
    BodyWriter, CONTINUED_LIFETIME, Coding, Finished, Key, Lookup, Question, TABLE_LIFETIME,
    worth_keeping,
};
use super::discovery;
use super::media::{Encoding, Media, Shape, negotiate};
use super::query::{InitialEvents, KubeQuery, flag, number};
use super::status::Status;
use super::websocket::Transport;
use super::{Routed, Target};
use crate::AppState;
use crate::envelope::json_response;
use biz::{
    BizError, DeploymentRecord, GenericRecord, IngressRecord, Kind, ListRequest, NamespaceRecord,
    OutputFormat, PodRecord, ReadAt, ReplicaSetRecord, Resource, Served, ServedBy, ServiceRecord,
};
use k8sdao::{DaoError, HistoryError, WatchEvent, WorkloadSource};
use printers::Cell;

/// The longest watch a client may ask for; the apiserver's `--min-request-timeout` bounds
/// its own likewise.
const MAX_WATCH_SECONDS: u64 = 3600;

/// What of each object a Table row carries (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    fn parse(value: Option<&str>) -> Result<IncludeObject, Status> {
        match value {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(Status::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("invalid includeObject {other:?}: expected None, Metadata or Object"),
            )),
        }
    }
}

/// A record served by the Kubernetes API: every record keeps its whole object
/// ([`biz::Record::raw_json`]); what differs is where its kubectl cells come from.
pub(super) trait Kept: Served {
    /// kubectl's cells of it (`object` is its object).
    fn cells(&self, resource: &Resource, object: &Value) -> Vec<Cell>;
}

fn unreadable(e: impl std::fmt::Display) -> Status {
    Status::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("internal error: a kept object cannot be read: {e}"),
    )
}

/// The JSON a record keeps: the object as the apiserver sent it (managedFields stripped).
fn json_of(record: &impl Served) -> Result<Vec<u8>, Status> {
    record.raw_json().map_err(unreadable)
}

/// The object a record keeps, decoded: what Tables are printed from.
fn object_of(record: &impl Served) -> Result<Value, Status> {
    serde_json::from_slice(&json_of(record)?).map_err(unreadable)
}

/// What every kept object of `resource` begins with ([`biz::Record::raw_json`]): its
/// `apiVersion` and `kind`, which the apiserver's list items do not carry.
fn type_prefix(resource: &Resource) -> Vec<u8> {
    let member = |name: &str, value: &str| format!("{}:{},", json!(name), json!(value));
    format!(
        "{{{}{}",
        member("apiVersion", &resource.api_version()),
        member("kind", &resource.kind)
    )
    .into_bytes()
}

/// An answer that cannot be written (out of memory for its gzip, none other).
fn unwritable(e: impl std::fmt::Display) -> Status {
    Status::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("internal error: the answer cannot be written: {e}"),
    )
}

/// Writes a kept object's `json` to `out` as a list item: the same bytes with the type
/// `prefix` cut, so no object is decoded and encoded again; one that does not begin so (none
/// should) is decoded and written without its type.
fn push_item(out: &mut impl Write, json: &[u8], prefix: &[u8]) -> Result<(), Status> {
    match json.strip_prefix(prefix) {
        Some(rest) => {
            out.write_all(b"{").map_err(unwritable)?;
            out.write_all(rest).map_err(unwritable)
        }
        None => {
            let object: Value = serde_json::from_slice(json).map_err(unreadable)?;
            serde_json::to_writer(out, &without_type(object)).map_err(unwritable)
        }
    }
}

/// Writes a `{Kind}List` of `records` with list metadata `meta` to `out`, from the kept bytes.
fn list_body<'a, R: Served + 'a>(
    out: &mut impl Write,
    resource: &Resource,
    meta: &Value,
    records: impl IntoIterator<Item = &'a R>,
) -> Result<(), Status> {
    let mut head = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": meta,
    })
    .to_string()
    .into_bytes();
    // The head is a JSON object: its closing brace makes room for the items.
    head.pop();
    head.extend_from_slice(br#","items":["#);
    out.write_all(&head).map_err(unwritable)?;
    let prefix = type_prefix(resource);
    for (i, record) in records.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",").map_err(unwritable)?;
        }
        push_item(&mut *out, &json_of(record)?, &prefix)?;
    }
    out.write_all(b"]}").map_err(unwritable)
}

/// A generic record keeps its cells, printed once per change.
impl Kept for GenericRecord {
    fn cells(&self, _: &Resource, _: &Value) -> Vec<Cell> {
        self.cells.clone()
    }
}

/// A typed record keeps its DTO's columns, not kubectl's cells: printed from the object.
macro_rules! printed_on_read {
    ($($record:ty),*) => {$(
        impl Kept for $record {
            fn cells(&self, resource: &Resource, object: &Value) -> Vec<Cell> {
                resource.printer.cells(object)
            }
        }
    )*};
}

printed_on_read!(
    DeploymentRecord,
    PodRecord,
    ReplicaSetRecord,
    ServiceRecord,
    IngressRecord,
    NamespaceRecord
);

/// Whether the Kubernetes API serves `resource`: every resource but those kept as metadata
/// alone (Secrets), whose objects would not be the apiserver's.
fn is_served(resource: &Resource) -> bool {
    resource.served_by != ServedBy::MetadataOnly
}

/// The resources the Kubernetes API serves.
pub(super) fn served(s: &AppState) -> Vec<Resource> {
    s.workloads
        .source()
        .registry()
        .resources()
        .into_iter()
        .filter(is_served)
        .collect()
}

/// The served resource `group`/`version`/`plural`.
pub(super) fn served_resource(
    s: &AppState,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<Resource> {
    cached_resource(s, group, version, plural).filter(is_served)
}

/// The resource `group`/`version`/`plural` if the cache keeps it, whether or not this API
/// serves it from memory: what a relayed write waits for the cache to show.
pub(super) fn cached_resource(
    s: &AppState,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<Resource> {
    s.workloads
        .source()
        .registry()
        .find(|r| r.plural == plural && r.group == group && r.version == version)
}

/// Tells the compression layer a response is a watch stream, which it must not hold back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Streamed;

/// Whether a response may be compressed: not a watch stream.
pub(crate) fn is_streamed(extensions: &axum::http::Extensions) -> bool {
    extensions.get::<Streamed>().is_some()
}

/// A read memory answers: discovery, or a list, object or watch of a served resource.
pub(super) async fn read(s: AppState, routed: Routed<'_>, mut parts: Parts) -> Response {
    let (uri, headers) = (&parts.uri, &parts.headers);
    let query: KubeQuery = match crate::envelope::decode_query(uri) {
        Ok(q) => q,
        Err(e) => {
            return Status::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("invalid query: {}", e.body_text()),
            )
            .into_response();
        }
    };
    let (namespace, name) = match routed.target {
        None => return Status::no_such_path().into_response(),
        Some(Target::Group { group }) => return discovery::group(&s, group),
        Some(Target::GroupVersion { group, version }) => {
            return Box::pin(discovery::resources(&s, group, version)).await;
        }
        Some(Target::Collection { namespace, .. }) => (namespace, None),
        Some(Target::Object {
            namespace, name, ..
        }) => (namespace, Some(name)),
        Some(Target::Subresource { .. }) => return Status::no_such_path().into_response(),
    };
    let Some(resource) = routed.resource else {
        return Status::no_such_path().into_response();
    };
    // A namespaced object is named in its namespace; a cluster-scoped one never is.
    if namespace.is_some() != resource.namespaced && (name.is_some() || namespace.is_some()) {
        return Status::no_such_path().into_response();
    }
    let media = match flag(query.watch.as_deref(), "watch")
        .and_then(|watch| negotiate(headers, name.is_none(), watch))
    {
        Ok(media) => media,
        Err(status) => return status.into_response(),
    };
    let warning = resource.warning.clone();
    let coding = Coding::accepted(headers);
    let answer = Answer {
        resource,
        media,
        coding,
        query,
        transport: Transport::of(&mut parts).await,
    };
    let result = match answer.resource.served_by {
        ServedBy::Generic => answer.serve::<GenericRecord>(s, namespace, name).await,
        ServedBy::Typed(Kind::Deployment) => {
            answer.serve::<DeploymentRecord>(s, namespace, name).await
        }
        ServedBy::Typed(Kind::Pod) => answer.serve::<PodRecord>(s, namespace, name).await,
        ServedBy::Typed(Kind::ReplicaSet) => {
            answer.serve::<ReplicaSetRecord>(s, namespace, name).await
        }
        ServedBy::Typed(Kind::Service) => answer.serve::<ServiceRecord>(s, namespace, name).await,
        ServedBy::Typed(Kind::Ingress) => answer.serve::<IngressRecord>(s, namespace, name).await,
        ServedBy::Typed(Kind::Namespace) => {
            answer.serve::<NamespaceRecord>(s, namespace, name).await
        }
        ServedBy::MetadataOnly => Err(Status::no_such_path()),
    };
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    // Every answer about a deprecated resource carries its warning, errors too.
    if let Some(warning) = warning.as_deref().and_then(warning_header) {
        response.headers_mut().append(header::WARNING, warning);
    }
    response
}

/// A `Warning` header as the apiserver writes one (RFC 7234: code 299, no agent, the text
/// quoted as Go's `strconv.Quote` quotes printable ASCII); None for a text a header cannot
/// carry (every catalog warning can: a test checks it).
fn warning_header(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("299 - {}", json!(text))).ok()
}

/// One read of one resource, as asked.
struct Answer {
    resource: Resource,
    media: Media,
    /// How a list's body may be sent: gzip if the caller accepts it.
    coding: Coding,
    query: KubeQuery,
    /// How a watch's frames are sent: its body, or a WebSocket.
    transport: Transport,
}

/// `{"kind": ..., "apiVersion": ...}` removed: the apiserver's list items do not carry them.
fn without_type(mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut() {
        fields.remove("kind");
        fields.remove("apiVersion");
    }
    object
}

/// The list metadata the apiserver answers.
fn list_meta(
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<usize>,
) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(resource_version));
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        meta.insert("continue".into(), json!(token));
        if let Some(remaining) = remaining {
            meta.insert("remainingItemCount".into(), json!(remaining));
        }
    }
    Value::Object(meta)
}

/// An object's metadata alone, as `PartialObjectMetadata`.
fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// Writes `body` to `out` in the negotiated encoding.
fn write_encoded(out: &mut impl Write, encoding: Encoding, body: &Value) -> Result<(), Status> {
    match encoding {
        Encoding::Json => serde_json::to_writer(out, body).map_err(unwritable),
        Encoding::Yaml => {
            let yaml = OutputFormat::Yaml
                .render(body.to_string().as_bytes())
                .map_err(|e| Status::of(&e))?;
            out.write_all(yaml.as_bytes()).map_err(unwritable)
        }
    }
}

/// `body` in the negotiated encoding.
fn encoded(encoding: Encoding, body: &Value) -> Result<Response, Status> {
    let mut written = Vec::new();
    write_encoded(&mut written, encoding, body)?;
    Ok(([(header::CONTENT_TYPE, encoding.content_type())], written).into_response())
}

/// The apiserver's 406 for metadata of the wrong cardinality: an object's for a list, or a
/// list's for an object.
fn wrong_cardinality(resource: &Resource, list: bool) -> Status {
    // The apiserver names the Go type of what it read (its internal one for built-in kinds).
    let package = if resource.group.is_empty() {
        "core"
    } else {
        resource.group.split('.').next().unwrap_or_default()
    };
    let message = if list {
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*{package}.{}List)",
            resource.kind
        )
    } else {
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*{package}.{})",
            resource.kind
        )
    };
    Status::new(axum::http::StatusCode::NOT_ACCEPTABLE, message)
}

impl Answer {
    async fn serve<R: Kept>(
        self,
        s: AppState,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Response, Status> {
        let include = IncludeObject::parse(self.query.include_object.as_deref())?;
        if let Some(name) = name {
            let record = s
                .workloads
                .get::<R>(&self.resource, namespace, name)
                .await
                .map_err(|e| match e {
                    BizError::Source(DaoError::NotFound { .. }) => {
                        Status::not_found(&self.resource, name)
                    }
                    other => Status::of(&other),
                })?
                .0;
            // A plain JSON object is the kept bytes as they are: nothing decoded.
            if self.media.shape == Shape::Plain && self.media.encoding == Encoding::Json {
                return Ok(json_response(record.raw_json_alone().map_err(unreadable)?));
            }
            let object = object_of(record.as_ref())?;
            let body = match self.media.shape {
                Shape::Table => self.table_of(
                    [(record.as_ref(), object)],
                    &json!({"resourceVersion": record.resource_version()}),
                    include,
                    true,
                ),
                Shape::Metadata => partial_metadata(&object),
                Shape::MetadataList => return Err(wrong_cardinality(&self.resource, false)),
                Shape::Plain => object,
            };
            return encoded(self.media.encoding, &body);
        }
        // Boxed: a list's and a watch's state is kilobytes, and a GET's future, made and moved
        // on every request, would be as large.
        Box::pin(self.serve_collection::<R>(s, namespace, include)).await
    }

    /// A list or a watch of the collection in `namespace` (every namespace if None).
    async fn serve_collection<R: Kept>(
        self,
        s: AppState,
        namespace: Option<&str>,
        include: IncludeObject,
    ) -> Result<Response, Status> {
        let limit = number(self.query.limit.as_deref(), "limit")?;
        let req = ListRequest {
            namespace: namespace.map(str::to_string),
            label_selector: self.query.label_selector.clone(),
            field_selector: self.query.field_selector.clone(),
            limit: limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            continue_token: self.query.continue_token.clone(),
            sort: None,
            resource_version: None,
            read_at: ReadAt::Newest,
            visibility: Default::default(),
        };
        if flag(self.query.watch.as_deref(), "watch")? {
            return self.watch::<R>(s, req, include).await;
        }
        if self.media.shape == Shape::Metadata {
            return Err(wrong_cardinality(&self.resource, true));
        }
        let req = ListRequest {
            read_at: self.query.list_at()?,
            ..req
        };
        // The state is stamped before listing, so an answer kept under it is of that state
        // or newer; it is kept only if the state did not move while it was built.
        let ticket = match s.workloads.source().stamp(&self.resource) {
            None => None,
            Some(state) => {
                let key = Key {
                    question: self.question(req.namespace.clone()),
                    state,
                };
                match s.answers.lookup(key, Instant::now()) {
                    Lookup::Kept(answer) => return Ok(answer.response()),
                    Lookup::Awaited(waiting) => match waiting.answer().await {
                        Some(answer) => return Ok(answer.response()),
                        // That build failed, or its caller left: this caller builds its own.
                        None => None,
                    },
                    Lookup::Build(ticket) => Some((ticket, state)),
                    Lookup::Off => None,
                }
            }
        };
        let resource = self.resource.clone();
        let (answer, large) = self.list_answer::<R>(&s, &req, include).await?;
        if let Some((ticket, state)) = ticket {
            let unchanged = s.workloads.source().stamp(&resource) == Some(state);
            ticket.finish(&answer, large && unchanged, Instant::now());
        }
        Ok(answer.response())
    }

    /// What a list's answer is kept under, besides the state of the cache.
    fn question(&self, namespace: Option<String>) -> Question {
        Question {
            group: self.resource.group.to_string(),
            version: self.resource.version.to_string(),
            plural: self.resource.plural.to_string(),
            namespace,
            query: self.query.clone(),
            media: self.media,
            coding: self.coding,
        }
    }

    /// A list's answer, built (and for a caller that accepts gzip, gzipped as it is written,
    /// off the workers); and whether it is large enough to keep.
    async fn list_answer<R: Kept>(
        self,
        s: &AppState,
        req: &ListRequest,
        include: IncludeObject,
    ) -> Result<(Finished, bool), Status> {
        let page = s
            .workloads
            .list::<R>(&self.resource, req)
            .await
            .map_err(|e| match e {
                BizError::Source(DaoError::Version(HistoryError::Expired { .. })) => {
                    Status::list_too_old()
                }
                other => Status::of(&other),
            })?;
        let continued = page
            .continue_token
            .as_deref()
            .is_some_and(|t| !t.is_empty());
        let lifetime = match self.media.shape {
            Shape::Table => Some(TABLE_LIFETIME),
            _ if continued => Some(CONTINUED_LIFETIME),
            _ => None,
        };
        let meta = list_meta(
            &page.resource_version,
            page.continue_token.as_deref(),
            page.remaining,
        );
        // Decompressing every object of a large list, decoding what is not written from the
        // kept bytes, printing cells and gzipping is CPU work: off the workers.
        let resource = self.resource.clone();
        tokio::task::spawn_blocking(move || {
            let (shape, encoding) = (self.media.shape, self.media.encoding);
            let mut out = BodyWriter::new(self.coding);
            if matches!(shape, Shape::Plain | Shape::Metadata) && encoding == Encoding::Json {
                list_body(
                    &mut out,
                    &resource,
                    &meta,
                    page.items.iter().map(|view| view.0.as_ref()),
                )?;
            } else {
                let objects = page
                    .items
                    .iter()
                    .map(|view| Ok((view.0.as_ref(), object_of(view.0.as_ref())?)))
                    .collect::<Result<Vec<_>, Status>>()?;
                let body = match shape {
                    Shape::Table => self.table_of(objects, &meta, include, true),
                    Shape::MetadataList => json!({
                        "kind": "PartialObjectMetadataList",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": meta,
                        "items": objects.iter().map(|(_, o)| partial_metadata(o)).collect::<Vec<_>>(),
                    }),
                    Shape::Plain | Shape::Metadata => json!({
                        "kind": format!("{}List", resource.kind),
                        "apiVersion": resource.api_version(),
                        "metadata": meta,
                        "items": objects.into_iter().map(|(_, o)| without_type(o)).collect::<Vec<_>>(),
                    }),
                };
                write_encoded(&mut out, encoding, &body)?;
            }
            let written = out.finish().map_err(unwritable)?;
            let answer = Finished {
                content_type: encoding.content_type(),
                body: written.body.into(),
                coding: written.coding,
                lifetime,
            };
            Ok((answer, worth_keeping(written.plain_bytes)))
        })
        .await
        .map_err(|e| {
            Status::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: the list failed: {e}"),
            )
        })?
    }

    /// A `meta.k8s.io/v1` Table of `objects`, with its column definitions if `columns`.
    fn table_of<'a, R: Kept + 'a>(
        &self,
        objects: impl IntoIterator<Item = (&'a R, Value)>,
        meta: &Value,
        include: IncludeObject,
        columns: bool,
    ) -> Value {
        let now = SystemTime::now();
        let rows: Vec<Value> = objects
            .into_iter()
            .map(|(record, object)| {
                let cells: Vec<Value> = record
                    .cells(&self.resource, &object)
                    .iter()
                    .map(|c| c.to_table_value(now))
                    .collect();
                let mut row = json!({"cells": cells});
                match include {
                    IncludeObject::None => {}
                    IncludeObject::Metadata => row["object"] = partial_metadata(&object),
                    IncludeObject::Object => row["object"] = object,
                }
                row
            })
            .collect();
        // A watch's later frames carry none: the apiserver writes its nil slice, `null`.
        let definitions = if columns {
            json!(self.resource.printer.columns())
        } else {
            Value::Null
        };
        json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": definitions,
            "rows": rows,
        })
    }

    /// `watch=true`: each change as a JSON watch event, one a line, from where the query
    /// starts it (a version the history no longer has, or one not reached in time, is an
    /// ERROR event, as the apiserver ends such a watch); the lines are the answer's body, or
    /// each a message of the WebSocket the caller asked for.
    async fn watch<R: Kept>(
        mut self,
        s: AppState,
        req: ListRequest,
        include: IncludeObject,
    ) -> Result<Response, Status> {
        let transport = std::mem::take(&mut self.transport);
        let shutdown = s.streams.clone();
        let frames = self.watch_frames::<R>(s, req, include).await?;
        Ok(transport.respond(frames, shutdown))
    }

    /// The frames of a watch, each an event and its newline, as the apiserver writes them.
    async fn watch_frames<R: Kept>(
        self,
        s: AppState,
        mut req: ListRequest,
        include: IncludeObject,
    ) -> Result<BoxStream<'static, Bytes>, Status> {
        if self.media.shape == Shape::MetadataList {
            return Err(wrong_cardinality(&self.resource, false));
        }
        let start = self.query.watch_start()?;
        req.read_at = start.from;
        let bookmarks = flag(
            self.query.allow_watch_bookmarks.as_deref(),
            "allowWatchBookmarks",
        )?;
        let timeout = number(self.query.timeout_seconds.as_deref(), "timeoutSeconds")?
            .filter(|t| *t > 0)
            .map_or(MAX_WATCH_SECONDS, |t| t.min(MAX_WATCH_SECONDS));
        let events = match s.workloads.watch_records::<R>(&self.resource, &req).await {
            Ok(events) => events,
            Err(BizError::Source(dao @ DaoError::Version(_))) => {
                futures::stream::iter([Err(dao)]).boxed()
            }
            Err(e) => {
                let status = Status::of(&e);
                if status.code != axum::http::StatusCode::GONE {
                    return Err(status);
                }
                futures::stream::iter([Err(match e {
                    BizError::Source(dao) => dao,
                    other => DaoError::WatchExpired(other.to_string()),
                })])
                .boxed()
            }
        };
        let guard = s.metrics.watch_opened(self.resource.kind.clone());
        let mut first = true;
        // sendInitialEvents=false: what comes before the state's end is the state.
        let mut skipping = start.initial == InitialEvents::Skipped;
        let lines = events
            .take_until(s.watch_end())
            .take_until(tokio::time::sleep(Duration::from_secs(timeout)))
            .scan(false, |failed, event| {
                // A failed watch says so once, then ends.
                let next = (!*failed).then(|| {
                    *failed = event.is_err();
                    event
                });
                futures::future::ready(next)
            })
            .filter_map(move |event| {
                if skipping && event.is_ok() {
                    skipping = !matches!(event, Ok(WatchEvent::Synced { .. }));
                    return futures::future::ready(None);
                }
                let initial_end = start.initial == InitialEvents::Sent;
                let line = self.event_line(event, include, bookmarks, initial_end, &mut first);
                futures::future::ready(line)
            })
            .inspect(move |_| guard.sent())
            .map(|mut line| {
                line.push(b'\n');
                Bytes::from(line)
            });
        Ok(lines.boxed())
    }

    /// One watch event as the apiserver writes it; None for what it would not send.
    fn event_line<R: Kept>(
        &self,
        event: Result<WatchEvent<R>, DaoError>,
        include: IncludeObject,
        bookmarks: bool,
        initial_events: bool,
        first: &mut bool,
    ) -> Option<Vec<u8>> {
        let (kind, record) = match event {
            Ok(WatchEvent::Added(r)) => ("ADDED", r),
            Ok(WatchEvent::Modified(r)) => ("MODIFIED", r),
            Ok(WatchEvent::Deleted(r)) => ("DELETED", r),
            Ok(WatchEvent::Synced { resource_version }) => {
                if !bookmarks {
                    return None;
                }
                let mut metadata = json!({"resourceVersion": resource_version});
                if initial_events {
                    metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                let object = match self.media.shape {
                    Shape::Metadata => partial_metadata(&json!({"metadata": metadata})),
                    Shape::Plain | Shape::Table | Shape::MetadataList => json!({
                        "kind": self.resource.kind,
                        "apiVersion": self.resource.api_version(),
                        "metadata": metadata,
                    }),
                };
                return Some(
                    json!({"type": "BOOKMARK", "object": object})
                        .to_string()
                        .into_bytes(),
                );
            }
            Err(e) => {
                let status = Status::of(&BizError::Source(e));
                return Some(
                    json!({"type": "ERROR", "object": status.to_json()})
                        .to_string()
                        .into_bytes(),
                );
            }
        };
        let object = match self.media.shape {
            Shape::Table => object_of(record.as_ref()).map(|object| {
                let meta = json!({"resourceVersion": record.resource_version()});
                let columns = std::mem::replace(first, false);
                self.table_of([(record.as_ref(), object)], &meta, include, columns)
                    .to_string()
                    .into_bytes()
            }),
            Shape::Metadata => object_of(record.as_ref())
                .map(|object| partial_metadata(&object).to_string().into_bytes()),
            Shape::Plain | Shape::MetadataList => json_of(record.as_ref()),
        };
        match object {
            Ok(object) => {
                let mut line = format!(r#"{{"type":"{kind}","object":"#).into_bytes();
                line.extend_from_slice(&object);
                line.push(b'}');
                Some(line)
            }
            Err(status) => Some(
                json!({"type": "ERROR", "object": status.to_json()})
                    .to_string()
                    .into_bytes(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use biz::Typed;

    #[test]
    fn a_warning_is_written_as_the_apiserver_writes_it() {
        let endpoints = k8sdao::built_in("endpoints").unwrap();
        assert_eq!(
            warning_header(endpoints.warning.unwrap()).unwrap(),
            r#"299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice""#
        );
        for row in k8sdao::catalog::built_in_rows() {
            if let Some(warning) = row.warning {
                assert!(warning_header(warning).is_some(), "{}", row.name);
            }
        }
    }

    #[test]
    fn list_items_carry_no_type_and_list_metadata_only_what_is_set() {
        assert_eq!(
            without_type(json!({"kind": "ConfigMap", "apiVersion": "v1", "data": {}})),
            json!({"data": {}})
        );
        assert_eq!(
            list_meta("7", None, Some(3)),
            json!({"resourceVersion": "7"})
        );
        assert_eq!(
            list_meta("7", Some("t"), Some(3)),
            json!({"resourceVersion": "7", "continue": "t", "remainingItemCount": 3})
        );
        assert_eq!(IncludeObject::parse(None).unwrap(), IncludeObject::Metadata);
        assert!(IncludeObject::parse(Some("All")).is_err());
    }

    /// The list written from the kept bytes against the list of the decoded objects, each
    /// without its type, as it was built before.
    fn same_as_decoded<R: Served>(resource: &Resource, records: &[std::sync::Arc<R>]) {
        let meta = list_meta("7", Some("t"), Some(3));
        let mut body = Vec::new();
        list_body(
            &mut body,
            resource,
            &meta,
            records.iter().map(|r| r.as_ref()),
        )
        .unwrap();
        let written: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
        let decoded = json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(),
            "metadata": meta,
            "items": records
                .iter()
                .map(|r| without_type(object_of(r.as_ref()).unwrap()))
                .collect::<Vec<_>>(),
        });
        assert_eq!(written, decoded);
        assert_eq!(
            written["items"].as_array().map(Vec::len),
            Some(records.len())
        );
    }

    #[test]
    fn a_list_written_from_the_kept_bytes_is_the_list_of_the_decoded_objects() {
        use model::fixtures::{mk_deployment, mk_object, mk_pod};
        let pods = [
            PodRecord::from_pod(&mk_pod(
                "ns",
                "a",
                Some(("web-rs", "rs1")),
                &[("app", "web")],
            )),
            PodRecord::from_pod(&mk_pod("ns", "b", None, &[])),
        ];
        same_as_decoded(PodRecord::resource(), &pods);
        let deployments = [DeploymentRecord::from_deployment(&mk_deployment(
            "ns",
            "web",
            "d1",
            &[],
        ))];
        same_as_decoded(DeploymentRecord::resource(), &deployments);
        // Members that sort before apiVersion, and a kind in the middle of the rest.
        let slices = model::built_in("endpointslices").unwrap().resource();
        let objects = [
            mk_object(
                &slices,
                "ns",
                "s1",
                &[("app", "web")],
                json!({"addressType": "IPv4"}),
            ),
            mk_object(
                &slices,
                "ns",
                "s2",
                &[],
                json!({"addressType": "IPv6", "endpoints": []}),
            ),
        ];
        let generic: Vec<_> = objects.iter().map(GenericRecord::from_generic).collect();
        same_as_decoded(&slices, &generic);
        same_as_decoded::<GenericRecord>(&slices, &[]);
        // An object kept without its type first is decoded and written without it.
        let mut out = Vec::new();
        let json = br#"{"metadata":{},"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1"}"#;
        push_item(&mut out, json, &type_prefix(&slices)).unwrap();
        assert_eq!(out, br#"{"metadata":{}}"#);
    }
}
