//! Fairness per client, after the apiserver's API Priority and Fairness: concurrent requests
//! and open watches (a log's stream counts as one) are counted per identity (the authenticated user with `--auth
//! delegated`, else the client's address), and each identity may hold its share of each
//! bound, the bound divided among the identities holding any (max-min: a share no identity
//! uses is left to the others). One past its share gets 429 with Retry-After; the others are
//! served as if it were not there, since their share does not depend on what it holds.
//! A watch ends after a randomised time (the apiserver's `--min-request-timeout` times a
//! factor in [1, 2)), so clients spread over replicas and no stream lives forever.
//!
//! Connections are shared the same way per client address, at the connection layer (the
//! binary's `connections` module); its figures are counted here, for `/metrics`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tower::{Layer, Service};

use super::ApiError;
use super::dispatch::{RouteMatch, Streams};

/// The bounds shared among identities, from the settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShares {
    /// `maxRequestsInFlight`: requests being answered at once (watches apart).
    pub max_requests_in_flight: usize,
    /// `maxWatches`: `watch=true` streams open at once.
    pub max_watches: usize,
    /// `minRequestTimeout`: a watch lasts this long times a random factor in [1, 2).
    pub min_request_timeout: Duration,
}

impl Default for FairShares {
    /// Together they stay under the default connection bound (1024), so one identity
    /// cannot hold every connection even when all its clients share one address.
    fn default() -> Self {
        FairShares {
            max_requests_in_flight: 400,
            max_watches: 512,
            min_request_timeout: Duration::from_secs(1800),
        }
    }
}

/// The authenticated caller of a request, put among its extensions by delegated auth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The user name the TokenReview gave.
    pub user: String,
}

/// Whose share a request counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Identity {
    User(String),
    Address(IpAddr),
    /// Neither known (a router served without the connection layer, as in unit tests).
    Unknown,
}

impl Identity {
    fn of(request: &Request) -> Identity {
        match request.extensions().get::<Caller>() {
            Some(caller) => Identity::User(caller.user.clone()),
            None => Identity::of_client(request),
        }
    }

    /// The identity of a request without a [`Caller`]: its client's address.
    fn of_client(request: &Request) -> Identity {
        match request.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => Identity::Address(peer.ip().to_canonical()),
            None => Identity::Unknown,
        }
    }

    /// Whether `request` counts against this identity, as [`Identity::of`] would tell,
    /// without copying a user's name to compare it.
    fn is_of(&self, request: &Request) -> bool {
        match (self, request.extensions().get::<Caller>()) {
            (Identity::User(user), Some(caller)) => *user == caller.user,
            (_, Some(_)) | (Identity::User(_), None) => false,
            (known, None) => *known == Identity::of_client(request),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::User(user) => write!(f, "user {user:?}"),
            Identity::Address(ip) => write!(f, "client {ip}"),
            Identity::Unknown => f.write_str("this client"),
        }
    }
}

/// What is shared: concurrent requests or open watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    Requests,
    Watches,
}

impl Held {
    fn as_str(self) -> &'static str {
        match self {
            Held::Requests => "requests",
            Held::Watches => "watches",
        }
    }
}

/// A refusal: the identity holds `held`, its share is `share`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OverShare {
    held: usize,
    share: usize,
}

/// What one identity holds, shared by its connections (each keeps the slot of the identity
/// it last served) and its permits: taken and given back on every request without a lock.
#[derive(Debug, Default)]
struct Slot {
    requests: AtomicUsize,
    watches: AtomicUsize,
}

impl Slot {
    fn of(&self, held: Held) -> &AtomicUsize {
        match held {
            Held::Requests => &self.requests,
            Held::Watches => &self.watches,
        }
    }
}

