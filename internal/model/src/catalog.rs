//! The built-in kinds k8sailor can serve, each declared once, as one row of [`catalog!`]:
//! its k8s-openapi type (which gives its kind, group, version and plural), its scope, how it
//! is served, its printer and the apiserver's field-selector allow-list for it. Adding a
//! built-in kind is one row; the informers, caches, routes and access rules follow from it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use printers::Printer;

use crate::{
    DeploymentRecord, Dictionary, IngressRecord, Kind, METADATA_FIELDS, NamespaceRecord, PodRecord,
    ReplicaSetRecord, Resource, ResourceInfo, ServedBy, ServiceRecord, Typed,
};

/// One built-in kind, as declared.
#[derive(Debug)]
pub struct BuiltIn {
    /// As requests name it: its plural, or, where another row has that plural, its plural
    /// and group (`events.events.k8s.io`), as kubectl names it then.
    pub name: &'static str,
    pub kind: &'static str,
    /// Empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// The apiserver's field-selector allow-list for the kind.
    pub fields: &'static [&'static str],
    pub printer: fn() -> Printer,
    pub served_by: ServedBy,
    /// The short names and categories the apiserver's discovery lists for the kind.
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// How its objects own the pods they run, for a kind that runs pods: what its merged
    /// log (`/{plural}/{name}/logs`) follows.
    pub pods: Option<PodOwnership>,
    /// The warning the apiserver sends with every answer about the kind (a deprecated API).
    pub warning: Option<&'static str>,
}

/// How the objects of a kind own their pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodOwnership {
    /// The pods whose controller (`ownerReferences`) is the object, among those its
    /// `spec.selector` picks in its namespace: a ReplicaSet's, StatefulSet's, DaemonSet's,
    /// Job's.
    Controller,
    /// The pods whose controller is a ReplicaSet the object controls: a Deployment's.
    ThroughReplicaSets,
}

impl BuiltIn {
    /// The row as a served resource.
    pub fn resource(&self) -> Resource {
        Resource::new(ResourceInfo {
            name: self.name.into(),
            kind: self.kind.into(),
            group: self.group.into(),
            version: self.version.into(),
            plural: self.plural.into(),
            namespaced: self.namespaced,
            fields: self.fields.iter().map(|f| (*f).into()).collect(),
            printer: (self.printer)(),
            served_by: self.served_by,
            short_names: self.short_names.iter().map(|n| (*n).into()).collect(),
            categories: self.categories.iter().map(|c| (*c).into()).collect(),
            warning: self.warning.map(Into::into),
            dictionary: Dictionary::new(),
        })
    }
}

/// What a typed object must be to be watched and kept: a k8s-openapi type, (de)serializable.
pub trait Object:
    k8s_openapi::Resource
    + k8s_openapi::Metadata<Ty = ObjectMeta>
    + serde::de::DeserializeOwned
    + serde::Serialize
    + Clone
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Object for K where
    K: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// Is told each row with the type its objects are watched as ([`visit_built_in`]): how the
/// layers that cannot name the rows' types (informers) get them.
pub trait Visitor {
    fn namespaced<K: Object + k8s_openapi::Resource<Scope = NamespaceResourceScope>>(
        &mut self,
        row: &'static BuiltIn,
    );
    fn cluster<K: Object + k8s_openapi::Resource<Scope = ClusterResourceScope>>(
        &mut self,
        row: &'static BuiltIn,
    );
}

