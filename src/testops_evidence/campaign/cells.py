"""Cell results (``testops-evidence/cell-result/v2``): read, attribute, admit, bind, judge.

A cell result is what one worker measured for one case and attempt. Export trusts none of it. Every
cell file is first **attributed** to one case — by its path where the layout fixes it (a per-case
directory; ``<case>.json`` in a worker's artifact), else by the ``case`` it names — and then **admitted**
in two tiers (docs/errors.md, column "in export"):

* *Its origin* (scope ``export``): the case must be selected (``export.foreign_cell``), the cell must
  carry this selection's digest (``export.cell_selection``: a cell of another run, attempt or campaign is a
  replay), it must come from the worker the matrix plan assigned the case to (``export.cell_origin``),
  and a case has one cell (``export.duplicate_cell``). A failure here is a tampering signal: a worker may
  be trying to change another case's verdict, so the whole export is refused.
* *Its content* (scope ``case``): the schema version (``export.cell_version``), the schema and times
  (``export.cell_invalid``), commit, profile and run attempt (``export.cell_binding``), exactly the
  contract case's checks (``export.check_binding``), and no ``passed`` without every check passed
  (``export.unsupported_pass``). A cell that passed the first tier can only be wrong about its own case:
  its case is exported **broken** with the code, and every other case is still exported.

Under ``run-attempts: any`` a case may have several attempts: the one that finished last is chosen and the
others are recorded as superseded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from testops_evidence.campaign.usage import Figure, cell_figures
from testops_evidence.contract import Case, validate_document
from testops_evidence.errors import SCOPE_CASE, Refusal, lookup
from testops_evidence.safeio import canonical_json, parse_json_bytes, read_safe, sha256_bytes

CELL_SCHEMA = "testops-evidence/cell-result/v2"
# The retired version: still the format of a remote cell (``import``), refused by export with a migration hint.
CELL_SCHEMA_V1 = "testops-evidence/cell-result/v1"
CASE_KEY_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
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


# Evidence times: from the Unix epoch (Allure and TestOps count milliseconds from it) to the last instant
# Python's datetime can hold in UTC. 9999-12-31T23:59:59-23:59 is a valid RFC 3339 text whose UTC instant
# is in the year 10000, and 0001-01-01T00:00:00+23:59 one in the year 0: both overflowed far from here.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TIME_RANGE = "between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"


def in_time_range(value: datetime) -> datetime | None:
    """``value`` (aware) as UTC when it is an instant evidence can hold, else None."""
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return utc if EARLIEST <= utc <= LATEST else None


def parse_time(text: str, where: str = "time", code: str = "export.cell_invalid") -> datetime:
    """An RFC 3339 time as an aware UTC datetime (the schema has already checked the shape), refused
    with ``code`` when it is not one, has no offset, or is outside :data:`TIME_RANGE`."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise Refusal(code, f"{where} is not a valid time", field=where,
                      expected="an RFC 3339 time such as 2026-12-01T10:02:00Z", actual=text) from None
    if value.tzinfo is None:
        raise Refusal(code, f"{where} has no time zone", field=where,
                      expected="a time ending in Z or ±hh:mm", actual=text)
    utc = in_time_range(value)
    if utc is None:
        raise Refusal(code, f"{where} is outside the times evidence can hold", field=where,
                      expected=f"a time {TIME_RANGE}", actual=text)
    return utc


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
    origin: str = "cell"  # cell | junit | allure-results | ... | remote
    inputs: tuple[tuple[str, str], ...] = ()  # adapted cells: (path, sha256) of the reports read
    worker: str | None = None  # the worker job whose artifact held it (per-job layout)
    # A remote cell (origin "remote"): its import record as the ledger holds it — source run, artifact and
    # document digests from the Actions API, never from the archive.
    provenance: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        return str(self.document["case"])

    @property
    def attempt_id(self) -> str:
        return str(self.document["attempt-id"])

    @property
    def trial(self) -> int:
        """The trial ordinal the cell measured (1 when the cell names none: a case measured once)."""
        return int(self.document.get("trial", 1))

    @property
    def disposition(self) -> str:
        return str(self.document["disposition"])

    @cached_property
    def started(self) -> datetime:
        return parse_time(self.document["started-at"], "started-at")

    @cached_property
    def finished(self) -> datetime:
        return parse_time(self.document["finished-at"], "finished-at")

    def checks(self) -> dict[str, Mapping[str, Any]]:
        """The cell's checks by id (the caller must not change the mapping)."""
        return self._checks

    @cached_property
    def _checks(self) -> dict[str, Mapping[str, Any]]:
        return {str(c["id"]): c for c in self.document["checks"]}

    def usage(self) -> dict[str, Figure]:
        """The allow-listed usage counters the cell reports, each with its coverage (the caller must not change
        the mapping)."""
        return self._usage

    @cached_property
    def _usage(self) -> dict[str, Figure]:
        return cell_figures(self.document, USAGE_ALLOWED)

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
        if "trial" in self.document:
            row["trial"] = self.document["trial"]
        if self.worker is not None:
            row["worker"] = self.worker
        if self.provenance is not None:
            row["remote"] = dict(self.provenance)
        return row


