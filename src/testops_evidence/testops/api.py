"""Every Allure TestOps endpoint the action calls, one typed function each, over a :class:`TestOpsClient`.

This module is the only place that knows TestOps' paths, query parameters and request bodies (the flows
in ``testops/`` and the reconcile observers call it; phases never do). Each function takes plain values
(ids, names, documents), sends one request, and shape-checks the answer it reads (``testops.response_invalid``,
or ``testops.uncertain`` for an unreadable answer to a change). What each request and answer looks like, per
server generation and with its source, is the conformance table ``tests/data/testops-conformance.json``.

Functions that change something return the :class:`Request` they would send with :func:`request_of` too,
so a caller can once-mark the exact request (``reconcile`` replays it) before sending it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.testops.client import (
    TestOpsClient,
    expect_list,
    expect_mutation_id,
    expect_mutation_object,
    expect_object,
)

LIST_PAGE = 500  # items per page when listing plans, cases or launches


@dataclass(frozen=True)
class Request:
    """One change, exactly as sent: what a once-marker records and ``reconcile`` may replay."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "json": self.json,
                **({"params": dict(self.params)} if self.params else {})}


def send(client: TestOpsClient, request: Request, *, files: Any = None) -> Any:
    """Send a change once (the client never re-sends a change)."""
    params = dict(request.params) or None
    if request.method == "PATCH":
        return client.patch(request.path, request.json, params=params)
    if request.method == "POST":
        return client.post(request.path, request.json, files=files, params=params)
    raise ValueError(f"not a change this module sends: {request.method}")


def replay(client: TestOpsClient, recorded: Mapping[str, Any]) -> Any:
    """Re-send a once-marker's recorded request (``reconcile`` with ``resume``, after observation)."""
    params = recorded.get("params") if isinstance(recorded.get("params"), Mapping) else None
    body = recorded.get("json")
    path = str(recorded["path"])
    if (recorded.get("method") == "POST" and re.fullmatch(r"/testplan/\d+/run", path) and isinstance(body, Mapping)
            and set(body) == {"name"}):
        # A marker of 0.1 recorded the plan run as {name}, which TestOps refuses (launchName is required).
        body = {"launchName": body["name"]}
    return send(client, Request(str(recorded["method"]), path, body, dict(params or {})))


# --- test cases -------------------------------------------------------------------------------------------


# Every case has a positive id, so this query lists them all (AQL compares numbers: ``id >= 100``).
ALL_CASES = "id > 0"


def search_cases(client: TestOpsClient, project_id: int, rql: str = ALL_CASES) -> Iterator[dict[str, Any]]:
    """The project's live test cases the query selects, page after page, as full test cases: the plain
    listing's rows carry no ``fullName`` (nor project or deleted flag), the search's do."""
    return client.pages("/testcase/__search", {"projectId": project_id, "rql": rql}, page_size=LIST_PAGE)


def get_case(client: TestOpsClient, case_id: int) -> dict[str, Any] | None:
    """The test case, or ``None`` when TestOps has no such case (404)."""
    answer = client.get_optional(f"/testcase/{case_id}")
    return None if answer is None else expect_object(answer, f"test case {case_id}", ("id",))


def case_update(case_id: int, patch: Mapping[str, Any]) -> Request:
    return Request("PATCH", f"/testcase/{case_id}", dict(patch))


def case_updated(answer: Any, request: Request) -> dict[str, Any]:
    return expect_mutation_object(answer, f"the answer to PATCH {request.path}")


# --- test plans -------------------------------------------------------------------------------------------


def plans_named(client: TestOpsClient, project_id: int, name: str) -> list[int]:
    """Ids of the project's test plans with exactly this name (a listing may repeat an item)."""
    ids = {item.get("id") for item in client.pages("/testplan", {"projectId": project_id}, page_size=LIST_PAGE)
           if item.get("name") == name}
    return sorted(i for i in ids if isinstance(i, int) and not isinstance(i, bool))


def get_plan(client: TestOpsClient, plan_id: int) -> dict[str, Any] | None:
    """The test plan, or ``None`` when TestOps has no such plan (404)."""
    answer = client.get_optional(f"/testplan/{plan_id}")
    return None if answer is None else expect_object(answer, f"test plan {plan_id}", ("id",))


def fetch_plan(client: TestOpsClient, plan_id: int, *, hint: str | None = None) -> dict[str, Any]:
    """The plan by id, or ``bootstrap.plan_missing``."""
    plan = get_plan(client, plan_id)
    if plan is None:
        raise Refusal("bootstrap.plan_missing", f"TestOps has no test plan {plan_id}", field="testops.plan.id",
                      expected="an existing test plan", actual=plan_id, hint=hint)
    return plan


