//! `/metrics` in the Prometheus/OpenMetrics text format: requests by route template, method
//! and code; request durations; and, read from the informers at scrape time, objects per
//! cache, watch events by kind and type, watch restarts and relists, seconds since each cache
//! last heard from the apiserver; open `watch=true` answers and the events sent on them;
//! the Kubernetes API's kept list answers (bytes, hits, misses); build info.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::AppState;
use super::fairness::{Fairness, ShareFigures};
use super::kubeapi::{AnswerFigures, Answers};
use biz::Workloads;
use k8sdao::Source;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: std::borrow::Cow<'static, str>,
}

/// Counts one open watch answer and the events sent on it; the count drops with the guard,
/// whether the client left or the server ended the stream.
pub(super) struct WatchGuard {
    open: Gauge,
    events: Counter,
}

impl WatchGuard {
    pub(super) fn sent(&self) {
        self.events.inc();
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// A route's histogram and, for one method and code, its counter: clones share the values the
/// families hold.
type RouteHandles = (Histogram, Counter);
/// Route template -> (method, code) -> handles; bounded by the routes served. Read on every
/// request: foldhash, not SipHash.
type HandlesByRoute = HashMap<
    String,
    HashMap<(&'static str, u16), RouteHandles, foldhash::fast::RandomState>,
    foldhash::fast::RandomState,
>;

/// One route's handles by method and code, kept with the route: a route's requests have a
/// few of them (bounded by the methods labelled and the codes answered), found by a scan.
#[derive(Debug, Default)]
pub(super) struct RouteSeries(RwLock<Vec<(&'static str, u16, RouteHandles)>>);

/// HTTP allows any token as a method: a client inventing methods must not invent series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    handles: RwLock<HandlesByRoute>,
    watches: Family<KindLabels, Gauge>,
    watch_events: Family<KindLabels, Counter>,
    startup: Arc<OnceLock<Startup>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Reads the informers' states on each scrape, so the figures are never out of date.
struct InformerCollector(Arc<Workloads<Source>>);

impl std::fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformerCollector")
    }
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let states = self.0.source().informer_states();
        let now = SystemTime::now();
        let gauge = |encoder: &mut DescriptorEncoder,
                     name: &str,
                     help: &str,
                     value: &dyn Fn(&confk8s::InformerState) -> f64| {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for s in &states {
                ConstGauge::new(value(s))
                    .encode(family.encode_family(&[("kind", s.kind.as_str())])?)?;
            }
            Ok::<_, std::fmt::Error>(())
        };
        gauge(
            &mut encoder,
            "cache_objects",
            "Objects in each cache",
            &|s| s.objects as f64,
        )?;
        gauge(
            &mut encoder,
            "informer_synced",
            "1 once the cache has its first full list",
            &|s| f64::from(u8::from(s.synced)),
        )?;
        gauge(
            &mut encoder,
            "informer_connected",
            "1 while the watch is established",
            &|s| f64::from(u8::from(s.connected)),
        )?;
        gauge(
            &mut encoder,
            "informer_streaming_lists",
            "1 when the cache gets its lists streamed (sendInitialEvents), 0 in pages",
            &|s| f64::from(u8::from(s.streaming_lists)),
        )?;
        gauge(
            &mut encoder,
            "informer_protobuf_lists",
            "1 when the cache's last list came in protobuf, 0 in JSON",
            &|s| f64::from(u8::from(s.protobuf_lists)),
        )?;
        gauge(
            &mut encoder,
            "informer_first_list_seconds",
            "From the watch's start to its first list's end: the answer, its decoding, the records",
            &|s| s.first_sync.map_or(f64::NAN, |f| f.listed.as_secs_f64()),
        )?;
        gauge(
            &mut encoder,
            "informer_first_index_seconds",
            "The first list's records put in the index",
            &|s| s.first_sync.map_or(f64::NAN, |f| f.indexed.as_secs_f64()),
        )?;
        gauge(
            &mut encoder,
            "cache_last_heard_seconds",
            "Seconds since the cache last heard from the apiserver",
            &|s| {
                s.last_heard
                    .and_then(|t| now.duration_since(t).ok())
                    .map_or(f64::NAN, |d| d.as_secs_f64())
            },
        )?;
        let mut events = encoder.encode_descriptor(
            "watch_events",
            "Changes applied to each cache, by type",
            None,
            MetricType::Counter,
        )?;
        for s in &states {
            for (kind, value) in [
                ("added", s.added),
                ("updated", s.updated),
                ("deleted", s.deleted),
            ] {
                ConstCounter::new(value)
                    .encode(events.encode_family(&[("kind", s.kind.as_str()), ("type", kind)])?)?;
            }
        }
        let mut counter =
            |name: &str, help: &str, value: &dyn Fn(&confk8s::InformerState) -> u64| {
                let mut family =
                    encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                for s in &states {
                    ConstCounter::new(value(s))
                        .encode(family.encode_family(&[("kind", s.kind.as_str())])?)?;
                }
                Ok::<_, std::fmt::Error>(())
            };
        counter(
            "watch_restarts",
            "Watch failures, each followed by a restart with backoff",
            &|s| s.errors,
        )?;
        counter(
            "watch_relists",
            "Full lists, the first one included",
            &|s| s.relists,
        )?;
        Ok(())
    }
}

/// How long each part of start-up took: the server measures it, `/metrics` tells it, so a
/// slow start names its part (with each informer's `informer_first_*_seconds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Startup {
    /// The client built, the apiserver answering, its `/version` read.
    pub connect: Duration,
    /// With `--auth delegated`: our own review rights checked, the RBAC watches started.
    pub auth: Duration,
    /// The caches registered, each kind's access reviewed, the informers started (the typed
    /// kinds' first, so their lists run during the reviews).
    pub start: Duration,
    /// Until every informer had its first list in its index.
    pub sync: Duration,
    /// The routes built and the listener bound.
    pub bind: Duration,
}

impl Startup {
    fn phases(&self) -> [(&'static str, Duration); 5] {
        [
            ("connect", self.connect),
            ("auth", self.auth),
            ("start", self.start),
            ("sync", self.sync),
            ("bind", self.bind),
        ]
    }
}

/// Tells [`Startup`] once the server has kept it.
struct StartupCollector(Arc<OnceLock<Startup>>);

impl std::fmt::Debug for StartupCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartupCollector")
    }
}

