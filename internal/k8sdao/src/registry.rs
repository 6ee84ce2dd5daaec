//! The registry of served resources: the typed kinds' and the generic ones', looked up by the
//! name requests use. Built-in kinds are registered at start, from the catalog; a resource can
//! be added or removed while the server runs (custom resources), its cache with it.

use std::sync::Arc;

use confk8s::{FactoryError, InformerFactory};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use k8scache::{AsGeneric, Cache, Caches};
use kube::core::PartialObjectMeta;
use model::{BuiltIn, GenericRecord, Object, Resource, ServedBy, Visitor, typed_resource};

/// What is served, by name.
#[derive(Clone, Debug)]
pub struct Registry {
    caches: Arc<Caches>,
    /// The typed kinds served, in catalog order.
    typed: Vec<Resource>,
}

impl Registry {
    pub fn new(caches: Arc<Caches>, typed: Vec<Resource>) -> Self {
        Registry { caches, typed }
    }

    /// The typed kinds alone (the live source, tests).
    pub fn typed_only() -> Self {
        Registry::new(Arc::new(Caches::default()), typed_resources())
    }

    /// The served resource requests name `name`.
    pub fn resource(&self, name: &str) -> Option<Resource> {
        self.typed
            .iter()
            .find(|r| r.name == name)
            .cloned()
            .or_else(|| self.caches.generic_resource(name))
    }

    /// Every served resource: the typed ones, then the generic ones by name.
    pub fn resources(&self) -> Vec<Resource> {
        let mut all = self.typed.clone();
        all.extend(self.caches.generic_resources());
        all
    }

    /// Starts serving `resource` (a generic one): the cache its informer feeds, empty; the
    /// one it has if it is served already. Reads of it are answered at once (empty until
    /// the informer fills it).
    pub fn serve(&self, resource: &Resource) -> Arc<Cache<GenericRecord>> {
        self.caches.serve(resource)
    }

    /// Stops serving the resource named `name`: reads of it are 404 at once and its cache is
    /// freed once its informer is stopped and no read holds it. The resource it was.
    pub fn stop(&self, name: &str) -> Option<Resource> {
        self.caches.stop(name)
    }
}

/// Registers with the factory an informer for each built-in row served by a generic record
/// that `serves` admits: cluster-scoped ones only when the server is not scoped to a namespace.
pub(crate) fn register_built_in(
    caches: &Caches,
    factory: &InformerFactory,
    scope: Option<&str>,
    serves: &dyn Fn(&BuiltIn) -> bool,
) -> Result<(), FactoryError> {
    let mut register = Register {
        caches,
        factory,
        scoped: scope.is_some(),
        serves,
        result: Ok(()),
    };
    model::visit_built_in(&mut register);
    register.result
}

/// The typed kinds' resources, in catalog order.
pub(crate) fn typed_resources() -> Vec<Resource> {
    model::built_in_rows()
        .iter()
        .filter_map(|row| match row.served_by {
            ServedBy::Typed(kind) => Some(typed_resource(kind).clone()),
            ServedBy::Generic | ServedBy::MetadataOnly => None,
        })
        .collect()
}

struct Register<'a> {
    caches: &'a Caches,
    factory: &'a InformerFactory,
    scoped: bool,
    serves: &'a dyn Fn(&BuiltIn) -> bool,
    result: Result<(), FactoryError>,
}

impl Register<'_> {
    /// The row's resource and its cache, if it is served by a generic record and selected.
    fn cache_of(&self, row: &BuiltIn) -> Option<(Resource, Arc<Cache<GenericRecord>>)> {
        if matches!(row.served_by, ServedBy::Typed(_)) || !(self.serves)(row) {
            return None;
        }
        let resource = row.resource();
        let cache = self.caches.serve(&resource);
        Some((resource, cache))
    }
}

impl Visitor for Register<'_> {
    fn namespaced<K: Object + k8s_openapi::Resource<Scope = NamespaceResourceScope>>(
        &mut self,
        row: &'static BuiltIn,
    ) {
        let Some((resource, cache)) = self.cache_of(row) else {
            return;
        };
        let added = if row.served_by == ServedBy::MetadataOnly {
            // Metadata only: the apiserver sends no value, so none is ever in memory.
            self.factory
                .add_handler::<PartialObjectMeta<K>>(AsGeneric::new(resource, cache))
        } else {
            self.factory
                .add_handler::<K>(AsGeneric::new(resource, cache))
        };
        if self.result.is_ok() {
            self.result = added;
        }
    }

    fn cluster<K: Object + k8s_openapi::Resource<Scope = ClusterResourceScope>>(
        &mut self,
        row: &'static BuiltIn,
    ) {
        // A server scoped to one namespace may hold no cluster-wide right.
        if self.scoped {
            return;
        }
        let Some((resource, cache)) = self.cache_of(row) else {
            return;
        };
        let added = self
            .factory
            .add_cluster_handler::<K>(AsGeneric::new(resource, cache));
        if self.result.is_ok() {
            self.result = added;
        }
    }
}
