#!/usr/bin/env bash
# Runs every Strom test on this machine, installing what the tests need first.
#   ./test.sh            everything: format, lints, unit + property tests, e2e tests with
#                        librdkafka (rdkafka crate), then kcat and kafka-python (e2e/scripts)
# Environment: STROM_SKIP_LINT=1 skips fmt/clippy; CARGO_BUILD_JOBS as usual.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n==> %s\n' "$*"; }

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
cargo build --release --workspace --bins

if [ "${STROM_SKIP_LINT:-0}" != 1 ]; then
  step "cargo clippy"
  cargo clippy --release --workspace --all-targets -- -D warnings
fi

step "cargo test -p broker (unit and property tests)"
cargo test --release -p broker

step "cargo test -p e2e (real strom processes, librdkafka clients; one test at a time)"
export STROM_BIN="$PWD/target/release/strom"
cargo test --release -p e2e -- --test-threads=1

step "e2e/scripts/clients.sh (kcat and kafka-python against a real broker)"
bash e2e/scripts/clients.sh
