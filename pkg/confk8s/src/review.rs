//! Delegated authentication and authorization, the kube-rbac-proxy way: a caller's bearer token
//! is checked with a TokenReview, and each thing it asks for with a SubjectAccessReview, so a
//! service in front of the apiserver grants exactly what the caller's own RBAC grants.
//! Answers are cached (allows longer than denials, as the apiserver's own webhook
//! authorizer does), keyed by a SHA-256 of the token, never the token itself.

use std::collections::BTreeSet;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::Semaphore;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{Api, Client};

/// How long an answer is reused. A refusal is kept shorter than a grant so that a caller
/// just given a token or a role is not turned away for long.
#[derive(Clone, Copy, Debug)]
pub struct ReviewTtls {
    /// An accepted token's user; default 5 min. A revoked token is honoured this long.
    pub authenticated: Duration,
    /// A refused token; default 30 s.
    pub unauthenticated: Duration,
    /// An allowed access; default 5 min, also the life of each per-namespace answer of
    /// [`Reviewer::namespaces_allowed`]. A revoked role is honoured this long.
    pub allowed: Duration,
    /// A denied access; default 30 s.
    pub denied: Duration,
}

impl Default for ReviewTtls {
    fn default() -> Self {
        ReviewTtls {
            authenticated: Duration::from_secs(300),
            unauthenticated: Duration::from_secs(30),
            allowed: Duration::from_secs(300),
            denied: Duration::from_secs(30),
        }
    }
}

/// How many TokenReviews may be sent for tokens not in the cache. Every distinct bogus token
/// costs one review, so without a bound a flood of them is a flood on the apiserver; beyond
/// the bound a caller is told to come back later ([`ReviewError::Throttled`]). Known tokens
/// are answered from the cache and never wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenReviewLimits {
    /// Sustained reviews per second.
    pub per_second: NonZeroU32,
    /// Reviews allowed at once after a quiet spell (a dashboard's first page, many users).
    pub burst: NonZeroU32,
    /// Reviews waiting for the apiserver at one time.
    pub in_flight: usize,
}

impl Default for TokenReviewLimits {
    fn default() -> Self {
        TokenReviewLimits {
            per_second: NonZeroU32::new(20).expect("non-zero"),
            burst: NonZeroU32::new(40).expect("non-zero"),
            in_flight: 8,
        }
    }
}

/// What the reviewer has asked the apiserver, for metrics.
#[derive(Debug, Default)]
pub struct ReviewCounts {
    /// TokenReviews sent.
    pub token_reviews: AtomicU64,
    /// Unknown tokens refused because the bound on TokenReviews was reached.
    pub token_reviews_throttled: AtomicU64,
    /// SubjectAccessReviews sent.
    pub access_reviews: AtomicU64,
}

/// Who a token belongs to, as the apiserver says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// Such as `system:serviceaccount:ns:name`; empty if the apiserver named none.
    pub username: String,
    /// Empty if the apiserver gave none.
    pub uid: String,
    /// The groups RBAC bindings may name, such as `system:authenticated`.
    pub groups: Vec<String>,
    /// Further attributes from the authenticator, passed on to access reviews as they came.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// What a request does, in RBAC's terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// An RBAC verb: `get`, `list`, `watch`, `create`, ...
    pub verb: &'static str,
    /// "" for the core group.
    pub group: &'static str,
    /// The plural resource name, such as `pods`.
    pub resource: &'static str,
    /// Such as `log`; "" for the resource itself.
    pub subresource: &'static str,
    /// None: in every namespace.
    pub namespace: Option<String>,
    /// None: any object (lists, creates).
    pub name: Option<String>,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns:?}"),
            None => write!(f, " in all namespaces"),
        }
    }
}

