#!/usr/bin/env bash
# Sets up everything the rehearsal and the tests need, from nothing: a virtualenv with the locked
# runtime and dev dependencies (installed with --require-hashes), the package itself, and Allure
# Report 3 from npm (the real consumer of exported results). Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
pip_install() {
  # Some machines' pip config names local mirror folders that do not exist; pip then warns once per
  # package. Those lines are noise; every other line of pip's output is kept.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:///.*' is ignored" || true; }
  return "${PIPESTATUS[0]}"
}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.locks-$(cat requirements/runtime.txt requirements/dev.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  pip_install --require-hashes -r requirements/runtime.txt
  if [ "${TESTOPS_EVIDENCE_RUNTIME_ONLY:-}" != "1" ]; then
    pip_install --require-hashes -r requirements/dev.txt
  fi
  touch "$stamp"
fi
if ! .venv/bin/python -c 'import testops_evidence' 2>/dev/null; then
  if .venv/bin/python -c 'import setuptools, wheel' 2>/dev/null; then
    pip_install --no-deps --no-build-isolation -e .
  else
    # runtime-only setups have no build backend: a .pth file puts src/ on the path instead
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$(pwd)/src" > "$site/testops-evidence-src.pth"
  fi
fi

# Allure Report 3 (npm), pinned; used by the rehearsal (report) and by the real-consumer tests.
if command -v npm >/dev/null 2>&1 && [ "${TESTOPS_EVIDENCE_SKIP_NPM:-}" != "1" ]; then
  if [ ! -x .tools/allure/node_modules/.bin/allure ]; then
    mkdir -p .tools/allure
    (cd .tools/allure && [ -f package.json ] || echo '{"private":true}' > package.json
     npm install --silent --no-audit --no-fund allure@3.18.0 >/dev/null)
  fi
fi
