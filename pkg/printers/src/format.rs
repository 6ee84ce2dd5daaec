//! The formatting helpers `printers.go` shares between kinds, ported from apimachinery's
//! `labels` and `metav1` helpers and from `printers.go` itself.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::object::{list, map, string};

/// `labels.FormatLabels`: `k=v` pairs sorted, comma-separated; `<none>` when empty.
pub(crate) fn labels(object: &Value, pointer: &str) -> String {
    let mut pairs: Vec<String> = map(object, pointer)
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        return "<none>".to_owned();
    }
    pairs.join(",")
}

/// Why a label selector is no selector (`metav1.LabelSelectorAsSelector` fails).
pub(crate) struct InvalidSelector;

/// `metav1.LabelSelectorAsSelector(s).String()`: requirements sorted by key; `""` for a
/// missing selector (Nothing) or an empty one (Everything).
pub(crate) fn selector_string(selector: Option<&Value>) -> Result<String, InvalidSelector> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in map(selector, "/matchLabels") {
        requirements.push((
            key.to_owned(),
            format!("{key}={}", value.as_str().unwrap_or("")),
        ));
    }
    for expression in list(selector, "/matchExpressions") {
        let key = string(expression, "/key");
        let mut values: Vec<&str> = list(expression, "/values")
            .iter()
            .map(|v| v.as_str().unwrap_or(""))
            .collect();
        // labels.NewRequirement's rules on the number of values.
        let text = match string(expression, "/operator") {
            "In" | "NotIn" if values.is_empty() => return Err(InvalidSelector),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(InvalidSelector),
            "In" | "NotIn" => {
                let operator = if string(expression, "/operator") == "In" {
                    "in"
                } else {
                    "notin"
                };
                if values.len() > 1 {
                    values.sort_unstable();
                }
                format!("{key} {operator} ({})", values.join(","))
            }
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => return Err(InvalidSelector),
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(","))
}

/// `metav1.FormatLabelSelector`: the selector's string, `<none>` when empty, `<error>` when
/// invalid.
pub(crate) fn label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Ok(text) if text.is_empty() => "<none>".to_owned(),
        Ok(text) => text,
        Err(InvalidSelector) => "<error>".to_owned(),
    }
}

/// `layoutContainerCells`: container names and images, each comma-separated.
pub(crate) fn containers(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec.map_or(&[][..], |spec| list(spec, "/containers"));
    let names: Vec<&str> = containers.iter().map(|c| string(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| string(c, "/image")).collect();
    (names.join(","), images.join(","))
}

/// `helper.GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, each once.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `loadBalancerStatusStringer` / `ingressLoadBalancerStatusStringer` with `wide` (the
/// apiserver always prints wide): each ingress's IP, else hostname, sorted, each once.
pub(crate) fn load_balancer(status: &Value, pointer: &str) -> String {
    let addresses: BTreeSet<&str> = list(status, pointer)
        .iter()
        .filter_map(|ingress| {
            let ip = string(ingress, "/ip");
            let hostname = string(ingress, "/hostname");
            if !ip.is_empty() {
                Some(ip)
            } else if !hostname.is_empty() {
                Some(hostname)
            } else {
                None
            }
        })
        .collect();
    addresses.into_iter().collect::<Vec<_>>().join(",")
}

/// `listWithMoreString`: the first three, then `+ N more...`; `<unset>` when empty.
pub(crate) fn list_with_more(items: &[String], count: usize) -> String {
    const MAX: usize = 3;
    let text = items.join(",");
    if count > MAX {
        return format!("{text} + {} more...", count - MAX);
    }
    if text.is_empty() {
        return "<unset>".to_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_print_as_apimachinery_does() {
        let selector = json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "c", "operator": "DoesNotExist"},
                {"key": "x", "operator": "Exists"},
                {"key": "z", "operator": "NotIn", "values": ["q"]},
            ],
        });
        assert_eq!(
            label_selector(Some(&selector)),
            "a=1,b=2,!c,env in (dev,prod),x,z notin (q)"
        );
        assert_eq!(label_selector(None), "<none>");
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "In"}]});
        assert_eq!(label_selector(Some(&bad)), "<error>");
        assert!(selector_string(Some(&bad)).is_err());
    }

    #[test]
    fn labels_are_sorted_pairs() {
        let object = json!({"l": {"z": "1", "a": "2"}});
        assert_eq!(labels(&object, "/l"), "a=2,z=1");
        assert_eq!(labels(&object, "/none"), "<none>");
    }

    #[test]
    fn access_modes_keep_kubectls_order() {
        let modes = [
            json!("ReadWriteMany"),
            json!("ReadWriteOnce"),
            json!("ReadWriteOnce"),
        ];
        assert_eq!(access_modes(&modes), "RWO,RWX");
    }

    #[test]
    fn list_with_more_counts_the_rest() {
        let three: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(list_with_more(&three, 5), "a,b,c + 2 more...");
        assert_eq!(list_with_more(&[], 0), "<unset>");
    }
}
