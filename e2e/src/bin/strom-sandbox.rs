//! `strom-sandbox`: a Kubernetes to try strom-operator with kubectl on a machine that has
//! none (docs/sandbox.md). It runs, in the foreground, the control plane the e2e tests use
//! (etcd, kube-apiserver, kube-controller-manager, built from Go modules:
//! `e2e::k8s::controlplane`) and the pod runner for one namespace (`e2e::k8s::kubelet`),
//! which runs that namespace's pods as local processes: a container's `command[0]` `strom`
//! is the `strom` binary, `strom-operator` the `strom-operator` binary.
//!
//! Once pods can run it prints one line on stdout,
//! `sandbox ready: kubeconfig=<absolute path> namespace=<ns>`; everything else (progress, how
//! to look, the libraries' own messages) goes to stderr. Ctrl-C or SIGTERM stops the pods,
//! then the control plane, and it exits 0. Needs root: the pods' DNS names go into
//! `/etc/hosts`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use e2e::k8s::controlplane::{self, ControlPlane};
use e2e::k8s::kubelet::PodRunner;
use nix::fcntl::{Flock, FlockArg};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, Parser)]
#[command(
    name = "strom-sandbox",
    about = "A local Kubernetes control plane and pod runner for trying strom-operator with kubectl"
)]
struct Cli {
    /// Where the kubeconfig, the control plane's files and logs, and the pods' logs and
    /// volumes go; created if missing. The cluster state of an earlier sandbox there is
    /// replaced: each start is an empty cluster. Default: a new directory under the system
    /// temp dir.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The namespace whose pods run here; created if missing.
    #[arg(long, default_value = "strom")]
    namespace: String,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strom-sandbox: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let mut ready_line = stdout_for_the_ready_line()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    runtime.block_on(async move {
        let mut sigterm = signal(SignalKind::terminate()).context("handle SIGTERM")?;
        let mut sigint = signal(SignalKind::interrupt()).context("handle SIGINT")?;

        // Started on a thread of its own so that a signal is answered while it starts (the
        // first run builds the control plane for minutes). If one comes first, returning
        // ends the process, and what was started dies with it (PR_SET_PDEATHSIG).
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("sandbox-start".into())
            .spawn(move || {
                let _ = tx.send(Sandbox::start(&cli));
            })
            .context("spawn the start thread")?;
        let sandbox = tokio::select! {
            started = rx => started.map_err(|_| anyhow!("the start thread ended without a result"))??,
            _ = sigterm.recv() => bail!("SIGTERM while starting; what was started ends with this process"),
            _ = sigint.recv() => bail!("interrupted while starting; what was started ends with this process"),
        };

        sandbox.explain();
        writeln!(
            ready_line,
            "sandbox ready: kubeconfig={} namespace={}",
            sandbox.kubeconfig.display(),
            sandbox.namespace
        )
        .and_then(|()| ready_line.flush())
        .context("print the ready line")?;

        let why = tokio::select! {
            _ = sigterm.recv() => "SIGTERM",
            _ = sigint.recv() => "interrupt",
        };
        eprintln!("strom-sandbox: {why}: stopping the pods, then the control plane");
        tokio::task::spawn_blocking(move || sandbox.stop()).await.context("stopping")?;
        eprintln!("strom-sandbox: stopped");
        Ok(())
    })
}

/// The ready line is the only thing on stdout: this keeps a handle on the real stdout for it
/// and points file descriptor 1 at stderr, so that the libraries' progress messages
/// (`println!` in the control plane and pod runner) go to stderr. Called before any other
/// thread exists, so no child inherits the handle between the dup and FD_CLOEXEC (a child
/// holding it would keep a reader of stdout from seeing its end when the sandbox exits).
fn stdout_for_the_ready_line() -> Result<fs::File> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let stdout = nix::unistd::dup(std::io::stdout()).context("dup stdout")?;
    fcntl(&stdout, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("set FD_CLOEXEC on stdout's copy")?;
    nix::unistd::dup2_stdout(std::io::stderr()).context("point stdout at stderr")?;
    Ok(fs::File::from(stdout))
}

/// What runs, in the order it is stopped: the pod runner (which needs the apiserver to stop
/// its pods and delete its Node), then the control plane.
struct Sandbox {
    runner: PodRunner,
    plane: ControlPlane,
    dir: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    /// Held while the sandbox runs: a second sandbox in the same directory would remove
    /// this one's cluster state.
    _lock: Flock<fs::File>,
}

