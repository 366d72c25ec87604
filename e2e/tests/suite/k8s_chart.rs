//! Requirement (issue 32, the chart): `charts/strom` lints clean with the real Helm (default
//! values, and a values file turning every option on), renders objects the real API server
//! (Kubernetes 1.34) accepts in a server-side dry run, refuses values its schema forbids, and
//! carries the CRDs of `crds/` unchanged; its RBAC is enough for the operator to make a
//! Cluster Ready and manage Topics without one 403, and refuses what the operator does not
//! do; `helm uninstall` removes the operator and leaves Clusters and their data alone.
//!
//! The operator is the chart's Deployment, run by the pod runner as a pod with in-cluster
//! configuration: the token of the chart's ServiceAccount at the fixed path, the API server
//! as `KUBERNETES_SERVICE_HOST`, so the API server enforces the chart's RBAC on every call.
//! `helm upgrade` to a chart whose CRD gained a field makes the field usable: the new
//! operator pod applies its CRDs at start (Helm never upgrades a chart's `crds/`).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use e2e::clients;
use e2e::k8s::controlplane::ControlPlane;
use e2e::k8s::helm::{chart_dir, Helm};
use e2e::k8s::kubelet::{wait_for, PodRunner};
use e2e::k8s::operated::{refused, Operated, FORM};
use e2e::k8s::operator::operator_bin;
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn all_on() -> String {
    chart_dir().join("ci/all-on-values.yaml").display().to_string()
}

/// The documents of a multi-document YAML stream except those of `kind`.
fn without_kind(stream: &str, kind: &str) -> String {
    stream
        .split("\n---")
        .filter(|doc| !doc.lines().any(|l| l.trim() == format!("kind: {kind}")))
        .collect::<Vec<_>>()
        .join("\n---")
}

#[test]
fn the_chart_lints_clean_and_renders_what_the_api_server_accepts() {
    let _one = one_at_a_time();
    let plane = ControlPlane::shared().unwrap();
    let helm = Helm::offline(&plane.dir().join("helm-offline")).unwrap();
    let chart = chart_dir().display().to_string();

    // helm lint: no warning or error, with default values and with every option on.
    for extra in [vec![], vec!["-f".to_string(), all_on()]] {
        let mut args = vec!["lint", chart.as_str(), "--strict"];
        args.extend(extra.iter().map(String::as_str));
        let out = helm.ok(&args).unwrap();
        assert!(out.contains("0 chart(s) failed") && !out.contains("[WARNING]") && !out.contains("[ERROR]"), "{out}");
    }

    // The chart's CRDs are the generated ones.
    let ours = fs::read_to_string(chart_dir().join("crds/strom.dev.yaml")).unwrap();
    let generated = fs::read_to_string(chart_dir().join("../../crds/strom.dev.yaml")).unwrap();
    assert!(
        ours == generated,
        "charts/strom/crds/strom.dev.yaml differs from crds/: cp crds/strom.dev.yaml charts/strom/crds/"
    );

    // The schema refuses what the operator would refuse later.
    let bad = helm.run(&["template", "x", &chart, "--set", "operator.unmanagedTopics=sometimes"]).unwrap();
    assert!(bad.code != 0 && bad.stderr.contains("unmanagedTopics"), "{bad:?}");

    // What it renders, as the real API server (1.34) validates it: a server-side dry run in a
    // namespace of its own, with the CRDs installed (the all-on values make a Cluster).
    plane
        .kubectl_ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &chart_dir().join("crds/strom.dev.yaml").display().to_string(),
        ])
        .unwrap();
    for extra in [vec![], vec!["-f".to_string(), all_on()]] {
        let ns = plane.namespace("chart-render").unwrap();
        let mut args =
            vec!["template", "strom", chart.as_str(), "--namespace", ns.as_str(), "--kube-version", "1.34.4"];
        args.extend(extra.iter().map(String::as_str));
        let rendered = helm.ok(&args).unwrap();
        for kind in
            ["Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"]
        {
            assert!(rendered.contains(&format!("kind: {kind}\n")), "no {kind} in:\n{rendered}");
        }
        // The Prometheus Operator's CRDs are not installed here: its objects are checked by
        // shape (the PrometheusRule's rules by promtool, e2e/tests/suite/observability.rs).
        if !extra.is_empty() {
            for kind in ["ServiceMonitor", "PodMonitor", "PrometheusRule", "Cluster"] {
                assert!(rendered.contains(&format!("kind: {kind}\n")), "no {kind} in:\n{rendered}");
            }
            assert!(rendered.contains("alert: StromOfflinePartitions"), "{rendered}");
        }
        assert!(rendered.contains("customresourcedefinitions"), "{rendered}");
        let mut objects = rendered.clone();
        for kind in ["ServiceMonitor", "PodMonitor", "PrometheusRule"] {
            objects = without_kind(&objects, kind);
        }
        let run = plane.kubectl_with_input(&["-n", &ns, "apply", "--dry-run=server", "-f", "-"], &objects).unwrap();
        assert_eq!(run.code, 0, "the API server refused what the chart renders: {run:?}\n{objects}");
    }
}

