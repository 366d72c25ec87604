//! Running the `strom` admin CLI the way a script would: a child process with `--admin`
//! pointing at one broker's internal port, its exit code, stdout and stderr.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::broker::strom_bin;
use crate::process::{run_to_end, Finished};

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
    cmd.args(&all);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STROM_") {
            cmd.env_remove(&key);
        }
    }
    let what = format!("strom {}", all.join(" "));
    let Finished { code, stdout, stderr } = run_to_end(cmd, &what, CLI_DEADLINE)?;
    Ok(CliRun { args: all, code, stdout, stderr })
}
