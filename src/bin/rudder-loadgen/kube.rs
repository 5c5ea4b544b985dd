//! The Kubernetes-sourced mesh (`--kubeconfig`): Services, pods and EndpointSlices written to the API
//! server the daemon watches, then churned as clusters churn: deployments scaling up and down (one
//! EndpointSlice update per event, at `--scale-rate`), a rolling restart of `--restart-pods` pods,
//! and new Services. Endpoint convergence is timed per event and per watching proxy, from the moment
//! the EndpointSlice write was sent until the proxy holds a ClusterLoadAssignment that shows it.
//!
//! Services have no selector and their slices are labelled as managed by the generator, so on a
//! real cluster no controller rewrites them; pods name a scheduler that does not exist, so none is
//! scheduled or run.

use super::{
    CDS, EDS, LoadgenArgs, Received, Seen, collect, host, metric, ns, percentile, push_start_after,
    scrape, settle,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Concurrent API writes while the mesh is first written.
const SETUP_CONCURRENCY: usize = 32;
/// An event not seen by every watching proxy this long after its write is counted as unconverged.
const CONVERGE_LIMIT: Duration = Duration::from_secs(30);
/// The generator's label on what it writes, so a real cluster's controllers leave it alone.
const MANAGED_BY: &str = "rudder-loadgen";

/// The generated mesh in the API server: each service's pods, in slice order.
pub struct Mesh {
    client: kube::Client,
    pods: Vec<Vec<(String, String)>>,
    next_pod: u32,
    /// API writes made (creates, replaces, deletes), and EndpointSlice writes among them.
    writes: u64,
    slice_writes: u64,
}

/// A pod IP no other pod of the run had.
fn pod_ip(n: u32) -> String {
    format!("10.{}.{}.{}", 64 + (n >> 16) % 128, (n >> 8) & 255, n & 255)
}

/// Service `j`'s port: the file mesh's, so both meshes have the same cluster names.
fn port(j: usize) -> usize {
    8000 + (j % 50)
}

pub fn cluster(j: usize, args: &LoadgenArgs) -> String {
    format!("outbound|{}||{}", port(j), host(j, args.namespaces))
}

fn ok_if_exists<T>(r: Result<T, kube::Error>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Mesh {
    fn pod_api(&self, j: usize, args: &LoadgenArgs) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &ns(j, args.namespaces))
    }

    fn slice_api(&self, j: usize, args: &LoadgenArgs) -> Api<EndpointSlice> {
        Api::namespaced(self.client.clone(), &ns(j, args.namespaces))
    }

    fn new_pod(&mut self, j: usize) -> (String, String) {
        let n = self.next_pod;
        self.next_pod += 1;
        (format!("svc-{j}-{n}"), pod_ip(n))
    }

    fn pod(j: usize, name: &str, ip: &str, args: &LoadgenArgs) -> anyhow::Result<Pod> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns(j, args.namespaces),
                         "labels": {"app": format!("svc-{j}"), "app.kubernetes.io/managed-by": MANAGED_BY}},
            "spec": {"schedulerName": "rudder-loadgen-unscheduled", "serviceAccountName": "default",
                     "containers": [{"name": "app", "image": "registry.invalid/app"}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))?)
    }

    fn slice(&self, j: usize, args: &LoadgenArgs) -> anyhow::Result<EndpointSlice> {
        let namespace = ns(j, args.namespaces);
        let endpoints: Vec<_> = self.pods[j]
            .iter()
            .map(|(name, ip)| {
                json!({"addresses": [ip], "conditions": {"ready": true},
                       "targetRef": {"kind": "Pod", "name": name, "namespace": namespace}})
            })
            .collect();
        Ok(serde_json::from_value(json!({
            "metadata": {"name": format!("svc-{j}-slice"), "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": format!("svc-{j}"),
                                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints,
        }))?)
    }

    fn service(name: &str, namespace: &str, port: usize) -> anyhow::Result<Service> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
            "spec": {"ports": [{"name": "http", "port": port, "targetPort": 8080, "protocol": "TCP"}]}
        }))?)
    }

    /// Writes namespaces, Sidecars (with `--sidecar-scope`), and per service its pods, Service and
    /// EndpointSlice. Cluster `index` 0 is the config cluster; a remote (`--remote-kubeconfigs`)
    /// gets the same Services with pods of its own (their IPs from a range of its own) and no
    /// Istio config.
    pub async fn write(
        client: kube::Client,
        index: u32,
        args: &LoadgenArgs,
    ) -> anyhow::Result<Mesh> {
        let mut mesh = Mesh {
            client,
            pods: vec![Vec::new(); args.services],
            next_pod: index << 20,
            writes: 0,
            slice_writes: 0,
        };
        let namespaces: Api<Namespace> = Api::all(mesh.client.clone());
        for n in 0..args.namespaces {
            let namespace: Namespace = serde_json::from_value(json!({
                "metadata": {"name": ns(n, args.namespaces),
                             "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}}
            }))?;
            ok_if_exists(namespaces.create(&PostParams::default(), &namespace).await)?;
        }
        if args.sidecar_scope && index == 0 {
            let gvk = GroupVersionKind::gvk("networking.istio.io", "v1", "Sidecar");
            let resource = ApiResource::from_gvk_with_plural(&gvk, "sidecars");
            for n in 0..args.namespaces {
                let namespace = ns(n, args.namespaces);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(mesh.client.clone(), &namespace, &resource);
                let sidecar: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
                    "metadata": {"name": "default", "namespace": namespace},
                    "spec": {"egress": [{"hosts": ["./*"]}]}
                }))?;
                let created = api.create(&PostParams::default(), &sidecar).await;
                if let Err(kube::Error::Api(s)) = &created
                    && s.code == 404
                {
                    anyhow::bail!(
                        "the API server has no Sidecar resource: install Istio's CRDs first"
                    );
                }
                ok_if_exists(created)?;
            }
        }
        for j in 0..args.services {
            for _ in 0..args.endpoints_per_service {
                let pod = mesh.new_pod(j);
                mesh.pods[j].push(pod);
            }
        }
        let mesh_ref = &mesh;
        let results: Vec<anyhow::Result<u64>> = futures::stream::iter(0..args.services)
            .map(|j| async move {
                let pods = mesh_ref.pod_api(j, args);
                for (name, ip) in &mesh_ref.pods[j] {
                    ok_if_exists(
                        pods.create(&PostParams::default(), &Mesh::pod(j, name, ip, args)?)
                            .await,
                    )?;
                }
                let services: Api<Service> =
                    Api::namespaced(mesh_ref.client.clone(), &ns(j, args.namespaces));
                let service = Mesh::service(&format!("svc-{j}"), &ns(j, args.namespaces), port(j))?;
                ok_if_exists(services.create(&PostParams::default(), &service).await)?;
                let slice = mesh_ref.slice(j, args)?;
                ok_if_exists(
                    mesh_ref
                        .slice_api(j, args)
                        .create(&PostParams::default(), &slice)
                        .await,
                )?;
                Ok(mesh_ref.pods[j].len() as u64 + 2)
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect()
            .await;
        for r in results {
            mesh.writes += r?;
        }
        Ok(mesh)
    }

    async fn write_slice(&mut self, j: usize, args: &LoadgenArgs) -> anyhow::Result<()> {
        let slice = self.slice(j, args)?;
        let name = format!("svc-{j}-slice");
        self.slice_api(j, args)
            .replace(&name, &PostParams::default(), &slice)
            .await?;
        self.writes += 1;
        self.slice_writes += 1;
        Ok(())
    }

    async fn create_pod(
        &mut self,
        j: usize,
        pod: &(String, String),
        args: &LoadgenArgs,
    ) -> anyhow::Result<()> {
        let body = Mesh::pod(j, &pod.0, &pod.1, args)?;
        self.pod_api(j, args)
            .create(&PostParams::default(), &body)
            .await?;
        self.writes += 1;
        Ok(())
    }

    async fn delete_pod(&mut self, j: usize, name: &str, args: &LoadgenArgs) -> anyhow::Result<()> {
        self.pod_api(j, args)
            .delete(name, &DeleteParams::default().grace_period(0))
            .await?;
        self.writes += 1;
        Ok(())
    }

    /// Removes the generator's namespaces (and so everything it wrote).
    pub async fn remove(&self, args: &LoadgenArgs) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for n in 0..args.namespaces {
            let _ = namespaces
                .delete(&ns(n, args.namespaces), &DeleteParams::default())
                .await;
        }
    }
}

