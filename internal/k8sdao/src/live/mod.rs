//! The live source: every read is a request to the apiserver, each answer built with the same
//! projections the cache uses, so both sources give identical records. One module per idea:
//! [`reads`] (lists, gets, events), [`relay`] (a watch: the list, then the apiserver's watch
//! relayed by an explicit state machine), [`membership`] (which pods a Deployment controls,
//! through its ReplicaSets), [`writes`] and [`objects`] (Services and Ingresses, created and
//! printed raw), [`passthrough`] (a caller's request relayed with its own token), [`openapi`]
//! (the apiserver's OpenAPI documents, relayed and kept).

mod dynamic;
mod logs;
mod membership;
mod objects;
mod openapi;
mod passthrough;
mod reads;
mod relay;
mod writes;

#[cfg(test)]
mod mock;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

pub use openapi::{OpenApiAnswer, OpenApiDocs, OpenApiDocument};
pub use passthrough::{Passthrough, RelayedBody, Switch, SwitchedStream};
pub use reads::{ApiScope, Namespaced};

use super::{
    DaoError, Kind, ListQuery, Listing, NamespaceFilter, ReadAt, Served, StateStamp, WatchStream,
    WorkloadSource,
};
use model::{EventDto, GenericRecord, PodRecord, Record, Resource, Typed};

/// Reads straight from the apiserver, each answer built with the same projections the cache
/// uses, so both sources give identical records.
#[derive(Clone)]
pub struct LiveSource {
    client: Client,
}

impl LiveSource {
    pub fn new(client: Client) -> Self {
        LiveSource { client }
    }

    fn api<K: Namespaced>(&self, namespace: Option<&str>) -> Api<K> {
        <K::Scope as ApiScope>::api(self.client.clone(), namespace)
    }
}

/// Whether the query takes the object, by the namespace it is in (a cluster-scoped kind is
/// read whole, so its namespace is checked here), and whether the caller may see it.
fn admitted<K: Namespaced>(namespace: Option<&str>, filter: &NamespaceFilter, object: &K) -> bool {
    let home = <K::Scope as ApiScope>::home(object.meta());
    namespace.is_none_or(|ns| ns == home) && filter.allows(home)
}

/// The object's record, projected as the cache projects it: without managedFields and the
/// last-applied annotation, as the cache's watch decodes it, so /output does not depend on
/// the source.
fn project<R: Record<Object: Namespaced>>(mut object: R::Object) -> Arc<R> {
    confk8s::strip_noise(&mut object);
    R::from_object(&object)
}

fn pod_record(pod: Pod) -> Arc<PodRecord> {
    project(pod)
}

/// A field the apiserver always sends, or the error naming what came without it.
fn required<T>(
    value: Option<T>,
    object: impl FnOnce() -> String,
    field: &'static str,
) -> Result<T, DaoError> {
    value.ok_or_else(|| DaoError::Malformed {
        object: object(),
        field,
    })
}

/// What a live watch of a generic resource answers: lists and gets are read live, watches
/// are served from the cache only.
fn cache_only(resource: &Resource) -> DaoError {
    DaoError::Unavailable(format!(
        "watches of {} are served from the cache only, not with --source live",
        resource.name
    ))
}

/// A typed kind, read live through its k8s-openapi type.
macro_rules! served_typed {
    ($($record:ty),*) => {$(
        impl Served for $record {
            fn resource_of(&self) -> &Resource {
                <$record as Typed>::resource()
            }
            async fn live_list(
                live: &LiveSource,
                _resource: &Resource,
                q: &ListQuery,
                at: ReadAt,
            ) -> Result<Listing<Self>, DaoError> {
                live.listing::<<$record as Record>::Object, $record>(q, at, project::<$record>)
                    .await
            }
            async fn live_get(
                live: &LiveSource,
                _resource: &Resource,
                namespace: &str,
                name: &str,
            ) -> Result<Arc<Self>, DaoError> {
                let object = live
                    .get_object::<<$record as Record>::Object>(
                        <$record as Typed>::KIND,
                        namespace,
                        name,
                    )
                    .await?;
                Ok(project(object))
            }
            async fn live_watch(
                live: &LiveSource,
                _resource: &Resource,
                q: &ListQuery,
                from: ReadAt,
            ) -> Result<WatchStream<Self>, DaoError> {
                live.watch_with::<<$record as Record>::Object, $record>(
                    q,
                    from,
                    project::<$record>,
                )
                .await
            }
        }
    )*};
}

served_typed!(
    model::DeploymentRecord,
    PodRecord,
    model::ReplicaSetRecord,
    model::ServiceRecord,
    model::IngressRecord,
    model::NamespaceRecord
);

impl Served for GenericRecord {
    fn resource_of(&self) -> &Resource {
        &self.resource
    }
    async fn live_list(
        live: &LiveSource,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<Self>, DaoError> {
        live.generic_listing(resource, q, at).await
    }
    async fn live_get(
        live: &LiveSource,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Self>, DaoError> {
        live.generic_object(resource, namespace, name).await
    }
    async fn live_watch(
        _live: &LiveSource,
        resource: &Resource,
        _q: &ListQuery,
        _from: ReadAt,
    ) -> Result<WatchStream<Self>, DaoError> {
        Err(cache_only(resource))
    }
}

/// Each trait method is one idea's: the work is in [`reads`], [`relay`] and [`membership`].
impl WorkloadSource for LiveSource {
    /// Every read asks the apiserver, whose objects change without our hearing of it.
    fn stamp(&self, _resource: &Resource) -> Option<StateStamp> {
        None
    }

    async fn list<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<R>, DaoError> {
        let mut listing = R::live_list(self, resource, q, at).await?;
        // The apiserver lists in its storage's order, `namespace/name` as one string, which
        // is not (namespace, name) order where a namespace is another's prefix ("a-b/x"
        // before "a/y").
        listing.items.sort_by(|a, b| a.key().cmp(b.key()));
        Ok(listing)
    }

    async fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        R::live_get(self, resource, namespace, name).await
    }

    async fn watch<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> Result<WatchStream<R>, DaoError> {
        R::live_watch(self, resource, q, from).await
    }

    async fn namespaces_holding(&self, resource: &Resource) -> Result<Vec<String>, DaoError> {
        match resource.typed() {
            Some(kind) => self.namespaces_with(kind).await,
            None => Err(cache_only(resource)),
        }
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        self.pods_controlled_by(namespace, name).await
    }

    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.get_object::<Pod>(Kind::Pod, namespace, name).await?;
        self.events_of_pod(namespace, name).await
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<Arc<str>>>, DaoError> {
        self.controllers_of(pods).await
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        self.watch_pods_controlled_by(namespace, name).await
    }
}
