//! Moving partitions between brokers (issue 6), driven through the `strom` CLI the way an
//! operator of the cluster would: growing a cluster from 3 to 5 brokers under an acks=all
//! writer and a consumer group; draining a broker and removing it (and the refusals on the way);
//! a controller SIGKILLed in the middle of a reassignment, which the next controller finishes.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use e2e::cli::{strom, CliRun};
use e2e::clients;
use e2e::cluster::{wait_until, Cluster, ClusterSpec};
use e2e::groups::fixtures::{member, values_of, wait_until_received};
use e2e::groups::Assignor;
use e2e::workload::{check_exactly_once_in_order, value_of, Writer};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(60);
const PROGRESS: Duration = Duration::from_secs(60);

/// `brokers` brokers (the first 3 vote); `held_back` are not started yet.
fn cluster(brokers: usize, held_back: &[i32]) -> Cluster {
    let mut spec = ClusterSpec::new(brokers, 3).with_args(&[
        "--replica-lag-time-max-ms",
        "5000",
        "--leader-imbalance-check-interval-ms",
        "5000",
    ]);
    spec.held_back = held_back.to_vec();
    Cluster::start(spec).expect("start the cluster")
}

fn create(cluster: &mut Cluster, topic: &str, partitions: i32, rf: i32) {
    let admin = clients::admin_client(&cluster.bootstrap_running()).expect("admin");
    let result = clients::create_topic_with(&admin, topic, partitions, rf, &[("min.insync.replicas", "2")])
        .expect("CreateTopics");
    assert!(result.is_ok(), "create {topic}: {result:?}");
    cluster.wait_fully_replicated(&[0], topic, usize::try_from(rf).unwrap_or(0), SETTLE).expect("fully replicated");
}

/// `strom <args> -o json` against broker `via`, which must succeed.
fn json(cluster: &mut Cluster, via: i32, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--output", "json"]);
    let run = strom(cluster.broker(via).internal_addr(), &all).expect("run strom").success().expect("strom succeeds");
    run.json().expect("JSON output")
}

fn run(cluster: &mut Cluster, via: i32, args: &[&str]) -> CliRun {
    strom(cluster.broker(via).internal_addr(), args).expect("run strom")
}

/// Replicas and leaders per broker, as `strom cluster describe` reports them.
fn per_broker(described: &Value) -> BTreeMap<i64, (i64, i64)> {
    described["cluster"]["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| {
            let n = |k: &str| b[k].as_i64().unwrap_or(0);
            (n("id"), (n("replicas"), n("leaders")))
        })
        .collect()
}

fn within_one_of_the_mean(counts: &[i64]) -> bool {
    let total: i64 = counts.iter().sum();
    let n = i64::try_from(counts.len()).unwrap_or(1).max(1);
    // |count - total/n| <= 1  <=>  |count*n - total| <= n
    counts.iter().all(|c| (c * n - total).abs() <= n)
}

fn verify_every_ack_read_once(cluster: &mut Cluster, topic: &str, writer: Writer) -> HashSet<String> {
    let written = writer.stop().expect("the writer drains");
    let read = clients::read_to_end(&cluster.bootstrap_running(), topic, Duration::from_secs(120)).expect("read all");
    let checked = check_exactly_once_in_order(&written, &read)
        .unwrap_or_else(|e| panic!("{e:#} ({} acknowledged, {} read)", written.reports.acked.len(), read.len()));
    assert_eq!(checked.failed, 0, "no delivery failed: {:?}", written.reports.failed.first());
    println!(
        "sent {}, acknowledged {}, read {}: every acknowledged record read exactly once",
        checked.sent, checked.acked, checked.read
    );
    written.reports.acked.iter().map(|d| value_of(d.id)).collect()
}

