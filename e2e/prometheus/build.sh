#!/usr/bin/env bash
# Builds `prometheus` and `promtool` (github.com/prometheus/prometheus, the version pinned in
# go.mod next to this script) from their Go module, once per machine, and prints their
# directory. The observability tests scrape brokers with this Prometheus and check and unit
# test the chart's alert rules with this promtool. The web UI's assets are not built (the
# API is all the tests use).
#
#   bash e2e/prometheus/build.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=$(grep -oP '^\s*(require\s+)?github\.com/prometheus/prometheus \Kv[0-9][^ ]*' "$HERE/go.mod" | head -1)
exec bash "$HERE/../scripts/go-tools.sh" "$HERE" prometheus github.com/prometheus/prometheus \
  "-X github.com/prometheus/common/version.Version=$VERSION -X github.com/prometheus/common/version.Branch=strom-e2e"
