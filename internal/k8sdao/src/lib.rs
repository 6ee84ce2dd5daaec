//! Reads of Deployments and Pods behind one trait, [`WorkloadSource`], implemented by the
//! informer caches ([`CacheSource`]) and by the live API ([`LiveSource`]). Which one serves is
//! decided here, by [`Source::start`], and nowhere else. Writes ([`WorkloadWriter`]) always go
//! to the live API; with the cache, [`Source`] answers once the cache shows the write.

mod cache;
mod custom;
#[cfg(any(test, feature = "fixtures"))]
pub mod fake;
mod live;
mod logs;
mod registry;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use confk8s::{Connection, FactoryError, InformerFactory, InformerState, ListSettings, Sent};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use selector::{FieldSelector, LabelSelector};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use cache::CacheSource;
pub use live::{
    ApiScope, LiveSource, Namespaced, OpenApiAnswer, OpenApiDocs, OpenApiDocument, Passthrough,
    RelayedBody, Switch, SwitchedStream,
};
pub use logs::{LogLines, LogOptions, LogSource, MAX_LOG_LINE_BYTES};
pub use registry::{Registry, ResourceSelection};

use std::collections::{BTreeSet, HashSet};

use k8scache::{Cached, Caches, FromSent};
pub use k8scache::{HISTORY_CAPACITY, HistoryError, StateStamp};
pub use model::Kind;
use model::{
    DeploymentRecord, EventDto, IngressRecord, Keyed, NewDeployment, NewIngress, NewService,
    ObjectKey, PodRecord, ServiceRecord, Typed,
};
pub use model::{GenericRecord, Resource, built_in, catalog};

/// Which namespaces and labels a list covers.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    /// `None`: every namespace the source serves.
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    /// Only fields the kind supports (biz checks them).
    pub fields: FieldSelector,
    /// The namespaces whose objects the caller may see; sources apply it while selecting, so
    /// nothing outside it is ever sorted, paged, counted or sent on a watch.
    pub visible: NamespaceFilter,
}

/// The namespaces a caller may see objects of, as the API layer decided from its rights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NamespaceFilter {
    /// No restriction (no authentication, or rights in every namespace).
    #[default]
    All,
    /// These namespaces only, possibly none. Namespaces that appear later are not in it.
    Only(Arc<BTreeSet<String>>),
}

impl NamespaceFilter {
    pub fn only(namespaces: impl IntoIterator<Item = String>) -> NamespaceFilter {
        NamespaceFilter::Only(Arc::new(namespaces.into_iter().collect()))
    }

    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            NamespaceFilter::All => true,
            NamespaceFilter::Only(set) => set.contains(namespace),
        }
    }

    /// Whether some namespaces may be left out: what an answer says as `accessFiltered`.
    pub fn is_restricted(&self) -> bool {
        matches!(self, NamespaceFilter::Only(_))
    }
}

/// The version a read is based at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadAt {
    /// The newest state the source has: a list of it, or a watch sending it first.
    #[default]
    Newest,
    /// The state at this resourceVersion: a list of it exactly (the next page of a list
    /// begun there), or a watch sending only the changes after it (a client resuming).
    Version(u64),
    /// The newest state, once the source has reached this resourceVersion (a client that
    /// has seen it must never be answered an older state): a list of it, or a watch sending
    /// it first.
    NotOlderThan(u64),
}

/// One event of a watch, in the apiserver's watch terms.
#[derive(Debug, PartialEq)]
pub enum WatchEvent<R> {
    Added(Arc<R>),
    Modified(Arc<R>),
    /// Deleted, or changed so that the watch's selectors no longer select it.
    Deleted(Arc<R>),
    /// Everything the watch selected when it began has been sent (as `Added`); what follows
    /// are changes.
    Synced {
        resource_version: String,
    },
}

/// The events of a watch. It ends with [`DaoError::WatchExpired`] when it can no longer tell
/// every change, and then the client starts again from a fresh initial state.
pub type WatchStream<R> = futures::stream::BoxStream<'static, Result<WatchEvent<R>, DaoError>>;

