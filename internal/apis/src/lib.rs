//! The HTTP API: axum routes under the configured prefix (default `/k8sailor/v0`), the answer
//! envelope, and the middleware (tracing, gzip, timeout, CORS, the Host check).

mod auth;
mod cors;
mod dashboard;
mod dispatch;
mod docs;
mod edge;
mod envelope;
mod fairness;
mod health;
mod host_check;
mod kinds;
mod kubeapi;
mod logs;
mod metrics;
mod routes;
mod watch;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use futures::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder};
use tower_http::compression::predicate::Predicate;
use tower_http::compression::{Compression, CompressionLayer};
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::AuthMode;
pub use cors::{AllowedOrigins, OriginError};
use dispatch::RouteMatch;
pub use edge::{BodyLimits, MAX_QUERY_BYTES};
pub use envelope::{ApiError, Envelope};
use fairness::ShareLayer;
pub use fairness::{Caller, ConnectionCounts, FairShares, Fairness, Holding};
pub use health::Health;
pub use host_check::{AllowedHosts, HostError};
pub use kubeapi::DEFAULT_KEPT_ANSWER_BYTES;
pub use logs::LogLimits;
pub use metrics::{Metrics, Startup};

use biz::Workloads;
use k8sdao::Source;

#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where the API is mounted, e.g. `/k8sailor/v0`.
    pub prefix: String,
    /// Origins allowed by CORS: empty for none, `*` for any (then without credentials).
    pub cors_allowed_origins: AllowedOrigins,
    /// Names served besides loopback ones and the listen address while auth is none.
    pub allowed_hosts: AllowedHosts,
    pub request_timeout: Duration,
    /// Largest request body and longest time it may take to arrive.
    pub body: BodyLimits,
    /// Who may call the API; with `Delegated`, the state must hold a reviewer.
    pub auth: AuthMode,
    /// Serve the built-in dashboard at `/`.
    pub dashboard: bool,
    /// What one merged log may follow.
    pub logs: LogLimits,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("invalid prefix {0:?}: it must start with '/' and not end with one")]
    Prefix(String),
    #[error("cannot render the OpenAPI description: {0}")]
    OpenApi(String),
    #[error("auth delegated needs a Kubernetes client to review requests with")]
    NoReviewer,
    #[error("cannot build the route table")]
    Routes(#[source] dispatch::TableError),
}

/// Cancelled when the server closes the connection a request came on (to make room for
/// another, or a client that stopped reading): what a stream that outlives its answer, a
/// connection switched to another protocol, ends with. The connection layer puts it among
/// the extensions of each request that may switch.
#[derive(Clone, Debug)]
pub struct ConnectionEnd(pub CancellationToken);

/// What every handler and middleware shares; cloned per request and per layer, so it is one
/// reference count, not one per part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub workloads: Arc<Workloads<Source>>,
    pub health: Arc<Health>,
    pub metrics: Metrics,
    /// Ends every watch stream once cancelled: shutdown waits for no watcher.
    pub streams: CancellationToken,
    /// Reviews callers' tokens and requests with the apiserver (`--auth delegated`).
    pub reviewer: Option<Arc<confk8s::Reviewer>>,
    /// Each client's share of requests, watches and connections.
    pub fairness: Arc<Fairness>,
    /// How often a quiet stream of Server-Sent Events gets a keep-alive comment.
    pub keep_alive: Duration,
    /// The apiserver's `/version`, read once at start: the Kubernetes API's `/version`.
    pub kube_version: std::sync::OnceLock<serde_json::Value>,
    /// The Kubernetes API's list answers kept per version of their kind.
    pub(crate) answers: Arc<kubeapi::Answers>,
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    /// `kept_answer_bytes` bounds the Kubernetes API's kept list answers (0: none kept).
    pub fn new(
        workloads: Arc<Workloads<Source>>,
        reviewer: Option<Arc<confk8s::Reviewer>>,
        shares: FairShares,
        keep_alive: Duration,
        kept_answer_bytes: usize,
    ) -> AppState {
        let fairness = Arc::new(Fairness::new(shares));
        let answers = Arc::new(kubeapi::Answers::new(kept_answer_bytes));
        AppState(Arc::new(Shared {
            metrics: Metrics::new(
                workloads.clone(),
                reviewer.clone(),
                fairness.clone(),
                answers.clone(),
            ),
            answers,
            workloads,
            health: Arc::new(Health::default()),
            streams: CancellationToken::new(),
            reviewer,
            fairness,
            keep_alive,
            kube_version: std::sync::OnceLock::new(),
        }))
    }

    /// Keeps the apiserver's `/version` answer, for the Kubernetes API's `/version`.
    pub fn keep_kube_version(&self, version: &impl serde::Serialize) {
        // The first answer kept is the one served; the server keeps it once, at start.
        if let Ok(version) = serde_json::to_value(version) {
            let _ = self.kube_version.set(version);
        }
    }

    /// When a watch opened now ends: at shutdown, or after its randomised lifetime
    /// (`minRequestTimeout` times [1, 2)), so clients spread over replicas. Either way the
    /// stream ends cleanly and the client resumes from the last version it got.
    fn watch_end(&self) -> impl Future<Output = ()> + Send + 'static {
        let (shutdown, lifetime) = (self.streams.clone(), self.fairness.watch_lifetime());
        async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(lifetime) => {}
            }
        }
    }
}

