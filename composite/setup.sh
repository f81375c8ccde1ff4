#!/usr/bin/env bash
# Composite variant, step 1: a venv with the locked runtime dependencies, then `python=<venv python>`
# into $GITHUB_OUTPUT, and the `testops-evidence` command of this venv onto the job's PATH.
#
# Why a cache: every job of a campaign (guard, select, each matrix cell, export, upload) runs this step.
# The venv is keyed by the lock file's digest and the interpreter, and kept in the runner's tool cache
# (RUNNER_TOOL_CACHE; RUNNER_TEMP when absent), so a self-hosted runner builds it once per lock and a
# hosted runner once per job. Installation is --require-hashes and --only-binary: nothing is compiled
# and nothing that is not in the lock can be installed.
#
# Why uv: a hosted runner pays this step in every job. uv (from PyPI, pinned by URL and hash in
# requirements/uv.txt, one wheel per platform) builds the same venv from the same lock,
# with the same --require-hashes, in about a seventh of pip's time (BENCHMARKS.md, "Composite set-up").
# Where uv cannot be fetched or cannot run (no wheel for the platform, an index or TLS set-up only pip
# knows), the log says so and pip builds the venv as before. TESTOPS_EVIDENCE_INSTALLER=pip in the job's
# environment skips uv altogether.
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
uv_lock="$action_root/requirements/uv.txt"

# The interpreter: the job's python3 (or python on Windows), at least 3.11. One start of it says
# everything the step needs: its real path (a version manager's shim, pyenv or asdf, costs a shell start
# at every call), and the cache keys of the venv and of uv (each lock's digest with the interpreter).
probe='import hashlib, platform, sys
if sys.version_info < (3, 11):
    sys.exit(1)
interpreter = " ".join((sys.version.split()[0], platform.machine(), sys.platform))
def key(path):
    try:
        with open(path, "rb") as lock:
            return hashlib.sha256(lock.read() + interpreter.encode() + b"\n").hexdigest()[:16]
    except OSError:  # no uv lock beside the action: pip builds the venv (a missing file is not a missing Python)
        return "none"
print(key(sys.argv[1]), key(sys.argv[2]), interpreter)
print(sys.executable)'
python=""
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 \
     && facts=$("$candidate" -c "$probe" "$lock" "$uv_lock" 2>/dev/null); then
    python=$(command -v "$candidate")
    break
  fi
done
if [ -z "$python" ]; then
  echo "::error title=setup.python::testops-evidence (composite) needs Python 3.11 or newer on the runner; add actions/setup-python before this step"
  exit 2
fi
read -r key uv_key interpreter <<< "${facts%%$'\n'*}"
real_python=${facts#*$'\n'}
if [ -x "$real_python" ]; then python=$real_python; fi
cache_root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:?RUNNER_TEMP is set by the runner}}/testops-evidence"
venv="$cache_root/venv-$key"

venv_python() {
  if [ -x "$1/bin/python" ]; then echo "$1/bin/python"; else echo "$1/Scripts/python.exe"; fi
}

# rename(2) refuses an existing non-empty target on every OS (GNU `mv -T` is not on macOS runners): of
# jobs that share a tool cache (self-hosted runners, act) and build concurrently, the first one wins and
# the others drop their identical copy.
publish() {
  if ! "$python" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$1" "$2" 2>/dev/null; then
    rm -rf "$1"
  fi
}

# uv, pinned by URL and hash for this platform (requirements/uv.txt), fetched into the tool cache by
# fetch_uv.py; prints its path, or nothing (and says why on stderr) where it cannot be had or run.
fetch_uv() {
  local uv_dir="$cache_root/uv-$uv_key" tmp
  if [ ! -x "$uv_dir/bin/uv" ]; then
    tmp=$(mktemp -d "$cache_root/.uv-XXXXXX")
    if ! "$python" -I "$GITHUB_ACTION_PATH/fetch_uv.py" "$uv_lock" "$tmp" >&2; then
      rm -rf "$tmp"
      echo "testops-evidence: no uv for this runner (the reason is above); pip builds the venv instead" >&2
      return 0
    fi
    publish "$tmp" "$uv_dir"
  fi
  if ! "$uv_dir/bin/uv" --version >/dev/null 2>&1; then
    echo "testops-evidence: the pinned uv does not run on this runner ($interpreter); pip builds the venv instead" >&2
    return 0
  fi
  echo "$uv_dir/bin/uv"
}

