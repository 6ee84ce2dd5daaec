//! What an informer does with each object it is sent, from the text to the record in the
//! cache, for 10,000 Pods and 10,000 Events, each way: decoded into its k8s-openapi type and
//! kept as that type writes it (before: the explicit nulls the apiserver sends are lost), and
//! decoded as [`confk8s::Sent`], keeping the text as sent (now). The objects are as the
//! apiserver sends them: managedFields, a null `lastProbeTime`, an Event's null
//! `eventTime`. Prints a table and writes it to target/bench-decode.md. Run:
//! `cargo bench --bench decode [-- --objects N]`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use biz::PodRecord;
use confk8s::{Delta, Handler, Sent, strip_noise};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8scache::{AsGeneric, Caches, FromSent};
use model::RecordedPod;
use serde_json::json;

/// A Pod of a ReplicaSet, running, as the apiserver writes it.
fn pod(i: usize) -> String {
    let conditions: Vec<_> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| {
        json!({"type": t, "status": "True", "lastProbeTime": null,
            "lastTransitionTime": "2026-11-01T10:00:02Z"})
    })
    .collect();
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": format!("web-5d8f7c9b4-{i:06}"), "generateName": "web-5d8f7c9b4-",
            "namespace": format!("ns-{}", i % 20), "uid": format!("0d6c1b2e-{i:08}-4f7a-9c3e-5b1d2a8f6e40"),
            "resourceVersion": (1000 + i).to_string(), "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"app": format!("app-{}", i % 1000), "pod-template-hash": "5d8f7c9b4", "tier": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b4",
                "uid": "8a1f3c2d-1111-4f7a-9c3e-5b1d2a8f6e40", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                        "f:ownerReferences": {".": {}, "k:{\"uid\":\"8a1f3c2d-1111-4f7a-9c3e-5b1d2a8f6e40\"}": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                        "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {},
                        "f:containerPort": {}, "f:protocol": {}}}, "f:resources": {}, "f:terminationMessagePath": {},
                        "f:terminationMessagePolicy": {}}}, "f:dnsPolicy": {}, "f:enableServiceLinks": {},
                        "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {}}}},
                {"manager": "kwok", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:02Z",
                 "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {
                    "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {},
                        "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {},
                    "f:startTime": {}}}}
            ]
        },
        "spec": {
            "containers": [{"name": "web", "image": "registry.example/web:1.27",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}], "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default",
            "nodeName": format!("node-{}", i % 50), "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.1.0.7", "hostIPs": [{"ip": "10.1.0.7"}], "podIP": "10.244.3.17", "podIPs": [{"ip": "10.244.3.17"}],
            "startTime": "2026-11-01T10:00:01Z",
            "containerStatuses": [{"name": "web", "state": {"running": {"startedAt": "2026-11-01T10:00:02Z"}},
                "lastState": {}, "ready": true, "restartCount": 0, "image": "registry.example/web:1.27",
                "imageID": "", "started": true}],
            "qosClass": "BestEffort"
        }
    })
    .to_string()
}

/// An Event about a Pod, as the apiserver writes it.
fn event(i: usize) -> String {
    json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": format!("web-{i:06}.18a2f3b4c5d6e7f8"), "namespace": format!("ns-{}", i % 20),
            "uid": format!("7e2f-{i:08}"), "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:count": {},
                "f:firstTimestamp": {}, "f:involvedObject": {}, "f:lastTimestamp": {}, "f:message": {},
                "f:reason": {}, "f:reportingComponent": {}, "f:reportingInstance": {}, "f:source": {"f:component": {},
                "f:host": {}}, "f:type": {}}}]},
        "involvedObject": {"kind": "Pod", "namespace": format!("ns-{}", i % 20), "name": format!("web-{i:06}"),
            "uid": format!("0d6c1b2e-{i:08}"), "apiVersion": "v1", "resourceVersion": "17", "fieldPath": "spec.containers{web}"},
        "reason": "Started", "message": "Started container web",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-01T10:00:00Z", "lastTimestamp": "2026-11-01T10:00:00Z", "count": 1,
        "type": "Normal", "eventTime": null, "reportingComponent": "kubelet", "reportingInstance": "node-1"
    })
    .to_string()
}

