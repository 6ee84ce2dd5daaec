//! The `printers` crate against the real kube-apiserver: for objects of every built-in kind
//! and for custom resources, the apiserver's own Table (`Accept: ...;as=Table`, each row with
//! its object) and `Printer::cells` of the row's object must agree, column definitions and
//! every cell. A time-relative cell may have been rendered by the apiserver at any moment
//! between our request and its answer, so it must match at one of those moments; every other
//! cell must be equal.

use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use kube::Client;
use printers::{Cell, Printer, builtin};
use serde_json::{Value, json};

use crate::support::{SOON, TestNamespace, cleanup_in_background, eventually};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// One kind: its printer and where the apiserver lists it.
struct Kind {
    printer: fn() -> Printer,
    /// `api/v1` or `apis/<group>/<version>`.
    api: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const fn kind(
    printer: fn() -> Printer,
    api: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        printer,
        api,
        plural,
        namespaced,
    }
}

const CORE: &str = "api/v1";
const APPS: &str = "apis/apps/v1";
const BATCH: &str = "apis/batch/v1";
const AUTOSCALING: &str = "apis/autoscaling/v2";
const POLICY: &str = "apis/policy/v1";
const DISCOVERY: &str = "apis/discovery.k8s.io/v1";
const EVENTS: &str = "apis/events.k8s.io/v1";
const NETWORKING: &str = "apis/networking.k8s.io/v1";
const STORAGE: &str = "apis/storage.k8s.io/v1";
const RBAC: &str = "apis/rbac.authorization.k8s.io/v1";
const COORDINATION: &str = "apis/coordination.k8s.io/v1";
const SCHEDULING: &str = "apis/scheduling.k8s.io/v1";
const APIEXTENSIONS: &str = "apis/apiextensions.k8s.io/v1";

const KINDS: &[Kind] = &[
    kind(builtin::pod, CORE, "pods", true),
    kind(builtin::deployment, APPS, "deployments", true),
    kind(builtin::stateful_set, APPS, "statefulsets", true),
    kind(builtin::daemon_set, APPS, "daemonsets", true),
    kind(builtin::replica_set, APPS, "replicasets", true),
    kind(builtin::job, BATCH, "jobs", true),
    kind(builtin::cron_job, BATCH, "cronjobs", true),
    kind(
        builtin::horizontal_pod_autoscaler,
        AUTOSCALING,
        "horizontalpodautoscalers",
        true,
    ),
    kind(
        builtin::pod_disruption_budget,
        POLICY,
        "poddisruptionbudgets",
        true,
    ),
    kind(builtin::service, CORE, "services", true),
    kind(builtin::endpoints, CORE, "endpoints", true),
    kind(builtin::endpoint_slice, DISCOVERY, "endpointslices", true),
    kind(builtin::ingress, NETWORKING, "ingresses", true),
    kind(builtin::ingress_class, NETWORKING, "ingressclasses", false),
    kind(builtin::network_policy, NETWORKING, "networkpolicies", true),
    kind(builtin::config_map, CORE, "configmaps", true),
    kind(builtin::secret, CORE, "secrets", true),
    kind(
        builtin::persistent_volume_claim,
        CORE,
        "persistentvolumeclaims",
        true,
    ),
    kind(builtin::persistent_volume, CORE, "persistentvolumes", false),
    kind(builtin::storage_class, STORAGE, "storageclasses", false),
    kind(builtin::service_account, CORE, "serviceaccounts", true),
    kind(builtin::role, RBAC, "roles", true),
    kind(builtin::role_binding, RBAC, "rolebindings", true),
    kind(builtin::cluster_role, RBAC, "clusterroles", false),
    kind(
        builtin::cluster_role_binding,
        RBAC,
        "clusterrolebindings",
        false,
    ),
    kind(builtin::node, CORE, "nodes", false),
    kind(builtin::namespace, CORE, "namespaces", false),
    kind(builtin::event, CORE, "events", true),
    // The same Events, in the new API's shape.
    kind(builtin::event_v1, EVENTS, "events", true),
    kind(builtin::resource_quota, CORE, "resourcequotas", true),
    kind(builtin::limit_range, CORE, "limitranges", true),
    kind(
        builtin::priority_class,
        SCHEDULING,
        "priorityclasses",
        false,
    ),
    kind(builtin::lease, COORDINATION, "leases", true),
    kind(
        builtin::custom_resource_definition,
        APIEXTENSIONS,
        "customresourcedefinitions",
        false,
    ),
];

