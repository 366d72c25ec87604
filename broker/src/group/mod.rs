//! Consumer groups (Kafka's classic protocol) and their committed offsets.
//!
//! - [`coordinator`]: [`GroupCoordinator`] — JoinGroup/SyncGroup/Heartbeat/LeaveGroup, the
//!   rebalance, session expiry, under one lock, driven by a 100 ms tick.
//! - [`offsets`]: OffsetCommit/OffsetFetch, Describe/List/Delete groups, OffsetDelete, and
//!   loading (unloading) the groups of a `__consumer_offsets` partition when this broker
//!   becomes (stops being) its leader: a broker coordinates exactly those groups.
//! - [`in_flight`]: commits appended and not yet replicated, which OffsetFetch waits for.
//! - [`state`]: one group's state and the pure decisions on it (protocol choice, states).
//! - [`records`]: `__consumer_offsets` keys and values in Kafka's formats; the group → partition hash.
//! - [`batch`]: the record batches the coordinator writes and reads.
//! - [`error`]: the error type, [`GroupError`].

pub mod batch;
pub mod coordinator;
pub mod error;
pub mod in_flight;
pub mod offsets;
pub mod records;
pub mod state;

pub use coordinator::{GroupConfig, GroupCoordinator, JoinRequest, Reply, OFFSETS_TOPIC};
pub use error::GroupError;
pub use state::GroupState;

#[cfg(test)]
mod tests;