impl Collector for StartupCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(startup) = self.0.get() else {
            return Ok(());
        };
        let mut family = encoder.encode_descriptor(
            "startup_seconds",
            "How long each part of start-up took, in order",
            None,
            MetricType::Gauge,
        )?;
        for (phase, took) in startup.phases() {
            ConstGauge::new(took.as_secs_f64())
                .encode(family.encode_family(&[("phase", phase)])?)?;
        }
        Ok(())
    }
}

/// Reads what `--auth delegated` has asked the apiserver, on each scrape.
struct ReviewCollector(Arc<confk8s::Reviewer>);

impl std::fmt::Debug for ReviewCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReviewCollector")
    }
}

impl Collector for ReviewCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = self.0.counts();
        for (name, help, value) in [
            (
                "auth_token_reviews",
                "TokenReviews sent to the apiserver, refreshes included",
                &counts.token_reviews,
            ),
            (
                "auth_token_reviews_refreshed",
                "TokenReviews sent ahead of a cached answer's expiry, for tokens in use",
                &counts.token_reviews_refreshed,
            ),
            (
                "auth_token_reviews_throttled",
                "Requests answered 429 because their address's bound on TokenReviews was reached",
                &counts.token_reviews_throttled,
            ),
            (
                "auth_access_reviews",
                "SubjectAccessReviews sent to the apiserver",
                &counts.access_reviews,
            ),
            (
                "auth_access_reviews_skipped",
                "Accesses RBAC refused with no SubjectAccessReview sent, the user's budget spent",
                &counts.access_reviews_skipped,
            ),
            (
                "auth_access_allowed_locally",
                "Accesses RBAC allowed, evaluated in memory",
                &counts.access_allowed_locally,
            ),
        ] {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value.load(Relaxed)).encode(family)?;
        }
        Ok(())
    }
}

