//! In-memory caches of Deployments, Pods and ReplicaSet metadata, fed by the informers.
//! Each is an [`Index`] behind a lock; a batch of deltas (a whole relist included) is applied
//! under one write lock, so readers see either the old state or the new one. Each applied
//! change is also broadcast, under that lock, to whoever watches the cache (live updates),
//! and kept in the cache's bounded [`History`], by version, for watches that resume and for
//! lists paged at an earlier version.

mod history;
mod index;

use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use confk8s::{Delta, Handler, RelistBatch, Sent};
use tokio::sync::{broadcast, watch};

pub use history::{History, HistoryError, StateStamp};
pub use index::{Index, Indexed, Term};

use model::{
    DeploymentRecord, IngressRecord, KeyParts, Keyed, Kind, NamespaceRecord, ObjectKey, Owner,
    PodRecord, Record, ReplicaSetRecord, Resource, ServiceRecord, Typed,
};

mod generic;

pub use generic::{AsGeneric, Registered};

/// A record type the caches hold: where the cache of `resource` is among [`Caches`], if it
/// is served (a typed kind's always is; its resource names nothing more).
pub trait Cached: Record + Indexed + Sized {
    fn cache(caches: &Caches, resource: &Resource) -> Option<Arc<Cache<Self>>>;
}

/// The caches of every kind: one field each, its [`Cached`] impl, its count and the
/// namespaces holding it, all from one list.
macro_rules! caches {
    ($($field:ident: $record:ty,)*) => {
        /// One cache per kind, and the relations between them.
        #[derive(Debug)]
        pub struct Caches {
            $(pub $field: Arc<Cache<$record>>,)*
            /// The caches of the resources served by generic records, by name.
            generic: generic::Resources,
            history: usize,
        }

        $(impl Cached for $record {
            fn cache(caches: &Caches, _resource: &Resource) -> Option<Arc<Cache<Self>>> {
                Some(caches.$field.clone())
            }
        })*

        impl Caches {
            fn empty(history: usize) -> Caches {
                Caches {
                    $($field: Arc::new(Cache::new(history)),)*
                    generic: generic::Resources::default(),
                    history,
                }
            }

            /// Objects held, of every kind: a read lock per cache, nothing copied.
            pub fn len(&self) -> usize {
                0 $(+ self.$field.len())* + self.generic.len()
            }

            /// Whether the cache of `resource` is at `version` or later, waiting up to
            /// `within` for it ([`Cache::reached`]); true when no cache keeps `resource`,
            /// since no read from memory can then miss anything.
            pub async fn reached(&self, resource: &Resource, version: u64, within: Duration) -> bool {
                $(if resource.typed() == Some(<$record as Typed>::KIND) {
                    return self.$field.reached(version, within).await;
                })*
                match self.generic.cache(resource) {
                    Some(cache) => cache.reached(version, within).await,
                    None => true,
                }
            }

            /// The stamp of the state the cache of `resource` is in; None when no cache
            /// keeps it or nothing with a version has arrived yet. One read lock.
            pub fn stamp(&self, resource: &Resource) -> Option<StateStamp> {
                $(if resource.typed() == Some(<$record as Typed>::KIND) {
                    return self.$field.read().history.stamp();
                })*
                self.generic
                    .cache(resource)
                    .and_then(|cache| cache.read().history.stamp())
            }

            /// The namespaces holding at least one object of `resource`, in order.
            pub fn namespaces_holding(&self, resource: &Resource) -> Vec<String> {
                $(if resource.typed() == Some(<$record as Typed>::KIND) {
                    return self.$field.read().index.namespaces();
                })*
                self.generic
                    .cache(resource)
                    .map(|cache| cache.read().index.namespaces())
                    .unwrap_or_default()
            }
        }
    };
}

caches! {
    deployments: DeploymentRecord,
    pods: PodRecord,
    replicasets: ReplicaSetRecord,
    services: ServiceRecord,
    ingresses: IngressRecord,
    namespaces: NamespaceRecord,
}

