"""Statistics of a campaign's pass rates: the campaign-level estimate, the paired comparison, per-case flags
with false-alarm control, and power.

Following Evan Miller, *Adding Error Bars to Evals* (2024, arXiv:2411.00640):

* **The campaign pass rate** is the mean over cases of each case's pass rate (passed / measured trials).
  Its standard error is cluster-robust: the trials of a case are repeated measurements of one case, and
  cases that share a fixture (a contract-declared ``cluster``) are not independent either. With every case
  its own cluster the estimate equals the classical ``s / sqrt(n)``.
* **The paired difference** of two campaigns is the mean over the cases both measured of the per-case
  difference, with the same clustered standard error: pairing removes how hard each case is from the noise.
* **Per-case flags** use Fisher's exact test on each case's passed/failed counts, then Benjamini-Hochberg
  (false discovery rate ``q``) or Holm (family-wise error rate) across the cases compared.
* **Power**: the smallest change in the campaign pass rate a paired comparison of two campaigns of this design
  detects with 80% power at 5% two-sided, from the within-case variance observed.

Intervals are normal (central limit) intervals: they need enough cases, which is what an eval suite has; the
docs say what they do not promise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import ceil, exp, isfinite, lgamma, log, sqrt
from statistics import NormalDist
from typing import Any

NORMAL = NormalDist()
LEVEL = 0.95
POWER = 0.80
# Relative tolerance when Fisher's test collects the tables no more probable than the observed one: the
# same floating-point allowance R's fisher.test uses (1 + 1e-7).
FISHER_TOLERANCE = 1 + 1e-7
CORRECTIONS = ("benjamini-hochberg", "holm")
BETTER, WORSE, NO_CHANGE = "better", "worse", "no detectable change"


def significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant figures: a p-value of 3e-12 stays 3e-12, not 0."""
    return float(f"{value:.{digits}g}")


def z_two_sided(level: float = LEVEL) -> float:
    """The normal quantile of a two-sided interval at ``level`` (1.959964 for 95%)."""
    return NORMAL.inv_cdf(0.5 + level / 2)


@dataclass(frozen=True)
class CaseRate:
    """What one campaign measured of one case: passed trials of the measured ones, and its cluster."""

    key: str
    passed: int
    measured: int
    cluster: str

    @property
    def rate(self) -> float:
        return self.passed / self.measured


@dataclass(frozen=True)
class Estimate:
    """A mean with its cluster-robust standard error and 95% normal interval."""

    mean: float
    standard_error: float
    cases: int
    clusters: int

    @property
    def interval(self) -> tuple[float, float]:
        half = z_two_sided() * self.standard_error
        return self.mean - half, self.mean + half

    def to_json(self, *, clamp: bool) -> dict[str, object]:
        """The receipt's form (rounded to 6 places; a pass rate's interval clamped to 0 to 1)."""
        if not isfinite(self.standard_error):
            return {"mean": round(self.mean, 6), "standard-error": None, "interval-95": None, "cases": self.cases,
                    "clusters": self.clusters}
        low, high = self.interval
        if clamp:
            low, high = max(0.0, low), min(1.0, high)
        return {"mean": round(self.mean, 6), "standard-error": round(self.standard_error, 6),
                "interval-95": [round(low, 6), round(high, 6)], "cases": self.cases, "clusters": self.clusters}


def clustered_mean(values: Sequence[float], clusters: Sequence[str]) -> Estimate | None:
    """The mean of ``values`` and its cluster-robust standard error (None without values).

    ``Var = G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2 / n^2`` — the sandwich estimator of an
    intercept-only regression with the small-sample factor of Stata's ``vce(cluster)`` (for one regressor
    its ``(N - 1) / (N - K)`` is 1). With one value per cluster it is exactly ``stdev / sqrt(n)``. One
    cluster in all gives no estimate of the spread: the standard error is then infinite.
    """
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    residuals: dict[str, float] = {}
    for value, cluster in zip(values, clusters, strict=True):
        residuals[cluster] = residuals.get(cluster, 0.0) + (value - mean)
    groups = len(residuals)
    if groups < 2:
        return Estimate(mean, float("inf"), n, groups)
    variance = groups / (groups - 1) * sum(r * r for r in residuals.values()) / (n * n)
    return Estimate(mean, sqrt(variance), n, groups)


