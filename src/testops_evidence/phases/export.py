"""``export`` (worker, no token): project cell results into Allure results, evidence and a receipt.

Reads the selection (re-hashed against ``selection-sha256``), binds it to this job's run, binds every
cell result to the selection, and writes ``results-dir`` fresh — one ``<uuid>-result.json`` and one
``<uuid>-attachment.json`` per selected case, ``executor.json`` and ``environment.properties`` — built
in a private temporary directory beside it and renamed into place, so a reader never sees half an
export. The receipt ``<results-dir>-receipt.json`` is written once. Exit 1 when not every case passed.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testops_evidence.campaign import ledger as ledgers
from testops_evidence.campaign import previous, remote_cells, stats, usage
from testops_evidence.campaign.budget import EXCEEDED, EXHAUSTED, UNVERIFIED, Judgement, judge
from testops_evidence.campaign.cells import (
    NOT_RECORDED,
    USAGE_ALLOWED,
    BoundCell,
    CellFile,
    Verdict,
    admit,
    format_time,
)
from testops_evidence.campaign.cells import Binding as CellBinding
from testops_evidence.campaign.matrix import Unit, plan_matrices
from testops_evidence.campaign.receipt import (
    RECEIPT_LIMIT,
    RECEIPT_SCHEMA,
    default_receipt_path,
    difference_output,
    receipt_from_bytes,
)
from testops_evidence.campaign.selection import (
    Selection,
    check_sha256,
    load_selection,
    read_document_bytes,
    read_travelled,
    validate_against,
)
from testops_evidence.campaign.trials import CaseOutcome, case_outcome
from testops_evidence.context import is_local, job_context
from testops_evidence.contract import Case, Contract
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal
from testops_evidence.publication import allure
from testops_evidence.publication.projection import project_case
from testops_evidence.publication.tree import is_empty_or_absent, write_new
from testops_evidence.readers.adapters.layout import collect_cells, collect_worker_cells
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import canonical_json, fsync_dir, hand_over, sha256_bytes, write_once
from testops_evidence.summaries import export as export_summary

COLLECTED = "collect-cells.json"  # phases/collect_cells.py writes it in this job's state directory


def in_actions(ctx: PhaseContext) -> bool:
    """Inside a GitHub Actions run, as opposed to a rehearsal or a local runner with `local`."""
    return not is_local(ctx.env, ctx.settings.boolean("local"))


def read_selection(ctx: PhaseContext, path: Path) -> tuple[Selection, bool]:
    """The selection, re-hashed against ``selection-sha256``; ``True`` when that digest was given (required
    inside Actions: :func:`selection.read_travelled`)."""
    digest, given = read_travelled(path, ctx.settings.string("selection-sha256"), in_actions=in_actions(ctx))
    return load_selection(path, digest), given


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    selection_path = ctx.settings.path("selection-path") or Path("testops-evidence-selection.json")
    selection, digest_given = read_selection(ctx, selection_path)
    validate_against(selection, contract, job_context(ctx.env, contract.trust.repository,
                                                          contract.trust.workflows, local=ctx.settings.boolean("local")))

    results_dir, receipt_path = _fresh_targets(ctx)

    cases = [contract.case(key) for key in selection.keys]
    context = selection.context
    now = ctx.clock()
    files, present, workers, remote = _gather_cells(ctx, contract, cases, selection, now)
    bound = admit(files, CellBinding(
        selection_sha256=selection.digest, head_sha=context.head_sha, profile=selection.document["profile"],
        selected=cases, run_attempts=contract.trust.run_attempts, run_attempt=context.run_attempt,
        owners=workers.owners if workers is not None else None,
        remote=frozenset(case.key for case in cases if case.remote)))
    accounts = usage.account(((case.key, case.lane, n, _attempt_figures(bound.get((case.key, n))))
                              for case in cases for n in range(1, case.trials.count + 1)), USAGE_ALLOWED)
    judgement = _judge_budget(contract, cases, bound, accounts)
    judged = {**_unfinished(workers, bound), **(judgement.verdicts if judgement else {})}
    outcomes = {case.key: case_outcome(case, bound, judged or None) for case in cases}

    binding = allure.Binding(
        campaign=contract.campaign,
        selection_sha256=selection.digest,
        contract_sha256=contract.digest,
        backend=selection.backend,
        context=selection.document["context"],
        testops=selection.testops,
        profile=selection.document["profile"],
    )
    with ctx.runtime.group(f"export: {len(cases)} results into {results_dir}"):
        try:
            rows, written = _write_results(ctx, results_dir, binding, outcomes, accounts, now,
                                           workers.owners if workers is not None else {})
        except OSError as exc:  # a full disk: the temp directory is already removed, nothing is in place
            raise Refusal("io.write_failed", f"the results could not be written to {results_dir.parent} "
                          f"({exc.strerror}); nothing was left there", field="results-dir",
                          expected="a writable directory with free space", actual=str(results_dir)) from None
    counts = Counter(row["status"] for row in rows)
    count_row = {"total": len(rows), **{s: counts.get(s, 0) for s in ("passed", "failed", "broken")}}
    comparison = _compare(selection, rows, accounts, contract)
    statistics = _statistics(rows, contract)
    receipt = _receipt_document(contract, selection, binding, results_dir, now, rows, written, outcomes, accounts,
                                judgement, remote, comparison, statistics)
    receipt_bytes = _write_receipt(ctx, receipt, receipt_path, results_dir, selection.digest, count_row)

    all_passed = counts.get("passed", 0) == len(rows)
    return PhaseResult(
        headline=export_summary.headline(count_row, results_dir),
        outputs={
            "results-dir": str(results_dir),
            "receipt-path": str(receipt_path),
            "receipt-sha256": sha256_bytes(receipt_bytes),
            "passed-count": counts.get("passed", 0),
            "failed-count": counts.get("failed", 0),
            "broken-count": counts.get("broken", 0),
            "all-passed": all_passed,
            **cost_outputs(accounts.campaign.get(usage.COST)),
            **comparison_outputs(comparison),
            **pass_rate_outputs(statistics),
        },
        summary=export_summary.render(rows, outcomes, accounts, judgement, comparison, remote, selection, digest_given, results_dir, receipt_path, workers,
                         present, ctx.contract_row(contract), statistics),
        exit_code=EXIT_OK if all_passed else EXIT_CASES_FAILED, brief=True,
    )


def _fresh_targets(ctx: PhaseContext) -> tuple[Path, Path]:
    """The results directory and receipt this export writes: refused when either is already there."""
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    receipt_path = default_receipt_path(results_dir)
    if not is_empty_or_absent(results_dir):
        raise Refusal("io.exists", f"the results directory {results_dir} exists and is not empty; export writes "
                      "a fresh one", field="results-dir", expected="an absent or empty directory",
                      actual=str(results_dir))
    if os.path.lexists(receipt_path):
        raise Refusal("io.exists", f"the receipt {receipt_path} already exists; receipts are written once",
                      field="receipt-path", expected="no existing file", actual=str(receipt_path))
    return results_dir, receipt_path


def _gather_cells(ctx: PhaseContext, contract: Contract, cases: list[Case], selection: Selection,
                  now: float) -> tuple[list[CellFile], list[str], Workers | None, RemoteCells | None]:
    """Every candidate cell of the campaign: the workers' (bound to their artifacts where collect-cells ran) and
    the imported remote cells; nothing is admitted yet."""
    context = selection.context
    cell_dir = ctx.settings.path("cell-results") or Path("cell-results")
    workers = _workers(ctx, contract, cases, context.run_attempt)
    files: list[CellFile] = []
    present: list[str] = []
    facts = {"cases": {c.key: c for c in contract.cases}, "source_sha": context.head_sha,
             "profile": selection.document["profile"], "selection_sha256": selection.digest, "fallback_time": now,
             "run_attempts": contract.trust.run_attempts}
    cell_dir_present = cell_dir.exists() or cell_dir.is_symlink()
    if cell_dir_present:
        if workers is None:
            files = collect_cells(cell_dir, **facts)
        else:
            # Where collect-cells bound the artifacts (the campaign template), each must list its files.
            files, present = collect_worker_cells(cell_dir, artifact_prefix=workers.prefix, jobs=workers.jobs,
                                                  require_files=workers.collected is not None, **facts)
    if workers is not None and workers.collected is not None:
        _match_collected(workers, present, selection.digest)
    elif not cell_dir_present and any(not case.remote for case in cases):
        # Only when it is true: with the directory present (a rehearsal, an export without collect-cells) the
        # cells in it are read, and a campaign of remote cases only needs no directory.
        ctx.runtime.annotate("warning", f"the cell-results directory {cell_dir} does not exist: every selected "
                             "case measured by a worker job is exported as broken (not recorded)")
    remote = _remote_cells(ctx, contract, cases, selection)
    if remote is not None:
        files = [*files, *remote.files]
    return files, present, workers, remote


def _receipt_document(contract: Contract, selection: Selection, binding: allure.Binding, results_dir: Path,
                      now: float, rows: list[dict[str, Any]], written: Any, outcomes: Mapping[str, CaseOutcome],
                      accounts: usage.Accounts, judgement: Judgement | None, remote: RemoteCells | None,
                      comparison: dict[str, Any] | None, statistics: dict[str, Any]) -> dict[str, Any]:
    """The export receipt: what was exported, bound to the selection and contract, with every result's row."""
    counts = Counter(row["status"] for row in rows)
    count_row = {"total": len(rows), **{s: counts.get(s, 0) for s in ("passed", "failed", "broken")}}
    repeated = any(outcome.repeated for outcome in outcomes.values())
    trial_counts = Counter(t.verdict.status for outcome in outcomes.values() for t in outcome.trials)
    trial_row = {"total": sum(trial_counts.values()), **{s: trial_counts.get(s, 0) for s in ("passed", "failed", "broken")}}
    return {
        "schema": RECEIPT_SCHEMA,
        "campaign": contract.campaign,
        "selection-sha256": selection.digest,
        "contract-sha256": contract.digest,
        "backend": selection.backend,
        "context": binding.context_row(),
        "testops": dict(selection.testops) if selection.testops is not None else None,
        "profile": dict(selection.document["profile"]),
        "results-dir": results_dir.resolve().name,
        "created-at": format_time(datetime.fromtimestamp(now, UTC)),
        "counts": count_row,
        **({"trial-counts": trial_row} if repeated else {}),
        "files": written,
        "usage": accounts.receipt_block(),
        **({"budget": _budget_block(contract.budget, judgement)} if judgement is not None else {}),
        **({"rerun-of": selection.document["rerun-of"]} if "rerun-of" in selection.document else {}),
        **({"ledger": remote.receipt_block()} if remote is not None else {}),
        **({"comparison": comparison} if comparison is not None else {}),
        "statistics": statistics,
        "results": rows,
    }


