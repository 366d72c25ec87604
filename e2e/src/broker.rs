//! One `strom serve` child process: its ports, its data directory, its log file, and the
//! faults a test inflicts on it (SIGKILL, SIGTERM, SIGSTOP) followed by a restart with the very
//! same command line.
//!
//! Ports are picked by binding `127.0.0.1:0` and are kept for the life of the value, so a
//! restarted broker comes back on the addresses its clients (and a proxy in front of it)
//! already know. Everything the process writes to stdout/stderr goes to `strom.log` in the
//! test's temp dir; when the value is dropped during a panic (a failing test) the tail of that
//! log is printed, and `STROM_E2E_KEEP=1` keeps the whole temp dir for a post-mortem.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// How long a start (including log recovery) may take before a test gives up.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGTERM may take before the broker is declared hung.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Broker settings a test may choose; `None` leaves the broker's default.
#[derive(Debug, Clone, Default)]
pub struct BrokerOptions {
    /// `--node-id` (default 0).
    pub node_id: Option<i32>,
    /// `--voters`: the metadata quorum (default: this broker alone).
    pub voters: Option<String>,
    /// `--num-partitions`: partitions of auto-created topics and of CreateTopics with -1.
    pub num_partitions: Option<u32>,
    /// `--auto-create-topics-enable`.
    pub auto_create_topics: Option<bool>,
    /// `--log-retention-check-interval-ms`: how often retention runs.
    pub log_retention_check_interval_ms: Option<u64>,
    /// `--log-segment-bytes`: the broker-wide default `segment.bytes`.
    pub log_segment_bytes: Option<u64>,
    /// `--socket-request-max-bytes`: the largest request frame accepted.
    pub socket_request_max_bytes: Option<u64>,
    /// `--advertised-kafka`: the address Metadata hands to clients (e.g. a proxy's).
    pub advertised_kafka: Option<SocketAddr>,
    /// Anything else, appended verbatim after the flags above.
    pub extra_args: Vec<String>,
    /// Environment variables for the process (e.g. the power-cut shim's `LD_PRELOAD`), set
    /// after every inherited `STROM_*` one is removed.
    pub env: Vec<(String, String)>,
}

/// A `strom serve` process owned by a test. Dropping it kills the process.
pub struct BrokerProcess {
    bin: PathBuf,
    options: BrokerOptions,
    kafka_addr: SocketAddr,
    http_addr: SocketAddr,
    internal_addr: SocketAddr,
    // Declared before `tmp` so that the process is gone before its directory is removed.
    child: Option<Child>,
    starts: u32,
    data_dir: PathBuf,
    log_path: PathBuf,
    tmp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for BrokerProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerProcess")
            .field("kafka_addr", &self.kafka_addr)
            .field("http_addr", &self.http_addr)
            .field("pid", &self.pid())
            .field("data_dir", &self.data_dir)
            .finish()
    }
}

/// A parsed HTTP/1.1 response from the broker's observability port.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

impl BrokerProcess {
    /// Starts a broker with default settings and waits until it is ready.
    pub fn start_default() -> Result<Self> {
        Self::launch(BrokerOptions::default())
    }

    /// Starts a broker with `options` and waits until it is ready.
    pub fn launch(options: BrokerOptions) -> Result<Self> {
        let mut broker = Self::new(options)?;
        broker.start()?;
        Ok(broker)
    }

    /// Picks ports and creates the data dir without starting anything, so that a test can
    /// place something (a proxy) in front of the Kafka port before the first start.
    pub fn new(options: BrokerOptions) -> Result<Self> {
        let bin = strom_bin()?;
        let tmp = tempfile::Builder::new().prefix("strom-e2e-").tempdir().context("create the broker's temp dir")?;
        let [kafka_addr, http_addr, internal_addr] = free_local_addrs::<3>()?;
        Self::with_addrs(bin, options, kafka_addr, http_addr, internal_addr, tmp)
    }

    /// A broker on the given addresses (a cluster picks every broker's addresses first, since
    /// the voter list names them).
    pub fn with_addrs(
        bin: PathBuf,
        options: BrokerOptions,
        kafka_addr: SocketAddr,
        http_addr: SocketAddr,
        internal_addr: SocketAddr,
        tmp: tempfile::TempDir,
    ) -> Result<Self> {
        let data_dir = tmp.path().join("data");
        fs::create_dir_all(&data_dir).with_context(|| format!("create data dir {}", data_dir.display()))?;
        let log_path = tmp.path().join("strom.log");
        Ok(Self {
            bin,
            options,
            kafka_addr,
            http_addr,
            internal_addr,
            child: None,
            starts: 0,
            data_dir,
            log_path,
            tmp: Some(tmp),
        })
    }

    /// Sets the address Metadata advertises to clients; takes effect at the next start.
    pub fn set_advertised_kafka(&mut self, addr: SocketAddr) {
        self.options.advertised_kafka = Some(addr);
    }

