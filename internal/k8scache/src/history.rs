//! The recent changes of one cache, each at the resourceVersion it brought the cache to, so
//! that a reader can ask for "every change after N" (a resumed watch) or "the state as it was
//! at N" (the next page of a list begun at N, on whichever replica). Bounded: the oldest
//! changes go first, and a version older than what is kept is expired, as the apiserver
//! answers a version etcd compacted away.
//!
//! resourceVersions are opaque to clients, but every etcd-backed apiserver issues them as
//! one increasing integer sequence shared by all kinds; replicas watching the same apiserver
//! therefore agree on what each version means.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use model::{Keyed, ObjectKey};

use super::Change;

/// Why a version cannot be served from the history.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// Changes after `requested` are no longer all kept (or the cache relisted since).
    #[error(
        "resourceVersion {requested} is too old: changes are kept from {} on",
        complete_after.map_or("no version".to_string(), |v| v.to_string())
    )]
    Expired {
        requested: u64,
        complete_after: Option<u64>,
    },
    /// The cache has not yet heard of `requested` (another replica is ahead of this one).
    #[error(
        "resourceVersion {requested} is newer than this cache ({})",
        current.map_or("no version yet".to_string(), |v| v.to_string())
    )]
    Ahead {
        requested: u64,
        current: Option<u64>,
    },
}

/// Which state a cache's objects are in: the version of the newest change or list that made
/// them so, and how many changes and relists brought them there. Two stamps of one cache that
/// are equal name the same objects; a change or a relist makes a new one. A bookmark does
/// not: it moves the cache's version on ([`History::current`]) and changes no object, so
/// what was answered from the objects before it is still their state (and the changes kept
/// still lead from its version: only a change or a relist drops any). The count covers what
/// the version alone would miss: a relist that finds the objects changed without a newer
/// version (an etcd restored from a backup), or a change whose version is not a number.
/// Ordered: a cache's stamps only grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateStamp {
    pub version: u64,
    pub changes: u64,
}

/// A cache's recent changes. Kept under the cache's lock with its index, so both always
/// describe the same state.
#[derive(Debug)]
pub struct History<R> {
    /// Oldest first, each with the version it brought the cache to.
    changes: VecDeque<(u64, Change<R>)>,
    /// Every change after this version is in `changes`: the oldest version the cache's state
    /// can be rewound to. None until the first list, or after a change whose version is not a
    /// number.
    complete_after: Option<u64>,
    /// The version the cache's state is at: the newest the informer delivered (a change's, a
    /// list's or a bookmark's). It never goes down, so no version served is ever taken back.
    current: Option<u64>,
    /// The version of the newest change or list, where the objects last changed: a bookmark
    /// moves `current` on, never this. With `applied`, its state's stamp.
    changed: Option<u64>,
    /// Changes and relists applied since the cache began.
    applied: u64,
    capacity: usize,
}

impl<R> History<R> {
    /// Keeps at most `capacity` changes; 0 keeps none, so only the current version is served.
    pub fn new(capacity: usize) -> Self {
        History {
            changes: VecDeque::new(),
            complete_after: None,
            current: None,
            changed: None,
            applied: 0,
            capacity,
        }
    }

    /// The version the cache's state is at; None before anything with a version arrived.
    pub fn current(&self) -> Option<u64> {
        self.current
    }

    /// The stamp of the state the objects are in; None before anything with a version
    /// arrived.
    pub fn stamp(&self) -> Option<StateStamp> {
        self.changed.map(|version| StateStamp {
            version,
            changes: self.applied,
        })
    }

    /// The state was replaced by a list at `listed`, the list's own resourceVersion (None if
    /// it is not a number): no earlier version can be rebuilt, since the deletions the list
    /// implies have no versions of their own. The list's version, not its newest object's:
    /// after a deletion the newest object left is older than the version already served, and
    /// a resumed watch would be told it is ahead of the cache until something else changed.
    pub(crate) fn relisted(&mut self, listed: Option<u64>) {
        self.applied += 1;
        self.changes.clear();
        self.current = self.current.max(listed);
        self.complete_after = self.current;
        self.changed = self.current;
    }

    /// A bookmark: nothing changed up to `version`, so the state is the one at it. The changes
    /// kept still lead to it, so a watch resumed from any version since the record began is
    /// served; as the apiserver's watch cache moves on with etcd's progress notifications, so
    /// that a version another replica served is reached without waiting for a change. The
    /// objects are as they were: the stamp stays.
    pub(crate) fn bookmarked(&mut self, version: u64) {
        self.current = self.current.max(Some(version));
    }

