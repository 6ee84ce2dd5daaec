use std::sync::Arc;

use confk8s::{InformerState, InformerStatus, ObjectKey};

use super::{DaoError, ListQuery, Listing, WorkloadSource};
use crate::k8scache::{Cache, Caches, Indexed};
use crate::model::{DeploymentRecord, PodRecord};

/// Reads from the informer caches: no request ever reaches the apiserver.
pub struct CacheSource {
    caches: Arc<Caches>,
    statuses: Vec<Arc<InformerStatus>>,
}

impl CacheSource {
    /// `statuses` are the informers feeding `caches`; reads fail with NotSynced until all synced.
    pub fn new(caches: Arc<Caches>, statuses: Vec<Arc<InformerStatus>>) -> Self {
        CacheSource { caches, statuses }
    }

    pub fn states(&self) -> Vec<InformerState> {
        self.statuses.iter().map(|s| s.state()).collect()
    }

    fn ensure_synced(&self) -> Result<(), DaoError> {
        let kinds: Vec<String> = self
            .statuses
            .iter()
            .filter(|s| !s.is_synced())
            .map(|s| s.kind().to_string())
            .collect();
        if kinds.is_empty() {
            Ok(())
        } else {
            Err(DaoError::NotSynced { kinds })
        }
    }

    fn resource_version(&self, kind: &str) -> String {
        self.statuses
            .iter()
            .find(|s| s.kind() == kind)
            .and_then(|s| s.resource_version())
            .unwrap_or_default()
    }

    fn list<R, F>(
        &self,
        cache: &Cache<R>,
        q: &ListQuery,
        kind: &str,
        labels_of: F,
    ) -> Result<Listing<R>, DaoError>
    where
        R: Indexed,
        F: Fn(&R) -> &crate::model::Labels,
    {
        self.ensure_synced()?;
        let index = cache.read();
        let items = index
            .in_namespace(q.namespace.as_deref())
            .filter(|r| q.labels.matches(labels_of(r)))
            .cloned()
            .collect();
        Ok(Listing {
            items,
            resource_version: self.resource_version(kind),
        })
    }

    fn get<R: Indexed>(
        &self,
        cache: &Cache<R>,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        self.ensure_synced()?;
        cache
            .get(&ObjectKey::new(namespace, name))
            .ok_or_else(|| DaoError::NotFound {
                kind,
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }
}

impl WorkloadSource for CacheSource {
    async fn list_deployments(&self, q: &ListQuery) -> Result<Listing<DeploymentRecord>, DaoError> {
        self.list(&self.caches.deployments, q, "Deployment", |d| &d.dto.labels)
    }

    async fn get_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<DeploymentRecord>, DaoError> {
        self.get(&self.caches.deployments, "deployment", namespace, name)
    }

    async fn list_pods(&self, q: &ListQuery) -> Result<Listing<PodRecord>, DaoError> {
        self.list(&self.caches.pods, q, "Pod", |p| &p.dto.labels)
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<PodRecord>, DaoError> {
        self.get(&self.caches.pods, "pod", namespace, name)
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        let deployment = self.get(&self.caches.deployments, "deployment", namespace, name)?;
        Ok(self.caches.pods_of_deployment(&deployment))
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<String>>, DaoError> {
        Ok(pods
            .iter()
            .map(|p| self.caches.deployment_of_pod(p))
            .collect())
    }
}
