//! Sorting and pagination of list answers. A continue token says where the next page
//! starts, not where a snapshot lives: the list's resourceVersion, the query, and the sort
//! position of the last item sent. Any replica that has seen that version rebuilds the list as
//! it was then (the cache keeps a bounded history of changes), so paging through a list that
//! changes meanwhile returns every object of the first page's resourceVersion exactly once, as
//! the apiserver promises, whichever replica serves each page. A replica keeps the sorted lists
//! it served for a while, so following pages on it cost only the page. Tokens expire after
//! five minutes, or sooner when the history no longer reaches back to their version: 410.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest;

use super::BizError;
use k8sdao::NamespaceFilter;
use model::{Keyed, Record, Resource};

/// How long a continue token stays valid: the apiserver's default compaction interval.
pub const TOKEN_TTL: Duration = Duration::from_secs(5 * 60);
/// Sorted lists kept at most per kind; the oldest goes first.
pub const SNAPSHOT_CAPACITY: usize = 256;
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SortField {
    Name,
    Namespace,
    CreationTimestamp,
}

impl SortField {
    const ALL: [SortField; 3] = [
        SortField::Name,
        SortField::Namespace,
        SortField::CreationTimestamp,
    ];

    /// As `sort=` names it.
    fn name(self) -> &'static str {
        match self {
            SortField::Name => "name",
            SortField::Namespace => "namespace",
            SortField::CreationTimestamp => "creationTimestamp",
        }
    }
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
                let field = SortField::ALL
                    .into_iter()
                    .find(|f| f.name() == name)
                    .ok_or_else(|| {
                        BizError::Query(format!(
                            "invalid sort field {name:?}: expected name, namespace or creationTimestamp, each optionally prefixed with '-'"
                        ))
                    })?;
                Ok((field, descending))
            })
            .collect::<Result<Vec<_>, BizError>>()?;
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

    /// (namespace, name), the order sources list in.
    pub fn is_default(&self) -> bool {
        self.0.is_empty()
    }

    pub fn compare<R: Keyed>(&self, a: &R, b: &R) -> Ordering {
        self.order(SortKey::of(a), SortKey::of(b))
    }

    fn order(&self, a: SortKey<'_>, b: SortKey<'_>) -> Ordering {
        self.0
            .iter()
            .map(|(field, descending)| {
                let order = match field {
                    SortField::Name => a.name.cmp(b.name),
                    SortField::Namespace => a.namespace.cmp(b.namespace),
                    SortField::CreationTimestamp => a.created.cmp(&b.created),
                };
                if *descending { order.reverse() } else { order }
            })
            .find(|o| o.is_ne())
            .unwrap_or_else(|| (a.namespace, a.name).cmp(&(b.namespace, b.name)))
    }

    /// The spec as `sort=` would give it, the same for equal specs however they were written.
    pub fn canonical(&self) -> String {
        let fields: Vec<String> = self
            .0
            .iter()
            .map(|(field, descending)| {
                format!("{}{}", if *descending { "-" } else { "" }, field.name())
            })
            .collect();
        fields.join(",")
    }
}

/// What sorting compares of an item.
#[derive(Clone, Copy)]
struct SortKey<'a> {
    namespace: &'a str,
    name: &'a str,
    created: Option<&'a str>,
}

impl<'a> SortKey<'a> {
    fn of<R: Keyed>(item: &'a R) -> Self {
        SortKey {
            namespace: &item.key().namespace,
            name: &item.key().name,
            created: item.creation_timestamp(),
        }
    }

