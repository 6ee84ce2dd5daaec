//! Delegated authentication and authorization, the kube-rbac-proxy way: a caller's bearer token
//! is checked with a TokenReview, and what it asks for against the cluster's RBAC, so a
//! service in front of the apiserver grants exactly what the caller's own RBAC grants.
//!
//! Access is evaluated in memory from the watched RBAC objects ([`Policy`]) where they are
//! followed; a SubjectAccessReview is sent only where RBAC says no (another authorizer, a
//! webhook say, may allow), its answer cached, at most a few per user
//! ([`ACCESS_REVIEWS_PER_USER`]). Without the policy (our account may not watch RBAC) every
//! access is a cached SubjectAccessReview, as the apiserver's webhook authorizer does.
//!
//! Tokens: answers are cached, keyed by a SHA-256 of the token, never the token itself; a
//! token in use is reviewed again from half its TTL on, in the background, so its user never
//! waits for a review, and a revoked one is refused once its answer is a TTL old. Reviews of
//! unknown tokens are bounded per client address, so a flood from one address spends only
//! its own budget.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::sync::Semaphore;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{Api, Client};

use crate::policy::{AUTHORIZER_LAG, Policy};

/// How long an answer is reused. A refusal is kept shorter than a grant so that a caller
/// just given a token or a role is not turned away for long.
#[derive(Clone, Copy, Debug)]
pub struct ReviewTtls {
    /// An accepted token's user; default 60 s (`--token-review-ttl`). A token in use is
    /// reviewed again from half of it on; a revoked token is refused after it at the latest,
    /// open watches included.
    pub authenticated: Duration,
    /// A refused token; default 30 s, never longer than `authenticated`.
    pub unauthenticated: Duration,
    /// An access a SubjectAccessReview allowed; default 5 min, also the life of each
    /// per-namespace answer of [`Reviewer::namespaces_allowed`]. Accesses RBAC allows are
    /// evaluated afresh on each request.
    pub allowed: Duration,
    /// An access a SubjectAccessReview denied; default 30 s.
    pub denied: Duration,
}

impl Default for ReviewTtls {
    fn default() -> Self {
        ReviewTtls::with_token_ttl(Duration::from_secs(60))
    }
}

impl ReviewTtls {
    /// The defaults, with accepted tokens kept `ttl`.
    pub fn with_token_ttl(ttl: Duration) -> Self {
        ReviewTtls {
            authenticated: ttl,
            unauthenticated: Duration::from_secs(30).min(ttl),
            allowed: Duration::from_secs(300),
            denied: Duration::from_secs(30),
        }
    }
}

/// How many TokenReviews tokens not in the cache may cost. Every distinct bogus token costs
/// one review, so without a bound a flood of them is a flood on the apiserver; beyond the
/// bound a caller is told to come back later ([`ReviewError::Throttled`]). The rate is per
/// client address (an IPv6 address by its /64), so a flood from one address spends only its
/// own budget; known tokens are answered from the cache and never wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenReviewLimits {
    /// Sustained reviews per second, per client address.
    pub per_second: NonZeroU32,
    /// Reviews allowed at once after a quiet spell (a dashboard's first page, many users),
    /// per client address.
    pub burst: NonZeroU32,
    /// Reviews waiting for the apiserver at one time, all addresses together; a review
    /// within its address's rate waits for a slot (up to [`IN_FLIGHT_WAIT`]).
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

/// How long a review within its address's rate waits for one of the in-flight slots before it
/// is throttled: longer than a healthy apiserver takes for a queue of them.
pub const IN_FLIGHT_WAIT: Duration = Duration::from_secs(5);

/// SubjectAccessReviews one user may cost where RBAC says no, at once; then one more per
/// [`ACCESS_REVIEW_REFILL`]. A token with no rights asking about a hundred namespaces costs
/// this many, not a hundred; beyond it RBAC's no is the answer.
pub const ACCESS_REVIEWS_PER_USER: u32 = 5;

/// How often a user's SubjectAccessReview budget gains one.
pub const ACCESS_REVIEW_REFILL: Duration = Duration::from_secs(6);

