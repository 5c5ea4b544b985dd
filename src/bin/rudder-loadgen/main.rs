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
use rudder::xds::intern::{self, Interner};
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

mod attack;
mod churn;
mod digest;
mod kube;
mod light;
mod measure;
mod mesh;
mod proxies;
mod replay;
mod start;
use measure::*;
use mesh::*;
use proxies::*;
use replay::*;

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
    #[arg(long, conflicts_with_all = ["config_dir", "replay", "realistic", "soak_seconds", "attackers", "endpoint_only", "gateway_api_routes"])]
    pub kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig`: remote clusters (comma-separated kubeconfigs) the daemon reads through
    /// remote secrets: each gets the same Services with pods of its own, and the churn goes round
    /// the clusters (docs/performance.md, several clusters).
    #[arg(long, value_delimiter = ',', requires = "kubeconfig")]
    pub remote_kubeconfigs: Vec<PathBuf>,
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
    /// The Envoy-like proxies report istio-proxy's telemetry filters (`node.extensions`), so
    /// they are sent Istio's standard metrics config; files mode also names the Prometheus
    /// default metrics provider, as the istiod chart does.
    #[arg(long)]
    pub istio_proxy: bool,
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
    /// Also write this many Gateway API HTTPRoutes, spread over `--gateway-api-gateways`
    /// Gateways (class istio) in the first namespace, each route a hostname of its own with a
    /// path match and a weighted split to two of the mesh's services.
    #[arg(long, default_value_t = 0)]
    pub gateway_api_routes: usize,
    /// The Gateways `--gateway-api-routes` attach to.
    #[arg(long, default_value_t = 50)]
    pub gateway_api_gateways: usize,
    /// Of `--proxies`, how many are those Gateways' pods (dealt round the Gateways), asking for
    /// a gateway's listeners and routes; they are SotW or Delta as the rest are.
    #[arg(long, default_value_t = 0)]
    pub gateway_proxies: usize,
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

/// One run: the mesh written and loaded, the proxies connected and synced, then the changes of
/// the Kubernetes churn, or the file (or replay) churn with its report.
async fn run(args: LoadgenArgs) -> anyhow::Result<()> {
    let args = Arc::new(args);
    let (file, mesh) = start::write_mesh_for_run(&args).await?;
    start::wait_until_loaded(&args, mesh.is_some()).await?;
    let (target, mut trigger) = if args.replay {
        let replay = ReplayProcess::start().await?;
        (replay.addr, Some(replay))
    } else {
        (args.xds_addr, None)
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let plan = start::ProxyPlan::of(&args);
    let mut received = Received::default();
    let sync = start::connect_and_sync(
        &args,
        target,
        &plan,
        tx.clone(),
        &mut rx,
        &mut received,
        trigger.as_ref(),
    )
    .await?;
    if let Some(mesh) = mesh {
        let watchers = kube::Watchers::new(&args, &plan.envoy, &plan.all);
        let report = kube::churn(mesh, watchers, &mut rx, &mut received).await?;
        if let Some(path) = &args.json {
            let mut fields = sync.report(&args, "kubernetes");
            fields.insert("churn".into(), report);
            std::fs::write(path, serde_json::to_vec_pretty(&fields)?)?;
        }
        return Ok(());
    }
    let before = churn::Before::now(&args, trigger.as_ref()).await;
    if args.attackers > 0 {
        attack::spawn(args.attackers, &args.attack_kinds, target)?;
        println!("attackers: {} started", args.attackers);
    }
    let received_before = received;
    let samples = churn::run(&args, &file, &plan, &mut trigger, &mut rx, &mut received).await?;
    let during = Received {
        responses: received.responses - received_before.responses,
        bytes: received.bytes - received_before.bytes,
    };
    churn::report(&args, &sync, &before, &samples, during, trigger.as_ref()).await?;
    drop(tx);
    Ok(())
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
