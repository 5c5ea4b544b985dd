//! Process-wide metrics in Prometheus text format. Modules get an `Arc<Metrics>` and bump counters;
//! the monitoring server renders them. Istio's metric names are used wherever Istio has one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    pub r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub kind: String,
    pub event: String,
}

pub struct Metrics {
    registry: Registry,
    /// Files that could not be loaded, by reason (syntax, invalid, conflict, io).
    pub config_file_errors: Family<ReasonLabels, Counter>,
    /// Files currently rejected (their last good objects are still served).
    pub config_files_invalid: Gauge,
    /// Objects in the store per kind.
    pub config_objects: Family<KindLabels, Gauge>,
    /// Store changes per kind and event type.
    pub config_events: Family<EventLabels, Counter>,
    /// Connected xDS clients (Istio: `pilot_xds`).
    pub xds_connections: Gauge,
    /// Responses pushed, by xDS type (`pilot_xds_pushes{type}`).
    pub xds_pushes: Family<TypeLabels, Counter>,
    /// NACKs received, by type (`pilot_total_xds_rejects{type}`).
    pub xds_rejects: Family<TypeLabels, Counter>,
    /// Requests that could not be served (bad node, unknown type...), by reason.
    pub xds_errors: Family<ReasonLabels, Counter>,
    /// Time to generate and send one response, by type (`pilot_xds_push_time{type}`).
    pub xds_push_time: Family<TypeLabels, Histogram>,
    /// From the first config change to a proxy receiving the push (`pilot_proxy_convergence_time`).
    pub proxy_convergence_time: Histogram,
    /// From the first change of a debounce window to the push starting (`pilot_debounce_time`).
    pub debounce_time: Histogram,
    /// Pushes started, by trigger (`pilot_push_triggers{type}`).
    pub push_triggers: Family<TypeLabels, Counter>,
    /// Services known (`pilot_services`).
    pub services: Gauge,
    /// Kubernetes watch events applied, by resource type and event (`pilot_k8s_reg_events`).
    pub k8s_events: Family<K8sEventLabels, Counter>,
    /// Kubernetes watch failures (retried with backoff), by resource type.
    pub k8s_watch_errors: Family<TypeLabels, Counter>,
    /// Istio objects from the API server that failed validation and were not applied, by kind.
    pub k8s_invalid_objects: Family<KindLabels, Counter>,
    /// 1 while this replica holds the leader lease.
    pub leader: Gauge,
    /// CSRs received (`citadel_server_csr_count`).
    pub csr_count: Counter,
    /// Certificates issued (`citadel_server_success_cert_issuance_count`).
    pub cert_issued: Counter,
    /// CSR requests refused, by reason (authentication, identity, csr, signing).
    pub csr_errors: Family<ReasonLabels, Counter>,
    /// Root ConfigMap writes by the leader, by outcome.
    pub root_cert_writes: Family<ReasonLabels, Counter>,
    /// Time a push waited in a proxy's mailbox before its stream took it (`pilot_proxy_queue_time`).
    pub proxy_queue_time: Histogram,
    /// Admission requests the validation webhook allowed (`galley_validation_passed`).
    pub validation_passed: Family<ResourceLabels, Counter>,
    /// Admission requests the validation webhook denied or could not judge (`galley_validation_failed`).
    pub validation_failed: Family<ValidationFailLabels, Counter>,
    /// Webhook HTTP requests refused before any review (`galley_validation_http_error{status}`).
    pub webhook_http_errors: Family<StatusLabels, Counter>,
    /// Pod admission requests the injector received (`sidecar_injection_requests_total`).
    pub injection_requests: Counter,
    /// Pods injected (`sidecar_injection_success_total`).
    pub injection_success: Counter,
    /// Pods the policy left alone (`sidecar_injection_skip_total`).
    pub injection_skipped: Counter,
    /// Injections that failed, by type (`sidecar_injection_failure_total{type}`).
    pub injection_failures: Family<TypeLabels, Counter>,
    /// caBundle writes into webhook configurations, by outcome.
    pub webhook_ca_patches: Family<ReasonLabels, Counter>,
    process: ProcessMetrics,
    /// Every metric family name registered (counters without their `_total` suffix).
    names: Vec<&'static str>,
}

