//! The caches of resources served by generic records, added and removed while the server
//! runs, and the handler that turns a watched object of any type into a generic one.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use confk8s::{Delta, Handler, RelistBatch};
use model::{GenericObject, GenericRecord, Resource};

use crate::{Cache, Cached, Caches};

/// A generic resource kept, and its cache.
#[derive(Clone, Debug)]
pub struct Registered {
    pub resource: Resource,
    pub cache: Arc<Cache<GenericRecord>>,
}

/// The generic resources kept, by the name requests use.
#[derive(Debug, Default)]
pub(crate) struct Resources(RwLock<BTreeMap<String, Registered>>);

impl Resources {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Registered>> {
        // Map updates cannot panic half-way, so a poisoned lock still guards a valid map.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn serve(&self, resource: &Resource, history: usize) -> Arc<Cache<GenericRecord>> {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.entry(resource.name.to_string())
            .or_insert_with(|| Registered {
                resource: resource.clone(),
                cache: Arc::new(Cache::new(history)),
            })
            .cache
            .clone()
    }

    pub(crate) fn stop(&self, name: &str) -> Option<Resource> {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.remove(name).map(|registered| registered.resource)
    }

    pub(crate) fn resource(&self, name: &str) -> Option<Resource> {
        self.read().get(name).map(|r| r.resource.clone())
    }

    /// The cache of `resource`, if that very resource is kept (not one since replaced under
    /// the same name).
    pub(crate) fn cache(&self, resource: &Resource) -> Option<Arc<Cache<GenericRecord>>> {
        self.read()
            .get(resource.name.as_ref())
            .filter(|r| r.resource == *resource)
            .map(|r| r.cache.clone())
    }

    pub(crate) fn resources(&self) -> Vec<Resource> {
        self.read().values().map(|r| r.resource.clone()).collect()
    }

    /// The first resource, by name, that `matches`.
    pub(crate) fn find(&self, mut matches: impl FnMut(&Resource) -> bool) -> Option<Resource> {
        self.read()
            .values()
            .map(|r| &r.resource)
            .find(|r| matches(r))
            .cloned()
    }

    pub(crate) fn len(&self) -> usize {
        self.read().values().map(|r| r.cache.len()).sum()
    }
}

impl Cached for GenericRecord {
    fn cache(caches: &Caches, resource: &Resource) -> Option<Arc<Cache<Self>>> {
        caches.generic.cache(resource)
    }
}

/// Feeds a generic cache from a watch of objects `K`: each object becomes the JSON value it
/// serializes to, of the cache's resource. For the JSON the apiserver sent, nulls and all,
/// watch `confk8s::Sent` objects (a typed object keeps no null).
pub struct AsGeneric<K> {
    resource: Resource,
    cache: Arc<Cache<GenericRecord>>,
    object: PhantomData<fn(K)>,
}

impl<K> AsGeneric<K> {
    pub fn new(resource: Resource, cache: Arc<Cache<GenericRecord>>) -> Arc<Self> {
        Arc::new(AsGeneric {
            resource,
            cache,
            object: PhantomData,
        })
    }
}

/// A delta of `K` as a delta of generic objects of `resource`.
fn generic_delta<K: serde::Serialize>(
    resource: &Resource,
    delta: &Delta<K>,
) -> Delta<GenericObject> {
    let generic = |object: &K| GenericObject {
        resource: resource.clone(),
        // A k8s-openapi object or a DynamicObject always serializes (every map keyed by
        // String, no erring Serialize impl): a failure is a bug of those types, never input,
        // and is named rather than kept as a null object.
        object: serde_json::to_value(object)
            .expect("a k8s-openapi object or a DynamicObject always serializes"),
    };
    match delta {
        Delta::Added(o) => Delta::Added(generic(o)),
        Delta::Updated(o) => Delta::Updated(generic(o)),
        Delta::Deleted(o) => Delta::Deleted(generic(o)),
        Delta::Vanished(key) => {
            let key = resource.key_of(&key.namespace, &key.name);
            Delta::Vanished(confk8s::ObjectKey::new(key.namespace, key.name))
        }
    }
}

