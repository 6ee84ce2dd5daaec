//! The original API's routes, found by a path table of our own rather than by axum's router,
//! as [`super::kubeapi::Paths`] finds the Kubernetes API's. axum's router decodes every path
//! parameter into a new string and inserts it, inserts the matched path, and a route layer
//! boxes each route again around the route it wraps, so that a request clones two boxed
//! services: together about a tenth of a GET's instructions (bench/analysis.md). Here the
//! table is matchit, as in axum, a match is one extension read by everything after it (the
//! access rules, the fair share, the metrics, [`super::envelope::ApiPath`]), the layers around
//! every request are one stack around the whole table, and each connection calls its own copy
//! of a route in place.

use std::convert::Infallible;
use std::future::Ready;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::routing::future::RouteFuture;
use futures::future::Either;
use percent_encoding::percent_decode_str;
use tower::Service;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{Components, OpenApi, RefOr};
use utoipa_axum::router::UtoipaMethodRouter;

use super::edge::not_allowed_answer;
use super::envelope::ApiError;
use super::fairness::may_name;
use super::metrics::RouteSeries;

/// Routes declared with their OpenAPI description, as `OpenApiRouter` keeps them, each
/// route's `MethodRouter` kept by its template for the [`Table`] instead of handed to an axum
/// router.
pub(super) struct Declared<S> {
    routes: Vec<(String, MethodRouter<S>)>,
    openapi: OpenApi,
    /// The templates whose GET is known to take `watch` or not: from its description, or
    /// declared to answer once ([`Declared::route_answering_once`]).
    known_gets: Vec<(String, bool)>,
}

