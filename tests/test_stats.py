"""The statistics of a campaign (campaign/stats.py, issue 25): each against published values or an independent
reference computed here, and one small seeded simulation of what the statistics promise."""

from __future__ import annotations

import random
import statistics
from fractions import Fraction
from math import comb, sqrt

import pytest

from testops_evidence.campaign import stats
from testops_evidence.campaign.stats import CaseRate


def exact_fisher(a: int, b: int, c: int, d: int) -> Fraction:
    """Fisher's two-sided p-value in exact rational arithmetic: the reference the log-space sum must match."""
    row, column, total = a + b, a + c, a + b + c + d
    def probability(x: int) -> Fraction:
        return Fraction(comb(column, x) * comb(total - column, row - x), comb(total, row))
    observed = probability(a)
    return sum((probability(x) for x in range(max(0, row + column - total), min(row, column) + 1)
                if probability(x) <= observed), Fraction(0))


def test_fishers_exact_test_matches_published_values() -> None:
    # Fisher's lady tasting tea, [[3, 1], [1, 3]]: two-sided p = 0.4857 (Agresti, Categorical Data Analysis,
    # 2nd ed., section 3.5.2; R: fisher.test(matrix(c(3, 1, 1, 3), 2)) gives 0.4857).
    assert stats.fisher_exact(3, 1, 1, 3) == pytest.approx(0.4857142857, abs=1e-9)
    # Wikipedia, "Fisher's exact test", the studying men and women example [[1, 9], [11, 3]]: 0.002759.
    assert stats.fisher_exact(1, 9, 11, 3) == pytest.approx(0.002759456, abs=1e-9)
    # A single trial each, one flip: no evidence at all.
    assert stats.fisher_exact(1, 0, 0, 1) == 1.0


@pytest.mark.parametrize("table", [(10, 0, 2, 8), (7, 3, 3, 7), (0, 5, 5, 0), (12, 38, 20, 30), (1, 1, 1, 1),
                                   (0, 10, 0, 10), (4, 0, 0, 0), (33, 17, 25, 25)])
def test_fishers_exact_test_equals_the_exact_rational_sum(table: tuple[int, int, int, int]) -> None:
    assert stats.fisher_exact(*table) == pytest.approx(float(exact_fisher(*table)), rel=1e-9, abs=1e-15)


def test_fishers_exact_test_stays_finite_for_counts_in_the_thousands() -> None:
    p = stats.fisher_exact(1500, 500, 1400, 600)
    assert 0 < p < 1
    assert stats.fisher_exact(1500, 500, 1500, 500) == pytest.approx(1.0)


BENJAMINI_HOCHBERG_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240,
                           0.4262, 0.5719, 0.6528, 0.7590, 1.000]


def test_the_corrections_reject_what_the_published_example_rejects() -> None:
    # Benjamini and Hochberg (1995), section 4: the 15 p-values of a study of myocardial infarction; at 0.05
    # their procedure rejects 4 hypotheses, Holm's (and Bonferroni's) 3.
    shuffled = BENJAMINI_HOCHBERG_1995[::-1]  # the order given must not matter
    bh = stats.adjusted_p_values(shuffled, "benjamini-hochberg")
    holm = stats.adjusted_p_values(shuffled, "holm")
    assert sorted(p for p, adj in zip(shuffled, bh, strict=True) if adj <= 0.05) == BENJAMINI_HOCHBERG_1995[:4]
    assert sorted(p for p, adj in zip(shuffled, holm, strict=True) if adj <= 0.05) == BENJAMINI_HOCHBERG_1995[:3]
    # R: p.adjust(p, "BH")[4] = 0.0095 * 15 / 4 = 0.035625; p.adjust(p, "holm")[3] = 0.0019 * 13 = 0.0247.
    assert bh[shuffled.index(0.0095)] == pytest.approx(0.035625)
    assert holm[shuffled.index(0.0019)] == pytest.approx(0.0247)
    with pytest.raises(ValueError):
        stats.adjusted_p_values([0.1], "bonferroni")


def test_one_case_per_cluster_is_the_classical_standard_error() -> None:
    values = [1.0, 0.5, 0.0, 1.0, 0.75, 0.25, 1.0, 1.0]
    estimate = stats.clustered_mean(values, [f"case:{i}" for i in range(len(values))])
    assert estimate is not None
    assert estimate.mean == pytest.approx(statistics.fmean(values))
    assert estimate.standard_error == pytest.approx(statistics.stdev(values) / sqrt(len(values)))


