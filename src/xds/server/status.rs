//! What a stream publishes about itself for `/debug`, and the read-only handle the admin server
//! reads the xDS server through: connections, push history, and a proxy's current config.

use super::XdsServer;
use crate::xds::context::PushContext;
use crate::xds::generate::ztunnel;
use crate::xds::intern::{Interner, names_digest};
use crate::xds::proxy::{Proxy, ProxyType};
use crate::xds::push::request::PushRecord;
use crate::xds::types::TypeUrl;
use prost::bytes::Bytes;
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

/// Subscribed-name sets shared between streams: the sidecars of a namespace subscribe to the same
/// names, and each keeping its own copy of an unscoped mesh's thousands of names costs tens of KiB
/// per stream.
#[derive(Default)]
pub struct SharedNames {
    sets: Interner<BTreeSet<String>>,
    /// Sets by the digest of a SotW request's list as sent.
    lists: std::sync::Mutex<Lists>,
}

/// Lists of names as SotW requests sent them (encoded), with their set and the set's digest.
#[derive(Default)]
struct Lists {
    by_digest: std::collections::HashMap<
        u64,
        (Bytes, std::sync::Weak<BTreeSet<String>>, u64),
        foldhash::fast::FixedState,
    >,
    /// The bytes of the lists held, kept within `LISTS_HELD_MAX`.
    bytes: usize,
}

/// The most bytes of encoded lists `SharedNames` keeps. Sidecars that send equal sets in orders
/// of their own would each add a list; past this the table starts again.
const LISTS_HELD_MAX: usize = 16 << 20;

/// The subscribed set for a list of names a SotW request sent, and the set's digest.
pub struct ListedNames {
    names: Arc<BTreeSet<String>>,
    digest: u64,
}

impl ListedNames {
    /// Whether `names` is this set.
    pub fn is(&self, names: &Arc<BTreeSet<String>>) -> bool {
        Arc::ptr_eq(&self.names, names) || *self.names == **names
    }
}

impl SharedNames {
    /// Replaces `names` (whose digest is `digest`) by an equal set another stream holds.
    fn share(&self, names: &mut Arc<BTreeSet<String>>, digest: u64) {
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

/// istiod's per-proxy endpoint gauges, computed when scraped from the connected proxies and the
/// registry being served: `pilot_no_ip` (proxies whose address no service's endpoints list) and
/// `pilot_endpoint_not_ready` (proxies listed only as not ready). ztunnel, which serves a node
/// rather than a pod, is not counted.
pub struct ProxyEndpointGauges {
    pub status: Arc<std::sync::OnceLock<XdsStatus>>,
}

impl std::fmt::Debug for ProxyEndpointGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyEndpointGauges")
    }
}

impl ProxyEndpointGauges {
    /// (proxies no endpoint lists, proxies whose endpoints are not ready), once per proxy.
    fn count(status: &XdsStatus) -> (i64, i64) {
        let registry = status.context().registry.clone();
        let mut seen = BTreeSet::new();
        let (mut no_ip, mut not_ready) = (0, 0);
        for connection in status.connections() {
            let proxy = &connection.proxy;
            if proxy.proxy_type == ProxyType::Ztunnel
                || proxy.is_debug_client()
                || !seen.insert(proxy.id.clone())
            {
                continue;
            }
            match registry.endpoint_readiness(&proxy.ip) {
                None => no_ip += 1,
                Some(false) => not_ready += 1,
                Some(true) => {}
            }
        }
        (no_ip, not_ready)
    }
}

impl prometheus_client::collector::Collector for ProxyEndpointGauges {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::Gauge;
        // Before the xDS server starts no proxy is connected.
        let (no_ip, not_ready) = self.status.get().map_or((0, 0), Self::count);
        for (name, help, value) in [
            (
                "pilot_no_ip",
                "Connected proxies whose address is in no service's endpoints",
                no_ip,
            ),
            (
                "pilot_endpoint_not_ready",
                "Connected proxies whose endpoints are not ready",
                not_ready,
            ),
        ] {
            let gauge = Gauge::<i64>::default();
            gauge.set(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// Read-only access to the xDS server for the admin server.
#[derive(Clone)]
pub struct XdsStatus {
    pub(super) server: Arc<XdsServer>,
}

impl XdsStatus {
    pub(super) fn new(server: Arc<XdsServer>) -> XdsStatus {
        XdsStatus { server }
    }

    /// The push context proxies are being served from.
    pub fn context(&self) -> Arc<PushContext> {
        self.server.context()
    }

    /// Connected streams, by connection id.
    pub fn connections(&self) -> Vec<ConnectionStatus> {
        self.server.connections.statuses()
    }

    /// The most recent pushes, oldest first.
    pub fn history(&self) -> Vec<PushRecord> {
        self.server.history()
    }

    /// The whole ambient view, in ztunnel's `/config_dump` shape.
    pub fn ambient_dump(&self) -> serde_json::Value {
        ztunnel::dump::config_dump(&ztunnel::index(&self.context()))
    }

    /// The xDS cache of the current push, as istiod's `/debug/cachez` shows its cache: each
    /// type URL's resource names or, with `sizes`, the bytes by type URL and in total (in its
    /// human units).
    pub fn cachez(&self, sizes: bool) -> serde_json::Value {
        let entries = self.context().cache_entries();
        if sizes {
            let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
            let mut total = 0;
            for (type_url, r) in &entries {
                *by_type.entry(type_url.url()).or_default() += r.any.value.len();
                total += r.any.value.len();
            }
            let mut out: serde_json::Map<String, serde_json::Value> = by_type
                .into_iter()
                .map(|(t, n)| (t.to_string(), byte_count(n).into()))
                .collect();
            out.insert("total".into(), byte_count(total).into());
            return serde_json::Value::Object(out);
        }
        let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (type_url, r) in &entries {
            names.entry(type_url.url()).or_default().push(&r.name);
        }
        for list in names.values_mut() {
            list.sort_unstable();
        }
        serde_json::to_value(names).unwrap_or_default()
    }

    /// Empties the current push's xDS cache (`/debug/cachez?clear=true`).
    pub fn clear_cache(&self) {
        self.context().clear_cache();
    }

    /// The network gateways, for `/debug/networkz`.
    pub fn network_gateways(&self) -> serde_json::Value {
        ztunnel::dump::network_gateways(&self.context())
    }
}

/// Bytes in istiod's `ByteCount` form: `512B`, `1.5kB`, `2.0MB` (powers of 1000).
fn byte_count(bytes: usize) -> String {
    const UNIT: usize = 1000;
    if bytes < UNIT {
        return format!("{bytes}B");
    }
    let (mut div, mut exp) = (UNIT, 0);
    let mut n = bytes / UNIT;
    while n >= UNIT {
        div *= UNIT;
        exp += 1;
        n /= UNIT;
    }
    format!(
        "{:.1}{}B",
        bytes as f64 / div as f64,
        ['k', 'M', 'G', 'T', 'P', 'E'][exp]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_as_istiods() {
        assert_eq!(byte_count(999), "999B");
        assert_eq!(byte_count(1500), "1.5kB");
        assert_eq!(byte_count(2_000_000), "2.0MB");
    }

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
