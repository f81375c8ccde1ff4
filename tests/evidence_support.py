"""Shared fixtures for the evidence tests (cells, adapters, export, upload, verify, rehearse)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from testops_evidence.campaign.selection import TestOpsBinding, build_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import Contract, contract_from_document, load_contract
from testops_evidence.safeio import sha256_bytes

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_CONTRACT = REPO / "examples" / "contract.yml"
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "fedcba9876543210fedcba9876543210fedcba98"
RUN_ID = 9_100_200_300
SENTINEL = "SENTINEL-TOKEN-7f3a9c1e-do-not-leak"
GOLDEN = Path(__file__).resolve().parent / "golden"


def actions_env(**overrides: str) -> dict[str, str]:
    """The runner variables of one worker job of the example campaign's run."""
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/agents",
        "GITHUB_WORKFLOW_REF": "acme/agents/.github/workflows/agent-evals.yml@refs/heads/main",
        "GITHUB_SHA": HEAD_SHA,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_RUN_ID": str(RUN_ID),
        "GITHUB_RUN_NUMBER": "42",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_WORKFLOW": "Agent evals",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_ACTOR_ID": "1234567",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": "https://api.github.com",
    }
    env.update(overrides)
    return env


def example_contract() -> Contract:
    return load_contract(EXAMPLE_CONTRACT)


def small_contract(*, run_attempts: str = "first-only", testops: bool = False, cases: int = 3,
                   profile: Mapping[str, str] | None = None) -> Contract:
    """A three-case contract (native and external) for focused tests."""
    document: dict[str, Any] = {
        "version": 1,
        "campaign": "agent-protocol",
        "trust": {"repository": "acme/agents", "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/agent-evals.yml"], "run-attempts": run_attempts},
        "profile": dict(profile or {"id": "sonnet-default", "model": "claude-sonnet-5", "provider": "anthropic"}),
        "lanes": {"native": {"max-parallel": 2}, "external": {"max-parallel": 1}},
        "cases": [
            {"key": "get-task-context", "testops-id": 194, "full-name": "agents/protocol/get-task-context",
             "title": "Get task context", "lane": "native",
             "checks": {"tool-called": "behavior", "answer-grounded": "behavior", "cleanup": "infrastructure"}},
            {"key": "budget-stop", "testops-id": 201, "full-name": "agents/protocol/budget-stop",
             "title": "Stop when the budget is exhausted", "lane": "native",
             "checks": {"stopped-at-budget": "behavior", "spend-reported": "behavior"}},
            {"key": "company-credential-approval", "testops-id": 195,
             "full-name": "agents/protocol/company-credential-approval",
             "title": "Company credential setup with human approval", "lane": "external",
             "checks": {"secret-saved": "behavior", "approval-recorded": "behavior"}},
        ],
    }
    for index in range(3, cases):
        document["cases"].append({
            "key": f"case-{index:05d}", "testops-id": 1000 + index, "full-name": f"agents/bulk/case-{index:05d}",
            "title": f"Bulk case {index}", "lane": "native", "checks": {"ok": "behavior"}})
    if testops:
        document["testops"] = {"endpoint": "http://127.0.0.1:1", "project-id": 12,
                               "plan": {"id": 340, "name": "Agent protocol evals"}}
    return contract_from_document(document, "<small contract>")


def write_contract(contract: Contract, path: Path) -> Path:
    path.write_text(json.dumps(contract.document, indent=2))
    return path


def make_selection(tmp: Path, contract: Contract, env: Mapping[str, str], *, keys: Iterable[str] | None = None,
                   testops: TestOpsBinding | None = None, name: str = "selection.json") -> tuple[Path, str]:
    """Write a selection as select would (files backend unless a TestOps binding is given)."""
    wanted = list(keys) if keys is not None else [c.key for c in contract.cases]
    document = build_selection(contract, env_context(env), [contract.case(k) for k in wanted],
                               backend="testops" if testops else "files", source="contract" if testops is None
                               else "job-run", testops=testops)
    data = selection_bytes(document)
    path = write_selection(tmp / name, data)
    return path, sha256_bytes(data)


def cell(contract: Contract, key: str, *, disposition: str = "passed", failed: Iterable[str] = (),
         attempt: str | None = None, sha: str = HEAD_SHA, started: str = "2026-12-01T10:02:00Z",
         finished: str = "2026-12-01T10:05:12Z", selection_sha256: str | None = None,
         **extra: Any) -> dict[str, Any]:
    """A cell-result/v2 document for ``key``; ``failed`` names the checks that did not pass.

    Without ``selection_sha256`` the digest is left ``None`` for :func:`write_cells` to fill in (the tests
    usually make the selection after the cells)."""
    failing = set(failed)
    document = {
        "schema": "testops-evidence/cell-result/v2",
        "selection-sha256": selection_sha256,
        "case": key,
        "attempt-id": attempt or f"attempt-{key}",
        "disposition": disposition,
        "started-at": started,
        "finished-at": finished,
        "source-sha": sha,
        "profile": dict(contract.profile),
        "checks": [{"id": c, "passed": c not in failing} for c in contract.case(key).checks],
        "usage": {"agent-turns": 4, "input-tokens": 18234, "output-tokens": 2210, "secret-counter": 7},
    }
    document.update(extra)
    return document


