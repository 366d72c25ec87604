//! Where the coordinator's markers go: each partition's leader, as the metadata image names
//! it. This broker's own replicas are written directly; other leaders get `WriteMarkers` over
//! the internal port. A partition whose leader moved, is unknown for now, or did not
//! replicate in time is tried again; one that is gone (deleted) or that refuses the producer
//! or coordinator epoch as fenced needs no marker from this coordinator.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use strom_proto::replication::replication_client::ReplicationClient;
use strom_proto::replication::{MarkerError, MarkerPartition, TxnMarker, WriteMarkersRequest, WriteMarkersResponse};
use tokio::sync::watch;

use super::coordinator::MarkerSink;
use crate::group::GroupCoordinator;
use crate::metadata::network::Channels;
use crate::metadata::MetadataImage;
use crate::partition::ReplicaManager;
use crate::replication::markers::{write_markers, MARKER_REPLICATION_TIMEOUT};

/// The markers of this broker's coordinator, sent to the partitions' leaders.
pub struct ClusterMarkers {
    pub me: i32,
    pub replicas: Arc<ReplicaManager>,
    /// This broker's group coordinator (transactional offsets on `__consumer_offsets`).
    pub groups: Arc<GroupCoordinator>,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub channels: Channels,
}

/// Whether a partition's answer means it must be tried again.
fn retry(error: MarkerError) -> bool {
    matches!(error, MarkerError::MarkerNotLeader | MarkerError::MarkerNotReplicated | MarkerError::MarkerStorageError)
}

#[tonic::async_trait]
impl MarkerSink for ClusterMarkers {
    async fn write(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        partitions: &BTreeSet<(String, i32)>,
    ) -> BTreeSet<(String, i32)> {
        let image = self.image.borrow().clone();
        let mut again = BTreeSet::new();
        let mut by_leader: BTreeMap<i32, Vec<MarkerPartition>> = BTreeMap::new();
        for (topic, p) in partitions {
            match image.topic(topic).map(|t| t.partition(*p).map(|r| r.leader)) {
                // Deleted: nothing left to mark.
                None | Some(None) => {}
                Some(Some(leader)) if leader >= 0 => {
                    by_leader.entry(leader).or_default().push(MarkerPartition { topic: topic.clone(), partition: *p })
                }
                Some(Some(_)) => {
                    again.insert((topic.clone(), *p));
                }
            }
        }
        for (leader, partitions) in by_leader {
            let request = WriteMarkersRequest {
                markers: vec![TxnMarker {
                    producer_id,
                    producer_epoch: i32::from(producer_epoch),
                    commit,
                    coordinator_epoch,
                    partitions: partitions.clone(),
                }],
            };
            let answer = if leader == self.me {
                Ok(write_markers(&self.replicas, Some(&self.groups), &request, MARKER_REPLICATION_TIMEOUT).await)
            } else {
                self.remote(&image, leader, request).await
            };
            match answer {
                Ok(resp) => {
                    for r in resp.results.iter().flat_map(|r| &r.partitions) {
                        let error = MarkerError::try_from(r.error).unwrap_or(MarkerError::MarkerStorageError);
                        if retry(error) {
                            again.insert((r.topic.clone(), r.partition));
                        } else if error != MarkerError::MarkerNone && error != MarkerError::MarkerUnknownPartition {
                            tracing::warn!(producer_id, topic = %r.topic, partition = r.partition, ?error, message = %r.message, "a marker was refused");
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(leader, error = %e, "sending markers failed; trying again");
                    again.extend(partitions.into_iter().map(|p| (p.topic, p.partition)));
                }
            }
        }
        again
    }
}

impl ClusterMarkers {
    async fn remote(
        &self,
        image: &MetadataImage,
        leader: i32,
        request: WriteMarkersRequest,
    ) -> Result<WriteMarkersResponse, String> {
        let addr = image.broker(leader).map(|b| b.internal_addr.clone()).ok_or("leader not registered")?;
        let channel = self.channels.get(&addr).map_err(|e| e.to_string())?;
        let mut client = ReplicationClient::new(channel);
        let call = client.write_markers(request);
        match tokio::time::timeout(MARKER_REPLICATION_TIMEOUT + std::time::Duration::from_secs(5), call).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) => Err(status.message().to_string()),
            Err(_) => Err("timed out".into()),
        }
    }
}
