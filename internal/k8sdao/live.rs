use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, ObjectList};
use kube::core::PartialObjectMeta;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::{DaoError, ListQuery, Listing, WorkloadSource};
use crate::model::{DeploymentRecord, PodRecord, ReplicaSetRecord};

/// Reads straight from the apiserver, each answer built with the same projections the cache
/// uses, so both sources give identical records.
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

    async fn list<K>(&self, q: &ListQuery) -> Result<ObjectList<K>, DaoError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let mut params = ListParams::default();
        if !q.labels.is_empty() {
            params = params.labels(&q.labels.to_string());
        }
        Ok(self.api::<K>(q.namespace.as_deref()).list(&params).await?)
    }

    async fn get<K>(&self, kind: &'static str, namespace: &str, name: &str) -> Result<K, DaoError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        self.api::<K>(Some(namespace))
            .get_opt(name)
            .await?
            .ok_or_else(|| DaoError::NotFound {
                kind,
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }
}

fn pod_record(mut pod: Pod) -> Arc<PodRecord> {
    // Same bytes as the cache keeps, so /output does not depend on the source.
    confk8s::strip_noise(&mut pod);
    PodRecord::from_pod(&pod)
}

fn resource_version<K>(list: &ObjectList<K>) -> String
where
    K: Clone,
{
    list.metadata.resource_version.clone().unwrap_or_default()
}

impl WorkloadSource for LiveSource {
    async fn list_deployments(&self, q: &ListQuery) -> Result<Listing<DeploymentRecord>, DaoError> {
        let list = self.list::<Deployment>(q).await?;
        Ok(Listing {
            resource_version: resource_version(&list),
            items: list
                .items
                .iter()
                .map(DeploymentRecord::from_deployment)
                .collect(),
        })
    }

    async fn get_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<DeploymentRecord>, DaoError> {
        let d = self
            .get::<Deployment>("deployment", namespace, name)
            .await?;
        Ok(DeploymentRecord::from_deployment(&d))
    }

    async fn list_pods(&self, q: &ListQuery) -> Result<Listing<PodRecord>, DaoError> {
        let list = self.list::<Pod>(q).await?;
        Ok(Listing {
            resource_version: resource_version(&list),
            items: list.items.into_iter().map(pod_record).collect(),
        })
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<PodRecord>, DaoError> {
        Ok(pod_record(self.get::<Pod>("pod", namespace, name).await?))
    }

    /// Three requests whatever the number of pods: the Deployment, its namespace's ReplicaSet
    /// metadata, and the pods its selector matches (then filtered by owner).
    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        let deployment = self
            .get::<Deployment>("deployment", namespace, name)
            .await?;
        let uid = deployment.metadata.uid.clone().unwrap_or_default();
        let replicasets = self
            .api::<PartialObjectMeta<ReplicaSet>>(Some(namespace))
            .list(&ListParams::default())
            .await?;
        let rs_uids: BTreeSet<String> = replicasets
            .items
            .iter()
            .map(ReplicaSetRecord::from_meta)
            .filter(|rs| rs.owner.as_ref().is_some_and(|o| o.uid == uid))
            .map(|rs| rs.uid.clone())
            .collect();
        let selector = deployment
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            });
        let mut params = ListParams::default();
        if let Some(selector) = selector.filter(|s| !s.is_empty()) {
            params = params.labels(&selector);
        }
        let pods = self.api::<Pod>(Some(namespace)).list(&params).await?;
        let mut owned: Vec<Arc<PodRecord>> = pods
            .items
            .into_iter()
            .map(pod_record)
            .filter(|p| p.owner.as_ref().is_some_and(|o| rs_uids.contains(&o.uid)))
            .collect();
        owned.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(owned)
    }

    /// One metadata list of ReplicaSets per namespace involved.
    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<String>>, DaoError> {
        let namespaces: BTreeSet<&str> = pods
            .iter()
            .filter(|p| p.owner.as_ref().is_some_and(|o| o.kind == "ReplicaSet"))
            .map(|p| p.key.namespace.as_str())
            .collect();
        let mut deployment_of_rs: HashMap<String, String> = HashMap::new();
        for ns in namespaces {
            let list = self
                .api::<PartialObjectMeta<ReplicaSet>>(Some(ns))
                .list(&ListParams::default())
                .await?;
            for rs in list.items.iter().map(ReplicaSetRecord::from_meta) {
                if let Some(owner) = rs.owner.as_ref().filter(|o| o.kind == "Deployment") {
                    deployment_of_rs.insert(rs.uid.clone(), owner.name.clone());
                }
            }
        }
        Ok(pods
            .iter()
            .map(|p| {
                p.owner
                    .as_ref()
                    .filter(|o| o.kind == "ReplicaSet")
                    .and_then(|o| deployment_of_rs.get(&o.uid).cloned())
            })
            .collect())
    }
}
