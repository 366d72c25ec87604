//! Requirement (issue 8): a hand-written StatefulSet of `strom serve` pods with a headless
//! Service — no operator — applied to a real Kubernetes control plane, its pods run by the
//! pod runner (`e2e::k8s::kubelet`) as local `strom` processes: the brokers form a cluster
//! through their DNS names, become Ready in the API and serve a librdkafka client; a deleted
//! pod is recreated by the StatefulSet controller, restarted on the same volume, rejoins and
//! catches up with no acknowledged record lost; scaling to 4 and back to 3 starts and stops
//! the fourth broker and keeps its PVC.
//!
//! Real parts only: the apiserver stores and validates the manifests, the StatefulSet, PV
//! and garbage-collector controllers of kube-controller-manager act on them, the runner does
//! what a kubelet would, and the clients are librdkafka's. The tests run one at a time (each
//! runs three or four brokers beside the control plane on a small machine).

#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use e2e::broker::strom_bin;
use e2e::clients;
use e2e::cluster::{metadata_view, MetadataView};
use e2e::k8s::controlplane::ControlPlane;
use e2e::k8s::kubelet::{wait_for, PodRunner};
use e2e::workload::{check_exactly_once_in_order, Writer};

/// From `kubectl apply` to three Ready brokers (first start of the processes included).
const FORM: Duration = Duration::from_secs(120);
/// A recreated pod rejoining, or a replica catching up.
const REJOIN: Duration = Duration::from_secs(120);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The headless Service and the StatefulSet of `replicas` brokers in `ns`: the first three
/// are the metadata quorum's voters, found through their stable DNS names.
fn manifest(ns: &str, replicas: usize) -> String {
    let fqdn = |i: usize| format!("strom-{i}.strom.{ns}.svc.cluster.local");
    let voters = (0..3).map(|i| format!("{i}@{}:9093", fqdn(i))).collect::<Vec<_>>().join(",");
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: strom, namespace: {ns}}}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {{app: strom}}
  ports:
  - {{name: kafka, port: 9092}}
  - {{name: internal, port: 9093}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: strom, namespace: {ns}}}