fn collection(api: &str, namespace: Option<&str>, plural: &str) -> String {
    match namespace {
        Some(ns) => format!("/{api}/namespaces/{ns}/{plural}"),
        None => format!("/{api}/{plural}"),
    }
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Value {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(serde_json::to_vec(body).expect("JSON"))
        .expect("a request");
    let text = client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("{method} {path} {body}: {e}"));
    serde_json::from_str(&text).expect("a JSON answer")
}

async fn create(
    client: &Client,
    api: &str,
    namespace: Option<&str>,
    plural: &str,
    body: Value,
) -> Value {
    send(
        client,
        "POST",
        &collection(api, namespace, plural),
        "application/json",
        &body,
    )
    .await
}

async fn patch_status(client: &Client, object_path: &str, status: Value) -> Value {
    send(
        client,
        "PATCH",
        &format!("{object_path}/status"),
        "application/merge-patch+json",
        &json!({"status": status}),
    )
    .await
}

/// The apiserver's Table of a collection, each row with its object, and the moments just
/// before the request and just after the answer.
async fn table(client: &Client, path: &str) -> (Value, SystemTime, SystemTime) {
    let request = http::Request::builder()
        .uri(format!("{path}?includeObject=Object"))
        .header("Accept", TABLE)
        .body(Vec::new())
        .expect("a request");
    let before = SystemTime::now();
    let text = client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("GET {path} as a Table: {e}"));
    let after = SystemTime::now();
    (serde_json::from_str(&text).expect("a Table"), before, after)
}

fn time_relative(cell: &Cell) -> bool {
    matches!(cell, Cell::Age(_) | Cell::Restarts { .. })
}

fn same(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => ours == theirs,
    }
}

/// Compares the apiserver's Table of `path` with `printer`'s columns and cells for each
/// row's object; returns how many rows were compared.
async fn compare(client: &Client, path: &str, printer: &Printer) -> usize {
    let (table, before, after) = table(client, path).await;
    assert_eq!(
        serde_json::to_value(printer.columns()).expect("columns as JSON"),
        table["columnDefinitions"],
        "{path}: column definitions"
    );
    let rows = table["rows"].as_array().map_or(&[][..], Vec::as_slice);
    for row in rows {
        let object = &row["object"];
        let name = &object["metadata"]["name"];
        let theirs = row["cells"].as_array().expect("cells");
        let ours = printer.cells(object);
        assert_eq!(ours.len(), theirs.len(), "{path} {name}: cells {theirs:?}");
        for (i, (cell, their)) in ours.iter().zip(theirs).enumerate() {
            let column = &printer.columns()[i].name;
            if time_relative(cell) {
                // The apiserver rendered it at some moment in [before, after]; try each
                // tenth of a second of that span, with a second's slack either side.
                let mut moment = before - Duration::from_secs(1);
                let mut seen = Vec::new();
                while moment <= after + Duration::from_secs(1) {
                    let value = cell.to_table_value(moment);
                    if same(&value, their) {
                        break;
                    }
                    seen.push(value);
                    moment += Duration::from_millis(100);
                }
                assert!(
                    moment <= after + Duration::from_secs(1),
                    "{path} {name} {column}: apiserver {their}, ours {seen:?} ({cell:?})"
                );
            } else {
                let value = cell.to_table_value(after);
                assert!(
                    same(&value, their),
                    "{path} {name} {column}: apiserver {their}, ours {value} ({cell:?})"
                );
            }
        }
    }
    rows.len()
}

