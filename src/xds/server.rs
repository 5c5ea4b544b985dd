//! ADS over gRPC: `StreamAggregatedResources` (State of the World) and `DeltaAggregatedResources`.
//!
//! Each stream is served by one task that owns the stream's state: per type, what the client
//! subscribed to, the last nonce sent, and what it ACKed or NACKed. Pushes reach a stream through a
//! one-slot mailbox: a new push merges into a pending one, so a proxy never has more than one push
//! queued, and a slow proxy only ever delays itself.

use super::context::{PushContext, Resource, ResourceList, Scope};
use super::generate::{self, PUSH_ORDER, is_wildcard_type, known_type, short_type};
use super::proxy::Proxy;
use super::wire::{AdsServer, EncodedResponse, RequestStream};
use crate::metrics::{Metrics, ReasonLabels, TypeLabels};
use arc_swap::ArcSwap;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::{Instrument, debug, info, info_span, warn};

/// What must be pushed to a proxy. Merging two requests keeps the union of what both needed.
#[derive(Debug, Clone)]
pub struct PushRequest {
    /// Everything may have changed: regenerate every watched type.
    pub full: bool,
    /// For a partial push, the types it carries (EDS, ztunnel's Address, SDS), to the streams
    /// that watch them.
    pub types: BTreeSet<&'static str>,
    /// Services whose endpoints changed: a partial push sends EDS only for their clusters.
    pub eds_hosts: BTreeSet<String>,
    /// When the first change behind this push happened (for convergence time).
    pub started: Instant,
    pub reason: String,
    /// When it entered this proxy's mailbox (for queue time); set by `XdsShared::push`.
    pub queued: Instant,
}

/// One push, as `/debug/push_status` and the UI show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PushRecord {
    pub version: u64,
    pub at_unix_ms: u128,
    pub full: bool,
    pub reason: String,
    /// The config objects whose changes caused it (first few).
    pub triggers: Vec<String>,
    pub eds_services: Vec<String>,
    pub proxies: usize,
    pub debounce_ms: u128,
}

const PUSH_HISTORY: usize = 50;

impl PushRequest {
    pub fn merge(&mut self, other: PushRequest) {
        self.full |= other.full;
        self.types.extend(other.types);
        self.eds_hosts.extend(other.eds_hosts);
        self.started = self.started.min(other.started);
        self.queued = self.queued.min(other.queued);
        if !self.reason.contains(&other.reason) {
            self.reason = format!("{},{}", self.reason, other.reason);
        }
    }
}

/// Per-type sync state of one stream, also shown in debug output.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TypeStatus {
    pub wildcard: bool,
    /// Shared, so recording what was sent (every response) never copies the subscribed names.
    pub names: Arc<BTreeSet<String>>,
    pub nonce_sent: String,
    pub version_sent: String,
    pub version_acked: String,
    pub last_nack: Option<String>,
    pub resources_sent: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ConnectionStatus {
    pub id: String,
    pub proxy: Arc<Proxy>,
    pub delta: bool,
    pub connected_at_unix: u64,
    pub types: Arc<BTreeMap<String, TypeStatus>>,
    /// The services of the EDS names in `types`, derived when they change: an endpoint push
    /// decides whether it concerns this stream without parsing every name again.
    #[serde(skip)]
    pub eds_hosts: Arc<HashSet<String>>,
}

impl ConnectionStatus {
    /// Publishes a stream's subscriptions (to `/debug` and to the push fan-out).
    fn update(&mut self, watches: &Arc<BTreeMap<String, TypeStatus>>) {
        let eds_names =
            |w: &BTreeMap<String, TypeStatus>| w.get(generate::ENDPOINT).map(|t| t.names.clone());
        let (now, before) = (eds_names(watches), eds_names(&self.types));
        let unchanged = match (&now, &before) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !unchanged {
            self.eds_hosts = Arc::new(
                now.iter()
                    .flat_map(|names| names.iter())
                    .filter_map(|name| generate::util::parse_outbound_cluster(name))
                    .map(|(_, _, host)| host.to_string())
                    .collect(),
            );
        }
        self.types = watches.clone();
    }
}

struct Mailbox {
    pending: Mutex<Option<PushRequest>>,
    notify: Notify,
}

struct ConnectionEntry {
    mailbox: Arc<Mailbox>,
    status: Arc<Mutex<ConnectionStatus>>,
}

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
}

impl Default for XdsLimits {
    fn default() -> Self {
        XdsLimits {
            send_timeout: Duration::from_secs(20),
            new_streams_per_second: 0,
            max_message_bytes: 4 * 1024 * 1024,
        }
    }
}

