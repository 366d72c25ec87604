//! Requirement (issue 30): the operator turns a `Cluster` applied with kubectl into brokers on
//! persistent volumes and keeps them healthy — proven on the real kube-apiserver and
//! controller-manager, with `strom-operator` running as a process against the test's
//! kubeconfig and the pod runner (`e2e::k8s::kubelet`) running the broker pods it asks for,
//! unchanged, as local `strom` processes. Clients are librdkafka's.
//!
//! The tests run one at a time: each runs three to five brokers beside the control plane.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use e2e::clients;
use e2e::k8s::kubelet::wait_for;
use e2e::k8s::operated::{partitions_at_start, refused, Operated, FORM};
use e2e::k8s::operator::OperatorProcess;
use e2e::workload::{check_exactly_once_in_order, Writer};
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A replica catching up, a rolling restart, a scale step.
const SETTLE: Duration = Duration::from_secs(240);

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `topic` with `partitions` partitions, RF 3, min.insync.replicas 2.
fn create_topic(c: &Operated, topic: &str, partitions: i32) {
    let admin = clients::admin_client(&c.bootstrap().unwrap()).unwrap();
    let created = clients::create_topic_with(&admin, topic, partitions, 3, &[("min.insync.replicas", "2")]).unwrap();
    assert!(created.is_ok(), "create {topic}: {created:?}");
}

fn owned_by_cluster(object: &Value, cluster_uid: &str) -> bool {
    object["metadata"]["ownerReferences"].as_array().is_some_and(|refs| {
        refs.iter().any(|r| r["kind"] == "Cluster" && r["uid"] == cluster_uid && r["controller"] == true)
    })
}

