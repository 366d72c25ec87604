//! Coordinator tests on a real `__consumer_offsets` log in a temporary directory: what is
//! committed is loaded back by a new coordinator, expired groups vanish with their offsets,
//! and static members take over their instance without a new member id being required.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::config::BrokerConfig;
use crate::metadata::TopicMetadata;
use crate::partition::{Leadership, ReplicaManager};

use super::coordinator::{GroupConfig, GroupCoordinator, JoinRequest, Reply, OFFSETS_TOPIC};
use super::error::GroupError;
use super::offsets::OffsetCommit;
use super::state::GroupState;

fn setup(dir: &std::path::Path, retention_ms: i64) -> GroupCoordinator {
    let broker = Arc::new(BrokerConfig { data_dir: dir.to_path_buf(), ..BrokerConfig::default() });
    let replicas = Arc::new(ReplicaManager::new(dir, broker));
    let topic = TopicMetadata {
        name: OFFSETS_TOPIC.to_string(),
        id: uuid::Uuid::from_u128(7),
        partitions: vec![],
        configs: BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
    };
    for p in 0..3 {
        let replica = replicas.ensure_partition(&topic, p).expect("offsets partition");
        replica.set_leadership(Leadership::sole_leader(0, 0));
    }
    let config = GroupConfig {
        offsets_topic_partitions: 3,
        initial_rebalance_delay_ms: 0,
        min_session_timeout_ms: 10,
        max_session_timeout_ms: 60_000,
        offsets_retention_ms: retention_ms,
        offset_metadata_max_bytes: 16,
    };
    let coordinator = GroupCoordinator::new(config, replicas);
    // This broker leads every offsets partition: it coordinates (and loads) all groups.
    for p in 0..3 {
        coordinator.load_partition(p);
    }
    coordinator
}

/// Commits and waits for the commit to complete (the offsets partitions here have no followers).
async fn committed(
    c: &GroupCoordinator,
    group: &str,
    offsets: Vec<OffsetCommit>,
) -> Result<Vec<Result<(), GroupError>>, GroupError> {
    let pending = c.commit_offsets(group, -1, "", offsets)?;
    c.complete_commit(pending, Duration::from_secs(5)).await
}

async fn committed_txn(c: &GroupCoordinator, producer_id: i64, offset: i64) {
    let pending = c.commit_txn_offsets("g", -1, "", (producer_id, 0), vec![commit("t", 0, offset)]).expect("commit");
    let results = c.complete_commit(pending, Duration::from_secs(5)).await.expect("replicated");
    assert_eq!(results, vec![Ok(())]);
}

fn committed_offset(c: &GroupCoordinator, group: &str) -> Option<i64> {
    c.fetch_offsets(group, None).into_iter().find_map(|(_, _, o)| o.map(|o| o.offset))
}

fn commit(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit { topic: topic.into(), partition, offset, leader_epoch: 0, metadata: String::new() }
}

fn join(group: &str, member: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: instance.map(String::from),
        client_id: "test".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: true,
    }
}

async fn joined(c: &GroupCoordinator, req: JoinRequest) -> super::state::JoinOutcome {
    match c.join(req) {
        Reply::Now(o) => o,
        Reply::Wait(rx) => rx.await.expect("join answered"),
    }
}

#[tokio::test]
async fn committed_offsets_are_loaded_back_by_a_new_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    let results = committed(&c, "g", vec![commit("t", 0, 42), commit("t", 1, 7)]).await.expect("commit");
    assert!(results.iter().all(Result::is_ok));
    committed(&c, "g", vec![commit("t", 0, 43)]).await.expect("commit");
    drop(c);
    let again = setup(dir.path(), i64::MAX);
    assert_eq!(again.list().len(), 1, "the group was loaded back");
    let fetched = again.fetch_offsets("g", Some(vec![("t".into(), vec![0, 1, 2])]));
    let offsets: Vec<Option<i64>> = fetched.iter().map(|(_, _, v)| v.as_ref().map(|v| v.offset)).collect();
    assert_eq!(offsets, vec![Some(43), Some(7), None]);
}

#[tokio::test]
async fn metadata_over_the_limit_is_refused_and_not_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    let mut big = commit("t", 0, 1);
    big.metadata = "x".repeat(17);
    let results = committed(&c, "g", vec![big]).await.expect("commit");
    assert_eq!(results[0], Err(GroupError::OffsetMetadataTooLarge));
    assert!(c.fetch_offsets("g", None).is_empty());
}

#[tokio::test]
async fn offsets_of_a_group_without_members_expire_after_the_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), 0);
    committed(&c, "g", vec![commit("t", 0, 5)]).await.expect("commit");
    std::thread::sleep(std::time::Duration::from_millis(5));
    c.tick();
    assert!(c.describe("g").is_none(), "the expired group is gone");
    drop(c);
    // The tombstones are in the log: a new coordinator does not bring the offsets back.
    let again = setup(dir.path(), i64::MAX);
    assert!(again.fetch_offsets("g", None).is_empty());
}

