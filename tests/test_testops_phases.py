"""bootstrap, launch and reconcile, run in-process as the runner runs them, against the TestOps test
server: idempotence (a second bootstrap makes no mutation), dry-run, conflicts, once-markers, the
uncertain mutation resolved by reconcile without a re-send, and the sentinel token nowhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeClock, PhaseRun, run_mode
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_selection_support import REPOSITORY, RUN_ID, WORKFLOW, select_job_env
from testops_evidence.contract import contract_from_document
from testops_evidence.safeio import StateDir

TOKEN = "SENTINEL-phase-token-0b7e4d"
PROJECT = 12
PLAN_NAME = "Agent protocol evals"


def contract_document(endpoint: str, *, plan_id: int | None = 340, auth: str = "api-token",
                      api_prefix: str = "/api") -> dict[str, Any]:
    plan: dict[str, Any] = {"name": PLAN_NAME}
    if plan_id is not None:
        plan["id"] = plan_id
    return {
        "version": 1,
        "campaign": "agent-protocol",
        "trust": {"repository": "acme/agents", "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/agent-evals.yml"]},
        "testops": {"endpoint": endpoint, "api-prefix": api_prefix, "auth": auth, "project-id": PROJECT,
                    "plan": plan},
        "profile": {"id": "sonnet-default", "model": "claude-sonnet-5"},
        "lanes": {"native": {"max-parallel": 2}, "external": {"max-parallel": 1}},
        "cases": [
            {"key": "get-task-context", "testops-id": 194, "full-name": "agents/protocol/get-task-context",
             "title": "Get task context", "lane": "native", "checks": {"tool-called": "behavior"}},
            {"key": "company-credential-approval", "testops-id": 195,
             "full-name": "agents/protocol/company-credential-approval",
             "title": "Company credential setup with human approval", "lane": "external",
             "checks": {"secret-saved": "behavior"}},
        ],
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Iterator[TestOpsServer]:
    with TestOpsServer(token=TOKEN, clock=clock.monotonic) as srv:
        srv.add_project(PROJECT)
        srv.add_case(PROJECT, "Get task context", "agents/protocol/get-task-context", id=194)
        srv.add_case(PROJECT, "Company credential setup with human approval",
                     "agents/protocol/company-credential-approval", id=195)
        srv.add_case(PROJECT, "Unrelated", "agents/other", id=300)
        yield srv


def write_contract(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    """The run the phases belong to: each re-admits it over REST before it uses the TestOps token."""
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_run(REPOSITORY, RUN_ID, run_number=17, path=WORKFLOW)
        yield server


class Phases:
    """Runs phases with one contract, token and fake clock, as jobs of one admitted run; each call may use its
    own state dir."""

    def __init__(self, tmp_path: Path, server: TestOpsServer, clock: FakeClock, document: dict[str, Any],
                 github: GitHubServer) -> None:
        self.tmp_path = tmp_path
        self.server = server
        self.clock = clock
        self.contract = write_contract(tmp_path, document)
        self.runner_env = select_job_env(github, tmp_path)
        self.runs: list[PhaseRun] = []

    def run(self, mode: str, state: str = "state", env: dict[str, str] | None = None, **options: Any) -> PhaseRun:
        full_env = {**self.runner_env, "ALLURE_TOKEN": TOKEN, **(env or {})}
        opts = {"contract": str(self.contract), "state-dir": str(self.tmp_path / state), **options}
        result = run_mode(mode, self.tmp_path, opts, full_env, clock=self.clock.time,
                          monotonic=self.clock.monotonic, sleep=self.clock.sleep)
        self.runs.append(result)
        return result

    def assert_token_nowhere(self) -> None:
        for result in self.runs:
            # `::add-mask::<secret>` is how the runner learns what to mask; every other line must be clean.
            log = "\n".join(line for line in result.log.splitlines() if not line.startswith("::add-mask::"))
            texts = [log, result.summary, json.dumps(result.outputs)]
            assert result.state_dir is not None
            if result.state_dir.exists():
                texts += [p.read_text() for p in result.state_dir.iterdir() if p.is_file()]
            for text in texts:
                assert TOKEN not in text
                for jwt in self.server._jwts:
                    assert jwt not in text
        assert TOKEN not in repr(self.server.log)


@pytest.fixture
def phases(tmp_path: Path, server: TestOpsServer, clock: FakeClock, github: GitHubServer) -> Phases:
    return Phases(tmp_path, server, clock, contract_document(server.url, plan_id=None), github)


def mutations(server: TestOpsServer) -> list[tuple[str, str]]:
    """The changes sent. A plan sync only recomputes the plan: it is counted apart (``syncs``)."""
    return [(e.method, e.route) for e in server.mutations() if not e.route.endswith("/sync")]


def syncs(server: TestOpsServer) -> list[str]:
    return [e.route for e in server.mutations() if e.route.endswith("/sync")]


# --- bootstrap ------------------------------------------------------------------------------------------------


def test_bootstrap_creates_the_plan_updates_drift_and_a_second_run_changes_nothing(
        phases: Phases, server: TestOpsServer) -> None:
    server.cases[195]["name"] = "Old title"
    first = phases.run("bootstrap", state="state-1")
    assert first.exit_code == 0, first.summary
    plan_id = int(first.outputs["plan-id"])
    assert json.loads(first.outputs["updated-cases"]) == ["company-credential-approval"]
    assert json.loads(first.outputs["created-cases"]) == []
    assert mutations(server) == [("PATCH", "/testcase/195"), ("POST", "/testplan")]
    assert server.cases[195]["name"] == "Company credential setup with human approval"
    assert server.plan_case_ids(plan_id) == [194, 195] and server.plans[plan_id]["name"] == PLAN_NAME
    state = first.state_dir
    assert state is not None
    receipt = json.loads((state / "bootstrap.json").read_text())
    assert receipt["plan"] == {"id": plan_id, "name": PLAN_NAME, "action": "created", "case-ids": [194, 195],
                               "plan-sync": None, "test-cases": 2}  # it counted right: no sync needed
    assert syncs(server) == []
    assert StateDir(state).pending_markers() == []
    assert json.loads((state / "once-bootstrap-case-195.json").read_text())["kind"] == "case-update"

    server.reset_log()
    second = phases.run("bootstrap", state="state-2")
    assert second.exit_code == 0, second.summary
    assert mutations(server) == []
    assert second.outputs["plan-id"] == str(plan_id)
    assert json.loads(second.outputs["updated-cases"]) == []
    assert "already matches" in second.summary
    # The same state directory works too (a local re-run): the receipt takes the next free name.
    third = phases.run("bootstrap", state="state-2")
    assert third.exit_code == 0 and mutations(server) == []
    assert (third.state_dir / "bootstrap-2.json").exists()  # type: ignore[operator]
    phases.assert_token_nowhere()


def test_bootstrap_dry_run_prints_the_diff_and_changes_nothing(phases: Phases, server: TestOpsServer) -> None:
    server.cases[194]["name"] = "Get the task context (old)"
    result = phases.run("bootstrap", **{"dry-run": "true"})
    assert result.exit_code == 0, result.summary
    assert mutations(server) == []
    assert "Dry run" in result.summary and "would update" in result.summary
    assert "Get the task context (old)" in result.summary and "would create" in result.summary
    assert json.loads(result.outputs["updated-cases"]) == ["get-task-context"]
    assert result.outputs["plan-id"] == ""
    assert result.state_dir is not None and (result.state_dir / "bootstrap-dry-run.json").exists()
    assert not list(result.state_dir.glob("once-*"))
    phases.assert_token_nowhere()


def test_bootstrap_makes_an_existing_plan_hold_exactly_the_contract_cases(
        tmp_path: Path, server: TestOpsServer, clock: FakeClock, github: GitHubServer) -> None:
    server.add_plan(PROJECT, "Old plan name", [194, 300], id=340)
    server.plans[340]["treeSelection"]["leafsExclude"] = [195]
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)
    result = phases.run("bootstrap")
    assert result.exit_code == 0, result.summary
    assert mutations(server) == [("PATCH", "/testplan/340")]
    assert server.plan_case_ids(340) == [194, 195] and server.plans[340]["treeSelection"]["leafsExclude"] == []
    assert server.plans[340]["name"] == PLAN_NAME
    server.reset_log()
    assert phases.run("bootstrap", state="again").exit_code == 0
    assert mutations(server) == []


def test_bootstrap_fills_an_empty_full_name(phases: Phases, server: TestOpsServer) -> None:
    server.cases[194]["fullName"] = None
    result = phases.run("bootstrap")
    assert result.exit_code == 0, result.summary
    assert server.cases[194]["fullName"] == "agents/protocol/get-task-context"


@pytest.mark.parametrize("setup,code,exit_code,field", [
    (lambda s: s.cases[194].update(fullName="agents/protocol/renamed"), "bootstrap.case_conflict", 3,
     "get-task-context.full-name"),
    (lambda s: s.add_case(PROJECT, "Copy", "agents/protocol/get-task-context", id=301), "bootstrap.case_conflict", 3,
     "get-task-context.full-name"),
    (lambda s: s.cases.pop(195), "bootstrap.case_missing", 2, "company-credential-approval.testops-id"),
    (lambda s: s.cases[195].update(deleted=True), "bootstrap.case_missing", 2,
     "company-credential-approval.testops-id"),
    (lambda s: s.cases[195].update(projectId=99), "bootstrap.case_conflict", 3,
     "company-credential-approval.testops-id"),
    (lambda s: [s.add_plan(PROJECT, PLAN_NAME, []), s.add_plan(PROJECT, PLAN_NAME, [])], "bootstrap.plan_conflict",
     3, "testops.plan.name"),
])
def test_bootstrap_refuses_conflicts_before_any_change(phases: Phases, server: TestOpsServer, setup: Any,
                                                       code: str, exit_code: int, field: str) -> None:
    server.cases[194]["name"] = "drifted"  # a change that would be made, were it not for the conflict
    setup(server)
    result = phases.run("bootstrap")
    assert result.exit_code == exit_code
    assert result.outputs["error-code"] == code
    failure = result.failure()
    assert failure is not None and failure["code"] == code and failure["field"] == field
    assert mutations(server) == []


@pytest.mark.parametrize("seed,code", [(lambda _s: None, "bootstrap.plan_missing"),
                                       (lambda s: s.add_plan(99, PLAN_NAME, [], id=340), "bootstrap.plan_conflict")])
def test_bootstrap_refuses_a_bad_plan_id(tmp_path: Path, server: TestOpsServer, clock: FakeClock, seed: Any,
                                         code: str, github: GitHubServer) -> None:
    seed(server)
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)
    result = phases.run("bootstrap")
    assert result.outputs["error-code"] == code
    assert mutations(server) == []


def test_bootstrap_with_jwt_auth_legacy_prefix_and_endpoint_override(tmp_path: Path, server: TestOpsServer,
                                                                     clock: FakeClock, github: GitHubServer) -> None:
    document = contract_document("https://testops.invalid", plan_id=None, auth="jwt", api_prefix="/api/rs")
    phases = Phases(tmp_path, server, clock, document, github)
    result = phases.run("bootstrap", env={"ALLURE_ENDPOINT": server.url})
    assert result.exit_code == 0, result.summary
    assert {e.prefix for e in server.requests() if e.route != "/uaa/oauth/token"} == {"/api/rs"}
    assert {e.auth for e in server.requests("GET")} == {"bearer"}
    phases.assert_token_nowhere()


def test_bootstrap_without_a_token_is_a_usage_error(phases: Phases) -> None:
    result = run_mode("bootstrap", phases.tmp_path, {"contract": str(phases.contract)}, dict(phases.runner_env))
    assert result.exit_code == 2 and result.outputs["error-code"] == "testops.not_configured"


# --- launch -----------------------------------------------------------------------------------------------------


@pytest.fixture
def launch_phases(tmp_path: Path, server: TestOpsServer, clock: FakeClock, github: GitHubServer) -> Phases:
    job = server.add_job(PROJECT, "agent-evals", external_id="acme/agents_agent-evals.yml")
    server.add_plan(PROJECT, PLAN_NAME, [194, 195], id=340, job_ids=[job["id"]])
    return Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)


def test_launch_runs_the_plan_once(launch_phases: Phases, server: TestOpsServer) -> None:
    result = launch_phases.run("launch")
    assert result.exit_code == 0, result.summary
    launch_id = int(result.outputs["launch-id"])
    assert result.outputs["launch-url"] == f"{server.url}/launch/{launch_id}"
    assert server.launches[launch_id]["name"] == "agent-protocol #17"
    assert mutations(server) == [("POST", "/testplan/340/run")]
    # The plan is synced right before it runs (difference 5 of issue 13), and the run names the launch with
    # launchName, the field the API requires (difference 1).
    assert [(e.method, e.route) for e in server.mutations()] == [("POST", "/testplan/340/sync"),
                                                                   ("POST", "/testplan/340/run")]
    assert server.requests("POST", "/testplan/340/run")[0].body == {"launchName": "agent-protocol #17"}
    assert [r["launchId"] for r in server.jobruns.values()] == [launch_id]
    receipt = json.loads((result.state_dir / "launch.json").read_text())  # type: ignore[operator]
    assert receipt["launch-id"] == launch_id and receipt["plan-id"] == 340
    assert receipt["capabilities"] == {"plan-sync": True, "test-cases": 2}

    again = launch_phases.run("launch")
    assert again.exit_code == 3 and again.outputs["error-code"] == "once.already_started"
    assert mutations(server) == [("POST", "/testplan/340/run")] and syncs(server) == ["/testplan/340/sync"]
    launch_phases.assert_token_nowhere()


def test_launch_name_input_and_its_limits(launch_phases: Phases, server: TestOpsServer) -> None:
    named = launch_phases.run("launch", state="a", **{"launch-name": "Nightly | agents"})
    assert server.launches[int(named.outputs["launch-id"])]["name"] == "Nightly | agents"
    no_number = launch_phases.run("launch", state="b", env={"GITHUB_RUN_NUMBER": ""})
    assert no_number.outputs["error-code"] == "input.launch-name"
    too_long = launch_phases.run("launch", state="c", **{"launch-name": "x" * 256})
    assert too_long.outputs["error-code"] == "input.launch-name"
    assert len(mutations(server)) == 1


def test_launch_finds_the_plan_by_name_when_the_contract_has_no_id(tmp_path: Path, server: TestOpsServer,
                                                                   clock: FakeClock, github: GitHubServer) -> None:
    plan = server.add_plan(PROJECT, PLAN_NAME, [194, 195])
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=None), github)
    result = phases.run("launch")
    assert result.exit_code == 0, result.summary
    assert mutations(server) == [("POST", f"/testplan/{plan['id']}/run")]


# --- uncertain mutations and reconcile ----------------------------------------------------------------------------


def test_uncertain_launch_is_reconciled_without_a_resend(launch_phases: Phases, server: TestOpsServer) -> None:
    server.fail("POST", "/testplan/340/run", "drop")  # the server commits, then drops the connection
    failed = launch_phases.run("launch")
    assert failed.exit_code == 4 and failed.outputs["error-code"] == "testops.uncertain"
    assert failed.failure()["code"] == "testops.uncertain"  # type: ignore[index]
    assert len(server.launches) == 1 and len(mutations(server)) == 1
    assert StateDir(failed.state_dir).pending_markers() == ["launch"]  # type: ignore[arg-type]

    result = launch_phases.run("reconcile")
    assert result.exit_code == 0, result.summary
    assert json.loads(result.outputs["reconciled"]) == ["launch"]
    assert json.loads(result.outputs["still-uncertain"]) == []
    assert len(mutations(server)) == 1  # observed, never re-sent
    launch_id = next(iter(server.launches))
    done = json.loads((result.state_dir / "done-launch.json").read_text())  # type: ignore[operator]
    assert done["outcome"] == "observed" and done["launch-id"] == launch_id
    assert launch_phases.run("reconcile").outputs["reconciled"] == "[]"
    launch_phases.assert_token_nowhere()


def test_uncertain_case_update_is_reconciled(phases: Phases, server: TestOpsServer) -> None:
    server.cases[195]["name"] = "Old title"
    server.fail("PATCH", "/testcase/195", "delay", delay=300.0)  # held until the server stops
    failed = phases.run("bootstrap", env={"TESTOPS_EVIDENCE_READ_TIMEOUT": "1"})
    assert failed.outputs["error-code"] == "testops.uncertain"
    assert len(mutations(server)) == 1 and not server.plans  # stopped before the plan
    result = phases.run("reconcile")
    assert json.loads(result.outputs["reconciled"]) == ["bootstrap-case-195"], result.summary
    assert len(mutations(server)) == 1
    finished = phases.run("bootstrap")
    assert finished.exit_code == 0 and mutations(server)[-1] == ("POST", "/testplan")


def test_a_mutation_proved_absent_is_resent_only_with_resume(launch_phases: Phases, server: TestOpsServer) -> None:
    server.fail("POST", "/testplan/340/run", "status", status=503)  # refused before processing
    failed = launch_phases.run("launch")
    assert failed.outputs["error-code"] == "testops.http_503" and not server.launches

    held = launch_phases.run("reconcile")
    assert held.exit_code == 4 and held.outputs["error-code"] == "reconcile.unresolved"
    assert json.loads(held.outputs["still-uncertain"]) == ["launch"]
    assert "resume: true" in held.summary and held.failure()["code"] == "reconcile.unresolved"  # type: ignore[index]
    assert len(mutations(server)) == 1

    resumed = launch_phases.run("reconcile", resume="true")
    assert resumed.exit_code == 0, resumed.summary
    assert json.loads(resumed.outputs["reconciled"]) == ["launch"]
    assert len(mutations(server)) == 2 and len(server.launches) == 1
    done = json.loads((resumed.state_dir / "done-launch.json").read_text())  # type: ignore[operator]
    assert done["outcome"] == "re-sent" and done["launch-id"] == next(iter(server.launches))
    assert launch_phases.run("reconcile", resume="true").outputs["reconciled"] == "[]"


def test_reconcile_never_resends_what_it_cannot_prove_absent(launch_phases: Phases, server: TestOpsServer) -> None:
    server.fail("POST", "/testplan/340/run", "drop")
    launch_phases.run("launch")
    server.add_launch(PROJECT, "agent-protocol #17")  # a second launch of that name: ambiguous
    result = launch_phases.run("reconcile", resume="true")
    assert result.exit_code == 4 and json.loads(result.outputs["still-uncertain"]) == ["launch"]
    assert len(mutations(server)) == 1


def upload_marker(state: Path, server: TestOpsServer, session_id: int, launch_id: int, names: list[str]) -> None:
    """The once-marker the upload phase writes before a chunk (kind upload-chunk)."""
    results = [{"uuid": f"uuid-{n}", "fullName": name, "name": name, "status": "passed"} for n, name in enumerate(names)]
    StateDir(state).once("upload-chunk-1", {
        "kind": "upload-chunk", "endpoint": server.url, "project-id": PROJECT, "launch-id": launch_id,
        "results": [{"uuid": r["uuid"], "full-name": r["fullName"]} for r in results],
        "request": {"method": "POST", "path": "/upload/test-result",
                    "json": {"testSessionId": session_id, "results": results}},
    })


def test_reconcile_observes_an_upload_chunk(tmp_path: Path, server: TestOpsServer, clock: FakeClock, github: GitHubServer) -> None:
    server.visible_after_polls = 1
    phases = Phases(tmp_path, server, clock, contract_document(server.url), github)
    launch = server.add_launch(PROJECT, "L")
    session = {"id": 7001, "launchId": launch["id"], "jobRunId": None, "projectId": PROJECT, "environment": [],
               "manual": True}
    server.sessions[7001] = session
    names = ["agents/protocol/get-task-context", "agents/protocol/company-credential-approval"]
    state = tmp_path / "state"
    upload_marker(state, server, 7001, launch["id"], names)

    # Not uploaded and TestOps says processing is finished: proved absent; resume replays the exact chunk.
    held = phases.run("reconcile")
    assert json.loads(held.outputs["still-uncertain"]) == ["upload-chunk-1"]
    resumed = phases.run("reconcile", resume="true")
    assert json.loads(resumed.outputs["reconciled"]) == ["upload-chunk-1"], resumed.summary
    assert sorted(r["fullName"] for r in server.launch_results(launch["id"])) == sorted(names)
    assert [e.route for e in server.mutations()] == ["/upload/test-result"]
    # The marker's chunk (as 0.2 wrote it, statuses in lower case) is replayed with UploadTestStatus names.
    assert [r["status"] for r in server.mutations()[0].body["results"]] == ["PASSED", "PASSED"]


def test_reconcile_waits_while_results_are_still_processing(tmp_path: Path, server: TestOpsServer,
                                                            clock: FakeClock, github: GitHubServer) -> None:
    server.visible_after_polls = 50
    phases = Phases(tmp_path, server, clock, contract_document(server.url), github)
    job = server.add_job(PROJECT, "j")
    launch = server.add_launch(PROJECT, "L")
    run = server.add_jobrun(job["id"], launch_id=launch["id"])
    server.sessions[7002] = {"id": 7002, "launchId": launch["id"], "jobRunId": run["id"], "projectId": PROJECT,
                             "environment": [], "manual": False}
    names = ["agents/protocol/get-task-context"]
    upload_marker(tmp_path / "state", server, 7002, launch["id"], names)
    server._dispatch("POST", "/upload/test-result", {}, {"testSessionId": 7002, "results": [
        {"uuid": "uuid-0", "fullName": names[0], "status": "passed"}]}, "application/json", b"")
    result = phases.run("reconcile", resume="true")
    assert json.loads(result.outputs["still-uncertain"]) == ["upload-chunk-1"]
    assert "still processing" in result.summary
    assert server.mutations() == []
    server.visible_after_polls = 0
    for item in server.results.values():
        item["_visibleAt"] = 0
    done = phases.run("reconcile")
    assert json.loads(done.outputs["reconciled"]) == ["upload-chunk-1"]


def test_reconcile_with_nothing_pending(phases: Phases) -> None:
    result = phases.run("reconcile")
    assert result.exit_code == 0 and result.outputs["reconciled"] == "[]"
    assert result.outputs["still-uncertain"] == "[]"


def test_reconcile_refuses_to_judge_a_marker_from_another_endpoint(tmp_path: Path, server: TestOpsServer,
                                                                   clock: FakeClock, github: GitHubServer) -> None:
    phases = Phases(tmp_path, server, clock, contract_document(server.url), github)
    StateDir(tmp_path / "state").once("launch", {"kind": "launch", "endpoint": "https://other.example",
                                                 "project-id": PROJECT, "name": "x"})
    result = phases.run("reconcile", resume="true")
    assert json.loads(result.outputs["still-uncertain"]) == ["launch"]
    assert "other.example" in result.summary and server.requests() == []


def test_contract_document_is_valid() -> None:
    contract = contract_from_document(contract_document("http://127.0.0.1:1"))
    assert [c.testops_id for c in contract.cases] == [194, 195]


# --- golden summaries (what operators read) -------------------------------------------------------------------

GOLDEN = Path(__file__).parent / "golden" / "testops"


def test_golden_summaries(tmp_path: Path, server: TestOpsServer, clock: FakeClock, github: GitHubServer) -> None:
    from helpers import assert_golden

    server.cases[195]["name"] = "Old title"
    job = server.add_job(PROJECT, "agent-evals")
    server.add_plan(PROJECT, "Old plan name", [194, 300], id=340, job_ids=[job["id"]])
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)

    def normal(text: str) -> str:
        return text.replace(server.url, "<testops>").replace(str(tmp_path), "<tmp>")

    assert_golden(GOLDEN / "bootstrap-dry-run-summary.md", normal(phases.run("bootstrap", **{"dry-run": "true"}).summary))
    assert_golden(GOLDEN / "bootstrap-summary.md", normal(phases.run("bootstrap").summary))
    server.fail("POST", "/testplan/340/run", "drop")
    assert_golden(GOLDEN / "launch-uncertain-summary.md", normal(phases.run("launch").summary))
    assert_golden(GOLDEN / "reconcile-summary.md", normal(phases.run("reconcile").summary))
    assert_golden(GOLDEN / "launch-summary.md", normal(phases.run("launch", state="other").summary))


# --- the real API (issue 13): each of these failed against the conformance-enforcing server before -------------


def test_a_legacy_launch_marker_is_replayed_with_launch_name(launch_phases: Phases, server: TestOpsServer,
                                                             tmp_path: Path) -> None:
    """A once-marker written by 0.1 recorded the plan run as {name}; TestOps requires launchName, so a resume
    that replayed it verbatim could only be refused."""
    StateDir(tmp_path / "state").once("launch", {
        "kind": "launch", "endpoint": server.url, "project-id": PROJECT, "plan-id": 340,
        "name": "agent-protocol #17", "request": {"method": "POST", "path": "/testplan/340/run",
                                                   "json": {"name": "agent-protocol #17"}}})
    resumed = launch_phases.run("reconcile", resume="true")
    assert resumed.exit_code == 0, resumed.summary
    assert server.requests("POST", "/testplan/340/run")[0].body == {"launchName": "agent-protocol #17"}
    assert [launch["name"] for launch in server.launches.values()] == ["agent-protocol #17"]


def test_a_full_name_used_by_a_case_outside_the_contract_is_a_conflict(phases: Phases, server: TestOpsServer) -> None:
    """The case listing's rows carry no fullName: the conflict is only visible through the search, whose rows
    are full test cases."""
    server.add_case(PROJECT, "Copy", "agents/protocol/company-credential-approval", id=302)
    result = phases.run("bootstrap")
    assert (result.exit_code, result.outputs["error-code"]) == (3, "bootstrap.case_conflict")
    assert result.failure()["field"] == "company-credential-approval.full-name"  # type: ignore[index]
    assert mutations(server) == []
    assert server.requests("GET", "/testcase/__search")[0].param("rql") == "id > 0"


def test_a_plan_with_an_aql_query_is_refused_before_any_change(launch_phases: Phases, server: TestOpsServer,
                                                               tmp_path: Path, clock: FakeClock, github: GitHubServer) -> None:
    """No source shows a PATCH clearing baseRql (a null is an unset field): bootstrap refuses rather than
    leave a plan that still selects cases by its query."""
    server.plans[340]["baseRql"] = 'tag = "smoke"'
    server.cases[195]["name"] = "Old title"
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)
    result = phases.run("bootstrap")
    assert (result.exit_code, result.outputs["error-code"]) == (3, "bootstrap.plan_conflict")
    assert "baseRql" in result.summary and mutations(server) == []
    assert server.plans[340]["baseRql"] == 'tag = "smoke"'


def test_bootstrap_syncs_a_plan_whose_count_is_stale(launch_phases: Phases, server: TestOpsServer, tmp_path: Path,
                                                     clock: FakeClock, github: GitHubServer) -> None:
    """testCasesCount is what TestOps computed at the last change or sync: select binds it, so bootstrap
    syncs a plan that counts wrong (and leaves a plan that counts right alone)."""
    server.recount_later(340, 1)
    phases = Phases(tmp_path, server, clock, contract_document(server.url, plan_id=340), github)
    result = phases.run("bootstrap")
    assert result.exit_code == 0, result.summary
    assert mutations(server) == [] and syncs(server) == ["/testplan/340/sync"]
    receipt = json.loads((result.state_dir / "bootstrap.json").read_text())  # type: ignore[operator]
    assert (receipt["plan"]["plan-sync"], receipt["plan"]["test-cases"]) == (True, 2)
    assert "warning" not in result.log
    server.reset_log()
    assert phases.run("bootstrap", state="again").exit_code == 0
    assert server.mutations() == []  # counts right now: nothing sent, not even a sync


def test_a_server_without_plan_sync_still_launches(launch_phases: Phases, server: TestOpsServer) -> None:
    server.fail("POST", "/testplan/340/sync", "status", status=404, times=None)
    result = launch_phases.run("launch")
    assert result.exit_code == 0, result.summary
    receipt = json.loads((result.state_dir / "launch.json").read_text())  # type: ignore[operator]
    assert receipt["capabilities"]["plan-sync"] is False
    assert mutations(server) == [("POST", "/testplan/340/run")] and "no plan sync" in result.summary
