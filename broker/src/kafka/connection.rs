//! One client connection: framing and the request loop.
//!
//! A frame is an i32 size and that many bytes. The size is checked before anything is
//! buffered: zero, negative or above `socket.request.max.bytes` closes the connection without
//! allocating. The body is read in chunks, each taking its bytes from the broker-wide request
//! budget (`queued.max.request.bytes`) before it is buffered: memory follows the bytes that
//! arrive, not the size a frame claims, and many large requests at once wait instead of
//! exhausting memory. Requests are handled in the order they arrive and answered in that
//! order (clients pipeline); a produce waiting for its in-sync replicas does not hold up the
//! requests behind it — its reply is deferred, and later replies queue behind it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::node::Node;
use crate::shutdown::Shutdown;

use super::fetch_reply::Part;
use super::router::{self, Reply};
use crate::log::FileSlice;

/// A connection with no request for this long is closed (Kafka's connections.max.idle.ms).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Once a size prefix arrived, its body must follow within this time (slow-loris guard).
const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Limits shared by all connections.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    pub max_request_bytes: u32,
    /// Permits are bytes of request bodies held in memory at once.
    pub request_budget: Arc<Semaphore>,
    /// `socket.send.buffer.bytes` (None: the OS's autotuning).
    pub send_buffer_bytes: Option<usize>,
}

/// Bodies are read in chunks of at most this size, so memory grows with the bytes that
/// actually arrive, never with the size a frame claims.
const READ_CHUNK: usize = 256 * 1024;

