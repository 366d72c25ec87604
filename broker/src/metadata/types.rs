//! The metadata quorum's openraft type configuration, declared once, and short aliases so the
//! rest of the code reads `RaftError`, not a page of generics.
//!
//! Raft node ids are `u64` (openraft's conformance suite wants `From<u64>`); broker ids are
//! Kafka's `i32`. They are the same number; [`node_id`] and [`broker_id`] convert at the edge.

use std::io::Cursor;

use openraft::BasicNode;

use super::command::{CommandResult, MetadataCommand};

openraft::declare_raft_types!(
    /// Types of the metadata quorum: commands are [`MetadataCommand`]s, each node's address is
    /// its internal gRPC `host:port`, snapshots are the image's JSON in memory.
    pub TypeConfig:
        D = MetadataCommand,
        R = CommandResult,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The raft handle of this broker.
pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<u64>;
pub type Vote = openraft::Vote<u64>;
pub type StorageError = openraft::StorageError<u64>;
pub type StoredMembership = openraft::StoredMembership<u64, BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<u64, BasicNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type RaftMetrics = openraft::RaftMetrics<u64, BasicNode>;
pub type RaftError<E = openraft::error::Infallible> = openraft::error::RaftError<u64, E>;
pub type RPCError<E = openraft::error::Infallible> = openraft::error::RPCError<u64, BasicNode, RaftError<E>>;
pub type ClientWriteError = openraft::error::ClientWriteError<u64, BasicNode>;
pub type AppendEntriesRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
pub type AppendEntriesResponse = openraft::raft::AppendEntriesResponse<u64>;
pub type VoteRequest = openraft::raft::VoteRequest<u64>;
pub type VoteResponse = openraft::raft::VoteResponse<u64>;
pub type InstallSnapshotRequest = openraft::raft::InstallSnapshotRequest<TypeConfig>;
pub type InstallSnapshotResponse = openraft::raft::InstallSnapshotResponse<u64>;
pub type InstallSnapshotError = openraft::error::InstallSnapshotError;

/// The raft node id of a broker.
pub fn node_id(broker: i32) -> u64 {
    u64::try_from(broker).unwrap_or(u64::MAX)
}

/// The broker id of a raft node (ids come from validated configuration, so they fit).
pub fn broker_id(node: u64) -> i32 {
    i32::try_from(node).unwrap_or(-1)
}