/// gzip's fastest level: each poll of a compressed answer compresses one output buffer's
/// worth, which at the default level took up to 10 ms of a worker on a large list (measured
/// over 50,000 pods); JSON lists still shrink several times over.
const COMPRESSION: tower_http::CompressionLevel = tower_http::CompressionLevel::Fastest;

/// Answers smaller than this are not worth compressing (tower-http's default).
const MIN_COMPRESSED_BYTES: u64 = 32;

/// The types never compressed: tower-http's default exclusions (gRPC, images, event
/// streams), then the streams we write a line at a time (a compressor would hold them
/// back). Each is a prefix of the `Content-Type`, `but` a prefix that is compressed anyway.
const UNCOMPRESSED_TYPES: [(&str, Option<&str>); 5] = [
    ("application/grpc", Some("application/grpc-web")),
    ("image/", Some("image/svg+xml")),
    ("text/event-stream", None),
    (watch::NDJSON, None),
    (logs::LOG_TEXT, None),
];

/// Which answers are compressed (for a client that accepts it): those of
/// [`MIN_COMPRESSED_BYTES`] or more (or of unknown size) whose type is none of
/// [`UNCOMPRESSED_TYPES`] and that are not a Kubernetes API watch. tower-http's
/// `DefaultPredicate` and one `NotForContentType` per type, in one pass: the `Content-Type`
/// looked up once, not once per type, on every answer.
#[derive(Clone, Copy, Debug)]
struct Compressible;

impl Predicate for Compressible {
    fn should_compress<B: http_body::Body>(&self, response: &Response<B>) -> bool {
        let headers = response.headers();
        Compressible::compresses(
            response,
            headers.get(header::CONTENT_LENGTH),
            headers.get(header::CONTENT_TYPE),
        )
    }
}

impl Compressible {
    /// [`Compressible`]'s rule, given the answer's `Content-Length` and `Content-Type`.
    fn compresses<B: http_body::Body>(
        response: &Response<B>,
        content_length: Option<&HeaderValue>,
        content_type: Option<&HeaderValue>,
    ) -> bool {
        let size = response.body().size_hint().exact().or_else(|| {
            content_length
                .and_then(|h| h.to_str().ok())
                .and_then(|value| value.parse().ok())
        });
        if size.is_some_and(|size| size < MIN_COMPRESSED_BYTES)
            || kubeapi::is_streamed(response.extensions())
        {
            return false;
        }
        let content_type = content_type
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        !UNCOMPRESSED_TYPES.iter().any(|(prefix, but)| {
            content_type.starts_with(prefix) && !but.is_some_and(|b| content_type.starts_with(b))
        })
    }

