//! The reliability scenarios (RELIABILITY.md "Scenarios", issue 34), short forms that run in
//! CI. Each runs the history workload (idempotent acks=all producers, a consumer group, an
//! observer of high watermarks and committed offsets) against three brokers with RF 3 and
//! min.insync.replicas 2: a steady phase, a seeded fault phase, a recovery phase, then a final
//! read, the checker (P1–P8), and P9/P10 (replicas byte-identical, metadata equal). Each fails on any anomaly and when throughput under the fault
//! or after it falls below its floor, printing the seed (`STROM_SEED` replays the choices)
//! and where the history and the fault schedule are.
//!
//! - S1 `s1_leader_hard_bounces`: the leader of a random partition SIGKILLed and restarted,
//!   five times.
//! - S2 `s2_leader_isolated_by_the_network`: a leader cut off from the other brokers in both
//!   directions (clients still reach it) until another broker leads its partition; it must
//!   stop acknowledging acks=all writes, and what it took meanwhile must not reach consumers.
//! - S5 `s5_paused_zombie_leader`: a leader SIGSTOPped past its session timeout (fenced, a
//!   new leader elected), then resumed: whatever it still had in flight must not land.
//! - S13 `s13_dropped_and_delayed_responses`: every client connection goes through a proxy
//!   that cuts connections, delays responses and drops requests or responses on the floor.
//!
//! The longer tier (`--ignored`, docs/reliability.md has the command):
//! - S7 `s7_group_coordinator_bounces`: the broker coordinating the consumers' group
//!   SIGKILLed and restarted, three times; committed offsets must never go backwards (P8)
//!   and no record may be skipped or read twice by the group beyond what a rebalance redoes.

#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use e2e::clients;
use e2e::cluster::{coordinator_partition, wait_until, Cluster, ClusterSpec};
use e2e::proxy::{Direction, Fault};
use e2e::reliability::replicas;
use e2e::reliability::scenario::{Floor, Scenario};
use e2e::reliability::workload::WorkloadSpec;

const PARTITIONS: i32 = 3;
const STEADY: Duration = Duration::from_secs(8);
const RECOVERY: Duration = Duration::from_secs(8);
const SETTLE: Duration = Duration::from_secs(60);

fn ok<T>(result: Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("{e:#}"))
}

/// Three brokers, all voters, and `topic` with RF 3 and min.insync.replicas 2.
fn three_brokers(topic: &str, spec: ClusterSpec) -> Result<Cluster> {
    let cluster = Cluster::start(spec)?;
    let admin = clients::admin_client(&cluster.bootstrap())?;
    let created = clients::create_topic_with(&admin, topic, PARTITIONS, 3, &[("min.insync.replicas", "2")])?;
    created.map_err(|e| anyhow!("create {topic}: {e:?}"))?;
    cluster.wait_fully_replicated(&[0, 1, 2], topic, 3, SETTLE)?;
    Ok(cluster)
}

/// P9 and P10 once the workload stopped: replicas byte-identical, metadata equal.
fn converged(cluster: &Cluster, topic: &str) {
    let sizes = ok(replicas::wait_identical(cluster, topic, PARTITIONS, SETTLE));
    println!("P9: every replica of {topic} identical ({sizes:?} bytes); P10: every broker serves the same metadata");
}

/// The live leader of `topic`-`partition` as the running brokers see it.
fn leader_of(cluster: &mut Cluster, topic: &str, partition: i32) -> Result<i32> {
    let running = cluster.running_ids();
    wait_until(SETTLE, || {
        let view = cluster.partition_of(&running, topic, usize::try_from(partition)?)?;
        anyhow::ensure!(running.contains(&view.leader), "{topic}-{partition} has no live leader: {view:?}");
        Ok(view.leader)
    })
}

/// Waits until a broker other than `victim` leads `topic`-`partition`, as the others see it.
fn wait_led_elsewhere(cluster: &Cluster, topic: &str, partition: i32, victim: i32) -> Result<i32> {
    let others: Vec<i32> = (0..3).filter(|id| *id != victim).collect();
    wait_until(SETTLE, || {
        let view = cluster.partition_of(&others, topic, usize::try_from(partition)?)?;
        anyhow::ensure!(view.leader >= 0 && view.leader != victim, "still led by {victim}: {view:?}");
        Ok(view.leader)
    })
}

