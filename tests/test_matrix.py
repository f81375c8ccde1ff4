"""The matrix plan: lanes, one case per job up to 256, balanced shards above, and the output budget."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_selection_support import big_document, contract_of, example_document
from testops_evidence.actions import format_output_value
from testops_evidence.campaign.matrix import (
    MAX_MATRIX_JOBS,
    case_row,
    check_output_budget,
    measure,
    plan_matrices,
    shard_sizes,
)
from testops_evidence.errors import Refusal

EXAMPLE = contract_of(example_document())


def test_the_example_contract_gets_one_job_per_case_per_lane() -> None:
    plan = plan_matrices(EXAMPLE.cases, EXAMPLE.lanes)
    native, external = plan.lane("native"), plan.lane("external")
    assert (native.jobs, external.jobs) == (9, 3)
    assert (native.max_parallel, external.max_parallel) == (4, 1)
    assert not native.sharded and not external.sharded
    assert native.include[0] == {
        "job": "native-get-task-context", "key": "get-task-context", "testops-id": 194, "full-name": "agents/protocol/get-task-context",
        "title": "Get task context", "lane": "native", "credentials": ["ANTHROPIC_API_KEY"],
        "timeout-minutes": 8, "keys": ["get-task-context"],
    }
    outputs = plan.outputs()
    assert sorted(outputs) == sorted(f"{lane}-{what}" for lane in ("native", "external")
                                     for what in ("matrix", "count", "max-parallel"))
    assert outputs["external-matrix"] == {"include": list(external.include)}


def test_an_empty_lane_has_count_zero_and_an_empty_include() -> None:
    natives = [case for case in EXAMPLE.cases if case.lane == "native"]
    outputs = plan_matrices(natives, EXAMPLE.lanes).outputs()
    assert outputs["external-count"] == 0
    assert format_output_value(outputs["external-matrix"]) == '{"include":[]}'
    assert outputs["external-max-parallel"] == 1  # the contract's value, kept for a later selection


def test_exactly_256_cases_stay_one_per_job_and_257_are_sharded() -> None:
    contract = contract_of(big_document(257, external_every=10**9))
    at_limit = plan_matrices(contract.cases[:256], contract.lanes).lane("native")
    assert (at_limit.jobs, at_limit.sharded) == (256, False)
    over = plan_matrices(contract.cases, contract.lanes).lane("native")
    assert over.sharded and over.jobs == 129  # 2 cases per job: as few per job as the cap allows
    assert [len(row["keys"]) for row in over.include].count(1) == 1


def test_shard_rows_carry_their_keys_credentials_and_summed_timeout() -> None:
    contract = contract_of(big_document(600, external_every=10**9))
    lane = plan_matrices(contract.cases, contract.lanes).lane("native")
    first = lane.include[0]
    members = [contract.case(key) for key in first["keys"]]
    assert sorted(first) == ["credentials", "job", "keys", "lane", "shard", "shards", "timeout-minutes"]
    assert (first["job"], first["shard"], first["shards"], first["lane"]) == ("native-shard-1", 1, lane.jobs, "native")
    assert first["timeout-minutes"] == sum(case.timeout_minutes for case in members)
    assert first["credentials"] == sorted({c for case in members for c in case.credentials})


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 20_000), st.integers(1, 300))
def test_shard_sizes_cover_every_case_balanced_under_the_job_cap(count: int, cap: int) -> None:
    sizes = shard_sizes(count, cap)
    assert sum(sizes) == count
    assert len(sizes) <= cap
    if sizes:
        assert max(sizes) - min(sizes) <= 1
        assert max(sizes) == -(-count // cap) or max(sizes) <= -(-count // cap)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 1200), st.integers(2, 40))
def test_every_case_is_in_exactly_one_row_in_plan_order(count: int, cap: int) -> None:
    contract = contract_of(big_document(count, external_every=3))
    plan = plan_matrices(contract.cases, contract.lanes, max_jobs=cap)
    for name in ("native", "external"):
        lane = plan.lane(name)
        keys = [key for row in lane.include for key in row["keys"]]
        assert keys == [case.key for case in contract.cases if case.lane == name]
        assert lane.jobs <= cap


def test_measure_counts_utf8_and_utf16_of_name_and_value() -> None:
    (size,) = measure({"m": {"include": [{"title": "é😀"}]}})
    text = "m" + json.dumps({"include": [{"title": "é😀"}]}, separators=(",", ":"), ensure_ascii=False)
    assert size.utf8_bytes == len(text.encode("utf-8"))
    assert size.utf16_bytes == len(text.encode("utf-16-le"))
    assert size.budgeted == max(size.utf8_bytes, size.utf16_bytes)


def test_ascii_is_budgeted_at_its_utf16_size_and_cjk_at_its_utf8_size() -> None:
    (ascii_size,) = measure({"a": "x" * 99})
    (cjk_size,) = measure({"a": "字" * 99})
    assert ascii_size.budgeted == 200 and ascii_size.utf8_bytes == 100
    assert cjk_size.budgeted == 1 + 3 * 99  # UTF-8 is the larger for CJK


def test_the_budget_refuses_before_github_would_drop_an_output() -> None:
    outputs = {"native-matrix": {"include": [{"key": "k" * 100}] * 4500}, "selected-count": 4500}
    total = sum(size.budgeted for size in measure(outputs))
    assert total > 900_000
    with pytest.raises(Refusal) as excinfo:
        check_output_budget(outputs, 4500, budget=900_000)
    err = excinfo.value
    assert (err.code, err.exit_code, err.field, err.actual) == ("selection.matrix_too_large", 3, "outputs", total)
    assert "native-matrix" in err.message
    assert "`cases:`" in err.hint and f"about {4500 * 900_000 // total} of these 4500 cases" in err.hint
    assert check_output_budget(outputs, 4500, budget=total) == measure(outputs)


def test_case_rows_copy_the_contract_values() -> None:
    case = EXAMPLE.case("heartbeat-resume")
    row = case_row(case)
    assert row["credentials"] == ["ANTHROPIC_API_KEY", "PAPERCLIP_RUNNER_KEY"]
    assert row["credentials"] is not case.credentials
    assert MAX_MATRIX_JOBS == 256


def test_every_case_is_owned_by_exactly_one_worker_job_sharded_or_not() -> None:
    """The plan is the worker binding (issue 12): export accepts a case's cell only from its owner's artifact."""
    for count in (3, 600):
        contract = contract_of(big_document(count, external_every=7))
        plan = plan_matrices(contract.cases, contract.lanes)
        jobs = plan.jobs()
        owners = plan.owners()
        assert sorted(owners) == sorted((case.key, 1) for case in contract.cases)
        assert sum(len(units) for units in jobs.values()) == count  # no case in two jobs
        assert len(jobs) == sum(plan.lane(lane).jobs for lane in ("native", "external"))
        for job, units in jobs.items():
            assert all(owners[unit] == job for unit in units)
            assert job.startswith(contract.case(units[0][0]).lane + "-")
        # Recomputing the plan from the same cases (what export does) names the same owners.
        assert plan_matrices(contract.cases, contract.lanes).owners() == owners