def validate_cell(document: Any, source: str, *, sha256: str, origin: str = "cell",
                  inputs: Iterable[tuple[str, str]] = (), schema: str = "cell-result",
                  worker: str | None = None) -> CellResult:
    """Schema and self-consistency checks that need no selection (``schema``: ``cell-result-v1`` for the
    cell inside a remote result)."""
    validate_document(schema, document, "export.cell_invalid", f"cell result {source}")
    cell = CellResult(document, sha256, source, origin, tuple(inputs), worker)
    started = cell.started  # first: a bad start time is the refusal a cell meets first
    if cell.finished < started:
        raise Refusal("export.cell_invalid", f"cell result {source} finished before it started",
                      field="finished-at", expected=f">= {document['started-at']}", actual=document["finished-at"])
    return cell


def check_version(document: Any, source: str) -> None:
    """A cell result of the current version, or a refusal that says how to migrate from v1."""
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema == CELL_SCHEMA:
        return
    if schema == CELL_SCHEMA_V1:
        raise Refusal("export.cell_version", f"{source} is a {CELL_SCHEMA_V1} document, which is no longer "
                      f"accepted: a v1 cell names no selection, so a cell saved from another run would pass "
                      f"for this one", field="/schema", expected=CELL_SCHEMA, actual=schema)
    raise Refusal("export.cell_invalid", f"{source} is not a {CELL_SCHEMA} document", field="/schema",
                  expected=CELL_SCHEMA, actual=schema if isinstance(schema, str) else None)


def _json(data: bytes, source: str) -> Any:
    try:
        return parse_json_bytes(data, f"cell result {source}")
    except Refusal as refusal:
        raise Refusal("export.cell_invalid", refusal.message, field=source, expected="UTF-8 JSON",
                      actual=f"{len(data)} bytes") from None


def cell_from_bytes(data: bytes, source: str, *, worker: str | None = None) -> CellResult:
    """A schema-valid cell of the current version (no selection binding yet: see :func:`admit`)."""
    document = _json(data, source)
    check_version(document, source)
    return validate_cell(document, source, sha256=sha256_bytes(data), worker=worker)


def load_cell(root: str | Path, relpath: str) -> CellResult:
    return cell_from_bytes(read_safe(root, relpath, limit=CELL_LIMIT), relpath)


def adapted_cell(document: dict[str, Any], source: str, inputs: Iterable[tuple[str, str]], origin: str,
                 *, worker: str | None = None) -> CellResult:
    """A cell an adapter built from reports: its digest covers its canonical JSON."""
    return validate_cell(document, source, sha256=sha256_bytes(canonical_json(document)), origin=origin,
                         inputs=inputs, worker=worker)


# --- attribution and admission ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CellFile:
    """One candidate read from the cell-results directory, before anything about it is trusted.

    Exactly one of ``data`` (the bytes of a ``*.json`` cell file), ``adapted`` (a cell an adapter built from
    a case's reports) and ``failure`` (the refusal adapting that case's reports ended in) is set.
    """

    source: str  # path below the cell-results directory
    case: str | None = None  # the case its path attributes it to; None: only its content names one
    worker: str | None = None  # the worker job whose artifact held it; None: one trust domain
    data: bytes | None = None
    adapted: CellResult | None = None
    failure: Refusal | None = None
    remote: bool = False  # a remote cell from the ledger (``adapted``): bound by its import, not by a worker


