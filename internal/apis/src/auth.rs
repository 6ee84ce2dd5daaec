//! `--auth delegated`: every API request but `/ping` carries a bearer token, and its owner
//! must be allowed by the cluster's RBAC to do what the request reads or writes, exactly as if
//! it asked the apiserver itself (TokenReview, then SubjectAccessReview, both cached). Probes,
//! metrics and the OpenAPI description stay open, as the apiserver's own are.
//!
//! A list or watch across all namespaces is not refused for want of cluster-wide rights: it
//! shows the objects of the namespaces where the caller may list (watch) the kind. Which
//! those are is decided here, with SubjectAccessReviews: one cluster-wide review (a caller
//! allowed everywhere costs no more), else one per namespace that holds objects of the kind
//! (the only ones a list could show anything of), answers cached per token and namespace,
//! at most [`NAMESPACE_REVIEWS_AT_ONCE`] under way at a time. biz gets the decision as a plain
//! [`NamespaceFilter`], and the continue tokens a caller gets are bound to its token.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use confk8s::{Access, Namespaces, ReviewError, Reviewer};
use futures::StreamExt;
use serde::Deserialize;

use super::ApiError;
use super::dispatch::{RouteMatch, asks_to_watch};
use super::fairness::Caller;
use super::kinds::KindRoute;
use biz::{
    DeploymentRecord, Kind, NamespaceFilter, NamespaceRecord, PodRecord, Resource, Typed,
    Visibility, Workloads, namespace_of_list, namespace_of_object,
};
use k8sdao::Source;
use k8sdao::catalog::{BuiltIn, DEPLOYMENTS, EVENTS, INGRESSES, PODS, SERVICES};

/// SubjectAccessReviews one filtered list may have under way at once: a cold cache with
/// thousands of namespaces is answered in a few round trips' time per batch, without a burst
/// of thousands of requests at the apiserver.
const NAMESPACE_REVIEWS_AT_ONCE: usize = 16;

/// Who may call the API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Anyone who reaches the port (the original k8sailor, on 127.0.0.1).
    #[default]
    None,
    /// Bearer tokens, checked with the apiserver; each request authorized by RBAC.
    Delegated,
}

impl AuthMode {
    pub const ALL: &'static [AuthMode] = &[AuthMode::None, AuthMode::Delegated];

    /// As flags and the config file name it.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Delegated => "delegated",
        }
    }
}

/// What the access check needs besides the request.
#[derive(Clone)]
pub(super) struct AuthLayer {
    pub reviewer: Arc<Reviewer>,
    /// The API prefix, cut from route templates.
    pub prefix: String,
    /// The one namespace served, if the server is scoped: a list without `namespace` is a
    /// list of that namespace.
    pub scope: Option<String>,
    /// Where the candidate namespaces of a filtered list come from.
    pub workloads: Arc<Workloads<Source>>,
}

#[derive(Deserialize, Default)]
struct AccessQuery {
    namespace: Option<String>,
    watch: Option<String>,
}

// The API groups, as the kinds name them.
const WATCH: &str = "watch";

/// An access to the resource of a catalog row: its names are the row's.
pub(super) fn access(
    verb: &'static str,
    row: &'static BuiltIn,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Access {
    access_to(verb, row.group.into(), row.plural.into(), namespace, name)
}

/// An access to `resource` of `group`, as RBAC names them: a catalog row's names, or a custom
/// resource's, named by its CRD at run time.
pub(super) fn access_to(
    verb: &'static str,
    group: Cow<'static, str>,
    resource: Cow<'static, str>,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Access {
    Access {
        verb,
        group,
        resource,
        subresource: "",
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
    }
}

/// What a request needs in RBAC terms.
#[derive(Clone, Debug)]
struct Rule {
    /// Each must be allowed, or the request is refused.
    required: Vec<Access>,
    /// A list or watch across namespaces: it shows the objects of this kind in the namespaces
    /// where this access (its namespace left open) is allowed.
    per_namespace: Option<(Resource, Access)>,
}

