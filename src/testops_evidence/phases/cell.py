"""``testops-evidence cell`` (CLI, worker side): write one cell result from a harness's reports.

::

    testops-evidence cell --case get-task-context --junit report.xml --out cell-results/get-task-context.json
    testops-evidence cell --case get-task-context --allure-results allure-results --out cell-results/x.json
    testops-evidence cell --case get-task-context --inspect-log logs/ --out cell-results/get-task-context.json
    testops-evidence cell --case get-task-context --promptfoo results.json --out cell-results/x.json

The reports (JUnit XML, allure-results, Inspect AI logs, promptfoo results; several kinds may be combined)
are mapped to the contract case's checks by the adapter rules (docs/evidence.md). The cell is bound to
the selection the worker ran (``--selection-sha256``, else ``TESTOPS_EVIDENCE_SELECTION_SHA256``,
which the campaign template gives every case; with ``--selection-path`` the file is re-hashed against it),
to the commit the worker evaluated (``--source-sha``, else ``GITHUB_SHA`` in Actions, else
``git rev-parse HEAD``) and to the profile of the selection (else the contract's).
The file is written once (never overwritten). Like ``export``, it refuses to run next to a TestOps token.
Exit 0 when the cell is written, whatever its disposition: export decides what it means.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from testops_evidence import summary
from testops_evidence.campaign.cells import adapted_cell
from testops_evidence.campaign.selection import SELECTION_LIMIT, check_sha256, load_selection, read_document_bytes
from testops_evidence.contract import Case
from testops_evidence.errors import Refusal, input_error
from testops_evidence.publication.tree import list_dir
from testops_evidence.readers.adapters import Outcome
from testops_evidence.readers.adapters.frameworks import FrameworkRun, framework_cell
from testops_evidence.readers.adapters.layout import (
    CASE_REPORT_BYTES,
    CASE_REPORT_FILES,
    FRAMEWORKS,
    check_case_budget,
    read_allure_files,
    read_framework_logs,
    read_junit_files,
    walk,
)
from testops_evidence.readers.integers import ascii_int, parse_int
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import canonical_json, sha256_bytes, write_once

SHA_RE = re.compile(r"^[0-9a-f]{40}\Z")
# Set by the campaign template's case runner for every case command (docs/workflows.md).
SELECTION_DIGEST_VARIABLE = "TESTOPS_EVIDENCE_SELECTION_SHA256"
TRIAL_VARIABLE = "TESTOPS_EVIDENCE_TRIAL"
ATTEMPT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")


def _option(ctx: PhaseContext, name: str) -> str | None:
    value = ctx.settings.extras.get(name)
    return value.strip() if value and value.strip() else None


def _source_sha(ctx: PhaseContext) -> str:
    sha = _option(ctx, "source-sha") or (ctx.env.get("GITHUB_SHA") if ctx.env.get("GITHUB_ACTIONS") == "true"
                                         else None)
    if sha is None:
        try:
            done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                                  timeout=10)
            sha = done.stdout.strip() if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            sha = None
    if sha is None or not SHA_RE.match(sha):
        raise input_error("source-sha", "the evaluated commit is unknown: pass --source-sha (40 lowercase hex)",
                          expected="40 lowercase hex", actual=sha)
    return sha


def _selection(ctx: PhaseContext, profile: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The digest of the selection this cell belongs to, and the profile to bind (the selection's if read)."""
    given = ctx.settings.string("selection-sha256") or (ctx.env.get(SELECTION_DIGEST_VARIABLE) or "").strip() or None
    if given is not None:
        check_sha256(given, "selection-sha256")
    path = ctx.settings.path("selection-path")
    if path is not None and (ctx.settings.sources.get("selection-path") != "default" or path.exists()):
        if given is None:
            # The file's own digest: it binds the cell to these bytes, which the worker's verify-selection
            # step checked against the digest that travelled as a job output.
            given = sha256_bytes(read_document_bytes(path, SELECTION_LIMIT))
        selection = load_selection(path, given)
        return selection.digest, dict(selection.document["profile"])
    if given is None:
        raise input_error("selection-sha256", "the cell needs the digest of the selection it belongs to: pass "
                          f"--selection-sha256 (or set {SELECTION_DIGEST_VARIABLE}) or --selection-path",
                          expected="64 lowercase hex", actual=None)
    return given, profile


