//! What k8sailor keeps of each object: the wire DTO (field names of the original k8sailor
//! client, plus the columns dashboards need) and the few fields the indexes use. Records are
//! built once when an object arrives, by the cache and the live source alike, so a read never
//! touches a typed Kubernetes object and the cache never holds one.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Serialize;

pub mod catalog;
mod generic;
mod ingress;
mod key;
mod kind;
mod namespace;
mod raw;
mod replicaset;
mod resource;
mod service;

pub use catalog::{BuiltIn, Object, Visitor, built_in, built_in_rows, typed_row, visit_built_in};
pub use generic::{GenericObject, GenericRecord};
pub use raw::Dictionary;
pub use resource::{Resource, ResourceInfo, ServedBy};

pub use ingress::{IngressDto, IngressPathDto, IngressRecord};
pub use key::ObjectKey;
pub use kind::Kind;
pub use namespace::{NamespaceDto, NamespaceRecord};
pub use replicaset::{ReplicaSetDto, ReplicaSetRecord};
pub use service::{ServiceDto, ServiceRecord};

mod requests;
pub use requests::*;

pub type Labels = BTreeMap<String, String>;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatusDto {
    pub replicas: i32,
    pub available_replicas: i32,
    pub unavailable_replicas: i32,
}

/// The Deployment as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentDto {
    pub name: String,
    pub namespace: String,
    pub replicas: i32,
    pub images: Vec<String>,
    pub status: DeploymentStatusDto,
    pub label_selector: Labels,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's READY column: ready/desired.
    pub ready: String,
    /// kubectl's UP-TO-DATE column.
    pub up_to_date: i32,
    /// kubectl's AVAILABLE column.
    pub available: i32,
}

/// What reads need of a Deployment: its answer, already serialized, and the fields that
/// selectors, sorting and relations look at.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentRecord {
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// The labels its Pods are made with: what Services select them by.
    pub template_labels: Labels,
    /// The [`DeploymentDto`] as JSON, serialized once per change: answers copy these bytes
    /// rather than serialize the object on every read (serialization is what a LIST costs).
    pub json: Box<str>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodStatusDto {
    pub phase: String,
    pub reason: String,
    pub message: String,
}

/// The Pod as the API shows it; `deployment` is resolved at read time through ownerReferences.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodDto {
    pub name: String,
    pub namespace: String,
    pub images: Vec<String>,
    pub node_name: String,
    pub node_ip: String,
    pub pod_ip: String,
    pub create_time: Option<String>,
    pub status: PodStatusDto,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's READY column: ready/total containers.
    pub ready: String,
    /// kubectl's STATUS column (CrashLoopBackOff, Init:1/2, Terminating, ...).
    pub status_text: String,
    /// kubectl's RESTARTS column.
    pub restarts: u32,
}

/// The controller that owns an object, from its ownerReferences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// None for a kind k8sailor does not know (a StatefulSet, a Job, a custom resource).
    pub kind: Option<Kind>,
    pub name: String,
    pub uid: String,
}

impl Owner {
    pub fn controller_of(meta: &ObjectMeta) -> Option<Owner> {
        meta.owner_references
            .iter()
            .flatten()
            .find(|o: &&OwnerReference| o.controller == Some(true))
            .map(|o| Owner {
                kind: Kind::of_reference(&o.api_version, &o.kind),
                name: o.name.clone(),
                uid: o.uid.clone(),
            })
    }
}

/// The Pod fields the apiserver can select on, besides name and namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSelectableFields {
    pub node_name: String,
    pub phase: String,
    pub pod_ip: String,
    pub restart_policy: String,
    pub scheduler_name: String,
    pub service_account_name: String,
    pub host_network: bool,
    pub nominated_node_name: String,
}

