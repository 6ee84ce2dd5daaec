//! Fair under abuse: a client holding its share of watches or connections gets 429 or loses
//! its own connections, while another client is served as if it were not there and the
//! probes on the health listener keep answering. A second client is a second loopback
//! address (127.0.0.2), or with `--auth delegated` a second token. Also HEAD under delegated
//! auth, compressed bodies, and watches that end by themselves.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::access::{account, grant, rule};
use crate::support::{SOON, Server, TestNamespace};

/// A loopback port free now, for `--health-listen` (the server prints only the API's).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A server with its health listener, and that listener's root URL.
fn start(args: &[&str]) -> (Server, String) {
    let health = format!("127.0.0.1:{}", free_port());
    let mut args = args.to_vec();
    args.extend(["--health-listen", &health]);
    (Server::start(&args), format!("http://{health}"))
}

/// An HTTP client whose connections come from `ip`.
fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(ip))
        .build()
        .expect("a client")
}

const HOG: [u8; 4] = [127, 0, 0, 2];
const QUIET: [u8; 4] = [127, 0, 0, 1];

/// An open watch: its answer, whose body is still streaming.
struct OpenWatch(reqwest::Response);

impl OpenWatch {
    async fn open(client: &reqwest::Client, url: &str, token: Option<&str>) -> OpenWatch {
        let mut request = client.get(url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("k8sailor answers");
        assert_eq!(response.status(), 200, "watch {url}");
        let mut watch = OpenWatch(response);
        // The initial events end with a BOOKMARK: the stream is established.
        let first = watch.next_chunk(SOON).await;
        assert!(matches!(first, Some(Ok(_))), "the watch started: {first:?}");
        watch
    }

    /// The next bytes; None if nothing came within `within`, Some(Err) once the stream ended
    /// (cut, or ended cleanly: Ok of an empty chunk).
    async fn next_chunk(&mut self, within: Duration) -> Option<Result<bytes::Bytes, String>> {
        match tokio::time::timeout(within, self.0.chunk()).await {
            Err(_) => None,
            Ok(Ok(Some(bytes))) => Some(Ok(bytes)),
            Ok(Ok(None)) => Some(Ok(bytes::Bytes::new())),
            Ok(Err(e)) => Some(Err(e.to_string())),
        }
    }

    /// Whether the stream ended (cut or not) within `within`, skipping what it still sends.
    async fn ended_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_chunk(left).await {
                None => return false,
                Some(Ok(bytes)) if bytes.is_empty() => return true,
                Some(Ok(_)) => continue,
                Some(Err(_)) => return true,
            }
        }
    }
}

/// A refusal in the envelope: status, Retry-After and the body.
async fn refused(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    // Bounded: a watch answered where a refusal was expected never ends by itself.
    let body = tokio::time::timeout(SOON, response.json())
        .await
        .unwrap_or_else(|_| panic!("{status}: not a refusal, a stream"))
        .expect("an envelope");
    (status, retry_after, body)
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let response = client.get(url).send().await.expect("k8sailor answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a body"))
}

/// The value of one sample in `/metrics`, by its name and labels as written there.
async fn metric(health: &str, sample: &str) -> String {
    let (status, body) = get(&reqwest::Client::new(), &format!("{health}/metrics")).await;
    assert_eq!(status, 200);
    body.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {sample} in /metrics:\n{body}"))
        .to_string()
}