/// A gauge's name, help, and value from a share's figures.
type ShareGauge = (&'static str, &'static str, fn(&ShareFigures) -> usize);

/// Reads the fair shares and their refusals, on each scrape: by kind of share and reason,
/// never by identity (their number has no bound).
struct FairnessCollector(Arc<Fairness>);

impl std::fmt::Debug for FairnessCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FairnessCollector")
    }
}

impl Collector for FairnessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let figures = self.0.figures();
        let gauges: [ShareGauge; 3] = [
            (
                "fair_share_bound",
                "What is shared among identities (maxRequestsInFlight, maxWatches)",
                |f| f.bound,
            ),
            (
                "fair_share_identities",
                "Identities (users, or client addresses) holding any",
                |f| f.holders,
            ),
            (
                "fair_share",
                "What each identity may hold now: the bound divided among those holding any",
                |f| f.share,
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for f in &figures {
                ConstGauge::new(i64::try_from(value(f)).unwrap_or(i64::MAX))
                    .encode(family.encode_family(&[("share", f.name)])?)?;
            }
        }
        let connections = &self.0.connections;
        let mut family = encoder.encode_descriptor(
            "fair_share_rejections",
            "Refusals of a client past its share, by reason: requests and watches (429), \
             connection_closed (one of the client holding the most connections, for another \
             client), connection_refused (a new one of the client holding the most, all busy)",
            None,
            MetricType::Counter,
        )?;
        let rejections = figures.iter().map(|f| (f.name, f.refused)).chain([
            (
                "connection_closed",
                connections.closed_for_another.load(Relaxed),
            ),
            ("connection_refused", connections.refused.load(Relaxed)),
        ]);
        for (reason, count) in rejections {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }
        Ok(())
    }
}

/// Reads the Kubernetes API's kept answers, on each scrape.
struct AnswersCollector(Arc<Answers>);

impl std::fmt::Debug for AnswersCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswersCollector")
    }
}

impl Collector for AnswersCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let figures: AnswerFigures = self.0.figures();
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for (name, help, value) in [
            (
                "kube_answers_kept_bytes",
                "Bytes of the Kubernetes API's list answers kept, with their keys",
                figures.bytes,
            ),
            (
                "kube_answers_budget_bytes",
                "What the kept answers may hold (keptAnswerBytes)",
                figures.budget,
            ),
            (
                "kube_answers_kept",
                "Kubernetes API list answers kept",
                figures.answers,
            ),
        ] {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(as_i64(value)).encode(family)?;
        }
        for (name, help, value) in [
            (
                "kube_answers_hits",
                "Kubernetes API lists answered with a kept answer",
                figures.hits,
            ),
            (
                "kube_answers_misses",
                "Kubernetes API lists built with none kept for their question and state",
                figures.misses,
            ),
            (
                "kube_answers_awaited",
                "Kubernetes API lists that waited for another caller's build of the same answer",
                figures.awaited,
            ),
        ] {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(family)?;
        }
        Ok(())
    }
}

