//! State shared by every stream: the current push context, the registry of connections, the
//! limits on clients, the push permits; and the push itself (`PushSink`), fanned out to the
//! streams.

use super::debug_pages::DebugPages;
use super::lock::lock;
use super::shared_names::SharedNames;
use super::{connections, idle, observer, retire};
use crate::metrics::ReasonLabels;
use crate::xds::context::PushContext;
use crate::xds::metrics::XdsMetrics;
use crate::xds::push::PushSink;
use crate::xds::push::request::{PushRecord, PushRequest};
use arc_swap::ArcSwap;
use connections::Connections;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tracing::{debug, warn};

/// Protections against clients that misbehave or arrive all at once.
#[derive(Debug, Clone)]
pub struct XdsLimits {
    /// Longest a response may wait for a client to read; past it the stream is dropped, so a stuck
    /// proxy never holds a push slot (and never delays pushes to the others).
    pub send_timeout: Duration,
    /// New ADS streams accepted per second, all clients together (istiod: PILOT_MAX_REQUESTS_PER_SECOND);
    /// 0: unlimited. A stream over the limit waits up to `RATE_LIMIT_WAIT`, then is refused.
    pub new_streams_per_second: u32,
    /// Largest DiscoveryRequest accepted, in bytes.
    pub max_message_bytes: usize,
    /// A connection without a stream, or a stream without its first request, for this long is
    /// closed.
    pub idle_timeout: Duration,
    /// A new connection must open its first stream (TLS handshake and HTTP/2 preface included)
    /// within this.
    pub first_stream_timeout: Duration,
    /// Connections without a stream yet one source address may hold (loopback exempt); 0: no
    /// bound.
    pub max_pending_per_source: usize,
    /// A connection from which nothing arrives for this long (the keepalive interval plus its
    /// timeout) is closed: any byte proves the client alive, as istiod's gRPC server counts any
    /// frame (`idle`). None: kept however silent.
    pub max_silence: Option<Duration>,
    /// Names one stream may subscribe to per type; a stream asking for more is ended.
    pub max_subscribed_names: usize,
    /// Of those, names that match no resource the proxy can get; a stream with more is ended.
    pub max_unknown_names: usize,
    /// Longest a new stream waits, before its first response, for the pushes already handed to
    /// connected streams to be sent: a lower-priority lane for newcomers, so clients that connect
    /// in a loop cannot slow pushes down. 0: no wait.
    pub new_stream_wait: Duration,
}

impl Default for XdsLimits {
    fn default() -> Self {
        XdsLimits {
            send_timeout: Duration::from_secs(20),
            new_streams_per_second: 0,
            max_message_bytes: 4 * 1024 * 1024,
            idle_timeout: Duration::from_secs(30),
            first_stream_timeout: Duration::from_secs(10),
            max_pending_per_source: 64,
            max_silence: Some(Duration::from_secs(40)),
            max_subscribed_names: 100_000,
            max_unknown_names: 1_000,
            new_stream_wait: Duration::from_millis(500),
        }
    }
}

/// How many pushes `/debug/push_status` keeps.
const PUSH_HISTORY: usize = 50;

