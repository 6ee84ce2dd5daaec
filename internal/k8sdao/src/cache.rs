use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use confk8s::{InformerState, InformerStatus};

use futures::StreamExt;
use tokio::sync::broadcast::error::RecvError;

use super::{
    DaoError, ListQuery, Listing, LiveSource, MemberChange, NamespaceFilter, ReadAt, Served,
    StateStamp, WatchEvent, WatchStream, WorkloadSource, WriteEffect, member_event,
};
use selector::{FieldOperator, Operator};

use k8scache::{Cache, CacheState, Caches, Change, HistoryError, Index, Indexed, Term};
use model::{DeploymentRecord, EventDto, Keyed, ObjectKey, PodRecord, Resource, Selectable, Typed};

/// The index terms a query requires: one group per equality-like requirement, any term of
/// a group will do. Requirements that no index can answer (!=, notin, exists) are left to the
/// filter that runs over the candidates.
fn required_terms<R: Indexed>(q: &ListQuery) -> Vec<Vec<Term>> {
    let labels = q
        .labels
        .requirements()
        .iter()
        .filter_map(|r| match r.operator() {
            Operator::Equals | Operator::DoubleEquals | Operator::In => Some(
                r.values()
                    .iter()
                    .map(|v| Term::Label(r.key().to_string(), v.clone()))
                    .collect(),
            ),
            _ => None,
        });
    let fields = q.fields.terms().iter().filter_map(|t| {
        let field = R::INDEXED_FIELDS.iter().find(|f| **f == t.field())?;
        match t.operator() {
            FieldOperator::Equals | FieldOperator::DoubleEquals => {
                Some(vec![Term::Field(field, t.value().to_string())])
            }
            FieldOperator::NotEquals => None,
        }
    });
    labels.chain(fields).collect()
}

/// Whether `q` selects the record: its namespace, the caller's namespaces, labels and fields.
pub(crate) fn selects<R: Keyed + Selectable>(q: &ListQuery, r: &R) -> bool {
    q.namespace
        .as_deref()
        .is_none_or(|ns| r.key().namespace == ns)
        && q.visible.allows(&r.key().namespace)
        && q.labels.matches(r.labels())
        && q.fields.matches(|f| r.field(f))
}

/// The records of `index` that `q` selects, in (namespace, name) order: the index's
/// candidates for the query's equality requirements when it has any, else a scan of the
/// namespace asked for, or of each namespace the caller may see (in order, so the result is
/// in order too), or of all.
fn select<R: Indexed + Selectable>(index: &Index<R>, q: &ListQuery) -> Vec<Arc<R>> {
    let matches = |r: &&Arc<R>| selects(q, r.as_ref());
    match (
        index.candidates(q.namespace.as_deref(), &required_terms::<R>(q)),
        &q.visible,
    ) {
        (Some(candidates), _) => candidates.into_iter().filter(matches).cloned().collect(),
        (None, NamespaceFilter::Only(visible)) if q.namespace.is_none() => visible
            .iter()
            .flat_map(|ns| index.in_namespace(Some(ns)))
            .filter(matches)
            .cloned()
            .collect(),
        // Every record of the range is selected: nothing to read of each but itself.
        (None, NamespaceFilter::All) if q.labels.is_empty() && q.fields.is_empty() => index
            .in_namespace(q.namespace.as_deref())
            .cloned()
            .collect(),
        (None, _) => index
            .in_namespace(q.namespace.as_deref())
            .filter(matches)
            .cloned()
            .collect(),
    }
}

/// Whether a cache at `current` has reached `version`, as a read not older than it needs.
fn reached(current: Option<u64>, version: u64) -> Result<(), HistoryError> {
    match current {
        Some(current) if current >= version => Ok(()),
        current => Err(HistoryError::Ahead {
            requested: version,
            current,
        }),
    }
}

