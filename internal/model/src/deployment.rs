//! Deployments: the original client's DTO and kubectl's columns, and the record reads keep,
//! the object itself among it.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use serde::Serialize;

use crate::{
    Kind, Labels, METADATA_FIELDS, ObjectKey, Record, Typed, record_fields, rfc3339, to_json,
};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatusDto {
    pub replicas: i32,
    pub available_replicas: i32,
    pub unavailable_replicas: i32,
}

/// The Deployment as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeploymentDto {
    pub name: String,
    pub namespace: String,
    pub replicas: i32,
    pub images: Vec<String>,
    pub status: DeploymentStatusDto,
    pub label_selector: Labels,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's READY column: ready/desired.
    pub ready: String,
    /// kubectl's UP-TO-DATE column.
    pub up_to_date: i32,
    /// kubectl's AVAILABLE column.
    pub available: i32,
}

/// What reads need of a Deployment: its answer, already serialized, and the fields that
/// selectors, sorting and relations look at.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentRecord {
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// The labels its Pods are made with: what Services select them by.
    pub template_labels: Labels,
    /// The [`DeploymentDto`] as JSON, serialized once per change: answers copy these bytes
    /// rather than serialize the object on every read (serialization is what a LIST costs).
    pub json: Box<str>,
    /// The object as the apiserver sent it (managedFields stripped), compressed against
    /// its kind's dictionary: what the Kubernetes API serves ([`Record::raw_json`]).
    pub raw: bytes::Bytes,
}

record_fields!(DeploymentRecord, metadata_selectable);

impl Record for DeploymentRecord {
    type Object = Deployment;
    fn from_object(object: &Deployment) -> Arc<Self> {
        DeploymentRecord::from_deployment(object)
    }
    record_fields!();
}

impl Typed for DeploymentRecord {
    const KIND: Kind = Kind::Deployment;
    const FIELDS: &'static [&'static str] = METADATA_FIELDS;
    type Dto = DeploymentDto;
    fn with_raw(object: &Deployment, raw: bytes::Bytes) -> Arc<Self> {
        DeploymentRecord::built(object, raw)
    }
}

impl DeploymentRecord {
    pub fn from_deployment(d: &Deployment) -> Arc<Self> {
        Self::with_raw(d, Self::resource().keep(d))
    }

    /// The record of `d`, keeping `raw` as its whole object.
    fn built(d: &Deployment, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &d.metadata;
        let spec = d.spec.as_ref();
        let status = d.status.clone().unwrap_or_default();
        let columns = kubectl_status::deployment_columns(d);
        let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
        let dto = DeploymentDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            replicas,
            images: spec
                .and_then(|s| s.template.spec.as_ref())
                .map(|p| {
                    p.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            status: DeploymentStatusDto {
                replicas: status.replicas.unwrap_or(0),
                available_replicas: status.available_replicas.unwrap_or(0),
                unavailable_replicas: status.unavailable_replicas.unwrap_or(0),
            },
            label_selector: spec
                .and_then(|s| s.selector.match_labels.clone())
                .unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            ready: columns.ready(),
            up_to_date: columns.up_to_date,
            available: columns.available,
        };
        Arc::new(DeploymentRecord {
            raw,
            key: ObjectKey::of(meta),
            template_labels: spec
                .and_then(|s| s.template.metadata.as_ref()?.labels.clone())
                .unwrap_or_default(),
            json: to_json(&dto),
            uid: dto.uid,
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_deployment;

    #[test]
    fn deployment_projection_has_original_and_kubectl_fields() {
        let r =
            DeploymentRecord::from_deployment(&mk_deployment("ns", "web", "d1", &[("tier", "fe")]));
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["name"], "web");
        assert_eq!(json["replicas"], 3);
        assert_eq!(json["images"], serde_json::json!(["nginx:1.27"]));
        assert_eq!(json["status"]["availableReplicas"], 2);
        assert_eq!(json["status"]["unavailableReplicas"], 1);
        assert_eq!(json["labelSelector"]["app"], "web");
        assert_eq!(json["ready"], "2/3");
        assert_eq!(json["upToDate"], 3);
        assert_eq!(json["creationTimestamp"], "2026-11-01T10:00:00Z");
        assert_eq!(r.key, ObjectKey::new("ns", "web"));
    }
}
