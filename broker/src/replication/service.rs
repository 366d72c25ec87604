//! The leader side of `strom.replication.v1`: a follower's fetch of every partition it
//! follows on this broker, long-polled. The fetch waits on the partitions' log-end channels,
//! so the append that brings records wakes it (no polling), and answers at once when a
//! partition has records, an error, or a divergence to report.

use std::sync::Arc;
use std::time::Duration;

use futures::future::select_all;
use strom_proto::replication::replication_server::Replication;
use strom_proto::replication::{
    FetchRequest, FetchResponse, PartitionData, PartitionFetch, ReplicaError, WriteMarkersRequest, WriteMarkersResponse,
};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::metadata::MetadataImage;
use crate::partition::replication::{ReplicaFetch, ReplicaFetchError};
use crate::partition::ReplicaManager;

/// The longest a follower's fetch is held, whatever it asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(5);

/// Serves followers' fetches from the replicas this broker leads.
#[derive(Debug, Clone)]
pub struct ReplicationService {
    pub replicas: Arc<ReplicaManager>,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    /// Shared by every fetch of replicas a reassignment adds (the replication throttle).
    pub throttle: Arc<Throttle>,
    /// Settles transactional offsets when a marker reaches `__consumer_offsets`.
    pub groups: Arc<crate::group::GroupCoordinator>,
}

/// A token bucket of bytes/s for the records sent to replicas being added by a reassignment
/// that are not in sync yet, so moving data does not take the bandwidth client traffic needs.
/// A one-second burst.
#[derive(Debug, Default)]
pub struct Throttle {
    state: parking_lot::Mutex<Option<(f64, std::time::Instant)>>,
    /// Record bytes sent to throttled replicas since start.
    sent: std::sync::atomic::AtomicU64,
    /// Partition fetches answered empty because the throttle was spent.
    held_back: std::sync::atomic::AtomicU64,
}

