//! Requirement (consumer groups: Kafka's classic group protocol — FindCoordinator, JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
//! DeleteGroups, OffsetDelete — with group state and offsets in `__consumer_offsets`;
//! RELIABILITY P1, P4, P6, P8 and scenario S7): the broker coordinates librdkafka consumers that
//! `subscribe` exactly as Apache Kafka does.
//!
//! - `membership_changes_*` (range, cooperative-sticky): three members of a group on a
//!   6-partition topic get two partitions each; a fourth joining and then one leaving each
//!   rebalance the group so that every partition has exactly one owner; while a producer writes
//!   throughout, every acknowledged record reaches the group (members commit what they
//!   processed, so membership changes lose nothing) and nothing unwritten is read.
//! - `a_member_killed_without_leaving_*`: a member SIGKILLed (no LeaveGroup) keeps its
//!   partitions until its session times out; then its partitions move to the survivor, which
//!   starts exactly at the dead member's last committed offset: nothing before it re-delivered,
//!   nothing after it skipped.
//! - `two_groups_on_one_topic_*`: groups are independent: each receives every record and has
//!   offsets of its own.
//! - `committed_offsets_survive_a_broker_sigkill_*`: OffsetFetch answers the same offsets after
//!   a SIGKILL and restart of the coordinator; DescribeGroups and ListGroups report the members,
//!   protocol and assignments that the clients themselves see; the group carries on afterwards
//!   without re-delivering anything it had committed.
//! - `delete_groups_and_offset_delete_*`: DeleteGroups and OffsetDelete refuse while the group
//!   has members subscribed, and remove its offsets once it is empty.
//! - Raw requests (`e2e::wire` + kafka-protocol), each followed by a real consumer still being
//!   served by the same group: JoinGroup with another protocol type or no common assignor →
//!   INCONSISTENT_GROUP_PROTOCOL; SyncGroup / Heartbeat with a stale generation →
//!   ILLEGAL_GENERATION; OffsetCommit from outside the generation → UNKNOWN_MEMBER_ID or
//!   ILLEGAL_GENERATION and no offset changes; a session timeout outside
//!   [group.min.session.timeout.ms, group.max.session.timeout.ms] = [6000, 1800000] →
//!   INVALID_SESSION_TIMEOUT.
//!
//! Brokers run with `--group-initial-rebalance-delay-ms 0`. Members use 6 s sessions and 1 s
//! heartbeats. Every wait polls a condition; none sleeps a fixed time to let something happen.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Assignor, ConsumedRecord, GroupMember, GroupMemberOptions, MemberStatus, Record, Reports};
use e2e::wire;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::Producer;

const SESSION_TIMEOUT_MS: u32 = 6_000;
const HEARTBEAT_INTERVAL_MS: u32 = 1_000;
/// Upper bound for a rebalance to settle (joins, syncs, the settle time).
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for records to reach a consumer.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker with no initial rebalance delay; `offsets_partitions` sets
/// `--offsets-topic-num-partitions` (None: the default, 50).
fn start_broker(offsets_partitions: Option<u32>) -> BrokerProcess {
    let mut extra_args = vec!["--group-initial-rebalance-delay-ms".to_string(), "0".to_string()];
    if let Some(n) = offsets_partitions {
        extra_args.extend(["--offsets-topic-num-partitions".to_string(), n.to_string()]);
    }
    BrokerProcess::launch(BrokerOptions { extra_args, ..BrokerOptions::default() }).expect("start broker")
}

fn member(bootstrap: &str, group: &str, client_id: &str, topic: &str, assignor: Assignor) -> GroupMember {
    let options = GroupMemberOptions {
        assignor,
        session_timeout_ms: SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        ..GroupMemberOptions::new(group, client_id, topic)
    };
    GroupMember::start(bootstrap, options).expect("start group member")
}

fn assignments(members: &[&GroupMember]) -> Vec<BTreeSet<i32>> {
    members.iter().map(|m| m.assignment()).collect()
}

/// `per_partition` records to each of `partitions` partitions, values `{tag}-p{p}-{i}`,
/// interleaved across partitions; returns the values in the order produced.
fn produce_tagged(bootstrap: &str, topic: &str, tag: &str, partitions: i32, per_partition: usize) -> Vec<String> {
    let records: Vec<(i32, String)> =
        (0..per_partition).flat_map(|i| (0..partitions).map(move |p| (p, format!("{tag}-p{p}-{i:04}")))).collect();
    clients::produce_to_partitions(bootstrap, topic, &records).expect("produce");
    records.into_iter().map(|(_, v)| v).collect()
}

/// Values of `records`.
fn values_of(records: &[ConsumedRecord]) -> HashSet<String> {
    records.iter().map(|r| r.value_str().to_string()).collect()
}

