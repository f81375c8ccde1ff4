"""Shared builders for the selection, matrix and select tests (no tests here).

Contracts are built in memory (``contract_from_document``) and written to the test's directory when a
phase needs a file; the Actions environment is the runner's ``GITHUB_*`` variables for one fixed run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from servers.github_server import GitHubServer
from testops_evidence.contract import Contract, contract_from_document, load_contract

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_CONTRACT = EXAMPLES / "contract.yml"
EXAMPLE_PLAN = EXAMPLES / "testplan.json"

REPOSITORY = "acme/agents"
WORKFLOW = ".github/workflows/agent-evals.yml"
RUN_ID = 9_100_200_300
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"
SERVER = "https://github.com"
RUN_URL = f"{SERVER}/{REPOSITORY}/actions/runs/{RUN_ID}"
WORKFLOW_URL = f"{SERVER}/{REPOSITORY}/actions/workflows/agent-evals.yml"


def actions_env(**overrides: str) -> dict[str, str]:
    """The variables the runner sets for one run of the example workflow."""
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_WORKFLOW_REF": f"{REPOSITORY}/{WORKFLOW}@refs/heads/main",
        "GITHUB_SHA": HEAD_SHA,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_RUN_ID": str(RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_RUN_NUMBER": "42",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_ACTOR_ID": "1234567",
        "GITHUB_SERVER_URL": SERVER,
        "GITHUB_API_URL": "https://api.github.com",
    }
    env.update(overrides)
    return env


def example_document() -> dict[str, Any]:
    return copy.deepcopy(dict(load_contract(EXAMPLE_CONTRACT).document))


def big_document(n: int, *, external_every: int = 4, testops: bool = False) -> dict[str, Any]:
    """A contract with ``n`` generated cases (every ``external_every``-th in the external lane, counting
    from 1, so a huge ``external_every`` means none)."""
    cases = []
    for i in range(n):
        case: dict[str, Any] = {
            "key": f"case-{i:05d}",
            "full-name": f"evals/area-{i % 97:02d}/case-{i:05d}",
            "title": f"Generated case {i}",
            "lane": "external" if (i + 1) % external_every == 0 else "native",
            "timeout-minutes": 5 + i % 20,
            "credentials": ["ANTHROPIC_API_KEY"] if i % 2 else ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
            "checks": {"answer": "behavior", "cleanup": "infrastructure"},
        }
        if testops:
            case["testops-id"] = 100_000 + i
        cases.append(case)
    document: dict[str, Any] = {
        "version": 1,
        "campaign": "scale",
        "trust": {"repository": REPOSITORY, "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [WORKFLOW]},
        "profile": {"id": "scale-profile", "model": "m"},
        "lanes": {"native": {"max-parallel": 64}, "external": {"max-parallel": 2}},
        "cases": cases,
    }
    return document


def write_contract(directory: Path, document: dict[str, Any], name: str = "contract.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def contract_of(document: dict[str, Any]) -> Contract:
    return contract_from_document(document)


def without_testops(document: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(document)
    out.pop("testops", None)
    return out


def plan_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps({"version": "1.0", "tests": rows})


@contextmanager
def github_with_run() -> Iterator[GitHubServer]:
    """The GitHub REST test server holding the example workflow's run (RUN_ID at HEAD_SHA)."""
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_run(REPOSITORY, RUN_ID, head_sha=HEAD_SHA, run_number=42, path=WORKFLOW, actor_id=1234567)
        yield server


def select_job_env(server: GitHubServer, workspace: Path) -> dict[str, str]:
    """The select job's environment: the runner's variables for the run, its event file, a GitHub token."""
    event = workspace / "event.json"
    event.write_text(json.dumps(server.event_payload(RUN_ID)), encoding="utf-8")
    variables = server.runner_env(RUN_ID, event_path=str(event))
    variables.update(GITHUB_TOKEN=server.token, GITHUB_WORKSPACE=str(workspace))
    return variables
