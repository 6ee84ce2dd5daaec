//! Sorting and pagination of list answers. A first page with a `limit` keeps the whole sorted
//! answer as a snapshot; its continue token points into that snapshot, so paging through a
//! list that changes meanwhile returns every object of the first page's resourceVersion
//! exactly once, as the apiserver promises. Snapshots expire; an expired token is a 410.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ring::hmac;
use ring::rand::SystemRandom;

use super::{BizError, ViewerKey};
use model::{Keyed, Kind, Record};

/// How long a continue token stays valid: the apiserver's default compaction interval.
pub const SNAPSHOT_TTL: Duration = Duration::from_secs(5 * 60);
/// Snapshots kept at most per kind; the oldest goes first.
pub const SNAPSHOT_CAPACITY: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SortField {
    Name,
    Namespace,
    CreationTimestamp,
}

/// `sort=` as given: fields, each ascending or descending; always ends on (namespace, name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SortSpec(Vec<(SortField, bool)>);

impl SortSpec {
    pub fn parse(s: Option<&str>) -> Result<SortSpec, BizError> {
        let Some(s) = s.filter(|s| !s.is_empty()) else {
            return Ok(SortSpec::default());
        };
        let fields = s
            .split(',')
            .map(|part| {
                let part = part.trim();
                let (descending, name) = match part.strip_prefix('-') {
                    Some(name) => (true, name),
                    None => (false, part.strip_prefix('+').unwrap_or(part)),
                };
                let field = match name {
                    "name" => SortField::Name,
                    "namespace" => SortField::Namespace,
                    "creationTimestamp" => SortField::CreationTimestamp,
                    other => {
                        return Err(BizError::Query(format!(
                            "invalid sort field {other:?}: expected name, namespace or creationTimestamp, each optionally prefixed with '-'"
                        )));
                    }
                };
                Ok((field, descending))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Each comparison walks the fields: a field given twice only adds cost.
        for (i, (field, _)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|(f, _)| f == field) {
                return Err(BizError::Query(format!(
                    "invalid sort {s:?}: each field may be given once"
                )));
            }
        }
        Ok(SortSpec(fields))
    }

    pub fn compare<R: Keyed>(&self, a: &R, b: &R) -> Ordering {
        self.0
            .iter()
            .map(|(field, descending)| {
                let order = match field {
                    SortField::Name => a.key().name.cmp(&b.key().name),
                    SortField::Namespace => a.key().namespace.cmp(&b.key().namespace),
                    SortField::CreationTimestamp => {
                        a.creation_timestamp().cmp(&b.creation_timestamp())
                    }
                };
                if *descending { order.reverse() } else { order }
            })
            .find(|o| o.is_ne())
            .unwrap_or_else(|| a.key().cmp(b.key()))
    }

    pub fn is_default(&self) -> bool {
        self.0.is_empty()
    }
}

/// One page and what the client needs to ask for the next.
#[derive(Debug)]
pub struct PageSlice<R> {
    pub items: Vec<Arc<R>>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

struct Snapshot<R> {
    id: u64,
    fingerprint: u64,
    /// Whom the items were selected for: they are filtered by that caller's rights.
    viewer: Option<ViewerKey>,
    taken: Instant,
    items: Arc<[Arc<R>]>,
    resource_version: String,
}

/// The snapshots behind live continue tokens, for one kind.
pub struct PageStore<R> {
    snapshots: Mutex<VecDeque<Snapshot<R>>>,
    /// Signs this store's continue tokens; random per store and per process.
    key: hmac::Key,
    next_id: std::sync::atomic::AtomicU64,
    ttl: Duration,
    capacity: usize,
}

impl<R> Default for PageStore<R> {
    fn default() -> Self {
        PageStore::new(SNAPSHOT_TTL, SNAPSHOT_CAPACITY)
    }
}

/// One [`PageStore`] per kind, made when the kind is first listed with a limit.
#[derive(Default)]
pub(crate) struct PageStores {
    stores: Mutex<HashMap<Kind, Arc<dyn Any + Send + Sync>>>,
}

impl PageStores {
    pub(crate) fn of<R: Record>(&self) -> Arc<PageStore<R>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        let store = stores
            .entry(R::KIND)
            .or_insert_with(|| Arc::new(PageStore::<R>::default()))
            .clone();
        // Each entry is made above by its kind's record type, so it always is that type.
        store
            .downcast::<PageStore<R>>()
            .unwrap_or_else(|_| unreachable!("the page store of {} has its own type", R::KIND))
    }
}

/// Opaque to clients: which snapshot, and where in it the next page starts, signed with the
/// store's key so that a token we never issued (forged, or from another store or process) is
/// told apart from one of ours that expired.
struct Token {
    id: u64,
    offset: usize,
}

impl Token {
    fn message(&self) -> String {
        format!("{:x}.{:x}", self.id, self.offset)
    }

