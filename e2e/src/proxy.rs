//! A user-space TCP proxy on `127.0.0.1:0` that forwards to one target (a broker's Kafka or
//! internal port) and can drop every live connection — once with [`TcpProxy::cut_all`], or
//! every N ms with [`TcpProxy::start_cutting`] — or partition the target off the network for a
//! while ([`TcpProxy::partition`], [`TcpProxy::heal`]), or disturb one direction of every
//! connection without closing it ([`TcpProxy::set_fault`]: delay, or blackhole — bytes read
//! and thrown away, so requests or responses vanish while the connection looks alive).
//!
//! Cutting a connection in the middle of a pipelined exchange loses requests and responses in
//! flight, which is exactly what makes a client retry: the broker then has to recognise the
//! retried batches (idempotent producers) instead of appending them twice. Clients only go
//! through the proxy if the broker advertises the proxy's address (`--advertised-kafka`).
//!
//! Plain threads, not tokio: the proxy must keep forwarding whatever the test's own threads
//! or runtimes are doing.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::{Context, Result};

/// A running proxy. Dropping it stops accepting and cuts every connection.
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    cutter: Option<Cutter>,
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy").field("addr", &self.addr).field("target", &self.shared.target).finish()
    }
}

struct Cutter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// One direction of the proxied connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to target: requests.
    Up,
    /// Target to client: responses.
    Down,
}

/// What happens to the bytes of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Pass,
    /// Each chunk is held this long before it is passed on.
    Delay(Duration),
    /// Bytes are read and dropped; the connection stays open.
    Blackhole,
}

impl Fault {
    fn encode(self) -> u64 {
        match self {
            Fault::Pass => 0,
            Fault::Delay(d) => u64::try_from(d.as_millis()).unwrap_or(u64::MAX - 1).clamp(1, u64::MAX - 1),
            Fault::Blackhole => u64::MAX,
        }
    }

    fn decode(v: u64) -> Fault {
        match v {
            0 => Fault::Pass,
            u64::MAX => Fault::Blackhole,
            ms => Fault::Delay(Duration::from_millis(ms)),
        }
    }
}

struct Shared {
    target: SocketAddr,
    /// [`Fault`] of each direction (up, down), encoded.
    faults: [AtomicU64; 2],
    /// Peers whose connections are refused and cut ([`TcpProxy::isolate_source`]).
    blocked_sources: Mutex<std::collections::HashSet<std::net::IpAddr>>,
    /// While `Some`, what clients sent, by connection ([`TcpProxy::start_capturing`]).
    captured: Mutex<Option<HashMap<u64, Vec<u8>>>>,
    stopping: AtomicBool,
    /// While set, new connections are closed at once (a network partition).
    refusing: AtomicBool,
    next_id: AtomicU64,
    accepted: AtomicU64,
    cut: AtomicU64,
    /// Live connections: (client side, upstream side), by id.
    conns: Mutex<HashMap<u64, (TcpStream, TcpStream)>>,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, (TcpStream, TcpStream)>> {
        // A pump thread that panicked while holding the lock leaves a usable map behind.
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn blocked(&self) -> MutexGuard<'_, std::collections::HashSet<std::net::IpAddr>> {
        self.blocked_sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cuts the live connections whose client is `ip`.
    fn cut_from(&self, ip: std::net::IpAddr) -> usize {
        let mut conns = self.conns();
        let ids: Vec<u64> = conns
            .iter()
            .filter(|(_, (client, _))| client.peer_addr().is_ok_and(|p| p.ip() == ip))
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            if let Some((client, upstream)) = conns.remove(id) {
                let _ = client.shutdown(Shutdown::Both);
                let _ = upstream.shutdown(Shutdown::Both);
            }
        }
        self.cut.fetch_add(ids.len() as u64, Ordering::Relaxed);
        ids.len()
    }

