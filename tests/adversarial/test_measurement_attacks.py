"""Attacks on the measurements of issue 16 — trials, usage, budgets, re-runs, comparison, remote cells —
as the agent under evaluation would try them from its worker: it wants a pass, or a cheaper cost figure.

Each attack runs the real export (or select) over real files; an attack must end refused with a specific
code or exported as not passed, and nothing it wrote may make the campaign's evidence unreadable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence_support import cell
from test_trials import case_row, contract_of, export_run, trial_cell, trials_document
from testops_evidence.evidence.receipt import load_receipt
from testops_evidence.evidence.usage import MAX_FIGURE, PARTIAL, Figure, total

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
