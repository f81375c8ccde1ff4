"""One case's admitted cells -> its Allure results, their evidence attachments and its receipt row (pure).

Both ways of publishing a campaign project through here: ``export`` (every case at once, after the matrix)
and ``stream`` (each case as soon as the worker that ran it has ended). Nothing here reads or writes a
file: :func:`project_case` returns the files' names and bytes, in the order they are to be written (a
result's evidence attachment before the result; a repeated case's trials before its verdict, which is the
result a reader and TestOps see as the case's), and the row the export receipt keeps for the case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence.campaign import usage
from testops_evidence.campaign.cells import BoundCell, Verdict
from testops_evidence.campaign.matrix import Unit
from testops_evidence.campaign.trials import CaseOutcome
from testops_evidence.contract import Case
from testops_evidence.publication import allure
from testops_evidence.safeio import canonical_json, sha256_bytes


@dataclass(frozen=True)
class Projected:
    """One case projected: ``files`` as (name, bytes) in write order, and the case's receipt row."""

    files: tuple[tuple[str, bytes], ...]
    row: dict[str, Any]


def usage_row(figures: Mapping[str, usage.Figure]) -> dict[str, Any]:
    return {name: figure.to_cell_json() for name, figure in figures.items()}


def cell_fields(bound: BoundCell | None, decision: Verdict) -> dict[str, Any]:
    """What a receipt row says about the cell behind a result (a case measured once, or one trial)."""
    return {
        "status": decision.status,
        "reason": decision.reason,
        "attempt-id": bound.cell.attempt_id if bound is not None and bound.cell is not None else None,
        "superseded": [c.attempt_id for c in bound.superseded] if bound is not None else [],
        **({"code": decision.code} if decision.code is not None else {}),
    }


def _project_one(files: list[tuple[str, bytes]], new_uuid: Callable[[], str], binding: allure.Binding, case: Case,
                 decision: Verdict, bound: BoundCell | None, now_ms: int, *, trial: int | None = None,
                 outcome: CaseOutcome | None = None, trials: dict[str, Any] | None = None,
                 figures: Mapping[str, usage.Figure] | None = None) -> dict[str, Any]:
    """One result and its evidence attachment (a case measured once, a trial, or — ``outcome`` — a verdict),
    appended to ``files``; returns the receipt's file fields for it."""
    uuid = new_uuid()
    # Compact canonical JSON, as Allure's own writers produce: json's C encoder only runs without
    # indentation, and this is the hot loop of a 10,000-case export.
    evidence = canonical_json(allure.evidence_document(binding, case, decision, bound, trial=trial, trials=trials))
    evidence_sha = sha256_bytes(evidence)
    if outcome is not None:
        result = allure.verdict_result_document(uuid, binding, outcome, evidence_sha256=evidence_sha, now_ms=now_ms,
                                                usage=figures)
    else:
        result = allure.result_document(uuid, binding, case, decision, bound, evidence_sha256=evidence_sha,
                                        now_ms=now_ms, trial=trial, usage=figures)
    result_bytes = canonical_json(result)
    result_name, attachment_name = f"{uuid}{allure.RESULT_SUFFIX}", f"{uuid}{allure.ATTACHMENT_SUFFIX}"
    files.append((attachment_name, evidence))
    files.append((result_name, result_bytes))
    return {"uuid": uuid, "history-id": result["historyId"], "test-case-id": result["testCaseId"],
            "result-file": result_name, "result-sha256": sha256_bytes(result_bytes),
            "attachment-file": attachment_name, "attachment-sha256": evidence_sha}


def project_case(binding: allure.Binding, outcome: CaseOutcome, accounts: usage.Accounts, now_ms: int,
                 new_uuid: Callable[[], str], owners: Mapping[Unit, str]) -> Projected:
    """The case of ``outcome`` as Allure results and its export-receipt row. ``accounts`` must hold the case's
    (and each of its trials') usage figures; ``owners`` names the worker job of each (case, trial) it knows."""
    case = outcome.case
    files: list[tuple[str, bytes]] = []
    if outcome.repeated:
        trials = []
        for trial in outcome.trials:
            figures = accounts.trials[(case.key, trial.trial)]
            written = _project_one(files, new_uuid, binding, case, trial.verdict, trial.bound, now_ms,
                                   trial=trial.trial, figures=figures)
            trials.append({"trial": trial.trial, **written, **cell_fields(trial.bound, trial.verdict),
                           "usage": usage_row(figures),
                           **({"worker": owners[(case.key, trial.trial)]}
                              if (case.key, trial.trial) in owners else {})})
        summary_rows = [{"trial": t["trial"], "uuid": t["uuid"], "status": t["status"],
                         "reason": t["reason"], "attempt-id": t["attempt-id"],
                         "evidence-sha256": t["attachment-sha256"]} for t in trials]
        trials_part = {"count": case.trials.count, "verdict": case.trials.verdict_json(),
                       "pass-rate": outcome.rate_row(), "trials": summary_rows}
        written = _project_one(files, new_uuid, binding, case, outcome.verdict, None, now_ms, outcome=outcome,
                               trials=trials_part, figures=accounts.cases[case.key])
        row_extra: dict[str, Any] = {
            "attempt-id": None, "superseded": [],
            "policy": {"count": case.trials.count, "verdict": case.trials.verdict_json()},
            "pass-rate": outcome.rate_row(), "trials": trials,
            **({"code": outcome.verdict.code} if outcome.verdict.code is not None else {})}
    else:
        only = outcome.trials[0]
        written = _project_one(files, new_uuid, binding, case, outcome.verdict, only.bound, now_ms,
                               figures=accounts.cases[case.key])
        row_extra = cell_fields(only.bound, outcome.verdict)
        if (case.key, 1) in owners:
            row_extra["worker"] = owners[(case.key, 1)]
    row = {
        "key": case.key,
        "testops-id": case.testops_id,
        "full-name": case.full_name,
        "title": case.title,
        **written,
        "status": outcome.verdict.status,
        "reason": outcome.verdict.reason,
        **row_extra,
        "usage": usage_row(accounts.cases[case.key]),
    }
    return Projected(tuple(files), row)
