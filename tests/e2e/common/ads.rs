//! A plain Rust ADS (SotW) client for tests.
#![allow(dead_code)]

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

pub fn node(id: &str) -> Option<Node> {
    Some(Node {
        id: id.into(),
        user_agent_name: "envoy".into(),
        ..Default::default()
    })
}

/// An Envoy node with string-valued metadata, as an injected sidecar sends `ISTIO_META_*`.
pub fn node_with_metadata(id: &str, metadata: &[(&str, &str)]) -> Node {
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
    Node {
        metadata: Some(Struct {
            fields: metadata
                .iter()
                .map(|(k, v)| {
                    let value = Value {
                        kind: Some(Kind::StringValue(v.to_string())),
                    };
                    (k.to_string(), value)
                })
                .collect(),
        }),
        ..node(id).unwrap_or_default()
    }
}

pub struct Sotw {
    pub tx: mpsc::Sender<DiscoveryRequest>,
    pub rx: tonic::Streaming<DiscoveryResponse>,
}

impl Sotw {
    /// Opens a stream whose first request subscribes to all clusters.
    pub async fn open(addr: SocketAddr, node_id: &str) -> Result<Sotw, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        Sotw::open_on(channel, node_id).await
    }

    /// Like `open`, with node metadata (string values), as an injected sidecar sends
    /// `ISTIO_META_*`.
    pub async fn open_with_metadata(
        addr: SocketAddr,
        node_id: &str,
        metadata: &[(&str, &str)],
    ) -> Result<Sotw, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        Sotw::open_node(channel, Some(node_with_metadata(node_id, metadata))).await
    }

    /// Opens a stream on an existing connection (many streams can share one).
    pub async fn open_on(
        channel: tonic::transport::Channel,
        node_id: &str,
    ) -> Result<Sotw, tonic::Status> {
        Sotw::open_node(channel, node(node_id)).await
    }

    async fn open_node(
        channel: tonic::transport::Channel,
        node: Option<Node>,
    ) -> Result<Sotw, tonic::Status> {
        Sotw::open_as(channel, node, None).await
    }

    /// Opens a stream as `node`, with a service-account token when given (the TLS port's
    /// authentication, as istio-agent sends it).
    pub async fn open_as(
        channel: tonic::transport::Channel,
        node: Option<Node>,
        token: Option<&str>,
    ) -> Result<Sotw, tonic::Status> {
        let mut client = AggregatedDiscoveryServiceClient::new(channel)
            .max_decoding_message_size(64 * 1024 * 1024);
        let (tx, rx) = mpsc::channel(16);
        tx.send(DiscoveryRequest {
            node,
            type_url: CDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        if let Some(token) = token {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("a header value"),
            );
        }
        let rx = client
            .stream_aggregated_resources(request)
            .await?
            .into_inner();
        Ok(Sotw { tx, rx })
    }

    pub async fn send(
        &self,
        type_url: &str,
        names: &[&str],
        nonce: &str,
        version: &str,
        nack: Option<&str>,
    ) {
        self.tx
            .send(DiscoveryRequest {
                type_url: type_url.into(),
                resource_names: names.iter().map(|s| s.to_string()).collect(),
                response_nonce: nonce.into(),
                version_info: version.into(),
                error_detail: nack.map(|m| RpcStatus {
                    code: 3,
                    message: m.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    /// ACKs a response, keeping the same subscription.
    pub async fn ack(&self, resp: &DiscoveryResponse, names: &[&str]) {
        self.send(&resp.type_url, names, &resp.nonce, &resp.version_info, None)
            .await;
    }

    pub async fn recv(&mut self) -> DiscoveryResponse {
        self.recv_within(Duration::from_secs(10))
            .await
            .expect("response in time")
    }

    pub async fn recv_within(&mut self, d: Duration) -> Option<DiscoveryResponse> {
        tokio::time::timeout(d, self.rx.message())
            .await
            .ok()
            .and_then(|r| r.ok())
            .flatten()
    }

    pub async fn quiet(&mut self, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), self.rx.message())
            .await
            .is_err()
    }
}

pub fn cluster_names(resp: &DiscoveryResponse) -> Vec<String> {
    let mut v: Vec<String> = resp
        .resources
        .iter()
        .map(|a| Cluster::decode(a.value.as_slice()).unwrap().name)
        .collect();
    v.sort();
    v
}

pub fn cla_names(resp: &DiscoveryResponse) -> Vec<String> {
    let mut v: Vec<String> = resp
        .resources
        .iter()
        .map(|a| {
            ClusterLoadAssignment::decode(a.value.as_slice())
                .unwrap()
                .cluster_name
        })
        .collect();
    v.sort();
    v
}

pub fn claims(resp: &DiscoveryResponse) -> Vec<ClusterLoadAssignment> {
    resp.resources
        .iter()
        .map(|a| ClusterLoadAssignment::decode(a.value.as_slice()).unwrap())
        .collect()
}

/// A plain Delta xDS client.
pub struct Delta {
    pub tx: mpsc::Sender<DeltaDiscoveryRequest>,
    pub rx: tonic::Streaming<DeltaDiscoveryResponse>,
}

impl Delta {
    pub async fn open(addr: SocketAddr, first: DeltaDiscoveryRequest) -> Delta {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Delta::open_on(channel, first, &[]).await.unwrap()
    }

    /// Opens a stream on `channel`, sending `headers` as request metadata (ztunnel sends its token
    /// and cluster id this way).
    pub async fn open_on(
        channel: tonic::transport::Channel,
        first: DeltaDiscoveryRequest,
        headers: &[(&'static str, &str)],
    ) -> Result<Delta, tonic::Status> {
        let mut client = AggregatedDiscoveryServiceClient::new(channel)
            .max_decoding_message_size(64 * 1024 * 1024);
        let (tx, rx) = mpsc::channel(16);
        tx.send(first).await.unwrap();
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        for (k, v) in headers {
            request.metadata_mut().insert(*k, v.parse().unwrap());
        }
        let rx = client
            .delta_aggregated_resources(request)
            .await?
            .into_inner();
        Ok(Delta { tx, rx })
    }

    pub async fn send(&self, req: DeltaDiscoveryRequest) {
        self.tx.send(req).await.unwrap();
    }

    /// ACKs `resp` (same type, its nonce).
    pub async fn ack(&self, resp: &DeltaDiscoveryResponse) {
        self.send(DeltaDiscoveryRequest {
            type_url: resp.type_url.clone(),
            response_nonce: resp.nonce.clone(),
            ..Default::default()
        })
        .await;
    }

    pub async fn recv(&mut self) -> DeltaDiscoveryResponse {
        tokio::time::timeout(Duration::from_secs(10), self.rx.message())
            .await
            .expect("response in time")
            .unwrap()
            .unwrap()
    }

    pub async fn quiet(&mut self, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), self.rx.message())
            .await
            .is_err()
    }
}
