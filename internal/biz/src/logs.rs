//! Containers' logs. A pod's: the request checked, then the container checked against what
//! the cache knows of the pod (it exists, has that container, the container has run), so
//! the caller gets a clear refusal instead of the kubelet's; the lines are relayed from the
//! apiserver. A set of pods' (a workload's, or a label selector's): each selected pod's
//! containers merged into one stream of tagged lines, the set driven by the cache's watch of
//! the pods, so a pod joins once its containers start and its streams end when it goes.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{AbortHandle, BoxStream, SelectAll, Stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;

use super::{BizError, Workloads, object_namespace, object_namespace_of};
use k8sdao::{
    DaoError, ListQuery, LogOptions, LogSource, ReadAt, WatchEvent, WatchStream, WorkloadSource,
    WorkloadWriter,
};
use model::catalog::PodOwnership;
use model::{
    DeploymentRecord, GenericRecord, Kind, PodRecord, Record, ReplicaSetRecord, Resource, Typed,
};
use selector::LabelSelector;

/// `tailLines` above this are refused: a log that long is read whole instead (no tailLines).
pub const MAX_TAIL_LINES: i64 = 100_000;
/// `sinceSeconds` above this (about ten years) are refused: every log is younger.
pub const MAX_SINCE_SECONDS: i64 = 10 * 366 * 24 * 3600;
/// Pods one merged log follows at once by default (`--max-log-streams`).
pub const DEFAULT_MAX_LOG_STREAMS: usize = 50;

/// The query of a log request as given; [`Workloads`] checks it.
#[derive(Clone, Debug, Default)]
pub struct LogRequest {
    /// Default `default`.
    pub namespace: Option<String>,
    /// A pod's log: default the pod's `kubectl.kubernetes.io/default-container`, else its
    /// only container. A merged log: only this container of each pod (default all).
    pub container: Option<String>,
    pub previous: Option<String>,
    pub tail_lines: Option<String>,
    pub since_seconds: Option<String>,
    /// RFC 3339; the apiserver reads from the start of its second.
    pub since_time: Option<String>,
    pub timestamps: Option<String>,
    pub follow: Option<String>,
}

/// An RFC 3339 time, as the apiserver's `sinceTime` (a fraction of a second is allowed).
fn rfc3339_time(
    what: &'static str,
    value: Option<&str>,
) -> Result<Option<jiff::Timestamp>, BizError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    value
        .parse::<jiff::Timestamp>()
        .map(Some)
        .map_err(|_| BizError::Invalid {
            what,
            value: value.to_string(),
            rule: "expected an RFC 3339 time, such as 2026-01-02T15:04:05Z",
        })
}

/// A boolean query parameter as the apiserver takes it.
fn flag(what: &'static str, value: Option<&str>) -> Result<bool, BizError> {
    match value {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(BizError::Invalid {
            what,
            value: other.to_string(),
            rule: "expected true or false",
        }),
    }
}

fn bounded(
    what: &'static str,
    value: Option<&str>,
    min: i64,
    max: i64,
    rule: &'static str,
) -> Result<Option<i64>, BizError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match value.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(BizError::Invalid {
            what,
            value: value.to_string(),
            rule,
        }),
    }
}

impl LogRequest {
    /// The options every container's log is read with (the container is chosen later).
    fn options(&self) -> Result<LogOptions, BizError> {
        // The apiserver refuses 0: "since" must be in the past.
        let since_seconds = bounded(
            "sinceSeconds",
            self.since_seconds.as_deref(),
            1,
            MAX_SINCE_SECONDS,
            "must be an integer from 1 to 316224000 (ten years)",
        )?;
        let since_time = rfc3339_time("sinceTime", self.since_time.as_deref())?;
        if let (Some(_), Some(_), Some(given)) =
            (since_seconds, since_time, self.since_time.as_deref())
        {
            return Err(BizError::Invalid {
                what: "sinceTime",
                value: given.to_string(),
                rule: "at most one of sinceTime or sinceSeconds may be given",
            });
        }
        Ok(LogOptions {
            container: String::new(),
            previous: flag("previous", self.previous.as_deref())?,
            tail_lines: bounded(
                "tailLines",
                self.tail_lines.as_deref(),
                0,
                MAX_TAIL_LINES,
                "must be an integer from 0 to 100000",
            )?,
            since_seconds,
            since_time,
            timestamps: flag("timestamps", self.timestamps.as_deref())?,
            follow: flag("follow", self.follow.as_deref())?,
        })
    }

    fn container(&self) -> Result<Option<&str>, BizError> {
        match self.container.as_deref().filter(|c| !c.is_empty()) {
            Some(c) if !selector::validation::is_dns1123_label(c) => Err(BizError::Invalid {
                what: "container",
                value: c.to_string(),
                rule: super::LABEL_RULE,
            }),
            other => Ok(other),
        }
    }
}

