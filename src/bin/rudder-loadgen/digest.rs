//! Responses read as they arrive, one resource at a time, keeping only what a simulated proxy's
//! bookkeeping needs. A simulated proxy that buffered each whole response held all of it while the
//! rest arrived: in an unscoped mesh of 5,000 services every proxy's full push is megabytes, and
//! 10,000 proxies receiving one at once needed tens of gigabytes on a machine with 23.

use super::{CDS, EDS, LDS, RDS, light, static_type};
use http_body::Body;
use http_body_util::BodyExt;
use prost::Message;
use prost::bytes::{Buf, Bytes, BytesMut};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// What a simulated proxy keeps of one response.
#[derive(Debug, Default)]
pub struct Digest {
    /// The response's type; `other` for a type the proxies do not follow.
    pub type_url: &'static str,
    /// SotW `version_info` (Delta `system_version_info`).
    pub version: String,
    pub nonce: String,
    /// Delta: the names of removed resources.
    pub removed: Vec<String>,
    /// The encoded size of the response.
    pub len: usize,
    /// Each resource's name, for the types `Reading::names` asks for.
    pub names: Vec<String>,
    /// Each endpoint resource's encoded ClusterLoadAssignment, when `Reading::bodies` asks.
    pub bodies: Vec<Bytes>,
    /// The EDS clusters among the clusters: the names an Envoy asks endpoints for.
    pub eds_clusters: Vec<String>,
    /// The routes the HTTP listeners among the listeners name, sorted, each once.
    pub routes: Vec<String>,
    /// The encoded ClusterLoadAssignment of `Reading::watched`, when this response has it.
    pub watched: Option<Bytes>,
    /// CDS: the highest churn step among the clusters (`super::churn_step`), so that a full push
    /// counts as received only once the new service is in it.
    pub newest_churn: Option<u32>,
}

impl Digest {
    /// What an Envoy asks for after this response: endpoints of its EDS clusters, routes of its
    /// HTTP listeners.
    pub fn envoy_follow(&mut self) -> Option<(&'static str, Vec<String>)> {
        match self.type_url {
            CDS => Some((EDS, std::mem::take(&mut self.eds_clusters))),
            LDS => Some((RDS, std::mem::take(&mut self.routes))),
            _ => None,
        }
    }
}

/// What a stream's responses are and what to keep of them.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// Delta responses (`Resource` entries) rather than SotW (`Any` entries).
    pub delta: bool,
    /// Keep every resource's name; otherwise only endpoint resources'.
    pub names: bool,
    /// Keep endpoint resources' bodies.
    pub bodies: bool,
    /// The endpoint resource whose body is kept in any case: the one an endpoint push changes,
    /// so that a push counts as received only once its new endpoints are.
    pub watched: Option<&'static str>,
    /// A gateway: its HTTP listener of port P names route `http.P`, not `P`.
    pub router: bool,
}

/// A stream of responses, each digested as its bytes arrive.
pub struct DigestStream {
    body: http_body_util::combinators::UnsyncBoxBody<Bytes, tonic::Status>,
    buf: BytesMut,
    /// Bytes of the current message not yet read; `None` between messages.
    left: Option<usize>,
    current: Digest,
    reading: Reading,
    ended: bool,
    /// The type of the last response, which the caller notes when it changes.
    pub last_type: &'static str,
}

/// One resource, as an entry of either kind of response names it.
struct Entry {
    name: Option<String>,
    any: light::Any,
}

impl DigestStream {
    pub fn new<B>(body: B, reading: Reading) -> DigestStream
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError> + Send + 'static,
    {
        DigestStream {
            body: body
                .map_err(|e| tonic::Status::from_error(e.into()))
                .boxed_unsync(),
            buf: BytesMut::new(),
            left: None,
            current: Digest::default(),
            reading,
            ended: false,
            last_type: "",
        }
    }

    /// The next response, `None` when the server ended the stream.
    pub async fn message(&mut self) -> Result<Option<Digest>, tonic::Status> {
        std::future::poll_fn(|cx| self.poll_message(cx)).await
    }

