//! Equal subscriptions of different streams, held once: the names, their digest, and the
//! encoded lists built for them.

use crate::xds::intern::{Interner, names_digest};
use prost::bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Subscribed-name sets shared between streams: the sidecars of a namespace subscribe to the same
/// names, and each keeping its own copy of an unscoped mesh's thousands of names costs tens of KiB
/// per stream.
#[derive(Default)]
pub struct SharedNames {
    pub(super) sets: Interner<BTreeSet<String>>,
    /// Sets by the digest of a SotW request's list as sent.
    pub(super) lists: std::sync::Mutex<Lists>,
}

/// Lists of names as SotW requests sent them (encoded), with their set and the set's digest.
#[derive(Default)]
pub(super) struct Lists {
    pub(super) by_digest: std::collections::HashMap<
        u64,
        (Bytes, std::sync::Weak<BTreeSet<String>>, u64),
        foldhash::fast::FixedState,
    >,
    /// The bytes of the lists held, kept within `LISTS_HELD_MAX`.
    pub(super) bytes: usize,
}

/// The most bytes of encoded lists `SharedNames` keeps. Sidecars that send equal sets in orders
/// of their own would each add a list; past this the table starts again.
pub(super) const LISTS_HELD_MAX: usize = 16 << 20;

/// The subscribed set for a list of names a SotW request sent, and the set's digest.
pub struct ListedNames {
    pub(super) names: Arc<BTreeSet<String>>,
    pub(super) digest: u64,
}

impl ListedNames {
    /// Whether `names` is this set.
    pub fn is(&self, names: &Arc<BTreeSet<String>>) -> bool {
        Arc::ptr_eq(&self.names, names) || *self.names == **names
    }
}

impl SharedNames {
    /// Replaces `names` (whose digest is `digest`) by an equal set another stream holds.
    pub(super) fn share(&self, names: &mut Arc<BTreeSet<String>>, digest: u64) {
        self.sets.share(names, digest);
    }

    /// The set of the names a SotW request lists: `list_digest` is the digest of the list as sent,
    /// `encoded` its bytes when canonical. After a change of clusters every SotW sidecar of a
    /// namespace (of the whole mesh, when unscoped) sends the same new list of thousands of names;
    /// the first stream makes the set and the others that send the same bytes get it, instead of
    /// each making, sorting and comparing its own strings (a tenth of the daemon's CPU in such a
    /// push).
    pub fn listed<'a>(
        &self,
        list_digest: u64,
        encoded: Option<&[u8]>,
        list: impl Iterator<Item = &'a str>,
    ) -> ListedNames {
        let lock = || self.lists.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(encoded) = encoded {
            let found = lock().by_digest.get(&list_digest).cloned();
            if let Some((bytes, set, digest)) = found
                && *bytes == *encoded
                && let Some(names) = set.upgrade()
            {
                return ListedNames { names, digest };
            }
        }
        let mut names = Arc::new(list.map(str::to_string).collect::<BTreeSet<_>>());
        let digest = names_digest(&names);
        self.share(&mut names, digest);
        if let Some(encoded) = encoded {
            let mut lists = lock();
            let lists = &mut *lists;
            if lists.bytes + encoded.len() > LISTS_HELD_MAX {
                lists
                    .by_digest
                    .retain(|_, (_, set, _)| set.strong_count() > 0);
                lists.bytes = lists.by_digest.values().map(|(b, _, _)| b.len()).sum();
            }
            if lists.bytes + encoded.len() > LISTS_HELD_MAX {
                lists.by_digest.clear();
                lists.bytes = 0;
            }
            let entry = (
                Bytes::copy_from_slice(encoded),
                Arc::downgrade(&names),
                digest,
            );
            lists.bytes += encoded.len();
            if let Some((old, _, _)) = lists.by_digest.insert(list_digest, entry) {
                lists.bytes -= old.len();
            }
        }
        ListedNames { names, digest }
    }
}