/// What the reviewer has asked the apiserver, for metrics.
#[derive(Debug, Default)]
pub struct ReviewCounts {
    /// TokenReviews sent, refreshes included.
    pub token_reviews: AtomicU64,
    /// TokenReviews sent ahead of a cached answer's expiry, for tokens in use.
    pub token_reviews_refreshed: AtomicU64,
    /// Unknown tokens refused because their address's bound on TokenReviews was reached.
    pub token_reviews_throttled: AtomicU64,
    /// SubjectAccessReviews sent.
    pub access_reviews: AtomicU64,
    /// Accesses RBAC refused and no SubjectAccessReview was sent for, the user's budget being
    /// spent.
    pub access_reviews_skipped: AtomicU64,
    /// Accesses RBAC allowed in memory, without asking the apiserver.
    pub access_allowed_locally: AtomicU64,
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

impl UserInfo {
    fn as_rbac(&self) -> rbac::User<'_> {
        rbac::User {
            name: &self.username,
            groups: &self.groups,
        }
    }
}

/// What a request does, in RBAC's terms.
///
/// The group and resource are named at run time for a custom resource (`widgets` in
/// `example.com`, from its CRD), and are borrowed for a built-in kind, whose names live as
/// long as the program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// An RBAC verb: `get`, `list`, `watch`, `create`, ...
    pub verb: &'static str,
    /// "" for the core group.
    pub group: Cow<'static, str>,
    /// The plural resource name, such as `pods`.
    pub resource: Cow<'static, str>,
    /// Such as `log`; "" for the resource itself.
    pub subresource: &'static str,
    /// None: in every namespace.
    pub namespace: Option<String>,
    /// None: any object (lists, creates).
    pub name: Option<String>,
}

impl Access {
    fn as_rbac(&self) -> rbac::Attributes<'_> {
        rbac::Attributes {
            verb: self.verb,
            group: &self.group,
            resource: &self.resource,
            subresource: self.subresource,
            namespace: self.namespace.as_deref().unwrap_or(""),
            name: self.name.as_deref().unwrap_or(""),
        }
    }
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
    /// Too many unknown tokens from the caller's address are being reviewed; the caller may
    /// try again after the wait.
    #[error(
        "too many new bearer tokens from this address are being checked with the Kubernetes API: try again in {}s",
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

impl<K> moka::Expiry<K, Arc<Reviewed>> for AnswerExpiry {
    fn expire_after_create(&self, _: &K, value: &Arc<Reviewed>, _: Instant) -> Option<Duration> {
        Some(if value.user.is_ok() {
            self.ok
        } else {
            self.err
        })
    }
}

fn answer_cache<K, V>(ok: Duration, err: Duration) -> moka::sync::Cache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    AnswerExpiry: moka::Expiry<K, V>,
{
    moka::sync::Cache::builder()
        .max_capacity(CACHE_CAPACITY)
        .expire_after(AnswerExpiry { ok, err })
        .build()
}

/// An access a SubjectAccessReview allowed, and under what RBAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Allowed {
    /// The RBAC generation it was given under: it may be RBAC's own allow, heard by the
    /// apiserver before this index had the change that revokes it.
    generation: Option<u64>,
    /// Given within [`crate::AUTHORIZER_LAG`] of an RBAC change: the apiserver may have
    /// answered from the RBAC before it, so it is asked again once this has passed.
    unsettled_until: Option<tokio::time::Instant>,
}

impl Allowed {
    fn holds(&self, generation: Option<u64>) -> bool {
        self.generation == generation
            && self
                .unsettled_until
                .is_none_or(|until| tokio::time::Instant::now() < until)
    }
}

type TokenHash = [u8; 32];

/// Entries each cache holds at most.
const CACHE_CAPACITY: u64 = 10_000;

/// A TokenReview's answer as cached: when it was given, and whether a review to replace it
/// is under way.
#[derive(Debug)]
struct Reviewed {
    user: Result<UserInfo, String>,
    at: Instant,
    refreshing: AtomicBool,
}

impl Reviewed {
    fn new(user: Result<UserInfo, String>) -> Arc<Reviewed> {
        Arc::new(Reviewed {
            user,
            at: Instant::now(),
            refreshing: AtomicBool::new(false),
        })
    }
}