impl Rule {
    fn all(required: Vec<Access>) -> Rule {
        Rule {
            required,
            per_namespace: None,
        }
    }

    /// A list or watch of `kind`: in the namespace `access` names, if it names one (refused
    /// without the right there), else across the namespaces where `access` is allowed.
    fn list(resource: &Resource, access: Access) -> Rule {
        if access.namespace.is_some() {
            Rule::all(vec![access])
        } else {
            Rule {
                required: Vec::new(),
                per_namespace: Some((resource.clone(), access)),
            }
        }
    }

    /// Needs no token at all.
    fn is_open(&self) -> bool {
        self.required.is_empty() && self.per_namespace.is_none()
    }
}

/// What a request to `route` (a template under the prefix) does in RBAC terms; None for a
/// route without a rule, which is refused (fail closed).
fn rule(
    route: &str,
    method: &Method,
    name: Option<&str>,
    requested: Option<&Resource>,
    query: &AccessQuery,
    scope: Option<&str>,
) -> Option<Rule> {
    let asked = query.namespace.as_deref();
    let list_ns = namespace_of_list(asked, scope);
    let object_ns = Some(namespace_of_object(asked));
    let watch = asks_to_watch(query.watch.as_deref());
    let list_verb = if watch { WATCH } else { "list" };
    // The generic reads of a kind; its other methods (writes) are in the table below.
    if let Some((served, kind_route)) = super::kinds::served_by(route, requested)
        && method == Method::GET
    {
        // The names RBAC checks: the catalog row's, or the CRD's for a custom resource.
        let (group, resource) = (served.group.clone(), served.plural.clone());
        if !served.namespaced && served.typed() != Some(Kind::Namespace) {
            // Nodes, PersistentVolumes, ...: rights across the cluster, as the apiserver asks.
            return Some(Rule::all(vec![match kind_route {
                KindRoute::List => access_to(list_verb, group, resource, None, None),
                KindRoute::Object | KindRoute::Output => {
                    access_to("get", group, resource, None, name)
                }
            }]));
        }
        // A Namespace's rights are those in it, as the apiserver asks for a named one.
        let object_ns = if served.namespaced { object_ns } else { name };
        return Some(match kind_route {
            KindRoute::List => Rule::list(
                &served,
                access_to(list_verb, group, resource, list_ns, None),
            ),
            KindRoute::Object | KindRoute::Output => {
                Rule::all(vec![access_to("get", group, resource, object_ns, name)])
            }
        });
    }
    // The log routes' rules are declared beside them.
    if method == Method::GET
        && let Some(required) = super::logs::access_of(route, object_ns, name)
    {
        return Some(Rule::all(required));
    }
    // A resource that is not served: the handler's 404 names the served ones, as the open
    // `/resources` does.
    if route.starts_with("/{resource}") && method == Method::GET {
        return Some(Rule::all(Vec::new()));
    }
    let required = match (route, method.as_str()) {
        ("/ping", "GET") | ("/resources", "GET") => Vec::new(),
        ("/deployments", "GET") => {
            return Some(Rule::list(
                DeploymentRecord::resource(),
                access(list_verb, &DEPLOYMENTS, list_ns, None),
            ));
        }
        ("/deployments/{name}" | "/deployments/{name}/output", "GET") => {
            vec![access("get", &DEPLOYMENTS, object_ns, name)]
        }
        ("/deployments/{name}", "POST") => {
            vec![access("create", &DEPLOYMENTS, object_ns, None)]
        }
        ("/deployments/{name}", "DELETE") => {
            vec![access("delete", &DEPLOYMENTS, object_ns, name)]
        }
        ("/deployments/{name}/replicas", "PUT") => vec![Access {
            subresource: "scale",
            ..access("patch", &DEPLOYMENTS, object_ns, name)
        }],
        ("/deployments/{name}/pods", "GET") => vec![
            access("get", &DEPLOYMENTS, object_ns, name),
            access(list_verb, &PODS, object_ns, None),
        ],
        ("/deployments/{name}/services", "GET") => vec![
            access("get", &DEPLOYMENTS, object_ns, name),
            access("list", &SERVICES, object_ns, None),
        ],
        ("/deployments/{name}/ingresses", "GET") => vec![
            access("get", &DEPLOYMENTS, object_ns, name),
            access("list", &SERVICES, object_ns, None),
            access("list", &INGRESSES, object_ns, None),
        ],
        ("/services/{name}/pods", "GET") => vec![
            access("get", &SERVICES, object_ns, name),
            access("list", &PODS, object_ns, None),
        ],
        ("/pods", "GET") => {
            return Some(Rule::list(
                PodRecord::resource(),
                access(list_verb, &PODS, list_ns, None),
            ));
        }
        ("/pods/{name}" | "/pods/{name}/output", "GET") => {
            vec![access("get", &PODS, object_ns, name)]
        }
        ("/pods/{name}", "DELETE") => vec![access("delete", &PODS, object_ns, name)],
        ("/pods/{name}/event" | "/pods/{name}/events", "GET") => vec![
            access("get", &PODS, object_ns, name),
            access("list", &EVENTS, object_ns, None),
        ],
        ("/services/{name}", "POST") => vec![access("create", &SERVICES, object_ns, None)],
        ("/ingresses/{name}", "POST") => {
            vec![access("create", &INGRESSES, object_ns, None)]
        }
        _ => return None,
    };
    Some(Rule::all(required))
}