/// Polls until the records of `members` (and `earlier`, records of members gone) include every
/// value of `wanted`; panics with what is missing after `timeout`.
fn wait_until_received(members: &[&GroupMember], earlier: &[ConsumedRecord], wanted: &[String], context: &str) {
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let mut seen = values_of(earlier);
        for m in members {
            seen.extend(values_of(&m.records()));
        }
        let missing: Vec<&String> = wanted.iter().filter(|v| !seen.contains(*v)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: {} of {} records never reached the group within {DELIVERY_TIMEOUT:?}, e.g. {:?}; members: {:?}",
            missing.len(),
            wanted.len(),
            &missing[..missing.len().min(5)],
            members.iter().map(|m| m.status()).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Polls OffsetFetch until `group`'s committed offsets of `topic` are `want`.
fn wait_for_committed(bootstrap: &str, group: &str, topic: &str, want: &BTreeMap<i32, Option<i64>>) {
    let partitions = i32::try_from(want.len()).unwrap();
    let mut last = None;
    let result = clients::eventually(DELIVERY_TIMEOUT, || {
        let got = clients::committed_offsets(bootstrap, group, topic, partitions)?;
        last = Some(got.clone());
        ensure!(&got == want, "committed {got:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("group {group}: committed offsets of {topic} never became {want:?} (last {last:?}): {e:#}");
    }
}

/// Committed offsets equal to each partition's high watermark.
fn high_watermarks(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i64>> {
    (0..partitions).map(|p| (p, Some(clients::watermarks(bootstrap, topic, p).expect("watermarks").1))).collect()
}

// ---------------------------------------------------------------------------------------------
// Membership changes under load
// ---------------------------------------------------------------------------------------------

/// A producer thread writing unique values round-robin over the partitions, acks=all, about
/// 500 records a second, until stopped.
struct BackgroundProducer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(Vec<String>, Reports)>,
}

impl BackgroundProducer {
    fn start(bootstrap: &str, topic: &str, partitions: i32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (bootstrap, topic, flag) = (bootstrap.to_string(), topic.to_string(), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            let (producer, log) =
                clients::tracked_producer(&clients::producer_config(&bootstrap, "all")).expect("create producer");
            let mut values = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                for _ in 0..10 {
                    let id = values.len();
                    let value = format!("{topic}-{id:07}");
                    let partition = i32::try_from(id).unwrap() % partitions;
                    let record = Record::with_opaque_to(&topic, id).partition(partition).key(&value).payload(&value);
                    clients::send_blocking(&producer, record).expect("enqueue");
                    values.push(value);
                }
                thread::sleep(Duration::from_millis(20));
            }
            producer.flush(Duration::from_secs(60)).expect("flush");
            (values, log.snapshot())
        });
        Self { stop, thread }
    }

    /// Stops, flushes, and returns every value sent (by id) and the delivery reports.
    fn finish(self) -> (Vec<String>, Reports) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("producer thread")
    }
}

fn membership_changes_lose_nothing(assignor: Assignor) {
    let broker = start_broker(None);
    let bootstrap = broker.bootstrap();
    let (topic, group, partitions) = (format!("churn-{}", assignor.name()), "churn", 6);
    clients::create_topic(&bootstrap, &topic, partitions, &[]).expect("create topic");
    let producer = BackgroundProducer::start(&bootstrap, &topic, partitions);

    let mut members: Vec<GroupMember> =
        ["m1", "m2", "m3"].iter().map(|id| member(&bootstrap, group, id, &topic, assignor)).collect();
    let three = clients::wait_for_assignment(partitions, &[2, 2, 2], REBALANCE_TIMEOUT, || {
        assignments(&members.iter().collect::<Vec<_>>())
    })
    .expect("three members get two partitions each");
    println!("{}: three members: {three:?}", assignor.name());

    members.push(member(&bootstrap, group, "m4", &topic, assignor));
    let four = clients::wait_for_assignment(partitions, &[2, 2, 1, 1], REBALANCE_TIMEOUT, || {
        assignments(&members.iter().collect::<Vec<_>>())
    })
    .expect("a fourth member joining rebalances so that every partition has one owner");
    println!("{}: four members: {four:?}", assignor.name());

    let mut leaver = members.remove(0);
    leaver.leave().expect("m1 leaves");
    let after_leave = clients::wait_for_assignment(partitions, &[2, 2, 2], REBALANCE_TIMEOUT, || {
        assignments(&members.iter().collect::<Vec<_>>())
    })
    .expect("a member leaving rebalances its partitions onto the others");
    println!("{}: after m1 left: {after_leave:?}", assignor.name());

    let (sent, reports) = producer.finish();
    assert!(reports.acked.len() >= 1_000, "the producer made too little progress: {} acked", reports.acked.len());
    let acked: Vec<String> = reports.acked.iter().map(|d| sent[d.id].clone()).collect();
    let gone = leaver.records();
    wait_until_received(&members.iter().collect::<Vec<_>>(), &gone, &acked, "acknowledged records");

    // Nothing read that was not written there (P4, P6). A record whose delivery report was an
    // error may still have been written (a timeout is an unknown outcome), but only once.
    let written: HashMap<(i32, i64), &str> =
        reports.acked.iter().map(|d| ((d.partition, d.offset), sent[d.id].as_str())).collect();
    let unsettled: HashSet<&str> = reports.failed.iter().map(|f| sent[f.id].as_str()).collect();
    let mut all = gone;
    for m in &members {
        all.extend(m.records());
    }
    let mut unsettled_at: HashMap<&str, (i32, i64)> = HashMap::new();
    for r in &all {
        let at = (r.partition, r.offset);
        match written.get(&at) {
            Some(&value) => assert_eq!(value, r.value_str(), "{}@{} read a value not acknowledged there", at.0, at.1),
            None => {
                assert!(unsettled.contains(r.value_str()), "{}@{} read {:?}, never sent", at.0, at.1, r.value_str());
                let first = *unsettled_at.entry(r.value_str()).or_insert(at);
                assert_eq!(first, at, "{:?} read at two offsets", r.value_str());
            }
        }
    }
    wait_for_committed(&bootstrap, group, &topic, &high_watermarks(&bootstrap, &topic, partitions));
    println!(
        "{}: {} acknowledged ({} failed), {} deliveries to the group ({} duplicates)",
        assignor.name(),
        acked.len(),
        reports.failed.len(),
        all.len(),
        all.len() - values_of(&all).len()
    );
}

#[test]
fn membership_changes_rebalance_to_one_owner_per_partition_and_lose_no_record_with_range() {
    membership_changes_lose_nothing(Assignor::Range);
}

#[test]
fn membership_changes_rebalance_to_one_owner_per_partition_and_lose_no_record_with_cooperative_sticky() {
    membership_changes_lose_nothing(Assignor::CooperativeSticky);
}

// ---------------------------------------------------------------------------------------------
// A member that dies without leaving
// ---------------------------------------------------------------------------------------------

/// A `strom-group-member` child process and the last status it printed.
struct ChildMember {
    child: Child,
    // Held open: the child leaves cleanly when its stdin closes, so it must not close early.
    _stdin: ChildStdin,
    status: Arc<Mutex<MemberStatus>>,
}

impl ChildMember {
    fn spawn(bootstrap: &str, group: &str, client_id: &str, topic: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strom-group-member"))
            .args(["--bootstrap", bootstrap, "--group", group, "--client-id", client_id, "--topic", topic])
            .args(["--session-timeout-ms", &SESSION_TIMEOUT_MS.to_string()])
            .args(["--heartbeat-interval-ms", &HEARTBEAT_INTERVAL_MS.to_string()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn strom-group-member");
        let stdin = child.stdin.take().expect("child stdin");
        let stdout = child.stdout.take().expect("child stdout");
        let status = Arc::new(Mutex::new(MemberStatus::default()));
        let shared = Arc::clone(&status);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                match serde_json::from_str::<MemberStatus>(&line) {
                    Ok(s) => *shared.lock().unwrap() = s,
                    Err(e) => eprintln!("strom-group-member printed {line:?}: {e}"),
                }
            }
        });
        Self { child, _stdin: stdin, status }
    }

    fn status(&self) -> MemberStatus {
        self.status.lock().unwrap().clone()
    }

    /// SIGKILL: no LeaveGroup, no last commit.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL strom-group-member");
        self.child.wait().expect("reap strom-group-member");
    }
}