macro_rules! catalog {
    ($($row:ident: $scope:ident $object:ty, $served:expr, $printer:ident, $fields:expr
        $(, name: $name:expr)? $(, short: $short:expr)? $(, categories: $categories:expr)?
        $(, pods: $pods:expr)? $(, warning: $warning:expr)?;)*) => {
        $(pub static $row: BuiltIn = BuiltIn {
            name: catalog!(@name $object $(, $name)?),
            kind: <$object as k8s_openapi::Resource>::KIND,
            group: <$object as k8s_openapi::Resource>::GROUP,
            version: <$object as k8s_openapi::Resource>::VERSION,
            plural: <$object as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            namespaced: catalog!(@namespaced $scope),
            fields: $fields,
            printer: printers::builtin::$printer,
            served_by: $served,
            short_names: catalog!(@or $($short)?),
            categories: catalog!(@or $($categories)?),
            pods: catalog!(@pods $($pods)?),
            warning: catalog!(@warning $($warning)?),
        };)*

        /// Every row, in the order `/resources` lists them.
        static ROWS: &[&BuiltIn] = &[$(&$row),*];

        /// Tells `visitor` each row with its type.
        pub fn visit_built_in<V: Visitor>(visitor: &mut V) {
            $(catalog!(@visit visitor, $scope, $object, &$row);)*
        }
    };
    (@name $object:ty, $name:expr) => { $name };
    (@name $object:ty) => { <$object as k8s_openapi::Resource>::URL_PATH_SEGMENT };
    (@warning $warning:expr) => { Some($warning) };
    (@warning) => { None };
    (@or $given:expr) => { $given };
    (@or) => { &[] };
    (@pods $pods:expr) => { Some($pods) };
    (@pods) => { None };
    (@namespaced Namespaced) => { true };
    (@namespaced Cluster) => { false };
    (@visit $v:ident, Namespaced, $object:ty, $row:expr) => { $v.namespaced::<$object>($row) };
    (@visit $v:ident, Cluster, $object:ty, $row:expr) => { $v.cluster::<$object>($row) };
}

/// A cluster-scoped kind without field labels of its own: the apiserver's default
/// conversion accepts `metadata.namespace` for it too, read as "" (its field set has none),
/// so `metadata.namespace=` selects every object and any other value none. Nodes and
/// Namespaces have their own lists, without it.
const CLUSTER_FIELDS: &[&str] = METADATA_FIELDS;

