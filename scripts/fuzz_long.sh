#!/usr/bin/env bash
# The long fuzz profile (docs/security.md, "Fuzzing"): at least 10,000 examples per target with random
# seeds, instead of the CI profile's few derandomized ones. Records each target's counts and the wall
# time in tests/reliability/fuzz-long-run.json and refreshes the figures in docs/security.md.
#
#   scripts/fuzz_long.sh                                   # every target, 10,000 examples each
#   TESTOPS_EVIDENCE_FUZZ_EXAMPLES=50000 scripts/fuzz_long.sh -k contract    # more, fewer targets
#
# Each target's figures are kept with the run that measured them (date, commit): a run of some targets
# replaces only theirs.
#
# A failure prints hypothesis' minimal falsifying example and a @reproduce_failure line; nothing is
# recorded then. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
workers="${PYTEST_WORKERS:-2}"
report="$(mktemp "${TMPDIR:-/tmp}/fuzz-long.XXXXXX.jsonl")"
trap 'rm -f "$report"' EXIT
started=$(date +%s)
TESTOPS_EVIDENCE_FUZZ=long TESTOPS_EVIDENCE_FUZZ_REPORT="$report" \
  "$python" -m pytest -q -p no:cacheprovider -n "$workers" --hypothesis-show-statistics \
  tests/reliability/test_fuzz_documents.py tests/reliability/test_fuzz_http.py tests/reliability/test_fuzz_import.py "$@"
seconds=$(( $(date +%s) - started ))
# A run of some targets (-k ...) replaces only their figures; the others keep the run they came from.
"$python" scripts/gen_security_tables.py --record "$report" --seconds "$seconds" --workers "$workers" \
  --command "scripts/fuzz_long.sh${*:+ $*} (TESTOPS_EVIDENCE_FUZZ=long, ${TESTOPS_EVIDENCE_FUZZ_EXAMPLES:-10000} examples per target, -n $workers)"
