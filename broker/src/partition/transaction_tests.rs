//! Transactions on a real log: the last stable offset held at the first open transaction,
//! markers ending them, read_committed reads told of aborted transactions, the state rebuilt
//! the same when the replica reopens, and fenced markers refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::transactional::Isolation;
use super::transactions::{AbortedTxn, Marker, MarkerType};
use super::{Leadership, Partition, PartitionError};
use crate::config::BrokerConfig;
use crate::metadata::topic_config::TopicConfig;

const COMMIT: Marker = Marker { kind: MarkerType::Commit, coordinator_epoch: 0 };
const ABORT: Marker = Marker { kind: MarkerType::Abort, coordinator_epoch: 0 };

/// A transactional batch of `n` records of `producer_id` (epoch 0) from `sequence`.
fn txn_batch(producer_id: i64, sequence: i32, n: usize) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: sequence + i as i32,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from(format!("p{producer_id}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode");
    buf.freeze()
}

fn open(dir: &std::path::Path) -> Arc<Partition> {
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
    partition.accept_transactions(true);
    partition
}

#[test]
fn transactional_batches_are_refused_until_transactions_are_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = open(dir.path());
    partition.accept_transactions(false);
    let refused = partition.append(&txn_batch(5, 0, 2), -1, 1_000);
    assert!(matches!(refused, Err(PartitionError::InvalidRecord { .. })), "{refused:?}");
    assert_eq!(partition.log_end_offset(), 0);
}

#[test]
fn read_committed_stops_at_the_first_open_transaction_and_learns_of_aborts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = open(dir.path());
    // Producer 5: offsets 0-1, producer 6: 2-4, producer 5 again: 5.
    partition.append(&txn_batch(5, 0, 2), -1, 1_000).expect("append");
    partition.append(&txn_batch(6, 0, 3), -1, 1_000).expect("append");
    partition.append(&txn_batch(5, 2, 1), -1, 1_000).expect("append");
    assert_eq!(partition.high_watermark(), 6);
    assert_eq!(partition.last_stable_offset(), 0);
    assert_eq!(partition.open_transactions(), 2);
    let nothing = partition.read_slice(0, 1 << 20, true, Isolation::ReadCommitted).expect("read");
    assert!(nothing.slice.is_none_or(|s| s.len == 0), "nothing below the LSO yet");
    let everything = partition.read_slice(0, 1 << 20, true, Isolation::ReadUncommitted).expect("read");
    assert!(everything.slice.is_some_and(|s| s.len > 0));

    // Producer 5 aborts (marker at 6): the LSO moves to producer 6's first offset.
    assert_eq!(partition.write_marker(5, 0, ABORT, 2_000).expect("marker"), 6);
    assert_eq!(partition.last_stable_offset(), 2);
    let read = partition.read_slice(0, 1 << 20, true, Isolation::ReadCommitted).expect("read");
    assert_eq!(read.stability.last_stable_offset, 2);
    let aborted = AbortedTxn { producer_id: 5, first_offset: 0, last_offset: 6 };
    assert_eq!(read.stability.aborted, vec![aborted]);
    // Producer 6 commits (marker at 7): everything is stable.
    assert_eq!(partition.write_marker(6, 0, COMMIT, 2_000).expect("marker"), 7);
    assert_eq!(partition.last_stable_offset(), 8);
    assert_eq!(partition.open_transactions(), 0);

    // Reopened, the replica rebuilds the same state from its log.
    drop(partition);
    let reopened = open(dir.path());
    assert_eq!(reopened.open_transactions(), 0);
    let read = reopened.read_slice(0, 1 << 20, true, Isolation::ReadCommitted).expect("read");
    assert_eq!(read.stability.aborted, vec![aborted]);
    // An open transaction survives the reopen too.
    reopened.append(&txn_batch(7, 0, 1), -1, 1_000).expect("append");
    drop(reopened);
    let again = open(dir.path());
    assert_eq!(again.open_transactions(), 1);
    assert_eq!(again.last_stable_offset(), 8, "producer 7's transaction opens at 8");
}

#[test]
fn markers_from_a_fenced_producer_epoch_or_an_older_coordinator_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partition = open(dir.path());
    partition.append(&txn_batch(5, 0, 1), -1, 1_000).expect("append");
    // The coordinator bumped the epoch to 1 (a new producer instance) and aborted.
    let newer = Marker { kind: MarkerType::Abort, coordinator_epoch: 4 };
    partition.write_marker(5, 1, newer, 2_000).expect("abort in epoch 1");
    // The zombie's epoch 0 is fenced, for markers and for data.
    assert!(matches!(partition.write_marker(5, 0, COMMIT, 2_000), Err(PartitionError::Sequence { .. })));
    assert!(matches!(partition.append(&txn_batch(5, 1, 1), -1, 1_000), Err(PartitionError::Sequence { .. })));
    // A coordinator older than epoch 4 is fenced.
    let stale = Marker { kind: MarkerType::Commit, coordinator_epoch: 3 };
    assert!(matches!(partition.write_marker(5, 1, stale, 2_000), Err(PartitionError::MarkerFenced { .. })));
    assert_eq!(partition.last_stable_offset(), partition.high_watermark());
}

#[test]
fn a_follower_keeps_the_same_transactions_from_what_it_fetches() {
    let (dl, df) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let leader = open(dl.path());
    // Broker 1 follows, out of the ISR: the leader's high watermark does not wait for it.
    leader.set_leadership(Leadership { replicas: vec![0, 1], ..leader.leadership() });
    let config = TopicConfig::resolve(&BrokerConfig::default(), &BTreeMap::new()).expect("config");
    let follower = Arc::new(Partition::open(df.path(), "t", 0, uuid::Uuid::from_u128(1), 1, config).expect("open"));
    let follow = Leadership { is_leader: false, leader: 0, replicas: vec![0, 1], ..leader.leadership() };
    follower.set_leadership(follow);
    leader.append(&txn_batch(5, 0, 2), -1, 1_000).expect("append");
    leader.append(&txn_batch(6, 0, 1), -1, 1_000).expect("append");
    leader.write_marker(5, 0, ABORT, 2_000).expect("marker");
    let (fetch_offset, last_fetched_epoch) = follower.fetch_position();
    let read = leader
        .serve_replica_fetch(super::replication::ReplicaFetch {
            replica: 1,
            current_leader_epoch: 0,
            fetch_offset,
            last_fetched_epoch,
            max_bytes: 1 << 20,
        })
        .expect("fetch");
    follower
        .append_from_leader(0, &read.records.unwrap_or_default(), read.high_watermark, read.log_start_offset, false)
        .expect("append");
    assert_eq!(follower.log_end_offset(), 4);
    assert_eq!(follower.open_transactions(), 1, "producer 6's");
    let seen = follower.read_slice(0, 1 << 20, true, Isolation::ReadCommitted).expect("read");
    assert_eq!(seen.stability.aborted, vec![AbortedTxn { producer_id: 5, first_offset: 0, last_offset: 3 }]);
    assert_eq!(seen.stability.last_stable_offset, 2);
}
