//! [`MetadataImage`]: the cluster's metadata as the applied log describes it — cluster id,
//! brokers, topics with their partitions, the next producer id — and [`MetadataImage::apply`],
//! the pure function from (image, command) to the next image. Every broker holds the same
//! image at the same log index; Kafka requests are answered from it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::command::{CommandError, CommandResult, Endpoint, MetadataCommand, PartitionChange};

/// One partition's replicas and leadership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRegistration {
    /// Broker ids; the first is the preferred leader.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// The leader, -1 when the partition is offline.
    pub leader: i32,
    /// Bumped on every leader change (Kafka's leader epoch).
    pub leader_epoch: i32,
    /// Bumped on every change of leader or ISR; guards [`PartitionChange`]s.
    pub partition_epoch: i32,
    /// During a reassignment: replicas being added (they fetch, and join the ISR when caught up).
    #[serde(default)]
    pub adding: Vec<i32>,
    /// During a reassignment: replicas to remove once every added one is in sync.
    #[serde(default)]
    pub removing: Vec<i32>,
    /// Eligible leader replicas (KIP-966): replicas that left the ISR while it was smaller
    /// than min.insync.replicas. The high watermark does not advance while it is, so each
    /// holds every record below it and may lead when no in-sync replica is live.
    #[serde(default)]
    pub elr: Vec<i32>,
}

impl PartitionRegistration {
    pub fn is_reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replicas the partition had before its reassignment started.
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas.iter().copied().filter(|r| !self.adding.contains(r)).collect()
    }

    /// The replicas the partition will have when its reassignment completes.
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas.iter().copied().filter(|r| !self.removing.contains(r)).collect()
    }
}

/// One topic as the cluster knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    pub name: String,
    pub id: Uuid,
    /// Config overrides; keys left out take the broker's defaults.
    pub configs: BTreeMap<String, String>,
    /// Partition `i` at index `i`.
    pub partitions: Vec<PartitionRegistration>,
}

impl TopicMetadata {
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }

    pub fn partition(&self, index: i32) -> Option<&PartitionRegistration> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }

    /// The replication factor (of partition 0; all partitions share it).
    pub fn replication_factor(&self) -> i16 {
        self.partitions.first().map_or(0, |p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX))
    }
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: i32,
    /// Unique per process start.
    pub incarnation: Uuid,
    /// The log index of the registration.
    pub epoch: u64,
    pub kafka: Endpoint,
    pub internal_addr: String,
    pub rack: Option<String>,
    /// A fenced broker leads nothing and is not listed to clients.
    pub fenced: bool,
}

