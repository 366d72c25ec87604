//! The records inside a batch (record format v2), read from the raw bytes: what compaction needs
//! (keys, values, each record's exact bytes) and what the group coordinator reads from
//! `__consumer_offsets`. Never re-encodes a record: kafka-protocol's `Record` keeps headers in a
//! map, which would merge duplicate header keys (legal, KIP-82).
//!
//! A record: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! key length varint (-1 = null) | key | value length varint (-1 = null) | value |
//! header count varint | per header: key length varint | key | value length varint | value.
//! Varints are zigzag-encoded, as in protobuf.

use std::borrow::Cow;

use super::batch::{BatchHeader, BATCH_HEADER_LEN};
use super::codec::{self, Codec};
use super::error::LogError;

/// One record of a batch, borrowed from the batch (or from its decompressed records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Absolute offset: the batch's base offset plus the record's offset delta.
    pub offset: i64,
    /// The record's timestamp; for a LogAppendTime batch, the batch's max timestamp (the append
    /// time), as Kafka's readers do.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    /// `None` is a tombstone.
    pub value: Option<&'a [u8]>,
    /// The record's headers exactly as stored: the header count varint and every header after
    /// it. [`for_each_header`] walks them.
    pub headers: &'a [u8],
}

/// Why the records of a batch cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("record {record} is malformed: {field}: {problem}")]
    Malformed { record: i32, field: &'static str, problem: &'static str },
    #[error("{count} bytes follow the batch's last record")]
    TrailingBytes { count: usize },
    #[error("unknown compression codec {0}")]
    UnknownCodec(i16),
    #[error("failed to decompress the records ({codec})")]
    Decompress {
        codec: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("records ({codec}) decompress to more than the {limit} bytes allowed (stopped at {size})")]
    DecompressedTooLarge { codec: &'static str, size: usize, limit: usize },
    #[error("failed to compress the records ({codec})")]
    Compress {
        codec: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Calls `f` with every record of one whole batch (`batch` starts with the batch header and
/// holds at least the whole batch), in order, decompressing the records if needed. Control
/// batches' records are passed too (their key is the control record key); check
/// [`BatchHeader::is_control`] first when that matters. The CRC is not checked
/// ([`super::verify_crc`] does that). On an error, the records before the bad one have
/// already been passed to `f`.
pub fn for_each_record(batch: &[u8], mut f: impl FnMut(RecordView<'_>)) -> Result<(), LogError> {
    let header = BatchHeader::parse(batch)?;
    let invalid = |source| LogError::InvalidRecords { offset: header.base_offset, source };
    let section = records_section(batch, &header).map_err(invalid)?;
    parse_records(&header, &section, |record| f(record.view)).map_err(invalid)
}

/// Walks the headers of a record ([`RecordView::headers`]) as (key, value) pairs, duplicates
/// included, in order.
pub fn for_each_header(headers: &[u8], f: impl FnMut(&[u8], Option<&[u8]>)) -> Result<(), RecordsError> {
    let mut reader = Reader { buf: headers, pos: 0, record: 0 };
    walk_headers(&mut reader, f)?;
    if reader.pos != headers.len() {
        return Err(RecordsError::TrailingBytes { count: headers.len() - reader.pos });
    }
    Ok(())
}

/// A record and its exact bytes (length prefix included), for copying it unchanged.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawRecord<'a> {
    pub view: RecordView<'a>,
    pub bytes: &'a [u8],
}

/// The records section of a whole batch, decompressed if the batch is compressed.
pub(super) fn records_section<'a>(batch: &'a [u8], header: &BatchHeader) -> Result<Cow<'a, [u8]>, RecordsError> {
    let section = batch.get(BATCH_HEADER_LEN..header.total_size()).ok_or(RecordsError::Malformed {
        record: 0,
        field: "records",
        problem: "the batch is shorter than its declared length",
    })?;
    match Codec::from_id(header.compression_codec())? {
        Codec::None => Ok(Cow::Borrowed(section)),
        codec => Ok(Cow::Owned(codec::decompress(codec, section)?.into())),
    }
}

/// Parses a (decompressed) records section holding `header.record_count` records.
pub(super) fn parse_records<'a>(
    header: &BatchHeader,
    section: &'a [u8],
    mut f: impl FnMut(RawRecord<'a>),
) -> Result<(), RecordsError> {
    let mut reader = Reader { buf: section, pos: 0, record: 0 };
    for record in 0..header.record_count {
        reader.record = record;
        let start = reader.pos;
        let length = reader.varint("record length")?;
        let length = usize::try_from(length).map_err(|_| reader.malformed("record length", "negative"))?;
        let body_start = reader.pos;
        let end = body_start.checked_add(length).filter(|end| *end <= section.len());
        let end = end.ok_or_else(|| reader.malformed("record length", "beyond the records"))?;
        // Parse the body within its declared length only.
        let mut body = Reader { buf: &section[..end], pos: body_start, record };
        body.take(1, "attributes")?;
        let timestamp_delta = body.varlong("timestamp delta")?;
        let offset_delta = body.varint("offset delta")?;
        if !(0..=header.last_offset_delta).contains(&offset_delta) {
            return Err(body.malformed("offset delta", "outside the batch's offsets"));
        }
        let key = body.bytes("key")?;
        let value = body.bytes("value")?;
        let headers_start = body.pos;
        walk_headers(&mut body, |_, _| {})?;
        if body.pos != end {
            return Err(body.malformed("record length", "does not match the record's contents"));
        }
        let timestamp = if header.timestamp_type_log_append() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(timestamp_delta)
        };
        let view = RecordView {
            offset: header.base_offset + i64::from(offset_delta),
            timestamp,
            key,
            value,
            headers: &section[headers_start..end],
        };
        f(RawRecord { view, bytes: &section[start..end] });
        reader.pos = end;
    }
    if reader.pos != section.len() {
        return Err(RecordsError::TrailingBytes { count: section.len() - reader.pos });
    }
    Ok(())
}

