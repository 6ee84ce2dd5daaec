use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::*;
use biz::Workloads;
use k8scache::Caches;
use k8sdao::fake::FakeSource;
use k8sdao::{CacheSource, Source};

/// The default's interval: no test here waits for a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn options(origins: &[&str]) -> HttpOptions {
    HttpOptions {
        prefix: "/k8sailor/v0".into(),
        cors_allowed_origins: AllowedOrigins::parse(origins).unwrap(),
        allowed_hosts: AllowedHosts::default(),
        request_timeout: Duration::from_secs(5),
        body: BodyLimits {
            max_bytes: 1024,
            read_timeout: Duration::from_secs(1),
        },
        auth: AuthMode::None,
        dashboard: true,
        logs: crate::LogLimits {
            max_streams: biz::DEFAULT_MAX_LOG_STREAMS,
        },
    }
}

fn app_with(source: Source, origins: &[&str]) -> App {
    let state = AppState::new(
        Arc::new(Workloads::new(source)),
        None,
        FairShares::default(),
        KEEP_ALIVE,
        crate::DEFAULT_KEPT_ANSWER_BYTES,
    );
    router(state, &options(origins)).unwrap()
}

/// The small cluster of k8sdao's fixtures, in a source of records given by hand.
fn small_cluster() -> Source {
    Source::fake(k8sdao::fake::small_cluster(), None)
}

fn app() -> App {
    app_with(small_cluster(), &["*"])
}

async fn call<S>(app: S, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>)
where
    S: tower::Service<Request<Body>, Response = Response, Error = std::convert::Infallible>,
{
    let res = app.oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, headers, body)
}

async fn get(uri: &str) -> (StatusCode, Value) {
    let (status, _, body) = call(app(), Request::get(uri).body(Body::empty()).unwrap()).await;
    let json = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{uri}: {e}: {}", String::from_utf8_lossy(&body)));
    (status, json)
}

#[tokio::test]
async fn ping_answers_pong() {
    let (status, _, body) = call(
        app(),
        Request::get("/k8sailor/v0/ping")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, b"pong");
}

#[tokio::test]
async fn lists_are_enveloped_with_metadata() {
    let (status, json) = get("/k8sailor/v0/deployments").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["code"], 0);
    assert_eq!(json["error"], "");
    assert_eq!(json["data"].as_array().unwrap().len(), 2);
    assert!(json["metadata"]["resourceVersion"].is_string());
    let (_, json) = get("/k8sailor/v0/pods?namespace=ns-a&labelSelector=app%3Dweb").await;
    let names: Vec<_> = json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(names, ["web-1a2b-x", "web-1a2b-y"]);
    assert_eq!(json["data"][0]["deployment"], "web");
}

#[tokio::test]
async fn objects_and_relations() {
    let (status, json) = get("/k8sailor/v0/deployments/web?namespace=ns-a").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["data"]["name"], "web");
    assert_eq!(json["data"]["labelSelector"]["app"], "web");
    let (_, json) = get("/k8sailor/v0/deployments/web/pods?namespace=ns-a").await;
    assert_eq!(json["data"].as_array().unwrap().len(), 2);
    let (_, json) = get("/k8sailor/v0/pods/bare?namespace=ns-a").await;
    assert_eq!(json["data"]["name"], "bare");
}

#[tokio::test]
async fn not_found_is_a_404_envelope() {
    for uri in [
        "/k8sailor/v0/deployments/nope?namespace=ns-a",
        "/k8sailor/v0/deployments/nope/pods?namespace=ns-a",
        "/k8sailor/v0/pods/nope",
        "/k8sailor/v0/pods/nope/output?namespace=ns-a",
        "/k8sailor/v0/no/such/route",
    ] {
        let (status, json) = get(uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(json["code"], 404, "{uri}");
        assert!(!json["error"].as_str().unwrap().is_empty(), "{uri}");
        assert_eq!(json["data"], Value::Null);
    }
}

#[tokio::test]
async fn bad_input_is_a_400_with_the_reason() {
    for (uri, needle) in [
        ("/k8sailor/v0/deployments?namespace=Bad_NS", "namespace"),
        ("/k8sailor/v0/deployments/Bad_Name?namespace=ns-a", "name"),
        (
            "/k8sailor/v0/pods?labelSelector=app%20in%20(x",
            "labelSelector",
        ),
        (
            "/k8sailor/v0/pods/bare/output?namespace=ns-a&outputFormat=xml",
            "outputFormat",
        ),
    ] {
        let (status, json) = get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(json["code"], 400);
        assert!(
            json["error"].as_str().unwrap().contains(needle),
            "{uri}: {}",
            json["error"]
        );
    }
}

#[tokio::test]
async fn unsynced_caches_answer_503_with_retry_after() {
    let status = Arc::new(confk8s::InformerStatus::new("Pod"));
    // The one test of a cache: its informers not synced yet.
    let source = Source::from_cache(
        CacheSource::new(Arc::new(Caches::default()), vec![status]),
        None,
    );
    let app = app_with(source, &[]);
    let (code, headers, body) = call(
        app,
        Request::get("/k8sailor/v0/pods")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers[header::RETRY_AFTER], "1");
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["code"], 503);
    assert!(json["error"].as_str().unwrap().contains("Pod"));
}

/// A kind served before its informer's first list is in (a custom resource, from the moment
/// its CRD is seen) answers what the apiserver answers while its watch cache initializes:
/// 429 TooManyRequests "storage is (re)initializing" with `Retry-After: 1`, for a list, a get
/// and a watch alike; the prefix's routes a 429 envelope saying so. Never an empty list at no
/// version. Once listed, even empty, a list at the list's version.
#[tokio::test]
async fn a_kind_not_listed_yet_answers_429_until_its_first_list_is_in() {
    use confk8s::Handler;
    let caches = Arc::new(Caches::default());
    let configmaps = k8sdao::built_in("configmaps").unwrap().resource();
    let cache = caches.serve(&configmaps);
    let app = app_with(
        Source::from_cache(CacheSource::new(caches, Vec::new()), None),
        &[],
    );
    let ask = |uri: &'static str| {
        let app = app.clone();
        async move {
            let (code, headers, body) =
                call(app, Request::get(uri).body(Body::empty()).unwrap()).await;
            let json: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("{uri}: {e}: {}", String::from_utf8_lossy(&body)));
            (code, headers, json)
        }
    };
    for uri in [
        "/api/v1/configmaps",
        "/api/v1/namespaces/ns/configmaps?limit=10",
        "/api/v1/namespaces/ns/configmaps/web",
        "/api/v1/configmaps?watch=true",
        "/api/v1/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    ] {
        let (code, headers, status) = ask(uri).await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{uri}: {status}");
        assert_eq!(headers[header::RETRY_AFTER], "1", "{uri}");
        assert_eq!(
            status,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "storage is (re)initializing",
                "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1},
                "code": 429}),
            "{uri}"
        );
    }
    for uri in [
        "/k8sailor/v0/configmaps",
        "/k8sailor/v0/configmaps/web?namespace=ns",
        "/k8sailor/v0/configmaps?watch=true",
    ] {
        let (code, headers, envelope) = ask(uri).await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{uri}: {envelope}");
        assert_eq!(headers[header::RETRY_AFTER], "1", "{uri}");
        assert_eq!(envelope["code"], 429, "{uri}");
        let error = envelope["error"].as_str().unwrap();
        assert!(
            error.contains("configmaps") && error.contains("first list"),
            "{uri}: {error}"
        );
    }
    // Listed, with nothing in it: an empty list at the list's own version.
    cache.clone().begin_relist().commit("5");
    let (code, _, list) = ask("/api/v1/configmaps").await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["metadata"]["resourceVersion"], "5");
    assert_eq!(list["items"], serde_json::json!([]));
    let (code, _, envelope) = ask("/k8sailor/v0/configmaps").await;
    assert_eq!(code, StatusCode::OK, "{envelope}");
    assert_eq!(envelope["metadata"]["resourceVersion"], "5");
}

