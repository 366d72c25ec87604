#!/usr/bin/env bash
# Apache Kafka 3.9 (KRaft, one node) behind `strom serve`'s command line, so that the e2e suite
# can be run against the reference implementation: a test that fails on Strom but passes here
# points at the broker, one that fails here too points at the test.
#
#   e2e/scripts/kafka-as-strom.sh setup          # once: fetch Kafka's jars from Maven Central
#   STROM_BIN=$PWD/e2e/scripts/kafka-as-strom.sh cargo test --release -p e2e
#   STROM_BIN=$PWD/e2e/scripts/kafka-as-strom.sh bash e2e/scripts/clients.sh
#
# Needs java (17+), mvn and python3. `/readyz` is served by a small Python helper that answers
# 200 once the Kafka port accepts connections and exits with the JVM; the JVM replaces this
# script (exec), so SIGTERM and SIGKILL reach Kafka itself. Known differences: RSS bounds in
# bad_input.rs do not hold for a JVM heap, and Kafka makes admin changes visible a little
# after answering (the admin tests poll for that).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOME_DIR="$REPO/target/kafka-reference"
KAFKA_VERSION=3.9.1

setup() {
  mkdir -p "$HOME_DIR"
  if ls "$HOME_DIR/libs/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null 2>&1; then
    return
  fi
  cat >"$HOME_DIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>kafka-reference</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
EOF
  (cd "$HOME_DIR" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$HOME_DIR/libs" >&2)
  cat >"$HOME_DIR/log4j.properties" <<'EOF'
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.BrokerServer=INFO
log4j.logger.kafka.log=INFO
EOF
  cat >"$HOME_DIR/ready.py" <<'EOF'
import os, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer

pid, http_addr, kafka_addr = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def watch():
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            os._exit(0)
        time.sleep(0.1)

threading.Thread(target=watch, daemon=True).start()
kafka_host, kafka_port = kafka_addr.rsplit(":", 1)

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        status = 200
        if self.path == "/readyz":
            try:
                socket.create_connection((kafka_host, int(kafka_port)), timeout=1).close()
            except OSError:
                status = 503
        elif self.path not in ("/healthz", "/metrics"):
            status = 404
        body = b"# TYPE kafka_reference gauge\nkafka_reference 1\n" if self.path == "/metrics" else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

host, port = http_addr.rsplit(":", 1)
for _ in range(100):  # the previous helper may still hold the port for a moment after a restart
    try:
        server = HTTPServer((host, int(port)), Handler)
        break
    except OSError:
        time.sleep(0.1)
server.serve_forever()
EOF
}

if [[ "${1:-}" == setup ]]; then
  setup
  echo "Kafka $KAFKA_VERSION ready in $HOME_DIR"
  exit 0
fi
[[ "${1:-}" == serve ]] && shift
setup

NUM_PARTITIONS=1 AUTO_CREATE=true RET_CHECK=300000 SEG_BYTES=1073741824 MAX_REQ=104857600 ADV=
DATA= KLISTEN= HLISTEN= EXTRA=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --node-id) shift 2 ;;
    --data-dir) DATA=$2; shift 2 ;;
    --kafka-listen) KLISTEN=$2; shift 2 ;;
    --http-listen) HLISTEN=$2; shift 2 ;;
    --advertised-kafka) ADV=$2; shift 2 ;;
    --num-partitions) NUM_PARTITIONS=$2; shift 2 ;;
    --auto-create-topics-enable) AUTO_CREATE=$2; shift 2 ;;
    --log-retention-check-interval-ms) RET_CHECK=$2; shift 2 ;;
    --log-segment-bytes) SEG_BYTES=$2; shift 2 ;;
    --socket-request-max-bytes) MAX_REQ=$2; shift 2 ;;
    --group-initial-rebalance-delay-ms) EXTRA+="group.initial.rebalance.delay.ms=$2\n"; shift 2 ;;
    --offsets-topic-num-partitions) EXTRA+="offsets.topic.num.partitions=$2\n"; shift 2 ;;
    --offsets-retention-minutes) EXTRA+="offsets.retention.minutes=$2\n"; shift 2 ;;
    --log-cleaner-interval-ms) EXTRA+="log.cleaner.backoff.ms=$2\n"; shift 2 ;;
    *) echo "kafka-as-strom: unsupported flag $1" >&2; exit 2 ;;
  esac
done
[[ -n "$DATA" && -n "$KLISTEN" && -n "$HLISTEN" ]] || { echo "kafka-as-strom: --data-dir, --kafka-listen and --http-listen are required" >&2; exit 2; }
mkdir -p "$DATA"
STATE=$(dirname "$DATA")
# The controller port must survive restarts: keep it beside the data dir.
if [[ ! -f "$STATE/kafka-controller.port" ]]; then
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$STATE/kafka-controller.port"
fi
CPORT=$(cat "$STATE/kafka-controller.port")
CONF="$STATE/kafka.properties"
cat >"$CONF" <<EOF
process.roles=broker,controller
node.id=0
controller.quorum.voters=0@127.0.0.1:$CPORT
listeners=PLAINTEXT://$KLISTEN,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://${ADV:-$KLISTEN}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA
num.partitions=$NUM_PARTITIONS
auto.create.topics.enable=$AUTO_CREATE
log.retention.check.interval.ms=$RET_CHECK
log.segment.bytes=$SEG_BYTES
socket.request.max.bytes=$MAX_REQ
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
$(printf "%b" "$EXTRA")
EOF
JAVA=(java -Xms256m -Xmx512m -cp "$HOME_DIR/libs/*" -Dlog4j.configuration="file:$HOME_DIR/log4j.properties")
if [[ ! -f "$DATA/meta.properties" ]]; then
  "${JAVA[@]}" kafka.tools.StorageTool format -t MkU3OEVBNTcwNTJENDM2Qg -c "$CONF" >&2
fi
python3 "$HOME_DIR/ready.py" $$ "$HLISTEN" "$KLISTEN" &
exec "${JAVA[@]}" kafka.Kafka "$CONF"
