#!/usr/bin/env bash
# The release build of what Strom ships: `strom` (the broker, its CLI and `strom dev`) and
# `strom-operator`. test.sh (so CI) and the Dockerfile's build stage both run this script,
# so the image holds exactly what the tests ran.
#   scripts/release-build.sh [OUT_DIR]   build, and copy both binaries into OUT_DIR if given
# Environment: CARGO_BUILD_JOBS and the rest of cargo's, as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p broker --bin strom -p operator --bin strom-operator

if [[ $# -ge 1 ]]; then
  mkdir -p "$1"
  cp target/release/strom target/release/strom-operator "$1/"
  echo "strom and strom-operator in $1"
fi
