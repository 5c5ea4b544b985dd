//! `rudder serve`: the daemon.

use crate::admin::{AdminState, router};
use crate::ca::auth::TokenAuthority;
use crate::ca::material::{self, Ttls};
use crate::ca::server::CaService;
use crate::k8s::leader::LeaderElection;
use crate::metrics::{Metrics, Registry};
use crate::model::mesh::MeshSettings;
use crate::source::file::FileSource;
use crate::source::kube::controller::{KubeSource, KubeSourceConfig, Readiness};
use crate::store::Store;
use crate::webhook::WebhookState;
use crate::webhook::cabundle::CaBundlePatcher;
use crate::webhook::inject::{Injector, InjectorSettings};
use crate::xds::push::{self, Debounce};
use crate::xds::server::status::XdsStatus;
use crate::xds::server::{AdsService, XdsLimits, XdsServer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// `--debug-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DebugAuth {
    Token,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigSource {
    /// Kubernetes when a kubeconfig or in-cluster config is present, files otherwise.
    Auto,
    Files,
    Kubernetes,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Where config comes from.
    #[arg(long, value_enum, default_value = "auto")]
    pub config_source: ConfigSource,
    /// Directory of Istio YAML to serve (watched for changes), in files mode.
    #[arg(long, env = "RUDDER_CONFIG_DIR", default_value = "examples")]
    pub config_dir: PathBuf,
    /// Files mode: a MeshConfig file (istiod's `--meshConfig`), read as ConfigMap `istio` of the
    /// root namespace and followed as it changes.
    #[arg(long, env = "RUDDER_MESH_CONFIG")]
    pub mesh_config: Option<PathBuf>,
    /// Kubeconfig to use in Kubernetes mode (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace for objects that do not name one (files mode).
    #[arg(long, default_value = "default")]
    pub default_namespace: String,
    /// Istio's root namespace: mesh ConfigMap `istio`, mesh-wide Sidecar, the leader lease.
    #[arg(long, default_value = "istio-system")]
    pub system_namespace: String,
    /// Leader-election lease name (in the system namespace).
    #[arg(long, default_value = "rudder-leader")]
    pub lease_name: String,
    /// How long a leader may go without renewing before another replica takes over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How often the lease is renewed (or its acquisition tried).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub lease_renew: Duration,
    /// Plaintext xDS (ADS) gRPC address (istiod: 15010).
    #[arg(long, default_value = "0.0.0.0:15010")]
    pub grpc_addr: SocketAddr,
    /// TLS gRPC address for xDS and the CA (istiod: 15012).
    #[arg(long, default_value = "0.0.0.0:15012")]
    pub secure_grpc_addr: SocketAddr,
    /// SPIFFE trust domain (MeshConfig `trustDomain` overrides it in Kubernetes mode).
    #[arg(long, default_value = "cluster.local")]
    pub trust_domain: String,
    /// Files mode: the CA's directory (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem); a
    /// self-signed root is generated there when it is empty.
    #[arg(long, default_value = ".rudder/ca")]
    pub ca_dir: PathBuf,
    /// Files mode: YAML mapping of bearer tokens to `namespace/serviceaccount`, for CA callers.
    #[arg(long)]
    pub ca_token_file: Option<PathBuf>,
    /// Service accounts (`namespace/name`, comma-separated) that may ask for the certificates of
    /// the pods on their own node (node-mode ztunnel), as istiod's CA_TRUSTED_NODE_ACCOUNTS;
    /// default `<system namespace>/ztunnel` (what istiod's chart sets); empty: nobody.
    #[arg(long, env = "CA_TRUSTED_NODE_ACCOUNTS")]
    pub ca_trusted_node_accounts: Option<String>,
    /// An external CA signs workload certificates instead of Rudder's own: only
    /// `ISTIOD_RA_KUBERNETES_API` (the Kubernetes CSR API, with `--k8s-signer`), as istiod's EXTERNAL_CA.
    #[arg(long, env = "EXTERNAL_CA")]
    pub external_ca: Option<String>,
    /// The signer name CSRs are addressed to with an external CA (istiod's K8S_SIGNER).
    #[arg(long, env = "K8S_SIGNER")]
    pub k8s_signer: Option<String>,
    /// The external CA's root (PEM), what proxies are told to trust; where istiod's chart mounts
    /// it. When the file is missing, the service account's `ca.crt`, as istiod.
    #[arg(long, default_value = crate::ca::external::DEFAULT_ROOT_FILE)]
    pub external_ca_root: PathBuf,
    /// Lifetime of a self-signed root, new or renewed (istiod's CITADEL_SELF_SIGNED_CA_CERT_TTL).
    #[arg(long, default_value = "87600h", value_parser = parse_duration, env = "CITADEL_SELF_SIGNED_CA_CERT_TTL")]
    pub self_signed_root_ttl: Duration,
    /// Kubernetes mode: how often each replica checks the self-signed root in `istio-ca-secret`
    /// (istiod's CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL).
    #[arg(long, default_value = "1h", value_parser = parse_duration, env = "CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL")]
    pub self_signed_root_check_interval: Duration,
    /// A self-signed root is renewed (same key) once less than this percentage of its life is left
    /// (istiod's CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100), env = "CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE")]
    pub self_signed_root_grace_percent: u32,
    /// Who may use `/debug` on the monitoring and HTTP ports from elsewhere than localhost:
    /// `token` (as istiod: a bearer token of a service account in the system namespace) or `none`
    /// (anyone: only where the ports are not reachable from the mesh).
    #[arg(long, value_enum, default_value = "token", env = "RUDDER_DEBUG_AUTH")]
    pub debug_auth: DebugAuth,
    /// Workload certificate lifetime when the request names none.
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub workload_cert_ttl: Duration,
    /// Longest workload certificate lifetime granted.
    #[arg(long, default_value = "2160h", value_parser = parse_duration)]
    pub max_workload_cert_ttl: Duration,
    /// Names in the serving certificate of the TLS and webhook ports (127.0.0.1 is always included;
    /// IP addresses listed here become IP SANs).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "istiod.istio-system.svc,istiod.istio-system.svc.cluster.local,rudder.istio-system.svc"
    )]
    pub serving_dns_names: Vec<String>,
    /// Metrics and debug HTTP address (istiod: 15014).
    #[arg(long, default_value = "0.0.0.0:15014")]
    pub monitoring_addr: SocketAddr,
    /// ControlZ address (istiod's `--ctrlz_address`/`--ctrlz_port`: loopback, 9876): log levels
    /// by scope for `istioctl admin log`; `none` to not serve it.
    #[arg(long, default_value = "127.0.0.1:9876", value_parser = parse_optional_addr)]
    pub ctrlz_addr: OptionalAddr,
    /// Readiness and debug HTTP address (istiod: 8080).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
    /// Quiet period before a burst of file changes is applied.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub file_debounce: Duration,
    /// Longest a file change waits for the quiet period: a file rewritten without pause does not
    /// hold back the others.
    #[arg(long, default_value = "1s", value_parser = parse_duration, env = "RUDDER_FILE_DEBOUNCE_MAX")]
    pub file_debounce_max: Duration,
    /// Full rescan of the config directory, in case a file event is lost.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub file_resync: Duration,
    /// Quiet period before config changes are pushed (istiod: PILOT_DEBOUNCE_AFTER).
    #[arg(long, default_value = "100ms", value_parser = parse_duration, env = "PILOT_DEBOUNCE_AFTER")]
    pub debounce_after: Duration,
    /// Longest a change waits for the quiet period (istiod: PILOT_DEBOUNCE_MAX).
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "PILOT_DEBOUNCE_MAX")]
    pub debounce_max: Duration,
    /// Whether changes to endpoints alone wait for the debounce like config changes (istiod:
    /// PILOT_ENABLE_EDS_DEBOUNCE); false pushes them as they come.
    #[arg(long, env = "PILOT_ENABLE_EDS_DEBOUNCE", default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_eds_debounce: bool,
    /// Proxies pushed to at once (istiod: PILOT_PUSH_THROTTLE); 0: the default.
    #[arg(long, default_value_t = 100, env = "PILOT_PUSH_THROTTLE")]
    pub push_concurrency: usize,
    /// DNS suffix of Kubernetes services.
    #[arg(long, default_value = "cluster.local")]
    pub domain_suffix: String,
    /// HTTPS admission webhooks: /validate, /inject, /ready (istiod: 15017).
    #[arg(long, default_value = "0.0.0.0:15017")]
    pub https_addr: SocketAddr,
    /// This control plane's revision: injected pods' `istio.io/rev`, namespaces labelled
    /// `istio.io/rev=<revision>` are injected, webhook configurations labelled with it get our caBundle.
    #[arg(long, default_value = "default", env = "REVISION")]
    pub revision: String,
    /// Revision tags pointing at this revision (comma-separated): namespaces and pods labelled
    /// `istio.io/rev=<tag>` are injected as if they named the revision.
    #[arg(long, value_delimiter = ',', env = "REVISION_TAGS")]
    pub revision_tags: Vec<String>,
    /// Address injected proxies dial for xDS and certificates (default: istiod.<system-namespace>.svc:15012).
    #[arg(long)]
    pub discovery_address: Option<String>,
    /// Cluster id injected proxies report (ISTIO_META_CLUSTER_ID).
    #[arg(long, default_value = "Kubernetes")]
    pub cluster_id: String,
    /// Longest a push waits for a proxy to read; a proxy that stops reading is dropped after it.
    #[arg(long, default_value = "20s", value_parser = parse_duration, env = "RUDDER_XDS_SEND_TIMEOUT")]
    pub xds_send_timeout: Duration,
    /// New xDS streams accepted per second, both gRPC ports together (istiod:
    /// PILOT_MAX_REQUESTS_PER_SECOND); 0: automatic, 500 per CPU core (docs/decisions.md).
    #[arg(long, default_value_t = 0, env = "PILOT_MAX_REQUESTS_PER_SECOND")]
    pub max_requests_per_second: u32,
    /// gRPC ports: a connection without a stream, or a stream without its first request, for
    /// this long is closed.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "RUDDER_XDS_IDLE_TIMEOUT")]
    pub xds_idle_timeout: Duration,
    /// gRPC ports: a new connection that has not opened its first stream (TLS handshake and
    /// HTTP/2 preface included) within this long is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "RUDDER_XDS_FIRST_STREAM_TIMEOUT")]
    pub xds_first_stream_timeout: Duration,
    /// gRPC ports: connections without a stream yet that one source address may hold (loopback
    /// exempt); more are closed at accept. 0: no bound.
    #[arg(long, default_value_t = 64, env = "RUDDER_XDS_MAX_PENDING_PER_SOURCE")]
    pub xds_max_pending_per_source: usize,
    /// Names one xDS stream may subscribe to per type; a stream asking for more is ended with
    /// RESOURCE_EXHAUSTED.
    #[arg(
        long,
        default_value_t = 100_000,
        env = "RUDDER_XDS_MAX_SUBSCRIBED_NAMES"
    )]
    pub xds_max_subscribed_names: usize,
    /// Of the names one xDS stream subscribes to per type, how many may match no resource the
    /// proxy can get (a proxy asks for what it was told exists); past it the stream is ended.
    #[arg(long, default_value_t = 1_000, env = "RUDDER_XDS_MAX_UNKNOWN_NAMES")]
    pub xds_max_unknown_names: usize,
    /// Longest a new xDS stream waits, before its first response, for pushes already under way
    /// to connected proxies; 0: no wait. Connected proxies' updates go first, so clients that
    /// connect in a loop cannot delay them.
    #[arg(long, default_value = "500ms", value_parser = parse_duration, env = "RUDDER_XDS_NEW_STREAM_WAIT")]
    pub xds_new_stream_wait: Duration,
    /// Largest gRPC request accepted on the xDS and CA ports, in bytes (istiod: 4 MiB).
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "ISTIO_GPRC_MAXRECVMSGSIZE")]
    pub max_grpc_message_size: usize,
    /// Concurrent gRPC streams allowed on one client connection.
    #[arg(long, default_value_t = 1024, env = "ISTIO_GPRC_MAXSTREAMS")]
    pub max_concurrent_streams: u32,
    /// Connections older than this are asked to reconnect (GOAWAY), rebalancing proxies across
    /// replicas (istiod: 30m).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub keepalive_max_server_connection_age: Duration,
    /// After the GOAWAY of an aged connection, how long its streams may finish before it is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub keepalive_max_server_connection_age_grace: Duration,
    /// HTTP/2 keepalive (istiod: 30s): ping after this much silence; a client from which nothing
    /// arrives within the keepalive timeout after it (the ping's answer or any other frame) is
    /// dropped.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub keepalive_interval: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub keepalive_timeout: Duration,
    /// Webhook port: request body bytes held at once, all callers together; past it, 503.
    #[arg(long, default_value_t = 64 * 1024 * 1024, env = "RUDDER_WEBHOOK_MAX_INFLIGHT_BYTES")]
    pub webhook_max_inflight_bytes: usize,
    /// Webhook port: reviews decoded and judged at once; others wait up to 5 s, then 503.
    #[arg(
        long,
        default_value_t = 4,
        env = "RUDDER_WEBHOOK_MAX_CONCURRENT_REVIEWS"
    )]
    pub webhook_max_concurrent_reviews: usize,
    /// Webhook port: JSON values in one review (each costs a decoded value); more is refused, 413.
    #[arg(
        long,
        default_value_t = 500_000,
        env = "RUDDER_WEBHOOK_MAX_JSON_VALUES"
    )]
    pub webhook_max_json_values: usize,
    /// Webhook port: longest a request body may take to arrive; past it, 408.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "RUDDER_WEBHOOK_BODY_TIMEOUT")]
    pub webhook_body_timeout: Duration,
    /// Webhook port: a connection without a request in flight for this long is closed.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "RUDDER_WEBHOOK_IDLE_TIMEOUT")]
    pub webhook_idle_timeout: Duration,
    /// Monitoring and HTTP ports (15014, 8080): a connection without a request in flight (a
    /// caller trickling a request's headers included) for this long is closed.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "RUDDER_HTTP_IDLE_TIMEOUT")]
    pub http_idle_timeout: Duration,
    /// How long shutdown waits for tasks to finish.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain_duration: Duration,
    /// Kubernetes mode: analyze Istio config across objects and write the findings into each
    /// object's `status.validationMessages` (leader only), as istiod's PILOT_ENABLE_ANALYSIS.
    #[arg(long, env = "PILOT_ENABLE_ANALYSIS", default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_analysis: bool,
    /// Time between full analyses; under 1s means the default (istiod's PILOT_ANALYSIS_INTERVAL).
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "PILOT_ANALYSIS_INTERVAL")]
    pub analysis_interval: Duration,
    /// An ambient install (the chart's `profile: ambient`): ambient's status conditions are
    /// written, as istiod's. ztunnel is served either way.
    #[arg(long, env = "PILOT_ENABLE_AMBIENT", default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_ambient: bool,
    /// Kubernetes mode, ambient installs: the leader writes `istio.io/WaypointBound` on Services,
    /// ServiceEntries and WorkloadEntries and `ZtunnelAccepted` on AuthorizationPolicies, as
    /// istiod's AMBIENT_ENABLE_STATUS.
    #[arg(long, env = "AMBIENT_ENABLE_STATUS", default_value_t = true, action = clap::ArgAction::Set)]
    pub ambient_status: bool,
    /// Most status writes per second, so analysis never floods the API server.
    #[arg(long, default_value_t = 20, env = "RUDDER_STATUS_QPS")]
    pub status_writes_per_second: u32,
}

