//! A list-then-watch of one kind, as kube's watcher does it, but telling the versions it
//! stands at: the list's own resourceVersion when a list completes (paged: the List's
//! `metadata.resourceVersion`; streamed: the `k8s.io/initial-events-end` bookmark's) and each
//! bookmark's. kube's watcher keeps both to itself, and the newest object of a list is not the
//! list's version: when the last change of a kind was a deletion, it is older, and a cache
//! that took it would go back in time after every restart.
//!
//! One explicit [`State`] and a [`step`] function, after kube-runtime's watcher; errors are
//! yielded (retry them with a backoff, such as kube's `default_backoff`), and a 410 starts a
//! new list.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{AsyncBufRead, AsyncBufReadExt, Stream, StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use kube::api::{ListParams, VersionMatch, WatchEvent, WatchParams};
use kube::core::ListMeta;
use kube::runtime::watcher::{Config, Error, InitialListStrategy, ListSemantic};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::items::Splitter;

/// One step of a watch, as [`watch`] tells it.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<K> {
    /// A list begins: [`Event::InitApply`]s follow, then [`Event::InitDone`].
    Init,
    /// One object of the list.
    InitApply(K),
    /// The list is complete, and the kind's state is the one at `version`, the list's own
    /// resourceVersion: at least the version of every object in it, and of every change
    /// (deletions included) before it.
    InitDone {
        /// The List's `metadata.resourceVersion`, or the initial-events-end bookmark's.
        version: String,
        /// The encoding the list came in (a streamed list's events are JSON).
        encoding: ListEncoding,
    },
    /// An object added or modified.
    Apply(K),
    /// An object deleted; its resourceVersion is the deletion's.
    Delete(K),
    /// The apiserver says every change up to `version` has been sent: nothing of this kind
    /// changed since the last event, and the state is the one at `version`.
    Bookmark {
        /// The bookmark's resourceVersion.
        version: String,
    },
}

impl<K> Event<K> {
    /// Applies `f` to the object the event carries, if any.
    #[must_use]
    pub fn modify(mut self, f: impl FnOnce(&mut K)) -> Self {
        match &mut self {
            Event::InitApply(o) | Event::Apply(o) | Event::Delete(o) => f(o),
            Event::Init | Event::InitDone { .. } | Event::Bookmark { .. } => {}
        }
        self
    }

    /// The same event with its object turned into `T`.
    pub fn map<T>(self, f: impl FnOnce(K) -> T) -> Event<T> {
        match self {
            Event::Init => Event::Init,
            Event::InitApply(o) => Event::InitApply(f(o)),
            Event::InitDone { version, encoding } => Event::InitDone { version, encoding },
            Event::Apply(o) => Event::Apply(f(o)),
            Event::Delete(o) => Event::Delete(f(o)),
            Event::Bookmark { version } => Event::Bookmark { version },
        }
    }
}

type Changes<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// How a kind's lists are asked for: in protobuf when the kind has it (built-in kinds) and
/// [`ListEncoding::Protobuf`] is chosen, written as JSON by kubeproto as they arrive, else in
/// JSON. A protobuf list that kubeproto cannot write (a field a newer apiserver added) turns
/// the kind to JSON for good, with a warning.
#[derive(Clone, Debug)]
pub(crate) struct Intake {
    protobuf: Option<kubeproto::ListKind>,
    refused: Arc<AtomicBool>,
}

impl Intake {
    pub(crate) fn new(encoding: ListEncoding, group: &str, version: &str, kind: &str) -> Self {
        let protobuf = match encoding {
            ListEncoding::Protobuf => kubeproto::ListKind::find(group, version, kind),
            ListEncoding::Json => None,
        };
        Intake {
            protobuf,
            refused: Arc::new(AtomicBool::new(false)),
        }
    }

    fn protobuf(&self) -> Option<kubeproto::ListKind> {
        self.protobuf
            .filter(|_| !self.refused.load(Ordering::Relaxed))
    }
}

