"""Every TestOps request has a deadline over its whole answer (issue 24, item 4); see
test_answer_deadline_github.py for the drip and why nothing here measures time.

A GET whose answer is dripped ends in ``testops.deadline`` (after its retries), a mutation's in
``testops.uncertain`` with its once-marker left pending for reconcile, and the mutation is never re-sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import FakeClock, PhaseRun
from servers.drip import Drip
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_select_testops import PROJECT, SENTINEL, World, no_secret
from test_selection_support import (
    REPOSITORY,
    RUN_ID,
    WORKFLOW,
    example_document,
    github_with_run,
    select_job_env,
    write_contract,
)
from test_testops_phases import TOKEN as PHASE_TOKEN
from test_testops_phases import Phases, contract_document, mutations
from testops_evidence.errors import Refusal
from testops_evidence.safeio import StateDir
from testops_evidence.testops.client import TestOpsClient

# A 0.5 s read timeout and a byte every 0.25 s; no retries, so a phase refuses after one dripped answer.
TESTOPS_TUNING = {"TESTOPS_EVIDENCE_CONNECT_TIMEOUT": "0.3", "TESTOPS_EVIDENCE_READ_TIMEOUT": "0.5",
                  "TESTOPS_EVIDENCE_MAX_RETRIES": "0"}
TESTOPS_DRIP = 0.25


def refused(run: PhaseRun, code: str, exit_code: int = 4) -> None:
    assert (run.exit_code, run.outputs.get("error-code")) == (exit_code, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["code"] == code
    assert f"`{code}`" in run.summary




@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """select's TestOps world (tests/test_select_testops.py): a GitHub run, a seeded TestOps, a launched job run."""
    from testops_evidence.contract import contract_from_document

    document = example_document()
    with github_with_run() as github, TestOpsServer(token=SENTINEL) as testops:
        env = {**select_job_env(github, tmp_path), "ALLURE_TOKEN": SENTINEL}
        seeded = testops.seed_contract(contract_from_document(document),
                                       job_url=f"{github.url}/{REPOSITORY}/actions/workflows/agent-evals.yml",
                                       job_external_id=f"{REPOSITORY}_{env['GITHUB_WORKFLOW']}")
        launch = testops.add_launch(PROJECT, "agent-protocol #42")
        job_run = testops.add_jobrun(seeded["job-id"], launch_id=launch["id"], stage="scheduled",
                                     url=f"{github.url}/{REPOSITORY}/actions/runs/{RUN_ID}",
                                     case_ids=seeded["case-ids"])
        yield World(tmp_path, github, testops, env, write_contract(tmp_path, document), document,
                    seeded["job-id"], launch["id"], job_run["id"])


def test_select_on_the_testops_backend_refuses_testops_deadline_when_the_job_run_is_dripped(world: World) -> None:
    drip = Drip(TESTOPS_DRIP, "chunked")
    world.testops.fail("GET", rf"/jobrun/{world.job_run_id}", "drip", drip=drip)
    run = world.launched(**TESTOPS_TUNING)
    refused(run, "testops.deadline")
    assert "selection-sha256" not in run.outputs
    no_secret(world, run)
    assert drip.left_early(), (drip.sent, drip.total)


@pytest.fixture
def launch_world(tmp_path: Path) -> Iterator[tuple[Phases, TestOpsServer]]:
    """launch's world (tests/test_testops_phases.py): an admitted run and a TestOps plan with its job."""
    fake = FakeClock()
    with TestOpsServer(token=PHASE_TOKEN, clock=fake.monotonic) as testops, \
            GitHubServer() as github:
        github.add_repo(REPOSITORY)
        github.add_run(REPOSITORY, RUN_ID, run_number=17, path=WORKFLOW)
        testops.add_project(12)
        testops.add_case(12, "Get task context", "agents/protocol/get-task-context", id=194)
        testops.add_case(12, "Company credential setup with human approval",
                         "agents/protocol/company-credential-approval", id=195)
        job = testops.add_job(12, "agent-evals", external_id="acme/agents_agent-evals.yml")
        testops.add_plan(12, "Agent protocol evals", [194, 195], id=340, job_ids=[job["id"]])
        yield Phases(tmp_path, testops, fake, contract_document(testops.url, plan_id=340), github), testops


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_dripped_answer_to_a_mutation_is_uncertain_and_left_to_reconcile(
        launch_world: tuple[Phases, TestOpsServer], part: str) -> None:
    launch_phases, server = launch_world
    drip = Drip(TESTOPS_DRIP, part)
    server.fail("POST", "/testplan/340/run", "drip", drip=drip)  # the server commits, then drips its answer
    failed = launch_phases.run("launch", env=TESTOPS_TUNING)
    refused(failed, "testops.uncertain")
    assert len(server.launches) == 1 and mutations(server) == [("POST", "/testplan/340/run")]  # sent once
    assert StateDir(failed.state_dir).pending_markers() == ["launch"]  # type: ignore[arg-type]
    assert drip.left_early(), (drip.sent, drip.total)
    launch_phases.assert_token_nowhere()


def test_a_get_dripped_on_every_attempt_is_retried_then_refused_testops_deadline() -> None:
    fake = FakeClock()
    with TestOpsServer(token=SENTINEL) as server:
        server.add_project(12)
        server.add_case(12, "Get task context", "agents/protocol/get-task-context", id=194)
        drips = [Drip(TESTOPS_DRIP, "body") for _ in range(3)]
        for drip in drips:
            server.fail("GET", "/testcase/194", "drip", drip=drip)
        client = TestOpsClient(server.url, SENTINEL, connect_timeout=0.3, read_timeout=0.5, max_retries=2,
                               monotonic=fake.monotonic, sleep=fake.sleep)
        with client, pytest.raises(Refusal) as caught:
            client.get("/testcase/194")
        assert caught.value.code == "testops.deadline"
        assert "no whole answer within 0.8 s" in caught.value.message
        assert len(server.requests("GET", "/testcase/194")) == 3 and len(fake.sleeps) == 2
        for drip in drips:
            assert drip.left_early(), (drip.sent, drip.total)
