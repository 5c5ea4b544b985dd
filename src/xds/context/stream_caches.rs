//! What the stream layer keeps for one push: resource lists and their encodings shared by every
//! stream sending the same resources, and answers computed once per subscription. Owned by the
//! push context (same lifetime) but read and written only by `xds::server`; generators never see
//! it.

use super::memo::{FastMap, memoized_by_key};
use crate::xds::resource::{Finding, Resource, ResourceList};
use crate::xds::types::TypeUrl;
use std::sync::{Arc, Mutex};

/// Some of a subscription's resource names.
pub type SubscribedNames = Arc<std::collections::BTreeSet<String>>;

/// Services whose clusters changed between two cluster lists.
pub type ChangedHosts = Arc<std::collections::BTreeSet<String>>;

/// (type, scope key, digest of the subscribed names).
type ListKey = (TypeUrl, u64, u64);

#[derive(Default)]
pub struct StreamCaches {
    /// Encoded SotW resource lists by the digest of their names and versions: every stream sending
    /// the same resources in this push shares one copy of the bytes. Versions hash the resource's type
    /// and bytes, so equal digests mean equal lists whatever the type (an empty list encodes to
    /// nothing for every type).
    encoded: Mutex<FastMap<u64, prost::bytes::Bytes>>,
    /// Whole resource lists by (type, scope key, digest of the subscribed names): the SotW streams
    /// of one scope subscribed to the same names (every sidecar of a namespace) share one list per
    /// push instead of each looking up every name.
    lists: Mutex<FastMap<ListKey, Arc<ResourceList>>>,
    /// How many of a subscription's endpoint names name no service, by the subscription's digest
    /// (the streams of an unscoped mesh share a few subscriptions of thousands of names).
    unknown_endpoint_names: Mutex<FastMap<u64, usize>>,
    /// The services whose clusters differ between two cluster lists, by the lists' digests
    /// (`changed_cluster_hosts`).
    changed_cluster_hosts: Mutex<FastMap<(u64, u64), Option<ChangedHosts>>>,
    /// The names of a subscription that belong to the services an endpoint push changed, by the
    /// subscription's and the services' digests (`subscribed_of_changed`).
    subscribed_of_changed: Mutex<FastMap<(u64, u64), SubscribedNames>>,
    /// The outbound listeners sent in this push whose generator found a TCP conflict.
    outbound_tcp_conflicts: Mutex<std::collections::HashSet<Arc<str>>>,
}

impl StreamCaches {
    /// The resource list of `type_url` for a scope and a set of subscribed names (`names`: their
    /// digest), built once per push and shared.
    pub fn resource_list(
        &self,
        type_url: TypeUrl,
        scope: u64,
        names: u64,
        build: impl FnOnce() -> Vec<Arc<Resource>>,
    ) -> Arc<ResourceList> {
        memoized_by_key(&self.lists, (type_url, scope, names), || {
            Arc::new(ResourceList::new(build()))
        })
    }

    /// The encoded `resources` field for this resource list, built once per push and shared.
    pub fn encoded_resources(
        &self,
        digest: u64,
        resources: &[Arc<Resource>],
    ) -> prost::bytes::Bytes {
        memoized_by_key(&self.encoded, digest, || {
            crate::xds::resource::encode_resources(resources)
        })
    }

    /// `count`'s answer for the endpoint subscription with this digest, computed once per push.
    pub fn unknown_endpoint_names(&self, digest: u64, count: impl FnOnce() -> usize) -> usize {
        memoized_by_key(&self.unknown_endpoint_names, digest, count)
    }

    /// `build`'s services whose clusters changed between two cluster lists (by their digests),
    /// once per pair of lists in a push: the SotW streams of a scope were sent the same lists.
    pub fn changed_cluster_hosts(
        &self,
        old: &ResourceList,
        new: &ResourceList,
        build: impl FnOnce() -> Option<ChangedHosts>,
    ) -> Option<ChangedHosts> {
        memoized_by_key(&self.changed_cluster_hosts, (old.digest, new.digest), build)
    }

    /// `build`'s names of a subscription (by its digest) that belong to changed services (by
    /// their digest), once per push: every scope whose streams subscribe to the same names (the
    /// sidecars of an unscoped mesh, one scope per namespace) would otherwise scan them all.
    pub fn subscribed_of_changed(
        &self,
        subscription: u64,
        changed: u64,
        build: impl FnOnce() -> SubscribedNames,
    ) -> SubscribedNames {
        memoized_by_key(&self.subscribed_of_changed, (subscription, changed), build)
    }

    /// Notes what the generators found in a list sent in this push; returns how many outbound
    /// listeners sent so far have a TCP conflict.
    pub fn note_findings(&self, list: &ResourceList) -> usize {
        let mut conflicts = self
            .outbound_tcp_conflicts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (name, finding) in &list.findings {
            match finding {
                Finding::OutboundTcpConflict => {
                    conflicts.insert(name.clone());
                }
            }
        }
        conflicts.len()
    }
}
