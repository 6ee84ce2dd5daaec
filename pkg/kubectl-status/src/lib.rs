//! The READY / STATUS / RESTARTS columns of `kubectl get pods`, the
//! READY / UP-TO-DATE / AVAILABLE columns of `kubectl get deployments` and the
//! columns of `kubectl get services` and `ingresses`, computed from
//! typed `k8s-openapi` objects.
//!
//! The logic is a port of `printPod` and `printDeployment` in
//! `k8s.io/kubernetes/pkg/printers/internalversion/printers.go` as shipped
//! with Kubernetes 1.35 (the apiserver runs these printers for `kubectl get`'s
//! server-side tables). Users compare our output with what kubectl shows them,
//! so the port keeps kubectl's quirks instead of "fixing" them: an evicted pod
//! whose container statuses were synced shows the container's reason (for
//! example `ContainerStatusUnknown`) rather than `Evicted`, and a pod in a
//! terminal phase never shows `Terminating`.
//!
//! Every function is pure and total: any field may be missing and nothing
//! panics.

#![warn(missing_docs)]

mod network;

pub use network::{IngressColumns, ServiceColumns, ingress_columns, service_columns};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Container, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The pod columns of `kubectl get pods` (without NAME and AGE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodColumns {
    /// READY numerator: ready regular containers plus started-and-ready
    /// sidecars.
    pub ready_containers: u32,
    /// READY denominator: `spec.containers` plus restartable init containers
    /// (sidecars).
    pub total_containers: u32,
    /// STATUS column.
    pub status: String,
    /// RESTARTS count, summed the way kubectl sums it.
    pub restarts: u32,
    /// Most recent `lastState.terminated.finishedAt` among the containers
    /// counted in `restarts`. `None` whenever kubectl would print the bare
    /// count, i.e. when `restarts` is 0 or no finish time is known, so a
    /// caller can print `5 (2m ago)` exactly when this is `Some`.
    pub last_restart: Option<Time>,
}

impl PodColumns {
    /// The READY cell, `"ready/total"`.
    pub fn ready(&self) -> String {
        format!("{}/{}", self.ready_containers, self.total_containers)
    }
}

/// The deployment columns of `kubectl get deployments` (without NAME and AGE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentColumns {
    /// READY numerator, `status.readyReplicas`.
    pub ready_replicas: i32,
    /// READY denominator, `spec.replicas`.
    pub desired_replicas: i32,
    /// UP-TO-DATE, `status.updatedReplicas`.
    pub up_to_date: i32,
    /// AVAILABLE, `status.availableReplicas`.
    pub available: i32,
}

impl DeploymentColumns {
    /// The READY cell, `"ready/desired"`.
    pub fn ready(&self) -> String {
        format!("{}/{}", self.ready_replicas, self.desired_replicas)
    }
}

// Values kubectl compares against, spelled as in k8s.io/api and
// k8s.io/kubernetes/pkg/util/node.
const POD_SCHEDULED: &str = "PodScheduled";
const POD_READY: &str = "Ready";
const POD_INITIALIZED: &str = "Initialized";
const CONDITION_TRUE: &str = "True";
const REASON_SCHEDULING_GATED: &str = "SchedulingGated";
const REASON_POD_INITIALIZING: &str = "PodInitializing";
const REASON_NODE_LOST: &str = "NodeLost";
const REASON_COMPLETED: &str = "Completed";
const PHASE_SUCCEEDED: &str = "Succeeded";
const PHASE_FAILED: &str = "Failed";
const RESTART_POLICY_ALWAYS: &str = "Always";

/// Unix seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z). kubectl
/// starts its "latest restart" search from that value and only keeps strictly
/// later finish times, so anything at or before it never counts.
const GO_ZERO_TIME_UNIX_SECONDS: i64 = -62_135_596_800;