/// How long a new stream waits for the rate limiter before it is refused.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(5);

type StreamRateLimiter = governor::DefaultDirectRateLimiter;

/// State shared by every stream: the current push context and the registry of connections.
pub struct XdsShared {
    context: ArcSwap<PushContext>,
    connections: Mutex<HashMap<u64, ConnectionEntry>>,
    history: Mutex<std::collections::VecDeque<PushRecord>>,
    metrics: Arc<Metrics>,
    /// Bounds how many proxies generate and send at once, so a push storm cannot starve the runtime.
    push_permits: Semaphore,
    /// A second lane of the same size for partial pushes (endpoints, secrets, ambient addresses):
    /// they are small and urgent, and should not wait in line behind thousands of full pushes.
    partial_push_permits: Semaphore,
    next_id: AtomicU64,
    next_nonce: AtomicU64,
    shutdown: CancellationToken,
    limits: XdsLimits,
    rate_limiter: Option<StreamRateLimiter>,
    /// Workload certificates for SDS, given to every push context.
    issuer: Option<Arc<crate::ca::issuer::WorkloadIssuer>>,
}

impl XdsShared {
    pub fn new(
        initial: PushContext,
        metrics: Arc<Metrics>,
        push_concurrency: usize,
        shutdown: CancellationToken,
        limits: XdsLimits,
        issuer: Option<Arc<crate::ca::issuer::WorkloadIssuer>>,
    ) -> Arc<XdsShared> {
        let mut initial = initial;
        initial.certificates = issuer.clone();
        let rate_limiter = std::num::NonZeroU32::new(limits.new_streams_per_second)
            .map(|n| governor::RateLimiter::direct(governor::Quota::per_second(n)));
        Arc::new(XdsShared {
            context: ArcSwap::from_pointee(initial),
            connections: Mutex::default(),
            history: Mutex::default(),
            metrics,
            push_permits: Semaphore::new(push_concurrency.max(1)),
            partial_push_permits: Semaphore::new(push_concurrency.max(1)),
            next_id: AtomicU64::new(1),
            next_nonce: AtomicU64::new(1),
            shutdown,
            limits,
            rate_limiter,
            issuer,
        })
    }

    pub fn context(&self) -> Arc<PushContext> {
        self.context.load_full()
    }

    /// Installs a new push context and queues `request` for every connected proxy.
    pub fn push(&self, mut context: PushContext, mut request: PushRequest, record: PushRecord) {
        context.certificates = self.issuer.clone();
        self.context.store(Arc::new(context));
        request.queued = Instant::now();
        let conns = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
            if history.len() == PUSH_HISTORY {
                history.pop_front();
            }
            history.push_back(PushRecord {
                proxies: conns.len(),
                ..record
            });
        }
        for entry in conns.values() {
            // Partial pushes (endpoints, secrets, addresses) wake only the streams they concern.
            if !request.full
                && !push_relevant(
                    &entry.status.lock().unwrap_or_else(|p| p.into_inner()),
                    &request,
                )
            {
                continue;
            }
            let mut pending = entry
                .mailbox
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match pending.as_mut() {
                Some(p) => p.merge(request.clone()),
                None => *pending = Some(request.clone()),
            }
            drop(pending);
            entry.mailbox.notify.notify_one();
        }
    }

    /// The most recent pushes, oldest first.
    pub fn history(&self) -> Vec<PushRecord> {
        self.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    pub fn connections(&self) -> Vec<ConnectionStatus> {
        let conns = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> = conns
            .values()
            .map(|e| e.status.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    fn nonce(&self) -> String {
        format!("{:x}", self.next_nonce.fetch_add(1, Ordering::Relaxed))
    }

    fn register(
        &self,
        proxy: Arc<Proxy>,
        delta: bool,
    ) -> (u64, Arc<Mailbox>, Arc<Mutex<ConnectionStatus>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mailbox = Arc::new(Mailbox {
            pending: Mutex::new(None),
            notify: Notify::new(),
        });
        let status = Arc::new(Mutex::new(ConnectionStatus {
            id: format!("{}-{id}", proxy.id),
            proxy,
            delta,
            connected_at_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            types: Arc::default(),
            eds_hosts: Arc::default(),
        }));
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                ConnectionEntry {
                    mailbox: mailbox.clone(),
                    status: status.clone(),
                },
            );
        self.metrics.xds_connections.inc();
        (id, mailbox, status)
    }

    fn unregister(&self, id: u64) {
        if self
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
            .is_some()
        {
            self.metrics.xds_connections.dec();
        }
    }

    /// Waits for the new-stream rate limiter; refuses the stream if it stays over the limit.
    async fn admit(&self) -> Result<(), Status> {
        let Some(limiter) = &self.rate_limiter else {
            return Ok(());
        };
        if tokio::time::timeout(RATE_LIMIT_WAIT, limiter.until_ready())
            .await
            .is_err()
        {
            self.refuse("rate_limited");
            warn!("refusing an xDS stream: request rate limit exceeded");
            return Err(Status::resource_exhausted(
                "request rate limit exceeded; retry with backoff",
            ));
        }
        Ok(())
    }

    /// Queues one response for the client, bounded by the send timeout. False: the stream is over
    /// (the client left, or stopped reading and is dropped).
    async fn deliver<T>(&self, tx: &mpsc::Sender<Result<T, Status>>, response: T) -> bool {
        match tokio::time::timeout(self.limits.send_timeout, tx.send(Ok(response))).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                self.refuse("send_timeout");
                warn!(
                    timeout = ?self.limits.send_timeout,
                    "proxy is not reading its stream; dropping it"
                );
                false
            }
        }
    }

    /// Counts a failed inbound stream by what went wrong.
    fn stream_failed(&self, status: &Status) {
        match status.code() {
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted => {
                self.refuse("message_too_large");
                warn!(error = status.message(), "xDS request refused");
            }
            _ => debug!(error = %status, "stream error"),
        }
    }

    fn refuse(&self, reason: &str) {
        self.metrics
            .xds_errors
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }
}