def campaign_pass_rate(rates: Iterable[CaseRate]) -> Estimate | None:
    """The campaign's mean pass rate over the cases that measured anything (None when none did)."""
    measured = [r for r in rates if r.measured > 0]
    return clustered_mean([r.rate for r in measured], [r.cluster for r in measured])


# --- paired comparison ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """The paired difference ``current - baseline`` over the cases both measured."""

    estimate: Estimate
    p_value: float
    only_baseline: int
    only_current: int

    @property
    def verdict(self) -> str:
        low, high = self.estimate.interval
        return BETTER if low > 0 else WORSE if high < 0 else NO_CHANGE

    def to_json(self) -> dict[str, object]:
        return {**self.estimate.to_json(clamp=False), "p-value": significant(self.p_value),
                "only-baseline": self.only_baseline, "only-current": self.only_current, "verdict": self.verdict}


def two_sided_p(mean: float, standard_error: float) -> float:
    """The two-sided normal p-value of ``mean / standard_error`` against zero."""
    if standard_error == 0:
        return 1.0 if mean == 0 else 0.0
    return 2 * NORMAL.cdf(-abs(mean) / standard_error)


def paired_difference(baseline: Mapping[str, CaseRate], current: Mapping[str, CaseRate]) -> Difference | None:
    """The paired difference over the cases both measured (clusters as the current campaign declares them);
    None when no case was measured by both."""
    both = sorted(k for k in current if k in baseline and current[k].measured > 0 and baseline[k].measured > 0)
    only_baseline = sum(1 for k, r in baseline.items() if r.measured > 0 and k not in both)
    only_current = sum(1 for k, r in current.items() if r.measured > 0 and k not in both)
    estimate = clustered_mean([current[k].rate - baseline[k].rate for k in both], [current[k].cluster for k in both])
    if estimate is None:
        return None
    return Difference(estimate, two_sided_p(estimate.mean, estimate.standard_error), only_baseline, only_current)


# --- per-case flags -----------------------------------------------------------------------------------------


def _log_hypergeometric(x: int, row: int, column: int, total: int) -> float:
    """log P(X = x) of the hypergeometric law: ``x`` of the ``row`` draws among ``column`` marked of ``total``."""
    def log_comb(n: int, k: int) -> float:
        return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)
    return log_comb(column, x) + log_comb(total - column, row - x) - log_comb(total, row)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """The two-sided p-value of Fisher's exact test of the table ``[[a, b], [c, d]]``: the probability, given
    the margins, of every table no more probable than the observed one (the definition R's ``fisher.test``
    uses). Terms are computed in log space, so counts in the thousands neither overflow nor underflow."""
    if min(a, b, c, d) < 0:
        raise ValueError("a contingency table holds counts, not negative numbers")
    row, column, total = a + b, a + c, a + b + c + d
    low, high = max(0, row + column - total), min(row, column)
    if low == high:
        return 1.0
    terms = [_log_hypergeometric(x, row, column, total) for x in range(low, high + 1)]
    observed = terms[a - low] + log(FISHER_TOLERANCE)
    top = max(terms)
    kept = sum(exp(t - top) for t in terms if t <= observed)
    every = sum(exp(t - top) for t in terms)
    return min(1.0, kept / every)