def _check_report_budget(junit: str | None, allure_dir: str | None, framework: list[str | None]) -> None:
    """The reports given, as listed (names and sizes, no link followed), within the budget export applies to a
    case directory (``export.case_budget``), before a byte of them is read: the agent writes these reports,
    and the Allure results are held in memory together (their containers link across files)."""
    listed: dict[str, int] = {}
    for kind, given, wanted in (("junit", junit, _is_xml), ("allure-results", allure_dir, _is_allure_result)):
        path = Path(given) if given is not None else None
        if path is not None and (kind == "allure-results" or (path.is_dir() and not path.is_symlink())):
            sizes: dict[str, int] = {}
            walk(path, "", wanted, sizes=sizes)
            listed.update((f"{kind}/{name}", size) for name, size in sizes.items())
    for kind, given in zip(FRAMEWORKS, framework, strict=True):
        path = Path(given) if given is not None else None
        if path is not None and path.is_dir() and not path.is_symlink():
            suffixes = FRAMEWORKS[kind][0]
            listed.update((f"{kind}/{e.name}", e.size) for e in list_dir(path, "")
                          if not e.is_dir and e.name.endswith(suffixes) and not e.name.startswith("."))
    check_case_budget("the reports given", "report", list(listed.items()), CASE_REPORT_FILES, CASE_REPORT_BYTES,
                      reader="cell")


def _is_xml(name: str) -> bool:
    return name.endswith(".xml")


def _is_allure_result(name: str) -> bool:
    return name.endswith("-result.json")


def _reports(junit: str | None, allure_dir: str | None) -> tuple[list[Outcome], list[tuple[str, str]]]:
    """The reports given, directories read recursively (docs/evidence.md: order and hidden files); input
    paths are relative to the directory given, prefixed ``allure-results/`` for Allure results; a refusal
    names the report by its path as given."""
    outcomes: list[Outcome] = []
    inputs: list[tuple[str, str]] = []
    if junit is not None:
        path = Path(junit)
        if path.is_dir() and not path.is_symlink():
            root, names = path, walk(path, "", _is_xml)
        else:
            root, names = path.parent, [path.name]
        found, digests = read_junit_files(root, names)
        outcomes += found
        inputs += digests
    if allure_dir is not None:
        root = Path(allure_dir)
        found, digests = read_allure_files(root, walk(root, "", _is_allure_result))
        outcomes += found
        inputs += [(f"allure-results/{name}", sha) for name, sha in digests]
    return outcomes, inputs


_REPORT_OPTIONS = (("junit", "junit"), ("allure-results", "allure-results"), ("inspect-log", "inspect-log"),
                   ("promptfoo", "promptfoo"))


def _framework_runs(ctx: PhaseContext) -> tuple[list[tuple[str, FrameworkRun]], list[tuple[str, str]]]:
    runs: list[tuple[str, FrameworkRun]] = []
    inputs: list[tuple[str, str]] = []
    for kind in ("inspect-log", "promptfoo"):
        given = _option(ctx, kind)
        if given is None:
            continue
        path = Path(given)
        if path.is_dir():
            found, digests = read_framework_logs(path, "", kind)
        else:
            found, digests = read_framework_logs(path.parent if str(path.parent) else Path("."), "", kind,
                                                 only=path.name)
        runs += found
        inputs += digests
    return runs, inputs


def _trial(ctx: PhaseContext, case: Case) -> int | None:
    """The trial ordinal (``--trial``, else TESTOPS_EVIDENCE_TRIAL); None for a case measured once."""
    raw = _option(ctx, "trial") or (ctx.env.get(TRIAL_VARIABLE) or "").strip() or None
    if raw is None:
        if case.trials.repeated:
            raise input_error("trial", f"case {case.key!r} is measured {case.trials.count} times: pass --trial N "
                              f"(or set {TRIAL_VARIABLE}) to say which trial these reports measured",
                              expected=f"1..{case.trials.count}", actual=None)
        return None
    trial = ascii_int(raw, minimum=1, maximum=case.trials.count)
    if trial is None:
        raise input_error("trial", f"trial {raw!r} is not a trial of case {case.key!r}: pass --trial N with N "
                          f"from 1 to {case.trials.count} in ASCII digits", expected=f"1..{case.trials.count}",
                          actual=raw)
    return trial


