"""The real consumer: Allure Report 3 (npm ``allure``, installed by scripts/setup.sh) reads the export.

Its ``summary.json`` statistics must equal the export receipt's counts, and every result must appear
once with the receipt's status, the Allure ID and the evidence attachment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from evidence_support import (
    REPO,
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, left_out, run_mode
from testops_evidence.campaign.receipt import load_receipt

ALLURE = REPO / ".tools" / "allure" / "node_modules" / ".bin" / "allure"

pytestmark = [
    pytest.mark.allure,
    pytest.mark.skipif(not ALLURE.exists() or shutil.which("node") is None or left_out("allure") is not None,
                       reason=left_out("allure") or "Allure Report 3 is not installed: run `bash scripts/setup.sh` "
                                                    "(needs npm) to install .tools/allure"),
]


def generate(results: Path, workdir: Path) -> Path:
    """Run Allure 3 from an empty cwd (no allurerc.* can be picked up), offline; return the report dir."""
    cwd = workdir / "empty-cwd"
    cwd.mkdir()
    out = workdir / "report"
    done = subprocess.run([str(ALLURE), "generate", str(results), "-o", str(out)], cwd=cwd, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_allure_report_3_counts_equal_the_receipt(tmp_path: Path) -> None:
    # A profile value with characters that properties files must escape, to prove Allure reads them back.
    contract = small_contract(cases=6, profile={"id": "sonnet-default", "model": "claude-sonnet-5",
                                                "driver": "naïve=runner: #1"})
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    write_cells(tmp_path / "cells", [
        cell(contract, "get-task-context"),
        cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
        cell(contract, "company-credential-approval", disposition="infrastructure_failure",
             failed=["secret-saved"]),
        cell(contract, "case-00003"),
        cell(contract, "case-00004", disposition="behavior_failure", failed=["ok"]),
        # case-00005 has no cell: broken, not recorded
    ], digest)
    results = tmp_path / "allure-results"
    clock = FakeClock(1_796_119_500.0)
    run = run_mode("export", tmp_path, {
        "contract": str(write_contract(contract, tmp_path / "contract.json")), "selection-path": str(selection),
        "selection-sha256": digest, "cell-results": str(tmp_path / "cells"), "results-dir": str(results),
    }, env, new_uuid=uuid_factory(), clock=clock.time)
    assert run.exit_code == 1, run.summary
    receipt = load_receipt(f"{results}-receipt.json")

    report = generate(results, tmp_path)
    stats = json.loads((report / "summary.json").read_text())["stats"]
    expected = {key: value for key, value in receipt.counts.items() if value}  # Allure 3 omits zero counts
    assert {key: stats.get(key, 0) for key in ("total", "passed", "failed", "broken")} == receipt.counts
    assert {key: value for key, value in stats.items() if key in expected} == expected
    assert receipt.counts == {"total": 6, "passed": 2, "failed": 2, "broken": 2}

    by_name = {}
    for path in (report / "data" / "test-results").glob("*.json"):
        document = json.loads(path.read_text())
        by_name[document["fullName"]] = document
    assert len(by_name) == 6
    for row in receipt.results:
        shown = by_name[row["full-name"]]
        assert shown["status"] == row["status"]
        assert shown["testCase"]["allureId"] == str(row["testops-id"])
        assert shown["historyId"] and not shown["isRetry"]
        attachments = [a["link"] for a in shown["attachments"] if a.get("type") == "attachment"]
        assert [(a["name"], a["contentType"], a["missed"]) for a in attachments] == [
            ("testops-evidence binding", "application/json", False)]
        assert [s["name"] for s in shown["steps"] if s.get("type") == "step"] == \
            [f"{check} ({kind})" for check, kind in contract.case(row["key"]).checks.items()]

    environment = {item["name"]: item["values"] for item in
                   json.loads((report / "widgets" / "allure_environment.json").read_text())}
    assert environment["campaign"] == ["agent-protocol"]
    assert environment["profile.driver"] == ["naïve=runner: #1"]


def test_allure_report_3_shows_each_trial_as_a_retry_of_its_cases_verdict(tmp_path: Path) -> None:
    """Issue 16: a case measured k times is k retries and one result in Allure Report 3, the verdict, and the
    report's statistics equal the receipt's (cases, not trials)."""
    from test_trials import contract_of, export_run, trial_cell, trials_document

    contract = contract_of(trials_document(flaky={"count": 3, "verdict": "any"},
                                           steady={"count": 2, "verdict": "all"}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1, failed=("answer",)), trial_cell(contract, "flaky", 2),
        # flaky's third trial never arrived: a broken trial, shown among the retries
        trial_cell(contract, "steady", 1), trial_cell(contract, "steady", 2, failed=("answer",)),
        cell(contract, "human"),
    ])
    assert run.exit_code == 1, run.summary
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.counts == {"total": 3, "passed": 2, "failed": 1, "broken": 0}

    report = generate(Path(options["results-dir"]), tmp_path)
    summary = json.loads((report / "summary.json").read_text())
    stats = summary["stats"]
    assert {key: stats.get(key, 0) for key in ("total", "passed", "failed", "broken")} == receipt.counts
    assert stats["retries"] == 2  # the cases that have retries: flaky and steady
    documents = [json.loads(p.read_text()) for p in (report / "data" / "test-results").glob("*.json")]
    shown = {d["fullName"]: d for d in documents if not d["isRetry"]}
    assert len(shown) == 3 and len(documents) == 3 + 3 + 2
    for row in receipt.results:
        result = shown[row["full-name"]]
        assert result["status"] == row["status"]
        trials = row.get("trials") or []
        assert sorted((r["status"], r["isRetry"]) for r in documents
                      if r["fullName"] == row["full-name"] and r["isRetry"]) == sorted(
            (t["status"], True) for t in trials)
        assert len(result.get("retries") or []) == len(trials)
    flaky = shown["agents/flaky"]
    assert [s["name"] for s in flaky["steps"] if s.get("type") == "step"] == [
        "trial 1 of 3 (attempt attempt-flaky-t1)", "trial 2 of 3 (attempt attempt-flaky-t2)", "trial 3 of 3"]
    assert {p["name"]: p["value"] for p in flaky["parameters"]}["trials"] == "1 of 3 passed"
