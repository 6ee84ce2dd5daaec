//! Which custom resources to serve, followed from the cluster's CustomResourceDefinitions:
//! a [`Crds`] state and a [`step`](Crds::step) from CRD events to [`Command`]s, after
//! kube-runtime's watcher (explicit state, one transition function), and a [`CrdFollower`]
//! that feeds it from an informer and sends the commands on a channel.
//!
//! ```no_run
//! # async fn demo(factory: confk8s::InformerFactory) -> Result<(), confk8s::FactoryError> {
//! let mut commands = confk8s::CrdFollower::register(&factory)?;
//! while let Some(command) = commands.recv().await {
//!     println!("{command:?}");
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::discovery::{ApiResource, Scope};
use tokio::sync::mpsc;

use crate::delta::Delta;
use crate::informer::{FactoryError, Handler, InformerFactory, RelistBatch};
use crate::sent::Sent;

/// What serving one custom resource takes, read from its CRD.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomResource {
    /// `spec.group`, such as `example.com`.
    pub group: String,
    /// The served version: the storage version if it is served, else the first served one.
    pub version: String,
    /// As the apiserver accepted it, such as `Widget`.
    pub kind: String,
    /// As the apiserver accepted it, such as `widgets`.
    pub plural: String,
    /// Namespaced or cluster-wide.
    pub scope: Scope,
    /// That version's `additionalPrinterColumns` as the apiserver sends them (a JSON array),
    /// None when it has none.
    pub printer_columns: Option<serde_json::Value>,
    /// That version's `selectableFields`: JSONPaths such as `.spec.color`.
    pub selectable_fields: Vec<String>,
    /// The accepted short names (`wd`), which discovery lists.
    pub short_names: Vec<String>,
    /// The accepted categories (`all`), which discovery lists.
    pub categories: Vec<String>,
}

impl CustomResource {
    /// What `crd` asks to serve: None until it is Established, and when no version is served.
    pub fn of(crd: &CustomResourceDefinition) -> Option<CustomResource> {
        let status = crd.status.as_ref()?;
        let established = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if !established {
            return None;
        }
        let version = served_version(&crd.spec.versions)?;
        // The names the apiserver serves; the spec's are a request it may not have accepted yet.
        let names = status.accepted_names.as_ref().unwrap_or(&crd.spec.names);
        let printer_columns = match &version.additional_printer_columns {
            Some(columns) if !columns.is_empty() => serde_json::to_value(columns).ok(),
            _ => None,
        };
        Some(CustomResource {
            group: crd.spec.group.clone(),
            version: version.name.clone(),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
            scope: if crd.spec.scope == "Cluster" {
                Scope::Cluster
            } else {
                Scope::Namespaced
            },
            printer_columns,
            selectable_fields: version
                .selectable_fields
                .iter()
                .flatten()
                .map(|f| f.json_path.clone())
                .collect(),
            short_names: names.short_names.clone().unwrap_or_default(),
            categories: names.categories.clone().unwrap_or_default(),
        })
    }

    /// The name kubectl takes and the CRD is named: `widgets.example.com`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// For a dynamic watch ([`InformerFactory::watch_dynamic`]).
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: format!("{}/{}", self.group, self.version),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// The storage version if served, else the first served version.
fn served_version(
    versions: &[CustomResourceDefinitionVersion],
) -> Option<&CustomResourceDefinitionVersion> {
    versions
        .iter()
        .find(|v| v.storage && v.served)
        .or_else(|| versions.iter().find(|v| v.served))
}

/// What to do about one custom resource.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Serve it, in place of what was served under the same name if anything was.
    Serve(CustomResource),
    /// Stop serving it (its CRD is gone, or serves nothing): the description last served.
    Stop(CustomResource),
}

/// One change of a CRD, reduced to what [`Crds::step`] needs (a CRD's schema can be large).
#[derive(Clone, Debug, PartialEq)]
pub enum CrdEvent {
    /// The CRD named so exists, serving this (None: nothing).
    Applied(String, Option<Box<CustomResource>>),
    /// The CRD named so is gone.
    Gone(String),
}

