"""allure-results (``*-result.json`` as written by allure-pytest and the other Allure adapters) → outcomes.

Only result files are read; containers (fixtures) are not needed because Allure adapters already mark a
test ``broken`` when its fixture fails. Fail closed on everything that is not a finished run: ``skipped``
is *not run*, ``unknown`` and ``broken`` are errors, a result whose ``stage`` is anything but
``finished`` (``scheduled``, ``running``, ``pending``, ``interrupted``) did not run to a verdict. Statuses are
read as Allure Report 3's reader reads them (``packages/reader/src/allure2``, ``convertStatus``): in any case
(``PASSED``, ``Passed``), and a ``null``, absent or unknown status is ``unknown`` — an error, never a pass; a
status that is not a string is refused. A zero-byte result file holds no result, and Allure Report 3 shows
none: it is skipped, so it can only leave a check not recorded. Retries are folded as Allure Report folds them:
among results with the same ``historyId`` (else the same ``fullName`` and ``name``), the one that started last
counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import ERROR, FAILED, PASSED, SKIPPED, Outcome
from testops_evidence.safeio import parse_json_bytes

RESULT_LIMIT = 8 * 1024 * 1024
MAX_RESULTS = 50_000
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_STATUS = {"passed": PASSED, "failed": FAILED, "broken": ERROR, "unknown": ERROR, "skipped": SKIPPED}


def _refuse(source: str, message: str, actual: object = None) -> Refusal:
    return Refusal("export.adapter", f"allure result {source}: {message}", field=source,
                   expected="an Allure *-result.json object", actual=actual)


def _ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not (0 <= value <= _MAX_MS):
        return None
    return value


def _strings(items: Any, key: str, wanted: str) -> list[str]:
    """Values of ``{name, value}`` entries named ``wanted`` (labels, parameters)."""
    if not isinstance(items, list):
        return []
    found = []
    for item in items:
        if isinstance(item, Mapping) and item.get(key) == wanted and isinstance(item.get("value"), str):
            found.append(item["value"].strip().strip("'\""))  # allure-pytest stores parameters as repr()
    return found


def parse_result(data: bytes, source: str) -> tuple[str, Outcome]:
    """One ``*-result.json``: its retry-folding key and its outcome."""
    try:
        document = parse_json_bytes(data, source)
    except Refusal as exc:
        raise _refuse(source, exc.message) from None
    if not isinstance(document, dict):
        raise _refuse(source, "is not a JSON object", type(document).__name__)
    name = document.get("name")
    if not isinstance(name, str) or not name:
        raise _refuse(source, "has no name", name)
    raw_status = document.get("status")
    if raw_status is not None and not isinstance(raw_status, str):
        raise _refuse(source, "has a status that is not a string", type(raw_status).__name__)
    status = _STATUS.get((raw_status or "unknown").lower(), ERROR)
    details = document.get("statusDetails")
    message = details.get("message") if isinstance(details, Mapping) else None
    if raw_status is None or raw_status.lower() not in _STATUS:
        shown = "no status" if raw_status is None else f"status {raw_status[:40]!r}"
        message = f"{shown}, read as unknown" + (f": {message}" if isinstance(message, str) and message else "")
    stage = document.get("stage")
    if stage is not None and str(stage).lower() != "finished" and status in (PASSED, FAILED):
        status, message = SKIPPED, f"did not finish (stage={stage!r})"
    elif status == SKIPPED:
        message = f"skipped: {message}" if isinstance(message, str) and message else "skipped"
    labels = document.get("labels")
    parameters = document.get("parameters")
    cases = _strings(labels, "name", "case") or _strings(parameters, "name", "case")
    checks = _strings(labels, "name", "check") or _strings(parameters, "name", "check")
    start, stop = _ms(document.get("start")), _ms(document.get("stop"))
    if start is not None and stop is not None and stop < start:
        stop = start
    history = document.get("historyId")
    full_name = document.get("fullName")
    fold = history if isinstance(history, str) and history else f"{full_name}\0{name}"
    outcome = Outcome(
        name=name,
        status=status,
        message=message if isinstance(message, str) else None,
        case=cases[0] if cases else None,
        checks=tuple(checks),
        start_ms=start,
        stop_ms=stop if stop is not None else start,
    )
    return fold, outcome


def parse_results(files: Iterable[tuple[str, bytes]]) -> list[Outcome]:
    """Outcomes of a set of result files, retries folded (the latest start wins)."""
    latest: dict[str, Outcome] = {}
    for count, (source, data) in enumerate(files, start=1):
        if count > MAX_RESULTS:
            raise _refuse(source, f"more than {MAX_RESULTS} result files", count)
        if not data:
            continue  # no result in it (Allure Report 3 shows none): its checks stay not recorded
        fold, outcome = parse_result(data, source)
        kept = latest.get(fold)
        if kept is None or (outcome.start_ms or -1) >= (kept.start_ms or -1):
            latest[fold] = outcome
    return list(latest.values())
