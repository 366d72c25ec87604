//! Why an operation on a partition failed. Mapped to Kafka error codes only at the protocol
//! edge (`kafka::error_code`).

use crate::log::{BatchError, LogError};

use super::producer_state::SequenceError;
use super::transactions::FencedMarker;

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("{topic}-{partition}: corrupt record batch")]
    CorruptMessage {
        topic: String,
        partition: i32,
        #[source]
        source: BatchError,
    },
    #[error("{topic}-{partition}: invalid record batch: {reason}")]
    InvalidRecord { topic: String, partition: i32, reason: String },
    #[error("{topic}-{partition}: record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { topic: String, partition: i32, size: usize, max: i32 },
    #[error("{topic}-{partition}: only record batches of magic 2 are supported, got magic {magic}")]
    UnsupportedMessageFormat { topic: String, partition: i32, magic: i8 },
    #[error("{topic}-{partition}: timestamp {timestamp} is more than {max_ms} ms in the future")]
    InvalidTimestamp { topic: String, partition: i32, timestamp: i64, max_ms: i64 },
    #[error("{topic}-{partition}: idempotent producer")]
    Sequence {
        topic: String,
        partition: i32,
        #[source]
        source: SequenceError,
    },
    #[error("{topic}-{partition}: transaction marker refused")]
    MarkerFenced {
        topic: String,
        partition: i32,
        #[source]
        source: FencedMarker,
    },
    #[error("{topic}-{partition}: this broker is not the partition's leader")]
    NotLeader { topic: String, partition: i32 },
    /// A follower-side change (appending a leader's batches, truncating) arrived after the
    /// replica's role moved on from the leader epoch it was fetched in: it is dropped.
    #[error(
        "{topic}-{partition}: fetched as a follower in leader epoch {fetched_in}, but the replica is now {now} in epoch {leader_epoch}"
    )]
    NotFollowing { topic: String, partition: i32, fetched_in: i32, leader_epoch: i32, now: &'static str },
    #[error("{topic}-{partition}: {isr} in-sync replicas, fewer than min.insync.replicas {min}")]
    NotEnoughReplicas { topic: String, partition: i32, isr: i32, min: i32 },
    #[error(
        "{topic}-{partition}: appended, but only {isr} in-sync replicas remain, fewer than min.insync.replicas {min}"
    )]
    NotEnoughReplicasAfterAppend { topic: String, partition: i32, isr: i32, min: i32 },
    #[error("{topic}-{partition}: the in-sync replicas did not all have the records within {waited_ms} ms")]
    ReplicationTimeout { topic: String, partition: i32, waited_ms: u64 },
    #[error("{topic}-{partition}: log")]
    Log {
        topic: String,
        partition: i32,
        #[source]
        source: LogError,
    },
    #[error("{topic}-{partition}: filesystem operation {op} on {path}")]
    Io {
        topic: String,
        partition: i32,
        op: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}
