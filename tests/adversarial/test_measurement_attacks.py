"""Attacks on the measurements of issue 16 — trials, usage, budgets, re-runs, comparison, remote cells —
as the agent under evaluation would try them from its worker: it wants a pass, or a cheaper cost figure.

Each attack runs the real export (or select) over real files; an attack must end refused with a specific
code or exported as not passed, and nothing it wrote may make the campaign's evidence unreadable."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evidence_support import cell
from test_trials import case_row, contract_of, export_run, trial_cell, trials_document
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.campaign.usage import MAX_FIGURE, PARTIAL, Figure, total

COST = "cost-nanodollars"


def with_cost(document: dict[str, Any], value: Any) -> dict[str, Any]:
    document["usage"] = {COST: value}
    return document


# --- usage figures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("figure", [
    -1, 1.5, 1.0, True, "100", MAX_FIGURE + 1, {"value": MAX_FIGURE + 1, "coverage": "estimated"},
    {"value": -5, "coverage": "partial"}, {"value": 3, "coverage": "unavailable"}, {"coverage": "reported"},
])
def test_a_usage_figure_out_of_shape_breaks_only_its_own_trial(tmp_path: Path, figure: Any) -> None:
    """Negative, fractional, boolean, textual or beyond 2^53 - 1: the cell is invalid, its trial broken with the
    refusal's code, and the campaign's usage still reads as unavailable for it — never as the figure claimed."""
    contract = contract_of(trials_document(steady={"count": 2, "verdict": "all"}))
    run, options = export_run(tmp_path, contract, [
        with_cost(trial_cell(contract, "steady", 1), figure), with_cost(trial_cell(contract, "steady", 2), 10),
        cell(contract, "flaky"), cell(contract, "human")])
    assert run.exit_code == 1, run.summary
    steady = case_row(options, "steady")
    assert [(t["status"], t.get("code")) for t in steady["trials"]] == [
        ("broken", "export.cell_invalid"), ("passed", None)]
    assert steady["status"] == "broken"
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.document["usage"]["campaign"][COST]["value"] == 10


def test_a_json_integer_beyond_64_bits_breaks_only_its_own_trial(tmp_path: Path) -> None:
    """10^30 is not an integer any 64-bit consumer keeps: the worker's cell is not strict JSON, and the trial
    its artifact path names is broken — the campaign goes on."""
    contract = contract_of(trials_document(steady={"count": 2, "verdict": "all"}))
    run, options = export_run(tmp_path, contract, [], workers={
        "native-steady-t1": [with_cost(trial_cell(contract, "steady", 1), 10**30)],
        "native-steady-t2": [trial_cell(contract, "steady", 2)],
        "native-flaky": [cell(contract, "flaky")], "external-human": [cell(contract, "human")]})
    assert run.exit_code == 1, run.summary
    steady = case_row(options, "steady")
    assert [(t["status"], t.get("code")) for t in steady["trials"]] == [
        ("broken", "export.cell_invalid"), ("passed", None)]


def test_figures_at_the_maximum_saturate_the_total_as_a_lower_bound_and_the_receipt_stays_readable(
        tmp_path: Path) -> None:
    """Before the cap, two trials reporting 2^63 - 1 each made a total no 64-bit reader could read: the
    export refused its own receipt (``export.receipt``, telling the operator to re-upload it) — one worker
    could sink the whole campaign. Now each figure is at most 2^53 - 1 and a total past it is that maximum,
    partial: a true lower bound."""
    assert (total([Figure(MAX_FIGURE, "reported"), Figure(1, "reported")]).value,
            total([Figure(MAX_FIGURE, "reported"), Figure(1, "reported")]).coverage) == (MAX_FIGURE, PARTIAL)
    contract = contract_of(trials_document(steady={"count": 3, "verdict": "all"}))
    run, options = export_run(tmp_path, contract, [
        with_cost(trial_cell(contract, "steady", n), MAX_FIGURE) for n in (1, 2, 3)] + [
        cell(contract, "flaky"), cell(contract, "human")])
    assert run.exit_code == 0, run.summary
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.document["usage"]["campaign"][COST] == {"value": MAX_FIGURE, "coverage": PARTIAL,
                                                           "figures": 5, "known": 3}
    assert case_row(options, "steady")["usage"][COST] == {"value": MAX_FIGURE, "coverage": PARTIAL}
    assert (run.outputs["cost-nanodollars"], run.outputs["cost-coverage"]) == (str(MAX_FIGURE), PARTIAL)


# --- untrusted text in the trials, usage and budget sections ---------------------------------------------

HOSTILE = "x<img src=x onerror=alert(1)>[click](https://evil.example)|@octocat **bold**\n# heading"


def test_hostile_text_in_a_rejected_trial_stays_text_in_the_trials_table(tmp_path: Path) -> None:
    """The trials table quotes why each trial did not pass, and a rejected cell's refusal quotes the cell:
    what the worker wrote reaches the summary escaped, never as Markdown or HTML."""
    contract = contract_of(trials_document(steady={"count": 2, "verdict": "any"}))
    hostile = trial_cell(contract, "steady", 1, message=HOSTILE)
    hostile["host"] = HOSTILE
    run, options = export_run(tmp_path, contract, [
        hostile, trial_cell(contract, "steady", 2), cell(contract, "flaky"), cell(contract, "human")])
    steady = case_row(options, "steady")
    assert [(t["status"], t.get("code")) for t in steady["trials"]] == [
        ("broken", "export.cell_invalid"), ("passed", None)]
    assert "### Trials" in run.summary
    assert "img src=x" in run.summary  # quoted, as text
    for live in (r"(?<!\\)<img", r"(?<!\\)\]\(https", r"\n# heading", r"(?<!\\)\*\*bold", r"@octocat"):
        assert re.search(live, run.summary) is None, live


# --- a caught forgery in one trial ----------------------------------------------------------------------


@pytest.mark.parametrize(("forged", "code"), [
    ({"failed": ("answer",), "disposition": "passed"}, "export.unsupported_pass"),
    ({"sha": "f" * 40}, "export.cell_binding"),  # a passing cell replayed from another commit
])
@pytest.mark.parametrize("policy", ["any", {"at-least": 2}])
def test_a_forged_trial_is_not_laundered_into_a_pass_by_the_policy(
        tmp_path: Path, forged: dict[str, Any], code: str, policy: Any) -> None:
    """Before: under ``any`` (or ``at-least`` with enough other passes) a trial caught forging a pass was one
    broken trial among passes, and the case passed. A caught forgery now keeps its case from passing."""
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": policy}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1, **forged), trial_cell(contract, "flaky", 2),
        trial_cell(contract, "flaky", 3), cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert [(t["status"], t.get("code")) for t in flaky["trials"]] == [
        ("broken", code), ("passed", None), ("passed", None)]
    assert (flaky["status"], flaky["reason"], flaky["code"]) == ("broken", "invalid_cell", code)
    assert "caught forgery" in run.summary


def test_an_honestly_broken_trial_still_passes_under_any(tmp_path: Path) -> None:
    """Pass@k as meant: an infrastructure failure or a missing trial beside a pass does not fail the case
    (the trials table and the pass rate still show the broken trial)."""
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": "any"}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1, failed=("cleanup",), disposition="infrastructure_failure"),
        trial_cell(contract, "flaky", 2), cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 0, run.summary
    flaky = case_row(options, "flaky")
    assert flaky["status"] == "passed"
    assert flaky["pass-rate"]["broken"] == 2
    assert "1/1 passed (100%, 95% CI 21%–100%), 2 broken" in run.summary


def test_a_receipt_that_passes_a_case_with_a_forged_trial_is_refused(tmp_path: Path) -> None:
    from testops_evidence.campaign.receipt import receipt_from_bytes
    from testops_evidence.errors import Refusal

    contract = contract_of(trials_document(flaky={"count": 2, "verdict": "any"}))
    _run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1, failed=("answer",), disposition="passed"), trial_cell(contract, "flaky", 2),
        cell(contract, "steady"), cell(contract, "human")])
    path = Path(options["results-dir"] + "-receipt.json")
    document = json.loads(path.read_text())
    row = next(r for r in document["results"] if r["key"] == "flaky")
    row.update(status="passed", reason="passed")
    row.pop("code", None)
    with pytest.raises(Refusal) as error:
        receipt_from_bytes(json.dumps(document).encode(), str(path))
    assert error.value.code == "export.receipt"


# --- dodging a budget ------------------------------------------------------------------------------------


def budgeted(budget: dict[str, Any], **trials: dict[str, Any]) -> dict[str, Any]:
    document = trials_document(**trials)
    document["budget"] = budget
    return document


@pytest.mark.parametrize("dodge", [{"coverage": "unavailable"}, None])  # None: the capped counter left out
def test_a_trial_that_hides_a_capped_counter_is_broken_as_unverified(tmp_path: Path, dodge: Any) -> None:
    """Before: a worker that reported its cost ``unavailable`` (or not at all) under a per-trial cost cap
    counted as having spent nothing, and the summary said every trial ran within the budget, with a
    'verified' spend of 0. A capped counter without a figure cannot be checked: the trial is broken,
    ``budget.unverified``, and the job's spend is shown as a lower bound."""
    contract = contract_of(budgeted({"trial": {COST: 1_000}, "campaign": {COST: 100_000}},
                                    flaky={"count": 2, "verdict": "any"}))
    hiding = trial_cell(contract, "flaky", 1)
    hiding["usage"] = {"input-tokens": 10} if dodge is None else {COST: dodge}
    run, options = export_run(tmp_path, contract, [
        hiding, with_cost(trial_cell(contract, "flaky", 2, failed=("answer",)), 900),
        with_cost(cell(contract, "steady"), 500), with_cost(cell(contract, "human"), 5)])
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert [(t["status"], t["reason"], t.get("code")) for t in flaky["trials"]] == [
        ("broken", "budget", "budget.unverified"), ("failed", "behavior_failure", None)]
    assert flaky["status"] == "broken"  # the unverified trial decides "any": not verified by this run
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.document["budget"]["unverified"] == [{"key": "flaky", "trial": 1}]
    assert "Every trial ran within" not in run.summary
    assert "budget.unverified" in run.summary
    # The hiding job's spend is a lower bound, never a verified 0.
    assert "| `native-flaky-t1` | cost-nanodollars 25,000 | cost-nanodollars ≥ 0 | 0 |" in run.summary


