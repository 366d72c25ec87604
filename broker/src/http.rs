//! The HTTP endpoint: `/metrics` (OpenMetrics or Prometheus text, as the scraper asks), `/healthz` (the process is serving) and
//! `/readyz` (the broker is registered with the controller, unfenced, and has applied the
//! metadata that says so: it serves what it hosts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::group::GroupCoordinator;
use crate::metadata::runtime::Metadata;
use crate::metrics::{LogDirStats, MetadataStats, Metrics, ReplicationStats};
use crate::partition::ReplicaManager;
use crate::replication::service::Throttle;
use crate::replication::{IsrChanges, ReplicaFetchers};
use crate::shutdown::Shutdown;

/// What the HTTP handlers read.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    pub replicas: Arc<ReplicaManager>,
    pub groups: Arc<GroupCoordinator>,
    pub txn: Arc<crate::txn::coordinator::TransactionCoordinator>,
    pub metadata: Metadata,
    pub fetchers: Arc<ReplicaFetchers>,
    pub isr_changes: Arc<IsrChanges>,
    /// The reassignment throttle of the replicas this broker leads.
    pub throttle: Arc<Throttle>,
    pub ready: Arc<AtomicBool>,
    /// The data directory, for its filesystem's size and free space.
    pub data_dir: std::path::PathBuf,
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

fn replication_stats(state: &HttpState) -> ReplicationStats {
    use std::sync::atomic::Ordering::Relaxed;
    let hosted = state.replicas.all();
    let replicas = hosted.len();
    let led: Vec<_> = hosted.into_iter().filter(|p| p.is_leader()).collect();
    let isr_and_replicas: Vec<(usize, usize, i64)> = led
        .iter()
        .map(|p| {
            let l = p.leadership();
            (l.isr.len(), l.replicas.len(), i64::from(p.config().min_insync_replicas))
        })
        .collect();
    let under_replicated = isr_and_replicas.iter().filter(|(isr, all, _)| isr < all).count();
    let under_min_isr =
        isr_and_replicas.iter().filter(|(isr, _, min)| i64::try_from(*isr).unwrap_or(i64::MAX) < *min).count();
    let max_follower_lag = led.iter().map(|p| p.log_gauges().max_follower_lag).max().unwrap_or(0);
    let image = state.metadata.state_machine.image();
    let reassigning = image.partitions().filter(|(_, _, p)| p.is_reassigning()).count();
    let fetcher_max_lag = state.fetchers.stats.lags().iter().map(|(_, _, lag)| *lag).max().unwrap_or(0);
    ReplicationStats {
        under_replicated,
        offline: image.partitions().filter(|(_, _, p)| p.leader < 0 || !image.is_live(p.leader)).count(),
        isr_shrinks: state.isr_changes.shrinks.load(Relaxed),
        isr_expands: state.isr_changes.expands.load(Relaxed),
        max_follower_lag,
        under_min_isr,
        leaders: led.len(),
        replicas,
        reassigning,
        fetcher_max_lag,
        fetcher_bytes: state.fetchers.stats.bytes(),
        throttled_bytes: state.throttle.throttled_bytes(),
        throttled_fetches: state.throttle.held_back(),
    }
}

/// The data directory's filesystem; zeros if it cannot be read (the gauges then say 0 free,
/// which the disk alert reports rather than hides).
fn log_dir_stats(dir: &std::path::Path) -> LogDirStats {
    match crate::disk_space::stats(dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "statvfs of the data directory failed");
            LogDirStats::default()
        }
    }
}

async fn metrics(State(state): State<HttpState>, headers: HeaderMap) -> impl IntoResponse {
    // Rendering thousands of partitions' series takes milliseconds of CPU: off the runtime's
    // workers, which serve the Kafka connections.
    let rendered = tokio::task::spawn_blocking(move || {
        let _one_at_a_time = state.metrics.one_scrape_at_a_time();
        state.metrics.set_metadata(&metadata_stats(&state.metadata));
        state.metrics.set_replication(&replication_stats(&state));
        state.metrics.set_fetcher_lags(&state.fetchers.stats.lags());
        state.metrics.set_log_dir(&log_dir_stats(&state.data_dir));
        let partitions = state.replicas.all();
        let topics = crate::txn::metrics::per_topic(&partitions);
        state.metrics.transactions.set(state.txn.count_by_state(), topics);
        state.metrics.render(&partitions, &state.groups.states(), state.groups.rebalances())
    })
    .await;
    let body = match rendered {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, "rendering /metrics failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, [(header::CONTENT_TYPE, "text/plain")], String::new());
        }
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = strom_proto::exposition::negotiate(body, accept);
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body)
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}
