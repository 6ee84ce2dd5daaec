//! Services and Ingresses: built from biz's plain requests, created (answering what the
//! cache must catch up with, as every write does), and read back raw for `/output`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::PostParams;

use super::LiveSource;
use super::reads::Namespaced;
use super::writes::written;
use crate::{DaoError, Kind, WriteEffect};
use model::Typed;
use model::{NewIngress, NewService, NewServicePort, PortRef, ServiceShape};

/// A kind created and printed raw.
trait RawKind: Namespaced + serde::Serialize {}

impl<K: Namespaced + serde::Serialize> RawKind for K {}

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..Default::default()
    }
}

fn service_port(p: &NewServicePort, node_port: Option<i32>) -> ServicePort {
    ServicePort {
        name: Some(p.name.clone()),
        port: p.port,
        target_port: Some(match &p.target_port {
            PortRef::Number(n) => IntOrString::Int(*n),
            PortRef::Name(name) => IntOrString::String(name.clone()),
        }),
        node_port,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn service_object(namespace: &str, new: &NewService) -> Service {
    let plain = |ports: &[NewServicePort]| ports.iter().map(|p| service_port(p, None)).collect();
    let (type_, ports, cluster_ip, external_name) = match &new.shape {
        ServiceShape::ClusterIp(ports) => ("ClusterIP", plain(ports), None, None),
        ServiceShape::Headless(ports) => ("ClusterIP", plain(ports), Some("None"), None),
        ServiceShape::NodePort(ports) => (
            "NodePort",
            ports
                .iter()
                .map(|p| service_port(&p.port, p.node_port))
                .collect(),
            None,
            None,
        ),
        ServiceShape::ExternalName(host) => ("ExternalName", Vec::new(), None, Some(host.clone())),
    };
    Service {
        metadata: meta(namespace, &new.name),
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            // The Pods of a Deployment created through k8sailor (or kubectl) carry app=<name>.
            selector: Some(BTreeMap::from([("app".to_string(), new.name.clone())])),
            ports: (!ports.is_empty()).then_some(ports),
            cluster_ip: cluster_ip.map(str::to_string),
            external_name,
            ..Default::default()
        }),
        status: None,
    }
}

fn ingress_object(namespace: &str, new: &NewIngress) -> Ingress {
    let rules = new
        .rules
        .iter()
        .map(|r| IngressRule {
            host: r.host.clone(),
            http: Some(HTTPIngressRuleValue {
                paths: vec![HTTPIngressPath {
                    path: Some(r.path.clone()),
                    path_type: r.path_type.as_str().to_string(),
                    backend: IngressBackend {
                        service: Some(IngressServiceBackend {
                            name: r.service.clone(),
                            port: Some(match &r.port {
                                PortRef::Number(n) => ServiceBackendPort {
                                    number: Some(*n),
                                    ..Default::default()
                                },
                                PortRef::Name(name) => ServiceBackendPort {
                                    name: Some(name.clone()),
                                    ..Default::default()
                                },
                            }),
                        }),
                        ..Default::default()
                    },
                }],
            }),
        })
        .collect();
    let tls: Vec<IngressTLS> = new
        .tls
        .iter()
        .map(|t| IngressTLS {
            hosts: Some(t.hosts.clone()),
            secret_name: Some(t.secret_name.clone()),
        })
        .collect();
    Ingress {
        metadata: meta(namespace, &new.name),
        spec: Some(IngressSpec {
            rules: Some(rules),
            tls: (!tls.is_empty()).then_some(tls),
            ..Default::default()
        }),
        status: None,
    }
}

/// The object as JSON, without what kubectl leaves out of `get -o` (managedFields, the
/// last-applied annotation), so a create's answer and `/output` print the same thing.
fn printable<K: RawKind>(mut object: K) -> Result<Vec<u8>, DaoError> {
    confk8s::strip_noise(&mut object);
    serde_json::to_vec(&object).map_err(|e| DaoError::Malformed {
        object: format!("{} {:?}: {e}", K::kind(&()), object.meta().name),
        field: "(the whole object)",
    })
}

impl LiveSource {
    pub(crate) async fn create_service(
        &self,
        namespace: &str,
        new: &NewService,
    ) -> Result<(Vec<u8>, WriteEffect), DaoError> {
        self.create_raw(Kind::Service, namespace, &service_object(namespace, new))
            .await
    }

    pub(crate) async fn create_ingress(
        &self,
        namespace: &str,
        new: &NewIngress,
    ) -> Result<(Vec<u8>, WriteEffect), DaoError> {
        self.create_raw(Kind::Ingress, namespace, &ingress_object(namespace, new))
            .await
    }