/// The encoding a watch asks its lists in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListEncoding {
    /// Protobuf for built-in kinds (JSON for the rest): the apiserver encodes a list of pods
    /// at a third to a half of its CPU for JSON, and a cache's start waits for that encoding.
    /// On a quiet machine at 10,000 pods, 10 interleaved starts each: ready in 0.84-1.00 s
    /// (median 0.86 s) against JSON's 0.76-1.46 s (median 1.0 s), whose apiserver CPU is
    /// bimodal (0.6-0.8 s or 1.5-1.8 s) where protobuf's stays at 0.4-0.7 s.
    #[default]
    Protobuf,
    /// JSON for every kind.
    Json,
}

impl ListEncoding {
    /// Every encoding, as settings name them.
    pub const ALL: &'static [ListEncoding] = &[ListEncoding::Protobuf, ListEncoding::Json];

    /// As flags and config files name it.
    pub fn name(self) -> &'static str {
        match self {
            ListEncoding::Protobuf => "protobuf",
            ListEncoding::Json => "json",
        }
    }
}

/// Where a watch stands.
enum State<K> {
    /// Nothing listed: the next step starts a list.
    Empty,
    /// A list under way, in pages or in one: the page being read (None between two), the
    /// token of the next page (None after the last), the list's version (from its first
    /// page) and the encoding its pages came in.
    Paging {
        page: Option<Box<PageReader>>,
        continue_token: Option<String>,
        version: Option<String>,
        encoding: ListEncoding,
    },
    /// A streaming list under way: objects until the initial-events-end bookmark.
    Streaming(Changes<K>),
    /// Listed (or the watch ended) at `version`: the next step watches from it.
    At(String),
    /// Watching: changes after `version`.
    Watching {
        version: String,
        changes: Changes<K>,
    },
}

/// The apiserver ends a watch after `timeoutSeconds`; one that says nothing for this much
/// longer is taken for a dead connection.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The next change, or None when the stream ends or stays silent past its timeout.
async fn next_change<K>(
    changes: &mut Changes<K>,
    config: &Config,
) -> Option<kube::Result<WatchEvent<K>>> {
    let idle = Duration::from_secs(config.timeout.unwrap_or(290).into()) + IDLE_MARGIN;
    tokio::time::timeout(idle, changes.next())
        .await
        .ok()
        .flatten()
}

fn list_params(config: &Config, continue_token: Option<String>) -> ListParams {
    // A list "from the cache" (resourceVersion 0) may be older than what we served before a
    // restart; a consistent read never is.
    let (resource_version, version_match) = match config.list_semantic {
        ListSemantic::Any => (Some("0".into()), Some(VersionMatch::NotOlderThan)),
        ListSemantic::MostRecent => (None, None),
    };
    ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        resource_version,
        version_match,
        limit: config.page_size,
        continue_token,
        ..Default::default()
    }
}

fn watch_params(config: &Config, initial_events: bool) -> WatchParams {
    WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        bookmarks: config.bookmarks,
        send_initial_events: initial_events,
    }
}

/// The largest list item read: far above what etcd stores (1.5 MiB by default) even as JSON,
/// so that a broken answer cannot grow one item without bound.
const MAX_ITEM_BYTES: usize = 64 << 20;

/// One page of a list being read as it arrives: each item is decoded once its last byte is
/// in, so a page (or a whole list asked without a limit) is never held whole, and decoding
/// overlaps the apiserver's encoding of what follows. The body is read and cut into items
/// (TLS, and kubeproto's writing for protobuf) on a task of its own, beside the decoding:
/// a start at 10,000 pods is then about 7% sooner. (Decoding batches on several threads
/// as well cost a quarter more CPU and was no sooner on two cores.)
struct PageReader {
    encoding: ListEncoding,
    cut: tokio::sync::mpsc::Receiver<Cut>,
    /// Items cut (as JSON), not yet decoded.
    items: std::vec::IntoIter<Vec<u8>>,
}

