//! An in-memory [`WorkloadSource`] over records given by hand: what the layers above test
//! their rules against, with no cache, informer or apiserver behind it. It answers what a
//! source answers (selection, not-found, relations given explicitly); a watch sends the
//! selection and stays open without changes.

use std::any::Any;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;

use super::cache::selects;
use super::{
    DaoError, ListQuery, Listing, ReadAt, Served, StateStamp, WatchEvent, WatchStream,
    WorkloadSource,
};
use k8scache::HistoryError;
use model::{DeploymentRecord, EventDto, ObjectKey, PodRecord, Resource, Typed};

/// Records by kind, relations and events, as a test sets them.
#[derive(Default)]
pub struct FakeSource {
    /// Each kind's records (a `Vec<Arc<R>>` for the kind's record type), in key order.
    records: HashMap<String, Box<dyn Any + Send + Sync>>,
    namespaces: HashMap<String, BTreeSet<String>>,
    /// The Deployment controlling each pod that has one.
    deployment_of_pod: HashMap<ObjectKey, Arc<str>>,
    events: HashMap<ObjectKey, Vec<EventDto>>,
}

/// The resourceVersion every answer is as recent as, and the only one there is.
const VERSION: u64 = 1;

/// Reads at [`VERSION`] (or the newest, the same) are answered; others were never kept.
fn check(at: ReadAt) -> Result<(), HistoryError> {
    match at {
        ReadAt::Newest | ReadAt::Version(VERSION) => Ok(()),
        ReadAt::NotOlderThan(requested) | ReadAt::Version(requested) if requested > VERSION => {
            Err(HistoryError::Ahead {
                requested,
                current: Some(VERSION),
            })
        }
        ReadAt::NotOlderThan(_) => Ok(()),
        ReadAt::Version(requested) => Err(HistoryError::Expired {
            requested,
            complete_after: Some(VERSION),
        }),
    }
}

impl FakeSource {
    /// Adds records of one resource.
    pub fn with<R: Served>(mut self, records: impl IntoIterator<Item = Arc<R>>) -> Self {
        let records: Vec<Arc<R>> = records.into_iter().collect();
        let Some(resource) = records.first().map(|r| r.resource_of().clone()) else {
            return self;
        };
        let mut all = self.records_of::<R>(&resource);
        all.extend(records);
        all.sort_by(|a, b| a.key().cmp(b.key()));
        let namespaces = all.iter().map(|r| r.key().namespace.clone()).collect();
        let name = resource.name.to_string();
        self.namespaces.insert(name.clone(), namespaces);
        self.records.insert(name, Box::new(all));
        self
    }

    /// The pod is controlled by the Deployment `deployment` of its namespace.
    pub fn with_pod_of(mut self, pod: ObjectKey, deployment: &str) -> Self {
        self.deployment_of_pod.insert(pod, Arc::from(deployment));
        self
    }

    /// The pod's events, newest first.
    pub fn with_events(mut self, pod: ObjectKey, events: Vec<EventDto>) -> Self {
        self.events.insert(pod, events);
        self
    }

    fn records_of<R: Served>(&self, resource: &Resource) -> Vec<Arc<R>> {
        self.records
            .get(resource.name.as_ref())
            .and_then(|any| any.downcast_ref::<Vec<Arc<R>>>())
            .cloned()
            .unwrap_or_default()
    }

    /// In (namespace, name) order, as every source lists, whatever order they were given in.
    fn selected<R: Served>(&self, resource: &Resource, q: &ListQuery) -> Vec<Arc<R>> {
        let mut selected: Vec<Arc<R>> = self
            .records_of::<R>(resource)
            .into_iter()
            .filter(|r| selects(q, r.as_ref()))
            .collect();
        selected.sort_by(|a, b| a.key().cmp(b.key()));
        selected
    }

    fn record<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        let key = resource.key_of(namespace, name);
        self.records_of::<R>(resource)
            .into_iter()
            .find(|r| *r.key() == key)
            .ok_or_else(|| DaoError::NotFound {
                kind: resource.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }

    fn pods_controlled_by(&self, namespace: &str, name: &str) -> Vec<Arc<PodRecord>> {
        self.records_of::<PodRecord>(PodRecord::resource())
            .into_iter()
            .filter(|p| {
                p.key.namespace == namespace
                    && self.deployment_of_pod.get(&p.key).map(|d| &**d) == Some(name)
            })
            .collect()
    }
}

/// The records as Added (none when resuming: nothing ever changes), Synced, then nothing
/// until the client leaves.
fn watch_of<R: Send + Sync + 'static>(records: Vec<Arc<R>>, from: ReadAt) -> WatchStream<R> {
    let records = match from {
        ReadAt::Newest | ReadAt::NotOlderThan(_) => records,
        ReadAt::Version(_) => Vec::new(),
    };
    let initial = records
        .into_iter()
        .map(WatchEvent::Added)
        .chain([WatchEvent::Synced {
            resource_version: VERSION.to_string(),
        }]);
    futures::stream::iter(initial.map(Ok))
        .chain(futures::stream::pending())
        .boxed()
}

