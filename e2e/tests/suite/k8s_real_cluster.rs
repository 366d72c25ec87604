//! Requirement (issue 32, the suite for a real cluster): the chart installed, the examples
//! applied, records produced and read back through the bootstrap Service by Kafka clients
//! running as pods, the Cluster scaled 3 → 5 → 3, a broker pod deleted, a rolling restart
//! forced; after each step nothing acknowledged is lost and the conditions agree with the
//! pods ([`e2e::k8s::suite`]).
//!
//! Against a real cluster (kind, k3d, a cloud cluster): `STROM_E2E_KUBECONFIG` (a kubeconfig
//! whose user may install CRDs and cluster roles) and `STROM_E2E_IMAGE` (the image built from
//! the Dockerfile, loaded into or pullable by the cluster); optional `STROM_E2E_CLIENT_IMAGE`
//! (default `docker.io/edenhill/kcat:1.7.1`), `STROM_E2E_KUBECTL` (default `kubectl` on PATH),
//! `STROM_E2E_KEEP=1` to leave what it made. Without a kubeconfig that test says so and passes.
//! The same scenario runs in CI on the test control plane, the pods run by pod runners
//! (`kcat` and `sh` mapped to this machine's), so the suite itself is exercised on every run.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use e2e::k8s::controlplane::ControlPlane;
use e2e::k8s::helm::Helm;
use e2e::k8s::kubelet::PodRunner;
use e2e::k8s::operator::operator_bin;
use e2e::k8s::suite::{self, Kube, Target};

const CLIENT_IMAGE: &str = "docker.io/edenhill/kcat:1.7.1";

#[test]
fn the_users_path_on_a_real_cluster() {
    let Some(kubeconfig) = std::env::var_os("STROM_E2E_KUBECONFIG").map(PathBuf::from) else {
        println!(
            "skipped: STROM_E2E_KUBECONFIG is not set. To run the suite against a real cluster: \
             STROM_E2E_KUBECONFIG=~/.kube/config STROM_E2E_IMAGE=strom:dev \
             cargo test --release -p e2e --test suite k8s_real_cluster:: -- --nocapture (docs/packaging.md)"
        );
        return;
    };
    let image = std::env::var("STROM_E2E_IMAGE")
        .expect("STROM_E2E_IMAGE must name the image under test (repository:tag) with STROM_E2E_KUBECONFIG");
    let home = tempfile::tempdir().unwrap();
    let run = std::process::id();
    let target = Target {
        kube: Kube { kubectl: suite::kubectl_from_env(), kubeconfig: kubeconfig.clone() },
        helm: Helm::with_kubeconfig(&kubeconfig, home.path()).unwrap(),
        image,
        client_image: std::env::var("STROM_E2E_CLIENT_IMAGE").unwrap_or_else(|_| CLIENT_IMAGE.into()),
        release_ns: format!("strom-e2e-system-{run}"),
        ns: format!("strom-e2e-{run}"),
        step_timeout: Duration::from_secs(600),
    };
    let result = suite::run(&target);
    if std::env::var_os("STROM_E2E_KEEP").is_none() {
        suite::clean_up(&target);
    }
    let report = result.unwrap();
    println!("{report:#?}");
}

#[test]
fn the_users_path_on_the_test_control_plane() {
    let plane = ControlPlane::shared().unwrap();
    let release_ns = plane.namespace("strom-system").unwrap();
    let ns = plane.namespace("streaming").unwrap();
    let operator = operator_bin().unwrap();
    let strom = e2e::broker::strom_bin().unwrap();
    let (kcat, sh) = (PathBuf::from("/usr/bin/kcat"), PathBuf::from("/bin/sh"));
    assert!(kcat.is_file(), "kcat is not installed (test.sh installs it)");
    let _operators = PodRunner::start(plane, &release_ns, &[("strom-operator", operator.as_path())]).unwrap();
    let _brokers =
        PodRunner::start(plane, &ns, &[("strom", strom.as_path()), ("kcat", kcat.as_path()), ("sh", sh.as_path())])
            .unwrap();
    let target = Target {
        kube: Kube { kubectl: plane.kubectl_bin().to_path_buf(), kubeconfig: plane.kubeconfig().to_path_buf() },
        helm: Helm::against(plane).unwrap(),
        image: "ghcr.io/strom-dev/strom:test".into(),
        client_image: CLIENT_IMAGE.into(),
        release_ns,
        ns,
        step_timeout: Duration::from_secs(240),
    };
    let report = suite::run(&target).unwrap();
    println!("{report:#?}");
}
