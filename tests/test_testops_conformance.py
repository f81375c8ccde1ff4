"""The TestOps conformance table (tests/data/testops-conformance.json) and the test server that enforces it.

The table is data with a source for every fact; these tests keep it whole (every endpoint sourced, every
field the action reads documented in every generation that has the endpoint, every server route tabled)
and prove the server refuses what the real server refuses, the way it refuses it: a missing required
field, a wrong type, an unknown field, a wrong content type or an unknown query parameter is a 400 (415)
with the error body ``{message, status, timestamp}``; an endpoint the generation lacks is a 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from servers import conformance
from servers.testops_server import TestOpsServer

TOKEN = "conformance-token"
PROJECT = 12
HEADERS = {"Authorization": f"Api-Token {TOKEN}"}


# --- the table ------------------------------------------------------------------------------------------------


def test_every_fact_names_a_known_source() -> None:
    table = conformance.table()
    sources = set(table["sources"])
    for entry in table["endpoints"]:
        named = [*entry["sources"], *(s for g in entry["generations"].values() for s in g.get("sources", ()))]
        assert named, entry["id"]
        for source in named:
            assert source.split(":")[0] in sources, (entry["id"], source)
    assert set(table["generations"]) == set(conformance.GENERATIONS)


def test_endpoints_are_unique_and_cover_both_generations() -> None:
    table = conformance.table()
    keys = [(e["method"], e["route"]) for e in table["endpoints"]]
    assert len(keys) == len(set(keys))
    assert len({e["id"] for e in table["endpoints"]}) == len(keys)
    for entry in table["endpoints"]:
        assert set(entry["generations"]) == set(conformance.GENERATIONS), entry["id"]


def _fields(shape: Any) -> set[str]:
    spec = {"type": shape} if isinstance(shape, str) else shape
    if spec["type"] in ("page", "array"):
        return _fields(spec["items"])
    return set(spec.get("fields", {})) if spec["type"] == "object" else set()


@pytest.mark.parametrize("generation", conformance.GENERATIONS)
def test_every_field_the_action_reads_is_documented(generation: str) -> None:
    for endpoint in conformance.endpoints(generation):
        if endpoint.absent:
            continue
        shape = endpoint.answer.get("shape")
        documented = _fields(shape) if shape is not None else set()
        assert set(endpoint.answer.get("read", [])) <= documented, (generation, endpoint.id)


def test_the_differences_between_generations_are_in_the_table() -> None:
    old, new = (conformance.by_id(g, "upload.results") for g in ("25.4", "current"))
    assert old.answer["read"] == ["resultIds"] and new.answer["read"] == ["results"]
    assert conformance.by_id("25.4", "launch.attachment").absent
    assert not conformance.by_id("current", "launch.attachment").absent
    assert conformance.by_id("25.4", "upload.session").body["shape"]["required"] == ["launchId"]
    run = conformance.by_id("25.4", "testplan.run")
    assert run.body["shape"]["required"] == ["launchName"] and "name" not in run.body["shape"]["fields"]
    stop = conformance.by_id("current", "upload.stop").body["shape"]
    assert "jobRunId" not in stop["fields"] and set(stop["required"]) == {"projectId", "jobUid", "jobRunUid"}
    row = conformance.by_id("25.4", "testcase.list").answer["shape"]["items"]["fields"]
    assert "fullName" not in row and "fullName" in conformance.by_id("25.4", "testcase.search").answer[
        "shape"]["items"]["fields"]


def test_every_route_of_the_test_server_is_tabled() -> None:
    for generation in conformance.GENERATIONS:
        for method, pattern, name in TestOpsServer._ROUTES:
            route = pattern.pattern.replace(r"(\d+)", "7")
            assert conformance.endpoint(generation, method, route) is not None, (generation, method, name)


# --- the server enforces it -------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[TestOpsServer]:
    with TestOpsServer(token=TOKEN) as srv:
        srv.add_case(PROJECT, "Alpha", "suite/alpha", id=194)
        plan = srv.add_plan(PROJECT, "Plan", [194], id=340)
        assert plan["id"] == 340
        yield srv


def call(server: TestOpsServer, method: str, path: str, *, headers: dict[str, str] | None = None,
         **kwargs: Any) -> requests.Response:
    return requests.request(method, server.url + "/api" + path, headers={**HEADERS, **(headers or {})}, timeout=10,
                            **kwargs)


def refused(answer: requests.Response, status: int, reason: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"message", "status", "timestamp"} and body["status"] == status
    assert isinstance(body["timestamp"], int) and reason in body["message"], body["message"]


@pytest.mark.parametrize("body,reason", [
    ({"name": "x"}, "body.launchName: must not be null"),  # what 0.1 sent: the required launchName is missing
    ({"launchName": "x", "name": "x"}, "body.name: unknown field"),
    ({}, "body.launchName: must not be null"),
    ({"launchName": ""}, "body.launchName: size must be at least 1"),
    ({"launchName": "x" * 256}, "body.launchName: size must be at most 255"),
    ({"launchName": 7}, "body.launchName: a string is expected"),
])
def test_a_bad_body_is_a_400_with_the_reason(server: TestOpsServer, body: dict[str, Any], reason: str) -> None:
    refused(call(server, "POST", "/testplan/340/run", json=body), 400, reason)
    assert not server.launches


def test_nested_fields_enums_and_limits_are_checked(server: TestOpsServer) -> None:
    launch = server.add_launch(PROJECT, "L")
    session = call(server, "POST", "/upload/session", params={"manual": "true"},
                   json={"launchId": launch["id"], "environment": [{"key": "a", "value": "b"}]}).json()
    base = {"testSessionId": session["id"]}
    refused(call(server, "POST", "/upload/test-result", json={**base, "results": [{"uuid": "u", "status": "ok"}]}),
            400, "body.results[0].status: 'ok' is not one of")
    refused(call(server, "POST", "/upload/test-result", json={**base, "results": [{"uuid": "u", "environment": "x"}]}),
            400, "body.results[0].environment: unknown field")
    refused(call(server, "POST", "/upload/test-result", json={**base, "results": [{"uuid": "u"}] * 1001}),
            400, "body.results: at most 1000 items")
    refused(call(server, "POST", "/upload/test-result", json={**base, "results": [
        {"uuid": "u", "status": "PASSED", "historyId": None}]}), 400, "body.results[0].historyId: null is not a string")
    accepted = call(server, "POST", "/upload/test-result", json={**base, "results": [{"uuid": "u", "status": "PASSED"}]})
    assert accepted.status_code == 200  # the Java enum name; an unset field is left out, never null


def test_query_content_type_and_parts_are_checked(server: TestOpsServer) -> None:
    refused(call(server, "GET", "/testcase", params={"projectId": PROJECT, "fullName": "x"}), 400,
            "unknown query parameter 'fullName'")
    refused(call(server, "GET", "/testcase/__search", params={"projectId": PROJECT}), 400,
            "Required request parameter 'rql' is not present")
    refused(call(server, "GET", "/testcase", params={"projectId": "twelve"}), 400, "is not an integer")
    refused(call(server, "PATCH", "/testplan/340", data="name=x",
                 headers={"Content-Type": "application/x-www-form-urlencoded"}), 415, "not supported")
    server.add_launch(PROJECT, "L", id=9)
    result_id = 1
    refused(call(server, "POST", "/testresult/attachment", params={"testResultId": result_id},
                 files=[("upload", ("e.json", b"{}", "application/json"))]), 400, "unknown multipart part 'upload'")


def test_an_endpoint_the_generation_lacks_is_a_404(server: TestOpsServer, testops_generation: str) -> None:
    launch = server.add_launch(PROJECT, "L")
    answer = call(server, "POST", "/launch/attachment", params={"launchId": launch["id"]},
                  files=[("file", ("log.txt", b"hello", "text/plain"))])
    if testops_generation == "25.4":
        refused(answer, 404, "No handler found")
    else:
        assert answer.status_code == 200 and server.launch_attachments


def test_answers_carry_only_the_documented_fields(server: TestOpsServer) -> None:
    rows = call(server, "GET", "/testcase", params={"projectId": PROJECT}).json()["content"]
    assert rows == [{"id": 194, "name": "Alpha", "automated": True}]
    job = server.add_job(PROJECT, "evals", external_id="acme/agents_evals")
    assert "externalId" not in call(server, "GET", f"/job/{job['id']}").json()  # JobDto has no externalId
    assert call(server, "GET", "/job", params={"projectId": PROJECT, "externalId": "acme/agents_evals"}).json()[
        "id"] == job["id"]
