//! The transaction coordinator: the transactional ids of the `__transaction_state`
//! partitions this broker leads, their requests decided by [`super::state`], every decision
//! written to the partition and replicated to its ISR before it is applied or answered, and
//! the markers of decided transactions sent to the partitions' leaders until all are written.
//!
//! One request per transactional id at a time: an id with a write in flight, or with markers
//! being written, answers CONCURRENT_TRANSACTIONS (the clients retry). A new leader of a
//! `__transaction_state` partition loads it ([`super::load`]) and finishes the transactions
//! left decided (PrepareCommit / PrepareAbort) by the old one: a commit decided is committed
//! everywhere, an abort aborted, never half.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::records::{encode_key, encode_value, partition_for};
use super::state::{self, EndDecision, InitDecision, TxnError, TxnMetadata, TxnState};
use super::TRANSACTION_STATE_TOPIC;
use crate::group::batch;
use crate::partition::ReplicaManager;
use crate::time::now_ms;

/// Settings (Kafka's broker config names).
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// transaction.state.log.num.partitions
    pub state_partitions: i32,
    /// transaction.max.timeout.ms
    pub max_timeout_ms: i32,
    /// How long a decision waits for the `__transaction_state` ISR.
    pub write_timeout: Duration,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig { state_partitions: 50, max_timeout_ms: 900_000, write_timeout: Duration::from_secs(30) }
    }
}

/// Why the coordinator could not serve a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// This broker does not lead the id's `__transaction_state` partition (NOT_COORDINATOR).
    #[error("not the coordinator of transactional id {0}")]
    NotCoordinator(String),
    /// The decision could not be made durable (COORDINATOR_NOT_AVAILABLE: the client retries).
    #[error("writing to __transaction_state failed: {0}")]
    NotAvailable(String),
    /// InitProducerId needs a producer id allocated first ([`TransactionCoordinator::needs_producer_id`]).
    #[error("a producer id must be allocated first")]
    NeedsProducerId,
    /// No producer has used the id (TRANSACTIONAL_ID_NOT_FOUND).
    #[error("transactional id {0} is not known to its coordinator")]
    UnknownTransactionalId(String),
}

/// Where a marker goes and how it is written: the partitions' leaders, this broker's own
/// replicas directly, other brokers over the internal port.
#[tonic::async_trait]
pub trait MarkerSink: Send + Sync + 'static {
    /// Writes `commit` (else abort) markers of `producer_id` in `producer_epoch` to
    /// `partitions`; returns those that must be tried again (leader moved, not replicated).
    async fn write(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        partitions: &BTreeSet<(String, i32)>,
    ) -> BTreeSet<(String, i32)>;
}

#[derive(Debug)]
struct Entry {
    meta: TxnMetadata,
    /// A write (or the markers) in flight: other requests for the id wait their turn.
    busy: bool,
    /// Whether `meta` is in `__transaction_state`: false for the placeholder of a new id
    /// whose first write is in flight, which describe and list do not show.
    durable: bool,
}

/// The transaction coordinator of this broker.
pub struct TransactionCoordinator {
    config: TxnConfig,
    replicas: Arc<ReplicaManager>,
    markers: Arc<dyn MarkerSink>,
    ids: Mutex<HashMap<String, Entry>>,
    /// Loaded `__transaction_state` partitions → the coordinator epoch (the partition's
    /// leader epoch when it was loaded).
    loaded: Mutex<BTreeMap<i32, i32>>,
}

impl std::fmt::Debug for TransactionCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionCoordinator").field("loaded", &*self.loaded.lock()).finish()
    }
}

