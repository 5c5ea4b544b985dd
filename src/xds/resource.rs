//! One generated xDS resource and the lists streams send: the vocabulary shared by the generators,
//! the push context's caches and the server. Each resource is digested once, and its encodings are
//! built once and shared by every stream that sends it.

use envoy_types::pb::google::protobuf::Any;
use prost::bytes::Bytes;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Field number of `resources` in both `DiscoveryResponse` and `DeltaDiscoveryResponse`.
const RESOURCES: u32 = 2;

/// Something a generator met while building a resource that an operator counts or reads, carried
/// with the resource (and so with its cached copy) to the stream layer that reports it: generators
/// return what they found, they never write it into the push context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Finding {
    /// On this outbound listener a TCP service's connections went to another service (istiod's
    /// `pilot_conflict_outbound_listener_tcp_over_current_tcp`).
    OutboundTcpConflict,
}

/// One generated xDS resource. `version` is a digest of its bytes, used by Delta xDS and to skip
/// pushes that would change nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Shared: a Delta stream keeps the name of everything it sent, and thousands of streams
    /// holding their own copy of every name cost hundreds of MiB.
    pub name: Arc<str>,
    pub any: Any,
    pub version: String,
    /// The digest `version` is written from.
    pub digest: u64,
    /// Other names the client asked this resource by (an ambient address lookup by IP answers with
    /// the workload or service it found, aliased to the IP).
    pub aliases: Vec<String>,
    /// What its generator found while building it (empty nearly always).
    pub findings: Vec<Finding>,
    /// This resource as a Delta response entry, encoded on first use and shared by every stream.
    delta_entry: std::sync::OnceLock<Bytes>,
}

impl Resource {
    pub fn new(name: impl AsRef<str>, any: Any) -> Arc<Resource> {
        Resource::with_findings(name, any, Vec::new())
    }

    /// A resource and what its generator found while building it.
    pub fn with_findings(name: impl AsRef<str>, any: Any, findings: Vec<Finding>) -> Arc<Resource> {
        let mut h = DefaultHasher::new();
        any.type_url.hash(&mut h);
        any.value.hash(&mut h);
        let digest = h.finish();
        Arc::new(Resource {
            name: Arc::from(name.as_ref()),
            any,
            version: format!("{digest:016x}"),
            digest,
            aliases: Vec::new(),
            findings,
            delta_entry: std::sync::OnceLock::new(),
        })
    }

    /// The digest in a version this control plane wrote.
    pub fn parse_version(version: &str) -> Option<u64> {
        u64::from_str_radix(version, 16).ok()
    }

    /// This resource, also known by `aliases`.
    pub fn with_aliases(&self, aliases: Vec<String>) -> Arc<Resource> {
        Arc::new(Resource {
            name: self.name.clone(),
            any: self.any.clone(),
            version: self.version.clone(),
            digest: self.digest,
            aliases,
            findings: self.findings.clone(),
            delta_entry: std::sync::OnceLock::new(),
        })
    }

    /// The encoded `resources` entry of a `DeltaDiscoveryResponse` carrying this resource.
    pub fn delta_entry(&self) -> Bytes {
        self.delta_entry
            .get_or_init(|| encode_delta_entry(self))
            .clone()
    }
}

pub type Resources = Arc<Vec<Arc<Resource>>>;

/// A stream's resources of one type and the digest of their names and versions: the key of the
/// shared encoded bytes, and what a stream compares to skip a push that would change nothing.
#[derive(Debug)]
pub struct ResourceList {
    pub resources: Vec<Arc<Resource>>,
    pub digest: u64,
    /// What the generators found while building these resources, by resource name.
    pub findings: Vec<(Arc<str>, Finding)>,
    /// Each resource's digest by name, built on first use: the record of what a Delta client
    /// holds when it was sent this list, shared by every stream sent it. Kept apart from the
    /// resources, so a stream's record does not keep old resources alive.
    index: std::sync::OnceLock<Arc<NameIndex>>,
    /// Every resource's Delta entry copied together into frames, built on first use (see
    /// `delta_frames`).
    delta_frames: std::sync::OnceLock<Vec<Bytes>>,
}

