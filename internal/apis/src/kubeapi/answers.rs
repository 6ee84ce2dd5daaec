//! Answers kept per version: a finished list answer of the Kubernetes API (its body, or that
//! body gzipped for a caller that accepts gzip) is kept and sent again, without being built,
//! to the next caller asking exactly the same question while the kind's cache is in the same
//! state. LIST storms (dashboards polling, many kubectls, controllers starting together) ask
//! one list again and again, and the apiserver encodes each anew.
//!
//! A [`Key`] is everything an answer depends on: the question (resource, namespace, every
//! query parameter, the negotiated media, the content coding) and the stamp of the cache's
//! state, taken before listing. Every change to the kind (and every relist) makes a new stamp,
//! so an answer is never sent after its kind changed. Nothing else tells two callers' answers
//! apart: under `--auth delegated` a list of the Kubernetes API is all or 403, decided before
//! it is read, and `--namespace` is one per process.
//!
//! A watch BOOKMARK (about once a minute per kind) moves the cache's version on and changes
//! no object, so it makes no new stamp: an answer kept from before it is sent again, with the
//! list `metadata.resourceVersion` it was built at, older than the version a list built now
//! would carry. That is right: both versions name the same objects (nothing changed between
//! them); the changes the history keeps still lead from the older one (only a change or a
//! relist drops any, and either makes a new stamp), so a watch or an informer resumed from
//! it, or the next page of its continue token, is served exactly as from the newer one; and
//! a question asking for a version (`resourceVersion=N`) has N in its key, so the answer kept
//! for it is never older than N. The apiserver's watch cache would answer at its current
//! version; clients compare resourceVersions only for equality. Building each kept list again
//! at each bookmark would cost a full LIST's encoding a minute per kind for the same bytes.
//!
//! Bounded: only answers of at least [`MIN_KEPT_BYTES`] are kept (smaller ones cost little to
//! build), all within a byte budget, the least recently used going first, and at most
//! [`MAX_ENTRIES`]; one unused for [`IDLE`] is dropped, a Table after [`TABLE_LIFETIME`] (its
//! Age cells are relative to now), one carrying a continue token after [`CONTINUED_LIFETIME`]
//! (the token ages). One caller builds a missing answer; those asking the same meanwhile wait
//! for it and are sent it too.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use k8sdao::StateStamp;
use tokio::sync::watch;

use super::media::Media;
use super::query::KubeQuery;

/// What all kept answers may hold by default: a 10,000-pod full LIST (44 MB) twice over, or
/// its gzip many times; a 150,000-pod one's gzip, not its body.
pub const DEFAULT_KEPT_ANSWER_BYTES: usize = 128 * 1024 * 1024;
/// Smaller answers are built again: a few milliseconds at most. The apiserver gzips answers
/// from this size on too.
pub(super) const MIN_KEPT_BYTES: usize = 128 * 1024;
/// Answers kept at most, whatever their size: each costs a scan when one is evicted.
const MAX_ENTRIES: usize = 1024;
/// An answer nobody asked for this long is dropped.
const IDLE: Duration = Duration::from_secs(30);
/// A Table's Age cells are printed relative to now: kept this long, a storm of the same
/// `kubectl get` is built once a second, and an Age is at most a second behind, as kubectl,
/// which prints whole seconds, would show after a slow answer.
pub(super) const TABLE_LIFETIME: Duration = Duration::from_secs(1);
/// A continue token expires five minutes after it was issued (`biz::paging::TOKEN_TTL`): an
/// answer carrying one is sent again only while its token has most of its time left.
pub(super) const CONTINUED_LIFETIME: Duration = Duration::from_secs(30);
/// How often a lookup drops what has expired.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How an answer's body is coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Coding {
    Identity,
    Gzip,
}

impl Coding {
    /// What the caller's `Accept-Encoding` lets it be sent: gzip when gzip (else `*`) is
    /// named with a quality above 0, as Go's transport (kubectl, client-go) asks.
    pub(super) fn accepted(headers: &HeaderMap) -> Coding {
        let (mut gzip, mut any) = (None, None);
        let items = headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','));
        for item in items {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let quality = parts
                .find_map(|p| {
                    p.split_once('=')
                        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
                })
                .map_or(Some(1.0), |(_, q)| q.trim().parse::<f32>().ok());
            let allowed = quality.is_some_and(|q| q > 0.0);
            if coding.eq_ignore_ascii_case("gzip") {
                gzip = Some(allowed);
            } else if coding == "*" {
                any = Some(allowed);
            }
        }
        match gzip.or(any) {
            Some(true) => Coding::Gzip,
            _ => Coding::Identity,
        }
    }
}