type UserCache = moka::sync::Cache<TokenHash, Arc<Reviewed>>;

/// Checks between two sweeps of the per-key rate limiters' idle keys.
const CHECKS_BETWEEN_SWEEPS: u64 = 4096;

/// A rate per key (client address, user) whose idle keys are swept now and then, so a flood
/// of keys holds no memory for long.
struct KeyedRate<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    checks: AtomicU64,
}

impl<K: Hash + Eq + Clone> KeyedRate<K> {
    fn new(quota: Quota) -> Self {
        KeyedRate {
            limiter: RateLimiter::keyed(quota),
            checks: AtomicU64::new(0),
        }
    }

    /// Ok, or the wait until `key` may go again, rounded up to whole seconds (at least one,
    /// ready for Retry-After).
    fn check(&self, key: &K) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % CHECKS_BETWEEN_SWEEPS
            == CHECKS_BETWEEN_SWEEPS - 1
        {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Duration::from_secs(wait.as_secs_f64().ceil().max(1.0) as u64)
        })
    }
}

/// The key a client address is bounded by: an IPv4 address, or an IPv6 address's /64 (one
/// host's usual share), an IPv4-mapped one as IPv4.
fn client_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(prefix.into())
            }
        },
    }
}

/// Reviews callers' tokens and requests against the apiserver, with caching.
pub struct Reviewer {
    client: Client,
    ttls: ReviewTtls,
    users: UserCache,
    /// SubjectAccessReviews' answers; an allow with the policy's generation it was given
    /// at (None: without the policy).
    decisions: AnswerCache<(TokenHash, Access), Allowed, ReviewError>,
    token_review_rate: KeyedRate<IpAddr>,
    token_reviews_in_flight: Arc<Semaphore>,
    access_review_rate: KeyedRate<String>,
    counts: Arc<ReviewCounts>,
    /// Per-namespace answers for lists filtered by rights without the policy, see
    /// [`Reviewer::namespaces_allowed`].
    namespace_decisions: moka::sync::Cache<(TokenHash, Access), bool>,
    policy: Option<Arc<Policy>>,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("ttls", &self.ttls)
            .field("policy", &self.policy)
            .finish()
    }
}

fn token_review_rate(limits: TokenReviewLimits) -> KeyedRate<IpAddr> {
    KeyedRate::new(Quota::per_second(limits.per_second).allow_burst(limits.burst))
}

fn token_hash(token: &str) -> TokenHash {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut hash = [0; 32];
    hash.copy_from_slice(digest.as_ref());
    hash
}

/// Creates a review (they are never stored); the apiserver's answer fills its status.
async fn ask<K>(client: &Client, review: &K) -> Result<K, ReviewError>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .create(&Default::default(), review)
        .await
        .map_err(|e| ReviewError::Unavailable(e.to_string()))
}

/// The apiserver's word on a token: its user, or why it is refused.
async fn token_review(
    client: &Client,
    counts: &ReviewCounts,
    token: &str,
) -> Result<Result<UserInfo, String>, ReviewError> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    counts.token_reviews.fetch_add(1, Ordering::Relaxed);
    let status = ask(client, &review).await?.status.unwrap_or_default();
    Ok(match (status.authenticated, status.user) {
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
    })
}

impl Reviewer {
    /// The client's own account must be allowed to create TokenReviews and
    /// SubjectAccessReviews (the built-in ClusterRole `system:auth-delegator`).
    pub fn new(client: Client, ttls: ReviewTtls) -> Self {
        let per_user = Quota::with_period(ACCESS_REVIEW_REFILL)
            .expect("a non-zero period")
            .allow_burst(NonZeroU32::new(ACCESS_REVIEWS_PER_USER).expect("non-zero"));
        Reviewer {
            client,
            ttls,
            users: answer_cache(ttls.authenticated, ttls.unauthenticated),
            decisions: answer_cache(ttls.allowed, ttls.denied),
            token_review_rate: token_review_rate(TokenReviewLimits::default()),
            token_reviews_in_flight: Arc::new(Semaphore::new(
                TokenReviewLimits::default().in_flight,
            )),
            access_review_rate: KeyedRate::new(per_user),
            counts: Arc::default(),
            namespace_decisions: namespace_decision_cache(ttls.allowed),
            policy: None,
        }
    }