impl<K> Handler<K> for AsGeneric<K>
where
    K: serde::Serialize + Send + Sync + 'static,
{
    fn on_deltas(&self, deltas: &[Delta<K>]) {
        let deltas: Vec<_> = deltas
            .iter()
            .map(|d| generic_delta(&self.resource, d))
            .collect();
        self.cache.apply_deltas(&deltas);
    }

    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<K>> {
        Box::new(GenericRelist {
            resource: self.resource.clone(),
            batch: self.cache.clone().begin_relist(),
            object: PhantomData,
        })
    }

    fn on_bookmark(&self, version: &str) {
        self.cache.bookmarked(version);
    }
}

struct GenericRelist<K> {
    resource: Resource,
    batch: Box<dyn RelistBatch<GenericObject>>,
    object: PhantomData<fn(K)>,
}

impl<K: serde::Serialize> RelistBatch<K> for GenericRelist<K> {
    fn add(&mut self, delta: &Delta<K>) {
        self.batch.add(&generic_delta(&self.resource, delta));
    }

    fn commit(self: Box<Self>, version: &str) {
        self.batch.commit(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};
    use model::{Keyed, ObjectKey, Selectable, built_in};

    fn mk_config_map(ns: &str, name: &str, rv: &str) -> ConfigMap {
        serde_json::from_value(
            serde_json::json!({"metadata": {"namespace": ns, "name": name,
            "resourceVersion": rv, "labels": {"app": name}}, "data": {"k": "v"}}),
        )
        .unwrap()
    }

    #[test]
    fn a_served_resource_is_fed_by_its_watch_and_freed_when_stopped() {
        let caches = Caches::new(8);
        let config_maps = built_in("configmaps").unwrap().resource();
        assert!(caches.of::<GenericRecord>(&config_maps).is_none());
        let cache = caches.serve(&config_maps);
        let handler = AsGeneric::<ConfigMap>::new(config_maps.clone(), cache.clone());
        let mut relist = handler.clone().begin_relist();
        relist.add(&Delta::Added(mk_config_map("ns", "a", "5")));
        relist.add(&Delta::Added(mk_config_map("ns", "b", "6")));
        relist.commit("7");
        handler.on_deltas(&[Delta::Updated(mk_config_map("ns", "a", "8"))]);
        let served = caches.of::<GenericRecord>(&config_maps).unwrap();
        let a = served.get(&ObjectKey::new("ns", "a")).unwrap();
        assert_eq!(a.resource_version, "8");
        assert_eq!(a.labels()["app"], "a");
        assert_eq!(caches.len(), 2);
        assert_eq!(caches.namespaces_holding(&config_maps), ["ns"]);
        handler.on_deltas(&[Delta::Deleted(mk_config_map("ns", "b", "9"))]);
        assert_eq!(served.len(), 1);
        assert_eq!(
            caches.generic_resource("configmaps"),
            Some(config_maps.clone())
        );
        // Stopped: no longer found, nothing counted; the informer's handle is all that is left.
        assert_eq!(caches.stop("configmaps"), Some(config_maps.clone()));
        assert!(caches.of::<GenericRecord>(&config_maps).is_none());
        assert_eq!(caches.len(), 0);
        drop((served, handler, a));
        assert_eq!(
            Arc::strong_count(&cache),
            1,
            "the cache is freed with its last user"
        );
    }

    #[test]
    fn a_cluster_scoped_object_vanishes_under_the_key_it_was_kept_by() {
        let caches = Caches::new(8);
        let nodes = built_in("nodes").unwrap().resource();
        let handler = AsGeneric::<Node>::new(nodes.clone(), caches.serve(&nodes));
        let node: Node = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "n1", "resourceVersion": "3"}}),
        )
        .unwrap();
        handler.on_deltas(&[Delta::Added(node)]);
        let cache = caches.of::<GenericRecord>(&nodes).unwrap();
        assert_eq!(
            cache
                .get(&ObjectKey::new("n1", "n1"))
                .map(|r| r.key().clone()),
            Some(ObjectKey::new("n1", "n1"))
        );
        handler.on_deltas(&[Delta::Vanished(confk8s::ObjectKey::new("", "n1"))]);
        assert!(cache.is_empty());
        assert!(cache.get(&ObjectKey::new("n1", "n1")).is_none());
        assert!(nodes.key_of("", "n1").name == "n1");
    }
}
