//! `--auth delegated` under abuse and revocation (issue 18): RBAC evaluated in memory from
//! the watched Roles and bindings, so a token with no rights costs a few SubjectAccessReviews
//! however many namespaces it asks about, and a RoleBinding deleted hides its namespace from
//! lists and ends the watches that showed it within two seconds; TokenReviews bounded per
//! client address, so a flood of bogus tokens from one address denies no one else; a deleted
//! ServiceAccount's token refused, and its watch ended, once its review is a TTL old.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, PostParams};
use serde_json::Value;

use crate::access::{User, WatchLines, account, ask, grant, rule};
use crate::auth_limits::counter;
use crate::support::{SOON, Server, TestNamespace, eventually, pod};

/// How soon a deleted RoleBinding must take effect.
const RBAC_TAKES_EFFECT: Duration = Duration::from_secs(2);

/// The SubjectAccessReviews one user may cost at once where RBAC says no, and how often one
/// more (confk8s::ACCESS_REVIEWS_PER_USER, ACCESS_REVIEW_REFILL).
const ACCESS_REVIEWS_PER_USER: u64 = 5;
const ACCESS_REVIEW_REFILL: Duration = Duration::from_secs(6);

async fn delegated(args: &[&str]) -> Server {
    let mut all = vec!["--auth", "delegated"];
    all.extend_from_slice(args);
    let server = Server::start(&all);
    // Until the RBAC watches have synced every access is a review: wait for them.
    eventually(SOON, "RBAC evaluated in memory", || async {
        let (_, body) = server.probe("/readyz?verbose").await;
        body.contains("RBAC evaluated in memory").then_some(())
    })
    .await;
    server
}

async fn status_of(http: &reqwest::Client, url: &str, token: &str) -> u16 {
    http.get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("k8sailor answers")
        .status()
        .as_u16()
}

/// A list as `token` sees it.
async fn list(server: &Server, path: &str, token: &str) -> (u16, Value) {
    ask(server, "GET", path, token).await
}

fn namespaces_in(body: &Value) -> BTreeSet<String> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {body}"))
        .iter()
        .map(|o| o["namespace"].as_str().unwrap().to_string())
        .collect()
}

/// Reads a watch until it ends, within `deadline`; what it sent meanwhile.
async fn ends_within(mut watch: WatchLines, deadline: Duration, what: &str) -> String {
    let mut text = String::new();
    let ended = tokio::time::timeout(deadline, async {
        while let Ok(Some(chunk)) = watch.response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "{what}: the watch still runs after {deadline:?}: {text}"
    );
    text
}

#[tokio::test]
async fn a_flood_of_bogus_tokens_from_one_address_denies_no_one_else() {
    const USERS: [&str; 20] = [
        "u00", "u01", "u02", "u03", "u04", "u05", "u06", "u07", "u08", "u09", "u10", "u11", "u12",
        "u13", "u14", "u15", "u16", "u17", "u18", "u19",
    ];
    let ns = TestNamespace::new("flood-fair").await;
    // Every ServiceAccount of the namespace may list its pods.
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some("accounts-list-pods".into());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: "view".into(),
    };
    binding.subjects = Some(vec![Subject {
        kind: "Group".into(),
        name: format!("system:serviceaccounts:{}", ns.name),
        ..Subject::default()
    }]);
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .expect("the RoleBinding");
    let users: Vec<User> = futures::future::join_all(USERS.iter().map(|u| account(&ns, u))).await;
    let server = delegated(&[]).await;
    let url = format!("{}/pods?namespace={}", server.base, ns.name);

    // The flood: made-up tokens from 127.0.0.2, as fast as 32 connections go, for a few
    // seconds at most.
    let flooder = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<IpAddr>().unwrap())
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let throttled = Arc::new(AtomicU64::new(0));
    let flood = tokio::spawn({
        let (url, stop, throttled) = (url.clone(), stop.clone(), throttled.clone());
        async move {
            let start = Instant::now();
            let mut sent = 0u64;
            let mut answers = futures::stream::iter(0..)
                .take_while(|_| {
                    let go = !stop.load(Ordering::Relaxed) && start.elapsed() < SOON;
                    std::future::ready(go)
                })
                .map(|n| {
                    let (flooder, url) = (&flooder, &url);
                    async move { status_of(flooder, url, &format!("bogus-{n}")).await }
                })
                .buffer_unordered(32);
            while let Some(status) = answers.next().await {
                sent += 1;
                match status {
                    401 => {}
                    429 => {
                        throttled.fetch_add(1, Ordering::Relaxed);
                    }
                    other => panic!("a bogus token got {other}"),
                }
            }
            sent
        }
    });
    eventually(SOON, "the flood to spend its address's budget", || async {
        (throttled.load(Ordering::Relaxed) > 0).then_some(())
    })
    .await;

    // Meanwhile 20 real users sign in from 127.0.0.1, all at once.
    let statuses = futures::future::join_all(
        users
            .iter()
            .map(|user| status_of(&server.http, &url, &user.token)),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let sent = flood.await.unwrap();
    let denied: Vec<&u16> = statuses.iter().filter(|s| **s != 200).collect();
    assert_eq!(denied.len(), 0, "real users denied: {statuses:?}");
    assert!(
        throttled.load(Ordering::Relaxed) > 0 && sent > 0,
        "the flood ran"
    );
}

