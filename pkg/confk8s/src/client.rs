use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::signals::{WatchSignalLayer, WatchSignals};

/// Where the client configuration comes from. Unset fields follow kubectl: `KUBECONFIG`, then
/// `~/.kube/config`, then the in-cluster service account.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// The kubeconfig file; `None` looks at `KUBECONFIG` (its first existing path), then
    /// `~/.kube/config`, then falls back to the in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; `None` takes the file's `current-context`. Set without a
    /// kubeconfig to be found, it is an error rather than a silent switch to in-cluster.
    pub context: Option<String>,
    /// How long to wait for the apiserver to answer the first request; default 10 s.
    pub connect_timeout: Option<Duration>,
}

/// The configuration that was used, for logs and error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Read from a kubeconfig file.
    Kubeconfig {
        /// The file, as displayed.
        path: String,
        /// The context chosen, the file's `current-context` unless one was asked for.
        context: String,
    },
    /// The pod's service account token and CA, and the `KUBERNETES_SERVICE_*` address.
    InCluster,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::Kubeconfig { path, context } => {
                write!(f, "kubeconfig {path} (context {context:?})")
            }
            ConfigSource::InCluster => f.write_str("in-cluster service account"),
        }
    }
}

/// Every message fits on one line and names the file or context at fault.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file is missing, unreadable or not valid YAML.
    #[error("cannot read kubeconfig {path}: {reason}")]
    ReadKubeconfig {
        /// The file, as displayed.
        path: String,
        /// The cause, on one line.
        reason: String,
    },
    /// The file was read but the context is unknown or incomplete (no cluster, no user,
    /// unreadable credentials).
    #[error("kubeconfig {path}: context {context:?}: {reason}")]
    Context {
        /// The file, as displayed.
        path: String,
        /// The context asked for; empty when neither the options nor the file name one.
        context: String,
        /// The cause, on one line.
        reason: String,
    },
    #[error(
        "no cluster configured: no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a cluster ({reason})"
    )]
    /// No kubeconfig was found and the process is not in a pod (or `context` was set
    /// without a kubeconfig).
    NoConfig {
        /// Why the in-cluster configuration failed, on one line.
        reason: String,
    },
    /// The configuration loaded but no client could be built from it (a bad certificate or
    /// proxy, for instance).
    #[error("cannot build a Kubernetes client from {source_}: {reason}")]
    Client {
        /// The configuration at fault. Named `source_` so that thiserror does not take it
        /// for the error's cause.
        source_: ConfigSource,
        /// The cause, on one line.
        reason: String,
    },
    /// The apiserver did not answer the version request within the connect timeout, or
    /// answered with an error (refused connection, TLS, authentication).
    #[error("the Kubernetes API at {url} ({source_}) is not reachable: {reason}")]
    Unreachable {
        /// The cluster URL tried.
        url: String,
        /// Where that URL came from.
        source_: ConfigSource,
        /// The cause, on one line, or the timeout that expired.
        reason: String,
    },
}

/// Joins an error and its causes into one line, skipping causes the message already repeats.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg.replace('\n', " ")
}

fn default_kubeconfig_path() -> Option<PathBuf> {
    if let Some(paths) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        return std::env::split_paths(&paths).find(|p| p.exists());
    }
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".kube").join("config")).filter(|p| p.exists())
}

/// Resolves the client configuration the way kubectl does, without contacting the cluster.
pub async fn load_config(opts: &ClientOptions) -> Result<(Config, ConfigSource), ClientError> {
    let path = match opts.kubeconfig.clone().or_else(default_kubeconfig_path) {
        Some(path) => path,
        None => {
            if opts.context.is_some() {
                return Err(ClientError::NoConfig {
                    reason: "--context needs a kubeconfig".into(),
                });
            }
            let config = Config::incluster().map_err(|e| ClientError::NoConfig {
                reason: one_line(&e),
            })?;
            return Ok((without_retries(config), ConfigSource::InCluster));
        }
    };
    let shown = path.display().to_string();
    let kubeconfig = Kubeconfig::read_from(&path).map_err(|e| ClientError::ReadKubeconfig {
        path: shown.clone(),
        reason: one_line(&e),
    })?;
    let context = opts
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .unwrap_or_default();
    let options = KubeConfigOptions {
        context: opts.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ClientError::Context {
            path: shown.clone(),
            context: context.clone(),
            reason: one_line(&e),
        })?;
    Ok((
        without_retries(config),
        ConfigSource::Kubeconfig {
            path: shown,
            context,
        },
    ))
}

