//! `printPod`: READY, STATUS and RESTARTS as kubectl shows them, with the wide columns.

use jiff::Timestamp;
use serde_json::Value;

use crate::Cell;
use crate::object::{at, boolean, deleting, int, list, name, string, time};

/// `node.NodeUnreachablePodReason`.
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// The cells of `printPod` with `Wide` (as the apiserver prints).
pub(crate) fn cells(pod: &Value) -> Vec<Cell> {
    let status = Status::of(pod);
    let restarts = match status.last_restart {
        Some(last) if status.restarts != 0 => Cell::Restarts {
            count: status.restarts,
            last,
        },
        _ => Cell::text(status.restarts.to_string()),
    };
    vec![
        Cell::text(name(pod)),
        Cell::text(format!("{}/{}", status.ready, status.total)),
        Cell::text(status.reason),
        restarts,
        Cell::Age(time(pod, "/metadata/creationTimestamp")),
        Cell::text(or_none(
            list(pod, "/status/podIPs")
                .first()
                .map_or("", |ip| string(ip, "/ip")),
        )),
        Cell::text(or_none(string(pod, "/spec/nodeName"))),
        Cell::text(or_none(string(pod, "/status/nominatedNodeName"))),
        Cell::text(readiness_gates(pod)),
    ]
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "<none>" } else { text }
}

struct Status {
    ready: i64,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

/// `IsRestartableInitContainer`: a sidecar (`restartPolicy: Always`).
fn restartable(init_containers: &[Value], name: &str) -> bool {
    init_containers
        .iter()
        .find(|c| string(c, "/name") == name)
        .is_some_and(|c| string(c, "/restartPolicy") == "Always")
}

fn condition_status<'a>(pod: &'a Value, type_: &str) -> Option<&'a str> {
    list(pod, "/status/conditions")
        .iter()
        .find(|c| string(c, "/type") == type_)
        .map(|c| string(c, "/status"))
}

fn later(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The reason a terminated container gives: its reason, else its signal, else its exit code.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    let reason = string(terminated, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = int(terminated, "/signal");
    if signal != 0 {
        return format!("{prefix}Signal:{signal}");
    }
    format!("{prefix}ExitCode:{}", int(terminated, "/exitCode"))
}

impl Status {
    fn of(pod: &Value) -> Status {
        let phase = string(pod, "/status/phase");
        let mut reason = phase.to_owned();
        if !string(pod, "/status/reason").is_empty() {
            reason = string(pod, "/status/reason").to_owned();
        }
        for condition in list(pod, "/status/conditions") {
            if string(condition, "/type") == "PodScheduled"
                && string(condition, "/reason") == "SchedulingGated"
            {
                reason = "SchedulingGated".to_owned();
            }
        }

        let init_containers = list(pod, "/spec/initContainers");
        let mut total = list(pod, "/spec/containers").len();
        total += init_containers
            .iter()
            .filter(|c| string(c, "/restartPolicy") == "Always")
            .count();

        let mut ready = 0;
        let mut restarts = 0;
        let mut last_restart = None;
        let mut sidecar_restarts = 0;
        let mut sidecar_last_restart = None;
        let mut initializing = false;
        for (i, container) in list(pod, "/status/initContainerStatuses")
            .iter()
            .enumerate()
        {
            let is_sidecar = restartable(init_containers, string(container, "/name"));
            let finished = time(container, "/lastState/terminated/finishedAt");
            restarts += int(container, "/restartCount");
            if at(container, "/lastState/terminated").is_some() {
                last_restart = later(last_restart, finished);
            }
            if is_sidecar {
                sidecar_restarts += int(container, "/restartCount");
                if at(container, "/lastState/terminated").is_some() {
                    sidecar_last_restart = later(sidecar_last_restart, finished);
                }
            }
            let terminated = at(container, "/state/terminated");
            let waiting_reason = string(container, "/state/waiting/reason");
            if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
                continue;
            } else if is_sidecar && boolean(container, "/started") {
                if boolean(container, "/ready") {
                    ready += 1;
                }
                continue;
            } else if let Some(terminated) = terminated {
                reason = terminated_reason(terminated, "Init:");
            } else if at(container, "/state/waiting").is_some()
                && !waiting_reason.is_empty()
                && waiting_reason != "PodInitializing"
            {
                reason = format!("Init:{waiting_reason}");
            } else {
                reason = format!("Init:{i}/{}", init_containers.len());
            }
            initializing = true;
            break;
        }

        if !initializing || condition_status(pod, "Initialized") == Some("True") {
            restarts = sidecar_restarts;
            last_restart = sidecar_last_restart;
            let mut has_running = false;
            let mut error_reason = None;
            for container in list(pod, "/status/containerStatuses").iter().rev() {
                restarts += int(container, "/restartCount");
                if at(container, "/lastState/terminated").is_some() {
                    last_restart = later(
                        last_restart,
                        time(container, "/lastState/terminated/finishedAt"),
                    );
                }
                let waiting_reason = string(container, "/state/waiting/reason");
                if at(container, "/state/waiting").is_some() && !waiting_reason.is_empty() {
                    reason = waiting_reason.to_owned();
                } else if let Some(terminated) = at(container, "/state/terminated") {
                    reason = terminated_reason(terminated, "");
                    if int(terminated, "/exitCode") != 0 {
                        error_reason = Some(reason.clone());
                    }
                } else if boolean(container, "/ready") && at(container, "/state/running").is_some()
                {
                    has_running = true;
                    ready += 1;
                }
            }
            if reason == "Completed" {
                if has_running && condition_status(pod, "Ready") == Some("True") {
                    reason = "Running".to_owned();
                } else if let Some(error_reason) = error_reason {
                    reason = error_reason;
                } else if has_running {
                    reason = "NotReady".to_owned();
                }
            }
        }

        if deleting(pod) && string(pod, "/status/reason") == NODE_UNREACHABLE_POD_REASON {
            reason = "Unknown".to_owned();
        } else if deleting(pod) && phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_owned();
        }

        Status {
            ready,
            total,
            reason,
            restarts,
            last_restart,
        }
    }
}

