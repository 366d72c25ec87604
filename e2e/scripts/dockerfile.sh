#!/usr/bin/env bash
# Checks the root Dockerfile with a real Dockerfile parser (PyPI `dockerfile`, which wraps
# the official Go parser of moby/buildkit): e2e/scripts/dockerfile_check.py says what must hold.
# No container runtime runs here, so the image itself is not built by the tests.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$REPO/.venv"
DOCKERFILE_VERSION=3.4.0
# shellcheck source=venv.sh
source "$REPO/e2e/scripts/venv.sh"
ensure_venv
if ! "$VENV/bin/python" -c "import dockerfile, importlib.metadata as m, sys; sys.exit(m.version('dockerfile') != '$DOCKERFILE_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install -q "dockerfile==$DOCKERFILE_VERSION"
fi
exec "$VENV/bin/python" "$REPO/e2e/scripts/dockerfile_check.py" "$REPO"
