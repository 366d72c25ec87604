//! ISR maintenance on the leader: every half second, each partition this broker leads is
//! checked for followers that fell out of sync (not caught up for `replica.lag.time.max.ms`)
//! or came back in sync; the change is asked of the controller (AlterPartition) and takes
//! effect when the metadata image carries it — never before, so the high watermark is never
//! computed from an ISR the controller has not agreed to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::metadata::client::{ClientError, ControllerClient};
use crate::metadata::controller::AlterPartition;
use crate::partition::ReplicaManager;
use crate::shutdown::Shutdown;

const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Counts of committed ISR changes made by this broker as a leader, for metrics.
#[derive(Debug, Default)]
pub struct IsrChanges {
    pub shrinks: AtomicU64,
    pub expands: AtomicU64,
}

/// Runs until shutdown.
pub async fn run(
    replicas: Arc<ReplicaManager>,
    client: ControllerClient,
    me: i32,
    epoch: watch::Receiver<Option<u64>>,
    max_lag: Duration,
    counts: Arc<IsrChanges>,
    mut shutdown: Shutdown,
) {
    let mut ticker = tokio::time::interval(CHECK_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => {}
        }
        let Some(broker_epoch) = *epoch.borrow() else { continue };
        for partition in replicas.all().into_iter().filter(|p| p.is_leader()) {
            let Some(proposal) = partition.isr_proposal(max_lag) else { continue };
            let request = AlterPartition {
                broker: me,
                broker_epoch,
                topic_id: partition.topic_id,
                partition: partition.index,
                leader_epoch: proposal.leader_epoch,
                partition_epoch: proposal.partition_epoch,
                new_isr: proposal.isr.clone(),
            };
            let before = partition.leadership().isr;
            match client.alter_partition(&request, Duration::from_secs(10)).await {
                Ok((isr, _)) => {
                    let counter = if proposal.expanded { &counts.expands } else { &counts.shrinks };
                    counter.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(topic = %partition.topic, partition = partition.index, from = ?before, to = ?isr, "ISR {}", if proposal.expanded { "expanded" } else { "shrunk" });
                }
                Err(ClientError::Refused { code, message }) => {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, ?code, %message, "ISR change refused; waiting for the metadata");
                }
                Err(e) => {
                    tracing::warn!(topic = %partition.topic, partition = partition.index, error = %e, "ISR change not committed")
                }
            }
        }
    }
}
