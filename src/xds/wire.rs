//! The ADS gRPC service wired by hand, so State-of-the-World responses go out pre-encoded.
//!
//! A SotW response's resources are the same bytes for every proxy that sees the same resources (the
//! same scope, type and push version). The generated tonic server would make each stream clone every
//! `Any` into its own `DiscoveryResponse` and encode it again; here the resource list is encoded once
//! per push context (`encode_resources`, cached by `PushContext::encoded`), and each stream only adds
//! its few header fields. Protobuf fields may come in any order, so `head` + `body` is a valid
//! `DiscoveryResponse`. Delta responses differ per proxy in which resources they carry, but each
//! resource's entry is encoded once (`Resource::delta_entry`) and written from the shared bytes.

use super::context::Resource;
use super::server::AdsService;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use prost::bytes::{BufMut, Bytes};
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{Body, BoxFuture, Service, StdError, http};
use tonic::{Status, Streaming};

pub const SERVICE_NAME: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// `DiscoveryResponse` field numbers.
const VERSION_INFO: u32 = 1;
const RESOURCES: u32 = 2;
const TYPE_URL: u32 = 4;
const NONCE: u32 = 5;

/// `DeltaDiscoveryResponse` fields beyond those it shares with `DiscoveryResponse` (1, 2, 4, 5).
const REMOVED_RESOURCES: u32 = 6;

/// A `DiscoveryResponse` or `DeltaDiscoveryResponse` on the wire: this stream's header fields, then
/// resource bytes shared with other streams (written one after another, never concatenated).
#[derive(Debug, Clone)]
pub struct EncodedResponse {
    head: Vec<u8>,
    body: Vec<Bytes>,
}

fn put_string(buf: &mut Vec<u8>, tag: u32, value: &str) {
    if value.is_empty() {
        return;
    }
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, buf);
    prost::encoding::encode_varint(value.len() as u64, buf);
    buf.put_slice(value.as_bytes());
}

impl EncodedResponse {
    pub fn new(version: &str, type_url: &str, nonce: &str, resources: Bytes) -> EncodedResponse {
        let mut head = Vec::with_capacity(16 + version.len() + type_url.len() + nonce.len());
        put_string(&mut head, VERSION_INFO, version);
        put_string(&mut head, TYPE_URL, type_url);
        put_string(&mut head, NONCE, nonce);
        EncodedResponse {
            head,
            body: vec![resources],
        }
    }

    /// A Delta response: `entries` are `Resource::delta_entry` bytes of the changed resources.
    pub fn delta(
        version: &str,
        type_url: &str,
        nonce: &str,
        removed: &[String],
        entries: Vec<Bytes>,
    ) -> EncodedResponse {
        let mut head = Vec::with_capacity(
            16 + version.len()
                + type_url.len()
                + nonce.len()
                + removed.iter().map(|r| r.len() + 4).sum::<usize>(),
        );
        put_string(&mut head, VERSION_INFO, version);
        put_string(&mut head, TYPE_URL, type_url);
        put_string(&mut head, NONCE, nonce);
        for name in removed {
            // Repeated: every element is written, even an empty one.
            prost::encoding::encode_key(
                REMOVED_RESOURCES,
                prost::encoding::WireType::LengthDelimited,
                &mut head,
            );
            prost::encoding::encode_varint(name.len() as u64, &mut head);
            head.put_slice(name.as_bytes());
        }
        EncodedResponse {
            head,
            body: entries,
        }
    }

    pub fn encoded_len(&self) -> usize {
        self.head.len() + self.body.iter().map(Bytes::len).sum::<usize>()
    }
}

/// One `resources` entry (field 2) of a `DeltaDiscoveryResponse`: the resource with its name and
/// version.
pub fn encode_delta_entry(r: &Resource) -> Bytes {
    use envoy_types::pb::envoy::service::discovery::v3::Resource as DeltaResource;
    use prost::Message;
    let entry = DeltaResource {
        name: r.name.clone(),
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

struct EncodedEncoder;

impl Encoder for EncodedEncoder {
    type Item = EncodedResponse;
    type Error = Status;

    fn encode(&mut self, item: EncodedResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        dst.put_slice(&item.head);
        for chunk in &item.body {
            dst.put_slice(chunk);
        }
        Ok(())
    }
}

struct ProstDecoder<T>(PhantomData<T>);

impl<T: prost::Message + Default> Decoder for ProstDecoder<T> {
    type Item = T;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<T>, Status> {
        T::decode(buf)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
    }
}

/// Requests decoded with prost, responses written from pre-encoded bytes (SotW and Delta alike).
struct PreEncodedCodec<Req>(PhantomData<Req>);

impl<Req> PreEncodedCodec<Req> {
    fn new() -> Self {
        PreEncodedCodec(PhantomData)
    }
}

impl<Req: prost::Message + Default + Send + 'static> Codec for PreEncodedCodec<Req> {
    type Encode = EncodedResponse;
    type Decode = Req;
    type Encoder = EncodedEncoder;
    type Decoder = ProstDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        EncodedEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder(PhantomData)
    }
}