def test_an_estimated_or_partial_figure_is_checked_against_the_cap(tmp_path: Path) -> None:
    """An estimate is a figure: checked like a reported one. A partial figure is a lower bound: over the cap
    it is over; within it, it proves nothing — unverified."""
    contract = contract_of(budgeted({"trial": {COST: 1_000}}, flaky={"count": 3, "verdict": "any"}))
    run, options = export_run(tmp_path, contract, [
        with_cost(trial_cell(contract, "flaky", 1), {"value": 5_000, "coverage": "estimated"}),
        with_cost(trial_cell(contract, "flaky", 2), {"value": 10, "coverage": "partial"}),
        with_cost(trial_cell(contract, "flaky", 3), {"value": 999, "coverage": "estimated"}),
        with_cost(cell(contract, "steady"), 5), with_cost(cell(contract, "human"), 5)])
    assert run.exit_code == 0, run.summary
    assert [(t["status"], t.get("code")) for t in case_row(options, "flaky")["trials"]] == [
        ("broken", "budget.exceeded"), ("broken", "budget.unverified"), ("passed", None)]


# --- the previous campaign -------------------------------------------------------------------------------


def test_a_receipt_replayed_into_a_later_runs_artifact_is_not_a_baseline(tmp_path: Path) -> None:
    """A worker of the newest earlier run that reached the runtime token uploads, under the publication's
    name, the receipt of an older run in which everything failed: compared with it, nothing regresses. The
    receipt names the run it was made in, and it is not the artifact's run: not comparable, never compared."""
    from test_previous import EARLIER, REPOSITORY, WORKFLOW, document, earlier_export, export, select, zipped
    from test_selection_support import github_with_run

    contract = contract_of(document())
    older = earlier_export(tmp_path, contract, [
        cell(contract, key, disposition="behavior_failure", failed=list(contract.case(key).checks))
        for key in ("flaky", "steady", "human")], run_id=EARLIER - 3)
    with github_with_run() as github:
        github.add_run(REPOSITORY, EARLIER, path=WORKFLOW, head_branch="main", status="completed",
                       conclusion="failure")
        artifact = github.add_artifact(EARLIER, f"testops-evidence-report-agent-protocol-{EARLIER}-1",
                                       zipped({"allure-results-receipt.json": older.read_bytes()}))
        github.record_upload(EARLIER, artifact, job="campaign / publish", what="publication")
        run = select(tmp_path, github, contract, **{"compare-with": "previous"})
        assert run.exit_code == 0, run.summary
        baseline = json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"]
        assert baseline["comparable"] is False and "replayed" in baseline["why-not"], baseline
        exported, _results = export(tmp_path, github, contract, [
            cell(contract, "flaky"), cell(contract, "steady", disposition="behavior_failure", failed=["answer"]),
            cell(contract, "human")], run.outputs["selection-sha256"])
        assert (exported.outputs["comparison"], exported.outputs["regressions"]) == ("not-comparable", "[]")


