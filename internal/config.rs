//! Settings of `k8sailor httpserver`, merged from layers: flags and `K8SAILOR_*` environment
//! variables (one layer, as clap reads them), then the config file, then defaults.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use confk8s::{ClientOptions, InitialList, ListEncoding, TokenReviewLimits};
use serde::Deserialize;

use crate::connections::ConnectionLimits;
use crate::tls::TlsFiles;
use apis::{
    AllowedHosts, AllowedOrigins, AuthMode, BodyLimits, FairShares, HttpOptions, LogLimits,
};
use k8sdao::SourceKind;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";
pub const DEFAULT_PREFIX: &str = "/k8sailor/v0";
/// Covers the largest create request the per-field limits allow (about 175 KiB: 100
/// containers of 100 ports and a 1 KiB image each) while keeping what open connections can
/// make us buffer at once bounded (maxConnections times this).
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// Enough for thousands of dashboards and watches; the file descriptors it takes stay well
/// under the usual limits (1024 soft on many hosts: see the start-up warning).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The apiserver's is 100, after Go's HTTP/2 client, which opens another connection at the
/// bound. Watches are bounded by the fairness shares per client, so the connection's bound
/// need not be lower: a thousand watches share one connection, each stream's unsent answer
/// bounded (`connections::HTTP2_SEND_BUFFER`).
pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 1000;