/// kube retries a 429, 503 or 504 up to 15 times, backing off up to 1,000 s: a relayed
/// request would then hide the apiserver's answer (its 429 and Retry-After, its 504 Too
/// large resource version) from the caller and hold the request for minutes. Every caller
/// of ours gets the apiserver's answer as it is, and the watcher has its own backoff.
fn without_retries(mut config: Config) -> Config {
    config.default_retry = false;
    config
}

/// A client that answers, where its configuration came from, and what it tells informers of
/// their watches (give it to [`crate::InformerFactory::with_watch_signals`]).
#[derive(Clone)]
pub struct Connection {
    /// A client whose apiserver answered once; its requests pass through the watch signals.
    pub client: Client,
    /// Where the configuration came from.
    pub source: ConfigSource,
    /// Fed by every watch `client` opens; shared by its clones.
    pub watches: WatchSignals,
    /// The same apiserver with none of our credentials (no token, exec plugin, client
    /// certificate or impersonation) and no read timeout: each request relayed through it
    /// carries its caller's own token, so the apiserver authenticates the caller, never us,
    /// and a quiet stream (`logs -f`) is not cut.
    pub without_credentials: Client,
}

/// A client of `config`'s apiserver that authenticates as nobody: what a caller's request is
/// relayed with, its own token added.
fn without_credentials(config: &Config) -> Result<Client, kube::Error> {
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo::default();
    config.headers.clear();
    config.read_timeout = None;
    Client::try_from(config)
}

/// Builds a client and checks that the apiserver answers, so that a wrong file, context or
/// address fails at start-up with one clear line rather than as endless watch retries.
pub async fn connect(opts: &ClientOptions) -> Result<Connection, ClientError> {
    let (config, source) = load_config(opts).await?;
    let url = config.cluster_url.to_string();
    let watches = WatchSignals::default();
    let relaying = without_credentials(&config).map_err(|e| ClientError::Client {
        source_: source.clone(),
        reason: one_line(&e),
    })?;
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| ClientError::Client {
            source_: source.clone(),
            reason: one_line(&e),
        })?
        .with_layer(&WatchSignalLayer(watches.clone()))
        .build();
    let timeout = opts.connect_timeout.unwrap_or(Duration::from_secs(10));
    let unreachable = |reason: String| ClientError::Unreachable {
        url: url.clone(),
        source_: source.clone(),
        reason,
    };
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(Connection {
            client,
            source,
            watches,
            without_credentials: relaying,
        }),
        Ok(Err(e)) => Err(unreachable(one_line(&e))),
        Err(_) => Err(unreachable(format!("no answer in {timeout:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig with one context, `real`, pointing at `server`, in a directory of its own.
    fn kubeconfig_for(test: &str, server: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("confk8s-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}'}}\n\
                 users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: real\n  context: {{cluster: c, user: u}}\n\
                 current-context: real\n"
            ),
        )
        .unwrap();
        (dir, path)
    }

    #[tokio::test]
    async fn missing_kubeconfig_names_the_file() {
        let opts = ClientOptions {
            kubeconfig: Some("/nonexistent/k8sailor/kubeconfig".into()),
            ..Default::default()
        };
        let err = load_config(&opts).await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/k8sailor/kubeconfig"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[tokio::test]
    async fn unknown_context_names_file_and_context() {
        let (dir, path) = kubeconfig_for("context", "https://127.0.0.1:1");
        let opts = ClientOptions {
            kubeconfig: Some(path.clone()),
            context: Some("missing".into()),
            ..Default::default()
        };
        let err = load_config(&opts).await.unwrap_err().to_string();
        assert!(err.contains("\"missing\""), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");

        let (config, source) = load_config(&ClientOptions {
            kubeconfig: Some(path.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:1/");
        assert!(matches!(source, ConfigSource::Kubeconfig { context, .. } if context == "real"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn unreachable_apiserver_is_one_line() {
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        let (dir, path) = kubeconfig_for("unreachable", "http://127.0.0.1:1");
        let result = connect(&ClientOptions {
            kubeconfig: Some(path),
            connect_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        })
        .await;
        let Err(err) = result.map(|_| ()) else {
            panic!("nothing listens on 127.0.0.1:1, yet connect succeeded")
        };
        let err = err.to_string();
        assert!(err.contains("127.0.0.1:1"), "{err}");
        assert!(err.contains("not reachable"), "{err}");
        assert!(!err.contains('\n'));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