def bound_to(document: Mapping[str, Any], selection_sha256: str | None) -> dict[str, Any]:
    """``document`` with its unset ``selection-sha256`` filled in (a key set to None and no digest: dropped)."""
    out = dict(document)
    if out.get("selection-sha256", "") is None:
        if selection_sha256 is None:
            del out["selection-sha256"]
        else:
            out["selection-sha256"] = selection_sha256
    return out


def write_cells(directory: Path, documents: Iterable[Mapping[str, Any]], selection_sha256: str | None = None) -> Path:
    """Write cell documents (merged layout), filling in the selection digest where :func:`cell` left it unset."""
    directory.mkdir(parents=True, exist_ok=True)
    for document in documents:
        (directory / f"{document['case']}-{document['attempt-id']}.json").write_text(
            json.dumps(bound_to(document, selection_sha256)))
    return directory


def write_worker_record(directory: Path, job: str, selection_sha256: str) -> Path:
    """The record a campaign template worker writes last into its artifact: its job, selection, cases and
    every other file with its SHA-256 (export holds the artifact to exactly those)."""
    import hashlib

    listed = {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
              for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "testops-evidence-worker.json"}
    cases = sorted({name.split("/")[0].removesuffix(".json") for name in listed})
    record = directory / "testops-evidence-worker.json"
    record.write_text(json.dumps({"schema": "testops-evidence/worker-record/v1", "job": job,
                                  "selection-sha256": selection_sha256, "cases": cases, "files": listed}))
    return record


def uuid_factory(prefix: str = "00000000-0000-4000-8000") -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{prefix}-{next(counter):012d}"


def run_pytest(directory: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a real pytest (this interpreter, allure-pytest installed) in ``directory``."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=directory, capture_output=True, text=True, env=full_env, check=False,
    )


class TestOpsCampaign:
    """A seeded TestOps test server plus an exported campaign bound to its job run and launch.

    ``export()`` runs the real export (no token in its env); ``run(mode)`` runs upload / verify /
    reconcile with the sentinel token, the server endpoint and a fake clock (sleeps advance it).
    """

    __test__ = False

    def __init__(self, server: Any, tmp: Path, contract: Contract) -> None:
        from helpers import FakeClock

        self.server = server
        self.tmp = tmp
        self.contract = contract
        self.clock = FakeClock()
        self.env = actions_env()
        # The job as TestOps created it on the workflow's first upload (by Allure 3: <repository>_<workflow name>).
        self.job_uid = f"acme/agents_{self.env['GITHUB_WORKFLOW']}"
        seeded = server.seed_contract(contract, job_url="https://github.com/acme/agents/actions/workflows/"
                                      "agent-evals.yml", job_external_id=self.job_uid)
        self.launch = server.add_launch(contract.testops.project_id, "Agent protocol evals #42")
        run_url = f"https://github.com/acme/agents/actions/runs/{RUN_ID}"
        self.jobrun = server.add_jobrun(seeded["job-id"], launch_id=self.launch["id"], url=run_url,
                                        case_ids=seeded["case-ids"])
        self.binding = TestOpsBinding(endpoint=server.url, project_id=contract.testops.project_id,
                                      plan_id=contract.testops.plan_id, plan_name=contract.testops.plan_name,
                                      job_run_id=self.jobrun["id"], job_id=seeded["job-id"],
                                      launch_id=self.launch["id"], job_uid=self.job_uid, job_run_uid=str(RUN_ID))
        self.selection, self.digest = make_selection(tmp, contract, self.env, testops=self.binding)
        self.options = {"contract": str(write_contract(contract, tmp / "contract.json")),
                        "results-dir": str(tmp / "allure-results"), "state-dir": str(tmp / "state"),
                        "testops-endpoint": server.url}

    def export(self, cells: Iterable[Mapping[str, Any]]) -> Any:
        from helpers import run_mode

        write_cells(self.tmp / "cells", cells, self.digest)
        options = {**self.options, "selection-path": str(self.selection), "selection-sha256": self.digest,
                   "cell-results": str(self.tmp / "cells")}
        options.pop("testops-endpoint")
        run = run_mode("export", self.tmp, options, self.env, new_uuid=uuid_factory())
        # What the publish job receives as job outputs: upload and verify re-hash both documents against them.
        self.options.update({"selection-path": str(self.selection), "selection-sha256": self.digest,
                             "receipt-sha256": run.outputs.get("receipt-sha256", "")})
        return run

    def run(self, mode: str, **options: str) -> Any:
        from helpers import run_mode

        return run_mode(mode, self.tmp, {**self.options, **options}, {**self.env, "ALLURE_TOKEN": SENTINEL},
                        clock=self.clock.time, monotonic=self.clock.monotonic, sleep=self.clock.sleep)

    def leaks(self) -> list[str]:
        """Every file under the temp dir (state, receipts, results) that contains the sentinel token or a
        piece of it (helpers.holds_secret)."""
        from helpers import holds_secret

        found = []
        for path in self.tmp.rglob("*"):
            if path.is_file() and holds_secret(path.read_bytes(), SENTINEL):
                found.append(str(path))
        return found


def normalise(text: str, tmp_path: Path) -> str:
    return text.replace(str(tmp_path), "<tmp>")


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once and review it"
    assert actual == path.read_text(), f"{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it)"
