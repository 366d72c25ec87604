//! Leader elections when a broker is fenced or comes back: pure functions from the image to
//! the [`PartitionChange`]s the controller proposes.
//!
//! Fencing a broker moves leadership of each partition it leads to another live in-sync
//! replica, or leaves the partition offline (leader -1) when there is none; the fenced broker
//! leaves the ISR unless it is the last member (as in KRaft: the last in-sync replica is
//! remembered, so the partition can come back without losing data). Unfencing a broker makes
//! it leader of every offline partition whose ISR holds it, and — only for topics with
//! `unclean.leader.election.enable=true` — of offline partitions it merely replicates. Such
//! topics also get a live out-of-sync replica as leader when their last in-sync one is fenced.

use super::super::command::PartitionChange;
use super::super::image::{MetadataImage, PartitionRegistration};

fn change(topic_id: uuid::Uuid, index: i32, p: &PartitionRegistration, leader: i32, isr: Vec<i32>) -> PartitionChange {
    PartitionChange {
        topic_id,
        partition: index,
        leader,
        isr,
        expected_partition_epoch: p.partition_epoch,
        replicas: None,
    }
}

/// What fencing `broker` changes.
pub fn on_fence(image: &MetadataImage, broker: i32) -> Vec<PartitionChange> {
    let mut out = Vec::new();
    for (topic, index, p) in image.partitions() {
        let in_isr = p.isr.contains(&broker);
        if p.leader != broker && !in_isr {
            continue;
        }
        let others: Vec<i32> = p.isr.iter().copied().filter(|b| *b != broker).collect();
        let mut isr = if others.is_empty() { p.isr.clone() } else { others };
        let mut leader = if p.leader == broker {
            // Prefer replicas in replica order, so the preferred leader wins when it can.
            p.replicas.iter().copied().find(|b| *b != broker && isr.contains(b) && image.is_live(*b)).unwrap_or(-1)
        } else {
            p.leader
        };
        if leader == -1 && p.leader == broker && unclean_allowed(&topic.configs) {
            // No live in-sync replica: an unclean election, as the topic allows.
            if let Some(b) = p.replicas.iter().copied().find(|b| *b != broker && image.is_live(*b)) {
                (leader, isr) = (b, vec![b]);
            }
        }
        if leader != p.leader || isr != p.isr {
            out.push(change(topic.id, index, p, leader, isr));
        }
    }
    out
}

/// What unfencing `broker` changes.
pub fn on_unfence(image: &MetadataImage, broker: i32) -> Vec<PartitionChange> {
    let mut out = Vec::new();
    for (topic, index, p) in image.partitions() {
        if p.leader != -1 || !p.replicas.contains(&broker) {
            continue;
        }
        if p.isr.contains(&broker) {
            out.push(change(topic.id, index, p, broker, p.isr.clone()));
        } else if unclean_allowed(&topic.configs) {
            out.push(change(topic.id, index, p, broker, vec![broker]));
        }
    }
    out
}

/// Preferred-leader elections: every partition whose first replica is live and in sync but
/// does not lead gets it back as leader (Kafka's auto.leader.rebalance).
pub fn preferred_leaders(image: &MetadataImage) -> Vec<PartitionChange> {
    let mut out = Vec::new();
    for (topic, index, p) in image.partitions() {
        let Some(&preferred) = p.replicas.first() else { continue };
        if p.leader != preferred && p.isr.contains(&preferred) && image.is_live(preferred) {
            out.push(change(topic.id, index, p, preferred, p.isr.clone()));
        }
    }
    out
}

