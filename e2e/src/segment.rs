//! Reading a partition's segment files the way a test needs to: which `.log` files exist, and
//! where each record batch (magic v2) starts and ends inside one. Parsed here independently of
//! the broker so that crash tests can compute what recovery must keep.
//!
//! Batch layout (big-endian): baseOffset i64 @0 | batchLength i32 @8 | partitionLeaderEpoch
//! i32 @12 | magic i8 @16 | crc u32 @17 | attributes i16 @21 | lastOffsetDelta i32 @23 |
//! baseTimestamp i64 @27 | maxTimestamp i64 @35 | producerId i64 @43 | producerEpoch i16 @51 |
//! baseSequence i32 @53 | recordCount i32 @57 | records @61. batchLength counts the bytes after
//! itself; the CRC-32C covers attributes to the end of the batch.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// Bytes before the records of a batch.
pub const BATCH_HEADER_LEN: usize = 61;
/// Offset of the first byte the CRC covers (attributes).
pub const CRC_START: usize = 21;

/// The header fields of one complete batch found in a `.log` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// File position of the batch's first byte.
    pub position: usize,
    pub base_offset: i64,
    pub batch_length: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub record_count: i32,
}

impl BatchInfo {
    /// Total bytes of the batch in the file (12 + batchLength).
    pub fn size(&self) -> usize {
        12 + usize::try_from(self.batch_length).unwrap_or(0)
    }

    /// File position just past the batch.
    pub fn end(&self) -> usize {
        self.position + self.size()
    }

    /// The offset after the batch's last record.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta) + 1
    }

    /// Whether the stored CRC-32C matches the bytes of the batch in `file`.
    pub fn crc_matches(&self, file: &[u8]) -> bool {
        file.get(self.position + CRC_START..self.end()).is_some_and(|covered| crc32c(covered) == self.crc)
    }
}

/// Every complete batch at the start of `file`, in order; stops at the first batch whose
/// header or body is cut short or whose length is impossible (a torn tail, or preallocated
/// zeros).
pub fn parse_batches(file: &[u8]) -> Vec<BatchInfo> {
    let mut batches = Vec::new();
    let mut pos = 0;
    while let Some(header) = file.get(pos..pos + BATCH_HEADER_LEN) {
        let be_i64 = |at: usize| i64::from_be_bytes(array(&header[at..at + 8]));
        let be_i32 = |at: usize| i32::from_be_bytes(array(&header[at..at + 4]));
        let batch = BatchInfo {
            position: pos,
            base_offset: be_i64(0),
            batch_length: be_i32(8),
            magic: i8::from_be_bytes([header[16]]),
            crc: u32::from_be_bytes(array(&header[17..21])),
            attributes: i16::from_be_bytes(array(&header[21..23])),
            last_offset_delta: be_i32(23),
            record_count: be_i32(57),
        };
        let min_len = i32::try_from(BATCH_HEADER_LEN - 12).unwrap_or(i32::MAX);
        if batch.batch_length < min_len || batch.end() > file.len() {
            break;
        }
        pos = batch.end();
        batches.push(batch);
    }
    batches
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

/// The `.log` files of a partition directory, ordered by base offset (their names).
pub fn log_files(partition_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(partition_dir)
        .with_context(|| format!("list {}", partition_dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    Ok(files)
}

/// The segment with the highest base offset: the one being appended to.
pub fn active_segment(partition_dir: &Path) -> Result<PathBuf> {
    log_files(partition_dir)?.pop().ok_or_else(|| anyhow!("no .log file in {}", partition_dir.display()))
}

/// CRC-32C (Castagnoli), bit by bit: slow but tiny, and the files here are small.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn parse_stops_at_a_torn_batch() {
        let mut file = Vec::new();
        for (base, records) in [(0i64, 3i32), (3, 2)] {
            let mut batch = vec![0u8; BATCH_HEADER_LEN + 10];
            let len = i32::try_from(batch.len() - 12).expect("small");
            batch[0..8].copy_from_slice(&base.to_be_bytes());
            batch[8..12].copy_from_slice(&len.to_be_bytes());
            batch[16] = 2;
            batch[23..27].copy_from_slice(&(records - 1).to_be_bytes());
            batch[57..61].copy_from_slice(&records.to_be_bytes());
            file.extend_from_slice(&batch);
        }
        let whole = parse_batches(&file);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[1].next_offset(), 5);
        let torn = parse_batches(&file[..file.len() - 1]);
        assert_eq!(torn.len(), 1);
        assert_eq!(torn[0].next_offset(), 3);
    }
}
