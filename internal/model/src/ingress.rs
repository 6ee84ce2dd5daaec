//! Ingresses: `kubectl get ingresses`' columns, their rules, and the Services they route to.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use serde::Serialize;

use crate::{
    Kind, Labels, METADATA_FIELDS, ObjectKey, Record, Typed, record_fields, rfc3339, to_json,
};

/// One path of a rule, and where it leads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IngressPathDto {
    /// Empty: any host.
    pub host: String,
    pub path: String,
    /// Exact, Prefix or ImplementationSpecific.
    pub path_type: String,
    /// The backend Service, empty for a resource backend.
    pub service: String,
    /// The Service's port, by number or name.
    pub port: String,
}

/// The Ingress as the API shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IngressDto {
    pub name: String,
    pub namespace: String,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's CLASS.
    pub class: String,
    /// kubectl's HOSTS.
    pub hosts: String,
    /// kubectl's ADDRESS.
    pub address: String,
    /// kubectl's PORTS.
    pub ports: String,
    /// Every rule's paths, then the default backend (host and path empty).
    pub paths: Vec<IngressPathDto>,
    /// The Secrets that hold the TLS certificates.
    pub tls_secrets: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngressRecord {
    pub key: ObjectKey,
    pub uid: String,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// The Services its paths and default backend lead to.
    pub services: BTreeSet<String>,
    pub json: Box<str>,
    /// The object as the apiserver sent it (managedFields stripped), compressed against
    /// its kind's dictionary: what the Kubernetes API serves ([`Record::raw_json`]).
    pub raw: bytes::Bytes,
}

fn path_of(host: &str, path: &str, path_type: &str, backend: &IngressBackend) -> IngressPathDto {
    let service = backend.service.as_ref();
    let port = service.and_then(|s| s.port.as_ref());
    IngressPathDto {
        host: host.to_string(),
        path: path.to_string(),
        path_type: path_type.to_string(),
        service: service.map(|s| s.name.clone()).unwrap_or_default(),
        port: match port {
            Some(p) => p
                .number
                .map(|n| n.to_string())
                .or_else(|| p.name.clone())
                .unwrap_or_default(),
            None => String::new(),
        },
    }
}

impl IngressRecord {
    pub fn from_ingress(ingress: &Ingress) -> Arc<Self> {
        Self::with_raw(ingress, Self::resource().keep(ingress))
    }

    /// The record of `ingress`, keeping `raw` as its whole object.
    fn built(ingress: &Ingress, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &ingress.metadata;
        let spec = ingress.spec.clone().unwrap_or_default();
        let columns = kubectl_status::ingress_columns(ingress);
        let mut paths: Vec<IngressPathDto> = spec
            .rules
            .iter()
            .flatten()
            .flat_map(|rule| {
                let host = rule.host.as_deref().unwrap_or("");
                rule.http.iter().flat_map(|http| &http.paths).map(move |p| {
                    path_of(
                        host,
                        p.path.as_deref().unwrap_or(""),
                        &p.path_type,
                        &p.backend,
                    )
                })
            })
            .collect();
        paths.extend(
            spec.default_backend
                .as_ref()
                .map(|backend| path_of("", "", "", backend)),
        );
        let dto = IngressDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            class: columns.class,
            hosts: columns.hosts,
            address: columns.address,
            ports: columns.ports,
            tls_secrets: spec
                .tls
                .iter()
                .flatten()
                .filter_map(|t| t.secret_name.clone())
                .collect(),
            paths,
        };
        Arc::new(IngressRecord {
            raw,
            key: ObjectKey::of(meta),
            json: to_json(&dto),
            services: dto
                .paths
                .iter()
                .filter(|p| !p.service.is_empty())
                .map(|p| p.service.clone())
                .collect(),
            uid: dto.uid,
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
        })
    }
}

record_fields!(IngressRecord, metadata_selectable);

impl Record for IngressRecord {
    type Object = Ingress;
    fn from_object(object: &Ingress) -> Arc<Self> {
        IngressRecord::from_ingress(object)
    }
    record_fields!();
}

impl Typed for IngressRecord {
    const KIND: Kind = Kind::Ingress;
    const FIELDS: &'static [&'static str] = METADATA_FIELDS;
    type Dto = IngressDto;
    fn with_raw(object: &Ingress, raw: bytes::Bytes) -> Arc<Self> {
        IngressRecord::built(object, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_ingress;

    #[test]
    fn an_ingress_shows_its_columns_paths_and_services() {
        let r = IngressRecord::from_ingress(&mk_ingress("ns", "site", "web"));
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["hosts"], "example.com");
        assert_eq!(json["ports"], "80, 443");
        assert_eq!(json["class"], "<none>");
        assert_eq!(
            json["paths"][0],
            serde_json::json!({"host": "example.com", "path": "/", "pathType": "Prefix",
                               "service": "web", "port": "80"})
        );
        assert_eq!(json["tlsSecrets"], serde_json::json!(["site-tls"]));
        assert_eq!(r.services, BTreeSet::from(["web".to_string()]));
    }
}
