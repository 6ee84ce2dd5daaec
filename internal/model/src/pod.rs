//! Pods: the original client's DTO and kubectl's columns, the fields the apiserver selects
//! Pods by, and the object itself, kept compressed for `/output`.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

use crate::{
    Kind, Labels, ObjectKey, Owner, Record, Selectable, Typed, metadata_field, record_fields,
    rfc3339, to_json,
};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodStatusDto {
    pub phase: String,
    pub reason: String,
    pub message: String,
}

/// The Pod as the API shows it; `deployment` is resolved at read time through ownerReferences.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodDto {
    pub name: String,
    pub namespace: String,
    pub images: Vec<String>,
    pub node_name: String,
    pub node_ip: String,
    pub pod_ip: String,
    pub create_time: Option<String>,
    pub status: PodStatusDto,
    pub labels: Labels,
    pub uid: String,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    /// kubectl's READY column: ready/total containers.
    pub ready: String,
    /// kubectl's STATUS column (CrashLoopBackOff, Init:1/2, Terminating, ...).
    pub status_text: String,
    /// kubectl's RESTARTS column.
    pub restarts: u32,
}

/// The Pod fields the apiserver can select on, besides name and namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSelectableFields {
    pub node_name: String,
    pub phase: String,
    pub pod_ip: String,
    pub restart_policy: String,
    pub scheduler_name: String,
    pub service_account_name: String,
    pub host_network: bool,
    pub nominated_node_name: String,
}

/// What reads need of a Pod: its answer, already serialized, the fields selectors, sorting
/// and relations look at, and the object itself, compressed, for `/output`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRecord {
    pub key: ObjectKey,
    pub labels: Labels,
    pub creation_timestamp: Option<String>,
    pub resource_version: String,
    pub owner: Option<Owner>,
    pub fields: PodSelectableFields,
    /// The [`PodDto`] as JSON, serialized once per change (see [`DeploymentRecord::json`]);
    /// the `deployment` of the answer is resolved and appended at read time.
    pub json: Box<str>,
    /// The object as the apiserver sent it, without managedFields, as LZ4-compressed compact
    /// JSON: what the Kubernetes API serves. Kept for every pod, so it is stored at a
    /// fraction of its size (see [`crate::Dictionary`]); [`Record::raw_json`] gives it back.
    pub raw: Bytes,
}

record_fields!(PodRecord);

impl Record for PodRecord {
    type Object = Pod;
    fn from_object(object: &Pod) -> Arc<Self> {
        PodRecord::from_pod(object)
    }
    record_fields!();
}

impl Typed for PodRecord {
    const KIND: Kind = Kind::Pod;
    /// The apiserver's field selectors for Pods.
    const FIELDS: &'static [&'static str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
        // Accepted by the apiserver too: a legacy alias of spec.nodeName, and a label whose value
        // the apiserver always reads as "" (it is not in a Pod's field set).
        "spec.host",
        "status.podIPs",
    ];
    type Dto = PodDto;
    fn with_raw(object: &Pod, raw: bytes::Bytes) -> Arc<Self> {
        PodRecord::built(object, raw)
    }
}

impl Selectable for PodRecord {
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn field(&self, path: &str) -> Option<Cow<'_, str>> {
        let f = &self.fields;
        let value: &str = match path {
            "spec.nodeName" | "spec.host" => &f.node_name,
            "spec.restartPolicy" => &f.restart_policy,
            "spec.schedulerName" => &f.scheduler_name,
            "spec.serviceAccountName" => &f.service_account_name,
            "spec.hostNetwork" => {
                return Some(Cow::Borrowed(if f.host_network { "true" } else { "false" }));
            }
            "status.phase" => &f.phase,
            "status.podIP" => &f.pod_ip,
            "status.nominatedNodeName" => &f.nominated_node_name,
            "status.podIPs" => "",
            _ => return metadata_field(&self.key, path),
        };
        Some(Cow::Borrowed(value))
    }
}

impl PodStatusDto {
    /// The original k8sailor's meaning, which its web client relies on: the reason and message
    /// of the first container that is waiting without being ready (ImagePullBackOff,
    /// CrashLoopBackOff, ...), init containers first, else the Pod's own. The client asks for
    /// a Pod's event only when `reason` is set, and the Pod-level fields are empty in exactly
    /// those common cases.
    fn of(status: &k8s_openapi::api::core::v1::PodStatus) -> PodStatusDto {
        let waiting = status
            .init_container_statuses
            .iter()
            .chain(status.container_statuses.iter())
            .flatten()
            .filter(|c| !c.ready)
            .find_map(|c| c.state.as_ref()?.waiting.as_ref());
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let (reason, message) = match waiting {
            Some(w) => (text(&w.reason), text(&w.message)),
            None => (text(&status.reason), text(&status.message)),
        };
        PodStatusDto {
            phase: text(&status.phase),
            reason,
            message,
        }
    }
}