/// Cluster-scoped objects this test made, deleted when it ends; pods whose finalizer kept
/// them Terminating get it removed, and pods bound to our kubelet-less node are deleted at
/// once (no kubelet would confirm a graceful deletion), so their namespace can go.
#[derive(Default)]
struct Cleanup {
    delete: Vec<String>,
    unfinalize: Vec<String>,
    force: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (delete, unfinalize) = (self.delete.clone(), self.unfinalize.clone());
        let force = self.force.clone();
        cleanup_in_background(move |client| async move {
            for path in unfinalize {
                let request = http::Request::builder()
                    .method("PATCH")
                    .uri(path)
                    .header("Content-Type", "application/merge-patch+json")
                    .body(br#"{"metadata":{"finalizers":null}}"#.to_vec());
                if let Ok(request) = request {
                    let _ = client.request_text(request).await;
                }
            }
            let now = br#"{"gracePeriodSeconds":0}"#;
            let forced = force.into_iter().map(|path| (path, now.to_vec()));
            let deleted = delete.into_iter().map(|path| (path, Vec::new()));
            for (path, body) in forced.chain(deleted) {
                let request = http::Request::builder()
                    .method("DELETE")
                    .uri(path)
                    .header("Content-Type", "application/json")
                    .body(body);
                if let Ok(request) = request {
                    let _ = client.request_text(request).await;
                }
            }
        });
    }
}

fn ago(seconds: i64) -> String {
    let t = Timestamp::now() - jiff::SignedDuration::from_secs(seconds);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A `metav1.MicroTime`, `millis` milliseconds ago.
fn micro_ago(millis: i64) -> String {
    let t = Timestamp::now() - jiff::SignedDuration::from_millis(millis);
    t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": format!("example.com/{name}:1")})
}

fn template(labels: Value) -> Value {
    json!({"metadata": {"labels": labels},
           "spec": {"containers": [container("app"), container("side")]}})
}

/// A container status: `name` with `state` (and `extra` fields such as `lastState`).
fn container_status(name: &str, ready: bool, restarts: i64, state: Value, extra: Value) -> Value {
    let mut status = json!({"name": name, "image": format!("example.com/{name}:1"), "imageID": "",
        "ready": ready, "restartCount": restarts, "state": state});
    if let (Value::Object(status), Value::Object(extra)) = (&mut status, extra) {
        status.extend(extra);
    }
    status
}

fn terminated(exit_code: i64, reason: Option<&str>, finished: i64) -> Value {
    let mut state = json!({"terminated": {"exitCode": exit_code, "startedAt": ago(finished + 10),
        "finishedAt": ago(finished)}});
    if let Some(reason) = reason {
        state["terminated"]["reason"] = json!(reason);
    }
    state
}

/// A container killed by `signal` without a reason.
fn killed_by(signal: i64) -> Value {
    let mut state = terminated(128 + signal, None, 20);
    state["terminated"]["signal"] = json!(signal);
    state
}

/// Pods whose statuses exercise `printPod`'s rules (the status subresource takes whatever
/// status we write: no kubelet runs here). Each is created, given its status, and deleted
/// if it is to be shown deleting (a finalizer keeps it).
async fn make_pods(client: &Client, ns: &str, node: &str, cleanup: &mut Cleanup) {
    let running = |since: i64| json!({"running": {"startedAt": ago(since)}});
    let waiting = |reason: &str| json!({"waiting": {"reason": reason}});
    let none = json!({});
    let last = |exit: i64, finished: i64| json!({"lastState": terminated(exit, None, finished)});
    let bound = |containers: &[&str]| {
        json!({"nodeName": node,
        "containers": containers.iter().map(|c| container(c)).collect::<Vec<_>>()})
    };
    let sidecar = json!({"name": "sidecar", "image": "x", "restartPolicy": "Always"});
    let mut with_init = bound(&["a"]);
    with_init["initContainers"] = json!([container("i1"), container("i2"), sidecar]);
    let mut gates = json!({"containers": [container("a")],
        "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]});
    let mut never = bound(&["a"]);
    never["restartPolicy"] = json!("Never");
    // (name, spec, status, deleted)
    let pods = [
        (
            "pending",
            json!({"containers": [container("a")]}),
            None,
            false,
        ),
        (
            "crashing",
            bound(&["a", "b"]),
            Some(json!({
            "phase": "Running", "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                container_status("a", true, 3, running(200), last(1, 300)),
                container_status("b", false, 7, waiting("CrashLoopBackOff"), last(2, 8000))]})),
            false,
        ),
        (
            "initializing",
            with_init.clone(),
            Some(json!({"phase": "Pending",
            "initContainerStatuses": [
                container_status("i1", false, 0, terminated(0, Some("Completed"), 50), none.clone()),
                container_status("i2", false, 1, running(40), last(1, 45)),
                container_status("sidecar", false, 0, waiting("PodInitializing"), none.clone())],
            "containerStatuses": [container_status("a", false, 0, waiting("PodInitializing"), none.clone())]})),
            false,
        ),
        (
            "init-failed",
            with_init.clone(),
            Some(json!({"phase": "Pending",
            "initContainerStatuses": [container_status("i1", false, 2, terminated(2, None, 5), last(2, 30))]})),
            false,
        ),
        (
            "init-crashing",
            with_init,
            Some(json!({"phase": "Pending",
            "conditions": [{"type": "Initialized", "status": "False"}],
            "initContainerStatuses": [container_status("i1", false, 4, waiting("CrashLoopBackOff"), last(1, 90))]})),
            false,
        ),
        (
            "gated",
            gates.take(),
            Some(json!({"phase": "Pending", "nominatedNodeName": node,
            "conditions": [{"type": "example.com/lb", "status": "True"},
                           {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]})),
            false,
        ),
        (
            "completed",
            never.clone(),
            Some(json!({"phase": "Succeeded", "containerStatuses": [
            container_status("a", false, 0, terminated(0, Some("Completed"), 20), none.clone())]})),
            false,
        ),
        (
            "killed",
            never,
            Some(json!({"phase": "Failed", "containerStatuses": [
            container_status("a", false, 0, killed_by(9), none.clone())]})),
            false,
        ),
        (
            "half-done",
            bound(&["a", "b"]),
            Some(json!({"phase": "Running", "containerStatuses": [
            container_status("a", true, 0, running(100), none.clone()),
            container_status("b", false, 0, terminated(0, Some("Completed"), 20), none.clone())]})),
            false,
        ),
        (
            "half-ready",
            bound(&["a", "b"]),
            Some(json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": [
            container_status("a", false, 0, terminated(0, Some("Completed"), 20), none.clone()),
            container_status("b", true, 0, running(100), none.clone())]})),
            false,
        ),
        (
            "terminating",
            bound(&["a"]),
            Some(json!({"phase": "Running", "containerStatuses": [
            container_status("a", true, 0, running(30), none.clone())]})),
            true,
        ),
        (
            "lost",
            bound(&["a"]),
            Some(json!({"phase": "Running", "reason": "NodeLost"})),
            true,
        ),
    ];
    for (name, spec, status, deleted) in pods {
        let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
        let mut pod = json!({"metadata": {"name": name}, "spec": spec});
        if deleted {
            pod["metadata"]["finalizers"] = json!(["example.com/hold"]);
            cleanup.unfinalize.push(path.clone());
        }
        if pod["spec"]["nodeName"].is_string() {
            cleanup.force.push(path.clone());
        }
        create(client, CORE, Some(ns), "pods", pod).await;
        if let Some(status) = status {
            patch_status(client, &path, status).await;
        }
        if deleted {
            send(client, "DELETE", &path, "application/json", &json!({})).await;
        }
    }
}