def adjusted_p_values(p_values: Sequence[float], correction: str) -> list[float]:
    """Adjusted p-values, in the order given: a case is flagged when its adjusted value is at most ``q``.

    ``benjamini-hochberg`` (1995): ``min over j >= rank of p_(j) * m / j`` — rejecting those at most ``q``
    is the step-up procedure controlling the false discovery rate at ``q``. ``holm`` (1979): ``max over
    j <= rank of (m - j + 1) p_(j)`` — the step-down procedure controlling the family-wise error rate."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    if correction == "benjamini-hochberg":
        running = 1.0
        for rank in range(m, 0, -1):
            i = order[rank - 1]
            running = min(running, p_values[i] * m / rank)
            adjusted[i] = running
    elif correction == "holm":
        running = 0.0
        for rank in range(1, m + 1):
            i = order[rank - 1]
            running = max(running, min(1.0, (m - rank + 1) * p_values[i]))
            adjusted[i] = running
    else:
        raise ValueError(f"unknown correction {correction!r}: one of {', '.join(CORRECTIONS)}")
    return adjusted


@dataclass(frozen=True)
class CaseFlag:
    """One case's test: its counts then and now, Fisher's p-value and the adjusted one."""

    key: str
    baseline: CaseRate
    current: CaseRate
    p_value: float
    adjusted: float
    flagged: bool

    @property
    def change(self) -> float:
        return self.current.rate - self.baseline.rate


def case_flags(baseline: Mapping[str, CaseRate], current: Mapping[str, CaseRate], *, q: float,
               correction: str) -> list[CaseFlag]:
    """Fisher's exact test for every case both campaigns measured, corrected across them; in key order."""
    both = sorted(k for k in current if k in baseline and current[k].measured > 0 and baseline[k].measured > 0)
    p_values = []
    for key in both:
        a, b = baseline[key], current[key]
        p_values.append(fisher_exact(a.passed, a.measured - a.passed, b.passed, b.measured - b.passed))
    adjusted = adjusted_p_values(p_values, correction)
    return [CaseFlag(key, baseline[key], current[key], p, adj, adj <= q)
            for key, p, adj in zip(both, p_values, adjusted, strict=True)]


# --- power ---------------------------------------------------------------------------------------------------


def power_multiplier(level: float = LEVEL, power: float = POWER) -> float:
    """``z_(1 - alpha/2) + z_power``: 1.959964 + 0.841621 = 2.801585 for 5% two-sided and 80% power."""
    return z_two_sided(level) + NORMAL.inv_cdf(power)


def _within_variances(rates: Sequence[CaseRate]) -> list[float]:
    """Each case's variance of its pass rate from its own trials, ``p (1 - p) / (k - 1)`` (unbiased for
    ``p (1 - p) / k``); a case measured once has none of its own and gets the spread of the campaign's
    case rates (which also holds how cases differ: an overestimate, never an under-)."""
    total = 0.0
    if len(rates) > 1:
        mean = sum(r.rate for r in rates) / len(rates)
        total = sum((r.rate - mean) ** 2 for r in rates) / (len(rates) - 1)
    return [r.rate * (1 - r.rate) / (r.measured - 1) if r.measured > 1 else total for r in rates]


def minimal_detectable_change(rates: Iterable[CaseRate]) -> float | None:
    """The smallest change in the campaign pass rate that a paired comparison of two campaigns of this design
    (the same cases, the same trials) detects with 80% power at 5% two-sided; None below two measured cases.

    The change ``d`` solves ``d = 2.8016 * sqrt(V_now + V_then(d)) / n``: ``V_now`` sums each case's
    within-case variance (:func:`_within_variances`), and ``V_then(d)`` is the same after every case's rate
    moved by ``d`` toward 50%, where the noise grows — ``sum v_i + d * sum (1 - 2 p_i) / k_i - d^2 sum 1 / k_i``
    with the sign that points to the middle. A change away from 50% is detected more often than 80%.
    """
    measured = [r for r in rates if r.measured > 0]
    if len(measured) < 2:
        return None
    n = len(measured)
    now = sum(_within_variances(measured))
    toward_middle = -1.0 if sum(r.rate for r in measured) / n > 0.5 else 1.0
    slope = toward_middle * sum((1 - 2 * r.rate) / r.measured for r in measured)
    curvature = sum(1 / r.measured for r in measured)
    change = power_multiplier() * sqrt(2 * now) / n
    for _ in range(100):  # a contraction: the variance changes far more slowly than the change itself
        then = max(0.0, now + change * slope - change * change * curvature)
        following = power_multiplier() * sqrt(now + then) / n
        if abs(following - change) < 1e-12:
            break
        change = following
    return change


