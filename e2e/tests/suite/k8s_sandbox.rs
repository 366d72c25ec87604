//! Requirement: `strom-sandbox` gives a newcomer a Kubernetes on a machine without one, to
//! try the operator with kubectl (docs/sandbox.md): once pods can run it prints exactly one
//! line on stdout naming an absolute kubeconfig path and the namespace; kubectl works with
//! that kubeconfig; a pod in the namespace runs as a local `strom` process, reachable through
//! its DNS name; and on SIGTERM it stops everything it started (the pod's process, etcd,
//! kube-apiserver, kube-controller-manager) and withdraws the pod's names before it exits 0.
//!
//! The binary under test is the one cargo built for this test run (`CARGO_BIN_EXE_...`: the
//! release profile's `target/release/strom-sandbox` under `cargo test --release`), with the
//! `strom` the other tests use (`STROM_BIN` or `target/release/strom`).

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use e2e::broker::strom_bin;
use e2e::cluster::wait_until;
use e2e::k8s::controlplane;

/// From spawn to the ready line, the control plane already built (a start takes ~5 s alone).
const READY: Duration = Duration::from_secs(180);
/// From `kubectl apply` to a Ready broker pod.
const POD_READY: Duration = Duration::from_secs(120);
/// From SIGTERM to exit: the pods (at most 10 s each), then three components (at most 10 s each).
const STOP: Duration = Duration::from_secs(60);

const NAMESPACE: &str = "strom";
const POD_DNS_NAME: &str = "broker-0.sandbox.strom.svc.cluster.local";
/// A pod's phase and Ready condition, as `Running/True`.
const PHASE_AND_READY: &str = r#"jsonpath={.status.phase}/{.status.conditions[?(@.type=="Ready")].status}"#;

/// One broker in a pod with a subdomain, so that it has the DNS name a StatefulSet's pod has.
const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: broker-0, namespace: strom}
spec:
  subdomain: sandbox
  containers:
  - name: strom
    image: strom:dev
    command: [strom, serve]
    args:
    - --node-id=0
    - --data-dir=/var/lib/strom/data
    - --kafka-listen=$(POD_IP):9092
    - --internal-listen=$(POD_IP):9093
    - --http-listen=$(POD_IP):9094
    - --advertised-kafka=broker-0.sandbox.strom.svc.cluster.local:9092
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    readinessProbe:
      httpGet: {path: /readyz, port: 9094}
      periodSeconds: 1
    volumeMounts:
    - {name: data, mountPath: /var/lib/strom}
  volumes:
  - {name: data, emptyDir: {}}
"#;

/// The sandbox as a child process; killed (SIGKILL: its components die with it) if the test
/// fails before it is stopped.
struct Sandbox {
    child: Child,
    stdout: Receiver<String>,
    stderr_path: PathBuf,
}

impl Sandbox {
    fn spawn(dir: &Path, log: &Path) -> Sandbox {
        let stderr = std::fs::File::create(log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_strom-sandbox"))
            .arg("--dir")
            .arg(dir)
            .env("STROM_BIN", strom_bin().unwrap())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let (tx, stdout) = channel();
        let pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Sandbox { child, stdout, stderr_path: log.to_path_buf() }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The first stdout line, within `timeout`.
    fn first_line(&mut self, timeout: Duration) -> String {
        match self.stdout.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no ready line within {timeout:?}; stderr:\n{}", self.stderr()),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().unwrap();
                panic!("the sandbox exited ({status}) before its ready line; stderr:\n{}", self.stderr())
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(controlplane::binaries()?.join("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .context("run kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl {} exited {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The processes whose command line names `dir` (the components' flags and the pod's data
/// directory do), but `except`, with their program's file name.
fn processes_naming(dir: &Path, except: u32) -> Vec<(u32, String)> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if pid != except && String::from_utf8_lossy(&cmdline).contains(&needle) && alive(pid) {
            let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
            let program =
                Path::new(&*String::from_utf8_lossy(argv0)).file_name().map(|n| n.to_string_lossy().into_owned());
            found.push((pid, program.unwrap_or_default()));
        }
    }
    found
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(false)
}

#[test]
fn the_sandbox_runs_pods_for_kubectl_and_stops_everything_it_started_on_sigterm() {
    controlplane::binaries().unwrap(); // built before the sandbox's clock starts
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sandbox"); // does not exist yet: the sandbox creates it
    let mut sandbox = Sandbox::spawn(&dir, &tmp.path().join("sandbox.stderr"));

    let ready = sandbox.first_line(READY);
    let dir = std::fs::canonicalize(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    assert_eq!(ready, format!("sandbox ready: kubeconfig={} namespace={NAMESPACE}", kubeconfig.display()));
    let stderr = sandbox.stderr();
    assert!(stderr.contains(&controlplane::binaries().unwrap().join("kubectl").display().to_string()), "{stderr}");

    // kubectl with the printed kubeconfig sees the namespace the sandbox created.
    assert_eq!(kubectl(&kubeconfig, &["get", "namespace", NAMESPACE, "-o", "name"]).unwrap().trim(), "namespace/strom");

    // A pod in it runs as a local `strom` process and becomes Ready.
    let manifest = tmp.path().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    kubectl(&kubeconfig, &["apply", "-f", manifest.to_str().unwrap()]).unwrap();
    wait_until(POD_READY, || {
        let state = kubectl(&kubeconfig, &["-n", NAMESPACE, "get", "pod", "broker-0", "-o", PHASE_AND_READY])?;
        ensure!(state == "Running/True", "pod broker-0: {state}");
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e:#}\nsandbox stderr:\n{}", sandbox.stderr()));

    // A Kafka client finds the broker by the DNS name the sandbox wrote into /etc/hosts.
    let addr = (POD_DNS_NAME, 9092).to_socket_addrs().unwrap().next().unwrap();
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();

    let pid = sandbox.child.id();
    let started = processes_naming(&dir, pid);
    for name in ["etcd", "kube-apiserver", "kube-controller-manager", "strom"] {
        assert!(started.iter().any(|(_, program)| program == name), "no {name} running: {started:?}");
    }

    // SIGTERM: everything stops, then the sandbox exits 0.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()), nix::sys::signal::Signal::SIGTERM)
        .unwrap();
    let deadline = Instant::now() + STOP;
    let status = loop {
        if let Some(status) = sandbox.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running {STOP:?} after SIGTERM; stderr:\n{}", sandbox.stderr());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "exit status {status}; stderr:\n{}", sandbox.stderr());

    let left: Vec<(u32, String)> = started.into_iter().filter(|(pid, _)| alive(*pid)).collect();
    assert!(left.is_empty(), "outlived the sandbox: {left:?}");
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    assert!(!hosts.contains(&format!("pid={pid}")) && !hosts.contains(POD_DNS_NAME), "names left:\n{hosts}");
    let mut more = Vec::new();
    loop {
        match sandbox.stdout.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => more.push(line),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("stdout still open 10 s after the sandbox exited"),
        }
    }
    assert!(more.is_empty(), "stdout had more than the ready line: {more:?}");
}