/// What the cutting task hands on.
enum Cut {
    Items(Vec<Vec<u8>>),
    Done(kube::Result<ListMeta>),
}

/// Batches of item texts in flight between the cutting task and the decoder: enough to keep
/// both busy, few enough to hold a bounded part of a list.
const CUT_BATCHES: usize = 4;

/// How a page's items are cut from its bytes.
enum Cutter {
    Json(Splitter),
    /// A protobuf list, each item written as JSON; `refused` is set when it cannot be.
    Protobuf {
        reader: kubeproto::ListReader,
        refused: Arc<AtomicBool>,
    },
}

/// A page's own members: its list metadata.
#[derive(serde::Deserialize)]
struct PageHead {
    #[serde(default)]
    metadata: ListMeta,
}

/// Starts reading the page of `api`'s list that `params` asks for, as `Api::list` asks for it,
/// in protobuf when `intake` says so.
async fn list_page<K>(
    api: &Api<K>,
    params: &ListParams,
    intake: &Intake,
) -> kube::Result<PageReader>
where
    K: Resource + Clone + DeserializeOwned,
{
    let request = kube::core::Request::new(api.resource_url());
    let mut request = if K::metadata_api() {
        request.list_metadata(params)
    } else {
        request.list(params)
    }
    .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("list");
    let protobuf = intake.protobuf().filter(|_| !K::metadata_api());
    if protobuf.is_some() {
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(kubeproto::ACCEPT),
        );
    }
    let response = api
        .clone()
        .into_client()
        .send(request.map(kube::client::Body::from))
        .await?;
    let response = api_error(response).await?;
    // Custom resources have no protobuf: the apiserver answers them in JSON.
    let sent_protobuf = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with(kubeproto::PROTOBUF));
    let (cutter, encoding) = match protobuf {
        Some(kind) if sent_protobuf => (
            Cutter::Protobuf {
                // The informer drops them from every object (`strip_noise`).
                reader: kubeproto::ListReader::new(kind, MAX_ITEM_BYTES).without_managed_fields(),
                refused: intake.refused.clone(),
            },
            ListEncoding::Protobuf,
        ),
        _ => (
            Cutter::Json(Splitter::new(MAX_ITEM_BYTES)),
            ListEncoding::Json,
        ),
    };
    let body = response
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other)
        .into_async_read();
    let (send, cut) = tokio::sync::mpsc::channel(CUT_BATCHES);
    // It ends with the page, or once the reader is dropped.
    tokio::spawn(cut_page(Box::pin(body), cutter, send));
    Ok(PageReader {
        encoding,
        cut,
        items: Vec::new().into_iter(),
    })
}

/// Reads a page's body, handing on its items as they are cut, then its list metadata.
async fn cut_page(
    mut body: std::pin::Pin<Box<dyn AsyncBufRead + Send>>,
    mut cutter: Cutter,
    send: tokio::sync::mpsc::Sender<Cut>,
) {
    loop {
        // A list abandoned (its watcher stopped or restarted) closes its connection at once,
        // not once the apiserver has sent the rest.
        let read = tokio::select! {
            read = body.fill_buf() => read,
            () = send.closed() => return,
        };
        let chunk = match read {
            Ok(chunk) => chunk,
            Err(error) => {
                let _ = send
                    .send(Cut::Done(Err(kube::Error::ReadEvents(error))))
                    .await;
                return;
            }
        };
        if chunk.is_empty() {
            let _ = send.send(Cut::Done(cutter.finish())).await;
            return;
        }
        let read = chunk.len();
        let mut items = Vec::new();
        if let Err(error) = cutter.feed(chunk, &mut items) {
            let _ = send.send(Cut::Done(Err(error))).await;
            return;
        }
        body.as_mut().consume(read);
        if !items.is_empty() && send.send(Cut::Items(items)).await.is_err() {
            return;
        }
    }
}

