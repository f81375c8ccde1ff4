"""``select`` on the TestOps backend against the TestOps and GitHub REST test servers (real HTTP).

One test per binding rule of the prior art (job run, job, launch, plan, plan rows), each refused with its
own code and exit 3, plus the job-run modes (TestOps-launched, manual with a standing plan policy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import PhaseRun, run_mode, secret_leaks
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_selection_support import (
    REPOSITORY,
    RUN_ID,
    WORKFLOW,
    example_document,
    github_with_run,
    plan_json,
    select_job_env,
    write_contract,
)
from testops_evidence.contract import contract_from_document

SENTINEL = "sentinel-allure-tok-9c2e4f7a"  # no 8 characters of it in honest output
PROJECT = 12
PLAN = 340


@dataclass
class World:
    """One GitHub run, one TestOps instance seeded from the example contract, and a launched job run."""

    tmp: Path
    github: GitHubServer
    testops: TestOpsServer
    env: dict[str, str]
    contract: Path
    document: dict[str, Any]
    job_id: int
    launch_id: int
    job_run_id: int

    @property
    def run_url(self) -> str:
        return f"{self.github.url}/{REPOSITORY}/actions/runs/{RUN_ID}"

    @property
    def workflow_url(self) -> str:
        return f"{self.github.url}/{REPOSITORY}/actions/workflows/agent-evals.yml"

    def select(self, options: dict[str, Any] | None = None, env: dict[str, str] | None = None,
               *, actions: bool = True) -> PhaseRun:
        opts = {"contract": str(self.contract), "testops-endpoint": self.testops.url,
                "selection-path": str(self.tmp / "out" / "selection.json"), **(options or {})}
        full_env = {**self.env, **(env or {})}
        if not actions:  # outside GitHub Actions: a local rehearsal
            full_env.pop("GITHUB_ACTIONS")
        return run_mode("select", self.tmp, opts, full_env, actions=actions)

    def launched(self, **env: str) -> PhaseRun:
        """select as a TestOps-launched run sees it: the dispatch input and ALLURE_JOB_RUN_ID agree."""
        return self.select({"job-run-id": str(self.job_run_id)}, {"ALLURE_JOB_RUN_ID": str(self.job_run_id), **env})

    def rewrite_contract(self, change: Callable[[dict[str, Any]], None]) -> None:
        change(self.document)
        self.contract = write_contract(self.tmp, self.document)

    def plan_rows(self, rows: list[dict[str, Any]]) -> None:
        self.testops.jobruns[self.job_run_id]["plan"] = rows


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    with github_with_run() as server:
        yield server


@pytest.fixture
def world(github: GitHubServer, tmp_path: Path) -> Iterator[World]:
    document = example_document()
    contract = contract_from_document(document)
    env = {**select_job_env(github, tmp_path), "ALLURE_TOKEN": SENTINEL}
    with TestOpsServer(token=SENTINEL) as testops:
        # The job as TestOps created it on the workflow's first upload by Allure 3 (<repository>_<workflow name>).
        seeded = testops.seed_contract(contract, job_url=f"{github.url}/{REPOSITORY}/actions/workflows/agent-evals.yml",
                                       job_external_id=f"{REPOSITORY}_{env['GITHUB_WORKFLOW']}")
        launch = testops.add_launch(PROJECT, "agent-protocol #42")
        run = testops.add_jobrun(seeded["job-id"], launch_id=launch["id"], stage="scheduled",
                                 url=f"{github.url}/{REPOSITORY}/actions/runs/{RUN_ID}", case_ids=seeded["case-ids"])
        yield World(tmp_path, github, testops, env, write_contract(tmp_path, document), document,
                    seeded["job-id"], launch["id"], run["id"])


def refused(run: PhaseRun, code: str, field: str | None = None, exit_code: int = 3) -> dict[str, Any]:
    assert (run.exit_code, run.outputs.get("error-code")) == (exit_code, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["code"] == code
    if field is not None:
        assert failure["field"] == field
    assert "selection-sha256" not in run.outputs
    return failure


def no_secret(world: World, run: PhaseRun) -> None:
    assert secret_leaks(run, SENTINEL, world.tmp / "out") == []


# --- the launched job run ------------------------------------------------------------------------------


def test_a_launched_job_run_that_binds_selects_its_plan(world: World) -> None:
    run = world.launched()
    assert run.exit_code == 0, run.summary
    out = run.outputs
    assert (out["job-run-id"], out["launch-id"]) == (str(world.job_run_id), str(world.launch_id))
    assert (out["selected-count"], out["full-plan"], out["native-count"], out["external-count"]) \
        == ("12", "true", "9", "3")
    document = json.loads(Path(out["selection-path"]).read_bytes())
    assert document["source"] == "job-run" and document["backend"] == "testops"
    assert document["testops"] == {"endpoint": world.testops.url, "project-id": PROJECT, "plan-id": PLAN,
                                   "plan-name": "Agent protocol evals", "job-run-id": world.job_run_id,
                                   "job-id": world.job_id, "launch-id": world.launch_id,
                                   # TestOps confirmed the job's uid; the job run has none yet: the run's id
                                   "job-uid": f"{REPOSITORY}_{world.env['GITHUB_WORKFLOW']}",
                                   "job-run-uid": str(RUN_ID)}
    assert f"({world.testops.url}/jobrun/{world.job_run_id})" in run.summary
    assert f"({world.testops.url}/launch/{world.launch_id})" in run.summary
    routes = [entry.route for entry in world.testops.requests("GET")]
    assert routes == [f"/jobrun/{world.job_run_id}", f"/job/{world.job_id}", "/job", f"/launch/{world.launch_id}",
                      f"/testplan/{PLAN}", f"/jobrun/{world.job_run_id}/plan"]
    assert world.testops.requests("GET", "/job")[0].param("externalId") == document["testops"]["job-uid"]
    assert world.testops.mutations() == []  # select only reads TestOps
    no_secret(world, run)


def test_the_job_run_id_from_the_input_alone_is_enough(world: World) -> None:
    run = world.select({"job-run-id": str(world.job_run_id)})
    assert run.exit_code == 0 and run.outputs["job-run-id"] == str(world.job_run_id)


def test_the_plan_order_and_a_partial_plan_are_kept(world: World) -> None:
    world.plan_rows([{"id": 205, "selector": "agents/protocol/external-webhook-roundtrip"},
                     {"id": 194, "selector": "agents/protocol/get-task-context"}])
    run = world.launched()
    assert run.exit_code == 0
    assert (run.outputs["selected-count"], run.outputs["full-plan"]) == ("2", "false")
    document = json.loads(Path(run.outputs["selection-path"]).read_bytes())
    assert [row["key"] for row in document["cases"]] == ["external-webhook-roundtrip", "get-task-context"]


def test_the_input_and_allure_job_run_id_must_agree(world: World) -> None:
    run = world.select({"job-run-id": str(world.job_run_id)}, {"ALLURE_JOB_RUN_ID": str(world.job_run_id + 1)})
    refused(run, "selection.mode", "job-run-id", exit_code=2)
    assert world.testops.requests() == []  # refused before any request


def test_no_job_run_at_all_is_a_usage_error(world: World) -> None:
    refused(world.select(), "input.job-run-id", "job-run-id", exit_code=2)


def test_a_standing_plan_on_a_launched_run_is_refused(world: World) -> None:
    plan = world.tmp / "testplan.json"
    plan.write_text(plan_json([{"id": "194", "selector": "agents/protocol/get-task-context"}]))
    run = world.select({"job-run-id": str(world.job_run_id), "standing-plan": str(plan)})
    refused(run, "selection.mode", "standing-plan", exit_code=2)


def test_a_rehearsal_context_cannot_select_from_testops(world: World) -> None:
    run = world.select({"job-run-id": str(world.job_run_id)}, actions=False)
    assert (run.exit_code, run.outputs.get("error-code")) == (3, "guard.local_context")
    assert world.testops.requests() == []


# --- one test per binding rule -------------------------------------------------------------------------


def _set(table: str, key: str, value: Any) -> Callable[[World], None]:
    def change(world: World) -> None:
        ident = {"jobruns": world.job_run_id, "jobs": world.job_id, "launches": world.launch_id, "plans": PLAN}[table]
        getattr(world.testops, table)[ident][key] = value
    return change


BINDINGS = [
    # (rule, change to TestOps, code, field)
    ("job run of another GitHub run", _set("jobruns", "url",
                                           f"https://github.com/{REPOSITORY}/actions/runs/{RUN_ID + 1}"),
     "selection.job_run_binding", "jobrun.url"),
    ("job run already finished", _set("jobruns", "stage", "finished"), "selection.job_run_binding", "jobrun.stage"),
    ("job run without a launch", _set("jobruns", "launchId", None), "selection.job_run_binding", "jobrun.launchId"),
    ("job is not a GitHub job", _set("jobs", "type", "gitlab"), "selection.job_binding", "jobrun.job.type"),
    ("job of another workflow", _set("jobs", "url", f"https://github.com/{REPOSITORY}/actions/workflows/other.yml"),
     "selection.job_binding", "jobrun.job.url"),
    ("launch of another project", _set("launches", "projectId", 13), "selection.launch_binding",
     "launch.projectId"),
    ("launch closed", _set("launches", "closed", True), "selection.launch_binding", "launch.closed"),
    ("plan renamed", _set("plans", "name", "Another plan"), "selection.plan_binding", "testplan.name"),
    ("plan of another project", _set("plans", "projectId", 13), "selection.plan_binding", "testplan.projectId"),
]


@pytest.mark.parametrize(("rule", "change", "code", "field"), BINDINGS, ids=[b[0] for b in BINDINGS])
def test_each_binding_rule_refuses_with_its_own_code(world: World, rule: str, change: Callable[[World], None],
                                                     code: str, field: str) -> None:
    change(world)
    failure = refused(world.launched(), code, field)
    assert failure["expected"] != failure["actual"], rule
    assert not (world.tmp / "out" / "selection.json").exists()
    assert not (world.tmp / "state" / "select.json").exists()


@pytest.mark.parametrize(("key", "value"), [("url", f"https://github.com/{REPOSITORY}/actions/workflows/other.yml"),
                                            ("type", "gitlab")])
def test_the_jobs_own_record_must_be_this_workflows_github_job(world: World, monkeypatch: pytest.MonkeyPatch,
                                                                 key: str, value: str) -> None:
    # The job run's embedded view of its job agrees; GET /job/{id}, the job's own record, does not.
    original = world.testops._r_get_job

    def get_job(r: Any, job_id: int) -> tuple[int, Any]:
        status, body = original(r, job_id)
        return status, {**body, key: value}

    monkeypatch.setattr(world.testops, "_r_get_job", get_job)
    refused(world.launched(), "selection.job_binding", f"job.{key}")


def test_an_extra_accepted_job_url_comes_from_the_contract(world: World) -> None:
    legacy = f"https://github.com/{REPOSITORY}/blob/main/{WORKFLOW}"
    _set("jobs", "url", legacy)(world)
    refused(world.launched(), "selection.job_binding", "jobrun.job.url")
    world.rewrite_contract(lambda d: d["testops"].update({"job-urls": [legacy]}))
    run = world.launched()  # the refusal above wrote nothing, so the same paths are free
    assert run.exit_code == 0, run.summary


def test_the_plan_size_must_equal_the_contract(world: World) -> None:
    extra = world.testops.add_case(PROJECT, "Extra", "agents/protocol/extra", id=777)
    world.testops.plans[PLAN]["treeSelection"]["leafsInclude"].append(extra["id"])
    failure = refused(world.launched(), "selection.plan_binding", "testplan.testCasesCount")
    assert (failure["expected"], failure["actual"]) == (12, 13)


def test_the_contract_must_name_its_plan_id(world: World) -> None:
    world.rewrite_contract(lambda d: d["testops"]["plan"].pop("id"))
    refused(world.launched(), "selection.plan_binding", "/testops/plan/id")


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"id": 194, "selector": "agents/protocol/not-ours"}, "right id, wrong selector"),
        ({"id": 999, "selector": "agents/protocol/get-task-context"}, "right selector, wrong id"),
    ],
)
def test_a_foreign_planned_case_is_refused_in_both_directions(world: World, row: dict[str, Any], why: str) -> None:
    world.plan_rows([{"id": 196, "selector": "agents/protocol/list-open-issues"}, row])
    failure = refused(world.launched(), "selection.foreign_case", "plan/1")
    assert failure["actual"] == row, why
    assert failure["expected"] == {"id": 194, "selector": "agents/protocol/get-task-context"}


def test_a_case_planned_twice_and_an_empty_plan_are_refused(world: World) -> None:
    row = {"id": 194, "selector": "agents/protocol/get-task-context"}
    world.plan_rows([row, row])
    refused(world.launched(), "selection.duplicate_case", "plan/1")
    world.plan_rows([])
    refused(world.launched(), "selection.empty", "plan")


def test_a_missing_job_run_is_a_remote_failure(world: World) -> None:
    run = world.select({"job-run-id": "4242"})
    assert (run.exit_code, run.outputs.get("error-code")) == (4, "testops.http_404")
    no_secret(world, run)


# --- manual runs ---------------------------------------------------------------------------------------


def job_run_env(world: World, *, launch_id: int | None = None, extra: str = "") -> Path:
    path = world.tmp / "job-run.env"
    path.write_text(f"ALLURE_ENDPOINT={world.testops.url}\nALLURE_PROJECT_ID={PROJECT}\n"
                    f"ALLURE_JOB_RUN_ID={world.job_run_id}\nALLURE_LAUNCH_ID={launch_id or world.launch_id}\n"
                    f"ALLURE_TOKEN={SENTINEL}\n{extra}")
    return path


def test_a_manual_run_follows_the_contracts_standing_plan_all(world: World) -> None:
    world.plan_rows([])  # a manual run does not read the job run's plan
    run = world.select({"job-run-env": str(job_run_env(world))})
    assert run.exit_code == 0, run.summary
    assert (run.outputs["selected-count"], run.outputs["full-plan"]) == ("12", "true")
    assert "`standing-plan: all`, which selects every case" in run.summary
    assert not world.testops.requests("GET", f"/jobrun/{world.job_run_id}/plan")
    no_secret(world, run)


def test_a_manual_bootstrap_policy_selects_only_the_bootstrap_case(world: World) -> None:
    world.rewrite_contract(lambda d: d["testops"].update({"standing-plan": "bootstrap"}))
    run = world.select({"job-run-env": str(job_run_env(world))})
    assert run.exit_code == 0, run.summary
    assert (run.outputs["selected-count"], run.outputs["native-count"]) == ("1", "1")
    assert json.loads(run.outputs["native-matrix"])["include"][0]["key"] == "get-task-context"
    assert "selects only the bootstrap case `get-task-context`" in run.summary
    assert "**not** the full plan" in run.summary


def test_a_manual_plan_file_policy_needs_the_file_and_then_uses_it(world: World) -> None:
    world.rewrite_contract(lambda d: d["testops"].update({"standing-plan": "plan-file"}))
    refused(world.select({"job-run-env": str(job_run_env(world))}), "input.standing-plan", exit_code=2)
    plan = world.tmp / "testplan.json"
    plan.write_text(plan_json([{"id": "201", "selector": "agents/protocol/budget-stop"}]))
    run = world.select({"job-run-env": str(job_run_env(world)), "standing-plan": str(plan)})
    assert run.exit_code == 0 and run.outputs["selected-count"] == "1"


def test_a_standing_plan_file_cannot_narrow_an_all_policy(world: World) -> None:
    plan = world.tmp / "testplan.json"
    plan.write_text(plan_json([{"id": "201", "selector": "agents/protocol/budget-stop"}]))
    run = world.select({"job-run-env": str(job_run_env(world)), "standing-plan": str(plan)})
    refused(run, "selection.standing_plan", "standing-plan", exit_code=2)


def test_a_manual_run_binds_the_launch_of_its_job_run_env(world: World) -> None:
    other = world.testops.add_launch(PROJECT, "another launch")
    failure = refused(world.select({"job-run-env": str(job_run_env(world, launch_id=other["id"]))}),
                      "selection.launch_binding", "jobrun.launchId")
    assert (failure["expected"], failure["actual"]) == (other["id"], world.launch_id)


def test_a_manual_job_run_env_must_agree_with_the_inputs(world: World) -> None:
    env_file = str(job_run_env(world))
    refused(world.select({"job-run-env": env_file, "job-run-id": str(world.job_run_id + 5)}), "selection.mode",
            "job-run-id", exit_code=2)
    broken = world.tmp / "broken.env"
    broken.write_text(f"ALLURE_JOB_RUN_ID={world.job_run_id}\n")
    refused(world.select({"job-run-env": str(broken)}), "selection.job_run_env", "ALLURE_LAUNCH_ID", exit_code=2)
    foreign = world.tmp / "foreign.env"
    foreign.write_text(f"ALLURE_PROJECT_ID=99\nALLURE_JOB_RUN_ID={world.job_run_id}\nALLURE_LAUNCH_ID=5\n")
    refused(world.select({"job-run-env": str(foreign)}), "selection.job_run_env", "ALLURE_PROJECT_ID", exit_code=2)


def test_cases_narrow_a_launched_job_runs_plan_explicitly(world: World) -> None:
    run = world.launched(INPUT_CASES="budget-stop, hire-agent-approval")
    assert run.exit_code == 0, run.summary
    document = json.loads(Path(run.outputs["selection-path"]).read_bytes())
    assert document["source"] == "cases" and document["testops"]["job-run-id"] == world.job_run_id
    assert [row["key"] for row in document["cases"]] == ["budget-stop", "hire-agent-approval"]
    assert "explicitly narrows these 12 to 2" in run.summary
    world.plan_rows([{"id": 201, "selector": "agents/protocol/budget-stop"}])
    run = world.select({"job-run-id": str(world.job_run_id), "cases": "hire-agent-approval",
                        "selection-path": str(world.tmp / "second.json"), "state-dir": str(world.tmp / "s2")})
    refused(run, "selection.not_planned", "cases")


# --- the job's uid (issue 13): the one TestOps knows, or nothing ------------------------------------------------


def test_a_job_testops_knows_under_no_uid_of_this_workflow_is_refused(world: World) -> None:
    """/upload/stop finds the job run by the job's uid: select refuses before anything when TestOps lists the
    bound job under none of the uids this workflow's uploaders use."""
    world.testops.jobs[world.job_id]["externalId"] = "someone/else_Other"
    run = world.launched()
    failure = refused(run, "selection.job_binding", "job.externalId")
    assert "ALLURE_JOB_UID" in run.summary and failure["expected"] == f"job {world.job_id}"
    assert world.testops.mutations() == []


