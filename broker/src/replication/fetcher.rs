//! The follower side: one fetch loop per leader broker, fetching every partition this broker
//! follows on it in one request (Kafka's replica fetcher threads, as tasks).
//!
//! The publisher hands over the full set of followed partitions after every metadata image
//! ([`ReplicaFetchers::set`]); loops start for new leaders and stop when they have nothing
//! left to fetch. Each answer is applied on a blocking thread (appends, truncation): a
//! divergence is truncated to the end of the last common epoch, an offset below the
//! leader's log start empties the log and restarts it there. A change of the followed set
//! abandons the fetch in flight, so new partitions are fetched at once rather than after the
//! leader has held the old request for up to `replica.fetch.wait.max.ms`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use strom_proto::replication::replication_client::ReplicationClient;
use strom_proto::replication::{FetchRequest, PartitionData, PartitionFetch, ReplicaError};
use tokio::sync::{watch, Notify};
use uuid::Uuid;

use crate::metadata::network::Channels;
use crate::metadata::MetadataImage;
use crate::partition::{Partition, ReplicaManager};
use crate::shutdown::Shutdown;

/// A partition this broker follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowTarget {
    pub leader: i32,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
}

/// Settings of the fetch loops.
#[derive(Debug, Clone, Copy)]
pub struct FetcherConfig {
    pub me: i32,
    /// `replica.fetch.wait.max.ms`.
    pub max_wait: Duration,
    /// `replica.fetch.response.max.bytes`.
    pub max_bytes: i32,
    /// Durable mode (`--flush-on-acks-all`): what a fetch brought is fsynced before the next
    /// fetch reports the new log end to the leader, so the high watermark only passes records
    /// every in-sync replica has on disk (one fsync per partition per fetch: group commit).
    pub fsync_before_next_fetch: bool,
}

type Targets = BTreeMap<(String, i32), FollowTarget>;

/// What the fetch loops have done, for metrics (Kafka's `FetcherLagMetrics` and
/// `FetcherStats`).
#[derive(Debug, Default)]
pub struct FetcherStats {
    /// Record bytes fetched from leaders and appended.
    bytes: AtomicU64,
    /// Each followed partition's lag after its last fetch: the leader's high watermark minus
    /// this replica's log end offset (Kafka's replica fetcher lag).
    lag: Mutex<BTreeMap<(String, i32), i64>>,
}

impl FetcherStats {
    /// Record bytes fetched from leaders since start.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// (topic, partition, lag) of every followed partition fetched at least once.
    pub fn lags(&self) -> Vec<(String, i32, i64)> {
        self.lag.lock().iter().map(|((t, p), lag)| (t.clone(), *p, *lag)).collect()
    }

    fn record(&self, topic: &str, partition: i32, lag: i64, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        let mut lags = self.lag.lock();
        match lags.get_mut(&(topic.to_string(), partition)) {
            Some(l) => *l = lag.max(0),
            None => {
                lags.insert((topic.to_string(), partition), lag.max(0));
            }
        }
    }
}

struct Loop {
    partitions: Arc<Mutex<Targets>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// Every fetch loop of this broker.
pub struct ReplicaFetchers {
    config: FetcherConfig,
    replicas: Arc<ReplicaManager>,
    channels: Channels,
    image: watch::Receiver<Arc<MetadataImage>>,
    epoch: watch::Receiver<Option<u64>>,
    shutdown: Shutdown,
    loops: Mutex<HashMap<i32, Loop>>,
    pub stats: Arc<FetcherStats>,
}

impl std::fmt::Debug for ReplicaFetchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaFetchers").field("leaders", &self.loops.lock().keys().collect::<Vec<_>>()).finish()
    }
}

impl ReplicaFetchers {
    pub fn new(
        config: FetcherConfig,
        replicas: Arc<ReplicaManager>,
        channels: Channels,
        image: watch::Receiver<Arc<MetadataImage>>,
        epoch: watch::Receiver<Option<u64>>,
        shutdown: Shutdown,
    ) -> ReplicaFetchers {
        ReplicaFetchers {
            config,
            replicas,
            channels,
            image,
            epoch,
            shutdown,
            loops: Mutex::new(HashMap::new()),
            stats: Arc::default(),
        }
    }

