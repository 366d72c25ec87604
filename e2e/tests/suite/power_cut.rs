//! Requirements (issue 38, docs/durability.md): a power cut, simulated by cutting every file
//! the brokers wrote back to what its last fsync covered (the `strom-powercut` shim records
//! each fsync, e2e/src/powercut.rs cuts), under an idempotent acks=all producer (RF 3,
//! min.insync.replicas 2):
//!
//! - `durable_mode_keeps_every_acknowledged_record_when_all_brokers_lose_power`: with
//!   `--flush-on-acks-all true` every record acknowledged before all three brokers lost power
//!   is read back, exactly once, in order.
//! - `durable_mode_keeps_every_acknowledged_record_when_one_broker_loses_power`.
//! - `a_durable_topic_keeps_every_acknowledged_record_when_all_brokers_lose_power`: the same
//!   for one topic with Kafka's `flush.messages=1` on brokers in the default mode.
//! - `default_mode_loses_only_the_unsynced_tail_when_all_brokers_lose_power`: the default
//!   mode's loss is printed; what is lost of each partition is a tail of what was acknowledged
//!   (never a hole), as docs/durability.md bounds it.
//! - `default_mode_loses_nothing_when_one_broker_loses_power`: the other replicas hold it.
//!
//! In every case every broker starts again by itself and the cluster serves new records.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e::clients::{self, Delivered, Record};
use e2e::cluster::{Cluster, ClusterSpec};
use e2e::powercut::PowerCut;
use e2e::workload::{self, Writer};
use rdkafka::producer::Producer;

const TOPIC: &str = "power";
const PARTITIONS: i32 = 3;

struct Outcome {
    acked_before: Vec<Delivered>,
    lost: Vec<Delivered>,
}

/// How the records are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Kafka's default: nothing fsynced before an acknowledgement.
    Default,
    /// The whole cluster: `--flush-on-acks-all true` on every broker.
    Durable,
    /// One topic: Kafka's `flush.messages=1` on it (every append fsynced, leader and followers).
    DurableTopic,
}

