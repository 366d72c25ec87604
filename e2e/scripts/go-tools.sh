#!/usr/bin/env bash
# Builds the Go tools a test module declares (the `tool` lines of DIR/go.mod) once per
# machine, pinned by that go.mod and go.sum, and prints the directory holding them.
#
#   bash e2e/scripts/go-tools.sh DIR NAME MODULE [LDFLAGS]
#
# NAME names the cache entry, MODULE is the required module whose version labels it: the
# binaries go to $STROM_CACHE_DIR (default ~/.cache/strom)/NAME-<version>-<key>/bin, <key>
# hashing DIR's go.mod, go.sum and build.sh and this script. Concurrent callers wait for one
# build (flock). Used by e2e/prometheus/build.sh (e2e/k8s/helm/build.sh predates it).
set -euo pipefail

DIR=$1 NAME=$2 MODULE=$3 LDFLAGS=${4:-}
cd "$DIR"
VERSION=$(grep -oP "^\s*(require\s+)?\Q$MODULE\E \Kv[0-9][^ ]*" go.mod | head -1)
[[ -n "$VERSION" ]] || { echo "go-tools.sh: $DIR/go.mod must require $MODULE" >&2; exit 1; }
KEY=$(cat go.mod go.sum build.sh "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
CACHE=${STROM_CACHE_DIR:-$HOME/.cache/strom}
OUT=$CACHE/$NAME-$VERSION-$KEY
# The last path element of each `tool` directive (one line, or a `tool ( ... )` block).
TOOLS=$(awk '/^tool \($/ {b=1; next} b && /^\)/ {b=0} b {print $1} /^tool [^(]/ {print $2}' go.mod | xargs -n1 basename)

built() {
  local t
  for t in $TOOLS; do [[ -x "$OUT/bin/$t" ]] || return 1; done
}
if built; then
  echo "$OUT/bin"
  exit 0
fi
command -v go >/dev/null || { echo "go-tools.sh: go is not installed" >&2; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/$NAME.lock"
flock 9
if built; then
  echo "$OUT/bin"
  exit 0
fi
echo "go-tools.sh: building $NAME $VERSION ($(echo $TOOLS)) into $OUT (once per machine)" >&2
started=$(date +%s)
STAGE=$(mktemp -d "$CACHE/$NAME-build.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
go build -trimpath -ldflags "-s -w $LDFLAGS" -o "$STAGE/bin/" tool
echo $(($(date +%s) - started)) >"$STAGE/build-seconds"
rm -rf "$OUT"
mv "$STAGE" "$OUT"
trap - EXIT
echo "go-tools.sh: built $NAME in $(cat "$OUT/build-seconds") s" >&2
echo "$OUT/bin"