pub(super) fn bearer_token(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The methods some rule allows on `route`: a request with another one is a 405, not a 403,
/// since no token would make it valid.
fn methods_with_rules(
    route: &str,
    requested: Option<&Resource>,
    query: &AccessQuery,
    scope: Option<&str>,
) -> Vec<Method> {
    [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ]
    .into_iter()
    .filter(|m| rule(route, m, None, requested, query, scope).is_some())
    .collect()
}

/// What the router would answer, were it asked: the rules run before it.
fn method_not_allowed(method: &Method, path: &str, allowed: &[Method]) -> Response {
    let allow = allowed
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = super::edge::not_allowed(method, path).into_response();
    if let Ok(value) = HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

fn unauthenticated(reason: String) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, reason).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn refusal(e: ReviewError) -> Response {
    match e {
        ReviewError::Unauthenticated(reason) => unauthenticated(reason),
        ReviewError::Forbidden { .. } => {
            ApiError::new(StatusCode::FORBIDDEN, e.to_string()).into_response()
        }
        ReviewError::Unavailable(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
        }
        ReviewError::Throttled { retry_after } => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string())
                .retry_after(retry_after.as_secs())
                .into_response()
        }
    }
}

/// The namespaces whose objects of `kind` the caller may see by `access`.
async fn visible_namespaces(
    auth: &AuthLayer,
    caller: &Credentials<'_>,
    kind: &Resource,
    access: &Access,
) -> Result<NamespaceFilter, Response> {
    // Cluster-wide first: a caller allowed everywhere (by RBAC, or by another authorizer:
    // one review, cached) sees namespaces created later too.
    match auth
        .reviewer
        .review(caller.token, caller.from, access)
        .await
    {
        Ok(()) => return Ok(NamespaceFilter::All),
        Err(ReviewError::Forbidden { .. }) => {}
        Err(e) => return Err(refusal(e)),
    }
    match auth
        .reviewer
        .namespaces_where(caller.token, caller.from, access)
        .await
    {
        Ok(Some(Namespaces::All)) => return Ok(NamespaceFilter::All),
        Ok(Some(Namespaces::Only(allowed))) => return Ok(NamespaceFilter::only(allowed)),
        Ok(None) => {}
        Err(e) => return Err(refusal(e)),
    }
    // RBAC is not followed: a review per namespace. A watch's namespaces are fixed when it
    // starts, so it takes every namespace: one that holds none of the kind now (a Deployment
    // scaled to zero, a namespace just made) may hold some later. Namespaces are every
    // namespace, each being in itself.
    let holding = if access.verb == WATCH {
        NamespaceRecord::resource()
    } else {
        kind
    };
    let candidates = auth
        .workloads
        .namespaces_holding(holding)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    let allowed = auth
        .reviewer
        .namespaces_allowed(
            caller.token,
            caller.from,
            access,
            candidates,
            NAMESPACE_REVIEWS_AT_ONCE,
        )
        .await
        .map_err(refusal)?;
    Ok(NamespaceFilter::only(allowed))
}