impl<S: Clone + Send + Sync + 'static> Declared<S> {
    pub(super) fn new() -> Declared<S> {
        Declared {
            routes: Vec::new(),
            openapi: OpenApi::default(),
            known_gets: Vec::new(),
        }
    }

    /// A route with its description (utoipa's `routes!`), as `OpenApiRouter::routes` adds it.
    pub(super) fn routes(mut self, (schemas, paths, router): UtoipaMethodRouter<S>) -> Declared<S> {
        for (template, item) in &paths.paths {
            if let Some(get) = &item.get {
                self.known_gets.push((template.clone(), takes_watch(get)));
            }
            self = self.route(template, router.clone());
        }
        let mut components = Components::new();
        components.schemas.extend(schemas);
        let mut described = OpenApi::default();
        described.paths = paths;
        described.components = Some(components);
        self.openapi.merge(described);
        self
    }

    /// A route without a description; on a template declared before, beside its methods.
    pub(super) fn route(mut self, template: &str, router: MethodRouter<S>) -> Declared<S> {
        match self.routes.iter_mut().find(|(t, _)| t == template) {
            Some((_, declared)) => {
                *declared = std::mem::replace(declared, MethodRouter::new()).merge(router);
            }
            None => self.routes.push((template.to_string(), router)),
        }
        self
    }

    /// A route without a description whose GET answers once whatever its query (it takes no
    /// `watch`), so that its requests never hold a watch's place nor have their query read
    /// for one.
    pub(super) fn route_answering_once(
        mut self,
        template: &str,
        router: MethodRouter<S>,
    ) -> Declared<S> {
        self.known_gets.push((template.to_string(), false));
        self.route(template, router)
    }

    pub(super) fn merge(mut self, other: Declared<S>) -> Declared<S> {
        for (template, router) in other.routes {
            self = self.route(&template, router);
        }
        self.openapi.merge(other.openapi);
        self.known_gets.extend(other.known_gets);
        self
    }

    /// Each route with `value` among its requests' extensions.
    pub(super) fn with_extension<T: Clone + Send + Sync + 'static>(self, value: T) -> Declared<S> {
        Declared {
            routes: (self.routes.into_iter())
                .map(|(template, router)| (template, router.layer(axum::Extension(value.clone()))))
                .collect(),
            openapi: self.openapi,
            known_gets: self.known_gets,
        }
    }

    /// The routes' description, taken: the table is built without it.
    pub(super) fn take_openapi(&mut self) -> OpenApi {
        std::mem::take(&mut self.openapi)
    }

    /// The table of these routes under `mount`, given their state, beside the templates an
    /// axum router serves (`elsewhere`): a path they match is left to it, as axum's router
    /// prefers a fixed segment to a parameter. Each route answers a method it does not take
    /// with the enveloped 405 (and `Allow`), naming its path as under the mount.
    pub(super) fn into_table<'a>(
        self,
        state: S,
        mount: &str,
        elsewhere: impl IntoIterator<Item = &'a str>,
    ) -> Result<(Table, Dispatch), TableError> {
        let mut targets = Vec::with_capacity(self.routes.len());
        let mut routes = Vec::with_capacity(self.routes.len());
        let mount: Arc<str> = mount.into();
        for (index, (template, router)) in self.routes.into_iter().enumerate() {
            let names = param_names(&template);
            if names.len() > MAX_PARAMS {
                return Err(TableError::Params(template));
            }
            let streams = if super::logs::is_log_route(&template) {
                Streams::Always
            } else {
                // A GET known to take no `watch` (described so, or declared to answer
                // once) never streams; the query of any other request tells.
                match self.known_gets.iter().find(|(t, _)| *t == template) {
                    Some((_, false)) => Streams::Never,
                    _ => Streams::WhenWatching,
                }
            };
            targets.push((
                template.clone(),
                Target::Declared(Arc::new(Route {
                    template,
                    names,
                    index,
                    streams,
                    series: RouteSeries::default(),
                })),
            ));
            let mount = mount.clone();
            let not_allowed = move |method: Method, uri: axum::http::Uri| {
                let mount = mount.clone();
                async move {
                    let path = uri.path();
                    not_allowed_answer(&method, path.strip_prefix(&*mount).unwrap_or(path))
                }
            };
            routes.push(router.fallback(not_allowed).with_state(state.clone()));
        }
        targets.extend(
            elsewhere
                .into_iter()
                .map(|t| (t.to_string(), Target::Elsewhere)),
        );
        let templates: Vec<&str> = targets.iter().map(|(t, _)| t.as_str()).collect();
        let layer_of = layers(&templates);
        let mut paths: Vec<matchit::Router<Target>> = Vec::new();
        for ((template, target), layer) in targets.into_iter().zip(layer_of) {
            if paths.len() <= layer {
                paths.resize_with(layer + 1, matchit::Router::new);
            }
            paths[layer]
                .insert(template, target)
                .map_err(TableError::Insert)?;
        }
        Ok((
            Table(paths.into()),
            Dispatch {
                routes: routes.into(),
                ready: Vec::new(),
            },
        ))
    }
}

/// Why the declared routes make no table.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("matchit refused a template")]
    Insert(#[source] matchit::InsertError),
    #[error("the route {0} has more than {MAX_PARAMS} parameters")]
    Params(String),
}

/// The most parameters a route's template has (`/{resource}/{name}/output`): a match keeps
/// their values in place.
const MAX_PARAMS: usize = 2;

/// Whether a described operation declares the query parameter `watch`.
fn takes_watch(operation: &Operation) -> bool {
    operation
        .parameters
        .iter()
        .flatten()
        .any(|parameter| match parameter {
            RefOr::T(parameter) => {
                parameter.name == "watch" && matches!(parameter.parameter_in, ParameterIn::Query)
            }
            RefOr::Ref(_) => false,
        })
}

/// The parameters' names of a matchit template (`/pods/{name}`), in order.
fn param_names(template: &str) -> Box<[String]> {
    template
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| name.trim_start_matches('*').to_string())
        .collect()
}

enum Target {
    Declared(Arc<Route>),
    /// A template of the axum router beside the table.
    Elsewhere,
}

/// A declared route: its template (under the mount) and its parameters' names.
#[derive(Debug)]
pub(super) struct Route {
    template: String,
    names: Box<[String]>,
    /// Its place among the [`Dispatch`]'s routes.
    index: usize,
    streams: Streams,
    /// Its requests' metrics handles.
    series: RouteSeries,
}

