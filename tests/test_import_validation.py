"""Remote-cell validation rules, one code each, without a network (remote.py is pure)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from import_builders import (
    HEAD_SHA,
    POSTGRES,
    PREFIX,
    REF,
    REPOSITORY,
    RUN_ID,
    WORKFLOW,
    Cell,
    artifact_entries,
    contract,
    dumps,
    host_document,
    intent_document,
    make_zip,
    result_document,
    sha256,
)
from testops_evidence.campaign import remote
from testops_evidence.errors import Refusal
from testops_evidence.readers.archive import extract_zip

RUN = remote.SourceRun(repository=REPOSITORY, run_id=RUN_ID, run_attempt=1, workflow=WORKFLOW, head_branch="main",
                       head_sha=HEAD_SHA, head_repository=REPOSITORY, event="workflow_dispatch")


def artifact_for(data: bytes) -> remote.SourceArtifact:
    return remote.SourceArtifact(artifact_id=77, name="cells", size=len(data), digest="sha256:" + sha256(data),
                                 run_id=RUN_ID, head_sha=HEAD_SHA)


def validate(cells: list[Cell], *, entries: Callable[[list[Any]], list[Any]] | None = None,
             run: remote.SourceRun = RUN, intent_cells: list[Cell] | None = None,
             contract_changes: dict[str, Any] | None = None,
             intent_changes: dict[str, Any] | None = None) -> list[remote.RemoteCell]:
    """Everything the phase does after download, for one archive."""
    the_contract = contract(**(contract_changes or {}))
    assert the_contract.remote is not None
    policy = the_contract.remote
    raw = artifact_entries(cells)
    data = make_zip(entries(raw) if entries else raw)
    intent = remote.parse_intent(dumps(intent_document(intent_cells if intent_cells is not None else cells,
                                                       **(intent_changes or {}))), the_contract)
    remote.admit_run(policy, run)
    remote.bind_intent(intent, run)
    artifact = artifact_for(data)
    expected = remote.admit_artifact(policy, run, artifact)
    archive_sha = remote.check_archive_digest(artifact, expected, data)
    archive = extract_zip(data, prefix=PREFIX)
    found = remote.find_cells(archive, PREFIX)
    host = remote.parse_host(found.host, PREFIX, policy, run, intent)
    return [remote.validate_cell(contract=the_contract, policy=policy, intent=intent, run=run, artifact=artifact,
                                 archive_sha256=archive_sha, host=host, files=files, archive=archive, prefix=PREFIX,
                                 imported_at="2026-12-01T11:00:00Z") for files in found.cells]


def refused(code: str, *args: Any, **kwargs: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        validate(*args, **kwargs)
    assert caught.value.code == code, str(caught.value)
    return caught.value


def edit_json(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[list[Any]], list[Any]]:
    def edit(entries: list[Any]) -> list[Any]:
        out = []
        for entry_name, data in entries:
            if entry_name == name:
                document = json.loads(data)
                change(document)
                data = dumps(document)
            out.append((entry_name, data))
        return out
    return edit


def setting(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node = document
        keys = path.split("/")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[keys[-1]] = value
    return change


RESULT_1 = f"{PREFIX}exec-1/result.json"
HOST = f"{PREFIX}host.json"
DEFINITION_1 = f"{PREFIX}exec-1/definition.json"


def test_a_valid_archive_becomes_ledger_entries_with_every_digest() -> None:
    cells = [Cell("exec-1"), Cell("exec-2", case="company-credential-approval", ordinal=2,
                                  disposition="behavior_failure")]
    validated = validate(cells)
    assert [(c.execution_id, c.case, c.ordinal, c.disposition) for c in validated] == [
        ("exec-1", "get-task-context", 1, "passed"), ("exec-2", "company-credential-approval", 2, "behavior_failure")]
    record = validated[0].record
    entries = dict(artifact_entries(cells))
    assert record["import-key"] == f"{RUN_ID}/1/exec-1"
    assert record["measurement-key"] == f"agent-protocol-nightly/{cells[0].accounting_id()}/exec-1"
    assert record["result-sha256"] == sha256(entries[RESULT_1])
    assert record["host-sha256"] == sha256(entries[HOST])
    assert record["definition-sha256"] == sha256(entries[DEFINITION_1])
    assert record["provenance"] == {"repository": REPOSITORY, "workflow": WORKFLOW, "ref": REF, "run-id": RUN_ID,
                                    "run-attempt": 1, "head-sha": HEAD_SHA, "artifact-id": 77,
                                    "artifact-name": "cells", "artifact-size": record["provenance"]["artifact-size"]}
    assert validated[0].completion["checks"] == {"tool-called": True, "answer-grounded": True, "cleanup": True}
    assert validated[1].completion["checks"] == {"secret-saved": False, "approval-recorded": False}


# --- provenance -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    ({"repository": "evil/agents"}, "repository"),
    ({"head_repository": "fork/agents"}, "head-repository"),
    ({"head_repository": None}, "head-repository"),
    ({"workflow": ".github/workflows/other.yml"}, "workflow"),
    ({"head_branch": "feature"}, "ref"),
    ({"head_branch": None}, "ref"),
])
def test_a_foreign_run_is_refused(change: dict[str, Any], field: str) -> None:
    assert refused("import.foreign_workflow", [Cell("exec-1")], run=replace(RUN, **change)).field == field


def test_repository_names_compare_case_insensitively() -> None:
    validate([Cell("exec-1")], run=replace(RUN, repository="ACME/Agents", head_repository="acme/AGENTS"))


def test_a_rerun_attempt_is_refused_under_first_only_and_admitted_under_any() -> None:
    rerun = replace(RUN, run_attempt=2)
    assert refused("import.rerun", [Cell("exec-1")], run=rerun).hint
    # Under `any` the documents must still be written by that attempt (they say attempt 1 here).
    assert refused("import.host", [Cell("exec-1")], run=rerun,
                   contract_changes={"run-attempts": "any"}).field == "run-attempt"


def test_an_automatic_retry_is_refused_under_first_only() -> None:
    retried = Cell("exec-1", result={"attempt": 2})
    assert refused("import.rerun", [retried]).field == "attempt"
    validate([retried], contract_changes={"run-attempts": "any"})
    edit = edit_json(HOST, setting("automatic-retries", 1))
    assert refused("import.rerun", [Cell("exec-1")], entries=edit).field == "automatic-retries"


@pytest.mark.parametrize(("artifact_change", "code"), [
    ({"run_id": 1}, "import.foreign_workflow"),
    ({"head_sha": "f" * 40}, "import.foreign_workflow"),
    ({"expired": True}, "import.artifact"),
    ({"size": 2 * 1024 * 1024}, "import.unsafe_archive"),
    ({"digest": None}, "import.digest"),
    ({"digest": "md5:abc"}, "import.digest"),
])
def test_artifact_admission(artifact_change: dict[str, Any], code: str) -> None:
    the_contract = contract()
    assert the_contract.remote is not None
    artifact = replace(artifact_for(b"zip"), **artifact_change)
    with pytest.raises(Refusal) as caught:
        remote.admit_artifact(the_contract.remote, RUN, artifact)
    assert caught.value.code == code


def test_a_bare_hex_digest_is_accepted_and_a_tampered_archive_is_not() -> None:
    the_contract = contract()
    assert the_contract.remote is not None
    artifact = replace(artifact_for(b"original"), digest=sha256(b"original").upper())
    expected = remote.admit_artifact(the_contract.remote, RUN, artifact)
    assert remote.check_archive_digest(artifact, expected, b"original") == sha256(b"original")
    with pytest.raises(Refusal) as caught:
        remote.check_archive_digest(artifact, expected, b"tampered")
    assert caught.value.code == "import.digest" and caught.value.actual == sha256(b"tampered")


# --- the intent -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "field"), [
    ({"campaign": "other"}, "campaign"),
    ({"schema": "testops-evidence/import-intent/v2"}, "/schema"),
    ({"source-revision": "ABC"}, "/source-revision"),
    ({"selected": []}, "/selected"),
    ({"selected": [{"execution-id": "e", "case": "unknown-case", "ordinal": 1}]}, "/selected/0/case"),
    ({"selected": [{"execution-id": "a", "case": "get-task-context", "ordinal": 1},
                   {"execution-id": "b", "case": "get-task-context", "ordinal": 1}]}, "/selected/1/ordinal"),
    ({"selected": [{"execution-id": "a", "case": "get-task-context", "ordinal": 0}]}, "/selected/0/ordinal"),
    ({"extra": 1}, "/extra"),
])
def test_an_invalid_intent_is_refused(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(Refusal) as caught:
        remote.parse_intent(dumps(intent_document([Cell("exec-1")], **changes)), contract())
    assert caught.value.code == "import.intent"
    assert caught.value.field == field


def test_an_intent_with_duplicate_keys_or_no_object_is_refused() -> None:
    for data in (b'{"campaign": "a", "campaign": "b"}', b"[]", b"\xff", b""):
        with pytest.raises(Refusal) as caught:
            remote.parse_intent(data, contract())
        assert caught.value.code == "import.intent"


def test_the_intent_must_name_the_runs_head_commit() -> None:
    assert refused("import.intent", [Cell("exec-1")],
                   intent_changes={"source-revision": "f" * 40}).field == "source-revision"


def test_an_execution_must_be_selected_exactly_once_for_its_case() -> None:
    assert refused("import.not_selected", [Cell("exec-1"), Cell("exec-2", ordinal=2)],
                   intent_cells=[Cell("exec-1")]).actual == "exec-2"
    twice = [Cell("exec-1"), Cell("exec-1", case="company-credential-approval")]
    assert "selected 2 times" in refused("import.not_selected", [Cell("exec-1")], intent_cells=twice).message
    other_case = [Cell("exec-1", case="company-credential-approval")]
    assert refused("import.not_selected", [Cell("exec-1")], intent_cells=other_case).field == "cell.case"


# --- documents --------------------------------------------------------------------------------------------

def _drop(name: str) -> Callable[[list[Any]], list[Any]]:
    return lambda entries: [(n, d) for n, d in entries if n != name]


def _move(old: str, new: str) -> Callable[[list[Any]], list[Any]]:
    return lambda entries: [(new if n == old else n, d) for n, d in entries]


@pytest.mark.parametrize(("edit", "field"), [
    (_drop(HOST), "path"),
    (_drop(DEFINITION_1), "path"),
    (_drop(f"{PREFIX}exec-1/transcript.json"), "cell.artifacts"),
    (_move(RESULT_1, "elsewhere/exec-1/result.json"), "artifact-prefix"),  # outside the prefix: not found
    (edit_json(RESULT_1, setting("execution-id", "exec-9")), "execution-id"),
    (edit_json(RESULT_1, setting("run-id", 1)), "run-id"),
    (edit_json(RESULT_1, setting("run-attempt", 2)), "run-attempt"),
    (edit_json(RESULT_1, setting("cell/run-attempt", 2)), "cell.run-attempt"),
    (edit_json(RESULT_1, setting("cell/source-sha", "f" * 40)), "cell.source-sha"),
    (edit_json(RESULT_1, setting("cell/profile", {"id": "other"})), "cell.profile"),
    (edit_json(RESULT_1, setting("cell/checks", [{"id": "tool-called", "passed": True}])),
     "cell.get-task-context/checks"),
    (edit_json(RESULT_1, setting("cell/checks/0/passed", False)), "cell.get-task-context/checks"),  # pass w/o evidence
    (edit_json(RESULT_1, setting("cell/finished-at", "2026-12-01T10:00:00Z")), "cell.finished-at"),
    (edit_json(RESULT_1, setting("duration-ms", 10_000_000)), "duration-ms"),
    (edit_json(RESULT_1, setting("accounting/attempt-id", "../x")), "/accounting/attempt-id"),
    (edit_json(RESULT_1, setting("cell/disposition", "maybe")), "/cell/disposition"),
    (edit_json(RESULT_1, setting("schema", "testops-evidence/remote-result/v0")), "/schema"),
])
def test_document_rules(edit: Callable[[list[Any]], list[Any]], field: str) -> None:
    assert refused("import.document", [Cell("exec-1")], entries=edit).field == field


def test_result_documents_that_are_not_json_objects_are_refused() -> None:
    for data in (b"[1]", b"{", b'{"a": 1, "a": 2}', "é".encode("latin-1"), b'{"schema": "\\ud800"}'):
        refusal = refused("import.document", [Cell("exec-1")],
                          entries=lambda entries, d=data: [(n, d if n == RESULT_1 else v) for n, v in entries])
        assert refusal.field in ("/", "/a", "/schema")  # the pointer of the problem, where it has one


def test_a_listed_file_with_another_digest_is_import_digest() -> None:
    edit = lambda entries: [(n, b"changed" if n.endswith("transcript.json") else d) for n, d in entries]  # noqa: E731
    assert refused("import.digest", [Cell("exec-1")], entries=edit).field == f"{PREFIX}exec-1/transcript.json"


def test_an_invalid_execution_directory_is_refused() -> None:
    refusal = refused("import.document", [Cell("exec-1")], entries=_move(RESULT_1, f"{PREFIX}-bad/result.json"))
    assert refusal.actual == f"{PREFIX}-bad/result.json"


# --- host -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    (setting("lifecycle", "on-demand"), "host.lifecycle"),
    (setting("evaluation-admitted", 0), "host.evaluation-admitted"),  # 0 is not false
    (setting("cpu", {"vendor": "amd"}), "host.cpu.vendor"),
    (setting("cpu", "intel"), "host.cpu.vendor"),  # not an object: the dotted key does not resolve
    (lambda d: d.pop("region"), "host.region"),
    (setting("images", {"postgres": "sha256:" + "cd" * 32}), "images.postgres"),
    (setting("images", {}), "images.postgres"),
    (setting("run-id", 1), "run-id"),
    (setting("run-attempt", 3), "run-attempt"),
    (setting("source-revision", "f" * 40), "source-revision"),
    (setting("execution-ids", ["exec-2"]), "execution-ids"),
    (setting("qualified-at", "2026-12-01T10:02:01Z"), "qualified-at"),  # after the cell started
    (setting("qualified-at", "2026-13-01T10:00:00Z"), "qualified-at"),  # not a date
    (setting("schema", "x"), "/schema"),
    (setting("images", {"postgres": "latest"}), "/images/postgres"),
])
def test_an_unqualified_host_is_refused(change: Callable[[dict[str, Any]], Any], field: str) -> None:
    def apply(document: dict[str, Any]) -> None:
        change(document)
    assert refused("import.host", [Cell("exec-1")], entries=edit_json(HOST, apply)).field == field


def test_host_facts_may_hold_more_than_the_contract_asks() -> None:
    validate([Cell("exec-1")], entries=edit_json(HOST, setting("kernel", {"release": "6.8"})))


def test_dotted_lookup_and_strict_equality() -> None:
    document = {"a": {"b": {"c": 1}}, "x.y": 2}
    assert remote.lookup_dotted(document, "a.b.c") == (True, 1)
    assert remote.lookup_dotted(document, "a.b.d") == (False, None)
    assert remote.lookup_dotted(document, "x.y") == (False, None)  # a key with a dot is not addressable
    assert remote.same_value(1, 1.0) and not remote.same_value(True, 1) and not remote.same_value("1", 1)
    assert not remote.same_value(False, 0) and remote.same_value("spot", "spot")


# --- definition -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    (setting("case", "company-credential-approval"), "case"),
    (setting("digest", "ee" * 32), "definition-digest"),
    (setting("digest", "not-a-digest"), "/digest"),
    (setting("extra", True), "/extra"),
])
def test_a_definition_that_does_not_match_is_refused(change: Callable[[dict[str, Any]], None], field: str) -> None:
    assert refused("import.definition", [Cell("exec-1")], entries=edit_json(DEFINITION_1, change)).field == field


# --- property-based: parsers of untrusted documents only refuse ------------------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=3),
                     max_leaves=12)


def _mutations(document: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """The document with one field replaced, removed or added: near-valid inputs reach deep rules."""
    def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [prefix] if prefix else []
        if isinstance(node, dict):
            for key, value in node.items():
                found += paths(value, (*prefix, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                found += paths(value, (*prefix, index))
        return found

    def mutate(path: tuple[Any, ...], value: Any, remove: bool) -> dict[str, Any]:
        out = copy.deepcopy(document)
        node: Any = out
        for key in path[:-1]:
            node = node[key]
        if remove and isinstance(node, dict):
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        return out

    return st.builds(mutate, st.sampled_from(paths(document)), _JSON, st.booleans())


def _only_refusals(action: Callable[[], Any], codes: set[str]) -> None:
    try:
        action()
    except Refusal as refusal:
        assert refusal.code in codes, str(refusal)


_CONTRACT = contract()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(_JSON, _mutations(intent_document([Cell("exec-1"), Cell("exec-2", ordinal=2)]))))
def test_intent_parser_only_refuses(document: Any) -> None:
    _only_refusals(lambda: remote.parse_intent(json.dumps(document).encode(), _CONTRACT), {"import.intent"})


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(_JSON, _mutations(host_document([Cell("exec-1")]))))
def test_host_parser_only_refuses(document: Any) -> None:
    def run() -> None:
        data = json.dumps(document).encode()
        archive = extract_zip(make_zip([(HOST, data)]), prefix=PREFIX)
        assert _CONTRACT.remote is not None
        intent = remote.parse_intent(dumps(intent_document([Cell("exec-1")])), _CONTRACT)
        remote.parse_host(archive.files.get(HOST), PREFIX, _CONTRACT.remote, RUN, intent)
    _only_refusals(run, {"import.host", "import.document", "import.rerun"})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(_JSON, _mutations(result_document(Cell("exec-1")))))
def test_result_validation_only_refuses(document: Any) -> None:
    edit = lambda entries: [(n, json.dumps(document).encode() if n == RESULT_1 else d)  # noqa: E731
                            for n, d in entries]
    _only_refusals(lambda: validate([Cell("exec-1")], entries=edit),
                   {"import.document", "import.not_selected", "import.rerun", "import.host", "import.definition",
                    "import.digest"})


def test_pinned_image_constant_matches_contract() -> None:
    the_contract = contract()
    assert the_contract.remote is not None and the_contract.remote.images["postgres"] == (POSTGRES,)


def test_the_shipped_example_imports_under_the_example_contract() -> None:
    """examples/import/ (intent and artifact tree) is valid under examples/contract.yml, as docs/import.md says."""
    from pathlib import Path

    from testops_evidence.campaign.ledger import Ledger
    from testops_evidence.contract import load_contract

    root = Path(__file__).resolve().parent.parent / "examples"
    example = load_contract(root / "contract.yml")
    assert example.remote is not None
    tree = root / "import" / "artifact"
    data = make_zip(sorted((p.relative_to(tree).as_posix(), p.read_bytes()) for p in tree.rglob("*") if p.is_file()))
    intent = remote.parse_intent((root / "import" / "intent.json").read_bytes(), example)
    remote.admit_run(example.remote, RUN)
    remote.bind_intent(intent, RUN)
    archive = extract_zip(data, prefix=example.remote.artifact_prefix)
    found = remote.find_cells(archive, example.remote.artifact_prefix)
    host = remote.parse_host(found.host, example.remote.artifact_prefix, example.remote, RUN, intent)
    (cell,) = [remote.validate_cell(contract=example, policy=example.remote, intent=intent, run=RUN,
                                    artifact=artifact_for(data), archive_sha256=sha256(data), host=host, files=files,
                                    archive=archive, prefix=example.remote.artifact_prefix,
                                    imported_at="2026-12-01T11:00:00Z") for files in found.cells]
    ledger = Ledger.new(example.campaign)
    assert ledger.add_import(cell.record, cell.attempt, cell.completion) == "imported"
    assert Ledger.parse(ledger.to_bytes()).imports[0]["import-key"] == f"{RUN_ID}/1/exec-0001"


def test_docs_import_md_names_every_import_and_ledger_code() -> None:
    from pathlib import Path

    from testops_evidence.errors import REGISTRY

    text = (Path(__file__).resolve().parent.parent / "docs" / "import.md").read_text()
    codes = [code for code in REGISTRY if code.startswith(("import.", "ledger."))]
    assert len(codes) >= 15
    assert [code for code in codes if f"`{code}`" not in text] == []