    fn at(position: &'a Position) -> Self {
        SortKey {
            namespace: &position.namespace,
            name: &position.name,
            created: position.created.as_deref(),
        }
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

impl<R> PageSlice<R> {
    /// A list answered whole, in one page.
    pub fn whole(items: Vec<Arc<R>>, resource_version: String) -> Self {
        PageSlice {
            items,
            resource_version,
            continue_token: None,
            remaining: None,
        }
    }
}

/// Where an item is in a sorted list: every field any sort may use.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Position {
    #[serde(rename = "ns")]
    namespace: String,
    #[serde(rename = "n")]
    name: String,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    created: Option<String>,
}

impl Position {
    fn of<R: Keyed>(item: &R) -> Self {
        Position {
            namespace: item.key().namespace.clone(),
            name: item.key().name.clone(),
            created: item.creation_timestamp().map(str::to_string),
        }
    }
}

/// Opaque to clients: base64 of this JSON, much as the apiserver's own continue tokens are.
/// Nothing in it needs to be secret or signed: a page is always selected by the caller's own
/// rights, at a version the cache can rebuild, so a forged token can only ask for a page the
/// caller could have listed anyway.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Token {
    /// The list's resourceVersion: every page is of the state at it.
    #[serde(rename = "rv")]
    version: u64,
    /// The query's [`fingerprint`]: a token continues only the query that issued it.
    #[serde(rename = "q")]
    query: String,
    /// When the first page was served, in seconds since the epoch.
    #[serde(rename = "t")]
    issued: u64,
    /// The last item sent: the next page starts after it.
    #[serde(rename = "after")]
    after: Position,
}

