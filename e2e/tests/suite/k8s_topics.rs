//! Requirement (issue 31): Topics and ConsumerGroups kept in Git — a `Topic` applied with
//! kubectl becomes a Kafka topic and stays as Git says (drift made with the `strom` CLI is put
//! back), bad input is refused before anything changes, deletion honours `deletionPolicy` and
//! never holds a namespace in Terminating; a `ConsumerGroup` reports its group's state and lag
//! as Kafka's own `kafka-consumer-groups.sh` does and carries out a declarative offset reset
//! once, only while the group is empty. Proven on the real kube-apiserver with the pod runner
//! running the brokers of a Cluster the operator made, clients librdkafka's and Kafka's.
//!
//! The tests run one at a time: each runs three brokers beside the control plane.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use e2e::clients;
use e2e::k8s::kubelet::wait_for;
use e2e::k8s::operated::{refused, Operated, FORM};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A change reaching the brokers: one reconcile, a few seconds at most.
const CHANGE: Duration = Duration::from_secs(60);

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A three-broker Cluster made by an operator that resyncs every 5 s and does `unmanaged`
/// about topics no Topic names.
fn cluster(prefix: &str, unmanaged: &str) -> Operated {
    let flag = format!("--unmanaged-topics={unmanaged}");
    let c = Operated::start_with(prefix, "events", &["--resync-seconds=5", &flag]).unwrap();
    c.apply_cluster(3, 3, "").unwrap();
    c.wait_ready(3, FORM).unwrap();
    c
}

fn topic_manifest(name: &str, cluster: &str, partitions: i32, rf: i32, extra: &str) -> String {
    format!(
        "apiVersion: strom.dev/v1alpha1\nkind: Topic\nmetadata:\n  name: {name}\nspec:\n  clusterRef:\n    name: {cluster}\n  \
         partitions: {partitions}\n  replicationFactor: {rf}\n{extra}"
    )
}

fn apply_ok(c: &Operated, manifest: &str) {
    let run = c.plane.kubectl_with_input(&["-n", &c.ns, "apply", "-f", "-"], manifest).unwrap();
    assert_eq!(run.code, 0, "{run:?}");
}

fn apply(c: &Operated, manifest: &str) -> e2e::k8s::controlplane::KubectlRun {
    c.plane.kubectl_with_input(&["-n", &c.ns, "apply", "-f", "-"], manifest).unwrap()
}

/// Partitions and replicas per partition of `topic`, as Metadata reports them.
fn layout(c: &Operated, topic: &str) -> anyhow::Result<(usize, Vec<usize>)> {
    let view = c.metadata(0, Some(&[topic]))?;
    let t = view.topics.get(topic).with_context(|| format!("no topic {topic} in Metadata"))?;
    ensure!(!t.partitions.is_empty(), "{topic} has no partitions");
    Ok((t.partitions.len(), t.partitions.iter().map(|p| p.replicas.len()).collect()))
}

fn exists(c: &Operated, topic: &str) -> bool {
    let run = e2e::cli::strom(c.admin_addr(0).unwrap(), &["topic", "describe", topic]).unwrap();
    run.code == 0
}

fn config(c: &Operated, topic: &str, key: &str) -> String {
    let configs = clients::topic_configs(&c.bootstrap().unwrap(), topic).unwrap();
    configs.get(key).cloned().unwrap_or_default()
}

fn has_event(c: &Operated, kind: &str, name: &str, reason: &str, needle: &str) -> bool {
    c.events_of(kind, name).unwrap().iter().any(|(_, r, m)| r == reason && m.contains(needle))
}

