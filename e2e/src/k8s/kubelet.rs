//! The pod runner: scheduler and kubelet of one fake Node for the pods of one namespace,
//! running each pod's first container as a local process.
//!
//! Every 200 ms it lists the namespace's pods and, for each:
//! - unbound: makes sure each PersistentVolumeClaim it mounts has a PersistentVolume (a
//!   directory under the runner's dir, `claimRef` set so the PV controller binds exactly that
//!   claim), and once every claim is Bound, binds the pod to the node (`pods/binding`), as the
//!   scheduler does;
//! - bound here: gives it a loopback address (127.B.x.y, stable per pod name, so a recreated
//!   pod keeps its address), publishes its DNS names ([`super::hosts`]), starts the
//!   container's command ([`super::podspec`]; `command[0]` mapped to a local binary), probes
//!   readiness, restarts the process when it exits (restartPolicy Always), and reports
//!   phase, pod IP, container status and the Ready condition on the pod's status;
//! - being deleted: SIGTERM, the grace period, SIGKILL, then the final delete with grace 0
//!   (the kubelet's part of a deletion), after which the StatefulSet controller may recreate it.
//!
//! The Node's Ready condition is posted once and its Lease in `kube-node-lease` renewed every
//! 10 s, so the node lifecycle controller keeps it Ready. Processes are spawned from the
//! runner's thread with `PR_SET_PDEATHSIG`; dropping the runner stops them all (SIGTERM, at
//! most 10 s, SIGKILL), withdraws the names and deletes the Node.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};

use super::controlplane::{die_with_parent, ControlPlane};
use super::hosts;
use super::podspec::{self, Check, Launch, Placement};
use crate::cluster::wait_until;

const TICK: Duration = Duration::from_millis(200);
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// At most this long for a process to stop on SIGTERM when the runner itself stops.
const STOP_GRACE: Duration = Duration::from_secs(10);
const HOST_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// What the runner is doing, for tests to wait on.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Pods with a live process: name → what runs.
    pub running: BTreeMap<String, RunningPod>,
    /// Processes started per pod name (restarts and recreations included).
    pub starts: BTreeMap<String, usize>,
    /// Problems the runner met (also in its log), latest last.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningPod {
    pub uid: String,
    pub pid: u32,
    pub ip: Ipv4Addr,
    pub ready: bool,
}

