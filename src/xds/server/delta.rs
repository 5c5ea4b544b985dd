//! Delta (incremental) xDS: responses carry only what changed since what the client holds, and the
//! names it no longer gets.

use super::held::Held;
use super::stream::{StreamHandler, StreamState, UpdatedClusters};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::resource::Resource;
use crate::xds::types::TypeUrl;
use crate::xds::wire::EncodedResponse;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;
use tracing::debug;

pub(super) struct Delta {
    stream: StreamState,
    /// What the client holds, per type (see `held`).
    held: HashMap<TypeUrl, Held>,
}

impl StreamHandler for Delta {
    type Request = DeltaDiscoveryRequest;
    const MODE: &'static str = "delta";
    fn node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
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
        self.send(
            ctx,
            scope,
            type_url,
            only_hosts,
            BTreeSet::new(),
            Some(updated_clusters),
        )
        .await
    }
    fn new(stream: StreamState) -> Self {
        Delta {
            stream,
            held: HashMap::new(),
        }
    }
}

impl Delta {
    async fn on_request(&mut self, req: DeltaDiscoveryRequest) -> bool {
        if super::debug::is_debug_type(&req.type_url) {
            return self
                .stream
                .answer_debug(
                    &req.type_url,
                    req.resource_names_subscribe.clone(),
                    &req.response_nonce,
                    true,
                )
                .await;
        }
        let Some(type_url) = TypeUrl::parse(&req.type_url) else {
            self.stream.server.refuse("unknown_type");
            debug!(
                r#type = req.type_url,
                "ignoring delta request for an unsupported type"
            );
            return true;
        };
        let first_for_type = !self.stream.watches.contains_key(&type_url);
        let held = self
            .stream
            .watches
            .get(&type_url)
            .map_or(0, |w| w.names.len());
        let asked = held
            + req.resource_names_subscribe.len()
            + if first_for_type {
                req.initial_resource_versions.len()
            } else {
                0
            };
        if !self.stream.within_name_limit(type_url, asked) {
            return false;
        }
        let held = self.held.entry(type_url).or_default();
        if first_for_type {
            self.stream.watch_mut(type_url).wildcard =
                type_url.is_wildcard() && req.resource_names_subscribe.is_empty();
            // A reconnecting client tells us what it has; we resend only what differs.
            // Versions we did not write (another control plane's) never match: resent.
            for (name, version) in &req.initial_resource_versions {
                let digest = Resource::parse_version(version).unwrap_or(u64::MAX);
                held.insert(&Arc::from(name.as_str()), digest);
            }
        }
        if !req.response_nonce.is_empty()
            && self
                .stream
                .watches
                .get(&type_url)
                .is_some_and(|w| *w.nonce_sent == *req.response_nonce)
        {
            match &req.error_detail {
                Some(e) => {
                    self.stream
                        .record_nack(type_url, &req.response_nonce, e.code, &e.message)
                }
                None => {
                    let watch = self.stream.watch_mut(type_url);
                    watch.version_acked = watch.version_sent.clone();
                    watch.nonce_acked = watch.nonce_sent.clone();
                    watch.last_nack = None;
                }
            }
        } else if !req.response_nonce.is_empty() {
            self.stream.server.metrics.expired_nonces.inc();
        }
        let server = self.stream.server.clone();
        let watch = self.stream.watch_mut(type_url);
        let mut newly: BTreeSet<String> = BTreeSet::new();
        for name in &req.resource_names_subscribe {
            if name == "*" {
                watch.wildcard = true;
            } else if !watch.names.contains(name) {
                newly.insert(name.clone());
            }
        }
        let gone: Vec<&String> = req
            .resource_names_unsubscribe
            .iter()
            .filter(|n| watch.names.contains(n.as_str()))
            .collect();
        if req.resource_names_unsubscribe.iter().any(|n| n == "*") {
            watch.wildcard = false;
        }
        if !newly.is_empty() || !gone.is_empty() {
            watch.edit_names(
                |names| {
                    names.extend(newly.iter().cloned());
                    for name in &gone {
                        names.remove(name.as_str());
                    }
                },
                &server.shared_names,
            );
        }
        for name in &req.resource_names_unsubscribe {
            held.remove(name);
        }
        if !self
            .stream
            .publish_subscription((!newly.is_empty()).then_some(type_url))
        {
            return false;
        }
        if first_for_type || !newly.is_empty() {
            let (ctx, scope) = self.stream.view();
            return self.send(&ctx, &scope, type_url, None, newly, None).await;
        }
        true
    }

