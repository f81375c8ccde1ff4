"""Observation of once-marked mutations, for ``reconcile``: did it happen, provably not, or unknown?

A phase writes ``ctx.state.once(stage, detail)`` before each remote mutation. The detail says what to
look for afterwards (docs/testops.md, "Once-markers"):

============== ========================================================= =====================================
``kind``        detail keys                                               done when / absent when
============== ========================================================= =====================================
case-update     ``case-id``, ``before`` {name, fullName}, ``after``       the case has ``after`` / still ``before``
plan-create     ``project-id``, ``name``                                  one plan of that name / none
plan-update     ``plan-id``, ``name``, ``case-ids``, ``before-name``,     the plan has ``name`` and exactly
                ``before-case-ids``                                       ``case-ids`` / still the ``before-*``
launch          ``project-id``, ``name``                                  one launch of that name / none
upload-chunk    ``launch-id``, ``results`` [{uuid, full-name,             every full name listed in the launch
                test-case-id?}]                                           / none listed *and* progress ``ready``
============== ========================================================= =====================================

Every marker also carries ``endpoint`` and ``project-id`` (observation against another instance proves
nothing) and, where a replay is possible, ``request`` = {method, path, json, params?}: the exact call,
re-sent only by ``reconcile`` with ``resume: true`` and only after observation proved it absent.
Anything else observes as ``unknown``: never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.testops import api
from testops_evidence.testops.client import TestOpsClient

DONE, ABSENT, UNKNOWN = "done", "absent", "unknown"
REPLAYABLE_METHODS = ("POST", "PATCH")


@dataclass(frozen=True)
class Observation:
    state: str  # done | absent | unknown
    reason: str
    facts: Mapping[str, Any] = field(default_factory=dict)


def observe(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    """Observe TestOps for one once-marker (``Refusal`` from the client propagates)."""
    endpoint = marker.get("endpoint")
    if endpoint is not None and str(endpoint).rstrip("/") != client.endpoint:
        return Observation(UNKNOWN, f"the marker was written against {endpoint}, not {client.endpoint}")
    project = marker.get("project-id")
    if project is not None and client.project_id is not None and project != client.project_id:
        return Observation(UNKNOWN, f"the marker was written for project {project}, not {client.project_id}")
    kind = marker.get("kind")
    observer = _OBSERVERS.get(kind) if isinstance(kind, str) else None
    if observer is None:
        return Observation(UNKNOWN, f"no observation is known for a mutation of kind {kind!r}")
    try:
        return observer(client, marker)
    except (KeyError, TypeError, ValueError) as exc:
        return Observation(UNKNOWN, f"the marker lacks what observation needs ({type(exc).__name__}: {exc})")


def marker_detail(client: TestOpsClient, kind: str, request: Mapping[str, Any] | None = None,
                  **facts: Any) -> dict[str, Any]:
    """The detail of a once-marker: kind, endpoint, project, what to observe, and the replayable request.

    Keyword names use ``_`` for ``-`` (``case_id`` -> ``case-id``)."""
    detail: dict[str, Any] = {"kind": kind, "endpoint": client.endpoint, "project-id": client.project_id}
    detail.update({name.replace("_", "-"): value for name, value in facts.items()})
    if request is not None:
        detail["request"] = dict(request)
    return detail


def replayable(marker: Mapping[str, Any]) -> bool:
    request = marker.get("request")
    return (isinstance(request, Mapping) and request.get("method") in REPLAYABLE_METHODS
            and isinstance(request.get("path"), str))


def replay(client: TestOpsClient, marker: Mapping[str, Any]) -> Any:
    """Re-send the marker's exact request once (the caller has proved it absent and once-marked this)."""
    return api.replay(client, marker["request"])


# --- observers ----------------------------------------------------------------------------------------------


def _case_update(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    case_id = int(marker["case-id"])
    remote = api.get_case(client, case_id)
    if remote is None:
        return Observation(UNKNOWN, f"test case {case_id} no longer exists")
    after, before = dict(marker["after"]), dict(marker["before"])
    if all(remote.get(k) == v for k, v in after.items()):
        return Observation(DONE, f"test case {case_id} has the new values", {"case-id": case_id})
    if all(remote.get(k) == before.get(k) for k in after):
        return Observation(ABSENT, f"test case {case_id} still has its old values", {"case-id": case_id})
    return Observation(UNKNOWN, f"test case {case_id} has neither the old nor the new values (changed by someone else?)")


def _plan_create(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    project, name = int(marker["project-id"]), str(marker["name"])
    ids = api.plans_named(client, project, name)
    if len(ids) == 1:
        return Observation(DONE, f"test plan {ids[0]} named {name!r} exists", {"plan-id": ids[0]})
    if not ids:
        return Observation(ABSENT, f"no test plan is named {name!r} in project {project}")
    return Observation(UNKNOWN, f"{len(ids)} test plans are named {name!r}: {ids}")


def _plan_update(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    plan_id = int(marker["plan-id"])
    plan = api.get_plan(client, plan_id)
    if plan is None:
        return Observation(UNKNOWN, f"test plan {plan_id} no longer exists")
    raw_selection = plan.get("treeSelection")
    selection: Mapping[str, Any] = raw_selection if isinstance(raw_selection, dict) else {}
    leafs = sorted(set(selection.get("leafsInclude") or []))
    name = plan.get("name")
    if name == marker["name"] and leafs == sorted(set(marker["case-ids"])):
        return Observation(DONE, f"test plan {plan_id} holds the contract's name and cases", {"plan-id": plan_id})
    if name == marker.get("before-name") and leafs == sorted(set(marker.get("before-case-ids") or [])):
        return Observation(ABSENT, f"test plan {plan_id} is unchanged", {"plan-id": plan_id})
    return Observation(UNKNOWN, f"test plan {plan_id} is neither as before nor as intended")


def _launch(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    project, name = int(marker["project-id"]), str(marker["name"])
    ids = api.launches_named(client, project, name)
    if len(ids) == 1:
        return Observation(DONE, f"launch {ids[0]} named {name!r} exists",
                           {"launch-id": ids[0], "launch-url": client.web_url("launch", ids[0])})
    if not ids:
        return Observation(ABSENT, f"no launch is named {name!r} in project {project}")
    return Observation(UNKNOWN, f"{len(ids)} launches are named {name!r}: {ids}")


def _upload_chunk(client: TestOpsClient, marker: Mapping[str, Any]) -> Observation:
    launch_id = int(marker["launch-id"])
    expected = [str(row["full-name"]) for row in marker["results"]]
    listed = Counter(str(item.get("fullName")) for item in api.list_results(client, launch_id, 500))
    present = [name for name in expected if listed[name] > 0]
    if expected and len(present) == len(expected):
        return Observation(DONE, f"all {len(expected)} results of the chunk are in launch {launch_id}",
                           {"launch-id": launch_id, "present": len(present)})
    progress = api.launch_progress(client, launch_id)
    if not present and progress.get("ready") is True:
        return Observation(ABSENT, f"none of the {len(expected)} results is in launch {launch_id}, and TestOps "
                           "reports processing finished", {"launch-id": launch_id, "present": 0})
    if not present:
        return Observation(UNKNOWN, f"none of the results is visible yet and launch {launch_id} is still processing")
    return Observation(UNKNOWN, f"{len(present)} of {len(expected)} results are in launch {launch_id}")


_OBSERVERS = {
    "case-update": _case_update,
    "plan-create": _plan_create,
    "plan-update": _plan_update,
    "launch": _launch,
    "upload-chunk": _upload_chunk,
}
