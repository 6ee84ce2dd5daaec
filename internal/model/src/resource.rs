//! A served resource as a value: what the registry holds, requests are looked up in, and
//! routes, access rules and errors read their names from. The built-in catalog's rows become
//! these at start; a custom resource's is built when its CRD is seen.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use printers::Printer;

use crate::{Dictionary, Kind, ObjectKey, object_json};

/// Which record type serves a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedBy {
    /// Its own typed record (the original client's DTOs and relations).
    Typed(Kind),
    /// [`crate::GenericRecord`]s of the whole object.
    Generic,
    /// [`crate::GenericRecord`]s of its metadata alone: the object's values are never read
    /// (Secrets).
    MetadataOnly,
}

/// What a served resource is.
#[derive(Debug)]
pub struct ResourceInfo {
    /// As requests name it: the plural for a built-in kind (`configmaps`), the
    /// group-qualified plural for a custom resource (`widgets.example.com`).
    pub name: Cow<'static, str>,
    pub kind: Cow<'static, str>,
    /// Empty for the core group.
    pub group: Cow<'static, str>,
    pub version: Cow<'static, str>,
    pub plural: Cow<'static, str>,
    pub namespaced: bool,
    /// The field paths a field selector may name: the apiserver's for the kind (borrowed
    /// from the catalog), or a custom resource's (named by its CRD, owned: a CRD deleted
    /// takes them with it).
    pub fields: Vec<Cow<'static, str>>,
    pub printer: Printer,
    pub served_by: ServedBy,
    /// The short names (`cm`) and categories (`all`) discovery lists, as the apiserver has
    /// them (a custom resource's from its CRD's `names`).
    pub short_names: Vec<Cow<'static, str>>,
    pub categories: Vec<Cow<'static, str>>,
    /// The warning the apiserver sends with every answer about it (a deprecated API), which
    /// the Kubernetes API sends too.
    pub warning: Option<Cow<'static, str>>,
    /// What its kept objects are compressed against.
    pub dictionary: Dictionary,
}

/// A served resource; cheap to clone.
#[derive(Clone, Debug)]
pub struct Resource(Arc<ResourceInfo>);

impl std::ops::Deref for Resource {
    type Target = ResourceInfo;
    fn deref(&self) -> &ResourceInfo {
        &self.0
    }
}

/// Two resources are the same resource by group and plural, as the apiserver tells them.
impl PartialEq for Resource {
    fn eq(&self, other: &Self) -> bool {
        self.group == other.group && self.plural == other.plural
    }
}

impl Eq for Resource {}

impl Resource {
    pub fn new(info: ResourceInfo) -> Self {
        Resource(Arc::new(info))
    }

    /// The key of the object `name` in `namespace`, as requests and deletions name it: a
    /// cluster-scoped object lives in itself, whatever namespace the request named, so every
    /// namespace rule applies to it as to a Namespace.
    pub fn key_of(&self, namespace: &str, name: &str) -> ObjectKey {
        let (namespace, name) = self.key_parts(namespace, name);
        ObjectKey::new(namespace, name)
    }

    /// [`Resource::key_of`]'s parts, borrowed, for a lookup.
    pub fn key_parts<'a>(&self, namespace: &'a str, name: &'a str) -> (&'a str, &'a str) {
        if self.namespaced {
            (namespace, name)
        } else {
            (name, name)
        }
    }

    /// `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Its singular name, as discovery lists it: the kind in lowercase.
    pub fn singular(&self) -> String {
        self.kind.to_lowercase()
    }

    /// Its field paths beyond metadata, in the allow-list's order: the values a
    /// [`crate::GenericRecord`] reads from each object.
    pub fn object_fields(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .map(|f| &**f)
            .filter(|f| !f.starts_with("metadata."))
    }

    /// An object of it as records keep it: its compact JSON, compressed against the
    /// resource's dictionary.
    pub fn keep(&self, object: &impl serde::Serialize) -> Bytes {
        self.keep_json(&object_json(object))
    }

    /// An object of it as records keep it, from its compact JSON (as the apiserver sent it):
    /// compressed against the resource's dictionary.
    pub fn keep_json(&self, json: &[u8]) -> Bytes {
        self.dictionary.compress(json)
    }

    /// The JSON of an object [`Resource::keep`] kept; `key` names the object in the error.
    pub fn kept_json(&self, raw: &[u8], key: &ObjectKey) -> Result<Vec<u8>, String> {
        self.dictionary
            .decompress(raw, &format_args!("{self} {key}"))
    }

    /// [`Resource::kept_json`] of an object answered alone ([`Dictionary::decompress_alone`]).
    pub fn kept_json_alone(&self, raw: &Bytes, key: &ObjectKey) -> Result<Bytes, String> {
        self.dictionary
            .decompress_alone(raw, &format_args!("{self} {key}"))
    }

    /// The typed kind serving it, if one does.
    pub fn typed(&self) -> Option<Kind> {
        match self.served_by {
            ServedBy::Typed(kind) => Some(kind),
            ServedBy::Generic | ServedBy::MetadataOnly => None,
        }
    }
}

/// Lowercase, as errors name it: `configmap "web" not found`.
impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::built_in;

    #[test]
    fn a_cluster_scoped_object_lives_in_itself() {
        let nodes = built_in("nodes").unwrap().resource();
        assert_eq!(nodes.key_of("default", "n1"), ObjectKey::new("n1", "n1"));
        let config_maps = built_in("configmaps").unwrap().resource();
        assert_eq!(
            config_maps.key_of("default", "c"),
            ObjectKey::new("default", "c")
        );
        assert_eq!(config_maps.api_version(), "v1");
        assert_eq!(
            built_in("statefulsets").unwrap().resource().api_version(),
            "apps/v1"
        );
        assert_eq!(config_maps.to_string(), "configmap");
    }
}