#[tokio::test]
async fn a_client_past_its_share_of_watches_gets_429_and_another_is_served() {
    let ns = TestNamespace::new("fair-watches").await;
    let (server, health) = start(&["--namespace", &ns.name, "--max-watches", "4"]);
    let (hog, quiet) = (client_from(HOG), client_from(QUIET));
    let watch_url = format!("{}/pods?namespace={}&watch=true", server.base, ns.name);

    // Alone, the hog may hold the whole bound; the next one is refused.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(OpenWatch::open(&hog, &watch_url, None).await);
    }
    let response = hog.get(&watch_url).send().await.unwrap();
    assert_eq!(
        refused(response).await,
        (
            429,
            Some("1".to_string()),
            json!({"code": 429, "data": null, "error":
                "client 127.0.0.2 holds 4 open watches, its share of 4 (maxWatches divided \
                 among the clients with watches open): try again when one ends"})
        )
    );

    // Another client is served as if the hog were not there: it lists, and it watches (its
    // share is half the bound, whatever the hog holds), and the probes answer.
    let (status, body) = get(
        &quiet,
        &format!("{}/pods?namespace={}", server.base, ns.name),
    )
    .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, &body["code"], &body["data"], &body["error"]),
        (200, &json!(0), &json!([]), &json!("")),
        "{body}"
    );
    let _quiet_watch = OpenWatch::open(&quiet, &watch_url, None).await;
    assert_eq!(
        get(&quiet, &format!("{health}/readyz")).await,
        (200, "ok".to_string())
    );
    assert_eq!(
        get(&quiet, &format!("{health}/livez")).await,
        (200, "ok".to_string())
    );

    // Past its share now (two of four, with two clients), the hog gets its place back only
    // once it holds less than that.
    let response = hog.get(&watch_url).send().await.unwrap();
    let (status, _, body) = refused(response).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        body["error"],
        "client 127.0.0.2 holds 4 open watches, its share of 2 (maxWatches divided among the \
         clients with watches open): try again when one ends"
    );
    for (sample, value) in [
        (
            r#"k8sailor_fair_share_rejections_total{reason="watches"}"#,
            "2",
        ),
        (r#"k8sailor_fair_share_bound{share="watches"}"#, "4"),
        (r#"k8sailor_fair_share{share="watches"}"#, "2"),
        (r#"k8sailor_fair_share_identities{share="watches"}"#, "2"),
    ] {
        assert_eq!(metric(&health, sample).await, value, "{sample}");
    }
    // Back under its share (the server hears of the closed streams), it may watch again.
    drop(held.drain(..3));
    crate::support::eventually(SOON, "the hog's watch back under its share", || async {
        let response = hog.get(&watch_url).send().await.unwrap();
        (response.status() == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn at_the_connection_bound_the_hogs_connections_are_the_ones_closed() {
    let ns = TestNamespace::new("fair-connections").await;
    let (server, health) = start(&["--namespace", &ns.name, "--max-connections", "4"]);
    let (hog, quiet) = (client_from(HOG), client_from(QUIET));
    let watch_url = format!("{}/pods?namespace={}&watch=true", server.base, ns.name);
    // The hog holds every connection, each busy with a watch.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(OpenWatch::open(&hog, &watch_url, None).await);
    }

    // Another client is served: the hog's oldest connection made room.
    let (status, body) = get(
        &quiet,
        &format!("{}/pods?namespace={}", server.base, ns.name),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        held[0].ended_within(SOON).await,
        "the hog's oldest connection is closed"
    );
    for (i, watch) in held.iter_mut().enumerate().skip(1) {
        assert!(
            !watch.ended_within(Duration::from_millis(300)).await,
            "the hog's connection {i} is left open"
        );
    }

    // The hog, holding the most, only replaces its own waiting connections: all are busy, so
    // its new one is refused, and the other client keeps its own.
    let refused = hog.get(&watch_url).send().await;
    assert!(
        refused.is_err(),
        "the hog's new connection is closed: {refused:?}"
    );
    let (status, _) = get(&quiet, &format!("{}/ping", server.base)).await;
    assert_eq!(status, 200);
    assert_eq!(
        get(&quiet, &format!("{health}/readyz")).await,
        (200, "ok".to_string())
    );

    assert_eq!(
        metric(
            &health,
            r#"k8sailor_fair_share_rejections_total{reason="connection_closed"}"#
        )
        .await,
        "1"
    );
    assert_eq!(
        metric(
            &health,
            r#"k8sailor_fair_share_rejections_total{reason="connection_refused"}"#
        )
        .await,
        "1"
    );
}

#[tokio::test]
async fn with_delegated_auth_each_user_has_its_own_share_and_head_has_gets_access() {
    let ns = TestNamespace::new("fair-users").await;
    let reader = account(&ns, "reader").await;
    let other = account(&ns, "other").await;
    let nobody = account(&ns, "nobody").await;
    for user in [&reader, &other] {
        grant(
            &ns,
            &ns,
            user,
            vec![rule("", &["pods"], &["get", "list", "watch"])],
        )
        .await;
    }
    let (server, health) = start(&[
        "--auth",
        "delegated",
        "--namespace",
        &ns.name,
        "--max-watches",
        "2",
    ]);
    // Every request from one address: the users, not the address, are counted.
    let client = client_from(QUIET);
    let watch_url = format!("{}/pods?namespace={}&watch=true", server.base, ns.name);
    let list_url = format!("{}/pods?namespace={}", server.base, ns.name);
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(OpenWatch::open(&client, &watch_url, Some(&reader.token)).await);
    }
    let response = client
        .get(&watch_url)
        .bearer_auth(&reader.token)
        .send()
        .await
        .unwrap();
    let user = format!("system:serviceaccount:{}:reader", ns.name);
    assert_eq!(
        refused(response).await,
        (
            429,
            Some("1".to_string()),
            json!({"code": 429, "data": null, "error": format!(
                "user {user:?} holds 2 open watches, its share of 2 (maxWatches divided \
                 among the clients with watches open): try again when one ends")})
        )
    );
    let _other_watch = OpenWatch::open(&client, &watch_url, Some(&other.token)).await;
    let (status, body) = get_as(&client, &list_url, &other.token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        get(&client, &format!("{health}/readyz")).await,
        (200, "ok".to_string())
    );

    // HEAD: GET's status and headers without the body, under GET's access.
    for (token, expected) in [(&reader.token, 200), (&nobody.token, 403)] {
        let got = client
            .get(&list_url)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let head = client
            .head(&list_url)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            (got.status().as_u16(), head.status().as_u16()),
            (expected, expected)
        );
        assert_eq!(
            head.headers()["content-type"],
            got.headers()["content-type"]
        );
        assert_eq!(head.headers().get("allow"), None);
        let got_length = got.headers().get("content-length").cloned();
        assert_eq!(head.headers().get("content-length"), got_length.as_ref());
        assert_eq!(head.bytes().await.unwrap().len(), 0, "HEAD has no body");
    }
}

async fn get_as(client: &reqwest::Client, url: &str, token: &str) -> (u16, String) {
    let response = client.get(url).bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn a_compressed_body_is_415_with_the_reason() {
    let ns = TestNamespace::new("fair-gzip").await;
    let server = Server::start(&["--namespace", &ns.name]);
    // `{"replicas":1}` gzipped: what a client compressing its requests would send.
    let gzipped: &[u8] = &[
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x2a, 0x4a, 0x2d,
        0xc8, 0xc9, 0x4c, 0x4e, 0x2c, 0x56, 0xb2, 0x32, 0xac, 0x05, 0x00, 0x20, 0x7b, 0x2c, 0xc1,
        0x0e, 0x00, 0x00, 0x00,
    ];
    let response = server
        .http
        .post(format!(
            "{}/deployments/web?namespace={}",
            server.base, ns.name
        ))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(gzipped)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["connection"], "close");
    let (status, _, body) = refused(response).await;
    assert_eq!(
        (status, body),
        (
            415,
            json!({"code": 415, "data": null, "error":
                "request bodies are taken uncompressed: Content-Encoding gzip is not supported"})
        )
    );
}

#[tokio::test]
async fn a_watch_ends_cleanly_after_its_lifetime_and_resumes_from_its_version() {
    let ns = TestNamespace::new("fair-lifetime").await;
    let server = Server::start(&["--namespace", &ns.name, "--min-request-timeout", "1s"]);
    let watch_url = format!("{}/pods?namespace={}&watch=true", server.base, ns.name);
    let response = server.http.get(&watch_url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // Ends by itself, as a complete answer (no error).
    let text = tokio::time::timeout(SOON, response.text())
        .await
        .expect("the watch ends by itself")
        .expect("cleanly");
    let bookmark: Value = serde_json::from_str(text.lines().last().expect("a bookmark")).unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK", "{text}");
    let version = bookmark["object"]["resourceVersion"].as_str().unwrap();
    // The client resumes where it was.
    let resumed = server
        .http
        .get(format!("{watch_url}&resourceVersion={version}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let text = tokio::time::timeout(SOON, resumed.text())
        .await
        .unwrap()
        .unwrap();
    // Nothing changed in the namespace: no event, then the BOOKMARK, at the version asked for
    // or a later one the cache has reached since (versions only go forward).
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["type"], "BOOKMARK", "{text}");
    let at = |v: &str| v.parse::<u64>().expect("a numeric resourceVersion");
    let resumed_at = lines[0]["object"]["resourceVersion"].as_str().unwrap();
    assert!(at(resumed_at) >= at(version), "{text}");
}
