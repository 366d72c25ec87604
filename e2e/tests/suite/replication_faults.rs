//! Replication under the faults Kafka learned the hard way (issue 5): two of three replicas
//! down (NOT_ENOUGH_REPLICAS, nothing acknowledged is lost, writes resume by themselves); a
//! follower away for many records catches up and rejoins the ISR; a leader killed with records
//! no follower fetched never lets consumers see records that later vanish, and truncates them
//! when it returns (KIP-101); a consumer group keeps going when its coordinator's broker dies;
//! SIGTERM moves a broker's leaderships away before it exits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::clients::{self, Record};
use e2e::cluster::{labelled_metric_value, wait_until, Cluster, ClusterSpec};
use e2e::groups::fixtures::{high_watermarks, member, produce_tagged, wait_for_committed, wait_until_received};
use e2e::groups::Assignor;
use e2e::workload::{check_exactly_once_in_order, Writer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;

const SETTLE: Duration = Duration::from_secs(60);
const PROGRESS: Duration = Duration::from_secs(60);

/// 3 brokers with `replica.lag.time.max.ms` = `lag_ms` and `broker.session.timeout.ms` =
/// `session_ms` (both small, so faults are noticed within a test's patience).
fn cluster_with(lag_ms: u32, session_ms: u32) -> Cluster {
    cluster_of(3, lag_ms, session_ms)
}

/// `brokers` brokers of which the first 3 vote: a test can stop replicas on learners without
/// taking the metadata quorum down with them.
fn cluster_of(brokers: usize, lag_ms: u32, session_ms: u32) -> Cluster {
    cluster_proxied(brokers, lag_ms, session_ms, &[])
}

/// As [`cluster_of`], with the internal ports of `proxied` brokers behind proxies.
fn cluster_proxied(brokers: usize, lag_ms: u32, session_ms: u32, proxied: &[i32]) -> Cluster {
    let (lag, session) = (lag_ms.to_string(), session_ms.to_string());
    let mut spec = ClusterSpec::new(brokers, 3);
    spec.proxied = proxied.to_vec();
    // The session timeout of FAST_SESSIONS is replaced, not repeated.
    if let Some(i) = spec.extra_args.iter().position(|a| a == "--broker-session-timeout-ms") {
        spec.extra_args[i + 1] = session;
    }
    // Per-partition series (strom_log_end_offset): a test reads a follower's log end offset.
    let spec = spec.with_args(&[
        "--replica-lag-time-max-ms",
        &lag,
        "--leader-imbalance-check-interval-ms",
        "2000",
        "--metrics-partition-series",
        "true",
    ]);
    Cluster::start(spec).expect("start 3 brokers")
}

fn create_replicated(cluster: &Cluster, topic: &str, partitions: i32, min_insync: &str) {
    let admin = clients::admin_client(&cluster.bootstrap()).expect("admin");
    let result = clients::create_topic_with(&admin, topic, partitions, 3, &[("min.insync.replicas", min_insync)])
        .expect("CreateTopics");
    assert!(result.is_ok(), "create {topic}: {result:?}");
    cluster.wait_fully_replicated(&[0], topic, 3, SETTLE).expect("fully replicated");
}

/// Creates `topic` with one partition on exactly `replicas` (the first leads).
fn create_assigned(cluster: &Cluster, topic: &str, replicas: &[i32], min_insync: &str) {
    use rdkafka::admin::{NewTopic, TopicReplication};
    let admin = clients::admin_client(&cluster.bootstrap()).expect("admin");
    let assignment: &[&[i32]] = &[replicas];
    let new = NewTopic::new(topic, 1, TopicReplication::Variable(assignment)).set("min.insync.replicas", min_insync);
    let mut results = clients::block_on(admin.create_topics([&new], &clients::admin_options()))
        .expect("runtime")
        .expect("CreateTopics");
    let result = results.pop().expect("a result");
    assert!(result.is_ok(), "create {topic}: {result:?}");
    let via: Vec<i32> = (0..3).collect();
    cluster.wait_fully_replicated(&via, topic, replicas.len(), SETTLE).expect("fully replicated");
}

fn leader_of(cluster: &Cluster, via: &[i32], topic: &str, partition: usize) -> i32 {
    cluster.partition_of(via, topic, partition).expect("partition").leader
}

/// Sends one record with acks=all and no retries; returns librdkafka's verdict.
fn probe(bootstrap: &str, topic: &str, value: &str) -> Result<(), RDKafkaErrorCode> {
    let mut config = clients::producer_config(bootstrap, "all");
    config.set("enable.idempotence", "false").set("message.send.max.retries", "0").set("message.timeout.ms", "10000");
    let (producer, log) = clients::tracked_producer(&config).expect("probe producer");
    clients::send_blocking(&producer, Record::with_opaque_to(topic, 0).partition(0).payload(value)).expect("enqueue");
    producer.flush(Duration::from_secs(20)).expect("flush");
    let reports = log.snapshot();
    match reports.failed.first().map(|f| &f.error) {
        None => Ok(()),
        Some(KafkaError::MessageProduction(code)) => Err(*code),
        Some(other) => panic!("probe failed with {other}"),
    }
}

#[test]
fn with_two_of_three_replicas_down_acks_all_fails_with_not_enough_replicas_and_resumes_when_they_return() {
    // Replicas on a voter and two learners: losing both learners leaves the metadata quorum up.
    let mut cluster = cluster_of(5, 3000, 2000);
    create_assigned(&cluster, "quorum", &[0, 3, 4], "2");
    let writer = Writer::start(&cluster.bootstrap(), "quorum", 1, 300).expect("writer");
    writer.wait_progress(200, PROGRESS).expect("writes flow");
    let leader = leader_of(&cluster, &[0, 1, 2], "quorum", 0);
    assert_eq!(leader, 0, "the first replica leads");
    let followers = [3, 4];
    for f in &followers {
        cluster.broker(*f).kill().expect("SIGKILL a follower");
    }
    // Once the ISR is the leader alone, acks=all is refused outright.
    let refused =
        wait_until(SETTLE, || match probe(&cluster.brokers[leader as usize].bootstrap(), "quorum", "probe") {
            Err(RDKafkaErrorCode::NotEnoughReplicas) => Ok(()),
            other => anyhow::bail!("probe answered {other:?}"),
        });
    refused.expect("acks=all gets NOT_ENOUGH_REPLICAS with one in-sync replica of three");
    let stalled_at = writer.acked();
    std::thread::sleep(Duration::from_secs(1));
    assert!(writer.acked() <= stalled_at + 5, "nothing more is acknowledged while the ISR is too small");

    for f in &followers {
        cluster.broker(*f).start().expect("restart a follower");
    }
    // The same producer, never restarted, gets its retried records through.
    writer.wait_progress(300, PROGRESS).expect("writes resume without a client restart");
    probe(&cluster.bootstrap(), "quorum", "probe-after").expect("acks=all accepted again");
    let written = writer.stop().expect("drain");
    let read = clients::read_to_end(&cluster.bootstrap(), "quorum", Duration::from_secs(60)).expect("read");
    let checked = check_exactly_once_in_order(&written, &read).expect("nothing acknowledged is missing");
    println!("acknowledged {}, read {} (probes included), failed {}", checked.acked, checked.read, checked.failed);
}

#[test]
fn a_follower_away_for_many_records_catches_up_and_an_unreplicated_leader_tail_is_never_seen_and_is_truncated() {
    // The followers stop fetching for a moment below: the lag window (8 s) must not end
    // meanwhile, or the ISR would shrink to the leader alone. The leader is learner 3, behind a
    // proxy on its internal port; its followers are learner 4 and voter 0.
    let mut cluster = cluster_proxied(5, 8000, 6000, &[3]);
    create_assigned(&cluster, "tail", &[3, 4, 0], "1");
    let bootstrap = cluster.bootstrap();
    let leader = leader_of(&cluster, &[0, 1, 2], "tail", 0);
    assert_eq!(leader, 3, "the first replica leads");
    let followers = [4, 0];

    // A follower down while 20,000 records are written catches up and rejoins the ISR.
    cluster.broker(followers[0]).kill().expect("kill a follower");
    let records: Vec<(i32, String)> = (0..20_000).map(|i| (0, format!("bulk-{i:05}"))).collect();
    clients::produce_to_partitions(&bootstrap, "tail", &records).expect("produce while it is away");
    cluster.broker(followers[0]).start().expect("restart it");
    cluster.wait_fully_replicated(&[leader], "tail", 3, SETTLE).expect("it rejoins the ISR");
    let leo = |c: &Cluster, b: i32| {
        let text = c.brokers[b as usize].http_get("/metrics").expect("metrics").body;
        labelled_metric_value(&text, "strom_log_end_offset", r#"topic="tail",partition="0""#).unwrap_or(-1.0)
    };
    wait_until(SETTLE, || {
        let (l, f) = (leo(&cluster, leader), leo(&cluster, followers[0]));
        anyhow::ensure!(l == f && l >= 20_000.0, "leader at {l}, returned follower at {f}");
        Ok(())
    })
    .expect("the returned follower has every record");

    // The leader is cut off from its followers (its internal port partitioned; what was in
    // flight is lost), appends records (acks=1) that no follower can fetch, then dies.
    let proxy = cluster.proxies.remove(&leader).expect("the leader's internal port is proxied");
    proxy.partition();
    let mut config = clients::producer_config(&cluster.brokers[leader as usize].bootstrap(), "1");
    config.set("enable.idempotence", "false");
    let (producer, log) = clients::tracked_producer(&config).expect("acks=1 producer");
    for i in 0..50 {
        let value = format!("doomed-{i:02}");
        clients::send_blocking(&producer, Record::with_opaque_to("tail", i).partition(0).payload(&value))
            .expect("send");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    assert_eq!(log.acked_count(), 50, "the leader acknowledged them (acks=1)");
    let (_, high_watermark) =
        clients::watermarks(&cluster.brokers[leader as usize].bootstrap(), "tail", 0).expect("watermarks");
    assert_eq!(high_watermark, 20_000, "the high watermark did not move past what the followers have");
    let seen =
        clients::consume_n(&cluster.brokers[leader as usize].bootstrap(), "tail", 20_050, Duration::from_secs(1))
            .expect("consume");
    assert!(seen.iter().all(|r| !r.value_str().starts_with("doomed")), "no consumer sees unreplicated records");
    cluster.broker(leader).kill().expect("SIGKILL the leader");
    proxy.heal();
    let new_leader = wait_until(SETTLE, || {
        let l = leader_of(&cluster, &[1, 2], "tail", 0);
        anyhow::ensure!(l >= 0 && l != leader, "leader {l}");
        Ok(l)
    })
    .expect("a follower takes over");
    clients::produce_to_partitions(&cluster.bootstrap(), "tail", &[(0, "after-failover".to_string())])
        .expect("the new leader takes writes");

    cluster.broker(leader).start().expect("the old leader returns");
    cluster.wait_fully_replicated(&[1, 2], "tail", 3, SETTLE).expect("it rejoins after truncating");
    let read = clients::read_to_end(&cluster.bootstrap(), "tail", Duration::from_secs(60)).expect("read");
    assert!(read.iter().all(|r| !r.value_str().starts_with("doomed")), "the unreplicated tail is gone everywhere");
    assert_eq!(read.len(), 20_001, "every acknowledged acks=all record, and the one after the failover");
    assert!(cluster.brokers[leader as usize].log_tail(400).contains("truncat"), "the old leader logged its truncation");
    wait_until(SETTLE, || {
        let (a, b) = (leo(&cluster, leader), leo(&cluster, new_leader));
        anyhow::ensure!(a == b, "old leader at {a}, new leader at {b}");
        Ok(())
    })
    .expect("the old leader's log matches the new leader's");
}

#[test]
fn a_consumer_group_keeps_consuming_when_its_coordinators_broker_dies() {
    let mut cluster = cluster_with(3000, 2000);
    create_replicated(&cluster, "orders", 3, "1");
    let bootstrap = cluster.bootstrap();
    let first = produce_tagged(&bootstrap, "orders", "before", 3, 100);
    let members = [
        member(&bootstrap, "survivors", "s-1", "orders", Assignor::Range),
        member(&bootstrap, "survivors", "s-2", "orders", Assignor::Range),
    ];
    wait_until_received(&[&members[0], &members[1]], &[], &first, "before the coordinator dies");
    wait_for_committed(&bootstrap, "survivors", "orders", &high_watermarks(&bootstrap, "orders", 3));
    let coordinator = coordinator_of(&cluster, "survivors");
    println!("the group's coordinator is broker {coordinator}");
    cluster.broker(coordinator).kill().expect("SIGKILL the coordinator's broker");
    let survivors: Vec<i32> = (0..3).filter(|b| *b != coordinator).collect();
    let bootstrap: String =
        survivors.iter().map(|b| cluster.brokers[*b as usize].bootstrap()).collect::<Vec<_>>().join(",");
    let second = produce_tagged(&bootstrap, "orders", "after", 3, 100);
    wait_until_received(&[&members[0], &members[1]], &[], &second, "after the coordinator died");
    wait_for_committed(&bootstrap, "survivors", "orders", &high_watermarks(&bootstrap, "orders", 3));
    let moved = coordinator_of(&cluster, "survivors");
    assert_ne!(moved, coordinator, "coordination moved with the offsets partition's leadership");
}

/// The broker leading `group`'s `__consumer_offsets` partition (Kafka's hash).
fn coordinator_of(cluster: &Cluster, group: &str) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let partition = usize::try_from(hash.unsigned_abs() % 50).unwrap_or(0);
    let via: Vec<i32> = (0..3).collect();
    wait_until(SETTLE, || {
        let p = cluster.partition_of(&via, "__consumer_offsets", partition)?;
        anyhow::ensure!(p.leader >= 0, "no leader");
        Ok(p.leader)
    })
    .expect("the offsets partition has a leader")
}

#[test]
fn sigterm_moves_a_brokers_leaderships_away_before_it_exits() {
    // A long session timeout: only a controlled shutdown can move leadership quickly.
    let mut cluster = cluster_with(3000, 8000);
    create_replicated(&cluster, "handover", 3, "2");
    let writer = Writer::start(&cluster.bootstrap(), "handover", 3, 600).expect("writer");
    writer.wait_progress(300, PROGRESS).expect("writes flow");
    let victim = leader_of(&cluster, &[0, 1, 2], "handover", 0);
    let before = writer.acked();
    let asked = Instant::now();
    let status = cluster.broker(victim).terminate().expect("SIGTERM");
    let exited = asked.elapsed();
    assert!(status.success(), "a clean exit: {status}");
    writer.wait_progress(300, PROGRESS).expect("writes flow after the handover");
    let others: Vec<i32> = (0..3).filter(|b| *b != victim).collect();
    let view = cluster.metadata_of(others[0]).expect("metadata");
    let led: BTreeMap<usize, i32> =
        view.topics["handover"].partitions.iter().enumerate().map(|(i, p)| (i, p.leader)).collect();
    assert!(led.values().all(|l| *l != victim), "nothing is led by the stopped broker: {led:?}");
    let written = writer.stop().expect("drain");
    // The longest pause between two acknowledgements around the shutdown.
    let mut times: Vec<Instant> = written.reports.acked.iter().map(|d| d.at).collect();
    times.sort();
    let gap = times
        .windows(2)
        .filter(|w| w[1] > asked - Duration::from_secs(1))
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    println!("SIGTERM of leader {victim}: exited after {exited:?}; longest gap between acknowledgements {gap:?} (acked {before} before)");
    assert!(gap < Duration::from_secs(8), "leadership moved before the 8 s session timeout would have: gap {gap:?}");
    let read = clients::read_to_end(&cluster.bootstrap(), "handover", Duration::from_secs(60)).expect("read");
    check_exactly_once_in_order(&written, &read).expect("nothing lost across the handover");
}