struct SotwMethod(Arc<AdsService>);

impl tonic::server::StreamingService<DiscoveryRequest> for SotwMethod {
    type Response = EncodedResponse;
    type ResponseStream = ReceiverStream<Result<EncodedResponse, Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: tonic::Request<Streaming<DiscoveryRequest>>) -> Self::Future {
        let ads = self.0.clone();
        Box::pin(async move { ads.stream_aggregated_resources(request).await })
    }
}

struct DeltaMethod(Arc<AdsService>);

impl tonic::server::StreamingService<DeltaDiscoveryRequest> for DeltaMethod {
    type Response = EncodedResponse;
    type ResponseStream = ReceiverStream<Result<EncodedResponse, Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: tonic::Request<Streaming<DeltaDiscoveryRequest>>) -> Self::Future {
        let ads = self.0.clone();
        Box::pin(async move { ads.delta_aggregated_resources(request).await })
    }
}

/// `envoy.service.discovery.v3.AggregatedDiscoveryService` for tonic's router.
#[derive(Clone)]
pub struct AdsServer {
    ads: Arc<AdsService>,
    max_decoding_message_size: usize,
}

impl AdsServer {
    pub fn new(ads: AdsService, max_decoding_message_size: usize) -> AdsServer {
        AdsServer {
            ads: Arc::new(ads),
            max_decoding_message_size,
        }
    }
}

impl tonic::server::NamedService for AdsServer {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> Service<http::Request<B>> for AdsServer
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let ads = self.ads.clone();
        let max = Some(self.max_decoding_message_size);
        match req.uri().path() {
            SOTW_PATH => Box::pin(async move {
                let codec = PreEncodedCodec::<DiscoveryRequest>::new();
                let mut grpc =
                    tonic::server::Grpc::new(codec).apply_max_message_size_config(max, None);
                Ok(grpc.streaming(SotwMethod(ads), req).await)
            }),
            DELTA_PATH => Box::pin(async move {
                let codec = PreEncodedCodec::<DeltaDiscoveryRequest>::new();
                let mut grpc =
                    tonic::server::Grpc::new(codec).apply_max_message_size_config(max, None);
                Ok(grpc.streaming(DeltaMethod(ads), req).await)
            }),
            _ => Box::pin(async move { Ok(Status::unimplemented("unknown method").into_http()) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryResponse, DiscoveryResponse, Resource as DeltaResource,
    };
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    #[test]
    fn head_and_shared_body_decode_as_one_response() {
        let resources: Vec<Arc<Resource>> = (0..3)
            .map(|i| {
                Resource::new(
                    format!("r{i}"),
                    Any {
                        type_url: "type.googleapis.com/x".into(),
                        value: vec![i as u8; 300],
                    },
                )
            })
            .collect();
        let body = encode_resources(&resources);
        let encoded = EncodedResponse::new("7", "type.googleapis.com/x", "n1", body.clone());
        let mut wire = encoded.head.clone();
        wire.extend_from_slice(&encoded.body.concat());
        let decoded = DiscoveryResponse::decode(wire.as_slice()).unwrap();
        assert_eq!(decoded.version_info, "7");
        assert_eq!(decoded.type_url, "type.googleapis.com/x");
        assert_eq!(decoded.nonce, "n1");
        assert_eq!(decoded.resources.len(), 3);
        assert_eq!(decoded.resources[2].value, vec![2u8; 300]);
        assert_eq!(wire.len(), encoded.encoded_len());
        // The same bytes as prost would write.
        let reference = DiscoveryResponse {
            version_info: "7".into(),
            resources: resources.iter().map(|r| r.any.clone()).collect(),
            type_url: "type.googleapis.com/x".into(),
            nonce: "n1".into(),
            ..Default::default()
        };
        assert_eq!(decoded, reference);
        // Delta: per-resource entries shared, removed names in the head.
        let delta = EncodedResponse::delta(
            "7",
            "type.googleapis.com/x",
            "n2",
            &["gone".to_string()],
            resources[..2].iter().map(|r| r.delta_entry()).collect(),
        );
        let mut wire = delta.head.clone();
        for chunk in &delta.body {
            wire.extend_from_slice(chunk);
        }
        assert_eq!(wire.len(), delta.encoded_len());
        let decoded = DeltaDiscoveryResponse::decode(wire.as_slice()).unwrap();
        let reference = DeltaDiscoveryResponse {
            system_version_info: "7".into(),
            type_url: "type.googleapis.com/x".into(),
            nonce: "n2".into(),
            removed_resources: vec!["gone".into()],
            resources: resources[..2]
                .iter()
                .map(|r| DeltaResource {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    resource: Some(r.any.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        assert_eq!(decoded, reference);
        let empty = EncodedResponse::new("1", "t", "n", encode_resources(&[]));
        assert_eq!(
            DiscoveryResponse::decode([empty.head, empty.body.concat()].concat().as_slice())
                .unwrap()
                .resources
                .len(),
            0
        );
    }
}
