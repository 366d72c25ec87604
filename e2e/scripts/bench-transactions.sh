#!/usr/bin/env bash
# Transactions on Apache Kafka 4.1.1 and Strom, one node each on this machine, driven by Kafka's
# own perf tools (the Java client on both sides): issue 33's "Measure" rows of
# docs/benchmarks.md.
#   bash e2e/scripts/bench-transactions.sh [--records-100 N] [--records-1k N] [--only kafka|strom]
#
# For each system and record size {100 B, 1 KiB}, each on a fresh single-partition topic:
#   - idempotent: `producer-perf-test` with acks=all and enable.idempotence=true (the Java
#     producer's defaults otherwise);
#   - transactional: the same with `--transactional-id` and `--transaction-duration-ms 100`
#     (a commit every 100 ms, as issue 33 asks);
#   - read_committed: `consumer-perf-test` with isolation.level=read_committed reading the
#     transactional topic back.
#   - commit latency: `strom-load transactions` (librdkafka) sending as fast as it can for
#     SECONDS (20) with a commit every 100 ms; records/s and each commit's duration, p50/p99
#     (the transaction's records flushed first; then commit_transaction called → returned:
#     EndTxn and the decision made durable). ROWS=commits runs only these rows.
# The systems run one after the other (Kafka first), each stopped before the next starts.
# Kafka: its defaults plus what a single combined node needs (the replication factors of its
# internal topics 1); Strom: `strom serve` with its defaults. Output: DIR/results.tsv and a
# Markdown table on stdout (records/s, MB/s, producer latency p50/p99 ms as the tool prints
# them). Commit latency is not in the tools' output, so not here.
set -euo pipefail
cd "$(dirname "$0")/../.."

DIR=${DIR:-/tmp/strom-bench-txn}
RECORDS_100=1000000
RECORDS_1K=300000
ONLY=""
SECONDS_TXN=${SECONDS_TXN:-20}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records-100) RECORDS_100=$2; shift 2 ;;
    --records-1k) RECORDS_1K=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

KAFKA_SH=$PWD/e2e/kafka/kafka.sh
STROM=${STROM_BIN:-$PWD/target/release/strom}
LOAD=$PWD/target/release/strom-load
[[ -x $LOAD ]] || { echo "build strom-load first: cargo build --release -p e2e --bin strom-load" >&2; exit 1; }
[[ -x $STROM ]] || { echo "build strom first: cargo build --release -p broker" >&2; exit 1; }
KHOME=$(bash "$KAFKA_SH" home)
TOOL=(env "KAFKA_HEAP_OPTS=-Xmx512M" bash "$KAFKA_SH" run)
mkdir -p "$DIR"
RESULTS=$DIR/results.tsv
: >"$RESULTS"
PIDS=()
trap 'for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill -9 "$p" 2>/dev/null; done' EXIT

free_ports() {
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

wait_port() { # wait_port PORT
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "port $1 never opened" >&2
  return 1
}

start_kafka() {
  local base=$DIR/kafka ports id
  rm -rf "$base" && mkdir -p "$base"
  read -r -a ports <<<"$(free_ports 2)"
  cat >"$base/server.properties" <<EOF
process.roles=broker,controller
node.id=0
controller.quorum.voters=0@127.0.0.1:${ports[1]}
listeners=PLAINTEXT://127.0.0.1:${ports[0]},CONTROLLER://127.0.0.1:${ports[1]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[0]}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$base/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  id=$("${TOOL[@]}" storage random-uuid)
  "${TOOL[@]}" storage format -t "$id" -c "$base/server.properties" >"$base/format.log"
  # java directly: `kafka.sh run server` would hold kafka.sh's lock for the server's lifetime.
  setsid java -Xmx1G -Xms1G -Dlog4j2.configurationFile="$KHOME/log4j2.yaml" -cp "$KHOME/libs/*" \
    kafka.Kafka "$base/server.properties" >"$base/server.log" 2>&1 &
  PIDS+=($!)
  BOOTSTRAP=127.0.0.1:${ports[0]}
  wait_port "${ports[0]}"
}

start_strom() {
  local base=$DIR/strom ports
  rm -rf "$base" && mkdir -p "$base"
  read -r -a ports <<<"$(free_ports 3)"
  setsid "$STROM" serve --node-id 0 --data-dir "$base/data" --kafka-listen "127.0.0.1:${ports[0]}" \
    --internal-listen "127.0.0.1:${ports[1]}" --http-listen "127.0.0.1:${ports[2]}" \
    --group-initial-rebalance-delay-ms 0 >"$base/server.log" 2>&1 &
  PIDS+=($!)
  BOOTSTRAP=127.0.0.1:${ports[0]}
  for _ in $(seq 600); do curl -fs "http://127.0.0.1:${ports[2]}/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "strom never became ready" >&2
  return 1
}

stop_system() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do for _ in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  PIDS=()
}

# "records/s MB/s p50 p99" from producer-perf-test's summary line.
parse_producer() {
  python3 - "$1" <<'EOF'
import re, sys
pat = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
                 r"[\d.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th")
