//! Printers for custom resources from a CRD version's `additionalPrinterColumns`, as the
//! apiserver's CRD table convertor (`apiextensions-apiserver/pkg/registry/customresource/
//! tableconvertor`) builds and fills them.

use std::borrow::Cow;

use jiff::Timestamp;
use serde_json::Value;

use crate::columns::{METADATA_CREATION_TIMESTAMP, METADATA_NAME};
use crate::jsonpath::{self, JsonPath};
use crate::object::{go_zero_time, name, string};
use crate::{Cell, Column, ColumnType, PrinterError};

/// One additional column: its type and its path.
pub(crate) struct CustomColumn {
    type_: ColumnType,
    path: JsonPath,
}

/// The columns (Name first) and the additional columns of a CRD version.
pub(crate) fn parse(
    additional: Option<&Value>,
) -> Result<(Vec<Column>, Vec<CustomColumn>), PrinterError> {
    let definitions = match additional {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(other) => return Err(PrinterError::NotColumns(other.to_string())),
    };
    let mut columns = vec![Column {
        name: Cow::Borrowed("Name"),
        type_: ColumnType::String,
        format: Cow::Borrowed("name"),
        description: Cow::Borrowed(METADATA_NAME),
        priority: 0,
    }];
    let mut custom = Vec::new();
    if definitions.is_empty() {
        // serveDefaultColumnsIfEmpty
        columns.push(Column {
            name: Cow::Borrowed("Age"),
            type_: ColumnType::Date,
            format: Cow::Borrowed(""),
            description: Cow::Borrowed(METADATA_CREATION_TIMESTAMP),
            priority: 0,
        });
        custom.push(CustomColumn {
            type_: ColumnType::Date,
            path: JsonPath::parse(".metadata.creationTimestamp").map_err(|source| {
                PrinterError::JsonPath {
                    path: ".metadata.creationTimestamp".to_owned(),
                    source,
                }
            })?,
        });
        return Ok((columns, custom));
    }
    for definition in definitions {
        if !definition.is_object() {
            return Err(PrinterError::NotColumns(definition.to_string()));
        }
        let path_text = string(definition, "/jsonPath");
        let path = JsonPath::parse(path_text).map_err(|source| PrinterError::JsonPath {
            path: path_text.to_owned(),
            source,
        })?;
        let type_name = string(definition, "/type");
        let Some(type_) = ColumnType::parse(type_name) else {
            return Err(PrinterError::NotColumns(format!(
                "column {:?} has type {type_name:?}",
                string(definition, "/name")
            )));
        };
        let description = match string(definition, "/description") {
            "" => format!("Custom resource definition column (in JSONPath format): {path_text}"),
            description => description.to_owned(),
        };
        let priority = definition
            .pointer("/priority")
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0);
        columns.push(Column {
            name: Cow::Owned(string(definition, "/name").to_owned()),
            type_,
            format: Cow::Owned(string(definition, "/format").to_owned()),
            description: Cow::Owned(description),
            priority,
        });
        custom.push(CustomColumn { type_, path });
    }
    Ok((columns, custom))
}

/// The cells of one custom resource: its name, then each column's value (`cellForJSONValue`,
/// or the printed value for a string column); a path that fails or finds nothing is null.
pub(crate) fn cells(columns: &[CustomColumn], object: &Value) -> Vec<Cell> {
    let mut cells = Vec::with_capacity(1 + columns.len());
    cells.push(Cell::text(name(object)));
    for column in columns {
        let cell = match column.path.first(object) {
            Ok(Some(value)) => cell(column.type_, &value),
            Ok(None) | Err(_) => Cell::Null,
        };
        cells.push(cell);
    }
    cells
}

fn cell(type_: ColumnType, value: &Value) -> Cell {
    match (type_, value) {
        (ColumnType::String, value) => Cell::text(jsonpath::print(value)),
        (_, Value::Null) => Cell::Null,
        (ColumnType::Integer, Value::Number(n)) => match n.as_i64() {
            Some(i) => Cell::Integer(i),
            // Go's int64(float64): truncated toward zero (saturating here).
            None => n.as_f64().map_or(Cell::Null, |f| Cell::Integer(f as i64)),
        },
        (ColumnType::Number, Value::Number(n)) => n.as_f64().map_or(Cell::Null, Cell::Number),
        (ColumnType::Boolean, Value::Bool(b)) => Cell::Bool(*b),
        (ColumnType::Date, Value::String(text)) => date(text),
        _ => Cell::Null,
    }
}

