"""Test plans: the standing ``testplan.json`` (Allure's format) and the TestOps job run plan, and the one
rule that binds either to the contract: every planned row matches a contract case on **both** its id and
its selector, no case is planned twice, and the plan is not empty.

The standing plan is untrusted input (a file in the workspace), so its parser is strict and total: any
byte string either yields rows or raises a :class:`Refusal` (property-tested).

Allure's format is ``{"version": "1.0", "tests": [{"id": "194", "selector": "pkg.Class.method"}]}``;
``id`` is the Allure id (a string of digits; a positive integer is accepted too), ``selector`` the full
name. Allure 3 may write rows with only a ``selector`` (results without an ``ALLURE_ID``); such a row
parses, and then matches only a contract case that has no ``testops-id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.contract import Case, Contract
from testops_evidence.errors import Refusal
from testops_evidence.safeio import loads_json, read_safe_path

PLAN_VERSION = "1.0"
STANDING_PLAN_LIMIT = 16 * 1024 * 1024
SELECTOR_MAX = 1000  # the contract's full-name cap
_ID_TEXT = re.compile(r"^[1-9][0-9]{0,17}\Z")
_ROW_KEYS = frozenset({"id", "selector"})


@dataclass(frozen=True)
class PlanRow:
    """One planned test: the TestOps/Allure id (``None`` when the row has none) and the selector."""

    id: int | None
    selector: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "selector": self.selector}


def _standing(message: str, where: str, expected: str, actual: Any) -> Refusal:
    return Refusal("selection.standing_plan", f"the standing plan is invalid: {message}", field=where,
                   expected=expected, actual=_short(actual))


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:197] + "..."
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, default=str)
        return text if len(text) <= 200 else text[:197] + "..."
    return value


def _plan_id(value: Any, where: str) -> int:
    # bool is an int subclass: `true` must not pass for id 1.
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**18:
        return value
    if isinstance(value, str) and _ID_TEXT.match(value):
        return int(value)
    raise _standing("an id is not a positive whole number", where, "a string of digits such as \"194\"", value)


def parse_standing_plan(data: bytes) -> tuple[PlanRow, ...]:
    """Parse ``testplan.json`` bytes. Refuses ``selection.standing_plan`` (shape) and
    ``selection.duplicate_case`` (an id or selector listed twice)."""
    try:
        document = loads_json(data)
    except ValueError as exc:  # strict JSON: also duplicate keys, NaN, integers outside 64 bits
        raise _standing(f"not valid JSON: {exc}", getattr(exc, "pointer", "/"), "a JSON object", None) from None
    if not isinstance(document, dict):
        raise _standing("the top level is not an object", "/", "an object", type(document).__name__)
    extra = sorted(set(document) - {"version", "tests"})
    if extra:
        raise _standing("unknown top-level keys", "/", "only version and tests", extra)
    if document.get("version") != PLAN_VERSION:
        raise _standing("the version is not 1.0", "/version", json.dumps(PLAN_VERSION), document.get("version"))
    tests = document.get("tests")
    if not isinstance(tests, list):
        raise _standing("tests is not a list", "/tests", "a list of {id, selector}", type(tests).__name__)
    rows: list[PlanRow] = []
    ids: dict[int, int] = {}
    selectors: dict[str, int] = {}
    for index, entry in enumerate(tests):
        where = f"/tests/{index}"
        if not isinstance(entry, dict):
            raise _standing("a test entry is not an object", where, "an object {id, selector}", entry)
        unknown = sorted(set(entry) - _ROW_KEYS)
        if unknown:
            raise _standing("a test entry has unknown keys", where, "only id and selector", unknown)
        if "id" not in entry and "selector" not in entry:
            raise _standing("a test entry has neither id nor selector", where, "id and selector", entry)
        plan_id = _plan_id(entry["id"], f"{where}/id") if "id" in entry else None
        selector = entry.get("selector")
        if "selector" in entry and not (isinstance(selector, str) and 0 < len(selector) <= SELECTOR_MAX):
            raise _standing("a selector is not a non-empty string", f"{where}/selector",
                            f"a string of 1..{SELECTOR_MAX} characters", selector)
        if plan_id is not None:
            if plan_id in ids:
                raise Refusal("selection.duplicate_case", f"the standing plan lists id {plan_id} twice "
                              f"(entries {ids[plan_id]} and {index})", field=f"{where}/id",
                              expected="each id once", actual=plan_id)
            ids[plan_id] = index
        if selector is not None:
            if selector in selectors:
                raise Refusal("selection.duplicate_case", f"the standing plan lists a selector twice (entries "
                              f"{selectors[selector]} and {index})", field=f"{where}/selector",
                              expected="each selector once", actual=_short(selector))
            selectors[selector] = index
        rows.append(PlanRow(plan_id, selector))
    return tuple(rows)


def read_standing_plan(path: str | Path, *, limit: int = STANDING_PLAN_LIMIT) -> tuple[PlanRow, ...]:
    """Read and parse a standing plan file (no links, size-capped)."""
    return parse_standing_plan(read_safe_path(path, limit=limit))


def parse_jobrun_plan(value: Any) -> tuple[PlanRow, ...]:
    """Rows of a TestOps job run's plan (``testops.api.job_run_plan``: a JSON array of ``{id, selector}``).

    A response of another shape is a remote failure (``testops.response_invalid``); a row whose id or
    selector is missing or of the wrong type is kept as ``None`` so that matching refuses it as a
    foreign case, naming the row.
    """
    if not isinstance(value, list):
        raise Refusal("testops.response_invalid", "the job run plan is not a JSON array", field="plan",
                      expected="[{id, selector}, ...]", actual=type(value).__name__)
    rows = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise Refusal("testops.response_invalid", f"job run plan row {index} is not an object",
                          field=f"plan/{index}", expected="{id, selector}", actual=_short(entry))
        raw_id = entry.get("id")
        plan_id: int | None = None
        if isinstance(raw_id, int) and not isinstance(raw_id, bool) and raw_id > 0:
            plan_id = raw_id
        elif isinstance(raw_id, str) and _ID_TEXT.match(raw_id):
            plan_id = int(raw_id)
        selector = entry.get("selector")
        rows.append(PlanRow(plan_id, selector if isinstance(selector, str) and selector else None))
    return tuple(rows)


def match_rows(rows: Sequence[PlanRow], contract: Contract, *, where: str = "plan") -> list[Case]:
    """The contract cases a plan selects, in plan order.

    Each row must name one contract case by selector (its ``full-name``) **and** by id (its
    ``testops-id``; ``None`` only matches a case without one): right id with a wrong selector, or the
    reverse, is ``selection.foreign_case``. A case planned twice is ``selection.duplicate_case``; an
    empty plan is ``selection.empty``.
    """
    by_selector = {case.full_name: case for case in contract.cases}
    by_id = {case.testops_id: case for case in contract.cases if case.testops_id is not None}
    seen: dict[str, int] = {}
    selected: list[Case] = []
    for index, row in enumerate(rows):
        case = by_selector.get(row.selector) if row.selector is not None else None
        if case is None or case.testops_id != row.id:
            raise _foreign(row, index, where, case, by_id.get(row.id) if row.id is not None else None)
        if case.key in seen:
            raise Refusal("selection.duplicate_case", f"case {case.key!r} is planned twice (rows {seen[case.key]} "
                          f"and {index})", field=f"{where}/{index}", expected="each case once",
                          actual=row.to_json())
        seen[case.key] = index
        selected.append(case)
    if not selected:
        raise Refusal("selection.empty", f"the {where} selects no case", field=where,
                      expected="at least one planned case", actual=[])
    return selected


def _foreign(row: PlanRow, index: int, where: str, by_selector: Case | None, by_id: Case | None) -> Refusal:
    if by_selector is not None:
        why = f"its selector names contract case {by_selector.key!r}, whose id is {by_selector.testops_id}"
        nearest: Case | None = by_selector
    elif by_id is not None:
        why = f"its id names contract case {by_id.key!r}, whose selector is {by_id.full_name!r}"
        nearest = by_id
    else:
        why = "it names no contract case by id or by selector"
        nearest = None
    expected: Any = ({"id": nearest.testops_id, "selector": nearest.full_name} if nearest is not None
                     else "a contract case's id and full-name")
    return Refusal("selection.foreign_case", f"{where} row {index} (id {row.id}, selector {_short(row.selector)!r}) "
                   f"is foreign: {why}", field=f"{where}/{index}", expected=expected, actual=row.to_json())


def rows_for_cases(cases: Iterable[Case]) -> tuple[PlanRow, ...]:
    return tuple(PlanRow(case.testops_id, case.full_name) for case in cases)


def plan_document(cases: Iterable[Case]) -> dict[str, Any]:
    """A standing plan (Allure format) for ``cases``; rows without an id omit it, as Allure 3 does."""
    tests: list[dict[str, Any]] = []
    for case in cases:
        entry: dict[str, Any] = {"selector": case.full_name}
        if case.testops_id is not None:
            entry = {"id": str(case.testops_id), **entry}
        tests.append(entry)
    return {"version": PLAN_VERSION, "tests": tests}
