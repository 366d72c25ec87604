//! Partition reassignment as pure steps (Kafka's KIP-455), each one a [`PartitionChange`] the
//! controller commits:
//!
//! 1. [`start`]: the replica set becomes target + (original − target); the new replicas are
//!    `adding`, the leaving ones `removing`. New replicas open the partition and fetch.
//! 2. The leader adds them to the ISR as they catch up (the ordinary ISR expansion).
//! 3. [`complete`]: once every added replica is in sync, the replica set becomes the target,
//!    the ISR loses the removed replicas, and leadership moves to the target's first replica
//!    (the preferred leader) if it is in sync, else stays or goes to an in-sync target replica.
//!    A target that only reorders the replicas takes effect in [`start`] at once. Brokers no longer named stop serving and delete the replica.
//!
//! [`cancel`] goes back to the original replicas. Every step is in the metadata log, so a new
//! controller carries on where the old one stopped.

use super::super::command::{PartitionChange, ReplicaSet};
use super::super::image::{MetadataImage, PartitionRegistration};

/// The change that starts moving `p` to `target` (None: it is there already).
pub fn start(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    index: i32,
    p: &PartitionRegistration,
    target: &[i32],
) -> Option<PartitionChange> {
    let original = p.original_replicas();
    if original == target && !p.is_reassigning() {
        return None;
    }
    let adding: Vec<i32> = target.iter().copied().filter(|r| !original.contains(r)).collect();
    let removing: Vec<i32> = original.iter().copied().filter(|r| !target.contains(r)).collect();
    let mut replicas = target.to_vec();
    replicas.extend(removing.iter().copied());
    let isr: Vec<i32> = p.isr.iter().copied().filter(|r| replicas.contains(r)).collect();
    // A new order alone (nothing to copy) takes effect at once, leadership included.
    let leader = match target.first() {
        Some(first) if adding.is_empty() && removing.is_empty() && isr.contains(first) && image.is_live(*first) => {
            *first
        }
        _ => p.leader,
    };
    Some(PartitionChange {
        topic_id,
        partition: index,
        leader,
        isr,
        expected_partition_epoch: p.partition_epoch,
        replicas: Some(ReplicaSet { replicas, adding, removing }),
        elr: None,
    })
}

/// The change that finishes `p`'s reassignment, once every added replica is in sync and an
/// in-sync target replica can lead (None: not yet).
pub fn complete(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    index: i32,
    p: &PartitionRegistration,
) -> Option<PartitionChange> {
    if !p.is_reassigning() || !p.adding.iter().all(|r| p.isr.contains(r)) {
        return None;
    }
    let target = p.target_replicas();
    let isr: Vec<i32> = p.isr.iter().copied().filter(|r| target.contains(r)).collect();
    // The preferred (first) target replica leads if it can; otherwise the leader stays if it
    // is staying, or hands over to any in-sync target replica.
    let eligible = |r: &i32| isr.contains(r) && image.is_live(*r);
    let leader = match target.first() {
        Some(first) if eligible(first) => *first,
        _ if target.contains(&p.leader) => p.leader,
        _ => *target.iter().find(|r| eligible(r))?,
    };
    if isr.is_empty() {
        return None;
    }
    Some(PartitionChange {
        topic_id,
        partition: index,
        leader,
        isr,
        expected_partition_epoch: p.partition_epoch,
        replicas: Some(ReplicaSet { replicas: target, adding: Vec::new(), removing: Vec::new() }),
        elr: None,
    })
}

