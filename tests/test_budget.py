"""Budgets (issue 16): a campaign cap shared out between the worker jobs, a per-trial cap, and export's
re-check that records trials not run, or over their cap, as broken with their own code — never skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence_support import cell
from test_trials import case_row, contract_of, export_run, trial_cell, trials_document
from testops_evidence.campaign.cells import USAGE_ALLOWED
from testops_evidence.campaign.matrix import plan_matrices
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.contract import load_schema
from testops_evidence.errors import Refusal


def budgeted(budget: dict[str, Any], **trials: dict[str, Any]) -> dict[str, Any]:
    document = trials_document(**trials)
    document["budget"] = budget
    return document


def cost(document: dict[str, Any], nanodollars: int | None) -> dict[str, Any]:
    document["usage"] = {"cost-nanodollars": nanodollars if nanodollars is not None else {"coverage": "unavailable"}}
    return document


def test_the_schema_caps_exactly_the_published_counters() -> None:
    caps = load_schema("contract")["$defs"]["caps"]["propertyNames"]["enum"]
    assert caps == list(USAGE_ALLOWED)
    with pytest.raises(Refusal):
        contract_of(budgeted({"campaign": {"secret-counter": 5}}))


def test_the_plan_shares_a_campaign_cap_out_by_trials() -> None:
    contract = contract_of(budgeted({"campaign": {"cost-nanodollars": 1_000}, "trial": {"cost-nanodollars": 300}},
                                    flaky={"count": 3, "jobs": "per-case"}))
    plan = plan_matrices(contract.cases, contract.lanes, budget=contract.budget)
    rows = {row["job"]: row["budget"] for lane in ("native", "external") for row in plan.lane(lane).include}
    # 5 trials in all: flaky's job runs 3 of them, steady's and human's one each (rounded down).
    assert rows == {"native-flaky": {"job": {"cost-nanodollars": 600}, "trial": {"cost-nanodollars": 300}},
                    "native-steady": {"job": {"cost-nanodollars": 200}, "trial": {"cost-nanodollars": 300}},
                    "external-human": {"job": {"cost-nanodollars": 200}, "trial": {"cost-nanodollars": 300}}}


def test_a_budget_stop_is_a_broken_trial_with_its_code(tmp_path: Path) -> None:
    contract = contract_of(budgeted({"campaign": {"cost-nanodollars": 1_000}},
                                    flaky={"count": 3, "verdict": "any", "jobs": "per-case"}))
    # flaky's job has 600: trial 1 spends 650, so trials 2 and 3 are not started. steady's job (200) left
    # no cell although nothing was spent: that is "not recorded", not a budget stop.
    run, options = export_run(tmp_path, contract, [], workers={
        "native-flaky": [cost(trial_cell(contract, "flaky", 1, failed=("answer",)), 650)],
        "external-human": [cost(cell(contract, "human"), 10)],
    })
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert [(t["status"], t["reason"], t.get("code")) for t in flaky["trials"]] == [
        ("failed", "behavior_failure", None), ("broken", "budget", "budget.exhausted"),
        ("broken", "budget", "budget.exhausted")]
    assert (flaky["status"], flaky["reason"]) == ("broken", "trials_incomplete")  # "any" is undecided
    assert case_row(options, "steady")["reason"] == "not_recorded"
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.document["budget"] == {
        "campaign": {"cost-nanodollars": 1_000}, "trial": {},
        "not-run": [{"key": "flaky", "trial": 2}, {"key": "flaky", "trial": 3}], "over-cap": [], "unverified": [],
        "jobs-over-share": ["native-flaky"]}
    assert "2 trial(s) not run" in run.summary and "budget.exhausted" in run.summary
    assert "Not run: worker job 'native-flaky' had spent its share" in flaky_trial_message(options, 2)


def flaky_trial_message(options: dict[str, str], trial: int) -> str:
    import json

    row = case_row(options, "flaky")["trials"][trial - 1]
    return str(json.loads((Path(options["results-dir"]) / row["result-file"]).read_text())["statusDetails"]["message"])


def test_a_trial_over_its_cap_is_broken_and_an_unavailable_cost_is_unverified(tmp_path: Path) -> None:
    contract = contract_of(budgeted({"trial": {"cost-nanodollars": 100}}, flaky={"count": 3, "verdict": {"at-least": 2}}))
    run, options = export_run(tmp_path, contract, [
        cost(trial_cell(contract, "flaky", 1), 150), cost(trial_cell(contract, "flaky", 2), 100),
        cost(trial_cell(contract, "flaky", 3), None), cost(cell(contract, "steady"), 5), cost(cell(contract, "human"), 5)])
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    # Trial 3 gave no cost figure: the cap cannot be checked (budget.unverified), so it is not a pass within it.
    assert [(t["status"], t.get("code")) for t in flaky["trials"]] == [
        ("broken", "budget.exceeded"), ("passed", None), ("broken", "budget.unverified")]
    assert flaky["status"] == "broken"  # 1 of "at least 2" passed within the cap; the broken trials decide
    assert "Over budget: trial 1 of 3 of case 'flaky' used cost-nanodollars 150 (reported) over its cap 100" in (
        flaky_trial_message(options, 1))
    assert load_receipt(options["results-dir"] + "-receipt.json").document["budget"]["over-cap"] == [
        {"key": "flaky", "trial": 1}]
