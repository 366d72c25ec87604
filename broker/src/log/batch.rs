//! Raw record-batch (magic v2) header handling, shared by the log and the Produce handler.
//!
//! Batches stay opaque bytes: the broker reads the fixed 61-byte header and rewrites only
//! the fields Kafka's broker rewrites (baseOffset and partitionLeaderEpoch, both outside the
//! CRC; maxTimestamp and the timestamp-type bit for LogAppendTime, which needs a new CRC).
//! Records are never decoded here.
//!
//! Layout (big endian): baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 |
//! crc u32 | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...

use std::ops::Range;

/// Bytes from the start of a batch through its records count.
pub const BATCH_HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the bytes of a batch that `batchLength` does not count.
pub const LOG_OVERHEAD: usize = 12;
/// The only record-batch format Strom stores.
pub const MAGIC_V2: i8 = 2;

/// The smallest legal `batchLength`: a header with no records.
const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;

// Field offsets within a batch.
const BASE_OFFSET: usize = 0;
pub(super) const BATCH_LENGTH: usize = 8;
const PARTITION_LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
pub(super) const CRC: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch.
pub(crate) const CRC_COVERED_FROM: usize = 21;
pub(super) const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
pub(super) const RECORD_COUNT: usize = 57;

pub(super) const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;

/// Why a byte range is not a usable record batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("record batch truncated: {needed} bytes needed, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("record batch magic {0} is not supported (only magic 2)")]
    UnsupportedMagic(i8),
    #[error("record batch length {0} is invalid")]
    InvalidLength(i32),
    #[error("record batch last offset delta {0} is negative")]
    InvalidLastOffsetDelta(i32),
    #[error("record batch record count {0} is negative")]
    InvalidRecordCount(i32),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
}

/// The fixed header of a magic v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `buf` (which needs at least 61 bytes; the records
    /// need not be present). Checks only what the header alone can tell.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated { needed: BATCH_HEADER_LEN, available: buf.len() });
        }
        let header = BatchHeader {
            base_offset: i64::from_be_bytes(field(buf, BASE_OFFSET)),
            batch_length: i32::from_be_bytes(field(buf, BATCH_LENGTH)),
            partition_leader_epoch: i32::from_be_bytes(field(buf, PARTITION_LEADER_EPOCH)),
            magic: i8::from_be_bytes(field(buf, MAGIC)),
            crc: u32::from_be_bytes(field(buf, CRC)),
            attributes: i16::from_be_bytes(field(buf, ATTRIBUTES)),
            last_offset_delta: i32::from_be_bytes(field(buf, LAST_OFFSET_DELTA)),
            base_timestamp: i64::from_be_bytes(field(buf, BASE_TIMESTAMP)),
            max_timestamp: i64::from_be_bytes(field(buf, MAX_TIMESTAMP)),
            producer_id: i64::from_be_bytes(field(buf, PRODUCER_ID)),
            producer_epoch: i16::from_be_bytes(field(buf, PRODUCER_EPOCH)),
            base_sequence: i32::from_be_bytes(field(buf, BASE_SEQUENCE)),
            record_count: i32::from_be_bytes(field(buf, RECORD_COUNT)),
        };
        // Magic first: v0/v1 message sets keep their magic at the same position, so this names
        // the real problem for an old client.
        if header.magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(header.magic));
        }
        if header.batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::InvalidLength(header.batch_length));
        }
        if header.last_offset_delta < 0 {
            return Err(BatchError::InvalidLastOffsetDelta(header.last_offset_delta));
        }
        if header.record_count < 0 {
            return Err(BatchError::InvalidRecordCount(header.record_count));
        }
        Ok(header)
    }

    /// Size of the whole batch on disk and on the wire.
    pub fn total_size(&self) -> usize {
        // `parse` guarantees batch_length >= 49, so the cast cannot wrap.
        LOG_OVERHEAD + self.batch_length as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression_codec(&self) -> i16 {
        self.attributes & COMPRESSION_CODEC_MASK
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }

    /// Whether the timestamps are the broker's append time (every record then has
    /// `max_timestamp` as its timestamp) rather than the producer's create time.
    pub fn timestamp_type_log_append(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_MASK != 0
    }

    /// The sequence number of the last record, wrapping from i32::MAX to 0 as Kafka does;
    /// -1 (no sequence) stays -1.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return self.base_sequence;
        }
        let headroom = i32::MAX - self.base_sequence;
        if self.last_offset_delta > headroom {
            self.last_offset_delta - headroom - 1
        } else {
            self.base_sequence + self.last_offset_delta
        }
    }
}

/// Checks the CRC-32C of one whole batch (bytes 21 to the end of the batch) against the
/// stored one. Bytes after the batch's declared end are ignored.
pub fn verify_crc(batch: &[u8]) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    let end = header.total_size();
    if batch.len() < end {
        return Err(BatchError::Truncated { needed: end, available: batch.len() });
    }
    let computed = crc32c::crc32c(&batch[CRC_COVERED_FROM..end]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch { stored: header.crc, computed });
    }
    Ok(())
}

/// Rewrites baseOffset (outside the CRC). `batch` must hold at least a batch header.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites partitionLeaderEpoch (outside the CRC). `batch` must hold at least a batch header.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Stamps a LogAppendTime batch as Kafka's `DefaultRecordBatch.setMaxTimestamp` does: sets the
/// timestamp-type bit and maxTimestamp (baseTimestamp and the records are left alone: readers
/// take every record's timestamp from maxTimestamp), then recomputes the CRC.
/// `batch` must be exactly one whole batch.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    let (head, body) = batch.split_at_mut(BATCH_HEADER_LEN);
    set_log_append_time_in_header(head, body, timestamp);
}