impl Cutter {
    fn feed(&mut self, chunk: &[u8], items: &mut Vec<Vec<u8>>) -> kube::Result<()> {
        match self {
            Cutter::Json(splitter) => splitter
                .feed(chunk, |item| items.push(item))
                .map_err(split_error),
            Cutter::Protobuf { reader, refused } => reader
                .feed(chunk, |item| items.push(item))
                .map_err(|e| unwritable(refused, e)),
        }
    }

    /// The page's list metadata, once its body has ended.
    fn finish(self) -> kube::Result<ListMeta> {
        match self {
            Cutter::Json(mut splitter) => {
                let head = splitter.finish().map_err(split_error)?;
                let head: PageHead =
                    serde_json::from_slice(&head).map_err(kube::Error::SerdeError)?;
                Ok(head.metadata)
            }
            Cutter::Protobuf { reader, refused } => {
                let meta = reader.finish().map_err(|e| unwritable(&refused, e))?;
                serde_json::from_slice(&meta).map_err(kube::Error::SerdeError)
            }
        }
    }
}

/// An error answer as kube reports one (its Status, in JSON or in protobuf, or one made of
/// its text and code), as `Client::request_stream` does.
async fn api_error(
    response: http::Response<kube::client::Body>,
) -> kube::Result<http::Response<kube::client::Body>> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(response);
    }
    let bytes = response.into_body().collect().await?.to_bytes();
    let json = match kubeproto::status_json(&bytes) {
        Ok(json) => json.into(),
        // JSON or text, or a Status kubeproto cannot read: read as it came.
        Err(_) => bytes.clone(),
    };
    if let Ok(status) = serde_json::from_slice::<kube::core::Status>(&json) {
        return Err(kube::Error::Api(status.boxed()));
    }
    let text = String::from_utf8_lossy(&bytes);
    let status = kube::core::Status::failure(text.trim(), "Failed to parse error data")
        .with_code(status.as_u16());
    Err(kube::Error::Api(status.boxed()))
}

/// What reading a page gave.
enum PageStep<K> {
    /// One object of the page.
    Object(K),
    /// More of the text was read: nothing to tell yet.
    Read,
    /// The page is complete: its list metadata.
    Done(ListMeta),
}

impl PageReader {
    fn encoding(&self) -> ListEncoding {
        self.encoding
    }

    async fn next<K: DeserializeOwned>(&mut self) -> kube::Result<PageStep<K>> {
        if let Some(text) = self.items.next() {
            return serde_json::from_slice(&text)
                .map(PageStep::Object)
                .map_err(kube::Error::SerdeError);
        }
        match self.cut.recv().await {
            Some(Cut::Items(items)) => {
                self.items = items.into_iter();
                Ok(PageStep::Read)
            }
            Some(Cut::Done(meta)) => meta.map(PageStep::Done),
            None => Err(kube::Error::ReadEvents(std::io::Error::other(
                "the page's reader ended without its metadata",
            ))),
        }
    }
}