def _write_receipt(ctx: PhaseContext, receipt: dict[str, Any], receipt_path: Path, results_dir: Path,
                   selection_sha256: str, count_row: dict[str, int]) -> bytes:
    """Write the receipt once, checked as upload and verify will read it, and hand the results over; a refusal
    removes the results directory, so nothing of the export is left."""
    # Compact: a machine document; the step summary is what a person reads.
    receipt_bytes = canonical_json(receipt)
    try:
        # The receipt is checked as upload and verify will read it, before it is written: export never
        # leaves a receipt they would refuse (a refusal here removes the results directory too).
        receipt_from_bytes(receipt_bytes, str(receipt_path))
        write_once(receipt_path, receipt_bytes)
    except Refusal as refusal:
        # Without its receipt nothing publishes the results directory, and its presence would refuse the
        # re-run (io.exists): it goes, so the refusal leaves nothing behind.
        shutil.rmtree(results_dir, ignore_errors=True)
        if refusal.code != "io.write_failed":
            raise
        raise Refusal("io.write_failed", f"{refusal.message}; the results directory {results_dir} was removed "
                      "again, so nothing of this export was left", field=refusal.field, expected=refusal.expected,
                      actual=refusal.actual) from None
    hand_over([results_dir, receipt_path], ctx.env)
    try:
        ctx.state.write_receipt("export.json", {
            "receipt-path": str(receipt_path), "receipt-sha256": sha256_bytes(receipt_bytes),
            "results-dir": str(results_dir), "selection-sha256": selection_sha256, "counts": count_row,
        })
    except Refusal as refusal:  # the receipt beside the results is the record; this copy is a convenience
        ctx.runtime.annotate("warning", f"export.json could not be written to the state directory: {refusal}")
    return receipt_bytes