/// `metav1.Time.UnmarshalQueryParameter` then `ConvertToHumanReadableDateType`.
fn date(text: &str) -> Cell {
    if text.is_empty() || text == "null" {
        return Cell::Age(None);
    }
    match text.parse::<Timestamp>() {
        Ok(t) if t == go_zero_time() => Cell::Age(None),
        Ok(t) => Cell::Age(Some(t)),
        Err(_) => Cell::text("<invalid>"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::builtin::tests::{at_age, mk};
    use crate::{ColumnType, Printer};

    fn widget() -> serde_json::Value {
        mk(
            "w",
            json!({
                "spec": {"size": 3, "ratio": 0.5, "on": true, "tags": ["a"], "color": {"r": 1}},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                                           "lastTransitionTime": "2026-01-01T00:50:00Z"}]},
            }),
        )
    }

    #[test]
    fn no_columns_print_name_and_age() {
        let printer = Printer::custom(None).unwrap();
        let columns: Vec<_> = printer
            .columns()
            .iter()
            .map(|c| (&*c.name, c.type_))
            .collect();
        assert_eq!(
            columns,
            [("Name", ColumnType::String), ("Age", ColumnType::Date)]
        );
        assert_eq!(at_age(&printer.cells(&widget())), ["w", "60m"]);
        assert_eq!(
            Printer::custom(Some(&json!([]))).unwrap().columns().len(),
            2
        );
    }

    #[test]
    fn columns_follow_the_crd_without_an_added_age() {
        let printer = Printer::custom(Some(&json!([
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
            {"name": "On", "type": "boolean", "jsonPath": ".spec.on", "description": "power"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Since", "type": "date", "jsonPath": ".status.conditions[0].lastTransitionTime"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nope"},
            {"name": "Broken", "type": "string", "jsonPath": ".spec.tags[4]"},
            {"name": "Mistyped", "type": "integer", "jsonPath": ".spec.tags"},
            {"name": "SizeText", "type": "string", "jsonPath": ".spec.size", "format": "int32"},
        ])))
        .unwrap();
        let columns = printer.columns();
        assert_eq!(columns.len(), 11);
        assert_eq!((&*columns[2].name, columns[2].priority), ("Ratio", 1));
        assert_eq!(columns[3].description, "power");
        assert_eq!(
            columns[1].description,
            "Custom resource definition column (in JSONPath format): .spec.size"
        );
        assert_eq!(columns[10].format, "int32");
        assert_eq!(
            at_age(&printer.cells(&widget())),
            [
                "w",
                "3",
                "0.5",
                "true",
                "True",
                "10m",
                r#"{"r":1}"#,
                "null",
                "null",
                "null",
                "3"
            ]
        );
    }

    #[test]
    fn bad_definitions_are_errors() {
        assert!(
            Printer::custom(Some(
                &json!([{"name": "X", "type": "string", "jsonPath": ".a[x]"}])
            ))
            .is_err()
        );
        assert!(
            Printer::custom(Some(
                &json!([{"name": "X", "type": "color", "jsonPath": ".a"}])
            ))
            .is_err()
        );
        assert!(Printer::custom(Some(&json!({"name": "X"}))).is_err());
    }

    #[test]
    fn dates_that_do_not_parse_are_invalid() {
        let printer = Printer::custom(Some(&json!([
            {"name": "T", "type": "date", "jsonPath": ".spec.t"}])))
        .unwrap();
        let cells =
            |t: serde_json::Value| at_age(&printer.cells(&mk("x", json!({"spec": {"t": t}}))));
        assert_eq!(cells(json!("yesterday")), ["x", "<invalid>"]);
        assert_eq!(cells(json!("")), ["x", "<unknown>"]);
        assert_eq!(cells(json!(5)), ["x", "null"]);
    }
}