/// Who is asking: the bearer token and the client's address, which bounds the TokenReviews
/// its unknown tokens may cost.
struct Credentials<'a> {
    token: &'a str,
    from: IpAddr,
}

/// The client's address as the connection gave it; unspecified when served without one
/// (in-process tests), which then share one budget.
pub(super) fn client_address(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// Refuses the request unless its token's owner may do everything it does; for a list across
/// namespaces, tells the handler which namespaces it may show ([`Visibility`]); a watch ends
/// once its caller may no longer see what it shows ([`until_revoked`]).
pub(super) async fn check(
    State(auth): State<AuthLayer>,
    mut request: Request,
    next: Next,
) -> Response {
    // A bare preflight reads and changes nothing, and browsers never send it a token.
    if request.method() == Method::OPTIONS {
        return next.run(request).await;
    }
    // Only the route table sends requests here, each with its match.
    let Some(found) = request.extensions().get::<RouteMatch>() else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error: a request reached the access check without its route",
        )
        .into_response();
    };
    if let Some(reason) = found.invalid() {
        return ApiError::new(StatusCode::BAD_REQUEST, format!("invalid path: {reason}"))
            .into_response();
    }
    let template = found.template();
    let route = template
        .strip_prefix(auth.prefix.as_str())
        .unwrap_or(template);
    let name = found.param("name");
    let requested = found
        .param("resource")
        .and_then(|resource| auth.workloads.source().registry().resource(resource));
    let query = match axum::extract::Query::<AccessQuery>::try_from_uri(request.uri()) {
        Ok(query) => query.0,
        Err(e) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("invalid query: {}", e.body_text()),
            )
            .into_response();
        }
    };
    let streams = found.route().streams();
    let scope = auth.scope.as_deref();
    // HEAD is a GET without the body (the router answers it so): the same access.
    let method = if request.method() == Method::HEAD {
        &Method::GET
    } else {
        request.method()
    };
    let Some(rule) = rule(route, method, name, requested.as_ref(), &query, scope) else {
        let allowed = methods_with_rules(route, requested.as_ref(), &query, scope);
        if !allowed.is_empty() {
            // Named as under the prefix, as the route's own 405 names it.
            let path = request.uri().path();
            let path = path.strip_prefix(auth.prefix.as_str()).unwrap_or(path);
            return method_not_allowed(request.method(), path, &allowed);
        }
        // A route served without a rule is refused: fail closed.
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("no access rule for {} {route}", request.method()),
        )
        .into_response();
    };
    if rule.is_open() {
        return next.run(request).await;
    }
    let Some(token) = bearer_token(&request) else {
        return unauthenticated(
            "a bearer token is required: send 'Authorization: Bearer <token>' (e.g. from kubectl create token)".into(),
        );
    };
    let token = token.to_string();
    let caller = Credentials {
        token: &token,
        from: client_address(&request),
    };
    for access in &rule.required {
        if let Err(e) = auth
            .reviewer
            .review(caller.token, caller.from, access)
            .await
        {
            return refusal(e);
        }
    }
    let namespaces = match &rule.per_namespace {
        None => NamespaceFilter::All,
        Some((kind, access)) => match visible_namespaces(&auth, &caller, kind, access).await {
            Ok(namespaces) => namespaces,
            Err(refused) => return refused,
        },
    };
    let from = caller.from;
    // For the reviews a merged log makes as pods join it.
    request.extensions_mut().insert(super::logs::Reviewed {
        token: Arc::from(token.as_str()),
        from,
    });
    let visibility = Visibility {
        namespaces: namespaces.clone(),
    };
    request.extensions_mut().insert(visibility);
    // Fairness counts the request against its user (the review above cached the answer); a
    // user the apiserver did not name is known by its address.
    if let Some(user) = auth
        .reviewer
        .user(&token, from)
        .await
        .ok()
        .filter(|user| !user.username.is_empty())
    {
        request.extensions_mut().insert(Caller {
            user: user.username,
        });
    }
    // A watch, or a log (whose stream lasts while the pods log): both end on revocation.
    // The query's `watch` was read for the rule above: not decoded again.
    let stream = streams.asked(|| asks_to_watch(query.watch.as_deref()));
    let response = next.run(request).await;
    if !stream || !response.status().is_success() {
        return response;
    }
    let granted = Granted {
        token,
        from,
        rule,
        namespaces,
    };
    let (parts, body) = response.into_parts();
    let body = body
        .into_data_stream()
        .take_until(until_revoked(auth, granted));
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// What a watch was allowed to show, kept to check again while it lasts.
struct Granted {
    token: String,
    from: IpAddr,
    rule: Rule,
    namespaces: NamespaceFilter,
}

