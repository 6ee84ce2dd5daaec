//! Settings of `k8sailor httpserver`, merged from layers: flags and `K8SAILOR_*` environment
//! variables (one layer, as clap reads them), then the config file, then defaults.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use confk8s::{ClientOptions, TokenReviewLimits};
use serde::Deserialize;

use crate::apis::{AllowedHosts, AllowedOrigins, AuthMode, BodyLimits, HttpOptions};
use crate::connections::ConnectionLimits;
use crate::k8sdao::SourceKind;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";
pub const DEFAULT_PREFIX: &str = "/k8sailor/v0";
/// Covers the largest create request the per-field limits allow (about 175 KiB: 100
/// containers of 100 ports and a 1 KiB image each) while keeping what open connections can
/// make us buffer at once bounded (maxConnections times this).
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// Enough for thousands of dashboards and watches; the file descriptors it takes stay well
/// under the usual limits (1024 soft on many hosts: see the start-up warning).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// One source of settings; every key optional. The config file's keys are these, in camelCase.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsLayer {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub listen: Option<String>,
    pub prefix: Option<String>,
    pub namespace: Option<String>,
    pub source: Option<SourceKind>,
    pub sync_timeout: Option<String>,
    pub request_timeout: Option<String>,
    pub shutdown_delay: Option<String>,
    pub shutdown_grace: Option<String>,
    pub cors_allowed_origins: Option<Vec<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub auth: Option<AuthMode>,
    pub allow_unauthenticated: Option<bool>,
    pub token_review_rate: Option<u32>,
    pub token_review_burst: Option<u32>,
    pub token_reviews_in_flight: Option<u32>,
    pub log_format: Option<LogFormat>,
    pub max_body_bytes: Option<usize>,
    pub body_read_timeout: Option<String>,
    pub header_read_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub max_connections: Option<usize>,
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
    pub sync_timeout: Duration,
    /// After SIGTERM, how long to keep serving with readiness failing.
    pub shutdown_delay: Duration,
    /// Then, how long in-flight requests get to finish.
    pub shutdown_grace: Duration,
    /// With `--auth delegated`: how many TokenReviews unknown tokens may cost.
    pub token_reviews: TokenReviewLimits,
    pub log_format: LogFormat,
    /// `auth: none` on an address other hosts can reach was asked for.
    pub allow_unauthenticated: bool,
    /// Bounds on connections: timeouts and how many may be open.
    pub connections: ConnectionLimits,
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

    /// Keys set here win over `lower`.
    pub fn over(self, lower: SettingsLayer) -> SettingsLayer {
        SettingsLayer {
            kubeconfig: self.kubeconfig.or(lower.kubeconfig),
            context: self.context.or(lower.context),
            listen: self.listen.or(lower.listen),
            prefix: self.prefix.or(lower.prefix),
            namespace: self.namespace.or(lower.namespace),
            source: self.source.or(lower.source),
            sync_timeout: self.sync_timeout.or(lower.sync_timeout),
            request_timeout: self.request_timeout.or(lower.request_timeout),
            shutdown_delay: self.shutdown_delay.or(lower.shutdown_delay),
            shutdown_grace: self.shutdown_grace.or(lower.shutdown_grace),
            cors_allowed_origins: self.cors_allowed_origins.or(lower.cors_allowed_origins),
            allowed_hosts: self.allowed_hosts.or(lower.allowed_hosts),
            auth: self.auth.or(lower.auth),
            allow_unauthenticated: self.allow_unauthenticated.or(lower.allow_unauthenticated),
            token_review_rate: self.token_review_rate.or(lower.token_review_rate),
            token_review_burst: self.token_review_burst.or(lower.token_review_burst),
            token_reviews_in_flight: self
                .token_reviews_in_flight
                .or(lower.token_reviews_in_flight),
            log_format: self.log_format.or(lower.log_format),
            max_body_bytes: self.max_body_bytes.or(lower.max_body_bytes),
            body_read_timeout: self.body_read_timeout.or(lower.body_read_timeout),
            header_read_timeout: self.header_read_timeout.or(lower.header_read_timeout),
            idle_timeout: self.idle_timeout.or(lower.idle_timeout),
            max_connections: self.max_connections.or(lower.max_connections),
        }
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
    pub fn resolve(layer: SettingsLayer) -> Result<Settings, ConfigError> {
        let listen_text = layer.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let listen: SocketAddr = listen_text.parse().map_err(|e| ConfigError::Invalid {
            key: "listen",
            reason: format!("{listen_text:?} is not an address like 127.0.0.1:8088 ({e})"),
        })?;
        let auth = layer.auth.unwrap_or_default();
        let allow_unauthenticated = layer.allow_unauthenticated.unwrap_or(false);
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
                prefix: layer.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_string()),
                cors_allowed_origins,
                allowed_hosts,
                request_timeout: parse_duration(
                    "requestTimeout",
                    layer.request_timeout.as_deref().unwrap_or("30s"),
                )?,
                auth,
                body: BodyLimits {
                    max_bytes: positive::<_, NonZeroUsize>(
                        "maxBodyBytes",
                        layer.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
                    )?
                    .get(),
                    read_timeout: timeout(
                        "bodyReadTimeout",
                        layer.body_read_timeout.as_deref().unwrap_or("30s"),
                    )?,
                },
            },
            connections: ConnectionLimits {
                header_read_timeout: timeout(
                    "headerReadTimeout",
                    layer.header_read_timeout.as_deref().unwrap_or("10s"),
                )?,
                idle_timeout: timeout(
                    "idleTimeout",
                    layer.idle_timeout.as_deref().unwrap_or("90s"),
                )?,
                max_connections: positive::<_, NonZeroUsize>(
                    "maxConnections",
                    layer.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
                )?
                .get(),
            },
            namespace,
            source: layer.source.unwrap_or_default(),
            sync_timeout: parse_duration(
                "syncTimeout",
                layer.sync_timeout.as_deref().unwrap_or("60s"),
            )?,
            shutdown_delay: parse_duration(
                "shutdownDelay",
                layer.shutdown_delay.as_deref().unwrap_or("0s"),
            )?,
            shutdown_grace: parse_duration(
                "shutdownGrace",
                layer.shutdown_grace.as_deref().unwrap_or("10s"),
            )?,
            token_reviews: {
                let defaults = TokenReviewLimits::default();
                TokenReviewLimits {
                    per_second: positive(
                        "tokenReviewRate",
                        layer.token_review_rate.unwrap_or(defaults.per_second.get()),
                    )?,
                    burst: positive(
                        "tokenReviewBurst",
                        layer.token_review_burst.unwrap_or(defaults.burst.get()),
                    )?,
                    in_flight: positive::<_, NonZeroUsize>(
                        "tokenReviewsInFlight",
                        layer
                            .token_reviews_in_flight
                            .map_or(defaults.in_flight, |n| n as usize),
                    )?
                    .get(),
                }
            },
            log_format: layer.log_format.unwrap_or_default(),
            allow_unauthenticated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_original_client() {
        let s = Settings::resolve(SettingsLayer::default()).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8088");
        assert_eq!(s.http.prefix, "/k8sailor/v0");
        assert_eq!(s.source, SourceKind::Cache);
        assert_eq!(s.sync_timeout, Duration::from_secs(60));
        assert_eq!(s.namespace, None);
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

    #[test]
    fn the_shipped_default_config_parses_and_equals_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.yaml");
        let layer = SettingsLayer::from_file(&path).unwrap();
        let from_file = Settings::resolve(layer).unwrap();
        let defaults = Settings::resolve(SettingsLayer::default()).unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
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