/// What the pod's JSON says of its containers.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodJson {
    metadata: MetaJson,
    spec: SpecJson,
    status: StatusJson,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MetaJson {
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SpecJson {
    containers: Vec<NamedJson>,
    init_containers: Vec<NamedJson>,
    ephemeral_containers: Vec<NamedJson>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedJson {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct StatusJson {
    phase: String,
    container_statuses: Vec<ContainerStatusJson>,
    init_container_statuses: Vec<ContainerStatusJson>,
    ephemeral_container_statuses: Vec<ContainerStatusJson>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatusJson {
    name: String,
    state: StateJson,
    last_state: StateJson,
    #[serde(rename = "containerID")]
    container_id: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct StateJson {
    waiting: Option<WaitingJson>,
    running: Option<Value>,
    terminated: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct WaitingJson {
    reason: Option<String>,
}

/// kubectl's annotation naming the container `kubectl logs` reads by default.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

/// A pod's containers as the cache knows them.
#[derive(Debug)]
struct Containers {
    pod: String,
    phase: String,
    /// `spec.containers`, in order: what a merged log reads.
    main: Vec<String>,
    /// Every container, init and ephemeral ones too: what a pod's log may read.
    all: Vec<String>,
    default: Option<String>,
    statuses: HashMap<String, ContainerStatusJson>,
}

/// Whether a container's log can be read, and if not why.
#[derive(Debug, PartialEq, Eq)]
enum Readable {
    Yes { container_id: Option<String> },
    No(String),
}

impl Containers {
    fn of(pod: &PodRecord) -> Result<Containers, BizError> {
        let raw = pod.raw_json().map_err(BizError::Internal)?;
        let json: PodJson = serde_json::from_slice(&raw).map_err(|e| {
            BizError::Internal(format!("cached pod {} is unreadable: {e}", pod.key))
        })?;
        let main: Vec<String> = json.spec.containers.into_iter().map(|c| c.name).collect();
        let all = json
            .spec
            .init_containers
            .into_iter()
            .chain(json.spec.ephemeral_containers)
            .map(|c| c.name)
            .fold(main.clone(), |mut all, name| {
                all.push(name);
                all
            });
        let statuses = json
            .status
            .container_statuses
            .into_iter()
            .chain(json.status.init_container_statuses)
            .chain(json.status.ephemeral_container_statuses)
            .map(|s| (s.name.clone(), s))
            .collect();
        Ok(Containers {
            pod: pod.key.name.clone(),
            phase: json.status.phase,
            default: json.metadata.annotations.get(DEFAULT_CONTAINER).cloned(),
            main,
            all,
            statuses,
        })
    }

    fn listed(&self) -> String {
        self.all.join(", ")
    }

    /// The container asked for, else the pod's default one, else its only one.
    fn choose(&self, asked: Option<&str>) -> Result<String, BizError> {
        if let Some(name) = asked {
            return if self.all.iter().any(|c| c == name) {
                Ok(name.to_string())
            } else {
                Err(BizError::Query(format!(
                    "pod {} has no container {name:?}: its containers are {}",
                    self.pod,
                    self.listed()
                )))
            };
        }
        match (&self.default, self.main.as_slice()) {
            (Some(default), _) if self.all.contains(default) => Ok(default.clone()),
            (_, [only]) => Ok(only.clone()),
            _ => Err(BizError::Query(format!(
                "pod {} has several containers: choose one with container= ({})",
                self.pod,
                self.listed()
            ))),
        }
    }

    /// The kubelet's rules: the current log of a container that has run, or is waiting to
    /// run again (its last run's); the previous log of one that has restarted.
    fn readable(&self, container: &str, previous: bool) -> Readable {
        let Some(status) = self.statuses.get(container) else {
            return Readable::No(format!(
                "container {container} of pod {} has not started: the pod is {}",
                self.pod,
                if self.phase.is_empty() {
                    "not scheduled yet"
                } else {
                    &self.phase
                }
            ));
        };
        if previous {
            return if status.last_state.terminated.is_some() {
                Readable::Yes {
                    container_id: status.container_id.clone(),
                }
            } else {
                Readable::No(format!(
                    "container {container} of pod {} has no previous run: it has not restarted",
                    self.pod
                ))
            };
        }
        let state = &status.state;
        if state.running.is_some()
            || state.terminated.is_some()
            || status.last_state.terminated.is_some()
        {
            return Readable::Yes {
                container_id: status.container_id.clone(),
            };
        }
        let reason = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.as_deref())
            .unwrap_or("waiting");
        Readable::No(format!(
            "container {container} of pod {} has not started: {reason}",
            self.pod
        ))
    }
}

/// A pod's log: which container, and its lines.
pub struct PodLog {
    pub pod: String,
    pub container: String,
    pub follow: bool,
    pub lines: BoxStream<'static, Result<Bytes, BizError>>,
}

/// A metav1.LabelSelector (`matchLabels`, `matchExpressions`) as a selector.
fn selector_of(object: &Value) -> Result<LabelSelector, String> {
    let selector = &object["spec"]["selector"];
    let mut terms = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (key, value) in labels {
            terms.push(format!("{key}={}", value.as_str().unwrap_or_default()));
        }
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values = || {
            e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        terms.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values()),
            "NotIn" => format!("{key} notin ({})", values()),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => return Err(format!("unknown selector operator {other:?}")),
        });
    }
    if terms.is_empty() {
        // An empty selector would follow every pod of the namespace.
        return Err("it has no pod selector".into());
    }
    LabelSelector::parse(&terms.join(",")).map_err(|e| e.to_string())
}

/// Whether the caller may read a pod's log (`--auth delegated`: its own `get pods/log` on
/// that pod).
pub type PodAllowed = Arc<dyn Fn(String) -> BoxFuture<'static, bool> + Send + Sync>;

/// The caller's right to each pod's log: asked as a pod joins a merged log, and again for
/// every pod followed each time `rechecks` ticks (the caller's rights may have changed); a
/// pod refused then ends the merged log, as a watch ends once its caller may no longer see
/// what it shows.
pub struct PodGate {
    pub allows: PodAllowed,
    pub rechecks: BoxStream<'static, ()>,
}

/// What a merged log sends: lines tagged with their pod and container, and what happens to
/// the set.
#[derive(Clone, Debug, PartialEq)]
pub enum MergedEvent {
    Line {
        pod: Arc<str>,
        container: Arc<str>,
        line: Bytes,
    },
    /// A container's log is followed from now on.
    Joined { pod: Arc<str>, container: Arc<str> },
    /// A container's log ended: `reason` says why.
    Left {
        pod: Arc<str>,
        container: Arc<str>,
        reason: String,
    },
    /// The pod is not followed: `limit` pods are followed already (`--max-log-streams`); it
    /// joins when one leaves.
    Cut { pod: Arc<str>, limit: usize },
    /// The pod's log was not opened: the caller may not read it, or the apiserver refused.
    Refused { pod: Arc<str>, reason: String },
    /// The set of pods can no longer be followed (the watch failed); the stream ends.
    Ended { reason: String },
}

/// A merged log, and the selector that picks its pods.
pub struct MergedLog {
    pub selector: String,
    /// Whether it stays open (follow=true), or ends once the pods there were read.
    pub follow: bool,
    pub events: BoxStream<'static, MergedEvent>,
}

impl<S: WorkloadSource + LogSource + 'static> Workloads<S> {
    /// The container's log, once the cache shows the pod has it and it has run.
    pub async fn pod_log(&self, name: &str, req: &LogRequest) -> Result<PodLog, BizError> {
        let ns = object_namespace_of(req.namespace.as_deref(), name)?;
        let mut options = req.options()?;
        let asked = req.container()?;
        let pod = self
            .source()
            .get::<PodRecord>(PodRecord::resource(), ns, name)
            .await?;
        let containers = Containers::of(&pod)?;
        options.container = containers.choose(asked)?;
        if let Readable::No(reason) = containers.readable(&options.container, options.previous) {
            return Err(BizError::Query(reason));
        }
        let lines = self.source().container_log(ns, name, &options).await?;
        Ok(PodLog {
            pod: name.to_string(),
            container: options.container,
            follow: options.follow,
            lines: lines.map(|l| l.map_err(BizError::from)).boxed(),
        })
    }

    /// The merged log of the pods `labelSelector` picks in the namespace.
    pub async fn selected_pods_log(
        self: &Arc<Self>,
        label_selector: Option<&str>,
        req: &LogRequest,
        max_pods: usize,
        gate: Option<PodGate>,
    ) -> Result<MergedLog, BizError> {
        let ns = object_namespace(req.namespace.as_deref())?;
        let selector = match label_selector.filter(|s| !s.trim().is_empty()) {
            Some(s) => LabelSelector::parse(s).map_err(BizError::Selector)?,
            None => {
                return Err(BizError::Query(
                    "labelSelector is required: the pods whose logs to merge".into(),
                ));
            }
        };
        if selector.requirements().len() > super::MAX_SELECTOR_REQUIREMENTS {
            return Err(BizError::TooLarge {
                what: "labelSelector",
                actual: selector.requirements().len(),
                limit: super::MAX_SELECTOR_REQUIREMENTS,
                unit: "requirements",
            });
        }
        self.merged(ns, selector, None, None, req, max_pods, gate)
            .await
    }

    /// The merged log of the pods `pods` watches in `ns`; `selector` is what picks them,
    /// `owner` (a uid) the controller they must have, if any.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one merged log, each named"
    )]
    async fn merged(
        self: &Arc<Self>,
        ns: &str,
        selector: LabelSelector,
        pods: Option<WatchStream<PodRecord>>,
        owner: Option<Arc<str>>,
        req: &LogRequest,
        max_pods: usize,
        gate: Option<PodGate>,
    ) -> Result<MergedLog, BizError> {
        let options = req.options()?;
        let only = req.container()?.map(str::to_string);
        let pods = match pods {
            Some(pods) => pods,
            None => {
                let query = ListQuery {
                    namespace: Some(ns.to_string()),
                    labels: selector.clone(),
                    ..ListQuery::default()
                };
                self.source()
                    .watch::<PodRecord>(PodRecord::resource(), &query, ReadAt::Newest)
                    .await?
            }
        };
        let opener: Opener = {
            let workloads = self.clone();
            let ns = ns.to_string();
            Arc::new(move |pod: String, options: LogOptions| {
                let (workloads, ns) = (workloads.clone(), ns.clone());
                Box::pin(async move { workloads.source().container_log(&ns, &pod, &options).await })
            })
        };
        let merge = Merge::new(pods, owner, options, only, max_pods, gate, opener);
        Ok(MergedLog {
            selector: selector.to_string(),
            follow: merge.follow,
            events: merge.boxed(),
        })
    }
}

