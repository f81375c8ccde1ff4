"""Budgets: caps on usage counters, kept by the worker jobs and re-checked by export.

A campaign-wide running total cannot be known while worker jobs run in parallel: none of them sees the
others' cells until export. So a campaign cap (``budget.campaign``) is **divided between the worker jobs**
by the matrix plan, in proportion to the trials each runs (rounded down): the row's ``budget.job``. A job
keeps its own running total — the usage its own cells report, in the order the plan gives its trials —
and refuses to start a trial once any capped counter has reached its share; every trial is told what it
may still spend (``TESTOPS_EVIDENCE_BUDGET``: per counter, the smaller of the job's remainder and the
per-trial cap). A per-trial cap (``budget.trial``) bounds each trial.

Export recomputes the same arithmetic from the cells it admitted (the *verified* running total): a trial
without a cell whose job had spent its share before it is **broken** with ``budget.exhausted``, never
skipped; a trial whose admitted usage is above the per-trial cap is broken with ``budget.exceeded``. A
trial that did leave a cell is judged on it even if its job was over its share (its spend is reported).

A cap binds only what it can check. An admitted trial that gives no figure for a capped counter
(``unavailable``, or the counter left out), or only a lower bound within its per-trial cap (``partial``),
is **broken** with ``budget.unverified``: otherwise a worker could dodge any cap by not reporting, and the
summary would call a spend of "nothing" verified. An estimate is a figure and is checked like a reported
one. A job's verified spend is then a lower bound, and is shown as one. An agent that controls its worker
can still under-report a figure it does give; coverage is shown beside every total.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from testops_evidence.campaign.cells import Verdict
from testops_evidence.campaign.matrix import MatrixPlan, Unit, budget_row
from testops_evidence.campaign.usage import PARTIAL, Figure
from testops_evidence.contract import Budget

EXHAUSTED = "budget.exhausted"
EXCEEDED = "budget.exceeded"
UNVERIFIED = "budget.unverified"
REASON = "budget"


@dataclass
class JobSpend:
    """One worker job's share of the campaign caps, what its trials spent, and what it did not run."""

    job: str
    allowance: Mapping[str, int]
    spent: dict[str, int] = field(default_factory=dict)
    stopped: list[Unit] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)  # counters some trial of the job gave no exact figure for

    def shown(self, name: str) -> str:
        """The job's spend of ``name``: a lower bound (``≥``) when a trial gave no exact figure for it."""
        return ("≥ " if name in self.unknown else "") + f"{self.spent.get(name, 0):,}"

    @property
    def over(self) -> list[str]:
        return [name for name, cap in self.allowance.items() if self.spent.get(name, 0) > cap]


@dataclass(frozen=True)
class Judgement:
    """What the budget made of the trials: verdicts that replace their cells' and each job's spend."""

    verdicts: Mapping[Unit, Verdict]
    jobs: tuple[JobSpend, ...]

    def codes(self, code: str) -> list[Unit]:
        return [unit for unit, verdict in self.verdicts.items() if verdict.code == code]


def _what(unit: Unit, trials: int) -> str:
    return f"case {unit[0]!r}" if trials == 1 else f"trial {unit[1]} of {trials} of case {unit[0]!r}"


def judge(budget: Budget, plan: MatrixPlan, figures: Mapping[Unit, Mapping[str, Figure]],
          recorded: Container[Unit], admitted: Container[Unit], counts: Mapping[str, int],
          total: int) -> Judgement:
    """Re-check the budget over the plan's jobs (module docstring). ``figures``: each unit's usage totals;
    ``recorded``: units with any cell (admitted or rejected); ``admitted``: units with an admitted cell;
    ``counts``: case key -> its trials count (for messages); ``total``: the trials the worker jobs run (the
    plan's denominator)."""
    verdicts: dict[Unit, Verdict] = {}
    jobs: list[JobSpend] = []
    for job, units in plan.jobs().items():
        allowance = budget_row(budget, len(units), total).get("job", {})
        spend = JobSpend(job, allowance, {name: 0 for name in allowance})
        for unit in units:
            what = _what(unit, counts[unit[0]])
            exhausted = [name for name, cap in allowance.items() if spend.spent[name] >= cap]
            if unit not in recorded and exhausted:
                spend.stopped.append(unit)
                detail = ", ".join(f"{name} {spend.spent[name]:,} of its {allowance[name]:,}" for name in exhausted)
                verdicts[unit] = Verdict("broken", REASON, f"Not run: worker job {job!r} had spent its share of the "
                                         f"campaign budget before {what} ({detail}), so the trial was not started. "
                                         "It is not verified by this run.", code=EXHAUSTED)
            unit_figures = figures.get(unit, {})
            for name in allowance:
                value = unit_figures[name].value if name in unit_figures else None
                spend.spent[name] += value or 0
                if unit in admitted and (value is None or unit_figures[name].coverage == PARTIAL):
                    spend.unknown.add(name)
            if unit in admitted:
                _judge_trial(budget, unit, what, unit_figures, allowance, verdicts)
        jobs.append(spend)
    # Units no worker job runs (cases measured remotely, their cells from the ledger) have no share of a
    # campaign cap to spend, but the per-trial cap binds every trial wherever it ran.
    in_jobs = {unit for units in plan.jobs().values() for unit in units}
    for unit in figures:
        if unit not in in_jobs and unit in admitted:
            _judge_trial(budget, unit, _what(unit, counts[unit[0]]), figures[unit], {}, verdicts)
    return Judgement(verdicts, tuple(jobs))


def _judge_trial(budget: Budget, unit: Unit, what: str, unit_figures: Mapping[str, Figure],
                 allowance: Mapping[str, int], verdicts: dict[Unit, Verdict]) -> None:
    """An admitted trial against the per-trial caps (``budget.exceeded``), and every capped counter —
    the per-trial caps and its job's share — for a figure that can be checked (``budget.unverified``)."""
    over = [(name, unit_figures[name], cap) for name, cap in budget.trial.items()
            if name in unit_figures and (unit_figures[name].value or 0) > cap]
    if over:
        detail = ", ".join(f"{name} {figure.value:,} ({figure.coverage}) over its cap {cap:,}"
                           for name, figure, cap in over)
        verdicts[unit] = Verdict("broken", REASON, f"Over budget: {what} used {detail} (budget.trial); its "
                                 "result is not admitted as a measurement within the contract's budget.",
                                 code=EXCEEDED)
        return
    unchecked = [name for name in dict.fromkeys([*budget.trial, *allowance])
                 if _unchecked(unit_figures.get(name), budget.trial.get(name))]
    if unchecked:
        detail = ", ".join(f"{name} {_shown(unit_figures.get(name))}" for name in unchecked)
        verdicts[unit] = Verdict("broken", REASON, f"Budget not verified: the contract caps {detail} of "
                                 f"{what}, and its cell gives no figure that can be checked against the cap; "
                                 "its result is not admitted as a measurement within the budget.",
                                 code=UNVERIFIED)


def _unchecked(figure: Figure | None, trial_cap: int | None) -> bool:
    """A capped counter's figure proves nothing against the cap: none, unavailable, or (under a per-trial
    cap) a lower bound within it."""
    if figure is None or figure.value is None:
        return True
    return figure.coverage == PARTIAL and trial_cap is not None and figure.value <= trial_cap


def _shown(figure: Figure | None) -> str:
    if figure is None:
        return "(not reported)"
    return "(unavailable)" if figure.value is None else f"{figure.value:,} ({figure.coverage})"
