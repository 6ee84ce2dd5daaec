//! The Kubernetes API itself, served from memory at the server's root beside the prefix:
//! discovery, the apiserver's OpenAPI documents (relayed and kept), and the reads (lists,
//! objects, Tables, watches) of every served resource whose whole object the cache keeps,
//! answered as the apiserver answers them, so that kubectl and client-go can be pointed at
//! k8sailor. The rest (writes, subresources) is relayed to the apiserver as its caller
//! (`relay.rs`), or refused without auth, where k8sailor answers SelfSubjectAccessReviews
//! itself (`review.rs`).

mod access;
mod answers;
mod discovery;
mod media;
mod openapi;
mod query;
mod reads;
mod relay;
mod review;
mod status;
mod websocket;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

use super::AppState;
use crate::auth::AuthMode;
use crate::fairness::{self, Held};
pub(super) use access::check;
pub use answers::DEFAULT_KEPT_ANSWER_BYTES;
pub(crate) use answers::{AnswerFigures, Answers};
#[cfg(test)]
pub(super) use reads::Streamed;
pub(super) use reads::is_streamed;
use status::Status;
pub(super) use websocket::asks_websocket;

/// The routes of the Kubernetes API besides the paths under `/api/` and `/apis/`, which
/// [`Paths`] serves.
pub(super) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    let refused = || async { Status::method_not_allowed() };
    vec![
        ("/version", get(discovery::version).fallback(refused)),
        ("/api", get(discovery::core_versions).fallback(refused)),
        ("/apis", get(discovery::groups).fallback(refused)),
        ("/openapi/v2", get(openapi::document).fallback(refused)),
        ("/openapi/v3", get(openapi::document).fallback(refused)),
        (
            "/openapi/v3/{*path}",
            get(openapi::document).fallback(refused),
        ),
    ]
}

/// The query parameters that make a request a stream.
#[derive(serde::Deserialize)]
struct StreamQuery {
    watch: Option<String>,
    follow: Option<String>,
}

/// The fair share of each caller, as on the prefix's routes: a watch or a followed log holds
/// a watch's place for as long as it is open, any other request a request's until answered;
/// one past its share gets the apiserver's 429 Status.
pub(super) struct StatusShares(pub AppState);

impl fairness::ShareRule for StatusShares {
    fn held(&self, request: &Request) -> Held {
        // An invalid query or flag is the handler's 400 (or the apiserver's); here, no stream.
        // Most requests are told so without decoding their query.
        let query = request.uri().query().unwrap_or("");
        let may_stream = fairness::may_name(query, &["watch", "follow"]);
        let (watch, follow) = match may_stream
            .then(|| axum::extract::Query::<StreamQuery>::try_from_uri(request.uri()))
        {
            Some(Ok(q)) => (
                query::flag(q.0.watch.as_deref(), "watch").unwrap_or(false),
                query::flag(q.0.follow.as_deref(), "follow").unwrap_or(false),
            ),
            Some(Err(_)) | None => (false, false),
        };
        let followed_log = follow
            && matches!(
                Routed::of(&self.0, request.method(), request.uri().path()).target,
                Some(Target::Subresource { subresource, .. }) if subresource == "log"
            );
        // An exec, attach or port-forward session lasts as long as its switched connection.
        if watch || followed_log || fairness::switches_protocols(request) {
            Held::Watches
        } else {
            Held::Requests
        }
    }

    fn refused(&self, refused: fairness::Refused) -> Response {
        Status::too_many_requests(refused).into_response()
    }
}

/// Whether a method only reads.
fn reads(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// The target of a request's path under `/api` or `/apis`, and whether memory answers it.
pub(super) struct Routed<'a> {
    pub target: Option<Target<'a>>,
    pub from_memory: bool,
    /// The served resource a read of a collection or object names.
    pub resource: Option<biz::Resource>,
}

