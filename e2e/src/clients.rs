//! librdkafka (`rdkafka`) helpers shared by the tests and the load generator.
//!
//! - Config builders for producers and consumers with settings that suit a loopback broker.
//! - [`TrackingContext`]: a producer context that records every delivery report (which record,
//!   where it landed, or why it failed), the ground truth of "acknowledged" for fault tests.
//! - Admin calls through rdkafka's `AdminClient`, made synchronous with [`block_on`].
//! - Assign-based consumers: Strom has no consumer groups yet, so every consumer here names its
//!   partitions and starting offsets itself (`assign`, never `subscribe`) and never commits.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication, TopicResult};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message, Timestamp};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

/// Timeout for one admin or metadata round trip.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether to print librdkafka's log lines and errors (`STROM_E2E_VERBOSE=1`).
pub fn verbose() -> bool {
    std::env::var_os("STROM_E2E_VERBOSE").is_some()
}

/// Settings common to every client of a loopback test broker.
pub fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "strom-e2e")
        .set("broker.address.family", "v4")
        // Reconnect fast: tests restart brokers and cut connections on purpose.
        .set("reconnect.backoff.ms", "20")
        .set("reconnect.backoff.max.ms", "500")
        .set("retry.backoff.ms", "20")
        .set("retry.backoff.max.ms", "500")
        .set("topic.metadata.refresh.interval.ms", "2000");
    if verbose() {
        config.set_log_level(RDKafkaLogLevel::Debug);
    }
    config
}

/// A producer config: `acks` is "0", "1" or "all"; `linger.ms` 5; a large local queue.
pub fn producer_config(bootstrap: &str, acks: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("acks", acks)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576");
    config
}

/// A consumer config for assign-only use: a `group.id` (librdkafka's consumer API wants one)
/// but no commits and no offset store, so no group coordinator is ever needed for offsets.
pub fn consumer_config(bootstrap: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("group.id", "strom-e2e-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", "100");
    config
}

// ---------------------------------------------------------------------------------------------
// Delivery tracking
// ---------------------------------------------------------------------------------------------

/// A record the broker acknowledged: its id (the delivery opaque) and where it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub id: usize,
    pub partition: i32,
    pub offset: i64,
    pub at: Instant,
}

/// A record the producer gave up on.
#[derive(Debug, Clone)]
pub struct Failed {
    pub id: usize,
    pub error: KafkaError,
}

/// Every delivery report a producer received, in arrival order.
#[derive(Debug, Default)]
pub struct DeliveryLog {
    acked_count: AtomicUsize,
    failed_count: AtomicUsize,
    reports: Mutex<Reports>,
}

#[derive(Debug, Default, Clone)]
pub struct Reports {
    pub acked: Vec<Delivered>,
    pub failed: Vec<Failed>,
}

impl DeliveryLog {
    pub fn acked_count(&self) -> usize {
        self.acked_count.load(Ordering::SeqCst)
    }

    pub fn failed_count(&self) -> usize {
        self.failed_count.load(Ordering::SeqCst)
    }

    /// Acknowledged plus failed: every record whose fate is known.
    pub fn settled_count(&self) -> usize {
        self.acked_count() + self.failed_count()
    }

