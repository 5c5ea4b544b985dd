//! Metrics in Prometheus text format. Each module owns a struct of its metrics and registers it in
//! the one `Registry` at start (`cmd` does the wiring); the monitoring server renders the result.
//! Istio's metric names are used wherever Istio has one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

/// A server (`monitoring`, `http`, `webhook`) and why it did something (closed a connection).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerReasonLabels {
    pub server: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// The Istio release whose behaviour Rudder implements: what istiod's version fields say where
/// Rudder stands in for istiod (`istioctl version` compares it with the proxies' to warn of skew;
/// dashboards group by `istio_build`'s `tag`). Rudder's own version is reported beside it.
pub const ISTIO_VERSION: &str = "1.30.3";

/// `istio_build{component, tag}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub component: String,
    pub tag: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    pub r#type: String,
}

/// What started a piece of work (e.g. a config directory rescan).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TriggerLabels {
    pub trigger: String,
}

/// `istiod_managed_clusters{cluster_type}`: local or remote.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterTypeLabels {
    pub cluster_type: String,
}

/// `istiod_remote_cluster_sync_status{cluster,status}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterStatusLabels {
    pub cluster: String,
    pub status: String,
}

/// An event of some source, e.g. a remote-cluster secret's (`add`, `update`, `delete`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceEventLabels {
    pub event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub kind: String,
    pub event: String,
}

const PROCESS_METRICS: [&str; 11] = [
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_start_time_seconds",
    "process_threads",
    "rudder_runtime_alive_tasks",
    "rudder_runtime_workers",
    "rudder_runtime_global_queue_depth",
    "rudder_allocator_committed_bytes",
    "rudder_allocator_peak_committed_bytes",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ValidationFailLabels {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub status: String,
}

/// Process CPU and memory, read from /proc when metrics are rendered (Istio's dashboards use the Go
/// runtime's; these are the portable equivalents).
#[derive(Default)]
struct ProcessMetrics {
    cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    open_fds: Gauge,
    start_time: Gauge,
    threads: Gauge,
    /// The async runtime's equivalents of the Go runtime series Istio's dashboards read: tasks
    /// for goroutines, the allocator's committed memory for the heap (docs/metrics.md).
    alive_tasks: Gauge,
    workers: Gauge,
    global_queue_depth: Gauge,
    committed_bytes: Gauge,
    peak_committed_bytes: Gauge,
}

impl ProcessMetrics {
    fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        // A counter (`process_cpu_seconds_total`, as every Prometheus client names it) that follows
        // /proc.
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            self.cpu_seconds.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            self.resident_bytes.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            self.virtual_bytes.clone(),
        );
        registry.register(
            "process_open_fds",
            "Open file descriptors",
            self.open_fds.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds",
            self.start_time.clone(),
        );
        registry.register("process_threads", "OS threads", self.threads.clone());
        registry.register(
            "rudder_runtime_alive_tasks",
            "Tasks alive in the async runtime (what go_goroutines counts for istiod)",
            self.alive_tasks.clone(),
        );
        registry.register(
            "rudder_runtime_workers",
            "Worker threads of the async runtime",
            self.workers.clone(),
        );
        registry.register(
            "rudder_runtime_global_queue_depth",
            "Tasks waiting in the async runtime's global queue",
            self.global_queue_depth.clone(),
        );
        registry.register(
            "rudder_allocator_committed_bytes",
            "Memory the allocator holds from the OS for the heap (what go_memstats_heap_sys_bytes is for istiod)",
            self.committed_bytes.clone(),
        );
        registry.register(
            "rudder_allocator_peak_committed_bytes",
            "The most memory the allocator has held from the OS",
            self.peak_committed_bytes.clone(),
        );
    }

    /// The async runtime's and the allocator's figures, read on each scrape.
    fn refresh_runtime(&self) {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let m = handle.metrics();
            self.alive_tasks.set(m.num_alive_tasks() as i64);
            self.workers.set(m.num_workers() as i64);
            self.global_queue_depth.set(m.global_queue_depth() as i64);
        }
        let (mut elapsed, mut user, mut system, mut rss, mut peak_rss) = (0, 0, 0, 0, 0);
        let (mut commit, mut peak_commit, mut faults) = (0, 0, 0);
        // SAFETY: mimalloc writes one usize through each pointer, each to a local of this frame.
        unsafe {
            libmimalloc_sys::mi_process_info(
                &mut elapsed,
                &mut user,
                &mut system,
                &mut rss,
                &mut peak_rss,
                &mut commit,
                &mut peak_commit,
                &mut faults,
            )
        };
        self.committed_bytes.set(commit as i64);
        self.peak_committed_bytes.set(peak_commit as i64);
    }

    #[cfg(target_os = "linux")]
    fn refresh(&self) {
        // SAFETY: sysconf only reads a configuration value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE).max(1) as i64 };
        if let Some(stat) = ProcStat::read_of("self") {
            let grown = stat.cpu_seconds() - self.cpu_seconds.get();
            if grown > 0.0 {
                self.cpu_seconds.inc_by(grown);
            }
            self.threads.set(stat.field(17) as i64);
            self.virtual_bytes.set(stat.field(20) as i64);
            self.resident_bytes.set(stat.field(21) as i64 * page);
            if let Some(boot) = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("btime ")
                        .and_then(|v| v.trim().parse::<f64>().ok())
                })
            }) {
                self.start_time
                    .set((boot + stat.field(19) / stat.ticks) as i64);
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(dir.count() as i64);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn refresh(&self) {}
}

