//! The watch relay: a live watch is the list `q` selects, sent as Added events and Synced,
//! then the apiserver's watch from the list's resourceVersion, each change projected into a
//! record. Modelled on kube-runtime's watcher: the relay is in one [`State`] between two
//! events it sends, and [`Relay::step`] moves it on by one request or one event.
//!
//! Unlike kube's watcher it never lists again by itself: a client of a watch has been told a
//! set of objects, so when the apiserver can no longer tell every change (410 Gone) the relay
//! ends with [`DaoError::WatchExpired`] and the client starts again, as with the cache.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Api;
use kube::api::WatchParams;
use kube::core::WatchEvent as ApiEvent;

use super::reads::{Namespaced, list_version};
use super::{LiveSource, admitted, required};
use crate::{DaoError, ListQuery, NamespaceFilter, ReadAt, WatchEvent, WatchStream};

/// How long one watch request lasts before the relay makes it again from the last
/// resourceVersion it saw (kube's watcher uses the same, under the apiserver's own limit).
const WATCH_REQUEST_SECS: u32 = 290;

/// How much longer than a watch request's own timeout the relay waits, hearing nothing (not
/// even a bookmark), before it takes the connection for dead and makes the request again from
/// the last resourceVersion, as client-go's reflector and kube's watcher do: without it a
/// connection lost without a FIN would leave the client's watch silent for ever.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// The events of one watch request as kube decodes them.
type ApiEvents<K> = BoxStream<'static, kube::Result<ApiEvent<K>>>;

/// Where a relay is between two events it sends.
enum State<K> {
    /// Sending the initial list's objects as Added, then Synced at its resourceVersion.
    Listed {
        items: std::vec::IntoIter<K>,
        resource_version: String,
    },
    /// No watch request open: the next one starts from `resource_version`, the newest the
    /// relay has seen (an object's, a bookmark's, or the list's).
    Resuming { resource_version: String },
    /// A watch request open; everything up to `resource_version` has been relayed.
    Watching {
        resource_version: String,
        events: ApiEvents<K>,
    },
    /// An error was sent: the watch is over.
    Ended,
}

/// What a step produced: an event to send (None: step again) and the state to go on from.
type Step<K, R> = (Option<Result<WatchEvent<R>, DaoError>>, State<K>);

/// What stays the same for the whole watch.
struct Relay<K, R> {
    api: Api<K>,
    params: WatchParams,
    project: fn(K) -> Arc<R>,
    /// Changes outside it are skipped (they still move the resourceVersion on).
    visible: NamespaceFilter,
    /// The namespace asked for: a cluster-scoped kind's watch covers them all.
    namespace: Option<String>,
    /// Silence longer than this restarts the watch request.
    idle_timeout: Duration,
}

impl<K, R> Relay<K, R>
where
    K: Namespaced + Send + 'static,
    R: Send + Sync + 'static,
{
    /// Moves the relay on by one request or one event. Bookmarks, changes the caller may not
    /// see, a watch request's end and an idle connection only move the state on (None).
    async fn step(&self, state: State<K>) -> Step<K, R> {
        match state {
            State::Listed {
                mut items,
                resource_version,
            } => match items.next() {
                Some(object) => (
                    Some(Ok(WatchEvent::Added((self.project)(object)))),
                    State::Listed {
                        items,
                        resource_version,
                    },
                ),
                None => (
                    Some(Ok(WatchEvent::Synced {
                        resource_version: resource_version.clone(),
                    })),
                    State::Resuming { resource_version },
                ),
            },
            State::Resuming { resource_version } => {
                match self.api.watch(&self.params, &resource_version).await {
                    Ok(events) => (
                        None,
                        State::Watching {
                            resource_version,
                            events: events.boxed(),
                        },
                    ),
                    Err(e) => (Some(Err(e.into())), State::Ended),
                }
            }
            State::Watching {
                resource_version,
                mut events,
            } => match tokio::time::timeout(self.idle_timeout, events.next()).await {
                Err(_idle) => {
                    tracing::debug!(%resource_version, timeout = ?self.idle_timeout,
                        "live watch heard nothing; making the request again");
                    (None, State::Resuming { resource_version })
                }
                // The apiserver ended the request (its timeout): made again.
                Ok(None) => (None, State::Resuming { resource_version }),
                Ok(Some(Err(e))) => (Some(Err(e.into())), State::Ended),
                Ok(Some(Ok(ApiEvent::Bookmark(b)))) => (
                    None,
                    State::Watching {
                        resource_version: b.metadata.resource_version,
                        events,
                    },
                ),
                Ok(Some(Ok(ApiEvent::Error(status)))) if status.code == 410 => (
                    Some(Err(DaoError::WatchExpired(status.message))),
                    State::Ended,
                ),
                Ok(Some(Ok(ApiEvent::Error(status)))) => (
                    Some(Err(DaoError::Api {
                        code: status.code,
                        message: status.message,
                    })),
                    State::Ended,
                ),
                Ok(Some(Ok(ApiEvent::Added(o)))) => self.change(o, WatchEvent::Added, events),
                Ok(Some(Ok(ApiEvent::Modified(o)))) => self.change(o, WatchEvent::Modified, events),
                Ok(Some(Ok(ApiEvent::Deleted(o)))) => self.change(o, WatchEvent::Deleted, events),
            },
            State::Ended => (None, State::Ended),
        }
    }

    /// A change the apiserver sent: relayed as `event` if the caller may see the object; the
    /// watch has now seen the object's resourceVersion either way.
    fn change(
        &self,
        object: K,
        event: fn(Arc<R>) -> WatchEvent<R>,
        events: ApiEvents<K>,
    ) -> Step<K, R> {
        let resource_version = match object_version(&object) {
            Ok(rv) => rv,
            Err(e) => return (Some(Err(e)), State::Ended),
        };
        let sent = admitted(self.namespace.as_deref(), &self.visible, &object)
            .then(|| Ok(event((self.project)(object))));
        (
            sent,
            State::Watching {
                resource_version,
                events,
            },
        )
    }

    /// The relay's events from `state` on, until it ends.
    fn into_stream(self, state: State<K>) -> WatchStream<R> {
        futures::stream::unfold((self, state), |(relay, mut state)| async move {
            loop {
                if matches!(state, State::Ended) {
                    return None;
                }
                let (event, next) = relay.step(state).await;
                state = next;
                if let Some(event) = event {
                    return Some((event, (relay, state)));
                }
            }
        })
        .boxed()
    }
}