impl<S: WorkloadSource + WorkloadWriter + LogSource + 'static> Workloads<S> {
    /// The merged log of the pods the workload `name` of `resource` runs, as `ownership`
    /// says it owns them: its controlled pods among those its `spec.selector` picks, or
    /// (a Deployment's) the pods of the ReplicaSets it controls. NotFound if it is not there.
    pub async fn workload_log(
        self: &Arc<Self>,
        resource: &Resource,
        ownership: PodOwnership,
        name: &str,
        req: &LogRequest,
        max_pods: usize,
        gate: Option<PodGate>,
    ) -> Result<MergedLog, BizError> {
        let ns = object_namespace_of(req.namespace.as_deref(), name)?;
        req.options()?;
        let object = self.workload_json(resource, ns, name).await?;
        let selector = selector_of(&object).map_err(|reason| {
            BizError::Query(format!(
                "cannot merge the logs of {} {name}: {reason}",
                resource.kind
            ))
        })?;
        let (pods, owner) = match ownership {
            PodOwnership::ThroughReplicaSets => (
                Some(self.source().watch_pods_of_deployment(ns, name).await?),
                None,
            ),
            PodOwnership::Controller => {
                let uid = object["metadata"]["uid"]
                    .as_str()
                    .filter(|uid| !uid.is_empty())
                    .ok_or_else(|| {
                        BizError::Internal(format!("{} {name} has no uid", resource.kind))
                    })?;
                (None, Some(Arc::from(uid)))
            }
        };
        self.merged(ns, selector, pods, owner, req, max_pods, gate)
            .await
    }

    /// A workload as JSON: a typed kind's read live (its record keeps no selector), any
    /// other's from its cache.
    async fn workload_json(
        &self,
        resource: &Resource,
        ns: &str,
        name: &str,
    ) -> Result<Value, BizError> {
        let json = match resource.typed() {
            Some(Kind::Deployment) => {
                self.source()
                    .object_json::<DeploymentRecord>(ns, name)
                    .await?
            }
            Some(Kind::ReplicaSet) => {
                self.source()
                    .object_json::<ReplicaSetRecord>(ns, name)
                    .await?
            }
            Some(other) => {
                return Err(BizError::Internal(format!("{} runs no pods", other.name())));
            }
            None => self
                .source()
                .get::<GenericRecord>(resource, ns, name)
                .await?
                .raw_json()
                .map_err(BizError::Internal)?,
        };
        serde_json::from_slice(&json)
            .map_err(|e| BizError::Internal(format!("the {} is unreadable: {e}", resource.kind)))
    }
}