/// Whether a route's answer is a stream, which holds a watch's place in the fair share
/// rather than a request's: known from its declaration, so that most requests are told so
/// without their query being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Streams {
    /// A GET described without `watch`, or declared to answer once.
    Never,
    /// When the request asks to watch: a GET described with `watch`, or any route neither
    /// described nor declared to answer once.
    WhenWatching,
    /// A log's, as long as its pods log.
    Always,
}

impl Streams {
    /// Whether a request to a route of this kind is answered with a stream ([`asks_to_watch`]).
    /// Most requests are told so without decoding their query.
    pub(super) fn asked_by(self, uri: &Uri) -> bool {
        self.asked(|| {
            may_name(uri.query().unwrap_or(""), &["watch"])
                && axum::extract::Query::<WatchQuery>::try_from_uri(uri)
                    .is_ok_and(|q| asks_to_watch(q.0.watch.as_deref()))
        })
    }

    /// [`Streams::asked_by`] for a caller that has read the query's `watch` already: `watching`
    /// is called only for a route that streams when watching.
    pub(super) fn asked(self, watching: impl FnOnce() -> bool) -> bool {
        match self {
            Streams::Never => false,
            Streams::Always => true,
            Streams::WhenWatching => watching(),
        }
    }
}

/// Whether a query's `watch` asks to watch, for the layers before the handler: an invalid
/// one is the handler's 400 ([`super::watch::is_watch`]); to them it is no watch.
pub(super) fn asks_to_watch(watch: Option<&str>) -> bool {
    super::watch::is_watch(watch).unwrap_or(false)
}

#[derive(serde::Deserialize)]
struct WatchQuery {
    watch: Option<String>,
}

impl Route {
    /// The template, under the mount (`/k8sailor/v0/pods/{name}`).
    pub(super) fn template(&self) -> &str {
        &self.template
    }

    pub(super) fn streams(&self) -> Streams {
        self.streams
    }

    pub(super) fn series(&self) -> &RouteSeries {
        &self.series
    }
}

/// The templates of the declared routes, shared by every connection, in [`layers`]: a path
/// is looked up in each in turn, and the first that has it answers.
#[derive(Clone)]
pub(super) struct Table(Arc<[matchit::Router<Target>]>);

/// Each template's layer: a template goes below every template that matchit prefers to it
/// where they first differ (a fixed segment where it has a parameter), so that no layer has
/// a fixed segment and a parameter side by side. There matchit would note the parameter to
/// come back to, in a `Vec` of its own made for each lookup (an allocation per request).
/// Looking the layers up in order finds what one router of them all would: a match in a
/// layer is preferred to every match in the layers below, which it precedes where they first
/// differ, and no match above it is preferred to it.
fn layers(all: &[&str]) -> Vec<usize> {
    let is_param = |segment: &str| segment.starts_with('{');
    // Whether matchit prefers `fixed` to `param`: where they first differ, `fixed` has a
    // fixed segment and `param` a parameter.
    let precedes = |fixed: &str, param: &str| {
        fixed
            .split('/')
            .zip(param.split('/'))
            .find(|(f, p)| f != p)
            .is_some_and(|(f, p)| !is_param(f) && is_param(p))
    };
    let mut layer = vec![None; all.len()];
    let mut depth = 0;
    while layer.iter().any(Option::is_none) {
        let below: Vec<bool> = (all.iter().enumerate())
            .map(|(i, template)| {
                layer[i].is_some()
                    || (all.iter().enumerate())
                        .any(|(j, other)| layer[j].is_none() && precedes(other, template))
            })
            .collect();
        for (i, below) in below.into_iter().enumerate() {
            if !below {
                layer[i] = Some(depth);
            }
        }
        depth += 1;
    }
    layer.into_iter().flatten().collect()
}