#[derive(Clone)]
pub struct AdsService {
    shared: Arc<XdsShared>,
    /// Set on the TLS port: streams that present credentials are verified (istiod's XDS_AUTH).
    auth: Option<Arc<crate::ca::auth::Authenticator>>,
}

impl AdsService {
    /// The plaintext port: nobody is authenticated.
    pub fn new(shared: Arc<XdsShared>) -> Self {
        AdsService { shared, auth: None }
    }

    /// The TLS port: a bearer token or client certificate, when presented, must be valid, and gives
    /// the stream its identity; a stream that presents nothing is served without one.
    pub fn authenticated(
        shared: Arc<XdsShared>,
        auth: Arc<crate::ca::auth::Authenticator>,
    ) -> Self {
        AdsService {
            shared,
            auth: Some(auth),
        }
    }

    async fn caller<R>(&self, request: &Request<R>) -> Result<Option<crate::ca::Identity>, Status> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let certs = request.peer_certs();
        auth.identify(request.metadata(), certs.as_deref().map(|c| c.as_slice()))
            .await
            .map_err(|e| {
                self.shared.refuse("authentication");
                warn!(error = %e, "refusing xDS stream: authentication failed");
                match e {
                    crate::ca::auth::AuthError::Unavailable(_) => {
                        Status::unavailable(e.to_string())
                    }
                    _ => Status::unauthenticated(e.to_string()),
                }
            })
    }

    /// The proxy behind a stream; a node that is not Istio's is refused, logged and counted.
    fn identify(&self, peer: &str, node: Option<&Node>, mode: &str) -> Result<Arc<Proxy>, Status> {
        Proxy::from_node(node).map(Arc::new).map_err(|e| {
            self.shared.refuse("bad_node");
            warn!(peer, mode, error = %e, "refusing xDS stream");
            Status::invalid_argument(e.to_string())
        })
    }

    pub fn into_server(self) -> AdsServer {
        let max = self.shared.limits.max_message_bytes;
        AdsServer::new(self, max)
    }
}

/// Reads a stream's first request (which must carry the node) and the peer address.
async fn accept<R: prost::Message + Default>(
    request: Request<RequestStream<R>>,
) -> Result<(String, R, RequestStream<R>), Status> {
    let peer = request
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut inbound = request.into_inner();
    match inbound.message().await? {
        Some(first) => Ok((peer, first, inbound)),
        None => Err(Status::cancelled("stream closed before the first request")),
    }
}

/// Outgoing responses per stream; small, so a client that stops reading blocks only its own task.
const STREAM_BUFFER: usize = 8;

/// The response half of a stream, as both RPCs return it.
type ResponseStream = ReceiverStream<Result<EncodedResponse, Status>>;

impl AdsService {
    pub async fn stream_aggregated_resources(
        &self,
        request: Request<RequestStream<DiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.open::<Sotw>(request).await
    }

    pub async fn delta_aggregated_resources(
        &self,
        request: Request<RequestStream<DeltaDiscoveryRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.open::<Delta>(request).await
    }

