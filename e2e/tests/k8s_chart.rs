//! Requirement (issue 32, the chart): `charts/strom` lints clean with the real Helm (default
//! values, and a values file turning every option on), renders objects the real API server
//! (Kubernetes 1.34) accepts in a server-side dry run, refuses values its schema forbids, and
//! carries the CRDs of `crds/` unchanged; its RBAC is enough for the operator to make a
//! Cluster Ready and manage Topics without one 403, and refuses what the operator does not
//! do; `helm uninstall` removes the operator and leaves Clusters and their data alone.
//!
//! The operator runs as a process holding the chart's ServiceAccount token (the API server
//! enforces the chart's RBAC on every call); running the chart's Deployment itself as a pod
//! with in-cluster configuration is the pod runner's next step (docs/packaging.md).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::sync::Mutex;
use std::time::Duration;

use e2e::k8s::controlplane::ControlPlane;
use e2e::k8s::helm::{chart_dir, Helm};
use e2e::k8s::kubelet::PodRunner;
use e2e::k8s::operated::{Operated, FORM};
use e2e::k8s::operator::OperatorProcess;

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
        // The Prometheus Operator's CRD is not installed here: its object is checked by shape.
        if !extra.is_empty() {
            assert!(rendered.contains("kind: ServiceMonitor") && rendered.contains("kind: Cluster\n"), "{rendered}");
        }
        let objects = without_kind(&rendered, "ServiceMonitor");
        let run = plane.kubectl_with_input(&["-n", &ns, "apply", "--dry-run=server", "-f", "-"], &objects).unwrap();
        assert_eq!(run.code, 0, "the API server refused what the chart renders: {run:?}\n{objects}");
    }
}

#[test]
fn the_operator_with_the_charts_service_account_does_its_work_and_nothing_more() {
    let _one = one_at_a_time();
    // The chart installed with the real helm into its own namespace (its Deployment's pod
    // stays Pending: no runner runs that namespace).
    let plane = ControlPlane::shared().unwrap();
    let release_ns = plane.namespace("strom-system").unwrap();
    let helm = Helm::against(plane).unwrap();
    let chart = chart_dir().display().to_string();
    helm.ok(&["install", "strom", &chart, "--namespace", &release_ns, "--wait=false"]).unwrap();
    let sa = format!("system:serviceaccount:{release_ns}:strom-operator");

    // Least privilege, as the API server answers it.
    for (verb, what, ns, allowed) in [
        ("patch", "statefulsets.apps", "default", "yes"),
        ("delete", "pods", "default", "yes"),
        ("patch", "topics.strom.dev", "default", "yes"),
        ("delete", "secrets", "default", "no"),
        ("get", "secrets", "default", "no"),
        ("delete", "statefulsets.apps", "default", "no"),
        ("delete", "customresourcedefinitions.apiextensions.k8s.io", "", "no"),
        ("update", "leases.coordination.k8s.io", release_ns.as_str(), "yes"),
        ("update", "leases.coordination.k8s.io", "default", "no"),
    ] {
        let mut args = vec!["auth", "can-i", verb, what, "--as", sa.as_str()];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let run = plane.kubectl(&args).unwrap();
        assert_eq!(run.stdout.trim(), allowed, "can {sa} {verb} {what} in {ns:?}? {run:?}");
    }

    // The operator with that ServiceAccount's token: a Cluster to Ready, a Topic created.
    let token = plane.kubectl_ok(&["-n", &release_ns, "create", "token", "strom-operator", "--duration=2h"]).unwrap();
    let admin = fs::read_to_string(plane.kubeconfig()).unwrap();
    let ca = admin.lines().find_map(|l| l.trim().strip_prefix("certificate-authority: ")).unwrap().to_string();
    let kubeconfig = plane.dir().join(format!("sa-{release_ns}.kubeconfig"));
    fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority: {ca}\n\
             users:\n- name: sa\n  user:\n    token: {}\ncontexts:\n- name: sa\n  context:\n    cluster: e2e\n    user: sa\n\
             current-context: sa\n",
            plane.server(),
            token.trim()
        ),
    )
    .unwrap();
    let ns = plane.namespace("op-chart").unwrap();
    let runner = PodRunner::start(plane, &ns, &[("strom", e2e::broker::strom_bin().unwrap().as_path())]).unwrap();
    let operator =
        OperatorProcess::start_as(plane, &ns, &release_ns, "op-sa", &["--resync-seconds=5"], &kubeconfig).unwrap();
    let c = Operated { plane, ns: ns.clone(), runner, operators: vec![operator], name: "events".into() };
    c.apply_cluster(3, 3, "").unwrap();
    c.wait_ready(3, FORM).unwrap();
    let topic = "apiVersion: strom.dev/v1alpha1\nkind: Topic\nmetadata:\n  name: orders\nspec:\n  clusterRef:\n    name: events\n  \
                 partitions: 3\n  replicationFactor: 3\n";
    let applied = plane.kubectl_with_input(&["-n", &ns, "apply", "-f", "-"], topic).unwrap();
    assert_eq!(applied.code, 0, "{applied:?}");
    c.wait_condition("topic", "orders", true, Some("InSync"), Duration::from_secs(60)).unwrap();
    let log = fs::read_to_string(c.operators[0].log_path()).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("403") || l.contains("forbidden")).collect();
    assert!(refused.is_empty(), "the operator was refused by the chart's RBAC:\n{}", refused.join("\n"));

    // helm uninstall removes the operator's objects and leaves the Cluster and its brokers.
    helm.ok(&["uninstall", "strom", "--namespace", &release_ns, "--wait"]).unwrap();
    let left = plane.kubectl_ok(&["-n", &release_ns, "get", "deployments,serviceaccounts", "-o", "name"]).unwrap();
    assert!(!left.contains("strom-operator"), "{left}");
    let role = plane.kubectl(&["get", "clusterrole", "strom-operator"]).unwrap();
    assert!(role.code != 0, "the ClusterRole stayed: {role:?}");
    assert!(c.kubectl(&["get", "cluster", "events", "-o", "name"]).unwrap().contains("events"));
    assert!(c.kubectl(&["get", "statefulset", "events-broker", "-o", "name"]).unwrap().contains("events-broker"));
    let crd = plane.kubectl(&["get", "crd", "clusters.strom.dev", "-o", "name"]).unwrap();
    assert_eq!(crd.code, 0, "the CRDs stay: {crd:?}");
}