MAX_TRIALS = 100  # the contract schema's limit of trials.count


def cases_for(effect: float, trials: int, variance: float = 0.25) -> int:
    """Cases for a paired comparison at ``trials`` trials per case to detect a change of ``effect`` (as
    :func:`trials_for`)."""
    if not 0 < effect <= 1 or trials < 1:
        raise ValueError("an effect between 0 and 1 and at least one trial")
    return max(2, ceil(2 * variance * power_multiplier() ** 2 / (trials * effect * effect)))


def trials_for(effect: float, cases: int, variance: float = 0.25) -> int:
    """Trials per case for a paired comparison over ``cases`` cases to detect a change of ``effect`` in the
    campaign pass rate with 80% power at 5% two-sided, when one trial's variance is ``variance`` (0.25, a
    pass rate of 50%, the worst case)."""
    if not 0 < effect <= 1 or cases < 1:
        raise ValueError("an effect between 0 and 1 and at least one case")
    return max(1, ceil(2 * variance * power_multiplier() ** 2 / (cases * effect * effect)))


# --- the receipt's statistics block and its outputs ----------------------------------------------------------


def statistics_block(rates: Sequence[CaseRate]) -> dict[str, object]:
    """What the receipt records: the campaign pass rate (None when no case measured anything), the trials it
    rests on, and the minimal detectable change of a paired comparison of this design (None below 2 cases)."""
    estimate = campaign_pass_rate(rates)
    change = minimal_detectable_change(rates)
    return {"pass-rate": estimate.to_json(clamp=True) if estimate is not None else None,
            "trials": sum(r.measured for r in rates), "not-measured": sum(1 for r in rates if r.measured == 0),
            "minimal-detectable-change": round(change, 6) if change is not None else None}


def pass_rate_outputs(block: Mapping[str, object]) -> dict[str, str]:
    """``pass-rate`` and ``pass-rate-ci`` (``[low,high]``), empty when no case measured anything."""
    rate = block.get("pass-rate")
    if not isinstance(rate, Mapping):
        return {"pass-rate": "", "pass-rate-ci": ""}
    interval = rate["interval-95"]
    return {"pass-rate": f"{rate['mean']}", "pass-rate-ci": f"[{interval[0]},{interval[1]}]" if interval else ""}


def render(block: Mapping[str, Any]) -> str:
    """The summary section of the campaign pass rate (export and verify show the same), from the receipt's
    ``statistics`` (its schema makes every figure a number)."""
    rate = block.get("pass-rate")
    head = "\n### Campaign pass rate\n\n"
    if not isinstance(rate, Mapping):
        return head + "No case measured anything (every case broken): there is no pass rate.\n"
    interval = rate["interval-95"]
    shown = (f"95% interval {interval[0] * 100:.1f}%–{interval[1] * 100:.1f}%, standard error "
             f"{rate['standard-error'] * 100:.1f} points" if interval else
             "no interval: too few cases or clusters to estimate the spread")
    grouping = ("clustered by case" if rate["clusters"] == rate["cases"]
                else f"clustered in {rate['clusters']} groups of cases that share a fixture")
    line = (f"**{rate['mean'] * 100:.1f}%** ({shown}) — the mean over {rate['cases']} cases of each case's "
            f"pass rate over its measured trials ({block['trials']} trials), {grouping}")
    if block.get("not-measured"):
        line += f"; {block['not-measured']} case(s) measured nothing and are not in it"
    change = block.get("minimal-detectable-change")
    if isinstance(change, float | int) and change == 0:
        line += (".\n\n**Power:** every case gave the same result on every trial: no spread to estimate the "
                 "smallest detectable change from")
    elif isinstance(change, float | int) and change >= 1:
        line += (".\n\n**Power:** too few cases or trials for a paired comparison of two campaigns of this design "
                 "to detect any change in the pass rate with 80% power (5% two-sided)")
    elif isinstance(change, float | int):
        line += (f".\n\n**Power:** a paired comparison of two campaigns of this design detects a change of "
                 f"±{change * 100:.1f} points in the pass rate with 80% power (5% two-sided)")
    return head + line + ".\n"
