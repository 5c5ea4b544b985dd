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

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
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

/// A State-of-the-World request as the server reads it: every field decoded as usual except the
/// resource names, which stay where they are in the received message. A SotW client resends its
/// whole subscription in every ACK (thousands of names in an unscoped mesh, for every proxy, after
/// every push); the server only needs them as strings when they differ from the last list, which a
/// digest tells. Names are not copied, nor made a shared slice each: copying every ACK's names and
/// making, counting and dropping a slice per name were most of what reading an ACK cost.
#[derive(Clone, Default)]
pub struct SotwRequest {
    /// Everything but `resource_names` (left empty).
    pub request: DiscoveryRequest,
    /// The bytes the names are in: the received message itself, or the names end to end when
    /// built by a client or merged field by field.
    names: Bytes,
    /// Where each name starts and ends in `names`; each checked to be UTF-8.
    spans: Vec<(u32, u32)>,
    /// Where in `names` the whole list lies as its canonical encoding (each name's field right
    /// after the one before, a one-byte key, the shortest length prefix): the digest hashes it in
    /// place. `None` when it does not, or when there are no names.
    canonical: Option<(u32, u32)>,
}

/// `DiscoveryRequest.resource_names`.
const RESOURCE_NAMES: u32 = 3;
/// The key of a `resource_names` field: tag 3, length-delimited.
const RESOURCE_NAMES_KEY: u8 = (RESOURCE_NAMES as u8) << 3 | 2;

impl SotwRequest {
    /// A request with `names` as its resource names (a client's side: the load generator, tests),
    /// held in their canonical encoding, so encoding the request again copies them at once.
    pub fn new<N: AsRef<[u8]>>(
        request: DiscoveryRequest,
        names: impl IntoIterator<Item = N>,
    ) -> SotwRequest {
        let mut buf = BytesMut::new();
        let mut spans = Vec::new();
        for name in names {
            let name = name.as_ref();
            encode_name(name, &mut buf);
            spans.push(((buf.len() - name.len()) as u32, buf.len() as u32));
        }
        let canonical = (!spans.is_empty()).then_some((0, buf.len() as u32));
        SotwRequest {
            request,
            names: buf.freeze(),
            spans,
            canonical,
        }
    }

    /// This request's names with `request`'s other fields: a client's ACK repeats its
    /// subscription, and this shares the names rather than encoding them again.
    pub fn with_request(&self, request: DiscoveryRequest) -> SotwRequest {
        SotwRequest {
            request,
            names: self.names.clone(),
            spans: self.spans.clone(),
            canonical: self.canonical,
        }
    }

    /// How many names the request carries.
    pub fn name_count(&self) -> usize {
        self.spans.len()
    }

    fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.spans
            .iter()
            .map(|&(start, end)| &self.names[start as usize..end as usize])
    }

    /// The names, as strings.
    pub fn name_strings(&self) -> impl Iterator<Item = &str> {
        // Checked when decoded.
        self.names()
            .map(|n| std::str::from_utf8(n).unwrap_or_default())
    }

    /// A digest of the names in order: equal lists, equal digests, however they were encoded.
    /// It hashes the list's canonical encoding, which a received message usually holds as it is.
    pub fn names_digest(&self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(self.spans.len() as u64).build_hasher();
        match self.canonical {
            Some((start, end)) => h.write(&self.names[start as usize..end as usize]),
            None => {
                let mut encoded = Vec::new();
                for name in self.names() {
                    encode_name(name, &mut encoded);
                }
                h.write(&encoded);
            }
        }
        h.finish()
    }

    /// The names as the message holds them, when that is their canonical encoding (as it
    /// usually is): equal bytes, equal lists.
    pub fn encoded_names(&self) -> Option<&[u8]> {
        self.canonical
            .map(|(start, end)| &self.names[start as usize..end as usize])
    }

    /// Subscribes to everything: no names, or `*` among them.
    pub fn is_wildcard(&self) -> bool {
        self.spans.is_empty() || self.names().any(|n| n == b"*")
    }

    /// Reads the name whose length prefix follows the key at `field_start` of `message`, returning
    /// where the name ends. `message` is at most `u32::MAX` bytes long.
    fn read_name(
        &mut self,
        message: &[u8],
        field_start: usize,
        prefix_start: usize,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<usize, prost::DecodeError> {
        let mut rest = &message[prefix_start..];
        let encoded_len = prost::encoding::decode_varint(&mut rest)?;
        let start = message.len() - rest.len();
        let framed_error = |end: usize| {
            prost_string_error(
                prost::encoding::WireType::LengthDelimited,
                &message[prefix_start..end],
                ctx.clone(),
            )
        };
        let Some(len) = usize::try_from(encoded_len)
            .ok()
            .filter(|l| *l <= rest.len())
        else {
            return Err(framed_error(message.len()));
        };
        let end = start + len;
        let name = &message[start..end];
        // Names are ASCII in practice; the full UTF-8 check only for the others.
        if !(name.is_ascii() || std::str::from_utf8(name).is_ok()) {
            return Err(framed_error(end));
        }
        let canonical = prefix_start - field_start == 1
            && start - prefix_start == prost::encoding::encoded_len_varint(encoded_len);
        self.push_name(field_start, start, end, canonical);
        Ok(end)
    }

    /// Checks every name of `message` to be UTF-8, failing as prost does on the first that is not.
    fn check_names(
        &self,
        message: &[u8],
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        for &(start, end) in &self.spans {
            let (start, end) = (start as usize, end as usize);
            let name = &message[start..end];
            if !(name.is_ascii() || std::str::from_utf8(name).is_ok()) {
                // Names that were not checked as they were read have a one-byte length.
                return Err(prost_string_error(
                    prost::encoding::WireType::LengthDelimited,
                    &message[start - 1..end],
                    ctx,
                ));
            }
        }
        Ok(())
    }

    /// Records a name at `start..end` whose field starts at `field_start`; `canonical` when the
    /// field is encoded as prost would encode it.
    fn push_name(&mut self, field_start: usize, start: usize, end: usize, canonical: bool) {
        self.canonical = match self.canonical {
            _ if !canonical => None,
            None if self.spans.is_empty() => Some((field_start as u32, end as u32)),
            Some((first, last_end)) if last_end as usize == field_start => {
                Some((first, end as u32))
            }
            _ => None,
        };
        self.spans.push((start as u32, end as u32));
    }
}

/// Appends the canonical encoding of one `resource_names` field.
fn encode_name(name: &[u8], buf: &mut impl BufMut) {
    buf.put_u8(RESOURCE_NAMES_KEY);
    prost::encoding::encode_varint(name.len() as u64, buf);
    buf.put_slice(name);
}

/// The error prost gives for a length-delimited field whose length prefix and following bytes are
/// `framed`: so a malformed name reads as it would to any protobuf decoder.
fn prost_string_error(
    wire_type: prost::encoding::WireType,
    framed: &[u8],
    ctx: prost::encoding::DecodeContext,
) -> prost::DecodeError {
    let mut text = String::new();
    match prost::encoding::string::merge(wire_type, &mut text, &mut &framed[..], ctx) {
        Err(e) => e,
        // Not reached with the inputs given; still an error, never a silent accept.
        #[allow(deprecated)]
        Ok(()) => prost::DecodeError::new("malformed resource name"),
    }
}

impl PartialEq for SotwRequest {
    fn eq(&self, other: &SotwRequest) -> bool {
        self.request == other.request && self.names().eq(other.names())
    }
}

impl std::fmt::Debug for SotwRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SotwRequest")
            .field("request", &self.request)
            .field("resource_names", &self.name_strings().collect::<Vec<_>>())
            .finish()
    }
}

