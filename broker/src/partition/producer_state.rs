//! Idempotent-producer state of one partition: for each producer id its epoch and the last
//! five batches it appended (sequence range and offsets), as Kafka keeps them. A pure
//! decision table, tested without any I/O.
//!
//! Rules (Kafka's `ProducerAppendInfo`):
//! - an epoch older than the known one is fenced: `InvalidProducerEpoch`;
//! - a newer epoch must start again at sequence 0 (unless the producer was unknown);
//! - a batch whose sequence range equals one of the last five is a duplicate: it is not
//!   appended again and the producer gets the offsets of the original;
//! - otherwise the batch must continue exactly after the last sequence: `OutOfOrderSequence`;
//! - a producer the partition has never seen may start at any sequence (its state may have
//!   been removed with old segments).

use std::collections::{HashMap, VecDeque};

/// How many batches per producer are remembered for de-duplication (Kafka's constant; the
/// producer never has more than five requests in flight with idempotence).
pub const MAX_CACHED_BATCHES: usize = 5;

/// What a batch claims about its producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    /// The batch's max timestamp (DescribeProducers reports the last one).
    pub max_timestamp: i64,
}

/// A batch that was appended, remembered to answer retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedBatch {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<CachedBatch>,
    last_timestamp: i64,
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSnapshot {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence appended in this epoch; -1 before any.
    pub last_sequence: i32,
    /// The max timestamp of its last batch; -1 before any.
    pub last_timestamp: i64,
}

/// The decision for an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended: answer with the original offsets.
    Duplicate(CachedBatch),
}

/// Why a batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current}")]
    InvalidProducerEpoch { producer_id: i64, epoch: i16, current: i16 },
    #[error("producer {producer_id}: out of order sequence {got}, expected {expected}")]
    OutOfOrderSequence { producer_id: i64, expected: i32, got: i32 },
}

/// Producer state of one partition.
#[derive(Debug, Clone, Default)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

/// The sequence after `seq`, wrapping at i32::MAX to 0 as Kafka does.
fn next_sequence(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry { epoch: 0, batches: VecDeque::new(), last_timestamp: -1 }
    }
}

