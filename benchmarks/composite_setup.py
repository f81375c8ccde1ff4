#!/usr/bin/env python3
"""The composite action's per-job set-up, cold: uv against pip, the same lock, interleaved.

    python3 benchmarks/composite_setup.py [--pairs 5]
    python3 benchmarks/composite_setup.py --once uv|pip     # one cold set-up (to time it from outside)

Every campaign job on a hosted runner starts with an empty tool cache and pays ``composite/setup.sh``:
a venv with ``requirements/runtime.txt`` installed ``--require-hashes``. Each run here is that step as
the runner starts it (``GITHUB_ACTION_PATH``, ``GITHUB_OUTPUT``, ``GITHUB_PATH``, a fresh
``RUNNER_TOOL_CACHE`` and ``RUNNER_TEMP``), cold: nothing cached by an earlier run, uv fetched from PyPI
by the runner's pip as on a fresh runner. Side A is the default (uv), side B the same step with
``TESTOPS_EVIDENCE_INSTALLER=pip`` (the venv built by pip, as before uv). Both download from the package
index, so the figures include the network: quote the medians with their range and the load.

Prints each pair, then per side the median and range of the wall time and the median of the pairwise
ratios B/A. No test asserts a figure; the figures and this command are in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "composite" / "setup.sh"


def cold_setup(installer: str) -> float:
    """One cold set-up in a fresh runner layout; returns its wall time in seconds (fails loudly)."""
    root = Path(tempfile.mkdtemp(prefix=f"testops-evidence-bench-setup-{installer}-"))
    try:
        for name in ("tool-cache", "temp"):
            (root / name).mkdir()
        (root / "output").touch()
        (root / "path").touch()
        env = {**os.environ, "GITHUB_ACTION_PATH": str(ROOT / "composite"), "GITHUB_OUTPUT": str(root / "output"),
               "GITHUB_PATH": str(root / "path"), "RUNNER_TOOL_CACHE": str(root / "tool-cache"),
               "RUNNER_TEMP": str(root / "temp"), "TESTOPS_EVIDENCE_INSTALLER": installer}
        start = time.perf_counter()
        done = subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0 or "python=" not in (root / "output").read_text():
            raise SystemExit(f"composite/setup.sh ({installer}) failed, exit {done.returncode}:\n"
                             f"{done.stdout}{done.stderr}")
        built = "built with uv" if "venv built with uv" in done.stdout else "built with pip"
        if (installer == "uv") != (built == "built with uv"):
            raise SystemExit(f"composite/setup.sh ({installer}) {built}:\n{done.stdout}{done.stderr}")
        return elapsed
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="uv, pip pairs to run (default 5)")
    parser.add_argument("--once", choices=("uv", "pip"), help="run one cold set-up and print its wall time")
    args = parser.parse_args()
    if args.once:
        print(f"{args.once}: {cold_setup(args.once):.2f} s")
        return 0
    uv_times: list[float] = []
    pip_times: list[float] = []
    for pair in range(1, args.pairs + 1):
        uv_times.append(cold_setup("uv"))
        pip_times.append(cold_setup("pip"))
        print(f"pair {pair}: uv {uv_times[-1]:.2f} s, pip {pip_times[-1]:.2f} s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    ratios = [p / u for u, p in zip(uv_times, pip_times, strict=True)]
    for name, times in (("uv", uv_times), ("pip", pip_times)):
        print(f"{name}: median {statistics.median(times):.2f} s (range {min(times):.2f}-{max(times):.2f} s)")
    print(f"pip / uv: median {statistics.median(ratios):.1f}x (pairs {min(ratios):.1f}-{max(ratios):.1f})")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