/// The records `q` selects in the state at `at`: the index's, with each object changed since
/// `at` as it was then (the history's), in (namespace, name) order.
fn select_at<R: Indexed + Selectable>(
    state: &CacheState<R>,
    q: &ListQuery,
    at: ReadAt,
) -> Result<Vec<Arc<R>>, HistoryError> {
    let version = match at {
        ReadAt::Version(version) => version,
        ReadAt::Newest => return Ok(select(&state.index, q)),
        ReadAt::NotOlderThan(version) => {
            reached(state.history.current(), version)?;
            return Ok(select(&state.index, q));
        }
    };
    let then = state.history.rewound_to(version)?;
    if then.is_empty() {
        return Ok(select(&state.index, q));
    }
    let mut items: Vec<Arc<R>> = select(&state.index, q)
        .into_iter()
        .filter(|r| !then.contains_key(r.key()))
        .chain(
            then.values()
                .flatten()
                .filter(|r| selects(q, r.as_ref()))
                .map(|r| Arc::clone(r)),
        )
        .collect();
    items.sort_by(|a, b| a.key().cmp(b.key()));
    Ok(items)
}

/// Whether `cache` (of `resource`) has had its first list. Its version is none until then
/// (no change or bookmark comes before the list), and once set it never goes back: a cache
/// that had it keeps it for good. The built-in kinds are listed before the server starts;
/// a custom resource is served from the moment its CRD is seen, and until its list is in,
/// an empty answer at no version would be a state the kind was never in.
fn listed<R: Indexed>(resource: &Resource, cache: &Cache<R>) -> Result<(), DaoError> {
    match cache.read().history.current() {
        Some(_) => Ok(()),
        None => Err(DaoError::Initializing {
            resource: resource.name.to_string(),
            waited: cache.age(),
        }),
    }
}

/// How long a read at a version this replica has not seen yet waits for its watches to bring
/// it: replicas hear of each change within moments of each other, and the apiserver's watch
/// cache waits as long for etcd's.
const CATCH_UP: Duration = Duration::from_secs(3);

/// A resourceVersion as answered; empty only for a cache never listed, which no read
/// answers ([`listed`]).
fn version_string(version: Option<u64>) -> String {
    version.map(|v| v.to_string()).unwrap_or_default()
}

/// What a cache change is to a watch of `q`, as the apiserver's watch reports it: selected
/// before and after, Modified; only after, Added; only before, Deleted; neither, nothing.
fn watch_event<R: Keyed + Selectable>(q: &ListQuery, change: Change<R>) -> Option<WatchEvent<R>> {
    match change {
        Change::Applied { old, new } => {
            let was = old.as_deref().is_some_and(|o| selects(q, o));
            match (was, selects(q, new.as_ref())) {
                (false, true) => Some(WatchEvent::Added(new)),
                (true, true) => Some(WatchEvent::Modified(new)),
                (true, false) => Some(WatchEvent::Deleted(new)),
                (false, false) => None,
            }
        }
        Change::Deleted { old, last } => {
            selects(q, old.as_ref()).then_some(WatchEvent::Deleted(last))
        }
    }
}

/// A cache change as a membership watch judges it: the record as it is now, or as it was.
impl<R> From<Change<R>> for MemberChange<R> {
    fn from(change: Change<R>) -> Self {
        match change {
            Change::Applied { new, .. } => MemberChange::Applied(new),
            Change::Deleted { last, .. } => MemberChange::Deleted(last),
        }
    }
}

/// Reads from the informer caches: no request ever reaches the apiserver.
pub struct CacheSource {
    caches: Arc<Caches>,
    statuses: Vec<Arc<InformerStatus>>,
    /// Set once every informer of `statuses` has synced, which none undoes: from then on a
    /// read checks this flag, not each informer.
    all_synced: AtomicBool,
    /// Events are not cached; this reads them when there is a client.
    events: Option<LiveSource>,
}

impl CacheSource {
    /// `statuses` are the informers feeding `caches`; reads fail with NotSynced until all synced.
    pub fn new(caches: Arc<Caches>, statuses: Vec<Arc<InformerStatus>>) -> Self {
        CacheSource {
            caches,
            statuses,
            all_synced: AtomicBool::new(false),
            events: None,
        }
    }

