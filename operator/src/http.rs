//! The operator's HTTP endpoint: `/metrics` (OpenMetrics or Prometheus text, as the scraper asks), `/healthz` (the process runs),
//! `/readyz` (it has started its controllers, or waits as a standby for the Lease: both are
//! a healthy replica).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(|| async { "ok\n" }))
        .with_state(metrics);
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

async fn metrics_text(State(metrics): State<Arc<Metrics>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = strom_proto::exposition::negotiate(metrics.encode(), accept);
    ([(header::CONTENT_TYPE, content_type)], body)
}