/// The resourceVersion of an object a watch sent, which the apiserver always sets: the next
/// watch request starts from it.
fn object_version<K: Namespaced>(object: &K) -> Result<String, DaoError> {
    required(
        object.meta().resource_version.clone(),
        || format!("a watch event's {}", K::kind(&())),
        "metadata.resourceVersion",
    )
}

impl LiveSource {
    /// The list `q` selects as Added events, Synced, then the apiserver's watch from the
    /// list's resourceVersion; from a version, Synced at once and the apiserver's watch from
    /// it. 410 Gone from the apiserver ends it with WatchExpired.
    pub(super) async fn watch_with<K, R>(
        &self,
        q: &ListQuery,
        from: ReadAt,
        project: fn(K) -> Arc<R>,
    ) -> Result<WatchStream<R>, DaoError>
    where
        K: Namespaced + Send + 'static,
        R: Send + Sync + 'static,
    {
        let listed = match from {
            ReadAt::Newest | ReadAt::NotOlderThan(_) => {
                let list = self.list_objects::<K>(q, from).await?;
                State::Listed {
                    resource_version: list_version(&list)?,
                    items: list.items.into_iter(),
                }
            }
            ReadAt::Version(version) => State::Listed {
                resource_version: version.to_string(),
                items: Vec::new().into_iter(),
            },
        };
        let mut params = WatchParams::default().timeout(WATCH_REQUEST_SECS);
        if !q.labels.is_empty() {
            params = params.labels(&q.labels.to_string());
        }
        if !q.fields.is_empty() {
            params = params.fields(&q.fields.to_string());
        }
        let relay = Relay {
            api: self.api::<K>(q.namespace.as_deref()),
            params,
            project,
            visible: q.visible.clone(),
            namespace: q.namespace.clone(),
            idle_timeout: Duration::from_secs(WATCH_REQUEST_SECS.into()) + IDLE_MARGIN,
        };
        Ok(relay.into_stream(listed))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::StreamExt;
    use http::{Request, Response};
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    use kube::Client;
    use kube::client::Body;
    use model::Typed;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::super::LiveSource;
    use super::super::mock::{list, source_answering, watch_lines};
    use super::*;
    use crate::WorkloadSource;
    use model::DeploymentRecord;
    use model::fixtures::mk_deployment;

    fn deployment(name: &str, rv: &str) -> Value {
        let mut d =
            serde_json::to_value(mk_deployment("ns", name, name, &[("app", "web")])).unwrap();
        d["metadata"]["resourceVersion"] = json!(rv);
        d
    }

    const WATCH: &str = "/apis/apps/v1/namespaces/ns/deployments?&watch=true&timeoutSeconds=290&labelSelector=app%3Dweb&allowWatchBookmarks=true&resourceVersion=";

    fn gone() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
               "code": 410, "message": "too old resource version: 80 (95)"})
    }

    fn web_query() -> ListQuery {
        ListQuery {
            namespace: Some("ns".into()),
            labels: "app=web".parse().unwrap(),
            ..Default::default()
        }
    }

    fn shown<R: std::fmt::Debug>(
        events: &[Result<WatchEvent<R>, DaoError>],
        name: impl Fn(&R) -> String,
    ) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Ok(WatchEvent::Added(d)) => format!("ADDED {}", name(d)),
                Ok(WatchEvent::Synced { resource_version }) => {
                    format!("SYNCED @{resource_version}")
                }
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("ERR {e}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_live_watch_lists_then_watches_from_the_lists_version_and_resumes_after_bookmarks() {
        let (source, server) = source_answering(vec![
            (
                "/apis/apps/v1/namespaces/ns/deployments?&labelSelector=app%3Dweb".to_string(),
                200,
                serde_json::to_vec(&list("DeploymentList", vec![deployment("web", "70")])).unwrap(),
            ),
            (
                format!("{WATCH}77"),
                200,
                watch_lines(&[
                    json!({"type": "ADDED", "object": deployment("api", "78")}),
                    json!({"type": "BOOKMARK", "object": {"kind": "Deployment", "apiVersion": "apps/v1",
                                                          "metadata": {"resourceVersion": "80"}}}),
                ]),
            ),
            // The apiserver ended that watch request: made again from the bookmark's version.
            (
                format!("{WATCH}80"),
                200,
                watch_lines(&[json!({"type": "ERROR", "object": gone()})]),
            ),
        ]);
        let events: Vec<_> = source
            .watch::<DeploymentRecord>(DeploymentRecord::resource(), &web_query(), ReadAt::Newest)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(
            shown(&events, |d| format!(
                "{}@{}",
                d.key.name, d.resource_version
            )),
            [
                "ADDED web@70",
                "SYNCED @77",
                "ADDED api@78",
                "ERR the watch missed changes (too old resource version: 80 (95)): start it again",
            ]
        );
        server.await.unwrap();
    }

    /// A response body that sends `first`, then stays open and silent: a connection the
    /// apiserver's end of which is gone without a word.
    type Silent = StreamBody<BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

    fn silent_after(first: Vec<u8>) -> Silent {
        StreamBody::new(
            futures::stream::iter([Ok(Frame::data(Bytes::from(first)))])
                .chain(futures::stream::pending())
                .boxed(),
        )
    }

    /// Answers the next request, which must start with `expected`; when it came.
    async fn answer(
        handle: &mut mock::Handle<Request<Body>, Response<Silent>>,
        expected: String,
        body: Silent,
    ) -> tokio::time::Instant {
        let (request, send) = handle.next_request().await.expect("a request");
        let uri = request.uri().to_string();
        assert!(uri.starts_with(&expected), "expected {expected}, got {uri}");
        send.send_response(Response::new(body));
        tokio::time::Instant::now()
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_watch_is_made_again_from_its_last_version_after_the_idle_timeout() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Silent>>();
        let started = tokio::time::Instant::now();
        let server = tokio::spawn(async move {
            let list = serde_json::to_vec(&list("DeploymentList", vec![])).unwrap();
            answer(
                &mut handle,
                "/apis/apps/v1/namespaces/ns/deployments?&labelSelector".into(),
                StreamBody::new(futures::stream::iter([Ok(Frame::data(list.into()))]).boxed()),
            )
            .await;
            let first = answer(
                &mut handle,
                format!("{WATCH}77"),
                silent_after(watch_lines(&[
                    json!({"type": "ADDED", "object": deployment("api", "78")}),
                ])),
            )
            .await;
            // Nothing more on that request, not even a bookmark: the relay gives up on it.
            let again = answer(
                &mut handle,
                format!("{WATCH}78"),
                silent_after(watch_lines(&[json!({"type": "ERROR", "object": gone()})])),
            )
            .await;
            again - first
        });
        let source = LiveSource::new(Client::new(service, "default"));
        let watch = source
            .watch::<DeploymentRecord>(DeploymentRecord::resource(), &web_query(), ReadAt::Newest)
            .await
            .unwrap();
        // Without the idle timeout the watch would wait on the silent request for ever.
        let events: Vec<_> = tokio::time::timeout(Duration::from_secs(600), watch.collect())
            .await
            .expect("the silent watch request was never made again");
        assert_eq!(
            shown(&events, |d| d.key.name.clone()),
            [
                "SYNCED @77",
                "ADDED api",
                "ERR the watch missed changes (too old resource version: 80 (95)): start it again",
            ]
        );
        let silence = server.await.unwrap();
        assert_eq!(
            silence,
            Duration::from_secs(295),
            "made again after 290 s + 5 s"
        );
        assert!(started.elapsed() >= silence);
    }

    #[tokio::test]
    async fn a_watch_event_without_a_resource_version_ends_the_watch_saying_so() {
        let mut unversioned = deployment("api", "78");
        unversioned["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        let (source, server) = source_answering(vec![
            (
                "/apis/apps/v1/namespaces/ns/deployments?&labelSelector=app%3Dweb".to_string(),
                200,
                serde_json::to_vec(&list("DeploymentList", vec![])).unwrap(),
            ),
            (
                format!("{WATCH}77"),
                200,
                watch_lines(&[json!({"type": "ADDED", "object": unversioned})]),
            ),
        ]);
        let events: Vec<_> = source
            .watch::<DeploymentRecord>(DeploymentRecord::resource(), &web_query(), ReadAt::Newest)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(
            shown(&events, |d| d.key.name.clone()),
            [
                "SYNCED @77",
                "ERR the Kubernetes API sent a watch event's Deployment without a usable metadata.resourceVersion",
            ]
        );
        server.await.unwrap();
    }
}