    /// One change told by the watch. A change without a numeric version cannot be placed, so
    /// nothing before it can be rebuilt either.
    pub(crate) fn push(&mut self, version: Option<u64>, change: &Change<R>) {
        self.applied += 1;
        let Some(version) = version else {
            self.changes.clear();
            self.complete_after = None;
            return;
        };
        self.current = self.current.max(Some(version));
        self.changed = self.changed.max(Some(version));
        if self.complete_after.is_none() {
            // Nothing was known before: the first change starts the record.
            self.complete_after = Some(version.saturating_sub(1));
        }
        self.changes.push_back((version, change.clone()));
        while self.changes.len() > self.capacity {
            if let Some((oldest, _)) = self.changes.pop_front() {
                self.complete_after = Some(oldest);
            }
        }
    }

    /// Whether the state can be rewound to `version`: Ok with the changes after it.
    pub fn after(
        &self,
        version: u64,
    ) -> Result<impl Iterator<Item = &(u64, Change<R>)>, HistoryError> {
        match (self.complete_after, self.current) {
            (_, current) if current.is_none_or(|c| version > c) => Err(HistoryError::Ahead {
                requested: version,
                current,
            }),
            (Some(complete), _) if version >= complete => {
                // Versions increase along the deque: the changes after `version` are a suffix.
                let start = self.changes.partition_point(|(v, _)| *v <= version);
                Ok(self.changes.range(start..))
            }
            (complete_after, _) => Err(HistoryError::Expired {
                requested: version,
                complete_after,
            }),
        }
    }
}

