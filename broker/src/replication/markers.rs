//! The leader side of `WriteMarkers`: a transaction coordinator's markers, each appended to
//! the partition it names as a control batch and replicated to the in-sync replicas before it
//! is answered (Kafka's WriteTxnMarkers, on the internal port). A repeated marker (the
//! coordinator retries after a timeout or a failover) is appended again and changes nothing:
//! the transaction it ends is no longer open. A marker on a `__consumer_offsets` partition
//! also settles the offsets the transaction committed there (TxnOffsetCommit), once
//! replicated.

use std::time::Duration;

use strom_proto::replication::{
    MarkerError, MarkerPartitionResult, MarkerResult, TxnMarker, WriteMarkersRequest, WriteMarkersResponse,
};

use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::partition::transactions::{Marker, MarkerType};
use crate::partition::{PartitionError, ReplicaManager};
use crate::time::now_ms;

/// How long a marker waits for the in-sync replicas.
pub const MARKER_REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes every marker of `req` to the partitions this broker leads.
pub async fn write_markers(
    replicas: &ReplicaManager,
    groups: Option<&GroupCoordinator>,
    req: &WriteMarkersRequest,
    timeout: Duration,
) -> WriteMarkersResponse {
    let mut results = Vec::with_capacity(req.markers.len());
    for marker in &req.markers {
        let mut partitions = Vec::with_capacity(marker.partitions.len());
        for p in &marker.partitions {
            let (error, message) = match write_one(replicas, marker, &p.topic, p.partition, timeout).await {
                Ok(()) => {
                    if let (Some(groups), OFFSETS_TOPIC) = (groups, p.topic.as_str()) {
                        groups.complete_txn(p.partition, marker.producer_id, marker.commit);
                    }
                    (MarkerError::MarkerNone, String::new())
                }
                Err((error, message)) => (error, message),
            };
            partitions.push(MarkerPartitionResult {
                topic: p.topic.clone(),
                partition: p.partition,
                error: error.into(),
                message,
            });
        }
        results.push(MarkerResult { producer_id: marker.producer_id, partitions });
    }
    WriteMarkersResponse { results }
}

async fn write_one(
    replicas: &ReplicaManager,
    marker: &TxnMarker,
    topic: &str,
    index: i32,
    timeout: Duration,
) -> Result<(), (MarkerError, String)> {
    let Some(partition) = replicas.get(topic, index) else {
        return Err((MarkerError::MarkerUnknownPartition, format!("{topic}-{index} is not here")));
    };
    let epoch = i16::try_from(marker.producer_epoch)
        .map_err(|_| (MarkerError::MarkerInvalidProducerEpoch, format!("epoch {}", marker.producer_epoch)))?;
    let kind = if marker.commit { MarkerType::Commit } else { MarkerType::Abort };
    let written = Marker { kind, coordinator_epoch: marker.coordinator_epoch };
    let offset = partition.write_marker(marker.producer_id, epoch, written, now_ms()).map_err(classify)?;
    let min_insync = partition.config().min_insync_replicas;
    partition.wait_for_replication(offset, min_insync, timeout).await.map_err(classify)
}

fn classify(e: PartitionError) -> (MarkerError, String) {
    let error = match &e {
        PartitionError::NotLeader { .. } | PartitionError::NotFollowing { .. } => MarkerError::MarkerNotLeader,
        PartitionError::Sequence { .. } => MarkerError::MarkerInvalidProducerEpoch,
        PartitionError::MarkerFenced { .. } => MarkerError::MarkerCoordinatorFenced,
        PartitionError::NotEnoughReplicas { .. }
        | PartitionError::NotEnoughReplicasAfterAppend { .. }
        | PartitionError::ReplicationTimeout { .. } => MarkerError::MarkerNotReplicated,
        _ => MarkerError::MarkerStorageError,
    };
    (error, crate::error_chain::display(&e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use strom_proto::replication::MarkerPartition;

    use super::*;
    use crate::config::BrokerConfig;
    use crate::metadata::TopicMetadata;
    use crate::partition::transactional::Isolation;
    use crate::partition::Leadership;

    fn marker(producer_epoch: i32, commit: bool, coordinator_epoch: i32, partitions: &[(&str, i32)]) -> TxnMarker {
        TxnMarker {
            producer_id: 9,
            producer_epoch,
            commit,
            coordinator_epoch,
            partitions: partitions
                .iter()
                .map(|(t, p)| MarkerPartition { topic: t.to_string(), partition: *p })
                .collect(),
        }
    }

    fn errors(resp: &WriteMarkersResponse) -> Vec<Vec<MarkerError>> {
        resp.results
            .iter()
            .map(|r| r.partitions.iter().map(|p| MarkerError::try_from(p.error).unwrap()).collect())
            .collect()
    }

    #[tokio::test]
    async fn markers_are_written_where_this_broker_leads_and_refused_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Arc::new(BrokerConfig { data_dir: dir.path().to_path_buf(), ..BrokerConfig::default() });
        let replicas = ReplicaManager::new(dir.path(), broker);
        let topic = TopicMetadata {
            name: "out".to_string(),
            id: uuid::Uuid::from_u128(5),
            partitions: vec![],
            configs: BTreeMap::new(),
        };
        let led = replicas.ensure_partition(&topic, 0).unwrap();
        led.set_leadership(Leadership::sole_leader(0, 0));
        let followed = replicas.ensure_partition(&topic, 1).unwrap();
        followed.set_leadership(Leadership { is_leader: false, leader: 1, ..Leadership::sole_leader(0, 0) });

        let req = WriteMarkersRequest { markers: vec![marker(2, false, 1, &[("out", 0), ("out", 1), ("gone", 0)])] };
        let resp = write_markers(&replicas, None, &req, Duration::from_secs(5)).await;
        assert_eq!(
            errors(&resp),
            vec![vec![MarkerError::MarkerNone, MarkerError::MarkerNotLeader, MarkerError::MarkerUnknownPartition]]
        );
        assert_eq!(led.log_end_offset(), 1, "one control batch");
        assert_eq!(led.high_watermark(), 1, "replicated to the ISR (this broker alone) before the answer");
        let read = led.read_slice(0, 1 << 20, true, Isolation::ReadCommitted).unwrap();
        assert_eq!(read.stability.last_stable_offset, 1);

        // A repeat changes nothing; an older producer epoch or coordinator epoch is fenced.
        let again = write_markers(&replicas, None, &req, Duration::from_secs(5)).await;
        assert_eq!(errors(&again)[0][0], MarkerError::MarkerNone);
        let zombie = WriteMarkersRequest { markers: vec![marker(1, true, 1, &[("out", 0)])] };
        assert_eq!(
            errors(&write_markers(&replicas, None, &zombie, Duration::from_secs(5)).await)[0][0],
            MarkerError::MarkerInvalidProducerEpoch
        );
        let stale = WriteMarkersRequest { markers: vec![marker(2, true, 0, &[("out", 0)])] };
        assert_eq!(
            errors(&write_markers(&replicas, None, &stale, Duration::from_secs(5)).await)[0][0],
            MarkerError::MarkerCoordinatorFenced
        );
    }
}
