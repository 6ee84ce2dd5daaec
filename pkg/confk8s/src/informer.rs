use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::NamespaceResourceScope;
use kube::api::DynamicObject;
use kube::discovery::{ApiResource, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Sent;
use crate::delta::{Delta, DeltaTracker, Step, strip_noise};
use crate::signals::WatchSignals;
use crate::status::{FirstSync, InformerStatus};
use crate::watcher::{Event, Intake, ListEncoding};

/// Receives the changes of one kind.
pub trait Handler<K>: Send + Sync + 'static {
    /// Changes outside relists, one watch event at a time.
    fn on_deltas(&self, deltas: &[Delta<K>]);
    /// A relist began. Its changes go to the batch one by one as the pages arrive, so the
    /// handler can keep what it needs of each object and drop the rest at once; `commit`
    /// applies them together, so readers never see a half-applied relist.
    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<K>>;
    /// A bookmark: nothing of this kind changed up to `version`, so the state the handler
    /// holds is the one at `version`. Handlers that keep no version need not listen.
    fn on_bookmark(&self, version: &str) {
        let _ = version;
    }
}

/// The changes of one relist, applied together on commit.
pub trait RelistBatch<K>: Send {
    /// One change of the relist: additions and updates as their pages arrive, then a
    /// [`Delta::Vanished`] for each object the new list no longer holds.
    fn add(&mut self, delta: &Delta<K>);
    /// The list is complete, and the state is the one at `version`, the list's own
    /// resourceVersion (never lower than any change before the list, deletions included):
    /// apply what was added. A batch dropped without a commit (the watch stopped mid-relist)
    /// must change nothing.
    fn commit(self: Box<Self>, version: &str);
}

/// The bounds any watched object needs, a kind known at compile time or one known only at run
/// time ([`DynamicObject`]).
pub trait Watchable: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<T> Watchable for T where T: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}

/// A kind known at compile time: its group, version and plural come from the type.
pub trait Watched: Watchable + Resource<DynamicType = ()> {}
impl<T> Watched for T where T: Watchable + Resource<DynamicType = ()> {}

/// Why the factory cannot serve its handlers; each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// A handler was added to a watch [`InformerFactory::start`] has started: it would miss
    /// what the watch told before.
    #[error("handlers must be registered before their informer starts ({kind})")]
    AlreadyStarted {
        /// The kind the handler was for.
        kind: String,
    },
    /// [`InformerFactory::check_access`]: RBAC denies listing some kinds, so they could never
    /// sync.
    #[error("forbidden by RBAC: cannot {}", denied.join(", "))]
    Forbidden {
        /// One entry per kind, such as `list Pod (pods) in namespace default`.
        denied: Vec<String>,
    },
    /// [`InformerFactory::wait_for_sync`]: some watches had not delivered a full list in time.
    #[error("caches not synced after {timeout:?}: {}", kinds.join(", "))]
    NotSynced {
        /// The time waited.
        timeout: Duration,
        /// The kinds not synced, each with its watch's last error if it had one.
        kinds: Vec<String>,
    },
}

type EventStream<T> = BoxStream<'static, Result<Event<T>, watcher::Error>>;

/// How a watch receives the objects that exist when it starts, and again after a 410.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitialList {
    /// One list without a limit, read and decoded as it arrives (never held whole), then a
    /// watch from its resourceVersion. The apiserver writes one answer from its watch cache:
    /// for 10,000 pods as JSON about half the CPU and time of a streaming list, which writes
    /// an event per object (0.6 s against 1.2 s on 2 cores); a consistent read, as a
    /// streaming list is.
    #[default]
    Whole,
    /// A streaming list where the apiserver serves one, paged lists where it refuses it.
    Auto,
    /// Streaming lists only (WatchList, KEP-3157): one watch with `sendInitialEvents=true`
    /// sends every object, then a bookmark, then the changes. An apiserver that refuses
    /// them (WatchList disabled, before 1.27) never syncs.
    Streaming,
    /// Paged lists of 500 objects, then a watch from the list's resourceVersion.
    Paged,
}

impl InitialList {
    /// Every strategy, as settings name them.
    pub const ALL: &'static [InitialList] = &[
        InitialList::Whole,
        InitialList::Auto,
        InitialList::Streaming,
        InitialList::Paged,
    ];

    /// As flags and config files name it.
    pub fn name(self) -> &'static str {
        match self {
            InitialList::Whole => "whole",
            InitialList::Auto => "auto",
            InitialList::Streaming => "streaming",
            InitialList::Paged => "paged",
        }
    }
}

/// How a factory's watches get their lists: the strategy and the encoding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListSettings {
    /// Whole, streamed or paged.
    pub initial: InitialList,
    /// Protobuf (built-in kinds) or JSON.
    pub encoding: ListEncoding,
}

/// Opens a kube watcher with the given configuration.
type Open<T> = Box<dyn Fn(watcher::Config) -> EventStream<T> + Send + Sync>;

struct Informer<T> {
    /// API group and plural resource name, for access reviews.
    resource: (String, String),
    /// Watched across the cluster whatever the factory's namespace: reviewed without one.
    cluster_scoped: bool,
    status: Arc<InformerStatus>,
    handlers: Mutex<Vec<Arc<dyn Handler<T>>>>,
    /// Paged lists; [`Informer::watch`] turns streaming lists on.
    config: watcher::Config,
    initial_list: InitialList,
    /// Whether the factory's access review has said what RBAC refuses: until it has, a refused
    /// list is left for it to tell, in one line.
    reviewed: Arc<AtomicBool>,
    open: Open<T>,
}

/// What the factory needs of an informer without knowing its type.
trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn resource(&self) -> &(String, String);
    fn cluster_scoped(&self) -> bool;
    fn status(&self) -> &Arc<InformerStatus>;
    fn spawn(self: Arc<Self>, shutdown: CancellationToken) -> JoinHandle<()>;
}