/// The change that abandons `p`'s reassignment: back to the original replicas (None: nothing
/// to cancel, or none of the original replicas is in sync any more).
pub fn cancel(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    index: i32,
    p: &PartitionRegistration,
) -> Option<PartitionChange> {
    if !p.is_reassigning() {
        return None;
    }
    let original = p.original_replicas();
    let isr: Vec<i32> = p.isr.iter().copied().filter(|r| original.contains(r)).collect();
    if isr.is_empty() {
        return None;
    }
    let leader = if original.contains(&p.leader) {
        p.leader
    } else {
        original.iter().copied().find(|r| isr.contains(r) && image.is_live(*r)).unwrap_or(-1)
    };
    Some(PartitionChange {
        topic_id,
        partition: index,
        leader,
        isr,
        expected_partition_epoch: p.partition_epoch,
        replicas: Some(ReplicaSet { replicas: original, adding: Vec::new(), removing: Vec::new() }),
        elr: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;
    use crate::metadata::command::Endpoint;
    use crate::metadata::image::{BrokerRegistration, TopicMetadata};

    fn reg(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRegistration {
        PartitionRegistration {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 1,
            partition_epoch: 4,
            adding: vec![],
            removing: vec![],
            elr: vec![],
        }
    }

    fn image_with(p: PartitionRegistration) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 0..6 {
            image.brokers.insert(
                id,
                BrokerRegistration {
                    id,
                    incarnation: Uuid::nil(),
                    epoch: 1,
                    kafka: Endpoint { host: "h".into(), port: 1 },
                    internal_addr: "h:2".into(),
                    rack: None,
                    fenced: false,
                },
            );
        }
        let topic = TopicMetadata {
            name: "t".into(),
            id: Uuid::from_u128(1),
            configs: Default::default(),
            partitions: vec![p],
        };
        image.topic_names.insert(topic.id, "t".into());
        image.topics.insert("t".into(), Arc::new(topic));
        image
    }

    fn applied(image: &mut MetadataImage, change: PartitionChange, index: u64) -> PartitionRegistration {
        let cmd = crate::metadata::command::MetadataCommand::ChangePartitions {
            reason: "test".into(),
            changes: vec![change],
        };
        image.apply(&cmd, index);
        image.topic("t").expect("topic").partitions[0].clone()
    }

    #[test]
    fn a_move_adds_the_new_replicas_then_drops_the_old_ones_and_hands_over_leadership() {
        let id = Uuid::from_u128(1);
        let mut image = image_with(reg(&[0, 1, 2], &[0, 1, 2], 0));
        let p = image.topic("t").expect("t").partitions[0].clone();
        let change = start(&image, id, 0, &p, &[3, 4, 2]).expect("a change");
        let during = applied(&mut image, change, 10);
        assert_eq!(
            (during.replicas.clone(), during.adding.clone(), during.removing.clone()),
            (vec![3, 4, 2, 0, 1], vec![3, 4], vec![0, 1])
        );
        assert_eq!(during.leader, 0, "leadership stays until the end");
        assert!(complete(&image, id, 0, &during).is_none(), "3 and 4 are not in sync yet");
        let mut in_sync = during.clone();
        in_sync.isr = vec![0, 1, 2, 3, 4];
        let done = complete(&image, id, 0, &in_sync).expect("complete");
        assert_eq!(done.replicas.as_ref().map(|s| s.replicas.clone()), Some(vec![3, 4, 2]));
        assert_eq!(
            (done.leader, done.isr.clone()),
            (3, vec![2, 3, 4]),
            "the leaving leader hands over to an in-sync target replica"
        );
        assert!(start(&image, id, 0, &reg(&[0, 1], &[0, 1], 0), &[0, 1]).is_none(), "already there: nothing to do");
    }

    #[test]
    fn cancelling_goes_back_to_the_original_replicas() {
        let id = Uuid::from_u128(1);
        let mut image = image_with(reg(&[0, 1, 2], &[0, 1, 2], 1));
        let p = image.topic("t").expect("t").partitions[0].clone();
        let change = start(&image, id, 0, &p, &[1, 2, 5]).expect("a change");
        let during = applied(&mut image, change, 10);
        let undone = cancel(&image, id, 0, &during).expect("cancel");
        assert_eq!(undone.replicas.as_ref().map(|s| s.replicas.clone()), Some(vec![1, 2, 0]));
        assert!(undone.replicas.as_ref().is_some_and(|s| s.adding.is_empty() && s.removing.is_empty()));
        assert_eq!(undone.leader, 1);
        assert!(cancel(&image, id, 0, &reg(&[0], &[0], 0)).is_none(), "nothing to cancel");
    }

    #[test]
    fn a_new_order_alone_moves_leadership_at_once_and_completion_prefers_the_first_replica() {
        let id = Uuid::from_u128(1);
        let image = image_with(reg(&[0, 1, 2], &[0, 1, 2], 0));
        let p = image.topic("t").expect("t").partitions[0].clone();
        let reorder = start(&image, id, 0, &p, &[1, 0, 2]).expect("a change");
        assert_eq!(reorder.leader, 1, "nothing to copy: the new first replica leads");
        assert!(reorder.replicas.as_ref().is_some_and(|s| s.adding.is_empty() && s.removing.is_empty()));
        // Moving to [4, 0, 1]: 4 leads once in sync, though the old leader 0 stays.
        let mut during = p.clone();
        during.replicas = vec![4, 0, 1, 2];
        during.adding = vec![4];
        during.removing = vec![2];
        during.isr = vec![0, 1, 2, 4];
        let done = complete(&image, id, 0, &during).expect("complete");
        assert_eq!((done.leader, done.isr.clone()), (4, vec![0, 1, 4]));
        // A preferred replica that is not in sync does not lead; the staying leader does.
        during.isr = vec![0, 1, 2];
        assert!(complete(&image, id, 0, &during).is_none(), "4 is not in sync yet");
    }
}
