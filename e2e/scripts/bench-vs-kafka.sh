#!/usr/bin/env bash
# Apache Kafka 4.1.1 (KRaft) and Strom side by side on this machine, driven by the same clients.
#
#   bash e2e/scripts/bench-vs-kafka.sh [--quick] [--only kafka|strom] [--topology 1|3|both]
#                                      [--dir DIR] [--write-docs]
#
# Topologies: "1" = one Kafka node (broker and controller in one process) against one
# `strom serve`; "3" = three combined Kafka nodes (all three controller voters) against three
# `strom serve` (all three voters), topics with replication factor 3. Both systems of a
# topology are started, with their data directories under DIR (default /tmp/strom-bench-vs-kafka,
# /tmp/strom-bench-vs-kafka-quick with --quick), so on the same disk, and every row's runs go
# one client run at a time: produce, consume and delete the topic on one system, then the same
# at once on the other (ROW_ORDER=each; ROW_ORDER=pairs runs both produces back to back, then
# both consumes, which made the second writer slow), Kafka first in odd repetitions, Strom
# first in even ones. Back to back so that both see the machine in the same state: how fast
# this VM's two vCPUs hand data to each other changes by 4x for seconds to minutes at a time,
# and a run of either system is up to 2x slower in the slow state (docs/benchmarks.md, "Two
# vCPUs, near or far"). `strom-load cpu-handoff` measures that state before and after every
# client run (results.tsv: handoff_ns_before, handoff_ns_after); a pair with a far probe
# runs again (PAIR_ATTEMPTS, 3 in all; with ROW_ORDER=each a "pair" is one system's run, its
# probe before against its probe after; the runs left out go to results-split-pairs.tsv; a
# produce runs again into a new topic, the earlier one deleted first); HANDOFF_WAIT=S
# makes every run wait up to S s for the fast state. The idle system costs the measured one a
# little CPU (an idle 1-node Kafka ~1 % of a core, 3 nodes ~8 %; Strom 0.2 %, 1.7 %).
#
# For each topology and system, one row per record size {100 B, 1 KiB} x acks {1, all} x
# partitions {1, 6} x client, each on a fresh topic (created with Kafka's `kafka-topics`, the
# same command for both systems, deleted afterwards):
#   - produce as fast as possible: Kafka's `producer-perf-test` (the Java producer, its
#     defaults: linger.ms=5, batch.size=16384) and `strom-load produce` (librdkafka, its
#     defaults: linger.ms=5, batch.size=1000000); records/s and MB/s (MiB, as both tools);
#   - consume what was produced: `consumer-perf-test` (a group member; its fetch.MB.sec,
#     i.e. without the group join) and `strom-load consume` (assign, from the beginning);
#   - the brokers' CPU time (utime+stime from /proc/PID/stat) over each run and their peak
#     RSS (VmRSS summed over the topology's brokers, sampled every 200 ms).
# Then end-to-end latency at a fixed 50,000 x 1 KiB records/s, acks=all, 6 and 1 partitions
# (`strom-load e2e-latency`, linger.ms=5; the clock starts after one record per partition has
# been acknowledged and consumed, so neither system's figure holds client start-up and a new
# topic's first moments): p50 / p99 / p99.9.
#
# Kafka runs with the JVM settings of its own start scripts (KAFKA_HEAP_OPTS, default
# "-Xmx1G -Xms1G", and kafka-run-class.sh's G1 flags; KAFKA_OPTS is added) and a config that
# is the defaults plus what it needs to run (listeners, log.dirs, node.id, the voters,
# offsets.topic.replication.factor = nodes, group.initial.rebalance.delay.ms=0), and
# log.segment.delete.delay.ms=1000 so that a deleted topic's files go before the next run
# rather than a minute into some later one (KAFKA_DELETE_DELAY_MS; every run waits until no
# deleted files are left on either system). Strom gets the same two settings and its
# defaults otherwise. The Java tools get -Xmx512M, as their
# bin/ scripts give them.
#
# Output: DIR/results.tsv (raw, one line per client run; rows of the systems and topologies
# of this invocation replace earlier ones, so `--only kafka` and `--only strom` can be run
# separately), DIR/results.md (printed too) with Kafka, Strom and Strom/Kafka per row,
# DIR/charts/*.svg (`strom-load charts`: throughput and latency, Kafka beside Strom).
# --write-docs puts that section, with the date, machine and commands, between the
# `<!-- bench-vs-kafka:begin -->` and `<!-- bench-vs-kafka:end -->` lines of
# docs/benchmarks.md (appended if they are missing; BENCH_DOCS overrides the file).
# --quick: 100 B, acks=1, 1 partition, 200,000 records and one 5 s latency run, topology 1
# unless --topology is given: checks that the script works, measures nothing.
#
# REPEAT=N (default 1) runs every row N times (a fresh topic each time) and reports the median
# run, by MB/s for throughput rows and by p99 for latency rows, for rows whose figures swing
# from run to run (a latency row's p99 by 2-10x on this machine).
# Record counts: RECORDS_100 (default 10,000,000) and RECORDS_1024 (2,000,000) records per
# produce run; LATENCY_SECS (default 20) per latency run; LATENCY_RATE (50000). A full run
# took 1 h 42 min with REPEAT=3 and PAIR_ATTEMPTS=1 on a 2-vCPU VM (2026-12-02), more with
# pairs run again, and needs ~15 GB free in DIR (1 KiB x RF 3 on both systems; Kafka deletes
# a topic's files a minute after the topic, and each produce waits, 3 min at most, until what
# it will write fits with 2 GiB to spare). Needs target/release/{strom,strom-load}, java 17+,
# mvn (first use of e2e/kafka/kafka.sh), python3, curl. Not run by CI.
#
# For looking into single rows: ROWS="PATTERN..." runs only the throughput rows matching one
# of the shell patterns NODES:SIZE:ACKS:PARTITIONS:CLIENT (e.g. "1:1024:all:6:strom-load
# 3:100:*:6:java") and the latency rows matching NODES:latency:PARTITIONS; PROFILE=1 records
# every client run with `perf record -F 999 -p <brokers>` (RUNS/NAME.perf.data, kernel and
# Strom symbols; Kafka's JIT-compiled Java shows as unknown; PERF_RECORD_OPTS adds options,
# e.g. "--call-graph dwarf,16384" for call stacks) and `perf stat` of the client
# (RUNS/NAME.client-stat: task-clock, context switches).
#
# PAGE_REPORTING=pause (default) stops the VM's free page reporting to the hypervisor for the
# run and touches the free memory once (restored on exit); keep leaves it on (see below).
set -euo pipefail

# Runs per row; the report shows the median (by MB/s; latency rows by p99).
REPEAT=${REPEAT:-1}
# librdkafka's fetch backoff would dominate a fast consumer's figure (see the docs section).
CONSUME_OPTS=${CONSUME_OPTS:--X fetch.queue.backoff.ms=10}
# Extra options of consumer-perf-test (e.g. --print-metrics, the consumer's fetch metrics).
CONSUMER_PERF_OPTS=${CONSUMER_PERF_OPTS:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STROM=$REPO/target/release/strom
LOAD=$REPO/target/release/strom-load
KAFKA_SH=$REPO/e2e/kafka/kafka.sh
DOCS=${BENCH_DOCS:-$REPO/docs/benchmarks.md}

QUICK=0 ONLY=both TOPOLOGY='' DIR='' WRITE_DOCS=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --topology) TOPOLOGY=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-vs-kafka: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$ONLY" in kafka) SYSTEMS=(kafka) ;; strom) SYSTEMS=(strom) ;; both) SYSTEMS=(kafka strom) ;;
  *) echo "--only takes kafka or strom" >&2; exit 2 ;; esac
[[ -n "$TOPOLOGY" ]] || { [[ $QUICK == 1 ]] && TOPOLOGY=1 || TOPOLOGY=both; }
case "$TOPOLOGY" in 1) TOPOLOGIES=(1) ;; 3) TOPOLOGIES=(3) ;; both) TOPOLOGIES=(1 3) ;;
  *) echo "--topology takes 1, 3 or both" >&2; exit 2 ;; esac

