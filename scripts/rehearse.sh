#!/usr/bin/env bash
# The whole campaign on one machine, from a fresh clone: set up what the rehearsal uses (scripts/setup.sh
# rehearsal: the venv with the runtime lock and pytest, Allure Report 3; about 100 MB, each step printed),
# then run `testops-evidence rehearse` on the files backend with the examples (examples/contract.yml, the
# example harness, shipped external-lane reports). Options are passed through, e.g. --workdir,
# --report never. Exit 0 when every phase behaved as designed (the examples fail and break cases on purpose).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh rehearsal
echo "==> rehearse: the example campaign (examples/contract.yml) on the files backend"
exec .venv/bin/testops-evidence rehearse "$@"