/// One bound divided among the identities holding any of it.
#[derive(Debug)]
struct Bound {
    bound: usize,
    /// Identities holding any: a slot's count going from 0 to 1 adds one, back to 0 takes
    /// one away. Signed: for an instant, two threads may count one identity's two steps here
    /// in the other order.
    holders: AtomicIsize,
    refused: AtomicU64,
}

impl Bound {
    fn new(bound: usize) -> Self {
        Bound {
            bound,
            holders: AtomicIsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The share of each of `holders` identities: the bound divided among them, rounded up,
    /// at least one.
    fn share_among(&self, holders: isize) -> usize {
        self.bound.div_ceil(holders.max(1).unsigned_abs()).max(1)
    }

    /// One more in `held`, unless its identity already holds its share, counted as if it
    /// held one: one holding none (most requests find their identity so) may always take one.
    fn take(&self, held: &AtomicUsize) -> Result<(), OverShare> {
        let mut before = held.load(Ordering::Acquire);
        loop {
            if before > 0 {
                let share = self.share_among(self.holders.load(Ordering::Acquire));
                if before >= share {
                    return Err(OverShare {
                        held: before,
                        share,
                    });
                }
            }
            match held.compare_exchange_weak(
                before,
                before + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => before = now,
            }
        }
        if before == 0 {
            self.holders.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// One taken with [`Bound::take`] given back.
    fn give_back(&self, held: &AtomicUsize) {
        if held.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.holders.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The identities holding any, and the share each has now.
    fn figures(&self) -> (usize, usize) {
        let holders = self.holders.load(Ordering::Acquire).max(0);
        (holders.unsigned_abs(), self.share_among(holders))
    }
}

/// Each identity's slot, for as long as a connection or a permit keeps it.
#[derive(Debug)]
struct Slots {
    /// Hashed with foldhash (seeded per process).
    by_identity: HashMap<Identity, Weak<Slot>, foldhash::fast::RandomState>,
    /// The slots no one keeps are swept once the map has grown to this many, so it holds
    /// at most about twice the identities kept, at a sweep's cost spread over as many
    /// identities as it finds.
    sweep_at: usize,
}

/// The fewest entries a sweep of [`Slots`] waits for.
const MIN_SWEEP: usize = 64;

impl Slots {
    fn new() -> Self {
        Slots {
            by_identity: HashMap::default(),
            sweep_at: MIN_SWEEP,
        }
    }

    fn of(&mut self, who: &Identity) -> Arc<Slot> {
        if let Some(slot) = self.by_identity.get(who).and_then(Weak::upgrade) {
            return slot;
        }
        if self.by_identity.len() >= self.sweep_at {
            self.by_identity.retain(|_, slot| slot.strong_count() > 0);
            self.sweep_at = (self.by_identity.len() * 2).max(MIN_SWEEP);
        }
        let slot = Arc::new(Slot::default());
        self.by_identity.insert(who.clone(), Arc::downgrade(&slot));
        slot
    }
}

/// What the connection bound did (counted by the connection layer).
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    /// Connections closed to make room for a client holding fewer.
    pub closed_for_another: AtomicU64,
    /// New connections refused: their client held the most, each busy.
    pub refused: AtomicU64,
}

/// The bookkeeping of both shares, and the refusals, for the middleware and `/metrics`.
#[derive(Debug)]
pub struct Fairness {
    shares: FairShares,
    requests: Bound,
    watches: Bound,
    slots: Mutex<Slots>,
    /// Shared with the connection layer of the API's listener.
    pub connections: Arc<ConnectionCounts>,
}

/// A request or watch counted against its identity until dropped.
pub(super) struct Permit {
    fairness: Arc<Fairness>,
    held: Held,
    slot: Arc<Slot>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        (self.fairness.bound(self.held)).give_back(self.slot.of(self.held));
    }
}

impl Fairness {
    pub fn new(shares: FairShares) -> Fairness {
        Fairness {
            shares,
            requests: Bound::new(shares.max_requests_in_flight),
            watches: Bound::new(shares.max_watches),
            slots: Mutex::new(Slots::new()),
            connections: Arc::default(),
        }
    }

    pub fn shares(&self) -> FairShares {
        self.shares
    }

    fn bound(&self, held: Held) -> &Bound {
        match held {
            Held::Requests => &self.requests,
            Held::Watches => &self.watches,
        }
    }

    /// `who`'s slot: the one a connection or permit keeps, else a new one.
    fn slot(&self, who: &Identity) -> Arc<Slot> {
        (self.slots.lock().unwrap_or_else(|e| e.into_inner())).of(who)
    }

    fn take(
        self: &Arc<Self>,
        held: Held,
        who: &Identity,
        slot: &Arc<Slot>,
    ) -> Result<Permit, Refused> {
        let bound = self.bound(held);
        match bound.take(slot.of(held)) {
            Ok(()) => Ok(Permit {
                fairness: self.clone(),
                held,
                slot: slot.clone(),
            }),
            Err(over) => {
                bound.refused.fetch_add(1, Ordering::Relaxed);
                let what = match held {
                    Held::Requests => "requests in progress",
                    Held::Watches => "open watches",
                };
                Err(Refused {
                    message: format!(
                        "{who} holds {} {what}, its share of {} ({}): try again when one ends",
                        over.held,
                        over.share,
                        self.setting(held),
                    ),
                    retry_after: RETRY_AFTER_SECONDS,
                })
            }
        }
    }

    fn setting(&self, held: Held) -> &'static str {
        match held {
            Held::Requests => {
                "maxRequestsInFlight divided among the clients with requests in progress"
            }
            Held::Watches => "maxWatches divided among the clients with watches open",
        }
    }

    /// For `/metrics`, per kind of share. Never per identity: their number is unbounded.
    pub(super) fn figures(&self) -> Vec<ShareFigures> {
        [
            (Held::Requests, self.shares.max_requests_in_flight),
            (Held::Watches, self.shares.max_watches),
        ]
        .into_iter()
        .map(|(held, bound)| {
            let (holders, share) = self.bound(held).figures();
            ShareFigures {
                name: held.as_str(),
                bound,
                holders,
                share,
                refused: self.bound(held).refused.load(Ordering::Relaxed),
            }
        })
        .collect()
    }

    /// When a watch opened now ends: `minRequestTimeout` times a random factor in [1, 2).
    pub(super) fn watch_lifetime(&self) -> Duration {
        self.shares
            .min_request_timeout
            .mul_f64(1.0 + fastrand::f64())
    }
}

/// One kind of share as `/metrics` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ShareFigures {
    /// `requests` or `watches`.
    pub name: &'static str,
    pub bound: usize,
    /// Identities holding any.
    pub holders: usize,
    /// What each may hold now.
    pub share: usize,
    /// Refusals so far.
    pub refused: u64,
}

/// The apiserver's own Retry-After for a request APF turned away.
const RETRY_AFTER_SECONDS: u64 = 1;

/// A request past its identity's share: each API presents it its own way, as a 429 with
/// `Retry-After`.
#[derive(Debug)]
pub(super) struct Refused {
    pub message: String,
    /// Whole seconds.
    pub retry_after: u64,
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, refused.message)
            .retry_after(refused.retry_after)
    }
}