/// A kept Kubernetes API list answer outlives a bookmark, which moves the cache's version on
/// and changes no object: the same bytes, its resourceVersion the one it was built at, the
/// objects' state still; a change after it makes a new answer at the change's version.
#[tokio::test]
async fn a_kept_list_answer_is_sent_again_after_a_bookmark_and_rebuilt_after_a_change() {
    use confk8s::{Delta, Handler};
    let pod = |name: &str, rv: &str| {
        let mut pod = model::fixtures::mk_pod("ns", name, None, &[("app", "web")]);
        pod.metadata.resource_version = Some(rv.into());
        pod
    };
    let caches = Arc::new(Caches::default());
    // Enough pods for a list answer worth keeping (kubeapi::answers::MIN_KEPT_BYTES).
    let mut relist = caches.pods.clone().begin_relist();
    for i in 0..1000 {
        relist.add(&Delta::Added(pod(&format!("web-{i:04}"), "100")));
    }
    relist.commit("1000");
    let state = AppState::new(
        Arc::new(Workloads::new(Source::from_cache(
            CacheSource::new(caches.clone(), Vec::new()),
            None,
        ))),
        None,
        FairShares::default(),
        KEEP_ALIVE,
        crate::DEFAULT_KEPT_ANSWER_BYTES,
    );
    let app = router(state.clone(), &options(&[])).unwrap();
    let list = || async {
        let (code, _, body) = call(
            app.clone(),
            Request::get("/api/v1/pods").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        body
    };
    let version = |body: &[u8]| {
        let list: Value = serde_json::from_slice(body).unwrap();
        list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = list().await;
    assert!(first.len() >= 128 * 1024, "{} bytes: not kept", first.len());
    assert_eq!(version(&first), "1000");
    caches.pods.on_bookmark("2000");
    let second = list().await;
    let figures = state.answers.figures();
    assert_eq!((figures.misses, figures.hits), (1, 1), "{figures:?}");
    assert_eq!(second, first);
    // A change: built again, at the change's version.
    caches
        .pods
        .on_deltas(&[Delta::Added(pod("web-new", "2001"))]);
    let third = list().await;
    let figures = state.answers.figures();
    assert_eq!((figures.misses, figures.hits), (2, 1), "{figures:?}");
    assert_eq!(version(&third), "2001");
}

#[tokio::test]
async fn output_is_raw_json_or_yaml() {
    let (status, headers, body) = call(
        app(),
        Request::get("/k8sailor/v0/pods/bare/output?namespace=ns-a&outputFormat=yaml")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/yaml");
    assert!(
        String::from_utf8(body)
            .unwrap()
            .starts_with("apiVersion: v1\n")
    );
    let (_, headers, body) = call(
        app(),
        Request::get("/k8sailor/v0/pods/bare/output?namespace=ns-a")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["kind"], "Pod");
}

#[tokio::test]
async fn cors_wildcard_never_allows_credentials() {
    let req = || {
        Request::get("/k8sailor/v0/ping")
            .header(header::ORIGIN, "http://spa.example")
            .body(Body::empty())
            .unwrap()
    };
    let (_, headers, _) = call(app(), req()).await;
    assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    assert!(
        headers
            .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
            .is_none()
    );

    let named = app_with(
        Source::fake(FakeSource::default(), None),
        &["http://spa.example"],
    );
    let (_, headers, _) = call(named.clone(), req()).await;
    assert_eq!(
        headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "http://spa.example"
    );
    assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
    let other = Request::get("/k8sailor/v0/ping")
        .header(header::ORIGIN, "http://evil.example")
        .body(Body::empty())
        .unwrap();
    let (_, headers, _) = call(named, other).await;
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

/// A browser's preflight for `method` from `origin`: the CORS headers of the answer.
async fn preflight(app: App, origin: &str, method: &str) -> axum::http::HeaderMap {
    let req = Request::options("/k8sailor/v0/deployments/web")
        .header(header::ORIGIN, origin)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, method)
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type")
        .body(Body::empty())
        .unwrap();
    call(app, req).await.1
}

#[tokio::test]
async fn loopback_pages_on_any_port_pass_cors_and_others_do_not() {
    let loopback = app_with(
        Source::fake(FakeSource::default(), None),
        &cors::LOOPBACK_ORIGINS,
    );
    for origin in [
        "http://127.0.0.1:8080",
        "http://localhost:5173",
        "http://[::1]:3000",
    ] {
        let headers = preflight(loopback.clone(), origin, "DELETE").await;
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], origin);
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
        let methods = headers[header::ACCESS_CONTROL_ALLOW_METHODS]
            .to_str()
            .unwrap();
        assert!(methods.contains("DELETE"), "{methods}");
    }
    let headers = preflight(loopback, "http://evil.example", "DELETE").await;
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    assert!(
        headers
            .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
            .is_none()
    );
}

async fn status_for_host(app: App, path: &str, host: &str) -> (StatusCode, Vec<u8>) {
    let req = Request::get(path)
        .header(header::HOST, host)
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = call(app, req).await;
    (status, body)
}

#[tokio::test]
async fn with_auth_none_foreign_host_names_are_refused_but_probes_answer() {
    let (status, body) = status_for_host(app(), "/k8sailor/v0/ping", "evil.example:8088").await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["code"], 421);
    assert!(json["data"].is_null());
    let error = json["error"].as_str().unwrap();
    assert!(
        error.contains("evil.example") && error.contains("allowedHosts"),
        "{error}"
    );
    for path in ["/livez", "/readyz"] {
        let (status, _) = status_for_host(app(), path, "evil.example").await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    let (status, _) = status_for_host(app(), "/metrics", "evil.example").await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    for host in ["localhost:8088", "127.0.0.1:8088", "[::1]:8088"] {
        let (status, _) = status_for_host(app(), "/k8sailor/v0/ping", host).await;
        assert_eq!(status, StatusCode::OK, "{host}");
    }
    let two_hosts = Request::get("/k8sailor/v0/ping")
        .header(header::HOST, "localhost")
        .header(header::HOST, "evil.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(app(), two_hosts).await.0, StatusCode::BAD_REQUEST);
    // An absolute-form target names the host, whatever the Host header says.
    let absolute = Request::get("http://evil.example/k8sailor/v0/ping")
        .header(header::HOST, "localhost")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        call(app(), absolute).await.0,
        StatusCode::MISDIRECTED_REQUEST
    );
}

#[tokio::test]
async fn allowed_hosts_open_the_check_and_delegated_auth_needs_none() {
    let state = || {
        AppState::new(
            Arc::new(Workloads::new(small_cluster())),
            None,
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        )
    };
    let mut opts = options(&["*"]);
    opts.allowed_hosts = AllowedHosts::parse(&["evil.example"]).unwrap();
    let named = router(state(), &opts).unwrap();
    let (status, _) = status_for_host(named.clone(), "/k8sailor/v0/ping", "evil.example").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = status_for_host(named, "/k8sailor/v0/ping", "other.example").await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    opts.allowed_hosts = AllowedHosts::Any;
    let any = router(state(), &opts).unwrap();
    let (status, _) = status_for_host(any, "/k8sailor/v0/ping", "other.example").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn answers_are_gzipped_when_asked() {
    let req = Request::get("/k8sailor/v0/pods")
        .header(header::ACCEPT_ENCODING, "gzip")
        .body(Body::empty())
        .unwrap();
    let (_, headers, _) = call(app(), req).await;
    assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
}

/// A client that accepts no encoding gets its answer uncompressed, told as tower-http tells
/// it that a compressible answer varies by `Accept-Encoding`, and one never compressed (too
/// small, a stream) that it does not.
#[tokio::test]
async fn an_answer_to_a_client_without_accept_encoding_varies_as_before() {
    let vary = |headers: &axum::http::HeaderMap| {
        headers
            .get_all(header::VARY)
            .iter()
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    let plain = Request::get("/k8sailor/v0/pods")
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(app(), plain).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get(header::CONTENT_ENCODING).is_none());
    assert!(serde_json::from_slice::<Value>(&body).is_ok());
    assert!(
        vary(&headers).contains(&"accept-encoding".to_string()),
        "{headers:?}"
    );
    let tiny = Request::get("/k8sailor/v0/ping")
        .body(Body::empty())
        .unwrap();
    let (_, headers, _) = call(app(), tiny).await;
    assert!(
        !vary(&headers).contains(&"accept-encoding".to_string()),
        "{headers:?}"
    );
    let stream = Request::get("/k8sailor/v0/pods?namespace=ns-a&watch=true")
        .body(Body::empty())
        .unwrap();
    let watch = app().oneshot(stream).await.unwrap();
    assert_eq!(watch.headers()[header::CONTENT_TYPE], watch::NDJSON);
    assert!(!vary(watch.headers()).contains(&"accept-encoding".to_string()));
}

/// While CORS names origins every answer varies by `Origin` too, listed with gzip's reason in
/// one field, whichever layer made the answer; with `*` it does not.
#[tokio::test]
async fn an_answer_varies_by_encoding_and_origin_in_one_field() {
    let fields = |headers: &axum::http::HeaderMap| {
        (headers.get_all(header::VARY).iter())
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let named = || app_with(small_cluster(), &["http://localhost:*"]);
    let get = |uri: &str, encoding: Option<&str>| {
        let mut request = Request::get(uri).header(header::ORIGIN, "http://localhost:5173");
        if let Some(encoding) = encoding {
            request = request.header(header::ACCEPT_ENCODING, encoding);
        }
        request.body(Body::empty()).unwrap()
    };
    for (uri, encoding, expected) in [
        ("/k8sailor/v0/pods", None, "accept-encoding, origin"),
        ("/k8sailor/v0/pods", Some("gzip"), "accept-encoding, origin"),
        ("/k8sailor/v0/ping", None, "origin"),
        (
            "/k8sailor/v0/no-such-route",
            None,
            "accept-encoding, origin",
        ),
    ] {
        let (_, headers, _) = call(named(), get(uri, encoding)).await;
        assert_eq!(fields(&headers), [expected], "{uri} {encoding:?}");
        assert_eq!(
            headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://localhost:5173",
            "{uri}"
        );
    }
    let preflight = Request::options("/k8sailor/v0/pods")
        .header(header::ORIGIN, "http://localhost:5173")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = call(named(), preflight).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(fields(&headers), ["origin"]);

    let (_, headers, _) = call(app(), get("/k8sailor/v0/pods", None)).await;
    assert_eq!(fields(&headers), ["accept-encoding"]);
}

/// The one-pass predicate decides as tower-http's default predicate and one
/// `NotForContentType` per stream type did, for every kind of answer: only cheaper.
#[test]
fn compressible_answers_are_those_the_composed_predicates_chose() {
    use tower_http::compression::predicate::{DefaultPredicate, NotForContentType};
    let composed = DefaultPredicate::new()
        .and(NotForContentType::const_new(watch::NDJSON))
        .and(NotForContentType::const_new(logs::LOG_TEXT))
        .and(|_, _, _: &_, extensions: &_| !kubeapi::is_streamed(extensions));
    let types = [
        None,
        Some("application/json"),
        Some("application/yaml"),
        Some("application/grpc"),
        Some("application/grpc+proto"),
        Some("application/grpc-web"),
        Some("image/png"),
        Some("image/svg+xml"),
        Some("text/event-stream"),
        Some(watch::NDJSON),
        Some(logs::LOG_TEXT),
        Some("text/plain"),
        Some("text/html; charset=utf-8"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    ];
    let mut compressed = 0;
    for content_type in types {
        for size in [0, 31, 32, 5000] {
            for announced in [false, true] {
                for streamed in [false, true] {
                    // A streamed body's size is unknown unless a Content-Length says it.
                    let body = if announced {
                        Body::from(vec![b'x'; size])
                    } else {
                        Body::from_stream(futures::stream::iter([Ok::<_, Infallible>(
                            bytes::Bytes::from(vec![b'x'; size]),
                        )]))
                    };
                    let mut response = Response::new(body);
                    if let Some(content_type) = content_type {
                        response
                            .headers_mut()
                            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
                    }
                    if streamed {
                        response.extensions_mut().insert(kubeapi::Streamed);
                    }
                    let want = composed.should_compress(&response);
                    assert_eq!(
                        Compressible.should_compress(&response),
                        want,
                        "{content_type:?}, {size} bytes (announced: {announced}), streamed: {streamed}"
                    );
                    compressed += usize::from(want);
                }
            }
        }
    }
    assert!(compressed > 0, "some answers are compressed");
}

#[test]
fn prefixes_must_be_absolute_without_trailing_slash() {
    let state = || {
        AppState::new(
            Arc::new(Workloads::new(Source::fake(FakeSource::default(), None))),
            None,
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        )
    };
    for bad in ["k8sailor", "/k8sailor/"] {
        let mut opts = options(&[]);
        opts.prefix = bad.into();
        assert!(
            matches!(router(state(), &opts), Err(SetupError::Prefix(_))),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn paging_walks_every_item_once_and_old_tokens_are_gone() {
    let app = app();
    let mut seen = Vec::new();
    let mut uri = "/k8sailor/v0/pods?limit=2&sort=-name".to_string();
    loop {
        let (status, _, body) =
            call(app.clone(), Request::get(&uri).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        let json: Value = serde_json::from_slice(&body).unwrap();
        for pod in json["data"].as_array().unwrap() {
            seen.push(pod["name"].as_str().unwrap().to_string());
        }
        match json["metadata"]["continue"].as_str() {
            Some(token) => {
                assert!(json["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                uri = format!("/k8sailor/v0/pods?limit=2&sort=-name&continue={token}");
            }
            None => break,
        }
    }
    assert_eq!(seen, ["web-1a2b-y", "web-1a2b-x", "bare"]);

    // A token whose list this server no longer keeps (pushed out by newer ones, or served by
    // another replica) is rebuilt at its version: the next page, not an error.
    let first_page = |app: App| async move {
        let (_, _, body) = call(
            app,
            Request::get("/k8sailor/v0/pods?limit=1")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        let json: Value = serde_json::from_slice(&body).unwrap();
        json["metadata"]["continue"].as_str().unwrap().to_string()
    };
    let oldest = first_page(app.clone()).await;
    for _ in 0..biz::SNAPSHOT_CAPACITY {
        first_page(app.clone()).await;
    }
    let (status, json) = get(&format!("/k8sailor/v0/pods?limit=1&continue={oldest}")).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["data"][0]["name"], "web-1a2b-x");
    // One we never issued is the client's mistake: 400.
    let (status, json) = get("/k8sailor/v0/pods?limit=1&continue=ffff.1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("invalid continue token"),
        "{json}"
    );
    for bad in [
        "/k8sailor/v0/pods?continue=garbage",
        "/k8sailor/v0/pods?sort=age",
        "/k8sailor/v0/pods?limit=-1",
    ] {
        let (status, json) = get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {json}");
    }
}

#[tokio::test]
async fn metrics_count_requests_by_route_template() {
    let app = app();
    for uri in [
        "/k8sailor/v0/pods/bare?namespace=ns-a",
        "/k8sailor/v0/pods/nope?namespace=ns-a",
        "/nowhere",
        "/api/v1/namespaces/ns-a/pods/bare",
        "/api/v1/namespaces/ns-a/pods/bare",
        "/apis/apps/v1/deployments",
    ] {
        call(app.clone(), Request::get(uri).body(Body::empty()).unwrap()).await;
    }
    for invented in ["BREW", "WHEN"] {
        let req = Request::builder()
            .method(invented)
            .uri("/k8sailor/v0/pods/bare")
            .body(Body::empty())
            .unwrap();
        call(app.clone(), req).await;
    }
    let (status, headers, body) =
        call(app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = String::from_utf8(body).unwrap();
    for needle in [
        r#"k8sailor_http_requests_total{route="/k8sailor/v0/pods/{name}",method="GET",code="200"} 1"#,
        r#"k8sailor_http_requests_total{route="/k8sailor/v0/pods/{name}",method="GET",code="404"} 1"#,
        r#"k8sailor_http_requests_total{route="/api/{*path}",method="GET",code="200"} 2"#,
        r#"k8sailor_http_requests_total{route="/apis/{*path}",method="GET",code="200"} 1"#,
        "k8sailor_http_request_duration_seconds_bucket",
        "k8sailor_build_info{version=",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert!(!text.contains("bare"), "raw paths never become labels");
    assert!(
        !text.contains("BREW") && text.contains(r#"method="other",code="405"} 2"#),
        "invented methods share one label:\n{text}"
    );
}

async fn openapi() -> Value {
    let (status, _, body) = call(
        app(),
        Request::get("/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

/// Every route the API serves, as the README lists them.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/k8sailor/v0/ping"),
    ("get", "/k8sailor/v0/deployments"),
    ("get", "/k8sailor/v0/deployments/{name}"),
    ("post", "/k8sailor/v0/deployments/{name}"),
    ("delete", "/k8sailor/v0/deployments/{name}"),
    ("get", "/k8sailor/v0/deployments/{name}/output"),
    ("put", "/k8sailor/v0/deployments/{name}/replicas"),
    ("get", "/k8sailor/v0/deployments/{name}/pods"),
    ("get", "/k8sailor/v0/pods"),
    ("get", "/k8sailor/v0/pods/{name}"),
    ("delete", "/k8sailor/v0/pods/{name}"),
    ("get", "/k8sailor/v0/pods/{name}/output"),
    ("get", "/k8sailor/v0/pods/{name}/event"),
    ("get", "/k8sailor/v0/pods/{name}/events"),
    ("post", "/k8sailor/v0/services/{name}"),
    ("get", "/k8sailor/v0/services/{name}/output"),
    ("post", "/k8sailor/v0/ingresses/{name}"),
    ("get", "/k8sailor/v0/ingresses/{name}/output"),
    ("get", "/k8sailor/v0/replicasets"),
    ("get", "/k8sailor/v0/replicasets/{name}"),
    ("get", "/k8sailor/v0/replicasets/{name}/output"),
    ("get", "/k8sailor/v0/namespaces/{name}/output"),
    ("get", "/k8sailor/v0/services"),
    ("get", "/k8sailor/v0/services/{name}"),
    ("get", "/k8sailor/v0/services/{name}/pods"),
    ("get", "/k8sailor/v0/deployments/{name}/services"),
    ("get", "/k8sailor/v0/deployments/{name}/ingresses"),
    ("get", "/k8sailor/v0/ingresses"),
    ("get", "/k8sailor/v0/ingresses/{name}"),
    ("get", "/k8sailor/v0/namespaces"),
    ("get", "/k8sailor/v0/namespaces/{name}"),
    ("get", "/k8sailor/v0/pods/{name}/logs"),
    ("get", "/k8sailor/v0/pods/logs"),
    ("get", "/k8sailor/v0/deployments/{name}/logs"),
    ("get", "/k8sailor/v0/replicasets/{name}/logs"),
    ("get", "/k8sailor/v0/statefulsets/{name}/logs"),
    ("get", "/k8sailor/v0/daemonsets/{name}/logs"),
    ("get", "/k8sailor/v0/jobs/{name}/logs"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

#[tokio::test]
async fn openapi_describes_every_route_and_only_real_ones() {
    let doc = openapi().await;
    let paths = doc["paths"].as_object().unwrap();
    for (method, route) in ROUTES {
        assert!(
            paths[*route][*method].is_object(),
            "{method} {route} is missing from /openapi.json"
        );
    }
    let documented: Vec<(String, String)> = paths
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "put", "post", "delete"].contains(&k.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    assert_eq!(documented.len(), ROUTES.len(), "documented: {documented:?}");
    // Each documented operation is routed: the fallback's "no route" and axum's 405 never
    // answer it.
    for (method, path) in documented {
        let uri = path.replace("{name}", "bare") + "?namespace=ns-a";
        let req = Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(&uri)
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = call(app(), req).await;
        assert!(
            !String::from_utf8_lossy(&body).contains("no route for")
                && status != StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path} is documented but not routed"
        );
    }
    // Parameters are described.
    let list_params: Vec<_> = paths["/k8sailor/v0/pods"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    for p in [
        "namespace",
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "sort",
    ] {
        assert!(
            list_params.contains(&p.to_string()),
            "{p} in {list_params:?}"
        );
    }
}

#[tokio::test]
async fn answers_carry_exactly_the_documented_keys() {
    let doc = openapi().await;
    let schemas = &doc["components"]["schemas"];
    let keys = |schema: &Value| -> std::collections::BTreeSet<String> {
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let mut pod_keys = keys(&schemas["PodDto"]);
    pod_keys.extend(keys(&schemas["Pod"]["allOf"][1]));
    let (_, pod) = get("/k8sailor/v0/pods/bare?namespace=ns-a").await;
    let answered: std::collections::BTreeSet<String> =
        pod["data"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(answered, pod_keys);
    let (_, deployment) = get("/k8sailor/v0/deployments/web?namespace=ns-a").await;
    let answered: std::collections::BTreeSet<String> = deployment["data"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(answered, keys(&schemas["DeploymentDto"]));
    let (_, replicaset) = get("/k8sailor/v0/replicasets/web-1a2b?namespace=ns-a").await;
    let answered: std::collections::BTreeSet<String> = replicaset["data"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(answered, keys(&schemas["ReplicaSetDto"]));
    let (_, error) = get("/k8sailor/v0/pods/nope?namespace=ns-a").await;
    let answered: std::collections::BTreeSet<String> =
        error.as_object().unwrap().keys().cloned().collect();
    assert_eq!(answered, keys(&schemas["ErrorEnvelope"]));
}

#[tokio::test]
async fn bad_writes_are_refused_before_reaching_the_apiserver() {
    let send = |method: &str, uri: &str, content_type: Option<&str>, body: &str| {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        call(app(), req.body(Body::from(body.to_string())).unwrap())
    };
    let json = Some("application/json");
    let cases = [
        (
            send(
                "PUT",
                "/k8sailor/v0/deployments/web/replicas?replicas=-2",
                None,
                "",
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid replicas \"-2\"",
        ),
        (
            send("PUT", "/k8sailor/v0/deployments/web/replicas", None, "").await,
            StatusCode::BAD_REQUEST,
            "is required",
        ),
        (
            send("POST", "/k8sailor/v0/deployments/web", json, "{not json").await,
            StatusCode::BAD_REQUEST,
            "invalid body",
        ),
        (
            send("POST", "/k8sailor/v0/deployments/web", None, "{}").await,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            send(
                "POST",
                "/k8sailor/v0/deployments/web",
                json,
                r#"{"replicas": 1}"#,
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "containers",
        ),
        (
            send(
                "POST",
                "/k8sailor/v0/deployments/web",
                json,
                r#"{"containers": [{"image": "nginx", "ports": [70000]}]}"#,
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid port \"70000\"",
        ),
        (
            send(
                "POST",
                "/k8sailor/v0/services/web",
                json,
                r#"{"services": ["80:8080", "!abc:80:8080"]}"#,
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid services entry \"!abc:80:8080\": port \"abc\" must be",
        ),
        (
            send(
                "POST",
                "/k8sailor/v0/ingresses/web",
                json,
                r#"{"endpoints": ["http://a.example.com/?backend=api:0"]}"#,
            )
            .await,
            StatusCode::BAD_REQUEST,
            "port \"0\" must be a number",
        ),
        (
            send(
                "GET",
                "/k8sailor/v0/services/web/output?outputFormat=xml",
                None,
                "",
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid outputFormat",
        ),
        (
            send("DELETE", "/k8sailor/v0/pods/Bad_Name", None, "").await,
            StatusCode::BAD_REQUEST,
            "invalid name",
        ),
        (
            send(
                "DELETE",
                "/k8sailor/v0/deployments/web?namespace=-x",
                None,
                "",
            )
            .await,
            StatusCode::BAD_REQUEST,
            "invalid namespace",
        ),
    ];
    for ((status, _, body), want_status, want_error) in cases {
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body["code"], want_status.as_u16(), "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(want_error), "{want_error:?} in {error:?}");
    }
}

#[tokio::test]
async fn a_request_slower_than_the_timeout_is_a_503_saying_so() {
    let source = small_cluster();
    let per = PerRequestLayer::new(
        AppState::new(
            Arc::new(Workloads::new(source)),
            None,
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        ),
        Duration::from_millis(50),
        false,
        None,
    );
    let app = Router::new()
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route_layer(per);
    let (status, _, body) = call(app, Request::get("/slow").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], 503);
    assert!(
        body["error"].as_str().unwrap().contains("longer than 50ms"),
        "{body}"
    );
}

/// A watch answer's body, read until it holds `lines` lines; the stream stays open after.
async fn read_lines(body: &mut Body, lines: usize) -> String {
    let mut text = String::new();
    while text.matches('\n').count() < lines {
        let frame = tokio::time::timeout(Duration::from_secs(2), body.frame())
            .await
            .unwrap_or_else(|_| panic!("{lines} lines within 2 s; so far:\n{text}"))
            .expect("the stream goes on")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
    text
}

fn watch_request(accept: Option<&str>) -> Request<Body> {
    let mut req =
        Request::get("/k8sailor/v0/pods?namespace=ns-a&labelSelector=app%3Dweb&watch=true")
            .header(header::ACCEPT_ENCODING, "gzip");
    if let Some(accept) = accept {
        req = req.header(header::ACCEPT, accept);
    }
    req.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn a_watch_streams_json_lines_uncompressed() {
    let res = app().oneshot(watch_request(None)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_TYPE], "application/x-ndjson");
    assert!(
        res.headers().get(header::CONTENT_ENCODING).is_none(),
        "a compressor would hold events back"
    );
    let mut body = res.into_body();
    let text = read_lines(&mut body, 3).await;
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            let object = &e["object"];
            let name = object["name"]
                .as_str()
                .or(object["resourceVersion"].as_str());
            (e["type"].as_str().unwrap(), name.unwrap())
        })
        .collect();
    assert_eq!(
        seen[..2],
        [("ADDED", "web-1a2b-x"), ("ADDED", "web-1a2b-y")]
    );
    assert_eq!(seen[2].0, "BOOKMARK");
    assert_eq!(events[0]["object"]["deployment"], "web");
}

#[tokio::test]
async fn a_watch_speaks_server_sent_events_to_event_source_and_ends_on_shutdown() {
    let source = small_cluster();
    let state = AppState::new(
        Arc::new(Workloads::new(source)),
        None,
        FairShares::default(),
        KEEP_ALIVE,
        crate::DEFAULT_KEPT_ANSWER_BYTES,
    );
    let streams = state.streams.clone();
    let app = router(state, &options(&[])).unwrap();
    let res = app
        .clone()
        .oneshot(watch_request(Some("text/event-stream")))
        .await
        .unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    assert!(res.headers().get(header::CONTENT_ENCODING).is_none());
    let mut body = res.into_body();
    let text = read_lines(&mut body, 12).await;
    assert!(
        text.starts_with(
            "event: ADDED\ndata: {\"type\":\"ADDED\",\"object\":{\"name\":\"web-1a2b-x\""
        ),
        "{text}"
    );
    assert!(
        text.contains("\nid: "),
        "events carry their resourceVersion: {text}"
    );
    assert!(text.contains("event: BOOKMARK\n"), "{text}");
    let metrics = || async {
        let req = Request::get("/metrics").body(Body::empty()).unwrap();
        String::from_utf8(call(app.clone(), req).await.2).unwrap()
    };
    let open = metrics().await;
    assert!(
        open.contains(r#"k8sailor_api_watches{kind="Pod"} 1"#),
        "{open}"
    );
    assert!(
        open.contains(r#"k8sailor_api_watch_events_total{kind="Pod"} 3"#),
        "{open}"
    );
    streams.cancel();
    let rest = tokio::time::timeout(Duration::from_secs(2), body.collect())
        .await
        .expect("the stream ends once shutdown cancels it")
        .unwrap()
        .to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(!rest.contains("event: ERROR"), "{rest}");
    let closed = metrics().await;
    assert!(
        closed.contains(r#"k8sailor_api_watches{kind="Pod"} 0"#),
        "{closed}"
    );
}

#[tokio::test]
async fn a_bad_watch_is_a_400() {
    for uri in [
        "/k8sailor/v0/pods?watch=yes",
        "/k8sailor/v0/pods?watch=true&limit=5",
        "/k8sailor/v0/deployments?watch=1&labelSelector=a%20in",
    ] {
        let (status, body) = get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(body["code"], 400);
        assert!(!body["error"].as_str().unwrap().is_empty());
    }
}

#[tokio::test]
async fn delegated_auth_asks_the_apiserver_about_each_caller_and_request() {
    use kube::client::Body as KubeBody;
    let (service, mut handle) =
        tower_test::mock::pair::<http::Request<KubeBody>, http::Response<KubeBody>>();
    // alice may list pods in ns-a and deployments in ns-b, nothing else.
    let apiserver = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let body = request.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            let answer = if body["kind"] == "TokenReview" {
                serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
                    "status": {"authenticated": true, "user": {"username": "alice", "groups": ["devs"]}}})
            } else {
                let attributes = &body["spec"]["resourceAttributes"];
                let asked_for = (
                    attributes["resource"].as_str().unwrap_or(""),
                    attributes["namespace"].as_str().unwrap_or("*"),
                );
                let allowed = matches!(asked_for, ("pods", "ns-a") | ("deployments", "ns-b"));
                serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {},
                    "status": {"allowed": allowed, "reason": if allowed { "" } else { "no RBAC policy matched" }}})
            };
            asked.push(body);
            send.send_response(
                http::Response::builder()
                    .body(KubeBody::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap(),
            );
        }
        asked
    });
    let reviewer = Arc::new(confk8s::Reviewer::new(
        kube::Client::new(service, "default"),
        confk8s::ReviewTtls::default(),
    ));
    let source = small_cluster();
    let mut opts = options(&[]);
    opts.auth = AuthMode::Delegated;
    let app = router(
        AppState::new(
            Arc::new(Workloads::new(source)),
            Some(reviewer.clone()),
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        ),
        &opts,
    )
    .unwrap();
    let get = |uri: &str, token: Option<&str>| {
        let mut req = Request::get(uri);
        if let Some(token) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        call(app.clone(), req.body(Body::empty()).unwrap())
    };

    let (status, headers, body) = get("/k8sailor/v0/pods?namespace=ns-a", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], 401);
    let (status, _, _) = get("/k8sailor/v0/pods", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a filtered list needs a token"
    );
    for open in ["/k8sailor/v0/ping", "/livez", "/metrics", "/openapi.json"] {
        assert_eq!(get(open, None).await.0, StatusCode::OK, "{open}");
    }

    for _ in 0..2 {
        let (status, _, _) = get("/k8sailor/v0/pods?namespace=ns-a", Some("t")).await;
        assert_eq!(status, StatusCode::OK);
        // Across namespaces: what alice may list, and said to be filtered.
        let (status, _, body) = get("/k8sailor/v0/deployments", Some("t")).await;
        assert_eq!(status, StatusCode::OK);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");
        assert_eq!(body["data"][0]["name"], "api");
        assert_eq!(body["metadata"]["accessFiltered"], true);
        // One namespace asked for: its own right, as the apiserver would ask.
        let (status, _, body) = get("/k8sailor/v0/deployments?namespace=ns-a", Some("t")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body["error"],
            "alice may not list deployments.apps in namespace \"ns-a\": no RBAC policy matched"
        );
    }

    // HEAD is GET's answer without the body, under GET's access (the decisions cached above).
    for (uri, expected) in [
        ("/k8sailor/v0/pods?namespace=ns-a", StatusCode::OK),
        (
            "/k8sailor/v0/deployments?namespace=ns-a",
            StatusCode::FORBIDDEN,
        ),
    ] {
        let req = Request::head(uri)
            .header(header::AUTHORIZATION, "Bearer t")
            .body(Body::empty())
            .unwrap();
        let (status, headers, body) = call(app.clone(), req).await;
        assert_eq!(status, expected, "HEAD {uri}");
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/json",
            "HEAD {uri}"
        );
        assert!(body.is_empty(), "HEAD {uri}: {body:?}");
    }

    // At the root (`--prefix /`), the same routes under the same rules (the decisions cached).
    opts.prefix = "/".into();
    let at_root = router(
        AppState::new(
            Arc::new(Workloads::new(small_cluster())),
            Some(reviewer),
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        ),
        &opts,
    )
    .unwrap();
    for (uri, expected) in [
        ("/pods?namespace=ns-a", StatusCode::OK),
        ("/deployments?namespace=ns-a", StatusCode::FORBIDDEN),
    ] {
        let req = Request::get(uri)
            .header(header::AUTHORIZATION, "Bearer t")
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = call(at_root.clone(), req).await;
        assert_eq!(status, expected, "GET {uri} at the root: {body:?}");
        if status == StatusCode::FORBIDDEN {
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert!(
                body["error"]
                    .as_str()
                    .unwrap()
                    .contains("no RBAC policy matched"),
                "{body}"
            );
        }
    }

    drop(app);
    drop(at_root);
    let asked = apiserver.await.unwrap();
    assert_eq!(asked[0]["spec"]["token"], "t");
    assert_eq!(
        asked[1]["spec"]["resourceAttributes"],
        serde_json::json!({"verb": "list", "group": "", "resource": "pods", "namespace": "ns-a"})
    );
    // Every answer is cached: the second round asked nothing. The filtered list cost a
    // cluster-wide review and one per namespace holding Deployments (ns-a, ns-b).
    let namespaces: Vec<&str> = asked[2..]
        .iter()
        .map(|a| {
            a["spec"]["resourceAttributes"]["namespace"]
                .as_str()
                .unwrap_or("*")
        })
        .collect();
    assert_eq!(asked.len(), 6, "{namespaces:?}");
    let (filtered, direct) = namespaces.split_at(3);
    let mut filtered = filtered.to_vec();
    filtered.sort();
    assert_eq!(
        (filtered.as_slice(), direct),
        (&["*", "ns-a", "ns-b"][..], &["ns-a"][..])
    );
}

#[test]
fn delegated_auth_without_a_reviewer_is_a_setup_error() {
    let mut opts = options(&[]);
    opts.auth = AuthMode::Delegated;
    let source = Source::fake(FakeSource::default(), None);
    assert!(matches!(
        router(
            AppState::new(
                Arc::new(Workloads::new(source)),
                None,
                FairShares::default(),
                KEEP_ALIVE,
                crate::DEFAULT_KEPT_ANSWER_BYTES
            ),
            &opts
        ),
        Err(SetupError::NoReviewer)
    ));
}

#[tokio::test]
async fn a_panicking_handler_is_a_500_in_the_envelope() {
    let routes = Router::new().route(
        "/boom",
        axum::routing::get(|| async {
            let nothing: Option<&'static str> = std::hint::black_box(None);
            nothing.expect("a handler bug")
        }),
    );
    let opts = options(&["http://spa.example"]);
    let routes = Routes {
        router: routes,
        original: None,
        kube_paths: None,
        mount_under_kube: None,
    };
    let app = App::new(
        routes,
        &opts,
        true,
        cors::Cors::new(&opts.cors_allowed_origins),
    );
    let request = Request::get("/boom")
        .header(header::ORIGIN, "http://spa.example")
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(app, request).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "http://spa.example",
        "the page may read why its request failed"
    );
    let vary: Vec<_> = headers.get_all(header::VARY).iter().collect();
    assert_eq!(vary, ["origin"], "made at the edge, it varies as CORS does");
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["code"], 500);
    assert!(
        !json["error"].as_str().unwrap().contains("a handler bug"),
        "{json}"
    );
}

#[tokio::test]
async fn queries_and_bodies_over_their_limits_are_refused_in_the_envelope() {
    let long = format!(
        "/k8sailor/v0/pods?labelSelector={}",
        "a".repeat(MAX_QUERY_BYTES)
    );
    let (status, json) = get(&long).await;
    assert_eq!(
        (status, &json["code"]),
        (StatusCode::URI_TOO_LONG, &Value::from(414))
    );
    let req = Request::post("/k8sailor/v0/deployments/web")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(vec![b' '; 1025]))
        .unwrap();
    let (status, headers, body) = call(app(), req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(headers[header::CONNECTION], "close");
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        json["error"].as_str().unwrap().contains("maxBodyBytes"),
        "{json}"
    );
    // A compressed body is refused for what it is, not as bad JSON.
    for (encoding, expected) in [
        ("gzip", StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("br", StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ("identity", StatusCode::BAD_REQUEST),
    ] {
        let req = Request::post("/k8sailor/v0/deployments/web")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_ENCODING, encoding)
            .body(Body::from(&b"\x1f\x8b\x08\x00"[..]))
            .unwrap();
        let (status, _, body) = call(app(), req).await;
        let json: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, expected, "{encoding}: {json}");
        if expected == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            assert_eq!(
                json["error"],
                format!(
                    "request bodies are taken uncompressed: Content-Encoding {encoding} is not supported"
                )
            );
        }
    }
}

mod dashboard {
    use super::*;

    fn app_at(prefix: &str, dashboard: bool) -> App {
        let source = Source::from_cache(
            CacheSource::new(k8scache::fixtures::filled_caches(), Vec::new()),
            None,
        );
        let state = AppState::new(
            Arc::new(Workloads::new(source)),
            None,
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        );
        let opts = HttpOptions {
            prefix: prefix.into(),
            dashboard,
            ..options(&[])
        };
        router(state, &opts).unwrap()
    }

    async fn fetch(app: App, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
        let (status, headers, body) =
            call(app, Request::get(uri).body(Body::empty()).unwrap()).await;
        (status, headers, String::from_utf8(body).unwrap())
    }

    #[tokio::test]
    async fn the_page_and_its_assets_are_served_with_their_types_and_a_strict_policy() {
        for (uri, content_type, part) in [
            (
                "/",
                "text/html; charset=utf-8",
                "<script type=\"module\" src=\"dashboard/app.js\">",
            ),
            (
                "/dashboard/app.js",
                "text/javascript; charset=utf-8",
                "application/x-ndjson",
            ),
            (
                "/dashboard/logs.js",
                "text/javascript; charset=utf-8",
                "export class LogWindow",
            ),
            (
                "/dashboard/style.css",
                "text/css; charset=utf-8",
                "prefers-color-scheme: dark",
            ),
            ("/favicon.ico", "image/svg+xml", "<svg"),
            ("/dashboard/favicon.svg", "image/svg+xml", "<svg"),
        ] {
            let (status, headers, body) = fetch(app_at("/k8sailor/v0", true), uri).await;
            assert_eq!(status, StatusCode::OK, "{uri}");
            assert_eq!(headers[header::CONTENT_TYPE], content_type, "{uri}");
            assert!(body.contains(part), "{uri} lacks {part:?}");
            let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(
                csp.starts_with("default-src 'self'; script-src 'self';"),
                "{csp}"
            );
            assert!(!csp.contains("unsafe-inline"), "{csp}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{uri}");
            assert_eq!(headers[header::CACHE_CONTROL], "no-cache", "{uri}");
            assert!(headers.contains_key(header::ETAG), "{uri}");
        }
    }

    #[tokio::test]
    async fn the_page_has_no_inline_script_and_only_relative_urls() {
        let (_, _, page) = fetch(app_at("/k8sailor/v0", true), "/").await;
        assert!(
            !page.contains("<script>"),
            "an inline script would break the policy"
        );
        for attribute in ["src=\"", "href=\""] {
            for url in page.split(attribute).skip(1) {
                assert!(
                    !url.starts_with('/') && !url.starts_with("http"),
                    "{attribute}{url}: an absolute URL breaks an ingress sub-path"
                );
            }
        }
    }

    #[tokio::test]
    async fn the_page_names_the_configured_prefix_relative_to_itself() {
        let (_, _, page) = fetch(app_at("/k8sailor/v0", true), "/").await;
        assert!(page.contains(r#"<meta name="k8sailor-api-prefix" content="k8sailor/v0">"#));
        let (status, _, page) = fetch(app_at("/team/api", true), "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains(r#"<meta name="k8sailor-api-prefix" content="team/api">"#));
        let (status, _, body) = fetch(app_at("/team/api", true), "/team/api/ping").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "pong"));
        // The API at the root: the page calls it relative to itself, with no prefix.
        let (status, _, page) = fetch(app_at("/", true), "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains(r#"<meta name="k8sailor-api-prefix" content="">"#));
        let (status, _, body) = fetch(app_at("/", true), "/ping").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "pong"));
    }

    #[tokio::test]
    async fn an_unchanged_asset_is_a_304() {
        let (_, headers, _) = fetch(app_at("/k8sailor/v0", true), "/dashboard/app.js").await;
        let etag = headers[header::ETAG].clone();
        let (status, headers, body) = call(
            app_at("/k8sailor/v0", true),
            Request::get("/dashboard/app.js")
                .header(header::IF_NONE_MATCH, etag.clone())
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        assert_eq!(headers[header::ETAG], etag);
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn the_page_needs_no_token_under_delegated_auth_but_the_api_does() {
        let source = Source::from_cache(
            CacheSource::new(k8scache::fixtures::filled_caches(), Vec::new()),
            None,
        );
        // Requests without a token are refused before any review: nothing answers here.
        let (service, _apiserver) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let reviewer = confk8s::Reviewer::new(
            kube::Client::new(service, "default"),
            confk8s::ReviewTtls::default(),
        );
        let state = AppState::new(
            Arc::new(Workloads::new(source)),
            Some(Arc::new(reviewer)),
            FairShares::default(),
            KEEP_ALIVE,
            crate::DEFAULT_KEPT_ANSWER_BYTES,
        );
        let opts = HttpOptions {
            auth: AuthMode::Delegated,
            ..options(&[])
        };
        let app = router(state, &opts).unwrap();
        let (status, _, _) = fetch(app.clone(), "/").await;
        assert_eq!(status, StatusCode::OK);
        let (status, _, _) = fetch(app.clone(), "/dashboard/app.js").await;
        assert_eq!(status, StatusCode::OK);
        let (status, _, _) = fetch(app, "/k8sailor/v0/pods").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn the_dashboard_can_be_turned_off_and_other_methods_are_refused() {
        let (status, _, _) = fetch(app_at("/k8sailor/v0", false), "/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, _) = call(
            app_at("/k8sailor/v0", true),
            Request::post("/").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
}

#[tokio::test]
async fn a_version_this_replica_has_not_reached_is_503_and_an_expired_one_410() {
    // The fake source is at version 1, and keeps nothing older.
    for (uri, status) in [
        ("/k8sailor/v0/pods?watch=true&resourceVersion=2", 503),
        ("/k8sailor/v0/services?watch=true&resourceVersion=2", 503),
        ("/k8sailor/v0/pods?watch=true&resourceVersion=x", 400),
        (
            "/k8sailor/v0/deployments/web/pods?namespace=ns-a&watch=true&resourceVersion=1",
            410,
        ),
    ] {
        let (got, headers, body) =
            call(app(), Request::get(uri).body(Body::empty()).unwrap()).await;
        let json: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (got.as_u16(), &json["code"]),
            (status, &serde_json::json!(status)),
            "{uri}: {json}"
        );
        if status == 503 {
            assert_eq!(headers[header::RETRY_AFTER], "1", "{uri}");
            assert!(
                json["error"]
                    .as_str()
                    .unwrap()
                    .contains("newer than this cache"),
                "{json}"
            );
        }
    }
    // Last-Event-ID resumes a watch as resourceVersion does; a list ignores it.
    let resumed = Request::get("/k8sailor/v0/pods?watch=true")
        .header("last-event-id", "2")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        call(app(), resumed).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let list = Request::get("/k8sailor/v0/pods")
        .header("last-event-id", "2")
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(app(), list).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_bare_options_is_a_204() {
    // CORS off: the route answers it, as the original did.
    let req = Request::builder()
        .method(Method::OPTIONS)
        .uri("/k8sailor/v0/pods")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = call(app_with(small_cluster(), &[]), req).await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::NO_CONTENT, &b""[..])
    );
}

#[tokio::test]
async fn a_last_event_id_that_is_not_text_is_a_400_and_odd_accept_ranges_are_skipped() {
    let mut req = watch_request(Some("text/event-stream"));
    req.headers_mut().remove(header::ACCEPT_ENCODING);
    req.headers_mut()
        .insert("last-event-id", HeaderValue::from_bytes(b"12\xff").unwrap());
    let (status, _, body) = call(app(), req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&body)));
    assert_eq!(
        answer["error"],
        "invalid Last-Event-ID: expected the id of an event this server sent"
    );
    // A range without a subtype matches nothing: the default, JSON lines.
    let res = app()
        .oneshot(watch_request(Some("text, text/event-stream;q=0")))
        .await
        .unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "application/x-ndjson");
}

#[tokio::test]
async fn without_auth_a_self_subject_access_review_is_answered_with_what_is_served() {
    let review = |verb: &str, resource: &str| {
        serde_json::json!({
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {
                "namespace": "ns-a", "verb": verb, "version": "v1", "resource": resource,
            }},
            "status": {"allowed": false},
        })
    };
    let post = |path: &str, content_type: &str, body: String| {
        Request::post(path)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap()
    };
    let reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    for (verb, resource, allowed) in [
        ("list", "pods", true),
        ("watch", "pods", true),
        ("get", "pods", true),
        ("create", "pods", false),
        ("delete", "pods", false),
        // Kept as metadata alone: not served on /api.
        ("list", "secrets", false),
    ] {
        let asked = review(verb, resource);
        let (status, _, body) =
            call(app(), post(reviews, "application/json", asked.to_string())).await;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        assert_eq!(
            answer["status"]["allowed"], allowed,
            "{verb} {resource}: {answer}"
        );
        assert_eq!(answer["spec"], asked["spec"]);
        assert_eq!(answer["kind"], "SelfSubjectAccessReview");
    }
    // Bodies it cannot read are the apiserver's refusals; other writes are still 405.
    for (content_type, body, code, reason) in [
        (
            "application/cbor",
            review("list", "pods").to_string(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "application/vnd.kubernetes.protobuf",
            review("list", "pods").to_string(),
            400,
            "BadRequest",
        ),
        ("application/json", "{".to_string(), 400, "BadRequest"),
        (
            "application/json",
            serde_json::json!({"kind": "Pod"}).to_string(),
            400,
            "BadRequest",
        ),
        (
            "application/json",
            serde_json::json!({"spec": {}}).to_string(),
            422,
            "Invalid",
        ),
    ] {
        let (status, _, answer) = call(app(), post(reviews, content_type, body.clone())).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(
            (status.as_u16(), &answer["reason"]),
            (code, &serde_json::json!(reason)),
            "{content_type} {body}: {answer}"
        );
    }
    let (status, _, _) = call(
        app(),
        post(
            "/api/v1/namespaces/ns-a/pods",
            "application/json",
            "{}".into(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

/// A Kubernetes API list for a caller that accepts gzip is gzipped once, as it is written:
/// the compression layer leaves an answer with a `Content-Encoding` alone.
#[tokio::test]
async fn a_kubernetes_api_list_is_gzipped_once() {
    let list = |gzip: bool| {
        let req = Request::get("/api/v1/namespaces/ns-a/pods");
        let req = if gzip {
            req.header(header::ACCEPT_ENCODING, "gzip")
        } else {
            req
        };
        req.body(Body::empty()).unwrap()
    };
    let (status, headers, plain) = call(app(), list(false)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get(header::CONTENT_ENCODING).is_none());
    let (status, headers, gzipped) = call(app(), list(true)).await;
    assert_eq!(status, StatusCode::OK);
    let codings: Vec<_> = headers.get_all(header::CONTENT_ENCODING).iter().collect();
    assert_eq!(codings, ["gzip"]);
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&gzipped[..]),
        &mut inflated,
    )
    .unwrap();
    let (plain, inflated): (Value, Value) = (
        serde_json::from_slice(&plain).unwrap(),
        serde_json::from_slice(&inflated).unwrap(),
    );
    assert_eq!(plain["kind"], "PodList");
    assert_eq!(inflated, plain);
}

/// Serves `app` on a loopback port as the server serves connections (HTTP/1.1 with
/// upgrades), for a real WebSocket client; its address.
async fn serve_on_loopback(app: App) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let app = app.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                        app.clone().oneshot(request.map(Body::new))
                    });
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                let _ = builder
                    .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

/// A WebSocket handshake for `path` on `address` from a page of `origin`, naming `protocol`.
fn socket_request(
    address: std::net::SocketAddr,
    path: &str,
    origin: Option<&str>,
    protocol: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{address}{path}")
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    if let Some(origin) = origin {
        headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
    }
    if let Some(protocol) = protocol {
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(protocol).unwrap(),
        );
    }
    request
}

/// The status a refused handshake is answered.
async fn refused_handshake(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> StatusCode {
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status(),
        Err(e) => panic!("an HTTP refusal, not {e}"),
        Ok(_) => panic!("the handshake is refused"),
    }
}

#[tokio::test]
async fn a_watch_over_websocket_sends_the_http_streams_lines_as_messages_then_closes() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let path = "/api/v1/namespaces/ns-a/pods?watch=true&timeoutSeconds=1";
    // The same watch as a plain stream, which ends after its second.
    let (status, _, streamed) = call(app(), Request::get(path).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let streamed = String::from_utf8(streamed).unwrap();
    assert!(streamed.lines().count() >= 2, "{streamed}");

    let address = serve_on_loopback(app()).await;
    let request = socket_request(
        address,
        path,
        Some("http://localhost:4466"),
        Some("base64.binary.k8s.io"),
    );
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(
        response.headers()[header::SEC_WEBSOCKET_PROTOCOL],
        "base64.binary.k8s.io"
    );
    // What the client sends is dropped; a ping is answered.
    socket.send(Message::text("ignored")).await.unwrap();
    socket
        .send(Message::Ping("are you there".into()))
        .await
        .unwrap();
    let (mut texts, mut pong) = (Vec::new(), false);
    let close = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("the watch ends after its timeoutSeconds")
            .expect("a close frame before the end")
            .unwrap();
        match message {
            Message::Text(text) => texts.push(text.to_string()),
            Message::Pong(payload) => pong = &payload[..] == b"are you there",
            Message::Close(frame) => break frame.expect("a close code"),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(pong, "the ping was answered");
    assert_eq!(close.code, CloseCode::Normal);
    // One event a message, each exactly the stream's line.
    assert_eq!(texts.concat(), streamed);
    assert_eq!(texts.len(), streamed.lines().count());

    // No subprotocol: none echoed.
    let request = socket_request(address, path, Some("http://localhost"), None);
    let (_, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert!(
        response
            .headers()
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .is_none()
    );
}

#[tokio::test]
async fn a_websocket_watch_is_refused_as_the_apiserver_refuses_its_handshake() {
    let address = serve_on_loopback(app()).await;
    let path = "/api/v1/namespaces/ns-a/pods?watch=true";
    // golang.org/x/net's websocket.Handler: no Origin is 403, two subprotocols 400.
    let request = socket_request(address, path, None, None);
    assert_eq!(refused_handshake(request).await, StatusCode::FORBIDDEN);
    let request = socket_request(
        address,
        path,
        Some("http://localhost"),
        Some("base64.binary.k8s.io, binary.k8s.io"),
    );
    assert_eq!(refused_handshake(request).await, StatusCode::BAD_REQUEST);
    // The watch's own checks come first, as HTTP answers.
    let request = socket_request(
        address,
        "/api/v1/namespaces/ns-a/pods?watch=true&timeoutSeconds=x",
        None,
        None,
    );
    assert_eq!(refused_handshake(request).await, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn with_auth_none_a_page_of_another_origin_opens_no_websocket() {
    let address = serve_on_loopback(app_with(small_cluster(), &["http://spa.example"])).await;
    let path = "/api/v1/namespaces/ns-a/pods?watch=true&timeoutSeconds=1";
    let request = socket_request(address, path, Some("http://evil.example"), None);
    assert_eq!(refused_handshake(request).await, StatusCode::FORBIDDEN);
    let own = format!("http://{address}");
    for origin in ["http://spa.example", own.as_str()] {
        let request = socket_request(address, path, Some(origin), None);
        tokio_tungstenite::connect_async(request)
            .await
            .unwrap_or_else(|e| panic!("{origin}: {e}"));
    }
    // Not a WebSocket: CORS's business, answered as before.
    let request = Request::get(path)
        .header(header::ORIGIN, "http://evil.example")
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = call(app_with(small_cluster(), &["http://spa.example"]), request).await;
    assert_eq!(status, StatusCode::OK);
}

/// A watch over WebSocket holds a watch's place in its caller's share for as long as the
/// socket is open, as a watch's body does: one past the share is the apiserver's 429 before
/// any switch, and the place is free again once the socket is closed.
#[tokio::test]
async fn a_websocket_watch_holds_a_watchs_place_until_its_socket_closes() {
    let state = AppState::new(
        Arc::new(Workloads::new(small_cluster())),
        None,
        FairShares {
            max_watches: 1,
            ..FairShares::default()
        },
        KEEP_ALIVE,
        crate::DEFAULT_KEPT_ANSWER_BYTES,
    );
    let address = serve_on_loopback(router(state, &options(&["*"])).unwrap()).await;
    let path = "/api/v1/namespaces/ns-a/pods?watch=true";
    let open = || socket_request(address, path, Some("http://localhost"), None);
    let (mut first, _) = tokio_tungstenite::connect_async(open()).await.unwrap();
    assert_eq!(
        refused_handshake(open()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    first.close(None).await.unwrap();
    // The server answers the close and lets go of the socket, and with it the place.
    while let Some(Ok(_)) = futures::StreamExt::next(&mut first).await {}
    // Its task ends just after the close is answered: asked again until it has, within 5 s.
    let mut answered = None;
    for _ in 0..250 {
        match tokio_tungstenite::connect_async(open()).await {
            Ok(_) => {
                answered = Some(StatusCode::SWITCHING_PROTOCOLS);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert_eq!(answered, Some(StatusCode::SWITCHING_PROTOCOLS));
}

/// Which of the original API's routes hold a stream's place in the fair share follows from
/// their declarations: a list whose GET takes `watch` when asked to watch, a log always, an
/// object whose GET is described without `watch` never (whatever its query says), and a
/// route without a description as its query says.
#[test]
fn a_routes_stream_is_known_from_its_declaration() {
    use dispatch::Streams;
    let state = AppState::new(
        Arc::new(Workloads::new(small_cluster())),
        None,
        FairShares::default(),
        KEEP_ALIVE,
        crate::DEFAULT_KEPT_ANSWER_BYTES,
    );
    let mount = "/k8sailor/v0";
    let mut declared = routes::api(mount).merge(logs::routes(options(&[]).logs, mount));
    let _ = declared.take_openapi();
    let (table, _) = declared
        .into_table(state, mount, std::iter::empty())
        .expect("the routes make a table");
    let streams = |path: &str| {
        let found = table.find(path).expect(path);
        found.route().streams()
    };
    for list in ["pods", "deployments", "services", "events", "configmaps"] {
        assert_eq!(
            streams(&format!("{mount}/{list}")),
            Streams::WhenWatching,
            "{list}"
        );
    }
    assert_eq!(streams(&format!("{mount}/pods/web-1")), Streams::Never);
    assert_eq!(streams(&format!("{mount}/deployments/web")), Streams::Never);
    assert_eq!(
        streams(&format!("{mount}/pods/web-1/logs")),
        Streams::Always
    );
    // The generic object routes are declared to answer once: their queries take no `watch`.
    use utoipa::IntoParams;
    for params in [
        routes::ObjectParams::into_params(|| None),
        routes::OutputParams::into_params(|| None),
    ] {
        assert!(params.iter().all(|p| p.name != "watch"));
    }
    assert_eq!(streams(&format!("{mount}/configmaps/web")), Streams::Never);
    assert_eq!(
        streams(&format!("{mount}/configmaps/web/output")),
        Streams::Never
    );
    assert_eq!(
        streams(&format!("{mount}/configmaps")),
        Streams::WhenWatching
    );

    // What the fair share makes of it: an object's GET that asks to watch holds a request's
    // place, as it answers once; a list's, a watch's; a log always a watch's.
    use fairness::{EnvelopeShares, Held, ShareRule};
    let held = |path: &str, query: &str| {
        let mut request = Request::get(format!("{path}{query}"))
            .body(Body::empty())
            .unwrap();
        request
            .extensions_mut()
            .insert(table.find(path).expect(path));
        EnvelopeShares.held(&request)
    };
    let (pod, pods) = (format!("{mount}/pods/web-1"), format!("{mount}/pods"));
    assert_eq!(held(&pod, "?watch=true"), Held::Requests);
    assert_eq!(held(&pods, "?watch=true"), Held::Watches);
    assert_eq!(held(&pods, "?watch=false"), Held::Requests);
    assert_eq!(held(&format!("{pod}/logs"), ""), Held::Watches);
    let config_maps = format!("{mount}/configmaps");
    assert_eq!(held(&config_maps, "?watch=true"), Held::Watches);
    assert_eq!(
        held(&format!("{config_maps}/web"), "?watch=true"),
        Held::Requests
    );
}
