//! The registry of served resources: the typed kinds' and the generic ones', looked up by the
//! name requests use. Built-in kinds are registered at start, from the catalog; a resource can
//! be added or removed while the server runs (custom resources), its cache with it.

use std::collections::BTreeSet;
use std::sync::Arc;

use confk8s::{FactoryError, InformerFactory, Sent};
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
    /// The resources selected but not served, and why (RBAC refused them at start).
    not_served: Vec<(String, String)>,
}

impl Registry {
    pub fn new(caches: Arc<Caches>, typed: Vec<Resource>) -> Self {
        Registry {
            caches,
            typed,
            not_served: Vec::new(),
        }
    }

    pub(crate) fn with_not_served(mut self, not_served: Vec<(String, String)>) -> Self {
        self.not_served = not_served;
        self
    }

    /// The resources selected but not served, each with the reason.
    pub fn not_served(&self) -> &[(String, String)] {
        &self.not_served
    }

    /// The typed kinds alone (the live source, tests).
    pub fn typed_only() -> Self {
        Registry::new(Arc::new(Caches::default()), typed_resources())
    }

    /// What the live source serves: the typed kinds, and each built-in kind served by a
    /// generic record that `resources` selects (cluster-scoped ones only when the server is
    /// not scoped to a namespace), read live. Their caches stay empty: nothing watches them.
    /// Secrets are left out: only their metadata may ever be read, and a live read of a
    /// `DynamicObject` would read their values.
    pub fn live(resources: &ResourceSelection, scoped: bool) -> Self {
        let registry = Registry::typed_only();
        for row in model::built_in_rows() {
            if row.served_by == ServedBy::Generic
                && resources.serves(row)
                && (row.namespaced || !scoped)
            {
                registry.serve(&row.resource());
            }
        }
        registry
    }

    /// The served resource requests name `name`.
    pub fn resource(&self, name: &str) -> Option<Resource> {
        self.typed
            .iter()
            .find(|r| r.name == name)
            .cloned()
            .or_else(|| self.caches.generic_resource(name))
    }

    /// The first served resource, in [`Registry::resources`]' order, that `matches`: a
    /// request's lookup, with no list of every resource made for it.
    pub fn find(&self, mut matches: impl FnMut(&Resource) -> bool) -> Option<Resource> {
        match self.typed.iter().find(|r| matches(r)) {
            Some(typed) => Some(typed.clone()),
            None => self.caches.find_generic_resource(matches),
        }
    }

    /// Every served resource: the typed ones, then the generic ones by name.
    pub fn resources(&self) -> Vec<Resource> {
        let mut all = self.typed.clone();
        all.extend(self.caches.generic_resources());
        all
    }

    /// Starts serving `resource` (a generic one): the cache its informer feeds, empty; the
    /// one it has if it is served already. Reads of it from the cache are
    /// [`crate::DaoError::Initializing`] until the informer's first list is in.
    pub fn serve(&self, resource: &Resource) -> Arc<Cache<GenericRecord>> {
        self.caches.serve(resource)
    }

    /// Stops serving the resource named `name`: reads of it are 404 at once and its cache is
    /// freed once its informer is stopped and no read holds it. The resource it was.
    pub fn stop(&self, name: &str) -> Option<Resource> {
        self.caches.stop(name)
    }
}

/// Which built-in resources are served besides the typed kinds (always served: the original
/// client's routes): `--resources`, a comma-separated list of names to serve (`*`: every
/// built-in kind but Secrets, the default) and of `-name`s not to. Secrets are served only
/// when named, since listing them needs a right that also reads their values. A name with a
/// dot that is no built-in kind's is a custom resource's (`widgets.example.com`): `*` or no
/// name to serve serves every custom resource, `-widgets.example.com` not that one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceSelection {
    /// None: every built-in kind but Secrets.
    allow: Option<BTreeSet<&'static str>>,
    /// Added to `*` by name (Secrets).
    also: BTreeSet<&'static str>,
    deny: BTreeSet<&'static str>,
    /// None: every custom resource.
    custom_allow: Option<BTreeSet<String>>,
    custom_deny: BTreeSet<String>,
}

impl ResourceSelection {
    /// Parses `--resources`; an unknown name is an error naming the known ones.
    pub fn parse(spec: &str) -> Result<ResourceSelection, String> {
        let mut selection = ResourceSelection::default();
        let mut star = false;
        let mut allow = BTreeSet::new();
        let mut custom_allow: Option<BTreeSet<String>> = None;
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item == "*" {
                star = true;
                continue;
            }
            let (deny, name) = match item.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, item.strip_prefix('+').unwrap_or(item)),
            };
            if model::built_in(name).is_none() && name.contains('.') {
                let names = if deny {
                    &mut selection.custom_deny
                } else {
                    custom_allow.get_or_insert_with(BTreeSet::new)
                };
                names.insert(name.to_string());
                continue;
            }
            let row = model::built_in(name).ok_or_else(|| {
                let known: Vec<&str> = model::built_in_rows().iter().map(|r| r.name).collect();
                format!(
                    "unknown resource {name:?}: expected one of {}",
                    known.join(", ")
                )
            })?;
            if deny && matches!(row.served_by, ServedBy::Typed(_)) {
                return Err(format!(
                    "{name} are always served: the original client's routes read them"
                ));
            }
            if deny {
                selection.deny.insert(row.name);
            } else {
                allow.insert(row.name);
            }
        }
        // Names to serve, of either sort, make a list of what alone is served.
        if star || (allow.is_empty() && custom_allow.is_none()) {
            selection.also = allow;
        } else {
            selection.allow = Some(allow);
            selection.custom_allow = Some(custom_allow.unwrap_or_default());
        }
        Ok(selection)
    }

    /// The (group, plural) of each built-in resource served, typed kinds included: what
    /// k8sailor must be allowed to list and watch.
    pub fn served_resources(&self) -> Vec<(&'static str, &'static str)> {
        model::built_in_rows()
            .iter()
            .filter(|row| matches!(row.served_by, ServedBy::Typed(_)) || self.serves(row))
            .map(|row| (row.group, row.plural))
            .collect()
    }

    /// Whether the custom resource `name` (`widgets.example.com`) is served.
    pub fn serves_custom(&self, name: &str) -> bool {
        !self.custom_deny.contains(name)
            && self
                .custom_allow
                .as_ref()
                .is_none_or(|allow| allow.contains(name))
    }

    /// Whether the row is served.
    pub fn serves(&self, row: &BuiltIn) -> bool {
        if self.deny.contains(row.name) {
            return false;
        }
        match &self.allow {
            Some(allow) => allow.contains(row.name),
            None => row.served_by != ServedBy::MetadataOnly || self.also.contains(row.name),
        }
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
            // As sent: the explicit nulls the typed object would drop are kept.
            self.factory
                .add_handler::<Sent<K>>(AsGeneric::new(resource, cache))
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
            .add_cluster_handler::<Sent<K>>(AsGeneric::new(resource, cache));
        if self.result.is_ok() {
            self.result = added;
        }
    }
}