# --- remote cells ----------------------------------------------------------------------------------------


def test_a_ledger_with_two_attempts_at_one_ordinal_is_refused(tmp_path: Path) -> None:
    """The ledger's ordinal is the trial: a ledger edited so that a passing retry sits at the ordinal of a
    failed attempt (two attempts at ordinal 1) must not let the pass count."""
    from test_remote_cells import export, remote_contract
    from test_remote_cells import ledger as ledger_fixture
    from testops_evidence.contract import contract_from_document
    from testops_evidence.safeio import sha256_bytes

    ledger = ledger_fixture.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    document = json.loads(ledger.read_text())
    attempts = document["scenarios"]["company-credential-approval"]["attempts"]
    assert [a["ordinal"] for a in attempts] == [1, 2]
    attempts[1]["ordinal"] = 1
    ledger.write_text(json.dumps(document))
    contract = contract_from_document(remote_contract())
    run, _results = export(tmp_path, contract, ledger, **{"ledger-sha256": sha256_bytes(ledger.read_bytes())})
    assert run.exit_code == 3, run.summary
    assert run.outputs["error-code"].startswith("ledger."), run.outputs


@pytest.mark.parametrize(("edit", "code"), [
    (lambda d: d.update(campaign="another-campaign"), "selection.rerun_from"),
    (lambda d: d["context"].update(repository="mallory/agents"), "selection.rerun_from"),
    (lambda d: d["context"].update({"run-id": __import__("test_previous").RUN_ID}), "selection.rerun_from"),
    # Another commit and another contract are what a re-run is for (the code or the contract was fixed):
    # accepted, and the commit and contract digest it re-runs are recorded.
    (lambda d: d["context"].update({"head-sha": "e" * 40}), None),
    (lambda d: d.update({"contract-sha256": "c" * 64}), None),
])
def test_rerun_from_a_receipt_of_another_campaign_repository_or_run(tmp_path: Path, edit: Any, code: str | None) -> None:
    """The digest binds the bytes the operator chose, not where they come from: a receipt of another campaign,
    repository, or of this very run is refused even with its own digest."""
    from test_previous import document, earlier_export, select
    from test_selection_support import github_with_run
    from testops_evidence.safeio import sha256_bytes

    contract = contract_of(document())
    receipt = earlier_export(tmp_path, contract, [
        cell(contract, "flaky", disposition="behavior_failure", failed=["answer"]), cell(contract, "steady")])
    forged = json.loads(receipt.read_text())
    edit(forged)
    receipt.write_text(json.dumps(forged, indent=2))
    with github_with_run() as github:
        run = select(tmp_path, github, contract, **{"rerun-from": str(receipt),
                                                    "rerun-from-sha256": sha256_bytes(receipt.read_bytes())})
    if code is not None:
        assert run.outputs["error-code"] == code, run.summary
        assert not (tmp_path / "out" / "selection.json").exists()
        return
    assert run.exit_code == 0, run.summary
    rerun = json.loads((tmp_path / "out" / "selection.json").read_text())["rerun-of"]
    assert (rerun["head-sha"], rerun["contract-sha256"]) == (forged["context"]["head-sha"], forged["contract-sha256"])


