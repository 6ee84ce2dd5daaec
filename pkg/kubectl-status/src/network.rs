//! The columns of `kubectl get services` and `kubectl get ingresses`: a port of
//! `printService` and `printIngress` in Kubernetes 1.35's printers.go, as `-o wide` prints
//! them (load balancer addresses are never cut short).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::networking::v1::{Ingress, IngressRule, IngressTLS};

/// TYPE, CLUSTER-IP, EXTERNAL-IP and PORT(S) of `kubectl get services`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceColumns {
    /// TYPE: ClusterIP, NodePort, LoadBalancer or ExternalName.
    pub type_: String,
    /// CLUSTER-IP: the first of spec.clusterIPs, `None` for a headless Service, `<none>` if unset.
    pub cluster_ip: String,
    /// EXTERNAL-IP: `<none>`, `<pending>`, the addresses, or an ExternalName's name.
    pub external_ip: String,
    /// PORT(S): `80/TCP,443:30443/TCP`, or `<none>`.
    pub ports: String,
}

/// The columns kubectl prints for the Service.
pub fn service_columns(svc: &Service) -> ServiceColumns {
    let spec = svc.spec.clone().unwrap_or_default();
    let type_ = spec.type_.clone().unwrap_or_default();
    let cluster_ip = spec
        .cluster_ips
        .as_ref()
        .and_then(|ips| ips.first().cloned())
        .or_else(|| spec.cluster_ip.clone())
        .unwrap_or_else(|| "<none>".to_string());
    let external_ips = spec.external_ips.clone().unwrap_or_default();
    let listed = |ips: &[String]| (!ips.is_empty()).then(|| ips.join(","));
    let external_ip = match type_.as_str() {
        "ClusterIP" | "NodePort" => listed(&external_ips).unwrap_or_else(|| "<none>".into()),
        "LoadBalancer" => {
            let balancers = addresses(
                svc.status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|i| (i.ip.as_deref(), i.hostname.as_deref())),
            );
            let all: Vec<String> = balancers.into_iter().chain(external_ips).collect();
            listed(&all).unwrap_or_else(|| "<pending>".into())
        }
        "ExternalName" => spec.external_name.clone().unwrap_or_default(),
        _ => "<unknown>".into(),
    };
    let ports = spec.ports.as_deref().map(port_string).unwrap_or_default();
    ServiceColumns {
        type_,
        cluster_ip,
        external_ip,
        ports: if ports.is_empty() {
            "<none>".into()
        } else {
            ports
        },
    }
}

/// Load balancer ingresses (IP, hostname) as kubectl names them: each by its IP, else its
/// hostname, sorted and without repeats.
fn addresses<'a>(
    ingresses: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> BTreeSet<String> {
    ingresses
        .filter_map(|(ip, hostname)| {
            ip.filter(|ip| !ip.is_empty())
                .or(hostname.filter(|h| !h.is_empty()))
        })
        .map(str::to_string)
        .collect()
}

fn port_string(ports: &[ServicePort]) -> String {
    ports
        .iter()
        .map(|p| {
            let protocol = p.protocol.as_deref().unwrap_or("TCP");
            match p.node_port.filter(|n| *n > 0) {
                Some(node) => format!("{}:{node}/{protocol}", p.port),
                None => format!("{}/{protocol}", p.port),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// CLASS, HOSTS, ADDRESS and PORTS of `kubectl get ingresses`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngressColumns {
    /// CLASS: spec.ingressClassName, or `<none>`.
    pub class: String,
    /// HOSTS: up to three rule hosts, `*` when no rule names one.
    pub hosts: String,
    /// ADDRESS: the load balancer's addresses, comma-separated.
    pub address: String,
    /// PORTS: `80`, or `80, 443` with TLS.
    pub ports: String,
}

/// The columns kubectl prints for the Ingress.
pub fn ingress_columns(ingress: &Ingress) -> IngressColumns {
    let spec = ingress.spec.clone().unwrap_or_default();
    let addresses = addresses(
        ingress
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
            .into_iter()
            .flatten()
            .map(|i| (i.ip.as_deref(), i.hostname.as_deref())),
    );
    IngressColumns {
        class: spec
            .ingress_class_name
            .clone()
            .unwrap_or_else(|| "<none>".into()),
        hosts: hosts(spec.rules.as_deref().unwrap_or_default()),
        address: addresses.into_iter().collect::<Vec<_>>().join(","),
        ports: tls_ports(spec.tls.as_deref().unwrap_or_default()).into(),
    }
}

fn hosts(rules: &[IngressRule]) -> String {
    const SHOWN: usize = 3;
    let named: Vec<&str> = rules
        .iter()
        .take(SHOWN)
        .filter_map(|r| r.host.as_deref().filter(|h| !h.is_empty()))
        .collect();
    if named.is_empty() {
        return "*".into();
    }
    let shown = named.join(",");
    if rules.len() > SHOWN {
        format!("{shown} + {} more...", rules.len() - SHOWN)
    } else {
        shown
    }
}

fn tls_ports(tls: &[IngressTLS]) -> &'static str {
    if tls.is_empty() { "80" } else { "80, 443" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn services_print_as_kubectl_prints_them() {
        let cases = [
            (
                json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"],
                    "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}),
                ("ClusterIP", "10.0.0.9", "<none>", "80/TCP,53/UDP"),
            ),
            (
                json!({"spec": {"type": "NodePort", "clusterIPs": ["10.0.0.7"],
                    "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}}),
                ("NodePort", "10.0.0.7", "<none>", "80:30080/TCP"),
            ),
            (
                json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}}),
                ("ClusterIP", "None", "<none>", "<none>"),
            ),
            (
                json!({"spec": {"type": "ExternalName", "externalName": "example.com"}}),
                ("ExternalName", "<none>", "example.com", "<none>"),
            ),
            (
                json!({"spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.5"], "ports": [{"port": 443}]}}),
                ("LoadBalancer", "10.0.0.5", "<pending>", "443/TCP"),
            ),
            (
                json!({"spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.5"], "externalIPs": ["1.2.3.4"]},
                       "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "5.6.7.8"}]}}}),
                (
                    "LoadBalancer",
                    "10.0.0.5",
                    "5.6.7.8,lb.example,1.2.3.4",
                    "<none>",
                ),
            ),
        ];
        for (svc, (type_, cluster_ip, external_ip, ports)) in cases {
            let columns = service_columns(&service(svc));
            assert_eq!(
                (
                    columns.type_.as_str(),
                    columns.cluster_ip.as_str(),
                    columns.external_ip.as_str(),
                    columns.ports.as_str()
                ),
                (type_, cluster_ip, external_ip, ports)
            );
        }
    }

    #[test]
    fn ingresses_print_as_kubectl_prints_them() {
        let ingress: Ingress = serde_json::from_value(json!({"spec": {
            "ingressClassName": "nginx",
            "rules": [{"host": "a.example"}, {}, {"host": "c.example"}, {"host": "d.example"}],
            "tls": [{"hosts": ["a.example"], "secretName": "s"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}]}}}))
        .unwrap();
        assert_eq!(
            ingress_columns(&ingress),
            IngressColumns {
                class: "nginx".into(),
                hosts: "a.example,c.example + 1 more...".into(),
                address: "9.9.9.9".into(),
                ports: "80, 443".into(),
            }
        );
        let bare: Ingress = serde_json::from_value(json!({"spec": {"rules": [{}]}})).unwrap();
        assert_eq!(
            ingress_columns(&bare),
            IngressColumns {
                class: "<none>".into(),
                hosts: "*".into(),
                address: String::new(),
                ports: "80".into(),
            }
        );
    }
}