/// How a group of routes counts its requests, and answers one past its share.
pub(super) trait ShareRule: Send + Sync + 'static {
    /// What the request holds once admitted: a watch's place for a stream, for as long as
    /// its body is open, else a request's until its answer is ready (answers are built in
    /// memory; sending them costs the connection, bounded at its own layer).
    fn held(&self, request: &Request) -> Held;
    /// The 429 with `Retry-After`, as the group's API presents it.
    fn refused(&self, refused: Refused) -> Response;
}

/// Counts each request of the routes it wraps against its identity's share, or refuses it.
/// Inside delegated auth, so a request is counted against the user it authenticated as.
#[derive(Clone)]
pub(super) struct ShareLayer {
    fairness: Arc<Fairness>,
    rule: Arc<dyn ShareRule>,
}

impl ShareLayer {
    pub(super) fn new(fairness: Arc<Fairness>, rule: impl ShareRule) -> ShareLayer {
        ShareLayer {
            fairness,
            rule: Arc::new(rule),
        }
    }
}

impl<S> Layer<S> for ShareLayer {
    type Service = Share<S>;

    fn layer(&self, inner: S) -> Share<S> {
        Share {
            counter: self.counter(),
            inner,
        }
    }
}

#[derive(Clone)]
pub(super) struct Share<S> {
    counter: ShareCounter,
    inner: S,
}

