//! The Strom broker: a Kafka-compatible event-streaming broker.
//!
//! Module map (dependencies point downwards: `server → kafka → {partition, metadata} → log`):
//! - [`log`]: the segmented partition log on disk — segments, mmap'd sparse indexes, recovery,
//!   retention. Knows nothing of the wire protocol.
//! - [`partition`]: one partition replica — its log, the idempotent-producer state, the high
//!   watermark and the waiters woken by appends; and the [`partition::ReplicaManager`] that owns
//!   every replica on this broker.
//! - [`metadata`]: the cluster metadata this broker serves — topics, their ids, partition counts
//!   and configs — persisted under `<data>/metadata/`, plus the producer-id allocator.
//! - [`group`]: the consumer-group coordinator and committed offsets in `__consumer_offsets`.
//! - [`kafka`]: the Kafka wire protocol — listener, framing, version negotiation, one handler
//!   file per API key, and the single place where errors become Kafka error codes.
//! - [`http`]: `/metrics`, `/healthz`, `/readyz`; [`metrics`] holds the Prometheus registry.
//! - [`error_chain`]: an error and its causes on one line.
//! - [`config`]: the broker's configuration (flags, `STROM_*` environment, TOML file).
//! - [`node`]: the shared state of a running broker and the topic operations on it.
//! - [`server`]: wires one node together and runs it until shutdown.
//! - [`cli`]: the `strom` command line (`serve`, `dev`).

pub mod cli;
pub mod config;
pub mod error_chain;
pub mod group;
pub mod http;
pub mod kafka;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod node;
pub mod partition;
pub mod server;
pub mod shutdown;
pub mod time;
