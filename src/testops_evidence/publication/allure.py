"""The Allure projection: one ``<uuid>-result.json`` and one evidence attachment per selected case,
plus ``executor.json`` and ``environment.properties``. Pure functions; the export phase writes the bytes.

Identities are derived, never taken from display strings:

* ``testCaseId`` = SHA-256 of ``testops-evidence/test-case`` + campaign + case key (first 32 hex): the
  same case of the same campaign, whatever the profile;
* ``historyId`` = the same over campaign + case key + profile id: the same case evaluated with the same
  profile, so Allure's history and retries never mix profiles;
* the ``ALLURE_ID`` label (and ``AS_ID`` for older servers) binds the result to the TestOps test case.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from testops_evidence import md
from testops_evidence.campaign.cells import BoundCell, CellResult, Verdict
from testops_evidence.campaign.trials import CaseOutcome, percent
from testops_evidence.campaign.usage import COST, Figure
from testops_evidence.contract import Case

FRAMEWORK = "testops-evidence"
EVIDENCE_SCHEMA = "testops-evidence/evidence/v1"
ATTACHMENT_NAME = "testops-evidence binding"
RESULT_SUFFIX = "-result.json"
ATTACHMENT_SUFFIX = "-attachment.json"


def _identity(*parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8"))
    return digest.hexdigest()[:32]


def derive_test_case_id(campaign: str, key: str) -> str:
    return _identity("testops-evidence/test-case", campaign, key)


def derive_history_id(campaign: str, key: str, profile_id: str) -> str:
    return _identity("testops-evidence/history", campaign, key, profile_id)


@dataclass(frozen=True)
class Binding:
    """What every result of one export is bound to: the selection and the run it was made in."""

    campaign: str
    selection_sha256: str
    contract_sha256: str
    backend: str
    context: Mapping[str, Any]  # the selection's run context (RunContext.to_json())
    testops: Mapping[str, Any] | None
    profile: Mapping[str, str]

    # The run's fields are the same for every result of an export: each is made once.
    @cached_property
    def server_url(self) -> str:
        return str(self.context["server-url"]).rstrip("/")

    @property
    def repository(self) -> str:
        return str(self.context["repository"])

    @property
    def head_sha(self) -> str:
        return str(self.context["head-sha"])

    @cached_property
    def run_url(self) -> str:
        return str(self.context["run-url"])

    @cached_property
    def commit_url(self) -> str:
        return f"{self.server_url}/{self.repository}/commit/{self.head_sha}"

    @cached_property
    def profile_items(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.profile.items()))

    @cached_property
    def label_values(self) -> tuple[str, str, str]:
        """The host of a cell that names none, the thread's prefix and the profile tag: the same for every result."""
        return ("local" if self.local else "github-actions",
                f"{self.context.get('run-id')}.{self.context.get('run-attempt')}/", f"profile:{self.profile.get('id')}")

    @property
    def local(self) -> bool:
        return bool(self.context.get("local", False))

    @cached_property
    def markdown(self) -> tuple[str, str, str]:
        """The campaign, the profile and the run line of every result's description, rendered once per export."""
        profile = md.text(", ".join(f"{k}={v}" for k, v in self.profile_items))
        return md.text(self.campaign), profile, self.run_line

    @cached_property
    def run_line(self) -> str:
        """Where the commit was evaluated: a link to the Actions run, or, for a local rehearsal (which has no
        run on GitHub), the words "a local run" and no link to invent."""
        if self.local:
            return f"Evaluated commit {md.code(self.head_sha)} in a local run (no GitHub Actions run to link)."
        return f"Evaluated commit {md.code(self.head_sha)} in run {md.link(md.code(self.run_url), self.run_url)}."

    @cached_property
    def links(self) -> tuple[dict[str, str], ...]:
        """The result's links to the run and the commit; none for a local run, whose run and (maybe unpushed)
        commit have no page on GitHub."""
        if self.local:
            return ()
        return ({"name": "CI run", "type": "link", "url": self.run_url},
                {"name": "Evaluated commit", "type": "link", "url": self.commit_url})

    def context_row(self) -> dict[str, Any]:
        """The run-context fields bound into evidence and receipts."""
        return dict(self._context_row)

    @cached_property
    def _context_row(self) -> dict[str, Any]:
        keys = ("branch", "event", "head-sha", "local", "repository", "run-attempt", "run-id", "run-number", "run-url",
                "server-url", "workflow-path", "workflow-ref")  # in canonical order (see result_document)
        return {k: self.context[k] for k in keys if k in self.context}