impl<T: Watchable> AnyInformer for Informer<T> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn resource(&self) -> &(String, String) {
        &self.resource
    }

    fn cluster_scoped(&self) -> bool {
        self.cluster_scoped
    }

    fn status(&self) -> &Arc<InformerStatus> {
        &self.status
    }

    fn spawn(self: Arc<Self>, shutdown: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move { self.run(shutdown).await })
    }
}

impl<T: Watchable> Informer<T> {
    /// The watcher's events, its lists streamed, whole or paged; errors retried with
    /// client-go's backoff.
    fn watch(&self, streaming: bool) -> EventStream<T> {
        let config = if streaming {
            self.config.clone().streaming_lists()
        } else if self.initial_list == InitialList::Whole {
            watcher::Config {
                page_size: None,
                ..self.config.clone()
            }
        } else {
            self.config.clone()
        };
        self.status.lists_streamed(streaming);
        (self.open)(config).default_backoff().boxed()
    }

    async fn run(&self, shutdown: CancellationToken) {
        let handlers = self
            .handlers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let kind = self.status.kind().to_string();
        // Errors are yielded by the watcher and retried with client-go's backoff; they are
        // logged and counted, never the end of the watch.
        let mut streaming = matches!(
            self.initial_list,
            InitialList::Auto | InitialList::Streaming
        );
        let mut events = self.watch(streaming);
        let mut tracker = DeltaTracker::default();
        let mut relist: Vec<Box<dyn RelistBatch<T>>> = Vec::new();
        let mut relist_changes = 0usize;
        let mut list_began = std::time::Instant::now();
        tracing::debug!(%kind, "watch starting");
        loop {
            // Shutdown first: a watch ended while the process stops (its connection closed
            // under it) is not a failure to report.
            let event = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                event = events.next() => event,
            };
            let event = match event {
                Some(Ok(event)) => event,
                // The apiserver is there; our resourceVersion is older than it keeps (it
                // restarted or compacted), so the watcher lists afresh: a resync, not an outage
                // to report as stale data.
                Some(Err(error)) if status_code(&error) == Some(410) => {
                    tracing::info!(%kind, %error, "watch expired; listing again");
                    continue;
                }
                // The watcher retries a refused streaming list for ever; paged lists are
                // what every apiserver serves. Nothing was delivered yet: the paged list
                // starts a relist of its own.
                Some(Err(error))
                    if streaming
                        && self.initial_list == InitialList::Auto
                        && refuses_streaming_lists(&error) =>
                {
                    tracing::warn!(%kind, %error, "the apiserver refuses streaming lists; listing in pages");
                    streaming = false;
                    events = self.watch(streaming);
                    continue;
                }
                Some(Err(error)) => {
                    let code = status_code(&error);
                    // A refusal is said once; each retry until it is granted would say it again.
                    let before = self.status.state();
                    let review_tells =
                        matches!(code, Some(401 | 403)) && !self.reviewed.load(Ordering::Acquire);
                    if review_tells {
                        tracing::debug!(%kind, %error, "watch refused before the access review answered, which tells it; retrying with backoff");
                    } else if before.is_denied() && before.last_error_code == code {
                        tracing::debug!(%kind, %error, "watch still refused; retrying with backoff");
                    } else {
                        tracing::warn!(%kind, %error, "watch failed; retrying with backoff");
                    }
                    self.status.error(error.to_string(), code);
                    continue;
                }
                None => break,
            };
            let rv = match &event {
                Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => {
                    o.meta().resource_version.clone()
                }
                Event::InitDone { version, encoding } => {
                    self.status.listed_in(*encoding);
                    Some(version.clone())
                }
                Event::Bookmark { version } => Some(version.clone()),
                Event::Init => None,
            };
            self.status.heard(rv.as_deref());
            match tracker.step(event.modify(strip_noise)) {
                Step::Nothing => {}
                Step::Deltas(deltas) => {
                    for handler in &handlers {
                        handler.on_deltas(&deltas);
                    }
                    self.status.counted(&deltas, tracker.len());
                }
                Step::RelistStarted => {
                    // The first list's time counts from the watch's start: it includes the
                    // wait for the apiserver's first answer.
                    if self.status.is_synced() {
                        list_began = std::time::Instant::now();
                    }
                    relist = handlers.iter().map(|h| h.clone().begin_relist()).collect();
                    relist_changes = 0;
                }
                Step::RelistDelta(delta) => {
                    for batch in &mut relist {
                        batch.add(&delta);
                    }
                    relist_changes += 1;
                    self.status
                        .counted(std::slice::from_ref(&delta), tracker.len());
                }
                Step::Bookmark(version) => {
                    for handler in &handlers {
                        handler.on_bookmark(&version);
                    }
                }
                Step::Relisted { gone, version } => {
                    let gone: Vec<Delta<T>> = gone.into_iter().map(Delta::Vanished).collect();
                    let listed = list_began.elapsed();
                    // A handler applies its batch under its write lock: readers wait this long.
                    let committing = std::time::Instant::now();
                    for mut batch in relist.drain(..) {
                        for delta in &gone {
                            batch.add(delta);
                        }
                        batch.commit(&version);
                    }
                    let indexed = committing.elapsed();
                    self.status.counted(&gone, tracker.len());
                    let changes = relist_changes + gone.len();
                    tracing::info!(%kind, objects = tracker.len(), changes, streaming, list_ms = listed.as_millis(), commit_ms = indexed.as_millis(), %version, "list synced");
                    self.status.relisted(FirstSync { listed, indexed });
                }
            }
        }
        tracing::debug!(%kind, "watch stopped");
    }
}

/// Why a streaming list cannot start where a paged one may: an apiserver without WatchList
/// answers `sendInitialEvents=true` with 422 (sendInitialEvents, or resourceVersionMatch on a
/// watch before 1.27, is forbidden) or 400; RBAC that grants list but not watch answers 403,
/// and a paged list still fills the cache (readiness then says the watch is refused).
fn refuses_streaming_lists(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 422))
}

fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// One watch per kind, shared by every handler registered for it, like client-go's
/// SharedInformerFactory. Register handlers, then [`start`](Self::start) once.
pub struct InformerFactory {
    client: Client,
    namespace: Option<String>,
    config: watcher::Config,
    initial_list: InitialList,
    list_encoding: ListEncoding,
    informers: Arc<Mutex<Registry>>,
    /// How many of the statuses of `informers` are not connected.
    unconnected: Arc<std::sync::atomic::AtomicUsize>,
    watches: Option<WatchSignals>,
    /// Set once [`InformerFactory::check_access`] has answered (its informers may start
    /// before).
    reviewed: Arc<AtomicBool>,
    /// Cancelled with the token given to [`InformerFactory::start`]: ends every watch, the
    /// dynamic ones started at any time included.
    stopping: CancellationToken,
}

#[derive(Default)]
struct Registry {
    by_type: HashMap<TypeId, Arc<dyn AnyInformer>>,
    order: Vec<TypeId>,
    /// How many of `order` [`InformerFactory::start`] has started (the first ones).
    started: usize,
    /// Whether `start`'s `shutdown` is linked to the factory's own stop.
    linked: bool,
    /// The statuses of the dynamic watches running, by the id their handle holds.
    dynamic: BTreeMap<u64, Arc<InformerStatus>>,
    next_dynamic: u64,
}

/// What an access review said of one resource.
enum Reviewed {
    Allowed,
    /// We may not list it: the reason, such as `list Pod (pods) in namespace default`.
    Unlistable(String),
    /// The review could not be made.
    Unknown,
}

/// A watch started by [`InformerFactory::watch_dynamic`]. Dropping it ends the watch, removes
/// its status from the factory's and drops its handler once the watch task has returned;
/// [`stop`](Self::stop) also waits for that.
#[must_use = "dropping the handle stops the watch"]
pub struct DynamicInformer {
    status: Arc<InformerStatus>,
    id: u64,
    registry: std::sync::Weak<Mutex<Registry>>,
    watches: Option<WatchSignals>,
    stop: CancellationToken,
    /// None when RBAC refused the list and nothing was started.
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for DynamicInformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicInformer")
            .field("kind", &self.status.kind())
            .finish()
    }
}

impl DynamicInformer {
    /// The watch's health, as [`InformerFactory::statuses`] reports it.
    pub fn status(&self) -> &Arc<InformerStatus> {
        &self.status
    }

    /// Ends the watch and returns once its task has, so the handler has been dropped.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // A task that panicked has ended all the same.
            let _ = task.await;
        }
    }
}

impl Drop for DynamicInformer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(registry) = self.registry.upgrade() {
            let mut registry = registry.lock().unwrap_or_else(|e| e.into_inner());
            registry.dynamic.remove(&self.id);
        }
        if let Some(watches) = &self.watches {
            watches.unsubscribe(&self.status);
        }
    }
}

impl InformerFactory {
    /// Watches `namespace` only when given, otherwise all namespaces.
    pub fn new(client: Client, namespace: Option<String>) -> Self {
        // Paged lists (500 objects a page) when not streamed: a resourceVersion=0 list would
        // come as one page, and every object of it would be a typed object at once, many times
        // the cache's size.
        let config = watcher::Config::default();
        InformerFactory {
            client,
            namespace,
            config,
            initial_list: InitialList::default(),
            list_encoding: ListEncoding::default(),
            informers: Arc::new(Mutex::new(Registry::default())),
            unconnected: Arc::default(),
            watches: None,
            reviewed: Arc::new(AtomicBool::new(false)),
            stopping: CancellationToken::new(),
        }
    }

    /// Lets the client's watch signals mark an informer connected as soon as the apiserver
    /// accepts its watch again, not only when the next change arrives. Give it before
    /// registering handlers.
    pub fn with_watch_signals(mut self, watches: WatchSignals) -> Self {
        self.watches = Some(watches);
        self
    }

    /// How the watches get their lists; [`InitialList::Auto`] unless given. Give it before
    /// registering handlers.
    pub fn with_initial_list(mut self, initial_list: InitialList) -> Self {
        self.initial_list = initial_list;
        self
    }

    /// The encoding the lists are asked in; [`ListEncoding::Protobuf`] unless given. Give it
    /// before registering handlers.
    pub fn with_list_encoding(mut self, list_encoding: ListEncoding) -> Self {
        self.list_encoding = list_encoding;
        self
    }

    /// How the lists are asked for, both settings at once.
    pub fn with_list_settings(self, lists: ListSettings) -> Self {
        self.with_initial_list(lists.initial)
            .with_list_encoding(lists.encoding)
    }

    fn intake<K: Resource<DynamicType = ()>>(&self) -> Intake {
        Intake::new(
            self.list_encoding,
            &K::group(&()),
            &K::version(&()),
            &K::kind(&()),
        )
    }

    /// Registers a handler for `K`, starting a watch of `K` unless one exists. For
    /// `K = PartialObjectMeta<T>` the watch fetches metadata only, a fraction of the bytes.
    pub fn add_handler<K>(&self, handler: Arc<dyn Handler<K>>) -> Result<(), FactoryError>
    where
        K: Watched + Resource<Scope = NamespaceResourceScope>,
    {
        let api = self.api::<K>();
        let intake = self.intake::<K>();
        let resource = (K::group(&()).into_owned(), K::plural(&()).into_owned());
        self.register(
            K::kind(&()).into_owned(),
            resource,
            false,
            handler,
            move |config| crate::watcher::watch(api.clone(), config, intake.clone()).boxed(),
        )
    }

