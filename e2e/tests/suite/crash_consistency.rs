//! Requirements (issue 38, docs/durability.md): a broker always starts again on what a crash
//! left of its files, a cluster started again on its data forms its quorum again, and a
//! broker that cannot reach its quorum backs off.
//!
//! - `each_small_file_empty_torn_or_removed_still_starts_the_broker`: with the broker killed,
//!   each small file it keeps (meta.properties, the metadata log's vote, commit and purge
//!   files, every partition checkpoint, partition.metadata) is emptied, cut in half or
//!   removed in turn; the broker starts, logs the fallback where docs/durability.md says it
//!   does, and serves every record it had.
//! - `strom_dev_killed_and_started_again_serves_its_records_within_30_s`: `strom dev
//!   --brokers 3` and its brokers are SIGKILLed; started again on the same data directory
//!   (the brokers get new internal ports) it serves the records it had within 30 s.
//! - `a_broker_whose_quorum_is_unreachable_backs_off`: a voter whose two peers are gone for
//!   60 s uses under 5 % of a core and writes under 100 log lines a minute.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use e2e::broker::{free_local_addrs, strom_bin, BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::cluster::{Cluster, ClusterSpec};
use rdkafka::producer::Producer;

fn produce(bootstrap: &str, topic: &str, n: usize) -> Vec<String> {
    let (producer, log) = clients::tracked_producer(&clients::producer_config(bootstrap, "all")).unwrap();
    let values: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    for (i, v) in values.iter().enumerate() {
        clients::send_blocking(&producer, Record::with_opaque_to(topic, i).payload(v)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(log.acked_count(), n, "every record acknowledged");
    values
}

fn read_values(bootstrap: &str, topic: &str, n: usize) -> BTreeSet<String> {
    let records = clients::consume_n(bootstrap, topic, n, Duration::from_secs(30)).unwrap();
    records.iter().map(|r| r.value_str().to_string()).collect()
}

/// Every regular file under `dir` whose name is one of `names`.
fn files_named(dir: &Path, names: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files_named(&path, names, out);
        } else if names.iter().any(|n| path.file_name().is_some_and(|f| f == *n)) {
            out.push(path);
        }
    }
}

