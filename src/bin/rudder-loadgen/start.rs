//! The start of a run: the mesh written (files, or objects in Kubernetes), the daemon seen to
//! serve it, the proxies planned, connected and synced.

use super::*;

/// Writes this run's mesh: a file in the config directory, or Services with their pods and
/// EndpointSlices in each cluster (`--kubeconfig`, `--remote-kubeconfig`).
pub(crate) async fn write_mesh_for_run(
    args: &LoadgenArgs,
) -> anyhow::Result<(PathBuf, Option<Vec<kube::Mesh>>)> {
    Ok(match (&args.config_dir, &args.kubeconfig) {
        (_, Some(kubeconfig)) => {
            let written = Instant::now();
            let mut meshes = Vec::new();
            for (index, path) in std::iter::once(kubeconfig)
                .chain(args.remote_kubeconfigs.iter())
                .enumerate()
            {
                let client = rudder::k8s::client(Some(path)).await?;
                meshes.push(kube::Mesh::write(client, index as u32, args).await?);
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
            write_mesh(&file, mesh_yaml(args, 0, 0))?;
            (file, None)
        }
        (None, None) => anyhow::bail!("--config-dir or --kubeconfig is required"),
    })
}

/// Waits for the daemon to serve the generated services: in files mode, this run's mesh (its
/// marker), not a mesh of the same size an earlier run left in the directory. Proxies that
/// synced with that one would already hold what this run's changes add.
pub(crate) async fn wait_until_loaded(
    args: &LoadgenArgs,
    in_kubernetes: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let marker = marker_host(run_id());
    loop {
        let loaded = metric(
            &scrape(args.monitoring_addr, "/metrics").await,
            "pilot_services ",
        ) >= args.services as f64;
        if loaded
            && (in_kubernetes
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

    Ok(())
}

/// Which simulated proxy is which: dealt round a 100-slot wheel, the first slots gRPC, the next
/// Delta, the rest SotW.
pub(crate) struct ProxyPlan {
    /// Per proxy: (gRPC, Delta).
    pub kinds: Vec<(bool, bool)>,
    pub delta: usize,
    /// The Envoy-like proxies (not gRPC).
    pub envoy: BTreeSet<usize>,
    pub all: BTreeSet<usize>,
    /// The proxies that watch service 0, whose endpoint the endpoint pushes move.
    pub watch_svc0: BTreeSet<usize>,
}

impl ProxyPlan {
    pub(crate) fn of(args: &LoadgenArgs) -> ProxyPlan {
        let (mut envoy, mut all, mut watch_svc0) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let kinds: Vec<(bool, bool)> = (0..args.proxies)
            .map(|i| {
                let slot = i % 100;
                // The replay serves no gRPC clients: their slots are SotW Envoys there.
                let grpc_slot = slot < args.grpc_percent;
                let grpc = !args.replay && grpc_slot;
                let delta = !grpc_slot
                    && slot
                        < args.grpc_percent + (100 - args.grpc_percent) * args.delta_percent / 100;
                (grpc, delta)
            })
            .collect();
        let delta = kinds.iter().filter(|(_, d)| *d).count();
        for (i, (grpc, _)) in kinds.iter().enumerate() {
            all.insert(i);
            if !grpc {
                envoy.insert(i);
            }
            if watches(i, 0, args, *grpc) {
                watch_svc0.insert(i);
            }
        }
        ProxyPlan {
            kinds,
            delta,
            envoy,
            all,
            watch_svc0,
        }
    }
}

/// How the proxies connected and synced.
pub(crate) struct Synced {
    pub synced_in: f64,
    /// CPU seconds while syncing: the load generator's, the server's.
    pub cpu: (f64, f64),
}

impl Synced {
    /// The `--json` report's first fields: the run's mode and size, and how it synced.
    pub(crate) fn report(
        &self,
        args: &LoadgenArgs,
        mode: &str,
    ) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        serde_json::Map::from_iter([
            ("mode".to_string(), json!(mode)),
            ("proxies".to_string(), json!(args.proxies)),
            ("services".to_string(), json!(args.services)),
            ("namespaces".to_string(), json!(args.namespaces)),
            ("sidecar_scope".to_string(), json!(args.sidecar_scope)),
            ("connect_and_sync_s".to_string(), json!(self.synced_in)),
            ("loadgen_cpu_while_syncing_s".to_string(), json!(self.cpu.0)),
            ("server_cpu_while_syncing_s".to_string(), json!(self.cpu.1)),
        ])
    }
}

/// Connects every planned proxy (at `--connects-per-second`) and waits until each got its
/// endpoints; an error when not every proxy synced.
pub(crate) async fn connect_and_sync(
    args: &Arc<LoadgenArgs>,
    target: SocketAddr,
    plan: &ProxyPlan,
    tx: mpsc::UnboundedSender<Seen>,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    received: &mut Received,
    trigger: Option<&ReplayProcess>,
) -> anyhow::Result<Synced> {
    let (envoy, all, delta) = (&plan.envoy, &plan.all, plan.delta);
    // The cluster endpoint pushes move: the proxies keep its assignment from the first response.
    WATCHED_CLUSTER.get_or_init(|| moved_cluster(args));
    // Who limits the sync: the generator and the server it measures share the machine's cores.
    let sync_cpu_before = (
        rudder::metrics::process_cpu_seconds(),
        server_cpu_seconds(args, trigger).await,
    );
    let connect_start = Instant::now();
    // Proxies connect from a task of their own, so their first responses are counted (and let go)
    // while the rest are still connecting.
    let connecting = {
        let (args, kinds) = (args.clone(), plan.kinds.clone());
        tokio::spawn(async move { connect_proxies(args, target, kinds, tx, connect_start).await })
    };
    let ramp = args
        .connects_per_second
        .filter(|r| *r > 0.0)
        .map_or(Duration::ZERO, |rate| {
            Duration::from_secs_f64(args.proxies as f64 / rate)
        });
    let patience = Duration::from_secs(args.patience_seconds);
    // Connected and synced: every proxy got its endpoints.
    let (synced, ok) = collect(
        rx,
        all,
        EDS,
        connect_start,
        |_| true,
        received,
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
        server_cpu_seconds(args, trigger).await - sync_cpu_before.1,
    );
    println!(
        "while syncing: load generator CPU {:.1} s, server CPU {:.1} s",
        sync_cpu.0, sync_cpu.1
    );
    if let Some(lost) = STREAMS.report() {
        println!("{lost}");
    }
    if !ok {
        not_converged(args, &synced, all).await;
    }
    anyhow::ensure!(ok, "not every proxy synced");
    Ok(Synced {
        synced_in,
        cpu: sync_cpu,
    })
}