#[test]
fn topics_in_git_become_kafka_topics_and_stay_as_git_says() {
    let _one = one_at_a_time();
    let c = cluster("op-topics", "report");
    let bootstrap = c.bootstrap().unwrap();

    // kubectl apply of a Topic creates it as the spec says.
    let orders = |p: i32, retention: &str| {
        topic_manifest("orders", "events", p, 3, &format!("  config:\n    retention.ms: \"{retention}\"\n"))
    };
    let applied_at = Instant::now();
    apply_ok(&c, &orders(3, "3600000"));
    let compacted =
        "  topicName: orders.compacted\n  config:\n    cleanup.policy: compact\n    min.insync.replicas: \"2\"\n";
    apply_ok(&c, &topic_manifest("orders-compacted", "events", 2, 3, compacted));
    let t = c.wait_condition("topic", "orders", true, Some("InSync"), CHANGE).unwrap();
    println!("topic Ready {:?} after kubectl apply", applied_at.elapsed());
    c.wait_condition("topic", "orders-compacted", true, None, CHANGE).unwrap();
    assert_eq!(layout(&c, "orders").unwrap(), (3, vec![3; 3]));
    assert_eq!(config(&c, "orders", "retention.ms"), "3600000");
    assert_eq!(layout(&c, "orders.compacted").unwrap(), (2, vec![3; 2]));
    assert_eq!(config(&c, "orders.compacted", "cleanup.policy"), "compact");
    assert_eq!(t["status"]["partitions"], 3);
    assert_eq!(t["status"]["replicationFactor"], 3);
    assert!(t["status"]["topicId"].as_str().is_some_and(|id| !id.is_empty()), "{}", t["status"]);
    assert!(has_event(&c, "Topic", "orders", "Created", "3 partitions"));
    let table = c.kubectl(&["get", "topics"]).unwrap();
    let header = table.lines().next().unwrap();
    for column in ["NAME", "CLUSTER", "PARTITIONS", "RF", "READY"] {
        assert!(header.contains(column), "{column} missing from:\n{table}");
    }
    assert!(table.lines().any(|l| l.starts_with("orders ") && l.contains("events") && l.contains("True")), "{table}");

    // Editing partitions and retention.ms changes them on the brokers.
    apply_ok(&c, &orders(6, "7200000"));
    c.wait_condition("topic", "orders", true, Some("InSync"), CHANGE).unwrap();
    assert_eq!(layout(&c, "orders").unwrap(), (6, vec![3; 6]));
    assert_eq!(config(&c, "orders", "retention.ms"), "7200000");
    assert!(has_event(&c, "Topic", "orders", "Updated", "partitions 3 → 6"));

    // A decrease and partitions 0 are refused by the API server.
    refused(&apply(&c, &orders(3, "7200000")), "partitions cannot decrease").unwrap();
    refused(&apply(&c, &topic_manifest("zero", "events", 0, 3, "")), "greater than or equal to 1").unwrap();
    refused(&apply(&c, &topic_manifest("badname", "events", 1, 3, "  topicName: \"no spaces\"\n")), "should match")
        .unwrap();

    // Drift made with the strom CLI is put back within one resync (5 s here).
    let admin = c.admin_addr(1).unwrap();
    e2e::cli::strom(admin, &["topic", "alter", "orders", "--config", "retention.ms=1000", "--partitions", "8"])
        .unwrap()
        .success()
        .unwrap();
    let drifted = Instant::now();
    assert_eq!(config(&c, "orders", "retention.ms"), "1000");
    wait_for(&c.runner, CHANGE, "retention.ms put back", || {
        let v = config(&c, "orders", "retention.ms");
        ensure!(v == "7200000", "retention.ms {v}");
        Ok(())
    })
    .unwrap();
    println!("drift repaired {:?} after the CLI changed the topic", drifted.elapsed());
    assert!(
        drifted.elapsed() < Duration::from_secs(30),
        "put back within one resync (5 s), not {:?}",
        drifted.elapsed()
    );
    assert!(has_event(&c, "Topic", "orders", "DriftReverted", "retention.ms 1000 → 7200000"));
    // Partitions cannot be taken back: the Topic says so and what to do.
    let (_, reason, message, _) = c.condition_of("topic", "orders", "Ready").unwrap();
    assert_eq!(reason, "PartitionsAboveSpec", "{message}");
    assert!(message.contains("set spec.partitions to 8"), "{message}");
    apply_ok(&c, &orders(8, "7200000"));
    c.wait_condition("topic", "orders", true, Some("InSync"), CHANGE).unwrap();

    // A replication-factor change runs a reassignment.
    apply_ok(&c, &topic_manifest("moving", "events", 2, 2, ""));
    c.wait_condition("topic", "moving", true, None, CHANGE).unwrap();
    assert_eq!(layout(&c, "moving").unwrap(), (2, vec![2; 2]));
    apply_ok(&c, &topic_manifest("moving", "events", 2, 3, ""));
    let moved = c.wait_condition("topic", "moving", true, Some("InSync"), CHANGE).unwrap();
    assert_eq!(layout(&c, "moving").unwrap(), (2, vec![3; 2]));
    assert_eq!(moved["status"]["replicationFactor"], 3);
    assert!(has_event(&c, "Topic", "moving", "Updated", "replication factor 2 → 3"));

    // Bad input the API server cannot judge: a condition with the brokers' reason and an
    // Event; nothing changes on the brokers.
    apply_ok(&c, &topic_manifest("too-wide", "events", 1, 5, ""));
    c.wait_condition("topic", "too-wide", false, Some("Refused"), CHANGE).unwrap();
    let (_, _, why, _) = c.condition_of("topic", "too-wide", "Ready").unwrap();
    assert!(why.to_lowercase().contains("replication factor"), "{why}");
    assert!(has_event(&c, "Topic", "too-wide", "Refused", "replication factor"));
    assert!(!exists(&c, "too-wide"));
    apply_ok(&c, &topic_manifest("odd-config", "events", 1, 3, "  config:\n    no.such.key: \"1\"\n"));
    c.wait_condition("topic", "odd-config", false, Some("Refused"), CHANGE).unwrap();
    let (_, _, why, _) = c.condition_of("topic", "odd-config", "Ready").unwrap();
    assert!(why.contains("no.such.key"), "{why}");
    assert!(!exists(&c, "odd-config"));
    // The same on an existing topic: its other changes wait too.
    apply_ok(
        &c,
        &topic_manifest(
            "orders",
            "events",
            10,
            3,
            "  config:\n    retention.ms: \"7200000\"\n    retention.bytes: \"lots\"\n",
        ),
    );
    c.wait_condition("topic", "orders", false, Some("Refused"), CHANGE).unwrap();
    assert_eq!(layout(&c, "orders").unwrap().0, 8, "nothing changed on the brokers");
    apply_ok(&c, &topic_manifest("lost", "nowhere", 1, 3, ""));
    c.wait_condition("topic", "lost", false, Some("ClusterNotFound"), CHANGE).unwrap();
    assert!(has_event(&c, "Topic", "lost", "ClusterNotFound", "Cluster nowhere does not exist"));

    // Two Topics naming one Kafka topic: the second is refused and its deletion leaves the topic.
    apply_ok(&c, &topic_manifest("orders-again", "events", 8, 3, "  topicName: orders\n  deletionPolicy: Delete\n"));
    c.wait_condition("topic", "orders-again", false, Some("TopicClaimed"), CHANGE).unwrap();
    c.kubectl(&["delete", "topic", "orders-again", "--timeout=60s"]).unwrap();
    assert!(exists(&c, "orders"), "the first Topic's Kafka topic stays");

    // An existing topic of the same name is adopted, not recreated.
    let kafka_admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&kafka_admin, "legacy", 3, 3, &[]).unwrap().unwrap();
    let described = e2e::cli::strom(c.admin_addr(0).unwrap(), &["topic", "describe", "legacy", "--output", "json"])
        .unwrap()
        .success()
        .unwrap()
        .json()
        .unwrap();
    let id = described["id"].as_str().map(str::to_string).unwrap_or_else(|| panic!("no id in {described}"));
    // Not in Git: left alone, and (--unmanaged-topics report) announced on the Cluster.
    wait_for(&c.runner, CHANGE, "legacy reported as unmanaged", || {
        ensure!(has_event(&c, "Cluster", "events", "UnmanagedTopics", "legacy"), "no UnmanagedTopics Event yet");
        Ok(())
    })
    .unwrap();
    assert!(c.kubectl(&["get", "topic", "legacy", "--ignore-not-found", "-o", "name"]).unwrap().trim().is_empty());
    // A Topic for it that the brokers refuse never held it: deleting that Topic (Delete)
    // leaves the application's topic.
    apply_ok(&c, &topic_manifest("legacy", "events", 3, 3, "  config:\n    no.such.key: \"1\"\n"));
    c.wait_condition("topic", "legacy", false, Some("Refused"), CHANGE).unwrap();
    c.kubectl(&["delete", "topic", "legacy", "--timeout=60s"]).unwrap();
    assert!(exists(&c, "legacy"), "a refused Topic's deletion deleted the topic");
    apply_ok(
        &c,
        &topic_manifest("legacy", "events", 3, 3, "  deletionPolicy: Retain\n  config:\n    retention.ms: \"60000\"\n"),
    );
    let adopted = c.wait_condition("topic", "legacy", true, Some("InSync"), CHANGE).unwrap();
    assert_eq!(adopted["status"]["topicId"].as_str(), Some(id.as_str()), "same topic, not recreated");
    assert_eq!(config(&c, "legacy", "retention.ms"), "60000");
    assert!(has_event(&c, "Topic", "legacy", "Adopted", &id));

    // kubectl delete: Delete removes the topic, Retain keeps it.
    c.kubectl(&["delete", "topic", "orders-compacted", "--timeout=60s"]).unwrap();
    wait_for(&c.runner, CHANGE, "orders.compacted deleted", || {
        ensure!(!exists(&c, "orders.compacted"), "still there");
        Ok(())
    })
    .unwrap();
    c.kubectl(&["delete", "topic", "legacy", "--timeout=60s"]).unwrap();
    assert!(exists(&c, "legacy"), "deletionPolicy Retain keeps the topic");

    // Deleting the namespace with Topics in it (orders, moving, and the refused ones) and a
    // ConsumerGroup (deletionPolicy Delete) finishes.
    let watchers = "apiVersion: strom.dev/v1alpha1\nkind: ConsumerGroup\nmetadata:\n  name: watchers\nspec:\n  \
                    clusterRef:\n    name: events\n  deletionPolicy: Delete\n";
    apply_ok(&c, watchers);
    c.wait_condition("consumergroup", "watchers", true, None, CHANGE).unwrap();
    let deleting = Instant::now();
    c.plane.kubectl_ok(&["delete", "namespace", &c.ns, "--wait=false"]).unwrap();
    wait_for(&c.runner, Duration::from_secs(180), "the namespace gone", || {
        let run = c.plane.kubectl(&["get", "namespace", &c.ns, "-o", "name"])?;
        ensure!(run.code != 0 && run.stderr.contains("NotFound"), "still there: {}", run.stdout.trim());
        Ok(())
    })
    .map_err(|e| e.context(c.diagnostics()))
    .unwrap();
    println!("namespace with Topics deleted in {:?}", deleting.elapsed());
}