def test_a_remote_cell_over_the_per_trial_cap_is_broken_like_a_workers(tmp_path: Path) -> None:
    """Remote cells have no worker job, so the job-by-job re-check never saw them: a remote trial of 18,234
    input tokens passed a per-trial cap of 1,000. The per-trial cap binds every trial, wherever it ran."""
    from test_remote_cells import export, remote_contract
    from test_remote_cells import ledger as ledger_fixture
    from testops_evidence.contract import contract_from_document
    from testops_evidence.safeio import sha256_bytes

    ledger = ledger_fixture.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    document = remote_contract()
    document["budget"] = {"trial": {"input-tokens": 1_000}}
    contract = contract_from_document(document)
    run, results = export(tmp_path, contract, ledger, **{"ledger-sha256": sha256_bytes(ledger.read_bytes())})
    assert run.exit_code == 1, run.summary
    receipt = load_receipt(f"{results}-receipt.json")
    rows = {row["key"]: row for row in receipt.results}
    assert [(t["status"], t.get("code")) for t in rows["get-task-context"]["trials"]] == [
        ("broken", "budget.exceeded"), ("broken", "budget.exceeded")]
    assert rows["local-case"]["status"] == "passed"  # 100 input tokens: within the cap
    assert {"key": "get-task-context", "trial": 1} in receipt.document["budget"]["over-cap"]
