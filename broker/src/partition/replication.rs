//! A replica's part in replication, on both sides.
//!
//! Leader: a new leader epoch starts at the log end offset (recorded in the leader-epoch
//! cache); each follower fetch is checked for divergence (the follower's last epoch must end
//! at or after its fetch offset in the leader's history, else it is told where that epoch
//! ended), recorded, and may advance the high watermark — the smallest log end offset in the
//! ISR, never moving back. ISR changes are proposed from the lag rules, and take effect only
//! when the metadata image carries them.
//!
//! Follower: appends the leader's batches byte for byte, keeps the epoch cache and producer
//! state as the leader does, follows the leader's high watermark and log start offset, and
//! truncates where its history diverged.

use std::time::Duration;

use bytes::Bytes;

use super::followers::{self, FollowerState};
use super::leader_epochs::EpochEnd;
use super::{Leadership, Partition, PartitionError, State};
use crate::log::FileSlice;
use crate::time::now_ms;

/// A follower's fetch of this partition.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaFetch {
    pub replica: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// The epoch of the follower's last batch (-1 if it has none).
    pub last_fetched_epoch: i32,
    pub max_bytes: usize,
}

/// What the leader answers a follower.
#[derive(Debug, Clone)]
pub struct ReplicaRead {
    pub records: Option<Bytes>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Set when the follower's log diverged: truncate to where this epoch ended.
    pub diverging: Option<EpochEnd>,
}

/// Why a follower's fetch was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaFetchError {
    #[error("this broker does not lead the partition")]
    NotLeader,
    #[error("the fetch's leader epoch {given} is older than the leader's {current}")]
    FencedLeaderEpoch { given: i32, current: i32 },
    #[error("the fetch's leader epoch {given} is newer than the leader's {current}")]
    UnknownLeaderEpoch { given: i32, current: i32 },
    #[error("broker {0} is not a replica of the partition")]
    NotReplica(i32),
    #[error("fetch offset {offset} outside the leader's log [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    #[error(transparent)]
    Storage(#[from] PartitionError),
}

/// An ISR change the leader asks the controller for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub isr: Vec<i32>,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Members added (expand) or removed (shrink).
    pub expanded: bool,
}

impl Partition {
    /// Applies the role the metadata image gives this replica. Becoming leader (or leading in
    /// a new epoch) starts the epoch at the log end offset and gives every follower a fresh lag
    /// window; any change wakes acks=all produces waiting on this partition.
    pub fn set_leadership(&self, next: Leadership) {
        let now = now_ms();
        let mut state = self.state.lock();
        let previous = self.leadership.read().clone();
        if previous == next {
            return;
        }
        if next.is_leader && (!previous.is_leader || previous.leader_epoch != next.leader_epoch) {
            let leo = state.log.log_end_offset();
            state.epochs.assign(next.leader_epoch, leo);
            state.epoch_start_offset = leo;
            state.followers = next
                .replicas
                .iter()
                .copied()
                .filter(|r| *r != self.broker)
                .map(|r| (r, FollowerState::new(now)))
                .collect();
        } else if next.is_leader {
            for r in next.replicas.iter().copied().filter(|r| *r != self.broker) {
                state.followers.entry(r).or_insert_with(|| FollowerState::new(now));
            }
        } else {
            state.followers.clear();
        }
        *self.leadership.write() = next.clone();
        if next.is_leader {
            self.advance_high_watermark(&state, &next);
        }
        drop(state);
        // Wake produces waiting for replication: their partition's ISR or leader changed.
        self.high_watermark.send_modify(|_| {});
    }

    /// Raises the high watermark to what the ISR has (leader only; never backwards). Not while
    /// the ISR is smaller than min.insync.replicas ("strict min ISR", KIP-966): the replicas
    /// that left it then hold every record below the high watermark, so the controller may
    /// elect them (eligible leader replicas) if this leader is lost.
    pub(super) fn advance_high_watermark(&self, state: &State, leadership: &Leadership) {
        let min_insync = usize::try_from(self.config().min_insync_replicas.max(1)).unwrap_or(1);
        if leadership.isr.len() < min_insync {
            return;
        }
        let current = self.high_watermark();
        let hw = followers::high_watermark(
            self.broker,
            state.log.log_end_offset(),
            &leadership.isr,
            &state.followers,
            current,
        );
        if hw > current {
            self.high_watermark.send_replace(hw);
        }
    }

