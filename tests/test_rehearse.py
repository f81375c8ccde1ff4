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
    assert "bash scripts/setup.sh rehearsal" in script and 'exec "$cli" rehearse "$@"' in script


# --- your own campaign: rehearse --case-command ------------------------------------------------------------------

ADOPTER = EXAMPLES / "adopter"


def adopter_checkout(checkout: Path, changes: dict[str, str] | None = None) -> Path:
    """examples/adopter/ as a user's fresh repository (the pinned checkout of this test), committed."""
    shutil.copytree(ADOPTER, checkout, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in (changes or {}).items():
        (checkout / name).write_text(text, encoding="utf-8")
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m",
                                 "evals"]):
        subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True)
    return checkout


def rehearse_own(tmp_path: Path, command: str, exported: dict[str, str] | None = None, **options: str):
    """`rehearse --case-command` as a user runs it from their repository (whose shell also exports ``exported``), with
    this package's CLI importable."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src"), **(exported or {})}
    clock = FakeClock(1_796_119_500.0)
    return run_mode("rehearse", tmp_path, {"workdir": str(tmp_path / "rehearsal"), "case-command": command,
                                           "report": "never", "state-dir": str(tmp_path / "outer-state"), **options},
                    env, actions=False, clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep,
                    new_uuid=uuid_factory())


def receipt_of(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    (run_dir,) = (tmp_path / "rehearsal").iterdir()
    return json.loads((run_dir / "allure-results-receipt.json").read_text())


def test_the_adopter_example_rehearses_with_its_own_pytest_case_command(tmp_path: Path, pinned_checkout: Path) -> None:
    """Issue 27 item 6: the user's contract and case command (pytest writing JUnit, `cell --junit`), no act. The
    failing test makes its case failed, the others pass, and the exit code says "recorded, not all passed"."""
    adopter_checkout(pinned_checkout)
    run = rehearse_own(tmp_path, "bash evals/run-case.sh")
    assert run.exit_code == 1, run.log[-4000:]
    receipt = receipt_of(tmp_path)
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt["results"]}
    assert statuses == {"order-total": ("failed", "behavior_failure"), "refund-policy": ("passed", "passed"),
                        "greeting": ("passed", "passed")}
    assert receipt["context"]["local"] is True
    (run_dir,) = (tmp_path / "rehearsal").iterdir()
    cell = json.loads((run_dir / "cell-results" / "order-total.json").read_text())
    assert cell["attempt-id"] == f"local-{run_dir.name}-order-total"  # TESTOPS_EVIDENCE_ATTEMPT_ID reached it
    assert {c["id"]: c["passed"] for c in cell["checks"]} == {"sums-lines": True, "applies-discount": False}
    assert "assert 990 == 900" in (run_dir / "logs" / "cases" / "order-total.log").read_text()  # pytest's own output
    assert len(list((run_dir / "state" / "published" / "allure-results").glob("*-result.json"))) == 3
    assert "with your case command: 3 cases" in run.log and "(as designed)" not in run.log


def test_every_variable_the_template_gives_reaches_the_case_command(tmp_path: Path, pinned_checkout: Path) -> None:
    adopter_checkout(pinned_checkout)
    dump = ("python3 -c 'import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
            "if k.startswith(\"TESTOPS_EVIDENCE_\")}))' > \"env-$TESTOPS_EVIDENCE_CASE.json\"; bash evals/run-case.sh")
    run = rehearse_own(tmp_path, dump, cases="greeting")
    assert run.exit_code == 0, run.log[-4000:]
    seen = json.loads((pinned_checkout / "env-greeting.json").read_text())
    (run_dir,) = (tmp_path / "rehearsal").iterdir()
    selection = run_dir / "selection.json"
    assert set(seen) == {f"TESTOPS_EVIDENCE_{name}" for name in (
        "CASE", "CASE_JSON", "TRIAL", "TRIALS", "BUDGET", "CELL_RESULT", "SOURCE_SHA", "PROFILE", "ATTEMPT_ID",
        "SELECTION", "SELECTION_SHA256")}
    assert (seen["TESTOPS_EVIDENCE_CASE"], seen["TESTOPS_EVIDENCE_TRIAL"], seen["TESTOPS_EVIDENCE_TRIALS"]) == (
        "greeting", "1", "1")
    assert json.loads(seen["TESTOPS_EVIDENCE_CASE_JSON"])["key"] == "greeting"
    assert seen["TESTOPS_EVIDENCE_CELL_RESULT"] == str(run_dir / "cell-results" / "greeting.json")
    assert seen["TESTOPS_EVIDENCE_SELECTION"] == str(selection)
    import hashlib
    assert seen["TESTOPS_EVIDENCE_SELECTION_SHA256"] == hashlib.sha256(selection.read_bytes()).hexdigest()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pinned_checkout, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert seen["TESTOPS_EVIDENCE_SOURCE_SHA"] == head
    assert json.loads(seen["TESTOPS_EVIDENCE_PROFILE"]) == {"id": "rules-v1", "model": "none"}
    assert json.loads(seen["TESTOPS_EVIDENCE_BUDGET"]) == {}
    assert receipt_of(tmp_path)["counts"] == {"total": 1, "passed": 1, "failed": 0, "broken": 0}


def test_a_case_command_that_is_not_installed_breaks_every_case_and_says_so(tmp_path: Path,
                                                                             pinned_checkout: Path) -> None:
    """Not a crash: each case is run, writes nothing, is exported as broken (not recorded) and published as such;
    the rehearsal exits 3 (case.no_cell_result, as the template's worker job) naming the missing command."""
    adopter_checkout(pinned_checkout)
    run = rehearse_own(tmp_path, "no-such-eval-runner --case x")
    assert run.exit_code == 3, run.log[-4000:]
    receipt = receipt_of(tmp_path)
    assert receipt["counts"] == {"total": 3, "passed": 0, "failed": 0, "broken": 3}
    assert {row["reason"] for row in receipt["results"]} == {"not_recorded"}
    assert "case.no_cell_result" in run.log
    assert "bash found no command `no-such-eval-runner` (exit 127)" in run.log
    assert "internal.error" not in run.log


def test_a_case_command_exiting_non_zero_is_judged_by_the_cell_it_wrote(tmp_path: Path, pinned_checkout: Path) -> None:
    """The exit code of the case command is not the verdict: the cell is. One case writes its cell and exits 5
    (recorded and passed), another exits 0 without a cell (broken, case.no_cell_result)."""
    adopter_checkout(pinned_checkout)
    command = ('if [ "$TESTOPS_EVIDENCE_CASE" = greeting ]; then exit 0; fi; '
               'bash evals/run-case.sh; exit 5')
    run = rehearse_own(tmp_path, command, cases="greeting,refund-policy")
    assert run.exit_code == 3, run.log[-4000:]
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt_of(tmp_path)["results"]}
    assert statuses == {"refund-policy": ("passed", "passed"), "greeting": ("broken", "not_recorded")}
    assert "case refund-policy: exit 5, cell result written" in run.log
    assert "case greeting: exit 0, cell result MISSING: the case command (exit 0) wrote no cell result" in run.log


