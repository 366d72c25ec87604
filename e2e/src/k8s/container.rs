//! One pod's container as a local process, for the pod runner: starting it (the launch's
//! command line, env and working directory, its output appended to the pod's log), its
//! probes, readiness, restarts and kills, and the pod status the kubelet would report for it.

use std::collections::BTreeMap;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use super::controlplane::die_with_parent;
use super::mountns;
use super::podspec::Launch;
use super::probes::Probes;

/// A pod the runner runs, and its container's process.
#[derive(Debug)]
pub struct PodProcess {
    pub name: String,
    pub ip: Ipv4Addr,
    pub launch: Launch,
    /// The process, while one runs.
    pub child: Option<Child>,
    pub first_start: Timestamp,
    pub started_at: Timestamp,
    pub restarts: i32,
    /// When to start the process again after it exited (the back-off).
    pub restart_at: Option<Instant>,
    pub last_exit: Option<(i32, Timestamp)>,
    /// The container exited and its restart policy keeps it stopped: the pod Succeeded (exit
    /// code 0) or Failed.
    pub finished: bool,
    /// The probes of the process running now.
    pub probes: Option<Probes>,
    pub ready: bool,
    pub ready_since: Timestamp,
    /// A failed liveness or startup probe's kill: SIGTERM sent, SIGKILL at this instant.
    pub killing: Option<Instant>,
    /// The pod is being deleted: SIGTERM sent, SIGKILL at this instant.
    pub terminating: Option<Instant>,
    /// The status last reported, so an unchanged one is not sent again.
    pub reported: Option<Value>,
}

impl PodProcess {
    pub fn new(name: &str, ip: Ipv4Addr, launch: Launch) -> PodProcess {
        let now = Timestamp::now();
        PodProcess {
            name: name.to_string(),
            ip,
            launch,
            child: None,
            first_start: now,
            started_at: now,
            restarts: 0,
            restart_at: None,
            last_exit: None,
            finished: false,
            probes: None,
            ready: false,
            ready_since: now,
            killing: None,
            terminating: None,
            reported: None,
        }
    }

    /// Starts the process, the `n`th for its pod name, with `bin` standing in for the
    /// program and `kubelet_env` (what the kubelet gives every container, such as
    /// `KUBERNETES_SERVICE_HOST`) under the container's own env; its output is appended to
    /// `logs/<pod>.log` under `dir`. The new pid.
    pub fn spawn(&mut self, n: usize, bin: &Path, dir: &Path, kubelet_env: &[(String, String)]) -> Result<u32> {
        let l = &self.launch;
        let log_path = dir.join("logs").join(format!("{}.log", self.name));
        let mut out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("open {}", log_path.display()))?;
        {
            use std::io::Write;
            writeln!(
                out,
                "===== pod runner: start #{n} of {} {} (pod restarts {}) =====",
                bin.display(),
                l.args.join(" "),
                self.restarts
            )?;
        }
        let work = match &l.working_dir {
            Some(d) => d.clone(),
            None => dir.join("pods").join(&self.name),
        };
        fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(&l.args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOSTNAME", &self.name)
            .env("HOME", &work)
            .envs(kubelet_env.iter().map(|(k, v)| (k, v)))
            .envs(l.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&work)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        die_with_parent(&mut cmd);
        mountns::bind_in_own_namespace(&mut cmd, &mountns::binds(&l.mounts))?;
        let child = cmd.spawn().with_context(|| format!("spawn {}", bin.display()))?;
        let pid = child.id();
        self.child = Some(child);
        self.started_at = Timestamp::now();
        self.probes = Some(Probes::new(&self.launch, Instant::now()));
        self.killing = None;
        self.set_ready(false);
        Ok(pid)
    }

