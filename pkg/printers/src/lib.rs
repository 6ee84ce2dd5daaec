//! The columns `kubectl get` prints for each kind, computed from the object as JSON exactly as
//! the kube-apiserver's own printers compute them when a client asks for a
//! `meta.k8s.io/v1` Table (`kubectl get` does): the same column definitions (name, type,
//! format, description, priority) and the same cell for every column, `-o wide` ones
//! included (the apiserver always fills them; priority 1 tells a client to hide them).
//!
//! Column names are the apiserver's (`Name`, `Nominated Node`); kubectl upper-cases them
//! when it prints (`NAME`, `NOMINATED NODE`).
//!
//! The reference is Kubernetes v1.35: `k8s.io/kubernetes/pkg/printers/internalversion/printers.go`
//! for built-in kinds, `k8s.io/apiserver/pkg/registry/rest/table.go` (the default convertor)
//! for the kinds that have no printer, and
//! `k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor` with
//! `k8s.io/client-go/util/jsonpath` for custom resources. Each built-in kind follows:
//!
//! | constructor | printers.go |
//! |---|---|
//! | [`builtin::pod`] | `printPod`, `hasPodReadyCondition`, `isPodInitializedConditionTrue`, `translateTimestampSince` |
//! | [`builtin::deployment`] | `printDeployment`, `layoutContainerCells` (selector via `LabelSelectorAsSelector`) |
//! | [`builtin::stateful_set`] | `printStatefulSet`, `layoutContainerCells` |
//! | [`builtin::daemon_set`] | `printDaemonSet`, `layoutContainerCells`, `labels.FormatLabels`, `metav1.FormatLabelSelector` |
//! | [`builtin::replica_set`] | `printReplicaSet`, `layoutContainerCells`, `metav1.FormatLabelSelector` |
//! | [`builtin::job`] | `printJob`, `hasJobCondition`, `duration.HumanDuration` |
//! | [`builtin::cron_job`] | `printCronJob`, `printBoolPtr` |
//! | [`builtin::horizontal_pod_autoscaler`] | `printHorizontalPodAutoscaler`, `formatHPAMetrics` |
//! | [`builtin::pod_disruption_budget`] | `printPodDisruptionBudget` |
//! | [`builtin::service`] | `printService`, `getServiceExternalIP`, `loadBalancerStatusStringer`, `makePortString` |
//! | [`builtin::endpoints`] | `printEndpoints`, `formatEndpoints` |
//! | [`builtin::endpoint_slice`] | `printEndpointSlice`, `formatDiscoveryPorts`, `formatDiscoveryEndpoints`, `listWithMoreString` |
//! | [`builtin::ingress`] | `printIngress`, `formatHosts`, `formatPorts`, `ingressLoadBalancerStatusStringer` |
//! | [`builtin::ingress_class`] | `printIngressClass` |
//! | [`builtin::network_policy`] | `printNetworkPolicy` |
//! | [`builtin::config_map`] | `printConfigMap` |
//! | [`builtin::secret`] | `printSecret` |
//! | [`builtin::persistent_volume_claim`] | `printPersistentVolumeClaim`, `GetAccessModesAsString`, `GetPersistentVolumeClaimClass` |
//! | [`builtin::persistent_volume`] | `printPersistentVolume`, `GetAccessModesAsString`, `GetPersistentVolumeClass` |
//! | [`builtin::storage_class`] | `printStorageClass`, `storageutil.IsDefaultAnnotation` |
//! | [`builtin::service_account`] | `printServiceAccount` |
//! | [`builtin::role_binding`], [`builtin::cluster_role_binding`] | `printRoleBinding`, `printClusterRoleBinding`, `rbac.SubjectsStrings` |
//! | [`builtin::node`] | `printNode`, `findNodeRoles`, `getNodeInternalIP`, `getNodeExternalIP` |
//! | [`builtin::namespace`] | `printNamespace` |
//! | [`builtin::event`], [`builtin::event_v1`] | `printEvent`, `formatEventSource`, `translateMicroTimestampSince` (events.k8s.io's fields under their core names, as `Convert_v1_Event_To_core_Event` reads them) |
//! | [`builtin::resource_quota`] | `printResourceQuota` |
//! | [`builtin::priority_class`] | `printPriorityClass` |
//! | [`builtin::lease`] | `printLease` |
//! | [`builtin::role`], [`builtin::cluster_role`], [`builtin::limit_range`], [`builtin::custom_resource_definition`] | none: their storage uses `rest.NewDefaultTableConvertor` ([`Printer::default_columns`]) |
//!
//! Time-relative cells keep their times ([`Cell::Age`], [`Cell::Restarts`]) and are rendered
//! at [`Cell::to_table_value`] with `duration.HumanDuration`, so a cached cell stays true.
//!
//! Objects are read as the apiserver serves them (JSON of the served version: `apps/v1`,
//! `batch/v1`, `autoscaling/v2`, core `v1` and `events.k8s.io/v1` Events...). A missing field reads as Go's zero
//! value, which is what the printers see for it; nothing here panics on any input.

