//! Objects with the JSON the apiserver sent them as. A k8s-openapi type keeps no explicit
//! `null` (an `Option` that is `None` is not written), but the apiserver writes many: a Pod
//! condition's `lastProbeTime`, an Event's `eventTime`, an HPA's `status.currentMetrics`, a
//! pod template's `metadata.creationTimestamp`. A [`Sent`] object is decoded as its type and
//! keeps the sent bytes beside it, so what is served from them is what the apiserver sends.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::delta::LAST_APPLIED;

/// An object decoded as `K`, with its JSON as the apiserver sent it, but for what the informer
/// drops of every object ([`crate::strip_noise`]: `metadata.managedFields` and the
/// last-applied annotation), and with `apiVersion` and `kind` first (a list's items carry
/// neither: they are written from `K`'s type). Decode it only with serde_json from a string
/// or bytes, as kube's client does: the sent bytes are read as a [`RawValue`], which serde
/// cannot give from what it buffered. So a list is decoded without kube's `ObjectList`
/// (`watcher.rs`), and a watch event's object only when its `type` comes first, as the
/// apiserver writes every event (its Go struct's order).
#[derive(Clone, Debug)]
pub struct Sent<K> {
    /// The object, as its type reads it.
    pub object: K,
    /// Compact JSON, as described above.
    json: String,
}

impl<K> Sent<K> {
    /// The object's JSON: `{"apiVersion":…,"kind":…,` and then the other members as they
    /// were sent, in the order they were sent.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The same JSON with the object turned into `T` (a leaner decoding of the same kind
    /// into its full type, say).
    pub fn map<T>(self, f: impl FnOnce(K) -> T) -> Sent<T> {
        Sent {
            object: f(self.object),
            json: self.json,
        }
    }
}

impl<K: Resource<DynamicType = ()>> Sent<K> {
    /// The object sent as `json` (one object's text), as decoding it makes it.
    pub fn from_json(json: &str) -> serde_json::Result<Self>
    where
        K: DeserializeOwned,
    {
        // Decoded from the kept text: without managedFields, which the type would otherwise
        // build only for the informer to drop.
        let json = kept_json(json, &K::api_version(&()), &K::kind(&()))?;
        Ok(Sent {
            object: serde_json::from_str(&json)?,
            json,
        })
    }
}

impl<'de, K> Deserialize<'de> for Sent<K>
where
    K: DeserializeOwned + Resource<DynamicType = ()>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Scanned once as it is (cheap: no value is built), then decoded from that text.
        let sent = Box::<RawValue>::deserialize(deserializer)?;
        Sent::from_json(sent.get()).map_err(de::Error::custom)
    }
}

/// Written as the JSON kept: serializing it into a `serde_json::Value` gives the object with
/// its nulls.
impl<K> Serialize for Sent<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.json).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Sent<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn metadata_api() -> bool {
        K::metadata_api()
    }
    fn meta(&self) -> &ObjectMeta {
        self.object.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.object.meta_mut()
    }
}