/// One scenario: three brokers of `spec` with `topic`, the workload, a steady phase, `fault`
/// as the fault phase, a recovery phase, the checker with its floor, then P9 and P10.
fn run(name: &str, topic: &str, spec: ClusterSpec, fault: impl FnOnce(&mut Scenario, &mut Cluster) -> Result<()>) {
    let mut s = ok(Scenario::begin(name));
    let mut cluster = ok(three_brokers(topic, spec));
    let bootstrap = cluster.bootstrap();
    let workload = ok(s.start_workload(&bootstrap, &WorkloadSpec::new(topic, PARTITIONS)));
    ok(s.hold(&workload, "steady", STEADY));
    ok(s.phase(&workload, "fault", |s| fault(s, &mut cluster)));
    ok(s.hold(&workload, "recovery", RECOVERY));
    let figures = ok(s.finish(workload, &bootstrap, Floor::default()));
    assert!(figures.report.acknowledged > 0 && figures.report.read >= figures.report.acknowledged);
    converged(&cluster, topic);
}

#[test]
fn s1_leader_hard_bounces() {
    const BOUNCES: usize = 5;
    let topic = "s1";
    run("s1-leader-bounce", topic, ClusterSpec::new(3, 3), |s, cluster| {
        for round in 1..=BOUNCES {
            let partition = i32::try_from(s.rng.below(3))?;
            let victim = leader_of(cluster, topic, partition)?;
            let down = s.rng.between(Duration::from_millis(500), Duration::from_secs(3));
            s.log(format_args!(
                "bounce {round}: SIGKILL broker {victim} (leader of {topic}-{partition}), down for {down:?}"
            ));
            cluster.broker(victim).kill()?;
            thread::sleep(down);
            cluster.broker(victim).start().with_context(|| format!("restart broker {victim}"))?;
            // Back in every ISR before the next bounce: two bounces in a row must not leave
            // a partition with one replica (that is S4's sequence, not this one).
            cluster.wait_fully_replicated(&[victim], topic, 3, SETTLE)?;
            s.log(format_args!("bounce {round}: broker {victim} back in sync"));
        }
        Ok(())
    });
}

#[test]
fn s2_leader_isolated_by_the_network() {
    const ISOLATIONS: usize = 2;
    let topic = "s2";
    let mut spec = ClusterSpec::new(3, 3);
    spec.proxied = vec![0, 1, 2];
    spec.source_addresses = true;
    run("s2-isolated-leader", topic, spec, |s, cluster| {
        for round in 1..=ISOLATIONS {
            let partition = i32::try_from(s.rng.below(3))?;
            let victim = leader_of(cluster, topic, partition)?;
            s.log(format_args!(
                "isolation {round}: broker {victim} (leader of {topic}-{partition}) cut off from the others"
            ));
            cluster.isolate(victim)?;
            let moved = wait_led_elsewhere(cluster, topic, partition, victim)?;
            let extra = s.rng.between(Duration::from_secs(1), Duration::from_secs(3));
            s.log(format_args!("isolation {round}: {topic}-{partition} now led by {moved}; healing in {extra:?}"));
            thread::sleep(extra);
            cluster.heal_all();
            cluster.wait_fully_replicated(&[victim], topic, 3, SETTLE)?;
            s.log(format_args!("isolation {round}: broker {victim} back in sync"));
        }
        Ok(())
    });
}