#[tokio::test]
async fn a_returning_static_member_takes_over_without_a_rebalance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    let first = joined(&c, join("g", "", Some("instance-1"))).await;
    assert_eq!(first.error, None, "static members need no MEMBER_ID_REQUIRED round trip");
    let generation = first.generation;
    match c.sync("g", generation, &first.member_id, vec![(first.member_id.clone(), Bytes::from_static(b"a"))]) {
        Reply::Wait(rx) => assert_eq!(rx.await.expect("sync").assignment, Bytes::from_static(b"a")),
        Reply::Now(o) => panic!("leader's sync should complete the generation, got {o:?}"),
    }
    // The instance restarts with no member id: it gets a new id, the same generation and assignment.
    let back = joined(&c, join("g", "", Some("instance-1"))).await;
    assert_eq!(back.error, None);
    assert_ne!(back.member_id, first.member_id);
    assert_eq!(back.generation, generation);
    assert_eq!(c.describe("g").map(|d| d.state), Some(GroupState::Stable));
    // The old member id of that instance is fenced.
    assert_eq!(c.heartbeat("g", generation, &first.member_id, Some("instance-1")), Err(GroupError::FencedInstanceId));
}

#[tokio::test]
async fn a_new_dynamic_member_must_rejoin_with_the_member_id_it_is_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    let first = joined(&c, join("g", "", None)).await;
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    let second = joined(&c, join("g", &first.member_id, None)).await;
    assert_eq!(second.error, None);
    assert_eq!(second.member_id, first.member_id);
    assert_eq!(second.leader, first.member_id);
    assert_eq!(second.members.len(), 1, "the leader gets every member's metadata");
}

#[tokio::test]
async fn transactional_offsets_count_after_a_commit_marker_never_after_an_abort_and_survive_a_reload() {
    use crate::partition::transactions::{Marker, MarkerType};
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), 60_000);
    let marker = |producer_id: i64, commit: bool| {
        let kind = if commit { MarkerType::Commit } else { MarkerType::Abort };
        let p = c.partition_of("g");
        let partition = c.replicas.get(OFFSETS_TOPIC, p).expect("offsets partition");
        partition.write_marker(producer_id, 0, Marker { kind, coordinator_epoch: 0 }, 1_000).expect("marker");
        c.complete_txn(p, producer_id, commit);
    };
    // Producer 5 commits offset 7 in a transaction: not visible until its commit marker.
    committed_txn(&c, 5, 7).await;
    assert_eq!(committed_offset(&c, "g"), None);
    marker(5, true);
    assert_eq!(committed_offset(&c, "g"), Some(7));
    // Producer 6 commits 9 and aborts: 7 stays.
    committed_txn(&c, 6, 9).await;
    marker(6, false);
    assert_eq!(committed_offset(&c, "g"), Some(7));
    // Producer 8's transaction is still open when a new coordinator loads the partition.
    committed_txn(&c, 8, 11).await;
    let again = GroupCoordinator::new(c.config().clone(), c.replicas.clone());
    for p in 0..3 {
        again.load_partition(p);
    }
    assert_eq!(
        committed_offset(&again, "g"),
        Some(7),
        "the committed transaction's offset, not the aborted or open one"
    );
    again.complete_txn(again.partition_of("g"), 8, true);
    assert_eq!(committed_offset(&again, "g"), Some(11), "the open transaction's offsets wait for its marker");
}

/// The group's offsets partition gets a follower (broker 1) that never fetches: nothing
/// written from now on reaches the high watermark.
fn lose_the_follower(c: &GroupCoordinator, group: &str) {
    let partition = c.replicas.get(OFFSETS_TOPIC, c.partition_of(group)).expect("offsets partition");
    let mut leadership = Leadership::sole_leader(0, 1);
    leadership.replicas = vec![0, 1];
    leadership.isr = vec![0, 1];
    partition.set_leadership(leadership);
}

#[tokio::test]
async fn a_commit_is_not_visible_before_every_in_sync_replica_has_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    committed(&c, "g", vec![commit("t", 0, 5)]).await.expect("commit");
    lose_the_follower(&c, "g");
    let pending = c.commit_offsets("g", -1, "", vec![commit("t", 0, 9)]).expect("appended");
    assert_eq!(committed_offset(&c, "g"), Some(5), "appended but not replicated: not shown");
    let outcome = c.complete_commit(pending, Duration::from_millis(200)).await;
    assert_eq!(outcome, Err(GroupError::ReplicationTimeout));
    assert_eq!(committed_offset(&c, "g"), Some(5), "a commit that timed out is not shown either");
}

#[tokio::test]
async fn a_commit_completing_late_does_not_replace_a_later_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    let earlier = c.commit_offsets("g", -1, "", vec![commit("t", 0, 3)]).expect("appended");
    let later = c.commit_offsets("g", -1, "", vec![commit("t", 0, 4)]).expect("appended");
    c.complete_commit(later, Duration::from_secs(5)).await.expect("replicated");
    c.complete_commit(earlier, Duration::from_secs(5)).await.expect("replicated");
    assert_eq!(committed_offset(&c, "g"), Some(4));
}

#[tokio::test]
async fn a_transactional_commit_that_timed_out_is_not_applied_by_its_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = setup(dir.path(), i64::MAX);
    lose_the_follower(&c, "g");
    let pending = c.commit_txn_offsets("g", -1, "", (5, 0), vec![commit("t", 0, 7)]).expect("appended");
    assert!(c.has_pending_txn_offsets("g", "t", 0), "pending from the append on (KIP-447)");
    let outcome = c.complete_commit(pending, Duration::from_millis(200)).await;
    assert_eq!(outcome, Err(GroupError::ReplicationTimeout));
    assert!(!c.has_pending_txn_offsets("g", "t", 0));
    c.complete_txn(c.partition_of("g"), 5, true);
    assert_eq!(committed_offset(&c, "g"), None);
}
