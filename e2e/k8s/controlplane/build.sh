#!/usr/bin/env bash
# Builds the tests' Kubernetes control plane from Go modules, once per machine:
# etcd (go.etcd.io/etcd/server/v3), kube-apiserver, kube-controller-manager and a kubectl of
# the same release (k8s.io/kubernetes), at the versions pinned in go.mod next to this script.
#
#   bash e2e/k8s/controlplane/build.sh      # build if missing, then print the bin directory
#
# The binaries go to $STROM_CACHE_DIR (default ~/.cache/strom)/controlplane-<versions>-<key>/bin,
# where <key> hashes go.mod, go.sum, the etcd main and this script: a second run with the
# same files prints the directory at once, a changed pin builds anew. Go's own module and
# build caches (GOMODCACHE, GOCACHE) are reused, so a rebuild after a small change is quick.
# A fresh machine downloads the modules (~400 MB) from the Go module proxy and compiles for
# several minutes; the time is written to <dir>/build-seconds and shown in docs/testing.md.
# Concurrent callers wait for one build (flock). Needs go >= 1.24.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"

# The pinned versions, as go.mod names them (a `require` line or a line of a require block).
pinned() { grep -oP "^\s*(require\s+)?\Q$1\E \Kv[0-9][^ ]*" go.mod | head -1; }
K8S_VERSION=$(pinned k8s.io/kubernetes)
ETCD_VERSION=$(pinned go.etcd.io/etcd/server/v3)
[[ -n "$K8S_VERSION" && -n "$ETCD_VERSION" ]] || {
  echo "controlplane/build.sh: go.mod must require k8s.io/kubernetes and go.etcd.io/etcd/server/v3" >&2
  exit 1
}
KEY=$(cat go.mod go.sum cmd/etcd/main.go build.sh | sha256sum | cut -c1-12)
CACHE=${STROM_CACHE_DIR:-$HOME/.cache/strom}
OUT=$CACHE/controlplane-k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$KEY
BINARIES=(etcd kube-apiserver kube-controller-manager kubectl)

built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$OUT/bin/$b" ]] || return 1; done
}

if built; then
  echo "$OUT/bin"
  exit 0
fi

command -v go >/dev/null || { echo "controlplane/build.sh: go is not installed" >&2; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/controlplane.lock"
flock 9
if built; then # another caller built it while this one waited
  echo "$OUT/bin"
  exit 0
fi

echo "controlplane/build.sh: building kube-apiserver, kube-controller-manager and kubectl $K8S_VERSION, etcd $ETCD_VERSION into $OUT (once per machine)" >&2
started=$(date +%s)
STAGE=$(mktemp -d "$CACHE/controlplane-build.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
version_flags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
version_flags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
version_flags+=" -X k8s.io/component-base/version.gitTreeState=clean"
version_flags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
# -s -w: no symbol tables, which halves link time and size; -trimpath: no local paths.
go build -trimpath -ldflags "-s -w $version_flags" -o "$STAGE/bin/" tool
go build -trimpath -ldflags "-s -w" -o "$STAGE/bin/etcd" ./cmd/etcd
echo $(($(date +%s) - started)) >"$STAGE/build-seconds"
go version >"$STAGE/go-version"
rm -rf "$OUT"
mv "$STAGE" "$OUT"
trap - EXIT
echo "controlplane/build.sh: built in $(cat "$OUT/build-seconds") s" >&2
echo "$OUT/bin"