/// Completes once the caller of a watch may no longer see what it shows: its token refused,
/// a required access denied, or a namespace it shows no longer visible. Checked whenever
/// [`Reviewer::rights_may_change`] ticks (at least every [`Reviewer::recheck_every`], which
/// keeps the token's review fresh, so a revoked token ends the watch within the token TTL). A review that
/// cannot be made (the apiserver away, throttled) ends nothing.
async fn until_revoked(auth: AuthLayer, granted: Granted) {
    let mut changes = auth.reviewer.rights_may_change();
    while changes.next().await.is_some() {
        if !still_granted(&auth, &granted).await {
            tracing::debug!(from = %granted.from, "a stream ends: its caller may no longer see what it shows");
            return;
        }
    }
}

async fn still_granted(auth: &AuthLayer, granted: &Granted) -> bool {
    let revoked = |e: &ReviewError| {
        matches!(
            e,
            ReviewError::Unauthenticated(_) | ReviewError::Forbidden { .. }
        )
    };
    let Granted {
        token, from, rule, ..
    } = granted;
    for access in &rule.required {
        if let Err(e) = auth.reviewer.review(token, *from, access).await
            && revoked(&e)
        {
            return false;
        }
    }
    let Some((_, access)) = &rule.per_namespace else {
        return true;
    };
    let now = match auth.reviewer.review(token, *from, access).await {
        Ok(()) => Namespaces::All,
        Err(ReviewError::Forbidden { .. }) => {
            match auth.reviewer.namespaces_where(token, *from, access).await {
                Ok(Some(now)) => now,
                // Without the policy, the per-namespace reviews of the start stand.
                Ok(None) => return true,
                Err(e) => return !revoked(&e),
            }
        }
        Err(e) => return !revoked(&e),
    };
    still_visible(&granted.namespaces, &now)
}