impl CrdEvent {
    /// The event a change of an object holding a CRD (`crd` reads it) amounts to.
    fn of<K>(delta: &Delta<K>, crd: impl Fn(&K) -> &CustomResourceDefinition) -> Self {
        match delta {
            Delta::Added(o) | Delta::Updated(o) => {
                let crd = crd(o);
                let name = crd.metadata.name.clone().unwrap_or_default();
                CrdEvent::Applied(name, CustomResource::of(crd).map(Box::new))
            }
            Delta::Deleted(o) => CrdEvent::Gone(crd(o).metadata.name.clone().unwrap_or_default()),
            Delta::Vanished(key) => CrdEvent::Gone(key.name.clone()),
        }
    }
}

impl From<&Delta<CustomResourceDefinition>> for CrdEvent {
    fn from(delta: &Delta<CustomResourceDefinition>) -> Self {
        CrdEvent::of(delta, |crd| crd)
    }
}

/// The shared watch of CRDs is of them as sent (the generic cache of CRDs keeps their JSON).
impl From<&Delta<Sent<CustomResourceDefinition>>> for CrdEvent {
    fn from(delta: &Delta<Sent<CustomResourceDefinition>>) -> Self {
        CrdEvent::of(delta, |sent| &sent.object)
    }
}

/// The custom resources served, by their CRD's name.
#[derive(Debug, Default)]
pub struct Crds {
    served: HashMap<String, CustomResource>,
}

impl Crds {
    /// What `event` changes: a command when what is served under its name changes.
    pub fn step(&mut self, event: CrdEvent) -> Option<Command> {
        match event {
            CrdEvent::Applied(name, Some(serves)) => {
                let serves = *serves;
                if self.served.get(&name) == Some(&serves) {
                    return None;
                }
                self.served.insert(name, serves.clone());
                Some(Command::Serve(serves))
            }
            CrdEvent::Applied(name, None) | CrdEvent::Gone(name) => {
                self.served.remove(&name).map(Command::Stop)
            }
        }
    }

    /// What is served now, in no order.
    pub fn served(&self) -> impl Iterator<Item = &CustomResource> {
        self.served.values()
    }
}

/// A handler of CRD changes that sends what to serve on a channel: the changes of a relist
/// together, once it is complete.
#[derive(Debug)]
pub struct CrdFollower {
    crds: Mutex<Crds>,
    commands: mpsc::UnboundedSender<Command>,
}

impl CrdFollower {
    /// A follower and the receiving end of its commands. The channel is unbounded because
    /// handlers may not wait; it holds at most two commands per CRD change.
    pub fn new() -> (Arc<CrdFollower>, mpsc::UnboundedReceiver<Command>) {
        let (commands, receiver) = mpsc::unbounded_channel();
        let follower = CrdFollower {
            crds: Mutex::new(Crds::default()),
            commands,
        };
        (Arc::new(follower), receiver)
    }

    /// Follows the CRDs through `factory`'s shared watch of them; register before it starts.
    pub fn register(
        factory: &InformerFactory,
    ) -> Result<mpsc::UnboundedReceiver<Command>, FactoryError> {
        let (follower, commands) = CrdFollower::new();
        factory.add_cluster_handler::<Sent<CustomResourceDefinition>>(follower)?;
        Ok(commands)
    }

    fn apply(&self, events: impl IntoIterator<Item = CrdEvent>) {
        let mut crds = self.crds.lock().unwrap_or_else(|e| e.into_inner());
        for command in events.into_iter().filter_map(|e| crds.step(e)) {
            // Nobody listens any more: nothing to serve.
            let _ = self.commands.send(command);
        }
    }
}

/// Of CRDs, or of anything holding one (a [`Sent`] CRD).
impl<K: Send + Sync + 'static> Handler<K> for CrdFollower
where
    for<'a> CrdEvent: From<&'a Delta<K>>,
{
    fn on_deltas(&self, deltas: &[Delta<K>]) {
        self.apply(deltas.iter().map(CrdEvent::from));
    }

    fn begin_relist(self: Arc<Self>) -> Box<dyn RelistBatch<K>> {
        Box::new(CrdRelist {
            follower: self,
            events: Vec::new(),
        })
    }
}