impl Sandbox {
    fn start(cli: &Cli) -> Result<Sandbox> {
        let commands = pod_commands()?;
        let dir = sandbox_dir(cli.dir.as_deref())?;
        let lock = lock_dir(&dir)?;
        eprintln!("strom-sandbox: files and logs in {}", dir.display());
        // The pod runner keeps its log, the pods' output and the claims' volumes in
        // `<dir>/runner-<namespace>`; an earlier sandbox's would not match the new cluster.
        let runner_dir = dir.join(format!("runner-{}", cli.namespace));
        match fs::remove_dir_all(&runner_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("remove the earlier sandbox's {}", runner_dir.display()));
            }
            _ => {}
        }

        eprintln!(
            "strom-sandbox: building the control plane (the first run on a machine downloads Go \
             modules and compiles for about 4 minutes on 2 cores; later runs find it cached)"
        );
        controlplane::binaries()?;
        eprintln!("strom-sandbox: starting etcd, kube-apiserver and kube-controller-manager");
        let plane = ControlPlane::start_in(&dir)?;
        plane.ensure_namespace(&cli.namespace)?;
        let commands: Vec<(&str, &Path)> = commands.iter().map(|(c, p)| (*c, p.as_path())).collect();
        let runner = PodRunner::start(&plane, &cli.namespace, &commands)?;
        let kubeconfig = dir.join("kubeconfig");
        write_replacing(&kubeconfig, &fs::read(plane.kubeconfig()).context("read the admin kubeconfig")?)?;
        Ok(Sandbox { runner, plane, dir, kubeconfig, namespace: cli.namespace.clone(), _lock: lock })
    }

    /// How to look, on stderr, just before the ready line.
    fn explain(&self) {
        let kubectl = self.plane.kubectl_bin().display();
        let kubeconfig = self.kubeconfig.display();
        let ns = &self.namespace;
        eprintln!("strom-sandbox: kubectl of this control plane's release: {kubectl}");
        eprintln!("strom-sandbox: try `{kubectl} --kubeconfig {kubeconfig} -n {ns} get all,pvc,events`");
        eprintln!(
            "strom-sandbox: logs: {}/*.log (control plane), {}/runner-{ns}/ (pod runner and pods)",
            self.dir.display(),
            self.dir.display()
        );
        eprintln!("strom-sandbox: Ctrl-C or SIGTERM stops everything");
    }

    fn stop(self) {
        let Sandbox { runner, plane, .. } = self;
        drop(runner); // stops the pods, withdraws their names, deletes the Node
        plane.stop();
    }
}

/// The local binaries standing in for container images: `strom` (required) and
/// `strom-operator` (when built), from `STROM_BIN` / `STROM_OPERATOR_BIN` or else beside this
/// executable (`target/release/` under `cargo run --release`).
fn pod_commands() -> Result<Vec<(&'static str, PathBuf)>> {
    let exe = std::env::current_exe().context("find this executable")?;
    let beside = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let find = |var: &str, name: &str| -> Result<Option<PathBuf>> {
        if let Some(path) = std::env::var_os(var) {
            let path = PathBuf::from(path);
            if !path.is_file() {
                bail!("{var}={} is not a file", path.display());
            }
            return Ok(Some(path));
        }
        let path = beside.join(name);
        Ok(path.is_file().then_some(path))
    };
    let mut commands = Vec::new();
    match find("STROM_BIN", "strom")? {
        Some(strom) => commands.push(("strom", strom)),
        None => bail!(
            "no strom binary at {} (or STROM_BIN): build it first: cargo build --release -p broker",
            beside.join("strom").display()
        ),
    }
    match find("STROM_OPERATOR_BIN", "strom-operator")? {
        Some(operator) => commands.push(("strom-operator", operator)),
        None => eprintln!(
            "strom-sandbox: no strom-operator at {} (or STROM_OPERATOR_BIN): pods running it will \
             not start; run the operator outside, or build it: cargo build --release -p operator",
            beside.join("strom-operator").display()
        ),
    }
    for (command, path) in &commands {
        eprintln!("strom-sandbox: a container's command {command} runs {}", path.display());
    }
    Ok(commands)
}

/// `dir` (created if missing) or a new directory under the temp dir, as an absolute path.
fn sandbox_dir(dir: Option<&Path>) -> Result<PathBuf> {
    let dir = match dir {
        Some(dir) => {
            fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
            dir.to_path_buf()
        }
        None => tempfile::Builder::new()
            .prefix("strom-sandbox-")
            .tempdir()
            .context("create a directory under the temp dir")?
            .keep(),
    };
    fs::canonicalize(&dir).with_context(|| format!("resolve {}", dir.display()))
}

fn lock_dir(dir: &Path) -> Result<Flock<fs::File>> {
    let path = dir.join("sandbox.lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| match e {
        nix::errno::Errno::EWOULDBLOCK => anyhow!("another strom-sandbox runs in {}", dir.display()),
        e => anyhow!("flock {}: {e}", path.display()),
    })
}

/// Writes `path` through a temp file and a rename, so a kubectl never reads half of it.
fn write_replacing(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("rename {} to {}", tmp.display(), path.display()))
}
