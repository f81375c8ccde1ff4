#!/usr/bin/env bash
# Writes the hash-locked requirements from their .in files: the one way the locks are made (never by hand).
#
#   scripts/lock.sh                          # re-lock; every pin the .in files still allow is kept
#   scripts/lock.sh --upgrade                # the newest versions the .in files allow
#   scripts/lock.sh --upgrade-package NAME   # one package (and what it needs) to its newest version
#
# Each lock is `uv pip compile --universal --generate-hashes` of its .in file, resolved for Python 3.11
# (the oldest this project supports) and every later one, with markers where versions differ (e.g.
# backports.zstd only below 3.14, which has compression.zstd). Every file of a pinned version is hashed, so
# one lock serves every platform and Python of the CI matrix, the Docker image and the composite action:
#
#   runtime.txt    runtime.in: the action's dependencies (Docker image, composite set-up, .venv)
#   dev.txt        dev.in, constrained by runtime.txt: tests, linters, act
#   rehearsal.txt  rehearsal.in, constrained by dev.txt: pytest for the local rehearsal, the same pins
#   producers.txt  producers.in: Inspect AI and zstandard, the test-only producers' virtualenv
#   audit.txt      audit.in: pip-audit, which CI runs over the other locks
#   bench.txt      bench.in: the libraries benchmarks/parsers.py compares the hand-made parsers with
#
# uv is the version pinned in requirements/uv.txt, fetched and checked by composite/fetch_uv.py into
# .tools/uv (as scripts/setup.sh does); UV=/path/to/uv uses another binary of that same version. The output
# depends on PyPI's state and on uv's version, so it is reproducible from the .in files only up to what
# was published since: tests/test_locks.py checks the form (header, pins, hashes), not the resolution.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

want=$(sed -n 's/.*uv-\([0-9.]*\)-py3-none-.*/\1/p' requirements/uv.txt | head -n 1)
uv=${UV:-}
if [ -z "$uv" ]; then
  key=$(sha256sum requirements/uv.txt | cut -c1-16)
  if [ ! -x ".tools/uv/$key/bin/uv" ]; then
    rm -rf .tools/uv
    mkdir -p .tools/uv
    "$PYTHON" -I composite/fetch_uv.py requirements/uv.txt ".tools/uv/$key"
  fi
  uv="$PWD/.tools/uv/$key/bin/uv"
fi
have=$("$uv" --version | cut -d' ' -f2)
if [ "$have" != "$want" ]; then
  echo "scripts/lock.sh: $uv is uv $have; the locks are made with uv $want (requirements/uv.txt)" >&2
  exit 2
fi

cd requirements
for name in runtime dev rehearsal producers audit bench; do
  echo "== requirements/$name.txt from $name.in"
  "$uv" pip compile --quiet "$name.in" --output-file "$name.txt" --universal --python-version 3.11 \
    --generate-hashes --custom-compile-command "scripts/lock.sh" --no-emit-index-url "$@"
done
