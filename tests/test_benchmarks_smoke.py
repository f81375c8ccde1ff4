"""benchmarks/run.py keeps working: one tiny configuration of every benchmark (no timing is asserted;
the figures of a smoke run mean nothing, and the real ones are in BENCHMARKS.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_benchmark_runs_in_its_smoke_configuration() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run.py"), "--smoke"], capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in ("select+matrices", "export of 20 cells", "verify requests per result (100 results",
                   "upload requests per result (100 results)", "sha256_file / openssl", "import t(20)/t(10)",
                   "start-up verify-selection", "start-up --version", "export of 4 cases x 3 trials",
                   "verify requests per result (4 x 3 trials"):
        assert figure in done.stdout, done.stdout
    assert "0 of " in done.stdout


def test_an_unknown_benchmark_name_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run.py"), "--smoke", "--only", "nope"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and "unknown benchmark" in done.stderr


def test_the_comparison_simulation_runs_in_its_smoke_configuration() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "comparisons.py"), "--smoke"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 comparisons of identical agents over 2 designs" in done.stdout and "| **all** | 4 |" in done.stdout