/// What a list answer depends on besides the state of the kind's cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Question {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) plural: String,
    pub(super) namespace: Option<String>,
    /// Every parameter as given, those a list ignores too: a new one can never be missed.
    pub(super) query: KubeQuery,
    pub(super) media: Media,
    pub(super) coding: Coding,
}

impl Question {
    /// The bytes its text takes, counted with the answer kept under it.
    fn weight(&self) -> usize {
        [&self.group, &self.version, &self.plural]
            .map(String::len)
            .iter()
            .sum::<usize>()
            + self.namespace.as_ref().map_or(0, String::len)
            + self.query.text_len()
    }
}

/// A question at one state of its kind's cache: what an answer is kept under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) question: Question,
    pub(super) state: StateStamp,
}

/// A finished answer, as sent.
#[derive(Clone, Debug)]
pub(super) struct Finished {
    pub(super) content_type: &'static str,
    pub(super) body: Bytes,
    /// How `body` is coded: gzip only for a caller that accepts it.
    pub(super) coding: Coding,
    /// How long after it was built it may be sent again; None: as long as its state holds.
    pub(super) lifetime: Option<Duration>,
}

impl Finished {
    /// The response sending it. A gzip body says so in `Content-Encoding`, which the
    /// compression layer never compresses again.
    pub(super) fn response(&self) -> Response {
        let mut response = (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            )],
            Body::from(self.body.clone()),
        )
            .into_response();
        if self.coding == Coding::Gzip {
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        }
        response
    }
}

/// Whether an answer whose plain body is `plain_bytes` long is worth keeping.
pub(super) fn worth_keeping(plain_bytes: usize) -> bool {
    plain_bytes >= MIN_KEPT_BYTES
}

/// An answer's body as it is written: as it is, or for a caller that accepts gzip gzipped on
/// the way (the fastest level, the apiserver's: JSON still shrinks several times over), so a
/// large list's plain bytes are never held whole beside its gzip.
pub(super) struct BodyWriter {
    out: Coded,
    /// The plain bytes written: what the answer costs to build, whatever is sent.
    plain_bytes: usize,
}

enum Coded {
    Identity(Vec<u8>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
}

/// A body written by a [`BodyWriter`].
pub(super) struct Written {
    pub(super) body: Vec<u8>,
    pub(super) coding: Coding,
    pub(super) plain_bytes: usize,
}

impl BodyWriter {
    pub(super) fn new(coding: Coding) -> BodyWriter {
        let out = match coding {
            Coding::Identity => Coded::Identity(Vec::new()),
            Coding::Gzip => Coded::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::fast(),
            )),
        };
        BodyWriter {
            out,
            plain_bytes: 0,
        }
    }

    pub(super) fn finish(self) -> std::io::Result<Written> {
        let (body, coding) = match self.out {
            Coded::Identity(body) => (body, Coding::Identity),
            Coded::Gzip(encoder) => (encoder.finish()?, Coding::Gzip),
        };
        Ok(Written {
            body,
            coding,
            plain_bytes: self.plain_bytes,
        })
    }
}

impl Write for BodyWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = match &mut self.out {
            Coded::Identity(body) => body.write(buf)?,
            Coded::Gzip(encoder) => encoder.write(buf)?,
        };
        self.plain_bytes += written;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.out {
            Coded::Identity(_) => Ok(()),
            Coded::Gzip(encoder) => encoder.flush(),
        }
    }
}

/// The answers kept, and the builds in progress.
#[derive(Debug)]
pub struct Answers {
    budget: usize,
    kept: Mutex<Kept>,
    hits: AtomicU64,
    misses: AtomicU64,
    awaited: AtomicU64,
}

/// What `/metrics` tells of the kept answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AnswerFigures {
    pub(crate) budget: usize,
    pub(crate) bytes: usize,
    pub(crate) answers: usize,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) awaited: u64,
}