    pub fn snapshot(&self) -> Reports {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A producer context whose delivery opaque is the record's id (`usize`) and which records
/// every delivery report in a shared [`DeliveryLog`].
#[derive(Debug, Clone, Default)]
pub struct TrackingContext {
    pub log: Arc<DeliveryLog>,
}

impl ClientContext for TrackingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if verbose() {
            eprintln!("librdkafka {level:?} {fac}: {log_message}");
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if verbose() {
            eprintln!("librdkafka error {error}: {reason}");
        }
    }
}

impl ProducerContext for TrackingContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, id: usize) {
        let mut reports = self.log.lock();
        match result {
            Ok(message) => {
                reports.acked.push(Delivered {
                    id,
                    partition: message.partition(),
                    offset: message.offset(),
                    at: Instant::now(),
                });
                self.log.acked_count.fetch_add(1, Ordering::SeqCst);
            }
            Err((error, _)) => {
                reports.failed.push(Failed { id, error: error.clone() });
                self.log.failed_count.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// A record with a string key and value whose delivery opaque is its id (for
/// [`TrackingContext`]); naming the types spares every call site the inference dance.
pub type Record<'a> = BaseRecord<'a, str, str, usize>;

/// A producer that records its deliveries.
pub type TrackedProducer = ThreadedProducer<TrackingContext>;

/// Creates a [`TrackedProducer`] from `config`; returns it with its delivery log.
pub fn tracked_producer(config: &ClientConfig) -> Result<(TrackedProducer, Arc<DeliveryLog>)> {
    let context = TrackingContext::default();
    let log = Arc::clone(&context.log);
    let producer = config.create_with_context(context).context("create tracked producer")?;
    Ok((producer, log))
}

/// Enqueues `record`, waiting while librdkafka's local queue is full.
pub fn send_blocking<'a, C, K, P>(
    producer: &ThreadedProducer<C>,
    mut record: BaseRecord<'a, K, P, C::DeliveryOpaque>,
) -> KafkaResult<()>
where
    C: ProducerContext + 'static,
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                thread::sleep(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(error),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Admin
// ---------------------------------------------------------------------------------------------

/// Runs a future (an rdkafka admin call) to completion on a throwaway current-thread runtime.
/// rdkafka resolves admin futures from its own thread, so no particular runtime is needed;
/// must not be called from inside a tokio runtime.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("build a runtime for an admin call")?;
    Ok(runtime.block_on(future))
}

pub fn admin_client(bootstrap: &str) -> Result<AdminClient<DefaultClientContext>> {
    base_config(bootstrap).create().context("create admin client")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(ADMIN_TIMEOUT)).operation_timeout(Some(ADMIN_TIMEOUT))
}

/// Creates `name` with `partitions` partitions, replication factor 1 and `configs`; any
/// per-topic error (TopicAlreadyExists included) is an error.
pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) -> Result<()> {
    let admin = admin_client(bootstrap)?;
    match create_topic_with(&admin, name, partitions, 1, configs)? {
        Ok(_) => Ok(()),
        Err((topic, code)) => bail!("create topic {topic}: {code:?}"),
    }
}

/// CreateTopics for one topic; returns rdkafka's per-topic result.
pub fn create_topic_with(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
    replication: i32,
    configs: &[(&str, &str)],
) -> Result<TopicResult> {
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let mut results =
        block_on(admin.create_topics([&topic], &admin_options()))?.with_context(|| format!("CreateTopics {name}"))?;
    results.pop().ok_or_else(|| anyhow!("CreateTopics {name}: empty result"))
}

/// Creates the topic unless it exists already.
pub fn ensure_topic(bootstrap: &str, name: &str, partitions: i32) -> Result<()> {
    let admin = admin_client(bootstrap)?;
    match create_topic_with(&admin, name, partitions, 1, &[])? {
        Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => Ok(()),
        Err((topic, code)) => bail!("create topic {topic}: {code:?}"),
    }
}

/// Retries `attempt` every 100 ms until it succeeds or `timeout` passes; returns the last
/// error then. For what Kafka makes eventually visible: a topic just created or deleted, a
/// config just altered (the broker answers before its metadata image has caught up).
pub fn eventually<T>(timeout: Duration, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() > deadline => return Err(e.context(format!("still failing after {timeout:?}"))),
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata and offsets
// ---------------------------------------------------------------------------------------------

/// A consumer used only for metadata and ListOffsets look-ups.
pub fn lookup_client(bootstrap: &str) -> Result<BaseConsumer> {
    consumer_config(bootstrap).create().context("create look-up consumer")
}

/// The number of partitions Metadata reports for `topic` (an error if the topic has one).
pub fn partition_count(bootstrap: &str, topic: &str) -> Result<usize> {
    partition_count_with(&lookup_client(bootstrap)?, topic)
}

pub fn partition_count_with(client: &BaseConsumer, topic: &str) -> Result<usize> {
    let metadata =
        client.fetch_metadata(Some(topic), ADMIN_TIMEOUT).with_context(|| format!("Metadata for {topic}"))?;
    let t =
        metadata.topics().iter().find(|t| t.name() == topic).ok_or_else(|| anyhow!("Metadata has no topic {topic}"))?;
    if let Some(err) = t.error() {
        bail!("Metadata for {topic}: {:?}", RDKafkaErrorCode::from(err));
    }
    Ok(t.partitions().len())
}

/// (low, high) watermarks of one partition: ListOffsets earliest and latest.
pub fn watermarks(bootstrap: &str, topic: &str, partition: i32) -> Result<(i64, i64)> {
    lookup_client(bootstrap)?
        .fetch_watermarks(topic, partition, ADMIN_TIMEOUT)
        .with_context(|| format!("watermarks of {topic}-{partition}"))
}

// ---------------------------------------------------------------------------------------------
// Consuming
// ---------------------------------------------------------------------------------------------

/// One consumed record, copied out of librdkafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Headers in wire order; duplicate keys kept.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Timestamp,
}