#[tokio::test]
async fn a_token_with_no_rights_asking_a_hundred_namespaces_costs_a_few_reviews() {
    let ns = TestNamespace::new("no-rights").await;
    let nobody = account(&ns, "nobody").await;
    let server = delegated(&[]).await;
    let start = Instant::now();
    for n in 0..100 {
        let (status, body) = list(
            &server,
            &format!("/pods?namespace={}-{n}", ns.name),
            &nobody.token,
        )
        .await;
        assert_eq!(status, 403, "{body}");
    }
    // Across namespaces: nothing, without a review per namespace.
    let (status, body) = list(&server, "/pods", &nobody.token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], serde_json::json!([]), "{body}");
    let elapsed = start.elapsed();

    let (_, metrics) = server.probe("/metrics").await;
    let reviews = counter(&metrics, "k8sailor_auth_access_reviews_total");
    let bound = ACCESS_REVIEWS_PER_USER
        + (elapsed.as_secs_f64() / ACCESS_REVIEW_REFILL.as_secs_f64()).ceil() as u64;
    assert!(
        (1..=bound).contains(&reviews),
        "{reviews} SubjectAccessReviews for 101 requests in {elapsed:?}: the bound is {bound}"
    );
    assert_eq!(
        counter(&metrics, "k8sailor_auth_access_reviews_skipped_total") + reviews,
        101,
        "each request refused by RBAC cost a review or was refused without one"
    );
}

#[tokio::test]
async fn a_role_binding_deleted_hides_its_namespace_from_lists_and_ends_watches() {
    let home = TestNamespace::new("revoke-a").await;
    let other = TestNamespace::new("revoke-b").await;
    for ns in [&home, &other] {
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod("p", &[]))
            .await
            .expect("a pod");
    }
    let reader = account(&home, "reader").await;
    let read_pods = || vec![rule("", &["pods"], &["get", "list", "watch"])];
    grant(&home, &home, &reader, read_pods()).await;
    grant(&other, &home, &reader, read_pods()).await;
    let server = delegated(&[]).await;
    let both = BTreeSet::from([home.name.clone(), other.name.clone()]);
    let mine = |body: &Value| -> BTreeSet<String> {
        namespaces_in(body).intersection(&both).cloned().collect()
    };
    eventually(SOON, "both pods in the filtered list", || async {
        let (status, body) = list(&server, "/pods", &reader.token).await;
        (status == 200 && mine(&body) == both).then_some(())
    })
    .await;
    let mut across = WatchLines::open(&server, "/pods?watch=true", &reader.token).await;
    let (initial, _) = across.initial().await;
    assert_eq!(
        initial,
        BTreeSet::from([
            (home.name.clone(), "p".to_string()),
            (other.name.clone(), "p".to_string())
        ])
    );
    let watch_other = format!("/pods?watch=true&namespace={}", other.name);
    let mut one = WatchLines::open(&server, &watch_other, &reader.token).await;
    one.initial().await;
    let mut kept = WatchLines::open(
        &server,
        &format!("/pods?watch=true&namespace={}", home.name),
        &reader.token,
    )
    .await;
    kept.initial().await;

    other
        .api::<RoleBinding>()
        .delete("access-reader", &DeleteParams::default())
        .await
        .expect("delete the RoleBinding");
    eventually(
        RBAC_TAKES_EFFECT,
        "the list without the namespace",
        || async {
            let (status, body) = list(&server, "/pods", &reader.token).await;
            (status == 200 && mine(&body) == BTreeSet::from([home.name.clone()])).then_some(())
        },
    )
    .await;
    let (status, body) = list(
        &server,
        &format!("/pods?namespace={}", other.name),
        &reader.token,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    ends_within(across, RBAC_TAKES_EFFECT, "the watch across namespaces").await;
    ends_within(one, RBAC_TAKES_EFFECT, "the watch of the namespace").await;

    // The watch of the namespace still granted goes on and delivers.
    home.api::<Pod>()
        .create(&PostParams::default(), &pod("q", &[]))
        .await
        .expect("another pod");
    let event = kept.next().await;
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["name"], "q", "{event}");
}

#[tokio::test]
async fn a_deleted_service_account_is_refused_within_the_ttl_and_its_watch_ends() {
    let ns = TestNamespace::new("revoke-sa").await;
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod("p", &[]))
        .await
        .expect("a pod");
    let gone = account(&ns, "gone").await;
    grant(
        &ns,
        &ns,
        &gone,
        vec![rule("", &["pods"], &["list", "watch"])],
    )
    .await;
    let ttl = Duration::from_secs(4);
    let server = delegated(&["--token-review-ttl", "4s"]).await;
    let pods = format!("/pods?namespace={}", ns.name);
    let (status, body) = list(&server, &pods, &gone.token).await;
    assert_eq!(status, 200, "{body}");
    let mut watch = WatchLines::open(&server, &format!("{pods}&watch=true"), &gone.token).await;
    watch.initial().await;

    ns.api::<ServiceAccount>()
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete the ServiceAccount");
    // The apiserver itself keeps a token's authentication for 10 s: refused within our TTL
    // after it does.
    let deadline = ttl + Duration::from_secs(10) + SOON;
    eventually(deadline, "the deleted account's token refused", || async {
        let (status, body) = list(&server, &pods, &gone.token).await;
        (status == 401).then_some(body)
    })
    .await;
    ends_within(watch, deadline, "the deleted account's watch").await;
    let (_, metrics) = server.probe("/metrics").await;
    assert!(
        counter(&metrics, "k8sailor_auth_token_reviews_refreshed_total") > 0,
        "the token in use was reviewed ahead"
    );
}
