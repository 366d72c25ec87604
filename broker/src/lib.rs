//! The Strom broker: a Kafka-compatible event-streaming broker.
//!
//! Module map (dependencies point downwards: `server → {kafka, publisher} → {group, partition, metadata} → log`):
//! - [`log`]: the segmented partition log on disk — segments, mmap'd sparse indexes, recovery,
//!   retention. Knows nothing of the wire protocol.
//! - [`partition`]: one partition replica — its log, the idempotent-producer state, the high
//!   watermark and the waiters woken by appends; and the [`partition::ReplicaManager`] that owns
//!   every replica on this broker.
//! - [`metadata`]: the cluster metadata — a replicated log on openraft whose state machine
//!   (the image: brokers, topics, partitions with their leaders) every broker serves from; the
//!   controller role of the raft leader; producer-id blocks. Under `<data>/metadata/`.
//! - [`replication`]: followers fetching from leaders over the internal port, the leader's
//!   side of it, and ISR changes through the controller.
//! - [`group`]: the consumer-group coordinator and committed offsets in `__consumer_offsets`.
//! - [`txn`]: transactions at their coordinator — the transactional ids' state and its
//!   records in `__transaction_state` (the partitions' side is in [`partition`]).
//! - [`internal_records`]: the primitives of the Kafka-format records of internal topics.
//! - [`kafka`]: the Kafka wire protocol — listener, framing, version negotiation, one handler
//!   file per API key, and the single place where errors become Kafka error codes.
//! - [`admin`]: the admin gRPC API (`strom.admin.v1`) every broker serves for the CLI and
//!   the operator.
//! - [`http`]: `/metrics`, `/healthz`, `/readyz`; [`metrics`] holds the Prometheus registry.
//! - [`error_chain`]: an error and its causes on one line.
//! - [`disk_space`]: the data directory's free space, and the floor below which produce
//!   requests are refused (KAFKA_STORAGE_ERROR) so the metadata log keeps room.
//! - [`storage_failure`]: a failed fsync of log data halts the broker (exit 70) so recovery runs.
//! - [`config`]: the broker's configuration (flags, `STROM_*` environment, TOML file).
//! - [`node`]: the shared state of a running broker and the topic operations on it.
//! - [`publisher`]: makes this broker what each new metadata image says (replicas opened and
//!   removed, leadership, configs, coordinated groups, readiness).
//! - [`lifecycle`]: registration and heartbeats with the active controller.
//! - [`internal`]: the internal gRPC port (raft, controller calls, replication, admin).
//! - [`server`]: wires one node together and runs it until shutdown.
//! - [`cli`]: the `strom` command line (`serve`, `dev`, and the admin commands `cluster`,
//!   `topic`, `rebalance`, `broker`, `group` over the admin API).

pub mod admin;
pub mod cli;
pub mod config;
pub mod disk_space;
pub mod error_chain;
pub mod group;
pub mod http;
pub mod internal;
pub mod internal_records;
pub mod kafka;
pub mod lifecycle;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod node;
pub mod partition;
pub mod publisher;
pub mod replication;
pub mod server;
pub mod shutdown;
pub mod storage_failure;
pub mod time;
pub mod txn;