def evidence_document(binding: Binding, case: Case, verdict: Verdict, bound: BoundCell | None, *,
                      trial: int | None = None, trials: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The evidence attachment: binds one result to the selection, the run and the cell it came from.

    For a case measured several times, a trial's evidence names its ``trial`` ordinal; the case's verdict
    result has no cell of its own and carries ``trials`` instead: the policy, the pass rate and one row per
    trial (its result uuid, status and evidence digest)."""
    cell_part: dict[str, Any] | None = None
    rejected: dict[str, Any] | None = None
    if bound is not None and bound.rejected is not None:
        rejected = {**bound.rejected.summary_row(), "message": bound.rejected.refusal.message}
    if bound is not None and bound.cell is not None:
        cell = bound.cell
        reported = cell.checks()
        cell_part = {
            **cell.summary_row(),
            "started-at": cell.document["started-at"],
            "disposition": cell.disposition,
            "source-sha": cell.document["source-sha"],
            "checks": [{"id": c, "kind": case.checks[c], "passed": bool(reported[c]["passed"])}
                       for c in case.checks],
            # Values as integers; the coverage of every counter beside them.
            "usage": {name: figure.value for name, figure in cell.usage().items() if figure.value is not None},
            "usage-coverage": {name: figure.coverage for name, figure in cell.usage().items()},
            "artifacts": list(cell.document.get("artifacts", [])),
            "inputs": [{"path": p, "sha256": s} for p, s in cell.inputs],
        }
    # Keys in canonical order (see _result).
    document: dict[str, Any] = {
        "backend": binding.backend,
        "campaign": binding.campaign,
        "case": case.row(),
        "cell": cell_part,
        "context": binding.context_row(),
        "contract-sha256": binding.contract_sha256,
        "profile": dict(binding.profile),
        "reason": verdict.reason,
        "recorded": cell_part is not None,
        "rejected-cell": rejected,
        "schema": EVIDENCE_SCHEMA,
        "selection-sha256": binding.selection_sha256,
        "status": verdict.status,
        "superseded": [c.summary_row() for c in bound.superseded] if bound is not None else [],
        "testops": dict(binding.testops) if binding.testops is not None else None,
    }
    if trial is not None:
        document["trial"] = trial
    if trials is not None:
        document["trials"] = dict(trials)
    if verdict.code is not None:
        document["code"] = verdict.code
    return document


def _labels(binding: Binding, case: Case, cell: CellResult | None,
            usage: Mapping[str, Figure] | None = None) -> list[dict[str, str]]:
    labels: list[dict[str, str]] = []
    if case.testops_id is not None:
        # ALLURE_ID is the current name; AS_ID is what older TestOps servers and the prior art read.
        labels += [{"name": "ALLURE_ID", "value": str(case.testops_id)},
                   {"name": "AS_ID", "value": str(case.testops_id)}]
    host = cell.document.get("host") if cell is not None else None
    no_host, thread, profile_tag = binding.label_values
    labels += [
        {"name": "parentSuite", "value": binding.campaign},
        {"name": "suite", "value": f"{case.lane} lane"},
        {"name": "framework", "value": FRAMEWORK},
        {"name": "host", "value": str(host) if host else no_host},
        {"name": "thread", "value": f"{thread}{case.key}"},
        {"name": "tag", "value": binding.campaign},
        {"name": "tag", "value": profile_tag},
        {"name": "tag", "value": f"lane:{case.lane}"},
    ]
    if binding.local:
        labels.append({"name": "tag", "value": "rehearsal"})
    if cell is not None and cell.provenance is not None:
        labels.append({"name": "remote-run",
                       "value": f"{cell.provenance['source-repository']}#{cell.provenance['source-run-id']}"})
    cost = (usage or {}).get(COST)
    if cost is not None:
        # What this result cost and how sure that figure is: an unavailable cost is never a zero.
        labels += [{"name": "cost-nanodollars", "value": "unavailable" if cost.value is None else str(cost.value)},
                   {"name": "cost-coverage", "value": cost.coverage}]
    return labels


def _parameters(binding: Binding, cell: CellResult | None, evidence_sha256: str,
                trial: str | None = None) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [{"name": f"profile.{key}", "value": value} for key, value in binding.profile_items]
    params.append({"name": "source sha", "value": binding.head_sha})
    # Excluded parameters do not change historyId: they identify this attempt (and trial) and its evidence,
    # and let a reader find the result's entry in the launch-level evidence bundle that upload sends to
    # TestOps. A trial must keep the case's history id: that is what makes it one of the case's retries.
    if trial is not None:
        params.append({"excluded": True, "name": "trial", "value": trial})
    params.append({"excluded": True, "name": "attempt",
                   "value": cell.attempt_id if cell is not None else "not recorded"})
    params.append({"excluded": True, "name": "evidence sha256", "value": evidence_sha256})
    return params


def _description(binding: Binding, case: Case, cell: CellResult | None, superseded: int,
                 trial: int | None = None) -> str:
    # Markdown (Allure and TestOps render it): every value from a contract, a run or a worker goes through md.
    campaign, profile, run_line = binding.markdown
    lines = [f"Campaign **{campaign}**, case {md.code(case.key)} ({_few_text(case.lane)} lane), profile {profile}.",
             run_line]
    if trial is not None:
        lines.append(f"Trial {trial} of {case.trials.count}: one measurement of the case. The case's result is "
                     f"its verdict over all trials (policy {_few_text(case.trials.policy())}); this trial is shown "
                     "among its retries.")
    if cell is not None:
        lines.append(f"Attempt {md.code(cell.attempt_id)} ({_few_text(cell.origin)}, cell sha256 "
                     f"{md.code(cell.sha256)}).")
        if cell.provenance is not None:
            lines.append(_remote_line(binding, cell.provenance))
        if superseded:
            lines.append(f"{superseded} earlier attempt(s) superseded; see the evidence attachment.")
    if binding.local:
        lines.append("Local rehearsal: this evidence can never be published to TestOps.")
    return "\n\n".join(lines)


@lru_cache(maxsize=256)
def _few_text(value: str) -> str:
    """:func:`md.text` of a value of few distinct values (a lane, an origin, a trial policy), rendered once each
    rather than once per result."""
    return md.text(value)


def remote_run_url(binding: Binding, provenance: Mapping[str, Any]) -> str:
    return f"{binding.server_url}/{provenance['source-repository']}/actions/runs/{provenance['source-run-id']}"


def _remote_line(binding: Binding, provenance: Mapping[str, Any]) -> str:
    run = md.link(md.code(f"run {provenance['source-run-id']}"), remote_run_url(binding, provenance))
    return (f"Measured remotely by {run} (attempt "
            f"{md.text(provenance['source-run-attempt'])}) of {md.code(provenance['source-repository'])}, workflow "
            f"{md.code(provenance['source-workflow'])} at {md.code(provenance['source-ref'])}; artifact "
            f"{md.code(provenance['source-artifact-name'])} (id {md.text(provenance['source-artifact-id'])}, archive "
            f"sha256 {md.code(provenance['archive-sha256'])}); imported as {md.code(provenance['import-key'])} "
            f"(measurement {md.code(provenance['measurement-key'])}).")


def _steps(case: Case, cell: CellResult | None, start: int, stop: int) -> list[dict[str, Any]]:
    """One step per contract check of a case, in contract order."""
    steps = []
    checks = cell.checks() if cell is not None else {}
    for check_id, kind in case.checks.items():
        check = checks.get(check_id)
        details: dict[str, Any] = {}  # allure-js-commons types statusDetails as required; {} says "none"
        if check is None:
            status = "skipped"
            details = {"message": "not recorded"}
        elif check["passed"]:
            status = "passed"
        else:
            status = "broken" if kind == "infrastructure" else "failed"
        if check is not None and check.get("message"):
            details = {"message": str(check["message"])}
        steps.append({"attachments": [], "name": f"{check_id} ({kind})", "parameters": [], "stage": "finished",
                      "start": start, "status": status, "statusDetails": details, "steps": [], "stop": stop})
    return steps


def result_document(
    uuid: str,
    binding: Binding,
    case: Case,
    verdict: Verdict,
    bound: BoundCell | None,
    *,
    evidence_sha256: str,
    now_ms: int,
    trial: int | None = None,
    usage: Mapping[str, Figure] | None = None,
) -> dict[str, Any]:
    """One Allure result (the Allure 2 results format, read by Allure Report 2/3 and TestOps): a case measured
    once, or one ``trial`` of a case measured several times."""
    # A rejected cell (bound.rejected) is shown as nothing measured; its evidence names the refusal.
    cell = bound.cell if bound is not None else None
    superseded = len(bound.superseded) if bound is not None else 0
    start, stop = result_times(bound, now_ms)
    links = [
        *binding.links,
        *([{"name": "Remote run", "type": "link", "url": remote_run_url(binding, cell.provenance)}]
          if cell is not None and cell.provenance is not None else []),
    ]
    return _result(uuid, binding, case, verdict.status, verdict.message,
                   _description(binding, case, cell, superseded, trial), start, stop,
                   labels=_labels(binding, case, cell, usage),
                   parameters=_parameters(binding, cell, evidence_sha256,
                                          None if trial is None else f"{trial} of {case.trials.count}"),
                   links=links, steps=_steps(case, cell, start, stop))


def _result(uuid: str, binding: Binding, case: Case, status: str, message: str | None, description: str, start: int,
            stop: int, *, labels: list[dict[str, str]], parameters: list[dict[str, Any]],
            links: list[dict[str, str]], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A result document. ``historyId`` and ``testCaseId`` are what make it one of its case's: the ids Allure and
    TestOps group results by (a trial and its case's verdict share them)."""
    result: dict[str, Any] = {
        "attachments": [{"name": ATTACHMENT_NAME, "source": f"{uuid}{ATTACHMENT_SUFFIX}", "type": "application/json"}],
        "description": description,
        "fullName": case.full_name,
        "historyId": derive_history_id(binding.campaign, case.key, str(binding.profile.get("id"))),
        "labels": labels,
        "links": links,
        "name": case.title,
        "parameters": parameters,
        "stage": "finished",
        "start": start,
        "status": status,
        # Required by allure-js-commons' model (Executable.statusDetails), so present on a passed result too,
        # as {}: what allure-js-commons' own factory writes when there is nothing to say.
        "statusDetails": {"message": message} if message is not None else {},
        "steps": steps,
        "stop": stop,
        "testCaseId": derive_test_case_id(binding.campaign, case.key),
        "uuid": uuid,
    }
    return result


def result_times(bound: BoundCell | None, now_ms: int) -> tuple[int, int]:
    """A result's start and stop: its cell's times, or the export time for a case or trial not recorded."""
    cell = bound.cell if bound is not None else None
    if cell is None:
        return now_ms, now_ms
    return int(cell.started.timestamp() * 1000), int(cell.finished.timestamp() * 1000)  # = epoch_ms of each


def verdict_result_document(
    uuid: str,
    binding: Binding,
    outcome: CaseOutcome,
    *,
    evidence_sha256: str,
    now_ms: int,
    usage: Mapping[str, Figure] | None = None,
) -> dict[str, Any]:
    """The result of a case measured several times: its verdict under the policy, one step per trial.

    It shares the trials' ``historyId`` and starts after every one of them: Allure Report and TestOps fold
    results of one test in a launch into the one that started last and show the others as its retries, so
    the case reads as its verdict and each trial is one retry. The start is the export time — when the
    verdict was made — or, should a cell claim a later start, one millisecond after the latest trial's start
    (a trial must never outrank the verdict by a clock it controls).
    """
    case, verdict = outcome.case, outcome.verdict
    latest = max(result_times(t.bound, now_ms)[0] for t in outcome.trials)
    start = stop = max(now_ms, latest + 1)
    interval = outcome.interval
    rate = outcome.pass_rate
    rate_value = "no trial measured the behaviour" if rate is None or interval is None else (
        f"{percent(rate)} (95% Wilson interval {percent(interval[0])}–{percent(interval[1])})")
    steps = []
    for trial in outcome.trials:
        cell = trial.bound.cell if trial.bound is not None else None
        t_start, t_stop = result_times(trial.bound, now_ms)
        step: dict[str, Any] = {
            "attachments": [],
            "name": f"trial {trial.trial} of {case.trials.count}"
                    + (f" (attempt {cell.attempt_id})" if cell is not None else ""),
            "parameters": [], "stage": "finished", "start": t_start, "status": trial.verdict.status,
            "statusDetails": {"message": trial.verdict.message} if trial.verdict.message is not None else {},
            "steps": _steps(case, cell, t_start, t_stop), "stop": t_stop}
        steps.append(step)
    params: list[dict[str, Any]] = [{"name": f"profile.{key}", "value": value} for key, value in binding.profile_items]
    params += [
        {"name": "source sha", "value": binding.head_sha},
        {"excluded": True, "name": "trials", "value": f"{outcome.count('passed')} of {case.trials.count} passed"},
        {"excluded": True, "name": "verdict policy", "value": case.trials.policy()},
        {"excluded": True, "name": "pass rate", "value": rate_value},
        {"excluded": True, "name": "evidence sha256", "value": evidence_sha256},
    ]
    profile = md.text(", ".join(f"{k}={v}" for k, v in sorted(binding.profile.items())))
    description = "\n\n".join([
        f"Campaign **{md.text(binding.campaign)}**, case {md.code(case.key)} ({md.text(case.lane)} lane), "
        f"profile {profile}.",
        binding.run_line,
        f"Measured {case.trials.count} times; verdict policy {md.text(case.trials.policy())} (at least "
        f"{case.trials.required} passed trials). {md.text(outcome.rate_text())}. Each trial is one retry of this "
        "result, with its own evidence.",
    ])
    links = list(binding.links)
    return _result(uuid, binding, case, verdict.status, verdict.message, description, start, stop,
                   labels=_labels(binding, case, None, usage), parameters=params, links=links, steps=steps)


def executor_document(binding: Binding) -> dict[str, Any]:
    run_number = binding.context.get("run-number")
    if binding.local:  # no run on GitHub: nothing to link
        return {"name": "testops-evidence rehearsal", "type": "local", "buildOrder": run_number,
                "buildName": f"{binding.campaign} #{run_number} (local run)", "reportName": binding.campaign}
    return {
        "name": "GitHub Actions",
        "type": "github",
        "url": binding.server_url,
        "buildOrder": run_number,
        "buildName": f"{binding.campaign} #{run_number}",
        "buildUrl": binding.run_url,
        "reportName": binding.campaign,
    }


def escape_property(text: str, *, key: bool) -> str:
    """Java ``Properties.store`` escaping: ``\\``, separators, comment marks, controls, non-ASCII as ``\\uXXXX``."""
    out = []
    for index, char in enumerate(text):
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif char == " " and (key or index == 0):
            out.append("\\ ")
        elif code < 0x20 or code > 0x7E:
            # Properties files are ISO-8859-1; everything else (astral characters as surrogate pairs) is escaped.
            encoded = char.encode("utf-16-be")
            for offset in range(0, len(encoded), 2):
                out.append(f"\\u{int.from_bytes(encoded[offset:offset + 2], 'big'):04x}")
        else:
            out.append(char)
    return "".join(out)


def environment_properties(binding: Binding, usage: Mapping[str, Figure] | None = None) -> bytes:
    """The environment widget: the binding, and the campaign's usage totals with their coverage."""
    rows: list[tuple[str, str]] = [
        ("campaign", binding.campaign),
        *((f"profile.{k}", v) for k, v in sorted(binding.profile.items())),
        ("source.sha", binding.head_sha),
        ("repository", binding.repository),
        ("backend", binding.backend),
    ]
    for name, figure in (usage or {}).items():
        rows += [(f"usage.{name}", "unavailable" if figure.value is None else str(figure.value)),
                 (f"usage.{name}.coverage", figure.coverage)]
    text = "".join(f"{escape_property(k, key=True)}={escape_property(v, key=False)}\n" for k, v in rows)
    return text.encode("ascii")
