"""What the evaluation-framework adapters (Inspect AI, promptfoo) share: the form a parsed log takes
before it becomes a cell, strict JSON for logs, times and usage with coverage.

A framework log measures *units* — a sample's epoch (Inspect), a test's repeat (promptfoo) — and each
unit yields outcomes per scorer or assertion. :class:`FrameworkRun` keeps them apart: the outcomes (each
naming its unit and trial), every unit the log promised per case (so a unit that left no outcome makes a
check *not recorded*), why the log as a whole cannot support a pass (an eval that did not finish), and
per-unit usage. Epochs and repeats stay separate trials here; :func:`build_cell` today requires every
trial to pass.

**A unit is never lost.** A unit the log promised and does not hold breaks every trial and case it could
belong to: its trial when its case and ordinal are known (a missing epoch of a sample that has others, a
missing prompt of a test that has others), and every case of the log in every trial when its case is not
(:attr:`FrameworkRun.lost`) — never a "trial 0" that belongs to no trial, never a case named after an id.

Usage is reported with its coverage: a counter is ``reported`` when every unit of the case recorded it,
``partial`` when some did, ``absent`` when none did. The cell's ``usage`` says so: a reported counter is
an integer, a partial one ``{"value": <sum of the units that recorded it>, "coverage": "partial"}`` (a
lower bound), an absent one ``{"coverage": "unavailable"}`` — never a zero.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from testops_evidence.contract import Case
from testops_evidence.errors import Refusal
from testops_evidence.readers import strictjson
from testops_evidence.readers.adapters import Outcome, build_cell

REPORTED, PARTIAL, ABSENT = "reported", "partial", "absent"
# Counters are non-negative integers below 2**53: what every JSON reader keeps exactly.
COUNTER_MAX = 2**53 - 1
_MIN_MS = 946_684_800_000  # 2000-01-01T00:00:00Z: an evaluation log older than this is not real
_MAX_MS = 7_258_118_400_000  # 2200-01-01T00:00:00Z
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
# A parsed JSON value costs up to ~80 bytes (`[{},{},...]` is 3 bytes an object), so the file size cap
# alone lets a 512 MiB log take 14 GB to read. Honest logs hold one value per ~18 bytes (Inspect, promptfoo):
# 8 million values is about 150 MB of log, and at most ~650 MB of memory however they are shaped.
MAX_VALUES = 8_000_000


@dataclass(frozen=True)
class Unit:
    """One measurement of one case: a sample's epoch, a test's repeat."""

    case: str
    name: str  # "sample 7 epoch 2": the Outcome.unit of its outcomes
    trial: int
    usage: Mapping[str, int | None] = field(default_factory=dict)  # counter -> value, None: not recorded


@dataclass(frozen=True)
class UsageReport:
    """Usage of one case: totals of the counters, and how many of its units recorded each."""

    totals: Mapping[str, int]
    reported: Mapping[str, int]
    units: int

    def coverage(self, counter: str) -> str:
        count = self.reported.get(counter, 0)
        if self.units and count == self.units:
            return REPORTED
        return PARTIAL if count else ABSENT

    def complete(self) -> dict[str, int]:
        """The counters every unit recorded."""
        return {name: min(value, COUNTER_MAX) for name, value in sorted(self.totals.items())
                if self.coverage(name) == REPORTED}

    def figures(self) -> dict[str, Any]:
        """The cell's ``usage``: every counter with its coverage (docs/evidence.md, "Usage and cost")."""
        out: dict[str, Any] = {}
        for name, value in sorted(self.totals.items()):
            coverage = self.coverage(name)
            if coverage == REPORTED:
                out[name] = min(value, COUNTER_MAX)
            elif coverage == PARTIAL:
                out[name] = {"value": min(value, COUNTER_MAX), "coverage": "partial"}
            else:
                out[name] = {"coverage": "unavailable"}
        return out

    def incomplete(self) -> list[str]:
        return sorted(name for name in self.totals if self.coverage(name) == PARTIAL)


