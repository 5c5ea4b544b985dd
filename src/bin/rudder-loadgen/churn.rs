//! The file (or replay) churn: full pushes (a new service) and endpoint pushes (service 0's
//! endpoint moves), each measured until every proxy that must see it did; then the report.

use super::start::{ProxyPlan, Synced};
use super::*;

/// What the daemon (and the replay) had used before the churn, to report what the churn cost.
pub(crate) struct Before {
    metrics: String,
    own_cpu: f64,
    replay_cpu: f64,
}

impl Before {
    pub(crate) async fn now(args: &LoadgenArgs, trigger: Option<&ReplayProcess>) -> Before {
        Before {
            metrics: scrape(args.monitoring_addr, "/metrics").await,
            own_cpu: rudder::metrics::process_cpu_seconds(),
            replay_cpu: trigger.map_or(0.0, |r| r.cpu_seconds()),
        }
    }
}

/// Convergence times of the churn, in seconds, and the daemon's memory over a soak.
#[derive(Default)]
pub(crate) struct Samples {
    full_e2e: Vec<f64>,
    full_push: Vec<f64>,
    eds_e2e: Vec<f64>,
    eds_push: Vec<f64>,
    /// The p99 of each endpoint push, in ms.
    eds_push_p99s: Vec<f64>,
    /// (seconds into the churn, MiB).
    rss: Vec<(f64, f64)>,
    changes: usize,
    churn_s: f64,
}

/// The changes of a run: `--changes` of them, or as many as `--soak-seconds` allow.
pub(crate) async fn run(
    args: &LoadgenArgs,
    file: &std::path::Path,
    plan: &ProxyPlan,
    trigger: &mut Option<ReplayProcess>,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    received: &mut Received,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::default();
    let churn_start = Instant::now();
    let quiet = Duration::from_millis(args.settle_ms);
    let soak = Duration::from_secs(args.soak_seconds);
    let mut round = Round {
        args,
        file,
        plan,
        trigger,
        rx,
        received,
        samples: &mut samples,
    };
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
            && round
                .samples
                .rss
                .last()
                .is_none_or(|(t, _)| churn_start.elapsed().as_secs_f64() - t >= 30.0)
        {
            let text = scrape(args.monitoring_addr, "/metrics").await;
            round.samples.rss.push((
                churn_start.elapsed().as_secs_f64(),
                metric(&text, "process_resident_memory_bytes") / 1048576.0,
            ));
        }
        settle(round.rx, quiet, round.received).await;
        let replaying = round.trigger.is_some();
        // The mesh keeps the services of `churn` full pushes; with `--endpoint-only`, none.
        let churn = if args.endpoint_only && !replaying {
            0
        } else {
            k
        };
        // With `--replay --endpoint-only` the replay server sends the endpoint pushes.
        if !(args.endpoint_only && replaying) {
            round.full_push(k, churn).await?;
            if replaying {
                continue;
            }
            settle(round.rx, quiet, round.received).await;
        }
        round.endpoint_push(k, churn).await?;
    }
    samples.changes = k - 1;
    samples.churn_s = churn_start.elapsed().as_secs_f64();
    Ok(samples)
}

/// One change of the churn: what it writes (or triggers), whom it waits for, where it records.
struct Round<'a> {
    args: &'a LoadgenArgs,
    file: &'a std::path::Path,
    plan: &'a ProxyPlan,
    trigger: &'a mut Option<ReplayProcess>,
    rx: &'a mut mpsc::UnboundedReceiver<Seen>,
    received: &'a mut Received,
    samples: &'a mut Samples,
}

