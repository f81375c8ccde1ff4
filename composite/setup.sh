#!/usr/bin/env bash
# Composite variant, step 1: a venv with the locked runtime dependencies, then `python=<venv python>`
# into $GITHUB_OUTPUT.
#
# Why a cache: every job of a campaign (guard, select, each matrix cell, export, upload) runs this step.
# The venv is keyed by the lock file's digest and the interpreter, and kept in the runner's tool cache
# (RUNNER_TOOL_CACHE; RUNNER_TEMP when absent), so a self-hosted runner builds it once per lock and a
# hosted runner once per job. Installation is --require-hashes and --only-binary: nothing is compiled
# and nothing that is not in the lock can be installed.
set -euo pipefail

# Not on Windows: every phase reads and writes through fail-closed file primitives (O_NOFOLLOW,
# O_DIRECTORY, dir_fd, owner checks) that Windows does not have, so a phase could only fail there.
case "${RUNNER_OS:-$(uname -s)}" in
  Windows|MINGW*|MSYS*|CYGWIN*)
    echo "::error title=setup.platform::testops-evidence (composite) runs on Linux and macOS runners, not on Windows; run this job on a Linux or macOS runner"
    exit 2
    ;;
esac

action_root=$(cd "${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is set by the runner}/.." && pwd)
lock="$action_root/requirements/runtime.txt"

# The interpreter: the job's python3 (or python on Windows), at least 3.11.
python=""
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 \
     && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
if [ -z "$python" ]; then
  echo "::error title=setup.python::testops-evidence (composite) needs Python 3.11 or newer on the runner; add actions/setup-python before this step"
  exit 2
fi

interpreter=$("$python" -c 'import platform, sys; print(sys.version.split()[0], platform.machine(), sys.platform)')
key=$( { cat "$lock"; echo "$interpreter"; } | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])')
cache_root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:?RUNNER_TEMP is set by the runner}}/testops-evidence"
venv="$cache_root/venv-$key"

venv_python() {
  if [ -x "$1/bin/python" ]; then echo "$1/bin/python"; else echo "$1/Scripts/python.exe"; fi
}

if [ -f "$venv/.complete" ]; then
  echo "testops-evidence: reusing the venv for lock $key ($interpreter)"
else
  echo "::group::testops-evidence: venv for lock $key ($interpreter)"
  mkdir -p "$cache_root"
  # Build beside the final place and rename: jobs that share a tool cache (self-hosted runners, act)
  # may build concurrently, and a half-built venv must never be used.
  build=$(mktemp -d "$cache_root/.build-XXXXXX")
  "$python" -m venv "$build"
  "$(venv_python "$build")" -m pip install --quiet --disable-pip-version-check --no-input --no-cache-dir \
    --require-hashes --only-binary=:all: -r "$lock"
  touch "$build/.complete"
  # rename(2) refuses an existing non-empty target on every OS (GNU `mv -T` is not on macOS runners).
  if ! "$python" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$build" "$venv" 2>/dev/null; then
    rm -rf "$build"  # another job finished first; its venv is identical
  fi
  echo "::endgroup::"
fi

echo "python=$(venv_python "$venv")" >> "$GITHUB_OUTPUT"
