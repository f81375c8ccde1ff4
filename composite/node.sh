#!/usr/bin/env bash
# Composite variant, before an upload that builds the HTML report: the major version of the runner's
# Node.js (0 when there is none) as the `major` output. Allure Report 3 needs 20 or newer; below that,
# the next step sets it up with actions/setup-node. The phase itself then installs the pinned Allure
# Report (src/testops_evidence/allure/package-lock.json) with `npm ci`.
set -euo pipefail
major=0
if command -v node >/dev/null 2>&1; then
  version=$(node --version 2>/dev/null || true)
  version=${version#v}
  major=${version%%.*}
  case "$major" in
    '' | *[!0-9]*) major=0 ;;
  esac
fi
echo "major=$major" >> "${GITHUB_OUTPUT:?GITHUB_OUTPUT is set by the runner}"
echo "Node.js on this runner: ${major/#0/none} (the HTML report needs 20 or newer)"
