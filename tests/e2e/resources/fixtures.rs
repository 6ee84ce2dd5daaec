//! One minimal valid object per built-in kind, for the table-driven test of every kind
//! (`every_built_in_kind_is_created_selected_got_watched_and_deleted`). Each fixture makes
//! two objects: the selected one and another that differs from it where the kind's own
//! field selector looks, so that selector must tell them apart.

use serde_json::{Value, json};

/// A kind's fixture: the resource as requests name it, its objects' names, the object, and
/// the field selector of the kind's own allow-list (beyond metadata) with what it selects.
pub(crate) struct Fixture {
    pub resource: &'static str,
    pub name: fn(ns: &str, which: Which) -> String,
    /// The object, without labels (the test adds its own), in namespace `ns` for a
    /// namespaced kind.
    pub object: fn(name: &str, which: Which, ns: &str) -> Value,
    pub field: Option<(&'static str, &'static [Which])>,
}

/// The object the label selector (and the field selector, where the kind has one) selects,
/// or the other one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    Selected,
    Other,
}

use Which::{Other, Selected};

impl Which {
    pub fn tag(self) -> &'static str {
        match self {
            Selected => "x",
            Other => "y",
        }
    }
}

/// A namespaced object's name: unique in the test's namespace.
fn local(_: &str, which: Which) -> String {
    which.tag().into()
}

/// Endpoints' name: not a Service fixture's, whose Endpoints the endpoints controller writes
/// and deletes with it.
fn endpoints_name(_: &str, which: Which) -> String {
    format!("{}-ep", which.tag())
}

/// An Event of the new API's name: the core API holds it too (one object, two shapes), so
/// it is named apart from the core fixture's.
fn new_event(_: &str, which: Which) -> String {
    format!("{}-new", which.tag())
}

/// A cluster-scoped object's name: unique in the cluster, the test's namespace in it.
fn global(ns: &str, which: Which) -> String {
    format!("{ns}-{}", which.tag())
}

/// A CRD's name is its plural and group: a group of the test's own.
fn crd_name(ns: &str, which: Which) -> String {
    format!("{}widgets.{ns}.example.com", which.tag())
}

fn object(api_version: &str, kind: &str, name: &str, rest: Value) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let (Some(object), Value::Object(rest)) = (object.as_object_mut(), rest) {
        object.extend(rest);
    }
    object
}

