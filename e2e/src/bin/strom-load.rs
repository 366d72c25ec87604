//! `strom-load`: a load generator on librdkafka for Strom (or any Kafka-compatible broker).
//!
//! Modes, each printing exactly one JSON line on stdout:
//! `{"mode", "records", "bytes", "secs", "msgs_per_sec", "mb_per_sec",
//!   "latency_ms": {"p50", "p99", "p999"}, "errors"}`
//! - `produce`: sends `--records` records as fast as the producer takes them; latency is from
//!   the send call to the delivery report.
//! - `consume`: assigns every partition from the beginning and reads until `--records`
//!   arrived; no latency (nulls).
//! - `e2e-latency`: produces at a fixed `--rate` for `--duration-secs` with the send time in
//!   each value while consuming the same topic; latency is consume time minus send time.
//! - `cpu-handoff` probes the machine, not a broker: the nanoseconds a cache line takes from
//!   one CPU to another and back (`e2e::cpu_handoff`), printed as
//!   `{"mode", "cpus", "round_trips", "round_trip_ns"}`; the benchmark scripts record it
//!   before every run.
//!
//! - `charts` reads a side-by-side run's results.tsv (e2e/scripts/bench-vs-kafka.sh) and
//!   writes SVG charts of it, Kafka beside Strom (`e2e::bench_charts`); prints the files.
//!
//! MB means MiB (2^20 bytes), as in Kafka's perf tools. Progress and errors go to stderr.
//!
//! The process's malloc is jemalloc, librdkafka's C allocations included (the crate exports
//! unprefixed `malloc`/`free`): with glibc's, librdkafka's broker thread allocating every
//! fetched message and the application thread freeing it fight over one arena lock, and how
//! hard depends on how the two threads overlap, which a faster broker makes worse
//! (docs/benchmarks.md, "The consumer's malloc").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use e2e::batch_consume::{BatchReader, Delivered};
use e2e::clients;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(name = "strom-load", about = "Load generator for Kafka-compatible brokers")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Produce records as fast as possible.
    Produce(ProduceArgs),
    /// Consume records from the beginning of every partition.
    Consume(ConsumeArgs),
    /// Produce at a fixed rate while consuming; report end-to-end latency.
    #[command(name = "e2e-latency")]
    E2eLatency(LatencyArgs),
    /// Measure how long a cache line takes between two CPUs and back (a probe of the machine).
    #[command(name = "cpu-handoff")]
    CpuHandoff(HandoffArgs),
    /// Draw SVG charts of a bench-vs-kafka.sh results.tsv.
    Charts(ChartArgs),
    /// A transactional producer sending as fast as it can, committing every interval; the
    /// latency figures are the commits' (e2e/src/txn_load.rs).
    Transactions(TxnArgs),
}

#[derive(Debug, Args)]
struct TxnArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    producer: ProducerSettings,
    /// transactional.id
    #[arg(long, default_value = "strom-load")]
    transactional_id: String,
    /// Commit every this many milliseconds.
    #[arg(long, default_value_t = 100)]
    commit_interval_ms: u64,
    /// How long to run.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

#[derive(Debug, Args)]
struct ChartArgs {
    /// The raw results (results.tsv).
    #[arg(long)]
    results: std::path::PathBuf,
    /// Directory the SVG files are written to (created if missing).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Prefix of each file name (e.g. the run's date and commit).
    #[arg(long, default_value = "")]
    prefix: String,
}

#[derive(Debug, Args)]
struct HandoffArgs {
    /// The CPU of the asking thread.
    #[arg(long, default_value_t = 0)]
    first: usize,
    /// The CPU of the answering thread.
    #[arg(long, default_value_t = 1)]
    second: usize,
    /// Round trips to time.
    #[arg(long, default_value_t = 100_000)]
    round_trips: u64,
}

#[derive(Debug, Args)]
struct Target {
    /// bootstrap.servers
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Topic to use.
    #[arg(long, default_value = "strom-load")]
    topic: String,
    /// A librdkafka property for every client this run creates (repeatable), e.g.
    /// `-X fetch.queue.backoff.ms=0`; applied after strom-load's own settings.
    #[arg(short = 'X', long = "config", value_name = "KEY=VALUE", value_parser = parse_property)]
    config: Vec<(String, String)>,
}

