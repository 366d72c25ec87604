//! What a leader refuses to append from a produce request, and that a refusal leaves the log
//! as it was: a batch whose CRC does not match is CORRUPT_MESSAGE (checked once, before the
//! partition's lock), a record set that is not exactly one whole batch is invalid. And that
//! `/metrics` reads a replica without waiting for its lock.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::{Leadership, Partition, PartitionError};
use crate::config::BrokerConfig;
use crate::log::BatchError;
use crate::metadata::topic_config::TopicConfig;

fn batch(n: usize) -> BytesMut {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1, // consecutive, so the encoder makes one batch
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from(format!("value-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode");
    buf
}

fn leader(dir: &std::path::Path) -> Arc<Partition> {
    let config = TopicConfig::resolve(&BrokerConfig::default(), &BTreeMap::new()).expect("config");
    let partition = Arc::new(Partition::open(dir, "t", 0, uuid::Uuid::from_u128(1), 0, config).expect("open"));
    partition.set_leadership(Leadership {
        is_leader: true,
        leader_epoch: 0,
        leader: 0,
        replicas: vec![0],
        isr: vec![0],
        partition_epoch: 0,
        adding: vec![],
        fenced: vec![],
    });
    partition
}

#[test]
fn a_batch_whose_crc_does_not_match_is_corrupt_and_leaves_the_log_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = leader(dir.path());
    partition.append(&batch(2).freeze(), 1, 1_000).expect("a good batch");
    let mut damaged = batch(3);
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01; // a byte of the last record, covered by the CRC
    let refused = partition.append(&damaged.freeze(), 1, 1_000);
    assert!(
        matches!(refused, Err(PartitionError::CorruptMessage { source: BatchError::CrcMismatch { .. }, .. })),
        "{refused:?}"
    );
    assert_eq!(partition.log_end_offset(), 2, "nothing of the corrupt batch was appended");
    let next = partition.append(&batch(1).freeze(), 1, 1_000).expect("the next good batch");
    assert_eq!(next.base_offset, 2, "offsets go on where the good batches left them");
}

#[test]
fn a_record_set_that_is_not_exactly_one_batch_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = leader(dir.path());
    let mut two = batch(1);
    two.extend_from_slice(&batch(1));
    let refused = partition.append(&two.freeze(), 1, 1_000);
    assert!(matches!(refused, Err(PartitionError::InvalidRecord { .. })), "{refused:?}");
    let one = batch(2);
    let cut = one.len() - 3;
    let refused = partition.append(&one.freeze().slice(..cut), 1, 1_000);
    assert!(matches!(refused, Err(PartitionError::InvalidRecord { .. })), "{refused:?}");
    assert_eq!(partition.log_end_offset(), 0);
}

#[test]
fn a_scrape_never_waits_for_the_partitions_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = leader(dir.path());
    partition.append(&batch(2).freeze(), 1, 1_000).expect("append");
    let before = partition.log_gauges();
    assert_eq!((before.log_start_offset, before.log_end_offset), (0, 2));
    assert!(before.size_bytes > 0);
    // A Produce holding the lock: the gauges come back at once, as last read.
    let held = partition.state.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let p = partition.clone();
    std::thread::spawn(move || tx.send(p.log_gauges()).expect("send"));
    let during = rx.recv_timeout(std::time::Duration::from_secs(5)).expect("log_gauges waited for the lock");
    assert_eq!(during, before);
    drop(held);
    partition.append(&batch(3).freeze(), 1, 1_000).expect("append");
    assert_eq!(partition.log_gauges().log_end_offset, 5);
}
