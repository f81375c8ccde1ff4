"""``launch``: run the contract's test plan in TestOps once (testops/plans.py).

TestOps then creates the launch and its job runs, and dispatches the workflow with ``ALLURE_JOB_RUN_ID``.
The run is once-marked (stage ``launch``): a second launch phase in the same run refuses
``once.already_started``, and an uncertain outcome is resolved by ``reconcile``, which looks for the
launch by its name.
"""

from __future__ import annotations

from testops_evidence import summary
from testops_evidence.errors import Refusal
from testops_evidence.readers.integers import ascii_int
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.testops.client import testops_config
from testops_evidence.testops.plans import resolve_plan, run_plan

RECEIPT_SCHEMA = "testops-evidence/launch-receipt/v1"
NAME_LIMIT = 255  # TestOps refuses longer launch names (allure-framework/allure3#889)


def launch_name(ctx: PhaseContext) -> str:
    name = ctx.settings.string("launch-name")
    if name is None:
        number = ctx.env.get("GITHUB_RUN_NUMBER", "").strip()
        if ascii_int(number, minimum=1) is None:
            raise Refusal("input.launch-name", "launch needs a launch-name outside GitHub Actions (there is no "
                          "GITHUB_RUN_NUMBER to name it after)", field="launch-name",
                          expected="a launch name", actual=None)
        name = f"{ctx.contract().campaign} #{number}"
    if len(name) > NAME_LIMIT or any(ord(c) < 32 for c in name):
        raise Refusal("input.launch-name", f"the launch name must be one line of at most {NAME_LIMIT} characters",
                      field="launch-name", expected=f"<= {NAME_LIMIT} printable characters", actual=name[:80])
    return name


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    config = testops_config(contract, ctx.mode)
    name = launch_name(ctx)
    with ctx.testops_client() as client:
        ctx.readmit()  # inputs and token checked, nothing sent yet: the run must be one the policy admits
        plan_id = resolve_plan(client, config.plan_id, config.plan_name)
        launch_id, capabilities = run_plan(client, ctx.state, plan_id, name, int(ctx.clock()))
        url = client.web_url("launch", launch_id)
        ctx.runtime.log(f"TestOps launch {launch_id} ({name!r}) runs plan {plan_id}: {url}")
        ctx.state.write_receipt("launch.json", {
            "schema": RECEIPT_SCHEMA, "campaign": contract.campaign, "contract-sha256": contract.digest,
            "endpoint": client.endpoint, "project-id": client.project_id, "plan-id": plan_id,
            "launch-id": launch_id, "launch-url": url, "name": name, "capabilities": capabilities,
        })
    synced = (f"synced first: {capabilities.get('test-cases')} test cases" if capabilities["plan-sync"] else
              "not synced: this TestOps has no plan sync")
    table = summary.table(("", ""), [("launch", summary.link(f"{name} (#{launch_id})", url)),
                                     ("plan", f"{plan_id} ({synced})"), ("project", client.project_id)])
    return PhaseResult(headline=f"🚀 TestOps launch **{summary.text(name)}** started from plan {plan_id}.",
                       outputs={"launch-id": launch_id, "launch-url": url},
                       summary=table + "\nTestOps now runs the plan's jobs; their runs bind to this launch.\n")