/// Whether every namespace a watch shows is still visible; one gained changes nothing (the
/// watch's namespaces are fixed when it starts).
fn still_visible(shown: &NamespaceFilter, now: &Namespaces) -> bool {
    match (shown, now) {
        (_, Namespaces::All) => true,
        (NamespaceFilter::All, Namespaces::Only(_)) => false,
        (NamespaceFilter::Only(shown), Namespaces::Only(now)) => shown.is_subset(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(namespace: Option<&str>, watch: Option<&str>) -> AccessQuery {
        AccessQuery {
            namespace: namespace.map(str::to_string),
            watch: watch.map(str::to_string),
        }
    }

    /// A resource served by a generic record: its rules come from its catalog row, a
    /// cluster-scoped one's across the cluster; one not served is left to the handler's 404.
    #[test]
    fn the_resource_routes_ask_for_the_named_resources_rights() {
        let config_maps = k8sdao::built_in("configmaps").unwrap().resource();
        let nodes = k8sdao::built_in("nodes").unwrap().resource();
        let shown = |route: &str, resource: &Resource, q: AccessQuery| -> Vec<String> {
            let rule = rule(route, &Method::GET, Some("web"), Some(resource), &q, None).unwrap();
            rule.required
                .iter()
                .map(ToString::to_string)
                .chain(
                    rule.per_namespace
                        .map(|(kind, access)| format!("{kind}s where {access}")),
                )
                .collect()
        };
        assert_eq!(
            shown(
                "/{resource}",
                &config_maps,
                query(Some("shop"), Some("true"))
            ),
            ["watch configmaps in namespace \"shop\""]
        );
        assert_eq!(
            shown("/{resource}", &config_maps, query(None, None)),
            ["configmaps where list configmaps in all namespaces"]
        );
        assert_eq!(
            shown("/{resource}/{name}/output", &config_maps, query(None, None)),
            ["get configmaps \"web\" in namespace \"default\""]
        );
        assert_eq!(
            shown("/{resource}", &nodes, query(Some("shop"), None)),
            ["list nodes in all namespaces"]
        );
        assert_eq!(
            shown("/{resource}/{name}", &nodes, query(Some("shop"), None)),
            ["get nodes \"web\" in all namespaces"]
        );
        let unknown = rule(
            "/{resource}",
            &Method::GET,
            None,
            None,
            &query(None, None),
            None,
        );
        assert!(unknown.is_some_and(|r| r.is_open()), "the 404 answers it");
        assert!(
            rule(
                "/{resource}",
                &Method::DELETE,
                None,
                Some(&nodes),
                &query(None, None),
                None
            )
            .is_none()
        );
    }

    /// Each access as `verb resource[/sub][.group] [name] in namespace`; a filter by rights
    /// as `<kind>s where <access>`.
    fn shown(route: &str, method: Method, q: AccessQuery, scope: Option<&str>) -> Vec<String> {
        let rule = rule(route, &method, Some("web"), None, &q, scope).unwrap();
        rule.required
            .iter()
            .map(ToString::to_string)
            .chain(
                rule.per_namespace
                    .map(|(kind, access)| format!("{kind}s where {access}")),
            )
            .collect()
    }

    /// The route table (routes.rs, kinds.rs) and these rules are written apart; this is what
    /// keeps them one table: each documented operation has its rule, and no rule allows a
    /// method its route does not take.
    #[test]
    fn every_route_has_its_rule_and_every_rule_its_route() {
        let openapi = super::super::routes::api("").take_openapi();
        let q = query(Some("shop"), None);
        for (path, item) in &openapi.paths.paths {
            let documented: Vec<Method> = [
                (Method::GET, item.get.is_some()),
                (Method::POST, item.post.is_some()),
                (Method::PUT, item.put.is_some()),
                (Method::PATCH, item.patch.is_some()),
                (Method::DELETE, item.delete.is_some()),
            ]
            .into_iter()
            .filter_map(|(method, present)| present.then_some(method))
            .collect();
            assert!(!documented.is_empty(), "{path} documents no operation");
            assert_eq!(
                methods_with_rules(path, None, &q, None),
                documented,
                "the methods with a rule on {path} are the ones it takes"
            );
        }
    }

    #[test]
    fn each_route_needs_what_the_apiserver_would_ask_for() {
        let ns = || query(Some("shop"), None);
        assert_eq!(
            shown("/ping", Method::GET, ns(), None),
            Vec::<String>::new()
        );
        // Across namespaces: no refusal, the objects of the namespaces where it is allowed.
        assert_eq!(
            shown("/deployments", Method::GET, query(None, None), None),
            ["deployments where list deployments.apps in all namespaces"]
        );
        assert_eq!(
            shown("/pods", Method::GET, query(Some(""), Some("true")), None),
            ["pods where watch pods in all namespaces"]
        );
        assert_eq!(
            shown(
                "/deployments",
                Method::GET,
                query(Some(""), Some("true")),
                Some("team")
            ),
            ["watch deployments.apps in namespace \"team\""]
        );
        assert_eq!(
            shown("/pods", Method::GET, query(Some("shop"), Some("1")), None),
            ["watch pods in namespace \"shop\""]
        );
        assert_eq!(
            shown("/deployments/{name}", Method::GET, query(None, None), None),
            ["get deployments.apps \"web\" in namespace \"default\""]
        );
        assert_eq!(
            shown("/deployments/{name}/replicas", Method::PUT, ns(), None),
            ["patch deployments/scale.apps \"web\" in namespace \"shop\""]
        );
        assert_eq!(
            shown("/deployments/{name}", Method::POST, ns(), None),
            ["create deployments.apps in namespace \"shop\""]
        );
        assert_eq!(
            shown("/deployments/{name}/pods", Method::GET, ns(), None),
            [
                "get deployments.apps \"web\" in namespace \"shop\"",
                "list pods in namespace \"shop\""
            ]
        );
        assert_eq!(
            shown(
                "/deployments/{name}/pods",
                Method::GET,
                query(Some("shop"), Some("true")),
                None
            ),
            [
                "get deployments.apps \"web\" in namespace \"shop\"",
                "watch pods in namespace \"shop\""
            ]
        );
        assert_eq!(
            shown("/pods/{name}/events", Method::GET, ns(), None),
            [
                "get pods \"web\" in namespace \"shop\"",
                "list events in namespace \"shop\""
            ]
        );
        assert_eq!(
            shown("/pods/{name}", Method::DELETE, ns(), None),
            ["delete pods \"web\" in namespace \"shop\""]
        );
        assert_eq!(
            shown("/services/{name}", Method::POST, ns(), None),
            ["create services in namespace \"shop\""]
        );
        assert_eq!(
            shown("/services/{name}/output", Method::GET, ns(), None),
            ["get services \"web\" in namespace \"shop\""]
        );
        assert_eq!(
            shown("/ingresses/{name}", Method::POST, query(None, None), None),
            ["create ingresses.networking.k8s.io in namespace \"default\""]
        );
        assert_eq!(
            shown("/ingresses/{name}/output", Method::GET, ns(), None),
            ["get ingresses.networking.k8s.io \"web\" in namespace \"shop\""]
        );
        assert_eq!(
            shown("/statefulsets/{name}/logs", Method::GET, ns(), None),
            [
                "get statefulsets.apps \"web\" in namespace \"shop\"",
                "list pods in namespace \"shop\""
            ]
        );
        assert_eq!(
            shown("/pods/{name}/logs", Method::GET, ns(), None),
            [
                "get pods \"web\" in namespace \"shop\"",
                "get pods/log \"web\" in namespace \"shop\""
            ]
        );
        assert!(
            rule("/pods/{name}", &Method::PATCH, None, None, &ns(), None).is_none(),
            "a route without a rule is refused"
        );
        assert_eq!(
            methods_with_rules("/pods", None, &ns(), None),
            [Method::GET],
            "PUT /pods is a 405 naming GET"
        );
        assert_eq!(
            methods_with_rules("/deployments/{name}", None, &ns(), None),
            [Method::GET, Method::POST, Method::DELETE]
        );
        assert!(methods_with_rules("/secrets", None, &ns(), None).is_empty());
    }

    #[test]
    fn a_watch_goes_on_while_every_namespace_it_shows_is_visible() {
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        let shown = NamespaceFilter::only(["a".to_string(), "b".to_string()]);
        assert!(still_visible(&shown, &Namespaces::All));
        assert!(still_visible(
            &shown,
            &Namespaces::Only(set(&["a", "b", "c"]))
        ));
        assert!(!still_visible(&shown, &Namespaces::Only(set(&["a"]))));
        assert!(!still_visible(&shown, &Namespaces::Only(set(&[]))));
        assert!(still_visible(&NamespaceFilter::All, &Namespaces::All));
        assert!(!still_visible(
            &NamespaceFilter::All,
            &Namespaces::Only(set(&["a", "b"]))
        ));
    }

    #[test]
    fn only_bearer_tokens_count() {
        let with = |value: &str| {
            axum::http::Request::get("/")
                .header(header::AUTHORIZATION, value)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        assert_eq!(bearer_token(&with("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&with("Basic abc")), None);
        assert_eq!(bearer_token(&with("Bearer ")), None);
    }
}
