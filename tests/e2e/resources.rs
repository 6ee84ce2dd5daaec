//! Every built-in kind through the one generic pipeline (issue 19): kinds of different
//! shapes (namespaced, cluster-scoped, Events, Jobs) created, listed with label and field
//! selectors, paged, watched, got, printed and deleted; `/resources`; an unknown resource;
//! Secrets kept as metadata only; and what k8sailor lists, kind by kind, against the
//! apiserver's own list at the same resourceVersion.

pub(crate) mod fixtures;

use std::collections::BTreeSet;

use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    VersionMatch,
};
use serde_json::{Value, json};

use crate::deploy::{ClusterScoped, ShippedRbac, TempDir, account_with_rules, token_kubeconfig};
use crate::support::{
    SOON, Server, TestNamespace, cleanup_in_background, cluster, eventually, names,
};
use crate::watch::{Watch, summary};
use fixtures::{FIXTURES, Fixture, Which};

/// A served resource as `/resources` lists it, as a kube `ApiResource`.
fn api_resource(served: &Value) -> ApiResource {
    let group = served["group"].as_str().unwrap();
    let version = served["version"].as_str().unwrap();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: served["kind"].as_str().unwrap().into(),
        plural: served["plural"].as_str().unwrap().into(),
    }
}

/// The apiserver's API of a resource as `/resources` lists it (in `ns`, if it is
/// namespaced), its `ApiResource`, and whether it is namespaced.
pub(crate) fn apiserver_api(
    ns: &TestNamespace,
    served: &Value,
) -> (ApiResource, bool, Api<DynamicObject>) {
    let resource = api_resource(served);
    let namespaced = served["namespaced"] == true;
    let api = if namespaced {
        Api::namespaced_with(ns.client.clone(), &ns.name, &resource)
    } else {
        Api::all_with(ns.client.clone(), &resource)
    };
    (resource, namespaced, api)
}

/// What `/resources` says of `name`.
async fn served(server: &Server, name: &str) -> Value {
    let (status, all) = server.get("/resources").await;
    assert_eq!(status, 200, "{all}");
    all["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} is served: {all}"))
        .clone()
}

/// One kind's case: its objects `a`, `b` (labelled `tier=web`) and `c` (`tier=db`) as JSON,
/// and a field selector of the kind's own allow-list with the names it selects.
struct Case {
    resource: &'static str,
    object: fn(name: &str, tier: &str, ns: &str) -> Value,
    field: (&'static str, &'static [&'static str]),
}

fn meta(name: &str, tier: &str) -> Value {
    json!({"name": name, "labels": {"tier": tier}})
}

const CASES: &[Case] = &[
    Case {
        resource: "configmaps",
        object: |name, tier, _| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, tier),
                   "data": {"key": format!("value-of-{name}")}})
        },
        field: ("metadata.name%3Db", &["b"]),
    },
    Case {
        resource: "events",
        object: |name, tier, ns| {
            json!({"apiVersion": "v1", "kind": "Event", "metadata": meta(name, tier),
                   "involvedObject": {"kind": "Pod", "name": format!("pod-{name}"), "namespace": ns},
                   "reason": if name == "c" { "Killing" } else { "Started" },
                   "type": "Normal", "message": "m", "source": {"component": "kubelet"}})
        },
        field: ("reason%3DStarted,source%3Dkubelet", &["a", "b"]),
    },
    Case {
        resource: "statefulsets",
        object: |name, tier, _| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta(name, tier),
                   "spec": {"replicas": 0, "serviceName": name,
                            "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}},
                                         "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
        },
        field: ("metadata.name!%3Db", &["a", "c"]),
    },
    Case {
        resource: "jobs",
        object: |name, tier, _| {
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name, tier),
                   "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}})
        },
        field: ("status.successful%3D0", &["a", "b", "c"]),
    },
];

