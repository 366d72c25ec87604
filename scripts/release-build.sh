#!/usr/bin/env bash
# The release build of what Strom ships: `strom` (the broker, its CLI and `strom dev`) and
# `strom-operator`. test.sh (so CI) and the Dockerfile's build stage both run this script,
# so the image's build is the one CI proves works. (The tests' own builds unify features
# across the whole workspace, so their binaries are built from the same sources with the
# same profile but are not byte-for-byte the image's.)
#   scripts/release-build.sh [OUT_DIR]   build, and copy both binaries into OUT_DIR if given
# Environment: CARGO_BUILD_JOBS and the rest of cargo's, as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p broker --bin strom -p operator --bin strom-operator

# The copies for an image lose their debug line tables (237 MB → 35 MB for the two); the
# binaries in target/ keep them for backtraces in the tests.
if [[ $# -ge 1 ]]; then
  mkdir -p "$1"
  for bin in strom strom-operator; do
    if command -v strip >/dev/null; then
      strip -o "$1/$bin" "target/release/$bin"
    else
      cp "target/release/$bin" "$1/$bin"
    fi
  done
  echo "strom and strom-operator in $1"
fi
