//! Helpers for the tests of keyed records (compaction, record parsing): batches encoded byte by
//! byte (so that records can carry duplicate header keys and null values), the records a log
//! returns, checked for the invariants every reader relies on, and a naive model of
//! compaction to compare with.

use std::collections::HashMap;

use super::super::batch::{batches, verify_crc, BatchHeader, CRC_COVERED_FROM};
use super::super::codec::{self, Codec};
use super::super::records::for_each_record;
use super::super::{CompactionConfig, Log};
use super::read_all;

/// A record to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TestRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

impl TestRecord {
    pub(super) fn new(key: Option<&[u8]>, value: Option<&[u8]>, timestamp: i64) -> TestRecord {
        TestRecord { key: key.map(<[u8]>::to_vec), value: value.map(<[u8]>::to_vec), headers: Vec::new(), timestamp }
    }

    /// The record's headers section as the wire format stores it.
    pub(super) fn encoded_headers(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.headers.len() as i64);
        for (key, value) in &self.headers {
            put_bytes(&mut out, Some(key));
            put_bytes(&mut out, value.as_deref());
        }
        out
    }
}

/// The producer fields of a batch: (producer id, epoch, base sequence); `NO_PRODUCER` is a
/// plain producer's.
pub(super) type Producer = (i64, i16, i32);
pub(super) const NO_PRODUCER: Producer = (-1, -1, -1);

/// One magic v2 batch of `records`, encoded byte by byte, records compressed with `codec`.
pub(super) fn raw_batch(records: &[TestRecord], codec: Codec, producer: Producer) -> Vec<u8> {
    let base_timestamp = records.iter().map(|r| r.timestamp).min().unwrap_or(0);
    let max_timestamp = records.iter().map(|r| r.timestamp).max().unwrap_or(0);
    let mut section = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let mut body = vec![0u8];
        put_varint(&mut body, record.timestamp - base_timestamp);
        put_varint(&mut body, i as i64);
        put_bytes(&mut body, record.key.as_deref());
        put_bytes(&mut body, record.value.as_deref());
        body.extend(record.encoded_headers());
        put_varint(&mut section, body.len() as i64);
        section.extend(body);
    }
    let section = codec::compress(codec, &section).expect("compress");
    let codec_id: i16 = match codec {
        Codec::None => 0,
        Codec::Gzip => 1,
        Codec::Snappy => 2,
        Codec::Lz4 => 3,
        Codec::Zstd => 4,
    };
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + section.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&codec_id.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&base_timestamp.to_be_bytes());
    b.extend_from_slice(&max_timestamp.to_be_bytes());
    b.extend_from_slice(&producer.0.to_be_bytes());
    b.extend_from_slice(&producer.1.to_be_bytes());
    b.extend_from_slice(&producer.2.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend(section);
    let crc = crc32c::crc32c(&b[CRC_COVERED_FROM..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// A batch of (key, value) records, all stamped `timestamp`, uncompressed.
pub(super) fn kv_batch(records: &[(&str, Option<&str>)], timestamp: i64) -> Vec<u8> {
    let records: Vec<TestRecord> =
        records.iter().map(|(k, v)| TestRecord::new(Some(k.as_bytes()), v.map(str::as_bytes), timestamp)).collect();
    raw_batch(&records, Codec::None, NO_PRODUCER)
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

/// A record as read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stored {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<u8>,
}

/// Every batch readable from the log start, each checked: CRC valid, base offsets strictly
/// increasing and above the previous batch's last offset (gaps allowed), records within their
/// batch's offsets and strictly increasing across the log.
pub(super) fn stored_batches(log: &Log) -> Vec<(BatchHeader, Vec<Stored>)> {
    let bytes = read_all(log);
    let mut out: Vec<(BatchHeader, Vec<Stored>)> = Vec::new();
    let mut next_offset = i64::MIN;
    let mut last_record = i64::MIN;
    for item in batches(&bytes) {
        let (header, range) = item.expect("whole batches");
        let batch = &bytes[range];
        verify_crc(batch).expect("every batch's CRC verifies");
        assert!(header.base_offset >= next_offset, "batch at {} overlaps the one before", header.base_offset);
        next_offset = header.last_offset() + 1;
        let mut records = Vec::new();
        for_each_record(batch, |r| {
            assert!(r.offset > last_record, "record offsets increase ({} after {last_record})", r.offset);
            assert!(r.offset >= header.base_offset && r.offset <= header.last_offset(), "record inside its batch");
            last_record = r.offset;
            records.push(Stored {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r.headers.to_vec(),
            });
        })
        .expect("records parse");
        assert_eq!(records.len(), header.record_count as usize);
        out.push((header, records));
    }
    assert!(next_offset <= log.log_end_offset(), "no batch beyond the log end offset");
    out
}

pub(super) fn stored_records(log: &Log) -> Vec<Stored> {
    stored_batches(log).into_iter().flat_map(|(_, records)| records).collect()
}

/// (key, value) of every stored record, as strings, for readable assertions.
pub(super) fn key_values(log: &Log) -> Vec<(String, Option<String>)> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    stored_records(log)
        .iter()
        .map(|r| (r.key.as_deref().map_or_else(|| "<null>".into(), text), r.value.as_deref().map(text)))
        .collect()
}

/// A record appended by a test, with its offset and its batch's max timestamp.
#[derive(Debug, Clone)]
pub(super) struct Appended {
    pub offset: i64,
    pub batch_max_timestamp: i64,
    pub record: TestRecord,
}

/// What compaction must leave of `appended`: every record at or above `first_uncleaned`, and
/// below it the records without a key and each key's newest record unless it is an expired
/// tombstone. In offset order.
pub(super) fn naive_compaction(
    appended: &[Appended],
    first_uncleaned: i64,
    now_ms: i64,
    config: &CompactionConfig,
) -> Vec<(i64, TestRecord)> {
    let mut newest: HashMap<&[u8], i64> = HashMap::new();
    for a in appended {
        if let Some(key) = &a.record.key {
            newest.insert(key, a.offset);
        }
    }
    appended
        .iter()
        .filter(|a| {
            let Some(key) = &a.record.key else {
                return true;
            };
            if a.offset >= first_uncleaned {
                return true;
            }
            let expired = a.record.value.is_none() && now_ms - a.batch_max_timestamp > config.delete_retention_ms;
            newest[key.as_slice()] == a.offset && !expired
        })
        .map(|a| (a.offset, a.record.clone()))
        .collect()
}