impl<'a> Routed<'a> {
    pub fn of(s: &AppState, method: &Method, path: &'a str) -> Routed<'a> {
        let target = if let Some(rest) = path.strip_prefix("/api/") {
            Target::parse(true, rest)
        } else if let Some(rest) = path.strip_prefix("/apis/") {
            Target::parse(false, rest)
        } else {
            None
        };
        // Looked up for a read only: anything else is relayed, or refused.
        let resource = match &target {
            _ if !reads(method) => None,
            Some(Target::Collection {
                group,
                version,
                resource,
                ..
            })
            | Some(Target::Object {
                group,
                version,
                resource,
                ..
            }) => reads::served_resource(s, group, version, resource),
            _ => None,
        };
        // `/version`, `/api` and `/apis` are discovery too: open, as their paths under them.
        let root_discovery = matches!(path, "/version" | "/api" | "/apis");
        let from_memory = reads(method)
            && (root_discovery
                || resource.is_some()
                // Discovery is ours: it lists what memory serves.
                || matches!(
                    target,
                    Some(Target::Group { .. } | Target::GroupVersion { .. })
                ));
        Routed {
            target,
            from_memory,
            resource,
        }
    }
}

/// Every path under `/api/` and `/apis/`: one handler that reads it as a [`Target`], so that
/// the handler, the access check and the fairness share read it alike. What memory cannot
/// answer is relayed to the apiserver with the caller's own token under `--auth delegated`
/// (exec, attach and port-forward too, their switched connections joined), and refused as
/// the apiserver would refuse it under `--auth none` (404 for a read, 405 for a write or a
/// session): k8sailor's identity is never lent.
///
/// Served beside the router rather than as a route `/api/{*path}`: the router would decode
/// the rest of the path into a parameter with every request, which nothing reads.
#[derive(Clone)]
pub(super) struct Paths {
    pub state: AppState,
    pub auth: AuthMode,
}

impl Paths {
    /// Whether `path` is one of these, and under which route template its requests are
    /// counted.
    pub fn template(path: &str) -> Option<PathsTemplate> {
        if path.starts_with("/api/") {
            Some(PathsTemplate::Core)
        } else if path.starts_with("/apis/") {
            Some(PathsTemplate::Groups)
        } else {
            None
        }
    }
}

/// The route templates the Kubernetes API's paths are counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathsTemplate {
    Core,
    Groups,
}

impl PathsTemplate {
    pub fn as_str(self) -> &'static str {
        match self {
            PathsTemplate::Core => "/api/{*path}",
            PathsTemplate::Groups => "/apis/{*path}",
        }
    }
}

impl tower::Service<Request> for Paths {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (s, auth) = (self.state.clone(), self.auth);
        Box::pin(async move { Ok(answer(s, auth, request).await) })
    }
}

async fn answer(s: AppState, auth: AuthMode, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    // The target borrows the path, and a read takes the parts whole (a WebSocket watch its
    // upgrade from them): routed on a copy of the Uri, which shares its bytes.
    let uri = parts.uri.clone();
    let routed = Routed::of(&s, &parts.method, uri.path());
    if routed.from_memory {
        return reads::read(s, routed, parts).await;
    }
    match auth {
        // Boxed, as the writes relayed below: kept out of the future every read makes.
        AuthMode::None if review::is_self_review(&parts.method, routed.target.as_ref()) => {
            Box::pin(review::answer(&s, Request::from_parts(parts, body))).await
        }
        // A session runs a command or opens a port as its caller (RBAC's `create`, whichever
        // method asks): a write, refused as writes are.
        AuthMode::None if routed.target.as_ref().is_some_and(Target::opens_session) => {
            Status::method_not_allowed().into_response()
        }
        AuthMode::None if reads(&parts.method) => Status::no_such_path().into_response(),
        AuthMode::None => Status::method_not_allowed().into_response(),
        AuthMode::Delegated => {
            let written = relay::written(&s, routed.target.as_ref());
            Box::pin(relay::forward(s, written, Request::from_parts(parts, body))).await
        }
    }
}

/// Whether some media range of `Accept` has every one of `params` (`as=Table`, `v=v1`...):
/// how clients ask for a Table or aggregated discovery instead of the plain document.
fn accepts(headers: &HeaderMap, params: &[&str]) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let given: Vec<&str> = range.split(';').map(str::trim).collect();
            params.iter().all(|p| given.contains(p))
        })
}

/// A JSON document as the apiserver answers it, of `content_type`.
fn json_answer(content_type: &'static str, body: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body.to_string(),
    )
        .into_response()
}

/// What a path under `/api` or `/apis` names, in the path's own words: read on every
/// request, so nothing is copied out of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target<'a> {
    /// `/apis/{group}`: the group's versions.
    Group { group: &'a str },
    /// `/api/v1`, `/apis/{group}/{version}`: the resources served in it.
    GroupVersion { group: &'a str, version: &'a str },
    /// `.../{resource}`, `.../namespaces/{ns}/{resource}`.
    Collection {
        group: &'a str,
        version: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
    },
    /// `.../{resource}/{name}`, `.../namespaces/{ns}/{resource}/{name}`.
    Object {
        group: &'a str,
        version: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    },
    /// `.../{resource}/{name}/{subresource}` (`log`, `scale`, `eviction`...), never served
    /// from memory.
    Subresource {
        group: &'a str,
        version: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
        subresource: &'a str,
    },
}

