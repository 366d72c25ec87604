//! Building and reading the record batches the coordinators write to `__consumer_offsets`
//! and `__transaction_state`: uncompressed magic-2 batches of key/value records without
//! headers. The broker writes them, so reading only needs to understand what it writes;
//! anything else is reported.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::log::{self, BatchHeader};
use crate::partition::Partition;

fn put_varint(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn get_varint(buf: &mut &[u8]) -> Option<i64> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.first()?;
        buf.advance(1);
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    None
}

/// One uncompressed batch holding `records` (key, value-or-tombstone) stamped `timestamp`.
pub fn encode(records: &[(Bytes, Option<Bytes>)], timestamp: i64) -> Bytes {
    encode_batch(records, timestamp, None)
}

/// The same, as part of a producer's transaction (TxnOffsetCommit's offsets): the
/// transactional bit and the producer's id and epoch; the transaction's marker decides
/// whether the records count.
pub fn encode_transactional(
    records: &[(Bytes, Option<Bytes>)],
    timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
) -> Bytes {
    encode_batch(records, timestamp, Some((producer_id, producer_epoch)))
}

fn encode_batch(records: &[(Bytes, Option<Bytes>)], timestamp: i64, producer: Option<(i64, i16)>) -> Bytes {
    let mut body = BytesMut::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut r = BytesMut::new();
        r.put_i8(0); // attributes
        put_varint(&mut r, 0); // timestamp delta
        put_varint(&mut r, i as i64); // offset delta
        put_varint(&mut r, key.len() as i64);
        r.put_slice(key);
        match value {
            Some(v) => {
                put_varint(&mut r, v.len() as i64);
                r.put_slice(v);
            }
            None => put_varint(&mut r, -1),
        }
        put_varint(&mut r, 0); // headers
        put_varint(&mut body, r.len() as i64);
        body.put_slice(&r);
    }
    let count = records.len() as i32;
    let mut batch = BytesMut::with_capacity(log::BATCH_HEADER_LEN + body.len());
    batch.put_i64(0); // base offset, assigned by the log
    batch.put_i32((log::BATCH_HEADER_LEN - log::LOG_OVERHEAD + body.len()) as i32);
    batch.put_i32(-1); // partition leader epoch, stamped by the log
    batch.put_i8(2); // magic
    batch.put_u32(0); // crc, below
                      // Attributes: no compression, CreateTime; transactional (bit 4) for a producer's.
    batch.put_i16(if producer.is_some() { 0x10 } else { 0 });
    batch.put_i32((count - 1).max(0));
    batch.put_i64(timestamp);
    batch.put_i64(timestamp);
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    batch.put_i64(producer_id);
    batch.put_i16(producer_epoch);
    batch.put_i32(-1); // base sequence
    batch.put_i32(count);
    batch.put_slice(&body);
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

/// A record read back: its offset, key and value (None for a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub offset: i64,
    pub key: Bytes,
    pub value: Option<Bytes>,
    /// The producer whose transaction wrote it (its marker decides), or None.
    pub transaction: Option<i64>,
}

/// Why a batch of `__consumer_offsets` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Batch(#[from] log::BatchError),
    #[error("compressed batch at offset {0} in __consumer_offsets (the coordinator writes none)")]
    Compressed(i64),
    #[error("malformed record in batch at offset {0}")]
    Malformed(i64),
}

/// Every key/value record of an internal topic's partition replica, from its log start to its
/// log end (a new leader loads everything it has, not only what its high watermark covers
/// yet: its log is the partition's history from now on), in offset order. Unreadable
/// batches are logged and skipped.
pub fn scan_partition(partition: &Partition, mut f: impl FnMut(Scanned)) {
    let (topic, index) = (partition.topic.clone(), partition.index);
    let mut offset = partition.log_start_offset();
    loop {
        let read = match partition.read_up_to(offset, 8 * 1024 * 1024, true, Some(partition.log_end_offset())) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(%topic, partition = index, offset, error = %e, "reading an internal topic failed");
                break;
            }
        };
        let Some(bytes) = read.records.filter(|b| !b.is_empty()) else { break };
        let mut next = offset;
        match decode_scanned(&bytes) {
            Ok(scanned) => {
                for s in scanned {
                    if let Scanned::Record(r) = &s {
                        next = next.max(r.offset + 1);
                    }
                    f(s);
                }
            }
            Err(e) => tracing::error!(%topic, partition = index, offset, error = %e, "skipping unreadable batch"),
        }
        // Move past whole batches even when they held no records.
        for (h, _) in log::batches(&bytes).flatten() {
            next = next.max(h.last_offset() + 1);
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
}

