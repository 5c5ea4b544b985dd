//! What SotW and Delta streams share: the life of a stream (registered while it lives, requests and
//! pushes handled in turn), and the per-type bookkeeping of subscriptions, ACKs, NACKs and what was
//! sent, with the metrics each of those counts.

use super::connections::Registration;
use super::debug as debug_types;
use super::watches::{TypeStatus, WatchMap};
use super::xds_server::XdsServer;
use crate::metrics::TypeLabels;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::{self, shared::util::parse_service_cluster};
use crate::xds::proxy::Proxy;
use crate::xds::push::request::PushRequest;
use crate::xds::resource::{Resource, ResourceList};
use crate::xds::types::TypeUrl;
use crate::xds::wire::{EncodedResponse, MessageStream};
use envoy_types::pb::envoy::config::core::v3::Node;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::{debug, info, warn};

/// The response half of a stream, as both RPCs return it.
pub(super) type ResponseStream = ReceiverStream<Result<EncodedResponse, Status>>;

/// What one flavour of ADS stream does with a client request and with a push; `false` ends the stream.
pub(super) trait StreamHandler: Send + Sized + 'static {
    type Request: prost::Message + Default + Send + 'static;
    /// `sotw` or `delta`, for logs and the connection registry.
    const MODE: &'static str;
    fn node(req: &Self::Request) -> Option<&Node>;
    fn new(stream: StreamState) -> Self;
    fn stream(&self) -> &StreamState;
    fn stream_mut(&mut self) -> &mut StreamState;
    /// Handles one client request (subscription, ACK or NACK).
    fn request(&mut self, req: Self::Request) -> impl std::future::Future<Output = bool> + Send;
    /// Sends what a push changed of one watched type; `only_hosts` limits EDS to those services.
    /// `updated_clusters` carries what CDS sent to EDS later in the same push: the handler adds the
    /// clusters it sends, and resends the endpoints of those that changed even when the endpoints
    /// did not, because Envoy keeps an updated cluster warming (and the old one serving) until its
    /// ClusterLoadAssignment arrives, up to its 15 s initial-fetch timeout.
    fn send_pushed(
        &mut self,
        ctx: &PushContext,
        scope: &ScopeView,
        type_url: TypeUrl,
        only_hosts: Option<&BTreeSet<String>>,
        updated_clusters: &mut UpdatedClusters,
    ) -> impl std::future::Future<Output = bool> + Send;
}

/// The clusters a push has sent so far: all of them (SotW responses carry every cluster) or these
/// names (Delta sends only what changed), kept as hashes of the names: a collision only resends an
/// assignment, and a full push of thousands of clusters to each Delta stream then neither copies
/// every name nor compares names in a tree.
#[derive(Default)]
pub(super) struct UpdatedClusters {
    pub(super) all: bool,
    names: HashSet<u64, foldhash::fast::RandomState>,
}

impl UpdatedClusters {
    fn hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::default().hash_one(name)
    }

    pub(super) fn add(&mut self, name: &str) {
        self.names.insert(Self::hash(name));
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.all && self.names.is_empty()
    }

    /// Whether cluster `name` was sent earlier in this push.
    pub(super) fn contains(&self, name: &str) -> bool {
        !self.names.is_empty() && self.names.contains(&Self::hash(name))
    }
}

/// The watched types a push touches, in push order (CDS before EDS).
fn pushed_types<H: StreamHandler>(handler: &H, push: &PushRequest) -> Vec<TypeUrl> {
    push.types_among(handler.stream().watches.keys().copied())
}

/// Sends `types` of a push, all from one view of one context. False when the stream is gone.
async fn push_all<H: StreamHandler>(
    handler: &mut H,
    push: &PushRequest,
    types: Vec<TypeUrl>,
) -> bool {
    let (ctx, scope) = handler.stream().view();
    let mut updated_clusters = UpdatedClusters::default();
    for t in types {
        let only = (!push.full && t == TypeUrl::Endpoint).then_some(&*push.eds_hosts);
        if !handler
            .send_pushed(&ctx, &scope, t, only, &mut updated_clusters)
            .await
        {
            return false;
        }
    }
    true
}

