//! mk_pod-style builders of typed objects, for tests here and in the crates above (the
//! `fixtures` feature).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;

pub use crate::generic::fixtures::mk_object;

/// An Active Namespace.
pub fn mk_namespace(name: &str) -> k8s_openapi::api::core::v1::Namespace {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
                     "creationTimestamp": "2026-11-01T10:00:00Z"},
        "status": {"phase": "Active"}
    }))
    .expect("a valid Namespace")
}

/// A ClusterIP Service on port 80 selecting `selector` (none: a Service without one).
pub fn mk_service(ns: &str, name: &str, selector: &[(&str, &str)]) -> Service {
    let selector: serde_json::Map<_, _> = selector
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"],
                 "selector": selector, "ports": [{"port": 80, "protocol": "TCP"}]}
    }))
    .expect("a valid Service")
}

/// An Ingress routing example.com/ (Prefix) to `service`:80, with TLS.
pub fn mk_ingress(ns: &str, name: &str, service: &str) -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"tls": [{"hosts": ["example.com"], "secretName": format!("{name}-tls")}],
                 "rules": [{"host": "example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}
    }))
    .expect("a valid Ingress")
}

pub fn mk_deployment(ns: &str, name: &str, uid: &str, labels: &[(&str, &str)]) -> Deployment {
    let labels: serde_json::Map<_, _> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": "1",
                     "labels": labels, "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                   "unavailableReplicas": 1, "updatedReplicas": 3}
    }))
    .expect("a valid Deployment")
}

pub fn mk_replicaset(ns: &str, name: &str, uid: &str, owner: Option<(&str, &str)>) -> ReplicaSet {
    let owners: Vec<_> = owner
        .iter()
        .map(|(name, uid)| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                  "uid": uid, "controller": true})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": "1",
                     "ownerReferences": owners, "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
        "status": {"replicas": 2, "readyReplicas": 1}
    }))
    .expect("a valid ReplicaSet")
}

pub fn mk_pod(
    ns: &str,
    name: &str,
    owner_rs: Option<(&str, &str)>,
    labels: &[(&str, &str)],
) -> Pod {
    let labels: serde_json::Map<_, _> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let owners: Vec<_> = owner_rs
        .iter()
        .map(|(name, uid)| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                  "uid": uid, "controller": true})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "labels": labels, "ownerReferences": owners,
                     "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "hostIP": "10.1.0.1", "podIP": "10.2.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "",
                       "ready": true, "restartCount": 2, "started": true,
                       "state": {"running": {"startedAt": "2026-11-01T10:00:05Z"}}}]}
    }))
    .expect("a valid Pod")
}