/// A change to one record as a membership watch sees it, whichever source saw it: the dao's
/// own type, so that the live source does not depend on the cache's change type.
pub(crate) enum MemberChange<R> {
    /// Added or modified: the record as it is now.
    Applied(Arc<R>),
    /// Deleted: the record as it was last.
    Deleted(Arc<R>),
}

/// What a change is to a watch of a set whose membership is not a property of the record
/// alone (a Deployment's pods: read through their ReplicaSets): `members` holds the keys sent
/// so far, so Added, Modified and Deleted follow what this client was told.
pub(crate) fn member_event<R: Keyed>(
    members: &mut HashSet<ObjectKey>,
    change: MemberChange<R>,
    is_member: impl Fn(&R) -> bool,
) -> Option<WatchEvent<R>> {
    match change {
        MemberChange::Applied(new) => {
            let key = new.key().clone();
            match (members.contains(&key), is_member(new.as_ref())) {
                (true, true) => Some(WatchEvent::Modified(new)),
                (false, true) => {
                    members.insert(key);
                    Some(WatchEvent::Added(new))
                }
                (true, false) => {
                    members.remove(&key);
                    Some(WatchEvent::Deleted(new))
                }
                (false, false) => None,
            }
        }
        MemberChange::Deleted(old) => members
            .remove(old.key())
            .then_some(WatchEvent::Deleted(old)),
    }
}

/// A list and the resourceVersion it is as recent as.
#[derive(Clone, Debug)]
pub struct Listing<R> {
    pub items: Vec<Arc<R>>,
    pub resource_version: String,
}

#[derive(Debug, thiserror::Error)]
pub enum DaoError {
    #[error("{kind} {name:?} not found in namespace {namespace:?}")]
    NotFound {
        /// Lowercase, as the resource's Display gives it.
        kind: String,
        namespace: String,
        name: String,
    },
    /// The resource is not served (any more): its cache was stopped.
    #[error("{resource} is not served")]
    NotServed { resource: String },
    #[error("namespace {namespace:?} is not served: k8sailor watches namespace {served:?} only")]
    NamespaceNotServed { namespace: String, served: String },
    #[error("the cache is not synced yet: {}", kinds.join(", "))]
    NotSynced { kinds: Vec<String> },
    /// The resource is served, but its informer's first list is not in yet (a custom
    /// resource served from the moment its CRD is seen): its cache holds no state of it, not
    /// even an empty one at some version, so nothing of it can be answered yet.
    #[error(
        "{resource} is served, but its first list from the Kubernetes API is not in yet: ask again in a moment"
    )]
    Initializing {
        resource: String,
        /// Since when the kind has been served without a list: how long it has waited.
        waited: std::time::Duration,
    },
    #[error("the Kubernetes API refused the request ({code}): {message}")]
    Api { code: u16, message: String },
    #[error("the Kubernetes API is unreachable: {0}")]
    Unavailable(String),
    #[error("the watch missed changes ({0}): start it again")]
    WatchExpired(String),
    /// A read at a version the source cannot rebuild: too old, or not yet seen.
    #[error(transparent)]
    Version(#[from] HistoryError),
    /// The apiserver answered without something it always sends (a list's resourceVersion,
    /// an object's uid): the answer cannot be used, and no default stands in for it.
    #[error("the Kubernetes API sent {object} without a usable {field}")]
    Malformed { object: String, field: &'static str },
}

impl From<kube::Error> for DaoError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => DaoError::Api {
                code: status.code,
                message: status.message,
            },
            other => DaoError::Unavailable(other.to_string()),
        }
    }
}