impl ShareLayer {
    /// A counter for one connection's requests.
    pub(super) fn counter(&self) -> ShareCounter {
        ShareCounter {
            layer: self.clone(),
            known: None,
        }
    }
}

/// Counts one connection's requests: the share's layer, and the slot of the identity the
/// connection last served. Its requests nearly always come from one identity, so its slot
/// is looked up again (under the lock of every identity's slots) only when another comes.
/// With delegated auth the counter sits inside axum's middleware, which clones it for every
/// request and drops what the call learned: there each request looks its slot up (one lock,
/// where the ledger took two).
#[derive(Clone)]
pub(super) struct ShareCounter {
    layer: ShareLayer,
    known: Option<(Identity, Arc<Slot>)>,
}

impl ShareCounter {
    /// Counts `request` against its identity's share and has `inner` answer it, or refuses
    /// it: what [`Share`] does, and the per-request layer where nothing runs between them.
    pub(super) fn count<S>(&mut self, mut request: Request, inner: &mut S) -> Counted<S::Future>
    where
        S: Service<Request, Response = Response, Error = Infallible>,
    {
        let ShareLayer { fairness, rule } = &self.layer;
        let held = rule.held(&request);
        let (who, slot) = match &self.known {
            Some((known, slot)) if known.is_of(&request) => (known, slot),
            _ => {
                let who = Identity::of(&request);
                let slot = fairness.slot(&who);
                let (who, slot) = self.known.insert((who, slot));
                (&*who, &*slot)
            }
        };
        let permit = match fairness.take(held, who, slot) {
            Ok(permit) => permit,
            Err(refused) => return Counted::Refused(std::future::ready(Ok(rule.refused(refused)))),
        };
        // A connection switched to another protocol outlives its answer, whose body hyper
        // drops with the 101: the handler relaying it holds the place instead.
        let permit = if held == Held::Watches && switches_protocols(&request) {
            request.extensions_mut().insert(WatchPlace {
                _permit: Arc::new(permit),
            });
            None
        } else {
            Some(permit)
        };
        Counted::Admitted {
            answer: inner.call(request),
            held,
            permit,
        }
    }
}

impl<S> Service<Request> for Share<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Counted<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Counted<S::Future> {
        self.counter.count(request, &mut self.inner)
    }
}

/// The answer of a request counted against its share: a request's place is given back once
/// the answer is ready, a watch's once its body is dropped. A future of its own, not a
/// boxed `async` block: nothing is allocated for an answer ready at once.
pub(super) enum Counted<F> {
    /// Past its share: the 429.
    Refused(std::future::Ready<Result<Response, Infallible>>),
    Admitted {
        answer: F,
        held: Held,
        permit: Option<Permit>,
    },
    /// A route no share counts (the probes, the dashboard).
    Uncounted(F),
}

impl<F> Future for Counted<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Counted::Refused(refusal) => Pin::new(refusal).poll(cx),
            Counted::Uncounted(answer) => Pin::new(answer).poll(cx),
            Counted::Admitted {
                answer,
                held,
                permit,
            } => {
                let Poll::Ready(Ok(response)) = Pin::new(answer).poll(cx) else {
                    return Poll::Pending;
                };
                Poll::Ready(Ok(match (*held, permit.take()) {
                    (Held::Watches, Some(permit)) => {
                        response.map(|body| Body::new(Holding::new(body, permit)))
                    }
                    // A request's place, given back now that its answer is ready.
                    (_, permit) => {
                        drop(permit);
                        response
                    }
                }))
            }
        }
    }
}