/// What reads need of a Pod: its answer, already serialized, the fields selectors, sorting
/// and relations look at, and the object itself, compressed, for `/output`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRecord {
    pub key: ObjectKey,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    pub owner: Option<Owner>,
    pub fields: PodSelectableFields,
    /// The [`PodDto`] as JSON, serialized once per change (see [`DeploymentRecord::json`]);
    /// the `deployment` of the answer is resolved and appended at read time.
    pub json: Box<str>,
    /// The object as the apiserver sent it, without managedFields, as LZ4-compressed compact
    /// JSON: what `/pods/{name}/output` prints. Read rarely, kept for every pod, so it is
    /// stored at a fraction of its size (see [`RAW_DICTIONARY`]); [`PodRecord::raw_json`]
    /// gives it back.
    pub raw: Bytes,
}

/// What every record has: its key and its age, the fields lists sort by.
pub trait Keyed {
    fn key(&self) -> &ObjectKey;
    /// RFC 3339 in UTC: ordering the strings orders the times.
    fn creation_timestamp(&self) -> Option<&str>;
}

/// The parts of [`Keyed`] and [`Record`] every record has alike, read from its fields of the
/// same names: `key`, `creation_timestamp`, `resource_version` and `json`; with
/// `metadata_selectable`, also [`Selectable`] by its `labels` and the metadata fields alone.
macro_rules! record_fields {
    ($record:ty, metadata_selectable) => {
        $crate::record_fields!($record);
        impl $crate::Selectable for $record {
            fn labels(&self) -> &$crate::Labels {
                &self.labels
            }
            fn field(&self, path: &str) -> Option<std::borrow::Cow<'_, str>> {
                $crate::metadata_field(&self.key, path)
            }
        }
    };
    ($record:ty) => {
        impl $crate::Keyed for $record {
            fn key(&self) -> &$crate::ObjectKey {
                &self.key
            }
            fn creation_timestamp(&self) -> Option<&str> {
                self.creation_timestamp.as_deref()
            }
        }
    };
    () => {
        fn resource_version(&self) -> &str {
            &self.resource_version
        }
        fn json(&self) -> &str {
            &self.json
        }
    };
}
pub(crate) use record_fields;

record_fields!(DeploymentRecord, metadata_selectable);
record_fields!(PodRecord);

/// What the cache keeps of one object, and what answers are copied from: built once per
/// change from the object, so reads never touch the object.
pub trait Record: Keyed + Selectable + std::fmt::Debug + Sized + Send + Sync + 'static {
    /// The object it is projected from.
    type Object;
    fn from_object(object: &Self::Object) -> Arc<Self>;
    /// The key of the object `name` in `namespace` (as requests and deletions name it).
    fn key_of(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey::new(namespace, name)
    }
    fn resource_version(&self) -> &str;
    /// The answer as JSON, serialized once per change: answers copy these bytes rather than
    /// serialize on every read (serialization is what a LIST costs).
    fn json(&self) -> &str;
}

/// A record of its own type for one kind: the six the original client knows, with their
/// DTOs and relations. Every other kind is a [`GenericRecord`] of a [`Resource`].
pub trait Typed: Record {
    const KIND: Kind;
    /// The field paths a field selector may name: the apiserver's for the kind.
    const FIELDS: &'static [&'static str];
    /// The answer's shape, as [`Record::json`] holds it.
    type Dto: Serialize;
    /// Its resource, from its catalog row.
    fn resource() -> &'static Resource {
        typed_resource(Self::KIND)
    }
}

/// The resource of a typed kind, built once from its catalog row.
pub fn typed_resource(kind: Kind) -> &'static Resource {
    static TYPED: std::sync::LazyLock<Vec<(Kind, Resource)>> = std::sync::LazyLock::new(|| {
        Kind::ALL
            .iter()
            .map(|kind| (*kind, typed_row(*kind).resource()))
            .collect()
    });
    TYPED
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, resource)| resource)
        .unwrap_or_else(|| unreachable!("every typed kind has a resource: {kind:?}"))
}

/// The fields every kind can be selected by, as the apiserver allows for all of them.
pub const METADATA_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// `metadata.name` and `metadata.namespace` of a key, the fields every kind has.
pub(crate) fn metadata_field<'a>(key: &'a ObjectKey, path: &str) -> Option<Cow<'a, str>> {
    match path {
        "metadata.name" => Some(Cow::Borrowed(&key.name)),
        "metadata.namespace" => Some(Cow::Borrowed(&key.namespace)),
        _ => None,
    }
}

