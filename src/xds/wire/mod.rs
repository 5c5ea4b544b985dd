//! The ADS gRPC service wired by hand, so State-of-the-World responses go out pre-encoded.
//!
//! A SotW response's resources are the same bytes for every proxy that sees the same resources (the
//! same scope, type and push version). The generated tonic server would make each stream clone every
//! `Any` into its own `DiscoveryResponse` and encode it again; here the resource list is encoded once
//! per push context (`encode_resources`, cached by `PushContext::encoded`), and each stream only adds
//! its few header fields. Protobuf fields may come in any order, so `head` + `body` is a valid
//! `DiscoveryResponse`. Delta responses differ per proxy in which resources they carry, but each
//! resource's entry is encoded once (`Resource::delta_entry`) and written from the shared bytes.
//!
//! The response body is ours too (`ResponseBody`): tonic's would copy every message into a
//! per-stream buffer that keeps the capacity of the largest response it ever wrote (tens of KiB
//! per proxy, most of the daemon's memory at 10,000 streams). Ours hands the shared bytes to
//! HTTP/2 as they are, after a 5-byte gRPC prefix and the stream's head fields.

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use prost::bytes::{Buf, BufMut, Bytes, BytesMut};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use sync_wrapper::SyncWrapper;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codegen::{Body, BoxFuture, Service, StdError, http};

mod request;
pub use request::SotwRequest;

pub const SERVICE_NAME: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// `DiscoveryResponse` field numbers.
const VERSION_INFO: u32 = 1;
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

    /// A whole response built as a message (the debug types' few responses).
    pub fn message(message: &impl prost::Message) -> EncodedResponse {
        EncodedResponse {
            head: message.encode_to_vec(),
            body: Vec::new(),
        }
    }

    pub fn encoded_len(&self) -> usize {
        self.head.len() + self.body.iter().map(Bytes::len).sum::<usize>()
    }
}

/// gRPC messages decoded from an HTTP/2 body: the request half of an ADS stream, or a client's
/// responses (the load generator's thousands of simulated proxies).
///
/// Unlike tonic's `Streaming`, the buffer is released whenever it holds no partial message, so an
/// idle stream does not keep the capacity of the largest message it ever received.
pub struct MessageStream<R> {
    /// Only ever polled through `&mut`: the wrapper makes the stream `Sync` for the RPC future.
    body: SyncWrapper<UnsyncBoxBody<Bytes, Status>>,
    buf: BytesMut,
    max_message_size: usize,
    ended: bool,
    message: PhantomData<fn() -> R>,
}

impl<R: prost::Message + Default> MessageStream<R> {
    pub fn new<B>(body: B, max_message_size: usize) -> MessageStream<R>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<StdError> + Send + 'static,
    {
        MessageStream {
            body: SyncWrapper::new(
                body.map_err(|e| Status::from_error(e.into()))
                    .boxed_unsync(),
            ),
            buf: BytesMut::new(),
            max_message_size,
            ended: false,
            message: PhantomData,
        }
    }

