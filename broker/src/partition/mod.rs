//! One partition replica on this broker, and the manager of all of them.
//!
//! - [`Partition`] (this file): the log plus idempotent-producer state under one lock, the high
//!   watermark published on a `watch` channel (waiting fetches are woken by the change that
//!   brings them data), produce-side validation of incoming batches, client reads.
//! - [`replication`]: the replica's part in replication — leadership changes, serving
//!   followers' fetches (divergence by leader epoch, follower tracking, the high watermark),
//!   a follower's appends and truncation, ISR change proposals, waiting for acks=all.
//! - [`followers`]: the leader's view of its followers and the pure ISR / high-watermark rules.
//! - [`leader_epochs`]: the leader-epoch cache (`leader-epoch-checkpoint`).
//! - [`producer_state`]: the pure de-duplication rules for idempotent producers.
//! - [`transactions`]: the transactions open and aborted here, the last stable offset, and
//!   the transaction markers' control batches; [`transactional`]: the replica's side of them
//!   (state rebuilt from the log, markers written, read_committed reads).
//! - [`manager`]: [`ReplicaManager`], the partitions of every topic on this node, creation,
//!   deletion and the retention task.
//! - [`error`]: the partition error type, [`PartitionError`].
//! - [`traffic`], [`gauges`]: what `/metrics` reads of a replica without taking its lock.
//! - `append_tests`, `replication_tests`: what a leader refuses to append; replication on
//!   real logs.

pub mod error;
pub mod followers;
pub mod gauges;
pub mod leader_epochs;
pub mod manager;
pub mod producer_state;
pub mod replication;
pub mod traffic;
pub mod transactional;
pub mod transactions;

#[cfg(test)]
mod append_tests;
#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod transaction_tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use uuid::Uuid;

use crate::log::{self, BatchHeader, FileSlice, Log, LogError, TimestampType};
use crate::metadata::topic_config::TopicConfig;

pub use error::PartitionError;
use followers::FollowerState;
use leader_epochs::LeaderEpochCache;
pub use manager::ReplicaManager;
use producer_state::{ProducerBatch, ProducerStateTable, SequenceCheck};

/// Name of the file holding the topic id of a partition directory (as in Kafka).
const PARTITION_METADATA: &str = "partition.metadata";
/// This replica's last checkpointed high watermark (a lower bound of what is committed).
const HIGH_WATERMARK_FILE: &str = "high-watermark-checkpoint";

/// The outcome of a produce to this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker's timestamp for LogAppendTime topics, -1 otherwise.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// True when the batch was a retry of one already appended.
    pub duplicate: bool,
}

/// What a fetch gets from this partition.
#[derive(Debug, Clone)]
pub struct FetchSlice {
    /// Whole record batches in a segment file; None when there is nothing at the offset yet.
    pub slice: Option<FileSlice>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The last stable offset, and for read_committed the aborted transactions from the
    /// fetch offset on.
    pub stability: transactional::Stability,
}

/// What a read found, with the records in memory.
#[derive(Debug, Clone)]
pub struct FetchRead {
    /// Whole record batches; None when there is nothing at the offset yet.
    pub records: Option<Bytes>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

struct State {
    log: Log,
    producers: ProducerStateTable,
    /// Transactions open and aborted here ([`transactions`]).
    txns: transactions::TransactionTable,
    epochs: LeaderEpochCache,
    /// The leader's view of each follower (empty unless this replica leads).
    followers: HashMap<i32, FollowerState>,
    /// The log end offset when this replica became leader: where its leader epoch starts.
    epoch_start_offset: i64,
    /// The high watermark last written to the checkpoint file.
    checkpointed_high_watermark: i64,
}

/// This replica's role in its partition, from the metadata image (the publisher keeps it
/// current).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// Whether this broker leads the partition (and may serve and append).
    pub is_leader: bool,
    pub leader_epoch: i32,
    /// The leading broker, -1 when none.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
    /// Replicas a reassignment is adding (their fetches may be throttled).
    pub adding: Vec<i32>,
    /// Replicas on brokers the metadata shows fenced: they may not rejoin the ISR.
    pub fenced: Vec<i32>,
}