impl ConsumedRecord {
    pub fn from_message(message: &BorrowedMessage<'_>) -> Self {
        let headers = message
            .headers()
            .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect())
            .unwrap_or_default();
        Self {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
            timestamp: message.timestamp(),
        }
    }

    pub fn value_str(&self) -> &str {
        self.value.as_deref().and_then(|v| std::str::from_utf8(v).ok()).unwrap_or("")
    }

    pub fn key_str(&self) -> &str {
        self.key.as_deref().and_then(|v| std::str::from_utf8(v).ok()).unwrap_or("")
    }
}

/// A consumer assigned to `topic`'s `partitions`, each starting at `start`.
pub fn assigned_consumer(bootstrap: &str, topic: &str, partitions: &[i32], start: Offset) -> Result<BaseConsumer> {
    let consumer: BaseConsumer = consumer_config(bootstrap).create().context("create consumer")?;
    let mut assignment = TopicPartitionList::new();
    for &p in partitions {
        assignment.add_partition_offset(topic, p, start).with_context(|| format!("assignment of {topic}-{p}"))?;
    }
    consumer.assign(&assignment).with_context(|| format!("assign {topic} {partitions:?}"))?;
    Ok(consumer)
}

/// Reads every partition of `topic` from its beginning until `n` records arrived or
/// `timeout` passed, and returns what arrived (the caller compares the count).
pub fn consume_n(bootstrap: &str, topic: &str, n: usize, timeout: Duration) -> Result<Vec<ConsumedRecord>> {
    let partitions: Vec<i32> = (0..partition_count(bootstrap, topic)?)
        .map(|p| i32::try_from(p).context("partition index"))
        .collect::<Result<_>>()?;
    let consumer = assigned_consumer(bootstrap, topic, &partitions, Offset::Beginning)?;
    let mut records = Vec::with_capacity(n);
    let deadline = Instant::now() + timeout;
    while records.len() < n && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => records.push(ConsumedRecord::from_message(&message)),
            Some(Err(e)) if verbose() => eprintln!("consume_n {topic}: {e}"),
            _ => {}
        }
    }
    Ok(records)
}

/// Reads every partition of `topic` from its log start offset up to the high watermark as
/// of the call (ListOffsets latest), so nothing in the log — duplicates included — is missed.
/// Fails if the high watermarks are not reached within `timeout`.
pub fn read_to_end(bootstrap: &str, topic: &str, timeout: Duration) -> Result<Vec<ConsumedRecord>> {
    let lookup = lookup_client(bootstrap)?;
    let count = partition_count_with(&lookup, topic)?;
    let mut ends = HashMap::new();
    for p in 0..count {
        let p = i32::try_from(p).context("partition index")?;
        let (low, high) =
            lookup.fetch_watermarks(topic, p, ADMIN_TIMEOUT).with_context(|| format!("watermarks of {topic}-{p}"))?;
        if high > low {
            ends.insert(p, high);
        }
    }
    let expected: i64 = ends.values().sum();
    let partitions: Vec<i32> = ends.keys().copied().collect();
    if partitions.is_empty() {
        return Ok(Vec::new());
    }
    let consumer = assigned_consumer(bootstrap, topic, &partitions, Offset::Beginning)?;
    let mut records = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    while !ends.is_empty() {
        if Instant::now() > deadline {
            bail!(
                "read_to_end {topic}: {} records read, partitions {:?} not at their high \
                 watermark within {timeout:?} (last consumer error: {last_error:?})",
                records.len(),
                ends
            );
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let record = ConsumedRecord::from_message(&message);
                if let Some(&end) = ends.get(&record.partition) {
                    if record.offset + 1 >= end {
                        ends.remove(&record.partition);
                    }
                }
                records.push(record);
            }
            Some(Err(e)) => {
                if verbose() {
                    eprintln!("read_to_end {topic}: {e}");
                }
                last_error = Some(e);
            }
            None => {}
        }
    }
    Ok(records)
}