/// A record type both sources serve: the caches hold its records, and the live source reads
/// the objects of a typed kind through kube's `Api` and projects them the same way (generic
/// resources are listed and got live through the DynamicObject API, their watches are
/// cache-only).
pub trait Served: Cached {
    /// The resource a record is of.
    fn resource_of(&self) -> &Resource;
    /// A list of `resource` through the apiserver.
    fn live_list(
        live: &LiveSource,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> impl Future<Output = Result<Listing<Self>, DaoError>> + Send;
    /// One object of `resource` through the apiserver.
    fn live_get(
        live: &LiveSource,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Arc<Self>, DaoError>> + Send;
    /// A watch of `resource` through the apiserver.
    fn live_watch(
        live: &LiveSource,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> impl Future<Output = Result<WatchStream<Self>, DaoError>> + Send;
}

/// The reads biz needs. Not-found is an error; an empty list is not.
pub trait WorkloadSource: Send + Sync {
    /// The objects of `resource` (whose records are `R`) that `q` selects at `at`, in
    /// (namespace, name) order. A list, get or watch of a resource whose first list is not
    /// in yet is [`DaoError::Initializing`]: never an empty answer at no version.
    fn list<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> impl Future<Output = Result<Listing<R>, DaoError>> + Send;
    fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Arc<R>, DaoError>> + Send;
    /// The objects of `resource` that `q` selects, then each change to that set, until the
    /// stream is dropped; from a version, only the changes after it.
    fn watch<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> impl Future<Output = Result<WatchStream<R>, DaoError>> + Send;
    /// The stamp of the state `resource`'s objects are in, read without listing: equal stamps
    /// mean equal lists, so an answer built from one may be sent again while it holds. None
    /// where the source cannot tell (the apiserver's objects change unseen).
    fn stamp(&self, resource: &Resource) -> Option<StateStamp>;
    /// The namespaces that hold at least one object of `resource`, in order: where an
    /// all-namespace list can find anything, so the only ones whose rights matter.
    fn namespaces_holding(
        &self,
        resource: &Resource,
    ) -> impl Future<Output = Result<Vec<String>, DaoError>> + Send;
    /// Pods controlled, through their ReplicaSets, by the Deployment; NotFound if it is absent.
    fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Vec<Arc<PodRecord>>, DaoError>> + Send;
    /// The Pod's events, newest first, read from the apiserver (events are never cached);
    /// NotFound if the Pod is not there.
    fn pod_events(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Vec<EventDto>, DaoError>> + Send;
    /// For each pod, the name of the Deployment controlling it, if any.
    fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> impl Future<Output = Result<Vec<Option<Arc<str>>>, DaoError>> + Send;
    /// The name of the Deployment controlling one pod, if any: a source that can tell it
    /// without a list of one (the cache) says so.
    fn deployment_of_pod(
        &self,
        pod: &Arc<PodRecord>,
    ) -> impl Future<Output = Result<Option<Arc<str>>, DaoError>> + Send {
        async move {
            let mut deployments = self.deployments_of_pods(std::slice::from_ref(pod)).await?;
            Ok(deployments.pop().flatten())
        }
    }
    /// The Pods the Deployment controls (as [`WorkloadSource::pods_of_deployment`]), then
    /// each change to that set; NotFound if the Deployment is absent when the watch begins.
    fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<WatchStream<PodRecord>, DaoError>> + Send;
}

/// Changes to workloads, made through the apiserver (a cache cannot write). Not-found is an
/// error, as for reads.
pub trait WorkloadWriter: Send + Sync {
    /// Sets spec.replicas through the scale subresource.
    fn scale_deployment(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> impl Future<Output = Result<(), DaoError>> + Send;
    /// The Deployment as the apiserver stored it.
    fn create_deployment(
        &self,
        namespace: &str,
        new: &NewDeployment,
    ) -> impl Future<Output = Result<Arc<DeploymentRecord>, DaoError>> + Send;
    /// Deletes in the background: the garbage collector removes its ReplicaSets and Pods.
    fn delete_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), DaoError>> + Send;
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), DaoError>> + Send;
    /// The Service as the apiserver stored it, as JSON (what kubectl's `get -o json` shows).
    fn create_service(
        &self,
        namespace: &str,
        new: &NewService,
    ) -> impl Future<Output = Result<Vec<u8>, DaoError>> + Send;
    /// The Ingress as the apiserver stored it, as JSON.
    fn create_ingress(
        &self,
        namespace: &str,
        new: &NewIngress,
    ) -> impl Future<Output = Result<Vec<u8>, DaoError>> + Send;
    /// The object as the apiserver stores it now (managedFields left out), as JSON: what
    /// `/output` prints, read live whatever the source; NotFound if it is not there.
    fn object_json<R: Served + Typed<Object: serde::Serialize + Namespaced>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Vec<u8>, DaoError>> + Send;
}

/// What a write left behind, for a cache to catch up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEffect {
    /// The object now has this resourceVersion (or a newer one).
    Version(u64),
    /// The object is gone.
    Gone,
    /// The object was being deleted at this resourceVersion: it shows as terminating with it
    /// (or a newer one) until its finalizers and grace period pass, or it is gone already (a
    /// pod on no node goes at once, though the answer still carries a deletionTimestamp).
    Deleting(u64),
    /// The write is done, but its answer carried no resourceVersion the cache can compare:
    /// there is nothing to wait for.
    Unversioned,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// Informer caches: reads never reach the apiserver.
    #[default]
    Cache,
    /// Every read is a request to the apiserver.
    Live,
}

impl SourceKind {
    pub const ALL: &'static [SourceKind] = &[SourceKind::Cache, SourceKind::Live];

    /// As flags and the config file name it.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Cache => "cache",
            SourceKind::Live => "live",
        }
    }
}