    /// Whether tower-http would tell `response` `Vary: Accept-Encoding` had it been asked to
    /// compress it: one it would compress (neither encoded nor a range already) that does
    /// not say so yet; and whether it has a `Vary` of its own. The headers are read in one
    /// walk: a lookup by name hashes it, and four lookups cost more than a walk over an
    /// answer's few headers.
    fn would_vary(response: &Response) -> VaryByEncoding {
        let (mut content_length, mut content_type, mut listed) = (None, None, false);
        for (name, value) in response.headers() {
            if name == header::CONTENT_ENCODING
                || name == header::CONTENT_RANGE
                || (name == header::VARY && names_encoding(value))
            {
                return VaryByEncoding::NOT_ADDED;
            } else if name == header::CONTENT_TYPE {
                content_type = Some(value);
            } else if name == header::CONTENT_LENGTH {
                content_length = Some(value);
            } else if name == header::VARY {
                listed = true;
            }
        }
        VaryByEncoding {
            added: Compressible::compresses(response, content_length, content_type),
            has_vary: listed,
        }
    }
}

/// Whether an answer's `Vary` gets `Accept-Encoding` from [`vary`], and, read only then,
/// whether it has a `Vary` already (the name is then added to it, not written with
/// `Origin` as one new field).
#[derive(Clone, Copy, Debug)]
struct VaryByEncoding {
    added: bool,
    has_vary: bool,
}

impl VaryByEncoding {
    /// Nothing to add: the answer is encoded or ranged, says so already, or gzip saw it.
    const NOT_ADDED: VaryByEncoding = VaryByEncoding {
        added: false,
        has_vary: false,
    };
}

/// Writes what a served answer varies by beyond its handler's `Vary`: `Accept-Encoding`
/// where tower-http would have told it (`identity`: gzip is on and the client accepted no
/// encoding, so [`Gzip`] passed the answer by; tower-http tells those it negotiated itself),
/// and `Origin` while CORS names origins. An answer without a `Vary` that varies by both
/// gets them in one field written once, not one name written and the other merged into it.
fn vary(response: &mut Response, identity: bool, by_origin: bool) {
    let encoding = if identity {
        Compressible::would_vary(response)
    } else {
        VaryByEncoding::NOT_ADDED
    };
    let headers = response.headers_mut();
    if encoding.added && by_origin && !encoding.has_vary {
        headers.append(header::VARY, cors::BY_ENCODING_AND_ORIGIN);
        return;
    }
    if encoding.added {
        headers.append(header::VARY, HeaderValue::from(header::ACCEPT_ENCODING));
    }
    if by_origin {
        cors::vary_by_origin(headers);
    }
}

/// gzip for a client that accepts an encoding: tower-http's `Compression` with
/// [`Compressible`]. A request that accepts none (no `Accept-Encoding`) goes straight to
/// `plain`, its answer told `Vary: Accept-Encoding` where tower-http would tell it (a
/// compressible answer, by [`vary`]): the same answer, without its body wrapped and boxed
/// again on every request.
#[derive(Clone)]
struct Gzip<S> {
    compressing: Compression<S, Compressible>,
    plain: S,
}

impl<S> Service<Request> for Gzip<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GzipFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Either may be called next.
        std::task::ready!(self.compressing.poll_ready(cx))?;
        self.plain.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> GzipFuture<S::Future> {
        if request.headers().contains_key(header::ACCEPT_ENCODING) {
            GzipFuture::Negotiated(self.compressing.call(request))
        } else {
            GzipFuture::Identity(self.plain.call(request))
        }
    }
}

enum GzipFuture<F> {
    Negotiated(tower_http::compression::ResponseFuture<F, Compressible>),
    Identity(F),
}

impl<F> Future for GzipFuture<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            GzipFuture::Negotiated(answer) => Pin::new(answer)
                .poll(cx)
                .map_ok(IntoResponse::into_response),
            GzipFuture::Identity(answer) => Pin::new(answer).poll(cx),
        }
    }
}

/// Whether a `Vary` value names `Accept-Encoding`.
fn names_encoding(vary: &HeaderValue) -> bool {
    let name = b"accept-encoding";
    vary.as_bytes()
        .windows(name.len())
        .any(|w| w.eq_ignore_ascii_case(name))
}