/// Produces each `(partition, value)` of `records` (value as the key too) with acks=all, waits
/// for every delivery report, and returns where each landed, in the order of `records`. Any
/// failed delivery is an error.
pub fn produce_to_partitions(bootstrap: &str, topic: &str, records: &[(i32, String)]) -> Result<Vec<Delivered>> {
    let (producer, log) = tracked_producer(&producer_config(bootstrap, "all"))?;
    for (id, (partition, value)) in records.iter().enumerate() {
        let record = Record::with_opaque_to(topic, id).partition(*partition).key(value).payload(value);
        send_blocking(&producer, record).with_context(|| format!("enqueue {value} for {topic}-{partition}"))?;
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(60)).context("flush")?;
    let reports = log.snapshot();
    if let Some(failed) = reports.failed.first() {
        bail!("{} of {} deliveries to {topic} failed, first: {failed:?}", reports.failed.len(), records.len());
    }
    let mut acked = reports.acked;
    if acked.len() != records.len() {
        bail!("{} of {} records to {topic} acknowledged", acked.len(), records.len());
    }
    acked.sort_by_key(|d| d.id);
    Ok(acked)
}

// ---------------------------------------------------------------------------------------------
// Consumer groups
// ---------------------------------------------------------------------------------------------
//
// A [`GroupMember`] is a librdkafka consumer that `subscribe`s and lets the group coordinator
// hand out partitions. It commits by hand, and only what it has processed (never librdkafka's
// auto-commit), so a test knows which offsets the group committed and which records were
// processed after them. It runs on a thread of its own (or, through the `strom-group-member`
// binary, in a process of its own that a test can SIGKILL).

/// How long members' assignments must stay the same before [`wait_for_assignment`] believes
/// a rebalance is over: two heartbeat intervals of the tests' members, and the gap between the
/// two rebalances of a cooperative reassignment.
pub const ASSIGNMENT_SETTLE: Duration = Duration::from_secs(2);

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

/// Whether `assignments` give each partition in 0..partitions to exactly one member.
pub fn is_exclusive_cover(assignments: &[BTreeSet<i32>], partitions: i32) -> bool {
    let mut owners = vec![0usize; usize::try_from(partitions).unwrap_or(0)];
    for &p in assignments.iter().flatten() {
        match usize::try_from(p).ok().and_then(|i| owners.get_mut(i)) {
            Some(n) => *n += 1,
            None => return false,
        }
    }
    owners.iter().all(|&n| n == 1)
}

