//! State of the World: every response carries all of a type's resources the stream subscribes to.

use super::stream::{StreamHandler, StreamState, UpdatedClusters};
use crate::xds::context::{ChangedHosts, PushContext, ScopeView};
use crate::xds::generate::shared::util::parse_service_cluster;
use crate::xds::resource::ResourceList;
use crate::xds::types::TypeUrl;
use crate::xds::wire::{EncodedResponse, SotwRequest};
use envoy_types::pb::envoy::config::core::v3::Node;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;
use tracing::debug;

pub(super) struct Sotw {
    stream: StreamState,
    /// Digest of the last response per type, to skip pushes that would change nothing.
    /// One hash per type: at 10,000 proxies a list of names would cost hundreds of megabytes.
    last_sent: HashMap<TypeUrl, u64>,
    /// Hash of the last request's resource names per type, in the order sent. A SotW client
    /// repeats its whole subscription in every ACK (thousands of EDS names for a sidecar of an
    /// unscoped mesh); when the list is the same as last time, the subscription is unchanged and
    /// no set is built or compared.
    last_requested: HashMap<TypeUrl, u64>,
    /// The clusters last sent, to tell which of the next ones changed.
    sent_clusters: Option<Arc<ResourceList>>,
    /// The services whose clusters the last CDS response added or changed; `None` when not known
    /// (the first response, or a changed cluster that is not an outbound one).
    cluster_changes: Option<Arc<BTreeSet<String>>>,
}

impl StreamHandler for Sotw {
    type Request = SotwRequest;
    const MODE: &'static str = "sotw";
    fn node(req: &SotwRequest) -> Option<&Node> {
        req.request.node.as_ref()
    }
    fn stream(&self) -> &StreamState {
        &self.stream
    }
    fn stream_mut(&mut self) -> &mut StreamState {
        &mut self.stream
    }
    async fn request(&mut self, req: Self::Request) -> bool {
        self.on_request(req).await
    }
    async fn send_pushed(
        &mut self,
        ctx: &PushContext,
        scope: &ScopeView,
        type_url: TypeUrl,
        only_hosts: Option<&BTreeSet<String>>,
        updated_clusters: &mut UpdatedClusters,
    ) -> bool {
        // After clusters were sent, the endpoints of those that changed are resent, changed or not
        // (see `send_pushed`); all of them when which changed is not known. As istiod's partial
        // EDS pushes, the others are not: an unchanged cluster is not warming, and a new one's
        // endpoints go out when the client asks for them.
        let after_clusters = type_url == TypeUrl::Endpoint && updated_clusters.all;
        let changes = if after_clusters {
            self.cluster_changes.take()
        } else {
            None
        };
        let resend_all = after_clusters && changes.is_none();
        let Some(mut sent) = self
            .send(ctx, scope, type_url, only_hosts, resend_all)
            .await
        else {
            return false;
        };
        if let Some(hosts) = changes.filter(|h| !sent && !h.is_empty() && only_hosts.is_none()) {
            // A partial list is always sent; the subscription's limits were checked on request.
            let Some(resent) = self.send(ctx, scope, type_url, Some(&hosts), false).await else {
                return false;
            };
            sent = resent;
        }
        if type_url == TypeUrl::Cluster && sent {
            updated_clusters.all = true;
        }
        true
    }
    fn new(stream: StreamState) -> Self {
        Sotw {
            stream,
            last_sent: HashMap::new(),
            last_requested: HashMap::new(),
            sent_clusters: None,
            cluster_changes: None,
        }
    }
}