/// The prefix's routes: a watch or a log holds a watch's place, and a refusal is answered in
/// the envelope.
pub(super) struct EnvelopeShares;

impl ShareRule for EnvelopeShares {
    fn held(&self, request: &Request) -> Held {
        // Only the table's requests come here, each with its match; without one, the query
        // alone tells.
        let streams = (request.extensions().get::<RouteMatch>())
            .map_or(Streams::WhenWatching, |found| found.route().streams());
        if streams.asked_by(request.uri()) {
            Held::Watches
        } else {
            Held::Requests
        }
    }

    fn refused(&self, refused: Refused) -> Response {
        ApiError::from(refused).into_response()
    }
}

/// Whether `query` may name one of `words`: it spells one anywhere in it, or encodes a
/// character (`%`), which could spell one once decoded. One plain scan, where `str::contains`
/// prepares a searcher per word that costs more than a short query's whole scan (every
/// request asks this). Only where a word's first byte is found is the rest compared.
pub(super) fn may_name(query: &str, words: &[&str]) -> bool {
    let query = query.as_bytes();
    (0..query.len()).any(|at| {
        query[at] == b'%'
            || words.iter().any(|word| {
                let word = word.as_bytes();
                word.first() == Some(&query[at]) && query[at..].starts_with(word)
            })
    })
}

/// Whether `request` may switch its connection to another protocol (WebSocket, SPDY): an
/// HTTP/1.1 request with `Upgrade`, on a connection served with upgrades, carries hyper's
/// handle on the switch.
pub(super) fn switches_protocols(request: &Request) -> bool {
    request
        .extensions()
        .get::<hyper::upgrade::OnUpgrade>()
        .is_some()
}

/// The watch's place of a request that switches protocols, among its extensions: whoever
/// relays the switched connection keeps it for as long as the connection is open.
#[derive(Clone)]
pub(super) struct WatchPlace {
    _permit: Arc<Permit>,
}

/// A body holding `T` until it is dropped: sent whole, or its client gone. A watch's place
/// in its share is held so for as long as its stream is open.
pub struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T> Holding<T> {
    pub fn new(body: Body, held: T) -> Self {
        Holding { body, _held: held }
    }
}