/// Why a caller is refused. The variants are kept apart because each asks the caller for
/// something different (another token, another role, patience); the messages are for the
/// caller.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    /// The apiserver did not accept the bearer token; the message says so, with its reason
    /// when it gave one.
    #[error("{0}")]
    Unauthenticated(String),
    /// The apiserver's authorizers do not allow the access.
    #[error("{user} may not {access}{}", reason_suffix(.reason))]
    Forbidden {
        /// The token's username (or "our own account" from [`Reviewer::check_own_access`]).
        user: String,
        /// The access refused, as [`Access`] displays it.
        access: String,
        /// The authorizer's reason; often empty, and then left out of the message.
        reason: String,
    },
    /// The review could not be made (apiserver unreachable, or our own account may not create
    /// reviews): our fault, not the caller's. Never cached.
    #[error("cannot review the request with the Kubernetes API: {0}")]
    Unavailable(String),
    /// Too many unknown tokens are being reviewed; the caller may try again after the wait.
    #[error(
        "too many new bearer tokens are being checked with the Kubernetes API: try again in {}s",
        retry_after.as_secs()
    )]
    Throttled {
        /// Whole seconds, at least one: ready for a `Retry-After` header.
        retry_after: Duration,
    },
}

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

/// A bounded cache whose entries live as long as their kind of answer deserves: `ok` for
/// success, `err` for refusal. Bounded by moka's frequency-aware eviction, so a flood of
/// distinct bogus tokens cannot push out the answers that are in use.
type AnswerCache<K, T, E> = moka::sync::Cache<K, Result<T, E>>;

struct AnswerExpiry {
    ok: Duration,
    err: Duration,
}

impl<K, T, E> moka::Expiry<K, Result<T, E>> for AnswerExpiry {
    fn expire_after_create(&self, _: &K, value: &Result<T, E>, _: Instant) -> Option<Duration> {
        Some(if value.is_ok() { self.ok } else { self.err })
    }
}

fn answer_cache<K, T, E>(ok: Duration, err: Duration) -> AnswerCache<K, T, E>
where
    K: Hash + Eq + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    moka::sync::Cache::builder()
        .max_capacity(CACHE_CAPACITY)
        .expire_after(AnswerExpiry { ok, err })
        .build()
}

type TokenHash = [u8; 32];

/// Entries each cache holds at most.
const CACHE_CAPACITY: u64 = 10_000;

/// Reviews callers' tokens and requests against the apiserver, with caching.
pub struct Reviewer {
    client: Client,
    ttls: ReviewTtls,
    users: AnswerCache<TokenHash, UserInfo, String>,
    decisions: AnswerCache<(TokenHash, Access), (), ReviewError>,
    token_review_rate: DefaultDirectRateLimiter,
    token_reviews_in_flight: Arc<Semaphore>,
    counts: ReviewCounts,
    /// Per-namespace answers for lists filtered by rights, see [`Reviewer::namespaces_allowed`].
    namespace_decisions: moka::sync::Cache<(TokenHash, Access), bool>,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("ttls", &self.ttls)
            .finish()
    }
}

fn rate_limiter(limits: TokenReviewLimits) -> DefaultDirectRateLimiter {
    RateLimiter::direct(Quota::per_second(limits.per_second).allow_burst(limits.burst))
}

fn token_hash(token: &str) -> TokenHash {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut hash = [0; 32];
    hash.copy_from_slice(digest.as_ref());
    hash
}

impl Reviewer {
    /// The client's own account must be allowed to create TokenReviews and
    /// SubjectAccessReviews (the built-in ClusterRole `system:auth-delegator`).
    pub fn new(client: Client, ttls: ReviewTtls) -> Self {
        Reviewer {
            client,
            ttls,
            users: answer_cache(ttls.authenticated, ttls.unauthenticated),
            decisions: answer_cache(ttls.allowed, ttls.denied),
            token_review_rate: rate_limiter(TokenReviewLimits::default()),
            token_reviews_in_flight: Arc::new(Semaphore::new(
                TokenReviewLimits::default().in_flight,
            )),
            counts: ReviewCounts::default(),
            namespace_decisions: namespace_decision_cache(ttls.allowed),
        }
    }

    /// Bounds the TokenReviews sent for tokens not in the cache.
    pub fn with_token_review_limits(mut self, limits: TokenReviewLimits) -> Self {
        self.token_review_rate = rate_limiter(limits);
        self.token_reviews_in_flight = Arc::new(Semaphore::new(limits.in_flight));
        self
    }

    /// What has been asked of the apiserver so far.
    pub fn counts(&self) -> &ReviewCounts {
        &self.counts
    }

