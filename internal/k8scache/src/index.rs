use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use model::{
    DeploymentRecord, IngressRecord, KeyParts, Keyed, NamespaceRecord, ObjectKey, PodRecord,
    ReplicaSetRecord, Selectable, ServiceRecord,
};

/// A value a record can be looked up by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Term {
    Label(String, String),
    /// The uid of the controller in the record's ownerReferences.
    Owner(String),
    /// A selectable field whose values are shared by many records (node, phase).
    Field(&'static str, String),
}

/// The Pod fields worth an index: their values group many objects, unlike names or IPs.
const INDEXED_POD_FIELDS: &[&str] = &["spec.nodeName", "status.phase"];

/// What the index needs to know of a record beyond its key: its labels, unless the kind has
/// more to look it up by.
pub trait Indexed: Keyed + Selectable {
    /// The selectable fields whose values [`Indexed::terms`] holds as [`Term::Field`]s.
    const INDEXED_FIELDS: &'static [&'static str] = &[];

    fn terms(&self) -> Vec<Term> {
        label_terms(self.labels()).collect()
    }
}

fn label_terms(labels: &model::Labels) -> impl Iterator<Item = Term> + '_ {
    labels
        .iter()
        .map(|(k, v)| Term::Label(k.clone(), v.clone()))
}

impl Indexed for DeploymentRecord {}
impl Indexed for ServiceRecord {}
impl Indexed for IngressRecord {}
impl Indexed for NamespaceRecord {}

impl Indexed for PodRecord {
    const INDEXED_FIELDS: &'static [&'static str] = INDEXED_POD_FIELDS;

    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = label_terms(&self.labels).collect();
        terms.extend(self.owner.as_ref().map(|o| Term::Owner(o.uid.clone())));
        terms.push(Term::Field("spec.nodeName", self.fields.node_name.clone()));
        terms.push(Term::Field("status.phase", self.fields.phase.clone()));
        terms
    }
}

impl Indexed for model::GenericRecord {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = label_terms(&self.labels).collect();
        terms.extend(self.owner.as_ref().map(|o| Term::Owner(o.uid.clone())));
        terms
    }
}

impl Indexed for ReplicaSetRecord {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = label_terms(&self.labels).collect();
        terms.extend(self.owner.as_ref().map(|o| Term::Owner(o.uid.clone())));
        terms
    }
}

/// Records of one kind. Each record gets a small id; `ids` orders them by namespace then name
/// (so a namespace is a range and the default list order costs nothing), `by_key` finds one
/// by its key, and `postings` maps each [`Term`] to the ids that have it, four bytes an entry
/// rather than a key.
#[derive(Debug)]
pub struct Index<R> {
    slots: Vec<Option<Arc<R>>>,
    free: Vec<u32>,
    ids: BTreeMap<ObjectKey, u32>,
    /// The ids again, by a hash of their record's key: a GET, and each change an informer
    /// applies, finds its record with one hash and one comparison of keys, where `ids`
    /// compares keys at every level it descends (about 20 at a thousand records). Five bytes
    /// an id.
    by_key: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    postings: HashMap<Term, BTreeSet<u32>>,
}

impl<R> Default for Index<R> {
    fn default() -> Self {
        Index {
            slots: Vec::new(),
            free: Vec::new(),
            ids: BTreeMap::new(),
            by_key: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            postings: HashMap::new(),
        }
    }
}

impl<R: Indexed> Index<R> {
    /// Adds or replaces the record of its key; the record it replaced, if any.
    pub fn apply(&mut self, record: Arc<R>) -> Option<Arc<R>> {
        let new_terms = record.terms();
        match self.id_of(record.key()) {
            Some(id) => {
                let old = self.slots[id as usize].replace(record);
                let old_terms = old.as_ref().map(|o| o.terms()).unwrap_or_default();
                for term in old_terms.iter().filter(|t| !new_terms.contains(t)) {
                    self.unpost(term, id);
                }
                for term in new_terms.into_iter().filter(|t| !old_terms.contains(t)) {
                    self.postings.entry(term).or_default().insert(id);
                }
                old
            }
            None => {
                let id = match self.free.pop() {
                    Some(id) => {
                        self.slots[id as usize] = Some(record.clone());
                        id
                    }
                    None => {
                        self.slots.push(Some(record.clone()));
                        (self.slots.len() - 1) as u32
                    }
                };
                self.ids.insert(record.key().clone(), id);
                let (slots, hasher) = (&self.slots, &self.hasher);
                self.by_key
                    .insert_unique(key_hash(hasher, record.key()), id, |&id| {
                        slot_hash(hasher, slots, id)
                    });
                for term in new_terms {
                    self.postings.entry(term).or_default().insert(id);
                }
                None
            }
        }
    }

