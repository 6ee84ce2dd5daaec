//! Which web pages may call the API from a browser (CORS), as configured by
//! `corsAllowedOrigins`: an origin (`http://127.0.0.1:8080`), an origin with any port
//! (`http://localhost:*`), or `*` alone for any page. The default is the loopback origins on
//! any port: the original web client runs on another loopback port, and a page from anywhere
//! else must not drive the API from the operator's browser.

use axum::http::header::Entry;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::host_check::Host;

/// The default of `corsAllowedOrigins`: pages served from this machine, on any port.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// `*`: any page, never with credentials (a browser refuses the pair, and it would hand
    /// every page the user's credentials).
    Any,
    /// These origins, with credentials; empty: CORS off.
    Listed(Vec<OriginPattern>),
}

/// `scheme://host[:port]`, or `scheme://host:*` for any port (the default port included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: String,
    host: Host,
    port: PortPattern,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PortPattern {
    Any,
    /// None: the scheme's default port, which browsers leave out of `Origin`.
    Is(Option<u16>),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OriginError {
    #[error("{0:?} is not an origin like http://127.0.0.1:8080 or http://localhost:* (any port)")]
    Malformed(String),
    #[error(
        "\"null\" is the origin of sandboxed and file pages, which anyone can make: it cannot be allowed"
    )]
    Null,
    #[error("\"*\" allows every origin and cannot be combined with others")]
    WildcardAmongOthers,
}

impl AllowedOrigins {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowedOrigins, OriginError> {
        if entries.iter().any(|e| e.as_ref().trim() == "*") {
            return match entries.len() {
                1 => Ok(AllowedOrigins::Any),
                _ => Err(OriginError::WildcardAmongOthers),
            };
        }
        entries
            .iter()
            .map(|e| OriginPattern::parse(e.as_ref()))
            .collect::<Result<_, _>>()
            .map(AllowedOrigins::Listed)
    }

    pub fn loopback() -> AllowedOrigins {
        AllowedOrigins::parse(&LOOPBACK_ORIGINS).expect("the loopback origins parse")
    }

    /// Whether a request's `Origin` header is allowed.
    pub fn allows(&self, origin: &[u8]) -> bool {
        match self {
            AllowedOrigins::Any => true,
            AllowedOrigins::Listed(patterns) => std::str::from_utf8(origin)
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|origin| patterns.iter().any(|p| p.matches(&origin))),
        }
    }
}

/// A parsed origin, normalized for comparison.
struct Origin {
    scheme: String,
    host: Host,
    port: Option<u16>,
}

impl Origin {
    /// `scheme://host[:port]` and nothing more: a path, user or query is not an origin. The
    /// scheme's default port is no port, as browsers write it.
    fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.split_once("://")?;
        let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
        if !valid_scheme {
            return None;
        }
        let scheme = scheme.to_ascii_lowercase();
        let (host, port) = Host::parse_with_port(rest)?;
        let default = match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        let port = port.filter(|p| Some(*p) != default);
        Some(Origin { scheme, host, port })
    }
}

impl OriginPattern {
    pub fn parse(entry: &str) -> Result<OriginPattern, OriginError> {
        let entry = entry.trim();
        if entry.eq_ignore_ascii_case("null") {
            return Err(OriginError::Null);
        }
        let malformed = || OriginError::Malformed(entry.to_string());
        let (text, any_port) = match entry.strip_suffix(":*") {
            Some(text) => (text, true),
            None => (entry, false),
        };
        let origin = Origin::parse(text).ok_or_else(malformed)?;
        let port = if any_port {
            // `http://localhost:8080:*` would otherwise parse as "any port".
            if origin.port.is_some() {
                return Err(malformed());
            }
            PortPattern::Any
        } else {
            PortPattern::Is(origin.port)
        };
        Ok(OriginPattern {
            scheme: origin.scheme,
            host: origin.host,
            port,
        })
    }

    fn matches(&self, origin: &Origin) -> bool {
        self.scheme == origin.scheme
            && self.host == origin.host
            && match self.port {
                PortPattern::Any => true,
                PortPattern::Is(port) => port == origin.port,
            }
    }
}

