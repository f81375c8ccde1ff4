#!/usr/bin/env bash
# Sets up what the tests need (scripts/setup.sh tests: every tier printed with its size) and runs the whole
# test suite. Extra arguments go to pytest; TESTOPS_EVIDENCE_SKIP leaves tiers out (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tests
workers=${PYTEST_WORKERS:-2}
cat <<NOTE
==> tests: pytest on $workers workers (the whole suite takes about 10 to 15 minutes on 2 cores). On this machine
    they bind servers to 127.0.0.1 only, run workflows under act in host mode (cache in .tools/act-cache),
    build the composite action's venv from PyPI into temporary directories, and, as root unless
    TESTOPS_EVIDENCE_SKIP names container, start a private dockerd from .tools/container (socket under
    /tmp, no bridge, no iptables rules), build and run the action's image, then stop it.
NOTE
exec .venv/bin/python -m pytest -n "$workers" "$@"
