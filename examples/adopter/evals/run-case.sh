#!/usr/bin/env bash
# case-command: bash evals/run-case.sh
# Runs one case's tests with pytest (JUnit XML out) and turns the report into the case's cell result. A failing
# test is evidence, not an error: the cell is written whatever pytest's exit code, so the case is reported failed.
set -uo pipefail
python=python3
if ! "$python" -c 'import pytest' 2>/dev/null; then
  # A fresh runner has no pytest: install this repository's test requirements once per job.
  venv="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/adopter-evals-venv"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" && "$venv/bin/python" -m pip install --quiet -r requirements.txt || exit 1
  fi
  python="$venv/bin/python"
fi
report="$(mktemp -d)/junit.xml"
"$python" -m pytest "tests/test_${TESTOPS_EVIDENCE_CASE//-/_}.py" --junitxml="$report" \
  || echo "pytest exited $?: the cell records what the report holds"
testops-evidence cell --case "$TESTOPS_EVIDENCE_CASE" --junit "$report" \
  --out "$TESTOPS_EVIDENCE_CELL_RESULT" --selection-path "$TESTOPS_EVIDENCE_SELECTION" \
  --source-sha "$TESTOPS_EVIDENCE_SOURCE_SHA" --attempt-id "$TESTOPS_EVIDENCE_ATTEMPT_ID"