fn group_manifest(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: strom.dev/v1alpha1\nkind: ConsumerGroup\nmetadata:\n  name: {name}\nspec:\n  clusterRef:\n    name: events\n  \
         refreshSeconds: 5\n{extra}"
    )
}

/// Produces `n` records to each partition of `topic`, record i with timestamp `base + i` s.
fn produce_timed(bootstrap: &str, topic: &str, partitions: i32, n: i64, base_ms: i64) {
    let producer: ThreadedProducer<_> = clients::producer_config(bootstrap, "all").create().unwrap();
    for p in 0..partitions {
        for i in 0..n {
            let value = format!("{p}-{i}");
            let record = BaseRecord::<str, str>::to(topic).partition(p).payload(&value).timestamp(base_ms + i * 1000);
            producer.send(record).map_err(|(e, _)| e).unwrap();
        }
    }
    producer.flush(Duration::from_secs(60)).unwrap();
}

fn group_consumer(bootstrap: &str, group: &str, topic: &str) -> BaseConsumer {
    let consumer: BaseConsumer = clients::consumer_config(bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    consumer
}

/// Polls until the consumer has an assignment and a record, returns the first record of each
/// partition it read within `timeout`: partition → (offset, timestamp).
fn first_records(consumer: &BaseConsumer, partitions: usize, timeout: Duration) -> BTreeMap<i32, (i64, i64)> {
    let mut first = BTreeMap::new();
    let deadline = Instant::now() + timeout;
    while first.len() < partitions && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            first.entry(m.partition()).or_insert((m.offset(), m.timestamp().to_millis().unwrap_or(-1)));
        }
    }
    first
}