#[test]
fn a_cluster_applied_with_kubectl_becomes_ready_brokers_that_serve_kafka_clients_and_is_garbage_collected() {
    let _one = one_at_a_time();
    let c = Operated::start("op-create", "events").unwrap();
    // Rack awareness: the node's zone label becomes each broker's rack.
    c.plane.kubectl_ok(&["label", "node", c.runner.node(), "topology.kubernetes.io/zone=zone-a"]).unwrap();
    let rack = "  rack:\n    topologyKey: topology.kubernetes.io/zone\n";
    let manifest = e2e::k8s::operated::cluster_manifest("events", &c.ns, 3, 3, rack)
        .replace("    size: 1Gi\n", "    size: 1Gi\n    claimDeletionPolicy: Delete\n");
    let applied = c.apply(&manifest).unwrap();
    assert_eq!(applied.code, 0, "{applied:?}");
    let cluster = c.wait_ready(3, FORM).unwrap();
    let uid = cluster["metadata"]["uid"].as_str().unwrap().to_string();

    // Every object it made is owned by the Cluster.
    let objects: Value = serde_json::from_str(
        &c.kubectl(&[
            "get",
            "configmap,service,statefulset,poddisruptionbudget",
            "-l",
            "strom.dev/cluster=events",
            "-o",
            "json",
        ])
        .unwrap(),
    )
    .unwrap();
    let kinds: BTreeSet<String> = objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .inspect(|o| assert!(owned_by_cluster(o, &uid), "not owned by the Cluster: {}", o["metadata"]))
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
        .collect();
    let expected: BTreeSet<String> = [
        "ConfigMap/events-broker-config",
        "Service/events-brokers",
        "Service/events-bootstrap",
        "StatefulSet/events-broker",
        "PodDisruptionBudget/events-broker",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(kinds, expected);

    // kubectl get shows the columns people read.
    let table = c.kubectl(&["get", "clusters"]).unwrap();
    let header = table.lines().next().unwrap();
    for column in ["NAME", "READY", "BROKERS", "CONTROLLER", "URP", "AGE"] {
        assert!(header.contains(column), "{column} missing from:\n{table}");
    }
    let row = table.lines().nth(1).unwrap();
    assert!(row.starts_with("events") && row.contains("True") && row.contains("3/3"), "{table}");
    let controller = cluster["status"]["activeController"].as_i64().unwrap();
    let racks: Vec<&str> =
        cluster["status"]["brokers"].as_array().unwrap().iter().map(|b| b["rack"].as_str().unwrap_or("")).collect();
    assert_eq!(racks, ["zone-a"; 3], "each broker registered with its node's zone: {}", cluster["status"]);
    let described = c.describe(0).unwrap();
    let registered: Vec<&str> =
        described["cluster"]["brokers"].as_array().unwrap().iter().map(|b| b["rack"].as_str().unwrap_or("")).collect();
    assert_eq!(registered, ["zone-a"; 3], "{described}");
    assert!((0..3).contains(&controller), "{}", cluster["status"]);

    // The brokers formed one cluster through their DNS names and advertise them.
    let view = c.metadata(1, None).unwrap();
    let advertised: Vec<String> = view.brokers.values().cloned().collect();
    assert_eq!(advertised, (0..3).map(|i| format!("{}:9092", c.fqdn(i))).collect::<Vec<_>>(), "{view:?}");

    // A producer and a consumer through the bootstrap servers in status.
    let bootstrap = c.bootstrap().unwrap();
    assert_eq!(bootstrap, format!("events-bootstrap.{}.svc:9092", c.ns));
    create_topic(&c, "orders", 3);
    c.wait_in_sync(0, "orders", 3, 3, FORM).unwrap();
    let writer = Writer::start(&bootstrap, "orders", 3, 500).unwrap();
    writer.wait_progress(1000, Duration::from_secs(60)).unwrap();

    // A broker container that dies is restarted in its pod, and catches up.
    let crashed = c.runner.observed().running[&c.pod(2)].clone();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(crashed.pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for(&c.runner, SETTLE, "broker 2 restarted after SIGKILL", || {
        let restarts =
            c.kubectl(&["get", "pod", &c.pod(2), "-o", "jsonpath={.status.containerStatuses[0].restartCount}"])?;
        let now = c.runner.observed().running.get(&c.pod(2)).cloned().context("not running")?;
        ensure!(
            restarts == "1" && now.uid == crashed.uid && now.pid != crashed.pid,
            "restartCount {restarts}, {now:?}"
        );
        Ok(())
    })
    .unwrap();
    writer.wait_progress(500, Duration::from_secs(60)).unwrap();
    c.wait_in_sync(2, "orders", 3, 3, SETTLE).unwrap();
    let written = writer.stop().unwrap();
    let read = clients::read_to_end(&bootstrap, "orders", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("create: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
    assert!(checked.acked >= 1500, "{checked:?}");
    c.wait_ready(3, SETTLE).unwrap();

    // Deleting the Cluster deletes what it owns, and (claimDeletionPolicy Delete) the claims.
    c.kubectl(&["delete", "cluster", "events", "--wait=false"]).unwrap();
    wait_for(&c.runner, SETTLE, "everything the Cluster owned deleted", || {
        let left = c.kubectl(&[
            "get",
            "configmap,service,statefulset,poddisruptionbudget,pod,pvc",
            "-l",
            "strom.dev/cluster=events",
            "-o",
            "name",
        ])?;
        let pvcs = c.kubectl(&["get", "pvc", "-o", "name"])?;
        ensure!(left.trim().is_empty() && pvcs.trim().is_empty(), "left: {left} {pvcs}");
        ensure!(c.runner.observed().running.is_empty(), "still running: {:?}", c.runner.observed().running);
        Ok(())
    })
    .unwrap();
}

/// Samples, while a test acts, which brokers the runner has down (no process, or not ready)
/// and every pod uid it runs, to tell afterwards how many were down at once and in which
/// order pods were replaced.
struct DownTracker {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Tracked>,
}

#[derive(Debug, Default)]
struct Tracked {
    max_down: usize,
    /// Pod names in the order their uid changed.
    replaced: Vec<String>,
}

impl DownTracker {
    fn start(c: &Operated, pods: Vec<String>) -> DownTracker {
        let stop = Arc::new(AtomicBool::new(false));
        let observed = {
            // The runner's snapshot is cheap and shared: poll it from a thread.
            let runner_observed = c.runner.observed_handle();
            move || runner_observed.lock().unwrap_or_else(|e| e.into_inner()).clone()
        };
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut t = Tracked::default();
            let mut uids: BTreeMap<String, String> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                let o = observed();
                let down = pods.iter().filter(|p| !o.running.get(*p).is_some_and(|r| r.ready)).count();
                t.max_down = t.max_down.max(down);
                for (name, r) in &o.running {
                    if let Some(before) = uids.insert(name.clone(), r.uid.clone()) {
                        if before != r.uid {
                            t.replaced.push(name.clone());
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            t
        });
        DownTracker { stop, handle }
    }

    fn stop(self) -> Tracked {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

#[test]
fn a_config_change_rolls_the_brokers_one_at_a_time_controller_last_under_load_losing_nothing() {
    let _one = one_at_a_time();
    let c = Operated::start("op-roll", "roll").unwrap();
    c.apply_cluster(3, 3, "").unwrap();
    let cluster = c.wait_ready(3, FORM).unwrap();
    let revision = cluster["status"]["currentRevision"].as_str().unwrap().to_string();
    let bootstrap = c.bootstrap().unwrap();
    create_topic(&c, "payments", 6);
    c.wait_in_sync(0, "payments", 3, 3, FORM).unwrap();
    let volumes: Vec<String> = (0..3)
        .map(|i| {
            c.kubectl(&["get", "pvc", &format!("data-{}", c.pod(i)), "-o", "jsonpath={.spec.volumeName}"]).unwrap()
        })
        .collect();
    let writer = Writer::start(&bootstrap, "payments", 6, 300).unwrap();
    writer.wait_progress(300, Duration::from_secs(60)).unwrap();

    let controller = c.cluster().unwrap()["status"]["activeController"].as_i64().unwrap();
    let tracker = DownTracker::start(&c, (0..3).map(|i| c.pod(i)).collect());
    c.kubectl(&[
        "patch",
        "cluster",
        "roll",
        "--type=merge",
        "-p",
        r#"{"spec":{"config":{"log.retention.ms":"86400000"}}}"#,
    ])
    .unwrap();
    // The operator starts a rolling restart, then finishes it.
    wait_for(&c.runner, Duration::from_secs(60), "a rolling restart starts", || {
        let op = c.cluster()?["status"]["operation"]["type"].clone();
        ensure!(op == "RollingRestart" || c.runner.observed().starts.values().any(|n| *n > 1), "operation {op}");
        Ok(())
    })
    .unwrap();
    let after = c.wait_ready(3, SETTLE * 2).unwrap();
    let tracked = tracker.stop();
    writer.wait_progress(300, Duration::from_secs(60)).unwrap();
    let written = writer.stop().unwrap();

    println!("rolling restart: {tracked:?}, controller {controller}");
    assert_ne!(after["status"]["currentRevision"].as_str().unwrap(), revision, "pods run the new template");
    assert_eq!(tracked.max_down, 1, "never two brokers down at once: {tracked:?}");
    assert_eq!(tracked.replaced.len(), 3, "each broker restarted once: {tracked:?}");
    // The controller last: the operator's Events say which broker it restarted as the active
    // controller (the controller before the rollout, unless raft moved it meanwhile).
    let restarts: Vec<String> =
        c.events().unwrap().into_iter().filter(|e| e.1 == "BrokerRestarted").map(|e| e.2).collect();
    assert_eq!(restarts.len(), 3, "{restarts:?}");
    assert!(restarts[2].contains("the active controller, last"), "{restarts:?}");
    assert!(!restarts[0].contains("controller") && !restarts[1].contains("controller"), "{restarts:?}");
    let last = restarts[2]
        .split_whitespace()
        .nth(2)
        .and_then(|id| id.trim_end_matches([',', ':']).parse::<usize>().ok())
        .unwrap();
    assert_eq!(tracked.replaced.last(), Some(&c.pod(last)), "the broker restarted last is the one named: {tracked:?}");
    println!("controller before the rollout {controller}, restarted last {last}");
    let config =
        c.kubectl(&["get", "configmap", "roll-broker-config", "-o", "jsonpath={.data.broker\\.toml}"]).unwrap();
    assert!(config.contains("log_retention_ms = 86400000"), "{config}");
    // Each pod came back on its own volume and found its partitions there.
    for (i, volume) in volumes.iter().enumerate() {
        let now =
            c.kubectl(&["get", "pvc", &format!("data-{}", c.pod(i)), "-o", "jsonpath={.spec.volumeName}"]).unwrap();
        assert_eq!(&now, volume);
        let recovered = partitions_at_start(&c.runner.pod_log_tail(&c.pod(i), 2000), 2).unwrap();
        assert!(recovered >= 6, "broker {i} restarted with {recovered} partitions on its volume");
    }
    let events = c.events().unwrap();
    assert!(events.iter().filter(|e| e.1 == "BrokerRestarted").count() >= 3, "{events:?}");
    assert!(events.iter().any(|e| e.1 == "RollingRestartFinished"), "{events:?}");

    let read = clients::read_to_end(&bootstrap, "payments", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("rolling restart: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
}

#[test]
fn scaling_to_five_and_back_to_three_moves_partitions_drains_before_removing_and_loses_nothing() {
    let _one = one_at_a_time();
    let c = Operated::start("op-scale", "scale").unwrap();
    c.apply_cluster(3, 3, "  rebalance:\n    maxConcurrentMoves: 4\n").unwrap();
    c.wait_ready(3, FORM).unwrap();
    let bootstrap = c.bootstrap().unwrap();
    create_topic(&c, "orders", 12);
    c.wait_in_sync(0, "orders", 3, 3, FORM).unwrap();
    let writer = Writer::start(&bootstrap, "orders", 12, 300).unwrap();
    writer.wait_progress(300, Duration::from_secs(60)).unwrap();

    // Up to five: the new brokers register and receive partitions.
    c.kubectl(&["scale", "cluster/scale", "--replicas=5"]).unwrap();
    c.wait_ready(5, SETTLE).unwrap();
    let view = c.metadata(0, Some(&["orders"])).unwrap();
    let hosted: BTreeSet<i32> = view.topics["orders"].partitions.iter().flat_map(|p| p.replicas.clone()).collect();
    assert!(hosted.contains(&3) && hosted.contains(&4), "orders spread onto the new brokers: {view:?}");
    c.wait_in_sync(0, "orders", 3, 5, SETTLE).unwrap();
    writer.wait_progress(300, Duration::from_secs(60)).unwrap();

    // Down to three: a sampler records what brokers 3 and 4 held when their pods went away.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        let admin = c.admin_addr(0).unwrap();
        let observed = c.runner.observed_handle();
        let (p3, p4) = (c.pod(3), c.pod(4));
        std::thread::spawn(move || {
            let mut last_held: BTreeMap<i64, i64> = BTreeMap::new();
            let mut at_removal: BTreeMap<String, i64> = BTreeMap::new();
            // One more pass after `stop`: the pods may go while a pass is in its sleep, and
            // the Cluster is Ready (so `stop` is set) only once they are gone.
            loop {
                let last_pass = stop.load(Ordering::Relaxed);
                if let Ok(run) = e2e::cli::strom(admin, &["cluster", "describe", "--output", "json"]) {
                    if let Ok(v) = run.json() {
                        for b in v["cluster"]["brokers"].as_array().into_iter().flatten() {
                            last_held.insert(b["id"].as_i64().unwrap_or(-1), b["replicas"].as_i64().unwrap_or(0));
                        }
                    }
                }
                let running = observed.lock().unwrap_or_else(|e| e.into_inner()).running.clone();
                for (pod, id) in [(&p3, 3), (&p4, 4)] {
                    if !running.contains_key(pod.as_str()) && !at_removal.contains_key(pod.as_str()) {
                        at_removal.insert(pod.clone(), last_held.get(&id).copied().unwrap_or(-1));
                    }
                }
                if last_pass {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            at_removal
        })
    };
    c.kubectl(&["scale", "cluster/scale", "--replicas=3"]).unwrap();
    c.wait_ready(3, SETTLE).unwrap();
    stop.store(true, Ordering::Relaxed);
    let at_removal = sampler.join().unwrap();
    assert_eq!(at_removal.get(&c.pod(3)), Some(&0), "broker 3 held nothing when its pod went: {at_removal:?}");
    assert_eq!(at_removal.get(&c.pod(4)), Some(&0), "broker 4 held nothing when its pod went: {at_removal:?}");
    // The leaving brokers stopped cleanly on SIGTERM; their claims stay (Retain, the default).
    for id in [3, 4] {
        let log = c.runner.pod_log_tail(&c.pod(id), 300);
        assert!(log.contains("strom broker stopped"), "broker {id} stopped cleanly:\n{log}");
        let phase =
            c.kubectl(&["get", "pvc", &format!("data-{}", c.pod(id)), "-o", "jsonpath={.status.phase}"]).unwrap();
        assert_eq!(phase, "Bound");
    }
    let described = c.describe(0).unwrap();
    let ids: Vec<i64> =
        described["cluster"]["brokers"].as_array().unwrap().iter().map(|b| b["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![0, 1, 2], "removed brokers are gone from strom cluster describe");
    c.wait_in_sync(0, "orders", 3, 3, SETTLE).unwrap();
    writer.wait_progress(300, Duration::from_secs(60)).unwrap();
    let written = writer.stop().unwrap();

    let events = c.events().unwrap();
    for reason in [
        "ScaleUpStarted",
        "RebalanceStarted",
        "ScaleUpFinished",
        "ScaleDownStarted",
        "DrainStarted",
        "BrokersRemoved",
        "ScaleDownFinished",
    ] {
        assert!(events.iter().any(|e| e.1 == reason), "no {reason} Event: {events:?}");
    }
    let read = clients::read_to_end(&bootstrap, "orders", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("scale 3 → 5 → 3: {checked:?}");
    assert_eq!(checked.failed, 0, "no non-retriable producer error: {checked:?}");
}

#[test]
fn a_scale_down_below_the_replication_factor_and_bad_specs_are_refused_leaving_the_cluster_alone() {
    let _one = one_at_a_time();
    let c = Operated::start("op-refuse", "keep").unwrap();
    c.apply_cluster(3, 1, "").unwrap();
    c.wait_ready(3, FORM).unwrap();
    create_topic(&c, "ledger", 3);
    c.wait_in_sync(0, "ledger", 3, 3, FORM).unwrap();
    let starts = c.runner.observed().starts;

    // 3 → 1 with an RF 3 topic: refused, the StatefulSet keeps its size.
    c.kubectl(&["scale", "cluster/keep", "--replicas=1"]).unwrap();
    wait_for(&c.runner, Duration::from_secs(60), "the scale-down refused", || {
        let (stalled, reason, message, _) = c.condition("Stalled")?;
        ensure!(stalled == "True" && reason == "ScaleDownRefused", "Stalled {stalled} {reason}: {message}");
        let (ready, ..) = c.condition("Ready")?;
        ensure!(ready == "False", "Ready {ready}");
        Ok(())
    })
    .unwrap();
    let (_, _, message, _) = c.condition("Stalled").unwrap();
    assert!(message.contains("replication factor 3"), "{message}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.statefulset_replicas().unwrap(), 3);
    let events = c.events().unwrap();
    assert!(
        events.iter().any(|e| e.0 == "Warning" && e.1 == "ScaleDownRefused" && e.2.contains("replication factor 3")),
        "{events:?}"
    );
    // Back to 3 clears it.
    c.kubectl(&["scale", "cluster/keep", "--replicas=3"]).unwrap();
    c.wait_ready(3, SETTLE).unwrap();
    assert_eq!(c.condition("Stalled").unwrap().0, "False");

    // The API server refuses what the schema and CEL rules forbid, with the rule's message.
    let patch = |p: &str| c.kubectl_run(&["patch", "cluster", "keep", "--type=merge", "-p", p]).unwrap();
    refused(&patch(r#"{"spec":{"replicas":0}}"#), "spec.replicas").unwrap();
    refused(&patch(r#"{"spec":{"controllers":3}}"#), "controllers cannot change after creation").unwrap();
    refused(&patch(r#"{"spec":{"storage":{"size":"lots"}}}"#), "storage.size must be a quantity such as 10Gi").unwrap();
    refused(&patch(r#"{"spec":{"storage":{"size":"512Mi"}}}"#), "storage.size cannot shrink").unwrap();
    let two = c.apply(&e2e::k8s::operated::cluster_manifest("two", &c.ns, 3, 2, "")).unwrap();
    refused(&two, "controllers must be 1, 3 or 5").unwrap();
    let fewer = c.apply(&e2e::k8s::operated::cluster_manifest("fewer", &c.ns, 1, 3, "")).unwrap();
    refused(&fewer, "replicas must be at least controllers").unwrap();

    // What only the operator can judge: Ready=False with the reason and an Event; the running
    // brokers are left alone.
    let generation = c.cluster().unwrap()["metadata"]["generation"].as_i64().unwrap();
    c.kubectl(&[
        "patch",
        "cluster",
        "keep",
        "--type=merge",
        "-p",
        r#"{"spec":{"config":{"log.retention.hours":"1"}}}"#,
    ])
    .unwrap();
    wait_for(&c.runner, Duration::from_secs(60), "the bad config refused", || {
        let (ready, reason, message, observed) = c.condition("Ready")?;
        ensure!(
            ready == "False" && reason == "InvalidSpec" && observed > generation,
            "Ready {ready} {reason} {observed}: {message}"
        );
        ensure!(message.contains("log.retention.hours"), "{message}");
        Ok(())
    })
    .unwrap();
    assert!(c.events().unwrap().iter().any(|e| e.0 == "Warning" && e.1 == "InvalidSpec"));
    std::thread::sleep(Duration::from_secs(3));
    let config =
        c.kubectl(&["get", "configmap", "keep-broker-config", "-o", "jsonpath={.data.broker\\.toml}"]).unwrap();
    assert!(!config.contains("retention_hours"), "{config}");
    assert_eq!(c.runner.observed().starts, starts, "no broker restarted");
    c.kubectl(&[
        "patch",
        "cluster",
        "keep",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/config/log.retention.hours"}]"#,
    ])
    .unwrap();
    c.wait_ready(3, SETTLE).unwrap();
    assert_eq!(c.runner.observed().starts, starts, "no broker restarted");

    // Deleting the Cluster keeps the claims (claimDeletionPolicy Retain, the default).
    c.kubectl(&["delete", "cluster", "keep", "--wait=false"]).unwrap();
    wait_for(&c.runner, SETTLE, "the cluster's objects deleted, its claims kept", || {
        let left =
            c.kubectl(&["get", "statefulset,pod,service,configmap", "-l", "strom.dev/cluster=keep", "-o", "name"])?;
        ensure!(left.trim().is_empty(), "left: {left}");
        let claims = c.kubectl(&["get", "pvc", "-o", "name"])?;
        ensure!(claims.lines().count() == 3, "claims: {claims}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_broker_that_cannot_start_past_replace_after_has_its_replicas_moved_and_is_refilled_on_an_empty_volume() {
    let _one = one_at_a_time();
    let c = Operated::start("op-failover", "fo").unwrap();
    c.apply_cluster(4, 3, "  failover:\n    replaceAfter: 10s\n").unwrap();
    c.wait_ready(4, FORM).unwrap();
    let bootstrap = c.bootstrap().unwrap();
    create_topic(&c, "events", 8);
    c.wait_in_sync(0, "events", 3, 4, FORM).unwrap();
    let writer = Writer::start(&bootstrap, "events", 8, 200).unwrap();
    writer.wait_progress(200, Duration::from_secs(60)).unwrap();
    let held = c.metadata(0, Some(&["events"])).unwrap().topics["events"]
        .partitions
        .iter()
        .filter(|p| p.replicas.contains(&3))
        .count();
    assert!(held > 0, "broker 3 holds replicas of events");

    // Broker 3 crashes and cannot start again: its data directory became a file.
    let volume = c.runner.volume_dir(&format!("data-{}", c.pod(3)));
    std::fs::rename(volume.join("data"), volume.join("data.lost")).unwrap();
    std::fs::write(volume.join("data"), b"not a directory").unwrap();
    let pid = c.runner.observed().running[&c.pod(3)].pid;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();

    // Past replaceAfter its replicas move to the others, whose ISRs are whole again.
    wait_for(&c.runner, SETTLE, "broker 3's replicas moved away", || {
        let view = c.metadata(0, Some(&["events"]))?;
        for (p, part) in view.topics["events"].partitions.iter().enumerate() {
            ensure!(
                !part.replicas.contains(&3) && part.isr.len() == 3,
                "events-{p}: replicas {:?} ISR {:?}",
                part.replicas,
                part.isr
            );
        }
        Ok(())
    })
    .unwrap();
    let status = c.cluster().unwrap()["status"].clone();
    let b3 = status["brokers"].as_array().unwrap().iter().find(|b| b["id"] == 3).unwrap().clone();
    assert!(b3["replaced"] == true && !b3["downSince"].is_null(), "{b3}");
    let events = c.events().unwrap();
    assert!(events.iter().any(|e| e.1 == "ReplaceBrokerStarted"), "{events:?}");
    writer.wait_progress(200, Duration::from_secs(60)).unwrap();

    // It comes back on an empty volume and is filled again.
    std::fs::remove_file(volume.join("data")).unwrap();
    std::fs::create_dir(volume.join("data")).unwrap();
    wait_for(&c.runner, SETTLE * 2, "broker 3 refilled", || {
        let status = c.cluster()?["status"].clone();
        let b3 = status["brokers"].as_array().into_iter().flatten().find(|b| b["id"] == 3).cloned().unwrap_or_default();
        ensure!(
            b3["ready"] == true
                && b3["replaced"].is_null()
                && b3["replicas"].as_i64() > Some(0)
                && status["operation"].is_null(),
            "{b3} {}",
            status["operation"]
        );
        Ok(())
    })
    .map_err(|e| e.context(c.diagnostics()))
    .unwrap();
    c.wait_in_sync(0, "events", 3, 4, SETTLE).unwrap();
    let written = writer.stop().unwrap();
    let read = clients::read_to_end(&bootstrap, "events", Duration::from_secs(60)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("failover: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
}

#[test]
fn two_operators_share_one_lease_and_the_survivor_finishes_a_scale_down_the_killed_leader_began() {
    let _one = one_at_a_time();
    let mut c = Operated::start("op-lease", "ha").unwrap();
    c.operators.push(OperatorProcess::start(c.plane, &c.ns, "op-b", &[]).unwrap());
    c.apply_cluster(4, 3, "  rebalance:\n    throttle: 256Ki\n").unwrap();
    c.wait_ready(4, FORM).unwrap();

    // Exactly one holds the Lease, and says so in its metrics.
    let holder = c.kubectl(&["get", "lease", "strom-operator", "-o", "jsonpath={.spec.holderIdentity}"]).unwrap();
    let leaders: Vec<(String, f64)> =
        c.operators.iter().map(|o| (o.identity.clone(), o.metric("strom_operator_leader").unwrap())).collect();
    assert_eq!(leaders.iter().filter(|(_, v)| *v == 1.0).count(), 1, "{leaders:?}");
    assert!(leaders.iter().any(|(id, v)| *id == holder && *v == 1.0), "holder {holder}: {leaders:?}");
    // Every reconcile, whatever its kind and result (the error series exist from the start at 0).
    let reconciles = |o: &OperatorProcess| -> f64 {
        let text = o.metrics().unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with("strom_operator_reconciles_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let standby = c.operators.iter().find(|o| o.identity != holder).unwrap();
    assert_eq!(reconciles(standby), 0.0, "the standby does not reconcile");

    // Data to move, so the scale-down's drain takes a while under the throttle.
    let bootstrap = c.bootstrap().unwrap();
    create_topic(&c, "big", 8);
    let records: Vec<(i32, String)> = (0..4000).map(|i| (i % 8, format!("{i:06}-{}", "x".repeat(1000)))).collect();
    clients::produce_to_partitions(&bootstrap, "big", &records).unwrap();
    let writer = Writer::start(&bootstrap, "big", 8, 100).unwrap();
    writer.wait_progress(100, Duration::from_secs(60)).unwrap();

    c.kubectl(&["scale", "cluster/ha", "--replicas=3"]).unwrap();
    wait_for(&c.runner, Duration::from_secs(60), "the drain started", || {
        let op = c.cluster()?["status"]["operation"].clone();
        ensure!(op["type"] == "ScaleDown" && op["phase"] == "MovingReplicas", "{op}");
        let events = c.events()?;
        ensure!(events.iter().any(|e| e.1 == "DrainStarted"), "{events:?}");
        Ok(())
    })
    .unwrap();
    let killed_at = Instant::now();
    let leader = c.operators.iter_mut().find(|o| o.identity == holder).unwrap();
    leader.kill();

    // The survivor takes the Lease and carries the scale-down to its end.
    let survivor = c.operators.iter().find(|o| o.identity != holder).unwrap().identity.clone();
    wait_for(&c.runner, Duration::from_secs(60), "the standby takes over", || {
        let now = c.kubectl(&["get", "lease", "strom-operator", "-o", "jsonpath={.spec.holderIdentity}"])?;
        ensure!(now == survivor, "holder {now}");
        Ok(())
    })
    .unwrap();
    println!("lease taken over {:?} after the SIGKILL", killed_at.elapsed());
    c.wait_ready(3, SETTLE * 2).unwrap();
    let standby = c.operators.iter().find(|o| o.identity == survivor).unwrap();
    assert!(reconciles(standby) > 0.0);
    // The survivor resumed the scale-down recorded in status; it did not start another.
    let events = c.events().unwrap();
    let started = events.iter().filter(|e| e.1 == "ScaleDownStarted").count();
    assert_eq!(started, 1, "one scale-down, resumed: {events:?}");
    assert!(events.iter().any(|e| e.1 == "ScaleDownFinished"), "{events:?}");
    let ids: Vec<i64> = c.describe(0).unwrap()["cluster"]["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![0, 1, 2]);
    let written = writer.stop().unwrap();
    let read = clients::read_to_end(&bootstrap, "big", Duration::from_secs(120)).unwrap();
    let checked = check_exactly_once_in_order(&written, &read).unwrap();
    println!("operator failover: {checked:?}");
    assert_eq!(checked.failed, 0, "{checked:?}");
    assert_eq!(read.len(), records.len() + checked.acked, "the pre-written records are all there too");
}