/// A running pod runner; dropping it stops every process it started.
#[derive(Debug)]
pub struct PodRunner {
    namespace: String,
    node: String,
    dir: PathBuf,
    observed: Arc<Mutex<Observed>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PodRunner {
    /// Starts a runner for `namespace` on `plane`; `commands` maps a container's `command[0]`
    /// to the local binary that stands in for its image (`("strom", target/release/strom)`).
    pub fn start(plane: &ControlPlane, namespace: &str, commands: &[(&str, &Path)]) -> Result<PodRunner> {
        let node = format!("e2e-node-{namespace}");
        let dir = plane.dir().join(format!("runner-{namespace}"));
        fs::create_dir_all(dir.join("logs")).with_context(|| format!("create {}", dir.display()))?;
        let observed = Arc::new(Mutex::new(Observed::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let kubelet = Kubelet {
            client: None,
            kubeconfig: plane.kubeconfig().to_path_buf(),
            namespace: namespace.to_string(),
            node: node.clone(),
            dir: dir.clone(),
            commands: commands.iter().map(|(c, p)| (c.to_string(), p.to_path_buf())).collect(),
            pods: BTreeMap::new(),
            ips: BTreeMap::new(),
            failed: BTreeMap::new(),
            observed: observed.clone(),
            log: RunnerLog(dir.join("runner.log")),
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("pod-runner-{namespace}"))
            .spawn(move || kubelet.run(thread_stop, ready_tx))
            .context("spawn the pod runner's thread")?;
        let registered = ready_rx.recv().map_err(|_| anyhow!("the pod runner's thread ended while starting"))?;
        let runner = PodRunner { namespace: namespace.to_string(), node, dir, observed, stop, thread: Some(thread) };
        registered.map_err(|e| anyhow!("registering the pod runner's node: {e}"))?;
        println!(
            "pod runner: node {} for namespace {}; its log {}, pod logs in {}",
            runner.node,
            runner.namespace,
            runner.dir.join("runner.log").display(),
            runner.dir.join("logs").display()
        );
        Ok(runner)
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// A snapshot of what the runner runs.
    pub fn observed(&self) -> Observed {
        self.observed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The directory that backs PersistentVolumeClaim `claim` (kept across pod restarts).
    pub fn volume_dir(&self, claim: &str) -> PathBuf {
        volume_dir(&self.dir, claim)
    }

    /// The tail of a pod's process output (every start of that pod name, in one file).
    pub fn pod_log_tail(&self, pod: &str, lines: usize) -> String {
        tail(&self.dir.join("logs").join(format!("{pod}.log")), lines)
    }

    /// The tail of the runner's own log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.dir.join("runner.log"), lines)
    }
}

impl Drop for PodRunner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn volume_dir(runner_dir: &Path, claim: &str) -> PathBuf {
    runner_dir.join("volumes").join(claim)
}

/// A loopback address per pod name, unique in this test process: 127.B.x.y with B from the
/// pid (so two test processes rarely meet) and never 127.0.0.1.
fn next_pod_ip() -> Ipv4Addr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let b = 16 + (std::process::id() % 200);
    Ipv4Addr::new(127, u8::try_from(b).unwrap_or(16), u8::try_from((n / 250) % 256).unwrap_or(0), 2 + (n % 250) as u8)
}

struct RunnerLog(PathBuf);

impl RunnerLog {
    fn line(&self, text: &str) {
        use std::io::Write;
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(&self.0) {
            let _ = writeln!(f, "{} {text}", Timestamp::now());
        }
    }
}

/// The runner's state, owned by its thread.
struct Kubelet {
    client: Option<Client>,
    kubeconfig: PathBuf,
    namespace: String,
    node: String,
    dir: PathBuf,
    commands: BTreeMap<String, PathBuf>,
    /// Pods this runner started, by uid.
    pods: BTreeMap<String, Local>,
    ips: BTreeMap<String, Ipv4Addr>,
    /// Pods that could not start, by uid: (why, when to try again).
    failed: BTreeMap<String, (String, Instant)>,
    observed: Arc<Mutex<Observed>>,
    log: RunnerLog,
}

/// One pod this runner runs.
struct Local {
    name: String,
    ip: Ipv4Addr,
    launch: Launch,
    child: Option<Child>,
    first_start: Timestamp,
    started_at: Timestamp,
    restarts: i32,
    restart_at: Option<Instant>,
    last_exit: Option<(i32, Timestamp)>,
    ready: bool,
    ready_since: Timestamp,
    next_probe: Instant,
    successes: u32,
    failures: u32,
    terminating: Option<Instant>,
    reported: Option<Value>,
}

impl Kubelet {
    fn run(mut self, stop: Arc<AtomicBool>, ready: std::sync::mpsc::Sender<Result<(), String>>) {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => {
                let _ = ready.send(Err(format!("tokio runtime: {e}")));
                return;
            }
        };
        runtime.block_on(async move {
            if let Err(e) = self.register().await {
                let _ = ready.send(Err(format!("{e:#}")));
                return;
            }
            let _ = ready.send(Ok(()));
            let mut renewed = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                if let Err(e) = self.tick().await {
                    self.problem(format!("{e:#}"));
                }
                if renewed.elapsed() >= LEASE_RENEW {
                    renewed = Instant::now();
                    if let Err(e) = self.renew_lease().await {
                        self.problem(format!("renewing the node lease: {e:#}"));
                    }
                }
                self.publish_observed();
                tokio::time::sleep(TICK).await;
            }
            self.shutdown().await;
        });
    }

    fn client(&self) -> Client {
        self.client.clone().expect("registered first")
    }

    fn problem(&self, text: String) {
        self.log.line(&format!("problem: {text}"));
        let mut o = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        o.problems.push(text);
        let excess = o.problems.len().saturating_sub(100);
        o.problems.drain(..excess);
    }

    fn publish_observed(&self) {
        let running = self
            .pods
            .iter()
            .filter_map(|(uid, l)| {
                let pid = l.child.as_ref()?.id();
                Some((l.name.clone(), RunningPod { uid: uid.clone(), pid, ip: l.ip, ready: l.ready }))
            })
            .collect();
        self.observed.lock().unwrap_or_else(|e| e.into_inner()).running = running;
    }

    /// The Node object with a Ready condition, and its Lease.
    async fn register(&mut self) -> Result<()> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).context("read the kubeconfig")?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .context("client config from the kubeconfig")?;
        let client = Client::try_from(config).context("Kubernetes client")?;
        self.client = Some(client.clone());
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": self.node, "labels": {"kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux"}},
        }))?;
        if nodes.get_opt(&self.node).await?.is_none() {
            nodes.create(&PostParams::default(), &node).await.context("create the Node")?;
        }
        let now = serde_json::to_value(Time(Timestamp::now()))?;
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "the strom e2e pod runner", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": HOST_IP.to_string()}, {"type": "Hostname", "address": self.node}],
            "capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110"},
        }});
        nodes.patch_status(&self.node, &PatchParams::default(), &Patch::Merge(&status)).await.context("node status")?;
        let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": self.node},
            "spec": {"holderIdentity": self.node, "leaseDurationSeconds": 40,
                     "renewTime": serde_json::to_value(MicroTime(Timestamp::now()))?},
        }))?;
        if leases.get_opt(&self.node).await?.is_none() {
            leases.create(&PostParams::default(), &lease).await.context("create the node's Lease")?;
        }
        self.log.line(&format!("registered node {}", self.node));
        Ok(())
    }

    async fn renew_lease(&self) -> Result<()> {
        let leases: Api<Lease> = Api::namespaced(self.client(), "kube-node-lease");
        let patch = json!({"spec": {"renewTime": serde_json::to_value(MicroTime(Timestamp::now()))?}});
        leases.patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    async fn tick(&mut self) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client(), &self.namespace);
        let pods = api.list(&ListParams::default()).await.context("list pods")?.items;
        let listed: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        // Pods gone from the API (force-deleted) lose their process at once.
        let vanished: Vec<String> = self.pods.keys().filter(|uid| !listed.contains(*uid)).cloned().collect();
        for uid in vanished {
            if let Some(mut local) = self.pods.remove(&uid) {
                self.log.line(&format!("pod {} ({uid}) is gone from the API: SIGKILL", local.name));
                kill_now(&mut local);
                let _ = hosts::withdraw(local.ip);
            }
        }
        for pod in pods {
            let (Some(name), Some(uid)) = (pod.metadata.name.clone(), pod.metadata.uid.clone()) else { continue };
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            let result = if pod.metadata.deletion_timestamp.is_some() {
                self.terminate(&api, &pod, &name, &uid, node.as_deref()).await
            } else if node.is_none() {
                self.schedule(&api, &pod, &name).await
            } else if node.as_deref() == Some(self.node.as_str()) {
                self.supervise(&api, &pod, &name, &uid).await
            } else {
                Ok(())
            };
            if let Err(e) = result {
                self.problem(format!("pod {name}: {e:#}"));
            }
        }
        Ok(())
    }

    /// The scheduler's part: claims bound (PVs made for them), then the binding.
    async fn schedule(&mut self, api: &Api<Pod>, pod: &Pod, name: &str) -> Result<()> {
        let claims = claims_of(pod);
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), &self.namespace);
        let mut all_bound = true;
        for claim in &claims {
            let Some(pvc) = pvcs.get_opt(claim).await? else {
                all_bound = false;
                continue;
            };
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
                all_bound = false;
                self.provision(&pvc).await?;
            }
        }
        if !all_bound {
            return Ok(());
        }
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": self.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        });
        let _: Value = api
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await
            .with_context(|| format!("bind {name} to {}", self.node))?;
        self.log.line(&format!("bound pod {name} to {}", self.node));
        Ok(())
    }

    /// A hostPath PersistentVolume reserved for `pvc` (its claimRef names the claim).
    async fn provision(&self, pvc: &PersistentVolumeClaim) -> Result<()> {
        let claim = pvc.metadata.name.clone().unwrap_or_default();
        let pv_name = format!("{}-{claim}", self.namespace);
        let pvs: Api<PersistentVolume> = Api::all(self.client());
        if pvs.get_opt(&pv_name).await?.is_some() {
            return Ok(());
        }
        let dir = volume_dir(&self.dir, &claim);
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let spec = pvc.spec.clone().unwrap_or_default();
        let storage = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map_or_else(|| "1Gi".to_string(), |q| q.0.clone());
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": pv_name, "labels": {"strom.dev/e2e-node": self.node}},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "hostPath": {"path": dir.display().to_string(), "type": "DirectoryOrCreate"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": self.namespace,
                             "name": claim, "uid": pvc.metadata.uid},
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": spec.storage_class_name.unwrap_or_default(),
                "volumeMode": "Filesystem",
            },
        }))?;
        pvs.create(&PostParams::default(), &pv).await.with_context(|| format!("create PV {pv_name}"))?;
        self.log.line(&format!("provisioned PV {pv_name} at {} for claim {claim}", dir.display()));
        Ok(())
    }

    /// The kubelet's part for a pod bound here: start, restart, probe, report.
    async fn supervise(&mut self, api: &Api<Pod>, pod: &Pod, name: &str, uid: &str) -> Result<()> {
        if !self.pods.contains_key(uid) {
            // A pod that cannot start is retried every 2 s, and reported once per reason.
            if self.failed.get(uid).is_some_and(|(_, retry)| Instant::now() < *retry) {
                return Ok(());
            }
            if let Err(e) = self.start(pod, name, uid).await {
                let reason = format!("{e:#}");
                let retry = Instant::now() + Duration::from_secs(2);
                let repeated =
                    self.failed.insert(uid.to_string(), (reason.clone(), retry)).is_some_and(|(r, _)| r == reason);
                return if repeated { Ok(()) } else { Err(e) };
            }
            self.failed.remove(uid);
        }
        let now = Instant::now();
        let Some(local) = self.pods.get_mut(uid) else { return Ok(()) };
        if let Some(child) = local.child.as_mut() {
            if let Some(status) = child.try_wait().context("wait for a pod's process")? {
                let code = status
                    .code()
                    .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
                self.log.line(&format!("pod {name}: process exited with {status}; restarting"));
                local.child = None;
                local.last_exit = Some((code, Timestamp::now()));
                local.ready = false;
                let backoff = Duration::from_secs(1 << local.restarts.clamp(0, 3));
                local.restart_at = Some(now + backoff);
            }
        }
        if local.child.is_none() && local.restart_at.is_some_and(|at| now >= at) {
            local.restart_at = None;
            local.restarts += 1;
            let n = count_start(&self.observed, name);
            spawn(local, n, &self.commands, &self.dir, &self.log)?;
        }
        probe_if_due(local, now).await;
        let status = pod_status(local);
        if local.reported.as_ref() != Some(&status) {
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .with_context(|| format!("report {name}'s status"))?;
            local.reported = Some(status);
        }
        Ok(())
    }

    async fn start(&mut self, pod: &Pod, name: &str, uid: &str) -> Result<()> {
        let ip = *self.ips.entry(name.to_string()).or_insert_with(next_pod_ip);
        let placement = Placement { pod_ip: ip, host_ip: HOST_IP, node_name: &self.node };
        let volumes = self.volumes(pod, uid, placement).await?;
        let launch = podspec::launch(pod, placement, &volumes).map_err(|e| anyhow!("cannot run it here: {e}"))?;
        hosts::publish(ip, dns_names(pod, name, &self.namespace))?;
        let now = Timestamp::now();
        let mut local = Local {
            name: name.to_string(),
            ip,
            next_probe: Instant::now() + launch.readiness.as_ref().map_or(Duration::ZERO, |r| r.initial_delay),
            launch,
            child: None,
            first_start: now,
            started_at: now,
            restarts: 0,
            restart_at: None,
            last_exit: None,
            ready: false,
            ready_since: now,
            successes: 0,
            failures: 0,
            terminating: None,
            reported: None,
        };
        let n = count_start(&self.observed, name);
        spawn(&mut local, n, &self.commands, &self.dir, &self.log)?;
        self.pods.insert(uid.to_string(), local);
        Ok(())
    }

    /// Host directories for the pod's volumes: its claims' PVs; emptyDirs and projected
    /// volumes (the service-account token, `kube-root-ca.crt`, downward-API files) per pod uid.
    async fn volumes(&self, pod: &Pod, uid: &str, at: Placement<'_>) -> Result<BTreeMap<String, PathBuf>> {
        let mut out = BTreeMap::new();
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), &self.namespace);
        let pvs: Api<PersistentVolume> = Api::all(self.client());
        for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
            if let Some(claim) = &v.persistent_volume_claim {
                let pvc = pvcs.get(&claim.claim_name).await.with_context(|| format!("claim {}", claim.claim_name))?;
                let pv_name = pvc
                    .spec
                    .and_then(|s| s.volume_name)
                    .ok_or_else(|| anyhow!("claim {} is not bound", claim.claim_name))?;
                let pv = pvs.get(&pv_name).await.with_context(|| format!("PV {pv_name}"))?;
                let path = pv
                    .spec
                    .and_then(|s| s.host_path)
                    .map(|h| h.path)
                    .ok_or_else(|| anyhow!("PV {pv_name} is not a hostPath volume"))?;
                out.insert(v.name.clone(), PathBuf::from(path));
            } else if let Some(projected) = &v.projected {
                let dir = self.dir.join("pods").join(uid).join(&v.name);
                fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
                for source in projected.sources.iter().flatten() {
                    for (path, bytes) in self.projection(pod, source, at).await? {
                        let file = dir.join(&path);
                        if let Some(parent) = file.parent() {
                            fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
                        }
                        fs::write(&file, bytes).with_context(|| format!("write {}", file.display()))?;
                    }
                }
                out.insert(v.name.clone(), dir);
            } else if v.empty_dir.is_some() {
                let dir = self.dir.join("pods").join(uid).join(&v.name);
                fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
                out.insert(v.name.clone(), dir);
            }
        }
        Ok(out)
    }

    /// The files one source of a projected volume holds: (path in the volume, contents).
    async fn projection(
        &self,
        pod: &Pod,
        source: &VolumeProjection,
        at: Placement<'_>,
    ) -> Result<Vec<(String, Vec<u8>)>> {
        let mut files = Vec::new();
        if let Some(t) = &source.service_account_token {
            let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
            let request = json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {
                    "audiences": t.audience.iter().collect::<Vec<_>>(),
                    "expirationSeconds": t.expiration_seconds.unwrap_or(3607),
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid},
                },
            });
            let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), &self.namespace);
            let answer: TokenRequest = accounts
                .create_subresource("token", &sa, &PostParams::default(), &request)
                .await
                .with_context(|| format!("a token for service account {sa}"))?;
            let token = answer.status.map(|s| s.token).unwrap_or_default();
            files.push((t.path.clone(), token.into_bytes()));
        }
        if let Some(cm) = &source.config_map {
            let maps: Api<ConfigMap> = Api::namespaced(self.client(), &self.namespace);
            match maps.get_opt(&cm.name).await? {
                Some(map) => {
                    let data = map.data.unwrap_or_default();
                    let items: Vec<(String, String)> = match &cm.items {
                        Some(items) => items.iter().map(|i| (i.key.clone(), i.path.clone())).collect(),
                        None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
                    };
                    for (key, path) in items {
                        let value =
                            data.get(&key).with_context(|| format!("ConfigMap {} has no key {key}", cm.name))?;
                        files.push((path, value.clone().into_bytes()));
                    }
                }
                None if cm.optional == Some(true) => {}
                None => bail!("ConfigMap {} not found", cm.name),
            }
        }
        if let Some(d) = &source.downward_api {
            for item in d.items.iter().flatten() {
                let field = item
                    .field_ref
                    .as_ref()
                    .with_context(|| format!("downwardAPI {}: only fieldRef is supported", item.path))?;
                let value = podspec::field_value(pod, &field.field_path, at)
                    .map_err(|e| anyhow!("downwardAPI {}: {e}", item.path))?;
                files.push((item.path.clone(), value.into_bytes()));
            }
        }
        if source.secret.is_some() || source.cluster_trust_bundle.is_some() || source.pod_certificate.is_some() {
            bail!(
                "projected volume sources other than serviceAccountToken, configMap and downwardAPI are not supported"
            );
        }
        Ok(files)
    }

    /// The kubelet's part of a deletion: SIGTERM, the grace period, SIGKILL, final delete.
    async fn terminate(&mut self, api: &Api<Pod>, pod: &Pod, name: &str, uid: &str, node: Option<&str>) -> Result<()> {
        if node.is_some_and(|n| n != self.node) {
            return Ok(());
        }
        if let Some(local) = self.pods.get_mut(uid) {
            let now = Instant::now();
            let deadline = *local.terminating.get_or_insert_with(|| {
                let grace = pod
                    .metadata
                    .deletion_grace_period_seconds
                    .map_or(local.launch.grace, |s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
                if let Some(child) = &local.child {
                    self.log.line(&format!("pod {name}: deleted; SIGTERM, grace {grace:?}"));
                    let _ = signal(child, nix::sys::signal::Signal::SIGTERM);
                }
                now + grace
            });
            let exited = match local.child.as_mut() {
                Some(child) => child.try_wait().context("wait for a pod's process")?.is_some(),
                None => true,
            };
            if !exited && now < deadline {
                return Ok(());
            }
            if !exited {
                self.log.line(&format!("pod {name}: grace period over; SIGKILL"));
            }
            kill_now(local);
            if let Some(local) = self.pods.remove(uid) {
                hosts::withdraw(local.ip)?;
            }
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => self.log.line(&format!("pod {name} ({uid}): stopped and deleted")),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("final delete of {name}")),
        }
        Ok(())
    }

    async fn shutdown(&mut self) {
        for local in self.pods.values() {
            if let Some(child) = &local.child {
                let _ = signal(child, nix::sys::signal::Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for local in self.pods.values_mut() {
            while let Some(child) = local.child.as_mut() {
                if child.try_wait().ok().flatten().is_some() || Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            kill_now(local);
            let _ = hosts::withdraw(local.ip);
        }
        self.pods.clear();
        self.publish_observed();
        let nodes: Api<Node> = Api::all(self.client());
        let _ = nodes.delete(&self.node, &DeleteParams::default()).await;
        self.log.line("stopped");
    }
}

fn claims_of(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
        .collect()
}

/// `<hostname>.<subdomain>.<namespace>.svc.cluster.local` and its shorter forms, as cluster
/// DNS answers them for a pod with a subdomain (a StatefulSet's headless service).
fn dns_names(pod: &Pod, name: &str, namespace: &str) -> Vec<String> {
    let spec = pod.spec.as_ref();
    let host = spec.and_then(|s| s.hostname.clone()).unwrap_or_else(|| name.to_string());
    let Some(sub) = spec.and_then(|s| s.subdomain.clone()) else { return vec![host] };
    vec![
        format!("{host}.{sub}.{namespace}.svc.cluster.local"),
        format!("{host}.{sub}.{namespace}.svc"),
        format!("{host}.{sub}.{namespace}"),
        format!("{host}.{sub}"),
    ]
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) -> nix::Result<()> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    nix::sys::signal::kill(pid, sig)
}

fn kill_now(local: &mut Local) {
    if let Some(mut child) = local.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    local.ready = false;
}

/// Counts one more start of pod `name`; the count so far.
fn count_start(observed: &Mutex<Observed>, name: &str) -> usize {
    let mut o = observed.lock().unwrap_or_else(|e| e.into_inner());
    let n = o.starts.entry(name.to_string()).or_default();
    *n += 1;
    *n
}

/// Starts the pod's process, the `n`th for its name (its output appended to `logs/<pod>.log`).
fn spawn(local: &mut Local, n: usize, commands: &BTreeMap<String, PathBuf>, dir: &Path, log: &RunnerLog) -> Result<()> {
    let l = &local.launch;
    let bin = commands
        .get(&l.program)
        .ok_or_else(|| anyhow!("no local binary stands in for command {:?} (image {})", l.program, l.image))?;
    let log_path = dir.join("logs").join(format!("{}.log", local.name));
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
            local.restarts
        )?;
    }
    let work = match &l.working_dir {
        Some(d) => d.clone(),
        None => dir.join("pods").join(&local.name),
    };
    fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let mut cmd = Command::new(bin);
    cmd.args(&l.args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOSTNAME", &local.name)
        .envs(l.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out));
    die_with_parent(&mut cmd);
    let child = cmd.spawn().with_context(|| format!("spawn {}", bin.display()))?;
    log.line(&format!(
        "pod {}: started pid {} at {} ({} {})",
        local.name,
        child.id(),
        local.ip,
        bin.display(),
        l.args.join(" ")
    ));
    local.child = Some(child);
    local.started_at = Timestamp::now();
    local.ready = false;
    local.successes = 0;
    local.failures = 0;
    local.next_probe = Instant::now() + l.readiness.as_ref().map_or(Duration::ZERO, |r| r.initial_delay);
    Ok(())
}

