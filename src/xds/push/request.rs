//! What a push asks of each stream, and what `/debug/push_status` records of it.

use crate::xds::types::TypeUrl;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// What must be pushed to a proxy. Merging two requests keeps the union of what both needed.
/// The fan-out puts a copy in every stream's mailbox: the sets are shared, copied only to merge.
#[derive(Debug, Clone)]
pub struct PushRequest {
    /// Everything may have changed: regenerate every watched type.
    pub full: bool,
    /// For a partial push, the types it carries (EDS, ztunnel's Address, SDS), to the streams
    /// that watch them.
    pub types: BTreeSet<TypeUrl>,
    /// Services whose endpoints changed: a partial push sends EDS only for their clusters.
    pub eds_hosts: Arc<BTreeSet<String>>,
    /// When the first change behind this push happened (for convergence time).
    pub started: Instant,
    pub reason: Arc<str>,
    /// When it entered this proxy's mailbox (for queue time); set by the fan-out.
    pub queued: Instant,
}

impl PushRequest {
    pub fn merge(&mut self, other: PushRequest) {
        self.full |= other.full;
        self.types.extend(other.types);
        if !Arc::ptr_eq(&self.eds_hosts, &other.eds_hosts) && !other.eds_hosts.is_empty() {
            if self.eds_hosts.is_empty() {
                self.eds_hosts = other.eds_hosts;
            } else {
                Arc::make_mut(&mut self.eds_hosts).extend(other.eds_hosts.iter().cloned());
            }
        }
        self.started = self.started.min(other.started);
        self.queued = self.queued.min(other.queued);
        if !self.reason.contains(&*other.reason) {
            self.reason = format!("{},{}", self.reason, other.reason).into();
        }
    }

    /// The types of `watched` this push touches, in push order (all of them for a full push).
    pub fn types_among(&self, watched: impl Iterator<Item = TypeUrl>) -> Vec<TypeUrl> {
        let mut out: Vec<TypeUrl> = watched
            .filter(|t| self.full || self.types.contains(t))
            .collect();
        out.sort();
        out
    }
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