    /// Removes the record of `key`; the record removed, if there was one.
    pub fn delete(&mut self, key: &ObjectKey) -> Option<Arc<R>> {
        let id = self.ids.remove(key)?;
        if let Ok(found) = self
            .by_key
            .find_entry(key_hash(&self.hasher, key), |&other| other == id)
        {
            found.remove();
        }
        let old = self.slots[id as usize].take();
        for term in old.iter().flat_map(|o| o.terms()) {
            self.unpost(&term, id);
        }
        self.free.push(id);
        old
    }

    fn unpost(&mut self, term: &Term, id: u32) {
        if let Some(ids) = self.postings.get_mut(term) {
            ids.remove(&id);
            if ids.is_empty() {
                self.postings.remove(term);
            }
        }
    }

    fn slot(&self, id: u32) -> Option<&Arc<R>> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    pub fn get(&self, key: &dyn KeyParts) -> Option<&Arc<R>> {
        self.id_of(key).and_then(|id| self.slot(id))
    }

    fn id_of(&self, key: &dyn KeyParts) -> Option<u32> {
        let parts = key.parts();
        self.by_key
            .find(key_hash(&self.hasher, key), |&id| {
                self.slot(id).is_some_and(|r| r.key().parts() == parts)
            })
            .copied()
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Every record of `namespace`, or of all namespaces, in (namespace, name) order.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<R>> + 'a {
        // Bounded at both ends, so only the bounds compare keys: the walk between them reads
        // no key's text (a list of a namespace is a walk over its records, not their names).
        let ids = match namespace {
            None => self.ids.range::<ObjectKey, _>(..),
            Some(ns) => self.ids.range::<ObjectKey, _>(
                ObjectKey::new(ns, "")..ObjectKey::new(after_namespace(ns), ""),
            ),
        };
        ids.filter_map(|(_, id)| self.slot(*id))
    }

    /// The namespaces holding a record, in order: one lookup per namespace, not per record.
    pub fn namespaces(&self) -> Vec<String> {
        let mut namespaces = Vec::new();
        let mut from = ObjectKey::new("", "");
        while let Some((key, _)) = self.ids.range::<ObjectKey, _>(&from..).next() {
            namespaces.push(key.namespace.clone());
            from = ObjectKey::new(after_namespace(&key.namespace), "");
        }
        namespaces
    }

    /// Records that have `term`, in (namespace, name) order.
    pub fn with_term(&self, term: &Term) -> Vec<&Arc<R>> {
        self.in_order(self.postings.get(term).into_iter().flatten().copied())
    }

    /// Records controlled by the object with `uid`, in (namespace, name) order.
    pub fn owned_by(&self, uid: &str) -> Vec<&Arc<R>> {
        self.with_term(&Term::Owner(uid.to_string()))
    }

    fn in_order(&self, ids: impl Iterator<Item = u32>) -> Vec<&Arc<R>> {
        let mut records: Vec<&Arc<R>> = ids.filter_map(|id| self.slot(id)).collect();
        records.sort_by(|a, b| a.key().cmp(b.key()));
        records
    }

