//! What a simulated proxy reads of the responses: only what its bookkeeping needs (names, nonces,
//! EDS cluster types), with resource bytes borrowed from the received buffer. The generator shares
//! the machine with the daemon it measures; decoding every Cluster and Listener in full, as a real
//! proxy on its own machine would, took CPU the daemon is measured with.

use prost::bytes::Bytes;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `DiscoveryResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    #[prost(string, tag = "1")]
    pub version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<Any>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
}

/// `Resource` of a Delta response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, optional, tag = "2")]
    pub resource: Option<Any>,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// `DeltaDiscoveryResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeltaResponse {
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<Resource>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
    #[prost(string, repeated, tag = "6")]
    pub removed_resources: Vec<String>,
}

/// Field 1 of a Listener or ClusterLoadAssignment: its name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Named {
    #[prost(string, tag = "1")]
    pub name: String,
}

/// A Cluster's name and discovery type (3 is EDS).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClusterHead {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "2")]
    pub discovery_type: i32,
}