/// Runs the readiness probe when due and applies Kubernetes' thresholds; without a probe a
/// running container is ready.
async fn probe_if_due(local: &mut Local, now: Instant) {
    let running = local.child.is_some() && local.terminating.is_none();
    let Some(r) = local.launch.readiness.clone() else {
        set_ready(local, running);
        return;
    };
    if !running {
        set_ready(local, false);
        return;
    }
    if now < local.next_probe {
        return;
    }
    local.next_probe = now + r.period;
    if check(&r.check, r.timeout).await {
        local.failures = 0;
        local.successes += 1;
        if local.successes >= r.success_threshold {
            set_ready(local, true);
        }
    } else {
        local.successes = 0;
        local.failures += 1;
        if local.failures >= r.failure_threshold || !local.ready {
            set_ready(local, false);
        }
    }
}

fn set_ready(local: &mut Local, ready: bool) {
    if local.ready != ready {
        local.ready = ready;
        local.ready_since = Timestamp::now();
    }
}

async fn check(check: &Check, timeout: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        match check {
            Check::Tcp { host, port } => tokio::net::TcpStream::connect((*host, *port)).await.is_ok(),
            Check::Http { host, port, path } => {
                let Ok(mut s) = tokio::net::TcpStream::connect((*host, *port)).await else { return false };
                let request =
                    format!("GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/e2e\r\n\r\n");
                if s.write_all(request.as_bytes()).await.is_err() {
                    return false;
                }
                let mut head = [0u8; 64];
                let Ok(n) = s.read(&mut head).await else { return false };
                let line = String::from_utf8_lossy(&head[..n]);
                let code: u16 = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
                (200..400).contains(&code)
            }
        }
    };
    tokio::time::timeout(timeout, attempt).await.unwrap_or(false)
}

