//! Live updates: a list query watched, as the apiserver's watch reports it. Each event is
//! one [`WatchUpdate`] carrying the object as lists answer it; apis writes them.

use std::borrow::Cow;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};

use super::{
    BizError, JsonAnswer, ListRequest, PodView, RecordView, Workloads, object_namespace_of, read_at,
};
use k8sdao::{DaoError, ReadAt, Served, WatchEvent, WorkloadSource};
use model::{PodRecord, Record, Resource, Typed};

/// An object as a watch answers it, whatever its kind.
pub trait View: JsonAnswer + std::fmt::Debug + Send + Sync {
    /// The resourceVersion this object brings a client to.
    fn resource_version(&self) -> &str;
}

impl<R: Record> View for RecordView<R> {
    fn resource_version(&self) -> &str {
        self.0.resource_version()
    }
}

impl View for PodView {
    fn resource_version(&self) -> &str {
        &self.record.resource_version
    }
}

/// A watched object as answered.
#[derive(Debug)]
pub struct WatchedView(Box<dyn View>);

impl WatchedView {
    pub fn resource_version(&self) -> &str {
        self.0.resource_version()
    }
}

impl JsonAnswer for WatchedView {
    fn write_json(&self, out: &mut Vec<u8>) {
        self.0.write_json(out)
    }

    fn json_len(&self) -> usize {
        self.0.json_len()
    }
}

/// One change of a watched selection, as the apiserver's watch reports it; apis writes it.
#[derive(Debug)]
pub enum WatchUpdate {
    Added(WatchedView),
    Modified(WatchedView),
    Deleted(WatchedView),
    /// Every object selected when the watch began has been sent. `access_filtered`: objects
    /// in namespaces the caller may not see were left out, as a list's metadata says.
    Synced {
        resource_version: String,
        access_filtered: bool,
    },
    /// The watch cannot go on; always the last update.
    Failed(BizError),
}

/// The updates of a watch.
pub type WatchUpdates = BoxStream<'static, WatchUpdate>;

/// The update of one event, its record shown as `view` makes it.
async fn update<R, Fut>(
    event: Result<WatchEvent<R>, DaoError>,
    access_filtered: bool,
    view: impl FnOnce(Arc<R>) -> Fut,
) -> WatchUpdate
where
    Fut: Future<Output = Result<WatchedView, BizError>>,
{
    let (change, record): (fn(WatchedView) -> WatchUpdate, _) = match event {
        Ok(WatchEvent::Added(r)) => (WatchUpdate::Added, r),
        Ok(WatchEvent::Modified(r)) => (WatchUpdate::Modified, r),
        Ok(WatchEvent::Deleted(r)) => (WatchUpdate::Deleted, r),
        Ok(WatchEvent::Synced { resource_version }) => {
            return WatchUpdate::Synced {
                resource_version,
                access_filtered,
            };
        }
        Err(e) => return WatchUpdate::Failed(e.into()),
    };
    match view(record).await {
        Ok(view) => change(view),
        Err(e) => WatchUpdate::Failed(e),
    }
}

/// Ends the updates after the first failure: a watch that failed says so once and stops.
fn until_failed(
    updates: impl futures::Stream<Item = WatchUpdate> + Send + 'static,
) -> WatchUpdates {
    updates
        .scan(false, |failed, update| {
            let next = (!*failed).then(|| {
                *failed = matches!(update, WatchUpdate::Failed(_));
                update
            });
            futures::future::ready(next)
        })
        .boxed()
}

impl ListRequest {
    /// Where the watch starts: the current state, or after the client's version.
    fn watch_from(&self) -> Result<ReadAt, BizError> {
        match (read_at(self.resource_version.as_deref())?, self.read_at) {
            (ReadAt::Newest, at) | (at, ReadAt::Newest) => Ok(at),
            _ => Err(BizError::Query(
                "the watch's version is given twice: as resourceVersion and as read_at".into(),
            )),
        }
    }