    pub fn with_events(mut self, live: LiveSource) -> Self {
        self.events = Some(live);
        self
    }

    pub(crate) fn caches(&self) -> Arc<Caches> {
        self.caches.clone()
    }

    pub fn cached_objects(&self) -> usize {
        self.caches.len()
    }

    pub fn states(&self) -> Vec<InformerState> {
        self.statuses.iter().map(|s| s.state()).collect()
    }

    fn ensure_synced(&self) -> Result<(), DaoError> {
        if self.all_synced.load(Ordering::Acquire) {
            return Ok(());
        }
        let kinds: Vec<String> = self
            .statuses
            .iter()
            .filter(|s| !s.is_synced())
            .map(|s| s.kind().to_string())
            .collect();
        if kinds.is_empty() {
            self.all_synced.store(true, Ordering::Release);
            Ok(())
        } else {
            Err(DaoError::NotSynced { kinds })
        }
    }

    /// Ready to read `cache` (of `resource`) at `at`: synced, listed, and, for a version,
    /// caught up with it.
    async fn ready_at<R: Indexed>(
        &self,
        resource: &Resource,
        cache: &Cache<R>,
        at: ReadAt,
    ) -> Result<(), DaoError> {
        self.ensure_synced()?;
        listed(resource, cache)?;
        if let ReadAt::Version(version) | ReadAt::NotOlderThan(version) = at {
            // Past the wait, the read itself says how far behind the cache still is.
            cache.reached(version, CATCH_UP).await;
        }
        Ok(())
    }

    /// The cache of `resource`, if it is still served.
    fn cache_of<R: Served>(&self, resource: &Resource) -> Result<Arc<Cache<R>>, DaoError> {
        self.caches
            .of::<R>(resource)
            .ok_or_else(|| DaoError::NotServed {
                resource: resource.name.to_string(),
            })
    }

    async fn listing<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<R>, DaoError> {
        let cache = self.cache_of::<R>(resource)?;
        self.ready_at(resource, &cache, at).await?;
        let state = cache.read();
        Ok(Listing {
            items: select_at(&state, q, at)?,
            resource_version: version_string(state.history.current()),
        })
    }

