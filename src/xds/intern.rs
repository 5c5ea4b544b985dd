//! Values shared by everyone who holds an equal one, found by a stable digest: what the xDS
//! server uses to keep one copy of the subscriptions thousands of streams send alike, and what
//! the load generator's simulated proxies use the same way.

use std::collections::BTreeSet;
use std::sync::Arc;

/// Equal values held once by everyone who holds them. Values are found by digest and compared
/// before sharing; only weak references are kept, so a value lives as long as a holder does.
pub struct Interner<T> {
    by_digest: std::sync::Mutex<
        std::collections::HashMap<u64, std::sync::Weak<T>, foldhash::fast::FixedState>,
    >,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            by_digest: std::sync::Mutex::default(),
        }
    }
}

impl<T: PartialEq> Interner<T> {
    /// Replaces `value` (whose digest is `digest`) by an equal one already held elsewhere, or
    /// offers it to the holders that come next.
    pub fn share(&self, value: &mut Arc<T>, digest: u64) {
        let mut by_digest = self.by_digest.lock().unwrap_or_else(|p| p.into_inner());
        match by_digest.get(&digest).and_then(std::sync::Weak::upgrade) {
            Some(held) if Arc::ptr_eq(&held, value) => {}
            Some(held) if *held == **value => *value = held,
            _ => {
                // Values no one holds any more are dropped each time the table doubles, so it
                // stays within twice the live values.
                if by_digest.len() >= 1024 && by_digest.len().is_power_of_two() {
                    by_digest.retain(|_, held| held.strong_count() > 0);
                }
                by_digest.insert(digest, Arc::downgrade(value));
            }
        }
    }
}

/// A stable hash of `value`; `seed` keeps digests of different things apart.
pub fn digest<T: std::hash::Hash + ?Sized>(seed: u64, value: &T) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(seed).hash_one(value)
}

/// The digest of a set of subscribed names.
pub fn names_digest(names: &BTreeSet<String>) -> u64 {
    digest(0, names)
}
