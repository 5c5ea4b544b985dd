//! The resources a push built, by type, scope and name; and what it keeps of the push before:
//! the resources of each type whose declared inputs did not change since (istiod's xDS cache,
//! whose entries outlive pushes that do not touch their dependencies).

use super::memo::{FastMap, lock, memoized};
use super::scope::Role;
use crate::config::Kind;
use crate::xds::resource::{Resource, Resources};
use crate::xds::types::TypeUrl;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// One scope's built resources of one type, by name.
type ResourcesByName = FastMap<String, Resources>;

/// Built resources by (type, scope key), then by resource name: looked up by `&str`, without
/// allocating a key, on the hottest path of a push (every named EDS/RDS resource of every proxy).
type ByScope = FastMap<(TypeUrl, u64), ResourcesByName>;

/// The config kinds a type's generators read for a role, in groups: what `keep_from` checks.
pub type Reads = fn(TypeUrl, Role) -> &'static [&'static [Kind]];

/// What the push before built, and the (type, role) pairs whose resources still hold.
struct Earlier {
    built: Arc<Mutex<ByScope>>,
    holds: BTreeSet<(TypeUrl, Role)>,
}

/// Where cache reads are counted (`rudder_xds_cache_reads_total{type}`): found built in this
/// push, kept from the push before, or built.
#[derive(Clone, Default)]
pub struct CacheReads {
    pub hit: prometheus_client::metrics::counter::Counter,
    pub kept: prometheus_client::metrics::counter::Counter,
    pub miss: prometheus_client::metrics::counter::Counter,
}

#[derive(Default)]
pub struct BuiltCache {
    built: Arc<Mutex<ByScope>>,
    earlier: Mutex<Option<Earlier>>,
    pub(super) reads: CacheReads,
}

impl BuiltCache {
    /// The resources for `(type, scope, name)`: built in this push, else kept from the push
    /// before when they still hold (the same resources, not a copy), else `build`'s, stored.
    /// Built outside the lock: two streams racing both build, one value is kept and shared.
    pub fn get_or_build(
        &self,
        type_url: TypeUrl,
        role: Role,
        scope: u64,
        name: &str,
        build: impl FnOnce() -> Vec<Arc<Resource>>,
    ) -> Resources {
        let find = |map: &ByScope| {
            map.get(&(type_url, scope))
                .and_then(|by_name| by_name.get(name).cloned())
        };
        memoized(
            &self.built,
            |m| {
                find(m).inspect(|_| {
                    self.reads.hit.inc();
                })
            },
            |m, v| {
                m.entry((type_url, scope))
                    .or_default()
                    .entry(name.to_string())
                    .or_insert(v)
                    .clone()
            },
            || {
                let kept = lock(&self.earlier)
                    .as_ref()
                    .filter(|e| e.holds.contains(&(type_url, role)))
                    .and_then(|e| find(&lock(&e.built)));
                match kept {
                    Some(kept) => {
                        self.reads.kept.inc();
                        kept
                    }
                    None => {
                        self.reads.miss.inc();
                        Arc::new(build())
                    }
                }
            },
        )
    }

    /// Keeps `previous`'s resources of each type and role for which `reads` names no kind in
    /// `changes` (what changed in the store between the two pushes). Only what the previous push
    /// built itself is kept, not what it kept in turn, so at most two pushes' caches live.
    pub fn keep_from(
        &self,
        previous: &BuiltCache,
        changes: &BTreeMap<Kind, BTreeSet<(String, String)>>,
        reads: Reads,
    ) {
        let holds: BTreeSet<(TypeUrl, Role)> = TypeUrl::ALL
            .into_iter()
            .flat_map(|t| Role::ALL.map(|r| (t, r)))
            .filter(|&(t, r)| {
                reads(t, r)
                    .iter()
                    .flat_map(|group| group.iter())
                    .all(|k| !changes.contains_key(k))
            })
            .collect();
        *lock(&self.earlier) = (!holds.is_empty()).then(|| Earlier {
            built: previous.built.clone(),
            holds,
        });
    }

    /// Every resource built (or kept) in this push so far, with its type.
    pub fn entries(&self) -> Vec<(TypeUrl, Arc<Resource>)> {
        lock(&self.built)
            .iter()
            .flat_map(|((type_url, _), by_name)| {
                by_name
                    .values()
                    .flat_map(|list| list.iter())
                    .map(|r| (*type_url, r.clone()))
            })
            .collect()
    }

    /// Forgets what this push built and kept: the next request for each resource builds it.
    pub fn clear(&self) {
        lock(&self.built).clear();
        *lock(&self.earlier) = None;
    }
}