/// One endpoint change the proxies watching `cluster` must see: `ip` present or gone.
struct Pending {
    cluster: String,
    /// The IP as it is encoded in a ClusterLoadAssignment: a length byte, then the text.
    marker: Vec<u8>,
    present: bool,
    sent: Instant,
    waiting: HashSet<usize>,
}

fn marker(ip: &str) -> Vec<u8> {
    let mut m = vec![ip.len() as u8];
    m.extend_from_slice(ip.as_bytes());
    m
}

fn shows(body: &[u8], marker: &[u8]) -> bool {
    body.windows(marker.len()).any(|w| w == marker)
}

/// What one churn phase measured.
#[derive(Default)]
struct Phase {
    /// Per event and watching proxy: seconds from the slice write to the proxy holding it.
    latencies: Vec<f64>,
    events: usize,
    unconverged: usize,
    /// Events undone by a later one on the same IP before every proxy saw them.
    superseded: usize,
    writes: u64,
    slice_writes: u64,
    seconds: f64,
    daemon_cpu: f64,
}

/// Who gets the change: the proxies watching service `j`'s endpoints.
pub struct Watchers<'a> {
    pub args: &'a LoadgenArgs,
    pub envoy: &'a BTreeSet<usize>,
    pub all: &'a BTreeSet<usize>,
    /// Each service's watchers, worked out once: asking all 10,000 proxies for every one of 100
    /// events a second was a twentieth of the generator's CPU, taken from the daemon's machine.
    known: std::sync::Mutex<HashMap<usize, HashSet<usize>>>,
}

