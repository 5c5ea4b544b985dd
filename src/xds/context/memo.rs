//! Values built once per push and shared: a fast map for our own keys, and memoization outside
//! the lock.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// A HashMap with a fast non-cryptographic hasher, for keys that come from our own config.
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The guarded value, also after a panic elsewhere poisoned the lock (the sets stay usable).
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The value `get` finds in `map`, else `build`'s, stored by `put`. Built outside the lock: two
/// streams racing both build, one value is kept and shared. `get` may look up by a borrowed key, so
/// a hit allocates nothing.
pub(super) fn memoized<M, V: Clone>(
    map: &Mutex<M>,
    get: impl Fn(&M) -> Option<V>,
    put: impl FnOnce(&mut M, V) -> V,
    build: impl FnOnce() -> V,
) -> V {
    if let Some(hit) = get(&lock(map)) {
        return hit;
    }
    let built = build();
    put(&mut lock(map), built)
}

/// `memoized` for a map keyed by an owned key.
pub(super) fn memoized_by_key<K: Hash + Eq + Copy, V: Clone>(
    map: &Mutex<FastMap<K, V>>,
    key: K,
    build: impl FnOnce() -> V,
) -> V {
    memoized(
        map,
        move |m| m.get(&key).cloned(),
        |m, v| m.entry(key).or_insert(v).clone(),
        build,
    )
}