@dataclass(frozen=True)
class RejectedCell:
    """A cell that could only be wrong about its own case: the case is exported broken with this refusal."""

    case: str
    source: str
    refusal: Refusal
    worker: str | None = None
    sha256: str | None = None
    trial: int = 1

    def summary_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"source": self.source, "code": self.refusal.code}
        if self.sha256 is not None:
            row["sha256"] = self.sha256
        if self.worker is not None:
            row["worker"] = self.worker
        return row


@dataclass(frozen=True)
class BoundCell:
    """What a case's cells came to: the chosen cell and the attempts it superseded (``run-attempts: any``),
    or the rejection that makes the case broken."""

    cell: CellResult | None
    superseded: tuple[CellResult, ...] = field(default_factory=tuple)
    rejected: RejectedCell | None = None


@dataclass(frozen=True)
class Binding:
    """What every cell is bound to: the selection (digest, commit, profile, attempt and cases), the trust
    policy's run-attempts rule, and, with per-worker artifacts, which worker job owns each case."""

    selection_sha256: str
    head_sha: str
    profile: Mapping[str, str]
    selected: Sequence[Case]
    run_attempts: str = "first-only"
    run_attempt: int | None = None
    # (case key, trial) -> worker job; None: the cells are one trust domain
    owners: Mapping[tuple[str, int], str] | None = None
    remote: frozenset[str] = frozenset()  # cases another workflow measures: cells only from the ledger


def is_case_scoped(refusal: Refusal) -> bool:
    """Whether a refusal met in a cell makes only its case broken (errors.REGISTRY scope ``case``)."""
    return lookup(refusal.code).scope == SCOPE_CASE


def _claimed_case(document: Any) -> str | None:
    case = document.get("case") if isinstance(document, dict) else None
    return case if isinstance(case, str) and CASE_KEY_RE.fullmatch(case) else None


def _claimed_trial(document: Any) -> int | None:
    """The trial a cell names: 1 when it names none; None when its ``trial`` is not an ordinal."""
    if not isinstance(document, dict) or "trial" not in document:
        return 1
    trial = document["trial"]
    return trial if isinstance(trial, int) and not isinstance(trial, bool) and trial >= 1 else None


Unit = tuple[str, int]  # (case key, trial ordinal)


def _attribute(item: CellFile, document: Any, binding: Binding, by_key: Mapping[str, Case]) -> Unit:
    """The (case, trial) a cell file speaks for, and the proof that its origin may speak for it (scope
    ``export``)."""
    claimed = _claimed_case(document) if item.adapted is None else item.adapted.key
    key = item.case if item.case is not None else claimed
    if key is None:
        raise Refusal("export.unattributed", f"{item.source} cannot be attributed to a case: it is not a JSON "
                      "object naming its case, and its path names none", field=item.source,
                      expected="a cell result naming a selected case", actual=None)
    if item.case is not None and claimed is not None and claimed != item.case:
        raise Refusal("export.cell_origin", f"{item.source} is where the cell of case {item.case!r} belongs, but "
                      f"it holds a cell for {claimed!r}", field=item.source, expected=item.case, actual=claimed)
    if key not in by_key:
        raise Refusal("export.foreign_cell", f"cell {item.source} is for case {key!r}, which this selection does "
                      "not select", field="case", expected="a selected case key", actual=key)
    trials = by_key[key].trials.count
    trial = item.adapted.trial if item.adapted is not None else _claimed_trial(document)
    if trial is None:
        # Not an ordinal (the schema check will say so): the cell can only speak for a trial its worker owns,
        # and then only to make that trial broken.
        owned = [n for n in range(1, trials + 1)
                 if binding.owners is None or binding.owners.get((key, n)) == item.worker]
        trial = owned[0] if owned else 1
    if trial > trials:
        raise Refusal("export.foreign_cell", f"cell {item.source} is for trial {trial} of case {key!r}, which the "
                      f"contract measures {trials} time(s)", field=f"{key}/trial", expected=f"1..{trials}",
                      actual=trial)
    unit = (key, trial)
    if (key in binding.remote) != item.remote:
        where = "the ledger (export's ledger input)" if key in binding.remote else "a worker job of this run"
        raise Refusal("export.cell_origin", f"cell {item.source} for case {key!r} did not come from {where}: the "
                      f"contract says the case is measured by {'another workflow' if key in binding.remote else 'its workers'}",
                      field=f"{key}/measured-by", expected="remote" if key in binding.remote else "worker",
                      actual="worker" if key in binding.remote else "remote")
    if not item.remote and binding.owners is not None and binding.owners.get(unit) != item.worker:
        what = f"case {key!r}" if trials == 1 else f"trial {trial} of case {key!r}"
        raise Refusal("export.cell_origin", f"cell {item.source} for {what} arrived in the artifact of "
                      f"worker job {item.worker!r}, but the matrix plan assigned it to "
                      f"{binding.owners.get(unit)!r}", field=f"{key}/worker", expected=binding.owners.get(unit),
                      actual=item.worker,
                      hint=None if trials == 1 else "A cell of a case measured several times must name its "
                      "`trial` (TESTOPS_EVIDENCE_TRIAL): a cell without one is trial 1.")
    claimed_selection = document.get("selection-sha256") if isinstance(document, dict) else None
    if isinstance(claimed_selection, str) and claimed_selection != binding.selection_sha256:
        raise Refusal("export.cell_selection", f"cell {item.source} for case {key!r} was made for another "
                      "selection (another run, attempt or campaign): it is not evidence of this run",
                      field=f"{key}/selection-sha256", expected=binding.selection_sha256, actual=claimed_selection)
    return unit


