//! The typed in-memory config store: kind → namespace/name → `Arc<Config>`, with resource versions.
//!
//! Readers take snapshots: an `Arc` to an immutable persistent map, O(1) to take and never blocked by a
//! writer. Writers are serialized among themselves; each write (or batch) builds the next snapshot by
//! structural sharing and publishes it atomically. Every change is announced on the event bus with the
//! key and the old/new versions, never the object itself: subscribers read what they need from a
//! snapshot at least as new as the event's revision.

use crate::config::{Config, ConfigKey, Kind};
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// One stored object with the store revision at which it was last written.
#[derive(Debug, Clone)]
pub struct Entry {
    pub config: Arc<Config>,
    pub version: u64,
}

/// Versions are store revisions, unique to each write: equal versions are the same object.
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
    }
}

/// (namespace, name, cluster): an object of the config cluster (cluster empty) sorts before the
/// objects of the same name read from remote clusters.
type NameMap = imbl::OrdMap<(String, String, String), Entry>;

/// An immutable view of the whole store at one revision.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    revision: u64,
    kinds: imbl::OrdMap<Kind, NameMap>,
    /// The keys written at each recent revision, so a reader holding an older snapshot finds what
    /// changed since without comparing the stores (`changes_since`). The oldest are dropped
    /// beyond `CHANGE_LOG`.
    changes: imbl::OrdMap<u64, ConfigKey>,
}

/// How many recent changes a snapshot remembers; a reader further behind rebuilds what it derives.
const CHANGE_LOG: usize = 100_000;

impl Snapshot {
    /// The store revision this snapshot reflects: every event with `revision <= this` is included.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn get(&self, key: &ConfigKey) -> Option<&Entry> {
        self.kinds.get(&key.kind)?.get(&(
            key.namespace.clone(),
            key.name.clone(),
            key.cluster.clone(),
        ))
    }

    /// The config cluster's object of `kind` named `namespace/name` (namespace empty for
    /// cluster-scoped kinds).
    pub fn get_named(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Entry> {
        self.get_in(kind, "", namespace, name)
    }

    /// The object of `kind` named `namespace/name` read from `cluster` (empty: the config cluster).
    pub fn get_in(&self, kind: Kind, cluster: &str, namespace: &str, name: &str) -> Option<&Entry> {
        self.kinds
            .get(&kind)?
            .get(&(namespace.to_string(), name.to_string(), cluster.to_string()))
    }

    /// Every cluster's object of `kind` named `namespace/name`, the config cluster's first.
    pub fn get_all_clusters<'a, 'n>(
        &'a self,
        kind: Kind,
        namespace: &'n str,
        name: &'n str,
    ) -> impl Iterator<Item = &'a Entry> + use<'a, 'n> {
        self.kinds
            .get(&kind)
            .into_iter()
            .flat_map(move |m| m.range((namespace.to_string(), name.to_string(), String::new())..))
            .take_while(move |((ns, n, _), _)| ns == namespace && n == name)
            .map(|(_, e)| e)
    }

    /// All objects of `kind`, ordered by namespace then name.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Entry> {
        self.kinds.get(&kind).into_iter().flat_map(|m| m.values())
    }

    /// The config cluster's objects of `kind` (what remote clusters' watchers read left out):
    /// for what is written back to the config cluster or stands for it alone.
    pub fn list_local(&self, kind: Kind) -> impl Iterator<Item = &Entry> {
        self.list(kind)
            .filter(|e| e.config.metadata.cluster.is_empty())
    }

    /// Objects of `kind` in one namespace.
    pub fn list_namespace<'a, 'n>(
        &'a self,
        kind: Kind,
        namespace: &'n str,
    ) -> impl Iterator<Item = &'a Entry> + use<'a, 'n> {
        self.kinds
            .get(&kind)
            .into_iter()
            .flat_map(move |m| m.range((namespace.to_string(), String::new(), String::new())..))
            .map(|(_, e)| e)
            .take_while(move |e| e.config.metadata.namespace == namespace)
    }

    /// The (namespace, name) of every object added, changed or removed since `older` (an earlier
    /// snapshot of the same store), by kind, read from the change log: the cost follows the
    /// changes, not the store. `None` when `older` is further behind than the log reaches.
    pub fn changes_since(
        &self,
        older: &Snapshot,
    ) -> Option<BTreeMap<Kind, BTreeSet<(String, String)>>> {
        let mut changes: BTreeMap<Kind, BTreeSet<(String, String)>> = BTreeMap::new();
        if older.revision >= self.revision {
            return Some(changes);
        }
        let reaches = self
            .changes
            .get_min()
            .is_some_and(|(first, _)| *first <= older.revision + 1);
        if !reaches {
            return None;
        }
        for (_, key) in self.changes.range(older.revision + 1..=self.revision) {
            changes
                .entry(key.kind)
                .or_default()
                .insert((key.namespace.clone(), key.name.clone()));
        }
        Some(changes)
    }

    pub fn len(&self) -> usize {
        self.kinds.values().map(|m| m.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.kinds.get(&kind).map_or(0, |m| m.len())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventKind {
    Added,
    Updated,
    Deleted,
}

/// A change announcement. Carries the key and versions only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub key: ConfigKey,
    pub kind: EventKind,
    pub old_version: Option<u64>,
    pub new_version: Option<u64>,
    /// The store revision after this change; equal to `new_version` for adds and updates.
    pub revision: u64,
}

/// One write in a batch. Short-lived, so the unboxed `Config` costs nothing worth an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Change {
    Upsert(Config),
    Delete(ConfigKey),
}

