"""Export's step summary: the results table, trials, pass rate, remote cells, usage, budget and comparison.

Pure rendering of what the export phase computed (``phases/export.py``): every value that came from outside
reaches the Markdown through :mod:`testops_evidence.md` (via ``summary``). The per-run facts that only export
knows (the selection, where the cells came from, the ledger) arrive as the small protocols below, so this
module never imports a phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from testops_evidence import summary
from testops_evidence.campaign import previous, remote_cells, stats, usage
from testops_evidence.campaign.budget import EXCEEDED, EXHAUSTED, UNVERIFIED, Judgement
from testops_evidence.campaign.cells import CellFile
from testops_evidence.campaign.selection import Selection
from testops_evidence.campaign.trials import CaseOutcome


class WorkerArtifacts(Protocol):
    """Export's per-worker binding: the matrix plan's jobs and what collect-cells verified (None: it did not run)."""

    @property
    def jobs(self) -> Mapping[str, Any]: ...
    @property
    def collected(self) -> Mapping[str, Any] | None: ...


class LedgerCells(Protocol):
    """The remote cells export read from the ledger (``sha256`` None: no ledger file)."""

    @property
    def path(self) -> Path: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def digest_given(self) -> bool: ...
    @property
    def files(self) -> Sequence[CellFile]: ...
    @property
    def not_counted(self) -> Sequence[remote_cells.NotCounted]: ...


def headline(counts: dict[str, int], results_dir: Path) -> str:
    total = counts["total"]
    if counts["passed"] == total:
        return f"✅ Exported {total} results to {summary.code(results_dir)}: all passed."
    parts = [f"{counts[s]} {s}" for s in ("passed", "failed", "broken") if counts[s]]
    return f"❌ Exported {total} results to {summary.code(results_dir)}: {', '.join(parts)}."


# The rows the step summary shows of each table (the receipt has them all); only these are rendered.
TABLE_ROWS = 1000
TRIAL_TABLE_ROWS = 500


def render(
    rows: list[dict[str, Any]],
    outcomes: dict[str, CaseOutcome],
    accounts: usage.Accounts,
    judgement: Judgement | None,
    comparison: dict[str, Any] | None,
    remote: LedgerCells | None,
    selection: Selection,
    digest_given: bool,
    results_dir: Path,
    receipt_path: Path,
    workers: WorkerArtifacts | None,
    present: list[str],
    contract_source: summary.Markdown,
    statistics: Mapping[str, Any],
) -> str:
    if workers is None:
        origin = "one trust domain: no `artifact-prefix`, so a cell is not checked against the worker that ran it"
    elif workers.collected is not None:
        origin = (f"per worker, each artifact bound to its worker's upload step by collect-cells (the id and "
                  f"digest that step reported in its job's record): {len(present)} of {len(workers.jobs)} worker "
                  "artifacts present; every cell came from the job the matrix plan assigned its case to")
    else:
        # Without collect-cells nothing here knows which job uploaded an artifact: only its name was read.
        missing = len(workers.jobs) - len(present)
        origin = (f"per worker, by artifact name only: {len(present)} of {len(workers.jobs)} worker artifacts "
                  "present" + (f" ({missing} missing: their cases are not recorded)" if missing else "")
                  + "; each cell was accepted only from the artifact named for the job the matrix plan assigned "
                  "its case (and trial) to, but no collect-cells ran in this job, so which job uploaded each "
                  "artifact was not checked")
    repeated = [o for o in outcomes.values() if o.repeated]
    parts = [
        summary.table(("", ""), [
            ("selection", summary.code(selection.path)),
            ("selection sha256", summary.Markdown(summary.code(selection.digest) + (
                "" if digest_given else " (computed here: no `selection-sha256` was given)"))),
            ("contract", contract_source),
            ("cell origin", summary.Markdown(origin)),
            ("results directory", summary.code(results_dir)),
            ("receipt", summary.code(receipt_path)),
            *_rerun_row(selection),
        ]),
        "\n### Results\n",
    ]
    if repeated:
        parts.append("\nA case measured several times is judged by its verdict policy over its trials; the pass "
                     "rate counts the trials that measured the behaviour, with its 95% Wilson interval.\n")
        parts.append(summary.table(("", "case", "title", "status", "trials", "attempt", "code", "why"), [
            (summary.status_icon(row["status"]), summary.code(row["key"]), row["title"], row["status"],
             _trials_cell(outcomes[row["key"]]),
             summary.code(row["attempt-id"]) if row["attempt-id"] else "—",
             summary.code(outcomes[row["key"]].verdict.code) if outcomes[row["key"]].verdict.code else "—",
             outcomes[row["key"]].verdict.message or "every check passed")
            for row in rows[:TABLE_ROWS]
        ], limit=TABLE_ROWS, more=max(len(rows) - TABLE_ROWS, 0)))
        parts.append("\n### Trials\n\n")
        parts.append(summary.table(("case", "policy", "trials (ordinal: status)", "not passed, why"), [
            (summary.code(o.case.key), f"{o.case.trials.policy()}: {o.case.trials.required} of {o.case.trials.count} "
                                       "must pass",
             " ".join(f"{summary.status_icon(t.verdict.status)}{t.trial}" for t in o.trials),
             summary.Markdown("<br>".join(
                 f"{t.trial}: " + (summary.code(t.verdict.code) + " " if t.verdict.code else "")
                 + summary.text(t.verdict.message or "", limit=200)
                 for t in o.trials if t.verdict.status != "passed") or "—"))
            for o in repeated[:TRIAL_TABLE_ROWS]
        ], limit=TRIAL_TABLE_ROWS, more=max(len(repeated) - TRIAL_TABLE_ROWS, 0)))
    else:
        parts.append(summary.table(("", "case", "title", "status", "attempt", "code", "why"), [
            (summary.status_icon(row["status"]), summary.code(row["key"]), row["title"], row["status"],
             summary.code(row["attempt-id"]) if row["attempt-id"] else "—",
             summary.code(outcomes[row["key"]].verdict.code) if outcomes[row["key"]].verdict.code else "—",
             outcomes[row["key"]].verdict.message or "every check passed")
            for row in rows[:TABLE_ROWS]
        ], limit=TABLE_ROWS, more=max(len(rows) - TABLE_ROWS, 0)))
    parts.append(stats.render(statistics))
    if remote is not None:
        parts.append(_remote_section(remote))
    parts.append(_usage_section(accounts))
    if judgement is not None:
        parts.append(_budget_section(judgement))
    if comparison is not None:
        parts.append(previous.render(comparison))
    superseded = [(summary.code(o.case.key) if not o.repeated else summary.Markdown(
                       f"{summary.code(o.case.key)} trial {t.trial}"),
                   summary.code(t.bound.cell.attempt_id),
                   summary.join((summary.code(c.attempt_id) for c in t.bound.superseded), ", "))
                  for o in outcomes.values() for t in o.trials
                  if t.bound is not None and t.bound.superseded and t.bound.cell is not None]
    if superseded:
        parts += ["\n### Superseded attempts (run-attempts: any — the latest finished attempt counts)\n",
                  summary.table(("case", "chosen attempt", "superseded"), superseded)]
    return "\n".join(parts)


def _rerun_row(selection: Selection) -> list[tuple[str, Any]]:
    block = selection.document.get("rerun-of")
    if not block:
        return []
    run_link = summary.link(f"run {block['run-id']}", str(block["run-url"]))
    return [("re-run of", summary.Markdown(
        f"{run_link}: its {len(block['cases'])} cases that did "
        f"not pass (receipt {summary.code(block['receipt-sha256'])})"))]


def _remote_section(remote: LedgerCells) -> str:
    lines = ["\n### Remote cells\n\n"]
    if remote.sha256 is None:
        return lines[0] + f"No ledger at {summary.code(remote.path)}: the cases measured remotely are not recorded.\n"
    bound = "the import's ledger-sha256" if remote.digest_given else "its digest (no ledger-sha256 was given)"
    lines.append(f"{len(remote.files)} cell(s) from the ledger {summary.code(remote.path)} (sha256 "
                 f"{summary.code(remote.sha256)}, bound by {bound}), each with the provenance its import recorded.\n")
    rows = [(summary.code(f.case or ""), f.adapted.trial if f.adapted else "—",
             summary.code((f.adapted.provenance or {}).get("import-key", "")) if f.adapted else "—",
             summary.code(f"{(f.adapted.provenance or {}).get('source-repository')}#"
                          f"{(f.adapted.provenance or {}).get('source-run-id')}") if f.adapted else "—")
            for f in remote.files]
    if rows:
        lines.append("\n" + summary.table(("case", "trial", "import key", "source run"), rows, limit=100))
    if remote.not_counted:
        lines.append("\n\nNot counted: " + ", ".join(
            f"{summary.code(f'{n.case} #{n.ordinal}')} ({summary.text(n.why)})" for n in remote.not_counted[:50]) + ".\n")
    return "".join(lines)


def _usage_section(accounts: usage.Accounts) -> str:
    """Totals per lane and for the campaign, and the cost of the most expensive cases, with coverage."""
    campaign_cost = accounts.campaign.get(usage.COST, usage.MISSING)
    if campaign_cost.known == 0 and len(accounts.counters) == 1:
        return ("\n### Usage\n\nNo cell reported usage: the campaign's cost is **unavailable** (never counted as "
                "zero). Cells report counters with their coverage (docs/evidence.md, \"Usage and cost\").\n")
    names = list(accounts.counters)
    rows: list[tuple[Any, ...]] = [("campaign", *(usage.show(n, accounts.campaign[n]) for n in names))]
    rows += [(f"{lane} lane", *(usage.show(n, totals[n]) for n in names)) for lane, totals in accounts.lanes.items()]
    parts = ["\n### Usage\n\nTotals of every admitted attempt (superseded ones included). An unavailable figure is "
             "never added as zero: a total with one is partial, a lower bound (≥).\n\n",
             summary.table(("", *names), rows)]
    costly = sorted(((key, figures[usage.COST]) for key, figures in accounts.cases.items()
                     if figures[usage.COST].value is not None), key=lambda pair: -(pair[1].value or 0))[:10]
    if costly:
        parts += ["\n\nMost expensive cases:\n\n",
                  summary.table(("case", "cost"), [(summary.code(key), usage.show(usage.COST, figure))
                                                   for key, figure in costly])]
    return "".join(parts) + "\n"


def _budget_section(judgement: Judgement) -> str:
    stopped, over = judgement.codes(EXHAUSTED), judgement.codes(EXCEEDED)
    unverified = judgement.codes(UNVERIFIED)
    lines = ["\n### Budget\n\n"]
    if not stopped and not over and not unverified:
        lines.append("Every trial ran within the contract's budget.\n")
    if stopped:
        lines.append(f"**{len(stopped)} trial(s) not run** (`budget.exhausted`: their worker job had spent its share "
                     "of the campaign cap), exported as broken: "
                     + ", ".join(summary.code(f"{key}#{n}") for key, n in stopped[:50]) + ".\n")
    if over:
        lines.append(f"{chr(10) if stopped else ''}**{len(over)} trial(s) over the per-trial cap** (`budget.exceeded`), exported as broken: "
                     + ", ".join(summary.code(f"{key}#{n}") for key, n in over[:50]) + ".\n")
    if unverified:
        lines.append(f"{chr(10) if stopped or over else ''}**{len(unverified)} trial(s) without a figure for a capped "
                     "counter** (`budget.unverified`: unavailable, not reported, or a lower bound within the cap), "
                     "exported as broken: " + ", ".join(summary.code(f"{key}#{n}") for key, n in unverified[:50])
                     + ".\n")
    jobs = [spend for spend in judgement.jobs if spend.allowance]
    if jobs:
        lines.append("\n" + summary.table(("job", "share of the campaign cap", "spent (verified)", "not run"), [
            (summary.code(spend.job), ", ".join(f"{name} {cap:,}" for name, cap in spend.allowance.items()),
             ", ".join(f"{name} {spend.shown(name)}" + (" (over)" if name in spend.over else "")
                       for name in spend.allowance), len(spend.stopped))
            for spend in jobs], limit=50))
    return "".join(lines)


def _trials_cell(outcome: CaseOutcome) -> str:
    if not outcome.repeated:
        return "—"
    return outcome.rate_text()