/// Tells API clients how old the data is while a watch is failing.
pub const STALE_HEADER: &str = "k8sailor-stale-seconds";

/// The served application: the routes behind the edge (the Host check and CORS) and the
/// layers every request meets. Each connection keeps its own, called in place.
#[derive(Clone)]
pub struct App(edge::Edge<Served>);

/// The routes with the body bounds and gzip when it is on, each answer's `Vary` written once
/// ([`vary`]); with the request log (debug only), all that boxed inside the log's layer,
/// which then writes the `Vary`.
#[derive(Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per connection, made once: the log (debug only) is the small one"
)]
enum Served {
    Direct {
        serving: Serving,
        /// CORS names origins: every answer varies by `Origin`.
        varies_by_origin: bool,
    },
    Logged(BoxCloneSyncService<Request, Response, Infallible>),
}

/// A type per choice rather than one box, so that a GET's answer gets no box here beyond the
/// routes' one ([`Routes`]).
#[derive(Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per connection, made once: boxing gzip's would add a pointer to follow on every request"
)]
enum Serving {
    Plain(edge::Bounded<Routes>),
    Gzip(Gzip<edge::Bounded<Routes>>),
}

type BoundedFuture = <edge::Bounded<Routes> as Service<Request>>::Future;

/// The answer of [`Served`]: a type of its own, since [`App`]'s future names it.
pub struct ServedFuture(ServedAnswer);

enum ServedAnswer {
    Direct {
        answering: Answering,
        varies_by_origin: bool,
    },
    Logged(BoxFuture<'static, Result<Response, Infallible>>),
}

enum Answering {
    Plain(BoundedFuture),
    Gzip(GzipFuture<BoundedFuture>),
}

impl Service<Request> for Served {
    type Response = Response;
    type Error = Infallible;
    type Future = ServedFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match self {
            Served::Direct { serving, .. } => match serving {
                Serving::Plain(served) => served.poll_ready(cx),
                Serving::Gzip(served) => served.poll_ready(cx),
            },
            Served::Logged(served) => served.poll_ready(cx),
        }
    }

    fn call(&mut self, request: Request) -> ServedFuture {
        match self {
            Served::Direct {
                serving,
                varies_by_origin,
            } => ServedFuture(ServedAnswer::Direct {
                answering: match serving {
                    Serving::Plain(served) => Answering::Plain(served.call(request)),
                    Serving::Gzip(served) => Answering::Gzip(served.call(request)),
                },
                varies_by_origin: *varies_by_origin,
            }),
            Served::Logged(served) => ServedFuture(ServedAnswer::Logged(served.call(request))),
        }
    }
}

impl Future for ServedFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (answering, varies_by_origin) = match &mut self.get_mut().0 {
            ServedAnswer::Direct {
                answering,
                varies_by_origin,
            } => (answering, *varies_by_origin),
            ServedAnswer::Logged(answer) => return answer.as_mut().poll(cx),
        };
        let (answered, identity) = match answering {
            Answering::Plain(answer) => (std::task::ready!(Pin::new(answer).poll(cx)), false),
            Answering::Gzip(GzipFuture::Identity(answer)) => {
                (std::task::ready!(Pin::new(answer).poll(cx)), true)
            }
            Answering::Gzip(answer) => (std::task::ready!(Pin::new(answer).poll(cx)), false),
        };
        let Ok(mut response) = answered;
        vary(&mut response, identity, varies_by_origin);
        Poll::Ready(Ok(response))
    }
}

