"""Shared test helpers: run a phase in-process as the runner would, and read what it wrote."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testops_evidence.actions import Runtime
from testops_evidence.runner import PhaseContext, run_phase


@dataclass
class PhaseRun:
    exit_code: int
    outputs: dict[str, str]
    summary: str
    log: str
    env: dict[str, str] = field(default_factory=dict)
    state_dir: Path | None = None

    def failure(self) -> dict[str, Any] | None:
        import json

        if self.state_dir is None or not (self.state_dir / "failure.json").exists():
            return None
        return json.loads((self.state_dir / "failure.json").read_text())


def parse_output_file(text: str) -> dict[str, str]:
    """Parse a GITHUB_OUTPUT file: ``name=value`` lines and ``name<<DELIM`` heredocs."""
    outputs: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        heredoc = re.match(r"^([A-Za-z0-9_-]+)<<(.+)$", line)
        if heredoc:
            name, delim = heredoc.groups()
            j = lines.index(delim, i + 1)
            outputs[name] = "\n".join(lines[i + 1 : j])
            i = j + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        i += 1
    return outputs


def run_mode(
    mode: str,
    tmp_path: Path,
    options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    *,
    actions: bool = True,
    **context_overrides: Any,
) -> PhaseRun:
    """Run ``mode`` in-process with fresh GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files under tmp_path.

    ``context_overrides`` (clock, monotonic, sleep, new_uuid) are injected into the PhaseContext.
    """
    run_dir = tmp_path / f"run-{mode}-{len(list(tmp_path.glob('run-*')))}"
    run_dir.mkdir(parents=True)
    full_env = dict(env or {})
    if actions:
        full_env.setdefault("GITHUB_ACTIONS", "true")
        full_env["GITHUB_OUTPUT"] = str(run_dir / "output")
        full_env["GITHUB_STEP_SUMMARY"] = str(run_dir / "summary.md")
    options = dict(options or {})
    state_dir = Path(options.setdefault("state-dir", str(tmp_path / "state")))
    out = io.StringIO()
    runtime = Runtime(full_env, stdout=out)

    def factory(**kwargs: Any) -> PhaseContext:
        return PhaseContext(**kwargs, **context_overrides)

    code = run_phase(mode, options, full_env, runtime, context_factory=factory)
    outputs = parse_output_file((run_dir / "output").read_text()) if (run_dir / "output").exists() else {}
    summary = (run_dir / "summary.md").read_text() if (run_dir / "summary.md").exists() else ""
    if not actions:
        outputs = dict(runtime.outputs)
    return PhaseRun(code, outputs, summary, out.getvalue(), full_env, state_dir)


class FakeClock:
    """Deterministic time: ``sleep`` advances the clock instead of sleeping."""

    def __init__(self, start: float = 1_764_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.0)


# A token value that must never leave the process except inside `::add-mask::` (see test_sentinel.py).
SENTINEL_TOKEN = "tok-SENTINEL-5f0c2a9e7d41b8"


# A leak is any piece of a secret this long, not only the whole of it: a server that echoes the token and a
# message cut across it leave a prefix behind (issue 24). The same length as redact.FRAGMENT, which the
# runtime scrubs; the tests state it again rather than import it, so a change there cannot weaken them.
LEAK_PIECE = 8


def secret_pieces(secret: str) -> list[str]:
    """Every run of LEAK_PIECE characters of ``secret`` (the whole secret when it is shorter)."""
    if len(secret) <= LEAK_PIECE:
        return [secret]
    return sorted({secret[i:i + LEAK_PIECE] for i in range(len(secret) - LEAK_PIECE + 1)})


def holds_secret(text: str | bytes, secret: str) -> bool:
    """True when ``text`` holds the secret or any LEAK_PIECE characters of it."""
    if isinstance(text, bytes):
        return any(piece.encode() in text for piece in secret_pieces(secret))
    return any(piece in text for piece in secret_pieces(secret))


def secret_leaks(run: PhaseRun, secret: str = SENTINEL_TOKEN, *extra_roots: Path) -> list[str]:
    """Where ``secret``, or any LEAK_PIECE characters of it, appears in what a phase emitted: outputs,
    summary, log (except ``::add-mask::`` lines), failure.json and every file in the state dir and in
    ``extra_roots``. Empty means no leak."""
    found = [f"output {name}" for name, value in run.outputs.items() if holds_secret(value, secret)]
    if holds_secret(run.summary, secret):
        found.append("step summary")
    found += [f"log line {i}" for i, line in enumerate(run.log.splitlines())
              if holds_secret(line, secret) and not line.startswith("::add-mask::")]
    for root in (*([run.state_dir] if run.state_dir else []), *extra_roots):
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink() and holds_secret(path.read_bytes(), secret):
                    found.append(str(path))
    return found


def fake_phase(monkeypatch: Any, mode: str, run: Any) -> None:
    """Make ``mode`` run ``run(ctx)``: an in-memory module registered in PHASE_MODULES and sys.modules for
    the test only (``monkeypatch`` undoes both), so runner behaviour is tested without a real phase."""
    import sys
    import types

    from testops_evidence.phases import PHASE_MODULES

    name = f"_fake_{mode.replace('-', '_')}"
    module = types.ModuleType(f"testops_evidence.phases.{name}")
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(PHASE_MODULES, mode, name)


def assert_golden(path: Path, text: str) -> None:
    """Compare ``text`` with the golden file ``path``; ``UPDATE_GOLDEN=1`` rewrites it (review the diff)."""
    import os

    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs from its golden file; UPDATE_GOLDEN=1 rewrites it"
