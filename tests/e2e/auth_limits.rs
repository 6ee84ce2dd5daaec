//! `--auth delegated` under abuse: a flood of made-up bearer tokens costs the apiserver at
//! most the configured rate of TokenReviews, and every refusal is an envelope with the
//! status that fits it (429 with Retry-After, 405, 400), never a bare text answer.

use std::time::Instant;

use futures::StreamExt;
use serde_json::Value;

use crate::deploy::admin_token;
use crate::support::{SOON, Server, TestNamespace, eventually};

/// The value of an unlabelled counter in Prometheus text, e.g. `k8sailor_auth_token_reviews_total`.
pub(crate) fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{metrics}")) as u64
}

/// A request with an Authorization header: status, Retry-After or Allow (whichever is
/// sent), and the body, which must be JSON.
async fn enveloped(
    server: &Server,
    method: &str,
    path: &str,
    authorization: &str,
) -> (u16, Option<String>, Value) {
    let (status, headers, text) = server
        .request(method, path, &[("Authorization", authorization)])
        .await;
    let header = ["retry-after", "allow"]
        .iter()
        .find_map(|name| headers.get(*name))
        .map(|v| v.to_str().expect("an ASCII header").to_string());
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{path}: {status} is not an envelope ({e}): {text}"));
    (status, header, body)
}

#[tokio::test]
async fn a_flood_of_bogus_tokens_costs_at_most_the_review_rate() {
    let ns = TestNamespace::new("flood").await;
    let (rate, burst) = (5u64, 10u64);
    let server = Server::start(&[
        "--auth",
        "delegated",
        "--token-review-rate",
        &rate.to_string(),
        "--token-review-burst",
        &burst.to_string(),
        "--token-reviews-in-flight",
        "4",
    ]);
    let path = format!("/k8sailor/v0/pods?namespace={}", ns.name);
    let flood = 2_000;
    let start = Instant::now();
    let answers: Vec<(u16, Option<String>, Value)> = futures::stream::iter(0..flood)
        .map(|n| {
            let bearer = format!("Bearer bogus-token-{n}-{}", ns.name);
            let path = &path;
            let server = &server;
            async move { enveloped(server, "GET", path, &bearer).await }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let elapsed = start.elapsed();

    let mut rejected = 0;
    let mut throttled = 0;
    for (status, retry_after, body) in &answers {
        assert_eq!(body["code"], *status, "{body}");
        assert!(!body["error"].as_str().unwrap_or("").is_empty(), "{body}");
        match status {
            401 => rejected += 1,
            429 => {
                throttled += 1;
                let secs: u64 = retry_after
                    .as_deref()
                    .expect("a 429 says when to come back")
                    .parse()
                    .expect("Retry-After in seconds");
                assert!(secs >= 1, "Retry-After {secs}");
            }
            other => panic!("a bogus token got {other}: {body}"),
        }
    }
    let bound = burst + rate * elapsed.as_secs_f64().ceil() as u64;
    assert!(
        rejected <= bound,
        "{rejected} tokens reviewed in {elapsed:?}: the bound is {bound}"
    );
    assert!(throttled > 0, "the flood was never throttled");

    let (status, metrics) = server.probe("/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        counter(&metrics, "k8sailor_auth_token_reviews_total"),
        rejected,
        "each 401 cost one TokenReview, each 429 none"
    );
    assert_eq!(
        counter(&metrics, "k8sailor_auth_token_reviews_throttled_total"),
        throttled
    );

    // Probes stay open, and a real caller gets through once the flood's budget refills.
    assert_eq!(server.probe("/livez").await.0, 200);
    let admin = format!("Bearer {}", admin_token());
    eventually(SOON, "the admin's list after the flood", || async {
        let (status, _, _) = enveloped(&server, "GET", &path, &admin).await;
        (status == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn delegated_refusals_are_enveloped_with_the_status_that_fits() {
    let ns = TestNamespace::new("auth-edge").await;
    let server = Server::start(&["--auth", "delegated"]);
    let admin = format!("Bearer {}", admin_token());
    let send = |method: &'static str, path: String| {
        let (server, admin) = (&server, &admin);
        async move {
            let (status, allow, body) =
                enveloped(server, method, &format!("/k8sailor/v0{path}"), admin).await;
            let code = if status == 200 { 0 } else { status };
            assert_eq!(body["code"], code, "{path}: {body}");
            (status, allow, body)
        }
    };

    // No token makes PUT /pods valid: it is a 405 naming what is, as without auth.
    let (status, headers, body) = send("PUT", "/pods".into()).await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(headers.as_deref(), Some("GET"));

    // A name that is not UTF-8 is the caller's mistake, answered in the envelope.
    let (status, _, body) = send("GET", format!("/pods/%FF%FE?namespace={}", ns.name)).await;
    assert_eq!(status, 400, "{body}");
    let (status, _, body) = send("GET", "/pods?namespace=%FF".into()).await;
    assert_eq!(status, 400, "{body}");

    // And a valid request still passes.
    let (status, _, body) = send("GET", format!("/pods?namespace={}", ns.name)).await;
    assert_eq!(status, 200, "{body}");
}
