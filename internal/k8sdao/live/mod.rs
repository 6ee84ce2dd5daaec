use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{
    DeleteParams, ListParams, ObjectList, Patch, PatchParams, PostParams, WatchParams,
};
use kube::core::PartialObjectMeta;
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::{
    DaoError, ListQuery, Listing, NamespaceFilter, ObjectKind, WatchEvent, WatchStream,
    WorkloadSource, WriteEffect, member_event,
};
use crate::k8scache::Change;
use crate::model::{DeploymentRecord, EventDto, NewDeployment, PodRecord, ReplicaSetRecord};

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
        if !q.fields.is_empty() {
            params = params.fields(&q.fields.to_string());
        }
        let mut list = self.api::<K>(q.namespace.as_deref()).list(&params).await?;
        list.items.retain(|o| visible(&q.visible, o));
        Ok(list)
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

/// Whether the caller may see the object, by its namespace. The kinds served are namespaced;
/// an object without one is in no namespace a filter names, so only an open filter shows it.
fn visible<K: kube::Resource>(filter: &NamespaceFilter, object: &K) -> bool {
    filter.allows(object.meta().namespace.as_deref().unwrap_or(""))
}

/// How long one watch request lasts before a live watch makes it again from the last
/// resourceVersion it saw (kube's watcher uses the same, under the apiserver's own limit).
const WATCH_REQUEST_SECS: u32 = 290;

/// A live watch between two events: the apiserver's watch request in progress, if any, and
/// the resourceVersion to make the next one from.
struct LiveWatch<K, R> {
    api: Api<K>,
    params: WatchParams,
    resource_version: String,
    events: Option<BoxStream<'static, kube::Result<kube::core::WatchEvent<K>>>>,
    project: fn(K) -> Arc<R>,
    /// Changes outside it are skipped (they still move the resourceVersion on).
    visible: NamespaceFilter,
}

impl<K, R> LiveWatch<K, R>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    /// The next change; bookmarks only move the resourceVersion on, and a watch request the
    /// apiserver ended is made again. Err ends the watch.
    async fn next(&mut self) -> Result<WatchEvent<R>, DaoError> {
        use kube::core::WatchEvent as Api;
        loop {
            let events = match self.events.as_mut() {
                Some(events) => events,
                None => {
                    let events = self.api.watch(&self.params, &self.resource_version).await?;
                    self.events.insert(events.boxed())
                }
            };
            return Ok(match events.next().await {
                None => {
                    self.events = None;
                    continue;
                }
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Api::Bookmark(b))) => {
                    self.resource_version = b.metadata.resource_version;
                    continue;
                }
                Some(Ok(Api::Error(status))) if status.code == 410 => {
                    return Err(DaoError::WatchExpired(status.message));
                }
                Some(Ok(Api::Error(status))) => {
                    return Err(DaoError::Api {
                        code: status.code,
                        message: status.message,
                    });
                }
                Some(Ok(Api::Added(o) | Api::Modified(o) | Api::Deleted(o)))
                    if !visible(&self.visible, &o) =>
                {
                    self.resource_version = o.meta().resource_version.clone().unwrap_or_default();
                    continue;
                }
                Some(Ok(Api::Added(o))) => WatchEvent::Added(self.record(o)),
                Some(Ok(Api::Modified(o))) => WatchEvent::Modified(self.record(o)),
                Some(Ok(Api::Deleted(o))) => WatchEvent::Deleted(self.record(o)),
            });
        }
    }

    /// The object's record; the watch has now seen its resourceVersion.
    fn record(&mut self, object: K) -> Arc<R> {
        self.resource_version = object.meta().resource_version.clone().unwrap_or_default();
        (self.project)(object)
    }
}

/// A live watch of a Deployment's pods: the pods its selector matches, kept when their
/// ReplicaSet is one the Deployment controls. ReplicaSets are listed again when a pod names one
/// not seen yet (a rollout's new ReplicaSet).
struct DeploymentPods {
    pods: WatchStream<PodRecord>,
    replicasets: Api<PartialObjectMeta<ReplicaSet>>,
    uid: String,
    controlled: HashSet<String>,
    others: HashSet<String>,
    members: HashSet<confk8s::ObjectKey>,
}