    /// Bounds the TokenReviews sent for tokens not in the cache.
    pub fn with_token_review_limits(mut self, limits: TokenReviewLimits) -> Self {
        self.token_review_rate = token_review_rate(limits);
        self.token_reviews_in_flight = Arc::new(Semaphore::new(limits.in_flight));
        self
    }

    /// Evaluates access with `policy` while it is usable ([`Policy::is_usable`]).
    pub fn with_policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The RBAC objects followed, if any.
    pub fn policy(&self) -> Option<&Arc<Policy>> {
        self.policy.as_ref()
    }

    /// What has been asked of the apiserver so far.
    pub fn counts(&self) -> &ReviewCounts {
        &self.counts
    }

    /// How often an open watch should ask again whether its caller may still watch: often
    /// enough that a revoked token ends it within the token TTL.
    pub fn recheck_every(&self) -> Duration {
        (self.ttls.authenticated / 4).max(Duration::from_secs(1))
    }

    /// Ticks whenever a caller's rights may have changed, for streams that check again what
    /// their caller was allowed: when RBAC changes (if the policy is followed), again
    /// [`AUTHORIZER_LAG`] later (a review asked at the change may have been answered from
    /// the RBAC before it) and at least every [`Reviewer::recheck_every`].
    pub fn rights_may_change(&self) -> BoxStream<'static, ()> {
        let every = self.recheck_every();
        let changes = self.policy.as_ref().map(|p| p.changes());
        let settle: Option<tokio::time::Instant> = None;
        futures::stream::unfold(
            (changes, settle),
            move |(mut changes, mut settle)| async move {
                let policy_changed = async {
                    let changed = match changes.as_mut() {
                        Some(changes) => changes.changed().await.is_ok(),
                        None => false,
                    };
                    if !changed {
                        std::future::pending::<()>().await;
                    }
                };
                let settled = async {
                    match settle {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = policy_changed => {
                        settle = Some(tokio::time::Instant::now() + AUTHORIZER_LAG);
                    }
                    () = settled => settle = None,
                }
                Some(((), (changes, settle)))
            },
        )
        .boxed()
    }