    /// Whether this leader's high watermark has reached the start of its leader epoch: until
    /// then it may be below what the previous leader showed (a follower learns the high
    /// watermark one fetch late), so ListOffsets answers OFFSET_NOT_AVAILABLE (KIP-207)
    /// rather than let it go backwards.
    pub fn high_watermark_established(&self) -> bool {
        let start = self.state.lock().epoch_start_offset;
        self.high_watermark() >= start
    }

    /// Every change of the log end offset after this call (followers' fetches wait on it).
    pub fn subscribe_log_end(&self) -> tokio::sync::watch::Receiver<i64> {
        self.log_end.subscribe()
    }

    /// Serves one follower's fetch of this partition (leader side).
    pub fn serve_replica_fetch(&self, f: ReplicaFetch) -> Result<ReplicaRead, ReplicaFetchError> {
        let now = now_ms();
        let (slice, read): (Option<FileSlice>, ReplicaRead) = {
            let mut state = self.state.lock();
            let leadership = self.leadership.read().clone();
            if !leadership.is_leader {
                return Err(ReplicaFetchError::NotLeader);
            }
            if f.current_leader_epoch < leadership.leader_epoch {
                return Err(ReplicaFetchError::FencedLeaderEpoch {
                    given: f.current_leader_epoch,
                    current: leadership.leader_epoch,
                });
            }
            if f.current_leader_epoch > leadership.leader_epoch {
                return Err(ReplicaFetchError::UnknownLeaderEpoch {
                    given: f.current_leader_epoch,
                    current: leadership.leader_epoch,
                });
            }
            if !leadership.replicas.contains(&f.replica) || f.replica == self.broker {
                return Err(ReplicaFetchError::NotReplica(f.replica));
            }
            let log_start_offset = state.log.log_start_offset();
            let log_end_offset = state.log.log_end_offset();
            let answer = |records, diverging| ReplicaRead {
                records,
                high_watermark: self.high_watermark(),
                log_start_offset,
                log_end_offset,
                diverging,
            };
            if f.last_fetched_epoch >= 0 && f.fetch_offset > log_start_offset {
                let end = state.epochs.end_offset_for(f.last_fetched_epoch, log_end_offset);
                if end.epoch < f.last_fetched_epoch || end.end_offset < f.fetch_offset {
                    // The follower has records of an epoch this leader never wrote (or more of
                    // it than this leader has): it must truncate first.
                    return Ok(answer(None, Some(end)));
                }
            }
            if f.fetch_offset < log_start_offset || f.fetch_offset > log_end_offset {
                return Err(ReplicaFetchError::OffsetOutOfRange {
                    offset: f.fetch_offset,
                    log_start_offset,
                    log_end_offset,
                });
            }
            if let Some(follower) = state.followers.get_mut(&f.replica) {
                follower.on_fetch(f.fetch_offset, log_end_offset, now);
            }
            self.advance_high_watermark(&state, &leadership);
            let slice = state
                .log
                .read(f.fetch_offset, f.max_bytes, log_end_offset, true)
                .map_err(|e| ReplicaFetchError::Storage(self.log_error(e)))?;
            (slice, answer(None, None))
        };
        let records = match slice {
            Some(slice) => Some(slice.read().map_err(|source| PartitionError::Io {
                topic: self.topic.to_string(),
                partition: self.index,
                op: "read segment for a follower",
                path: self.dir.clone(),
                source,
            })?),
            None => None,
        };
        Ok(ReplicaRead { records, ..read })
    }

    /// The follower's position: (log end offset, epoch of its last batch or -1).
    pub fn fetch_position(&self) -> (i64, i32) {
        let state = self.state.lock();
        (state.log.log_end_offset(), state.epochs.latest_epoch().unwrap_or(-1))
    }