impl Table {
    /// The declared route `path` names, with its parameters; None for a path the table does
    /// not serve (or leaves to the axum router).
    pub(super) fn find(&self, path: &str) -> Option<RouteMatch> {
        let found = self.0.iter().find_map(|layer| layer.at(path).ok())?;
        let Target::Declared(route) = found.value else {
            return None;
        };
        let mut values: [String; MAX_PARAMS] = Default::default();
        let mut invalid = None;
        for ((name, raw), value) in found.params.iter().zip(&mut values) {
            // Most names have nothing escaped: a plain copy then, not a decode.
            *value = if raw.contains('%') {
                match percent_decode_str(raw).decode_utf8() {
                    Ok(decoded) => decoded.into_owned(),
                    Err(_) => {
                        invalid.get_or_insert_with(|| {
                            format!("`{name}` is not UTF-8 once percent-decoded: {raw}")
                        });
                        String::new()
                    }
                }
            } else {
                raw.to_string()
            };
        }
        Some(RouteMatch {
            route: route.clone(),
            values,
            invalid,
        })
    }
}

/// The declared route a request was found at, among its extensions: what the access rules,
/// the fair share, the metrics and [`super::envelope::ApiPath`] read.
#[derive(Clone, Debug)]
pub(super) struct RouteMatch {
    route: Arc<Route>,
    /// The parameters' values, percent-decoded, in the template's order (the first
    /// `route.names.len()`), until the handler takes them.
    values: [String; MAX_PARAMS],
    /// Why a value could not be decoded: the request is a 400.
    invalid: Option<String>,
}

impl RouteMatch {
    pub(super) fn template(&self) -> &str {
        &self.route.template
    }

    pub(super) fn route(&self) -> &Arc<Route> {
        &self.route
    }

    /// Why the parameters are not valid, if they are not.
    pub(super) fn invalid(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    pub(super) fn param(&self, name: &str) -> Option<&str> {
        let at = self.route.names.iter().position(|n| n == name)?;
        self.values.get(at).map(String::as_str)
    }

    /// The parameters' values in the template's order, taken, or why they are not valid: the
    /// handler's, which reads them once (no copy made).
    pub(super) fn take_values(&mut self) -> Result<impl Iterator<Item = String> + '_, &str> {
        if let Some(reason) = &self.invalid {
            return Err(reason);
        }
        let count = self.route.names.len();
        Ok(self.values.iter_mut().take(count).map(std::mem::take))
    }
}

/// The innermost service: the route a request was found at ([`RouteMatch`]), called.
pub(super) struct Dispatch {
    routes: Arc<[MethodRouter]>,
    /// This connection's copies of the routes it called: a `MethodRouter` is called through
    /// `&mut`, and cloning one per request clones each of its methods.
    ready: Vec<Option<MethodRouter>>,
}

impl Clone for Dispatch {
    fn clone(&self) -> Dispatch {
        Dispatch {
            routes: self.routes.clone(),
            ready: Vec::new(),
        }
    }
}