fn run(mode: Mode, all: bool) -> Outcome {
    let durable = mode == Mode::Durable;
    let shim_dir = tempfile::tempdir().unwrap();
    let power = PowerCut::new(shim_dir.path()).unwrap();
    let mut spec = ClusterSpec::new(3, 3);
    if durable {
        spec = spec.with_args(&["--flush-on-acks-all", "true"]);
    }
    spec.env = power.env();
    let mut cluster = Cluster::start(spec).unwrap();
    let bootstrap = cluster.bootstrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    let mut configs = vec![("min.insync.replicas", "2")];
    if mode == Mode::DurableTopic {
        configs.push(("flush.messages", "1"));
    }
    clients::create_topic_with(&admin, TOPIC, PARTITIONS, 3, &configs).unwrap().unwrap();
    cluster.wait_fully_replicated(&[0, 1, 2], TOPIC, 3, Duration::from_secs(30)).unwrap();

    let writer = Writer::start(&bootstrap, TOPIC, PARTITIONS, 3000).unwrap();
    writer.wait_progress(6000, Duration::from_secs(60)).unwrap();
    // The leader of partition 0 loses power alone, or everyone at once.
    let victims: Vec<i32> =
        if all { vec![0, 1, 2] } else { vec![cluster.partition_of(&[0, 1, 2], TOPIC, 0).unwrap().leader] };
    for id in &victims {
        cluster.broker(*id).kill().unwrap();
    }
    let acked_before = writer.reports().acked;
    let roots: Vec<PathBuf> = victims.iter().map(|id| cluster.brokers[*id as usize].data_dir().to_path_buf()).collect();
    let report = power.cut(&roots.iter().map(PathBuf::as_path).collect::<Vec<_>>()).unwrap();
    println!(
        "power cut of broker(s) {victims:?} ({mode:?} mode): {} records acknowledged before it; {} files cut, {} bytes, {} emptied",
        acked_before.len(),
        report.files.len(),
        report.bytes_cut,
        report.zeroed
    );

    // Every broker starts again by itself (the quorum needs two: spawn all, then wait).
    let started = Instant::now();
    for id in &victims {
        cluster.broker(*id).spawn().unwrap();
    }
    cluster.wait_all_ready(Duration::from_secs(60)).unwrap();
    println!("restarted in {:?}", started.elapsed());

    // The cluster serves: a new producer's records are acknowledged and read back.
    let (producer, log) = clients::tracked_producer(&clients::producer_config(&bootstrap, "all")).unwrap();
    for i in 0..100 {
        let value = format!("after-{i}");
        clients::send_blocking(&producer, Record::with_opaque_to(TOPIC, i).partition((i % 3) as i32).payload(&value))
            .unwrap();
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    assert_eq!(log.acked_count(), 100, "the cluster serves after the power cut");

    let written = writer.stop();
    let read = clients::read_to_end(&bootstrap, TOPIC, Duration::from_secs(60)).unwrap();
    let values: HashSet<&str> = read.iter().map(|r| r.value_str()).collect();
    for i in 0..100 {
        assert!(values.contains(format!("after-{i}").as_str()), "after-{i} is read back");
    }
    let lost: Vec<Delivered> =
        acked_before.iter().filter(|d| !values.contains(workload::value_of(d.id).as_str())).cloned().collect();
    println!("lost {} of the {} records acknowledged before the power cut", lost.len(), acked_before.len());
    match written {
        Ok(written) if lost.is_empty() => {
            // Everything the writer had acknowledged, before and after: exactly once, in order.
            let checked = workload::check_exactly_once_in_order(&written, &read).unwrap();
            println!("writer: {checked:?}");
        }
        Ok(_) => {}
        // After a loss the idempotent producer may be fenced (its sequence numbers are ahead
        // of what the brokers kept): reported, not a failure of its own.
        Err(e) => println!("the writer stopped with: {e:#}"),
    }
    Outcome { acked_before, lost }
}

#[test]
fn durable_mode_keeps_every_acknowledged_record_when_all_brokers_lose_power() {
    let outcome = run(Mode::Durable, true);
    assert!(!outcome.acked_before.is_empty());
    assert!(
        outcome.lost.is_empty(),
        "lost {} acknowledged records, e.g. {:?}",
        outcome.lost.len(),
        &outcome.lost[..outcome.lost.len().min(5)]
    );
}

#[test]
fn a_durable_topic_keeps_every_acknowledged_record_when_all_brokers_lose_power() {
    let outcome = run(Mode::DurableTopic, true);
    assert!(!outcome.acked_before.is_empty());
    assert!(outcome.lost.is_empty(), "lost {} acknowledged records", outcome.lost.len());
}

#[test]
fn durable_mode_keeps_every_acknowledged_record_when_one_broker_loses_power() {
    let outcome = run(Mode::Durable, false);
    assert!(outcome.lost.is_empty(), "lost {} acknowledged records", outcome.lost.len());
}

#[test]
fn default_mode_loses_nothing_when_one_broker_loses_power() {
    let outcome = run(Mode::Default, false);
    assert!(outcome.lost.is_empty(), "lost {} acknowledged records", outcome.lost.len());
}

#[test]
fn default_mode_loses_only_the_unsynced_tail_when_all_brokers_lose_power() {
    let outcome = run(Mode::Default, true);
    let lost: HashSet<usize> = outcome.lost.iter().map(|d| d.id).collect();
    println!(
        "default mode, all brokers lost power: {} of {} acknowledged records lost ({:.1} %)",
        outcome.lost.len(),
        outcome.acked_before.len(),
        100.0 * outcome.lost.len() as f64 / outcome.acked_before.len().max(1) as f64
    );
    // What survives of each partition is a prefix of what was acknowledged there: the lost
    // records are the newest of their partition, what no disk had been told to keep.
    let mut by_partition: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for d in &outcome.acked_before {
        by_partition.entry(d.partition).or_default().push(d.id);
    }
    for (partition, mut ids) in by_partition {
        ids.sort_unstable();
        if let Some(first_lost) = ids.iter().position(|id| lost.contains(id)) {
            let kept_after: Vec<usize> = ids[first_lost..].iter().filter(|id| !lost.contains(id)).copied().collect();
            assert!(
                kept_after.is_empty(),
                "partition {partition}: a hole, records {kept_after:?} kept after lost record {}",
                ids[first_lost]
            );
            println!("partition {partition}: lost its last {} acknowledged records", ids.len() - first_lost);
        }
    }
}