/// A protobuf list kubeproto could not write: the kind's lists are asked in JSON from now on.
fn unwritable(refused: &AtomicBool, error: kubeproto::Error) -> kube::Error {
    if !refused.swap(true, Ordering::Relaxed) {
        tracing::warn!(%error, "a protobuf list could not be read; asking this kind's lists in JSON");
    }
    kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

fn split_error(error: crate::items::SplitError) -> kube::Error {
    kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

/// A watch of `api`'s kind: a list (paged or streamed as `config` says), then its changes, a
/// new list after a 410. It never ends; errors are yielded and the next poll retries.
pub(crate) fn watch<K>(
    api: Api<K>,
    config: Config,
    intake: Intake,
) -> impl Stream<Item = Result<Event<K>, Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    futures::stream::unfold(State::Empty, move |state| {
        let api = api.clone();
        let config = config.clone();
        let intake = intake.clone();
        async move {
            let mut state = state;
            loop {
                match step(&api, &config, &intake, state).await {
                    (Some(event), next) => return Some((event, next)),
                    (None, next) => state = next,
                }
            }
        }
    })
}

/// One transition; None when there is nothing to tell yet.
async fn step<K>(
    api: &Api<K>,
    config: &Config,
    intake: &Intake,
    state: State<K>,
) -> (Option<Result<Event<K>, Error>>, State<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    match state {
        State::Empty => match config.initial_list_strategy {
            InitialListStrategy::ListWatch => (
                Some(Ok(Event::Init)),
                State::Paging {
                    page: None,
                    continue_token: None,
                    version: None,
                    encoding: ListEncoding::Json,
                },
            ),
            // No resourceVersion: the apiserver sends the objects as of a consistent read, as
            // client-go's reflector asks (resourceVersion 0 would take its cache as it is).
            InitialListStrategy::StreamingList => {
                match api.watch(&watch_params(config, true), "").await {
                    Ok(changes) => (Some(Ok(Event::Init)), State::Streaming(changes.boxed())),
                    Err(error) => (Some(Err(Error::WatchStartFailed(error))), State::Empty),
                }
            }
        },
        State::Paging {
            page: Some(mut page),
            continue_token,
            version,
            encoding,
        } => match page.next().await {
            Ok(PageStep::Object(object)) => {
                let state = State::Paging {
                    page: Some(page),
                    continue_token,
                    version,
                    encoding,
                };
                (Some(Ok(Event::InitApply(object))), state)
            }
            Ok(PageStep::Read) => {
                let state = State::Paging {
                    page: Some(page),
                    continue_token,
                    version,
                    encoding,
                };
                (None, state)
            }
            Ok(PageStep::Done(meta)) => {
                let continue_token = meta.continue_.filter(|c| !c.is_empty());
                // Every page of one list is at the first page's version.
                let version = version.or(meta.resource_version.filter(|v| !v.is_empty()));
                if version.is_none() {
                    return (Some(Err(Error::NoResourceVersion)), State::Empty);
                }
                let state = State::Paging {
                    page: None,
                    continue_token,
                    version,
                    encoding: page.encoding(),
                };
                (None, state)
            }
            Err(error) => (Some(Err(Error::InitialListFailed(error))), State::Empty),
        },
        State::Paging {
            page: None,
            continue_token,
            version,
            encoding,
        } => {
            if let (None, Some(version)) = (&continue_token, &version) {
                let version = version.clone();
                return (
                    Some(Ok(Event::InitDone {
                        version: version.clone(),
                        encoding,
                    })),
                    State::At(version),
                );
            }
            match list_page(api, &list_params(config, continue_token), intake).await {
                Ok(page) => {
                    let state = State::Paging {
                        page: Some(Box::new(page)),
                        continue_token: None,
                        version,
                        encoding,
                    };
                    (None, state)
                }
                Err(error) => (Some(Err(Error::InitialListFailed(error))), State::Empty),
            }
        }
        State::Streaming(mut changes) => match next_change(&mut changes, config).await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                (Some(Ok(Event::InitApply(o))), State::Streaming(changes))
            }
            Some(Ok(WatchEvent::Bookmark(mark))) => {
                if mark
                    .metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end")
                {
                    let version = mark.metadata.resource_version;
                    let done = Event::InitDone {
                        version: version.clone(),
                        encoding: ListEncoding::Json,
                    };
                    (Some(Ok(done)), State::Watching { version, changes })
                } else {
                    (None, State::Streaming(changes))
                }
            }
            // The apiserver sends no deletions before the initial events end.
            Some(Ok(WatchEvent::Deleted(_))) => (None, State::Streaming(changes)),
            Some(Ok(WatchEvent::Error(status))) => {
                let next = if status.code == 410 {
                    State::Empty
                } else {
                    State::Streaming(changes)
                };
                (Some(Err(Error::WatchError(status.boxed()))), next)
            }
            Some(Err(error)) => (
                Some(Err(Error::WatchFailed(error))),
                State::Streaming(changes),
            ),
            // Ended before the list was complete: list again.
            None => (None, State::Empty),
        },
        State::At(version) => match api.watch(&watch_params(config, false), &version).await {
            Ok(changes) => (
                None,
                State::Watching {
                    version,
                    changes: changes.boxed(),
                },
            ),
            Err(error) => (
                Some(Err(Error::WatchStartFailed(error))),
                State::At(version),
            ),
        },
        State::Watching {
            version,
            mut changes,
        } => match next_change(&mut changes, config).await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                match o.meta().resource_version.clone() {
                    Some(version) if !version.is_empty() => (
                        Some(Ok(Event::Apply(o))),
                        State::Watching { version, changes },
                    ),
                    _ => (Some(Err(Error::NoResourceVersion)), State::Empty),
                }
            }
            Some(Ok(WatchEvent::Deleted(o))) => match o.meta().resource_version.clone() {
                Some(version) if !version.is_empty() => (
                    Some(Ok(Event::Delete(o))),
                    State::Watching { version, changes },
                ),
                _ => (Some(Err(Error::NoResourceVersion)), State::Empty),
            },
            Some(Ok(WatchEvent::Bookmark(mark))) if !mark.metadata.resource_version.is_empty() => {
                let version = mark.metadata.resource_version;
                let event = Event::Bookmark {
                    version: version.clone(),
                };
                (Some(Ok(event)), State::Watching { version, changes })
            }
            Some(Ok(WatchEvent::Bookmark(_))) => (None, State::Watching { version, changes }),
            Some(Ok(WatchEvent::Error(status))) => {
                let next = if status.code == 410 {
                    State::Empty
                } else {
                    State::Watching { version, changes }
                };
                (Some(Err(Error::WatchError(status.boxed()))), next)
            }
            Some(Err(error)) => (
                Some(Err(Error::WatchFailed(error))),
                State::Watching { version, changes },
            ),
            None => (None, State::At(version)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http::{Request, Response};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;
    use kubeproto::testing::message;

    use super::*;

    /// A ConfigMap in protobuf (ObjectMeta's name 1, namespace 3, resourceVersion 6), with a
    /// field of number `unknown` the schema does not have, when given.
    fn config_map(name: &str, version: &str, unknown: Option<u64>) -> Vec<u8> {
        let meta = message(&[(1, name.as_bytes()), (3, b"ns"), (6, version.as_bytes())]);
        let mut fields = vec![(1, meta.as_slice())];
        if let Some(number) = unknown {
            fields.push((number, b"x".as_slice()));
        }
        message(&fields)
    }

    /// The apiserver's protobuf list answer: `k8s\0`, then runtime.Unknown whose raw (2) is
    /// the list: ListMeta (resourceVersion 2) at 1, the items at 2.
    fn protobuf_list(items: &[Vec<u8>], version: &str) -> Vec<u8> {
        let meta = message(&[(2, version.as_bytes())]);
        let mut list = message(&[(1, &meta)]);
        for item in items {
            list.extend(message(&[(2, item)]));
        }
        kubeproto::testing::enveloped("v1", "ConfigMapList", &list)
    }

    fn json_list() -> Vec<u8> {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "10"},
            "items": [{"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "8"}},
                      {"metadata": {"namespace": "ns", "name": "b", "resourceVersion": "9"}}]})
        .to_string()
        .into_bytes()
    }

    /// Lists ConfigMaps from a fake apiserver that answers each list with `answer(asked for
    /// protobuf)`: the events until the list is done (errors as "error"), and whether each
    /// request asked for protobuf.
    async fn list(answer: fn(bool) -> (&'static str, Vec<u8>)) -> (Vec<String>, Vec<bool>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let asked = asked.clone();
            tokio::spawn(async move {
                while let Some((request, send)) = handle.next_request().await {
                    let protobuf = request
                        .headers()
                        .get(http::header::ACCEPT)
                        .is_some_and(|a| a.to_str().unwrap().contains(kubeproto::PROTOBUF));
                    asked.lock().unwrap().push(protobuf);
                    let (content_type, body) = answer(protobuf);
                    send.send_response(
                        Response::builder()
                            .header(http::header::CONTENT_TYPE, content_type)
                            .body(Body::from(body))
                            .unwrap(),
                    );
                }
            })
        };
        let api: Api<ConfigMap> = Api::all(kube::Client::new(service, "default"));
        let config = Config {
            page_size: None,
            ..Config::default()
        };
        let intake = Intake::new(ListEncoding::Protobuf, "", "v1", "ConfigMap");
        let mut events = Box::pin(watch(api, config, intake));
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            let done = matches!(event, Ok(Event::InitDone { .. }));
            seen.push(match event {
                Ok(Event::Init) => "init".to_string(),
                Ok(Event::InitApply(o)) => format!(
                    "{}@{}",
                    o.metadata.name.unwrap(),
                    o.metadata.resource_version.unwrap()
                ),
                Ok(Event::InitDone { version, encoding }) => {
                    format!("done@{version} in {}", encoding.name())
                }
                Ok(other) => format!("{other:?}"),
                Err(_) => "error".to_string(),
            });
            if done {
                break;
            }
        }
        server.abort();
        let asked = asked.lock().unwrap().clone();
        (seen, asked)
    }

    #[tokio::test]
    async fn a_built_in_kinds_list_is_asked_and_read_in_protobuf() {
        let (seen, asked) = list(|protobuf| {
            assert!(protobuf, "asked for protobuf");
            let items = [config_map("a", "8", None), config_map("b", "9", None)];
            (kubeproto::PROTOBUF, protobuf_list(&items, "10"))
        })
        .await;
        assert_eq!(seen, ["init", "a@8", "b@9", "done@10 in protobuf"]);
        assert_eq!(asked, [true]);
    }

    #[tokio::test]
    async fn a_json_answer_to_a_protobuf_ask_is_read_as_json() {
        // As the apiserver answers for a kind without protobuf (a custom resource).
        let (seen, _) = list(|_| ("application/json", json_list())).await;
        assert_eq!(seen, ["init", "a@8", "b@9", "done@10 in json"]);
    }

    #[tokio::test]
    async fn a_protobuf_list_that_cannot_be_read_is_asked_again_in_json() {
        // Field 99 of a ConfigMap: a newer apiserver's, whose JSON would carry it.
        let (seen, asked) = list(|protobuf| {
            if protobuf {
                let items = [config_map("a", "8", Some(99))];
                (kubeproto::PROTOBUF, protobuf_list(&items, "10"))
            } else {
                ("application/json", json_list())
            }
        })
        .await;
        assert_eq!(
            seen,
            ["init", "error", "init", "a@8", "b@9", "done@10 in json"]
        );
        assert_eq!(asked, [true, false], "in JSON once protobuf failed");
    }

    #[tokio::test]
    async fn an_error_in_protobuf_keeps_its_message() {
        let mut status = message(&[
            (2, b"Failure"),
            (3, b"pods is forbidden"),
            (4, b"Forbidden"),
        ]);
        kubeproto::testing::push_varint(&mut status, 6 << 3);
        kubeproto::testing::push_varint(&mut status, 403);
        let answer = kubeproto::testing::enveloped("v1", "Status", &status);
        let response = Response::builder()
            .status(403)
            .header(http::header::CONTENT_TYPE, kubeproto::PROTOBUF)
            .body(Body::from(answer))
            .unwrap();
        let Err(kube::Error::Api(status)) = api_error(response).await else {
            panic!("an error answer read as an error");
        };
        assert_eq!(
            (status.code, status.message.as_str(), status.reason.as_str()),
            (403, "pods is forbidden", "Forbidden")
        );
    }
}