    /// Follow exactly `wanted` from now on.
    pub fn set(&self, wanted: Targets) {
        self.stats.lag.lock().retain(|key, _| wanted.contains_key(key));
        let mut by_leader: HashMap<i32, Targets> = HashMap::new();
        for (key, target) in wanted {
            by_leader.entry(target.leader).or_default().insert(key, target);
        }
        let mut loops = self.loops.lock();
        loops.retain(|leader, l| {
            if by_leader.contains_key(leader) && !l.task.is_finished() {
                return true;
            }
            l.task.abort();
            false
        });
        for (leader, targets) in by_leader {
            match loops.get(&leader) {
                Some(l) => {
                    let mut current = l.partitions.lock();
                    if *current != targets {
                        *current = targets;
                        l.changed.notify_one();
                    }
                }
                None => {
                    let partitions = Arc::new(Mutex::new(targets));
                    let changed = Arc::new(Notify::new());
                    let task = tokio::spawn(fetch_loop(FetchLoop {
                        leader,
                        config: self.config,
                        replicas: self.replicas.clone(),
                        channels: self.channels.clone(),
                        image: self.image.clone(),
                        epoch: self.epoch.clone(),
                        partitions: partitions.clone(),
                        changed: changed.clone(),
                        shutdown: self.shutdown.clone(),
                        stats: self.stats.clone(),
                    }));
                    tracing::info!(leader, "started fetching from a leader");
                    loops.insert(leader, Loop { partitions, changed, task });
                }
            }
        }
    }

    /// Partitions followed now, for metrics: (topic, partition, leader).
    pub fn followed(&self) -> Vec<(String, i32, i32)> {
        let loops = self.loops.lock();
        loops
            .iter()
            .flat_map(|(leader, l)| {
                l.partitions.lock().keys().map(|(t, p)| (t.clone(), *p, *leader)).collect::<Vec<_>>()
            })
            .collect()
    }
}

struct FetchLoop {
    leader: i32,
    config: FetcherConfig,
    replicas: Arc<ReplicaManager>,
    channels: Channels,
    image: watch::Receiver<Arc<MetadataImage>>,
    epoch: watch::Receiver<Option<u64>>,
    partitions: Arc<Mutex<Targets>>,
    changed: Arc<Notify>,
    shutdown: Shutdown,
    stats: Arc<FetcherStats>,
}