use PodOwnership::{Controller, ThroughReplicaSets};
use ServedBy::{Generic, MetadataOnly};
use k8s_openapi::api::{
    apps::v1 as apps, autoscaling::v2 as autoscaling, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;

catalog! {
    PODS: Namespaced core::Pod, ServedBy::Typed(Kind::Pod), pod, PodRecord::FIELDS,
        short: &["po"], categories: &["all"];
    DEPLOYMENTS: Namespaced apps::Deployment, ServedBy::Typed(Kind::Deployment), deployment,
        DeploymentRecord::FIELDS,
        short: &["deploy"], categories: &["all"], pods: ThroughReplicaSets;
    STATEFUL_SETS: Namespaced apps::StatefulSet, Generic, stateful_set, METADATA_FIELDS,
        short: &["sts"], categories: &["all"], pods: Controller;
    DAEMON_SETS: Namespaced apps::DaemonSet, Generic, daemon_set, METADATA_FIELDS,
        short: &["ds"], categories: &["all"], pods: Controller;
    REPLICA_SETS: Namespaced apps::ReplicaSet, ServedBy::Typed(Kind::ReplicaSet), replica_set,
        ReplicaSetRecord::FIELDS,
        short: &["rs"], categories: &["all"], pods: Controller;
    JOBS: Namespaced batch::Job, Generic, job,
        &["metadata.name", "metadata.namespace", "status.successful"], categories: &["all"],
        pods: Controller;
    CRON_JOBS: Namespaced batch::CronJob, Generic, cron_job, METADATA_FIELDS,
        short: &["cj"], categories: &["all"];
    HORIZONTAL_POD_AUTOSCALERS: Namespaced autoscaling::HorizontalPodAutoscaler, Generic,
        horizontal_pod_autoscaler, METADATA_FIELDS,
        short: &["hpa"], categories: &["all"];
    POD_DISRUPTION_BUDGETS: Namespaced policy::PodDisruptionBudget, Generic,
        pod_disruption_budget, METADATA_FIELDS,
        short: &["pdb"];
    SERVICES: Namespaced core::Service, ServedBy::Typed(Kind::Service), service, ServiceRecord::FIELDS,
        short: &["svc"], categories: &["all"];
    // Deprecated since 1.33 and still served, with a warning on every answer.
    ENDPOINTS: Namespaced core::Endpoints, Generic, endpoints, METADATA_FIELDS,
        short: &["ep"],
        warning: "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice";
    ENDPOINT_SLICES: Namespaced discovery::EndpointSlice, Generic, endpoint_slice,
        METADATA_FIELDS;
    INGRESSES: Namespaced networking::Ingress, ServedBy::Typed(Kind::Ingress), ingress,
        IngressRecord::FIELDS,
        short: &["ing"];
    INGRESS_CLASSES: Cluster networking::IngressClass, Generic, ingress_class, CLUSTER_FIELDS;
    NETWORK_POLICIES: Namespaced networking::NetworkPolicy, Generic, network_policy,
        METADATA_FIELDS,
        short: &["netpol"];
    CONFIG_MAPS: Namespaced core::ConfigMap, Generic, config_map, METADATA_FIELDS,
        short: &["cm"];
    // Watched as metadata: the apiserver's `type` field is not in it, so it cannot be
    // selected on.
    SECRETS: Namespaced core::Secret, MetadataOnly, secret, METADATA_FIELDS;
    PERSISTENT_VOLUME_CLAIMS: Namespaced core::PersistentVolumeClaim, Generic,
        persistent_volume_claim, METADATA_FIELDS,
        short: &["pvc"];
    PERSISTENT_VOLUMES: Cluster core::PersistentVolume, Generic, persistent_volume,
        CLUSTER_FIELDS,
        short: &["pv"];
    STORAGE_CLASSES: Cluster storage::StorageClass, Generic, storage_class, CLUSTER_FIELDS,
        short: &["sc"];
    SERVICE_ACCOUNTS: Namespaced core::ServiceAccount, Generic, service_account,
        METADATA_FIELDS,
        short: &["sa"];
    ROLES: Namespaced rbac::Role, Generic, role, METADATA_FIELDS;
    ROLE_BINDINGS: Namespaced rbac::RoleBinding, Generic, role_binding, METADATA_FIELDS;
    CLUSTER_ROLES: Cluster rbac::ClusterRole, Generic, cluster_role, CLUSTER_FIELDS;
    CLUSTER_ROLE_BINDINGS: Cluster rbac::ClusterRoleBinding, Generic, cluster_role_binding,
        CLUSTER_FIELDS;
    NODES: Cluster core::Node, Generic, node, &["metadata.name", "spec.unschedulable"],
        short: &["no"];
    NAMESPACES: Cluster core::Namespace, ServedBy::Typed(Kind::Namespace), namespace,
        NamespaceRecord::FIELDS,
        short: &["ns"];
    EVENTS: Namespaced core::Event, Generic, event, &[
        "metadata.name", "metadata.namespace", "involvedObject.kind",
        "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
    ],
        short: &["ev"];
    // The same objects as core Events in the new API's shape: the apiserver converts one
    // stored object to either. Watched as sent, a second time, so each answer is the
    // apiserver's own to the byte (its conversion decides every null and name), at the cost
    // of keeping each Event twice while it lives (an hour by default); `--resources
    // -events.events.k8s.io` does without. Its selectable fields are the core ones under
    // the new names (`regarding.*`, `reportingController`), `source` aside (1.35 refuses
    // it here).
    EVENTS_V1: Namespaced events::Event, Generic, event_v1, &[
        "metadata.name", "metadata.namespace", "regarding.kind", "regarding.namespace",
        "regarding.name", "regarding.uid", "regarding.apiVersion", "regarding.resourceVersion",
        "regarding.fieldPath", "reason", "reportingController", "type",
    ],
        name: "events.events.k8s.io", short: &["ev"];
    RESOURCE_QUOTAS: Namespaced core::ResourceQuota, Generic, resource_quota, METADATA_FIELDS,
        short: &["quota"];
    LIMIT_RANGES: Namespaced core::LimitRange, Generic, limit_range, METADATA_FIELDS,
        short: &["limits"];
    PRIORITY_CLASSES: Cluster scheduling::PriorityClass, Generic, priority_class,
        CLUSTER_FIELDS,
        short: &["pc"];
    LEASES: Namespaced coordination::Lease, Generic, lease, METADATA_FIELDS;
    CUSTOM_RESOURCE_DEFINITIONS: Cluster apiextensions::CustomResourceDefinition, Generic,
        custom_resource_definition, CLUSTER_FIELDS,
        short: &["crd", "crds"], categories: &["api-extensions"];
}

/// Every built-in row.
pub fn built_in_rows() -> &'static [&'static BuiltIn] {
    ROWS
}

