//! `--auth delegated`: every API request but `/ping` carries a bearer token, and its owner
//! must be allowed by the cluster's RBAC to do what the request reads or writes, exactly as if
//! it asked the apiserver itself (TokenReview, then SubjectAccessReview, both cached). Probes,
//! metrics and the OpenAPI description stay open, as the apiserver's own are.

use std::sync::Arc;

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use confk8s::{Access, ReviewError, Reviewer};
use serde::Deserialize;

use super::ApiError;
use crate::biz::DEFAULT_NAMESPACE;

/// Who may call the API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Anyone who reaches the port (the original k8sailor, on 127.0.0.1).
    #[default]
    None,
    /// Bearer tokens, checked with the apiserver; each request authorized by RBAC.
    Delegated,
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
}

#[derive(Deserialize, Default)]
struct AccessQuery {
    namespace: Option<String>,
    watch: Option<String>,
}

const APPS: &str = "apps";
const CORE: &str = "";

fn access(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
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

/// What a request to `route` (a template under the prefix) does in RBAC terms, every access
/// required; None for a route without a rule, which is refused (fail closed).
fn accesses(
    route: &str,
    method: &Method,
    name: Option<&str>,
    query: &AccessQuery,
    scope: Option<&str>,
) -> Option<Vec<Access>> {
    // Lists: the namespace asked for, else the served one, else all; objects: kubectl's default.
    let asked = query.namespace.as_deref().filter(|ns| !ns.is_empty());
    let list_ns = asked.or(scope);
    let object_ns = Some(asked.unwrap_or(DEFAULT_NAMESPACE));
    // An invalid `watch` is the handler's 400; here it is no watch.
    let watch = super::watch::is_watch(query.watch.as_deref()).unwrap_or(false);
    let list_verb = if watch { "watch" } else { "list" };
    Some(match (route, method.as_str()) {
        ("/ping", "GET") => Vec::new(),
        ("/deployments", "GET") => vec![access(list_verb, APPS, "deployments", list_ns, None)],
        ("/deployments/{name}", "GET") => {
            vec![access("get", APPS, "deployments", object_ns, name)]
        }
        ("/deployments/{name}", "POST") => {
            vec![access("create", APPS, "deployments", object_ns, None)]
        }
        ("/deployments/{name}", "DELETE") => {
            vec![access("delete", APPS, "deployments", object_ns, name)]
        }
        ("/deployments/{name}/replicas", "PUT") => vec![Access {
            subresource: "scale",
            ..access("patch", APPS, "deployments", object_ns, name)
        }],
        ("/deployments/{name}/pods", "GET") => vec![
            access("get", APPS, "deployments", object_ns, name),
            access(list_verb, CORE, "pods", object_ns, None),
        ],
        ("/pods", "GET") => vec![access(list_verb, CORE, "pods", list_ns, None)],
        ("/pods/{name}" | "/pods/{name}/output", "GET") => {
            vec![access("get", CORE, "pods", object_ns, name)]
        }
        ("/pods/{name}", "DELETE") => vec![access("delete", CORE, "pods", object_ns, name)],
        ("/pods/{name}/event" | "/pods/{name}/events", "GET") => vec![
            access("get", CORE, "pods", object_ns, name),
            access("list", CORE, "events", object_ns, None),
        ],
        _ => return None,
    })
}

fn bearer_token(request: &Request) -> Option<&str> {
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
fn methods_with_rules(route: &str, query: &AccessQuery, scope: Option<&str>) -> Vec<Method> {
    [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ]
    .into_iter()
    .filter(|m| accesses(route, m, None, query, scope).is_some())
    .collect()
}

fn method_not_allowed(method: &Method, route: &str, allowed: &[Method]) -> Response {
    let allow = allowed
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed on {route}: use {allow}"),
    )
    .into_response();
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

/// Refuses the request unless its token's owner may do everything it does.
pub(super) async fn check(
    State(auth): State<AuthLayer>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Response {
    let params = match params {
        Ok(params) => params,
        Err(e) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("invalid path: {}", e.body_text()),
            )
            .into_response();
        }
    };
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let route = template
        .strip_prefix(auth.prefix.as_str())
        .unwrap_or(&template);
    let name = params.iter().find(|(k, _)| *k == "name").map(|(_, v)| v);
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
    let scope = auth.scope.as_deref();
    let Some(required) = accesses(route, request.method(), name, &query, scope) else {
        let allowed = methods_with_rules(route, &query, scope);
        if !allowed.is_empty() {
            return method_not_allowed(request.method(), route, &allowed);
        }
        // A route served without a rule is refused: fail closed.
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!("no access rule for {} {route}", request.method()),
        )
        .into_response();
    };
    if required.is_empty() {
        return next.run(request).await;
    }
    let Some(token) = bearer_token(&request) else {
        return unauthenticated(
            "a bearer token is required: send 'Authorization: Bearer <token>' (e.g. from kubectl create token)".into(),
        );
    };
    for access in &required {
        if let Err(e) = auth.reviewer.review(token, access).await {
            return match e {
                ReviewError::Unauthenticated(reason) => unauthenticated(reason),
                ReviewError::Forbidden { .. } => {
                    ApiError::new(StatusCode::FORBIDDEN, e.to_string()).into_response()
                }
                ReviewError::Unavailable(_) => {
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
                }
                ReviewError::Throttled { retry_after } => {
                    let mut response =
                        ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()).into_response();
                    response.headers_mut().insert(
                        header::RETRY_AFTER,
                        HeaderValue::from(retry_after.as_secs()),
                    );
                    response
                }
            };
        }
    }
    next.run(request).await
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

    /// Each access as `verb resource[/sub][.group] [name] in namespace`.
    fn shown(route: &str, method: Method, q: AccessQuery, scope: Option<&str>) -> Vec<String> {
        accesses(route, &method, Some("web"), &q, scope)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn each_route_needs_what_the_apiserver_would_ask_for() {
        let ns = || query(Some("shop"), None);
        assert_eq!(
            shown("/ping", Method::GET, ns(), None),
            Vec::<String>::new()
        );
        assert_eq!(
            shown("/deployments", Method::GET, query(None, None), None),
            ["list deployments.apps in all namespaces"]
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
        assert!(
            accesses("/pods/{name}", &Method::PATCH, None, &ns(), None).is_none(),
            "a route without a rule is refused"
        );
        assert_eq!(
            methods_with_rules("/pods", &ns(), None),
            [Method::GET],
            "PUT /pods is a 405 naming GET"
        );
        assert_eq!(
            methods_with_rules("/deployments/{name}", &ns(), None),
            [Method::GET, Method::POST, Method::DELETE]
        );
        assert!(methods_with_rules("/secrets", &ns(), None).is_empty());
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