fn unclean_allowed(configs: &std::collections::BTreeMap<String, String>) -> bool {
    configs.get("unclean.leader.election.enable").is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;
    use crate::metadata::command::Endpoint;
    use crate::metadata::image::{BrokerRegistration, TopicMetadata};

    fn image(live: &[i32], partitions: Vec<PartitionRegistration>, configs: BTreeMap<String, String>) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 0..4 {
            image.brokers.insert(
                id,
                BrokerRegistration {
                    id,
                    incarnation: Uuid::nil(),
                    epoch: 1,
                    kafka: Endpoint { host: "h".into(), port: 1 },
                    internal_addr: "h:2".into(),
                    rack: None,
                    fenced: !live.contains(&id),
                },
            );
        }
        let topic = TopicMetadata { name: "t".into(), id: Uuid::from_u128(1), configs, partitions };
        image.topic_names.insert(topic.id, topic.name.clone());
        image.topics.insert(topic.name.clone(), Arc::new(topic));
        image
    }

    fn p(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRegistration {
        PartitionRegistration {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 3,
            partition_epoch: 7,
            adding: vec![],
            removing: vec![],
        }
    }

    #[test]
    fn a_fenced_single_replica_leader_leaves_its_partition_offline_with_its_isr_kept() {
        let img = image(&[1], vec![p(&[0], &[0], 0)], BTreeMap::new());
        let changes = on_fence(&img, 0);
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].expected_partition_epoch), (-1, vec![0], 7));
    }

    #[test]
    fn leadership_goes_back_to_the_preferred_replica_only_when_it_is_live_and_in_sync() {
        let parts = vec![p(&[0, 1], &[0, 1], 1), p(&[2, 1], &[1], 1), p(&[3, 1], &[3, 1], 1), p(&[1, 0], &[1, 0], 1)];
        let img = image(&[0, 1, 2], parts, BTreeMap::new());
        let changes = preferred_leaders(&img);
        assert_eq!(
            changes.iter().map(|c| (c.partition, c.leader)).collect::<Vec<_>>(),
            vec![(0, 0)],
            "2 is out of sync, 3 fenced, 1 already leads"
        );
    }

    #[test]
    fn a_fenced_leader_hands_over_to_a_live_in_sync_replica() {
        let img = image(&[1, 2], vec![p(&[0, 1, 2], &[0, 2], 0), p(&[1, 0], &[1, 0], 1)], BTreeMap::new());
        let changes = on_fence(&img, 0);
        assert_eq!(changes.len(), 2);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]));
        assert_eq!((changes[1].partition, changes[1].leader, changes[1].isr.clone()), (1, 1, vec![1]));
    }

    #[test]
    fn a_fenced_last_in_sync_leader_hands_over_to_a_live_replica_only_when_unclean_is_allowed() {
        let parts = vec![p(&[0, 1, 2], &[0], 0)];
        let img = image(&[1, 2], parts.clone(), BTreeMap::new());
        let changes = on_fence(&img, 0);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (-1, vec![0]), "clean: offline, 0 remembered");
        let unclean = BTreeMap::from([("unclean.leader.election.enable".to_string(), "true".to_string())]);
        let img = image(&[2], parts, unclean);
        let changes = on_fence(&img, 0);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]), "unclean: the live replica leads");
    }

    #[test]
    fn an_unfenced_broker_leads_offline_partitions_it_is_in_sync_for_and_unclean_ones_only_when_allowed() {
        let parts = vec![p(&[0], &[0], -1), p(&[0, 1], &[1], -1), p(&[2], &[2], 2)];
        let img = image(&[0, 2], parts.clone(), BTreeMap::new());
        let changes = on_unfence(&img, 0);
        assert_eq!(changes.iter().map(|c| (c.partition, c.leader)).collect::<Vec<_>>(), vec![(0, 0)]);
        let unclean = BTreeMap::from([("unclean.leader.election.enable".to_string(), "true".to_string())]);
        let img = image(&[0, 2], parts, unclean);
        let changes = on_unfence(&img, 0);
        assert_eq!(changes.iter().map(|c| (c.partition, c.leader)).collect::<Vec<_>>(), vec![(0, 0), (1, 0)]);
        assert_eq!(changes[1].isr, vec![0]);
    }
}