# uv reads no pip configuration: an index the runner gives pip through the environment is given to uv
# too. Config files are ignored (--no-config): the workspace's uv.toml or pyproject.toml chooses nothing.
build_with_uv() {
  local uv=$1 build=$2
  if [ -n "${PIP_INDEX_URL:-}" ] && [ -z "${UV_DEFAULT_INDEX:-}${UV_INDEX_URL:-}" ]; then
    export UV_DEFAULT_INDEX="$PIP_INDEX_URL"
  fi
  "$uv" --version
  "$uv" venv --no-config --no-python-downloads --python "$python" "$build" \
    && "$uv" pip install --no-config --no-cache --python "$(venv_python "$build")" \
         --require-hashes --only-binary :all: -r "$lock"
}

build_with_pip() {
  local build=$1
  "$python" -m venv "$build"
  "$(venv_python "$build")" -m pip install --disable-pip-version-check --no-input --no-cache-dir \
    --require-hashes --only-binary=:all: -r "$lock"
}

if [ -f "$venv/.complete" ]; then
  echo "testops-evidence: reusing the venv for lock $key ($interpreter)"
else
  echo "::group::testops-evidence: venv for lock $key ($interpreter)"
  mkdir -p "$cache_root"
  # Build beside the final place and rename: jobs that share a tool cache (self-hosted runners, act)
  # may build concurrently, and a half-built venv must never be used.
  build=$(mktemp -d "$cache_root/.build-XXXXXX")
  uv=""
  if [ "${TESTOPS_EVIDENCE_INSTALLER:-uv}" = pip ]; then
    echo "testops-evidence: TESTOPS_EVIDENCE_INSTALLER=pip: pip builds the venv"
  else
    uv=$(fetch_uv)
  fi
  if [ -n "$uv" ] && build_with_uv "$uv" "$build"; then
    echo "testops-evidence: venv built with uv"
  else
    if [ -n "$uv" ]; then
      echo "testops-evidence: uv could not build the venv (its output is above); pip builds it instead"
    fi
    rm -rf "$build"
    build=$(mktemp -d "$cache_root/.build-XXXXXX")
    build_with_pip "$build"
    echo "testops-evidence: venv built with pip"
  fi
  touch "$build/.complete"
  publish "$build" "$venv"
  echo "::endgroup::"
fi

# The `testops-evidence` command of this venv and this action's code, for later steps of the job (a case
# command writing its cell): one launcher alone in its directory, so nothing else of the venv (its
# python) reaches the job's PATH. Per job, in RUNNER_TEMP; added to GITHUB_PATH once.
cli_dir="${RUNNER_TEMP:-$cache_root}/testops-evidence-cli"
launcher=$(printf '#!/usr/bin/env bash\n# testops-evidence, as the composite action at %s runs it (composite/setup.sh)\nexec %q -I -c %q %q "$@"\n' \
  "$action_root" "$(venv_python "$venv")" \
  'import sys; sys.path.insert(0, sys.argv.pop(1)); from testops_evidence.cli import main; sys.exit(main())' \
  "$action_root/src")
if [ ! -f "$cli_dir/testops-evidence" ] || [ "$(cat "$cli_dir/testops-evidence")" != "$launcher" ]; then
  mkdir -p "$cli_dir"
  printf '%s\n' "$launcher" > "$cli_dir/.testops-evidence.tmp"
  chmod 755 "$cli_dir/.testops-evidence.tmp"
  mv -f "$cli_dir/.testops-evidence.tmp" "$cli_dir/testops-evidence"
fi
case ":$PATH:" in
  *":$cli_dir:"*) ;;  # an earlier step of this job added it
  *)
    if [ -n "${GITHUB_PATH:-}" ]; then echo "$cli_dir" >> "$GITHUB_PATH"; fi
    echo "testops-evidence: later steps of this job can run \`testops-evidence\` ($cli_dir/testops-evidence)"
    ;;
esac

echo "python=$(venv_python "$venv")" >> "$GITHUB_OUTPUT"