/// Reads a body of `size` bytes, taking request budget for each chunk before buffering it.
async fn read_body<'a, R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
    size: u32,
    budget: &'a Semaphore,
) -> std::io::Result<(BytesMut, Vec<SemaphorePermit<'a>>)> {
    let size = size as usize;
    let mut frame = BytesMut::new();
    let mut permits = Vec::new();
    while frame.len() < size {
        let chunk = (size - frame.len()).min(READ_CHUNK);
        // `chunk` <= READ_CHUNK fits in u32.
        let permit = budget.acquire_many(chunk as u32).await.map_err(std::io::Error::other)?;
        permits.push(permit);
        // Into the buffer's spare capacity: the bytes are read, not zeroed first.
        let end = frame.len() + chunk;
        frame.reserve(chunk);
        while frame.len() < end {
            let want = (end - frame.len()) as u64;
            if (&mut *reader).take(want).read_buf(&mut frame).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
    Ok((frame, permits))
}

/// Why a connection ended.
#[derive(Debug)]
enum End {
    Eof,
    Idle,
    Shutdown,
    Protocol(String),
    Io(std::io::Error),
}

/// Serves one client until it disconnects, misbehaves or the broker shuts down.
pub async fn serve(node: Arc<Node>, stream: TcpStream, limits: ConnectionLimits, mut shutdown: Shutdown) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    if let Some(bytes) = limits.send_buffer_bytes {
        if let Err(e) = nix::sys::socket::setsockopt(&stream, nix::sys::socket::sockopt::SndBuf, &bytes) {
            tracing::debug!(%peer, error = %e, "setting SO_SNDBUF failed");
        }
    }
    node.metrics.connections.inc();
    node.metrics.connections_opened.inc();
    let end = run(&node, &peer, stream, &limits, &mut shutdown).await;
    node.metrics.connections.dec();
    match end {
        End::Eof | End::Shutdown => tracing::debug!(%peer, "connection closed"),
        End::Idle => tracing::debug!(%peer, "idle connection closed"),
        End::Protocol(reason) => tracing::warn!(%peer, %reason, "closing connection"),
        End::Io(e) => tracing::debug!(%peer, error = %e, "connection error"),
    }
}

/// Requests handled but not yet answered on one connection: produces waiting for their
/// in-sync replicas, queued behind each other. Beyond this the connection stops reading.
const MAX_PIPELINED: usize = 64;

/// A handled request whose response is written in arrival order.
struct Pending {
    api: &'static str,
    started: Instant,
    /// When its handler returned (the end of its local time).
    handled: Instant,
    reply: Reply,
}

async fn run(node: &Node, peer: &str, stream: TcpStream, limits: &ConnectionLimits, shutdown: &mut Shutdown) -> End {
    let (read_half, write_half) = stream.into_split();
    let (tx, rx) = tokio::sync::mpsc::channel::<Pending>(MAX_PIPELINED);
    let reading = read_requests(node, peer, read_half, limits, shutdown, tx);
    let writing = write_responses(node, write_half, rx);
    let (read_end, write_end) = tokio::join!(reading, writing);
    write_end.unwrap_or(read_end)
}

/// Reads and handles requests one after the other (the synchronous part of every request,
/// appends included, happens in arrival order) and queues their replies.
async fn read_requests(
    node: &Node,
    peer: &str,
    read_half: tokio::net::tcp::OwnedReadHalf,
    limits: &ConnectionLimits,
    shutdown: &mut Shutdown,
    tx: tokio::sync::mpsc::Sender<Pending>,
) -> End {
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    loop {
        let size = tokio::select! {
            _ = shutdown.wait() => return End::Shutdown,
            // The writer stopped (a write failed or a request closed the connection).
            _ = tx.closed() => return End::Eof,
            r = tokio::time::timeout(IDLE_TIMEOUT, reader.read_i32()) => match r {
                Err(_) => return End::Idle,
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return End::Eof,
                Ok(Err(e)) => return End::Io(e),
                Ok(Ok(size)) => size,
            },
        };
        if size <= 0 {
            return End::Protocol(format!("invalid request size {size}"));
        }
        let size = size as u32;
        if size > limits.max_request_bytes {
            return End::Protocol(format!(
                "request of {size} bytes exceeds socket.request.max.bytes {}",
                limits.max_request_bytes
            ));
        }
        let (frame, permits) =
            match tokio::time::timeout(BODY_TIMEOUT, read_body(&mut reader, size, &limits.request_budget)).await {
                Err(_) => {
                    return End::Protocol(format!(
                        "request body of {size} bytes did not arrive within {BODY_TIMEOUT:?}"
                    ))
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return End::Protocol(format!("connection closed inside a request of {size} bytes"))
                }
                Ok(Err(e)) => return End::Io(e),
                Ok(Ok(read)) => read,
            };
        node.metrics.network_bytes_in.inc_by(u64::from(size) + 4);
        let api = router::api_of(&frame).map_or("unknown", |a| a.name);
        let started = Instant::now();
        let reply = router::handle_frame(node, peer, frame.freeze()).await;
        let handled = Instant::now();
        // The budget is held until the request is handled (a deferred reply no longer needs it).
        drop(permits);
        let closing = matches!(reply, Reply::Close(_));
        if tx.send(Pending { api, started, handled, reply }).await.is_err() {
            return End::Eof;
        }
        if closing {
            return End::Eof;
        }
    }
}

/// Where one request's time went, as Kafka splits it (RequestMetrics' LocalTimeMs,
/// ResponseQueueTimeMs, RemoteTimeMs, ResponseSendTimeMs); requests are read and handled in
/// arrival order on their connection, so there is no request queue of Kafka's kind.
struct Phases {
    /// In its handler (appends, reads, lookups).
    local: Duration,
    /// Queued behind earlier responses of its connection.
    response_queue: Duration,
    /// Waiting for something else: acks=all replicas, a fetch's min.bytes, a group's join.
    remote: Duration,
}

impl Phases {
    fn observe(&self, node: &Node, api: &'static str, send: Duration) {
        let m = &node.metrics;
        m.observe_request_phase(api, "local", self.local);
        m.observe_request_phase(api, "response_queue", self.response_queue);
        m.observe_request_phase(api, "remote", self.remote);
        m.observe_request_phase(api, "response_send", send);
    }
}

/// Sends a segment file range to the socket with `sendfile(2)`: the kernel copies page cache
/// to socket buffers, and the bytes never pass through this process.
async fn send_file(half: &tokio::net::tcp::OwnedWriteHalf, slice: &FileSlice) -> std::io::Result<()> {
    let stream: &TcpStream = half.as_ref();
    let mut offset = libc::off_t::try_from(slice.position)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "segment position out of range"))?;
    let mut left = slice.len;
    while left > 0 {
        stream.writable().await?;
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile(stream, &*slice.file, Some(&mut offset), left).map_err(std::io::Error::from)
        });
        match sent {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the segment file ended before the range being sent",
                ))
            }
            Ok(n) => left = left.saturating_sub(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes replies in arrival order, waiting for deferred ones; flushes only when no reply is
/// queued, so the responses of pipelined requests go out together. `Some` if the connection
/// must end (a write failed, or a request closes it).
async fn write_responses(
    node: &Node,
    write_half: tokio::net::tcp::OwnedWriteHalf,
    mut rx: tokio::sync::mpsc::Receiver<Pending>,
) -> Option<End> {
    let mut writer = BufWriter::with_capacity(64 * 1024, write_half);
    while let Some(pending) = rx.recv().await {
        let picked = Instant::now();
        let mut reply = pending.reply;
        if let Reply::Deferred(later) = reply {
            reply = later.await;
        }
        let ready = Instant::now();
        let phases = Phases {
            local: pending.handled - pending.started,
            response_queue: picked.saturating_duration_since(pending.handled),
            remote: ready - picked,
        };
        match reply {
            Reply::Frame(buf) => {
                node.metrics.observe_request(pending.api, pending.started.elapsed().as_secs_f64());
                node.metrics.network_bytes_out.inc_by(buf.len() as u64);
                if let Err(e) = writer.write_all(&buf).await {
                    return Some(End::Io(e));
                }
                phases.observe(node, pending.api, ready.elapsed());
            }
            Reply::Parts(parts) => {
                node.metrics.observe_request(pending.api, pending.started.elapsed().as_secs_f64());
                node.metrics.network_bytes_out.inc_by(parts.iter().map(|p| p.len() as u64).sum());
                for part in parts {
                    let written = match part {
                        Part::Bytes(bytes) => writer.write_all(&bytes).await,
                        Part::File(slice) => match writer.flush().await {
                            Ok(()) => send_file(writer.get_ref(), &slice).await,
                            Err(e) => Err(e),
                        },
                    };
                    if let Err(e) = written {
                        return Some(End::Io(e));
                    }
                }
                phases.observe(node, pending.api, ready.elapsed());
            }
            Reply::Nothing => {
                node.metrics.observe_request(pending.api, pending.started.elapsed().as_secs_f64());
                phases.observe(node, pending.api, Duration::ZERO);
            }
            Reply::Close(reason) => {
                node.metrics.observe_request_error(pending.api);
                let _ = writer.flush().await;
                return Some(End::Protocol(reason));
            }
            Reply::Deferred(_) => {
                return Some(End::Protocol("a deferred reply resolved to another deferred reply".into()))
            }
        }
        if rx.is_empty() {
            if let Err(e) = writer.flush().await {
                return Some(End::Io(e));
            }
        }
    }
    let _ = writer.flush().await;
    None
}
