#!/usr/bin/env bash
# The whole campaign on one machine, from a fresh clone: set up what the rehearsal uses (scripts/setup.sh
# rehearsal: the venv with the runtime lock and pytest, Allure Report 3; about 100 MB, each step printed),
# then run `testops-evidence rehearse` on the files backend. Options are passed through, e.g. --workdir,
# --report never.
# - Without --case-command: the examples (examples/contract.yml, the example harness, shipped external-lane
#   reports), from this checkout. Exit 0 when every phase behaved as designed (the examples fail and break
#   cases on purpose).
# - With --case-command '<cmd>': your campaign, from the directory you started this script in (your repository:
#   its .github/testops-evidence.yml, or --contract), each selected case measured by your command
#   (docs/local.md, "Without act").
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
bash scripts/setup.sh rehearsal
cli="$PWD/.venv/bin/testops-evidence"
for arg in "$@"; do
  case "$arg" in
    --case-command | --case-command=*)
      echo "==> rehearse: your campaign in $caller (your contract and case command) on the files backend"
      cd "$caller"
      exec "$cli" rehearse "$@"
      ;;
  esac
done
echo "==> rehearse: the example campaign (examples/contract.yml) on the files backend"
exec "$cli" rehearse "$@"