type Opener = Arc<
    dyn Fn(String, LogOptions) -> BoxFuture<'static, Result<k8sdao::LogLines, DaoError>>
        + Send
        + Sync,
>;

/// One container log being followed: its container's ID when it was opened (a restarted
/// container gets a new one, and a new log), and how to end it.
struct Followed {
    container_id: Option<String>,
    abort: AbortHandle,
}

/// What each container stream yields into the merge: an event to pass on, or its end.
enum Inner {
    Event(MergedEvent),
    Over {
        pod: Arc<str>,
        container: Arc<str>,
        reason: String,
    },
}

/// The merge of a set of pods' logs: the pods' watch decides who is followed, the containers'
/// streams are polled round robin only when the client takes the next event, so each holds at
/// most one line and the slowest client slows only its own streams.
struct Merge {
    /// None once the set is fixed (without follow: after the initial list) or lost.
    pods: Option<WatchStream<PodRecord>>,
    /// The uid a pod's controller must have to be in the set, if any.
    owner: Option<Arc<str>>,
    follow: bool,
    options: LogOptions,
    only: Option<String>,
    max_pods: usize,
    gate: Option<PodAllowed>,
    /// When the pods followed are checked again against the gate.
    rechecks: Option<BoxStream<'static, ()>>,
    /// The check under way: the first pod followed the gate refuses now, if any.
    recheck: Option<BoxFuture<'static, Option<Arc<str>>>>,
    opener: Opener,
    streams: SelectAll<BoxStream<'static, Inner>>,
    /// Pod → container → its stream.
    following: HashMap<Arc<str>, HashMap<Arc<str>, Followed>>,
    /// Pods that would be followed but for the limit, with their latest state.
    waiting: BTreeMap<Arc<str>, Arc<PodRecord>>,
    /// Pods whose log could not be opened: not tried again.
    refused: HashSet<Arc<str>>,
    /// Events to send before the next line.
    notices: VecDeque<MergedEvent>,
}

impl Merge {
    fn new(
        pods: WatchStream<PodRecord>,
        owner: Option<Arc<str>>,
        options: LogOptions,
        only: Option<String>,
        max_pods: usize,
        gate: Option<PodGate>,
        opener: Opener,
    ) -> Merge {
        let (gate, rechecks) = gate.map(|g| (g.allows, g.rechecks)).unzip();
        Merge {
            pods: Some(pods),
            owner,
            follow: options.follow,
            options,
            only,
            max_pods,
            gate,
            rechecks,
            recheck: None,
            opener,
            streams: SelectAll::new(),
            following: HashMap::new(),
            waiting: BTreeMap::new(),
            refused: HashSet::new(),
            notices: VecDeque::new(),
        }
    }

    /// Whether the pod is one of the set: controlled by the owner, if the set has one.
    fn is_member(&self, pod: &PodRecord) -> bool {
        self.owner.as_ref().is_none_or(|uid| {
            pod.owner
                .as_ref()
                .is_some_and(|owner| owner.uid.as_str() == &**uid)
        })
    }

    fn apply(&mut self, event: WatchEvent<PodRecord>) {
        match event {
            WatchEvent::Added(pod) | WatchEvent::Modified(pod) if self.is_member(&pod) => {
                self.consider(pod)
            }
            WatchEvent::Added(pod) | WatchEvent::Modified(pod) => {
                self.leave(&pod, "the pod is no longer controlled by the workload")
            }
            WatchEvent::Deleted(pod) => self.leave(&pod, "the pod is gone"),
            WatchEvent::Synced { .. } => {
                if !self.follow {
                    // Without follow the set is the pods there now.
                    self.pods = None;
                    self.waiting.clear();
                }
            }
        }
    }

    fn leave(&mut self, pod: &PodRecord, reason: &str) {
        let name: Arc<str> = Arc::from(pod.key.name.as_ref());
        self.waiting.remove(&name);
        self.stop(&name, reason);
        self.admit_waiting();
    }