#![warn(missing_docs)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

pub mod builtin;
mod columns;
mod custom;
mod duration;
mod format;
mod jsonpath;
mod object;
mod pod;

pub use duration::human_duration;
pub use jsonpath::{JsonPath, JsonPathError};

/// A column's value type, as `TableColumnDefinition.type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `number`
    Number,
    /// `boolean`
    Boolean,
    /// `date`
    Date,
}

impl ColumnType {
    /// The type a CRD's `additionalPrinterColumns[].type` names, `None` for any other word.
    pub fn parse(name: &str) -> Option<ColumnType> {
        Some(match name {
            "string" => ColumnType::String,
            "integer" => ColumnType::Integer,
            "number" => ColumnType::Number,
            "boolean" => ColumnType::Boolean,
            "date" => ColumnType::Date,
            _ => return None,
        })
    }
}

/// One column as the apiserver's Table has it (meta.k8s.io/v1 TableColumnDefinition).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Column {
    /// The apiserver's name, e.g. `Name`, `Ready`, `Nominated Node` (kubectl upper-cases it).
    pub name: Cow<'static, str>,
    /// The value type the apiserver declares.
    #[serde(rename = "type")]
    pub type_: ColumnType,
    /// `name` for the object's name column, else empty or a CRD column's format.
    pub format: Cow<'static, str>,
    /// The apiserver's description (an API field's doc for most columns).
    pub description: Cow<'static, str>,
    /// 0 shown by `kubectl get`, 1 (or more) only with `-o wide`.
    pub priority: i32,
}

/// One cell, kept in the cache (computed once per change). Time-relative cells keep the
/// times, not the text, so the cell stays true as time passes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Cell {
    /// JSON null: a custom column whose path found nothing, failed, or found a value of
    /// another type than the column's (kubectl prints `<none>`).
    Null,
    /// A string cell.
    Text(Box<str>),
    /// An integer cell.
    Integer(i64),
    /// A number cell.
    Number(f64),
    /// A boolean cell.
    Bool(bool),
    /// The time since a moment, as `translateTimestampSince` prints it: `HumanDuration(now -
    /// t)`, or `<unknown>` for a missing (zero) time.
    Age(Option<Timestamp>),
    /// A pod's restarts with the last one's time: `3 (5m ago)`.
    Restarts {
        /// Restarts of the containers counted.
        count: i64,
        /// When the last counted container last terminated.
        last: Timestamp,
    },
}

impl Cell {
    /// A string cell.
    pub fn text(text: impl Into<Box<str>>) -> Cell {
        Cell::Text(text.into())
    }

    /// The cell as the apiserver's Table holds it at `now` (e.g. "5m" for an age).
    pub fn to_table_value(&self, now: SystemTime) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Text(text) => Value::String(text.to_string()),
            Cell::Integer(n) => Value::from(*n),
            Cell::Number(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
            Cell::Bool(b) => Value::Bool(*b),
            Cell::Age(None) => Value::String("<unknown>".to_owned()),
            Cell::Age(Some(since)) => Value::String(duration::since(*since, now)),
            Cell::Restarts { count, last } => {
                Value::String(format!("{count} ({} ago)", duration::since(*last, now)))
            }
        }
    }
}

/// A printer that cannot be built from a CRD's `additionalPrinterColumns`.
#[derive(Debug, thiserror::Error)]
pub enum PrinterError {
    /// `additionalPrinterColumns` is not an array of column objects.
    #[error("additionalPrinterColumns is not an array of columns: {0}")]
    NotColumns(String),
    /// A column's `jsonPath` does not parse (the apiserver's "unrecognized column definition").
    #[error("unrecognized column definition {path:?}")]
    JsonPath {
        /// The column's path as the CRD has it.
        path: String,
        /// Why it does not parse.
        #[source]
        source: JsonPathError,
    },
}