@dataclass(frozen=True)
class FrameworkRun:
    """A parsed framework log, before it becomes a cell (see the module docstring)."""

    tool: str  # "Inspect AI log v2", "promptfoo results v3": for messages
    items: str  # what an outcome is, for messages: "score(s)", "assertion result(s)"
    outcomes: tuple[Outcome, ...]
    units: tuple[Unit, ...]
    incomplete: str | None = None
    notes: tuple[str, ...] = ()
    # A unit the log promised whose case it cannot name (an Inspect sample absent with every epoch, whose
    # case would have come from its own metadata; a promptfoo test absent with every prompt): it could have
    # measured any case, so no case of any log read with this one can pass.
    lost: str | None = None

    def expected_units(self, case: str) -> list[str]:
        return [unit.name for unit in self.units if unit.case == case]

    def usage(self, case: str) -> UsageReport:
        totals: dict[str, int] = {}
        reported: dict[str, int] = {}
        units = [unit for unit in self.units if unit.case == case]
        for unit in units:
            for name, value in unit.usage.items():
                if value is None:
                    totals.setdefault(name, 0)
                    continue
                totals[name] = totals.get(name, 0) + value
                reported[name] = reported.get(name, 0) + 1
        return UsageReport(totals, reported, len(units))

    def cases(self) -> set[str]:
        return {unit.case for unit in self.units}

    def trials(self, case: str) -> list[int]:
        """The epoch or repeat ordinals the log measured ``case`` in."""
        return sorted({unit.trial for unit in self.units if unit.case == case})

    def only_trial(self, case: str, trial: int) -> FrameworkRun:
        """The log as if it had measured ``case`` only in epoch (or repeat) ``trial``: the units and outcomes
        of its other ordinals are left out; other cases are untouched."""
        others = {unit.name for unit in self.units if unit.case == case and unit.trial != trial}
        return FrameworkRun(self.tool, self.items, tuple(o for o in self.outcomes if o.unit not in others),
                            tuple(u for u in self.units if u.name not in others), self.incomplete, self.notes,
                            self.lost)


def usage_note(report: UsageReport) -> list[str]:
    missing = report.incomplete()
    if not missing:
        return []
    return [f"usage not recorded by every unit, partial (a lower bound): {', '.join(missing)}"]


# --- strict JSON -----------------------------------------------------------------------------------------


def refuse(tool: str, source: str, message: str, *, expected: Any = None, actual: Any = None) -> Refusal:
    return Refusal("export.adapter", f"{tool} {source}: {message}", field=source, expected=expected, actual=actual)


def inconsistent(tool: str, source: str, message: str, *, expected: Any = None, actual: Any = None) -> Refusal:
    return Refusal("export.log_inconsistent", f"{tool} {source} contradicts itself: {message}", field=source,
                   expected=expected, actual=actual)


def check_version(version: Any, supported: Sequence[int], *, tool: str, source: str, field: str, what: str,
                  expected: str) -> None:
    """The format version first, before any schema: an unknown one is ``export.log_version``, naming it."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise refuse(tool, source, f"has no {what}", expected=expected,
                     actual=str(version)[:40] if version is not None else None)
    if version not in supported:
        raise Refusal("export.log_version", f"{tool} {source} has {what} {version}, which this release does not "
                      f"read (it reads version {', '.join(map(str, supported))})", field=f"{source}/{field}",
                      expected=list(supported), actual=version)


def value_bound(data: bytes) -> int:
    """An upper bound on the JSON values in ``data``, counted at C speed before it is parsed: a value is
    a container or follows a comma (commas and brackets inside strings only make the bound looser)."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def over_budget(tool: str, source: str, values: int, budget: int, advice: str = "") -> Refusal:
    return Refusal("export.log_budget", f"{tool} {source}: holds up to {values:,} JSON values, over the {budget:,}-value "
                   f"budget for reading a log{advice}", field=source, expected=f"<= {budget} values", actual=values)


def load_json(data: bytes, tool: str, source: str, *, constants: bool = False,
              max_values: int = MAX_VALUES, advice: str = "") -> Any:
    """JSON from a log through the project's strict reader (duplicate keys, integers past 64 bits, lone
    surrogates, ``NaN`` refused: ``export.adapter``). ``constants`` admits ``NaN`` and ``Infinity`` and
    nothing else beyond it: Inspect AI writes them on purpose for undefined metrics (its log model
    serialises non-finite floats as constants); they never count as a pass. A document that may hold
    more than ``max_values`` values is ``export.log_budget`` before it is parsed."""
    values = value_bound(data)
    if values > max_values:
        raise over_budget(tool, source, values, max_values, advice)
    return strictjson.load_document(data, f"{tool} {source}", "export.adapter", constants=constants)


# --- field readers ---------------------------------------------------------------------------------------


def time_ms(value: Any, tool: str, where: str) -> int | None:
    """An ISO 8601 time (with a zone) or epoch milliseconds as epoch ms; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise refuse(tool, where, "has a time that is not ISO 8601", expected="e.g. 2026-12-01T10:02:00+00:00",
                         actual=value[:60]) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)  # Inspect and promptfoo write UTC
        ms = int(parsed.timestamp() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise refuse(tool, where, "has a time that is neither a string nor an integer", actual=type(value).__name__)
    if not _MIN_MS <= ms <= _MAX_MS:
        raise refuse(tool, where, "has a time outside 2000-2200", expected="a time of a real run", actual=value)
    return ms


def counter(value: Any, tool: str, where: str) -> int | None:
    """A usage counter: a non-negative integer (or an integral float) up to 2**53; None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(tool, where, "has a usage counter that is not a number", actual=type(value).__name__)
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise refuse(tool, where, "has a usage counter that is not a whole number", actual=value)
    if not 0 <= value <= COUNTER_MAX:
        raise refuse(tool, where, "has a usage counter out of range", expected=f"0..{COUNTER_MAX}", actual=value)
    return int(value)