impl App {
    /// `routes` with the body bounds, gzip, the optional request log and the edge around
    /// them, each once around the whole router: a layer added with `Router::layer` wraps
    /// every route on its own, and each of its levels is cloned with every request.
    fn new(routes: Routes, opts: &HttpOptions, compression: bool, cors: Option<cors::Cors>) -> App {
        let bounded = edge::Bounded::new(routes, opts.body);
        let serving = if compression {
            Serving::Gzip(Gzip {
                compressing: CompressionLayer::new()
                    .quality(COMPRESSION)
                    .compress_when(Compressible)
                    .layer(bounded.clone()),
                plain: bounded,
            })
        } else {
            Serving::Plain(bounded)
        };
        let served = Served::Direct {
            serving,
            varies_by_origin: cors.as_ref().is_some_and(cors::Cors::varies_by_origin),
        };
        // The request log line is a debug event: with debug off the layer would only cost time.
        let served = if tracing::enabled!(target: "tower_http::trace::on_response", Level::DEBUG) {
            Served::Logged(BoxCloneSyncService::new(
                ServiceBuilder::new()
                    .map_response(IntoResponse::into_response)
                    .layer(
                        TraceLayer::new_for_http()
                            .make_span_with(DefaultMakeSpan::new().level(Level::DEBUG))
                            .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
                    )
                    .service(served),
            ))
        } else {
            served
        };
        let socket_origins =
            matches!(opts.auth, AuthMode::None).then(|| opts.cors_allowed_origins.clone());
        App(edge::Edge::new(
            served,
            host_check::enforced(&opts.allowed_hosts, opts.auth),
            cors,
            socket_origins,
        ))
    }
}

impl Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = edge::EdgeFuture<ServedFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.0.call(request)
    }
}

/// What is done around each routed request.
struct PerRequest {
    state: AppState,
    timeout: Duration,
    /// API answers say how stale the cache is; probes and metrics do not.
    mark_stale: bool,
    /// The fair share, counted here when nothing (delegated auth) must run between it and
    /// this layer: each route layer is one more boxed service cloned, whole, per request.
    share: Option<ShareLayer>,
    /// The metrics handles of the Kubernetes API's paths' templates, as the route table's
    /// routes keep theirs.
    core_series: metrics::RouteSeries,
    groups_series: metrics::RouteSeries,
}

/// Everything done around each routed request, in one layer rather than one per concern: the
/// request timeout, the staleness header, and the metrics by route template. A route layer,
/// as only a routed request knows its template.
#[derive(Clone)]
struct PerRequestLayer(Arc<PerRequest>);

impl PerRequestLayer {
    fn new(
        state: AppState,
        timeout: Duration,
        mark_stale: bool,
        share: Option<ShareLayer>,
    ) -> PerRequestLayer {
        PerRequestLayer(Arc::new(PerRequest {
            state,
            timeout,
            mark_stale,
            share,
            core_series: metrics::RouteSeries::default(),
            groups_series: metrics::RouteSeries::default(),
        }))
    }
}

impl<S> Layer<S> for PerRequestLayer {
    type Service = PerRequestService<S>;

    fn layer(&self, inner: S) -> PerRequestService<S> {
        PerRequestService {
            per: self.0.clone(),
            share: self.0.share.as_ref().map(ShareLayer::counter),
            inner,
        }
    }
}

#[derive(Clone)]
struct PerRequestService<S> {
    per: Arc<PerRequest>,
    share: Option<fairness::ShareCounter>,
    inner: S,
}

impl<S> Service<Request> for PerRequestService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Timed<fairness::Counted<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let extensions = request.extensions();
        let route = if let Some(found) = extensions.get::<RouteMatch>() {
            Template::Declared(found.route().clone())
        } else if let Some(matched) = extensions.get::<MatchedPath>() {
            Template::Matched(matched.clone())
        } else {
            kubeapi::Paths::template(request.uri().path())
                .map_or(Template::Unmatched, Template::Beside)
        };
        let method = request.method().clone();
        let started = Instant::now();
        let answer = match &mut self.share {
            Some(share) => share.count(request, &mut self.inner),
            None => fairness::Counted::Uncounted(self.inner.call(request)),
        };
        Timed {
            answer,
            timer: None,
            started,
            route,
            method,
            per: self.per.clone(),
        }
    }
}

/// The route template a request is counted under: the route table's match, axum's router's,
/// or that of the Kubernetes API's paths.
enum Template {
    Declared(Arc<dispatch::Route>),
    Matched(MatchedPath),
    Beside(kubeapi::PathsTemplate),
    Unmatched,
}

