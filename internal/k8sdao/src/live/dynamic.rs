//! Generic resources read live: any served resource (a built-in kind without a typed record,
//! a custom resource) listed and got through kube's `DynamicObject` API, each object made the
//! same [`GenericRecord`] the cache keeps (managedFields stripped, `apiVersion` and `kind`
//! set as a watch sends them), so both sources answer alike.

use std::sync::Arc;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use model::{GenericObject, GenericRecord, Resource};

use super::reads::list_params;
use super::{LiveSource, required};
use crate::{DaoError, ListQuery, Listing, ReadAt};

/// The record the cache would keep of `object`.
fn generic_record(resource: &Resource, mut object: DynamicObject) -> Arc<GenericRecord> {
    confk8s::strip_noise(&mut object);
    // A list's items come without their type; a watch's (the cache's) with it.
    object.types.get_or_insert_with(|| TypeMeta {
        api_version: resource.api_version(),
        kind: resource.kind.to_string(),
    });
    let object = serde_json::to_value(&object).expect(
        "a DynamicObject always serializes: its metadata's maps and its data are keyed by String",
    );
    GenericRecord::from_generic(&GenericObject {
        resource: resource.clone(),
        object,
    })
}

/// The namespace an object is in for queries and rights: its own, or, cluster-scoped, itself
/// (as the cache keys it).
fn home<'a>(resource: &Resource, object: &'a DynamicObject) -> &'a str {
    let meta = &object.metadata;
    if resource.namespaced {
        meta.namespace.as_deref().unwrap_or("")
    } else {
        meta.name.as_deref().unwrap_or("")
    }
}

impl LiveSource {
    /// The `DynamicObject` API of `resource`, over `namespace` if it is namespaced and one is
    /// given (a cluster-scoped resource is read whole).
    fn dynamic_api(&self, resource: &Resource, namespace: Option<&str>) -> Api<DynamicObject> {
        let api_resource = ApiResource {
            group: resource.group.to_string(),
            version: resource.version.to_string(),
            api_version: resource.api_version(),
            kind: resource.kind.to_string(),
            plural: resource.plural.to_string(),
        };
        match namespace.filter(|_| resource.namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &api_resource),
            None => Api::all_with(self.client.clone(), &api_resource),
        }
    }

    /// The objects of `resource` that `q` selects, as records, with the list's version.
    pub(super) async fn generic_listing(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<GenericRecord>, DaoError> {
        let namespace = q.namespace.as_deref();
        let list = self
            .dynamic_api(resource, namespace)
            .list(&list_params(q, at))
            .await?;
        let resource_version = required(
            list.metadata.resource_version.clone(),
            || format!("a {} list", resource.name),
            "metadata.resourceVersion",
        )?;
        let items = list
            .items
            .into_iter()
            .filter(|o| {
                let home = home(resource, o);
                namespace.is_none_or(|ns| ns == home) && q.visible.allows(home)
            })
            .map(|o| generic_record(resource, o))
            .collect();
        Ok(Listing {
            resource_version,
            items,
        })
    }

    /// The object `name` of `resource` in `namespace` (ignored for a cluster-scoped one).
    pub(super) async fn generic_object(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<GenericRecord>, DaoError> {
        let object = self
            .dynamic_api(resource, Some(namespace))
            .get_opt(name)
            .await?
            .ok_or_else(|| DaoError::NotFound {
                kind: resource.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            })?;
        Ok(generic_record(resource, object))
    }
}
