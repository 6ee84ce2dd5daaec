//! One printer per built-in kind, each a port of its `printers.go` function (the crate's doc
//! lists which). The catalog of served kinds names each kind's printer once; no list of
//! kinds lives here.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::columns;
use crate::format::{
    access_modes, containers, label_selector, labels, list_with_more, load_balancer,
    selector_string,
};
use crate::object::{
    at, boolean, deleting, go_zero_time, int, int_or_string, list, map, map_len, name,
    quantity_in_map, quantity_pointer, string, time,
};
use crate::{Cell, Printer};

fn age(object: &Value) -> Cell {
    Cell::Age(time(object, "/metadata/creationTimestamp"))
}

fn text(value: &str) -> Cell {
    Cell::text(value)
}

fn count(n: usize) -> Cell {
    Cell::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Containers and images of a pod template's spec.
fn template_containers(object: &Value, pod_spec: &str) -> [Cell; 2] {
    let (names, images) = containers(at(object, pod_spec));
    [Cell::text(names), Cell::text(images)]
}

/// The cells of `rest.NewDefaultTableConvertor`: the name and the creation time in RFC 3339.
pub(crate) fn default_cells(object: &Value) -> Vec<Cell> {
    let created = time(object, "/metadata/creationTimestamp").unwrap_or_else(go_zero_time);
    vec![
        text(name(object)),
        Cell::text(created.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    ]
}

/// Pods: `printPod`.
pub fn pod() -> Printer {
    Printer::builtin(columns::POD, crate::pod::cells)
}

/// Deployments: `printDeployment`.
pub fn deployment() -> Printer {
    Printer::builtin(columns::DEPLOYMENT, |d| {
        let selector = match selector_string(at(d, "/spec/selector")) {
            Ok(selector) => selector,
            Err(_) => "<invalid>".to_owned(),
        };
        let [names, images] = template_containers(d, "/spec/template/spec");
        vec![
            text(name(d)),
            Cell::text(format!(
                "{}/{}",
                int(d, "/status/readyReplicas"),
                int(d, "/spec/replicas")
            )),
            Cell::Integer(int(d, "/status/updatedReplicas")),
            Cell::Integer(int(d, "/status/availableReplicas")),
            age(d),
            names,
            images,
            Cell::text(selector),
        ]
    })
}

/// StatefulSets: `printStatefulSet`.
pub fn stateful_set() -> Printer {
    Printer::builtin(columns::STATEFUL_SET, |s| {
        let [names, images] = template_containers(s, "/spec/template/spec");
        vec![
            text(name(s)),
            Cell::text(format!(
                "{}/{}",
                int(s, "/status/readyReplicas"),
                int(s, "/spec/replicas")
            )),
            age(s),
            names,
            images,
        ]
    })
}

/// DaemonSets: `printDaemonSet`.
pub fn daemon_set() -> Printer {
    Printer::builtin(columns::DAEMON_SET, |d| {
        let [names, images] = template_containers(d, "/spec/template/spec");
        vec![
            text(name(d)),
            Cell::Integer(int(d, "/status/desiredNumberScheduled")),
            Cell::Integer(int(d, "/status/currentNumberScheduled")),
            Cell::Integer(int(d, "/status/numberReady")),
            Cell::Integer(int(d, "/status/updatedNumberScheduled")),
            Cell::Integer(int(d, "/status/numberAvailable")),
            Cell::text(labels(d, "/spec/template/spec/nodeSelector")),
            age(d),
            names,
            images,
            Cell::text(label_selector(at(d, "/spec/selector"))),
        ]
    })
}

/// ReplicaSets: `printReplicaSet`.
pub fn replica_set() -> Printer {
    Printer::builtin(columns::REPLICA_SET, |r| {
        let [names, images] = template_containers(r, "/spec/template/spec");
        vec![
            text(name(r)),
            Cell::Integer(int(r, "/spec/replicas")),
            Cell::Integer(int(r, "/status/replicas")),
            Cell::Integer(int(r, "/status/readyReplicas")),
            age(r),
            names,
            images,
            Cell::text(label_selector(at(r, "/spec/selector"))),
        ]
    })
}

/// `hasJobCondition`: the first condition of that type is True.
fn has_condition(object: &Value, type_: &str) -> bool {
    list(object, "/status/conditions")
        .iter()
        .find(|c| string(c, "/type") == type_)
        .is_some_and(|c| string(c, "/status") == "True")
}

/// Jobs: `printJob`.
pub fn job() -> Printer {
    Printer::builtin(columns::JOB, |j| {
        let succeeded = int(j, "/status/succeeded");
        let completions = match at(j, "/spec/completions") {
            Some(completions) => format!("{succeeded}/{}", completions.as_i64().unwrap_or(0)),
            None => match int(j, "/spec/parallelism") {
                parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let duration = match (
            time(j, "/status/startTime"),
            time(j, "/status/completionTime"),
        ) {
            (None, _) => Cell::text(""),
            (Some(start), None) => Cell::Age(Some(start)),
            (Some(start), Some(end)) => {
                Cell::text(crate::human_duration(end.duration_since(start)))
            }
        };
        let status = if has_condition(j, "Complete") {
            "Complete"
        } else if has_condition(j, "Failed") {
            "Failed"
        } else if deleting(j) {
            "Terminating"
        } else if has_condition(j, "Suspended") {
            "Suspended"
        } else if has_condition(j, "FailureTarget") {
            "FailureTarget"
        } else if has_condition(j, "SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let [names, images] = template_containers(j, "/spec/template/spec");
        vec![
            text(name(j)),
            text(status),
            Cell::text(completions),
            duration,
            age(j),
            names,
            images,
            Cell::text(label_selector(at(j, "/spec/selector"))),
        ]
    })
}

/// `printBoolPtr`: `True`, `False` or `<unset>`.
fn bool_pointer(value: Option<&Value>) -> &'static str {
    match value.and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// CronJobs: `printCronJob`.
pub fn cron_job() -> Printer {
    Printer::builtin(columns::CRON_JOB, |c| {
        let last_schedule = match at(c, "/status/lastScheduleTime") {
            Some(_) => Cell::Age(time(c, "/status/lastScheduleTime")),
            None => text("<none>"),
        };
        let time_zone = at(c, "/spec/timeZone")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let [names, images] = template_containers(c, "/spec/jobTemplate/spec/template/spec");
        vec![
            text(name(c)),
            text(string(c, "/spec/schedule")),
            text(time_zone),
            text(bool_pointer(at(c, "/spec/suspend"))),
            count(list(c, "/status/active").len()),
            last_schedule,
            age(c),
            names,
            images,
            Cell::text(label_selector(at(c, "/spec/jobTemplate/spec/selector"))),
        ]
    })
}

/// One metric of `formatHPAMetrics`, `i` its index in the spec and the status.
fn hpa_metric(spec: &Value, statuses: &[Value], i: usize) -> String {
    let status = statuses.get(i);
    // The status of the metric's source, if the status has the same source.
    let current = |source: &str| status.and_then(|s| at(s, &format!("/{source}")));
    let unknown = || "<unknown>".to_owned();
    match string(spec, "/type") {
        source @ ("External" | "Object") => {
            let key = if source == "External" {
                "external"
            } else {
                "object"
            };
            if at(spec, &format!("/{key}/target/averageValue")).is_some() {
                let now = current(key)
                    .filter(|c| at(c, "/current/averageValue").is_some())
                    .map_or_else(unknown, |c| {
                        quantity_pointer(c, "/current/averageValue").to_owned()
                    });
                format!(
                    "{now}/{} (avg)",
                    quantity_pointer(spec, &format!("/{key}/target/averageValue"))
                )
            } else {
                let now = current(key).map_or_else(unknown, |c| {
                    quantity_pointer(c, "/current/value").to_owned()
                });
                format!(
                    "{now}/{}",
                    quantity_pointer(spec, &format!("/{key}/target/value"))
                )
            }
        }
        "Pods" => {
            let now = current("pods").map_or_else(unknown, |c| {
                quantity_pointer(c, "/current/averageValue").to_owned()
            });
            format!(
                "{now}/{}",
                quantity_pointer(spec, "/pods/target/averageValue")
            )
        }
        source @ ("Resource" | "ContainerResource") => {
            let key = if source == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let resource = string(spec, &format!("/{key}/name"));
            if at(spec, &format!("/{key}/target/averageValue")).is_some() {
                let now = current(key).map_or_else(unknown, |c| {
                    quantity_pointer(c, "/current/averageValue").to_owned()
                });
                format!(
                    "{resource}: {now}/{}",
                    quantity_pointer(spec, &format!("/{key}/target/averageValue"))
                )
            } else {
                let now = current(key)
                    .and_then(|c| at(c, "/current/averageUtilization"))
                    .map_or_else(unknown, |u| format!("{}%", u.as_i64().unwrap_or(0)));
                let target = at(spec, &format!("/{key}/target/averageUtilization")).map_or_else(
                    || "<auto>".to_owned(),
                    |u| format!("{}%", u.as_i64().unwrap_or(0)),
                );
                format!("{resource}: {now}/{target}")
            }
        }
        _ => "<unknown type>".to_owned(),
    }
}

/// `formatHPAMetrics`: the first two metrics, then `+ N more...`; `<none>` without metrics.
fn hpa_metrics(hpa: &Value) -> String {
    const MAX: usize = 2;
    let specs = list(hpa, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let statuses = list(hpa, "/status/currentMetrics");
    let metrics: Vec<String> = specs
        .iter()
        .take(MAX)
        .enumerate()
        .map(|(i, spec)| hpa_metric(spec, statuses, i))
        .collect();
    let text = metrics.join(", ");
    if specs.len() > MAX {
        return format!("{text} + {} more...", specs.len() - MAX);
    }
    text
}

/// HorizontalPodAutoscalers (autoscaling/v2): `printHorizontalPodAutoscaler`.
pub fn horizontal_pod_autoscaler() -> Printer {
    Printer::builtin(columns::HORIZONTAL_POD_AUTOSCALER, |h| {
        let min_pods = match at(h, "/spec/minReplicas").and_then(Value::as_i64) {
            Some(min) => min.to_string(),
            None => "<unset>".to_owned(),
        };
        vec![
            text(name(h)),
            Cell::text(format!(
                "{}/{}",
                string(h, "/spec/scaleTargetRef/kind"),
                string(h, "/spec/scaleTargetRef/name")
            )),
            Cell::text(hpa_metrics(h)),
            Cell::text(min_pods),
            Cell::Integer(int(h, "/spec/maxReplicas")),
            Cell::Integer(int(h, "/status/currentReplicas")),
            age(h),
        ]
    })
}

/// PodDisruptionBudgets: `printPodDisruptionBudget`.
pub fn pod_disruption_budget() -> Printer {
    Printer::builtin(columns::POD_DISRUPTION_BUDGET, |p| {
        let or_na = |pointer| int_or_string(p, pointer).unwrap_or_else(|| "N/A".to_owned());
        vec![
            text(name(p)),
            Cell::text(or_na("/spec/minAvailable")),
            Cell::text(or_na("/spec/maxUnavailable")),
            Cell::Integer(int(p, "/status/disruptionsAllowed")),
            age(p),
        ]
    })
}

/// `getServiceExternalIP` with `wide`.
fn service_external_ip(s: &Value) -> String {
    let external_ips: Vec<&str> = list(s, "/spec/externalIPs")
        .iter()
        .map(|ip| ip.as_str().unwrap_or(""))
        .collect();
    match string(s, "/spec/type") {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_owned()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = load_balancer(s, "/status/loadBalancer/ingress");
            if !external_ips.is_empty() {
                let mut all: Vec<&str> = Vec::new();
                if !lb.is_empty() {
                    all.extend(lb.split(','));
                }
                all.extend(external_ips);
                return all.join(",");
            }
            if !lb.is_empty() {
                return lb;
            }
            "<pending>".to_owned()
        }
        "ExternalName" => string(s, "/spec/externalName").to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// `makePortString`: `port/protocol` or `port:nodePort/protocol`, comma-separated.
fn service_ports(s: &Value) -> String {
    let ports: Vec<String> = list(s, "/spec/ports")
        .iter()
        .map(|p| {
            let (port, protocol) = (int(p, "/port"), string(p, "/protocol"));
            match int(p, "/nodePort") {
                node_port if node_port > 0 => format!("{port}:{node_port}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        return "<none>".to_owned();
    }
    ports.join(",")
}

/// Services: `printService`.
pub fn service() -> Printer {
    Printer::builtin(columns::SERVICE, |s| {
        let cluster_ip = match list(s, "/spec/clusterIPs").first() {
            Some(ip) => ip.as_str().unwrap_or(""),
            None => "<none>",
        };
        vec![
            text(name(s)),
            text(string(s, "/spec/type")),
            text(cluster_ip),
            Cell::text(service_external_ip(s)),
            Cell::text(service_ports(s)),
            age(s),
            Cell::text(labels(s, "/spec/selector")),
        ]
    })
}

/// EndpointSlices: `printEndpointSlice`.
pub fn endpoint_slice() -> Printer {
    Printer::builtin(columns::ENDPOINT_SLICE, |e| {
        // formatDiscoveryPorts: the port, else its name, else "*".
        let ports = list(e, "/ports");
        let port_names: Vec<String> = ports
            .iter()
            .take(3)
            .map(|p| match (at(p, "/port"), at(p, "/name")) {
                (Some(port), _) => port.to_string(),
                (None, Some(name)) => name.as_str().unwrap_or("").to_owned(),
                (None, None) => "*".to_owned(),
            })
            .collect();
        // formatDiscoveryEndpoints: every address of every endpoint.
        let addresses: Vec<&Value> = list(e, "/endpoints")
            .iter()
            .flat_map(|endpoint| list(endpoint, "/addresses"))
            .collect();
        let shown: Vec<String> = addresses
            .iter()
            .take(3)
            .map(|a| a.as_str().unwrap_or("").to_owned())
            .collect();
        vec![
            text(name(e)),
            text(string(e, "/addressType")),
            Cell::text(list_with_more(&port_names, ports.len())),
            Cell::text(list_with_more(&shown, addresses.len())),
            age(e),
        ]
    })
}

/// Endpoints: `printEndpoints`, `formatEndpoints` (every port): up to three `ip:port` (an
/// address alone for a subset without ports), then `+ N more...`; `<none>` without subsets.
pub fn endpoints() -> Printer {
    Printer::builtin(columns::ENDPOINTS, |e| {
        const MAX: usize = 3;
        let subsets = list(e, "/subsets");
        let mut shown: Vec<String> = Vec::new();
        let mut count = 0;
        for subset in subsets {
            let addresses = list(subset, "/addresses");
            let ports = list(subset, "/ports");
            if ports.is_empty() {
                // A headless service's subset may have no ports.
                count += addresses.len();
                shown.extend(
                    addresses
                        .iter()
                        .take(MAX - shown.len().min(MAX))
                        .map(|a| string(a, "/ip").to_owned()),
                );
                continue;
            }
            for port in ports {
                count += addresses.len();
                let port = int(port, "/port");
                shown.extend(
                    addresses
                        .iter()
                        .take(MAX - shown.len().min(MAX))
                        .map(|a| host_port(string(a, "/ip"), port)),
                );
            }
        }
        let endpoints = if subsets.is_empty() {
            "<none>".to_owned()
        } else if count > shown.len() {
            format!("{} + {} more...", shown.join(","), count - MAX)
        } else {
            shown.join(",")
        };
        vec![text(name(e)), Cell::text(endpoints), age(e)]
    })
}

/// `net.JoinHostPort`: an IPv6 address in brackets.
fn host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `formatHosts`: rule hosts until three are listed, then `+ N more...` (N counted from
/// all rules, hosts or not); `*` when no rule has a host.
fn ingress_hosts(i: &Value) -> String {
    const MAX: usize = 3;
    let rules = list(i, "/spec/rules");
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == MAX {
            more = true;
        }
        let host = string(rule, "/host");
        if !more && !host.is_empty() {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".to_owned();
    }
    let text = hosts.join(",");
    if more {
        return format!("{text} + {} more...", rules.len().saturating_sub(MAX));
    }
    text
}

/// Ingresses: `printIngress`.
pub fn ingress() -> Printer {
    Printer::builtin(columns::INGRESS, |i| {
        let class = at(i, "/spec/ingressClassName")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let ports = if list(i, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            text(name(i)),
            text(class),
            Cell::text(ingress_hosts(i)),
            Cell::text(load_balancer(i, "/status/loadBalancer/ingress")),
            text(ports),
            age(i),
        ]
    })
}

/// IngressClasses: `printIngressClass`.
pub fn ingress_class() -> Printer {
    Printer::builtin(columns::INGRESS_CLASS, |c| {
        let parameters = match at(c, "/spec/parameters") {
            Some(p) => {
                let mut kind = string(p, "/kind").to_owned();
                if let Some(group) = at(p, "/apiGroup").and_then(Value::as_str) {
                    kind = format!("{kind}.{group}");
                }
                format!("{kind}/{}", string(p, "/name"))
            }
            None => "<none>".to_owned(),
        };
        vec![
            text(name(c)),
            text(string(c, "/spec/controller")),
            Cell::text(parameters),
            age(c),
        ]
    })
}

/// NetworkPolicies: `printNetworkPolicy`.
pub fn network_policy() -> Printer {
    Printer::builtin(columns::NETWORK_POLICY, |n| {
        // The pod selector is a struct, not a pointer: a missing one is the empty selector.
        let empty = Value::Object(serde_json::Map::new());
        let selector = at(n, "/spec/podSelector").unwrap_or(&empty);
        vec![
            text(name(n)),
            Cell::text(label_selector(Some(selector))),
            age(n),
        ]
    })
}

/// ConfigMaps: `printConfigMap`.
pub fn config_map() -> Printer {
    Printer::builtin(columns::CONFIG_MAP, |c| {
        vec![
            text(name(c)),
            count(map_len(c, "/data") + map_len(c, "/binaryData")),
            age(c),
        ]
    })
}

/// Secrets: `printSecret` (DATA counts `data`'s keys: 0 for a metadata-only object).
pub fn secret() -> Printer {
    Printer::builtin(columns::SECRET, |s| {
        vec![
            text(name(s)),
            text(string(s, "/type")),
            count(map_len(s, "/data")),
            age(s),
        ]
    })
}

/// The beta storage-class annotation, read before `spec.storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str =
    "/metadata/annotations/volume.beta.kubernetes.io~1storage-class";

/// `<unset>` for a missing `*string`.
fn or_unset(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or("<unset>")
}

/// PersistentVolumeClaims: `printPersistentVolumeClaim`.
pub fn persistent_volume_claim() -> Printer {
    Printer::builtin(columns::PERSISTENT_VOLUME_CLAIM, |p| {
        let phase = if deleting(p) {
            "Terminating"
        } else {
            string(p, "/status/phase")
        };
        let volume = string(p, "/spec/volumeName");
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (
                quantity_in_map(p, "/status/capacity/storage").to_owned(),
                access_modes(list(p, "/status/accessModes")),
            )
        };
        let class = match at(p, BETA_STORAGE_CLASS_ANNOTATION) {
            Some(class) => class.as_str().unwrap_or(""),
            None => string(p, "/spec/storageClassName"),
        };
        vec![
            text(name(p)),
            text(phase),
            text(volume),
            Cell::text(capacity),
            Cell::text(modes),
            text(class),
            text(or_unset(at(p, "/spec/volumeAttributesClassName"))),
            age(p),
            text(or_unset(at(p, "/spec/volumeMode"))),
        ]
    })
}

/// PersistentVolumes: `printPersistentVolume`.
pub fn persistent_volume() -> Printer {
    Printer::builtin(columns::PERSISTENT_VOLUME, |p| {
        let claim = match at(p, "/spec/claimRef") {
            Some(claim) => format!("{}/{}", string(claim, "/namespace"), string(claim, "/name")),
            None => String::new(),
        };
        let phase = if deleting(p) {
            "Terminating"
        } else {
            string(p, "/status/phase")
        };
        let class = match at(p, BETA_STORAGE_CLASS_ANNOTATION) {
            Some(class) => class.as_str().unwrap_or(""),
            None => string(p, "/spec/storageClassName"),
        };
        vec![
            text(name(p)),
            text(quantity_in_map(p, "/spec/capacity/storage")),
            Cell::text(access_modes(list(p, "/spec/accessModes"))),
            text(string(p, "/spec/persistentVolumeReclaimPolicy")),
            text(phase),
            Cell::text(claim),
            text(class),
            text(or_unset(at(p, "/spec/volumeAttributesClassName"))),
            text(string(p, "/status/reason")),
            age(p),
            text(or_unset(at(p, "/spec/volumeMode"))),
        ]
    })
}

/// StorageClasses: `printStorageClass`.
pub fn storage_class() -> Printer {
    Printer::builtin(columns::STORAGE_CLASS, |s| {
        let default =
            |annotation: &str| string(s, &format!("/metadata/annotations/{annotation}")) == "true";
        let mut shown_name = name(s).to_owned();
        if default("storageclass.kubernetes.io~1is-default-class")
            || default("storageclass.beta.kubernetes.io~1is-default-class")
        {
            shown_name.push_str(" (default)");
        }
        let reclaim = at(s, "/reclaimPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Delete");
        let binding = at(s, "/volumeBindingMode")
            .and_then(Value::as_str)
            .unwrap_or("Immediate");
        vec![
            Cell::text(shown_name),
            text(string(s, "/provisioner")),
            text(reclaim),
            text(binding),
            Cell::Bool(boolean(s, "/allowVolumeExpansion")),
            age(s),
        ]
    })
}

/// ServiceAccounts: `printServiceAccount`.
pub fn service_account() -> Printer {
    Printer::builtin(columns::SERVICE_ACCOUNT, |s| vec![text(name(s)), age(s)])
}

/// Roles: no printer, the default convertor.
pub fn role() -> Printer {
    Printer::default_columns()
}

/// ClusterRoles: no printer, the default convertor.
pub fn cluster_role() -> Printer {
    Printer::default_columns()
}

/// LimitRanges: no printer, the default convertor.
pub fn limit_range() -> Printer {
    Printer::default_columns()
}

/// CustomResourceDefinitions: no printer, the default convertor.
pub fn custom_resource_definition() -> Printer {
    Printer::default_columns()
}

/// `printRoleBinding` and `printClusterRoleBinding`: the role, then `rbac.SubjectsStrings`.
fn binding_cells(b: &Value) -> Vec<Cell> {
    let (mut users, mut groups, mut service_accounts) = (vec![], vec![], vec![]);
    for subject in list(b, "/subjects") {
        let subject_name = string(subject, "/name");
        match string(subject, "/kind") {
            "ServiceAccount" => {
                service_accounts.push(format!("{}/{subject_name}", string(subject, "/namespace")))
            }
            "User" => users.push(subject_name.to_owned()),
            "Group" => groups.push(subject_name.to_owned()),
            _ => {}
        }
    }
    vec![
        text(name(b)),
        Cell::text(format!(
            "{}/{}",
            string(b, "/roleRef/kind"),
            string(b, "/roleRef/name")
        )),
        age(b),
        Cell::text(users.join(", ")),
        Cell::text(groups.join(", ")),
        Cell::text(service_accounts.join(", ")),
    ]
}

/// RoleBindings: `printRoleBinding`.
pub fn role_binding() -> Printer {
    Printer::builtin(columns::ROLE_BINDING, binding_cells)
}

/// ClusterRoleBindings: `printClusterRoleBinding`.
pub fn cluster_role_binding() -> Printer {
    Printer::builtin(columns::CLUSTER_ROLE_BINDING, binding_cells)
}

/// Nodes: `printNode`.
pub fn node() -> Printer {
    Printer::builtin(columns::NODE, |n| {
        // The last Ready condition wins, as in printNode's map of conditions.
        let ready = list(n, "/status/conditions")
            .iter()
            .rfind(|c| string(c, "/type") == "Ready");
        let mut status = vec![match ready {
            Some(c) if string(c, "/status") == "True" => "Ready",
            Some(_) => "NotReady",
            None => "Unknown",
        }];
        if boolean(n, "/spec/unschedulable") {
            status.push("SchedulingDisabled");
        }
        // findNodeRoles
        let roles: BTreeSet<&str> = map(n, "/metadata/labels")
            .filter_map(|(key, value)| {
                if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                    (!role.is_empty()).then_some(role)
                } else if key == "kubernetes.io/role" {
                    value.as_str().filter(|v| !v.is_empty())
                } else {
                    None
                }
            })
            .collect();
        let roles = if roles.is_empty() {
            "<none>".to_owned()
        } else {
            roles.into_iter().collect::<Vec<_>>().join(",")
        };
        let address = |type_: &str| {
            list(n, "/status/addresses")
                .iter()
                .find(|a| string(a, "/type") == type_)
                .map_or("<none>", |a| string(a, "/address"))
        };
        let or_unknown = |pointer: &str| match string(n, pointer) {
            "" => "<unknown>",
            value => value,
        };
        vec![
            text(name(n)),
            Cell::text(status.join(",")),
            Cell::text(roles),
            age(n),
            text(string(n, "/status/nodeInfo/kubeletVersion")),
            text(address("InternalIP")),
            text(address("ExternalIP")),
            text(or_unknown("/status/nodeInfo/osImage")),
            text(or_unknown("/status/nodeInfo/kernelVersion")),
            text(or_unknown("/status/nodeInfo/containerRuntimeVersion")),
        ]
    })
}

/// Namespaces: `printNamespace`.
pub fn namespace() -> Printer {
    Printer::builtin(columns::NAMESPACE, |n| {
        vec![text(name(n)), text(string(n, "/status/phase")), age(n)]
    })
}

/// Where an Event's fields are in one shape of it: the apiserver prints the one internal
/// Event it converts both APIs' shapes from, so both print alike.
struct EventFields {
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    /// The object the Event is about.
    regarding: &'static str,
    /// The component and host of the deprecated source.
    source: &'static str,
    reporting_component: &'static str,
    message: &'static str,
}

/// Core v1 Events.
const CORE_EVENT: EventFields = EventFields {
    first_timestamp: "/firstTimestamp",
    last_timestamp: "/lastTimestamp",
    count: "/count",
    regarding: "/involvedObject",
    source: "/source",
    reporting_component: "/reportingComponent",
    message: "/message",
};

/// events.k8s.io/v1 Events: the same fields under the names of `Convert_core_Event_To_v1_Event`.
const NEW_EVENT: EventFields = EventFields {
    first_timestamp: "/deprecatedFirstTimestamp",
    last_timestamp: "/deprecatedLastTimestamp",
    count: "/deprecatedCount",
    regarding: "/regarding",
    source: "/deprecatedSource",
    reporting_component: "/reportingController",
    message: "/note",
};

/// What an absent object reads as: every field of it absent.
static NULL: Value = Value::Null;

/// `printEvent` of an Event whose fields are where `fields` says.
fn event_cells(e: &Value, fields: &EventFields) -> Vec<Cell> {
    let first_seen = match time(e, fields.first_timestamp) {
        Some(first) => Some(first),
        None => time(e, "/eventTime"),
    };
    let mut last_seen = match time(e, fields.last_timestamp) {
        Some(last) => Some(last),
        None => first_seen,
    };
    let mut event_count = int(e, fields.count);
    if let Some(series) = at(e, "/series") {
        last_seen = time(series, "/lastObservedTime");
        event_count = int(series, "/count");
    } else if event_count == 0 {
        // Singleton events of the new API have no count.
        event_count = 1;
    }
    let regarding = at(e, fields.regarding).unwrap_or(&NULL);
    let kind = string(regarding, "/kind").to_lowercase();
    let target = match string(regarding, "/name") {
        "" => kind,
        object => format!("{kind}/{object}"),
    };
    // formatEventSource
    let source = at(e, fields.source).unwrap_or(&NULL);
    let component = match string(source, "/component") {
        "" => string(e, fields.reporting_component),
        value => value,
    };
    let source = match string(source, "/host") {
        "" => string(e, "/reportingInstance"),
        host => host,
    };
    let source = match source {
        "" => component.to_owned(),
        instance => format!("{component}, {instance}"),
    };
    vec![
        Cell::Age(last_seen),
        text(string(e, "/type")),
        text(string(e, "/reason")),
        Cell::text(target),
        text(string(regarding, "/fieldPath")),
        Cell::text(source),
        text(string(e, fields.message).trim()),
        Cell::Age(first_seen),
        Cell::Integer(event_count),
        text(name(e)),
    ]
}

/// Events (core/v1): `printEvent`.
pub fn event() -> Printer {
    Printer::builtin(columns::EVENT, |e| event_cells(e, &CORE_EVENT))
}

/// Events (events.k8s.io/v1): `printEvent` of the internal Event the apiserver converts them
/// to, so the same columns and cells as core Events'.
pub fn event_v1() -> Printer {
    Printer::builtin(columns::EVENT, |e| event_cells(e, &NEW_EVENT))
}

/// ResourceQuotas: `printResourceQuota`.
pub fn resource_quota() -> Printer {
    Printer::builtin(columns::RESOURCE_QUOTA, |q| {
        let mut hard: Vec<(&str, &Value)> = map(q, "/status/hard").collect();
        hard.sort_by(|a, b| a.0.cmp(b.0));
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for (resource, quantity) in hard {
            let used = quantity_in_map(
                q,
                &format!(
                    "/status/used/{}",
                    resource.replace('~', "~0").replace('/', "~1")
                ),
            );
            let entry = format!("{resource}: {used}/{}", quantity.as_str().unwrap_or("0"));
            let mut pieces = resource.split('.');
            if pieces.next() == Some("limits") && pieces.next().is_some() {
                limits.push(entry);
            } else {
                requests.push(entry);
            }
        }
        vec![
            text(name(q)),
            Cell::text(requests.join(", ")),
            Cell::text(limits.join(", ")),
            age(q),
        ]
    })
}

/// PriorityClasses: `printPriorityClass`.
pub fn priority_class() -> Printer {
    Printer::builtin(columns::PRIORITY_CLASS, |p| {
        vec![
            text(name(p)),
            Cell::Integer(int(p, "/value")),
            Cell::Bool(boolean(p, "/globalDefault")),
            age(p),
            text(string(p, "/preemptionPolicy")),
        ]
    })
}

/// Leases: `printLease`.
pub fn lease() -> Printer {
    Printer::builtin(columns::LEASE, |l| {
        vec![
            text(name(l)),
            text(string(l, "/spec/holderIdentity")),
            age(l),
        ]
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::SystemTime;

    use jiff::Timestamp;
    use serde_json::{Value, json};

    use super::*;

    /// An object named `name` created at 2026-01-01T00:00:00Z, with `fields` beside its
    /// metadata (and `metadata` fields merged in).
    pub(crate) fn mk(name: &str, fields: Value) -> Value {
        let mut object = json!({"metadata": {
            "name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        if let Value::Object(fields) = fields {
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("metadata", Value::Object(meta)) => {
                        for (k, v) in meta {
                            object["metadata"][k] = v;
                        }
                    }
                    (_, value) => object[key] = value,
                }
            }
        }
        object
    }

    /// One hour after [`mk`]'s creation time (an age of "60m").
    pub(crate) fn now() -> SystemTime {
        let t: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        SystemTime::from(t)
    }

    /// The cells as text at [`now`]: strings as they are, other values as JSON.
    pub(crate) fn at_age(cells: &[Cell]) -> Vec<String> {
        cells
            .iter()
            .map(|c| match c.to_table_value(now()) {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect()
    }

    fn printed(printer: Printer, object: &Value) -> Vec<String> {
        let cells = printer.cells(object);
        assert_eq!(cells.len(), printer.columns().len(), "one cell per column");
        at_age(&cells)
    }

    fn names(printer: &Printer) -> Vec<(String, i32)> {
        printer
            .columns()
            .iter()
            .map(|c| (c.name.to_string(), c.priority))
            .collect()
    }

    fn wide(names: &[&str]) -> Vec<(String, i32)> {
        names
            .iter()
            .map(|n| match n.strip_suffix('+') {
                Some(n) => (n.to_owned(), 1),
                None => ((*n).to_owned(), 0),
            })
            .collect()
    }

    #[test]
    fn any_json_gives_one_cell_per_column() {
        let printers = [
            pod(),
            deployment(),
            stateful_set(),
            daemon_set(),
            replica_set(),
            job(),
            cron_job(),
            horizontal_pod_autoscaler(),
            pod_disruption_budget(),
            service(),
            endpoint_slice(),
            ingress(),
            ingress_class(),
            network_policy(),
            config_map(),
            secret(),
            persistent_volume_claim(),
            persistent_volume(),
            storage_class(),
            service_account(),
            role(),
            role_binding(),
            cluster_role(),
            cluster_role_binding(),
            node(),
            namespace(),
            event(),
            resource_quota(),
            limit_range(),
            priority_class(),
            lease(),
            custom_resource_definition(),
        ];
        let odd = [
            Value::Null,
            json!(1),
            json!({"metadata": {"name": 5, "creationTimestamp": "soon"}, "spec": "x", "status": [1]}),
            json!({"spec": {"containers": "x", "selector": {"matchExpressions": [{"operator": "Gt"}]},
                            "metrics": [{"type": "Resource"}], "ports": [{}]},
                   "status": {"conditions": [null], "containerStatuses": [{"state": {"terminated": 1}}]}}),
        ];
        for printer in &printers {
            for object in &odd {
                assert_eq!(printer.cells(object).len(), printer.columns().len());
            }
        }
    }

    #[test]
    fn pod_columns() {
        assert_eq!(
            names(&pod()),
            wide(&[
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP+",
                "Node+",
                "Nominated Node+",
                "Readiness Gates+"
            ])
        );
    }

    #[test]
    fn deployment_ready_and_selector() {
        assert_eq!(
            names(&deployment()),
            wide(&[
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers+",
                "Images+",
                "Selector+"
            ])
        );
        let d = mk(
            "web",
            json!({
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}}),
        );
        assert_eq!(
            printed(deployment(), &d),
            ["web", "2/3", "3", "1", "60m", "a,b", "x:1,y:2", "app=web"]
        );
        let no_selector = mk("d", json!({}));
        assert_eq!(printed(deployment(), &no_selector)[7], "");
    }

    #[test]
    fn stateful_set_ready_of_desired() {
        assert_eq!(
            names(&stateful_set()),
            wide(&["Name", "Ready", "Age", "Containers+", "Images+"])
        );
        let s = mk(
            "db",
            json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 1}}),
        );
        assert_eq!(printed(stateful_set(), &s)[1], "1/2");
    }

    #[test]
    fn daemon_set_node_selector() {
        assert_eq!(
            names(&daemon_set()),
            wide(&[
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers+",
                "Images+",
                "Selector+"
            ])
        );
        let d = mk(
            "ds",
            json!({"spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}}}}}),
        );
        let cells = printed(daemon_set(), &d);
        assert_eq!(
            (cells[6].as_str(), cells[10].as_str()),
            ("os=linux", "<none>")
        );
    }

    #[test]
    fn replica_set_counts() {
        assert_eq!(
            names(&replica_set()),
            wide(&[
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Age",
                "Containers+",
                "Images+",
                "Selector+"
            ])
        );
        let r = mk(
            "rs",
            json!({"spec": {"replicas": 3}, "status": {"replicas": 2, "readyReplicas": 1}}),
        );
        assert_eq!(&printed(replica_set(), &r)[1..4], ["3", "2", "1"]);
    }

    #[test]
    fn job_status_completions_and_duration() {
        assert_eq!(
            names(&job()),
            wide(&[
                "Name",
                "Status",
                "Completions",
                "Duration",
                "Age",
                "Containers+",
                "Images+",
                "Selector+"
            ])
        );
        let done = mk(
            "j",
            json!({
            "spec": {"completions": 2},
            "status": {"succeeded": 2, "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:03:10Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}}),
        );
        assert_eq!(&printed(job(), &done)[1..4], ["Complete", "2/2", "3m10s"]);
        let running = mk(
            "j",
            json!({"spec": {"parallelism": 3}, "status": {"startTime": "2026-01-01T00:30:00Z"}}),
        );
        assert_eq!(
            &printed(job(), &running)[1..4],
            ["Running", "0/1 of 3", "30m"]
        );
        let suspended = mk(
            "j",
            json!({"status": {"conditions": [{"type": "Suspended", "status": "True"}]}}),
        );
        assert_eq!(&printed(job(), &suspended)[1..4], ["Suspended", "0/1", ""]);
    }

    #[test]
    fn cron_job_suspend_and_last_schedule() {
        assert_eq!(
            names(&cron_job()),
            wide(&[
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers+",
                "Images+",
                "Selector+"
            ])
        );
        let c = mk(
            "c",
            json!({"spec": {"schedule": "*/5 * * * *", "suspend": false},
                              "status": {"active": [{}], "lastScheduleTime": "2026-01-01T00:55:00Z"}}),
        );
        assert_eq!(
            &printed(cron_job(), &c)[1..7],
            ["*/5 * * * *", "<none>", "False", "1", "5m", "60m"]
        );
        let never = mk("c", json!({}));
        assert_eq!(
            &printed(cron_job(), &never)[3..6],
            ["<unset>", "0", "<none>"]
        );
    }

    #[test]
    fn hpa_targets() {
        assert_eq!(
            names(&horizontal_pod_autoscaler()),
            wide(&[
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ])
        );
        let h = mk(
            "h",
            json!({
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50}}}]}}),
        );
        assert_eq!(
            &printed(horizontal_pod_autoscaler(), &h)[1..6],
            [
                "Deployment/web",
                "cpu: 50%/80%, <unknown>/10 + 1 more...",
                "<unset>",
                "5",
                "2"
            ]
        );
        assert_eq!(
            printed(horizontal_pod_autoscaler(), &mk("h", json!({})))[2],
            "<none>"
        );
    }

    #[test]
    fn pdb_int_or_string() {
        assert_eq!(
            names(&pod_disruption_budget()),
            wide(&[
                "Name",
                "Min Available",
                "Max Unavailable",
                "Allowed Disruptions",
                "Age"
            ])
        );
        let p = mk(
            "p",
            json!({"spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}}),
        );
        assert_eq!(
            &printed(pod_disruption_budget(), &p)[1..4],
            ["50%", "N/A", "1"]
        );
    }

    #[test]
    fn service_external_ips_and_ports() {
        assert_eq!(
            names(&service()),
            wide(&[
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector+"
            ])
        );
        let lb = mk(
            "s",
            json!({
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.1"], "externalIPs": ["1.2.3.4"],
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                     "selector": {"app": "x"}},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "5.6.7.8"}]}}}),
        );
        assert_eq!(
            printed(service(), &lb),
            [
                "s",
                "LoadBalancer",
                "10.0.0.1",
                "5.6.7.8,lb.example,1.2.3.4",
                "80:30080/TCP,53/UDP",
                "60m",
                "app=x"
            ]
        );
        let pending = mk("s", json!({"spec": {"type": "LoadBalancer"}}));
        assert_eq!(
            &printed(service(), &pending)[2..5],
            ["<none>", "<pending>", "<none>"]
        );
        let external = mk(
            "s",
            json!({"spec": {"type": "ExternalName", "externalName": "db.example"}}),
        );
        assert_eq!(printed(service(), &external)[3], "db.example");
    }

    #[test]
    fn endpoint_slice_lists_three_and_more() {
        assert_eq!(
            names(&endpoint_slice()),
            wide(&["Name", "AddressType", "Ports", "Endpoints", "Age"])
        );
        let e = mk(
            "e",
            json!({"addressType": "IPv4", "ports": [{"port": 80}, {"name": "dns"}, {}],
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3", "10.0.0.4"]}]}),
        );
        assert_eq!(
            &printed(endpoint_slice(), &e)[1..4],
            ["IPv4", "80,dns,*", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."]
        );
        assert_eq!(
            &printed(endpoint_slice(), &mk("e", json!({})))[2..4],
            ["<unset>", "<unset>"]
        );
    }

    #[test]
    fn ingress_hosts_and_ports() {
        assert_eq!(
            names(&ingress()),
            wide(&["Name", "Class", "Hosts", "Address", "Ports", "Age"])
        );
        let i = mk(
            "i",
            json!({"spec": {"ingressClassName": "nginx", "tls": [{}],
            "rules": [{"host": "a"}, {}, {"host": "c"}, {"host": "d"}, {"host": "e"}]}}),
        );
        assert_eq!(
            &printed(ingress(), &i)[1..5],
            ["nginx", "a,c,d + 2 more...", "", "80, 443"]
        );
        assert_eq!(
            &printed(ingress(), &mk("i", json!({})))[1..5],
            ["<none>", "*", "", "80"]
        );
    }

    #[test]
    fn ingress_class_parameters() {
        assert_eq!(
            names(&ingress_class()),
            wide(&["Name", "Controller", "Parameters", "Age"])
        );
        let c = mk(
            "c",
            json!({"spec": {"controller": "k8s.io/x",
            "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p"}}}),
        );
        assert_eq!(
            &printed(ingress_class(), &c)[1..3],
            ["k8s.io/x", "Params.example.com/p"]
        );
    }

    #[test]
    fn network_policy_pod_selector() {
        assert_eq!(
            names(&network_policy()),
            wide(&["Name", "Pod-Selector", "Age"])
        );
        assert_eq!(
            printed(network_policy(), &mk("n", json!({"spec": {}})))[1],
            "<none>"
        );
        let n = mk(
            "n",
            json!({"spec": {"podSelector": {"matchLabels": {"role": "db"}}}}),
        );
        assert_eq!(printed(network_policy(), &n)[1], "role=db");
    }

    #[test]
    fn config_map_and_secret_count_keys() {
        assert_eq!(names(&config_map()), wide(&["Name", "Data", "Age"]));
        let c = mk(
            "c",
            json!({"data": {"a": "1"}, "binaryData": {"b": "AA=="}}),
        );
        assert_eq!(printed(config_map(), &c)[1], "2");
        assert_eq!(names(&secret()), wide(&["Name", "Type", "Data", "Age"]));
        let s = mk("s", json!({"type": "Opaque", "data": {"a": "MQ=="}}));
        assert_eq!(&printed(secret(), &s)[1..3], ["Opaque", "1"]);
    }

    #[test]
    fn pvc_capacity_only_when_bound() {
        assert_eq!(
            names(&persistent_volume_claim()),
            wide(&[
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode+"
            ])
        );
        let pending = mk(
            "c",
            json!({"spec": {"storageClassName": "fast", "volumeMode": "Filesystem"},
                                    "status": {"phase": "Pending"}}),
        );
        assert_eq!(
            printed(persistent_volume_claim(), &pending),
            [
                "c",
                "Pending",
                "",
                "",
                "",
                "fast",
                "<unset>",
                "60m",
                "Filesystem"
            ]
        );
        let bound = mk(
            "c",
            json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
            "spec": {"volumeName": "pv1", "storageClassName": "fast"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}),
        );
        assert_eq!(
            &printed(persistent_volume_claim(), &bound)[1..6],
            ["Bound", "pv1", "1Gi", "RWO", "old"]
        );
    }

    #[test]
    fn pv_claim_and_terminating() {
        assert_eq!(
            names(&persistent_volume()),
            wide(&[
                "Name",
                "Capacity",
                "Access Modes",
                "Reclaim Policy",
                "Status",
                "Claim",
                "StorageClass",
                "VolumeAttributesClass",
                "Reason",
                "Age",
                "VolumeMode+"
            ])
        );
        let p = mk(
            "pv",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:59:00Z"},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"], "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": "ns", "name": "c"}},
            "status": {"phase": "Bound"}}),
        );
        assert_eq!(
            &printed(persistent_volume(), &p)[1..9],
            [
                "5Gi",
                "RWX",
                "Retain",
                "Terminating",
                "ns/c",
                "",
                "<unset>",
                ""
            ]
        );
        assert_eq!(printed(persistent_volume(), &mk("pv", json!({})))[1], "0");
    }

    #[test]
    fn storage_class_default_and_defaults() {
        assert_eq!(
            names(&storage_class()),
            wide(&[
                "Name",
                "Provisioner",
                "ReclaimPolicy",
                "VolumeBindingMode",
                "AllowVolumeExpansion",
                "Age"
            ])
        );
        let s = mk(
            "std",
            json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                                "provisioner": "example.com/x"}),
        );
        assert_eq!(
            &printed(storage_class(), &s)[..5],
            [
                "std (default)",
                "example.com/x",
                "Delete",
                "Immediate",
                "false"
            ]
        );
    }

    #[test]
    fn service_account_and_namespace() {
        assert_eq!(names(&service_account()), wide(&["Name", "Age"]));
        assert_eq!(
            printed(service_account(), &mk("sa", json!({}))),
            ["sa", "60m"]
        );
        assert_eq!(names(&namespace()), wide(&["Name", "Status", "Age"]));
        assert_eq!(
            printed(
                namespace(),
                &mk("n", json!({"status": {"phase": "Active"}}))
            )[1],
            "Active"
        );
    }

    #[test]
    fn kinds_without_a_printer_use_the_default_convertor() {
        for printer in [
            role(),
            cluster_role(),
            limit_range(),
            custom_resource_definition(),
        ] {
            assert_eq!(names(&printer), wide(&["Name", "Created At"]));
            assert_eq!(
                printed(printer, &mk("x", json!({})))[1],
                "2026-01-01T00:00:00Z"
            );
        }
    }

    #[test]
    fn bindings_list_subjects_by_kind() {
        for printer in [role_binding(), cluster_role_binding()] {
            assert_eq!(
                names(&printer),
                wide(&[
                    "Name",
                    "Role",
                    "Age",
                    "Users+",
                    "Groups+",
                    "ServiceAccounts+"
                ])
            );
            let b = mk(
                "b",
                json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [
                {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                {"kind": "Group", "name": "devs"}, {"kind": "ServiceAccount", "namespace": "ns", "name": "sa"}]}),
            );
            assert_eq!(
                printed(printer, &b),
                [
                    "b",
                    "ClusterRole/view",
                    "60m",
                    "alice, bob",
                    "devs",
                    "ns/sa"
                ]
            );
        }
    }

    #[test]
    fn node_status_roles_and_addresses() {
        assert_eq!(
            names(&node()),
            wide(&[
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP+",
                "External-IP+",
                "OS-Image+",
                "Kernel-Version+",
                "Container-Runtime+"
            ])
        );
        let n = mk(
            "n1",
            json!({
            "metadata": {"labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "edge", "node-role.kubernetes.io/": "x"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.35.4", "osImage": "Linux"}}}),
        );
        assert_eq!(
            printed(node(), &n),
            [
                "n1",
                "NotReady,SchedulingDisabled",
                "control-plane,edge",
                "60m",
                "v1.35.4",
                "10.1.1.1",
                "<none>",
                "Linux",
                "<unknown>",
                "<unknown>"
            ]
        );
        assert_eq!(printed(node(), &mk("n", json!({})))[1], "Unknown");
    }

    #[test]
    fn event_times_target_and_source() {
        assert_eq!(
            names(&event()),
            wide(&[
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject+",
                "Source+",
                "Message",
                "First Seen+",
                "Count+",
                "Name+"
            ])
        );
        let e = mk(
            "e1",
            json!({"type": "Normal", "reason": "Pulled", "message": " done \n",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet"}, "reportingInstance": "node-1",
            "firstTimestamp": "2026-01-01T00:10:00Z", "lastTimestamp": "2026-01-01T00:58:00Z", "count": 4}),
        );
        assert_eq!(
            printed(event(), &e),
            [
                "2m",
                "Normal",
                "Pulled",
                "pod/p",
                "spec.containers{a}",
                "kubelet, node-1",
                "done",
                "50m",
                "4",
                "e1"
            ]
        );
        let new_api = mk(
            "e2",
            json!({"eventTime": "2026-01-01T00:59:30.000000Z", "involvedObject": {"kind": "Node"},
            "series": {"count": 7, "lastObservedTime": "2026-01-01T00:59:50.000000Z"}}),
        );
        let cells = printed(event(), &new_api);
        assert_eq!(
            (
                cells[0].as_str(),
                cells[3].as_str(),
                cells[7].as_str(),
                cells[8].as_str()
            ),
            ("10s", "node", "30s", "7")
        );
        let bare = printed(event(), &mk("e3", json!({})));
        assert_eq!((bare[0].as_str(), bare[8].as_str()), ("<unknown>", "1"));
    }

    #[test]
    fn an_event_of_the_new_api_prints_as_its_core_shape() {
        assert_eq!(names(&event_v1()), names(&event()));
        let core = mk(
            "e1",
            json!({"type": "Warning", "reason": "Failed", "message": "no",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "node-1"},
            "reportingComponent": "kubelet", "reportingInstance": "node-1",
            "firstTimestamp": "2026-01-01T00:10:00Z", "lastTimestamp": "2026-01-01T00:58:00Z",
            "count": 4}),
        );
        // `Convert_core_Event_To_v1_Event` of it.
        let new_api = mk(
            "e1",
            json!({"type": "Warning", "reason": "Failed", "note": "no",
            "regarding": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "deprecatedSource": {"component": "kubelet", "host": "node-1"},
            "reportingController": "kubelet", "reportingInstance": "node-1",
            "deprecatedFirstTimestamp": "2026-01-01T00:10:00Z",
            "deprecatedLastTimestamp": "2026-01-01T00:58:00Z", "deprecatedCount": 4}),
        );
        assert_eq!(printed(event_v1(), &new_api), printed(event(), &core));
        assert_eq!(printed(event_v1(), &new_api)[5], "kubelet, node-1");
        // Without a deprecated source, the reporting controller and instance.
        let reported = mk(
            "e2",
            json!({"reportingController": "ctl", "reportingInstance": "i-1",
            "eventTime": "2026-01-01T00:59:30.000000Z"}),
        );
        let cells = printed(event_v1(), &reported);
        assert_eq!((cells[5].as_str(), cells[8].as_str()), ("ctl, i-1", "1"));
    }

    #[test]
    fn endpoints_list_three_addresses_and_port_pairs_and_count_the_rest() {
        assert_eq!(names(&endpoints()), wide(&["Name", "Endpoints", "Age"]));
        let cells = |subsets: Value| printed(endpoints(), &mk("ep", json!({"subsets": subsets})));
        assert_eq!(printed(endpoints(), &mk("ep", json!({})))[1], "<none>");
        assert_eq!(
            cells(
                json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                "ports": [{"port": 80}]}])
            )[1],
            "10.0.0.1:80,[fd00::1]:80"
        );
        // Each address with each port, in order; past three, counted.
        assert_eq!(
            cells(
                json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                "ports": [{"port": 80}, {"port": 443}]}])
            )[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        // A headless subset without ports: its addresses alone; not-ready ones never.
        assert_eq!(
            cells(json!([{"addresses": [{"ip": "10.0.0.1"}],
                "notReadyAddresses": [{"ip": "10.0.0.9"}]},
                {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 53}]}]))[1],
            "10.0.0.1,10.0.0.2:53"
        );
        assert_eq!(
            cells(json!([{"notReadyAddresses": [{"ip": "10.0.0.9"}]}]))[1],
            ""
        );
    }

    #[test]
    fn resource_quota_splits_limits() {
        assert_eq!(
            names(&resource_quota()),
            wide(&["Name", "Request", "Limit", "Age"])
        );
        let q = mk(
            "q",
            json!({"status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "limits": "3"},
            "used": {"pods": "1", "limits.cpu": "500m"}}}),
        );
        assert_eq!(
            &printed(resource_quota(), &q)[1..3],
            [
                "limits: 0/3, pods: 1/10, requests.memory: 0/1Gi",
                "limits.cpu: 500m/2"
            ]
        );
    }

    #[test]
    fn priority_class_values() {
        assert_eq!(
            names(&priority_class()),
            wide(&["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"])
        );
        let p = mk(
            "high",
            json!({"value": 1000, "globalDefault": true, "preemptionPolicy": "Never"}),
        );
        assert_eq!(
            printed(priority_class(), &p),
            ["high", "1000", "true", "60m", "Never"]
        );
    }
}