    /// What both RPCs do: admit the stream, read its first request, identify the proxy, then serve
    /// the stream on its own task.
    async fn open<H: StreamHandler>(
        &self,
        request: Request<RequestStream<H::Request>>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.shared.admit().await?;
        let identity = self.caller(&request).await?;
        let (peer, first, inbound) = accept(request)
            .await
            .inspect_err(|e| self.shared.stream_failed(e))?;
        let mut proxy = self.identify(&peer, H::node(&first), H::MODE)?;
        if identity.is_some() {
            Arc::make_mut(&mut proxy).identity = identity;
        }
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let span = info_span!("ads", proxy = %proxy.id, peer, mode = H::MODE);
        tokio::spawn(
            serve_stream::<H>(self.shared.clone(), proxy, tx, first, inbound).instrument(span),
        );
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Records a NACK: logged with the proxy's error, counted, kept in the status. The last good config
/// stays in force on the proxy; nothing is resent until config changes.
fn record_nack(
    shared: &XdsShared,
    status: &mut TypeStatus,
    type_url: &str,
    nonce: &str,
    message: &str,
) {
    warn!(
        r#type = short_type(type_url),
        nonce,
        error = message,
        "proxy rejected config (NACK)"
    );
    shared
        .metrics
        .xds_rejects
        .get_or_create(&TypeLabels {
            r#type: short_type(type_url).into(),
        })
        .inc();
    status.last_nack = Some(message.to_string());
}

/// The watched types a push touches, in push order (CDS, EDS, LDS, RDS); EDS only for EDS-only pushes.
fn types_to_push(watches: &BTreeMap<String, TypeStatus>, push: &PushRequest) -> Vec<String> {
    PUSH_ORDER
        .iter()
        .filter(|t| watches.contains_key(**t) && (push.full || push.types.contains(**t)))
        .map(|t| t.to_string())
        .collect()
}

/// What one flavour of ADS stream does with a client request and with a push; `false` ends the stream.
trait StreamHandler: Send + Sized + 'static {
    type Request: prost::Message + Default + Send + 'static;
    /// `sotw` or `delta`, for logs and the connection registry.
    const MODE: &'static str;
    fn node(req: &Self::Request) -> Option<&Node>;
    fn new(stream: StreamParts) -> Self;
    fn request(&mut self, req: Self::Request) -> impl std::future::Future<Output = bool> + Send;
    fn push(&mut self, push: PushRequest) -> impl std::future::Future<Output = bool> + Send;
}

/// What every stream handler starts from.
struct StreamParts {
    shared: Arc<XdsShared>,
    proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    status: Arc<Mutex<ConnectionStatus>>,
}

/// A partial push matters only to streams watching one of its types, and for EDS an endpoint of a
/// changed service; the fan-out does not even wake the others (a change to one service would
/// otherwise wake every proxy of the mesh and queue the ones that need it behind the ones that do
/// not).
fn push_relevant(stream: &ConnectionStatus, push: &PushRequest) -> bool {
    let watches = &stream.types;
    if push.full
        || push
            .types
            .iter()
            .any(|t| *t != generate::ENDPOINT && watches.contains_key(*t))
    {
        return true;
    }
    let Some(eds) = watches
        .get(generate::ENDPOINT)
        .filter(|_| push.types.contains(generate::ENDPOINT))
    else {
        return false;
    };
    // Look the smaller set up in the larger.
    eds.wildcard
        || if push.eds_hosts.len() <= stream.eds_hosts.len() {
            push.eds_hosts.iter().any(|h| stream.eds_hosts.contains(h))
        } else {
            stream.eds_hosts.iter().any(|h| push.eds_hosts.contains(h))
        }
}

/// A stream's resources of `type_url`: for the scope types, one list shared by every stream of the
/// scope with the same subscription (SotW and Delta alike) per push. `only_hosts` keeps the
/// clusters of those services (an endpoint-only push).
fn resource_list(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &Scope,
    type_url: &str,
    names: Option<&BTreeSet<String>>,
    only_hosts: Option<&BTreeSet<String>>,
) -> Arc<ResourceList> {
    let generate = || generate::generate(ctx, proxy, scope, type_url, names);
    let list = match generate::scope_type(type_url) {
        Some(t) => ctx.resource_list(t, scope.key, names_digest(names), generate),
        None => Arc::new(ResourceList::new(generate())),
    };
    let Some(hosts) = only_hosts else {
        return list;
    };
    Arc::new(ResourceList::new(
        list.resources
            .iter()
            .filter(|r| {
                generate::util::parse_outbound_cluster(&r.name)
                    .is_some_and(|(_, _, h)| hosts.contains(h))
            })
            .cloned()
            .collect(),
    ))
}

/// The digest of a subscription (`None`: wildcard), for the per-scope resource list cache.
fn names_digest(names: Option<&BTreeSet<String>>) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(names)
}