impl Metrics {
    pub(crate) fn new(
        workloads: Arc<Workloads<Source>>,
        reviewer: Option<Arc<confk8s::Reviewer>>,
        fairness: Arc<Fairness>,
        answers: Arc<Answers>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("k8sailor");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests answered", requests.clone());
        let durations = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 4.0, 10))
        });
        registry.register(
            "http_request_duration_seconds",
            "Time to answer a request",
            durations.clone(),
        );
        let watches = Family::<KindLabels, Gauge>::default();
        registry.register(
            "api_watches",
            "Open watch=true answers, by the kind watched",
            watches.clone(),
        );
        let watch_events = Family::<KindLabels, Counter>::default();
        registry.register(
            "api_watch_events",
            "Events sent on watch=true answers, by the kind watched",
            watch_events.clone(),
        );
        registry.register(
            "build",
            "Build information",
            Info::new(vec![(
                "version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            )]),
        );
        let startup = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(StartupCollector(startup.clone())));
        registry.register_collector(Box::new(InformerCollector(workloads)));
        registry.register_collector(Box::new(FairnessCollector(fairness)));
        registry.register_collector(Box::new(AnswersCollector(answers)));
        if let Some(reviewer) = reviewer {
            registry.register_collector(Box::new(ReviewCollector(reviewer)));
        }
        Metrics {
            registry,
            requests,
            durations,
            handles: RwLock::default(),
            watches,
            watch_events,
            startup,
        }
    }

    /// Keeps how start-up went; the first one kept is the one told.
    pub fn keep_startup(&self, startup: Startup) {
        let _ = self.startup.set(startup);
    }

    /// Counts a watch answer of `kind` as open until the guard drops.
    pub(super) fn watch_opened(&self, kind: std::borrow::Cow<'static, str>) -> WatchGuard {
        let labels = KindLabels { kind };
        let open = self.watches.get_or_create(&labels).clone();
        open.inc();
        WatchGuard {
            open,
            events: self.watch_events.get_or_create(&labels).clone(),
        }
    }

    /// Counts and times a request under its route template, never its raw path.
    pub(super) fn observe(&self, route: &str, method: &Method, code: u16, seconds: f64) {
        let method = method_label(method);
        // The families' own lookup builds and hashes owned label sets; a request needs only
        // a read of this map, keyed by what the request already has, and counts through
        // the handles where they are (a clone would be two more shared reference counts).
        {
            let handles = self.handles.read().unwrap_or_else(|e| e.into_inner());
            if let Some((duration, requests)) = handles
                .get(route)
                .and_then(|by_method| by_method.get(&(method, code)))
            {
                duration.observe(seconds);
                requests.inc();
                return;
            }
        }
        let (duration, requests) = self.handles_of(route, method, code);
        duration.observe(seconds);
        requests.inc();
        self.handles
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(route.to_string())
            .or_default()
            .insert((method, code), (duration, requests));
    }

    /// [`Metrics::observe`] for a route that keeps its own handles (`series`): found among
    /// the few its requests have had, without its template hashed.
    pub(super) fn observe_in(
        &self,
        series: &RouteSeries,
        route: &str,
        method: &Method,
        code: u16,
        seconds: f64,
    ) {
        let method = method_label(method);
        let count = |(duration, requests): &RouteHandles| {
            duration.observe(seconds);
            requests.inc();
        };
        let of_request = |(m, c, _): &&(&str, u16, RouteHandles)| *c == code && *m == method;
        {
            let known = series.0.read().unwrap_or_else(|e| e.into_inner());
            if let Some((_, _, handles)) = known.iter().find(of_request) {
                return count(handles);
            }
        }
        // Looked for again under the write lock: two first requests push one series once.
        let mut known = series.0.write().unwrap_or_else(|e| e.into_inner());
        match known.iter().find(of_request) {
            Some((_, _, handles)) => count(handles),
            None => {
                let handles = self.handles_of(route, method, code);
                count(&handles);
                known.push((method, code, handles));
            }
        }
    }

    /// The handles of one series, made on its first request.
    fn handles_of(&self, route: &str, method: &'static str, code: u16) -> RouteHandles {
        (
            self.durations
                .get_or_create(&RouteLabels {
                    route: route.to_string(),
                    method: method.to_string(),
                })
                .clone(),
            self.requests
                .get_or_create(&RequestLabels {
                    route: route.to_string(),
                    method: method.to_string(),
                    code: code.to_string(),
                })
                .clone(),
        )
    }

    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus metrics, OpenMetrics text format", body = String,
        content_type = "application/openmetrics-text")))]
pub async fn serve(State(state): State<AppState>) -> Response {
    match state.metrics.render() {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => super::ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode metrics",
        )
        .into_response(),
    }
}