impl Round<'_> {
    /// Full push `k`: a new service every Envoy-like proxy must learn about (`churn` services in
    /// the mesh).
    async fn full_push(&mut self, k: usize, churn: usize) -> anyhow::Result<()> {
        let (args, file, plan) = (self.args, self.file, self.plan);
        let envoy = &plan.envoy;
        let patience = Duration::from_secs(args.patience_seconds);
        let (t0, t0_wall) = (Instant::now(), wall_ms());
        if let Some(trigger) = self.trigger.as_mut() {
            trigger.push(k as u64).await?;
        } else if churn > 0 {
            write_mesh(file, mesh_yaml(args, churn, k - 1))?;
        }
        // A proxy has the push once its CDS has the new service: a CDS of an earlier push
        // still in flight (the daemon loading the mesh this run wrote at its start, say) does
        // not count. The replay sends one captured CDS, so any counts.
        let new_step = u32::try_from(churn).ok();
        let replaying = self.trigger.is_some();
        let has_new_service = |s: &Seen| replaying || s.newest_churn >= new_step;
        let (got, ok) = if churn > 0 || replaying {
            collect(
                self.rx,
                envoy,
                CDS,
                t0,
                has_new_service,
                self.received,
                patience,
            )
            .await
        } else {
            (HashMap::new(), true)
        };
        if !ok {
            not_converged(args, &got, envoy).await;
        }
        anyhow::ensure!(
            ok,
            "full push {k}: only {}/{} proxies converged",
            got.len(),
            envoy.len()
        );
        let push_start = daemon_push_start(args, replaying, t0_wall).await;
        for (at, wall) in got.values() {
            self.samples
                .full_e2e
                .push(at.duration_since(t0).as_secs_f64());
            if let Some(p) = push_start {
                self.samples
                    .full_push
                    .push(wall.saturating_sub(p) as f64 / 1000.0);
            }
        }
        Ok(())
    }

    /// Endpoint push `k`: service 0's endpoint moves; every proxy watches it.
    async fn endpoint_push(&mut self, k: usize, churn: usize) -> anyhow::Result<()> {
        let (args, file, plan) = (self.args, self.file, self.plan);
        let watch_svc0 = &plan.watch_svc0;
        let cluster = WATCHED_CLUSTER.get_or_init(|| moved_cluster(args));
        let patience = Duration::from_secs(args.patience_seconds);
        let (t0, t0_wall) = (Instant::now(), wall_ms());
        match self.trigger.as_mut() {
            Some(trigger) => trigger.push(k as u64).await?,
            None => write_mesh(file, mesh_yaml(args, churn, k))?,
        }
        // The daemon's push must carry the moved endpoint: a slow proxy may still be reading an
        // older response with service 0's endpoints in it (the replay sends one captured
        // assignment, so only its name is checked).
        let replaying = self.trigger.is_some();
        let (got, ok) = collect(
            self.rx,
            watch_svc0,
            EDS,
            t0,
            |s| {
                s.names.contains(cluster)
                    && (replaying || s.watched.as_ref().is_some_and(|a| has_moved_endpoint(a, k)))
            },
            self.received,
            patience,
        )
        .await;
        if !ok {
            not_converged(args, &got, watch_svc0).await;
        }
        anyhow::ensure!(
            ok,
            "endpoint push {k}: only {}/{} watching proxies converged",
            got.len(),
            watch_svc0.len()
        );
        let push_start = daemon_push_start(args, replaying, t0_wall).await;
        let mut this_push = Vec::new();
        for (at, wall) in got.values() {
            let from_trigger = at.duration_since(t0).as_secs_f64();
            self.samples.eds_e2e.push(from_trigger);
            match push_start {
                Some(p) => this_push.push(wall.saturating_sub(p) as f64 / 1000.0),
                None if replaying => this_push.push(from_trigger),
                None => {}
            }
        }
        if !this_push.is_empty() {
            self.samples
                .eds_push_p99s
                .push(percentile(this_push.clone(), 0.99) * 1000.0);
        }
        if !replaying {
            self.samples.eds_push.extend(this_push);
        }
        Ok(())
    }
}