    /// The object as it is now, printable.
    pub(crate) async fn object_json<R: Typed<Object: serde::Serialize + Namespaced>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<u8>, DaoError> {
        printable(
            self.get_object::<R::Object>(R::KIND, namespace, name)
                .await?,
        )
    }

    /// The object as the apiserver stored it, printable, and the version the cache must show.
    async fn create_raw<K: RawKind>(
        &self,
        kind: Kind,
        namespace: &str,
        object: &K,
    ) -> Result<(Vec<u8>, WriteEffect), DaoError> {
        let created = self
            .api::<K>(Some(namespace))
            .create(&PostParams::default(), object)
            .await?;
        let effect = written(kind, created.meta());
        Ok((printable(created)?, effect))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    use model::{
        IngressRecord, NewIngressRule, NewIngressTls, NodeServicePort, PathType, ServiceRecord,
    };

    fn json_of<T: serde::Serialize>(object: &T) -> Value {
        serde_json::to_value(object).unwrap()
    }

    #[test]
    fn each_service_shape_becomes_its_spec() {
        let port = NewServicePort {
            name: "80-http".into(),
            port: 80,
            target_port: PortRef::Name("http".into()),
        };
        let service = |shape| {
            json_of(&service_object(
                "ns",
                &NewService {
                    name: "web".into(),
                    shape,
                },
            ))["spec"]
                .clone()
        };
        let ports =
            json!([{"name": "80-http", "port": 80, "targetPort": "http", "protocol": "TCP"}]);
        assert_eq!(
            service(ServiceShape::ClusterIp(vec![port.clone()])),
            json!({"type": "ClusterIP", "selector": {"app": "web"}, "ports": ports})
        );
        assert_eq!(
            service(ServiceShape::Headless(vec![port.clone()])),
            json!({"type": "ClusterIP", "clusterIP": "None", "selector": {"app": "web"}, "ports": ports})
        );
        assert_eq!(
            service(ServiceShape::NodePort(vec![NodeServicePort {
                port,
                node_port: Some(30080)
            }]))["ports"][0]["nodePort"],
            30080
        );
        assert_eq!(
            service(ServiceShape::ExternalName("db.example.com".into())),
            json!({"type": "ExternalName", "externalName": "db.example.com", "selector": {"app": "web"}})
        );
    }

    #[tokio::test]
    async fn answers_leave_out_what_kubectl_does_and_a_missing_object_is_a_404() {
        let stored = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5",
                "managedFields": [{"manager": "k8sailor"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.7"}});
        let missing = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "ingresses.networking.k8s.io \"gone\" not found"});
        let (source, server) = super::super::mock::source_with(vec![
            ("/api/v1/namespaces/ns/services?", 201, stored.clone()),
            ("/api/v1/namespaces/ns/services/web", 200, stored),
            (
                "/apis/networking.k8s.io/v1/namespaces/ns/ingresses/gone",
                404,
                missing,
            ),
        ]);
        let new = NewService {
            name: "web".into(),
            shape: ServiceShape::ExternalName("db.example.com".into()),
        };
        let (created, effect) = source.create_service("ns", &new).await.unwrap();
        assert_eq!(effect, WriteEffect::Version(5), "what the cache must show");
        let created: Value = serde_json::from_slice(&created).unwrap();
        let printed: Value = serde_json::from_slice(
            &source
                .object_json::<ServiceRecord>("ns", "web")
                .await
                .unwrap(),
        )
        .unwrap();
        for answer in [&created, &printed] {
            assert_eq!(answer["spec"]["clusterIP"], "10.0.0.7", "the stored object");
            assert!(answer["metadata"]["managedFields"].is_null(), "{answer}");
            assert!(answer["metadata"]["annotations"].is_null(), "{answer}");
        }
        let err = source
            .object_json::<IngressRecord>("ns", "gone")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, DaoError::NotFound { kind, name, .. } if name == "gone" && *kind == Kind::Ingress.to_string()),
            "{err}"
        );
        server.await.unwrap();
    }

    #[test]
    fn an_ingress_has_one_rule_per_entry() {
        let ingress = ingress_object(
            "ns",
            &NewIngress {
                name: "shop".into(),
                rules: vec![NewIngressRule {
                    host: Some("a.example.com".into()),
                    path: "/api".into(),
                    path_type: PathType::Prefix,
                    service: "api".into(),
                    port: PortRef::Number(8080),
                }],
                tls: vec![NewIngressTls {
                    hosts: vec!["a.example.com".into()],
                    secret_name: "cert".into(),
                }],
            },
        );
        assert_eq!(
            json_of(&ingress)["spec"],
            json!({
                "rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/api", "pathType": "Prefix",
                    "backend": {"service": {"name": "api", "port": {"number": 8080}}}}]}}],
                "tls": [{"hosts": ["a.example.com"], "secretName": "cert"}],
            })
        );
    }
}
