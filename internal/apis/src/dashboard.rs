//! The built-in dashboard: a static page and its assets, embedded in the binary and served
//! outside the API prefix (`/`, `/dashboard/*`, `/favicon.ico`). The page needs no token: it
//! holds no data; the API calls it makes carry the user's. Every URL in it is relative, so it
//! works behind an ingress that mounts the server under a sub-path, and the API prefix is
//! written into the page here rather than compiled into the script.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

use super::edge;

/// Scripts and styles only from this server, none inline; API calls only to it; no frames.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'; object-src 'none'";

/// Where the page finds the API prefix; the script reads the meta tag of that name.
const PREFIX_PLACEHOLDER: &str = "{{K8SAILOR_API_PREFIX}}";

const INDEX_HTML: &str = include_str!("../dashboard/index.html");
const APP_JS: &str = include_str!("../dashboard/app.js");
const LOGS_JS: &str = include_str!("../dashboard/logs.js");
const STYLE_CSS: &str = include_str!("../dashboard/style.css");
const FAVICON_SVG: &str = include_str!("../dashboard/favicon.svg");

/// One embedded file, with the validator that lets a browser revalidate it for free.
struct Asset {
    content_type: &'static str,
    body: bytes::Bytes,
    etag: HeaderValue,
}

impl Asset {
    fn new(content_type: &'static str, body: impl Into<bytes::Bytes>) -> Arc<Asset> {
        let body = body.into();
        let etag = HeaderValue::try_from(format!("\"{:016x}\"", fnv1a(&body)))
            .expect("a hex string is a header value");
        Arc::new(Asset {
            content_type,
            body,
            etag,
        })
    }

    /// `no-cache`: the browser asks again each time, and a 304 costs no body, so a new
    /// release is seen at once without versioned file names.
    fn respond(&self, request: &HeaderMap) -> Response {
        let fresh = request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .any(|v| v == self.etag || v == "*");
        let mut response = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            (
                [(header::CONTENT_TYPE, self.content_type)],
                self.body.clone(),
            )
                .into_response()
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, self.etag.clone());
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        response
    }
}

/// FNV-1a, 64 bits: an ETag only has to change when the file does.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The page's routes; `prefix` is the API's, as configured (`/k8sailor/v0`, or empty).
pub fn routes<S: Clone + Send + Sync + 'static>(
    prefix: &str,
) -> Vec<(&'static str, MethodRouter<S>)> {
    // Relative to the page, so an ingress sub-path in front of the server is kept.
    let relative = prefix.trim_start_matches('/');
    let index = Asset::new(
        "text/html; charset=utf-8",
        INDEX_HTML.replace(PREFIX_PLACEHOLDER, &escape_attribute(relative)),
    );
    let favicon = Asset::new("image/svg+xml", FAVICON_SVG);
    let assets = [
        ("/", index.clone()),
        ("/index.html", index),
        (
            "/dashboard/app.js",
            Asset::new("text/javascript; charset=utf-8", APP_JS),
        ),
        (
            "/dashboard/logs.js",
            Asset::new("text/javascript; charset=utf-8", LOGS_JS),
        ),
        (
            "/dashboard/style.css",
            Asset::new("text/css; charset=utf-8", STYLE_CSS),
        ),
        ("/dashboard/favicon.svg", favicon.clone()),
        ("/favicon.ico", favicon),
    ];
    assets
        .into_iter()
        .map(|(path, asset)| {
            let route = get(move |headers: HeaderMap| async move { asset.respond(&headers) })
                .fallback(edge::method_not_allowed);
            (path, route)
        })
        .collect()
}

/// The prefix goes into an HTML attribute: a configured value must not end the attribute.
fn escape_attribute(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