/// The READINESS GATES column: gates whose condition is True, of all gates; `<none>`.
fn readiness_gates(pod: &Value) -> String {
    let gates = list(pod, "/spec/readinessGates");
    if gates.is_empty() {
        return "<none>".to_owned();
    }
    let true_conditions = gates
        .iter()
        .filter(|gate| condition_status(pod, string(gate, "/conditionType")) == Some("True"))
        .count();
    format!("{true_conditions}/{}", gates.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::tests::{at_age, mk};
    use serde_json::json;

    fn pod(spec: Value, status: Value) -> Value {
        mk("p", json!({"spec": spec, "status": status}))
    }

    fn running(name: &str, restarts: i64) -> Value {
        json!({"name": name, "ready": true, "restartCount": restarts, "state": {"running": {}}})
    }

    fn status_of(pod: &Value) -> String {
        Status::of(pod).reason
    }

    #[test]
    fn a_running_pod_is_ready_with_its_restarts_and_last_restart() {
        let mut c = running("a", 3);
        c["lastState"] =
            json!({"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:55:00Z"}});
        let p = pod(
            json!({"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"}),
            json!({"phase": "Running", "containerStatuses": [c, running("b", 0)],
                   "podIPs": [{"ip": "10.0.0.1"}]}),
        );
        let cells = at_age(&cells(&p));
        assert_eq!(
            cells,
            [
                "p",
                "2/2",
                "Running",
                "3 (5m ago)",
                "60m",
                "10.0.0.1",
                "n1",
                "<none>",
                "<none>"
            ]
        );
    }

    #[test]
    fn init_containers_show_progress_and_failures() {
        let spec = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "c"}]});
        let done = json!({"name": "i1", "state": {"terminated": {"exitCode": 0}}});
        let waiting = json!({"name": "i2", "state": {"waiting": {"reason": "PodInitializing"}}});
        let p = pod(
            spec.clone(),
            json!({"phase": "Pending", "initContainerStatuses": [done, waiting]}),
        );
        assert_eq!(status_of(&p), "Init:1/2");
        let crash = json!({"name": "i1", "state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        let p = pod(
            spec.clone(),
            json!({"phase": "Pending", "initContainerStatuses": [crash]}),
        );
        assert_eq!(status_of(&p), "Init:CrashLoopBackOff");
        let failed = json!({"name": "i1", "state": {"terminated": {"exitCode": 2}}});
        let p = pod(
            spec,
            json!({"phase": "Pending", "initContainerStatuses": [failed]}),
        );
        assert_eq!(status_of(&p), "Init:ExitCode:2");
    }

    #[test]
    fn a_sidecar_counts_in_ready_and_total() {
        let spec = json!({"initContainers": [{"name": "side", "restartPolicy": "Always"}],
                          "containers": [{"name": "c"}]});
        let side =
            json!({"name": "side", "started": true, "ready": true, "state": {"running": {}}});
        let p = pod(
            spec,
            json!({"phase": "Running", "initContainerStatuses": [side],
                                  "containerStatuses": [running("c", 0)],
                                  "conditions": [{"type": "Initialized", "status": "True"}]}),
        );
        let s = Status::of(&p);
        assert_eq!((s.ready, s.total, s.reason.as_str()), (2, 2, "Running"));
    }

    #[test]
    fn container_reasons_and_completed_rules() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let crash = json!({"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        let p = pod(
            spec.clone(),
            json!({"phase": "Running", "containerStatuses": [crash, running("b", 0)]}),
        );
        assert_eq!(status_of(&p), "CrashLoopBackOff");
        let completed =
            json!({"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
        let p = pod(
            spec.clone(),
            json!({"phase": "Running", "containerStatuses": [running("b", 0), completed.clone()]}),
        );
        assert_eq!(status_of(&p), "NotReady");
        let p = pod(
            spec.clone(),
            json!({"phase": "Running", "containerStatuses": [running("b", 0), completed],
                                         "conditions": [{"type": "Ready", "status": "True"}]}),
        );
        assert_eq!(status_of(&p), "Running");
        let killed = json!({"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}});
        let p = pod(
            spec,
            json!({"phase": "Running", "containerStatuses": [killed]}),
        );
        assert_eq!(status_of(&p), "Signal:9");
    }

    #[test]
    fn deletion_shows_terminating_or_unknown() {
        let mut p = pod(
            json!({"containers": [{"name": "a"}]}),
            json!({"phase": "Running"}),
        );
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T01:00:00Z");
        assert_eq!(status_of(&p), "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(status_of(&p), "Unknown");
        p["status"] = json!({"phase": "Succeeded"});
        assert_eq!(status_of(&p), "Succeeded");
    }

    #[test]
    fn scheduling_gates_and_readiness_gates() {
        let p = pod(
            json!({"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]}),
            json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                {"type": "x", "status": "True"}]}),
        );
        assert_eq!(status_of(&p), "SchedulingGated");
        assert_eq!(readiness_gates(&p), "1/2");
    }
}