impl DeploymentPods {
    async fn learn_replicasets(&mut self) -> Result<(), DaoError> {
        let list = self.replicasets.list(&ListParams::default()).await?;
        self.controlled.clear();
        self.others.clear();
        for rs in list.items.iter().map(ReplicaSetRecord::from_meta) {
            let ours = rs.owner.as_ref().is_some_and(|o| o.uid == self.uid);
            let set = if ours {
                &mut self.controlled
            } else {
                &mut self.others
            };
            set.insert(rs.uid.clone());
        }
        Ok(())
    }

    /// The next event of the Deployment's pods; None once the pods' watch ended.
    async fn next(&mut self) -> Option<Result<WatchEvent<PodRecord>, DaoError>> {
        loop {
            let change = match self.pods.next().await? {
                Err(e) => return Some(Err(e)),
                Ok(synced @ WatchEvent::Synced { .. }) => return Some(Ok(synced)),
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => {
                    Change::Applied { old: None, new: p }
                }
                Ok(WatchEvent::Deleted(p)) => Change::Deleted(p),
            };
            let pod = match &change {
                Change::Applied { new, .. } => new,
                Change::Deleted(old) => old,
            };
            let replicaset = pod.owner.as_ref().filter(|o| o.kind == "ReplicaSet");
            if let Some(rs) = replicaset
                && !self.controlled.contains(&rs.uid)
                && !self.others.contains(&rs.uid)
                && let Err(e) = self.learn_replicasets().await
            {
                return Some(Err(e));
            }
            let controlled = &self.controlled;
            let is_member = |p: &PodRecord| {
                p.owner
                    .as_ref()
                    .is_some_and(|o| o.kind == "ReplicaSet" && controlled.contains(&o.uid))
            };
            if let Some(event) = member_event(&mut self.members, change, is_member) {
                return Some(Ok(event));
            }
        }
    }
}

