//! The records of `__consumer_offsets`, in Kafka's own formats so that Kafka's tools could read
//! them: offset commits (key version 1, value version 3) and group metadata (key version 2,
//! value version 3). A null value is a tombstone.

use bytes::{BufMut, Bytes, BytesMut};

use crate::internal_records::{
    get_bytes, get_i16, get_i32, get_i64, get_nullable_str, get_str, put_bytes, put_nullable_str, put_str, FieldError,
};

/// What a `__consumer_offsets` key names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKey {
    Offset { group: String, topic: String, partition: i32 },
    Group { group: String },
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One member as stored in group metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group's metadata after a completed rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<StoredMember>,
}

/// A record that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct RecordError(pub String);

impl From<FieldError> for RecordError {
    fn from(e: FieldError) -> RecordError {
        RecordError(e.0)
    }
}

impl RecordKey {
    pub fn group(&self) -> &str {
        match self {
            RecordKey::Offset { group, .. } | RecordKey::Group { group } => group,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        match self {
            RecordKey::Offset { group, topic, partition } => {
                buf.put_i16(1);
                put_str(&mut buf, group);
                put_str(&mut buf, topic);
                buf.put_i32(*partition);
            }
            RecordKey::Group { group } => {
                buf.put_i16(2);
                put_str(&mut buf, group);
            }
        }
        buf.freeze()
    }

    pub fn decode(mut buf: Bytes) -> Result<RecordKey, RecordError> {
        match get_i16(&mut buf, "key version")? {
            0 | 1 => Ok(RecordKey::Offset {
                group: get_str(&mut buf, "group")?,
                topic: get_str(&mut buf, "topic")?,
                partition: get_i32(&mut buf, "partition")?,
            }),
            2 => Ok(RecordKey::Group { group: get_str(&mut buf, "group")? }),
            v => Err(RecordError(format!("unknown key version {v}"))),
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        buf.put_i64(self.offset);
        buf.put_i32(self.leader_epoch);
        put_str(&mut buf, &self.metadata);
        buf.put_i64(self.commit_timestamp);
        buf.freeze()
    }

    pub fn decode(mut buf: Bytes) -> Result<OffsetValue, RecordError> {
        let version = get_i16(&mut buf, "offset value version")?;
        let offset = get_i64(&mut buf, "offset")?;
        let leader_epoch = if version >= 3 { get_i32(&mut buf, "leader epoch")? } else { -1 };
        let metadata = get_nullable_str(&mut buf, "metadata")?.unwrap_or_default();
        let commit_timestamp = get_i64(&mut buf, "commit timestamp")?;
        Ok(OffsetValue { offset, leader_epoch, metadata, commit_timestamp })
    }
}

impl GroupValue {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        put_str(&mut buf, &self.protocol_type);
        buf.put_i32(self.generation);
        put_nullable_str(&mut buf, self.protocol.as_deref());
        put_nullable_str(&mut buf, self.leader.as_deref());
        buf.put_i64(self.current_state_timestamp);
        buf.put_i32(i32::try_from(self.members.len()).unwrap_or(i32::MAX));
        for m in &self.members {
            put_str(&mut buf, &m.member_id);
            put_nullable_str(&mut buf, m.group_instance_id.as_deref());
            put_str(&mut buf, &m.client_id);
            put_str(&mut buf, &m.client_host);
            buf.put_i32(m.rebalance_timeout_ms);
            buf.put_i32(m.session_timeout_ms);
            put_bytes(&mut buf, &m.subscription);
            put_bytes(&mut buf, &m.assignment);
        }
        buf.freeze()
    }

    pub fn decode(mut buf: Bytes) -> Result<GroupValue, RecordError> {
        let version = get_i16(&mut buf, "group value version")?;
        if !(0..=3).contains(&version) {
            return Err(RecordError(format!("unknown group value version {version}")));
        }
        let protocol_type = get_str(&mut buf, "protocol type")?;
        let generation = get_i32(&mut buf, "generation")?;
        let protocol = get_nullable_str(&mut buf, "protocol")?;
        let leader = get_nullable_str(&mut buf, "leader")?;
        let current_state_timestamp = if version >= 2 { get_i64(&mut buf, "state timestamp")? } else { -1 };
        let count = get_i32(&mut buf, "member count")?;
        let mut members = Vec::new();
        for _ in 0..count.max(0) {
            let member_id = get_str(&mut buf, "member id")?;
            let group_instance_id = if version >= 3 { get_nullable_str(&mut buf, "instance id")? } else { None };
            let client_id = get_str(&mut buf, "client id")?;
            let client_host = get_str(&mut buf, "client host")?;
            let rebalance_timeout_ms = if version >= 1 { get_i32(&mut buf, "rebalance timeout")? } else { -1 };
            let session_timeout_ms = get_i32(&mut buf, "session timeout")?;
            let subscription = get_bytes(&mut buf, "subscription")?;
            let assignment = get_bytes(&mut buf, "assignment")?;
            members.push(StoredMember {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        Ok(GroupValue { protocol_type, generation, protocol, leader, current_state_timestamp, members })
    }
}

/// Kafka's partition for a group: `abs(javaHashCode(group)) % partitions`, so that a group
/// lands on the same `__consumer_offsets` partition as it would in Kafka.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    // Kafka's Utils.abs maps i32::MIN to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let k = RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 3 };
        assert_eq!(RecordKey::decode(k.encode()).expect("decode"), k);
        let v = OffsetValue { offset: 42, leader_epoch: 0, metadata: "m".into(), commit_timestamp: 7 };
        assert_eq!(OffsetValue::decode(v.encode()).expect("decode"), v);
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("a".into()),
            current_state_timestamp: 9,
            members: vec![StoredMember {
                member_id: "a".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 10_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(g.encode()).expect("decode"), g);
    }

    #[test]
    fn groups_map_to_the_same_partition_as_in_kafka() {
        // "test-group".hashCode() == 627841412 in Java; % 50 == 12.
        assert_eq!(partition_for("test-group", 50), 12);
        assert_eq!(partition_for("", 50), 0);
    }

    #[test]
    fn truncated_values_are_errors_not_panics() {
        let v = OffsetValue { offset: 1, leader_epoch: 0, metadata: "x".into(), commit_timestamp: 2 }.encode();
        for cut in 0..v.len() {
            assert!(OffsetValue::decode(v.slice(..cut)).is_err());
        }
    }
}
