//! `__transaction_state` records in Kafka's formats (`TransactionLogKey` and
//! `TransactionLogValue`, version 0), so that the topic reads as Kafka's does:
//!
//! - key: `version i16 (0) | transactional_id string`
//! - value: `version i16 (0) | producer_id i64 | producer_epoch i16 | timeout_ms i32 |
//!   state i8 | partitions [topic string, partitions [i32]] | last_update_ms i64 |
//!   start_ms i64`; a null value (a tombstone) removes an expired id.
//!
//! A transactional id lives on partition `abs(javaHashCode(id)) % partitions`, as in Kafka.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnState};
use crate::internal_records::{get_i16, get_i32, get_i64, get_str, put_str, FieldError};

/// A record that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __transaction_state record: {0}")]
pub struct RecordError(pub String);

impl From<FieldError> for RecordError {
    fn from(e: FieldError) -> RecordError {
        RecordError(e.0)
    }
}

/// The partition of `__transaction_state` that holds `transactional_id`.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::records::partition_for(transactional_id, partitions)
}

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(0);
    put_str(&mut buf, transactional_id);
    buf.freeze()
}

pub fn decode_key(mut key: Bytes) -> Result<String, RecordError> {
    let version = get_i16(&mut key, "key version")?;
    if version != 0 {
        return Err(RecordError(format!("key version {version}")));
    }
    Ok(get_str(&mut key, "transactional id")?)
}

pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in &m.partitions {
        by_topic.entry(topic.as_str()).or_default().push(*partition);
    }
    let mut buf = BytesMut::with_capacity(64 + m.partitions.len() * 8);
    buf.put_i16(0);
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_i8(m.state.id());
    buf.put_i32(i32::try_from(by_topic.len()).unwrap_or(i32::MAX));
    for (topic, partitions) in by_topic {
        put_str(&mut buf, topic);
        buf.put_i32(i32::try_from(partitions.len()).unwrap_or(i32::MAX));
        for p in partitions {
            buf.put_i32(p);
        }
    }
    buf.put_i64(m.last_update_ms);
    buf.put_i64(m.start_ms);
    buf.freeze()
}

pub fn decode_value(transactional_id: &str, mut value: Bytes) -> Result<TxnMetadata, RecordError> {
    let version = get_i16(&mut value, "value version")?;
    if version != 0 {
        return Err(RecordError(format!("value version {version}")));
    }
    let producer_id = get_i64(&mut value, "producer id")?;
    let producer_epoch = get_i16(&mut value, "producer epoch")?;
    let timeout_ms = get_i32(&mut value, "timeout")?;
    if value.remaining() < 1 {
        return Err(RecordError("truncated state".into()));
    }
    let state_id = value.get_i8();
    let state = TxnState::from_id(state_id).ok_or_else(|| RecordError(format!("state {state_id}")))?;
    let topics = get_i32(&mut value, "topic count")?;
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..topics.max(0) {
        let topic = get_str(&mut value, "topic")?;
        let n = get_i32(&mut value, "partition count")?;
        for _ in 0..n.max(0) {
            partitions.insert((topic.clone(), get_i32(&mut value, "partition")?));
        }
    }
    let last_update_ms = get_i64(&mut value, "last update")?;
    let start_ms = get_i64(&mut value, "start")?;
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn metadata() -> TxnMetadata {
        TxnMetadata {
            transactional_id: "copier-1".into(),
            producer_id: 4000,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [("out".to_string(), 0), ("out".to_string(), 2), ("__consumer_offsets".to_string(), 17)]
                .into_iter()
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn keys_and_values_round_trip() {
        let m = metadata();
        assert_eq!(decode_key(encode_key("copier-1")).unwrap(), "copier-1");
        assert_eq!(decode_value("copier-1", encode_value(&m)).unwrap(), m);
    }

    #[test]
    fn the_value_is_kafkas_version_0_layout() {
        let m = TxnMetadata { partitions: Default::default(), state: TxnState::Empty, ..metadata() };
        let v = encode_value(&m);
        // version, producer id, epoch, timeout, state, no topics, last update, start.
        assert_eq!(v.len(), 2 + 8 + 2 + 4 + 1 + 4 + 8 + 8);
        assert_eq!(&v[..2], &[0, 0]);
        assert_eq!(&v[2..10], &4000_i64.to_be_bytes());
        assert_eq!(v[16], 0, "Empty");
    }

    #[test]
    fn truncated_or_unknown_records_are_errors_not_panics() {
        let v = encode_value(&metadata());
        for cut in 0..v.len() {
            assert!(decode_value("x", v.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut bad = v.to_vec();
        bad[16] = 42;
        assert!(decode_value("x", Bytes::from(bad)).is_err(), "state 42");
        assert!(decode_key(Bytes::from_static(&[0, 1, 0, 5, b'a'])).is_err());
        // A huge partition count is read as far as the bytes go, never allocated up front.
        let mut huge = BytesMut::new();
        huge.put_slice(&v[..17]);
        huge.put_i32(1);
        put_str(&mut huge, "t");
        huge.put_i32(i32::MAX);
        assert!(decode_value("x", huge.freeze()).is_err());
    }

    #[test]
    fn ids_land_where_kafka_puts_them() {
        // Java: Math.abs("my-txn".hashCode()) % 50
        assert_eq!(partition_for("my-txn", 50), crate::group::records::partition_for("my-txn", 50));
        assert!((0..50).contains(&partition_for("any", 50)));
    }
}