impl<'a> Watchers<'a> {
    pub fn new(
        args: &'a LoadgenArgs,
        envoy: &'a BTreeSet<usize>,
        all: &'a BTreeSet<usize>,
    ) -> Watchers<'a> {
        Watchers {
            args,
            envoy,
            all,
            known: Default::default(),
        }
    }

    fn of(&self, j: usize) -> HashSet<usize> {
        let work_out = || {
            self.all
                .iter()
                .copied()
                .filter(|&i| super::watches(i, j, self.args, !self.envoy.contains(&i)))
                .collect::<HashSet<usize>>()
        };
        let Ok(mut known) = self.known.lock() else {
            return work_out();
        };
        known.entry(j).or_insert_with(work_out).clone()
    }
}

/// Follows the responses until every pending event has reached every proxy watching it (or
/// `CONVERGE_LIMIT` passed), while `notes` brings new events; ends when `notes` closes and nothing
/// is pending.
async fn track(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    mut notes: mpsc::UnboundedReceiver<Pending>,
    received: &mut Received,
    phase: &mut Phase,
) {
    let mut pending: HashMap<String, Vec<Pending>> = HashMap::new();
    let mut writing = true;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        if !writing && pending.is_empty() {
            return;
        }
        tokio::select! {
            // Notes first: a note is sent before its write, so every response that could show
            // the write arrives after the note is taken.
            biased;
            note = notes.recv(), if writing => match note {
                Some(mut p) => {
                    phase.events += 1;
                    let list = pending.entry(p.cluster.clone()).or_default();
                    // The same IP back to how it was: a proxy that never saw the earlier event
                    // already holds this one's state, and may get no update for it.
                    if let Some(at) = list.iter().position(|q| q.marker == p.marker) {
                        let earlier = list.remove(at);
                        phase.superseded += 1;
                        p.waiting.retain(|i| !earlier.waiting.contains(i));
                    }
                    if !p.waiting.is_empty() {
                        list.push(p);
                    }
                }
                None => writing = false,
            },
            seen = rx.recv() => {
                let Some(s) = seen else { return };
                received.add(&s);
                if s.type_url != EDS {
                    continue;
                }
                for (name, body) in s.names.iter().zip(&s.bodies) {
                    let Some(list) = pending.get_mut(name) else { continue };
                    for p in list.iter_mut() {
                        if s.at >= p.sent
                            && shows(body, &p.marker) == p.present
                            && p.waiting.remove(&s.proxy)
                        {
                            phase.latencies.push(s.at.duration_since(p.sent).as_secs_f64());
                        }
                    }
                    list.retain(|p| !p.waiting.is_empty());
                    if list.is_empty() {
                        pending.remove(name);
                    }
                }
            }
            _ = tick.tick() => {
                for list in pending.values_mut() {
                    list.retain(|p| {
                        let late = p.sent.elapsed() > CONVERGE_LIMIT;
                        if late {
                            phase.unconverged += p.waiting.len();
                        }
                        !late
                    });
                }
                pending.retain(|_, l| !l.is_empty());
            }
        }
    }
}

/// The churn that writes events: scaling (one pod more or less per event, round the services) or
/// a rolling restart (per pod: a new pod, the slice with it, the slice without the old one, the
/// old pod deleted).
enum Churn {
    Scale { rate: f64, seconds: u64 },
    Restart { rate: f64, pods: usize },
}

