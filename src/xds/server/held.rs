//! What a Delta client holds of one type. Most streams are brought level with the same list on
//! each push (every sidecar of an unscoped mesh holds every cluster), so the record is that list's
//! shared index of names and digests, plus where this client differs from it: a stream sent the
//! whole list costs no memory per resource, where a name → digest map per stream cost ~40 bytes
//! per resource, hundreds of KiB per stream in a mesh of thousands of services. The index, not
//! the list, is kept: the list would keep the resources' bytes alive after the push context that
//! made them is gone.

use crate::xds::resource::{NameIndex, ResourceList};
use std::collections::HashMap;
use std::sync::Arc;

/// Differences from the base: the digest the client holds, or `None` for a base name it does not.
type Overlay = HashMap<Arc<str>, Option<u64>, foldhash::fast::RandomState>;

/// Below this many differences a stream keeps them rather than compare itself to the whole list.
const COMPACT_MIN: usize = 64;

#[derive(Default)]
pub(super) struct Held {
    /// The index of the list the client was last brought level with, shared with the other
    /// streams sent it.
    base: Option<Arc<NameIndex>>,
    overlay: Overlay,
    /// Overlay size past which the next partial push checks whether the client is level with the
    /// whole list again (raised after a check that found it was not).
    compact_at: usize,
}

impl Held {
    fn base_index(&self) -> Option<&HashMap<Arc<str>, u64, foldhash::fast::RandomState>> {
        self.base.as_deref().map(|b| &b.digests)
    }

    /// The digest the client holds of `name`, if it holds it.
    pub(super) fn get(&self, name: &str) -> Option<u64> {
        match self.overlay.get(name) {
            Some(held) => *held,
            None => self.base_index().and_then(|i| i.get(name).copied()),
        }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The client now holds `name` at `digest`.
    pub(super) fn insert(&mut self, name: &Arc<str>, digest: u64) {
        if self.base_index().and_then(|i| i.get(&**name)) == Some(&digest) {
            self.overlay.remove(&**name);
        } else {
            self.overlay.insert(name.clone(), Some(digest));
        }
    }

    /// The client no longer holds `name`.
    pub(super) fn remove(&mut self, name: &str) {
        match self.base_index().and_then(|i| i.get_key_value(name)) {
            Some((shared, _)) => {
                let shared = shared.clone();
                self.overlay.insert(shared, None);
            }
            None => {
                self.overlay.remove(name);
            }
        }
    }

    /// Every name the client holds, with its digest.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, u64)> {
        let index = self.base_index();
        let from_base = index.into_iter().flatten().filter_map(|(name, digest)| {
            match self.overlay.get(&**name) {
                None => Some((name, *digest)),
                Some(held) => held.map(|d| (name, d)),
            }
        });
        let beside_base = self
            .overlay
            .iter()
            .filter(move |(name, _)| !index.is_some_and(|i| i.contains_key(&***name)))
            .filter_map(|(name, held)| held.map(|d| (name, d)));
        from_base.chain(beside_base)
    }

    /// Whether the client holds exactly `list`.
    pub(super) fn level_with(&self, list: &ResourceList) -> bool {
        self.overlay.is_empty() && self.base.as_ref().is_some_and(|b| b.digest == list.digest)
    }

    /// The client now holds exactly `list` and, beside it, `also` (names it asked for that the
    /// list answers by an alias).
    pub(super) fn set(&mut self, list: &ResourceList, also: Vec<(Arc<str>, u64)>) {
        self.base = Some(list.index().clone());
        self.overlay = also.into_iter().map(|(n, d)| (n, Some(d))).collect();
        self.compact_at = 0;
    }

    /// Whether enough differences have gathered to compare the client with the whole list.
    pub(super) fn wants_compaction(&self) -> bool {
        let base_len = self.base.as_ref().map_or(0, |b| b.digests.len());
        self.overlay.len() > self.compact_at.max(COMPACT_MIN + base_len / 4)
    }

