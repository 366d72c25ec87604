//! Leader elections when a broker is fenced, comes back or restarts, and the eligible leader
//! replicas (KIP-966) that ISR changes leave: pure functions from the image to the
//! [`PartitionChange`]s the controller proposes.
//!
//! - Fencing a broker moves leadership of each partition it leads to another live in-sync
//!   replica; the fenced broker leaves the ISR unless it is the last member (as in KRaft: the
//!   last in-sync replica is remembered, so the partition can come back without losing data).
//! - With no live in-sync replica, a live *eligible* replica leads (see below); with none of
//!   those either, the partition is offline (leader -1), unless the topic has
//!   `unclean.leader.election.enable=true`: then any live replica leads.
//! - Unfencing a broker makes it leader of every offline partition whose ISR or ELR holds it,
//!   and — unclean topics only — of offline partitions it merely replicates.
//! - A broker that registers again (a new process: it may have lost its unflushed tail in a
//!   power cut) leaves every ELR, as KIP-966 removes replicas with an unclean shutdown. Strom
//!   does not tell clean restarts apart yet, so every restart counts as unclean.
//!
//! **Eligible leader replicas.** A replica that leaves the ISR while the ISR becomes smaller
//! than min.insync.replicas joins the ELR. Partition leaders stop advancing the high
//! watermark while their ISR is that small ("strict min ISR"), so every ELR member holds all
//! the partition's committed records. This closes Kafka's "last replica standing" loss: the
//! ISR shrinks to the leader, the leader loses its unflushed tail in a power cut, and before
//! KIP-966 it was elected again on its return and the others truncated to it. Now an ELR
//! member leads as soon as the leader is fenced. The ELR empties once the ISR has
//! min.insync.replicas members again.

use std::collections::BTreeMap;

use super::super::command::PartitionChange;
use super::super::image::{MetadataImage, PartitionRegistration};

/// A change of `p` to `leader` and `isr`, and to `elr` when it differs.
fn change(
    topic_id: uuid::Uuid,
    index: i32,
    p: &PartitionRegistration,
    leader: i32,
    isr: Vec<i32>,
    elr: Vec<i32>,
) -> PartitionChange {
    PartitionChange {
        topic_id,
        partition: index,
        leader,
        isr,
        expected_partition_epoch: p.partition_epoch,
        replicas: None,
        elr: (elr != p.elr).then_some(elr),
    }
}

/// A topic's min.insync.replicas: its own setting, else the cluster's `default`.
pub fn min_insync(configs: &BTreeMap<String, String>, default: i32) -> usize {
    let value = configs.get("min.insync.replicas").and_then(|v| v.parse::<i32>().ok()).unwrap_or(default);
    usize::try_from(value.max(1)).unwrap_or(1)
}

/// The ELR once `p`'s ISR becomes `isr`: empty when `isr` has `min_insync` members; else the
/// ELR kept, plus the replicas leaving the ISR, minus those in `isr`; in replica order.
pub fn elr_after(p: &PartitionRegistration, isr: &[i32], min_insync: usize) -> Vec<i32> {
    if isr.len() >= min_insync {
        return Vec::new();
    }
    p.replicas.iter().copied().filter(|r| !isr.contains(r) && (p.elr.contains(r) || p.isr.contains(r))).collect()
}

/// What fencing `broker` changes. `default_min_insync` is the cluster's min.insync.replicas.
pub fn on_fence(image: &MetadataImage, broker: i32, default_min_insync: i32) -> Vec<PartitionChange> {
    fenced_or_restarted(image, broker, default_min_insync, false)
}

/// What a new registration of `broker` (a restarted process) changes: as fencing, and it
/// leaves every ELR.
pub fn on_register(image: &MetadataImage, broker: i32, default_min_insync: i32) -> Vec<PartitionChange> {
    fenced_or_restarted(image, broker, default_min_insync, true)
}

fn fenced_or_restarted(
    image: &MetadataImage,
    broker: i32,
    default_min_insync: i32,
    restarted: bool,
) -> Vec<PartitionChange> {
    let mut out = Vec::new();
    for (topic, index, p) in image.partitions() {
        let in_elr = restarted && p.elr.contains(&broker);
        if p.leader != broker && !p.isr.contains(&broker) && !in_elr {
            continue;
        }
        let min = min_insync(&topic.configs, default_min_insync);
        let others: Vec<i32> = p.isr.iter().copied().filter(|b| *b != broker).collect();
        let mut isr = if others.is_empty() { p.isr.clone() } else { others };
        let mut elr = elr_after(p, &isr, min);
        if restarted {
            elr.retain(|b| *b != broker);
            if isr == [broker] && !elr.is_empty() {
                // Its last in-sync replica restarted and may have lost its unflushed tail:
                // an eligible replica leads instead, now or when one is live (KIP-966).
                isr.clear();
            }
        }
        let live = |b: &i32| *b != broker && image.is_live(*b);
        let mut leader = p.leader;
        // Its leader is going, or it is offline already (its last in-sync replica restarting).
        if p.leader == broker || p.leader == -1 {
            // Prefer replicas in replica order, so the preferred leader wins when it can.
            leader = p.replicas.iter().copied().find(|b| isr.contains(b) && live(b)).unwrap_or(-1);
            if leader == -1 {
                if let Some(b) = p.replicas.iter().copied().find(|b| elr.contains(b) && live(b)) {
                    // An eligible replica holds every committed record.
                    (leader, isr) = (b, vec![b]);
                    elr.retain(|r| *r != b);
                } else if unclean_allowed(&topic.configs) {
                    // No live in-sync or eligible replica: an unclean election, as the topic allows.
                    if let Some(b) = p.replicas.iter().copied().find(live) {
                        (leader, isr, elr) = (b, vec![b], Vec::new());
                    }
                }
            }
        }
        if leader != p.leader || isr != p.isr || elr != p.elr {
            out.push(change(topic.id, index, p, leader, isr, elr));
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
            out.push(change(topic.id, index, p, broker, p.isr.clone(), p.elr.clone()));
        } else if p.elr.contains(&broker) {
            let elr = p.elr.iter().copied().filter(|r| *r != broker).collect();
            out.push(change(topic.id, index, p, broker, vec![broker], elr));
        } else if unclean_allowed(&topic.configs) {
            out.push(change(topic.id, index, p, broker, vec![broker], Vec::new()));
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
            out.push(change(topic.id, index, p, preferred, p.isr.clone(), p.elr.clone()));
        }
    }
    out
}

