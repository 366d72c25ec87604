#!/usr/bin/env bash
# Third-party clients against a fresh Strom broker: kcat (librdkafka, as Debian ships it) and
# kafka-python (a pure-Python client with its own protocol code), each as a producer, an
# assign-only consumer and a group consumer (kcat -G; kafka-python with group_id='g'),
# kafka-python's transactional producer with read_committed and read_uncommitted consumers;
# then kafka-python's admin client moving a partition and electing leaders on three brokers.
#
# Installs what it needs if missing: kcat (and python3-venv, if a venv cannot be made) from
# Debian's packages, and a venv at <repo>/.venv with kafka-python (pinned) plus the libraries
# of its snappy, lz4 and zstd codecs from PyPI; if they cannot be installed the script stops
# (every codec is part of the test). Starts target/release/strom (or $STROM_BIN) on free
# ports with a temp data dir, runs the round trips, and ends with the line
#   clients: N passed, M failed
# exiting non-zero if anything failed. The broker is stopped on exit, whatever happens.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRIPTS="$REPO/e2e/scripts"
STROM_BIN=${STROM_BIN:-$REPO/target/release/strom}
VENV="$REPO/.venv"
KAFKA_PYTHON_VERSION=3.0.12
KCAT_RECORDS=1000

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }

if [[ ! -x "$STROM_BIN" ]]; then
  echo "no strom binary at $STROM_BIN: build it first: cargo build --release -p broker" >&2
  exit 2
fi

# --- tools ----------------------------------------------------------------------------------
if ! command -v kcat >/dev/null 2>&1; then
  echo "installing kcat"
  apt-get update -qq && apt-get install -y -qq kcat >/dev/null
fi
# shellcheck source=venv.sh
source "$SCRIPTS/venv.sh"
ensure_venv
# kafka-python at the pinned version, and every codec by kafka.codec's own checks (python-snappy
# provides `snappy`, lz4 `lz4.frame`, zstandard `zstandard`).
venv_ready() {
  "$VENV/bin/python" - "$KAFKA_PYTHON_VERSION" 2>/dev/null <<'EOF'
import sys
import kafka
from kafka import codec
sys.exit(kafka.__version__ != sys.argv[1] or not (codec.has_snappy() and codec.has_lz4() and codec.has_zstd()))
EOF
}
if ! venv_ready; then
  "$VENV/bin/pip" install -q "kafka-python==$KAFKA_PYTHON_VERSION" python-snappy lz4 zstandard
fi

# --- broker ---------------------------------------------------------------------------------
WORK=$(mktemp -d -t strom-clients-XXXXXX)
BROKER_PID=
CLUSTER_PIDS=()
stop_pid() {
  local pid=$1
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}
cleanup() {
  local rc=$?
  stop_pid "$BROKER_PID"
  local pid
  for pid in "${CLUSTER_PIDS[@]}"; do stop_pid "$pid"; done
  if [[ $rc -ne 0 || $FAILED -ne 0 ]]; then
    echo "----- strom log tail ($WORK/strom.log) -----"
    tail -n 40 "$WORK/strom.log" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
KAFKA_PORT=$(free_port)
HTTP_PORT=$(free_port)
while [[ "$HTTP_PORT" == "$KAFKA_PORT" ]]; do HTTP_PORT=$(free_port); done
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"

"$STROM_BIN" serve --node-id 0 --data-dir "$WORK/data" \
  --kafka-listen "$BOOTSTRAP" --http-listen "127.0.0.1:$HTTP_PORT" >"$WORK/strom.log" 2>&1 &
BROKER_PID=$!

ready() {
  python3 - "$HTTP_PORT" <<'EOF'
import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=2).status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}
deadline=$((SECONDS + 60))
until ready; do
  if ! kill -0 "$BROKER_PID" 2>/dev/null; then
    echo "strom exited before becoming ready" >&2
    exit 1
  fi
  if ((SECONDS > deadline)); then
    echo "strom not ready within 60s" >&2
    exit 1
  fi
  sleep 0.1
done
echo "strom ready on $BOOTSTRAP (pid $BROKER_PID)"

