//! `rudder serve`'s flags (each with the istiod variable or flag it stands for) and what is derived from them alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// The config cluster's ID, which injected proxies report (ISTIO_META_CLUSTER_ID); istiod
    /// reads it from `CLUSTER_ID`, which its chart sets.
    #[arg(long, default_value = "Kubernetes", env = "CLUSTER_ID")]
    pub cluster_id: String,
    /// Other names of clusters (istiod's `--clusterAliases`), `alias=cluster-id`, comma-separated
    /// or repeated: a proxy or certificate request that reports an alias is taken as from that
    /// cluster (a cluster renamed while its proxies still carry the old ID).
    #[arg(long, value_parser = parse_cluster_alias, value_delimiter = ',')]
    pub cluster_aliases: Vec<(String, String)>,
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
    /// Ambient installs: sidecars and gateways send to ambient workloads over HBONE (through a
    /// `connect_originate` listener of their own), as istiod's PILOT_ENABLE_SENDING_HBONE (on by
    /// default with PILOT_ENABLE_AMBIENT); a proxy opts out with `DISABLE_HBONE_SEND` metadata.
    #[arg(long, env = "PILOT_ENABLE_SENDING_HBONE", default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_sending_hbone: bool,
    /// Ambient installs: a sidecar whose metadata says `ENABLE_HBONE` (mesh proxy metadata
    /// `ISTIO_META_ENABLE_HBONE`, which `profile: ambient` sets) takes HBONE on 15008, so ztunnel
    /// and waypoints reach it over mTLS tunnels, as istiod's PILOT_ENABLE_SIDECAR_LISTENING_HBONE.
    #[arg(long, env = "PILOT_ENABLE_SIDECAR_LISTENING_HBONE", default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_sidecar_listening_hbone: bool,
    /// ztunnel gets, for each waypoint, a policy allowing its identity, referenced by every
    /// workload behind it: unless another ALLOW policy admits them, clients that skip the
    /// waypoint are refused (istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY, off by default).
    #[arg(long, env = "PILOT_AUTO_ALLOW_WAYPOINT_POLICY", default_value_t = false, action = clap::ArgAction::Set)]
    pub auto_allow_waypoint_policy: bool,
    /// Ambient across networks (istiod's alpha AMBIENT_ENABLE_MULTI_NETWORK, off by default): ztunnel
    /// gets remote clusters' workloads of its own network, one split-horizon workload per global
    /// service and remote network (reached through that network's east-west gateway), and global
    /// services merged across clusters; MeshConfig `serviceScopeConfigs` says which are global.
    #[arg(long, env = "AMBIENT_ENABLE_MULTI_NETWORK", default_value_t = false, action = clap::ArgAction::Set)]
    pub ambient_enable_multi_network: bool,
    /// With AMBIENT_ENABLE_MULTI_NETWORK: waypoints reach the endpoints of other networks over
    /// double HBONE through those networks' east-west gateways (istiod's default, on).
    #[arg(long, env = "AMBIENT_ENABLE_MULTI_NETWORK_WAYPOINT", default_value_t = true, action = clap::ArgAction::Set)]
    pub ambient_enable_multi_network_waypoint: bool,
    /// With AMBIENT_ENABLE_MULTI_NETWORK and HBONE sending: ingress gateways reach the endpoints
    /// of other networks over double HBONE as waypoints do (istiod's default, off).
    #[arg(long, env = "AMBIENT_ENABLE_MULTI_NETWORK_INGRESS", default_value_t = false, action = clap::ArgAction::Set)]
    pub ambient_enable_multi_network_ingress: bool,
    /// Kubernetes mode, ambient installs: the leader writes `istio.io/WaypointBound` on Services,
    /// ServiceEntries and WorkloadEntries and `ZtunnelAccepted` on AuthorizationPolicies, as
    /// istiod's AMBIENT_ENABLE_STATUS.
    #[arg(long, env = "AMBIENT_ENABLE_STATUS", default_value_t = true, action = clap::ArgAction::Set)]
    pub ambient_status: bool,
    /// Kubernetes mode: the leader writes the Gateway API's status (GatewayClasses, Gateways,
    /// routes), as istiod's PILOT_ENABLE_GATEWAY_API_STATUS.
    #[arg(long, env = "PILOT_ENABLE_GATEWAY_API_STATUS", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_api_status: bool,
    /// Kubernetes mode: the leader creates istiod's GatewayClasses (`istio`, `istio-remote`, and
    /// `istio-waypoint` with ambient), as istiod's PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER.
    #[arg(long, env = "PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_class_controller: bool,
    /// Kubernetes mode: the leader deploys managed Gateways (a ServiceAccount, Deployment and
    /// Service per Gateway of class istio without a Hostname address), as istiod's
    /// PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER.
    #[arg(long, env = "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_deployment_controller: bool,
    /// Kubernetes mode: the leader allocates addresses to ServiceEntries without their own
    /// (`status.addresses`), as istiod's PILOT_ENABLE_IP_AUTOALLOCATE.
    #[arg(long, env = "PILOT_ENABLE_IP_AUTOALLOCATE", default_value_t = true, action = clap::ArgAction::Set)]
    pub ip_autoallocate: bool,
    /// Kubernetes mode: a proxy naming a WorkloadGroup (`ISTIO_META_AUTO_REGISTER_GROUP`) gets
    /// a WorkloadEntry made from it while connected, as istiod's
    /// PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION.
    #[arg(long, env = "PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION", default_value_t = true, action = clap::ArgAction::Set)]
    pub workload_entry_autoregistration: bool,
    /// How long an auto-registered WorkloadEntry outlives its proxy's last stream (istiod's
    /// PILOT_WORKLOAD_ENTRY_GRACE_PERIOD).
    #[arg(long, env = "PILOT_WORKLOAD_ENTRY_GRACE_PERIOD", default_value = "10s", value_parser = parse_duration)]
    pub workload_entry_grace_period: Duration,
    /// Kubernetes mode: this control plane leads the remote clusters whose system namespace is
    /// annotated `topology.istio.io/controlPlaneClusters` with its cluster ID (or `*`): root
    /// certificate ConfigMaps and webhook CA bundles there, as istiod's EXTERNAL_ISTIOD.
    #[arg(long, env = "EXTERNAL_ISTIOD", default_value_t = false, action = clap::ArgAction::Set)]
    pub external_istiod: bool,
    /// Kubernetes mode: how long the start waits for the remote clusters its remote secrets name
    /// to sync, and after which one still syncing is reported as `timeout` (istiod's
    /// PILOT_REMOTE_CLUSTER_TIMEOUT; it keeps retrying).
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "PILOT_REMOTE_CLUSTER_TIMEOUT")]
    pub remote_cluster_timeout: std::time::Duration,
    /// Kubernetes mode: remote-secret kubeconfig credentials to allow although they read local
    /// files or run programs (`exec`, `clientKey`, `clientCertificate`, `tokenFile`, or an auth
    /// provider's name), as istiod's PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS.
    #[arg(
        long,
        value_delimiter = ',',
        env = "PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS"
    )]
    pub insecure_multicluster_kubeconfig_options: Vec<String>,
    /// Kubernetes mode: read the remote clusters' kubeconfigs from the `.yaml`/`.yml` files of
    /// this directory (the cluster ID from each kubeconfig) instead of remote secrets, as
    /// istiod's PILOT_MULTICLUSTER_KUBECONFIG_PATH.
    #[arg(long, env = "PILOT_MULTICLUSTER_KUBECONFIG_PATH")]
    pub multicluster_kubeconfig_path: Option<PathBuf>,
    /// Most status writes per second, so analysis never floods the API server.
    #[arg(long, default_value_t = 20, env = "RUDDER_STATUS_QPS")]
    pub status_writes_per_second: u32,
}

