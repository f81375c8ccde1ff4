"""Bootstrap's reads and changes: compare TestOps with the contract's cases and plan, then make only the
needed changes, each once-marked (stages ``bootstrap-case-<id>``, ``bootstrap-plan-create``,
``bootstrap-plan-<id>``). The comparison itself is pure (``testops/bootstrap.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from testops_evidence.contract import Case
from testops_evidence.errors import Refusal
from testops_evidence.testops import api
from testops_evidence.testops.bootstrap import CaseChange, PlanChange, diff_cases, diff_plan, full_name_index
from testops_evidence.testops.client import TestOpsClient
from testops_evidence.testops.stages import Marks, Stages

Log = Callable[[str], None]


def compare_cases(client: TestOpsClient, cases: Sequence[Case], project_id: int) -> list[CaseChange]:
    """Every contract case against its TestOps test case (conflicts and missing cases refuse here)."""
    listing = list(api.search_cases(client, project_id))
    by_id: dict[int, dict[str, Any]] = {}
    for item in listing:
        if isinstance(item.get("id"), int):
            by_id[item["id"]] = item
    remote_by_id: dict[int, dict[str, Any] | None] = {}
    for case in cases:
        assert case.testops_id is not None
        listed = by_id.get(case.testops_id)
        if listed is None or "fullName" not in listed or "name" not in listed:
            # Not listed (deleted, another project, missing) or listed without the fields we compare.
            listed = api.get_case(client, case.testops_id)
        remote_by_id[case.testops_id] = listed
    index = full_name_index([*listing, *(v for v in remote_by_id.values() if v is not None)], project_id)
    return diff_cases(cases, project_id, remote_by_id, index)


def compare_plan(client: TestOpsClient, project_id: int, plan_id: int | None, name: str,
                 case_ids: list[int]) -> PlanChange:
    """The contract's plan (by id, or the one plan of its name) against the contract."""
    if plan_id is None:
        ids = api.plans_named(client, project_id, name)
        if len(ids) > 1:
            raise Refusal("bootstrap.plan_conflict", f"{len(ids)} test plans in project {project_id} are named "
                          f"{name!r}", field="testops.plan.name", expected="at most one plan of that name",
                          actual=ids, hint="Put the right one's id into the contract's `testops.plan.id`.")
        if not ids:
            return diff_plan(None, name, case_ids, project_id)
        plan_id = ids[0]
    return diff_plan(api.fetch_plan(client, plan_id), name, case_ids, project_id)


def apply_cases(client: TestOpsClient, marks: Marks, changes: list[CaseChange], log: Log) -> list[str]:
    """Send each case change once; the keys of the cases updated."""
    stages = Stages(marks, client)
    updated = []
    for change in changes:
        if not change.changed:
            continue
        stage = f"bootstrap-case-{change.case_id}"
        patch = dict(change.patch)
        request = api.case_update(change.case_id, patch)
        answer = stages.send(stage, "case-update", request, facts={"case-id": change.case_id, "key": change.key,
                                                                   "before": dict(change.before), "after": patch})
        answer = api.case_updated(answer, request)
        stages.done(stage, {"case-id": change.case_id, "key": change.key, "fields": sorted(patch),
                            "name": answer.get("name")})
        log(f"updated test case {change.case_id} ({change.key}): {', '.join(sorted(patch))}")
        updated.append(change.key)
    return updated


def apply_plan(client: TestOpsClient, marks: Marks, project_id: int, change: PlanChange, log: Log,
               warn: Log) -> tuple[int, dict[str, Any]]:
    """Create or correct the plan once, then make sure its case count is current; its id, and whether the
    plan was synced (the server's answer says whether it can be)."""
    stages = Stages(marks, client)
    wanted = len(change.case_ids)
    if change.create:
        request = api.plan_create(change.create_body(project_id))
        stage = "bootstrap-plan-create"
        answer = stages.send(stage, "plan-create", request,
                             facts={"name": change.name, "case-ids": list(change.case_ids)})
        new_id, body = api.plan_created(answer)
        stages.done(stage, {"plan-id": new_id, "name": change.name})
        log(f"created test plan {new_id} ({change.name!r}) with {wanted} test cases")
        return new_id, _current_count(client, new_id, body.get("testCasesCount"), wanted, log, warn)
    plan_id = change.plan_id
    assert plan_id is not None
    count = change.count
    if change.patch:
        stage = f"bootstrap-plan-{plan_id}"
        patch = dict(change.patch)
        request = api.plan_update(plan_id, patch)
        answer = stages.send(stage, "plan-update", request,
                             facts={"plan-id": plan_id, "name": change.name, "case-ids": list(change.case_ids),
                                    "before-name": change.before_name,
                                    "before-case-ids": list(change.before_case_ids or ())})
        body = api.plan_updated(answer, request)
        stages.done(stage, {"plan-id": plan_id, "fields": sorted(patch)})
        log(f"updated test plan {plan_id}: {', '.join(sorted(patch))}")
        count = body.get("testCasesCount")
    return plan_id, _current_count(client, plan_id, count, wanted, log, warn)


def _current_count(client: TestOpsClient, plan_id: int, count: Any, wanted: int, log: Log,
                   warn: Log) -> dict[str, Any]:
    """A plan whose count differs from the contract's may only be stale: sync it (a sync only recomputes the
    plan, so it needs no once-marker) and take the fresh count. A plan that already counts right is left
    alone, so a second bootstrap against an unchanged TestOps still sends nothing."""
    if isinstance(count, int) and not isinstance(count, bool) and count == wanted:
        return {"plan-sync": None, "test-cases": count}
    synced = api.sync_plan(client, plan_id)
    if synced is None:
        info: dict[str, Any] = {"plan-sync": False, "test-cases": count,
                                "detected-from": "the plan sync answered 404 for an existing plan"}
    else:
        fresh = synced.get("testCasesCount")
        info = {"plan-sync": True, "test-cases": fresh}
        log(f"synced test plan {plan_id}: {fresh} test cases (it reported {count})")
        count = fresh
    if isinstance(count, int) and count != wanted:
        # Not a refusal here: some TestOps versions recount plans asynchronously. `select` binds the
        # plan's size (selection.plan_binding), so a lasting difference still fails closed there.
        warn(f"test plan {plan_id} reports {count} test cases; the contract has {wanted}")
    return info