fn unclean_allowed(configs: &BTreeMap<String, String>) -> bool {
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
            elr: vec![],
        }
    }

    #[test]
    fn a_fenced_single_replica_leader_leaves_its_partition_offline_with_its_isr_kept() {
        let img = image(&[1], vec![p(&[0], &[0], 0)], BTreeMap::new());
        let changes = on_fence(&img, 0, 1);
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
        let changes = on_fence(&img, 0, 1);
        assert_eq!(changes.len(), 2);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]));
        assert_eq!((changes[1].partition, changes[1].leader, changes[1].isr.clone()), (1, 1, vec![1]));
    }

    #[test]
    fn a_fenced_last_in_sync_leader_hands_over_to_a_live_replica_only_when_unclean_is_allowed() {
        let parts = vec![p(&[0, 1, 2], &[0], 0)];
        let img = image(&[1, 2], parts.clone(), BTreeMap::new());
        let changes = on_fence(&img, 0, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (-1, vec![0]), "clean: offline, 0 remembered");
        let unclean = BTreeMap::from([("unclean.leader.election.enable".to_string(), "true".to_string())]);
        let img = image(&[2], parts, unclean);
        let changes = on_fence(&img, 0, 1);
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

    fn with_elr(mut p: PartitionRegistration, elr: &[i32]) -> PartitionRegistration {
        p.elr = elr.to_vec();
        p
    }

    #[test]
    fn replicas_leaving_an_isr_smaller_than_min_insync_become_eligible_and_leave_once_it_is_big_enough() {
        let part = p(&[0, 1, 2], &[0, 1, 2], 0);
        assert_eq!(elr_after(&part, &[0, 1], 2), Vec::<i32>::new(), "2 left while the ISR kept 2 members");
        assert_eq!(elr_after(&part, &[0], 2), vec![1, 2], "both left at once, below 2");
        let shrunk = with_elr(p(&[0, 1, 2], &[0, 1], 0), &[]);
        assert_eq!(elr_after(&shrunk, &[0], 2), vec![1], "2 had left before: it may miss records");
        let below = with_elr(p(&[0, 1, 2], &[0], 0), &[1, 2]);
        assert_eq!(elr_after(&below, &[0, 1], 3), vec![2], "1 is back in sync");
        assert_eq!(elr_after(&below, &[0, 1], 2), Vec::<i32>::new(), "the ISR is big enough again");
        assert_eq!(min_insync(&BTreeMap::from([("min.insync.replicas".to_string(), "3".to_string())]), 1), 3);
        assert_eq!(min_insync(&BTreeMap::new(), 2), 2);
    }

    #[test]
    fn the_last_in_sync_leader_fenced_hands_over_to_a_live_eligible_replica() {
        let min2 = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
        let img = image(&[1, 2], vec![with_elr(p(&[0, 1, 2], &[0], 0), &[1, 2])], min2.clone());
        let changes = on_fence(&img, 0, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].elr.clone()), (1, vec![1], Some(vec![2])));
        // No eligible replica live: offline, the last in-sync one remembered.
        let img = image(&[3], vec![with_elr(p(&[0, 1, 2], &[0], 0), &[1, 2])], min2);
        let changes = on_fence(&img, 0, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].elr.clone()), (-1, vec![0], None));
    }

    #[test]
    fn a_restarted_last_in_sync_replica_gives_way_to_eligible_ones_and_leaves_every_elr() {
        let min2 = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
        // Offline with 0 as its last in-sync replica; 1 and 2 eligible but down. 0 restarts.
        let img = image(&[], vec![with_elr(p(&[0, 1, 2], &[0], -1), &[1, 2])], min2.clone());
        let changes = on_register(&img, 0, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].elr.clone()), (-1, vec![], None));
        // Then 1 comes back: it leads.
        let img = image(&[1], vec![with_elr(p(&[0, 1, 2], &[], -1), &[1, 2])], min2.clone());
        let changes = on_unfence(&img, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].elr.clone()), (1, vec![1], Some(vec![2])));
        // An eligible replica that restarts is eligible no more.
        let img = image(&[0], vec![with_elr(p(&[0, 1, 2], &[0], 0), &[1, 2])], min2);
        let changes = on_register(&img, 2, 1);
        assert_eq!((changes[0].leader, changes[0].isr.clone(), changes[0].elr.clone()), (0, vec![0], Some(vec![1])));
    }
}