/// A routed request's answer, within the request timeout, then marked stale and counted. A
/// future of its own rather than a boxed `async` block: one from memory is ready at its first
/// poll, and then neither a box nor a timer is made for it (the runtime takes its timer
/// driver's lock to drop every timer, armed or not).
struct Timed<F> {
    answer: F,
    /// Armed once the answer is not ready at its first poll.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    started: Instant,
    route: Template,
    method: axum::http::Method,
    per: Arc<PerRequest>,
}

impl<F> Future for Timed<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let response = match Pin::new(&mut this.answer).poll(cx) {
            Poll::Ready(Ok(response)) => response,
            Poll::Pending => {
                let p = &this.per;
                let deadline = this.started + p.timeout;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the request took longer than {:?}", p.timeout),
                )
                .into_response()
            }
        };
        Poll::Ready(Ok(this.finish(response)))
    }
}

impl<F> Timed<F> {
    /// The answer marked stale (API answers only) and counted under its route.
    fn finish(&self, mut response: Response) -> Response {
        let p = &self.per;
        if self.method == axum::http::Method::HEAD {
            // GET's answer without its body, as axum's router makes it of what its routes
            // answer: the refusals of the layers outside a route too (auth's, the share's).
            if let Some(length) = http_body::Body::size_hint(response.body()).exact()
                && !response.headers().contains_key(header::CONTENT_LENGTH)
            {
                response
                    .headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
            }
            *response.body_mut() = axum::body::Body::empty();
        }
        if p.mark_stale {
            let source = p.state.workloads.source();
            if source.any_disconnected()
                && let Some(age) = health::staleness(&source.informer_states())
            {
                response
                    .headers_mut()
                    .insert(STALE_HEADER, HeaderValue::from(age));
            }
        }
        let (method, code, seconds) = (
            &self.method,
            response.status().as_u16(),
            self.started.elapsed().as_secs_f64(),
        );
        let metrics = &p.state.metrics;
        match &self.route {
            Template::Declared(route) => {
                metrics.observe_in(route.series(), route.template(), method, code, seconds)
            }
            Template::Matched(matched) => metrics.observe(matched.as_str(), method, code, seconds),
            Template::Beside(template) => {
                let series = match template {
                    kubeapi::PathsTemplate::Core => &p.core_series,
                    kubeapi::PathsTemplate::Groups => &p.groups_series,
                };
                metrics.observe_in(series, template.as_str(), method, code, seconds)
            }
            Template::Unmatched => metrics.observe("unmatched", method, code, seconds),
        }
        response
    }
}

/// The probes and metrics, served by the API's router and by [`health_router`].
fn probes() -> OpenApiRouter<AppState> {
    edge::enveloped_405(
        OpenApiRouter::new()
            .routes(routes!(health::livez))
            .routes(routes!(health::readyz))
            .routes(routes!(metrics::serve)),
    )
}

/// `--health-listen`: `/livez`, `/readyz` and `/metrics` alone, for a listener of their own,
/// so that probes and scrapes never wait behind API clients: no auth, no fairness, and a
/// connection budget apart from `--max-connections`. The Host check applies as on the API's
/// listener (the probes are exempt from it there too).
pub fn health_router(state: AppState, opts: &HttpOptions) -> App {
    let per_request = PerRequestLayer::new(state.clone(), opts.request_timeout, false, None);
    let (app, _) = probes().route_layer(per_request).split_for_parts();
    let app = app
        .with_state(state)
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "{} is not served here: this listener serves /livez, /readyz and /metrics",
                    uri.path()
                ),
            )
        });
    App::new(
        Routes {
            router: app,
            original: None,
            kube_paths: None,
            mount_under_kube: None,
        },
        opts,
        false,
        None,
    )
}

/// Where the API is mounted for `--prefix`: "" at the root ("" and "/" alike), else the prefix
/// itself. The one reading of the setting, so the routes, the dashboard and the route
/// templates auth matches agree on it.
fn mount_point(prefix: &str) -> Result<&str, SetupError> {
    match prefix {
        "" | "/" => Ok(""),
        p if p.starts_with('/') && !p.ends_with('/') => Ok(p),
        p => Err(SetupError::Prefix(p.to_string())),
    }
}

