//! Running the `strom` admin CLI the way a script would: a child process with `--admin`
//! pointing at one broker's internal port, its exit code, stdout and stderr.

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::broker::strom_bin;

/// How long one CLI run may take before the test gives up on it (and kills it).
pub const CLI_DEADLINE: Duration = Duration::from_secs(300);

/// One finished CLI run.
#[derive(Debug, Clone)]
pub struct CliRun {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// This run, if it exited 0.
    pub fn success(self) -> Result<CliRun> {
        if self.code != 0 {
            bail!(
                "strom {} exited {}:\nstdout: {}\nstderr: {}",
                self.args.join(" "),
                self.code,
                self.stdout,
                self.stderr
            );
        }
        Ok(self)
    }

    /// stdout parsed as JSON (for `--output json` runs).
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("strom {}: stdout is not JSON: {:?}", self.args.join(" "), self.stdout))
    }
}

/// Runs `strom <args> --admin <admin>` to completion.
pub fn strom(admin: SocketAddr, args: &[&str]) -> Result<CliRun> {
    let bin = strom_bin()?;
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(["--admin".to_string(), admin.to_string()]);
    let mut cmd = Command::new(&bin);
    cmd.args(&all).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STROM_") {
            cmd.env_remove(&key);
        }
    }
    let mut child = cmd.spawn().with_context(|| format!("spawn {} {}", bin.display(), all.join(" ")))?;
    let mut stdout_pipe = child.stdout.take().ok_or_else(|| anyhow!("no stdout pipe"))?;
    let mut stderr_pipe = child.stderr.take().ok_or_else(|| anyhow!("no stderr pipe"))?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout_pipe.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + CLI_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().context("wait for strom")? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("strom {} did not finish within {CLI_DEADLINE:?}", all.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().map_err(|_| anyhow!("stdout reader panicked"))?;
    let stderr = err.join().map_err(|_| anyhow!("stderr reader panicked"))?;
    Ok(CliRun { args: all, code: status.code().unwrap_or(-1), stdout, stderr })
}