    /// Whether part of the log is not yet on disk: a tail appended before a crash (the page
    /// cache kept it; recovery does not fsync), before this replica stopped leading, or by a
    /// fetch whose fsync failed.
    pub fn has_unflushed(&self) -> bool {
        !self.state.lock().log.is_flushed()
    }

    /// fsyncs whatever of the log is not on disk yet (nothing if all is).
    pub fn flush_unflushed(&self) -> Result<(), PartitionError> {
        let mut state = self.state.lock();
        if state.log.is_flushed() {
            return Ok(());
        }
        state.log.flush().map_err(|e| self.log_error(e))
    }

    /// Where `epoch` ended in this replica's log.
    pub fn epoch_end(&self, epoch: i32) -> EpochEnd {
        let state = self.state.lock();
        state.epochs.end_offset_for(epoch, state.log.log_end_offset())
    }

    /// Where to truncate when the leader says this replica diverged: the end of the leader's
    /// `leader_epoch` (its last epoch at most ours), or less if our own copy of that epoch
    /// ends sooner. With no common epoch, back to the leader's log start.
    pub fn divergence_point(&self, leader_epoch: i32, leader_end_offset: i64, leader_log_start: i64) -> i64 {
        let state = self.state.lock();
        let leo = state.log.log_end_offset();
        if leader_epoch < 0 || leader_end_offset < 0 {
            return leader_log_start.clamp(0, leo);
        }
        let mine = state.epochs.end_offset_for(leader_epoch, leo);
        let my_end = if mine.epoch < 0 {
            // All our epochs are newer than the leader's: nothing of ours is in its history.
            state.epochs.entries().first().map_or(leo, |(_, start)| *start)
        } else {
            mine.end_offset
        };
        leader_end_offset.min(my_end).min(leo)
    }

    /// Appends the leader's batches (follower side) and follows the leader's high watermark
    /// and log start offset. Returns the new log end offset.
    ///
    /// `fetched_in` is the leader epoch the fetch was made in; this and the truncations below
    /// refuse with [`PartitionError::NotFollowing`] once the replica's role has moved on, so an
    /// answer still in flight when this broker became leader cannot touch the new leader's
    /// log or its epoch cache.
    pub fn append_from_leader(
        &self,
        fetched_in: i32,
        records: &Bytes,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
        fsync: bool,
    ) -> Result<i64, PartitionError> {
        let now = now_ms();
        let mut state = self.state.lock();
        self.still_following(fetched_in)?;
        if !records.is_empty() {
            state.log.append_replicated(records, now).map_err(|e| self.log_error(e))?;
            super::transactional::observe_replicated(&mut state, records);
            if fsync {
                // Durable mode: on disk before the next fetch reports this log end.
                state.log.flush().map_err(|e| self.log_error(e))?;
            } else if let Err(e) = state.log.flush_if_due(now).map_err(|e| self.log_error(e)) {
                tracing::error!(error = %e, "periodic flush failed");
            }
        }
        let leo = state.log.log_end_offset();
        if leader_log_start_offset > state.log.log_start_offset() && leader_log_start_offset <= leo {
            state.log.delete_records_before(leader_log_start_offset).map_err(|e| self.log_error(e))?;
        }
        self.log_end.send_replace(leo);
        let hw = leader_high_watermark.min(leo);
        if hw != self.high_watermark() {
            self.high_watermark.send_replace(hw);
        }
        Ok(leo)
    }

    /// Truncates this follower's log to `offset` (where its history diverged from the
    /// leader's); the epoch cache, producer state and high watermark follow.
    pub fn truncate_to(&self, fetched_in: i32, offset: i64) -> Result<i64, PartitionError> {
        let mut state = self.state.lock();
        self.still_following(fetched_in)?;
        let leo = state.log.truncate_to(offset).map_err(|e| self.log_error(e))?;
        self.after_truncation(&mut state, leo)?;
        Ok(leo)
    }