/// The bounds on clients, as `/debug/limitz` shows them (docs/reliability.md explains each).
fn limits(args: &ServeArgs) -> Vec<crate::metrics::Limit> {
    use crate::metrics::Limit;
    let rate = request_limit(args);
    vec![
        Limit {
            name: "new xDS streams per second",
            setting: "--max-requests-per-second, PILOT_MAX_REQUESTS_PER_SECOND",
            value: rate.to_string(),
            refused_series: "rudder_xds_errors_total{reason=\"rate_limited\"}",
        },
        Limit {
            name: "xDS response wait for a client that does not read",
            setting: "--xds-send-timeout",
            value: format!("{:?}", args.xds_send_timeout),
            refused_series: "rudder_xds_errors_total{reason=\"send_timeout\"}",
        },
        Limit {
            name: "gRPC request size",
            setting: "--max-grpc-message-size",
            value: args.max_grpc_message_size.to_string(),
            refused_series: "rudder_xds_errors_total{reason=\"message_too_large\"}",
        },
        Limit {
            name: "names subscribed per stream and type",
            setting: "--xds-max-subscribed-names, RUDDER_XDS_MAX_SUBSCRIBED_NAMES",
            value: args.xds_max_subscribed_names.to_string(),
            refused_series: "rudder_xds_errors_total{reason=\"too_many_names\"}",
        },
        Limit {
            name: "names subscribed per stream and type that match nothing",
            setting: "--xds-max-unknown-names, RUDDER_XDS_MAX_UNKNOWN_NAMES",
            value: args.xds_max_unknown_names.to_string(),
            refused_series: "rudder_xds_errors_total{reason=\"too_many_unknown_names\"}",
        },
        Limit {
            name: "gRPC connection without a stream",
            setting: "--xds-idle-timeout, RUDDER_XDS_IDLE_TIMEOUT",
            value: format!("{:?}", args.xds_idle_timeout),
            refused_series: "rudder_xds_errors_total{reason=\"idle_connection\"}",
        },
        Limit {
            name: "gRPC connection without its first stream (handshake, preface)",
            setting: "--xds-first-stream-timeout, RUDDER_XDS_FIRST_STREAM_TIMEOUT",
            value: format!("{:?}", args.xds_first_stream_timeout),
            refused_series: "rudder_xds_errors_total{reason=\"first_stream_timeout\"}",
        },
        Limit {
            name: "gRPC connections without a stream yet, per source address (loopback exempt)",
            setting: "--xds-max-pending-per-source, RUDDER_XDS_MAX_PENDING_PER_SOURCE",
            value: args.xds_max_pending_per_source.to_string(),
            refused_series: "rudder_xds_errors_total{reason=\"too_many_pending_connections\"}",
        },
        Limit {
            name: "gRPC connection from which nothing arrives (keepalive)",
            setting: "--keepalive-interval + --keepalive-timeout",
            value: format!("{:?}", keepalive_silence(args)),
            refused_series: "rudder_xds_errors_total{reason=\"keepalive_timeout\"}",
        },
        Limit {
            name: "xDS stream without its first request",
            setting: "--xds-idle-timeout, RUDDER_XDS_IDLE_TIMEOUT",
            value: format!("{:?}", args.xds_idle_timeout),
            refused_series: "rudder_xds_errors_total{reason=\"first_request_timeout\"}",
        },
        Limit {
            name: "new xDS stream's wait for pushes under way (connected proxies go first)",
            setting: "--xds-new-stream-wait, RUDDER_XDS_NEW_STREAM_WAIT",
            value: format!("{:?}", args.xds_new_stream_wait),
            refused_series: "rudder_xds_new_stream_waits_total",
        },
        Limit {
            name: "NACK log lines per stream (one per 10 s, text cut to 1 KiB)",
            setting: "fixed",
            value: "1 per 10s".into(),
            refused_series: "rudder_xds_errors_total{reason=\"nack_log_suppressed\"}",
        },
        Limit {
            name: "webhook body bytes in flight",
            setting: "--webhook-max-inflight-bytes, RUDDER_WEBHOOK_MAX_INFLIGHT_BYTES",
            value: args.webhook_max_inflight_bytes.to_string(),
            refused_series: "rudder_webhook_refused_total{reason=\"bytes_in_flight\"}",
        },
        Limit {
            name: "webhook reviews judged at once, per lane",
            setting: "--webhook-max-concurrent-reviews, RUDDER_WEBHOOK_MAX_CONCURRENT_REVIEWS",
            value: args.webhook_max_concurrent_reviews.to_string(),
            refused_series: "rudder_webhook_refused_total{reason=\"busy\"}",
        },
        Limit {
            name: "JSON values per review",
            setting: "--webhook-max-json-values, RUDDER_WEBHOOK_MAX_JSON_VALUES",
            value: args.webhook_max_json_values.to_string(),
            refused_series: "rudder_webhook_refused_total{reason=\"too_many_json_values\"}",
        },
        Limit {
            name: "webhook body arrival",
            setting: "--webhook-body-timeout, RUDDER_WEBHOOK_BODY_TIMEOUT",
            value: format!("{:?}", args.webhook_body_timeout),
            refused_series: "rudder_webhook_refused_total{reason=\"body_timeout\"}",
        },
        Limit {
            name: "monitoring and HTTP ports' connection without a request in flight (slowloris)",
            setting: "--http-idle-timeout, RUDDER_HTTP_IDLE_TIMEOUT",
            value: format!("{:?}", args.http_idle_timeout),
            refused_series: "rudder_http_connections_closed_total{server=\"monitoring\",reason=\"idle\"}",
        },
        Limit {
            name: "webhook connection without a request in flight",
            setting: "--webhook-idle-timeout, RUDDER_WEBHOOK_IDLE_TIMEOUT",
            value: format!("{:?}", args.webhook_idle_timeout),
            refused_series: "rudder_http_connections_closed_total{server=\"webhook\",reason=\"idle\"}",
        },
        Limit {
            name: "config paths leading somewhere already read (symlink loops)",
            setting: "fixed",
            value: "each directory and file once".into(),
            refused_series: "rudder_config_file_errors_total{reason=\"repeated_path\"}",
        },
    ]
}

