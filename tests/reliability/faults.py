"""The fault-matrix worlds: each phase that talks to a test server, set up to reach its key request, run
in-process as the runner runs it (tests/helpers.run_mode) with a sentinel token.

A world returns an :class:`Outcome`: the phase run, the server's log of mutations (method, path, body),
and the directories whose files must be whole afterwards. test_fault_matrix.py injects one fault per
case (fault_cases.py) and checks the outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence_support import TestOpsCampaign, cell, small_contract
from helpers import FakeClock, PhaseRun, run_mode
from import_builders import CONTRACT_DOCUMENT as IMPORT_CONTRACT
from import_builders import HEAD_SHA as IMPORT_SHA
from import_builders import REPOSITORY as IMPORT_REPOSITORY
from import_builders import RUN_ID as IMPORT_RUN_ID
from import_builders import WORKFLOW as IMPORT_WORKFLOW
from import_builders import Cell, artifact_zip, dumps, intent_document
from reliability.fault_cases import FAULTS, FaultCase
from servers.drip import Drip
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_selection_support import REPOSITORY, example_document, github_with_run, select_job_env
from test_selection_support import RUN_ID as SELECT_RUN_ID
from test_selection_support import write_contract as write_document
from test_testops_phases import PLAN_NAME, PROJECT
from test_testops_phases import contract_document as testops_contract
from testops_evidence.contract import contract_from_document

SENTINEL = "tok-SENTINEL-fault-matrix-3e9a"

# Transport tuning for the matrix: a short read timeout (the server's delay fault waits longer), one retry
# of an idempotent read, and a 64 KiB response cap (the oversize fault sends 256 KiB). These are the
# documented operator variables; the behaviour they tune is the same at the defaults. The timeouts leave
# a loaded CI machine ample time for every answer that is not delayed on purpose.
TESTOPS_TUNING = {"TESTOPS_EVIDENCE_CONNECT_TIMEOUT": "1", "TESTOPS_EVIDENCE_READ_TIMEOUT": "1",
                  "TESTOPS_EVIDENCE_MAX_RETRIES": "1", "TESTOPS_EVIDENCE_MAX_RESPONSE_BYTES": "65536"}
GITHUB_TUNING = {"TESTOPS_EVIDENCE_GITHUB_TIMEOUT": "2", "TESTOPS_EVIDENCE_GITHUB_RETRIES": "1"}
DELAY = 5.0  # seconds a delayed answer waits: well past both timeouts above
# A dripped answer sends a byte per half read timeout: no read times out, only the answer deadline
# (connect + read timeout: TestOps 2 s, GitHub 4 s) ends it.
TESTOPS_DRIP = 0.5
GITHUB_DRIP = 1.0
OVERSIZE = 256 * 1024


@dataclass
class Outcome:
    run: PhaseRun
    mutations: list[tuple[str, str, str]]  # (method, path, canonical body) of every mutating request
    roots: list[Path] = field(default_factory=list)  # directories whose files must be whole
    requests: int = 0


def _body(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


# --- TestOps worlds ------------------------------------------------------------------------------------------


class TestOpsWorld:
    """A TestOps test server and a workspace; ``phase`` runs a mode with the token and the tuning."""

    __test__ = False

    def __init__(self, tmp: Path, server: TestOpsServer, clock: FakeClock, extra_env: dict[str, str] | None = None
                 ) -> None:
        self.tmp = tmp
        self.server = server
        self.clock = clock
        self.extra_env = dict(extra_env or {})  # e.g. the token in every variable a workflow could use
        self.auth = "api-token"
        self.runner_env: dict[str, str] = {}  # the job of an admitted run, for the phases that re-admit it

    def seed_cases(self, *, drift: bool = False, plan: bool = False) -> None:
        self.server.add_project(PROJECT)
        self.server.add_case(PROJECT, "Get task context", "agents/protocol/get-task-context", id=194)
        title = "Old title" if drift else "Company credential setup with human approval"
        self.server.add_case(PROJECT, title, "agents/protocol/company-credential-approval", id=195)
        if plan:
            self.server.add_plan(PROJECT, PLAN_NAME, [194, 195], id=340)

    def contract(self, *, plan_id: int | None) -> Path:
        path = self.tmp / "contract.json"
        path.write_text(json.dumps(testops_contract(self.server.url, plan_id=plan_id, auth=self.auth)))
        return path

    def phase(self, mode: str, options: dict[str, Any], env: dict[str, str] | None = None) -> PhaseRun:
        full_env = {"ALLURE_TOKEN": SENTINEL, "GITHUB_RUN_NUMBER": "17", **self.runner_env, **TESTOPS_TUNING,
                    **(env or {}), **self.extra_env}
        return run_mode(mode, self.tmp, {"state-dir": str(self.tmp / "state"), **options}, full_env,
                        clock=self.clock.time, monotonic=self.clock.monotonic, sleep=self.clock.sleep)


def _testops_outcome(world: TestOpsWorld, run: PhaseRun, roots: list[Path]) -> Outcome:
    mutations = [(e.method, e.path, _body(e.body)) for e in world.server.mutations()]
    return Outcome(run, mutations, roots, len(world.server.log))


def bootstrap_world(world: TestOpsWorld) -> Callable[[], Outcome]:
    # One case title drifted and no plan yet: bootstrap PATCHes the case, then POSTs the plan.
    world.seed_cases(drift=True)
    contract = world.contract(plan_id=None)
    return lambda: _testops_outcome(world, world.phase("bootstrap", {"contract": str(contract)}),
                                    [world.tmp / "state"])


def launch_world(world: TestOpsWorld) -> Callable[[], Outcome]:
    # No plan id in the contract: launch finds the plan by name in the plan listing, then runs it.
    world.seed_cases(plan=True)
    contract = world.contract(plan_id=None)
    return lambda: _testops_outcome(world, world.phase("launch", {"contract": str(contract)}), [world.tmp / "state"])


def reconcile_world(world: TestOpsWorld, *, committed: bool = False) -> Callable[[], Outcome]:
    # A launch answered 503 before TestOps processed it: the once-marker is pending and the launch absent.
    # reconcile (resume) observes that, once-marks a re-send and sends it exactly once. With ``committed``
    # the launch was made and its answer lost: reconcile finds it by name and sends nothing.
    world.seed_cases(plan=True)
    contract = world.contract(plan_id=340)
    if committed:
        world.server.fail("POST", r"/testplan/340/run", "drop", times=1)
    else:
        world.server.fail("POST", r"/testplan/340/run", "status", status=503, times=1, commit=False)
    first = world.phase("launch", {"contract": str(contract)})
    assert first.outputs.get("error-code") == ("testops.uncertain" if committed else "testops.http_503"), first.summary
    world.server.clear_faults()
    world.server.reset_log()
    return lambda: _testops_outcome(world, world.phase("reconcile", {"contract": str(contract), "resume": "true"}),
                                    [world.tmp / "state"])


def _campaign(world: TestOpsWorld) -> TestOpsCampaign:
    contract = small_contract(testops=True)
    campaign = TestOpsCampaign(world.server, world.tmp, contract)
    exported = campaign.export([cell(contract, "get-task-context"),
                                cell(contract, "budget-stop", disposition="behavior_failure",
                                     failed=["spend-reported"]),
                                cell(contract, "company-credential-approval")])
    assert exported.exit_code == 1, exported.summary
    return campaign


def upload_world(world: TestOpsWorld) -> Callable[[], Outcome]:
    campaign = _campaign(world)
    world.server.reset_log()
    return lambda: _testops_outcome(world, world.phase("upload", campaign.options, campaign.env),
                                    [world.tmp / "state", world.tmp / "allure-results"])


def verify_world(world: TestOpsWorld) -> Callable[[], Outcome]:
    campaign = _campaign(world)
    uploaded = world.phase("upload", campaign.options, campaign.env)
    assert uploaded.exit_code == 0, uploaded.summary
    world.server.reset_log()
    return lambda: _testops_outcome(world, world.phase("verify", {**campaign.options, "deadline-seconds": "60"},
                                                       campaign.env), [world.tmp / "state"])


def select_world(world: TestOpsWorld) -> Callable[[], Outcome]:
    # A TestOps-launched run: select reads the GitHub run (REST) and binds job run, job, launch and plan.
    github = world.github  # type: ignore[attr-defined]
    document = example_document()
    contract = contract_from_document(document)
    job_env = select_job_env(github, world.tmp)
    seeded = world.server.seed_contract(contract, job_url=f"{github.url}/{REPOSITORY}/actions/workflows/agent-evals.yml",
                                        job_external_id=f"{REPOSITORY}_{job_env['GITHUB_WORKFLOW']}")
    launch = world.server.add_launch(PROJECT, "agent-protocol #42")
    run = world.server.add_jobrun(seeded["job-id"], launch_id=launch["id"], stage="scheduled",
                                  url=f"{github.url}/{REPOSITORY}/actions/runs/{SELECT_RUN_ID}",
                                  case_ids=seeded["case-ids"])
    contract_path = write_document(world.tmp, document)
    env = {**job_env, "ALLURE_JOB_RUN_ID": str(run["id"])}
    options = {"contract": str(contract_path), "testops-endpoint": world.server.url,
               "selection-path": str(world.tmp / "out" / "selection.json"), "job-run-id": str(run["id"])}
    return lambda: _testops_outcome(world, world.phase("select", options, env), [world.tmp / "state",
                                                                                  world.tmp / "out"])


READMITTING = ("bootstrap", "launch", "reconcile")
TESTOPS_WORLDS: dict[str, Callable[[TestOpsWorld], Callable[[], Outcome]]] = {
    "bootstrap": bootstrap_world, "launch": launch_world, "select": select_world, "upload": upload_world,
    "verify": verify_world, "reconcile": reconcile_world,
}


# --- GitHub worlds -------------------------------------------------------------------------------------------


class GitHubWorld:
    __test__ = False

    def __init__(self, tmp: Path, server: GitHubServer, clock: FakeClock, extra_env: dict[str, str] | None = None
                 ) -> None:
        self.tmp = tmp
        self.server = server
        self.clock = clock
        self.extra_env = dict(extra_env or {})

    def phase(self, mode: str, options: dict[str, Any], env: dict[str, str]) -> PhaseRun:
        return run_mode(mode, self.tmp, {"state-dir": str(self.tmp / "state"), **options},
                        {**env, **GITHUB_TUNING, **self.extra_env}, clock=self.clock.time,
                        monotonic=self.clock.monotonic, sleep=self.clock.sleep)


def _github_outcome(world: GitHubWorld, run: PhaseRun, roots: list[Path]) -> Outcome:
    # The GitHub phases only read: any non-GET request would be a mutation.
    mutations = [(r.method, r.path, "") for r in world.server.log if r.method != "GET"]
    return Outcome(run, mutations, roots, len(world.server.log))


def guard_world(world: GitHubWorld) -> Callable[[], Outcome]:
    server = world.server
    server.add_repo("acme/agents", repo_id=99001)
    run = server.add_run("acme/agents", 4242, head_sha="3f786850e387550fdab836ed7e6dc881de23001b")
    event = world.tmp / "event.json"
    event.write_text(json.dumps(server.event_payload(run["id"])))
    contract = world.tmp / "contract.json"
    document = testops_contract("https://testops.invalid", plan_id=340)
    document.pop("testops")
    contract.write_text(json.dumps(document))
    env = {**server.runner_env(run["id"], event_path=str(event)), "INPUT_GITHUB-TOKEN": SENTINEL}
    return lambda: _github_outcome(world, world.phase("guard", {"contract": str(contract)}, env),
                                   [world.tmp / "state"])


IMPORT_CELLS = [Cell("exec-1"), Cell("exec-2", case="company-credential-approval", ordinal=1,
                                     disposition="behavior_failure")]


def import_world(world: GitHubWorld) -> Callable[[], Outcome]:
    server = world.server
    server.add_run(IMPORT_REPOSITORY, IMPORT_RUN_ID, path=IMPORT_WORKFLOW, head_sha=IMPORT_SHA, head_branch="main")
    server.add_artifact(IMPORT_RUN_ID, "cells-a", artifact_zip(IMPORT_CELLS), artifact_id=501)
    contract = world.tmp / "contract.json"
    contract.write_bytes(dumps(IMPORT_CONTRACT))
    intent = world.tmp / "intent.json"
    intent.write_bytes(dumps(intent_document(IMPORT_CELLS)))
    ledger = world.tmp / "ledger" / "campaign-ledger.json"
    ledger.parent.mkdir()
    options = {"contract": str(contract), "source-run-id": str(IMPORT_RUN_ID), "artifact-name": "cells-*",
               "intent": str(intent), "ledger": str(ledger)}
    # The importing run, as the contract's trust policy admits it: import re-admits it over REST first.
    importing = server.add_run(IMPORT_REPOSITORY, IMPORTING_RUN_ID, path=".github/workflows/agent-evals.yml",
                               head_sha=IMPORT_SHA, head_branch="main")
    event = world.tmp / "event.json"
    event.write_text(json.dumps(server.event_payload(importing["id"])))
    env = {**server.runner_env(importing["id"], event_path=str(event)), "INPUT_GITHUB-TOKEN": SENTINEL}
    return lambda: _github_outcome(world, world.phase("import", options, env), [world.tmp / "state",
                                                                                 ledger.parent])


IMPORTING_RUN_ID = 9_100_200_301

GITHUB_WORLDS: dict[str, Callable[[GitHubWorld], Callable[[], Outcome]]] = {
    "guard": guard_world, "import": import_world,
}


# --- running one case ----------------------------------------------------------------------------------------


def inject_testops(server: TestOpsServer, case: FaultCase) -> None:
    spec = FAULTS[case.fault]
    method, route = case.target.split(" ", 1)
    options: dict[str, Any] = {"times": None}
    if spec.kind == "status":
        options.update(status=spec.status, retry_after=spec.retry_after)
    elif spec.kind == "delay":
        options.update(delay=DELAY)
    elif spec.kind == "oversize":
        options.update(size=OVERSIZE)
    elif spec.kind == "drip":
        options.update(drip=Drip(TESTOPS_DRIP))
    server.fail(method, route, spec.kind, **options)


def inject_github(server: GitHubServer, case: FaultCase) -> None:
    spec = FAULTS[case.fault]
    _method, route = case.target.split(" ", 1)
    many = 10  # every attempt of the phase meets the fault
    if spec.kind == "status":
        server.fault(route, spec.status, times=many, retry_after=spec.retry_after)
    elif spec.kind == "delay":
        server.fault(route, 200, times=many, delay=DELAY)
    elif spec.kind in ("truncate", "drop"):
        server.fault(route, 200, times=many, cut=spec.kind)
    elif spec.kind == "oversize":
        server.fault(route, 200, times=many, body=b'{"padding": "' + b"x" * OVERSIZE * 16 + b'"}')
    elif spec.kind == "invalid_json":
        server.fault(route, 200, times=many, body=b"{not json")
    elif spec.kind == "drip":
        server.fault(route, times=many, drip=Drip(GITHUB_DRIP))
    else:  # "duplicate" is served by duplicate_artifacts(): GitHub's list is not a page with `content`
        raise ValueError(spec.kind)


@dataclass
class Servers:
    testops: TestOpsServer | None = None
    github: GitHubServer | None = None


@contextmanager
def phase_world(phase: str, tmp: Path, *, extra_env: dict[str, str] | None = None, committed: bool = False,
                auth: str = "api-token") -> Iterator[tuple[Callable[[], Outcome], Servers]]:
    """The world of ``phase`` with its servers running, before any fault: ``act()`` runs the phase."""
    clock = FakeClock()
    if phase in TESTOPS_WORLDS:
        with TestOpsServer(token=SENTINEL, clock=clock.monotonic) as server:
            world = TestOpsWorld(tmp, server, clock, extra_env)
            world.auth = auth
            if phase == "select":
                with github_with_run() as github:
                    world.github = github  # type: ignore[attr-defined]
                    yield select_world(world), Servers(server, github)
                return
            if phase in READMITTING:
                # bootstrap, launch and reconcile re-admit their run over REST before they use the TestOps token.
                with github_with_run() as github:
                    world.runner_env = select_job_env(github, tmp)
                    act = reconcile_world(world, committed=committed) if phase == "reconcile" else TESTOPS_WORLDS[phase](world)
                    yield act, Servers(server, github)
                return
            act = TESTOPS_WORLDS[phase](world)
            yield act, Servers(server)
        return
    with GitHubServer(token=SENTINEL) as github:
        yield GITHUB_WORLDS[phase](GitHubWorld(tmp, github, clock, extra_env)), Servers(github=github)


@contextmanager
def world_for(case: FaultCase, tmp: Path) -> Iterator[Callable[[], Outcome]]:
    """The world of ``case.phase`` with the case's fault injected."""
    kind = FAULTS[case.fault].kind
    with phase_world(case.phase, tmp, committed=kind == "duplicate") as (act, servers):
        if servers.testops is not None:
            inject_testops(servers.testops, case)
        elif kind == "duplicate":
            assert servers.github is not None
            duplicate_artifacts(servers.github)
        else:
            assert servers.github is not None
            inject_github(servers.github, case)
        yield act


def duplicate_artifacts(server: GitHubServer) -> None:
    """The artifact list names the same artifact twice (what a paging bug or a replayed page would do)."""
    with server._lock:
        listed = [server._render_artifact(a, server.api_url()) for a in server._artifacts.values()
                  if a.run_id == IMPORT_RUN_ID]
    assert listed, "import_world adds the artifact first"
    body = json.dumps({"total_count": 2 * len(listed), "artifacts": listed + listed}).encode()
    server.fault("run_artifacts", 200, times=10, body=body)
