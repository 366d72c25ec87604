//! [`GroupMember`]: a librdkafka consumer that `subscribe`s and lets the group coordinator hand
//! out partitions. It commits by hand, and only what it has processed (never librdkafka's
//! auto-commit), so a test knows which offsets the group committed and which records were
//! processed after them. It runs on a thread of its own (or, through the `strom-group-member`
//! binary, in a process of its own that a test can SIGKILL).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use crate::clients::{base_config, verbose, ConsumedRecord};

/// A member's `partition.assignment.strategy`. Assignors run in the group leader (a client);
/// the broker picks a protocol every member supports and passes the leader's plan on. Eager
/// ones (range, roundrobin) revoke everything at each rebalance; cooperative-sticky revokes
/// only what moves, over two rebalances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    Range,
    RoundRobin,
    CooperativeSticky,
}

impl Assignor {
    /// The name in librdkafka's config and in JoinGroup's protocol list.
    pub fn name(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
            Self::CooperativeSticky => "cooperative-sticky",
        }
    }
}

impl std::str::FromStr for Assignor {
    type Err = anyhow::Error;

    fn from_str(name: &str) -> Result<Self> {
        [Self::Range, Self::RoundRobin, Self::CooperativeSticky]
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| anyhow!("unknown assignor {name:?} (range, roundrobin, cooperative-sticky)"))
    }
}

/// When a [`GroupMember`] commits what it has processed. Every commit is synchronous and
/// names explicit offsets: the position after the last record processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitPolicy {
    /// Every `interval` for the assigned partitions, for partitions about to be revoked, and
    /// before leaving: at-least-once delivery with few duplicates.
    Periodic(Duration),
    /// Only when a partition's processed position reaches a multiple of `n`, right then. A
    /// member that stops between two multiples leaves records processed but not committed, so
    /// whoever takes its partitions over must start at the last multiple.
    AtMultiplesOf(i64),
}

/// What a [`GroupMember`] is.
#[derive(Debug, Clone)]
pub struct GroupMemberOptions {
    /// `group.id`.
    pub group: String,
    /// `client.id`: how the member is recognised in DescribeGroups.
    pub client_id: String,
    /// The one topic subscribed to.
    pub topic: String,
    pub assignor: Assignor,
    /// `session.timeout.ms`: how long the coordinator waits for a heartbeat before evicting.
    pub session_timeout_ms: u32,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval_ms: u32,
    pub commit: CommitPolicy,
    /// Records at this offset or later are received but not processed (not recorded, never
    /// committed): a member that stops making progress at a known point and then just idles.
    pub process_below: Option<i64>,
}

impl GroupMemberOptions {
    /// Range assignor, 6 s session (the broker's default minimum), 1 s heartbeats, commits
    /// every 200 ms, processes everything.
    pub fn new(group: &str, client_id: &str, topic: &str) -> Self {
        Self {
            group: group.to_string(),
            client_id: client_id.to_string(),
            topic: topic.to_string(),
            assignor: Assignor::Range,
            session_timeout_ms: 6_000,
            heartbeat_interval_ms: 1_000,
            commit: CommitPolicy::Periodic(Duration::from_millis(200)),
            process_below: None,
        }
    }
}

/// The librdkafka config of a subscribing member: no auto-commit, no offset store (offsets are
/// committed explicitly), earliest when the group has no committed offset.
pub fn group_consumer_config(bootstrap: &str, options: &GroupMemberOptions) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("client.id", &options.client_id)
        .set("group.id", &options.group)
        .set("partition.assignment.strategy", options.assignor.name())
        .set("session.timeout.ms", options.session_timeout_ms.to_string())
        .set("heartbeat.interval.ms", options.heartbeat_interval_ms.to_string())
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", "100");
    config
}

/// What a member has seen and done so far; also the JSON line `strom-group-member` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    pub client_id: String,
    /// Partitions of the topic assigned right now (librdkafka's view, refreshed as it polls).
    pub assignment: BTreeSet<i32>,
    /// Per assigned partition, the offset after the last record processed (forgotten when the
    /// partition is revoked, so a stale position is never committed over a newer owner's).
    pub processed: BTreeMap<i32, i64>,
    /// Per partition, the last offset a commit of this member was acknowledged for.
    pub committed: BTreeMap<i32, i64>,
    /// Records processed, duplicates included.
    pub consumed: usize,
    /// Assignments received from rebalances, the first included.
    pub assignments: usize,
    pub commit_failures: usize,
    /// The latest consumer, rebalance or commit error (diagnostics only).
    pub last_error: Option<String>,
    /// `process_below` is set, something is assigned, and every assigned partition has been
    /// processed up to it.
    pub idle: bool,
    /// Why the member's thread stopped early (consumer creation or subscribe failed).
    pub failed: Option<String>,
}

