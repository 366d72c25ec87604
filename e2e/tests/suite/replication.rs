//! Replication (issue 5): replication factor 3, min.insync.replicas 2, on 3 brokers, with an
//! idempotent acks=all writer running throughout while leaders — and the active controller —
//! are SIGKILLed or SIGSTOPped and come back. Afterwards every acknowledged record is read
//! exactly once, at its acknowledged offset, in send order within its partition; the test
//! prints how many records were acknowledged and read.

use std::time::Duration;

use e2e::clients;
use e2e::cluster::{Cluster, ClusterSpec};
use e2e::workload::{check_exactly_once_in_order, Writer};

const SETTLE: Duration = Duration::from_secs(60);
const PROGRESS: Duration = Duration::from_secs(60);

/// 3 brokers that notice lag within 3 s and move leadership back to preferred replicas every 2 s.
pub fn replicated_cluster() -> Cluster {
    let spec = ClusterSpec::new(3, 3).with_args(&[
        "--replica-lag-time-max-ms",
        "3000",
        "--leader-imbalance-check-interval-ms",
        "2000",
    ]);
    Cluster::start(spec).expect("start 3 brokers")
}

/// Creates `topic` with replication factor 3 and min.insync.replicas 2.
pub fn create_replicated(cluster: &Cluster, topic: &str, partitions: i32) {
    let admin = clients::admin_client(&cluster.bootstrap()).expect("admin");
    let result = clients::create_topic_with(&admin, topic, partitions, 3, &[("min.insync.replicas", "2")])
        .expect("CreateTopics");
    assert!(result.is_ok(), "create {topic}: {result:?}");
    cluster.wait_fully_replicated(&[0], topic, 3, SETTLE).expect("the new topic is fully replicated");
}

/// A broker that leads a partition of `topic` and is not `avoid` (preferring non-controllers).
fn some_leader(cluster: &mut Cluster, topic: &str, avoid: &[i32]) -> i32 {
    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    let running = cluster.running_ids();
    let view = cluster.metadata_of(running[0]).expect("metadata");
    let leaders: Vec<i32> =
        view.topics[topic].partitions.iter().map(|p| p.leader).filter(|l| !avoid.contains(l)).collect();
    leaders.iter().copied().find(|l| *l != controller).or(leaders.first().copied()).expect("a leader to pick")
}

fn running_except(cluster: &mut Cluster, victim: i32) -> Vec<i32> {
    cluster.running_ids().into_iter().filter(|b| *b != victim).collect()
}

/// Reads everything back and checks it against the writer's delivery reports.
fn verify(cluster: &Cluster, topic: &str, writer: Writer) {
    let written = writer.stop().expect("the writer drains");
    let read = clients::read_to_end(&cluster.bootstrap(), topic, Duration::from_secs(120)).expect("read everything");
    let checked = check_exactly_once_in_order(&written, &read)
        .unwrap_or_else(|e| panic!("{e:#} ({} acknowledged, {} read)", written.reports.acked.len(), read.len()));
    println!(
        "sent {}, acknowledged {}, failed {}, read {}: every acknowledged record read exactly once, in order",
        checked.sent, checked.acked, checked.failed, checked.read
    );
    assert_eq!(checked.failed, 0, "no delivery failed: {:?}", written.reports.failed.first());
}

#[test]
fn acks_all_writes_survive_sigkill_of_a_leader_and_of_the_controller_exactly_once_in_order() {
    let mut cluster = replicated_cluster();
    create_replicated(&cluster, "killed", 3);
    let writer = Writer::start(&cluster.bootstrap(), "killed", 3, 1000).expect("writer");
    writer.wait_progress(500, PROGRESS).expect("writes flow");

    let first = some_leader(&mut cluster, "killed", &[]);
    cluster.broker(first).kill().expect("SIGKILL a leader");
    writer.wait_progress(1000, PROGRESS).expect("writes flow with the leader dead");
    cluster.broker(first).start().expect("restart it");
    cluster.wait_fully_replicated(&[first], "killed", 3, SETTLE).expect("it catches up and rejoins the ISR");
    writer.wait_progress(500, PROGRESS).expect("writes flow");

    // The active controller next (it may lead partitions too).
    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    cluster.broker(controller).kill().expect("SIGKILL the active controller");
    writer.wait_progress(1000, PROGRESS).expect("writes flow with the controller dead");
    cluster.broker(controller).start().expect("restart it");
    cluster.wait_fully_replicated(&[controller], "killed", 3, SETTLE).expect("it catches up and rejoins the ISR");
    writer.wait_progress(500, PROGRESS).expect("writes flow");

    // Preferred-leader election gives every partition its first replica back as leader.
    e2e::cluster::wait_until(SETTLE, || {
        let view = cluster.metadata_of(0)?;
        for (i, p) in view.topics["killed"].partitions.iter().enumerate() {
            anyhow::ensure!(p.leader == p.replicas[0], "killed-{i} led by {} not {}", p.leader, p.replicas[0]);
        }
        Ok(())
    })
    .expect("leadership goes back to the preferred replicas");
    verify(&cluster, "killed", writer);
}

#[test]
fn acks_all_writes_survive_a_paused_leader_and_a_paused_controller_exactly_once_in_order() {
    let mut cluster = replicated_cluster();
    create_replicated(&cluster, "paused", 3);
    let writer = Writer::start(&cluster.bootstrap(), "paused", 3, 1000).expect("writer");
    writer.wait_progress(500, PROGRESS).expect("writes flow");

    for round in 0..2 {
        let victim = if round == 0 {
            some_leader(&mut cluster, "paused", &[])
        } else {
            cluster.agreed_controller(SETTLE).expect("a controller")
        };
        let others = running_except(&mut cluster, victim);
        cluster.broker(victim).pause().expect("SIGSTOP");
        // Its session ends, leadership moves to an in-sync follower, and writes go on.
        let progress = writer.wait_progress(1000, PROGRESS);
        cluster.broker(victim).resume().expect("SIGCONT");
        progress.unwrap_or_else(|e| panic!("round {round}: writes stalled with broker {victim} paused: {e:#}"));
        cluster.wait_fully_replicated(&others, "paused", 3, SETTLE).expect("it catches up and rejoins the ISR");
        writer.wait_progress(500, PROGRESS).expect("writes flow");
    }
    verify(&cluster, "paused", writer);
}
