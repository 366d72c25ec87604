//! librdkafka (`rdkafka`) helpers shared by the tests and the load generator.
//!
//! - Config builders for producers and consumers with settings that suit a loopback broker.
//! - [`TrackingContext`]: a producer context that records every delivery report (which record,
//!   where it landed, or why it failed), the ground truth of "acknowledged" for fault tests.
//! - Admin calls through rdkafka's `AdminClient`, made synchronous with [`block_on`].
//! - Assign-based consumers: every consumer here names its partitions and starting offsets
//!   itself (`assign`, never `subscribe`) and never commits, so reading a topic back never
//!   depends on the group coordinator. Consumers that `subscribe` in a group are in
//!   [`crate::groups`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication, TopicResult};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message, Timestamp};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

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

/// The topic's configs as DescribeConfigs reports them (every key, defaults included).
pub fn topic_configs(bootstrap: &str, topic: &str) -> Result<std::collections::BTreeMap<String, String>> {
    let admin = admin_client(bootstrap)?;
    let mut results =
        block_on(admin.describe_configs([&rdkafka::admin::ResourceSpecifier::Topic(topic)], &admin_options()))?
            .with_context(|| format!("DescribeConfigs {topic}"))?;
    let resource = results
        .pop()
        .ok_or_else(|| anyhow!("DescribeConfigs {topic}: empty result"))?
        .map_err(|code| anyhow!("DescribeConfigs {topic}: {code:?}"))?;
    Ok(resource.entries.into_iter().filter_map(|e| Some((e.name, e.value?))).collect())
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