class Workers:
    """Per-worker artifacts: the name prefix of their directories, the matrix plan's jobs, and — when
    ``collect-cells`` ran in this job — what it verified about each worker's artifact."""

    def __init__(self, prefix: str, jobs: dict[str, tuple[Unit, ...]], collected: dict[str, Any] | None) -> None:
        self.prefix = prefix
        self.jobs = jobs
        self.owners = {unit: job for job, units in jobs.items() for unit in units}
        self.collected = collected


UNFINISHED = "campaign.unfinished"


def _unfinished(workers: Workers | None, bound: Mapping[Unit, BoundCell]) -> dict[Unit, Verdict]:
    """The units of the worker jobs that collect-cells found without an artifact (cancelled, timed out or cut
    short before their upload): broken with ``campaign.unfinished``, so a campaign cut short says which cases
    never finished, and why, rather than only that no cell reached the export."""
    receipt = workers.collected if workers is not None else None
    if workers is None or receipt is None:
        return {}
    verdicts: dict[Unit, Verdict] = {}
    for worker in receipt.get("workers", []):
        if not isinstance(worker, dict) or worker.get("artifact") or str(worker.get("job")) not in workers.jobs:
            continue
        job, upload = str(worker["job"]), str(worker.get("upload"))
        for unit in workers.jobs[job]:
            if unit in bound:
                continue
            verdicts[unit] = Verdict("broken", NOT_RECORDED, f"Never finished: worker job {job!r} ended without "
                                     f"uploading its cells (its upload step: {upload}); the campaign was cancelled, "
                                     "timed out or cut short before this case was measured.", code=UNFINISHED)
    return verdicts


