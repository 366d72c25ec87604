//! Requirement (DESIGN §2 "Idempotent producers", RELIABILITY P1/P2/P3, scenario S13): an
//! idempotent producer whose connections keep dropping — so requests and responses are lost
//! in flight and batches are retried — ends with every acknowledged record in the log exactly
//! once and every partition in send order.
//!
//! The producer talks to the broker through a TCP proxy that cuts every connection every
//! ~200 ms while 100,000 records are produced; the broker advertises the proxy's address so
//! that librdkafka's every connection goes through it. The checking read happens after the
//! cutting has stopped (the proxy then forwards bytes untouched).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::proxy::TcpProxy;
use rdkafka::producer::Producer;

const RECORDS: usize = 100_000;
const PARTITIONS: usize = 3;
const CUT_EVERY: Duration = Duration::from_millis(200);
/// Records per second: paced so that the stream lasts ~20 s and meets ~100 cuts (unpaced,
/// librdkafka sends 100,000 small records in about a second, between two cuts).
const RATE: usize = 5_000;
const MIN_CUTS: u64 = 20;

#[test]
fn idempotent_producer_through_dropped_connections_writes_each_record_once_in_order() {
    let mut broker = BrokerProcess::new(BrokerOptions::default()).expect("prepare broker");
    let mut proxy = TcpProxy::start(broker.kafka_addr()).expect("start proxy");
    broker.set_advertised_kafka(proxy.addr());
    broker.start().expect("start broker");
    let bootstrap = proxy.addr().to_string();
    let topic = "idempotent";
    clients::create_topic(&bootstrap, topic, i32::try_from(PARTITIONS).unwrap(), &[]).expect("create topic");

    let mut config = clients::producer_config(&bootstrap, "all");
    config
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("batch.num.messages", "500")
        .set("max.in.flight.requests.per.connection", "5")
        .set("message.timeout.ms", "300000");
    let (producer, log) = clients::tracked_producer(&config).expect("create producer");

    proxy.start_cutting(CUT_EVERY).expect("start cutting");
    let started = Instant::now();
    let values: Vec<String> = (0..RECORDS).map(|i| format!("p{}-seq{:06}", i % PARTITIONS, i / PARTITIONS)).collect();
    for (i, value) in values.iter().enumerate() {
        if i % 100 == 0 {
            let due = started + Duration::from_secs_f64(i as f64 / RATE as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
        }
        let record = Record::with_opaque_to(topic, i)
            .partition(i32::try_from(i % PARTITIONS).unwrap())
            .key(value)
            .payload(value);
        clients::send_blocking(&producer, record).expect("enqueue");
    }
    let flushed = producer.flush(Duration::from_secs(300));
    proxy.stop_cutting();
    let reports = log.snapshot();
    println!(
        "produced in {:.1?}: {} acked, {} failed, {} connections accepted, {} cut",
        started.elapsed(),
        reports.acked.len(),
        reports.failed.len(),
        proxy.accepted(),
        proxy.cut_count()
    );
    flushed.expect("flush: every record settled within the message timeout");
    assert!(
        proxy.cut_count() >= MIN_CUTS,
        "the proxy cut only {} connections: too few to prove anything",
        proxy.cut_count()
    );
    assert!(
        reports.failed.is_empty(),
        "{} records failed (an idempotent producer retries until its message timeout), first: {:?}",
        reports.failed.len(),
        reports.failed.first()
    );

    let records =
        clients::read_to_end(&bootstrap, topic, Duration::from_secs(120)).expect("read the topic after the faults");
    let mut seen: HashMap<&str, (i32, i64)> = HashMap::new();
    let mut duplicates = Vec::new();
    let mut last_seq: HashMap<i32, i64> = HashMap::new();
    let mut out_of_order = Vec::new();
    for r in &records {
        if let Some(first) = seen.insert(r.value_str(), (r.partition, r.offset)) {
            duplicates.push(format!("{} at {:?} and {}@{}", r.value_str(), first, r.partition, r.offset));
        }
        let seq: i64 = r.value_str().rsplit("seq").next().and_then(|s| s.parse().ok()).unwrap_or(-1);
        let last = last_seq.insert(r.partition, seq).unwrap_or(-1);
        if seq <= last {
            out_of_order.push(format!("{}@{}: seq {seq} after {last}", r.partition, r.offset));
        }
    }
    assert!(
        duplicates.is_empty(),
        "{} duplicates, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(10)]
    );
    assert!(
        out_of_order.is_empty(),
        "{} records out of send order, e.g. {:?}",
        out_of_order.len(),
        &out_of_order[..out_of_order.len().min(10)]
    );
    let lost: Vec<String> = reports
        .acked
        .iter()
        .filter(|d| seen.get(values[d.id].as_str()) != Some(&(d.partition, d.offset)))
        .take(10)
        .map(|d| format!("{} acked at {}@{}", values[d.id], d.partition, d.offset))
        .collect();
    assert!(lost.is_empty(), "acknowledged records missing or elsewhere: {lost:?}");
    assert_eq!(records.len(), RECORDS, "records in the log");
    println!("{} records, each once, in order", records.len());
}
