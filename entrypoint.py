#!/usr/bin/env python3
"""Action entrypoint: maps the runner's ``INPUT_*`` variables to the ``testops-evidence`` CLI.

The runner keeps hyphens in input names (``INPUT_SELECTION-PATH``); both spellings are read. Secret
inputs (tokens) are deliberately *not* turned into command-line options, where any process could read
them; the CLI reads them from the environment itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _import_cli():  # type: ignore[no-untyped-def]
    try:
        from testops_evidence import cli, interface, settings
    except ModuleNotFoundError:  # running from a checkout (composite variant, tests)
        sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
        from testops_evidence import cli, interface, settings
    return cli, interface, settings


def build_argv(env: dict[str, str]) -> list[str]:
    _, interface, settings = _import_cli()
    mode = settings.env_input(env, "mode")
    if mode is None:
        return []
    argv = [mode]
    for spec in interface.INPUTS:
        if spec.name == "mode" or spec.secret:
            continue
        if mode in interface.MODES and not spec.applies_to(mode):
            continue
        value = settings.env_input(env, spec.name)
        if value is not None and not value.startswith("${{"):
            # One `--name=value` word: a value starting with "-" would otherwise be read as an option.
            argv.append(f"--{spec.name}={value}")
    return argv


def main() -> int:
    cli, interface, _ = _import_cli()
    env = dict(os.environ)
    argv = build_argv(env)
    if not argv or argv[0] not in interface.MODES:
        from testops_evidence.actions import Runtime
        from testops_evidence.errors import Refusal
        from testops_evidence.runner import report_refusal

        refusal = (Refusal("input.mode", "input mode is required", field="mode",
                           expected=" | ".join(interface.MODES), actual="")
                   if not argv else
                   Refusal("mode.unknown", f"mode {argv[0]!r} is not a phase", field="mode",
                           expected=" | ".join(interface.MODES), actual=argv[0]))
        return report_refusal(argv[0] if argv else "(none)", refusal, Runtime(env), None)
    return int(cli.main(argv))


if __name__ == "__main__":
    sys.exit(main())
