"""Repeated trials: from the verdicts of a case's trials to the case's verdict, and its pass rate.

A case the contract measures ``k`` times (``trials: {count: k, verdict: ...}``) has ``k`` trials, each a
cell of its own, bound to its ordinal and to the worker job the matrix plan assigned it to. Each trial is
judged like a case measured once (:func:`cells.verdict`): passed, failed, or broken (not recorded, an
infrastructure failure, a cell rejected for its content, a budget stop). A missing trial is a broken trial,
never a skipped one.

The verdict policy asks for at least ``n`` passed trials (``all``: ``n = k``, pass^k; ``any``: ``n = 1``,
pass@k; ``at-least: n``). With ``p`` passed, ``f`` failed and ``b`` broken trials:

* **passed** when ``p >= n``;
* **failed** when ``p + b < n`` — even if every broken trial had passed, the policy would not be met, so
  the behaviour measured decides it;
* **broken** otherwise — the broken trials decide the verdict, so the case is not verified by this run.

A trial whose cell claimed what its evidence refutes — a pass its own checks contradict
(``export.unsupported_pass``), or a cell bound to another commit, profile or run attempt
(``export.cell_binding``: a replayed cell) — is not just a trial that measured nothing: it is a forgery
caught in this case. Such a case is never passed by its policy, whatever its other trials say (``any``
must not launder a caught forgery into pass@k): it is **broken**, reason ``invalid_cell`` with that code.

For ``k = 1`` this is exactly the verdict of the one cell. The **pass rate** is ``p / (p + f)``, over the
trials that measured the behaviour (a broken trial measured nothing), with its 95% Wilson score interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import sqrt

from testops_evidence.campaign.cells import BEHAVIOR, INVALID, PASSED, BoundCell, Verdict, verdict
from testops_evidence.contract import Case

TRIALS_INCOMPLETE = "trials_incomplete"
# Refusals of a trial's cell that catch a forged claim: the case they occur in cannot be passed.
FORGERY_CODES = frozenset({"export.unsupported_pass", "export.cell_binding"})
# The two-sided 95% normal quantile (the 0.975 quantile of the standard normal distribution).
Z95 = 1.959963984540054


def wilson(passed: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``passed`` successes in ``trials`` (None for no trials).

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 or ``trials``
    successes: 5 of 5 gives [0.566, 1], not [1, 1] — five passes are not proof of a 100% pass rate."""
    if trials <= 0:
        return None
    if not 0 <= passed <= trials:
        raise ValueError(f"{passed} successes of {trials} trials")
    p = passed / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    # The bounds are exactly 0 and 1 at 0 and `trials` successes; rounding must not move them past.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == trials else min(1.0, centre + half)
    return low, high


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


@dataclass(frozen=True)
class TrialOutcome:
    """One trial of a case: its ordinal, the cells bound to it (None: none arrived) and its verdict."""

    trial: int
    bound: BoundCell | None
    verdict: Verdict


@dataclass(frozen=True)
class CaseOutcome:
    """A case's trials and the verdict its policy makes of them."""

    case: Case
    trials: tuple[TrialOutcome, ...]
    verdict: Verdict

    @property
    def repeated(self) -> bool:
        return self.case.trials.repeated

    def count(self, status: str) -> int:
        return sum(1 for trial in self.trials if trial.verdict.status == status)

    @property
    def measured(self) -> int:
        """Trials that measured the behaviour (passed or failed)."""
        return self.count("passed") + self.count("failed")

    @property
    def pass_rate(self) -> float | None:
        return self.count("passed") / self.measured if self.measured else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.count("passed"), self.measured)

    def rate_text(self) -> str:
        """``3/4 passed (75%, 95% CI 30%-95%), 1 broken``: how the summary shows a case's trials."""
        passed, broken = self.count("passed"), self.count("broken")
        extra = f", {broken} broken" if broken else ""
        interval = self.interval
        if interval is None:
            return f"0 of {len(self.trials)} measured{extra}"
        rate = self.pass_rate
        assert rate is not None
        return (f"{passed}/{self.measured} passed ({percent(rate)}, 95% CI {percent(interval[0])}–"
                f"{percent(interval[1])}){extra}")

    def rate_row(self) -> dict[str, object]:
        """The pass rate as the receipt and the evidence record it."""
        interval = self.interval
        return {"passed": self.count("passed"), "failed": self.count("failed"), "broken": self.count("broken"),
                "rate": None if self.pass_rate is None else round(self.pass_rate, 6),
                "wilson-95": None if interval is None else [round(interval[0], 6), round(interval[1], 6)]}


