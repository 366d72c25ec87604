//! Kafka's own oracle for exactly-once: `org.apache.kafka.tools.TransactionalMessageCopier`
//! (the tool Kafka's system tests use; the Java client's transactional producer, consumer and
//! `sendOffsetsToTransaction`) copies a partition to another topic in transactions, with
//! random aborts, while a broker is SIGKILLed and restarted. A read_committed consumer of the
//! output sees every input record exactly once; a read_uncommitted one sees the aborted
//! copies too. docs/transactions.md.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::clients;
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use e2e::kafka;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

const RECORDS: usize = 3000;

/// Every value of `dst` (3 partitions) read from the beginning with `isolation`, counted.
fn read_counts(bootstrap: &str, isolation: &str, at_least: usize) -> BTreeMap<String, usize> {
    let consumer: BaseConsumer =
        clients::consumer_config(bootstrap).set("isolation.level", isolation).create().unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..3 {
        assignment.add_partition_offset("dst", p, Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let (deadline, mut last) = (Instant::now() + Duration::from_secs(60), Instant::now());
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                *counts.entry(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()).or_default() += 1;
                last = Instant::now();
            }
            _ if counts.values().sum::<usize>() >= at_least && last.elapsed() > Duration::from_secs(2) => break,
            _ => {}
        }
    }
    counts
}

#[test]
fn the_transactional_message_copier_copies_exactly_once_through_a_broker_sigkill() {
    kafka::ensure_fetched().unwrap();
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "src", 1, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();
    clients::create_topic_with(&admin, "dst", 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();
    let input: Vec<(i32, String)> = (0..RECORDS).map(|i| (0, format!("record-{i:05}"))).collect();
    clients::produce_to_partitions(&bootstrap, "src", &input).unwrap();

    let copier = {
        let bootstrap = bootstrap.clone();
        let records = RECORDS.to_string();
        std::thread::spawn(move || {
            let args = [
                "--broker-list",
                &bootstrap,
                "--input-topic",
                "src",
                "--input-partition",
                "0",
                "--output-topic",
                "dst",
                "--consumer-group",
                "copier",
                "--transactional-id",
                "copier-0",
                "--transaction-size",
                "100",
                "--max-messages",
                &records,
                "--enable-random-aborts",
                "--use-group-metadata",
            ];
            kafka::tool("org.apache.kafka.tools.TransactionalMessageCopier", &args).unwrap()
        })
    };

    // Once copying is under way, a broker dies and comes back.
    wait_until(Duration::from_secs(120), || {
        let seen = read_counts(&bootstrap, "read_uncommitted", 1).values().sum::<usize>();
        anyhow::ensure!(seen >= 300, "{seen} copied so far");
        Ok(())
    })
    .unwrap();
    cluster.broker(1).kill().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    cluster.broker(1).restart().unwrap();

    let run = copier.join().unwrap();
    assert_eq!(run.code, 0, "{run}");

    let committed = read_counts(&bootstrap, "read_committed", RECORDS);
    let once = committed.values().filter(|n| **n == 1).count();
    assert_eq!(committed.len(), RECORDS, "every input record in the output: {} distinct", committed.len());
    assert_eq!(
        once,
        RECORDS,
        "each exactly once: {:?}",
        committed.iter().filter(|(_, n)| **n > 1).take(5).collect::<Vec<_>>()
    );
    let uncommitted = read_counts(&bootstrap, "read_uncommitted", RECORDS);
    let total: usize = uncommitted.values().sum();
    println!("copier: {RECORDS} records exactly once to read_committed; read_uncommitted sees {total} (the aborted copies too)");
    assert!(total >= RECORDS);
}
