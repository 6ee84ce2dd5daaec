use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use confk8s::ObjectKey;

use crate::model::{DeploymentRecord, Owner, PodRecord, ReplicaSetRecord};

/// What the index needs to know of a record.
pub trait Indexed {
    fn key(&self) -> &ObjectKey;
    fn owner(&self) -> Option<&Owner>;
}

impl Indexed for DeploymentRecord {
    fn key(&self) -> &ObjectKey {
        &self.key
    }
    fn owner(&self) -> Option<&Owner> {
        None
    }
}

impl Indexed for PodRecord {
    fn key(&self) -> &ObjectKey {
        &self.key
    }
    fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }
}

impl Indexed for ReplicaSetRecord {
    fn key(&self) -> &ObjectKey {
        &self.key
    }
    fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }
}

/// Records of one kind, ordered by namespace then name (so a namespace is a range and the
/// default list order costs nothing), with a secondary index by controller uid.
#[derive(Debug)]
pub struct Index<R> {
    objects: BTreeMap<ObjectKey, Arc<R>>,
    by_owner: HashMap<String, BTreeSet<ObjectKey>>,
}

impl<R> Default for Index<R> {
    fn default() -> Self {
        Index {
            objects: BTreeMap::new(),
            by_owner: HashMap::new(),
        }
    }
}

impl<R: Indexed> Index<R> {
    pub fn apply(&mut self, record: Arc<R>) {
        let key = record.key().clone();
        if let Some(new_owner) = record.owner() {
            self.by_owner
                .entry(new_owner.uid.clone())
                .or_default()
                .insert(key.clone());
        }
        if let Some(old) = self.objects.insert(key, record.clone()) {
            let old_uid = old.owner().map(|o| o.uid.as_str());
            if old_uid != record.owner().map(|o| o.uid.as_str()) {
                self.unlink_owner(old_uid, record.key());
            }
        }
    }

    pub fn delete(&mut self, key: &ObjectKey) {
        if let Some(old) = self.objects.remove(key) {
            self.unlink_owner(old.owner().map(|o| o.uid.as_str()), key);
        }
    }

    fn unlink_owner(&mut self, owner_uid: Option<&str>, key: &ObjectKey) {
        let Some(uid) = owner_uid else { return };
        if let Some(owned) = self.by_owner.get_mut(uid) {
            owned.remove(key);
            if owned.is_empty() {
                self.by_owner.remove(uid);
            }
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<R>> {
        self.objects.get(key)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Every record of `namespace`, or of all namespaces, in (namespace, name) order.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<R>> + 'a> {
        match namespace {
            None => Box::new(self.objects.values()),
            Some(ns) => Box::new(
                self.objects
                    .range(ObjectKey::new(ns, "")..)
                    .take_while(move |(k, _)| k.namespace == ns)
                    .map(|(_, r)| r),
            ),
        }
    }

    /// Records whose controller has `uid`, in (namespace, name) order.
    pub fn owned_by<'a>(&'a self, uid: &str) -> impl Iterator<Item = &'a Arc<R>> + 'a {
        self.by_owner
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.objects.get(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PodRecord;
    use crate::model::fixtures::mk_pod;

    fn pod(ns: &str, name: &str, rs: Option<(&str, &str)>) -> Arc<PodRecord> {
        PodRecord::from_pod(&mk_pod(ns, name, rs, &[]))
    }

    fn names<'a>(it: impl Iterator<Item = &'a Arc<PodRecord>>) -> Vec<String> {
        it.map(|r| r.key.to_string()).collect()
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
            idx.by_owner.is_empty(),
            "no empty owner sets are left behind"
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