def _content(item: CellFile, document: Any, case: Case, binding: Binding) -> CellResult:
    """The cell's own content, checked (scope ``case``)."""
    if item.failure is not None:
        raise item.failure
    if item.adapted is not None:
        cell = item.adapted
    else:
        assert item.data is not None
        if document is None:
            raise Refusal("export.cell_invalid", f"{item.source} is not a JSON object", field=item.source,
                          expected="a cell-result/v2 JSON object", actual=None)
        check_version(document, item.source)
        cell = validate_cell(document, item.source, sha256=sha256_bytes(item.data), worker=item.worker)
    key = case.key
    if cell.document["source-sha"] != binding.head_sha:
        raise Refusal("export.cell_binding", f"cell {cell.source} measured another commit",
                      field=f"{key}/source-sha", expected=binding.head_sha, actual=cell.document["source-sha"])
    if dict(cell.document["profile"]) != dict(binding.profile):
        raise Refusal("export.cell_binding", f"cell {cell.source} evaluated another profile",
                      field=f"{key}/profile", expected=dict(binding.profile), actual=dict(cell.document["profile"]))
    if binding.run_attempt is not None and "run-attempt" in cell.document:
        measured = cell.document["run-attempt"]
        policy = binding.run_attempts
        admitted = measured == binding.run_attempt if policy != "any" else measured <= binding.run_attempt
        if not admitted:
            raise Refusal("export.cell_binding", f"cell {cell.source} was measured in run attempt {measured}, "
                          f"but the selection is of attempt {binding.run_attempt} (run-attempts: {policy})",
                          field=f"{key}/run-attempt",
                          expected=binding.run_attempt if policy != "any" else f"<= {binding.run_attempt}",
                          actual=measured)
    check_binding(cell, case)
    failed_checks(cell, case)  # export.unsupported_pass (the verdict itself is made once, by case_outcome)
    return cell


def _parsed(data: bytes, source: str) -> Any:
    """The JSON document, or None when the bytes are not one (attribution then needs the path)."""
    try:
        return _json(data, source)
    except Refusal:
        return None


