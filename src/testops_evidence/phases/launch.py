"""``launch``: run the contract's test plan in TestOps once (``POST /testplan/{id}/run``).

TestOps then creates the launch and its job runs, and dispatches the workflow with ``ALLURE_JOB_RUN_ID``.
The call is once-marked (stage ``launch``): a second launch phase in the same run refuses
``once.already_started``, and an uncertain outcome is resolved by ``reconcile``, which looks for the
launch by its name.
"""

from __future__ import annotations

from testops_evidence import summary
from testops_evidence.errors import Refusal
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.testops.client import (
    TestOpsClient,
    expect_mutation_id,
    expect_mutation_object,
    testops_config,
)
from testops_evidence.testops.observe import marker_detail
from testops_evidence.testops.plans import fetch_plan, plans_named

RECEIPT_SCHEMA = "testops-evidence/launch-receipt/v1"
STAGE = "launch"
NAME_LIMIT = 255  # TestOps refuses longer launch names (allure-framework/allure3#889)


def launch_name(ctx: PhaseContext) -> str:
    name = ctx.settings.string("launch-name")
    if name is None:
        number = ctx.env.get("GITHUB_RUN_NUMBER", "").strip()
        if not number.isdigit():
            raise Refusal("input.launch-name", "launch needs a launch-name outside GitHub Actions (there is no "
                          "GITHUB_RUN_NUMBER to name it after)", field="launch-name",
                          expected="a launch name", actual=None)
        name = f"{ctx.contract().campaign} #{number}"
    if len(name) > NAME_LIMIT or any(ord(c) < 32 for c in name):
        raise Refusal("input.launch-name", f"the launch name must be one line of at most {NAME_LIMIT} characters",
                      field="launch-name", expected=f"<= {NAME_LIMIT} printable characters", actual=name[:80])
    return name


def resolve_plan(client: TestOpsClient, plan_id: int | None, plan_name: str) -> int:
    """The contract's plan id, checked to exist in the project (found by name when the contract has no id)."""
    project_id = client.project_id
    assert project_id is not None
    if plan_id is None:
        ids = plans_named(client, project_id, plan_name)
        if len(ids) != 1:
            code = "bootstrap.plan_conflict" if ids else "bootstrap.plan_missing"
            raise Refusal(code, f"{len(ids)} test plans in project {project_id} are named {plan_name!r}",
                          field="testops.plan.name", expected="exactly one plan", actual=ids,
                          hint="Run `mode: bootstrap`, then put the plan id into the contract.")
        plan_id = ids[0]
    plan = fetch_plan(client, plan_id, hint="Run `mode: bootstrap` first.")
    if plan.get("projectId") != project_id:
        raise Refusal("bootstrap.plan_conflict", f"test plan {plan_id} belongs to project {plan.get('projectId')}",
                      field="testops.plan.id", expected=f"a plan of project {project_id}",
                      actual=f"project {plan.get('projectId')}")
    return plan_id


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    config = testops_config(contract, ctx.mode)
    name = launch_name(ctx)
    with TestOpsClient.from_context(ctx) as client:
        plan_id = resolve_plan(client, config.plan_id, config.plan_name)
        path = f"/testplan/{plan_id}/run"
        body = {"name": name}
        ctx.state.once(STAGE, marker_detail(client, "launch", {"method": "POST", "path": path, "json": body},
                                            plan_id=plan_id, name=name, started_at=int(ctx.clock())))
        answer = expect_mutation_object(client.post(path, body), f"the answer to POST {path}", ("id",))
        launch_id = expect_mutation_id(answer["id"], "the launch id")
        url = client.web_url("launch", launch_id)
        ctx.state.done(STAGE, {"launch-id": launch_id, "launch-url": url, "plan-id": plan_id, "name": name})
        ctx.runtime.log(f"TestOps launch {launch_id} ({name!r}) runs plan {plan_id}: {url}")
        ctx.state.write_receipt("launch.json", {
            "schema": RECEIPT_SCHEMA, "campaign": contract.campaign, "contract-sha256": contract.digest,
            "endpoint": client.endpoint, "project-id": client.project_id, "plan-id": plan_id,
            "launch-id": launch_id, "launch-url": url, "name": name,
        })
    table = summary.table(("", ""), [("launch", summary.link(f"{name} (#{launch_id})", url)),
                                     ("plan", plan_id), ("project", client.project_id)])
    return PhaseResult(headline=f"🚀 TestOps launch **{summary.text(name)}** started from plan {plan_id}.",
                       outputs={"launch-id": launch_id, "launch-url": url},
                       summary=table + "\nTestOps now runs the plan's jobs; their runs bind to this launch.\n")