impl TransactionCoordinator {
    pub fn new(config: TxnConfig, replicas: Arc<ReplicaManager>, markers: Arc<dyn MarkerSink>) -> Self {
        TransactionCoordinator {
            config,
            replicas,
            markers,
            ids: Mutex::new(HashMap::new()),
            loaded: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `transactional_id`.
    pub fn partition_of(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.config.state_partitions)
    }

    fn coordinator_epoch(&self, transactional_id: &str) -> Result<i32, CoordinatorError> {
        let p = self.partition_of(transactional_id);
        self.loaded.lock().get(&p).copied().ok_or_else(|| CoordinatorError::NotCoordinator(transactional_id.into()))
    }

    /// Whether InitProducerId for `transactional_id` needs a new producer id.
    pub fn needs_producer_id(&self, transactional_id: &str) -> bool {
        state::needs_producer_id(self.ids.lock().get(transactional_id).map(|e| &e.meta))
    }

    /// The id's metadata now, as written (DescribeTransactions, tests).
    pub fn describe(&self, transactional_id: &str) -> Option<TxnMetadata> {
        self.ids.lock().get(transactional_id).filter(|e| e.durable).map(|e| e.meta.clone())
    }

    /// DescribeTransactions for one id: its metadata, or why there is none here.
    pub fn describe_checked(&self, transactional_id: &str) -> Result<TxnMetadata, CoordinatorError> {
        self.coordinator_epoch(transactional_id)?;
        self.describe(transactional_id).ok_or_else(|| CoordinatorError::UnknownTransactionalId(transactional_id.into()))
    }

    /// Every id this broker coordinates, as written (ListTransactions).
    pub fn list(&self) -> Vec<TxnMetadata> {
        self.ids.lock().values().filter(|e| e.durable).map(|e| e.meta.clone()).collect()
    }

    /// Transactional ids by state, for the metrics.
    pub fn count_by_state(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for e in self.ids.lock().values().filter(|e| e.durable) {
            *counts.entry(e.meta.state.name()).or_insert(0) += 1;
        }
        counts
    }

    /// Takes the id for one decision: `decide` sees its metadata (None if unknown) and returns
    /// the metadata to write; the id stays busy until [`Self::finish`].
    fn begin<T>(
        &self,
        transactional_id: &str,
        decide: impl FnOnce(Option<&TxnMetadata>) -> Result<(Option<TxnMetadata>, T), CoordinatorError>,
    ) -> Result<(Option<TxnMetadata>, T), CoordinatorError> {
        self.coordinator_epoch(transactional_id)?;
        let mut ids = self.ids.lock();
        let entry = ids.get(transactional_id);
        if entry.is_some_and(|e| e.busy) {
            return Err(TxnError::ConcurrentTransactions.into());
        }
        let (next, answer) = decide(entry.map(|e| &e.meta))?;
        if let Some(next) = &next {
            match ids.get_mut(transactional_id) {
                Some(e) => e.busy = true,
                None => {
                    // Not known until written: a placeholder that only marks the id busy.
                    let placeholder = Entry { meta: next.clone(), busy: true, durable: false };
                    ids.insert(transactional_id.to_string(), placeholder);
                }
            }
        }
        Ok((next, answer))
    }

    /// Ends a decision: `written` is the metadata now durable (None: the write failed, the
    /// id's state is what it was; a placeholder of an id never written is removed).
    fn finish(&self, transactional_id: &str, written: Option<&TxnMetadata>, was_known: bool, keep_busy: bool) {
        let mut ids = self.ids.lock();
        match (written, ids.get_mut(transactional_id)) {
            (Some(meta), Some(e)) => {
                e.meta = meta.clone();
                e.busy = keep_busy;
                e.durable = true;
            }
            (None, Some(e)) if was_known => e.busy = false,
            (None, Some(_)) => {
                ids.remove(transactional_id);
            }
            (_, None) => {}
        }
    }

    /// Writes `meta` to the id's partition and waits for the partition's ISR.
    async fn persist(&self, meta: &TxnMetadata) -> Result<(), CoordinatorError> {
        let p = self.partition_of(&meta.transactional_id);
        let partition = self
            .replicas
            .leader(TRANSACTION_STATE_TOPIC, p)
            .ok_or_else(|| CoordinatorError::NotCoordinator(meta.transactional_id.clone()))?;
        let now = now_ms();
        let record = (encode_key(&meta.transactional_id), Some(encode_value(meta)));
        let unavailable = |e: crate::partition::PartitionError| CoordinatorError::NotAvailable(e.to_string());
        let appended = partition.append(&batch::encode(&[record], now), -1, now).map_err(unavailable)?;
        let min_insync = partition.config().min_insync_replicas;
        partition
            .wait_for_replication(appended.last_offset, min_insync, self.config.write_timeout)
            .await
            .map_err(unavailable)
    }

    /// Decides with `decide`, writes the result, applies it. Returns the written metadata
    /// (None when nothing had to change) and `decide`'s answer.
    async fn decide_and_write<T>(
        &self,
        transactional_id: &str,
        keep_busy: impl FnOnce(&TxnMetadata) -> bool,
        decide: impl FnOnce(Option<&TxnMetadata>) -> Result<(Option<TxnMetadata>, T), CoordinatorError>,
    ) -> Result<(Option<TxnMetadata>, T), CoordinatorError> {
        let was_known = self.ids.lock().contains_key(transactional_id);
        let (next, answer) = self.begin(transactional_id, decide)?;
        let Some(next) = next else { return Ok((None, answer)) };
        match self.persist(&next).await {
            Ok(()) => {
                self.finish(transactional_id, Some(&next), was_known, keep_busy(&next));
                Ok((Some(next), answer))
            }
            Err(e) => {
                tracing::warn!(transactional_id, error = %e, "a transaction decision was not written");
                self.finish(transactional_id, None, was_known, false);
                Err(e)
            }
        }
    }

    /// InitProducerId with a transactional id: (producer id, epoch). `fresh_producer_id` is
    /// required when [`Self::needs_producer_id`] says so.
    pub async fn init_producer_id(
        self: &Arc<Self>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        fresh_producer_id: Option<i64>,
    ) -> Result<(i64, i16), CoordinatorError> {
        let max = self.config.max_timeout_ms;
        let now = now_ms();
        let (written, aborting) = self
            .decide_and_write(
                transactional_id,
                |m| m.state.is_preparing(),
                |current| {
                    if state::needs_producer_id(current) && fresh_producer_id.is_none() {
                        return Err(CoordinatorError::NeedsProducerId);
                    }
                    match state::init_producer_id(
                        current,
                        transactional_id,
                        timeout_ms,
                        max,
                        expected,
                        fresh_producer_id,
                        now,
                    )? {
                        InitDecision::Ready(m) if current == Some(&m) => Ok((None, false)),
                        InitDecision::Ready(m) => Ok((Some(m), false)),
                        InitDecision::AbortFirst(m) => Ok((Some(m), true)),
                    }
                },
            )
            .await?;
        let meta = match written {
            Some(m) => m,
            None => self
                .describe(transactional_id)
                .ok_or_else(|| CoordinatorError::NotCoordinator(transactional_id.into()))?,
        };
        if aborting {
            // The open transaction is aborted in the new epoch; the client retries meanwhile.
            self.spawn_completion(meta);
            return Err(TxnError::ConcurrentTransactions.into());
        }
        Ok((meta.producer_id, meta.producer_epoch))
    }

    /// AddPartitionsToTxn (AddOffsetsToTxn names the group's `__consumer_offsets` partition).
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), CoordinatorError> {
        let now = now_ms();
        self.decide_and_write(
            transactional_id,
            |_| false,
            |current| Ok((state::add_partitions(current, producer_id, producer_epoch, partitions, now)?, ())),
        )
        .await
        .map(|_| ())
    }

