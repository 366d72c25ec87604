//! A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver (its own CA, serving
//! certificate, service-account signing key, RBAC authorization) and kube-controller-manager,
//! with a kubectl of the same release, built from Go modules by `e2e/k8s/controlplane/build.sh` (once per machine).
//!
//! One control plane serves every test of a test binary ([`ControlPlane::shared`]); each test
//! takes a namespace of its own ([`ControlPlane::namespace`]). The processes are started from
//! a keeper thread that lives as long as the test process and are spawned with
//! `PR_SET_PDEATHSIG`, so they die with the test process however it ends (a failed test, a
//! panic, SIGKILL).
//!
//! A program that runs a control plane for people to use (`strom-sandbox`) starts one in a
//! directory of its choice ([`ControlPlane::start_in`]) and stops it in order before it exits
//! ([`ControlPlane::stop`], also on drop); its components die with the process too.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::broker::{free_local_addrs, http_get};
use crate::cluster::wait_until;
use crate::process::{run_to_end, run_with_stdin, Finished};

/// The first build downloads ~400 MB of modules and compiles for many minutes on 2 cores.
const BUILD_DEADLINE: Duration = Duration::from_secs(60 * 60);
/// From spawn to a healthy etcd, a ready apiserver, and a controller manager at work.
const START_DEADLINE: Duration = Duration::from_secs(120);
/// From SIGTERM to a component's exit before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// One kubectl call.
pub const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);
/// The Service CIDR the apiserver hands ClusterIPs from.
const SERVICE_CIDR: &str = "10.0.0.0/24";

fn build_script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/k8s/controlplane/build.sh")
}

/// The directory with `etcd`, `kube-apiserver` and `kube-controller-manager`, built by the
/// first caller in this process (or found in the cache).
pub fn binaries() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let mut cmd = Command::new("bash");
        cmd.arg(build_script());
        match run_to_end(cmd, "e2e/k8s/controlplane/build.sh", BUILD_DEADLINE) {
            Ok(f) if f.code == 0 => Ok(PathBuf::from(f.stdout.trim())),
            Ok(f) => Err(format!("e2e/k8s/controlplane/build.sh exited {}:\n{}{}", f.code, f.stdout, f.stderr)),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .clone()
    .map_err(|e| anyhow!("the Kubernetes control plane could not be built (needs go >= 1.24): {e}"))
}

/// A running control plane and how to reach it.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    server: String,
    processes: Mutex<Vec<Component>>,
}

#[derive(Debug)]
struct Component {
    name: &'static str,
    child: Child,
}

/// What [`ControlPlane::kubectl`] printed and how it exited.
pub type KubectlRun = Finished;