    /// What `initial` picks from the cache now, as Added events (from a version: the changes
    /// after it instead), then Synced, then what the mapper `follow` makes from the initial
    /// records turns each change into. A watcher that falls more than the cache buffers
    /// behind gets WatchExpired.
    async fn watch_with<R, F>(
        &self,
        resource: &Resource,
        cache: &Cache<R>,
        from: ReadAt,
        initial: impl FnOnce(&Index<R>) -> Vec<Arc<R>>,
        follow: impl FnOnce(&[Arc<R>]) -> F,
    ) -> Result<WatchStream<R>, DaoError>
    where
        R: Indexed + Send + Sync + 'static,
        F: FnMut(Change<R>) -> Option<WatchEvent<R>> + Send + 'static,
    {
        self.ready_at(resource, cache, from).await?;
        let (initial, missed, version, changes) = {
            let (state, changes) = cache.read_and_watch();
            let (initial, missed) = match from {
                ReadAt::Newest => (initial(&state.index), Vec::new()),
                ReadAt::NotOlderThan(version) => {
                    reached(state.history.current(), version)?;
                    (initial(&state.index), Vec::new())
                }
                ReadAt::Version(version) => (
                    Vec::new(),
                    state
                        .history
                        .after(version)?
                        .map(|(_, change)| change.clone())
                        .collect(),
                ),
            };
            (initial, missed, state.history.current(), changes)
        };
        let mut to_event = follow(&initial);
        let synced = WatchEvent::Synced {
            resource_version: version_string(version),
        };
        let initial: Vec<_> = initial
            .into_iter()
            .map(WatchEvent::Added)
            .chain(missed.into_iter().filter_map(&mut to_event))
            .chain([synced])
            .map(Ok)
            .collect();
        let changes = futures::stream::unfold(Some((changes, to_event)), |state| async move {
            let (mut changes, mut to_event) = state?;
            loop {
                match changes.recv().await {
                    Ok(change) => {
                        if let Some(event) = to_event(change) {
                            return Some((Ok(event), Some((changes, to_event))));
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        let why = format!("{missed} changes came faster than they were read");
                        return Some((Err(DaoError::WatchExpired(why)), None));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        });
        Ok(futures::stream::iter(initial).chain(changes).boxed())
    }

    fn record<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        self.ensure_synced()?;
        let cache = self.cache_of::<R>(resource)?;
        listed(resource, &cache)?;
        cache
            .get(&resource.key_parts(namespace, name))
            .ok_or_else(|| DaoError::NotFound {
                kind: resource.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }
}

impl CacheSource {
    /// Whether the cache shows `effect` on the object: true as soon as it does, false if it
    /// still does not after `timeout`. Writes are rare, so polling costs nothing that matters.
    pub(super) async fn settle<R: Served + Typed>(
        &self,
        namespace: &str,
        name: &str,
        effect: WriteEffect,
        timeout: std::time::Duration,
    ) -> bool {
        let key = R::key_of(namespace, name);
        let Some(cache) = self.caches.of::<R>(R::resource()) else {
            return true;
        };
        // A version that is not a number compares as no version: never as recent as the write.
        let version = |rv: &str| rv.parse::<u64>().ok();
        let shows = || {
            let current = cache.get(&key).map(|r| version(r.resource_version()));
            match (effect, current) {
                (WriteEffect::Unversioned, _) => true,
                (WriteEffect::Gone, current) => current.is_none(),
                (WriteEffect::Version(want), Some(have)) => have.is_some_and(|have| have >= want),
                (WriteEffect::Version(_), None) => false,
                (WriteEffect::Deleting(want), Some(have)) => have.is_some_and(|have| have >= want),
                (WriteEffect::Deleting(_), None) => true,
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        while !shows() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        true
    }
}

impl WorkloadSource for CacheSource {
    fn stamp(&self, resource: &Resource) -> Option<StateStamp> {
        self.caches.stamp(resource)
    }

    async fn list<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<R>, DaoError> {
        self.listing(resource, q, at).await
    }

    async fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        self.record(resource, namespace, name)
    }

    async fn watch<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> Result<WatchStream<R>, DaoError> {
        let query = q.clone();
        self.watch_with(
            resource,
            &*self.cache_of::<R>(resource)?,
            from,
            |index| select(index, q),
            |_| move |change| watch_event(&query, change),
        )
        .await
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        let deployment =
            self.record::<DeploymentRecord>(DeploymentRecord::resource(), namespace, name)?;
        Ok(self.caches.pods_of_deployment(&deployment))
    }

    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.record::<PodRecord>(PodRecord::resource(), namespace, name)?;
        match &self.events {
            Some(live) => live.events_of_pod(namespace, name).await,
            None => Err(DaoError::Unavailable(
                "no Kubernetes client to read events with".into(),
            )),
        }
    }

    async fn namespaces_holding(&self, resource: &Resource) -> Result<Vec<String>, DaoError> {
        self.ensure_synced()?;
        Ok(self.caches.namespaces_holding(resource))
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<Arc<str>>>, DaoError> {
        Ok(self.caches.deployments_of_pods(pods))
    }

    async fn deployment_of_pod(&self, pod: &Arc<PodRecord>) -> Result<Option<Arc<str>>, DaoError> {
        Ok(self.caches.deployment_of_pod(pod))
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        let deployment =
            self.record::<DeploymentRecord>(DeploymentRecord::resource(), namespace, name)?;
        let caches = self.caches.clone();
        self.watch_with(
            PodRecord::resource(),
            &self.caches.pods,
            ReadAt::Newest,
            |pods| self.caches.owned_pods(pods, &deployment.uid),
            |initial| {
                let mut members: HashSet<ObjectKey> =
                    initial.iter().map(|p| p.key.clone()).collect();
                let uid = deployment.uid.clone();
                move |change: Change<PodRecord>| {
                    member_event(&mut members, change.into(), |p| caches.controls(&uid, p))
                }
            },
        )
        .await
    }
}