/// The pod status the kubelet would report now (a merge patch of `status`).
fn pod_status(local: &Local) -> Value {
    let t = |ts: Timestamp| serde_json::to_value(Time(ts)).unwrap_or(Value::Null);
    let flag = |b: bool| if b { "True" } else { "False" };
    let running = local.child.is_some();
    let state = if running {
        json!({"running": {"startedAt": t(local.started_at)}})
    } else {
        json!({"waiting": {"reason": if local.terminating.is_some() { "Terminating" } else { "CrashLoopBackOff" }}})
    };
    let last_state = match local.last_exit {
        Some((code, at)) => json!({"terminated": {"exitCode": code, "finishedAt": t(at), "reason": "Error"}}),
        None => json!({}),
    };
    let ip = local.ip.to_string();
    let pid = local.child.as_ref().map_or(0, Child::id);
    json!({"status": {
        "phase": "Running",
        "hostIP": HOST_IP.to_string(), "hostIPs": [{"ip": HOST_IP.to_string()}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": t(local.first_start),
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t(local.first_start)},
            {"type": "Initialized", "status": "True", "lastTransitionTime": t(local.first_start)},
            {"type": "ContainersReady", "status": flag(local.ready), "lastTransitionTime": t(local.ready_since)},
            {"type": "Ready", "status": flag(local.ready), "lastTransitionTime": t(local.ready_since)},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t(local.first_start)},
        ],
        "containerStatuses": [{
            "name": local.launch.container, "image": local.launch.image, "imageID": "",
            "containerID": format!("e2e://{pid}"), "ready": local.ready, "started": running,
            "restartCount": local.restarts, "state": state, "lastState": last_state,
        }],
    }})
}

/// [`wait_until`], failing with what `what` is and the runner's recent problems and log.
pub fn wait_for<T>(runner: &PodRunner, timeout: Duration, what: &str, f: impl FnMut() -> Result<T>) -> Result<T> {
    wait_until(timeout, f).map_err(|e| {
        let problems = runner.observed().problems;
        let recent = &problems[problems.len().saturating_sub(5)..];
        e.context(format!("{what}\nrunner problems: {recent:#?}\nrunner log:\n{}", runner.log_tail(20)))
    })
}
