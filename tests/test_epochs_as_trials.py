"""Epochs are trials (issue 16): an Inspect AI log that measured a case in several epochs gives one cell per
epoch when the contract measures the case several times — from ``cell --trial`` and from export's layout —
and the verdict policy judges them. Uses the committed log of the real inspect-ai (tests/data/frameworks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evidence_support import actions_env, example_contract, make_selection, uuid_factory, write_contract
from framework_support import CORPUS
from helpers import run_mode
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.contract import Contract, contract_from_document

LOG = sorted(CORPUS.glob("inspect-ai-*"))[-1] / "campaign.eval"
DIGEST = "5e" * 32


def repeated(key: str, count: int = 3, verdict: object = None) -> Contract:
    document = json.loads(json.dumps(example_contract().document))
    for case in document["cases"]:
        if case["key"] == key:
            case["trials"] = {"count": count, "verdict": verdict or {"at-least": 2}, "jobs": "per-case"}
    return contract_from_document(document)


def test_cell_trial_n_is_epoch_n_of_the_log(tmp_path: Path) -> None:
    # The log's list-open-issues sample failed filtered-correctly in epoch 2 only.
    contract = write_contract(repeated("list-open-issues"), tmp_path / "contract.json")
    env = {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST}
    documents = {}
    for trial in (1, 2, 3):
        out = tmp_path / f"trial-{trial}.json"
        run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "list-open-issues", "inspect-log": str(LOG),
                                          "out": str(out), "trial": str(trial)}, env)
        assert run.exit_code == 0, run.summary
        documents[trial] = json.loads(out.read_text())
    assert {n: (d["trial"], d["disposition"]) for n, d in documents.items()} == {
        1: (1, "passed"), 2: (2, "behavior_failure"), 3: (3, "passed")}
    assert "epoch 2" in next(c["message"] for c in documents[2]["checks"] if c["id"] == "filtered-correctly")
    beyond = run_mode("cell", tmp_path, {"contract": str(write_contract(repeated("list-open-issues", 5),
                                                                        tmp_path / "c5.json")),
                                         "case": "list-open-issues", "inspect-log": str(LOG),
                                         "out": str(tmp_path / "t5.json"), "trial": "5"}, env)
    assert beyond.exit_code == 0
    five = json.loads((tmp_path / "t5.json").read_text())
    assert five["disposition"] == "infrastructure_failure" and "not in epoch 5" in five["message"]


def test_export_turns_a_logs_epochs_into_the_cases_trials(tmp_path: Path) -> None:
    contract = repeated("list-open-issues")
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env, keys=["list-open-issues", "get-task-context"])
    cells = tmp_path / "cells" / "list-open-issues"
    cells.mkdir(parents=True)
    shutil.copy(LOG, cells / "campaign.eval")
    run = run_mode("export", tmp_path, {"contract": str(write_contract(contract, tmp_path / "contract.json")),
                                        "selection-path": str(selection), "selection-sha256": digest,
                                        "cell-results": str(tmp_path / "cells"),
                                        "results-dir": str(tmp_path / "allure-results")}, env, new_uuid=uuid_factory())
    assert run.exit_code == 1, run.summary  # get-task-context has no cell
    rows = {row["key"]: row for row in load_receipt(tmp_path / "allure-results-receipt.json").results}
    issues = rows["list-open-issues"]
    assert [(t["trial"], t["status"]) for t in issues["trials"]] == [(1, "passed"), (2, "failed"), (3, "passed")]
    assert issues["status"] == "passed"  # at least 2 of 3 epochs passed
    assert issues["pass-rate"]["passed"] == 2 and issues["pass-rate"]["failed"] == 1


def test_a_log_with_more_epochs_than_trials_breaks_the_case(tmp_path: Path) -> None:
    contract = repeated("list-open-issues", count=2, verdict="any")
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env, keys=["list-open-issues"])
    cells = tmp_path / "cells" / "list-open-issues"
    cells.mkdir(parents=True)
    shutil.copy(LOG, cells / "campaign.eval")
    run = run_mode("export", tmp_path, {"contract": str(write_contract(contract, tmp_path / "contract.json")),
                                        "selection-path": str(selection), "selection-sha256": digest,
                                        "cell-results": str(tmp_path / "cells"),
                                        "results-dir": str(tmp_path / "allure-results")}, env, new_uuid=uuid_factory())
    assert run.exit_code == 1, run.summary
    row = load_receipt(tmp_path / "allure-results-receipt.json").results[0]
    assert row["status"] == "broken"
    assert [t.get("code") for t in row["trials"]] == ["export.adapter", None]