    /// Empties this follower's log and restarts it at `offset` (the leader's log start).
    pub fn truncate_fully_and_start_at(&self, fetched_in: i32, offset: i64) -> Result<(), PartitionError> {
        let mut state = self.state.lock();
        self.still_following(fetched_in)?;
        state.log.truncate_fully_and_start_at(offset).map_err(|e| self.log_error(e))?;
        self.after_truncation(&mut state, offset)
    }

    /// Ok while this replica follows in `fetched_in` (call with the state lock held: roles
    /// change under it, in [`Partition::set_leadership`]).
    fn still_following(&self, fetched_in: i32) -> Result<(), PartitionError> {
        let leadership = self.leadership.read();
        if !leadership.is_leader && leadership.leader_epoch == fetched_in {
            return Ok(());
        }
        Err(PartitionError::NotFollowing {
            topic: self.topic.to_string(),
            partition: self.index,
            fetched_in,
            leader_epoch: leadership.leader_epoch,
            now: if leadership.is_leader { "the leader" } else { "a follower" },
        })
    }

    fn after_truncation(&self, state: &mut State, leo: i64) -> Result<(), PartitionError> {
        state.epochs.truncate_from_end(leo);
        let (producers, txns) = super::transactional::rebuild(&state.log).map_err(|e| self.log_error(e))?;
        state.producers = producers;
        state.txns = txns;
        self.log_end.send_replace(leo);
        if self.high_watermark() > leo {
            self.high_watermark.send_replace(leo);
        }
        Ok(())
    }

    /// The ISR change this leader should ask for now, if any: lagging members out first,
    /// else caught-up replicas in.
    pub fn isr_proposal(&self, max_lag: Duration) -> Option<IsrProposal> {
        let now = now_ms();
        let state = self.state.lock();
        let l = self.leadership.read().clone();
        if !l.is_leader {
            return None;
        }
        let max_lag_ms = i64::try_from(max_lag.as_millis()).unwrap_or(i64::MAX);
        let lagging = followers::lagging(self.broker, &l.isr, &state.followers, now, max_lag_ms);
        if !lagging.is_empty() {
            let isr: Vec<i32> = l.isr.iter().copied().filter(|r| !lagging.contains(r)).collect();
            return Some(IsrProposal {
                isr,
                leader_epoch: l.leader_epoch,
                partition_epoch: l.partition_epoch,
                expanded: false,
            });
        }
        let rule = followers::Rejoin {
            replicas: &l.replicas,
            isr: &l.isr,
            ineligible: &l.fenced,
            high_watermark: self.high_watermark(),
            epoch_start_offset: state.epoch_start_offset,
            now_ms: now,
            max_lag_ms,
        };
        let joining = followers::caught_up(&rule, &state.followers);
        if joining.is_empty() {
            return None;
        }
        let isr: Vec<i32> = l.replicas.iter().copied().filter(|r| l.isr.contains(r) || joining.contains(r)).collect();
        Some(IsrProposal { isr, leader_epoch: l.leader_epoch, partition_epoch: l.partition_epoch, expanded: true })
    }

    /// Waits until the ISR has every record through `last_offset` (acks=all). With fewer
    /// in-sync replicas than `min_insync` by then: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    pub async fn wait_for_replication(
        &self,
        last_offset: i64,
        min_insync: i32,
        timeout: Duration,
    ) -> Result<(), PartitionError> {
        let mut hw = self.high_watermark.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let leadership = self.leadership();
            if !leadership.is_leader {
                return Err(PartitionError::NotLeader { topic: self.topic.to_string(), partition: self.index });
            }
            let isr = i32::try_from(leadership.isr.len()).unwrap_or(i32::MAX);
            if *hw.borrow_and_update() > last_offset || isr < min_insync {
                // Below min.insync.replicas the high watermark stands still: no use waiting.
                if isr < min_insync {
                    return Err(PartitionError::NotEnoughReplicasAfterAppend {
                        topic: self.topic.to_string(),
                        partition: self.index,
                        isr,
                        min: min_insync,
                    });
                }
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, hw.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return Err(PartitionError::ReplicationTimeout {
                        topic: self.topic.to_string(),
                        partition: self.index,
                        waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    })
                }
            }
        }
    }
}