    /// The query of a watch: a list's selection, without what only a list has.
    fn watch_query(&self, fields: &[Cow<'static, str>]) -> Result<k8sdao::ListQuery, BizError> {
        if self.limit.is_some_and(|l| l > 0)
            || self
                .continue_token
                .as_deref()
                .is_some_and(|t| !t.is_empty())
            || self.sort.as_deref().is_some_and(|s| !s.is_empty())
        {
            return Err(BizError::Query(
                "limit, continue and sort do not apply to watch=true: a watch sends every selected object, then each change".into(),
            ));
        }
        self.query(fields)
    }
}

impl<S: WorkloadSource + 'static> Workloads<S> {
    /// The objects of `resource` the request selects, then each change to that set.
    pub async fn watch<R: Served>(
        &self,
        resource: &Resource,
        req: &ListRequest,
    ) -> Result<WatchUpdates, BizError> {
        let filtered = req.visibility.namespaces.is_restricted();
        let events = self.watch_records::<R>(resource, req).await?;
        Ok(until_failed(events.then(move |event| {
            update(event, filtered, |record| async {
                Ok(WatchedView(Box::new(RecordView(record))))
            })
        })))
    }

    /// The events of [`Workloads::watch`] with the records themselves, for answers built from
    /// more of a record than its view (the Kubernetes API's objects and Table rows).
    pub async fn watch_records<R: Served>(
        &self,
        resource: &Resource,
        req: &ListRequest,
    ) -> Result<k8sdao::WatchStream<R>, BizError> {
        let query = req.watch_query(&resource.fields)?;
        Ok(self
            .source
            .watch::<R>(resource, &query, req.watch_from()?)
            .await?)
    }

    /// The Pods the request selects, then each change to that set; each Pod names its
    /// Deployment as in lists.
    pub async fn watch_pods(self: &Arc<Self>, req: &ListRequest) -> Result<WatchUpdates, BizError> {
        let query = req.watch_query(&PodRecord::resource().fields)?;
        let events = self
            .source
            .watch::<PodRecord>(PodRecord::resource(), &query, req.watch_from()?)
            .await?;
        Ok(self.pod_updates(events, query.visible.is_restricted()))
    }