/// One change to a cache, as its watchers receive it.
#[derive(Debug)]
pub enum Change<R> {
    /// `old` is the record `new` replaced; None when the object is new to the cache.
    Applied { old: Option<Arc<R>>, new: Arc<R> },
    /// `old` is the record the cache held; `last` the object as it was deleted, whose
    /// resourceVersion is the deletion's (the same record as `old` when a relist found it
    /// gone, with no version of its own).
    Deleted { old: Arc<R>, last: Arc<R> },
}

impl<R: Keyed> Change<R> {
    pub fn key(&self) -> &ObjectKey {
        match self {
            Change::Applied { new, .. } => new.key(),
            Change::Deleted { old, .. } => old.key(),
        }
    }

    /// The record before the change; None if the object was new.
    pub fn before(&self) -> Option<&Arc<R>> {
        match self {
            Change::Applied { old, .. } => old.as_ref(),
            Change::Deleted { old, .. } => Some(old),
        }
    }
}

// Not derived: that would require `R: Clone`, and only the `Arc`s are cloned.
impl<R> Clone for Change<R> {
    fn clone(&self) -> Self {
        match self {
            Change::Applied { old, new } => Change::Applied {
                old: old.clone(),
                new: new.clone(),
            },
            Change::Deleted { old, last } => Change::Deleted {
                old: old.clone(),
                last: last.clone(),
            },
        }
    }
}

/// How many changes a watcher may fall behind before it is told to start again: enough for
/// bursts (a Deployment scaled by hundreds), small beside a relist of a large cluster.
const CHANGES_BUFFERED: usize = 4096;

/// Changes kept per kind for resumed watches and lists paged across replicas, unless
/// configured otherwise: a few minutes of a busy cluster's churn.
pub const HISTORY_CAPACITY: usize = 10_000;

/// Called with each commit's changes, after the commit: how one cache tells another.
type OnCommit<R> = Box<dyn Fn(&[Change<R>]) + Send + Sync>;

/// What one cache holds, under one lock: the records, and the recent changes that lead to them.
#[derive(Debug)]
pub struct CacheState<R> {
    pub index: Index<R>,
    pub history: History<R>,
}

pub struct Cache<R> {
    state: RwLock<CacheState<R>>,
    changes: broadcast::Sender<Change<R>>,
    /// The history's current version, for readers waiting for this cache to catch up.
    version: watch::Sender<Option<u64>>,
    on_commit: OnceLock<OnCommit<R>>,
    /// When it was made: until its first list, how long its kind has waited for one.
    made: Instant,
}

impl<R> std::fmt::Debug for Cache<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("watchers", &self.changes.receiver_count())
            .finish_non_exhaustive()
    }
}

impl<R> Cache<R> {
    /// An empty cache keeping `history` changes.
    pub fn new(history: usize) -> Self {
        Cache {
            state: RwLock::new(CacheState {
                index: Index::default(),
                history: History::new(history),
            }),
            changes: broadcast::channel(CHANGES_BUFFERED).0,
            version: watch::Sender::new(None),
            on_commit: OnceLock::new(),
            made: Instant::now(),
        }
    }

    /// How long ago it was made: for a cache not listed yet, how long its kind has been
    /// waiting for its first list.
    pub fn age(&self) -> Duration {
        self.made.elapsed()
    }
}

/// One write to a cache, as the informer's deltas amount to.
enum Write<R> {
    /// Added or updated.
    Apply(Arc<R>),
    /// Deleted, as the watch told it: the object as deleted.
    Delete(Arc<R>),
    /// Absent from a relist: only the key is known.
    Vanish(ObjectKey),
}

impl<R: Record> Write<R> {
    /// Builds the record outside any lock, with `record`.
    fn of<O>(delta: &Delta<O>, record: fn(&O) -> Arc<R>) -> Self {
        match delta {
            Delta::Added(o) | Delta::Updated(o) => Write::Apply(record(o)),
            Delta::Deleted(o) => Write::Delete(record(o)),
            Delta::Vanished(key) => Write::Vanish(R::key_of(&key.namespace, &key.name)),
        }
    }
}

/// The record of an object as the apiserver sent it, keeping the sent JSON.
fn record_of_sent<R: Typed>(sent: &Sent<R::Object>) -> Arc<R> {
    R::from_sent(&sent.object, sent.json().as_bytes())
}

