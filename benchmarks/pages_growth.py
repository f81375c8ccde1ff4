#!/usr/bin/env python3
"""How large a GitHub Pages branch of Allure reports grows, run after run: the prior art's way against ours.

    .venv/bin/python benchmarks/pages_growth.py [--runs 60] [--cases 12] [--keep 20]

Each simulated run writes a fresh allure-results directory (statuses vary from run to run), builds its report
with the pinned Allure Report 3 continuing the previous report's history, and publishes it to three Pages
branches, each in a git repository of its own:

* ``prior art`` — what simple-elf/allure-report-action and andgineer/allure-report do, read from their code:
  every report in a directory named by the run, the newest ``keep`` kept (their default: 20), the history
  copied to ``last-history/``, an ``index.html`` redirect, and one commit per run on top of the branch (the
  default of peaceiris/actions-gh-pages, which both document for the push);
* ``ours, squash`` — ``testops-evidence pages`` (publication/site.py) with ``pages-history: squash``, the
  template's default: one parentless commit of the kept reports replaces the branch;
* ``ours, keep`` — the same with ``pages-history: keep``: one commit per report.

Printed per checkpoint: the branch's tree (what Pages serves), the repository after ``git gc`` (what a full
clone downloads and the branch's history keeps), and the number of commits. No test asserts a figure; the
figures and this command are in docs/reports.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from testops_evidence.publication import report as report_tool  # noqa: E402
from testops_evidence.publication import site  # noqa: E402

STATUSES = ("passed", "passed", "passed", "failed", "broken")


def results(directory: Path, run: int, cases: int, rng: random.Random) -> dict[str, int]:
    directory.mkdir(parents=True)
    counts = {"total": cases, "passed": 0, "failed": 0, "broken": 0}
    for case in range(cases):
        status = rng.choice(STATUSES)
        counts[status] += 1
        name = f"case-{case:03d}"
        start = 1_796_000_000_000 + run * 3_600_000 + case * 1000
        document = {"uuid": str(uuid.UUID(int=rng.getrandbits(128))), "historyId": f"{name:0>32}"[-32:],
                    "testCaseId": f"{name:0>32}"[-32:], "name": name, "fullName": f"campaign/{name}",
                    "status": status, "stage": "finished", "start": start, "stop": start + rng.randint(500, 90_000),
                    "labels": [{"name": "suite", "value": "campaign"}],
                    "statusDetails": {"message": "" if status == "passed" else f"{name} {status} in run {run}"}}
        (directory / f"{document['uuid']}-result.json").write_text(json.dumps(document), encoding="utf-8")
    return counts


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@example.invalid", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, run: int, *, squash: bool) -> None:
    git(repo, "add", "-A")
    tree = git(repo, "write-tree")
    parents = [] if squash or not has_head(repo) else ["-p", "HEAD"]
    new = git(repo, "commit-tree", tree, *parents, "-m", f"run {run}")
    git(repo, "update-ref", "HEAD", new)


def has_head(repo: Path) -> bool:
    return subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=repo, capture_output=True).returncode == 0


def prior_art(repo: Path, run: int, report: Path, history: Path, keep: int) -> None:
    """Their layout: <run>/ per report, the newest `keep` run directories kept, last-history/, a redirect."""
    shutil.copytree(report, repo / str(run))
    runs = sorted((int(p.name) for p in repo.iterdir() if p.is_dir() and p.name.isdigit()), reverse=True)
    for old in runs[keep:]:
        shutil.rmtree(repo / str(old))
    last = repo / "last-history"
    shutil.rmtree(last, ignore_errors=True)
    last.mkdir()
    shutil.copyfile(history, last / "history.jsonl")
    (repo / "index.html").write_text(f'<meta http-equiv="refresh" content="0; URL=./{run}/index.html">\n')


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(repo: Path) -> tuple[int, int, int]:
    tree = sum(int(line.split()[3]) for line in git(repo, "ls-tree", "-r", "-l", "HEAD").splitlines())
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    return tree, size(repo / ".git" / "objects"), int(git(repo, "rev-list", "--count", "HEAD"))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--keep", type=int, default=20)
    args = parser.parse_args()
    import os

    env = dict(os.environ)
    work = Path(tempfile.mkdtemp(prefix="pages-growth-"))
    tool = report_tool.obtain(env, work / "logs")
    if isinstance(tool, report_tool.Missing):
        print(f"no Allure Report: {tool.reason}; {tool.remedy}", file=sys.stderr)
        return 2
    repos = {name: work / name for name in ("prior art", "ours, squash", "ours, keep")}
    for repo in repos.values():
        repo.mkdir()
        git(repo, "init", "-q")
    rng = random.Random(15)
    history = work / "history.jsonl"
    checkpoints = sorted({10, 20, 40, args.runs} & set(range(1, args.runs + 1)))
    print(f"Allure Report {tool.version}; {args.cases} cases per run; keep {args.keep} reports\n")
    print(f"{'runs':>5}  {'branch':<14} {'tree (what Pages serves)':>26} {'repository after gc':>21} {'commits':>8}")
    try:
        for run in range(1, args.runs + 1):
            counts = results(work / f"results-{run}", run, args.cases, rng)
            out = work / f"report-{run}"
            report_tool.build(tool, work / f"results-{run}", out, name="campaign", counts={
                k: counts[k] for k in ("passed", "failed", "broken")}, work=work / "cwd", log=work / "logs" / "a.log",
                env=env, history=history, history_limit=20)
            prior_art(repos["prior art"], run, out, history, args.keep)
            commit(repos["prior art"], run, squash=False)
            for name, squash in (("ours, squash", True), ("ours, keep", False)):
                entry = site.Entry(run_id=1000 + run, attempt=1, run_number=run, created=f"run {run}", counts=counts)
                site.publish_report(repos[name], "campaign", entry, out, history, args.keep)
                commit(repos[name], run, squash=squash)
            shutil.rmtree(out)
            shutil.rmtree(work / f"results-{run}")
            if run in checkpoints:
                for name, repo in repos.items():
                    tree, packed, commits = measure(repo)
                    print(f"{run:>5}  {name:<14} {tree / 1e6:>23.1f} MB {packed / 1e6:>18.1f} MB {commits:>8}")
                print()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