/// How one kind is printed: its columns and how to read its cells from an object.
#[derive(Clone)]
pub struct Printer {
    columns: Columns,
    cells: Cells,
}

#[derive(Clone)]
enum Columns {
    Static(&'static [Column]),
    Shared(Arc<[Column]>),
}

#[derive(Clone)]
enum Cells {
    Builtin(fn(&Value) -> Vec<Cell>),
    Custom(Arc<[custom::CustomColumn]>),
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer")
            .field("columns", &self.columns())
            .finish_non_exhaustive()
    }
}

impl Printer {
    pub(crate) const fn builtin(
        columns: &'static [Column],
        cells: fn(&Value) -> Vec<Cell>,
    ) -> Printer {
        Printer {
            columns: Columns::Static(columns),
            cells: Cells::Builtin(cells),
        }
    }

    /// Columns, `Name` first (an Event's is last, as the apiserver has it), in the
    /// apiserver's order (priority 1 = `-o wide`).
    pub fn columns(&self) -> &[Column] {
        match &self.columns {
            Columns::Static(columns) => columns,
            Columns::Shared(columns) => columns,
        }
    }

    /// One cell per column for `object` (the whole object as JSON).
    pub fn cells(&self, object: &Value) -> Vec<Cell> {
        match &self.cells {
            Cells::Builtin(cells) => cells(object),
            Cells::Custom(columns) => custom::cells(columns, object),
        }
    }

    /// A CRD version's `additionalPrinterColumns` (the JSON array, may be absent/empty):
    /// `Name`, then those columns; an absent or empty list gives `Name` and `Age`, as the
    /// apiserver serves it (it adds no `Age` to a non-empty list). A JSONPath that fails on an
    /// object gives a null cell, as the apiserver does (kubectl prints `<none>`), never a panic.
    pub fn custom(additional_printer_columns: Option<&Value>) -> Result<Printer, PrinterError> {
        let (columns, custom) = custom::parse(additional_printer_columns)?;
        Ok(Printer {
            columns: Columns::Shared(columns.into()),
            cells: Cells::Custom(custom.into()),
        })
    }

    /// `Name` and `Created At`: what the apiserver prints for a kind it has no printer for
    /// (`rest.NewDefaultTableConvertor`: the creation time as an RFC 3339 date, not an age).
    pub fn default_columns() -> Printer {
        Printer::builtin(columns::DEFAULT, builtin::default_cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn time_cells_render_at_the_given_moment() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now = SystemTime::from(created) + Duration::from_secs(5 * 60 + 7);
        assert_eq!(Cell::Age(Some(created)).to_table_value(now), "5m7s");
        assert_eq!(Cell::Age(None).to_table_value(now), "<unknown>");
        let restarts = Cell::Restarts {
            count: 3,
            last: created,
        };
        assert_eq!(restarts.to_table_value(now), "3 (5m7s ago)");
        assert_eq!(Cell::Integer(4).to_table_value(now), 4);
        assert_eq!(Cell::Null.to_table_value(now), Value::Null);
    }

    #[test]
    fn printers_and_cells_can_be_shared_across_threads() {
        fn shared<T: Send + Sync + Clone>() {}
        shared::<Printer>();
        shared::<Cell>();
        // Cells are kept per object in the cache: a time and a count at most.
        assert!(std::mem::size_of::<Cell>() <= 32);
    }

    #[test]
    fn default_columns_are_name_and_created_at() {
        let printer = Printer::default_columns();
        let names: Vec<_> = printer.columns().iter().map(|c| &*c.name).collect();
        assert_eq!(names, ["Name", "Created At"]);
        assert_eq!(printer.columns()[1].type_, ColumnType::Date);
        let role = serde_json::json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-02T03:04:05Z"}});
        assert_eq!(
            printer.cells(&role),
            [Cell::text("r"), Cell::text("2026-01-02T03:04:05Z")]
        );
        let no_time = serde_json::json!({"metadata": {"name": "r"}});
        assert_eq!(
            printer.cells(&no_time)[1],
            Cell::text("0001-01-01T00:00:00Z")
        );
    }
}