/// The Deployment's `matchLabels` as a label selector string; empty when it has none.
fn match_labels(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
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

impl LiveSource {
    /// The list `q` selects as Added events, Synced, then the apiserver's watch from the
    /// list's resourceVersion; 410 Gone from the apiserver ends it with WatchExpired.
    async fn watch<K, R>(
        &self,
        q: &ListQuery,
        project: fn(K) -> Arc<R>,
    ) -> Result<WatchStream<R>, DaoError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
        R: Send + Sync + 'static,
    {
        let list = self.list::<K>(q).await?;
        let resource_version = resource_version(&list);
        let initial: Vec<_> = list
            .items
            .into_iter()
            .map(|o| WatchEvent::Added(project(o)))
            .chain([WatchEvent::Synced {
                resource_version: resource_version.clone(),
            }])
            .map(Ok)
            .collect();
        let mut params = WatchParams::default().timeout(WATCH_REQUEST_SECS);
        if !q.labels.is_empty() {
            params = params.labels(&q.labels.to_string());
        }
        if !q.fields.is_empty() {
            params = params.fields(&q.fields.to_string());
        }
        let watch = LiveWatch {
            api: self.api::<K>(q.namespace.as_deref()),
            params,
            resource_version,
            events: None,
            project,
            visible: q.visible.clone(),
        };
        let changes = futures::stream::unfold(Some(watch), |watch| async move {
            let mut watch = watch?;
            match watch.next().await {
                Ok(event) => Some((Ok(event), Some(watch))),
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(futures::stream::iter(initial).chain(changes).boxed())
    }

    /// Events whose involvedObject is the Pod, newest first, whether or not the Pod exists.
    pub(super) async fn events_of_pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<EventDto>, DaoError> {
        let params = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.namespace={namespace},involvedObject.name={name}"
        ));
        let list = self.api::<Event>(Some(namespace)).list(&params).await?;
        let mut events: Vec<EventDto> = list.items.iter().map(EventDto::from_event).collect();
        // RFC 3339 UTC strings order like the times they name.
        events.sort_by(|a, b| b.last_timestamp.cmp(&a.last_timestamp));
        Ok(events)
    }
}

/// The labels of a Deployment we create, its selector and its Pods' labels alike.
fn app_labels(name: &str) -> std::collections::BTreeMap<String, String> {
    [("app".to_string(), name.to_string())].into()
}

fn deployment_object(namespace: &str, new: &NewDeployment) -> Deployment {
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    let labels = app_labels(&new.name);
    let containers = new
        .containers
        .iter()
        .map(|c| Container {
            name: c.name.clone(),
            image: Some(c.image.clone()),
            ports: (!c.ports.is_empty()).then(|| {
                c.ports
                    .iter()
                    .map(|p| ContainerPort {
                        container_port: *p,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        })
        .collect();
    Deployment {
        metadata: ObjectMeta {
            name: Some(new.name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(new.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers,
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The resourceVersion a write answered with; etcd revisions are numbers.
fn version_of(meta: &kube::api::ObjectMeta) -> WriteEffect {
    match meta
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
    {
        Some(rv) => WriteEffect::Version(rv),
        // No version to wait for: the cache is not waited on for something it cannot show.
        None => WriteEffect::Version(0),
    }
}

/// A 404 from a write names the object, as a read's does.
fn write_error(e: kube::Error, kind: ObjectKind, namespace: &str, name: &str) -> DaoError {
    match e {
        kube::Error::Api(status) if status.code == 404 => DaoError::NotFound {
            kind: kind.as_str(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        other => other.into(),
    }
}

impl LiveSource {
    pub(super) async fn scale(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<WriteEffect, DaoError> {
        let patch = serde_json::json!({"spec": {"replicas": replicas}});
        let scale = self
            .api::<Deployment>(Some(namespace))
            .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| write_error(e, ObjectKind::Deployment, namespace, name))?;
        Ok(version_of(&scale.metadata))
    }

    pub(super) async fn create(
        &self,
        namespace: &str,
        new: &NewDeployment,
    ) -> Result<(Arc<DeploymentRecord>, WriteEffect), DaoError> {
        let created = self
            .api::<Deployment>(Some(namespace))
            .create(&PostParams::default(), &deployment_object(namespace, new))
            .await?;
        Ok((
            DeploymentRecord::from_deployment(&created),
            version_of(&created.metadata),
        ))
    }

    /// A Pod on a node stays, Terminating, until its kubelet confirms; others go at once.
    pub(super) async fn delete(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<WriteEffect, DaoError> {
        let params = DeleteParams::background();
        let remaining = match kind {
            ObjectKind::Deployment => self
                .api::<Deployment>(Some(namespace))
                .delete(name, &params)
                .await
                .map(|r| r.left().map(|d| d.metadata)),
            ObjectKind::Pod => self
                .api::<Pod>(Some(namespace))
                .delete(name, &params)
                .await
                .map(|r| r.left().map(|p| p.metadata)),
        }
        .map_err(|e| write_error(e, kind, namespace, name))?;
        Ok(match remaining {
            Some(meta) if meta.deletion_timestamp.is_some() => match version_of(&meta) {
                WriteEffect::Version(rv) => WriteEffect::Deleting(rv),
                other => other,
            },
            _ => WriteEffect::Gone,
        })
    }
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
        let selector = match_labels(&deployment);
        let mut params = ListParams::default();
        if !selector.is_empty() {
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
    async fn pod_events(&self, namespace: &str, name: &str) -> Result<Vec<EventDto>, DaoError> {
        self.get::<Pod>("pod", namespace, name).await?;
        self.events_of_pod(namespace, name).await
    }

    /// One metadata list of the kind across namespaces.
    async fn namespaces_holding(&self, kind: ObjectKind) -> Result<Vec<String>, DaoError> {
        fn of<K: kube::Resource>(items: &[PartialObjectMeta<K>]) -> BTreeSet<String> {
            items
                .iter()
                .filter_map(|o| o.metadata.namespace.clone())
                .collect()
        }
        let params = ListParams::default();
        let namespaces = match kind {
            ObjectKind::Deployment => of(&self
                .api::<PartialObjectMeta<Deployment>>(None)
                .list(&params)
                .await?
                .items),
            ObjectKind::Pod => of(&self
                .api::<PartialObjectMeta<Pod>>(None)
                .list(&params)
                .await?
                .items),
        };
        Ok(namespaces.into_iter().collect())
    }

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

    async fn watch_deployments(
        &self,
        q: &ListQuery,
    ) -> Result<WatchStream<DeploymentRecord>, DaoError> {
        self.watch::<Deployment, _>(q, |d| DeploymentRecord::from_deployment(&d))
            .await
    }

    async fn watch_pods(&self, q: &ListQuery) -> Result<WatchStream<PodRecord>, DaoError> {
        self.watch::<Pod, _>(q, pod_record).await
    }

    async fn watch_pods_of_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        let deployment = self
            .get::<Deployment>("deployment", namespace, name)
            .await?;
        let selector = match_labels(&deployment);
        let q = ListQuery {
            namespace: Some(namespace.to_string()),
            labels: selector::LabelSelector::parse(&selector)
                .map_err(|e| DaoError::Unavailable(format!("the Deployment's selector: {e}")))?,
            ..Default::default()
        };
        let mut watch = DeploymentPods {
            pods: self.watch::<Pod, _>(&q, pod_record).await?,
            replicasets: self.api(Some(namespace)),
            uid: deployment.metadata.uid.clone().unwrap_or_default(),
            controlled: HashSet::new(),
            others: HashSet::new(),
            members: HashSet::new(),
        };
        watch.learn_replicasets().await?;
        Ok(futures::stream::unfold(watch, |mut watch| async move {
            let event = watch.next().await?;
            Some((event, watch))
        })
        .boxed())
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::*;
    use crate::model::fixtures::{mk_deployment, mk_pod, mk_replicaset};

    /// A fake apiserver: answers each expected request in order, asserting its path and query.
    fn source_with(
        answers: Vec<(&'static str, u16, Value)>,
    ) -> (LiveSource, tokio::task::JoinHandle<()>) {
        source_answering(
            answers
                .into_iter()
                .map(|(path, status, body)| {
                    (path.to_string(), status, serde_json::to_vec(&body).unwrap())
                })
                .collect(),
        )
    }

    /// Like [`source_with`], with the bodies as bytes (a watch answers JSON lines).
    fn source_answering(
        answers: Vec<(String, u16, Vec<u8>)>,
    ) -> (LiveSource, tokio::task::JoinHandle<()>) {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            for (expected, status, body) in answers {
                let (request, send) = handle.next_request().await.expect("a request");
                let uri = request.uri().to_string();
                assert!(uri.starts_with(&expected), "expected {expected}, got {uri}");
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(body))
                        .unwrap(),
                );
            }
        });
        (LiveSource::new(Client::new(service, "default")), server)
    }

    /// A watch answer: one JSON event a line.
    fn watch_lines(events: &[Value]) -> Vec<u8> {
        events
            .iter()
            .flat_map(|e| {
                let mut line = serde_json::to_vec(e).unwrap();
                line.push(b'\n');
                line
            })
            .collect()
    }

    #[tokio::test]
    async fn a_live_watch_lists_then_watches_from_the_lists_version_and_resumes_after_bookmarks() {
        let deployment = |name: &str, rv: &str| {
            let mut d =
                serde_json::to_value(mk_deployment("ns", name, name, &[("app", "web")])).unwrap();
            d["metadata"]["resourceVersion"] = json!(rv);
            d
        };
        let watch = "/apis/apps/v1/namespaces/ns/deployments?&watch=true&timeoutSeconds=290&labelSelector=app%3Dweb&allowWatchBookmarks=true&resourceVersion=";
        let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
                          "code": 410, "message": "too old resource version: 80 (95)"});
        let (source, server) = source_answering(vec![
            (
                "/apis/apps/v1/namespaces/ns/deployments?&labelSelector=app%3Dweb".to_string(),
                200,
                serde_json::to_vec(&list("DeploymentList", vec![deployment("web", "70")])).unwrap(),
            ),
            (
                format!("{watch}77"),
                200,
                watch_lines(&[
                    json!({"type": "ADDED", "object": deployment("api", "78")}),
                    json!({"type": "BOOKMARK", "object": {"kind": "Deployment", "apiVersion": "apps/v1",
                                                          "metadata": {"resourceVersion": "80"}}}),
                ]),
            ),
            // The apiserver ended that watch request: made again from the bookmark's version.
            (
                format!("{watch}80"),
                200,
                watch_lines(&[json!({"type": "ERROR", "object": gone})]),
            ),
        ]);
        let q = ListQuery {
            namespace: Some("ns".into()),
            labels: "app=web".parse().unwrap(),
            ..Default::default()
        };
        let events: Vec<_> = source.watch_deployments(&q).await.unwrap().collect().await;
        let shown: Vec<String> = events
            .iter()
            .map(|e| match e {
                Ok(WatchEvent::Added(d)) => format!("ADDED {}@{}", d.key.name, d.resource_version),
                Ok(WatchEvent::Synced { resource_version }) => {
                    format!("SYNCED @{resource_version}")
                }
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("ERR {e}"),
            })
            .collect();
        assert_eq!(
            shown,
            [
                "ADDED web@70",
                "SYNCED @77",
                "ADDED api@78",
                "ERR the watch missed changes (too old resource version: 80 (95)): start it again",
            ]
        );
        server.await.unwrap();
    }

    fn list(kind: &str, items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "77"}, "items": items})
    }

    #[tokio::test]
    async fn a_missing_object_is_not_found() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                            "code": 404, "message": "deployments.apps \"x\" not found"});
        let (source, server) = source_with(vec![(
            "/apis/apps/v1/namespaces/ns/deployments/x",
            404,
            status,
        )]);
        let err = source.get_deployment("ns", "x").await.unwrap_err();
        assert!(
            matches!(
                err,
                DaoError::NotFound {
                    kind: "deployment",
                    ..
                }
            ),
            "{err}"
        );
        server.await.unwrap();
    }

    #[tokio::test]
    async fn lists_pass_the_canonical_selector_and_keep_the_resource_version() {
        let pod = serde_json::to_value(mk_pod("ns", "p", None, &[("app", "web")])).unwrap();
        let (source, server) = source_with(vec![(
            "/api/v1/namespaces/ns/pods?&labelSelector=app%3Dweb%2Ctier+notin+%28db%29",
            200,
            list("PodList", vec![pod]),
        )]);
        let q = ListQuery {
            namespace: Some("ns".into()),
            labels: "tier notin (db), app=web".parse().unwrap(),
            ..Default::default()
        };
        let listing = source.list_pods(&q).await.unwrap();
        assert_eq!(listing.resource_version, "77");
        assert_eq!(listing.items[0].key.name, "p");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn pods_of_a_deployment_cost_three_requests_and_follow_owners() {
        let deployment = serde_json::to_value(mk_deployment("ns", "web", "d-web", &[])).unwrap();
        let rs =
            |name, uid, owner| serde_json::to_value(mk_replicaset("ns", name, uid, owner)).unwrap();
        let pod =
            |name, rs| serde_json::to_value(mk_pod("ns", name, rs, &[("app", "web")])).unwrap();
        let (source, server) = source_with(vec![
            (
                "/apis/apps/v1/namespaces/ns/deployments/web",
                200,
                deployment,
            ),
            (
                "/apis/apps/v1/namespaces/ns/replicasets",
                200,
                list(
                    "PartialObjectMetadataList",
                    vec![
                        rs("web-1", "rs-1", Some(("web", "d-web"))),
                        rs("other-1", "rs-2", Some(("other", "d-other"))),
                    ],
                ),
            ),
            (
                "/api/v1/namespaces/ns/pods?&labelSelector=app%3Dweb",
                200,
                list(
                    "PodList",
                    vec![
                        pod("web-1-b", Some(("web-1", "rs-1"))),
                        pod("web-1-a", Some(("web-1", "rs-1"))),
                        pod("other-1-a", Some(("other-1", "rs-2"))),
                        pod("bare", None),
                    ],
                ),
            ),
        ]);
        let pods = source.pods_of_deployment("ns", "web").await.unwrap();
        let names: Vec<_> = pods.iter().map(|p| p.key.name.as_str()).collect();
        assert_eq!(names, ["web-1-a", "web-1-b"]);
        server.await.unwrap();
    }

    #[tokio::test]
    async fn pod_events_check_the_pod_then_list_by_involved_object_newest_first() {
        let pod = serde_json::to_value(mk_pod("ns", "p", None, &[])).unwrap();
        let event = |name: &str, reason: &str, last: &str| {
            json!({"metadata": {"name": name, "namespace": "ns"}, "reason": reason, "message": "m", "type": "Normal",
                   "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"}, "count": 2,
                   "lastTimestamp": last, "source": {"component": "kubelet"}})
        };
        let (source, server) = source_with(vec![
            ("/api/v1/namespaces/ns/pods/p", 200, pod),
            (
                "/api/v1/namespaces/ns/events?&fieldSelector=involvedObject.kind%3DPod%2CinvolvedObject.namespace%3Dns%2CinvolvedObject.name%3Dp",
                200,
                list(
                    "EventList",
                    vec![
                        event("e1", "Scheduled", "2026-11-01T10:00:00Z"),
                        event("e2", "BackOff", "2026-11-01T10:05:00Z"),
                    ],
                ),
            ),
        ]);
        let events = source.pod_events("ns", "p").await.unwrap();
        let reasons: Vec<_> = events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["BackOff", "Scheduled"]);
        assert_eq!(
            (
                events[0].name.as_str(),
                events[0].source.as_str(),
                events[0].count
            ),
            ("p", "kubelet", 2)
        );
        server.await.unwrap();
    }

    #[tokio::test]
    async fn writes_send_what_kubectl_would_and_name_a_missing_object() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            // Create: labels, selector and template labels are app=<name>.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "POST");
            assert_eq!(
                request.uri().path(),
                "/apis/apps/v1/namespaces/ns/deployments"
            );
            let body = request.into_body().collect_bytes().await.unwrap();
            let sent: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(sent["metadata"]["labels"], json!({"app": "web"}));
            assert_eq!(
                sent["spec"]["selector"]["matchLabels"],
                json!({"app": "web"})
            );
            assert_eq!(
                sent["spec"]["template"]["metadata"]["labels"],
                json!({"app": "web"})
            );
            assert_eq!(sent["spec"]["replicas"], 2);
            let container = &sent["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(container["name"], "nginx");
            assert_eq!(
                container["ports"],
                json!([{"containerPort": 80, "protocol": "TCP"}])
            );
            let mut stored = sent.clone();
            stored["metadata"]["resourceVersion"] = json!("41");
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&stored).unwrap(),
            )));
            // Scale: a merge patch of the scale subresource.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "PATCH");
            assert_eq!(
                request.uri().path(),
                "/apis/apps/v1/namespaces/ns/deployments/web/scale"
            );
            let body = request.into_body().collect_bytes().await.unwrap();
            assert_eq!(
                serde_json::from_slice::<Value>(&body).unwrap(),
                json!({"spec": {"replicas": 5}})
            );
            let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "42"}, "spec": {"replicas": 5}});
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&scale).unwrap(),
            )));
            // Delete of a missing Pod.
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), "DELETE");
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                "code": 404, "message": "pods \"gone\" not found"});
            send.send_response(
                Response::builder()
                    .status(404)
                    .body(Body::from(serde_json::to_vec(&status).unwrap()))
                    .unwrap(),
            );
        });
        let source = LiveSource::new(Client::new(service, "default"));
        let new = NewDeployment {
            name: "web".into(),
            replicas: 2,
            containers: vec![crate::model::NewContainer {
                name: "nginx".into(),
                image: "nginx:1.27".into(),
                ports: vec![80],
            }],
        };
        let (record, effect) = source.create("ns", &new).await.unwrap();
        assert_eq!(
            (record.key.name.as_str(), effect),
            ("web", WriteEffect::Version(41))
        );
        assert_eq!(
            source.scale("ns", "web", 5).await.unwrap(),
            WriteEffect::Version(42)
        );
        let err = source
            .delete(ObjectKind::Pod, "ns", "gone")
            .await
            .unwrap_err();
        assert!(
            matches!(err, DaoError::NotFound { kind: "pod", .. }),
            "{err}"
        );
        server.await.unwrap();
    }
}
