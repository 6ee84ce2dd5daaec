//! Services: `kubectl get services`' columns, and the selector that says which pods they
//! route to.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use serde::Serialize;

use crate::{
    Kind, Labels, ObjectKey, Record, Selectable, Typed, metadata_field, record_fields, rfc3339,
    to_json,
};

/// The Service as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceDto {
    pub name: String,
    pub namespace: String,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's TYPE: ClusterIP, NodePort, LoadBalancer or ExternalName.
    #[serde(rename = "type")]
    pub type_: String,
    /// kubectl's CLUSTER-IP (`None` when headless).
    pub cluster_ip: String,
    /// kubectl's EXTERNAL-IP.
    pub external_ip: String,
    /// kubectl's PORT(S), e.g. `80/TCP,443:30443/TCP`.
    pub ports: String,
    /// The pods it routes to; empty when it selects none by label (ExternalName, manual
    /// endpoints).
    pub selector: Labels,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRecord {
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    pub selector: Labels,
    pub type_: String,
    pub cluster_ip: String,
    pub json: Box<str>,
    /// The object as the apiserver sent it (managedFields stripped), compressed against
    /// its kind's dictionary: what the Kubernetes API serves ([`Record::raw_json`]).
    pub raw: bytes::Bytes,
}

impl ServiceRecord {
    pub fn from_service(svc: &Service) -> Arc<Self> {
        Self::with_raw(svc, Self::resource().keep(svc))
    }

    /// The record of `svc`, keeping `raw` as its whole object.
    fn built(svc: &Service, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &svc.metadata;
        let spec = svc.spec.as_ref();
        let columns = kubectl_status::service_columns(svc);
        let dto = ServiceDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            type_: columns.type_,
            cluster_ip: columns.cluster_ip,
            external_ip: columns.external_ip,
            ports: columns.ports,
            selector: spec.and_then(|s| s.selector.clone()).unwrap_or_default(),
        };
        Arc::new(ServiceRecord {
            raw,
            key: ObjectKey::of(meta),
            json: to_json(&dto),
            uid: dto.uid,
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
            selector: dto.selector,
            type_: dto.type_,
            // The field selector reads spec.clusterIP itself, empty when unset.
            cluster_ip: spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
        })
    }

    /// Whether the Service routes to pods with these labels: its selector is not empty and
    /// each of its pairs is among them, as the endpoints controller decides.
    pub fn selects(&self, pod_labels: &Labels) -> bool {
        !self.selector.is_empty()
            && self
                .selector
                .iter()
                .all(|(k, v)| pod_labels.get(k) == Some(v))
    }
}

record_fields!(ServiceRecord);

impl Selectable for ServiceRecord {
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn field(&self, path: &str) -> Option<Cow<'_, str>> {
        match path {
            "spec.clusterIP" => Some(Cow::Borrowed(&self.cluster_ip)),
            "spec.type" => Some(Cow::Borrowed(&self.type_)),
            _ => metadata_field(&self.key, path),
        }
    }
}

impl Record for ServiceRecord {
    type Object = Service;
    fn from_object(object: &Service) -> Arc<Self> {
        ServiceRecord::from_service(object)
    }
    record_fields!();
}

impl Typed for ServiceRecord {
    const KIND: Kind = Kind::Service;
    /// The apiserver's field selectors for Services.
    const FIELDS: &'static [&'static str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.clusterIP",
        "spec.type",
    ];
    type Dto = ServiceDto;
    fn with_raw(object: &Service, raw: bytes::Bytes) -> Arc<Self> {
        ServiceRecord::built(object, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_service;

    #[test]
    fn a_service_shows_kubectls_columns_and_selects_by_its_selector() {
        let r = ServiceRecord::from_service(&mk_service("ns", "web", &[("app", "web")]));
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(
            (
                &json["type"],
                &json["clusterIp"],
                &json["externalIp"],
                &json["ports"]
            ),
            (
                &serde_json::json!("ClusterIP"),
                &serde_json::json!("10.0.0.10"),
                &serde_json::json!("<none>"),
                &serde_json::json!("80/TCP")
            )
        );
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(r.selects(&labels(&[("app", "web"), ("tier", "x")])));
        assert!(!r.selects(&labels(&[("app", "api")])));
        assert_eq!(r.field("spec.type").as_deref(), Some("ClusterIP"));
        for field in ServiceRecord::FIELDS {
            assert!(r.field(field).is_some(), "{field} is selectable");
        }
        let headless = ServiceRecord::from_service(&mk_service("ns", "none", &[]));
        assert!(
            !headless.selects(&labels(&[("app", "web")])),
            "an empty selector selects nothing"
        );
    }
}