struct MemberState {
    status: MemberStatus,
    /// Every record processed, in processing order.
    records: Vec<ConsumedRecord>,
}

/// What the member's thread, its rebalance callbacks and the test share.
struct MemberShared {
    topic: String,
    commit: CommitPolicy,
    process_below: Option<i64>,
    state: Mutex<MemberState>,
}

impl MemberShared {
    fn lock(&self) -> MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note_error(&self, what: &str, error: impl std::fmt::Display) {
        if verbose() {
            eprintln!("member {}: {what}: {error}", self.lock().status.client_id);
        }
        self.lock().status.last_error = Some(format!("{what}: {error}"));
    }

    fn refresh_idle(&self, status: &mut MemberStatus) {
        status.idle = match self.process_below {
            Some(limit) => {
                !status.assignment.is_empty()
                    && status.assignment.iter().all(|p| status.processed.get(p) == Some(&limit))
            }
            None => false,
        };
    }

    /// Records the partitions of our topic in `assignment`; forgets the processed position of
    /// partitions no longer assigned.
    fn set_assignment(&self, assignment: &TopicPartitionList) {
        let partitions: BTreeSet<i32> =
            assignment.elements().iter().filter(|e| e.topic() == self.topic).map(|e| e.partition()).collect();
        let mut state = self.lock();
        state.status.processed.retain(|p, _| partitions.contains(p));
        state.status.assignment = partitions;
        self.refresh_idle(&mut state.status);
    }

    /// Processes one record; returns the commit that [`CommitPolicy::AtMultiplesOf`] asks for.
    fn process(&self, record: ConsumedRecord) -> Option<(i32, i64)> {
        let (partition, offset) = (record.partition, record.offset);
        if self.process_below.is_some_and(|limit| offset >= limit) {
            return None;
        }
        let mut state = self.lock();
        state.status.processed.insert(partition, offset + 1);
        state.status.consumed += 1;
        state.records.push(record);
        self.refresh_idle(&mut state.status);
        match self.commit {
            CommitPolicy::AtMultiplesOf(n) if n > 0 && (offset + 1) % n == 0 => Some((partition, offset + 1)),
            _ => None,
        }
    }

    /// Processed positions not yet committed, of the assigned partitions or of `only`.
    fn pending_commits(&self, only: Option<&BTreeSet<i32>>) -> Vec<(i32, i64)> {
        let state = self.lock();
        let status = &state.status;
        status
            .processed
            .iter()
            .filter(|(p, _)| only.map_or_else(|| status.assignment.contains(p), |set| set.contains(p)))
            .filter(|(p, offset)| status.committed.get(p) != Some(offset))
            .map(|(&p, &offset)| (p, offset))
            .collect()
    }

    /// A synchronous commit of explicit offsets; the outcome goes into the status.
    fn commit<C: ConsumerContext>(&self, consumer: &BaseConsumer<C>, offsets: &[(i32, i64)]) {
        if offsets.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for &(partition, offset) in offsets {
            if let Err(e) = tpl.add_partition_offset(&self.topic, partition, Offset::Offset(offset)) {
                self.note_error("build commit", e);
                return;
            }
        }
        match consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => {
                let mut state = self.lock();
                for &(partition, offset) in offsets {
                    state.status.committed.insert(partition, offset);
                }
            }
            Err(e) => {
                self.lock().status.commit_failures += 1;
                self.note_error(&format!("commit {offsets:?}"), e);
            }
        }
    }
}

/// The consumer context of a [`GroupMember`]: commits what was processed before partitions
/// are taken away, and keeps the status's assignment current.
struct MemberContext {
    shared: Arc<MemberShared>,
}

impl ClientContext for MemberContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if verbose() {
            eprintln!("librdkafka {level:?} {fac}: {log_message}");
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.shared.note_error("client", format!("{error}: {reason}"));
    }
}

