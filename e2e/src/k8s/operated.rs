//! A Strom cluster run the way users run it: a `Cluster` resource applied with kubectl to the
//! real control plane, `strom-operator` processes reconciling it, and the pod runner running
//! the broker pods the operator's StatefulSet asks for. What the tests of the operator share.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use super::controlplane::{ControlPlane, KubectlRun};
use super::kubelet::{wait_for, PodRunner};
use super::operator::OperatorProcess;
use crate::broker::strom_bin;
use crate::cluster::{metadata_view, MetadataView};

/// From `kubectl apply` to Ready brokers (first process starts included).
pub const FORM: Duration = Duration::from_secs(180);

/// A Cluster manifest: `replicas` brokers, `controllers` voters, and more spec lines (YAML
/// indented by two spaces, under `spec:`; not `storage`, `config` or `pod`, which it sets).
/// Short session timeouts keep failovers quick.
pub fn cluster_manifest(name: &str, namespace: &str, replicas: usize, controllers: usize, extra_spec: &str) -> String {
    format!(
        r#"apiVersion: strom.dev/v1alpha1
kind: Cluster
metadata:
  name: {name}
  namespace: {namespace}
spec:
  replicas: {replicas}
  controllers: {controllers}
{extra_spec}  image: strom:dev
  storage:
    size: 1Gi
  config:
    broker.session.timeout.ms: "4000"
    broker.heartbeat.interval.ms: "500"
    default.replication.factor: "3"
    min.insync.replicas: "2"
    group.initial.rebalance.delay.ms: "0"
  pod:
    terminationGracePeriodSeconds: 30
"#
    )
}

/// One test's namespace, pod runner, operators and Cluster.
#[derive(Debug)]
pub struct Operated {
    pub plane: &'static ControlPlane,
    pub ns: String,
    pub runner: PodRunner,
    pub operators: Vec<OperatorProcess>,
    /// The Cluster's name.
    pub name: String,
}

impl Operated {
    /// A namespace `<prefix>-n` with its runner and one operator (`op-a`); no Cluster yet.
    pub fn start(prefix: &str, name: &str) -> Result<Operated> {
        Self::start_with(prefix, name, &[])
    }

