#!/usr/bin/env bash
# What moving partitions costs client traffic, with and without the replication throttle.
#
#   bash e2e/scripts/bench-rebalance.sh [MB_TO_STORE] [THROTTLE]     # defaults: 300, 10MiB
#
# A `strom dev --brokers 4` cluster (3 voters + 1 learner); a topic `moved` (8 partitions,
# replication factor 3) filled with MB_TO_STORE MiB of 1 KiB records; then, each while
# `strom-load e2e-latency` produces 2,000 x 1 KiB records/s with acks=all to another topic
# (6 partitions, RF 3) and consumes them:
#   1. nothing moves (the baseline);
#   2. `strom broker drain 3` with no throttle;
#   3. `strom rebalance execute --throttle THROTTLE` (broker 3 gets its share back).
# Prints one line per phase: the move's duration and the latency figures (JSON from
# strom-load). Needs target/release/{strom,strom-load}. Not run by CI (it measures, and takes
# a few minutes).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STROM=$REPO/target/release/strom
LOAD=$REPO/target/release/strom-load
MB=${1:-300}
THROTTLE=${2:-10MiB}
WORK=$(mktemp -d -t strom-bench-rebalance-XXXXXX)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
while [[ $PORT -gt 60000 ]]; do PORT=$((PORT - 10000)); done
DEV_PID=
cleanup() {
  if [[ -n "$DEV_PID" ]]; then
    kill -TERM "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$STROM" dev --brokers 4 --port "$PORT" --data-dir "$WORK/data" >"$WORK/dev.log" 2>&1 &
DEV_PID=$!
for _ in $(seq 600); do grep -q '^admin CLI' "$WORK/dev.log" && break; sleep 0.1; done
STROM_ADMIN=$(sed -n 's/^admin CLI: export STROM_ADMIN=\([^ ]*\).*/\1/p' "$WORK/dev.log")
export STROM_ADMIN
BOOTSTRAP="127.0.0.1:$PORT,127.0.0.1:$((PORT + 1))"

"$STROM" topic create moved -p 8 -r 3 >/dev/null
"$STROM" topic create live -p 6 -r 3 -c min.insync.replicas=2 >/dev/null
"$LOAD" produce --bootstrap "$BOOTSTRAP" --topic moved --record-size 1024 --acks 1 \
  --records $((MB * 1024)) >"$WORK/fill.json"
echo "stored: $(cat "$WORK/fill.json")"

phase() {
  local name=$1
  shift
  "$LOAD" e2e-latency --bootstrap "$BOOTSTRAP" --topic live --record-size 1024 --rate 2000 \
    --duration-secs 45 >"$WORK/$name.json" &
  local load=$!
  sleep 5
  local started=$SECONDS moved=""
  if [[ $# -gt 0 ]]; then
    "$@" --output json >"$WORK/$name.move.json"
    moved="moved $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["replicas_to_move"])' "$WORK/$name.move.json") replicas in $((SECONDS - started)) s; "
  fi
  wait "$load"
  echo "$name: ${moved}latency $(cat "$WORK/$name.json")"
}

phase baseline
phase drain-unthrottled "$STROM" broker drain 3
phase rebalance-throttled-$THROTTLE "$STROM" rebalance execute --throttle "$THROTTLE"
"$STROM" cluster describe