impl ConsumerContext for MemberContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(revoked) => {
                // A lost assignment (this member was evicted) can no longer be committed to.
                if matches!(self.shared.commit, CommitPolicy::Periodic(_)) && !consumer.assignment_lost() {
                    let revoked: BTreeSet<i32> = revoked
                        .elements()
                        .iter()
                        .filter(|e| e.topic() == self.shared.topic)
                        .map(|e| e.partition())
                        .collect();
                    let pending = self.shared.pending_commits(Some(&revoked));
                    self.shared.commit(consumer, &pending);
                }
            }
            Rebalance::Error(e) => self.shared.note_error("rebalance", e),
            Rebalance::Assign(_) => {}
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Assign(_)) {
            self.shared.lock().status.assignments += 1;
        }
        match consumer.assignment() {
            Ok(assignment) => self.shared.set_assignment(&assignment),
            Err(e) => self.shared.note_error("read assignment", e),
        }
    }
}

/// The member's thread: subscribe, poll and process until told to stop, then commit and
/// close (which revokes the assignment and sends LeaveGroup).
fn run_member(
    bootstrap: &str,
    options: &GroupMemberOptions,
    shared: &Arc<MemberShared>,
    stop: &AtomicBool,
) -> Result<()> {
    let context = MemberContext { shared: Arc::clone(shared) };
    let consumer: BaseConsumer<MemberContext> = group_consumer_config(bootstrap, options)
        .create_with_context(context)
        .with_context(|| format!("create group member {}", options.client_id))?;
    consumer.subscribe(&[options.topic.as_str()]).with_context(|| format!("subscribe to {}", options.topic))?;
    let mut last_commit = Instant::now();
    let mut last_refresh = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) if message.topic() == options.topic => {
                if let Some(commit) = shared.process(ConsumedRecord::from_message(&message)) {
                    shared.commit(&consumer, &[commit]);
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => shared.note_error("consume", e),
            None => {}
        }
        if last_refresh.elapsed() >= Duration::from_millis(50) {
            if let Ok(assignment) = consumer.assignment() {
                shared.set_assignment(&assignment);
            }
            last_refresh = Instant::now();
        }
        if let CommitPolicy::Periodic(interval) = options.commit {
            if last_commit.elapsed() >= interval {
                shared.commit(&consumer, &shared.pending_commits(None));
                last_commit = Instant::now();
            }
        }
    }
    if matches!(options.commit, CommitPolicy::Periodic(_)) {
        shared.commit(&consumer, &shared.pending_commits(None));
    }
    // Dropping a subscribed BaseConsumer runs rd_kafka_consumer_close: revoke, LeaveGroup.
    drop(consumer);
    shared.lock().status.assignment.clear();
    Ok(())
}

/// A group member on a thread of its own. Dropping it makes it leave the group.
pub struct GroupMember {
    client_id: String,
    shared: Arc<MemberShared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember").field("client_id", &self.client_id).finish()
    }
}

impl GroupMember {
    /// Starts the member: it subscribes and joins the group in the background.
    pub fn start(bootstrap: &str, options: GroupMemberOptions) -> Result<Self> {
        let shared = Arc::new(MemberShared {
            topic: options.topic.clone(),
            commit: options.commit,
            process_below: options.process_below,
            state: Mutex::new(MemberState {
                status: MemberStatus { client_id: options.client_id.clone(), ..MemberStatus::default() },
                records: Vec::new(),
            }),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let client_id = options.client_id.clone();
        let thread = {
            let (shared, stop, bootstrap) = (Arc::clone(&shared), Arc::clone(&stop), bootstrap.to_string());
            thread::Builder::new()
                .name(format!("member-{client_id}"))
                .spawn(move || {
                    if let Err(e) = run_member(&bootstrap, &options, &shared, &stop) {
                        shared.lock().status.failed = Some(format!("{e:#}"));
                    }
                })
                .with_context(|| format!("spawn member {client_id}"))?
        };
        Ok(Self { client_id, shared, stop, thread: Some(thread) })
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn status(&self) -> MemberStatus {
        self.shared.lock().status.clone()
    }

    /// The partitions assigned right now.
    pub fn assignment(&self) -> BTreeSet<i32> {
        self.shared.lock().status.assignment.clone()
    }

    /// Every record processed so far, in processing order.
    pub fn records(&self) -> Vec<ConsumedRecord> {
        self.shared.lock().records.clone()
    }

    /// Commits what was processed, leaves the group (LeaveGroup) and stops; returns the final
    /// status. [`Self::records`] still answers afterwards.
    pub fn leave(&mut self) -> Result<MemberStatus> {
        self.stop_and_join()?;
        let status = self.status();
        match &status.failed {
            Some(why) => bail!("member {} failed: {why}", self.client_id),
            None => Ok(status),
        }
    }

    fn stop_and_join(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().map_err(|_| anyhow!("member {} panicked", self.client_id))?;
        }
        Ok(())
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