#[test]
fn s5_paused_zombie_leader() {
    const PAUSES: usize = 2;
    let topic = "s5";
    run("s5-zombie-leader", topic, ClusterSpec::new(3, 3), |s, cluster| {
        for round in 1..=PAUSES {
            let partition = i32::try_from(s.rng.below(3))?;
            let victim = leader_of(cluster, topic, partition)?;
            s.log(format_args!("pause {round}: SIGSTOP broker {victim} (leader of {topic}-{partition})"));
            cluster.broker(victim).pause()?;
            // Past the 2 s session timeout: the controller fences it and elects another leader
            // while the zombie still holds the requests it had read.
            let moved = wait_led_elsewhere(cluster, topic, partition, victim)?;
            let extra = s.rng.between(Duration::from_millis(200), Duration::from_secs(2));
            s.log(format_args!(
                "pause {round}: {topic}-{partition} now led by {moved}; resuming {victim} in {extra:?}"
            ));
            thread::sleep(extra);
            cluster.broker(victim).resume()?;
            cluster.wait_fully_replicated(&[victim], topic, 3, SETTLE)?;
            s.log(format_args!("pause {round}: broker {victim} resumed and back in sync"));
        }
        Ok(())
    });
}

#[test]
#[ignore = "the longer tier: cargo test --release -p e2e --test suite reliability:: -- --ignored --nocapture"]
fn s7_group_coordinator_bounces() {
    const BOUNCES: usize = 3;
    const OFFSETS_TOPIC: &str = "__consumer_offsets";
    let topic = "s7";
    let group = WorkloadSpec::new(topic, PARTITIONS).group;
    let offsets_partition = coordinator_partition(&group, 50);
    run("s7-coordinator-bounce", topic, ClusterSpec::new(3, 3), |s, cluster| {
        for round in 1..=BOUNCES {
            let partition = i32::try_from(offsets_partition)?;
            let victim = leader_of(cluster, OFFSETS_TOPIC, partition)?;
            let down = s.rng.between(Duration::from_millis(500), Duration::from_secs(3));
            s.log(format_args!(
                "bounce {round}: SIGKILL broker {victim} (coordinator of {group}, {OFFSETS_TOPIC}-{partition}), down for {down:?}"
            ));
            cluster.broker(victim).kill()?;
            let moved = wait_led_elsewhere(cluster, OFFSETS_TOPIC, partition, victim)?;
            s.log(format_args!("bounce {round}: {group} now coordinated by {moved}"));
            thread::sleep(down);
            cluster.broker(victim).start().with_context(|| format!("restart broker {victim}"))?;
            cluster.wait_fully_replicated(&[victim], topic, 3, SETTLE)?;
            cluster.wait_fully_replicated(&[victim], OFFSETS_TOPIC, 3, SETTLE)?;
            s.log(format_args!("bounce {round}: broker {victim} back in sync"));
        }
        Ok(())
    });
}

#[test]
fn s13_dropped_and_delayed_responses() {
    const FAULT: Duration = Duration::from_secs(20);
    let topic = "s13";
    let mut spec = ClusterSpec::new(3, 3);
    spec.client_proxies = true;
    run("s13-client-network", topic, spec, |s, cluster| {
        let mut cuts = 0;
        let started = std::time::Instant::now();
        while started.elapsed() < FAULT {
            let id = i32::try_from(s.rng.below(3))?;
            let proxy = &cluster.client_proxies[&id];
            let hold = s.rng.between(Duration::from_millis(200), Duration::from_millis(1500));
            match s.rng.below(4) {
                0 => {
                    s.log(format_args!("broker {id}: cut every client connection"));
                    proxy.cut_all();
                }
                1 => {
                    let delay = s.rng.between(Duration::from_millis(50), Duration::from_millis(800));
                    s.log(format_args!("broker {id}: responses delayed {delay:?} for {hold:?}"));
                    proxy.set_fault(Direction::Down, Fault::Delay(delay));
                }
                2 => {
                    s.log(format_args!("broker {id}: responses dropped for {hold:?}, then connections cut"));
                    proxy.set_fault(Direction::Down, Fault::Blackhole);
                }
                _ => {
                    s.log(format_args!("broker {id}: requests dropped for {hold:?}, then connections cut"));
                    proxy.set_fault(Direction::Up, Fault::Blackhole);
                }
            }
            thread::sleep(hold);
            proxy.heal();
            // A connection that lost bytes is out of step: the client must reconnect and retry.
            cuts += proxy.cut_all();
        }
        s.log(format_args!("{cuts} connections cut"));
        anyhow::ensure!(cuts > 0, "the fault never met a connection");
        Ok(())
    });
}