    /// Registers a handler for a cluster-scoped `K` (Namespaces, say): watched across the
    /// cluster, and reviewed so, whatever the factory's namespace.
    pub fn add_cluster_handler<K>(&self, handler: Arc<dyn Handler<K>>) -> Result<(), FactoryError>
    where
        K: Watched + Resource<Scope = k8s_openapi::ClusterResourceScope>,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let intake = self.intake::<K>();
        let resource = (K::group(&()).into_owned(), K::plural(&()).into_owned());
        self.register(
            K::kind(&()).into_owned(),
            resource,
            true,
            handler,
            move |config| crate::watcher::watch(api.clone(), config, intake.clone()).boxed(),
        )
    }

    /// Like [`InformerFactory::add_handler`] for `Sent<K>`, but the watch decodes each object
    /// as `W` and hands it on as `K`: a leaner decoding of the same kind, one that builds only
    /// what the handler reads (the sent JSON is kept whole either way).
    pub fn add_handler_decoded_as<K, W>(
        &self,
        handler: Arc<dyn Handler<Sent<K>>>,
    ) -> Result<(), FactoryError>
    where
        Sent<K>: Watched,
        Sent<W>: Watched + Resource<Scope = NamespaceResourceScope>,
        W: Into<K>,
    {
        let api = self.api::<Sent<W>>();
        let intake = self.intake::<Sent<W>>();
        let resource = (
            Sent::<W>::group(&()).into_owned(),
            Sent::<W>::plural(&()).into_owned(),
        );
        self.register(
            Sent::<K>::kind(&()).into_owned(),
            resource,
            false,
            handler,
            move |config| {
                crate::watcher::watch(api.clone(), config, intake.clone())
                    .map(|event| event.map(|event| event.map(|sent| sent.map(W::into))))
                    .boxed()
            },
        )
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Watched + Resource<Scope = NamespaceResourceScope>,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    fn register<T: Watched>(
        &self,
        kind: String,
        resource: (String, String),
        cluster_scoped: bool,
        handler: Arc<dyn Handler<T>>,
        open: impl Fn(watcher::Config) -> EventStream<T> + Send + Sync + 'static,
    ) -> Result<(), FactoryError> {
        let mut registry = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        let id = TypeId::of::<T>();
        if registry.order[..registry.started].contains(&id) {
            return Err(FactoryError::AlreadyStarted { kind });
        }
        let Registry { by_type, order, .. } = &mut *registry;
        // A kind is named by itself, as metrics and readiness name it; one whose name another
        // informer has already (events.k8s.io's Event beside core's) by its group too, as a
        // custom resource is.
        let taken = by_type
            .values()
            .any(|informer| informer.status().kind() == kind);
        let kind = if taken && !resource.0.is_empty() {
            format!("{kind}.{}", resource.0)
        } else {
            kind
        };
        by_type.entry(id).or_insert_with(|| {
            order.push(id);
            let status = Arc::new(InformerStatus::counted_in(kind, &self.unconnected));
            if let Some(watches) = &self.watches {
                watches.subscribe(&resource.0, &resource.1, status.clone());
            }
            Arc::new(Informer::<T> {
                resource,
                cluster_scoped,
                status,
                handlers: Mutex::new(Vec::new()),
                config: self.config.clone(),
                initial_list: self.initial_list,
                reviewed: self.reviewed.clone(),
                open: Box::new(open),
            })
        });
        let informer = registry.by_type[&id]
            .as_any()
            .downcast_ref::<Informer<T>>()
            .expect("the registry maps each TypeId to an informer of that type");
        informer
            .handlers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handler);
        Ok(())
    }

    /// Asks the apiserver (SelfSubjectAccessReview) whether we may list and watch every
    /// registered kind in our scope. A kind we may not list can never sync: that fails here,
    /// with one line. A kind we may list but not watch syncs once and then never changes: that
    /// is logged, and recorded as the informer's error (403) so that readiness fails with the
    /// reason until the permission is granted and the watch succeeds. If the review itself
    /// cannot be made, the watches' own errors will tell.
    pub async fn check_access(&self) -> Result<(), FactoryError> {
        let kinds: Vec<(Arc<InformerStatus>, (String, String), bool)> = {
            let registry = self.informers.lock().unwrap_or_else(|e| e.into_inner());
            registry
                .order
                .iter()
                .map(|id| {
                    let informer = &registry.by_type[id];
                    (
                        informer.status().clone(),
                        informer.resource().clone(),
                        informer.cluster_scoped(),
                    )
                })
                .collect()
        };
        let mut unlistable = Vec::new();
        // At once: each is a round trip to the apiserver, and start-up waits for them all.
        let reviews = kinds.iter().map(|(status, resource, cluster_scoped)| {
            self.review(status, resource, *cluster_scoped)
        });
        let reviews = futures::future::join_all(reviews).await;
        self.reviewed.store(true, Ordering::Release);
        for reviewed in reviews {
            match reviewed {
                Reviewed::Allowed => {}
                Reviewed::Unlistable(denied) => unlistable.push(denied),
                Reviewed::Unknown => return Ok(()),
            }
        }
        if unlistable.is_empty() {
            Ok(())
        } else {
            Err(FactoryError::Forbidden { denied: unlistable })
        }
    }

    /// Whether we may list and watch `resource`; a refused watch is logged and recorded in
    /// `status`, a refused list is left to the caller.
    async fn review(
        &self,
        status: &InformerStatus,
        (group, plural): &(String, String),
        cluster_scoped: bool,
    ) -> Reviewed {
        use k8s_openapi::api::authorization::v1::{
            ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
        };
        let reviews: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let (namespace, scope) = match (&self.namespace, cluster_scoped) {
            (_, true) => (None, "across the cluster".to_string()),
            (Some(ns), false) => (Some(ns.clone()), format!("in namespace {ns}")),
            (None, false) => (None, "in all namespaces".to_string()),
        };
        let kind = status.kind();
        for verb in ["list", "watch"] {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(verb.into()),
                        group: Some(group.clone()),
                        resource: Some(plural.clone()),
                        namespace: namespace.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            match reviews.create(&Default::default(), &review).await {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| !s.allowed) => {
                    let denied = format!("{verb} {kind} ({plural}) {scope}");
                    if verb == "list" {
                        return Reviewed::Unlistable(denied);
                    }
                    let reason = format!("forbidden by RBAC: cannot {denied}");
                    tracing::error!(%kind, "{reason}: the cache will not follow changes and /readyz fails until it is granted");
                    status.error(reason, Some(403));
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%kind, verb, %error, "cannot review access; the watch will tell");
                    return Reviewed::Unknown;
                }
            }
        }
        Reviewed::Allowed
    }

    /// Starts a watch of a resource known only at run time (a custom resource), before or
    /// after [`start`](Self::start), its changes delivered to `handler` as the typed watches'
    /// are. Its status is among [`statuses`](Self::statuses) until the returned handle is
    /// dropped or stopped, which ends the watch and drops `handler`. A resource RBAC does not
    /// let us list is logged once, not watched, and reported as refused in its status; never
    /// an error.
    pub async fn watch_dynamic(
        &self,
        resource: ApiResource,
        scope: Scope,
        handler: Arc<dyn Handler<DynamicObject>>,
    ) -> DynamicInformer {
        let label = if resource.group.is_empty() {
            resource.kind.clone()
        } else {
            format!("{}.{}", resource.kind, resource.group)
        };
        let status = Arc::new(InformerStatus::counted_in(label, &self.unconnected));
        let cluster_scoped = scope == Scope::Cluster;
        let names = (resource.group.clone(), resource.plural.clone());
        let mut informer = DynamicInformer {
            status: status.clone(),
            id: 0,
            registry: Arc::downgrade(&self.informers),
            watches: self.watches.clone(),
            stop: self.stopping.child_token(),
            task: None,
        };
        // Among the statuses before the access review's round trip, so a resource served is
        // never without its informer in /readyz, even while it is reviewed.
        informer.id = {
            let mut registry = self.informers.lock().unwrap_or_else(|e| e.into_inner());
            registry.next_dynamic += 1;
            let id = registry.next_dynamic;
            registry.dynamic.insert(id, status.clone());
            id
        };
        let refused = match self.review(&status, &names, cluster_scoped).await {
            Reviewed::Unlistable(denied) => Some(denied),
            Reviewed::Allowed | Reviewed::Unknown => None,
        };
        if let Some(denied) = refused {
            let reason = format!("forbidden by RBAC: cannot {denied}");
            tracing::error!(kind = %status.kind(), "{reason}: not served");
            status.refuse(reason);
            return informer;
        }
        if let Some(watches) = &self.watches {
            watches.subscribe(&names.0, &names.1, status.clone());
        }
        let api: Api<DynamicObject> = match (&self.namespace, cluster_scoped) {
            (Some(ns), false) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        };
        let intake = Intake::new(
            self.list_encoding,
            &resource.group,
            &resource.version,
            &resource.kind,
        );
        let watch = Arc::new(Informer::<DynamicObject> {
            resource: names,
            cluster_scoped,
            status,
            handlers: Mutex::new(vec![handler]),
            config: self.config.clone(),
            initial_list: self.initial_list,
            // Reviewed above, before it started.
            reviewed: Arc::new(AtomicBool::new(true)),
            open: Box::new(move |config| {
                crate::watcher::watch(api.clone(), config, intake.clone()).boxed()
            }),
        });
        informer.task = Some(watch.spawn(informer.stop.clone()));
        informer
    }

    /// Starts every registered watch not started yet; each stops when `shutdown` is
    /// cancelled, and so do the [dynamic](Self::watch_dynamic) ones. It may be called again
    /// after more kinds are registered (start-up begins the kinds it knows while it reviews
    /// access to others); the `shutdown` of the first call is the one that counts.
    pub fn start(&self, shutdown: CancellationToken) -> Vec<JoinHandle<()>> {
        let mut registry = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        let link = (!std::mem::replace(&mut registry.linked, true)).then(|| {
            let stopping = self.stopping.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = shutdown.cancelled() => stopping.cancel(),
                    _ = stopping.cancelled() => {}
                }
            })
        });
        let started = registry.started;
        registry.started = registry.order.len();
        registry.order[started..]
            .iter()
            .map(|id| registry.by_type[id].clone().spawn(self.stopping.clone()))
            .chain(link)
            .collect()
    }

    /// Ends every watch this factory started, as cancelling `start`'s `shutdown` does.
    pub fn stop(&self) {
        self.stopping.cancel();
    }

    /// The status of each watch: the typed ones in registration order, then the dynamic ones
    /// running now, in the order they started.
    pub fn statuses(&self) -> Vec<Arc<InformerStatus>> {
        let registry = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        registry
            .order
            .iter()
            .map(|id| registry.by_type[id].status().clone())
            .chain(registry.dynamic.values().cloned())
            .collect()
    }

    /// Whether a watch is not connected (failing now, or not yet connected): one load, so
    /// every request may ask.
    pub fn any_disconnected(&self) -> bool {
        self.unconnected.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// Waits until every watch has delivered its first full list.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), FactoryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let statuses = self.statuses();
        loop {
            // A refused resource is not watched: it would never sync.
            let pending: Vec<String> = statuses
                .iter()
                .filter(|s| !s.is_synced() && !s.is_refused())
                .map(|s| match s.state().last_error {
                    Some(error) => format!("{} ({error})", s.kind()),
                    None => s.kind().to_string(),
                })
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(FactoryError::NotSynced {
                    timeout,
                    kinds: pending,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::Status;

    use crate::Sent;

    use super::*;

    struct Ignore;
    impl Handler<ConfigMap> for Ignore {
        fn on_deltas(&self, _: &[Delta<ConfigMap>]) {}
        fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<ConfigMap>> {
            Box::new(Ignore)
        }
    }
    impl RelistBatch<ConfigMap> for Ignore {
        fn add(&mut self, _: &Delta<ConfigMap>) {}
        fn commit(self: Box<Self>, _: &str) {}
    }

    fn watch_error(code: u16, reason: &str) -> watcher::Error {
        let status: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": reason, "reason": reason, "code": code
        }))
        .unwrap();
        watcher::Error::WatchError(Box::new(status))
    }

    /// Runs an informer over scripted watcher events; its status afterwards.
    async fn status_after(
        events: Vec<Result<Event<ConfigMap>, watcher::Error>>,
    ) -> Arc<InformerStatus> {
        let events = Mutex::new(Some(events));
        let handler: Arc<dyn Handler<ConfigMap>> = Arc::new(Ignore);
        let informer = Informer {
            cluster_scoped: false,
            resource: (String::new(), "configmaps".into()),
            status: Arc::new(InformerStatus::new("ConfigMap")),
            handlers: Mutex::new(vec![handler]),
            config: watcher::Config::default(),
            initial_list: InitialList::Paged,
            reviewed: Arc::new(AtomicBool::new(true)),
            open: Box::new(move |_| {
                let events = events.lock().unwrap().take().unwrap_or_default();
                futures::stream::iter(events).boxed()
            }),
        };
        informer.run(CancellationToken::new()).await;
        informer.status.clone()
    }

    #[tokio::test]
    async fn an_expired_watch_is_a_resync_not_an_outage() {
        let status = status_after(vec![
            Ok(Event::Init),
            Ok(Event::InitDone {
                version: "1".into(),
                encoding: ListEncoding::Json,
            }),
            Err(watch_error(410, "Expired")),
        ])
        .await;
        let state = status.state();
        assert!(state.connected && state.synced, "{state:?}");
        assert_eq!(state.last_error, None);

        let status = status_after(vec![
            Ok(Event::Init),
            Ok(Event::InitDone {
                version: "1".into(),
                encoding: ListEncoding::Json,
            }),
            Err(watch_error(500, "InternalError")),
        ])
        .await;
        let state = status.state();
        assert!(!state.connected, "{state:?}");
        assert_eq!(state.last_error_code, Some(500));
    }

    /// Keeps the names of what the informer committed, and the versions it was told the state
    /// is at: `list V` for a relist, `bookmark V`.
    #[derive(Default)]
    struct Names {
        names: Mutex<Vec<String>>,
        versions: Mutex<Vec<String>>,
    }
    struct NamesBatch(Arc<Names>, Vec<String>);
    impl<K: Watchable> Handler<K> for Names {
        fn on_deltas(&self, deltas: &[Delta<K>]) {
            let mut names = self.names.lock().unwrap();
            names.extend(deltas.iter().map(|d| d.key().name));
        }
        fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<K>> {
            Box::new(NamesBatch(self, Vec::new()))
        }
        fn on_bookmark(&self, version: &str) {
            self.versions
                .lock()
                .unwrap()
                .push(format!("bookmark {version}"));
        }
    }
    impl<K: Watchable> RelistBatch<K> for NamesBatch {
        fn add(&mut self, delta: &Delta<K>) {
            self.1.push(delta.key().name);
        }
        fn commit(self: Box<Self>, version: &str) {
            self.0
                .versions
                .lock()
                .unwrap()
                .push(format!("list {version}"));
            self.0.names.lock().unwrap().extend(self.1);
        }
    }

    /// A ConfigMap as the apiserver may send it: with an explicit null.
    fn config_map(name: &str, rv: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "ns", "name": name, "resourceVersion": rv},
            "immutable": null})
    }

    /// A fake apiserver holding configmaps a and b at resourceVersion 10, serving streaming
    /// lists or refusing them with the given status, and allowing lists in access reviews
    /// when `listable`; answers until the test ends, and names the requests it was sent
    /// (list, streaming list, refused streaming list, watch, review).
    fn apiserver(
        refusal: Option<u16>,
        listable: bool,
    ) -> (
        Client,
        Arc<Mutex<Vec<&'static str>>>,
        tokio::task::JoinHandle<()>,
    ) {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let asked = asked.clone();
            tokio::spawn(async move {
                // Watches from resourceVersion 10 stay open, silent, until the test ends.
                let mut open_watches = Vec::new();
                while let Some((request, send)) = handle.next_request().await {
                    let query = request.uri().query().unwrap_or_default().to_string();
                    let (what, status, body) = if request
                        .uri()
                        .path()
                        .ends_with("selfsubjectaccessreviews")
                    {
                        let review = serde_json::json!({"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SelfSubjectAccessReview", "spec": {},
                            "status": {"allowed": listable}});
                        ("review", 201, review.to_string())
                    } else if query.contains("sendInitialEvents=true") {
                        if let Some(code) = refusal {
                            let refusal = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                                "status": "Failure", "reason": "Refused", "code": code,
                                "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"});
                            ("refused streaming list", code, refusal.to_string())
                        } else {
                            let events = [
                                ("ADDED", config_map("a", "8")),
                                ("ADDED", config_map("b", "9")),
                                (
                                    "BOOKMARK",
                                    serde_json::json!({
                                    "apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"resourceVersion": "10",
                                        "annotations": {"k8s.io/initial-events-end": "true"}}}),
                                ),
                                (
                                    "BOOKMARK",
                                    serde_json::json!({
                                    "apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"resourceVersion": "12"}}),
                                ),
                            ];
                            // The type first, as the apiserver writes an event.
                            let lines: String = events
                                .iter()
                                .map(|(kind, object)| {
                                    format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n")
                                })
                                .collect();
                            ("streaming list", 200, lines)
                        }
                    } else if query.contains("watch=true") {
                        asked.lock().unwrap().push("watch");
                        open_watches.push(send);
                        continue;
                    } else {
                        let list = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMapList",
                            "metadata": {"resourceVersion": "10"},
                            "items": [config_map("a", "8"), config_map("b", "9")]});
                        let what = if query.contains("limit=") {
                            "list"
                        } else {
                            "whole list"
                        };
                        (what, 200, list.to_string())
                    };
                    asked.lock().unwrap().push(what);
                    send.send_response(
                        Response::builder()
                            .status(status)
                            .body(Body::from(body.into_bytes()))
                            .unwrap(),
                    );
                }
            })
        };
        (Client::new(service, "default"), asked, server)
    }

    /// What a ConfigMap informer did against the fake apiserver within `wait`: whether it
    /// synced, the names it committed, whether it streamed, and what it asked.
    struct Run {
        synced: Result<(), FactoryError>,
        names: Vec<String>,
        versions: Vec<String>,
        streaming: bool,
        asked: Vec<&'static str>,
    }

    async fn run_against(refusal: Option<u16>, initial_list: InitialList, wait: Duration) -> Run {
        let (client, asked, server) = apiserver(refusal, true);
        let factory = InformerFactory::new(client, None).with_initial_list(initial_list);
        let names = Arc::new(Names::default());
        factory.add_handler::<ConfigMap>(names.clone()).unwrap();
        let shutdown = CancellationToken::new();
        let tasks = factory.start(shutdown.clone());
        let synced = factory.wait_for_sync(wait).await;
        if synced.is_ok() {
            // The watch is asked for after every event of the list has been handled.
            let deadline = tokio::time::Instant::now() + wait;
            while !asked.lock().unwrap().contains(&"watch")
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        shutdown.cancel();
        futures::future::join_all(tasks).await;
        server.abort();
        let mut committed = names.names.lock().unwrap().clone();
        let versions = names.versions.lock().unwrap().clone();
        committed.sort();
        let asked = asked.lock().unwrap().clone();
        Run {
            synced,
            names: committed,
            versions,
            streaming: factory.statuses()[0].state().streaming_lists,
            asked,
        }
    }

    async fn sync_with(refusal: Option<u16>, initial_list: InitialList) -> Run {
        let run = run_against(refusal, initial_list, Duration::from_secs(5)).await;
        assert!(run.synced.is_ok(), "{:?}", run.synced);
        assert_eq!(run.names, ["a", "b"]);
        run
    }

    #[tokio::test]
    async fn lists_are_whole_by_default() {
        let run = sync_with(None, InitialList::default()).await;
        assert!(!run.streaming);
        assert_eq!(run.asked, ["whole list", "watch"], "one list, no limit");
        // The List's own version, not the newest object's (9).
        assert_eq!(run.versions, ["list 10"]);
    }

    #[tokio::test]
    async fn lists_are_streamed_where_the_apiserver_supports_it() {
        let run = sync_with(None, InitialList::Auto).await;
        assert!(run.streaming);
        assert_eq!(run.asked, ["streaming list", "watch"], "no paged list");
        // The initial-events-end bookmark's version, not the newest object's (9); then a
        // bookmark's.
        assert_eq!(run.versions, ["list 10", "bookmark 12"]);
    }

    #[tokio::test]
    async fn a_refused_streaming_list_falls_back_to_pages() {
        // 422: WatchList disabled; 400: an older apiserver; 403: RBAC grants list, not watch.
        for code in [422, 400, 403] {
            let run = sync_with(Some(code), InitialList::Auto).await;
            assert!(!run.streaming, "{code}");
            assert_eq!(
                run.asked,
                ["refused streaming list", "list", "watch"],
                "{code}"
            );
        }
    }

    #[tokio::test]
    async fn paged_lists_can_be_forced() {
        let run = sync_with(None, InitialList::Paged).await;
        assert!(!run.streaming);
        assert_eq!(run.asked, ["list", "watch"]);
        // The List's own version, not the newest object's (9).
        assert_eq!(run.versions, ["list 10"]);
    }

    #[tokio::test]
    async fn forced_streaming_lists_never_fall_back() {
        let run = run_against(
            Some(422),
            InitialList::Streaming,
            Duration::from_millis(300),
        )
        .await;
        assert!(run.synced.is_err());
        assert!(run.streaming);
        assert!(
            run.asked.iter().all(|a| *a == "refused streaming list"),
            "{:?}",
            run.asked
        );
    }

    /// Keeps the JSON of each object a relist delivered.
    #[derive(Default)]
    struct Jsons(Mutex<Vec<String>>);
    struct JsonsBatch(Arc<Jsons>, Vec<String>);
    impl Handler<Sent<ConfigMap>> for Jsons {
        fn on_deltas(&self, _: &[Delta<Sent<ConfigMap>>]) {}
        fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<Sent<ConfigMap>>> {
            Box::new(JsonsBatch(self, Vec::new()))
        }
    }
    impl RelistBatch<Sent<ConfigMap>> for JsonsBatch {
        fn add(&mut self, delta: &Delta<Sent<ConfigMap>>) {
            if let Delta::Added(o) = delta {
                self.1.push(o.json().to_string());
            }
        }
        fn commit(self: Box<Self>, _: &str) {
            self.0.0.lock().unwrap().extend(self.1);
        }
    }

    #[tokio::test]
    async fn objects_listed_in_pages_or_streamed_come_as_sent() {
        for initial_list in [
            InitialList::Whole,
            InitialList::Paged,
            InitialList::Streaming,
        ] {
            let (client, _, server) = apiserver(None, true);
            let factory = InformerFactory::new(client, None).with_initial_list(initial_list);
            let jsons = Arc::new(Jsons::default());
            factory
                .add_handler::<Sent<ConfigMap>>(jsons.clone())
                .unwrap();
            let shutdown = CancellationToken::new();
            let tasks = factory.start(shutdown.clone());
            factory.wait_for_sync(Duration::from_secs(5)).await.unwrap();
            shutdown.cancel();
            futures::future::join_all(tasks).await;
            server.abort();
            let mut jsons = jsons.0.lock().unwrap().clone();
            jsons.sort();
            assert_eq!(jsons.len(), 2, "{initial_list:?}: {jsons:?}");
            for (json, (name, rv)) in jsons.iter().zip([("a", "8"), ("b", "9")]) {
                assert!(
                    json.starts_with(r#"{"apiVersion":"v1","kind":"ConfigMap","#),
                    "{json}"
                );
                let kept: serde_json::Value = serde_json::from_str(json).unwrap();
                assert_eq!(
                    kept,
                    config_map(name, rv),
                    "{initial_list:?}: the null kept"
                );
            }
        }
    }

    fn widgets() -> ApiResource {
        ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        }
    }

    #[tokio::test]
    async fn a_dynamic_watch_runs_from_any_time_until_its_handle_goes() {
        let (client, asked, server) = apiserver(None, true);
        let factory = InformerFactory::new(client, None).with_initial_list(InitialList::Paged);
        let shutdown = CancellationToken::new();
        let tasks = factory.start(shutdown.clone());
        let names = Arc::new(Names::default());
        let handle = factory
            .watch_dynamic(widgets(), Scope::Namespaced, names.clone())
            .await;
        factory.wait_for_sync(Duration::from_secs(5)).await.unwrap();
        let kinds: Vec<String> = factory
            .statuses()
            .iter()
            .map(|s| s.kind().to_string())
            .collect();
        assert_eq!(kinds, ["Widget.example.com"]);
        assert_eq!(*names.names.lock().unwrap(), ["a", "b"]);
        assert_eq!(names.versions.lock().unwrap()[0], "list 10");
        assert_eq!(asked.lock().unwrap()[..3], ["review", "review", "list"]);

        handle.stop().await;
        assert!(factory.statuses().is_empty(), "its status is gone");
        assert_eq!(Arc::strong_count(&names), 1, "its handler is dropped");
        shutdown.cancel();
        futures::future::join_all(tasks).await;
        server.abort();
    }

    /// Waits (5 s at most) until the test holds the only reference to `names`.
    async fn wait_until_only_owner(names: &Arc<Names>) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(names) > 1 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn the_factory_shutdown_ends_dynamic_watches_and_a_drop_too() {
        let (client, _, server) = apiserver(None, true);
        let factory = InformerFactory::new(client, None).with_initial_list(InitialList::Paged);
        let names = Arc::new(Names::default());
        // Before start: it runs at once all the same.
        let handle = factory
            .watch_dynamic(widgets(), Scope::Cluster, names.clone())
            .await;
        let shutdown = CancellationToken::new();
        let tasks = factory.start(shutdown.clone());
        factory.wait_for_sync(Duration::from_secs(5)).await.unwrap();
        shutdown.cancel();
        futures::future::join_all(tasks).await;
        wait_until_only_owner(&names).await;
        assert_eq!(Arc::strong_count(&names), 1, "the shutdown ended the watch");
        handle.stop().await;

        let handle = factory
            .watch_dynamic(widgets(), Scope::Cluster, names.clone())
            .await;
        drop(handle);
        assert!(factory.statuses().is_empty());
        wait_until_only_owner(&names).await;
        assert_eq!(
            Arc::strong_count(&names),
            1,
            "a dropped handle ends the watch"
        );
        server.abort();
    }

    #[tokio::test]
    async fn a_dynamic_resource_we_may_not_list_is_reported_not_watched() {
        let (client, asked, server) = apiserver(None, false);
        let factory = InformerFactory::new(client, Some("ns".into()));
        let names = Arc::new(Names::default());
        let handle = factory
            .watch_dynamic(widgets(), Scope::Namespaced, names.clone())
            .await;
        let state = handle.status().state();
        assert!(state.refused && state.is_denied(), "{state:?}");
        assert_eq!(
            state.last_error.as_deref(),
            Some("forbidden by RBAC: cannot list Widget.example.com (widgets) in namespace ns")
        );
        assert_eq!(factory.statuses().len(), 1, "reported");
        // Never synced, and not waited for.
        factory
            .wait_for_sync(Duration::from_millis(100))
            .await
            .unwrap();
        assert_eq!(
            *asked.lock().unwrap(),
            ["review"],
            "nothing listed or watched"
        );
        assert_eq!(Arc::strong_count(&names), 1, "no handler kept");
        drop(handle);
        assert!(factory.statuses().is_empty());
        server.abort();
    }

    #[tokio::test]
    async fn kinds_registered_after_a_start_start_with_the_next_one() {
        let (client, _, server) = apiserver(None, true);
        let factory = InformerFactory::new(client, None);
        let first = Arc::new(Names::default());
        factory.add_handler::<ConfigMap>(first.clone()).unwrap();
        let shutdown = CancellationToken::new();
        let mut tasks = factory.start(shutdown.clone());
        assert!(
            matches!(
                factory.add_handler::<ConfigMap>(Arc::new(Names::default())),
                Err(FactoryError::AlreadyStarted { .. })
            ),
            "a started watch takes no new handler: it would miss what it told before"
        );
        let second = Arc::new(Names::default());
        factory
            .add_handler::<Sent<ConfigMap>>(second.clone())
            .unwrap();
        tasks.extend(factory.start(shutdown.clone()));
        factory.wait_for_sync(Duration::from_secs(5)).await.unwrap();
        assert_eq!(*first.names.lock().unwrap(), ["a", "b"]);
        assert_eq!(*second.names.lock().unwrap(), ["a", "b"]);

        factory.stop();
        let ended =
            tokio::time::timeout(Duration::from_secs(5), futures::future::join_all(tasks)).await;
        assert!(ended.is_ok(), "stop ends every watch of both starts");
        server.abort();
    }

    #[tokio::test]
    async fn a_kind_another_informer_names_already_is_named_with_its_group() {
        let (client, _, server) = apiserver(None, true);
        let factory = InformerFactory::new(client, None);
        let names = Arc::new(Names::default());
        factory
            .add_handler::<k8s_openapi::api::core::v1::Event>(names.clone())
            .unwrap();
        factory
            .add_handler::<k8s_openapi::api::events::v1::Event>(names.clone())
            .unwrap();
        // A second handler of the same type shares its informer and its name.
        factory
            .add_handler::<k8s_openapi::api::core::v1::Event>(names.clone())
            .unwrap();
        factory.add_handler::<ConfigMap>(names).unwrap();
        let kinds: Vec<String> = factory
            .statuses()
            .iter()
            .map(|s| s.kind().to_string())
            .collect();
        assert_eq!(kinds, ["Event", "Event.events.k8s.io", "ConfigMap"]);
        server.abort();
    }
}
