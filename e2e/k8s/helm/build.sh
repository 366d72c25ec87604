#!/usr/bin/env bash
# Builds the `helm` CLI the chart tests run (helm.sh/helm/v4, the version pinned in go.mod
# next to this script) from its Go module, once per machine, as e2e/k8s/controlplane/build.sh
# builds the control plane. Its own module: helm's k8s.io libraries are newer than the
# control plane's pins, and one module would lift those.
#
#   bash e2e/k8s/helm/build.sh      # build if missing, then print the bin directory
#
# The binary goes to $STROM_CACHE_DIR (default ~/.cache/strom)/helm-<version>-<key>/bin, where
# <key> hashes go.mod, go.sum and this script. Concurrent callers wait for one build (flock).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"

HELM_VERSION=$(grep -oP '^\s*(require\s+)?helm\.sh/helm/v4 \Kv[0-9][^ ]*' go.mod | head -1)
[[ -n "$HELM_VERSION" ]] || { echo "helm/build.sh: go.mod must require helm.sh/helm/v4" >&2; exit 1; }
KEY=$(cat go.mod go.sum build.sh | sha256sum | cut -c1-12)
CACHE=${STROM_CACHE_DIR:-$HOME/.cache/strom}
OUT=$CACHE/helm-$HELM_VERSION-$KEY

if [[ -x "$OUT/bin/helm" ]]; then
  echo "$OUT/bin"
  exit 0
fi
command -v go >/dev/null || { echo "helm/build.sh: go is not installed" >&2; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/helm.lock"
flock 9
if [[ -x "$OUT/bin/helm" ]]; then
  echo "$OUT/bin"
  exit 0
fi
echo "helm/build.sh: building helm $HELM_VERSION into $OUT (once per machine)" >&2
started=$(date +%s)
STAGE=$(mktemp -d "$CACHE/helm-build.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# The version helm reports, and the Kubernetes version it assumes without --kube-version
# (the flags of helm's own Makefile).
flags="-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
go build -trimpath -ldflags "-s -w $flags" -o "$STAGE/bin/" tool
echo $(($(date +%s) - started)) >"$STAGE/build-seconds"
rm -rf "$OUT"
mv "$STAGE" "$OUT"
trap - EXIT
echo "helm/build.sh: built in $(cat "$OUT/build-seconds") s" >&2
echo "$OUT/bin"
