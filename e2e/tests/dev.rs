//! Requirement (issue 2, "Done when"): the README's `strom dev` starts a broker that any Kafka
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