    /// The Pods the Deployment controls, then each change to that set. Membership is read
    /// through ReplicaSets as they are now, so this watch cannot be resumed from a version:
    /// a client asking to is told to start again (410), as after any expired version.
    pub async fn watch_pods_of_deployment(
        self: &Arc<Self>,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<WatchUpdates, BizError> {
        let ns = object_namespace_of(namespace, name)?;
        if let ReadAt::Version(version) = read_at(resource_version)? {
            return Err(BizError::Source(DaoError::WatchExpired(format!(
                "the pods of a Deployment are watched from their current state, not resumed after resourceVersion {version}"
            ))));
        }
        let events = self.source.watch_pods_of_deployment(ns, name).await?;
        Ok(self.pod_updates(events, false))
    }

    fn pod_updates(
        self: &Arc<Self>,
        events: k8sdao::WatchStream<PodRecord>,
        access_filtered: bool,
    ) -> WatchUpdates {
        let workloads = self.clone();
        until_failed(events.then(move |event| {
            let workloads = workloads.clone();
            async move {
                update(event, access_filtered, |record| async move {
                    let view = workloads.pod_view(record).await?;
                    Ok(WatchedView(Box::new(view)))
                })
                .await
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use confk8s::Delta;
    use futures::StreamExt;

    use super::*;
    use k8scache::fixtures::filled_caches;
    use k8sdao::{CacheSource, Source};
    use model::DeploymentRecord;
    use model::fixtures::{mk_deployment, mk_pod, mk_replicaset};

    fn workloads() -> (Arc<Workloads<Source>>, Arc<k8scache::Caches>) {
        let caches = filled_caches();
        let source = CacheSource::new(caches.clone(), Vec::new());
        (
            Arc::new(Workloads::new(Source::from_cache(source, None))),
            caches,
        )
    }

    fn request(ns: &str, labels: Option<&str>) -> ListRequest {
        ListRequest {
            namespace: Some(ns.to_string()),
            label_selector: labels.map(str::to_string),
            ..Default::default()
        }
    }

    /// An update as the tests read it: its kind and `{"type","object"}` JSON (a failure's
    /// object is its kind of failure and message; apis writes the real frames).
    struct Shown {
        event: &'static str,
        json: String,
    }

    /// The next update, failing if none comes within a second.
    async fn next_frame(frames: &mut WatchUpdates) -> Shown {
        let update = tokio::time::timeout(std::time::Duration::from_secs(1), frames.next())
            .await
            .expect("an update within a second")
            .expect("the watch goes on");
        let (event, object) = match update {
            WatchUpdate::Added(v) => ("ADDED", view_json(&v)),
            WatchUpdate::Modified(v) => ("MODIFIED", view_json(&v)),
            WatchUpdate::Deleted(v) => ("DELETED", view_json(&v)),
            WatchUpdate::Synced {
                resource_version,
                access_filtered,
            } => (
                "BOOKMARK",
                serde_json::json!({"resourceVersion": resource_version,
                    "accessFiltered": access_filtered}),
            ),
            WatchUpdate::Failed(e) => (
                "ERROR",
                serde_json::json!({"failure": format!("{:?}", e.failure()), "error": e.to_string()}),
            ),
        };
        let json = serde_json::json!({"type": event, "object": object}).to_string();
        Shown { event, json }
    }

    fn view_json(view: &WatchedView) -> serde_json::Value {
        let mut out = Vec::new();
        view.write_json(&mut out);
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["resourceVersion"], view.resource_version());
        json
    }

    /// The next update as (type, object name or the whole object), failing if none is ready.
    async fn next(frames: &mut WatchUpdates) -> (&'static str, serde_json::Value) {
        let frame = next_frame(frames).await;
        let json: serde_json::Value = serde_json::from_str(&frame.json).unwrap();
        assert_eq!(json["type"], frame.event);
        let object = json["object"].clone();
        let shown = match object.get("name") {
            Some(name) => name.clone(),
            None => object,
        };
        (frame.event, shown)
    }

    #[tokio::test]
    async fn a_watch_sends_the_selection_then_changes_in_and_out_of_it() {
        let (workloads, caches) = workloads();
        let mut frames = workloads
            .watch_pods(&request("ns-a", Some("app=web")))
            .await
            .unwrap();
        assert_eq!(next(&mut frames).await, ("ADDED", "web-1a2b-x".into()));
        assert_eq!(next(&mut frames).await, ("ADDED", "web-1a2b-y".into()));
        let (kind, bookmark) = next(&mut frames).await;
        assert_eq!(kind, "BOOKMARK");
        assert!(bookmark["resourceVersion"].is_string(), "{bookmark}");

        // Outside the selection: nothing. Relabelled into it: Added; changed: Modified;
        // relabelled out of it: Deleted, as the apiserver's watch says it.
        caches.pods.apply_deltas(&[Delta::Added(mk_pod(
            "ns-b",
            "other",
            None,
            &[("app", "web")],
        ))]);
        caches.pods.apply_deltas(&[Delta::Updated(mk_pod(
            "ns-a",
            "bare",
            None,
            &[("app", "web")],
        ))]);
        assert_eq!(next(&mut frames).await, ("ADDED", "bare".into()));
        caches.pods.apply_deltas(&[Delta::Updated(mk_pod(
            "ns-a",
            "bare",
            None,
            &[("app", "web"), ("v", "2")],
        ))]);
        assert_eq!(next(&mut frames).await, ("MODIFIED", "bare".into()));
        caches.pods.apply_deltas(&[Delta::Updated(mk_pod(
            "ns-a",
            "bare",
            None,
            &[("app", "db")],
        ))]);
        assert_eq!(next(&mut frames).await, ("DELETED", "bare".into()));
        caches
            .pods
            .apply_deltas(&[Delta::Vanished(confk8s::ObjectKey::new(
                "ns-a",
                "web-1a2b-x",
            ))]);
        let frame = next_frame(&mut frames).await;
        assert_eq!(frame.event, "DELETED");
        let json: serde_json::Value = serde_json::from_str(&frame.json).unwrap();
        assert_eq!(json["object"]["name"], "web-1a2b-x");
        assert_eq!(
            json["object"]["deployment"], "web",
            "pods name their Deployment in watches as in lists"
        );
    }

    #[tokio::test]
    async fn a_pod_seen_before_its_replicaset_is_modified_once_the_replicaset_shows() {
        let (workloads, caches) = workloads();
        let mut frames = workloads
            .watch_pods(&request("ns-a", Some("app=api")))
            .await
            .unwrap();
        assert_eq!(next(&mut frames).await.0, "BOOKMARK");
        caches.pods.apply_deltas(&[Delta::Added(mk_pod(
            "ns-a",
            "api-5f-x",
            Some(("api-5f", "rs-api")),
            &[("app", "api")],
        ))]);
        let added = next_frame(&mut frames).await;
        let json: serde_json::Value = serde_json::from_str(&added.json).unwrap();
        assert_eq!(
            (added.event, &json["object"]["deployment"]),
            ("ADDED", &serde_json::Value::Null)
        );
        caches
            .replicasets
            .apply_deltas(&[Delta::Added(mk_replicaset(
                "ns-a",
                "api-5f",
                "rs-api",
                Some(("api", "d-api")),
            ))]);
        let modified = next_frame(&mut frames).await;
        let json: serde_json::Value = serde_json::from_str(&modified.json).unwrap();
        assert_eq!(modified.event, "MODIFIED");
        assert_eq!(json["object"]["name"], "api-5f-x");
        assert_eq!(json["object"]["deployment"], "api");
        // A ReplicaSet's status changing (same owner) concerns no pod.
        caches
            .replicasets
            .apply_deltas(&[Delta::Updated(mk_replicaset(
                "ns-a",
                "api-5f",
                "rs-api",
                Some(("api", "d-api")),
            ))]);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(100), frames.next())
                .await
                .is_err(),
            "nothing more"
        );
    }

    #[tokio::test]
    async fn a_deployments_pods_watch_follows_its_replicasets_not_its_labels() {
        let (workloads, caches) = workloads();
        let mut frames = workloads
            .watch_pods_of_deployment(Some("ns-a"), "web", None)
            .await
            .unwrap();
        assert_eq!(next(&mut frames).await, ("ADDED", "web-1a2b-x".into()));
        assert_eq!(next(&mut frames).await, ("ADDED", "web-1a2b-y".into()));
        assert_eq!(next(&mut frames).await.0, "BOOKMARK");
        // Same labels, no owner: not web's.
        caches.pods.apply_deltas(&[Delta::Added(mk_pod(
            "ns-a",
            "impostor",
            None,
            &[("app", "web")],
        ))]);
        // A rollout's new ReplicaSet: its pod may come first, and joins once the ReplicaSet shows.
        caches.pods.apply_deltas(&[Delta::Added(mk_pod(
            "ns-a",
            "web-9z-a",
            Some(("web-9z", "rs-web-2")),
            &[("app", "web")],
        ))]);
        caches
            .replicasets
            .apply_deltas(&[Delta::Added(mk_replicaset(
                "ns-a",
                "web-9z",
                "rs-web-2",
                Some(("web", "d-web")),
            ))]);
        caches
            .pods
            .apply_deltas(&[Delta::Vanished(confk8s::ObjectKey::new(
                "ns-a",
                "web-1a2b-x",
            ))]);
        // Membership is judged when an event is read, so the pod may already count when its
        // own ADDED is read, and the ReplicaSet's arrival then repeats it as MODIFIED.
        let mut seen = Vec::new();
        while seen.last() != Some(&("DELETED", "web-1a2b-x".into())) {
            seen.push(next(&mut frames).await);
        }
        seen.retain(|(kind, _)| *kind != "MODIFIED");
        assert_eq!(
            seen,
            [
                ("ADDED", "web-9z-a".into()),
                ("DELETED", "web-1a2b-x".into())
            ]
        );
        let err = workloads
            .watch_pods_of_deployment(Some("ns-a"), "nope", None)
            .await
            .err()
            .unwrap();
        assert!(
            matches!(err, BizError::Source(DaoError::NotFound { .. })),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_told_to_start_again_and_the_watch_ends() {
        let (workloads, caches) = workloads();
        let mut frames = workloads
            .watch::<DeploymentRecord>(DeploymentRecord::resource(), &request("ns-a", None))
            .await
            .unwrap();
        assert_eq!(next(&mut frames).await, ("ADDED", "web".into()));
        assert_eq!(next(&mut frames).await.0, "BOOKMARK");
        // More changes than the cache buffers, none read meanwhile.
        for i in 0..5000 {
            caches
                .deployments
                .apply_deltas(&[Delta::Added(mk_deployment(
                    "ns-a",
                    &format!("d{i}"),
                    &format!("u{i}"),
                    &[],
                ))]);
        }
        let (kind, error) = next(&mut frames).await;
        assert_eq!(kind, "ERROR");
        assert_eq!(error["failure"], "Gone", "answered 410 as a list would be");
        assert!(
            error["error"].as_str().unwrap().contains("start it again"),
            "{error}"
        );
        let after = tokio::time::timeout(std::time::Duration::from_secs(1), frames.next()).await;
        assert!(
            matches!(after, Ok(None)),
            "the watch ends after the error: {after:?}"
        );
    }

    #[tokio::test]
    async fn a_watch_refuses_what_only_a_list_has_and_bad_selectors() {
        let (workloads, _) = workloads();
        for req in [
            ListRequest {
                limit: Some(2),
                ..Default::default()
            },
            ListRequest {
                sort: Some("name".into()),
                ..Default::default()
            },
            ListRequest {
                continue_token: Some("1.1".into()),
                ..Default::default()
            },
        ] {
            let err = workloads.watch_pods(&req).await.err().unwrap();
            assert!(matches!(err, BizError::Query(_)), "{err}");
        }
        let err = workloads
            .watch_pods(&request("ns-a", Some("app in (")))
            .await
            .err()
            .unwrap();
        assert!(matches!(err, BizError::Selector(_)), "{err}");
        let err = workloads
            .watch::<DeploymentRecord>(
                DeploymentRecord::resource(),
                &ListRequest {
                    field_selector: Some("spec.nodeName=n".into()),
                    ..Default::default()
                },
            )
            .await
            .err()
            .unwrap();
        assert!(matches!(err, BizError::FieldSelector(_)), "{err}");
    }

    #[tokio::test]
    async fn a_filtered_watch_sends_nothing_from_other_namespaces_even_new_ones() {
        let (workloads, caches) = workloads();
        let mut frames = workloads
            .watch_pods(&ListRequest {
                visibility: crate::Visibility {
                    namespaces: crate::NamespaceFilter::only(["ns-b".to_string()]),
                },
                ..Default::default()
            })
            .await
            .unwrap();
        let (kind, bookmark) = next(&mut frames).await;
        assert_eq!(kind, "BOOKMARK", "ns-a's pods are not sent");
        assert_eq!(bookmark["accessFiltered"], true);
        for ns in ["ns-a", "ns-new"] {
            caches
                .pods
                .apply_deltas(&[Delta::Added(mk_pod(ns, "hidden", None, &[]))]);
        }
        caches
            .pods
            .apply_deltas(&[Delta::Added(mk_pod("ns-b", "shown", None, &[]))]);
        let frame = next_frame(&mut frames).await;
        let json: serde_json::Value = serde_json::from_str(&frame.json).unwrap();
        assert_eq!(
            (
                frame.event,
                &json["object"]["namespace"],
                &json["object"]["name"]
            ),
            ("ADDED", &"ns-b".into(), &"shown".into())
        );
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(100), frames.next())
                .await
                .is_err(),
            "nothing more"
        );
    }
}