    /// The next request, `None` when the client closed its side. Cancel-safe: a partial message
    /// stays buffered for the next call.
    pub async fn message(&mut self) -> Result<Option<R>, Status> {
        std::future::poll_fn(|cx| self.poll_message(cx)).await
    }

    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<R>, Status>> {
        loop {
            if let Some(message) = self.decode_buffered()? {
                return Poll::Ready(Ok(Some(message)));
            }
            if self.ended {
                return Poll::Ready(if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(Status::internal("request stream ended inside a message"))
                });
            }
            match ready!(Pin::new(self.body.get_mut()).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers carry nothing for us.
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(status)) => return Poll::Ready(Err(status)),
                None => self.ended = true,
            }
        }
    }

    /// A whole message from the buffer, if one is there.
    fn decode_buffered(&mut self) -> Result<Option<R>, Status> {
        let Some(prefix) = self.buf.get(..5) else {
            return Ok(None);
        };
        if prefix[0] != 0 {
            return Err(Status::internal(
                "compressed request, but no grpc-encoding was agreed",
            ));
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if len > self.max_message_size {
            return Err(Status::out_of_range(format!(
                "request too large: {len} bytes, the limit is {} bytes",
                self.max_message_size
            )));
        }
        if self.buf.len() < 5 + len {
            self.buf.reserve(5 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(5);
        let encoded = self.buf.split_to(len).freeze();
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
        R::decode(encoded)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
    }
}

/// Resource bytes at least this long go to HTTP/2 as they are; shorter ones are copied together.
const SHARED_CHUNK_MIN: usize = 4096;
/// The most small chunks copied into one frame's buffer.
const COALESCED_FRAME_MAX: usize = 16 * 1024;

/// The next frame of `rest` after `start`: a chunk of at least `SHARED_CHUNK_MIN` bytes as it is
/// (when nothing comes before it), or `start` and the small chunks that follow copied together,
/// up to `COALESCED_FRAME_MAX`.
fn take_frame(start: &[u8], rest: &mut std::vec::IntoIter<Bytes>) -> Bytes {
    if start.is_empty()
        && rest
            .as_slice()
            .first()
            .is_some_and(|c| c.len() >= SHARED_CHUNK_MIN)
        && let Some(chunk) = rest.next()
    {
        return chunk;
    }
    let mut len = start.len();
    let mut taken = 0;
    for chunk in rest.as_slice() {
        let too_long = len > 0 && len + chunk.len() > COALESCED_FRAME_MAX;
        if chunk.len() >= SHARED_CHUNK_MIN || too_long {
            break;
        }
        len += chunk.len();
        taken += 1;
    }
    let mut frame = BytesMut::with_capacity(len);
    frame.put_slice(start);
    for chunk in rest.take(taken) {
        frame.put_slice(&chunk);
    }
    frame.freeze()
}

/// `chunks` in the frames a response body would send them in, built at once: a list's Delta
/// entries, shared by every stream that sends the whole list.
pub fn frames(chunks: Vec<Bytes>) -> Vec<Bytes> {
    let mut rest = chunks.into_iter();
    let mut frames = Vec::new();
    while !rest.as_slice().is_empty() {
        frames.push(take_frame(&[], &mut rest));
    }
    frames
}

/// The body of an ADS response: each message as a gRPC length prefix with the stream's head
/// fields, then its shared resource bytes as they are; `grpc-status` trailers at the end.
struct ResponseBody {
    messages: ReceiverStream<Result<EncodedResponse, Status>>,
    /// The chunks of the message being written that HTTP/2 has not taken yet. Small ones are
    /// copied together a frame at a time, as HTTP/2 asks for the next frame: copying a whole
    /// message's small chunks at once held a copy of every Delta response in flight (600 MiB for
    /// 1,000 streams of an unscoped mesh's clusters).
    rest: std::vec::IntoIter<Bytes>,
    ended: bool,
}

impl ResponseBody {
    fn new(messages: ReceiverStream<Result<EncodedResponse, Status>>) -> ResponseBody {
        ResponseBody {
            messages,
            rest: Vec::new().into_iter(),
            ended: false,
        }
    }

    /// The next frame of the message being written, after `start` (the message's first bytes,
    /// or nothing).
    fn next_frame(&mut self, start: &[u8]) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = take_frame(start, &mut self.rest);
        if self.rest.as_slice().is_empty() {
            // Give the message's chunk list back between messages.
            self.rest = Vec::new().into_iter();
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn trailers(&mut self, status: Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.ended = true;
        Poll::Ready(Some(Ok(Frame::trailers(status_trailers(&status)))))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if !this.rest.as_slice().is_empty() {
            return this.next_frame(&[]);
        }
        if this.ended {
            return Poll::Ready(None);
        }
        match ready!(Pin::new(&mut this.messages).poll_next(cx)) {
            Some(Ok(message)) => {
                let Ok(len) = u32::try_from(message.encoded_len()) else {
                    return this.trailers(Status::resource_exhausted(
                        "response larger than a gRPC message can be",
                    ));
                };
                let mut start = Vec::with_capacity(5 + message.head.len());
                start.put_u8(0); // not compressed
                start.put_u32(len);
                start.put_slice(&message.head);
                // Small chunks (Delta entries) are copied together: HTTP/2 queues every frame
                // in a per-connection table that never shrinks.
                this.rest = message.body.into_iter();
                this.next_frame(&start)
            }
            Some(Err(status)) => this.trailers(status),
            None => this.trailers(Status::ok("")),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.rest.as_slice().is_empty()
    }
}

/// `grpc-status` and `grpc-message` (percent-encoded as the gRPC spec asks) for `status`.
fn status_trailers(status: &Status) -> http::HeaderMap {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from(status.code() as i32));
    if !status.message().is_empty() {
        let mut message = String::with_capacity(status.message().len());
        for byte in status.message().bytes() {
            if (0x20..0x7f).contains(&byte) && byte != b'%' {
                message.push(byte as char);
            } else {
                message.push_str(&format!("%{byte:02X}"));
            }
        }
        if let Ok(value) = http::HeaderValue::from_str(&message) {
            trailers.insert("grpc-message", value);
        }
    }
    trailers
}

pub type AdsResult =
    Result<tonic::Response<ReceiverStream<Result<EncodedResponse, Status>>>, Status>;

/// Decodes the request stream with prost, runs the RPC and answers with a `ResponseBody`. Public
/// for the load generator's replay baseline, which measures this same transport.
pub async fn serve_rpc<Req, B, F>(
    req: http::Request<B>,
    max_decoding_message_size: usize,
    rpc: impl FnOnce(tonic::Request<MessageStream<Req>>) -> F,
) -> http::Response<tonic::body::Body>
where
    Req: prost::Message + Default + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
    F: std::future::Future<Output = AdsResult>,
{
    // Envoy and gRPC send uncompressed unless the server advertises an encoding; we advertise none.
    if let Some(encoding) = req.headers().get("grpc-encoding")
        && encoding.as_bytes() != b"identity"
    {
        return Status::unimplemented(format!(
            "request compressed with {encoding:?}, which this server does not accept"
        ))
        .into_http();
    }
    let request = req.map(|body| MessageStream::new(body, max_decoding_message_size));
    match rpc(tonic::Request::from_http(request)).await {
        Ok(response) => {
            let (metadata, messages, extensions) = response.into_parts();
            let mut http = http::Response::new(tonic::body::Body::new(ResponseBody::new(messages)));
            *http.headers_mut() = metadata.into_headers();
            *http.extensions_mut() = extensions;
            http.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            http
        }
        Err(status) => status.into_http(),
    }
}

/// What serves the two ADS RPCs; the server implements it, so this module knows only bytes.
pub trait AdsHandler: Send + Sync + 'static {
    fn stream_aggregated_resources(
        &self,
        request: tonic::Request<MessageStream<SotwRequest>>,
    ) -> impl std::future::Future<Output = AdsResult> + Send;
    fn delta_aggregated_resources(
        &self,
        request: tonic::Request<MessageStream<DeltaDiscoveryRequest>>,
    ) -> impl std::future::Future<Output = AdsResult> + Send;
}

/// `envoy.service.discovery.v3.AggregatedDiscoveryService` for tonic's router.
pub struct AdsServer<H> {
    ads: Arc<H>,
    max_decoding_message_size: usize,
}

impl<H> Clone for AdsServer<H> {
    fn clone(&self) -> Self {
        AdsServer {
            ads: self.ads.clone(),
            max_decoding_message_size: self.max_decoding_message_size,
        }
    }
}

impl<H: AdsHandler> AdsServer<H> {
    pub fn new(ads: H, max_decoding_message_size: usize) -> AdsServer<H> {
        AdsServer {
            ads: Arc::new(ads),
            max_decoding_message_size,
        }
    }
}

impl<H> tonic::server::NamedService for AdsServer<H> {
    const NAME: &'static str = SERVICE_NAME;
}

impl<H, B> Service<http::Request<B>> for AdsServer<H>
where
    H: AdsHandler,
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
        let max = self.max_decoding_message_size;
        match req.uri().path() {
            SOTW_PATH => {
                Box::pin(async move {
                    Ok(serve_rpc::<SotwRequest, _, _>(req, max, |r| {
                        ads.stream_aggregated_resources(r)
                    })
                    .await)
                })
            }
            DELTA_PATH => Box::pin(async move {
                Ok(serve_rpc::<DeltaDiscoveryRequest, _, _>(req, max, |r| {
                    ads.delta_aggregated_resources(r)
                })
                .await)
            }),
            _ => Box::pin(async move { Ok(Status::unimplemented("unknown method").into_http()) }),
        }
    }
}

#[cfg(test)]
mod tests;