def admit(files: Sequence[CellFile], binding: Binding) -> dict[Unit, BoundCell]:
    """Attribute and admit every cell file; return what each selected (case, trial)'s cells came to.

    Raises the refusal of the first file whose origin is in doubt (scope ``export``). A file that passed
    that tier but whose content is wrong makes only its trial broken (``BoundCell.rejected``).
    """
    by_key = {case.key: case for case in binding.selected}
    accepted: dict[Unit, list[CellResult]] = {}
    rejected: dict[Unit, list[RejectedCell]] = {}
    attempts: dict[str, str] = {}
    for item in files:
        document = _parsed(item.data, item.source) if item.data is not None else None
        unit = _attribute(item, document, binding, by_key)
        key, trial = unit
        try:
            cell = _content(item, document, by_key[key], binding)
        except Refusal as refusal:
            if not is_case_scoped(refusal):
                raise
            digest = sha256_bytes(item.data) if item.data is not None else None
            rejected.setdefault(unit, []).append(RejectedCell(key, item.source, refusal.detached(), item.worker,
                                                              digest, trial))
            continue
        if cell.attempt_id in attempts:
            raise Refusal("export.duplicate_cell", f"cells {attempts[cell.attempt_id]} and {cell.source} share "
                          f"the attempt id {cell.attempt_id!r}", field="attempt-id", expected="unique attempt ids",
                          actual=cell.attempt_id)
        attempts[cell.attempt_id] = cell.source
        accepted.setdefault(unit, []).append(cell)

    bound: dict[Unit, BoundCell] = {}
    for case in binding.selected:
        for trial in range(1, case.trials.count + 1):
            unit = (case.key, trial)
            good, bad = accepted.get(unit, []), rejected.get(unit, [])
            if not good and not bad:
                continue
            if len(good) == 1 and not bad:  # the common case: one cell, admitted
                bound[unit] = BoundCell(good[0])
                continue
            what = f"case {case.key!r}" if case.trials.count == 1 else f"trial {trial} of case {case.key!r}"
            if len(good) + len(bad) > 1 and binding.run_attempts != "any":
                sources = sorted([c.source for c in good] + [r.source for r in bad])
                raise Refusal("export.duplicate_cell", f"{what} has {len(sources)} cell results; the trust "
                              "policy admits one attempt per case (run-attempts: first-only)", field=case.key,
                              expected="one cell result", actual=sources)
            if bad:
                # Fail closed: an attempt whose content cannot be judged is never outranked by another attempt.
                bound[unit] = BoundCell(None, (), bad[0])
                continue
            ordered = sorted(good, key=lambda c: c.finished)
            latest, runner_up = ordered[-1], ordered[-2]
            if latest.finished == runner_up.finished:
                raise Refusal("export.duplicate_cell", f"{what} has two attempts that finished at the same time; "
                              "the latest attempt is ambiguous", field=f"{case.key}/finished-at",
                              expected="one latest attempt", actual=sorted([latest.source, runner_up.source]))
            bound[unit] = BoundCell(latest, tuple(ordered[:-1]))
    return bound


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


# --- verdict -----------------------------------------------------------------------------------------

NOT_RECORDED = "not_recorded"
INFRASTRUCTURE = "infrastructure_failure"
BEHAVIOR = "behavior_failure"
INVALID = "invalid_cell"
PASSED = "passed"


@dataclass(frozen=True)
class Verdict:
    status: str  # passed | failed | broken
    reason: str  # passed | behavior_failure | infrastructure_failure | not_recorded | invalid_cell
    message: str | None  # statusDetails.message (None when passed)
    failed_checks: tuple[str, ...] = ()
    code: str | None = None  # invalid_cell: the refusal that made the case broken


def failed_checks(cell: CellResult, case: Case) -> tuple[str, ...]:
    """The contract checks the cell failed, in contract order; a cell that says passed with any of them failed is
    refused (``export.unsupported_pass``)."""
    checks = cell.checks()
    failed = tuple(check_id for check_id in case.checks if not checks[check_id]["passed"])
    if failed and cell.disposition == PASSED:
        raise Refusal("export.unsupported_pass", f"cell {cell.source} says passed, but checks failed: "
                      f"{', '.join(failed)}", field=f"{case.key}/checks", expected="every check passed",
                      actual=list(failed))
    return failed


def verdict(bound: BoundCell | None, case: Case, trial: int | None = None) -> Verdict:
    """The Allure status of a selected case (or of one of its trials), with a specific message per reason."""
    what = f"trial {trial} of {case.trials.count} of the selected case" if trial is not None else "the selected case"
    if bound is None or (bound.cell is None and bound.rejected is None):
        return Verdict("broken", NOT_RECORDED,
                       f"Not recorded: no cell result for {what} {case.key!r} reached the export, "
                       "so it is not verified by this run.")
    if bound.rejected is not None:
        refusal = bound.rejected.refusal
        scope = "The case" if trial is None else "The trial"
        return Verdict("broken", INVALID,
                       f"Invalid cell result ({refusal.code}): {refusal.message}. {scope} is not verified by "
                       "this run; every other case is exported as measured.", code=refusal.code)
    cell = bound.cell
    assert cell is not None
    failed = failed_checks(cell, case)
    if cell.disposition == PASSED:
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
