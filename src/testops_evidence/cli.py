"""Command line: ``testops-evidence <mode> [options]``. One subcommand per mode; options are the
action's inputs with the same kebab-case names. Secret inputs are not options: a token on a command line
is visible to every process on the machine, so tokens come only from the environment."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from testops_evidence import __version__
from testops_evidence.actions import Runtime
from testops_evidence.interface import COMMANDS, inputs_for, options_for
from testops_evidence.runner import run_phase

VERSION = f"testops-evidence {__version__}"

_DESCRIPTIONS = {
    "guard": "admit this run against the contract's trust policy",
    "bootstrap": "register the contract's cases and plan in TestOps (idempotent)",
    "launch": "run the test plan in TestOps",
    "select": "bind the job run to this run and write the selection and matrices",
    "verify-selection": "worker: re-hash and re-validate the selection",
    "collect-cells": "check which worker job uploaded each cell artifact (Actions jobs API)",
    "export": "worker: project cell results into Allure results and a receipt",
    "stream": "publish each case as soon as the worker jobs that measured it have ended",
    "verify-stream": "hold what stream published to the export receipt of the same cells",
    "upload": "publish the exported results",
    "verify": "prove the publication landed",
    "import": "import remote cells from another workflow's artifacts into the ledger",
    "reconcile": "resolve uncertain mutations by observation",
    "pages": "put a files-backend publication's report on a GitHub Pages site, with retention",
    "check": "validate a contract and print a summary of it",
    "rehearse": "run the whole campaign locally on the files backend",
    "verify-attestation": "re-check a publication attestation (in-toto Statement) against the published files",
    "cell": "worker: write one cell result from test or evaluation reports (formats and adapter rules in "
            "docs/evidence.md)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testops-evidence",
        description="Fail-closed evaluation campaigns on GitHub Actions, published to Allure TestOps.",
        epilog="Exit codes: 0 done, 1 cases failed, 2 usage, 3 integrity refusal, 4 remote failure.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="mode", metavar="MODE")
    for command in COMMANDS:
        cmd = sub.add_parser(command, help=_DESCRIPTIONS[command], description=_DESCRIPTIONS[command])
        cmd.set_defaults(command_parser=cmd)
        cmd.add_argument("--summary-file", help="write the step summary Markdown to this file (default: "
                         "$GITHUB_STEP_SUMMARY, else printed as plain text)")
        cmd.add_argument("--json", action="store_true", help="print one JSON document on stdout: the outputs, the "
                         "exit code and the refusal, if any (the text goes to stderr)")
        # Only this command's own inputs (interface.py says which): `cell --help` must not list the
        # two dozen inputs of the action modes. Secrets are never options (any process can read argv).
        for spec in inputs_for(command):
            if spec.secret:
                continue
            shown = f" (default: {spec.default})" if spec.default else ""
            cmd.add_argument(f"--{spec.name}", dest=spec.name.replace("-", "_"), metavar="VALUE",
                             help=(spec.description + shown).replace("%", "%%"))
        for option in options_for(command):
            cmd.add_argument(f"--{option.name}", dest=option.name.replace("-", "_"),
                             choices=option.choices or None, default=option.default,
                             metavar=None if option.choices else "VALUE", help=option.description.replace("%", "%%"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # --json (any command): stdout carries one JSON document — the outputs, the exit code and the refusal —
    # and what a person reads goes to stderr.
    json_output = "--json" in words[1:]
    words = [word for index, word in enumerate(words) if index == 0 or word != "--json"]
    parser = build_parser()
    args, unknown = parser.parse_known_args(words)
    if unknown and args.mode:
        # The command's own usage, not the top-level one: the user was one option away.
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not args.mode:
        parser.print_help()
        return 2
    mode, summary_file = args.mode, args.summary_file
    values = {k.replace("_", "-"): v for k, v in vars(args).items()
              if k not in ("mode", "summary_file", "json", "command_parser")}
    runtime = Runtime(os.environ, summary_file=summary_file, json_output=json_output)
    exit_code = run_phase(mode, values, os.environ, runtime)
    if json_output:
        document = {"mode": mode, "exit-code": exit_code, "outputs": runtime.outputs, "refusal": runtime.refusal}
        sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n")
        sys.stdout.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