/// State shared by every stream: the current push context and the registry of connections.
pub struct XdsServer {
    pub(super) context: ArcSwap<PushContext>,
    pub(super) connections: Connections,
    pub(super) history: Mutex<VecDeque<PushRecord>>,
    pub(super) metrics: Arc<XdsMetrics>,
    /// Bounds how many proxies generate and send at once, so a push storm cannot starve the runtime.
    pub(super) push_permits: Semaphore,
    /// A second lane of the same size for partial pushes (endpoints, secrets, ambient addresses):
    /// they are small and urgent, and should not wait in line behind thousands of full pushes.
    pub(super) partial_push_permits: Semaphore,
    pub(super) next_nonce: AtomicU64,
    pub(super) shutdown: CancellationToken,
    pub(super) limits: XdsLimits,
    /// New streams per second, both ports together (`XdsLimits::new_streams_per_second`).
    pub(super) rate_limiter: Option<governor::DefaultDirectRateLimiter>,
    /// The connections of both gRPC ports, closed when idle (`XdsLimits::idle_timeout`).
    pub(super) idle: Arc<idle::IdleConnections>,
    /// Equal subscriptions of different streams, held once.
    pub(super) shared_names: SharedNames,
    /// Frees replaced push contexts after the push that replaced them is handed out.
    pub(super) retired_contexts: retire::Retirer<Arc<PushContext>>,
    /// The HTTP debug pages `istio.io/debug` reads, once the admin server provides them.
    pub(super) debug_pages: std::sync::OnceLock<Arc<dyn DebugPages>>,
    /// The inputs of the latest pushes, newest last, so `/debug` can show what a proxy was sent
    /// at each of them (a diff between two pushes).
    pub(super) past: Mutex<VecDeque<crate::xds::context::PushInputs>>,
    /// Alias → cluster ID (`--cluster-aliases`): a proxy reporting an alias is of that cluster.
    pub(super) cluster_aliases: Arc<std::collections::BTreeMap<String, String>>,
    /// Told of every proxy that connects and leaves (Kubernetes mode: WorkloadEntry
    /// auto-registration).
    pub(super) connection_observer: std::sync::OnceLock<Arc<dyn observer::ConnectionObserver>>,
}

/// How many pushes' inputs `past` keeps.
const PAST_PUSHES: usize = 10;

impl XdsServer {
    pub fn new(
        initial: PushContext,
        metrics: Arc<XdsMetrics>,
        push_concurrency: usize,
        shutdown: CancellationToken,
        limits: XdsLimits,
        cluster_aliases: Arc<std::collections::BTreeMap<String, String>>,
    ) -> Arc<XdsServer> {
        let counted = metrics.clone();
        let idle = idle::IdleConnections::new(
            idle::Bounds {
                idle_timeout: limits.idle_timeout,
                max_silence: limits.max_silence,
                first_stream_timeout: limits.first_stream_timeout,
                max_pending_per_source: limits.max_pending_per_source,
            },
            move |closed: idle::Closed| {
                counted
                    .xds_errors
                    .get_or_create(&ReasonLabels {
                        reason: closed.reason().into(),
                    })
                    .inc();
            },
        );
        let initial_inputs = initial.inputs();
        record_envoy_filters(&metrics, &initial);
        Arc::new(XdsServer {
            idle,
            shared_names: SharedNames::default(),
            context: ArcSwap::from_pointee(initial.counting_reads(cache_reads(&metrics))),
            retired_contexts: retire::Retirer::new("rudder-retire"),
            debug_pages: std::sync::OnceLock::new(),
            connection_observer: std::sync::OnceLock::new(),
            past: Mutex::new(VecDeque::from([initial_inputs])),
            cluster_aliases,
            connections: Connections::default(),
            history: Mutex::default(),
            metrics,
            push_permits: Semaphore::new(push_concurrency.max(1)),
            partial_push_permits: Semaphore::new(push_concurrency.max(1)),
            next_nonce: AtomicU64::new(1),
            shutdown,
            rate_limiter: std::num::NonZeroU32::new(limits.new_streams_per_second)
                .map(|n| governor::RateLimiter::direct(governor::Quota::per_second(n))),
            limits,
        })
    }

    /// The sockets `listener` accepts, for a gRPC port's `serve_with_incoming`: idle ones are
    /// closed.
    pub fn incoming(
        &self,
        listener: tokio::net::TcpListener,
    ) -> impl tokio_stream::Stream<Item = std::io::Result<idle::Tracked>> + use<> {
        self.idle.incoming(listener)
    }

    pub fn context(&self) -> Arc<PushContext> {
        self.context.load_full()
    }

    /// Tells `observer` of every proxy that connects from now on, and of its leaving.
    pub fn observe_connections(&self, observer: Arc<dyn observer::ConnectionObserver>) {
        let _ = self.connection_observer.set(observer);
    }