impl Drop for ChildMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_member_killed_without_leaving_is_evicted_after_its_session_timeout_and_the_new_owner_resumes_at_its_committed_offset(
) {
    const PER_PARTITION: i64 = 200;
    const PROCESSED: i64 = 130;
    const COMMIT_EVERY: i64 = 50;
    const COMMITTED: i64 = PROCESSED / COMMIT_EVERY * COMMIT_EVERY;
    let broker = start_broker(Some(5));
    let bootstrap = broker.bootstrap();
    let (topic, group, partitions) = ("evict", "evict", 4);
    clients::create_topic(&bootstrap, topic, partitions, &[]).expect("create topic");

    let survivor = member(&bootstrap, group, "survivor", topic, Assignor::Range);
    // Processes offsets 0..130 of its partitions, commits at 50 and 100, then idles.
    let mut doomed = ChildMember::spawn(
        &bootstrap,
        group,
        "doomed",
        topic,
        &["--process-below", &PROCESSED.to_string(), "--commit-every", &COMMIT_EVERY.to_string()],
    );
    let split = clients::wait_for_assignment(partitions, &[2, 2], REBALANCE_TIMEOUT, || {
        vec![survivor.assignment(), doomed.status().assignment]
    })
    .expect("two members split four partitions");
    let doomed_partitions = split[1].clone();

    let records: Vec<(i32, String)> =
        (0..PER_PARTITION).flat_map(|i| (0..partitions).map(move |p| (p, format!("p{p}-o{i:03}")))).collect();
    let acked = clients::produce_to_partitions(&bootstrap, topic, &records).expect("produce");
    let mut value_at: HashMap<(i32, i64), String> = HashMap::new();
    for (d, (p, v)) in acked.iter().zip(&records) {
        assert_eq!(d.partition, *p, "{v} landed in partition {}", d.partition);
        value_at.insert((d.partition, d.offset), v.clone());
    }
    for p in 0..partitions {
        let (low, high) = clients::watermarks(&bootstrap, topic, p).expect("watermarks");
        assert_eq!((low, high), (0, PER_PARTITION), "partition {p} holds exactly what was produced");
    }

    let committed_by_doomed: BTreeMap<i32, i64> = doomed_partitions.iter().map(|&p| (p, COMMITTED)).collect();
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let s = doomed.status();
        if s.idle && s.committed == committed_by_doomed {
            break;
        }
        assert!(Instant::now() < deadline, "the doomed member did not process and commit as told: {s:?}");
        thread::sleep(Duration::from_millis(50));
    }
    let fetched = clients::committed_offsets(&bootstrap, group, topic, partitions).expect("OffsetFetch");
    for &p in &doomed_partitions {
        assert_eq!(fetched[&p], Some(COMMITTED), "OffsetFetch of partition {p} before the kill");
    }

    doomed.kill();
    let killed_at = Instant::now();
    let everything: BTreeSet<i32> = (0..partitions).collect();
    while survivor.assignment() != everything {
        assert!(
            killed_at.elapsed() < Duration::from_millis(u64::from(SESSION_TIMEOUT_MS)) + REBALANCE_TIMEOUT,
            "the dead member's partitions were never reassigned: survivor has {:?}",
            survivor.assignment()
        );
        thread::sleep(Duration::from_millis(20));
    }
    let took = killed_at.elapsed();
    // The last heartbeat may have been up to one interval before the kill.
    let earliest =
        Duration::from_millis(u64::from(SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS)) - Duration::from_millis(500);
    assert!(
        took >= earliest,
        "the dead member's partitions moved {took:?} after the kill, before its {SESSION_TIMEOUT_MS} ms session \
         could have expired: a closed connection is not a LeaveGroup"
    );
    println!("partitions {doomed_partitions:?} reassigned {took:?} after SIGKILL");
    clients::wait_for_assignment(partitions, &[4], REBALANCE_TIMEOUT, || vec![survivor.assignment()])
        .expect("the survivor keeps all partitions");

    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    let offsets_of = |p: i32| -> Vec<i64> {
        survivor.records().iter().filter(|r| r.partition == p).map(|r| r.offset).collect::<Vec<_>>()
    };
    while doomed_partitions.iter().any(|&p| offsets_of(p).last() != Some(&(PER_PARTITION - 1))) {
        assert!(Instant::now() < deadline, "the survivor did not read the taken-over partitions to their end");
        thread::sleep(Duration::from_millis(50));
    }
    let survivor_records = survivor.records();
    for p in 0..partitions {
        let got: Vec<(i64, &str)> =
            survivor_records.iter().filter(|r| r.partition == p).map(|r| (r.offset, r.value_str())).collect();
        let from = if doomed_partitions.contains(&p) { COMMITTED } else { 0 };
        let want: Vec<(i64, &str)> = (from..PER_PARTITION).map(|o| (o, value_at[&(p, o)].as_str())).collect();
        assert!(
            got == want,
            "partition {p}: the survivor read offsets {:?}..{:?} ({} records), expected exactly {from}..{PER_PARTITION}",
            got.first(),
            got.last(),
            got.len()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Independent groups
// ---------------------------------------------------------------------------------------------

#[test]
fn two_groups_on_one_topic_each_receive_every_record_and_keep_offsets_of_their_own() {
    let broker = start_broker(Some(5));
    let bootstrap = broker.bootstrap();
    let (topic, partitions) = ("shared", 3);
    clients::create_topic(&bootstrap, topic, partitions, &[]).expect("create topic");
    let mut alpha = [
        member(&bootstrap, "alpha", "alpha-1", topic, Assignor::Range),
        member(&bootstrap, "alpha", "alpha-2", topic, Assignor::Range),
    ];
    let beta = member(&bootstrap, "beta", "beta-1", topic, Assignor::RoundRobin);
    clients::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, || assignments(&[&alpha[0], &alpha[1]]))
        .expect("alpha's two members split the partitions");
    clients::wait_for_assignment(partitions, &[3], REBALANCE_TIMEOUT, || vec![beta.assignment()])
        .expect("beta's one member has them all");

    let first = produce_tagged(&bootstrap, topic, "first", partitions, 200);
    wait_until_received(&[&alpha[0], &alpha[1]], &[], &first, "group alpha");
    wait_until_received(&[&beta], &[], &first, "group beta");
    let at_200: BTreeMap<i32, Option<i64>> = (0..partitions).map(|p| (p, Some(200))).collect();
    wait_for_committed(&bootstrap, "alpha", topic, &at_200);
    wait_for_committed(&bootstrap, "beta", topic, &at_200);

    // Offsets belong to a group: beta moves on while alpha, gone, stays where it was.
    for m in &mut alpha {
        m.leave().expect("alpha member leaves");
    }
    let second = produce_tagged(&bootstrap, topic, "second", partitions, 100);
    wait_until_received(&[&beta], &[], &second, "group beta, second round");
    wait_for_committed(&bootstrap, "beta", topic, &(0..partitions).map(|p| (p, Some(300))).collect());
    assert_eq!(
        clients::committed_offsets(&bootstrap, "alpha", topic, partitions).expect("OffsetFetch alpha"),
        at_200,
        "group alpha's offsets moved while it had no members"
    );
}

// ---------------------------------------------------------------------------------------------
// Durability of offsets, and what DescribeGroups / ListGroups report
// ---------------------------------------------------------------------------------------------

/// Polls DescribeGroups until `group` is Stable with exactly `members`, each described with
/// the assignment it sees itself (matched by client.id), then checks ListGroups lists it.
fn assert_described_as_seen(bootstrap: &str, group: &str, topic: &str, protocol: &str, members: &[&GroupMember]) {
    let mut last = None;
    let described = clients::eventually(REBALANCE_TIMEOUT, || {
        let d = clients::describe_group(bootstrap, group)?;
        last = Some(d.clone());
        ensure!(d.state == "Stable", "state {}", d.state);
        ensure!(d.protocol_type == "consumer", "protocol type {:?}", d.protocol_type);
        ensure!(d.protocol == protocol, "protocol {:?}", d.protocol);
        ensure!(d.members.len() == members.len(), "{} members", d.members.len());
        for m in members {
            let seen = d
                .members
                .iter()
                .find(|dm| dm.client_id == m.client_id())
                .ok_or_else(|| anyhow!("no member with client.id {}", m.client_id()))?;
            ensure!(!seen.member_id.is_empty(), "member {} has an empty member id", m.client_id());
            let own = m.assignment();
            let want: BTreeMap<String, BTreeSet<i32>> =
                if own.is_empty() { BTreeMap::new() } else { BTreeMap::from([(topic.to_string(), own)]) };
            ensure!(seen.assignment == want, "{}: described {:?}, sees {want:?}", m.client_id(), seen.assignment);
        }
        Ok(d)
    });
    let described = described.unwrap_or_else(|e| panic!("DescribeGroups {group}: {e:#}; last answer {last:?}"));
    let ids: HashSet<&str> = described.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids.len(), members.len(), "member ids are distinct: {described:?}");
    let listed = clients::list_groups(bootstrap).expect("ListGroups");
    let entry =
        listed.iter().find(|g| g.name == group).unwrap_or_else(|| panic!("ListGroups lacks {group}: {listed:?}"));
    assert_eq!(entry.protocol_type, "consumer", "ListGroups protocol type of {group}");
}

