"""Finding the campaign's test plan in TestOps (shared by bootstrap, launch and reconcile)."""

from __future__ import annotations

from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.testops.client import TestOpsClient, expect_object

LIST_PAGE = 500


def plans_named(client: TestOpsClient, project_id: int, name: str) -> list[int]:
    """Ids of the project's test plans with exactly this name (a listing may repeat an item)."""
    ids = {item.get("id") for item in client.pages("/testplan", {"projectId": project_id}, page_size=LIST_PAGE)
           if item.get("name") == name}
    return sorted(i for i in ids if isinstance(i, int) and not isinstance(i, bool))


def fetch_plan(client: TestOpsClient, plan_id: int, *, hint: str | None = None) -> dict[str, Any]:
    """The plan by id, or ``bootstrap.plan_missing``."""
    plan = client.get_optional(f"/testplan/{plan_id}")
    if plan is None:
        raise Refusal("bootstrap.plan_missing", f"TestOps has no test plan {plan_id}", field="testops.plan.id",
                      expected="an existing test plan", actual=plan_id, hint=hint)
    return expect_object(plan, f"test plan {plan_id}", ("id",))
