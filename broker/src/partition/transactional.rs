//! The replica's side of transactions: the producer and transaction state rebuilt from the
//! log (open, truncation) and kept up by every append, the coordinator's markers written on
//! the leader, and what a read_committed fetch may see (up to the last stable offset, with the
//! aborted transactions it overlaps). The rules are [`super::transactions`]'s.

use bytes::Bytes;

use super::producer_state::ProducerStateTable;
use super::transactions::{parse_marker, AbortedTxn, Marker, TransactionTable};
use super::{producer_batch, Partition, PartitionError, State};
use crate::log::{self, BatchHeader, Log, LogError, TimestampType};

/// How much of a partition a fetch may see (Kafka's isolation levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Up to the high watermark, aborted records included.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, told which transactions were aborted.
    ReadCommitted,
}

impl Isolation {
    /// The Fetch and ListOffsets requests' `isolation_level`.
    pub fn from_level(level: i8) -> Isolation {
        if level == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// Folds one batch into the producer and transaction state; `batch` is the whole batch (read
/// only for a control batch, whose marker is in its record).
pub(super) fn observe_batch(
    producers: &mut ProducerStateTable,
    txns: &mut TransactionTable,
    h: &BatchHeader,
    batch: impl FnOnce() -> Option<Bytes>,
) {
    if h.producer_id < 0 {
        return;
    }
    if h.is_control() {
        let marker = batch().map(|b| parse_marker(&b));
        match marker {
            Some(Ok(marker)) => {
                producers.observe_epoch(h.producer_id, h.producer_epoch);
                txns.on_marker(h.producer_id, marker, h.base_offset);
            }
            Some(Err(e)) => tracing::warn!(offset = h.base_offset, error = %e, "a control batch that is no marker"),
            None => tracing::warn!(offset = h.base_offset, "a control batch could not be read"),
        }
        return;
    }
    producers.record(&producer_batch(h), h.base_offset, h.last_offset());
    if h.is_transactional() {
        txns.on_data(h.producer_id, h.base_offset);
    }
}

/// The producer and transaction state of a log, from its batches' headers (and the records
/// of its control batches).
pub(super) fn rebuild(log: &Log) -> Result<(ProducerStateTable, TransactionTable), LogError> {
    let mut producers = ProducerStateTable::default();
    let mut txns = TransactionTable::default();
    let end = log.log_end_offset();
    log.scan_headers(log.log_start_offset(), |h| {
        observe_batch(&mut producers, &mut txns, h, || {
            let slice = log.read(h.base_offset, 1, end, true).ok().flatten()?;
            slice.read().ok()
        });
    })?;
    Ok((producers, txns))
}

/// Folds batches a follower appended (their bytes at hand) into the state.
pub(super) fn observe_replicated(state: &mut State, records: &[u8]) {
    for item in log::batches(records) {
        let Ok((h, range)) = item else { break };
        state.epochs.assign(h.partition_leader_epoch, h.base_offset);
        let batch = || records.get(range.clone()).map(Bytes::copy_from_slice);
        observe_batch(&mut state.producers, &mut state.txns, &h, batch);
    }
}

/// One producer of a partition, as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer: super::producer_state::ProducerSnapshot,
    /// The newest coordinator epoch that wrote a marker for it here (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction here.
    pub open_since: Option<i64>,
}

/// What a read_committed fetch adds to a read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stability {
    pub last_stable_offset: i64,
    /// The aborted transactions the fetched range overlaps (read_committed only).
    pub aborted: Vec<AbortedTxn>,
}

/// The last stable offset, and for read_committed the aborted transactions from `from`.
pub(super) fn stability(state: &mut State, high_watermark: i64, from: i64, isolation: Isolation) -> Stability {
    let last_stable_offset = state.txns.last_stable_offset(high_watermark);
    let aborted = match isolation {
        Isolation::ReadCommitted => state.txns.aborted_between(from, last_stable_offset),
        Isolation::ReadUncommitted => Vec::new(),
    };
    Stability { last_stable_offset, aborted }
}

impl Partition {
    /// WriteTxnMarkers on the leader: ends `producer_id`'s transaction here with `marker`,
    /// written as a control batch in `producer_epoch`. Returns the marker's offset.
    pub fn write_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let batch = super::transactions::encode_marker(producer_id, producer_epoch, marker, now_ms);
        let checked = log::CheckedBatches::check(&batch).map_err(|e| self.log_error(e))?;
        let mut state = self.state.lock();
        let leadership = self.leadership.read().clone();
        if !leadership.is_leader {
            return Err(PartitionError::NotLeader { topic: self.topic.to_string(), partition: self.index });
        }
        state.producers.check_epoch(producer_id, producer_epoch).map_err(|source| PartitionError::Sequence {
            topic: self.topic.to_string(),
            partition: self.index,
            source,
        })?;
        state.txns.check_marker(producer_id, marker).map_err(|source| PartitionError::MarkerFenced {
            topic: self.topic.to_string(),
            partition: self.index,
            source,
        })?;
        let info = state
            .log
            .append_checked(checked, leadership.leader_epoch, TimestampType::CreateTime, now_ms)
            .map_err(|e| self.log_error(e))?;
        state.producers.observe_epoch(producer_id, producer_epoch);
        state.txns.on_marker(producer_id, marker, info.first_offset);
        self.log_end.send_replace(state.log.log_end_offset());
        self.advance_high_watermark(&state, &leadership);
        Ok(info.first_offset)
    }

    /// The last stable offset: below it every transaction is decided.
    pub fn last_stable_offset(&self) -> i64 {
        let high_watermark = self.high_watermark();
        self.state.lock().txns.last_stable_offset(high_watermark)
    }

    /// The producers with state on this replica, with their open transactions
    /// (DescribeProducers, `kafka-transactions.sh describe-producers`).
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        let state = self.state.lock();
        state
            .producers
            .snapshot()
            .into_iter()
            .map(|p| ActiveProducer {
                coordinator_epoch: state.txns.coordinator_epoch(p.producer_id),
                open_since: state.txns.open_since(p.producer_id),
                producer: p,
            })
            .collect()
    }

    /// Producers with a transaction open on this replica.
    pub fn open_transactions(&self) -> usize {
        self.state.lock().txns.open_transactions()
    }
}