/// Prints what the churn measured (convergence from the write or trigger and from the daemon's
/// push start, responses, the daemon's and the generator's CPU and memory) and writes `--json`.
pub(crate) async fn report(
    args: &LoadgenArgs,
    sync: &Synced,
    before: &Before,
    samples: &Samples,
    during: Received,
    trigger: Option<&ReplayProcess>,
) -> anyhow::Result<()> {
    let churn = samples.churn_s;
    let mut rss = samples.rss.clone();
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
            samples.changes
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
    from_origin("full", &samples.full_e2e);
    if !samples.full_push.is_empty() {
        println!(
            "full push convergence, from push start:   p50 {:.0} ms, p99 {:.0} ms",
            ms(&samples.full_push, 0.5),
            ms(&samples.full_push, 0.99)
        );
    }
    if !samples.eds_e2e.is_empty() {
        from_origin("endpoint", &samples.eds_e2e);
        if !samples.eds_push.is_empty() {
            println!(
                "endpoint push convergence, from push start: p50 {:.0} ms, p99 {:.0} ms",
                ms(&samples.eds_push, 0.5),
                ms(&samples.eds_push, 0.99)
            );
        }
        let each: Vec<String> = samples
            .eds_push_p99s
            .iter()
            .map(|p| format!("{p:.0}"))
            .collect();
        println!("endpoint push p99 of each push (ms): {}", each.join(" "));
    }
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
            metric(&after, &pushes) - metric(&before.metrics, &pushes)
        })
        .sum();
    println!(
        "daemon: {} xDS streams, {sent:.0} responses sent during churn, RSS {:.0} MiB, CPU {:.1} s total, {:.1} s during churn",
        metric(&after, "pilot_xds{"),
        metric(&after, "process_resident_memory_bytes") / 1048576.0,
        metric(&after, "process_cpu_seconds_total"),
        metric(&after, "process_cpu_seconds_total")
            - metric(&before.metrics, "process_cpu_seconds_total")
    );
    if let Some(errors) = daemon_errors(&after) {
        println!("{errors}");
    }
    if let Some(lost) = STREAMS.report() {
        println!("after churn, {lost}");
    }
    let own_cpu = rudder::metrics::process_cpu_seconds() - before.own_cpu;
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
    let replay_cpu = trigger.map(|r| r.cpu_seconds() - before.replay_cpu);
    if let Some(cpu) = replay_cpu {
        println!("replay server: CPU {cpu:.1} s during churn");
    }
    let cost = Cost {
        rss,
        during,
        own_cpu,
        replay_cpu,
        after,
    };
    write_json(args, sync, samples, &cost, before)
}

/// What the churn cost, as the report reads it.
struct Cost {
    /// The daemon's memory over the churn (seconds, MiB), its end included.
    rss: Vec<(f64, f64)>,
    during: Received,
    own_cpu: f64,
    replay_cpu: Option<f64>,
    /// The daemon's metrics after the churn.
    after: String,
}

/// The run's figures as JSON (`--json`), for scripts/plot.py and docs/performance.md.
fn write_json(
    args: &LoadgenArgs,
    sync: &Synced,
    samples: &Samples,
    cost: &Cost,
    before: &Before,
) -> anyhow::Result<()> {
    let Cost {
        rss,
        during,
        own_cpu,
        replay_cpu,
        after,
    } = cost;
    let ms = |v: &Vec<f64>, p: f64| percentile(v.clone(), p) * 1000.0;
    if let Some(path) = &args.json {
        let summary = |v: &Vec<f64>| serde_json::json!({"p50_ms": ms(v, 0.5), "p99_ms": ms(v, 0.99), "samples": v.len()});
        let mut fields = sync.report(args, if args.replay { "replay" } else { "rudder" });
        let churn = serde_json::json!({
            "realistic": args.realistic,
            "delta_percent": args.delta_percent,
            "grpc_percent": args.grpc_percent,
            "istio_proxy": args.istio_proxy,
            "full_push_from_trigger": summary(&samples.full_e2e),
            "full_push_from_push_start": summary(&samples.full_push),
            "endpoint_push_from_write": summary(&samples.eds_e2e),
            "endpoint_push_from_push_start": summary(&samples.eds_push),
            "endpoint_push_p99_of_each_push_ms": samples.eds_push_p99s,
            "responses_received_during_churn": during.responses,
            "bytes_received_during_churn": during.bytes,
            "daemon_rss_mib": metric(after, "process_resident_memory_bytes") / 1048576.0,
            "daemon_cpu_during_churn_s": metric(after, "process_cpu_seconds_total")
                - metric(&before.metrics, "process_cpu_seconds_total"),
            "loadgen_cpu_during_churn_s": own_cpu,
            "replay_cpu_during_churn_s": replay_cpu,
            "rss_over_time": rss.iter().map(|(t, m)| serde_json::json!({"s": t, "mib": m})).collect::<Vec<_>>(),
        });
        if let serde_json::Value::Object(churn) = churn {
            fields.extend(churn);
        }
        std::fs::write(path, serde_json::to_vec_pretty(&fields)?)?;
    }
    Ok(())
}