pub fn router(state: AppState, opts: &HttpOptions) -> Result<App, SetupError> {
    let per_request_layer = |mark_stale, share| {
        PerRequestLayer::new(state.clone(), opts.request_timeout, mark_stale, share)
    };
    let mount = mount_point(&opts.prefix)?;
    // axum's router serves the probes, the OpenAPI document, the Kubernetes API's discovery
    // and the dashboard; the route table leaves the paths of their templates to it.
    let (beside, mut openapi) = probes()
        .route_layer(per_request_layer(false, None))
        .split_for_parts();
    let mut beside_templates: Vec<String> = openapi.paths.paths.keys().cloned().collect();
    let mut original = routes::api(mount).merge(logs::routes(opts.logs, mount));
    openapi.merge(original.take_openapi());
    let templates = routes::RouteTemplates::new(openapi.paths.paths.keys().map(String::as_str));
    docs::describe(&mut openapi);
    let openapi = bytes::Bytes::from(
        openapi
            .to_pretty_json()
            .map_err(|e| SetupError::OpenApi(e.to_string()))?,
    );
    let beside = beside.route(
        docs::OPENAPI_PATH,
        get(move || {
            let body = openapi.clone();
            async move { envelope::json_response(body) }
        })
        .fallback(edge::method_not_allowed),
    );
    beside_templates.push(docs::OPENAPI_PATH.to_string());
    // The Kubernetes API, at the root; its reads are authorized as the apiserver would, and
    // each caller's share counted inside the check, against the user it authenticated as.
    let status_shares =
        ShareLayer::new(state.fairness.clone(), kubeapi::StatusShares(state.clone()));
    let kube = served_beside(kubeapi::routes(), &mut beside_templates);
    let kube_paths = kubeapi::Paths {
        state: state.clone(),
        auth: opts.auth,
    };
    let (kube, kube_paths) = match opts.auth {
        AuthMode::None => (
            kube.route_layer(per_request_layer(true, Some(status_shares.clone()))),
            BoxCloneSyncService::new(
                per_request_layer(true, Some(status_shares)).layer(kube_paths),
            ),
        ),
        AuthMode::Delegated => {
            let check = axum::middleware::from_fn_with_state(state.clone(), kubeapi::check);
            (
                kube.route_layer(status_shares.clone())
                    .route_layer(check.clone())
                    .route_layer(per_request_layer(true, None)),
                BoxCloneSyncService::new(
                    ServiceBuilder::new()
                        .layer(per_request_layer(true, None))
                        .layer(check)
                        .layer(status_shares)
                        .service(kube_paths),
                ),
            )
        }
    };
    let beside = beside.merge(kube);
    // Outside the API's routes, so no token is asked for the page: it holds no data.
    let beside = if opts.dashboard {
        beside.merge(
            served_beside(dashboard::routes(mount), &mut beside_templates)
                .route_layer(per_request_layer(false, None)),
        )
    } else {
        beside
    };
    let beside =
        beside
            .with_state(state.clone())
            .fallback_service(axum::handler::Handler::with_state(
                routes::no_route,
                templates,
            ));
    // The original API: its route table, and what is done around each of its requests once
    // around the table. The share inside auth, so a request is counted against the user it
    // authenticated as; the per-request layer outermost, so refusals are timed and counted
    // like any answer.
    let (table, dispatch) = original
        .into_table(
            state.clone(),
            mount,
            beside_templates.iter().map(String::as_str),
        )
        .map_err(SetupError::Routes)?;
    let envelope_shares = ShareLayer::new(state.fairness.clone(), fairness::EnvelopeShares);
    let layered = match opts.auth {
        AuthMode::None => {
            OriginalLayers::Open(per_request_layer(true, Some(envelope_shares)).layer(dispatch))
        }
        AuthMode::Delegated => {
            let layer = auth::AuthLayer {
                reviewer: state.reviewer.clone().ok_or(SetupError::NoReviewer)?,
                prefix: mount.to_string(),
                scope: state.workloads.source().scope().map(str::to_string),
                workloads: state.workloads.clone(),
            };
            OriginalLayers::Delegated(BoxCloneSyncService::new(
                ServiceBuilder::new()
                    .layer(per_request_layer(true, None))
                    .layer(axum::middleware::from_fn_with_state(layer, auth::check))
                    .layer(envelope_shares)
                    .service(dispatch),
            ))
        }
    };
    Ok(App::new(
        Routes {
            router: beside,
            original: Some(OriginalRoutes { table, layered }),
            kube_paths: Some(kube_paths),
            // A prefix under /api/ (`/api/sailor`) keeps its own paths in the table.
            mount_under_kube: kubeapi::Paths::template(mount).map(|_| mount.to_string()),
        },
        opts,
        true,
        cors::Cors::new(&opts.cors_allowed_origins),
    ))
}