/// Polls `observe` (every member's current assignment) until the assignments give each of
/// `partitions` partitions to exactly one member, their sizes are `sizes` (in any order), and
/// nothing has changed for [`ASSIGNMENT_SETTLE`]; returns them. An error after `timeout`,
/// naming what was last seen.
pub fn wait_for_assignment(
    partitions: i32,
    sizes: &[usize],
    timeout: Duration,
    mut observe: impl FnMut() -> Vec<BTreeSet<i32>>,
) -> Result<Vec<BTreeSet<i32>>> {
    let mut want = sizes.to_vec();
    want.sort_unstable();
    let deadline = Instant::now() + timeout;
    let mut settled: Option<(Vec<BTreeSet<i32>>, Instant)> = None;
    loop {
        let seen = observe();
        let mut got: Vec<usize> = seen.iter().map(BTreeSet::len).collect();
        got.sort_unstable();
        if got == want && is_exclusive_cover(&seen, partitions) {
            match &settled {
                Some((before, since)) if *before == seen => {
                    if since.elapsed() >= ASSIGNMENT_SETTLE {
                        return Ok(seen);
                    }
                }
                _ => settled = Some((seen.clone(), Instant::now())),
            }
        } else {
            settled = None;
        }
        if Instant::now() > deadline {
            bail!(
                "assignments did not settle on sizes {want:?} covering partitions 0..{partitions} once each \
                 within {timeout:?}; last seen {seen:?}"
            );
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub name: String,
    /// "Stable", "PreparingRebalance", "CompletingRebalance", "Empty" or "Dead".
    pub state: String,
    /// "consumer" for Kafka consumers.
    pub protocol_type: String,
    /// The assignor chosen for the current generation.
    pub protocol: String,
    pub members: Vec<GroupMemberDescription>,
}

/// One member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberDescription {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// The member's assignment, decoded from the consumer protocol: topic → partitions.
    pub assignment: BTreeMap<String, BTreeSet<i32>>,
}

/// DescribeGroups of `group` through librdkafka (`rd_kafka_list_groups` with a group name).
pub fn describe_group(bootstrap: &str, group: &str) -> Result<GroupDescription> {
    let client = lookup_client(bootstrap)?;
    let list =
        client.fetch_group_list(Some(group), ADMIN_TIMEOUT).with_context(|| format!("describe group {group}"))?;
    let info =
        list.groups().iter().find(|g| g.name() == group).ok_or_else(|| anyhow!("group {group} not in the answer"))?;
    group_description(info)
}

/// Every group the broker knows (ListGroups, then DescribeGroups of each, as librdkafka does).
pub fn list_groups(bootstrap: &str) -> Result<Vec<GroupDescription>> {
    let client = lookup_client(bootstrap)?;
    let list = client.fetch_group_list(None, ADMIN_TIMEOUT).context("list groups")?;
    list.groups().iter().map(group_description).collect()
}

fn group_description(info: &rdkafka::groups::GroupInfo) -> Result<GroupDescription> {
    let members = info
        .members()
        .iter()
        .map(|m| {
            let assignment = match m.assignment() {
                Some(bytes) if !bytes.is_empty() => decode_consumer_assignment(bytes)
                    .with_context(|| format!("assignment of member {} of {}", m.id(), info.name()))?,
                _ => BTreeMap::new(),
            };
            Ok(GroupMemberDescription {
                member_id: m.id().to_string(),
                client_id: m.client_id().to_string(),
                client_host: m.client_host().to_string(),
                assignment,
            })
        })
        .collect::<Result<_>>()?;
    Ok(GroupDescription {
        name: info.name().to_string(),
        state: info.state().to_string(),
        protocol_type: info.protocol_type().to_string(),
        protocol: info.protocol().to_string(),
        members,
    })
}

/// Decodes a consumer-protocol assignment (i16 version, then the ConsumerProtocolAssignment
/// body). Versions above the crate's are read as its newest: the format only ever appends.
pub fn decode_consumer_assignment(bytes: &[u8]) -> Result<BTreeMap<String, BTreeSet<i32>>> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        bail!("assignment of {} bytes has no version", bytes.len());
    }
    let version = buf.get_i16();
    if version < 0 {
        bail!("assignment version {version}");
    }
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.min(3))
        .with_context(|| format!("decode consumer assignment v{version}"))?;
    let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for tp in assignment.assigned_partitions {
        out.entry(tp.topic.0.to_string()).or_default().extend(tp.partitions);
    }
    Ok(out)
}

/// OffsetFetch for `group`: the committed offset of each of `topic`'s partitions
/// 0..partitions, `None` where nothing is committed.
pub fn committed_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Result<BTreeMap<i32, Option<i64>>> {
    let mut config = base_config(bootstrap);
    config.set("group.id", group).set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().context("create offset look-up consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let answer = consumer.committed_offsets(tpl, ADMIN_TIMEOUT).with_context(|| format!("OffsetFetch {group}"))?;
    let mut out = BTreeMap::new();
    for element in answer.elements() {
        element.error().with_context(|| format!("OffsetFetch {group} {topic}-{}", element.partition()))?;
        let offset = match element.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        };
        out.insert(element.partition(), offset);
    }
    Ok(out)
}