def read_plan(client: TestOpsClient, plan_id: int) -> dict[str, Any]:
    """The plan by id; a missing plan is an error of the answer here (the caller binds to it)."""
    return expect_object(client.get(f"/testplan/{plan_id}"), "testplan")


def plan_create(body: Mapping[str, Any]) -> Request:
    return Request("POST", "/testplan", dict(body))


def plan_update(plan_id: int, patch: Mapping[str, Any]) -> Request:
    return Request("PATCH", f"/testplan/{plan_id}", dict(patch))


def plan_created(answer: Any) -> tuple[int, dict[str, Any]]:
    """The new plan's id and the answer to :func:`plan_create`."""
    body = expect_mutation_object(answer, "the answer to POST /testplan", ("id",))
    return expect_mutation_id(body["id"], "the new test plan's id"), body


def plan_updated(answer: Any, request: Request) -> dict[str, Any]:
    return expect_mutation_object(answer, f"the answer to PATCH {request.path}")


def plan_run(plan_id: int, launch_name: str) -> Request:
    """Run the plan: TestOps creates a launch of this name (``launchName``, required, 1-255 characters)."""
    return Request("POST", f"/testplan/{plan_id}/run", {"launchName": launch_name})


def plan_sync(plan_id: int) -> Request:
    """Recompute the plan's test cases (no body); the answer is the plan with its fresh ``testCasesCount``."""
    return Request("POST", f"/testplan/{plan_id}/sync")


def sync_plan(client: TestOpsClient, plan_id: int) -> dict[str, Any] | None:
    """Sync the plan; ``None`` when the server has no sync (it answered 404 or 405: nothing was done).

    A sync only recomputes what the plan already says, so it needs no once-marker: sending it again changes
    nothing. Its answer is read like a GET's (an unreadable one is ``testops.response_invalid``)."""
    request = plan_sync(plan_id)
    try:
        answer = send(client, request)
    except Refusal as refusal:
        if refusal.http_status in (404, 405) and client.get_optional(f"/testplan/{plan_id}") is not None:
            return None  # the plan exists, so the 404 was the sync endpoint's: this server has none
        if refusal.code == "testops.uncertain":
            raise Refusal("testops.transport", f"the sync of test plan {plan_id} got no answer; a sync only "
                          "recomputes the plan, so running this step again is safe") from None
        raise
    return expect_object(answer, f"the answer to POST {request.path}", ("id",))


def plan_started(answer: Any, request: Request) -> int:
    """The id of the launch TestOps created for :func:`plan_run`."""
    body = expect_mutation_object(answer, f"the answer to POST {request.path}", ("id",))
    return expect_mutation_id(body["id"], "the launch id")


# --- jobs and job runs ------------------------------------------------------------------------------------


def get_job_run(client: TestOpsClient, job_run_id: int) -> dict[str, Any]:
    return expect_object(client.get(f"/jobrun/{job_run_id}"), "jobrun")


def get_job(client: TestOpsClient, job_id: int) -> dict[str, Any]:
    return expect_object(client.get(f"/job/{job_id}"), "job")


def find_job(client: TestOpsClient, project_id: int, external_id: str) -> int | None:
    """The id of the project's job created under this uid (its external id), or ``None`` (404)."""
    answer = client.get_optional("/job", {"projectId": project_id, "externalId": external_id})
    if answer is None:
        return None
    body = expect_object(answer, "job")
    if isinstance(body.get("content"), list):  # the same lookup answered as a page
        ids = {item.get("id") for item in body["content"] if isinstance(item, dict)}
        return next(iter(ids)) if len(ids) == 1 and isinstance(next(iter(ids)), int) else None
    ident = body.get("id")
    return ident if isinstance(ident, int) and not isinstance(ident, bool) else None


def job_run_plan(client: TestOpsClient, job_run_id: int) -> Any:
    """The rows TestOps planned for the job run (parsed by ``readers.testplan.parse_jobrun_plan``)."""
    return client.get(f"/jobrun/{job_run_id}/plan", {"expected": "true"})


# --- launches ---------------------------------------------------------------------------------------------


def get_launch(client: TestOpsClient, launch_id: int) -> dict[str, Any]:
    return expect_object(client.get(f"/launch/{launch_id}"), "launch")


def _rql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def launches_named(client: TestOpsClient, project_id: int, name: str) -> list[int]:
    """Ids of the project's launches with exactly this name."""
    found = client.pages("/launch/__search", {"projectId": project_id, "rql": f"name = {_rql_string(name)}"},
                         page_size=100, max_pages=10)
    return sorted({item["id"] for item in found if item.get("name") == name and isinstance(item.get("id"), int)})


def launch_progress(client: TestOpsClient, launch_id: int) -> dict[str, Any]:
    return expect_object(client.get(f"/launch/{launch_id}/progress"), f"progress of launch {launch_id}")