/// The bounds on clients, as `/debug/limitz` shows them (docs/reliability.md explains each).
pub(super) fn limits(args: &ServeArgs) -> Vec<crate::metrics::Limit> {
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
pub(super) fn request_limit(args: &ServeArgs) -> u32 {
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

fn parse_cluster_alias(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((alias, id)) if !alias.trim().is_empty() && !id.trim().is_empty() => {
            Ok((alias.trim().to_string(), id.trim().to_string()))
        }
        _ => Err(format!("{s:?}: expected alias=cluster-id")),
    }
}

impl ServeArgs {
    /// `--cluster-aliases` as alias → cluster ID; as istiod, a cluster with two aliases is an
    /// error (which one would its certificates name?).
    /// Whether the config comes from Kubernetes (else from `--config-dir`).
    pub fn uses_kubernetes(&self) -> bool {
        match self.config_source {
            ConfigSource::Kubernetes => true,
            ConfigSource::Files => false,
            ConfigSource::Auto => {
                self.kubeconfig.is_some() || crate::k8s::environment_has_cluster()
            }
        }
    }

    /// The mesh settings the flags give, before the mesh ConfigMap applies.
    pub fn mesh_settings(&self) -> crate::model::mesh::MeshSettings {
        crate::model::mesh::MeshSettings {
            domain_suffix: self.domain_suffix.clone(),
            root_namespace: self.system_namespace.clone(),
            trust_domain: self.trust_domain.clone(),
            cluster_id: self.cluster_id.clone(),
            send_hbone: self.enable_ambient && self.enable_sending_hbone,
            ip_autoallocate: self.ip_autoallocate,
            auto_allow_waypoint_policy: self.auto_allow_waypoint_policy,
            sidecar_hbone_listen: self.enable_ambient && self.enable_sidecar_listening_hbone,
            ambient_multi_network: self.ambient_enable_multi_network,
            ambient_multi_network_waypoint: self.ambient_enable_multi_network_waypoint,
            ambient_multi_network_ingress: self.ambient_enable_multi_network_ingress,
            ..Default::default()
        }
    }

    pub fn cluster_alias_map(&self) -> Result<ClusterAliases, String> {
        let mut map = std::collections::BTreeMap::new();
        for (alias, id) in &self.cluster_aliases {
            map.insert(alias.clone(), id.clone());
        }
        let mut seen = std::collections::BTreeSet::new();
        for id in map.values() {
            if !seen.insert(id) {
                return Err(format!("more than one cluster alias for cluster id {id}"));
            }
        }
        Ok(std::sync::Arc::new(map))
    }
}

/// Alias → cluster ID (`--cluster-aliases`).
pub type ClusterAliases = std::sync::Arc<std::collections::BTreeMap<String, String>>;

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::config::common::parse_go_duration(s)
}