/// The shared store, read-only: everyone but the sources holds this (in an `Arc`). Writes go
/// through the [`StoreWriter`] only sources receive, so "sources are the only writers" holds by
/// type (kube-runtime's `Writer`/`Store` split).
pub struct Store {
    current: ArcSwap<Snapshot>,
    writer: Mutex<()>,
    events: broadcast::Sender<Event>,
}

/// How many events a slow subscriber may fall behind before it is told it lagged and must resync.
pub const DEFAULT_EVENT_CAPACITY: usize = 65_536;

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_EVENT_CAPACITY)
    }
}

impl Store {
    pub fn new(event_capacity: usize) -> Store {
        let (events, _) = broadcast::channel(event_capacity.max(1));
        Store {
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: Mutex::new(()),
            events,
        }
    }

    /// The current state. Never blocks, whatever writers are doing.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Subscribes to every change made from now on. A subscriber that falls more than the bus capacity
    /// behind gets `RecvError::Lagged` and should rebuild its view from `snapshot()`.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// A store holding every object of a YAML text, which must be valid (unit tests' fixtures).
    #[cfg(test)]
    pub fn from_yaml(yaml: &str) -> Store {
        let store = Store::default();
        store.apply_yaml(yaml);
        store
    }

    #[cfg(any(test, feature = "testing"))]
    fn apply_yaml(&self, yaml: &str) {
        let parsed = crate::config::parse_yaml(yaml, "default");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        self.apply(parsed.configs.into_iter().map(Change::Upsert).collect());
    }

