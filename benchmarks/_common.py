"""Shared helpers for the benchmarks: timing (best of N, CPU-noise tolerant) and result printing.

Benchmarks print *ratios measured in one run* — both sides of a ratio are measured back to back on the
same machine, so a shared, noisy machine shifts both and the ratio stays meaningful.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class Figure:
    name: str
    value: float
    target: str
    ok: bool
    detail: str = ""


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Minimum wall time of ``repeat`` runs (the least disturbed run)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def median_of(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_cmd(argv: Sequence[str], **kwargs: object) -> Callable[[], None]:
    def call() -> None:
        subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       **kwargs)  # type: ignore[call-overload]

    return call


def interleaved(a: Callable[[], object], b: Callable[[], object], repeat: int = 7,
                setup: Callable[[], object] | None = None) -> tuple[float, float]:
    """Time ``a`` and ``b`` alternately (a, b, a, b, ...) and return the best of each.

    Alternating spreads background load over both sides instead of penalising whichever ran second.
    ``setup`` runs untimed before every call (e.g. remove the last output and ``os.sync()``, so that the
    disk's writeback of one side is not billed to the other).
    """
    ta, tb = interleaved_runs(a, b, repeat, setup)
    return min(ta), min(tb)


def interleaved_runs(a: Callable[[], object], b: Callable[[], object], repeat: int = 7,
                     setup: Callable[[], object] | None = None) -> tuple[list[float], list[float]]:
    """Like :func:`interleaved`, but every run's wall time of each side, in order: run ``i`` of ``a`` and run
    ``i`` of ``b`` are a pair measured back to back, so their ratio holds when the machine's speed drifts."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        for side, times in ((a, ta), (b, tb)):
            if setup is not None:
                setup()
            start = time.perf_counter()
            side()
            times.append(time.perf_counter() - start)
    return ta, tb


def median_ratio(ta: Sequence[float], tb: Sequence[float]) -> float:
    """The median of the pairwise ratios a[i] / b[i] (what is quoted: robust to one disturbed pair)."""
    return statistics.median(x / y for x, y in zip(ta, tb, strict=True))


def min_max_ratio(ta: Sequence[float], tb: Sequence[float]) -> str:
    ratios = [x / y for x, y in zip(ta, tb, strict=True)]
    return f"{min(ratios):.2f}-{max(ratios):.2f}"


def print_figures(figures: list[Figure]) -> None:
    width = max(len(f.name) for f in figures)
    for f in figures:
        mark = "ok  " if f.ok else "MISS"
        print(f"{mark} {f.name.ljust(width)}  {f.value:10.4f}   target {f.target}   {f.detail}")
