//! Transactions as one partition replica sees them (the transaction half of Kafka's
//! `ProducerStateManager`, KIP-98): which producers have a transaction open here and from
//! which offset, the transactions whose marker the high watermark has not passed yet, and the
//! aborted transactions a read_committed consumer must skip. The last stable offset (LSO)
//! follows from them. A pure table, rebuilt from the log when the replica opens or truncates.
//!
//! Markers are control batches of one control record: key `version i16 | type i16` (0 abort,
//! 1 commit), value `version i16 | coordinator_epoch i32`, written by the transaction
//! coordinator (WriteTxnMarkers) with the producer's id and epoch.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use crate::log::for_each_record;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerType {
    Abort,
    Commit,
}

/// A transaction marker: what the control record of a control batch says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub kind: MarkerType,
    pub coordinator_epoch: i32,
}

/// Why a control batch is not a marker Strom understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    #[error("control batch: {0}")]
    Malformed(String),
    #[error("control record type {0} is not a transaction marker")]
    UnknownType(i16),
}

/// Why the coordinator's marker is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FencedMarker {
    #[error("marker from coordinator epoch {got}, older than {current} (TRANSACTION_COORDINATOR_FENCED)")]
    CoordinatorFenced { got: i32, current: i32 },
}

fn i16_at(b: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The marker in a control batch (the whole batch, header included).
pub fn parse_marker(batch: &[u8]) -> Result<Marker, MarkerError> {
    let mut first: Option<(Vec<u8>, Option<Vec<u8>>)> = None;
    for_each_record(batch, |r| {
        if first.is_none() {
            first = Some((r.key.unwrap_or_default().to_vec(), r.value.map(<[u8]>::to_vec)));
        }
    })
    .map_err(|e| MarkerError::Malformed(e.to_string()))?;
    let (key, value) = first.ok_or_else(|| MarkerError::Malformed("no control record".into()))?;
    let kind = match i16_at(&key, 2) {
        Some(0) => MarkerType::Abort,
        Some(1) => MarkerType::Commit,
        Some(other) => return Err(MarkerError::UnknownType(other)),
        None => return Err(MarkerError::Malformed(format!("a control key of {} bytes", key.len()))),
    };
    let coordinator_epoch = value.as_deref().and_then(|v| i32_at(v, 2)).unwrap_or(-1);
    Ok(Marker { kind, coordinator_epoch })
}

/// A control batch holding `marker` for a producer (base offset 0: the log stamps it).
pub fn encode_marker(producer_id: i64, producer_epoch: i16, marker: Marker, timestamp: i64) -> Bytes {
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(match marker.kind {
        MarkerType::Abort => 0,
        MarkerType::Commit => 1,
    });
    let mut value = BytesMut::with_capacity(6);
    value.put_i16(0);
    value.put_i32(marker.coordinator_epoch);
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    // Encoding one uncompressed record into memory cannot fail.
    if let Err(e) = RecordBatchEncoder::encode(&mut buf, [&record], &options) {
        tracing::error!(error = %e, "encoding a transaction marker failed");
    }
    buf.freeze()
}

/// An aborted transaction: a read_committed consumer skips this producer's records from
/// `first_offset` up to the marker at `last_offset` (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// The transactions of one partition replica.
#[derive(Debug, Clone, Default)]
pub struct TransactionTable {
    /// Producer id → the first offset of its open transaction here.
    open: BTreeMap<i64, i64>,
    /// Transactions ended by a marker the high watermark may not have passed yet:
    /// (first offset, marker offset), in marker order. Still unstable until it has.
    ending: VecDeque<(i64, i64)>,
    /// Aborted transactions, in marker order, down to the log start offset.
    aborted: VecDeque<AbortedTxn>,
    /// The newest coordinator epoch that wrote a marker for each producer.
    coordinator_epochs: HashMap<i64, i32>,
}

impl TransactionTable {
    /// A transactional data batch of `producer_id` appended at `first_offset`: opens its
    /// transaction here unless one is open.
    pub fn on_data(&mut self, producer_id: i64, first_offset: i64) {
        self.open.entry(producer_id).or_insert(first_offset);
    }

    /// Whether the coordinator may write `marker` (a marker from an older coordinator epoch
    /// than one already seen for the producer is fenced).
    pub fn check_marker(&self, producer_id: i64, marker: Marker) -> Result<(), FencedMarker> {
        match self.coordinator_epochs.get(&producer_id) {
            Some(&current) if marker.coordinator_epoch < current => {
                Err(FencedMarker::CoordinatorFenced { got: marker.coordinator_epoch, current })
            }
            _ => Ok(()),
        }
    }

    /// A marker of `producer_id` appended at `offset`: its transaction here (if any) ends.
    pub fn on_marker(&mut self, producer_id: i64, marker: Marker, offset: i64) {
        let epoch = self.coordinator_epochs.entry(producer_id).or_insert(marker.coordinator_epoch);
        *epoch = (*epoch).max(marker.coordinator_epoch);
        let Some(first_offset) = self.open.remove(&producer_id) else {
            // A marker with nothing open here (a retried WriteTxnMarkers, or a transaction
            // that wrote nothing to this partition): nothing to end.
            return;
        };
        self.ending.push_back((first_offset, offset));
        if marker.kind == MarkerType::Abort {
            self.aborted.push_back(AbortedTxn { producer_id, first_offset, last_offset: offset });
        }
    }

    /// The last stable offset for `high_watermark`: below it every transaction is decided
    /// and its marker committed. Forgets the ended transactions the high watermark passed.
    pub fn last_stable_offset(&mut self, high_watermark: i64) -> i64 {
        while self.ending.front().is_some_and(|(_, marker)| *marker < high_watermark) {
            self.ending.pop_front();
        }
        let first_open = self.open.values().copied().min();
        let first_ending = self.ending.iter().map(|(first, _)| *first).min();
        [Some(high_watermark), first_open, first_ending].into_iter().flatten().min().unwrap_or(high_watermark)
    }

    /// The aborted transactions a read_committed fetch from `from` up to `upper` must be told
    /// of: those ending at or after `from` that began before `upper`.
    pub fn aborted_between(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        self.aborted.iter().filter(|a| a.last_offset >= from && a.first_offset < upper).copied().collect()
    }

    /// Forgets aborted transactions wholly below the log start offset (retention, DeleteRecords).
    pub fn trim_before(&mut self, log_start_offset: i64) {
        while self.aborted.front().is_some_and(|a| a.last_offset < log_start_offset) {
            self.aborted.pop_front();
        }
    }

    /// The first offset of `producer_id`'s open transaction here.
    pub fn open_since(&self, producer_id: i64) -> Option<i64> {
        self.open.get(&producer_id).copied()
    }

    /// The newest coordinator epoch that wrote a marker for `producer_id` (-1: none yet).
    pub fn coordinator_epoch(&self, producer_id: i64) -> i32 {
        self.coordinator_epochs.get(&producer_id).copied().unwrap_or(-1)
    }

    /// Producers with a transaction open here.
    pub fn open_transactions(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: Marker = Marker { kind: MarkerType::Commit, coordinator_epoch: 3 };
    const ABORT: Marker = Marker { kind: MarkerType::Abort, coordinator_epoch: 3 };

    #[test]
    fn a_marker_round_trips_through_a_control_batch() {
        for marker in [COMMIT, ABORT] {
            let batch = encode_marker(42, 7, marker, 1_000);
            let header = crate::log::BatchHeader::parse(&batch).expect("a batch");
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch, header.record_count), (42, 7, 1));
            assert_eq!(parse_marker(&batch), Ok(marker));
        }
    }

    #[test]
    fn the_lso_stays_at_the_first_open_transaction_until_its_marker_is_replicated() {
        let mut t = TransactionTable::default();
        // Producer 1 opens at 10, producer 2 at 12; the high watermark is at 20.
        t.on_data(1, 10);
        t.on_data(1, 11);
        t.on_data(2, 12);
        assert_eq!(t.last_stable_offset(20), 10);
        t.on_marker(1, COMMIT, 15);
        // Producer 1's marker at 15 is below the high watermark: stable; producer 2 still open.
        assert_eq!(t.last_stable_offset(20), 12);
        t.on_marker(2, ABORT, 21);
        // The marker at 21 is not replicated while the high watermark is 20.
        assert_eq!(t.last_stable_offset(20), 12);
        assert_eq!(t.last_stable_offset(22), 22);
        assert_eq!(t.open_transactions(), 0);
    }

    #[test]
    fn read_committed_fetches_learn_of_the_aborted_transactions_they_overlap() {
        let mut t = TransactionTable::default();
        t.on_data(1, 0);
        t.on_marker(1, ABORT, 5);
        t.on_data(2, 6);
        t.on_marker(2, COMMIT, 8);
        t.on_data(1, 9);
        t.on_marker(1, ABORT, 12);
        let first = AbortedTxn { producer_id: 1, first_offset: 0, last_offset: 5 };
        let second = AbortedTxn { producer_id: 1, first_offset: 9, last_offset: 12 };
        assert_eq!(t.aborted_between(0, 20), vec![first, second]);
        assert_eq!(t.aborted_between(6, 9), vec![], "the commit in between is not reported");
        assert_eq!(t.aborted_between(5, 7), vec![first]);
        t.trim_before(6);
        assert_eq!(t.aborted_between(0, 20), vec![second]);
    }

    #[test]
    fn a_marker_from_an_older_coordinator_is_fenced_and_a_repeated_one_changes_nothing() {
        let mut t = TransactionTable::default();
        t.on_data(1, 0);
        t.on_marker(1, COMMIT, 3);
        let older = Marker { kind: MarkerType::Abort, coordinator_epoch: 2 };
        assert_eq!(t.check_marker(1, older), Err(FencedMarker::CoordinatorFenced { got: 2, current: 3 }));
        assert_eq!(t.check_marker(1, COMMIT), Ok(()));
        t.on_marker(1, COMMIT, 4);
        assert_eq!(t.last_stable_offset(10), 10);
        assert!(t.aborted_between(0, 10).is_empty());
    }

    #[test]
    fn garbage_is_not_a_marker() {
        assert!(parse_marker(b"not a batch").is_err());
        let mut batch = encode_marker(1, 0, COMMIT, 0).to_vec();
        // The record ends: key type (2 bytes) | value length (1) | value (6) | header count (1).
        let type_at = batch.len() - 10;
        batch[type_at] = 0x7f;
        assert_eq!(parse_marker(&batch), Err(MarkerError::UnknownType(0x7f01)));
    }
}
