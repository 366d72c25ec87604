//! The generated gRPC code of Strom's internal port, shared by the broker, the tests and
//! (later) the operator, none of which links the others' internals.
//!
//! - [`raft`]: `strom.raft.v1`, the metadata quorum's raft RPCs between brokers.
//! - [`controller`]: `strom.controller.v1`, broker-to-controller calls (registration,
//!   heartbeats, topic writes, producer-id blocks, ISR changes, quorum description).
//! - [`replication`]: `strom.replication.v1`, followers fetching from partition leaders.
//! - [`admin`]: `strom.admin.v1`, the cluster's admin API (the CLI, the operator).
//! - [`exposition`]: the Prometheus formats `/metrics` serves (OpenMetrics and the classic
//!   text), chosen by the scraper's `Accept` header.

pub mod exposition;

/// `strom.raft.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs, missing_debug_implementations)]
pub mod raft {
    tonic::include_proto!("strom.raft.v1");
}

/// `strom.controller.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs, missing_debug_implementations)]
pub mod controller {
    tonic::include_proto!("strom.controller.v1");
}

/// `strom.replication.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs, missing_debug_implementations)]
pub mod replication {
    tonic::include_proto!("strom.replication.v1");
}

/// `strom.admin.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs, missing_debug_implementations)]
pub mod admin {
    tonic::include_proto!("strom.admin.v1");
}