enum Backend {
    Cache(CacheSource),
    Live(LiveSource),
    /// Records given by hand, for the tests of the layers above.
    #[cfg(any(test, feature = "fixtures"))]
    Fake(fake::FakeSource),
}

/// The source the app reads from, restricted to one namespace when configured so.
pub struct Source {
    backend: Backend,
    scope: Option<String>,
    factory: Option<Arc<InformerFactory>>,
    /// Writes go to the apiserver whatever the read source; None without a client (tests).
    writer: Option<LiveSource>,
    /// Callers' own requests, relayed with their own tokens; None without a client (tests).
    passthrough: Option<Passthrough>,
    /// What is served, by name.
    registry: Registry,
    /// The apiserver's OpenAPI documents, kept as they are asked for; None without a client.
    openapi: Option<Arc<OpenApiDocs>>,
}

/// The namespace a list request is about: the one asked for (empty is none), else the one
/// the server is scoped to, else none (all namespaces).
pub fn namespace_of_list<'a>(asked: Option<&'a str>, scope: Option<&'a str>) -> Option<&'a str> {
    asked.filter(|ns| !ns.is_empty()).or(scope)
}

/// Registers each cache with the factory's shared watch of its kind, decoded as leanly as the
/// cache allows, each record keeping the JSON its object was sent as.
fn register(
    caches: &Caches,
    factory: &InformerFactory,
    scope: Option<&str>,
) -> Result<(), FactoryError> {
    factory.add_handler::<Sent<Deployment>>(FromSent::new(caches.deployments.clone()))?;
    factory
        .add_handler_decoded_as::<Pod, model::RecordedPod>(FromSent::new(caches.pods.clone()))?;
    factory.add_handler::<Sent<ReplicaSet>>(FromSent::new(caches.replicasets.clone()))?;
    factory.add_handler::<Sent<Service>>(FromSent::new(caches.services.clone()))?;
    factory.add_handler::<Sent<Ingress>>(FromSent::new(caches.ingresses.clone()))?;
    // Namespaces are cluster-scoped: a server scoped to one namespace may hold no right to
    // list them all, and serves that one alone anyway.
    if scope.is_none() {
        factory.add_cluster_handler::<Sent<Namespace>>(FromSent::new(caches.namespaces.clone()))?;
    }
    Ok(())
}

