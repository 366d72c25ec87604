//! `strom dev`: a local cluster for development and demos. Each broker is a `strom serve`
//! child process with its flags on its command line (so `ps` shows which is which, and a
//! killed broker can be started again by hand with the same line); broker i serves Kafka on
//! 127.0.0.1:P+i, its internal and HTTP ports are chosen free and printed. The first three
//! brokers are the metadata quorum's voters when there are at least three, else broker 0
//! alone. A broker that exits is reported and the others keep running; Ctrl-C or SIGTERM
//! stops them all (SIGTERM, then SIGKILL after a grace period).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::signals;

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Number of brokers.
    #[arg(long, default_value_t = 1)]
    pub brokers: u16,
    /// Parent directory of the brokers' data directories (broker-0, broker-1, ...).
    #[arg(long, default_value = "./strom-data")]
    pub data_dir: PathBuf,
    /// Kafka port of broker 0; broker i uses port + i.
    #[arg(long, default_value_t = 9092)]
    pub port: u16,
}

/// Why the dev cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("--brokers must be at least 1")]
    NoBrokers,
    #[error("Kafka port {0} for broker {1} is out of range")]
    PortRange(u32, u16),
    #[error("{0}")]
    Io(String),
    #[error("broker {id} exited before becoming ready ({status}); see its log lines above")]
    EarlyExit { id: u16, status: String },
    #[error("broker {0} did not become ready within {1:?}")]
    NotReady(u16, Duration),
}

struct Broker {
    id: u16,
    child: Child,
    kafka: SocketAddr,
    internal: SocketAddr,
    http: SocketAddr,
    data_dir: PathBuf,
}

pub async fn run(args: DevArgs) -> Result<ExitCode, DevError> {
    if args.brokers == 0 {
        return Err(DevError::NoBrokers);
    }
    let exe = std::env::current_exe().map_err(|e| DevError::Io(format!("finding the strom executable: {e}")))?;
    // Every internal port must be known before any broker starts: the voter list names them.
    let internal: Vec<SocketAddr> = (0..args.brokers)
        .map(|_| free_port())
        .collect::<std::io::Result<_>>()
        .map_err(|e| DevError::Io(format!("choosing internal ports: {e}")))?;
    let voter_count = if args.brokers >= 3 { 3 } else { 1 };
    let voters: Vec<String> =
        internal.iter().take(voter_count).enumerate().map(|(id, addr)| format!("{id}@{addr}")).collect();
    let voters = voters.join(",");
    let mut brokers = Vec::new();
    for id in 0..args.brokers {
        let port = u32::from(args.port) + u32::from(id);
        let port = u16::try_from(port).map_err(|_| DevError::PortRange(port, id))?;
        let kafka = SocketAddr::from(([127, 0, 0, 1], port));
        let http = free_port().map_err(|e| DevError::Io(format!("choosing an HTTP port: {e}")))?;
        let internal = internal[usize::from(id)];
        let data_dir = args.data_dir.join(format!("broker-{id}"));
        let mut cmd = Command::new(&exe);
        cmd.arg("serve")
            .args(["--node-id", &id.to_string()])
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--kafka-listen", &kafka.to_string()])
            .args(["--internal-listen", &internal.to_string()])
            .args(["--http-listen", &http.to_string()])
            .args(["--voters", &voters])
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| DevError::Io(format!("starting broker {id}: {e}")))?;
        brokers.push(Broker { id, child, kafka, internal, http, data_dir });
    }
    // No broker is ready before a quorum exists, so all are started before any is awaited.
    for b in &mut brokers {
        wait_ready(b, Duration::from_secs(120)).await?;
        println!(
            "broker {} ready: pid={} kafka={} internal={} http=http://{}/metrics data={}",
            b.id,
            b.child.id().unwrap_or(0),
            b.kafka,
            b.internal,
            b.http,
            b.data_dir.display(),
        );
    }
    println!("metadata quorum voters: {voters}");
    let bootstrap: Vec<String> = brokers.iter().map(|b| b.kafka.to_string()).collect();
    println!("bootstrap servers: {}   (Ctrl-C stops the cluster)", bootstrap.join(","));
    if let Some(first) = brokers.first() {
        println!("admin CLI: export STROM_ADMIN={}   (then e.g. strom cluster describe)", first.internal);
    }
    let _ = std::io::stdout().flush();
    supervise(brokers).await
}

/// Waits for Ctrl-C/SIGTERM while reporting children that exit.
async fn supervise(mut brokers: Vec<Broker>) -> Result<ExitCode, DevError> {
    let mut running: Vec<bool> = vec![true; brokers.len()];
    loop {
        let exited = async {
            loop {
                for (i, b) in brokers.iter_mut().enumerate() {
                    if running[i] {
                        if let Ok(Some(status)) = b.child.try_wait() {
                            return (i, status);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::select! {
            sig = signals::stop_requested() => {
                println!("{sig}: stopping the cluster");
                stop_all(&mut brokers, &running).await;
                return Ok(ExitCode::SUCCESS);
            }
            (i, status) = exited => {
                running[i] = false;
                println!("broker {} exited ({status}); the others keep running", brokers[i].id);
                if running.iter().all(|r| !r) {
                    println!("no broker is running any more");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }
}

async fn stop_all(brokers: &mut [Broker], running: &[bool]) {
    for (b, _) in brokers.iter().zip(running).filter(|(_, r)| **r) {
        if let Some(pid) = b.child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }
    for b in brokers.iter_mut() {
        match tokio::time::timeout(Duration::from_secs(20), b.child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                println!("broker {} did not stop within 20s; killing it", b.id);
                let _ = b.child.kill().await;
            }
        }
    }
}

async fn wait_ready(b: &mut Broker, limit: Duration) -> Result<(), DevError> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(status)) = b.child.try_wait() {
            return Err(DevError::EarlyExit { id: b.id, status: status.to_string() });
        }
        if http_ok(b.http, "/readyz") {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(DevError::NotReady(b.id, limit))
}

/// A blocking one-shot HTTP GET on loopback; true on a 200.
fn http_ok(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if n >= 12 && &buf[9..12] == b"200")
}

fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}