#[tokio::test]
async fn namespaced_kinds_are_listed_selected_paged_watched_got_printed_and_deleted() {
    let ns = TestNamespace::new("resources").await;
    let server = Server::start(&["--namespace", &ns.name]);
    for case in CASES {
        let served = served(&server, case.resource).await;
        assert_eq!(served["namespaced"], true, "{served}");
        let api: Api<DynamicObject> =
            Api::namespaced_with(ns.client.clone(), &ns.name, &api_resource(&served));
        for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
            let object: DynamicObject =
                serde_json::from_value((case.object)(name, tier, &ns.name)).unwrap();
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create {} {name}: {e}", case.resource));
        }
        let resource = case.resource;
        let base = format!("/{resource}?namespace={}", ns.name);
        // Only the test's objects (a namespace has a ConfigMap of its own, kube-root-ca.crt).
        let list = format!("{base}&labelSelector=tier");
        eventually(SOON, "the three objects listed", || async {
            (server.names(&list).await? == ["a", "b", "c"]).then_some(())
        })
        .await;

        let (_, web) = server
            .get(&format!("{base}&labelSelector=tier%3Dweb"))
            .await;
        assert_eq!(names(&web), ["a", "b"], "{resource}: {web}");
        let (field, selected) = case.field;
        let (status, by_field) = server.get(&format!("{list}&fieldSelector={field}")).await;
        assert_eq!(status, 200, "{resource}: {by_field}");
        assert_eq!(names(&by_field), selected, "{resource} {field}");
        let (status, bad) = server
            .get(&format!("{list}&fieldSelector=spec.nodeName%3Dx"))
            .await;
        assert_eq!(status, 400, "{resource}: {bad}");
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .contains("field label not supported"),
            "{bad}"
        );
        let (_, sorted) = server.get(&format!("{list}&sort=-name")).await;
        assert_eq!(names(&sorted), ["c", "b", "a"], "{resource}");
        let (_, first) = server.get(&format!("{list}&limit=2")).await;
        assert_eq!(names(&first), ["a", "b"], "{resource}");
        let token = first["metadata"]["continue"].as_str().expect("a token");
        let (_, rest) = server
            .get(&format!("{list}&limit=2&continue={token}"))
            .await;
        assert_eq!(names(&rest), ["c"], "{resource}");

        let (status, one) = server
            .get(&format!("/{resource}/c?namespace={}", ns.name))
            .await;
        assert_eq!(status, 200, "{resource}: {one}");
        let data = &one["data"];
        assert_eq!(
            (&data["name"], &data["namespace"]),
            (&json!("c"), &json!(ns.name))
        );
        assert_eq!(data["labels"], json!({"tier": "db"}));
        assert!(data["uid"].as_str().is_some_and(|u| !u.is_empty()), "{one}");
        assert_eq!(
            data["cells"].as_array().map(Vec::len),
            served["columns"].as_array().map(Vec::len),
            "one cell per column: {one} {served}"
        );
        let (status, missing) = server
            .get(&format!("/{resource}/nope?namespace={}", ns.name))
            .await;
        assert_eq!(status, 404, "{resource}: {missing}");

        let (status, output) = server
            .get(&format!("/{resource}/c/output?namespace={}", ns.name))
            .await;
        assert_eq!(status, 200, "{resource}: {output}");
        assert_eq!(output["metadata"]["name"], "c", "{output}");
        assert_eq!(output["kind"], served["kind"], "{output}");
        assert!(output["metadata"]["managedFields"].is_null(), "{output}");
        let (status, yaml) = server
            .get_text(&format!(
                "/{resource}/c/output?namespace={}&outputFormat=yaml",
                ns.name
            ))
            .await;
        assert_eq!(status, 200, "{yaml}");
        assert!(yaml.contains("name: c"), "{yaml}");

        let mut watch = Watch::open(
            &server,
            &format!("{base}&labelSelector=tier%3Dweb&watch=true"),
            false,
        )
        .await;
        let mut initial = vec![summary(&watch.next().await), summary(&watch.next().await)];
        initial.sort();
        assert_eq!(
            initial,
            [("ADDED".into(), "a".into()), ("ADDED".into(), "b".into())],
            "{resource}"
        );
        assert_eq!(watch.next().await["type"], "BOOKMARK");
        let relabel = json!({"metadata": {"labels": {"tier": "db"}}});
        api.patch("a", &PatchParams::default(), &Patch::Merge(&relabel))
            .await
            .expect("relabel a");
        api.delete("b", &DeleteParams::background())
            .await
            .expect("delete b");
        let mut changes = Vec::new();
        while changes.len() < 2 {
            let change = summary(&watch.next().await);
            // Controllers write statuses (a Job's, a StatefulSet's): MODIFIED, skipped.
            if change.0 != "MODIFIED" {
                changes.push(change);
            }
        }
        changes.sort();
        assert_eq!(
            changes,
            [
                ("DELETED".into(), "a".into()),
                ("DELETED".into(), "b".into())
            ],
            "{resource}: a leaves the selection, b is deleted"
        );
        eventually(SOON, "b gone from the list", || async {
            (server.names(&list).await? == ["a", "c"]).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn nodes_are_served_across_the_cluster() {
    // Nodes of this test alone, told apart by a label of its own.
    let ns = TestNamespace::new("resources-nodes").await;
    let server = Server::start(&[]);
    let served = served(&server, "nodes").await;
    assert_eq!(served["namespaced"], false, "{served}");
    let api: Api<DynamicObject> = Api::all_with(ns.client.clone(), &api_resource(&served));
    let node = |suffix: &str| format!("{}-{suffix}", ns.name);
    for (suffix, unschedulable) in [("a", false), ("b", false), ("c", true)] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node(suffix), "labels": {"e2e": ns.name}},
            "spec": {"unschedulable": unschedulable}}))
        .unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .expect("create a node");
    }
    let list = format!("/nodes?labelSelector=e2e%3D{}", ns.name);
    let all = [node("a"), node("b"), node("c")];
    eventually(SOON, "the three nodes listed", || async {
        (server.names(&list).await? == all).then_some(())
    })
    .await;
    let (_, unschedulable) = server
        .get(&format!("{list}&fieldSelector=spec.unschedulable%3Dtrue"))
        .await;
    assert_eq!(names(&unschedulable), [node("c")], "{unschedulable}");
    let (status, bad) = server
        .get(&format!("{list}&fieldSelector=metadata.namespace%3Dx"))
        .await;
    assert_eq!(status, 400, "no namespace on a Node: {bad}");
    let (status, one) = server.get(&format!("/nodes/{}", node("a"))).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["data"]["name"], node("a"));
    let (status, output) = server.get(&format!("/nodes/{}/output", node("c"))).await;
    assert_eq!(status, 200, "{output}");
    assert_eq!(output["spec"]["unschedulable"], true, "{output}");

    let mut watch = Watch::open(&server, &format!("{list}&watch=true"), false).await;
    for _ in 0..3 {
        assert_eq!(watch.next().await["type"], "ADDED");
    }
    assert_eq!(watch.next().await["type"], "BOOKMARK");
    api.delete(&node("b"), &DeleteParams::background())
        .await
        .expect("delete a node");
    loop {
        let change = summary(&watch.next().await);
        if change.0 != "MODIFIED" {
            assert_eq!(change, ("DELETED".into(), node("b")));
            break;
        }
    }
    for suffix in ["a", "c"] {
        let _ = api.delete(&node(suffix), &DeleteParams::background()).await;
    }
}