def _match_collected(workers: Workers, present: list[str], selection_sha256: str) -> None:
    """The downloaded artifact directories must be exactly the artifacts collect-cells verified: one that is
    missing was replaced after the check (another id: not downloaded), one that is extra was never checked."""
    receipt = workers.collected or {}
    if receipt.get("selection-sha256") != selection_sha256:
        raise Refusal("export.worker_artifact", "collect-cells in this job checked the artifacts of another "
                      "selection", field="collect-cells.json", expected=selection_sha256,
                      actual=receipt.get("selection-sha256"))
    verified = {str(w["job"]) for w in receipt.get("workers", []) if isinstance(w, dict) and w.get("artifact")}
    for job in sorted(set(present) ^ verified):
        state = "was not verified by collect-cells" if job in present else "was verified but is missing"
        raise Refusal("export.worker_artifact", f"the artifact of worker {job!r} {state}: only the artifacts "
                      "collect-cells bound to their worker's upload step are read", field=job,
                      expected=sorted(verified)[:20], actual=sorted(present)[:20])


def _workers(ctx: PhaseContext, contract: Any, cases: list[Case], run_attempt: int) -> Workers | None:
    """The worker binding: with ``artifact-prefix``, cell-results holds one directory per worker artifact,
    ``<artifact-prefix>-cells-<run attempt>-<job>``, and the plan recomputed from the selection names the
    job that owns each case. Without it, the cells are read as one trust domain."""
    prefix = ctx.settings.string("artifact-prefix")
    if prefix is None:
        return None
    plan = plan_matrices(cases, contract.lanes, budget=contract.budget)
    collected = ctx.state.read_receipt(COLLECTED) if ctx.state.has(COLLECTED) else None
    return Workers(f"{prefix}-cells-{run_attempt}-", plan.jobs(), collected if isinstance(collected, dict) else None)


class RemoteCells:
    """The ledger's cells of the selected remote cases (campaign/remote_cells.py) and what did not count."""

    def __init__(self, path: Path, sha256: str | None, digest_given: bool, files: list[CellFile],
                 not_counted: list[remote_cells.NotCounted]) -> None:
        self.path, self.sha256, self.digest_given = path, sha256, digest_given
        self.files, self.not_counted = files, not_counted

    def receipt_block(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "cells": len(self.files),
                "not-counted": [{"case": n.case, "ordinal": n.ordinal, "why": n.why} for n in self.not_counted]}