/// A resourceVersion as the history orders it; None if it is not a number.
fn version_of<R: Record>(record: &R) -> Option<u64> {
    record.resource_version().parse().ok()
}

impl<R: Indexed> Cache<R> {
    /// A read view; hold it briefly; clone out the `Arc`s you need.
    pub fn read(&self) -> RwLockReadGuard<'_, CacheState<R>> {
        // Index updates cannot panic half-way, so a poisoned lock still guards a valid index.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheState<R>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A read view and every change made after it. Changes are sent under the write lock, so
    /// the view and the changes neither overlap nor leave a gap.
    pub fn read_and_watch(
        &self,
    ) -> (
        RwLockReadGuard<'_, CacheState<R>>,
        broadcast::Receiver<Change<R>>,
    ) {
        let state = self.read();
        (state, self.changes.subscribe())
    }

    /// Whether the cache is at `version` or later, waiting up to `within` for it to get there
    /// (another replica may have heard of it a moment earlier).
    pub async fn reached(&self, version: u64, within: Duration) -> bool {
        let mut versions = self.version.subscribe();
        let reached = versions.wait_for(|v| v.is_some_and(|v| v >= version));
        matches!(tokio::time::timeout(within, reached).await, Ok(Ok(_)))
    }

    /// Applies the writes in order under one write lock, telling watchers of each and keeping
    /// each in the history (a relist replaces the history instead), then the `on_commit` hook
    /// of all of them.
    fn commit(&self, writes: Vec<Write<R>>, relist: Option<Option<u64>>)
    where
        R: Record,
    {
        let hook = self.on_commit.get();
        let mut committed = Vec::new();
        let version = {
            let mut state = self.write();
            let watched = self.changes.receiver_count() > 0;
            for write in writes {
                let (version, change) = match write {
                    Write::Apply(new) => (
                        version_of(new.as_ref()),
                        Change::Applied {
                            old: state.index.apply(new.clone()),
                            new,
                        },
                    ),
                    Write::Delete(last) => match state.index.delete(last.key()) {
                        Some(old) => (version_of(last.as_ref()), Change::Deleted { old, last }),
                        None => continue,
                    },
                    Write::Vanish(key) => match state.index.delete(&key) {
                        Some(old) => (
                            None,
                            Change::Deleted {
                                last: old.clone(),
                                old,
                            },
                        ),
                        None => continue,
                    },
                };
                if relist.is_none() {
                    state.history.push(version, &change);
                }
                if hook.is_some() {
                    committed.push(change.clone());
                }
                if watched {
                    // Fails only when the last watcher left meanwhile.
                    let _ = self.changes.send(change);
                }
            }
            if let Some(listed) = relist {
                state.history.relisted(listed);
            }
            state.history.current()
        };
        self.version.send_replace(version);
        if let Some(hook) = hook {
            hook(&committed);
        }
    }

    /// Tells watchers that the records owned by these uids changed, although they did not:
    /// what they are answered with, derived through another cache, did.
    fn touch_owned_by(&self, owner_uids: &[&str]) {
        if self.changes.receiver_count() == 0 {
            return;
        }
        // The write lock orders these after every change already sent.
        let state = self.write();
        for uid in owner_uids {
            for record in state.index.owned_by(uid) {
                let _ = self.changes.send(Change::Applied {
                    old: Some(record.clone()),
                    new: record.clone(),
                });
            }
        }
    }

    pub fn get(&self, key: &dyn KeyParts) -> Option<Arc<R>> {
        self.read().index.get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.read().index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().index.is_empty()
    }

    pub fn apply_deltas(&self, deltas: &[Delta<R::Object>])
    where
        R: Record,
    {
        // Project outside the lock: readers wait only for the map updates.
        let writes = deltas
            .iter()
            .map(|d| Write::of(d, R::from_object))
            .collect();
        self.commit(writes, None);
    }

    /// Nothing changed up to `version`: the cache is at it (see [`History::bookmarked`]).
    pub fn bookmarked(&self, version: &str) {
        let Ok(version) = version.parse() else {
            return;
        };
        let current = {
            let mut state = self.write();
            state.history.bookmarked(version);
            state.history.current()
        };
        self.version.send_replace(current);
    }
}