/// How long a gRPC connection may send nothing: a ping after the keepalive interval, then the
/// keepalive timeout for anything to arrive.
pub(super) fn keepalive_silence(args: &ServeArgs) -> Duration {
    args.keepalive_interval
        .saturating_add(args.keepalive_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("rudder").chain(args.iter().copied())).map(|c| c.serve)
    }

    /// `--cluster-aliases` takes istiod's `alias=id` pairs, comma-separated or repeated; a
    /// cluster with two aliases stops the start, as istiod's flag check does.
    #[test]
    fn cluster_aliases_as_istiod_reads_them() {
        let args = parse(&[
            "--cluster-aliases=a=east,b=west",
            "--cluster-aliases",
            "c=north",
        ])
        .expect("parses");
        let map = args.cluster_alias_map().expect("valid");
        assert_eq!(map.get("a").map(String::as_str), Some("east"));
        assert_eq!(map.get("b").map(String::as_str), Some("west"));
        assert_eq!(map.get("c").map(String::as_str), Some("north"));
        assert!(parse(&["--cluster-aliases=nothing"]).is_err());
        let twice = parse(&["--cluster-aliases=a=east,b=east"]).expect("parses");
        assert!(
            twice
                .cluster_alias_map()
                .is_err_and(|e| e.contains("more than one cluster alias for cluster id east"))
        );
    }
}
