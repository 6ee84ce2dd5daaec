//! Namespaces: what a dashboard's namespace picker lists. A Namespace is keyed as living in
//! itself (namespace and name both its name), so every namespace rule (the one asked for,
//! the served one, the ones a caller may see) applies to it as to the objects it holds.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use serde::Serialize;

use crate::{Kind, Labels, ObjectKey, Record, Selectable, Typed, record_fields, rfc3339, to_json};

/// The Namespace as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NamespaceDto {
    pub name: String,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's STATUS: Active or Terminating.
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub key: ObjectKey,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    pub phase: String,
    pub json: Box<str>,
    /// The Namespace, compressed, as the apiserver sent it (managedFields stripped): what
    /// the Kubernetes API serves.
    pub raw: bytes::Bytes,
}

impl NamespaceRecord {
    pub fn from_namespace(ns: &Namespace) -> Arc<Self> {
        Self::with_raw(ns, Self::resource().keep(ns))
    }

    /// The record of `ns`, keeping `raw` as its whole object.
    fn built(ns: &Namespace, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &ns.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let dto = NamespaceDto {
            name: name.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            status: ns
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
        };
        Arc::new(NamespaceRecord {
            raw,
            key: Self::key_of("", &name),
            json: to_json(&dto),
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
            phase: dto.status,
        })
    }
}

record_fields!(NamespaceRecord);

impl Selectable for NamespaceRecord {
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn field(&self, path: &str) -> Option<Cow<'_, str>> {
        match path {
            "metadata.name" => Some(Cow::Borrowed(&self.key.name)),
            "status.phase" => Some(Cow::Borrowed(&self.phase)),
            _ => None,
        }
    }
}

impl Record for NamespaceRecord {
    type Object = Namespace;
    fn from_object(object: &Namespace) -> Arc<Self> {
        NamespaceRecord::from_namespace(object)
    }
    /// In itself, whatever namespace the request named.
    fn key_of(_namespace: &str, name: &str) -> ObjectKey {
        ObjectKey::new(name, name)
    }
    record_fields!();
}

impl Typed for NamespaceRecord {
    const KIND: Kind = Kind::Namespace;
    /// The apiserver's field selectors for Namespaces.
    const FIELDS: &'static [&'static str] = &["metadata.name", "status.phase"];
    type Dto = NamespaceDto;
    fn with_raw(object: &Namespace, raw: bytes::Bytes) -> Arc<Self> {
        NamespaceRecord::built(object, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_lives_in_itself_and_shows_its_phase() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "shop", "labels": {"team": "web"}, "resourceVersion": "7"},
            "status": {"phase": "Terminating"}}))
        .unwrap();
        let r = NamespaceRecord::from_namespace(&ns);
        assert_eq!(r.key, ObjectKey::new("shop", "shop"));
        assert_eq!(NamespaceRecord::key_of("default", "shop"), r.key);
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "shop", "labels": {"team": "web"}, "uid": "",
                "creationTimestamp": null, "resourceVersion": "7", "status": "Terminating"})
        );
        assert_eq!(r.field("status.phase").as_deref(), Some("Terminating"));
        assert_eq!(
            r.field("metadata.namespace"),
            None,
            "not a field of a Namespace"
        );
    }
}