impl Source {
    /// Opens the configured source; for the cache this registers the informers (each cache
    /// keeping `history` changes), checks that
    /// RBAC lets us list and watch each kind, and starts them; they stop when `shutdown` is
    /// cancelled.
    pub async fn start(
        kind: SourceKind,
        connection: Connection,
        scope: Option<String>,
        history: usize,
        lists: ListSettings,
        resources: &ResourceSelection,
        shutdown: CancellationToken,
    ) -> Result<(Source, Vec<JoinHandle<()>>), FactoryError> {
        let client = connection.client;
        let passthrough = Some(Passthrough::new(connection.without_credentials));
        match kind {
            SourceKind::Live => Ok((
                Source {
                    backend: Backend::Live(LiveSource::new(client.clone())),
                    factory: None,
                    registry: Registry::live(resources, scope.is_some()),
                    scope,
                    openapi: Some(Arc::new(OpenApiDocs::new(client.clone()))),
                    writer: Some(LiveSource::new(client)),
                    passthrough,
                },
                Vec::new(),
            )),
            SourceKind::Cache => {
                let factory = InformerFactory::new(client.clone(), scope.clone())
                    .with_watch_signals(connection.watches)
                    .with_list_settings(lists);
                let caches = Arc::new(Caches::new(history));
                register(&caches, &factory, scope.as_deref())?;
                // The typed kinds (Pods, the longest list, among them) are listed while the
                // access reviews' round trips run: a replica is ready that much sooner. A
                // typed kind we may not list is still fatal, its watch stopped at once.
                let factory = Arc::new(factory);
                let mut tasks = factory.start(shutdown.clone());
                let generic: Vec<&model::BuiltIn> = model::built_in_rows()
                    .iter()
                    .copied()
                    .filter(|row| {
                        !matches!(row.served_by, model::ServedBy::Typed(_))
                            && resources.serves(row)
                            && (scope.is_none() || row.namespaced)
                    })
                    .collect();
                // Custom resources when we may follow their CRDs (cluster-scoped: a server
                // scoped to one namespace follows none, as it serves no other cluster-scoped
                // kind).
                let crd_row = match (&scope, model::built_in("customresourcedefinitions")) {
                    (None, Some(row)) => Some(row),
                    _ => None,
                };
                // Every access review at once: each is a round trip.
                let (typed, reviewed, crds_reviewed) = tokio::join!(
                    factory.check_access(),
                    futures::future::join_all(generic.iter().map(|row| registry::may_watch(
                        &client,
                        row,
                        scope.as_deref()
                    ))),
                    async {
                        match crd_row {
                            Some(row) => Some(registry::may_watch(&client, row, None).await),
                            None => None,
                        }
                    }
                );
                if let Err(denied) = typed {
                    factory.stop();
                    return Err(denied);
                }
                let mut not_served = Vec::new();
                let mut allowed = BTreeSet::new();
                for (row, review) in generic.iter().zip(reviewed) {
                    match review {
                        Ok(()) => {
                            allowed.insert(row.name);
                        }
                        Err(reason) => {
                            tracing::warn!(resource = row.name, "{reason}: not served");
                            not_served.push((row.name.to_string(), reason));
                        }
                    }
                }
                registry::register_built_in(&caches, &factory, scope.as_deref(), &|row| {
                    allowed.contains(row.name)
                })?;
                let crds = match crds_reviewed {
                    Some(Ok(())) => Some(confk8s::CrdFollower::register(&factory)?),
                    Some(Err(reason)) => {
                        tracing::warn!("{reason}: no custom resource served");
                        not_served.push(("custom-resources".to_string(), reason));
                        None
                    }
                    None => None,
                };
                let registry = Registry::new(caches.clone(), registry::typed_resources())
                    .with_not_served(not_served);
                tasks.extend(factory.start(shutdown.clone()));
                // The built-in kinds' statuses: reads wait for those alone; a custom
                // resource is served from its CRD on, and read once its first list is in.
                let source = CacheSource::new(caches, factory.statuses())
                    .with_events(LiveSource::new(client.clone()));
                if let Some(commands) = crds {
                    tasks.push(tokio::spawn(custom::follow(
                        registry.clone(),
                        resources.clone(),
                        factory.clone(),
                        commands,
                        shutdown,
                    )));
                }
                Ok((
                    Source {
                        backend: Backend::Cache(source),
                        scope,
                        factory: Some(factory),
                        openapi: Some(Arc::new(OpenApiDocs::new(client.clone()))),
                        writer: Some(LiveSource::new(client)),
                        passthrough,
                        registry,
                    },
                    tasks,
                ))
            }
        }
    }

    /// A cache-backed source over caches filled by hand (unit tests, benchmarks).
    pub fn from_cache(source: CacheSource, scope: Option<String>) -> Source {
        Source {
            registry: Registry::new(source.caches(), registry::typed_resources()),
            backend: Backend::Cache(source),
            scope,
            factory: None,
            writer: None,
            passthrough: None,
            openapi: None,
        }
    }