/// Registers `metric` and remembers its name, so dashboards can be checked against what exists.
fn register<M: prometheus_client::registry::Metric>(
    registry: &mut Registry,
    names: &mut Vec<&'static str>,
    name: &'static str,
    help: &str,
    metric: M,
) {
    names.push(name);
    registry.register(name, help, metric);
}

const PROCESS_METRICS: [&str; 6] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_start_time_seconds",
    "process_threads",
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
    cpu_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    open_fds: Gauge,
    start_time: Gauge,
    threads: Gauge,
}

impl ProcessMetrics {
    fn register(&self, registry: &mut Registry) {
        // A gauge set from /proc, named like the conventional counter so `rate()` panels work unchanged.
        registry.register(
            "process_cpu_seconds_total",
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
    }

    #[cfg(target_os = "linux")]
    fn refresh(&self) {
        // SAFETY: sysconf only reads a configuration value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE).max(1) as i64 };
        if let Some(stat) = ProcStat::read() {
            self.cpu_seconds.set(stat.cpu_seconds());
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
    fn read() -> Option<ProcStat> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
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
    #[cfg(target_os = "linux")]
    if let Some(stat) = ProcStat::read() {
        return stat.cpu_seconds();
    }
    0.0
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct K8sEventLabels {
    pub r#type: String,
    pub event: String,
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let mut names = Vec::new();
        let config_file_errors = Family::<ReasonLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_config_file_errors",
            "Config files rejected by the file source, by reason",
            config_file_errors.clone(),
        );
        let config_files_invalid = Gauge::default();
        register(
            &mut registry,
            &mut names,
            "rudder_config_files_invalid",
            "Config files currently rejected; their last good objects are still served",
            config_files_invalid.clone(),
        );
        let config_objects = Family::<KindLabels, Gauge>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_config_objects",
            "Config objects in the store, by kind",
            config_objects.clone(),
        );
        let config_events = Family::<EventLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_config_events",
            "Changes applied to the config store, by kind and event",
            config_events.clone(),
        );
        let xds_connections = Gauge::default();
        register(
            &mut registry,
            &mut names,
            "pilot_xds",
            "xDS streams currently connected",
            xds_connections.clone(),
        );
        let xds_pushes = Family::<TypeLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "pilot_xds_pushes",
            "xDS responses sent, by type",
            xds_pushes.clone(),
        );
        let xds_rejects = Family::<TypeLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "pilot_total_xds_rejects",
            "xDS responses a proxy rejected (NACK), by type",
            xds_rejects.clone(),
        );
        let xds_errors = Family::<ReasonLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_xds_errors",
            "xDS requests refused, by reason",
            xds_errors.clone(),
        );
        let xds_push_time = Family::<TypeLabels, Histogram>::new_with_constructor(
            seconds_histogram as fn() -> Histogram,
        );
        register(
            &mut registry,
            &mut names,
            "pilot_xds_push_time",
            "Seconds to generate and send one xDS response, by type",
            xds_push_time.clone(),
        );
        let proxy_convergence_time = seconds_histogram();
        register(
            &mut registry,
            &mut names,
            "pilot_proxy_convergence_time",
            "Seconds from the first config change to a proxy having received the push",
            proxy_convergence_time.clone(),
        );
        let debounce_time = seconds_histogram();
        register(
            &mut registry,
            &mut names,
            "pilot_debounce_time",
            "Seconds a change spent in the debouncer before its push started",
            debounce_time.clone(),
        );
        let push_triggers = Family::<TypeLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "pilot_push_triggers",
            "Pushes started, by what triggered them",
            push_triggers.clone(),
        );
        let services = Gauge::default();
        register(
            &mut registry,
            &mut names,
            "pilot_services",
            "Services in the registry",
            services.clone(),
        );
        let k8s_events = Family::<K8sEventLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "pilot_k8s_reg_events",
            "Kubernetes watch events applied to the registry, by type and event",
            k8s_events.clone(),
        );
        let k8s_watch_errors = Family::<TypeLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_k8s_watch_errors",
            "Kubernetes watch failures, retried with backoff",
            k8s_watch_errors.clone(),
        );
        let k8s_invalid_objects = Family::<KindLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_k8s_invalid_objects",
            "Istio objects from the API server rejected by validation",
            k8s_invalid_objects.clone(),
        );
        let leader = Gauge::default();
        register(
            &mut registry,
            &mut names,
            "rudder_leader",
            "Whether this replica holds the leader lease (1) or not (0)",
            leader.clone(),
        );
        let csr_count = Counter::default();
        register(
            &mut registry,
            &mut names,
            "citadel_server_csr_count",
            "Certificate signing requests received",
            csr_count.clone(),
        );
        let cert_issued = Counter::default();
        register(
            &mut registry,
            &mut names,
            "citadel_server_success_cert_issuance_count",
            "Certificates issued",
            cert_issued.clone(),
        );
        let csr_errors = Family::<ReasonLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "citadel_server_csr_errors",
            "Certificate signing requests refused, by reason",
            csr_errors.clone(),
        );
        let root_cert_writes = Family::<ReasonLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_root_cert_configmap_writes",
            "istio-ca-root-cert ConfigMap writes, by outcome",
            root_cert_writes.clone(),
        );
        let proxy_queue_time = seconds_histogram();
        register(
            &mut registry,
            &mut names,
            "pilot_proxy_queue_time",
            "Seconds a push waited for its proxy's stream to take it",
            proxy_queue_time.clone(),
        );
        let validation_passed = Family::<ResourceLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "galley_validation_passed",
            "Resources the validation webhook allowed",
            validation_passed.clone(),
        );
        let validation_failed = Family::<ValidationFailLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "galley_validation_failed",
            "Resources the validation webhook denied, by reason",
            validation_failed.clone(),
        );
        let webhook_http_errors = Family::<StatusLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "galley_validation_http_error",
            "Webhook requests refused before review, by HTTP status",
            webhook_http_errors.clone(),
        );
        let injection_requests = Counter::default();
        register(
            &mut registry,
            &mut names,
            "sidecar_injection_requests",
            "Pod admission requests received by the injector",
            injection_requests.clone(),
        );
        let injection_success = Counter::default();
        register(
            &mut registry,
            &mut names,
            "sidecar_injection_success",
            "Pods the sidecar was injected into",
            injection_success.clone(),
        );
        let injection_skipped = Counter::default();
        register(
            &mut registry,
            &mut names,
            "sidecar_injection_skip",
            "Pods the injection policy left alone",
            injection_skipped.clone(),
        );
        let injection_failures = Family::<TypeLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "sidecar_injection_failure",
            "Injections that failed, by type",
            injection_failures.clone(),
        );
        let webhook_ca_patches = Family::<ReasonLabels, Counter>::default();
        register(
            &mut registry,
            &mut names,
            "rudder_webhook_ca_bundle_patches",
            "caBundle writes into webhook configurations, by outcome",
            webhook_ca_patches.clone(),
        );
        let process = ProcessMetrics::default();
        process.register(&mut registry);
        names.extend(PROCESS_METRICS);
        Metrics {
            registry,
            names,
            proxy_queue_time,
            validation_passed,
            validation_failed,
            webhook_http_errors,
            injection_requests,
            injection_success,
            injection_skipped,
            injection_failures,
            webhook_ca_patches,
            process,
            csr_count,
            cert_issued,
            csr_errors,
            root_cert_writes,
            k8s_events,
            k8s_watch_errors,
            k8s_invalid_objects,
            leader,
            config_file_errors,
            config_files_invalid,
            config_objects,
            config_events,
            xds_connections,
            xds_pushes,
            xds_rejects,
            xds_errors,
            xds_push_time,
            proxy_convergence_time,
            debounce_time,
            push_triggers,
            services,
        }
    }

    pub fn file_error(&self, reason: &str) {
        self.config_file_errors
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn by_type(family: &Family<TypeLabels, Counter>, t: &str) -> Counter {
        family
            .get_or_create(&TypeLabels {
                r#type: t.to_string(),
            })
            .clone()
    }

    /// Names of every metric family (counters without `_total`, histograms without `_bucket`).
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        self.process.refresh();
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