#[test]
fn scaling_out_from_three_to_five_brokers_evens_replicas_and_leaders_under_load_without_losing_a_record() {
    let mut cluster = cluster(5, &[3, 4]);
    create(&mut cluster, "orders", 24, 3);
    let bootstrap = cluster.bootstrap_running();
    let writer = Writer::start(&bootstrap, "orders", 24, 400).expect("writer");
    writer.wait_progress(2000, PROGRESS).expect("writes flow");
    let mut reader = member(&bootstrap, "orders-readers", "reader-1", "orders", Assignor::Range);

    cluster.broker(3).start().expect("start broker 3");
    cluster.broker(4).start().expect("start broker 4");
    let before = json(&mut cluster, 0, &["cluster", "describe"]);
    let counts = per_broker(&before);
    assert_eq!(counts.get(&3).map(|c| c.0), Some(0), "a new broker holds nothing yet: {counts:?}");

    let executed = json(&mut cluster, 0, &["rebalance", "execute", "--timeout", "300"]);
    let moved = executed["plan"]["replicas_to_move"].as_i64().unwrap_or(0);
    assert!(moved >= 20, "the plan moves replicas onto the new brokers: {executed}");
    assert_eq!(executed["progress"]["partitions_remaining"].as_i64(), Some(0), "execute waited until done");
    writer.wait_progress(1000, PROGRESS).expect("writes flow after the rebalance");

    // Leadership follows the new preferred replicas as each move completes.
    let settled = wait_until(SETTLE, || {
        let described = json(&mut cluster, 1, &["cluster", "describe"]);
        let counts = per_broker(&described);
        let replicas: Vec<i64> = counts.values().map(|c| c.0).collect();
        let leaders: Vec<i64> = counts.values().map(|c| c.1).collect();
        anyhow::ensure!(counts.len() == 5, "5 brokers: {counts:?}");
        anyhow::ensure!(within_one_of_the_mean(&replicas), "replicas per broker {counts:?}");
        anyhow::ensure!(within_one_of_the_mean(&leaders), "leaders per broker {counts:?}");
        anyhow::ensure!(described["cluster"]["reassigning_partitions"].as_i64() == Some(0), "still reassigning");
        Ok(counts)
    })
    .expect("replicas and leaders within one of the mean");
    println!("replicas, leaders per broker after the rebalance: {settled:?}");

    // What Kafka clients see agrees: distinct replicas, all in sync, the new brokers take part.
    let view = cluster.wait_fully_replicated(&[2], "orders", 3, SETTLE).expect("every replica in sync");
    let mut on_new = 0;
    for (i, p) in view.topics["orders"].partitions.iter().enumerate() {
        let distinct: HashSet<i32> = p.replicas.iter().copied().collect();
        assert_eq!(distinct.len(), 3, "orders-{i} replicas {:?}", p.replicas);
        on_new += p.replicas.iter().filter(|r| **r >= 3).count();
    }
    assert!(on_new >= 24, "the new brokers hold a share of orders ({on_new} of 72 replicas)");

    let acked = verify_every_ack_read_once(&mut cluster, "orders", writer);
    let wanted: Vec<String> = acked.into_iter().collect();
    wait_until_received(&[&reader], &[], &wanted, "the consumer group during the rebalance");
    reader.leave().expect("the group member stays healthy");
}