/// Declares the settings once: each key with its flag, its `K8SAILOR_*` variable, its help
/// (the field's doc comment) and, after `=`, its default. From that one list it writes the
/// layer type (every key optional, as flags and files give them), its merge, its defaults,
/// and the merged type `resolve` reads, where a key with a default is no longer optional, so
/// no default is written a second time in `resolve`. A key without a default keeps its
/// `Option` there; what its absence means is the business of the type it becomes.
macro_rules! settings {
    (
        $(#[$layer_meta:meta])*
        pub struct $layer:ident;
        $(#[$merged_meta:meta])*
        struct $merged:ident;
        {
            $(
                $(#[$field_meta:meta])*
                $field:ident: $ty:ty $(= $default:expr)?,
            )*
        }
    ) => {
        $(#[$layer_meta])*
        pub struct $layer {
            $(
                $(#[$field_meta])*
                pub $field: Option<$ty>,
            )*
        }

        $(#[$merged_meta])*
        struct $merged {
            $($field: settings!(@merged_type $ty $(, $default)?),)*
        }

        impl $layer {
            /// Keys set here win over `lower`.
            pub fn over(self, lower: $layer) -> $layer {
                $layer {
                    $($field: self.$field.or(lower.$field),)*
                }
            }

            /// The default of every key that has one; None for the others.
            pub fn defaults() -> $layer {
                $layer {
                    $($field: settings!(@default $($default)?),)*
                }
            }

            /// This layer over the defaults.
            fn with_defaults(self) -> $merged {
                $merged {
                    $($field: settings!(@value self.$field $(, $default)?),)*
                }
            }

            /// Every key, as its field is named.
            #[cfg(test)]
            const KEYS: &[&str] = &[$(stringify!($field)),*];

            /// The keys that have a default.
            #[cfg(test)]
            // `$default` only picks the keys that have one.
            const DEFAULTED: &[&str] = &[$($([stringify!($field), stringify!($default)][0],)?)*];
        }
    };
    (@merged_type $ty:ty) => { Option<$ty> };
    (@merged_type $ty:ty, $default:expr) => { $ty };
    (@default) => { None };
    (@default $default:expr) => { Some($default) };
    (@value $value:expr) => { $value };
    (@value $value:expr, $default:expr) => { $value.unwrap_or_else(|| $default) };
}

/// A flag whose values are a lower layer's names for its variants: the layer keeps its
/// types free of clap, and the names have one home, beside the variants.
fn one_of<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(all.iter().map(|v| name(*v))).try_map(
        move |given: String| {
            all.iter()
                .copied()
                .find(|v| name(*v) == given)
                .ok_or_else(|| format!("{given:?} is not one of the possible values"))
        },
    )
}

settings! {
    /// One source of settings, every key optional: the flags with their `K8SAILOR_*`
    /// variables (one layer, as clap reads them), or the config file, whose keys are these in
    /// camelCase. The `[default: ...]` in a help is checked against the default by a test.
    #[derive(Clone, Debug, Default, PartialEq, Deserialize, clap::Args)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct SettingsLayer;
    /// Every layer merged over the defaults.
    struct Merged;
    {
        /// Kubeconfig file; default KUBECONFIG, ~/.kube/config, then in-cluster.
        #[arg(long, env = "K8SAILOR_KUBECONFIG")]
        kubeconfig: PathBuf,
        /// Kubeconfig context; default its current-context.
        #[arg(long, env = "K8SAILOR_CONTEXT")]
        context: String,
        /// Listen address [default: 127.0.0.1:8088].
        #[arg(long, env = "K8SAILOR_LISTEN")]
        listen: String = DEFAULT_LISTEN.to_string(),
        /// Path prefix of the API [default: /k8sailor/v0].
        #[arg(long, env = "K8SAILOR_PREFIX")]
        prefix: String = DEFAULT_PREFIX.to_string(),
        /// Watch and serve this namespace only [default: all].
        #[arg(long, env = "K8SAILOR_NAMESPACE")]
        namespace: String,
        /// Where reads come from: cache or live [default: cache].
        #[arg(long, env = "K8SAILOR_SOURCE", value_parser = one_of(SourceKind::ALL, SourceKind::name))]
        source: SourceKind = SourceKind::default(),
        /// Changes kept per kind, so that watches resume after a version (resourceVersion,
        /// Last-Event-ID) and continue tokens from other replicas are served; older versions
        /// answer 410 [default: 10000].
        #[arg(long, env = "K8SAILOR_CHANGE_HISTORY")]
        change_history: usize = k8sdao::HISTORY_CAPACITY,
        /// Bytes the Kubernetes API's kept list answers may hold: a large list answer (and its
        /// gzip) is sent again, unbuilt, to callers asking the same while its kind is
        /// unchanged; the least recently used go first; 0 keeps none [default: 134217728].
        #[arg(long, env = "K8SAILOR_KEPT_ANSWER_BYTES")]
        kept_answer_bytes: usize = apis::DEFAULT_KEPT_ANSWER_BYTES,
        /// How the caches get each full list: whole (one list without a limit, decoded as it
        /// arrives), auto (streamed with sendInitialEvents where the apiserver allows, else in
        /// pages), streaming or paged [default: whole].
        #[arg(long, env = "K8SAILOR_INITIAL_LIST", value_parser = one_of(InitialList::ALL, InitialList::name))]
        initial_list: InitialList = InitialList::default(),
        /// How the caches ask for lists: protobuf (built-in kinds; a third to a half of the
        /// apiserver's CPU of JSON, written as the JSON it would have sent; custom resources
        /// in JSON), or json [default: protobuf].
        #[arg(long, env = "K8SAILOR_LIST_ENCODING", value_parser = one_of(ListEncoding::ALL, ListEncoding::name))]
        list_encoding: ListEncoding = ListEncoding::default(),
        /// Built-in resources served beside the six of the original client: names to serve
        /// (`*`: every built-in kind but Secrets), `-name`s not to, comma-separated; Secrets
        /// (metadata only) only when named, e.g. `*,secrets`; custom resources as
        /// `widgets.example.com` (all with `*`) [default: *].
        #[arg(long, env = "K8SAILOR_RESOURCES")]
        resources: String = "*".to_string(),
        /// Longest wait for the caches to sync at start-up, e.g. 60s [default: 60s].
        #[arg(long, env = "K8SAILOR_SYNC_TIMEOUT")]
        sync_timeout: String = "60s".to_string(),
        /// Longest time a request may take, e.g. 30s [default: 30s].
        #[arg(long, env = "K8SAILOR_REQUEST_TIMEOUT")]
        request_timeout: String = "30s".to_string(),
        /// After SIGTERM, keep serving this long with /readyz failing [default: 0s].
        #[arg(long, env = "K8SAILOR_SHUTDOWN_DELAY")]
        shutdown_delay: String = "0s".to_string(),
        /// Then, how long in-flight requests get to finish [default: 10s].
        #[arg(long, env = "K8SAILOR_SHUTDOWN_GRACE")]
        shutdown_grace: String = "10s".to_string(),
        /// CORS origins, comma-separated: http://host:port, http://host:* (any port), or "*" for
        /// any, without credentials [default: the loopback origins on any port, http and https].
        #[arg(long, env = "K8SAILOR_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
        cors_allowed_origins: Vec<String>,
        /// With auth none, Host names served besides loopback names and IP addresses,
        /// comma-separated: name, .domain (and every name under it), or "*" for any [default: none].
        #[arg(long, env = "K8SAILOR_ALLOWED_HOSTS", value_delimiter = ',')]
        allowed_hosts: Vec<String>,
        /// Who may call the API: none (anyone who reaches the port) or delegated (a bearer token
        /// whose owner the cluster's RBAC allows each request) [default: none].
        #[arg(long, env = "K8SAILOR_AUTH", value_parser = one_of(AuthMode::ALL, AuthMode::name))]
        auth: AuthMode = AuthMode::default(),
        /// Serve with auth none on an address other hosts can reach (otherwise refused at start)
        /// [default: false].
        #[arg(
            long,
            env = "K8SAILOR_ALLOW_UNAUTHENTICATED",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        allow_unauthenticated: bool = false,
        /// Serve the built-in dashboard at / (false: only the API, probes and metrics)
        /// [default: true].
        #[arg(
            long,
            env = "K8SAILOR_DASHBOARD",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        dashboard: bool = true,
        /// With --auth delegated: TokenReviews per second for bearer tokens not in the cache,
        /// per client address; beyond it (and the burst) a new token gets 429 [default: 20].
        #[arg(long, env = "K8SAILOR_TOKEN_REVIEW_RATE")]
        token_review_rate: u32 = TokenReviewLimits::default().per_second.get(),
        /// TokenReviews allowed at once after a quiet spell, per client address [default: 40].
        #[arg(long, env = "K8SAILOR_TOKEN_REVIEW_BURST")]
        token_review_burst: u32 = TokenReviewLimits::default().burst.get(),
        /// TokenReviews waiting for the apiserver at one time, all addresses together
        /// [default: 8].
        #[arg(long, env = "K8SAILOR_TOKEN_REVIEWS_IN_FLIGHT")]
        token_reviews_in_flight: u32 =
            u32::try_from(TokenReviewLimits::default().in_flight).unwrap_or(u32::MAX),
        /// How long a token's review is trusted: a token in use is reviewed again from half
        /// of it on, and a revoked token is refused after it at the latest, open watches
        /// included [default: 60s].
        #[arg(long, env = "K8SAILOR_TOKEN_REVIEW_TTL")]
        token_review_ttl: String = "60s".to_string(),
        /// Log format: plain or json [default: plain]; levels from RUST_LOG.
        #[arg(long, env = "K8SAILOR_LOG_FORMAT")]
        log_format: LogFormat = LogFormat::default(),
        /// Largest request body in bytes; larger is a 413 [default: 262144].
        #[arg(long, env = "K8SAILOR_MAX_BODY_BYTES")]
        max_body_bytes: usize = DEFAULT_MAX_BODY_BYTES,
        /// Longest time a request body may take to arrive; then 408 [default: 30s].
        #[arg(long, env = "K8SAILOR_BODY_READ_TIMEOUT")]
        body_read_timeout: String = "30s".to_string(),
        /// Longest time from a connection's start, or from the first byte of a request, until
        /// the request's headers are complete; then the connection is closed [default: 10s].
        #[arg(long, env = "K8SAILOR_HEADER_READ_TIMEOUT")]
        header_read_timeout: String = "10s".to_string(),
        /// How long a keep-alive connection may wait for its next request [default: 90s].
        #[arg(long, env = "K8SAILOR_IDLE_TIMEOUT")]
        idle_timeout: String = "90s".to_string(),
        /// Most connections open at once; beyond it a connection of the client address holding
        /// the most (the one waiting longest without a request, else its oldest) is closed,
        /// or, if the new one's client holds the most and all are busy, the new one
        /// [default: 1024].
        #[arg(long, env = "K8SAILOR_MAX_CONNECTIONS")]
        max_connections: usize = DEFAULT_MAX_CONNECTIONS,
        /// Requests one HTTP/2 connection may have in progress at once, watches included; a
        /// client past it opens another connection [default: 1000].
        #[arg(long, env = "K8SAILOR_HTTP2_MAX_CONCURRENT_STREAMS")]
        http2_max_concurrent_streams: u32 = DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
        /// PEM certificate chain to serve the API over TLS with (HTTP/2 or HTTP/1.1 by ALPN),
        /// re-read when it changes; needs --tls-private-key-file [default: none, plain
        /// HTTP, and HTTP/2 only with prior knowledge].
        #[arg(long, env = "K8SAILOR_TLS_CERT_FILE")]
        tls_cert_file: PathBuf,
        /// PEM private key of --tls-cert-file's first certificate.
        #[arg(long, env = "K8SAILOR_TLS_PRIVATE_KEY_FILE")]
        tls_private_key_file: PathBuf,
        /// Address of a listener serving only /livez, /readyz and /metrics, with connections
        /// of its own (never counted against --max-connections) and no auth, for the kubelet's
        /// probes and metrics scrapes [default: none, they are on the API's listener only].
        #[arg(long, env = "K8SAILOR_HEALTH_LISTEN")]
        health_listen: String,
        /// Requests in progress at once (watches apart), shared among the clients (users with
        /// --auth delegated, else addresses) that have some: one past its share gets 429
        /// [default: 400].
        #[arg(long, env = "K8SAILOR_MAX_REQUESTS_IN_FLIGHT")]
        max_requests_in_flight: usize = FairShares::default().max_requests_in_flight,
        /// Open watches (watch=true), shared the same way [default: 512].
        #[arg(long, env = "K8SAILOR_MAX_WATCHES")]
        max_watches: usize = FairShares::default().max_watches,
        /// A watch or a followed log ends after this times a random factor in [1, 2), as with
        /// the apiserver's --min-request-timeout, so clients spread over replicas [default: 30m].
        #[arg(long, env = "K8SAILOR_MIN_REQUEST_TIMEOUT")]
        min_request_timeout: String = "30m".to_string(),
        /// How often a quiet `watch=true` stream of Server-Sent Events gets a keep-alive
        /// comment, so proxies do not close it as idle [default: 15s].
        #[arg(long, env = "K8SAILOR_WATCH_KEEP_ALIVE")]
        watch_keep_alive: String = "15s".to_string(),
        /// Pods one merged log (/{kind}/{name}/logs, /pods/logs) follows at once;
        /// more are said to be cut in the stream and join as followed ones leave
        /// [default: 50].
        #[arg(long, env = "K8SAILOR_MAX_LOG_STREAMS")]
        max_log_streams: usize = biz::DEFAULT_MAX_LOG_STREAMS,
    }
}

/// The `httpserver` command line: the config file, and the settings as flags over it.
#[derive(clap::Args)]
pub struct HttpServerArgs {
    /// YAML config file (see config/default.yaml for every key).
    #[arg(long, env = "K8SAILOR_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    flags: SettingsLayer,
}

impl HttpServerArgs {
    /// Flags and their variables over the config file over the defaults.
    pub fn settings(self) -> Result<Settings, ConfigError> {
        let file = match &self.config {
            Some(path) => SettingsLayer::from_file(path)?,
            None => SettingsLayer::default(),
        };
        Settings::resolve(self.flags.over(file))
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Plain,
    Json,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub client: ClientOptions,
    pub listen: SocketAddr,
    pub http: HttpOptions,
    /// Watch and serve this namespace only.
    pub namespace: Option<String>,
    pub source: SourceKind,
    /// Changes the caches keep per kind.
    pub change_history: usize,
    /// What the Kubernetes API's kept list answers may hold, in bytes; 0: none kept.
    pub kept_answer_bytes: usize,
    /// How the informers get their lists.
    pub initial_list: InitialList,
    /// The encoding the informers ask their lists in.
    pub list_encoding: ListEncoding,
    /// The built-in resources served besides the typed kinds.
    pub resources: k8sdao::ResourceSelection,
    pub sync_timeout: Duration,
    /// After SIGTERM, how long to keep serving with readiness failing.
    pub shutdown_delay: Duration,
    /// Then, how long in-flight requests get to finish.
    pub shutdown_grace: Duration,
    /// With `--auth delegated`: how many TokenReviews unknown tokens may cost.
    pub token_reviews: TokenReviewLimits,
    /// With `--auth delegated`: how long a token's review is trusted.
    pub token_review_ttl: Duration,
    pub log_format: LogFormat,
    /// `auth: none` on an address other hosts can reach was asked for.
    pub allow_unauthenticated: bool,
    /// Bounds on connections: timeouts and how many may be open.
    pub connections: ConnectionLimits,
    /// The listener of the probes and metrics alone, if any.
    pub health_listen: Option<SocketAddr>,
    /// The API listener's certificate and key; None: plain TCP.
    pub tls: Option<TlsFiles>,
    /// What each client may hold of requests and watches, and how long a watch lasts.
    pub fair_shares: FairShares,
    /// How often a quiet event stream gets a keep-alive comment.
    pub watch_keep_alive: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("invalid {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error(
        "refusing to serve without authentication on {listen}, which other hosts can reach: \
         use --auth delegated, listen on a loopback address, or pass --allow-unauthenticated \
         (K8SAILOR_ALLOW_UNAUTHENTICATED=true) if anyone who reaches the port is meant to read \
         and change what k8sailor's account may"
    )]
    Unauthenticated { listen: SocketAddr },
}

impl SettingsLayer {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let read_error = |reason: String| ConfigError::Read {
            path: path.display().to_string(),
            reason: reason.replace('\n', " "),
        };
        let text = std::fs::read_to_string(path).map_err(|e| read_error(e.to_string()))?;
        if text.trim().is_empty() {
            return Ok(SettingsLayer::default());
        }
        serde_saphyr::from_str(&text).map_err(|e| read_error(e.to_string()))
    }
}

/// `30s`, `2m`, `1h 30m`: the friendly format Kubernetes users write.
pub fn parse_duration(key: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { key, reason };
    let d: jiff::SignedDuration = value
        .trim()
        .parse()
        .map_err(|e| invalid(format!("{value:?} is not a duration like 30s or 2m ({e})")))?;
    Duration::try_from(d).map_err(|_| invalid(format!("{value:?} must not be negative")))
}

/// A duration that must not be zero: a zero timeout would refuse every request.
fn timeout(key: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let d = parse_duration(key, value)?;
    if d.is_zero() {
        return Err(ConfigError::Invalid {
            key,
            reason: format!("{value:?} must be more than zero"),
        });
    }
    Ok(d)
}

/// A count that must be more than zero, as the non-zero type `N` of its number type.
fn positive<T, N: TryFrom<T>>(key: &'static str, value: T) -> Result<N, ConfigError> {
    N::try_from(value).map_err(|_| ConfigError::Invalid {
        key,
        reason: "must be more than zero".to_string(),
    })
}

impl Settings {
    /// How the informers get their lists.
    pub fn list_settings(&self) -> confk8s::ListSettings {
        confk8s::ListSettings {
            initial: self.initial_list,
            encoding: self.list_encoding,
        }
    }

    /// Checks and types a merged layer; keys it leaves unset take their defaults.
    pub fn resolve(layer: SettingsLayer) -> Result<Settings, ConfigError> {
        let layer = layer.with_defaults();
        let listen: SocketAddr = layer.listen.parse().map_err(|e| ConfigError::Invalid {
            key: "listen",
            reason: format!(
                "{:?} is not an address like 127.0.0.1:8088 ({e})",
                layer.listen
            ),
        })?;
        let auth = layer.auth;
        let allow_unauthenticated = layer.allow_unauthenticated;
        // Checked before connecting: an open API on a reachable address is never an accident.
        if auth == AuthMode::None
            && !listen.ip().to_canonical().is_loopback()
            && !allow_unauthenticated
        {
            return Err(ConfigError::Unauthenticated { listen });
        }
        let cors_allowed_origins = match &layer.cors_allowed_origins {
            Some(origins) => AllowedOrigins::parse(origins.as_slice()),
            None => Ok(AllowedOrigins::loopback()),
        }
        .map_err(|e| ConfigError::Invalid {
            key: "corsAllowedOrigins",
            reason: e.to_string(),
        })?;
        let allowed_hosts = match &layer.allowed_hosts {
            Some(hosts) => AllowedHosts::parse(hosts.as_slice()),
            None => Ok(AllowedHosts::default()),
        }
        .map_err(|e| ConfigError::Invalid {
            key: "allowedHosts",
            reason: e.to_string(),
        })?
        .serving(listen.ip());
        let health_listen = match layer.health_listen.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(addr) => Some(addr.parse().map_err(|e| ConfigError::Invalid {
                key: "healthListen",
                reason: format!("{addr:?} is not an address like 0.0.0.0:8089 ({e})"),
            })?),
        };
        let tls = match (layer.tls_cert_file, layer.tls_private_key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (Some(_), None) => {
                return Err(ConfigError::Invalid {
                    key: "tlsPrivateKeyFile",
                    reason: "tlsCertFile is set: its private key is needed too".to_string(),
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: "tlsCertFile",
                    reason: "tlsPrivateKeyFile is set: the certificate is needed too".to_string(),
                });
            }
        };
        let namespace = layer.namespace.filter(|ns| !ns.is_empty());
        if let Some(ns) = &namespace
            && !selector::validation::is_dns1123_label(ns)
        {
            return Err(ConfigError::Invalid {
                key: "namespace",
                reason: format!("{ns:?} is not a valid namespace name"),
            });
        }
        Ok(Settings {
            client: ClientOptions {
                kubeconfig: layer.kubeconfig,
                context: layer.context,
                connect_timeout: None,
            },
            listen,
            http: HttpOptions {
                prefix: layer.prefix,
                cors_allowed_origins,
                allowed_hosts,
                request_timeout: parse_duration("requestTimeout", &layer.request_timeout)?,
                auth,
                dashboard: layer.dashboard,
                logs: LogLimits {
                    max_streams: positive::<_, NonZeroUsize>(
                        "maxLogStreams",
                        layer.max_log_streams,
                    )?
                    .get(),
                },
                body: BodyLimits {
                    max_bytes: positive::<_, NonZeroUsize>("maxBodyBytes", layer.max_body_bytes)?
                        .get(),
                    read_timeout: timeout("bodyReadTimeout", &layer.body_read_timeout)?,
                },
            },
            connections: ConnectionLimits {
                header_read_timeout: timeout("headerReadTimeout", &layer.header_read_timeout)?,
                idle_timeout: timeout("idleTimeout", &layer.idle_timeout)?,
                max_connections: positive::<_, NonZeroUsize>(
                    "maxConnections",
                    layer.max_connections,
                )?
                .get(),
                http2_max_concurrent_streams: positive::<_, std::num::NonZeroU32>(
                    "http2MaxConcurrentStreams",
                    layer.http2_max_concurrent_streams,
                )?
                .get(),
            },
            tls,
            namespace,
            source: layer.source,
            change_history: layer.change_history,
            kept_answer_bytes: layer.kept_answer_bytes,
            initial_list: layer.initial_list,
            list_encoding: layer.list_encoding,
            resources: k8sdao::ResourceSelection::parse(&layer.resources).map_err(|reason| {
                ConfigError::Invalid {
                    key: "resources",
                    reason,
                }
            })?,
            sync_timeout: parse_duration("syncTimeout", &layer.sync_timeout)?,
            watch_keep_alive: timeout("watchKeepAlive", &layer.watch_keep_alive)?,
            shutdown_delay: parse_duration("shutdownDelay", &layer.shutdown_delay)?,
            shutdown_grace: parse_duration("shutdownGrace", &layer.shutdown_grace)?,
            token_reviews: TokenReviewLimits {
                per_second: positive("tokenReviewRate", layer.token_review_rate)?,
                burst: positive("tokenReviewBurst", layer.token_review_burst)?,
                in_flight: positive::<_, NonZeroUsize>(
                    "tokenReviewsInFlight",
                    layer.token_reviews_in_flight as usize,
                )?
                .get(),
            },
            token_review_ttl: timeout("tokenReviewTtl", &layer.token_review_ttl)?,
            log_format: layer.log_format,
            allow_unauthenticated,
            health_listen,
            fair_shares: FairShares {
                max_requests_in_flight: positive::<_, NonZeroUsize>(
                    "maxRequestsInFlight",
                    layer.max_requests_in_flight,
                )?
                .get(),
                max_watches: positive::<_, NonZeroUsize>("maxWatches", layer.max_watches)?.get(),
                min_request_timeout: timeout("minRequestTimeout", &layer.min_request_timeout)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag's names (the lower layers' `name`) and the config file's (their serde names)
    /// are the same words.
    #[test]
    fn flags_and_the_config_file_name_each_variant_alike() {
        fn same<T: Copy + PartialEq + std::fmt::Debug + serde::de::DeserializeOwned>(
            all: &[T],
            name: fn(T) -> &'static str,
        ) {
            for v in all {
                let from_file: T =
                    serde_json::from_value(serde_json::Value::String(name(*v).into())).unwrap();
                assert_eq!(from_file, *v);
            }
        }
        same(SourceKind::ALL, SourceKind::name);
        same(AuthMode::ALL, AuthMode::name);
        same(InitialList::ALL, InitialList::name);
        same(ListEncoding::ALL, ListEncoding::name);
    }

    /// config/rbac.yaml grants list and watch on exactly what `--resources` serves by default
    /// (the RBAC kinds, which delegated auth follows, are among them).
    #[test]
    fn the_shipped_cluster_role_lets_k8sailor_watch_exactly_what_it_serves_by_default() {
        use k8s_openapi::api::rbac::v1::ClusterRole;
        use std::collections::BTreeSet;
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rbac.yaml"))
                .unwrap();
        let role: ClusterRole = text
            .split("\n---\n")
            .find_map(|doc| {
                let doc: ClusterRole = serde_saphyr::from_str(doc).ok()?;
                (doc.metadata.name.as_deref() == Some("k8sailor-reader")).then_some(doc)
            })
            .expect("the reader ClusterRole");
        let granted: BTreeSet<(String, String)> = role
            .rules
            .iter()
            .flatten()
            .filter(|r| r.verbs.iter().any(|v| v == "list") && r.verbs.iter().any(|v| v == "watch"))
            .flat_map(|r| {
                let groups = r.api_groups.clone().unwrap_or_default();
                let resources = r.resources.clone().unwrap_or_default();
                groups.into_iter().flat_map(move |g| {
                    resources
                        .clone()
                        .into_iter()
                        .map(move |res| (g.clone(), res))
                })
            })
            .collect();
        let served: BTreeSet<(String, String)> = Settings::resolve(SettingsLayer::default())
            .unwrap()
            .resources
            .served_resources()
            .into_iter()
            .map(|(g, r)| (g.to_string(), r.to_string()))
            .collect();
        assert_eq!(granted, served);
    }

    #[test]
    fn defaults_match_the_original_client() {
        let s = Settings::resolve(SettingsLayer::default()).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8088");
        assert_eq!(s.http.prefix, "/k8sailor/v0");
        assert_eq!(s.source, SourceKind::Cache);
        assert_eq!(s.sync_timeout, Duration::from_secs(60));
        assert_eq!(s.namespace, None);
        assert_eq!(s.health_listen, None);
        assert_eq!(s.fair_shares, FairShares::default());
        assert_eq!(
            s.fair_shares.min_request_timeout,
            Duration::from_secs(1800),
            "the apiserver's --min-request-timeout"
        );
    }

    #[test]
    fn upper_layers_win_key_by_key() {
        let flags = SettingsLayer {
            listen: Some("127.0.0.1:9000".into()),
            ..Default::default()
        };
        let file = SettingsLayer {
            listen: Some("127.0.0.1:7000".into()),
            namespace: Some("team-a".into()),
            sync_timeout: Some("2m".into()),
            ..Default::default()
        };
        let s = Settings::resolve(flags.over(file)).unwrap();
        assert_eq!(s.listen.port(), 9000);
        assert_eq!(s.namespace.as_deref(), Some("team-a"));
        assert_eq!(s.sync_timeout, Duration::from_secs(120));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (layer, key) in [
            (
                SettingsLayer {
                    listen: Some("nowhere".into()),
                    ..Default::default()
                },
                "listen",
            ),
            (
                SettingsLayer {
                    sync_timeout: Some("soon".into()),
                    ..Default::default()
                },
                "syncTimeout",
            ),
            (
                SettingsLayer {
                    namespace: Some("Bad_NS".into()),
                    ..Default::default()
                },
                "namespace",
            ),
            (
                SettingsLayer {
                    max_connections: Some(0),
                    ..Default::default()
                },
                "maxConnections",
            ),
            (
                SettingsLayer {
                    header_read_timeout: Some("0s".into()),
                    ..Default::default()
                },
                "headerReadTimeout",
            ),
            (
                SettingsLayer {
                    idle_timeout: Some("soon".into()),
                    ..Default::default()
                },
                "idleTimeout",
            ),
            (
                SettingsLayer {
                    max_body_bytes: Some(0),
                    ..Default::default()
                },
                "maxBodyBytes",
            ),
            (
                SettingsLayer {
                    health_listen: Some("8089".into()),
                    ..Default::default()
                },
                "healthListen",
            ),
            (
                SettingsLayer {
                    max_watches: Some(0),
                    ..Default::default()
                },
                "maxWatches",
            ),
            (
                SettingsLayer {
                    http2_max_concurrent_streams: Some(0),
                    ..Default::default()
                },
                "http2MaxConcurrentStreams",
            ),
            (
                SettingsLayer {
                    tls_cert_file: Some("tls.crt".into()),
                    ..Default::default()
                },
                "tlsPrivateKeyFile",
            ),
            (
                SettingsLayer {
                    tls_private_key_file: Some("tls.key".into()),
                    ..Default::default()
                },
                "tlsCertFile",
            ),
            (
                SettingsLayer {
                    max_requests_in_flight: Some(0),
                    ..Default::default()
                },
                "maxRequestsInFlight",
            ),
            (
                SettingsLayer {
                    min_request_timeout: Some("0s".into()),
                    ..Default::default()
                },
                "minRequestTimeout",
            ),
        ] {
            let err = Settings::resolve(layer).unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn the_defaults_let_loopback_pages_in_and_refuse_foreign_names() {
        let s = Settings::resolve(SettingsLayer::default()).unwrap();
        assert_eq!(s.http.cors_allowed_origins, AllowedOrigins::loopback());
        assert!(s.http.cors_allowed_origins.allows(b"http://127.0.0.1:8080"));
        assert!(!s.http.cors_allowed_origins.allows(b"http://evil.example"));
        assert!(!s.http.allowed_hosts.allows("evil.example"));
        assert_eq!(s.http.auth, AuthMode::None);
        assert!(!s.allow_unauthenticated);
    }

    #[test]
    fn no_auth_on_a_reachable_address_needs_allow_unauthenticated() {
        let layer = |listen: &str, auth, allow| SettingsLayer {
            listen: Some(listen.into()),
            auth: Some(auth),
            allow_unauthenticated: allow,
            ..Default::default()
        };
        for listen in ["0.0.0.0:8088", "[::]:8088", "10.0.0.7:8088", "[fd00::7]:0"] {
            let err = Settings::resolve(layer(listen, AuthMode::None, None))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--allow-unauthenticated") && err.contains(listen),
                "{err}"
            );
            assert!(!err.contains('\n'), "one line: {err}");
            Settings::resolve(layer(listen, AuthMode::None, Some(false))).unwrap_err();
            Settings::resolve(layer(listen, AuthMode::None, Some(true))).unwrap();
            Settings::resolve(layer(listen, AuthMode::Delegated, None)).unwrap();
        }
        for listen in [
            "127.0.0.1:8088",
            "127.0.0.2:0",
            "[::1]:8088",
            "[::ffff:127.0.0.1]:8088",
        ] {
            Settings::resolve(layer(listen, AuthMode::None, None)).unwrap();
        }
    }

    #[test]
    fn origins_and_hosts_are_checked_before_start() {
        for (layer, key) in [
            (
                SettingsLayer {
                    cors_allowed_origins: Some(vec!["localhost:8080".into()]),
                    ..Default::default()
                },
                "corsAllowedOrigins",
            ),
            (
                SettingsLayer {
                    cors_allowed_origins: Some(vec!["*".into(), "http://a.example".into()]),
                    ..Default::default()
                },
                "corsAllowedOrigins",
            ),
            (
                SettingsLayer {
                    allowed_hosts: Some(vec!["http://a.example".into()]),
                    ..Default::default()
                },
                "allowedHosts",
            ),
        ] {
            let err = Settings::resolve(layer).unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        let open = Settings::resolve(SettingsLayer {
            cors_allowed_origins: Some(vec!["*".into()]),
            allowed_hosts: Some(vec!["*".into()]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(open.http.cors_allowed_origins, AllowedOrigins::Any);
        assert_eq!(open.http.allowed_hosts, AllowedHosts::Any);
    }

    fn camel_case(field: &str) -> String {
        let mut words = field.split('_');
        let first = words.next().expect("a field has a name").to_string();
        words.fold(first, |mut key, word| {
            let mut chars = word.chars();
            key.extend(chars.next().map(|c| c.to_ascii_uppercase()));
            key.push_str(chars.as_str());
            key
        })
    }

    #[test]
    fn the_shipped_default_config_parses_and_equals_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.yaml");
        let layer = SettingsLayer::from_file(&path).unwrap();
        // Each key with a default is set in the file, to that default.
        assert_eq!(
            SettingsLayer::defaults().over(layer.clone()),
            layer,
            "config/default.yaml leaves out a key with a default, or sets it to another value"
        );
        // Each key without one is at least shown, as a commented example.
        let text = std::fs::read_to_string(&path).unwrap();
        for key in SettingsLayer::KEYS.iter().map(|field| camel_case(field)) {
            let shown = text.lines().any(|line| {
                let line = line.strip_prefix("# ").unwrap_or(line);
                line.strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.starts_with(':'))
            });
            assert!(shown, "config/default.yaml does not show {key}");
        }
        // And what the keys without a default say means the same as leaving them out.
        let from_file = Settings::resolve(layer).unwrap();
        let defaults = Settings::resolve(SettingsLayer::default()).unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn each_flag_shows_its_default_and_that_is_the_default() {
        use clap::{Args, FromArgMatches};
        // Without the variables: a K8SAILOR_* set where the tests run must not change them.
        let command = || {
            SettingsLayer::augment_args(clap::Command::new("k8sailor"))
                .mut_args(|arg| arg.env(None::<&'static str>))
        };
        let defaults = SettingsLayer::defaults();
        let flags: Vec<_> = command()
            .get_arguments()
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert_eq!(flags, SettingsLayer::KEYS, "one flag per key");
        for arg in command().get_arguments() {
            let long = arg.get_long().expect("every key is a long flag");
            let help = arg.get_help().expect("every flag has a help").to_string();
            if !SettingsLayer::DEFAULTED.contains(&arg.get_id().as_str()) {
                // No default value: the help says in words what its absence means.
                continue;
            }
            let (_, shown) = help
                .split_once("[default: ")
                .and_then(|(before, rest)| Some((before, rest.split_once(']')?.0)))
                .unwrap_or_else(|| panic!("--{long} does not show its default: {help}"));
            let flag = format!("--{long}={shown}");
            let matches = command()
                .try_get_matches_from(["k8sailor", &flag])
                .unwrap_or_else(|e| panic!("{flag}: {e}"));
            let parsed = SettingsLayer::from_arg_matches(&matches).unwrap();
            assert_ne!(parsed, SettingsLayer::default(), "{flag} sets nothing");
            assert_eq!(
                parsed.over(defaults.clone()),
                defaults,
                "--{long} shows [default: {shown}], which is not its default"
            );
        }
    }

    #[test]
    fn unknown_keys_in_the_file_are_errors() {
        let dir = std::env::temp_dir().join(format!("k8sailor-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.yaml");
        std::fs::write(&path, "listn: 127.0.0.1:1\n").unwrap();
        let err = SettingsLayer::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("listn"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