    /// Sends `sig` to the process, if one runs.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(child) = &self.child {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(pid, sig);
        }
    }

    /// SIGKILL, and the process reaped.
    pub fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.probes = None;
        self.set_ready(false);
    }

    /// Whether the process has exited (reaped, and recorded as the last state with the
    /// restart scheduled after the back-off, or the pod finished if its restart policy says
    /// so); the exit status as text.
    pub fn reap(&mut self, now: Instant) -> Result<Option<String>> {
        let Some(child) = self.child.as_mut() else { return Ok(None) };
        let Some(status) = child.try_wait().context("wait for a pod's process")? else { return Ok(None) };
        let code =
            status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
        self.child = None;
        self.probes = None;
        self.killing = None;
        self.last_exit = Some((code, Timestamp::now()));
        self.set_ready(false);
        if self.launch.restart.restarts(code) {
            self.restart_at = Some(now + Duration::from_secs(1 << self.restarts.clamp(0, 3)));
        } else {
            self.finished = true;
        }
        Ok(Some(status.to_string()))
    }

    pub fn set_ready(&mut self, ready: bool) {
        if self.ready != ready {
            self.ready = ready;
            self.ready_since = Timestamp::now();
        }
    }

    /// The pod status the kubelet would report now (a merge patch of `status`).
    pub fn status(&self, host_ip: Ipv4Addr) -> Value {
        let t = |ts: Timestamp| serde_json::to_value(Time(ts)).unwrap_or(Value::Null);
        let flag = |b: bool| if b { "True" } else { "False" };
        let running = self.child.is_some();
        let started = running && self.probes.as_ref().is_some_and(Probes::started);
        let finished = self.last_exit.filter(|_| self.finished);
        let state = if running {
            json!({"running": {"startedAt": t(self.started_at)}})
        } else if let Some((code, at)) = finished {
            let reason = if code == 0 { "Completed" } else { "Error" };
            json!({"terminated": {"exitCode": code, "startedAt": t(self.started_at), "finishedAt": t(at), "reason": reason}})
        } else {
            json!({"waiting": {"reason": if self.terminating.is_some() { "Terminating" } else { "CrashLoopBackOff" }}})
        };
        let last_state = match self.last_exit.filter(|_| !self.finished) {
            Some((code, at)) => json!({"terminated": {"exitCode": code, "finishedAt": t(at), "reason": "Error"}}),
            None => json!({}),
        };
        let ip = self.ip.to_string();
        let pid = self.child.as_ref().map_or(0, Child::id);
        let phase = match finished {
            Some((0, _)) => "Succeeded",
            Some(_) => "Failed",
            None => "Running",
        };
        json!({"status": {
            "phase": phase,
            "hostIP": host_ip.to_string(), "hostIPs": [{"ip": host_ip.to_string()}],
            "podIP": ip, "podIPs": [{"ip": ip}],
            "startTime": t(self.first_start),
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t(self.first_start)},
                {"type": "Initialized", "status": "True", "lastTransitionTime": t(self.first_start)},
                {"type": "ContainersReady", "status": flag(self.ready), "lastTransitionTime": t(self.ready_since)},
                {"type": "Ready", "status": flag(self.ready), "lastTransitionTime": t(self.ready_since)},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": t(self.first_start)},
            ],
            "containerStatuses": [{
                "name": self.launch.container, "image": self.launch.image, "imageID": "",
                "containerID": format!("e2e://{pid}"), "ready": self.ready, "started": started,
                "restartCount": self.restarts, "state": state, "lastState": last_state,
            }],
        }})
    }
}

/// The status of a pod whose container cannot start (yet): Pending, its first container
/// waiting with `CreateContainerConfigError` and `message`, as the kubelet reports a missing
/// ConfigMap or Secret.
pub fn waiting_status(pod: &Pod, message: &str) -> Value {
    let container = pod.spec.as_ref().and_then(|s| s.containers.first());
    let statuses: Vec<Value> = container
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "ready": false, "started": false, "restartCount": 0,
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}},
            })
        })
        .into_iter()
        .collect();
    json!({"status": {"phase": "Pending", "containerStatuses": statuses}})
}

/// The local binary that stands in for a launch's program.
pub fn binary<'a>(commands: &'a BTreeMap<String, PathBuf>, launch: &Launch) -> Result<&'a Path> {
    commands
        .get(&launch.program)
        .map(PathBuf::as_path)
        .ok_or_else(|| anyhow!("no local binary stands in for command {:?} (image {})", launch.program, launch.image))
}