spec:
  serviceName: strom
  replicas: {replicas}
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: strom}}}}
  template:
    metadata: {{labels: {{app: strom}}}}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: strom
        image: strom:dev
        command: [strom, serve]
        args:
        - --node-id=$(NODE_ID)
        - --data-dir=/var/lib/strom/data
        - --kafka-listen=$(POD_IP):9092
        - --internal-listen=$(POD_IP):9093
        - --http-listen=$(POD_IP):9094
        - --advertised-kafka=$(POD_NAME).strom.$(POD_NAMESPACE).svc.cluster.local:9092
        - --advertised-internal=$(POD_NAME).strom.$(POD_NAMESPACE).svc.cluster.local:9093
        - --voters={voters}
        - --broker-session-timeout-ms=4000
        - --broker-heartbeat-interval-ms=500
        - --default-replication-factor=3
        - --min-insync-replicas=2
        - --group-initial-rebalance-delay-ms=0
        env:
        - name: NODE_ID
          valueFrom: {{fieldRef: {{fieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"}}}}
        - name: POD_NAME
          valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
        - name: POD_NAMESPACE
          valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}
        - name: POD_IP
          valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
        ports:
        - {{name: kafka, containerPort: 9092}}
        - {{name: internal, containerPort: 9093}}
        - {{name: http, containerPort: 9094}}
        readinessProbe:
          httpGet: {{path: /readyz, port: http}}
          periodSeconds: 1
          failureThreshold: 3
        volumeMounts:
        - {{name: data, mountPath: /var/lib/strom}}
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
"#
    )
}

/// A test's namespace, its runner and its brokers.
struct Brokers {
    plane: &'static ControlPlane,
    ns: String,
    runner: PodRunner,
}

impl Brokers {
    fn apply(prefix: &str, replicas: usize) -> Brokers {
        let plane = ControlPlane::shared().unwrap();
        let ns = plane.namespace(prefix).unwrap();
        let strom = strom_bin().unwrap();
        let runner = PodRunner::start(plane, &ns, &[("strom", strom.as_path())]).unwrap();
        let applied = plane.kubectl_with_input(&["apply", "-f", "-"], &manifest(&ns, replicas)).unwrap();
        assert_eq!(applied.code, 0, "{applied:?}");
        Brokers { plane, ns, runner }
    }

    /// A topic of 3 partitions, replication factor 3, min.insync.replicas 2.
    fn create_topic(&self, name: &str) {
        let admin = clients::admin_client(&self.bootstrap()).unwrap();
        let created = clients::create_topic_with(&admin, name, 3, 3, &[("min.insync.replicas", "2")]).unwrap();
        assert!(created.is_ok(), "create {name}: {created:?}");
    }

    fn fqdn(&self, i: usize) -> String {
        format!("strom-{i}.strom.{}.svc.cluster.local", self.ns)
    }

    fn bootstrap(&self) -> String {
        (0..3).map(|i| format!("{}:9092", self.fqdn(i))).collect::<Vec<_>>().join(",")
    }

    /// Broker `i`'s Kafka address, resolved as a client resolves it.
    fn kafka_addr(&self, i: usize) -> Result<SocketAddr> {
        let name = format!("{}:9092", self.fqdn(i));
        name.to_socket_addrs()?.next().with_context(|| format!("{name} does not resolve"))
    }

    fn metadata(&self, i: usize) -> Result<MetadataView> {
        metadata_view(self.kafka_addr(i)?, None)
    }

    fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        self.plane.kubectl_ok(&all)
    }

    /// Waits until the StatefulSet reports `n` Ready replicas (the API's view, from the
    /// runner's readiness probes) and the runner runs exactly pods 0..n.
    fn wait_ready(&self, n: usize, timeout: Duration) -> Result<()> {
        wait_for(&self.runner, timeout, &format!("{n} Ready brokers"), || {
            let ready = self.kubectl(&["get", "statefulset", "strom", "-o", "jsonpath={.status.readyReplicas}"])?;
            let running: Vec<String> = self.runner.observed().running.keys().cloned().collect();
            let want: Vec<String> = (0..n).map(|i| format!("strom-{i}")).collect();
            ensure!(ready.trim() == n.to_string() && running == want, "readyReplicas {ready:?}, running {running:?}");
            Ok(())
        })
        .map_err(|e| e.context(self.diagnostics()))
    }

    /// Waits until every partition of `topic` has all `rf` replicas in its ISR, as broker `via` sees it.
    fn wait_in_sync(&self, via: usize, topic: &str, rf: usize, timeout: Duration) -> Result<()> {
        wait_for(&self.runner, timeout, &format!("{topic} fully in sync"), || {
            let view = metadata_view(self.kafka_addr(via)?, Some(&[topic]))?;
            let t = view.topics.get(topic).with_context(|| format!("{topic} unknown"))?;
            ensure!(!t.partitions.is_empty(), "{topic} has no partitions");
            for (p, part) in t.partitions.iter().enumerate() {
                ensure!(
                    part.isr.len() == rf && part.leader >= 0,
                    "{topic}-{p}: leader {} ISR {:?}",
                    part.leader,
                    part.isr
                );
            }
            Ok(())
        })
    }

    fn diagnostics(&self) -> String {
        let pods = self
            .plane
            .kubectl(&["-n", &self.ns, "get", "pods,pvc", "-o", "wide"])
            .map(|r| r.stdout)
            .unwrap_or_default();
        let mut out = format!("kubectl get pods,pvc:\n{pods}\nrunner log:\n{}", self.runner.log_tail(30));
        for name in self.runner.observed().starts.keys() {
            out.push_str(&format!("\n----- {name} -----\n{}", self.runner.pod_log_tail(name, 15)));
        }
        out
    }
}

