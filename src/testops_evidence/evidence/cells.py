"""Cell results (``testops-evidence/cell-result/v1``): load, validate, bind to the selection, judge.

A cell result is what one worker measured for one case and attempt. Export trusts none of it until:

* it matches the JSON Schema (``export.cell_invalid``),
* its case is selected, its ``source-sha`` is the selection's head SHA, its profile is the selection's
  profile and its ``run-attempt``, if it names one, fits the selection's (``export.cell_binding``),
* its checks are exactly the contract case's checks, each once (``export.check_binding``),
* it is the only cell of its case (``export.duplicate_cell``) — except under ``run-attempts: any``, where
  the attempt that finished last is chosen and the others are recorded as superseded.

:func:`verdict` then turns a bound cell (or its absence) into an Allure status; a cell that says
``passed`` without complete passing evidence is refused (``export.unsupported_pass``), never published.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testops_evidence.contract import Case, validate_document
from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, parse_json_bytes, read_safe, sha256_bytes

CELL_SCHEMA = "testops-evidence/cell-result/v1"
CELL_LIMIT = 4 * 1024 * 1024
# Usage counters that may reach published evidence. Anything else a harness reports stays in the cell
# file (which the worker keeps) and is not copied into TestOps: an allow-list, because a harness might
# put something sensitive into a counter name.
USAGE_ALLOWED: tuple[str, ...] = (
    "agent-turns",
    "tool-calls",
    "input-tokens",
    "output-tokens",
    "cache-read-tokens",
    "cache-write-tokens",
    "cost-nanodollars",
    "duration-ms",
)


def parse_time(text: str, where: str = "time") -> datetime:
    """An RFC 3339 time as an aware UTC datetime (the schema has already checked the shape)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise Refusal("export.cell_invalid", f"{where} is not a valid time", field=where,
                      expected="an RFC 3339 time such as 2026-12-01T10:02:00Z", actual=text) from None
    if value.tzinfo is None:
        raise Refusal("export.cell_invalid", f"{where} has no time zone", field=where,
                      expected="a time ending in Z or ±hh:mm", actual=text)
    return value.astimezone(UTC)


def epoch_ms(text: str) -> int:
    return int(parse_time(text).timestamp() * 1000)