@pytest.mark.parametrize("uid", ["acme/agents/actions/workflows/161335/1", "acme/agents/actions/workflows/161335",
                                 "acme/agents_agent-evals.yml"])
def test_the_uids_other_uploaders_create_jobs_under_are_found(world: World, uid: str) -> None:
    """setup-allurectl (with and without the run attempt) and this action's 0.1 name jobs otherwise."""
    world.testops.jobs[world.job_id]["externalId"] = uid
    run = world.launched()
    assert run.exit_code == 0, run.summary
    assert json.loads(Path(run.outputs["selection-path"]).read_bytes())["testops"]["job-uid"] == uid


def test_allure_job_uid_names_the_job_outright(world: World) -> None:
    world.testops.jobs[world.job_id]["externalId"] = "custom-uid"
    run = world.launched(ALLURE_JOB_UID="custom-uid")
    assert run.exit_code == 0, run.summary
    assert [e.param("externalId") for e in world.testops.requests("GET", "/job")] == ["custom-uid"]


def test_the_job_runs_own_uid_is_kept(world: World) -> None:
    world.testops.jobruns[world.job_run_id]["uid"] = "run-uid-from-testops"
    run = world.launched()
    assert run.exit_code == 0, run.summary
    testops = json.loads(Path(run.outputs["selection-path"]).read_bytes())["testops"]
    assert testops["job-run-uid"] == "run-uid-from-testops"