async fn fetch_loop(mut l: FetchLoop) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if l.shutdown.is_triggered() {
            return;
        }
        let targets = l.partitions.lock().clone();
        let addr = l.image.borrow().broker(l.leader).map(|b| b.internal_addr.clone());
        let epoch = *l.epoch.borrow();
        let (Some(addr), Some(broker_epoch), false) = (addr, epoch, targets.is_empty()) else {
            tokio::select! {
                _ = l.shutdown.wait() => return,
                _ = l.changed.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            continue;
        };
        let mut request = FetchRequest {
            replica_id: l.config.me,
            broker_epoch,
            max_wait_ms: i32::try_from(l.config.max_wait.as_millis()).unwrap_or(i32::MAX),
            max_bytes: l.config.max_bytes,
            partitions: Vec::with_capacity(targets.len()),
        };
        // Durable mode: a fetch reports the log end as this replica's position, so whatever of
        // it is not on disk yet (a tail from before a crash or from when this broker led, or
        // a fetch whose fsync failed) is fsynced first; a replica whose fsync fails is left
        // out of the fetch rather than reporting what its disk may not keep.
        let mut unsynced: Vec<(String, i32)> = Vec::new();
        if l.config.fsync_before_next_fetch {
            let pending: Vec<Arc<Partition>> = targets
                .keys()
                .filter_map(|(topic, p)| l.replicas.get(topic, *p))
                .filter(|r| r.has_unflushed())
                .collect();
            if !pending.is_empty() {
                let failed = tokio::task::spawn_blocking(move || {
                    let mut failed = Vec::new();
                    for replica in pending {
                        if let Err(e) = replica.flush_unflushed() {
                            tracing::error!(topic = %replica.topic, partition = replica.index, error = %crate::error_chain::display(&e), "could not fsync a replica before fetching");
                            failed.push((replica.topic.to_string(), replica.index));
                        }
                    }
                    failed
                })
                .await;
                unsynced = failed.unwrap_or_default();
            }
        }
        // Each partition with the leader epoch it is fetched in.
        let mut local: HashMap<(String, i32), (Arc<Partition>, i32)> = HashMap::new();
        for ((topic, p), target) in &targets {
            if unsynced.iter().any(|(t, i)| t == topic && i == p) {
                continue;
            }
            let Some(replica) = l.replicas.get(topic, *p).filter(|r| r.topic_id == target.topic_id) else { continue };
            let (fetch_offset, last_fetched_epoch) = replica.fetch_position();
            request.partitions.push(PartitionFetch {
                topic_id: target.topic_id.to_string(),
                topic: topic.clone(),
                partition: *p,
                current_leader_epoch: target.leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                max_bytes: l.config.max_bytes,
            });
            local.insert((topic.clone(), *p), (replica, target.leader_epoch));
        }
        let channel = match l.channels.get(&addr) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(leader = l.leader, %addr, error = %e, "cannot reach the leader");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut client = ReplicationClient::new(channel).max_decoding_message_size(256 << 20);
        let timeout = l.config.max_wait + Duration::from_secs(10);
        let call = tokio::time::timeout(timeout, client.fetch(request));
        let answer = tokio::select! {
            _ = l.shutdown.wait() => return,
            // The partitions changed (a topic created, a leader moved here): the fetch in
            // flight may be held by the leader for up to max_wait on the old set, so it is
            // dropped (nothing of it was applied; the next fetch asks from the same offsets)
            // and the next one names the new set at once.
            _ = l.changed.notified() => continue,
            answer = call => answer,
        };
        let partitions = match answer {
            Ok(Ok(resp)) => resp.into_inner().partitions,
            Ok(Err(status)) => {
                tracing::debug!(leader = l.leader, error = %status.message(), "replica fetch refused");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            Err(_) => {
                tracing::debug!(leader = l.leader, "replica fetch timed out");
                continue;
            }
        };
        let fsync = l.config.fsync_before_next_fetch;
        let stats = l.stats.clone();
        let applied = tokio::task::spawn_blocking(move || apply_all(partitions, &local, fsync, &stats)).await;
        match applied {
            Ok(true) => backoff = Duration::from_millis(50),
            Ok(false) => {
                // Every partition was refused (leadership moving): wait for the metadata.
                tokio::select! {
                    _ = l.shutdown.wait() => return,
                    _ = l.changed.notified() => {}
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => tracing::error!(leader = l.leader, error = %e, "applying a replica fetch failed"),
        }
    }
}

/// Applies one answer; true if any partition made progress (or is in step).
fn apply_all(
    partitions: Vec<PartitionData>,
    local: &HashMap<(String, i32), (Arc<Partition>, i32)>,
    fsync: bool,
    stats: &FetcherStats,
) -> bool {
    let mut progress = false;
    for data in partitions {
        let Some((replica, fetched_in)) = local.get(&(data.topic.clone(), data.partition)) else { continue };
        match apply(replica, *fetched_in, &data, fsync) {
            Ok(p) => {
                progress |= p;
                if p && data.high_watermark >= 0 {
                    let lag = data.high_watermark - replica.log_end_offset();
                    stats.record(&data.topic, data.partition, lag, data.records.len());
                }
            }
            Err(e @ crate::partition::PartitionError::NotFollowing { .. }) => {
                // The metadata moved on while the fetch was in flight (this broker may lead
                // now): the answer is stale, and the next fetch uses the new role.
                tracing::debug!(error = %e, "dropped a replica fetch answer from an older leader epoch");
            }
            Err(e) => tracing::warn!(
                topic = %data.topic,
                partition = data.partition,
                error = %crate::error_chain::display(&e),
                "could not apply what the leader sent"
            ),
        }
    }
    progress
}

/// Applies one partition's answer; true unless the leader refused it.
fn apply(
    replica: &Partition,
    fetched_in: i32,
    data: &PartitionData,
    fsync: bool,
) -> Result<bool, crate::partition::PartitionError> {
    let error = ReplicaError::try_from(data.error).unwrap_or(ReplicaError::StorageError);
    match error {
        ReplicaError::None if data.diverged => {
            let offset =
                replica.divergence_point(data.diverging_epoch, data.diverging_end_offset, data.log_start_offset);
            tracing::info!(
                topic = %data.topic,
                partition = data.partition,
                leader_epoch = data.diverging_epoch,
                leader_epoch_end = data.diverging_end_offset,
                truncate_to = offset,
                "log diverged from the leader's; truncating"
            );
            replica.truncate_to(fetched_in, offset)?;
            Ok(true)
        }
        ReplicaError::None => {
            replica.append_from_leader(fetched_in, &data.records, data.high_watermark, data.log_start_offset, fsync)?;
            Ok(true)
        }
        ReplicaError::OffsetOutOfRange => {
            let (leo, _) = replica.fetch_position();
            if leo < data.log_start_offset {
                replica.truncate_fully_and_start_at(fetched_in, data.log_start_offset)?;
            } else if data.log_end_offset >= 0 && leo > data.log_end_offset {
                replica.truncate_to(fetched_in, data.log_end_offset)?;
            }
            Ok(true)
        }
        _ => {
            tracing::debug!(topic = %data.topic, partition = data.partition, error = ?error, message = %data.message, "leader refused the fetch");
            Ok(false)
        }
    }
}

#[cfg(test)]
#[path = "fetcher_tests.rs"]
mod tests;