def policy_status(required: int, statuses: list[str], codes: list[str | None] | None = None) -> str:
    """The case status of trials with these statuses (and refusal codes) under "at least ``required``
    passed"; a caught forgery (:data:`FORGERY_CODES`) keeps the case from passing."""
    if any(code in FORGERY_CODES for code in codes or ()) and statuses.count("passed") >= required:
        return "broken"
    passed = statuses.count("passed")
    broken = statuses.count("broken")
    if passed >= required:
        return "passed"
    if passed + broken < required:
        return "failed"
    return "broken"


def _ordinals(trials: list[TrialOutcome]) -> str:
    return ", ".join(str(t.trial) for t in trials)


def case_outcome(case: Case, bound: Mapping[tuple[str, int], BoundCell],
                 judged: Mapping[tuple[str, int], Verdict] | None = None) -> CaseOutcome:
    """The outcome of ``case`` from the bound cells of its trials (a missing trial is broken); ``judged``
    replaces the verdict of a trial (a budget stop, a trial over its cap)."""
    count = case.trials.count

    def trial_verdict(n: int) -> Verdict:
        replaced = (judged or {}).get((case.key, n))
        if replaced is not None:
            return replaced
        return verdict(bound.get((case.key, n)), case, n if count > 1 else None)

    if count == 1:
        one = trial_verdict(1)
        return CaseOutcome(case, (TrialOutcome(1, bound.get((case.key, 1)), one),), one)
    trials = tuple(TrialOutcome(n, bound.get((case.key, n)), trial_verdict(n)) for n in range(1, count + 1))
    required = case.trials.required
    status = policy_status(required, [t.verdict.status for t in trials], [t.verdict.code for t in trials])
    failed = [t for t in trials if t.verdict.status == "failed"]
    broken = [t for t in trials if t.verdict.status == "broken"]
    passed = count - len(failed) - len(broken)
    tally = f"{passed} of {count} trials passed" + (f", {len(failed)} failed" if failed else "") + (
        f", {len(broken)} broken" if broken else "")
    policy = f"verdict policy {case.trials.policy()} needs {required} passed"
    if status == "passed":
        return CaseOutcome(case, trials, Verdict("passed", PASSED, None))
    forged = [t for t in trials if t.verdict.code in FORGERY_CODES]
    if status == "broken" and forged and passed >= required:
        first = forged[0]
        return CaseOutcome(case, trials, Verdict(
            "broken", INVALID, f"Not verified: {tally}, which the {policy} would accept, but the cell of trial "
            f"{_ordinals(forged)} was refused ({first.verdict.code}): a claim its evidence refutes. A case with a "
            "caught forgery is never passed by its policy; re-run it.", code=first.verdict.code))
    if status == "failed":
        checks = tuple(dict.fromkeys(c for t in failed for c in t.verdict.failed_checks))
        return CaseOutcome(case, trials, Verdict(
            "failed", BEHAVIOR, f"Behaviour failure by trials: {tally}; the {policy}. Failed trials: "
            f"{_ordinals(failed)}.", checks))
    return CaseOutcome(case, trials, Verdict(
        "broken", TRIALS_INCOMPLETE, f"Not verified: {tally}; the {policy}, so the broken trials "
        f"({_ordinals(broken)}) decide the verdict and the case is not verified by this run."))