/// One stream's state that both protocols keep the same way.
pub(super) struct StreamState {
    pub(super) server: Arc<XdsServer>,
    pub(super) proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    /// Room in the response queue taken before a push holds a push slot, so the slot is never held
    /// while waiting for this client to read (see `reserve`).
    reserved: Vec<mpsc::OwnedPermit<Result<EncodedResponse, Status>>>,
    registration: Registration,
    /// The stream's own; publishing copies its entries into the status `/debug` reads. The
    /// subscribed names inside are shared, so neither copy repeats them.
    pub(super) watches: WatchMap,
    last_nack_log: Option<Instant>,
    nack_logs_suppressed: u64,
    /// The nonce of the last debug response: a request carrying it is that response's ACK.
    debug_nonce: Option<String>,
}

/// The service hostname a resource name is about: a cluster's (`outbound|port|subset|host`), or
/// a proxyless gRPC listener's or route's (`host:port`).
fn name_host(name: &str) -> Option<&str> {
    if let Some((_, _, host)) = parse_service_cluster(name) {
        return Some(host);
    }
    name.rsplit_once(':').map(|(host, _)| host)
}

impl StreamState {
    /// The watch of `type_url`, created when new.
    pub(super) fn watch_mut(&mut self, type_url: TypeUrl) -> &mut TypeStatus {
        self.watches.entry(type_url).or_default()
    }

    /// Publishes the subscriptions to the fan-out and `/debug`.
    pub(super) fn publish(&self) {
        self.registration.publish(&self.watches);
    }

    /// Publishes the subscriptions after a request; when it subscribed to names of `changed`, only
    /// if they keep within the unknown-names limit. Otherwise the stream is ended (false) before
    /// the fan-out indexes services that do not exist: indexing a made-up subscription's thousands
    /// of services, only to drop them when the stream ends, was most of what such a client cost.
    pub(super) fn publish_subscription(&self, changed: Option<TypeUrl>) -> bool {
        if let Some(type_url) = changed
            && !self.within_unknown_limit(&self.server.context(), type_url, None)
        {
            return false;
        }
        self.publish();
        true
    }

    /// Tells the client why its stream ends (RESOURCE_EXHAUSTED), logs it and counts `reason`;
    /// the caller then ends the stream.
    fn end_exhausted(&self, reason: &str, message: String) {
        self.server.refuse(reason);
        warn!(reason, error = message, "ending an xDS stream");
        let _ = self.tx.try_send(Err(Status::resource_exhausted(message)));
    }

    /// False (and the stream is ended with RESOURCE_EXHAUSTED, logged and counted) when `count`
    /// names of `type_url` are more than one stream may subscribe to: every name costs memory
    /// for the stream's life, and a Delta client can add names without end.
    pub(super) fn within_name_limit(&self, type_url: TypeUrl, count: usize) -> bool {
        let max = self.server.limits.max_subscribed_names;
        if count <= max {
            return true;
        }
        self.end_exhausted(
            "too_many_names",
            format!(
                "subscribed to {count} names of {}; at most {max} per stream",
                type_url.short()
            ),
        );
        false
    }