fn parse_property(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

impl Target {
    /// `config` with this run's `-X` properties applied.
    fn apply(&self, mut config: ClientConfig) -> ClientConfig {
        for (k, v) in &self.config {
            config.set(k, v);
        }
        config
    }
}

#[derive(Debug, Args)]
struct ProducerSettings {
    /// Bytes per record value.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// acks: 0, 1 or all.
    #[arg(long, default_value = "all", value_parser = ["0", "1", "all", "-1"])]
    acks: String,
    /// linger.ms
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// batch.size in bytes.
    #[arg(long, default_value_t = 1_000_000)]
    batch_size: u64,
    /// compression.codec: none, gzip, snappy, lz4, zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// Create the topic with this many partitions if it does not exist.
    #[arg(long)]
    partitions: Option<i32>,
    /// The replication factor of a topic this creates.
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
}

#[derive(Debug, Args)]
struct ProduceArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    producer: ProducerSettings,
    /// Records to send.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
}

#[derive(Debug, Args)]
struct ConsumeArgs {
    #[command(flatten)]
    target: Target,
    /// Records to read before stopping.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
    /// Give up after this many seconds without a new record.
    #[arg(long, default_value_t = 30)]
    idle_timeout_secs: u64,
    /// Also write when the records arrived to this file: one tab-separated line per 10 ms
    /// since the assignment and partition that got records in it (ms, partition, records), to
    /// see where a run's time went (connecting, the first fetch, a partition that came late).
    #[arg(long)]
    timeline: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
struct LatencyArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    producer: ProducerSettings,
    /// Records per second.
    #[arg(long, default_value_t = 1_000)]
    rate: u64,
    /// How long to produce.
    #[arg(long, default_value_t = 30)]
    duration_secs: u64,
    /// Also write the latency over time to this file: one tab-separated line per 100 ms of
    /// send time (ms since the first send, records, p50, p99 and max latency in ms, then the
    /// p99 and max from send to delivery report), to see when a tail happened, whether on the
    /// produce path, and line it up with the brokers' logs.
    #[arg(long)]
    timeline: Option<std::path::PathBuf>,
    /// Start the clock at once instead of after one record per partition has gone through
    /// (the warm-up: connections opened, partitions led and followed).
    #[arg(long)]
    no_warmup: bool,
}

