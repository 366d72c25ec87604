//! The pod runner: scheduler and kubelet of one fake Node for the pods of one namespace,
//! running each pod's first container as a local process.
//!
//! Every 200 ms it lists the namespace's pods and, for each:
//! - unbound: makes sure each PersistentVolumeClaim it mounts has a PersistentVolume (a
//!   directory under the runner's dir, `claimRef` set so the PV controller binds exactly that
//!   claim), and once every claim is Bound, binds the pod to the node (`pods/binding`), as the
//!   scheduler does;
//! - bound here: gives it a loopback address (127.B.x.y, stable per pod name, so a recreated
//!   pod keeps its address), fetches the ConfigMaps and Secrets it refers to, writes its
//!   volumes' files ([`super::volumes`]), publishes its DNS names ([`super::hosts`]), starts
//!   the container's command ([`super::podspec`]; `command[0]` mapped to a local binary),
//!   with `KUBERNETES_SERVICE_HOST`/`PORT` naming the API server and its ServiceAccount
//!   directory bound at the fixed path in a mount namespace of its own ([`super::mountns`]),
//!   so in-cluster clients work under the pod's ServiceAccount, runs its probes
//!   ([`super::probes`]), restarts the process when it exits or fails its
//!   liveness probe (as its restartPolicy says: a pod that ends Succeeded or Failed is not
//!   started again), and reports phase, pod IP, container status and
//!   the Ready condition on the pod's status ([`super::container`]); a pod that cannot start
//!   yet (a ConfigMap not there) is retried every 2 s;
//! - being deleted: SIGTERM, the grace period, SIGKILL, then the final delete with grace 0
//!   (the kubelet's part of a deletion), after which the StatefulSet controller may recreate it.
//!
//! Then it points each Service's names at one pod the Service selects ([`super::services`]),
//! standing in for cluster DNS and kube-proxy.
//!
//! The Node's Ready condition is posted once and its Lease in `kube-node-lease` renewed every
//! 10 s, so the node lifecycle controller keeps it Ready. Processes are spawned from the
//! runner's thread with `PR_SET_PDEATHSIG`; dropping the runner stops them all (SIGTERM, at
//! most 10 s, SIGKILL), withdraws the names and deletes the Node.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};