    /// The policy when it can answer.
    fn usable_policy(&self) -> Option<&Policy> {
        self.policy.as_deref().filter(|p| p.is_usable())
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
            let answer = ask(&self.client, &review).await?;
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

    /// The token's user, from the cache or a TokenReview bounded by the client's address.
    pub async fn user(&self, token: &str, from: IpAddr) -> Result<UserInfo, ReviewError> {
        self.authenticate(token_hash(token), token, from).await
    }

    /// Whether the token's owner may do `access`: Ok, or why not.
    pub async fn review(
        &self,
        token: &str,
        from: IpAddr,
        access: &Access,
    ) -> Result<(), ReviewError> {
        let hash = token_hash(token);
        let user = self.authenticate(hash, token, from).await?;
        let policy = self.usable_policy();
        if let Some(policy) = policy
            && policy.with_index(|index| index.allows(&user.as_rbac(), &access.as_rbac()))
        {
            self.counts
                .access_allowed_locally
                .fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let key = (hash, access.clone());
        let generation = policy.map(Policy::generation);
        match self.decisions.get(&key) {
            Some(Err(denied)) => return Err(denied),
            Some(Ok(allowed)) if allowed.holds(generation) => return Ok(()),
            _ => {}
        }
        // RBAC says no; another authorizer may say yes, so it is asked, within the user's
        // budget: beyond it, RBAC's no is the answer.
        if policy.is_some()
            && let Err(retry_after) = self.access_review_rate.check(&user.username)
        {
            self.counts
                .access_reviews_skipped
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(user = %user.username, %access, retry_after = retry_after.as_secs(),
                "no RBAC rule allows it; other authorizers are not asked again yet");
            // RBAC's own refusal, worded as the apiserver words it: RBAC gives no reason.
            return Err(ReviewError::Forbidden {
                user: user.username.clone(),
                access: access.to_string(),
                reason: String::new(),
            });
        }
        let decision = self.authorize(&user, access).await?;
        let allowed = Allowed {
            generation,
            unsettled_until: policy.and_then(Policy::unsettled_until),
        };
        self.decisions
            .insert(key, decision.clone().map(|()| allowed));
        decision
    }

    /// Where the token's owner may do `access` (its namespace ignored) by RBAC, evaluated in
    /// memory; None when the policy is not followed (then [`Reviewer::namespaces_allowed`]
    /// asks the apiserver). No review is sent: a caller allowed by another authorizer
    /// cluster-wide is found by [`Reviewer::review`] of the access across namespaces.
    pub async fn namespaces_where(
        &self,
        token: &str,
        from: IpAddr,
        access: &Access,
    ) -> Result<Option<rbac::Namespaces>, ReviewError> {
        let user = self.authenticate(token_hash(token), token, from).await?;
        Ok(self.usable_policy().map(|policy| {
            policy.with_index(|index| index.namespaces_where(&user.as_rbac(), &access.as_rbac()))
        }))
    }

    async fn authenticate(
        &self,
        hash: TokenHash,
        token: &str,
        from: IpAddr,
    ) -> Result<UserInfo, ReviewError> {
        if let Some(reviewed) = self.users.get(&hash) {
            if reviewed.user.is_ok()
                && reviewed.at.elapsed() >= self.ttls.authenticated / 2
                && !reviewed.refreshing.swap(true, Ordering::AcqRel)
            {
                self.refresh(hash, token, reviewed.clone());
            }
            return reviewed.user.clone().map_err(ReviewError::Unauthenticated);
        }
        let _permit = self.token_review_permit(from).await?;
        let user = token_review(&self.client, &self.counts, token).await?;
        self.users.insert(hash, Reviewed::new(user.clone()));
        user.map_err(ReviewError::Unauthenticated)
    }

    /// Reviews a token in use again, in the background, before its answer expires; a refusal
    /// replaces the answer at once. Not bounded by the client's address (the token is known
    /// good, and each costs one review per half TTL), only by the reviews in flight.
    fn refresh(&self, hash: TokenHash, token: &str, reviewed: Arc<Reviewed>) {
        let (client, users, counts) =
            (self.client.clone(), self.users.clone(), self.counts.clone());
        let in_flight = self.token_reviews_in_flight.clone();
        let token = token.to_string();
        tokio::spawn(async move {
            let Ok(_permit) = in_flight.acquire_owned().await else {
                return;
            };
            counts
                .token_reviews_refreshed
                .fetch_add(1, Ordering::Relaxed);
            match token_review(&client, &counts, &token).await {
                Ok(user) => users.insert(hash, Reviewed::new(user)),
                // The answer held stands until it expires; the next use tries again.
                Err(e) => {
                    tracing::debug!(error = %e, "refreshing a token review failed");
                    reviewed.refreshing.store(false, Ordering::Release);
                }
            }
        });
    }

    /// A permit to send one TokenReview: within the address's rate, then a slot among those in
    /// flight (waited for, up to [`IN_FLIGHT_WAIT`]).
    async fn token_review_permit(
        &self,
        from: IpAddr,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, ReviewError> {
        let throttled = |retry_after: Duration| {
            self.counts
                .token_reviews_throttled
                .fetch_add(1, Ordering::Relaxed);
            ReviewError::Throttled { retry_after }
        };
        self.token_review_rate
            .check(&client_key(from))
            .map_err(throttled)?;
        let slot = self.token_reviews_in_flight.clone().acquire_owned();
        match tokio::time::timeout(IN_FLIGHT_WAIT, slot).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(throttled(Duration::from_secs(1))),
        }
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
        let answer = ask(&self.client, &review).await?;
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
    /// only what the caller may see, when the policy is not followed
    /// ([`Reviewer::namespaces_where`] answers in memory when it is). One review per candidate
    /// not answered within the allow TTL, at most `concurrency` at a time; a caller allowed cluster-wide should be told so
    /// with [`Reviewer::review`] first, which costs one. Unauthenticated and Unavailable are
    /// errors; denials are not.
    pub async fn namespaces_allowed(
        &self,
        token: &str,
        from: IpAddr,
        access: &Access,
        candidates: Vec<String>,
        concurrency: usize,
    ) -> Result<BTreeSet<String>, ReviewError> {
        use futures::{StreamExt, TryStreamExt};
        let hash = token_hash(token);
        let user = self.authenticate(hash, token, from).await?;
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

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

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
            group: "".into(),
            resource: "pods".into(),
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
        assert_eq!(reviewer.review("t0k3n", HERE, &shop).await, Ok(()));
        assert_eq!(
            reviewer.review("t0k3n", HERE, &shop).await,
            Ok(()),
            "cached"
        );
        let everywhere = list_pods(None);
        let denied = reviewer
            .review("t0k3n", HERE, &everywhere)
            .await
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "alice may not list pods in all namespaces: no RBAC policy matched"
        );
        assert_eq!(
            reviewer.review("t0k3n", HERE, &everywhere).await,
            Err(denied)
        );
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
            let err = reviewer
                .review("old", HERE, &list_pods(None))
                .await
                .unwrap_err();
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
            assert!(
                reviewer
                    .review("old", HERE, &list_pods(None))
                    .await
                    .is_err()
            );
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
            reviewer.review("bogus-1", HERE, &list_pods(None)).await,
            Err(ReviewError::Unauthenticated(_))
        ));
        let alice = token_hash("alice-token");
        let user = reviewer.authenticate(alice, "alice-token", HERE).await;
        assert_eq!(user.unwrap().username, "alice");
        for n in 2..10 {
            let err = reviewer
                .review(&format!("bogus-{n}"), HERE, &list_pods(None))
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
        assert!(
            reviewer
                .authenticate(alice, "alice-token", HERE)
                .await
                .is_ok()
        );
        assert_eq!(
            server.await.unwrap().len(),
            2,
            "the throttled never reached the apiserver"
        );
    }

    fn respond(send: mock::SendResponse<Response<Body>>, answer: &Value) {
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(answer).unwrap()))
                .unwrap(),
        );
    }

    #[tokio::test]
    async fn reviews_in_flight_are_bounded_and_the_next_waits_its_turn() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let reviewer = Arc::new(
            Reviewer::new(Client::new(service, "default"), ReviewTtls::default())
                .with_token_review_limits(TokenReviewLimits {
                    in_flight: 1,
                    ..TokenReviewLimits::default()
                }),
        );
        let review = |token: &'static str| {
            let reviewer = reviewer.clone();
            tokio::spawn(async move { reviewer.review(token, HERE, &list_pods(None)).await })
        };
        let first = review("slow");
        // The first review is now waiting for the apiserver and holds the only slot.
        let (_, send) = handle.next_request().await.expect("a review");
        let second = review("second");
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "it waits for the slot");
        respond(send, &token_answer(None));
        assert!(matches!(
            first.await.unwrap(),
            Err(ReviewError::Unauthenticated(_))
        ));
        let (_, send) = handle.next_request().await.expect("the second review, now");
        respond(send, &token_answer(None));
        assert!(matches!(
            second.await.unwrap(),
            Err(ReviewError::Unauthenticated(_))
        ));
    }

    #[tokio::test]
    async fn a_flood_from_one_address_spends_only_its_own_budget() {
        let (reviewer, server) = reviewer_allowing(&[]);
        let reviewer = reviewer.with_token_review_limits(TokenReviewLimits {
            per_second: NonZeroU32::new(1).unwrap(),
            burst: NonZeroU32::new(3).unwrap(),
            in_flight: 4,
        });
        let flooder: IpAddr = "127.0.0.2".parse().unwrap();
        let mut throttled = 0;
        for n in 0..20 {
            if let Err(ReviewError::Throttled { .. }) =
                reviewer.user(&format!("bogus-{n}"), flooder).await
            {
                throttled += 1;
            }
        }
        assert_eq!(
            throttled, 17,
            "3 reviewed, then the address's budget is spent"
        );
        for n in 0..3 {
            let user = reviewer.user(&format!("real-{n}"), HERE).await;
            assert_eq!(user.unwrap().username, "alice", "another address is served");
        }
        // An IPv6 client is bounded by its /64: another address in it shares the budget.
        let (a, b): (IpAddr, IpAddr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(
            client_key(a),
            client_key("2001:db8:0:1::1".parse().unwrap())
        );
        assert_eq!(
            client_key("::ffff:10.0.0.1".parse().unwrap()),
            client_key("10.0.0.1".parse().unwrap())
        );
        drop(reviewer);
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_token_in_use_is_reviewed_again_ahead_and_a_revocation_lands_at_once() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let ttls = ReviewTtls::with_token_ttl(Duration::from_millis(400));
        let reviewer = Reviewer::new(Client::new(service, "default"), ttls);
        let first = tokio::spawn(async move {
            let (_, send) = handle.next_request().await.expect("the first review");
            respond(send, &token_answer(Some("alice")));
            handle
        });
        assert_eq!(reviewer.user("t", HERE).await.unwrap().username, "alice");
        let mut handle = first.await.unwrap();
        assert!(
            reviewer.user("t", HERE).await.is_ok(),
            "fresh: from the cache"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        // Past half the TTL: answered from the cache at once, reviewed again meanwhile.
        assert_eq!(reviewer.user("t", HERE).await.unwrap().username, "alice");
        let (_, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
            .await
            .expect("a refresh, without waiting for the answer to expire")
            .expect("a refresh");
        respond(send, &token_answer(None));
        let refused = eventually(|| async { reviewer.user("t", HERE).await.is_err() }).await;
        assert!(refused, "the revocation replaced the answer");
        let counts = reviewer.counts();
        assert_eq!(counts.token_reviews.load(Ordering::Relaxed), 2);
        assert_eq!(counts.token_reviews_refreshed.load(Ordering::Relaxed), 1);
    }

    /// Polls `check` until it holds, for up to a second.
    async fn eventually<F, Fut>(mut check: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..100 {
            if check().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// alice may list pods in "shop" by a RoleBinding, nowhere else.
    fn shop_policy() -> rbac::Index {
        use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, RoleBinding, RoleRef, Subject};
        let mut role = ClusterRole::default();
        role.metadata.name = Some("reader".into());
        role.rules = Some(vec![PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["list".into()],
            ..Default::default()
        }]);
        let mut binding = RoleBinding::default();
        binding.metadata.namespace = Some("shop".into());
        binding.metadata.name = Some("alice-reads".into());
        binding.role_ref = RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "reader".into(),
        };
        binding.subjects = Some(vec![Subject {
            kind: "User".into(),
            name: "alice".into(),
            ..Default::default()
        }]);
        let mut index = rbac::Index::default();
        index.apply(&role);
        index.apply(&binding);
        index
    }

    #[tokio::test]
    async fn rbac_allows_in_memory_and_a_few_reviews_ask_where_it_says_no() {
        let (reviewer, server) = reviewer_allowing(&["webhook"]);
        let policy = Policy::fixed(shop_policy());
        let reviewer = reviewer.with_policy(policy.clone());
        assert_eq!(
            reviewer.review("t", HERE, &list_pods(Some("shop"))).await,
            Ok(())
        );
        // Where RBAC says no, another authorizer may say yes.
        assert_eq!(
            reviewer
                .review("t", HERE, &list_pods(Some("webhook")))
                .await,
            Ok(())
        );
        // A hundred namespaces asked: a few reviews, then RBAC's no without one.
        for n in 0..100 {
            let err = reviewer
                .review("t", HERE, &list_pods(Some(&format!("ns-{n}"))))
                .await
                .unwrap_err();
            assert!(matches!(err, ReviewError::Forbidden { .. }), "{err:?}");
        }
        assert_eq!(
            reviewer.namespaces_where("t", HERE, &list_pods(None)).await,
            Ok(Some(rbac::Namespaces::Only(BTreeSet::from(
                ["shop".into()]
            ))))
        );
        // The RoleBinding deleted: refused at once.
        policy.replace(rbac::Index::default());
        assert!(
            reviewer
                .review("t", HERE, &list_pods(Some("shop")))
                .await
                .is_err()
        );
        let counts = reviewer.counts();
        assert_eq!(counts.access_allowed_locally.load(Ordering::Relaxed), 1);
        let sent = counts.access_reviews.load(Ordering::Relaxed);
        assert_eq!(sent, u64::from(ACCESS_REVIEWS_PER_USER));
        drop(reviewer);
        let asked = server.await.unwrap();
        assert_eq!(asked.len() as u64, sent);
        assert_eq!(asked[0], "webhook");
    }

    #[tokio::test]
    async fn a_review_allow_holds_only_until_rbac_changes() {
        let (reviewer, server) = reviewer_allowing(&["webhook"]);
        let policy = Policy::fixed(rbac::Index::default());
        let reviewer = reviewer.with_policy(policy.clone());
        let (webhook, nope) = (list_pods(Some("webhook")), list_pods(Some("nope")));
        for _ in 0..2 {
            assert_eq!(reviewer.review("t", HERE, &webhook).await, Ok(()));
            assert!(reviewer.review("t", HERE, &nope).await.is_err());
        }
        policy.replace(rbac::Index::default());
        assert_eq!(reviewer.review("t", HERE, &webhook).await, Ok(()));
        assert!(reviewer.review("t", HERE, &nope).await.is_err());
        drop(reviewer);
        assert_eq!(
            server.await.unwrap(),
            ["webhook", "nope", "webhook"],
            "the allow was asked again after the change, the denial was not"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_allow_given_just_after_a_change_is_asked_again_once_the_apiserver_knows_it() {
        let (reviewer, server) = reviewer_allowing(&["webhook"]);
        let policy = Policy::fixed(rbac::Index::default());
        let reviewer = reviewer.with_policy(policy.clone());
        let webhook = list_pods(Some("webhook"));
        policy.replace(rbac::Index::default());
        for _ in 0..2 {
            assert_eq!(reviewer.review("t", HERE, &webhook).await, Ok(()));
        }
        tokio::time::advance(AUTHORIZER_LAG).await;
        for _ in 0..2 {
            assert_eq!(reviewer.review("t", HERE, &webhook).await, Ok(()));
        }
        drop(reviewer);
        assert_eq!(
            server.await.unwrap(),
            ["webhook", "webhook"],
            "kept within the lag, asked again once after it, then kept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rights_may_change_at_each_rbac_change_again_after_the_lag_and_every_so_often() {
        let (reviewer, _server) = reviewer_allowing(&[]);
        let policy = Policy::fixed(rbac::Index::default());
        let reviewer = reviewer.with_policy(policy.clone());
        let every = reviewer.recheck_every();
        let start = tokio::time::Instant::now();
        let mut ticks = reviewer.rights_may_change();
        let mut tick_times = Vec::new();
        policy.replace(rbac::Index::default());
        for _ in 0..3 {
            ticks.next().await;
            tick_times.push(start.elapsed());
        }
        assert_eq!(
            tick_times,
            [Duration::ZERO, AUTHORIZER_LAG, AUTHORIZER_LAG + every]
        );
    }

    #[tokio::test]
    async fn without_the_policy_every_access_is_a_review() {
        let (reviewer, server) = reviewer_allowing(&["shop"]);
        let reviewer = reviewer.with_policy(Arc::new(Policy::default()));
        for n in 0..10 {
            let access = list_pods(Some(&format!("ns-{n}")));
            assert!(reviewer.review("t", HERE, &access).await.is_err());
        }
        assert_eq!(
            reviewer.namespaces_where("t", HERE, &list_pods(None)).await,
            Ok(None)
        );
        drop(reviewer);
        assert_eq!(
            server.await.unwrap().len(),
            10,
            "no budget without the policy"
        );
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
        assert!(reviewer.review("t", HERE, &everywhere).await.is_err());
        for _ in 0..3 {
            let allowed = reviewer
                .namespaces_allowed("t", HERE, &everywhere, candidates(), 2)
                .await
                .unwrap();
            assert_eq!(allowed, BTreeSet::from(["a".into(), "c".into()]));
        }
        // A namespace seen for the first time costs one more review, and only that.
        let allowed = reviewer
            .namespaces_allowed("t", HERE, &everywhere, vec!["e".into(), "a".into()], 2)
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
                .namespaces_allowed(token, HERE, &list_pods(None), vec!["a".into()], 4)
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
