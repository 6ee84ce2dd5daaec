//! `k8sailor httpserver`: connect, start the informers, wait for the caches to sync, then
//! serve; on shutdown stop serving, then stop the watches.

use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use confk8s::{Policy, ReviewTtls, Reviewer};

use crate::config::Settings;
use crate::connections::ConnectionLimits;
use apis::{self, AppState, AuthMode};
use biz::Workloads;
use k8sdao::Source;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Client(#[from] confk8s::ClientError),
    #[error(transparent)]
    Informers(#[from] confk8s::FactoryError),
    #[error(transparent)]
    Setup(#[from] apis::SetupError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("serving failed: {0}")]
    Serve(std::io::Error),
    #[error("--auth delegated: {0}")]
    Auth(#[from] confk8s::ReviewError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

pub async fn run(settings: Settings, shutdown: CancellationToken) -> Result<(), ServerError> {
    crate::connections::ensure_file_descriptors(
        settings.connections.max_connections
            + settings.health_listen.map_or(0, |_| HEALTH_MAX_CONNECTIONS),
    );
    // Before connecting: a bad certificate file is a mistake to hear of at once.
    let tls = match settings.tls.clone() {
        Some(files) => Some(crate::tls::acceptor(files).await?),
        None => None,
    };
    let mut startup = apis::Startup::default();
    let mut phase = Instant::now();
    let mut took = move || {
        let now = Instant::now();
        std::mem::replace(&mut phase, now).elapsed()
    };
    let connection = confk8s::connect(&settings.client).await?;
    tracing::info!(config = %connection.source, source = ?settings.source, namespace = ?settings.namespace, "connected to the Kubernetes API");

    // The Kubernetes API's `/version` is the apiserver's, read once.
    let kube_version = match connection.client.apiserver_version().await {
        Ok(info) => Some(info),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the apiserver's version: /version will be 503");
            None
        }
    };
    startup.connect = took();
    let watches = CancellationToken::new();
    let (reviewer, policy_tasks) = match settings.http.auth {
        AuthMode::None => (None, Vec::new()),
        AuthMode::Delegated => {
            let reviewer = Reviewer::new(
                connection.client.clone(),
                ReviewTtls::with_token_ttl(settings.token_review_ttl),
            )
            .with_token_review_limits(settings.token_reviews);
            reviewer.check_own_access().await?;
            let (policy, tasks) = Policy::follow(
                connection.client.clone(),
                settings.namespace.clone(),
                settings.list_settings(),
                watches.clone(),
            )
            .await;
            (Some(Arc::new(reviewer.with_policy(policy))), tasks)
        }
    };

    startup.auth = took();
    let (source, mut watch_tasks) = Source::start(
        settings.source,
        connection,
        settings.namespace.clone(),
        settings.change_history,
        settings.list_settings(),
        &settings.resources,
        watches.clone(),
    )
    .await?;
    startup.start = took();
    watch_tasks.extend(policy_tasks);
    let stop_watches = || async {
        watches.cancel();
        futures::future::join_all(watch_tasks).await;
    };

    let synced = tokio::select! {
        synced = source.wait_until_synced(settings.sync_timeout) => synced,
        _ = shutdown.cancelled() => {
            stop_watches().await;
            return Ok(());
        }
    };
    if let Err(e) = synced {
        stop_watches().await;
        return Err(e.into());
    }
    startup.sync = took();
    for state in source.informer_states() {
        tracing::info!(kind = %state.kind, objects = state.objects, "cache synced");
    }

    let state = AppState::new(
        Arc::new(Workloads::new(source)),
        reviewer,
        settings.fair_shares,
        settings.watch_keep_alive,
        settings.kept_answer_bytes,
    );
    if let Some(version) = kube_version {
        state.keep_kube_version(&version);
    }
    let (health, streams) = (state.health.clone(), state.streams.clone());
    let connection_counts = state.fairness.connections.clone();
    let told = state.clone();
    let health_app = apis::health_router(state.clone(), &settings.http);
    let app = apis::router(state, &settings.http)?;
    let listener = bind(settings.listen).await?;
    let health_listener = match settings.health_listen {
        Some(addr) => Some(bind(addr).await?),
        None => None,
    };
    let addr = listener.local_addr().map_err(ServerError::Serve)?;
    startup.bind = took();
    tracing::info!(?startup, "started");
    told.metrics.keep_startup(startup);
    drop(told);
    // One plain line on stdout, for people and for scripts that start us on port 0.
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!(
        "k8sailor listening on {scheme}://{addr}{}",
        settings.http.prefix
    );
    tracing::info!(%addr, prefix = %settings.http.prefix, "serving");
    // Probes answer until the API's listener has drained: readiness fails meanwhile.
    let health_stop = CancellationToken::new();
    let health_served = match health_listener {
        Some(listener) => {
            let addr = listener.local_addr().map_err(ServerError::Serve)?;
            tracing::info!(%addr, "serving /livez, /readyz and /metrics");
            let limits = ConnectionLimits {
                max_connections: HEALTH_MAX_CONNECTIONS,
                ..settings.connections
            };
            let stop = health_stop.clone();
            // Plain HTTP: the kubelet's probes and scrapes stay on the pod's network.
            Some(tokio::spawn(crate::connections::serve(
                listener,
                None,
                health_app,
                limits,
                Arc::default(),
                async move { stop.cancelled().await },
            )))
        }
        None => None,
    };

    // On shutdown: fail readiness at once, keep serving for the delay while load balancers
    // take us out, then stop accepting, end the watch streams (their clients reconnect to
    // another replica) and let in-flight requests finish within the grace.
    let (delay, grace) = (settings.shutdown_delay, settings.shutdown_grace);
    let drain = {
        let (shutdown, health) = (shutdown.clone(), health.clone());
        async move {
            shutdown.cancelled().await;
            health.begin_shutdown();
            tracing::info!(?delay, ?grace, "shutting down: readiness fails now");
            tokio::time::sleep(delay).await;
            streams.cancel();
        }
    };
    let serve = crate::connections::serve(
        listener,
        tls,
        app,
        settings.connections,
        connection_counts,
        drain,
    );
    let served = tokio::select! {
        () = serve => Ok(()),
        _ = async { shutdown.cancelled().await; tokio::time::sleep(delay + grace).await } => {
            tracing::warn!(?grace, "requests still in flight at the end of the grace period; closing them");
            Ok(())
        }
    };
    health_stop.cancel();
    if let Some(health_served) = health_served {
        let _ = tokio::time::timeout(grace, health_served).await;
    }
    stop_watches().await;
    tracing::info!("stopped");
    served
}

/// Connections the probes' listener takes at once: the kubelet's probes and a few scrapes.
const HEALTH_MAX_CONNECTIONS: usize = 32;

async fn bind(addr: std::net::SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}
