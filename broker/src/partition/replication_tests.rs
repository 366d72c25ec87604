//! Leader and follower replicas in one process, on real logs: a follower copies the leader,
//! the high watermark follows the ISR, a diverged follower is told where to truncate and ends
//! identical to the leader, and acks=all waits are answered as Kafka answers them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::replication::{ReplicaFetch, ReplicaFetchError};
use super::{Leadership, Partition, PartitionError};
use crate::config::BrokerConfig;
use crate::metadata::topic_config::TopicConfig;

fn batch(n: usize, tag: &str) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode");
    buf.freeze()
}

fn replica(dir: &std::path::Path, broker: i32) -> Arc<Partition> {
    // min.insync.replicas 2, as the tests use.
    let overrides = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
    let config = TopicConfig::resolve(&BrokerConfig::default(), &overrides).expect("config");
    Arc::new(Partition::open(dir, "t", 0, uuid::Uuid::from_u128(1), broker, config).expect("open"))
}

fn role(broker: i32, leader: i32, epoch: i32, isr: &[i32]) -> Leadership {
    Leadership {
        is_leader: broker == leader,
        leader_epoch: epoch,
        leader,
        replicas: vec![0, 1],
        isr: isr.to_vec(),
        partition_epoch: epoch,
        adding: vec![],
        fenced: vec![],
    }
}

/// One fetch of `follower` from `leader`, applied; returns whether it diverged.
fn fetch_once(leader: &Partition, follower: &Partition, epoch: i32) -> bool {
    let (fetch_offset, last_fetched_epoch) = follower.fetch_position();
    let read = leader
        .serve_replica_fetch(ReplicaFetch {
            replica: follower.broker,
            current_leader_epoch: epoch,
            fetch_offset,
            last_fetched_epoch,
            max_bytes: 1 << 20,
        })
        .expect("fetch");
    if let Some(end) = read.diverging {
        let at = follower.divergence_point(end.epoch, end.end_offset, read.log_start_offset);
        follower.truncate_to(epoch, at).expect("truncate");
        return true;
    }
    follower
        .append_from_leader(epoch, &read.records.unwrap_or_default(), read.high_watermark, read.log_start_offset, false)
        .expect("append");
    false
}

/// Every batch of a replica, read segment by segment.
fn everything(p: &Partition) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < p.log_end_offset() {
        let bytes = p.read_up_to(offset, 1 << 20, true, Some(p.log_end_offset())).expect("read").records.expect("data");
        let (last, _) = crate::log::batches(&bytes).last().expect("a batch").expect("whole batches");
        offset = last.last_offset() + 1;
        out.extend_from_slice(&bytes);
    }
    out
}

/// Epoch 0: broker 0 leads and both replicas hold 5 records; broker 0 appends 3 more
/// (acks=1) that broker 1 never fetches. Epoch 1: broker 1 leads from offset 5, broker 0
/// follows. Returns the directories (kept alive), broker 0's replica and broker 1's.
fn leadership_moves_past_an_uncommitted_tail() -> ([tempfile::TempDir; 2], Arc<Partition>, Arc<Partition>) {
    let dirs = [tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir")];
    let (one, two) = (replica(dirs[0].path(), 0), replica(dirs[1].path(), 1));
    one.set_leadership(role(0, 0, 0, &[0, 1]));
    two.set_leadership(role(1, 0, 0, &[0, 1]));
    one.append(&batch(5, "shared"), 1, 1_000).expect("append");
    fetch_once(&one, &two, 0);
    fetch_once(&one, &two, 0);
    one.append(&batch(3, "lost"), 1, 1_000).expect("append");
    assert_eq!(one.high_watermark(), 5, "not committed");
    two.set_leadership(role(1, 1, 1, &[1]));
    one.set_leadership(role(0, 1, 1, &[1]));
    (dirs, one, two)
}

#[test]
fn the_high_watermark_waits_for_the_isr_and_a_follower_ends_identical_to_its_leader() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (leader, follower) = (replica(a.path(), 0), replica(b.path(), 1));
    leader.set_leadership(role(0, 0, 0, &[0, 1]));
    follower.set_leadership(role(1, 0, 0, &[0, 1]));
    leader.append(&batch(5, "x"), 1, 1_000).expect("append");
    assert_eq!(leader.high_watermark(), 0, "the follower has not fetched yet");
    fetch_once(&leader, &follower, 0);
    assert_eq!(follower.log_end_offset(), 5);
    assert_eq!(leader.high_watermark(), 0, "the follower's next fetch tells the leader it has them");
    fetch_once(&leader, &follower, 0);
    assert_eq!(leader.high_watermark(), 5);
    fetch_once(&leader, &follower, 0);
    assert_eq!(follower.high_watermark(), 5, "the follower learns the high watermark");
    // A stale leader epoch in a fetch is fenced.
    let stale = leader.serve_replica_fetch(ReplicaFetch {
        replica: 1,
        current_leader_epoch: -1,
        fetch_offset: 5,
        last_fetched_epoch: 0,
        max_bytes: 1024,
    });
    assert!(matches!(stale, Err(ReplicaFetchError::FencedLeaderEpoch { .. })), "{stale:?}");
}

#[test]
fn a_follower_with_records_of_an_epoch_the_new_leader_never_wrote_truncates_them() {
    let (_dirs, one, two) = leadership_moves_past_an_uncommitted_tail();
    // Broker 1 writes its own records at the same offsets.
    two.append(&batch(2, "new"), 1, 1_000).expect("append");
    assert!(fetch_once(&two, &one, 1), "broker 0 is told its epoch 0 ended at 5 in the leader's history");
    assert_eq!(one.log_end_offset(), 5, "the uncommitted records are truncated");
    fetch_once(&two, &one, 1);
    assert_eq!(one.log_end_offset(), 7);
    assert_eq!(everything(&one), everything(&two), "the replicas are identical");
}

