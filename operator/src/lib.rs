//! strom-operator: Kubernetes controllers for Strom. It reaches brokers only through their
//! admin gRPC API (the `strom-proto` client), never the broker crate.
//!
//! Module map:
//! - [`crd`]: the custom resources (`Cluster`, `Topic`, `ConsumerGroup`) and their CRDs.
//! - [`cluster`]: the Cluster controller — names, validation, desired objects, plans of
//!   multi-step operations, status, and the reconcile that wires them.
//! - [`admin`]: the admin gRPC client (describe, plan and execute rebalances, remove brokers).
//! - [`conditions`]: kstatus conditions (`Ready`, `Reconciling`, `Stalled`).
//! - [`context`]: what every reconcile shares (client, Event recorder, metrics, settings).
//! - [`leader`]: leader election on a Lease.
//! - [`metrics`], [`http`]: Prometheus metrics, `/metrics`, `/healthz`, `/readyz`.
//! - [`quantity`]: Kubernetes quantities as byte counts.
//! - [`run`]: `strom-operator run`: CRDs, HTTP, Lease, controllers, graceful shutdown.

pub mod admin;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod crd;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod quantity;
pub mod run;
