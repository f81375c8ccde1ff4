#!/usr/bin/env python3
"""Export's peak memory with a hostile worker artifact, at 1x and 100x its size (issue 24, item 5).

    .venv/bin/python benchmarks/hostile_artifact.py [--quick] [--smoke]

Also run by ``benchmarks/run.py --only hostile``. The artifact is the issue's reproduction: the worker of
one case leaves 160 cell files in its case directory, each a valid cell of that case padded with
whitespace (valid JSON) — 40 KiB each (6.4 MiB in all) at 1x, 4 MiB each (640 MiB) at 100x. Each figure
is a whole ``export`` process (interpreter start to exit; peak memory its own ``ru_maxrss``, taken as in
``yaml_load.run_child``) under the runner's variables, in two trust policies:

* ``run-attempts: first-only`` — more cells than the case has trials: refused ``export.duplicate_cell``;
* ``run-attempts: any`` — where many attempts are allowed: refused ``export.case_budget`` at 100x (over the
  32 MiB of cells a case directory may hold); at 1x the 6.4 MiB are within the budget and are read.

The target: the 100x artifact refused with a code at a peak of at most 200 MB, and the 100x / 1x ratio of
peaks near 1 (flat). Before the budgets, export read the whole 640 MiB first (683 MiB peak, 26 s).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "benchmarks", ROOT / "tests", ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from _common import Figure, print_figures  # noqa: E402
from yaml_load import run_child  # noqa: E402

# bin/testops-evidence, with this tree's sources first: an editable install may point at another checkout.
LAUNCH = "import sys; sys.path.insert(0, sys.argv.pop(1)); from testops_evidence.cli import main; sys.exit(main())"
COMMAND = [sys.executable, "-I", "-c", LAUNCH, str(ROOT / "src")]
MIB = 1024 * 1024
FILES = 160
OWNER = "native-get-task-context"  # the worker job of case get-task-context in the small contract's plan


def artifact(work: Path, run_attempts: str, each: int) -> tuple[list[str], dict[str, str], int]:
    """An export of the small contract whose cell-results holds the hostile artifact; its arguments, its
    environment and the artifact's size in bytes."""
    from evidence_support import actions_env, bound_to, cell, make_selection, small_contract, write_contract
    from testops_evidence.safeio import canonical_json

    work.mkdir(parents=True)
    contract = small_contract(run_attempts=run_attempts)
    env = actions_env()
    contract_path = write_contract(contract, work / "contract.json")
    selection, digest = make_selection(work, contract, env)
    case_dir = work / "cell-results" / f"testops-evidence-cells-1-{OWNER}" / "get-task-context"
    case_dir.mkdir(parents=True)
    padding = b" " * MIB
    for index in range(FILES):
        # Distinct attempts, each finishing at its own second: under run-attempts any, honest-looking at 1x.
        document = cell(contract, "get-task-context", attempt=f"flood-{index}", started="2026-12-01T09:00:00Z",
                        finished=f"2026-12-01T10:{index // 60:02}:{index % 60:02}Z")
        head = canonical_json(bound_to(document, digest))
        with (case_dir / f"cell-{index:04}.json").open("wb") as out:
            out.write(head)
            left = each - len(head)
            while left > 0:
                left -= out.write(padding[:left])
    argv = [*COMMAND, "export", "--contract", str(contract_path), "--selection-path", str(selection),
            "--selection-sha256", digest, "--cell-results", str(work / "cell-results"),
            "--artifact-prefix", "testops-evidence", "--results-dir", str(work / "out" / "allure-results"),
            "--state-dir", str(work / "state")]
    child_env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}, **env,
                 "GITHUB_OUTPUT": str(work / "output"), "GITHUB_STEP_SUMMARY": str(work / "summary.md")}
    return argv, child_env, FILES * each


def measure(work: Path, run_attempts: str, each: int, repeat: int) -> tuple[float, int, int, str, int]:
    """Best wall seconds, highest peak RSS, exit code and error code of ``repeat`` exports, and the size."""
    argv, env, size = artifact(work, run_attempts, each)
    runs = []
    for _ in range(repeat):
        shutil.rmtree(work / "state", ignore_errors=True)
        shutil.rmtree(work / "out", ignore_errors=True)
        runs.append(run_child(argv, env))
    failure = work / "state" / "failure.json"
    code = json.loads(failure.read_text())["code"] if failure.exists() else "-"
    shutil.rmtree(work)
    return min(r[0] for r in runs), max(r[2] for r in runs), runs[-1][1], code, size


def bench_hostile(cfg: Any) -> list[Figure]:
    smoke = getattr(cfg, "smoke", False)
    repeat = 1 if smoke else (2 if getattr(cfg, "quick", False) else 3)
    small, large = (4 * 1024, 40 * 1024) if smoke else (40 * 1024, 4 * MIB)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"testops-evidence-bench-hostile-{os.getpid()}"
    figures: list[Figure] = []
    try:
        for run_attempts in ("first-only", "any"):
            one = measure(work / f"{run_attempts}-1x", run_attempts, small, repeat)
            hundred = measure(work / f"{run_attempts}-100x", run_attempts, large, repeat)
            refused = hundred[2] == 3 and hundred[3] in ("export.duplicate_cell", "export.case_budget")
            flat = hundred[1] <= 200 * 1000 * 1000 and refused
            detail = (f"1x {one[4] / MIB:.1f} MiB: peak {one[1] / MIB:.0f} MiB, {one[0]:.2f} s, exit {one[2]} "
                      f"{one[3]}; 100x {hundred[4] / MIB:.0f} MiB: peak {hundred[1] / MIB:.0f} MiB, "
                      f"{hundred[0]:.2f} s, exit {hundred[2]} {hundred[3]}")
            figures.append(Figure(f"export, {FILES} cells in one case directory, run-attempts {run_attempts}: "
                                  "peak 100x / 1x", hundred[1] / one[1], "100x refused with a code at <= 200 MB",
                                  smoke or flat, detail))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]

    class Cfg:
        smoke = "--smoke" in args
        quick = "--quick" in args

    figures = bench_hostile(Cfg())
    print_figures(figures)
    return 1 if any(not f.ok for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
