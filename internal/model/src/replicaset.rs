//! ReplicaSets: served as `kubectl get replicasets` shows them, and the link from a Pod to
//! its Deployment (the Pod's controller is a ReplicaSet, whose controller is a Deployment).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde::Serialize;

use crate::{
    Kind, Labels, METADATA_FIELDS, ObjectKey, Owner, Record, Typed, record_fields, rfc3339, to_json,
};

/// The ReplicaSet as the API shows it: kubectl's columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetDto {
    pub name: String,
    pub namespace: String,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's DESIRED column: spec.replicas.
    pub desired: i32,
    /// kubectl's CURRENT column: status.replicas.
    pub current: i32,
    /// kubectl's READY column: status.readyReplicas.
    pub ready: i32,
    pub images: Vec<String>,
    pub label_selector: Labels,
    /// The Deployment that controls it, if any.
    pub deployment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSetRecord {
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    pub owner: Option<Owner>,
    pub json: Box<str>,
    /// The object as the apiserver sent it (managedFields stripped), compressed against
    /// its kind's dictionary: what the Kubernetes API serves ([`Record::raw_json`]).
    pub raw: bytes::Bytes,
}

impl ReplicaSetRecord {
    pub fn from_replicaset(rs: &ReplicaSet) -> Arc<Self> {
        Self::with_raw(rs, Self::resource().keep(rs))
    }

    /// The record of `rs`, keeping `raw` as its whole object.
    fn built(rs: &ReplicaSet, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &rs.metadata;
        let spec = rs.spec.as_ref();
        let status = rs.status.as_ref();
        let owner = Owner::controller_of(meta);
        let dto = ReplicaSetDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            desired: spec.and_then(|s| s.replicas).unwrap_or(1),
            current: status.map_or(0, |s| s.replicas),
            ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            images: spec
                .and_then(|s| s.template.as_ref()?.spec.as_ref())
                .map(|p| {
                    p.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            label_selector: spec
                .and_then(|s| s.selector.match_labels.clone())
                .unwrap_or_default(),
            deployment: owner
                .as_ref()
                .filter(|o| o.kind == Some(Kind::Deployment))
                .map(|o| o.name.to_string()),
        };
        Arc::new(ReplicaSetRecord {
            raw,
            key: ObjectKey::of(meta),
            json: to_json(&dto),
            uid: dto.uid,
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
            owner,
        })
    }
}

record_fields!(ReplicaSetRecord, metadata_selectable);

impl Record for ReplicaSetRecord {
    type Object = ReplicaSet;
    fn from_object(object: &ReplicaSet) -> Arc<Self> {
        ReplicaSetRecord::from_replicaset(object)
    }
    record_fields!();
}

impl Typed for ReplicaSetRecord {
    const KIND: Kind = Kind::ReplicaSet;
    const FIELDS: &'static [&'static str] = METADATA_FIELDS;
    type Dto = ReplicaSetDto;
    fn with_raw(object: &ReplicaSet, raw: bytes::Bytes) -> Arc<Self> {
        ReplicaSetRecord::built(object, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_replicaset;

    #[test]
    fn a_replicaset_shows_kubectls_columns_and_its_deployment() {
        let r = ReplicaSetRecord::from_replicaset(&mk_replicaset(
            "ns",
            "web-1a",
            "rs1",
            Some(("web", "d1")),
        ));
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["name"], "web-1a");
        assert_eq!(
            (&json["desired"], &json["current"], &json["ready"]),
            (
                &serde_json::json!(2),
                &serde_json::json!(2),
                &serde_json::json!(1)
            )
        );
        assert_eq!(json["deployment"], "web");
        assert_eq!(json["images"], serde_json::json!(["nginx:1.27"]));
        assert_eq!(
            r.owner.as_ref().and_then(|o| o.kind),
            Some(Kind::Deployment)
        );
    }
}