    /// False (and the stream is ended, logged and counted) when more than the limit of the names
    /// subscribed to `type_url` match nothing in the mesh. A proxy asks for what it was told
    /// exists, so its subscriptions are bounded by the mesh; names made up by a client are bounded
    /// by this limit. Endpoint names are judged by their service, before anything is generated
    /// (every endpoint name gets an assignment, empty for an unknown service); other types by
    /// what was generated (`generated`, `None` before generation).
    pub(super) fn within_unknown_limit(
        &self,
        ctx: &PushContext,
        type_url: TypeUrl,
        generated: Option<&[Arc<Resource>]>,
    ) -> bool {
        let max = self.server.limits.max_unknown_names;
        let Some(watch) = self.watches.get(&type_url) else {
            return true;
        };
        if watch.wildcard || watch.names.len() <= max {
            return true;
        }
        // A name of a service removed lately is not made up: its proxy has not followed the
        // removal yet (a namespace of thousands of services deleted at once).
        let removed_lately = |name: &str| {
            !ctx.removed_hosts.is_empty()
                && name_host(name).is_some_and(|host| ctx.removed_hosts.contains(host))
        };
        let unknown = if type_url == TypeUrl::Endpoint {
            ctx.streams.unknown_endpoint_names(watch.names_digest, || {
                watch
                    .names
                    .iter()
                    .filter(|n| {
                        parse_service_cluster(n)
                            .is_none_or(|(_, _, host)| !ctx.registry.services.contains_key(host))
                            && !removed_lately(n)
                    })
                    .count()
            })
        } else {
            let Some(resources) = generated else {
                return true;
            };
            let known: std::collections::HashSet<&str> = resources
                .iter()
                .flat_map(|r| std::iter::once(&*r.name).chain(r.aliases.iter().map(String::as_str)))
                .collect();
            watch
                .names
                .iter()
                .filter(|n| !known.contains(n.as_str()) && !removed_lately(n))
                .count()
        };
        if unknown <= max {
            return true;
        }
        self.end_exhausted(
            "too_many_unknown_names",
            format!(
                "subscribed to {unknown} names of {} that do not exist; at most {max} per stream",
                type_url.short()
            ),
        );
        false
    }

    /// Records a NACK: logged with the proxy's error, counted, kept in the status. The last good
    /// config stays in force on the proxy; nothing is resent until config changes. The error text
    /// is the client's: it is cut to `NACK_TEXT` bytes, and a stream's NACKs are logged at most
    /// once per `NACK_LOG_EVERY` (the others counted as `nack_log_suppressed`), so a client
    /// cannot flood the log.
    pub(super) fn record_nack(&mut self, type_url: TypeUrl, nonce: &str, code: i32, message: &str) {
        let mut text = truncate(message, NACK_TEXT).into_owned();
        // EnvoyFilters change what Rudder built in ways it cannot check: name them.
        let (ctx, scope) = self.view();
        let suspects = generate::passes::envoy_filter::patching(&ctx, &scope, type_url);
        if !suspects.is_empty() {
            text.push_str(&format!(
                " (patched by EnvoyFilter {})",
                suspects.join(", ")
            ));
        }
        let now = Instant::now();
        if self
            .last_nack_log
            .is_none_or(|at| now.duration_since(at) >= NACK_LOG_EVERY)
        {
            warn!(
                r#type = type_url.short(),
                nonce,
                error = text.as_str(),
                suppressed_since_last = self.nack_logs_suppressed,
                "proxy rejected config (NACK)"
            );
            self.last_nack_log = Some(now);
            self.nack_logs_suppressed = 0;
        } else {
            self.nack_logs_suppressed += 1;
            self.server.refuse("nack_log_suppressed");
        }
        self.server
            .metrics
            .xds_rejects
            .get_or_create(&TypeLabels {
                r#type: type_url.short().into(),
            })
            .inc();
        self.server
            .metrics
            .record_typed_reject(type_url.short(), &self.proxy.id, code);
        self.watch_mut(type_url).last_nack = Some(text.into());
    }

    /// The push context and this proxy's view of it, for one response or one whole push.
    pub(super) fn view(&self) -> (Arc<PushContext>, Arc<ScopeView>) {
        let ctx = self.server.context();
        let scope = ctx.scope(&self.proxy);
        (ctx, scope)
    }