def _remote_cells(ctx: PhaseContext, contract: Any, cases: list[Case], selection: Selection) -> RemoteCells | None:
    """With cases measured by another workflow: the ledger's cells for them (None when there are none).

    ``ledger-sha256`` must be the digest of the ledger's bytes (the import job's output): a ledger that crossed
    jobs as an artifact is bound by it like the selection. Inside GitHub Actions it is required to read a ledger
    (``input.ledger-sha256``); outside (a rehearsal) it may be omitted. Without the ledger file the remote cases
    are not recorded (broken), with a warning."""
    if not any(case.remote for case in cases):
        return None
    path = ctx.settings.path("ledger") or Path("campaign-ledger.json")
    expected = ctx.settings.string("ledger-sha256")
    if expected is not None:
        check_sha256(expected, "ledger-sha256")
    found = ledgers.read(path)
    if found is None:
        if expected is not None:
            raise Refusal("export.ledger", f"the ledger {path} whose digest was given does not exist", field="ledger",
                          expected=expected, actual=None)
        ctx.runtime.annotate("warning", f"the ledger {path} does not exist: the cases measured remotely are "
                             "exported as broken (not recorded)", title="export.ledger")
        return RemoteCells(path, None, False, [], [])
    if expected is None and ctx.env.get("GITHUB_ACTIONS") == "true":
        # Inside Actions a ledger read without the import job's digest could be any bytes on this runner's disk
        # (an artifact extracted beside it, a step before this one): required, as selection-sha256 is.
        raise Refusal("input.ledger-sha256", f"input ledger-sha256 is required inside GitHub Actions to read the "
                      f"ledger {path}: pass the import job's ledger-sha256 output (the campaign template's "
                      "`ledger-sha256` input), which binds the ledger export reads to the one import wrote",
                      field="ledger-sha256", expected="64 lowercase hex characters", actual=None)
    ledger, data = found
    digest = sha256_bytes(data)
    if expected is not None and digest != expected:
        raise Refusal("export.ledger", f"the ledger {path} does not hash to ledger-sha256: it changed after import",
                      field="ledger-sha256", expected=expected, actual=digest)
    if ledger.campaign != contract.campaign:
        raise Refusal("ledger.foreign_campaign", f"the ledger {path} belongs to campaign {ledger.campaign!r}",
                      field="campaign", expected=contract.campaign, actual=ledger.campaign)
    files, not_counted = remote_cells.ledger_cells(ledger, cases, selection.digest, path.name)
    return RemoteCells(path, digest, expected is not None, files, not_counted)


def _compare(selection: Selection, rows: list[dict[str, Any]], accounts: usage.Accounts,
             contract: Contract) -> dict[str, Any] | None:
    """The comparison with the baseline the selection bound (None: no compare-with)."""
    if "baseline" not in selection.document:
        return None
    baseline = selection.document["baseline"]
    if baseline is None or not baseline.get("comparable"):
        return previous.comparison_block(baseline, None)
    path = Path(selection.path).parent / str(baseline["receipt-file"])
    try:
        data = read_document_bytes(path, RECEIPT_LIMIT)
    except Refusal as refusal:
        raise Refusal("selection.baseline", f"the baseline receipt {path} the selection binds cannot be read "
                      f"({refusal.message})", field="baseline", expected=str(baseline["receipt-file"]),
                      actual=refusal.code) from None
    receipt = previous.checked_receipt(data, str(path), str(baseline["receipt-sha256"]), "selection.baseline")
    cost = accounts.campaign.get(usage.COST, usage.MISSING).to_json()
    return previous.comparison_block(baseline, previous.compare(
        rows, receipt, cost, cases={case.key: case for case in contract.cases}, policy=contract.statistics))


def comparison_outputs(comparison: dict[str, Any] | None) -> dict[str, Any]:
    """``comparison`` (compared, not-comparable, no-baseline, or empty without compare-with),
    ``regressions`` (a JSON array) and ``comparison-difference`` (the paired difference, JSON)."""
    if comparison is None:
        return {"comparison": "", "regressions": [], "comparison-difference": ""}
    return {"comparison": comparison["state"], "regressions": comparison["regressions"],
            "comparison-difference": difference_output(comparison)}


# --- the campaign's pass rate with its uncertainty (campaign/stats.py) -----------------------------------------


def _statistics(rows: list[dict[str, Any]], contract: Contract) -> dict[str, Any]:
    """The receipt's ``statistics``: the campaign pass rate with its clustered interval, and the smallest
    change a paired comparison of this design would detect."""
    rates = previous.case_rates(rows, {case.key: case for case in contract.cases})
    return stats.statistics_block(list(rates.values()))