/// What a scan of an internal topic finds, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    Record(KeyValue),
    /// A transaction marker: the records of `producer_id`'s transaction before it count
    /// (`commit`) or not.
    Marker {
        producer_id: i64,
        commit: bool,
    },
}

/// The key/value records of whole uncompressed batches in `bytes`; control batches are skipped.
pub fn decode(bytes: &[u8]) -> Result<Vec<KeyValue>, ReadError> {
    Ok(decode_scanned(bytes)?
        .into_iter()
        .filter_map(|s| match s {
            Scanned::Record(r) => Some(r),
            Scanned::Marker { .. } => None,
        })
        .collect())
}

/// The records and transaction markers of whole uncompressed batches in `bytes`.
pub fn decode_scanned(bytes: &[u8]) -> Result<Vec<Scanned>, ReadError> {
    let mut out = Vec::new();
    for item in log::batches(bytes) {
        let (header, range): (BatchHeader, std::ops::Range<usize>) = item?;
        if header.is_control() {
            let batch = bytes.get(range.clone()).ok_or(ReadError::Malformed(header.base_offset))?;
            match crate::partition::transactions::parse_marker(batch) {
                Ok(m) => out.push(Scanned::Marker {
                    producer_id: header.producer_id,
                    commit: m.kind == crate::partition::transactions::MarkerType::Commit,
                }),
                Err(e) => tracing::warn!(offset = header.base_offset, error = %e, "skipping a control batch"),
            }
            continue;
        }
        let transaction = header.is_transactional().then_some(header.producer_id);
        if header.compression_codec() != 0 {
            return Err(ReadError::Compressed(header.base_offset));
        }
        let bad = || ReadError::Malformed(header.base_offset);
        let mut buf = bytes.get(range.start + log::BATCH_HEADER_LEN..range.end).ok_or_else(bad)?;
        for _ in 0..header.record_count {
            let len = usize::try_from(get_varint(&mut buf).ok_or_else(bad)?).map_err(|_| bad())?;
            let mut rec = buf.get(..len).ok_or_else(bad)?;
            buf.advance(len);
            rec.advance(1); // attributes
            get_varint(&mut rec).ok_or_else(bad)?; // timestamp delta
            let delta = get_varint(&mut rec).ok_or_else(bad)?;
            let key_len = get_varint(&mut rec).ok_or_else(bad)?;
            let key = if key_len < 0 {
                Bytes::new()
            } else {
                let k = rec.get(..key_len as usize).ok_or_else(bad)?;
                rec.advance(key_len as usize);
                Bytes::copy_from_slice(k)
            };
            let value_len = get_varint(&mut rec).ok_or_else(bad)?;
            let value = if value_len < 0 {
                None
            } else {
                let v = rec.get(..value_len as usize).ok_or_else(bad)?;
                Some(Bytes::copy_from_slice(v))
            };
            out.push(Scanned::Record(KeyValue { offset: header.base_offset + delta, key, value, transaction }));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_batches_are_valid_and_decode_back() {
        let records =
            vec![(Bytes::from_static(b"k1"), Some(Bytes::from_static(b"v1"))), (Bytes::from_static(b"k2"), None)];
        let batch = encode(&records, 1234);
        log::verify_crc(&batch).expect("crc");
        let header = BatchHeader::parse(&batch).expect("header");
        assert_eq!((header.record_count, header.last_offset_delta), (2, 1));
        let back = decode(&batch).expect("decode");
        assert_eq!(back[0].key, Bytes::from_static(b"k1"));
        assert_eq!(back[1].value, None);
        assert_eq!(back[1].offset, 1);
    }
}