impl<T: Unpin> HttpBody for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_may_name_a_word_it_spells_or_encodes() {
        for (query, named) in [
            ("watch=true", true),
            ("namespace=ns&watch=1", true),
            ("labelSelector=watchful", true),
            ("wat", false),
            ("", false),
            ("namespace=ns", false),
            ("watc=h", false),
            ("wwatch", true),
            ("watcwatch", true),
            ("wat&watc", false),
            ("w%61tch=1", true),
            ("namespace=n%73", true),
            ("follow=true", true),
            ("fol=low", false),
        ] {
            assert_eq!(may_name(query, &["watch", "follow"]), named, "{query}");
            assert_eq!(
                may_name(query, &["watch", "follow"]),
                query.contains("watch") || query.contains("follow") || query.contains('%'),
                "{query}"
            );
        }
        assert!(!may_name("follow=1", &["watch"]));
        assert!(may_name("%", &[]));
    }

    /// A bound and named identities' slots, taken from and given back to by name.
    struct Ledger {
        bound: Bound,
        slots: HashMap<&'static str, Slot>,
    }

    impl Ledger {
        fn new(bound: usize) -> Self {
            Ledger {
                bound: Bound::new(bound),
                slots: HashMap::new(),
            }
        }

        fn take(&mut self, who: &'static str) -> Result<(), OverShare> {
            let slot = self.slots.entry(who).or_default();
            self.bound.take(&slot.requests)
        }

        fn give_back(&mut self, who: &'static str) {
            self.bound.give_back(&self.slots[who].requests);
        }
    }

    #[test]
    fn alone_an_identity_may_hold_the_whole_bound() {
        let mut ledger = Ledger::new(4);
        for _ in 0..4 {
            ledger.take("hog").unwrap();
        }
        assert_eq!(ledger.take("hog"), Err(OverShare { held: 4, share: 4 }));
        assert_eq!(ledger.bound.figures(), (1, 4));
    }

    #[test]
    fn another_identity_is_served_as_if_the_hog_were_not_there() {
        let mut ledger = Ledger::new(4);
        for _ in 0..4 {
            ledger.take("hog").unwrap();
        }
        // The newcomer's share is half the bound whatever the hog holds.
        ledger.take("quiet").unwrap();
        ledger.take("quiet").unwrap();
        assert_eq!(ledger.take("quiet"), Err(OverShare { held: 2, share: 2 }));
        // The hog is past its share now, and stays refused until it is back under it.
        assert_eq!(ledger.take("hog"), Err(OverShare { held: 4, share: 2 }));
        ledger.give_back("hog");
        ledger.give_back("hog");
        assert_eq!(ledger.take("hog"), Err(OverShare { held: 2, share: 2 }));
        ledger.give_back("hog");
        ledger.take("hog").unwrap();
        assert_eq!(ledger.bound.figures(), (2, 2));
    }

    #[test]
    fn shares_round_up_and_never_fall_to_zero() {
        let mut ledger = Ledger::new(3);
        for who in ["a", "b"] {
            ledger.take(who).unwrap();
        }
        // Three holders of 3: one each; a fourth still gets one.
        ledger.take("c").unwrap();
        assert_eq!(ledger.take("a"), Err(OverShare { held: 1, share: 1 }));
        ledger.take("d").unwrap();
        assert_eq!(ledger.bound.figures(), (4, 1));
        // Two holders of 3: two each (rounded up).
        ledger.give_back("c");
        ledger.give_back("d");
        ledger.take("a").unwrap();
        assert_eq!(ledger.take("a"), Err(OverShare { held: 2, share: 2 }));
    }

    #[test]
    fn an_identity_that_gives_everything_back_no_longer_holds() {
        let mut ledger = Ledger::new(10);
        ledger.take("a").unwrap();
        ledger.take("a").unwrap();
        ledger.take("b").unwrap();
        ledger.give_back("a");
        ledger.give_back("a");
        assert_eq!(ledger.bound.figures(), (1, 10));
        ledger.give_back("b");
        assert_eq!(ledger.bound.figures(), (0, 10));
    }

    #[test]
    fn many_threads_taking_and_giving_back_leave_nothing_held() {
        let bound = Arc::new(Bound::new(8));
        let slots: Arc<[Slot; 3]> = Arc::default();
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (bound, slots) = (bound.clone(), slots.clone());
                std::thread::spawn(move || {
                    let slot = &slots[t % 3].requests;
                    for _ in 0..20_000 {
                        if bound.take(slot).is_ok() {
                            bound.give_back(slot);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(bound.figures(), (0, 8));
        assert!(
            slots
                .iter()
                .all(|slot| slot.requests.load(Ordering::Acquire) == 0)
        );
    }

    #[test]
    fn a_slot_lives_while_kept_and_the_forgotten_are_swept() {
        let mut slots = Slots::new();
        let kept = slots.of(&Identity::User("kept".into()));
        assert!(Arc::ptr_eq(
            &kept,
            &slots.of(&Identity::User("kept".into()))
        ));
        // Identities that came and went: their entries stay until the map doubles, then go.
        for n in 0..10 * MIN_SWEEP {
            drop(slots.of(&Identity::User(format!("gone {n}"))));
        }
        assert!(slots.by_identity.len() <= 2 * MIN_SWEEP);
        assert!(Arc::ptr_eq(
            &kept,
            &slots.of(&Identity::User("kept".into()))
        ));
        // A slot no one keeps is a new one next time, holding nothing.
        let gone = slots.of(&Identity::User("gone 0".into()));
        assert_eq!(gone.requests.load(Ordering::Acquire), 0);
    }

    #[test]
    fn permits_count_until_dropped_and_refusals_are_counted_by_kind() {
        let fairness = Arc::new(Fairness::new(FairShares {
            max_requests_in_flight: 1,
            max_watches: 2,
            ..FairShares::default()
        }));
        let who = Identity::Address([127, 0, 0, 2].into());
        let slot = fairness.slot(&who);
        let first = fairness.take(Held::Watches, &who, &slot).ok().unwrap();
        let _second = fairness.take(Held::Watches, &who, &slot).ok().unwrap();
        let refused = fairness.take(Held::Watches, &who, &slot).err().unwrap();
        assert!(
            refused
                .message
                .starts_with("client 127.0.0.2 holds 2 open watches, its share of 2"),
            "{}",
            refused.message
        );
        let refused = ApiError::from(refused).into_response();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "1");
        // Requests are another bound: a watch hog may still read.
        let _request = fairness.take(Held::Requests, &who, &slot).ok().unwrap();
        // Permits keep the slot: the connection's copy gone, it still counts.
        drop(slot);
        drop(first);
        let slot = fairness.slot(&who);
        let _again = fairness.take(Held::Watches, &who, &slot).ok().unwrap();
        let figures = |name, bound, holders, share, refused| ShareFigures {
            name,
            bound,
            holders,
            share,
            refused,
        };
        assert_eq!(
            fairness.figures(),
            [
                figures("requests", 1, 1, 1, 0),
                figures("watches", 2, 1, 2, 1)
            ]
        );
    }

    #[test]
    fn the_user_wins_over_the_address_and_addresses_are_canonical() {
        let request = |caller: Option<&str>, peer: Option<SocketAddr>| {
            let mut r = Request::new(Body::empty());
            if let Some(user) = caller {
                r.extensions_mut().insert(Caller { user: user.into() });
            }
            if let Some(peer) = peer {
                r.extensions_mut().insert(ConnectInfo(peer));
            }
            r
        };
        let v4: SocketAddr = "127.0.0.2:5000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.2]:6000".parse().unwrap();
        assert_eq!(
            Identity::of(&request(Some("alice"), Some(v4))),
            Identity::User("alice".into())
        );
        assert_eq!(
            Identity::of(&request(None, Some(mapped))),
            Identity::of(&request(None, Some(v4)))
        );
        assert_eq!(Identity::of(&request(None, None)), Identity::Unknown);
        let requests = [
            request(Some("alice"), Some(v4)),
            request(Some("alice"), None),
            request(Some("bob"), Some(v4)),
            request(None, Some(v4)),
            request(None, Some(mapped)),
            request(None, Some("127.0.0.3:5000".parse().unwrap())),
            request(None, None),
        ];
        for known in &requests {
            let known = Identity::of(known);
            for asked in &requests {
                assert_eq!(
                    known.is_of(asked),
                    known == Identity::of(asked),
                    "{known} of {asked:?}"
                );
            }
        }
    }

    #[test]
    fn watches_last_between_one_and_two_base_times() {
        let fairness = Fairness::new(FairShares {
            min_request_timeout: Duration::from_secs(100),
            ..FairShares::default()
        });
        let lifetimes: Vec<Duration> = (0..200).map(|_| fairness.watch_lifetime()).collect();
        assert!(
            lifetimes
                .iter()
                .all(|t| *t >= Duration::from_secs(100) && *t < Duration::from_secs(200))
        );
        assert!(
            lifetimes.iter().any(|t| *t != lifetimes[0]),
            "randomised, so replicas' clients spread"
        );
    }
}