#[tokio::test]
async fn resources_lists_what_is_served_and_an_unknown_one_is_a_404_naming_the_closest() {
    let ns = TestNamespace::new("resources-list").await;
    let server = Server::start(&["--namespace", &ns.name]);
    let (status, all) = server.get("/resources").await;
    assert_eq!(status, 200, "{all}");
    let listed: BTreeSet<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for name in [
        "pods",
        "deployments",
        "namespaces",
        "configmaps",
        "statefulsets",
        "jobs",
        "events",
        "cronjobs",
        "endpointslices",
    ] {
        assert!(listed.contains(name), "{name} in {listed:?}");
    }
    assert!(
        !listed.contains("secrets"),
        "Secrets only when named: {listed:?}"
    );
    assert!(
        !listed.contains("nodes"),
        "no cluster-scoped kind when scoped to a namespace: {listed:?}"
    );
    let jobs = served(&server, "jobs").await;
    assert_eq!(
        (&jobs["kind"], &jobs["group"], &jobs["version"]),
        (&json!("Job"), &json!("batch"), &json!("v1"))
    );
    assert_eq!(jobs["columns"][0]["format"], "name", "{jobs}");

    let (status, unknown) = server.get("/configmap").await;
    assert_eq!(status, 404, "{unknown}");
    let error = unknown["error"].as_str().unwrap();
    assert!(
        error.contains("\"configmap\"") && error.contains("configmaps"),
        "{error}"
    );
    let (status, _) = server.get("/secrets?namespace=x").await;
    assert_eq!(status, 404, "Secrets are not served by default");
}