impl Throttle {
    /// Bytes that may be sent now at `rate` bytes/s (0 while in debt).
    fn allowance(&self, rate: u64) -> usize {
        let mut state = self.state.lock();
        let now = std::time::Instant::now();
        let (tokens, at) = state.get_or_insert((rate as f64, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate as f64).min(rate as f64);
        *at = now;
        if *tokens < 1.0 {
            0
        } else {
            *tokens as usize
        }
    }

    /// Record bytes sent to throttled replicas since start (Kafka's throttled
    /// `LeaderReplication` byte rate, as a count).
    pub fn throttled_bytes(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Partition fetches of throttled replicas answered empty because the rate was spent.
    pub fn held_back(&self) -> u64 {
        self.held_back.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that `bytes` were sent (may go into debt: a whole batch is never split).
    fn spend(&self, bytes: usize) {
        self.sent.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
        if let Some((tokens, _)) = self.state.lock().as_mut() {
            *tokens -= bytes as f64;
        }
    }
}

fn failed(p: &PartitionFetch, error: ReplicaError, message: String) -> PartitionData {
    PartitionData {
        topic: p.topic.clone(),
        partition: p.partition,
        error: error.into(),
        message,
        high_watermark: -1,
        log_start_offset: -1,
        log_end_offset: -1,
        ..Default::default()
    }
}

impl ReplicationService {
    /// One pass over the requested partitions: (answers, whether any must be sent now).
    fn read_all(&self, req: &FetchRequest) -> (Vec<PartitionData>, bool) {
        let mut budget = usize::try_from(req.max_bytes).unwrap_or(0).max(1);
        let mut urgent = false;
        let mut out = Vec::with_capacity(req.partitions.len());
        for p in &req.partitions {
            let Some(replica) =
                self.replicas.get(&p.topic, p.partition).filter(|r| r.topic_id.to_string() == p.topic_id)
            else {
                urgent = true;
                out.push(failed(p, ReplicaError::UnknownPartition, format!("{}-{} is not here", p.topic, p.partition)));
                continue;
            };
            let mut max_bytes = usize::try_from(p.max_bytes).unwrap_or(0).clamp(1, budget);
            let throttled = self.image.borrow().replication_throttle.filter(|_| {
                // Only replicas still copying: one that joined the ISR holds back the high
                // watermark, so throttling it would throttle the clients (Kafka's rule too).
                let l = replica.leadership();
                l.adding.contains(&req.replica_id) && !l.isr.contains(&req.replica_id)
            });
            if let Some(rate) = throttled {
                match self.throttle.allowance(rate) {
                    0 => {
                        // Over the throttle: nothing for this replica until tokens come back.
                        self.throttle.held_back.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        out.push(PartitionData {
                            topic: p.topic.clone(),
                            partition: p.partition,
                            high_watermark: replica.high_watermark(),
                            log_start_offset: replica.log_start_offset(),
                            log_end_offset: replica.log_end_offset(),
                            ..Default::default()
                        });
                        continue;
                    }
                    allowed => max_bytes = max_bytes.min(allowed),
                }
            }
            let fetch = ReplicaFetch {
                replica: req.replica_id,
                current_leader_epoch: p.current_leader_epoch,
                fetch_offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                max_bytes,
            };
            let answer = match replica.serve_replica_fetch(fetch) {
                Ok(read) => {
                    let records = read.records.unwrap_or_default();
                    if throttled.is_some() {
                        self.throttle.spend(records.len());
                    }
                    budget = budget.saturating_sub(records.len()).max(1);
                    urgent |= !records.is_empty() || read.diverging.is_some();
                    let diverging = read.diverging.unwrap_or(crate::partition::leader_epochs::EpochEnd::UNDEFINED);
                    PartitionData {
                        topic: p.topic.clone(),
                        partition: p.partition,
                        error: ReplicaError::None.into(),
                        message: String::new(),
                        high_watermark: read.high_watermark,
                        log_start_offset: read.log_start_offset,
                        log_end_offset: read.log_end_offset,
                        diverged: read.diverging.is_some(),
                        diverging_epoch: diverging.epoch,
                        diverging_end_offset: diverging.end_offset,
                        records,
                    }
                }
                Err(e) => {
                    urgent = true;
                    let code = match &e {
                        ReplicaFetchError::NotLeader => ReplicaError::NotLeader,
                        ReplicaFetchError::FencedLeaderEpoch { .. } => ReplicaError::FencedLeaderEpoch,
                        ReplicaFetchError::UnknownLeaderEpoch { .. } => ReplicaError::UnknownLeaderEpoch,
                        ReplicaFetchError::NotReplica(_) => ReplicaError::NotReplica,
                        ReplicaFetchError::OffsetOutOfRange { .. } => ReplicaError::OffsetOutOfRange,
                        ReplicaFetchError::Storage(_) => ReplicaError::StorageError,
                    };
                    let mut data = failed(p, code, crate::error_chain::display(&e));
                    if let ReplicaFetchError::OffsetOutOfRange { log_start_offset, log_end_offset, .. } = e {
                        data.log_start_offset = log_start_offset;
                        data.log_end_offset = log_end_offset;
                    }
                    data
                }
            };
            out.push(answer);
        }
        (out, urgent)
    }
}

#[tonic::async_trait]
impl Replication for ReplicationService {
    async fn write_markers(
        &self,
        request: Request<WriteMarkersRequest>,
    ) -> Result<Response<WriteMarkersResponse>, Status> {
        let req = request.into_inner();
        let resp = super::markers::write_markers(
            &self.replicas,
            Some(&self.groups),
            &req,
            super::markers::MARKER_REPLICATION_TIMEOUT,
        )
        .await;
        Ok(Response::new(resp))
    }

    async fn fetch(&self, request: Request<FetchRequest>) -> Result<Response<FetchResponse>, Status> {
        let peer = request.remote_addr();
        let req = request.into_inner();
        let registered = self.image.borrow().broker(req.replica_id).is_some_and(|b| b.epoch == req.broker_epoch);
        if !registered {
            tracing::debug!(peer = ?peer, replica = req.replica_id, "replica fetch from an unregistered broker epoch");
            return Err(Status::failed_precondition(format!(
                "broker {} with epoch {} is not registered",
                req.replica_id, req.broker_epoch
            )));
        }
        let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(MAX_WAIT_CAP);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Subscribe before reading, so an append between the read and the wait still wakes us.
            let mut watchers: Vec<watch::Receiver<i64>> = req
                .partitions
                .iter()
                .filter_map(|p| self.replicas.leader(&p.topic, p.partition))
                .map(|p| p.subscribe_log_end())
                .collect();
            let (partitions, urgent) = self.read_all(&req);
            if urgent || watchers.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(Response::new(FetchResponse { partitions }));
            }
            let changed = select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let (partitions, _) = self.read_all(&req);
                return Ok(Response::new(FetchResponse { partitions }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn the_throttle_allows_a_second_of_bytes_then_nothing_while_in_debt() {
        let throttle = Throttle::default();
        assert_eq!(throttle.allowance(1000), 1000, "a one-second burst to begin with");
        // A whole batch larger than the allowance is still sent, and the bucket goes into debt.
        throttle.spend(5000);
        assert_eq!(throttle.allowance(1000), 0, "nothing while in debt");
        assert_eq!(throttle.allowance(1000), 0);
    }
}
