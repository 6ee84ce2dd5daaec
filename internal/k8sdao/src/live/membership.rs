//! Deployment membership: which pods a Deployment controls, read through its ReplicaSets
//! (a pod's owner is a ReplicaSet whose owner is the Deployment), and a watch of that set.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use selector::LabelSelector;

use super::{LiveSource, pod_record, required};
use crate::{
    DaoError, Kind, ListQuery, MemberChange, ReadAt, WatchEvent, WatchStream, member_event,
};
use model::{ObjectKey, Owner, PodRecord};

/// A Deployment as membership needs it: its uid (what its ReplicaSets name as owner) and the
/// label selector of its pods.
struct Controller {
    uid: String,
    pods: LabelSelector,
}

impl Controller {
    fn of(deployment: Deployment, namespace: &str, name: &str) -> Result<Controller, DaoError> {
        let object = || format!("Deployment {namespace}/{name}");
        let pods =
            LabelSelector::parse(&match_labels(&deployment)).map_err(|_| DaoError::Malformed {
                object: object(),
                field: "spec.selector.matchLabels",
            })?;
        let uid = required(deployment.metadata.uid, object, "metadata.uid")?;
        Ok(Controller { uid, pods })
    }
}

/// The Deployment's `matchLabels` as a label selector string. Empty when it has none: its
/// `matchExpressions` are not sent, so the pods asked for are a superset of its own, and the
/// ReplicaSets the pods name decide membership.
fn match_labels(deployment: &Deployment) -> String {
    let Some(labels) = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
    else {
        return String::new();
    };
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn is_replicaset(owner: &&Owner) -> bool {
    owner.kind == Some(Kind::ReplicaSet)
}

/// What membership needs of a ReplicaSet: its uid, which its pods name, and its controller.
struct Link {
    uid: String,
    owner: Option<Owner>,
}

impl Link {
    fn of(rs: &PartialObjectMeta<ReplicaSet>) -> Link {
        Link {
            uid: rs.metadata.uid.clone().unwrap_or_default(),
            owner: Owner::controller_of(&rs.metadata),
        }
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
    members: HashSet<ObjectKey>,
}

impl DeploymentPods {
    async fn learn_replicasets(&mut self) -> Result<(), DaoError> {
        let list = self.replicasets.list(&ListParams::default()).await?;
        self.controlled.clear();
        self.others.clear();
        for rs in list.items.iter().map(Link::of) {
            let ours = rs.owner.as_ref().is_some_and(|o| o.uid == self.uid);
            let set = if ours {
                &mut self.controlled
            } else {
                &mut self.others
            };
            set.insert(rs.uid);
        }
        Ok(())
    }

    /// The next event of the Deployment's pods; None once the pods' watch ended.
    async fn next(&mut self) -> Option<Result<WatchEvent<PodRecord>, DaoError>> {
        loop {
            let change = match self.pods.next().await? {
                Err(e) => return Some(Err(e)),
                Ok(synced @ WatchEvent::Synced { .. }) => return Some(Ok(synced)),
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => MemberChange::Applied(p),
                Ok(WatchEvent::Deleted(p)) => MemberChange::Deleted(p),
            };
            let pod = match &change {
                MemberChange::Applied(new) => new,
                MemberChange::Deleted(old) => old,
            };
            let replicaset = pod.owner.as_ref().filter(is_replicaset);
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
                    .is_some_and(|o| is_replicaset(&o) && controlled.contains(&o.uid))
            };
            if let Some(event) = member_event(&mut self.members, change, is_member) {
                return Some(Ok(event));
            }
        }
    }
}

impl LiveSource {
    /// Three requests whatever the number of pods: the Deployment, its namespace's ReplicaSet
    /// metadata, and the pods its selector matches (then filtered by owner).
    pub(super) async fn pods_controlled_by(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<Arc<PodRecord>>, DaoError> {
        let deployment = self
            .get_object::<Deployment>(Kind::Deployment, namespace, name)
            .await?;
        let controller = Controller::of(deployment, namespace, name)?;
        let replicasets = self
            .api::<PartialObjectMeta<ReplicaSet>>(Some(namespace))
            .list(&ListParams::default())
            .await?;
        let rs_uids: BTreeSet<String> = replicasets
            .items
            .iter()
            .map(Link::of)
            .filter(|rs| rs.owner.as_ref().is_some_and(|o| o.uid == controller.uid))
            .map(|rs| rs.uid)
            .collect();
        let mut params = ListParams::default();
        if !controller.pods.is_empty() {
            params = params.labels(&controller.pods.to_string());
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
    pub(super) async fn controllers_of(
        &self,
        pods: &[Arc<PodRecord>],
    ) -> Result<Vec<Option<Arc<str>>>, DaoError> {
        let namespaces: BTreeSet<&str> = pods
            .iter()
            .filter(|p| p.owner.as_ref().is_some_and(|o| is_replicaset(&o)))
            .map(|p| p.key.namespace.as_str())
            .collect();
        let mut deployment_of_rs: HashMap<String, Arc<str>> = HashMap::new();
        for ns in namespaces {
            let list = self
                .api::<PartialObjectMeta<ReplicaSet>>(Some(ns))
                .list(&ListParams::default())
                .await?;
            for rs in list.items.iter().map(Link::of) {
                if let Some(owner) = rs.owner.filter(|o| o.kind == Some(Kind::Deployment)) {
                    deployment_of_rs.insert(rs.uid, owner.name);
                }
            }
        }
        Ok(pods
            .iter()
            .map(|p| {
                p.owner
                    .as_ref()
                    .filter(is_replicaset)
                    .and_then(|o| deployment_of_rs.get(&o.uid).cloned())
            })
            .collect())
    }

    /// The live side of `watch_pods_of_deployment`: the relay's watch of the pods the
    /// Deployment's selector matches, judged by the ReplicaSets they name.
    pub(super) async fn watch_pods_controlled_by(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<WatchStream<PodRecord>, DaoError> {
        let deployment = self
            .get_object::<Deployment>(Kind::Deployment, namespace, name)
            .await?;
        let controller = Controller::of(deployment, namespace, name)?;
        let q = ListQuery {
            namespace: Some(namespace.to_string()),
            labels: controller.pods,
            ..Default::default()
        };
        let mut watch = DeploymentPods {
            pods: self
                .watch_with::<Pod, _>(&q, ReadAt::Newest, pod_record)
                .await?,
            replicasets: self.api(Some(namespace)),
            uid: controller.uid,
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
    use super::super::mock::{list, source_with};
    use crate::{DaoError, WorkloadSource};
    use model::fixtures::{mk_deployment, mk_pod, mk_replicaset};

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
    async fn a_deployment_without_a_uid_is_an_error_not_an_owner_of_nothing() {
        let mut deployment =
            serde_json::to_value(mk_deployment("ns", "web", "d-web", &[])).unwrap();
        deployment["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("uid");
        let (source, server) = source_with(vec![(
            "/apis/apps/v1/namespaces/ns/deployments/web",
            200,
            deployment,
        )]);
        let err = source.pods_of_deployment("ns", "web").await.unwrap_err();
        assert!(
            matches!(
                err,
                DaoError::Malformed {
                    field: "metadata.uid",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "the Kubernetes API sent Deployment ns/web without a usable metadata.uid"
        );
        server.await.unwrap();
    }
}
