//! The benchmark's own parts, against a real `strom serve`: [`BatchReader`] (librdkafka's
//! batch consume call behind the load generator's consume loop) hands over every record once,
//! at its offset, with its key and value; and `strom-load produce` then `consume` report the
//! records they sent and read; `strom-load cpu-handoff`, the machine probe the benchmark records
//! before every run, reports a round trip or a clear error. The benchmark figures are only as
//! true as these.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::batch_consume::{BatchReader, Delivered};
use e2e::broker::BrokerProcess;
use e2e::clients;
use e2e::process::run_to_end;
use rdkafka::Offset;

#[test]
fn batch_reader_returns_every_record_once_at_its_offset() {
    let broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    let topic = "batch-reader";
    clients::create_topic(&bootstrap, topic, 3, &[]).expect("create topic");
    let sent: Vec<(i32, String)> = (0..1_000).map(|i| (i % 3, format!("record-{i:04}"))).collect();
    let delivered = clients::produce_to_partitions(&bootstrap, topic, &sent).expect("produce");
    // What each partition must hold, offset by offset.
    let mut expected: BTreeMap<(i32, i64), String> = BTreeMap::new();
    for (d, (_, value)) in delivered.iter().zip(&sent) {
        expected.insert((d.partition, d.offset), value.clone());
    }

    let consumer = clients::assigned_consumer(&bootstrap, topic, &[0, 1, 2], Offset::Beginning).expect("consumer");
    // A small batch, so that one read never holds everything and batches span partitions.
    let mut reader = BatchReader::new(&consumer, 7).expect("batch reader");
    let mut read: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut next_offset: BTreeMap<i32, i64> = BTreeMap::new();
    let mut problems = Vec::new();
    let (mut largest_batch, deadline) = (0, Instant::now() + Duration::from_secs(60));
    while read.len() < expected.len() && Instant::now() < deadline {
        let n = reader
            .read(7, Duration::from_millis(100), |message| match message {
                Delivered::Record { partition, offset, key, value } => {
                    let value = String::from_utf8_lossy(value.unwrap_or_default()).into_owned();
                    if key.map(<[u8]>::to_vec) != Some(value.clone().into_bytes()) {
                        problems.push(format!("{partition}@{offset}: key {key:?} is not the value {value}"));
                    }
                    let next = next_offset.entry(partition).or_insert(offset);
                    if offset != *next {
                        problems.push(format!("{partition}@{offset}: expected offset {next} next"));
                    }
                    *next = offset + 1;
                    if read.insert((partition, offset), value).is_some() {
                        problems.push(format!("{partition}@{offset} handed over twice"));
                    }
                }
                Delivered::Error(code) => problems.push(format!("consume error {code}")),
            })
            .expect("read a batch");
        largest_batch = largest_batch.max(n);
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(read, expected, "records read differ from records produced");
    assert_eq!(largest_batch, 7, "no read filled its batch of 7 although 1,000 records were waiting");
    // Nothing more arrives, and an empty read says so.
    let waited = Instant::now();
    let n = reader.read(7, Duration::from_millis(300), |m| panic!("unexpected message {m:?}")).expect("empty read");
    assert_eq!(n, 0);
    assert!(waited.elapsed() >= Duration::from_millis(250), "an empty read returned before its timeout");
}

#[test]
fn strom_load_reports_the_records_it_produced_and_consumed() {
    let broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    let load = |args: &[&str]| -> serde_json::Value {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strom-load"));
        cmd.args(args).args(["--bootstrap", &bootstrap, "--topic", "load"]);
        let out = run_to_end(cmd, "strom-load", Duration::from_secs(120)).expect("run strom-load");
        assert_eq!(out.code, 0, "strom-load {args:?} failed: {}\n{}", out.stdout, out.stderr);
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("not one JSON line ({e}): {}", out.stdout))
    };
    let produced =
        load(&["produce", "--records", "20000", "--record-size", "100", "--partitions", "4", "--acks", "all"]);
    assert_eq!(produced["records"], 20_000, "{produced}");
    assert_eq!(produced["bytes"], 2_000_000, "{produced}");
    assert_eq!(produced["errors"], 0, "{produced}");
    assert!(produced["latency_ms"]["p99"].as_f64().is_some_and(|p| p > 0.0), "{produced}");
    let total: i64 = (0..4).map(|p| clients::watermarks(&bootstrap, "load", p).expect("watermarks").1).sum();
    assert_eq!(total, 20_000, "the topic holds another number of records than were acknowledged");

    let consumed = load(&["consume", "--records", "20000", "--idle-timeout-secs", "20"]);
    assert_eq!(consumed["records"], 20_000, "{consumed}");
    assert_eq!(consumed["bytes"], 2_000_000, "{consumed}");
    assert_eq!(consumed["errors"], 0, "{consumed}");
    assert!(consumed["mb_per_sec"].as_f64().is_some_and(|r| r > 0.0), "{consumed}");

    // Asking for more than the topic holds ends at the idle timeout with exit code 1.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strom-load"));
    cmd.args([
        "consume",
        "--records",
        "20001",
        "--idle-timeout-secs",
        "2",
        "--bootstrap",
        &bootstrap,
        "--topic",
        "load",
    ]);
    let out = run_to_end(cmd, "strom-load", Duration::from_secs(60)).expect("run strom-load");
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("stopping at 20000 of 20001"), "{}", out.stderr);
}

#[test]
fn strom_load_cpu_handoff_reports_a_round_trip_or_a_clear_error() {
    let run = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strom-load"));
        cmd.arg("cpu-handoff").args(args);
        run_to_end(cmd, "strom-load", Duration::from_secs(60)).expect("run strom-load")
    };
    // Two CPUs this process may use (a cpuset may allow others than 0 and 1).
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("affinity");
    let cpus: Vec<usize> =
        (0..nix::sched::CpuSet::count()).filter(|&cpu| allowed.is_set(cpu).unwrap_or(false)).take(2).collect();
    if cpus.len() == 2 {
        let (first, second) = (cpus[0].to_string(), cpus[1].to_string());
        let out = run(&["--first", &first, "--second", &second, "--round-trips", "5000"]);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let line: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON line");
        assert_eq!(line["mode"], "cpu-handoff", "{line}");
        assert_eq!(line["cpus"], serde_json::json!([cpus[0], cpus[1]]), "{line}");
        assert_eq!(line["round_trips"], 5000, "{line}");
        assert!(line["round_trip_ns"].as_f64().is_some_and(|ns| ns > 0.0), "{line}");
    }
    let same = run(&["--first", "0", "--second", "0"]);
    assert_eq!(same.code, 2, "{}", same.stdout);
    assert!(same.stderr.contains("two different CPUs"), "{}", same.stderr);
    assert!(same.stdout.is_empty(), "no figure on an error: {}", same.stdout);
}
