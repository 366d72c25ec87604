//! Partition replication between brokers (Kafka's design): followers pull from leaders over
//! the internal port; the leader tracks its followers, advances the high watermark to what the
//! ISR has, and asks the controller to change the ISR.
//!
//! - [`service`]: the leader side of `strom.replication.v1` (long-polled follower fetches).
//! - [`fetcher`]: the follower side, one fetch loop per leader broker.
//! - [`isr`]: the leader's ISR shrink/expand proposals (AlterPartition to the controller).
//! - [`markers`]: the leader side of a transaction coordinator's markers (`WriteMarkers`).
//!
//! The per-partition rules (divergence by leader epoch, follower state, the high watermark,
//! truncation) live with the replica in `partition::replication`.

pub mod fetcher;
pub mod isr;
pub mod markers;
pub mod service;

pub use fetcher::{FetcherConfig, FollowTarget, ReplicaFetchers};
pub use isr::IsrChanges;
pub use service::ReplicationService;