/// New xDS streams per second: as set, or when 0, 500 per core. A new stream costs its first full
/// generation; at this rate a reconnect storm keeps part of the CPU for the streams already there.
fn request_limit(args: &ServeArgs) -> u32 {
    if args.max_requests_per_second > 0 {
        return args.max_requests_per_second;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores * 500).unwrap_or(u32::MAX)
}

/// The mesh ConfigMap istiod's chart writes for `revision`: `istio` for the default revision,
/// `istio-<revision>` for another.
pub fn mesh_configmap(revision: &str) -> String {
    if revision.is_empty() || revision == "default" {
        crate::config::mesh::MESH_CONFIGMAP.to_string()
    } else {
        format!("{}-{revision}", crate::config::mesh::MESH_CONFIGMAP)
    }
}

/// A listen address, or none (`none` on the command line).
#[derive(Debug, Clone, Copy)]
pub struct OptionalAddr(pub Option<SocketAddr>);

fn parse_optional_addr(s: &str) -> Result<OptionalAddr, String> {
    if s == "none" {
        return Ok(OptionalAddr(None));
    }
    s.parse()
        .map(|a| OptionalAddr(Some(a)))
        .map_err(|e| format!("{s:?}: {e}"))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::config::common::parse_go_duration(s)
}

/// The CA as configured: who signs, the trust bundle everything distributes, and the control
/// plane's own serving certificate.
struct CaSetup {
    signer: crate::ca::Signer,
    /// Rudder's own CA (none with an external CA).
    local: Option<Arc<crate::ca::shared::SharedAuthority>>,
    source: Option<material::CaSource>,
    roots: tokio::sync::watch::Receiver<Arc<str>>,
    /// Keeps an external CA's (fixed) trust bundle open for its followers.
    _fixed_roots: Option<tokio::sync::watch::Sender<Arc<str>>>,
    certificates: Arc<dyn crate::model::identity::WorkloadCertificates>,
    serving: (Vec<String>, String),
}