#[test]
fn committed_offsets_survive_a_broker_sigkill_and_describe_groups_reports_what_members_see() {
    let mut broker = start_broker(None);
    let bootstrap = broker.bootstrap();
    let (topic, group, partitions) = ("durable", "durable", 3);
    clients::create_topic(&bootstrap, topic, partitions, &[]).expect("create topic");
    // Different counts per partition, so each committed offset is distinguishable.
    let records: Vec<(i32, String)> =
        (0..partitions).flat_map(|p| (0..40 * (p + 1)).map(move |i| (p, format!("before-p{p}-{i:03}")))).collect();
    clients::produce_to_partitions(&bootstrap, topic, &records).expect("produce");
    let before: Vec<String> = records.iter().map(|(_, v)| v.clone()).collect();

    let members = [
        member(&bootstrap, group, "durable-1", topic, Assignor::Range),
        member(&bootstrap, group, "durable-2", topic, Assignor::Range),
    ];
    let both = || assignments(&[&members[0], &members[1]]);
    clients::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, both).expect("two members share");
    wait_until_received(&[&members[0], &members[1]], &[], &before, "before the crash");
    let expected: BTreeMap<i32, Option<i64>> = (0..partitions).map(|p| (p, Some(i64::from(40 * (p + 1))))).collect();
    wait_for_committed(&bootstrap, group, topic, &expected);
    assert_described_as_seen(&bootstrap, group, topic, "range", &[&members[0], &members[1]]);

    broker.kill().expect("SIGKILL broker");
    broker.restart().expect("restart broker");
    let mut after_restart = None;
    clients::eventually(Duration::from_secs(60), || {
        let got = clients::committed_offsets(&bootstrap, group, topic, partitions)?;
        after_restart = Some(got.clone());
        ensure!(got == expected, "committed {got:?}");
        Ok(())
    })
    .unwrap_or_else(|e| {
        panic!("OffsetFetch after SIGKILL and restart: {after_restart:?}, expected {expected:?}: {e:#}")
    });

    // The group carries on, and what it had committed is not delivered again.
    let after = produce_tagged(&bootstrap, topic, "after", partitions, 30);
    wait_until_received(&[&members[0], &members[1]], &[], &after, "after the restart");
    clients::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, both).expect("the group settles again");
    let all: Vec<ConsumedRecord> = members.iter().flat_map(GroupMember::records).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for r in &all {
        *count.entry(r.value_str()).or_default() += 1;
    }
    let again: Vec<_> = count.iter().filter(|(_, &n)| n > 1).take(5).collect();
    assert!(again.is_empty(), "records committed before the crash were delivered again: {again:?}");
    wait_for_committed(&bootstrap, group, topic, &high_watermarks(&bootstrap, topic, partitions));
    assert_described_as_seen(&bootstrap, group, topic, "range", &[&members[0], &members[1]]);
}

