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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use serde::Deserialize;
use tower::{Layer, Service};

use super::ApiError;
use super::dispatch::RouteMatch;

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
        if let Some(caller) = request.extensions().get::<Caller>() {
            return Identity::User(caller.user.clone());
        }
        match request.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => Identity::Address(peer.ip().to_canonical()),
            None => Identity::Unknown,
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

/// How much of one bound each identity holds.
#[derive(Debug)]
struct Ledger<K> {
    bound: usize,
    /// Hashed with foldhash (seeded per process): taken and given back on every request.
    held: HashMap<K, usize, foldhash::fast::RandomState>,
}

impl<K: Clone + Eq + std::hash::Hash> Ledger<K> {
    fn new(bound: usize) -> Self {
        Ledger {
            bound,
            held: HashMap::default(),
        }
    }

    /// The share of each of `holders` identities: the bound divided among them, rounded up,
    /// at least one.
    fn share_among(&self, holders: usize) -> usize {
        self.bound.div_ceil(holders.max(1)).max(1)
    }

    /// One more for `who`, unless it already holds its share, counted as if it held one: one
    /// holding none (most requests find their identity so) may always take one.
    fn take(&mut self, who: &K) -> Result<(), OverShare> {
        let share = self.share_among(self.held.len());
        match self.held.get_mut(who) {
            Some(held) if *held >= share => Err(OverShare { held: *held, share }),
            Some(held) => {
                *held += 1;
                Ok(())
            }
            None => {
                self.held.insert(who.clone(), 1);
                Ok(())
            }
        }
    }

    fn give_back(&mut self, who: &K) {
        if let Some(held) = self.held.get_mut(who) {
            *held -= 1;
            if *held == 0 {
                self.held.remove(who);
            }
        }
    }

    /// The identities holding any, and the share each has now.
    fn figures(&self) -> (usize, usize) {
        (self.held.len(), self.share_among(self.held.len()))
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
    requests: Mutex<Ledger<Identity>>,
    watches: Mutex<Ledger<Identity>>,
    refused_requests: AtomicU64,
    refused_watches: AtomicU64,
    /// Shared with the connection layer of the API's listener.
    pub connections: Arc<ConnectionCounts>,
}

/// A request or watch counted against its identity until dropped.
pub(super) struct Permit {
    fairness: Arc<Fairness>,
    held: Held,
    who: Identity,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.fairness.ledger(self.held).give_back(&self.who);
    }
}

impl Fairness {
    pub fn new(shares: FairShares) -> Fairness {
        Fairness {
            shares,
            requests: Mutex::new(Ledger::new(shares.max_requests_in_flight)),
            watches: Mutex::new(Ledger::new(shares.max_watches)),
            refused_requests: AtomicU64::new(0),
            refused_watches: AtomicU64::new(0),
            connections: Arc::default(),
        }
    }

    pub fn shares(&self) -> FairShares {
        self.shares
    }