    /// A permit to send one TokenReview now, or how long to wait for one.
    fn token_review_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ReviewError> {
        let throttled = |retry_after: Duration| {
            self.counts
                .token_reviews_throttled
                .fetch_add(1, Ordering::Relaxed);
            // Retry-After is whole seconds; never tell a client to come back at once.
            let retry_after = Duration::from_secs(retry_after.as_secs_f64().ceil().max(1.0) as u64);
            ReviewError::Throttled { retry_after }
        };
        // The slot first: a request refused for concurrency must not spend the rate.
        let permit = self
            .token_reviews_in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| throttled(Duration::from_secs(1)))?;
        self.token_review_rate.check().map_err(|not_until| {
            throttled(not_until.wait_time_from(DefaultClock::default().now()))
        })?;
        Ok(permit)
    }

    /// Creates a review (they are never stored); the apiserver's answer fills its status.
    async fn ask<K>(&self, review: &K) -> Result<K, ReviewError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::all(self.client.clone())
            .create(&Default::default(), review)
            .await
            .map_err(|e| ReviewError::Unavailable(e.to_string()))
    }

    /// Whether our own account may create the reviews; Forbidden names what is missing.
    pub async fn check_own_access(&self) -> Result<(), ReviewError> {
        use k8s_openapi::api::authorization::v1::{
            SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
        };
        for (group, resource) in [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ] {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some("create".into()),
                        group: Some(group.into()),
                        resource: Some(resource.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = self.ask(&review).await?;
            if !answer.status.is_some_and(|s| s.allowed) {
                return Err(ReviewError::Forbidden {
                    user: "our own account".into(),
                    access: format!("create {resource}.{group}"),
                    reason: "bind it to the ClusterRole system:auth-delegator".into(),
                });
            }
        }
        Ok(())
    }

    /// Whether the token's owner may do `access`: Ok, or why not.
    pub async fn review(&self, token: &str, access: &Access) -> Result<(), ReviewError> {
        let hash = token_hash(token);
        let user = self.authenticate(hash, token).await?;
        let key = (hash, access.clone());
        if let Some(decision) = self.decisions.get(&key) {
            return decision;
        }
        let decision = self.authorize(&user, access).await?;
        self.decisions.insert(key, decision.clone());
        decision
    }

    /// Who the token belongs to, from the same cached TokenReview [`Reviewer::review`] makes.
    pub async fn user(&self, token: &str) -> Result<UserInfo, ReviewError> {
        self.authenticate(token_hash(token), token).await
    }

    async fn authenticate(&self, hash: TokenHash, token: &str) -> Result<UserInfo, ReviewError> {
        if let Some(user) = self.users.get(&hash) {
            return user.map_err(ReviewError::Unauthenticated);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let _permit = self.token_review_permit()?;
        self.counts.token_reviews.fetch_add(1, Ordering::Relaxed);
        let answer = self.ask(&review).await?;
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(UserInfo {
                username: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }),
            _ => Err(match status.error.filter(|e| !e.is_empty()) {
                Some(e) => format!("the bearer token was not accepted: {e}"),
                None => "the bearer token was not accepted".to_string(),
            }),
        };
        self.users.insert(hash, user.clone());
        user.map_err(ReviewError::Unauthenticated)
    }

    /// The apiserver's decision (Ok or Forbidden); Err(Unavailable) if it could not be asked.
    async fn authorize(
        &self,
        user: &UserInfo,
        access: &Access,
    ) -> Result<Result<(), ReviewError>, ReviewError> {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                uid: non_empty(&user.uid),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(access.verb.to_string()),
                    group: Some(access.group.to_string()),
                    resource: Some(access.resource.to_string()),
                    subresource: non_empty(access.subresource),
                    namespace: access.namespace.clone(),
                    name: access.name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        self.counts.access_reviews.fetch_add(1, Ordering::Relaxed);
        let answer = self.ask(&review).await?;
        let status = answer.status.unwrap_or_default();
        Ok(if status.allowed {
            Ok(())
        } else {
            Err(ReviewError::Forbidden {
                user: user.username.clone(),
                access: access.to_string(),
                reason: status.reason.unwrap_or_default(),
            })
        })
    }
}

/// Answers per (token, namespace) kept for a filtered list: many per caller (one per namespace
/// holding objects), so more of them than of single decisions.
const NAMESPACE_CACHE_CAPACITY: u64 = 200_000;

