//! The HTTP API: axum routes under the configured prefix (default `/k8sailor/v0`), the answer
//! envelope, and the middleware (tracing, gzip, timeout, CORS).

mod docs;
mod envelope;
mod health;
mod metrics;
mod routes;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use envelope::{ApiError, Envelope};
pub use health::Health;
pub use metrics::Metrics;

use crate::biz::Workloads;
use crate::k8sdao::Source;

#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where the API is mounted, e.g. `/k8sailor/v0`.
    pub prefix: String,
    /// Origins allowed by CORS: empty for none, `*` for any (then without credentials).
    pub cors_allowed_origins: Vec<String>,
    pub request_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("invalid prefix {0:?}: it must start with '/' and not end with one")]
    Prefix(String),
    #[error("invalid CORS origin {0:?}")]
    CorsOrigin(String),
    #[error("CORS origin '*' cannot be combined with other origins")]
    CorsWildcard,
    #[error("cannot render the OpenAPI description: {0}")]
    OpenApi(String),
}

/// What every handler and middleware shares; cloned per request and per layer, so it is one
/// reference count, not one per part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub workloads: Arc<Workloads<Source>>,
    pub health: Arc<Health>,
    pub metrics: Metrics,
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    pub fn new(workloads: Arc<Workloads<Source>>) -> AppState {
        AppState(Arc::new(Shared {
            metrics: Metrics::new(workloads.clone()),
            workloads,
            health: Arc::new(Health::default()),
        }))
    }
}

/// Tells API clients how old the data is while a watch is failing.
pub const STALE_HEADER: &str = "k8sailor-stale-seconds";

async fn mark_stale(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let source = state.workloads.source();
    if source.is_live() {
        return response;
    }
    if let Some(age) = health::staleness(&source.informer_states()) {
        response
            .headers_mut()
            .insert(STALE_HEADER, HeaderValue::from(age));
    }
    response
}

pub fn router(state: AppState, opts: &HttpOptions) -> Result<Router, SetupError> {
    let track = axum::middleware::from_fn_with_state(state.clone(), metrics::track);
    let api = routes::api()
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            mark_stale,
        ))
        .route_layer(track.clone());
    let prefix = opts.prefix.as_str();
    let api = if prefix.is_empty() || prefix == "/" {
        api
    } else if prefix.starts_with('/') && !prefix.ends_with('/') {
        OpenApiRouter::new().nest(prefix, api)
    } else {
        return Err(SetupError::Prefix(opts.prefix.clone()));
    };
    let (app, mut openapi) = api
        .merge(
            OpenApiRouter::new()
                .routes(routes!(health::livez))
                .routes(routes!(health::readyz))
                .routes(routes!(metrics::serve))
                .route_layer(track),
        )
        .split_for_parts();
    docs::describe(&mut openapi);
    let openapi = bytes::Bytes::from(
        openapi
            .to_pretty_json()
            .map_err(|e| SetupError::OpenApi(e.to_string()))?,
    );
    let app = app.route(
        docs::OPENAPI_PATH,
        get(move || {
            let body = openapi.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let app = app.with_state(state);
    let app = app
        .fallback(routes::no_route)
        .layer(CompressionLayer::new())
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            opts.request_timeout,
        ))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(Level::DEBUG))
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        );
    Ok(match cors(&opts.cors_allowed_origins)? {
        Some(cors) => app.layer(cors),
        None => app,
    })
}

/// A wildcard never goes with credentials; named origins may send them.
fn cors(origins: &[String]) -> Result<Option<CorsLayer>, SetupError> {
    if origins.is_empty() {
        return Ok(None);
    }
    let base = CorsLayer::new()
        .allow_methods([
            Method::GET,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
        .max_age(Duration::from_secs(600));
    if origins.iter().any(|o| o == "*") {
        if origins.len() > 1 {
            return Err(SetupError::CorsWildcard);
        }
        return Ok(Some(base.allow_origin(AllowOrigin::any())));
    }
    let list = origins
        .iter()
        .map(|o| HeaderValue::from_str(o).map_err(|_| SetupError::CorsOrigin(o.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(
        base.allow_origin(AllowOrigin::list(list))
            .allow_credentials(true),
    ))
}

#[cfg(test)]
mod tests;