    /// Nothing more is followed: the stream ends, saying why.
    fn end(&mut self, reason: String) {
        self.pods = None;
        self.rechecks = None;
        self.recheck = None;
        self.streams = SelectAll::new();
        self.following.clear();
        self.waiting.clear();
        self.notices.push_back(MergedEvent::Ended { reason });
    }

    /// A pod followed whose log the caller may no longer read, once a check the rechecks
    /// started has found one.
    fn poll_rechecks(&mut self, cx: &mut Context<'_>) -> Option<Arc<str>> {
        if self.recheck.is_none()
            && let Some(ticks) = self.rechecks.as_mut()
        {
            match ticks.poll_next_unpin(cx) {
                Poll::Ready(Some(())) => {
                    let allows = self.gate.clone()?;
                    let pods: Vec<Arc<str>> = self.following.keys().cloned().collect();
                    self.recheck = Some(Box::pin(async move {
                        for pod in pods {
                            if !allows(pod.to_string()).await {
                                return Some(pod);
                            }
                        }
                        None
                    }));
                }
                Poll::Ready(None) => self.rechecks = None,
                Poll::Pending => {}
            }
        }
        let refused = match self.recheck.as_mut()?.as_mut().poll(cx) {
            Poll::Ready(refused) => refused,
            Poll::Pending => return None,
        };
        self.recheck = None;
        // The next tick may be ready already.
        cx.waker().wake_by_ref();
        refused
    }

    fn stop(&mut self, pod: &Arc<str>, reason: &str) {
        for (container, followed) in self.following.remove(pod).into_iter().flatten() {
            followed.abort.abort();
            self.notices.push_back(MergedEvent::Left {
                pod: pod.clone(),
                container,
                reason: reason.to_string(),
            });
        }
    }

    fn admit_waiting(&mut self) {
        while self.following.len() < self.max_pods
            && let Some((_, pod)) = self.waiting.pop_first()
        {
            self.consider(pod);
        }
    }

    /// Follows the pod's containers that have started and are not followed yet.
    fn consider(&mut self, pod: Arc<PodRecord>) {
        let name: Arc<str> = Arc::from(pod.key.name.as_ref());
        if self.refused.contains(&name) {
            return;
        }
        let containers = match Containers::of(&pod) {
            Ok(c) => c,
            Err(e) => {
                self.notices.push_back(MergedEvent::Refused {
                    pod: name,
                    reason: e.to_string(),
                });
                return;
            }
        };
        let selected: Vec<String> = containers
            .main
            .iter()
            .filter(|c| self.only.as_ref().is_none_or(|only| only == *c))
            .cloned()
            .collect();
        for container in selected {
            let Readable::Yes { container_id } =
                containers.readable(&container, self.options.previous)
            else {
                continue;
            };
            let current = self
                .following
                .get(&name)
                .and_then(|f| f.get(container.as_str()));
            if current.is_some_and(|f| f.container_id == container_id) {
                continue;
            }
            if !self.following.contains_key(&name) && self.following.len() >= self.max_pods {
                if self.waiting.insert(name.clone(), pod.clone()).is_none() {
                    self.notices.push_back(MergedEvent::Cut {
                        pod: name.clone(),
                        limit: self.max_pods,
                    });
                }
                return;
            }
            self.follow_container(&name, Arc::from(container.as_str()), container_id);
        }
    }

    fn follow_container(&mut self, pod: &Arc<str>, container: Arc<str>, id: Option<String>) {
        let options = LogOptions {
            container: container.to_string(),
            ..self.options.clone()
        };
        let (open, gate) = (self.opener.clone(), self.gate.clone());
        let p = pod.clone();
        let opened = async move {
            if let Some(gate) = gate
                && !gate(p.to_string()).await
            {
                return Err(format!("no get pods/log on pod {p}"));
            }
            open(p.to_string(), options)
                .await
                .map_err(|e| e.to_string())
        };
        let (p, c) = (pod.clone(), container.clone());
        let events = futures::stream::once(opened).flat_map(move |opened| match opened {
            Ok(lines) => {
                let joined = MergedEvent::Joined {
                    pod: p.clone(),
                    container: c.clone(),
                };
                futures::stream::once(futures::future::ready(Inner::Event(joined)))
                    .chain(tagged(lines, p.clone(), c.clone()))
                    .boxed()
            }
            Err(reason) => {
                let refused = MergedEvent::Refused {
                    pod: p.clone(),
                    reason,
                };
                futures::stream::once(futures::future::ready(Inner::Event(refused))).boxed()
            }
        });
        // A stopped stream ends at once and says nothing more: whoever stopped it did.
        let (events, abort) = futures::stream::abortable(events);
        let followed = Followed {
            container_id: id,
            abort,
        };
        if let Some(old) = self
            .following
            .entry(pod.clone())
            .or_default()
            .insert(container, followed)
        {
            // A restarted container: its new run has a log of its own.
            old.abort.abort();
        }
        self.streams.push(events.boxed());
    }

    /// A container's stream ended by itself (not stopped): it leaves the set.
    fn over(&mut self, pod: &Arc<str>, container: &Arc<str>, reason: String) -> MergedEvent {
        if let Some(containers) = self.following.get_mut(pod) {
            containers.remove(container);
            if containers.is_empty() {
                self.following.remove(pod);
                self.admit_waiting();
            }
        }
        MergedEvent::Left {
            pod: pod.clone(),
            container: container.clone(),
            reason,
        }
    }
}

