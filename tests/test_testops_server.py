"""The TestOps test server itself: the behaviours other tests rely on (RQL, pages, plan runs, the upload
flow, eventual consistency, prefixes, auth). Driven through the real client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers import FakeClock
from servers.testops_server import TestOpsServer, iter_log, parse_rql
from testops_evidence.errors import Refusal
from testops_evidence.testops.client import TestOpsClient

TOKEN = "server-test-token"
PROJECT = 7


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Iterator[TestOpsServer]:
    with TestOpsServer(token=TOKEN, clock=clock.monotonic, visible_after_polls=2) as srv:
        srv.add_project(PROJECT)
        srv.add_case(PROJECT, "Alpha", "suite/alpha", id=194)
        srv.add_case(PROJECT, "Beta", "suite/beta", id=195)
        srv.add_case(PROJECT, "Gone", "suite/gone", id=196, deleted=True)
        srv.add_case(99, "Elsewhere", "suite/alpha", id=500)
        yield srv


@pytest.fixture
def client(server: TestOpsServer, clock: FakeClock) -> TestOpsClient:
    return TestOpsClient(server.url, TOKEN, project_id=PROJECT, sleep=clock.sleep, monotonic=clock.monotonic,
                         read_timeout=10.0)


def test_rql_subset() -> None:
    entity = {"id": 3, "name": 'say "hi"', "fullName": "a/b", "deleted": False}
    assert parse_rql('id in [1, 3] and fullName == "a/b"', ["id", "fullName"])(entity)
    assert parse_rql('name = "say \\"hi\\""', ["name"])(entity)
    assert parse_rql("deleted = false", ["deleted"])(entity)
    assert not parse_rql("id != 3", ["id"])(entity)
    assert not parse_rql('id = "3"', ["id"])(entity)  # types must agree
    assert parse_rql("id > 0", ["id"])(entity) and parse_rql("id >= 3", ["id"])(entity)
    assert not parse_rql("id > 3", ["id"])(entity) and not parse_rql("id < 3", ["id"])(entity)
    for bad in ("id in 3", "other = 1", "id = 1 or id = 2", 'id = 1 and', 'id > "a"'):
        with pytest.raises(Exception, match="unsupported rql"):
            parse_rql(bad, ["id"])


def test_case_search_and_listing_hide_deleted_and_other_projects(client: TestOpsClient) -> None:
    found = client.get("/testcase/__search", {"projectId": PROJECT, "rql": 'fullName = "suite/alpha"'})
    assert [c["id"] for c in found["content"]] == [194]
    listed = list(client.pages("/testcase", {"projectId": PROJECT}, page_size=1))
    assert [c["id"] for c in listed] == [194, 195]
    # The plain listing's rows are TestCaseRowDto: no fullName (nor projectId or deleted) in any generation.
    assert all("fullName" not in c and "projectId" not in c for c in listed)
    searched = list(client.pages("/testcase/__search", {"projectId": PROJECT, "rql": "id > 0"}))
    assert [(c["id"], c["fullName"]) for c in searched] == [(194, "suite/alpha"), (195, "suite/beta")]
    with_deleted = [c["id"] for c in client.pages("/testcase/__search", {"projectId": PROJECT, "rql": "id > 0",
                                                                           "deleted": True})]
    assert with_deleted == [194, 195, 196]
    assert client.get("/testcase/196")["deleted"] is True
    with pytest.raises(Refusal) as bad:
        client.get("/testcase/__search", {"projectId": PROJECT, "rql": "id ~= 1"})
    assert bad.value.code == "testops.http_400"


def test_plan_membership_run_and_job_run_plan(server: TestOpsServer, client: TestOpsClient) -> None:
    job = server.add_job(PROJECT, "evals", external_id="acme/agents_evals.yml", url="https://github.com/acme/agents")
    plan = client.post("/testplan", {"projectId": PROJECT, "name": "Plan",
                                     "treeSelection": {"leafsInclude": [194]}})
    assert plan["testCasesCount"] == 1
    patched = client.patch(f"/testplan/{plan['id']}", {"treeSelection": {"leafsInclude": [194, 195, 196]}})
    assert patched["testCasesCount"] == 2  # the deleted case does not count
    server.plans[plan["id"]]["jobIds"].append(job["id"])
    launch = client.post(f"/testplan/{plan['id']}/run", {"launchName": "Plan #1"})
    assert launch["name"] == "Plan #1" and launch["closed"] is False
    run = next(r for r in server.jobruns.values() if r["launchId"] == launch["id"])
    server.set_jobrun_url(run["id"], "https://github.com/acme/agents/actions/runs/1")
    detail = client.get(f"/jobrun/{run['id']}")
    assert detail["launchId"] == launch["id"] and detail["job"]["id"] == job["id"]
    assert detail["url"].endswith("/runs/1")
    assert client.get(f"/jobrun/{run['id']}/plan", {"expected": True}) == [
        {"id": 194, "selector": "suite/alpha"}, {"id": 195, "selector": "suite/beta"}]
    assert client.get("/job", {"projectId": PROJECT, "externalId": "acme/agents_evals.yml"})["id"] == job["id"]
    assert client.get_optional("/job", {"projectId": PROJECT, "externalId": "nope"}) is None
    found = client.get("/launch/__search", {"projectId": PROJECT, "rql": 'name = "Plan #1"'})
    assert [x["id"] for x in found["content"]] == [launch["id"]]


def test_upload_flow_with_eventual_consistency(server: TestOpsServer, client: TestOpsClient,
                                              testops_generation: str) -> None:
    job = server.add_job(PROJECT, "evals", external_id="acme/agents_evals.yml")
    launch = server.add_launch(PROJECT, "L")
    run = server.add_jobrun(job["id"], launch_id=launch["id"], case_ids=[194])
    started = client.post("/upload/start", {"projectId": PROJECT, "ci": {"type": "github"},
                                            "job": {"name": "evals", "uid": "acme/agents_evals.yml"},
                                            "jobRun": {"id": run["id"], "uid": "555"}})
    assert started == {"jobRunId": run["id"], "launchId": launch["id"], "jobId": job["id"], "projectId": PROJECT}
    assert client.get(f"/jobrun/{run['id']}")["externalId"] == "555"
    session = client.post("/upload/session", {"launchId": launch["id"], "environment": []}, params={"manual": True})
    results = [{"uuid": "u1", "name": "Alpha", "fullName": "suite/alpha", "status": "PASSED",
                "labels": [{"name": "ALLURE_ID", "value": "194"}]},
               {"uuid": "u2", "name": "Beta", "fullName": "suite/beta", "status": "FAILED", "labels": []}]
    answer = client.post("/upload/test-result", {"testSessionId": session["id"], "results": results})
    if testops_generation == "current":
        ids = {r["uuid"]: r["id"] for r in answer["results"]}
    else:  # 25.4.1's UploadResultsResponseDto: the ids (this server keeps the order sent; 25.4.1 does not say)
        assert set(answer) == {"resultIds"}
        ids = dict(zip(["u1", "u2"], answer["resultIds"], strict=True))
    attached = client.post(f"/upload/test-result/{ids['u1']}/attachment",
                           files=[("file", ("evidence.json", b'{"ok":true}', "application/json"))])
    assert attached is None  # 202 Accepted, no content (report-service.json 25.4.1, addContent)
    assert server.requests("POST", r"/upload/test-result/\d+/attachment")[0].status == 202
    assert server.results[ids["u1"]]["attachments"][0]["contentLength"] == 11
    if testops_generation == "current":
        client.post("/launch/attachment", params={"launchId": launch["id"]},
                    files=[("file", ("log.txt", b"hello", "text/plain"))])
        assert server.launch_attachments[0]["sha256"].startswith("2cf24dba")
    else:
        with pytest.raises(Refusal) as absent:
            client.post("/launch/attachment", params={"launchId": launch["id"]},
                        files=[("file", ("log.txt", b"hello", "text/plain"))])
        assert absent.value.code == "testops.http_404" and not server.launch_attachments

    # Hidden for two polls, visible on the third.
    assert client.get(f"/launch/{launch['id']}/progress") == {"ready": False}
    assert list(client.pages("/testresult", {"launchId": launch["id"]})) == []
    rows = list(client.pages("/testresult", {"launchId": launch["id"]}))
    assert [(r["fullName"], r["status"], r["testCaseId"]) for r in rows] == [
        ("suite/alpha", "passed", 194), ("suite/beta", "failed", 195)]
    detail = client.get(f"/testresult/{ids['u1']}")
    assert detail["jobRun"]["id"] == run["id"] and "uuid" not in detail  # TestResultDto has no uuid
    assert client.get(f"/launch/{launch['id']}/progress")["ready"] is True

    # The stop names the job run by (projectId, jobUid, jobRunUid): another job uid finds nothing.
    with pytest.raises(Refusal) as other_uid:
        client.post("/upload/stop", {"projectId": PROJECT, "jobUid": "acme/agents_Evals", "jobRunUid": "555",
                                     "status": "failed"})
    assert other_uid.value.code == "testops.http_404"
    client.post("/upload/stop", {"projectId": PROJECT, "jobUid": "acme/agents_evals.yml", "jobRunUid": "555",
                                 "status": "failed"})
    assert server.jobruns[run["id"]]["stage"] == "finished"
    assert client.post(f"/launch/{launch['id']}/close") is None  # 204
    with pytest.raises(Refusal) as closed:
        client.post("/upload/test-result", {"testSessionId": session["id"], "results": results})
    assert closed.value.code == "testops.http_409" and "launch is closed" in closed.value.message


def test_upload_chunks_are_capped(server: TestOpsServer, client: TestOpsClient) -> None:
    launch = server.add_launch(PROJECT, "L")
    session = client.post("/upload/session", {"launchId": launch["id"]}, params={"manual": True})
    too_many = [{"uuid": f"u{n}", "status": "PASSED"} for n in range(101)]
    with pytest.raises(Refusal) as error:
        client.post("/upload/test-result", {"testSessionId": session["id"], "results": too_many})
    assert error.value.code == "testops.http_400"


def test_upload_start_without_job_run_creates_job_run_and_launch(server: TestOpsServer, client: TestOpsClient) -> None:
    answer = client.post("/upload/start", {"projectId": PROJECT, "ci": {"type": "github"},
                                           "job": {"name": "evals", "uid": "acme/x_y.yml"},
                                           "jobRun": {"uid": "42", "name": "run 42", "url": "https://gh/run/42"}})
    run = server.jobruns[answer["jobRunId"]]
    assert run["launchId"] == answer["launchId"] and run["url"] == "https://gh/run/42"
    assert server.jobs[run["jobId"]]["externalId"] == "acme/x_y.yml"


def test_prefixes_can_be_narrowed(clock: FakeClock) -> None:
    with TestOpsServer(token=TOKEN, prefixes=("/api/rs",)) as server:
        server.add_case(PROJECT, "A", "a", id=1)
        legacy = TestOpsClient(server.url, TOKEN, api_prefix="/api/rs", sleep=clock.sleep, monotonic=clock.monotonic)
        assert legacy.get("/testcase/1")["id"] == 1
        modern = TestOpsClient(server.url, TOKEN, sleep=clock.sleep, monotonic=clock.monotonic)
        with pytest.raises(Refusal) as missing:
            modern.get("/testcase/1")
        assert missing.value.code == "testops.http_404"


def test_unknown_route_and_wrong_method(client: TestOpsClient) -> None:
    with pytest.raises(Refusal) as unknown:
        client.get("/nothing")
    assert unknown.value.code == "testops.http_404"
    with pytest.raises(Refusal) as wrong_method:
        client.post("/testcase/194", {})
    assert wrong_method.value.code == "testops.http_405"


def test_missing_credentials_are_401(server: TestOpsServer) -> None:
    import requests

    answer = requests.get(server.url + "/api/testcase/194", timeout=5)
    assert answer.status_code == 401
    assert server.log[-1].auth is None and server.log[-1].status == 401


def test_log_lines_for_failure_messages(server: TestOpsServer, client: TestOpsClient) -> None:
    server.fail("GET", "/testcase/194", "status", status=503)
    client.get("/testcase/194")
    assert list(iter_log(server)) == ["GET /api/testcase/194 -> 503 [status]", "GET /api/testcase/194 -> 200"]
