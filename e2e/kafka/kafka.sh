#!/usr/bin/env bash
# Apache Kafka's own jars for tests and benchmarks: one pinned 4.x release from Maven Central,
# cached per version, and a runner for any of its tool classes.
#
#   e2e/kafka/kafka.sh home                      fetch once (jars + the compat client), print the dir
#   e2e/kafka/kafka.sh run <tool|class> ARGS...  run a Kafka tool, e.g.
#       e2e/kafka/kafka.sh run topics --bootstrap-server 127.0.0.1:9092 --list
#   e2e/kafka/kafka.sh tools                     the tool names and the classes they run
#
# Cache: $STROM_CACHE_DIR (default ~/.cache/strom)/kafka-<version>/ with libs/ (every jar of
# kafka_2.13, kafka-clients, kafka-tools and kafka-server and their dependencies, resolved by
# Maven), log4j2.yaml (warnings to stderr) and compat-<hash>/ (CompatClient.java compiled
# against kafka-clients; a new hash when the source changes). Needs java 17+ and mvn; the only
# network it uses is Maven Central through mvn. A second call finds everything in place and
# returns at once.
set -euo pipefail

KAFKA_VERSION=4.1.1
LOG4J_VERSION=2.24.3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${STROM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strom}
KHOME="$CACHE/kafka-$KAFKA_VERSION"

# The equivalent of each bin/kafka-*.sh script of the release.
tool_class() {
  case "$1" in
    topics) echo org.apache.kafka.tools.TopicCommand ;;
    configs) echo kafka.admin.ConfigCommand ;;
    console-producer) echo org.apache.kafka.tools.ConsoleProducer ;;
    console-consumer) echo org.apache.kafka.tools.consumer.ConsoleConsumer ;;
    consumer-groups) echo org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
    producer-perf-test) echo org.apache.kafka.tools.ProducerPerformance ;;
    consumer-perf-test) echo org.apache.kafka.tools.ConsumerPerformance ;;
    e2e-latency) echo org.apache.kafka.tools.EndToEndLatency ;;
    reassign-partitions) echo org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
    leader-election) echo org.apache.kafka.tools.LeaderElectionCommand ;;
    metadata-quorum) echo org.apache.kafka.tools.MetadataQuorumCommand ;;
    delete-records) echo org.apache.kafka.tools.DeleteRecordsCommand ;;
    get-offsets) echo org.apache.kafka.tools.GetOffsetShell ;;
    transactions) echo org.apache.kafka.tools.TransactionsCommand ;;
    cluster) echo org.apache.kafka.tools.ClusterTool ;;
    broker-api-versions) echo org.apache.kafka.tools.BrokerApiVersionsCommand ;;
    storage) echo kafka.tools.StorageTool ;;
    server) echo kafka.Kafka ;;
    compat-client) echo CompatClient ;;
    *) echo "$1" ;;
  esac
}
TOOLS="topics configs console-producer console-consumer consumer-groups producer-perf-test
consumer-perf-test e2e-latency reassign-partitions leader-election metadata-quorum delete-records
get-offsets transactions cluster broker-api-versions storage server compat-client"

fetch() {
  mkdir -p "$KHOME"
  exec 9>"$KHOME/.lock" # one fetch at a time when tests and benchmarks start together
  flock 9
  if [[ ! -f "$KHOME/libs/.complete" ]]; then
    echo "fetching Apache Kafka $KAFKA_VERSION's jars from Maven Central into $KHOME/libs" >&2
    local work
    work=$(mktemp -d)
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.strom.e2e</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
    rm -rf "$KHOME/libs.partial"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$KHOME/libs.partial" >&2)
    rm -rf "$work" "$KHOME/libs"
    mv "$KHOME/libs.partial" "$KHOME/libs"
    touch "$KHOME/libs/.complete"
  fi
  if [[ ! -f "$KHOME/log4j2.yaml" ]]; then
    cat >"$KHOME/log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
EOF
  fi
  local hash
  hash=$(sha256sum "$HERE/CompatClient.java" | cut -c1-12)
  if [[ ! -f "$KHOME/compat-$hash/CompatClient.class" ]]; then
    rm -rf "$KHOME"/compat-*
    mkdir -p "$KHOME/compat-$hash.partial"
    javac -d "$KHOME/compat-$hash.partial" -cp "$KHOME/libs/*" "$HERE/CompatClient.java"
    mv "$KHOME/compat-$hash.partial" "$KHOME/compat-$hash"
  fi
  echo "$KHOME/compat-$hash" >"$KHOME/compat.path"
  exec 9>&- # not held by what runs next (a broker would block every other fetch)
}

case "${1:-}" in
  home)
    fetch
    echo "$KHOME"
    ;;
  tools)
    for t in $TOOLS; do printf '%-22s %s\n' "$t" "$(tool_class "$t")"; done
    ;;
  run)
    [[ $# -ge 2 ]] || { echo "usage: $0 run <tool|class> ARGS..." >&2; exit 2; }
    fetch
    class=$(tool_class "$2")
    shift 2
    exec java ${KAFKA_HEAP_OPTS:--Xmx512m} ${KAFKA_OPTS:-} \
      -Dlog4j2.configurationFile="$KHOME/log4j2.yaml" \
      -cp "$KHOME/libs/*:$(cat "$KHOME/compat.path")" "$class" "$@"
    ;;
  *)
    echo "usage: $0 home | tools | run <tool|class> ARGS..." >&2
    exit 2
    ;;
esac
