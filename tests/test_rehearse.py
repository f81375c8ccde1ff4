"""The local rehearsal: guard -> select -> harness + cell -> export -> upload -> verify -> Allure Report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_support import REPO, uuid_factory
from framework_support import PRODUCER_PYTHON as INSPECT_PYTHON
from helpers import FakeClock, run_mode

EXAMPLES = REPO / "examples"
ALLURE = REPO / ".tools" / "allure" / "node_modules" / ".bin" / "allure"


@pytest.fixture(autouse=True)
def pinned_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rehearsal binds everything to `git rev-parse HEAD` of its working directory; the repository
    itself gets new commits while the suite runs (and a moved HEAD is refused, correctly), so each test
    rehearses from a small checkout of its own."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for args in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q",
                                  "--allow-empty", "-m", "pinned"]):
        subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True)
    monkeypatch.chdir(checkout)
    return checkout


def rehearse(tmp_path: Path, examples: Path = EXAMPLES, **options: str):
    clock = FakeClock(1_796_119_500.0)
    return run_mode("rehearse", tmp_path, {"workdir": str(tmp_path / "rehearsal"), "examples": str(examples),
                                           "state-dir": str(tmp_path / "outer-state"), **options},
                    {"PATH": os.environ.get("PATH", "")}, actions=False, clock=clock.time,
                    monotonic=clock.monotonic, sleep=clock.sleep, new_uuid=uuid_factory())


def test_the_rehearsal_runs_the_whole_campaign_and_exits_zero(tmp_path: Path) -> None:
    run = rehearse(tmp_path)
    assert run.exit_code == 0, run.log[-4000:]
    run_dir = tmp_path / "rehearsal" / "20261201T100500Z"
    assert run_dir.is_dir()
    # Every step summary was written and printed.
    summaries = sorted(p.name for p in (run_dir / "summaries").glob("*.md"))
    assert summaries == ["01-guard.md", "02-select.md", "03-export.md", "04-upload.md", "05-verify.md"]
    assert len(list((run_dir / "summaries" / "cells").glob("*.md"))) == 9
    # The example contract (YAML) is parsed once, by guard: select and the phases after it build it compiled.
    assert "| contract | compiled by guard, bound by digest |" in (run_dir / "summaries" / "02-select.md").read_text()
    for name in ("03-export.md", "04-upload.md", "05-verify.md"):
        assert "| contract | compiled by select, bound by digest |" in (run_dir / "summaries" / name).read_text(), name
    for name in summaries:
        assert (run_dir / "summaries" / name).read_text().splitlines()[0] in run.log
    # All statuses, on purpose: a behaviour failure, an infrastructure failure, a case never recorded.
    receipt = json.loads((run_dir / "allure-results-receipt.json").read_text())
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt["results"]}
    assert statuses["budget-stop"] == ("failed", "behavior_failure")
    assert statuses["heartbeat-resume"] == ("broken", "infrastructure_failure")
    assert statuses["external-webhook-roundtrip"] == ("broken", "not_recorded")
    assert statuses["company-credential-approval"] == ("passed", "passed")  # shipped JUnit, adapted by export
    assert statuses["hire-agent-approval"] == ("passed", "passed")  # shipped allure-results
    assert receipt["counts"] == {"total": 12, "passed": 9, "failed": 1, "broken": 2}
    assert receipt["context"]["local"] is True
    published = run_dir / "state" / "published" / "allure-results"
    assert len(list(published.glob("*-result.json"))) == 12
    # A local run has no page on GitHub: nothing links to one (the commit may not even be pushed).
    for path in published.glob("*-result.json"):
        result = json.loads(path.read_text())
        assert result.get("links", []) == [] and "in a local run" in result["description"], path
    executor = json.loads((published / "executor.json").read_text())
    assert "buildUrl" not in executor and "url" not in executor and "(local run)" in executor["buildName"]
    assert "github.com" not in "".join(p.read_text() for p in (run_dir / "summaries").rglob("*.md"))
    # The verdict first (issue 27): verify's campaign summary is the one block with a heading; every other
    # step, the cells included, is one line with its tables folded into <details>. Before: 14 blocks.
    texts = [p.read_text() for p in sorted((run_dir / "summaries").rglob("*.md"))]
    assert sum(text.count("## testops-evidence") for text in texts) == 1
    assert all(text.startswith("**testops-evidence · ") and "<details>" in text
               for path, text in zip(sorted((run_dir / "summaries").rglob("*.md")), texts, strict=True)
               if path.name != "05-verify.md")
    first = [line for line in (run_dir / "summaries" / "05-verify.md").read_text().splitlines() if line.strip()][:4]
    assert "(9 passed, 1 failed, 2 broken)" in first[1]
    assert first[2] == "### ❌ agent-protocol: 9 of 12 passed, 1 failed, 2 broken"
    assert first[3].startswith("**Pass rate 90.0% (95% interval 70.4%–100.0%, 10 cases)**")
    # The rehearsal's own table of steps shows each step's headline, never the <details> of a one-line step.
    from testops_evidence.phases.rehearse import _headline_of

    shown = [_headline_of((run_dir / "summaries" / name).read_text()) for name in summaries]
    assert [line[:1] for line in shown] == ["🧪", "✅", "❌", "✅", "❌"], shown
    assert shown[2].startswith("❌ Exported 12 results") and "<details>" not in "".join(shown)
    assert "behaved as designed" in run.log and "9 passed" in run.log
    if ALLURE.exists():
        stats = json.loads((run_dir / "state" / "published" / "allure-report" / "summary.json").read_text())["stats"]
        assert {k: stats.get(k, 0) for k in ("total", "passed", "failed", "broken")} == receipt["counts"]
        # The operator reads the figures, not a Python dict.
        assert "index.html: 12 total, 9 passed, 1 failed, 2 broken — equal to the receipt" in run.log
    # The harness ran for real: pytest's JUnit report holds one test per native check, except the two of
    # read-company-goals, which an Inspect AI eval measured (examples/inspect/), its log turned into a cell.
    junit = (run_dir / "harness" / "junit.xml").read_text()
    assert junit.count("<testcase ") == 22 and "<error " in junit and "<failure " in junit
    assert statuses["read-company-goals"] == ("passed", "passed")
    inspect_cell = json.loads((run_dir / "cell-results" / "read-company-goals.json").read_text())
    assert inspect_cell["message"].startswith("adapted from inspect-log: 4 score(s) mapped to 2 check(s)")
    assert inspect_cell["usage"]["input-tokens"] == 360  # two epochs of the scripted agent
    if INSPECT_PYTHON.exists():  # a fresh log, written by inspect-ai in this run
        assert len(list((run_dir / "inspect" / "logs").glob("*.eval"))) == 1


def test_each_rehearsal_gets_a_fresh_directory(tmp_path: Path) -> None:
    first = rehearse(tmp_path, report="never")
    second = rehearse(tmp_path, report="never")
    assert (first.exit_code, second.exit_code) == (0, 0)
    assert sorted(p.name for p in (tmp_path / "rehearsal").iterdir()) == ["20261201T100500Z", "20261201T100500Z-2"]
    assert "not generated (--report never)" in second.log  # plain text at a terminal


@pytest.mark.skipif(not ALLURE.exists(), reason="Allure Report 3 is not installed: run `bash scripts/setup.sh`")
def test_rehearsals_in_one_workdir_continue_one_report_history(tmp_path: Path) -> None:
    first = rehearse(tmp_path)
    second = rehearse(tmp_path)
    assert first.exit_code == second.exit_code == 0, second.log[-4000:]
    runs = sorted(p for p in (tmp_path / "rehearsal").iterdir())
    assert [p.name for p in runs] == ["20261201T100500Z", "20261201T100500Z-2"]
    lines = [len((run / "state" / "published" / "history.jsonl").read_text().splitlines()) for run in runs]
    assert lines == [1, 2]  # the second report shows the first one's results as its history
    assert "continues the history of the rehearsal in" in second.log
    assert "trends over 1 earlier report(s)" in (runs[1] / "summaries" / "04-upload.md").read_text()


def test_a_refusal_stops_the_rehearsal_with_its_exit_code(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLES, examples)
    # A cell saved from another run (another selection's digest) among the shipped reports: a replay.
    replayed = {"schema": "testops-evidence/cell-result/v2", "selection-sha256": "0" * 64,
                "case": "company-credential-approval"}
    (examples / "cell-results" / "company-credential-approval" / "replayed.json").write_text(json.dumps(replayed))
    run = rehearse(tmp_path, examples=examples, report="never")
    assert run.exit_code == 3, run.log[-3000:]
    assert "stopped at export" in run.log  # plain text at a terminal
    assert "export.cell_selection" in run.log


def test_a_broken_report_breaks_its_case_and_the_rehearsal_still_agrees(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLES, examples)
    (examples / "cell-results" / "company-credential-approval" / "junit.xml").write_text(
        '<!DOCTYPE x [<!ENTITY a "a">]><testsuite/>')
    run = rehearse(tmp_path, examples=examples, report="never")
    assert run.exit_code == 0, run.log[-3000:]
    assert "export.adapter" in run.log


def test_the_cli_command_and_script_entrypoint(tmp_path: Path, pinned_checkout: Path) -> None:
    """`testops-evidence rehearse` through the real CLI, outside Actions, with a token in the environment that
    the rehearsal drops (worker phases would refuse it)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src"), "ALLURE_TOKEN": "x",
           "GITHUB_ACTIONS": "true"}
    done = subprocess.run([sys.executable, "-m", "testops_evidence", "rehearse", "--workdir", str(tmp_path / "w"),
                           "--examples", str(EXAMPLES), "--report", "never"], cwd=pinned_checkout, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ignored for the rehearsal: ALLURE_TOKEN, GITHUB_ACTIONS" in done.stdout
    script = (REPO / "scripts" / "rehearse.sh").read_text()
    assert "bash scripts/setup.sh" in script and '.venv/bin/testops-evidence rehearse "$@"' in script
