"""Running the campaign's test plan (``launch``): find the plan in the project, then run it once.

TestOps creates the launch and a job run per job of the plan, and dispatches the jobs' workflows with
``ALLURE_JOB_RUN_ID``. The run is once-marked (stage ``launch``); ``reconcile`` looks for the launch by
its name when the outcome is uncertain.
"""

from __future__ import annotations

from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.testops import api
from testops_evidence.testops.client import TestOpsClient
from testops_evidence.testops.stages import Marks, Stages

STAGE = "launch"


def resolve_plan(client: TestOpsClient, plan_id: int | None, plan_name: str) -> int:
    """The contract's plan id, checked to exist in the project (found by name when the contract has no id)."""
    project_id = client.project_id
    assert project_id is not None
    if plan_id is None:
        ids = api.plans_named(client, project_id, plan_name)
        if len(ids) != 1:
            code = "bootstrap.plan_conflict" if ids else "bootstrap.plan_missing"
            raise Refusal(code, f"{len(ids)} test plans in project {project_id} are named {plan_name!r}",
                          field="testops.plan.name", expected="exactly one plan", actual=ids,
                          hint="Run `mode: bootstrap`, then put the plan id into the contract.")
        plan_id = ids[0]
    plan = api.fetch_plan(client, plan_id, hint="Run `mode: bootstrap` first.")
    if plan.get("projectId") != project_id:
        raise Refusal("bootstrap.plan_conflict", f"test plan {plan_id} belongs to project {plan.get('projectId')}",
                      field="testops.plan.id", expected=f"a plan of project {project_id}",
                      actual=f"project {plan.get('projectId')}")
    return plan_id


def sync(client: TestOpsClient, plan_id: int) -> dict[str, Any]:
    """Sync the plan so that a count or a run sees its current cases; what the server showed it supports."""
    synced = api.sync_plan(client, plan_id)
    if synced is None:
        return {"plan-sync": False, "detected-from": "the plan sync answered 404 for an existing plan"}
    count = synced.get("testCasesCount")
    return {"plan-sync": True, "test-cases": count if isinstance(count, int) and not isinstance(count, bool) else None}


def run_plan(client: TestOpsClient, marks: Marks, plan_id: int, name: str,
             started_at: int) -> tuple[int, dict[str, Any]]:
    """Sync the plan, then run it once under the launch name (an independent client syncs before every run,
    so that the run takes the plan's current cases); the launch's id and what the server supports.

    The run's once-marker comes first, so a second launch in the same state directory refuses before it
    sends anything, the sync included."""
    stages = Stages(marks, client)
    request = api.plan_run(plan_id, name)
    stages.mark(STAGE, "launch", request, {"plan-id": plan_id, "name": name, "started-at": started_at})
    capabilities = sync(client, plan_id)
    launch_id = api.plan_started(stages.call(STAGE, request), request)
    stages.done(STAGE, {"launch-id": launch_id, "launch-url": client.web_url("launch", launch_id), "plan-id": plan_id,
                        "name": name, **capabilities})
    return launch_id, capabilities