impl WorkloadSource for FakeSource {
    /// Records given by hand carry no state of a cache.
    fn stamp(&self, _resource: &Resource) -> Option<StateStamp> {
        None
    }

    async fn list<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<Listing<R>, DaoError> {
        check(at)?;
        Ok(Listing {
            items: self.selected(resource, q),
            resource_version: VERSION.to_string(),
        })
    }

    async fn get<R: Served>(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<R>, DaoError> {
        self.record(resource, namespace, name)
    }

    async fn watch<R: Served>(
        &self,
        resource: &Resource,
        q: &ListQuery,
        from: ReadAt,
    ) -> Result<WatchStream<R>, DaoError> {
        check(from)?;
        Ok(watch_of(self.selected(resource, q), from))
    }

    async fn namespaces_holding(&self, resource: &Resource) -> Result<Vec<String>, DaoError> {
        Ok(self
            .namespaces
            .get(resource.name.as_ref())
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        self.record::<DeploymentRecord>(DeploymentRecord::resource(), namespace, name)?;
        Ok(self.pods_controlled_by(namespace, name))
    }

    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.record::<PodRecord>(PodRecord::resource(), namespace, name)?;
        let key = ObjectKey::new(namespace, name);
        Ok(self.events.get(&key).cloned().unwrap_or_default())
    }

    async fn deployments_of_pods(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<Arc<str>>>, DaoError> {
        Ok(pods
            .iter()
            .map(|p| self.deployment_of_pod.get(&p.key).cloned())
            .collect())
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        self.record::<DeploymentRecord>(DeploymentRecord::resource(), namespace, name)?;
        Ok(watch_of(
            self.pods_controlled_by(namespace, name),
            ReadAt::Newest,
        ))
    }
}

/// The small cluster of `k8scache::fixtures::filled_caches`, as a fake, in Namespaces ns-a and
/// ns-b: ns-a holds Deployment
/// web (pods web-1a2b-x and -y through ReplicaSet web-1a2b), a bare pod, Service web selecting
/// the web pods, Service lonely selecting none and Ingress site to Service web; ns-b holds
/// Deployment api.
pub fn small_cluster() -> FakeSource {
    use model::fixtures::{
        mk_deployment, mk_ingress, mk_namespace, mk_pod, mk_replicaset, mk_service,
    };
    use model::{IngressRecord, NamespaceRecord, Record, ReplicaSetRecord, ServiceRecord};
    let web_pods = ["web-1a2b-x", "web-1a2b-y"];
    FakeSource::default()
        .with([
            DeploymentRecord::from_object(&mk_deployment(
                "ns-a",
                "web",
                "d-web",
                &[("tier", "frontend")],
            )),
            DeploymentRecord::from_object(&mk_deployment(
                "ns-b",
                "api",
                "d-api",
                &[("tier", "backend")],
            )),
        ])
        .with([ReplicaSetRecord::from_object(&mk_replicaset(
            "ns-a",
            "web-1a2b",
            "rs-web",
            Some(("web", "d-web")),
        ))])
        .with(
            web_pods
                .iter()
                .map(|name| {
                    PodRecord::from_object(&mk_pod(
                        "ns-a",
                        name,
                        Some(("web-1a2b", "rs-web")),
                        &[("app", "web")],
                    ))
                })
                .chain([PodRecord::from_object(&mk_pod(
                    "ns-a",
                    "bare",
                    None,
                    &[("app", "bare")],
                ))]),
        )
        .with([
            ServiceRecord::from_object(&mk_service("ns-a", "web", &[("app", "web")])),
            ServiceRecord::from_object(&mk_service("ns-a", "lonely", &[])),
        ])
        .with([IngressRecord::from_object(&mk_ingress(
            "ns-a", "site", "web",
        ))])
        .with(["ns-a", "ns-b"].map(|ns| NamespaceRecord::from_object(&mk_namespace(ns))))
        .with_pod_of(ObjectKey::new("ns-a", web_pods[0]), "web")
        .with_pod_of(ObjectKey::new("ns-a", web_pods[1]), "web")
}
