"""Builders for remote-import tests: a contract with a remote policy, an intent, and artifact zips holding
host, result and definition documents in the documented layout. Every document is valid by default;
tests change one field to prove one rule."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import stat
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.contract import Contract, contract_from_document

REPOSITORY = "acme/agents"
WORKFLOW = ".github/workflows/full-stack-e2e.yml"
REF = "refs/heads/main"
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"
RUN_ID = 4242
PREFIX = "results/"
POSTGRES = "sha256:" + "ab" * 32
DEFINITION_DIGEST = "de" * 32
PROFILE = {"id": "sonnet-default", "model": "claude-sonnet-5", "provider": "anthropic", "driver": "runner"}
CHECKS = {"get-task-context": ["tool-called", "answer-grounded", "cleanup"],
          "company-credential-approval": ["secret-saved", "approval-recorded"]}

CONTRACT_DOCUMENT: dict[str, Any] = {
    "version": 1,
    "campaign": "agent-protocol",
    "trust": {"repository": REPOSITORY, "events": ["workflow_dispatch"], "branches": ["main"],
              "workflows": [".github/workflows/agent-evals.yml"], "run-attempts": "first-only"},
    "profile": PROFILE,
    "lanes": {"native": {"max-parallel": 2}, "external": {"max-parallel": 1}},
    "cases": [
        {"key": "get-task-context", "full-name": "agents/protocol/get-task-context", "title": "Get task context",
         "lane": "native", "checks": {"tool-called": "behavior", "answer-grounded": "behavior",
                                      "cleanup": "infrastructure"}},
        {"key": "company-credential-approval", "full-name": "agents/protocol/company-credential-approval",
         "title": "Company credential setup", "lane": "external",
         "checks": {"secret-saved": "behavior", "approval-recorded": "behavior"}},
    ],
    "remote": {
        "workflows": [WORKFLOW],
        "refs": [REF],
        "run-attempts": "first-only",
        "artifact-prefix": PREFIX,
        "max-archive-bytes": 1024 * 1024,
        "host": {"lifecycle": "spot", "architecture": "x86_64", "region": "us-east-1",
                 "evaluation-admitted": False, "cpu.vendor": "intel"},
        "images": {"postgres": [POSTGRES]},
    },
}


def contract_document(**remote: Any) -> dict[str, Any]:
    document = copy.deepcopy(CONTRACT_DOCUMENT)
    document["remote"].update(remote)
    return document


def contract(**remote: Any) -> Contract:
    return contract_from_document(contract_document(**remote))


@dataclass
class Cell:
    execution_id: str
    case: str = "get-task-context"
    ordinal: int = 1
    disposition: str = "passed"
    attempt_id: str = ""
    result: dict[str, Any] = field(default_factory=dict)  # overrides of the result document
    cell: dict[str, Any] = field(default_factory=dict)  # overrides of the nested cell result
    definition: dict[str, Any] | None = field(default_factory=dict)  # None: no definition document
    transcript: bytes | None = b'{"turns": 4}\n'

    def accounting_id(self) -> str:
        return self.attempt_id or hashlib.sha256(self.execution_id.encode()).hexdigest()[:32]


def cell_result(cell: Cell) -> dict[str, Any]:
    checks = [{"id": check, "passed": cell.disposition == "passed"} for check in CHECKS[cell.case]]
    document: dict[str, Any] = {
        "schema": "testops-evidence/cell-result/v1",
        "case": cell.case,
        "attempt-id": cell.accounting_id(),
        "disposition": cell.disposition,
        "started-at": "2026-12-01T10:02:00Z",
        "finished-at": "2026-12-01T10:05:12Z",
        "source-sha": HEAD_SHA,
        "profile": dict(PROFILE),
        "checks": checks,
        "usage": {"agent-turns": 4, "input-tokens": 18234},
    }
    if cell.transcript is not None:
        document["artifacts"] = [{"path": "transcript.json", "sha256": hashlib.sha256(cell.transcript).hexdigest()}]
    document.update(cell.cell)
    return document


def result_document(cell: Cell, *, run_id: int = RUN_ID, run_attempt: int = 1) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema": "testops-evidence/remote-result/v1",
        "execution-id": cell.execution_id,
        "run-id": run_id,
        "run-attempt": run_attempt,
        "attempt": 1,
        "accounting": {"campaign": "agent-protocol-nightly", "attempt-id": cell.accounting_id()},
        "duration-ms": 190_000,
        "definition-digest": DEFINITION_DIGEST,
        "cell": cell_result(cell),
    }
    document.update(cell.result)
    return document


def definition_document(cell: Cell) -> dict[str, Any]:
    return {"schema": "testops-evidence/remote-definition/v1", "case": cell.case, "digest": DEFINITION_DIGEST,
            "grader-digest": "9a" * 32, **(cell.definition or {})}


def host_document(cells: Iterable[Cell], *, run_id: int = RUN_ID, run_attempt: int = 1,
                  **overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema": "testops-evidence/remote-host/v1",
        "qualified-at": "2026-12-01T09:58:00Z",
        "run-id": run_id,
        "run-attempt": run_attempt,
        "source-revision": HEAD_SHA,
        "execution-ids": [c.execution_id for c in cells],
        "automatic-retries": 0,
        "images": {"postgres": POSTGRES},
        "lifecycle": "spot",
        "architecture": "x86_64",
        "region": "us-east-1",
        "evaluation-admitted": False,
        "cpu": {"vendor": "intel", "cores": 8},
    }
    document.update(overrides)
    return document


def intent_document(cells: Iterable[Cell], **overrides: Any) -> dict[str, Any]:
    document = {
        "schema": "testops-evidence/import-intent/v1",
        "campaign": "agent-protocol",
        "source-revision": HEAD_SHA,
        "selected": [{"execution-id": c.execution_id, "case": c.case, "ordinal": c.ordinal} for c in cells],
    }
    document.update(overrides)
    return document


def dumps(document: Any) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


Entry = tuple[str | zipfile.ZipInfo, bytes]


def make_zip(entries: Iterable[Entry], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries:
            if isinstance(name, str):
                # A fixed timestamp: the same entries give the same bytes, so digests are reproducible.
                info = zipfile.ZipInfo(name, date_time=(2026, 12, 1, 10, 0, 0))
                info.compress_type = compression
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                name = info
            archive.writestr(name, data)
    return buffer.getvalue()


def symlink_entry(name: str, target: str) -> Entry:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def artifact_entries(cells: list[Cell], *, prefix: str = PREFIX, host: dict[str, Any] | None = None,
                     run_id: int = RUN_ID, run_attempt: int = 1) -> list[Entry]:
    entries: list[Entry] = [
        (prefix + "host.json", dumps(host if host is not None else
                                     host_document(cells, run_id=run_id, run_attempt=run_attempt))),
    ]
    for cell in cells:
        base = f"{prefix}{cell.execution_id}/"
        entries.append((base + "result.json", dumps(result_document(cell, run_id=run_id, run_attempt=run_attempt))))
        if cell.definition is not None:
            entries.append((base + "definition.json", dumps(definition_document(cell))))
        if cell.transcript is not None:
            entries.append((base + "transcript.json", cell.transcript))
    entries.append(("logs/harness.log", b"harness log outside the prefix\n"))
    return entries


def artifact_zip(cells: list[Cell], *, edit: Callable[[list[Entry]], list[Entry]] | None = None,
                 **kwargs: Any) -> bytes:
    entries = artifact_entries(cells, **kwargs)
    return make_zip(edit(entries) if edit else entries)


def replace_entry(name: str, data: bytes) -> Callable[[list[Entry]], list[Entry]]:
    def edit(entries: list[Entry]) -> list[Entry]:
        return [(n, data if n == name else d) for n, d in entries]
    return edit


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mapping_without(document: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}
