//! What every request meets before its route: the Host check and CORS ([`Edge`]), bounds on
//! the query and the body ([`Bounded`]: checked before any work, so a request costs at most
//! what the limits allow), and the envelope for the answers the router and the runtime would
//! otherwise write bare: 405, 408, 413, 414, 415 (a compressed body) and a handler's panic.

use std::any::Any;
use std::convert::Infallible;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower::Service;
use utoipa_axum::router::OpenApiRouter;

use super::ApiError;
use super::cors::{Allowance, AllowedOrigins, Cors};
use super::host_check::{self, AllowedHosts};

/// Bytes of a query string. Selectors and tokens fit many times over; the cost of a list is
/// the cache's size times the selector's, so the selector's must stay small.
pub const MAX_QUERY_BYTES: usize = 8 * 1024;

/// The request-body bounds, from the settings.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Largest body accepted (`maxBodyBytes`).
    pub max_bytes: usize,
    /// Longest time the whole body may take to arrive (`bodyReadTimeout`).
    pub read_timeout: Duration,
}

/// An answer after which the connection is closed: the body may not have been read, so the
/// next request's start is unknown.
fn closing(error: ApiError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// What the edge does for every request, in one pass around everything else and cloned per
/// request as one reference count: the `Host` check (DNS rebinding, while auth is none),
/// CORS (preflights answered here, each answer's CORS headers added), and the 500 of a
/// handler that panicked.
#[derive(Clone)]
pub(super) struct Edge<S> {
    rules: Arc<EdgeRules>,
    /// Each connection's own, as its App is.
    last_host: host_check::LastAllowed,
    inner: S,
}

struct EdgeRules {
    /// None when the check is off (`auth: delegated`, or `allowedHosts` is `*`).
    hosts: Option<AllowedHosts>,
    /// None when CORS is off.
    cors: Option<Cors>,
    /// While auth is none, the pages that may open a WebSocket besides the server's own
    /// (CORS's origins); None with delegated auth, where a socket needs a token no page has
    /// by itself.
    socket_origins: Option<AllowedOrigins>,
}

impl<S> Edge<S> {
    pub(super) fn new(
        inner: S,
        hosts: Option<AllowedHosts>,
        cors: Option<Cors>,
        socket_origins: Option<AllowedOrigins>,
    ) -> Edge<S> {
        Edge {
            rules: Arc::new(EdgeRules {
                hosts,
                cors,
                socket_origins,
            }),
            last_host: host_check::LastAllowed::default(),
            inner,
        }
    }
}

/// A WebSocket that a page of another site opens (no CORS stands in its way: a browser
/// lets any page open one, cookies and all) while auth is none: refused, as CORS refuses
/// that page a read, unless it comes from the server's own origin or one CORS allows.
fn foreign_socket(allowed: &AllowedOrigins, request: &Request) -> Option<Response> {
    let headers = request.headers();
    if !super::kubeapi::asks_websocket(headers) {
        return None;
    }
    // No Origin is no browser, so no page of another site (the apiserver's own refusal of
    // such a handshake comes later, with the handshake's other checks).
    let origin = headers.get(header::ORIGIN)?.as_bytes();
    let own = headers.get(header::HOST).is_some_and(|host| {
        let origin = String::from_utf8_lossy(origin);
        origin.split_once("://").is_some_and(|(_, authority)| {
            authority.as_bytes().eq_ignore_ascii_case(host.as_bytes())
        })
    });
    if own || allowed.allows(origin) {
        return None;
    }
    Some(
        ApiError::new(
            StatusCode::FORBIDDEN,
            "a WebSocket from a page of another origin: add it to corsAllowedOrigins to allow it",
        )
        .into_response(),
    )
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // Outermost: a request for a foreign name gets nothing, not even a preflight answer.
        if let Some(refusal) =
            (self.rules.hosts.as_ref()).and_then(|hosts| self.last_host.refusal(hosts, &request))
        {
            return EdgeFuture::Answered(std::future::ready(Ok(refusal)));
        }
        if let Some(refusal) = (self.rules.socket_origins.as_ref())
            .and_then(|allowed| foreign_socket(allowed, &request))
        {
            return EdgeFuture::Answered(std::future::ready(Ok(refusal)));
        }
        let cors = match &self.rules.cors {
            Some(cors) if request.method() == Method::OPTIONS => {
                return EdgeFuture::Answered(std::future::ready(Ok(
                    cors.preflight(request.headers())
                )));
            }
            Some(cors) => Some(cors.allowance(request.headers())),
            None => None,
        };
        // A handler that panics is answered 500 in the envelope (with its CORS headers, so
        // the page can read it); the process and the connection's other requests go on.
        match catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(answer) => EdgeFuture::Served { answer, cors },
            Err(panic) => {
                EdgeFuture::Answered(std::future::ready(Ok(made_here(panicked(panic), cors))))
            }
        }
    }
}