/// Computes the READY, STATUS and RESTARTS columns exactly as kubectl 1.35's
/// `printPod` does.
pub fn pod_columns(pod: &Pod) -> PodColumns {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let containers: &[Container] = spec.map_or(&[], |s| s.containers.as_slice());
    let init_specs: &[Container] = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let init_statuses: &[ContainerStatus] = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    let container_statuses: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let conditions: &[PodCondition] = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let pod_reason = status.and_then(|s| s.reason.as_deref()).unwrap_or_default();

    // Go ints are 64-bit; summing in i64 keeps absurd restart counts from
    // overflowing before the final clamp.
    let mut restarts: i64 = 0;
    let mut sidecar_restarts: i64 = 0;
    let mut last_restart: Option<&Time> = None;
    let mut sidecar_last_restart: Option<&Time> = None;
    let mut ready: usize = 0;
    let total = containers.len() + init_specs.iter().filter(|c| is_restartable(c)).count();

    let mut reason = if pod_reason.is_empty() {
        phase.to_owned()
    } else {
        pod_reason.to_owned()
    };

    // kubectl lets any gated PodScheduled condition win over phase and
    // status.reason; later container checks may still override it.
    if conditions
        .iter()
        .any(|c| c.type_ == POD_SCHEDULED && c.reason.as_deref() == Some(REASON_SCHEDULING_GATED))
    {
        reason = REASON_SCHEDULING_GATED.to_owned();
    }

    let mut initializing = false;
    for (i, cs) in init_statuses.iter().enumerate() {
        // Statuses are matched to specs by name, as kubectl's map does (the
        // last spec wins on duplicate names); an unmatched status is treated
        // as a plain init container.
        let restartable = init_specs
            .iter()
            .rev()
            .find(|c| c.name == cs.name)
            .is_some_and(is_restartable);
        let finished = last_finished_at(cs);

        restarts += i64::from(cs.restart_count);
        keep_latest(&mut last_restart, finished);
        if restartable {
            sidecar_restarts += i64::from(cs.restart_count);
            keep_latest(&mut sidecar_last_restart, finished);
        }

        let terminated = terminated(cs);
        if terminated.is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if restartable && cs.started == Some(true) {
            if cs.ready {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            match non_empty(t.reason.as_deref()) {
                Some(r) => format!("Init:{r}"),
                None => exit_description("Init:", t),
            }
        } else if let Some(r) = waiting_reason(cs).filter(|r| *r != REASON_POD_INITIALIZING) {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        // Only init containers up to the first unfinished one are looked at,
        // which also limits what their restarts contribute.
        break;
    }

    if !initializing || is_initialized(conditions) {
        // Once initialized, finished one-shot init containers no longer count
        // towards RESTARTS; only sidecars keep contributing.
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut has_running = false;
        // Walked in reverse so the first container that has something to say
        // determines STATUS, as kubectl does.
        for cs in container_statuses.iter().rev() {
            restarts += i64::from(cs.restart_count);
            keep_latest(&mut last_restart, last_finished_at(cs));

            if let Some(r) = waiting_reason(cs) {
                reason = r.to_owned();
            } else if let Some(t) = terminated(cs) {
                reason = match non_empty(t.reason.as_deref()) {
                    Some(r) => r.to_owned(),
                    None => exit_description("", t),
                };
            } else if cs.ready && cs.state.as_ref().is_some_and(|s| s.running.is_some()) {
                has_running = true;
                ready += 1;
            }
        }

        // A pod where some containers completed while others still serve is
        // alive, not Completed.
        if reason == REASON_COMPLETED && has_running {
            reason = if is_ready(conditions) {
                "Running".to_owned()
            } else {
                "NotReady".to_owned()
            };
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if pod_reason == REASON_NODE_LOST {
            reason = "Unknown".to_owned();
        } else if phase != PHASE_SUCCEEDED && phase != PHASE_FAILED {
            reason = "Terminating".to_owned();
        }
    }

    let restarts = u32::try_from(restarts.max(0)).unwrap_or(u32::MAX);
    PodColumns {
        ready_containers: saturating_u32(ready),
        total_containers: saturating_u32(total),
        status: reason,
        restarts,
        last_restart: if restarts == 0 {
            None
        } else {
            last_restart.cloned()
        },
    }
}

/// Computes the READY, UP-TO-DATE and AVAILABLE columns exactly as kubectl
/// 1.35's `printDeployment` does.
pub fn deployment_columns(d: &Deployment) -> DeploymentColumns {
    let status = d.status.as_ref();
    // kubectl prints the apiserver's defaulted object, and defaulting turns an
    // unset spec.replicas into 1, so that is what it shows for one.
    let desired_replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    DeploymentColumns {
        ready_replicas: status.and_then(|s| s.ready_replicas).unwrap_or(0),
        desired_replicas,
        up_to_date: status.and_then(|s| s.updated_replicas).unwrap_or(0),
        available: status.and_then(|s| s.available_replicas).unwrap_or(0),
    }
}

fn is_restartable(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some(RESTART_POLICY_ALWAYS)
}

fn terminated(cs: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    cs.state.as_ref().and_then(|s| s.terminated.as_ref())
}

fn waiting_reason(cs: &ContainerStatus) -> Option<&str> {
    cs.state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| non_empty(w.reason.as_deref()))
}

fn last_finished_at(cs: &ContainerStatus) -> Option<&Time> {
    cs.last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
}

/// `Signal:N` when a signal is recorded, else `ExitCode:N`; Go's zero value
/// for an absent signal is 0, hence the `!= 0` check.
fn exit_description(prefix: &str, t: &ContainerStateTerminated) -> String {
    match t.signal.filter(|s| *s != 0) {
        Some(signal) => format!("{prefix}Signal:{signal}"),
        None => format!("{prefix}ExitCode:{}", t.exit_code),
    }
}

fn keep_latest<'a>(latest: &mut Option<&'a Time>, candidate: Option<&'a Time>) {
    let Some(candidate) = candidate else { return };
    let floor = Timestamp::new(GO_ZERO_TIME_UNIX_SECONDS, 0).unwrap_or(Timestamp::MIN);
    let current = latest.map_or(floor, |t| t.0);
    if candidate.0 > current {
        *latest = Some(candidate);
    }
}

/// kubectl only looks at the first Initialized condition.
fn is_initialized(conditions: &[PodCondition]) -> bool {
    conditions
        .iter()
        .find(|c| c.type_ == POD_INITIALIZED)
        .is_some_and(|c| c.status == CONDITION_TRUE)
}

/// Unlike `is_initialized`, kubectl accepts any true Ready condition here.
fn is_ready(conditions: &[PodCondition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == POD_READY && c.status == CONDITION_TRUE)
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const T1: &str = "2025-06-01T10:01:00Z";
    const T2: &str = "2025-06-01T10:05:00Z";
    const DELETED_AT: &str = "2025-06-01T11:00:00Z";

    struct PodCase {
        name: &'static str,
        pod: Value,
        ready: &'static str,
        status: &'static str,
        restarts: u32,
        last_restart: Option<&'static str>,
    }

    fn time(s: &str) -> Time {
        serde_json::from_value(json!(s)).expect("test timestamp parses")
    }

    fn pod(spec: Value, status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-5d8f7c9b4-x2x7q",
                "namespace": "default",
                "uid": "0b5c2f5e-7c56-4a3f-9a53-0c7a1f9f1a11",
                "resourceVersion": "4711",
                "creationTimestamp": "2025-06-01T10:00:00Z",
                "labels": {"app": "web"}
            },
            "spec": spec,
            "status": status
        })
    }

    fn deleting(mut pod: Value) -> Value {
        pod["metadata"]["deletionTimestamp"] = json!(DELETED_AT);
        pod["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        pod
    }

    fn spec(names: &[&str]) -> Value {
        let containers: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "image": format!("registry.example/{n}:1.0")}))
            .collect();
        json!({
            "containers": containers,
            "restartPolicy": "Always",
            "nodeName": "node-1",
            "schedulerName": "default-scheduler"
        })
    }

    fn spec_with_init(inits: &[(&str, bool)], names: &[&str]) -> Value {
        let mut s = spec(names);
        let init: Vec<Value> = inits
            .iter()
            .map(|(n, sidecar)| {
                let mut c = json!({"name": n, "image": format!("registry.example/{n}:1.0")});
                if *sidecar {
                    c["restartPolicy"] = json!("Always");
                }
                c
            })
            .collect();
        s["initContainers"] = json!(init);
        s
    }

    fn conditions(initialized: bool, ready: bool) -> Value {
        let b = |v: bool| if v { "True" } else { "False" };
        json!([
            {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": null, "lastTransitionTime": T1},
            {"type": "Initialized", "status": b(initialized), "lastProbeTime": null, "lastTransitionTime": T1},
            {"type": "Ready", "status": b(ready), "lastProbeTime": null, "lastTransitionTime": T1},
            {"type": "ContainersReady", "status": b(ready), "lastProbeTime": null, "lastTransitionTime": T1},
            {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": T1}
        ])
    }

    fn cs(name: &str, ready: bool, restarts: i32, state: Value, last_state: Value) -> Value {
        json!({
            "name": name,
            "image": format!("registry.example/{name}:1.0"),
            "imageID": format!("registry.example/{name}@sha256:abc"),
            "containerID": "containerd://0123456789abcdef",
            "ready": ready,
            "started": ready,
            "restartCount": restarts,
            "state": state,
            "lastState": last_state
        })
    }

    fn running() -> Value {
        json!({"running": {"startedAt": T1}})
    }

    fn waiting(reason: &str) -> Value {
        json!({"waiting": {"reason": reason, "message": "see events"}})
    }

    fn exited(code: i32, reason: Option<&str>, signal: Option<i32>, finished: &str) -> Value {
        let mut t = json!({
            "exitCode": code,
            "startedAt": T1,
            "finishedAt": finished,
            "containerID": "containerd://0123456789abcdef"
        });
        if let Some(r) = reason {
            t["reason"] = json!(r);
        }
        if let Some(s) = signal {
            t["signal"] = json!(s);
        }
        json!({"terminated": t})
    }

    fn none() -> Value {
        json!({})
    }

    fn status(phase: &str, conds: Value, inits: Value, containers: Value) -> Value {
        json!({
            "phase": phase,
            "conditions": conds,
            "hostIP": "10.0.0.5",
            "podIP": "10.244.1.7",
            "podIPs": [{"ip": "10.244.1.7"}],
            "startTime": T1,
            "qosClass": "BestEffort",
            "initContainerStatuses": inits,
            "containerStatuses": containers
        })
    }

    fn pod_cases() -> Vec<PodCase> {
        vec![
            PodCase {
                name: "pending with no container statuses",
                pod: pod(
                    spec(&["app"]),
                    json!({"phase": "Pending", "qosClass": "BestEffort"}),
                ),
                ready: "0/1",
                status: "Pending",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "no status at all prints the empty phase",
                pod: pod(spec(&["app"]), json!(null)),
                ready: "0/1",
                status: "",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "ContainerCreating",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Pending",
                        conditions(true, false),
                        json!(null),
                        json!([cs("app", false, 0, waiting("ContainerCreating"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "ContainerCreating",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Running 2/2",
                pod: pod(
                    spec(&["app", "proxy"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([
                            cs("app", true, 0, running(), none()),
                            cs("proxy", true, 0, running(), none())
                        ]),
                    ),
                ),
                ready: "2/2",
                status: "Running",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Running 1/2 with one container not ready",
                pod: pod(
                    spec(&["app", "proxy"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([
                            cs("app", false, 0, running(), none()),
                            cs("proxy", true, 0, running(), none())
                        ]),
                    ),
                ),
                ready: "1/2",
                status: "Running",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "restarts summed over containers, latest finish wins",
                pod: pod(
                    spec(&["app", "proxy"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([
                            cs(
                                "app",
                                true,
                                1,
                                running(),
                                exited(1, Some("Error"), None, T2)
                            ),
                            cs(
                                "proxy",
                                true,
                                2,
                                running(),
                                exited(2, Some("Error"), None, T1)
                            )
                        ]),
                    ),
                ),
                ready: "2/2",
                status: "Running",
                restarts: 3,
                last_restart: Some(T2),
            },
            PodCase {
                name: "CrashLoopBackOff",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "app",
                            false,
                            5,
                            waiting("CrashLoopBackOff"),
                            exited(1, Some("Error"), None, T2)
                        )]),
                    ),
                ),
                ready: "0/1",
                status: "CrashLoopBackOff",
                restarts: 5,
                last_restart: Some(T2),
            },
            PodCase {
                name: "ErrImagePull",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Pending",
                        conditions(true, false),
                        json!(null),
                        json!([cs("app", false, 0, waiting("ErrImagePull"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "ErrImagePull",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "ImagePullBackOff",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Pending",
                        conditions(true, false),
                        json!(null),
                        json!([cs("app", false, 0, waiting("ImagePullBackOff"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "ImagePullBackOff",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Completed (Succeeded)",
                pod: pod(
                    spec(&["job"]),
                    status(
                        "Succeeded",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "job",
                            false,
                            0,
                            exited(0, Some("Completed"), None, T2),
                            none()
                        )]),
                    ),
                ),
                ready: "0/1",
                status: "Completed",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Error (terminated exit 1)",
                pod: pod(
                    spec(&["job"]),
                    status(
                        "Failed",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "job",
                            false,
                            0,
                            exited(1, Some("Error"), None, T2),
                            none()
                        )]),
                    ),
                ),
                ready: "0/1",
                status: "Error",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "ExitCode:137 without reason",
                pod: pod(
                    spec(&["job"]),
                    status(
                        "Failed",
                        conditions(true, false),
                        json!(null),
                        json!([cs("job", false, 0, exited(137, None, None, T2), none())]),
                    ),
                ),
                ready: "0/1",
                status: "ExitCode:137",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Signal:9 wins over the exit code",
                pod: pod(
                    spec(&["job"]),
                    status(
                        "Failed",
                        conditions(true, false),
                        json!(null),
                        json!([cs("job", false, 0, exited(137, None, Some(9), T2), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Signal:9",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "OOMKilled",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "app",
                            false,
                            2,
                            exited(137, Some("OOMKilled"), None, T2),
                            exited(137, Some("OOMKilled"), None, T1)
                        )]),
                    ),
                ),
                ready: "0/1",
                status: "OOMKilled",
                restarts: 2,
                last_restart: Some(T1),
            },
            PodCase {
                name: "first container's reason wins (reverse walk)",
                pod: pod(
                    spec(&["app", "proxy"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([
                            cs("app", false, 0, waiting("ImagePullBackOff"), none()),
                            cs("proxy", false, 0, waiting("CrashLoopBackOff"), none())
                        ]),
                    ),
                ),
                ready: "0/2",
                status: "ImagePullBackOff",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Completed container beside a running one, pod Ready",
                pod: pod(
                    spec(&["once", "server"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([
                            cs(
                                "once",
                                false,
                                0,
                                exited(0, Some("Completed"), None, T2),
                                none()
                            ),
                            cs("server", true, 0, running(), none())
                        ]),
                    ),
                ),
                ready: "1/2",
                status: "Running",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Completed container beside a running one, pod not Ready",
                pod: pod(
                    spec(&["once", "server"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([
                            cs(
                                "once",
                                false,
                                0,
                                exited(0, Some("Completed"), None, T2),
                                none()
                            ),
                            cs("server", true, 0, running(), none())
                        ]),
                    ),
                ),
                ready: "1/2",
                status: "NotReady",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Init:0/2",
                pod: pod(
                    spec_with_init(&[("fetch", false), ("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([
                            cs("fetch", false, 0, running(), none()),
                            cs("migrate", false, 0, waiting("PodInitializing"), none())
                        ]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:0/2",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Init:1/2",
                pod: pod(
                    spec_with_init(&[("fetch", false), ("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([
                            cs(
                                "fetch",
                                false,
                                0,
                                exited(0, Some("Completed"), None, T1),
                                none()
                            ),
                            cs("migrate", false, 0, running(), none())
                        ]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:1/2",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Init:CrashLoopBackOff",
                pod: pod(
                    spec_with_init(&[("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([cs(
                            "migrate",
                            false,
                            3,
                            waiting("CrashLoopBackOff"),
                            exited(1, Some("Error"), None, T2)
                        )]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:CrashLoopBackOff",
                restarts: 3,
                last_restart: Some(T2),
            },
            PodCase {
                name: "Init:Error",
                pod: pod(
                    spec_with_init(&[("migrate", false)], &["app"]),
                    status(
                        "Failed",
                        conditions(false, false),
                        json!([cs(
                            "migrate",
                            false,
                            0,
                            exited(1, Some("Error"), None, T2),
                            none()
                        )]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:Error",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Init:ExitCode:1",
                pod: pod(
                    spec_with_init(&[("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([cs("migrate", false, 0, exited(1, None, None, T2), none())]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:ExitCode:1",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Init:Signal:15",
                pod: pod(
                    spec_with_init(&[("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([cs(
                            "migrate",
                            false,
                            0,
                            exited(143, None, Some(15), T2),
                            none()
                        )]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "Init:Signal:15",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "PodInitializing after all init containers finished",
                pod: pod(
                    spec_with_init(&[("fetch", false), ("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(true, false),
                        json!([
                            cs(
                                "fetch",
                                false,
                                0,
                                exited(0, Some("Completed"), None, T1),
                                none()
                            ),
                            cs(
                                "migrate",
                                false,
                                0,
                                exited(0, Some("Completed"), None, T1),
                                none()
                            )
                        ]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/1",
                status: "PodInitializing",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "sidecar counted in READY; finished init restarts dropped",
                pod: pod(
                    spec_with_init(&[("setup", false), ("mesh", true)], &["app"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!([
                            cs(
                                "setup",
                                false,
                                2,
                                exited(0, Some("Completed"), None, T1),
                                exited(1, Some("Error"), None, T2)
                            ),
                            cs(
                                "mesh",
                                true,
                                1,
                                running(),
                                exited(1, Some("Error"), None, T1)
                            )
                        ]),
                        json!([cs("app", true, 0, running(), none())]),
                    ),
                ),
                ready: "2/2",
                status: "Running",
                restarts: 1,
                last_restart: Some(T1),
            },
            PodCase {
                name: "sidecar not yet started blocks initialization",
                pod: pod(
                    spec_with_init(&[("mesh", true), ("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([
                            cs("mesh", false, 0, running(), none()),
                            cs("migrate", false, 0, waiting("PodInitializing"), none())
                        ]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "0/2",
                status: "Init:0/2",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "started sidecar counts as initialized while the next init runs",
                pod: pod(
                    spec_with_init(&[("mesh", true), ("migrate", false)], &["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([
                            cs("mesh", true, 0, running(), none()),
                            cs("migrate", false, 0, running(), none())
                        ]),
                        json!([cs("app", false, 0, waiting("PodInitializing"), none())]),
                    ),
                ),
                ready: "1/2",
                status: "Init:1/2",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "crashing sidecar after initialization keeps its Init: status",
                pod: pod(
                    spec_with_init(&[("mesh", true)], &["app"]),
                    status(
                        "Running",
                        conditions(true, false),
                        json!([{
                            "name": "mesh",
                            "image": "registry.example/mesh:1.0",
                            "imageID": "",
                            "ready": false,
                            "started": false,
                            "restartCount": 4,
                            "state": waiting("CrashLoopBackOff"),
                            "lastState": exited(1, Some("Error"), None, T2)
                        }]),
                        json!([cs(
                            "app",
                            true,
                            1,
                            running(),
                            exited(2, Some("Error"), None, T1)
                        )]),
                    ),
                ),
                ready: "1/2",
                status: "Init:CrashLoopBackOff",
                restarts: 5,
                last_restart: Some(T2),
            },
            PodCase {
                name: "Terminating",
                pod: deleting(pod(
                    spec(&["app"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([cs("app", true, 0, running(), none())]),
                    ),
                )),
                ready: "1/1",
                status: "Terminating",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "terminal phase is never Terminating",
                pod: deleting(pod(
                    spec(&["job"]),
                    status(
                        "Succeeded",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "job",
                            false,
                            0,
                            exited(0, Some("Completed"), None, T2),
                            none()
                        )]),
                    ),
                )),
                ready: "0/1",
                status: "Completed",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Unknown (NodeLost, deleting)",
                pod: deleting(pod(spec(&["app"]), {
                    let mut s = status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([cs("app", true, 0, running(), none())]),
                    );
                    s["reason"] = json!("NodeLost");
                    s["message"] = json!("Node node-1 which was running pod is unresponsive");
                    s
                })),
                ready: "1/1",
                status: "Unknown",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "NodeLost without deletion shows the reason",
                pod: pod(spec(&["app"]), {
                    let mut s = status(
                        "Running",
                        conditions(true, false),
                        json!(null),
                        json!([cs("app", true, 0, running(), none())]),
                    );
                    s["reason"] = json!("NodeLost");
                    s
                }),
                ready: "1/1",
                status: "NodeLost",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Evicted",
                pod: pod(
                    spec(&["app"]),
                    json!({
                        "phase": "Failed",
                        "reason": "Evicted",
                        "message": "The node was low on resource: memory.",
                        "startTime": T1,
                        "qosClass": "BestEffort"
                    }),
                ),
                ready: "0/1",
                status: "Evicted",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "Evicted with synced container status shows the container reason",
                pod: pod(spec(&["app"]), {
                    let mut s = status(
                        "Failed",
                        conditions(true, false),
                        json!(null),
                        json!([cs(
                            "app",
                            false,
                            0,
                            json!({"terminated": {
                                "exitCode": 137,
                                "reason": "ContainerStatusUnknown",
                                "startedAt": null,
                                "finishedAt": null
                            }}),
                            none()
                        )]),
                    );
                    s["reason"] = json!("Evicted");
                    s
                }),
                ready: "0/1",
                status: "ContainerStatusUnknown",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "SchedulingGated",
                pod: pod(
                    json!({
                        "containers": [{"name": "app", "image": "registry.example/app:1.0"}],
                        "schedulingGates": [{"name": "example.com/quota"}]
                    }),
                    json!({
                        "phase": "Pending",
                        "qosClass": "BestEffort",
                        "conditions": [{
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "SchedulingGated",
                            "message": "Scheduling is blocked due to non-empty scheduling gates",
                            "lastProbeTime": null,
                            "lastTransitionTime": T1
                        }]
                    }),
                ),
                ready: "0/1",
                status: "SchedulingGated",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "restart with null or Go-zero finish time prints no age",
                pod: pod(
                    spec(&["app", "proxy"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([
                            cs(
                                "app",
                                true,
                                1,
                                running(),
                                exited(
                                    137,
                                    Some("ContainerStatusUnknown"),
                                    None,
                                    "0001-01-01T00:00:00Z"
                                )
                            ),
                            cs(
                                "proxy",
                                true,
                                1,
                                running(),
                                json!({"terminated": {"exitCode": 1, "finishedAt": null}})
                            )
                        ]),
                    ),
                ),
                ready: "2/2",
                status: "Running",
                restarts: 2,
                last_restart: None,
            },
            PodCase {
                name: "nonsense restart counts are clamped",
                pod: pod(
                    spec(&["a", "b", "c", "d"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([
                            cs("a", true, i32::MAX, running(), none()),
                            cs("b", true, i32::MAX, running(), none()),
                            cs("c", true, i32::MAX, running(), none()),
                            cs("d", true, -1, running(), none())
                        ]),
                    ),
                ),
                ready: "4/4",
                status: "Running",
                restarts: u32::MAX,
                last_restart: None,
            },
            PodCase {
                name: "negative restart count is zero and drops the age",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Running",
                        conditions(true, true),
                        json!(null),
                        json!([cs(
                            "app",
                            true,
                            -3,
                            running(),
                            exited(1, Some("Error"), None, T2)
                        )]),
                    ),
                ),
                ready: "1/1",
                status: "Running",
                restarts: 0,
                last_restart: None,
            },
            PodCase {
                name: "init status without a matching spec is a plain init container",
                pod: pod(
                    spec(&["app"]),
                    status(
                        "Pending",
                        conditions(false, false),
                        json!([cs("ghost", true, 0, running(), none())]),
                        json!(null),
                    ),
                ),
                ready: "0/1",
                status: "Init:0/0",
                restarts: 0,
                last_restart: None,
            },
        ]
    }

    #[test]
    fn pod_columns_match_kubectl() {
        let mut failures = Vec::new();
        for case in pod_cases() {
            let pod: Pod = match serde_json::from_value(case.pod) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{}: pod JSON does not parse: {e}", case.name));
                    continue;
                }
            };
            let got = pod_columns(&pod);
            let want_last = case.last_restart.map(time);
            if got.ready() != case.ready
                || got.status != case.status
                || got.restarts != case.restarts
                || got.last_restart != want_last
            {
                failures.push(format!(
                    "{}:\n   got ready={} status={:?} restarts={} last={:?}\n  want ready={} status={:?} restarts={} last={:?}",
                    case.name,
                    got.ready(),
                    got.status,
                    got.restarts,
                    got.last_restart,
                    case.ready,
                    case.status,
                    case.restarts,
                    want_last,
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn default_pod_does_not_panic() {
        let got = pod_columns(&Pod::default());
        assert_eq!(
            got,
            PodColumns {
                ready_containers: 0,
                total_containers: 0,
                status: String::new(),
                restarts: 0,
                last_restart: None,
            }
        );
        assert_eq!(got.ready(), "0/0");
    }

    #[test]
    fn deployment_columns_match_kubectl() {
        let deployment = |spec: Value, status: Value| {
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default", "generation": 3},
                "spec": spec,
                "status": status
            })
        };
        let web_spec = |replicas: Option<i32>| {
            let mut s = json!({
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
                }
            });
            if let Some(r) = replicas {
                s["replicas"] = json!(r);
            }
            s
        };
        let cases: Vec<(&str, Value, &str, DeploymentColumns)> = vec![
            (
                "fully available",
                deployment(
                    web_spec(Some(3)),
                    json!({
                        "observedGeneration": 3,
                        "replicas": 3,
                        "updatedReplicas": 3,
                        "readyReplicas": 3,
                        "availableReplicas": 3
                    }),
                ),
                "3/3",
                DeploymentColumns {
                    ready_replicas: 3,
                    desired_replicas: 3,
                    up_to_date: 3,
                    available: 3,
                },
            ),
            (
                "rolling out, partially available",
                deployment(
                    web_spec(Some(3)),
                    json!({
                        "observedGeneration": 3,
                        "replicas": 4,
                        "updatedReplicas": 2,
                        "readyReplicas": 1,
                        "availableReplicas": 1,
                        "unavailableReplicas": 3
                    }),
                ),
                "1/3",
                DeploymentColumns {
                    ready_replicas: 1,
                    desired_replicas: 3,
                    up_to_date: 2,
                    available: 1,
                },
            ),
            (
                "no status yet",
                deployment(web_spec(Some(2)), json!(null)),
                "0/2",
                DeploymentColumns {
                    ready_replicas: 0,
                    desired_replicas: 2,
                    up_to_date: 0,
                    available: 0,
                },
            ),
            (
                "scaled to zero",
                deployment(web_spec(Some(0)), json!({"observedGeneration": 3})),
                "0/0",
                DeploymentColumns {
                    ready_replicas: 0,
                    desired_replicas: 0,
                    up_to_date: 0,
                    available: 0,
                },
            ),
            (
                "unset replicas defaults to 1",
                deployment(web_spec(None), json!(null)),
                "0/1",
                DeploymentColumns {
                    ready_replicas: 0,
                    desired_replicas: 1,
                    up_to_date: 0,
                    available: 0,
                },
            ),
        ];
        let mut failures = Vec::new();
        for (name, value, want_ready, want) in cases {
            let d: Deployment = match serde_json::from_value(value) {
                Ok(d) => d,
                Err(e) => {
                    failures.push(format!("{name}: deployment JSON does not parse: {e}"));
                    continue;
                }
            };
            let got = deployment_columns(&d);
            if got != want || got.ready() != want_ready {
                failures.push(format!(
                    "{name}: got {got:?} ({}), want {want:?} ({want_ready})",
                    got.ready()
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert_eq!(deployment_columns(&Deployment::default()).ready(), "0/1");
    }
}