    fn cut_all(&self) -> usize {
        let conns: Vec<_> = self.conns().drain().collect();
        for (_, (client, upstream)) in &conns {
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
        }
        self.cut.fetch_add(conns.len() as u64, Ordering::Relaxed);
        conns.len()
    }
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> Result<Self> {
        let listener = crate::broker::unique_local_listener().context("bind proxy listener")?;
        let addr = listener.local_addr().context("proxy local_addr")?;
        let shared = Arc::new(Shared {
            target,
            faults: [AtomicU64::new(0), AtomicU64::new(0)],
            blocked_sources: Mutex::new(std::collections::HashSet::new()),
            captured: Mutex::new(None),
            stopping: AtomicBool::new(false),
            refusing: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("proxy-accept".into())
                .spawn(move || accept_loop(listener, shared))
                .context("spawn proxy acceptor")?
        };
        Ok(Self { addr, shared, acceptor: Some(acceptor), cutter: None })
    }

    /// The address clients should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every live connection (both sides); returns how many were cut.
    pub fn cut_all(&self) -> usize {
        self.shared.cut_all()
    }

    /// A network partition: cuts every live connection (what was in flight is lost) and
    /// closes new ones at once, until [`Self::heal`].
    pub fn partition(&self) -> usize {
        self.shared.refusing.store(true, Ordering::SeqCst);
        self.shared.cut_all()
    }

    /// Ends [`Self::partition`] and every [`Self::set_fault`]: new connections are forwarded
    /// again and bytes pass untouched.
    pub fn heal(&self) {
        self.shared.refusing.store(false, Ordering::SeqCst);
        self.shared.blocked().clear();
        self.set_fault(Direction::Up, Fault::Pass);
        self.set_fault(Direction::Down, Fault::Pass);
    }

    /// Refuses connections from `ip` (a peer's source address) and cuts its live ones, until
    /// [`Self::heal`]; returns how many were cut.
    pub fn isolate_source(&self, ip: std::net::IpAddr) -> usize {
        self.shared.blocked().insert(ip);
        self.shared.cut_from(ip)
    }

    /// Delays or drops the bytes of one direction of every connection, live and new.
    pub fn set_fault(&self, direction: Direction, fault: Fault) {
        self.shared.faults[direction as usize].store(fault.encode(), Ordering::SeqCst);
    }

    /// Cuts every live connection every `every` until [`Self::stop_cutting`] or drop.
    pub fn start_cutting(&mut self, every: Duration) -> Result<()> {
        self.stop_cutting();
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let stop = Arc::clone(&stop);
            let shared = Arc::clone(&self.shared);
            thread::Builder::new()
                .name("proxy-cutter".into())
                .spawn(move || {
                    let step = Duration::from_millis(5).min(every);
                    while !stop.load(Ordering::Relaxed) {
                        let mut waited = Duration::ZERO;
                        while waited < every && !stop.load(Ordering::Relaxed) {
                            thread::sleep(step);
                            waited += step;
                        }
                        if !stop.load(Ordering::Relaxed) {
                            shared.cut_all();
                        }
                    }
                })
                .context("spawn proxy cutter")?
        };
        self.cutter = Some(Cutter { stop, handle });
        Ok(())
    }

    /// Stops the periodic cutting; live connections stay up.
    pub fn stop_cutting(&mut self) {
        if let Some(cutter) = self.cutter.take() {
            cutter.stop.store(true, Ordering::Relaxed);
            let _ = cutter.handle.join();
        }
    }

    /// Records what clients send from now on (requests), until [`Self::take_captured`].
    pub fn start_capturing(&self) {
        *self.shared.captured.lock().unwrap_or_else(|e| e.into_inner()) = Some(HashMap::new());
    }