impl ControlPlane {
    /// The control plane of this test process, started by the first caller.
    pub fn shared() -> Result<&'static ControlPlane> {
        static SHARED: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| start_on_keeper_thread(test_process_dir()).map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!("starting the Kubernetes control plane: {e}"))
    }

    /// A control plane of the caller's own, with its files in `dir` (created if missing). The
    /// state of an earlier control plane there (etcd's data, the certificates) is removed
    /// first, so it starts as an empty cluster; other files in `dir` are left alone. Its
    /// components die with this process, as the shared one's do, and are stopped in order by
    /// [`ControlPlane::stop`] or on drop.
    pub fn start_in(dir: &Path) -> Result<ControlPlane> {
        fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        for state in STATE_DIRS {
            let path = dir.join(state);
            match fs::remove_dir_all(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("remove the earlier control plane's {}", path.display()));
                }
                _ => {}
            }
        }
        start_on_keeper_thread(dir.to_path_buf())
    }

    /// Stops the components, the last started first (kube-controller-manager, kube-apiserver,
    /// etcd): SIGTERM, then SIGKILL after 10 s. A second call does nothing. Whatever
    /// runs pods against the control plane (a pod runner) should be stopped before it.
    pub fn stop(&self) {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(mut component) = processes.pop() {
            component.stop();
        }
    }

    /// The admin kubeconfig (client certificate in `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Where the control plane keeps its files and logs (`etcd.log`, `kube-apiserver.log`, ...).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubectl of the control plane's release (built with it, so no version skew).
    pub fn kubectl_bin(&self) -> &Path {
        &self.kubectl
    }

    /// Runs kubectl against this control plane.
    pub fn kubectl(&self, args: &[&str]) -> Result<KubectlRun> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        run_to_end(cmd, &format!("kubectl {}", args.join(" ")), KUBECTL_DEADLINE)
    }

    /// Runs kubectl with `input` (a manifest, say) on its stdin.
    pub fn kubectl_with_input(&self, args: &[&str], input: &str) -> Result<KubectlRun> {
        let path = self.dir.join(format!("stdin-{}.yaml", unique()));
        fs::write(&path, input).with_context(|| format!("write {}", path.display()))?;
        let file = fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        let run = run_with_stdin(cmd, Stdio::from(file), &format!("kubectl {}", args.join(" ")), KUBECTL_DEADLINE);
        let _ = fs::remove_file(&path);
        run
    }

    /// kubectl that must exit 0; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let run = self.kubectl(args)?;
        if run.code != 0 {
            bail!("kubectl {} exited {}: {}{}", args.join(" "), run.code, run.stdout, run.stderr);
        }
        Ok(run.stdout)
    }

    /// A fresh namespace `<prefix>-<n>` for one test, once the controller manager has given
    /// it its `default` ServiceAccount (so pods can be created in it). Prints how to look at
    /// it with kubectl, which a failing test shows.
    pub fn namespace(&self, prefix: &str) -> Result<String> {
        let name = format!("{prefix}-{}", unique());
        println!(
            "control plane: namespace {name}; look with `kubectl --kubeconfig {} -n {name} get all,pvc,events`; logs in {}",
            self.kubeconfig.display(),
            self.dir.display()
        );
        self.ensure_namespace(&name)?;
        Ok(name)
    }

    /// Namespace `name`, created unless it exists, once the controller manager has given it
    /// its `default` ServiceAccount (so pods can be created in it).
    pub fn ensure_namespace(&self, name: &str) -> Result<()> {
        let run = self.kubectl(&["create", "namespace", name])?;
        if run.code != 0 && !run.stderr.contains("AlreadyExists") {
            bail!("kubectl create namespace {name} exited {}: {}{}", run.code, run.stdout, run.stderr);
        }
        wait_until(START_DEADLINE, || {
            let run = self.kubectl(&["-n", name, "get", "serviceaccount", "default", "-o", "name"])?;
            anyhow::ensure!(run.code == 0, "no default ServiceAccount in {name} yet: {}", run.stderr.trim());
            Ok(())
        })
    }

    /// The tail of a component's log, for failure messages.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let text = fs::read_to_string(self.dir.join(format!("{component}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// A number no other caller in this process gets, for names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the control plane in `dir` on a thread that never returns, so `PR_SET_PDEATHSIG`
/// (which fires when the spawning *thread* ends) fires only when the process ends.
fn start_on_keeper_thread(dir: PathBuf) -> Result<ControlPlane> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::Builder::new()
        .name("k8s-control-plane".into())
        .spawn(move || {
            let _ = tx.send(start(dir));
            loop {
                thread::park();
            }
        })
        .context("spawn the control plane's keeper thread")?;
    rx.recv().context("the control plane's keeper thread ended")?
}

/// A control plane's files live in `<tmp>/strom-e2e-k8s-<pid of the test process>`, kept
/// after the process for a look at the logs.
const DIR_PREFIX: &str = "strom-e2e-k8s-";

/// What a control plane keeps in its directory besides logs and the kubeconfig (which are
/// rewritten at each start): etcd's data, the PKI, the components' self-made certificates.
const STATE_DIRS: [&str; 4] = ["etcd", "pki", "apiserver-certs", "controller-manager-certs"];