/// The `partitions=` a broker printed at its `n`th start (the log it recovered).
fn partitions_at_start(log: &str, n: usize) -> Result<usize> {
    let marker = format!("===== pod runner: start #{n} ");
    let from = log.find(&marker).with_context(|| format!("no start #{n} in the log"))?;
    let line = log[from..]
        .lines()
        .find(|l| l.contains("strom broker started"))
        .with_context(|| format!("start #{n} did not get as far as 'strom broker started'"))?;
    let value = line.split_whitespace().find_map(|w| w.strip_prefix("partitions=")).context("no partitions= field")?;
    Ok(value.parse()?)
}

#[test]
fn a_statefulset_of_three_brokers_forms_a_cluster_through_dns_names_and_serves_a_kafka_client() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let b = Brokers::apply("sts-three", 3);
    b.wait_ready(3, FORM).unwrap();

    // Each pod's IP in the API is the address its DNS name resolves to, and the brokers
    // advertise those names.
    for i in 0..3 {
        let ip = b.kubectl(&["get", "pod", &format!("strom-{i}"), "-o", "jsonpath={.status.podIP}"]).unwrap();
        assert_eq!(ip.trim(), b.kafka_addr(i).unwrap().ip().to_string(), "strom-{i}");
    }
    let view = b.metadata(1).unwrap();
    let advertised: Vec<String> = view.brokers.values().cloned().collect();
    assert_eq!(advertised, (0..3).map(|i| format!("{}:9092", b.fqdn(i))).collect::<Vec<_>>(), "{view:?}");

    b.create_topic("events");
    b.wait_in_sync(0, "events", 3, FORM).unwrap();
    let writer = Writer::start(&b.bootstrap(), "events", 3, 500).unwrap();
    writer.wait_progress(1000, Duration::from_secs(60)).unwrap();
    let written = writer.stop().unwrap();
    let read = clients::read_to_end(&b.bootstrap(), "events", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("three pods: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
    assert!(checked.acked >= 1000, "{checked:?}");

    // A container that dies is restarted in the same pod, and the API says so.
    let crashed = b.runner.observed().running["strom-2"].clone();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(crashed.pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for(&b.runner, REJOIN, "strom-2 restarted after SIGKILL", || {
        let restarts =
            b.kubectl(&["get", "pod", "strom-2", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"])?;
        let now = b.runner.observed().running.get("strom-2").cloned().context("strom-2 not running")?;
        ensure!(
            restarts == "1" && now.uid == crashed.uid && now.pid != crashed.pid,
            "restartCount {restarts:?}, {now:?}"
        );
        Ok(())
    })
    .unwrap();
    b.wait_ready(3, REJOIN).unwrap();
    b.wait_in_sync(2, "events", 3, REJOIN).unwrap();
}

#[test]
fn a_deleted_broker_pod_is_recreated_on_its_volume_rejoins_and_loses_no_acknowledged_record() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let b = Brokers::apply("sts-delete", 3);
    b.wait_ready(3, FORM).unwrap();
    b.create_topic("orders");
    b.wait_in_sync(0, "orders", 3, FORM).unwrap();
    let volume = b.kubectl(&["get", "pvc", "data-strom-1", "-o", "jsonpath={.spec.volumeName}"]).unwrap();
    let before = b.runner.observed().running["strom-1"].clone();

    let writer = Writer::start(&b.bootstrap(), "orders", 3, 300).unwrap();
    writer.wait_progress(500, Duration::from_secs(60)).unwrap();
    b.kubectl(&["delete", "pod", "strom-1", "--wait=false"]).unwrap();
    // The StatefulSet controller recreates the pod (a new uid); the runner starts it again.
    wait_for(&b.runner, REJOIN, "strom-1 recreated", || {
        let o = b.runner.observed();
        let now = o.running.get("strom-1").context("strom-1 not running")?;
        ensure!(now.uid != before.uid && o.starts["strom-1"] == 2, "strom-1: {now:?}, starts {:?}", o.starts);
        Ok(())
    })
    .unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{}", before.pid)).exists(), "the old process is gone");
    b.wait_ready(3, REJOIN).unwrap();
    writer.wait_progress(500, Duration::from_secs(60)).unwrap();
    b.wait_in_sync(0, "orders", 3, REJOIN).map_err(|e| e.context(b.diagnostics())).unwrap();
    let written = writer.stop().unwrap();

    // Same claim, same volume, and the broker found its partitions on it.
    let after = b.kubectl(&["get", "pvc", "data-strom-1", "-o", "jsonpath={.spec.volumeName}"]).unwrap();
    assert_eq!(after, volume, "the recreated pod mounts the same PV");
    let recovered = partitions_at_start(&b.runner.pod_log_tail("strom-1", 400), 2).unwrap();
    assert!(recovered >= 3, "broker 1 restarted with {recovered} partitions on its volume");

    let read = clients::read_to_end(&b.bootstrap(), "orders", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("pod deletion: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
}

#[test]
fn scaling_the_statefulset_to_four_and_back_starts_and_stops_the_fourth_broker_and_keeps_its_claim() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let b = Brokers::apply("sts-scale", 3);
    b.wait_ready(3, FORM).unwrap();

    b.kubectl(&["scale", "statefulset", "strom", "--replicas=4"]).unwrap();
    b.wait_ready(4, FORM).unwrap();
    wait_for(&b.runner, FORM, "broker 3 registered", || {
        let view = b.metadata(0)?;
        ensure!(view.brokers.contains_key(&3), "brokers {:?}", view.brokers);
        Ok(())
    })
    .unwrap();
    let fourth = b.runner.observed().running["strom-3"].clone();
    let volume = b.runner.volume_dir("data-strom-3");
    ensure_files(&volume).unwrap();

    b.kubectl(&["scale", "statefulset", "strom", "--replicas=3"]).unwrap();
    b.wait_ready(3, REJOIN).unwrap();
    wait_for(&b.runner, REJOIN, "pod strom-3 deleted", || {
        let run = b.plane.kubectl(&["-n", &b.ns, "get", "pod", "strom-3", "-o", "name"])?;
        ensure!(run.code != 0 && run.stderr.contains("NotFound"), "strom-3 still there: {run:?}");
        Ok(())
    })
    .unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{}", fourth.pid)).exists(), "the fourth process stopped");
    // Kubernetes keeps a scaled-down pod's claim (persistentVolumeClaimRetentionPolicy
    // defaults to Retain), and with it the broker's data.
    let phase = b.kubectl(&["get", "pvc", "data-strom-3", "-o", "jsonpath={.status.phase}"]).unwrap();
    assert_eq!(phase, "Bound");
    ensure_files(&volume).unwrap();
    let log = b.runner.pod_log_tail("strom-3", 200);
    assert!(log.contains("strom broker stopped"), "strom-3 stopped cleanly on SIGTERM:\n{log}");

    // The three that remain still serve.
    b.create_topic("after");
    b.wait_in_sync(0, "after", 3, FORM).unwrap();
    let records: Vec<(i32, String)> = (0..30).map(|i| (i % 3, format!("v{i}"))).collect();
    clients::produce_to_partitions(&b.bootstrap(), "after", &records).unwrap();
    let read = clients::read_to_end(&b.bootstrap(), "after", Duration::from_secs(60)).unwrap();
    assert_eq!(read.len(), 30);
}

fn ensure_files(dir: &std::path::Path) -> Result<()> {
    let entries =
        std::fs::read_dir(dir.join("data")).with_context(|| format!("read {}", dir.join("data").display()))?;
    if entries.count() == 0 {
        bail!("{} is empty", dir.display());
    }
    Ok(())
}
