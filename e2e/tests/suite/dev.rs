//! Requirements (issue 2 "Done when", issue 4): the README's `strom dev` starts a broker that any Kafka
//! client can use — it prints one line per broker with its addresses, serves Kafka on
//! 127.0.0.1:P, and stops cleanly (exit 0, its broker gone) on SIGTERM, as on Ctrl-C.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use e2e::broker::{free_local_addrs, strom_bin};
use e2e::clients::{self, Record};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rdkafka::producer::Producer;

#[test]
fn strom_dev_prints_its_broker_serves_kafka_clients_and_stops_on_sigterm() {
    let [kafka] = free_local_addrs::<1>().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut dev = Command::new(strom_bin().unwrap())
        .args(["dev", "--port", &kafka.port().to_string(), "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strom dev");

    // Read its stdout on a thread so the test can wait with a deadline.
    let (lines_tx, lines) = mpsc::channel::<String>();
    let stdout = dev.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let ready = loop {
        let line = lines.recv_timeout(Duration::from_secs(60)).expect("strom dev printed no ready line within 60 s");
        if line.starts_with("broker 0 ready:") {
            break line;
        }
    };
    assert!(ready.contains(&format!("kafka={kafka}")), "ready line names the Kafka address: {ready}");
    assert!(ready.contains("http=http://127.0.0.1:"), "ready line names the HTTP address: {ready}");
    let broker_pid: i32 = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("ready line names the broker's pid: {ready}"));

    let bootstrap = kafka.to_string();
    clients::create_topic(&bootstrap, "dev-demo", 1, &[]).unwrap();
    let (producer, log) = clients::tracked_producer(&clients::producer_config(&bootstrap, "all")).unwrap();
    for i in 0..100 {
        let value = format!("v{i}");
        clients::send_blocking(&producer, Record::with_opaque_to("dev-demo", i).payload(&value)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(log.acked_count(), 100);
    drop(producer);
    let records = clients::read_to_end(&bootstrap, "dev-demo", Duration::from_secs(30)).unwrap();
    assert_eq!(records.len(), 100, "records read back through strom dev's broker");

    kill(Pid::from_raw(i32::try_from(dev.id()).unwrap()), Signal::SIGTERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = dev.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "strom dev did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "strom dev exit status on SIGTERM");
    // Its broker child is gone too (signal 0 only checks existence).
    assert!(kill(Pid::from_raw(broker_pid), None).is_err(), "broker pid {broker_pid} still running");
}

/// `count` consecutive free loopback ports (strom dev gives broker i port P+i).
fn consecutive_free_ports(count: u16) -> u16 {
    for _ in 0..50 {
        let [first] = free_local_addrs::<1>().unwrap();
        let base = first.port();
        if base.checked_add(count).is_none() {
            continue;
        }
        let all_free = (0..count).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no {count} consecutive free ports found");
}

/// The command line of a running process, from /proc.
fn cmdline(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

#[test]
fn strom_dev_runs_three_brokers_as_processes_reports_one_that_exits_and_keeps_the_others() {
    let port = consecutive_free_ports(3);
    let data = tempfile::tempdir().unwrap();
    let mut dev = Command::new(strom_bin().unwrap())
        .args(["dev", "--brokers", "3", "--port", &port.to_string(), "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strom dev --brokers 3");
    let (lines_tx, lines) = mpsc::channel::<String>();
    let stdout = dev.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut pids = Vec::new();
    while pids.len() < 3 {
        let line = lines.recv_timeout(Duration::from_secs(90)).expect("strom dev printed every broker within 90 s");
        if let Some(rest) = line.strip_prefix(&format!("broker {} ready:", pids.len())) {
            let kafka = format!("kafka=127.0.0.1:{}", port + u16::try_from(pids.len()).unwrap());
            assert!(rest.contains(&kafka), "broker {} serves Kafka on P+i: {line}", pids.len());
            assert!(rest.contains("internal=127.0.0.1:") && rest.contains("data="), "addresses and data dir: {line}");
            let pid: i32 = rest.split_whitespace().find_map(|w| w.strip_prefix("pid=")).unwrap().parse().unwrap();
            pids.push(pid);
        }
    }
    for (id, pid) in pids.iter().enumerate() {
        let args = cmdline(*pid);
        let at = args.iter().position(|a| a == "--node-id").expect("--node-id on the command line");
        assert_eq!(args[at + 1], id.to_string(), "ps shows which broker pid {pid} is: {args:?}");
        assert!(args.iter().any(|a| a == "--voters"), "the voters are on the command line: {args:?}");
    }

    let bootstrap = (0..3).map(|i| format!("127.0.0.1:{}", port + i)).collect::<Vec<_>>().join(",");
    clients::create_topic(&bootstrap, "dev-cluster", 6, &[]).unwrap();
    let records: Vec<(i32, String)> = (0..6).map(|p| (p, format!("v{p}"))).collect();
    clients::produce_to_partitions(&bootstrap, "dev-cluster", &records).unwrap();

    // Kill broker 2: strom dev says so and keeps the others; started again by hand with the
    // same command line, it rejoins.
    let line2 = cmdline(pids[2]);
    kill(Pid::from_raw(pids[2]), Signal::SIGKILL).unwrap();
    let exited = loop {
        let line = lines.recv_timeout(Duration::from_secs(30)).expect("strom dev reported the exit");
        if line.starts_with("broker 2 exited") {
            break line;
        }
    };
    assert!(exited.contains("the others keep running"), "{exited}");
    assert!(kill(Pid::from_raw(pids[0]), None).is_ok() && kill(Pid::from_raw(pids[1]), None).is_ok());
    let mut again =
        Command::new(&line2[0]).args(&line2[1..]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let b0 = format!("127.0.0.1:{port}").parse().unwrap();
    e2e::cluster::wait_until(Duration::from_secs(60), || {
        let view = e2e::cluster::metadata_view(b0, None)?;
        anyhow::ensure!(view.brokers.contains_key(&2), "broker 2 not listed: {:?}", view.brokers);
        anyhow::ensure!(view.leaders().contains_key(&2), "broker 2 leads nothing yet");
        Ok(())
    })
    .expect("broker 2 started by hand rejoins the cluster");
    // Its new process serves its partitions once it has registered and been unfenced.
    let read = clients::eventually(Duration::from_secs(60), || {
        clients::read_to_end(&bootstrap, "dev-cluster", Duration::from_secs(10))
    })
    .unwrap();
    assert_eq!(read.len(), 6, "every record is served, broker 2's too");
    let _ = again.kill();
    let _ = again.wait();

    kill(Pid::from_raw(i32::try_from(dev.id()).unwrap()), Signal::SIGTERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = dev.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "strom dev did not stop within 60 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "strom dev exit status on SIGTERM");
    for pid in &pids[..2] {
        assert!(kill(Pid::from_raw(*pid), None).is_err(), "broker pid {pid} still running");
    }
}
