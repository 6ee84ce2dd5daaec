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

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{AsyncBufRead, AsyncBufReadExt, Stream, StreamExt};
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
            Event::InitDone { version } => Event::InitDone { version },
            Event::Apply(o) => Event::Apply(f(o)),
            Event::Delete(o) => Event::Delete(f(o)),
            Event::Bookmark { version } => Event::Bookmark { version },
        }
    }
}

type Changes<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// Where a watch stands.
enum State<K> {
    /// Nothing listed: the next step starts a list.
    Empty,
    /// A list under way, in pages or in one: the page being read (None between two), the
    /// token of the next page (None after the last), and the list's version (from its first
    /// page).
    Paging {
        page: Option<PageReader>,
        continue_token: Option<String>,
        version: Option<String>,
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
/// overlaps the apiserver's encoding of what follows.
struct PageReader {
    body: std::pin::Pin<Box<dyn AsyncBufRead + Send>>,
    splitter: Splitter,
    /// Items cut, not yet decoded.
    items: VecDeque<Vec<u8>>,
}

/// A page's own members: its list metadata.
#[derive(serde::Deserialize)]
struct PageHead {
    #[serde(default)]
    metadata: ListMeta,
}

/// Starts reading the page of `api`'s list that `params` asks for, as `Api::list` asks for it.
async fn list_page<K>(api: &Api<K>, params: &ListParams) -> kube::Result<PageReader>
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
    let body = api.clone().into_client().request_stream(request).await?;
    Ok(PageReader {
        body: Box::pin(body),
        splitter: Splitter::new(MAX_ITEM_BYTES),
        items: VecDeque::new(),
    })
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
    async fn next<K: DeserializeOwned>(&mut self) -> kube::Result<PageStep<K>> {
        if let Some(text) = self.items.pop_front() {
            return serde_json::from_slice(&text)
                .map(PageStep::Object)
                .map_err(kube::Error::SerdeError);
        }
        let chunk = self
            .body
            .fill_buf()
            .await
            .map_err(kube::Error::ReadEvents)?;
        if chunk.is_empty() {
            let head = self.splitter.finish().map_err(split_error)?;
            let head: PageHead = serde_json::from_slice(&head).map_err(kube::Error::SerdeError)?;
            return Ok(PageStep::Done(head.metadata));
        }
        let read = chunk.len();
        let items = &mut self.items;
        self.splitter
            .feed(chunk, |item| items.push_back(item))
            .map_err(split_error)?;
        self.body.as_mut().consume(read);
        Ok(PageStep::Read)
    }
}

fn split_error(error: crate::items::SplitError) -> kube::Error {
    kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

/// A watch of `api`'s kind: a list (paged or streamed as `config` says), then its changes, a
/// new list after a 410. It never ends; errors are yielded and the next poll retries.
pub fn watch<K>(api: Api<K>, config: Config) -> impl Stream<Item = Result<Event<K>, Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    futures::stream::unfold(State::Empty, move |state| {
        let api = api.clone();
        let config = config.clone();
        async move {
            let mut state = state;
            loop {
                match step(&api, &config, state).await {
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
        } => match page.next().await {
            Ok(PageStep::Object(object)) => {
                let state = State::Paging {
                    page: Some(page),
                    continue_token,
                    version,
                };
                (Some(Ok(Event::InitApply(object))), state)
            }
            Ok(PageStep::Read) => {
                let state = State::Paging {
                    page: Some(page),
                    continue_token,
                    version,
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
                };
                (None, state)
            }
            Err(error) => (Some(Err(Error::InitialListFailed(error))), State::Empty),
        },
        State::Paging {
            page: None,
            continue_token,
            version,
        } => {
            if let (None, Some(version)) = (&continue_token, &version) {
                let version = version.clone();
                return (
                    Some(Ok(Event::InitDone {
                        version: version.clone(),
                    })),
                    State::At(version),
                );
            }
            match list_page(api, &list_params(config, continue_token)).await {
                Ok(page) => {
                    let state = State::Paging {
                        page: Some(page),
                        continue_token: None,
                        version,
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