impl Service<Request> for Dispatch {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<RouteFuture<Infallible>, Ready<Result<Response, Infallible>>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let Some(index) = (request.extensions().get::<RouteMatch>()).map(|m| m.route.index) else {
            // Only the table sends requests here, each with its match.
            let refusal = ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: a request reached the routes without its match",
            );
            return Either::Right(std::future::ready(Ok(refusal.into_response())));
        };
        if self.ready.len() <= index {
            self.ready.resize_with(self.routes.len(), || None);
        }
        let route = self.ready[index].get_or_insert_with(|| self.routes[index].clone());
        Either::Left(route.call(request))
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;

    use super::*;

    fn table(templates: &[&str], elsewhere: &[&str]) -> Table {
        let declared = templates
            .iter()
            .fold(Declared::<()>::new(), |declared, template| {
                declared.route(template, get(|| async { "" }))
            });
        let (table, _) = declared
            .into_table((), "/v0", elsewhere.iter().copied())
            .expect("templates insert");
        table
    }

    #[test]
    fn a_match_carries_its_template_and_decoded_values() {
        let table = table(
            &["/v0/pods", "/v0/pods/{name}", "/v0/{resource}/{name}"],
            &[],
        );
        let found = table.find("/v0/pods/web-1").expect("matches");
        assert_eq!(found.template(), "/v0/pods/{name}");
        assert_eq!(found.invalid(), None);
        assert_eq!(found.param("name"), Some("web-1"));

        let mut found = table.find("/v0/configmaps/a%20b").expect("matches");
        assert_eq!(found.template(), "/v0/{resource}/{name}");
        assert_eq!(found.param("resource"), Some("configmaps"));
        assert_eq!(found.param("name"), Some("a b"));
        let taken: Vec<String> = found.take_values().expect("valid").collect();
        assert_eq!(taken, ["configmaps", "a b"]);

        assert!(table.find("/v0/pods/").is_none());
        assert!(table.find("/other").is_none());
    }

    /// Fixed segments and parameters side by side at two depths.
    const SIDE_BY_SIDE: [&str; 7] = [
        "/v0/pods",
        "/v0/pods/logs",
        "/v0/pods/{name}",
        "/v0/pods/{name}/logs",
        "/v0/{resource}",
        "/v0/{resource}/{name}",
        "/v0/{resource}/{name}/output",
    ];

    #[test]
    fn a_template_goes_below_those_matchit_prefers_to_it() {
        let templates = [&SIDE_BY_SIDE[..], &["/v0/deployments/{name}", "/livez"]].concat();
        assert_eq!(layers(&templates), [0, 0, 1, 1, 2, 2, 2, 0, 0]);
    }

    #[test]
    fn the_layers_find_what_one_router_finds() {
        let templates = SIDE_BY_SIDE;
        let table = table(&templates, &["/v0/openapi.json"]);
        let mut one = matchit::Router::new();
        for template in templates.iter().chain(&["/v0/openapi.json"]) {
            one.insert(*template, *template).expect("inserts");
        }
        for path in [
            "/v0/pods",
            "/v0/pods/logs",
            "/v0/pods/logs/logs",
            "/v0/pods/web/logs",
            "/v0/pods/web",
            "/v0/pods/web/output",
            "/v0/configmaps",
            "/v0/configmaps/web",
            "/v0/configmaps/web/output",
            "/v0/configmaps/web/logs",
            "/v0/openapi.json",
            "/v0/openapi.json/x",
            "/other",
        ] {
            let expected = one.at(path).ok().map(|found| *found.value);
            let expected = expected.filter(|t| *t != "/v0/openapi.json");
            let found = table.find(path);
            assert_eq!(found.as_ref().map(RouteMatch::template), expected, "{path}");
        }
    }

    #[test]
    fn a_value_that_is_not_utf8_makes_the_match_invalid() {
        let table = table(&["/v0/pods/{name}"], &[]);
        let found = table.find("/v0/pods/%FF%FE").expect("matches");
        let reason = found.invalid().expect("not UTF-8");
        assert!(reason.contains("`name`"), "{reason}");
    }

    #[test]
    fn the_other_routers_fixed_templates_win_over_parameters() {
        let table = table(
            &["/{resource}", "/{resource}/{name}"],
            &["/livez", "/openapi/v3/{*path}"],
        );
        assert!(table.find("/livez").is_none());
        assert!(table.find("/openapi/v3/apis").is_none());
        assert_eq!(
            table.find("/pods").expect("matches").template(),
            "/{resource}"
        );
    }

    #[tokio::test]
    async fn a_template_declared_twice_answers_both_methods_and_refuses_others() {
        let (table, mut dispatch) = Declared::<()>::new()
            .route("/v0/services/{name}", get(|| async { "get" }))
            .route(
                "/v0/services/{name}",
                axum::routing::post(|| async { "post" }),
            )
            .into_table((), "/v0", [])
            .expect("templates insert");
        for (method, status, allow) in [
            (Method::GET, StatusCode::OK, None),
            (Method::POST, StatusCode::OK, None),
            (
                Method::PUT,
                StatusCode::METHOD_NOT_ALLOWED,
                Some("GET,HEAD,POST"),
            ),
        ] {
            let path = "/v0/services/web";
            let mut request = Request::builder()
                .method(method.clone())
                .uri(path)
                .body(axum::body::Body::empty())
                .expect("a request");
            request
                .extensions_mut()
                .insert(table.find(path).expect("matches"));
            let response = dispatch.call(request).await.expect("infallible");
            assert_eq!(response.status(), status, "{method}");
            let allowed = response.headers().get(axum::http::header::ALLOW);
            assert_eq!(
                allowed.map(|a| a.to_str().expect("ASCII")),
                allow,
                "{method}"
            );
        }
    }
}