    /// Sends what changed for one type; `explicit` names were just subscribed and are reported as
    /// removed when they do not exist, so the client stops waiting for them. In a push, `updated`
    /// collects the clusters sent, and their endpoints are then sent even when the client has them
    /// (see `send_pushed`). False when the stream is gone.
    async fn send(
        &mut self,
        ctx: &PushContext,
        scope: &ScopeView,
        type_url: TypeUrl,
        only_hosts: Option<&BTreeSet<String>>,
        explicit: BTreeSet<String>,
        mut updated: Option<&mut UpdatedClusters>,
    ) -> bool {
        let started = Instant::now();
        if !explicit.is_empty() && !self.stream.within_unknown_limit(ctx, type_url, None) {
            return false;
        }
        let Some(list) = self.stream.resources(ctx, scope, type_url, only_hosts) else {
            return true;
        };
        let resources = &list.resources;
        if !explicit.is_empty()
            && !self
                .stream
                .within_unknown_limit(ctx, type_url, Some(resources))
        {
            return false;
        }
        if type_url == TypeUrl::Secret {
            self.stream.count_unavailable_secrets(&explicit, resources);
        }
        let resend = match updated.as_deref_mut() {
            Some(u) if type_url == TypeUrl::Endpoint => std::mem::take(u),
            _ => UpdatedClusters::default(),
        };
        let whole = only_hosts.is_none();
        let held = self.held.entry(type_url).or_default();
        if whole && explicit.is_empty() && resend.is_empty() && held.level_with(&list) {
            return true;
        }
        let changed: Vec<&Arc<Resource>> = resources
            .iter()
            .filter(|r| held.get(&r.name) != Some(r.digest) || resend.contains(&r.name))
            .collect();
        // What the client should drop: only a full list (not a push limited to some hosts) or
        // names asked for explicitly can tell. A resource found by an alias (ztunnel's lookup by
        // IP) answers for that name too.
        let mut removed: Vec<String> = Vec::new();
        // Names held that the list answers by an alias, not by name.
        let mut by_alias: Vec<(Arc<str>, u64)> = Vec::new();
        if whole || !explicit.is_empty() {
            let current: HashSet<&str, foldhash::fast::RandomState> = resources
                .iter()
                .flat_map(|r| std::iter::once(&*r.name).chain(r.aliases.iter().map(String::as_str)))
                .collect();
            if whole {
                let listed = &list.index().digests;
                for (name, digest) in held.iter() {
                    if !current.contains(&**name) {
                        removed.push(name.to_string());
                    } else if !listed.contains_key(name) {
                        by_alias.push((name.clone(), digest));
                    }
                }
                removed.sort_unstable();
            }
            removed.extend(
                explicit
                    .into_iter()
                    .filter(|n| !current.contains(n.as_str()) && !held.contains(n)),
            );
        }
        if changed.is_empty() && removed.is_empty() {
            if whole {
                held.set(&list, by_alias);
            }
            return true;
        }
        let (nonce, version) = self.stream.nonce_and_version(ctx);
        let entries = if changed.len() == resources.len() {
            list.delta_frames(crate::xds::wire::frames).to_vec()
        } else {
            changed.iter().map(|r| r.delta_entry()).collect()
        };
        let response = EncodedResponse::delta(&version, type_url.url(), &nonce, &removed, entries);
        let count = changed.len();
        if whole {
            held.set(&list, by_alias);
        } else {
            for r in &changed {
                held.insert(&r.name, r.digest);
            }
            for name in &removed {
                held.remove(name);
            }
            if held.wants_compaction()
                && let Some(whole_list) = self.stream.resources(ctx, scope, type_url, None)
            {
                held.compact(&whole_list);
            }
        }
        if let Some(u) = updated.filter(|_| type_url == TypeUrl::Cluster) {
            changed.iter().for_each(|r| u.add(&r.name));
        }
        if !self
            .stream
            .send(type_url, response, nonce, version, count, started)
            .await
        {
            return false;
        }
        debug!(
            r#type = type_url.short(),
            changed = count,
            removed = removed.len(),
            "pushed"
        );
        true
    }
}
