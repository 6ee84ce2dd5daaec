//! Custom resources against the real apiserver: confk8s following CRDs and watching their
//! objects at run time, and k8sailor serving them as `/{plural}.{group}`: a CRD created after
//! start, one deleted, a storm of them, 300 at start. Each test's CRDs have a group of their
//! own, deleted when it ends; the storm and the 300 run on a control plane of their own, so
//! that no other test's k8sailor follows hundreds of CRDs meanwhile.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use confk8s::{Command, CrdFollower, Delta, Handler, InformerFactory, RelistBatch};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::access::{User, account, ask, grant, rule};
use crate::support::{
    Cluster, SOON, Server, TestNamespace, cleanup_in_background, eventually, eventually_shown,
    names, repo,
};
use crate::watch::{Watch, summary};

/// A group no other test uses: `t{pid}n{seq}.{test}.e2e.example.com`.
fn unique_group(test: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}n{}.{test}.e2e.example.com",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A namespaced CRD `{plural}.{group}` of kind `kind`, served and stored as v1, with the
/// printer columns Color (`.spec.color`), Size (`.spec.size`) and Shade (`.spec.extra.shade`:
/// fails on an object whose `extra` is a string), and `.spec.color` selectable.
fn mk_crd(group: &str, kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "color": {"type": "string"},
                        "size": {"type": "integer"},
                        "extra": {"x-kubernetes-preserve-unknown-fields": true}}}}}},
                "additionalPrinterColumns": [
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Shade", "type": "string", "jsonPath": ".spec.extra.shade"}
                ],
                "selectableFields": [{"jsonPath": ".spec.color"}]
            }]
        }
    }))
    .unwrap()
}

/// The CRDs a test made, deleted when it ends, whatever happens.
struct Crds {
    api: Api<CustomResourceDefinition>,
    names: Vec<String>,
}

impl Crds {
    fn new(client: &Client) -> Crds {
        Crds {
            api: Api::all(client.clone()),
            names: Vec::new(),
        }
    }

    async fn create(&mut self, crd: &CustomResourceDefinition) {
        let name = crd.metadata.name.clone().unwrap();
        self.api
            .create(&PostParams::default(), crd)
            .await
            .unwrap_or_else(|e| panic!("create CRD {name}: {e}"));
        self.names.push(name);
    }

    async fn delete(&mut self, name: &str) {
        self.api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete CRD {name}: {e}"));
        self.names.retain(|n| n != name);
    }
}

impl Drop for Crds {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.names);
        if names.is_empty() {
            return;
        }
        cleanup_in_background(move |client| async move {
            let api: Api<CustomResourceDefinition> = Api::all(client);
            for name in names {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        });
    }
}

/// A widget of `resource` named `name` in `ns`, of color `color`, size `size` and `extra`.
fn mk_widget(
    resource: &ApiResource,
    ns: &str,
    name: &str,
    (color, size, extra): (&str, i64, Value),
) -> DynamicObject {
    let mut object = DynamicObject::new(name, resource).within(ns);
    object.data = json!({"spec": {"color": color, "size": size, "extra": extra}});
    object
}

/// Names of the objects a dynamic handler was told of, as changes came: `+name`, `-name`.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn record(&self, deltas: &[Delta<DynamicObject>]) {
        let mut seen = self.0.lock().unwrap();
        for delta in deltas {
            let sign = match delta {
                Delta::Added(_) | Delta::Updated(_) => '+',
                Delta::Deleted(_) | Delta::Vanished(_) => '-',
            };
            seen.push(format!("{sign}{}", delta.key().name));
        }
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Handler<DynamicObject> for Seen {
    fn on_deltas(&self, deltas: &[Delta<DynamicObject>]) {
        self.record(deltas);
    }
    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<DynamicObject>> {
        Box::new(SeenRelist(self, Vec::new()))
    }
}

struct SeenRelist(Arc<Seen>, Vec<Delta<DynamicObject>>);

impl RelistBatch<DynamicObject> for SeenRelist {
    fn add(&mut self, delta: &Delta<DynamicObject>) {
        self.1.push(delta.clone());
    }
    fn commit(self: Box<Self>, _: &str) {
        self.0.record(&self.1);
    }
}

