#!/usr/bin/env bash
# Static validation of the action and the workflows: JSON Schemas (GitHub's workflow, action and
# Dependabot schemas, vendored in check-jsonschema, plus "every job has timeout-minutes"), zizmor (no finding of
# medium severity or higher), hadolint (the Dockerfile) and actionlint (expressions, contexts, shell
# scripts through shellcheck). Every tool runs offline. .ci/run calls this script.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin

workflows=(workflows-templates/*.yml)
shopt -s nullglob
own=(.github/workflows/*.yml .github/workflows/*.yaml)
shopt -u nullglob
actions=(action.yml composite/action.yml)

step() { echo "-- $*"; }

step "action.yml and composite/action.yml are generated from interface.py and up to date"
"$bin/python" scripts/gen_action.py --check

step "check-jsonschema: vendor.github-workflows, github-workflows-require-timeout"
"$bin/check-jsonschema" --builtin-schema vendor.github-workflows "${workflows[@]}" "${own[@]}"
"$bin/check-jsonschema" --builtin-schema github-workflows-require-timeout "${workflows[@]}" "${own[@]}"

step "check-jsonschema: vendor.dependabot (.github/dependabot.yml)"
"$bin/check-jsonschema" --builtin-schema vendor.dependabot .github/dependabot.yml

step "check-jsonschema: vendor.github-actions"
"$bin/check-jsonschema" --builtin-schema vendor.github-actions "${actions[@]}"

step "zizmor --offline (fails on medium or higher)"
# zizmor's exit code encodes the highest severity found; --min-severity makes lower ones invisible.
"$bin/zizmor" --quiet --offline --no-progress --min-severity medium --config .github/zizmor.yml \
  "${workflows[@]}" "${own[@]}" "${actions[@]}"

step "hadolint Dockerfile"
"$bin/hadolint" Dockerfile

step "actionlint"
if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # A fresh CI machine: Debian's shellcheck, so that run: scripts are checked there too.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null 2>&1; } \
    || true
fi
# actionlint checks run: scripts with shellcheck when it is on PATH (Debian package `shellcheck`;
# installed above when running as root with apt-get). Without it the rest is still checked.
if command -v shellcheck >/dev/null 2>&1; then
  echo "   (with $(shellcheck --version | sed -n 's/^version: /shellcheck /p'))"
else
  echo "   (shellcheck not found: run: scripts are not shell-checked)"
fi
"$bin/actionlint" -no-color "${workflows[@]}" "${own[@]}"

step "shellcheck of the action's own shell scripts"
if command -v shellcheck >/dev/null 2>&1; then
  shopt -s nullglob
  shellcheck composite/setup.sh scripts/lint-action.sh scripts/container-*.sh
  shopt -u nullglob
fi
echo "static validation: all passed"