impl Leadership {
    /// The only replica, leading (single-broker setups and tests).
    pub fn sole_leader(broker: i32, leader_epoch: i32) -> Leadership {
        Leadership {
            is_leader: true,
            leader_epoch,
            leader: broker,
            replicas: vec![broker],
            isr: vec![broker],
            partition_epoch: 0,
            adding: vec![],
            fenced: vec![],
        }
    }

    /// Not serving: the state of a replica before the metadata says what it is.
    pub fn none() -> Leadership {
        Leadership {
            is_leader: false,
            leader_epoch: -1,
            leader: -1,
            replicas: vec![],
            isr: vec![],
            partition_epoch: -1,
            adding: vec![],
            fenced: vec![],
        }
    }
}

/// A partition replica on this broker.
pub struct Partition {
    pub topic: Arc<str>,
    pub index: i32,
    pub topic_id: Uuid,
    pub dir: PathBuf,
    /// This broker's id.
    pub broker: i32,
    /// Read under `state`'s lock where both are needed (lock order: state, then leadership).
    leadership: RwLock<Leadership>,
    state: Mutex<State>,
    config: RwLock<Arc<TopicConfig>>,
    /// The high watermark; every change wakes the fetches waiting on this partition (and,
    /// with a leadership change, acks=all produces waiting for replication).
    high_watermark: watch::Sender<i64>,
    /// The log end offset; every append wakes the followers' fetches waiting on it.
    log_end: watch::Sender<i64>,
    /// Serialises fsyncs for acks=all with `flush_on_acks_all`; see [`Partition::flush_through`].
    flush_lock: tokio::sync::Mutex<i64>,
    /// Bytes and records clients wrote and read here, for the per-topic metrics.
    pub traffic: traffic::Traffic,
    /// The log gauges of the last scrape that found the lock free ([`Partition::log_gauges`]).
    last_gauges: gauges::LastGauges,
    /// Whether clients' transactional batches are appended (the transaction coordinator turns
    /// this on; refused until then).
    transactions: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition({}-{})", self.topic, self.index)
    }
}