impl Sotw {
    /// Returns false when the stream is gone.
    async fn on_request(&mut self, sotw: SotwRequest) -> bool {
        let req = &sotw.request;
        if super::debug::is_debug_type(&req.type_url) {
            let names = sotw.name_strings().map(str::to_string).collect();
            return self
                .stream
                .answer_debug(&req.type_url, names, &req.response_nonce, false)
                .await;
        }
        let Some(type_url) = TypeUrl::parse(&req.type_url) else {
            self.stream.server.refuse("unknown_type");
            debug!(
                r#type = req.type_url,
                "ignoring request for an unsupported type"
            );
            return true;
        };
        if !self.stream.within_name_limit(type_url, sotw.name_count()) {
            return false;
        }
        // The resource names hashed in order, from the bytes received.
        let digest = sotw.names_digest();
        let repeated = self.last_requested.insert(type_url, digest) == Some(digest);
        let nack = req
            .error_detail
            .as_ref()
            .map(|e| (e.code, e.message.clone()));
        let server = self.stream.server.clone();
        let watch = self.stream.watch_mut(type_url);
        // The same list as the last request: the same subscription, without building a set.
        let listed = (!repeated).then(|| {
            server
                .shared_names
                .listed(digest, sotw.encoded_names(), sotw.name_strings())
        });
        let subscription_changed = listed.as_ref().is_some_and(|l| !l.is(&watch.names));
        let respond = if req.response_nonce.is_empty() {
            // A new subscription, or a reconnecting client telling us what it has.
            watch.wildcard = type_url.is_wildcard() && sotw.is_wildcard();
            if let Some(listed) = &listed {
                watch.set_listed(listed);
            }
            true
        } else if *req.response_nonce != *watch.nonce_sent {
            // Stale: the client had not seen our latest response. Only a new subscription list counts.
            server.metrics.expired_nonces.inc();
            if let Some(listed) = listed
                .as_ref()
                .filter(|_| subscription_changed && !watch.wildcard)
            {
                watch.set_listed(listed);
                true
            } else {
                false
            }
        } else {
            let wildcard = watch.wildcard;
            match &nack {
                Some((code, message)) => {
                    self.stream
                        .record_nack(type_url, &req.response_nonce, *code, message)
                }
                None => {
                    watch.version_acked = req.version_info.as_str().into();
                    watch.nonce_acked = watch.nonce_sent.clone();
                    watch.last_nack = None;
                }
            }
            if let Some(listed) = listed
                .as_ref()
                .filter(|_| subscription_changed && !wildcard)
            {
                self.stream.watch_mut(type_url).set_listed(listed);
                true
            } else {
                false
            }
        };
        if !self
            .stream
            .publish_subscription(respond.then_some(type_url))
        {
            return false;
        }
        if respond {
            let (ctx, scope) = self.stream.view();
            return self
                .send(&ctx, &scope, type_url, None, true)
                .await
                .is_some();
        }
        true
    }

    /// Generates and sends one type. `only_hosts` limits EDS to clusters of those services;
    /// `requested` (or a resend) sends even what the client already has. Returns whether a response
    /// went out, `None` when the stream is gone.
    async fn send(
        &mut self,
        ctx: &PushContext,
        scope: &ScopeView,
        type_url: TypeUrl,
        only_hosts: Option<&BTreeSet<String>>,
        requested: bool,
    ) -> Option<bool> {
        let started = Instant::now();
        if requested && !self.stream.within_unknown_limit(ctx, type_url, None) {
            return None;
        }
        let Some(list) = self.stream.resources(ctx, scope, type_url, only_hosts) else {
            return Some(false);
        };
        if requested
            && type_url == TypeUrl::Secret
            && let Some(watch) = self.stream.watches.get(&type_url)
        {
            self.stream
                .count_unavailable_secrets(&watch.names, &list.resources);
        }
        if requested
            && !self
                .stream
                .within_unknown_limit(ctx, type_url, Some(&list.resources))
        {
            return None;
        }
        if only_hosts.is_some() && list.resources.is_empty() {
            return Some(false);
        }
        let (resources, digest) = (&list.resources, list.digest);
        if !requested && only_hosts.is_none() && self.last_sent.get(&type_url) == Some(&digest) {
            if type_url == TypeUrl::Cluster {
                // The same clusters as sent: hold this push's list, not a copy from an older one.
                self.sent_clusters = Some(list.clone());
            }
            return Some(false);
        }
        let (nonce, version) = self.stream.nonce_and_version(ctx);
        let body = ctx.streams.encoded_resources(digest, resources);
        let response = EncodedResponse::new(&version, type_url.url(), &nonce, body);
        let count = resources.len();
        if !self
            .stream
            .send(type_url, response, nonce, version, count, started)
            .await
        {
            return None;
        }
        if only_hosts.is_none() {
            self.last_sent.insert(type_url, digest);
            if type_url == TypeUrl::Cluster {
                let previous = self.sent_clusters.replace(list.clone());
                self.cluster_changes = previous.and_then(|old| {
                    ctx.streams
                        .changed_cluster_hosts(&old, &list, || changed_cluster_hosts(&old, &list))
                });
            }
        }
        debug!(r#type = type_url.short(), resources = count, "pushed");
        Some(true)
    }
}

/// The services of the outbound clusters that are new or changed in `new` against `old`; `None`
/// when a changed cluster is not an outbound one, whose endpoints cannot be told by service.
fn changed_cluster_hosts(old: &ResourceList, new: &ResourceList) -> Option<ChangedHosts> {
    let before: HashMap<&str, u64> = old.resources.iter().map(|r| (&*r.name, r.digest)).collect();
    let mut hosts = BTreeSet::new();
    for r in &new.resources {
        if before.get(&*r.name) == Some(&r.digest) {
            continue;
        }
        let (_, _, host) = parse_service_cluster(&r.name)?;
        hosts.insert(host.to_string());
    }
    Some(Arc::new(hosts))
}
