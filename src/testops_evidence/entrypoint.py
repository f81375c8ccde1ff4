"""Action entrypoint: maps the runner's ``INPUT_*`` variables to the ``testops-evidence`` CLI.

The runner keeps hyphens in input names (``INPUT_SELECTION-PATH``); both spellings are read. Secret
inputs (tokens) are deliberately *not* turned into command-line options, where any process could read
them; the CLI reads them from the environment itself.

``entrypoint.py`` at the repository root (what the Docker image and the composite variant start, as
``python -I entrypoint.py``) only finds this module.
"""

from __future__ import annotations

import os

from testops_evidence import interface, settings
from testops_evidence.actions import Runtime
from testops_evidence.runner import run_phase


def main(argv: list[str] | None = None) -> int:
    if argv:  # `docker run <image> --version` (or any command line) is the CLI's, not the action's
        from testops_evidence import cli

        return int(cli.main(argv))
    # The phase reads its inputs from INPUT_* itself (Settings: both spellings, stripped, empty = unset).
    env = dict(os.environ)
    return run_phase(settings.env_input(env, "mode"), {}, env, Runtime(env), modes=interface.MODES)