def test_the_clustered_standard_error_is_the_sandwich_estimator() -> None:
    # The reference: the cluster-robust sandwich (X'X)^-1 (sum_g X_g' e_g e_g' X_g) (X'X)^-1 of an
    # intercept-only regression, written out for X = a column of ones, times Stata's G / (G - 1) (N - 1) / (N - K)
    # with K = 1; the clusters of unequal size.
    values = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.25, 1.0, 0.0, 0.75]
    clusters = ["a", "a", "a", "b", "b", "c", "d", "d", "d", "d"]
    n, groups = len(values), sorted(set(clusters))
    beta = sum(values) / n
    bread = 1 / n
    meat = sum(sum(v - beta for v, c in zip(values, clusters, strict=True) if c == g) ** 2 for g in groups)
    factor = len(groups) / (len(groups) - 1) * (n - 1) / (n - 1)
    reference = sqrt(factor * bread * meat * bread)
    estimate = stats.clustered_mean(values, clusters)
    assert estimate is not None and estimate.clusters == 4
    assert estimate.standard_error == pytest.approx(reference)
    # Cases that share a fixture and move together widen the interval.
    together, shared = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0], list("aaabbbccdd")
    alone = stats.clustered_mean(together, [str(i) for i in range(n)])
    grouped = stats.clustered_mean(together, shared)
    assert alone is not None and grouped is not None and alone.standard_error < grouped.standard_error
    single = stats.clustered_mean(values, ["one"] * n)
    assert single is not None and single.to_json(clamp=True)["interval-95"] is None


def test_the_paired_difference_is_a_one_sample_z_test_of_the_per_case_differences() -> None:
    before = {f"c{i}": CaseRate(f"c{i}", p, 4, f"c{i}") for i, p in enumerate([4, 3, 2, 4, 1, 0, 4, 3])}
    now = {f"c{i}": CaseRate(f"c{i}", p, 4, f"c{i}") for i, p in enumerate([4, 4, 3, 4, 2, 1, 3, 4])}
    now["new"] = CaseRate("new", 1, 1, "new")
    before["gone"] = CaseRate("gone", 0, 1, "gone")
    before["c7"] = CaseRate("c7", 0, 0, "c7")  # measured nothing then: not paired
    difference = stats.paired_difference(before, now)
    assert difference is not None
    d = [(now[k].passed - before[k].passed) / 4 for k in (f"c{i}" for i in range(7))]
    se = statistics.stdev(d) / sqrt(len(d))
    assert difference.estimate.mean == pytest.approx(statistics.fmean(d))
    assert difference.estimate.standard_error == pytest.approx(se)
    z = statistics.fmean(d) / se
    assert difference.p_value == pytest.approx(2 * (1 - statistics.NormalDist().cdf(abs(z))))
    assert (difference.only_baseline, difference.only_current) == (1, 2)  # gone; new and c7
    low, high = difference.estimate.interval
    assert difference.verdict == ("better" if low > 0 else "worse" if high < 0 else "no detectable change")


def test_the_power_multiplier_and_the_trials_per_case() -> None:
    # z_0.975 + z_0.80 = 1.959964 + 0.841621 (any normal table).
    assert stats.power_multiplier() == pytest.approx(2.801585, abs=1e-6)
    # Two campaigns of n cases and k trials at a pass rate of 50%: SE of the paired difference sqrt(2 * 0.25 / (k n)).
    # 100 cases, 5 points: k >= 2 * 0.25 * 2.801585^2 / (100 * 0.05^2) = 15.70 -> 16.
    assert stats.trials_for(0.05, 100) == 16
    assert stats.trials_for(0.5, 1000) == 1
    with pytest.raises(ValueError):
        stats.trials_for(0, 10)