/// What label and field selectors see of a record: exactly the apiserver's selectable fields.
pub trait Selectable {
    fn labels(&self) -> &Labels;
    /// The value of a selectable field, or None if the kind has no such field.
    fn field(&self, path: &str) -> Option<Cow<'_, str>>;
}

impl Record for DeploymentRecord {
    type Object = Deployment;
    fn from_object(object: &Deployment) -> Arc<Self> {
        DeploymentRecord::from_deployment(object)
    }
    record_fields!();
}

impl Typed for DeploymentRecord {
    const KIND: Kind = Kind::Deployment;
    const FIELDS: &'static [&'static str] = METADATA_FIELDS;
    type Dto = DeploymentDto;
}

impl Record for PodRecord {
    type Object = Pod;
    fn from_object(object: &Pod) -> Arc<Self> {
        PodRecord::from_pod(object)
    }
    record_fields!();
}

impl Typed for PodRecord {
    const KIND: Kind = Kind::Pod;
    /// The apiserver's field selectors for Pods.
    const FIELDS: &'static [&'static str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
        // Accepted by the apiserver too: a legacy alias of spec.nodeName, and a label whose value
        // the apiserver always reads as "" (it is not in a Pod's field set).
        "spec.host",
        "status.podIPs",
    ];
    type Dto = PodDto;
}

impl Selectable for PodRecord {
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn field(&self, path: &str) -> Option<Cow<'_, str>> {
        let f = &self.fields;
        let value: &str = match path {
            "spec.nodeName" | "spec.host" => &f.node_name,
            "spec.restartPolicy" => &f.restart_policy,
            "spec.schedulerName" => &f.scheduler_name,
            "spec.serviceAccountName" => &f.service_account_name,
            "spec.hostNetwork" => {
                return Some(Cow::Borrowed(if f.host_network { "true" } else { "false" }));
            }
            "status.phase" => &f.phase,
            "status.podIP" => &f.pod_ip,
            "status.nominatedNodeName" => &f.nominated_node_name,
            "status.podIPs" => "",
            _ => return metadata_field(&self.key, path),
        };
        Some(Cow::Borrowed(value))
    }
}

/// An Event about a Pod; `namespace`, `name`, `message`, `reason` are the original client's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventDto {
    /// The Pod's namespace and name.
    pub namespace: String,
    pub name: String,
    pub message: String,
    pub reason: String,
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub type_: String,
    pub count: i32,
    pub first_timestamp: Option<String>,
    pub last_timestamp: Option<String>,
    /// Who reported it (kubelet, default-scheduler, ...).
    pub source: String,
}

impl EventDto {
    /// What `/pods/{name}/event` answers for a Pod without events: its names, the rest empty.
    pub fn none_about(namespace: &str, name: &str) -> Self {
        EventDto {
            namespace: namespace.to_string(),
            name: name.to_string(),
            count: 0,
            ..EventDto::default()
        }
    }

    pub fn from_event(e: &k8s_openapi::api::core::v1::Event) -> Self {
        let last = e
            .last_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
            .or_else(|| rfc3339(&e.metadata.creation_timestamp));
        EventDto {
            namespace: e.involved_object.namespace.clone().unwrap_or_default(),
            name: e.involved_object.name.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            type_: e.type_.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
            first_timestamp: rfc3339(&e.first_timestamp).or_else(|| last.clone()),
            last_timestamp: last,
            source: e
                .source
                .as_ref()
                .and_then(|s| s.component.clone())
                .or_else(|| e.reporting_component.clone())
                .unwrap_or_default(),
        }
    }
}

/// A Deployment to create, as biz validated it: one label `app: <name>` selects its Pods, as
/// `kubectl create deployment` makes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDeployment {
    pub name: String,
    pub replicas: i32,
    pub containers: Vec<NewContainer>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewContainer {
    pub name: String,
    pub image: String,
    /// TCP container ports.
    pub ports: Vec<i32>,
}

/// A DTO as compact JSON. Our DTOs hold only strings, numbers and string maps, which always
/// serialize.
pub(crate) fn to_json<T: Serialize>(dto: &T) -> Box<str> {
    serde_json::to_string(dto)
        .unwrap_or_else(|e| unreachable!("a DTO always serializes: {e}"))
        .into_boxed_str()
}