impl prost::Message for SotwRequest {
    /// Reads the message once, as prost would, except that names are only checked and located
    /// in it: `copy_to_bytes` of a received message (`Bytes`) shares it rather than copying.
    fn decode(mut buf: impl Buf) -> Result<SotwRequest, prost::DecodeError> {
        let message = buf.copy_to_bytes(buf.remaining());
        if u32::try_from(message.len()).is_err() {
            #[allow(deprecated)]
            return Err(prost::DecodeError::new("request too large"));
        }
        let ctx = prost::encoding::DecodeContext::default();
        let mut sotw = SotwRequest::default();
        let mut unchecked = false;
        let mut pos = 0;
        while pos < message.len() {
            // The usual shape first: a name shorter than 128 bytes, as prost encodes it; checked
            // to be UTF-8 after the loop, all at once.
            if let [RESOURCE_NAMES_KEY, len, ..] = message[pos..]
                && len < 0x80
                && pos + 2 + (len as usize) <= message.len()
            {
                let end = pos + 2 + len as usize;
                sotw.push_name(pos, pos + 2, end, true);
                unchecked = true;
                pos = end;
                continue;
            }
            let mut rest = &message[pos..];
            let (tag, wire_type) = prost::encoding::decode_key(&mut rest)?;
            if tag == RESOURCE_NAMES && wire_type == prost::encoding::WireType::LengthDelimited {
                let prefix_start = message.len() - rest.len();
                pos = sotw.read_name(&message, pos, prefix_start, ctx.clone())?;
            } else {
                sotw.merge_field(tag, wire_type, &mut rest, ctx.clone())?;
                pos = message.len() - rest.len();
            }
        }
        // A canonical run of names is ASCII when its names are (its keys and lengths are).
        let ascii_run = sotw
            .canonical
            .is_some_and(|(start, end)| message[start as usize..end as usize].is_ascii());
        if unchecked && !ascii_run {
            sotw.check_names(&message, ctx)?;
        }
        sotw.names = message;
        Ok(sotw)
    }

    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.request.encode_raw(buf);
        match self.encoded_names() {
            Some(encoded) => buf.put_slice(encoded),
            None => {
                for n in self.names() {
                    encode_name(n, buf);
                }
            }
        }
    }

    /// Field by field (not reached through `decode`): names are copied, one after another.
    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        if tag != RESOURCE_NAMES {
            return self.request.merge_field(tag, wire_type, buf, ctx);
        }
        let mut name = String::new();
        prost::encoding::string::merge(wire_type, &mut name, buf, ctx)?;
        let mut names = BytesMut::from(std::mem::take(&mut self.names));
        let start = names.len();
        names.extend_from_slice(name.as_bytes());
        match (u32::try_from(start), u32::try_from(names.len())) {
            (Ok(start), Ok(end)) => {
                self.spans.push((start, end));
                self.canonical = None;
                self.names = names.freeze();
                Ok(())
            }
            _ => {
                names.truncate(start);
                self.names = names.freeze();
                #[allow(deprecated)]
                Err(prost::DecodeError::new("request too large"))
            }
        }
    }

    fn encoded_len(&self) -> usize {
        let names = match self.encoded_names() {
            Some(encoded) => encoded.len(),
            None => self
                .names()
                .map(|n| {
                    prost::encoding::key_len(RESOURCE_NAMES)
                        + prost::encoding::encoded_len_varint(n.len() as u64)
                        + n.len()
                })
                .sum::<usize>(),
        };
        self.request.encoded_len() + names
    }

    fn clear(&mut self) {
        *self = SotwRequest::default();
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
mod tests {
    use super::*;
    use crate::xds::resource::{Resource, encode_resources};
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
}

#[cfg(test)]
mod sotw_request_tests {
    use super::*;
    use prost::Message;

    fn request(names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: "7".into(),
            type_url: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment".into(),
            response_nonce: "n1".into(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn names_stay_bytes_and_everything_else_decodes_as_usual() {
        let full = request(&["outbound|80||a", "outbound|80||b"]);
        let bytes = Bytes::from(full.encode_to_vec());
        let sotw = SotwRequest::decode(bytes.clone()).unwrap();
        assert_eq!(
            sotw.request,
            DiscoveryRequest {
                resource_names: vec![],
                ..full.clone()
            }
        );
        let names: Vec<&str> = sotw.name_strings().collect();
        assert_eq!(names, ["outbound|80||a", "outbound|80||b"]);
        assert_eq!(
            DiscoveryRequest::decode(Bytes::from(sotw.encode_to_vec())).unwrap(),
            full,
            "encodes back to the same request"
        );
        assert!(!sotw.is_wildcard());
        assert!(
            SotwRequest::decode(Bytes::from(request(&[]).encode_to_vec()))
                .unwrap()
                .is_wildcard()
        );
    }

    #[test]
    fn equal_lists_have_equal_digests_and_order_counts() {
        let digest = |names: &[&str]| {
            SotwRequest::decode(Bytes::from(request(names).encode_to_vec()))
                .unwrap()
                .names_digest()
        };
        assert_eq!(digest(&["a", "b"]), digest(&["a", "b"]));
        assert_ne!(digest(&["a", "b"]), digest(&["b", "a"]));
        assert_ne!(digest(&["ab"]), digest(&["a", "b"]));
        assert_ne!(digest(&[]), digest(&[""]));
    }

    #[test]
    fn the_digest_does_not_depend_on_how_the_names_were_encoded() {
        let names = ["outbound|80||a", "outbound|80||b", ""];
        let canonical = request(&names).encode_to_vec();
        let decoded = SotwRequest::decode(Bytes::from(canonical)).unwrap();
        assert!(decoded.canonical.is_some(), "hashed in place");
        // Names split by other fields, and a length prefix longer than it needs to be.
        let mut odd = Vec::new();
        prost::encoding::string::encode(RESOURCE_NAMES, &names[0].to_string(), &mut odd);
        prost::encoding::string::encode(4, &request(&[]).type_url, &mut odd);
        prost::encoding::string::encode(RESOURCE_NAMES, &names[1].to_string(), &mut odd);
        odd.extend_from_slice(&[RESOURCE_NAMES_KEY, 0x80, 0x00]);
        let interleaved = SotwRequest::decode(Bytes::from(odd)).unwrap();
        let built = SotwRequest::new(DiscoveryRequest::default(), names);
        assert_eq!(interleaved.name_strings().collect::<Vec<_>>(), names);
        assert_eq!(decoded.names_digest(), built.names_digest());
        assert_eq!(interleaved.names_digest(), built.names_digest());
        let mut merged = SotwRequest::default();
        merged.merge(&request(&names).encode_to_vec()[..]).unwrap();
        assert_eq!(merged.names_digest(), built.names_digest());
        assert_eq!(merged, decoded);
        // A built request shares its names with the next one, and both encode as prost does.
        let ack = built.with_request(request(&[]));
        assert_eq!(
            DiscoveryRequest::decode(&ack.encode_to_vec()[..]).unwrap(),
            request(&names)
        );
        assert_eq!(ack.encoded_len(), request(&names).encoded_len());
    }

    #[test]
    fn a_name_that_is_not_utf8_is_a_malformed_request() {
        let mut bytes = Vec::new();
        prost::encoding::bytes::encode(RESOURCE_NAMES, &vec![0xffu8, 0xfe], &mut bytes);
        assert!(SotwRequest::decode(Bytes::from(bytes)).is_err());
    }

    #[test]
    fn names_decode_as_any_protobuf_decoder_reads_them() {
        // Not ASCII, still UTF-8: kept as sent.
        let full = request(&["outbound|80||é.example", "", "*"]);
        let sotw = SotwRequest::decode(Bytes::from(full.encode_to_vec())).unwrap();
        let names: Vec<&str> = sotw.name_strings().collect();
        assert_eq!(names, ["outbound|80||é.example", "", "*"]);
        assert_eq!(sotw.name_count(), 3);
        assert!(sotw.is_wildcard());
        assert_eq!(
            sotw,
            SotwRequest::new(
                DiscoveryRequest {
                    resource_names: vec![],
                    ..full
                },
                ["outbound|80||é.example", "", "*"]
            )
        );
        // A name longer than what is left of the message, and a name of the wrong wire type,
        // are errors, as they are to prost.
        let mut truncated = Vec::new();
        prost::encoding::bytes::encode(RESOURCE_NAMES, &b"abcdef".to_vec(), &mut truncated);
        truncated.truncate(truncated.len() - 2);
        assert!(DiscoveryRequest::decode(&truncated[..]).is_err());
        assert!(SotwRequest::decode(Bytes::from(truncated)).is_err());
        let mut varint = Vec::new();
        prost::encoding::uint32::encode(RESOURCE_NAMES, &7, &mut varint);
        assert!(DiscoveryRequest::decode(&varint[..]).is_err());
        assert!(SotwRequest::decode(Bytes::from(varint)).is_err());
    }
}