    /// The resources of `type_url` this stream subscribes to (`None`: not watched). For the scoped
    /// types one list is shared by every stream of the scope with the same subscription (SotW and
    /// Delta alike) per push. `only_hosts` keeps the clusters of those services (an endpoint-only
    /// push).
    pub(super) fn resources(
        &self,
        ctx: &PushContext,
        scope: &ScopeView,
        type_url: TypeUrl,
        only_hosts: Option<&BTreeSet<String>>,
    ) -> Option<Arc<ResourceList>> {
        let watch = self.watches.get(&type_url)?;
        let names = (!watch.wildcard).then_some(watch.names.as_ref());
        let digest = if watch.wildcard {
            WILDCARD_DIGEST
        } else {
            watch.names_digest
        };
        let generate = || generate::generate(ctx, &self.proxy, scope, type_url, names);
        let whole = || {
            if type_url.is_scoped() {
                ctx.streams
                    .resource_list(type_url, scope.key, digest, generate)
            } else {
                Arc::new(ResourceList::new(generate()))
            }
        };
        let Some(hosts) = only_hosts else {
            let list = whole();
            if type_url == TypeUrl::Listener {
                let outbound = ctx.streams.note_findings(&list);
                let metrics = &self.server.metrics;
                metrics
                    .mesh
                    .inbound_conflicts
                    .set(ctx.inbound_conflicts() as i64);
                metrics.mesh.outbound_tcp_conflicts.set(outbound as i64);
            }
            return Some(list);
        };
        // A partial push (EDS): only the changed services' resources.
        let changed =
            |name: &str| parse_service_cluster(name).is_some_and(|(_, _, h)| hosts.contains(h));
        let hosts_digest = crate::xds::intern::digest(2, hosts);
        let partial = || match names {
            // Named clusters: only those assignments are built (per name, so the same resources
            // the whole list would hold), not the whole subscription's.
            Some(names) => {
                let names = ctx.streams.subscribed_of_changed(digest, hosts_digest, || {
                    Arc::new(names.iter().filter(|n| changed(n)).cloned().collect())
                });
                generate::generate(ctx, &self.proxy, scope, type_url, Some(&names))
            }
            // A wildcard subscription: the whole list, filtered.
            None => whole()
                .resources
                .iter()
                .filter(|r| changed(&r.name))
                .cloned()
                .collect(),
        };
        // The streams of a scope with the same subscription share one partial list per set of
        // hosts (a stream whose mailbox merged two pushes has more hosts than the others).
        Some(if type_url.is_scoped() {
            let key = digest ^ PARTIAL_SALT ^ hosts_digest;
            ctx.streams.resource_list(type_url, scope.key, key, partial)
        } else {
            Arc::new(ResourceList::new(partial()))
        })
    }

    /// Secrets a proxy asked for and does not get (refused, or missing): already logged with the
    /// reason by the generator, counted here once per request (`rudder_xds_errors_total{reason=
    /// "secret_unavailable"}`).
    pub(super) fn count_unavailable_secrets(
        &self,
        asked: &BTreeSet<String>,
        got: &[Arc<Resource>],
    ) {
        for name in asked {
            if !got.iter().any(|r| *r.name == **name) {
                self.server.refuse("secret_unavailable");
                self.server.metrics.sds_errors.inc();
            }
        }
    }

    /// Waits, bounded by the send timeout, until the response queue has room for `responses` (at
    /// most its size). A push takes a shared push slot only after this, so a client that does not
    /// read waits here holding nothing the other proxies need. False when the stream is gone.
    async fn reserve(&mut self, responses: usize) -> bool {
        let wanted = responses.min(STREAM_BUFFER);
        // A client that keeps up leaves room: taken at once, without arming a timer, as nearly
        // every push to nearly every stream does.
        while self.reserved.len() < wanted {
            match self.tx.clone().try_reserve_owned() {
                Ok(permit) => self.reserved.push(permit),
                Err(_) => break,
            }
        }
        if self.reserved.len() >= wanted {
            return true;
        }
        let server = self.server.clone();
        let tx = self.tx.clone();
        let reserved = &mut self.reserved;
        let wait = async move {
            while reserved.len() < wanted {
                match tx.clone().reserve_owned().await {
                    Ok(permit) => reserved.push(permit),
                    Err(_) => return false,
                }
            }
            true
        };
        match tokio::time::timeout(server.limits.send_timeout, wait).await {
            Ok(open) => open,
            Err(_) => {
                server.send_timed_out();
                false
            }
        }
    }