/// `routes` for axum's router, their templates added to `templates`.
fn served_beside<S: Clone + Send + Sync + 'static>(
    routes: Vec<(&'static str, MethodRouter<S>)>,
    templates: &mut Vec<String>,
) -> Router<S> {
    routes
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            templates.push(path.to_string());
            router.route(path, route)
        })
}

/// The original API's route table, and the layers around every request it finds.
#[derive(Clone)]
struct OriginalRoutes {
    table: dispatch::Table,
    layered: OriginalLayers,
}

/// The layers around the table's requests: without auth as they are, one future that
/// [`Routes`] boxes once; boxed as a service with delegated auth's check among them.
#[derive(Clone)]
enum OriginalLayers {
    Open(PerRequestService<dispatch::Dispatch>),
    Delegated(BoxCloneSyncService<Request, Response, Infallible>),
}

/// Where a request goes: the Kubernetes API's paths under `/api/` and `/apis/`
/// ([`kubeapi::Paths`]), the original API's route table, or axum's router for the rest.
#[derive(Clone)]
struct Routes {
    router: Router,
    original: Option<OriginalRoutes>,
    kube_paths: Option<BoxCloneSyncService<Request, Response, Infallible>>,
    /// The prefix, when it is itself under `/api/` or `/apis/`: its paths are the table's.
    mount_under_kube: Option<String>,
}

impl Routes {
    /// Whether `path` is the Kubernetes API's, not the table's (the kube paths serve it).
    fn is_kube_path(&self, path: &str) -> bool {
        kubeapi::Paths::template(path).is_some()
            && !self.mount_under_kube.as_deref().is_some_and(|mount| {
                path.strip_prefix(mount)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
    }
}

impl Service<Request> for Routes {
    type Response = Response;
    type Error = Infallible;
    /// One box whatever the path: every layer above moves this future into its own, and
    /// hyper moves theirs into its slot, on every request. A route's future is hundreds of
    /// bytes, and each copy wrote them to memory out of the L1 cache (a GET's data does not
    /// fit its 32 KiB): callgrind's cache simulation counts fewer instructions and fewer
    /// misses with the box than with the copies.
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if let Some(kube_paths) = &mut self.kube_paths {
            std::task::ready!(kube_paths.poll_ready(cx))?;
        }
        match self.original.as_mut().map(|original| &mut original.layered) {
            Some(OriginalLayers::Open(layered)) => std::task::ready!(layered.poll_ready(cx))?,
            Some(OriginalLayers::Delegated(layered)) => std::task::ready!(layered.poll_ready(cx))?,
            None => {}
        }
        Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let path = request.uri().path();
        if self.is_kube_path(path)
            && let Some(kube_paths) = &mut self.kube_paths
        {
            return kube_paths.call(request);
        }
        if let Some(original) = &mut self.original
            && let Some(found) = original.table.find(path)
        {
            request.extensions_mut().insert(found);
            return match &mut original.layered {
                OriginalLayers::Open(layered) => Box::pin(layered.call(request)),
                OriginalLayers::Delegated(layered) => layered.call(request),
            };
        }
        Box::pin(self.router.call(request))
    }
}

#[cfg(test)]
mod tests;