/// Secrets a proxy asked for and does not get (refused, or missing): already logged with the reason
/// by the generator, counted here once per request (`rudder_xds_errors_total{reason=
/// "secret_unavailable"}`).
fn count_unavailable_secrets(shared: &XdsShared, asked: &BTreeSet<String>, got: &[Arc<Resource>]) {
    for name in asked {
        if !got.iter().any(|r| &r.name == name) {
            shared.refuse("secret_unavailable");
        }
    }
}

/// The life of one ADS stream, SotW or Delta: registered while it lives, it handles the first request,
/// then client requests and pushes as they come, until the client leaves, the stream fails or the
/// server shuts down.
async fn serve_stream<H: StreamHandler>(
    shared: Arc<XdsShared>,
    proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    first: H::Request,
    mut inbound: RequestStream<H::Request>,
) {
    let (id, mailbox, status) = shared.register(proxy.clone(), H::MODE == "delta");
    info!(generator = ?proxy.generator, "proxy connected");
    let mut handler = H::new(StreamParts {
        shared: shared.clone(),
        proxy,
        tx: tx.clone(),
        status,
    });
    let mut next = Some(first);
    loop {
        if let Some(req) = next.take()
            && !handler.request(req).await
        {
            break;
        }
        tokio::select! {
            msg = inbound.message() => match msg {
                Ok(Some(req)) => next = Some(req),
                Ok(None) => { debug!("client closed the stream"); break; }
                Err(e) => {
                    shared.stream_failed(&e);
                    // Best effort: the client learns why, if it is still reading.
                    let _ = tx.try_send(Err(e));
                    break;
                }
            },
            _ = mailbox.notify.notified() => {
                let pending = mailbox.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(push) = pending {
                    shared.metrics.proxy_queue_time.observe(push.queued.elapsed().as_secs_f64());
                    // Bounded concurrency: a push storm cannot starve the runtime.
                    let lane = if push.full { &shared.push_permits } else { &shared.partial_push_permits };
                    let Ok(_permit) = lane.acquire().await else { break };
                    let started = push.started;
                    if !handler.push(push).await {
                        break;
                    }
                    shared.metrics.proxy_convergence_time.observe(started.elapsed().as_secs_f64());
                }
            }
            _ = shared.shutdown.cancelled() => break,
        }
    }
    shared.unregister(id);
    info!("proxy disconnected");
}

impl StreamHandler for Sotw {
    type Request = DiscoveryRequest;
    const MODE: &'static str = "sotw";
    fn node(req: &DiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn new(stream: StreamParts) -> Self {
        Sotw {
            shared: stream.shared,
            proxy: stream.proxy,
            tx: stream.tx,
            status: stream.status,
            watches: Arc::default(),
            last_sent: HashMap::new(),
        }
    }
    fn request(&mut self, req: DiscoveryRequest) -> impl std::future::Future<Output = bool> + Send {
        self.on_request(req)
    }
    fn push(&mut self, push: PushRequest) -> impl std::future::Future<Output = bool> + Send {
        self.on_push(push)
    }
}

impl StreamHandler for Delta {
    type Request = DeltaDiscoveryRequest;
    const MODE: &'static str = "delta";
    fn node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn new(stream: StreamParts) -> Self {
        Delta {
            shared: stream.shared,
            proxy: stream.proxy,
            tx: stream.tx,
            status: stream.status,
            watches: Arc::default(),
            sent: HashMap::new(),
        }
    }
    fn request(
        &mut self,
        req: DeltaDiscoveryRequest,
    ) -> impl std::future::Future<Output = bool> + Send {
        self.on_request(req)
    }
    fn push(&mut self, push: PushRequest) -> impl std::future::Future<Output = bool> + Send {
        self.on_push(push)
    }
}

struct Sotw {
    shared: Arc<XdsShared>,
    proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    status: Arc<Mutex<ConnectionStatus>>,
    /// Shared with the connection status (what `/debug` shows): one copy of every subscribed name,
    /// cloned only when it changes.
    watches: Arc<BTreeMap<String, TypeStatus>>,
    /// Digest of the last response per type, to skip pushes that would change nothing.
    /// One hash per type: at 10,000 proxies a list of names would cost hundreds of megabytes.
    last_sent: HashMap<String, u64>,
}

impl Sotw {
    fn sync_status(&self) {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .update(&self.watches);
    }