#[test]
fn draining_a_broker_moves_its_replicas_away_and_then_it_can_be_removed() {
    let mut cluster = cluster(5, &[]);
    create(&mut cluster, "drained", 10, 3);
    let bootstrap = cluster.bootstrap_running();
    let writer = Writer::start(&bootstrap, "drained", 10, 300).expect("writer");
    writer.wait_progress(1000, PROGRESS).expect("writes flow");
    let held = |cluster: &Cluster, id: i32| -> usize {
        let view = cluster.metadata_of(0).expect("metadata");
        view.topics.values().flat_map(|t| &t.partitions).filter(|p| p.replicas.contains(&id)).count()
    };
    assert!(held(&cluster, 4) > 0, "broker 4 holds replicas to begin with");

    // Refusals first, each saying why, and each changing nothing.
    let refused = run(&mut cluster, 0, &["broker", "remove", "4"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("still holds") && refused.stderr.contains("drain"), "{}", refused.stderr);
    let voter = run(&mut cluster, 0, &["broker", "remove", "0"]);
    assert_eq!(voter.code, 1, "{voter:?}");
    assert!(voter.stderr.contains("voter"), "{}", voter.stderr);
    assert!(held(&cluster, 4) > 0, "the refusals moved nothing");

    let drained = json(&mut cluster, 3, &["broker", "drain", "4", "--timeout", "300"]);
    assert_eq!(drained["progress"]["partitions_remaining"].as_i64(), Some(0), "drain waited until done: {drained}");
    wait_until(SETTLE, || {
        anyhow::ensure!(held(&cluster, 4) == 0, "broker 4 still holds {} replicas", held(&cluster, 4));
        Ok(())
    })
    .expect("nothing left on broker 4");
    cluster.wait_fully_replicated(&[1], "drained", 3, SETTLE).expect("the moved replicas are in sync");
    writer.wait_progress(500, PROGRESS).expect("writes flow after the drain");

    let running = run(&mut cluster, 0, &["broker", "remove", "4"]);
    assert_eq!(running.code, 1, "a running broker is not removed: {running:?}");
    assert!(running.stderr.contains("still running"), "{}", running.stderr);
    cluster.broker(4).terminate().expect("stop broker 4");
    let removed = wait_until(SETTLE, || {
        let r = run(&mut cluster, 0, &["broker", "remove", "4"]);
        anyhow::ensure!(r.code == 0, "remove: {} {}", r.code, r.stderr);
        Ok(r)
    })
    .expect("strom broker remove 4 succeeds once it is stopped");
    assert!(removed.stdout.contains("broker 4 removed"), "{}", removed.stdout);
    let described = json(&mut cluster, 2, &["cluster", "describe"]);
    assert!(!per_broker(&described).contains_key(&4), "broker 4 is gone: {described}");
    let again = run(&mut cluster, 0, &["broker", "remove", "4"]);
    assert_eq!(again.code, 3, "an unknown broker is not found: {again:?}");

    verify_every_ack_read_once(&mut cluster, "drained", writer);
}

#[test]
fn a_reassignment_interrupted_by_a_controller_sigkill_is_finished_by_the_next_controller() {
    let mut cluster = cluster(4, &[3]);
    create(&mut cluster, "moving", 4, 2);
    // About 8 MiB, so that at 128 KiB/s per leader the new broker needs a while to catch up.
    let value = "x".repeat(1000);
    let records: Vec<(i32, String)> = (0..8000).map(|i| (i % 4, format!("{i:06}-{value}"))).collect();
    clients::produce_to_partitions(&cluster.bootstrap_running(), "moving", &records).expect("produce");
    cluster.broker(3).start().expect("start broker 3");

    let started =
        json(&mut cluster, 0, &["rebalance", "execute", "--add-brokers", "3", "--throttle", "128KiB", "--no-wait"]);
    assert!(started["plan"]["replicas_to_move"].as_i64().unwrap_or(0) >= 2, "moves onto broker 3: {started}");
    let targets: BTreeMap<i64, Vec<i64>> = started["plan"]["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .map(|m| {
            let to = m["to"].as_array().expect("to").iter().filter_map(Value::as_i64).collect();
            (m["partition"].as_i64().unwrap_or(-1), to)
        })
        .collect();

    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    let status = json(&mut cluster, 3, &["rebalance", "status"]);
    assert!(status["partitions_remaining"].as_i64().unwrap_or(0) > 0, "still moving before the kill: {status}");
    cluster.broker(controller).kill().expect("SIGKILL the controller");
    let survivors: Vec<i32> = (0..4).filter(|b| *b != controller).collect();
    let next = wait_until(SETTLE, || {
        let c = cluster.controller_seen_by(survivors[0])?;
        anyhow::ensure!(c >= 0 && c != controller, "controller {c}");
        Ok(c)
    })
    .expect("another controller");
    let via = survivors[0];
    let during = json(&mut cluster, via, &["rebalance", "status"]);
    println!("after the failover to controller {next}: {during}");
    assert!(
        during["partitions_remaining"].as_i64().unwrap_or(0) > 0,
        "the move outlived the old controller (so the new one has to finish it): {during}"
    );
    let finished = json(&mut cluster, via, &["rebalance", "status", "--wait", "--timeout", "300"]);
    assert_eq!(finished["partitions_remaining"].as_i64(), Some(0), "{finished}");

    let view = cluster.metadata_of(via).expect("metadata");
    for (partition, to) in &targets {
        let p = &view.topics["moving"].partitions[usize::try_from(*partition).unwrap_or(0)];
        let mut have: Vec<i64> = p.replicas.iter().map(|r| i64::from(*r)).collect();
        let mut want = to.clone();
        have.sort_unstable();
        want.sort_unstable();
        assert_eq!(have, want, "moving-{partition} reached its target");
    }
    cluster.broker(controller).start().expect("restart the old controller");
    cluster.wait_fully_replicated(&[via], "moving", 2, SETTLE).expect("all replicas in sync");
    let read = clients::read_to_end(&cluster.bootstrap_running(), "moving", Duration::from_secs(120)).expect("read");
    let got = values_of(&read);
    assert_eq!(got.len(), records.len(), "every record is still there");
    assert!(records.iter().all(|(_, v)| got.contains(v)), "the same records");
}