#[tokio::test]
async fn acks_all_waits_for_the_isr_and_answers_not_enough_replicas_after_append_when_it_shrinks() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (leader, follower) = (replica(a.path(), 0), replica(b.path(), 1));
    leader.set_leadership(role(0, 0, 0, &[0, 1]));
    follower.set_leadership(role(1, 0, 0, &[0, 1]));
    let appended = leader.append(&batch(1, "w"), -1, 1_000).expect("append with two in sync");
    let timeout = leader.wait_for_replication(appended.last_offset, 2, Duration::from_millis(100)).await;
    assert!(matches!(timeout, Err(PartitionError::ReplicationTimeout { .. })), "{timeout:?}");
    let waiting = {
        let leader = leader.clone();
        tokio::spawn(async move { leader.wait_for_replication(appended.last_offset, 2, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The ISR shrinks to the leader alone (the controller agreed): the high watermark moves,
    // but fewer than min.insync.replicas have the record.
    leader.set_leadership(role(0, 0, 0, &[0]));
    let answer = waiting.await.expect("join");
    assert!(matches!(answer, Err(PartitionError::NotEnoughReplicasAfterAppend { isr: 1, min: 2, .. })), "{answer:?}");
    // And now it is refused before the append.
    let refused = leader.append(&batch(1, "w"), -1, 1_000);
    assert!(matches!(refused, Err(PartitionError::NotEnoughReplicas { .. })), "{refused:?}");
}

#[test]
fn an_answer_fetched_in_an_older_epoch_cannot_touch_a_replica_that_leads_now() {
    // CI once saw this: broker 4 became leader while its fetch to the old leader was in
    // flight; the answer truncated its log to where it already ended, which dropped the new
    // epoch from its epoch cache, and a follower then looped forever on "diverged".
    let (_dirs, one, two) = leadership_moves_past_an_uncommitted_tail();
    let new_epoch = two.epoch_end(1);
    assert_eq!((new_epoch.epoch, new_epoch.end_offset), (1, 5));
    // Answers of a fetch made in epoch 0 arrive now: each is refused, nothing changes.
    let late = two.truncate_to(0, 5);
    assert!(matches!(late, Err(PartitionError::NotFollowing { fetched_in: 0, leader_epoch: 1, .. })), "{late:?}");
    let late = two.append_from_leader(0, &batch(1, "late"), 5, 0, false);
    assert!(matches!(late, Err(PartitionError::NotFollowing { .. })), "{late:?}");
    let late = two.truncate_fully_and_start_at(0, 0);
    assert!(matches!(late, Err(PartitionError::NotFollowing { .. })), "{late:?}");
    assert_eq!(two.log_end_offset(), 5);
    assert_eq!(two.epoch_end(1), new_epoch, "the new epoch is still in the leader's cache");
    // A follower's own stale answer is refused too once it follows in a newer epoch.
    let late = one.truncate_to(0, 0);
    assert!(matches!(late, Err(PartitionError::NotFollowing { now: "a follower", .. })), "{late:?}");
    assert_eq!(one.log_end_offset(), 8);

    // The new leader writes in epoch 1; the old one truncates its uncommitted records once
    // and then copies, ending identical.
    two.append(&batch(2, "new"), 1, 1_000).expect("append");
    let mut divergences = 0;
    for _ in 0..10 {
        divergences += usize::from(fetch_once(&two, &one, 1));
        if one.log_end_offset() == two.log_end_offset() && one.epoch_end(1) == two.epoch_end(1) {
            break;
        }
    }
    assert_eq!(divergences, 1, "one truncation, not a loop");
    assert_eq!(everything(&one), everything(&two));
}

#[tokio::test]
async fn an_acks_all_wait_on_a_replica_that_moves_away_is_answered_not_leader_at_once() {
    // CI once saw a record stored twice: the old leader's replica was removed by a
    // reassignment while an acks=all produce waited on it, the produce was answered
    // REQUEST_TIMED_OUT only at its timeout, and librdkafka meanwhile bumped its producer
    // epoch and re-sent the record, which the new leader already had.
    use crate::metadata::image::PartitionRegistration;
    use crate::metadata::TopicMetadata;
    let data = tempfile::tempdir().expect("tempdir");
    let broker = BrokerConfig { node_id: 0, ..BrokerConfig::default() };
    let replicas = super::ReplicaManager::new(data.path(), Arc::new(broker));
    let registration = PartitionRegistration {
        replicas: vec![0, 1],
        isr: vec![0, 1],
        leader: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        adding: vec![],
        removing: vec![],
        elr: vec![],
    };
    let configs = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
    let topic =
        TopicMetadata { name: "t".into(), id: uuid::Uuid::from_u128(1), configs, partitions: vec![registration] };
    let leader = replicas.ensure_partition(&topic, 0).expect("open");
    leader.set_leadership(role(0, 0, 0, &[0, 1]));
    let appended = leader.append(&batch(1, "w"), -1, 1_000).expect("append with two in sync");
    let waiting = {
        let leader = leader.clone();
        tokio::spawn(async move { leader.wait_for_replication(appended.last_offset, 2, Duration::from_secs(60)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "the follower has not fetched: the produce waits");

    replicas.remove_partition("t", 0);
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("answered when the replica left, not at the produce's timeout")
        .expect("join");
    assert!(matches!(answer, Err(PartitionError::NotLeader { .. })), "{answer:?}");
    assert!(!leader.is_leader());
}