/// The CORS rules for the allowed origins, answered in one pass by the edge (`edge::Edge`):
/// what tower-http's `CorsLayer` answered for our configuration (a differential test holds
/// them equal), without its per-request clone of its configuration and header map.
#[derive(Debug)]
pub(super) struct Cors {
    origins: AllowedOrigins,
    /// Named origins: every answer, preflight or not, varies by the request's `Origin`.
    varies_by_origin: bool,
    allow_methods: HeaderValue,
    allow_headers: HeaderValue,
    /// Seconds a browser may keep a preflight's answer.
    max_age: HeaderValue,
}

/// What CORS adds to one answer, decided from the request before it is served. A served
/// answer's `Vary` is written whole by the layer that serves it (`Served`, once for gzip's
/// reason and CORS's): [`Allowance::vary`] is for the answers the edge makes itself.
pub struct Allowance {
    varies_by_origin: bool,
    /// `Access-Control-Allow-Origin`: `*`, or the request's origin when allowed.
    origin: Option<HeaderValue>,
    /// Named origins may send credentials; `*` never (a browser refuses the pair).
    credentials: bool,
}

impl Cors {
    /// The rules for `origins`; None when CORS is off (no origin listed).
    pub(super) fn new(origins: &AllowedOrigins) -> Option<Cors> {
        match origins {
            AllowedOrigins::Listed(patterns) if patterns.is_empty() => None,
            _ => Some(Cors {
                origins: origins.clone(),
                varies_by_origin: matches!(origins, AllowedOrigins::Listed(_)),
                allow_methods: HeaderValue::from_static("GET,PUT,POST,DELETE,OPTIONS"),
                allow_headers: HeaderValue::from_static("content-type,authorization"),
                max_age: HeaderValue::from(600),
            }),
        }
    }

    pub(super) fn allowance(&self, request: &HeaderMap) -> Allowance {
        let (origin, credentials) = match &self.origins {
            AllowedOrigins::Any => (Some(HeaderValue::from_static("*")), false),
            AllowedOrigins::Listed(_) => {
                let origin = request
                    .get(header::ORIGIN)
                    .filter(|origin| self.origins.allows(origin.as_bytes()))
                    .cloned();
                let credentials = origin.is_some();
                (origin, credentials)
            }
        };
        Allowance {
            varies_by_origin: self.varies_by_origin,
            origin,
            credentials,
        }
    }

    /// Whether every answer varies by the request's `Origin` (origins are named).
    pub(super) fn varies_by_origin(&self) -> bool {
        self.varies_by_origin
    }

    /// While CORS is on every `OPTIONS` is a preflight, answered here whatever its path: 204
    /// No Content, as the original (gin) answered every OPTIONS.
    pub(super) fn preflight(&self, request: &HeaderMap) -> Response {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let answer = response.headers_mut();
        answer.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            self.allow_methods.clone(),
        );
        answer.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            self.allow_headers.clone(),
        );
        answer.insert(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        let allowance = self.allowance(request);
        allowance.vary(answer);
        allowance.apply(&mut response);
        response
    }
}

impl Allowance {
    /// Adds what the answer varies by for CORS to its `Vary`.
    pub(super) fn vary(&self, headers: &mut HeaderMap) {
        if self.varies_by_origin {
            vary_by_origin(headers);
        }
    }

    pub(super) fn apply(self, response: &mut Response) {
        let headers = response.headers_mut();
        if let Some(origin) = self.origin {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        }
        if self.credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }
}

/// The one `Vary` field of an answer that varies by `Accept-Encoding` and by `Origin`: what
/// a compressible answer served while origins are named gets when it has no `Vary` yet,
/// written at once instead of one name and then the other merged into it.
pub(super) const BY_ENCODING_AND_ORIGIN: HeaderValue =
    HeaderValue::from_static("accept-encoding, origin");

/// `Origin` added to the answer's `Vary`, as [`vary_also_by`] adds a name.
pub(super) fn vary_by_origin(headers: &mut HeaderMap) {
    vary_also_by(headers, HeaderValue::from_static("origin"));
}