async fn ca_setup(
    args: &ServeArgs,
    kube_client: Option<&kube::Client>,
    trust_domain: &str,
    ttls: Ttls,
    (dns_names, ips): (&[String], &[std::net::IpAddr]),
    metrics: &DaemonMetrics,
) -> anyhow::Result<CaSetup> {
    let serving_ttl = Duration::from_secs(365 * 86400);
    if let Some(kind) = &args.external_ca {
        if kind != crate::ca::external::KUBERNETES_RA {
            anyhow::bail!(
                "EXTERNAL_CA={kind}: the only external CA is {} (the Kubernetes CSR API)",
                crate::ca::external::KUBERNETES_RA
            );
        }
        let client = kube_client
            .ok_or_else(|| anyhow::anyhow!("EXTERNAL_CA needs Kubernetes mode (the CSR API)"))?;
        let signer = args
            .k8s_signer
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| anyhow::anyhow!("EXTERNAL_CA needs K8S_SIGNER, the signer to ask"))?;
        let root_file = if args.external_ca_root.exists() {
            args.external_ca_root.clone()
        } else {
            let dir = std::env::var_os(crate::k8s::SERVICE_ACCOUNT_DIR_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| crate::k8s::SERVICE_ACCOUNT_DIR.into());
            info!(missing = %args.external_ca_root.display(), "external CA root not mounted; using the service account's ca.crt, as istiod");
            dir.join("ca.crt")
        };
        let root_pem = std::fs::read_to_string(&root_file)
            .map_err(|e| anyhow::anyhow!("external CA root {}: {e}", root_file.display()))?;
        if !root_pem.contains("BEGIN CERTIFICATE") {
            anyhow::bail!(
                "external CA root {} holds no certificate",
                root_file.display()
            );
        }
        metrics
            .ca
            .root_cert_expiry
            .set(crate::ca::not_after(&root_pem));
        let ra = Arc::new(crate::ca::external::KubernetesRa {
            client: client.clone(),
            signer: signer.clone(),
            root_pem: root_pem.clone(),
            default_ttl: ttls.default,
            max_ttl: ttls.max,
        });
        let serving = ra.serving_cert(dns_names, ips, serving_ttl).await?;
        info!(signer, root = %root_file.display(), "CA: workload certificates are signed by an external CA through the Kubernetes CSR API");
        let bundle: Arc<str> = Arc::from(root_pem.as_str());
        let (fixed, roots) = tokio::sync::watch::channel(bundle.clone());
        return Ok(CaSetup {
            signer: crate::ca::Signer::External(ra),
            local: None,
            source: None,
            roots,
            _fixed_roots: Some(fixed),
            certificates: Arc::new(crate::ca::issuer::ExternalRoots { root_pem: bundle }),
            serving,
        });
    }
    let (authority, source) = match kube_client {
        Some(client) => {
            let (authority, source) = material::from_kubernetes(
                client.clone(),
                &args.system_namespace,
                trust_domain,
                ttls,
            )
            .await?;
            (authority, Some(source))
        }
        None => (material::from_dir(&args.ca_dir, trust_domain, ttls)?, None),
    };
    let (root_expiry, chain_expiry) = authority.expiry_timestamps();
    metrics.ca.root_cert_expiry.set(root_expiry);
    metrics.ca.cert_chain_expiry.set(chain_expiry);
    let serving = authority.serving_cert(dns_names, ips, serving_ttl)?;
    let authority = crate::ca::shared::SharedAuthority::new(authority);
    Ok(CaSetup {
        signer: crate::ca::Signer::Local(authority.clone()),
        roots: authority.roots(),
        _fixed_roots: None,
        certificates: Arc::new(crate::ca::issuer::WorkloadIssuer::new(authority.clone())),
        local: Some(authority),
        source,
        serving,
    })
}

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

