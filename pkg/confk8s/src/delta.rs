use std::collections::HashMap;

use kube::Resource;

use crate::watcher::Event;

/// namespace/name; the namespace is empty for cluster-scoped objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace` (empty for a cluster-scoped object).
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of an object. A missing namespace (a cluster-scoped object) becomes empty, and so
    /// would a missing name, which the apiserver never sends.
    pub fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        ObjectKey {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One change to the set of watched objects.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta<K> {
    /// An object not known before.
    Added(K),
    /// A known object whose resourceVersion changed.
    Updated(K),
    /// A deletion the watch told of: the object as it was deleted, its resourceVersion the
    /// deletion's, as the apiserver sends it.
    Deleted(K),
    /// Absent from a relist: deleted while the watch was down, so known only by its key and
    /// at no resourceVersion of its own.
    Vanished(ObjectKey),
}

impl<K: Resource> Delta<K> {
    /// The key of the object the change is about.
    pub fn key(&self) -> ObjectKey {
        match self {
            Delta::Added(o) | Delta::Updated(o) | Delta::Deleted(o) => ObjectKey::of(o),
            Delta::Vanished(key) => key.clone(),
        }
    }
}

pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no reader needs and that makes up about half of an object's bytes.
pub fn strip_noise<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Turns a kube watcher's event stream into add / update / delete deltas, the way client-go's
/// DeltaFIFO does, while remembering only each object's resourceVersion (never the objects, so
/// that the handlers' compact caches are the only copy kept).
///
/// A relist (`Init` .. `InitDone`) is reported as it arrives: its additions and updates of
/// objects whose resourceVersion changed one by one, then at `InitDone` the keys of objects
/// absent from the new list. Objects whose resourceVersion did not change produce nothing.
#[derive(Debug, Default)]
pub struct DeltaTracker {
    known: HashMap<ObjectKey, String>,
    /// During a relist: what the new list holds so far.
    relist: Option<HashMap<ObjectKey, String>>,
}

/// What one watcher event amounted to.
#[derive(Debug, PartialEq)]
pub enum Step<K> {
    /// Nothing to tell handlers (an unchanged object).
    Nothing,
    /// Outside relists: changes to apply now.
    Deltas(Vec<Delta<K>>),
    /// A relist began: collect what follows and apply it together at [`Step::Relisted`].
    RelistStarted,
    /// One change within the relist.
    RelistDelta(Delta<K>),
    /// The relist is complete, at the list's own `version`; the objects `gone` are no more.
    Relisted {
        /// Known before, absent from the new list.
        gone: Vec<ObjectKey>,
        /// The list's resourceVersion: the state is the one at it.
        version: String,
    },
    /// Nothing changed up to `version` (a bookmark): the state is the one at it.
    Bookmark(String),
}

impl DeltaTracker {
    /// How many objects are known: those of the last complete list and the changes since. During
    /// a relist this is still the count from before it.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether no object is known (see [`DeltaTracker::len`]).
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// Folds one watcher event into what is known and says what handlers must be told. Events
    /// must come in the watcher's order: an `InitApply` outside `Init` .. `InitDone` starts a
    /// relist implicitly.
    pub fn step<K: Resource>(&mut self, event: Event<K>) -> Step<K> {
        match event {
            Event::Init => {
                self.relist = Some(HashMap::new());
                Step::RelistStarted
            }
            Event::InitApply(obj) => {
                let key = ObjectKey::of(&obj);
                let rv = obj.meta().resource_version.clone().unwrap_or_default();
                let step = match self.known.get(&key) {
                    Some(old) if *old == rv => Step::Nothing,
                    Some(_) => Step::RelistDelta(Delta::Updated(obj)),
                    None => Step::RelistDelta(Delta::Added(obj)),
                };
                self.relist.get_or_insert_with(HashMap::new).insert(key, rv);
                step
            }
            Event::InitDone { version, .. } => {
                let seen = self.relist.take().unwrap_or_default();
                let gone = self
                    .known
                    .keys()
                    .filter(|k| !seen.contains_key(*k))
                    .cloned()
                    .collect();
                self.known = seen;
                Step::Relisted { gone, version }
            }
            Event::Bookmark { version } => Step::Bookmark(version),
            Event::Apply(obj) => {
                let key = ObjectKey::of(&obj);
                let rv = obj.meta().resource_version.clone().unwrap_or_default();
                match self.known.insert(key, rv.clone()) {
                    Some(old) if old == rv => Step::Nothing,
                    Some(_) => Step::Deltas(vec![Delta::Updated(obj)]),
                    None => Step::Deltas(vec![Delta::Added(obj)]),
                }
            }
            Event::Delete(obj) => {
                let key = ObjectKey::of(&obj);
                match self.known.remove(&key) {
                    Some(_) => Step::Deltas(vec![Delta::Deleted(obj)]),
                    None => Step::Nothing,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn mk(ns: &str, name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The relist's changes in the order a handler's batch receives them.
    fn relist(t: &mut DeltaTracker, objs: Vec<ConfigMap>) -> Vec<Delta<ConfigMap>> {
        assert_eq!(t.step::<ConfigMap>(Event::Init), Step::RelistStarted);
        let mut deltas = Vec::new();
        for o in objs {
            match t.step(Event::InitApply(o)) {
                Step::RelistDelta(d) => deltas.push(d),
                Step::Nothing => {}
                other => panic!("unexpected {other:?} inside a relist"),
            }
        }
        let done = Event::InitDone {
            version: "100".into(),
            encoding: crate::ListEncoding::Json,
        };
        match t.step::<ConfigMap>(done) {
            Step::Relisted { gone, version } => {
                assert_eq!(version, "100");
                deltas.extend(gone.into_iter().map(Delta::Vanished))
            }
            other => panic!("expected the end of the relist, got {other:?}"),
        }
        deltas
    }

    fn step(t: &mut DeltaTracker, e: Event<ConfigMap>) -> Step<ConfigMap> {
        t.step(e)
    }

    #[test]
    fn first_list_adds_everything() {
        let mut t = DeltaTracker::default();
        let d = relist(&mut t, vec![mk("a", "x", "1"), mk("b", "y", "2")]);
        assert_eq!(
            d,
            vec![
                Delta::Added(mk("a", "x", "1")),
                Delta::Added(mk("b", "y", "2"))
            ]
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn apply_distinguishes_add_update_and_no_change() {
        let mut t = DeltaTracker::default();
        relist(&mut t, vec![]);
        assert_eq!(
            step(&mut t, Event::Apply(mk("a", "x", "1"))),
            Step::Deltas(vec![Delta::Added(mk("a", "x", "1"))])
        );
        assert_eq!(step(&mut t, Event::Apply(mk("a", "x", "1"))), Step::Nothing);
        assert_eq!(
            step(&mut t, Event::Apply(mk("a", "x", "2"))),
            Step::Deltas(vec![Delta::Updated(mk("a", "x", "2"))])
        );
        assert_eq!(
            step(&mut t, Event::Delete(mk("a", "x", "3"))),
            Step::Deltas(vec![Delta::Deleted(mk("a", "x", "3"))])
        );
        assert_eq!(
            step(&mut t, Event::Delete(mk("a", "x", "3"))),
            Step::Nothing
        );
        assert!(t.is_empty());
        assert_eq!(
            step(
                &mut t,
                Event::Bookmark {
                    version: "4".into()
                }
            ),
            Step::Bookmark("4".into())
        );
    }

    #[test]
    fn relist_reports_only_differences_and_drops_the_absent() {
        let mut t = DeltaTracker::default();
        relist(
            &mut t,
            vec![
                mk("a", "same", "1"),
                mk("a", "changed", "1"),
                mk("a", "gone", "1"),
            ],
        );
        let d = relist(
            &mut t,
            vec![
                mk("a", "same", "1"),
                mk("a", "changed", "5"),
                mk("a", "new", "6"),
            ],
        );
        assert_eq!(
            d,
            vec![
                Delta::Updated(mk("a", "changed", "5")),
                Delta::Added(mk("a", "new", "6")),
                Delta::Vanished(ObjectKey::new("a", "gone")),
            ]
        );
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn strip_noise_removes_managed_fields_and_last_applied_only() {
        let mut cm = mk("a", "x", "1");
        cm.metadata.managed_fields = Some(vec![Default::default()]);
        cm.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_string(), "{}".to_string()),
                ("keep".to_string(), "me".to_string()),
            ]
            .into(),
        );
        strip_noise(&mut cm);
        assert!(cm.metadata.managed_fields.is_none());
        assert_eq!(
            cm.metadata
                .annotations
                .unwrap()
                .into_keys()
                .collect::<Vec<_>>(),
            ["keep"]
        );
    }
}