def run(ctx: PhaseContext) -> PhaseResult:
    key = _option(ctx, "case")
    out = _option(ctx, "out")
    junit, allure_dir = _option(ctx, "junit"), _option(ctx, "allure-results")
    if key is None or out is None:
        raise input_error("case" if key is None else "out", "cell needs --case KEY and --out FILE")
    if os.path.lexists(out):
        # A usage mistake, said before any report is read: a cell result is written once, so a second `cell`
        # with the same --out would otherwise read everything and then stop with an integrity refusal.
        raise input_error("out", f"{out} already exists: a cell result is written once. Give a new --out path "
                          "(one file per case, or per trial), or remove the old file if it is not needed",
                          expected="a path that does not exist yet", actual=out)
    given = [option for option, _ in _REPORT_OPTIONS if _option(ctx, option) is not None]
    if not given:
        raise input_error("junit", "cell needs a report: --junit FILE|DIR, --allure-results DIR, "
                          "--inspect-log FILE|DIR and/or --promptfoo FILE|DIR")
    attempt = _option(ctx, "attempt-id")
    if attempt is not None and not ATTEMPT_RE.match(attempt):
        raise input_error("attempt-id", "the attempt id must be a safe name", expected="[A-Za-z0-9._-], 1-200",
                          actual=attempt)
    contract = ctx.contract()
    case = contract.case(key)
    trial = _trial(ctx, case)
    selection_sha256, profile = _selection(ctx, dict(contract.profile))
    _check_report_budget(junit, allure_dir, [_option(ctx, kind) for kind in FRAMEWORKS])
    outcomes, inputs = _reports(junit, allure_dir)
    runs, framework_inputs = _framework_runs(ctx)
    inputs += framework_inputs
    if not inputs:
        raise Refusal("export.adapter", "no report was found (no *.xml, *-result.json, *.eval or results *.json)",
                      field="reports", expected="JUnit XML, allure-results, an Inspect AI log or promptfoo results",
                      actual=", ".join(str(_option(ctx, option)) for option in given))
    origin = "+".join(option for option in given)
    document = framework_cell(case, runs, outcomes, source_sha=_source_sha(ctx), profile=profile, inputs=inputs,
                              selection_sha256=selection_sha256, fallback_time=ctx.clock(), attempt_id=attempt,
                              origin=origin, trial=trial)
    if trial is not None:
        document["trial"] = trial
        if attempt is None and trial > 1:
            # Derived from the reports' digests: two trials with identical reports must still differ.
            document["attempt-id"] = f"{document['attempt-id'][:195]}-t{trial}"
    if ctx.env.get("GITHUB_ACTIONS") == "true" and ctx.env.get("GITHUB_RUN_ATTEMPT"):
        document["run-attempt"] = parse_int(ctx.env["GITHUB_RUN_ATTEMPT"], code="guard.run_mismatch",
                                            field="GITHUB_RUN_ATTEMPT", what="GITHUB_RUN_ATTEMPT", minimum=1)
    cell = adapted_cell(document, out, inputs, origin)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_once(target, canonical_json(document), mode=0o644)  # not secret; uploaded by another step
    checks = [(summary.status_icon("passed" if c["passed"] else "failed"), c["id"], case.checks[c["id"]],
               c.get("message") or "") for c in document["checks"]]
    what = f"trial {trial} of {summary.code(key)}" if trial is not None else summary.code(key)
    headline = (f"{'✅' if cell.disposition == 'passed' else '❌'} Wrote the cell result of {what} to "
                f"{summary.code(out)}: "
                f"{cell.disposition.replace('_', ' ')} ({len(inputs)} report file(s)).")
    return PhaseResult(headline=headline, summary=summary.table(("", "check", "kind", "note"), checks), brief=True)
