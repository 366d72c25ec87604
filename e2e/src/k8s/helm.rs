//! The real `helm` CLI (helm.sh/helm/v4, built from its Go module by e2e/k8s/helm/build.sh
//! once per machine) against the test's control plane, and the chart under test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::controlplane::{ControlPlane, KubectlRun};
use crate::process::{run_to_end, run_with_stdin};

const BUILD_DEADLINE: Duration = Duration::from_secs(30 * 60);
const HELM_DEADLINE: Duration = Duration::from_secs(180);

/// The `helm` binary, built on first use.
pub fn helm_bin() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let mut cmd = Command::new("bash");
        cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/k8s/helm/build.sh"));
        match run_to_end(cmd, "e2e/k8s/helm/build.sh", BUILD_DEADLINE) {
            Ok(f) if f.code == 0 => Ok(PathBuf::from(f.stdout.trim()).join("helm")),
            Ok(f) => Err(format!("e2e/k8s/helm/build.sh exited {}:\n{}{}", f.code, f.stdout, f.stderr)),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .clone()
    .map_err(|e| anyhow!("helm could not be built (needs go >= 1.26): {e}"))
}

/// `charts/strom` in this checkout.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/strom")
}

/// helm with the control plane's kubeconfig (or none, for lint and template).
#[derive(Debug)]
pub struct Helm {
    bin: PathBuf,
    kubeconfig: Option<PathBuf>,
    /// HELM_CACHE_HOME and friends: a directory of the test's own.
    home: PathBuf,
}

impl Helm {
    /// helm for `lint` and `template` (no cluster).
    pub fn offline(home: &Path) -> Result<Helm> {
        Ok(Helm { bin: helm_bin()?, kubeconfig: None, home: home.to_path_buf() })
    }

    /// helm against `plane`, with its admin kubeconfig.
    pub fn against(plane: &ControlPlane) -> Result<Helm> {
        Self::with_kubeconfig(plane.kubeconfig(), &plane.dir().join("helm-home"))
    }

    /// helm against whatever cluster `kubeconfig` names (a real one, say).
    pub fn with_kubeconfig(kubeconfig: &Path, home: &Path) -> Result<Helm> {
        Ok(Helm { bin: helm_bin()?, kubeconfig: Some(kubeconfig.to_path_buf()), home: home.to_path_buf() })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args);
        for (var, dir) in [("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")] {
            cmd.env(var, self.home.join(dir));
        }
        match &self.kubeconfig {
            Some(k) => cmd.env("KUBECONFIG", k),
            None => cmd.env("KUBECONFIG", "/dev/null"),
        };
        cmd
    }

    /// Runs helm; whatever its exit code.
    pub fn run(&self, args: &[&str]) -> Result<KubectlRun> {
        run_to_end(self.command(args), &format!("helm {}", args.join(" ")), HELM_DEADLINE)
    }

    /// Runs helm with `input` on stdin.
    pub fn run_with_input(&self, args: &[&str], input: &Path) -> Result<KubectlRun> {
        let file = std::fs::File::open(input)?;
        run_with_stdin(self.command(args), Stdio::from(file), &format!("helm {}", args.join(" ")), HELM_DEADLINE)
    }

    /// helm that must exit 0; its stdout.
    pub fn ok(&self, args: &[&str]) -> Result<String> {
        let run = self.run(args)?;
        if run.code != 0 {
            bail!("helm {} exited {}: {}{}", args.join(" "), run.code, run.stdout, run.stderr);
        }
        Ok(run.stdout)
    }
}
