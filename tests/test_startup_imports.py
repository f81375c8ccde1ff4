"""What starting an entry point costs, as a ratio to a bare interpreter's start measured in the same run.

Each entry point (the action's entrypoint, the CLI, the worker phases that run once per case) is imported by
a fresh ``python -I`` from this tree's sources, interleaved with ``python -I -c pass``; the CPU time of each
child (user + system, from ``wait4``) is compared by medians. The budgets are generous — a shared machine
is noisy — and catch what matters to a worker's start: a network client or a schema engine pulled into a
phase that never needs one costs several bare starts. The figures for a quiet machine are in BENCHMARKS.md
(``benchmarks/run.py --only startup``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROUNDS = 9

# entry point -> its budget, in bare interpreter starts
BUDGETS = {
    "testops_evidence.entrypoint": 15,  # every phase of the action starts here
    "testops_evidence.cli": 15,  # `testops-evidence ...` in a worker's case command
    "testops_evidence.phases.verify_selection": 20,  # once per matrix job
    "testops_evidence.phases.cell": 30,  # once per case
    "testops_evidence.phases.export": 30,  # once per worker job
}


def cpu_seconds(*argv: str) -> float:
    child = subprocess.Popen([sys.executable, "-I", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.stderr is not None
    error = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    assert child.returncode == 0, error
    return usage.ru_utime + usage.ru_stime


def importing(module: str) -> tuple[str, ...]:
    return ("-c", f"import sys; sys.path.insert(0, {str(SRC)!r}); import {module}")


@pytest.mark.parametrize("module", sorted(BUDGETS))
def test_an_entry_point_starts_within_its_budget_of_bare_interpreter_starts(module: str) -> None:
    cpu_seconds(*importing(module))  # byte code compiled once, outside the measurement
    bare: list[float] = []
    start: list[float] = []
    for _ in range(ROUNDS):
        bare.append(cpu_seconds("-c", "pass"))
        start.append(cpu_seconds(*importing(module)))
    ratio = statistics.median(start) / max(statistics.median(bare), 1e-3)
    assert ratio <= BUDGETS[module], (f"importing {module} costs {ratio:.1f} bare interpreter starts "
                                      f"(budget {BUDGETS[module]}): {statistics.median(start) * 1000:.0f} ms CPU "
                                      f"against {statistics.median(bare) * 1000:.0f} ms")


def test_the_budget_can_fail() -> None:
    """The measurement tells a heavy start from a light one: the network clients together cost more than the
    entrypoint's budget (so a phase that pulled them in would be caught)."""
    heavy = statistics.median(cpu_seconds("-c", "import github, requests, jsonschema") for _ in range(5))
    bare = statistics.median(cpu_seconds("-c", "pass") for _ in range(5))
    light = statistics.median(cpu_seconds(*importing("testops_evidence.entrypoint")) for _ in range(5))
    assert heavy > 2 * light and heavy / bare > 5, (heavy, light, bare)
