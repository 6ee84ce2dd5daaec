//! What every record is: its key, age, version and answer ([`Keyed`], [`Record`]), what
//! selectors see of it ([`Selectable`]), the typed kinds' extra ([`Typed`]), and the helpers
//! every projection shares.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Serialize;

use crate::{Kind, ObjectKey, Resource, typed_row};

pub type Labels = BTreeMap<String, String>;

/// The controller that owns an object, from its ownerReferences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// None for a kind k8sailor does not know (a StatefulSet, a Job, a custom resource).
    pub kind: Option<Kind>,
    /// Shared: a Pod's answer names its Deployment, read from its ReplicaSet's owner on
    /// every GET and for each pod of a list, without a copy.
    pub name: Arc<str>,
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
                name: Arc::from(o.name.as_str()),
                uid: o.uid.clone(),
            })
    }
}

/// What every record has: its key and its age, the fields lists sort by.
pub trait Keyed {
    fn key(&self) -> &ObjectKey;
    /// RFC 3339 in UTC: ordering the strings orders the times.
    fn creation_timestamp(&self) -> Option<&str>;
}

/// The parts of [`Keyed`] and [`Record`] every record has alike, read from its fields of the
/// same names: `key`, `creation_timestamp`, `resource_version`, `json` and (a typed record's,
/// kept against its kind's dictionary) `raw`; with
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
        fn raw_json(&self) -> Result<Vec<u8>, String> {
            <Self as $crate::Typed>::resource().kept_json(&self.raw, &self.key)
        }
        fn raw_json_alone(&self) -> Result<bytes::Bytes, String> {
            <Self as $crate::Typed>::resource().kept_json_alone(&self.raw, &self.key)
        }
    };
}
pub(crate) use record_fields;

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
    /// The object as the apiserver sent it (managedFields stripped), which every record
    /// keeps compressed ([`Resource::keep`]): what `/output` and the Kubernetes API serve.
    /// Compact JSON whose first two members are `apiVersion` and `kind`, as k8s-openapi
    /// writes them (and a generic record its object), so the apiserver's list item, which
    /// carries neither, is these bytes with that prefix cut.
    fn raw_json(&self) -> Result<Vec<u8>, String>;
    /// [`Record::raw_json`] of the object answered alone: see
    /// [`crate::Dictionary::decompress_alone`].
    fn raw_json_alone(&self) -> Result<bytes::Bytes, String>;
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
    /// The record of `object`, keeping `raw` (kept by [`Resource::keep`] or
    /// [`Resource::keep_json`]) as its whole object.
    fn with_raw(object: &Self::Object, raw: bytes::Bytes) -> Arc<Self>;
    /// The record of `object` as the apiserver sent it: `json` is the text it came as
    /// (managedFields cut, `apiVersion` and `kind` first), kept instead of the object written
    /// again, which would lose the explicit nulls its type does not keep.
    fn from_sent(object: &Self::Object, json: &[u8]) -> Arc<Self> {
        Self::with_raw(object, Self::resource().keep_json(json))
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

/// A DTO as compact JSON. Our DTOs hold only strings, numbers and string maps, which always
/// serialize.
pub(crate) fn to_json<T: Serialize>(dto: &T) -> Box<str> {
    serde_json::to_string(dto)
        .unwrap_or_else(|e| unreachable!("a DTO always serializes: {e}"))
        .into_boxed_str()
}

/// An object as the apiserver's compact JSON, to be kept compressed. Serializing it cannot
/// fail: serde_json fails only on a map whose keys are not strings or on a `Serialize` impl
/// that errs, and a k8s-openapi object (every map keyed by `String`, its own impls
/// infallible) or a `serde_json::Value` has neither. A failure would be a bug in those
/// types, not bad input, so it is a panic that names it rather than an empty object kept.
pub(crate) fn object_json<T: Serialize>(object: &T) -> Vec<u8> {
    serde_json::to_vec(object).expect("a k8s-openapi object or a JSON value always serializes")
}

pub(crate) fn rfc3339(t: &Option<Time>) -> Option<String> {
    t.as_ref().map(|t| t.0.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_deployment, mk_ingress, mk_replicaset, mk_service};
    use crate::{DeploymentRecord, IngressRecord, ReplicaSetRecord, ServiceRecord};

    /// Each object comes back whole from its record, and one like the kind's first takes a
    /// fraction of its JSON.
    fn keeps_whole<
        R: Typed<Object: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>,
    >(
        objects: [R::Object; 2],
    ) {
        for object in &objects {
            let record = R::from_object(object);
            let json = record.raw_json().unwrap();
            let back: R::Object = serde_json::from_slice(&json).unwrap();
            assert_eq!(&back, object, "{:?}", R::KIND);
        }
        let second = R::from_object(&objects[1]);
        let prefix = format!(
            r#"{{"apiVersion":"{}","kind":"{}","#,
            R::resource().api_version(),
            R::resource().kind
        );
        assert!(
            second.raw_json().unwrap().starts_with(prefix.as_bytes()),
            "{:?}: apiVersion and kind first",
            R::KIND
        );
        let json = object_json(&objects[1]);
        let kept = second.raw_json().unwrap().len();
        assert_eq!(kept, json.len());
        let compressed = R::resource().keep(&objects[1]).len();
        assert!(
            compressed * 3 < json.len(),
            "{:?}: {compressed} of {} bytes",
            R::KIND,
            json.len()
        );
    }

    #[test]
    fn every_typed_record_keeps_its_whole_object_compressed() {
        keeps_whole::<DeploymentRecord>([
            mk_deployment("ns", "web", "d1", &[("app", "web")]),
            mk_deployment("ns", "api", "d2", &[("app", "api")]),
        ]);
        keeps_whole::<ReplicaSetRecord>([
            mk_replicaset("ns", "web-1a", "rs1", Some(("web", "d1"))),
            mk_replicaset("ns", "api-2b", "rs2", Some(("api", "d2"))),
        ]);
        keeps_whole::<ServiceRecord>([
            mk_service("ns", "web", &[("app", "web")]),
            mk_service("ns", "api", &[("app", "api")]),
        ]);
        keeps_whole::<IngressRecord>([
            mk_ingress("ns", "site", "web"),
            mk_ingress("ns", "shop", "api"),
        ]);
    }

    #[test]
    fn a_record_from_its_sent_json_keeps_that_json_nulls_and_all() {
        let deployment = mk_deployment("ns", "web", "d1", &[("app", "web")]);
        let mut sent = serde_json::to_value(&deployment).unwrap();
        sent["spec"]["template"]["metadata"]["creationTimestamp"] = serde_json::Value::Null;
        // apiVersion and kind sort first, as a sent object's kept JSON has them.
        let json = serde_json::to_vec(&sent).unwrap();
        let record = DeploymentRecord::from_sent(&deployment, &json);
        assert_eq!(record.raw_json().unwrap(), json);
        assert_eq!(
            record.json,
            DeploymentRecord::from_object(&deployment).json,
            "the answer is the object's"
        );
        let written_again = DeploymentRecord::from_object(&deployment)
            .raw_json()
            .unwrap();
        assert_ne!(written_again, json, "the typed object has no null to write");
    }
}