    fn ledger(&self, held: Held) -> MutexGuard<'_, Ledger<Identity>> {
        match held {
            Held::Requests => &self.requests,
            Held::Watches => &self.watches,
        }
        .lock()
        .unwrap_or_else(|e| e.into_inner())
    }

    fn refusals(&self, held: Held) -> &AtomicU64 {
        match held {
            Held::Requests => &self.refused_requests,
            Held::Watches => &self.refused_watches,
        }
    }

    fn take(self: &Arc<Self>, held: Held, who: Identity) -> Result<Permit, Refused> {
        let taken = self.ledger(held).take(&who);
        match taken {
            Ok(()) => Ok(Permit {
                fairness: self.clone(),
                held,
                who,
            }),
            Err(over) => {
                self.refusals(held).fetch_add(1, Ordering::Relaxed);
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
            let (holders, share) = self.ledger(held).figures();
            ShareFigures {
                name: held.as_str(),
                bound,
                holders,
                share,
                refused: self.refusals(held).load(Ordering::Relaxed),
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

#[derive(Deserialize, Default)]
struct WatchQuery {
    watch: Option<String>,
}

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
            layer: self.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub(super) struct Share<S> {
    layer: ShareLayer,
    inner: S,
}

impl ShareLayer {
    /// Counts `request` against its identity's share and has `inner` answer it, or refuses
    /// it: what [`Share`] does, and the per-request layer where nothing runs between them.
    pub(super) fn count<S>(&self, mut request: Request, inner: &mut S) -> Counted<S::Future>
    where
        S: Service<Request, Response = Response, Error = Infallible>,
    {
        let ShareLayer { fairness, rule } = self;
        let held = rule.held(&request);
        let permit = match fairness.take(held, Identity::of(&request)) {
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
        self.layer.count(request, &mut self.inner)
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
        // An invalid `watch` is the handler's 400; here it is no watch. A query that neither
        // spells `watch` nor encodes any character cannot name it: most requests are told so
        // without decoding their query.
        let query = request.uri().query().unwrap_or("");
        let watch = (spells(query, "watch") || query.contains('%'))
            && axum::extract::Query::<WatchQuery>::try_from_uri(request.uri())
                .ok()
                .and_then(|q| super::watch::is_watch(q.0.watch.as_deref()).ok())
                .unwrap_or(false);
        // A log is a stream too, as long as its pods log: it holds a watch's place.
        let log = request
            .extensions()
            .get::<RouteMatch>()
            .is_some_and(|route| super::logs::is_log_route(route.template()));
        if watch || log {
            Held::Watches
        } else {
            Held::Requests
        }
    }

    fn refused(&self, refused: Refused) -> Response {
        ApiError::from(refused).into_response()
    }
}

/// Whether `query` has `word` anywhere in it: a plain scan, where `str::contains` prepares a
/// searcher that costs more than a short query's whole scan (every request asks this).
pub(super) fn spells(query: &str, word: &str) -> bool {
    query
        .as_bytes()
        .windows(word.len())
        .any(|window| window == word.as_bytes())
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
    fn a_query_spells_a_word_anywhere_in_it() {
        for (query, spelled) in [
            ("watch=true", true),
            ("namespace=ns&watch=1", true),
            ("labelSelector=watchful", true),
            ("wat", false),
            ("", false),
            ("namespace=ns", false),
            ("watc=h", false),
        ] {
            assert_eq!(spells(query, "watch"), spelled, "{query}");
            assert_eq!(spells(query, "watch"), query.contains("watch"), "{query}");
        }
    }

    #[test]
    fn alone_an_identity_may_hold_the_whole_bound() {
        let mut ledger = Ledger::new(4);
        for _ in 0..4 {
            ledger.take(&"hog").unwrap();
        }
        assert_eq!(ledger.take(&"hog"), Err(OverShare { held: 4, share: 4 }));
        assert_eq!(ledger.figures(), (1, 4));
    }

    #[test]
    fn another_identity_is_served_as_if_the_hog_were_not_there() {
        let mut ledger = Ledger::new(4);
        for _ in 0..4 {
            ledger.take(&"hog").unwrap();
        }
        // The newcomer's share is half the bound whatever the hog holds.
        ledger.take(&"quiet").unwrap();
        ledger.take(&"quiet").unwrap();
        assert_eq!(ledger.take(&"quiet"), Err(OverShare { held: 2, share: 2 }));
        // The hog is past its share now, and stays refused until it is back under it.
        assert_eq!(ledger.take(&"hog"), Err(OverShare { held: 4, share: 2 }));
        ledger.give_back(&"hog");
        ledger.give_back(&"hog");
        assert_eq!(ledger.take(&"hog"), Err(OverShare { held: 2, share: 2 }));
        ledger.give_back(&"hog");
        ledger.take(&"hog").unwrap();
        assert_eq!(ledger.figures(), (2, 2));
    }

    #[test]
    fn shares_round_up_and_never_fall_to_zero() {
        let mut ledger = Ledger::new(3);
        for who in ["a", "b"] {
            ledger.take(&who).unwrap();
        }
        // Three holders of 3: one each; a fourth still gets one.
        ledger.take(&"c").unwrap();
        assert_eq!(ledger.take(&"a"), Err(OverShare { held: 1, share: 1 }));
        ledger.take(&"d").unwrap();
        assert_eq!(ledger.figures(), (4, 1));
        // Two holders of 3: two each (rounded up).
        ledger.give_back(&"c");
        ledger.give_back(&"d");
        ledger.take(&"a").unwrap();
        assert_eq!(ledger.take(&"a"), Err(OverShare { held: 2, share: 2 }));
    }

    #[test]
    fn an_identity_that_gives_everything_back_is_forgotten() {
        let mut ledger = Ledger::new(10);
        ledger.take(&"a").unwrap();
        ledger.take(&"a").unwrap();
        ledger.give_back(&"a");
        ledger.give_back(&"a");
        ledger.give_back(&"a");
        assert!(ledger.held.is_empty());
        assert_eq!(ledger.figures(), (0, 10));
    }

    #[test]
    fn permits_count_until_dropped_and_refusals_are_counted_by_kind() {
        let fairness = Arc::new(Fairness::new(FairShares {
            max_requests_in_flight: 1,
            max_watches: 2,
            ..FairShares::default()
        }));
        let who = || Identity::Address([127, 0, 0, 2].into());
        let first = fairness.take(Held::Watches, who()).ok().unwrap();
        let _second = fairness.take(Held::Watches, who()).ok().unwrap();
        let refused =
            ApiError::from(fairness.take(Held::Watches, who()).err().unwrap()).into_response();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "1");
        // Requests are another bound: a watch hog may still read.
        let _request = fairness.take(Held::Requests, who()).ok().unwrap();
        drop(first);
        let _again = fairness.take(Held::Watches, who()).ok().unwrap();
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