    /// As [`Operated::start`], the operator run with `extra` flags.
    pub fn start_with(prefix: &str, name: &str, extra: &[&str]) -> Result<Operated> {
        let plane = ControlPlane::shared()?;
        let ns = plane.namespace(prefix)?;
        let strom = strom_bin()?;
        let runner = PodRunner::start(plane, &ns, &[("strom", strom.as_path())])?;
        let operator = OperatorProcess::start(plane, &ns, "op-a", extra)?;
        let operated = Operated { plane, ns, runner, operators: vec![operator], name: name.to_string() };
        // The operator applies its CRDs at start; a manifest applied before they are served
        // would be refused ("no matches for kind").
        wait_for(&operated.runner, Duration::from_secs(60), "the operator's CRDs established", || {
            let run = operated.plane.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=5s",
                "crd/clusters.strom.dev",
                "crd/topics.strom.dev",
                "crd/consumergroups.strom.dev",
            ])?;
            ensure!(run.code == 0, "{}", run.stderr.trim());
            Ok(())
        })?;
        Ok(operated)
    }

    /// A resource of the namespace as JSON (`kind` as kubectl takes it, e.g. `topic`).
    pub fn get(&self, kind: &str, name: &str) -> Result<Value> {
        let text = self.kubectl(&["get", kind, name, "-o", "json"])?;
        serde_json::from_str(&text).with_context(|| format!("kubectl get {kind} {name} -o json"))
    }

    /// Condition `type_` of a resource: (status, reason, message, observedGeneration == generation).
    pub fn condition_of(&self, kind: &str, name: &str, type_: &str) -> Result<(String, String, String, bool)> {
        let r = self.get(kind, name)?;
        let c = r["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|x| x["type"] == type_)
            .with_context(|| format!("{kind} {name}: no {type_} condition in {}", r["status"]))?
            .clone();
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        let current =
            c["observedGeneration"].as_i64().is_some() && c["observedGeneration"] == r["metadata"]["generation"];
        Ok((s("status"), s("reason"), s("message"), current))
    }

    /// Waits until a resource's Ready condition has `reason` (and status True when `reason`
    /// is None) at its current generation; returns the resource.
    pub fn wait_condition(
        &self,
        kind: &str,
        name: &str,
        ready: bool,
        reason: Option<&str>,
        timeout: Duration,
    ) -> Result<Value> {
        let what = format!("{kind} {name} Ready={ready} reason {reason:?}");
        wait_for(&self.runner, timeout, &what, || {
            let (status, why, message, current) = self.condition_of(kind, name, "Ready")?;
            let want = if ready { "True" } else { "False" };
            ensure!(
                status == want && current && reason.is_none_or(|r| r == why),
                "Ready={status} reason {why}: {message} (current generation: {current})"
            );
            self.get(kind, name)
        })
        .map_err(|e| e.context(self.diagnostics()))
    }

    /// Events of one resource, oldest first: (type, reason, message).
    pub fn events_of(&self, kind: &str, name: &str) -> Result<Vec<(String, String, String)>> {
        let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
        let text = self.kubectl(&["get", "events", "--field-selector", &selector, "-o", "json"])?;
        let v: Value = serde_json::from_str(&text)?;
        let mut events: Vec<(String, (String, String, String))> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                // eventTime (MicroTime, RFC 3339 in UTC) orders Events as they happened.
                let at = e["eventTime"].as_str().or(e["firstTimestamp"].as_str()).unwrap_or_default().to_string();
                (at, (s("type"), s("reason"), s("message")))
            })
            .collect();
        events.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(events.into_iter().map(|(_, e)| e).collect())
    }

    /// `kubectl apply -f -` of `manifest`.
    pub fn apply(&self, manifest: &str) -> Result<KubectlRun> {
        self.plane.kubectl_with_input(&["apply", "-f", "-"], manifest)
    }

    /// Applies the standard manifest (see [`cluster_manifest`]) and insists it was accepted.
    pub fn apply_cluster(&self, replicas: usize, controllers: usize, extra_spec: &str) -> Result<()> {
        let applied = self.apply(&cluster_manifest(&self.name, &self.ns, replicas, controllers, extra_spec))?;
        ensure!(applied.code == 0, "kubectl apply: {applied:?}");
        Ok(())
    }

    /// kubectl in the test's namespace; stdout, or an error with what it printed.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        self.plane.kubectl_ok(&all)
    }

    /// kubectl in the namespace, whatever its exit code.
    pub fn kubectl_run(&self, args: &[&str]) -> Result<KubectlRun> {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        self.plane.kubectl(&all)
    }

    /// The Cluster as JSON.
    pub fn cluster(&self) -> Result<Value> {
        let text = self.kubectl(&["get", "cluster", &self.name, "-o", "json"])?;
        serde_json::from_str(&text).context("kubectl get cluster -o json")
    }

    /// Condition `type_` of the Cluster: (status, reason, message, observedGeneration).
    pub fn condition(&self, type_: &str) -> Result<(String, String, String, i64)> {
        let c = self.cluster()?;
        let found = c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|x| x["type"] == type_)
            .with_context(|| format!("no {type_} condition in {}", c["status"]))?
            .clone();
        let s = |k: &str| found[k].as_str().unwrap_or_default().to_string();
        Ok((s("status"), s("reason"), s("message"), found["observedGeneration"].as_i64().unwrap_or(-1)))
    }

    /// Waits until the Cluster is Ready at its current generation with `brokers` brokers, no
    /// operation in progress, and the runner runs exactly pods 0..brokers, all ready.
    pub fn wait_ready(&self, brokers: usize, timeout: Duration) -> Result<Value> {
        wait_for(&self.runner, timeout, &format!("Cluster {} Ready with {brokers} brokers", self.name), || {
            let c = self.cluster()?;
            let generation = c["metadata"]["generation"].as_i64();
            let status = &c["status"];
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["type"] == "Ready")
                .cloned()
                .unwrap_or(Value::Null);
            ensure!(
                ready["status"] == "True" && ready["observedGeneration"].as_i64() == generation,
                "Ready: {ready} (generation {generation:?}); operation {}",
                status["operation"]
            );
            ensure!(status["operation"].is_null(), "operation in progress: {}", status["operation"]);
            ensure!(
                status["readyReplicas"].as_u64() == Some(brokers as u64),
                "readyReplicas {}",
                status["readyReplicas"]
            );
            let running = self.runner.observed().running;
            let names: Vec<String> = running.keys().cloned().collect();
            let want: Vec<String> = (0..brokers).map(|i| self.pod(i)).collect();
            ensure!(names == want && running.values().all(|p| p.ready), "runner runs {running:?}");
            Ok(c)
        })
        .map_err(|e| e.context(self.diagnostics()))
    }

    pub fn pod(&self, id: usize) -> String {
        format!("{}-broker-{id}", self.name)
    }

    pub fn fqdn(&self, id: usize) -> String {
        format!("{}.{}-brokers.{}.svc.cluster.local", self.pod(id), self.name, self.ns)
    }

    /// `status.bootstrapServers`.
    pub fn bootstrap(&self) -> Result<String> {
        let c = self.cluster()?;
        c["status"]["bootstrapServers"].as_str().map(str::to_string).context("no status.bootstrapServers")
    }

    fn resolve(name: &str) -> Result<SocketAddr> {
        name.to_socket_addrs()?.next().with_context(|| format!("{name} does not resolve"))
    }

    /// Broker `id`'s Kafka address, resolved as a client resolves it.
    pub fn kafka_addr(&self, id: usize) -> Result<SocketAddr> {
        Self::resolve(&format!("{}:9092", self.fqdn(id)))
    }

    /// Broker `id`'s internal (admin) address.
    pub fn admin_addr(&self, id: usize) -> Result<SocketAddr> {
        Self::resolve(&format!("{}:9093", self.fqdn(id)))
    }

    pub fn metadata(&self, via: usize, topics: Option<&[&str]>) -> Result<MetadataView> {
        metadata_view(self.kafka_addr(via)?, topics)
    }

    /// `strom cluster describe --output json` through broker `via`.
    pub fn describe(&self, via: usize) -> Result<Value> {
        crate::cli::strom(self.admin_addr(via)?, &["cluster", "describe", "--output", "json"])?.success()?.json()
    }

    /// Waits until every partition of `topic` has `rf` in-sync replicas on brokers `0..brokers`.
    pub fn wait_in_sync(&self, via: usize, topic: &str, rf: usize, brokers: usize, timeout: Duration) -> Result<()> {
        wait_for(&self.runner, timeout, &format!("{topic} fully in sync"), || {
            let view = self.metadata(via, Some(&[topic]))?;
            let t = view.topics.get(topic).with_context(|| format!("{topic} unknown"))?;
            ensure!(!t.partitions.is_empty(), "{topic} has no partitions");
            for (p, part) in t.partitions.iter().enumerate() {
                ensure!(
                    part.isr.len() == rf && part.leader >= 0 && part.replicas.iter().all(|r| (*r as usize) < brokers),
                    "{topic}-{p}: leader {} replicas {:?} ISR {:?}",
                    part.leader,
                    part.replicas,
                    part.isr
                );
            }
            Ok(())
        })
    }

    /// Events of the Cluster, oldest first: (type, reason, message).
    pub fn events(&self) -> Result<Vec<(String, String, String)>> {
        self.events_of("Cluster", &self.name)
    }

    /// The StatefulSet's spec.replicas.
    pub fn statefulset_replicas(&self) -> Result<i64> {
        let r =
            self.kubectl(&["get", "statefulset", &format!("{}-broker", self.name), "-o", "jsonpath={.spec.replicas}"])?;
        r.trim().parse().with_context(|| format!("replicas {r:?}"))
    }

    /// What a failing test should show: objects, the Cluster's status, the operator's and
    /// runner's logs, each pod's last lines.
    pub fn diagnostics(&self) -> String {
        let objects = self
            .plane
            .kubectl(&["-n", &self.ns, "get", "clusters,statefulsets,pods,pvc", "-o", "wide"])
            .map(|r| r.stdout + &r.stderr)
            .unwrap_or_default();
        let status = self.cluster().map(|c| c["status"].to_string()).unwrap_or_else(|e| format!("{e:#}"));
        let mut out = format!("{objects}\nstatus: {status}\nrunner log:\n{}", self.runner.log_tail(20));
        for op in &self.operators {
            out.push_str(&format!("\n----- operator {} -----\n{}", op.identity, op.log_tail(30)));
        }
        for name in self.runner.observed().starts.keys() {
            out.push_str(&format!("\n----- {name} -----\n{}", self.runner.pod_log_tail(name, 10)));
        }
        out
    }
}

/// The `partitions=` a broker printed at its `n`th start in its pod's log (the partitions
/// it found on its volume).
pub fn partitions_at_start(log: &str, n: usize) -> Result<usize> {
    let marker = format!("===== pod runner: start #{n} ");
    let from = log.find(&marker).with_context(|| format!("no start #{n} in the log"))?;
    let line = log[from..]
        .lines()
        .find(|l| l.contains("strom broker started"))
        .with_context(|| format!("start #{n} did not get as far as 'strom broker started'"))?;
    let value = line.split_whitespace().find_map(|w| w.strip_prefix("partitions=")).context("no partitions= field")?;
    Ok(value.parse()?)
}

/// Fails unless `run` failed and printed `needle`.
pub fn refused(run: &KubectlRun, needle: &str) -> Result<()> {
    if run.code == 0 {
        bail!("accepted, expected a refusal mentioning {needle:?}: {run:?}");
    }
    ensure!(run.stderr.contains(needle) || run.stdout.contains(needle), "refused without {needle:?}: {run:?}");
    Ok(())
}