#[test]
fn delete_groups_and_offset_delete_refuse_while_members_are_subscribed_and_remove_offsets_once_empty() {
    let broker = start_broker(Some(5));
    let bootstrap = broker.bootstrap();
    let (topic, group, partitions) = ("deletable", "deletable", 2);
    clients::create_topic(&bootstrap, topic, partitions, &[]).expect("create topic");
    let first = produce_tagged(&bootstrap, topic, "first", partitions, 50);
    let mut reader = member(&bootstrap, group, "reader", topic, Assignor::Range);
    wait_until_received(&[&reader], &[], &first, "first read");
    let at_50: BTreeMap<i32, Option<i64>> = (0..partitions).map(|p| (p, Some(50))).collect();
    wait_for_committed(&bootstrap, group, topic, &at_50);

    let admin = clients::admin_client(&bootstrap).expect("admin client");
    let delete_group = || {
        let mut results = clients::block_on(admin.delete_groups(&[group], &clients::admin_options()))
            .expect("runtime")
            .expect("DeleteGroups");
        results.pop().expect("one result")
    };
    assert_eq!(
        delete_group(),
        Err((group.to_string(), RDKafkaErrorCode::NonEmptyGroup)),
        "DeleteGroups of a live group"
    );
    let mut raw = RawClient::connect(&broker);
    raw.find_coordinator(group);
    let (top, parts) = raw.offset_delete(group, topic, &[0]);
    assert_eq!((top, parts), (0, vec![(0, GROUP_SUBSCRIBED_TO_TOPIC)]), "OffsetDelete while subscribed");
    assert_eq!(clients::committed_offsets(&bootstrap, group, topic, partitions).unwrap(), at_50, "offsets kept");

    reader.leave().expect("the only member leaves");
    let empty = clients::eventually(REBALANCE_TIMEOUT, || {
        let d = clients::describe_group(&bootstrap, group)?;
        ensure!(d.state == "Empty" && d.members.is_empty(), "{d:?}");
        Ok(d)
    });
    empty.expect("the group is Empty once its last member left");
    let (top, parts) = raw.offset_delete(group, topic, &[0]);
    assert_eq!((top, parts), (0, vec![(0, 0)]), "OffsetDelete of an empty group");
    assert_eq!(
        clients::committed_offsets(&bootstrap, group, topic, partitions).unwrap(),
        BTreeMap::from([(0, None), (1, Some(50))]),
        "OffsetDelete removed exactly partition 0's offset"
    );
    assert_eq!(delete_group(), Ok(group.to_string()), "DeleteGroups of an empty group");
    assert_eq!(
        clients::committed_offsets(&bootstrap, group, topic, partitions).unwrap(),
        BTreeMap::from([(0, None), (1, None)]),
        "a deleted group has no offsets"
    );
    let listed = clients::list_groups(&bootstrap).expect("ListGroups");
    assert!(listed.iter().all(|g| g.name != group), "ListGroups still lists the deleted group: {listed:?}");

    // The name can be used again, from scratch: a new member starts at the beginning.
    let again = member(&bootstrap, group, "again", topic, Assignor::Range);
    wait_until_received(&[&again], &[], &first, "a new group under the deleted one's name");
}

