//! Transactions through librdkafka's transactional producer against 3 brokers (RF 3): what a
//! read_committed consumer reads (committed records only, each once) against a
//! read_uncommitted one (the aborted ones too), zombie fencing (a second producer with the
//! same transactional.id fences the first, and nothing the first sends afterwards becomes
//! visible), and the coordinator SIGKILLed between AddPartitionsToTxn and EndTxn (the commit
//! completes on its successor). docs/transactions.md.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e::clients;
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

fn transactional_producer(bootstrap: &str, id: &str) -> ThreadedProducer<DefaultProducerContext> {
    let producer: ThreadedProducer<DefaultProducerContext> = clients::producer_config(bootstrap, "all")
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    producer.init_transactions(TIMEOUT).unwrap();
    producer
}

fn send(producer: &ThreadedProducer<DefaultProducerContext>, values: impl IntoIterator<Item = String>) {
    for (i, value) in values.into_iter().enumerate() {
        let key = i.to_string();
        producer.send(BaseRecord::to("out").key(&key).payload(&value)).map_err(|(e, _)| e).unwrap();
    }
}

/// Every value in `topic` from the beginning, read with `isolation`, until `expected` arrived
/// and a further second brought nothing.
fn read_all(bootstrap: &str, isolation: &str, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer =
        clients::consumer_config(bootstrap).set("isolation.level", isolation).create().unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..3 {
        assignment.add_partition_offset("out", p, Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut values = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                quiet_since = Instant::now();
            }
            Some(Err(e)) => eprintln!("read_all: {e}"),
            None if values.len() >= expected && quiet_since.elapsed() > Duration::from_secs(1) => break,
            None => {}
        }
    }
    values
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn read_committed_sees_committed_transactions_once_and_never_aborted_ones() {
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();

    let producer = transactional_producer(&bootstrap, "tx-copier");
    producer.begin_transaction().unwrap();
    send(&producer, values("first", 30));
    producer.commit_transaction(TIMEOUT).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, values("aborted", 20));
    producer.flush(TIMEOUT).unwrap();
    producer.abort_transaction(TIMEOUT).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, values("second", 10));
    producer.commit_transaction(TIMEOUT).unwrap();

    let committed: BTreeSet<String> = values("first", 30).into_iter().chain(values("second", 10)).collect();
    let read = read_all(&bootstrap, "read_committed", committed.len());
    assert_eq!(read.len(), committed.len(), "each committed record once: {read:?}");
    assert_eq!(read.iter().cloned().collect::<BTreeSet<_>>(), committed);

    let everything = read_all(&bootstrap, "read_uncommitted", 60);
    assert_eq!(everything.len(), 60, "read_uncommitted sees the aborted records too");
    assert_eq!(everything.iter().filter(|v| v.starts_with("aborted-")).count(), 20);
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[]).unwrap().unwrap();

    let zombie = transactional_producer(&bootstrap, "tx-shared");
    zombie.begin_transaction().unwrap();
    send(&zombie, values("zombie", 10));
    zombie.flush(TIMEOUT).unwrap();

    // The new instance: its InitProducerId aborts the zombie's open transaction and fences it.
    let successor = transactional_producer(&bootstrap, "tx-shared");
    successor.begin_transaction().unwrap();
    send(&successor, values("successor", 10));
    successor.commit_transaction(TIMEOUT).unwrap();

    // The zombie's later work fails as fenced, and nothing of it becomes visible.
    send(&zombie, values("late", 5));
    let committed = zombie.commit_transaction(TIMEOUT);
    match &committed {
        Err(KafkaError::Transaction(e)) => assert!(e.is_fatal() || e.txn_requires_abort(), "{e}"),
        other => panic!("the zombie's commit should fail as fenced, got {other:?}"),
    }
    let read = read_all(&bootstrap, "read_committed", 10);
    assert_eq!(
        read.iter().cloned().collect::<BTreeSet<_>>(),
        values("successor", 10).into_iter().collect(),
        "{read:?}"
    );
}

