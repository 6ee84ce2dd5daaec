//! The live source: every read is a request to the apiserver, each answer built with the same
//! projections the cache uses, so both sources give identical records. One module per idea:
//! [`reads`] (lists, gets, events), [`relay`] (a watch: the list, then the apiserver's watch
//! relayed by an explicit state machine), [`membership`] (which pods a Deployment controls,
//! through its ReplicaSets), [`writes`] and [`objects`] (Services and Ingresses, created and
//! printed raw).

mod membership;
mod objects;
mod reads;
mod relay;
mod writes;

#[cfg(test)]
mod mock;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

use super::{
    DaoError, ListQuery, Listing, NamespaceFilter, ObjectKind, WatchStream, WorkloadSource,
};
use model::{DeploymentRecord, EventDto, PodRecord};

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

    fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

/// Whether the caller may see the object, by its namespace. The kinds served are namespaced;
/// an object without one is in no namespace a filter names, so only an open filter shows it.
fn visible<K: kube::Resource>(filter: &NamespaceFilter, object: &K) -> bool {
    filter.allows(object.meta().namespace.as_deref().unwrap_or(""))
}

fn pod_record(mut pod: Pod) -> Arc<PodRecord> {
    // Same bytes as the cache keeps, so /output does not depend on the source.
    confk8s::strip_noise(&mut pod);
    PodRecord::from_pod(&pod)
}

fn deployment_record(deployment: Deployment) -> Arc<DeploymentRecord> {
    DeploymentRecord::from_deployment(&deployment)
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

/// Each trait method is one idea's: the work is in [`reads`], [`relay`] and [`membership`].
impl WorkloadSource for LiveSource {
    async fn list_deployments(&self, q: &ListQuery) -> Result<Listing<DeploymentRecord>, DaoError> {
        self.listing::<Deployment, _>(q, deployment_record).await
    }

    async fn get_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<DeploymentRecord>, DaoError> {
        let d = self
            .get::<Deployment>(ObjectKind::Deployment, namespace, name)
            .await?;
        Ok(deployment_record(d))
    }

    async fn list_pods(&self, q: &ListQuery) -> Result<Listing<PodRecord>, DaoError> {
        self.listing::<Pod, _>(q, pod_record).await
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<PodRecord>, DaoError> {
        Ok(pod_record(
            self.get::<Pod>(ObjectKind::Pod, namespace, name).await?,
        ))
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        self.pods_controlled_by(namespace, name).await
    }

    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.get::<Pod>(ObjectKind::Pod, namespace, name).await?;
        self.events_of_pod(namespace, name).await
    }

    async fn namespaces_holding(&self, kind: ObjectKind) -> Result<Vec<String>, DaoError> {
        self.namespaces_with(kind).await
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<String>>, DaoError> {
        self.controllers_of(pods).await
    }

    async fn watch_deployments(
        &self,
        q: &ListQuery,
    ) -> Result<WatchStream<DeploymentRecord>, DaoError> {
        self.watch::<Deployment, _>(q, deployment_record).await
    }

    async fn watch_pods(&self, q: &ListQuery) -> Result<WatchStream<PodRecord>, DaoError> {
        self.watch::<Pod, _>(q, pod_record).await
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        self.watch_pods_controlled_by(namespace, name).await
    }
}