    /// Stops capturing; returns the bytes each connection sent meanwhile, in connection order
    /// (for Kafka: size-prefixed request frames, back to back).
    pub fn take_captured(&self) -> Vec<Vec<u8>> {
        let taken = self.shared.captured.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
        let mut by_connection: Vec<(u64, Vec<u8>)> = taken.into_iter().collect();
        by_connection.sort_unstable_by_key(|(id, _)| *id);
        by_connection.into_iter().map(|(_, bytes)| bytes).collect()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Connections cut so far (by [`Self::cut_all`] or the cutter).
    pub fn cut_count(&self) -> u64 {
        self.shared.cut.load(Ordering::Relaxed)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop_cutting();
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() so the thread sees `stopping`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.shared.cut_all();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else {
            // EMFILE and friends: back off instead of spinning.
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        let blocked = client.peer_addr().is_ok_and(|peer| shared.blocked().contains(&peer.ip()));
        if shared.refusing.load(Ordering::SeqCst) || blocked {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(upstream) = TcpStream::connect_timeout(&shared.target, Duration::from_secs(2)) else {
            // The broker is down: the client sees a closed connection, as it would without us.
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (Ok(c2), Ok(u2), Ok(c3), Ok(u3)) =
            (client.try_clone(), upstream.try_clone(), client.try_clone(), upstream.try_clone())
        else {
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        shared.conns().insert(id, (c3, u3));
        let done = Arc::new(AtomicU64::new(0));
        for (from, to, direction) in [(client, u2, Direction::Up), (upstream, c2, Direction::Down)] {
            let name = if direction == Direction::Up { "proxy-up" } else { "proxy-down" };
            let for_pump = Arc::clone(&shared);
            let done = Arc::clone(&done);
            let spawned = thread::Builder::new().name(name.into()).spawn(move || {
                let capture = (direction == Direction::Up).then_some((&for_pump.captured, id));
                pump(from, to, &for_pump.faults[direction as usize], capture);
                // The second pump to finish forgets the connection.
                if done.fetch_add(1, Ordering::SeqCst) == 1 {
                    for_pump.conns().remove(&id);
                }
            });
            if spawned.is_err() {
                shared.cut_all();
            }
        }
    }
}

type Captured = Mutex<Option<HashMap<u64, Vec<u8>>>>;

/// Copies `from` to `to` until EOF or an error, then passes the close on; applies the
/// direction's [`Fault`] to each chunk.
fn pump(mut from: TcpStream, mut to: TcpStream, fault: &AtomicU64, capture: Option<(&Captured, u64)>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if let Some((captured, id)) = capture {
                    let mut captured = captured.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(by_connection) = captured.as_mut() {
                        by_connection.entry(id).or_default().extend_from_slice(&buf[..n]);
                    }
                }
                match Fault::decode(fault.load(Ordering::SeqCst)) {
                    Fault::Pass => {}
                    Fault::Delay(d) => thread::sleep(d),
                    Fault::Blackhole => continue,
                }
                if to.write_all(&buf[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind echo server");
        let addr = listener.local_addr().expect("echo addr");
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || {
                    let Ok(mut back) = stream.try_clone() else {
                        return;
                    };
                    let mut from = stream;
                    let _ = std::io::copy(&mut from, &mut back);
                });
            }
        });
        addr
    }

    fn roundtrip(stream: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(msg)?;
        let mut buf = vec![0u8; msg.len()];
        stream.read_exact(&mut buf)?;
        Ok(buf)
    }

    #[test]
    fn forwards_both_ways_and_cut_all_drops_live_connections() {
        let proxy = TcpProxy::start(echo_server()).expect("start proxy");
        let mut a = TcpStream::connect(proxy.addr()).expect("connect through proxy");
        a.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        assert_eq!(roundtrip(&mut a, b"hello").expect("echo"), b"hello");
        assert_eq!(proxy.cut_all(), 1);
        let mut buf = [0u8; 1];
        assert!(matches!(a.read(&mut buf), Ok(0) | Err(_)), "a cut connection is closed");
        let mut b = TcpStream::connect(proxy.addr()).expect("reconnect");
        b.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        assert_eq!(roundtrip(&mut b, b"again").expect("echo after cut"), b"again");
        assert_eq!(proxy.accepted(), 2);
    }

    #[test]
    fn a_blackholed_direction_drops_bytes_and_a_delayed_one_holds_them() {
        let proxy = TcpProxy::start(echo_server()).expect("start proxy");
        let mut a = TcpStream::connect(proxy.addr()).expect("connect through proxy");
        a.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        assert_eq!(roundtrip(&mut a, b"one").expect("echo"), b"one");
        proxy.set_fault(Direction::Down, Fault::Blackhole);
        assert!(roundtrip(&mut a, b"two").is_err(), "the answer is dropped");
        proxy.set_fault(Direction::Down, Fault::Delay(Duration::from_millis(150)));
        a.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let started = std::time::Instant::now();
        assert_eq!(roundtrip(&mut a, b"three").expect("delayed echo"), b"three");
        assert!(started.elapsed() >= Duration::from_millis(150));
        proxy.heal();
        assert_eq!(roundtrip(&mut a, b"four").expect("echo after heal"), b"four");
    }

    #[test]
    fn periodic_cutting_keeps_cutting_until_stopped() {
        let mut proxy = TcpProxy::start(echo_server()).expect("start proxy");
        proxy.start_cutting(Duration::from_millis(20)).expect("cutter");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        // Connections are kept open, so there is always a live one for the cutter to cut
        // (one dropped at once may be gone before the cutter looks, on a loaded machine).
        let mut live = Vec::new();
        while proxy.cut_count() < 3 {
            assert!(std::time::Instant::now() < deadline, "cutter did not cut");
            if let Ok(mut s) = TcpStream::connect(proxy.addr()) {
                let _ = s.write_all(b"x");
                live.push(s);
            }
            thread::sleep(Duration::from_millis(10));
        }
        drop(live);
        proxy.stop_cutting();
        let mut s = TcpStream::connect(proxy.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        thread::sleep(Duration::from_millis(60));
        assert_eq!(roundtrip(&mut s, b"calm").expect("no cuts after stop"), b"calm");
    }
}