    /// A superset of the records of `namespace` that have, for each group of `required`, at
    /// least one of its terms, in (namespace, name) order; None when `required` is empty (then
    /// the caller scans). Only the smallest group is read: the caller filters the rest.
    pub fn candidates<'a>(
        &'a self,
        namespace: Option<&str>,
        required: &[Vec<Term>],
    ) -> Option<Vec<&'a Arc<R>>> {
        let size = |group: &Vec<Term>| -> usize {
            group
                .iter()
                .map(|t| self.postings.get(t).map_or(0, BTreeSet::len))
                .sum()
        };
        let smallest = required.iter().min_by_key(|g| size(g))?;
        let mut ids: Vec<u32> = smallest
            .iter()
            .flat_map(|t| self.postings.get(t).into_iter().flatten().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut records = self.in_order(ids.into_iter());
        if let Some(ns) = namespace {
            records.retain(|r| r.key().namespace == ns);
        }
        Some(records)
    }
}

fn key_hash(hasher: &foldhash::fast::RandomState, key: &dyn KeyParts) -> u64 {
    hasher.hash_one(key.parts())
}

fn slot_hash<R: Keyed>(
    hasher: &foldhash::fast::RandomState,
    slots: &[Option<Arc<R>>],
    id: u32,
) -> u64 {
    // Every id in `by_key` has its record in its slot; an empty one hashes as no key does.
    slots
        .get(id as usize)
        .and_then(Option::as_ref)
        .map_or(0, |r| key_hash(hasher, r.key()))
}

