"""The standing testplan.json parser and the plan-to-contract matching rule (id AND selector)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_selection_support import EXAMPLE_PLAN, contract_of, example_document, plan_json, without_testops
from testops_evidence.errors import Refusal, is_registered
from testops_evidence.readers.testplan import (
    PlanRow,
    match_rows,
    parse_jobrun_plan,
    parse_standing_plan,
    plan_document,
    read_standing_plan,
    rows_for_cases,
)

CONTRACT = contract_of(example_document())


def refusal(excinfo: pytest.ExceptionInfo[Refusal]) -> Refusal:
    return excinfo.value


def test_example_standing_plan_lists_every_example_case_in_contract_order() -> None:
    rows = read_standing_plan(EXAMPLE_PLAN)
    assert [case.key for case in match_rows(rows, CONTRACT)] == [case.key for case in CONTRACT.cases]


def test_allure_string_ids_and_integer_ids_both_parse() -> None:
    rows = parse_standing_plan(plan_json([{"id": "194", "selector": "a"}, {"id": 196, "selector": "b"}]).encode())
    assert rows == (PlanRow(194, "a"), PlanRow(196, "b"))


def test_a_selector_only_row_parses_without_an_id() -> None:
    assert parse_standing_plan(plan_json([{"selector": "x/y"}]).encode()) == (PlanRow(None, "x/y"),)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"version":"2.0","tests":[]}', "/version"),
        ('{"tests":[]}', "/version"),
        ('{"version":"1.0"}', "/tests"),
        ('{"version":"1.0","tests":{}}', "/tests"),
        ('{"version":"1.0","tests":[],"extra":1}', "/"),
        ('{"version":"1.0","tests":["194"]}', "/tests/0"),
        ('{"version":"1.0","tests":[{}]}', "/tests/0"),
        ('{"version":"1.0","tests":[{"id":"194","selector":"a","name":"x"}]}', "/tests/0"),
        ('{"version":"1.0","tests":[{"id":"0194","selector":"a"}]}', "/tests/0/id"),
        ('{"version":"1.0","tests":[{"id":true,"selector":"a"}]}', "/tests/0/id"),
        ('{"version":"1.0","tests":[{"id":-3,"selector":"a"}]}', "/tests/0/id"),
        ('{"version":"1.0","tests":[{"id":1.5,"selector":"a"}]}', "/tests/0/id"),
        ('{"version":"1.0","tests":[{"id":"1","selector":""}]}', "/tests/0/selector"),
        ('{"version":"1.0","tests":[{"id":"1","selector":7}]}', "/tests/0/selector"),
        ('[1,2]', "/"),
        ('{"version":"1.0","version":"1.0","tests":[]}', "/version"),
        ("not json", "/"),
    ],
)
def test_shape_errors_are_refused_as_standing_plan_with_the_pointer(text: str, field: str) -> None:
    with pytest.raises(Refusal) as excinfo:
        parse_standing_plan(text.encode())
    assert (refusal(excinfo).code, refusal(excinfo).field) == ("selection.standing_plan", field)
    assert refusal(excinfo).exit_code == 2


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(Refusal) as excinfo:
        parse_standing_plan(b'{"version":"1.0","tests":[{"selector":"\xff"}]}')
    assert refusal(excinfo).code == "selection.standing_plan"


@pytest.mark.parametrize(
    "rows",
    [
        [{"id": "194", "selector": "a"}, {"id": 194, "selector": "b"}],
        [{"id": "194", "selector": "a"}, {"id": "195", "selector": "a"}],
    ],
)
def test_a_repeated_id_or_selector_is_a_duplicate_case(rows: list[dict[str, Any]]) -> None:
    with pytest.raises(Refusal) as excinfo:
        parse_standing_plan(plan_json(rows).encode())
    assert refusal(excinfo).code == "selection.duplicate_case"
    assert refusal(excinfo).field is not None and refusal(excinfo).field.startswith("/tests/1/")


def test_right_id_with_a_wrong_selector_is_foreign() -> None:
    rows = (PlanRow(194, "agents/protocol/not-the-selector"),)
    with pytest.raises(Refusal) as excinfo:
        match_rows(rows, CONTRACT)
    err = refusal(excinfo)
    assert err.code == "selection.foreign_case" and err.exit_code == 3
    assert err.expected == {"id": 194, "selector": "agents/protocol/get-task-context"}
    assert err.actual == {"id": 194, "selector": "agents/protocol/not-the-selector"}
    assert "its id names contract case 'get-task-context'" in err.message


def test_right_selector_with_a_wrong_id_is_foreign() -> None:
    rows = (PlanRow(999, "agents/protocol/get-task-context"),)
    with pytest.raises(Refusal) as excinfo:
        match_rows(rows, CONTRACT)
    err = refusal(excinfo)
    assert err.code == "selection.foreign_case"
    assert err.expected == {"id": 194, "selector": "agents/protocol/get-task-context"}
    assert "its selector names contract case 'get-task-context', whose id is 194" in err.message


def test_two_contract_cases_crossed_are_foreign() -> None:
    # id of one case with the selector of another: each half matches, the row does not.
    with pytest.raises(Refusal) as excinfo:
        match_rows((PlanRow(196, "agents/protocol/get-task-context"),), CONTRACT)
    assert refusal(excinfo).code == "selection.foreign_case"


def test_a_row_without_an_id_is_foreign_when_the_contract_has_ids() -> None:
    with pytest.raises(Refusal) as excinfo:
        match_rows((PlanRow(None, "agents/protocol/get-task-context"),), CONTRACT)
    assert refusal(excinfo).code == "selection.foreign_case"


def test_selector_only_rows_match_a_contract_without_ids() -> None:
    document = without_testops(example_document())
    for case in document["cases"]:
        case.pop("testops-id")
    contract = contract_of(document)
    cases = match_rows((PlanRow(None, "agents/protocol/budget-stop"),), contract)
    assert [c.key for c in cases] == ["budget-stop"]
    with pytest.raises(Refusal) as excinfo:
        match_rows((PlanRow(201, "agents/protocol/budget-stop"),), contract)
    assert refusal(excinfo).code == "selection.foreign_case"


def test_a_case_planned_twice_is_a_duplicate_and_an_empty_plan_is_empty() -> None:
    row = PlanRow(194, "agents/protocol/get-task-context")
    with pytest.raises(Refusal) as excinfo:
        match_rows((row, row), CONTRACT)
    assert (refusal(excinfo).code, refusal(excinfo).field) == ("selection.duplicate_case", "plan/1")
    with pytest.raises(Refusal) as excinfo:
        match_rows((), CONTRACT)
    assert refusal(excinfo).code == "selection.empty"


def test_plan_order_is_kept() -> None:
    picked = [CONTRACT.cases[5], CONTRACT.cases[0], CONTRACT.cases[11]]
    assert match_rows(rows_for_cases(picked), CONTRACT) == picked


def test_jobrun_plan_rows_keep_bad_fields_as_none_so_matching_names_the_row() -> None:
    rows = parse_jobrun_plan([{"id": 194, "selector": "agents/protocol/get-task-context"}, {"id": "x"}])
    assert rows == (PlanRow(194, "agents/protocol/get-task-context"), PlanRow(None, None))
    with pytest.raises(Refusal) as excinfo:
        match_rows(rows, CONTRACT)
    assert (refusal(excinfo).code, refusal(excinfo).field) == ("selection.foreign_case", "plan/1")


@pytest.mark.parametrize("value", [{"content": []}, "text", [1], None])
def test_a_jobrun_plan_of_another_shape_is_an_invalid_response(value: Any) -> None:
    with pytest.raises(Refusal) as excinfo:
        parse_jobrun_plan(value)
    assert refusal(excinfo).code == "testops.response_invalid"


# --- properties -----------------------------------------------------------------------------------------

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=12)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
ROW = st.fixed_dictionaries({}, optional={
    "id": st.integers(-5, 10**19) | st.text(alphabet="0123456789x-", max_size=21) | JSON_SCALARS,
    "selector": st.text(max_size=30) | JSON_SCALARS,
})
PLAN = st.fixed_dictionaries({"version": st.sampled_from(["1.0", "1.0", "1.1", 1]), "tests": st.lists(ROW, max_size=8)})


def _total(data: bytes) -> None:
    """The parser's contract: rows, or a registered refusal; never another exception."""
    try:
        rows = parse_standing_plan(data)
    except Refusal as err:
        assert is_registered(err.code)
        assert err.code in ("selection.standing_plan", "selection.duplicate_case")
        return
    ids = [r.id for r in rows if r.id is not None]
    selectors = [r.selector for r in rows if r.selector is not None]
    assert len(ids) == len(set(ids)) and len(selectors) == len(set(selectors))
    assert all(r.id is None or r.id > 0 for r in rows)
    assert all(r.id is not None or r.selector is not None for r in rows)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_refuse(data: bytes) -> None:
    _total(data)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_any_json_value_parses_or_refuses(value: Any) -> None:
    _total(json.dumps(value).encode())


@settings(max_examples=300, deadline=None)
@given(PLAN)
def test_plan_shaped_documents_parse_or_refuse(value: dict[str, Any]) -> None:
    _total(json.dumps(value).encode())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(CONTRACT.cases), unique_by=lambda c: c.key, min_size=1))
def test_a_written_plan_parses_back_and_matches_the_same_cases(cases: list[Any]) -> None:
    data = json.dumps(plan_document(cases)).encode()
    assert match_rows(parse_standing_plan(data), CONTRACT) == cases


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 400) | st.none(), st.text(max_size=40) | st.none()), max_size=6))
def test_matching_accepts_only_rows_equal_to_contract_cases(pairs: list[tuple[int | None, str | None]]) -> None:
    rows = tuple(PlanRow(i, s) for i, s in pairs)
    known = {(c.testops_id, c.full_name) for c in CONTRACT.cases}
    try:
        cases = match_rows(rows, CONTRACT)
    except Refusal as err:
        assert err.code in ("selection.foreign_case", "selection.duplicate_case", "selection.empty")
        return
    assert [(c.testops_id, c.full_name) for c in cases] == [(r.id, r.selector) for r in rows]
    assert all((r.id, r.selector) in known for r in rows)