// ---------------------------------------------------------------------------------------------
// Bad input through raw requests
// ---------------------------------------------------------------------------------------------

const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = ResponseError::CoordinatorLoadInProgress.code();
const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
const ILLEGAL_GENERATION: i16 = ResponseError::IllegalGeneration.code();
const INCONSISTENT_GROUP_PROTOCOL: i16 = ResponseError::InconsistentGroupProtocol.code();
const UNKNOWN_MEMBER_ID: i16 = ResponseError::UnknownMemberId.code();
const INVALID_SESSION_TIMEOUT: i16 = ResponseError::InvalidSessionTimeout.code();
const MEMBER_ID_REQUIRED: i16 = ResponseError::MemberIdRequired.code();
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = ResponseError::GroupSubscribedToTopic.code();
/// Retriable while `__consumer_offsets` is created or its partition loaded.
const COORDINATOR_WAIT: [i16; 3] = [COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR];

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group_id(group: &str) -> GroupId {
    GroupId(str_bytes(group))
}

/// i16 version, then the body: how the consumer protocol embeds its messages.
fn embedded<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message.encode(&mut buf, version).expect("encode consumer protocol message");
    buf.freeze()
}

fn subscription(topic: &str) -> Bytes {
    embedded(&ConsumerProtocolSubscription::default().with_topics(vec![str_bytes(topic)]), 0)
}