#[test]
fn installing_the_chart_without_crd_rights_leaves_them_out_of_the_cluster_role() {
    let _one = one_at_a_time();
    let plane = ControlPlane::shared().unwrap();
    let helm = Helm::offline(&plane.dir().join("helm-offline")).unwrap();
    let chart = chart_dir().display().to_string();
    let rendered = helm.ok(&["template", "strom", &chart, "--set", "operator.installCrds=false"]).unwrap();
    assert!(!rendered.contains("customresourcedefinitions"), "{rendered}");
    assert!(rendered.contains("name: STROM_OPERATOR_INSTALL_CRDS\n              value: \"false\""), "{rendered}");
}

/// `crds/strom.dev.yaml` as the release before this one had it: the Topic CRD without
/// `spec.config` (JSON documents, which are YAML).
fn crds_without_topic_config(plane: &ControlPlane) -> Result<String> {
    let crds = chart_dir().join("crds/strom.dev.yaml").display().to_string();
    // kubectl prints one JSON document per CRD.
    let printed = plane.kubectl_ok(&["create", "--dry-run=client", "-o", "json", "-f", &crds])?;
    let mut docs = Vec::new();
    for crd in serde_json::Deserializer::from_str(&printed).into_iter::<Value>() {
        let mut crd = crd.context("kubectl's JSON")?;
        if crd["metadata"]["name"] == "topics.strom.dev" {
            let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
            ensure!(spec.as_object_mut().and_then(|p| p.remove("config")).is_some(), "no spec.config in {spec}");
        }
        docs.push(serde_json::to_string_pretty(&crd)?);
    }
    ensure!(docs.len() == 3, "{} CRDs in {crds}", docs.len());
    Ok(docs.join("\n---\n"))
}

/// A copy of the chart as the release before this one shipped it: `crds` in its `crds/`.
fn earlier_chart(dir: &Path, crds: &str) -> Result<PathBuf> {
    fn copy(from: &Path, to: &Path) -> Result<()> {
        fs::create_dir_all(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                copy(&entry.path(), &target)?;
            } else {
                fs::copy(entry.path(), &target)?;
            }
        }
        Ok(())
    }
    let chart = dir.join("chart-earlier");
    let _ = fs::remove_dir_all(&chart);
    copy(&chart_dir(), &chart)?;
    fs::write(chart.join("crds/strom.dev.yaml"), crds)?;
    Ok(chart)
}