    /// A source over records given by hand (the tests of the layers above).
    #[cfg(any(test, feature = "fixtures"))]
    pub fn fake(source: fake::FakeSource, scope: Option<String>) -> Source {
        Source {
            backend: Backend::Fake(source),
            scope,
            factory: None,
            writer: None,
            passthrough: None,
            openapi: None,
            registry: Registry::typed_only(),
        }
    }

    /// The apiserver's OpenAPI documents (always read from it, whatever the read source).
    pub fn openapi(&self) -> Result<&OpenApiDocs, DaoError> {
        self.openapi.as_deref().ok_or_else(|| {
            DaoError::Unavailable("no Kubernetes client to read OpenAPI with".into())
        })
    }

    /// What is served, by name.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Waits until every informer has synced; immediate for the live source.
    pub async fn wait_until_synced(&self, timeout: Duration) -> Result<(), FactoryError> {
        match &self.factory {
            Some(factory) => factory.wait_for_sync(timeout).await,
            None => Ok(()),
        }
    }

    /// The one namespace served, if any.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// Each informer's health, the custom resources' served now included; empty for the
    /// live source.
    pub fn informer_states(&self) -> Vec<InformerState> {
        match (&self.factory, &self.backend) {
            (Some(factory), _) => factory.statuses().iter().map(|s| s.state()).collect(),
            (None, Backend::Cache(c)) => c.states(),
            _ => Vec::new(),
        }
    }

    /// Whether a watch is failing now (then [`Source::informer_states`] tells since when);
    /// cheap enough for every request, unlike the states.
    pub fn any_disconnected(&self) -> bool {
        match (&self.factory, &self.backend) {
            (Some(factory), _) => factory.any_disconnected(),
            (None, Backend::Cache(c)) => c.states().iter().any(|s| !s.connected),
            _ => false,
        }
    }

    /// Objects held in memory, of every kind; 0 for the live source. A read lock per cache,
    /// nothing copied: cheap enough for every request.
    pub fn cached_objects(&self) -> usize {
        match &self.backend {
            Backend::Cache(c) => c.cached_objects(),
            _ => 0,
        }
    }

    /// The namespace to query: [`namespace_of_list`], refused when it is not the served one.
    fn scoped<'a>(&'a self, namespace: Option<&'a str>) -> Result<Option<&'a str>, DaoError> {
        let ns = namespace_of_list(namespace, self.scope.as_deref());
        match (&self.scope, ns) {
            (Some(served), Some(ns)) if ns != served => Err(DaoError::NamespaceNotServed {
                namespace: ns.to_string(),
                served: served.clone(),
            }),
            (_, ns) => Ok(ns),
        }
    }

    fn scoped_query(&self, q: &ListQuery) -> Result<ListQuery, DaoError> {
        Ok(ListQuery {
            namespace: self.scoped(q.namespace.as_deref())?.map(str::to_string),
            labels: q.labels.clone(),
            fields: q.fields.clone(),
            visible: q.visible.clone(),
        })
    }
}

/// Calls the backend's `$method`. The live one's future is boxed: it holds a request to the
/// apiserver, kilobytes that every caller's future would otherwise carry and move on every
/// read, the cache's included (a box is nothing beside a round trip).
macro_rules! dispatch {
    ($self:ident, $method:ident $(::<$r:ty>)? ( $($arg:expr),* )) => {
        match &$self.backend {
            Backend::Cache(s) => s.$method$(::<$r>)?($($arg),*).await,
            Backend::Live(s) => Box::pin(s.$method$(::<$r>)?($($arg),*)).await,
            #[cfg(any(test, feature = "fixtures"))]
            Backend::Fake(s) => s.$method$(::<$r>)?($($arg),*).await,
        }
    };
}

impl WorkloadSource for Source {
    async fn list<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<R>, DaoError> {
        let q = self.scoped_query(q)?;
        dispatch!(self, list::<R>(resource, &q, at))
    }

