#!/usr/bin/env python3
"""Do the comparison's statistics keep their promises? A simulation of campaigns of identical agents (issue 25).

    .venv/bin/python benchmarks/comparisons.py [--reps 20] [--seed 25] [--spread 0] [--smoke]

Over a grid of designs — cases 50, 200, 500, 2,000; trials per case 1, 3, 5, 10; true pass rates 0.1, 0.5,
0.8, 0.95 — each repetition simulates a baseline campaign A and a campaign B of the *same* agent, and a
campaign C of an agent whose every case's pass rate moved by the minimal detectable change that A's power
line promises (down above a rate of 0.5, up below). Printed, per trial count and in all:

* **false flags** (campaign/stats.py): the share of A-B comparisons with any per-case flag. Every case is
  unchanged, so any flag is a false discovery: this share is the false discovery rate, which
  Benjamini-Hochberg keeps at or below q = 0.05;
* **FDR with real changes**: a campaign D where a tenth of the cases really changed (their rate moved by 0.4
  toward the middle), compared with A: the mean share of the flagged cases that did not change (0 when
  none is flagged) — the false discovery rate when there is something to discover;
* **coverage**: the share of campaigns A whose 95% interval of the campaign pass rate holds the true rate,
  and of A-B comparisons whose interval of the paired difference holds 0 (target 94-96%);
* **detection**: the share of A-C comparisons whose verdict is the planted direction (target 80% +- 5);
* **today** (campaign/previous.newcombe, the comparison before issue 25, run on the same campaigns): cases
  flagged "pass rate changed beyond noise" per comparison, regressions per comparison (those plus the
  verdicts that went from passed to not passed under the verdict policy ``all``), and the share of
  comparisons with any regression.

``--spread c`` draws each case's true rate from a Beta distribution of that mean and concentration ``c``
(cases of different difficulty); 0, the default, gives every case the same rate, as the issue's table did.
The figures and this command are in BENCHMARKS.md; no test asserts them (tests/test_stats.py has a small
seeded run).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from testops_evidence.campaign import stats  # noqa: E402
from testops_evidence.campaign.previous import newcombe  # noqa: E402
from testops_evidence.campaign.stats import CaseRate  # noqa: E402

CASES = (50, 200, 500, 2_000)
TRIALS = (1, 3, 5, 10)
RATES = (0.1, 0.5, 0.8, 0.95)
Q = 0.05


class Tally:
    """Counts of one group of designs."""

    def __init__(self) -> None:
        self.comparisons = 0
        self.any_flag = 0
        self.flags = 0
        self.covered = 0
        self.covered_difference = 0
        self.detected = 0
        self.false_share = 0.0
        self.today_changed = 0
        self.today_regressions = 0
        self.today_any = 0

    def add(self, other: Tally) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)


def true_rates(rng: random.Random, cases: int, rate: float, spread: float) -> list[float]:
    if spread <= 0:
        return [rate] * cases
    return [rng.betavariate(rate * spread, (1 - rate) * spread) for _ in range(cases)]


def campaign(rng: random.Random, rates: list[float], trials: int) -> dict[str, CaseRate]:
    return {f"c{i}": CaseRate(f"c{i}", sum(rng.random() < r for _ in range(trials)), trials, f"c{i}")
            for i, r in enumerate(rates)}


def flagged(a: dict[str, CaseRate], b: dict[str, CaseRate], cache: dict[tuple[int, int, int, int], float]) -> list[str]:
    """Cases flagged after Benjamini-Hochberg (Fisher's p-values memoised: the tables repeat)."""
    p_values = []
    for key, x in a.items():
        y = b[key]
        table = (x.passed, x.measured - x.passed, y.passed, y.measured - y.passed)
        if table not in cache:
            cache[table] = stats.fisher_exact(*table)
        p_values.append(cache[table])
    adjusted = stats.adjusted_p_values(p_values, "benjamini-hochberg")
    return [key for key, p in zip(a, adjusted, strict=True) if p <= Q]


def today(a: dict[str, CaseRate], b: dict[str, CaseRate], trials: int) -> tuple[int, int]:
    """(cases flagged beyond noise, regressions) as previous.compare did before issue 25: a Newcombe interval
    per repeated case excluding 0, and every verdict (policy all) that went from passed to not passed."""
    changed = regressions = 0
    for key, x in a.items():
        y = b[key]
        newly_failing = x.passed == trials and y.passed < trials
        drop = False
        if trials > 1:
            interval = newcombe(x.passed, trials, y.passed, trials)
            assert interval is not None
            changed += interval[1] < 0 or interval[0] > 0
            drop = interval[1] < 0
        regressions += newly_failing or drop
    return changed, regressions


def simulate(cases: int, trials: int, rate: float, reps: int, spread: float, rng: random.Random,
             cache: dict[tuple[int, int, int, int], float]) -> Tally:
    tally = Tally()
    for _ in range(reps):
        truth = true_rates(rng, cases, rate, spread)
        a, b = campaign(rng, truth, trials), campaign(rng, truth, trials)
        tally.comparisons += 1
        found = len(flagged(a, b, cache))
        tally.flags += found
        tally.any_flag += found > 0
        estimate = stats.campaign_pass_rate(a.values())
        assert estimate is not None
        low, high = estimate.interval
        tally.covered += low <= rate <= high
        difference = stats.paired_difference(a, b)
        assert difference is not None
        low, high = difference.estimate.interval
        tally.covered_difference += low <= 0 <= high
        change = stats.minimal_detectable_change(list(a.values()))
        assert change is not None
        direction = -1 if rate > 0.5 else 1
        moved = [min(1.0, max(0.0, r + direction * change)) for r in truth]
        planted = stats.paired_difference(a, campaign(rng, moved, trials))
        assert planted is not None
        tally.detected += planted.verdict == (stats.WORSE if direction < 0 else stats.BETTER)
        real = set(list(a)[: cases // 10])
        mixed = [min(1.0, max(0.0, r + (0.4 if r < 0.5 else -0.4))) if f"c{i}" in real else r
                 for i, r in enumerate(truth)]
        found_mixed = flagged(a, campaign(rng, mixed, trials), cache)
        tally.false_share += sum(1 for key in found_mixed if key not in real) / max(1, len(found_mixed))
        changed, regressions = today(a, b, trials)
        tally.today_changed += changed
        tally.today_regressions += regressions
        tally.today_any += regressions > 0
    return tally


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%"


def row(label: str, t: Tally) -> str:
    n = t.comparisons
    return (f"| {label} | {n} | {percent(t.any_flag, n)} | {t.flags / n:.3f} | {100 * t.false_share / n:.1f}% | "
            f"{percent(t.covered, n)} | "
            f"{percent(t.covered_difference, n)} | {percent(t.detected, n)} | {t.today_changed / n:.1f} | "
            f"{t.today_regressions / n:.1f} | {percent(t.today_any, n)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20, help="comparisons per design (64 designs)")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--spread", type=float, default=0.0, help="Beta concentration of case rates; 0: equal")
    parser.add_argument("--smoke", action="store_true", help="two tiny designs, to keep the script working")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    cache: dict[tuple[int, int, int, int], float] = {}
    grid = [(50, 1, 0.5), (50, 3, 0.8)] if args.smoke else [(n, k, p) for n in CASES for k in TRIALS for p in RATES]
    reps = 2 if args.smoke else args.reps
    started = time.perf_counter()
    by_trials: dict[int, Tally] = defaultdict(Tally)
    by_rate: dict[float, Tally] = defaultdict(Tally)
    by_cases: dict[int, Tally] = defaultdict(Tally)
    every = Tally()
    worst: list[tuple[float, str]] = []
    for n, k, p in grid:
        tally = simulate(n, k, p, reps, args.spread, rng, cache)
        for group in (by_trials[k], by_rate[p], by_cases[n], every):
            group.add(tally)
        worst.append((tally.covered / tally.comparisons, f"{n} cases x {k} trials at {p}"))
    print(f"{every.comparisons} comparisons of identical agents over {len(grid)} designs, {reps} each "
          f"(seed {args.seed}, spread {args.spread:g}), {time.perf_counter() - started:.0f} s\n")
    print("| designs | comparisons | with a false flag (FDR, q = 0.05) | false flags per comparison | "
          "FDR with real changes | "
          "pass-rate interval covers | difference interval covers 0 | detected at the promised change | "
          "today: flagged per comparison | today: regressions per comparison | today: with a regression |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k, t in sorted(by_trials.items()):
        print(row(f"{k} trial(s)", t))
    for p, t in sorted(by_rate.items()):
        print(row(f"pass rate {p:g}", t))
    for n, t in sorted(by_cases.items()):
        print(row(f"{n} cases", t))
    print(row("**all**", every))
    worst.sort()
    print("\nLowest coverage of the pass-rate interval, by design: "
          + "; ".join(f"{label} {share * 100:.0f}%" for share, label in worst[:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