def format_time(value: datetime) -> str:
    """Millisecond RFC 3339 UTC, the form adapters write."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class CellResult:
    """A schema-valid cell result and where it came from."""

    document: Mapping[str, Any]
    sha256: str  # digest of the bytes read (adapted cells: of their canonical JSON)
    source: str  # path below the cell-results directory, for messages and the receipt
    origin: str = "cell"  # cell | junit | allure-results
    inputs: tuple[tuple[str, str], ...] = ()  # adapted cells: (path, sha256) of the reports read

    @property
    def key(self) -> str:
        return str(self.document["case"])

    @property
    def attempt_id(self) -> str:
        return str(self.document["attempt-id"])

    @property
    def disposition(self) -> str:
        return str(self.document["disposition"])

    @property
    def started(self) -> datetime:
        return parse_time(self.document["started-at"], "started-at")

    @property
    def finished(self) -> datetime:
        return parse_time(self.document["finished-at"], "finished-at")

    def checks(self) -> dict[str, Mapping[str, Any]]:
        return {str(c["id"]): c for c in self.document["checks"]}

    def usage(self) -> dict[str, int]:
        raw = self.document.get("usage") or {}
        return {k: int(raw[k]) for k in USAGE_ALLOWED if k in raw}

    def summary_row(self) -> dict[str, Any]:
        """What the receipt and the evidence record about a cell (no free text from the harness)."""
        row: dict[str, Any] = {
            "attempt-id": self.attempt_id,
            "finished-at": self.document["finished-at"],
            "origin": self.origin,
            "sha256": self.sha256,
            "source": self.source,
        }
        if "run-attempt" in self.document:
            row["run-attempt"] = self.document["run-attempt"]
        return row


def validate_cell(document: Any, source: str, *, sha256: str, origin: str = "cell",
                  inputs: Iterable[tuple[str, str]] = ()) -> CellResult:
    """Schema and self-consistency checks that need no selection."""
    validate_document("cell-result", document, "export.cell_invalid", f"cell result {source}")
    started = parse_time(document["started-at"], "started-at")
    finished = parse_time(document["finished-at"], "finished-at")
    if finished < started:
        raise Refusal("export.cell_invalid", f"cell result {source} finished before it started",
                      field="finished-at", expected=f">= {document['started-at']}", actual=document["finished-at"])
    return CellResult(document, sha256, source, origin, tuple(inputs))


def cell_from_bytes(data: bytes, source: str) -> CellResult:
    document = parse_json_bytes(data, f"cell result {source}")
    if not isinstance(document, dict) or document.get("schema") != CELL_SCHEMA:
        raise Refusal("export.cell_invalid", f"{source} is not a {CELL_SCHEMA} document", field="/schema",
                      expected=CELL_SCHEMA, actual=document.get("schema") if isinstance(document, dict) else None)
    return validate_cell(document, source, sha256=sha256_bytes(data))


def load_cell(root: str | Path, relpath: str) -> CellResult:
    return cell_from_bytes(read_safe(root, relpath, limit=CELL_LIMIT), relpath)


def adapted_cell(document: dict[str, Any], source: str, inputs: Iterable[tuple[str, str]], origin: str) -> CellResult:
    """A cell an adapter built from reports: its digest covers its canonical JSON."""
    return validate_cell(document, source, sha256=sha256_bytes(canonical_json(document)), origin=origin,
                         inputs=inputs)


# --- binding ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundCell:
    """The cell chosen for a case, and the attempts it superseded (``run-attempts: any``)."""

    cell: CellResult
    superseded: tuple[CellResult, ...] = field(default_factory=tuple)


def check_binding(cell: CellResult, case: Case) -> None:
    """The cell's checks must be exactly the contract case's checks, each once."""
    ids = [str(c["id"]) for c in cell.document["checks"]]
    seen: set[str] = set()
    for check_id in ids:
        if check_id in seen:
            raise Refusal("export.check_binding", f"cell {cell.source} lists check {check_id!r} twice",
                          field=f"{case.key}/checks", expected="each contract check once", actual=check_id)
        seen.add(check_id)
    expected = set(case.checks)
    if seen != expected:
        unknown = sorted(seen - expected)
        missing = sorted(expected - seen)
        detail = "; ".join(part for part in (
            f"not in the contract: {', '.join(unknown)}" if unknown else "",
            f"missing: {', '.join(missing)}" if missing else "") if part)
        raise Refusal("export.check_binding", f"cell {cell.source} checks differ from contract case "
                      f"{case.key!r} ({detail})", field=f"{case.key}/checks", expected=sorted(expected),
                      actual=sorted(seen))


def bind_cells(
    cells: Sequence[CellResult],
    *,
    selected: Sequence[Case],
    head_sha: str,
    profile: Mapping[str, str],
    run_attempts: str = "first-only",
    run_attempt: int | None = None,
) -> dict[str, BoundCell]:
    """Bind every cell to the selection; return the chosen cell per selected case key.

    ``run_attempt`` is the selection's run attempt. A cell that names its own ``run-attempt`` must have been
    measured in it (``first-only``) or in it or an earlier attempt of the run (``any``): a later attempt
    cannot have fed an export bound to this one, so such a cell was carried over from elsewhere.
    """
    by_key = {case.key: case for case in selected}
    grouped: dict[str, list[CellResult]] = {}
    attempts: dict[str, str] = {}
    for cell in cells:
        case = by_key.get(cell.key)
        if case is None:
            raise Refusal("export.cell_binding", f"cell {cell.source} is for case {cell.key!r}, which this "
                          "selection does not select", field="case", expected="a selected case key",
                          actual=cell.key)
        if cell.document["source-sha"] != head_sha:
            raise Refusal("export.cell_binding", f"cell {cell.source} measured another commit",
                          field=f"{cell.key}/source-sha", expected=head_sha, actual=cell.document["source-sha"])
        if dict(cell.document["profile"]) != dict(profile):
            raise Refusal("export.cell_binding", f"cell {cell.source} evaluated another profile",
                          field=f"{cell.key}/profile", expected=dict(profile), actual=dict(cell.document["profile"]))
        if run_attempt is not None and "run-attempt" in cell.document:
            measured = cell.document["run-attempt"]
            admitted = measured == run_attempt if run_attempts != "any" else measured <= run_attempt
            if not admitted:
                raise Refusal("export.cell_binding", f"cell {cell.source} was measured in run attempt {measured}, "
                              f"but the selection is of attempt {run_attempt} (run-attempts: {run_attempts})",
                              field=f"{cell.key}/run-attempt",
                              expected=run_attempt if run_attempts != "any" else f"<= {run_attempt}", actual=measured)
        check_binding(cell, case)
        if cell.attempt_id in attempts:
            raise Refusal("export.duplicate_cell", f"cells {attempts[cell.attempt_id]} and {cell.source} share "
                          f"the attempt id {cell.attempt_id!r}", field="attempt-id", expected="unique attempt ids",
                          actual=cell.attempt_id)
        attempts[cell.attempt_id] = cell.source
        grouped.setdefault(cell.key, []).append(cell)

    bound: dict[str, BoundCell] = {}
    for key, group in grouped.items():
        if len(group) == 1:
            bound[key] = BoundCell(group[0])
            continue
        sources = sorted(c.source for c in group)
        if run_attempts != "any":
            raise Refusal("export.duplicate_cell", f"case {key!r} has {len(group)} cell results; the trust policy "
                          "admits one attempt per case (run-attempts: first-only)", field=f"{key}",
                          expected="one cell result", actual=sources)
        ordered = sorted(group, key=lambda c: c.finished)
        latest, runner_up = ordered[-1], ordered[-2]
        if latest.finished == runner_up.finished:
            raise Refusal("export.duplicate_cell", f"case {key!r} has two attempts that finished at the same time; "
                          "the latest attempt is ambiguous", field=f"{key}/finished-at",
                          expected="one latest attempt", actual=sorted([latest.source, runner_up.source]))
        bound[key] = BoundCell(latest, tuple(ordered[:-1]))
    return bound


# --- verdict -----------------------------------------------------------------------------------------

NOT_RECORDED = "not_recorded"
INFRASTRUCTURE = "infrastructure_failure"
BEHAVIOR = "behavior_failure"
PASSED = "passed"


@dataclass(frozen=True)
class Verdict:
    status: str  # passed | failed | broken
    reason: str  # passed | behavior_failure | infrastructure_failure | not_recorded
    message: str | None  # statusDetails.message (None when passed)
    failed_checks: tuple[str, ...] = ()


def verdict(bound: BoundCell | None, case: Case) -> Verdict:
    """The Allure status of a selected case, with a specific message per reason."""
    if bound is None:
        return Verdict("broken", NOT_RECORDED,
                       f"Not recorded: no cell result for the selected case {case.key!r} reached the export, "
                       "so it is not verified by this run.")
    cell = bound.cell
    checks = cell.checks()
    failed = tuple(check_id for check_id in case.checks if not checks[check_id]["passed"])
    if cell.disposition == PASSED:
        if failed:
            raise Refusal("export.unsupported_pass", f"cell {cell.source} says passed, but checks failed: "
                          f"{', '.join(failed)}", field=f"{case.key}/checks", expected="every check passed",
                          actual=list(failed))
        return Verdict("passed", PASSED, None)
    failed_infra = tuple(c for c in failed if case.checks[c] == "infrastructure")
    failed_behavior = tuple(c for c in failed if case.checks[c] == "behavior")
    if cell.disposition == INFRASTRUCTURE:
        named = f" (failed infrastructure checks: {', '.join(failed_infra)})" if failed_infra else ""
        return Verdict("broken", INFRASTRUCTURE,
                       f"Infrastructure failure{named}: the harness could not evaluate the behaviour of "
                       f"{case.key!r}; attempt {cell.attempt_id}.", failed)
    if failed_behavior or failed_infra:
        return Verdict("failed", BEHAVIOR,
                       f"Behaviour failure: checks failed: {', '.join(failed)} (attempt {cell.attempt_id}).", failed)
    return Verdict("failed", BEHAVIOR,
                   f"Behaviour failure reported by the harness although every check passed "
                   f"(attempt {cell.attempt_id}).", failed)
