"""Parametrises the example harness from a plan file: one test per (case, contract check).

``HARNESS_PLAN`` names a JSON file ``{"<case key>": ["<check id>", ...]}`` (the rehearsal writes it from
the selection); without it the harness runs nothing. ``HARNESS_SCENARIOS`` may name a JSON file that
overrides the built-in scenarios (``{"<case>": {"<check>": "pass" | "fail" | "error"}}``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# What the simulated agent does: every check passes except these. "fail" is a behaviour failure (an
# assertion), "error" an infrastructure failure (the sandbox fixture breaks in setup, a JUnit <error>).
SCENARIOS: dict[str, dict[str, str]] = {
    "budget-stop": {"spend-reported": "fail"},
    "heartbeat-resume": {"cleanup": "error"},
}


def _load(variable: str) -> dict[str, object]:
    path = os.environ.get(variable)
    if not path:
        return {}
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise pytest.UsageError(f"{variable} must name a JSON object")
    return document


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"case", "check"} <= set(metafunc.fixturenames):
        plan = _load("HARNESS_PLAN")
        pairs = [(case, check) for case, checks in plan.items() for check in checks]  # type: ignore[union-attr]
        metafunc.parametrize(("case", "check"), pairs, ids=[f"{case}/{check}" for case, check in pairs])


@pytest.fixture
def outcome(case: str, check: str) -> str:
    scenarios = {**SCENARIOS, **_load("HARNESS_SCENARIOS")}
    return str(scenarios.get(case, {}).get(check, "pass"))  # type: ignore[union-attr]


@pytest.fixture
def sandbox(outcome: str) -> None:
    """The environment a case runs in; an infrastructure failure breaks it before the check runs."""
    if outcome == "error":
        raise RuntimeError("the sandbox could not be cleaned up: a container is still running")