    /// Whether the response queue has room for `responses` (at most its size) right now.
    fn has_room(&self, responses: usize) -> bool {
        self.tx.capacity() >= responses.min(STREAM_BUFFER)
    }

    /// Gives back queue room a push reserved and did not use.
    fn release_reserved(&mut self) {
        self.reserved.clear();
    }

    /// Sends one response; on success records it in the watch of `type_url` and counts it.
    /// False when the stream is gone.
    pub(super) async fn send(
        &mut self,
        type_url: TypeUrl,
        response: EncodedResponse,
        nonce: String,
        version: String,
        count: usize,
        started: Instant,
    ) -> bool {
        let size = response.encoded_len() as f64;
        let handed = Instant::now();
        if let Some(permit) = self.reserved.pop() {
            permit.send(Ok(response));
        } else if !self.server.deliver(&self.tx, response).await {
            // As istiod: a response that could not be sent counts as `<type>_senderr`.
            self.server
                .metrics
                .xds_pushes
                .get_or_create(&TypeLabels {
                    r#type: format!("{}_senderr", type_url.short()),
                })
                .inc();
            return false;
        }
        self.server
            .metrics
            .send_time
            .observe(handed.elapsed().as_secs_f64());
        if let Some(watch) = self.watches.get_mut(&type_url) {
            watch.nonce_sent = nonce.into();
            watch.version_sent = version.into();
            watch.resources_sent = count;
            watch.sent_at_ms = debug_types::now_ms();
        }
        self.publish();
        let labels = TypeLabels {
            r#type: type_url.short().into(),
        };
        self.server.metrics.xds_pushes.get_or_create(&labels).inc();
        self.server
            .metrics
            .config_size
            .get_or_create(&labels)
            .observe(size);
        self.server
            .metrics
            .xds_push_time
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        true
    }

    /// A fresh nonce and the push version, for one response.
    pub(super) fn nonce_and_version(&self, ctx: &PushContext) -> (String, String) {
        (self.server.nonce(), ctx.version.to_string())
    }

    /// Answers a request of istiod's debug types (`debug`); its ACK is not answered. A caller
    /// that may not have the answer gets the stream ended with the reason, as from istiod.
    /// False when the stream is gone.
    pub(super) async fn answer_debug(
        &mut self,
        type_url: &str,
        names: Vec<String>,
        response_nonce: &str,
        delta: bool,
    ) -> bool {
        if !response_nonce.is_empty() && self.debug_nonce.as_deref() == Some(response_nonce) {
            return true;
        }
        match debug_types::answer(&self.server, &self.proxy, type_url, names).await {
            Ok(answer) => {
                let (nonce, version) = self.nonce_and_version(&self.server.context());
                self.debug_nonce = Some(nonce.clone());
                let response = if delta {
                    EncodedResponse::message(&debug_types::delta_response(
                        type_url, nonce, version, answer,
                    ))
                } else {
                    EncodedResponse::message(&debug_types::sotw_response(
                        type_url, nonce, version, answer,
                    ))
                };
                debug!(r#type = type_url, "answered a debug request");
                self.server.deliver(&self.tx, response).await
            }
            Err(status) => {
                self.server.refuse("debug_refused");
                let _ = self.tx.try_send(Err(status));
                false
            }
        }
    }
}

/// Outgoing responses per stream; small, so a client that stops reading blocks only its own task.
pub(super) const STREAM_BUFFER: usize = 8;

/// NACK text kept and logged, in bytes.
const NACK_TEXT: usize = 1024;
/// A stream's NACKs are logged at most this often.
const NACK_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
fn truncate(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end).into()
}

/// The resource-list key of a wildcard subscription (names do not matter).
const WILDCARD_DIGEST: u64 = 0x5743_4152_445f_414c;

/// Mixed into the key of a list filtered for a partial push, so it never meets the whole list.
const PARTIAL_SALT: u64 = 0x5041_5254_4941_4c21;

