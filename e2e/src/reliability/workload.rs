//! The workload of a reliability run, on librdkafka, writing a [`History`]:
//!
//! - producers: idempotent, acks=all, each sending unique values (`p<n>-<seq>`) round robin
//!   over the partitions at a steady pace; `invoke` before the send, and `ok` (with the offset),
//!   `fail` (librdkafka knows it was not persisted) or `info` (it may have been) from the
//!   delivery report;
//! - consumers: members of one group (`subscribe`), recording every poll and each assignment;
//!   they commit their position every 500 ms;
//! - an observer asking the leaders for the high watermarks (P7) and the group coordinator for
//!   the committed offsets (P8) every 500 ms;
//! - [`final_read`]: after healing, every partition read from its start to its high
//!   watermark, as process `final`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::history::{History, Op, Type, F};
use crate::clients;

/// What to run.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    pub topic: String,
    pub partitions: i32,
    pub producers: usize,
    /// Records a second, per producer.
    pub per_second: u32,
    /// Members of the group (0: no group, no observer).
    pub consumers: usize,
    pub group: String,
}

impl WorkloadSpec {
    /// Two producers at 250 records/s each and two consumers in a group over `partitions`
    /// partitions of `topic`.
    pub fn new(topic: &str, partitions: i32) -> WorkloadSpec {
        WorkloadSpec {
            topic: topic.to_string(),
            partitions,
            producers: 2,
            per_second: 250,
            consumers: 2,
            group: format!("{topic}-readers"),
        }
    }
}

/// A running workload.
pub struct Workload {
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    threads: Vec<(String, JoinHandle<Result<()>>)>,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload").field("acked", &self.acked()).field("history", &self.history.path()).finish()
    }
}

impl Workload {
    /// Starts every producer, consumer and the observer of `spec` against `bootstrap`.
    pub fn start(bootstrap: &str, spec: &WorkloadSpec, history: Arc<History>) -> Result<Workload> {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let mut threads = Vec::new();
        for n in 0..spec.producers {
            let process = format!("p{n}");
            let context =
                HistoryContext { history: Arc::clone(&history), process: process.clone(), acked: Arc::clone(&acked) };
            let mut config = clients::producer_config(bootstrap, "all");
            config
                .set("enable.idempotence", "true")
                .set("max.in.flight.requests.per.connection", "5")
                .set("request.timeout.ms", "10000");
            let producer: ThreadedProducer<HistoryContext> =
                config.create_with_context(context).context("create a producer")?;
            let (spec, stop) = (spec.clone(), Arc::clone(&stop));
            let history = Arc::clone(&history);
            let name = process.clone();
            let handle = thread::Builder::new()
                .name(process.clone())
                .spawn(move || produce(&producer, &name, &spec, &history, &stop))
                .context("spawn a producer")?;
            threads.push((process, handle));
        }
        for n in 0..spec.consumers {
            let process = format!("c{n}");
            let context = GroupContext { history: Arc::clone(&history), process: process.clone() };
            let mut config = clients::base_config(bootstrap);
            config
                .set("group.id", &spec.group)
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("session.timeout.ms", "6000")
                .set("heartbeat.interval.ms", "500")
                .set("fetch.wait.max.ms", "100");
            let consumer: BaseConsumer<GroupContext> =
                config.create_with_context(context).context("create a consumer")?;
            consumer.subscribe(&[&spec.topic]).context("subscribe")?;
            let (stop, history, name) = (Arc::clone(&stop), Arc::clone(&history), process.clone());
            let handle = thread::Builder::new()
                .name(process.clone())
                .spawn(move || consume(&consumer, &name, &history, &stop))
                .context("spawn a consumer")?;
            threads.push((process, handle));
        }
        if spec.consumers > 0 {
            let mut config = clients::base_config(bootstrap);
            config.set("group.id", &spec.group).set("enable.auto.commit", "false");
            let observer: BaseConsumer = config.create().context("create the observer")?;
            let (spec, stop, history) = (spec.clone(), Arc::clone(&stop), Arc::clone(&history));
            let handle = thread::Builder::new()
                .name("observer".into())
                .spawn(move || observe(&observer, &spec, &history, &stop))
                .context("spawn the observer")?;
            threads.push(("observer".into(), handle));
        }
        Ok(Workload { history, stop, acked, threads })
    }

    /// Sends acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    pub fn history(&self) -> &Arc<History> {
        &self.history
    }

    /// Stops every client: producers stop sending and wait for every outstanding delivery
    /// report (at most `message.timeout.ms`), consumers leave the group.
    pub fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for (name, handle) in self.threads {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(format!("{name}: {e:#}")),
                Err(_) => errors.push(format!("{name}: panicked")),
            }
        }
        if !errors.is_empty() {
            bail!("workload clients failed: {}", errors.join("; "));
        }
        Ok(())
    }
}

/// The value producer `process` sends as its `seq`-th record.
pub fn value_of(process: &str, seq: usize) -> String {
    format!("{process}-{seq:08}")
}