#[derive(Debug)]
struct Kept {
    slots: HashMap<Key, Slot>,
    /// The bytes of the ready answers and their keys.
    bytes: usize,
    swept: Instant,
}

#[derive(Debug)]
enum Slot {
    /// One caller builds it; the others wait for what it sends.
    Building(watch::Receiver<Option<Finished>>),
    Ready(Entry),
}

#[derive(Debug)]
struct Entry {
    answer: Finished,
    weight: usize,
    built: Instant,
    used: Instant,
}

impl Entry {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.used) >= IDLE
            || self
                .answer
                .lifetime
                .is_some_and(|lifetime| now.saturating_duration_since(self.built) >= lifetime)
    }
}

/// What a lookup found.
pub(super) enum Lookup {
    /// Kept: send it.
    Kept(Finished),
    /// Another caller is building it: wait for that.
    Awaited(Waiting),
    /// Build it, and hand it to [`Ticket::finish`] (boxed: it holds the whole key).
    Build(Box<Ticket>),
    /// Nothing is kept (a budget of 0): build it, as if nobody else asked.
    Off,
}

/// A build another caller makes.
pub(super) struct Waiting(watch::Receiver<Option<Finished>>);

impl Waiting {
    /// The answer the other caller built; None if its build failed or its caller left.
    pub(super) async fn answer(mut self) -> Option<Finished> {
        match self.0.wait_for(Option::is_some).await {
            Ok(answer) => (*answer).clone(),
            Err(_) => None,
        }
    }
}

/// The right, and the duty, to build the answer of a key: those waiting get what
/// [`Ticket::finish`] sends; a ticket dropped unfinished (the build failed, or its caller
/// left) lets them go and build their own.
pub(super) struct Ticket {
    answers: Arc<Answers>,
    key: Option<Key>,
    done: watch::Sender<Option<Finished>>,
}

impl Ticket {
    /// Sends `answer` to those waiting, and keeps it if `keep` (it is of the key's state, and
    /// worth keeping) and the budget allows.
    pub(super) fn finish(mut self, answer: &Finished, keep: bool, now: Instant) {
        self.done.send_replace(Some(answer.clone()));
        let Some(key) = self.key.take() else {
            return;
        };
        let mut kept = self.answers.lock();
        kept.remove(&key);
        if keep {
            kept.keep(key, answer.clone(), now, self.answers.budget);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.answers.lock().slots.remove(&key);
        }
    }
}

impl Kept {
    fn remove(&mut self, key: &Key) {
        if let Some(Slot::Ready(entry)) = self.slots.remove(key) {
            self.bytes = self.bytes.saturating_sub(entry.weight);
        }
    }

    /// Drops what has expired.
    fn sweep(&mut self, now: Instant) {
        let expired: Vec<Key> = self
            .slots
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Ready(entry) if entry.expired(now)))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &expired {
            self.remove(key);
        }
        self.swept = now;
    }

    /// Keeps `answer` under `key` within `budget`, making room by dropping the least recently
    /// used; an answer larger than the budget is not kept.
    fn keep(&mut self, key: Key, answer: Finished, now: Instant, budget: usize) {
        let weight = answer.body.len() + key.question.weight();
        if weight > budget {
            return;
        }
        // States only grow: the same question at an older state is never asked again, and an
        // answer finished after one of a newer state is already outdated.
        let mut older = Vec::new();
        for (other, slot) in &self.slots {
            if other.question == key.question && matches!(slot, Slot::Ready(_)) {
                if other.state > key.state {
                    return;
                }
                older.push(other.clone());
            }
        }
        for other in &older {
            self.remove(other);
        }
        self.sweep(now);
        while self.bytes + weight > budget || self.ready() >= MAX_ENTRIES {
            let least_recent = self
                .slots
                .iter()
                .filter_map(|(key, slot)| match slot {
                    Slot::Ready(entry) => Some((key, entry.used)),
                    Slot::Building(_) => None,
                })
                .min_by_key(|(_, used)| *used)
                .map(|(key, _)| key.clone());
            match least_recent {
                Some(key) => self.remove(&key),
                None => break,
            }
        }
        self.bytes += weight;
        self.slots.insert(
            key,
            Slot::Ready(Entry {
                answer,
                weight,
                built: now,
                used: now,
            }),
        );
    }

    fn ready(&self) -> usize {
        self.slots
            .values()
            .filter(|slot| matches!(slot, Slot::Ready(_)))
            .count()
    }
}