    fn encode(&self, key: &hmac::Key) -> String {
        let message = self.message();
        let tag = hmac::sign(key, message.as_bytes());
        let mut token = message;
        token.push('.');
        for byte in tag.as_ref() {
            token.push_str(&format!("{byte:02x}"));
        }
        token
    }

    fn decode(s: &str, key: &hmac::Key) -> Result<Token, BizError> {
        let invalid = || {
            BizError::Query(
                "invalid continue token: not issued by this server for this kind (pass back the token of the previous page unchanged, or restart the list without it)".into(),
            )
        };
        let (message, tag) = s.rsplit_once('.').ok_or_else(invalid)?;
        let tag = decode_hex(tag).ok_or_else(invalid)?;
        hmac::verify(key, message.as_bytes(), &tag).map_err(|_| invalid())?;
        let (id, offset) = message.split_once('.').ok_or_else(invalid)?;
        let parse = |p: &str| u64::from_str_radix(p, 16).ok();
        match (
            parse(id),
            parse(offset).and_then(|o| usize::try_from(o).ok()),
        ) {
            (Some(id), Some(offset)) => Ok(Token { id, offset }),
            _ => Err(invalid()),
        }
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 2 * TAG_BYTES {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

const TAG_BYTES: usize = 32;

/// Identifies a query, so a token is only honoured for the query that issued it.
pub fn fingerprint(parts: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

impl<R> PageStore<R> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        // The operating system's generator failing is a broken host, not a request's fault.
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .expect("the system random number generator works");
        PageStore {
            snapshots: Mutex::new(VecDeque::new()),
            key,
            next_id: std::sync::atomic::AtomicU64::new(1),
            ttl,
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Snapshot<R>>> {
        self.snapshots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first page of `items` (already filtered and sorted); keeps a snapshot if more follow.
    pub fn first(
        &self,
        items: Vec<Arc<R>>,
        resource_version: String,
        fingerprint: u64,
        viewer: Option<ViewerKey>,
        limit: Option<usize>,
    ) -> PageSlice<R> {
        let Some(limit) = limit.filter(|l| *l < items.len()) else {
            return PageSlice {
                items,
                resource_version,
                continue_token: None,
                remaining: None,
            };
        };
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let items: Arc<[Arc<R>]> = items.into();
        let page = self.slice(&items, id, 0, limit, resource_version.clone());
        let mut snapshots = self.lock();
        snapshots.retain(|s| s.taken.elapsed() < self.ttl);
        while snapshots.len() >= self.capacity {
            snapshots.pop_front();
        }
        snapshots.push_back(Snapshot {
            id,
            fingerprint,
            viewer,
            taken: Instant::now(),
            items,
            resource_version,
        });
        page
    }

    /// The page a continue token points at, if `viewer` is the caller it was issued to.
    pub fn next(
        &self,
        token: &str,
        fingerprint: u64,
        viewer: Option<ViewerKey>,
        limit: Option<usize>,
    ) -> Result<PageSlice<R>, BizError> {
        let token = Token::decode(token, &self.key)?;
        let found = self
            .lock()
            .iter()
            .find(|s| s.id == token.id && s.taken.elapsed() < self.ttl)
            .map(|s| {
                (
                    s.viewer,
                    s.fingerprint,
                    s.items.clone(),
                    s.resource_version.clone(),
                )
            });
        let Some((issued_to, issued_for, items, rv)) = found else {
            return Err(BizError::Expired);
        };
        // Before anything else about the snapshot: its items were chosen by another caller's
        // rights, so another caller learns nothing of them, not even their number.
        if issued_to != viewer {
            return Err(BizError::Query(
                "the continue token was not issued to this caller: start the list without it"
                    .into(),
            ));
        }
        if issued_for != fingerprint {
            return Err(BizError::Query(
                "the continue token belongs to another query: keep namespace, selectors and sort of the first page".into(),
            ));
        }
        if token.offset > items.len() {
            return Err(BizError::Query(
                "invalid continue token: offset past the end".into(),
            ));
        }
        let limit = limit.unwrap_or(items.len());
        Ok(self.slice(&items, token.id, token.offset, limit, rv))
    }

    fn slice(
        &self,
        items: &Arc<[Arc<R>]>,
        id: u64,
        offset: usize,
        limit: usize,
        resource_version: String,
    ) -> PageSlice<R> {
        let end = offset.saturating_add(limit.max(1)).min(items.len());
        let remaining = items.len() - end;
        PageSlice {
            items: items[offset..end].to_vec(),
            resource_version,
            continue_token: (remaining > 0).then(|| Token { id, offset: end }.encode(&self.key)),
            remaining: (remaining > 0).then_some(remaining),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::PodRecord;
    use model::fixtures::mk_pod;

    fn pods(n: usize) -> Vec<Arc<PodRecord>> {
        (0..n)
            .map(|i| PodRecord::from_pod(&mk_pod("ns", &format!("p{i:02}"), None, &[])))
            .collect()
    }

    fn names(page: &PageSlice<PodRecord>) -> Vec<String> {
        page.items.iter().map(|p| p.key.name.clone()).collect()
    }

    #[test]
    fn pages_cover_the_snapshot_exactly_once_even_if_the_source_changes() {
        let store = PageStore::default();
        let first = store.first(pods(5), "10".into(), 7, None, Some(2));
        assert_eq!(names(&first), ["p00", "p01"]);
        assert_eq!(first.remaining, Some(3));
        // Whatever happens to the cache now, the next pages come from the snapshot.
        let second = store
            .next(first.continue_token.as_deref().unwrap(), 7, None, Some(2))
            .unwrap();
        assert_eq!(names(&second), ["p02", "p03"]);
        assert_eq!(second.resource_version, "10");
        let last = store
            .next(second.continue_token.as_deref().unwrap(), 7, None, Some(2))
            .unwrap();
        assert_eq!(names(&last), ["p04"]);
        assert_eq!((last.continue_token, last.remaining), (None, None));
    }

    #[test]
    fn no_limit_or_a_large_one_keeps_no_snapshot() {
        let store = PageStore::default();
        let page = store.first(pods(3), "1".into(), 1, None, Some(3));
        assert_eq!(page.continue_token, None);
        assert!(store.lock().is_empty());
        let page = store.first(pods(3), "1".into(), 1, None, None);
        assert_eq!(page.items.len(), 3);
    }

    #[test]
    fn expired_evicted_foreign_and_garbled_tokens_are_refused() {
        let store = PageStore::new(Duration::from_millis(1), 1);
        let first = store.first(pods(3), "1".into(), 1, None, Some(1));
        let token = first.continue_token.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            store.next(&token, 1, None, Some(1)),
            Err(BizError::Expired)
        ));

        let store = PageStore::new(SNAPSHOT_TTL, 1);
        let a = store
            .first(pods(3), "1".into(), 1, None, Some(1))
            .continue_token
            .unwrap();
        let b = store
            .first(pods(3), "1".into(), 1, None, Some(1))
            .continue_token
            .unwrap();
        assert!(
            matches!(store.next(&a, 1, None, Some(1)), Err(BizError::Expired)),
            "evicted by capacity"
        );
        assert!(store.next(&b, 1, None, Some(1)).is_ok());
        assert!(
            matches!(store.next(&b, 2, None, Some(1)), Err(BizError::Query(_))),
            "another query"
        );
        assert!(matches!(
            store.next("zz", 1, None, Some(1)),
            Err(BizError::Query(_))
        ));
        // Well-formed but never issued here: not "expired", a bad request.
        let other = PageStore::<PodRecord>::default();
        for forged in ["ffff.1".to_string(), b.clone()] {
            let refused = other.next(&forged, 1, None, Some(1)).unwrap_err();
            assert!(
                matches!(&refused, BizError::Query(m) if m.contains("not issued by this server")),
                "{forged}: {refused}"
            );
        }
    }

    #[test]
    fn a_token_is_honoured_only_for_the_caller_it_was_issued_to() {
        let store = PageStore::default();
        let alice = Some([1; 32]);
        let token = store
            .first(pods(3), "1".into(), 1, alice, Some(1))
            .continue_token
            .unwrap();
        for other in [Some([2; 32]), None] {
            let refused = store.next(&token, 1, other, Some(1)).unwrap_err();
            assert!(
                matches!(&refused, BizError::Query(m) if m.contains("not issued to this caller")),
                "{refused}"
            );
        }
        assert_eq!(
            names(&store.next(&token, 1, alice, Some(1)).unwrap()),
            ["p01"]
        );
    }

    #[test]
    fn only_tokens_this_store_signed_are_honoured() {
        let store = PageStore::default();
        let token = store
            .first(pods(5), "1".into(), 1, None, Some(1))
            .continue_token
            .unwrap();
        assert!(store.next(&token, 1, None, Some(1)).is_ok());
        let (message, tag) = token.rsplit_once('.').unwrap();
        let (id, _) = message.split_once('.').unwrap();
        let tampered_offset = format!("{id}.3.{tag}");
        let other_store = PageStore::<PodRecord>::default();
        let foreign = other_store
            .first(pods(5), "1".into(), 1, None, Some(1))
            .continue_token
            .unwrap();
        for forged in [
            "1.1",
            "0.0",
            tampered_offset.as_str(),
            &format!("{message}.{}", "0".repeat(64)),
            &format!("{message}.zz"),
            foreign.as_str(),
            "",
            ".",
            "1.1.1.1",
        ] {
            let e = store.next(forged, 1, None, Some(1));
            assert!(
                matches!(&e, Err(BizError::Query(m)) if m.contains("not issued by this server")),
                "{forged:?}: {e:?}"
            );
        }
        // Ours, but gone: expired, not forged.
        let short = PageStore::new(Duration::from_millis(1), 4);
        let token = short
            .first(pods(3), "1".into(), 1, None, Some(1))
            .continue_token
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            short.next(&token, 1, None, Some(1)),
            Err(BizError::Expired)
        ));
    }

    #[test]
    fn a_sort_field_given_twice_is_refused() {
        for bad in ["name,name", "name,-name", "namespace,name,+namespace"] {
            assert!(
                matches!(SortSpec::parse(Some(bad)), Err(BizError::Query(_))),
                "{bad}"
            );
        }
        assert!(SortSpec::parse(Some("-creationTimestamp,namespace,name")).is_ok());
    }

    #[test]
    fn sort_specs_order_by_fields_then_namespace_and_name() {
        let mk = |ns: &str, name: &str, created: &str| {
            let mut pod = mk_pod(ns, name, None, &[]);
            pod.metadata.creation_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created.parse().unwrap()),
            );
            PodRecord::from_pod(&pod)
        };
        let mut items = vec![
            mk("b", "x", "2026-01-02T00:00:00Z"),
            mk("a", "y", "2026-01-01T00:00:00Z"),
            mk("a", "x", "2026-01-03T00:00:00Z"),
        ];
        let order = |spec: &str, items: &mut Vec<Arc<PodRecord>>| {
            let spec = SortSpec::parse(Some(spec)).unwrap();
            items.sort_by(|a, b| spec.compare(a.as_ref(), b.as_ref()));
            items.iter().map(|p| p.key.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(order("", &mut items), ["a/x", "a/y", "b/x"]);
        assert_eq!(order("name", &mut items), ["a/x", "b/x", "a/y"]);
        assert_eq!(
            order("-creationTimestamp", &mut items),
            ["a/x", "b/x", "a/y"]
        );
        assert_eq!(
            order("creationTimestamp", &mut items),
            ["a/y", "b/x", "a/x"]
        );
        assert_eq!(order("-namespace,-name", &mut items), ["b/x", "a/y", "a/x"]);
        assert!(matches!(
            SortSpec::parse(Some("age")),
            Err(BizError::Query(_))
        ));
    }
}
