//! The cluster's metadata: a replicated log on openraft (KRaft-like) whose state machine is
//! the [`image::MetadataImage`] every broker serves Kafka requests from.
//! docs/decisions/metadata-quorum.md explains the design.
//!
//! - [`types`]: openraft's type configuration and short aliases.
//! - [`command`]: the commands of the log (decisions, not policies) and their results.
//! - [`image`]: the image and the pure `apply` of a command to it.
//! - [`log_store`]: the raft log on disk (`<data>/metadata/raft/`).
//! - [`state_machine`]: applies entries to the image, publishes it, snapshots it
//!   (`<data>/metadata/snapshots/`).
//! - [`network`] / [`raft_service`]: raft RPCs over gRPC, client and server side.
//! - [`contacts`]: when the leader last heard from each member and when each was caught up.
//! - [`quorum`]: `--voters`, openraft's tuning.
//! - [`watchdog`]: ends the process when this member of the quorum fails for good (a storage
//!   error or a panic in openraft), as Kafka halts on a failed metadata log.
//! - [`controller`]: the active controller (registration, heartbeats, fencing, topic writes,
//!   placement) and its gRPC service.
//! - [`client`]: how any broker reaches the active controller.
//! - [`runtime`]: one broker's share of the quorum, started and wired together.
//! - [`catalog`]: the read side for Kafka handlers, and Kafka's name checks.
//! - [`topic_config`]: supported topic configs, defaults and validation.
//! - [`producer_ids`]: producer ids from controller-allocated blocks.
//! - [`cluster`]: this node's identity (`meta.properties`).
//! - [`atomic_file`]: write-to-temp, fsync, rename, fsync-directory.

pub mod atomic_file;
pub mod catalog;
pub mod client;
pub mod cluster;
pub mod command;
pub mod contacts;
pub mod controller;
pub mod image;
pub mod log_store;
pub mod network;
pub mod producer_ids;
pub mod quorum;
pub mod raft_service;
pub mod runtime;
pub mod state_machine;
pub mod topic_config;
pub mod types;
pub mod watchdog;

#[cfg(test)]
mod storage_tests;

use std::sync::Arc;

use tokio::sync::watch;

pub use catalog::{Catalog, CatalogError, TopicMetadata};
pub use cluster::ClusterIdentity;
pub use image::MetadataImage;
pub use producer_ids::ProducerIdAllocator;

/// The cluster id as this broker's image knows it (empty until the cluster is named), for the
/// raft RPCs that carry it.
#[derive(Debug, Clone)]
pub struct ClusterIdSource(pub watch::Receiver<Arc<MetadataImage>>);

impl ClusterIdSource {
    pub fn get(&self) -> String {
        self.0.borrow().cluster_id.clone().unwrap_or_default()
    }
}
