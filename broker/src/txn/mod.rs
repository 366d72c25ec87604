//! Transactions at their coordinator (KIP-98): each transactional id has one coordinator, the
//! leader of its `__transaction_state` partition, which keeps the id's producer id, epoch and
//! open transaction, and decides commits and aborts. The partitions' side (markers, the last
//! stable offset, read_committed) is `partition::transactions`.
//!
//! - [`state`]: one transactional id's state and the pure decisions on it.
//! - [`records`]: `__transaction_state` keys and values in Kafka's formats; the id → partition
//!   hash.
//! - [`load`]: a `__transaction_state` partition read back by its new leader.
//! - [`coordinator`]: [`coordinator::TransactionCoordinator`] — the requests, each decision
//!   written and replicated before it is answered, the markers, timeouts, failover.
//! - [`markers`]: the markers sent to the partitions' leaders (this broker's own directly).
//! - [`metrics`]: ids by state, open transactions and LSO lag for `/metrics`.
//!
//! docs/transactions.md: what is built, what is guaranteed, and what is still to come.

pub mod coordinator;
pub mod load;
pub mod markers;
pub mod metrics;
pub mod records;
pub mod state;

/// The internal topic holding the transactional ids' state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
