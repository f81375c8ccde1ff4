"""The difference between the contract and TestOps, as pure functions (no I/O): what bootstrap would
change, and the refusals for what it must not change.

Decisions (docs/testops.md, "bootstrap"):

* With a ``testops`` section the schema requires every case to carry its ``testops-id``, so bootstrap
  never *creates* test cases: an id that names no live case in the project is ``bootstrap.case_missing``
  (a new case would get another id, and the contract would still be wrong).
* A case whose id exists but whose ``fullName`` differs is ``bootstrap.case_conflict``: the selector is
  what binds results to the case, and silently rewriting it could re-target another test. An *empty*
  ``fullName`` (a case made by hand) is filled in, unless another case already uses that full name.
* A title (``name``) that drifted is updated.
* The plan must hold exactly the contract's cases: its ``treeSelection`` becomes ``leafsInclude`` = the
  contract's ids with nothing excluded, no groups, not inverted. A plan that also selects by an AQL query
  (``baseRql``) is refused: no source shows the API clearing one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.contract import Case
from testops_evidence.errors import Refusal


@dataclass(frozen=True)
class CaseChange:
    """One contract case against its TestOps test case: the fields to PATCH (empty: nothing to do)."""

    key: str
    case_id: int
    before: Mapping[str, Any]
    patch: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.patch)


@dataclass(frozen=True)
class PlanChange:
    """The plan against the contract. ``plan_id`` is None when the plan must be created."""

    plan_id: int | None
    name: str
    case_ids: tuple[int, ...]
    before_name: str | None = None
    before_case_ids: tuple[int, ...] | None = None
    patch: Mapping[str, Any] = field(default_factory=dict)
    count: int | None = None  # testCasesCount as TestOps reported it

    @property
    def create(self) -> bool:
        return self.plan_id is None

    @property
    def changed(self) -> bool:
        return self.create or bool(self.patch)

    def create_body(self, project_id: int) -> dict[str, Any]:
        return {"projectId": project_id, "name": self.name, "treeSelection": exact_selection(self.case_ids)}


def exact_selection(case_ids: Iterable[int]) -> dict[str, Any]:
    """A tree selection holding exactly these test cases."""
    return {"leafsInclude": sorted(set(case_ids)), "leafsExclude": [], "groupsInclude": [], "groupsExclude": [],
            "inverted": False}


def _live(remote: Mapping[str, Any] | None) -> bool:
    return remote is not None and not remote.get("deleted", False)


def diff_cases(cases: Sequence[Case], project_id: int, remote_by_id: Mapping[int, Mapping[str, Any] | None],
               ids_by_full_name: Mapping[str, Sequence[int]]) -> list[CaseChange]:
    """Compare every contract case with TestOps; refuse conflicts and missing cases before any change.

    ``remote_by_id`` maps each contract id to its TestOps case (``None``: 404). ``ids_by_full_name`` maps
    full names to the ids of the project's live cases that carry them.
    """
    changes = []
    for case in cases:
        case_id = case.testops_id
        if case_id is None:  # the schema forbids it with a testops section; guard anyway
            raise Refusal("bootstrap.case_missing", f"case {case.key!r} has no testops-id", field=f"{case.key}.testops-id",
                          expected="a TestOps test case id", actual=None)
        remote = remote_by_id.get(case_id)
        if remote is None:
            raise Refusal("bootstrap.case_missing", f"TestOps has no test case {case_id} (contract case "
                          f"{case.key!r})", field=f"{case.key}.testops-id", expected="an existing test case",
                          actual=f"{case_id}: not found")
        if remote.get("projectId") not in (None, project_id):
            raise Refusal("bootstrap.case_conflict", f"test case {case_id} (contract case {case.key!r}) belongs to "
                          f"project {remote.get('projectId')}, not {project_id}", field=f"{case.key}.testops-id",
                          expected=f"a case of project {project_id}", actual=f"project {remote.get('projectId')}")
        if not _live(remote):
            raise Refusal("bootstrap.case_missing", f"test case {case_id} (contract case {case.key!r}) is deleted "
                          "in TestOps", field=f"{case.key}.testops-id", expected="a live test case",
                          actual=f"{case_id}: deleted")
        others = sorted(i for i in ids_by_full_name.get(case.full_name, ()) if i != case_id)
        if others:
            raise Refusal("bootstrap.case_conflict", f"the full name {case.full_name!r} of contract case {case.key!r} "
                          f"is already used by test case {', '.join(map(str, others))}",
                          field=f"{case.key}.full-name", expected=f"used only by test case {case_id}",
                          actual=f"also test case {', '.join(map(str, others))}")
        remote_full = remote.get("fullName")
        patch: dict[str, Any] = {}
        if remote_full in (None, ""):
            patch["fullName"] = case.full_name
        elif remote_full != case.full_name:
            raise Refusal("bootstrap.case_conflict", f"test case {case_id} has another full name than contract case "
                          f"{case.key!r}", field=f"{case.key}.full-name", expected=case.full_name,
                          actual=remote_full)
        if remote.get("name") != case.title:
            patch["name"] = case.title
        before = {"name": remote.get("name"), "fullName": remote_full}
        changes.append(CaseChange(case.key, case_id, before, patch))
    return changes


def diff_plan(plan: Mapping[str, Any] | None, name: str, case_ids: Sequence[int], project_id: int) -> PlanChange:
    """Compare the TestOps plan (``None``: to be created) with the contract's plan name and cases."""
    wanted = tuple(sorted(set(case_ids)))
    if plan is None:
        return PlanChange(None, name, wanted)
    plan_id = plan.get("id")
    if plan.get("projectId") != project_id:
        raise Refusal("bootstrap.plan_conflict", f"test plan {plan_id} belongs to project {plan.get('projectId')}, "
                      f"not {project_id}", field="testops.plan.id", expected=f"a plan of project {project_id}",
                      actual=f"project {plan.get('projectId')}")
    raw_selection = plan.get("treeSelection")
    selection: Mapping[str, Any] = raw_selection if isinstance(raw_selection, dict) else {}
    raw_leafs = selection.get("leafsInclude")
    leafs: list[Any] = raw_leafs if isinstance(raw_leafs, list) else []
    current = tuple(sorted({x for x in leafs if isinstance(x, int) and not isinstance(x, bool)}))
    if plan.get("baseRql"):
        # The plan adds the cases an AQL query selects. TestOps documents baseRql as a string and no source
        # shows that PATCHing it to null (or "") clears it: refused before any change, never guessed.
        raise Refusal("bootstrap.plan_conflict", f"test plan {plan_id} selects its cases by an AQL query as well "
                      "(baseRql), which bootstrap cannot be sure to clear through the API", field="testops.plan.id",
                      expected="a plan without an AQL query", actual=_short(str(plan.get("baseRql"))),
                      hint="Remove the plan's query in TestOps, or give the contract a new plan name and no plan id "
                           "so that bootstrap creates a plan of its own; then run bootstrap again.")
    exact = (current == wanted and not selection.get("leafsExclude") and not selection.get("groupsInclude")
             and not selection.get("groupsExclude") and not selection.get("inverted"))
    patch: dict[str, Any] = {}
    if plan.get("name") != name:
        patch["name"] = name
    if not exact:
        patch["treeSelection"] = exact_selection(wanted)
    count = plan.get("testCasesCount")
    return PlanChange(int(plan_id) if isinstance(plan_id, int) else None, name, wanted,
                      before_name=plan.get("name"), before_case_ids=current, patch=patch,
                      count=count if isinstance(count, int) else None)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def full_name_index(remote_cases: Iterable[Mapping[str, Any]], project_id: int) -> dict[str, list[int]]:
    """Live cases of the project by full name (a listing may repeat an item: ids are deduplicated)."""
    index: dict[str, set[int]] = {}
    for item in remote_cases:
        full = item.get("fullName")
        ident = item.get("id")
        if (not isinstance(full, str) or not full or not isinstance(ident, int) or item.get("deleted")
                or item.get("projectId") not in (None, project_id)):
            continue
        index.setdefault(full, set()).add(ident)
    return {k: sorted(v) for k, v in index.items()}