    /// Where `istio.io/debug` requests read the HTTP debug pages (set once).
    pub fn set_debug_pages(&self, pages: Arc<dyn DebugPages>) {
        let _ = self.debug_pages.set(pages);
    }

    pub(super) fn history(&self) -> Vec<PushRecord> {
        lock(&self.history).iter().cloned().collect()
    }

    pub(super) fn nonce(&self) -> String {
        format!("{:x}", self.next_nonce.fetch_add(1, Ordering::Relaxed))
    }

    /// Queues one response for the client, bounded by the send timeout. False: the stream is over
    /// (the client left, or stopped reading and is dropped).
    pub(super) async fn deliver<T>(
        &self,
        tx: &mpsc::Sender<Result<T, Status>>,
        response: T,
    ) -> bool {
        match tokio::time::timeout(self.limits.send_timeout, tx.send(Ok(response))).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                self.send_timed_out();
                false
            }
        }
    }

    pub(super) fn send_timed_out(&self) {
        self.refuse("send_timeout");
        self.metrics.write_timeouts.inc();
        warn!(
            timeout = ?self.limits.send_timeout,
            "proxy is not reading its stream; dropping it"
        );
    }

    /// Counts a failed inbound stream by what went wrong.
    pub(super) fn stream_failed(&self, status: &Status) {
        match status.code() {
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted => {
                self.refuse("message_too_large");
                warn!(error = status.message(), "xDS request refused");
            }
            tonic::Code::DeadlineExceeded => {
                self.refuse("first_request_timeout");
                warn!(error = status.message(), "xDS stream closed");
            }
            _ => debug!(error = %status, "stream error"),
        }
    }

    pub(super) fn refuse(&self, reason: &str) {
        self.metrics
            .xds_errors
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }
}

/// Reads a push context's EnvoyFilters once, when it is installed, so the count of patches not
/// applied is there before any proxy asks.
fn record_envoy_filters(metrics: &XdsMetrics, context: &PushContext) {
    metrics.mesh.envoy_filter_patches_not_applied.set(
        crate::xds::generate::passes::envoy_filter::compiled(context)
            .skipped
            .len() as i64,
    );
}

impl PushSink for XdsServer {
    /// Installs a new push context and queues `request` for every connected proxy it concerns.
    fn push(&self, context: PushContext, mut request: PushRequest, record: PushRecord) {
        {
            let mut past = lock(&self.past);
            if past.len() == PAST_PUSHES {
                past.pop_front();
            }
            past.push_back(context.inputs());
        }
        record_envoy_filters(&self.metrics, &context);
        let context = context
            .keeping(&self.context.load(), crate::xds::generate::inputs::reads)
            .counting_reads(cache_reads(&self.metrics));
        let replaced = self.context.swap(Arc::new(context));
        let version = record.version;
        // Recorded before the fan-out: a proxy may have the push before `fan_out` returns, and
        // whoever then reads `/debug/push_status` must find the push it received.
        {
            let mut history = lock(&self.history);
            if history.len() == PUSH_HISTORY {
                history.pop_front();
            }
            history.push_back(record);
        }
        request.queued = Instant::now();
        let proxies = self.connections.fan_out(&request);
        self.retired_contexts.retire(replaced);
        if let Some(pushed) = lock(&self.history)
            .iter_mut()
            .rev()
            .find(|r| r.version == version)
        {
            pushed.proxies = proxies;
        }
    }
}

/// The counters a push context counts its cache reads into (`rudder_xds_cache_reads_total`).
fn cache_reads(metrics: &XdsMetrics) -> crate::xds::context::CacheReads {
    let of = |t: &str| {
        metrics
            .cache_reads
            .get_or_create(&crate::metrics::TypeLabels { r#type: t.into() })
            .clone()
    };
    crate::xds::context::CacheReads {
        hit: of("hit"),
        kept: of("kept"),
        miss: of("miss"),
    }
}
