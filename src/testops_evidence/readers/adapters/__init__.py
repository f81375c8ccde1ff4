"""Adapters: build a cell result from reports written by real test and evaluation frameworks.

The report formats read are declared in :mod:`formats` (JUnit XML, allure-results, Inspect AI logs,
promptfoo results, ...). Every parser reduces a report to a list of :class:`Outcome` (one per test case,
or per sample, epoch and scorer); :func:`build_cell` maps outcomes to the contract case's checks.

Mapping a test case to a check (first rule that matches wins):

1. an explicit marker: the JUnit property ``check`` (pytest: ``record_property("check", "<id>")``), or
   the Allure label ``check`` (``allure.label("check", "<id>")``) or an Allure parameter named ``check``;
2. the parametrisation id in brackets, ``test_check[tool-called]``, when it is a check id;
3. the test's name without a leading ``test_`` and with ``_`` read as ``-``: ``test_tool_called``.

A test whose ``case`` property/label names another case is ignored, so one report may hold many cases.
Tests that map to no check are ignored (and counted in the cell's message).

Per check: passed only when every mapped test ran and passed; errored when one errored (JUnit
``<error>`` or an error status, Allure ``broken``/``unknown``, a sample error or limit); else failed when
one failed; else *not recorded* when no mapped test ran, when **any mapped test did not run** (skipped,
disabled, not run, suppressed, an unknown status: see each parser — a test that did not run never makes a
check pass), or when a unit the report promised (an epoch of a sample, a repeat of a test) left no
outcome for it. A report that is incomplete as a whole (an eval that did not finish) turns
every check that would have passed into *not recorded*. The disposition is ``passed`` when every check
passed; ``infrastructure_failure`` when a check was not recorded, a test errored, or an
``infrastructure`` check failed; otherwise ``behavior_failure``.

Outcomes keep their unit and trial (``epoch 2`` of a sample), so repeated measurements stay separate
until the cell is built: today every trial must pass for the check to pass.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from testops_evidence.campaign.cells import CELL_SCHEMA, LATEST, TIME_RANGE, format_time
from testops_evidence.contract import Case
from testops_evidence.errors import Refusal

LATEST_MS = int(LATEST.timestamp() * 1000)

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
NOT_RUN = SKIPPED  # any test that did not run to a verdict: skipped, disabled, not run, suppressed, unknown
# A unit the report promised (an epoch, a repeat) that left no outcome for a check: never a pass.
MISSING = "missing"
MESSAGE_LIMIT = 500
CELL_MESSAGE_LIMIT = 4000  # the cell schema's maxLength of message
_PARAM = re.compile(r"\[([^\[\]]{1,200})\]\Z")


@dataclass(frozen=True)
class Outcome:
    """One test case of a report, reduced to what the mapping needs."""

    name: str
    status: str  # passed | failed | error | skipped
    message: str | None = None
    case: str | None = None  # an explicit case marker, if any
    checks: tuple[str, ...] = ()  # explicit check markers, if any
    start_ms: int | None = None
    stop_ms: int | None = None
    unit: str | None = None  # what was measured once: "sample 7 epoch 2", "test 3 repeat 1"
    trial: int | None = None  # the epoch or repeat number (1-based) of that unit


@dataclass
class _CheckState:
    statuses: list[str] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)  # (status, message)
    units: set[str] = field(default_factory=set)


def short_message(text: str | None) -> str | None:
    if not text:
        return None
    return _clip(" ".join(text.split()), MESSAGE_LIMIT)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def map_check(outcome: Outcome, check_ids: Iterable[str]) -> str | None:
    """The check a test case measures, by the documented rules; None if it maps to none."""
    ids = set(check_ids)
    for explicit in outcome.checks:
        if explicit in ids:
            return explicit
    if outcome.checks:
        return None  # an explicit marker naming no check of this case is not second-guessed
    param = _PARAM.search(outcome.name)
    if param and param.group(1) in ids:
        return param.group(1)
    base = _PARAM.sub("", outcome.name)
    base = base.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    candidate = base.removeprefix("test_").replace("_", "-").lower()
    return candidate if candidate in ids else None


def attempt_id_for(case_key: str, input_digests: Sequence[tuple[str, str]]) -> str:
    """A stable attempt id for adapted reports: the same case and reports give the same id (one report may
    hold several cases, so the case key is part of it)."""
    digest = hashlib.sha256(f"{case_key}\n".encode())
    for name, sha in sorted(input_digests):
        digest.update(f"{name}\0{sha}\n".encode())
    return "adapted-" + digest.hexdigest()[:32]


def build_cell(
    case: Case,
    outcomes: Sequence[Outcome],
    *,
    source_sha: str,
    profile: Mapping[str, str],
    inputs: Sequence[tuple[str, str]],
    selection_sha256: str,
    fallback_time: float,
    attempt_id: str | None = None,
    origin: str = "report",
    expected_units: Sequence[str] = (),
    incomplete: str | None = None,
    usage: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    items: str = "test(s)",
) -> dict[str, Any]:
    """A ``cell-result/v2`` document for ``case`` from report outcomes (see the module docstring).

    ``expected_units`` are the units of this case the report promised: a check that some unit measured
    but another did not is not recorded. ``incomplete`` says why the report as a whole cannot support
    a pass. ``usage`` and ``notes`` go to the cell's ``usage`` and ``message``."""
    states = {check_id: _CheckState() for check_id in case.checks}
    mapped = unmapped = 0
    starts: list[int] = []
    stops: list[int] = []
    for outcome in outcomes:
        if outcome.case is not None and outcome.case != case.key:
            continue
        check_id = map_check(outcome, case.checks)
        if check_id is None:
            unmapped += 1
            continue
        mapped += 1
        state = states[check_id]
        state.statuses.append(outcome.status)
        if outcome.unit is not None:
            state.units.add(outcome.unit)
        message = short_message(outcome.message)
        if message and outcome.status in (FAILED, ERROR, MISSING):
            state.messages.append((outcome.status, message))
        elif outcome.status == NOT_RUN:
            state.messages.append((NOT_RUN, short_message(f"{outcome.name}: {message or 'skipped'}") or "skipped"))
        if outcome.start_ms is not None:
            starts.append(outcome.start_ms)
        if outcome.stop_ms is not None:
            stops.append(outcome.stop_ms)

    checks: list[dict[str, Any]] = []
    not_recorded: list[str] = []
    errored: list[str] = []
    failed: list[str] = []
    for check_id, state in states.items():
        ran = [s for s in state.statuses if s not in (SKIPPED, MISSING)]
        # Only checks measured unit by unit (framework logs) are held to the units; a JUnit test has none.
        absent = [unit for unit in expected_units if unit not in state.units] if ran and state.units else []
        entry: dict[str, Any] = {"id": check_id, "passed": bool(ran) and all(s == PASSED for s in ran)
                                 and not absent and MISSING not in state.statuses and NOT_RUN not in state.statuses
                                 and incomplete is None}
        if not ran and NOT_RUN not in state.statuses:
            not_recorded.append(check_id)
            entry["message"] = "not recorded: no test case of the report ran for this check"
        elif not ran:
            not_recorded.append(check_id)
            entry["message"] = short_message(f"not recorded: {len(state.statuses)} of {len(state.statuses)} mapped "
                                             f"test(s) did not run ({_first(state, NOT_RUN, 'skipped')})")
        elif ERROR in ran:
            errored.append(check_id)
            entry["message"] = "error: " + _first(state, ERROR, "the test errored")
        elif FAILED in ran:
            failed.append(check_id)
            if state.messages:
                entry["message"] = "failed: " + _first(state, FAILED, state.messages[0][1])
        elif NOT_RUN in state.statuses:
            not_recorded.append(check_id)
            count = state.statuses.count(NOT_RUN)
            entry["message"] = short_message(f"not recorded: {count} of {len(state.statuses)} mapped test(s) did "
                                             f"not run ({_first(state, NOT_RUN, 'skipped')})")
        elif absent or MISSING in state.statuses:
            not_recorded.append(check_id)
            why = _first(state, MISSING, f"no outcome from {absent[0] if absent else 'a unit of the report'}")
            more = f" ({len(absent)} unit(s) without an outcome)" if len(absent) > 1 else ""
            entry["message"] = f"not recorded: {why}{more}"
        elif incomplete is not None:
            not_recorded.append(check_id)
            entry["message"] = f"not recorded: {short_message(incomplete)}"
        checks.append(entry)

    infra_failed = [c for c in failed if case.checks[c] == "infrastructure"]
    if not (not_recorded or errored or failed):
        disposition = "passed"
    elif not_recorded or errored or infra_failed:
        disposition = "infrastructure_failure"
    else:
        disposition = "behavior_failure"

    fallback_ms = int(fallback_time * 1000)
    start_ms = min(starts) if starts else fallback_ms
    stop_ms = max([*stops, start_ms]) if stops else start_ms
    if stop_ms > LATEST_MS:
        # A timestamp near the end of 9999 plus a long duration: no RFC 3339 time in UTC can say it.
        raise Refusal("export.adapter", "the report's times end after the last time evidence can hold",
                      field="time", expected=f"a time {TIME_RANGE}", actual=f"{stop_ms} ms since 1970")
    parts = [f"adapted from {origin}: {mapped} {items} mapped to {len(states)} check(s)"]
    for label, ids in (("failed", failed), ("errored", errored), ("not recorded", not_recorded)):
        if ids:
            parts.append(f"{label}: {', '.join(ids)}")
    if unmapped:
        parts.append(f"{unmapped} {items} mapped to no check")
    if incomplete is not None:
        parts.append(incomplete)
    parts.extend(notes)
    document: dict[str, Any] = {
        "schema": CELL_SCHEMA,
        "selection-sha256": selection_sha256,
        "case": case.key,
        "attempt-id": attempt_id or attempt_id_for(case.key, inputs),
        "disposition": disposition,
        "started-at": format_time(datetime.fromtimestamp(start_ms / 1000, UTC)),
        "finished-at": format_time(datetime.fromtimestamp(stop_ms / 1000, UTC)),
        "source-sha": source_sha,
        "profile": dict(profile),
        "checks": checks,
        "message": _clip("; ".join(parts), CELL_MESSAGE_LIMIT),
        "artifacts": [{"path": artifact_path(name), "sha256": sha} for name, sha in sorted(inputs)],
    }
    if usage:
        document["usage"] = dict(usage)
    return document


_UNLISTED = re.compile(r"[^A-Za-z0-9._-]")


def artifact_path(path: str) -> str:
    """A report's path as a cell's ``artifacts`` may hold it (components of ``[A-Za-z0-9._-]``): producers
    name files with spaces, ``#`` or ``+``, read as they are; the record keeps each other character as ``_``
    (the digest beside it says which file it was)."""
    return "/".join(_UNLISTED.sub("_", part)[:200] for part in path.split("/"))


def _first(state: _CheckState, status: str, default: str) -> str:
    """The message of the first outcome with ``status``, else ``default``."""
    return next((message for recorded, message in state.messages if recorded == status), default)