#[tokio::test]
async fn a_secrets_value_appears_in_no_answer() {
    let ns = TestNamespace::new("resources-secrets").await;
    let value = format!("s3cr3t-{}", ns.name);
    let secret: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "token", "labels": {"app": "web"}},
        "stringData": {"password": value}}))
    .unwrap();
    let secrets = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Secret".into(),
        plural: "secrets".into(),
    };
    Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &secrets)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the secret");
    let server = Server::start(&["--namespace", &ns.name, "--resources", "*,secrets"]);
    let list = format!("/secrets?namespace={}", ns.name);
    eventually(SOON, "the secret listed", || async {
        (server.names(&list).await? == ["token"]).then_some(())
    })
    .await;
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&value)
    };
    let mut answers = Vec::new();
    for path in [
        list.clone(),
        format!("{list}&labelSelector=app%3Dweb"),
        format!("/secrets/token?namespace={}", ns.name),
        format!("/secrets/token/output?namespace={}", ns.name),
        format!(
            "/secrets/token/output?namespace={}&outputFormat=yaml",
            ns.name
        ),
    ] {
        let (status, body) = server.get_text(&path).await;
        assert_eq!(status, 200, "{path}: {body}");
        answers.push(body);
    }
    let mut watch = Watch::open(&server, &format!("{list}&watch=true"), false).await;
    let added = watch.next().await;
    assert_eq!(summary(&added), ("ADDED".into(), "token".into()));
    answers.push(added.to_string());
    for answer in &answers {
        assert!(
            !answer.contains(&value) && !answer.contains(&encoded),
            "a value in {answer}"
        );
    }
    let output: Value = serde_json::from_str(&answers[3]).unwrap();
    assert_eq!(output["metadata"]["name"], "token", "{output}");
    assert!(
        output.get("data").is_none() && output.get("type").is_none(),
        "{output}"
    );
    let response = server
        .http
        .get(format!(
            "{}/secrets/token/output?namespace={}",
            server.base, ns.name
        ))
        .send()
        .await
        .unwrap();
    let warning = response.headers()["warning"].to_str().unwrap().to_string();
    assert!(warning.contains("metadata only"), "{warning}");
}

/// For each served resource, the names, namespaces and resourceVersions k8sailor lists are
/// the apiserver's at the list's own resourceVersion.
#[tokio::test]
async fn every_served_kind_lists_what_the_apiserver_lists_at_the_same_version() {
    lists_equal_the_apiservers(&[], true).await;
}

/// The same with every list asked in JSON (by default built-in kinds' are asked in protobuf,
/// pkg/kubeproto writing each item as JSON).
#[tokio::test]
async fn every_served_kind_listed_in_json_lists_what_the_apiserver_lists() {
    lists_equal_the_apiservers(&["--list-encoding", "json"], false).await;
}

