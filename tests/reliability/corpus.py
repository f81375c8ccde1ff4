"""Valid seed inputs for the fuzzers, produced by the real code where one exists (a selection written as
select writes it, a receipt written by a real export, a ledger by real transactions), so that mutations
start from what the parsers really see."""

from __future__ import annotations

import functools
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence_support import (
    EXAMPLE_CONTRACT,
    RUN_ID,
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, run_mode
from testops_evidence.campaign.ledger import Ledger
from testops_evidence.contract import Contract, load_contract
from testops_evidence.readers.testplan import plan_document

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
JOBRUN_ENV = b"""ALLURE_ENDPOINT=https://acme.testops.cloud
ALLURE_LAUNCH_ID=4411
ALLURE_RESULTS=allure-results
ALLURE_JOB_RUN_ID=9001
ALLURE_TOKEN=tok-not-a-real-token
ALLURE_TESTPLAN_PATH=./testplan.json
ALLURE_LAUNCH_NAME=Agent protocol evals #17
ALLURE_JOB_RUN_URL=https://acme.testops.cloud/jobrun/9001
ALLURE_LAUNCH_URL=https://acme.testops.cloud/launch/4411
ALLURE_PROJECT_ID=12
"""


@functools.cache
def example_contract() -> Contract:
    return load_contract(EXAMPLE_CONTRACT)


@functools.cache
def contract() -> Contract:
    """The three-case contract the evidence seeds (cells, selection, receipt) are bound to."""
    return small_contract()


def env() -> dict[str, str]:
    return actions_env()


def event_payload() -> dict[str, Any]:
    """A workflow_dispatch payload consistent with :func:`env` and :func:`run_document`."""
    return {
        "inputs": {"cases": "", "job-run-id": ""},
        "ref": "refs/heads/main",
        "repository": {"id": 555, "name": "agents", "full_name": "acme/agents", "private": False,
                       "owner": {"login": "acme", "id": 42}},
        "sender": {"login": "octo", "id": 1234567, "type": "User"},
        "workflow": ".github/workflows/agent-evals.yml",
    }


def run_document() -> dict[str, Any]:
    """``GET /repos/acme/agents/actions/runs/{id}`` for :func:`env`'s run, in GitHub's shape."""
    head = env()["GITHUB_SHA"]
    repo = {"id": 555, "name": "agents", "full_name": "acme/agents", "private": False,
            "owner": {"login": "acme", "id": 42}, "url": "https://api.github.com/repos/acme/agents"}
    return {
        "id": RUN_ID, "name": "agent-evals", "run_number": 42, "run_attempt": 1, "event": "workflow_dispatch",
        "status": "in_progress", "conclusion": None, "path": ".github/workflows/agent-evals.yml",
        "head_branch": "main", "head_sha": head, "workflow_id": 777,
        "actor": {"login": "octo", "id": 1234567}, "triggering_actor": {"login": "octo", "id": 1234567},
        "repository": repo, "head_repository": dict(repo),
        "html_url": f"https://github.com/acme/agents/actions/runs/{RUN_ID}",
        "created_at": "2026-01-15T10:00:00Z", "run_started_at": "2026-01-15T10:00:05Z",
        "referenced_workflows": [{"path": "acme/shared/.github/workflows/evals.yml@main", "sha": "a" * 40,
                                  "ref": "refs/heads/main"}],
    }


def artifact_document() -> dict[str, Any]:
    return {
        "id": 31, "node_id": "MDg6QXJ0aWZhY3QzMQ==", "name": "cells-nightly", "size_in_bytes": 4096,
        "url": "https://api.github.com/repos/acme/agents/actions/artifacts/31",
        "archive_download_url": "https://api.github.com/repos/acme/agents/actions/artifacts/31/zip",
        "expired": False, "digest": "sha256:" + "ab" * 32, "created_at": "2026-01-15T10:00:00Z",
        "workflow_run": {"id": RUN_ID, "repository_id": 555, "head_repository_id": 555, "head_branch": "main",
                         "head_sha": env()["GITHUB_SHA"]},
    }


def page_document(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": items, "totalElements": len(items), "totalPages": 1, "number": 0, "size": 100,
            "last": True, "first": True, "numberOfElements": len(items), "empty": not items}


def jobrun_plan() -> list[dict[str, Any]]:
    return [{"id": int(row["id"]), "selector": row["selector"]}
            for row in plan_document(example_contract().cases)["tests"]]


# The digest a fuzzed cell claims and export is bound to (a valid seed carries it).
SELECTION_SHA256 = "5e1ec7" + "0" * 58


def cell_document(key: str = "get-task-context") -> dict[str, Any]:
    return cell(contract(), key, selection_sha256=SELECTION_SHA256)


def read_example(relpath: str) -> bytes:
    return (EXAMPLES / relpath).read_bytes()


def junit_report() -> bytes:
    return read_example("cell-results/company-credential-approval/junit.xml")


def allure_results() -> list[tuple[str, bytes]]:
    root = EXAMPLES / "cell-results" / "hire-agent-approval" / "allure-results"
    return [(f"allure-results/{p.name}", p.read_bytes()) for p in sorted(root.glob("*-result.json"))]


def zip_bytes(entries: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def artifact_zip() -> bytes:
    """A remote-cell artifact as import reads it: documents under a prefix, plus a transcript."""
    return zip_bytes([
        ("results/exec-1/result.json", json.dumps(cell_document()).encode()),
        ("results/exec-1/host.json", b'{"os": "linux", "arch": "x64"}'),
        ("results/exec-1/definition.json", b'{"case": "get-task-context"}'),
        ("logs/transcript.txt", b"agent: hello\n" * 40),
    ])


@dataclass(frozen=True)
class Exported:
    """A selection and a receipt written by the real select/export code for :func:`contract`."""

    selection: bytes
    selection_sha256: str
    receipt: bytes


@functools.cache
def exported() -> Exported:
    with tempfile.TemporaryDirectory(prefix="fuzz-corpus-") as tmp:
        root = Path(tmp)
        the_contract = contract()
        selection, digest = make_selection(root, the_contract, env())
        write_cells(root / "cells", [cell(the_contract, "get-task-context"),
                                     cell(the_contract, "budget-stop", disposition="behavior_failure",
                                          failed=["spend-reported"])], digest)
        options = {"contract": str(write_contract(the_contract, root / "contract.json")),
                   "selection-path": str(selection), "selection-sha256": digest,
                   "cell-results": str(root / "cells"), "results-dir": str(root / "out" / "allure-results")}
        clock = FakeClock(1_796_119_500.0)
        run = run_mode("export", root, options, env(), new_uuid=uuid_factory(), clock=clock.time,
                       monotonic=clock.monotonic, sleep=clock.sleep)
        assert run.exit_code == 1, run.summary  # one case failed: complete evidence, not all passed
        return Exported(selection.read_bytes(), digest, (root / "out" / "allure-results-receipt.json").read_bytes())


def ledger_record(n: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    from test_ledger_crash import step

    return step(n)


@functools.cache
def ledger_bytes() -> bytes:
    ledger = Ledger.new("agent-protocol")
    for n in (1, 2, 3):
        ledger.add_import(*ledger_record(n))
    return ledger.to_bytes()


FRAMEWORKS = Path(__file__).resolve().parents[1] / "data" / "frameworks"


def inspect_log(name: str = "campaign.eval") -> bytes:
    """The newest committed Inspect AI log written by the real inspect-ai (tests/data/frameworks)."""
    return (sorted(FRAMEWORKS.glob("inspect-ai-*"))[-1] / name).read_bytes()


def promptfoo_results() -> bytes:
    return (sorted(FRAMEWORKS.glob("promptfoo-*"))[-1] / "results.json").read_bytes()