fn walk_headers<'a>(
    reader: &mut Reader<'a>,
    mut f: impl FnMut(&'a [u8], Option<&'a [u8]>),
) -> Result<(), RecordsError> {
    let count = reader.varint("header count")?;
    if count < 0 {
        return Err(reader.malformed("header count", "negative"));
    }
    for _ in 0..count {
        let key = reader.bytes("header key")?.ok_or_else(|| reader.malformed("header key", "null"))?;
        let value = reader.bytes("header value")?;
        f(key, value);
    }
    Ok(())
}

/// A bounds-checked cursor over record bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Index of the record being read, for errors.
    record: i32,
}

impl<'a> Reader<'a> {
    fn malformed(&self, field: &'static str, problem: &'static str) -> RecordsError {
        RecordsError::Malformed { record: self.record, field, problem }
    }

    fn take(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], RecordsError> {
        let end = self.pos.checked_add(len).filter(|end| *end <= self.buf.len());
        let end = end.ok_or_else(|| self.malformed(field, "truncated"))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    /// An unsigned varint of at most `max_bytes` bytes.
    fn unsigned(&mut self, max_bytes: usize, field: &'static str) -> Result<u64, RecordsError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = *self.buf.get(self.pos).ok_or_else(|| self.malformed(field, "truncated"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed(field, "varint too long"))
    }

    fn varint(&mut self, field: &'static str) -> Result<i32, RecordsError> {
        let raw = u32::try_from(self.unsigned(5, field)?).map_err(|_| self.malformed(field, "varint too long"))?;
        Ok((raw >> 1) as i32 ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self, field: &'static str) -> Result<i64, RecordsError> {
        let raw = self.unsigned(10, field)?;
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    /// A length-prefixed byte string; length -1 is null.
    fn bytes(&mut self, field: &'static str) -> Result<Option<&'a [u8]>, RecordsError> {
        match self.varint(field)? {
            -1 => Ok(None),
            len => {
                let len = usize::try_from(len).map_err(|_| self.malformed(field, "length below -1"))?;
                self.take(len, field).map(Some)
            }
        }
    }
}