#[test]
fn cancelling_a_throttled_move_returns_partitions_to_their_original_replicas() {
    let mut cluster = cluster(4, &[3]);
    create(&mut cluster, "undone", 4, 2);
    let value = "y".repeat(1000);
    let records: Vec<(i32, String)> = (0..6000).map(|i| (i % 4, format!("{i:06}-{value}"))).collect();
    clients::produce_to_partitions(&cluster.bootstrap_running(), "undone", &records).expect("produce");
    let before = cluster.metadata_of(0).expect("metadata").topics["undone"].clone();
    cluster.broker(3).start().expect("start broker 3");

    json(&mut cluster, 0, &["rebalance", "execute", "--add-brokers", "3", "--throttle", "64KiB", "--no-wait"]);
    let moving = json(&mut cluster, 1, &["rebalance", "status"]);
    assert!(moving["partitions_remaining"].as_i64().unwrap_or(0) > 0, "moving: {moving}");
    let listed = run(&mut cluster, 2, &["topic", "describe", "undone"]).success().expect("describe");
    assert!(listed.stdout.contains("ADDING"), "{}", listed.stdout);

    let cancelled = json(&mut cluster, 0, &["rebalance", "cancel"]);
    assert_eq!(cancelled["partitions_remaining"].as_i64().unwrap_or(0), 0, "{cancelled}");
    let after = cluster.wait_fully_replicated(&[1], "undone", 2, SETTLE).expect("in sync");
    for (i, (was, now)) in before.partitions.iter().zip(&after.topics["undone"].partitions).enumerate() {
        let mut a = was.replicas.clone();
        let mut b = now.replicas.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "undone-{i} is back on its original replicas");
    }
    wait_until(SETTLE, || {
        let d = json(&mut cluster, 0, &["cluster", "describe"]);
        anyhow::ensure!(per_broker(&d).get(&3).map(|c| c.0) == Some(0), "broker 3 still holds replicas: {d}");
        Ok(())
    })
    .expect("broker 3 holds nothing once cancelled");
    let read = clients::read_to_end(&cluster.bootstrap_running(), "undone", Duration::from_secs(120)).expect("read");
    assert_eq!(values_of(&read).len(), records.len(), "every record is still there");
}
