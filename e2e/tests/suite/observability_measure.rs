//! Figures for docs/benchmarks.md ("Metrics: scrape cost"), not a test: run by hand with
//! `cargo test --release -p e2e --test suite observability_measure:: -- --ignored --nocapture`.
//! - `/metrics` response time and size, and the series count, of one broker hosting 100 and
//!   1,000 partitions and coordinating 100 groups, with and without per-partition series;
//! - a producer's delays (acks=all, idempotent, fixed rate) while `/metrics` is scraped in a
//!   tight loop against none (a scrape must take no lock a Produce needs);
//! - strom-load's produce throughput with a scrape every second against none.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use e2e::broker::http_get;
use e2e::clients;
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use e2e::process::run_to_end;
use e2e::workload::Writer;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// One broker hosting `partitions` partitions (one topic), 100 groups with a committed offset.
fn broker_with(partitions: i32, per_partition_series: bool) -> Cluster {
    let flag = if per_partition_series { "true" } else { "false" };
    let cluster = Cluster::start(ClusterSpec::new(1, 1).with_args(&[
        "--metrics-partition-series",
        flag,
        "--consumer-lag-interval-ms",
        "1000",
    ]))
    .unwrap();
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "wide", partitions, 1, &[]).unwrap().unwrap();
    for g in 0..100 {
        let group: BaseConsumer =
            clients::consumer_config(&bootstrap).set("group.id", format!("group-{g}")).create().unwrap();
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset("wide", g % partitions, Offset::Offset(0)).unwrap();
        wait_until(Duration::from_secs(60), || Ok(group.commit(&offsets, CommitMode::Sync)?)).unwrap();
    }
    cluster
}

#[test]
#[ignore = "a measurement for docs/benchmarks.md, run by hand"]
fn scrape_time_size_and_series() {
    for partitions in [100, 1000] {
        for per_partition in [false, true] {
            let cluster = broker_with(partitions, per_partition);
            let addr = cluster.brokers[0].http_addr();
            std::thread::sleep(Duration::from_secs(2)); // a lag round
            let mut times = Vec::new();
            let mut size = 0;
            let mut series = 0;
            for _ in 0..50 {
                let t = Instant::now();
                let r = http_get(addr, "/metrics").unwrap();
                times.push(t.elapsed());
                size = r.body.len();
                series = r.body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count();
            }
            println!(
                "partitions {partitions}, per-partition series {per_partition}: /metrics p50 {:?} p99 {:?}, {size} bytes, {series} series",
                percentile(times.clone(), 0.5),
                percentile(times, 0.99)
            );
        }
    }
}

/// Scrapes `/metrics` of `addr` every `every` (zero: back to back) until stopped; the count.
fn scraper(addr: std::net::SocketAddr, every: Duration, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let n = AtomicUsize::new(0);
        while !stop.load(Ordering::Relaxed) {
            let _ = http_get(addr, "/metrics");
            n.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(every);
        }
        n.into_inner()
    })
}

#[test]
#[ignore = "a measurement for docs/benchmarks.md, run by hand"]
fn a_producer_while_metrics_are_scraped() {
    let cluster = broker_with(1000, true);
    let bootstrap = cluster.bootstrap();
    let addr = cluster.brokers[0].http_addr();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "steady", 6, 1, &[]).unwrap().unwrap();
    for round in 0..2 {
        if std::env::var_os("STROM_MEASURE_THROUGHPUT_ONLY").is_some() {
            break;
        }
        for scraping in [false, true] {
            let stop = Arc::new(AtomicBool::new(false));
            let scrapes = scraping.then(|| scraper(addr, Duration::ZERO, stop.clone()));
            let writer = Writer::start(&bootstrap, "steady", 6, 5000).unwrap();
            std::thread::sleep(Duration::from_secs(20));
            let written = writer.stop().unwrap();
            stop.store(true, Ordering::Relaxed);
            let n = scrapes.map(|h| h.join().unwrap()).unwrap_or(0);
            let delays: Vec<Duration> = written.delays().into_iter().map(|(_, d)| d).collect();
            println!(
                "round {round}, scraping in a loop {scraping} ({n} scrapes): {} records, delay p50 {:?} p99 {:?} max {:?}",
                delays.len(),
                percentile(delays.clone(), 0.5),
                percentile(delays.clone(), 0.99),
                delays.iter().max().copied().unwrap_or_default()
            );
        }
    }
    for round in 0..2 {
        for scraping in [false, true] {
            let stop = Arc::new(AtomicBool::new(false));
            let scrapes = scraping.then(|| scraper(addr, Duration::from_secs(1), stop.clone()));
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_strom-load"));
            cmd.args(["produce", "--bootstrap", &bootstrap, "--topic", "steady", "--records", "10000000"]);
            let out = run_to_end(cmd, "strom-load", Duration::from_secs(300)).unwrap();
            stop.store(true, Ordering::Relaxed);
            let n = scrapes.map(|h| h.join().unwrap()).unwrap_or(0);
            println!("round {round}, a scrape every second {scraping} ({n} scrapes): {}", out.stdout.trim());
        }
    }
}
