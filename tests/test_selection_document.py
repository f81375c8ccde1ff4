"""The selection document: canonical bytes, digest, write-once, schema, and binding to contract and run."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from test_selection_support import actions_env, contract_of, example_document
from testops_evidence.campaign.selection import (
    SCHEMA_ID,
    Selection,
    TestOpsBinding,
    build_selection,
    check_sha256,
    load_selection,
    selection_bytes,
    validate_against,
    write_selection,
)
from testops_evidence.context import env_context, local_context
from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, sha256_bytes

CONTRACT = contract_of(example_document())
CONTEXT = env_context(actions_env())
BINDING = TestOpsBinding(endpoint="https://acme.testops.cloud", project_id=12, plan_id=340,
                         plan_name="Agent protocol evals", job_run_id=501, job_id=77, launch_id=9001)


def written(tmp_path: Path, document: dict[str, Any], name: str = "selection.json") -> tuple[Path, str]:
    data = selection_bytes(document)
    path = write_selection(tmp_path / name, data)
    return path, sha256_bytes(data)


def files_selection(cases: Any = None) -> dict[str, Any]:
    return build_selection(CONTRACT, CONTEXT, list(cases if cases is not None else CONTRACT.cases),
                           backend="files", source="contract")


def test_the_document_has_the_documented_shape() -> None:
    doc = build_selection(CONTRACT, CONTEXT, CONTRACT.cases[:2], backend="testops", source="job-run",
                          testops=BINDING)
    assert sorted(doc) == sorted(["schema", "campaign", "contract-sha256", "backend", "context", "testops",
                                  "profile", "source", "full-plan", "cases", "case-index"])
    assert doc["schema"] == SCHEMA_ID
    assert doc["contract-sha256"] == CONTRACT.digest
    assert doc["testops"] == {"endpoint": "https://acme.testops.cloud", "project-id": 12, "plan-id": 340,
                              "plan-name": "Agent protocol evals", "job-run-id": 501, "job-id": 77,
                              "launch-id": 9001}
    assert doc["full-plan"] is False
    assert doc["cases"] == [CONTRACT.cases[0].row(), CONTRACT.cases[1].row()]
    assert doc["context"]["run-url"] == CONTEXT.run_url


def test_canonical_bytes_are_sorted_compact_utf8_with_a_trailing_newline() -> None:
    data = selection_bytes(files_selection())
    assert data.endswith(b"}\n") and b"\n" not in data[:-1]
    assert data == canonical_json(json.loads(data))
    assert data.index(b'"backend"') < data.index(b'"campaign"') < data.index(b'"cases"')
    assert selection_bytes(files_selection()) == data  # reproducible: same inputs, same digest


def test_written_once_with_mode_0600_and_never_overwritten(tmp_path: Path) -> None:
    path, _ = written(tmp_path / "nested" / "dir", files_selection())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(Refusal) as excinfo:
        write_selection(path, b"{}\n")
    assert excinfo.value.code == "io.exists"


def test_load_then_validate_round_trip(tmp_path: Path) -> None:
    path, digest = written(tmp_path, files_selection())
    selection = load_selection(path, digest)
    validate_against(selection, CONTRACT, CONTEXT)
    assert selection.count == 12 and selection.full_plan and selection.digest == digest
    assert selection.keys == [case.key for case in CONTRACT.cases]
    assert selection.row("budget-stop") == CONTRACT.case("budget-stop").row()
    assert selection.context == dataclasses.replace(CONTEXT)


def test_relative_paths_are_read_below_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, digest = written(tmp_path, files_selection())
    monkeypatch.chdir(tmp_path)
    assert load_selection("./selection.json", digest).count == 12
    with pytest.raises(Refusal) as excinfo:
        load_selection("../elsewhere/selection.json", digest)
    assert excinfo.value.code == "io.unsafe_path"


@pytest.mark.parametrize("position", [0, 57, -2])
def test_one_changed_byte_is_a_digest_refusal(tmp_path: Path, position: int) -> None:
    path, digest = written(tmp_path, files_selection())
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    os.chmod(path, 0o600)
    path.write_bytes(bytes(data))
    with pytest.raises(Refusal) as excinfo:
        load_selection(path, digest)
    err = excinfo.value
    assert (err.code, err.exit_code, err.field, err.expected) == ("selection.digest", 3, "selection-sha256", digest)
    assert err.actual == sha256_bytes(bytes(data))


@pytest.mark.parametrize("value", [None, "", "ABC", "A" * 64, "g" * 64, "0" * 63, "0" * 65, " " + "0" * 63])
def test_the_digest_input_must_be_64_lowercase_hex(value: str | None) -> None:
    with pytest.raises(Refusal) as excinfo:
        check_sha256(value)
    assert (excinfo.value.code, excinfo.value.exit_code) == ("input.selection-sha256", 2)


def test_a_link_in_place_of_the_selection_is_refused(tmp_path: Path) -> None:
    path, digest = written(tmp_path, files_selection())
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(Refusal) as excinfo:
        load_selection(link, digest)
    assert excinfo.value.code == "io.unsafe_path"


def test_a_selection_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    path, digest = written(tmp_path, files_selection())
    with pytest.raises(Refusal) as excinfo:
        load_selection(path, digest, limit=100)
    assert excinfo.value.code == "io.too_large"


def test_bytes_that_hash_right_but_break_the_schema_are_invalid(tmp_path: Path) -> None:
    document = files_selection()
    document["cases"][0]["extra"] = 1
    data = canonical_json(document)
    path = tmp_path / "selection.json"
    path.write_bytes(data)
    with pytest.raises(Refusal) as excinfo:
        load_selection(path, sha256_bytes(data))
    assert (excinfo.value.code, excinfo.value.field) == ("selection.invalid", "/cases/0/extra")


def loaded(document: dict[str, Any]) -> Selection:
    data = canonical_json(document)
    return Selection(document=json.loads(data), digest=sha256_bytes(data), path="mem")


def test_another_run_attempt_or_commit_is_another_context() -> None:
    selection = loaded(files_selection())
    for override, field in ((dict(GITHUB_RUN_ATTEMPT="2"), "run-attempt"), (dict(GITHUB_RUN_ID="5"), "run-id"),
                            (dict(GITHUB_SHA="f" * 40), "head-sha")):
        with pytest.raises(Refusal) as excinfo:
            validate_against(selection, CONTRACT, env_context(actions_env(**override)))
        assert (excinfo.value.code, excinfo.value.field) == ("selection.context", field)
        # The operator is told which document does not bind, not "the document".
        assert excinfo.value.message == f"the selection was made for another run ({field} differs)"


def test_a_rehearsal_selection_does_not_bind_to_an_actions_run(tmp_path: Path) -> None:
    rehearsal = local_context(tmp_path, CONTRACT.trust.repository, CONTRACT.trust.workflows[0])
    selection = loaded(build_selection(CONTRACT, rehearsal, CONTRACT.cases, backend="files", source="contract"))
    with pytest.raises(Refusal) as excinfo:
        validate_against(selection, CONTRACT, CONTEXT)
    assert excinfo.value.code == "selection.context"


def test_another_contract_is_refused_by_its_digest() -> None:
    selection = loaded(files_selection())
    changed = example_document()
    changed["cases"][0]["title"] = "Another title"
    with pytest.raises(Refusal) as excinfo:
        validate_against(selection, contract_of(changed), CONTEXT)
    assert (excinfo.value.code, excinfo.value.field) == ("selection.context", "contract-sha256")


@pytest.mark.parametrize(
    ("mutate", "code", "field"),
    [
        (lambda d: d["cases"][1].update(title="forged"), "selection.foreign_case", "cases/1"),
        (lambda d: d["cases"][1].update(credentials=[]), "selection.foreign_case", "cases/1"),
        (lambda d: d["cases"][2].update(key="not-a-case"), "selection.foreign_case", "cases/2/key"),
        (lambda d: d["cases"].append(copy.deepcopy(d["cases"][0])), "selection.duplicate_case", "cases/12/key"),
        (lambda d: d.update({"full-plan": False}), "selection.invalid", "full-plan"),
        (lambda d: d.update(campaign="other"), "selection.context", "campaign"),
        (lambda d: d["profile"].update(model="other-model"), "selection.context", "profile"),
    ],
)
def test_rows_and_fields_must_equal_the_contract(mutate: Any, code: str, field: str) -> None:
    document = files_selection()
    mutate(document)
    with pytest.raises(Refusal) as excinfo:
        validate_against(loaded(document), CONTRACT, CONTEXT)
    assert (excinfo.value.code, excinfo.value.field) == (code, field)


def test_a_testops_selection_must_name_the_contracts_plan() -> None:
    other_plan = dataclasses.replace(BINDING, plan_id=341)
    document = build_selection(CONTRACT, CONTEXT, CONTRACT.cases, backend="testops", source="job-run",
                               testops=other_plan)
    with pytest.raises(Refusal) as excinfo:
        validate_against(loaded(document), CONTRACT, CONTEXT)
    assert (excinfo.value.code, excinfo.value.field) == ("selection.plan_binding", "plan-id")


def test_building_nothing_is_empty_and_backend_and_binding_must_agree() -> None:
    with pytest.raises(Refusal) as excinfo:
        build_selection(CONTRACT, CONTEXT, [], backend="files", source="contract")
    assert excinfo.value.code == "selection.empty"
    with pytest.raises(ValueError):
        build_selection(CONTRACT, CONTEXT, CONTRACT.cases, backend="testops", source="job-run")
    with pytest.raises(ValueError):
        build_selection(CONTRACT, CONTEXT, CONTRACT.cases, backend="files", source="elsewhere")
