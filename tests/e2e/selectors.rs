//! Differential tests of `labelSelector` and `fieldSelector` on `/pods`: for a corpus of
//! selectors, k8sailor must select exactly the pods the kube-apiserver's LIST selects, and
//! reject (400 with a message) exactly what the apiserver rejects with 400.
//!
//! The pods never run (there is no scheduler or kubelet), so their spec and a patched status
//! stay as written. Every mismatch is collected and printed before the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::{Server, TestNamespace, cleanup_in_background, eventually};

const SOON: Duration = Duration::from_secs(30);

/// What one side answered for one selector.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// 200: the names of the selected pods.
    Pods(BTreeSet<String>),
    /// 400 and its message.
    BadRequest(String),
    /// Anything else, described.
    Other(String),
}

/// What the apiserver is expected to do with a corpus entry (checked too: a wrong
/// expectation is reported like a mismatch, so the corpus cannot silently go stale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Valid,
    Invalid,
}
use Expect::{Invalid, Valid};

#[derive(Clone, Copy)]
enum Kind {
    Label,
    Field,
}

impl Kind {
    fn param(self) -> &'static str {
        match self {
            Kind::Label => "labelSelector",
            Kind::Field => "fieldSelector",
        }
    }
}

/// Nodes for the pods' `spec.nodeName`: without them the pod garbage collector deletes the
/// pods as orphans after ~40 s. Unschedulable, and deleted when the test ends.
struct TestNodes {
    names: Vec<String>,
}

impl TestNodes {
    async fn create(client: &Client, names: &[String]) -> TestNodes {
        let api = Api::<Node>::all(client.clone());
        for name in names {
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"k8sailor-e2e": "selectors"}},
                "spec": {"unschedulable": true}
            }))
            .unwrap();
            api.create(&PostParams::default(), &node)
                .await
                .expect("create a test node");
        }
        TestNodes {
            names: names.to_vec(),
        }
    }
}

impl Drop for TestNodes {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.names);
        cleanup_in_background(move |client| async move {
            let api = Api::<Node>::all(client);
            for name in names {
                let _ = api.delete(&name, &DeleteParams::background()).await;
            }
        });
    }
}

/// The pods of the fixture: varied labels (prefixed keys, empty values, integers for `>`/`<`,
/// keys absent on some pods) and pod fields.
fn pods(node_a: &str, node_b: &str) -> Vec<Value> {
    let pod = |name: &str, labels: Value, spec: Value| {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "main", "image": "busybox:1.36"}]);
        json!({"metadata": {"name": name, "labels": labels}, "spec": spec})
    };
    vec![
        pod(
            "p01",
            json!({"app": "web", "tier": "frontend", "env": "prod",
                   "example.com/team": "payments", "replicas": "3", "version": "v1"}),
            json!({"nodeName": node_a}),
        ),
        pod(
            "p02",
            json!({"app": "web", "tier": "frontend", "env": "staging",
                   "example.com/team": "search", "replicas": "10"}),
            json!({"nodeName": node_b, "restartPolicy": "Never"}),
        ),
        pod(
            "p03",
            json!({"app": "api", "tier": "backend", "env": "prod",
                   "example.com/team": "payments", "replicas": "1", "canary": ""}),
            json!({"restartPolicy": "OnFailure", "schedulerName": "custom-scheduler"}),
        ),
        pod(
            "p04",
            json!({"app": "api", "tier": "backend", "env": "dev", "replicas": "0"}),
            json!({"serviceAccountName": "builder"}),
        ),
        pod(
            "p05",
            json!({"app": "db", "tier": "backend", "env": "prod",
                   "example.com/team": "", "replicas": "007"}),
            json!({"hostNetwork": true}),
        ),
        pod(
            "p06",
            json!({"app": "db", "env": "", "replicas": "abc"}),
            json!({"nodeName": node_a, "hostNetwork": true, "restartPolicy": "Never"}),
        ),
        pod(
            "p07",
            json!({"app": "cache", "tier": "cache", "replicas": "9223372036854775807",
                   "app.kubernetes.io/name": "cache"}),
            json!({"schedulerName": "custom-scheduler", "serviceAccountName": "builder"}),
        ),
        pod("p08", json!({}), json!({})),
        pod("p09", json!({"canary": "true"}), json!({})),
        pod(
            "p10",
            json!({"app": "web", "tier": "frontend", "env": "prod", "version": "v2",
                   "replicas": "5", "app.kubernetes.io/name": "web"}),
            json!({"restartPolicy": "OnFailure"}),
        ),
        pod(
            "p11",
            json!({"app": "worker", "env": "prod", "replicas": "99999999999999999999",
                   "in": "notin"}),
            json!({}),
        ),
        pod(
            "p12",
            json!({"app": "worker", "tier": "backend", "example.com/team": "infra",
                   "replicas": "2", "A_b.C-d": "Value_1.x"}),
            json!({"nodeName": node_b}),
        ),
    ]
}