impl Partition {
    /// Opens (recovering) or creates the replica in `dir` and rebuilds its producer state
    /// from the batch headers of its log.
    pub fn open(
        dir: &Path,
        topic: &str,
        index: i32,
        topic_id: Uuid,
        broker: i32,
        config: TopicConfig,
    ) -> Result<Partition, PartitionError> {
        let io = |op, source| PartitionError::Io {
            topic: topic.into(),
            partition: index,
            op,
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| io("create partition directory", e))?;
        write_partition_metadata(dir, topic_id).map_err(|e| io("write partition.metadata", e))?;
        let log_err = |source| PartitionError::Log { topic: topic.into(), partition: index, source };
        let log = Log::open(dir, config.log.clone()).map_err(log_err)?;
        let (producers, txns) = transactional::rebuild(&log).map_err(log_err)?;
        let leo = log.log_end_offset();
        let epochs = LeaderEpochCache::open(dir, leo, || match log.epoch_starts() {
            Ok(starts) => starts,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "could not rebuild the leader-epoch cache from the log");
                Vec::new()
            }
        });
        // What was committed is at least the checkpoint; never more than this replica has.
        let hw = read_high_watermark(dir).unwrap_or(0).clamp(0, leo).max(log.log_start_offset().min(leo));
        Ok(Partition {
            topic: Arc::from(topic),
            index,
            topic_id,
            dir: dir.to_path_buf(),
            broker,
            leadership: RwLock::new(Leadership::none()),
            state: Mutex::new(State {
                log,
                producers,
                txns,
                epochs,
                followers: HashMap::new(),
                epoch_start_offset: leo,
                checkpointed_high_watermark: hw,
            }),
            config: RwLock::new(Arc::new(config)),
            high_watermark: watch::Sender::new(hw),
            log_end: watch::Sender::new(leo),
            flush_lock: tokio::sync::Mutex::new(-1),
            traffic: traffic::Traffic::default(),
            last_gauges: gauges::LastGauges::default(),
            transactions: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The topic id recorded in a partition directory, if any.
    pub fn recorded_topic_id(dir: &Path) -> Option<Uuid> {
        let text = std::fs::read_to_string(dir.join(PARTITION_METADATA)).ok()?;
        text.lines().find_map(|l| l.strip_prefix("topic_id: ")).and_then(|id| Uuid::parse_str(id.trim()).ok())
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leadership.read().leader_epoch
    }

    pub fn is_leader(&self) -> bool {
        self.leadership.read().is_leader
    }

    /// This replica's role as last applied from the metadata.
    pub fn leadership(&self) -> Leadership {
        self.leadership.read().clone()
    }

    pub fn config(&self) -> Arc<TopicConfig> {
        self.config.read().clone()
    }

    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// A receiver that sees every change of the high watermark after this call.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.state.lock().log.log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.state.lock().log.log_end_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.state.lock().log.size_bytes()
    }

    /// Whether clients' transactional batches are appended here.
    pub fn accepts_transactions(&self) -> bool {
        self.transactions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Turns the appending of transactional batches on or off (the transaction coordinator's
    /// switch).
    pub fn accept_transactions(&self, on: bool) {
        self.transactions.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The log's positions, size and largest follower lag for `/metrics`: read now if the
    /// partition's lock is free, else those of the last read (see [`gauges`]).
    pub fn log_gauges(&self) -> gauges::LogGauges {
        let high_watermark = self.high_watermark();
        let Some(mut state) = self.state.try_lock() else { return self.last_gauges.load() };
        let leo = state.log.log_end_offset();
        let max_follower_lag = state
            .followers
            .values()
            .map(|f| if f.log_end_offset < 0 { leo } else { leo - f.log_end_offset })
            .max()
            .unwrap_or(0);
        let now = gauges::LogGauges {
            log_start_offset: state.log.log_start_offset(),
            log_end_offset: leo,
            size_bytes: state.log.size_bytes(),
            max_follower_lag,
            last_stable_offset_lag: high_watermark - state.txns.last_stable_offset(high_watermark),
            open_transactions: i64::try_from(state.txns.open_transactions()).unwrap_or(i64::MAX),
        };
        drop(state);
        self.last_gauges.store(now);
        now
    }

    /// Every log error of this partition passes here: a fatal one ends the process.
    fn log_error(&self, source: LogError) -> PartitionError {
        crate::storage_failure::halt_if_fatal(&self.topic, self.index, &source);
        PartitionError::Log { topic: self.topic.to_string(), partition: self.index, source }
    }

    /// Validates and appends the records of a produce request: exactly one magic-2 batch with a
    /// good CRC (checked once, by [`log::CheckedBatches`]), within max.message.bytes; idempotent batches are checked against the producer
    /// state and retries answered with their original offsets.
    pub fn append(&self, records: &Bytes, acks: i16, now_ms: i64) -> Result<AppendOutcome, PartitionError> {
        self.append_checked_by(records, acks, now_ms, true)
    }

    /// Appends a batch a coordinator wrote for a producer's transaction (TxnOffsetCommit's
    /// offsets): it opens the transaction here like a client's batch, but carries no
    /// sequence numbers to check (the coordinator is its only writer).
    pub fn append_for_coordinator(&self, records: &Bytes, now_ms: i64) -> Result<AppendOutcome, PartitionError> {
        self.append_checked_by(records, -1, now_ms, false)
    }

    fn append_checked_by(
        &self,
        records: &Bytes,
        acks: i16,
        now_ms: i64,
        check_sequences: bool,
    ) -> Result<AppendOutcome, PartitionError> {
        let config = self.config();
        let header = self.validate_batch(records, &config, now_ms)?;
        // The CRC, once; the log writes the request's batch as it is, a stamped copy of its
        // header in front.
        let checked = log::CheckedBatches::check(records).map_err(|e| match e {
            LogError::InvalidBatch(source) => {
                PartitionError::CorruptMessage { topic: self.topic.to_string(), partition: self.index, source }
            }
            e => self.log_error(e),
        })?;
        let timestamp_type =
            if config.log_append_time { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
        let mut state = self.state.lock();
        let leadership = self.leadership.read().clone();
        if !leadership.is_leader {
            return Err(PartitionError::NotLeader { topic: self.topic.to_string(), partition: self.index });
        }
        let isr = i32::try_from(leadership.isr.len()).unwrap_or(i32::MAX);
        if acks == -1 && isr < config.min_insync_replicas {
            return Err(PartitionError::NotEnoughReplicas {
                topic: self.topic.to_string(),
                partition: self.index,
                isr,
                min: config.min_insync_replicas,
            });
        }
        let idempotent = header.producer_id >= 0 && check_sequences;
        let producer = producer_batch(&header);
        if idempotent {
            match state.producers.check(&producer) {
                Ok(SequenceCheck::Append) => {}
                Ok(SequenceCheck::Duplicate(original)) => {
                    return Ok(AppendOutcome {
                        base_offset: original.first_offset,
                        last_offset: original.last_offset,
                        log_append_time: -1,
                        log_start_offset: state.log.log_start_offset(),
                        duplicate: true,
                    });
                }
                Err(source) => {
                    return Err(PartitionError::Sequence {
                        topic: self.topic.to_string(),
                        partition: self.index,
                        source,
                    })
                }
            }
        }
        let info = state
            .log
            .append_checked(checked, leadership.leader_epoch, timestamp_type, now_ms)
            .map_err(|e| self.log_error(e))?;
        if idempotent {
            state.producers.record(&producer, info.first_offset, info.last_offset);
        }
        if header.is_transactional() {
            state.txns.on_data(header.producer_id, info.first_offset);
        }
        if let Err(e) = state.log.flush_if_due(now_ms).map_err(|e| self.log_error(e)) {
            tracing::error!(error = %e, "periodic flush failed");
        }
        let outcome = AppendOutcome {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_append_time: info.log_append_time,
            log_start_offset: state.log.log_start_offset(),
            duplicate: false,
        };
        self.log_end.send_replace(state.log.log_end_offset());
        // Alone in the ISR, the leader commits what it appends at once.
        self.advance_high_watermark(&state, &leadership);
        Ok(outcome)
    }

    fn validate_batch(
        &self,
        records: &Bytes,
        config: &TopicConfig,
        now_ms: i64,
    ) -> Result<BatchHeader, PartitionError> {
        let invalid = |reason: String| PartitionError::InvalidRecord {
            topic: self.topic.to_string(),
            partition: self.index,
            reason,
        };
        if records.len() < log::LOG_OVERHEAD + 5 {
            return Err(invalid(format!("{} bytes of records is too short for a record batch", records.len())));
        }
        let magic = records[log::LOG_OVERHEAD + 4] as i8;
        if magic != 2 {
            return Err(PartitionError::UnsupportedMessageFormat {
                topic: self.topic.to_string(),
                partition: self.index,
                magic,
            });
        }
        let corrupt =
            |source| PartitionError::CorruptMessage { topic: self.topic.to_string(), partition: self.index, source };
        let header = BatchHeader::parse(records).map_err(corrupt)?;
        if header.total_size() != records.len() {
            return Err(invalid(format!(
                "a produce request must carry exactly one record batch ({} bytes of records, batch of {})",
                records.len(),
                header.total_size()
            )));
        }
        if header.total_size() > usize::try_from(config.max_message_bytes).unwrap_or(0) {
            return Err(PartitionError::MessageTooLarge {
                topic: self.topic.to_string(),
                partition: self.index,
                size: header.total_size(),
                max: config.max_message_bytes,
            });
        }
        if header.is_control() {
            return Err(invalid("clients may not produce control batches".into()));
        }
        if header.is_transactional() && !self.accepts_transactions() {
            // Until the transaction coordinator exists, a transactional batch would open a
            // transaction no marker ever ends, holding the last stable offset back forever.
            return Err(invalid("transactions are not supported yet".into()));
        }
        if header.is_transactional() && header.producer_id < 0 {
            return Err(invalid("a transactional batch without a producer id".into()));
        }
        if header.record_count != header.last_offset_delta + 1 {
            return Err(invalid(format!(
                "record count {} does not match last offset delta {}",
                header.record_count, header.last_offset_delta
            )));
        }
        if !config.log_append_time && header.max_timestamp.saturating_sub(now_ms) > config.timestamp_after_max_ms {
            return Err(PartitionError::InvalidTimestamp {
                topic: self.topic.to_string(),
                partition: self.index,
                timestamp: header.max_timestamp,
                max_ms: config.timestamp_after_max_ms,
            });
        }
        Ok(header)
    }

    /// Makes everything appended so far through `offset` durable (group commit: one fsync
    /// covers every append that happened before it started).
    pub async fn flush_through(self: &Arc<Self>, offset: i64) -> Result<(), PartitionError> {
        let mut flushed = self.flush_lock.lock().await;
        if *flushed >= offset {
            return Ok(());
        }
        let this = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || {
            let mut state = this.state.lock();
            state.log.flush().map(|()| state.log.log_end_offset() - 1)
        })
        .await;
        match result {
            Ok(Ok(through)) => {
                *flushed = through;
                Ok(())
            }
            Ok(Err(e)) => Err(self.log_error(e)),
            Err(join) => Err(PartitionError::Io {
                topic: self.topic.to_string(),
                partition: self.index,
                op: "fsync task",
                path: self.dir.clone(),
                source: std::io::Error::other(join),
            }),
        }
    }

    /// Reads whole batches at `offset`, up to the high watermark.
    pub fn read(&self, offset: i64, max_bytes: usize, min_one_batch: bool) -> Result<FetchRead, PartitionError> {
        self.read_up_to(offset, max_bytes, min_one_batch, None)
    }

    /// Reads whole batches at `offset`, up to `upper` (default: the high watermark). A
    /// leader reads to its log end for followers and for its own coordinator's state.
    pub fn read_up_to(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: Option<i64>,
    ) -> Result<FetchRead, PartitionError> {
        let found = self.slice_up_to(offset, max_bytes, min_one_batch, upper, transactional::Isolation::default())?;
        let records = match found.slice {
            Some(slice) => Some(slice.read().map_err(|source| PartitionError::Io {
                topic: self.topic.to_string(),
                partition: self.index,
                op: "read segment",
                path: self.dir.clone(),
                source,
            })?),
            None => None,
        };
        Ok(FetchRead { records, high_watermark: found.high_watermark, log_start_offset: found.log_start_offset })
    }

    /// Where the whole batches at `offset` lie, up to the high watermark, without reading
    /// them (a consumer's fetch sends them from the file).
    /// With read_committed, up to the last stable offset instead.
    pub fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: transactional::Isolation,
    ) -> Result<FetchSlice, PartitionError> {
        self.slice_up_to(offset, max_bytes, min_one_batch, None, isolation)
    }

    fn slice_up_to(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: Option<i64>,
        isolation: transactional::Isolation,
    ) -> Result<FetchSlice, PartitionError> {
        let high_watermark = self.high_watermark();
        let mut state = self.state.lock();
        let stability = transactional::stability(&mut state, high_watermark, offset, isolation);
        let upper = match isolation {
            transactional::Isolation::ReadCommitted => stability.last_stable_offset,
            transactional::Isolation::ReadUncommitted => upper.unwrap_or(high_watermark),
        };
        let slice = state.log.read(offset, max_bytes, upper, min_one_batch).map_err(|e| self.log_error(e))?;
        Ok(FetchSlice { slice, high_watermark, log_start_offset: state.log.log_start_offset(), stability })
    }

    /// ListOffsets by timestamp: the first record at or after `timestamp` below the high
    /// watermark, as (offset, timestamp).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        let hw = self.high_watermark();
        let found = self.state.lock().log.offset_for_timestamp(timestamp).map_err(|e| self.log_error(e))?;
        Ok(found.filter(|(offset, _)| *offset < hw))
    }

    /// ListOffsets MAX_TIMESTAMP.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.state.lock().log.max_timestamp_and_offset()
    }

    /// DeleteRecords: moves the log start offset up to `offset` (-1 means the high watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, PartitionError> {
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            let log_start_offset = self.log_start_offset();
            return Err(self.log_error(LogError::OffsetOutOfRange {
                offset: target,
                log_start_offset,
                log_end_offset: hw,
            }));
        }
        let mut state = self.state.lock();
        let log_start_offset = state.log.delete_records_before(target).map_err(|e| self.log_error(e))?;
        state.txns.trim_before(log_start_offset);
        Ok(log_start_offset)
    }

    /// Applies a changed topic config to this partition and its log.
    pub fn update_config(&self, config: TopicConfig) {
        self.state.lock().log.update_config(config.log.clone());
        *self.config.write() = Arc::new(config);
    }

    /// Deletes expired segments; returns how many.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize, PartitionError> {
        let mut state = self.state.lock();
        let deleted = state.log.enforce_retention(now_ms).map_err(|e| self.log_error(e))?;
        let log_start_offset = state.log.log_start_offset();
        state.txns.trim_before(log_start_offset);
        if let Err(e) = state.log.flush_if_due(now_ms).map_err(|e| self.log_error(e)) {
            tracing::error!(error = %e, "periodic flush failed");
        }
        Ok(deleted)
    }

    /// One log-cleaner pass if the topic is compacted; returns what it did.
    pub fn compact(&self, now_ms: i64) -> Result<Option<crate::log::CompactionStats>, PartitionError> {
        let config = self.config();
        if !config.compact {
            return Ok(None);
        }
        let stats = self.state.lock().log.compact(now_ms, &config.compaction, false).map_err(|e| self.log_error(e))?;
        Ok(Some(stats))
    }

    /// Flushes the log and advances its recovery point (clean shutdown); checkpoints the
    /// high watermark.
    pub fn flush(&self) -> Result<(), PartitionError> {
        self.checkpoint_high_watermark();
        self.state.lock().log.flush().map_err(|e| self.log_error(e))
    }

    /// fsyncs the segments closed by rolls since the last call, without holding the
    /// partition's lock meanwhile, and moves the recovery point past them.
    pub fn flush_rolled_segments(&self) -> Result<(), PartitionError> {
        let rolled = self.state.lock().log.rolled_unflushed().map_err(|e| self.log_error(e))?;
        let Some(rolled) = rolled else {
            return Ok(());
        };
        rolled.sync().map_err(|e| self.log_error(e))?;
        self.state.lock().log.mark_flushed(&rolled).map_err(|e| self.log_error(e))?;
        Ok(())
    }

    /// Writes the high watermark to its checkpoint file if it moved. Not fsynced: a stale
    /// checkpoint is only a lower bound, which is all a restart assumes.
    pub fn checkpoint_high_watermark(&self) {
        let hw = self.high_watermark();
        let mut state = self.state.lock();
        if state.checkpointed_high_watermark == hw {
            return;
        }
        let path = self.dir.join(HIGH_WATERMARK_FILE);
        let tmp = path.with_extension("tmp");
        match std::fs::write(&tmp, format!("{hw}\n")).and_then(|()| std::fs::rename(&tmp, &path)) {
            Ok(()) => state.checkpointed_high_watermark = hw,
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "could not checkpoint the high watermark"),
        }
    }
}

fn producer_batch(h: &BatchHeader) -> ProducerBatch {
    ProducerBatch {
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        first_sequence: h.base_sequence,
        last_sequence: h.last_sequence(),
        max_timestamp: h.max_timestamp,
    }
}

fn read_high_watermark(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join(HIGH_WATERMARK_FILE)).ok()?.trim().parse().ok()
}

fn write_partition_metadata(dir: &Path, topic_id: Uuid) -> std::io::Result<()> {
    let path = dir.join(PARTITION_METADATA);
    let text = format!("version: 0\ntopic_id: {topic_id}\n");
    match std::fs::read_to_string(&path) {
        Ok(existing) if existing == text => Ok(()),
        _ => crate::metadata::atomic_file::write(&path, text.as_bytes()),
    }
}
