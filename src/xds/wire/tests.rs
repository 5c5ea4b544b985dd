use super::*;
use crate::xds::resource::{Resource, encode_resources};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
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
                name: r.name.to_string(),
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

fn resources(count: usize, size: usize) -> Vec<Arc<Resource>> {
    (0..count)
        .map(|i| {
            Resource::new(
                format!("r{i}"),
                Any {
                    type_url: "type.googleapis.com/x".into(),
                    value: vec![i as u8; size],
                },
            )
        })
        .collect()
}

/// Everything a `ResponseBody` yields: the data frames, then the trailers.
async fn drain(body: ResponseBody) -> (Vec<Bytes>, Option<http::HeaderMap>) {
    let mut body = std::pin::pin!(body);
    let mut data = Vec::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        match frame.into_data() {
            Ok(chunk) => data.push(chunk),
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    assert!(body.is_end_stream());
    (data, trailers)
}

/// The gRPC messages in a response body's bytes.
fn grpc_messages(wire: &[u8]) -> Vec<&[u8]> {
    let mut messages = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        assert_eq!(rest[0], 0, "uncompressed");
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        messages.push(&rest[5..5 + len]);
        rest = &rest[5 + len..];
    }
    messages
}

#[tokio::test]
async fn response_body_shares_large_chunks_and_batches_small_ones() {
    let big = resources(40, 300);
    let shared = encode_resources(&big);
    let small = resources(200, 40);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(Ok(EncodedResponse::new("1", "t", "n1", shared.clone())))
        .await
        .unwrap();
    tx.send(Ok(EncodedResponse::delta(
        "2",
        "t",
        "n2",
        &[],
        small.iter().map(|r| r.delta_entry()).collect(),
    )))
    .await
    .unwrap();
    drop(tx);
    let (data, trailers) = drain(ResponseBody::new(ReceiverStream::new(rx))).await;

    // The SotW list goes out as the very bytes every stream shares.
    assert!(data.iter().any(|c| c.as_ptr() == shared.as_ptr()));
    // 200 small Delta entries travel in a handful of frames, not 200.
    assert!(data.len() <= 6, "{} frames", data.len());
    let wire = data.concat();
    let messages = grpc_messages(&wire);
    assert_eq!(messages.len(), 2);
    let sotw = DiscoveryResponse::decode(messages[0]).unwrap();
    assert_eq!((sotw.nonce.as_str(), sotw.resources.len()), ("n1", 40));
    let delta = DeltaDiscoveryResponse::decode(messages[1]).unwrap();
    assert_eq!((delta.nonce.as_str(), delta.resources.len()), ("n2", 200));
    assert_eq!(
        delta.resources[199].resource.as_ref().unwrap().value,
        vec![199u8; 40]
    );
    assert_eq!(trailers.unwrap()["grpc-status"], "0");
}

#[test]
fn frames_keep_large_chunks_and_copy_small_ones_together_up_to_16_kib() {
    let sizes = [100, 3_000, 20_000, 50, 16_000, 10, 9_000, 9_000, 4_000, 20];
    let chunks: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, len)| Bytes::from(vec![i as u8; *len]))
        .collect();
    let frames = frames(chunks.clone());
    assert_eq!(frames.concat(), chunks.concat());
    for frame in &frames {
        let shared = chunks.iter().any(|c| c.as_ptr() == frame.as_ptr());
        if shared {
            assert!(frame.len() >= SHARED_CHUNK_MIN, "{}", frame.len());
        } else {
            assert!(frame.len() <= COALESCED_FRAME_MAX, "{}", frame.len());
        }
    }
    assert!(frames.len() < chunks.len(), "small chunks share frames");
}

#[test]
fn a_lists_delta_frames_are_built_once_and_shared() {
    let list = crate::xds::resource::ResourceList::new(resources(300, 100));
    let first = list.delta_frames(frames).to_vec();
    let again = list.delta_frames(|_| unreachable!("built once"));
    assert_eq!(first[0].as_ptr(), again[0].as_ptr());
    let entries: Vec<Bytes> = list.resources.iter().map(|r| r.delta_entry()).collect();
    assert_eq!(first.concat(), entries.concat());
}