struct CrdRelist {
    follower: Arc<CrdFollower>,
    events: Vec<CrdEvent>,
}

impl<K> RelistBatch<K> for CrdRelist
where
    for<'a> CrdEvent: From<&'a Delta<K>>,
{
    fn add(&mut self, delta: &Delta<K>) {
        self.events.push(delta.into());
    }

    fn commit(self: Box<Self>, _version: &str) {
        self.follower.apply(self.events);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionNames;
    use serde_json::json;

    use super::*;
    use crate::delta::ObjectKey;

    /// An Established, namespaced CRD `widgets.example.com` serving v1 (storage) with one
    /// printer column; `edit` changes it before it is decoded.
    fn mk_crd(edit: impl FnOnce(&mut serde_json::Value)) -> CustomResourceDefinition {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "resourceVersion": "1"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList", "singular": "widget"},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
                     "selectableFields": [{"jsonPath": ".spec.color"}]}
                ]
            },
            "status": {
                "acceptedNames": {"kind": "Widget", "plural": "widgets"},
                "conditions": [
                    {"type": "NamesAccepted", "status": "True"},
                    {"type": "Established", "status": "True"}
                ]
            }
        });
        edit(&mut crd);
        serde_json::from_value(crd).unwrap()
    }

    fn widget() -> CustomResource {
        CustomResource {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            scope: Scope::Namespaced,
            printer_columns: Some(
                json!([{"name": "Color", "type": "string", "jsonPath": ".spec.color"}]),
            ),
            selectable_fields: vec![".spec.color".into()],
            short_names: Vec::new(),
            categories: Vec::new(),
        }
    }

    fn applied(crd: CustomResourceDefinition) -> CrdEvent {
        (&Delta::Updated(crd)).into()
    }

    #[test]
    fn an_established_crd_serves_its_storage_version() {
        let mut crds = Crds::default();
        assert_eq!(
            crds.step(applied(mk_crd(|_| {}))),
            Some(Command::Serve(widget()))
        );
        assert_eq!(widget().name(), "widgets.example.com");
        assert_eq!(widget().api_resource().api_version, "example.com/v1");
        // The same again changes nothing.
        assert_eq!(crds.step(applied(mk_crd(|_| {}))), None);
    }

    #[test]
    fn a_crd_not_yet_established_serves_nothing() {
        let mut crds = Crds::default();
        let pending = mk_crd(|c| c["status"]["conditions"][1]["status"] = json!("False"));
        assert_eq!(crds.step(applied(pending)), None);
        let no_status = mk_crd(|c| {
            c.as_object_mut()
                .unwrap()
                .remove("status")
                .map(drop)
                .unwrap()
        });
        assert_eq!(crds.step(applied(no_status)), None);
        assert_eq!(crds.served().count(), 0);
    }

    #[test]
    fn an_unserved_storage_version_gives_way_to_the_first_served() {
        let crd = mk_crd(|c| c["spec"]["versions"][1]["served"] = json!(false));
        let serves = CustomResource::of(&crd).unwrap();
        assert_eq!(serves.version, "v1beta1");
        assert_eq!(serves.printer_columns, None);
        assert!(serves.selectable_fields.is_empty());
        let none = mk_crd(|c| {
            c["spec"]["versions"][0]["served"] = json!(false);
            c["spec"]["versions"][1]["served"] = json!(false);
        });
        assert_eq!(CustomResource::of(&none), None);
    }

    #[test]
    fn the_accepted_names_and_scope_are_served() {
        let crd = mk_crd(|c| {
            c["spec"]["scope"] = json!("Cluster");
            c["spec"]["names"]["kind"] = json!("Gadget");
        });
        let serves = CustomResource::of(&crd).unwrap();
        assert_eq!(serves.scope, Scope::Cluster);
        assert_eq!(serves.kind, "Widget", "the rename is not accepted yet");
        let mut crd = crd;
        crd.status.as_mut().unwrap().accepted_names = None::<CustomResourceDefinitionNames>;
        assert_eq!(CustomResource::of(&crd).unwrap().kind, "Gadget");
    }

    #[test]
    fn a_change_to_what_is_served_serves_it_again() {
        let mut crds = Crds::default();
        crds.step(applied(mk_crd(|_| {})));
        // Another resourceVersion, a label: nothing served changes.
        let relabelled = mk_crd(|c| {
            c["metadata"]["resourceVersion"] = json!("2");
            c["metadata"]["labels"] = json!({"a": "b"});
        });
        assert_eq!(crds.step(applied(relabelled)), None);
        let columns = mk_crd(|c| {
            c["spec"]["versions"][1]["additionalPrinterColumns"][0]["jsonPath"] =
                json!(".spec.size")
        });
        let mut expected = widget();
        expected.printer_columns =
            Some(json!([{"name": "Color", "type": "string", "jsonPath": ".spec.size"}]));
        assert_eq!(
            crds.step(applied(columns)),
            Some(Command::Serve(expected.clone()))
        );
        let storage = mk_crd(|c| {
            c["spec"]["versions"][0]["storage"] = json!(true);
            c["spec"]["versions"][1]["storage"] = json!(false);
        });
        let Some(Command::Serve(served)) = crds.step(applied(storage)) else {
            panic!("a new storage version is served")
        };
        assert_eq!(served.version, "v1beta1");
        let fields = mk_crd(|c| c["spec"]["versions"][1]["selectableFields"] = json!([]));
        let Some(Command::Serve(served)) = crds.step(applied(fields)) else {
            panic!("new selectable fields are served")
        };
        assert!(served.selectable_fields.is_empty());
    }

    #[test]
    fn a_crd_deleted_or_no_longer_served_stops() {
        let mut crds = Crds::default();
        crds.step(applied(mk_crd(|_| {})));
        assert_eq!(
            crds.step((&Delta::Deleted(mk_crd(|_| {}))).into()),
            Some(Command::Stop(widget()))
        );
        assert_eq!(
            crds.step((&Delta::Deleted(mk_crd(|_| {}))).into()),
            None,
            "stopped once"
        );

        crds.step(applied(mk_crd(|_| {})));
        let vanished: Delta<CustomResourceDefinition> =
            Delta::Vanished(ObjectKey::new("", "widgets.example.com"));
        assert_eq!(crds.step((&vanished).into()), Some(Command::Stop(widget())));

        crds.step(applied(mk_crd(|_| {})));
        let unserved = mk_crd(|c| {
            c["spec"]["versions"][0]["served"] = json!(false);
            c["spec"]["versions"][1]["served"] = json!(false);
        });
        assert_eq!(crds.step(applied(unserved)), Some(Command::Stop(widget())));
        assert_eq!(crds.served().count(), 0);
    }

    #[tokio::test]
    async fn a_relist_sends_its_commands_when_committed() {
        let (follower, mut commands) = CrdFollower::new();
        follower.on_deltas(&[Delta::Added(mk_crd(|_| {}))]);
        assert_eq!(commands.try_recv(), Ok(Command::Serve(widget())));
        let gadgets = mk_crd(|c| {
            c["metadata"]["name"] = json!("gadgets.example.com");
            c["spec"]["names"] = json!({"kind": "Gadget", "plural": "gadgets"});
            c["status"]["acceptedNames"] = json!({"kind": "Gadget", "plural": "gadgets"});
        });
        let mut batch = Handler::<CustomResourceDefinition>::begin_relist(follower.clone());
        batch.add(&Delta::Added(gadgets));
        batch.add(&Delta::Vanished(ObjectKey::new("", "widgets.example.com")));
        assert!(commands.try_recv().is_err(), "nothing before the commit");
        batch.commit("7");
        let Ok(Command::Serve(gadget)) = commands.try_recv() else {
            panic!("gadgets served")
        };
        assert_eq!(gadget.name(), "gadgets.example.com");
        assert_eq!(commands.try_recv(), Ok(Command::Stop(widget())));
    }
}