# --- upload -----------------------------------------------------------------------------------------------


def upload_start(body: Mapping[str, Any]) -> Request:
    return Request("POST", "/upload/start", dict(body))


def upload_session(launch_id: int, environment: Sequence[Mapping[str, str]]) -> Request:
    """A session for the launch: ``{launchId, environment}`` with ``manual=true``, the body 25.4.1 documents and
    the one Allure 3 sends to every server (newer servers also take ``{jobRunId}``; 25.4 refuses it)."""
    return Request("POST", "/upload/session", {"launchId": launch_id, "environment": [dict(e) for e in environment]},
                   {"manual": "true"})


def upload_results(session_id: int, dtos: Sequence[Mapping[str, Any]]) -> Request:
    return Request("POST", "/upload/test-result", {"testSessionId": session_id, "results": list(dtos)})


def launch_attachment(launch_id: int) -> Request:
    """A multipart upload of launch attachments, part ``file`` (the parts are sent as ``files``, not recorded).
    Current servers only: 25.4 has no such endpoint."""
    return Request("POST", "/launch/attachment", None, {"launchId": launch_id})


def result_attachment(result_id: int) -> Request:
    """A multipart upload of one test result's attachments, part ``file`` (the documented attachment endpoint
    of test results, in 25.4.1 and since)."""
    return Request("POST", "/testresult/attachment", None, {"testResultId": result_id})


def upload_stop(body: Mapping[str, Any]) -> Request:
    return Request("POST", "/upload/stop", dict(body))


BY_UUID, IN_ORDER = "by uuid", "in the order sent"


def result_ids(answer: Any, what: str, sent: Sequence[str]) -> tuple[dict[str, int], str]:
    """The TestOps result id of each uuid a chunk sent, from the answer to ``upload_results``, and the form
    the answer took: current servers map uuids to ids (``{results: [{id, uuid}]}``); 25.4 servers answer the
    ids alone, in the order the results were sent (``{resultIds: [..]}``). ``verify`` then proves each listed
    result is the id mapped to its uuid, so a server that reordered its ids fails verification, never passes.
    """
    from testops_evidence.testops.client import expect_id

    body = expect_object(answer, what)
    mapped: dict[str, int] = {}
    if "results" in body:
        form = BY_UUID
        for index, item in enumerate(expect_list(body["results"], f"{what}.results")):
            item = expect_object(item, f"{what}.results[{index}]", ("id", "uuid"))
            mapped[str(item["uuid"])] = expect_id(item["id"], f"result id of {item['uuid']}")
    elif "resultIds" in body:
        form = IN_ORDER
        ids = expect_list(body["resultIds"], f"{what}.resultIds")
        if len(ids) != len(sent) or len(set(sent)) != len(sent):
            raise Refusal("testops.response_invalid", f"TestOps answered {len(ids)} result ids to {what}, which "
                          f"sent {len(sent)} results", field=f"{what}.resultIds", expected=len(sent),
                          actual=len(ids))
        mapped = {uuid: expect_id(ident, f"result id {index} of {what}")
                  for index, (uuid, ident) in enumerate(zip(sent, ids, strict=True))}
        if len(set(mapped.values())) != len(mapped):
            raise Refusal("testops.response_invalid", f"TestOps answered one result id twice to {what}",
                          field=f"{what}.resultIds", expected="distinct ids", actual=ids[:20])
    else:
        raise Refusal("testops.response_invalid", f"{what} answered neither results nor resultIds", field=what,
                      expected="results (current servers) or resultIds (25.4)", actual=sorted(body)[:10])
    if set(mapped) != set(sent):
        raise Refusal("testops.response_invalid", f"TestOps acknowledged other results than {what} sent",
                      field=what, expected=f"{len(set(sent))} uuids sent",
                      actual=f"{len(set(mapped) & set(sent))} of them acknowledged, {len(set(mapped) - set(sent))} "
                      "others")
    return mapped, form


def capabilities_from(result_answer_form: str | None) -> dict[str, Any]:
    """What the server supports, from the form of its answer to the first results chunk (the two forms are
    the two generations of the conformance table: only the current one has launch attachments)."""
    current = result_answer_form != IN_ORDER
    return {"result-ids": result_answer_form or BY_UUID, "launch-attachment": current,
            "generation": "current" if current else "25.4"}


# --- test results -----------------------------------------------------------------------------------------


def list_results(client: TestOpsClient, launch_id: int, page_size: int) -> Iterator[dict[str, Any]]:
    """The launch's results TestOps lists now (results still being processed are not listed yet)."""
    return client.pages("/testresult", {"launchId": launch_id}, page_size=page_size)


def get_result(client: TestOpsClient, result_id: int) -> dict[str, Any]:
    return expect_object(client.get(f"/testresult/{result_id}"), f"test result {result_id}")
