//! The HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (the process is serving) and
//! `/readyz` (the broker is registered with the controller, unfenced, and has applied the
//! metadata that says so: it serves what it hosts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::group::GroupCoordinator;
use crate::metadata::runtime::Metadata;
use crate::metrics::{MetadataStats, Metrics};
use crate::partition::ReplicaManager;
use crate::shutdown::Shutdown;

/// What the HTTP handlers read.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    pub replicas: Arc<ReplicaManager>,
    pub groups: Arc<GroupCoordinator>,
    pub metadata: Metadata,
    pub ready: Arc<AtomicBool>,
}

/// Serves until shutdown.
pub async fn run(listener: TcpListener, state: HttpState, mut shutdown: Shutdown) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state);
    axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.wait().await }).await
}

fn metadata_stats(m: &Metadata) -> MetadataStats {
    let raft = m.metrics().borrow().clone();
    let image = m.state_machine.image();
    MetadataStats {
        applied_index: image.applied_index,
        snapshot_index: raft.snapshot.map_or(0, |l| l.index),
        log_start_index: raft.purged.map_or(0, |l| l.index + 1),
        current_term: raft.current_term,
        is_controller: m.controller.is_active(),
        snapshot_installs: m.state_machine.snapshot_installs(),
        registered_brokers: image.brokers.len(),
        fenced_brokers: image.brokers.values().filter(|b| b.fenced).count(),
    }
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    state.metrics.set_metadata(&metadata_stats(&state.metadata));
    let body = state.metrics.render(&state.replicas.all(), &state.groups.states(), state.groups.rebalances());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}