impl<R> Handler<R::Object> for Cache<R>
where
    R: Record + Indexed,
    R::Object: Send + Sync + 'static,
{
    fn on_deltas(&self, deltas: &[Delta<R::Object>]) {
        self.apply_deltas(deltas);
    }

    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<R::Object>> {
        Box::new(CacheRelist {
            cache: self,
            writes: Vec::new(),
            record: R::from_object,
        })
    }

    fn on_bookmark(&self, version: &str) {
        self.bookmarked(version);
    }
}

/// Feeds a typed cache from a watch of its objects as the apiserver sent them: each record
/// keeps the sent JSON, with the explicit nulls the typed object drops.
pub struct FromSent<R>(Arc<Cache<R>>);

impl<R> FromSent<R> {
    pub fn new(cache: Arc<Cache<R>>) -> Arc<Self> {
        Arc::new(FromSent(cache))
    }
}

impl<R> Handler<Sent<R::Object>> for FromSent<R>
where
    R: Typed + Indexed,
    R::Object: Send + Sync + 'static,
{
    fn on_deltas(&self, deltas: &[Delta<Sent<R::Object>>]) {
        let writes = deltas
            .iter()
            .map(|d| Write::of(d, record_of_sent::<R>))
            .collect();
        self.0.commit(writes, None);
    }

    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<Sent<R::Object>>> {
        Box::new(CacheRelist {
            cache: self.0.clone(),
            writes: Vec::new(),
            record: record_of_sent::<R>,
        })
    }

    fn on_bookmark(&self, version: &str) {
        self.0.bookmarked(version);
    }
}

/// A relist in progress: each object becomes its record (with `record`) as it arrives (so
/// the typed objects of a large list never pile up), and all records go into the index
/// under one write lock.
struct CacheRelist<R, O> {
    cache: Arc<Cache<R>>,
    writes: Vec<Write<R>>,
    record: fn(&O) -> Arc<R>,
}

impl<R, O> RelistBatch<O> for CacheRelist<R, O>
where
    R: Record + Indexed,
{
    fn add(&mut self, delta: &Delta<O>) {
        self.writes.push(Write::of(delta, self.record));
    }

    fn commit(self: Box<Self>, version: &str) {
        self.cache.commit(self.writes, Some(version.parse().ok()));
    }
}

impl Default for Caches {
    fn default() -> Self {
        Caches::new(HISTORY_CAPACITY)
    }
}

impl Caches {
    /// Empty caches, each keeping `history` changes.
    pub fn new(history: usize) -> Self {
        let caches = Caches::empty(history);
        // A Pod's Deployment is read through its ReplicaSet: when a ReplicaSet appears, goes,
        // or changes owner, its Pods' answers change, so their watchers hear of them (a Pod
        // often arrives before its ReplicaSet, the two coming on separate watches).
        let pods = caches.pods.clone();
        let relinked = move |changes: &[Change<ReplicaSetRecord>]| {
            let uids: Vec<&str> = changes
                .iter()
                .filter_map(|change| match change {
                    Change::Applied { old, new } => (old.as_ref().map(|o| &o.owner)
                        != Some(&new.owner))
                    .then_some(new.uid.as_str()),
                    Change::Deleted { old, .. } => Some(old.uid.as_str()),
                })
                .collect();
            if !uids.is_empty() {
                pods.touch_owned_by(&uids);
            }
        };
        let _ = caches.replicasets.on_commit.set(Box::new(relinked));
        caches
    }
}

impl Caches {
    /// The cache of `resource`'s records `R`, if it is served.
    pub fn of<R: Cached>(&self, resource: &Resource) -> Option<Arc<Cache<R>>> {
        R::cache(self, resource)
    }

    /// Starts keeping `resource` (a generic one) in a cache of its own, empty; the cache it
    /// had if it was kept already.
    pub fn serve(&self, resource: &Resource) -> Arc<Cache<model::GenericRecord>> {
        self.generic.serve(resource, self.history)
    }

    /// Stops keeping the resource named `name`: its cache is dropped (freed once no reader
    /// holds it) and its watchers' streams end. The resource it was, if it was kept.
    pub fn stop(&self, name: &str) -> Option<Resource> {
        self.generic.stop(name)
    }