/// A pod template whose labels select nothing but its owner (`key: name`).
fn template(key: &str, name: &str) -> Value {
    json!({"metadata": {"labels": {key: name}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
}

const NO_FIELD: Option<(&str, &[Which])> = None;

pub(crate) const FIXTURES: &[Fixture] = &[
    Fixture {
        resource: "pods",
        name: local,
        object: |name, which, _| {
            let policy = if which == Selected { "Never" } else { "Always" };
            object(
                "v1",
                "Pod",
                name,
                json!({"spec": {"restartPolicy": policy,
                "containers": [{"name": "c", "image": "busybox:1.36"}]}}),
            )
        },
        field: Some(("spec.restartPolicy=Never", &[Selected])),
    },
    Fixture {
        resource: "deployments",
        name: local,
        object: |name, _, _| {
            object(
                "apps/v1",
                "Deployment",
                name,
                json!({"spec": {"replicas": 0,
                "selector": {"matchLabels": {"deploy": name}},
                "template": template("deploy", name)}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "statefulsets",
        name: local,
        object: |name, _, _| {
            object(
                "apps/v1",
                "StatefulSet",
                name,
                json!({"spec": {"replicas": 0,
                "serviceName": name, "selector": {"matchLabels": {"sts": name}},
                "template": template("sts", name)}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "daemonsets",
        name: local,
        object: |name, _, _| {
            let mut pods = template("ds", name);
            // On no node: the controller makes no pods.
            pods["spec"]["nodeSelector"] = json!({"e2e-no-such-node": "none"});
            object(
                "apps/v1",
                "DaemonSet",
                name,
                json!({"spec": {
                "selector": {"matchLabels": {"ds": name}}, "template": pods}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "replicasets",
        name: local,
        object: |name, _, _| {
            object(
                "apps/v1",
                "ReplicaSet",
                name,
                json!({"spec": {"replicas": 0,
                "selector": {"matchLabels": {"rs": name}}, "template": template("rs", name)}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "jobs",
        name: local,
        object: |name, _, _| {
            let mut pods = template("job", name);
            pods["spec"]["restartPolicy"] = json!("Never");
            object(
                "batch/v1",
                "Job",
                name,
                json!({"spec": {"suspend": true, "template": pods}}),
            )
        },
        // Suspended: neither succeeds, and the apiserver reads the absent count as 0.
        field: Some(("status.successful=0", &[Selected, Other])),
    },
    Fixture {
        resource: "cronjobs",
        name: local,
        object: |name, _, _| {
            let mut pods = template("cj", name);
            pods["spec"]["restartPolicy"] = json!("Never");
            object(
                "batch/v1",
                "CronJob",
                name,
                json!({"spec": {"schedule": "0 0 1 1 *",
                "suspend": true, "jobTemplate": {"spec": {"template": pods}}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "horizontalpodautoscalers",
        name: local,
        object: |name, _, _| {
            object(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                name,
                json!({"spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": 1, "maxReplicas": 2}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "poddisruptionbudgets",
        name: local,
        object: |name, _, _| {
            object(
                "policy/v1",
                "PodDisruptionBudget",
                name,
                json!({"spec": {"minAvailable": 1,
                "selector": {"matchLabels": {"pdb": name}}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "services",
        name: local,
        // Without a selector: no controller makes EndpointSlices for it.
        object: |name, which, _| {
            let spec = match which {
                Selected => json!({"type": "ClusterIP", "ports": [{"port": 80}]}),
                Other => json!({"type": "ExternalName", "externalName": "example.com"}),
            };
            object("v1", "Service", name, json!({"spec": spec}))
        },
        field: Some(("spec.type=ClusterIP", &[Selected])),
    },
    Fixture {
        resource: "endpoints",
        name: endpoints_name,
        object: |name, which, _| {
            let ip = if which == Selected {
                "10.0.0.7"
            } else {
                "10.0.0.8"
            };
            object(
                "v1",
                "Endpoints",
                name,
                json!({"subsets": [{"addresses": [{"ip": ip}], "ports": [{"port": 80}]}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "endpointslices",
        name: local,
        object: |name, _, _| {
            object(
                "discovery.k8s.io/v1",
                "EndpointSlice",
                name,
                json!({"addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.9"]}], "ports": [{"port": 80}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "ingresses",
        name: local,
        object: |name, _, _| {
            object(
                "networking.k8s.io/v1",
                "Ingress",
                name,
                json!({"spec": {"defaultBackend":
                {"service": {"name": name, "port": {"number": 80}}}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "ingressclasses",
        name: global,
        object: |name, _, _| {
            object(
                "networking.k8s.io/v1",
                "IngressClass",
                name,
                json!({"spec": {"controller": "example.com/e2e"}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "networkpolicies",
        name: local,
        object: |name, _, _| {
            object(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                name,
                json!({"spec": {"podSelector": {"matchLabels": {"netpol": name}}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "configmaps",
        name: local,
        object: |name, _, _| object("v1", "ConfigMap", name, json!({"data": {"key": name}})),
        field: NO_FIELD,
    },
    Fixture {
        resource: "secrets",
        name: local,
        // Kept as metadata only: the apiserver's `type` field is not in it (catalog.rs).
        object: |name, _, _| {
            object(
                "v1",
                "Secret",
                name,
                json!({"type": "Opaque", "stringData": {"key": name}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "persistentvolumeclaims",
        name: local,
        // A class no volume has: it stays Pending, bound to nothing.
        object: |name, _, _| {
            object(
                "v1",
                "PersistentVolumeClaim",
                name,
                json!({"spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "e2e-no-such-class",
                "resources": {"requests": {"storage": "1Mi"}}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "persistentvolumes",
        name: global,
        object: |name, _, _| {
            object(
                "v1",
                "PersistentVolume",
                name,
                json!({"spec": {
                "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "e2e-no-such-claim", "hostPath": {"path": "/tmp/e2e"},
                "persistentVolumeReclaimPolicy": "Retain"}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "storageclasses",
        name: global,
        object: |name, _, _| {
            object(
                "storage.k8s.io/v1",
                "StorageClass",
                name,
                json!({"provisioner": "example.com/e2e"}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "serviceaccounts",
        name: local,
        object: |name, _, _| object("v1", "ServiceAccount", name, json!({})),
        field: NO_FIELD,
    },
    Fixture {
        resource: "roles",
        name: local,
        object: |name, _, _| {
            object(
                "rbac.authorization.k8s.io/v1",
                "Role",
                name,
                json!({"rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "rolebindings",
        name: local,
        object: |name, _, ns| {
            object(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                name,
                json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "clusterroles",
        name: global,
        object: |name, _, _| {
            object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                name,
                json!({"rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "clusterrolebindings",
        name: global,
        object: |name, _, ns| {
            object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                name,
                json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": ns}]}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "nodes",
        name: global,
        object: |name, which, _| {
            object(
                "v1",
                "Node",
                name,
                json!({"spec": {"unschedulable": which == Selected}}),
            )
        },
        field: Some(("spec.unschedulable=true", &[Selected])),
    },
    Fixture {
        resource: "namespaces",
        name: global,
        object: |name, _, _| object("v1", "Namespace", name, json!({})),
        // Both are Active until deleted.
        field: Some(("status.phase=Active", &[Selected, Other])),
    },
    Fixture {
        resource: "events",
        name: local,
        object: |name, which, ns| {
            let reason = if which == Selected {
                "Selected"
            } else {
                "Other"
            };
            object(
                "v1",
                "Event",
                name,
                json!({"reason": reason, "type": "Normal",
                "message": "m", "source": {"component": "e2e"},
                "involvedObject": {"kind": "Pod", "name": name, "namespace": ns}}),
            )
        },
        field: Some(("reason=Selected", &[Selected])),
    },
    Fixture {
        resource: "events.events.k8s.io",
        name: new_event,
        object: |name, which, ns| {
            let reason = if which == Selected {
                "Selected"
            } else {
                "Other"
            };
            object(
                "events.k8s.io/v1",
                "Event",
                name,
                json!({"reason": reason, "type": "Normal", "note": "m",
                "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Test",
                "reportingController": "e2e.example.com/test", "reportingInstance": "e2e",
                "regarding": {"kind": "Pod", "name": name, "namespace": ns}}),
            )
        },
        field: Some(("reason=Selected", &[Selected])),
    },
    Fixture {
        resource: "resourcequotas",
        name: local,
        // Of a kind no fixture makes: the quota's admission has nothing to count.
        object: |name, _, _| {
            object(
                "v1",
                "ResourceQuota",
                name,
                json!({"spec": {"hard": {"count/replicationcontrollers": "1"}}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "limitranges",
        name: local,
        object: |name, _, _| {
            object(
                "v1",
                "LimitRange",
                name,
                json!({"spec": {"limits": [
                {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "priorityclasses",
        name: global,
        object: |name, _, _| {
            object(
                "scheduling.k8s.io/v1",
                "PriorityClass",
                name,
                json!({"value": 1000}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "leases",
        name: local,
        object: |name, _, _| {
            object(
                "coordination.k8s.io/v1",
                "Lease",
                name,
                json!({"spec": {"holderIdentity": name, "leaseDurationSeconds": 15}}),
            )
        },
        field: NO_FIELD,
    },
    Fixture {
        resource: "customresourcedefinitions",
        name: crd_name,
        object: |name, which, _| {
            let (plural, group) = name.split_once('.').unwrap();
            let kind = if which == Selected {
                "XWidget"
            } else {
                "YWidget"
            };
            object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                name,
                json!({"spec": {
                "group": group, "scope": "Namespaced",
                "names": {"plural": plural, "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
            )
        },
        field: NO_FIELD,
    },
];