/// The log lines of every operator pod the runner ran that show a refusal by the API server.
fn refusals(runner: &PodRunner) -> Vec<String> {
    runner
        .observed()
        .starts
        .keys()
        .flat_map(|pod| {
            runner
                .pod_log_tail(pod, usize::MAX)
                .lines()
                .filter(|l| l.contains("403") || l.contains("forbidden") || l.contains("Forbidden"))
                .map(|l| format!("{pod}: {l}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The operator pods running and ready: (name, pid).
fn operator_pods(runner: &PodRunner) -> Vec<(String, u32)> {
    runner
        .observed()
        .running
        .into_iter()
        .filter(|(name, p)| name.starts_with("strom-operator-") && p.ready)
        .map(|(name, p)| (name, p.pid))
        .collect()
}

fn round_trip(bootstrap: &str, topic: &str, records: usize) -> Result<()> {
    let values: Vec<(i32, String)> =
        (0..records).map(|i| (i32::try_from(i % 3).unwrap_or(0), format!("{topic}-{i}"))).collect();
    clients::produce_to_partitions(bootstrap, topic, &values)?;
    let got = clients::consume_n(bootstrap, topic, records, Duration::from_secs(60))?;
    ensure!(got.len() == records, "{} of {records} records read back from {topic}", got.len());
    Ok(())
}

fn can_i(plane: &ControlPlane, sa: &str, verb: &str, what: &str, ns: &str) -> String {
    let mut args = vec!["auth", "can-i", verb, what, "--as", sa];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    plane.kubectl(&args).map(|r| r.stdout.trim().to_string()).unwrap_or_default()
}

#[test]
fn helm_install_runs_the_operator_pod_that_makes_the_example_ready_and_upgrade_and_uninstall_keep_the_data() {
    let _one = one_at_a_time();
    let plane = ControlPlane::shared().unwrap();
    let helm = Helm::against(plane).unwrap();

    // The cluster as the release before this one left it: its CRDs, in which Topics have no
    // spec.config yet, and (in the chart installed first) an operator that does not apply CRDs.
    let old_crds = crds_without_topic_config(plane).unwrap();
    let applied =
        plane.kubectl_with_input(&["apply", "--server-side", "--force-conflicts", "-f", "-"], &old_crds).unwrap();
    assert_eq!(applied.code, 0, "{applied:?}");
    let earlier = earlier_chart(plane.dir(), &old_crds).unwrap();

    // The operator's namespace and the Cluster's, each with a pod runner (a node) of its own.
    let release_ns = plane.namespace("strom-system").unwrap();
    let ns = plane.namespace("streaming").unwrap();
    let operator = operator_bin().unwrap();
    let strom = e2e::broker::strom_bin().unwrap();
    let ops = PodRunner::start(plane, &release_ns, &[("strom-operator", operator.as_path())]).unwrap();
    let brokers = PodRunner::start(plane, &ns, &[("strom", strom.as_path())]).unwrap();
    let c = Operated { plane, ns: ns.clone(), runner: brokers, operators: vec![], name: "my-cluster".into() };
    let sa = format!("system:serviceaccount:{release_ns}:strom-operator");
    let common =
        [format!("operator.watchNamespace={ns}"), "operator.resyncSeconds=5".into(), "operator.replicas=2".into()];
    let helm_args = |verb: &'static str, chart: String, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [verb, "strom", &chart, "--namespace", &release_ns, "--wait", "--timeout", "3m"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for set in common.iter().map(String::as_str).chain(extra.iter().copied()) {
            args.extend(["--set".to_string(), set.to_string()]);
        }
        args
    };
    let helm_ok = |args: Vec<String>| helm.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());

    // helm install --wait: the operator's two pods are Ready under its ServiceAccount, one
    // holding the Lease it took through the API server with the pod's own token.
    let t0 = Instant::now();
    helm_ok(helm_args("install", earlier.display().to_string(), &["operator.installCrds=false"])).unwrap();
    let operator_ready = t0.elapsed();
    let pods: Vec<String> = operator_pods(&ops).into_iter().map(|(name, _)| name).collect();
    assert_eq!(pods.len(), 2, "{:?}\n{}", ops.observed(), ops.log_tail(20));
    for pod in &pods {
        let account = plane
            .kubectl_ok(&["-n", &release_ns, "get", "pod", pod, "-o", "jsonpath={.spec.serviceAccountName}"])
            .unwrap();
        assert_eq!(account, "strom-operator");
    }
    let lease_holder = || {
        plane.kubectl_ok(&[
            "-n",
            &release_ns,
            "get",
            "lease",
            "strom-operator",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
    };
    let leader = wait_for(&ops, Duration::from_secs(60), "one operator pod holds the Lease", || {
        let holder = lease_holder()?;
        ensure!(pods.contains(&holder), "holder {holder:?}, not one of {pods:?}");
        Ok(holder)
    })
    .unwrap();

    // The example Cluster, as a user applies it, to Ready; a Kafka client round-trips.
    let example = chart_dir().join("../../examples/cluster.yaml").display().to_string();
    plane.kubectl_ok(&["-n", &ns, "apply", "-f", &example]).unwrap();
    c.wait_ready(3, FORM).unwrap();
    let cluster_ready = t0.elapsed();
    println!("helm install -> operator Ready {operator_ready:?} -> example Cluster Ready {cluster_ready:?}");
    let bootstrap = c.bootstrap().unwrap();
    // Replication factor 3: the example's min.insync.replicas is 2.
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::create_topic_with(&admin, "before-upgrade", 3, 3, &[]).unwrap().unwrap();
    round_trip(&bootstrap, "before-upgrade", 300).unwrap();

    // Two replicas: the leader's pod deleted (it releases the Lease on SIGTERM), another
    // replica takes the Lease: the standby, or the Deployment's replacement pod if that
    // starts first.
    plane.kubectl_ok(&["-n", &release_ns, "delete", "pod", &leader, "--wait=false"]).unwrap();
    let deleted = Instant::now();
    wait_for(&ops, Duration::from_secs(60), "another replica took the Lease", || {
        let holder = lease_holder()?;
        let running: Vec<String> = operator_pods(&ops).into_iter().map(|(name, _)| name).collect();
        ensure!(holder != leader && running.contains(&holder), "holder {holder:?}; running {running:?}");
        Ok(())
    })
    .unwrap();
    println!("the leader's pod deleted -> another replica leads: {:?}", deleted.elapsed());

    // Least privilege, as the API server answers it: no CRD rights without installCrds.
    for (verb, what, where_, allowed) in [
        ("patch", "statefulsets.apps", ns.as_str(), "yes"),
        ("delete", "pods", ns.as_str(), "yes"),
        ("patch", "topics.strom.dev", ns.as_str(), "yes"),
        ("delete", "secrets", ns.as_str(), "no"),
        ("get", "secrets", ns.as_str(), "no"),
        ("delete", "statefulsets.apps", ns.as_str(), "no"),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io", "", "no"),
        ("delete", "customresourcedefinitions.apiextensions.k8s.io", "", "no"),
        ("update", "leases.coordination.k8s.io", release_ns.as_str(), "yes"),
        ("update", "leases.coordination.k8s.io", ns.as_str(), "no"),
    ] {
        assert_eq!(can_i(plane, &sa, verb, what, where_), allowed, "can {sa} {verb} {what} in {where_:?}?");
    }

    // The earlier CRD has no spec.config for Topics: a strict apply of the example is refused.
    let topics = chart_dir().join("../../examples/topics.yaml").display().to_string();
    let strict = plane.kubectl(&["-n", &ns, "apply", "--validate=strict", "-f", &topics]).unwrap();
    refused(&strict, "spec.config").unwrap();

    // helm upgrade to this chart: the new operator pod applies its CRDs at start, and the
    // field is usable: accepted, stored, acted on.
    helm_ok(helm_args("upgrade", chart_dir().display().to_string(), &[])).unwrap();
    assert_eq!(can_i(plane, &sa, "patch", "customresourcedefinitions.apiextensions.k8s.io", ""), "yes");
    wait_for(&ops, Duration::from_secs(60), "the Topic CRD upgraded by the operator", || {
        let crd: Value = serde_json::from_str(&plane.kubectl_ok(&[
            "get",
            "crd",
            "topics.strom.dev",
            "-o",
            "json",
            "--show-managed-fields",
        ])?)?;
        let config =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["config"];
        ensure!(!config.is_null(), "no spec.config yet");
        let managers: Vec<&str> = crd["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        ensure!(managers.contains(&"strom-operator"), "managers {managers:?}");
        Ok(())
    })
    .unwrap();
    let before: Vec<String> = pods.clone();
    wait_for(&ops, Duration::from_secs(60), "the upgrade rolled both operator pods", || {
        let now = operator_pods(&ops);
        ensure!(now.len() == 2 && now.iter().all(|(p, _)| !before.contains(p)), "operator pods {now:?}");
        Ok(())
    })
    .unwrap();
    let applied = plane.kubectl(&["-n", &ns, "apply", "--validate=strict", "-f", &topics]).unwrap();
    assert_eq!(applied.code, 0, "{applied:?}");
    c.wait_condition("topic", "orders", true, Some("InSync"), Duration::from_secs(90)).unwrap();
    let configs = clients::topic_configs(&bootstrap, "orders").unwrap();
    assert_eq!(configs.get("retention.ms").map(String::as_str), Some("604800000"), "{configs:?}");
    let before = clients::consume_n(&bootstrap, "before-upgrade", 300, Duration::from_secs(60)).unwrap();
    assert_eq!(before.len(), 300, "records acknowledged before the upgrade");

    let refused_calls = refusals(&ops);
    assert!(refused_calls.is_empty(), "the API server refused the operator:\n{}", refused_calls.join("\n"));

    // helm uninstall: the operator goes; the Cluster, its brokers (the same processes) and
    // their records stay.
    let broker_pids: Vec<u32> = c.runner.observed().running.values().map(|p| p.pid).collect();
    helm.ok(&["uninstall", "strom", "--namespace", &release_ns, "--wait"]).unwrap();
    wait_for(&ops, Duration::from_secs(60), "the operator pod stopped", || {
        let running = ops.observed().running;
        ensure!(running.is_empty(), "still running: {running:?}");
        Ok(())
    })
    .unwrap();
    let left = plane.kubectl_ok(&["-n", &release_ns, "get", "deployments,serviceaccounts", "-o", "name"]).unwrap();
    assert!(!left.contains("strom-operator"), "{left}");
    let role = plane.kubectl(&["get", "clusterrole", "strom-operator"]).unwrap();
    assert!(role.code != 0, "the ClusterRole stayed: {role:?}");
    assert!(c.kubectl(&["get", "cluster", "my-cluster", "-o", "name"]).unwrap().contains("my-cluster"));
    assert!(c.kubectl(&["get", "topic", "orders", "-o", "name"]).unwrap().contains("orders"));
    let crd = plane.kubectl(&["get", "crd", "clusters.strom.dev", "-o", "name"]).unwrap();
    assert_eq!(crd.code, 0, "the CRDs stay: {crd:?}");
    let after: Vec<u32> = c.runner.observed().running.values().map(|p| p.pid).collect();
    assert_eq!(after, broker_pids, "the brokers were restarted by the uninstall");
    let kept = clients::consume_n(&bootstrap, "before-upgrade", 300, Duration::from_secs(60)).unwrap();
    assert_eq!(kept.len(), 300, "records after the uninstall");
    clients::create_topic_with(&admin, "after-uninstall", 3, 3, &[]).unwrap().unwrap();
    round_trip(&bootstrap, "after-uninstall", 30).unwrap();
}