pub enum EdgeFuture<F> {
    /// Answered at the edge.
    Answered(std::future::Ready<Result<Response, Infallible>>),
    Served {
        answer: F,
        cors: Option<Allowance>,
    },
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            EdgeFuture::Answered(answer) => Pin::new(answer).poll(cx),
            EdgeFuture::Served { answer, cors } => {
                let response = match catch_unwind(AssertUnwindSafe(|| Pin::new(answer).poll(cx))) {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(Ok(mut response))) => {
                        if let Some(cors) = cors.take() {
                            cors.apply(&mut response);
                        }
                        response
                    }
                    Err(panic) => made_here(panicked(panic), cors.take()),
                };
                Poll::Ready(Ok(response))
            }
        }
    }
}

/// An answer the edge made in place of the served one (a handler's panic), with what CORS
/// adds to it: its `Vary` too, which the served layers write on the answers they serve.
fn made_here(mut response: Response, cors: Option<Allowance>) -> Response {
    if let Some(cors) = cors {
        cors.vary(response.headers_mut());
        cors.apply(&mut response);
    }
    response
}

/// Refuses a query over [`MAX_QUERY_BYTES`] (414), a body with a `Content-Encoding` (415:
/// none is decoded, so it would only fail later as bad JSON), a body over the limit (413, at
/// once when `Content-Length` announces it, else as soon as it grows past it), or one that
/// does not arrive in time (408); a body within the bounds is read here, so handlers never
/// wait on the client. A request without a body goes straight on, nothing allocated.
#[derive(Clone)]
pub(super) struct Bounded<S> {
    limits: BodyLimits,
    inner: S,
}

impl<S> Bounded<S> {
    pub(super) fn new(inner: S, limits: BodyLimits) -> Bounded<S> {
        Bounded { limits, inner }
    }
}

impl<S> Service<Request> for Bounded<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let query_len = request.uri().query().map_or(0, str::len);
        if query_len > MAX_QUERY_BYTES {
            return Either::Right(Box::pin(std::future::ready(Ok(ApiError::new(
                StatusCode::URI_TOO_LONG,
                format!("the query is {query_len} bytes, over the limit of {MAX_QUERY_BYTES}"),
            )
            .into_response()))));
        }
        if HttpBody::is_end_stream(request.body()) {
            return Either::Left(self.inner.call(request));
        }
        // The inner service is ready now; the clone left in its place is made ready on the
        // next poll_ready, as tower asks of a service called from a future.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        Either::Right(Box::pin(read_body(self.limits, request, inner)))
    }
}

async fn read_body<S>(
    limits: BodyLimits,
    request: Request,
    mut inner: S,
) -> Result<Response, Infallible>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let (parts, body) = request.into_parts();
    if let Some(encoding) = parts.headers.get(header::CONTENT_ENCODING)
        && !encoding
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"identity")
    {
        return Ok(closing(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "request bodies are taken uncompressed: Content-Encoding {} is not supported",
                String::from_utf8_lossy(encoding.as_bytes())
            ),
        )));
    }
    let too_large = |size: Option<u64>| {
        let size = size.map_or_else(|| "more than that".to_string(), |s| format!("{s} bytes"));
        closing(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body may be at most {} bytes (maxBodyBytes); it is {size}",
                limits.max_bytes
            ),
        ))
    };
    let announced = HttpBody::size_hint(&body).lower();
    if announced > limits.max_bytes as u64 {
        return Ok(too_large(Some(announced)));
    }
    let read = Limited::new(body, limits.max_bytes).collect();
    let bytes = match tokio::time::timeout(limits.read_timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(too_large(None));
        }
        Ok(Err(e)) => {
            return Ok(closing(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )));
        }
        Err(_) => {
            return Ok(closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {:?} (bodyReadTimeout)",
                    limits.read_timeout
                ),
            )));
        }
    };
    inner
        .call(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The routes, each answering the methods it does not take in the envelope (axum still adds
/// the `Allow` header). Set once every route is in, whichever handlers share a path, and
/// before the layers, so 405s are timed and counted. (The original API's routes get theirs,
/// named under the mount, in `dispatch::Declared::into_table`.)
pub(super) fn enveloped_405<S: Clone + Send + Sync + 'static>(
    routes: OpenApiRouter<S>,
) -> OpenApiRouter<S> {
    let (router, openapi) = routes.split_for_parts();
    let mut routes = OpenApiRouter::from(router.method_not_allowed_fallback(method_not_allowed));
    *routes.get_openapi_mut() = openapi;
    routes
}

pub(super) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    not_allowed_answer(&method, uri.path())
}

pub(super) fn not_allowed_answer(method: &Method, path: &str) -> Response {
    // A preflight the CORS layer did not answer (no Origin, or none allowed): the original
    // answered every OPTIONS with 204, and clients that send a bare one expect it.
    if method == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    not_allowed(method, path).into_response()
}

/// The 405 of a path that does not take `method`, wherever that is found out (the router, or
/// delegated auth's rules, which run before it).
pub(super) fn not_allowed(method: &Method, path: &str) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{path} does not take {method}"),
    )
}

/// A handler that panicked: our fault, answered as such; the process and the connection's
/// other requests go on.
pub(super) fn panicked(panic: Box<dyn Any + Send + 'static>) -> Response {
    let reason = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string());
    tracing::error!(%reason, "a request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the request handler failed",
    )
    .into_response()
}
