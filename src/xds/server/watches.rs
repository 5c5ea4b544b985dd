//! What a stream publishes about itself, for `/debug` and the push's fan-out: per type, the
//! names it watches and what it was sent and ACKed.

use super::shared_names::{ListedNames, SharedNames};
use crate::xds::intern::names_digest;
use crate::xds::proxy::Proxy;
use crate::xds::types::TypeUrl;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Per-type sync state of one stream.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TypeStatus {
    pub wildcard: bool,
    /// Shared, so recording what was sent (every response) never copies the subscribed names.
    /// Change it only through `set_names` or `edit_names`, which keep `names_digest` true.
    pub names: Arc<BTreeSet<String>>,
    /// Hash of `names`: with the scope, the key under which streams share built resource lists.
    /// Kept here so a push does not hash every subscribed name of every stream.
    #[serde(skip)]
    pub names_digest: u64,
    /// Shared strings: publishing copies them into the status `/debug` reads after every
    /// response and every ACK.
    pub nonce_sent: Arc<str>,
    pub version_sent: Arc<str>,
    pub version_acked: Arc<str>,
    /// The nonce of the last response ACKed: `istioctl proxy-status` compares nonces.
    pub nonce_acked: Arc<str>,
    pub last_nack: Option<Arc<str>>,
    pub resources_sent: usize,
    /// When the last response was sent, in milliseconds since the epoch (0: never).
    pub sent_at_ms: u64,
}

impl TypeStatus {
    /// Replaces the subscribed names, sharing an equal set another stream holds.
    pub fn set_names(&mut self, names: BTreeSet<String>, shared: &SharedNames) {
        self.names = Arc::new(names);
        self.names_digest = names_digest(&self.names);
        shared.share(&mut self.names, self.names_digest);
    }

    /// Replaces the subscribed names by a set made or found for a SotW request's list.
    pub fn set_listed(&mut self, listed: &ListedNames) {
        self.names = listed.names.clone();
        self.names_digest = listed.digest;
    }

    /// Changes the subscribed names in place, then shares an equal set another stream holds.
    pub fn edit_names(&mut self, edit: impl FnOnce(&mut BTreeSet<String>), shared: &SharedNames) {
        edit(Arc::make_mut(&mut self.names));
        self.names_digest = names_digest(&self.names);
        shared.share(&mut self.names, self.names_digest);
    }

    /// Makes this a copy of `other`, leaving alone what already points where `other`'s does.
    /// The names are shared by every stream with the same subscription: taking and dropping a
    /// reference to them on each publish (after every response and ACK) had both cores contend
    /// for their count, the larger part of publishing.
    pub fn copy_from(&mut self, other: &TypeStatus) {
        fn shared<T: ?Sized>(mine: &mut Arc<T>, theirs: &Arc<T>) {
            if !Arc::ptr_eq(mine, theirs) {
                *mine = theirs.clone();
            }
        }
        let TypeStatus {
            wildcard,
            names,
            names_digest,
            nonce_sent,
            version_sent,
            version_acked,
            nonce_acked,
            last_nack,
            resources_sent,
            sent_at_ms,
        } = other;
        self.wildcard = *wildcard;
        shared(&mut self.names, names);
        self.names_digest = *names_digest;
        shared(&mut self.nonce_sent, nonce_sent);
        shared(&mut self.version_sent, version_sent);
        shared(&mut self.version_acked, version_acked);
        shared(&mut self.nonce_acked, nonce_acked);
        self.sent_at_ms = *sent_at_ms;
        match (&mut self.last_nack, last_nack) {
            (Some(mine), Some(theirs)) => shared(mine, theirs),
            (mine, theirs) => mine.clone_from(theirs),
        }
        self.resources_sent = *resources_sent;
    }

    /// What `istioctl proxy-status` calls the sync state.
    pub fn state(&self) -> &'static str {
        if self.last_nack.is_some() {
            "NACKED"
        } else if self.nonce_sent.is_empty() {
            "NOT SENT"
        } else if self.version_acked == self.version_sent {
            "SYNCED"
        } else {
            "STALE"
        }
    }
}

/// A stream's subscriptions by type.
pub type WatchMap = BTreeMap<TypeUrl, TypeStatus>;

/// A copy of a stream's subscriptions in its published status, shared with `/debug` readers.
pub type Watches = Arc<WatchMap>;

#[derive(Debug, Clone, serde::Serialize)]
pub struct ConnectionStatus {
    pub id: String,
    pub proxy: Arc<Proxy>,
    pub delta: bool,
    pub connected_at_unix: u64,
    pub types: Watches,
}

#[cfg(test)]
mod tests {
    use super::super::shared_names::LISTS_HELD_MAX;
    use super::*;

