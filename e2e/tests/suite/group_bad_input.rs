//! Requirement (consumer groups, as stated in `groups.rs`; these are its bad-input cases: the
//! classic group protocol's checks of protocol, generation, membership and session bounds):
//! requests no well-behaved consumer sends are refused with the error Apache Kafka gives, and
//! change nothing. Each is sent raw (`e2e::groups::raw`, over `e2e::wire` + kafka-protocol)
//! and followed by a real consumer still being served by the same group.
//!
//! - JoinGroup with another protocol type or no common assignor → INCONSISTENT_GROUP_PROTOCOL,
//!   and the live group does not rebalance.
//! - SyncGroup / Heartbeat with a stale generation (or one never issued) → ILLEGAL_GENERATION.
//! - OffsetCommit from outside the generation → UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION, and no
//!   offset changes.
//! - A session timeout outside [group.min.session.timeout.ms, group.max.session.timeout.ms] =
//!   [6000, 1800000] → INVALID_SESSION_TIMEOUT; the bounds themselves are accepted.
//!
//! Brokers run with `--group-initial-rebalance-delay-ms 0` and three `__consumer_offsets`
//! partitions. Every wait polls a condition; none sleeps a fixed time to let something happen.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use e2e::broker::BrokerProcess;
use e2e::clients;
use e2e::groups::fixtures::{
    high_watermarks, member, produce_tagged, start_broker, wait_for_committed, wait_until_received, REBALANCE_TIMEOUT,
};
use e2e::groups::raw::{
    assignment_bytes, subscription, Join, RawClient, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT, NONE, UNKNOWN_MEMBER_ID,
};
use e2e::groups::{self, Assignor, GroupMember};

/// A broker, a topic with records in it, and a raw connection that found the coordinator.
struct BadInputCase {
    _broker: BrokerProcess,
    bootstrap: String,
    topic: String,
    group: String,
    partitions: i32,
    raw: RawClient,
    produced: Vec<String>,
}

impl BadInputCase {
    fn start(name: &str) -> Self {
        let broker = start_broker(Some(3));
        let bootstrap = broker.bootstrap();
        let partitions = 2;
        clients::create_topic(&bootstrap, name, partitions, &[]).expect("create topic");
        let produced = produce_tagged(&bootstrap, name, "initial", partitions, 20);
        let mut raw = RawClient::connect(&broker);
        raw.find_coordinator(name);
        Self { _broker: broker, bootstrap, topic: name.to_string(), group: name.to_string(), partitions, raw, produced }
    }

    /// A JoinGroup as a Kafka consumer with the range assignor would send it.
    fn join(&self, member_id: &str, session_timeout_ms: i32) -> Join {
        Join {
            group: self.group.clone(),
            member_id: member_id.to_string(),
            session_timeout_ms,
            protocol_type: "consumer".to_string(),
            protocols: vec![("range".to_string(), subscription(&self.topic))],
        }
    }

    fn real_member(&self, client_id: &str) -> GroupMember {
        member(&self.bootstrap, &self.group, client_id, &self.topic, Assignor::Range)
    }

    /// `member` (the group's only member) still gets all partitions, receives records produced
    /// now (and every earlier one, had it not yet read them), and commits up to the end.
    fn assert_still_served(&mut self, member: &GroupMember, context: &str) {
        groups::wait_for_assignment(
            self.partitions,
            &[usize::try_from(self.partitions).unwrap()],
            REBALANCE_TIMEOUT,
            || vec![member.assignment()],
        )
        .unwrap_or_else(|e| panic!("{context}: {e:#}"));
        let fresh = produce_tagged(&self.bootstrap, &self.topic, context, self.partitions, 10);
        self.produced.extend(fresh);
        wait_until_received(&[member], &[], &self.produced, context);
        wait_for_committed(
            &self.bootstrap,
            &self.group,
            &self.topic,
            &high_watermarks(&self.bootstrap, &self.topic, self.partitions),
        );
    }
}

#[test]
fn join_group_with_another_protocol_type_or_no_common_assignor_is_inconsistent_group_protocol() {
    let mut case = BadInputCase::start("bad-protocol");
    let real = case.real_member("real");
    case.assert_still_served(&real, "before");
    let rebalances = real.status().assignments;

    let subscription = subscription(&case.topic);
    for (protocol_type, protocols, what) in [
        ("connect", vec![("range".to_string(), subscription.clone())], "another protocol type"),
        ("consumer", vec![("no-such-assignor".to_string(), subscription.clone())], "no assignor in common"),
        ("consumer", vec![], "an empty protocol list"),
    ] {
        let join = Join { protocol_type: protocol_type.to_string(), protocols, ..case.join("", 10_000) };
        let r = case.raw.join_new(join);
        assert_eq!(r.error_code, INCONSISTENT_GROUP_PROTOCOL, "JoinGroup with {what} into a live consumer group");
    }
    case.assert_still_served(&real, "after");
    assert_eq!(real.status().assignments, rebalances, "a refused JoinGroup must not rebalance the group");
}