/// The built-in row of the resource requests name `name` ([`BuiltIn::name`]).
pub fn built_in(name: &str) -> Option<&'static BuiltIn> {
    ROWS.iter().copied().find(|row| row.name == name)
}

/// The row of a typed kind: each has one (a test checks it).
pub fn typed_row(kind: Kind) -> &'static BuiltIn {
    ROWS.iter()
        .copied()
        .find(|row| row.served_by == ServedBy::Typed(kind))
        .unwrap_or_else(|| unreachable!("every typed kind has a catalog row: {kind:?}"))
}

/// How a field the allow-list names is read from an object as the apiserver sends it, where
/// that is not its path, and its value when absent (the apiserver formats the zero value).
pub(crate) fn field_reading(field: &str) -> (&str, &'static str) {
    match field {
        "source" => ("source.component", ""),
        "spec.unschedulable" => (field, "false"),
        "status.successful" => ("status.succeeded", "0"),
        _ => (field, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_typed_kind_has_one_row_and_every_row_one_plural() {
        for kind in Kind::ALL {
            let row = typed_row(*kind);
            assert_eq!(row.kind, kind.name());
            assert_eq!(row.group, kind.group());
            assert_eq!(row.plural, kind.resource());
            assert_eq!(row.namespaced, kind.is_namespaced());
        }
        // Each (group, plural) once, as the apiserver names its resources.
        let mut plurals: Vec<_> = ROWS.iter().map(|r| (r.group, r.plural)).collect();
        plurals.sort();
        plurals.dedup();
        assert_eq!(plurals.len(), ROWS.len());
        assert_eq!(
            ROWS.len(),
            34,
            "the kinds of issue 19, Leases, Endpoints and events.k8s.io's Events"
        );
        let mut names: Vec<_> = ROWS.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ROWS.len(), "each row is named once");
    }

    /// Collects what the visitor is told.
    #[derive(Default)]
    struct Seen(Vec<(&'static str, bool, &'static str)>);

    impl Visitor for Seen {
        fn namespaced<K: Object + k8s_openapi::Resource<Scope = NamespaceResourceScope>>(
            &mut self,
            row: &'static BuiltIn,
        ) {
            self.0.push((row.plural, true, K::KIND));
        }
        fn cluster<K: Object + k8s_openapi::Resource<Scope = ClusterResourceScope>>(
            &mut self,
            row: &'static BuiltIn,
        ) {
            self.0.push((row.plural, false, K::KIND));
        }
    }

    #[test]
    fn each_row_is_visited_with_its_type_and_scope() {
        let mut seen = Seen::default();
        visit_built_in(&mut seen);
        assert_eq!(seen.0.len(), ROWS.len());
        for ((plural, namespaced, kind), row) in seen.0.iter().zip(ROWS) {
            assert_eq!(
                (*plural, *namespaced, *kind),
                (row.plural, row.namespaced, row.kind)
            );
        }
        let events = built_in("events").unwrap();
        assert_eq!(
            (events.kind, events.group, events.version),
            ("Event", "", "v1")
        );
        assert_eq!(built_in("cronjobs").unwrap().group, "batch");
        // Two rows of plural `events`: the second is named with its group, as kubectl names it.
        let new_events = built_in("events.events.k8s.io").unwrap();
        assert_eq!(
            (new_events.kind, new_events.group, new_events.plural),
            ("Event", "events.k8s.io", "events")
        );
        assert_eq!(new_events.resource().name, "events.events.k8s.io");
        assert!(events.warning.is_none());
        assert!(built_in("endpoints").unwrap().warning.is_some());
        assert!(!built_in("nodes").unwrap().namespaced);
    }
}