    /// Returns false when the stream is gone.
    async fn on_request(&mut self, req: DiscoveryRequest) -> bool {
        let type_url = req.type_url.clone();
        if !known_type(&type_url) {
            self.shared.refuse("unknown_type");
            debug!(
                r#type = type_url,
                "ignoring request for an unsupported type"
            );
            return true;
        }
        let names: BTreeSet<String> = req.resource_names.iter().cloned().collect();
        let watch = Arc::make_mut(&mut self.watches)
            .entry(type_url.clone())
            .or_default();
        let nack = req.error_detail.as_ref().map(|e| e.message.clone());
        let subscription_changed = names != *watch.names;
        let respond = if req.response_nonce.is_empty() {
            // A new subscription, or a reconnecting client telling us what it has.
            watch.wildcard =
                is_wildcard_type(&type_url) && (names.is_empty() || names.contains("*"));
            watch.names = Arc::new(names);
            true
        } else if req.response_nonce != watch.nonce_sent {
            // Stale: the client had not seen our latest response. Only a new subscription list counts.
            if subscription_changed && !watch.wildcard {
                watch.names = Arc::new(names);
                true
            } else {
                false
            }
        } else {
            if let Some(message) = &nack {
                record_nack(&self.shared, watch, &type_url, &req.response_nonce, message);
            } else {
                watch.version_acked = req.version_info.clone();
                watch.last_nack = None;
            }
            if subscription_changed && !watch.wildcard {
                watch.names = Arc::new(names);
                true
            } else {
                false
            }
        };
        self.sync_status();
        if respond {
            let ctx = self.shared.context();
            let scope = ctx.scope(&self.proxy);
            return self.send(&ctx, &scope, &type_url, None, true).await;
        }
        true
    }

    /// Sends the watched types the push touches, in push order. False when the stream is gone.
    async fn on_push(&mut self, push: PushRequest) -> bool {
        let ctx = self.shared.context();
        // One scope for the whole push: every type is generated for the same view.
        let scope = ctx.scope(&self.proxy);
        for t in types_to_push(&self.watches, &push) {
            let only = (!push.full && t == generate::ENDPOINT).then_some(&push.eds_hosts);
            if !self.send(&ctx, &scope, &t, only, false).await {
                return false;
            }
        }
        true
    }

    /// Generates and sends one type. `only_hosts` limits EDS to clusters of those services.
    async fn send(
        &mut self,
        ctx: &PushContext,
        scope: &Scope,
        type_url: &str,
        only_hosts: Option<&BTreeSet<String>>,
        requested: bool,
    ) -> bool {
        let started = Instant::now();
        let Some(watch) = self.watches.get(type_url) else {
            return true;
        };
        let names = (!watch.wildcard).then_some(watch.names.as_ref());
        let list = resource_list(ctx, &self.proxy, scope, type_url, names, only_hosts);
        if requested && type_url == generate::SECRET {
            count_unavailable_secrets(&self.shared, &watch.names, &list.resources);
        }
        if only_hosts.is_some() && list.resources.is_empty() {
            return true;
        }
        let (resources, digest) = (&list.resources, list.digest);
        if !requested && only_hosts.is_none() && self.last_sent.get(type_url) == Some(&digest) {
            return true;
        }
        let nonce = self.shared.nonce();
        let version = ctx.version.to_string();
        let body = ctx.encoded_resources(digest, resources);
        let response = EncodedResponse::new(&version, type_url, &nonce, body);
        if !self.shared.deliver(&self.tx, response).await {
            return false;
        }
        if only_hosts.is_none() {
            self.last_sent.insert(type_url.to_string(), digest);
        }
        if let Some(watch) = Arc::make_mut(&mut self.watches).get_mut(type_url) {
            watch.nonce_sent = nonce;
            watch.version_sent = version;
            watch.resources_sent = resources.len();
        }
        self.sync_status();
        let short = short_type(type_url);
        self.shared
            .metrics
            .xds_pushes
            .get_or_create(&TypeLabels {
                r#type: short.into(),
            })
            .inc();
        self.shared
            .metrics
            .xds_push_time
            .get_or_create(&TypeLabels {
                r#type: short.into(),
            })
            .observe(started.elapsed().as_secs_f64());
        debug!(r#type = short, resources = resources.len(), "pushed");
        true
    }
}

struct Delta {
    shared: Arc<XdsShared>,
    proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    status: Arc<Mutex<ConnectionStatus>>,
    /// Shared with the connection status (what `/debug` shows): one copy of every subscribed name,
    /// cloned only when it changes.
    watches: Arc<BTreeMap<String, TypeStatus>>,
    /// What the client holds, per type: name → version.
    /// What the client holds, per type: name → version digest (a number, not the version text:
    /// thousands of Delta streams each hold every name they were sent).
    sent: HashMap<String, BTreeMap<String, u64>>,
}

impl Delta {
    fn sync_status(&self) {
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .update(&self.watches);
    }