/// The life of one ADS stream, SotW or Delta: registered while it lives, it handles the first
/// request, then client requests and pushes as they come, until the client leaves, the stream fails
/// or the server shuts down.
pub(super) async fn serve_stream<H: StreamHandler>(
    server: Arc<XdsServer>,
    proxy: Arc<Proxy>,
    tx: mpsc::Sender<Result<EncodedResponse, Status>>,
    first: H::Request,
    mut inbound: MessageStream<H::Request>,
) {
    if !server.limits.new_stream_wait.is_zero()
        && server
            .connections
            .in_flight
            .settled(server.limits.new_stream_wait)
            .await
    {
        server.metrics.new_stream_waits.inc();
    }
    let registration = server
        .connections
        .register(proxy.clone(), H::MODE == "delta");
    let version = server.metrics.connection_labels(&proxy.istio_version);
    server.metrics.xds_connections.get_or_create(&version).inc();
    let (id, mailbox) = (registration.id, registration.mailbox.clone());
    info!(generator = ?proxy.generator, "proxy connected");
    let mut handler = H::new(StreamState {
        server: server.clone(),
        proxy,
        tx: tx.clone(),
        reserved: Vec::new(),
        registration,
        watches: WatchMap::new(),
        last_nack_log: None,
        nack_logs_suppressed: 0,
        debug_nonce: None,
    });
    let mut next = Some(first);
    // One wait for the mailbox, kept across requests and made anew only after it fired: a new
    // one for each ACK registered and unregistered a waiter, twice per stream per push.
    let pushed = mailbox.notify.notified();
    tokio::pin!(pushed);
    loop {
        if let Some(req) = next.take()
            && !handler.request(req).await
        {
            break;
        }
        tokio::select! {
            msg = inbound.message() => match msg {
                Ok(Some(req)) => {
                    server.metrics.record_request_size(prost::Message::encoded_len(&req));
                    next = Some(req);
                }
                Ok(None) => { debug!("client closed the stream"); break; }
                Err(e) => {
                    server.stream_failed(&e);
                    // Best effort: the client learns why, if it is still reading.
                    let _ = tx.try_send(Err(e));
                    break;
                }
            },
            _ = &mut pushed => {
                pushed.set(mailbox.notify.notified());
                if let Some((push, mut in_flight)) = mailbox.take() {
                    server.metrics.proxy_queue_time.observe(push.queued.elapsed().as_secs_f64());
                    let types = pushed_types(&handler, &push);
                    // The ticket keeps new streams waiting until this push is sent, unless the
                    // client is not reading: then the stream waits on its client, not on us, and
                    // its pushes are not counted until it reads again.
                    let waiting_on_client = !handler.stream().has_room(types.len());
                    if waiting_on_client {
                        drop(in_flight.take());
                        mailbox.set_waiting_on_client(true);
                    }
                    // Room to send first, without a push slot: a client that does not read waits
                    // here (and is dropped after the send timeout) instead of holding a slot.
                    if !handler.stream_mut().reserve(types.len()).await {
                        break;
                    }
                    if waiting_on_client {
                        mailbox.set_waiting_on_client(false);
                    }
                    // Bounded concurrency: a push storm cannot starve the runtime.
                    let lane = if push.full { &server.push_permits } else { &server.partial_push_permits };
                    let Ok(_permit) = lane.acquire().await else { break };
                    let started = push.started;
                    let sent = push_all(&mut handler, &push, types).await;
                    handler.stream_mut().release_reserved();
                    if !sent {
                        break;
                    }
                    server.metrics.proxy_convergence_time.observe(started.elapsed().as_secs_f64());
                }
            }
            _ = server.shutdown.cancelled() => break,
        }
    }
    if server.connections.unregister(id) {
        server.metrics.xds_connections.get_or_create(&version).dec();
    }
    info!("proxy disconnected");
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn long_client_text_is_cut_on_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        let text = "é".repeat(1000);
        let cut = truncate(&text, 11);
        assert!(cut.starts_with("ééééé…"), "{cut}");
        assert!(cut.ends_with("(1990 bytes cut)"), "{cut}");
    }
}
