"""Fuzz the import path's documents: the import intent, and the documents inside a remote-cell artifact
(host, result with its nested cell, definition) taken through the same chain as ``mode import`` — safe
extraction, host admission, cell validation, and the ledger change it would make. Only reportable
refusals may come out (fuzzing.py)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from import_builders import (
    HEAD_SHA,
    PREFIX,
    REPOSITORY,
    RUN_ID,
    WORKFLOW,
    Cell,
    artifact_entries,
    contract,
    intent_document,
    make_zip,
)
from reliability.fuzzing import Targets, document_bytes, fuzz_settings, json_bytes, mutated_bytes, mutated_json
from testops_evidence.campaign import remote
from testops_evidence.campaign.ledger import Ledger
from testops_evidence.readers.archive import extract_zip
from testops_evidence.safeio import sha256_bytes

CELLS = [Cell("exec-1"), Cell("exec-2", case="company-credential-approval", ordinal=1, disposition="behavior_failure")]
CONTRACT = contract()
SOURCE = remote.SourceRun(repository=REPOSITORY, run_id=RUN_ID, run_attempt=1, workflow=WORKFLOW, head_branch="main",
                          head_sha=HEAD_SHA, head_repository=REPOSITORY, event="workflow_dispatch")


@fuzz_settings()
@given(data=st.data())
def test_fuzz_import_intent(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("import-intent")
    raw = data.draw(document_bytes(intent_document(CELLS)))
    with target.example("import"):
        remote.bind_intent(remote.parse_intent(raw, CONTRACT), SOURCE)


def _json_entries() -> list[str]:
    return [name for name, _data in artifact_entries(CELLS) if isinstance(name, str) and name.endswith(".json")
            and name.startswith(PREFIX)]


@fuzz_settings()
@given(name=st.sampled_from(_json_entries()), data=st.data())
def test_fuzz_remote_cells(fuzz: Targets, name: str, data: st.DataObject) -> None:
    # One document of a valid artifact is damaged (structurally or byte-wise); the rest stay valid, so the
    # chain reaches the checks behind the one that should refuse.
    target = fuzz.target("remote-cells")
    entries = artifact_entries(CELLS)
    original = dict((n, d) for n, d in entries if isinstance(n, str))[name]
    damaged = data.draw(st.one_of(mutated_json(json.loads(original)).map(json_bytes), mutated_bytes(original)))
    zipped = make_zip([(n, damaged if n == name else d) for n, d in entries])
    policy = CONTRACT.remote
    assert policy is not None
    intent = remote.parse_intent(json_bytes(intent_document(CELLS)), CONTRACT)
    artifact = remote.SourceArtifact(artifact_id=501, name="cells-a", size=len(zipped),
                                     digest="sha256:" + sha256_bytes(zipped), run_id=RUN_ID, head_sha=HEAD_SHA)
    with target.example("import"):
        expected = remote.admit_artifact(policy, SOURCE, artifact)
        archive_sha256 = remote.check_archive_digest(artifact, expected, zipped)
        archive = extract_zip(zipped, prefix=PREFIX)
        found = remote.find_cells(archive, PREFIX)
        host = remote.parse_host(found.host, PREFIX, policy, SOURCE, intent)
        ledger = Ledger.new(CONTRACT.campaign)
        for files in found.cells:
            cell = remote.validate_cell(contract=CONTRACT, policy=policy, intent=intent, run=SOURCE,
                                        artifact=artifact, archive_sha256=archive_sha256, host=host, files=files,
                                        archive=archive, prefix=PREFIX, imported_at="2026-12-01T11:00:00Z")
            ledger.add_import(cell.record, cell.attempt, cell.completion)
        Ledger.parse(ledger.to_bytes())