/// The subresources that open a session with a container (a command's streams, a
/// container's, a pod's ports), carried on a connection switched to WebSocket or SPDY.
const SESSIONS: [&str; 3] = ["exec", "attach", "portforward"];

/// The most segments a path under `/api` or `/apis` the apiserver serves has:
/// `{group}/{version}/namespaces/{ns}/{resource}/{name}/{subresource}`.
const MAX_SEGMENTS: usize = 7;

impl<'a> Target<'a> {
    /// Whether this is a pod's exec, attach or portforward.
    pub(super) fn opens_session(&self) -> bool {
        matches!(self, Target::Subresource { group, resource, subresource, .. }
            if group.is_empty() && *resource == "pods" && SESSIONS.contains(subresource))
    }

    /// `path` under `/api` (`core`) or `/apis`, without its leading slash; None for what the
    /// apiserver would not serve either.
    pub(super) fn parse(core: bool, path: &'a str) -> Option<Target<'a>> {
        // Split into a fixed array: a path with more segments than any served one is
        // refused without counting them all.
        let mut segments = [""; MAX_SEGMENTS];
        let mut count = 0;
        let mut rest = path.trim_end_matches('/');
        loop {
            let (segment, after) = match rest.bytes().position(|b| b == b'/') {
                Some(at) => (&rest[..at], Some(&rest[at + 1..])),
                None => (rest, None),
            };
            if segment.is_empty() || count == MAX_SEGMENTS {
                return None;
            }
            segments[count] = segment;
            count += 1;
            match after {
                Some(after) => rest = after,
                None => break,
            }
        }
        let segments = &segments[..count];
        let (group, rest) = if core {
            ("", segments)
        } else {
            let (group, rest) = segments.split_first()?;
            if rest.is_empty() {
                return Some(Target::Group { group });
            }
            (*group, rest)
        };
        let (version, rest) = rest.split_first()?;
        let version = *version;
        Some(match *rest {
            [] => Target::GroupVersion { group, version },
            [resource] => Target::Collection {
                group,
                version,
                resource,
                namespace: None,
            },
            [resource, name] => Target::Object {
                group,
                version,
                resource,
                namespace: None,
                name,
            },
            ["namespaces", namespace, resource] => Target::Collection {
                group,
                version,
                resource,
                namespace: Some(namespace),
            },
            ["namespaces", namespace, resource, name] => Target::Object {
                group,
                version,
                resource,
                namespace: Some(namespace),
                name,
            },
            [resource, name, subresource] => Target::Subresource {
                group,
                version,
                resource,
                namespace: None,
                name,
                subresource,
            },
            ["namespaces", namespace, resource, name, subresource] => Target::Subresource {
                group,
                version,
                resource,
                namespace: Some(namespace),
                name,
                subresource,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_what_the_apiserver_serves_there() {
        assert_eq!(
            Target::parse(true, "v1"),
            Some(Target::GroupVersion {
                group: "",
                version: "v1"
            })
        );
        assert_eq!(
            Target::parse(false, "apps"),
            Some(Target::Group { group: "apps" })
        );
        assert_eq!(
            Target::parse(true, "v1/namespaces/ns/configmaps/web"),
            Some(Target::Object {
                group: "",
                version: "v1",
                resource: "configmaps",
                namespace: Some("ns"),
                name: "web",
            })
        );
        assert_eq!(
            Target::parse(false, "apps/v1/statefulsets"),
            Some(Target::Collection {
                group: "apps",
                version: "v1",
                resource: "statefulsets",
                namespace: None,
            })
        );
        assert_eq!(
            Target::parse(true, "v1/nodes/n1"),
            Some(Target::Object {
                group: "",
                version: "v1",
                resource: "nodes",
                namespace: None,
                name: "n1",
            })
        );
        assert_eq!(
            Target::parse(true, "v1/namespaces/ns/pods/web/log"),
            Some(Target::Subresource {
                group: "",
                version: "v1",
                resource: "pods",
                namespace: Some("ns"),
                name: "web",
                subresource: "log",
            })
        );
        for unserved in ["v1//pods", "", "v1/a/b/c/d/e"] {
            assert_eq!(Target::parse(true, unserved), None, "{unserved}");
        }
    }
}