/// `protobuf`: built-in kinds are expected to have been listed in protobuf.
async fn lists_equal_the_apiservers(args: &[&str], protobuf: bool) {
    let server = Server::start(args);
    let client = cluster().client().await;
    let (_, all) = server.get("/resources").await;
    let resources = all["data"].as_array().unwrap().clone();
    assert!(resources.len() >= 30, "{all}");
    for served in &resources {
        let name = served["name"].as_str().unwrap();
        let namespaced = served["namespaced"] == true;
        let custom = served["builtIn"] == false;
        // A custom resource whose CRD another test created since k8sailor started is served
        // from its CRD on, and answers 429 until its first list is in.
        let ((status, listed), _) = eventually(SOON, &format!("{name} listed"), || async {
            let (status, listed) = server.get(&format!("/{name}")).await;
            (status != 429 || !custom).then_some((status, listed))
        })
        .await;
        // A custom resource whose CRD another test deleted since `/resources` answered is no
        // longer served.
        if status == 404 && custom {
            let (_, now) = server.get("/resources").await;
            let still = now["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == name);
            assert!(!still, "{name} is served but its list is a 404: {listed}");
            continue;
        }
        assert_eq!(status, 200, "{name}: {listed}");
        let version = listed["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: a version: {listed}"))
            .to_string();
        assert!(
            !version.is_empty(),
            "{name}: a list at no version: {listed}"
        );
        let ours: BTreeSet<(String, String, String)> = listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                let namespace = if namespaced {
                    item["namespace"].as_str().unwrap().to_string()
                } else {
                    String::new()
                };
                (
                    namespace,
                    item["name"].as_str().unwrap().to_string(),
                    item["resourceVersion"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(served));
        let params = ListParams::default()
            .at(&version)
            .matching(VersionMatch::Exact);
        let theirs = match api.list(&params).await {
            // Its CRD deleted since k8sailor listed it, as above.
            Err(kube::Error::Api(e)) if e.code == 404 && custom => continue,
            theirs => theirs.unwrap_or_else(|e| panic!("{name} at {version}: {e}")),
        };
        let theirs: BTreeSet<(String, String, String)> = theirs
            .items
            .into_iter()
            .map(|o| {
                (
                    o.metadata.namespace.unwrap_or_default(),
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(ours, theirs, "{name} at {version}");
    }
    // Read as asked, not through the fallback to JSON.
    let logs = server.logs();
    assert!(!logs.contains("could not be read"), "{logs}");
    let (_, metrics) = server.probe("/metrics").await;
    // Custom resources come in JSON whatever is asked; other tests create and delete CRDs, so
    // the built-in kinds are the ones whose caches are sure to be there.
    for served in resources.iter().filter(|r| r["builtIn"] == true) {
        let kind = served["kind"].as_str().unwrap();
        let known = kubeproto::ListKind::find(
            served["group"].as_str().unwrap(),
            served["version"].as_str().unwrap(),
            kind,
        );
        // apiextensions' kinds are not in the schema.
        let expected = f64::from(u8::from(protobuf && known.is_some()));
        let name = format!(r#"k8sailor_informer_protobuf_lists{{kind="{kind}"}} "#);
        let values: Vec<f64> = metrics
            .lines()
            .filter_map(|l| l.strip_prefix(&name))
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(
            !values.is_empty() && values.iter().all(|v| *v == expected),
            "{name}{expected} in:\n{metrics}"
        );
    }
}

/// A selected kind RBAC refuses is not served, said so in `/readyz?verbose`, and the rest are.
#[tokio::test]
async fn a_kind_rbac_refuses_is_named_not_served_and_the_rest_are_served() {
    let ns = TestNamespace::new("resources-refused").await;
    let rbac = ShippedRbac::load();
    let mut rules = rbac.rules();
    let core = rules
        .iter_mut()
        .find(|r| {
            r.api_groups.as_deref() == Some(&[String::new()])
                && r.resources
                    .as_deref()
                    .is_some_and(|res| res.contains(&"configmaps".to_string()))
        })
        .expect("a rule for core configmaps in config/rbac.yaml");
    core.resources
        .as_mut()
        .unwrap()
        .retain(|r| r != "configmaps");
    let mut cleanup = ClusterScoped::default();
    let token = account_with_rules(&ns, &rbac, rules, &mut cleanup).await;
    let dir = TempDir::new("refused");
    let kubeconfig = token_kubeconfig(&dir, &token);
    let server = Server::start_with(&kubeconfig, &[]).unwrap_or_else(|e| panic!("it starts: {e}"));
    let (status, verbose) = server.probe("/readyz?verbose").await;
    assert_eq!(status, 200, "{verbose}");
    assert!(
        verbose.contains(
            "[+]resource-configmaps not served: forbidden by RBAC: cannot list configmaps in all namespaces"
        ),
        "{verbose}"
    );
    let (status, missing) = server.get("/configmaps").await;
    assert_eq!(status, 404, "{missing}");
    let (status, nodes) = server.get("/nodes").await;
    assert_eq!(status, 200, "{nodes}");
    let (status, pods) = server.get(&format!("/pods?namespace={}", ns.name)).await;
    assert_eq!(status, 200, "{pods}");
    let logs = server.logged("configmaps").await;
    assert_eq!(
        logs.lines().filter(|l| l.contains("configmaps")).count(),
        1,
        "logged once: {logs}"
    );
}

/// Cluster-scoped objects a test makes, deleted when it ends, however it ends.
#[derive(Default)]
pub(crate) struct Leftovers(pub(crate) Vec<(ApiResource, String)>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        let objects = std::mem::take(&mut self.0);
        cleanup_in_background(move |client| async move {
            for (resource, name) in objects {
                let _ = Api::<DynamicObject>::all_with(client.clone(), &resource)
                    .delete(&name, &DeleteParams::background())
                    .await;
            }
        });
    }
}

/// Every built-in kind k8sailor serves, each from a fixture of its own (a test's failure
/// names the kind): created through the apiserver, selected by labels and by its own field
/// selectors as the apiserver selects, got at the apiserver's resourceVersion, printed,
/// watched from before its creation to its deletion, and 404 once deleted. All kinds at once.
#[tokio::test]
async fn every_built_in_kind_is_created_selected_got_watched_and_deleted() {
    let ns = TestNamespace::new("kinds-all").await;
    let server = Server::start(&["--resources", "*,secrets"]);
    let (status, all) = server.get("/resources").await;
    assert_eq!(status, 200, "{all}");
    let all = all["data"].as_array().unwrap();
    let built_in: BTreeSet<&str> = all
        .iter()
        .filter(|r| r["builtIn"] == true)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let fixtures: BTreeSet<&str> = FIXTURES.iter().map(|f| f.resource).collect();
    assert_eq!(
        built_in, fixtures,
        "every built-in kind served has a fixture, and every fixture's kind is served"
    );
    let mut leftovers = Leftovers::default();
    let mut kinds = Vec::new();
    for fixture in FIXTURES {
        let served = all.iter().find(|r| r["name"] == fixture.resource).unwrap();
        let kind = BuiltInKind::new(&ns, fixture, served);
        if !kind.namespaced {
            for which in [Which::Selected, Which::Other] {
                leftovers
                    .0
                    .push((kind.resource.clone(), (fixture.name)(&ns.name, which)));
            }
        }
        kinds.push(kind);
    }
    futures::future::join_all(kinds.iter().map(|kind| kind.exercise(&server))).await;
}

/// One kind of the test above: its fixture, as served, and the apiserver's API of it.
struct BuiltInKind<'a> {
    ns: &'a TestNamespace,
    fixture: &'static Fixture,
    kind: String,
    namespaced: bool,
    resource: ApiResource,
    api: Api<DynamicObject>,
}

impl<'a> BuiltInKind<'a> {
    fn new(ns: &'a TestNamespace, fixture: &'static Fixture, served: &Value) -> Self {
        let (resource, namespaced, api) = apiserver_api(ns, served);
        BuiltInKind {
            ns,
            fixture,
            kind: served["kind"].as_str().unwrap().into(),
            namespaced,
            resource,
            api,
        }
    }

    fn name(&self, which: Which) -> String {
        (self.fixture.name)(&self.ns.name, which)
    }

    /// The labels of both objects, and the one the selected object has beside them.
    fn labels(&self, which: Which) -> Value {
        // The kind too: an Event of either API is an object of both.
        let mut labels = json!({"e2e-run": self.ns.name, "e2e-kind": self.fixture.resource});
        if which == Which::Selected {
            labels["selected"] = json!("yes");
        }
        labels
    }

    /// The next event that is not a status update or a bookmark.
    async fn next_change(watch: &mut Watch) -> (String, String) {
        loop {
            let event = watch.next().await;
            if event["type"] != "MODIFIED" && event["type"] != "BOOKMARK" {
                return summary(&event);
            }
        }
    }

    async fn exercise(&self, server: &Server) {
        let resource = self.fixture.resource;
        let (x, y) = (self.name(Which::Selected), self.name(Which::Other));
        let (scope, query) = if self.namespaced {
            let ns = &self.ns.name;
            (format!("&namespace={ns}"), format!("?namespace={ns}"))
        } else {
            (String::new(), String::new())
        };
        let run = format!("e2e-run={},e2e-kind={resource}", self.ns.name);
        let list = format!(
            "/{resource}?labelSelector={}{scope}",
            run.replace('=', "%3D")
        );
        let selected = format!(
            "/{resource}?labelSelector={},selected{scope}",
            run.replace('=', "%3D")
        );

        let mut watch = Watch::open(server, &format!("{selected}&watch=true"), false).await;
        assert_eq!(
            watch.next().await["type"],
            "BOOKMARK",
            "{resource}: none yet"
        );
        for which in [Which::Selected, Which::Other] {
            let mut manifest = (self.fixture.object)(&self.name(which), which, &self.ns.name);
            manifest["metadata"]["labels"] = self.labels(which);
            let object: DynamicObject = serde_json::from_value(manifest).unwrap();
            self.api
                .create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create {resource} {}: {e}", self.name(which)));
        }
        assert_eq!(
            Self::next_change(&mut watch).await,
            ("ADDED".into(), x.clone()),
            "{resource}"
        );
        let both = {
            let mut both = vec![x.clone(), y.clone()];
            both.sort();
            both
        };
        eventually(SOON, &format!("{resource}: both listed"), || async {
            let mut listed = server.names(&list).await?;
            listed.sort();
            (listed == both).then_some(())
        })
        .await;
        let (status, by_label) = server.get(&selected).await;
        assert_eq!(status, 200, "{resource}: {by_label}");
        assert_eq!(names(&by_label), [x.as_str()], "{resource}: {by_label}");

        // metadata.name, which every kind has, and the kind's own field, if it has one, each
        // selecting what the fixture says; metadata.namespace where the apiserver takes it
        // (not on Nodes or Namespaces), selecting both. Each as the apiserver selects, and
        // refused where it refuses.
        let namespace = if self.namespaced { &self.ns.name } else { "" };
        let mut fields = vec![
            (format!("metadata.name={x}"), Some(vec![x.clone()])),
            (format!("metadata.namespace={namespace}"), None),
        ];
        if let Some((field, which)) = self.fixture.field {
            let mut expected: Vec<String> = which.iter().map(|w| self.name(*w)).collect();
            expected.sort();
            fields.push((field.to_string(), Some(expected)));
        }
        for (field, expected) in fields {
            let path = format!("{list}&fieldSelector={}", field.replace('=', "%3D"));
            let (status, body) = server.get(&path).await;
            let ours = match status {
                200 => {
                    let mut ours = names(&body);
                    ours.sort();
                    Some(ours)
                }
                400 => None,
                _ => panic!("{path}: {body}"),
            };
            let params = ListParams::default().labels(&run).fields(&field);
            let theirs = match self.api.list(&params).await {
                Ok(list) => {
                    let mut theirs: Vec<String> = list
                        .items
                        .into_iter()
                        .map(|o| o.metadata.name.unwrap())
                        .collect();
                    theirs.sort();
                    Some(theirs)
                }
                Err(kube::Error::Api(e)) if e.code == 400 => None,
                Err(e) => panic!("{resource} {field} at the apiserver: {e}"),
            };
            assert_eq!(
                ours, theirs,
                "{resource} {field}: ours, the apiserver's: {body}"
            );
            match expected {
                Some(expected) => assert_eq!(ours, Some(expected), "{resource} {field}"),
                // Where it is taken, the object's namespace selects both.
                None => assert!(
                    ours.is_none() || ours.as_ref() == Some(&both),
                    "{resource} {field}: {body}"
                ),
            }
        }

        // The apiserver's object and ours at the same version (a controller may be writing
        // its status meanwhile).
        let (one, theirs) = eventually(
            SOON,
            &format!("{resource}/{x} as the apiserver has it"),
            || async {
                let theirs = self.api.get(&x).await.expect("the apiserver's object");
                let (status, one) = server.get(&format!("/{resource}/{x}{query}")).await;
                (status == 200
                    && one["data"]["resourceVersion"].as_str()
                        == theirs.metadata.resource_version.as_deref())
                .then_some((one, theirs))
            },
        )
        .await
        .0;
        let data = &one["data"];
        assert_eq!(
            data["name"].as_str(),
            theirs.metadata.name.as_deref(),
            "{one}"
        );
        if self.namespaced {
            assert_eq!(
                data["namespace"].as_str(),
                theirs.metadata.namespace.as_deref(),
                "{one}"
            );
        } else {
            assert!(
                theirs.metadata.namespace.is_none(),
                "{resource}: {theirs:?}"
            );
            assert!(
                data["namespace"].as_str().is_none_or(str::is_empty),
                "{resource}: {one}"
            );
        }
        assert_eq!(data["labels"], json!(theirs.metadata.labels), "{one}");
        let (status, output) = server.get(&format!("/{resource}/{x}/output{query}")).await;
        assert_eq!(status, 200, "{resource}: {output}");
        // A Secret is kept as its metadata alone (`a_secrets_value_appears_in_no_answer`).
        let kind = if resource == "secrets" {
            "PartialObjectMetadata"
        } else {
            &self.kind
        };
        assert_eq!(
            (
                &output["kind"],
                &output["metadata"]["name"],
                &output["metadata"]["uid"]
            ),
            (&json!(kind), &json!(x), &json!(theirs.metadata.uid)),
            "{resource}: {output}"
        );

        for name in [&y, &x] {
            self.api
                .delete(name, &DeleteParams::background())
                .await
                .unwrap_or_else(|e| panic!("delete {resource} {name}: {e}"));
        }
        assert_eq!(
            Self::next_change(&mut watch).await,
            ("DELETED".into(), x.clone()),
            "{resource}: the other one never selected"
        );
        let gone = self.api.get_opt(&x).await.expect("the apiserver answers");
        assert!(gone.is_none(), "{resource}: {gone:?}");
        let (status, missing) = server.get(&format!("/{resource}/{x}{query}")).await;
        assert_eq!(status, 404, "{resource}: {missing}");
        eventually(SOON, &format!("{resource}: none listed"), || async {
            server.names(&list).await?.is_empty().then_some(())
        })
        .await;
    }
}
