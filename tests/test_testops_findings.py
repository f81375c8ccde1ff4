"""Issue 28's TestOps findings (T1-T8), each closed by a test that failed on the code before the fix.

T3, T5 and T8 are also checked against the description by tests/test_testops_openapi.py (the 25.4 rows
re-derived from report-service.json), and T4 in tests/test_upload_testops.py (a server that reorders
``resultIds``); this module holds the rest and the table facts those findings were about.
"""

from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from evidence_support import SENTINEL, TestOpsCampaign, cell, small_contract
from helpers import FakeClock
from servers import conformance
from servers.testops_server import TestOpsServer
from testops_evidence.testops import observe
from testops_evidence.testops.bundle import UPLOAD_STATUS, result_dto
from testops_evidence.testops.client import JWT_DEFAULT_LIFETIME, TestOpsClient

ROOT = Path(__file__).resolve().parent.parent
UPLOAD_STATUSES = {"FAILED", "BROKEN", "PASSED", "SKIPPED", "UNKNOWN"}  # report-service.json: UploadTestStatus


def _steps(dtos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [step for dto in dtos for step in dto.get("steps", [])]


# --- T1: UploadTestStatus in upper case, for results and steps ---------------------------------------------------


def test_t1_uploads_send_the_java_names_of_upload_test_status(tmp_path: Path) -> None:
    contract = small_contract(testops=True)
    with TestOpsServer(token=SENTINEL, generation="25.4") as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        campaign.export([cell(contract, "get-task-context"),
                         cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
                         cell(contract, "company-credential-approval")])
        assert campaign.run("upload").exit_code == 0
        dtos = [dto for e in server.requests("POST", "/upload/test-result") for dto in e.body["results"]]
    assert {dto["status"] for dto in dtos} == {"PASSED", "FAILED"}
    assert _steps(dtos) and {step["status"] for step in _steps(dtos)} <= UPLOAD_STATUSES
    assert set(UPLOAD_STATUS.values()) == UPLOAD_STATUSES


def test_t1_a_25_4_server_refuses_lower_case_as_the_description_states_it() -> None:
    status = conformance.by_id("25.4", "upload.results").body["shape"]["fields"]["results"]["items"]["fields"][  # type: ignore[index]
        "status"]
    assert status["enum"] == ["FAILED", "BROKEN", "PASSED", "SKIPPED", "UNKNOWN"] and "case" not in status
    assert "components/schemas/UploadTestStatus" in status["cite"]
    with pytest.raises(conformance.Refused) as refused:
        conformance.check_value(status, "passed", "body.results[0].status")
    assert "UploadTestStatus" in refused.value.reason
    current = conformance.by_id("current", "upload.results").body["shape"]["fields"]["results"]["items"]["fields"]  # type: ignore[index]
    conformance.check_value(current["status"], "passed", "status")  # Allure 3's lower case, on newer servers
    conformance.check_value(current["status"], "PASSED", "status")  # and the Java names kept from 25.4.1


def test_t1_an_unknown_status_is_never_sent_as_a_pass() -> None:
    dto = result_dto({"uuid": "u", "status": "ok", "steps": [{"name": "s", "status": None}]})
    assert dto["status"] == "UNKNOWN" and dto["steps"][0]["status"] == "UNKNOWN"


# --- T2: flat steps, the checks folded under their trial ---------------------------------------------------------


def verdict_result() -> dict[str, Any]:
    """A case's verdict as the exporter writes it (publication/allure.py): a step per trial, its checks nested."""
    def check(name: str, status: str, at: int) -> dict[str, Any]:
        return {"name": name, "status": status, "stage": "finished", "start": at, "stop": at + 1, "steps": [],
                "attachments": [], "parameters": []}
    return {"uuid": "verdict", "name": "Budget stop", "fullName": "agents/protocol/budget-stop", "status": "failed",
            "start": 100, "stop": 200, "labels": [], "links": [], "parameters": [],
            "steps": [
                {"name": "trial 1 of 2", "status": "passed", "start": 100, "stop": 150, "parameters": [],
                 "steps": [check("tests pass", "passed", 101), check("spend reported", "passed", 103)]},
                {"name": "trial 2 of 2", "status": "failed", "start": 150, "stop": 200, "parameters": [],
                 "statusDetails": {"message": "spend-reported failed"},
                 "steps": [check("tests pass", "passed", 151),
                           {**check("spend reported", "failed", 153), "statusDetails": {"message": "no spend"},
                            "steps": [check("read the ledger", "failed", 154)]}]},
            ]}


def test_t2_steps_are_flat_and_every_check_is_kept_under_its_trial() -> None:
    steps = result_dto(verdict_result())["steps"]
    assert all("steps" not in step for step in steps)
    assert [(s["body"], s["status"]) for s in steps] == [
        ("trial 1 of 2", "PASSED"),
        ("trial 1 of 2 > tests pass", "PASSED"),
        ("trial 1 of 2 > spend reported", "PASSED"),
        ("trial 2 of 2", "FAILED"),
        ("trial 2 of 2 > tests pass", "PASSED"),
        ("trial 2 of 2 > spend reported", "FAILED"),
        ("trial 2 of 2 > spend reported > read the ledger", "FAILED"),
    ]
    assert steps[5]["message"] == "no spend" and steps[3]["message"] == "spend-reported failed"
    assert [s["start"] for s in steps] == [100, 101, 103, 150, 151, 153, 154]
    assert all(set(s) <= {"type", "body", "status", "start", "stop", "duration", "message"} for s in steps)


def test_t2_a_25_4_server_refuses_nested_steps() -> None:
    results = conformance.by_id("25.4", "upload.results")
    step = {"type": "body", "body": "trial 1", "status": "PASSED", "steps": [{"type": "body", "body": "check"}]}
    with pytest.raises(conformance.Refused) as refused:
        conformance.check_request(results, {}, "application/json", {"testSessionId": 1, "results": [
            {"uuid": "u", "status": "PASSED", "steps": [step]}]}, None)
    assert refused.value.reason.startswith("body.results[0].steps[0].steps: unknown field")
    assert "UploadTestResultBodyStepDto" in refused.value.reason
    nested = conformance.by_id("current", "upload.results")
    conformance.check_request(nested, {}, "application/json", {"testSessionId": 1, "results": [
        {"uuid": "u", "status": "PASSED", "steps": [step]}]}, None)  # Allure 3 nests them on newer servers


def test_t2_no_field_is_sent_as_null() -> None:
    dto = result_dto({"uuid": "u", "status": "passed", "steps": [{"name": "s", "status": "passed"}]})
    assert None not in dto.values() and all(None not in step.values() for step in dto["steps"])


# --- T3: manual=true is not a 25.4 fact --------------------------------------------------------------------------


def test_t3_the_table_marks_manual_undefined_on_25_4_and_names_the_exception() -> None:
    session = conformance.by_id("25.4", "upload.session")
    assert "not a parameter" in session.query["manual"]["undefined"]
    entry = next(e for e in conformance.table()["endpoints"] if e["id"] == "upload.session")
    assert [x["where"] for x in entry["exceptions-25.4"]] == [
        "request: ?manual: not a parameter of POST /upload/session"]
    assert "undefined" not in conformance.by_id("current", "upload.session").query["manual"]


# --- T5: the job lookup's citation ---------------------------------------------------------------------------------


def test_t5_no_row_cites_allure3_for_a_job_lookup_it_never_made() -> None:
    """allure3's plugin-testops never calls GET /api/job (its history from the first commit, cc359961, to
    0ebc719f): the job is named by uid in upload/start. The row cites the description alone, and says what
    it leaves open (the answer for no job)."""
    entry = next(e for e in conformance.table()["endpoints"] if e["id"] == "job.find")
    assert all(not s.startswith("allure3") for s in entry["sources"])
    assert "No version of allure3's plugin-testops looks a job up" in entry["note"]
    assert entry["answer"]["open"]


@pytest.mark.parametrize("reading", ["404", "empty-page"])
def test_t5_a_missing_job_is_none_under_either_reading(reading: str) -> None:
    from testops_evidence.testops import api

    with TestOpsServer(token=SENTINEL, job_lookup_none=reading) as server:
        job = server.add_job(12, "evals", external_id="acme/agents_evals")
        client = TestOpsClient(server.url, SENTINEL, project_id=12)
        assert api.find_job(client, 12, "acme/agents_evals") == job["id"]
        assert api.find_job(client, 12, "acme/agents_other") is None


# --- T6: expires_in is optional (RFC 6749 §5.1) --------------------------------------------------------------------


def test_t6_a_jwt_answered_without_expires_in_is_used_and_replaced_before_the_default_lifetime() -> None:
    clock = FakeClock()
    with TestOpsServer(token=SENTINEL, clock=clock.monotonic, jwt_expires_in=JWT_DEFAULT_LIFETIME,
                       jwt_announces_expiry=False) as server:
        server.add_case(12, "A", "a", id=1)
        client = TestOpsClient(server.url, SENTINEL, project_id=12, auth="jwt", clock=clock.time,
                               monotonic=clock.monotonic, sleep=clock.sleep, rng=random.Random(7))
        client.get("/testcase/1")
        client.get("/testcase/1")
        assert len(server.requests("POST", "/uaa/oauth/token")) == 1
        clock.now += JWT_DEFAULT_LIFETIME - 29  # inside the last tenth of the default life
        client.get("/testcase/1")
        assert len(server.requests("POST", "/uaa/oauth/token")) == 2
        assert [e.status for e in server.requests("GET")] == [200, 200, 200]


def test_t6_the_default_lifetime_is_documented() -> None:
    text = (ROOT / "docs" / "testops.md").read_text(encoding="utf-8")
    assert f"{JWT_DEFAULT_LIFETIME} s" in text and "RFC 6749" in text


# --- T7: every reconcile kind is one a flow writes, and the docs list exactly those -------------------------------


def _kinds_written() -> set[str]:
    """The ``kind`` arguments of every Stages.send / Stages.mark call in the TestOps flows."""
    kinds = set()
    for path in (ROOT / "src" / "testops_evidence" / "testops").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("send", "mark") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                kinds.add(node.args[1].value)
    return kinds


def test_t7_reconcile_observes_only_kinds_a_flow_writes_and_the_docs_list_them() -> None:
    written = _kinds_written()
    observed = set(observe._OBSERVERS)
    assert observed <= written, sorted(observed - written)
    docs = (ROOT / "docs" / "testops.md").read_text(encoding="utf-8")
    table = docs[docs.index("| `kind` | Stage used |"):]
    rows = table[:table.index("\n\n")].splitlines()[2:]  # below the header and its rule
    listed = {m.group(1) for row in rows if (m := re.match(r"\| `([a-z-]+)` \|", row))}
    assert listed <= written, sorted(listed - written)
    assert observed <= listed


# --- T8: the 25.4 server's answers are the description's -----------------------------------------------------------


def test_t8_the_25_4_server_answers_202_to_add_content_and_entity_in_attachment_rows() -> None:
    import requests

    with TestOpsServer(token=SENTINEL, generation="25.4") as server:
        launch = server.add_launch(12, "L")
        headers = {"Authorization": f"Api-Token {SENTINEL}"}
        session = requests.post(f"{server.url}/api/upload/session", json={"launchId": launch["id"]}, headers=headers,
                                timeout=10).json()
        answer = requests.post(f"{server.url}/api/upload/test-result", headers=headers, timeout=10, json={
            "testSessionId": session["id"], "results": [{"uuid": "u", "status": "PASSED"}]}).json()
        (result_id,) = answer["resultIds"]
        files = [("file", ("e.json", b"{}", "application/json"))]
        added = requests.post(f"{server.url}/api/upload/test-result/{result_id}/attachment", files=files,
                              headers=headers, timeout=10)
        assert (added.status_code, added.content) == (202, b"")
        rows = requests.post(f"{server.url}/api/testresult/attachment", params={"testResultId": result_id},
                             files=files, headers=headers, timeout=10).json()
        assert [row["entity"] for row in rows] == ["TestResultAttachmentRowDto"]
        assert json.loads(json.dumps(rows))[0]["name"] == "e.json"