/// A container's lines as events, then its end and why.
fn tagged(
    lines: k8sdao::LogLines,
    pod: Arc<str>,
    container: Arc<str>,
) -> impl Stream<Item = Inner> + Send {
    futures::stream::unfold(Some(lines), move |lines| {
        let (pod, container) = (pod.clone(), container.clone());
        async move {
            let mut lines = lines?;
            match lines.next().await {
                Some(Ok(line)) => Some((
                    Inner::Event(MergedEvent::Line {
                        pod,
                        container,
                        line,
                    }),
                    Some(lines),
                )),
                Some(Err(e)) => Some((
                    Inner::Over {
                        pod,
                        container,
                        reason: e.to_string(),
                    },
                    None,
                )),
                None => Some((
                    Inner::Over {
                        pod,
                        container,
                        reason: "its log ended".into(),
                    },
                    None,
                )),
            }
        }
    })
}

impl Stream for Merge {
    type Item = MergedEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<MergedEvent>> {
        let this = &mut *self;
        loop {
            if let Some(notice) = this.notices.pop_front() {
                return Poll::Ready(Some(notice));
            }
            if let Some(pod) = this.poll_rechecks(cx) {
                this.end(format!("no get pods/log on pod {pod} any more"));
                continue;
            }
            if let Some(pods) = this.pods.as_mut() {
                match pods.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(event))) => {
                        this.apply(event);
                        continue;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.end(format!("the pods can no longer be followed: {e}"));
                        continue;
                    }
                    Poll::Ready(None) => {
                        this.pods = None;
                        continue;
                    }
                    Poll::Pending => {}
                }
            }
            match this.streams.poll_next_unpin(cx) {
                Poll::Ready(Some(Inner::Event(MergedEvent::Refused { pod, reason }))) => {
                    // Not retried: the pod leaves the set, room for a waiting one.
                    this.refused.insert(pod.clone());
                    if let Some(containers) = this.following.remove(&pod) {
                        containers.values().for_each(|f| f.abort.abort());
                        this.admit_waiting();
                    }
                    return Poll::Ready(Some(MergedEvent::Refused { pod, reason }));
                }
                Poll::Ready(Some(Inner::Event(event))) => return Poll::Ready(Some(event)),
                Poll::Ready(Some(Inner::Over {
                    pod,
                    container,
                    reason,
                })) => return Poll::Ready(Some(this.over(&pod, &container, reason))),
                // No stream now: the end, unless the watch may bring pods.
                Poll::Ready(None) if this.pods.is_none() && this.notices.is_empty() => {
                    return Poll::Ready(None);
                }
                Poll::Ready(None) if this.notices.is_empty() => return Poll::Pending,
                Poll::Ready(None) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use model::Record;
    use model::fixtures::mk_pod;
    use serde_json::json;
    use std::sync::Mutex;

    /// A pod of `containers`, each in the state given (`running`, `waiting`, `restarted`:
    /// waiting after a run, `none`: no status yet).
    fn pod(name: &str, containers: &[(&str, &str)]) -> Arc<PodRecord> {
        owned_pod(name, containers, None)
    }

    /// [`pod`], controlled by the object of `owner` (its uid), if any.
    fn owned_pod(name: &str, containers: &[(&str, &str)], owner: Option<&str>) -> Arc<PodRecord> {
        let owner = owner.map(|uid| ("owner", uid));
        let mut pod = serde_json::to_value(mk_pod("ns", name, owner, &[("app", "web")])).unwrap();
        pod["spec"]["containers"] = containers
            .iter()
            .map(|(c, _)| json!({"name": c, "image": "nginx"}))
            .collect();
        pod["status"]["containerStatuses"] = containers
            .iter()
            .filter(|(_, state)| *state != "none")
            .map(|(c, state)| {
                let (now, last) = match *state {
                    "running" => (json!({"running": {}}), json!({})),
                    "restarted" => (
                        json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                        json!({"terminated": {"exitCode": 1}}),
                    ),
                    _ => (
                        json!({"waiting": {"reason": "ContainerCreating"}}),
                        json!({}),
                    ),
                };
                json!({"name": c, "image": "nginx", "imageID": "", "ready": false,
                    "restartCount": 0, "state": now, "lastState": last})
            })
            .collect();
        PodRecord::from_object(&serde_json::from_value(pod).unwrap())
    }

    fn request(pairs: &[(&str, &str)]) -> LogRequest {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        };
        LogRequest {
            namespace: get("namespace"),
            container: get("container"),
            previous: get("previous"),
            tail_lines: get("tailLines"),
            since_seconds: get("sinceSeconds"),
            since_time: get("sinceTime"),
            timestamps: get("timestamps"),
            follow: get("follow"),
        }
    }

    #[test]
    fn options_are_checked_against_their_bounds() {
        let ok = request(&[
            ("tailLines", "0"),
            ("sinceSeconds", "1"),
            ("follow", "true"),
        ])
        .options()
        .unwrap();
        assert_eq!(
            (ok.tail_lines, ok.since_seconds, ok.follow),
            (Some(0), Some(1), true)
        );
        for (key, bad) in [
            ("tailLines", "-1"),
            ("tailLines", "100001"),
            ("tailLines", "ten"),
            ("sinceSeconds", "0"),
            ("sinceSeconds", "-5"),
            ("sinceSeconds", "99999999999"),
            ("follow", "yes"),
            ("previous", "2"),
            ("timestamps", "on"),
            ("sinceTime", "yesterday"),
            ("sinceTime", "2026-01-02 15:04"),
        ] {
            let e = request(&[(key, bad)]).options().unwrap_err();
            assert_eq!(e.failure(), crate::Failure::Invalid, "{key}={bad}");
            assert!(e.to_string().contains(key), "{key}={bad}: {e}");
        }
        let since = request(&[("sinceTime", "2026-01-02T15:04:05.5+01:00")])
            .options()
            .unwrap();
        assert_eq!(
            since.since_time,
            Some("2026-01-02T14:04:05.5Z".parse().unwrap())
        );
        let e = request(&[("sinceTime", "2026-01-02T15:04:05Z"), ("sinceSeconds", "5")])
            .options()
            .unwrap_err();
        assert!(e.to_string().contains("at most one of sinceTime"), "{e}");
        let e = request(&[("container", "Not_A_Name")])
            .container()
            .unwrap_err();
        assert!(e.to_string().contains("container"), "{e}");
    }

    #[test]
    fn the_container_is_the_one_asked_for_the_default_or_the_only_one() {
        let two = Containers::of(&pod("p", &[("app", "running"), ("sidecar", "running")])).unwrap();
        assert_eq!(two.choose(Some("sidecar")).unwrap(), "sidecar");
        let e = two.choose(Some("db")).unwrap_err().to_string();
        assert!(
            e.contains("no container \"db\"") && e.contains("app, sidecar"),
            "{e}"
        );
        let e = two.choose(None).unwrap_err().to_string();
        assert!(
            e.contains("choose one") && e.contains("app, sidecar"),
            "{e}"
        );
        let one = Containers::of(&pod("p", &[("app", "running")])).unwrap();
        assert_eq!(one.choose(None).unwrap(), "app");
    }

    #[test]
    fn a_container_that_has_not_run_has_no_log_yet() {
        let p = Containers::of(&pod(
            "p",
            &[
                ("up", "running"),
                ("creating", "waiting"),
                ("crashed", "restarted"),
                ("new", "none"),
            ],
        ))
        .unwrap();
        assert!(matches!(p.readable("up", false), Readable::Yes { .. }));
        assert!(matches!(p.readable("crashed", false), Readable::Yes { .. }));
        assert!(matches!(p.readable("crashed", true), Readable::Yes { .. }));
        for (container, previous, says) in [
            ("creating", false, "has not started: ContainerCreating"),
            ("new", false, "has not started"),
            ("up", true, "has no previous run"),
        ] {
            match p.readable(container, previous) {
                Readable::No(reason) => assert!(reason.contains(says), "{reason}"),
                yes => panic!("{container}: {yes:?}"),
            }
        }
    }

    #[test]
    fn a_workloads_selector_is_read_from_its_spec() {
        let object = json!({"spec": {"selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}]}}});
        assert_eq!(
            selector_of(&object).unwrap().to_string(),
            "app=web,!canary,tier in (a,b)"
        );
        assert!(selector_of(&json!({"spec": {"selector": {}}})).is_err());
    }

    type Opened = Arc<Mutex<Vec<String>>>;

    /// A merge over a hand-fed pod watch; each container's log is `<pod>/<container> 1` and
    /// `... 2`, then it ends (`ends`) or stays open.
    fn merge(
        max_pods: usize,
        follow: bool,
        ends: bool,
    ) -> (
        mpsc::UnboundedSender<Result<WatchEvent<PodRecord>, DaoError>>,
        Merge,
        Opened,
    ) {
        let (tx, rx) = mpsc::unbounded();
        let opened: Opened = Arc::default();
        let log = opened.clone();
        let opener: Opener = Arc::new(move |pod: String, options: LogOptions| {
            let name = format!("{pod}/{}", options.container);
            log.lock().unwrap().push(name.clone());
            Box::pin(async move {
                let lines =
                    futures::stream::iter([1, 2].map(|n| Ok(Bytes::from(format!("{name} {n}")))));
                let lines: k8sdao::LogLines = if ends {
                    lines.boxed()
                } else {
                    lines.chain(futures::stream::pending()).boxed()
                };
                Ok(lines)
            })
        });
        let options = LogOptions {
            follow,
            ..LogOptions::default()
        };
        let merge = Merge::new(rx.boxed(), None, options, None, max_pods, None, opener);
        (tx, merge, opened)
    }

    /// The events ready now, as short strings.
    fn ready(merge: &mut Merge) -> Vec<String> {
        let mut out = Vec::new();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        while let Poll::Ready(Some(event)) = Pin::new(&mut *merge).poll_next(&mut cx) {
            out.push(match event {
                MergedEvent::Line { line, .. } => String::from_utf8(line.to_vec()).unwrap(),
                MergedEvent::Joined { pod, container } => format!("joined {pod}/{container}"),
                MergedEvent::Left {
                    pod,
                    container,
                    reason,
                } => {
                    format!("left {pod}/{container}: {reason}")
                }
                MergedEvent::Cut { pod, limit } => format!("cut {pod} at {limit}"),
                MergedEvent::Refused { pod, reason } => format!("refused {pod}: {reason}"),
                MergedEvent::Ended { reason } => format!("ended: {reason}"),
            });
        }
        out.sort();
        out
    }

    #[test]
    fn pods_join_when_their_containers_start_and_leave_when_deleted() {
        let (tx, mut merge, opened) = merge(10, true, false);
        tx.unbounded_send(Ok(WatchEvent::Added(pod("a", &[("c", "running")]))))
            .unwrap();
        tx.unbounded_send(Ok(WatchEvent::Added(pod("b", &[("c", "waiting")]))))
            .unwrap();
        assert_eq!(ready(&mut merge), ["a/c 1", "a/c 2", "joined a/c"]);
        // b starts: it joins; a goes: its stream ends.
        tx.unbounded_send(Ok(WatchEvent::Modified(pod("b", &[("c", "running")]))))
            .unwrap();
        tx.unbounded_send(Ok(WatchEvent::Deleted(pod("a", &[("c", "running")]))))
            .unwrap();
        assert_eq!(
            ready(&mut merge),
            ["b/c 1", "b/c 2", "joined b/c", "left a/c: the pod is gone"]
        );
        // A change that starts nothing new opens nothing.
        tx.unbounded_send(Ok(WatchEvent::Modified(pod("b", &[("c", "running")]))))
            .unwrap();
        assert_eq!(ready(&mut merge), Vec::<String>::new());
        assert_eq!(*opened.lock().unwrap(), ["a/c", "b/c"]);
    }

    #[test]
    fn past_the_limit_a_pod_waits_and_joins_when_one_leaves() {
        let (tx, mut merge, _) = merge(1, true, false);
        tx.unbounded_send(Ok(WatchEvent::Added(pod("a", &[("c", "running")]))))
            .unwrap();
        tx.unbounded_send(Ok(WatchEvent::Added(pod("b", &[("c", "running")]))))
            .unwrap();
        assert_eq!(
            ready(&mut merge),
            ["a/c 1", "a/c 2", "cut b at 1", "joined a/c"]
        );
        tx.unbounded_send(Ok(WatchEvent::Deleted(pod("a", &[("c", "running")]))))
            .unwrap();
        assert_eq!(
            ready(&mut merge),
            ["b/c 1", "b/c 2", "joined b/c", "left a/c: the pod is gone"]
        );
    }

    #[test]
    fn without_follow_the_log_ends_once_every_pod_there_was_read() {
        let (tx, mut merge, _) = merge(10, false, true);
        tx.unbounded_send(Ok(WatchEvent::Added(pod(
            "a",
            &[("c", "running"), ("d", "running")],
        ))))
        .unwrap();
        tx.unbounded_send(Ok(WatchEvent::Synced {
            resource_version: "1".into(),
        }))
        .unwrap();
        tx.unbounded_send(Ok(WatchEvent::Added(pod("late", &[("c", "running")]))))
            .unwrap();
        let events = ready(&mut merge);
        assert_eq!(
            events,
            [
                "a/c 1",
                "a/c 2",
                "a/d 1",
                "a/d 2",
                "joined a/c",
                "joined a/d",
                "left a/c: its log ended",
                "left a/d: its log ended",
            ]
        );
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(Pin::new(&mut merge).poll_next(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn a_workloads_set_is_the_pods_it_controls() {
        let (tx, mut merge, opened) = merge(10, true, false);
        merge.owner = Some(Arc::from("uid-sts"));
        for (name, owner) in [("mine", Some("uid-sts")), ("theirs", Some("uid-other"))] {
            tx.unbounded_send(Ok(WatchEvent::Added(owned_pod(
                name,
                &[("c", "running")],
                owner,
            ))))
            .unwrap();
        }
        tx.unbounded_send(Ok(WatchEvent::Added(pod("bare", &[("c", "running")]))))
            .unwrap();
        assert_eq!(ready(&mut merge), ["joined mine/c", "mine/c 1", "mine/c 2"]);
        // Orphaned (its controller released it): it leaves.
        tx.unbounded_send(Ok(WatchEvent::Modified(owned_pod(
            "mine",
            &[("c", "running")],
            None,
        ))))
        .unwrap();
        assert_eq!(
            ready(&mut merge),
            ["left mine/c: the pod is no longer controlled by the workload"]
        );
        assert_eq!(*opened.lock().unwrap(), ["mine/c"]);
    }

    #[test]
    fn a_pod_whose_log_is_refused_on_a_recheck_ends_the_merge() {
        let (tx, mut merge, _) = merge(10, true, false);
        let allowed = Arc::new(Mutex::new(true));
        let (ticks, rechecks) = mpsc::unbounded::<()>();
        let now = allowed.clone();
        merge.gate = Some(Arc::new(move |_pod: String| {
            let allowed = *now.lock().unwrap();
            Box::pin(async move { allowed })
        }));
        merge.rechecks = Some(rechecks.boxed());
        tx.unbounded_send(Ok(WatchEvent::Added(pod("a", &[("c", "running")]))))
            .unwrap();
        assert_eq!(ready(&mut merge), ["a/c 1", "a/c 2", "joined a/c"]);
        // Still allowed: nothing changes.
        ticks.unbounded_send(()).unwrap();
        assert_eq!(ready(&mut merge), Vec::<String>::new());
        *allowed.lock().unwrap() = false;
        ticks.unbounded_send(()).unwrap();
        assert_eq!(
            ready(&mut merge),
            ["ended: no get pods/log on pod a any more"]
        );
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(Pin::new(&mut merge).poll_next(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn a_failed_watch_ends_the_merge_and_says_why() {
        let (tx, mut merge, _) = merge(10, true, false);
        tx.unbounded_send(Ok(WatchEvent::Added(pod("a", &[("c", "running")]))))
            .unwrap();
        tx.unbounded_send(Err(DaoError::WatchExpired("behind".into())))
            .unwrap();
        let events = ready(&mut merge);
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(
            events[0].starts_with("ended: the pods can no longer be followed"),
            "{events:?}"
        );
    }
}