/// The next command about a CRD of `group`, skipping other tests' CRDs.
async fn next_command(commands: &mut UnboundedReceiver<Command>, group: &str) -> Command {
    tokio::time::timeout(SOON, async {
        loop {
            let command = commands.recv().await.expect("the follower runs");
            let (Command::Serve(r) | Command::Stop(r)) = &command;
            if r.group == group {
                return command;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no command about {group} within {SOON:?}"))
}

#[tokio::test]
async fn confk8s_serves_a_crd_created_at_run_time_and_stops_it_when_deleted() {
    let ns = TestNamespace::new("crd-follow").await;
    let group = unique_group("follow");
    let mut crds = Crds::new(&ns.client);

    let factory = InformerFactory::new(ns.client.clone(), None);
    let mut commands = CrdFollower::register(&factory).unwrap();
    factory.check_access().await.unwrap();
    let shutdown = CancellationToken::new();
    let tasks = factory.start(shutdown.clone());
    factory.wait_for_sync(SOON).await.unwrap();
    let baseline = factory.statuses().len();

    crds.create(&mk_crd(&group, "Widget", "widgets")).await;
    let Command::Serve(widgets) = next_command(&mut commands, &group).await else {
        panic!("an established CRD is served")
    };
    assert_eq!(
        (
            widgets.kind.as_str(),
            widgets.plural.as_str(),
            widgets.version.as_str()
        ),
        ("Widget", "widgets", "v1")
    );
    assert_eq!(
        widgets.printer_columns.as_ref().unwrap()[2]["name"],
        "Shade"
    );
    assert_eq!(widgets.selectable_fields, [".spec.color"]);

    let resource = widgets.api_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    api.create(
        &PostParams::default(),
        &mk_widget(
            &resource,
            &ns.name,
            "before",
            ("red", 1, json!({"shade": "dark"})),
        ),
    )
    .await
    .unwrap();
    let seen = Arc::new(Seen::default());
    let informer = factory
        .watch_dynamic(resource.clone(), widgets.scope.clone(), seen.clone())
        .await;
    assert_eq!(factory.statuses().len(), baseline + 1);
    eventually(SOON, "the widget listed", || async {
        (informer.status().is_synced() && seen.all() == ["+before"]).then_some(())
    })
    .await;
    api.create(
        &PostParams::default(),
        &mk_widget(&resource, &ns.name, "after", ("blue", 2, json!("plain"))),
    )
    .await
    .unwrap();
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    eventually(SOON, "the widget's changes watched", || async {
        (seen.all() == ["+before", "+after", "-before"]).then_some(())
    })
    .await;
    assert_eq!(
        informer.status().state().kind,
        format!("Widget.{group}"),
        "named apart from a built-in kind of the same name"
    );

    crds.delete(&format!("widgets.{group}")).await;
    assert_eq!(
        next_command(&mut commands, &group).await,
        Command::Stop(widgets)
    );
    informer.stop().await;
    assert_eq!(factory.statuses().len(), baseline, "its status is gone");
    assert_eq!(Arc::strong_count(&seen), 1, "its handler is dropped");
    shutdown.cancel();
    futures::future::join_all(tasks).await;
}

/// The resource k8sailor serves for `plural.group`.
fn route(plural: &str, group: &str) -> String {
    format!("/{plural}.{group}")
}

/// The informers `/readyz?verbose` names for kinds of `group`.
async fn informers_of(server: &Server, group: &str) -> usize {
    let (_, body) = server.probe("/readyz?verbose").await;
    body.lines()
        .filter(|l| l.contains("]informer-") && l.contains(&format!(".{group} ")))
        .count()
}

/// A CRD's kind is served from the moment its CRD is seen, before its informer's first list
/// is in: until then each API answers as the apiserver answers while its watch cache of a
/// kind initializes (429, `Retry-After: 1`, the Status "storage is (re)initializing"), never
/// a list at no version; then lists at the list's version. Whether this machine is slow
/// enough to show a 429 varies: the unit test `a_kind_not_listed_yet_answers_429_until_its_
/// first_list_is_in` shows one every time; this one shows no answer is ever an empty version.
#[tokio::test]
async fn a_crd_just_created_answers_429_or_a_list_at_a_version_never_at_none() {
    let ns = TestNamespace::new("crd-initializing").await;
    let group = unique_group("initializing");
    let mut crds = Crds::new(&ns.client);
    let server = Server::start(&[]);
    let root = server.base.trim_end_matches("/k8sailor/v0").to_string();
    let lists = [
        format!("{}{}", server.base, route("gadgets", &group)),
        format!("{root}/apis/{group}/v1/gadgets"),
        format!("{root}/apis/{group}/v1/namespaces/{}/gadgets", ns.name),
    ];
    crds.create(&mk_crd(&group, "Gadget", "gadgets")).await;
    let initializing = AtomicU32::new(0);
    let (_, took) = eventually(SOON, "the gadgets listed at a version", || async {
        let mut listed = 0;
        for url in &lists {
            let response = server.http.get(url).send().await.expect("k8sailor answers");
            let status = response.status().as_u16();
            let retry_after = response.headers().get("retry-after").cloned();
            let body: Value = response.json().await.expect("a JSON answer");
            match status {
                // Not served yet: the CRD is not Established, or not seen yet.
                404 => {}
                429 => {
                    initializing.fetch_add(1, Ordering::Relaxed);
                    assert_eq!(retry_after.as_ref().map(|v| v.to_str().unwrap()), Some("1"));
                    if url.starts_with(&server.base) {
                        assert_eq!(body["code"], 429, "{url}: {body}");
                        let error = body["error"].as_str().unwrap();
                        assert!(error.contains("first list"), "{url}: {error}");
                    } else {
                        assert_eq!(
                            (&body["reason"], &body["message"]),
                            (
                                &json!("TooManyRequests"),
                                &json!("storage is (re)initializing")
                            ),
                            "{url}: {body}"
                        );
                    }
                }
                200 => {
                    let version = body["metadata"]["resourceVersion"].as_str().unwrap();
                    assert!(!version.is_empty(), "{url}: a list at no version: {body}");
                    listed += 1;
                }
                other => panic!("{url}: {other} {body}"),
            }
        }
        (listed == lists.len()).then_some(())
    })
    .await;
    eprintln!(
        "a CRD's kind listed on both APIs {took:?} after its creation, {} answers of 429 before",
        initializing.load(Ordering::Relaxed)
    );
}

#[tokio::test]
async fn a_crd_created_after_start_is_served_with_its_columns_until_it_is_deleted() {
    let ns = TestNamespace::new("crd-serve").await;
    let group = unique_group("serve");
    let mut crds = Crds::new(&ns.client);
    let server = Server::start(&[]);
    let denied = Server::start(&["--resources", &format!("*,-widgets.{group}")]);
    let widgets = route("widgets", &group);
    let list = format!("{widgets}?namespace={}", ns.name);
    let (status, before) = server.get(&list).await;
    assert_eq!(status, 404, "{before}");

    let crd = mk_crd(&group, "Widget", "widgets");
    crds.create(&crd).await;
    let resource = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let pp = PostParams::default();
    // The CRD is served once it is established; its objects may be created only then.
    eventually(SOON, "the CRD established", || async {
        api.list(&Default::default()).await.ok()
    })
    .await;
    for (name, spec) in [
        ("dark", ("red", 1, json!({"shade": "dark"}))),
        ("plain", ("blue", 2, json!("plain"))),
    ] {
        api.create(&pp, &mk_widget(&resource, &ns.name, name, spec))
            .await
            .unwrap();
    }
    let (_, took) = eventually(SOON, "the widgets served", || async {
        (server.names(&list).await? == ["dark", "plain"]).then_some(())
    })
    .await;
    eprintln!("a CRD created after start served with its objects in {took:?}");

    // Its columns are the printer's for the CRD's printer columns, and each object's cells
    // are the printer's for the object as the apiserver has it: the one whose Shade path
    // fails included, never a 500.
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .map(|c| serde_json::to_value(c).unwrap());
    let printer = printers::Printer::custom(columns.as_ref()).unwrap();
    let (status, served) = server.get("/resources").await;
    assert_eq!(status, 200, "{served}");
    let entry = served["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == format!("widgets.{group}"))
        .unwrap_or_else(|| panic!("widgets.{group} in /resources: {served}"))
        .clone();
    assert_eq!(
        (
            &entry["kind"],
            &entry["group"],
            &entry["version"],
            &entry["namespaced"]
        ),
        (&json!("Widget"), &json!(group), &json!("v1"), &json!(true)),
        "{entry}"
    );
    assert_eq!(
        entry["columns"],
        serde_json::to_value(printer.columns()).unwrap()
    );
    let (status, listed) = server.get(&list).await;
    assert_eq!(status, 200, "{listed}");
    for item in listed["data"].as_array().unwrap() {
        let name = item["name"].as_str().unwrap();
        let object = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        assert_eq!(
            item["cells"],
            serde_json::to_value(printer.cells(&object)).unwrap(),
            "{name}"
        );
    }
    let (status, one) = server
        .get(&format!("{widgets}/plain?namespace={}", ns.name))
        .await;
    assert_eq!(
        (status, &one["data"]["name"]),
        (200, &json!("plain")),
        "{one}"
    );

    // Selected by label and by the CRD's selectable field.
    let (_, red) = server
        .get(&format!("{list}&fieldSelector=spec.color%3Dred"))
        .await;
    assert_eq!(names(&red), ["dark"], "{red}");
    let (status, bad) = server
        .get(&format!("{list}&fieldSelector=spec.size%3D1"))
        .await;
    assert_eq!(status, 400, "not a selectable field: {bad}");

    // Watched: a widget added and one deleted.
    let mut watch = Watch::open(&server, &format!("{list}&watch=true"), false).await;
    let mut initial = vec![summary(&watch.next().await), summary(&watch.next().await)];
    initial.sort();
    assert_eq!(
        initial,
        [
            ("ADDED".into(), "dark".into()),
            ("ADDED".into(), "plain".into())
        ]
    );
    assert_eq!(watch.next().await["type"], "BOOKMARK");
    api.create(
        &pp,
        &mk_widget(&resource, &ns.name, "new", ("green", 3, json!(null))),
    )
    .await
    .unwrap();
    api.delete("dark", &DeleteParams::default()).await.unwrap();
    let changes = watch
        .until(|e| summary(e) == ("DELETED".into(), "dark".into()))
        .await;
    assert_eq!(
        changes,
        [
            ("ADDED".into(), "new".into()),
            ("DELETED".into(), "dark".into())
        ]
    );
    drop(watch);
    assert_eq!(informers_of(&server, &group).await, 1);
    let (status, body) = denied.get(&list).await;
    assert_eq!(status, 404, "--resources leaves it out: {body}");
    assert_eq!(informers_of(&denied, &group).await, 0);

    // Deleted: no longer served, nor watched.
    crds.delete(&format!("widgets.{group}")).await;
    let (gone, _) = eventually(SOON, "the widgets no longer served", || async {
        let (status, body) = server.get(&list).await;
        (status == 404).then_some(body)
    })
    .await;
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .contains(&format!("widgets.{group}")),
        "the 404 names it: {gone}"
    );
    eventually(SOON, "its informer gone", || async {
        (informers_of(&server, &group).await == 0).then_some(())
    })
    .await;
}

/// The `ApiResource` of the CRD `mk_crd(group, kind, plural)` makes.
fn api_resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// What the apiserver answers `user` for a list of `resource` in `ns`: 200, or its refusal's
/// code.
async fn apiserver_list_status(user: &User, resource: &ApiResource, ns: &str) -> u16 {
    let api: Api<DynamicObject> = Api::namespaced_with(user.client.clone(), ns, resource);
    match api.list(&Default::default()).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("list {} in {ns} as {}: {e}", resource.plural, user.name),
    }
}

#[tokio::test]
async fn a_custom_resource_is_authorized_as_the_apiservers_rbac_authorizes_it() {
    let home = TestNamespace::new("crd-auth").await;
    let other = TestNamespace::new("crd-auth-other").await;
    let group = unique_group("auth");
    let mut crds = Crds::new(&home.client);
    let widgets = api_resource(&group, "Widget", "widgets");
    let gadgets = api_resource(&group, "Gadget", "gadgets");
    crds.create(&mk_crd(&group, "Widget", "widgets")).await;
    crds.create(&mk_crd(&group, "Gadget", "gadgets")).await;
    let pp = PostParams::default();
    for resource in [&widgets, &gadgets] {
        for ns in [&home, &other] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ns.client.clone(), &ns.name, resource);
            eventually(SOON, "the CRD established", || async {
                api.list(&Default::default()).await.ok()
            })
            .await;
            let mut object = mk_widget(resource, &ns.name, "one", ("red", 1, json!(null)));
            object.types = Some(kube::api::TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            });
            api.create(&pp, &object).await.unwrap();
        }
    }
    // The user may list and get widgets in its own namespace only, and nothing of gadgets.
    let user = account(&home, "widget-reader").await;
    grant(
        &home,
        &home,
        &user,
        vec![rule(&group, &["widgets"], &["get", "list"])],
    )
    .await;
    let server = Server::start(&["--auth", "delegated"]);
    let in_home = format!("{}?namespace={}", route("widgets", &group), home.name);
    eventually(SOON, "the widgets served to their reader", || async {
        let (status, body) = ask(&server, "GET", &in_home, &user.token).await;
        (status == 200 && names(&body) == ["one"]).then_some(())
    })
    .await;

    // Each list as the apiserver answers the same token: allowed where the Role is, refused
    // (403 in the envelope, naming the access) in another namespace and for another CRD.
    for (resource, ns) in [
        (&widgets, &home),
        (&widgets, &other),
        (&gadgets, &home),
        (&gadgets, &other),
    ] {
        let truth = apiserver_list_status(&user, resource, &ns.name).await;
        let path = format!("{}?namespace={}", route(&resource.plural, &group), ns.name);
        let (status, body) = ask(&server, "GET", &path, &user.token).await;
        assert_eq!(status, truth, "{path}: {body}");
        if status == 403 {
            assert_eq!(body["code"], 403, "{body}");
            assert!(body["data"].is_null(), "{body}");
            let error = body["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&format!("may not list {}.{group}", resource.plural))
                    && error.contains(&ns.name),
                "the refusal names the access: {error}"
            );
        }
        let object = format!(
            "{}/one?namespace={}",
            route(&resource.plural, &group),
            ns.name
        );
        let (status, body) = ask(&server, "GET", &object, &user.token).await;
        assert_eq!(status, truth, "{object}: {body}");
    }
    assert_eq!(
        apiserver_list_status(&user, &widgets, &home.name).await,
        200,
        "the apiserver lets the Role's list through"
    );
    // No watch right: a watch is refused as the apiserver would refuse it.
    let (status, body) = ask(
        &server,
        "GET",
        &format!("{in_home}&watch=true"),
        &user.token,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // Across namespaces: the widgets of the namespaces where the user may list them.
    let (status, body) = ask(
        &server,
        "GET",
        &format!("{}?labelSelector=", route("widgets", &group)),
        &user.token,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [home.name.as_str()], "{body}");
    // The Kubernetes API at the root checks the same access, exactly as the apiserver.
    for (resource, ns, code) in [
        (&widgets, &home, 200),
        (&widgets, &other, 403),
        (&gadgets, &home, 403),
    ] {
        let path = format!(
            "/apis/{group}/v1/namespaces/{}/{}",
            ns.name, resource.plural
        );
        let status = server
            .http
            .get(format!("{}{path}", server.root()))
            .bearer_auth(&user.token)
            .send()
            .await
            .expect("k8sailor answers")
            .status()
            .as_u16();
        assert_eq!(status, code, "{path}");
    }
}

/// A control plane for the tests that make hundreds of CRDs, one test at a time.
struct CrowdedCluster {
    cluster: Cluster,
    turn: tokio::sync::Mutex<()>,
}

fn crowded() -> &'static CrowdedCluster {
    static CLUSTER: OnceLock<CrowdedCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let dir: PathBuf = repo()
            .join("target")
            .join(format!("e2e-crds-cluster-{}", std::process::id()));
        let cluster = Cluster::up(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
        CrowdedCluster {
            cluster,
            turn: tokio::sync::Mutex::new(()),
        }
    })
}

