//! A full disk (issue 34, S10, on one broker): the broker's data directory is a 24 MiB tmpfs
//! with a free-space floor of 12 MiB (`--log-dir-min-free-bytes`). Once a filler file leaves
//! less than that, produce requests are refused with KAFKA_STORAGE_ERROR (never acknowledged
//! and then lost) while the broker keeps running, its metadata log keeps room, and reads of
//! everything acknowledged go on; once the space is freed it accepts writes again, and after
//! a restart the log holds exactly what was acknowledged.
//!
//! Not yet here: a cluster where leadership moves off the full broker (docs/reliability.md).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::cluster::wait_until;
use e2e::disk::SmallDisk;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;

const TOPIC: &str = "full";
const VALUE_BYTES: usize = 4096;
const TIMEOUT: Duration = Duration::from_secs(30);

fn value(id: usize) -> String {
    format!("{id:08}{}", "v".repeat(VALUE_BYTES - 8))
}

/// Sends records `from..` one at a time, acks=all, no retries (so a refusal is reported with
/// the broker's own error), until one fails or `limit` were sent. Returns the ids acknowledged
/// and the first error.
fn produce_until_refused(bootstrap: &str, from: usize, limit: usize) -> (Vec<usize>, Option<KafkaError>) {
    let mut config = clients::producer_config(bootstrap, "all");
    config.set("retries", "0").set("linger.ms", "0").set("message.timeout.ms", "20000");
    let (producer, log) = clients::tracked_producer(&config).unwrap();
    for id in from..from + limit {
        let v = value(id);
        clients::send_blocking(&producer, Record::with_opaque_to(TOPIC, id).partition(0).payload(&v)).unwrap();
        producer.flush(TIMEOUT).unwrap();
        if log.failed_count() > 0 {
            break;
        }
    }
    let reports = log.snapshot();
    (reports.acked.iter().map(|d| d.id).collect(), reports.failed.first().map(|f| f.error.clone()))
}

fn read_ids(bootstrap: &str) -> Vec<usize> {
    let records = clients::read_to_end(bootstrap, TOPIC, TIMEOUT).unwrap();
    records.iter().map(|r| r.value_str()[..8].parse().unwrap()).collect()
}

#[test]
fn a_full_disk_refuses_writes_with_kafka_storage_error_keeps_serving_reads_and_recovers() {
    let options = BrokerOptions {
        log_segment_bytes: Some(1 << 20),
        extra_args: vec!["--log-dir-min-free-bytes".into(), (12u64 << 20).to_string()],
        ..BrokerOptions::default()
    };
    let mut broker = BrokerProcess::new(options).unwrap();
    let disk = SmallDisk::mount(broker.data_dir(), 24 << 20).unwrap();
    broker.start().unwrap();
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, TOPIC, 1, &[]).unwrap();

    let (mut acked, error) = produce_until_refused(&bootstrap, 0, 300);
    assert!(error.is_none() && acked.len() == 300, "before the disk fills: {error:?}");

    // 8 MiB left, under the floor: the broker's next check (within a second) refuses
    // produce. What lands meanwhile (at most a few MiB) still fits, so the metadata log
    // keeps room for what the readers below create (__consumer_offsets).
    disk.fill_leaving(8 << 20).unwrap();
    let (more, error) = produce_until_refused(&bootstrap, 300, 2000);
    acked.extend(&more);
    // The floor is read once a second: what is produced meanwhile still lands.
    let error = error.expect("a full disk must refuse a write within 2000 records of 4 KiB");
    assert_eq!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::KafkaStorageError),
        "refused with {error} after {} more records",
        more.len()
    );
    assert!(broker.is_running(), "the broker died of a full disk:\n{}", broker.log_tail(30));
    assert_eq!(read_ids(&bootstrap), acked, "reads while the disk is full");

    std::fs::remove_file(broker.data_dir().join("filler")).unwrap();
    // A producer that retries (librdkafka's default) gets through once the broker's next
    // check of the free space lets writes in.
    let after: Vec<usize> = (10_000..10_050).collect();
    let records: Vec<(i32, String)> = after.iter().map(|&id| (0, value(id))).collect();
    clients::produce_to_partitions(&bootstrap, TOPIC, &records).expect("writes once space is free again");
    acked.extend(&after);
    assert_eq!(read_ids(&bootstrap), acked);

    broker.terminate().unwrap();
    broker.start().unwrap();
    assert_eq!(read_ids(&broker.bootstrap()), acked, "after a restart");
    broker.terminate().unwrap();
    drop(disk);
}

/// With no floor, a full disk reaches the metadata log: openraft stops its core on ENOSPC, and
/// the broker exits (status 70, the reason in its log) rather than live on without metadata.
/// Started again once space is freed, it serves everything it had acknowledged.
#[test]
fn a_metadata_log_that_cannot_be_written_ends_the_broker_and_a_restart_recovers() {
    let options =
        BrokerOptions { extra_args: vec!["--log-dir-min-free-bytes".into(), "0".into()], ..BrokerOptions::default() };
    let mut broker = BrokerProcess::new(options).unwrap();
    let disk = SmallDisk::mount(broker.data_dir(), 24 << 20).unwrap();
    broker.start().unwrap();
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, TOPIC, 1, &[]).unwrap();
    let (acked, error) = produce_until_refused(&bootstrap, 0, 100);
    assert!(error.is_none() && acked.len() == 100);

    disk.fill_leaving(0).unwrap();
    // A metadata write: creating a topic appends to the metadata log.
    let _ = clients::create_topic(&bootstrap, "one-more", 1, &[]);
    let status = wait_until(Duration::from_secs(60), || {
        broker.try_exit_status()?.ok_or_else(|| anyhow::anyhow!("still running"))
    })
    .unwrap();
    assert_eq!(status.code(), Some(70), "exit status; log:\n{}", broker.log_tail(20));
    assert!(broker.log_tail(50).contains("the metadata quorum member stopped for good"), "{}", broker.log_tail(50));

    std::fs::remove_file(broker.data_dir().join("filler")).unwrap();
    broker.start().unwrap();
    assert_eq!(read_ids(&broker.bootstrap()), acked, "after the restart");
    broker.terminate().unwrap();
    drop(disk);
}
