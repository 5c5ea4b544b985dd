//! Reading a State-of-the-World request without copying its resource names.

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::bytes::{Buf, BufMut, Bytes, BytesMut};

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

#[cfg(test)]
mod tests {
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
