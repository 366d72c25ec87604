//! Transactions seen and handled from outside (issue 33, docs/transactions.md): Apache Kafka's
//! `kafka-transactions.sh` (list, describe, describe-producers, abort) and `strom transactions`
//! (list, describe, abort) on three brokers report the same ids, producers, states and
//! partitions; an operator's abort fences the producer and hides its records; Kafka's abort
//! of a hanging transaction (WriteTxnMarkers from the admin client) lets read_committed
//! consumers past it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::cli::strom;
use e2e::clients;
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use e2e::kafka;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

fn transactional_producer(bootstrap: &str, id: &str) -> ThreadedProducer<DefaultProducerContext> {
    let producer: ThreadedProducer<DefaultProducerContext> = clients::producer_config(bootstrap, "all")
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "300000")
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    producer.init_transactions(TIMEOUT).unwrap();
    producer
}

/// Sends `n` records to `partition` of `out` in the producer's open transaction.
fn send(producer: &ThreadedProducer<DefaultProducerContext>, partition: i32, prefix: &str, n: usize) {
    for i in 0..n {
        let value = format!("{prefix}-{i}");
        producer.send(BaseRecord::<(), _>::to("out").partition(partition).payload(&value)).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(TIMEOUT).unwrap();
}

/// The values read from `out`-`partition` with read_committed within `within`.
fn read_committed(bootstrap: &str, partition: i32, within: Duration) -> Vec<String> {
    let consumer: BaseConsumer =
        clients::consumer_config(bootstrap).set("isolation.level", "read_committed").create().unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset("out", partition, Offset::Beginning).unwrap();
    consumer.assign(&assignment).unwrap();
    let deadline = Instant::now() + within;
    let mut values = Vec::new();
    while Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    values
}

/// `kafka-transactions.sh --bootstrap-server B <args>`, which must succeed.
fn kafka_transactions(bootstrap: &str, args: &[&str]) -> kafka::ToolRun {
    let mut all = vec!["--bootstrap-server", bootstrap];
    all.extend_from_slice(args);
    kafka::tool("transactions", &all).unwrap().success().unwrap()
}

/// `kafka-transactions.sh list` as id → (coordinator, producer id, state).
fn kafka_list(bootstrap: &str) -> BTreeMap<String, (String, String, String)> {
    let run = kafka_transactions(bootstrap, &["list"]);
    run.stdout
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() == 4).then(|| (cols[0].to_string(), (cols[1].into(), cols[2].into(), cols[3].into())))
        })
        .collect()
}

/// `strom transactions list -o json` in the same shape.
fn strom_list(cluster: &Cluster) -> BTreeMap<String, (String, String, String)> {
    let run = strom(cluster.brokers[0].internal_addr(), &["transactions", "list", "-o", "json"]).unwrap().success();
    let json = run.unwrap().json().unwrap();
    json.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let field = |k: &str| t[k].to_string().trim_matches('"').to_string();
            (field("transactional_id"), (field("coordinator"), field("producer_id"), field("state")))
        })
        .collect()
}

