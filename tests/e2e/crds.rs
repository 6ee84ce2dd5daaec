//! Custom resources against the real apiserver: confk8s following CRDs and watching their
//! objects at run time. Each test's CRDs have a group of their own, deleted when it ends.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use confk8s::{Command, CrdFollower, Delta, Handler, InformerFactory, RelistBatch};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::support::{SOON, TestNamespace, cleanup_in_background, eventually};

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