# --- kcat -----------------------------------------------------------------------------------
# kcat cannot set a record's timestamp: librdkafka stamps CreateTime when kcat reads the line.
# Each value carries the time its line was written, a lower bound for that timestamp; pauses
# spread the timestamps, and linger.ms=100 puts records of different times in one batch.
KCAT_HEADERS=(source=kcat dup=first dup=second empty=)

kcat_input() {
  local i
  for ((i = 0; i < KCAT_RECORDS; i++)); do
    if ((i % 100 == 99)); then sleep 0.02; fi
    echo "key-$((i % 37)):value-$i-written-$((${EPOCHREALTIME//[^0-9]/} / 1000))"
  done
}

kcat_roundtrip() {
  local codec=$1 topic="kcat-$1"
  "$VENV/bin/python" "$SCRIPTS/kafka_python_roundtrip.py" --bootstrap "$BOOTSTRAP" \
    create-topic --topic "$topic" --partitions 3
  local input="$WORK/$topic.in" got="$WORK/$topic.json" header headers=() checks=()
  for header in "${KCAT_HEADERS[@]}"; do
    headers+=(-H "$header")
    checks+=(--header "$header")
  done
  if ! kcat_input | tee "$input" | kcat -b "$BOOTSTRAP" -t "$topic" -P -K: -X acks=all -X linger.ms=100 \
      -X "compression.codec=$codec" "${headers[@]}" 2>"$WORK/$topic.err"; then
    fail "kcat $codec: produce failed: $(tail -n 3 "$WORK/$topic.err")"
    return
  fi
  local produced_by_ms=$((${EPOCHREALTIME//[^0-9]/} / 1000))
  if ! timeout 60 kcat -b "$BOOTSTRAP" -t "$topic" -C -e -o beginning -q -J >"$got" 2>"$WORK/$topic.err"; then
    fail "kcat $codec: consume failed: $(tail -n 3 "$WORK/$topic.err")"
    return
  fi
  local problem
  if problem=$("$VENV/bin/python" "$SCRIPTS/kcat_check.py" --input "$input" --records "$KCAT_RECORDS" \
      --produced-by-ms "$produced_by_ms" "${checks[@]}" <"$got"); then
    pass "kcat $codec ($KCAT_RECORDS records)"
  else
    fail "kcat $codec: $problem"
  fi
}

for codec in none gzip snappy lz4 zstd; do
  kcat_roundtrip "$codec"
done

# --- kafka-python ---------------------------------------------------------------------------
# Runs one kafka-python script (NAME, then its arguments) under a 300 s limit, prints its
# PASS/FAIL lines and counts them; a script that dies without a FAIL line counts as one.
run_python_check() {
  local name=$1 out="$WORK/python-$1.out" err="$WORK/python-$1.err" rc
  shift
  set +e
  timeout 300 "$VENV/bin/python" "$@" >"$out" 2>"$err"
  rc=$?
  set -e
  cat "$out"
  local passed failed
  passed=$(grep -c '^PASS ' "$out" || true)
  failed=$(grep -c '^FAIL ' "$out" || true)
  PASSED=$((PASSED + passed))
  FAILED=$((FAILED + failed))
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then
    fail "kafka-python $name: the script exited with $rc: $(tail -n 5 "$err" | tr '\n' ' ')"
  fi
}

run_python_check roundtrip "$SCRIPTS/kafka_python_roundtrip.py" --bootstrap "$BOOTSTRAP" roundtrip \
  --records 10000 --codecs none,gzip,snappy,lz4,zstd

# --- transactions ---------------------------------------------------------------------------
# kafka-python's transactional producer and read_committed consumer (docs/transactions.md).
run_python_check transactions "$SCRIPTS/kafka_python_transactions.py" --bootstrap "$BOOTSTRAP"

# --- consumer groups ------------------------------------------------------------------------
# kcat -G is librdkafka's balanced consumer (subscribe; the broker coordinates the group). It
# reads a fresh topic fully (-e: exit once every assigned partition is at its end) and commits
# as it closes; a second run in the same group must read exactly what was produced after.
kcat_group_read() {
  local topic=$1 group=$2 out=$3
  timeout 60 kcat -b "$BOOTSTRAP" -G "$group" -X auto.offset.reset=earliest -e -q -f '%s\n' "$topic" \
    2>"$WORK/$topic.group.err" | sort >"$out"
}

kcat_group() {
  local topic=kcat-group group=g-kcat
  "$VENV/bin/python" "$SCRIPTS/kafka_python_roundtrip.py" --bootstrap "$BOOTSTRAP" \
    create-topic --topic "$topic" --partitions 3
  local round want got
  for round in first second; do
    want="$WORK/$topic.$round.want" got="$WORK/$topic.$round.got"
    local count=$KCAT_RECORDS
    [[ $round == second ]] && count=$((KCAT_RECORDS / 5))
    for i in $(seq 0 $((count - 1))); do echo "$round-$i"; done >"$WORK/$topic.$round.in"
    if ! kcat -b "$BOOTSTRAP" -t "$topic" -P -X acks=all <"$WORK/$topic.$round.in" 2>"$WORK/$topic.err"; then
      fail "kcat -G: produce ($round) failed: $(tail -n 3 "$WORK/$topic.err")"
      return
    fi
    sort "$WORK/$topic.$round.in" >"$want"
    if ! kcat_group_read "$topic" "$group" "$got"; then
      fail "kcat -G $group ($round run): $(tail -n 3 "$WORK/$topic.group.err" | tr '\n' ' ')"
      return
    fi
    if ! diff -q "$want" "$got" >/dev/null; then
      fail "kcat -G $group ($round run): read $(wc -l <"$got") records, want exactly the $count produced since the last run: $(diff "$want" "$got" | head -n 4 | tr '\n' ' ')"
      return
    fi
  done
  pass "kcat -G $group (reads $KCAT_RECORDS, then resumes at the committed offsets for $((KCAT_RECORDS / 5)) more)"
}

kcat_group

run_python_check group "$SCRIPTS/kafka_python_group.py" --bootstrap "$BOOTSTRAP" group

if ! kill -0 "$BROKER_PID" 2>/dev/null; then
  fail "strom died during the client round trips"
fi

# --- partition reassignment and leader election (three brokers) -----------------------------
# kafka-python's admin client drives AlterPartitionReassignments, ListPartitionReassignments
# and ElectLeaders against a cluster of three `strom serve` processes sharing one quorum.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
}
read -r -a PORTS <<<"$(free_ports 9)"
VOTERS="0@127.0.0.1:${PORTS[1]},1@127.0.0.1:${PORTS[4]},2@127.0.0.1:${PORTS[7]}"
CLUSTER_BOOTSTRAP=""
for id in 0 1 2; do
  kafka=${PORTS[$((id * 3))]} internal=${PORTS[$((id * 3 + 1))]} http=${PORTS[$((id * 3 + 2))]}
  "$STROM_BIN" serve --node-id "$id" --data-dir "$WORK/cluster-$id" --voters "$VOTERS" \
    --kafka-listen "127.0.0.1:$kafka" --internal-listen "127.0.0.1:$internal" --http-listen "127.0.0.1:$http" \
    >"$WORK/cluster-$id.log" 2>&1 &
  CLUSTER_PIDS+=($!)
  CLUSTER_BOOTSTRAP+="${CLUSTER_BOOTSTRAP:+,}127.0.0.1:$kafka"
done
cluster_ready=1
for id in 0 1 2; do
  HTTP_PORT=${PORTS[$((id * 3 + 2))]}
  deadline=$((SECONDS + 60))
  until ready; do
    if ((SECONDS > deadline)) || ! kill -0 "${CLUSTER_PIDS[$id]}" 2>/dev/null; then
      cluster_ready=0
      break
    fi
    sleep 0.1
  done
done
if [[ $cluster_ready -ne 1 ]]; then
  fail "kafka-python reassign: the three-broker cluster did not become ready: $(tail -n 5 "$WORK"/cluster-*.log | tr '\n' ' ')"
else
  run_python_check reassign "$SCRIPTS/kafka_python_reassign.py" --bootstrap "$CLUSTER_BOOTSTRAP"
fi

echo "clients: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