fn assignment_bytes(topic: &str, partitions: &[i32]) -> Bytes {
    let tp = AssignedPartitions::default().with_topic(TopicName(str_bytes(topic))).with_partitions(partitions.to_vec());
    embedded(&ConsumerProtocolAssignment::default().with_assigned_partitions(vec![tp]), 0)
}

/// One raw connection to the coordinator (the only broker), using for each API the highest
/// version both the broker and this test know how to fill.
struct RawClient {
    stream: TcpStream,
    correlation_id: i32,
    versions: HashMap<i16, (i16, i16)>,
}

/// What a JoinGroup asks for.
#[derive(Clone)]
struct Join {
    group: String,
    member_id: String,
    session_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
}

impl RawClient {
    fn connect(broker: &BrokerProcess) -> Self {
        // JoinGroup answers only when the rebalance completes.
        let stream = wire::connect(broker.kafka_addr(), Duration::from_secs(30)).expect("connect");
        let mut raw = Self { stream, correlation_id: 0, versions: HashMap::new() };
        let api: ApiVersionsResponse =
            raw.call(ApiKey::ApiVersions, 3, &wire::api_versions_request()).expect("ApiVersions");
        assert_eq!(api.error_code, NONE, "ApiVersions");
        raw.versions = api.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        raw
    }