    /// The generic resources kept, by name.
    pub fn generic_resources(&self) -> Vec<Resource> {
        self.generic.resources()
    }

    /// The first generic resource kept, by name, that `matches`.
    pub fn find_generic_resource(
        &self,
        matches: impl FnMut(&Resource) -> bool,
    ) -> Option<Resource> {
        self.generic.find(matches)
    }

    /// The generic resource named `name`, if it is kept.
    pub fn generic_resource(&self, name: &str) -> Option<Resource> {
        self.generic.resource(name)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pods controlled by ReplicaSets that the Deployment controls: ownerReferences, not label
    /// selectors, so Deployments with overlapping selectors never claim each other's Pods.
    pub fn pods_of_deployment(&self, deployment: &DeploymentRecord) -> Vec<Arc<PodRecord>> {
        self.owned_pods(&self.pods.read().index, &deployment.uid)
    }

    /// The pods of `pods` (a read view of the pod cache) that the Deployment with `uid`
    /// controls, in (namespace, name) order.
    pub fn owned_pods(&self, pods: &Index<PodRecord>, uid: &str) -> Vec<Arc<PodRecord>> {
        let rs_uids: Vec<String> = self
            .replicasets
            .read()
            .index
            .owned_by(uid)
            .into_iter()
            .map(|rs| rs.uid.clone())
            .collect();
        let mut owned: Vec<Arc<PodRecord>> = rs_uids
            .iter()
            .flat_map(|uid| pods.owned_by(uid).into_iter().cloned())
            .collect();
        owned.sort_by(|a, b| a.key.cmp(&b.key));
        owned
    }

    /// For each pod, the name of the Deployment that controls its ReplicaSet, if any; one
    /// read of the ReplicaSet cache for the whole list.
    pub fn deployments_of_pods(&self, pods: &[Arc<PodRecord>]) -> Vec<Option<Arc<str>>> {
        let replicasets = self.replicasets.read();
        // A list's pods of one ReplicaSet are neighbours (their names begin with its name):
        // their ReplicaSet is looked up once for the run of them.
        let mut last: Option<(&PodRecord, Option<&Owner>)> = None;
        pods.iter()
            .map(|pod| {
                let deployment = match last {
                    Some((neighbour, deployment))
                        if neighbour.owner == pod.owner
                            && neighbour.key.namespace == pod.key.namespace =>
                    {
                        deployment
                    }
                    _ => deployment_of(&replicasets.index, pod),
                };
                last = Some((pod, deployment));
                deployment.map(|o| o.name.clone())
            })
            .collect()
    }

    /// The name of the Deployment controlling the pod, through its ReplicaSet.
    pub fn deployment_of_pod(&self, pod: &PodRecord) -> Option<Arc<str>> {
        deployment_of(&self.replicasets.read().index, pod).map(|o| o.name.clone())
    }

    /// Whether the Deployment with `uid` controls the pod, through its ReplicaSet.
    pub fn controls(&self, uid: &str, pod: &PodRecord) -> bool {
        deployment_of(&self.replicasets.read().index, pod).is_some_and(|o| o.uid == uid)
    }
}

/// The Deployment controlling the pod's ReplicaSet, as that ReplicaSet's owner.
fn deployment_of<'a>(
    replicasets: &'a Index<ReplicaSetRecord>,
    pod: &PodRecord,
) -> Option<&'a Owner> {
    let owner = pod
        .owner
        .as_ref()
        .filter(|o| o.kind == Some(Kind::ReplicaSet))?;
    replicasets
        .get(&(pod.key.namespace.as_str(), &*owner.name))
        .filter(|rs| rs.uid == owner.uid)?
        .owner
        .as_ref()
        .filter(|o| o.kind == Some(Kind::Deployment))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::fixtures::{mk_deployment, mk_pod, mk_replicaset};

    #[test]
    fn a_typed_cache_fed_as_sent_keeps_the_sent_json() {
        use k8s_openapi::api::core::v1::Pod;
        let caches = Caches::default();
        let handler = FromSent::new(caches.pods.clone());
        let text = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"ns","uid":"u1","resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"nginx"}]},"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","lastProbeTime":null}]}}"#;
        let pod = Sent::<Pod>::from_json(text).unwrap();
        assert!(pod.json().contains(r#""lastProbeTime":null"#));
        let mut relist = handler.clone().begin_relist();
        relist.add(&Delta::Added(pod.clone()));
        relist.commit("6");
        let record = caches.pods.get(&ObjectKey::new("ns", "web")).unwrap();
        assert_eq!(record.raw_json().unwrap(), pod.json().as_bytes());
        assert_eq!(record.key.name, "web", "the record is the typed object's");
        handler.on_deltas(&[Delta::Deleted(pod)]);
        assert!(caches.pods.is_empty());
    }

    fn pod_names(pods: &[Arc<PodRecord>]) -> Vec<&str> {
        pods.iter().map(|p| p.key.name.as_str()).collect()
    }

    /// Two Deployments whose selectors overlap: only ownerReferences tell their Pods apart.
    fn overlapping() -> (Caches, Arc<DeploymentRecord>, Arc<DeploymentRecord>) {
        let caches = Caches::default();
        let web = mk_deployment("ns", "web", "d-web", &[]);
        let web2 = mk_deployment("ns", "web2", "d-web2", &[]);
        caches
            .deployments
            .apply_deltas(&[Delta::Added(web.clone()), Delta::Added(web2.clone())]);
        caches.replicasets.apply_deltas(&[
            Delta::Added(mk_replicaset(
                "ns",
                "web-abc",
                "rs-web",
                Some(("web", "d-web")),
            )),
            Delta::Added(mk_replicaset(
                "ns",
                "web2-xyz",
                "rs-web2",
                Some(("web2", "d-web2")),
            )),
        ]);
        caches.pods.apply_deltas(&[
            Delta::Added(mk_pod(
                "ns",
                "web-abc-1",
                Some(("web-abc", "rs-web")),
                &[("app", "web")],
            )),
            Delta::Added(mk_pod(
                "ns",
                "web-abc-2",
                Some(("web-abc", "rs-web")),
                &[("app", "web")],
            )),
            Delta::Added(mk_pod(
                "ns",
                "web2-xyz-1",
                Some(("web2-xyz", "rs-web2")),
                &[("app", "web")],
            )),
            Delta::Added(mk_pod("ns", "bare", None, &[("app", "web")])),
        ]);
        (
            caches,
            DeploymentRecord::from_deployment(&web),
            DeploymentRecord::from_deployment(&web2),
        )
    }

    #[test]
    fn pods_of_deployment_follow_owner_references_not_labels() {
        let (caches, web, web2) = overlapping();
        assert_eq!(
            pod_names(&caches.pods_of_deployment(&web)),
            ["web-abc-1", "web-abc-2"]
        );
        assert_eq!(pod_names(&caches.pods_of_deployment(&web2)), ["web2-xyz-1"]);
    }

    #[test]
    fn deployment_of_pod_walks_the_chain() {
        let (caches, _, _) = overlapping();
        let pod = caches
            .pods
            .get(&ObjectKey::new("ns", "web2-xyz-1"))
            .unwrap();
        assert_eq!(caches.deployment_of_pod(&pod).as_deref(), Some("web2"));
        assert_eq!(
            caches.deployments_of_pods(&[pod]),
            [Some(Arc::from("web2"))]
        );
        let bare = caches.pods.get(&ObjectKey::new("ns", "bare")).unwrap();
        assert_eq!(caches.deployment_of_pod(&bare), None);
        assert_eq!(caches.deployments_of_pods(&[bare]), [None]);
    }

    #[test]
    fn each_pod_of_a_list_gets_its_own_deployment() {
        let (caches, _, _) = overlapping();
        let pod = |ns: &str, name: &str| caches.pods.get(&ObjectKey::new(ns, name)).unwrap();
        // The same owner reference in another namespace names no ReplicaSet there.
        caches.pods.apply_deltas(&[Delta::Added(mk_pod(
            "other",
            "web-abc-3",
            Some(("web-abc", "rs-web")),
            &[],
        ))]);
        let listed = [
            pod("ns", "web-abc-1"),
            pod("ns", "web-abc-2"),
            pod("ns", "web2-xyz-1"),
            pod("ns", "bare"),
            pod("other", "web-abc-3"),
            pod("ns", "web-abc-1"),
        ];
        let web = || Some(Arc::from("web"));
        assert_eq!(
            caches.deployments_of_pods(&listed),
            [web(), web(), Some(Arc::from("web2")), None, None, web()]
        );
    }

    #[test]
    fn a_replicaset_recreated_under_the_same_name_is_not_confused() {
        let (caches, _, _) = overlapping();
        caches
            .replicasets
            .apply_deltas(&[Delta::Updated(mk_replicaset(
                "ns",
                "web-abc",
                "rs-new",
                Some(("web", "d-web")),
            ))]);
        let pod = caches.pods.get(&ObjectKey::new("ns", "web-abc-1")).unwrap();
        assert_eq!(
            caches.deployments_of_pods(&[pod]),
            [None],
            "the pod's owner uid is the old ReplicaSet"
        );
    }

    #[test]
    fn a_relist_is_invisible_until_committed_then_complete() {
        let (caches, web, _) = overlapping();
        let mut batch = caches.pods.clone().begin_relist();
        batch.add(&Delta::Updated(mk_pod(
            "ns",
            "web-abc-1",
            Some(("web-abc", "rs-web")),
            &[("app", "new")],
        )));
        batch.add(&Delta::Vanished(confk8s::ObjectKey::new("ns", "web-abc-2")));
        // Readers still see the old state while the pages arrive.
        assert_eq!(
            pod_names(&caches.pods_of_deployment(&web)),
            ["web-abc-1", "web-abc-2"]
        );
        batch.commit("100");
        assert_eq!(pod_names(&caches.pods_of_deployment(&web)), ["web-abc-1"]);
        let relabelled = caches.pods.get(&ObjectKey::new("ns", "web-abc-1")).unwrap();
        assert_eq!(relabelled.labels["app"], "new");
    }

    /// Pod `name` in ns at resourceVersion `rv`.
    fn at(name: &str, rv: &str) -> <PodRecord as Record>::Object {
        let mut pod = mk_pod("ns", name, None, &[]);
        pod.metadata.resource_version = Some(rv.into());
        pod
    }

    #[test]
    fn watched_changes_are_kept_at_their_versions_and_a_relist_starts_afresh() {
        let cache = Arc::new(Cache::<PodRecord>::new(8));
        let mut list = cache.clone().begin_relist();
        list.add(&Delta::Added(at("a", "5")));
        list.add(&Delta::Added(at("b", "6")));
        list.commit("7");
        assert_eq!(cache.read().history.current(), Some(7));
        cache.apply_deltas(&[Delta::Updated(at("a", "8")), Delta::Deleted(at("b", "9"))]);
        assert_eq!(cache.read().history.current(), Some(9));
        let state = cache.read();
        let kept: Vec<(u64, &str)> = state
            .history
            .after(7)
            .unwrap()
            .map(|(v, change)| (*v, change.key().name.as_str()))
            .collect();
        assert_eq!(kept, [(8, "a"), (9, "b")]);
        // The deletion is told with the object as deleted, at the deletion's version.
        let (_, deleted) = state.history.after(8).unwrap().next().unwrap();
        assert!(matches!(deleted, Change::Deleted { old, last }
            if old.resource_version == "6" && last.resource_version == "9"));
        // At 7, b was there as it was listed.
        let then = state.history.rewound_to(7).unwrap();
        assert_eq!(
            then[&ObjectKey::new("ns", "b")].unwrap().resource_version,
            "6"
        );
        drop(state);
        let mut list = cache.clone().begin_relist();
        list.add(&Delta::Vanished(confk8s::ObjectKey::new("ns", "a")));
        list.commit("12");
        assert!(matches!(
            cache.read().history.after(9),
            Err(HistoryError::Expired { .. })
        ));
        assert!(cache.read().history.after(12).is_ok());
    }

    #[test]
    fn after_a_restart_the_version_is_the_lists_even_when_the_last_change_was_a_deletion() {
        let before = Arc::new(Cache::<PodRecord>::new(8));
        let mut list = before.clone().begin_relist();
        list.add(&Delta::Added(at("a", "5")));
        list.add(&Delta::Added(at("b", "7")));
        list.commit("10");
        before.apply_deltas(&[Delta::Deleted(at("b", "11"))]);
        let served = before.read().history.current().unwrap();
        assert_eq!(served, 11);
        // Restarted: an empty cache lists what is left, a only, at the list's version.
        let after = Arc::new(Cache::<PodRecord>::new(8));
        let mut list = after.clone().begin_relist();
        list.add(&Delta::Added(at("a", "5")));
        list.commit("11");
        assert_eq!(after.read().history.current(), Some(served));
        // A watch resumed from the version served is served; an older one is told to start
        // again (410), never that it is ahead of the cache (503).
        assert!(after.read().history.after(served).is_ok());
        assert!(matches!(
            after.read().history.after(10),
            Err(HistoryError::Expired { .. })
        ));
    }

    #[tokio::test]
    async fn a_bookmark_brings_the_cache_to_its_version() {
        let cache = Arc::new(Cache::<PodRecord>::new(8));
        cache.clone().begin_relist().commit("10");
        assert!(!cache.reached(15, Duration::ZERO).await);
        cache.on_bookmark("15");
        assert!(cache.reached(15, Duration::ZERO).await);
        assert_eq!(cache.read().history.current(), Some(15));
        assert!(cache.read().history.after(12).is_ok());
        // An older bookmark (or one that is not a number) takes nothing back.
        cache.on_bookmark("13");
        cache.on_bookmark("x");
        assert_eq!(cache.read().history.current(), Some(15));
    }

    #[test]
    fn a_deleted_pod_leaves_its_deployment() {
        let (caches, web, _) = overlapping();
        // What the informer delivers after a relist in which web-abc-2 no longer exists.
        caches
            .pods
            .apply_deltas(&[Delta::Vanished(confk8s::ObjectKey::new("ns", "web-abc-2"))]);
        assert_eq!(pod_names(&caches.pods_of_deployment(&web)), ["web-abc-1"]);
        assert_eq!(caches.pods.len(), 3);
    }
}

/// Caches filled with a small cluster, for tests here and in the crates above.
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use std::sync::Arc;

    use confk8s::Delta;
    use model::fixtures::{mk_deployment, mk_ingress, mk_pod, mk_replicaset, mk_service};

    use super::Caches;

    /// ns-a: Deployment web (2 pods via its ReplicaSet), a bare pod, Service web selecting
    /// the web pods, Service lonely selecting none, Ingress site to Service web; ns-b:
    /// Deployment api.
    pub fn filled_caches() -> Arc<Caches> {
        let caches = Arc::new(Caches::default());
        caches.deployments.apply_deltas(&[
            Delta::Added(mk_deployment(
                "ns-a",
                "web",
                "d-web",
                &[("tier", "frontend")],
            )),
            Delta::Added(mk_deployment(
                "ns-b",
                "api",
                "d-api",
                &[("tier", "backend")],
            )),
        ]);
        caches
            .replicasets
            .apply_deltas(&[Delta::Added(mk_replicaset(
                "ns-a",
                "web-1a2b",
                "rs-web",
                Some(("web", "d-web")),
            ))]);
        caches.pods.apply_deltas(&[
            Delta::Added(mk_pod(
                "ns-a",
                "web-1a2b-x",
                Some(("web-1a2b", "rs-web")),
                &[("app", "web")],
            )),
            Delta::Added(mk_pod(
                "ns-a",
                "web-1a2b-y",
                Some(("web-1a2b", "rs-web")),
                &[("app", "web")],
            )),
            Delta::Added(mk_pod("ns-a", "bare", None, &[("app", "bare")])),
        ]);
        caches.services.apply_deltas(&[
            Delta::Added(mk_service("ns-a", "web", &[("app", "web")])),
            Delta::Added(mk_service("ns-a", "lonely", &[])),
        ]);
        caches
            .ingresses
            .apply_deltas(&[Delta::Added(mk_ingress("ns-a", "site", "web"))]);
        caches
    }
}