    /// EndTxn: the decision is durable when this returns; the markers follow.
    pub async fn end_txn(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<(), CoordinatorError> {
        let now = now_ms();
        let (written, ()) = self
            .decide_and_write(
                transactional_id,
                |m| m.state.is_preparing(),
                |current| match state::end_txn(current, producer_id, producer_epoch, commit, now)? {
                    EndDecision::Prepare(m) => Ok((Some(m), ())),
                    EndDecision::AlreadyDone => Ok((None, ())),
                },
            )
            .await?;
        if let Some(prepared) = written {
            self.spawn_completion(prepared);
        }
        Ok(())
    }

    /// An operator's abort of the id's open transaction (`strom transactions abort`): decided
    /// in a bumped epoch, fencing the producer, as a timeout would. Returns the decision; the
    /// markers follow.
    pub async fn abort(self: &Arc<Self>, transactional_id: &str) -> Result<TxnMetadata, CoordinatorError> {
        let now = now_ms();
        let unknown = || CoordinatorError::UnknownTransactionalId(transactional_id.into());
        let (written, ()) = self
            .decide_and_write(
                transactional_id,
                |m| m.state.is_preparing(),
                |current| {
                    let current = current.ok_or_else(unknown)?;
                    Ok((Some(state::abort_open(current, now)?), ()))
                },
            )
            .await?;
        let aborting = written.ok_or_else(unknown)?;
        tracing::info!(transactional_id, producer_id = aborting.producer_id, "aborting a transaction on request");
        self.spawn_completion(aborting.clone());
        Ok(aborting)
    }

    /// Writes the markers of a decided transaction until every partition has one, then the
    /// Complete state. The id stays busy until then.
    fn spawn_completion(self: &Arc<Self>, prepared: TxnMetadata) {
        let this = Arc::clone(self);
        tokio::spawn(async move { this.complete(prepared).await });
    }

    async fn complete(&self, prepared: TxnMetadata) {
        let id = prepared.transactional_id.clone();
        let commit = prepared.state == TxnState::PrepareCommit;
        let mut pending = prepared.partitions.clone();
        let mut backoff = Duration::from_millis(50);
        while !pending.is_empty() {
            let Ok(coordinator_epoch) = self.coordinator_epoch(&id) else {
                // Unloaded (leadership moved): the new coordinator finishes it.
                return;
            };
            pending = self
                .markers
                .write(prepared.producer_id, prepared.producer_epoch, commit, coordinator_epoch, &pending)
                .await;
            if !pending.is_empty() {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
        let Some(done) = state::complete(&prepared, now_ms()) else { return };
        loop {
            if self.coordinator_epoch(&id).is_err() {
                return;
            }
            match self.persist(&done).await {
                Ok(()) => {
                    self.finish(&id, Some(&done), true, false);
                    return;
                }
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "writing a completed transaction failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Aborts the transactions open past their timeout (in a bumped epoch, fencing their
    /// producers). Called periodically.
    pub async fn abort_timed_out(self: &Arc<Self>) {
        let now = now_ms();
        let due: Vec<String> = self
            .ids
            .lock()
            .values()
            .filter(|e| !e.busy && state::expire(&e.meta, now).is_some())
            .map(|e| e.meta.transactional_id.clone())
            .collect();
        for id in due {
            let written = self
                .decide_and_write(
                    &id,
                    |m| m.state.is_preparing(),
                    |current| Ok((current.and_then(|m| state::expire(m, now)), ())),
                )
                .await;
            match written {
                Ok((Some(aborting), ())) => {
                    tracing::info!(transactional_id = %id, "aborting a transaction open past its timeout");
                    self.spawn_completion(aborting);
                }
                Ok((None, ())) => {}
                Err(e) => tracing::debug!(transactional_id = %id, error = %e, "timeout abort deferred"),
            }
        }
    }

    /// Starts coordinating the ids of `__transaction_state` partition `p` (this broker became
    /// its leader in `leader_epoch`): loads them and finishes the decided transactions.
    pub fn load_partition(self: &Arc<Self>, p: i32, leader_epoch: i32) -> usize {
        let Some(partition) = self.replicas.get(TRANSACTION_STATE_TOPIC, p) else { return 0 };
        let loaded = super::load::load(&partition);
        let count = loaded.len();
        let mut resume = Vec::new();
        {
            let mut ids = self.ids.lock();
            for (id, meta) in loaded {
                let preparing = meta.state.is_preparing();
                if preparing {
                    resume.push(meta.clone());
                }
                ids.insert(id, Entry { meta, busy: preparing, durable: true });
            }
            self.loaded.lock().insert(p, leader_epoch);
        }
        for meta in resume {
            tracing::info!(transactional_id = %meta.transactional_id, state = meta.state.name(), "finishing a decided transaction");
            self.spawn_completion(meta);
        }
        count
    }

    /// Stops coordinating the ids of partition `p` (leadership moved away).
    pub fn unload_partition(&self, p: i32) {
        self.loaded.lock().remove(&p);
        let partitions = self.config.state_partitions;
        self.ids.lock().retain(|id, _| partition_for(id, partitions) != p);
    }

    /// The `__transaction_state` partitions loaded here.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.loaded.lock().keys().copied().collect()
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