/// Both answers live as long as an allow: a denial kept only 30 s would make a caller who may
/// read a few of thousands of namespaces cost thousands of reviews every 30 s while it polls.
/// A namespace granted meanwhile shows in filtered lists once its denial expires.
fn namespace_decision_cache(ttl: Duration) -> moka::sync::Cache<(TokenHash, Access), bool> {
    moka::sync::Cache::builder()
        .max_capacity(NAMESPACE_CACHE_CAPACITY)
        .time_to_live(ttl)
        .build()
}

/// Cached lookups between two yields to the runtime: about a millisecond of work.
const LOOKUPS_BETWEEN_YIELDS: usize = 2048;

impl Reviewer {
    /// The namespaces among `candidates` where the token's owner may do `access` (its
    /// namespace is replaced by each candidate's), for a list across namespaces that shows
    /// only what the caller may see. One review per candidate not answered within the allow
    /// TTL, at most `concurrency` at a time; a caller allowed cluster-wide should be told so
    /// with [`Reviewer::review`] first, which costs one. Unauthenticated and Unavailable are
    /// errors; denials are not.
    pub async fn namespaces_allowed(
        &self,
        token: &str,
        access: &Access,
        candidates: Vec<String>,
        concurrency: usize,
    ) -> Result<BTreeSet<String>, ReviewError> {
        use futures::{StreamExt, TryStreamExt};
        let hash = token_hash(token);
        let user = self.authenticate(hash, token).await?;
        // Cached answers first, without a future each: a polling dashboard over thousands of
        // namespaces costs lookups only, one key reused so none allocates.
        let mut allowed = BTreeSet::new();
        let mut unknown = Vec::new();
        let mut key = (hash, access.clone());
        for (i, namespace) in candidates.into_iter().enumerate() {
            key.1.namespace = Some(namespace);
            let decision = self.namespace_decisions.get(&key);
            if i % LOOKUPS_BETWEEN_YIELDS == LOOKUPS_BETWEEN_YIELDS - 1 {
                tokio::task::yield_now().await;
            }
            // Set just above: taken back, not cloned.
            let Some(namespace) = key.1.namespace.take() else {
                continue;
            };
            match decision {
                Some(true) => {
                    allowed.insert(namespace);
                }
                Some(false) => {}
                None => unknown.push(namespace),
            }
        }
        let reviewed: Vec<Option<String>> = futures::stream::iter(unknown)
            .map(|namespace| {
                let user = &user;
                let access = Access {
                    namespace: Some(namespace.clone()),
                    ..access.clone()
                };
                async move {
                    let decision = self.authorize(user, &access).await?.is_ok();
                    self.namespace_decisions.insert((hash, access), decision);
                    Ok::<_, ReviewError>(decision.then_some(namespace))
                }
            })
            .buffer_unordered(concurrency.max(1))
            .try_collect()
            .await?;
        allowed.extend(reviewed.into_iter().flatten());
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::*;

    /// A fake apiserver answering reviews in order; each answer gets the request's body, so
    /// a test can check what was asked.
    fn reviewer_with(
        answers: Vec<(&'static str, Value)>,
    ) -> (Reviewer, tokio::task::JoinHandle<Vec<Value>>) {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut asked = Vec::new();
            for (path, answer) in answers {
                let (request, send) = handle.next_request().await.expect("a review");
                assert_eq!(request.uri().path(), path);
                let body = request.into_body().collect_bytes().await.unwrap();
                asked.push(serde_json::from_slice(&body).unwrap());
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                        .unwrap(),
                );
            }
            asked
        });
        let client = Client::new(service, "default");
        (Reviewer::new(client, ReviewTtls::default()), server)
    }

    const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
    const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

    fn token_answer(user: Option<&str>) -> Value {
        let status = match user {
            Some(name) => {
                json!({"authenticated": true, "user": {"username": name, "uid": "u1", "groups": ["devs"]}})
            }
            None => json!({"authenticated": false, "error": "token expired"}),
        };
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}, "status": status})
    }

    fn access_answer(allowed: bool) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {},
               "status": {"allowed": allowed, "reason": if allowed { "" } else { "no RBAC policy matched" }}})
    }

    fn list_pods(ns: Option<&str>) -> Access {
        Access {
            verb: "list",
            group: "",
            resource: "pods",
            subresource: "",
            namespace: ns.map(str::to_string),
            name: None,
        }
    }

    #[tokio::test]
    async fn a_token_is_reviewed_once_and_each_access_once_while_cached() {
        let (reviewer, server) = reviewer_with(vec![
            (TOKEN_REVIEWS, token_answer(Some("alice"))),
            (ACCESS_REVIEWS, access_answer(true)),
            (ACCESS_REVIEWS, access_answer(false)),
        ]);
        let shop = list_pods(Some("shop"));
        assert_eq!(reviewer.review("t0k3n", &shop).await, Ok(()));
        assert_eq!(reviewer.review("t0k3n", &shop).await, Ok(()), "cached");
        let everywhere = list_pods(None);
        let denied = reviewer.review("t0k3n", &everywhere).await.unwrap_err();
        assert_eq!(
            denied.to_string(),
            "alice may not list pods in all namespaces: no RBAC policy matched"
        );
        assert_eq!(reviewer.review("t0k3n", &everywhere).await, Err(denied));
        let asked = server.await.unwrap();
        assert_eq!(asked[0]["spec"]["token"], "t0k3n");
        let spec = &asked[1]["spec"];
        assert_eq!(spec["user"], "alice");
        assert_eq!(spec["uid"], "u1");
        assert_eq!(spec["groups"], json!(["devs"]));
        assert_eq!(
            spec["resourceAttributes"],
            json!({"verb": "list", "group": "", "resource": "pods", "namespace": "shop"})
        );
    }

    #[tokio::test]
    async fn a_rejected_token_is_unauthenticated_and_never_reaches_authorization() {
        let (reviewer, server) = reviewer_with(vec![(TOKEN_REVIEWS, token_answer(None))]);
        for _ in 0..2 {
            let err = reviewer.review("old", &list_pods(None)).await.unwrap_err();
            assert_eq!(
                err,
                ReviewError::Unauthenticated(
                    "the bearer token was not accepted: token expired".into()
                )
            );
        }
        assert_eq!(server.await.unwrap().len(), 1, "the rejection is cached");
    }

    #[tokio::test]
    async fn refusals_are_kept_for_their_own_time() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let (_, send) = handle.next_request().await.expect("a review");
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&token_answer(None)).unwrap()))
                        .unwrap(),
                );
            }
        });
        let ttls = ReviewTtls {
            unauthenticated: Duration::ZERO,
            ..ReviewTtls::default()
        };
        let reviewer = Reviewer::new(Client::new(service, "default"), ttls);
        for _ in 0..2 {
            assert!(reviewer.review("old", &list_pods(None)).await.is_err());
        }
        tokio::time::timeout(Duration::from_secs(1), server)
            .await
            .expect("an expired refusal is asked about again")
            .unwrap();
    }

    #[tokio::test]
    async fn unknown_tokens_beyond_the_rate_are_throttled_without_asking() {
        let (reviewer, server) = reviewer_with(vec![
            (TOKEN_REVIEWS, token_answer(None)),
            (TOKEN_REVIEWS, token_answer(Some("alice"))),
        ]);
        let one = NonZeroU32::new(1).unwrap();
        let reviewer = reviewer.with_token_review_limits(TokenReviewLimits {
            per_second: one,
            burst: NonZeroU32::new(2).unwrap(),
            in_flight: 4,
        });
        assert!(matches!(
            reviewer.review("bogus-1", &list_pods(None)).await,
            Err(ReviewError::Unauthenticated(_))
        ));
        let alice = token_hash("alice-token");
        let user = reviewer.authenticate(alice, "alice-token").await;
        assert_eq!(user.unwrap().username, "alice");
        for n in 2..10 {
            let err = reviewer
                .review(&format!("bogus-{n}"), &list_pods(None))
                .await
                .unwrap_err();
            let ReviewError::Throttled { retry_after } = err else {
                panic!("expected Throttled, got {err:?}");
            };
            assert!(retry_after >= Duration::from_secs(1), "{retry_after:?}");
        }
        let counts = reviewer.counts();
        assert_eq!(counts.token_reviews.load(Ordering::Relaxed), 2);
        assert_eq!(counts.token_reviews_throttled.load(Ordering::Relaxed), 8);
        // A known token is answered from the cache, throttled or not.
        assert!(reviewer.authenticate(alice, "alice-token").await.is_ok());
        assert_eq!(
            server.await.unwrap().len(),
            2,
            "the throttled never reached the apiserver"
        );
    }

    #[tokio::test]
    async fn reviews_in_flight_are_bounded() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let reviewer = Arc::new(
            Reviewer::new(Client::new(service, "default"), ReviewTtls::default())
                .with_token_review_limits(TokenReviewLimits {
                    in_flight: 1,
                    ..TokenReviewLimits::default()
                }),
        );
        let first = tokio::spawn({
            let reviewer = reviewer.clone();
            async move { reviewer.review("slow", &list_pods(None)).await }
        });
        // The first review is now waiting for the apiserver and holds the only slot.
        let (_, send) = handle.next_request().await.expect("a review");
        let err = reviewer
            .review("second", &list_pods(None))
            .await
            .unwrap_err();
        assert!(matches!(err, ReviewError::Throttled { .. }), "{err:?}");
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&token_answer(None)).unwrap()))
                .unwrap(),
        );
        assert!(matches!(
            first.await.unwrap(),
            Err(ReviewError::Unauthenticated(_))
        ));
    }

    /// A fake apiserver: the token is alice's, who may list pods in `allowed` only; answers
    /// until the client goes away, then tells each SubjectAccessReview's namespace (or "*").
    fn reviewer_allowing(
        allowed: &'static [&'static str],
    ) -> (Reviewer, tokio::task::JoinHandle<Vec<String>>) {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut asked = Vec::new();
            while let Some((request, send)) = handle.next_request().await {
                let path = request.uri().path().to_string();
                let body = request.into_body().collect_bytes().await.unwrap();
                let body: Value = serde_json::from_slice(&body).unwrap();
                let answer = if path == TOKEN_REVIEWS {
                    token_answer(Some("alice"))
                } else {
                    let ns = body["spec"]["resourceAttributes"]["namespace"]
                        .as_str()
                        .unwrap_or("*")
                        .to_string();
                    let answer = access_answer(allowed.contains(&ns.as_str()));
                    asked.push(ns);
                    answer
                };
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                        .unwrap(),
                );
            }
            asked
        });
        let reviewer = Reviewer::new(Client::new(service, "default"), ReviewTtls::default());
        (reviewer, server)
    }

    #[tokio::test]
    async fn namespaces_are_reviewed_once_each_denials_included() {
        let (reviewer, server) = reviewer_allowing(&["a", "c"]);
        let candidates = || ["a", "b", "c", "d"].map(String::from).to_vec();
        let everywhere = list_pods(None);
        assert!(reviewer.review("t", &everywhere).await.is_err());
        for _ in 0..3 {
            let allowed = reviewer
                .namespaces_allowed("t", &everywhere, candidates(), 2)
                .await
                .unwrap();
            assert_eq!(allowed, BTreeSet::from(["a".into(), "c".into()]));
        }
        // A namespace seen for the first time costs one more review, and only that.
        let allowed = reviewer
            .namespaces_allowed("t", &everywhere, vec!["e".into(), "a".into()], 2)
            .await
            .unwrap();
        assert_eq!(allowed, BTreeSet::from(["a".into()]));
        drop(reviewer);
        let mut asked = server.await.unwrap();
        asked.sort();
        assert_eq!(asked, ["*", "a", "b", "c", "d", "e"]);
    }

    #[tokio::test]
    async fn namespace_reviews_are_per_token() {
        let (reviewer, server) = reviewer_allowing(&["a"]);
        for token in ["t1", "t2"] {
            let allowed = reviewer
                .namespaces_allowed(token, &list_pods(None), vec!["a".into()], 4)
                .await
                .unwrap();
            assert_eq!(allowed.len(), 1);
        }
        drop(reviewer);
        assert_eq!(server.await.unwrap(), ["a", "a"]);
    }

    #[test]
    fn tokens_are_kept_only_as_hashes() {
        assert_ne!(token_hash("a"), token_hash("b"));
        assert_eq!(token_hash("abc")[..4], [0xba, 0x78, 0x16, 0xbf], "SHA-256");
    }
}