#[test]
fn each_small_file_empty_torn_or_removed_still_starts_the_broker() {
    // Snapshots every 10 metadata entries, 2 kept below: snapshots and purged.json exist.
    let options = BrokerOptions {
        extra_args: ["--metadata-snapshot-interval-entries", "10", "--metadata-max-retained-entries", "2"]
            .map(String::from)
            .to_vec(),
        ..BrokerOptions::default()
    };
    let mut broker = BrokerProcess::launch(options).unwrap();
    let bootstrap = broker.bootstrap();
    let topic = "small-files";
    clients::create_topic(&bootstrap, topic, 1, &[]).unwrap();
    for i in 0..25 {
        clients::create_topic(&bootstrap, &format!("metadata-entry-{i}"), 1, &[]).unwrap();
    }
    let mut expected: BTreeSet<String> = produce(&bootstrap, topic, 200).into_iter().collect();
    // A clean stop writes every checkpoint; the kill then finds them all in place.
    broker.terminate().unwrap();
    broker.start().unwrap();
    produce(&bootstrap, "small-files-2", 10);
    broker.kill().unwrap();

    // What docs/durability.md lists, with the log lines its fallback writes when the file is
    // empty and when it is removed (None: silent, as documented).
    type Warnings = (&'static str, Option<&'static str>, Option<&'static str>);
    let small: [Warnings; 10] = [
        ("meta.properties", Some("unreadable meta.properties"), None),
        ("vote.json", Some("vote.json is missing"), Some("vote.json is missing")),
        ("committed.json", Some("unreadable metadata log file"), None),
        ("log.checkpoint", Some("unreadable log checkpoint"), None),
        ("high-watermark-checkpoint", None, None),
        ("leader-epoch-checkpoint", None, None),
        ("partition.metadata", None, None),
        ("cleaner.checkpoint", Some("unreadable cleaner checkpoint"), Some("cleaner.checkpoint is missing")),
        ("purged.json", Some("unreadable metadata log file"), None),
        // The newest metadata snapshot: the older one kept beside it takes its place.
        ("newest.snap", Some("unreadable metadata snapshot"), None),
    ];
    let names: Vec<&str> = small.iter().map(|(n, _, _)| *n).collect();
    let mut found = Vec::new();
    files_named(broker.data_dir(), &names, &mut found);
    // The metadata files, and those of one partition (every partition's are alike).
    let one_partition = broker.partition_dir(topic, 0);
    let data_dir = broker.data_dir().to_path_buf();
    found.retain(|p| {
        p.parent().is_some_and(|d| d == data_dir || d.starts_with(data_dir.join("metadata")) || d == one_partition)
    });
    let snapshots = broker.data_dir().join("metadata/snapshots");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&snapshots).unwrap().map(|e| e.unwrap().path()).collect();
    snaps.sort();
    assert_eq!(snaps.len(), 2, "two snapshots kept: {snaps:?}");
    found.push(snaps.pop().unwrap());
    let present: BTreeSet<&str> = found.iter().filter_map(|p| p.file_name()?.to_str()).collect();
    for must in
        ["meta.properties", "vote.json", "committed.json", "purged.json", "log.checkpoint", "cleaner.checkpoint"]
    {
        assert!(present.contains(must), "{must} exists to be damaged: {present:?}");
    }
    let mut round = 0;
    let newest_snapshot = || {
        let mut snaps: Vec<PathBuf> = std::fs::read_dir(&snapshots).unwrap().map(|e| e.unwrap().path()).collect();
        snaps.sort();
        snaps.pop().unwrap()
    };
    for path in &found {
        let mut path = path.clone();
        let mut name = path.file_name().unwrap().to_str().unwrap().to_string();
        let is_snapshot = name.ends_with(".snap");
        if is_snapshot {
            name = "newest.snap".to_string();
        }
        for damage in ["empty", "half", "removed"] {
            if is_snapshot {
                // Restarts build new snapshots: damage whichever is newest now.
                path = newest_snapshot();
            }
            let whole = std::fs::read(&path).unwrap_or_default();
            let path = &path;
            match damage {
                "empty" => std::fs::write(path, b"").unwrap(),
                "half" => std::fs::write(path, &whole[..whole.len() / 2]).unwrap(),
                _ => std::fs::remove_file(path).unwrap(),
            }
            let log_before = std::fs::read_to_string(broker.log_path()).unwrap_or_default().len();
            broker.start().unwrap_or_else(|e| panic!("{} {damage}: the broker starts: {e:#}", path.display()));
            let log = std::fs::read_to_string(broker.log_path()).unwrap_or_default();
            let new_lines = &log[log_before.min(log.len())..];
            let (_, empty, removed) = small.iter().find(|(n, _, _)| *n == name).copied().unwrap();
            let warning = match damage {
                "empty" => empty,
                "removed" => removed,
                _ => None,
            };
            if let Some(warning) = warning {
                assert!(
                    new_lines.contains(warning),
                    "{name} {damage}: the fallback is logged ({warning:?}):\n{new_lines}"
                );
            }
            let value = format!("after-{name}-{damage}");
            let (producer, log) = clients::tracked_producer(&clients::producer_config(&bootstrap, "all")).unwrap();
            clients::send_blocking(&producer, Record::with_opaque_to(topic, round).payload(&value)).unwrap();
            producer.flush(Duration::from_secs(30)).unwrap();
            assert_eq!(log.acked_count(), 1, "{name} {damage}: a new record is acknowledged");
            expected.insert(value);
            let records = clients::read_to_end(&bootstrap, topic, Duration::from_secs(30)).unwrap();
            let read: BTreeSet<String> = records.iter().map(|r| r.value_str().to_string()).collect();
            assert_eq!(read, expected, "{name} {damage}: every record is served after the restart");
            assert_eq!(records.len(), expected.len(), "{name} {damage}: no record twice");
            broker.kill().unwrap();
            // The next damage starts from the file the broker wrote again (or none).
            round += 1;
        }
        println!("{name}: started after each damage ({})", path.display());
    }
}

/// `strom dev`'s stdout lines, read on a thread.
fn dev_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for the ready line of every broker; returns their pids.
fn wait_dev_ready(lines: &mpsc::Receiver<String>, brokers: usize, within: Duration) -> Vec<i32> {
    let deadline = Instant::now() + within;
    let mut pids = Vec::new();
    while pids.len() < brokers {
        let left = deadline.saturating_duration_since(Instant::now());
        let line =
            lines.recv_timeout(left).unwrap_or_else(|_| panic!("{} of {brokers} ready within {within:?}", pids.len()));
        if line.starts_with("broker ") && line.contains(" ready: ") {
            let pid = line.split_whitespace().find_map(|w| w.strip_prefix("pid=")).unwrap().parse().unwrap();
            pids.push(pid);
        }
    }
    pids
}

/// A `strom dev` process and its brokers, all SIGKILLed when dropped (a failing test must not
/// leave a cluster running).
struct Dev {
    child: Child,
    pids: Vec<i32>,
}