def test_the_minimal_detectable_change_from_the_within_case_variance() -> None:
    counts = (5, 4, 3, 5, 2, 0)
    rates = [CaseRate(f"c{i}", p, 5, f"c{i}") for i, p in enumerate(counts)]
    # The reference: the power of the two-sided z-test of the paired difference, 1 - Phi(1.96 - d / SE(d)),
    # with SE(d)^2 = (sum of the cases' variances now + after every rate moved by d toward 50%) / n^2, each
    # case's variance p(1 - p) / k estimated without bias by p^(1 - p^) / (k - 1); found by bisection.
    n, k = len(counts), 5
    mean = sum(counts) / (n * k)
    sign = -1 if mean > 0.5 else 1
    def power(d: float) -> float:
        now = sum((c / k) * (1 - c / k) / (k - 1) for c in counts)
        then = sum((c / k) * (1 - c / k) / (k - 1) + sign * d * (1 - 2 * c / k) / k - d * d / k for c in counts)
        return 1 - statistics.NormalDist().cdf(1.959964 - d / (sqrt(now + max(then, 0)) / n))
    low, high = 0.0, 1.0
    for _ in range(60):
        low, high = (low, (low + high) / 2) if power((low + high) / 2) >= 0.8 else ((low + high) / 2, high)
    assert stats.minimal_detectable_change(rates) == pytest.approx(high, abs=1e-5)
    # At 50% a move in either direction leaves the noise as it is, to first order: sqrt(2) * 2.8016 * SE.
    even = [CaseRate(f"c{i}", 1 + i % 2, 3, f"c{i}") for i in range(1000)]  # rates 1/3 and 2/3: mean 0.5
    within = sum((r.rate * (1 - r.rate)) / 2 for r in even)
    assert stats.minimal_detectable_change(even) == pytest.approx(
        stats.power_multiplier() * sqrt(2 * within) / 1000, rel=0.01)
    assert stats.minimal_detectable_change(rates[:1]) is None


def test_a_seeded_simulation_keeps_the_promises() -> None:
    """Identical agents: the per-case flags stay quiet and the interval covers; a planted change of the promised
    size is found about 80% of the time (the full grid is benchmarks/comparisons.py)."""
    rng = random.Random(25)
    cases, trials, rate = 200, 4, 0.7

    def campaign(p: float) -> dict[str, CaseRate]:
        return {f"c{i}": CaseRate(f"c{i}", sum(rng.random() < p for _ in range(trials)), trials, f"c{i}")
                for i in range(cases)}

    covered = flagged = detected = 0
    runs = 200
    for _ in range(runs):
        a, b = campaign(rate), campaign(rate)
        estimate = stats.campaign_pass_rate(a.values())
        assert estimate is not None
        low, high = estimate.interval
        covered += low <= rate <= high
        flagged += sum(f.flagged for f in stats.case_flags(a, b, q=0.05, correction="benjamini-hochberg"))
        change = stats.minimal_detectable_change(list(a.values()))
        assert change is not None
        planted = campaign(rate - change)
        difference = stats.paired_difference(a, planted)
        assert difference is not None
        detected += difference.verdict == stats.WORSE
    # Binomial(200, 0.95) lies in 180..197 with probability > 0.999; Binomial(200, 0.8) in 140..180.
    assert 180 <= covered <= 197
    assert flagged <= 10  # under the null any flag is a false one: BH keeps P(any) <= q per comparison
    assert 140 <= detected <= 180


def test_the_trend_chart_carries_only_our_labels() -> None:
    """The Mermaid chart of the pass rate over the last runs is built from run numbers and percentages only;
    a receipt's free text (its creation time) reaches the summary only through md, in the table."""
    from testops_evidence.campaign.previous import render_trend

    hostile = "```\n</details><script>alert(1)</script>"
    rate = {"mean": 0.5, "standard-error": 0.1, "interval-95": [0.3, 0.7], "cases": 10, "clusters": 10}
    points = [{"run-id": 7, "head-sha": "a" * 40, "created-at": hostile, "pass-rate": rate},
              {"run-id": 8, "head-sha": "b" * 40, "created-at": "2026-12-04T10:00:00Z", "pass-rate": None}]
    shown = render_trend(points)
    chart = shown.split("```mermaid\n")[1].split("```")[0] if "```mermaid" in shown else ""
    assert chart == ""  # one point with a pass rate: no chart to draw, the table alone
    assert "<script>" not in shown and "\n</details>" not in shown and shown.count("```") == 0
    points[1]["pass-rate"] = rate
    shown = render_trend(points)
    chart = shown.split("```mermaid\n")[1].split("```")[0]
    assert 'x-axis ["run 7", "run 8"]' in chart and "line [30.0, 30.0]" in chart
    assert "<script>" not in shown and shown.count("```") == 2