fn invalid_token() -> BizError {
    BizError::Query(
        "invalid continue token: not one this server issues (pass back the token of the previous page unchanged, or restart the list without it)".into(),
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Token {
    fn encode(&self) -> String {
        // Plain strings and numbers, no maps with other keys: serializing cannot fail.
        let json = serde_json::to_vec(self).expect("a token serializes");
        URL_SAFE_NO_PAD.encode(json)
    }

    fn decode(s: &str) -> Result<Token, BizError> {
        let json = URL_SAFE_NO_PAD.decode(s).map_err(|_| invalid_token())?;
        serde_json::from_slice(&json).map_err(|_| invalid_token())
    }
}

/// Identifies a query (kind, namespace, selectors, sort) the same way in every process and
/// every build, so that a token is honoured by any replica for the query that issued it.
pub fn fingerprint(resource: &Resource, parts: &[&str]) -> String {
    let mut context = digest::Context::new(&digest::SHA256);
    // A typed kind by its kind, as tokens issued before generic resources were served name
    // it; every other resource by its name, unique among them.
    let scope = match resource.typed() {
        Some(kind) => kind.name(),
        None => &resource.name,
    };
    context.update(scope.as_bytes());
    for part in parts {
        // Lengths first: ("a,", "b") and ("a", ",b") differ.
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    let digest = context.finish();
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A list as served for one query, version and set of visible namespaces, sorted; kept so
/// that the following pages cost only themselves.
struct Snapshot<R> {
    version: u64,
    query: String,
    /// The namespaces the items were selected from: only a caller who may see exactly these
    /// gets its pages from this list.
    visible: NamespaceFilter,
    taken: Instant,
    items: Arc<[Arc<R>]>,
}

/// What the next page of a token is cut from.
pub enum Continued<R> {
    /// This replica still holds the sorted list.
    Kept(PageCursor<R>),
    /// The list must be rebuilt at the token's version (another replica served the first
    /// page, or it was pushed out): list it, sort it, and hand it to [`PageStore::keep`].
    Rebuild(TokenCursor),
}

/// A token checked against its query, waiting for its list.
pub struct TokenCursor {
    token: Token,
}

impl TokenCursor {
    /// The version the list must be rebuilt at.
    pub fn version(&self) -> u64 {
        self.token.version
    }
}

/// A sorted list and where the next page starts in it.
pub struct PageCursor<R> {
    items: Arc<[Arc<R>]>,
    token: Token,
}

/// The sorted lists behind recent continue tokens, for one kind.
pub struct PageStore<R> {
    snapshots: Mutex<VecDeque<Snapshot<R>>>,
    ttl: Duration,
    capacity: usize,
}

impl<R: Keyed> Default for PageStore<R> {
    fn default() -> Self {
        PageStore::new(TOKEN_TTL, SNAPSHOT_CAPACITY)
    }
}

/// One [`PageStore`] per kind, made when the kind is first listed with a limit.
#[derive(Default)]
pub(crate) struct PageStores {
    stores: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
}

impl PageStores {
    pub(crate) fn of<R: Record>(&self, resource: &Resource) -> Arc<PageStore<R>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        let store = stores
            .entry(resource.name.to_string())
            .or_insert_with(|| Arc::new(PageStore::<R>::default()))
            .clone();
        // Each entry is made above by its kind's record type, so it always is that type.
        store.downcast::<PageStore<R>>().unwrap_or_else(|_| {
            unreachable!("the page store of {} has its own type", resource.name)
        })
    }
}

impl<R: Keyed> PageStore<R> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        PageStore {
            snapshots: Mutex::new(VecDeque::new()),
            ttl,
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Snapshot<R>>> {
        self.snapshots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, snapshot: Snapshot<R>) {
        let mut snapshots = self.lock();
        snapshots.retain(|s| s.taken.elapsed() < self.ttl);
        while snapshots.len() >= self.capacity.max(1) {
            snapshots.pop_front();
        }
        snapshots.push_back(snapshot);
    }

    /// The first page of `items` (already filtered and sorted), listed at `version`; keeps
    /// the list if more pages follow.
    pub fn first(
        &self,
        items: Vec<Arc<R>>,
        version: &str,
        query: String,
        visible: &NamespaceFilter,
        limit: Option<usize>,
    ) -> Result<PageSlice<R>, BizError> {
        let Some(limit) = limit.filter(|l| *l < items.len()) else {
            return Ok(PageSlice::whole(items, version.to_string()));
        };
        // A continue token carries the version its next page is cut at, so a list whose
        // version is not a number (an apiserver not backed by etcd, read live) cannot be paged:
        // the caller can still have it whole, so it is told how rather than given a 500.
        let version: u64 = version.parse().map_err(|_| {
            BizError::Query(format!(
                "limit cannot page this list: the apiserver listed it at resourceVersion {version:?}, which is not a number, so no continue token can resume it; list without limit"
            ))
        })?;
        let items: Arc<[Arc<R>]> = items.into();
        self.insert(Snapshot {
            version,
            query: query.clone(),
            visible: visible.clone(),
            taken: Instant::now(),
            items: items.clone(),
        });
        let cursor = PageCursor {
            items,
            token: Token {
                version,
                query,
                issued: now_secs(),
                after: Position {
                    namespace: String::new(),
                    name: String::new(),
                    created: None,
                },
            },
        };
        Ok(cursor.page(0, limit))
    }

    /// Where the page after `token` comes from, if the token continues `query` and is recent
    /// enough.
    pub fn continued(
        &self,
        token: &str,
        query: &str,
        visible: &NamespaceFilter,
    ) -> Result<Continued<R>, BizError> {
        let token = Token::decode(token)?;
        if token.query != query {
            return Err(BizError::Query(
                "the continue token belongs to another query: keep namespace, selectors and sort of the first page".into(),
            ));
        }
        if now_secs().saturating_sub(token.issued) >= self.ttl.as_secs() {
            return Err(BizError::Expired);
        }
        let kept = self
            .lock()
            .iter()
            .find(|s| {
                s.version == token.version
                    && s.query == token.query
                    && s.visible == *visible
                    && s.taken.elapsed() < self.ttl
            })
            .map(|s| s.items.clone());
        Ok(match kept {
            Some(items) => Continued::Kept(PageCursor { items, token }),
            None => Continued::Rebuild(TokenCursor { token }),
        })
    }

    /// Keeps a list rebuilt for a token (filtered and sorted as the first page's was).
    pub fn keep(
        &self,
        cursor: TokenCursor,
        items: Vec<Arc<R>>,
        visible: &NamespaceFilter,
    ) -> PageCursor<R> {
        let items: Arc<[Arc<R>]> = items.into();
        let token = cursor.token;
        self.insert(Snapshot {
            version: token.version,
            query: token.query.clone(),
            visible: visible.clone(),
            taken: Instant::now(),
            items: items.clone(),
        });
        PageCursor { items, token }
    }
}

impl<R: Keyed> PageCursor<R> {
    /// The page after the token's position.
    pub fn next(self, sort: &SortSpec, limit: Option<usize>) -> PageSlice<R> {
        let after = &self.token.after;
        let start = self.items.partition_point(|item| {
            sort.order(SortKey::of(item.as_ref()), SortKey::at(after))
                .is_le()
        });
        let limit = limit.unwrap_or(self.items.len());
        self.page(start, limit)
    }

    fn page(mut self, start: usize, limit: usize) -> PageSlice<R> {
        let end = start.saturating_add(limit.max(1)).min(self.items.len());
        let remaining = self.items.len() - end;
        let continue_token = (remaining > 0).then(|| {
            self.token.after = Position::of(self.items[end - 1].as_ref());
            self.token.encode()
        });
        PageSlice {
            items: self.items[start..end].to_vec(),
            resource_version: self.token.version.to_string(),
            continue_token,
            remaining: (remaining > 0).then_some(remaining),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::fixtures::mk_pod;
    use model::{PodRecord, ServiceRecord, Typed};

    fn pods(n: usize) -> Vec<Arc<PodRecord>> {
        (0..n)
            .map(|i| PodRecord::from_pod(&mk_pod("ns", &format!("p{i:02}"), None, &[])))
            .collect()
    }

    fn names(page: &PageSlice<PodRecord>) -> Vec<String> {
        page.items.iter().map(|p| p.key.name.clone()).collect()
    }

    const Q: &str = "query";
    const ALL: NamespaceFilter = NamespaceFilter::All;

    /// The page after `token`, rebuilding the list with `rebuild` when the store no longer
    /// holds it, as biz does with the source.
    fn next(
        store: &PageStore<PodRecord>,
        token: &str,
        visible: &NamespaceFilter,
        limit: usize,
        rebuild: impl FnOnce(u64) -> Vec<Arc<PodRecord>>,
    ) -> Result<PageSlice<PodRecord>, BizError> {
        let cursor = match store.continued(token, Q, visible)? {
            Continued::Kept(cursor) => cursor,
            Continued::Rebuild(cursor) => {
                let items = rebuild(cursor.version());
                store.keep(cursor, items, visible)
            }
        };
        Ok(cursor.next(&SortSpec::default(), Some(limit)))
    }

    fn never(_: u64) -> Vec<Arc<PodRecord>> {
        panic!("the store holds this list")
    }

    #[test]
    fn pages_cover_the_list_exactly_once_even_if_the_source_changes() {
        let store = PageStore::default();
        let first = store.first(pods(5), "10", Q.into(), &ALL, Some(2)).unwrap();
        assert_eq!(names(&first), ["p00", "p01"]);
        assert_eq!(first.remaining, Some(3));
        // Whatever happens to the cache now, the next pages come from the list kept.
        let second = next(
            &store,
            first.continue_token.as_deref().unwrap(),
            &ALL,
            2,
            never,
        )
        .unwrap();
        assert_eq!(names(&second), ["p02", "p03"]);
        assert_eq!(second.resource_version, "10");
        let last = next(
            &store,
            second.continue_token.as_deref().unwrap(),
            &ALL,
            2,
            never,
        )
        .unwrap();
        assert_eq!(names(&last), ["p04"]);
        assert_eq!((last.continue_token, last.remaining), (None, None));
    }

    #[test]
    fn another_replica_rebuilds_the_list_at_the_tokens_version() {
        let first = PageStore::default()
            .first(pods(5), "10", Q.into(), &ALL, Some(2))
            .unwrap();
        // A store that never saw the first page: another replica, or this one after eviction.
        let other = PageStore::default();
        let mut asked = None;
        let mut rebuilt = pods(5);
        // The page already sent lost an item meanwhile (at the token's version it was there;
        // a rebuild that differs still starts after the last item sent, never repeats it).
        rebuilt.remove(1);
        let second = next(
            &other,
            first.continue_token.as_deref().unwrap(),
            &ALL,
            2,
            |v| {
                asked = Some(v);
                rebuilt
            },
        )
        .unwrap();
        assert_eq!(asked, Some(10));
        assert_eq!(names(&second), ["p02", "p03"]);
        assert_eq!(second.resource_version, "10");
        // The rebuilt list is kept for the pages after.
        let last = next(
            &other,
            second.continue_token.as_deref().unwrap(),
            &ALL,
            2,
            never,
        )
        .unwrap();
        assert_eq!(names(&last), ["p04"]);
    }

    #[test]
    fn lists_are_kept_per_set_of_visible_namespaces() {
        let store = PageStore::default();
        let alice = NamespaceFilter::only(["ns".to_string()]);
        let token = store
            .first(pods(3), "1", Q.into(), &alice, Some(1))
            .unwrap()
            .continue_token
            .unwrap();
        // A caller who may see other namespaces gets its page from its own list, never from
        // one selected by other rights.
        let mut rebuilt = false;
        let page = next(&store, &token, &NamespaceFilter::only([]), 1, |_| {
            rebuilt = true;
            Vec::new()
        })
        .unwrap();
        assert!(rebuilt);
        assert!(page.items.is_empty());
        assert_eq!(
            names(&next(&store, &token, &alice, 1, never).unwrap()),
            ["p01"]
        );
    }

    #[test]
    fn no_limit_or_a_large_one_keeps_nothing() {
        let store = PageStore::default();
        let page = store.first(pods(3), "1", Q.into(), &ALL, Some(3)).unwrap();
        assert_eq!(page.continue_token, None);
        assert!(store.lock().is_empty());
        let page = store.first(pods(3), "1", Q.into(), &ALL, None).unwrap();
        assert_eq!(page.items.len(), 3);
    }

    #[test]
    fn old_foreign_and_garbled_tokens_are_refused() {
        let store = PageStore::default();
        let token = store
            .first(pods(3), "1", Q.into(), &ALL, Some(1))
            .unwrap()
            .continue_token
            .unwrap();
        assert!(matches!(
            store.continued(&token, "another query", &ALL),
            Err(BizError::Query(m)) if m.contains("another query")
        ));
        let stale = Token {
            issued: now_secs() - TOKEN_TTL.as_secs(),
            ..Token::decode(&token).unwrap()
        }
        .encode();
        assert!(matches!(
            store.continued(&stale, Q, &ALL),
            Err(BizError::Expired)
        ));
        for garbled in [
            "",
            "zz",
            "ffff.1",
            &token[1..],
            &URL_SAFE_NO_PAD.encode("{}"),
        ] {
            assert!(
                matches!(store.continued(garbled, Q, &ALL), Err(BizError::Query(m)) if m.contains("invalid continue token")),
                "{garbled:?}"
            );
        }
        // A version that is not a number cannot be continued: the caller is told to list
        // without limit (a 400 naming why), never given a 500; without limit it is served.
        assert!(matches!(
            store.first(pods(3), "x", Q.into(), &ALL, Some(1)),
            Err(BizError::Query(m)) if m.contains("not a number") && m.contains("without limit")
        ));
        assert!(store.first(pods(3), "x", Q.into(), &ALL, None).is_ok());
    }

    #[test]
    fn fingerprints_tell_queries_and_kinds_apart_and_never_change() {
        let a = fingerprint(PodRecord::resource(), &["ns", "app=web", "", ""]);
        assert_eq!(
            a,
            fingerprint(PodRecord::resource(), &["ns", "app=web", "", ""])
        );
        assert_ne!(
            a,
            fingerprint(ServiceRecord::resource(), &["ns", "app=web", "", ""])
        );
        assert_ne!(
            a,
            fingerprint(PodRecord::resource(), &["ns", "app=we", "b", ""])
        );
        // Replicas of any build must agree: the value is part of every token issued.
        assert_eq!(a, "e5661a22002f0250");
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