impl<R: Keyed> History<R> {
    /// The objects changed after `version`, each as it was at `version` (None: it did not
    /// exist then). Every other object is as the index holds it now.
    pub fn rewound_to(
        &self,
        version: u64,
    ) -> Result<HashMap<&ObjectKey, Option<&Arc<R>>>, HistoryError> {
        let mut then = HashMap::new();
        for (_, change) in self.after(version)? {
            // The first change after `version` started from the state at `version`.
            then.entry(change.key()).or_insert_with(|| change.before());
        }
        Ok(then)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::PodRecord;
    use model::fixtures::mk_pod;

    fn pod(name: &str, rv: &str) -> Arc<PodRecord> {
        let mut p = mk_pod("ns", name, None, &[]);
        p.metadata.resource_version = Some(rv.into());
        PodRecord::from_pod(&p)
    }

    fn applied(old: Option<Arc<PodRecord>>, new: Arc<PodRecord>) -> Change<PodRecord> {
        Change::Applied { old, new }
    }

    fn versions(h: &History<PodRecord>, after: u64) -> Result<Vec<u64>, HistoryError> {
        Ok(h.after(after)?.map(|(v, _)| *v).collect())
    }

    #[test]
    fn changes_after_a_version_are_served_until_pushed_out() {
        let mut h = History::new(2);
        h.relisted(Some(10));
        assert_eq!(versions(&h, 10), Ok(vec![]));
        h.push(Some(11), &applied(None, pod("a", "11")));
        h.push(Some(12), &applied(None, pod("b", "12")));
        assert_eq!(versions(&h, 10), Ok(vec![11, 12]));
        assert_eq!(versions(&h, 11), Ok(vec![12]));
        h.push(Some(13), &applied(None, pod("c", "13")));
        assert_eq!(versions(&h, 11), Ok(vec![12, 13]));
        assert_eq!(
            versions(&h, 10),
            Err(HistoryError::Expired {
                requested: 10,
                complete_after: Some(11)
            })
        );
        assert_eq!(
            versions(&h, 14),
            Err(HistoryError::Ahead {
                requested: 14,
                current: Some(13)
            })
        );
    }

    #[test]
    fn a_history_of_none_serves_the_current_version_only() {
        let mut h = History::new(0);
        h.relisted(Some(10));
        h.push(Some(11), &applied(None, pod("a", "11")));
        h.push(Some(12), &applied(None, pod("b", "12")));
        assert!(matches!(h.after(11), Err(HistoryError::Expired { .. })));
        assert_eq!(versions(&h, 12), Ok(vec![]));
    }

    #[test]
    fn a_relist_forgets_what_came_before_it() {
        let mut h = History::new(8);
        h.relisted(Some(10));
        h.push(Some(11), &applied(None, pod("a", "11")));
        h.relisted(Some(20));
        assert!(matches!(h.after(11), Err(HistoryError::Expired { .. })));
        assert_eq!(versions(&h, 20), Ok(vec![]));
        // A relist that found nothing newer keeps the version it had.
        h.relisted(Some(5));
        assert_eq!(h.current(), Some(20));
    }

    #[test]
    fn versions_never_go_back() {
        let mut h = History::new(8);
        h.relisted(Some(10));
        h.push(Some(11), &applied(None, pod("a", "11")));
        // Deleted at 12: the newest object left is at 11, the list after it at 12 or later.
        h.push(
            Some(12),
            &Change::Deleted {
                old: pod("a", "11"),
                last: pod("a", "12"),
            },
        );
        h.relisted(Some(12));
        assert_eq!(h.current(), Some(12));
        assert_eq!(versions(&h, 12), Ok(vec![]));
        // An older bookmark or list takes nothing back.
        h.bookmarked(11);
        h.relisted(Some(9));
        assert_eq!(h.current(), Some(12));
    }

    #[test]
    fn every_change_and_relist_makes_a_new_stamp_and_a_bookmark_none() {
        let mut h = History::new(8);
        assert_eq!(h.stamp(), None);
        h.relisted(Some(10));
        let listed = h.stamp().unwrap();
        assert_eq!(listed.version, 10);
        h.push(Some(11), &applied(None, pod("a", "11")));
        let changed = h.stamp().unwrap();
        // A relist that finds other objects at no newer version still changes the stamp.
        h.relisted(Some(11));
        let relisted = h.stamp().unwrap();
        // A change whose version is not a number too.
        h.push(None, &applied(None, pod("b", "x")));
        let unplaced = h.stamp().unwrap();
        // A bookmark moves the version on, and changes no object: the stamp stays.
        h.bookmarked(30);
        assert_eq!(h.current(), Some(30));
        assert_eq!(h.stamp(), Some(unplaced));
        // The next change after it is at a newer version than the bookmark's.
        h.push(Some(31), &applied(None, pod("c", "31")));
        let after_bookmark = h.stamp().unwrap();
        assert_eq!(after_bookmark.version, 31);
        let stamps = [listed, changed, relisted, unplaced, after_bookmark];
        for (i, stamp) in stamps.iter().enumerate() {
            for later in &stamps[i + 1..] {
                assert!(stamp < later, "{stamp:?} before {later:?}");
            }
        }
    }

    #[test]
    fn a_bookmark_moves_the_version_on_and_keeps_the_record() {
        let mut h = History::new(8);
        h.relisted(Some(10));
        h.push(Some(11), &applied(None, pod("a", "11")));
        h.bookmarked(20);
        assert_eq!(h.current(), Some(20));
        // Every version up to the bookmark is served: nothing changed after 11.
        assert_eq!(versions(&h, 10), Ok(vec![11]));
        assert_eq!(versions(&h, 15), Ok(vec![]));
        assert_eq!(versions(&h, 20), Ok(vec![]));
        assert!(matches!(h.after(21), Err(HistoryError::Ahead { .. })));
        h.push(Some(21), &applied(None, pod("b", "21")));
        assert_eq!(versions(&h, 15), Ok(vec![21]));
    }

    #[test]
    fn an_unnumbered_version_breaks_the_record() {
        let mut h = History::new(8);
        h.relisted(Some(10));
        h.push(None, &applied(None, pod("a", "x")));
        assert!(matches!(h.after(10), Err(HistoryError::Expired { .. })));
        h.push(Some(12), &applied(None, pod("b", "12")));
        assert_eq!(versions(&h, 11), Ok(vec![12]));
    }

    #[test]
    fn rewinding_gives_each_changed_object_as_it_was() {
        let mut h = History::new(8);
        h.relisted(Some(10));
        let a10 = pod("a", "9");
        h.push(Some(11), &applied(Some(a10.clone()), pod("a", "11")));
        h.push(Some(12), &applied(None, pod("b", "12")));
        let a12 = pod("a", "13");
        h.push(Some(13), &applied(Some(pod("a", "11")), a12.clone()));
        h.push(
            Some(14),
            &Change::Deleted {
                old: a12,
                last: pod("a", "14"),
            },
        );
        let then = h.rewound_to(10).unwrap();
        assert_eq!(
            then[&ObjectKey::new("ns", "a")].map(|r| r.resource_version.as_str()),
            Some("9")
        );
        assert_eq!(then[&ObjectKey::new("ns", "b")], None);
        let then = h.rewound_to(12).unwrap();
        assert_eq!(
            then[&ObjectKey::new("ns", "a")].map(|r| r.resource_version.as_str()),
            Some("11")
        );
        assert!(!then.contains_key(&ObjectKey::new("ns", "b")));
        assert!(h.rewound_to(14).unwrap().is_empty());
    }
}
