//! The operator under test: `strom-operator run` as a process with the test's kubeconfig,
//! watching only the test's namespace and holding its Lease there, with its log in the
//! control plane's directory. Dropping it SIGKILLs it.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::controlplane::{die_with_parent, ControlPlane};
use crate::broker::{free_local_addrs, http_get, strom_bin};

/// The `strom-operator` binary: `STROM_OPERATOR_BIN`, else beside the `strom` binary.
pub fn operator_bin() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("STROM_OPERATOR_BIN") {
        let bin = PathBuf::from(bin);
        if bin.is_file() {
            return Ok(bin);
        }
        bail!("STROM_OPERATOR_BIN={} is not a file", bin.display());
    }
    let strom = strom_bin()?;
    let bin = strom.with_file_name("strom-operator");
    if !bin.is_file() {
        bail!("no strom-operator beside {}: build it first: cargo build --release -p operator", strom.display());
    }
    Ok(bin)
}

/// A running operator process.
#[derive(Debug)]
pub struct OperatorProcess {
    child: Option<Child>,
    pub identity: String,
    pub http: SocketAddr,
    log: PathBuf,
}

impl OperatorProcess {
    /// Starts `strom-operator run` for `namespace` as `identity`, with `extra` flags.
    pub fn start(plane: &ControlPlane, namespace: &str, identity: &str, extra: &[&str]) -> Result<OperatorProcess> {
        Self::start_as(plane, namespace, namespace, identity, extra, plane.kubeconfig())
    }

    /// As [`OperatorProcess::start`], with the Lease in `lease_namespace` and the credentials
    /// of `kubeconfig` (a ServiceAccount's token, so that its RBAC applies).
    pub fn start_as(
        plane: &ControlPlane,
        namespace: &str,
        lease_namespace: &str,
        identity: &str,
        extra: &[&str],
        kubeconfig: &Path,
    ) -> Result<OperatorProcess> {
        let bin = operator_bin()?;
        let [http] = free_local_addrs::<1>()?;
        let log = plane.dir().join(format!("operator-{namespace}-{identity}.log"));
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("open {}", log.display()))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("run")
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--lease-namespace={lease_namespace}"))
            .arg(format!("--identity={identity}"))
            .arg(format!("--http-listen={http}"))
            .arg("--lease-duration-seconds=6")
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", std::env::var("STROM_E2E_OPERATOR_LOG").unwrap_or_else(|_| "info,operator=debug".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        die_with_parent(&mut cmd);
        let child = cmd.spawn().with_context(|| format!("spawn {}", bin.display()))?;
        println!("operator {identity}: pid {}, log {}", child.id(), log.display());
        Ok(OperatorProcess { child: Some(child), identity: identity.to_string(), http, log })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, as a crash or an evicted pod.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits (at most `timeout`) for the exit code.
    pub fn stop(&mut self, timeout: Duration) -> Result<Option<i32>> {
        let Some(mut child) = self.child.take() else { return Ok(None) };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.code());
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("strom-operator did not stop within {timeout:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Still running?
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// `/metrics` as text.
    pub fn metrics(&self) -> Result<String> {
        Ok(http_get(self.http, "/metrics")?.body)
    }

    /// A metric's value (first sample whose line starts with `name`).
    pub fn metric(&self, name: &str) -> Result<f64> {
        let text = self.metrics()?;
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .with_context(|| format!("no metric {name} in:\n{text}"))
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