    fn poll_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Digest>, tonic::Status>> {
        loop {
            if let Some(done) = self.read_buffered()? {
                return Poll::Ready(Ok(Some(done)));
            }
            if self.ended {
                return Poll::Ready(match (self.left, self.buf.is_empty()) {
                    (None, true) => Ok(None),
                    _ => Err(tonic::Status::internal("stream ended inside a message")),
                });
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(status)) => return Poll::Ready(Err(status)),
                None => self.ended = true,
            }
        }
    }

    /// Reads what the buffer holds; a digest when it finished a message.
    fn read_buffered(&mut self) -> Result<Option<Digest>, tonic::Status> {
        loop {
            let Some(left) = self.left else {
                let Some(prefix) = self.buf.get(..5) else {
                    return Ok(None);
                };
                if prefix[0] != 0 {
                    return Err(tonic::Status::internal("compressed response"));
                }
                let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
                self.buf.advance(5);
                self.left = Some(len);
                self.current = Digest {
                    len,
                    type_url: "other",
                    ..Default::default()
                };
                continue;
            };
            if left == 0 {
                self.left = None;
                if self.buf.is_empty() {
                    self.buf = BytesMut::new();
                }
                let mut done = std::mem::take(&mut self.current);
                done.routes.sort_unstable();
                done.routes.dedup();
                return Ok(Some(done));
            }
            let Some((tag, wire_type, head)) = field_head(&self.buf)? else {
                return Ok(None);
            };
            // The field's size after its key, and where a length-delimited value starts (after
            // its length; only those are read).
            let (size, value_at) = match wire_type {
                0 => match varint(&self.buf[head..])? {
                    Some((_, n)) => (n, 0),
                    None => return Ok(None),
                },
                1 => (8, 0),
                2 => match varint(&self.buf[head..])? {
                    Some((len, n)) => (n + len as usize, n),
                    None => return Ok(None),
                },
                5 => (4, 0),
                other => {
                    return Err(tonic::Status::internal(format!(
                        "malformed response: wire type {other}"
                    )));
                }
            };
            if head + size > left {
                return Err(tonic::Status::internal(
                    "malformed response: a field runs past its message",
                ));
            }
            if self.buf.len() < head + size {
                self.buf.reserve(head + size - self.buf.len());
                return Ok(None);
            }
            let mut field = self.buf.split_to(head + size).freeze();
            self.left = Some(left - head - size);
            if wire_type != 2 {
                continue;
            }
            field.advance(head + value_at);
            self.read_field(tag, field)?;
        }
    }

    fn read_field(&mut self, tag: u32, value: Bytes) -> Result<(), tonic::Status> {
        let text = |v: &Bytes| String::from_utf8_lossy(v).into_owned();
        match tag {
            1 => self.current.version = text(&value),
            2 => self.read_entry(value)?,
            4 => self.current.type_url = static_type(&text(&value)),
            5 => self.current.nonce = text(&value),
            6 if self.reading.delta => self.current.removed.push(text(&value)),
            _ => {}
        }
        Ok(())
    }

    fn read_entry(&mut self, value: Bytes) -> Result<(), tonic::Status> {
        let malformed =
            |e: prost::DecodeError| tonic::Status::internal(format!("malformed resource: {e}"));
        let entry = if self.reading.delta {
            let r = light::Resource::decode(value).map_err(malformed)?;
            let Some(any) = r.resource else {
                return Ok(());
            };
            Entry {
                name: Some(r.name),
                any,
            }
        } else {
            Entry {
                name: None,
                any: light::Any::decode(value).map_err(malformed)?,
            }
        };
        let kind = static_type(&entry.any.type_url);
        let name = || match &entry.name {
            Some(n) => Ok(n.clone()),
            None => light::Named::decode(entry.any.value.clone())
                .map(|n| n.name)
                .map_err(malformed),
        };
        let d = &mut self.current;
        match kind {
            CDS => {
                let head =
                    light::ClusterHead::decode(entry.any.value.clone()).map_err(malformed)?;
                d.newest_churn = d.newest_churn.max(super::churn_step(&head.name));
                if head.discovery_type == 3 {
                    d.eds_clusters.push(head.name);
                }
            }
            LDS if self.reading.router => d.routes.extend(super::gateway_route_name(&name()?)),
            LDS => d.routes.extend(super::route_name(&name()?)),
            _ => {}
        }
        if kind == EDS || self.reading.names {
            let name = name()?;
            if kind == EDS && self.reading.watched == Some(name.as_str()) {
                d.watched = Some(entry.any.value.clone());
            }
            d.names.push(name);
        }
        if kind == EDS && self.reading.bodies {
            d.bodies.push(entry.any.value);
        }
        Ok(())
    }
}

/// A field's tag, wire type and the length of its key; `None` when the key is not all here.
fn field_head(buf: &[u8]) -> Result<Option<(u32, u8, usize)>, tonic::Status> {
    Ok(varint(buf)?.map(|(key, n)| ((key >> 3) as u32, (key & 7) as u8, n)))
}

