//! `rudder-loadgen`: opens N real ADS streams against a running `rudder serve` (files mode), behaves like
//! the proxies would (subscribe, ACK), drives config churn through the config directory, and reports
//! convergence, throughput and the daemon's memory and CPU. `--replay` measures the same streams against
//! a server that only sends pre-encoded responses, run as a process of its own as the daemon is:
//! the ceiling for the push path.

/// The daemon's allocator: the generator allocates for every resource of every response it reads
/// (a name, a type URL), and with the system allocator that was two fifths of its CPU, taken from
/// the cores it shares with the daemon it measures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as VKind};
use prost::Message;
use prost::bytes::Bytes;
use rudder::xds::server::status::{self, Interner};
use rudder::xds::types::TypeUrl;
use rudder::xds::wire::{self, EncodedResponse};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

mod digest;
mod kube;

const CDS: &str = TypeUrl::Cluster.url();
const EDS: &str = TypeUrl::Endpoint.url();
const LDS: &str = TypeUrl::Listener.url();
const RDS: &str = TypeUrl::Route.url();
const SOTW_METHOD: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_METHOD: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// Opens many real ADS streams against a running `rudder serve`, drives config churn through its
/// config directory, and reports convergence, throughput, memory and CPU.
#[derive(Debug, Clone, Parser)]
#[command(name = "rudder-loadgen", version, args_override_self = true)]
pub struct LoadgenArgs {
    /// The daemon's plaintext xDS address.
    #[arg(long, default_value = "127.0.0.1:15010")]
    pub xds_addr: SocketAddr,
    /// The daemon's monitoring address (for memory, CPU and push history).
    #[arg(long, default_value = "127.0.0.1:15014")]
    pub monitoring_addr: SocketAddr,
    /// The daemon's config directory: loadgen writes its generated mesh there.
    #[arg(long, required_unless_present = "kubeconfig")]
    pub config_dir: Option<PathBuf>,
    /// Write the mesh to this Kubernetes API server instead (Services, pods, EndpointSlices; the
    /// daemon watching it), and churn it as a cluster does: scaling, a rolling restart, new
    /// Services.
    #[arg(long, conflicts_with_all = ["config_dir", "replay", "realistic", "soak_seconds", "attackers", "endpoint_only"])]
    pub kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig`: EndpointSlice updates per second while deployments scale up and down.
    #[arg(long, default_value_t = 100.0)]
    pub scale_rate: f64,
    /// With `--kubeconfig`: how long deployments scale.
    #[arg(long, default_value_t = 30)]
    pub scale_seconds: u64,
    /// With `--kubeconfig`: pods replaced one by one in a rolling restart (0: none).
    #[arg(long, default_value_t = 1000)]
    pub restart_pods: usize,
    /// With `--kubeconfig`: pods replaced per second in the rolling restart (each is four API
    /// writes: the new pod, the slice with it, the slice without the old one, the old pod deleted).
    #[arg(long, default_value_t = 50.0)]
    pub restart_rate: f64,
    #[arg(long, default_value_t = 1000)]
    pub services: usize,
    #[arg(long, default_value_t = 2)]
    pub endpoints_per_service: usize,
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    #[arg(long, default_value_t = 1000)]
    pub proxies: usize,
    /// Share of Envoy-like proxies that use Delta xDS (percent).
    #[arg(long, default_value_t = 50)]
    pub delta_percent: usize,
    /// Share of proxies that are proxyless gRPC clients (percent).
    #[arg(long, default_value_t = 10)]
    pub grpc_percent: usize,
    /// Local addresses the proxies connect from, 127.0.0.1 up to 127.0.0.N, dealt round: one
    /// source address has ~28,000 ephemeral ports, too few for 25,000 proxies and the
    /// connections a previous run left in TIME_WAIT.
    #[arg(long, default_value_t = 1)]
    pub source_addresses: u8,
    /// ADS streams multiplexed on one HTTP/2 connection.
    #[arg(long, default_value_t = 1)]
    pub streams_per_connection: usize,
    /// Proxies connecting per second at the start (default: all at once, as a fleet restarting
    /// does). A mesh where each proxy is sent megabytes can be ramped, so the generator's
    /// thousands of half-received first responses fit in this machine's memory beside the daemon.
    #[arg(long)]
    pub connects_per_second: Option<f64>,
    /// Full pushes (a new service) and endpoint-only pushes to measure, each.
    #[arg(long, default_value_t = 5)]
    pub changes: usize,
    /// Write a Sidecar per namespace (egress `./*`), so each proxy sees only its namespace's services,
    /// as production meshes scope visibility.
    #[arg(long)]
    pub sidecar_scope: bool,
    /// A realistic mesh rather than bare ServiceEntries: per service a VirtualService (a header
    /// match to a canary subset, a weighted split with retries and a timeout) and a
    /// DestinationRule with two subsets and a traffic policy; endpoints labelled by version; an
    /// AuthorizationPolicy per namespace; three ingress Gateways with VirtualServices bound to them.
    #[arg(long)]
    pub realistic: bool,
    /// Also write the results as JSON to this file (`scripts/plot.py` draws them).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Only endpoint pushes, no full pushes: to measure or profile the endpoint path alone. With
    /// `--replay`, the replay server sends each one: service 0's ClusterLoadAssignment.
    #[arg(long)]
    pub endpoint_only: bool,
    /// How long to wait for every proxy to sync (after the ramp) and to converge after each change.
    #[arg(long, default_value_t = 120)]
    pub patience_seconds: u64,
    /// Measure the replay baseline instead of the daemon: SotW and Delta streams as
    /// `--delta-percent` deals them; no gRPC clients.
    #[arg(long)]
    pub replay: bool,
    /// Internal: be the replay server that `--replay` starts (capture from the daemon, print the
    /// address served, then send a full push for each number read from standard input).
    #[arg(long, hide = true)]
    pub serve_replay: bool,
    /// Before each change, wait until no proxy received anything for this long, so each push is
    /// measured on its own; 0 starts an endpoint push in the tail of the full push before it.
    #[arg(long, default_value_t = 1000)]
    pub settle_ms: u64,
    /// Soak: repeat full and endpoint changes for this many seconds instead of `--changes`, and
    /// report the daemon's RSS over time.
    #[arg(long, default_value_t = 0)]
    pub soak_seconds: u64,
    /// Hostile clients beside the proxies, a quarter of each kind: streams that never read, streams
    /// that NACK every response with 10 KiB of text, clients that connect and leave every second,
    /// and Delta streams that subscribe to names until they are refused.
    #[arg(long, default_value_t = 0)]
    pub attackers: usize,
    /// Which hostile kinds `--attackers` are dealt among.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "stuck,nack,churn,subscribe"
    )]
    pub attack_kinds: Vec<String>,
}

/// What the simulated proxies received, counted by the generator itself (the replay server
/// keeps no metrics, so only this count is comparable between the daemon and the replay).
#[derive(Clone, Copy, Default)]
struct Received {
    responses: usize,
    bytes: usize,
}

impl Received {
    fn add(&mut self, s: &Seen) {
        self.responses += 1;
        self.bytes += s.bytes;
    }
}

/// One received response, as the coordinator sees it.
struct Seen {
    proxy: usize,
    type_url: &'static str,
    bytes: usize,
    at: Instant,
    wall_ms: u128,
    names: Vec<String>,
    /// With `--kubeconfig`, for EDS: each resource's encoded ClusterLoadAssignment, beside `names`.
    bodies: Vec<Bytes>,
    /// The encoded ClusterLoadAssignment of the cluster endpoint pushes move, if in this response.
    watched: Option<Bytes>,
    /// CDS: the highest churn step whose service has a cluster in this response.
    newest_churn: Option<u32>,
}

impl Seen {
    /// Response `r`, which proxy `proxy` received just now; `names` are the resource names kept.
    fn of(proxy: usize, r: &mut digest::Digest, names: Vec<String>) -> Seen {
        Seen {
            proxy,
            type_url: r.type_url,
            bytes: r.len,
            at: Instant::now(),
            wall_ms: wall_ms(),
            names,
            bodies: std::mem::take(&mut r.bodies),
            watched: r.watched.take(),
            newest_churn: r.newest_churn,
        }
    }
}

fn wall_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn static_type(t: &str) -> &'static str {
    match t {
        CDS => CDS,
        EDS => EDS,
        LDS => LDS,
        RDS => RDS,
        _ => "other",
    }
}

fn ns(i: usize, n: usize) -> String {
    format!("load-{}", i % n.max(1))
}

fn host(i: usize, n: usize) -> String {
    format!("svc-{i}.{}.svc.cluster.local", ns(i, n))
}

/// Replaces the mesh file in one step (a hidden file renamed over it): the daemon's file watcher
/// could otherwise read it half written, and push the services missing from that half.
fn write_mesh(file: &std::path::Path, yaml: String) -> std::io::Result<()> {
    let staged = file.with_file_name(".loadgen-mesh.yaml.tmp");
    std::fs::write(&staged, yaml)?;
    std::fs::rename(&staged, file)
}

/// Whether proxy `i` watches service `j`'s endpoints: an Envoy every service it sees (with Sidecar
/// scoping, those of its namespace); a gRPC client only the one it calls, service `i % namespaces`.
fn watches(i: usize, j: usize, args: &LoadgenArgs, grpc: bool) -> bool {
    let namespaces = args.namespaces.max(1);
    if grpc {
        i % namespaces == j
    } else {
        !args.sidecar_scope || i % namespaces == j % namespaces
    }
}

/// What a simulated proxy reads of the responses: only what its bookkeeping needs (names, nonces,
/// EDS cluster types), with resource bytes borrowed from the received buffer. The generator shares
/// the machine with the daemon it measures; decoding every Cluster and Listener in full, as a real
/// proxy on its own machine would, took CPU the daemon is measured with.
mod light {
    use prost::bytes::Bytes;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "1")]
        pub type_url: String,
        #[prost(bytes = "bytes", tag = "2")]
        pub value: Bytes,
    }

    /// `DiscoveryResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Response {
        #[prost(string, tag = "1")]
        pub version_info: String,
        #[prost(message, repeated, tag = "2")]
        pub resources: Vec<Any>,
        #[prost(string, tag = "4")]
        pub type_url: String,
        #[prost(string, tag = "5")]
        pub nonce: String,
    }

    /// `Resource` of a Delta response.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, optional, tag = "2")]
        pub resource: Option<Any>,
        #[prost(string, tag = "3")]
        pub name: String,
    }

    /// `DeltaDiscoveryResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DeltaResponse {
        #[prost(message, repeated, tag = "2")]
        pub resources: Vec<Resource>,
        #[prost(string, tag = "4")]
        pub type_url: String,
        #[prost(string, tag = "5")]
        pub nonce: String,
        #[prost(string, repeated, tag = "6")]
        pub removed_resources: Vec<String>,
    }

    /// Field 1 of a Listener or ClusterLoadAssignment: its name.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Named {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    /// A Cluster's name and discovery type (3 is EDS).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClusterHead {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int32, tag = "2")]
        pub discovery_type: i32,
    }
}

/// An ADS stream whose responses are read whole and decoded `light`ly (the replay's capture and
/// the attackers). Responses are read with the daemon's own message reader, not tonic's: tonic
/// keeps each stream's buffer at the size of the largest message it read (megabytes of clusters in
/// an unscoped mesh), which for thousands of streams was gigabytes held for nothing.
async fn open_ads<Req, Resp>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
) -> Result<wire::MessageStream<Resp>, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
    Resp: Message + Default + Send + 'static,
{
    let body = open_stream(channel, method, requests).await?;
    Ok(wire::MessageStream::new(body, 256 * 1024 * 1024))
}

/// An ADS stream as a simulated proxy opens it: requests encoded in full, each response digested
/// as it arrives (`digest`).
async fn open_digests<Req>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
    reading: digest::Reading,
) -> Result<digest::DigestStream, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
{
    let body = open_stream(channel, method, requests).await?;
    Ok(digest::DigestStream::new(body, reading))
}

/// Opens an ADS stream that sends `requests`; the response body, once the server accepted.
async fn open_stream<Req>(
    channel: Channel,
    method: &'static str,
    requests: mpsc::Receiver<Req>,
) -> Result<tonic::body::Body, tonic::Status>
where
    Req: Message + Send + Sync + 'static,
{
    use tokio_stream::StreamExt;
    use tonic::codegen::http;
    use tower::ServiceExt;
    let frames = ReceiverStream::new(requests).map(|request| {
        let len = request.encoded_len();
        let mut buf = Vec::with_capacity(5 + len);
        buf.push(0);
        buf.extend_from_slice(&(len as u32).to_be_bytes());
        request.encode_raw(&mut buf);
        Ok::<_, tonic::Status>(http_body::Frame::data(Bytes::from(buf)))
    });
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(method)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(tonic::body::Body::new(http_body_util::StreamBody::new(
            frames,
        )))
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    let response = channel
        .oneshot(request)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    // A refusal comes as headers only, with the status among them.
    if let Some(status) =
        tonic::Status::from_header_map(response.headers()).filter(|s| s.code() != tonic::Code::Ok)
    {
        return Err(status);
    }
    Ok(response.into_body())
}

/// The churn services a mesh at step `churn` holds: all of them, or in a soak the last
/// `SOAK_CHURN_WINDOW`, so a full push still adds a service every proxy must learn (and drops the
/// oldest) while the mesh keeps one size and the daemon's memory can be judged flat or not.
fn churn_services(args: &LoadgenArgs, churn: usize) -> std::ops::RangeInclusive<usize> {
    let first = if args.soak_seconds > 0 {
        churn.saturating_sub(SOAK_CHURN_WINDOW - 1).max(1)
    } else {
        1
    };
    first..=churn
}

/// This run's id, in the names of what only this run writes: a daemon still serving an earlier
/// run's mesh (from the same config directory) shows neither this run's marker nor its churn
/// services. Set once, at start.
static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn run_id() -> &'static str {
    RUN.get_or_init(|| {
        use std::hash::BuildHasher;
        // Randomly seeded: two runs, even of one process, get different ids.
        let id = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
        format!("{:08x}", id as u32)
    })
}

/// The port of every churn service.
const CHURN_PORT: u16 = 7000;

/// The host of churn step `step`'s service in `namespace`, in run `run`.
fn churn_host(step: usize, run: &str, namespace: &str) -> String {
    format!("churn-{step}-{run}.{namespace}.svc.cluster.local")
}

/// The churn step whose service cluster `cluster` is in this run (`outbound|7000||` and
/// `churn_host`); another run's churn services have none.
fn churn_step(cluster: &str) -> Option<u32> {
    churn_step_of(cluster, run_id())
}

fn churn_step_of(cluster: &str, run: &str) -> Option<u32> {
    let host = cluster.strip_prefix(&format!("outbound|{CHURN_PORT}||churn-"))?;
    let (step, rest) = host.split_once('-')?;
    let domain = rest.strip_prefix(run)?;
    if domain.starts_with('.') {
        step.parse().ok()
    } else {
        None
    }
}

/// The host of the marker ServiceEntry of run `run`: the daemon serves this run's mesh once its
/// registry has it. Exported to no namespace, so no proxy is sent anything for it.
fn marker_host(run: &str) -> String {
    format!("loadgen-run-{run}.loadgen.invalid")
}

/// How many churn services a soak's mesh keeps at once.
const SOAK_CHURN_WINDOW: usize = 5;

/// The moved endpoint's last octet: steps cycle through 200 addresses, so a long soak stays valid.
fn moved_octet(moved_endpoint: usize) -> usize {
    10 + moved_endpoint % 200
}

/// The cluster of service 0, whose endpoint each endpoint push moves.
fn moved_cluster(args: &LoadgenArgs) -> String {
    format!("outbound|8000||{}", host(0, args.namespaces))
}

/// `moved_cluster`, which the simulated proxies keep the body of (set once, at start).
static WATCHED_CLUSTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Whether an encoded ClusterLoadAssignment has service 0's endpoint as endpoint push `moved`
/// left it: its address as a whole string field (a length-prefixed `SocketAddress.address`), so
/// that 10.0.0.15 is not found in 10.0.0.150.
fn has_moved_endpoint(assignment: &[u8], moved: usize) -> bool {
    let address = endpoint_address(0, moved_octet(moved));
    let mut field = vec![0x12, address.len() as u8];
    field.extend_from_slice(address.as_bytes());
    assignment.windows(field.len()).any(|w| w == field)
}

/// The address of service `service`'s endpoint whose last octet is `last`.
fn endpoint_address(service: usize, last: usize) -> String {
    format!("10.{}.{}.{last}", (service / 250) % 250, service % 250)
}

fn mesh_yaml(args: &LoadgenArgs, churn: usize, moved_endpoint: usize) -> String {
    let mut y = String::with_capacity(args.services * 400);
    if args.sidecar_scope {
        for n in 0..args.namespaces {
            y.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: {}}}\nspec: {{egress: [{{hosts: [\"./*\"]}}]}}\n",
                ns(n, args.namespaces)
            ));
        }
    }
    let run = run_id();
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: loadgen-run, namespace: {}}}\nspec: {{hosts: [{}], exportTo: [\"~\"], ports: [{{number: 9, name: tcp, protocol: TCP}}], resolution: STATIC}}\n",
        ns(0, args.namespaces),
        marker_host(run)
    ));
    // Churn step c adds one service in every namespace, so a full push reaches every proxy even
    // with Sidecar scoping.
    for c in churn_services(args, churn) {
        for n in 0..args.namespaces {
            let namespace = ns(n, args.namespaces);
            y.push_str(&format!(
                "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: churn-{c}-{run}, namespace: {namespace}}}\nspec: {{hosts: [{}], ports: [{{number: {CHURN_PORT}, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{{address: 10.254.{}.{n}}}]}}\n",
                churn_host(c, run, &namespace),
                c % 250
            ));
        }
    }
    if args.realistic {
        realistic_policies(args, &mut y);
    }
    for i in 0..args.services {
        let eps: Vec<String> = (0..args.endpoints_per_service)
            .map(|e| {
                let last = if i == 0 && e == 0 {
                    moved_octet(moved_endpoint)
                } else {
                    10 + e
                };
                let labels = if args.realistic {
                    format!(", labels: {{app: svc-{i}, version: v{}}}", 1 + e % 2)
                } else {
                    String::new()
                };
                format!("{{address: {}{labels}}}", endpoint_address(i, last))
            })
            .collect();
        if args.realistic {
            realistic_routing(args, i, &mut y);
        }
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc-{i}, namespace: {}}}\nspec: {{hosts: [{}], ports: [{{number: {}, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{}]}}\n",
            ns(i, args.namespaces),
            host(i, args.namespaces),
            8000 + (i % 50),
            eps.join(", ")
        ));
    }
    y
}

/// Service `i`'s VirtualService and DestinationRule in the realistic mesh.
fn realistic_routing(args: &LoadgenArgs, i: usize, y: &mut String) {
    let (namespace, host) = (ns(i, args.namespaces), host(i, args.namespaces));
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: svc-{i}, namespace: {namespace}}}\nspec:\n  host: {host}\n  trafficPolicy:\n    connectionPool: {{http: {{http1MaxPendingRequests: 100, maxRequestsPerConnection: 10}}}}\n    outlierDetection: {{consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}}\n  subsets:\n  - {{name: v1, labels: {{version: v1}}}}\n  - {{name: v2, labels: {{version: v2}}, trafficPolicy: {{loadBalancer: {{simple: LEAST_REQUEST}}}}}}\n"
    ));
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: svc-{i}, namespace: {namespace}}}\nspec:\n  hosts: [{host}]\n  http:\n  - match: [{{headers: {{x-canary: {{exact: \"1\"}}}}}}]\n    route: [{{destination: {{host: {host}, subset: v2}}}}]\n  - match: [{{uri: {{prefix: /api/}}}}]\n    route:\n    - {{destination: {{host: {host}, subset: v1}}, weight: 90}}\n    - {{destination: {{host: {host}, subset: v2}}, weight: 10}}\n    retries: {{attempts: 3, perTryTimeout: 2s, retryOn: \"5xx,reset\"}}\n    timeout: 10s\n  - route: [{{destination: {{host: {host}, subset: v1}}}}]\n"
    ));
}

/// The realistic mesh's namespace-wide AuthorizationPolicies, ingress Gateways and the
/// VirtualServices bound to them (each exposing ten services).
fn realistic_policies(args: &LoadgenArgs, y: &mut String) {
    for n in 0..args.namespaces {
        let namespace = ns(n, args.namespaces);
        y.push_str(&format!(
            "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: allow-mesh, namespace: {namespace}}}\nspec:\n  action: ALLOW\n  rules:\n  - from: [{{source: {{namespaces: [{namespace}, load-0]}}}}]\n    to: [{{operation: {{methods: [GET, POST], paths: [/api/*, /healthz]}}}}]\n"
        ));
    }
    let gateway_ns = ns(0, args.namespaces);
    for g in 0..3 {
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: ingress-{g}, namespace: {gateway_ns}}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers: [{{port: {{number: {}, name: http-{g}, protocol: HTTP}}, hosts: [\"*.example{g}.com\"]}}]\n",
            8080 + g
        ));
        let routes: Vec<String> = (0..10.min(args.services))
            .map(|k| {
                let i = g * 10 + k;
                format!(
                    "  - match: [{{uri: {{prefix: /svc-{i}/}}}}]\n    route: [{{destination: {{host: {}, port: {{number: {}}}}}}}]\n",
                    host(i % args.services.max(1), args.namespaces),
                    8000 + (i % args.services.max(1)) % 50
                )
            })
            .collect();
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: ingress-{g}, namespace: {gateway_ns}}}\nspec:\n  hosts: [\"www.example{g}.com\"]\n  gateways: [ingress-{g}]\n  http:\n{}",
            routes.concat()
        ));
    }
}

/// A lazily connected channel to `target` from local address `source`.
fn channel_from(target: SocketAddr, source: std::net::Ipv4Addr) -> anyhow::Result<Channel> {
    let connect = tower::service_fn(move |_: tonic::codegen::http::Uri| async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        bind_source(&socket, source)?;
        let stream = socket.connect(target).await?;
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
    });
    Ok(Channel::from_shared(format!("http://{target}"))?.connect_with_connector_lazy(connect))
}

/// Binds `socket` to the source address `source`, leaving its port to `connect`. A bind to port 0
/// makes the kernel search the bound ports for one free for any destination, which grows with
/// every connection already open: a quarter of the generator's CPU while 12,500 connections opened
/// (`inet_bind2_bucket_find` in a profile). Chosen at connect time, the port need only be free for
/// this source and destination.
fn bind_source(socket: &tokio::net::TcpSocket, source: std::net::Ipv4Addr) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: an integer option set on a socket this function borrows, from a live c_int of
        // the size given.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    socket.bind(SocketAddr::new(source.into(), 0))
}

fn node(i: usize, args: &LoadgenArgs, grpc: bool) -> Option<Node> {
    let mut fields = std::collections::BTreeMap::new();
    let s = |v: &str| Value {
        kind: Some(VKind::StringValue(v.into())),
    };
    if grpc {
        fields.insert("GENERATOR".to_string(), s("grpc"));
    }
    let namespace = ns(i, args.namespaces);
    fields.insert("NAMESPACE".into(), s(&namespace));
    Some(Node {
        id: format!(
            "sidecar~10.200.{}.{}~load-{i}.{namespace}~{namespace}.svc.cluster.local",
            (i / 250) % 250,
            i % 250
        ),
        user_agent_name: if grpc {
            "gRPC loadgen".into()
        } else {
            "envoy".into()
        },
        metadata: Some(Struct {
            fields: fields.into_iter().collect(),
        }),
        ..Default::default()
    })
}

fn names<'a>(resources: impl Iterator<Item = &'a light::Any>) -> impl Iterator<Item = String> {
    resources.filter_map(|a| light::Named::decode(a.value.clone()).ok().map(|n| n.name))
}

/// The route an Envoy asks for after a listener named `listener`: its port, for an HTTP
/// listener (named address_port).
fn route_name(listener: &str) -> Option<String> {
    listener
        .rsplit('_')
        .next()
        .filter(|p| p.parse::<u32>().is_ok())
        .map(str::to_string)
}

/// Route names an Envoy asks for: one per HTTP listener port.
fn route_names<'a>(listeners: impl Iterator<Item = &'a light::Any>) -> Vec<String> {
    let mut v: Vec<String> = names(listeners)
        .filter_map(|name| route_name(&name))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The EDS clusters among `clusters`: the names an Envoy asks endpoints for.
fn eds_names<'a>(clusters: impl Iterator<Item = &'a light::Any>) -> Vec<String> {
    clusters
        .filter_map(|a| light::ClusterHead::decode(a.value.clone()).ok())
        .filter(|c| c.discovery_type == 3)
        .map(|c| c.name)
        .collect()
}

/// What an Envoy asks for after a response of type `t`: endpoints of its EDS clusters, routes of
/// its HTTP listeners.
fn envoy_follow<'a>(
    t: &str,
    resources: impl Iterator<Item = &'a light::Any>,
) -> Option<(&'static str, Vec<String>)> {
    match t {
        CDS => Some((EDS, eds_names(resources))),
        LDS => Some((RDS, route_names(resources))),
        _ => None,
    }
}

/// Values equal across simulated proxies, held once: every sidecar of an unscoped mesh subscribes
/// to the same thousands of names, and each holding its own copy cost the generator gigabytes at
/// 10,000 proxies (a real proxy has a machine of its own).
static SUBSCRIPTIONS: std::sync::LazyLock<Interner<wire::SotwRequest>> =
    std::sync::LazyLock::new(Interner::default);
static NAME_SETS: std::sync::LazyLock<Interner<BTreeSet<String>>> =
    std::sync::LazyLock::new(Interner::default);

/// Changes a proxy's set of names by `edit`, then shares the result with the proxies that hold
/// the same set.
fn edit_names(names: &mut Arc<BTreeSet<String>>, edit: impl FnOnce(&mut BTreeSet<String>)) {
    edit(Arc::make_mut(names));
    let digest = status::names_digest(names);
    NAME_SETS.share(names, digest);
}

/// What became of the simulated proxies' streams: those that ended (the proxy reconnects, so
/// otherwise nothing would tell), and what each received last.
struct ProxyStreams {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Option<String>>,
    /// What each proxy last received (or how far it got before that).
    stages: std::sync::Mutex<std::collections::BTreeMap<usize, &'static str>>,
}

static STREAMS: ProxyStreams = ProxyStreams {
    count: std::sync::atomic::AtomicUsize::new(0),
    first: std::sync::Mutex::new(None),
    stages: std::sync::Mutex::new(std::collections::BTreeMap::new()),
};

impl ProxyStreams {
    fn record(&self, proxy: usize, why: String) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert_with(|| format!("proxy {proxy}: {why}"));
        }
    }

    /// Opens proxy `proxy`'s stream; `None`, recorded, when it could not. Endpoint names are
    /// always kept (a push is converged by them); the other names and endpoint bodies only under
    /// `--kubeconfig`, where new Services are told by name: 5,000 names per response per proxy
    /// were gigabytes waiting in the collector's queue while 10,000 proxies synced.
    async fn open<Req>(
        &self,
        proxy: usize,
        channel: Channel,
        method: &'static str,
        requests: mpsc::Receiver<Req>,
        args: &LoadgenArgs,
    ) -> Option<digest::DigestStream>
    where
        Req: Message + Send + Sync + 'static,
    {
        let kube = args.kubeconfig.is_some();
        let reading = digest::Reading {
            delta: method == DELTA_METHOD,
            names: kube,
            bodies: kube,
            watched: WATCHED_CLUSTER.get().map(String::as_str),
        };
        self.reached(proxy, "opening its stream");
        match open_digests(channel, method, requests, reading).await {
            Ok(stream) => {
                self.reached(proxy, "stream open, nothing received");
                Some(stream)
            }
            Err(status) => {
                self.record(proxy, format!("could not open its stream: {status}"));
                None
            }
        }
    }

    /// The stream's next response; `None`, recorded, when the stream ended.
    async fn next(
        &self,
        proxy: usize,
        stream: &mut digest::DigestStream,
    ) -> Option<digest::Digest> {
        match stream.message().await {
            Ok(Some(r)) => {
                // Only a change of type: the lock, shared by every proxy, taken on every response
                // cost the generator CPU it shares with the daemon.
                if stream.last_type != r.type_url {
                    stream.last_type = r.type_url;
                    self.reached(proxy, r.type_url);
                }
                Some(r)
            }
            Ok(None) => {
                self.record(proxy, "the server ended its stream".into());
                None
            }
            Err(status) => {
                self.record(proxy, format!("its stream failed: {status}"));
                None
            }
        }
    }

    /// Notes how far proxy `proxy` got, for the report on proxies that did not converge.
    fn reached(&self, proxy: usize, stage: &'static str) {
        if let Ok(mut stages) = self.stages.lock() {
            stages.insert(proxy, stage);
        }
    }

    /// Where each of `proxies` got to.
    fn stages_of(&self, proxies: &[usize]) -> String {
        let Ok(stages) = self.stages.lock() else {
            return String::new();
        };
        let shown: Vec<String> = proxies
            .iter()
            .map(|p| format!("proxy {p}: {}", stages.get(p).unwrap_or(&"not started")))
            .collect();
        shown.join("; ")
    }

    /// A line for the report, if any stream ended.
    fn report(&self) -> Option<String> {
        let n = self.count.load(std::sync::atomic::Ordering::Relaxed);
        let first = self.first.lock().ok()?.clone()?;
        Some(format!(
            "proxy streams ended: {n}, each proxy reconnecting after 500 ms as Envoy does (first: {first})"
        ))
    }
}

/// Why the daemon ended streams or closed connections, if it did (the other side of "proxy
/// streams ended"), from its metrics text.
fn daemon_errors(metrics: &str) -> Option<String> {
    let refused: Vec<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("rudder_xds_errors_total{reason=\""))
        .filter_map(|rest| {
            let (reason, value) = rest.split_once("\"} ")?;
            let value: f64 = value.trim().parse().ok()?;
            (value > 0.0).then(|| format!("{reason} {value:.0}"))
        })
        .collect();
    (!refused.is_empty()).then(|| {
        format!(
            "daemon's xDS errors (whole run, by reason): {}",
            refused.join(", ")
        )
    })
}

/// Says what the proxies a sync or a push did not reach last received, and what the daemon says
/// it sent them and they acknowledged (its `/debug/syncz`).
async fn not_converged<V>(
    args: &LoadgenArgs,
    got: &HashMap<usize, V>,
    expected: &std::collections::BTreeSet<usize>,
) {
    let missing: Vec<usize> = expected
        .iter()
        .filter(|p| !got.contains_key(*p))
        .take(5)
        .copied()
        .collect();
    println!(
        "not converged, last response received: {}",
        STREAMS.stages_of(&missing)
    );
    if let Some(errors) = daemon_errors(&scrape(args.monitoring_addr, "/metrics").await) {
        println!("{errors}");
    }
    let body = scrape(args.monitoring_addr, "/debug/syncz").await;
    let Ok(serde_json::Value::Array(proxies)) = serde_json::from_str(&body) else {
        return;
    };
    for i in missing {
        let tag = format!("~load-{i}.");
        for p in proxies
            .iter()
            .filter(|p| p["node"].as_str().is_some_and(|id| id.contains(&tag)))
        {
            println!("  the daemon on proxy {i}: {}", p["types"]);
        }
    }
}

/// One State-of-the-World proxy: Envoy-like (wildcard CDS/LDS, then EDS/RDS by name) or gRPC.
async fn sotw_proxy(
    i: usize,
    channel: Channel,
    args: Arc<LoadgenArgs>,
    grpc: bool,
    tx: mpsc::UnboundedSender<Seen>,
) {
    let (req_tx, req_rx) = mpsc::channel(16);
    // A subscription is encoded once, when it changes, and each ACK shares those bytes: every
    // ACK repeats the whole subscription (1,000 names in an unscoped mesh), and building it anew
    // for each ACK cost the generator more CPU than the daemon spent answering, on the cores they
    // share.
    let send = |t: &str, names: &wire::SotwRequest, nonce: &str, version: &str, first: bool| {
        names.with_request(DiscoveryRequest {
            node: if first { node(i, &args, grpc) } else { None },
            type_url: t.into(),
            response_nonce: nonce.into(),
            version_info: version.into(),
            ..Default::default()
        })
    };
    let subscription = |names: &[String]| {
        let mut request = Arc::new(wire::SotwRequest::new(DiscoveryRequest::default(), names));
        let digest = request.names_digest();
        SUBSCRIPTIONS.share(&mut request, digest);
        request
    };
    let unsubscribed = Arc::new(wire::SotwRequest::default());
    // A service in the proxy's own namespace (visible under Sidecar scoping too).
    let svc = i % args.namespaces.max(1);
    let target = format!("{}:{}", host(svc, args.namespaces), 8000 + (svc % 50));
    let target_cluster = format!(
        "outbound|{}||{}",
        8000 + (svc % 50),
        host(svc, args.namespaces)
    );
    if grpc {
        let _ = req_tx
            .send(send(
                LDS,
                &subscription(std::slice::from_ref(&target)),
                "",
                "",
                true,
            ))
            .await;
    } else {
        let _ = req_tx.send(send(CDS, &unsubscribed, "", "", true)).await;
        let _ = req_tx.send(send(LDS, &unsubscribed, "", "", false)).await;
    }
    let Some(mut stream) = STREAMS.open(i, channel, SOTW_METHOD, req_rx, &args).await else {
        return;
    };
    let mut subscribed: HashMap<&'static str, Arc<wire::SotwRequest>> = HashMap::new();
    while let Some(mut r) = STREAMS.next(i, &mut stream).await {
        let t = r.type_url;
        let names = match t {
            EDS | CDS => std::mem::take(&mut r.names),
            _ => Vec::new(),
        };
        let _ = tx.send(Seen::of(i, &mut r, names));
        let mine = subscribed.get(t).unwrap_or(&unsubscribed);
        let _ = req_tx
            .send(send(t, mine, &r.nonce, &r.version, false))
            .await;
        // Follow the dependency chain, as a proxy would.
        let next = match (t, grpc) {
            (LDS, true) => Some((RDS, vec![target.clone()])),
            (RDS, true) => Some((CDS, vec![target_cluster.clone()])),
            _ => r.envoy_follow(),
        };
        let next = next
            .filter(|(_, names)| !names.is_empty())
            .map(|(nt, names)| (nt, subscription(&names)));
        if let Some((nt, names)) = next
            && subscribed.get(nt) != Some(&names)
        {
            subscribed.insert(nt, names.clone());
            let _ = req_tx.send(send(nt, &names, "", "", false)).await;
        }
        if t == CDS && grpc {
            subscribed.insert(CDS, subscription(std::slice::from_ref(&target_cluster)));
        }
    }
}

/// One Delta proxy: wildcard CDS/LDS, named EDS/RDS.
async fn delta_proxy(
    i: usize,
    channel: Channel,
    args: Arc<LoadgenArgs>,
    tx: mpsc::UnboundedSender<Seen>,
) {
    let (req_tx, req_rx) = mpsc::channel(16);
    let _ = req_tx
        .send(DeltaDiscoveryRequest {
            node: node(i, &args, false),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await;
    let _ = req_tx
        .send(DeltaDiscoveryRequest {
            type_url: LDS.into(),
            ..Default::default()
        })
        .await;
    let Some(mut stream) = STREAMS.open(i, channel, DELTA_METHOD, req_rx, &args).await else {
        return;
    };
    let mut known: HashMap<&'static str, Arc<BTreeSet<String>>> = HashMap::new();
    while let Some(mut r) = STREAMS.next(i, &mut stream).await {
        let t = r.type_url;
        let names = std::mem::take(&mut r.names);
        let _ = tx.send(Seen::of(i, &mut r, names));
        let _ = req_tx
            .send(DeltaDiscoveryRequest {
                type_url: t.into(),
                response_nonce: r.nonce.clone(),
                ..Default::default()
            })
            .await;
        // Subscriptions to change: (type, names to add, names to drop).
        let mut edits: Vec<(&'static str, Vec<String>, Vec<String>)> = Vec::new();
        // As Envoy does, a removed cluster's endpoints are unsubscribed: a client that kept them
        // would make the daemon hold a growing subscription in a mesh of constant size.
        if t == CDS && !r.removed.is_empty() {
            let set = known.entry(EDS).or_default();
            let gone: Vec<String> = r
                .removed
                .iter()
                .filter(|n| set.contains(n.as_str()))
                .cloned()
                .collect();
            if !gone.is_empty() {
                edit_names(set, |held| gone.iter().for_each(|n| _ = held.remove(n)));
            }
            edits.push((EDS, Vec::new(), gone));
        }
        if let Some((nt, wanted)) = r.envoy_follow() {
            let set = known.entry(nt).or_default();
            let mut new: Vec<String> = wanted.into_iter().filter(|n| !set.contains(n)).collect();
            new.sort_unstable();
            new.dedup();
            if !new.is_empty() {
                edit_names(set, |held| held.extend(new.iter().cloned()));
            }
            edits.push((nt, new, Vec::new()));
        }
        for (nt, subscribe, unsubscribe) in edits {
            if subscribe.is_empty() && unsubscribe.is_empty() {
                continue;
            }
            let _ = req_tx
                .send(DeltaDiscoveryRequest {
                    type_url: nt.into(),
                    resource_names_subscribe: subscribe,
                    resource_names_unsubscribe: unsubscribe,
                    ..Default::default()
                })
                .await;
        }
    }
}

/// Hostile clients, for `--attackers`: each loops until the process ends.
mod attack {
    use super::*;

    fn attacker_node(i: usize) -> Option<Node> {
        Some(Node {
            id: format!(
                "sidecar~10.250.{}.{}~attacker-{i}.load-0~load-0.svc.cluster.local",
                (i / 250) % 250,
                i % 250
            ),
            user_agent_name: "envoy".into(),
            ..Default::default()
        })
    }

    fn first(i: usize, t: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            node: attacker_node(i),
            type_url: t.into(),
            ..Default::default()
        }
    }

    async fn channel(addr: SocketAddr) -> Option<Channel> {
        Channel::from_shared(format!("http://{addr}"))
            .ok()?
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .ok()
    }

    /// Subscribes to everything and never reads: pushes fill its window and queue.
    async fn stuck(i: usize, addr: SocketAddr) {
        loop {
            if let Some(ch) = channel(addr).await {
                let (tx, rx) = mpsc::channel(4);
                let _ = tx.send(first(i, CDS)).await;
                let _ = tx.send(first(i, LDS)).await;
                if let Ok(stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                    // Held, never read. The daemon drops it after its send timeout; the client
                    // does not notice, as a stuck process would not.
                    let _held = (stream, tx);
                    std::future::pending::<()>().await;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Rejects every response with 10 KiB of error text.
    async fn nacker(i: usize, addr: SocketAddr) {
        let text = "rejected ".repeat(1200);
        loop {
            if let Some(ch) = channel(addr).await {
                let (tx, rx) = mpsc::channel(16);
                let _ = tx.send(first(i, CDS)).await;
                if let Ok(mut stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                    while let Ok(Some(r)) = stream.message().await {
                        for _ in 0..10 {
                            let nack = DiscoveryRequest {
                                type_url: r.type_url.clone(),
                                response_nonce: r.nonce.clone(),
                                error_detail: Some(envoy_types::pb::google::rpc::Status {
                                    code: 3,
                                    message: text.clone(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            };
                            if tx.send(nack).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Connects, subscribes, reads its first response and leaves, every second.
    async fn churner(i: usize, addr: SocketAddr) {
        loop {
            if let Some(ch) = channel(addr).await {
                let (tx, rx) = mpsc::channel(4);
                let _ = tx.send(first(i, CDS)).await;
                if let Ok(mut stream) = open_ads::<_, light::Response>(ch, SOTW_METHOD, rx).await {
                    let _ = tokio::time::timeout(Duration::from_secs(1), stream.message()).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Subscribes to 10,000 more endpoint names at a time until the stream is ended, then again.
    async fn subscriber(i: usize, addr: SocketAddr) {
        loop {
            if let Some(ch) = channel(addr).await {
                let (tx, rx) = mpsc::channel(4);
                let _ = tx
                    .send(DeltaDiscoveryRequest {
                        node: attacker_node(i),
                        type_url: EDS.into(),
                        ..Default::default()
                    })
                    .await;
                if let Ok(mut stream) =
                    open_ads::<_, light::DeltaResponse>(ch, DELTA_METHOD, rx).await
                {
                    let mut batch = 0usize;
                    loop {
                        let names = (0..10_000)
                            .map(|n| format!("outbound|80||a{i}-{batch}-{n}.example.com"))
                            .collect();
                        batch += 1;
                        let req = DeltaDiscoveryRequest {
                            type_url: EDS.into(),
                            resource_names_subscribe: names,
                            ..Default::default()
                        };
                        if tx.send(req).await.is_err() {
                            break;
                        }
                        match tokio::time::timeout(Duration::from_millis(200), stream.message())
                            .await
                        {
                            Ok(Ok(Some(_))) | Err(_) => {}
                            _ => break,
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Starts `n` attackers on a runtime of their own, on one thread: their work (building
    /// 10,000-name requests, reading pushes) must not delay the good proxies' tasks, whose
    /// receive times are the measurement; the kernel shares the CPU between the two.
    pub fn spawn(n: usize, kinds: &[String], addr: SocketAddr) -> anyhow::Result<()> {
        anyhow::ensure!(!kinds.is_empty(), "--attack-kinds is empty");
        if let Some(other) = kinds
            .iter()
            .find(|k| !["stuck", "nack", "churn", "subscribe"].contains(&k.as_str()))
        {
            anyhow::bail!("unknown attack kind {other:?}");
        }
        let kinds = kinds.to_vec();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("attackers".into())
            .spawn(move || {
                runtime.block_on(async move {
                    for i in 0..n {
                        match kinds[i % kinds.len()].as_str() {
                            "stuck" => tokio::spawn(stuck(i, addr)),
                            "nack" => tokio::spawn(nacker(i, addr)),
                            "churn" => tokio::spawn(churner(i, addr)),
                            _ => tokio::spawn(subscriber(i, addr)),
                        };
                    }
                    std::future::pending::<()>().await
                })
            })?;
        Ok(())
    }
}

/// The replay baseline: the responses the daemon sent one sidecar (CDS, EDS, LDS, RDS), encoded
/// once and written through the daemon's own framing (`wire::serve_rpc`). Each request is answered
/// with its type's bytes; each trigger sends every type, in push order, to every stream: what a
/// full push sends, without computing anything. Delta streams get the same resources as Delta
/// entries; on a full-push trigger that is all of them, more than a Delta push sends, so the full
/// push ceiling is a SotW one.
struct Replay {
    /// Resource bytes by type, in push order: the `resources` field of a SotW response.
    responses: Vec<(&'static str, Bytes)>,
    /// The same resources as the `resources` field of a Delta response, by type.
    delta: Vec<(&'static str, Bytes)>,
    /// With `--endpoint-only`: what each trigger sends instead, EDS with the one
    /// ClusterLoadAssignment an endpoint push changes (as SotW incremental EDS does); SotW and
    /// Delta encodings.
    endpoint_push: Option<(Bytes, Bytes)>,
    trigger: broadcast::Sender<u64>,
}

/// A Delta response's `Resource`, as the replay server writes it (the simulated proxies read only
/// `light::Resource`).
#[derive(Clone, PartialEq, prost::Message)]
struct ReplayResource {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(message, optional, tag = "2")]
    resource: Option<light::Any>,
    #[prost(string, tag = "3")]
    name: String,
}

/// The `resources` field of a Delta response carrying the resources of `sotw` (the `resources`
/// field of a SotW response), each named by its field 1, as every xDS type here is.
fn delta_resources(sotw: &Bytes) -> anyhow::Result<Bytes> {
    let sotw = light::Response::decode(sotw.clone())?;
    let mut out = Vec::new();
    for any in sotw.resources {
        let name = light::Named::decode(any.value.clone())?.name;
        let entry = ReplayResource {
            version: "1".into(),
            resource: Some(any),
            name,
        };
        prost::encoding::message::encode(2, &entry, &mut out);
    }
    Ok(out.into())
}

/// What the replay reads of a request of either protocol.
trait ReplayRequest: Message + Default + Send + 'static {
    /// Whether Delta; the responses are encoded for it.
    const DELTA: bool;
    /// The type asked for, when the request asks for something: a first request or a
    /// subscription. An ACK (it carries a nonce) asks for nothing.
    fn asks(&self) -> Option<&str>;
}

impl ReplayRequest for wire::SotwRequest {
    const DELTA: bool = false;
    fn asks(&self) -> Option<&str> {
        let r = &self.request;
        r.response_nonce.is_empty().then_some(r.type_url.as_str())
    }
}

impl ReplayRequest for DeltaDiscoveryRequest {
    const DELTA: bool = true;
    fn asks(&self) -> Option<&str> {
        self.response_nonce
            .is_empty()
            .then_some(self.type_url.as_str())
    }
}

impl Replay {
    /// The captured responses, as written to a stream of this protocol.
    fn all(&self, delta: bool) -> &[(&'static str, Bytes)] {
        if delta { &self.delta } else { &self.responses }
    }

    /// A stream of either protocol: each request that asks for a type is answered with its
    /// resources, ACKs are read and dropped, and each trigger sends a push.
    async fn stream<Req: ReplayRequest>(
        self: Arc<Self>,
        req: tonic::Request<wire::MessageStream<Req>>,
    ) -> wire::AdsResult {
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let mut trigger = self.trigger.subscribe();
            let (mut nonce, mut version) = (0u64, 0u64);
            loop {
                let mut send: Vec<(&'static str, Bytes)> = Vec::new();
                tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(r)) => {
                            let asked = r.asks().and_then(|t| {
                                self.all(Req::DELTA).iter().find(|(k, _)| *k == t)
                            });
                            send.extend(asked.cloned());
                        }
                        _ => return,
                    },
                    v = trigger.recv() => {
                        let Ok(v) = v else { return };
                        version = v;
                        match &self.endpoint_push {
                            Some((sotw, delta)) => {
                                send.push((EDS, if Req::DELTA { delta } else { sotw }.clone()));
                            }
                            None => send.extend(self.all(Req::DELTA).iter().cloned()),
                        }
                    }
                }
                for (type_url, bytes) in send {
                    nonce += 1;
                    let (v, n) = (version.to_string(), nonce.to_string());
                    let resp = if Req::DELTA {
                        EncodedResponse::delta(&v, type_url, &n, &[], vec![bytes])
                    } else {
                        EncodedResponse::new(&v, type_url, &n, bytes)
                    };
                    if tx.send(Ok(resp)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(tonic::Response::new(ReceiverStream::new(rx)))
    }
}

/// The replay server as a gRPC service for tonic's router (SotW and Delta).
#[derive(Clone)]
struct ReplayServer(Arc<Replay>);

impl tonic::server::NamedService for ReplayServer {
    const NAME: &'static str = wire::SERVICE_NAME;
}

impl<B> tonic::codegen::Service<tonic::codegen::http::Request<B>> for ReplayServer
where
    B: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::codegen::http::Request<B>) -> Self::Future {
        let replay = self.0.clone();
        const MAX: usize = 4 * 1024 * 1024;
        match req.uri().path() {
            SOTW_METHOD => Box::pin(async move {
                Ok(
                    wire::serve_rpc::<wire::SotwRequest, _, _>(req, MAX, |r| replay.stream(r))
                        .await,
                )
            }),
            DELTA_METHOD => Box::pin(async move {
                Ok(
                    wire::serve_rpc::<DeltaDiscoveryRequest, _, _>(req, MAX, |r| replay.stream(r))
                        .await,
                )
            }),
            _ => Box::pin(async move {
                Ok(tonic::Status::unimplemented("not an ADS method").into_http())
            }),
        }
    }
}

/// The resources field of a response, encoded: what the replay server writes.
fn resource_bytes(resp: &light::Response) -> Bytes {
    light::Response {
        resources: resp.resources.clone(),
        ..Default::default()
    }
    .encode_to_vec()
    .into()
}

/// The replay server, run as a process of its own (this binary with `--serve-replay`), as the
/// daemon is: the two then share the cores with the generator alike, and each process holds one end
/// of every connection (one process holding both ends could not open 25,000 proxies' connections
/// under this machine's limit of 20,000 open files).
struct ReplayProcess {
    child: tokio::process::Child,
    pushes: tokio::process::ChildStdin,
    addr: SocketAddr,
}

impl ReplayProcess {
    /// Starts the server with this run's arguments and waits for the address it serves.
    async fn start() -> anyhow::Result<ReplayProcess> {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .arg("--serve-replay")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(pushes), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            anyhow::bail!("the replay server's standard input and output are not piped");
        };
        let mut out = tokio::io::BufReader::new(out).lines();
        let line = tokio::time::timeout(Duration::from_secs(120), out.next_line())
            .await??
            .unwrap_or_default();
        // Anything it prints later is passed on, so a full pipe never stops it.
        tokio::spawn(async move {
            while let Ok(Some(more)) = out.next_line().await {
                println!("replay server: {more}");
            }
        });
        let addr = line
            .trim()
            .strip_prefix(REPLAY_SERVING)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("the replay server did not start: {line:?}"))?;
        Ok(ReplayProcess {
            child,
            pushes,
            addr,
        })
    }

    /// Has the server send version `version` of every type to every stream.
    async fn push(&mut self, version: u64) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.pushes
            .write_all(format!("{version}\n").as_bytes())
            .await?;
        Ok(self.pushes.flush().await?)
    }

    fn cpu_seconds(&self) -> f64 {
        self.child
            .id()
            .map_or(0.0, |pid| rudder::metrics::cpu_seconds_of(&pid.to_string()))
    }
}

/// What the replay server prints before the address it serves.
const REPLAY_SERVING: &str = "replay serving on ";

/// The replay server's process: captures what the daemon sends a sidecar, serves it, and sends a
/// full push for each version read from standard input; it ends with its input.
async fn serve_replay(args: LoadgenArgs) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let responses = capture(&args).await?;
    let endpoint_push = if args.endpoint_only {
        let cluster = moved_cluster(&args);
        let eds = responses
            .iter()
            .find(|(t, _)| *t == EDS)
            .and_then(|(_, b)| light::Response::decode(b.clone()).ok())
            .ok_or_else(|| anyhow::anyhow!("no EDS response was captured"))?;
        let changed: Vec<light::Any> = eds
            .resources
            .into_iter()
            .filter(|a| light::Named::decode(a.value.clone()).is_ok_and(|n| n.name == cluster))
            .collect();
        anyhow::ensure!(changed.len() == 1, "{cluster} was not captured");
        let sotw = resource_bytes(&light::Response {
            resources: changed,
            ..Default::default()
        });
        let delta = delta_resources(&sotw)?;
        Some((sotw, delta))
    } else {
        None
    };
    let delta = responses
        .iter()
        .map(|(t, b)| Ok((*t, delta_resources(b)?)))
        .collect::<anyhow::Result<_>>()?;
    let (trigger, _) = broadcast::channel(16);
    let replay = Arc::new(Replay {
        responses,
        delta,
        endpoint_push,
        trigger: trigger.clone(),
    });
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse()?)?;
    let listener = socket.listen(16_384)?;
    println!("{REPLAY_SERVING}{}", listener.local_addr()?);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ReplayServer(replay))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let mut versions = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = versions.next_line().await? {
        if let Ok(version) = line.trim().parse::<u64>() {
            let _ = trigger.send(version);
        }
    }
    Ok(())
}

/// Captures what the daemon sends an Envoy-like sidecar of namespace 0 (following CDS to EDS and
/// LDS to RDS as the simulated proxies do), for the replay server.
async fn capture(args: &LoadgenArgs) -> anyhow::Result<Vec<(&'static str, Bytes)>> {
    let channel = Channel::from_shared(format!("http://{}", args.xds_addr))?
        .connect()
        .await?;
    let (req_tx, req_rx) = mpsc::channel(16);
    for (i, t) in [CDS, LDS].into_iter().enumerate() {
        let _ = req_tx
            .send(DiscoveryRequest {
                node: if i == 0 { node(0, args, false) } else { None },
                type_url: t.into(),
                ..Default::default()
            })
            .await;
    }
    let mut stream = open_ads::<_, light::Response>(channel, SOTW_METHOD, req_rx).await?;
    let mut got: HashMap<&'static str, Bytes> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while got.len() < 4 {
        let Ok(Ok(Some(r))) = tokio::time::timeout_at(deadline, stream.message()).await else {
            break;
        };
        let t = static_type(&r.type_url);
        if let Some((nt, names)) = envoy_follow(t, r.resources.iter())
            && !names.is_empty()
        {
            let _ = req_tx
                .send(DiscoveryRequest {
                    type_url: nt.into(),
                    resource_names: names,
                    ..Default::default()
                })
                .await;
        }
        got.entry(t).or_insert_with(|| resource_bytes(&r));
    }
    anyhow::ensure!(
        got.contains_key(CDS),
        "could not capture a CDS response from {}",
        args.xds_addr
    );
    Ok([CDS, EDS, LDS, RDS]
        .into_iter()
        .filter_map(|t| got.remove(t).map(|b| (t, b)))
        .collect())
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn scrape(addr: SocketAddr, path: &str) -> String {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = s
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw).await;
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The CPU time of the server under measure: the replay's process, or the daemon's own count.
async fn server_cpu_seconds(args: &LoadgenArgs, replay: Option<&ReplayProcess>) -> f64 {
    match replay {
        Some(r) => r.cpu_seconds(),
        None => metric(
            &scrape(args.monitoring_addr, "/metrics").await,
            "process_cpu_seconds_total",
        ),
    }
}

/// The sum of the samples whose line starts with `name` (a name, or a name and labels).
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until `want` proxies saw `type_url` after `since` (matching `filter`), returning each first time.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    want: &BTreeSet<usize>,
    type_url: &str,
    since: Instant,
    filter: impl Fn(&Seen) -> bool,
    received: &mut Received,
    patience: Duration,
) -> (HashMap<usize, (Instant, u128)>, bool) {
    let mut got: HashMap<usize, (Instant, u128)> = HashMap::new();
    let deadline = tokio::time::Instant::now() + patience;
    while got.len() < want.len() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(s)) => {
                received.add(&s);
                if s.type_url == type_url && s.at >= since && want.contains(&s.proxy) && filter(&s)
                {
                    got.entry(s.proxy).or_insert((s.at, s.wall_ms));
                }
            }
            _ => return (got, false),
        }
    }
    (got, true)
}

/// Waits until no response arrived for `quiet` (the proxies finished following the last push).
async fn settle(rx: &mut mpsc::UnboundedReceiver<Seen>, quiet: Duration, received: &mut Received) {
    if quiet.is_zero() {
        return;
    }
    while let Ok(Some(s)) = tokio::time::timeout(quiet, rx.recv()).await {
        received.add(&s);
    }
}

/// Starts every simulated proxy: `kinds[i]` is (gRPC, Delta) for proxy `i`.
async fn connect_proxies(
    args: Arc<LoadgenArgs>,
    target: SocketAddr,
    kinds: Vec<(bool, bool)>,
    tx: mpsc::UnboundedSender<Seen>,
    connect_start: Instant,
) -> anyhow::Result<()> {
    let mut channel = None;
    for (i, (grpc, delta)) in kinds.into_iter().enumerate() {
        if i % args.streams_per_connection.max(1) == 0 || channel.is_none() {
            // Lazy: every proxy connects at once, as a fleet restarting would.
            let source = std::net::Ipv4Addr::new(
                127,
                0,
                0,
                1 + (i % usize::from(args.source_addresses.max(1))) as u8,
            );
            channel = Some(channel_from(target, source)?);
        }
        let ch = channel.clone().unwrap_or_else(|| unreachable!());
        let (a, t) = (args.clone(), tx.clone());
        if delta {
            // A proxy whose stream fails reconnects after a pause, as Envoy and gRPC do.
            tokio::spawn(async move {
                while !t.is_closed() {
                    delta_proxy(i, ch.clone(), a.clone(), t.clone()).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        } else {
            tokio::spawn(async move {
                while !t.is_closed() {
                    sotw_proxy(i, ch.clone(), a.clone(), grpc, t.clone()).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        }
        match args.connects_per_second.filter(|r| *r > 0.0) {
            Some(rate) => {
                let at = Duration::from_secs_f64((i + 1) as f64 / rate);
                tokio::time::sleep_until((connect_start + at).into()).await;
            }
            // Ramp like a fleet does: a few hundred new connections at a time.
            None if i % 500 == 499 => tokio::time::sleep(Duration::from_millis(50)).await,
            None => {}
        }
    }
    Ok(())
}

async fn run(args: LoadgenArgs) -> anyhow::Result<()> {
    let args = Arc::new(args);
    let (file, mesh) = match (&args.config_dir, &args.kubeconfig) {
        (_, Some(kubeconfig)) => {
            let client = rudder::k8s::client(Some(kubeconfig)).await?;
            let written = Instant::now();
            let mesh = kube::Mesh::write(client, &args).await?;
            println!(
                "wrote {} Services with their pods and EndpointSlices in {:.1}s",
                args.services,
                written.elapsed().as_secs_f64()
            );
            (PathBuf::new(), Some(mesh))
        }
        (Some(dir), None) => {
            let file = dir.join("loadgen-mesh.yaml");
            write_mesh(&file, mesh_yaml(&args, 0, 0))?;
            (file, None)
        }
        (None, None) => anyhow::bail!("--config-dir or --kubeconfig is required"),
    };
    // Wait for the daemon to serve the generated services: in files mode, this run's mesh (its
    // marker), not a mesh of the same size an earlier run left in the directory. Proxies that
    // synced with that one would already hold what this run's changes add.
    let started = Instant::now();
    let marker = marker_host(run_id());
    loop {
        let loaded = metric(
            &scrape(args.monitoring_addr, "/metrics").await,
            "pilot_services ",
        ) >= args.services as f64;
        if loaded
            && (mesh.is_some()
                || scrape(args.monitoring_addr, "/debug/registryz")
                    .await
                    .contains(&marker))
        {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(args.patience_seconds),
            "the daemon did not load the {} services of this run (marker {marker}) in {} s",
            args.services,
            args.patience_seconds
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "loaded {} services in {:.1}s",
        args.services,
        started.elapsed().as_secs_f64()
    );

    let (target, mut trigger) = if args.replay {
        let replay = ReplayProcess::start().await?;
        (replay.addr, Some(replay))
    } else {
        (args.xds_addr, None)
    };

    let (tx, mut rx) = mpsc::unbounded_channel();
    let cluster = WATCHED_CLUSTER.get_or_init(|| moved_cluster(&args));
    let (mut envoy, mut all, mut watch_svc0) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    // Proxies are dealt round a 100-slot wheel: the first slots gRPC, the next Delta, the rest SotW.
    let kinds: Vec<(bool, bool)> = (0..args.proxies)
        .map(|i| {
            let slot = i % 100;
            // The replay serves no gRPC clients: their slots are SotW Envoys there.
            let grpc_slot = slot < args.grpc_percent;
            let grpc = !args.replay && grpc_slot;
            let delta = !grpc_slot
                && slot < args.grpc_percent + (100 - args.grpc_percent) * args.delta_percent / 100;
            (grpc, delta)
        })
        .collect();
    let delta = kinds.iter().filter(|(_, d)| *d).count();
    for (i, (grpc, _)) in kinds.iter().enumerate() {
        all.insert(i);
        if !grpc {
            envoy.insert(i);
        }
        if watches(i, 0, &args, *grpc) {
            watch_svc0.insert(i);
        }
    }
    // Who limits the sync: the generator and the server it measures share the machine's cores.
    let sync_cpu_before = (
        rudder::metrics::process_cpu_seconds(),
        server_cpu_seconds(&args, trigger.as_ref()).await,
    );
    let connect_start = Instant::now();
    // Proxies connect from a task of their own, so their first responses are counted (and let go)
    // while the rest are still connecting.
    let connecting = {
        let (args, tx) = (args.clone(), tx.clone());
        tokio::spawn(async move { connect_proxies(args, target, kinds, tx, connect_start).await })
    };
    let ramp = args
        .connects_per_second
        .filter(|r| *r > 0.0)
        .map_or(Duration::ZERO, |rate| {
            Duration::from_secs_f64(args.proxies as f64 / rate)
        });
    let mut received = Received::default();
    let patience = Duration::from_secs(args.patience_seconds);
    // Connected and synced: every proxy got its endpoints.
    let (synced, ok) = collect(
        &mut rx,
        &all,
        EDS,
        connect_start,
        |_| true,
        &mut received,
        ramp + patience,
    )
    .await;
    connecting.await??;
    let synced_in = connect_start.elapsed().as_secs_f64();
    println!(
        "proxies: {} ({} Envoy-like, {delta} of them Delta, {} gRPC), connected and synced {}/{} in {synced_in:.1}s",
        args.proxies,
        envoy.len(),
        all.len() - envoy.len(),
        synced.len(),
        args.proxies,
    );
    let sync_cpu = (
        rudder::metrics::process_cpu_seconds() - sync_cpu_before.0,
        server_cpu_seconds(&args, trigger.as_ref()).await - sync_cpu_before.1,
    );
    println!(
        "while syncing: load generator CPU {:.1} s, server CPU {:.1} s",
        sync_cpu.0, sync_cpu.1
    );
    if let Some(lost) = STREAMS.report() {
        println!("{lost}");
    }
    if !ok {
        not_converged(&args, &synced, &all).await;
    }
    anyhow::ensure!(ok, "not every proxy synced");
    if let Some(mesh) = mesh {
        let watchers = kube::Watchers::new(&args, &envoy, &all);
        let report = kube::churn(mesh, watchers, &mut rx, &mut received).await?;
        if let Some(path) = &args.json {
            let report = serde_json::json!({
                "mode": "kubernetes",
                "proxies": args.proxies,
                "services": args.services,
                "namespaces": args.namespaces,
                "sidecar_scope": args.sidecar_scope,
                "connect_and_sync_s": synced_in,
                "loadgen_cpu_while_syncing_s": sync_cpu.0,
                "server_cpu_while_syncing_s": sync_cpu.1,
                "churn": report,
            });
            std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
        }
        return Ok(());
    }
    let before = scrape(args.monitoring_addr, "/metrics").await;
    let own_cpu_before = rudder::metrics::process_cpu_seconds();
    let replay_cpu_before = trigger.as_ref().map_or(0.0, |r| r.cpu_seconds());

    if args.attackers > 0 {
        attack::spawn(args.attackers, &args.attack_kinds, target)?;
        println!("attackers: {} started", args.attackers);
    }
    let (mut full_e2e, mut full_push, mut eds_e2e, mut eds_push) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut eds_push_p99s: Vec<f64> = Vec::new();
    let churn_start = Instant::now();
    let received_before = received;
    let quiet = Duration::from_millis(args.settle_ms);
    let soak = Duration::from_secs(args.soak_seconds);
    let mut rss: Vec<(f64, f64)> = Vec::new();
    let mut k = 0usize;
    loop {
        k += 1;
        let more = if soak.is_zero() {
            k <= args.changes
        } else {
            churn_start.elapsed() < soak
        };
        if !more {
            break;
        }
        if !soak.is_zero()
            && rss
                .last()
                .is_none_or(|(t, _)| churn_start.elapsed().as_secs_f64() - t >= 30.0)
        {
            let text = scrape(args.monitoring_addr, "/metrics").await;
            rss.push((
                churn_start.elapsed().as_secs_f64(),
                metric(&text, "process_resident_memory_bytes") / 1048576.0,
            ));
        }
        settle(&mut rx, quiet, &mut received).await;
        // The mesh keeps the services of `churn` full pushes; with `--endpoint-only`, none.
        let churn = if args.endpoint_only && trigger.is_none() {
            0
        } else {
            k
        };
        // With `--replay --endpoint-only` the replay server sends the endpoint pushes.
        if !(args.endpoint_only && trigger.is_some()) {
            // Full push: a new service every Envoy-like proxy must learn about.
            let (t0, t0_wall) = (Instant::now(), wall_ms());
            if let Some(trigger) = &mut trigger {
                trigger.push(k as u64).await?;
            } else if churn > 0 {
                write_mesh(&file, mesh_yaml(&args, churn, k - 1))?;
            }
            // A proxy has the push once its CDS has the new service: a CDS of an earlier push
            // still in flight (the daemon loading the mesh this run wrote at its start, say) does
            // not count. The replay sends one captured CDS, so any counts.
            let new_step = u32::try_from(churn).ok();
            let replaying = trigger.is_some();
            let has_new_service = |s: &Seen| replaying || s.newest_churn >= new_step;
            let (got, ok) = if churn > 0 || replaying {
                collect(
                    &mut rx,
                    &envoy,
                    CDS,
                    t0,
                    has_new_service,
                    &mut received,
                    patience,
                )
                .await
            } else {
                (HashMap::new(), true)
            };
            if !ok {
                not_converged(&args, &got, &envoy).await;
            }
            anyhow::ensure!(
                ok,
                "full push {k}: only {}/{} proxies converged",
                got.len(),
                envoy.len()
            );
            let push_start = daemon_push_start(&args, trigger.is_some(), t0_wall).await;
            for (at, wall) in got.values() {
                full_e2e.push(at.duration_since(t0).as_secs_f64());
                if let Some(p) = push_start {
                    full_push.push(wall.saturating_sub(p) as f64 / 1000.0);
                }
            }
            if trigger.is_some() {
                continue;
            }
            settle(&mut rx, quiet, &mut received).await;
        }
        // Endpoint-only push: service 0's endpoint moves; every proxy watches it.
        let (t0, t0_wall) = (Instant::now(), wall_ms());
        match &mut trigger {
            Some(trigger) => trigger.push(k as u64).await?,
            None => write_mesh(&file, mesh_yaml(&args, churn, k))?,
        }
        // The daemon's push must carry the moved endpoint: a slow proxy may still be reading an
        // older response with service 0's endpoints in it (the replay sends one captured
        // assignment, so only its name is checked).
        let replaying = trigger.is_some();
        let (got, ok) = collect(
            &mut rx,
            &watch_svc0,
            EDS,
            t0,
            |s| {
                s.names.contains(cluster)
                    && (replaying || s.watched.as_ref().is_some_and(|a| has_moved_endpoint(a, k)))
            },
            &mut received,
            patience,
        )
        .await;
        if !ok {
            not_converged(&args, &got, &watch_svc0).await;
        }
        anyhow::ensure!(
            ok,
            "endpoint push {k}: only {}/{} watching proxies converged",
            got.len(),
            watch_svc0.len()
        );
        let push_start = daemon_push_start(&args, trigger.is_some(), t0_wall).await;
        let mut this_push = Vec::new();
        for (at, wall) in got.values() {
            let from_trigger = at.duration_since(t0).as_secs_f64();
            eds_e2e.push(from_trigger);
            match push_start {
                Some(p) => this_push.push(wall.saturating_sub(p) as f64 / 1000.0),
                None if trigger.is_some() => this_push.push(from_trigger),
                None => {}
            }
        }
        if !this_push.is_empty() {
            eds_push_p99s.push(percentile(this_push.clone(), 0.99) * 1000.0);
        }
        if trigger.is_none() {
            eds_push.extend(this_push);
        }
    }
    let churn = churn_start.elapsed().as_secs_f64();
    let after = scrape(args.monitoring_addr, "/metrics").await;
    if !rss.is_empty() {
        rss.push((
            churn,
            metric(&after, "process_resident_memory_bytes") / 1048576.0,
        ));
        let line: Vec<String> = rss.iter().map(|(t, m)| format!("{t:.0}s {m:.0}")).collect();
        println!(
            "daemon RSS over time (MiB): {} ({} changes)",
            line.join(", "),
            k - 1
        );
    }
    let ms = |v: &Vec<f64>, p: f64| percentile(v.clone(), p) * 1000.0;
    println!(
        "mode: {}",
        if args.replay && args.endpoint_only {
            "replay baseline (service 0's captured ClusterLoadAssignment, pre-encoded, to every stream)"
        } else if args.replay {
            "replay baseline (the captured CDS, EDS, LDS and RDS, pre-encoded, to every stream)"
        } else {
            "rudder"
        }
    );
    // The replay is measured from its trigger; the daemon from the config write that caused it.
    let origin = if trigger.is_some() {
        "trigger"
    } else {
        "write"
    };
    let from_origin = |kind: &str, samples: &Vec<f64>| {
        if !samples.is_empty() {
            println!(
                "{kind} push convergence, from the {origin}: p50 {:.0} ms, p99 {:.0} ms ({} samples)",
                ms(samples, 0.5),
                ms(samples, 0.99),
                samples.len()
            );
        }
    };
    from_origin("full", &full_e2e);
    if !full_push.is_empty() {
        println!(
            "full push convergence, from push start:   p50 {:.0} ms, p99 {:.0} ms",
            ms(&full_push, 0.5),
            ms(&full_push, 0.99)
        );
    }
    if !eds_e2e.is_empty() {
        from_origin("endpoint", &eds_e2e);
        if !eds_push.is_empty() {
            println!(
                "endpoint push convergence, from push start: p50 {:.0} ms, p99 {:.0} ms",
                ms(&eds_push, 0.5),
                ms(&eds_push, 0.99)
            );
        }
        let each: Vec<String> = eds_push_p99s.iter().map(|p| format!("{p:.0}")).collect();
        println!("endpoint push p99 of each push (ms): {}", each.join(" "));
    }
    let during = Received {
        responses: received.responses - received_before.responses,
        bytes: received.bytes - received_before.bytes,
    };
    println!(
        "responses received during churn: {} ({:.0}/s), {:.1} MiB",
        during.responses,
        during.responses as f64 / churn,
        during.bytes as f64 / 1048576.0
    );
    let sent: f64 = ["cds", "eds", "lds", "rds"]
        .iter()
        .map(|t| {
            let pushes = format!("pilot_xds_pushes{{type=\"{t}\"}}");
            metric(&after, &pushes) - metric(&before, &pushes)
        })
        .sum();
    println!(
        "daemon: {} xDS streams, {sent:.0} responses sent during churn, RSS {:.0} MiB, CPU {:.1} s total, {:.1} s during churn",
        metric(&after, "pilot_xds{"),
        metric(&after, "process_resident_memory_bytes") / 1048576.0,
        metric(&after, "process_cpu_seconds_total"),
        metric(&after, "process_cpu_seconds_total") - metric(&before, "process_cpu_seconds_total")
    );
    if let Some(errors) = daemon_errors(&after) {
        println!("{errors}");
    }
    if let Some(lost) = STREAMS.report() {
        println!("after churn, {lost}");
    }
    let own_cpu = rudder::metrics::process_cpu_seconds() - own_cpu_before;
    // The generator's own peak memory: what a run at this size needs of the machine beside the
    // daemon's.
    let own_peak_mib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0);
    println!(
        "load generator: CPU {own_cpu:.1} s during churn ({churn:.1} s of churn, settling included), peak RSS {own_peak_mib:.0} MiB"
    );
    let replay_cpu = trigger
        .as_ref()
        .map(|r| r.cpu_seconds() - replay_cpu_before);
    if let Some(cpu) = replay_cpu {
        println!("replay server: CPU {cpu:.1} s during churn");
    }
    if let Some(path) = &args.json {
        let summary = |v: &Vec<f64>| serde_json::json!({"p50_ms": ms(v, 0.5), "p99_ms": ms(v, 0.99), "samples": v.len()});
        let report = serde_json::json!({
            "mode": if args.replay { "replay" } else { "rudder" },
            "proxies": args.proxies,
            "services": args.services,
            "namespaces": args.namespaces,
            "sidecar_scope": args.sidecar_scope,
            "realistic": args.realistic,
            "delta_percent": args.delta_percent,
            "grpc_percent": args.grpc_percent,
            "connect_and_sync_s": synced_in,
            "loadgen_cpu_while_syncing_s": sync_cpu.0,
            "server_cpu_while_syncing_s": sync_cpu.1,
            "full_push_from_trigger": summary(&full_e2e),
            "full_push_from_push_start": summary(&full_push),
            "endpoint_push_from_write": summary(&eds_e2e),
            "endpoint_push_from_push_start": summary(&eds_push),
            "endpoint_push_p99_of_each_push_ms": eds_push_p99s,
            "responses_received_during_churn": during.responses,
            "bytes_received_during_churn": during.bytes,
            "daemon_rss_mib": metric(&after, "process_resident_memory_bytes") / 1048576.0,
            "daemon_cpu_during_churn_s": metric(&after, "process_cpu_seconds_total")
                - metric(&before, "process_cpu_seconds_total"),
            "loadgen_cpu_during_churn_s": own_cpu,
            "replay_cpu_during_churn_s": replay_cpu,
            "rss_over_time": rss.iter().map(|(t, m)| serde_json::json!({"s": t, "mib": m})).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// When the daemon started the push just measured, triggered at `since_ms`; `None` when
/// replaying (the replay has no push start: its pushes are measured from the trigger).
async fn daemon_push_start(args: &LoadgenArgs, replaying: bool, since_ms: u128) -> Option<u128> {
    if replaying {
        None
    } else {
        push_start_after(args, since_ms).await
    }
}

/// When the daemon started the first push at or after `since_ms` (wall clock, from
/// /debug/push_status): the push a change written then caused. Not the most recent push: when
/// the slowest proxies take minutes, another push may have started since.
async fn push_start_after(args: &LoadgenArgs, since_ms: u128) -> Option<u128> {
    let body = scrape(args.monitoring_addr, "/debug/push_status").await;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["pushes"]
        .as_array()?
        .iter()
        .filter_map(|p| p["at_unix_ms"].as_u64().map(u128::from))
        .filter(|&at| at >= since_ms)
        .min()
}

fn main() -> std::process::ExitCode {
    rudder::cmd::without_transparent_huge_pages();
    rudder::cmd::raise_fd_limit();
    let args = LoadgenArgs::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let work = async {
        if args.serve_replay {
            serve_replay(args).await
        } else {
            run(args).await
        }
    };
    // On a worker, not on the thread `block_on` parks: every simulated proxy wakes the collector
    // with each response it reads, and waking a parked thread is a futex call each time (7% of
    // the generator's CPU when it ran here).
    let done = runtime.block_on(async { tokio::spawn(work).await });
    match done {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: the load generator stopped: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        CHURN_PORT, bind_source, churn_host, churn_step, churn_step_of, endpoint_address,
        has_moved_endpoint, moved_octet, run_id,
    };
    use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address};
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
    };
    use prost::Message;

    fn assignment(address: &str) -> Vec<u8> {
        let endpoint = LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: address.into(),
                        port_specifier: Some(
                            envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(8000),
                        ),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        };
        ClusterLoadAssignment {
            cluster_name: "outbound|8000||svc-0".into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![endpoint],
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
    }

    /// Only this run's churn service clusters name a churn step: not another run's, whose
    /// services a daemon may still serve from the same directory.
    #[test]
    fn churn_step_is_read_from_this_runs_churn_service_cluster() {
        let cluster = |host: String| format!("outbound|{CHURN_PORT}||{host}");
        assert_eq!(
            churn_step(&cluster(churn_host(14, run_id(), "ns-3"))),
            Some(14)
        );
        assert_eq!(
            churn_step_of(
                "outbound|7000||churn-14-0badcafe.ns-3.svc.cluster.local",
                "0badcafe"
            ),
            Some(14)
        );
        for other in [
            cluster(churn_host(14, "0badcafe", "ns-3")),
            cluster(churn_host(14, &format!("{}0", run_id()), "ns-3")),
            format!("outbound|7000||svc-14-{}.ns-3.svc.cluster.local", run_id()),
            format!(
                "outbound|7000|v1|churn-14-{}.ns-3.svc.cluster.local",
                run_id()
            ),
            format!("outbound|80||churn-14-{}.ns-3.svc.cluster.local", run_id()),
            format!("outbound|7000||churn-x-{}.ns-3.svc.cluster.local", run_id()),
            "outbound|7000||churn-14.ns-3.svc.cluster.local".to_string(),
        ] {
            assert_eq!(churn_step(&other), None, "{other}");
        }
    }

    /// An endpoint push counts only with its own endpoint: not an older one, nor one whose
    /// address merely starts with it.
    #[test]
    fn the_moved_endpoint_is_matched_as_a_whole_address() {
        let push = 5;
        let moved = endpoint_address(0, moved_octet(push));
        assert!(has_moved_endpoint(&assignment(&moved), push));
        assert!(!has_moved_endpoint(&assignment(&moved), push + 1));
        assert!(!has_moved_endpoint(&assignment(&format!("{moved}0")), push));
    }

    /// With the port left to `connect`, connections still leave from the source address asked
    /// for (`--source-addresses` spreads them over several), each on a port of its own.
    #[tokio::test]
    async fn connections_leave_from_their_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let (mut ports, mut open) = (std::collections::HashSet::new(), Vec::new());
        for _ in 0..3 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            bind_source(&socket, std::net::Ipv4Addr::new(127, 0, 0, 2)).unwrap();
            let stream = socket.connect(target).await.unwrap();
            let (accepted, from) = listener.accept().await.unwrap();
            assert_eq!(from.ip(), std::net::Ipv4Addr::new(127, 0, 0, 2));
            assert_eq!(stream.local_addr().unwrap(), from);
            assert!(ports.insert(from.port()));
            open.push((stream, accepted));
        }
    }
}