/// [`set_log_append_time`] of a batch held as its header (`head`, exactly
/// [`BATCH_HEADER_LEN`] bytes, rewritten) and the rest (`body`, read for the CRC).
pub fn set_log_append_time_in_header(head: &mut [u8], body: &[u8], timestamp: i64) {
    let attributes = i16::from_be_bytes(field(head, ATTRIBUTES)) | TIMESTAMP_TYPE_MASK;
    head[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    head[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[CRC_COVERED_FROM..]), body);
    head[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Splits a buffer holding whole batches; a trailing partial batch is an error. Only headers
/// are checked (no CRC). Iteration stops after the first error.
pub fn batches(buf: &[u8]) -> impl Iterator<Item = Result<(BatchHeader, Range<usize>), BatchError>> + '_ {
    let mut position = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || position == buf.len() {
            return None;
        }
        let rest = &buf[position..];
        let item = BatchHeader::parse(rest).and_then(|header| {
            let size = header.total_size();
            if size > rest.len() {
                return Err(BatchError::Truncated { needed: size, available: rest.len() });
            }
            Ok((header, position..position + size))
        });
        match &item {
            Ok((_, range)) => position = range.end,
            Err(_) => failed = true,
        }
        Some(item)
    })
}

/// Copies the `N` bytes at `at`; callers have checked the length.
fn field<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0; N];
    bytes.copy_from_slice(&buf[at..at + N]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `records` opaque record bytes with a correct CRC.
    fn raw_batch(last_offset_delta: i32, records: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((MIN_BATCH_LENGTH as usize + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&last_offset_delta.to_be_bytes());
        b.extend_from_slice(&100i64.to_be_bytes());
        b.extend_from_slice(&200i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&7i32.to_be_bytes());
        b.extend_from_slice(&(last_offset_delta + 1).to_be_bytes());
        b.extend_from_slice(records);
        let crc = crc32c::crc32c(&b[CRC_COVERED_FROM..]);
        b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn parse_reads_every_field() {
        let batch = raw_batch(4, b"abc");
        let h = BatchHeader::parse(&batch).expect("valid header");
        assert_eq!(h.total_size(), batch.len());
        assert_eq!((h.last_offset(), h.base_timestamp, h.max_timestamp), (4, 100, 200));
        assert_eq!((h.base_sequence, h.last_sequence(), h.record_count), (7, 11, 5));
        assert!(!h.timestamp_type_log_append() && !h.is_control() && !h.is_transactional());
        verify_crc(&batch).expect("crc matches");
    }

    #[test]
    fn parse_rejects_bad_headers() {
        let batch = raw_batch(0, b"");
        assert!(matches!(BatchHeader::parse(&batch[..60]), Err(BatchError::Truncated { .. })));
        let mut b = batch.clone();
        b[MAGIC] = 1;
        assert_eq!(BatchHeader::parse(&b), Err(BatchError::UnsupportedMagic(1)));
        let mut b = batch.clone();
        b[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&48i32.to_be_bytes());
        assert_eq!(BatchHeader::parse(&b), Err(BatchError::InvalidLength(48)));
        let mut b = batch.clone();
        b[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(BatchHeader::parse(&b), Err(BatchError::InvalidLastOffsetDelta(-1)));
        let mut b = batch;
        b[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(BatchHeader::parse(&b), Err(BatchError::InvalidRecordCount(-2)));
    }

    #[test]
    fn crc_covers_attributes_onwards_but_not_offset_or_epoch() {
        let mut batch = raw_batch(2, b"payload");
        set_base_offset(&mut batch, 1234);
        set_partition_leader_epoch(&mut batch, 9);
        verify_crc(&batch).expect("offset and epoch are outside the CRC");
        let h = BatchHeader::parse(&batch).expect("valid header");
        assert_eq!((h.base_offset, h.partition_leader_epoch), (1234, 9));
        let last = batch.len() - 1;
        batch[last] ^= 1;
        assert!(matches!(verify_crc(&batch), Err(BatchError::CrcMismatch { .. })));
    }

    #[test]
    fn log_append_time_sets_max_timestamp_and_type_and_keeps_crc_valid() {
        let mut batch = raw_batch(1, b"xy");
        set_log_append_time(&mut batch, 999);
        let h = BatchHeader::parse(&batch).expect("valid header");
        assert!(h.timestamp_type_log_append());
        assert_eq!((h.base_timestamp, h.max_timestamp), (100, 999));
        verify_crc(&batch).expect("crc recomputed");
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        let mut h = BatchHeader::parse(&raw_batch(3, b"")).expect("valid header");
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 1);
        h.base_sequence = -1;
        assert_eq!(h.last_sequence(), -1);
    }

    #[test]
    fn batches_splits_whole_batches_and_rejects_a_partial_tail() {
        let mut buf = raw_batch(0, b"a");
        buf.extend(raw_batch(1, b"bb"));
        let ranges: Vec<_> = batches(&buf).map(|r| r.expect("whole").1).collect();
        assert_eq!(ranges, vec![0..62, 62..buf.len()]);
        let cut = &buf[..buf.len() - 1];
        let items: Vec<_> = batches(cut).collect();
        assert_eq!(items.len(), 2);
        assert!(matches!(items[1], Err(BatchError::Truncated { .. })));
    }
}
