//! Reading fields of an object as JSON the way the printers see the Go struct: an absent
//! field (or one of another type) is Go's zero value, which is what `printers.go` reads for it.

use jiff::Timestamp;
use serde_json::Value;

/// The value at a JSON pointer (`/spec/replicas`), if present and not null.
pub(crate) fn at<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    // serde_json's `pointer` unescapes every token into a new String; a Table reads a dozen
    // pointers per row, all literals without escapes, so those are walked as they are.
    let found = if pointer.is_empty() || pointer.contains('~') {
        object.pointer(pointer)
    } else {
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(object, |value, token| match value {
                Value::Object(members) => members.get(token),
                Value::Array(items) => index(token).and_then(|i| items.get(i)),
                _ => None,
            })
    };
    found.filter(|value| !value.is_null())
}

/// An array index as JSON Pointer writes it: digits, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    let digits = token.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = token.len() > 1 && token.starts_with('0');
    (digits && !leading_zero)
        .then(|| token.parse().ok())
        .flatten()
}

/// A string field, `""` (Go's zero value) when absent.
pub(crate) fn string<'a>(object: &'a Value, pointer: &str) -> &'a str {
    at(object, pointer).and_then(Value::as_str).unwrap_or("")
}

/// An integer field, 0 (Go's zero value) when absent.
pub(crate) fn int(object: &Value, pointer: &str) -> i64 {
    at(object, pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// A boolean field, false (Go's zero value) when absent.
pub(crate) fn boolean(object: &Value, pointer: &str) -> bool {
    at(object, pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// An array field, empty (Go's nil slice) when absent.
pub(crate) fn list<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    at(object, pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A map field's entries, empty (Go's nil map) when absent.
pub(crate) fn map<'a>(
    object: &'a Value,
    pointer: &str,
) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
    at(object, pointer)
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|map| map.iter().map(|(k, v)| (k.as_str(), v)))
}

/// A map field's length, 0 when absent.
pub(crate) fn map_len(object: &Value, pointer: &str) -> usize {
    at(object, pointer)
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len)
}

/// A `metav1.Time` or `MicroTime` field, `None` when absent (Go's zero time) or unreadable.
pub(crate) fn time(object: &Value, pointer: &str) -> Option<Timestamp> {
    at(object, pointer)
        .and_then(Value::as_str)
        .and_then(parse_time)
}

/// An RFC 3339 time as `metav1.Time` reads it; the zero time (year 1) counts as absent.
pub(crate) fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse::<Timestamp>()
        .ok()
        .filter(|t| *t != go_zero_time())
}

/// Go's `time.Time{}`: 0001-01-01T00:00:00Z.
pub(crate) fn go_zero_time() -> Timestamp {
    // -62135596800 is 0001-01-01T00:00:00Z, inside jiff's range.
    Timestamp::from_second(-62_135_596_800).unwrap_or(Timestamp::MIN)
}

/// `metadata.name`.
pub(crate) fn name(object: &Value) -> &str {
    string(object, "/metadata/name")
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(object: &Value) -> bool {
    at(object, "/metadata/deletionTimestamp").is_some()
}

/// A `resource.Quantity` in a map (`capacity.storage`): its canonical text as the apiserver
/// serialises it, "0" (the zero quantity) when absent.
pub(crate) fn quantity_in_map<'a>(object: &'a Value, pointer: &str) -> &'a str {
    match at(object, pointer).and_then(Value::as_str) {
        Some(text) => text,
        None => "0",
    }
}

/// A `*resource.Quantity` field: its text, `<nil>` when absent (`(*Quantity)(nil).String()`).
pub(crate) fn quantity_pointer<'a>(object: &'a Value, pointer: &str) -> &'a str {
    match at(object, pointer).and_then(Value::as_str) {
        Some(text) => text,
        None => "<nil>",
    }
}

/// An `*intstr.IntOrString`, as its `String()` prints it; `None` when absent.
pub(crate) fn int_or_string(object: &Value, pointer: &str) -> Option<String> {
    match at(object, pointer)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn at_reads_as_serde_jsons_pointer_does() {
        let object = json!({
            "spec": {"replicas": 3, "containers": [{"name": "a"}, {"name": "b"}], "none": null},
            "a/b": {"c~d": 1},
            "": {"x": 2},
        });
        for pointer in [
            "",
            "/spec",
            "/spec/replicas",
            "/spec/containers/1/name",
            "/spec/containers/01/name",
            "/spec/containers/+1/name",
            "/spec/containers/2/name",
            "/spec/containers/name",
            "/spec/replicas/deeper",
            "/spec/none",
            "/missing",
            "/a~1b/c~0d",
            "//x",
            "spec",
        ] {
            assert_eq!(
                at(&object, pointer),
                object.pointer(pointer).filter(|v| !v.is_null()),
                "{pointer:?}"
            );
        }
    }
}
