//! The record of every kind without a typed one: what every object has (key, uid, labels,
//! age, version, controller), the values of the fields the kind's allow-list names, the
//! printed cells, the answer serialized once per change, and the object itself, compressed,
//! for `/output`.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use printers::Cell;
use serde::Serialize;

use crate::catalog::field_reading;
use crate::{Keyed, Labels, ObjectKey, Owner, Record, Resource, Selectable, ServedBy, rfc3339};

/// An object of a served resource, as the apiserver sent it (managedFields stripped): what a
/// [`GenericRecord`] is built from.
#[derive(Clone, Debug)]
pub struct GenericObject {
    pub resource: Resource,
    pub object: serde_json::Value,
}

/// The answer of a generic kind, as [`GenericRecord::json`] holds it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenericDto<'a> {
    name: &'a str,
    namespace: &'a str,
    uid: &'a str,
    labels: &'a Labels,
    creation_timestamp: Option<&'a str>,
    resource_version: &'a str,
    /// One per column of the kind's printer, as `/resources` lists them.
    cells: &'a [Cell],
}

#[derive(Clone, Debug)]
pub struct GenericRecord {
    /// Its resource: the registry's, shared by every record of it.
    pub resource: Resource,
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// The values of the fields of the kind's allow-list beyond metadata, in its order
    /// ([`Resource::object_fields`]): the names are the resource's, kept once.
    pub fields: Vec<String>,
    pub owner: Option<Owner>,
    pub cells: Vec<Cell>,
    /// The answer, serialized once per change.
    pub json: Box<str>,
    /// The object, compressed against its resource's dictionary (see [`crate::Dictionary`]).
    pub raw: Bytes,
}

/// An object written as k8s-openapi writes a typed one, its apiVersion and kind first (the
/// rest in its order), so every kept object begins alike ([`Record::raw_json`]).
struct TypeFirst<'a>(&'a serde_json::Value);

impl Serialize for TypeFirst<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(members) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(members.len()))?;
        const FIRST: [&str; 2] = ["apiVersion", "kind"];
        for key in FIRST {
            if let Some(value) = members.get(key) {
                map.serialize_entry(key, value)?;
            }
        }
        for (key, value) in members.iter().filter(|(k, _)| !FIRST.contains(&k.as_str())) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The value at a dotted `path` as a field selector compares it: strings as they are,
/// numbers and booleans as the apiserver formats them.
fn value_at(object: &serde_json::Value, path: &str) -> Option<String> {
    let value = path.split('.').try_fold(object, |v, key| v.get(key))?;
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl GenericRecord {
    pub fn from_generic(generic: &GenericObject) -> Arc<Self> {
        let GenericObject { resource, object } = generic;
        // Metadata the apiserver sent always decodes; a malformed one keeps the object
        // nameless rather than dropping it.
        let meta: ObjectMeta = object
            .get("metadata")
            .and_then(|m| serde_json::from_value(m.clone()).ok())
            .unwrap_or_default();
        let key = resource.key_of(
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or(""),
        );
        let fields = resource
            .object_fields()
            .map(|field| {
                let (path, absent) = field_reading(field);
                value_at(object, path).unwrap_or_else(|| absent.to_string())
            })
            .collect();
        let cells = resource.printer.cells(object);
        let labels = meta.labels.clone().unwrap_or_default();
        let creation_timestamp = rfc3339(&meta.creation_timestamp);
        let uid = meta.uid.clone().unwrap_or_default();
        let resource_version = meta.resource_version.clone().unwrap_or_default();
        let json = serde_json::to_string(&GenericDto {
            name: meta.name.as_deref().unwrap_or(""),
            namespace: meta.namespace.as_deref().unwrap_or(""),
            uid: &uid,
            labels: &labels,
            creation_timestamp: creation_timestamp.as_deref(),
            resource_version: &resource_version,
            cells: &cells,
        })
        .unwrap_or_else(|e| unreachable!("a generic answer always serializes: {e}"))
        .into_boxed_str();
        let raw = resource.keep(&TypeFirst(object));
        Arc::new(GenericRecord {
            resource: resource.clone(),
            owner: Owner::controller_of(&meta),
            key,
            uid,
            labels,
            creation_timestamp,
            resource_version,
            fields,
            cells,
            json,
            raw,
        })
    }

    /// Whether only the object's metadata was ever read (Secrets).
    pub fn is_metadata_only(&self) -> bool {
        self.resource.served_by == ServedBy::MetadataOnly
    }
}

impl PartialEq for GenericRecord {
    fn eq(&self, other: &Self) -> bool {
        self.resource == other.resource
            && self.key == other.key
            && self.resource_version == other.resource_version
            && self.json == other.json
    }
}

impl Keyed for GenericRecord {
    fn key(&self) -> &ObjectKey {
        &self.key
    }
    fn creation_timestamp(&self) -> Option<&str> {
        self.creation_timestamp.as_deref()
    }
}

impl Selectable for GenericRecord {
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn field(&self, path: &str) -> Option<Cow<'_, str>> {
        match path {
            "metadata.name" => Some(Cow::Borrowed(&self.key.name)),
            "metadata.namespace" if self.resource.namespaced => {
                Some(Cow::Borrowed(&self.key.namespace))
            }
            _ => self
                .resource
                .object_fields()
                .zip(&self.fields)
                .find(|(field, _)| *field == path)
                .map(|(_, value)| Cow::Borrowed(value.as_str())),
        }
    }
}