fn main() {
    let cli = Cli::parse();
    // (the JSON line, whether the run had errors)
    let outcome = match cli.mode {
        Mode::Produce(args) => produce(&args).map(Report::finish),
        Mode::Consume(args) => consume(&args).map(Report::finish),
        Mode::E2eLatency(args) => e2e_latency(&args).map(Report::finish),
        Mode::CpuHandoff(args) => cpu_handoff(&args).map(|line| (line, false)),
        Mode::Charts(args) => charts(&args).map(|line| (line, false)),
        Mode::Transactions(args) => transactions(&args).map(Report::finish),
    };
    match outcome {
        Ok((line, had_errors)) => {
            println!("{line}");
            if had_errors {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("strom-load: {e:#}");
            std::process::exit(2);
        }
    }
}

fn transactions(args: &TxnArgs) -> Result<Report> {
    prepare_topic(&args.target, &args.producer)?;
    let run = e2e::txn_load::run(
        producer_config(&args.target, &args.producer),
        &args.transactional_id,
        &args.target.topic,
        args.producer.record_size,
        Duration::from_millis(args.commit_interval_ms),
        Duration::from_secs(args.seconds),
    )?;
    Ok(Report {
        mode: "transactions",
        records: run.records,
        bytes: run.bytes,
        secs: run.secs,
        latencies_us: run.commit_latencies_us,
        errors: 0,
    })
}

fn charts(args: &ChartArgs) -> Result<String> {
    let tsv = std::fs::read_to_string(&args.results).with_context(|| format!("read {}", args.results.display()))?;
    let runs = e2e::bench_charts::parse_results(&tsv)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let mut written = Vec::new();
    for (name, svg) in e2e::bench_charts::charts(&runs)? {
        let path = args.out.join(format!("{}{name}", args.prefix));
        std::fs::write(&path, svg).with_context(|| format!("write {}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(serde_json::json!({ "mode": "charts", "files": written }).to_string())
}

fn cpu_handoff(args: &HandoffArgs) -> Result<String> {
    let handoff = e2e::cpu_handoff::measure(args.first, args.second, args.round_trips)?;
    /// The probe's JSON line, fields in the documented order.
    #[derive(Serialize)]
    struct Line {
        mode: &'static str,
        cpus: [usize; 2],
        round_trips: u64,
        round_trip_ns: f64,
    }
    let line = Line {
        mode: "cpu-handoff",
        cpus: [handoff.cpus.0, handoff.cpus.1],
        round_trips: handoff.round_trips,
        round_trip_ns: (handoff.round_trip_ns * 10.0).round() / 10.0,
    };
    Ok(serde_json::to_string(&line)?)
}

/// What every mode reports.
struct Report {
    mode: &'static str,
    records: usize,
    bytes: u64,
    secs: f64,
    /// Latencies in microseconds (empty when the mode has none).
    latencies_us: Vec<u64>,
    errors: usize,
}

/// The JSON line, fields in the documented order (a struct, not a map, keeps it).
#[derive(Serialize)]
struct Output {
    mode: &'static str,
    records: usize,
    bytes: u64,
    secs: f64,
    msgs_per_sec: f64,
    mb_per_sec: f64,
    latency_ms: Percentiles,
    errors: usize,
}

#[derive(Serialize)]
struct Percentiles {
    p50: Option<f64>,
    p99: Option<f64>,
    p999: Option<f64>,
}

impl Report {
    /// The JSON line, and whether any record failed.
    fn finish(self) -> (String, bool) {
        (self.to_json(), self.errors > 0)
    }

    fn to_json(&self) -> String {
        let secs = self.secs.max(1e-9);
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        let pct = |q: f64| -> Option<f64> {
            if sorted.is_empty() {
                return None;
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            #[allow(clippy::cast_precision_loss)]
            Some(round3(sorted[rank - 1] as f64 / 1000.0))
        };
        #[allow(clippy::cast_precision_loss)]
        let (records, bytes) = (self.records as f64, self.bytes as f64);
        let output = Output {
            mode: self.mode,
            records: self.records,
            bytes: self.bytes,
            secs: round3(self.secs),
            msgs_per_sec: round3(records / secs),
            mb_per_sec: round3(bytes / secs / (1024.0 * 1024.0)),
            latency_ms: Percentiles { p50: pct(0.50), p99: pct(0.99), p999: pct(0.999) },
            errors: self.errors,
        };
        serde_json::to_string(&output).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn producer_config(target: &Target, settings: &ProducerSettings) -> ClientConfig {
    let mut config = clients::producer_config(&target.bootstrap, &settings.acks);
    config
        .set("linger.ms", settings.linger_ms.to_string())
        .set("batch.size", settings.batch_size.to_string())
        .set("compression.codec", &settings.compression);
    target.apply(config)
}

fn prepare_topic(target: &Target, settings: &ProducerSettings) -> Result<()> {
    if let Some(partitions) = settings.partitions {
        let admin = clients::admin_client(&target.bootstrap)?;
        match clients::create_topic_with(&admin, &target.topic, partitions, settings.replication_factor, &[])? {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => anyhow::bail!("create topic {topic}: {code:?}"),
        }
    }
    Ok(())
}

/// Values of `size` bytes cut from a fixed pseudo-random text, so compression has something
/// realistic to chew on (neither all zeros nor incompressible).
fn value_source(size: usize) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let words = ["order", "user", "id", "amount", "status", "shipped", "eur", "created", "item", "sku"];
    let mut out = Vec::with_capacity(size + 65_536);
    while out.len() < size + 65_536 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let word = words[usize::try_from(state % 10).unwrap_or(0)];
        out.extend_from_slice(word.as_bytes());
        out.extend_from_slice(format!("={} ", state % 100_000).as_bytes());
    }
    out
}

/// Records the time from each send to its delivery report.
struct LatencyContext {
    origin: Instant,
    latencies_us: Mutex<Vec<u64>>,
    acked: AtomicUsize,
    failed: AtomicUsize,
}

impl ClientContext for LatencyContext {}

impl ProducerContext for LatencyContext {
    /// Microseconds since `origin` at the send call.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_at_us: usize) {
        match result {
            Ok(_) => {
                let now = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
                let sent = u64::try_from(sent_at_us).unwrap_or(0);
                self.latencies_us.lock().unwrap_or_else(|e| e.into_inner()).push(now.saturating_sub(sent));
                self.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                if self.failed.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("delivery failed: {error}");
                }
            }
        }
    }
}

fn produce(args: &ProduceArgs) -> Result<Report> {
    prepare_topic(&args.target, &args.producer)?;
    let origin = Instant::now();
    let context = LatencyContext {
        origin,
        latencies_us: Mutex::new(Vec::with_capacity(args.records)),
        acked: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
    };
    let producer: ThreadedProducer<LatencyContext> =
        producer_config(&args.target, &args.producer).create_with_context(context).context("create producer")?;
    let size = args.producer.record_size;
    let source = value_source(size);
    let started = Instant::now();
    for i in 0..args.records {
        let start = (i * 7919) % 65_536;
        let value = &source[start..start + size];
        let sent_at = usize::try_from(origin.elapsed().as_micros()).unwrap_or(usize::MAX);
        let record: BaseRecord<'_, (), [u8], usize> =
            BaseRecord::with_opaque_to(&args.target.topic, sent_at).payload(value);
        clients::send_blocking(&producer, record).context("enqueue")?;
    }
    producer.flush(Duration::from_secs(300)).context("flush")?;
    let secs = started.elapsed().as_secs_f64();
    let context = producer.context();
    let records = context.acked.load(Ordering::Relaxed);
    let latencies_us = std::mem::take(&mut *context.latencies_us.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Report {
        mode: "produce",
        records,
        bytes: (records * size) as u64,
        secs,
        latencies_us,
        errors: context.failed.load(Ordering::Relaxed),
    })
}

/// How long the warm-up may take: a just-created topic's replicas may still be starting.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(60);

/// One record to each of the `partitions` of `topic`, acknowledged and then consumed, before
/// the clock starts: the measured records find the producer's and the consumer's connections
/// open, the partitions led, followed and fetched, so the figures are those of a running
/// pipeline rather than of client start-up and a topic's first moments (the same for every
/// system measured).
fn warm_up(
    producer: &clients::TrackedProducer,
    consumer: &BaseConsumer,
    topic: &str,
    partitions: usize,
    size: usize,
) -> Result<()> {
    let value = vec![0u8; size];
    for p in 0..partitions {
        let p = i32::try_from(p).context("partition index")?;
        let record: BaseRecord<'_, (), [u8], usize> =
            BaseRecord::with_opaque_to(topic, usize::MAX).partition(p).payload(value.as_slice());
        clients::send_blocking(producer, record).context("enqueue a warm-up record")?;
    }
    producer.flush(WARM_UP_TIMEOUT).context("flush the warm-up records")?;
    let failed = producer.context().log.failed_count();
    if failed > 0 {
        bail!("{failed} warm-up records were not acknowledged");
    }
    let deadline = Instant::now() + WARM_UP_TIMEOUT;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < partitions {
        if Instant::now() > deadline {
            bail!(
                "the warm-up records of {} of {partitions} partitions did not arrive within {WARM_UP_TIMEOUT:?}",
                partitions - seen.len()
            );
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                seen.insert(message.partition());
            }
            Some(Err(e)) => eprintln!("warm-up: {e}"),
            None => {}
        }
    }
    Ok(())
}

fn all_partitions(consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>> {
    let count = clients::partition_count_with(consumer, topic)?;
    (0..count).map(|p| i32::try_from(p).context("partition index")).collect()
}

/// Messages `consume` takes from librdkafka per call.
const CONSUME_BATCH: usize = 1024;

fn consume(args: &ConsumeArgs) -> Result<Report> {
    let mut config = clients::consumer_config(&args.target.bootstrap);
    config.set("fetch.wait.max.ms", "500");
    let consumer: BaseConsumer = args.target.apply(config).create().context("create consumer")?;
    let partitions = all_partitions(&consumer, &args.target.topic)?;
    let mut assignment = TopicPartitionList::new();
    for &p in &partitions {
        assignment.add_partition_offset(&args.target.topic, p, Offset::Beginning)?;
    }
    let started = Instant::now();
    consumer.assign(&assignment).context("assign")?;
    let idle_timeout = Duration::from_secs(args.idle_timeout_secs);
    let (mut records, mut bytes, mut errors) = (0usize, 0u64, 0usize);
    // With small records this loop is what limits a consume run (docs/benchmarks.md), so it
    // takes messages many per call and reads the clock only while none arrive.
    let mut reader = BatchReader::new(&consumer, CONSUME_BATCH).context("batch reader")?;
    let mut idle_since: Option<Instant> = None;
    let mut arrivals: std::collections::BTreeMap<(u128, i32), u64> = std::collections::BTreeMap::new();
    while records < args.records {
        let before = records;
        // One clock read per batch call, not per record.
        let window = if args.timeline.is_some() { started.elapsed().as_millis() / 10 * 10 } else { 0 };
        // No more than still needed: librdkafka waits for a full batch (or the timeout).
        reader.read(args.records - records, Duration::from_millis(100), |delivered| match delivered {
            Delivered::Record { partition, key, value, .. } => {
                records += 1;
                bytes += (value.map_or(0, <[u8]>::len) + key.map_or(0, <[u8]>::len)) as u64;
                if args.timeline.is_some() {
                    *arrivals.entry((window, partition)).or_default() += 1;
                }
            }
            Delivered::Error(code) => {
                errors += 1;
                if errors <= 5 {
                    eprintln!("consume error: {code}");
                }
            }
        })?;
        if records > before {
            idle_since = None;
            continue;
        }
        if idle_since.get_or_insert_with(Instant::now).elapsed() > idle_timeout {
            eprintln!("no record for {idle_timeout:?}: stopping at {records} of {}", args.records);
            errors += 1;
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if let Some(path) = &args.timeline {
        let mut out = String::from("ms\tpartition\trecords\n");
        for ((ms, partition), n) in &arrivals {
            out.push_str(&format!("{ms}\t{partition}\t{n}\n"));
        }
        std::fs::write(path, out).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(Report {
        mode: "consume",
        records,
        bytes,
        secs,
        latencies_us: Vec::new(),
        errors: if records < args.records { errors.max(1) } else { 0 },
    })
}

/// The `--timeline` file: per 100 ms of send time, "ms records p50 p99 max ack_p99 ack_max"
/// (latencies in ms; `ack_*` from the send to the producer's delivery report, the part of the
/// end-to-end latency the produce path takes, so a tail can be told apart as produce or fetch).
fn timeline(sent_us: &[u64], latencies_us: &[u64], acks: &[(u64, u64)]) -> String {
    const WINDOW_US: u64 = 100_000;
    let first = sent_us.iter().copied().min().unwrap_or(0);
    let window_of = |sent: u64| sent.saturating_sub(first) / WINDOW_US;
    let mut windows: std::collections::BTreeMap<u64, (Vec<u64>, Vec<u64>)> = std::collections::BTreeMap::new();
    for (sent, latency) in sent_us.iter().zip(latencies_us) {
        windows.entry(window_of(*sent)).or_default().0.push(*latency);
    }
    for (sent, ack) in acks {
        windows.entry(window_of(*sent)).or_default().1.push(*ack);
    }
    let at = |sorted: &[u64], q: f64| -> String {
        if sorted.is_empty() {
            return "-".to_string();
        }
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let i = ((sorted.len() - 1) as f64 * q).round() as usize;
        #[allow(clippy::cast_precision_loss)]
        let ms = sorted[i] as f64 / 1000.0;
        format!("{ms:.2}")
    };
    let mut out = String::from("ms\trecords\tp50_ms\tp99_ms\tmax_ms\tack_p99_ms\tack_max_ms\n");
    for (window, (mut latencies, mut acks)) in windows {
        latencies.sort_unstable();
        acks.sort_unstable();
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            window * WINDOW_US / 1000,
            latencies.len(),
            at(&latencies, 0.5),
            at(&latencies, 0.99),
            at(&latencies, 1.0),
            at(&acks, 0.99),
            at(&acks, 1.0)
        ));
    }
    out
}

fn e2e_latency(args: &LatencyArgs) -> Result<Report> {
    if args.rate == 0 || args.duration_secs == 0 {
        bail!("--rate and --duration-secs must be positive");
    }
    let size = args.producer.record_size.max(16);
    prepare_topic(&args.target, &args.producer)?;
    let origin = Instant::now();
    let total = usize::try_from(args.rate * args.duration_secs).context("too many records")?;

    // The consumer starts at the current end of every partition, named explicitly so that no
    // record produced after this point can be skipped.
    let mut config = clients::consumer_config(&args.target.bootstrap);
    config.set("fetch.wait.max.ms", "100").set("fetch.min.bytes", "1");
    let consumer: BaseConsumer = args.target.apply(config).create().context("create consumer")?;
    let mut assignment = TopicPartitionList::new();
    for p in all_partitions(&consumer, &args.target.topic)? {
        // Retried: a just-created partition may have no leader serving it for a moment.
        let (_, high) = e2e::cluster::wait_until(clients::ADMIN_TIMEOUT, || {
            Ok(consumer.fetch_watermarks(&args.target.topic, p, Duration::from_secs(5))?)
        })
        .with_context(|| format!("watermarks of partition {p}"))?;
        assignment.add_partition_offset(&args.target.topic, p, Offset::Offset(high))?;
    }
    consumer.assign(&assignment).context("assign")?;
    let producer: ThreadedProducer<_> = producer_config(&args.target, &args.producer)
        .create_with_context(clients::TrackingContext::default())
        .context("create producer")?;
    if !args.no_warmup {
        warm_up(&producer, &consumer, &args.target.topic, assignment.count(), size)?;
    }
    let produce_for = Duration::from_secs(args.duration_secs);
    let keep_sent = args.timeline.is_some();
    let reader = thread::spawn(move || {
        let deadline = Instant::now() + produce_for + Duration::from_secs(30);
        let mut latencies_us = Vec::with_capacity(total);
        let mut sent_us = Vec::with_capacity(if keep_sent { total } else { 0 });
        let mut bytes = 0u64;
        while latencies_us.len() < total && Instant::now() < deadline {
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
                let now = u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX);
                let Some(payload) = message.payload() else {
                    continue;
                };
                let Some(stamp) = payload.get(..8) else {
                    continue;
                };
                let mut sent = [0u8; 8];
                sent.copy_from_slice(stamp);
                let sent = u64::from_be_bytes(sent);
                latencies_us.push(now.saturating_sub(sent));
                if keep_sent {
                    sent_us.push(sent);
                }
                bytes += payload.len() as u64;
            }
        }
        (latencies_us, sent_us, bytes)
    });

    let source = value_source(size);
    let started = Instant::now();
    let mut value = vec![0u8; size];
    // Each record's send time (µs since `origin`), by id, for the timeline's delivery latencies.
    let mut sent_by_id = Vec::with_capacity(if keep_sent { total } else { 0 });
    for i in 0..total {
        // Record i is due at i / rate seconds after the start.
        #[allow(clippy::cast_precision_loss)]
        let due = started + Duration::from_secs_f64(i as f64 / args.rate as f64);
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        let start = (i * 7919) % 65_536;
        value.copy_from_slice(&source[start..start + size]);
        let sent = u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        value[..8].copy_from_slice(&sent.to_be_bytes());
        if keep_sent {
            sent_by_id.push(sent);
        }
        let record: BaseRecord<'_, (), [u8], usize> =
            BaseRecord::with_opaque_to(&args.target.topic, i).payload(value.as_slice());
        clients::send_blocking(&producer, record).context("enqueue")?;
    }
    let produced_secs = started.elapsed().as_secs_f64();
    producer.flush(Duration::from_secs(60)).context("flush")?;
    let failed = producer.context().log.failed_count();
    let (latencies_us, sent_us, bytes) = reader.join().map_err(|_| anyhow::anyhow!("consumer thread panicked"))?;
    if let Some(path) = &args.timeline {
        let acks: Vec<(u64, u64)> = producer
            .context()
            .log
            .snapshot()
            .acked
            .iter()
            .filter_map(|d| {
                let sent = *sent_by_id.get(d.id)?;
                let acked = u64::try_from(d.at.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX);
                Some((sent, acked.saturating_sub(sent)))
            })
            .collect();
        std::fs::write(path, timeline(&sent_us, &latencies_us, &acks))
            .with_context(|| format!("write {}", path.display()))?;
    }
    let records = latencies_us.len();
    if records < total {
        eprintln!("consumed {records} of {total} records");
    }
    Ok(Report {
        mode: "e2e-latency",
        records,
        bytes,
        secs: produced_secs,
        latencies_us,
        errors: failed + (total - records),
    })
}