def test_your_contract_without_your_case_command_is_refused_not_run_by_the_example_harness(
        tmp_path: Path, pinned_checkout: Path) -> None:
    """The issue's finding: `rehearse --contract <mine>` ran the examples' harness on the user's cases and pointed a
    pipx user at scripts/setup.sh. Now it asks for the case command, before anything runs."""
    adopter_checkout(pinned_checkout)
    run = rehearse(tmp_path, contract=".github/testops-evidence.yml")
    assert run.exit_code == 2, run.log[-3000:]
    assert "input.case-command" in run.log and "--case-command" in run.log
    assert "scripts/setup.sh" not in run.log
    assert not (tmp_path / "rehearsal").exists()
    empty = rehearse_own(tmp_path, "  ")
    assert empty.exit_code == 2 and "--case-command is empty" in empty.log
    missing = rehearse_own(tmp_path, "true", contract="nowhere.yml")
    assert missing.exit_code == 2 and "contract.missing" in missing.log


def test_rehearse_sh_passes_the_case_command_through_and_runs_it_in_your_repository(
        tmp_path: Path, pinned_checkout: Path) -> None:
    """scripts/rehearse.sh from the action's clone, started in the user's repository with --case-command: the
    rehearsal runs there (the user's contract, their case command), not in the action's checkout. The clone is
    this script beside a set-up that has already run (its venv's CLI: this checkout's)."""
    adopter_checkout(pinned_checkout)
    action = tmp_path / "action"
    (action / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "rehearse.sh", action / "scripts" / "rehearse.sh")
    # Set-up already done (scripts/setup.sh is idempotent; here it only records that it was asked).
    (action / "scripts" / "setup.sh").write_text('echo "setup: $*" >> "$(dirname "$0")/../setup.log"\n')
    (action / ".venv" / "bin").mkdir(parents=True)
    cli = action / ".venv" / "bin" / "testops-evidence"
    cli.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m testops_evidence "$@"\n')
    cli.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src"), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(action / "scripts" / "rehearse.sh"), "--case-command", "bash evals/run-case.sh",
                           "--report", "never", "--cases", "greeting"], cwd=pinned_checkout, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (action / "setup.log").read_text() == "setup: rehearsal\n"
    assert f"your campaign in {pinned_checkout}" in done.stdout
    (run_dir,) = (pinned_checkout / "rehearsal").iterdir()  # in the user's repository, not the action's clone
    receipt = json.loads((run_dir / "allure-results-receipt.json").read_text())
    assert receipt["counts"] == {"total": 1, "passed": 1, "failed": 0, "broken": 0}
    assert not (action / "rehearsal").exists()


