//! Zero-copy Fetch responses: the encoded response around the records is built in memory,
//! and each partition's records go from the segment file to the socket with `sendfile`,
//! never through user space (the connection's writer does that part, see [`Part`]).
//!
//! The bytes around the records are kafka-protocol's own encoding, cut where the records go:
//! each level (response, topic, partition) is encoded with what follows it left empty, the
//! few trailing bytes that encode "empty" are checked and dropped, and the real lengths are
//! written in their place — a 4-byte length before v12, a varint (length + 1) and an empty
//! tagged-field section from v12 on. If a trailer is not what that layout predicts (a tagged
//! field Strom does not set, say), the response is encoded the ordinary way instead, with
//! the records read into memory; the unit tests compare both ways byte for byte.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::log::FileSlice;

use super::router::{self, Reply};

/// One piece of a response frame, in order.
#[derive(Debug, Clone)]
pub enum Part {
    Bytes(Bytes),
    /// Bytes of a segment file, sent with `sendfile`.
    File(FileSlice),
}

impl Part {
    pub fn len(&self) -> usize {
        match self {
            Part::Bytes(b) => b.len(),
            Part::File(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A Fetch response whose records may still be on disk: where `slices[t][p]` is set, the
/// records of `response.responses[t].partitions[p]` are that file range (and its `records`
/// field is empty).
#[derive(Debug, Default)]
pub struct FetchReply {
    pub response: FetchResponse,
    pub slices: Vec<Vec<Option<FileSlice>>>,
}

/// The reply frame for `reply`: spliced if it holds file ranges and its layout is the
/// expected one, else encoded whole.
pub fn encode(version: i16, correlation_id: i32, reply: FetchReply) -> Reply {
    if reply.slices.iter().flatten().all(Option::is_none) {
        return router::encode(ApiKey::Fetch, version, correlation_id, &reply.response);
    }
    match splice(version, correlation_id, &reply) {
        Ok(parts) => Reply::Parts(parts),
        Err(e) => {
            tracing::debug!(version, error = %e, "fetch response encoded without splicing");
            match materialize(reply) {
                Ok(response) => router::encode(ApiKey::Fetch, version, correlation_id, &response),
                Err(e) => Reply::Close(format!("reading records for a fetch response failed: {e}")),
            }
        }
    }
}

/// The response with every file range read into its partition's `records`.
pub fn materialize(reply: FetchReply) -> std::io::Result<FetchResponse> {
    let mut response = reply.response;
    for (topic, slices) in response.responses.iter_mut().zip(reply.slices) {
        for (partition, slice) in topic.partitions.iter_mut().zip(slices) {
            if let Some(slice) = slice {
                partition.records = Some(slice.read()?);
            }
        }
    }
    Ok(response)
}

/// Encodes `value` and drops its last `trailer.len()` bytes, which must be `trailer`.
fn encode_cut<T: Encodable>(out: &mut BytesMut, value: &T, version: i16, trailer: &[u8]) -> anyhow::Result<()> {
    let start = out.len();
    value.encode(out, version)?;
    let end = out.len();
    anyhow::ensure!(
        end - start >= trailer.len() && &out[end - trailer.len()..] == trailer,
        "unexpected encoding layout (trailer {:?})",
        &out[end.saturating_sub(trailer.len())..]
    );
    out.truncate(end - trailer.len());
    Ok(())
}

fn put_unsigned_varint(out: &mut BytesMut, mut n: u32) {
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// An array or bytes length as the version writes it.
fn put_len(out: &mut BytesMut, flexible: bool, n: usize) -> anyhow::Result<()> {
    if flexible {
        put_unsigned_varint(out, u32::try_from(n + 1)?);
    } else {
        out.put_i32(i32::try_from(n)?);
    }
    Ok(())
}

fn splice(version: i16, correlation_id: i32, reply: &FetchReply) -> anyhow::Result<Vec<Part>> {
    let flexible = version >= 12;
    // What "empty, then no tagged fields" encodes as at the end of each level.
    let empty: &[u8] = if flexible { &[0x01, 0x00] } else { &[0, 0, 0, 0] };
    let mut parts = Vec::new();
    let mut buf = BytesMut::with_capacity(1024);
    buf.put_i32(0); // the frame size, filled in at the end
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, ApiKey::Fetch.response_header_version(version))?;

    // The cut points assume no tagged field anywhere (Strom sets none): a trailer check alone
    // could be fooled by tagged-field bytes that happen to look like the empty encoding.
    let r = &reply.response;
    anyhow::ensure!(r.node_endpoints.is_empty() && r.unknown_tagged_fields.is_empty(), "response tagged fields");
    for topic in &r.responses {
        anyhow::ensure!(topic.unknown_tagged_fields.is_empty(), "topic tagged fields");
        for p in &topic.partitions {
            let untagged = p.diverging_epoch == Default::default()
                && p.current_leader == Default::default()
                && p.snapshot_id == Default::default()
                && p.unknown_tagged_fields.is_empty();
            anyhow::ensure!(untagged, "partition tagged fields");
        }
    }
    let top = without_responses(&reply.response);
    encode_cut(&mut buf, &top, version, empty)?;
    put_len(&mut buf, flexible, reply.response.responses.len())?;
    for (t, topic) in reply.response.responses.iter().enumerate() {
        let mut shell = FetchableTopicResponse::default();
        shell.topic = topic.topic.clone();
        shell.topic_id = topic.topic_id;
        shell.unknown_tagged_fields = topic.unknown_tagged_fields.clone();
        encode_cut(&mut buf, &shell, version, empty)?;
        put_len(&mut buf, flexible, topic.partitions.len())?;
        for (p, partition) in topic.partitions.iter().enumerate() {
            match reply.slices.get(t).and_then(|s| s.get(p)).cloned().flatten() {
                None => partition.encode(&mut buf, version)?,
                Some(slice) => {
                    anyhow::ensure!(
                        partition.records.as_ref().is_some_and(Bytes::is_empty),
                        "a partition with a file range must have empty records"
                    );
                    encode_cut(&mut buf, partition, version, empty)?;
                    put_len(&mut buf, flexible, slice.len)?;
                    parts.push(Part::Bytes(buf.split().freeze()));
                    parts.push(Part::File(slice));
                    if flexible {
                        buf.put_u8(0); // the partition's (empty) tagged fields
                    }
                }
            }
        }
        if flexible {
            buf.put_u8(0); // the topic's tagged fields
        }
    }
    if flexible {
        buf.put_u8(0); // the response's tagged fields
    }
    parts.push(Part::Bytes(buf.freeze()));
    let size: usize = parts.iter().map(Part::len).sum::<usize>() - 4;
    let size = i32::try_from(size)?.to_be_bytes();
    if let Some(Part::Bytes(first)) = parts.first_mut() {
        let mut patched = BytesMut::from(&first[..]);
        patched[..4].copy_from_slice(&size);
        *first = patched.freeze();
    }
    Ok(parts)
}

/// A copy of a response without its topics (which hold the records).
fn without_responses(r: &FetchResponse) -> FetchResponse {
    let mut top = FetchResponse::default();
    top.throttle_time_ms = r.throttle_time_ms;
    top.error_code = r.error_code;
    top.session_id = r.session_id;
    top.node_endpoints = r.node_endpoints.clone();
    top.unknown_tagged_fields = r.unknown_tagged_fields.clone();
    top
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use kafka_protocol::messages::fetch_response::PartitionData;

    use super::*;

    fn partition(index: i32, records: Option<Bytes>, error: i16) -> PartitionData {
        let mut p = PartitionData::default();
        p.partition_index = index;
        p.error_code = error;
        p.high_watermark = 1000 + i64::from(index);
        p.last_stable_offset = 900;
        p.log_start_offset = 7;
        p.records = records;
        p
    }

    /// Two topics: a file range of 300 bytes, one of 70,000 (a longer varint), records in
    /// memory, and an error without records.
    fn fixture(version: i16) -> (FetchReply, FetchResponse) {
        let mut file = tempfile::tempfile().expect("temp file");
        let content: Vec<u8> = (0..80_000u32).map(|i| (i * 7 % 251) as u8).collect();
        file.write_all(&content).expect("write");
        let file = Arc::new(file);
        let slice = |position: usize, len: usize| FileSlice { file: file.clone(), position: position as u64, len };
        let topic = |name: &str, partitions: Vec<PartitionData>| {
            let mut t = FetchableTopicResponse::default();
            if version >= 13 {
                t.topic_id = uuid::Uuid::from_u128(name.len() as u128);
            } else {
                t.topic = TopicName(StrBytes::from_string(name.to_string()));
            }
            t.partitions = partitions;
            t
        };
        let mut spliced = FetchResponse::default();
        spliced.throttle_time_ms = 0;
        if version >= 7 {
            spliced.session_id = 42;
        }
        let mut whole = spliced.clone();
        spliced.responses = vec![
            topic("a", vec![partition(0, Some(Bytes::new()), 0), partition(1, Some(Bytes::from_static(b"inline")), 0)]),
            topic("bb", vec![partition(0, Some(Bytes::new()), 6), partition(3, Some(Bytes::new()), 0)]),
        ];
        whole.responses = vec![
            topic(
                "a",
                vec![
                    partition(0, Some(Bytes::copy_from_slice(&content[10..310])), 0),
                    partition(1, Some(Bytes::from_static(b"inline")), 0),
                ],
            ),
            topic(
                "bb",
                vec![
                    partition(0, Some(Bytes::new()), 6),
                    partition(3, Some(Bytes::copy_from_slice(&content[5000..75_000])), 0),
                ],
            ),
        ];
        let reply = FetchReply {
            response: spliced,
            slices: vec![vec![Some(slice(10, 300)), None], vec![None, Some(slice(5000, 70_000))]],
        };
        (reply, whole)
    }

    fn flatten(parts: &[Part]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::File(f) => out.extend_from_slice(&f.read().expect("read slice")),
            }
        }
        out
    }

    #[test]
    fn a_spliced_response_is_byte_for_byte_the_whole_encoding() {
        for version in 4..=16 {
            let (reply, whole) = fixture(version);
            let Reply::Frame(expected) = router::encode(ApiKey::Fetch, version, 99, &whole) else {
                panic!("v{version}: the whole encoding failed");
            };
            let parts = splice(version, 99, &reply).unwrap_or_else(|e| panic!("v{version}: {e}"));
            assert!(parts.iter().filter(|p| matches!(p, Part::File(_))).count() == 2, "v{version}");
            assert_eq!(flatten(&parts), expected.to_vec(), "v{version}");
        }
    }

    #[test]
    fn an_unexpected_layout_falls_back_to_the_whole_encoding() {
        let version = 12;
        let (mut reply, whole) = fixture(version);
        // A tagged field Strom never sets: the partition's trailer is not the predicted one.
        reply.response.responses[0].partitions[0].unknown_tagged_fields.insert(5, Bytes::from_static(b"x"));
        assert!(splice(version, 1, &reply).is_err());
        let mut whole = whole;
        whole.responses[0].partitions[0].unknown_tagged_fields.insert(5, Bytes::from_static(b"x"));
        let Reply::Frame(expected) = router::encode(ApiKey::Fetch, version, 1, &whole) else { panic!("encode") };
        let Reply::Frame(got) = encode(version, 1, reply) else { panic!("a whole frame") };
        assert_eq!(got, expected);
    }
}
