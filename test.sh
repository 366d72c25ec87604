#!/usr/bin/env bash
# Runs every Strom test on this machine, installing what the tests need first.
#   ./test.sh            everything: format, lints, unit + property tests, e2e tests with
#                        librdkafka (rdkafka crate), then kcat and kafka-python (e2e/scripts)
#                        and Apache Kafka's own tools and Java client (e2e/tests/suite/kafka_tools.rs)
# Environment: STROM_SKIP_LINT=1 skips fmt/clippy; CARGO_BUILD_JOBS as usual; STROM_CACHE_DIR
# (default ~/.cache/strom) holds Kafka's jars and the Kubernetes control plane between runs.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n==> %s\n' "$*"; }

# CI builds a clean clone: incremental caches would never be reused and take gigabytes.
if [ "${CI:-}" = true ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
  export CARGO_INCREMENTAL=0
fi

# librdkafka is built from its bundled sources by rdkafka-sys: it needs a C toolchain,
# cmake/make and perl, which the machine has; curl/zlib come from crates (libz-sys).
if ! command -v cc >/dev/null || ! command -v make >/dev/null; then
  step "installing a C toolchain"
  apt-get update -qq && apt-get install -y -qq build-essential
fi

if [ "${STROM_SKIP_LINT:-0}" != 1 ]; then
  step "cargo fmt --check"
  cargo fmt --all -- --check
fi

step "building (release profile: the tests drive real brokers under load)"
# What ships (strom, strom-operator) through the script the Dockerfile's build stage runs too;
# then the test tools (strom-load, the sandbox, ...).
bash scripts/release-build.sh
cargo build --release --workspace --bins
# the LD_PRELOAD shim the power-cut tests preload into the processes they cut (e2e/powercut)
cargo build --release -p strom-powercut

if [ "${STROM_SKIP_LINT:-0}" != 1 ]; then
  step "cargo clippy"
  cargo clippy --release --workspace --all-targets -- -D warnings
fi

step "cargo test -p broker -p operator (unit and property tests; the operator's plans, objects, CRDs)"
cargo test --release -p broker -p operator

# Kafka's tools and Java client (kafka_tools.rs) need a JDK and Maven to fetch Kafka's jars
# from Maven Central, once per machine (e2e/kafka/kafka.sh caches them per version).
if ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then
  step "installing a JDK and Maven"
  apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi
step "Apache Kafka's jars (fetched once per machine)"
bash e2e/kafka/kafka.sh home

# The Kubernetes control plane of e2e/tests/suite/k8s_*.rs: etcd, kube-apiserver,
# kube-controller-manager and kubectl built from Go modules, once per machine (cached by
# version under STROM_CACHE_DIR; a fresh machine downloads and compiles for a while); helm
# for the chart's tests; Prometheus and promtool for e2e/tests/suite/observability.rs.
step "Kubernetes control plane, helm, Prometheus and promtool (built once per machine)"
bash e2e/k8s/controlplane/build.sh
bash e2e/k8s/helm/build.sh
bash e2e/prometheus/build.sh

# kcat: the Kafka client pods of the Kubernetes suite (k8s_real_cluster.rs) and clients.sh.
if ! command -v kcat >/dev/null 2>&1; then
  step "installing kcat"
  apt-get update -qq && apt-get install -y -qq kcat >/dev/null
fi

step "cargo test -p e2e (real strom processes, librdkafka clients; one test at a time)"
export STROM_BIN="$PWD/target/release/strom"
cargo test --release -p e2e -- --test-threads=1 --skip reliability::

# The reliability scenarios' short forms (e2e/tests/suite/reliability.rs), with their output
# shown: each prints its seed, fault schedule and figures (acknowledged, read, lost,
# duplicates, ops/s and the longest gap per phase) even when it passes.
step "reliability scenarios (seeded faults, history checker)"
cargo test --release -p e2e --test suite reliability:: -- --test-threads=1 --nocapture

step "e2e/scripts/clients.sh (kcat and kafka-python against a real broker)"
bash e2e/scripts/clients.sh

step "e2e/scripts/dockerfile.sh (the Dockerfile, with the official parser)"
bash e2e/scripts/dockerfile.sh

# What the build left on disk (CI's disk is not large; e2e/README.md on why the suite is one binary).
du -sh target 2>/dev/null || true