impl Drop for Dev {
    fn drop(&mut self) {
        if self.pids.is_empty() {
            // The brokers' pids are not known yet (a failed start): SIGTERM makes `strom dev`
            // stop them itself.
            use nix::sys::signal::{kill, Signal};
            let _ = kill(nix::unistd::Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        kill_all(&mut self.child, &self.pids);
    }
}

fn start_dev(kafka_port: u16, data: &Path) -> Child {
    Command::new(strom_bin().unwrap())
        .args(["dev", "--brokers", "3", "--port", &kafka_port.to_string(), "--data-dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn kill_all(dev: &mut Child, pids: &[i32]) {
    use nix::sys::signal::{kill, Signal};
    let _ = kill(nix::unistd::Pid::from_raw(dev.id() as i32), Signal::SIGKILL);
    for pid in pids {
        let _ = kill(nix::unistd::Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let _ = dev.wait();
    for pid in pids {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            // A zombie of the dead dev process is reaped by init; its stat says Z.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.split_whitespace().nth(2) == Some("Z") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn strom_dev_killed_and_started_again_serves_its_records_within_30_s() {
    // Three consecutive free Kafka ports: dev uses --port, --port+1, --port+2.
    let base = (0..50)
        .find_map(|_| {
            let [a] = free_local_addrs::<1>().ok()?;
            let p = a.port();
            let free = (1..3).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok());
            (p < 65000 && free).then_some(p)
        })
        .expect("three free ports in a row");
    let data = tempfile::tempdir().unwrap();
    let mut dev = Dev { child: start_dev(base, data.path()), pids: Vec::new() };
    let lines = dev_lines(&mut dev.child);
    dev.pids = wait_dev_ready(&lines, 3, Duration::from_secs(120));
    let bootstrap = format!("127.0.0.1:{base}");
    let topic = "dev-restart";
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, topic, 3, 3, &[("min.insync.replicas", "2")]).unwrap().unwrap();
    let written = produce(&bootstrap, topic, 3000);
    drop(dev);

    let started = Instant::now();
    let mut dev = Dev { child: start_dev(base, data.path()), pids: Vec::new() };
    let lines = dev_lines(&mut dev.child);
    dev.pids = wait_dev_ready(&lines, 3, Duration::from_secs(30));
    let read = read_values(&bootstrap, topic, written.len());
    let took = started.elapsed();
    println!(
        "strom dev --brokers 3 killed and started again: its {} records read back {took:?} after the start",
        read.len()
    );
    assert_eq!(read, written.iter().cloned().collect::<BTreeSet<_>>());
    assert!(took < Duration::from_secs(30), "served within 30 s, took {took:?}");
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from after the command name (field 3 is index 0).
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn a_broker_whose_quorum_is_unreachable_backs_off() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).unwrap();
    let bootstrap = cluster.bootstrap();
    clients::create_topic(&bootstrap, "backoff", 3, &[]).unwrap();
    produce(&bootstrap, "backoff", 100);
    // The survivor is not the active controller: it keeps calling elections it cannot win
    // (the busier case; a leader left alone only keeps retrying replication).
    let controller = cluster.agreed_controller(Duration::from_secs(30)).unwrap();
    let survivor_id = (0..3).find(|id| *id != controller).unwrap();
    for id in (0..3).filter(|id| *id != survivor_id) {
        cluster.broker(id).kill().unwrap();
    }
    let survivor = cluster.broker(survivor_id);
    // Let the first reactions (elections, fencing attempts) pass, then measure a minute.
    std::thread::sleep(Duration::from_secs(5));
    let pid = survivor.pid().unwrap();
    let ticks_before = cpu_ticks(pid);
    let lines_before = std::fs::read_to_string(survivor.log_path()).unwrap().lines().count();
    let window = Duration::from_secs(60);
    std::thread::sleep(window);
    let ticks = cpu_ticks(pid) - ticks_before;
    let log = std::fs::read_to_string(survivor.log_path()).unwrap();
    let lines: Vec<&str> = log.lines().skip(lines_before).collect();
    // SC_CLK_TCK is 100 on Linux.
    let cpu = ticks as f64 / 100.0 / window.as_secs_f64();
    println!("a voter alone for 60 s: {:.2} % of a core, {} log lines", cpu * 100.0, lines.len());
    let sample: Vec<&str> = lines.iter().take(40).copied().collect();
    println!("{}", sample.join("\n"));
    assert!(cpu < 0.05, "under 5 % of a core: {:.2} %", cpu * 100.0);
    assert!(lines.len() < 100, "under 100 log lines a minute, {}:\n{}", lines.len(), sample.join("\n"));
    assert!(survivor.is_running());
}