    /// The full `strom` command line (without the binary).
    pub fn args(&self) -> Vec<String> {
        let o = &self.options;
        let mut args = vec![
            "serve".to_string(),
            "--node-id".into(),
            o.node_id.unwrap_or(0).to_string(),
            "--data-dir".into(),
            self.data_dir.display().to_string(),
            "--kafka-listen".into(),
            self.kafka_addr.to_string(),
            "--internal-listen".into(),
            self.internal_addr.to_string(),
            "--http-listen".into(),
            self.http_addr.to_string(),
        ];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                args.push(format!("--{name}"));
                args.push(v);
            }
        };
        flag("voters", o.voters.clone());
        flag("advertised-kafka", o.advertised_kafka.map(|a| a.to_string()));
        flag("num-partitions", o.num_partitions.map(|v| v.to_string()));
        flag("auto-create-topics-enable", o.auto_create_topics.map(|v| v.to_string()));
        flag("log-retention-check-interval-ms", o.log_retention_check_interval_ms.map(|v| v.to_string()));
        flag("log-segment-bytes", o.log_segment_bytes.map(|v| v.to_string()));
        flag("socket-request-max-bytes", o.socket_request_max_bytes.map(|v| v.to_string()));
        args.extend(o.extra_args.iter().cloned());
        args
    }

    /// Spawns the process (which must not be running) and waits for `/readyz`.
    pub fn start(&mut self) -> Result<()> {
        self.spawn()?;
        self.wait_ready(READY_TIMEOUT)
    }

    /// Spawns the process without waiting for it to become ready.
    pub fn spawn(&mut self) -> Result<()> {
        if self.is_running() {
            bail!("broker pid {:?} is already running", self.pid());
        }
        self.starts += 1;
        let args = self.args();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("open broker log {}", self.log_path.display()))?;
        writeln!(log, "===== e2e: start #{} of {} {} =====", self.starts, self.bin.display(), args.join(" "))
            .context("write broker log marker")?;
        let stderr = log.try_clone().context("clone broker log handle")?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(log)).stderr(Stdio::from(stderr));
        // Every flag also reads a STROM_* variable; the test's command line must be the whole
        // truth, so none leaks in from the environment the tests happen to run in.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("STROM_") {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        let child = cmd.spawn().with_context(|| format!("spawn {} {}", self.bin.display(), args.join(" ")))?;
        self.child = Some(child);
        Ok(())
    }

    /// Polls `/readyz` until it answers 200, the process exits, or `timeout` passes.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit_status()? {
                bail!("strom exited with {status} before becoming ready; log tail:\n{}", self.log_tail(60));
            }
            if let Ok(resp) = self.http_get("/readyz") {
                if resp.status == 200 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("strom not ready on {} within {timeout:?}; log tail:\n{}", self.http_addr, self.log_tail(60));
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    /// SIGKILL: a crash. Reaps the process.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            // Ignore "already exited": the point is that it is gone afterwards.
            let _ = child.kill();
            child.wait().context("reap killed broker")?;
        }
        Ok(())
    }

    /// SIGTERM and wait for a clean exit; SIGKILL and an error if it takes too long.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            bail!("terminate: broker is not running");
        };
        send_signal(child.id(), libc::SIGTERM)?;
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().context("wait for broker exit")? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("strom did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM; log tail:\n{}", self.log_tail(60));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP: the process freezes but keeps its sockets.
    pub fn pause(&self) -> Result<()> {
        send_signal(self.pid().ok_or_else(|| anyhow!("not running"))?, libc::SIGSTOP)
    }

    /// SIGCONT after [`Self::pause`].
    pub fn resume(&self) -> Result<()> {
        send_signal(self.pid().ok_or_else(|| anyhow!("not running"))?, libc::SIGCONT)
    }

    /// Starts again with the same command line, ports and data dir (killing it first if it
    /// is still running), and waits until it is ready.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            self.kill()?;
        }
        self.start()
    }

    /// The process id while a process is spawned.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the spawned process is still alive (not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_exit_status(), Ok(None)) && self.child.is_some()
    }

    /// `Some(status)` once the spawned process has exited; `None` while it runs (or if none
    /// was spawned).
    pub fn try_exit_status(&mut self) -> Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            None => Ok(None),
            Some(child) => child.try_wait().context("poll broker process"),
        }
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.kafka_addr.to_string()
    }

    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka_addr
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The internal gRPC port (raft, controller calls).
    pub fn internal_addr(&self) -> SocketAddr {
        self.internal_addr
    }

    /// `--node-id`.
    pub fn node_id(&self) -> i32 {
        self.options.node_id.unwrap_or(0)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `DATA/<topic>-<partition>`.
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.data_dir.join(format!("{topic}-{partition}"))
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines the broker wrote (all its starts, in order).
    pub fn log_tail(&self, lines: usize) -> String {
        match fs::read(&self.log_path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(no log at {}: {e})", self.log_path.display()),
        }
    }

    /// Resident set size of the broker process, from `/proc/<pid>/status`.
    pub fn rss_bytes(&self) -> Result<u64> {
        rss_of(self.pid().ok_or_else(|| anyhow!("broker is not running"))?)
    }

    /// `GET path` on the HTTP port with a minimal HTTP/1.1 client.
    pub fn http_get(&self, path: &str) -> Result<HttpResponse> {
        http_get(self.http_addr, path)
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "----- strom log tail ({}) -----\n{}\n----- end of strom log -----",
                self.log_path.display(),
                self.log_tail(80)
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::env::var_os("STROM_E2E_KEEP").is_some() {
            if let Some(tmp) = self.tmp.take() {
                eprintln!("STROM_E2E_KEEP: kept {}", tmp.keep().display());
            }
        }
    }
}