impl PodRecord {
    pub fn from_pod(pod: &Pod) -> Arc<Self> {
        Self::with_raw(pod, Self::resource().keep(pod))
    }

    /// The record of `pod`, keeping `raw` as its whole object.
    fn built(pod: &Pod, raw: bytes::Bytes) -> Arc<Self> {
        let meta = &pod.metadata;
        // Only the strings kept are cloned, never the whole spec or status.
        let no_status = Default::default();
        let status: &k8s_openapi::api::core::v1::PodStatus =
            pod.status.as_ref().unwrap_or(&no_status);
        let text = |s: &Option<String>| s.clone().unwrap_or_default();
        let columns = kubectl_status::pod_columns(pod);
        let dto = PodDto {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            images: pod
                .spec
                .as_ref()
                .map(|s| {
                    s.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            node_ip: text(&status.host_ip),
            pod_ip: text(&status.pod_ip),
            create_time: rfc3339(&meta.creation_timestamp),
            status: PodStatusDto::of(status),
            labels: meta.labels.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            creation_timestamp: rfc3339(&meta.creation_timestamp),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            ready: columns.ready(),
            status_text: columns.status,
            restarts: columns.restarts,
        };
        let no_spec = Default::default();
        let spec: &k8s_openapi::api::core::v1::PodSpec = pod.spec.as_ref().unwrap_or(&no_spec);
        let fields = PodSelectableFields {
            node_name: dto.node_name.clone(),
            phase: dto.status.phase.clone(),
            pod_ip: dto.pod_ip.clone(),
            restart_policy: text(&spec.restart_policy),
            scheduler_name: text(&spec.scheduler_name),
            service_account_name: text(&spec.service_account_name),
            host_network: spec.host_network.unwrap_or(false),
            nominated_node_name: text(&status.nominated_node_name),
        };
        Arc::new(PodRecord {
            key: ObjectKey::of(meta),
            owner: Owner::controller_of(meta),
            json: to_json(&dto),
            labels: dto.labels,
            creation_timestamp: dto.creation_timestamp,
            resource_version: dto.resource_version,
            fields,
            raw,
        })
    }
}

/// A Pod decoded only as far as its [`PodRecord`] reads it: its metadata and status whole,
/// and of its spec what the record and kubectl's columns read (each container's name, image
/// and restartPolicy; the node, policies and names the field selectors ask). The rest of the
/// spec (volumes, each container's env, probes, resources) is skipped as it is read: more
/// than half of a Pod's decoding CPU, which an informer spends on every Pod it lists. The
/// record keeps the object's JSON as it was sent, so nothing skipped is lost to an answer;
/// `Into<Pod>` is free and gives a Pod whose skipped fields are empty, for its record only.
/// A field the record comes to read must be named here too: the tests build each record from
/// the whole Pod and from this one and compare them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedPod(pub Pod);

impl From<RecordedPod> for Pod {
    fn from(pod: RecordedPod) -> Pod {
        pod.0
    }
}

impl k8s_openapi::Resource for RecordedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for RecordedPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The spec's fields [`PodRecord::built`] and `kubectl_status::pod_columns` read; serde skips
/// the members a struct does not name without building anything from them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordedSpec {
    containers: Option<Vec<RecordedContainer>>,
    init_containers: Option<Vec<RecordedContainer>>,
    node_name: Option<String>,
    restart_policy: Option<String>,
    scheduler_name: Option<String>,
    service_account_name: Option<String>,
    host_network: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordedContainer {
    name: Option<String>,
    image: Option<String>,
    restart_policy: Option<String>,
}

impl From<RecordedContainer> for Container {
    fn from(c: RecordedContainer) -> Container {
        Container {
            // Missing or null, as k8s-openapi's own decoding leaves it.
            name: c.name.unwrap_or_default(),
            image: c.image,
            restart_policy: c.restart_policy,
            ..Container::default()
        }
    }
}

impl From<RecordedSpec> for PodSpec {
    fn from(s: RecordedSpec) -> PodSpec {
        let containers = |c: Vec<RecordedContainer>| c.into_iter().map(Container::from).collect();
        PodSpec {
            // Missing or null, as k8s-openapi's own decoding leaves it.
            containers: s.containers.map(containers).unwrap_or_default(),
            init_containers: s.init_containers.map(containers),
            node_name: s.node_name,
            restart_policy: s.restart_policy,
            scheduler_name: s.scheduler_name,
            service_account_name: s.service_account_name,
            host_network: s.host_network,
            ..PodSpec::default()
        }
    }
}

impl<'de> Deserialize<'de> for RecordedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            metadata: Option<ObjectMeta>,
            spec: Option<RecordedSpec>,
            status: Option<PodStatus>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(RecordedPod(Pod {
            metadata: wire.metadata.unwrap_or_default(),
            spec: wire.spec.map(PodSpec::from),
            status: wire.status,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_pod;

    #[test]
    fn pod_projection_keeps_raw_without_managed_fields_and_finds_controller() {
        let mut pod = mk_pod("ns", "web-1", Some(("web-rs", "rs1")), &[("app", "web")]);
        confk8s::strip_noise(&mut pod);
        let r = PodRecord::from_pod(&pod);
        let json: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        assert_eq!(json["nodeName"], "node-1");
        assert_eq!(json["nodeIp"], "10.1.0.1");
        assert_eq!(json["podIp"], "10.2.0.1");
        assert_eq!(json["createTime"], "2026-11-01T10:00:00Z");
        assert_eq!(json["status"]["phase"], "Running");
        assert_eq!(json["ready"], "1/1");
        assert_eq!(json["statusText"], "Running");
        assert_eq!(json["restarts"], 2);
        assert_eq!(r.owner.as_ref().map(|o| o.uid.as_str()), Some("rs1"));
        assert_eq!(r.field("spec.nodeName").as_deref(), Some("node-1"));
        assert_eq!(r.field("spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(r.field("status.phase").as_deref(), Some("Running"));
        assert_eq!(r.field("spec.containers"), None);
        for field in PodRecord::FIELDS {
            assert!(r.field(field).is_some(), "{field} is selectable");
        }
        let json = r.raw_json().unwrap();
        assert!(
            r.raw.len() < json.len(),
            "stored compressed: {} of {} bytes",
            r.raw.len(),
            json.len()
        );
        let raw: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(raw["kind"], "Pod");
        assert_eq!(raw["metadata"]["name"], "web-1");
    }

    #[test]
    fn a_pods_reason_is_its_first_waiting_containers_then_its_own() {
        // The status alone: a whole record would make these odd pods the compression
        // dictionary for the other tests.
        let status_of = |status: serde_json::Value| {
            serde_json::to_value(PodStatusDto::of(&serde_json::from_value(status).unwrap()))
                .unwrap()
        };
        let waiting = |name: &str, reason: &str| {
            serde_json::json!({"name": name, "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": reason, "message": format!("{name}: {reason}")}}})
        };
        let running = serde_json::json!({"name": "ok", "image": "x", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {}}});
        let s = status_of(serde_json::json!({"phase": "Pending",
            "containerStatuses": [running, waiting("app", "ImagePullBackOff"), waiting("side", "ErrImagePull")]}));
        assert_eq!(s["reason"], "ImagePullBackOff");
        assert_eq!(s["message"], "app: ImagePullBackOff");
        let s = status_of(serde_json::json!({"phase": "Pending",
            "initContainerStatuses": [waiting("init", "CrashLoopBackOff")],
            "containerStatuses": [waiting("app", "PodInitializing")]}));
        assert_eq!(
            s["reason"], "CrashLoopBackOff",
            "the init container holds the Pod up"
        );
        let s = status_of(serde_json::json!({"phase": "Failed", "reason": "Evicted",
            "message": "low on memory", "containerStatuses": [running]}));
        assert_eq!(
            (s["reason"].as_str(), s["message"].as_str()),
            (Some("Evicted"), Some("low on memory"))
        );
        let s = status_of(serde_json::json!({"phase": "Running", "containerStatuses": [running]}));
        assert_eq!(
            (s["reason"].as_str(), s["message"].as_str()),
            (Some(""), Some(""))
        );
    }

    #[test]
    fn every_pod_comes_back_from_its_compressed_json() {
        let pods = [
            mk_pod("ns", "a", Some(("web-rs", "rs1")), &[("app", "web")]),
            mk_pod("other", "b", None, &[("tier", "db"), ("x", "y")]),
            mk_pod("ns", "c", Some(("web-rs", "rs1")), &[("app", "web")]),
        ];
        for pod in &pods {
            let r = PodRecord::from_pod(pod);
            let back: Pod = serde_json::from_slice(&r.raw_json().unwrap()).unwrap();
            assert_eq!(&back, pod);
            // Whichever pod became the dictionary, one like the others compresses to far
            // less than its JSON.
            assert!(
                r.raw.len() * 3 < serde_json::to_vec(pod).unwrap().len(),
                "{}",
                r.raw.len()
            );
        }
    }

    /// A Pod as the apiserver writes one, with every part of the spec the record skips.
    fn whole_pod_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                "creationTimestamp": "2026-11-01T10:00:00Z", "deletionTimestamp": "2026-11-01T11:00:00Z",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                    "uid": "rs1", "controller": true}]},
            "spec": {
                "volumes": [{"name": "config", "configMap": {"name": "web", "defaultMode": 420}}],
                "initContainers": [
                    {"name": "setup", "image": "busybox", "command": ["sh"]},
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                     "ports": [{"containerPort": 15001, "protocol": "TCP"}]}],
                "containers": [{"name": "app", "image": "web:1", "args": ["--x"],
                    "env": [{"name": "A", "value": "1"},
                            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "128Mi"}},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
                    "livenessProbe": {"httpGet": {"path": "/livez", "port": "http"}, "periodSeconds": 20}},
                    {"name": "no-image"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "serviceAccountName": "web", "serviceAccount": "web",
                "nodeName": "node-9", "hostNetwork": true, "securityContext": {},
                "schedulerName": "default-scheduler",
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
                "affinity": {"nodeAffinity": {}}, "priority": 0, "enableServiceLinks": true},
            "status": {"phase": "Running", "hostIP": "10.1.0.9", "podIP": "10.2.0.9",
                "nominatedNodeName": "node-8",
                "conditions": [{"type": "Ready", "status": "False", "lastProbeTime": null}],
                "initContainerStatuses": [
                    {"name": "setup", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "proxy", "image": "envoy", "imageID": "", "ready": true, "restartCount": 3,
                     "started": true, "state": {"running": {"startedAt": "2026-11-01T10:00:05Z"}}}],
                "containerStatuses": [
                    {"name": "app", "image": "web:1", "imageID": "", "ready": false, "restartCount": 7,
                     "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-01T10:30:00Z"}}}]}
        })
    }

    #[test]
    fn a_recorded_pod_makes_the_record_the_whole_pod_makes() {
        let mut sidecar_pending = whole_pod_json();
        sidecar_pending["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("deletionTimestamp");
        sidecar_pending["status"]["phase"] = "Pending".into();
        let fixture = serde_json::to_value(mk_pod("ns", "a", Some(("rs", "u")), &[("x", "y")]));
        for json in [
            whole_pod_json(),
            sidecar_pending,
            fixture.unwrap(),
            serde_json::json!({}),
            serde_json::json!({"metadata": null, "spec": null, "status": null}),
            serde_json::json!({"spec": {"containers": null, "initContainers": null}}),
            serde_json::json!({"spec": {"containers": [{"name": null, "image": null}]}}),
        ] {
            let whole: Pod = serde_json::from_value(json.clone()).unwrap();
            let recorded: RecordedPod = serde_json::from_value(json.clone()).unwrap();
            // The same raw for both: a record's own compression would make this pod the
            // dictionary of the other tests.
            let raw = Bytes::from_static(b"{}");
            assert_eq!(
                PodRecord::with_raw(&Pod::from(recorded.clone()), raw.clone()),
                PodRecord::with_raw(&whole, raw),
                "{json}"
            );
            assert_eq!(recorded.0.metadata, whole.metadata);
            assert_eq!(recorded.0.status, whole.status);
        }
    }

    #[test]
    fn a_recorded_pod_skips_what_its_record_does_not_read() {
        let recorded: RecordedPod = serde_json::from_value(whole_pod_json()).unwrap();
        let spec = recorded.0.spec.unwrap();
        assert_eq!(spec.volumes, None);
        assert_eq!(spec.containers[0].env, None);
        assert_eq!(spec.containers[0].image.as_deref(), Some("web:1"));
        assert_eq!(
            spec.init_containers.unwrap()[1].restart_policy.as_deref(),
            Some("Always")
        );
    }
}
