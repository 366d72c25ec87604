//! A transaction's coordinator SIGKILLed between its decision and its markers (issue 33's
//! must-hold, docs/transactions.md): EndTxn has been answered (the decision is in
//! `__transaction_state`), one partition's leader cannot be reached for its marker (a proxy
//! partitions its internal port off), the coordinator dies, and the next coordinator finishes
//! the transaction as it was decided — every partition committed, or every one aborted, never
//! half. `strom transactions describe` shows the decided state throughout.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use e2e::cli::strom;
use e2e::clients;
use e2e::cluster::{coordinator_partition, wait_until, Cluster, ClusterSpec};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);
/// The learner whose internal port is behind a proxy: it leads `out`-0.
const CUT_OFF: i32 = 3;

fn transactional_producer(bootstrap: &str, id: &str) -> ThreadedProducer<DefaultProducerContext> {
    let producer: ThreadedProducer<DefaultProducerContext> = clients::producer_config(bootstrap, "all")
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "300000")
        .create()
        .unwrap();
    producer.init_transactions(TIMEOUT).unwrap();
    producer
}

/// Every value of `out` read with read_committed, until `expected` arrived and a further
/// second brought nothing (or 20 s passed).
fn read_committed(bootstrap: &str, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer =
        clients::consumer_config(bootstrap).set("isolation.level", "read_committed").create().unwrap();
    let mut assignment = TopicPartitionList::new();
    for p in 0..3 {
        assignment.add_partition_offset("out", p, Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let (deadline, mut quiet_since, mut values) =
        (Instant::now() + Duration::from_secs(20), Instant::now(), Vec::new());
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                quiet_since = Instant::now();
            }
            _ if values.len() >= expected && quiet_since.elapsed() > Duration::from_secs(1) => break,
            _ => {}
        }
    }
    values
}

/// `strom transactions describe id` through broker `via`: the id's state.
fn state_of(cluster: &Cluster, via: i32, id: &str) -> anyhow::Result<String> {
    let run = strom(cluster.brokers[via as usize].internal_addr(), &["transactions", "describe", id, "-o", "json"])?;
    anyhow::ensure!(run.code == 0, "describe exited {}: {}", run.code, run.stderr);
    Ok(run.json()?["state"].as_str().unwrap_or_default().to_string())
}

fn decided_then_coordinator_killed(commit: bool) {
    // Voters 0-2, learners 3 and 4. `out`-0 is led by 3, `out`-1 by 4, `out`-2 by 1.
    let mut spec = ClusterSpec::new(5, 3);
    spec.proxied = vec![CUT_OFF];
    // The followers of out-0 cannot fetch while 3 is cut off: keep them in its ISR meanwhile.
    let mut cluster = Cluster::start(spec.with_args(&["--replica-lag-time-max-ms", "60000"])).unwrap();
    let bootstrap = cluster.bootstrap();
    {
        use rdkafka::admin::{NewTopic, TopicReplication};
        let admin = clients::admin_client(&bootstrap).unwrap();
        let assignment: &[&[i32]] = &[&[3, 4, 0], &[4, 0, 1], &[1, 2, 4]];
        let new = NewTopic::new("out", 3, TopicReplication::Variable(assignment));
        let created = clients::block_on(admin.create_topics([&new], &clients::admin_options())).unwrap().unwrap();
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        cluster.wait_fully_replicated(&[0, 1, 2], "out", 3, TIMEOUT).unwrap();
    }

    // A transactional id whose coordinator is not voter 0 (through which the test asks) and
    // whose `__transaction_state` partition has no replica on the cut-off broker (its successor
    // must be reachable): the topic exists once a first producer has asked.
    drop(transactional_producer(&bootstrap, "tx-first"));
    let state_partitions = cluster.metadata_of(0).unwrap().topics["__transaction_state"].partitions.len();
    let (id, coordinator) = (0..100)
        .map(|i| format!("tx-decided-{i}"))
        .find_map(|id| {
            let p = coordinator_partition(&id, state_partitions);
            let view = cluster.partition_of(&[0, 1, 2], "__transaction_state", p).ok()?;
            let usable = !view.replicas.contains(&CUT_OFF) && view.leader != 0 && view.leader >= 0;
            usable.then_some((id, view.leader))
        })
        .unwrap();
    let via = 0;

    let producer = transactional_producer(&bootstrap, &id);
    producer.begin_transaction().unwrap();
    for p in 0..3 {
        for i in 0..10 {
            let value = format!("{p}-{i}");
            producer.send(BaseRecord::<(), _>::to("out").partition(p).payload(&value)).map_err(|(e, _)| e).unwrap();
        }
    }
    producer.flush(TIMEOUT).unwrap();

    // The marker for out-0 cannot be delivered; the decision is made and answered anyway.
    let proxy = cluster.proxies.remove(&CUT_OFF).unwrap();
    proxy.partition();
    if commit {
        producer.commit_transaction(TIMEOUT).unwrap();
    } else {
        producer.abort_transaction(TIMEOUT).unwrap();
    }
    let decided = if commit { "PrepareCommit" } else { "PrepareAbort" };
    assert_eq!(state_of(&cluster, via, &id).unwrap(), decided, "between the decision and its last marker");

    cluster.broker(coordinator).kill().unwrap();
    let p = coordinator_partition(&id, state_partitions);
    let alive: Vec<i32> = (0..3).filter(|b| *b != coordinator).collect();
    let successor = wait_until(TIMEOUT, || {
        let leader = cluster.partition_of(&alive, "__transaction_state", p)?.leader;
        anyhow::ensure!(leader >= 0 && leader != coordinator, "leader still {leader}");
        Ok(leader)
    })
    .unwrap();
    println!("coordinator {coordinator} killed after the decision; {successor} took over");
    // The successor has loaded the decision and is still trying out-0.
    let state = wait_until(TIMEOUT, || state_of(&cluster, via, &id)).unwrap();
    assert_eq!(state, decided, "the successor resumed the decided transaction");

    proxy.heal();
    let done = if commit { "CompleteCommit" } else { "CompleteAbort" };
    wait_until(TIMEOUT, || {
        let state = state_of(&cluster, via, &id)?;
        anyhow::ensure!(state == done, "state {state}");
        Ok(())
    })
    .unwrap();

    let read = read_committed(&cluster.bootstrap_running(), if commit { 30 } else { 0 });
    let expected: BTreeSet<String> =
        if commit { (0..3).flat_map(|p| (0..10).map(move |i| format!("{p}-{i}"))).collect() } else { BTreeSet::new() };
    assert_eq!(read.len(), expected.len(), "each record once: {read:?}");
    assert_eq!(read.into_iter().collect::<BTreeSet<_>>(), expected, "every partition as decided");
}

#[test]
fn a_commit_decided_before_its_coordinator_dies_is_committed_on_every_partition() {
    decided_then_coordinator_killed(true);
}

#[test]
fn an_abort_decided_before_its_coordinator_dies_is_aborted_on_every_partition() {
    decided_then_coordinator_killed(false);
}