async fn write_churn(
    meshes: &mut [Mesh],
    churn: &Churn,
    watchers: &Watchers<'_>,
    notes: mpsc::UnboundedSender<Pending>,
) -> anyhow::Result<f64> {
    let args = watchers.args;
    let (rate, until) = match churn {
        Churn::Scale { rate, seconds } => (*rate, Some(Duration::from_secs(*seconds))),
        Churn::Restart { rate, .. } => (*rate, None),
    };
    let start = tokio::time::Instant::now();
    let base = args.endpoints_per_service.max(1);
    // `waiting` is worked out before `sent` is taken, so it is not counted in the latency.
    let note = |j: usize, ip: &str, present: bool| Pending {
        waiting: watchers.of(j),
        cluster: cluster(j, args),
        marker: marker(ip),
        present,
        sent: Instant::now(),
    };
    for e in 0.. {
        match (churn, until) {
            (_, Some(limit)) if start.elapsed() >= limit => break,
            (Churn::Restart { pods, .. }, _) if e >= *pods => break,
            _ => {}
        }
        tokio::time::sleep_until(start + Duration::from_secs_f64(e as f64 / rate.max(0.001))).await;
        // Events go round the clusters, then round the services.
        let clusters = meshes.len();
        let mesh = &mut meshes[e % clusters];
        let j = (e / clusters) % args.services.max(1);
        match churn {
            Churn::Scale { .. } if mesh.pods[j].len() <= base => {
                let pod = mesh.new_pod(j);
                mesh.create_pod(j, &pod, args).await?;
                mesh.pods[j].push(pod.clone());
                let _ = notes.send(note(j, &pod.1, true));
                mesh.write_slice(j, args).await?;
            }
            Churn::Scale { .. } => {
                let Some(gone) = mesh.pods[j].pop() else {
                    continue;
                };
                let _ = notes.send(note(j, &gone.1, false));
                mesh.write_slice(j, args).await?;
                mesh.delete_pod(j, &gone.0, args).await?;
            }
            Churn::Restart { .. } => {
                let pod = mesh.new_pod(j);
                mesh.create_pod(j, &pod, args).await?;
                mesh.pods[j].push(pod.clone());
                let _ = notes.send(note(j, &pod.1, true));
                mesh.write_slice(j, args).await?;
                let old = mesh.pods[j].remove(0);
                let _ = notes.send(note(j, &old.1, false));
                mesh.write_slice(j, args).await?;
                mesh.delete_pod(j, &old.0, args).await?;
            }
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

async fn run_phase(
    meshes: &mut [Mesh],
    churn: Churn,
    watchers: &Watchers<'_>,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    received: &mut Received,
) -> anyhow::Result<Phase> {
    let args = watchers.args;
    settle(rx, Duration::from_millis(args.settle_ms), received).await;
    let cpu_before = metric(
        &scrape(args.monitoring_addr, "/metrics").await,
        "process_cpu_seconds_total",
    );
    let count = |meshes: &[Mesh]| {
        meshes
            .iter()
            .fold((0, 0), |(w, s), m| (w + m.writes, s + m.slice_writes))
    };
    let (writes, slice_writes) = count(meshes);
    let mut phase = Phase::default();
    let (tx, notes) = mpsc::unbounded_channel();
    let (written, ()) = tokio::join!(
        write_churn(meshes, &churn, watchers, tx),
        track(rx, notes, received, &mut phase),
    );
    phase.seconds = written?;
    let (writes_after, slice_writes_after) = count(meshes);
    phase.writes = writes_after - writes;
    phase.slice_writes = slice_writes_after - slice_writes;
    phase.daemon_cpu = metric(
        &scrape(args.monitoring_addr, "/metrics").await,
        "process_cpu_seconds_total",
    ) - cpu_before;
    Ok(phase)
}

impl Phase {
    fn report(&self, name: &str) -> serde_json::Value {
        let ms = |p: f64| percentile(self.latencies.clone(), p) * 1000.0;
        let per_write_ms = self.daemon_cpu * 1000.0 / (self.writes.max(1) as f64);
        println!(
            "{name}: {} EndpointSlice writes ({:.0}/s) and {} API writes in all over {:.1} s; {} endpoint events",
            self.slice_writes,
            self.slice_writes as f64 / self.seconds.max(0.001),
            self.writes,
            self.seconds,
            self.events
        );
        println!(
            "{name}: endpoint convergence from the API write: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} proxy updates; {} unconverged after {} s; {} events superseded)",
            ms(0.5),
            ms(0.99),
            ms(1.0),
            self.latencies.len(),
            self.unconverged,
            CONVERGE_LIMIT.as_secs(),
            self.superseded
        );
        println!(
            "{name}: daemon CPU {:.1} s, {per_write_ms:.2} ms per API write",
            self.daemon_cpu
        );
        json!({
            "slice_writes": self.slice_writes,
            "api_writes": self.writes,
            "seconds": self.seconds,
            "events": self.events,
            "proxy_updates": self.latencies.len(),
            "unconverged": self.unconverged,
            "superseded": self.superseded,
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "max_ms": ms(1.0),
            "daemon_cpu_s": self.daemon_cpu,
            "daemon_cpu_ms_per_api_write": per_write_ms,
        })
    }
}

/// New Services, one per namespace per change, each with a pod and a slice: a full push every
/// Envoy-like proxy must see. Returns the convergence from the first write and from push start.
async fn new_services(
    mesh: &mut Mesh,
    watchers: &Watchers<'_>,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    received: &mut Received,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let args = watchers.args;
    let (mut from_write, mut from_push) = (Vec::new(), Vec::new());
    for c in 1..=args.changes {
        settle(rx, Duration::from_millis(args.settle_ms), received).await;
        let (t0, t0_wall) = (Instant::now(), super::wall_ms());
        let name = format!("churn-{c}");
        let writes = (0..args.namespaces).map(|n| {
            let (client, name, namespace) =
                (mesh.client.clone(), name.clone(), ns(n, args.namespaces));
            async move {
                let service = Mesh::service(&name, &namespace, 7000)?;
                let api: Api<Service> = Api::namespaced(client, &namespace);
                api.create(&PostParams::default(), &service).await?;
                anyhow::Ok(())
            }
        });
        for r in futures::future::join_all(writes).await {
            r?;
        }
        mesh.writes += args.namespaces as u64;
        let want = format!("||{name}.");
        let (got, ok) = collect(
            rx,
            watchers.envoy,
            CDS,
            t0,
            |s| s.names.iter().any(|n| n.contains(&want)),
            received,
            Duration::from_secs(args.patience_seconds),
        )
        .await;
        anyhow::ensure!(
            ok,
            "new Service {c}: only {}/{} proxies converged",
            got.len(),
            watchers.envoy.len()
        );
        let push_start = push_start_after(args, t0_wall).await;
        for (at, wall) in got.values() {
            from_write.push(at.duration_since(t0).as_secs_f64());
            if let Some(p) = push_start {
                from_push.push(wall.saturating_sub(p) as f64 / 1000.0);
            }
        }
    }
    Ok((from_write, from_push))
}

/// The churn phases, with a report of each; returns them as JSON for `--json`.
pub async fn churn(
    mut meshes: Vec<Mesh>,
    watchers: Watchers<'_>,
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    received: &mut Received,
) -> anyhow::Result<serde_json::Value> {
    let args = watchers.args;
    let mut report = serde_json::Map::new();
    let scale = Churn::Scale {
        rate: args.scale_rate,
        seconds: args.scale_seconds,
    };
    let phase = run_phase(&mut meshes, scale, &watchers, rx, received).await?;
    report.insert("scaling".into(), phase.report("scaling"));
    if args.restart_pods > 0 {
        let restart = Churn::Restart {
            rate: args.restart_rate,
            pods: args.restart_pods,
        };
        let phase = run_phase(&mut meshes, restart, &watchers, rx, received).await?;
        report.insert("rolling_restart".into(), phase.report("rolling restart"));
    }
    let (from_write, from_push) = new_services(&mut meshes[0], &watchers, rx, received).await?;
    let ms = |v: &Vec<f64>, p: f64| percentile(v.clone(), p) * 1000.0;
    println!(
        "new Services: full push convergence from the write: p50 {:.0} ms, p99 {:.0} ms; from push start: p50 {:.0} ms, p99 {:.0} ms ({} samples)",
        ms(&from_write, 0.5),
        ms(&from_write, 0.99),
        ms(&from_push, 0.5),
        ms(&from_push, 0.99),
        from_write.len()
    );
    report.insert(
        "new_services".into(),
        json!({"from_write": {"p50_ms": ms(&from_write, 0.5), "p99_ms": ms(&from_write, 0.99)},
               "from_push_start": {"p50_ms": ms(&from_push, 0.5), "p99_ms": ms(&from_push, 0.99)},
               "samples": from_write.len()}),
    );
    let after = scrape(args.monitoring_addr, "/metrics").await;
    println!(
        "daemon: {} xDS streams, RSS {:.0} MiB, CPU {:.1} s total",
        metric(&after, "pilot_xds{"),
        metric(&after, "process_resident_memory_bytes") / 1048576.0,
        metric(&after, "process_cpu_seconds_total"),
    );
    report.insert(
        "daemon_rss_mib".into(),
        json!(metric(&after, "process_resident_memory_bytes") / 1048576.0),
    );
    for mesh in &meshes {
        mesh.remove(args).await;
    }
    Ok(serde_json::Value::Object(report))
}