/// `count` CRDs of `group`, kinds `W0`..: created (and then deleted, with `delete`) at most
/// 16 at a time, as a cluster's installers do.
async fn many(api: &Api<CustomResourceDefinition>, group: &str, count: usize, delete: bool) {
    use futures::StreamExt;
    futures::stream::iter(0..count)
        .for_each_concurrent(16, |i| async move {
            let crd = mk_crd(group, &format!("W{i}"), &format!("w{i}s"));
            let name = crd.metadata.name.clone().unwrap();
            if delete {
                api.delete(&name, &DeleteParams::default())
                    .await
                    .unwrap_or_else(|e| panic!("delete {name}: {e}"));
            } else {
                api.create(&PostParams::default(), &crd)
                    .await
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
            }
        })
        .await;
}

/// Waits until the apiserver holds no CRD of `group`: a deleted CRD is served (and followed
/// by a k8sailor started meanwhile) until its cleanup ends, so the next test of the crowded
/// cluster must not start before.
async fn gone(api: &Api<CustomResourceDefinition>, group: &str) {
    let what = format!("the CRDs of {group} gone");
    eventually_shown(Duration::from_secs(120), &what, || async {
        let all = api.list(&Default::default()).await;
        let all = all.map_err(|e| e.to_string())?.items;
        match all.iter().filter(|crd| crd.spec.group == group).count() {
            0 => Ok(()),
            left => Err(format!("{left} left")),
        }
    })
    .await;
}