/// Whether RBAC lets k8sailor list and watch the row's resource where it would watch it
/// (SelfSubjectAccessReview); the reason if not. A review that cannot be made counts as
/// allowed: the watch's own error will tell.
pub(crate) async fn may_watch(
    client: &kube::Client,
    row: &BuiltIn,
    scope: Option<&str>,
) -> Result<(), String> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let reviews: kube::Api<SelfSubjectAccessReview> = kube::Api::all(client.clone());
    let namespace = scope.filter(|_| row.namespaced);
    for verb in ["list", "watch"] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(row.group.into()),
                    resource: Some(row.plural.into()),
                    namespace: namespace.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        match reviews.create(&Default::default(), &review).await {
            Ok(answer) if answer.status.as_ref().is_some_and(|s| !s.allowed) => {
                let scope = match namespace {
                    Some(ns) => format!("in namespace {ns}"),
                    None if row.namespaced => "in all namespaces".to_string(),
                    None => "across the cluster".to_string(),
                };
                return Err(format!(
                    "forbidden by RBAC: cannot {verb} {} {scope}",
                    row.name
                ));
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(resource = row.name, verb, %error, "cannot review access; the watch will tell");
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(selection: &ResourceSelection) -> Vec<&'static str> {
        model::built_in_rows()
            .iter()
            .filter(|row| selection.serves(row))
            .map(|row| row.name)
            .collect()
    }

    #[test]
    fn by_default_every_built_in_kind_but_secrets_is_served() {
        let all = served(&ResourceSelection::default());
        assert_eq!(all.len(), model::built_in_rows().len() - 1);
        assert!(!all.contains(&"secrets"));
        assert_eq!(
            ResourceSelection::parse("").unwrap(),
            ResourceSelection::default()
        );
        assert_eq!(
            ResourceSelection::parse("*").unwrap(),
            ResourceSelection::default()
        );
    }

    #[test]
    fn names_allow_minus_names_deny_and_secrets_must_be_named() {
        let with_secrets = served(&ResourceSelection::parse("*,secrets").unwrap());
        assert!(with_secrets.contains(&"secrets") && with_secrets.contains(&"nodes"));
        let also = served(&ResourceSelection::parse("*,secrets,-nodes").unwrap());
        assert!(also.contains(&"secrets") && also.contains(&"configmaps"));
        assert!(!also.contains(&"nodes"));
        assert_eq!(
            served(&ResourceSelection::parse("nodes, configmaps").unwrap()),
            ["configmaps", "nodes"]
        );
        let denied = served(&ResourceSelection::parse("-events,-nodes").unwrap());
        assert!(!denied.contains(&"events") && !denied.contains(&"secrets"));
        assert_eq!(denied.len(), model::built_in_rows().len() - 3);
        assert_eq!(
            served(&ResourceSelection::parse("secrets").unwrap()),
            ["secrets"]
        );
        assert!(ResourceSelection::parse("-pods").is_err());
        // Custom resources: all by default or with `*`, those named alone, those denied not.
        let all = ResourceSelection::parse("").unwrap();
        assert!(all.serves_custom("widgets.example.com"));
        let star = ResourceSelection::parse("*,-gadgets.example.com").unwrap();
        assert!(star.serves_custom("widgets.example.com"));
        assert!(!star.serves_custom("gadgets.example.com"));
        let named = ResourceSelection::parse("widgets.example.com").unwrap();
        assert!(named.serves_custom("widgets.example.com"));
        assert!(!named.serves_custom("gadgets.example.com"));
        assert_eq!(served(&named), Vec::<&str>::new(), "no built-in kind named");
        let built_in = ResourceSelection::parse("configmaps").unwrap();
        assert!(!built_in.serves_custom("widgets.example.com"));
        // A built-in kind named with its group is no custom resource.
        let new_events = ResourceSelection::parse("-events.events.k8s.io").unwrap();
        let served_now = served(&new_events);
        assert!(served_now.contains(&"events") && !served_now.contains(&"events.events.k8s.io"));
        assert!(new_events.serves_custom("widgets.example.com"));
        let err = ResourceSelection::parse("configmap").unwrap_err();
        assert!(
            err.contains("\"configmap\"") && err.contains("configmaps"),
            "{err}"
        );
    }
}
