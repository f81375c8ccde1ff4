"""The exported Allure results hold to both reference producers' models (issue 28, A1).

tests/data/allure-model/allure-result.schema.json is derived from allure-js-commons 3.12.2's TypeScript model
(dist/types/model.d.ts) and allure-python-commons 2.16.2's (allure_commons/model2.py): what allure-js-commons
types as required is required (``statusDetails`` among it, on a passed result and step too), and no field is
written that neither model has. Every result file of real exports — single cases, failures, cases not
recorded, and trials with their verdict — is validated against it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attr
import pytest
from jsonschema import Draft202012Validator

from evidence_support import cell
from test_export import export, prepare
from test_trials import contract_of, export_run, trial_cell, trials_document

SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "allure-model" / "allure-result.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def violations(document: Any) -> list[str]:
    validator = Draft202012Validator(SCHEMA)
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]


def steps_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for step in document.get("steps", []):
        found += [step, *steps_of(step)]
    return found


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)


def test_the_schema_allows_exactly_the_fields_of_the_two_models() -> None:
    """allure-python-commons is installed: its attrs classes are read here; allure-js-commons' fields are the
    ones the schema's comments cite from its model.d.ts."""
    from allure_commons import model2

    defs = SCHEMA["$defs"]
    executable = set(defs["executable"]["properties"])
    python_executable = {field.name for field in attr.fields(model2.ExecutableItem)}
    js_executable = {"name", "status", "statusDetails", "stage", "description", "descriptionHtml", "steps",
                     "attachments", "parameters", "start", "stop"}
    assert executable == python_executable | js_executable
    python_result = {field.name for field in attr.fields(model2.TestResult)} - python_executable
    assert set(defs["testResult"]["properties"]) == python_result | {"uuid", "historyId", "fullName", "testCaseId",
                                                                     "titlePath", "labels", "links"}
    python_step = {field.name for field in attr.fields(model2.TestStepResult)} - python_executable
    assert set(defs["stepResult"]["properties"]) == python_step | {"uuid"}
    assert set(defs["statusDetails"]["properties"]) == (
        {field.name for field in attr.fields(model2.StatusDetails)} | {"message", "trace", "actual", "expected"})
    for name, model in (("attachment", model2.Attachment), ("parameter", model2.Parameter),
                        ("label", model2.Label), ("link", model2.Link)):
        assert {field.name for field in attr.fields(model)} <= set(defs[name]["properties"]), name
    # Required by allure-js-commons (no `?` in model.d.ts): statusDetails is one of them.
    assert "statusDetails" in defs["executable"]["required"]


def test_a_passed_result_and_its_passed_steps_carry_status_details(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.log + run.summary
    results = [json.loads(path.read_text()) for path in Path(options["results-dir"]).glob("*-result.json")]
    assert {result["status"] for result in results} == {"passed", "failed", "broken"}
    for result in results:
        assert violations(result) == [], result["fullName"]
    passed = next(result for result in results if result["status"] == "passed")
    assert passed["statusDetails"] == {}  # what allure-js-commons' own factory writes when there is nothing to say
    assert [step["statusDetails"] for step in passed["steps"]] == [{}] * len(passed["steps"]) != []


def test_every_result_and_step_of_a_trials_export_holds_to_the_models(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": "all"},
                                           steady={"count": 2, "verdict": "any"}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 3, failed=("answer",)),  # trial 2 missing
        trial_cell(contract, "steady", 1), trial_cell(contract, "steady", 2),
        cell(contract, "human"),
    ])
    assert run.exit_code == 1, run.summary
    results = [json.loads(path.read_text()) for path in Path(options["results-dir"]).glob("*-result.json")]
    steps = [step for result in results for step in steps_of(result)]
    assert {step["status"] for step in steps} >= {"passed", "failed", "broken", "skipped"}
    assert any(step["steps"] for step in steps)  # the verdict's trial steps, each with its checks
    assert [(result["fullName"], violations(result)) for result in results if violations(result)] == []
    assert all("statusDetails" in step for step in steps)


@pytest.mark.parametrize("field", ["statusDetails", "stage", "steps", "attachments", "parameters"])
def test_the_check_refuses_a_result_or_step_without_a_required_field(tmp_path: Path, field: str) -> None:
    options, env = prepare(tmp_path)
    export(tmp_path, options, env)
    result = json.loads(next(Path(options["results-dir"]).glob("*-result.json")).read_text())
    without = {key: value for key, value in result.items() if key != field}
    assert any(f"'{field}' is a required property" in line for line in violations(without))
    step_without = {**result, "steps": [{k: v for k, v in result["steps"][0].items() if k != field}]}
    assert any(f"'{field}' is a required property" in line for line in violations(step_without))
    assert violations({**result, "unknownField": 1}) != []