/// How many of `group`'s resources `/resources` lists.
async fn served_of(server: &Server, group: &str) -> usize {
    let (_, served) = server.get("/resources").await;
    served["data"]
        .as_array()
        .map_or(0, |all| all.iter().filter(|r| r["group"] == group).count())
}

#[tokio::test]
async fn a_crd_storm_leaves_no_informer_behind() {
    let crowded = crowded();
    let _turn = crowded.turn.lock().await;
    let client = crowded.cluster.client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let group = unique_group("storm");
    let server = Server::start_with(crowded.cluster.kubeconfig.to_str().unwrap(), &[]).unwrap();
    let (_, everything) = server.probe("/readyz?verbose").await;
    let all_informers = everything
        .lines()
        .filter(|l| l.contains("]informer-"))
        .count();

    let started = std::time::Instant::now();
    many(&api, &group, 100, false).await;
    let (_, took) = eventually(Duration::from_secs(60), "the 100 CRDs served", || async {
        (served_of(&server, &group).await == 100).then_some(())
    })
    .await;
    eprintln!("100 CRDs served {took:?} after they were created");
    // A CRD is served from the moment it is seen, and its informer started just after.
    eventually_shown(SOON, "an informer for each CRD served", || async {
        match informers_of(&server, &group).await {
            100 => Ok(()),
            informers => Err(format!("{informers} informers")),
        }
    })
    .await;
    many(&api, &group, 100, true).await;
    eprintln!("100 CRDs created and deleted in {:?}", started.elapsed());
    eventually(
        Duration::from_secs(60),
        "no informer of the storm left",
        || async {
            (informers_of(&server, &group).await == 0 && served_of(&server, &group).await == 0)
                .then_some(())
        },
    )
    .await;
    let (_, everything) = server.probe("/readyz?verbose").await;
    assert_eq!(
        everything
            .lines()
            .filter(|l| l.contains("]informer-"))
            .count(),
        all_informers,
        "back to the informers before the storm"
    );
    gone(&api, &group).await;
}