    async fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        self.scoped(Some(namespace))?;
        dispatch!(self, get::<R>(resource, namespace, name))
    }

    async fn watch<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> Result<WatchStream<R>, DaoError> {
        let q = self.scoped_query(q)?;
        dispatch!(self, watch::<R>(resource, &q, from))
    }

    fn stamp(&self, resource: &Resource) -> Option<StateStamp> {
        match &self.backend {
            Backend::Cache(s) => s.stamp(resource),
            Backend::Live(s) => s.stamp(resource),
            #[cfg(any(test, feature = "fixtures"))]
            Backend::Fake(s) => s.stamp(resource),
        }
    }

    async fn namespaces_holding(&self, resource: &Resource) -> Result<Vec<String>, DaoError> {
        match &self.scope {
            Some(served) => Ok(vec![served.clone()]),
            None => dispatch!(self, namespaces_holding(resource)),
        }
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        self.scoped(Some(namespace))?;
        dispatch!(self, pods_of_deployment(namespace, name))
    }

    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.scoped(Some(namespace))?;
        dispatch!(self, pod_events(namespace, name))
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<Arc<str>>>, DaoError> {
        dispatch!(self, deployments_of_pods(pods))
    }

    async fn deployment_of_pod(&self, pod: &Arc<PodRecord>) -> Result<Option<Arc<str>>, DaoError> {
        dispatch!(self, deployment_of_pod(pod))
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        self.scoped(Some(namespace))?;
        dispatch!(self, watch_pods_of_deployment(namespace, name))
    }
}

/// How long a write waits for the cache to show it before answering anyway.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

impl Source {
    fn writer(&self) -> Result<&LiveSource, DaoError> {
        self.writer
            .as_ref()
            .ok_or_else(|| DaoError::Unavailable("no Kubernetes client to write with".into()))
    }

    /// Read-your-writes: with the cache, waits (bounded) until it shows the write, so that the
    /// client's next read sees what it just did.
    async fn settle<R: Served + Typed>(&self, namespace: &str, name: &str, effect: WriteEffect) {
        if let Backend::Cache(cache) = &self.backend
            && !cache
                .settle::<R>(namespace, name, effect, SETTLE_TIMEOUT)
                .await
        {
            tracing::warn!(kind = %R::KIND, namespace, name, ?effect, timeout = ?SETTLE_TIMEOUT,
                "the cache has not shown a write yet; answering anyway");
        }
    }
}

/// The largest answer to a relayed write that is held back until the cache shows the write:
/// an object's answer is well under it (etcd takes objects of at most 1.5 MiB); a larger one
/// is sent on as it comes, without waiting.
const MAX_SETTLED_ANSWER: usize = 4 * 1024 * 1024;

/// A relayed request that writes an object the cache keeps: its answer waits for the cache.
#[derive(Clone, Copy, Debug)]
pub struct WrittenTo<'a> {
    pub resource: &'a Resource,
    /// Where the object is; None for a cluster-scoped one.
    pub namespace: Option<&'a str>,
}

/// `body` read whole if it ends, cleanly, within `limit` bytes; else the same body, what was
/// read of it first.
async fn read_within(mut body: RelayedBody, limit: usize) -> Result<Bytes, RelayedBody> {
    use futures::StreamExt;
    let mut read: Vec<Bytes> = Vec::new();
    let mut size = 0;
    loop {
        match body.next().await {
            None => return Ok(read.concat().into()),
            Some(Ok(chunk)) if size + chunk.len() <= limit => {
                size += chunk.len();
                read.push(chunk);
            }
            Some(next) => {
                let read = futures::stream::iter(read.into_iter().map(Ok));
                return Err(read
                    .chain(futures::stream::once(async { next }))
                    .chain(body)
                    .boxed());
            }
        }
    }
}

/// The `metadata.resourceVersion` of an answer's object, if it has a numeric one.
fn answered_version(answer: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        resource_version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        metadata: Option<Meta>,
    }
    let answer: Answer = serde_json::from_slice(answer).ok()?;
    answer.metadata?.resource_version?.parse().ok()
}

impl Source {
    fn passthrough(&self) -> Result<&Passthrough, DaoError> {
        self.passthrough
            .as_ref()
            .ok_or_else(|| DaoError::Unavailable("no Kubernetes client to relay with".into()))
    }

