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
mod digest;
mod kube;
mod light;
mod measure;
mod mesh;
mod proxies;
mod replay;
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

async fn run(args: LoadgenArgs) -> anyhow::Result<()> {
    let args = Arc::new(args);
    let (file, mesh) = match (&args.config_dir, &args.kubeconfig) {
        (_, Some(kubeconfig)) => {
            let written = Instant::now();
            let mut meshes = Vec::new();
            for (index, path) in std::iter::once(kubeconfig)
                .chain(args.remote_kubeconfigs.iter())
                .enumerate()
            {
                let client = rudder::k8s::client(Some(path)).await?;
                meshes.push(kube::Mesh::write(client, index as u32, &args).await?);
            }
            println!(
                "wrote {} Services with their pods and EndpointSlices in {} cluster(s) in {:.1}s",
                args.services,
                meshes.len(),
                written.elapsed().as_secs_f64()
            );
            (PathBuf::new(), Some(meshes))
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
            "istio_proxy": args.istio_proxy,
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