#[test]
fn a_transaction_commits_after_its_coordinator_is_killed_between_add_partitions_and_end_txn() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();

    let producer = transactional_producer(&bootstrap, "tx-failover");
    producer.begin_transaction().unwrap();
    send(&producer, values("survives", 30));
    producer.flush(TIMEOUT).unwrap();

    // The coordinator is the leader of the id's __transaction_state partition.
    let state = cluster.metadata_of(0).unwrap();
    let partitions = state.topics.get("__transaction_state").expect("__transaction_state exists").partitions.len();
    let p = e2e::cluster::coordinator_partition("tx-failover", partitions);
    let coordinator = cluster.partition_of(&[0, 1, 2], "__transaction_state", p).unwrap().leader;
    cluster.broker(coordinator).kill().unwrap();
    let others: Vec<i32> = (0..3).filter(|b| *b != coordinator).collect();
    wait_until(TIMEOUT, || {
        let now = cluster.partition_of(&others, "__transaction_state", p)?;
        anyhow::ensure!(now.leader >= 0 && now.leader != coordinator, "leader still {}", now.leader);
        Ok(())
    })
    .unwrap();

    producer.commit_transaction(TIMEOUT).expect("the commit completes on the new coordinator");
    let read = read_all(&cluster.bootstrap_running(), "read_committed", 30);
    assert_eq!(read.iter().cloned().collect::<BTreeSet<_>>(), values("survives", 30).into_iter().collect(), "{read:?}");
    assert_eq!(read.len(), 30, "each once");
}

/// The group's committed offset of `in`-0, as a fresh member of it sees it.
fn committed(bootstrap: &str, group: &str) -> i64 {
    let consumer: BaseConsumer = clients::consumer_config(bootstrap).set("group.id", group).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("in", 0);
    let got = consumer.committed_offsets(tpl, TIMEOUT).unwrap();
    match got.find_partition("in", 0).map(|e| e.offset()) {
        Some(Offset::Offset(o)) => o,
        other => panic!("no committed offset: {other:?}"),
    }
}

#[test]
fn offsets_committed_in_a_transaction_count_only_if_it_commits() {
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "in", 1, 3, &[]).unwrap().unwrap();
    clients::create_topic_with(&admin, "out", 3, 3, &[]).unwrap().unwrap();
    let input: Vec<(i32, String)> = (0..30).map(|i| (0, format!("in-{i}"))).collect();
    clients::produce_to_partitions(&bootstrap, "in", &input).unwrap();

    let consumer: BaseConsumer = clients::consumer_config(&bootstrap).set("group.id", "copier").create().unwrap();
    let producer = transactional_producer(&bootstrap, "tx-copier-offsets");
    // Copies input[from..from+10] to `out` in one transaction with the consumed offsets.
    let copy = |from: i64, commit: bool| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("in", 0, Offset::Offset(from)).unwrap();
        consumer.assign(&tpl).unwrap();
        producer.begin_transaction().unwrap();
        let mut read = 0;
        let deadline = Instant::now() + TIMEOUT;
        while read < 10 && Instant::now() < deadline {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                let value = format!("copied-{}", String::from_utf8_lossy(m.payload().unwrap_or_default()));
                producer.send(BaseRecord::<(), _>::to("out").payload(&value)).map_err(|(e, _)| e).unwrap();
                read += 1;
            }
        }
        assert_eq!(read, 10);
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset("in", 0, Offset::Offset(from + 10)).unwrap();
        producer.send_offsets_to_transaction(&offsets, &consumer.group_metadata().unwrap(), TIMEOUT).unwrap();
        if commit {
            producer.commit_transaction(TIMEOUT).unwrap();
        } else {
            producer.abort_transaction(TIMEOUT).unwrap();
        }
    };
    copy(0, true);
    assert_eq!(committed(&bootstrap, "copier"), 10);
    copy(10, false);
    assert_eq!(committed(&bootstrap, "copier"), 10, "the aborted transaction's offsets are not applied");
    copy(10, true);
    assert_eq!(committed(&bootstrap, "copier"), 20);

    let out = read_all(&bootstrap, "read_committed", 20);
    let expected: BTreeSet<String> = (0..20).map(|i| format!("copied-in-{i}")).collect();
    assert_eq!(out.len(), 20, "each copied once: {out:?}");
    assert_eq!(out.into_iter().collect::<BTreeSet<_>>(), expected);
}