pub(crate) fn rfc3339(t: &Option<Time>) -> Option<String> {
    t.as_ref().map(|t| t.0.to_string())
}

impl DeploymentRecord {
    pub fn from_deployment(d: &Deployment) -> Arc<Self> {
        let meta = &d.metadata;
        let spec = d.spec.as_ref();
        let status = d.status.clone().unwrap_or_default();
        let columns = kubectl_status::deployment_columns(d);
        let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
        let dto = DeploymentDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            replicas,
            images: spec
                .and_then(|s| s.template.spec.as_ref())
                .map(|p| {
                    p.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            status: DeploymentStatusDto {
                replicas: status.replicas.unwrap_or(0),
                available_replicas: status.available_replicas.unwrap_or(0),
                unavailable_replicas: status.unavailable_replicas.unwrap_or(0),
            },
            label_selector: spec
                .and_then(|s| s.selector.match_labels.clone())
                .unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            ready: columns.ready(),
            up_to_date: columns.up_to_date,
            available: columns.available,
        };
        Arc::new(DeploymentRecord {
            key: ObjectKey::of(meta),
            template_labels: spec
                .and_then(|s| s.template.metadata.as_ref()?.labels.clone())
                .unwrap_or_default(),
            json: to_json(&dto),
            uid: dto.uid,
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
        })
    }
}

impl PodStatusDto {
    /// The original k8sailor's meaning, which its web client relies on: the reason and message
    /// of the first container that is waiting without being ready (ImagePullBackOff,
    /// CrashLoopBackOff, ...), init containers first, else the Pod's own. The client asks for
    /// a Pod's event only when `reason` is set, and the Pod-level fields are empty in exactly
    /// those common cases.
    fn of(status: &k8s_openapi::api::core::v1::PodStatus) -> PodStatusDto {
        let waiting = status
            .init_container_statuses
            .iter()
            .chain(status.container_statuses.iter())
            .flatten()
            .filter(|c| !c.ready)
            .find_map(|c| c.state.as_ref()?.waiting.as_ref());
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let (reason, message) = match waiting {
            Some(w) => (text(&w.reason), text(&w.message)),
            None => (text(&status.reason), text(&status.message)),
        };
        PodStatusDto {
            phase: text(&status.phase),
            reason,
            message,
        }
    }
}

impl PodRecord {
    pub fn from_pod(pod: &Pod) -> Arc<Self> {
        let meta = &pod.metadata;
        // Only the strings kept are cloned, never the whole spec or status.
        let no_status = Default::default();
        let status: &k8s_openapi::api::core::v1::PodStatus =
            pod.status.as_ref().unwrap_or(&no_status);
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let columns = kubectl_status::pod_columns(pod);
        let dto = PodDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            images: pod
                .spec
                .as_ref()
                .map(|s| {
                    s.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            node_ip: text(&status.host_ip),
            pod_ip: text(&status.pod_ip),
            create_time: rfc3339(&meta.creation_timestamp),
            status: PodStatusDto::of(status),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            ready: columns.ready(),
            status_text: columns.status,
            restarts: columns.restarts,
        };
        let no_spec = Default::default();
        let spec: &k8s_openapi::api::core::v1::PodSpec = pod.spec.as_ref().unwrap_or(&no_spec);
        let fields = PodSelectableFields {
            node_name: dto.node_name.clone(),
            phase: dto.status.phase.clone(),
            pod_ip: dto.pod_ip.clone(),
            restart_policy: text(&spec.restart_policy),
            scheduler_name: text(&spec.scheduler_name),
            service_account_name: text(&spec.service_account_name),
            host_network: spec.host_network.unwrap_or(false),
            nominated_node_name: text(&status.nominated_node_name),
        };
        // Serializing a typed Pod cannot fail: it has no maps with non-string keys.
        let raw = RAW_DICTIONARY.compress(&serde_json::to_vec(pod).unwrap_or_default());
        Arc::new(PodRecord {
            key: ObjectKey::of(meta),
            owner: Owner::controller_of(meta),
            json: to_json(&dto),
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
            fields,
            raw,
        })
    }
}

/// The Pods' dictionary (see [`Dictionary`]).
static RAW_DICTIONARY: Dictionary = Dictionary::new();

impl PodRecord {
    /// The Pod's JSON as the apiserver sent it (managedFields stripped).
    pub fn raw_json(&self) -> Result<Vec<u8>, String> {
        RAW_DICTIONARY.decompress(&self.raw, &format_args!("pod {}", self.key))
    }
}

/// mk_pod-style builders of typed objects, for tests here and in the crates above.
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use super::*;
    pub use crate::generic::fixtures::mk_object;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::networking::v1::Ingress;
    use serde_json::json;

