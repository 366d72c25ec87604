//! Tests of the partition log, by concern, and the helpers they share.
//!
//! Batches are built with kafka-protocol's `RecordBatchEncoder`, as a client would; `keyed.rs`
//! encodes keyed records byte by byte for the compaction and record-parsing tests.

mod append_read;
mod compaction;
mod compaction_crash;
mod compaction_props;
mod flush;
mod keyed;
mod props;
mod records;
mod recovery;
mod replica;
mod retention;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

use super::batch::{batches, BatchHeader};
use super::segment::{file_name, LOG_EXT};
use super::{AppendInfo, Log, LogConfig, TimestampType};

/// One record batch, as a plain (non-idempotent) producer sends it, of `(key, value, timestamp)` records.
pub(super) fn encode_records(records: Vec<(Option<Bytes>, Option<Bytes>, i64)>, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, (key, value, timestamp))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: i as i64,
            // offset - sequence must be the same for all records of one batch; this keeps
            // the batch's base sequence at -1 (no producer id), as a plain producer sends.
            sequence: i as i32 - 1,
            timestamp,
            key,
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode test batch");
    buf.to_vec()
}

/// One record batch with a record per timestamp, each with a `value_len`-byte value.
pub(super) fn encode(timestamps: &[i64], value_len: usize, compression: Compression) -> Vec<u8> {
    let records = timestamps
        .iter()
        .enumerate()
        .map(|(i, &timestamp)| {
            let value = Bytes::from((0..value_len).map(|b| (b * 7 + i) as u8).collect::<Vec<_>>());
            (None, Some(value), timestamp)
        })
        .collect();
    encode_records(records, compression)
}

/// An uncompressed batch of `records` records stamped `timestamp`.
pub(super) fn batch(records: usize, value_len: usize, timestamp: i64) -> Vec<u8> {
    encode(&vec![timestamp; records], value_len, Compression::None)
}

/// Small segments and indexes so that tests cross segment and index boundaries.
pub(super) fn small_config() -> LogConfig {
    LogConfig { segment_bytes: 4096, segment_index_bytes: 1024, index_interval_bytes: 256, ..LogConfig::default() }
}

pub(super) fn append(log: &mut Log, batch: &[u8], now_ms: i64) -> AppendInfo {
    let mut bytes = batch.to_vec();
    log.append(&mut bytes, 0, TimestampType::CreateTime, now_ms).expect("append")
}

/// Everything readable from the log start offset, fetch by fetch.
pub(super) fn read_all(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while let Some(slice) = log.read(offset, usize::MAX, i64::MAX, true).expect("read") {
        let bytes = slice.read().expect("pread");
        let (last, _) = batches(&bytes).last().expect("a batch").expect("whole batches");
        offset = last.last_offset() + 1;
        out.extend_from_slice(&bytes);
    }
    out
}

pub(super) fn headers(log: &Log) -> Vec<BatchHeader> {
    let mut all = Vec::new();
    log.scan_headers(log.log_start_offset(), |h| all.push(*h)).expect("scan");
    all
}

pub(super) fn segment_log_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(file_name(base_offset, LOG_EXT))
}

pub(super) fn open(dir: &Path, config: &LogConfig) -> Log {
    Log::open(dir, config.clone()).expect("open log")
}