    async fn on_request(&mut self, req: DeltaDiscoveryRequest) -> bool {
        let type_url = req.type_url.clone();
        if !known_type(&type_url) {
            self.shared.refuse("unknown_type");
            debug!(
                r#type = type_url,
                "ignoring delta request for an unsupported type"
            );
            return true;
        }
        let first_for_type = !self.watches.contains_key(&type_url);
        let watch = Arc::make_mut(&mut self.watches)
            .entry(type_url.clone())
            .or_default();
        let sent = self.sent.entry(type_url.clone()).or_default();
        if first_for_type {
            watch.wildcard = is_wildcard_type(&type_url) && req.resource_names_subscribe.is_empty();
            // A reconnecting client tells us what it has; we resend only what differs.
            // Versions we did not write (another control plane's) never match: resent.
            sent.extend(req.initial_resource_versions.iter().map(|(name, version)| {
                (
                    name.clone(),
                    Resource::parse_version(version).unwrap_or(u64::MAX),
                )
            }));
        }
        if !req.response_nonce.is_empty() && req.response_nonce == watch.nonce_sent {
            match &req.error_detail {
                Some(e) => record_nack(
                    &self.shared,
                    watch,
                    &type_url,
                    &req.response_nonce,
                    &e.message,
                ),
                None => {
                    watch.version_acked = watch.version_sent.clone();
                    watch.last_nack = None;
                }
            }
        }
        let mut newly: BTreeSet<String> = BTreeSet::new();
        for name in &req.resource_names_subscribe {
            if name == "*" {
                watch.wildcard = true;
            } else if !watch.names.contains(name) {
                Arc::make_mut(&mut watch.names).insert(name.clone());
                newly.insert(name.clone());
            }
        }
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                watch.wildcard = false;
            }
            if watch.names.contains(name) {
                Arc::make_mut(&mut watch.names).remove(name);
            }
            sent.remove(name);
        }
        self.sync_status();
        if first_for_type || !newly.is_empty() {
            let ctx = self.shared.context();
            let scope = ctx.scope(&self.proxy);
            return self.send(&ctx, &scope, &type_url, None, newly).await;
        }
        true
    }

    /// Sends the watched types the push touches, in push order. False when the stream is gone.
    async fn on_push(&mut self, push: PushRequest) -> bool {
        let ctx = self.shared.context();
        // One scope for the whole push: every type is generated for the same view.
        let scope = ctx.scope(&self.proxy);
        for t in types_to_push(&self.watches, &push) {
            let only = (!push.full && t == generate::ENDPOINT).then_some(&push.eds_hosts);
            if !self.send(&ctx, &scope, &t, only, BTreeSet::new()).await {
                return false;
            }
        }
        true
    }

    /// Sends what changed for one type; `explicit` names were just subscribed and are reported as
    /// removed when they do not exist, so the client stops waiting for them.
    async fn send(
        &mut self,
        ctx: &PushContext,
        scope: &Scope,
        type_url: &str,
        only_hosts: Option<&BTreeSet<String>>,
        explicit: BTreeSet<String>,
    ) -> bool {
        let started = Instant::now();
        let Some(watch) = self.watches.get(type_url) else {
            return true;
        };
        let names = (!watch.wildcard).then_some(watch.names.as_ref());
        let list = resource_list(ctx, &self.proxy, scope, type_url, names, only_hosts);
        let resources = &list.resources;
        let sent = self.sent.entry(type_url.to_string()).or_default();
        // A resource found by an alias (ztunnel's lookup by IP) answers for that name too.
        let current: BTreeSet<&str> = resources
            .iter()
            .flat_map(|r| std::iter::once(&r.name).chain(&r.aliases))
            .map(String::as_str)
            .collect();
        let changed: Vec<&Arc<Resource>> = resources
            .iter()
            .filter(|r| sent.get(&r.name) != Some(&r.digest))
            .collect();
        let mut removed: Vec<String> = if only_hosts.is_some() {
            Vec::new()
        } else {
            sent.keys()
                .filter(|n| !current.contains(n.as_str()))
                .cloned()
                .collect()
        };
        if type_url == generate::SECRET {
            count_unavailable_secrets(&self.shared, &explicit, resources);
        }
        removed.extend(
            explicit
                .into_iter()
                .filter(|n| !current.contains(n.as_str()) && !sent.contains_key(n)),
        );
        if changed.is_empty() && removed.is_empty() {
            return true;
        }
        let nonce = self.shared.nonce();
        let version = ctx.version.to_string();
        let entries = changed.iter().map(|r| r.delta_entry()).collect();
        let response = EncodedResponse::delta(&version, type_url, &nonce, &removed, entries);
        let count = changed.len();
        for r in &changed {
            sent.insert(r.name.clone(), r.digest);
        }
        for name in &removed {
            sent.remove(name);
        }
        if !self.shared.deliver(&self.tx, response).await {
            return false;
        }
        if let Some(watch) = Arc::make_mut(&mut self.watches).get_mut(type_url) {
            watch.nonce_sent = nonce;
            watch.version_sent = version;
            watch.resources_sent = count;
        }
        self.sync_status();
        let short = short_type(type_url);
        self.shared
            .metrics
            .xds_pushes
            .get_or_create(&TypeLabels {
                r#type: short.into(),
            })
            .inc();
        self.shared
            .metrics
            .xds_push_time
            .get_or_create(&TypeLabels {
                r#type: short.into(),
            })
            .observe(started.elapsed().as_secs_f64());
        debug!(
            r#type = short,
            changed = count,
            removed = removed.len(),
            "pushed"
        );
        true
    }
}