impl Record for GenericRecord {
    type Object = GenericObject;
    fn from_object(object: &GenericObject) -> Arc<Self> {
        GenericRecord::from_generic(object)
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
    fn json(&self) -> &str {
        &self.json
    }
    /// For a resource watched as metadata, its metadata alone.
    fn raw_json(&self) -> Result<Vec<u8>, String> {
        self.resource.kept_json(&self.raw, &self.key)
    }
    fn raw_json_alone(&self) -> Result<Bytes, String> {
        self.resource.kept_json_alone(&self.raw, &self.key)
    }
}

/// Generic objects for tests here and in the crates above.
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use super::*;
    use serde_json::json;

    /// An object of `resource` named `name` (in `ns` if it is namespaced), with `labels` and
    /// the rest of `extra` merged in at the top level.
    pub fn mk_object(
        resource: &Resource,
        ns: &str,
        name: &str,
        labels: &[(&str, &str)],
        extra: serde_json::Value,
    ) -> GenericObject {
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let mut metadata = json!({"name": name, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "labels": labels,
            "creationTimestamp": "2026-11-01T10:00:00Z"});
        if resource.namespaced {
            metadata["namespace"] = json!(ns);
        }
        let mut object = json!({"apiVersion": resource.api_version(), "kind": resource.kind,
            "metadata": metadata});
        if let serde_json::Value::Object(extra) = extra {
            for (k, v) in extra {
                object[k] = v;
            }
        }
        GenericObject {
            resource: resource.clone(),
            object,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::mk_object;
    use super::*;
    use crate::built_in;
    use serde_json::json;

    #[test]
    fn a_generic_record_keeps_identity_fields_cells_and_the_object() {
        let events = built_in("events").unwrap().resource();
        let mut object = mk_object(
            &events,
            "shop",
            "web.1",
            &[("app", "web")],
            json!({
            "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "shop"},
            "reason": "Started", "type": "Normal", "source": {"component": "kubelet"},
            "count": 3}),
        );
        object.object["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "web-abc", "uid": "rs1", "controller": true}]);
        let r = GenericRecord::from_generic(&object);
        assert_eq!(r.key, ObjectKey::new("shop", "web.1"));
        assert_eq!(r.field("metadata.namespace").as_deref(), Some("shop"));
        assert_eq!(r.field("involvedObject.kind").as_deref(), Some("Pod"));
        assert_eq!(r.field("source").as_deref(), Some("kubelet"));
        assert_eq!(r.field("type").as_deref(), Some("Normal"));
        assert_eq!(r.field("involvedObject.uid").as_deref(), Some(""));
        assert_eq!(r.field("count"), None, "not in the allow-list");
        for field in &events.fields {
            assert!(r.field(field).is_some(), "{field} is selectable");
        }
        assert_eq!(r.owner.as_ref().map(|o| o.uid.as_str()), Some("rs1"));
        assert_eq!(r.cells.len(), events.printer.columns().len());
        let answer: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(answer["name"], "web.1");
        assert_eq!(answer["namespace"], "shop");
        assert_eq!(answer["uid"], "uid-web.1");
        assert_eq!(answer["labels"], json!({"app": "web"}));
        assert_eq!(answer["creationTimestamp"], "2026-11-01T10:00:00Z");
        assert_eq!(answer["resourceVersion"], "1");
        assert_eq!(answer["cells"].as_array().unwrap().len(), r.cells.len());
        let json = r.raw_json().unwrap();
        assert!(
            json.starts_with(br#"{"apiVersion":"v1","kind":"Event","#),
            "apiVersion and kind first, as a typed object's: {}",
            String::from_utf8_lossy(&json)
        );
        let back: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, object.object);
    }

    #[test]
    fn cluster_scoped_objects_live_in_themselves_and_zero_values_are_formatted() {
        let nodes = built_in("nodes").unwrap().resource();
        let r = GenericRecord::from_generic(&mk_object(&nodes, "", "n1", &[], json!({})));
        assert_eq!(r.key, ObjectKey::new("n1", "n1"));
        assert_eq!(r.field("spec.unschedulable").as_deref(), Some("false"));
        assert_eq!(r.field("metadata.namespace"), None);
        let r = GenericRecord::from_generic(&mk_object(
            &nodes,
            "",
            "n2",
            &[],
            json!({"spec": {"unschedulable": true}}),
        ));
        assert_eq!(r.field("spec.unschedulable").as_deref(), Some("true"));
        let jobs = built_in("jobs").unwrap().resource();
        let r = GenericRecord::from_generic(&mk_object(&jobs, "ns", "j", &[], json!({})));
        assert_eq!(r.field("status.successful").as_deref(), Some("0"));
        let r = GenericRecord::from_generic(&mk_object(
            &jobs,
            "ns",
            "j",
            &[],
            json!({"status": {"succeeded": 2}}),
        ));
        assert_eq!(r.field("status.successful").as_deref(), Some("2"));
    }

    #[test]
    fn an_event_of_the_new_api_is_selected_by_its_own_field_names() {
        let events = built_in("events.events.k8s.io").unwrap().resource();
        let r = GenericRecord::from_generic(&mk_object(
            &events,
            "shop",
            "web.1",
            &[],
            json!({
            "regarding": {"kind": "Pod", "name": "web-1", "namespace": "shop"},
            "reason": "Started", "type": "Normal", "reportingController": "kubelet",
            "deprecatedSource": {"component": "kubelet", "host": "n1"}, "note": "m"}),
        ));
        assert_eq!(r.field("regarding.name").as_deref(), Some("web-1"));
        assert_eq!(r.field("reportingController").as_deref(), Some("kubelet"));
        // The core API's names, and its `source`, which this API does not select on.
        assert_eq!(r.field("involvedObject.name"), None);
        assert_eq!(r.field("source"), None);
        for field in &events.fields {
            assert!(r.field(field).is_some(), "{field} is selectable");
        }
        assert_eq!(r.cells.len(), events.printer.columns().len());
    }
}