for line in open(sys.argv[1]):
    m = pat.match(line.strip())
    if m:
        print(m.group(2), m.group(3), m.group(4), m.group(5))
        break
else:
    print("- - - -")
EOF
}

# "records/s MB/s" from consumer-perf-test's CSV line (fetch.MB.sec, fetch.nMsg.sec).
parse_consumer() {
  python3 - "$1" <<'EOF'
import sys
lines = [l.strip() for l in open(sys.argv[1]) if l.strip()]
header = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
if header is None or header + 1 >= len(lines):
    print("- -")
else:
    cols = dict(zip([c.strip() for c in lines[header].split(",")], [v.strip() for v in lines[header + 1].split(",")]))
    print(cols.get("fetch.nMsg.sec", "-"), cols.get("fetch.MB.sec", "-"))
EOF
}

run_system() { # run_system NAME
  local system=$1 size records topic out
  for size in 100 1024; do
    records=$RECORDS_100
    [[ $size == 1024 ]] && records=$RECORDS_1K
    for mode in idempotent transactional; do
      [[ ${ROWS:-all} == commits ]] && continue
      topic=$mode-$size
      "${TOOL[@]}" topics --bootstrap-server "$BOOTSTRAP" --create --topic "$topic" --partitions 1 \
        --replication-factor 1 >/dev/null
      out=$DIR/$system-$topic.out
      local extra=()
      [[ $mode == transactional ]] && extra=(--transactional-id "perf-$topic" --transaction-duration-ms 100)
      "${TOOL[@]}" producer-perf-test --topic "$topic" --num-records "$records" --record-size "$size" \
        --throughput -1 "${extra[@]}" \
        --producer-props bootstrap.servers="$BOOTSTRAP" acks=all enable.idempotence=true >"$out" 2>&1
      printf '%s\t%s\t%s\tproduce\t%s\n' "$system" "$size" "$mode" "$(parse_producer "$out" | tr ' ' '\t')" >>"$RESULTS"
      tail -1 "$RESULTS" >&2
    done
    if [[ ${ROWS:-all} != commits ]]; then
    out=$DIR/$system-read-committed-$size.out
    printf 'isolation.level=read_committed\n' >"$DIR/read-committed.properties"
    "${TOOL[@]}" consumer-perf-test --bootstrap-server "$BOOTSTRAP" --topic "transactional-$size" \
      --messages "$records" --consumer.config "$DIR/read-committed.properties" --group "perf-rc-$size" \
      --timeout 60000 >"$out" 2>&1 || true
    printf '%s\t%s\ttransactional\tread_committed\t%s\t-\t-\n' "$system" "$size" "$(parse_consumer "$out" | tr ' ' '\t')" >>"$RESULTS"
    tail -1 "$RESULTS" >&2
    fi
    out=$DIR/$system-commit-latency-$size.out
    "$LOAD" transactions --bootstrap "$BOOTSTRAP" --topic "commits-$size" --partitions 1 --record-size "$size" \
      --transactional-id "load-$size" --commit-interval-ms 100 --seconds "$SECONDS_TXN" >"$out" 2>&1 || true
    printf '%s\t%s\ttransactional\tcommit_latency\t%s\n' "$system" "$size" "$(python3 -c '
import json, sys
try:
    j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    print(j["msgs_per_sec"], j["mb_per_sec"], j["latency_ms"]["p50"], j["latency_ms"]["p99"], sep="\t")
except Exception:
    print("-\t-\t-\t-")' "$out")" >>"$RESULTS"
    tail -1 "$RESULTS" >&2
  done
}

if [[ $ONLY != strom ]]; then start_kafka; run_system kafka; stop_system; fi
if [[ $ONLY != kafka ]]; then start_strom; run_system strom; stop_system; fi

python3 - "$RESULTS" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {(r[0], r[1], r[2], r[3]): r[4:] for r in rows}
print("| record size | run | Kafka records/s (MB/s) | Strom records/s (MB/s) | Strom/Kafka | Kafka p50 / p99 ms | Strom p50 / p99 ms |")
print("|---|---|---|---|---|---|---|")
for size in ("100", "1024"):
    for mode, op in (("idempotent", "produce"), ("transactional", "produce"), ("transactional", "read_committed"),
                     ("transactional", "commit_latency")):
        k, s = by.get(("kafka", size, mode, op)), by.get(("strom", size, mode, op))
        def cell(v):
            return f"{float(v[0]):,.0f} ({float(v[1]):.1f})" if v and v[0] != "-" else "-"
        def lat(v):
            return f"{v[2]} / {v[3]}" if v and len(v) > 3 and v[2] != "-" else "-"
        ratio = f"{float(s[0]) / float(k[0]):.2f}" if k and s and k[0] != "-" and s[0] != "-" and float(k[0]) > 0 else "-"
        label = {"produce": f"{mode} produce", "read_committed": "read_committed consume",
                 "commit_latency": "transactional produce (librdkafka), commit latency"}[op]
        print(f"| {'100 B' if size == '100' else '1 KiB'} | {label} | {cell(k)} | {cell(s)} | {ratio} | {lat(k)} | {lat(s)} |")
EOF
