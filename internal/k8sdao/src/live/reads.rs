//! Reads: lists and gets through kube's `Api`, the namespaces holding a kind, a Pod's events.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{ListParams, ObjectList, VersionMatch};
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;

use super::{LiveSource, admitted, required};
use crate::{DaoError, Kind, ListQuery, Listing, ReadAt};
use model::EventDto;

/// Where the objects of a scope are read from, and which namespace each is in.
pub trait ApiScope {
    /// An `Api` over `namespace` (None: all); a cluster-scoped kind is read whole.
    fn api<K>(client: kube::Client, namespace: Option<&str>) -> kube::Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = Self>;
    /// The namespace the object is in, for queries and rights: its own; a cluster-scoped
    /// object (a Namespace, the one such kind served) is taken to be in itself.
    fn home(meta: &kube::api::ObjectMeta) -> &str;
}

impl ApiScope for k8s_openapi::NamespaceResourceScope {
    fn api<K>(client: kube::Client, namespace: Option<&str>) -> kube::Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = Self>,
    {
        match namespace {
            Some(ns) => kube::Api::namespaced(client, ns),
            None => kube::Api::all(client),
        }
    }
    fn home(meta: &kube::api::ObjectMeta) -> &str {
        meta.namespace.as_deref().unwrap_or("")
    }
}

impl ApiScope for k8s_openapi::ClusterResourceScope {
    fn api<K>(client: kube::Client, _namespace: Option<&str>) -> kube::Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = Self>,
    {
        kube::Api::all(client)
    }
    fn home(meta: &kube::api::ObjectMeta) -> &str {
        meta.name.as_deref().unwrap_or("")
    }
}

/// The kinds the live source lists, gets and watches, with a static type.
pub trait Namespaced:
    kube::Resource<DynamicType = (), Scope: ApiScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Namespaced for K where
    K: kube::Resource<DynamicType = (), Scope: ApiScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// The list's resourceVersion, which the apiserver always sends: without it a watch could
/// not start where the list ends.
pub(super) fn list_version<K: Namespaced>(list: &ObjectList<K>) -> Result<String, DaoError> {
    required(
        list.metadata.resource_version.clone(),
        || format!("a {} list", K::kind(&())),
        "metadata.resourceVersion",
    )
}

/// What a list of `q` at `at` asks the apiserver: its selectors, and its version.
pub(super) fn list_params(q: &ListQuery, at: ReadAt) -> ListParams {
    let mut params = match at {
        ReadAt::Newest => ListParams::default(),
        // From etcd at that revision, or 410 once compacted: what the apiserver keeps.
        ReadAt::Version(version) => ListParams::default()
            .at(&version.to_string())
            .matching(VersionMatch::Exact),
        ReadAt::NotOlderThan(version) => ListParams::default()
            .at(&version.to_string())
            .matching(VersionMatch::NotOlderThan),
    };
    if !q.labels.is_empty() {
        params = params.labels(&q.labels.to_string());
    }
    if !q.fields.is_empty() {
        params = params.fields(&q.fields.to_string());
    }
    params
}

impl LiveSource {
    /// The objects `q` selects: its selectors sent to the apiserver, the caller's namespaces
    /// applied to the answer.
    pub(super) async fn list_objects<K: Namespaced>(
        &self,
        q: &ListQuery,
        at: ReadAt,
    ) -> Result<ObjectList<K>, DaoError> {
        let mut list = self
            .api::<K>(q.namespace.as_deref())
            .list(&list_params(q, at))
            .await?;
        list.items
            .retain(|o| admitted(q.namespace.as_deref(), &q.visible, o));
        Ok(list)
    }

    /// [`LiveSource::list`] as records, with the list's resourceVersion.
    pub(super) async fn listing<K: Namespaced, R>(
        &self,
        q: &ListQuery,
        at: ReadAt,
        project: fn(K) -> Arc<R>,
    ) -> Result<Listing<R>, DaoError> {
        let list = self.list_objects::<K>(q, at).await?;
        Ok(Listing {
            resource_version: list_version(&list)?,
            items: list.items.into_iter().map(project).collect(),
        })
    }

    pub(super) async fn get_object<K: Namespaced>(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<K, DaoError> {
        self.api::<K>(Some(namespace))
            .get_opt(name)
            .await?
            .ok_or_else(|| DaoError::NotFound {
                kind: kind.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
    }

    /// One metadata list of the kind across namespaces.
    pub(super) async fn namespaces_with(&self, kind: Kind) -> Result<Vec<String>, DaoError> {
        match kind {
            Kind::Deployment => self.namespaces_of::<Deployment>().await,
            Kind::Pod => self.namespaces_of::<Pod>().await,
            Kind::ReplicaSet => self.namespaces_of::<ReplicaSet>().await,
            Kind::Service => self.namespaces_of::<Service>().await,
            Kind::Ingress => self.namespaces_of::<Ingress>().await,
            Kind::Namespace => self.namespaces_of::<Namespace>().await,
        }
    }

    async fn namespaces_of<K: Namespaced>(&self) -> Result<Vec<String>, DaoError> {
        let list = self
            .api::<PartialObjectMeta<K>>(None)
            .list(&ListParams::default())
            .await?;
        let namespaces: BTreeSet<String> = list
            .items
            .iter()
            .map(|o| <K::Scope as ApiScope>::home(&o.metadata).to_string())
            .collect();
        Ok(namespaces.into_iter().collect())
    }

    /// Events whose involvedObject is the Pod, newest first, whether or not the Pod exists.
    pub(crate) async fn events_of_pod(
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

#[cfg(test)]
mod tests {
    use crate::ReadAt;
    use serde_json::json;

    use super::super::mock::{list, source_with};
    use crate::{DaoError, Kind, ListQuery, WorkloadSource};
    use model::fixtures::mk_pod;
    use model::{DeploymentRecord, PodRecord, Typed};

    #[tokio::test]
    async fn a_missing_object_is_not_found() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                            "code": 404, "message": "deployments.apps \"x\" not found"});
        let (source, server) = source_with(vec![(
            "/apis/apps/v1/namespaces/ns/deployments/x",
            404,
            status,
        )]);
        let err = source
            .get::<DeploymentRecord>(DeploymentRecord::resource(), "ns", "x")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, DaoError::NotFound { kind, .. } if *kind == Kind::Deployment.to_string()),
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
        let listing = source
            .list::<PodRecord>(PodRecord::resource(), &q, ReadAt::Newest)
            .await
            .unwrap();
        assert_eq!(listing.resource_version, "77");
        assert_eq!(listing.items[0].key.name, "p");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_list_without_a_resource_version_is_an_error_that_says_so() {
        let (source, server) = source_with(vec![(
            "/api/v1/namespaces/ns/pods",
            200,
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
        )]);
        let q = ListQuery {
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let err = source
            .list::<PodRecord>(PodRecord::resource(), &q, ReadAt::Newest)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the Kubernetes API sent a Pod list without a usable metadata.resourceVersion"
        );
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
}
