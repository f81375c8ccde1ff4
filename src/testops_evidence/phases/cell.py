"""``testops-evidence cell`` (CLI, worker side): write one cell result from a harness's reports.

::

    testops-evidence cell --case get-task-context --junit report.xml --out cell-results/get-task-context.json
    testops-evidence cell --case get-task-context --allure-results allure-results --out cell-results/x.json
    testops-evidence cell --case get-task-context --inspect-log logs/ --out cell-results/get-task-context.json
    testops-evidence cell --case get-task-context --promptfoo results.json --out cell-results/x.json

The reports (one option per format of ``adapters/formats.py``; several may be combined) are mapped to the contract case's checks by the adapter rules (docs/evidence.md). The cell is bound to
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
from testops_evidence.readers.adapters.formats import FORMATS, TITLES, ReportFormat
from testops_evidence.readers.adapters.frameworks import framework_cell
from testops_evidence.readers.adapters.layout import (
    CASE_REPORT_BYTES,
    CASE_REPORT_FILES,
    Reports,
    check_case_budget,
    listing,
    read_files,
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


def _given(ctx: PhaseContext) -> list[tuple[ReportFormat, Path]]:
    return [(fmt, Path(value)) for fmt in FORMATS if (value := _option(ctx, fmt.kind)) is not None]


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _check_report_budget(given: list[tuple[ReportFormat, Path]]) -> None:
    """The directories given, as listed (names and sizes, no link followed), within the budget export applies
    to a case directory (``export.case_budget``), before a byte of them is read: the agent writes these
    reports, and some are held in memory together (Allure containers link across files)."""
    listed = [(f"{fmt.kind}/{name}", size) for fmt, path in given if _is_dir(path)
              for name, size in listing(path, "", fmt.suffixes, recursive=fmt.recursive).items()]
    check_case_budget("the reports given", "report", listed, CASE_REPORT_FILES, CASE_REPORT_BYTES, reader="cell")


def _reports(given: list[tuple[ReportFormat, Path]]) -> Reports:
    """The reports given, a directory read as its format says (docs/evidence.md: order and hidden files); inputs
    are named relative to the directory given (under the format's own directory name for a test report format
    that has one); a refusal names the report by its path as given."""
    reports = Reports()
    for fmt, path in given:
        if _is_dir(path):
            root, names = path, list(listing(path, "", fmt.suffixes, recursive=fmt.recursive))
        else:
            root, names = (path.parent if str(path.parent) else Path(".")), [path.name]
        read_files(root, names, fmt, reports, f"{fmt.directory}/" if fmt.directory and not fmt.framework else "")
    return reports


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
    if key is None or out is None:
        raise input_error("case" if key is None else "out", "cell needs --case KEY and --out FILE")
    if os.path.lexists(out):
        # A usage mistake, said before any report is read: a cell result is written once, so a second `cell`
        # with the same --out would otherwise read everything and then stop with an integrity refusal.
        raise input_error("out", f"{out} already exists: a cell result is written once. Give a new --out path "
                          "(one file per case, or per trial), or remove the old file if it is not needed",
                          expected="a path that does not exist yet", actual=out)
    given = _given(ctx)
    if not given:
        raise input_error(FORMATS[0].kind, "cell needs a report: "
                          + ", ".join(f"--{fmt.kind} FILE|DIR" for fmt in FORMATS) + " (one or more)")
    attempt = _option(ctx, "attempt-id")
    if attempt is not None and not ATTEMPT_RE.match(attempt):
        raise input_error("attempt-id", "the attempt id must be a safe name", expected="[A-Za-z0-9._-], 1-200",
                          actual=attempt)
    contract = ctx.contract()
    case = contract.case(key)
    trial = _trial(ctx, case)
    selection_sha256, profile = _selection(ctx, dict(contract.profile))
    _check_report_budget(given)
    reports = _reports(given)
    inputs = reports.inputs
    if not inputs:
        raise Refusal("export.adapter", "no report was found (no "
                      + ", ".join(f"*{s}" for s in dict.fromkeys(s for fmt in FORMATS for s in fmt.suffixes)) + ")",
                      field="reports", expected=TITLES, actual=", ".join(str(path) for _fmt, path in given))
    origin = "+".join(fmt.kind for fmt, _path in given)
    document = framework_cell(case, reports.runs, reports.outcomes, source_sha=_source_sha(ctx), profile=profile, inputs=inputs,
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