def pass_rate_outputs(statistics: Mapping[str, Any]) -> dict[str, Any]:
    """``pass-rate`` and ``pass-rate-ci`` (a JSON array), empty when no case measured anything."""
    return stats.pass_rate_outputs(statistics)


def _judge_budget(contract: Any, cases: list[Case], bound: dict[Unit, BoundCell],
                  accounts: usage.Accounts) -> Judgement | None:
    """The budget re-checked from the admitted cells (campaign/budget.py); None without a budget."""
    if contract.budget is None:
        return None
    plan = plan_matrices(cases, contract.lanes, budget=contract.budget)
    counters = tuple(sorted({*accounts.counters, *contract.budget.counters}))
    figures = {(case.key, n): usage.totals(_attempt_figures(bound.get((case.key, n))), counters)
               for case in cases for n in range(1, case.trials.count + 1)}
    admitted = {unit for unit, b in bound.items() if b.cell is not None}
    return judge(contract.budget, plan, figures, set(bound), admitted, {c.key: c.trials.count for c in cases},
                 sum(c.trials.count for c in cases if not c.remote))


def _budget_block(budget: Any, judgement: Judgement) -> dict[str, Any]:
    return {"campaign": dict(budget.campaign), "trial": dict(budget.trial),
            "not-run": [{"key": key, "trial": n} for key, n in judgement.codes(EXHAUSTED)],
            "over-cap": [{"key": key, "trial": n} for key, n in judgement.codes(EXCEEDED)],
            "unverified": [{"key": key, "trial": n} for key, n in judgement.codes(UNVERIFIED)],
            "jobs-over-share": [spend.job for spend in judgement.jobs if spend.over]}


def _attempt_figures(bound: BoundCell | None) -> list[usage.Item]:
    """The figures of every admitted attempt of a trial (superseded ones were paid for too); ``[None]`` — an
    unavailable figure, never a zero — when no cell of it was admitted."""
    if bound is None or bound.cell is None:
        return [None]
    return [cell.usage() for cell in (*bound.superseded, bound.cell)]


def cost_outputs(cost: usage.Figure | None) -> dict[str, Any]:
    """``cost-nanodollars`` (empty when unavailable) and ``cost-coverage``."""
    figure = cost or usage.MISSING
    return {"cost-nanodollars": "" if figure.value is None else figure.value, "cost-coverage": figure.coverage}


def _write_results(
    ctx: PhaseContext,
    results_dir: Path,
    binding: allure.Binding,
    outcomes: dict[str, CaseOutcome],
    accounts: usage.Accounts,
    now: float,
    owners: dict[Unit, str],
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Write everything into a private temp dir beside ``results_dir``, then rename it into place."""
    parent = results_dir.parent if str(results_dir.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    temp = parent / f".{results_dir.name}.export-{os.getpid()}-{os.urandom(4).hex()}"
    temp.mkdir(mode=0o700)
    temp_fd = -1
    try:
        temp_fd = os.open(temp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        rows: list[dict[str, Any]] = []
        now_ms = int(now * 1000)
        for index, outcome in enumerate(outcomes.values()):
            projected = project_case(binding, outcome, accounts, now_ms, ctx.new_uuid, owners)
            for name, data in projected.files:
                write_new(name, data, dir_fd=temp_fd)
            rows.append(projected.row)
            if (index + 1) % 1000 == 0:
                ctx.runtime.log(f"exported {index + 1} of {len(outcomes)} cases")
        files_written = []
        for name, data in (("executor.json", canonical_json(allure.executor_document(binding))),
                           ("environment.properties", allure.environment_properties(binding, accounts.campaign))):
            write_new(name, data, dir_fd=temp_fd)
            files_written.append({"name": name, "sha256": sha256_bytes(data)})
        os.fsync(temp_fd)
        if results_dir.is_dir() and not results_dir.is_symlink():
            results_dir.rmdir()  # empty (checked above); rename cannot replace it portably
        os.rename(temp, results_dir)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    finally:
        if temp_fd >= 0:
            os.close(temp_fd)
    fsync_dir(parent)
    return rows, files_written


