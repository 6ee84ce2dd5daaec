//! Placeholder of the `printers` crate (issue 19, Contract 1): its interface, with the
//! apiserver's default columns (NAME, AGE) for every kind. Branch `printers` replaces this
//! file with kubectl's columns for each kind.
#![warn(missing_docs)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

/// A column's type, as the apiserver's Table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// A number.
    Number,
    /// true or false.
    Boolean,
    /// A time, printed as an age.
    Date,
}

/// One column as the apiserver's Table has it (meta.k8s.io/v1 TableColumnDefinition).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Column {
    /// "NAME", "READY", ...
    pub name: Cow<'static, str>,
    /// The type of its cells.
    #[serde(rename = "type")]
    pub type_: ColumnType,
    /// "name" for NAME, else as the apiserver says.
    pub format: Cow<'static, str>,
    /// What the column shows.
    pub description: Cow<'static, str>,
    /// 0 shown by `kubectl get`, 1 only with -o wide.
    pub priority: i32,
}

/// One cell, kept in the cache: a time-relative cell keeps the time, not the text.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Cell {
    /// Text as printed.
    Text(String),
    /// An age: the time it counts from (RFC 3339), if the object has one.
    Age(Option<String>),
}

impl Cell {
    /// The cell as the apiserver's Table holds it at `now` (e.g. "5m" for an age).
    pub fn to_table_value(&self, now: SystemTime) -> serde_json::Value {
        match self {
            Cell::Text(text) => serde_json::Value::String(text.clone()),
            Cell::Age(since) => serde_json::Value::String(age(since.as_deref(), now)),
        }
    }
}

/// kubectl's age: `<unknown>` without a valid time.
fn age(since: Option<&str>, now: SystemTime) -> String {
    let Some(since) = since.and_then(|s| s.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let Ok(now) = jiff::Timestamp::try_from(now) else {
        return "<unknown>".into();
    };
    let seconds = (now.as_second() - since.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s if s < 8 * 86400 => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Why a CRD's printer columns cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrinterError {
    /// additionalPrinterColumns is not an array of columns.
    #[error("invalid additionalPrinterColumns: {0}")]
    Invalid(String),
}

/// How one kind is printed: its columns and how to read its cells from an object.
#[derive(Clone, Debug)]
pub struct Printer {
    columns: Arc<[Column]>,
}

impl Printer {
    /// Columns, NAME first, in the apiserver's order (priority 1 = `-o wide`).
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// One cell per column for `object` (the whole object as JSON).
    pub fn cells(&self, object: &serde_json::Value) -> Vec<Cell> {
        let meta = &object["metadata"];
        vec![
            Cell::Text(meta["name"].as_str().unwrap_or_default().to_string()),
            Cell::Age(meta["creationTimestamp"].as_str().map(str::to_string)),
        ]
    }

    /// A CRD version's `additionalPrinterColumns`; this placeholder prints NAME and AGE.
    pub fn custom(
        additional_printer_columns: Option<&serde_json::Value>,
    ) -> Result<Printer, PrinterError> {
        match additional_printer_columns {
            None | Some(serde_json::Value::Array(_)) => Ok(Printer::default_columns()),
            Some(other) => Err(PrinterError::Invalid(format!("not an array: {other}"))),
        }
    }

    /// NAME and AGE only (what the apiserver prints for a kind it has no printer for).
    pub fn default_columns() -> Printer {
        let column = |name: &'static str, type_, format: &'static str, description| Column {
            name: name.into(),
            type_,
            format: format.into(),
            description: Cow::Borrowed(description),
            priority: 0,
        };
        Printer {
            columns: Arc::new([
                column(
                    "Name",
                    ColumnType::String,
                    "name",
                    "Name must be unique within a namespace.",
                ),
                column(
                    "Created At",
                    ColumnType::Date,
                    "",
                    "CreationTimestamp is a timestamp representing the server time when this object was created.",
                ),
            ]),
        }
    }
}

/// One constructor per built-in kind (this placeholder: NAME and AGE for each).
pub mod builtin {
    use super::Printer;

    macro_rules! default_printers {
        ($($kind:ident),* $(,)?) => {
            $(
                #[doc = concat!("How `", stringify!($kind), "` objects are printed.")]
                pub fn $kind() -> Printer {
                    Printer::default_columns()
                }
            )*
        };
    }

    default_printers!(
        pod,
        deployment,
        stateful_set,
        daemon_set,
        replica_set,
        job,
        cron_job,
        horizontal_pod_autoscaler,
        pod_disruption_budget,
        service,
        endpoint_slice,
        ingress,
        ingress_class,
        network_policy,
        config_map,
        secret,
        persistent_volume_claim,
        persistent_volume,
        storage_class,
        service_account,
        role,
        role_binding,
        cluster_role,
        cluster_role_binding,
        node,
        namespace,
        event,
        resource_quota,
        limit_range,
        priority_class,
        custom_resource_definition,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_columns_print_name_and_age() {
        let printer = builtin::config_map();
        assert_eq!(printer.columns()[0].format, "name");
        let object = serde_json::json!({"metadata": {"name": "a",
            "creationTimestamp": "2026-11-01T10:00:00Z"}});
        let cells = printer.cells(&object);
        assert_eq!(cells.len(), printer.columns().len());
        let later = SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(
                "2026-11-01T10:05:00Z"
                    .parse::<jiff::Timestamp>()
                    .unwrap()
                    .as_second() as u64,
            );
        assert_eq!(cells[0].to_table_value(later), "a");
        assert_eq!(cells[1].to_table_value(later), "5m0s");
    }
}
