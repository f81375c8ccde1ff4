"""``bootstrap``: make TestOps hold the contract's test cases and test plan, idempotently.

Everything is read and compared first (testops/register.py, testops/bootstrap.py), conflicts refuse before
anything changes, then each change is once-marked, sent once, and recorded. ``dry-run`` stops after the comparison.
A second run against an unchanged TestOps makes no POST or PATCH at all.
"""

from __future__ import annotations

from typing import Any

from testops_evidence import summary
from testops_evidence.errors import EXIT_OK, Refusal
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.testops import register
from testops_evidence.testops.bootstrap import CaseChange, PlanChange
from testops_evidence.testops.client import testops_config

RECEIPT_SCHEMA = "testops-evidence/bootstrap-receipt/v1"


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    config = testops_config(contract, ctx.mode)
    dry_run = ctx.settings.boolean("dry-run")
    with ctx.testops_client() as client:
        # The inputs and token are checked (no request yet); before the token is used, even for a dry run's
        # reads, the run must be one the policy admits.
        ctx.readmit()
        project_id = client.project_id
        assert project_id is not None
        with ctx.runtime.group(f"bootstrap: reading {len(contract.cases)} test cases and the plan from TestOps"):
            case_changes = register.compare_cases(client, contract.cases, project_id)
            plan_change = register.compare_plan(client, project_id, config.plan_id, config.plan_name,
                                                [c.testops_id for c in contract.cases if c.testops_id is not None])
            ctx.runtime.log(f"{sum(c.changed for c in case_changes)} of {len(case_changes)} test cases differ; "
                            f"plan: {_plan_action(plan_change, dry_run=True)}")
        sync: dict[str, Any] = {"plan-sync": None, "test-cases": plan_change.count}  # a dry run never syncs
        if dry_run:
            plan_id = plan_change.plan_id
            updated = [c.key for c in case_changes if c.changed]
        else:
            with ctx.runtime.group("bootstrap: applying the changes"):
                updated = register.apply_cases(client, ctx.state, case_changes, ctx.runtime.log)
                plan_id, sync = register.apply_plan(client, ctx.state, project_id, plan_change, ctx.runtime.log,
                                                    lambda text: ctx.runtime.annotate("warning", text,
                                                                                      title="bootstrap"))
        requests = client.request_count

    receipt = {
        "schema": RECEIPT_SCHEMA,
        "campaign": contract.campaign,
        "contract-sha256": contract.digest,
        "endpoint": client.endpoint,
        "project-id": project_id,
        "dry-run": dry_run,
        "plan": {"id": plan_id, "name": plan_change.name, "action": _plan_action(plan_change, dry_run),
                 "case-ids": list(plan_change.case_ids), **sync},
        "cases": [{"key": c.key, "testops-id": c.case_id, "action": _case_action(c, dry_run),
                   "fields": sorted(c.patch)} for c in case_changes],
        "created-cases": [],
        "updated-cases": updated,
        "requests": requests,
    }
    _write_fresh_receipt(ctx, "bootstrap-dry-run" if dry_run else "bootstrap", receipt)
    outputs: dict[str, Any] = {"created-cases": [], "updated-cases": updated,
                               "plan-id": "" if plan_id is None else plan_id}
    return PhaseResult(headline=_headline(case_changes, plan_change, plan_id, dry_run), outputs=outputs,
                       summary=_summary(case_changes, plan_change, plan_id, dry_run, requests), exit_code=EXIT_OK)


# --- receipts ----------------------------------------------------------------------------------------------


def _write_fresh_receipt(ctx: PhaseContext, base: str, receipt: dict[str, Any]) -> None:
    """Receipts are write-once; a re-run in the same state directory gets the next free name."""
    for n in range(1, 1000):
        name = f"{base}.json" if n == 1 else f"{base}-{n}.json"
        if not ctx.state.has(name):
            ctx.state.write_receipt(name, receipt)
            return
    raise Refusal("io.exists", f"too many {base} receipts in the state directory", field="state-dir",
                  expected="fewer than 1000 receipts", actual=base)


# --- reporting ---------------------------------------------------------------------------------------------


def _case_action(change: CaseChange, dry_run: bool) -> str:
    if not change.changed:
        return "unchanged"
    return "would update" if dry_run else "updated"


def _plan_action(change: PlanChange, dry_run: bool) -> str:
    if change.create:
        return "would create" if dry_run else "created"
    if change.patch:
        return "would update" if dry_run else "updated"
    return "unchanged"


def _headline(cases: list[CaseChange], plan: PlanChange, plan_id: int | None, dry_run: bool) -> str:
    changed = sum(c.changed for c in cases)
    plan_text = f"plan {plan_id}" if plan_id is not None else f"plan {summary.code(plan.name)}"
    if dry_run:
        return (f"🔎 Dry run: bootstrap would update {changed} of {len(cases)} test cases and "
                f"{_plan_action(plan, True).replace('would ', '')} {plan_text}; nothing was changed.")
    if not changed and not plan.changed:
        return f"✅ TestOps already matches the contract: {len(cases)} test cases and {plan_text}; nothing changed."
    return (f"✅ TestOps now matches the contract: {changed} of {len(cases)} test cases updated, "
            f"{plan_text} {_plan_action(plan, False)}.")


def _summary(cases: list[CaseChange], plan: PlanChange, plan_id: int | None, dry_run: bool, requests: int) -> str:
    rows: list[tuple[Any, ...]] = []
    for change in cases:
        action = _case_action(change, dry_run)
        if not change.patch:
            rows.append((summary.code(change.key), change.case_id, "—", "—", "—", action))
        for name, value in sorted(change.patch.items()):
            rows.append((summary.code(change.key), change.case_id, summary.code(name), change.before.get(name), value,
                         action))
    plan_rows: list[tuple[Any, ...]] = [
        ("id", plan.plan_id, plan_id),
        ("name", plan.before_name, plan.name),
        ("test cases", _ids(plan.before_case_ids), _ids(plan.case_ids)),
    ]
    parts = [
        "### Test cases\n",
        summary.table(("case", "TestOps id", "field", "in TestOps", "in the contract", "action"), rows),
        f"\n### Test plan — {_plan_action(plan, dry_run)}\n",
        summary.table(("", "in TestOps", "in the contract"), plan_rows),
        f"\n{requests} requests to TestOps." + (" Dry run: no POST or PATCH was sent." if dry_run else ""),
        "\nTest cases are never created by bootstrap: each contract case names its TestOps id.\n",
    ]
    return "\n".join(parts)


def _ids(ids: tuple[int, ...] | None) -> str:
    if ids is None:
        return "—"
    if len(ids) > 20:
        return f"{len(ids)} cases: {', '.join(map(str, ids[:20]))}, ..."
    return ", ".join(map(str, ids)) or "(none)"