if [[ $QUICK == 1 ]]; then
  DIR=${DIR:-/tmp/strom-bench-vs-kafka-quick}
  SIZES=(100) ACKS_LIST=(1) PARTITIONS_LIST=(1) LATENCY_PARTITIONS=(6)
  RECORDS_100=${RECORDS_100:-200000} RECORDS_1024=${RECORDS_1024:-50000} LATENCY_SECS=${LATENCY_SECS:-5}
else
  DIR=${DIR:-/tmp/strom-bench-vs-kafka}
  SIZES=(100 1024) ACKS_LIST=(1 all) PARTITIONS_LIST=(1 6) LATENCY_PARTITIONS=(6 1)
  RECORDS_100=${RECORDS_100:-10000000} RECORDS_1024=${RECORDS_1024:-2000000} LATENCY_SECS=${LATENCY_SECS:-20}
fi
LATENCY_RATE=${LATENCY_RATE:-50000}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
TSV=$DIR/results.tsv
SPLIT_TSV=$DIR/results-split-pairs.tsv # pairs run again because the vCPU state changed within them
MD=$DIR/results.md
RUNS=$DIR/runs # every tool's output, one file per run

# The JVM settings of Kafka's bin/kafka-server-start.sh and bin/kafka-run-class.sh.
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
KAFKA_JVM_PERFORMANCE_OPTS="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
KAFKA_SERVER_OPTS=${KAFKA_OPTS:-}
CLIENT_HEAP_OPTS=-Xmx512M # bin/kafka-{producer,consumer}-perf-test.sh
unset KAFKA_OPTS
CLK_TCK=$(getconf CLK_TCK)
CLIENT_TIMEOUT=900 # seconds any one client run may take
# A run whose probe shows more than FAR_NS ns was (partly) measured with the vCPUs far apart.
# HANDOFF_WAIT=S (default 0: off) makes each client run wait, S seconds at most, for the probe
# to show less; on this machine that waited 3-60 s before 7 of a run's first 9 client runs,
# which would triple a full run ("Two vCPUs, near or far" in docs/benchmarks.md).
FAR_NS=${FAR_NS:-200} HANDOFF_WAIT=${HANDOFF_WAIT:-0}
# Kafka removes a deleted topic's files log.segment.delete.delay.ms after the deletion (60 s by
# default), Strom at once. With the default, Kafka's removal of a row's gigabytes lands in a
# run a minute later, of either system; every run now waits until no deleted files are left
# (wait_for_deletions), and this makes Kafka's wait 1 s instead of 60.
KAFKA_DELETE_DELAY_MS=${KAFKA_DELETE_DELAY_MS:-1000}
# A row's produce (and its consume) runs on each system back to back; when a probe around the
# runs of such a pair is far, the pair runs again, PAIR_ATTEMPTS times in all, so that the
# figures kept come from the near state wherever the machine gives it within the attempts (the
# last attempt is kept whatever its probes; the summary counts the runs begun or ended far).
# Before 2026-12-05 a pair ran again only when its probes disagreed, which kept runs that were
# far from start to end and spread them unevenly over rows and systems.
PAIR_ATTEMPTS=${PAIR_ATTEMPTS:-3}
# ROW_ORDER=each (the default): a row's produce, consume and topic deletion run on one system,
# then on the other. A produce run writing right after another's (ROW_ORDER=pairs: both
# produces of a row back to back, then both consumes) costs the brokers 2-5x the CPU for the
# same records on this machine, whichever system it is: the kernel serves the second writer's
# page cache from memory the first one has split up, and only a deletion of gigabytes gives
# large free blocks back (docs/benchmarks.md, "The second writer"). With an odd REPEAT that
# decided the 1 KiB produce rows for whichever system went first in more repetitions.
ROW_ORDER=${ROW_ORDER:-each}
case "$ROW_ORDER" in each | pairs) ;; *) echo "ROW_ORDER is each or pairs" >&2; exit 2 ;; esac
ROWS=${ROWS:-} PROFILE=${PROFILE:-0} PERF_RECORD_OPTS=${PERF_RECORD_OPTS:-}
# This VM's kernel reports free memory to the hypervisor (virtio-balloon free page reporting,
# every 2 s, in 128 KiB blocks), which then takes it back; the next first touch of such a page,
# by any process or the page cache, costs a fault on the host. Writing 1.5 GB into the page
# cache ran at 452 MB/s on reported memory and 6.4 GB/s on memory touched a moment before, and
# the reporting passes stalled 3-node latency runs of both systems for 100-600 ms every 2 s
# ("Free page reporting" in docs/benchmarks.md). PAGE_REPORTING=pause (the default, where the
# knob exists and is writable) stops the reporting for the script's run and touches the free
# memory once, so that both systems run on memory the host backs; the knob is restored on exit
# (not after a SIGKILL: then `echo 5 > $REPORTING_KNOB` by hand). PAGE_REPORTING=keep leaves
# the machine as it is.
PAGE_REPORTING=${PAGE_REPORTING:-pause}
case "$PAGE_REPORTING" in pause | keep) ;; *) echo "PAGE_REPORTING is pause or keep" >&2; exit 2 ;; esac
REPORTING_KNOB=/sys/module/page_reporting/parameters/page_reporting_order
REPORTING_SAVED='' REPORTING_STATE="not paused (PAGE_REPORTING=$PAGE_REPORTING)"

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# Processes: everything long-lived is started in its own session (so its process group id is
# its pid) and remembered in GROUPS_STARTED; the trap stops every group still there.
# ---------------------------------------------------------------------------------------------
GROUPS_STARTED=()
SAMPLER_PID=