/// The names and digests of a `ResourceList`.
#[derive(Debug)]
pub struct NameIndex {
    /// The list's digest.
    pub digest: u64,
    pub digests: std::collections::HashMap<Arc<str>, u64, foldhash::fast::RandomState>,
}

impl ResourceList {
    pub fn new(resources: Vec<Arc<Resource>>) -> ResourceList {
        use std::hash::BuildHasher;
        // Fixed seed: equal lists hash equal on every stream.
        let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
        let mut findings = Vec::new();
        for r in &resources {
            r.name.hash(&mut h);
            r.digest.hash(&mut h);
            findings.extend(r.findings.iter().map(|f| (r.name.clone(), *f)));
        }
        ResourceList {
            digest: h.finish(),
            findings,
            resources,
            index: std::sync::OnceLock::new(),
            delta_frames: std::sync::OnceLock::new(),
        }
    }

    /// Every resource's Delta entry, in order, made into frames by `build` (`wire::frames`) on
    /// first use. A Delta stream sent the whole list (its first response) sends these, shared with
    /// every other stream sent it: entries copied per stream put a copy of the list in each
    /// stream's HTTP/2 send buffer, gigabytes in a reconnect storm of thousands of proxies.
    pub fn delta_frames(&self, build: impl FnOnce(Vec<Bytes>) -> Vec<Bytes>) -> &[Bytes] {
        self.delta_frames
            .get_or_init(|| build(self.resources.iter().map(|r| r.delta_entry()).collect()))
    }

    /// Each resource's digest by name (the last one, should a name repeat).
    pub fn index(&self) -> &Arc<NameIndex> {
        self.index.get_or_init(|| {
            Arc::new(NameIndex {
                digest: self.digest,
                digests: self
                    .resources
                    .iter()
                    .map(|r| (r.name.clone(), r.digest))
                    .collect(),
            })
        })
    }
}

/// One `resources` entry (field 2) of a `DeltaDiscoveryResponse`: the resource with its name and
/// version.
pub fn encode_delta_entry(r: &Resource) -> Bytes {
    use envoy_types::pb::envoy::service::discovery::v3::Resource as DeltaResource;
    use prost::Message;
    let entry = DeltaResource {
        name: r.name.to_string(),
        version: r.version.clone(),
        resource: Some(r.any.clone()),
        aliases: r.aliases.clone(),
        ..Default::default()
    };
    let mut buf = Vec::with_capacity(prost::encoding::message::encoded_len(RESOURCES, &entry));
    prost::encoding::encode_key(
        RESOURCES,
        prost::encoding::WireType::LengthDelimited,
        &mut buf,
    );
    prost::encoding::encode_varint(entry.encoded_len() as u64, &mut buf);
    // Writing into a Vec cannot run out of space.
    let _ = entry.encode(&mut buf);
    Bytes::from(buf)
}

/// The `resources` field of a `DiscoveryResponse` holding `resources`, encoded.
pub fn encode_resources(resources: &[Arc<Resource>]) -> Bytes {
    use prost::Message;
    let len: usize = resources
        .iter()
        .map(|r| prost::encoding::message::encoded_len(RESOURCES, &r.any))
        .sum();
    let mut buf = Vec::with_capacity(len);
    for r in resources {
        prost::encoding::encode_key(
            RESOURCES,
            prost::encoding::WireType::LengthDelimited,
            &mut buf,
        );
        prost::encoding::encode_varint(r.any.encoded_len() as u64, &mut buf);
        // Writing into a Vec cannot run out of space.
        let _ = r.any.encode(&mut buf);
    }
    Bytes::from(buf)
}
