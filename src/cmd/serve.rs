//! `rudder serve`: the daemon.

use crate::admin::{AdminState, router};
use crate::metrics::Metrics;
use crate::source::file::FileSource;
use crate::store::Store;
use crate::xds::context::MeshSettings;
use crate::xds::push::{self, Debounce};
use crate::xds::server::{AdsService, XdsShared};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Directory of Istio YAML to serve (watched for changes).
    #[arg(long, env = "RUDDER_CONFIG_DIR", default_value = "examples")]
    pub config_dir: PathBuf,
    /// Namespace for objects that do not name one.
    #[arg(long, default_value = "default")]
    pub default_namespace: String,
    /// Metrics and debug HTTP address (istiod: 15014).
    #[arg(long, default_value = "0.0.0.0:15014")]
    pub monitoring_addr: SocketAddr,
    /// Plaintext xDS (ADS) gRPC address (istiod: 15010).
    #[arg(long, default_value = "0.0.0.0:15010")]
    pub grpc_addr: SocketAddr,
    /// Readiness and debug HTTP address (istiod: 8080).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
    /// Quiet period before a burst of file changes is applied.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub file_debounce: Duration,
    /// Full rescan of the config directory, in case a file event is lost.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub file_resync: Duration,
    /// Quiet period before config changes are pushed (istiod: PILOT_DEBOUNCE_AFTER).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub debounce_after: Duration,
    /// Longest a change waits for the quiet period (istiod: PILOT_DEBOUNCE_MAX).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub debounce_max: Duration,
    /// Proxies pushed to at once (istiod: PILOT_PUSH_THROTTLE).
    #[arg(long, default_value_t = 100)]
    pub push_concurrency: usize,
    /// DNS suffix of Kubernetes services.
    #[arg(long, default_value = "cluster.local")]
    pub domain_suffix: String,
    /// How long shutdown waits for tasks to finish.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain_duration: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::config::common::parse_go_duration(s)
}

async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} for {what}: {e}"))?;
    // Tests bind port 0 and read the real address from this line.
    info!(server = what, addr = %listener.local_addr()?, "listening");
    Ok(listener)
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let store = Arc::new(Store::default());
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();

    let mut file_source = FileSource::new(
        &args.config_dir,
        &args.default_namespace,
        store.clone(),
        metrics.clone(),
    );
    let grpc_listener = bind(args.grpc_addr, "grpc-xds").await?;
    let events = file_source.sync();
    info!(dir = %args.config_dir.display(), objects = store.snapshot().len(), events, "initial config loaded");

    let mesh = MeshSettings {
        domain_suffix: args.domain_suffix.clone(),
        ..Default::default()
    };
    let xds = XdsShared::new(
        push::initial_context(&store, &mesh),
        metrics.clone(),
        args.push_concurrency,
        cancel.clone(),
    );
    let state = AdminState {
        store: store.clone(),
        metrics: metrics.clone(),
        sources: file_source.status_handle(),
        ready: ready.clone(),
        xds: Some(xds.clone()),
    };
    for (addr, what) in [
        (args.monitoring_addr, "monitoring"),
        (args.http_addr, "http"),
    ] {
        let listener = bind(addr, what).await?;
        let app = router(state.clone());
        let stop = cancel.clone();
        tasks.spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
            {
                warn!(server = what, error = %e, "HTTP server failed");
            }
        });
    }

    {
        let debounce = Debounce {
            quiet: args.debounce_after,
            max: args.debounce_max,
        };
        tasks.spawn(push::run(
            store.clone(),
            xds.clone(),
            mesh,
            debounce,
            metrics.clone(),
            cancel.clone(),
        ));
        let ads = AdsService::new(xds.clone()).into_server();
        let stop = cancel.clone();
        tasks.spawn(async move {
            let served = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(30)))
                .add_service(ads)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
                    stop.cancelled_owned(),
                )
                .await;
            if let Err(e) = served {
                warn!(error = %e, "xDS gRPC server failed");
            }
        });
    }
    ready.store(true, Ordering::Release);
    tasks.spawn(file_source.run(cancel.clone(), args.file_debounce, args.file_resync));
    tasks.close();

    shutdown_signal().await;
    info!("shutting down");
    cancel.cancel();
    if tokio::time::timeout(args.drain_duration, tasks.wait())
        .await
        .is_err()
    {
        warn!(drain = ?args.drain_duration, "tasks did not stop within the drain duration");
    }
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