/// The least namespace after `namespace`: with the name "", the least key of any later
/// namespace (names sort after "", and a namespace never holds a NUL).
fn after_namespace(namespace: &str) -> String {
    format!("{namespace}\0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::PodRecord;
    use model::fixtures::mk_pod;

    fn pod(ns: &str, name: &str, rs: Option<(&str, &str)>) -> Arc<PodRecord> {
        PodRecord::from_pod(&mk_pod(ns, name, rs, &[]))
    }

    fn labelled(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<PodRecord> {
        PodRecord::from_pod(&mk_pod(ns, name, None, labels))
    }

    fn names<'a>(it: impl IntoIterator<Item = &'a Arc<PodRecord>>) -> Vec<String> {
        it.into_iter().map(|r| r.key.to_string()).collect()
    }

    fn label(k: &str, v: &str) -> Term {
        Term::Label(k.into(), v.into())
    }

    #[test]
    fn namespace_ranges_are_exact_and_ordered() {
        let mut idx = Index::default();
        for (ns, name) in [("b", "2"), ("a", "9"), ("b", "1"), ("ab", "1"), ("c", "1")] {
            idx.apply(pod(ns, name, None));
        }
        assert_eq!(names(idx.in_namespace(Some("b"))), ["b/1", "b/2"]);
        assert_eq!(names(idx.in_namespace(Some("a"))), ["a/9"]);
        assert_eq!(names(idx.in_namespace(Some("zz"))), Vec::<String>::new());
        assert_eq!(
            names(idx.in_namespace(None)),
            ["a/9", "ab/1", "b/1", "b/2", "c/1"]
        );
        assert_eq!(idx.namespaces(), ["a", "ab", "b", "c"]);
        assert!(Index::<PodRecord>::default().namespaces().is_empty());
    }

    #[test]
    fn owner_index_follows_apply_update_and_delete() {
        let mut idx = Index::default();
        idx.apply(pod("a", "p1", Some(("rs", "u1"))));
        idx.apply(pod("a", "p2", Some(("rs", "u1"))));
        assert_eq!(names(idx.owned_by("u1")), ["a/p1", "a/p2"]);
        // Adopted by another controller: the old link must go.
        idx.apply(pod("a", "p1", Some(("rs2", "u2"))));
        assert_eq!(names(idx.owned_by("u1")), ["a/p2"]);
        assert_eq!(names(idx.owned_by("u2")), ["a/p1"]);
        // Orphaned.
        idx.apply(pod("a", "p2", None));
        assert_eq!(names(idx.owned_by("u1")), Vec::<String>::new());
        idx.delete(&ObjectKey::new("a", "p1"));
        assert_eq!(names(idx.owned_by("u2")), Vec::<String>::new());
        assert_eq!(idx.len(), 1);
        assert!(
            !idx.postings.keys().any(|t| matches!(t, Term::Owner(_))),
            "no empty owner postings are left"
        );
    }

    #[test]
    fn label_postings_follow_relabelling_and_reuse_freed_ids() {
        let mut idx = Index::default();
        idx.apply(labelled("a", "p1", &[("app", "web"), ("tier", "fe")]));
        idx.apply(labelled("a", "p2", &[("app", "web")]));
        assert_eq!(names(idx.with_term(&label("app", "web"))), ["a/p1", "a/p2"]);
        idx.apply(labelled("a", "p1", &[("app", "api"), ("tier", "fe")]));
        assert_eq!(names(idx.with_term(&label("app", "web"))), ["a/p2"]);
        assert_eq!(names(idx.with_term(&label("app", "api"))), ["a/p1"]);
        assert_eq!(names(idx.with_term(&label("tier", "fe"))), ["a/p1"]);
        idx.delete(&ObjectKey::new("a", "p1"));
        idx.apply(labelled("b", "p3", &[("app", "web")]));
        assert_eq!(idx.slots.len(), 2, "the freed id is reused");
        assert_eq!(names(idx.with_term(&label("app", "web"))), ["a/p2", "b/p3"]);
        assert!(idx.with_term(&label("tier", "fe")).is_empty());
        assert_eq!(names(idx.in_namespace(None)), ["a/p2", "b/p3"]);
    }

    #[test]
    fn records_are_found_by_key_through_updates_deletes_and_reused_ids() {
        let mut idx = Index::default();
        let keys: Vec<(String, String)> = (0..300)
            .map(|i| (format!("ns{}", i % 7), format!("p{i}")))
            .collect();
        for (ns, name) in &keys {
            idx.apply(pod(ns, name, None));
        }
        // Every other one deleted, then half of those back: their ids are reused.
        for (ns, name) in keys.iter().step_by(2) {
            assert!(idx.delete(&ObjectKey::new(ns, name)).is_some());
        }
        for (ns, name) in keys.iter().step_by(4) {
            idx.apply(pod(ns, name, Some(("rs", "u1"))));
        }
        for (i, (ns, name)) in keys.iter().enumerate() {
            let found = idx.get(&(ns.as_str(), name.as_str()));
            match i % 4 {
                0 => assert_eq!(
                    found.map(|r| r.key.to_string()),
                    Some(format!("{ns}/{name}"))
                ),
                2 => assert!(found.is_none(), "{ns}/{name} was deleted"),
                _ => assert!(found.is_some(), "{ns}/{name}"),
            }
        }
        // An update replaces the record under the same id, found as before.
        idx.apply(pod("ns1", "p1", Some(("rs", "u2"))));
        assert_eq!(
            idx.get(&("ns1", "p1"))
                .and_then(|r| r.owner.as_ref())
                .map(|o| o.uid.as_str()),
            Some("u2")
        );
        assert_eq!(idx.len(), 225);
        assert_eq!(idx.by_key.len(), idx.len());
        assert!(
            idx.get(&("ns1", "p2")).is_none(),
            "a name of another namespace"
        );
    }

    #[test]
    fn candidates_read_the_smallest_group_within_the_namespace() {
        let mut idx = Index::default();
        for i in 0..20 {
            idx.apply(labelled(
                "a",
                &format!("p{i:02}"),
                &[("app", "web"), ("shard", &(i % 10).to_string())],
            ));
        }
        idx.apply(labelled("b", "p00", &[("app", "web"), ("shard", "3")]));
        let required = vec![
            vec![label("app", "web")],
            vec![label("shard", "3"), label("shard", "4")],
        ];
        assert_eq!(
            names(idx.candidates(Some("a"), &required).unwrap()),
            ["a/p03", "a/p04", "a/p13", "a/p14"]
        );
        assert_eq!(
            names(idx.candidates(None, &[vec![label("shard", "3")]]).unwrap()),
            ["a/p03", "a/p13", "b/p00"]
        );
        assert!(idx.candidates(None, &[]).is_none());
        assert!(
            idx.candidates(None, &[vec![label("app", "none")]])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn reapplying_the_same_owner_keeps_the_link() {
        let mut idx = Index::default();
        idx.apply(pod("a", "p1", Some(("rs", "u1"))));
        idx.apply(pod("a", "p1", Some(("rs", "u1"))));
        assert_eq!(names(idx.owned_by("u1")), ["a/p1"]);
    }
}