    /// The highest version in `lo..=hi` that the broker advertises for `key`.
    fn version(&self, key: ApiKey, lo: i16, hi: i16) -> i16 {
        let (min, max) =
            *self.versions.get(&(key as i16)).unwrap_or_else(|| panic!("the broker does not advertise {key:?}"));
        let v = max.min(hi);
        assert!(v >= lo.max(min), "{key:?}: the broker offers v{min}..=v{max}, this test fills v{lo}..=v{hi}");
        v
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> Result<Resp> {
        self.correlation_id += 1;
        let frame = wire::encode_request(key, version, self.correlation_id, request).context("encode (a test bug)")?;
        self.stream.write_all(&frame).context("send")?;
        let answer =
            wire::read_frame(&mut self.stream)?.ok_or_else(|| anyhow!("connection closed instead of {key:?}"))?;
        let (correlation_id, response) = wire::decode_response::<Resp>(key, version, answer)?;
        if correlation_id != self.correlation_id {
            bail!("{key:?}: correlation id {correlation_id}, sent {}", self.correlation_id);
        }
        Ok(response)
    }

    /// FindCoordinator until it names this broker (it may first answer COORDINATOR_NOT_AVAILABLE
    /// while `__consumer_offsets` is being created).
    fn find_coordinator(&mut self, group: &str) {
        let v = self.version(ApiKey::FindCoordinator, 1, 4);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let request = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![str_bytes(group)])
            } else {
                FindCoordinatorRequest::default().with_key(str_bytes(group))
            };
            let r: FindCoordinatorResponse = self.call(ApiKey::FindCoordinator, v, &request).expect("FindCoordinator");
            let (error, port) = match r.coordinators.first() {
                Some(c) if v >= 4 => (c.error_code, c.port),
                _ => (r.error_code, r.port),
            };
            if error == NONE {
                let local = self.stream.peer_addr().expect("peer address").port();
                assert_eq!(port, i32::from(local), "FindCoordinator {group}: the only broker is the coordinator");
                return;
            }
            assert!(COORDINATOR_WAIT.contains(&error), "FindCoordinator {group}: error {error}");
            assert!(Instant::now() < deadline, "FindCoordinator {group}: still {error} after 30 s");
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn join(&mut self, join: &Join) -> JoinGroupResponse {
        let v = self.version(ApiKey::JoinGroup, 1, 9);
        let protocols = join
            .protocols
            .iter()
            .map(|(name, metadata)| {
                JoinGroupRequestProtocol::default().with_name(str_bytes(name)).with_metadata(metadata.clone())
            })
            .collect();
        let request = JoinGroupRequest::default()
            .with_group_id(group_id(&join.group))
            .with_session_timeout_ms(join.session_timeout_ms)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(str_bytes(&join.member_id))
            .with_protocol_type(str_bytes(&join.protocol_type))
            .with_protocols(protocols);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r: JoinGroupResponse = self.call(ApiKey::JoinGroup, v, &request).expect("JoinGroup");
            if !COORDINATOR_WAIT.contains(&r.error_code) || Instant::now() > deadline {
                return r;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// A join as a new member: with an empty member id, then (JoinGroup v4+ answers
    /// MEMBER_ID_REQUIRED with the id to use) again with the id the coordinator chose.
    fn join_new(&mut self, join: Join) -> JoinGroupResponse {
        let first = self.join(&join);
        if first.error_code != MEMBER_ID_REQUIRED {
            return first;
        }
        let member_id = first.member_id.to_string();
        assert!(!member_id.is_empty(), "MEMBER_ID_REQUIRED without a member id");
        self.join(&Join { member_id, ..join })
    }

    fn sync(&mut self, group: &str, generation: i32, member_id: &str, plan: &[(&str, Bytes)]) -> SyncGroupResponse {
        let v = self.version(ApiKey::SyncGroup, 0, 5);
        let assignments = plan
            .iter()
            .map(|(member, bytes)| {
                SyncGroupRequestAssignment::default().with_member_id(str_bytes(member)).with_assignment(bytes.clone())
            })
            .collect();
        let mut request = SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(str_bytes(member_id))
            .with_assignments(assignments);
        if v >= 5 {
            request =
                request.with_protocol_type(Some(str_bytes("consumer"))).with_protocol_name(Some(str_bytes("range")));
        }
        self.call(ApiKey::SyncGroup, v, &request).expect("SyncGroup")
    }

    fn heartbeat(&mut self, group: &str, generation: i32, member_id: &str) -> i16 {
        let v = self.version(ApiKey::Heartbeat, 0, 4);
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(str_bytes(member_id));
        let r: HeartbeatResponse = self.call(ApiKey::Heartbeat, v, &request).expect("Heartbeat");
        r.error_code
    }

    /// LeaveGroup; returns the top-level error and, from v3, the member's own.
    fn leave(&mut self, group: &str, member_id: &str) -> (i16, Option<i16>) {
        let v = self.version(ApiKey::LeaveGroup, 0, 5);
        let request = if v >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group_id(group))
                .with_members(vec![MemberIdentity::default().with_member_id(str_bytes(member_id))])
        } else {
            LeaveGroupRequest::default().with_group_id(group_id(group)).with_member_id(str_bytes(member_id))
        };
        let r: LeaveGroupResponse = self.call(ApiKey::LeaveGroup, v, &request).expect("LeaveGroup");
        (r.error_code, r.members.first().map(|m| m.error_code))
    }

    /// OffsetCommit of one offset; returns the partition's error code.
    fn commit(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> i16 {
        let v = self.version(ApiKey::OffsetCommit, 2, 8);
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(str_bytes(member_id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)])]);
        let r: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, v, &request).expect("OffsetCommit");
        let codes: Vec<i16> = r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        assert_eq!(codes.len(), 1, "OffsetCommit of one partition answered {r:?}");
        codes[0]
    }

    /// OffsetDelete; returns the top-level error and (partition, error) for each partition.
    fn offset_delete(&mut self, group: &str, topic: &str, partitions: &[i32]) -> (i16, Vec<(i32, i16)>) {
        let v = self.version(ApiKey::OffsetDelete, 0, 0);
        let request = OffsetDeleteRequest::default().with_group_id(group_id(group)).with_topics(vec![
            OffsetDeleteRequestTopic::default().with_name(TopicName(str_bytes(topic))).with_partitions(
                partitions.iter().map(|&p| OffsetDeleteRequestPartition::default().with_partition_index(p)).collect(),
            ),
        ]);
        let r: OffsetDeleteResponse = self.call(ApiKey::OffsetDelete, v, &request).expect("OffsetDelete");
        let parts =
            r.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code))).collect();
        (r.error_code, parts)
    }
}

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
        clients::wait_for_assignment(
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
    let got = clients::decode_consumer_assignment(&synced.assignment).expect("decode the assignment");
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
    let before = clients::committed_offsets(&case.bootstrap, &group, &topic, case.partitions).expect("OffsetFetch");
    let real_id =
        clients::describe_group(&case.bootstrap, &group).expect("DescribeGroups").members[0].member_id.clone();

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
        clients::committed_offsets(&case.bootstrap, &group, &topic, case.partitions).expect("OffsetFetch"),
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
