"""Action entrypoint: maps the runner's ``INPUT_*`` variables to the ``testops-evidence`` CLI.

The runner keeps hyphens in input names (``INPUT_SELECTION-PATH``); both spellings are read. Secret
inputs (tokens) are deliberately *not* turned into command-line options, where any process could read
them; the CLI reads them from the environment itself.

``entrypoint.py`` at the repository root (what the Docker image and the composite variant start, as
``python -I entrypoint.py``) only finds this module: a script is compiled at every start and never
cached, a module's byte code is (0.7 ms, 7% of a bare interpreter start, at every start of every job).
"""

from __future__ import annotations

import os

from testops_evidence import interface, settings


def build_argv(env: dict[str, str]) -> list[str]:
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


def main(argv: list[str] | None = None) -> int:
    if argv:  # `docker run <image> --version` (or any command line) is the CLI's, not the action's
        from testops_evidence import cli

        return int(cli.main(argv))
    env = dict(os.environ)
    mode = settings.env_input(env, "mode")
    if mode is None or mode not in interface.MODES:
        from testops_evidence.actions import Runtime
        from testops_evidence.errors import Refusal
        from testops_evidence.runner import report_refusal
        from testops_evidence.safeio import StateDir

        refusal = (Refusal("input.mode", "input mode is required", field="mode",
                           expected=" | ".join(interface.MODES), actual="")
                   if mode is None else
                   Refusal("mode.unknown", f"mode {mode!r} is not a phase", field="mode",
                           expected=" | ".join(interface.MODES), actual=mode))
        # failure.json too, as for every other refusal (docs/errors.md): the state dir the phase would have used.
        location = settings.resolve_value("state-dir", {}, env)
        state = StateDir(location if location and "\x00" not in location else settings.default_state_location(env),
                         workspace=env.get("GITHUB_WORKSPACE") or os.getcwd())
        return report_refusal(mode or "testops-evidence", refusal, Runtime(env), state)
    # The phase reads its inputs from INPUT_* itself (Settings: both spellings, stripped, empty = unset),
    # by the same rules as the options build_argv would make of them, so they are not turned into an argv
    # for argparse to parse back: that would put argparse into every start of every job
    # (benchmarks/run.py --only startup). build_argv stays the documented mapping (and is tested).
    from testops_evidence.actions import Runtime
    from testops_evidence.runner import run_phase

    return run_phase(mode, {}, env, Runtime(env))
