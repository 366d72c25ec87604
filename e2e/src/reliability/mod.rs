//! The reliability suite's harness (RELIABILITY.md, issue 34): a workload on librdkafka that
//! writes a history, a checker of that history, and the frame every scenario runs in.
//!
//! - [`history`]: the history — one JSON line per operation (`invoke`/`ok`/`fail`/`info` of a
//!   send, a poll, an observed high watermark or committed offset), in memory and on disk.
//! - [`check`]: P1–P8 over a history: lost writes, duplicates, poll order and skips,
//!   inconsistent offsets, send order, phantom reads, high watermarks and committed offsets
//!   going backwards.
//! - [`workload`]: idempotent acks=all producers sending unique values, consumers in a group
//!   committing what they read, an observer of the group's committed offsets, and the final
//!   read after healing — all writing the history.
//! - [`replicas`]: P9 and P10 after healing — replicas byte-identical, metadata equal.
//! - [`scenario`]: a seeded run: steady phase, fault phase, heal, recovery, final read, check;
//!   its figures (acknowledged, read, lost, duplicates, ops/s under fault) and the floor that
//!   fails a run that stalled.

pub mod check;
pub mod history;
pub mod replicas;
pub mod scenario;
pub mod workload;