/// The `strom` binary: `$STROM_BIN`, else the workspace's release build, else its debug build.
pub fn strom_bin() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("STROM_BIN") {
        let bin = PathBuf::from(bin);
        if bin.is_file() {
            return Ok(bin);
        }
        bail!("STROM_BIN={} is not a file", bin.display());
    }
    let workspace =
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let mut targets = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        targets.push(PathBuf::from(dir));
    }
    targets.push(workspace.join("target"));
    for profile in ["release", "debug"] {
        for target in &targets {
            let bin = target.join(profile).join("strom");
            if bin.is_file() {
                return Ok(bin);
            }
        }
    }
    bail!(
        "no strom binary under {}: build it first: cargo build --release -p broker",
        workspace.join("target").display()
    )
}

/// Resident set size of process `pid`, from `/proc/<pid>/status`.
pub fn rss_of(pid: u32) -> Result<u64> {
    let status =
        fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("read /proc/{pid}/status"))?;
    let line =
        status.lines().find(|l| l.starts_with("VmRSS:")).ok_or_else(|| anyhow!("no VmRSS in /proc/{pid}/status"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("parse {line:?}"))?;
    Ok(kb * 1024)
}

/// `N` distinct free loopback addresses. All listeners are held until every port is known,
/// and a port handed out once in this process is never handed out again (a cluster asks for
/// its brokers' ports one broker at a time, and the kernel readily reuses a port that was just
/// released). Another process may still grab one before the broker binds it, which is rare
/// enough on a test machine.
pub fn free_local_addrs<const N: usize>() -> Result<[SocketAddr; N]> {
    let listeners = (0..N).map(|_| unique_local_listener()).collect::<Result<Vec<_>>>()?;
    let addrs = listeners.iter().map(|l| l.local_addr().context("local_addr")).collect::<Result<Vec<_>>>()?;
    addrs.try_into().map_err(|_| anyhow!("expected {N} addresses"))
}

/// A listener on a loopback port no other caller in this process has been given.
pub fn unique_local_listener() -> Result<TcpListener> {
    static HANDED_OUT: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());
    let mut rejected = Vec::new();
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
        let port = listener.local_addr().context("local_addr")?.port();
        if HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return Ok(listener);
        }
        // Held until we return, so the kernel offers a different port next time.
        rejected.push(listener);
    }
}

/// A minimal HTTP/1.1 GET (`Connection: close`, content-length or chunked bodies).
pub fn http_get(addr: SocketAddr, path: &str) -> Result<HttpResponse> {
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: strom-e2e\r\nConnection: close\r\n\r\n")
        .context("send HTTP request")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).context("read HTTP response")?;
    let _ = stream.shutdown(Shutdown::Both);
    parse_http_response(&raw)
}

fn parse_http_response(raw: &[u8]) -> Result<HttpResponse> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("HTTP response without end of headers ({} bytes)", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow!("bad status line {status_line:?}"))?
        .parse()
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(HttpResponse { status, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data.windows(2).position(|w| w == b"\r\n").ok_or_else(|| anyhow!("truncated chunk size line"))?;
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).with_context(|| format!("bad chunk size {size_hex:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            bail!("truncated chunk: want {size}, have {}", data.len());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// Sends `signal` to `pid`.
#[allow(unsafe_code)]
fn send_signal(pid: u32, signal: libc::c_int) -> Result<()> {
    let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours; the pid is that of a
    // child this process spawned and has not reaped yet, so it cannot name another process.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("kill({pid}, {signal})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_responses() {
        let plain =
            parse_http_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").expect("plain response parses");
        assert_eq!((plain.status, plain.body.as_str()), (200, "ok"));
        let chunked = parse_http_response(
            b"HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\n\r\n3\r\nnot\r\n6\r\n ready\r\n0\r\n\r\n",
        )
        .expect("chunked response parses");
        assert_eq!((chunked.status, chunked.body.as_str()), (503, "not ready"));
    }
}