    /// An Active Namespace.
    pub fn mk_namespace(name: &str) -> k8s_openapi::api::core::v1::Namespace {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                         "creationTimestamp": "2026-11-01T10:00:00Z"},
            "status": {"phase": "Active"}
        }))
        .expect("a valid Namespace")
    }

    /// A ClusterIP Service on port 80 selecting `selector` (none: a Service without one).
    pub fn mk_service(ns: &str, name: &str, selector: &[(&str, &str)]) -> Service {
        let selector: serde_json::Map<_, _> = selector
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": "1", "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"],
                     "selector": selector, "ports": [{"port": 80, "protocol": "TCP"}]}
        }))
        .expect("a valid Service")
    }

    /// An Ingress routing example.com/ (Prefix) to `service`:80, with TLS.
    pub fn mk_ingress(ns: &str, name: &str, service: &str) -> Ingress {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": "1", "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"tls": [{"hosts": ["example.com"], "secretName": format!("{name}-tls")}],
                     "rules": [{"host": "example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                         "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}
        }))
        .expect("a valid Ingress")
    }

    pub fn mk_deployment(ns: &str, name: &str, uid: &str, labels: &[(&str, &str)]) -> Deployment {
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": "1",
                         "labels": labels, "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                       "unavailableReplicas": 1, "updatedReplicas": 3}
        }))
        .expect("a valid Deployment")
    }

    pub fn mk_replicaset(
        ns: &str,
        name: &str,
        uid: &str,
        owner: Option<(&str, &str)>,
    ) -> ReplicaSet {
        let owners: Vec<_> = owner
            .iter()
            .map(|(name, uid)| {
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                      "uid": uid, "controller": true})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": "1",
                         "ownerReferences": owners, "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}
        }))
        .expect("a valid ReplicaSet")
    }

    pub fn mk_pod(
        ns: &str,
        name: &str,
        owner_rs: Option<(&str, &str)>,
        labels: &[(&str, &str)],
    ) -> Pod {
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let owners: Vec<_> = owner_rs
            .iter()
            .map(|(name, uid)| {
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                      "uid": uid, "controller": true})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": "1", "labels": labels, "ownerReferences": owners,
                         "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx:1.27"}]},
            "status": {"phase": "Running", "hostIP": "10.1.0.1", "podIP": "10.2.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "",
                           "ready": true, "restartCount": 2, "started": true,
                           "state": {"running": {"startedAt": "2026-11-01T10:00:05Z"}}}]}
        }))
        .expect("a valid Pod")
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn deployment_projection_has_original_and_kubectl_fields() {
        let r =
            DeploymentRecord::from_deployment(&mk_deployment("ns", "web", "d1", &[("tier", "fe")]));
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["name"], "web");
        assert_eq!(json["replicas"], 3);
        assert_eq!(json["images"], serde_json::json!(["nginx:1.27"]));
        assert_eq!(json["status"]["availableReplicas"], 2);
        assert_eq!(json["status"]["unavailableReplicas"], 1);
        assert_eq!(json["labelSelector"]["app"], "web");
        assert_eq!(json["ready"], "2/3");
        assert_eq!(json["upToDate"], 3);
        assert_eq!(json["creationTimestamp"], "2026-11-01T10:00:00Z");
        assert_eq!(r.key, ObjectKey::new("ns", "web"));
    }

    #[test]
    fn pod_projection_keeps_raw_without_managed_fields_and_finds_controller() {
        let mut pod = mk_pod("ns", "web-1", Some(("web-rs", "rs1")), &[("app", "web")]);
        confk8s::strip_noise(&mut pod);
        let r = PodRecord::from_pod(&pod);
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["nodeName"], "node-1");
        assert_eq!(json["nodeIp"], "10.1.0.1");
        assert_eq!(json["podIp"], "10.2.0.1");
        assert_eq!(json["createTime"], "2026-11-01T10:00:00Z");
        assert_eq!(json["status"]["phase"], "Running");
        assert_eq!(json["ready"], "1/1");
        assert_eq!(json["statusText"], "Running");
        assert_eq!(json["restarts"], 2);
        assert_eq!(r.owner.as_ref().map(|o| o.uid.as_str()), Some("rs1"));
        assert_eq!(r.field("spec.nodeName").as_deref(), Some("node-1"));
        assert_eq!(r.field("spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(r.field("status.phase").as_deref(), Some("Running"));
        assert_eq!(r.field("spec.containers"), None);
        for field in PodRecord::FIELDS {
            assert!(r.field(field).is_some(), "{field} is selectable");
        }
        let json = r.raw_json().unwrap();
        assert!(
            r.raw.len() < json.len(),
            "stored compressed: {} of {} bytes",
            r.raw.len(),
            json.len()
        );
        let raw: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(raw["kind"], "Pod");
        assert_eq!(raw["metadata"]["name"], "web-1");
    }

    #[test]
    fn a_pods_reason_is_its_first_waiting_containers_then_its_own() {
        // The status alone: a whole record would make these odd pods the compression
        // dictionary for the other tests.
        let status_of = |status: serde_json::Value| {
            serde_json::to_value(PodStatusDto::of(&serde_json::from_value(status).unwrap()))
                .unwrap()
        };
        let waiting = |name: &str, reason: &str| {
            serde_json::json!({"name": name, "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": reason, "message": format!("{name}: {reason}")}}})
        };
        let running = serde_json::json!({"name": "ok", "image": "x", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {}}});
        let s = status_of(serde_json::json!({"phase": "Pending",
            "containerStatuses": [running, waiting("app", "ImagePullBackOff"), waiting("side", "ErrImagePull")]}));
        assert_eq!(s["reason"], "ImagePullBackOff");
        assert_eq!(s["message"], "app: ImagePullBackOff");
        let s = status_of(serde_json::json!({"phase": "Pending",
            "initContainerStatuses": [waiting("init", "CrashLoopBackOff")],
            "containerStatuses": [waiting("app", "PodInitializing")]}));
        assert_eq!(
            s["reason"], "CrashLoopBackOff",
            "the init container holds the Pod up"
        );
        let s = status_of(serde_json::json!({"phase": "Failed", "reason": "Evicted",
            "message": "low on memory", "containerStatuses": [running]}));
        assert_eq!(
            (s["reason"].as_str(), s["message"].as_str()),
            (Some("Evicted"), Some("low on memory"))
        );
        let s = status_of(serde_json::json!({"phase": "Running", "containerStatuses": [running]}));
        assert_eq!(
            (s["reason"].as_str(), s["message"].as_str()),
            (Some(""), Some(""))
        );
    }

    #[test]
    fn every_pod_comes_back_from_its_compressed_json() {
        let pods = [
            mk_pod("ns", "a", Some(("web-rs", "rs1")), &[("app", "web")]),
            mk_pod("other", "b", None, &[("tier", "db"), ("x", "y")]),
            mk_pod("ns", "c", Some(("web-rs", "rs1")), &[("app", "web")]),
        ];
        for pod in &pods {
            let r = PodRecord::from_pod(pod);
            let back: Pod = serde_json::from_slice(&r.raw_json().unwrap()).unwrap();
            assert_eq!(&back, pod);
            // Whichever pod became the dictionary, one like the others compresses to far
            // less than its JSON.
            assert!(
                r.raw.len() * 3 < serde_json::to_vec(pod).unwrap().len(),
                "{}",
                r.raw.len()
            );
        }
    }
}
