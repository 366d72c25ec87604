//! A disk that fails its fsyncs (issue 34): the e2e shim (`STROM_SHIM_FAIL_SYNC`) makes every
//! fsync of a partition's files return EIO while a trigger file exists. In durable mode
//! (`--flush-on-acks-all`) each acks=all produce waits for an fsync, so the first one after
//! the disk breaks fails. The broker must not acknowledge that record and must not go on (a
//! later fsync that succeeds proves nothing: the kernel may have dropped the pages). It exits
//! with status 70 naming the file; started again with the disk mended, it serves every record
//! it acknowledged, in order.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::cluster::wait_until;
use rdkafka::producer::Producer;

const TOPIC: &str = "failing";
const TIMEOUT: Duration = Duration::from_secs(30);

/// Sends ids `from..from + count` one at a time, acks=all, no retries, stopping at the first
/// that fails; returns the ids acknowledged.
fn produce(bootstrap: &str, from: usize, count: usize) -> Vec<usize> {
    let mut config = clients::producer_config(bootstrap, "all");
    config.set("retries", "0").set("linger.ms", "0").set("message.timeout.ms", "10000");
    let (producer, log) = clients::tracked_producer(&config).unwrap();
    for id in from..from + count {
        let value = format!("{id:08}");
        clients::send_blocking(&producer, Record::with_opaque_to(TOPIC, id).partition(0).payload(&value)).unwrap();
        let _ = producer.flush(TIMEOUT);
        if log.failed_count() > 0 {
            break;
        }
    }
    log.snapshot().acked.iter().map(|d| d.id).collect()
}

#[test]
fn a_failed_fsync_is_never_acknowledged_ends_the_broker_and_a_restart_serves_every_acknowledged_record() {
    let state = tempfile::tempdir().unwrap();
    let trigger = state.path().join("fail-syncs");
    let options = BrokerOptions {
        extra_args: vec!["--flush-on-acks-all".into(), "true".into()],
        env: vec![
            ("LD_PRELOAD".into(), e2e::powercut::shim_path().unwrap().to_string_lossy().into_owned()),
            ("STROM_SHIM_FAIL_SYNC".into(), trigger.to_string_lossy().into_owned()),
        ],
        ..BrokerOptions::default()
    };
    let mut broker = BrokerProcess::new(options).unwrap();
    broker.start().unwrap();
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, TOPIC, 1, &[]).unwrap();
    let mut acked = produce(&bootstrap, 0, 200);
    assert_eq!(acked.len(), 200, "before the disk fails");

    // The partition's files stop syncing (the metadata log's still do).
    let partition = std::fs::canonicalize(broker.partition_dir(TOPIC, 0)).unwrap();
    std::fs::write(&trigger, partition.as_os_str().as_encoded_bytes()).unwrap();
    acked.extend(produce(&bootstrap, 200, 50));
    assert_eq!(acked.len(), 200, "a record whose fsync failed was acknowledged");
    let status =
        wait_until(TIMEOUT, || broker.try_exit_status()?.ok_or_else(|| anyhow::anyhow!("still running"))).unwrap();
    assert_eq!(status.code(), Some(70), "exit status; log:\n{}", broker.log_tail(20));
    assert!(broker.log_tail(50).contains("an fsync of log data failed"), "{}", broker.log_tail(50));

    std::fs::remove_file(&trigger).unwrap();
    broker.start().unwrap();
    let read: Vec<usize> = clients::read_to_end(&broker.bootstrap(), TOPIC, TIMEOUT)
        .unwrap()
        .iter()
        .map(|r| r.value_str().parse().unwrap())
        .collect();
    // The record whose fsync failed may be there (its bytes were written) but nothing else.
    assert_eq!(read[..acked.len()], acked[..], "every acknowledged record, in order");
    assert!(read.len() <= acked.len() + 1, "{} records read, {} acknowledged", read.len(), acked.len());
    acked.extend(produce(&broker.bootstrap(), 1000, 10));
    assert_eq!(acked.len(), 210, "the restarted broker takes writes");
    broker.terminate().unwrap();
}