/// How long a gRPC connection may send nothing: a ping after the keepalive interval, then the
/// keepalive timeout for anything to arrive.
fn keepalive_silence(args: &ServeArgs) -> Duration {
    args.keepalive_interval
        .saturating_add(args.keepalive_timeout)
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

fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "rudder".into());
        format!("{host}-{}", std::process::id())
    })
}

/// Every module's metrics, registered in one registry (what `/metrics` renders).
pub struct DaemonMetrics {
    pub registry: Arc<Metrics>,
    pub file: Arc<crate::source::metrics::FileMetrics>,
    pub kube: Arc<crate::source::metrics::KubeMetrics>,
    pub leader: Arc<crate::k8s::metrics::LeaderMetrics>,
    pub xds: Arc<crate::xds::metrics::XdsMetrics>,
    pub ca: Arc<crate::ca::metrics::CaMetrics>,
    pub webhook: Arc<crate::webhook::metrics::WebhookMetrics>,
    pub status: Arc<crate::analysis::status::StatusMetrics>,
    /// Connections the HTTP ports closed themselves, by server and reason.
    pub http_closed: prometheus_client::metrics::family::Family<
        crate::metrics::ServerReasonLabels,
        prometheus_client::metrics::counter::Counter,
    >,
}

impl DaemonMetrics {
    /// What an HTTP port calls when it closes a connection itself (a deadline passed).
    pub fn http_closed(&self, server: &'static str) -> crate::activity::http::OnClose {
        let family = self.http_closed.clone();
        Arc::new(move |reason| {
            family
                .get_or_create(&crate::metrics::ServerReasonLabels {
                    server: server.into(),
                    reason: reason.into(),
                })
                .inc();
        })
    }

