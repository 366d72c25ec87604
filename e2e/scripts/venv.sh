# Sourced by the e2e scripts: makes sure the venv at $VENV (<repo>/.venv) exists with pip.
# Debian's python3 cannot make a venv (it has no ensurepip) without python3-venv; the failed
# attempt leaves a venv without pip behind, hence --clear on the second one.
ensure_venv() {
  if [[ ! -x "$VENV/bin/pip" ]]; then
    echo "creating $VENV"
    if ! python3 -m venv "$VENV"; then
      echo "installing python3-venv"
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv --clear "$VENV"
    fi
  fi
}