    /// Applies a batch atomically: readers see all of it or none of it. Unchanged upserts and deletes
    /// of missing keys are dropped, so re-reading the same source causes no events.
    fn apply(&self, changes: Vec<Change>) -> Vec<Event> {
        // A poisoned lock only means another writer panicked mid-build; the published snapshot is
        // still consistent because nothing is published until the build is done.
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = Snapshot::clone(&self.current.load());
        let mut events = Vec::new();
        for change in changes {
            match change {
                Change::Upsert(config) => {
                    let key = config.key();
                    let names = next.kinds.entry(key.kind).or_default();
                    let name_key = (key.namespace.clone(), key.name.clone(), key.cluster.clone());
                    let old = names.get(&name_key);
                    if old.is_some_and(|e| *e.config == config) {
                        continue;
                    }
                    let old_version = old.map(|e| e.version);
                    next.revision += 1;
                    let version = next.revision;
                    next.changes.insert(version, key.clone());
                    names.insert(
                        name_key,
                        Entry {
                            config: Arc::new(config),
                            version,
                        },
                    );
                    events.push(Event {
                        key,
                        kind: if old_version.is_some() {
                            EventKind::Updated
                        } else {
                            EventKind::Added
                        },
                        old_version,
                        new_version: Some(version),
                        revision: version,
                    });
                }
                Change::Delete(key) => {
                    let Some(names) = next.kinds.get_mut(&key.kind) else {
                        continue;
                    };
                    let Some(old) = names.remove(&(
                        key.namespace.clone(),
                        key.name.clone(),
                        key.cluster.clone(),
                    )) else {
                        continue;
                    };
                    next.revision += 1;
                    next.changes.insert(next.revision, key.clone());
                    events.push(Event {
                        key,
                        kind: EventKind::Deleted,
                        old_version: Some(old.version),
                        new_version: None,
                        revision: next.revision,
                    });
                }
            }
        }
        if events.is_empty() {
            return events;
        }
        while next.changes.len() > CHANGE_LOG {
            let Some(oldest) = next.changes.get_min().map(|(revision, _)| *revision) else {
                break;
            };
            next.changes.remove(&oldest);
        }
        self.current.store(Arc::new(next));
        for event in &events {
            // No subscribers is fine: nobody needs to hear about it.
            let _ = self.events.send(event.clone());
        }
        events
    }
}

/// The handle that writes the store: sources (and fixtures) hold one; everything else reads
/// through the `Arc<Store>` of [`StoreWriter::reader`]. Cheap to clone; it reads too (`Deref`).
#[derive(Clone)]
pub struct StoreWriter(Arc<Store>);

impl Default for StoreWriter {
    fn default() -> Self {
        StoreWriter::new(DEFAULT_EVENT_CAPACITY)
    }
}

impl std::ops::Deref for StoreWriter {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl StoreWriter {
    pub fn new(event_capacity: usize) -> StoreWriter {
        StoreWriter(Arc::new(Store::new(event_capacity)))
    }

    /// The read-only handle everyone else gets.
    pub fn reader(&self) -> Arc<Store> {
        self.0.clone()
    }

    /// Adds or replaces one object. Returns the event, or `None` when the object is unchanged.
    pub fn upsert(&self, config: Config) -> Option<Event> {
        self.0
            .apply(vec![Change::Upsert(config)])
            .into_iter()
            .next()
    }

    /// Deletes one object. Returns the event, or `None` when it was not there.
    pub fn delete(&self, key: &ConfigKey) -> Option<Event> {
        self.0
            .apply(vec![Change::Delete(key.clone())])
            .into_iter()
            .next()
    }

    /// Applies a batch atomically: readers see all of it or none of it. Unchanged upserts and
    /// deletes of missing keys are dropped, so re-reading the same source causes no events.
    pub fn apply(&self, changes: Vec<Change>) -> Vec<Event> {
        self.0.apply(changes)
    }

    /// Applies every object of a YAML text, which must be valid (tests' fixtures).
    #[cfg(any(test, feature = "testing"))]
    pub fn apply_yaml(&self, yaml: &str) {
        self.0.apply_yaml(yaml)
    }

    /// A writer of a store holding every object of a YAML text (tests' fixtures).
    #[cfg(any(test, feature = "testing"))]
    pub fn from_yaml(yaml: &str) -> StoreWriter {
        let writer = StoreWriter::default();
        writer.apply_yaml(yaml);
        writer
    }
}

#[cfg(test)]
mod tests;
