//! The k8sailor binary: parses the command line, sets up logging and signals, and hands over
//! to the library. Nothing else happens here.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use k8sailor::apis::AuthMode;
use k8sailor::config::{LogFormat, Settings, SettingsLayer};
use k8sailor::k8sdao::SourceKind;
use tokio_util::sync::CancellationToken;

// glibc keeps the pages freed after a large list in per-thread arenas, so the resident size
// stays at the list's peak; mimalloc returns them, and fragments less under request churn.
// Built without transparent huge pages: a 2 MiB page holding one live record cannot be
// returned, and a cache's records are spread thinly over the pages its initial list used.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc returns freed pages to the OS only after a second (ten for whole arenas), and only
/// when the process allocates again, so the pages of the initial list stayed resident in an
/// idle server. The cache's steady state is what should be resident.
fn return_freed_memory_promptly() {
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}
const PURGE_DELAY_MS: std::ffi::c_long = 10;

#[derive(Parser)]
#[command(
    name = "k8sailor",
    version,
    about = "A read-cache HTTP API server for Kubernetes Deployments and Pods"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Watch the cluster into memory and serve the REST API.
    Httpserver(Box<HttpServerArgs>),
    /// Print the version.
    Version,
}

/// Every flag can also be set by its K8SAILOR_* variable or in the config file.
#[derive(Args)]
struct HttpServerArgs {
    /// YAML config file (see config/default.yaml for every key).
    #[arg(long, env = "K8SAILOR_CONFIG")]
    config: Option<PathBuf>,
    /// Kubeconfig file; default KUBECONFIG, ~/.kube/config, then in-cluster.
    #[arg(long, env = "K8SAILOR_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context; default its current-context.
    #[arg(long, env = "K8SAILOR_CONTEXT")]
    context: Option<String>,
    /// Listen address [default: 127.0.0.1:8088].
    #[arg(long, env = "K8SAILOR_LISTEN")]
    listen: Option<String>,
    /// Path prefix of the API [default: /k8sailor/v0].
    #[arg(long, env = "K8SAILOR_PREFIX")]
    prefix: Option<String>,
    /// Watch and serve this namespace only [default: all].
    #[arg(long, env = "K8SAILOR_NAMESPACE")]
    namespace: Option<String>,
    /// Where reads come from: cache or live [default: cache].
    #[arg(long, env = "K8SAILOR_SOURCE")]
    source: Option<SourceKind>,
    /// Longest wait for the caches to sync at start-up, e.g. 60s [default: 60s].
    #[arg(long, env = "K8SAILOR_SYNC_TIMEOUT")]
    sync_timeout: Option<String>,
    /// Longest time a request may take, e.g. 30s [default: 30s].
    #[arg(long, env = "K8SAILOR_REQUEST_TIMEOUT")]
    request_timeout: Option<String>,
    /// After SIGTERM, keep serving this long with /readyz failing [default: 0s].
    #[arg(long, env = "K8SAILOR_SHUTDOWN_DELAY")]
    shutdown_delay: Option<String>,
    /// Then, how long in-flight requests get to finish [default: 10s].
    #[arg(long, env = "K8SAILOR_SHUTDOWN_GRACE")]
    shutdown_grace: Option<String>,
    /// CORS origins, comma-separated: http://host:port, http://host:* (any port), or "*" for
    /// any, without credentials [default: the loopback origins on any port, http and https].
    #[arg(long, env = "K8SAILOR_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    cors_allowed_origins: Option<Vec<String>>,
    /// With auth none, Host names served besides loopback names and IP addresses,
    /// comma-separated: name, .domain (and every name under it), or "*" for any [default: none].
    #[arg(long, env = "K8SAILOR_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Option<Vec<String>>,
    /// Who may call the API: none (anyone who reaches the port) or delegated (a bearer token
    /// whose owner the cluster's RBAC allows each request) [default: none].
    #[arg(long, env = "K8SAILOR_AUTH")]
    auth: Option<AuthMode>,
    /// Serve with auth none on an address other hosts can reach (otherwise refused at start)
    /// [default: false].
    #[arg(
        long,
        env = "K8SAILOR_ALLOW_UNAUTHENTICATED",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    allow_unauthenticated: Option<bool>,
    /// With --auth delegated: TokenReviews per second for bearer tokens not in the cache;
    /// beyond it (and the burst) a new token gets 429 [default: 20].
    #[arg(long, env = "K8SAILOR_TOKEN_REVIEW_RATE")]
    token_review_rate: Option<u32>,
    /// TokenReviews allowed at once after a quiet spell [default: 40].
    #[arg(long, env = "K8SAILOR_TOKEN_REVIEW_BURST")]
    token_review_burst: Option<u32>,
    /// TokenReviews waiting for the apiserver at one time [default: 8].
    #[arg(long, env = "K8SAILOR_TOKEN_REVIEWS_IN_FLIGHT")]
    token_reviews_in_flight: Option<u32>,
    /// Log format: plain or json [default: plain]; levels from RUST_LOG.
    #[arg(long, env = "K8SAILOR_LOG_FORMAT")]
    log_format: Option<LogFormat>,
    /// Largest request body in bytes; larger is a 413 [default: 262144].
    #[arg(long, env = "K8SAILOR_MAX_BODY_BYTES")]
    max_body_bytes: Option<usize>,
    /// Longest time a request body may take to arrive; then 408 [default: 30s].
    #[arg(long, env = "K8SAILOR_BODY_READ_TIMEOUT")]
    body_read_timeout: Option<String>,
    /// Longest time from a connection's start, or from the first byte of a request, until
    /// the request's headers are complete; then the connection is closed [default: 10s].
    #[arg(long, env = "K8SAILOR_HEADER_READ_TIMEOUT")]
    header_read_timeout: Option<String>,
    /// How long a keep-alive connection may wait for its next request [default: 90s].
    #[arg(long, env = "K8SAILOR_IDLE_TIMEOUT")]
    idle_timeout: Option<String>,
    /// Most connections open at once; beyond it the longest-waiting connection without a
    /// request in progress is closed, or, if none, the new one [default: 1024].
    #[arg(long, env = "K8SAILOR_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
}