/// Creates each of `objects` (`api`, plural, body) in `namespace`, or cluster-wide (then
/// deleted by `cleanup`).
async fn create_all(
    client: &Client,
    namespace: Option<&str>,
    objects: Vec<(&str, &str, Value)>,
    cleanup: &mut Cleanup,
) {
    for (api, plural, body) in objects {
        let created = create(client, api, namespace, plural, body).await;
        if namespace.is_none() {
            let name = created["metadata"]["name"].as_str().expect("a name");
            cleanup.delete.push(format!("/{api}/{plural}/{name}"));
        }
    }
}

/// One or more objects of every built-in kind, in `ns` or named after it.
async fn make_objects(client: &Client, ns: &str, cleanup: &mut Cleanup) {
    let node = format!("{ns}-node");
    let class = format!("{ns}-class");
    let fast = format!("{ns}-fast");
    let pv = format!("{ns}-pv");
    let reader = format!("{ns}-reader");
    let subjects = json!([{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "robot", "namespace": ns}]);
    create_all(client, None, vec![
        (CORE, "nodes", json!({"metadata": {"name": node, "labels": {
            "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": true}})),
        (NETWORKING, "ingressclasses", json!({"metadata": {"name": class}, "spec": {
            "controller": "example.com/ingress", "parameters": {"apiGroup": "example.com", "kind": "Params",
            "name": "p", "scope": "Namespace", "namespace": ns}}})),
        (STORAGE, "storageclasses", json!({"metadata": {"name": fast,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
            "provisioner": "example.com/fast", "reclaimPolicy": "Retain", "allowVolumeExpansion": true,
            "volumeBindingMode": "WaitForFirstConsumer"})),
        // Not a default class: it would be every concurrent test's PVCs' class (the
        // DefaultStorageClass admission); " (default)" is left to the unit tests.
        (STORAGE, "storageclasses", json!({"metadata": {"name": format!("{ns}-slow"),
            "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "maybe"}},
            "provisioner": "example.com/slow"})),
        (CORE, "persistentvolumes", json!({"metadata": {"name": pv}, "spec": {
            "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": fast, "volumeMode": "Filesystem",
            "hostPath": {"path": "/tmp/x"}, "claimRef": {"namespace": ns, "name": "bound"}}})),
        (CORE, "persistentvolumes", json!({"metadata": {"name": format!("{ns}-free"),
            "annotations": {"volume.beta.kubernetes.io/storage-class": "legacy"}}, "spec": {
            "capacity": {"storage": "1500Mi"}, "accessModes": ["ReadWriteMany"], "hostPath": {"path": "/tmp/y"}}})),
        (RBAC, "clusterroles", json!({"metadata": {"name": reader},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]})),
        (RBAC, "clusterrolebindings", json!({"metadata": {"name": reader},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
            "subjects": subjects})),
        (SCHEDULING, "priorityclasses", json!({"metadata": {"name": format!("{ns}-high")},
            "value": 100000, "preemptionPolicy": "Never", "description": "test"})),
        (APIEXTENSIONS, "customresourcedefinitions",
            widget_crd(&format!("{ns}.example.com"), "gadgets", "Gadget", None)),
    ], cleanup).await;
    patch_status(client, &format!("/api/v1/nodes/{node}"), json!({
        "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": ago(5), "lastTransitionTime": ago(100),
                        "reason": "KubeletReady", "message": "ready"}],
        "addresses": [{"type": "InternalIP", "address": "10.9.0.1"}, {"type": "Hostname", "address": node}],
        "nodeInfo": {"kubeletVersion": "v1.35.4", "osImage": "Test OS", "kernelVersion": "6.1", "containerRuntimeVersion": "",
                     "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": "", "operatingSystem": "linux",
                     "architecture": "amd64"}})).await;

    make_pods(client, ns, &node, cleanup).await;

    let mut ds_template = template(json!({"app": "agent"}));
    ds_template["spec"]["nodeSelector"] = json!({"disk": "ssd", "arch": "amd64"});
    let job_template =
        json!({"spec": {"restartPolicy": "Never", "containers": [container("work")]}});
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let rule = |host: &str| json!({"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}});
    create_all(client, Some(ns), vec![
        (APPS, "deployments", json!({"metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]}]},
            "template": template(json!({"app": "web", "tier": "a"}))}})),
        (APPS, "statefulsets", json!({"metadata": {"name": "db"}, "spec": {
            "replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": template(json!({"app": "db"}))}})),
        (APPS, "daemonsets", json!({"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}}, "template": ds_template}})),
        (APPS, "replicasets", json!({"metadata": {"name": "lone"}, "spec": {
            "replicas": 0, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"}]},
            "template": template(json!({"app": "lone"}))}})),
        (BATCH, "jobs", json!({"metadata": {"name": "batch"}, "spec": {
            "completions": 3, "parallelism": 2, "template": job_template}})),
        (BATCH, "jobs", json!({"metadata": {"name": "paused"}, "spec": {
            "suspend": true, "parallelism": 4, "completions": null, "template": job_template}})),
        (BATCH, "cronjobs", json!({"metadata": {"name": "nightly"}, "spec": {
            "schedule": "0 3 * * *", "timeZone": "Europe/Paris", "suspend": true,
            "jobTemplate": {"spec": {"template": job_template}}}})),
        (BATCH, "cronjobs", json!({"metadata": {"name": "often"}, "spec": {
            "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}})),
        (AUTOSCALING, "horizontalpodautoscalers", json!({"metadata": {"name": "web"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}}]}})),
        (AUTOSCALING, "horizontalpodautoscalers", json!({"metadata": {"name": "db"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}, "maxReplicas": 3, "metrics": [
                {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app",
                 "target": {"type": "AverageValue", "averageValue": "512Mi"}}}]}})),
        (POLICY, "poddisruptionbudgets", json!({"metadata": {"name": "half"}, "spec": {
            "minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}})),
        (POLICY, "poddisruptionbudgets", json!({"metadata": {"name": "one"}, "spec": {
            "maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}})),
        (CORE, "services", json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web", "tier": "a"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]}})),
        (CORE, "services", json!({"metadata": {"name": "node"}, "spec": {
            "type": "NodePort", "externalIPs": ["192.0.2.10"], "ports": [{"port": 443}]}})),
        (CORE, "services", json!({"metadata": {"name": "lb"}, "spec": {
            "type": "LoadBalancer", "externalIPs": ["192.0.2.20"], "ports": [{"port": 80}]}})),
        (CORE, "services", json!({"metadata": {"name": "lb-pending"}, "spec": {
            "type": "LoadBalancer", "ports": [{"port": 80}]}})),
        (CORE, "services", json!({"metadata": {"name": "ext"}, "spec": {
            "type": "ExternalName", "externalName": "db.example.com"}})),
        (CORE, "services", json!({"metadata": {"name": "headless"}, "spec": {
            "clusterIP": "None", "selector": {"app": "db"}}})),
        (DISCOVERY, "endpointslices", json!({"metadata": {"name": "manual"}, "addressType": "IPv4",
            "ports": [{"port": 80, "name": "http"}, {"name": "named"}, {}, {"name": "nine", "port": 9}],
            "endpoints": [{"addresses": ["10.2.0.1", "10.2.0.2"]}, {"addresses": ["10.2.0.3"]}, {"addresses": ["10.2.0.4"]}]})),
        (DISCOVERY, "endpointslices", json!({"metadata": {"name": "empty"}, "addressType": "FQDN"})),
        (CORE, "endpoints", json!({"metadata": {"name": "manual-ep"}, "subsets": [
            {"addresses": [{"ip": "10.3.0.1"}, {"ip": "10.3.0.2"}], "notReadyAddresses": [{"ip": "10.3.0.9"}],
             "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
            {"addresses": [{"ip": "10.3.0.3"}], "ports": [{"port": 8080}]}]})),
        (CORE, "endpoints", json!({"metadata": {"name": "headless-ep"}, "subsets": [
            {"addresses": [{"ip": "10.3.1.1"}]}, {"addresses": [{"ip": "fd00::31"}], "ports": [{"port": 53}]}]})),
        (CORE, "endpoints", json!({"metadata": {"name": "bare-ep"}})),
        (NETWORKING, "ingresses", json!({"metadata": {"name": "many"}, "spec": {
            "ingressClassName": class, "tls": [{"hosts": ["a.example.com"]}],
            "rules": [rule("a.example.com"), {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}},
                      rule("c.example.com"), rule("d.example.com"), rule("e.example.com")]}})),
        (NETWORKING, "ingresses", json!({"metadata": {"name": "default"}, "spec": {"defaultBackend": backend}})),
        (NETWORKING, "networkpolicies", json!({"metadata": {"name": "db"}, "spec": {"podSelector": {
            "matchLabels": {"app": "db"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}}})),
        (NETWORKING, "networkpolicies", json!({"metadata": {"name": "all"}, "spec": {"podSelector": {}}})),
        (CORE, "configmaps", json!({"metadata": {"name": "settings"},
            "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AAE="}})),
        (CORE, "secrets", json!({"metadata": {"name": "creds"}, "type": "Opaque",
            "data": {"user": "YQ==", "password": "Yg=="}})),
        (CORE, "secrets", json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": "x", "tls.key": "y"}})),
        (CORE, "serviceaccounts", json!({"metadata": {"name": "robot"}})),
        (CORE, "persistentvolumeclaims", json!({"metadata": {"name": "bound"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": fast, "volumeName": pv}})),
        (CORE, "persistentvolumeclaims", json!({"metadata": {"name": "waiting"}, "spec": {
            "accessModes": ["ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Block"}})),
        (RBAC, "roles", json!({"metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})),
        (RBAC, "rolebindings", json!({"metadata": {"name": "readers"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}, "subjects": subjects})),
        (CORE, "events", json!({"metadata": {"name": "pulled"}, "type": "Normal", "reason": "Pulled",
            "message": "  Pulled the image \n", "involvedObject": {"kind": "Pod", "name": "crashing", "namespace": ns,
            "fieldPath": "spec.containers{a}"}, "source": {"component": "kubelet", "host": node},
            "firstTimestamp": ago(4000), "lastTimestamp": ago(70), "count": 5})),
        (CORE, "events", json!({"metadata": {"name": "series"}, "type": "Warning", "reason": "BackOff",
            "message": "Back-off", "involvedObject": {"kind": "Pod", "name": "crashing", "namespace": ns},
            "eventTime": micro_ago(600_000), "reportingComponent": "example.com/controller",
            "reportingInstance": "instance-1", "action": "Restart",
            "series": {"count": 9, "lastObservedTime": micro_ago(2500)}})),
        (CORE, "events", json!({"metadata": {"name": "bare"}, "reason": "Checked", "message": "x",
            "involvedObject": {"kind": "ConfigMap", "namespace": ns}})),
        (COORDINATION, "leases", json!({"metadata": {"name": "held"},
            "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40}})),
        (COORDINATION, "leases", json!({"metadata": {"name": "free"}, "spec": {}})),
        (CORE, "resourcequotas", json!({"metadata": {"name": "quota"}, "spec": {"hard": {
            "pods": "10", "limits.cpu": "4", "limits.memory": "8Gi", "requests.cpu": "2", "count/deployments.apps": "3"}}})),
        (CORE, "limitranges", json!({"metadata": {"name": "limits"}, "spec": {"limits": [
            {"type": "Container", "default": {"cpu": "500m"}}]}})),
    ], cleanup).await;

    let object =
        |api: &str, plural: &str, name: &str| format!("/{api}/namespaces/{ns}/{plural}/{name}");
    patch_status(
        client,
        &object(BATCH, "cronjobs", "often"),
        json!({"lastScheduleTime": ago(400)}),
    )
    .await;
    patch_status(
        client,
        &object(CORE, "services", "lb"),
        json!({"loadBalancer": {"ingress": [
        {"hostname": "lb.example.com"}, {"ip": "203.0.113.7"}]}}),
    )
    .await;
    // The HPA controller may rewrite it (it finds no metrics), but until then it prints.
    patch_status(client, &object(AUTOSCALING, "horizontalpodautoscalers", "web"), json!({
        "currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55, "averageValue": "120m"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "7500m"}}}]})).await;
    patch_status(client, &object(NETWORKING, "ingresses", "many"),
        json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "in.example.com"}]}})).await;
    patch_status(client, &object(CORE, "persistentvolumeclaims", "bound"), json!({
        "phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"]})).await;
}

#[tokio::test]
async fn every_builtin_kind_prints_as_the_apiserver_does() {
    let ns = TestNamespace::new("printers").await;
    let mut cleanup = Cleanup::default();
    let client = ns.client.clone();
    make_objects(&client, &ns.name, &mut cleanup).await;

    for kind in KINDS {
        let namespace = kind.namespaced.then_some(ns.name.as_str());
        let path = collection(kind.api, namespace, kind.plural);
        let rows = compare(&client, &path, &(kind.printer)()).await;
        assert!(rows > 0, "{path}: no objects to compare");
    }
}

fn widget_crd(group: &str, plural: &str, kind: &str, columns: Option<Value>) -> Value {
    let mut version = json!({"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
    if let Some(columns) = columns {
        version["additionalPrinterColumns"] = columns;
    }
    json!({"metadata": {"name": format!("{plural}.{group}")}, "spec": {
        "group": group, "scope": "Namespaced", "versions": [version],
        "names": {"plural": plural, "singular": plural.trim_end_matches('s'),
                  "kind": kind, "listKind": format!("{kind}List")}}})
}

fn printer_columns() -> Value {
    json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
        {"name": "On", "type": "boolean", "jsonPath": ".spec.on", "description": "Whether it is on"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Since", "type": "date", "jsonPath": ".status.conditions[0].lastTransitionTime"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
        {"name": "Tags", "type": "string", "jsonPath": ".spec.tags[*]"},
        {"name": "Last", "type": "string", "jsonPath": ".spec.tags[-1:]"},
        {"name": "Missing", "type": "string", "jsonPath": ".spec.nope.deeper"},
        {"name": "OutOfRange", "type": "string", "jsonPath": ".spec.tags[7]"},
        {"name": "Mismatch", "type": "string", "jsonPath": ".status.conditions[?(@.n==\"1\")].type"},
        {"name": "Big", "type": "string", "jsonPath": ".spec.big", "format": "float"},
        {"name": "BigNumber", "type": "number", "jsonPath": ".spec.big"},
        {"name": "Truncated", "type": "integer", "jsonPath": ".spec.ratio"},
        {"name": "Nothing", "type": "string", "jsonPath": ".spec.nothing"},
        {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ])
}

/// Until the CRD is established and its objects are served: the apiserver serves them by
/// what its own watch of CRDs shows, which may be a moment behind the condition read here
/// (a create is a 404 until then).
async fn wait_established(client: &Client, name: &str) {
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    eventually(SOON, "the CRD established and served", || async {
        let request = http::Request::builder().uri(&path).body(Vec::new()).ok()?;
        let crd: Value = serde_json::from_str(&client.request_text(request).await.ok()?).ok()?;
        crd["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
            .then_some(())?;
        let spec = &crd["spec"];
        let objects = format!(
            "/apis/{}/{}/{}",
            spec["group"].as_str()?,
            spec["versions"][0]["name"].as_str()?,
            spec["names"]["plural"].as_str()?
        );
        let request = http::Request::builder()
            .uri(objects)
            .body(Vec::new())
            .ok()?;
        client.request_text(request).await.ok().map(drop)
    })
    .await;
}

#[tokio::test]
async fn custom_resources_print_as_the_apiserver_does() {
    let ns = TestNamespace::new("printers-crd").await;
    let client = ns.client.clone();
    let group = format!("{}.example.com", ns.name);
    let mut cleanup = Cleanup::default();
    for (plural, kind, columns) in [
        ("widgets", "Widget", Some(printer_columns())),
        ("plains", "Plain", None),
    ] {
        let crd = create(
            &client,
            APIEXTENSIONS,
            None,
            "customresourcedefinitions",
            widget_crd(&group, plural, kind, columns),
        )
        .await;
        let name = crd["metadata"]["name"]
            .as_str()
            .expect("a CRD name")
            .to_owned();
        cleanup
            .delete
            .push(format!("/{APIEXTENSIONS}/customresourcedefinitions/{name}"));
        wait_established(&client, &name).await;
    }

    let api = format!("apis/{group}/v1");
    let object = |kind: &str, name: &str, spec: Value, status: Value| {
        json!({"apiVersion": format!("{group}/v1"),
        "kind": kind, "metadata": {"name": name}, "spec": spec, "status": status})
    };
    create(&client, &api, Some(&ns.name), "widgets", object("Widget", "full", json!({
        "size": 3, "ratio": 2.75, "on": true, "color": {"r": 255, "name": "<red & hot>"},
        "tags": ["a", "b", "c"], "big": 1234567.5, "nothing": null}),
        json!({"conditions": [{"type": "Progressing", "status": "True", "n": 1, "lastTransitionTime": ago(3700)},
                              {"type": "Ready", "status": "False", "n": 2},
                {"type": "Late", "status": "True", "n": "1"}]}))).await;
    create(
        &client,
        &api,
        Some(&ns.name),
        "widgets",
        object("Widget", "empty", json!({}), json!({})),
    )
    .await;
    create(&client, &api, Some(&ns.name), "widgets", object("Widget", "odd", json!({
        "size": "three", "ratio": -1.5, "on": "yes", "tags": [], "big": 100000}),
        json!({"conditions": [{"type": "Ready", "status": "True", "n": "1", "lastTransitionTime": "yesterday"}]}))).await;
    create(
        &client,
        &api,
        Some(&ns.name),
        "plains",
        object("Plain", "plain", json!({}), json!({})),
    )
    .await;

    let custom = Printer::custom(Some(&printer_columns())).expect("the columns parse");
    let rows = compare(
        &client,
        &collection(&api, Some(&ns.name), "widgets"),
        &custom,
    )
    .await;
    assert_eq!(rows, 3);
    let plain = Printer::custom(None).expect("no columns");
    let rows = compare(&client, &collection(&api, Some(&ns.name), "plains"), &plain).await;
    assert_eq!(rows, 1);
}