impl Answers {
    /// Keeps answers within `budget` bytes; 0 keeps none.
    pub fn new(budget: usize) -> Answers {
        Answers {
            budget,
            kept: Mutex::new(Kept {
                slots: HashMap::new(),
                bytes: 0,
                swept: Instant::now(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            awaited: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // Nothing panics while it is held: a poisoned lock still guards whole slots.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer of `key` if kept, else who builds it: this caller or another.
    pub(super) fn lookup(self: &Arc<Self>, key: Key, now: Instant) -> Lookup {
        if self.budget == 0 {
            return Lookup::Off;
        }
        let mut kept = self.lock();
        if now.saturating_duration_since(kept.swept) >= SWEEP_EVERY {
            kept.sweep(now);
        }
        match kept.slots.get_mut(&key) {
            Some(Slot::Ready(entry)) if !entry.expired(now) => {
                entry.used = now;
                self.hits.fetch_add(1, Relaxed);
                return Lookup::Kept(entry.answer.clone());
            }
            Some(Slot::Ready(_)) => kept.remove(&key),
            Some(Slot::Building(building)) => {
                self.awaited.fetch_add(1, Relaxed);
                return Lookup::Awaited(Waiting(building.clone()));
            }
            None => {}
        }
        self.misses.fetch_add(1, Relaxed);
        let (done, building) = watch::channel(None);
        kept.slots.insert(key.clone(), Slot::Building(building));
        Lookup::Build(Box::new(Ticket {
            answers: self.clone(),
            key: Some(key),
            done,
        }))
    }

    pub(crate) fn figures(&self) -> AnswerFigures {
        let kept = self.lock();
        AnswerFigures {
            budget: self.budget,
            bytes: kept.bytes,
            answers: kept.ready(),
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            awaited: self.awaited.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeapi::media::{Encoding, Shape};

    fn question(plural: &str, coding: Coding) -> Question {
        Question {
            group: String::new(),
            version: "v1".into(),
            plural: plural.into(),
            namespace: None,
            query: KubeQuery::default(),
            media: Media {
                encoding: Encoding::Json,
                shape: Shape::Plain,
            },
            coding,
        }
    }

    fn key(plural: &str, version: u64) -> Key {
        Key {
            question: question(plural, Coding::Identity),
            state: StateStamp {
                version,
                changes: version,
            },
        }
    }

    fn answer(bytes: usize, lifetime: Option<Duration>) -> Finished {
        Finished {
            content_type: "application/json",
            body: Bytes::from(vec![b' '; bytes]),
            coding: Coding::Identity,
            lifetime,
        }
    }

    /// Builds `key`'s answer as its first caller: a miss, then kept.
    fn built(answers: &Arc<Answers>, key: &Key, answer: &Finished, now: Instant) {
        match answers.lookup(key.clone(), now) {
            Lookup::Build(ticket) => ticket.finish(answer, true, now),
            _ => panic!("{key:?} should be built"),
        }
    }

    fn kept(answers: &Arc<Answers>, key: &Key, now: Instant) -> Option<usize> {
        match answers.lookup(key.clone(), now) {
            Lookup::Kept(answer) => Some(answer.body.len()),
            // Not kept: this lookup's ticket is dropped unbuilt.
            _ => None,
        }
    }

    #[test]
    fn a_key_is_every_part_of_the_question_and_the_state() {
        let base = key("pods", 7);
        let mut variants = Vec::new();
        let mut other = base.clone();
        other.state.changes += 1;
        variants.push(other);
        let mut other = base.clone();
        other.state.version += 1;
        variants.push(other);
        let mut other = base.clone();
        other.question.namespace = Some("ns".into());
        variants.push(other);
        let mut other = base.clone();
        other.question.plural = "configmaps".into();
        variants.push(other);
        let mut other = base.clone();
        other.question.group = "apps".into();
        variants.push(other);
        let mut other = base.clone();
        other.question.coding = Coding::Gzip;
        variants.push(other);
        let mut other = base.clone();
        other.question.media.shape = Shape::Table;
        variants.push(other);
        let mut other = base.clone();
        other.question.media.encoding = Encoding::Yaml;
        variants.push(other);
        for (name, value) in [
            ("labelSelector", "app=web"),
            ("fieldSelector", "metadata.name=a"),
            ("limit", "500"),
            ("continue", "token"),
            ("resourceVersion", "5"),
            ("resourceVersionMatch", "Exact"),
            ("includeObject", "Object"),
        ] {
            let uri: axum::http::Uri = format!("/api/v1/pods?{name}={value}").parse().unwrap();
            let mut other = base.clone();
            other.question.query = axum::extract::Query::<KubeQuery>::try_from_uri(&uri)
                .unwrap()
                .0;
            assert_ne!(other.question.query, KubeQuery::default(), "{name}");
            variants.push(other);
        }
        let answers = Arc::new(Answers::new(1 << 20));
        let now = Instant::now();
        built(&answers, &base, &answer(1000, None), now);
        assert_eq!(kept(&answers, &base.clone(), now), Some(1000));
        for variant in &variants {
            assert_ne!(variant, &base);
            assert_eq!(kept(&answers, variant, now), None, "{variant:?}");
        }
    }

    #[test]
    fn the_budget_bounds_what_is_kept_the_least_recently_used_going_first() {
        let answers = Arc::new(Answers::new(10_000));
        let now = Instant::now();
        let (a, b, c) = (key("a", 1), key("b", 1), key("c", 1));
        built(&answers, &a, &answer(4000, None), now);
        built(
            &answers,
            &b,
            &answer(4000, None),
            now + Duration::from_millis(1),
        );
        // a is used again, so b is now the least recently used.
        assert!(kept(&answers, &a, now + Duration::from_millis(2)).is_some());
        built(
            &answers,
            &c,
            &answer(4000, None),
            now + Duration::from_millis(3),
        );
        let later = now + Duration::from_millis(4);
        assert!(kept(&answers, &a, later).is_some());
        assert_eq!(kept(&answers, &b, later), None);
        assert!(kept(&answers, &c, later).is_some());
        let figures = answers.figures();
        assert!(figures.bytes <= 10_000, "{figures:?}");
        assert_eq!(figures.answers, 2);
        // An answer larger than the budget is sent, never kept, and evicts nothing.
        let huge = key("huge", 1);
        built(&answers, &huge, &answer(20_000, None), later);
        assert_eq!(kept(&answers, &huge, later), None);
        assert!(kept(&answers, &a, later).is_some());
        // A budget of 0 keeps nothing and builds every time.
        let off = Arc::new(Answers::new(0));
        assert!(matches!(off.lookup(a.clone(), now), Lookup::Off));
    }

    #[test]
    fn a_newer_state_replaces_the_older_one_and_an_older_never_replaces_a_newer() {
        let answers = Arc::new(Answers::new(1 << 20));
        let now = Instant::now();
        let (old, new) = (key("pods", 1), key("pods", 2));
        built(&answers, &old, &answer(1000, None), now);
        built(&answers, &new, &answer(2000, None), now);
        assert_eq!(answers.figures().answers, 1);
        assert_eq!(kept(&answers, &new, now), Some(2000));
        // A slow build of the old state finishing now is not kept.
        let ticket = match answers.lookup(old.clone(), now) {
            Lookup::Build(ticket) => ticket,
            _ => panic!("the old state is no longer kept"),
        };
        ticket.finish(&answer(1000, None), true, now);
        assert_eq!(kept(&answers, &old, now), None);
        assert_eq!(kept(&answers, &new, now), Some(2000));
    }

    #[test]
    fn answers_expire_unused_and_tables_and_tokens_after_their_lifetime() {
        let answers = Arc::new(Answers::new(1 << 20));
        let now = Instant::now();
        let (list, table, continued) = (key("list", 1), key("table", 1), key("continued", 1));
        built(&answers, &list, &answer(100, None), now);
        built(&answers, &table, &answer(100, Some(TABLE_LIFETIME)), now);
        built(
            &answers,
            &continued,
            &answer(100, Some(CONTINUED_LIFETIME)),
            now,
        );
        let soon = now + Duration::from_millis(900);
        assert!(kept(&answers, &table, soon).is_some());
        let later = now + TABLE_LIFETIME;
        assert_eq!(kept(&answers, &table, later), None);
        assert!(kept(&answers, &list, later).is_some());
        // Used again, an answer lives on past IDLE since it was built...
        let used = later + IDLE.saturating_sub(Duration::from_secs(1));
        assert!(kept(&answers, &list, used).is_some());
        // ...but a continue token's does not, used or not.
        assert_eq!(kept(&answers, &continued, now + CONTINUED_LIFETIME), None);
        // Unused for IDLE: dropped, and swept by any lookup, its bytes with it.
        let idle = used + IDLE;
        assert_eq!(kept(&answers, &key("other", 1), idle), None);
        assert_eq!(answers.figures().answers, 0);
        assert_eq!(answers.figures().bytes, 0);
    }

    #[tokio::test]
    async fn one_caller_builds_and_the_others_asking_meanwhile_wait_for_it() {
        let answers = Arc::new(Answers::new(1 << 20));
        let now = Instant::now();
        let k = key("pods", 3);
        let Lookup::Build(ticket) = answers.lookup(k.clone(), now) else {
            panic!("the first caller builds");
        };
        let waiting: Vec<_> = (0..100)
            .map(|_| match answers.lookup(k.clone(), now) {
                Lookup::Awaited(waiting) => tokio::spawn(waiting.answer()),
                _ => panic!("the others wait"),
            })
            .collect();
        ticket.finish(&answer(500, None), true, now);
        for waiter in waiting {
            assert_eq!(waiter.await.unwrap().map(|a| a.body.len()), Some(500));
        }
        let figures = answers.figures();
        assert_eq!((figures.misses, figures.awaited, figures.hits), (1, 100, 0));
        assert_eq!(kept(&answers, &k, now), Some(500));

        // A build that fails lets those waiting go, to build their own.
        let k = key("pods", 4);
        let Lookup::Build(ticket) = answers.lookup(k.clone(), now) else {
            panic!("a new state is built");
        };
        let Lookup::Awaited(waiting) = answers.lookup(k.clone(), now) else {
            panic!("the others wait");
        };
        drop(ticket);
        assert!(waiting.answer().await.is_none());
        assert!(matches!(answers.lookup(k, now), Lookup::Build(_)));
    }

    #[test]
    fn gzip_is_sent_to_callers_that_accept_it() {
        let accepting = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(value).unwrap(),
            );
            Coding::accepted(&headers)
        };
        assert_eq!(Coding::accepted(&HeaderMap::new()), Coding::Identity);
        assert_eq!(accepting("gzip"), Coding::Gzip);
        assert_eq!(accepting("deflate, GZIP;q=0.5"), Coding::Gzip);
        assert_eq!(accepting("*"), Coding::Gzip);
        assert_eq!(accepting("gzip;q=0"), Coding::Identity);
        assert_eq!(accepting("gzip;q=0, *"), Coding::Identity);
        assert_eq!(accepting("br, deflate"), Coding::Identity);
        let body = br#"{"kind":"PodList","items":[]}"#.repeat(1000);
        let mut writer = BodyWriter::new(Coding::Gzip);
        for part in body.chunks(100) {
            writer.write_all(part).unwrap();
        }
        let written = writer.finish().unwrap();
        assert_eq!(
            (written.coding, written.plain_bytes),
            (Coding::Gzip, body.len())
        );
        assert!(
            written.body.len() < body.len() / 10,
            "{}",
            written.body.len()
        );
        let mut plain = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&written.body[..]),
            &mut plain,
        )
        .unwrap();
        assert_eq!(plain, body);
        let mut writer = BodyWriter::new(Coding::Identity);
        writer.write_all(&body).unwrap();
        let written_plain = writer.finish().unwrap();
        assert_eq!(written_plain.body, body);
        assert_eq!(written_plain.coding, Coding::Identity);
        let finished = Finished {
            body: Bytes::from(written.body),
            coding: Coding::Gzip,
            ..answer(0, None)
        };
        let response = finished.response();
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    }
}
