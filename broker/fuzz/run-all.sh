#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) one after another, each from its committed
# seeds plus the corpus it grew before (corpus/, not committed); logs to /tmp/fuzz-<target>.log.
#   bash broker/fuzz/run-all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-600}"; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(kafka_request record_batch decompress internal_message)
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t"
  echo "== $t for ${seconds}s"
  cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
    > "/tmp/fuzz-$t.log" 2>&1 && echo "   $t: no crash ($(grep -c . "/tmp/fuzz-$t.log") log lines)" \
    || { echo "   $t: CRASH, see /tmp/fuzz-$t.log and artifacts/$t/"; exit 1; }
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "/tmp/fuzz-$t.log" | tail -2
done
