//! Pods decoded without their managedFields. k8s-openapi decodes each managedFields entry's
//! `fieldsV1` into a tree of JSON values, only for the informer to drop it: about a quarter
//! of the CPU a pod's decoding takes, and as many short-lived allocations. [`SlimPod`] skips
//! those bytes while decoding and is otherwise the same Pod.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

use crate::Sent;

/// A [`Pod`] whose `metadata.managedFields` were skipped, not decoded; `Into<Pod>` is free.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlimPod(pub Pod);

impl From<SlimPod> for Pod {
    fn from(p: SlimPod) -> Pod {
        p.0
    }
}

impl From<Sent<SlimPod>> for Sent<Pod> {
    fn from(p: Sent<SlimPod>) -> Sent<Pod> {
        p.map(Pod::from)
    }
}

impl Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Pod::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        Pod::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        Pod::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        Pod::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// ObjectMeta's fields but managedFields: serde skips keys a struct does not name without
/// building anything from them.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct MetaWithoutManagedFields {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<MetaWithoutManagedFields> for ObjectMeta {
    fn from(m: MetaWithoutManagedFields) -> ObjectMeta {
        // Every field named, none defaulted: a field k8s-openapi adds fails to compile here
        // instead of being lost.
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            #[serde(default)]
            metadata: Option<MetaWithoutManagedFields>,
            spec: Option<PodSpec>,
            status: Option<PodStatus>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SlimPod(Pod {
            metadata: wire.metadata.unwrap_or_default().into(),
            spec: wire.spec,
            status: wire.status,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                "generateName": "web-", "generation": 3, "selfLink": "/x",
                "creationTimestamp": "2026-11-01T10:00:00Z",
                "deletionTimestamp": "2026-11-01T11:00:00Z", "deletionGracePeriodSeconds": 30,
                "labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                     "uid": "rs1", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        })
    }

    #[test]
    fn a_slim_pod_is_the_pod_without_its_managed_fields() {
        let slim: SlimPod = serde_json::from_value(pod_json()).unwrap();
        let mut full: Pod = serde_json::from_value(pod_json()).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(Pod::from(slim), full);
    }

    #[test]
    fn missing_and_null_parts_decode_as_the_pod_would() {
        for v in [
            json!({}),
            json!({"metadata": null, "spec": null, "status": null}),
            json!({"metadata": {"labels": null, "managedFields": null}}),
        ] {
            let slim: SlimPod = serde_json::from_value(v.clone()).unwrap();
            let full: Pod = serde_json::from_value(v).unwrap();
            assert_eq!(Pod::from(slim), full);
        }
    }
}