use super::container::{self, PodProcess};
use super::controlplane::ControlPlane;
use super::hosts::{self, Owner};
use super::podspec::{self, Objects, Placement, References};
use super::probes::Verdict;
use super::services::{self, Candidate};
use super::volumes::{self, Content, VolumeFile};
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
    /// Services whose names resolve: name → the address of the pod they resolve to.
    pub services: BTreeMap<String, Ipv4Addr>,
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
            service_env: service_env(plane.server())?,
            pods: BTreeMap::new(),
            ips: BTreeMap::new(),
            failed: BTreeMap::new(),
            services: BTreeMap::new(),
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

    /// The runner's live view, for a test's sampling thread.
    pub fn observed_handle(&self) -> Arc<Mutex<Observed>> {
        self.observed.clone()
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
    /// What every container gets: the `kubernetes` Service's address (the API server).
    service_env: Vec<(String, String)>,
    /// Pods this runner started, by uid.
    pods: BTreeMap<String, PodProcess>,
    ips: BTreeMap<String, Ipv4Addr>,
    /// Pods that could not start, by uid: (why, when to try again).
    failed: BTreeMap<String, (String, Instant)>,
    /// Services whose names are published: name → the pod address they resolve to.
    services: BTreeMap<String, Ipv4Addr>,
    observed: Arc<Mutex<Observed>>,
    log: RunnerLog,
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
        let mut o = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        o.running = running;
        o.services = self.services.clone();
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
                local.kill_now();
                let _ = hosts::withdraw(&Owner::Pod(uid));
            }
        }
        self.failed.retain(|uid, _| listed.contains(uid));
        for pod in &pods {
            let (Some(name), Some(uid)) = (pod.metadata.name.clone(), pod.metadata.uid.clone()) else { continue };
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            let result = if pod.metadata.deletion_timestamp.is_some() {
                self.terminate(&api, pod, &name, &uid, node.as_deref()).await
            } else if node.is_none() {
                self.schedule(&api, pod, &name).await
            } else if node.as_deref() == Some(self.node.as_str()) {
                self.supervise(&api, pod, &name, &uid).await
            } else {
                Ok(())
            };
            if let Err(e) = result {
                self.problem(format!("pod {name}: {e:#}"));
            }
        }
        self.resolve_services(&pods).await
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
                if repeated {
                    return Ok(());
                }
                let waiting = container::waiting_status(pod, &reason);
                if let Err(report) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&waiting)).await {
                    self.problem(format!("pod {name}: report why it waits: {report}"));
                }
                return Err(e);
            }
            self.failed.remove(uid);
        }
        self.refresh_downward(pod, uid)?;
        let now = Instant::now();
        let Some(local) = self.pods.get_mut(uid) else { return Ok(()) };
        if local.killing.is_some_and(|at| now >= at) {
            local.signal(nix::sys::signal::Signal::SIGKILL);
        }
        if let Some(status) = local.reap(now)? {
            let next = if local.finished { "finished (restartPolicy)" } else { "restarting" };
            self.log.line(&format!("pod {name}: process exited with {status}; {next}"));
        }
        if local.child.is_none() && local.restart_at.is_some_and(|at| now >= at) {
            local.restart_at = None;
            local.restarts += 1;
            let n = count_start(&self.observed, name);
            let bin = container::binary(&self.commands, &local.launch)?;
            let pid = local.spawn(n, bin, &self.dir, &self.service_env)?;
            self.log.line(&format!("pod {name}: restarted, pid {pid}"));
        }
        if local.killing.is_none() {
            for verdict in local.probes.as_mut().map(|p| p.poll(now)).unwrap_or_default() {
                match verdict {
                    Verdict::Started => self.log.line(&format!("pod {name}: startup probe passed")),
                    Verdict::Restart { probe, failures, grace } => {
                        self.log.line(&format!(
                            "pod {name}: {} probe failed {failures} times in a row; SIGTERM, grace {grace:?}, \
                             then a restart",
                            probe.name()
                        ));
                        local.signal(nix::sys::signal::Signal::SIGTERM);
                        local.killing = Some(now + grace);
                    }
                }
            }
        }
        let ready =
            local.child.is_some() && local.killing.is_none() && local.probes.as_ref().is_some_and(|p| p.ready());
        local.set_ready(ready);
        let status = local.status(HOST_IP);
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
        let objects = self.fetch(&podspec::references(pod)).await?;
        let dirs = self.volume_dirs(pod, uid).await?;
        let launch = podspec::launch(pod, placement, &dirs, &objects).map_err(|e| anyhow!("cannot start it: {e}"))?;
        let files =
            volumes::files(pod, &objects, placement, &launch.mounts).map_err(|e| anyhow!("cannot start it: {e}"))?;
        let bin = container::binary(&self.commands, &launch)?.to_path_buf();
        self.write_files(pod, &dirs, files).await?;
        hosts::publish(Owner::Pod(uid.to_string()), ip, dns_names(pod, name, &self.namespace))?;
        let mut local = PodProcess::new(name, ip, launch);
        let n = count_start(&self.observed, name);
        let pid = local.spawn(n, &bin, &self.dir, &self.service_env)?;
        self.log.line(&format!(
            "pod {name}: started pid {pid} at {ip} ({} {})",
            bin.display(),
            local.launch.args.join(" ")
        ));
        self.pods.insert(uid.to_string(), local);
        Ok(())
    }

    /// The ConfigMaps and Secrets in `refs` that exist now.
    async fn fetch(&self, refs: &References) -> Result<Objects> {
        let maps: Api<ConfigMap> = Api::namespaced(self.client(), &self.namespace);
        let secrets: Api<Secret> = Api::namespaced(self.client(), &self.namespace);
        let mut objects = Objects::default();
        for name in &refs.config_maps {
            if let Some(map) = maps.get_opt(name).await.with_context(|| format!("get ConfigMap {name}"))? {
                objects.config_maps.insert(name.clone(), map);
            }
        }
        for name in &refs.secrets {
            if let Some(secret) = secrets.get_opt(name).await.with_context(|| format!("get Secret {name}"))? {
                objects.secrets.insert(name.clone(), secret);
            }
        }
        Ok(objects)
    }

    /// Host directories for the pod's volumes: its claims' PVs; a fresh directory per pod uid
    /// for emptyDir, configMap, secret, downwardAPI and projected volumes.
    async fn volume_dirs(&self, pod: &Pod, uid: &str) -> Result<BTreeMap<String, PathBuf>> {
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
            } else if volumes::is_per_pod(v) {
                let dir = self.dir.join("pods").join(uid).join(&v.name);
                // Files of an earlier attempt to start the pod go: the objects may have changed.
                if v.empty_dir.is_none() && dir.exists() {
                    fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
                }
                fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
                out.insert(v.name.clone(), dir);
            }
        }
        Ok(out)
    }

    /// Writes the volumes' files, asking the TokenRequest API for service-account tokens.
    async fn write_files(&self, pod: &Pod, dirs: &BTreeMap<String, PathBuf>, files: Vec<VolumeFile>) -> Result<()> {
        for f in files {
            let dir = dirs.get(&f.volume).with_context(|| format!("volume {} has no directory", f.volume))?;
            let bytes = match f.content {
                Content::Bytes(bytes) => bytes,
                Content::ServiceAccountToken { audience, expiration_seconds } => {
                    self.token(pod, audience, expiration_seconds).await?.into_bytes()
                }
            };
            let file = dir.join(&f.path);
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
            }
            fs::write(&file, bytes).with_context(|| format!("write {}", file.display()))?;
            fs::set_permissions(&file, fs::Permissions::from_mode(f.mode))
                .with_context(|| format!("chmod {:o} {}", f.mode, file.display()))?;
        }
        Ok(())
    }

    /// Rewrites the downward-API files of a running pod whose content changed (a label or
    /// annotation set after the pod started), as the kubelet does: each file is replaced
    /// whole (written beside it, then renamed over it), so a reader never sees half of one.
    fn refresh_downward(&self, pod: &Pod, uid: &str) -> Result<()> {
        let Some(local) = self.pods.get(uid) else { return Ok(()) };
        let at = Placement { pod_ip: local.ip, host_ip: HOST_IP, node_name: &self.node };
        let files = volumes::downward_files(pod, at).map_err(|e| anyhow!("downward-API files: {e}"))?;
        for f in files {
            let Content::Bytes(bytes) = f.content else { continue };
            let path = self.dir.join("pods").join(uid).join(&f.volume).join(&f.path);
            if fs::read(&path).ok().as_deref() == Some(bytes.as_slice()) {
                continue;
            }
            let tmp = path.with_extension("refresh");
            fs::write(&tmp, &bytes).with_context(|| format!("write {}", tmp.display()))?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(f.mode))
                .with_context(|| format!("chmod {}", tmp.display()))?;
            fs::rename(&tmp, &path).with_context(|| format!("rename onto {}", path.display()))?;
            self.log.line(&format!("pod {}: downward-API file {}/{} updated", local.name, f.volume, f.path));
        }
        Ok(())
    }

    /// A token of the pod's service account bound to the pod, as the kubelet requests it.
    async fn token(&self, pod: &Pod, audience: Option<String>, expiration_seconds: i64) -> Result<String> {
        let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
        let request = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {
                "audiences": audience.iter().collect::<Vec<_>>(),
                "expirationSeconds": expiration_seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid},
            },
        });
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), &self.namespace);
        let answer: TokenRequest = accounts
            .create_subresource("token", &sa, &PostParams::default(), &request)
            .await
            .with_context(|| format!("a token for service account {sa}"))?;
        Ok(answer.status.map(|s| s.token).unwrap_or_default())
    }

    /// Points each Service's names at one pod it selects ([`services::backend`]) and withdraws
    /// those of Services that select none any more or are gone.
    async fn resolve_services(&mut self, pods: &[Pod]) -> Result<()> {
        let api: Api<Service> = Api::namespaced(self.client(), &self.namespace);
        let listed = api.list(&ListParams::default()).await.context("list services")?.items;
        let by_uid: BTreeMap<&str, &Pod> = pods.iter().filter_map(|p| Some((p.metadata.uid.as_deref()?, p))).collect();
        let no_labels = BTreeMap::new();
        let candidates: Vec<Candidate<'_>> = self
            .pods
            .iter()
            .map(|(uid, local)| {
                let pod = by_uid.get(uid.as_str());
                Candidate {
                    pod: &local.name,
                    labels: pod.and_then(|p| p.metadata.labels.as_ref()).unwrap_or(&no_labels),
                    ip: local.ip,
                    running: local.child.is_some(),
                    ready: local.ready,
                    terminating: local.terminating.is_some()
                        || pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
                }
            })
            .collect();
        let wanted: BTreeMap<String, Ipv4Addr> = listed
            .iter()
            .filter_map(|svc| {
                let name = svc.metadata.name.clone()?;
                let ip = services::backend(svc, &candidates, self.services.get(&name).copied())?;
                Some((name, ip))
            })
            .collect();
        let ns = self.namespace.clone();
        for (name, ip) in &wanted {
            if self.services.get(name) != Some(ip) {
                hosts::publish(Owner::Service(format!("{ns}/{name}")), *ip, services::names(name, &ns))?;
                self.log.line(&format!("service {name} resolves to {ip}"));
                self.services.insert(name.clone(), *ip);
            }
        }
        let gone: Vec<String> = self.services.keys().filter(|n| !wanted.contains_key(*n)).cloned().collect();
        for name in gone {
            hosts::withdraw(&Owner::Service(format!("{ns}/{name}")))?;
            self.log.line(&format!("service {name} resolves to no pod: names withdrawn"));
            self.services.remove(&name);
        }
        Ok(())
    }

    /// The kubelet's part of a deletion: SIGTERM, the grace period, SIGKILL, final delete.
    async fn terminate(&mut self, api: &Api<Pod>, pod: &Pod, name: &str, uid: &str, node: Option<&str>) -> Result<()> {
        if node.is_some_and(|n| n != self.node) {
            return Ok(());
        }
        if let Some(local) = self.pods.get_mut(uid) {
            let now = Instant::now();
            let deadline = match local.terminating {
                Some(deadline) => deadline,
                None => {
                    let grace = pod
                        .metadata
                        .deletion_grace_period_seconds
                        .map_or(local.launch.grace, |s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
                    if local.child.is_some() {
                        self.log.line(&format!("pod {name}: deleted; SIGTERM, grace {grace:?}"));
                        local.signal(nix::sys::signal::Signal::SIGTERM);
                    }
                    local.probes = None;
                    local.set_ready(false);
                    *local.terminating.insert(now + grace)
                }
            };
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
            local.kill_now();
            self.pods.remove(uid);
            hosts::withdraw(&Owner::Pod(uid.to_string()))?;
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
            local.signal(nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        for (uid, local) in &mut self.pods {
            while let Some(child) = local.child.as_mut() {
                if child.try_wait().ok().flatten().is_some() || Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            local.kill_now();
            let _ = hosts::withdraw(&Owner::Pod(uid.clone()));
        }
        self.pods.clear();
        for name in std::mem::take(&mut self.services).into_keys() {
            let _ = hosts::withdraw(&Owner::Service(format!("{}/{name}", self.namespace)));
        }
        self.publish_observed();
        let nodes: Api<Node> = Api::all(self.client());
        let _ = nodes.delete(&self.node, &DeleteParams::default()).await;
        self.log.line("stopped");
    }
}

/// The variables the kubelet sets in every container for the `kubernetes` Service, which
/// in-cluster clients use to reach the API server: here the API server itself, `server`
/// being `https://<ip>:<port>` (its certificate names the IP).
fn service_env(server: &str) -> Result<Vec<(String, String)>> {
    let addr: std::net::SocketAddr = server
        .strip_prefix("https://")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| anyhow!("the API server's address {server:?} is not https://<ip>:<port>"))?;
    let (host, port) = (addr.ip().to_string(), addr.port().to_string());
    Ok(vec![
        ("KUBERNETES_SERVICE_HOST".into(), host.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.clone()),
        ("KUBERNETES_PORT".into(), format!("tcp://{host}:{port}")),
    ])
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

/// Counts one more start of pod `name`; the count so far.
fn count_start(observed: &Mutex<Observed>, name: &str) -> usize {
    let mut o = observed.lock().unwrap_or_else(|e| e.into_inner());
    let n = o.starts.entry(name.to_string()).or_default();
    *n += 1;
    *n
}

/// [`wait_until`], failing with what `what` is and the runner's recent problems and log.
pub fn wait_for<T>(runner: &PodRunner, timeout: Duration, what: &str, f: impl FnMut() -> Result<T>) -> Result<T> {
    wait_until(timeout, f).map_err(|e| {
        let problems = runner.observed().problems;
        let recent = &problems[problems.len().saturating_sub(5)..];
        e.context(format!("{what}\nrunner problems: {recent:#?}\nrunner log:\n{}", runner.log_tail(20)))
    })
}