    /// A copy equals its source in every field, and one that already shares the source's names
    /// takes no new reference to them.
    #[test]
    fn a_copied_status_equals_its_source_and_keeps_shared_names() {
        let shared = SharedNames::default();
        let mut source = TypeStatus::default();
        source.set_names(["a".to_string(), "b".to_string()].into(), &shared);
        source.nonce_sent = "3".into();
        source.version_sent = "v3".into();
        source.version_acked = "v2".into();
        source.last_nack = Some("bad".into());
        source.nonce_acked = "2".into();
        source.sent_at_ms = 1_700_000_000_000;
        source.resources_sent = 2;
        source.wildcard = true;
        let mut copy = TypeStatus::default();
        copy.copy_from(&source);
        let as_json = |s: &TypeStatus| serde_json::to_value(s).unwrap();
        assert_eq!(as_json(&copy), as_json(&source));
        assert_eq!(copy.names_digest, source.names_digest);
        let holders = Arc::strong_count(&source.names);
        source.last_nack = None;
        source.version_acked = "v3".into();
        copy.copy_from(&source);
        assert_eq!(Arc::strong_count(&source.names), holders);
        assert_eq!(as_json(&copy), as_json(&source));
    }

    /// The digest follows every change of the names, so two streams share a built list only when
    /// they subscribe to the same names.
    #[test]
    fn the_names_digest_follows_the_names() {
        let shared = SharedNames::default();
        let mut w = TypeStatus::default();
        w.set_names(["a".to_string(), "b".to_string()].into(), &shared);
        let ab = w.names_digest;
        assert_eq!(ab, names_digest(&w.names));
        w.edit_names(
            |n| {
                n.remove("b");
                n.insert("c".into());
            },
            &shared,
        );
        assert_ne!(w.names_digest, ab);
        assert_eq!(w.names_digest, names_digest(&w.names));
        w.edit_names(
            |n| {
                n.remove("c");
                n.insert("b".into());
            },
            &shared,
        );
        assert_eq!(w.names_digest, ab);
    }

    /// Two streams subscribed to the same names hold one set; a stream that changes its names
    /// gets its own, and the other keeps the set unchanged.
    #[test]
    fn equal_subscriptions_share_one_set() {
        let shared = SharedNames::default();
        let names = || -> BTreeSet<String> { (0..100).map(|i| format!("name-{i}")).collect() };
        let (mut a, mut b) = (TypeStatus::default(), TypeStatus::default());
        a.set_names(names(), &shared);
        b.set_names(names(), &shared);
        assert!(Arc::ptr_eq(&a.names, &b.names));
        b.edit_names(
            |n| {
                n.insert("extra".into());
            },
            &shared,
        );
        assert!(!Arc::ptr_eq(&a.names, &b.names));
        assert_eq!(*a.names, names());
        a.edit_names(
            |n| {
                n.insert("extra".into());
            },
            &shared,
        );
        assert!(Arc::ptr_eq(&a.names, &b.names), "equal again: shared again");
    }

    /// Streams that send the same list get one set without making their own; another list under
    /// the same digest gets the set of its own names.
    #[test]
    fn a_list_sent_again_finds_its_set() {
        let shared = SharedNames::default();
        let list: Vec<String> = (0..100).map(|i| format!("name-{i:03}")).collect();
        let encoded = list.join(",");
        let names = || list.iter().map(String::as_str);
        let first = shared.listed(7, Some(encoded.as_bytes()), names());
        let again = shared.listed(7, Some(encoded.as_bytes()), names().rev());
        assert!(
            Arc::ptr_eq(&first.names, &again.names),
            "found by its bytes"
        );
        assert_eq!(again.digest, names_digest(&first.names));
        let expected: BTreeSet<String> = list.iter().cloned().collect();
        assert_eq!(*first.names, expected);
        let other = shared.listed(7, Some(b"x,y"), ["x", "y"].into_iter());
        assert_eq!(
            *other.names,
            BTreeSet::from(["x".to_string(), "y".to_string()])
        );
        let unencoded = shared.listed(7, None, ["x", "z"].into_iter());
        assert_eq!(
            *unencoded.names,
            BTreeSet::from(["x".to_string(), "z".to_string()])
        );
        let mut w = TypeStatus::default();
        w.set_listed(&other);
        assert!(other.is(&w.names));
        assert_eq!(w.names_digest, names_digest(&w.names));
    }

    /// Lists are held within a bound: a stream of lists never seen twice does not grow it.
    #[test]
    fn the_lists_held_stay_within_their_bound() {
        let shared = SharedNames::default();
        let long = "n".repeat(1 << 20);
        let mut held = Vec::new();
        for i in 0..40u64 {
            let encoded = format!("{long}{i}");
            held.push(shared.listed(i, Some(encoded.as_bytes()), [encoded.as_str()].into_iter()));
            assert!(shared.lists.lock().unwrap().bytes <= LISTS_HELD_MAX);
        }
    }
}