    /// Rebases on `whole` if the client holds exactly it (partial pushes brought it level);
    /// otherwise waits for the differences to double before checking again.
    pub(super) fn compact(&mut self, whole: &ResourceList) {
        let index = &whole.index().digests;
        let level = self.iter().count() == index.len()
            && index
                .iter()
                .all(|(name, digest)| self.get(name) == Some(*digest));
        if level {
            self.set(whole, Vec::new());
        } else {
            self.compact_at = self.overlay.len() * 2;
        }
    }

    /// How many differences from the shared list this stream records.
    #[cfg(test)]
    fn own_entries(&self) -> usize {
        self.overlay.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::resource::Resource;
    use envoy_types::pb::google::protobuf::Any;

    fn list(items: &[(&str, &str)]) -> Arc<ResourceList> {
        Arc::new(ResourceList::new(
            items
                .iter()
                .map(|(name, body)| {
                    Resource::new(
                        name,
                        Any {
                            type_url: "t".into(),
                            value: body.as_bytes().to_vec(),
                        },
                    )
                })
                .collect(),
        ))
    }

    fn held_names(h: &Held) -> Vec<String> {
        let mut v: Vec<String> = h.iter().map(|(n, _)| n.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_stream_sent_the_whole_list_records_nothing_of_its_own() {
        let l = list(&[("a", "1"), ("b", "1")]);
        let mut h = Held::default();
        h.set(&l, Vec::new());
        assert_eq!(h.own_entries(), 0);
        assert_eq!(h.get("a"), Some(l.resources[0].digest));
        assert!(!h.contains("c"));
        assert!(h.level_with(&list(&[("a", "1"), ("b", "1")])));
        assert!(!h.level_with(&list(&[("a", "2"), ("b", "1")])));
    }

    #[test]
    fn changes_after_the_base_are_recorded_and_undone() {
        let l = list(&[("a", "1"), ("b", "1")]);
        let newer = list(&[("a", "2")]);
        let mut h = Held::default();
        h.set(&l, Vec::new());
        h.insert(&newer.resources[0].name, newer.resources[0].digest);
        h.remove("b");
        h.insert(&Arc::from("c"), 7);
        assert_eq!(h.get("a"), Some(newer.resources[0].digest));
        assert_eq!(h.get("b"), None);
        assert_eq!(held_names(&h), ["a", "c"]);
        assert!(!h.level_with(&l));
        // Back to the base's versions: nothing of its own left.
        h.insert(&l.resources[0].name, l.resources[0].digest);
        h.insert(&l.resources[1].name, l.resources[1].digest);
        h.remove("c");
        assert_eq!(h.own_entries(), 0);
        assert!(h.level_with(&l));
    }

    #[test]
    fn names_held_by_an_alias_stay_beside_the_base() {
        let l = list(&[("a", "1")]);
        let mut h = Held::default();
        h.set(&l, vec![(Arc::from("10.0.0.1"), l.resources[0].digest)]);
        assert_eq!(held_names(&h), ["10.0.0.1", "a"]);
        assert!(!h.level_with(&l), "the alias is held beside the list");
    }

    #[test]
    fn compaction_rebases_only_a_stream_level_with_the_whole_list() {
        let names: Vec<String> = (0..400).map(|i| format!("n{i}")).collect();
        let old: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
        let new: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "2")).collect();
        let (old, new) = (list(&old), list(&new));
        let mut h = Held::default();
        h.set(&old, Vec::new());
        for r in &new.resources[..300] {
            h.insert(&r.name, r.digest);
        }
        assert!(h.wants_compaction());
        h.compact(&new);
        assert_eq!(h.own_entries(), 300, "not level: a quarter is still old");
        assert!(
            !h.wants_compaction(),
            "no new check until the differences double"
        );
        for r in &new.resources[300..] {
            h.insert(&r.name, r.digest);
        }
        h.compact(&new);
        assert_eq!(h.own_entries(), 0);
        assert!(h.level_with(&new));
    }
}
