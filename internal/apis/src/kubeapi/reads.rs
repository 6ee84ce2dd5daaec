//! The reads of the Kubernetes API: a list (`{Kind}List`, or a `Table` for kubectl), one
//! object, and `watch=true`, each from the objects the cache keeps whole, through the same
//! biz list, get and watch as `/k8sailor/v0`.

use std::convert::Infallible;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::discovery;
use super::media::{Encoding, Media, Shape, negotiate};
use super::query::{InitialEvents, KubeQuery, flag, number};
use super::status::Status;
use super::{Target, json_answer};
use crate::AppState;
use biz::{
    BizError, GenericRecord, Kind, ListRequest, NamespaceRecord, OutputFormat, PodRecord, ReadAt,
    Resource, Served, ServedBy,
};
use k8sdao::{DaoError, HistoryError, WatchEvent};
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

/// A record whose whole object the cache keeps, so the Kubernetes API can serve it.
pub(super) trait Kept: Served {
    /// The object as the apiserver sent it (managedFields stripped).
    fn object(&self) -> Result<Value, Status>;
    /// kubectl's cells of it.
    fn cells(&self, resource: &Resource, object: &Value) -> Vec<Cell>;
}

fn decoded(json: Result<Vec<u8>, String>) -> Result<Value, Status> {
    json.and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        .map_err(|e| {
            Status::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error: a kept object cannot be read: {e}"),
            )
        })
}

impl Kept for GenericRecord {
    fn object(&self) -> Result<Value, Status> {
        decoded(self.raw_json())
    }
    fn cells(&self, _: &Resource, _: &Value) -> Vec<Cell> {
        self.cells.clone()
    }
}

impl Kept for NamespaceRecord {
    fn object(&self) -> Result<Value, Status> {
        decoded(self.raw_json())
    }
    fn cells(&self, resource: &Resource, object: &Value) -> Vec<Cell> {
        resource.printer.cells(object)
    }
}

impl Kept for PodRecord {
    fn object(&self) -> Result<Value, Status> {
        decoded(self.raw_json())
    }
    fn cells(&self, resource: &Resource, object: &Value) -> Vec<Cell> {
        resource.printer.cells(object)
    }
}

/// Which record keeps a resource's whole object, if one does: generic records, Pods and
/// Namespaces.
/// The other typed kinds keep what their DTOs need, and Secrets only their metadata, so the
/// Kubernetes API does not serve them (their objects would not be the apiserver's).
#[derive(Clone, Copy, Debug)]
enum Keeper {
    Generic,
    Pod,
    Namespace,
}

fn keeper(resource: &Resource) -> Option<Keeper> {
    match resource.served_by {
        ServedBy::Generic => Some(Keeper::Generic),
        ServedBy::Typed(Kind::Pod) => Some(Keeper::Pod),
        ServedBy::Typed(Kind::Namespace) => Some(Keeper::Namespace),
        ServedBy::Typed(_) | ServedBy::MetadataOnly => None,
    }
}

/// The resources the Kubernetes API serves.
pub(super) fn served(s: &AppState) -> Vec<Resource> {
    s.workloads
        .source()
        .registry()
        .resources()
        .into_iter()
        .filter(|r| keeper(r).is_some())
        .collect()
}