#[tokio::test]
async fn response_body_copies_small_chunks_a_frame_at_a_time() {
    let small = resources(2000, 100);
    let entries: Vec<Bytes> = small.iter().map(|r| r.delta_entry()).collect();
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(Ok(EncodedResponse::delta("1", "t", "n", &[], entries)))
        .await
        .unwrap();
    drop(tx);
    let mut body = std::pin::pin!(ResponseBody::new(ReceiverStream::new(rx)));
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(first.len() <= COALESCED_FRAME_MAX, "{}", first.len());
    // The rest waits uncopied until HTTP/2 asks for it.
    let waiting = body.rest.as_slice().len();
    assert!(waiting > 1800, "{waiting} entries still waiting");
}

#[tokio::test]
async fn response_body_ends_with_the_streams_error() {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(Err(Status::invalid_argument("bad node: ü%")))
        .await
        .unwrap();
    let (data, trailers) = drain(ResponseBody::new(ReceiverStream::new(rx))).await;
    assert!(data.is_empty());
    let trailers = trailers.unwrap();
    assert_eq!(trailers["grpc-status"], "3");
    assert_eq!(trailers["grpc-message"], "bad node: %C3%BC%25");
}

/// A request body delivered in the given pieces.
fn request_body(pieces: Vec<Vec<u8>>) -> MessageStream<DiscoveryRequest> {
    let frames = pieces
        .into_iter()
        .map(|p| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(p))));
    MessageStream::new(
        http_body_util::StreamBody::new(futures::stream::iter(frames)),
        1024,
    )
}

fn framed(request: &DiscoveryRequest) -> Vec<u8> {
    let encoded = request.encode_to_vec();
    let mut wire = vec![0];
    wire.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    wire.extend_from_slice(&encoded);
    wire
}

#[tokio::test]
async fn request_stream_reassembles_messages_and_frees_its_buffer() {
    let first = DiscoveryRequest {
        type_url: "a".into(),
        resource_names: vec!["x".repeat(300)],
        ..Default::default()
    };
    let second = DiscoveryRequest {
        type_url: "b".into(),
        ..Default::default()
    };
    // Byte by byte, the second message starting in the first one's last piece.
    let mut wire = framed(&first);
    wire.extend(framed(&second));
    let mut pieces: Vec<Vec<u8>> = wire.iter().map(|b| vec![*b]).collect();
    let tail = pieces.split_off(pieces.len() - 4);
    pieces.push(tail.concat());
    let mut stream = request_body(pieces);
    assert_eq!(stream.message().await.unwrap(), Some(first));
    assert_eq!(stream.message().await.unwrap(), Some(second));
    assert_eq!(stream.buf.capacity(), 0, "an idle stream holds no buffer");
    assert_eq!(stream.message().await.unwrap(), None);
}

#[tokio::test]
async fn request_stream_refuses_oversized_truncated_and_garbage_messages() {
    let big = DiscoveryRequest {
        resource_names: vec!["x".repeat(2000)],
        ..Default::default()
    };
    let err = request_body(vec![framed(&big)])
        .message()
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange);
    assert!(err.message().contains("too large"), "{err:?}");

    let mut cut = framed(&big);
    cut.truncate(20);
    let mut stream = request_body(vec![cut]);
    stream.max_message_size = 1 << 20;
    assert_eq!(
        stream.message().await.unwrap_err().code(),
        tonic::Code::Internal
    );

    let garbage = vec![0, 0, 0, 0, 3, 0xff, 0xff, 0xff];
    let err = request_body(vec![garbage]).message().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    let compressed = vec![1, 0, 0, 0, 0];
    let err = request_body(vec![compressed]).message().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal);
}