/// The CPU time this thread has used: on a machine others share, the time a run takes
/// on the clock depends on them, its CPU time much less.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(failed, 0, "the thread's CPU clock is readable");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Median CPU time of `f` over at least seven runs filling about three seconds.
fn median(mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut kept = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) || times.len() < 7 {
        let t = thread_cpu_time();
        kept = black_box(f());
        times.push(thread_cpu_time().saturating_sub(t));
    }
    times.sort();
    (times[times.len() / 2], kept)
}

/// Decodes every text as `decode` does and hands it to `handler` as one relist, as the
/// informer does with a list; the records the cache then holds.
fn relist<K: 'static>(
    texts: &[String],
    handler: Arc<dyn Handler<K>>,
    decode: impl Fn(&str) -> K,
) -> usize {
    let mut batch = handler.begin_relist();
    for text in texts {
        batch.add(&Delta::Added(decode(text)));
    }
    batch.commit("1");
    texts.len()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .windows(2)
        .find(|w| w[0] == "--objects")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(10_000usize);
    let pods: Vec<String> = (0..n).map(pod).collect();
    let events: Vec<String> = (0..n).map(event).collect();
    let bytes = |texts: &[String]| texts.iter().map(String::len).sum::<usize>();
    let event_resource = k8sdao::built_in("events")
        .expect("events are a built-in kind")
        .resource();

    let (pods_typed, _) = median(|| {
        let caches = Caches::default();
        relist(&pods, caches.pods.clone(), |text| {
            // Whole: this record keeps the object as its type writes it, so a Pod decoded
            // only as far as the record reads would be kept without most of its spec.
            let mut pod: Pod = serde_json::from_str(text).expect("a pod");
            strip_noise(&mut pod);
            pod
        })
    });
    let (pods_sent, _) = median(|| {
        let caches = Caches::default();
        relist(
            &pods,
            FromSent::<PodRecord>::new(caches.pods.clone()),
            |text| {
                let mut pod = serde_json::from_str::<Sent<RecordedPod>>(text)
                    .expect("a pod")
                    .map(Pod::from);
                strip_noise(&mut pod);
                pod
            },
        )
    });
    let (events_typed, _) = median(|| {
        let caches = Caches::default();
        let cache = caches.serve(&event_resource);
        relist(
            &events,
            AsGeneric::<Event>::new(event_resource.clone(), cache),
            |text| {
                let mut event: Event = serde_json::from_str(text).expect("an event");
                strip_noise(&mut event);
                event
            },
        )
    });
    let (events_sent, _) = median(|| {
        let caches = Caches::default();
        let cache = caches.serve(&event_resource);
        relist(
            &events,
            AsGeneric::<Sent<Event>>::new(event_resource.clone(), cache),
            |text| {
                let mut event: Sent<Event> = serde_json::from_str(text).expect("an event");
                strip_noise(&mut event);
                event
            },
        )
    });

    // The decoding alone, without the records.
    let (decode_typed, _) = median(|| {
        for text in &pods {
            black_box(serde_json::from_str::<RecordedPod>(text).expect("a pod"));
        }
        pods.len()
    });
    let (decode_sent, _) = median(|| {
        for text in &pods {
            black_box(serde_json::from_str::<Sent<RecordedPod>>(text).expect("a pod"));
        }
        pods.len()
    });
    println!("decoding alone: typed {decode_typed:.1?}, sent {decode_sent:.1?}");

    let row = |what: &str, texts: &[String], typed: Duration, sent: Duration| {
        format!(
            "| {n} {what} ({} MB sent) | {typed:.1?} | {sent:.1?} | {:.2} |\n",
            bytes(texts) / 1_000_000,
            sent.as_secs_f64() / typed.as_secs_f64()
        )
    };
    let table = format!(
        "| text to cached record, median CPU time | typed, written again (nulls lost) | as sent (`Sent`) | sent / typed |\n\
         |---|---|---|---|\n{}{}",
        row("Pods", &pods, pods_typed, pods_sent),
        row("Events", &events, events_typed, events_sent),
    );
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-decode.md");
    std::fs::write(&out, &table).expect("write target/bench-decode.md");
}
