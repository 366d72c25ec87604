//! The internal port (`--internal-listen`, 9093 by default): gRPC between brokers — raft
//! RPCs, controller calls, followers' fetches from partition leaders, and the admin API.
//!
//! tonic logs a connection that is not HTTP/2 only at debug level, so each connection's first
//! bytes are checked here first: anything that does not start with the HTTP/2 client preface
//! is closed, with a warning naming the peer. A peer that sends nothing within
//! [`PREFACE_TIMEOUT`] is closed too, so idle sockets cannot pile up.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::admin::AdminService;
use crate::metadata::network::{HTTP2_CONNECTION_WINDOW, HTTP2_MAX_FRAME, HTTP2_STREAM_WINDOW};
use crate::metadata::runtime::Metadata;
use crate::replication::ReplicationService;
use crate::shutdown::Shutdown;
use strom_proto::admin::admin_server::AdminServer;
use strom_proto::replication::replication_server::ReplicationServer;

/// What every HTTP/2 connection starts with (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the internal port until `shutdown` fires.
pub async fn run(
    listener: TcpListener,
    metadata: Metadata,
    replication: ReplicationService,
    admin: AdminService,
    mut shutdown: Shutdown,
) {
    let (tx, rx) = mpsc::channel::<std::io::Result<TcpStream>>(64);
    let mut accept_shutdown = shutdown.clone();
    let accept = tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = accept_shutdown.wait() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting an internal connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                if screen(&stream, peer).await {
                    let _ = stream.set_nodelay(true);
                    let _ = tx.send(Ok(stream)).await;
                }
            });
        }
    });
    let incoming = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|s| (s, rx)) }).boxed();
    let (raft, controller) = metadata.services();
    let replication = ReplicationServer::new(replication).max_encoding_message_size(256 << 20);
    let served = tonic::transport::Server::builder()
        .initial_stream_window_size(HTTP2_STREAM_WINDOW)
        .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
        .max_frame_size(HTTP2_MAX_FRAME)
        .add_service(raft)
        .add_service(controller)
        .add_service(replication)
        .add_service(AdminServer::new(admin).max_encoding_message_size(64 << 20))
        .serve_with_incoming_shutdown(incoming, async move { shutdown.wait().await })
        .await;
    if let Err(e) = served {
        tracing::error!(error = %crate::error_chain::display(&e), "internal gRPC server failed");
    }
    accept.abort();
}

/// Whether the connection starts like HTTP/2; logs why not.
async fn screen(stream: &TcpStream, peer: SocketAddr) -> bool {
    let mut buf = [0u8; PREFACE.len()];
    let deadline = tokio::time::Instant::now() + PREFACE_TIMEOUT;
    loop {
        let peeked = tokio::time::timeout_at(deadline, stream.peek(&mut buf)).await;
        match peeked {
            Err(_) => {
                tracing::warn!(%peer, "internal connection sent no HTTP/2 preface within {PREFACE_TIMEOUT:?}; closed");
                return false;
            }
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "internal connection failed before its preface");
                return false;
            }
            Ok(Ok(0)) => return false,
            Ok(Ok(n)) => {
                if buf[..n] != PREFACE[..n] {
                    tracing::warn!(%peer, first_bytes = ?String::from_utf8_lossy(&buf[..n]), "internal connection is not gRPC (no HTTP/2 preface); closed");
                    return false;
                }
                if n == PREFACE.len() {
                    return true;
                }
                // A partial preface so far: wait for more bytes without spinning.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}
