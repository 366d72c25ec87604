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
//!
//! The raw-request bad-input cases (JoinGroup protocol type and session timeout, stale
//! generations, OffsetCommit from outside the generation) are in `group_bad_input.rs`.
//!
//! Brokers run with `--group-initial-rebalance-delay-ms 0`. Members use 6 s sessions and 1 s
//! heartbeats. Every wait polls a condition; none sleeps a fixed time to let something happen.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure};
use e2e::clients::{self, ConsumedRecord, Record, Reports};
use e2e::groups::fixtures::{
    high_watermarks, member, produce_tagged, start_broker, values_of, wait_for_committed, wait_until_received,
    DELIVERY_TIMEOUT, HEARTBEAT_INTERVAL_MS, REBALANCE_TIMEOUT, SESSION_TIMEOUT_MS,
};
use e2e::groups::raw::{RawClient, GROUP_SUBSCRIBED_TO_TOPIC};
use e2e::groups::{self, Assignor, GroupMember, MemberStatus};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::Producer;

fn assignments(members: &[&GroupMember]) -> Vec<BTreeSet<i32>> {
    members.iter().map(|m| m.assignment()).collect()
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
    let three = groups::wait_for_assignment(partitions, &[2, 2, 2], REBALANCE_TIMEOUT, || {
        assignments(&members.iter().collect::<Vec<_>>())
    })
    .expect("three members get two partitions each");
    println!("{}: three members: {three:?}", assignor.name());

    members.push(member(&bootstrap, group, "m4", &topic, assignor));
    let four = groups::wait_for_assignment(partitions, &[2, 2, 1, 1], REBALANCE_TIMEOUT, || {
        assignments(&members.iter().collect::<Vec<_>>())
    })
    .expect("a fourth member joining rebalances so that every partition has one owner");
    println!("{}: four members: {four:?}", assignor.name());

    let mut leaver = members.remove(0);
    leaver.leave().expect("m1 leaves");
    let after_leave = groups::wait_for_assignment(partitions, &[2, 2, 2], REBALANCE_TIMEOUT, || {
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
    let split = groups::wait_for_assignment(partitions, &[2, 2], REBALANCE_TIMEOUT, || {
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
    let fetched = groups::committed_offsets(&bootstrap, group, topic, partitions).expect("OffsetFetch");
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
    groups::wait_for_assignment(partitions, &[4], REBALANCE_TIMEOUT, || vec![survivor.assignment()])
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
    groups::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, || assignments(&[&alpha[0], &alpha[1]]))
        .expect("alpha's two members split the partitions");
    groups::wait_for_assignment(partitions, &[3], REBALANCE_TIMEOUT, || vec![beta.assignment()])
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
        groups::committed_offsets(&bootstrap, "alpha", topic, partitions).expect("OffsetFetch alpha"),
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
        let d = groups::describe_group(bootstrap, group)?;
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
    let listed = groups::list_groups(bootstrap).expect("ListGroups");
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
    groups::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, both).expect("two members share");
    wait_until_received(&[&members[0], &members[1]], &[], &before, "before the crash");
    let expected: BTreeMap<i32, Option<i64>> = (0..partitions).map(|p| (p, Some(i64::from(40 * (p + 1))))).collect();
    wait_for_committed(&bootstrap, group, topic, &expected);
    assert_described_as_seen(&bootstrap, group, topic, "range", &[&members[0], &members[1]]);

    broker.kill().expect("SIGKILL broker");
    broker.restart().expect("restart broker");
    let mut after_restart = None;
    clients::eventually(Duration::from_secs(60), || {
        let got = groups::committed_offsets(&bootstrap, group, topic, partitions)?;
        after_restart = Some(got.clone());
        ensure!(got == expected, "committed {got:?}");
        Ok(())
    })
    .unwrap_or_else(|e| {
        panic!("OffsetFetch after SIGKILL and restart: {after_restart:?}, expected {expected:?}: {e:#}")
    });

    // The group carries on, and what it had committed is not delivered again. (Records
    // produced after the restart may be delivered twice if the members rebalance while they
    // read them: the group's promise is at-least-once for what was not yet committed.)
    let after = produce_tagged(&bootstrap, topic, "after", partitions, 30);
    wait_until_received(&[&members[0], &members[1]], &[], &after, "after the restart");
    groups::wait_for_assignment(partitions, &[2, 1], REBALANCE_TIMEOUT, both).expect("the group settles again");
    let all: Vec<ConsumedRecord> = members.iter().flat_map(GroupMember::records).collect();
    let committed_before: HashSet<&str> = before.iter().map(String::as_str).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for r in all.iter().filter(|r| committed_before.contains(r.value_str())) {
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
    assert_eq!(groups::committed_offsets(&bootstrap, group, topic, partitions).unwrap(), at_50, "offsets kept");

    reader.leave().expect("the only member leaves");
    let empty = clients::eventually(REBALANCE_TIMEOUT, || {
        let d = groups::describe_group(&bootstrap, group)?;
        ensure!(d.state == "Empty" && d.members.is_empty(), "{d:?}");
        Ok(d)
    });
    empty.expect("the group is Empty once its last member left");
    let (top, parts) = raw.offset_delete(group, topic, &[0]);
    assert_eq!((top, parts), (0, vec![(0, 0)]), "OffsetDelete of an empty group");
    assert_eq!(
        groups::committed_offsets(&bootstrap, group, topic, partitions).unwrap(),
        BTreeMap::from([(0, None), (1, Some(50))]),
        "OffsetDelete removed exactly partition 0's offset"
    );
    assert_eq!(delete_group(), Ok(group.to_string()), "DeleteGroups of an empty group");
    assert_eq!(
        groups::committed_offsets(&bootstrap, group, topic, partitions).unwrap(),
        BTreeMap::from([(0, None), (1, None)]),
        "a deleted group has no offsets"
    );
    let listed = groups::list_groups(&bootstrap).expect("ListGroups");
    assert!(listed.iter().all(|g| g.name != group), "ListGroups still lists the deleted group: {listed:?}");

    // The name can be used again, from scratch: a new member starts at the beginning.
    let again = member(&bootstrap, group, "again", topic, Assignor::Range);
    wait_until_received(&[&again], &[], &first, "a new group under the deleted one's name");
}
