//! The fetch loop against a stub leader that holds every fetch and never answers (a leader
//! with nothing new to send, long-polling): the partitions a follower fetches change while a
//! fetch is held, and the next fetch must name them at once, not after the held one ends.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use strom_proto::replication::replication_server::{Replication, ReplicationServer};
use strom_proto::replication::{FetchRequest, FetchResponse};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use super::{FetcherConfig, FollowTarget, ReplicaFetchers};
use crate::config::BrokerConfig;
use crate::metadata::command::Endpoint;
use crate::metadata::image::{BrokerRegistration, MetadataImage, TopicMetadata};
use crate::metadata::network::Channels;
use crate::partition::ReplicaManager;

/// Reports the partitions each fetch names, then holds it forever.
struct HoldingLeader {
    seen: mpsc::UnboundedSender<BTreeSet<String>>,
}

#[tonic::async_trait]
impl Replication for HoldingLeader {
    async fn fetch(
        &self,
        request: tonic::Request<FetchRequest>,
    ) -> Result<tonic::Response<FetchResponse>, tonic::Status> {
        let named = request.into_inner().partitions.iter().map(|p| format!("{}-{}", p.topic, p.partition)).collect();
        let _ = self.seen.send(named);
        std::future::pending().await
    }

    async fn write_markers(
        &self,
        _: tonic::Request<strom_proto::replication::WriteMarkersRequest>,
    ) -> Result<tonic::Response<strom_proto::replication::WriteMarkersResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("a fetch-only test leader"))
    }
}

async fn start_holding_leader() -> (String, mpsc::UnboundedReceiver<BTreeSet<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (seen, fetches) = mpsc::unbounded_channel();
    let incoming = futures::stream::unfold(listener, |l| async move {
        let accepted = l.accept().await.map(|(s, _)| s);
        Some((accepted, l))
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ReplicationServer::new(HoldingLeader { seen }))
            .serve_with_incoming(incoming),
    );
    (addr, fetches)
}

fn topic(name: &str) -> TopicMetadata {
    TopicMetadata { name: name.into(), id: Uuid::new_v4(), configs: BTreeMap::new(), partitions: Vec::new() }
}

#[tokio::test]
async fn a_partition_followed_while_a_fetch_is_held_is_fetched_at_once() {
    const LEADER: i32 = 0;
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Arc::new(BrokerConfig { node_id: 1, ..BrokerConfig::default() });
    let replicas = Arc::new(ReplicaManager::new(dir.path(), broker));
    let (addr, mut fetches) = start_holding_leader().await;
    let mut image = MetadataImage::default();
    image.brokers.insert(
        LEADER,
        BrokerRegistration {
            id: LEADER,
            incarnation: Uuid::new_v4(),
            epoch: 1,
            kafka: Endpoint { host: "127.0.0.1".into(), port: 9092 },
            internal_addr: addr,
            rack: None,
            fenced: false,
        },
    );
    let (_image_tx, image_rx) = watch::channel(Arc::new(image));
    let (_epoch_tx, epoch_rx) = watch::channel(Some(7u64));
    let (_trigger, shutdown) = crate::shutdown::channel();
    // A held fetch would only be given up after max_wait + 10 s: far beyond this test's wait.
    let config =
        FetcherConfig { me: 1, max_wait: Duration::from_secs(60), max_bytes: 1 << 20, fsync_before_next_fetch: false };
    let fetchers = ReplicaFetchers::new(config, replicas.clone(), Channels::default(), image_rx, epoch_rx, shutdown);

    let follow =
        |t: &TopicMetadata| ((t.name.clone(), 0), FollowTarget { leader: LEADER, topic_id: t.id, leader_epoch: 0 });
    let (old, new) = (topic("old"), topic("new"));
    replicas.ensure_partition(&old, 0).expect("open old-0");
    fetchers.set([follow(&old)].into_iter().collect());
    let first = tokio::time::timeout(Duration::from_secs(30), fetches.recv()).await.expect("a first fetch");
    assert_eq!(first, Some(BTreeSet::from(["old-0".to_string()])));

    // The first fetch is still held by the leader when a second partition is followed.
    replicas.ensure_partition(&new, 0).expect("open new-0");
    fetchers.set([follow(&old), follow(&new)].into_iter().collect());
    let second = tokio::time::timeout(Duration::from_secs(30), fetches.recv())
        .await
        .expect("a fetch naming the new partition while the first is still held");
    assert_eq!(second, Some(BTreeSet::from(["old-0".to_string(), "new-0".to_string()])));
}