#[test]
fn kafka_transactions_tool_and_the_strom_cli_agree_and_abort() {
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();

    let done = transactional_producer(&bootstrap, "tx-done");
    done.begin_transaction().unwrap();
    send(&done, 1, "done", 10);
    done.commit_transaction(TIMEOUT).unwrap();
    let open = transactional_producer(&bootstrap, "tx-open");
    open.begin_transaction().unwrap();
    send(&open, 1, "open", 10);
    send(&open, 2, "open", 5);

    // list: both tools name the same ids, coordinators, producer ids and states.
    let listed = kafka_list(&bootstrap);
    println!("kafka-transactions.sh list: {listed:?}");
    assert_eq!(listed.get("tx-done").map(|t| t.2.as_str()), Some("CompleteCommit"), "{listed:?}");
    assert_eq!(listed.get("tx-open").map(|t| t.2.as_str()), Some("Ongoing"), "{listed:?}");
    assert_eq!(strom_list(&cluster), listed, "strom transactions list agrees with kafka-transactions.sh list");

    // describe: the open transaction's producer, state and partitions.
    let described = kafka_transactions(&bootstrap, &["describe", "--transactional-id", "tx-open"]);
    println!("kafka-transactions.sh describe:\n{}", described.stdout);
    let row: Vec<String> = described.stdout.lines().nth(1).unwrap().split_whitespace().map(str::to_string).collect();
    let coordinator: i32 = listed["tx-open"].0.parse().unwrap();
    let producer_id = listed["tx-open"].1.clone();
    assert_eq!(row[0], coordinator.to_string(), "{row:?}");
    assert_eq!((row[1].as_str(), row[2].as_str(), row[4].as_str()), ("tx-open", producer_id.as_str(), "Ongoing"));
    assert!(row.last().unwrap().contains("out-1") && row.last().unwrap().contains("out-2"), "{row:?}");
    let ours = strom(cluster.brokers[0].internal_addr(), &["transactions", "describe", "tx-open", "-o", "json"])
        .unwrap()
        .success()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(ours["state"], "Ongoing");
    assert_eq!(ours["producer_id"].to_string(), producer_id);
    assert_eq!(ours["coordinator"], coordinator);
    assert_eq!(ours["producer_epoch"].to_string(), row[3]);
    assert_eq!(ours["partitions"].as_array().unwrap().len(), 2, "{ours}");

    // describe-producers: the open transaction starts at offset 10 of out-1 (after tx-done's
    // ten records; tx-done's marker is at offset 10, so it is 11).
    let producers = kafka_transactions(&bootstrap, &["describe-producers", "--topic", "out", "--partition", "1"]);
    println!("kafka-transactions.sh describe-producers:\n{}", producers.stdout);
    let rows = producers.rows(&producer_id);
    assert_eq!(rows.len(), 1, "{}", producers.stdout);
    assert_eq!(rows[0].last().map(String::as_str), Some("11"), "the open transaction's first offset: {rows:?}");

    // Unknown ids: Kafka's tool and ours both say so, and fail.
    let unknown =
        kafka::tool("transactions", &["--bootstrap-server", &bootstrap, "describe", "--transactional-id", "nope"])
            .unwrap()
            .failure()
            .unwrap();
    assert!(unknown.output().contains("could not be found"), "{}", unknown.output());
    let ours = strom(cluster.brokers[0].internal_addr(), &["transactions", "describe", "nope"]).unwrap();
    assert_eq!(ours.code, 3, "not found: {}", ours.stderr);
    let bad = strom(cluster.brokers[0].internal_addr(), &["transactions", "list", "--state", "Sleeping"]).unwrap();
    assert_eq!(bad.code, 2, "bad input: {}", bad.stderr);

    // strom transactions abort: the open transaction ends aborted, its producer is fenced, and
    // read_committed consumers never see its records.
    strom(cluster.brokers[0].internal_addr(), &["transactions", "abort", "tx-open"]).unwrap().success().unwrap();
    wait_until(TIMEOUT, || {
        let listed = kafka_list(&bootstrap);
        anyhow::ensure!(listed["tx-open"].2 == "CompleteAbort", "{listed:?}");
        Ok(())
    })
    .unwrap();
    let refused = strom(cluster.brokers[1].internal_addr(), &["transactions", "abort", "tx-open"]).unwrap();
    assert_eq!(refused.code, 1, "nothing open to abort: {}", refused.stderr);
    match open.commit_transaction(TIMEOUT) {
        Err(KafkaError::Transaction(e)) => assert!(e.is_fatal() || e.txn_requires_abort(), "{e}"),
        other => panic!("the aborted producer's commit should fail, got {other:?}"),
    }
    let read = read_committed(&bootstrap, 1, Duration::from_secs(3));
    assert_eq!(read, (0..10).map(|i| format!("done-{i}")).collect::<Vec<_>>());
}

#[test]
fn kafka_transactions_abort_unblocks_read_committed_past_a_hanging_transaction() {
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[]).unwrap().unwrap();

    // A transaction left open on out-0, then a plain record after it: read_committed stops at
    // the open transaction (the last stable offset), so it sees neither.
    let hanging = transactional_producer(&bootstrap, "tx-hanging");
    hanging.begin_transaction().unwrap();
    send(&hanging, 0, "hanging", 5);
    clients::produce_to_partitions(&bootstrap, "out", &[(0, "after".to_string())]).unwrap();
    assert_eq!(read_committed(&bootstrap, 0, Duration::from_secs(2)), Vec::<String>::new());

    // Kafka's way out of a hanging transaction: find its start offset, abort it at the leader.
    let producer_id = kafka_list(&bootstrap)["tx-hanging"].1.clone();
    let producers = kafka_transactions(&bootstrap, &["describe-producers", "--topic", "out", "--partition", "0"]);
    let start = |run: &kafka::ToolRun| run.rows(&producer_id).first().and_then(|r| r.last().cloned());
    assert_eq!(start(&producers).as_deref(), Some("0"), "{}", producers.stdout);
    let aborted =
        kafka_transactions(&bootstrap, &["abort", "--topic", "out", "--partition", "0", "--start-offset", "0"]);
    println!("kafka-transactions.sh abort: {}", aborted.output().trim());
    let read = read_committed(&bootstrap, 0, Duration::from_secs(3));
    assert_eq!(read, vec!["after".to_string()], "the aborted records stay hidden, the plain one is readable");
    let producers = kafka_transactions(&bootstrap, &["describe-producers", "--topic", "out", "--partition", "0"]);
    assert_ne!(start(&producers).as_deref(), Some("0"), "no transaction open any more: {}", producers.stdout);
}