fn status_offsets(g: &Value) -> BTreeMap<i64, (i64, i64, i64)> {
    g["status"]["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let n = |k: &str| o[k].as_i64().unwrap_or(-2);
            (n("partition"), (n("committedOffset"), n("logEndOffset"), n("lag")))
        })
        .collect()
}

#[test]
fn a_consumer_group_shows_its_lag_and_replays_from_a_timestamp_once_its_consumers_stop() {
    let _one = one_at_a_time();
    let c = cluster("op-groups", "adopt");
    let bootstrap = c.bootstrap().unwrap();
    apply_ok(&c, &topic_manifest("clicks", "events", 2, 3, ""));
    c.wait_condition("topic", "clicks", true, None, CHANGE).unwrap();
    let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let base = (now_ms - 3_600_000) / 1000 * 1000;
    produce_timed(&bootstrap, "clicks", 2, 100, base);

    // A librdkafka consumer in group "readers" commits offsets 60 and 70, and stays.
    apply_ok(&c, &group_manifest("readers", ""));
    let consumer = group_consumer(&bootstrap, "readers", "clicks");
    let seen = first_records(&consumer, 2, Duration::from_secs(60));
    assert_eq!(seen.len(), 2, "the consumer got both partitions: {seen:?}");
    let mut commit = TopicPartitionList::new();
    commit.add_partition_offset("clicks", 0, Offset::Offset(60)).unwrap();
    commit.add_partition_offset("clicks", 1, Offset::Offset(70)).unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let polling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            consumer.pause(&consumer.assignment().unwrap()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                consumer.poll(Duration::from_millis(100));
            }
            consumer.unsubscribe();
            drop(consumer);
        })
    };
    let g = wait_for(&c.runner, CHANGE, "readers Stable with 1 member and lag 70", || {
        let g = c.get("consumergroup", "readers")?;
        let s = &g["status"];
        ensure!(s["state"] == "Stable" && s["members"] == 1 && s["totalLag"] == 70, "status {s}");
        Ok(g)
    })
    .unwrap();
    assert_eq!(status_offsets(&g), BTreeMap::from([(0, (60, 100, 40)), (1, (70, 100, 30))]));
    // Kafka's own tool reports the same.
    let described =
        e2e::kafka::tool("consumer-groups", &["--bootstrap-server", &bootstrap, "--describe", "--group", "readers"])
            .unwrap()
            .success()
            .unwrap();
    let rows: BTreeMap<i64, (i64, i64, i64)> = described
        .rows("readers")
        .into_iter()
        .filter(|cols| cols.get(1).map(String::as_str) == Some("clicks"))
        .map(|cols| {
            let n = |i: usize| cols[i].parse::<i64>().unwrap();
            (n(2), (n(3), n(4), n(5)))
        })
        .collect();
    assert_eq!(rows, status_offsets(&g), "kafka-consumer-groups.sh --describe:\n{}", described.stdout);
    // Under live traffic the lag changes at every look; the status is refreshed every
    // refreshSeconds (5 s here), not on each of its own writes.
    let before =
        c.operators[0].metric("strom_operator_reconciles_total{kind=\"ConsumerGroup\",result=\"ok\"}").unwrap();
    let window = Instant::now();
    let producer: ThreadedProducer<_> = clients::producer_config(&bootstrap, "1").create().unwrap();
    let mut sent: i32 = 0;
    while window.elapsed() < Duration::from_secs(15) {
        let value = format!("live-{sent}");
        let record = BaseRecord::<str, str>::to("clicks").partition(sent % 2).payload(&value).timestamp(now_ms);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let reconciles =
        c.operators[0].metric("strom_operator_reconciles_total{kind=\"ConsumerGroup\",result=\"ok\"}").unwrap()
            - before;
    println!("ConsumerGroup reconciles in 15 s of live traffic: {reconciles}");
    assert!(reconciles <= 15.0, "{reconciles} reconciles in 15 s at refreshSeconds 5: a status-write loop");
    let g = wait_for(&c.runner, CHANGE, "readers' lag shows the live records", || {
        let g = c.get("consumergroup", "readers")?;
        let lag = g["status"]["totalLag"].as_i64().unwrap_or(0);
        ensure!(lag == 70 + i64::from(sent), "lag {lag}, want {}", 70 + i64::from(sent));
        Ok(g)
    })
    .unwrap();
    let lag = g["status"]["totalLag"].to_string();
    let table = c.kubectl(&["get", "consumergroups"]).unwrap();
    assert!(table.lines().any(|l| l.starts_with("readers") && l.contains("Stable") && l.contains(&lag)), "{table}");

    // A malformed timestamp: refused by the API server, or (a date that does not exist)
    // by the operator with a condition and an Event; nothing changes either way.
    let reset = |id: &str, timestamp: &str| {
        format!("  reset:\n    id: {id}\n    topics:\n      - topic: clicks\n        to: Timestamp\n        timestamp: \"{timestamp}\"\n")
    };
    refused(&apply(&c, &group_manifest("readers", &reset("r0", "next tuesday"))), "should match").unwrap();
    apply_ok(&c, &group_manifest("readers", &reset("r0", "2026-13-01T00:00:00Z")));
    c.wait_condition("consumergroup", "readers", false, Some("InvalidReset"), CHANGE).unwrap();
    assert!(has_event(&c, "ConsumerGroup", "readers", "InvalidReset", "not RFC 3339"));

    // A reset while the consumer runs waits, and says why.
    let target = base + 50_000;
    let at = k8s_openapi::jiff::Timestamp::from_millisecond(target).unwrap().to_string();
    apply_ok(&c, &group_manifest("readers", &reset("replay-1", &at)));
    c.wait_condition("consumergroup", "readers", false, Some("WaitingForEmptyGroup"), CHANGE).unwrap();
    let (_, _, why, _) = c.condition_of("consumergroup", "readers", "Ready").unwrap();
    assert!(why.contains("1 member(s)") && why.contains("stop its consumers"), "{why}");
    let g = c.get("consumergroup", "readers").unwrap();
    assert!(g["status"]["lastReset"].is_null(), "{}", g["status"]);
    assert_eq!(status_offsets(&g)[&0].0, 60, "offsets untouched while it waits");

    // The consumer stops: the reset is applied, before and after recorded.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    polling.join().unwrap();
    let g = c.wait_condition("consumergroup", "readers", true, None, CHANGE).unwrap();
    let last = &g["status"]["lastReset"];
    assert_eq!(last["id"], "replay-1", "{last}");
    assert!(last["appliedAt"].is_string(), "{last}");
    let moved: Vec<(i64, i64, i64)> = last["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["partition"].as_i64().unwrap(), o["before"].as_i64().unwrap(), o["after"].as_i64().unwrap()))
        .collect();
    assert_eq!(moved, vec![(0, 60, 50), (1, 70, 50)]);
    assert!(has_event(&c, "ConsumerGroup", "readers", "ResetApplied", "clicks-0 60 → 50"));

    // The next consumer re-reads from exactly that point.
    let consumer = group_consumer(&bootstrap, "readers", "clicks");
    let first = first_records(&consumer, 2, Duration::from_secs(60));
    assert_eq!(first, BTreeMap::from([(0, (50, target)), (1, (50, target))]));
    let mut commit = TopicPartitionList::new();
    commit.add_partition_offset("clicks", 0, Offset::Offset(90)).unwrap();
    commit.add_partition_offset("clicks", 1, Offset::Offset(90)).unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();
    consumer.unsubscribe();
    drop(consumer);
    // ... and the reset is not applied again for the same id.
    wait_for(&c.runner, CHANGE, "readers Empty with the consumer's commits", || {
        let g = c.get("consumergroup", "readers")?;
        ensure!(
            g["status"]["members"] == 0 && status_offsets(&g).values().all(|o| o.0 == 90),
            "status {}",
            g["status"]
        );
        Ok(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(12));
    let g = c.get("consumergroup", "readers").unwrap();
    assert!(status_offsets(&g).values().all(|o| o.0 == 90), "applied once per id: {}", g["status"]);

    // A topic created with a Kafka client (--unmanaged-topics adopt) gets a Topic resource as
    // it is, deletionPolicy Retain.
    let kafka_admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&kafka_admin, "Raw_Events", 2, 2, &[("retention.ms", "86400000")]).unwrap().unwrap();
    let adopted = wait_for(&c.runner, CHANGE, "a Topic adopting Raw_Events", || {
        let names =
            c.kubectl(&["get", "topics", "-l", "strom.dev/adopted=true", "-o", "jsonpath={.items[*].metadata.name}"])?;
        let name = names.split_whitespace().next().context("none yet")?.to_string();
        Ok(name)
    })
    .unwrap();
    assert!(adopted.starts_with("raw-events-"), "{adopted}");
    let t = c.wait_condition("topic", &adopted, true, Some("InSync"), CHANGE).unwrap();
    assert_eq!(t["spec"]["topicName"], "Raw_Events");
    assert_eq!((t["spec"]["partitions"].as_i64(), t["spec"]["replicationFactor"].as_i64()), (Some(2), Some(2)));
    assert_eq!(t["spec"]["config"]["retention.ms"], "86400000");
    assert_eq!(t["spec"]["deletionPolicy"], "Retain");

    // A second ConsumerGroup for the same group is refused and changes nothing.
    apply_ok(&c, &group_manifest("readers-too", "  groupId: readers\n  deletionPolicy: Delete\n"));
    c.wait_condition("consumergroup", "readers-too", false, Some("GroupClaimed"), CHANGE).unwrap();
    c.kubectl(&["delete", "consumergroup", "readers-too", "--timeout=60s"]).unwrap();

    // Deleting it (deletionPolicy Delete) deletes the group.
    let patch = r#"{"spec":{"deletionPolicy":"Delete"}}"#;
    c.kubectl(&["patch", "consumergroup", "readers", "--type=merge", "-p", patch]).unwrap();
    c.kubectl(&["delete", "consumergroup", "readers", "--timeout=60s"]).unwrap();
    let listed =
        e2e::kafka::tool("consumer-groups", &["--bootstrap-server", &bootstrap, "--list"]).unwrap().success().unwrap();
    assert!(!listed.stdout.lines().any(|l| l.trim() == "readers"), "{}", listed.stdout);
}

#[test]
fn the_examples_applied_with_kustomize_reach_ready() {
    let _one = one_at_a_time();
    let c = Operated::start_with("op-examples", "my-cluster", &["--resync-seconds=5"]).unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let run = c.plane.kubectl(&["-n", &c.ns, "apply", "-k", dir]).unwrap();
    assert_eq!(run.code, 0, "{run:?}");
    c.wait_ready(3, FORM).unwrap();
    for kind in ["topic", "consumergroup"] {
        let names = c.kubectl(&["get", kind, "-o", "jsonpath={.items[*].metadata.name}"]).unwrap();
        assert!(!names.trim().is_empty(), "no {kind} in examples/");
        for name in names.split_whitespace() {
            c.wait_condition(kind, name, true, None, CHANGE).unwrap();
        }
    }
}