    /// Relays a caller's request to switch protocols (exec, attach, port-forward) with the
    /// caller's `token` (see [`Passthrough::switch`]): the apiserver's stream once it
    /// switched, else its answer. Nothing is kept, so nothing waits for the cache.
    pub async fn relay_switch(
        &self,
        request: http::Request<Bytes>,
        token: &str,
    ) -> Result<Switch, DaoError> {
        self.passthrough()?.switch(request, token).await
    }

    /// Relays a caller's request to the apiserver with the caller's `token` (see
    /// [`Passthrough::send`]). A successful write to an object the cache keeps (`written`) is
    /// answered once the cache is at the answer's resourceVersion (bounded, as the typed
    /// writes wait), so the caller's next read from memory sees it.
    pub async fn relay(
        &self,
        request: http::Request<Bytes>,
        token: &str,
        written: Option<WrittenTo<'_>>,
    ) -> Result<http::Response<RelayedBody>, DaoError> {
        use futures::StreamExt;
        let passthrough = self.passthrough()?;
        let writes = !matches!(
            *request.method(),
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        );
        let response = passthrough.send(request, token).await?;
        let (Backend::Cache(cache), Some(written)) = (&self.backend, written) else {
            return Ok(response);
        };
        // A scoped server's caches hold the objects of its namespace alone.
        let kept = self.scope.is_none() || written.namespace == self.scope.as_deref();
        if !writes || !kept || !response.status().is_success() {
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let answer = match read_within(body, MAX_SETTLED_ANSWER).await {
            Ok(answer) => answer,
            Err(body) => return Ok(http::Response::from_parts(parts, body)),
        };
        if let Some(version) = answered_version(&answer)
            && !cache
                .caches()
                .reached(written.resource, version, SETTLE_TIMEOUT)
                .await
        {
            tracing::warn!(resource = %written.resource, version, timeout = ?SETTLE_TIMEOUT,
                "the cache has not shown a relayed write yet; answering anyway");
        }
        let body = futures::stream::once(async { Ok(answer) }).boxed();
        Ok(http::Response::from_parts(parts, body))
    }
}

impl WorkloadWriter for Source {
    async fn scale_deployment(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<(), DaoError> {
        self.scoped(Some(namespace))?;
        let effect = self.writer()?.scale(namespace, name, replicas).await?;
        self.settle::<DeploymentRecord>(namespace, name, effect)
            .await;
        Ok(())
    }

    async fn create_deployment(
        &self,
        namespace: &str,
        new: &NewDeployment,
    ) -> Result<Arc<DeploymentRecord>, DaoError> {
        self.scoped(Some(namespace))?;
        let (record, effect) = self.writer()?.create(namespace, new).await?;
        self.settle::<DeploymentRecord>(namespace, &new.name, effect)
            .await;
        Ok(record)
    }

    async fn delete_deployment(&self, namespace: &str, name: &str) -> Result<(), DaoError> {
        self.scoped(Some(namespace))?;
        let effect = self
            .writer()?
            .delete::<DeploymentRecord>(namespace, name)
            .await?;
        self.settle::<DeploymentRecord>(namespace, name, effect)
            .await;
        Ok(())
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), DaoError> {
        self.scoped(Some(namespace))?;
        let effect = self.writer()?.delete::<PodRecord>(namespace, name).await?;
        self.settle::<PodRecord>(namespace, name, effect).await;
        Ok(())
    }

    async fn create_service(&self, namespace: &str, new: &NewService) -> Result<Vec<u8>, DaoError> {
        self.scoped(Some(namespace))?;
        let (created, effect) = self.writer()?.create_service(namespace, new).await?;
        self.settle::<ServiceRecord>(namespace, &new.name, effect)
            .await;
        Ok(created)
    }

    async fn create_ingress(&self, namespace: &str, new: &NewIngress) -> Result<Vec<u8>, DaoError> {
        self.scoped(Some(namespace))?;
        let (created, effect) = self.writer()?.create_ingress(namespace, new).await?;
        self.settle::<IngressRecord>(namespace, &new.name, effect)
            .await;
        Ok(created)
    }

    async fn object_json<R: Served + Typed<Object: serde::Serialize + Namespaced>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<u8>, DaoError> {
        self.scoped(Some(namespace))?;
        self.writer()?.object_json::<R>(namespace, name).await
    }
}
