//! The Kafka listener: accepts connections while a permit of `max.connections` is free and
//! backs off on accept errors (e.g. out of file descriptors) instead of spinning.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::node::Node;
use crate::shutdown::Shutdown;

use super::connection::{self, ConnectionLimits};

/// Accepts Kafka clients until shutdown.
pub async fn run(listener: TcpListener, node: Arc<Node>, mut shutdown: Shutdown) {
    let max_connections = Arc::new(Semaphore::new(node.config.max_connections));
    let budget =
        usize::try_from(node.config.queued_max_request_bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
    let limits = ConnectionLimits {
        max_request_bytes: node.config.socket_request_max_bytes,
        request_budget: Arc::new(Semaphore::new(budget)),
        send_buffer_bytes: usize::try_from(node.config.socket_send_buffer_bytes).ok(),
    };
    let mut backoff = Duration::from_millis(5);
    loop {
        let permit = tokio::select! {
            _ = shutdown.wait() => return,
            p = max_connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            _ = shutdown.wait() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(5);
                let node = node.clone();
                let limits = limits.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move {
                    connection::serve(node, stream, limits, shutdown).await;
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, ?backoff, "accept failed; backing off");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}