def dollars_to_nanodollars(value: Any, tool: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise refuse(tool, where, "has a cost that is not a finite number", actual=str(value)[:40])
    nanodollars = round(value * 1_000_000_000)
    if not 0 <= nanodollars <= COUNTER_MAX:
        raise refuse(tool, where, "has a cost out of range", expected="0..9,007,199 dollars", actual=value)
    return nanodollars


def seconds_to_ms(value: Any, tool: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise refuse(tool, where, "has a duration that is not a finite number", actual=str(value)[:40])
    if not 0 <= value <= 10**9:
        raise refuse(tool, where, "has a duration out of range", expected="0..1e9 seconds", actual=value)
    return round(value * 1000)


def artifact_name(path: str, default: str) -> str:
    """The input's file name as the cell's artifacts list may hold it (``[A-Za-z0-9._-]``)."""
    name = _SAFE_NAME.sub("_", path.replace("\\", "/").rsplit("/", 1)[-1])[:200].lstrip(".")
    return name or default


def framework_cell(case: Case, runs: Sequence[tuple[str, FrameworkRun]], outcomes: Sequence[Outcome] = (), *,
                   source_sha: str, profile: Mapping[str, str], inputs: Sequence[tuple[str, str]],
                   selection_sha256: str, fallback_time: float, attempt_id: str | None = None,
                   origin: str, trial: int | None = None) -> dict[str, Any]:
    """A ``cell-result/v2`` document for ``case`` from report outcomes (JUnit, allure-results) and the
    framework logs ``runs`` (source, run): every unit a log promised for the case must have measured every
    check it maps to, and usage goes in with its coverage. Logs of which none measured the case make every
    check not recorded.

    ``trial``: the cell of one trial of a case measured several times. When the log measured the case in
    several epochs (repeats), only that epoch's units count — **epochs are trials** (issue 16); a log of one
    epoch is the trial it was run for. A log without that epoch makes every check not recorded."""
    common: dict[str, Any] = {"source_sha": source_sha, "profile": profile, "inputs": inputs,
                              "selection_sha256": selection_sha256, "fallback_time": fallback_time,
                              "attempt_id": attempt_id, "origin": origin}
    if not runs:
        return build_cell(case, outcomes, **common)
    lost = [f"{source}: {other.lost}" for source, other in runs if other.lost]
    run = run_for_case(runs, case.key)
    if lost:
        # What a lost unit measured is unknown: every case of these logs stays unproven, in every trial.
        if run is None:
            return build_cell(case, outcomes, **common, incomplete="; ".join(lost))
        run = dataclasses.replace(run, incomplete="; ".join([*([run.incomplete] if run.incomplete else []), *lost]))
    if run is None:
        held = sorted({key for _, other in runs for key in other.cases()})
        shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
        why = (f"no sample or test of the evaluation log(s) belongs to case {case.key!r} "
               f"(they measured: {shown or 'nothing'})")
        return build_cell(case, outcomes, **common, incomplete=why)
    if trial is not None and len(run.trials(case.key)) > 1:
        if trial not in run.trials(case.key):
            why = (f"the log measured case {case.key!r} in epochs {', '.join(map(str, run.trials(case.key)))}, "
                   f"not in epoch {trial}")
            return build_cell(case, outcomes, **common, incomplete="; ".join([*filter(None, [run.incomplete]), why]))
        run = run.only_trial(case.key, trial)
    report = run.usage(case.key)
    return build_cell(case, [*outcomes, *run.outcomes], **common, expected_units=run.expected_units(case.key),
                      incomplete=run.incomplete, usage=report.figures(),
                      notes=[*run.notes, *usage_note(report)], items=run.items)


def run_for_case(runs: Sequence[tuple[str, FrameworkRun]], case: str) -> FrameworkRun | None:
    """The one run among several logs that measured ``case`` (None if none did). Two logs measuring one
    case (an eval and its retry, say) are refused: which one to publish is the operator's choice."""
    holding = [(source, run) for source, run in runs if case in run.cases()]
    if len(holding) > 1:
        raise Refusal("export.adapter", f"{holding[0][0]} and {holding[1][0]} both measure case {case!r}; pass "
                      "only the log to publish (an eval and its retry are two logs)", field=case,
                      expected="one evaluation log per case", actual=[source for source, _ in holding])
    return holding[0][1] if holding else None