fn produce(
    producer: &ThreadedProducer<HistoryContext>,
    process: &str,
    spec: &WorkloadSpec,
    history: &History,
    stop: &AtomicBool,
) -> Result<()> {
    let started = Instant::now();
    let partitions = usize::try_from(spec.partitions.max(1)).unwrap_or(1);
    let mut seq = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let value = value_of(process, seq);
        let partition = i32::try_from(seq % partitions).unwrap_or(0);
        history.record(Op::new(process, Type::Invoke, F::Send).value(&value).partition(partition));
        let record: BaseRecord<'_, str, str, usize> = BaseRecord::with_opaque_to(&spec.topic, seq)
            .partition(partition)
            .key(value.as_str())
            .payload(value.as_str());
        if let Err(e) = clients::send_blocking(producer, record) {
            history
                .record(Op::new(process, Type::Fail, F::Send).value(&value).partition(partition).error(e.to_string()));
        }
        seq += 1;
        let due = Duration::from_secs_f64(seq as f64 / f64::from(spec.per_second.max(1)));
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            thread::sleep(wait);
        }
    }
    producer.flush(Duration::from_secs(180)).with_context(|| format!("{process}: flush"))
}

/// Records each delivery report of one producer.
struct HistoryContext {
    history: Arc<History>,
    process: String,
    acked: Arc<AtomicUsize>,
}

impl ClientContext for HistoryContext {}

impl ProducerContext for HistoryContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let value = value_of(&self.process, seq);
        let op = match result {
            Ok(message) => {
                self.acked.fetch_add(1, Ordering::Relaxed);
                Op::new(&self.process, Type::Ok, F::Send).offset(message.offset())
            }
            Err((error, message)) => {
                let kind = if persisted(message) == Persisted::No { Type::Fail } else { Type::Info };
                Op::new(&self.process, kind, F::Send).error(error.to_string())
            }
        };
        let partition = match result {
            Ok(m) | Err((_, m)) => m.partition(),
        };
        self.history.record(op.value(value).partition(partition));
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Persisted {
    No,
    Maybe,
}

/// librdkafka's own judgement of a failed record: "not persisted" only when no request that
/// carried it can have reached a leader (a timeout after a send is "possibly persisted").
#[allow(unsafe_code)]
fn persisted(message: &BorrowedMessage<'_>) -> Persisted {
    use rdkafka::bindings::{rd_kafka_message_status, rd_kafka_msg_status_t};
    // SAFETY: the message pointer is valid for the delivery callback's duration (the borrow of
    // `message`), and rd_kafka_message_status only reads it.
    let status = unsafe { rd_kafka_message_status(message.ptr()) };
    if status == rd_kafka_msg_status_t::RD_KAFKA_MSG_STATUS_NOT_PERSISTED {
        Persisted::No
    } else {
        Persisted::Maybe
    }
}

/// Records each assignment of one group member.
struct GroupContext {
    history: Arc<History>,
    process: String,
}

impl ClientContext for GroupContext {}

impl ConsumerContext for GroupContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            for element in assigned.elements() {
                self.history.record(Op::new(&self.process, Type::Ok, F::Assign).partition(element.partition()));
            }
        }
    }
}

const COMMIT_EVERY: Duration = Duration::from_millis(500);

fn consume(consumer: &BaseConsumer<GroupContext>, process: &str, history: &History, stop: &AtomicBool) -> Result<()> {
    let mut last_commit = Instant::now();
    let mut polled_since_commit = false;
    while !stop.load(Ordering::Relaxed) {
        // Errors while brokers come and go are expected; what was read is what counts.
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
            history.record(poll_op(process, &message));
            polled_since_commit = true;
        }
        if polled_since_commit && last_commit.elapsed() >= COMMIT_EVERY {
            last_commit = Instant::now();
            polled_since_commit = false;
            // A commit refused during a rebalance or a coordinator move is retried by the next.
            let _ = consumer.commit_consumer_state(CommitMode::Async);
        }
    }
    consumer.unsubscribe();
    Ok(())
}

fn poll_op(process: &str, message: &BorrowedMessage<'_>) -> Op {
    let value = message.payload().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
    Op::new(process, Type::Ok, F::Poll).value(value).partition(message.partition()).offset(message.offset())
}

fn observe(observer: &BaseConsumer, spec: &WorkloadSpec, history: &History, stop: &AtomicBool) -> Result<()> {
    let mut partitions = TopicPartitionList::new();
    for p in 0..spec.partitions {
        partitions.add_partition(&spec.topic, p);
    }
    while !stop.load(Ordering::Relaxed) {
        // ListOffsets at each leader and OffsetFetch at the coordinator; while either moves the
        // call fails and is tried again.
        for p in 0..spec.partitions {
            if let Ok((_, high)) = observer.fetch_watermarks(&spec.topic, p, Duration::from_secs(1)) {
                history.record(Op::new("observer", Type::Ok, F::Watermark).partition(p).offset(high));
            }
        }
        if let Ok(committed) = observer.committed_offsets(partitions.clone(), Duration::from_secs(5)) {
            for element in committed.elements() {
                if let Offset::Offset(offset) = element.offset() {
                    history.record(
                        Op::new("observer", Type::Ok, F::Committed).partition(element.partition()).offset(offset),
                    );
                }
            }
        }
        thread::sleep(COMMIT_EVERY);
    }
    Ok(())
}

/// Reads every partition of `topic` from its start to its high watermark as process `final`,
/// recording each record. Returns how many were read.
pub fn final_read(bootstrap: &str, topic: &str, history: &History, timeout: Duration) -> Result<usize> {
    let records = clients::read_to_end(bootstrap, topic, timeout).context("final read")?;
    let count = clients::partition_count(bootstrap, topic)?;
    for p in 0..count {
        history.record(Op::new("final", Type::Ok, F::Assign).partition(i32::try_from(p).context("partition")?));
    }
    for r in &records {
        history
            .record(Op::new("final", Type::Ok, F::Poll).value(r.value_str()).partition(r.partition).offset(r.offset));
    }
    Ok(records.len())
}