    /// `xds` is set once the xDS server has started: the per-proxy gauges read it.
    pub fn register(store: Arc<Store>, xds: Arc<OnceLock<XdsStatus>>) -> DaemonMetrics {
        let mut r = Registry::new();
        crate::source::metrics::UnhonouredFields::register(&mut r, store);
        r.register_collector(
            &["pilot_no_ip", "pilot_endpoint_not_ready"],
            Box::new(crate::xds::server::status::ProxyEndpointGauges { status: xds }),
        );
        let file = Arc::new(crate::source::metrics::FileMetrics::register(&mut r));
        let kube = Arc::new(crate::source::metrics::KubeMetrics::register(&mut r));
        let leader = Arc::new(crate::k8s::metrics::LeaderMetrics::register(&mut r));
        let xds = Arc::new(crate::xds::metrics::XdsMetrics::register(&mut r));
        let ca = Arc::new(crate::ca::metrics::CaMetrics::register(&mut r));
        let webhook = Arc::new(crate::webhook::metrics::WebhookMetrics::register(&mut r));
        let status = Arc::new(crate::analysis::status::StatusMetrics::register(&mut r));
        let http_closed = r.register(
            "rudder_http_connections_closed",
            "Connections the HTTP ports (monitoring, http, webhook) closed because a deadline passed (idle: no request in flight, a trickled request's headers included; handshake_timeout)",
            prometheus_client::metrics::family::Family::default(),
        );
        // istiod's build info: dashboards track rollouts by it.
        let build = r.register(
            "istio_build",
            "Build info of the control plane (component, tag)",
            prometheus_client::metrics::family::Family::<
                crate::metrics::BuildLabels,
                prometheus_client::metrics::gauge::Gauge,
            >::default(),
        );
        build
            .get_or_create(&crate::metrics::BuildLabels {
                component: "pilot".into(),
                tag: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        r.register(
            "pilot_info",
            "Control-plane version",
            prometheus_client::metrics::family::Family::<
                crate::xds::metrics::VersionLabels,
                prometheus_client::metrics::gauge::Gauge,
            >::default(),
        )
        .get_or_create(&crate::xds::metrics::VersionLabels {
            version: concat!("rudder-", env!("CARGO_PKG_VERSION")).into(),
        })
        .set(1);
        DaemonMetrics {
            registry: Arc::new(r.finish()),
            file,
            kube,
            leader,
            xds,
            ca,
            webhook,
            status,
            http_closed,
        }
    }
}

/// istiod's environment variables Rudder reads (through the flags above); docs/install.md has the
/// table.
const ISTIOD_ENV_READ: &[&str] = &[
    "PILOT_DEBOUNCE_AFTER",
    "PILOT_DEBOUNCE_MAX",
    "PILOT_ENABLE_EDS_DEBOUNCE",
    "PILOT_PUSH_THROTTLE",
    "PILOT_MAX_REQUESTS_PER_SECOND",
    "ISTIO_GPRC_MAXRECVMSGSIZE",
    "ISTIO_GPRC_MAXSTREAMS",
    "CA_TRUSTED_NODE_ACCOUNTS",
    "CITADEL_SELF_SIGNED_CA_CERT_TTL",
    "CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL",
    "CITADEL_SELF_SIGNED_CA_CERT_GRACE_PERIOD_PERCENTILE",
    "PILOT_ENABLE_ANALYSIS",
    "PILOT_ANALYSIS_INTERVAL",
];

/// istiod variables without the usual prefixes that Rudder does not read: per-proxy signers of an
/// external CA (`CERT_SIGNER_DOMAIN`, with MeshConfig `caCertificates[].certSigners`).
const ISTIOD_ENV_OTHER: &[&str] = &["CERT_SIGNER_DOMAIN"];

/// istiod feature switches whose value here is what Rudder always does: set that way they change
/// nothing, so they are not warned about (`profile: ambient` sets the first).
const ISTIOD_ENV_ALWAYS: &[(&str, &str)] = &[("PILOT_ENABLE_AMBIENT", "true")];

/// The `PILOT_*` (and `ISTIO_GPRC_*`, `CITADEL_*`) variables set in `vars` that Rudder does not
/// read: an istiod Deployment's settings that would otherwise be ignored without a word.
fn unread_istiod_env(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut unread: Vec<String> = vars
        .filter(|(k, v)| {
            !ISTIOD_ENV_ALWAYS
                .iter()
                .any(|(name, always)| k == name && v.eq_ignore_ascii_case(always))
        })
        .map(|(k, _)| k)
        .filter(|k| {
            ["PILOT_", "ISTIO_GPRC_", "CITADEL_"]
                .iter()
                .any(|p| k.starts_with(p))
                || ISTIOD_ENV_OTHER.contains(&k.as_str())
        })
        .filter(|k| !ISTIOD_ENV_READ.contains(&k.as_str()))
        .collect();
    unread.sort();
    unread
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    super::raise_fd_limit();
    for name in unread_istiod_env(std::env::vars()) {
        warn!(
            variable = name,
            "istiod environment variable is not read by Rudder; it has no effect (docs/install.md lists those that are)"
        );
    }
    let store = Arc::new(Store::default());
    let xds_status: Arc<OnceLock<XdsStatus>> = Arc::default();
    let metrics = DaemonMetrics::register(store.clone(), xds_status.clone());
    let ready = Arc::new(AtomicBool::new(false));
    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();
    let use_kubernetes = match args.config_source {
        ConfigSource::Kubernetes => true,
        ConfigSource::Files => false,
        ConfigSource::Auto => args.kubeconfig.is_some() || crate::k8s::environment_has_cluster(),
    };
    let debug_access: Arc<OnceLock<crate::admin::DebugAccess>> = Arc::default();
    // A typo in --config-dir would otherwise give a ready daemon serving an empty mesh.
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
        // As istiod with --meshConfig: a mesh config that cannot be read or parsed stops the start.
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--mesh-config {}: {e}", path.display()))?;
        crate::config::mesh::MeshConfig::parse(&text)
            .map_err(|e| anyhow::anyhow!("--mesh-config {}: {e}", path.display()))?;
    }
    let mut file_source = (!use_kubernetes).then(|| {
        let source = FileSource::new(
            &args.config_dir,
            &args.default_namespace,
            store.clone(),
            metrics.file.clone(),
        );
        match &args.mesh_config {
            Some(path) => source.with_mesh_file(path, &args.system_namespace),
            None => source,
        }
    });
    let inject_template: Arc<OnceLock<crate::admin::InjectTemplate>> = Arc::default();
    let state = AdminState {
        store: store.clone(),
        metrics: metrics.registry.clone(),
        sources: file_source
            .as_ref()
            .map(|f| f.status_handle())
            .unwrap_or_default(),
        ready: ready.clone(),
        xds: xds_status.clone(),
        debug_access: debug_access.clone(),
        limits: Arc::new(limits(&args)),
        inject_template: inject_template.clone(),
    };
    // The same pages, for `istio.io/debug` requests over xDS (`istioctl x internal-debug`).
    let debug_pages = crate::admin::debug_pages(state.clone());
    // ControlZ (istiod's 9876, loopback by default): `istioctl admin log`, `istioctl dashboard
    // controlz`. A debugging aid: a port already taken is logged, not fatal.
    if let Some(addr) = args.ctrlz_addr.0 {
        match bind(addr, "controlz").await {
            Ok(listener) => {
                tasks.spawn(crate::activity::http::serve(
                    "controlz",
                    listener,
                    crate::admin::controlz::router(),
                    None,
                    args.http_idle_timeout,
                    metrics.http_closed("controlz"),
                    cancel.clone(),
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
        let app = router(state.clone());
        tasks.spawn(crate::activity::http::serve(
            what,
            listener,
            app,
            None,
            args.http_idle_timeout,
            metrics.http_closed(what),
            cancel.clone(),
        ));
    }
    let grpc_listener = bind(args.grpc_addr, "grpc-xds").await?;
    let webhook_listener = bind(args.https_addr, "webhook").await?;
    let secure_listener = bind(args.secure_grpc_addr, "grpc-xds-tls").await?;
    let ttls = Ttls {
        default: args.workload_cert_ttl,
        max: args.max_workload_cert_ttl,
        root: args.self_signed_root_ttl,
    };
    let mut kube_client = None;
    let mut leading = None;

    if let Some(fs) = file_source.as_mut() {
        let events = fs.sync();
        info!(dir = %args.config_dir.display(), objects = store.snapshot().len(), events, "initial config loaded");
    } else {
        let client = crate::k8s::client(args.kubeconfig.as_deref())
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach Kubernetes: {e}"))?;
        let readiness = Arc::new(Readiness::default());
        KubeSource::new(
            client.clone(),
            store.clone(),
            metrics.kube.clone(),
            readiness.clone(),
            KubeSourceConfig {
                root_namespace: args.system_namespace.clone(),
                injector_configmap: crate::webhook::inject::injector_configmap(&args.revision),
                mesh_configmap: mesh_configmap(&args.revision),
            },
        )
        .spawn(&tasks, &cancel);
        let election = LeaderElection {
            namespace: args.system_namespace.clone(),
            name: args.lease_name.clone(),
            identity: identity(),
            lease_duration: args.lease_duration,
            renew_every: args.lease_renew,
        };
        let (leading_rx, handle) =
            election.spawn(client.clone(), metrics.leader.clone(), cancel.clone());
        leading = Some(leading_rx);
        kube_client = Some(client);
        tasks.spawn(async move {
            let _ = handle.await;
        });
        info!("waiting for the initial sync of every Kubernetes watcher");
        tokio::select! {
            _ = readiness.wait() => {}
            _ = shutdown_signal() => {
                cancel.cancel();
                tasks.close();
                let _ = tokio::time::timeout(args.drain_duration, tasks.wait()).await;
                return Ok(());
            }
        }
        info!(
            objects = store.snapshot().len(),
            "Kubernetes initial sync done"
        );
    }

    // The CA: its root, how callers authenticate, and our own serving certificate.
    let trust_domain = MeshSettings {
        trust_domain: args.trust_domain.clone(),
        root_namespace: args.system_namespace.clone(),
        ..Default::default()
    }
    .with_mesh_config(&store.snapshot())
    .0
    .trust_domain;
    let tokens = match &kube_client {
        Some(client) => TokenAuthority::Kubernetes(client.clone()),
        None => match &args.ca_token_file {
            Some(path) => TokenAuthority::from_file(path)
                .map_err(|e| anyhow::anyhow!("--ca-token-file: {e}"))?,
            None => TokenAuthority::None,
        },
    };
    // Entries that are IP addresses become IP SANs (a webhook registered by `url` may use one).
    let (ip_names, dns_names): (Vec<String>, Vec<String>) = args
        .serving_dns_names
        .iter()
        .cloned()
        .partition(|n| n.parse::<std::net::IpAddr>().is_ok());
    let mut ips = vec![
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    for ip in ip_names
        .iter()
        .filter_map(|n| n.parse::<std::net::IpAddr>().ok())
    {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    let ca = ca_setup(
        &args,
        kube_client.as_ref(),
        &trust_domain,
        ttls,
        (&dns_names, &ips),
        &metrics,
    )
    .await?;
    let (serving_chain, serving_key) = ca.serving.clone();
    if let (Some(client), Some(leading)) = (&kube_client, leading) {
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
            store.clone(),
            ca.roots.clone(),
            leading.clone(),
            metrics.ca.clone(),
            cancel.clone(),
        ));
        let ambient_status = args.enable_ambient && args.ambient_status;
        if args.enable_analysis || ambient_status {
            let interval = if args.analysis_interval < Duration::from_secs(1) {
                warn!(
                    interval = ?args.analysis_interval,
                    "analysis interval under 1s; using the default 10s (as istiod)"
                );
                Duration::from_secs(10)
            } else {
                args.analysis_interval
            };
            let writer = crate::analysis::status::StatusWriter {
                client: client.clone(),
                store: store.clone(),
                domain_suffix: args.domain_suffix.clone(),
                interval,
                writes_per_second: std::num::NonZeroU32::new(args.status_writes_per_second)
                    .unwrap_or(std::num::NonZeroU32::MIN),
                metrics: metrics.status.clone(),
                analysis: args.enable_analysis,
                ambient: ambient_status,
                root_namespace: args.system_namespace.clone(),
            };
            tasks.spawn(tracing::Instrument::instrument(
                writer.run(leading.clone(), cancel.clone()),
                tracing::info_span!("analysis-status"),
            ));
        }
        let patcher = CaBundlePatcher {
            client: client.clone(),
            label_selector: format!("istio.io/rev={}", args.revision),
            roots: ca.roots.clone(),
            metrics: metrics.webhook.clone(),
        };
        tasks.spawn(patcher.run(leading, cancel.clone()));
    }

    // Admission webhooks on the HTTPS port, with the same serving certificate.
    let injector = Injector::new(
        InjectorSettings {
            revision: args.revision.clone(),
            revision_tags: args.revision_tags.clone(),
            system_namespace: args.system_namespace.clone(),
            domain_suffix: args.domain_suffix.clone(),
            trust_domain: trust_domain.clone(),
            discovery_address: args
                .discovery_address
                .clone()
                .unwrap_or_else(|| format!("istiod.{}.svc:15012", args.system_namespace)),
            cluster_id: args.cluster_id.clone(),
        },
        store.clone(),
    );
    if let Some(client) = &kube_client {
        let watch_tags = crate::webhook::tags::run(
            client.clone(),
            args.revision.clone(),
            injector.cluster_tags(),
            cancel.clone(),
        );
        tasks.spawn(tracing::Instrument::instrument(
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
    let _ = inject_template.set(Arc::new(move || {
        serde_json::to_value(&*injecting.template()).unwrap_or_default()
    }));
    let webhook_app = crate::webhook::router(WebhookState {
        store: store.clone(),
        metrics: metrics.webhook.clone(),
        injector,
        ready: ready.clone(),
        budget: Arc::new(crate::webhook::limits::Budget::new(webhook_limits.clone())),
    });
    let webhook_tls = crate::webhook::tls_config(&serving_chain, &serving_key)?;
    tasks.spawn(crate::webhook::serve(
        webhook_listener,
        webhook_app,
        webhook_tls,
        webhook_limits.idle_timeout,
        metrics.http_closed("webhook"),
        cancel.clone(),
    ));

    // Subscribe before building the first context: a change in between is pushed, never lost.
    let events = store.subscribe();
    let mesh = MeshSettings {
        domain_suffix: args.domain_suffix.clone(),
        root_namespace: args.system_namespace.clone(),
        trust_domain: args.trust_domain.clone(),
        cluster_id: args.cluster_id.clone(),
        ..Default::default()
    };
    let certificates: crate::xds::context::Certificates = Some(ca.certificates.clone());
    let initial = push::initial_context(&store, &mesh, certificates);
    let mut start = push::Start::from(&initial, mesh);
    start.roots = Some(ca.roots.clone());
    let xds = XdsServer::new(
        initial,
        metrics.xds.clone(),
        // istiod reads PILOT_PUSH_THROTTLE=0 as "automatic"; ours is the default, 100.
        match args.push_concurrency {
            0 => 100,
            n => n,
        },
        cancel.clone(),
        XdsLimits {
            send_timeout: args.xds_send_timeout,
            new_streams_per_second: request_limit(&args),
            idle_timeout: args.xds_idle_timeout,
            first_stream_timeout: args.xds_first_stream_timeout,
            max_pending_per_source: args.xds_max_pending_per_source,
            max_silence: Some(keepalive_silence(&args)),
            max_subscribed_names: args.xds_max_subscribed_names,
            max_unknown_names: args.xds_max_unknown_names,
            max_message_bytes: args.max_grpc_message_size,
            new_stream_wait: args.xds_new_stream_wait,
        },
    );
    // Set once, after the initial sync; the admin server answers "not started" until then.
    let _ = xds_status.set(xds.status());
    xds.set_debug_pages(debug_pages);
    let debounce = Debounce {
        quiet: args.debounce_after,
        max: args.debounce_max,
        endpoints: args.enable_eds_debounce,
    };
    tasks.spawn(push::run(
        store.clone(),
        events,
        xds.clone(),
        start,
        debounce,
        metrics.xds.clone(),
        cancel.clone(),
    ));
    let plain = grpc_server(&args).add_service(AdsService::new(xds.clone()).into_server());
    let plain_incoming = xds.incoming(grpc_listener);
    let stop = cancel.clone();
    tasks.spawn(async move {
        let served = plain
            .serve_with_incoming_shutdown(plain_incoming, stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "xDS gRPC server failed");
        }
    });
    let auth = Arc::new(crate::ca::auth::Authenticator {
        secret_access: Default::default(),
        tokens,
        trust_domain: trust_domain.clone(),
    });
    let _ = debug_access.set(crate::admin::DebugAccess {
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
        (use_kubernetes && !trusted.is_empty()).then(|| crate::ca::node_auth::NodeAuthorizer {
            store: store.clone(),
            trusted,
        });
    let root_pem = ca.roots.borrow().clone();
    let ca_service = CaService {
        signer: ca.signer,
        auth: auth.clone(),
        metrics: metrics.ca.clone(),
        node_auth,
    };
    let secure_ads = AdsService::authenticated(xds.clone(), auth).into_server();
    let tls = crate::ca::server::tls_config(&serving_chain, &serving_key, &root_pem);
    let stop = cancel.clone();
    let secure_incoming = xds.incoming(secure_listener);
    let secure = grpc_server(&args)
        .tls_config(tls)
        .map_err(|e| anyhow::anyhow!("TLS configuration: {e}"))?
        .add_service(secure_ads)
        .add_service(ca_service.into_server());
    tasks.spawn(async move {
        let served = secure
            .serve_with_incoming_shutdown(secure_incoming, stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "secure gRPC server failed");
        }
    });
    info!(trust_domain, "CA ready");
    if let Some(fs) = file_source {
        let debounce = crate::source::file::FileDebounce {
            quiet: args.file_debounce,
            max: args.file_debounce_max,
        };
        tasks.spawn(fs.run(cancel.clone(), debounce, args.file_resync));
    }
    ready.store(true, Ordering::Release);
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

#[cfg(test)]
mod tests {
    use super::unread_istiod_env;

    #[test]
    fn istiod_variables_rudder_does_not_read_are_named() {
        let vars = [
            ("PILOT_DEBOUNCE_AFTER", "100ms"),
            ("PILOT_ENABLE_STATUS", "true"),
            ("CITADEL_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR", "true"),
            ("CERT_SIGNER_DOMAIN", "example.com"),
            ("HOME", "/root"),
            ("PILOT_ENABLE_AMBIENT", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            unread_istiod_env(vars),
            [
                "CERT_SIGNER_DOMAIN",
                "CITADEL_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR",
                "PILOT_ENABLE_STATUS"
            ]
        );
        let off = std::iter::once(("PILOT_ENABLE_AMBIENT".to_string(), "false".to_string()));
        assert_eq!(unread_istiod_env(off), ["PILOT_ENABLE_AMBIENT"]);
    }
}

/// docs/metrics.md lists istiod's series; each marked "yes" must be exported with istiod's name,
/// type and label names.
#[cfg(test)]
mod istiod_series {
    use super::DaemonMetrics;
    use crate::metrics::{
        K8sEventLabels, ReasonLabels, ResourceLabels, StatusLabels, TypeLabels,
        ValidationFailLabels,
    };
    use crate::store::Store;
    use crate::webhook::metrics::{ConfigFailureLabels, ConfigNameLabels};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    /// Gives every labelled family one sample, so that it is rendered.
    fn touch_every_family(m: &DaemonMetrics) {
        let t = |s: &str| TypeLabels { r#type: s.into() };
        let xds = &m.xds;
        xds.xds_connections
            .get_or_create(&xds.connection_labels("1.30.0"))
            .inc();
        xds.xds_pushes.get_or_create(&t("cds")).inc();
        xds.xds_rejects.get_or_create(&t("cds")).inc();
        for short in ["cds", "eds", "lds", "rds"] {
            xds.record_typed_reject(short, "sidecar~10.0.0.1~a.b~b.svc.cluster.local", 3);
        }
        xds.xds_push_time.get_or_create(&t("cds")).observe(0.1);
        xds.config_size.get_or_create(&t("cds")).observe(10.0);
        xds.push_triggers.get_or_create(&t("config")).inc();
        xds.inbound_updates.get_or_create(&t("config")).inc();
        m.ca.root_cert_expiry.set(4_000_000_000);
        m.ca.cert_chain_expiry.set(4_000_000_000);
        let event = K8sEventLabels {
            r#type: "Services".into(),
            event: "add".into(),
        };
        m.kube.k8s_events.get_or_create(&event).inc();
        m.kube.k8s_cfg_events.get_or_create(&event).inc();
        let resource = ResourceLabels {
            group: "networking.istio.io".into(),
            version: "v1".into(),
            resource: "virtualservices".into(),
        };
        let w = &m.webhook;
        w.validation_passed.get_or_create(&resource).inc();
        w.validation_failed
            .get_or_create(&ValidationFailLabels {
                group: resource.group.clone(),
                version: resource.version.clone(),
                resource: resource.resource.clone(),
                reason: "invalid_resource".into(),
            })
            .inc();
        w.webhook_http_errors
            .get_or_create(&StatusLabels {
                status: "400".into(),
            })
            .inc();
        w.injection_failures.get_or_create(&t("pod")).inc();
        let name = ConfigNameLabels {
            name: "istio-sidecar-injector".into(),
        };
        w.patch_attempts.get_or_create(&name).inc();
        w.patch_retries.get_or_create(&name).inc();
        w.patch_failures
            .get_or_create(&ConfigFailureLabels {
                name: name.name.clone(),
                reason: "webhook_update_failure".into(),
            })
            .inc();
        m.ca.csr_errors
            .get_or_create(&ReasonLabels {
                reason: "csr".into(),
            })
            .inc();
    }

    /// Family name -> (type, label names), from Prometheus text.
    fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
        let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                out.insert(name.into(), (kind.into(), BTreeSet::new()));
            }
        }
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let sample = &line[..name_end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| sample.strip_suffix(s).filter(|f| out.contains_key(*f)))
                .unwrap_or(sample);
            let Some((_, labels)) = out.get_mut(family) else {
                continue;
            };
            if let Some(set) = line[name_end..]
                .strip_prefix('{')
                .and_then(|r| r.split_once('}'))
            {
                for pair in set.0.split(',') {
                    if let Some((k, _)) = pair.split_once('=')
                        && k != "le"
                    {
                        labels.insert(k.to_string());
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_istiod_series_in_docs_metrics_md_is_exported() {
        let m = DaemonMetrics::register(Arc::new(Store::default()), Arc::default());
        touch_every_family(&m);
        let exported = families(&m.registry.render());
        let table = include_str!("../../docs/metrics.md");
        let mut checked = 0;
        for row in table.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            if !cells[4].starts_with("yes") {
                continue;
            }
            let name = cells[1].trim_matches('`');
            let want_labels: BTreeSet<String> = cells[3]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_string())
                .filter(|l| !l.is_empty())
                .collect();
            let Some((kind, labels)) = exported.get(name) else {
                panic!("{name} is not exported; have {:?}", exported.keys());
            };
            assert_eq!(kind, cells[2], "{name}: type");
            assert_eq!(labels, &want_labels, "{name}: labels");
            checked += 1;
        }
        assert!(checked >= 40, "only {checked} rows checked");
    }
}