/// A member's name as sent: borrowed from the text unless it had an escape.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(name)))
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// The members of a JSON object in the order sent, their values as sent.
struct Members<'a>(Vec<(Name<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(name) = map.next_key::<Name<'de>>()? {
                    members.push((name, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// The members of `value` if it is an object; None for anything else (a `null`), which is
/// then kept as it is.
fn members(value: &RawValue) -> serde_json::Result<Option<Members<'_>>> {
    if value.get().starts_with('{') {
        serde_json::from_str(value.get()).map(Some)
    } else {
        Ok(None)
    }
}

/// Writes `"name":` to `out`.
fn push_name(out: &mut String, name: &Name<'_>) -> serde_json::Result<()> {
    match &name.0 {
        // Borrowed from between the quotes of the text: it needed no escape there.
        Cow::Borrowed(name) => {
            out.push('"');
            out.push_str(name);
            out.push('"');
        }
        Cow::Owned(name) => out.push_str(&serde_json::to_string(name)?),
    }
    out.push(':');
    Ok(())
}

/// Writes `members` as an object.
fn push_members(out: &mut String, members: &[(Name<'_>, &RawValue)]) -> serde_json::Result<()> {
    out.push('{');
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_name(out, name)?;
        out.push_str(value.get());
    }
    out.push('}');
    Ok(())
}

/// Where the value of `metadata` begins in `sent` when it is the first member but for the type
/// members (with plain string values), as the apiserver writes every object: a Go struct's
/// TypeMeta comes first, and an unstructured object's members are sorted.
fn metadata_start(sent: &str) -> Option<usize> {
    let mut rest = sent.strip_prefix('{')?;
    for name in ["\"kind\":\"", "\"apiVersion\":\"", "\"kind\":\""] {
        if let Some(value) = rest.strip_prefix(name) {
            let end = value.find('"')?;
            if value[..end].contains('\\') {
                return None;
            }
            rest = value[end + 1..].strip_prefix(',')?;
        }
    }
    let value = rest.strip_prefix("\"metadata\":")?;
    value.starts_with('{').then(|| sent.len() - value.len())
}

/// The kept JSON read no further than the metadata: the members after it are copied as they
/// are (the apiserver writes no type member after the metadata: see [`metadata_start`]);
/// None when the text does not begin as the apiserver writes it, and every member is read.
fn kept_json_after_metadata(
    sent: &str,
    api_version: &str,
    kind: &str,
) -> serde_json::Result<Option<String>> {
    let Some(at) = metadata_start(sent) else {
        return Ok(None);
    };
    // The metadata's members read once, and where they end told by the same reading.
    let mut values = serde_json::Deserializer::from_str(&sent[at..]).into_iter::<Members>();
    let Some(metadata) = values.next().transpose()? else {
        return Ok(None);
    };
    let rest = &sent[at + values.byte_offset()..];
    let mut out = String::with_capacity(sent.len());
    push_type(&mut out, api_version, kind)?;
    out.push_str(",\"metadata\":");
    push_metadata(&mut out, metadata)?;
    out.push_str(rest);
    Ok(Some(out))
}

/// Writes `{"apiVersion":…,"kind":…` to `out`.
fn push_type(out: &mut String, api_version: &str, kind: &str) -> serde_json::Result<()> {
    out.push_str("{\"apiVersion\":");
    out.push_str(&serde_json::to_string(api_version)?);
    out.push_str(",\"kind\":");
    out.push_str(&serde_json::to_string(kind)?);
    Ok(())
}

/// The kept JSON of an object sent as `sent`, of `api_version` and `kind` (see [`Sent`]).
fn kept_json(sent: &str, api_version: &str, kind: &str) -> serde_json::Result<String> {
    match kept_json_after_metadata(sent, api_version, kind)? {
        Some(kept) => Ok(kept),
        None => kept_json_of_every_member(sent, api_version, kind),
    }
}

/// The kept JSON, every member read.
fn kept_json_of_every_member(
    sent: &str,
    api_version: &str,
    kind: &str,
) -> serde_json::Result<String> {
    let top: Members = serde_json::from_str(sent)?;
    let mut out = String::with_capacity(sent.len());
    push_type(&mut out, api_version, kind)?;
    for (name, value) in top.0 {
        if matches!(&*name.0, "apiVersion" | "kind") {
            continue;
        }
        out.push(',');
        push_name(&mut out, &name)?;
        let metadata = if name.0 == "metadata" {
            members(value)?
        } else {
            None
        };
        match metadata {
            Some(metadata) => push_metadata(&mut out, metadata)?,
            None => out.push_str(value.get()),
        }
    }
    out.push('}');
    Ok(out)
}

/// Writes the metadata without managedFields and the last-applied annotation (and without
/// annotations if that was the only one, as [`crate::strip_noise`] leaves them).
fn push_metadata(out: &mut String, metadata: Members<'_>) -> serde_json::Result<()> {
    out.push('{');
    let mut first = true;
    for (name, value) in metadata.0 {
        if name.0 == "managedFields" {
            continue;
        }
        // Annotations are read member by member only when the one to drop may be there.
        let annotations = if name.0 == "annotations" && value.get().contains(LAST_APPLIED) {
            members(value)?.map(|annotations| {
                let mut kept = annotations.0;
                kept.retain(|(key, _)| key.0 != LAST_APPLIED);
                kept
            })
        } else {
            None
        };
        if annotations.as_ref().is_some_and(Vec::is_empty) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_name(out, &name)?;
        match annotations {
            Some(annotations) => push_members(out, &annotations)?,
            None => out.push_str(value.get()),
        }
    }
    out.push('}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::{Value, json};

    #[test]
    fn the_json_is_the_sent_one_with_its_nulls_type_first_and_without_noise() {
        let sent = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"ns","resourceVersion":"7","creationTimestamp":"2026-11-01T10:00:00Z","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"a \u0026 b"},"managedFields":[{"manager":"kubectl","fieldsV1":{"f:metadata":{}}}]},"spec":{"containers":[{"name":"c","image":"nginx","resources":{}}]},"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","lastProbeTime":null,"lastTransitionTime":"2026-11-01T10:00:00Z"}]}}"#;
        let pod: Sent<Pod> = serde_json::from_str(sent).unwrap();
        assert!(
            pod.json()
                .starts_with(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"#),
            "{}",
            pod.json()
        );
        let mut expected: Value = serde_json::from_str(sent).unwrap();
        let meta = expected["metadata"].as_object_mut().unwrap();
        meta.remove("managedFields");
        meta["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(LAST_APPLIED);
        let kept: Value = serde_json::from_str(pod.json()).unwrap();
        assert_eq!(kept, expected);
        assert_eq!(
            kept["status"]["conditions"][0]["lastProbeTime"],
            Value::Null,
            "the null is kept"
        );
        assert!(pod.json().contains(r#""lastProbeTime":null"#));
        assert_eq!(pod.object.metadata.name.as_deref(), Some("web"));
        assert_eq!(
            serde_json::to_value(&pod).unwrap(),
            kept,
            "serialized as kept"
        );
    }

    #[test]
    fn a_list_item_gets_its_type_and_lone_noise_leaves_no_trace() {
        // A list's items carry neither apiVersion nor kind.
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {},
            "items": [{"metadata": {"name": "a", "annotations": {LAST_APPLIED: "{}"},
                "managedFields": []}, "data": {"k": "v"}, "immutable": null},
                {"metadata": {"name": "b", "annotations": {LAST_APPLIED: "{}", "q\"\u{1}": "x"}},
                    "data": null}]});
        #[derive(Deserialize)]
        struct List {
            items: Vec<Sent<ConfigMap>>,
        }
        let list: List = serde_json::from_str(&list.to_string()).unwrap();
        let kept: Vec<Value> = list
            .items
            .iter()
            .map(|i| serde_json::from_str(i.json()).unwrap())
            .collect();
        assert_eq!(
            kept,
            [
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                    "data": {"k": "v"}, "immutable": null}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "b", "annotations": {"q\"\u{1}": "x"}}, "data": null}),
            ]
        );
        assert!(
            list.items[0]
                .json()
                .starts_with(r#"{"apiVersion":"v1","kind":"ConfigMap","#)
        );
    }

    #[test]
    fn reading_up_to_the_metadata_keeps_what_reading_every_member_keeps() {
        let pod = r#"{"metadata":{"name":"a","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"x":"\u003c"},"status":null}"#;
        let typed = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"b","managedFields":[]},"spec":{}}"#;
        let reordered = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c"}}"#;
        let nested_kind =
            r#"{"metadata":{"name":"d","managedFields":[]},"spec":{"ref":{"kind":"Node"}}}"#;
        for sent in [pod, typed, reordered, nested_kind] {
            let fast = kept_json_after_metadata(sent, "v1", "Pod").unwrap();
            assert_eq!(
                fast.as_deref(),
                Some(
                    kept_json_of_every_member(sent, "v1", "Pod")
                        .unwrap()
                        .as_str()
                ),
                "{sent}"
            );
        }
        // Not as the apiserver writes an object: every member is read.
        let late_metadata = r#"{"spec":{},"metadata":{"name":"e","managedFields":[]}}"#;
        assert_eq!(
            kept_json_after_metadata(late_metadata, "v1", "Pod").unwrap(),
            None
        );
        assert_eq!(
            kept_json(late_metadata, "v1", "Pod").unwrap(),
            r#"{"apiVersion":"v1","kind":"Pod","spec":{},"metadata":{"name":"e"}}"#
        );
    }

    #[test]
    fn only_an_object_is_sent() {
        for bad in ["null", "[]", "\"x\"", r#"{"metadata":[1]}"#] {
            assert!(
                serde_json::from_str::<Sent<ConfigMap>>(bad).is_err(),
                "{bad}"
            );
        }
        // A metadata of null is kept as it came.
        let cm: Sent<ConfigMap> = serde_json::from_str(r#"{"metadata":null}"#).unwrap();
        assert_eq!(
            cm.json(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":null}"#
        );
    }
}