/// The cluster's metadata at one log index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    pub cluster_id: Option<String>,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, Arc<TopicMetadata>>,
    /// Topic id → name.
    pub topic_names: BTreeMap<Uuid, String>,
    pub next_producer_id: i64,
    /// Bytes/s a leader may send to replicas a reassignment adds (None: unlimited).
    #[serde(default)]
    pub replication_throttle: Option<u64>,
    /// The index of the last log entry applied (raft's blank and membership entries included).
    pub applied_index: u64,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicMetadata>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicMetadata>> {
        self.topic_names.get(&id).and_then(|n| self.topics.get(n))
    }

    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&id)
    }

    /// Brokers that are registered and not fenced.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    pub fn is_live(&self, id: i32) -> bool {
        self.brokers.get(&id).is_some_and(|b| !b.fenced)
    }

    /// Every partition as (topic, index, registration).
    pub fn partitions(&self) -> impl Iterator<Item = (&Arc<TopicMetadata>, i32, &PartitionRegistration)> {
        self.topics.values().flat_map(|t| {
            t.partitions.iter().enumerate().map(move |(i, p)| (t, i32::try_from(i).unwrap_or(i32::MAX), p))
        })
    }

    /// Applies the command at `log_index`. Pure: no clocks, no randomness, no IO.
    pub fn apply(&mut self, command: &MetadataCommand, log_index: u64) -> CommandResult {
        self.applied_index = log_index;
        match self.apply_inner(command, log_index) {
            Ok(result) => result,
            Err(e) => CommandResult::Refused(e),
        }
    }

    /// Records that a log entry without a command (blank, membership) was applied.
    pub fn advance(&mut self, log_index: u64) {
        self.applied_index = log_index;
    }

    fn apply_inner(&mut self, command: &MetadataCommand, log_index: u64) -> Result<CommandResult, CommandError> {
        match command {
            MetadataCommand::InitCluster { cluster_id } => {
                if let Some(existing) = &self.cluster_id {
                    return Err(CommandError::ClusterIdSet(existing.clone()));
                }
                self.cluster_id = Some(cluster_id.clone());
                Ok(CommandResult::Done)
            }
            MetadataCommand::RegisterBroker { id, incarnation, kafka, internal_addr, rack, changes } => {
                self.brokers.insert(
                    *id,
                    BrokerRegistration {
                        id: *id,
                        incarnation: *incarnation,
                        epoch: log_index,
                        kafka: kafka.clone(),
                        internal_addr: internal_addr.clone(),
                        rack: rack.clone(),
                        fenced: true,
                    },
                );
                self.apply_changes(changes);
                Ok(CommandResult::Registered { broker_epoch: log_index })
            }
            MetadataCommand::FenceBroker { id, epoch, changes } => {
                self.current_broker(*id, *epoch)?.fenced = true;
                self.apply_changes(changes);
                Ok(CommandResult::Done)
            }
            MetadataCommand::UnfenceBroker { id, epoch, changes } => {
                self.current_broker(*id, *epoch)?.fenced = false;
                self.apply_changes(changes);
                Ok(CommandResult::Done)
            }
            MetadataCommand::CreateTopic { name, id, configs, assignment } => {
                if self.topics.contains_key(name) {
                    return Err(CommandError::TopicAlreadyExists(name.clone()));
                }
                if self.topic_names.contains_key(id) {
                    return Err(CommandError::Invalid(format!("topic id {id} is already in use")));
                }
                let partitions = assignment.iter().map(|replicas| self.new_partition(replicas)).collect();
                let topic = TopicMetadata { name: name.clone(), id: *id, configs: configs.clone(), partitions };
                self.topic_names.insert(*id, name.clone());
                self.topics.insert(name.clone(), Arc::new(topic));
                Ok(CommandResult::Done)
            }
            MetadataCommand::DeleteTopic { id } => {
                let name = self.topic_names.remove(id).ok_or(CommandError::UnknownTopicId(*id))?;
                self.topics.remove(&name);
                Ok(CommandResult::Done)
            }
            MetadataCommand::CreatePartitions { id, assignment } => {
                let added: Vec<PartitionRegistration> = assignment.iter().map(|r| self.new_partition(r)).collect();
                let topic = self.topic_mut(*id)?;
                topic.partitions.extend(added);
                Ok(CommandResult::Done)
            }
            MetadataCommand::AlterTopicConfigs { id, configs } => {
                self.topic_mut(*id)?.configs = configs.clone();
                Ok(CommandResult::Done)
            }
            MetadataCommand::ChangePartitions { changes, .. } => {
                self.apply_changes(changes);
                Ok(CommandResult::Done)
            }
            MetadataCommand::UnregisterBroker { id } => {
                if self.partitions().any(|(_, _, p)| p.replicas.contains(id)) {
                    return Err(CommandError::Invalid(format!("broker {id} still holds replicas")));
                }
                self.brokers.remove(id).ok_or(CommandError::UnknownBroker(*id))?;
                Ok(CommandResult::Done)
            }
            MetadataCommand::SetReplicationThrottle { bytes_per_sec } => {
                self.replication_throttle = *bytes_per_sec;
                Ok(CommandResult::Done)
            }
            MetadataCommand::AllocateProducerIds { broker_id, broker_epoch, count } => {
                self.current_broker(*broker_id, *broker_epoch)?;
                if *count <= 0 {
                    return Err(CommandError::Invalid(format!("producer id block of {count}")));
                }
                let first = self.next_producer_id;
                self.next_producer_id = first
                    .checked_add(i64::from(*count))
                    .ok_or_else(|| CommandError::Invalid("producer ids are exhausted".into()))?;
                Ok(CommandResult::ProducerIds { first, count: *count })
            }
        }
    }

    fn current_broker(&mut self, id: i32, epoch: u64) -> Result<&mut BrokerRegistration, CommandError> {
        let broker = self.brokers.get_mut(&id).ok_or(CommandError::UnknownBroker(id))?;
        if broker.epoch != epoch {
            return Err(CommandError::StaleBrokerEpoch { id, given: epoch, current: broker.epoch });
        }
        Ok(broker)
    }

    fn topic_mut(&mut self, id: Uuid) -> Result<&mut TopicMetadata, CommandError> {
        let name = self.topic_names.get(&id).ok_or(CommandError::UnknownTopicId(id))?;
        let topic = self.topics.get_mut(name).ok_or(CommandError::UnknownTopicId(id))?;
        Ok(Arc::make_mut(topic))
    }

    /// A new partition: every replica in sync, led by the first live one.
    fn new_partition(&self, replicas: &[i32]) -> PartitionRegistration {
        let leader = replicas.iter().copied().find(|b| self.is_live(*b)).unwrap_or(-1);
        PartitionRegistration {
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
            elr: Vec::new(),
        }
    }

    fn apply_changes(&mut self, changes: &[PartitionChange]) {
        for change in changes {
            let Ok(topic) = self.topic_mut(change.topic_id) else { continue };
            let Some(p) = usize::try_from(change.partition).ok().and_then(|i| topic.partitions.get_mut(i)) else {
                continue;
            };
            if p.partition_epoch != change.expected_partition_epoch {
                // Decided against an older state of the partition: the controller decides again.
                continue;
            }
            if p.leader != change.leader {
                p.leader = change.leader;
                p.leader_epoch += 1;
            }
            p.isr = change.isr.clone();
            if let Some(elr) = &change.elr {
                p.elr = elr.clone();
            }
            if let Some(set) = &change.replicas {
                p.replicas = set.replicas.clone();
                p.adding = set.adding.clone();
                p.removing = set.removing.clone();
                let replicas = &p.replicas;
                p.elr.retain(|r| replicas.contains(r));
            }
            p.partition_epoch += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(image: &mut MetadataImage, id: i32, index: u64) -> u64 {
        let cmd = MetadataCommand::RegisterBroker {
            id,
            incarnation: Uuid::from_u128(u128::try_from(id).unwrap_or(0) + 1),
            kafka: Endpoint { host: "127.0.0.1".into(), port: 9092 + id },
            internal_addr: format!("127.0.0.1:{}", 9093 + id),
            rack: None,
            changes: vec![],
        };
        match image.apply(&cmd, index) {
            CommandResult::Registered { broker_epoch } => broker_epoch,
            other => panic!("registration failed: {other:?}"),
        }
    }

    fn live_cluster(n: i32) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 0..n {
            let epoch = register(&mut image, id, 10 + u64::try_from(id).unwrap_or(0));
            let unfence = MetadataCommand::UnfenceBroker { id, epoch, changes: vec![] };
            assert_eq!(image.apply(&unfence, 20 + epoch), CommandResult::Done);
        }
        image
    }

    #[test]
    fn a_registered_broker_is_fenced_until_unfenced_and_its_epoch_is_the_log_index() {
        let mut image = MetadataImage::default();
        let epoch = register(&mut image, 3, 42);
        assert_eq!(epoch, 42);
        assert!(image.broker(3).is_some_and(|b| b.fenced));
        let stale = MetadataCommand::UnfenceBroker { id: 3, epoch: 41, changes: vec![] };
        assert!(matches!(image.apply(&stale, 43), CommandResult::Refused(CommandError::StaleBrokerEpoch { .. })));
        assert!(image.broker(3).is_some_and(|b| b.fenced));
        assert_eq!(
            image.apply(&MetadataCommand::UnfenceBroker { id: 3, epoch, changes: vec![] }, 44),
            CommandResult::Done
        );
        assert!(image.is_live(3));
        assert_eq!(image.applied_index, 44);
    }

    #[test]
    fn topics_are_created_led_by_their_first_live_replica_and_deleted_by_id() {
        let mut image = live_cluster(2);
        let id = Uuid::from_u128(7);
        let create = MetadataCommand::CreateTopic {
            name: "orders".into(),
            id,
            configs: BTreeMap::new(),
            assignment: vec![vec![1], vec![5, 0]],
        };
        assert_eq!(image.apply(&create, 50), CommandResult::Done);
        let topic = image.topic("orders").expect("created");
        assert_eq!(topic.partitions[0].leader, 1);
        assert_eq!(topic.partitions[1].leader, 0, "broker 5 is not registered");
        assert_eq!(image.topic_by_id(id).map(|t| t.name.as_str()), Some("orders"));
        assert!(matches!(image.apply(&create, 51), CommandResult::Refused(CommandError::TopicAlreadyExists(_))));
        assert_eq!(image.apply(&MetadataCommand::DeleteTopic { id }, 52), CommandResult::Done);
        assert!(image.topic("orders").is_none() && image.topic_by_id(id).is_none());
    }

    #[test]
    fn a_partition_change_applies_only_at_the_epoch_it_was_decided_at() {
        let mut image = live_cluster(2);
        let id = Uuid::from_u128(9);
        let create =
            MetadataCommand::CreateTopic { name: "t".into(), id, configs: BTreeMap::new(), assignment: vec![vec![0]] };
        image.apply(&create, 60);
        let epoch = image.broker(0).map(|b| b.epoch).unwrap_or_default();
        let offline = PartitionChange {
            topic_id: id,
            partition: 0,
            leader: -1,
            isr: vec![0],
            expected_partition_epoch: 0,
            replicas: None,
            elr: None,
        };
        image.apply(&MetadataCommand::FenceBroker { id: 0, epoch, changes: vec![offline.clone()] }, 61);
        let p = image.topic("t").map(|t| t.partitions[0].clone()).expect("topic");
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (-1, 1, 1));
        // The same change again was decided at epoch 0: ignored.
        image.apply(&MetadataCommand::UnfenceBroker { id: 0, epoch, changes: vec![offline] }, 62);
        let p = image.topic("t").map(|t| t.partitions[0].clone()).expect("topic");
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (-1, 1, 1));
    }

    #[test]
    fn producer_id_blocks_never_overlap_and_need_the_current_broker_epoch() {
        let mut image = live_cluster(1);
        let epoch = image.broker(0).map(|b| b.epoch).unwrap_or_default();
        let alloc = MetadataCommand::AllocateProducerIds { broker_id: 0, broker_epoch: epoch, count: 1000 };
        assert_eq!(image.apply(&alloc, 70), CommandResult::ProducerIds { first: 0, count: 1000 });
        assert_eq!(image.apply(&alloc, 71), CommandResult::ProducerIds { first: 1000, count: 1000 });
        let stale = MetadataCommand::AllocateProducerIds { broker_id: 0, broker_epoch: epoch + 1, count: 1000 };
        assert!(matches!(image.apply(&stale, 72), CommandResult::Refused(_)));
    }

    #[test]
    fn replaying_the_same_log_gives_the_same_image_and_it_survives_serde() {
        let build = || {
            let mut image = live_cluster(3);
            let create = MetadataCommand::CreateTopic {
                name: "x".into(),
                id: Uuid::from_u128(1),
                configs: BTreeMap::from([("retention.ms".into(), "1000".into())]),
                assignment: vec![vec![0], vec![1], vec![2]],
            };
            image.apply(&create, 100);
            image.apply(&MetadataCommand::InitCluster { cluster_id: "c".into() }, 101);
            image
        };
        let (a, b) = (build(), build());
        assert_eq!(a, b);
        let json = serde_json::to_vec(&a).expect("serialize");
        let back: MetadataImage = serde_json::from_slice(&json).expect("deserialize");
        assert_eq!(back, a);
    }
}