#[cfg(test)]
mod relevance_tests {
    use super::*;

    fn push(full: bool, hosts: &[&str]) -> PushRequest {
        PushRequest {
            full,
            types: if hosts.is_empty() {
                BTreeSet::new()
            } else {
                [generate::ENDPOINT].into()
            },
            eds_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            started: Instant::now(),
            reason: "test".into(),
            queued: Instant::now(),
        }
    }

    fn stream() -> ConnectionStatus {
        let node = Node {
            id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(),
            ..Default::default()
        };
        ConnectionStatus {
            id: "a".into(),
            proxy: Arc::new(Proxy::from_node(Some(&node)).unwrap()),
            delta: false,
            connected_at_unix: 0,
            types: Arc::default(),
            eds_hosts: Arc::default(),
        }
    }

    fn watching(eds: TypeStatus) -> Arc<BTreeMap<String, TypeStatus>> {
        Arc::new([(generate::ENDPOINT.to_string(), eds)].into())
    }

    #[test]
    fn endpoint_pushes_reach_only_streams_watching_a_changed_service() {
        let mut status = stream();
        assert!(
            push_relevant(&status, &push(true, &[])),
            "a full push reaches everyone"
        );
        assert!(
            !push_relevant(&status, &push(false, &["a.ns.svc.cluster.local"])),
            "no EDS watch"
        );
        let names = Arc::new(BTreeSet::from([
            "outbound|80||a.ns.svc.cluster.local".to_string(),
            "outbound|80|v1|c.ns.svc.cluster.local".to_string(),
        ]));
        status.update(&watching(TypeStatus {
            names: names.clone(),
            ..Default::default()
        }));
        for changed in [&["a.ns.svc.cluster.local"][..], &["c.ns.svc.cluster.local"]] {
            assert!(push_relevant(&status, &push(false, changed)), "{changed:?}");
        }
        assert!(!push_relevant(
            &status,
            &push(false, &["b.ns.svc.cluster.local"])
        ));
        // Many changed services, few watched: the lookup goes the other way, same answer.
        let many: Vec<String> = (0..10)
            .map(|i| format!("x{i}.ns.svc.cluster.local"))
            .collect();
        let mut many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(!push_relevant(&status, &push(false, &many)));
        many.push("a.ns.svc.cluster.local");
        assert!(push_relevant(&status, &push(false, &many)));

        // Recording a response (same names) keeps the derived hosts; a new subscription replaces them.
        let kept = status.eds_hosts.clone();
        status.update(&watching(TypeStatus {
            names: names.clone(),
            nonce_sent: "2".into(),
            ..Default::default()
        }));
        assert!(Arc::ptr_eq(&kept, &status.eds_hosts));
        status.update(&watching(TypeStatus {
            names: Arc::new(["outbound|80||b.ns.svc.cluster.local".to_string()].into()),
            ..Default::default()
        }));
        assert!(push_relevant(
            &status,
            &push(false, &["b.ns.svc.cluster.local"])
        ));
        assert!(!push_relevant(
            &status,
            &push(false, &["a.ns.svc.cluster.local"])
        ));

        status.update(&watching(TypeStatus {
            wildcard: true,
            ..Default::default()
        }));
        assert!(push_relevant(
            &status,
            &push(false, &["z.ns.svc.cluster.local"])
        ));
    }
}