/// A varint at the start of `buf` and its length; `None` when it is not all here.
fn varint(buf: &[u8]) -> Result<Option<(u64, usize)>, tonic::Status> {
    let mut value = 0u64;
    for (i, byte) in buf.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= 10 {
        return Err(tonic::Status::internal(
            "malformed response: a varint too long",
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(type_url: &str, value: Vec<u8>) -> light::Any {
        light::Any {
            type_url: type_url.into(),
            value: value.into(),
        }
    }

    fn churn_2() -> String {
        format!(
            "outbound|{}||{}",
            super::super::CHURN_PORT,
            super::super::churn_host(2, super::super::run_id(), "ns-1")
        )
    }

    /// A response split into chunks of every size from 1 byte reads the same as whole.
    #[test]
    fn a_response_reads_the_same_in_any_chunks() {
        let cluster = |name: &str, t: i32| {
            any(
                CDS,
                light::ClusterHead {
                    name: name.into(),
                    discovery_type: t,
                }
                .encode_to_vec(),
            )
        };
        let response = light::Response {
            version_info: "7".into(),
            resources: vec![cluster("a", 3), cluster(&churn_2(), 1), cluster("c", 3)],
            type_url: CDS.into(),
            nonce: "n1".into(),
        };
        let listener = light::Response {
            resources: vec![
                any(
                    LDS,
                    light::Named {
                        name: "0.0.0.0_8000".into(),
                    }
                    .encode_to_vec(),
                ),
                any(
                    LDS,
                    light::Named {
                        name: "10.0.0.1_9000".into(),
                    }
                    .encode_to_vec(),
                ),
                any(
                    LDS,
                    light::Named {
                        name: "0.0.0.0_8000".into(),
                    }
                    .encode_to_vec(),
                ),
            ],
            type_url: LDS.into(),
            nonce: "n2".into(),
            ..Default::default()
        };
        let mut wire = Vec::new();
        for m in [response.encode_to_vec(), listener.encode_to_vec()] {
            wire.push(0);
            wire.extend_from_slice(&(m.len() as u32).to_be_bytes());
            wire.extend_from_slice(&m);
        }
        for chunk in 1..=wire.len() {
            let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = wire
                .chunks(chunk)
                .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            let body = http_body_util::StreamBody::new(tokio_stream::iter(frames));
            let mut stream = DigestStream::new(
                body,
                Reading {
                    watched: None,
                    delta: false,
                    names: true,
                    bodies: false,
                    router: false,
                },
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let (clusters, listeners, end) = runtime.block_on(async {
                (
                    stream.message().await.unwrap().unwrap(),
                    stream.message().await.unwrap().unwrap(),
                    stream.message().await.unwrap(),
                )
            });
            assert_eq!(clusters.type_url, CDS);
            assert_eq!(
                (clusters.version.as_str(), clusters.nonce.as_str()),
                ("7", "n1")
            );
            assert_eq!(clusters.names, ["a", churn_2().as_str(), "c"]);
            assert_eq!(clusters.eds_clusters, ["a", "c"]);
            assert_eq!(clusters.newest_churn, Some(2), "the churn service's step");
            assert_eq!(clusters.len, response.encoded_len());
            assert_eq!(listeners.type_url, LDS);
            assert_eq!(listeners.routes, ["8000", "9000"]);
            assert!(end.is_none());
        }
    }

    /// A Delta response's resources are named by their entries, and its removals and the watched
    /// resource's body are kept.
    #[test]
    fn a_delta_response_keeps_names_bodies_and_removals() {
        let cla = |name: &str| light::Resource {
            resource: Some(any(EDS, light::Named { name: name.into() }.encode_to_vec())),
            name: name.into(),
        };
        let response = light::DeltaResponse {
            resources: vec![cla("x"), cla("y")],
            type_url: EDS.into(),
            nonce: "3".into(),
            removed_resources: vec!["z".into()],
        }
        .encode_to_vec();
        let mut wire = vec![0];
        wire.extend_from_slice(&(response.len() as u32).to_be_bytes());
        wire.extend_from_slice(&response);
        let frames: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> =
            vec![Ok(http_body::Frame::data(wire.into()))];
        let mut stream = DigestStream::new(
            http_body_util::StreamBody::new(tokio_stream::iter(frames)),
            Reading {
                delta: true,
                names: true,
                bodies: true,
                watched: Some("y"),
                router: false,
            },
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = runtime.block_on(stream.message()).unwrap().unwrap();
        assert_eq!((got.type_url, got.nonce.as_str()), (EDS, "3"));
        assert_eq!(got.names, ["x", "y"]);
        assert_eq!(got.removed, ["z"]);
        assert_eq!(got.bodies.len(), 2);
        assert_eq!(
            got.watched.as_ref(),
            Some(&got.bodies[1]),
            "the watched one's body"
        );
        assert_eq!(got.len, response.len());
    }
}