impl ProducerStateTable {
    /// Decides what to do with `batch`; changes nothing.
    pub fn check(&self, batch: &ProducerBatch) -> Result<SequenceCheck, SequenceError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        if batch.producer_epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                current: entry.epoch,
            });
        }
        if batch.producer_epoch > entry.epoch {
            if batch.first_sequence != 0 {
                return Err(SequenceError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected: 0,
                    got: batch.first_sequence,
                });
            }
            return Ok(SequenceCheck::Append);
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == batch.first_sequence && b.last_sequence == batch.last_sequence)
        {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        match entry.batches.back() {
            Some(last) if batch.first_sequence != next_sequence(last.last_sequence) => {
                Err(SequenceError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected: next_sequence(last.last_sequence),
                    got: batch.first_sequence,
                })
            }
            _ => Ok(SequenceCheck::Append),
        }
    }

    /// Records an appended batch (also used when rebuilding the table from the log).
    pub fn record(&mut self, batch: &ProducerBatch, first_offset: i64, last_offset: i64) {
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.producer_epoch != entry.epoch {
            entry.epoch = batch.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = batch.max_timestamp;
        entry.batches.push_back(CachedBatch {
            first_sequence: batch.first_sequence,
            last_sequence: batch.last_sequence,
            first_offset,
            last_offset,
        });
        while entry.batches.len() > MAX_CACHED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Whether a marker in `epoch` may be written for `producer_id`: not from an epoch older
    /// than the producer's (a fenced zombie's coordinator request).
    pub fn check_epoch(&self, producer_id: i64, epoch: i16) -> Result<(), SequenceError> {
        match self.producers.get(&producer_id) {
            Some(entry) if epoch < entry.epoch => {
                Err(SequenceError::InvalidProducerEpoch { producer_id, epoch, current: entry.epoch })
            }
            _ => Ok(()),
        }
    }

    /// A marker in `epoch` was written: a newer epoch replaces the producer's (its batches
    /// start again at sequence 0).
    pub fn observe_epoch(&mut self, producer_id: i64, epoch: i16) {
        let entry = self.producers.entry(producer_id).or_insert_with(|| ProducerEntry { epoch, ..Default::default() });
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
    }

    /// Every producer with state here, by producer id.
    pub fn snapshot(&self) -> Vec<ProducerSnapshot> {
        let mut all: Vec<ProducerSnapshot> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ProducerSnapshot {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_sequence),
                last_timestamp: e.last_timestamp,
            })
            .collect();
        all.sort_by_key(|p| p.producer_id);
        all
    }

    /// Number of producers with state here.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, first: i32, last: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: 7,
            producer_epoch: epoch,
            first_sequence: first,
            last_sequence: last,
            max_timestamp: 0,
        }
    }

    #[test]
    fn a_retried_batch_is_a_duplicate_with_its_original_offsets() {
        let mut table = ProducerStateTable::default();
        table.record(&batch(0, 0, 9), 100, 109);
        table.record(&batch(0, 10, 19), 110, 119);
        match table.check(&batch(0, 0, 9)) {
            Ok(SequenceCheck::Duplicate(b)) => assert_eq!((b.first_offset, b.last_offset), (100, 109)),
            other => panic!("expected duplicate, got {other:?}"),
        }
    }

    #[test]
    fn only_the_next_sequence_is_appended() {
        let mut table = ProducerStateTable::default();
        table.record(&batch(0, 0, 9), 0, 9);
        assert_eq!(table.check(&batch(0, 10, 12)), Ok(SequenceCheck::Append));
        assert!(matches!(
            table.check(&batch(0, 12, 15)),
            Err(SequenceError::OutOfOrderSequence { expected: 10, got: 12, .. })
        ));
    }

    #[test]
    fn an_old_epoch_is_fenced_and_a_new_epoch_restarts_at_zero() {
        let mut table = ProducerStateTable::default();
        table.record(&batch(2, 0, 4), 0, 4);
        assert!(matches!(table.check(&batch(1, 5, 6)), Err(SequenceError::InvalidProducerEpoch { .. })));
        assert!(matches!(table.check(&batch(3, 5, 6)), Err(SequenceError::OutOfOrderSequence { .. })));
        assert_eq!(table.check(&batch(3, 0, 1)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut table = ProducerStateTable::default();
        for i in 0..7 {
            table.record(&batch(0, i * 10, i * 10 + 9), i64::from(i) * 10, i64::from(i) * 10 + 9);
        }
        assert!(matches!(table.check(&batch(0, 20, 29)), Ok(SequenceCheck::Duplicate(_))));
        // The first two fell out of the cache: a retry of them is out of order, never re-appended.
        assert!(table.check(&batch(0, 0, 9)).is_err());
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut table = ProducerStateTable::default();
        table.record(&batch(0, i32::MAX - 1, i32::MAX), 0, 1);
        assert_eq!(table.check(&batch(0, 0, 3)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn a_marker_in_a_newer_epoch_fences_the_old_one() {
        let mut table = ProducerStateTable::default();
        table.record(&batch(2, 0, 4), 0, 4);
        assert!(table.check_epoch(7, 1).is_err());
        assert_eq!(table.check_epoch(7, 3), Ok(()));
        table.observe_epoch(7, 3);
        assert!(matches!(table.check(&batch(2, 5, 6)), Err(SequenceError::InvalidProducerEpoch { current: 3, .. })));
        assert_eq!(table.check(&batch(3, 0, 0)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn an_unknown_producer_may_start_anywhere() {
        let table = ProducerStateTable::default();
        assert_eq!(table.check(&batch(0, 500, 510)), Ok(SequenceCheck::Append));
    }
}
