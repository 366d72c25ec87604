//! The cluster metadata this broker serves.
//!
//! - [`catalog`]: topics with their ids, partition counts and config overrides, persisted
//!   atomically under `<data>/metadata/topics.json`. On a single node the catalog is the source
//!   of truth; the metadata-quorum issue replaces its storage with a replicated log while
//!   keeping this interface.
//! - [`topic_config`]: supported topic configs, defaults and validation.
//! - [`producer_ids`]: hands out producer ids for InitProducerId, persisted in blocks so a
//!   restart never reuses one.
//! - [`cluster`]: the cluster id and this node's identity (`meta.properties`).
//! - [`atomic_file`]: write-to-temp, fsync, rename, fsync-directory.

pub mod atomic_file;
pub mod catalog;
pub mod cluster;
pub mod producer_ids;
pub mod topic_config;

pub use catalog::{Catalog, CatalogError, TopicMetadata};
pub use cluster::ClusterIdentity;
pub use producer_ids::ProducerIdAllocator;