/// Status set by hand (nothing runs the pods, so nothing overwrites it).
fn statuses() -> Vec<(&'static str, Value)> {
    vec![
        (
            "p03",
            json!({"podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}]}),
        ),
        ("p04", json!({"nominatedNodeName": "node-c"})),
        (
            "p09",
            json!({"phase": "Running", "podIP": "10.1.2.9", "podIPs": [{"ip": "10.1.2.9"}]}),
        ),
    ]
}

struct Fixture {
    ns: TestNamespace,
    server: Server,
    _nodes: TestNodes,
    all: BTreeSet<String>,
}

async fn fixture(test: &str) -> Fixture {
    let ns = TestNamespace::new(test).await;
    let node_a = format!("{}-node-a", ns.name);
    let node_b = format!("{}-node-b", ns.name);
    let nodes = TestNodes::create(&ns.client, &[node_a.clone(), node_b.clone()]).await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "builder"}})).unwrap();
    ns.api::<ServiceAccount>()
        .create(&PostParams::default(), &sa)
        .await
        .expect("create the builder service account");

    let api = ns.api::<Pod>();
    let mut all = BTreeSet::new();
    for raw in pods(&node_a, &node_b) {
        let pod: Pod = serde_json::from_value(raw).unwrap();
        let name = pod.metadata.name.clone().unwrap();
        // The namespace's `default` ServiceAccount appears shortly after the namespace; the
        // apiserver refuses pods until then.
        eventually(SOON, &format!("pod {name} created"), || {
            let (api, pod) = (&api, &pod);
            async move {
                match api.create(&PostParams::default(), pod).await {
                    Ok(_) => Some(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
                    Err(_) => None,
                }
            }
        })
        .await;
        all.insert(name);
    }
    for (name, status) in statuses() {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("patch the status of {name}: {e}"));
    }

    let server = Server::start(&["--namespace", &ns.name]);
    // Compare only once k8sailor holds every pod at the version the apiserver has.
    let path = format!("/pods?namespace={}", ns.name);
    eventually(
        SOON,
        "k8sailor to hold every pod as the apiserver has it",
        || {
            let (api, server, path) = (&api, &server, &path);
            async move {
                let want: BTreeMap<String, String> = api
                    .list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .map(|p| {
                        (
                            p.metadata.name.unwrap(),
                            p.metadata.resource_version.unwrap(),
                        )
                    })
                    .collect();
                let (status, body) = server.get(path).await;
                let have: BTreeMap<String, String> = body["data"]
                    .as_array()?
                    .iter()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap_or_default().to_owned(),
                            p["resourceVersion"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect();
                (status == 200 && want.len() == 12 && want == have).then_some(())
            }
        },
    )
    .await;
    Fixture {
        ns,
        server,
        _nodes: nodes,
        all,
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

async fn apiserver_answer(api: &Api<Pod>, kind: Kind, selector: &str) -> Answer {
    let lp = match kind {
        Kind::Label => ListParams::default().labels(selector),
        Kind::Field => ListParams::default().fields(selector),
    };
    match api.list(&lp).await {
        Ok(list) => Answer::Pods(
            list.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect(),
        ),
        Err(kube::Error::Api(s)) if s.code == 400 => Answer::BadRequest(s.message),
        Err(e) => Answer::Other(e.to_string()),
    }
}

async fn k8sailor_answer(server: &Server, ns: &str, kind: Kind, selector: &str) -> Answer {
    let path = format!(
        "/pods?namespace={}&{}={}",
        encode(ns),
        kind.param(),
        encode(selector)
    );
    let (status, body) = server.get(&path).await;
    match (status, &body["data"], body["error"].as_str()) {
        (200, Value::Array(items), _) => Answer::Pods(
            items
                .iter()
                .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
                .collect(),
        ),
        (400, _, Some(error)) if !error.is_empty() && body["code"] == 400 => {
            Answer::BadRequest(error.to_owned())
        }
        _ => Answer::Other(format!("{status} {body}")),
    }
}

/// Runs the corpus against both sides and fails with every mismatch.
async fn compare(fx: &Fixture, kind: Kind, corpus: &[(String, Expect)]) {
    let api = fx.ns.api::<Pod>();
    let mut mismatches = Vec::new();
    let mut distinct_results = BTreeSet::new();
    let (mut valid, mut invalid) = (0, 0);
    for (selector, expect) in corpus {
        let theirs = apiserver_answer(&api, kind, selector).await;
        let ours = k8sailor_answer(&fx.server, &fx.ns.name, kind, selector).await;
        let case = format!("{}={selector:?}", kind.param());
        match (&theirs, *expect) {
            (Answer::Pods(p), Valid) => {
                valid += 1;
                distinct_results.insert(p.clone());
            }
            (Answer::BadRequest(_), Invalid) => invalid += 1,
            _ => mismatches.push(format!(
                "{case}: expected the apiserver to find it {expect:?}, it answered {theirs:?}"
            )),
        }
        let agree = match (&theirs, &ours) {
            (Answer::Pods(a), Answer::Pods(b)) => a == b,
            (Answer::BadRequest(_), Answer::BadRequest(_)) => true,
            _ => false,
        };
        if !agree {
            let only = |a: &Answer, b: &Answer| match (a, b) {
                (Answer::Pods(a), Answer::Pods(b)) => {
                    format!(
                        " (only in apiserver: {:?}, only in k8sailor: {:?})",
                        a.difference(b).collect::<Vec<_>>(),
                        b.difference(a).collect::<Vec<_>>()
                    )
                }
                _ => String::new(),
            };
            mismatches.push(format!(
                "{case}:\n    apiserver: {theirs:?}\n    k8sailor:  {ours:?}{}",
                only(&theirs, &ours)
            ));
        }
    }
    for m in &mismatches {
        println!("MISMATCH {m}");
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} {} cases differ:\n{}",
        mismatches.len(),
        corpus.len(),
        kind.param(),
        mismatches.join("\n")
    );
    // Guard against a vacuous pass (e.g. every selector selecting nothing).
    assert!(
        distinct_results.len() >= corpus.len() / 4,
        "only {} distinct answers over {valid} valid selectors: {distinct_results:?}",
        distinct_results.len()
    );
    assert!(
        distinct_results.contains(&fx.all),
        "no selector selected every pod"
    );
    assert!(
        distinct_results.contains(&BTreeSet::new()),
        "no selector selected nothing"
    );
    println!(
        "{}: {valid} valid and {invalid} invalid selectors agree",
        kind.param()
    );
}

fn corpus(valid: &[&str], invalid: &[&str]) -> Vec<(String, Expect)> {
    valid
        .iter()
        .map(|s| (s.to_string(), Valid))
        .chain(invalid.iter().map(|s| (s.to_string(), Invalid)))
        .collect()
}

#[tokio::test]
async fn label_selectors_select_what_the_apiserver_selects() {
    let fx = fixture("sel-labels").await;
    let long_value = format!("app={}", "a".repeat(64));
    let long_key = format!("{}=x", "k".repeat(64));
    let cases = corpus(
        &[
            "",
            "   ",
            "app=web",
            "app = web",
            "\tapp\n=\rweb ",
            "app==web",
            "app!=web",
            "app != web",
            "app in (web,api)",
            " app in ( web , db ) , env = prod ",
            "app in(web)",
            "app notin (web,api)",
            "app notin (web),tier",
            "app in (web),!canary",
            "app=web,app=api",
            "app=web,app!=api",
            "app in (web,,api)",
            "app in (,web)",
            // Older apimachinery rejected these; v1.35 reads `,,` as an empty value.
            "app in (web,,)",
            "app in (,,)",
            "env notin (,,,)",
            "env in (prod,)",
            "env in ()",
            "env notin ()",
            "env=",
            "env==",
            "env!=",
            "env",
            "!env",
            "canary",
            "!canary",
            "canary=",
            "canary in (true,)",
            "example.com/team",
            "!example.com/team",
            "example.com/team=payments",
            "example.com/team=",
            "example.com/team in (payments,search)",
            "example.com/team notin (payments)",
            "app.kubernetes.io/name",
            "app.kubernetes.io/name=web,tier=frontend",
            "tier=frontend,env=prod",
            "tier in (frontend,backend),env!=prod",
            "in",
            "in=notin",
            "in in (notin)",
            "A_b.C-d=Value_1.x",
            "a_b.c-d",
            "missing!=x",
            "missing notin (x)",
            "!missing",
            "replicas>2",
            "replicas > 2",
            "replicas<5",
            "replicas>0",
            "replicas<1",
            "replicas>007",
            "replicas<8",
            "replicas>9223372036854775806",
            "replicas<9223372036854775807",
            "replicas>1,replicas<10",
            "replicas>1,app=web",
            "replicas>2,!canary,example.com/team",
            "app=web \u{0}junk",
        ],
        &[
            "app in (web",
            "app in web",
            "app=web,",
            ",app=web",
            "app=web,,tier=frontend",
            "app=we b",
            "app===web",
            "app=web=x",
            "app=web||tier=frontend",
            "(app=web)",
            "app=web)",
            "app in ((web))",
            "app in (web,,=)",
            "app in (,,",
            "app in (web),",
            "!app=web",
            "!!app",
            "Example.com/team=x",
            "example.com/Team/x",
            "-app=web",
            "app=-web",
            "app=web_",
            "a/b/c=x",
            &long_key,
            &long_value,
            "replicas>abc",
            "replicas>-1",
            "replicas>",
            "replicas<1.5",
            "replicas>9223372036854775808",
            "replicas>=1",
            "replicas<>1",
            "replicas>(1)",
        ],
    );
    assert!(cases.len() >= 50);
    compare(&fx, Kind::Label, &cases).await;
}

#[tokio::test]
async fn field_selectors_select_what_the_apiserver_selects() {
    let fx = fixture("sel-fields").await;
    let ns = fx.ns.name.clone();
    let node_a = format!("{ns}-node-a");
    let own = |s: &str| s.replace("NS", &ns).replace("NODE_A", &node_a);
    let valid: Vec<String> = [
        "",
        ",",
        "metadata.name=p01",
        "metadata.name==p01",
        "metadata.name!=p01",
        "metadata.name=p01,",
        "metadata.name=p01,metadata.name=p02",
        "metadata.name!=p01,metadata.name!=p02",
        "metadata.name= p01",
        "metadata.name=nope",
        "metadata.namespace=NS",
        "metadata.namespace!=NS",
        "metadata.namespace=default",
        "spec.nodeName=NODE_A",
        "spec.nodeName=",
        "spec.nodeName!=",
        "spec.nodeName=NODE_A,spec.hostNetwork=true",
        "spec.restartPolicy=Never",
        "spec.restartPolicy!=Always",
        "spec.restartPolicy=OnFailure,metadata.name!=p03",
        "spec.schedulerName=custom-scheduler",
        "spec.schedulerName=default-scheduler",
        "spec.serviceAccountName=builder",
        "spec.serviceAccountName=default",
        "spec.hostNetwork=true",
        "spec.hostNetwork=false",
        "spec.hostNetwork!=true",
        "status.phase=Pending",
        "status.phase!=Pending",
        "status.phase=Running",
        "status.phase==Running,status.podIP=10.1.2.9",
        "status.podIP=10.1.2.3",
        "status.podIP=",
        "status.podIP!=",
        "status.nominatedNodeName=node-c",
        "status.nominatedNodeName!=",
        "status.phase=Pending,spec.restartPolicy=Always,metadata.name!=p01",
        r"metadata.name=p\,01",
        r"spec.schedulerName=custom\=scheduler",
        r"spec.schedulerName=custom\\scheduler",
        // apimachinery drops a term with an empty field and value while parsing.
        "=",
        "!=",
        "metadata.name=p01,!=",
        // Aliases and extra fields the apiserver accepts for pods.
        "spec.host=NODE_A",
        "status.podIPs=",
        // Accepted, but not in the pod's field set: always "", even for a pod with IPs.
        "status.podIPs=10.1.2.3",
        "status.podIPs!=",
    ]
    .iter()
    .map(|s| own(s))
    .collect();
    let invalid: Vec<String> = [
        "metadata.name",
        "metadata.name=p01=x",
        r"metadata.name=p0\1",
        r"metadata.name=p01\",
        " metadata.name=p01",
        "Metadata.name=p01",
        "spec.containers=x",
        "spec.containers[0].image=busybox:1.36",
        "metadata.labels=x",
        "metadata.labels.app=web",
        "metadata.uid=x",
        "status.hostIP=",
        "=p01",
        "metadata.name=p01,spec.containers=x",
    ]
    .iter()
    .map(|s| own(s))
    .collect();
    let cases: Vec<(String, Expect)> = valid
        .into_iter()
        .map(|s| (s, Valid))
        .chain(invalid.into_iter().map(|s| (s, Invalid)))
        .collect();
    assert!(cases.len() >= 30);
    compare(&fx, Kind::Field, &cases).await;
}
