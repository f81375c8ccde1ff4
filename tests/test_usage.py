"""Usage and cost with their coverage (issue 16): totals per case, lane and campaign that never add an
unavailable figure as zero, in the summary, the receipt, the Allure labels and environment, and the outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_support import cell
from test_trials import case_row, contract_of, export_run, trial_cell, trials_document
from testops_evidence.campaign import usage
from testops_evidence.campaign.cells import cell_from_bytes
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.campaign.usage import MISSING, Figure, parse, show, total
from testops_evidence.errors import Refusal

E, P, U = "estimated", "partial", "unavailable"


@pytest.mark.parametrize(("figures", "expected"), [
    ([Figure(10, "reported"), Figure(5, "reported")], (15, "reported")),
    ([Figure(10, "reported"), Figure(5, E)], (15, E)),
    ([Figure(10, "reported"), Figure(5, P)], (15, P)),
    ([Figure(10, E), MISSING], (10, P)),  # never "10, estimated": a figure is missing
    ([MISSING, MISSING], (None, U)),  # never 0
    ([], (None, U)),
])
def test_a_total_takes_the_weakest_coverage_and_never_adds_unavailable_as_zero(
        figures: list[Figure], expected: tuple[int | None, str]) -> None:
    result = total(figures)
    assert (result.value, result.coverage) == expected


def test_a_total_of_totals_keeps_how_many_figures_were_known() -> None:
    lane = total([total([Figure(1, "reported"), MISSING]), total([Figure(2, "reported")])])
    assert (lane.value, lane.coverage, lane.known, lane.figures) == (3, P, 2, 3)
    assert show("cost-nanodollars", lane) == "≥ $0.000000003 (partial: 2 of 3 figures)"
    assert show("cost-nanodollars", Figure(61_230_000, E)) == "$0.06123 (estimated)"
    assert show("cost-nanodollars", Figure(100_000_000, E)) == "$0.1000 (estimated)"
    assert show("cost-nanodollars", Figure(12_340_000_000, "reported")) == "$12.34"
    assert show("cost-nanodollars", Figure(0, "reported")) == "$0.00"
    assert show("input-tokens", Figure(18_234, "reported")) == "18,234"
    assert show("input-tokens", MISSING) == "unavailable"


def test_the_cell_schema_admits_each_coverage_and_refuses_a_value_for_unavailable() -> None:
    contract = contract_of(trials_document())
    document = cell(contract, "steady", selection_sha256="0" * 64)
    document["usage"] = {"input-tokens": 10, "output-tokens": {"value": 3, "coverage": "estimated"},
                         "cost-nanodollars": {"value": 7, "coverage": "partial"}, "tool-calls": {"coverage": "unavailable"}}
    parsed = cell_from_bytes(json.dumps(document).encode(), "c.json")
    assert {k: (f.value, f.coverage) for k, f in parsed.usage().items()} == {
        "input-tokens": (10, "reported"), "output-tokens": (3, E), "cost-nanodollars": (7, P), "tool-calls": (None, U)}
    assert parse({"coverage": "unavailable"}) == MISSING
    for bad in ({"value": 3, "coverage": "unavailable"}, {"coverage": "estimated"}, -1, {"value": 1}):
        document["usage"] = {"input-tokens": bad}
        with pytest.raises(Refusal) as error:
            cell_from_bytes(json.dumps(document).encode(), "c.json")
        assert error.value.code == "export.cell_invalid"


def with_usage(document: dict[str, Any], **counters: Any) -> dict[str, Any]:
    document["usage"] = {name.replace("_", "-"): value for name, value in counters.items()}
    return document


def test_cost_totals_with_mixed_coverage_per_case_lane_and_campaign(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": "any"}))
    run, options = export_run(tmp_path, contract, [
        with_usage(trial_cell(contract, "flaky", 1), cost_nanodollars=40_000_000, input_tokens=1000),
        with_usage(trial_cell(contract, "flaky", 2), cost_nanodollars={"value": 60_000_000, "coverage": "estimated"},
                   input_tokens=2000),
        # flaky's third trial left no cell: its cost is unavailable, never zero
        with_usage(cell(contract, "steady"), cost_nanodollars=5_000_000_000, input_tokens=3000),
        with_usage(cell(contract, "human"), cost_nanodollars={"coverage": "unavailable"}),
    ])
    assert run.exit_code == 0, run.summary  # flaky passed trials 1 and 2: "any" is met
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    flaky = case_row(options, "flaky")
    # Rows record figures as cells report them: an integer when reported.
    assert flaky["usage"]["cost-nanodollars"] == {"value": 100_000_000, "coverage": "partial"}
    assert [t["usage"]["cost-nanodollars"] for t in flaky["trials"]] == [
        40_000_000, {"value": 60_000_000, "coverage": E}, {"coverage": U}]
    assert case_row(options, "steady")["usage"]["cost-nanodollars"] == 5_000_000_000
    assert case_row(options, "human")["usage"]["cost-nanodollars"] == {"coverage": U}
    block = receipt.document["usage"]
    assert block["counters"] == ["input-tokens", "cost-nanodollars"]
    assert block["campaign"]["cost-nanodollars"] == {"value": 5_100_000_000, "coverage": P, "figures": 5, "known": 3}
    assert block["lanes"]["native"]["cost-nanodollars"] == {"value": 5_100_000_000, "coverage": P, "figures": 4,
                                                            "known": 3}
    assert block["lanes"]["external"]["cost-nanodollars"] == {"value": None, "coverage": U, "figures": 1, "known": 0}
    assert (run.outputs["cost-nanodollars"], run.outputs["cost-coverage"]) == ("5100000000", P)
    # (a dollar sign is escaped in the summary: GitHub renders $...$ as mathematics)
    assert "≥ \\$5.10 (partial: 3 of 5 figures)" in run.summary
    # The Allure result carries its own cost with coverage; the environment the campaign's.
    results_dir = Path(options["results-dir"])
    labels = {label["name"]: label["value"] for label in
              json.loads((results_dir / flaky["result-file"]).read_text())["labels"]}
    assert (labels["cost-nanodollars"], labels["cost-coverage"]) == ("100000000", P)
    environment = (results_dir / "environment.properties").read_text()
    assert "usage.cost-nanodollars=5100000000\nusage.cost-nanodollars.coverage=partial\n" in environment


def test_no_cost_at_all_is_unavailable_not_zero(tmp_path: Path) -> None:
    contract = contract_of(trials_document())
    run, options = export_run(tmp_path, contract, [with_usage(cell(contract, key)) for key in ("flaky", "steady", "human")])
    assert run.exit_code == 0, run.summary
    assert (run.outputs["cost-nanodollars"], run.outputs["cost-coverage"]) == ("", U)
    assert "the campaign's cost is **unavailable**" in run.summary
    assert "usage.cost-nanodollars=unavailable" in (Path(options["results-dir"]) / "environment.properties").read_text()


def test_a_superseded_attempt_is_paid_for_too(tmp_path: Path) -> None:
    document = trials_document()
    document["trust"]["run-attempts"] = "any"
    contract = contract_of(document)
    early = with_usage(cell(contract, "steady", attempt="a1", finished="2026-12-01T10:04:00Z", **{"run-attempt": 1}),
                       cost_nanodollars=1_000)
    late = with_usage(cell(contract, "steady", attempt="a2", **{"run-attempt": 1}), cost_nanodollars=2_000)
    run, options = export_run(tmp_path, contract, [early, late, with_usage(cell(contract, "flaky"), cost_nanodollars=4),
                                                   with_usage(cell(contract, "human"), cost_nanodollars=8)])
    assert run.exit_code == 0, run.summary
    assert case_row(options, "steady")["usage"]["cost-nanodollars"] == 3_000
    assert run.outputs["cost-nanodollars"] == "3012"


@settings(max_examples=500, deadline=None)
@given(value=st.one_of(st.none(), st.integers(0, 2**54)), coverage=st.sampled_from(list(usage.COVERAGES)),
       figures=st.integers(0, 3), known=st.integers(0, 3))
def test_the_total_of_one_figure_is_the_total_of_a_list_of_it(value: int | None, coverage: str, figures: int,
                                                               known: int) -> None:
    figure = usage.Figure(value, coverage, figures, known)
    assert usage.total_of_one(figure) == usage.total([figure])