#[test]
fn sync_group_and_heartbeat_with_a_stale_generation_are_illegal_generation() {
    let mut case = BadInputCase::start("stale-generation");
    let (group, topic) = (case.group.clone(), case.topic.clone());
    let first = case.raw.join_new(case.join("", 10_000));
    assert_eq!(first.error_code, NONE, "JoinGroup of the first member");
    let me = first.member_id.to_string();
    assert_eq!(first.leader.to_string(), me, "the only member leads");
    let stale = first.generation_id;
    let plan = [(me.as_str(), assignment_bytes(&topic, &[0, 1]))];
    let synced = case.raw.sync(&group, stale, &me, &plan);
    assert_eq!(synced.error_code, NONE, "SyncGroup of generation {stale}");
    let got = groups::decode_consumer_assignment(&synced.assignment).expect("decode the assignment");
    assert_eq!(got, BTreeMap::from([(topic.clone(), BTreeSet::from([0, 1]))]), "SyncGroup hands back the plan");
    assert_eq!(case.raw.heartbeat(&group, stale, &me), NONE, "Heartbeat of the current generation");

    // The leader joining again starts a new generation.
    let second = case.raw.join(&case.join(&me, 10_000));
    assert_eq!(second.error_code, NONE, "JoinGroup of the leader again");
    let current = second.generation_id;
    assert!(current > stale, "a rebalance moves the generation from {stale} to more, got {current}");
    assert_eq!(case.raw.sync(&group, current, &me, &plan).error_code, NONE, "SyncGroup of generation {current}");

    assert_eq!(case.raw.sync(&group, stale, &me, &plan).error_code, ILLEGAL_GENERATION, "SyncGroup, stale generation");
    assert_eq!(case.raw.heartbeat(&group, stale, &me), ILLEGAL_GENERATION, "Heartbeat, stale generation");
    assert_eq!(
        case.raw.sync(&group, current + 100, &me, &plan).error_code,
        ILLEGAL_GENERATION,
        "SyncGroup, a generation never issued"
    );
    assert_eq!(case.raw.heartbeat(&group, current, &me), NONE, "the member is still in good standing");
    let (top, mine) = case.raw.leave(&group, &me);
    assert!(top == NONE && mine.unwrap_or(NONE) == NONE, "LeaveGroup: {top} / {mine:?}");

    let real = case.real_member("real");
    case.assert_still_served(&real, "after");
}

#[test]
fn offset_commit_from_outside_the_generation_is_rejected_and_changes_no_offset() {
    let mut case = BadInputCase::start("outsider");
    let (group, topic) = (case.group.clone(), case.topic.clone());
    let real = case.real_member("real");
    case.assert_still_served(&real, "before");
    let before = groups::committed_offsets(&case.bootstrap, &group, &topic, case.partitions).expect("OffsetFetch");
    let real_id = groups::describe_group(&case.bootstrap, &group).expect("DescribeGroups").members[0].member_id.clone();

    let stranger = case.raw.commit(&group, 1, "not-a-member-of-this-group", &topic, 0, 0);
    assert!(
        [UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION].contains(&stranger),
        "OffsetCommit from an unknown member with generation 1: error {stranger}"
    );
    let outside = case.raw.commit(&group, -1, "", &topic, 0, 0);
    assert!(
        [UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION].contains(&outside),
        "OffsetCommit with no generation into a group with members: error {outside}"
    );
    let wrong_generation = case.raw.commit(&group, 1_000_000, &real_id, &topic, 0, 0);
    assert_eq!(wrong_generation, ILLEGAL_GENERATION, "OffsetCommit of a real member with a wrong generation");
    assert_eq!(
        groups::committed_offsets(&case.bootstrap, &group, &topic, case.partitions).expect("OffsetFetch"),
        before,
        "a refused commit changed the group's offsets"
    );
    case.assert_still_served(&real, "after");
}

#[test]
fn join_group_with_a_session_timeout_outside_the_brokers_bounds_is_invalid_session_timeout() {
    let mut case = BadInputCase::start("session-bounds");
    let group = case.group.clone();
    for timeout in [0, 5_999, 1_800_001, i32::MAX] {
        let r = case.raw.join_new(case.join("", timeout));
        assert_eq!(r.error_code, INVALID_SESSION_TIMEOUT, "JoinGroup with session.timeout.ms={timeout}");
    }
    // The bounds themselves are allowed.
    for timeout in [6_000, 1_800_000] {
        let r = case.raw.join_new(case.join("", timeout));
        assert_eq!(r.error_code, NONE, "JoinGroup with session.timeout.ms={timeout}");
        let me = r.member_id.to_string();
        let (top, mine) = case.raw.leave(&group, &me);
        assert!(top == NONE && mine.unwrap_or(NONE) == NONE, "LeaveGroup: {top} / {mine:?}");
    }
    let real = case.real_member("real");
    case.assert_still_served(&real, "after");
}
