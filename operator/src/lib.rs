//! strom-operator: Kubernetes controllers for Strom. It reaches brokers only through their
//! admin gRPC API (the `strom-proto` client), never the broker crate.
//!
//! Module map:
//! - [`crd`]: the custom resources (`Cluster`, `Topic`, `ConsumerGroup`) and their CRDs.
//! - [`cluster`]: the Cluster controller — names, validation, desired objects, plans of
//!   multi-step operations, status, and the reconcile that wires them.
//! - [`topic`]: the Topic controller — the topic diff, ownership, reconcile and finalizer.
//! - [`group`]: the ConsumerGroup controller — lag in status, declarative offset resets.
//! - [`cluster_ref`]: how a Topic or ConsumerGroup reaches its Cluster's brokers;
//!   [`claim`]: which of two resources naming one topic or group manages it.
//! - [`admin`]: the admin gRPC client (topics, groups, rebalances, broker removal).
//! - [`publish`]: Events and status writes; [`failures`]: retries with backoff;
//!   [`finalized`]: the error and the finalizer run the Topic and ConsumerGroup share.
//! - [`conditions`]: kstatus conditions (`Ready`, `Reconciling`, `Stalled`).
//! - [`context`]: what every reconcile shares (client, Event recorder, metrics, settings).
//! - [`leader`]: leader election on a Lease.
//! - [`metrics`], [`http`]: Prometheus metrics, `/metrics`, `/healthz`, `/readyz`.
//! - [`quantity`]: Kubernetes quantities as byte counts.
//! - [`run`]: `strom-operator run`: CRDs, HTTP, Lease, controllers, graceful shutdown.

pub mod admin;
pub mod claim;
pub mod cluster;
pub mod cluster_ref;
pub mod conditions;
pub mod context;
pub mod crd;
pub mod failures;
pub mod finalized;
pub mod group;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod publish;
pub mod quantity;
pub mod run;
pub mod topic;