/// This test process's directory, emptied, after removing those of earlier test processes.
fn test_process_dir() -> PathBuf {
    remove_stale_dirs();
    let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Removes the directories of earlier test processes that are gone.
fn remove_stale_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(DIR_PREFIX).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Certificates, etcd, kube-apiserver, kube-controller-manager in `dir`; each waited for in
/// turn. On a failure the components started so far are stopped (on drop).
fn start(dir: PathBuf) -> Result<ControlPlane> {
    let bin = binaries()?;
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let pki = dir.join("pki");
    fs::create_dir_all(&pki)?;
    make_pki(&pki)?;

    let [etcd_client, etcd_peer, apiserver, controller_manager] = free_local_addrs::<4>()?;
    let server = format!("https://{apiserver}");
    let kubeconfig = dir.join("admin.kubeconfig");
    fs::write(&kubeconfig, admin_kubeconfig(&server, &pki)).context("write the admin kubeconfig")?;
    let plane = ControlPlane {
        dir: dir.clone(),
        kubeconfig,
        kubectl: bin.join("kubectl"),
        server,
        processes: Mutex::new(Vec::new()),
    };

    let p = |name: &str| pki.join(name).display().to_string();
    let etcd_url = format!("http://{etcd_client}");
    plane.spawn(
        "etcd",
        &bin.join("etcd"),
        &[
            "--name=e2e".into(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://{etcd_peer}"),
            format!("--initial-advertise-peer-urls=http://{etcd_peer}"),
            format!("--initial-cluster=e2e=http://{etcd_peer}"),
            // A test cluster's state is thrown away with it: no fsync per write.
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ],
    )?;
    plane.wait_for("etcd", "etcd's /health", || {
        Ok(http_get(etcd_client, "/health").map(|r| r.status == 200 && r.body.contains("true")).unwrap_or(false))
    })?;

    plane.spawn(
        "kube-apiserver",
        &bin.join("kube-apiserver"),
        &[
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={}", apiserver.ip()),
            format!("--advertise-address={}", apiserver.ip()),
            format!("--secure-port={}", apiserver.port()),
            format!("--cert-dir={}", dir.join("apiserver-certs").display()),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--service-account-key-file={}", p("service-account.pub")),
            format!("--service-account-signing-key-file={}", p("service-account.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
        ],
    )?;
    plane.wait_for("kube-apiserver", "kube-apiserver's /readyz", || {
        Ok(plane.kubectl(&["get", "--raw", "/readyz"])?.stdout.trim() == "ok")
    })?;

    plane.spawn(
        "kube-controller-manager",
        &bin.join("kube-controller-manager"),
        &[
            format!("--kubeconfig={}", plane.kubeconfig.display()),
            format!("--authentication-kubeconfig={}", plane.kubeconfig.display()),
            format!("--authorization-kubeconfig={}", plane.kubeconfig.display()),
            format!("--bind-address={}", controller_manager.ip()),
            format!("--secure-port={}", controller_manager.port()),
            format!("--cert-dir={}", dir.join("controller-manager-certs").display()),
            "--leader-elect=false".into(),
            format!("--service-account-private-key-file={}", p("service-account.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--use-service-account-credentials=true".into(),
            "--controllers=*".into(),
            "--profiling=false".into(),
        ],
    )?;
    // The controller manager is at work once the serviceaccount controller has given
    // kube-system its default ServiceAccount (the apiserver alone never creates it).
    plane.wait_for("kube-controller-manager", "the default ServiceAccount in kube-system", || {
        Ok(plane.kubectl(&["-n", "kube-system", "get", "serviceaccount", "default", "-o", "name"])?.code == 0)
    })?;
    Ok(plane)
}

impl ControlPlane {
    fn spawn(&self, name: &'static str, bin: &Path, args: &[String]) -> Result<()> {
        let log_path = self.dir.join(format!("{name}.log"));
        let log = fs::File::create(&log_path).with_context(|| format!("create {}", log_path.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .current_dir(&self.dir);
        // A process group of its own: a Ctrl-C in the terminal reaches only the program that
        // started the control plane, which stops what uses the apiserver before the apiserver.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().with_context(|| format!("spawn {}", bin.display()))?;
        self.processes.lock().unwrap_or_else(|e| e.into_inner()).push(Component { name, child });
        Ok(())
    }

    /// Polls `ready` until it holds; fails early, with the log's tail, if `name` exited.
    fn wait_for(&self, name: &'static str, what: &str, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(status) = self.exited(name)? {
                bail!("{name} exited with {status} before {what} was ready; log tail:\n{}", self.log_tail(name, 40));
            }
            if ready().unwrap_or(false) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{what} not ready within {START_DEADLINE:?}; {name} log tail:\n{}", self.log_tail(name, 40));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn exited(&self, name: &str) -> Result<Option<std::process::ExitStatus>> {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        match processes.iter_mut().find(|c| c.name == name) {
            Some(c) => c.child.try_wait().with_context(|| format!("wait for {name}")),
            None => Ok(None),
        }
    }
}

impl Component {
    /// SIGTERM, then SIGKILL if it has not exited within `STOP_GRACE`; reaped either way.
    fn stop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return; // exited (and now reaped) already
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child gets SIGKILL when the thread that spawned it ends (for the keeper thread: when
/// the test process ends), so no component outlives its test run.
#[allow(unsafe_code)]
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
    // getppid(2), both async-signal-safe, touching no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody would signal us.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("parent exited before exec"));
            }
            Ok(())
        });
    }
}

/// A CA, the apiserver's serving certificate (for 127.0.0.1, localhost and the in-cluster
/// names), an admin client certificate in `system:masters`, and the service-account key pair,
/// made with the openssl command (EC P-256 keys, valid two days).
fn make_pki(pki: &Path) -> Result<()> {
    let openssl = |args: &[&str]| -> Result<()> {
        let mut cmd = Command::new("openssl");
        cmd.args(args).current_dir(pki);
        let f = run_to_end(cmd, &format!("openssl {}", args.join(" ")), Duration::from_secs(30))?;
        if f.code != 0 {
            bail!("openssl {} exited {}: {}", args.join(" "), f.code, f.stderr);
        }
        Ok(())
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let req = |key: &str, csr: &str, subject: &str| -> Result<()> {
        openssl(&[&["req", "-new"][..], &ec, &["-keyout", key, "-out", csr, "-subj", subject]].concat())
    };
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=strom-e2e-ca"],
        ]
        .concat(),
    )?;
    let sign = |csr: &str, crt: &str, ext: &str| -> Result<()> {
        let ext_file = format!("{crt}.ext");
        fs::write(pki.join(&ext_file), ext).with_context(|| format!("write {ext_file}"))?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            crt,
            "-days",
            "2",
            "-extfile",
            &ext_file,
        ])
    };
    req("apiserver.key", "apiserver.csr", "/CN=kube-apiserver")?;
    sign(
        "apiserver.csr",
        "apiserver.crt",
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,\
         DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n\
         extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n",
    )?;
    req("admin.key", "admin.csr", "/O=system:masters/CN=strom-e2e-admin")?;
    sign("admin.csr", "admin.crt", "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")?;
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-out",
        "service-account.key",
    ])?;
    openssl(&["pkey", "-in", "service-account.key", "-pubout", "-out", "service-account.pub"])?;
    Ok(())
}

fn admin_kubeconfig(server: &str, pki: &Path) -> String {
    let p = |name: &str| pki.join(name).display().to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: strom-e2e\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate: {crt}\n    \
         client-key: {key}\ncontexts:\n- name: strom-e2e\n  context:\n    cluster: strom-e2e\n    user: admin\n\
         current-context: strom-e2e\n",
        ca = p("ca.crt"),
        crt = p("admin.crt"),
        key = p("admin.key"),
    )
}