/// The served resource `group`/`version`/`plural`.
pub(super) fn served_resource(
    s: &AppState,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<Resource> {
    served(s)
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Tells the compression layer a response is a watch stream, which it must not hold back.
#[derive(Clone, Copy, Debug)]
pub(super) struct Streamed;

/// Whether a response may be compressed: not a watch stream.
pub(crate) fn is_streamed(extensions: &axum::http::Extensions) -> bool {
    extensions.get::<Streamed>().is_some()
}

/// `GET /api/{*path}`.
pub(super) async fn core(
    State(s): State<AppState>,
    Path(path): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    read(s, Target::parse(true, &path), uri, headers).await
}

/// `GET /apis/{*path}`.
pub(super) async fn grouped(
    State(s): State<AppState>,
    Path(path): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    read(s, Target::parse(false, &path), uri, headers).await
}

async fn read(s: AppState, target: Option<Target>, uri: Uri, headers: HeaderMap) -> Response {
    let query = match axum::extract::Query::<KubeQuery>::try_from_uri(&uri) {
        Ok(q) => q.0,
        Err(e) => {
            return Status::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("invalid query: {}", e.body_text()),
            )
            .into_response();
        }
    };
    let (group, version, plural, namespace, name) = match target {
        None => return Status::no_such_path().into_response(),
        Some(Target::Group { group }) => return discovery::group(&s, &group),
        Some(Target::GroupVersion { group, version }) => {
            return discovery::resources(&s, &group, &version);
        }
        Some(Target::Collection {
            group,
            version,
            resource,
            namespace,
        }) => (group, version, resource, namespace, None),
        Some(Target::Object {
            group,
            version,
            resource,
            namespace,
            name,
        }) => (group, version, resource, namespace, Some(name)),
    };
    let Some(resource) = served_resource(&s, &group, &version, &plural) else {
        return Status::no_such_path().into_response();
    };
    // A namespaced object is named in its namespace; a cluster-scoped one never is.
    if namespace.is_some() != resource.namespaced && (name.is_some() || namespace.is_some()) {
        return Status::no_such_path().into_response();
    }
    let media = match flag(query.watch.as_deref(), "watch")
        .and_then(|watch| negotiate(&headers, name.is_none(), watch))
    {
        Ok(media) => media,
        Err(status) => return status.into_response(),
    };
    let answer = Answer {
        resource,
        media,
        query,
    };
    let result = match keeper(&answer.resource) {
        Some(Keeper::Generic) => answer.serve::<GenericRecord>(s, namespace, name).await,
        Some(Keeper::Pod) => answer.serve::<PodRecord>(s, namespace, name).await,
        Some(Keeper::Namespace) => answer.serve::<NamespaceRecord>(s, namespace, name).await,
        None => Err(Status::no_such_path()),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// One read of one resource, as asked.
struct Answer {
    resource: Resource,
    media: Media,
    query: KubeQuery,
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

/// `body` in the negotiated encoding.
fn encoded(encoding: Encoding, body: &Value) -> Result<Response, Status> {
    match encoding {
        Encoding::Json => Ok(json_answer(encoding.content_type(), body)),
        Encoding::Yaml => {
            let yaml = OutputFormat::Yaml
                .render(body.to_string().as_bytes())
                .map_err(|e| Status::of(&e))?;
            Ok(([(header::CONTENT_TYPE, encoding.content_type())], yaml).into_response())
        }
    }
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
        namespace: Option<String>,
        name: Option<String>,
    ) -> Result<Response, Status> {
        let include = IncludeObject::parse(self.query.include_object.as_deref())?;
        if let Some(name) = name {
            let record = s
                .workloads
                .get::<R>(&self.resource, namespace.as_deref(), &name)
                .await
                .map_err(|e| match e {
                    BizError::Source(DaoError::NotFound { .. }) => {
                        Status::not_found(&self.resource, &name)
                    }
                    other => Status::of(&other),
                })?
                .0;
            let object = record.object()?;
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
        let limit = number(self.query.limit.as_deref(), "limit")?;
        let req = ListRequest {
            namespace,
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
        let page = s
            .workloads
            .list::<R>(&self.resource, &req)
            .await
            .map_err(|e| match e {
                BizError::Source(DaoError::Version(HistoryError::Expired { .. })) => {
                    Status::list_too_old()
                }
                other => Status::of(&other),
            })?;
        let meta = list_meta(
            &page.resource_version,
            page.continue_token.as_deref(),
            page.remaining,
        );
        // Decoding and encoding every object of a large list is CPU work: off the workers.
        let resource = self.resource.clone();
        tokio::task::spawn_blocking(move || {
            let objects = page
                .items
                .iter()
                .map(|view| Ok((view.0.as_ref(), view.0.object()?)))
                .collect::<Result<Vec<_>, Status>>()?;
            let body = match self.media.shape {
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
            encoded(self.media.encoding, &body)
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
        let definitions = if columns {
            json!(self.resource.printer.columns())
        } else {
            json!([])
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
    /// ERROR event, as the apiserver ends such a watch).
    async fn watch<R: Kept>(
        self,
        s: AppState,
        mut req: ListRequest,
        include: IncludeObject,
    ) -> Result<Response, Status> {
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
                Ok::<_, Infallible>(bytes::Bytes::from(line))
            });
        let mut response = (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            Body::from_stream(lines),
        )
            .into_response();
        response.extensions_mut().insert(Streamed);
        Ok(response)
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
        let object = match record.object() {
            Ok(object) => object,
            Err(status) => {
                return Some(
                    json!({"type": "ERROR", "object": status.to_json()})
                        .to_string()
                        .into_bytes(),
                );
            }
        };
        let object = match self.media.shape {
            Shape::Table => {
                let meta = json!({"resourceVersion": record.resource_version()});
                let columns = std::mem::replace(first, false);
                self.table_of([(record.as_ref(), object)], &meta, include, columns)
            }
            Shape::Metadata => partial_metadata(&object),
            Shape::Plain | Shape::MetadataList => object,
        };
        Some(
            json!({"type": kind, "object": object})
                .to_string()
                .into_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