impl HttpServerArgs {
    fn settings(self) -> anyhow::Result<Settings> {
        let file = match &self.config {
            Some(path) => SettingsLayer::from_file(path)?,
            None => SettingsLayer::default(),
        };
        let flags = SettingsLayer {
            kubeconfig: self.kubeconfig,
            context: self.context,
            listen: self.listen,
            prefix: self.prefix,
            namespace: self.namespace,
            source: self.source,
            sync_timeout: self.sync_timeout,
            request_timeout: self.request_timeout,
            shutdown_delay: self.shutdown_delay,
            shutdown_grace: self.shutdown_grace,
            cors_allowed_origins: self.cors_allowed_origins,
            allowed_hosts: self.allowed_hosts,
            auth: self.auth,
            allow_unauthenticated: self.allow_unauthenticated,
            token_review_rate: self.token_review_rate,
            token_review_burst: self.token_review_burst,
            token_reviews_in_flight: self.token_reviews_in_flight,
            log_format: self.log_format,
            max_body_bytes: self.max_body_bytes,
            body_read_timeout: self.body_read_timeout,
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
        };
        Ok(Settings::resolve(flags.over(file))?)
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Cancels the token on Ctrl-C or SIGTERM.
fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {},
            _ = term => {},
        }
        tracing::info!("shutting down");
        token.cancel();
    });
}

async fn httpserver(args: HttpServerArgs) -> anyhow::Result<()> {
    let settings = args.settings()?;
    init_logging(settings.log_format);
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    k8sailor::server::run(settings, shutdown).await?;
    Ok(())
}

fn main() -> ExitCode {
    return_freed_memory_promptly();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Version => {
            println!("k8sailor {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Httpserver(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(httpserver(*args))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("k8sailor: {e:#}");
            ExitCode::FAILURE
        }
    }
}
