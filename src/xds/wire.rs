//! The ADS gRPC service wired by hand, so State-of-the-World responses go out pre-encoded.
//!
//! A SotW response's resources are the same bytes for every proxy that sees the same resources (the
//! same scope, type and push version). The generated tonic server would make each stream clone every
//! `Any` into its own `DiscoveryResponse` and encode it again; here the resource list is encoded once
//! per push context (`encode_resources`, cached by `PushContext::encoded`), and each stream only adds
//! its few header fields. Protobuf fields may come in any order, so `head` + `body` is a valid
//! `DiscoveryResponse`. Delta responses differ per proxy and keep the ordinary prost codec.

use super::context::Resource;
use super::server::AdsService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest,
};
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

/// A `DiscoveryResponse` on the wire: this stream's header fields and the shared resources.
#[derive(Debug, Clone)]
pub struct EncodedResponse {
    head: Vec<u8>,
    body: Bytes,
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
            body: resources,
        }
    }

    pub fn encoded_len(&self) -> usize {
        self.head.len() + self.body.len()
    }
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
        dst.put_slice(&item.body);
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

/// SotW: requests decoded with prost, responses written from pre-encoded bytes.
#[derive(Default)]
struct SotwCodec;

impl Codec for SotwCodec {
    type Encode = EncodedResponse;
    type Decode = DiscoveryRequest;
    type Encoder = EncodedEncoder;
    type Decoder = ProstDecoder<DiscoveryRequest>;

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
    type Response = DeltaDiscoveryResponse;
    type ResponseStream = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;
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
                let mut grpc =
                    tonic::server::Grpc::new(SotwCodec).apply_max_message_size_config(max, None);
                Ok(grpc.streaming(SotwMethod(ads), req).await)
            }),
            DELTA_PATH => Box::pin(async move {
                let codec = tonic_prost::ProstCodec::<DeltaDiscoveryResponse, DeltaDiscoveryRequest>::default();
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
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
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
        wire.extend_from_slice(&encoded.body);
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
        let empty = EncodedResponse::new("1", "t", "n", encode_resources(&[]));
        assert_eq!(
            DiscoveryResponse::decode([empty.head, empty.body.to_vec()].concat().as_slice())
                .unwrap()
                .resources
                .len(),
            0
        );
    }
}