alive() { # a pid that exists and is not a zombie
  local state
  state=$(sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}

spawn() { # spawn CMD... : start CMD in a new session in the background; its pid in SPAWNED
  setsid "$@" &
  SPAWNED=$!
  GROUPS_STARTED+=("$SPAWNED")
}

forget() {
  local kept=() g
  for g in "${GROUPS_STARTED[@]}"; do [[ $g == "$1" ]] || kept+=("$g"); done
  GROUPS_STARTED=("${kept[@]}")
}

stop_groups() { # stop_groups PGID... : SIGTERM, then SIGKILL whatever is left after 30 s
  local g waited=0
  for g in "$@"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for g in "$@"; do
    while alive "$g" && [[ $waited -lt 300 ]]; do sleep 0.1; waited=$((waited + 1)); done
    if alive "$g"; then log "process group $g did not stop within 30 s: SIGKILL"; fi
    kill -KILL -- "-$g" 2>/dev/null || true
    wait "$g" 2>/dev/null || true
    forget "$g"
  done
}

CLIENT_PREFIX=() # PROFILE=1: `perf stat` of the client run by measure
run_child() { # run_child CMD... : run CMD in its own session and wait for it (the trap can stop it)
  local rc=0
  spawn timeout "$CLIENT_TIMEOUT" "${CLIENT_PREFIX[@]}" "$@"
  wait "$SPAWNED" || rc=$?
  forget "$SPAWNED"
  return "$rc"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$SAMPLER_PID" ]]; then kill "$SAMPLER_PID" 2>/dev/null || true; fi
  if [[ ${#GROUPS_STARTED[@]} -gt 0 ]]; then stop_groups "${GROUPS_STARTED[@]}"; fi
  if [[ -n "$REPORTING_SAVED" ]]; then
    echo "$REPORTING_SAVED" >"$REPORTING_KNOB" && log "free page reporting restored (page_reporting_order=$REPORTING_SAVED)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

touch_free_memory() { # touches all free memory but 1 GiB once; echoes how much and how fast
  python3 - <<'EOF'
import mmap, time
free = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemFree:")) * 1024
size = max(free - (1 << 30), 0) & ~4095
started = time.monotonic()
if size:
    m = mmap.mmap(-1, size)
    for i in range(0, size, 4096):
        m[i] = 1
    m.close()
secs = time.monotonic() - started
print(f"{size / 2**30:.1f} GiB of free memory touched once at {size / 2**20 / max(secs, 1e-9):.0f} MiB/s")
EOF
}

pause_page_reporting() { # PAGE_REPORTING=pause: stop free page reporting, touch the free memory once
  [[ $PAGE_REPORTING == pause ]] || return 0
  if [[ ! -w $REPORTING_KNOB ]]; then
    REPORTING_STATE="not paused ($REPORTING_KNOB not writable or missing)"
    return 0
  fi
  REPORTING_SAVED=$(cat "$REPORTING_KNOB")
  # Orders above the buddy allocator's largest (10) match no free block: nothing is reported.
  echo 11 >"$REPORTING_KNOB"
  REPORTING_STATE="paused (page_reporting_order $REPORTING_SAVED -> 11), $(touch_free_memory)"
  log "free page reporting $REPORTING_STATE"
}

free_ports() { # free_ports N : N distinct free loopback ports, space-separated
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# A Kafka tool with the JVM settings its bin/ script gives it: "${KAFKA_TOOL[@]}" TOOL ARGS...
KAFKA_TOOL=(env "KAFKA_HEAP_OPTS=$CLIENT_HEAP_OPTS" "KAFKA_OPTS=$KAFKA_JVM_PERFORMANCE_OPTS" "$KAFKA_SH" run)
kafka_tool() { "${KAFKA_TOOL[@]}" "$@"; }

wait_for_binaries() { # another build may be relinking them for a moment
  local i
  for i in $(seq 600); do
    [[ -x "$STROM" && -x "$LOAD" ]] && return 0
    [[ $i == 1 ]] && log "waiting for $STROM and $LOAD to exist"
    sleep 1
  done
  echo "bench-vs-kafka: $STROM or $LOAD missing" >&2
  exit 1
}

# ---------------------------------------------------------------------------------------------
# The systems. Each start_* sets BOOTSTRAP, BROKER_PIDS (the broker processes, for CPU and
# RSS) and SERVER_CMDS (how each was started, for the report).
# ---------------------------------------------------------------------------------------------
BOOTSTRAP='' BROKER_PIDS=() SERVER_CMDS=()

wait_port() { # wait_port PORT PID : until PORT accepts connections; fails if PID exits
  local i
  for i in $(seq 1200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    alive "$2" || { log "process $2 exited before its port $1 opened"; return 1; }
    sleep 0.1
  done
  log "port $1 not open after 120 s"
  return 1
}

wait_brokers() { # wait_brokers N : until the cluster's metadata lists N brokers (both systems)
  local i count
  for i in $(seq 120); do
    count=$(kafka_tool broker-api-versions --bootstrap-server "$BOOTSTRAP" 2>/dev/null | grep -c ' (id: ' || true)
    [[ $count -ge $1 ]] && return 0
    sleep 0.5
  done
  log "the cluster did not list $1 brokers within a few minutes"
  return 1
}

start_kafka() { # start_kafka NODES
  local n=$1 base=$DIR/kafka-$1 i khome cluster_id voters="" ports
  rm -rf "$base" && mkdir -p "$base"
  khome=$("$KAFKA_SH" home)
  read -r -a ports <<<"$(free_ports $((2 * n)))" # broker i: ports[i]; controller i: ports[n+i]
  for ((i = 0; i < n; i++)); do voters+="${voters:+,}$i@127.0.0.1:${ports[n + i]}"; done
  cluster_id=$(kafka_tool storage random-uuid)
  BOOTSTRAP='' BROKER_PIDS=() SERVER_CMDS=()
  for ((i = 0; i < n; i++)); do
    mkdir -p "$base/node-$i"
    cat >"$base/node-$i/server.properties" <<EOF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${ports[i]},CONTROLLER://127.0.0.1:${ports[n + i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$base/node-$i/data
num.partitions=1
offsets.topic.replication.factor=$n
transaction.state.log.replication.factor=$n
transaction.state.log.min.isr=$((n < 2 ? n : 2))
group.initial.rebalance.delay.ms=0
log.segment.delete.delay.ms=$KAFKA_DELETE_DELAY_MS
EOF
    kafka_tool storage format -t "$cluster_id" -c "$base/node-$i/server.properties" >"$base/node-$i/format.log"
    BOOTSTRAP+="${BOOTSTRAP:+,}127.0.0.1:${ports[i]}"
  done
  for ((i = 0; i < n; i++)); do
    # java directly, not `kafka.sh run server`: that would keep kafka.sh's fetch lock (fd 9)
    # for the server's lifetime and every other kafka.sh call would wait for it.
    # shellcheck disable=SC2086 # the option strings are lists of options
    spawn java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_SERVER_OPTS \
      -Dlog4j2.configurationFile="$khome/log4j2.yaml" -cp "$khome/libs/*" \
      kafka.Kafka "$base/node-$i/server.properties" >"$base/node-$i/server.log" 2>&1
    BROKER_PIDS+=("$SPAWNED")
    SERVER_CMDS+=("java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS${KAFKA_SERVER_OPTS:+ $KAFKA_SERVER_OPTS} -cp '$khome/libs/*' kafka.Kafka $base/node-$i/server.properties")
  done
  for ((i = 0; i < n; i++)); do wait_port "${ports[i]}" "${BROKER_PIDS[i]}"; done
  wait_brokers "$n"
}

wait_readyz() { # wait_readyz HTTP_PORT PID
  local i
  for i in $(seq 1200); do
    curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    alive "$2" || { log "strom serve (pid $2) exited before it was ready"; return 1; }
    sleep 0.1
  done
  log "strom serve (pid $2) not ready after 120 s"
  return 1
}

start_strom() { # start_strom NODES
  local n=$1 base=$DIR/strom-$1 i ports voters="" args
  rm -rf "$base" && mkdir -p "$base"
  wait_for_binaries
  # broker i: Kafka ports[i], internal ports[n+i], HTTP ports[2n+i]
  read -r -a ports <<<"$(free_ports $((3 * n)))"
  for ((i = 0; i < n; i++)); do voters+="${voters:+,}$i@127.0.0.1:${ports[n + i]}"; done
  BOOTSTRAP='' BROKER_PIDS=() SERVER_CMDS=()
  for ((i = 0; i < n; i++)); do
    args=(serve --node-id "$i" --data-dir "$base/node-$i/data"
      --kafka-listen "127.0.0.1:${ports[i]}" --internal-listen "127.0.0.1:${ports[n + i]}"
      --http-listen "127.0.0.1:${ports[2 * n + i]}"
      --offsets-topic-replication-factor "$n" --group-initial-rebalance-delay-ms 0)
    if [[ $n -gt 1 ]]; then args+=(--voters "$voters"); fi
    mkdir -p "$base/node-$i"
    spawn "$STROM" "${args[@]}" >"$base/node-$i/server.log" 2>&1
    BROKER_PIDS+=("$SPAWNED")
    SERVER_CMDS+=("strom ${args[*]}")
    BOOTSTRAP+="${BOOTSTRAP:+,}127.0.0.1:${ports[i]}"
  done
  for ((i = 0; i < n; i++)); do wait_readyz "${ports[2 * n + i]}" "${BROKER_PIDS[i]}"; done
  wait_brokers "$n"
}

stop_system() {
  if [[ ${#BROKER_PIDS[@]} -gt 0 ]]; then stop_groups "${BROKER_PIDS[@]}"; fi
  BROKER_PIDS=()
}

create_topic() { # create_topic NAME PARTITIONS RF
  # Every name is new to its system, so "already exists" means the admin client's own earlier
  # attempt was applied and then retried (it happened to a 3-node Kafka whose controller
  # renounced its leadership mid-request on 2026-12-03, which ended that run).
  local out
  if out=$(kafka_tool topics --bootstrap-server "$BOOTSTRAP" --create --topic "$1" --partitions "$2" \
    --replication-factor "$3" 2>&1); then
    return 0
  fi
  if grep -q "TopicExistsException: Topic '$1' already exists" <<<"$out"; then
    log "topic $1: created by a retried CreateTopics (the tool said it already exists)"
    return 0
  fi
  printf '%s\n' "$out" >&2
  return 1
}

wait_topic_ready() { # wait_topic_ready NAME PARTITIONS : until every partition's leader answers ListOffsets
  local i count
  for i in $(seq 60); do
    count=$(kafka_tool get-offsets --bootstrap-server "$BOOTSTRAP" --topic "$1" 2>/dev/null | grep -c "^$1:[0-9]*:[0-9]*$" || true)
    [[ $count -ge $2 ]] && return 0
    sleep 0.2
  done
  log "topic $1: not every partition had a leader after 60 attempts; going on"
}

wait_committed() { # wait_committed NAME RECORDS : until the high watermarks add up to RECORDS
  # With acks=1 a burst can be acknowledged faster than followers copy it; a consumer only
  # reads up to the high watermark, so consuming at once would time replication, not reads.
  local i total started=$SECONDS
  for i in $(seq 200); do
    total=$(kafka_tool get-offsets --bootstrap-server "$BOOTSTRAP" --topic "$1" 2>/dev/null |
      awk -F: -v t="$1" '$1 == t { s += $3 } END { print s + 0 }')
    if [[ $total -ge $2 ]]; then
      (( SECONDS - started > 1 )) && log "  $1: every record committed after $((SECONDS - started)) s"
      return 0
    fi
    sleep 0.2
  done
  log "topic $1: only $total of $2 records committed after 200 attempts; consuming anyway"
}

delete_topic() {
  kafka_tool topics --bootstrap-server "$BOOTSTRAP" --delete --topic "$1" >/dev/null 2>&1 ||
    log "could not delete topic $1 (ignored)"
}

wait_for_deletions() { # until no deleted partition directory (*-delete) is left under DIR, 2 min at most
  local i left
  for i in $(seq 240); do
    left=$(find "$DIR" -maxdepth 5 -type d -name '*-delete' -print -quit 2>/dev/null)
    [[ -z "$left" ]] && { ((i == 1)) || log "  waited $((i / 2)) s for deleted topics' files to go"; return 0; }
    sleep 0.5
  done
  log "  deleted topics' files still there after 2 min ($left); going on"
}

wait_for_disk() { # wait_for_disk MB : until DIR's filesystem has MB (+2 GiB) free, 3 min at most
  local i avail
  for i in $(seq 180); do
    avail=$(df --output=avail -m "$DIR" | tail -1)
    [[ $avail -ge $(($1 + 2048)) ]] && return 0
    [[ $i == 1 ]] && log "waiting for $1 MB free in $DIR (now $avail MB; deleted topics go after a minute)"
    sleep 1
  done
  log "only $avail MB free in $DIR; going on"
}

# ---------------------------------------------------------------------------------------------
# Resource use of the brokers during one client run.
# ---------------------------------------------------------------------------------------------
cpu_ticks() { # the brokers' utime+stime, in clock ticks
  local pid total=0 stat fields
  for pid in "${BROKER_PIDS[@]}"; do
    stat=$(<"/proc/$pid/stat") 2>/dev/null || { log "broker $pid is gone"; continue; }
    read -r -a fields <<<"${stat##*) }" # fields[0] is field 3 (state); utime is field 14
    total=$((total + fields[11] + fields[12]))
  done
  echo "$total"
}

rss_kib() { # the brokers' VmRSS, summed, in KiB
  local sum=0 pid key value rest
  for pid in "${BROKER_PIDS[@]}"; do
    while read -r key value rest; do
      [[ $key == VmRSS: ]] && sum=$((sum + value))
    done 2>/dev/null <"/proc/$pid/status" || true
  done
  echo "$sum"
}

sample_rss() { # sample_rss OUT : writes the peak of rss_kib, sampled every 200 ms, to OUT
  local peak=0 now
  while [[ -e /proc/$$ ]]; do
    now=$(rss_kib)
    if [[ $now -gt $peak ]]; then peak=$now && echo "$peak" >"$1"; fi
    sleep 0.2
  done
}

handoff_ns() { # the machine's CPU 0 <-> CPU 1 cache-line round trip now, in ns ("-" if unknown)
  local line
  line=$("$LOAD" cpu-handoff 2>/dev/null) || { echo -; return; }
  [[ $line =~ \"round_trip_ns\":([0-9.]+) ]] && echo "${BASH_REMATCH[1]}" || echo -
}

wait_near_vcpus() { # until the vCPUs hand off near (< FAR_NS), HANDOFF_WAIT s at most; echoes the last probe
  local ns waited=0
  while :; do
    ns=$(handoff_ns)
    ((HANDOFF_WAIT > 0)) || break
    [[ $ns == - ]] && break # no probe on this machine (one CPU): nothing to wait for
    awk -v ns="$ns" -v far="$FAR_NS" 'BEGIN { exit !(ns < far) }' && break
    if ((waited >= HANDOFF_WAIT * 2)); then
      log "  the vCPUs stayed far apart ($ns ns) for $HANDOFF_WAIT s; running anyway"
      break
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  ((waited == 0)) || ((waited >= HANDOFF_WAIT * 2)) || log "  waited $((waited / 2)) s for the vCPUs to be near ($ns ns)"
  echo "$ns"
}

MEASURED_CPU='' MEASURED_RSS='' MEASURED_HANDOFF_BEFORE='' MEASURED_HANDOFF_AFTER=''
measure() { # measure CMD... : run CMD; sets MEASURED_CPU (s) and MEASURED_RSS (MiB) of the
  # brokers, and MEASURED_HANDOFF_BEFORE/_AFTER, the machine's vCPU handoff around the run
  local before after rc=0 rss_file=$RUNS/.rss peak now synced perf_pid=
  # No run starts while a deleted topic's files are being removed (gigabytes of extents freed
  # and, on a filesystem mounted with discard, trimmed: I/O and CPU that would land in
  # whichever system's run it overlapped) ...
  wait_for_deletions
  # ... or with another's dirty pages: the second writer of a pair would be throttled by the
  # first's gigabytes (broker CPU 1.5-2.1 s instead of 0.6-1.0 for the same 2 GB).
  synced=$SECONDS
  sync
  ((SECONDS - synced < 2)) || log "  sync took $((SECONDS - synced)) s"
  MEASURED_HANDOFF_BEFORE=$(wait_near_vcpus)
  rss_kib >"$rss_file"
  sample_rss "$rss_file" &
  SAMPLER_PID=$!
  if ((PROFILE)); then # $2 is the run's name
    perf record -q -F 999 $PERF_RECORD_OPTS -p "$(IFS=,; echo "${BROKER_PIDS[*]}")" -o "$RUNS/$2.perf.data" 2>"$RUNS/$2.perf.log" &
    perf_pid=$!
    CLIENT_PREFIX=(perf stat -x, -e task-clock,context-switches,cpu-migrations -o "$RUNS/$2.client-stat" --)
  fi
  before=$(cpu_ticks)
  "$@" || rc=$?
  after=$(cpu_ticks)
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    CLIENT_PREFIX=()
  fi
  kill "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  SAMPLER_PID=
  MEASURED_HANDOFF_AFTER=$(handoff_ns)
  peak=$(<"$rss_file")
  now=$(rss_kib) # a run shorter than one sampling interval
  [[ $now -le $peak ]] || peak=$now
  MEASURED_CPU=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
  MEASURED_RSS=$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')
  return "$rc"
}

# ---------------------------------------------------------------------------------------------
# The clients. Each run_* leaves its output in $RUNS/NAME.out and prints the parsed figures:
# "records secs records_per_s mb_per_s p50 p99 p999" (- where a tool gives none).
# ---------------------------------------------------------------------------------------------
run_producer_perf() { # run_producer_perf NAME TOPIC SIZE ACKS RECORDS
  run_child "${KAFKA_TOOL[@]}" producer-perf-test --topic "$2" --num-records "$5" --record-size "$3" --throughput -1 \
    --producer-props bootstrap.servers="$BOOTSTRAP" acks="$4" >"$RUNS/$1.out" 2>"$RUNS/$1.err"
}
parse_producer_perf() { # the summary line: N records sent, R records/sec (M MB/sec), ... 99.9th.
  python3 - "$1" <<'EOF'
import re, sys
pat = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
                 r"[\d.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
for line in open(sys.argv[1]):
    m = pat.match(line.strip())
    if m:
        n, rate, mb, p50, p99, p999 = m.groups()
        secs = int(n) / float(rate) if float(rate) > 0 else 0
        print(n, f"{secs:.3f}", rate, mb, p50, p99, p999)
        break
else:
    print("0 - - - - - -")
EOF
}

run_consumer_perf() { # run_consumer_perf NAME TOPIC RECORDS : in a group of its own, perf-NAME
  # shellcheck disable=SC2086 # CONSUMER_PERF_OPTS is a list of flags
  run_child "${KAFKA_TOOL[@]}" consumer-perf-test --bootstrap-server "$BOOTSTRAP" --topic "$2" --messages "$3" \
    --group "perf-$1" $CONSUMER_PERF_OPTS >"$RUNS/$1.out" 2>"$RUNS/$1.err"
}
parse_consumer_perf() { # a CSV header (start.time, ..., fetch.nMsg.sec) and one line of values
  python3 - "$1" <<'EOF'
import sys
lines = [l.strip() for l in open(sys.argv[1]) if l.strip()]
out = "0 - - - - - -"
for i, line in enumerate(lines):
    if line.startswith("start.time") and i + 1 < len(lines):
        row = dict(zip([h.strip() for h in line.split(",")], [v.strip() for v in lines[i + 1].split(",")]))
        try:
            secs = float(row["fetch.time.ms"]) / 1000
            out = f'{row["data.consumed.in.nMsg"]} {secs:.3f} {row["fetch.nMsg.sec"]} {row["fetch.MB.sec"]} - - -'
        except (KeyError, ValueError):
            pass
        break
print(out)
EOF
}

run_load_produce() { # run_load_produce NAME TOPIC SIZE ACKS RECORDS
  run_child "$LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$2" --record-size "$3" --acks "$4" \
    --records "$5" >"$RUNS/$1.out" 2>"$RUNS/$1.err"
}
run_load_consume() { # run_load_consume NAME TOPIC RECORDS
  # shellcheck disable=SC2086 # CONSUME_OPTS is a list of flags
  run_child "$LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$2" --records "$3" --timeline "$RUNS/$1.timeline.tsv" \
    $CONSUME_OPTS >"$RUNS/$1.out" 2>"$RUNS/$1.err"
}
run_latency() { # run_latency NAME TOPIC
  run_child "$LOAD" e2e-latency --bootstrap "$BOOTSTRAP" --topic "$2" --record-size 1024 --acks all \
    --rate "$LATENCY_RATE" --duration-secs "$LATENCY_SECS" --timeline "$RUNS/$1.timeline.tsv" \
    >"$RUNS/$1.out" 2>"$RUNS/$1.err"
}
parse_load() { # strom-load's one JSON line
  python3 - "$1" <<'EOF'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    lat = r["latency_ms"]
    f = lambda v: "-" if v is None else v
    print(r["records"], r["secs"], r["msgs_per_sec"], r["mb_per_sec"], f(lat["p50"]), f(lat["p99"]), f(lat["p999"]))
except Exception:
    print("0 - - - - - -")
EOF
}

# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------
TSV_HEADER="topology	system	record_size	acks	partitions	client	op	records	secs	records_per_s	mb_per_s	broker_cpu_s	broker_peak_rss_mib	p50_ms	p99_ms	p999_ms	status	handoff_ns_before	handoff_ns_after"

record() { # record TOPOLOGY SYSTEM SIZE ACKS PARTITIONS CLIENT OP EXPECTED "PARSED" : one TSV line
  local parsed status=ok
  read -r -a parsed <<<"$9"
  [[ ${parsed[0]} -ge $8 ]] || status="short(${parsed[0]}/$8)"
  [[ -z "${RUN_FAILED:-}" ]] || status="failed;$status"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
    "${parsed[0]}" "${parsed[1]}" "${parsed[2]}" "${parsed[3]}" "$MEASURED_CPU" "$MEASURED_RSS" \
    "${parsed[4]}" "${parsed[5]}" "${parsed[6]}" "$status" "$MEASURED_HANDOFF_BEFORE" "$MEASURED_HANDOFF_AFTER" >>"${TSV_OUT:-$TSV}"
  log "  $7 $6: ${parsed[2]} records/s, ${parsed[3]} MB/s, broker CPU ${MEASURED_CPU} s, peak RSS ${MEASURED_RSS} MiB, vCPU handoff ${MEASURED_HANDOFF_BEFORE}/${MEASURED_HANDOFF_AFTER} ns$([[ $status == ok ]] || echo " [$status]")"
}

all_near() { # all_near FILE : every probe in FILE's TSV lines is near (below FAR_NS)
  awk -F'\t' -v far="$FAR_NS" '
    { for (i = 18; i <= 19; i++) if ($i != "-" && $i + 0 >= far) farther++ }
    END { exit farther > 0 }' "$1"
}

kept() { # kept FILE ATTEMPT WHAT : FILE's runs go to the results (status 0) if all near or
  # the last attempt, else to the split file (status 1: run WHAT again)
  if all_near "$1" || (($2 == PAIR_ATTEMPTS)); then
    cat "$1" >>"$TSV"
    return 0
  fi
  cat "$1" >>"$SPLIT_TSV"
  log "  the vCPUs were far apart around $3; running it again ($2 of $PAIR_ATTEMPTS)"
  return 1
}

run_op() { # run_op OP CLIENT NAME TOPIC SIZE ACKS RECORDS : one measured client run; its figures in PARSED
  local op=$1 client=$2 name=$3 topic=$4 size=$5 acks=$6 records=$7
  RUN_FAILED=
  case "$op-$client" in
    produce-java) measure run_producer_perf "$name" "$topic" "$size" "$acks" "$records" || RUN_FAILED=1
      PARSED=$(parse_producer_perf "$RUNS/$name.out") ;;
    consume-java) measure run_consumer_perf "$name" "$topic" "$records" || RUN_FAILED=1
      PARSED=$(parse_consumer_perf "$RUNS/$name.out") ;;
    produce-strom-load) measure run_load_produce "$name" "$topic" "$size" "$acks" "$records" || RUN_FAILED=1
      PARSED=$(parse_load "$RUNS/$name.out") ;;
    consume-strom-load) measure run_load_consume "$name" "$topic" "$records" || RUN_FAILED=1
      PARSED=$(parse_load "$RUNS/$name.out") ;;
  esac
}

topic_everywhere() { # topic_everywhere create|delete TOPIC PARTITIONS RF SYSTEM... : on every system
  local action=$1 topic=$2 parts=$3 rf=$4 system
  for system in "${@:5}"; do
    use_system "$system"
    if [[ $action == create ]]; then
      create_topic "$topic" "$parts" "$rf"
      wait_topic_ready "$topic" "$parts"
    else
      delete_topic "$topic"
    fi
  done
}

disk_mb() { # disk_mb RECORDS SIZE RF SYSTEMS : what one produce of RECORDS writes on all systems, in MB
  echo $(($1 * ($2 + 70) * $3 * $4 / 1048576))
}

paired() { # paired OP TOPOLOGY SIZE ACKS PARTITIONS CLIENT RECORDS TOPIC REP SYSTEM... :
  # OP on each system back to back; again (PAIR_ATTEMPTS in all) while any of its probes is far.
  # A produce that runs again writes into a new topic (TOPIC-aN), the earlier one deleted, so a
  # run never appends to what another wrote and the disk holds one attempt's records at a time;
  # PAIRED_TOPIC names the topic the consume pair then reads.
  local op=$1 topology=$2 size=$3 acks=$4 parts=$5 client=$6 records=$7 topic=$8 rep=$9 attempt system name
  local pair=$DIR/.pair
  PAIRED_TOPIC=$topic
  for attempt in $(seq "$PAIR_ATTEMPTS"); do
    : >"$pair"
    if [[ $op == produce ]] && ((attempt > 1)); then
      topic_everywhere delete "$PAIRED_TOPIC" - - "${@:10}"
      PAIRED_TOPIC=$topic-a$attempt
      wait_for_disk "$(disk_mb "$records" "$size" "$topology" $(($# - 9)))"
      topic_everywhere create "$PAIRED_TOPIC" "$parts" "$topology" "${@:10}"
    fi
    for system in "${@:10}"; do
      use_system "$system"
      name="$system-$topology-$size-$acks-$parts-$client-r$rep-$op-a$attempt"
      run_op "$op" "$client" "$name" "$PAIRED_TOPIC" "$size" "$acks" "$records"
      TSV_OUT=$pair record "$topology" "$system" "$size" "$acks" "$parts" "$client" "$op" "$records" "$PARSED"
      RUN_FAILED=
    done
    kept "$pair" "$attempt" "a run of this pair" && return
  done
}

wanted() { # wanted KEY : KEY matches one of ROWS' patterns (or ROWS is empty)
  local pattern
  local -a patterns
  [[ -z "$ROWS" ]] && return 0
  read -r -a patterns <<<"$ROWS" # no pathname expansion, unlike an unquoted $ROWS
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053 # the pattern is a glob on purpose
    [[ $1 == $pattern ]] && return 0
  done
  return 1
}

row() { # row TOPOLOGY SIZE ACKS PARTITIONS CLIENT REP : produce then consume, each on every system in turn
  local topology=$1 size=$2 acks=$3 parts=$4 client=$5 rep=$6 records topic system systems
  wanted "$topology:$size:$acks:$parts:$client" || return 0
  records=$([[ $size == 100 ]] && echo "$RECORDS_100" || echo "$RECORDS_1024")
  # A topic of its own per repetition (and a consumer-perf-test group per run).
  topic="bench-$size-acks$acks-p$parts-$client$([[ $rep == 1 ]] || echo "-r$rep")"
  read -r -a systems <<<"$(in_turn "$rep")"
  log "$topology node(s): $size B, acks=$acks, $parts partition(s), $client, $records records; ${systems[*]}"
  if [[ $ROW_ORDER == pairs ]]; then
    wait_for_disk "$(disk_mb "$records" "$size" "$topology" ${#systems[@]})"
    topic_everywhere create "$topic" "$parts" "$topology" "${systems[@]}"
    paired produce "$topology" "$size" "$acks" "$parts" "$client" "$records" "$topic" "$rep" "${systems[@]}"
    topic=$PAIRED_TOPIC
    for system in "${systems[@]}"; do
      use_system "$system"
      wait_committed "$topic" "$records"
    done
    paired consume "$topology" "$size" "$acks" "$parts" "$client" "$records" "$topic" "$rep" "${systems[@]}"
    topic_everywhere delete "$topic" - - "${systems[@]}"
    return
  fi
  # ROW_ORDER=each: produce, consume and delete on one system, then the same on the other.
  for system in "${systems[@]}"; do
    wait_for_disk "$(disk_mb "$records" "$size" "$topology" 1)"
    topic_everywhere create "$topic" "$parts" "$topology" "$system"
    paired produce "$topology" "$size" "$acks" "$parts" "$client" "$records" "$topic" "$rep" "$system"
    use_system "$system"
    wait_committed "$PAIRED_TOPIC" "$records"
    paired consume "$topology" "$size" "$acks" "$parts" "$client" "$records" "$PAIRED_TOPIC" "$rep" "$system"
    topic_everywhere delete "$PAIRED_TOPIC" - - "$system"
  done
}

latency_row() { # latency_row TOPOLOGY SYSTEM PARTITIONS REP : again (PAIR_ATTEMPTS) while a probe is far
  local suffix attempt topic name pair=$DIR/.pair
  wanted "$1:latency:$3" || return 0
  suffix=$([[ $4 == 1 ]] || echo "-r$4")
  for attempt in $(seq "$PAIR_ATTEMPTS"); do
    topic="bench-latency-p$3$suffix-a$attempt" name="$2-$1-latency-p$3$suffix-a$attempt"
    wait_for_disk $((LATENCY_RATE * LATENCY_SECS * 1100 * $1 / 1048576))
    create_topic "$topic" "$3" "$1"
    wait_topic_ready "$topic" "$3"
    log "$2, $1 node(s): e2e latency, $LATENCY_RATE x 1 KiB records/s for $LATENCY_SECS s, acks=all, $3 partition(s)"
    RUN_FAILED=
    : >"$pair"
    measure run_latency "$name" "$topic" || RUN_FAILED=1
    TSV_OUT=$pair record "$1" "$2" 1024 all "$3" strom-load latency $((LATENCY_RATE * LATENCY_SECS)) "$(parse_load "$RUNS/$name.out")"
    RUN_FAILED=
    delete_topic "$topic"
    kept "$pair" "$attempt" "this run" && return
  done
}

# Both systems of a topology stay up; use_system points BOOTSTRAP and BROKER_PIDS at one.
declare -A SYSTEM_BOOTSTRAP SYSTEM_PIDS

start_systems() { # start_systems TOPOLOGY
  local system started
  for system in "${SYSTEMS[@]}"; do
    started=$SECONDS
    log "starting $system with $1 node(s)"
    "start_$system" "$1"
    printf '%s\n' "${SERVER_CMDS[@]}" >"$DIR/$system-$1.commands"
    SYSTEM_BOOTSTRAP[$system]=$BOOTSTRAP
    SYSTEM_PIDS[$system]="${BROKER_PIDS[*]}"
    log "$system ready: bootstrap $BOOTSTRAP, broker pids ${BROKER_PIDS[*]} ($((SECONDS - started)) s)"
  done
}

use_system() { # use_system SYSTEM
  BOOTSTRAP=${SYSTEM_BOOTSTRAP[$1]}
  read -r -a BROKER_PIDS <<<"${SYSTEM_PIDS[$1]}"
}

stop_systems() { # stop_systems TOPOLOGY
  local system
  for system in "${SYSTEMS[@]}"; do
    use_system "$system"
    stop_system
    rm -rf "$DIR/$system-$1"/node-*/data # logs and configs stay; Kafka's deleted topics would too
  done
}

in_turn() { # in_turn REP : the systems in the order repetition REP runs them
  local i n=${#SYSTEMS[@]}
  if (($1 % 2 == 1)); then echo "${SYSTEMS[@]}"; return; fi
  for ((i = n - 1; i >= 0; i--)); do printf '%s ' "${SYSTEMS[i]}"; done
}

bench_topology() { # bench_topology TOPOLOGY
  local topology=$1 size acks parts client rep system started=$SECONDS
  start_systems "$topology"
  for size in "${SIZES[@]}"; do
    for acks in "${ACKS_LIST[@]}"; do
      for parts in "${PARTITIONS_LIST[@]}"; do
        for client in java strom-load; do
          for rep in $(seq "$REPEAT"); do
            row "$topology" "$size" "$acks" "$parts" "$client" "$rep"
          done
        done
      done
    done
  done
  for parts in "${LATENCY_PARTITIONS[@]}"; do
    for rep in $(seq "$REPEAT"); do
      for system in $(in_turn "$rep"); do
        use_system "$system"
        latency_row "$topology" "$system" "$parts" "$rep"
      done
    done
  done
  stop_systems "$topology"
  log "$topology node(s) done in $((SECONDS - started)) s"
}

# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
write_report() { # markdown tables from the TSV, Kafka and Strom side by side
  python3 - "$TSV" "$FAR_NS" "$SPLIT_TSV" "$PAIR_ATTEMPTS" "$ROW_ORDER" <<'EOF'
import csv, sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
CLIENT = {"java": "Java (perf-test)", "strom-load": "librdkafka (strom-load)"}
SIZE = {"100": "100 B", "1024": "1 KiB"}
TOPO = {"1": "One node", "3": "Three nodes, replication factor 3"}

def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None

def fmt(v, digits=0):
    return "–" if v is None else f"{v:,.{digits}f}"

def ratio(s, k):
    return "–" if s is None or k is None or k == 0 else f"{s / k:.2f}"

# A run that began or ended with the vCPUs far apart (see "Two vCPUs, near or far").
FAR_NS = float(sys.argv[2])

def far(r):
    return any((num(r.get(f)) or 0) > FAR_NS for f in ("handoff_ns_before", "handoff_ns_after"))

def mark(r):
    if r is None:
        return ""
    return ("" if r["status"] == "ok" else " ⚠") + (" ‡" if far(r) else "")

# With REPEAT > 1 a key has several runs: the table shows the median one (by MB/s; a latency
# row by p99).
runs = defaultdict(list)
for r in rows:
    runs[(r["topology"], r["system"], r["record_size"], r["acks"], r["partitions"], r["client"], r["op"])].append(r)
by = {}
for key, group in runs.items():
    field = "p99_ms" if key[-1] == "latency" else "mb_per_s"
    group.sort(key=lambda r: (num(r[field]) is None, num(r[field]) or 0))
    # Of an even number of runs the worse middle one: the lower MB/s, the higher p99.
    by[key] = group[len(group) // 2 if field == "p99_ms" else (len(group) - 1) // 2]

def value(key, field):
    r = by.get(key)
    return (num(r[field]) if r else None), r

out = []
mismatched = False
keys = sorted({(r["topology"], r["record_size"], r["acks"], r["partitions"], r["client"])
               for r in rows if r["op"] == "produce"},
              key=lambda k: (k[0], int(k[1]), k[2] != "1", int(k[3]), k[4]))
for topo in sorted({k[0] for k in keys}):
    out.append(f"### {TOPO.get(topo, topo)}: throughput\n")
    out.append("| record size | acks | partitions | client | produce records/s Kafka | Strom | Strom/Kafka "
               "| produce MB/s Kafka | Strom | Strom/Kafka | consume MB/s Kafka | Strom | Strom/Kafka |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in (k for k in keys if k[0] == topo):
        _, size, acks, parts, client = k
        cells = [SIZE.get(size, size), acks, parts, CLIENT.get(client, client)]
        kp, sp = by.get((topo, "kafka", size, acks, parts, client, "produce")), by.get((topo, "strom", size, acks, parts, client, "produce"))
        if kp and sp and kp["records"] != sp["records"]:
            cells[3] += " †"
            mismatched = True
        for op, field, digits in (("produce", "records_per_s", 0), ("produce", "mb_per_s", 1), ("consume", "mb_per_s", 1)):
            kv, kr = value((topo, "kafka", size, acks, parts, client, op), field)
            sv, sr = value((topo, "strom", size, acks, parts, client, op), field)
            cells += [fmt(kv, digits) + mark(kr), fmt(sv, digits) + mark(sr), ratio(sv, kv)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")

lat = sorted({(r["topology"], r["partitions"]) for r in rows if r["op"] == "latency"}, key=lambda k: (k[0], -int(k[1])))
if lat:
    out.append("### End-to-end latency, 1 KiB records at a fixed rate, acks=all (strom-load e2e-latency)\n")
    out.append("| nodes | partitions | achieved records/s Kafka / Strom | Kafka p50 / p99 / p99.9 (ms) | Strom p50 / p99 / p99.9 (ms) |")
    out.append("|---|---|---|---|---|")
    for topo, parts in lat:
        cells = [topo, parts]
        rates, pcts = [], []
        for system in ("kafka", "strom"):
            r = by.get((topo, system, "1024", "all", parts, "strom-load", "latency"))
            rates.append(fmt(num(r["records_per_s"])) + mark(r) if r else "–")
            pcts.append(" / ".join(fmt(num(r[f]), 2) for f in ("p50_ms", "p99_ms", "p999_ms")) if r else "–")
        out.append(f"| {topo} | {parts} | {rates[0]} / {rates[1]} | {pcts[0]} | {pcts[1]} |")
    out.append("")

res = defaultdict(lambda: [0.0, 0.0, 0.0])  # cpu s, MB, peak RSS MiB
for r in rows:
    if r["op"] != "produce" or num(r["mb_per_s"]) is None:
        continue
    acc = res[(r["topology"], r["system"], r["record_size"], r["client"])]
    acc[0] += num(r["broker_cpu_s"]) or 0
    acc[1] += num(r["mb_per_s"]) * num(r["secs"])
    acc[2] = max(acc[2], num(r["broker_peak_rss_mib"]) or 0)
rkeys = sorted({(k[0], k[2], k[3]) for k in res}, key=lambda k: (k[0], int(k[1]), k[2]))
if rkeys:
    out.append("### Broker resources while producing (all produce rows of the record size and client)\n")
    out.append("| nodes | record size | client | broker CPU-s per MB Kafka | Strom | Strom/Kafka | peak RSS MiB Kafka | Strom |")
    out.append("|---|---|---|---|---|---|---|---|")
    for topo, size, client in rkeys:
        per_mb, rss = {}, {}
        for system in ("kafka", "strom"):
            acc = res.get((topo, system, size, client))
            per_mb[system] = acc[0] / acc[1] if acc and acc[1] > 0 else None
            rss[system] = acc[2] if acc else None
        out.append(f"| {topo} | {SIZE.get(size, size)} | {CLIENT.get(client, client)} | {fmt(per_mb['kafka'], 4)} "
                   f"| {fmt(per_mb['strom'], 4)} | {ratio(per_mb['strom'], per_mb['kafka'])} "
                   f"| {fmt(rss['kafka'])} | {fmt(rss['strom'])} |")
    out.append("")
    out.append("CPU is the brokers' utime+stime over the produce run divided by the MB produced (MiB); "
               "RSS is the peak of VmRSS summed over the topology's brokers, sampled every 200 ms. "
               "The clients share the machine's cores with the brokers.")
    out.append("")
probed = [r for r in rows if num(r.get("handoff_ns_before")) is not None]
if probed:
    out.append("### The machine during the runs: vCPU 0 ↔ vCPU 1 cache-line round trip (strom-load cpu-handoff)\n")
    out.append(f"| nodes | system | client runs | median ns before a run | runs begun or ended far apart (> {FAR_NS:.0f} ns) |")
    out.append("|---|---|---|---|---|")
    for topo in sorted({r["topology"] for r in probed}):
        for system in ("kafka", "strom"):
            mine = [r for r in probed if r["topology"] == topo and r["system"] == system]
            if not mine:
                continue
            before = sorted(num(r["handoff_ns_before"]) for r in mine)
            n_far = sum(far(r) for r in mine)
            out.append(f"| {topo} | {system.capitalize()} | {len(mine)} | {before[(len(before) - 1) // 2]:,.0f} "
                       f"| {n_far} ({100 * n_far / len(mine):.0f} %) |")
    out.append("")
    out.append("‡: the run shown began or ended with the vCPUs far apart, where runs of either system are "
               "up to 2x slower; results.tsv has every run's probe.")
    out.append("")
    try:
        split = list(csv.DictReader(open(sys.argv[3]), delimiter="\t"))
    except OSError:
        split = []
    if sys.argv[5] == "each":
        out.append("Each row's produce, consume and topic deletion run on one system, then on the other; "
                   f"{len(split)} runs begun or ended with the vCPUs far apart were "
                   f"run again, up to {sys.argv[4]} times in all, and are left out (results-split-pairs.tsv).")
    else:
        out.append(f"Each row's produce runs, and then its consume runs, go on the two systems back to back; "
                   f"{len(split)} runs of pairs with a probe far were "
                   f"run again, up to {sys.argv[4]} times in all, and are left out (results-split-pairs.tsv).")
    out.append("")
if mismatched:
    out.append("†: Kafka and Strom produced different record counts in this row (runs of different settings merged).")
    out.append("")
if any(r["status"] != "ok" for r in rows):
    out.append("⚠: the run failed or fell short of its record count; see results.tsv and runs/.")
    out.append("")
print("\n".join(out))
EOF
}

machine_md() {
  local mem librdkafka
  mem=$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
  librdkafka=$(awk '/^name = "rdkafka-sys"/ { getline; gsub(/[" ]/, ""); sub(/^version=/, ""); print }' "$REPO/Cargo.lock")
  cat <<EOF
- Date: $(date -u +%F); machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $mem RAM;
  brokers and clients on the same machine; both systems up, one client run at a time, data under $DIR ($(df --output=source "$DIR" | tail -1));
  $([[ $ROW_ORDER == each ]] && echo "each row's produce, consume and topic deletion on one system, then on the other (ROW_ORDER=each)" || echo "each row's two produce runs back to back, then its two consume runs (ROW_ORDER=pairs)"), Kafka first in odd repetitions.
- Apache Kafka $(sed -n 's/^KAFKA_VERSION=//p' "$KAFKA_SH") (KRaft, combined broker+controller nodes), $(java -version 2>&1 | head -1);
  JVM: $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS${KAFKA_SERVER_OPTS:+ $KAFKA_SERVER_OPTS}; tools -Xmx512M;
  log.segment.delete.delay.ms=$KAFKA_DELETE_DELAY_MS, and every client run starts after a \`sync\` once no deleted topic's files are left on either system.
- Strom $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?') (target/release/strom);
  strom-load on librdkafka ${librdkafka#*+} (the rdkafka crate's bundled librdkafka, rdkafka-sys $librdkafka), with jemalloc as its malloc (tikv-jemallocator; see "The consumer's malloc").
- Records per produce run: $RECORDS_100 × 100 B, $RECORDS_1024 × 1 KiB; latency: $LATENCY_RATE records/s for $LATENCY_SECS s;
  each throughput figure is the median of $REPEAT run(s) of its row (by MB/s; CPU and RSS over all runs),
  each latency row the run with the median p99 of $REPEAT (of an even number, the worse middle one).
- Free page reporting to the hypervisor: $REPORTING_STATE.
- The vCPU probe (\`strom-load cpu-handoff\`) before and after every client run; far means over $FAR_NS ns;
  $( ((HANDOFF_WAIT > 0)) && echo "every run waited up to $HANDOFF_WAIT s for the vCPUs to be near" || echo "runs did not wait for the vCPUs to be near (HANDOFF_WAIT=0)").
- Client settings are each client's defaults: Java producer linger.ms=5, batch.size=16384 (idempotent with
  acks=all); strom-load linger.ms=5, batch.size=1000000. consumer-perf-test joins a group and its
  figure excludes the join (fetch.MB.sec); every consume run starts once the high watermarks
  add up to what was produced (with acks=1 followers may still be copying a burst, and a
  consumer reads only committed records); strom-load consume assigns every partition and runs with
  \`$CONSUME_OPTS\` for both systems: librdkafka (since 2.4) stops fetching a partition for
  fetch.queue.backoff.ms (default 1000 ms) whenever its queue holds more than queued.min.messages
  (100,000), so with the default a fast consumer of 100-byte records spends most of its time
  waiting on that timer and measures neither broker.

Commands (\$B = the bootstrap servers, T a fresh topic per row, deleted after it):

\`\`\`
bash e2e/scripts/bench-vs-kafka.sh $ARGS_USED
$(cat "$DIR"/kafka-*.commands "$DIR"/strom-*.commands 2>/dev/null)
e2e/kafka/kafka.sh run topics --bootstrap-server \$B --create --topic T --partitions P --replication-factor R
e2e/kafka/kafka.sh run producer-perf-test --topic T --num-records N --record-size S --throughput -1 --producer-props bootstrap.servers=\$B acks=A
e2e/kafka/kafka.sh run consumer-perf-test --bootstrap-server \$B --topic T --messages N --group perf-NAME (a group per run)
strom-load produce --bootstrap \$B --topic T --record-size S --acks A --records N
strom-load consume --bootstrap \$B --topic T --records N $CONSUME_OPTS
strom-load e2e-latency --bootstrap \$B --topic T --record-size 1024 --acks all --rate $LATENCY_RATE --duration-secs $LATENCY_SECS
\`\`\`
EOF
}

charts_md() { # SVG charts of the TSV (strom-load charts) next to $DOCS, as markdown images
  local out prefix files
  out=$(dirname "$DOCS")/bench-results/charts
  prefix="$(date -u +%F)-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo run)-"
  files=$("$LOAD" charts --results "$TSV" --out "$out" --prefix "$prefix") || return 0
  log "charts: $files"
  echo "Charts (drawn by \`strom-load charts\` from the raw results; the tables below hold the same runs):"
  echo
  local name
  for name in produce-1node consume-1node produce-3node consume-3node latency; do
    if [[ -f "$out/$prefix$name.svg" ]]; then echo "![$prefix$name](bench-results/charts/$prefix$name.svg)"; fi
  done
  echo
}

write_docs() { # replace the marked section of docs/benchmarks.md (append it if missing)
  local section=$DIR/docs-section.md
  {
    echo "<!-- bench-vs-kafka:begin -->"
    echo "## Apache Kafka and Strom on the same machine ($(date -u +%F))"
    echo
    machine_md
    echo
    charts_md
    cat "$MD"
    echo "<!-- bench-vs-kafka:end -->"
  } >"$section"
  python3 - "$DOCS" "$section" <<'EOF'
import sys
docs, section = sys.argv[1], open(sys.argv[2]).read()
text = open(docs).read()
begin, end = "<!-- bench-vs-kafka:begin -->", "<!-- bench-vs-kafka:end -->"
if begin in text and end in text:
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    text = head + section.rstrip("\n") + tail
else:
    text = text.rstrip("\n") + "\n\n" + section
open(docs, "w").write(text)
EOF
  log "wrote the section into $DOCS"
}

# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
ARGS_USED="--only $ONLY --topology $TOPOLOGY --dir $DIR"
if [[ $QUICK == 1 ]]; then ARGS_USED="--quick $ARGS_USED"; fi
mkdir -p "$RUNS"
wait_for_binaries
"$KAFKA_SH" home >/dev/null # fetch Kafka's jars once, before anything is timed

# Keep rows of systems/topologies this invocation does not run.
if [[ -f "$TSV" ]] && [[ "$(head -1 "$TSV")" == "$TSV_HEADER" ]]; then
  awk -F'\t' -v systems="${SYSTEMS[*]}" -v topologies="${TOPOLOGIES[*]}" '
    BEGIN { split(systems, s, " "); for (i in s) run_s[s[i]] = 1; split(topologies, t, " "); for (i in t) run_t[t[i]] = 1 }
    NR == 1 || !(($2 in run_s) && ($1 in run_t))' "$TSV" >"$TSV.kept"
  mv "$TSV.kept" "$TSV"
else
  echo "$TSV_HEADER" >"$TSV"
fi
echo "$TSV_HEADER" >"$SPLIT_TSV"

pause_page_reporting
STARTED=$SECONDS
for topology in "${TOPOLOGIES[@]}"; do
  bench_topology "$topology"
done
log "all done in $((SECONDS - STARTED)) s"

write_report >"$MD"
cat "$MD"
echo "raw results: $TSV; tool output: $RUNS/"
"$LOAD" charts --results "$TSV" --out "$DIR/charts" || log "no charts drawn"
if [[ $WRITE_DOCS == 1 ]]; then write_docs; fi