def test_a_case_whose_credentials_this_shell_lacks_is_not_run_and_said(tmp_path: Path, pinned_checkout: Path) -> None:
    """As case-secrets on GitHub: a case runs only with the credentials its contract entry lists, which locally come
    from the shell's environment; without them it is not run (case.credentials, exit 2) and exported broken."""
    contract = (ADOPTER / ".github" / "testops-evidence.yml").read_text()
    listed = "    title: Greets by name\n    lane: native\n"
    assert listed in contract
    adopter_checkout(pinned_checkout, {".github/testops-evidence.yml": contract.replace(
        listed, listed + "    credentials: [SHOP_API_KEY]\n")})
    run = rehearse_own(tmp_path, "bash evals/run-case.sh", cases="greeting,refund-policy")
    assert run.exit_code == 2, run.log[-4000:]
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt_of(tmp_path)["results"]}
    assert statuses == {"refund-policy": ("passed", "passed"), "greeting": ("broken", "not_recorded")}
    assert "case greeting: not run — its credentials are not in this shell's environment: SHOP_API_KEY" in run.log
    assert "case.credentials" in run.log

    # With the credential in the shell, the case runs and gets it; a case that does not list it does not.
    seen = ('python3 -c \'import os; print(os.environ.get("SHOP_API_KEY", "-"))\' > "key-$TESTOPS_EVIDENCE_CASE"; '
            'bash evals/run-case.sh')
    again = rehearse_own(tmp_path / "again", seen, cases="greeting,refund-policy",
                         exported={"SHOP_API_KEY": "k-7c1d"})
    assert again.exit_code == 0, again.log[-4000:]
    assert (pinned_checkout / "key-greeting").read_text().strip() == "k-7c1d"
    assert (pinned_checkout / "key-refund-policy").read_text().strip() == "-"
