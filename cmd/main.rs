//! The k8sailor binary: parses the command line, sets up logging and signals, and hands over
//! to the library. Nothing else happens here.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use k8sailor::config::{HttpServerArgs, LogFormat};
use tokio_util::sync::CancellationToken;

// glibc keeps the pages freed after a large list in per-thread arenas, so the resident size
// stays at the list's peak; mimalloc returns them, and fragments less under request churn.
// Built without transparent huge pages: a 2 MiB page holding one live record cannot be
// returned, and a cache's records are spread thinly over the pages its initial list used.
#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

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
    about = "A read-cache HTTP API server for Kubernetes workloads and what routes to them"
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

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_wanted())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Colour codes belong on a terminal: in a file or a pipe (`hack/run > log`, a log collector)
/// they are noise. NO_COLOR (no-color.org) turns them off on a terminal too.
fn colour_wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
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