/// This process's /proc/self/stat: the fields after the command name, starting at field 3 (state).
#[cfg(target_os = "linux")]
struct ProcStat {
    fields: Vec<f64>,
    /// Clock ticks per second, the unit of the CPU fields.
    ticks: f64,
}

#[cfg(target_os = "linux")]
impl ProcStat {
    /// `/proc/<pid>/stat`; `pid` may be `self`.
    fn read_of(pid: &str) -> Option<ProcStat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        // SAFETY: sysconf only reads a configuration value.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK).max(1) as f64 };
        Some(ProcStat {
            fields: rest
                .split_whitespace()
                .map(|v| v.parse::<f64>().unwrap_or(0.0))
                .collect(),
            ticks,
        })
    }

    fn field(&self, i: usize) -> f64 {
        self.fields.get(i).copied().unwrap_or(0.0)
    }

    /// User plus system time.
    fn cpu_seconds(&self) -> f64 {
        (self.field(11) + self.field(12)) / self.ticks
    }
}

/// This process's CPU time so far, user plus system (0 where /proc cannot tell).
pub fn process_cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

/// Another process's CPU time so far (the load generator's replay server); `pid` may be `self`.
pub fn cpu_seconds_of(pid: &str) -> f64 {
    #[cfg(target_os = "linux")]
    if let Some(stat) = ProcStat::read_of(pid) {
        return stat.cpu_seconds();
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
    0.0
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct K8sEventLabels {
    pub r#type: String,
    pub event: String,
}

/// istiod's buckets for `pilot_xds_push_time` and `pilot_debounce_time`: alerts and dashboards
/// written for istiod name these boundaries (`le="1"`). istiod 1.31 adds `0.5`, which 1.30 lacks;
/// it is here too, so both versions' queries find their bucket (an extra bucket changes no other).
pub fn istiod_push_histogram() -> Histogram {
    Histogram::new([0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0])
}

/// istiod's buckets for `pilot_xds_config_size_bytes` (10 KB, 1 MB, gRPC's 4 MB default, 10 MB, 40 MB).
pub fn istiod_config_size_histogram() -> Histogram {
    Histogram::new([
        1.0,
        10_000.0,
        1_000_000.0,
        4_000_000.0,
        10_000_000.0,
        40_000_000.0,
    ])
}

/// istiod's buckets for `pilot_proxy_convergence_time` and `pilot_proxy_queue_time`.
pub fn istiod_convergence_histogram() -> Histogram {
    Histogram::new([0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0])
}

/// Where each module registers its own metrics (`cmd` hands it to them at start), then frozen
/// into `Metrics` for rendering. Every family name is remembered, so dashboards can be checked
/// against what exists.
pub struct Registry {
    registry: prometheus_client::registry::Registry,
    names: Vec<&'static str>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry holding the process metrics.
    pub fn new() -> Registry {
        Registry {
            registry: prometheus_client::registry::Registry::default(),
            names: PROCESS_METRICS.to_vec(),
        }
    }

    /// Registers `metric` under `name` and returns it (metrics are handles: the clone registered
    /// and the one returned count together).
    pub fn register<M: prometheus_client::registry::Metric + Clone>(
        &mut self,
        name: &'static str,
        help: &str,
        metric: M,
    ) -> M {
        self.names.push(name);
        self.registry.register(name, help, metric.clone());
        metric
    }

    /// A collector computed on each scrape, writing the families `names`.
    pub fn register_collector(
        &mut self,
        names: &[&'static str],
        collector: Box<dyn prometheus_client::collector::Collector>,
    ) {
        self.names.extend_from_slice(names);
        self.registry.register_collector(collector);
    }

    /// The registry, ready to render.
    pub fn finish(mut self) -> Metrics {
        let process = ProcessMetrics::default();
        process.register(&mut self.registry);
        Metrics {
            registry: self.registry,
            names: self.names,
            process,
        }
    }
}

/// Every registered metric, rendered for `/metrics`.
pub struct Metrics {
    registry: prometheus_client::registry::Registry,
    /// Every metric family name registered (counters without their `_total` suffix).
    names: Vec<&'static str>,
    process: ProcessMetrics,
}

/// One bound on what a client can cost, as `/debug/limitz` lists it: the setting, its value, and
/// the series that counts what it refused.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Limit {
    pub name: &'static str,
    /// The flag (and environment variable) that sets it.
    pub setting: &'static str,
    pub value: String,
    /// The metric series (name and labels) counting refusals.
    pub refused_series: &'static str,
}

impl Metrics {
    /// The sum of the samples of each of `series` (a name with its labels, e.g.
    /// `x_total{reason="y"}`), from one rendering.
    pub fn samples(&self, series: &[&str]) -> Vec<f64> {
        let text = self.render();
        series
            .iter()
            .map(|name| {
                text.lines()
                    .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    // Not `sum()`: a float sum of nothing is -0.0, which /debug/limitz showed.
                    .fold(0.0, |total, v| total + v)
            })
            .collect()
    }

    /// Names of every metric family (counters without `_total`, histograms without `_bucket`).
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Prometheus text exposition format (0.0.4, what `/metrics` declares), with istiod's names.
    pub fn render(&self) -> String {
        self.process.refresh();
        self.process.refresh_runtime();
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        to_prometheus_text(&out)
    }
}

/// The families istiod exports under these names: its exporter writes counters without the
/// `_total` suffix, and dashboards and alerts query them that way.
const ISTIOD_PREFIXES: [&str; 3] = ["pilot_", "galley_", "citadel_"];

/// OpenMetrics text (what the encoder writes) as Prometheus text 0.0.4: no `# EOF` or `# UNIT`
/// lines; a counter's samples under the name its `# TYPE` line gives, which is istiod's name
/// (no `_total`) for istiod's families and `<name>_total` for Rudder's own.
pub fn to_prometheus_text(open_metrics: &str) -> String {
    let mut counters: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some(name) = rest.strip_suffix(" counter")
        {
            counters.insert(name);
        }
    }
    let istiod = |name: &str| ISTIOD_PREFIXES.iter().any(|p| name.starts_with(p));
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# TYPE ", "# HELP "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        if let Some((kind, rest)) = meta {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) && !istiod(name) {
                out.push_str(&format!("{kind}{name}_total {tail}"));
            } else {
                out.push_str(line);
            }
            out.push('\n');
            continue;
        }
        let normalised = normalise_le(line);
        let line = normalised.as_str();
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let (sample, tail) = line.split_at(name_end);
        match sample.strip_suffix("_total") {
            Some(family) if counters.contains(family) && istiod(family) => {
                out.push_str(family);
                out.push_str(tail);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Bucket bounds as istiod's exporter writes them (`le="1"`, not `le="1.0"`): alerts match the
/// label as text.
fn normalise_le(line: &str) -> String {
    let Some(start) = line
        .find("{le=\"")
        .or_else(|| line.find(",le=\""))
        .map(|i| i + 5)
    else {
        return line.to_string();
    };
    let Some(len) = line[start..].find('"') else {
        return line.to_string();
    };
    match line[start..start + len].parse::<f64>() {
        Ok(v) if v.is_finite() => format!("{}{v}{}", &line[..start], &line[start + len..]),
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod text_tests {
    /// The runtime's equivalents of Istio's Go series are filled on a scrape: a waiting task is
    /// counted alive, and the runtime's workers are counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runtime_series_are_filled_on_a_scrape() {
        let (done, wait) = tokio::sync::oneshot::channel::<()>();
        let waiting = tokio::spawn(async move {
            let _ = wait.await;
        });
        let text = crate::metrics::Registry::new().finish().render();
        let _ = done.send(());
        let _ = waiting.await;
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
        };
        assert!(value("rudder_runtime_alive_tasks") >= 1.0);
        assert_eq!(value("rudder_runtime_workers"), 2.0);
        assert!(value("rudder_allocator_committed_bytes") >= 0.0);
    }

    #[test]
    fn bucket_bounds_are_written_as_istiod_writes_them() {
        assert_eq!(
            super::normalise_le("x_bucket{le=\"1.0\"} 3"),
            "x_bucket{le=\"1\"} 3"
        );
        assert_eq!(
            super::normalise_le("x_bucket{type=\"a\",le=\"0.5\"} 3"),
            "x_bucket{type=\"a\",le=\"0.5\"} 3"
        );
        assert_eq!(
            super::normalise_le("x_bucket{le=\"+Inf\"} 3"),
            "x_bucket{le=\"+Inf\"} 3"
        );
    }

    #[test]
    fn istiod_counters_lose_the_suffix_and_the_body_is_prometheus_text() {
        let om = "# HELP pilot_xds_pushes Pushes.\n# TYPE pilot_xds_pushes counter\npilot_xds_pushes_total{type=\"cds\"} 3\n\
# HELP rudder_xds_errors Errors.\n# TYPE rudder_xds_errors counter\nrudder_xds_errors_total{reason=\"x\"} 1\n\
# HELP pilot_services Services.\n# TYPE pilot_services gauge\npilot_services 5\n# EOF\n";
        let text = super::to_prometheus_text(om);
        assert_eq!(
            text,
            "# HELP pilot_xds_pushes Pushes.\n# TYPE pilot_xds_pushes counter\npilot_xds_pushes{type=\"cds\"} 3\n\
# HELP rudder_xds_errors_total Errors.\n# TYPE rudder_xds_errors_total counter\nrudder_xds_errors_total{reason=\"x\"} 1\n\
# HELP pilot_services Services.\n# TYPE pilot_services gauge\npilot_services 5\n"
        );
    }
}