/// `vary` added to the answer's `Vary`: a `Vary` it already has is kept (caches must vary
/// by both), in one field listing both where it has one field (as gzip's `Accept-Encoding`),
/// since a second field is kept in a list of the map's own, made for each answer.
fn vary_also_by(headers: &mut HeaderMap, vary: HeaderValue) {
    match headers.entry(header::VARY) {
        Entry::Vacant(field) => {
            field.insert(vary);
        }
        Entry::Occupied(mut field) if field.iter().count() == 1 => {
            let listed = field.get();
            let both =
                HeaderValue::from_bytes(&[listed.as_bytes(), b", ", vary.as_bytes()].concat());
            match both {
                Ok(both) => {
                    field.insert(both);
                }
                Err(_) => field.append(vary),
            }
        }
        Entry::Occupied(mut field) => field.append(vary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tower-http's layer as k8sailor configured it before the edge answered CORS itself.
    fn reference_layer(origins: &AllowedOrigins) -> tower_http::cors::CorsLayer {
        use axum::http::Method;
        use tower_http::cors::{AllowCredentials, AllowOrigin, CorsLayer};
        let base = CorsLayer::new()
            .allow_methods([
                Method::GET,
                Method::PUT,
                Method::POST,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
            .max_age(std::time::Duration::from_secs(600));
        match origins {
            AllowedOrigins::Any => base.allow_origin(AllowOrigin::any()),
            AllowedOrigins::Listed(_) => {
                let origins = std::sync::Arc::new(origins.clone());
                let allowed = move |origin: &HeaderValue, _: &_| origins.allows(origin.as_bytes());
                base.allow_origin(AllowOrigin::predicate(allowed.clone()))
                    .allow_credentials(AllowCredentials::predicate(allowed))
            }
        }
    }

    #[test]
    fn vary_lists_what_the_answer_varies_by_in_one_field() {
        let listed = |headers: &HeaderMap| {
            (headers.get_all(header::VARY).iter())
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let origin = || HeaderValue::from_static("origin");
        let mut headers = HeaderMap::new();
        vary_also_by(&mut headers, origin());
        assert_eq!(listed(&headers), ["origin"]);
        let mut headers = HeaderMap::new();
        headers.insert(header::VARY, HeaderValue::from(header::ACCEPT_ENCODING));
        vary_also_by(&mut headers, origin());
        assert_eq!(listed(&headers), ["accept-encoding, origin"]);
        let mut headers = HeaderMap::new();
        headers.insert(header::VARY, HeaderValue::from_static("accept"));
        vary_also_by(&mut headers, origin());
        assert_eq!(listed(&headers), ["accept, origin"]);
        let mut headers = HeaderMap::new();
        headers.append(header::VARY, HeaderValue::from_static("accept"));
        headers.append(header::VARY, HeaderValue::from_static("cookie"));
        vary_also_by(&mut headers, origin());
        assert_eq!(listed(&headers), ["accept", "cookie", "origin"]);
    }

    #[tokio::test]
    async fn the_edge_answers_cors_as_tower_http_did() {
        use axum::body::Body;
        use axum::http::Request;
        use tower::{Layer, ServiceExt};
        let served = |_: Request<Body>| async {
            let mut response = "data".into_response();
            response
                .headers_mut()
                .insert(header::VARY, HeaderValue::from_static("accept"));
            Ok::<_, std::convert::Infallible>(response)
        };
        for configured in [
            AllowedOrigins::Any,
            AllowedOrigins::loopback(),
            AllowedOrigins::parse(&["https://dash.example.com"]).unwrap(),
        ] {
            let cors = Cors::new(&configured).unwrap();
            for method in ["GET", "POST", "OPTIONS"] {
                for origin in [
                    None,
                    Some("http://localhost:5173"),
                    Some("https://dash.example.com"),
                    Some("http://evil.example"),
                ] {
                    let request = || {
                        let mut request = Request::builder().method(method).uri("/x");
                        if let Some(origin) = origin {
                            request = request.header(header::ORIGIN, origin);
                        }
                        request
                            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "DELETE")
                            .body(Body::empty())
                            .unwrap()
                    };
                    let reference = reference_layer(&configured)
                        .layer(tower::service_fn(served))
                        .oneshot(request())
                        .await
                        .unwrap();
                    let request = request();
                    let ours = if method == "OPTIONS" {
                        cors.preflight(request.headers())
                    } else {
                        let allowance = cors.allowance(request.headers());
                        let mut response = served(request).await.unwrap();
                        // What `Served` adds to a served answer's `Vary` for CORS.
                        allowance.vary(response.headers_mut());
                        allowance.apply(&mut response);
                        response
                    };
                    let case = format!("{configured:?} {method} {origin:?}");
                    // A `Vary` of two fields is the one field that lists both.
                    let sorted = |headers: &HeaderMap| {
                        let mut all: Vec<(String, Vec<u8>)> = headers
                            .iter()
                            .flat_map(|(n, v)| {
                                let listed = if n == header::VARY {
                                    v.as_bytes().split(|&b| b == b',').collect()
                                } else {
                                    vec![v.as_bytes()]
                                };
                                listed
                                    .into_iter()
                                    .map(move |v| (n.to_string(), v.trim_ascii().to_vec()))
                            })
                            .collect();
                        all.sort();
                        all
                    };
                    assert_eq!(
                        sorted(ours.headers()),
                        sorted(reference.headers()),
                        "{case}"
                    );
                    // tower-http answered preflights 200, which k8sailor turned into 204.
                    let expected = match reference.status() {
                        axum::http::StatusCode::OK if method == "OPTIONS" => {
                            axum::http::StatusCode::NO_CONTENT
                        }
                        status => status,
                    };
                    assert_eq!(ours.status(), expected, "{case}");
                }
            }
        }
    }

    fn allows(patterns: &[&str], origin: &str) -> bool {
        AllowedOrigins::parse(patterns)
            .unwrap()
            .allows(origin.as_bytes())
    }

    #[test]
    fn the_default_allows_loopback_pages_on_any_port_and_nothing_else() {
        let loopback = AllowedOrigins::loopback();
        for origin in [
            "http://127.0.0.1:8080",
            "http://localhost:5173",
            "http://localhost",
            "https://localhost:8443",
            "http://[::1]:8080",
            "http://[0:0:0:0:0:0:0:1]:8080",
            "HTTP://LocalHost:8080",
            "http://localhost.:8080",
        ] {
            assert!(loopback.allows(origin.as_bytes()), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://localhost.evil.example:8080",
            "http://127.0.0.1.evil.example",
            "http://evil.example/http://localhost:8080",
            "http://localhost:8080/",
            "http://localhost:8080/path",
            "http://user@localhost:8080",
            "ws://localhost:8080",
            "null",
            "",
            "localhost:8080",
            "http://[::2]:8080",
            "http://[::1",
            "http://127.0.0.2:8080",
        ] {
            assert!(!loopback.allows(origin.as_bytes()), "{origin}");
        }
        assert!(!loopback.allows(b"http://localhost:\xff"));
    }

    #[test]
    fn a_named_port_matches_that_port_only_and_the_default_port_is_implied() {
        let patterns = ["http://127.0.0.1:8080", "https://dash.example.com"];
        assert!(allows(&patterns, "http://127.0.0.1:8080"));
        assert!(!allows(&patterns, "http://127.0.0.1:8081"));
        assert!(!allows(&patterns, "http://127.0.0.1"));
        assert!(!allows(&patterns, "https://127.0.0.1:8080"));
        assert!(allows(&patterns, "https://dash.example.com"));
        assert!(allows(&patterns, "https://dash.example.com:443"));
        assert!(allows(&patterns, "https://Dash.Example.com."));
        assert!(!allows(&patterns, "https://dash.example.com:8443"));
        assert!(!allows(&patterns, "http://dash.example.com"));
        assert!(allows(&["http://localhost:80"], "http://localhost"));
        assert!(allows(&["http://[::1]:*"], "http://[::1]"));
    }

    #[test]
    fn a_wildcard_stands_alone_and_bad_entries_say_why() {
        assert_eq!(AllowedOrigins::parse(&["*"]), Ok(AllowedOrigins::Any));
        assert!(allows(&["*"], "http://evil.example"));
        assert_eq!(
            AllowedOrigins::parse(&["*", "http://localhost:*"]),
            Err(OriginError::WildcardAmongOthers)
        );
        assert_eq!(AllowedOrigins::parse(&["null"]), Err(OriginError::Null));
        for bad in [
            "localhost:8080",
            "http://",
            "http://localhost/",
            "http://localhost:8080:*",
            "http://localhost:*:*",
            "http://localhost:",
            "http://*.example.com",
            "http://user@localhost",
            "http://localhost?x",
            "h_t://localhost",
        ] {
            assert!(
                matches!(
                    AllowedOrigins::parse(&[bad]),
                    Err(OriginError::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            AllowedOrigins::parse::<&str>(&[]),
            Ok(AllowedOrigins::Listed(Vec::new()))
        );
        assert!(Cors::new(&AllowedOrigins::Listed(Vec::new())).is_none());
    }
}