#[tokio::test]
async fn three_hundred_crds_at_start_are_all_served() {
    let crowded = crowded();
    let _turn = crowded.turn.lock().await;
    let client = crowded.cluster.client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let group = unique_group("start");
    many(&api, &group, 300, false).await;
    // Established before k8sailor starts: the apiserver establishes each in its own time.
    eventually(
        Duration::from_secs(120),
        "the 300 CRDs established",
        || async {
            let all = api.list(&Default::default()).await.ok()?;
            let established = all
                .items
                .iter()
                .filter(|crd| crd.spec.group == group && confk8s::CustomResource::of(crd).is_some())
                .count();
            (established == 300).then_some(())
        },
    )
    .await;

    let server = Server::start_with(crowded.cluster.kubeconfig.to_str().unwrap(), &[]).unwrap();
    let (_, took) = eventually(Duration::from_secs(120), "the 300 served", || async {
        (served_of(&server, &group).await == 300).then_some(())
    })
    .await;
    eprintln!("300 CRDs at start served {took:?} after k8sailor listened");
    eventually(SOON, "the 300 informers synced", || async {
        let (status, body) = server.probe("/readyz?verbose").await;
        let ok = body
            .lines()
            .filter(|l| l.starts_with("[+]informer-") && l.contains(&format!(".{group} ok")))
            .count();
        (status == 200 && ok == 300).then_some(())
    })
    .await;
    // Each is read from its own cache once listed (before, a list is the apiserver's 429 while
    // its cache initializes): the last one, empty, in the default namespace.
    let (status, body) = server
        .get(&format!("{}?namespace=default", route("w299s", &group)))
        .await;
    assert_eq!(
        (status, names(&body)),
        (200, Vec::<String>::new()),
        "{body}"
    );
    drop(server);
    many(&api, &group, 300, true).await;
    gone(&api, &group).await;
}
