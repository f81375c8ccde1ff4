"""verify against the TestOps test server: every receipt row exactly once with its status, a deadline
instead of a fixed retry count, detail fetched at most once per result, and a small request count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evidence_support import SENTINEL, TestOpsCampaign, cell, small_contract
from servers.testops_server import TestOpsServer

CONTRACT = small_contract(testops=True)


@pytest.fixture
def server() -> Iterator[TestOpsServer]:
    with TestOpsServer(token=SENTINEL, visible_after_polls=2) as srv:
        yield srv


def published(server: TestOpsServer, tmp_path: Path, contract=CONTRACT) -> TestOpsCampaign:
    campaign = TestOpsCampaign(server, tmp_path, contract)
    campaign.export([cell(contract, "get-task-context"),
                     cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"])])
    upload = campaign.run("upload")
    assert upload.exit_code == 0, upload.summary
    return campaign


def stored(server: TestOpsServer, campaign: TestOpsCampaign, full_name: str) -> dict[str, object]:
    return next(r for r in server.results.values()
                if r["launchId"] == campaign.launch["id"] and r["fullName"] == full_name)


def test_a_duplicate_result_is_refused(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    server.visible_after_polls = 0
    for result in server.results.values():
        result["_visibleAt"] = 0
    server.fail("GET", r"/testresult", "duplicate", times=None)
    verify = campaign.run("verify")
    assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.duplicate")
    assert verify.failure()["expected"] == "exactly once"


def test_a_wrong_status_is_a_mismatch(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    stored(server, campaign, "agents/protocol/budget-stop")["status"] = "passed"
    verify = campaign.run("verify")
    assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.mismatch")
    failure = verify.failure()
    assert (failure["field"], failure["expected"], failure["actual"]) == ("budget-stop/status", "failed", "passed")


def test_a_missing_result_is_reported_at_the_deadline(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    victim = stored(server, campaign, "agents/protocol/company-credential-approval")
    del server.results[victim["id"]]
    verify = campaign.run("verify", **{"deadline-seconds": "120"})
    assert (verify.exit_code, verify.outputs["error-code"]) == (4, "verify.missing")
    assert "company-credential-approval" in verify.failure()["actual"]
    # Backoff to the deadline: doubling waits capped at 30 s, never past 120 s in total.
    assert campaign.clock.sleeps == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert sum(campaign.clock.sleeps) <= 120


def test_a_result_under_another_test_case_id_is_missing_with_a_hint(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    stored(server, campaign, "agents/protocol/budget-stop")["testCaseId"] = None
    verify = campaign.run("verify", **{"deadline-seconds": "10"})
    assert verify.outputs["error-code"] == "verify.missing"
    assert "under another test case id" in verify.failure()["message"]


def test_unknown_status_waits_for_the_final_one(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    result = stored(server, campaign, "agents/protocol/budget-stop")
    result["status"] = "unknown"
    original = server._r_list_results

    def settle_later(r):  # the status becomes final on the fifth listing
        if len(server.requests("GET", r"/testresult")) >= 5:
            result["status"] = "failed"
        return original(r)

    server._r_list_results = settle_later
    verify = campaign.run("verify")
    assert (verify.exit_code, verify.outputs["verified-count"]) == (1, "3")
    assert len(server.requests("GET", r"/testresult")) == 5


def test_detail_depth_fetches_each_result_once_and_checks_its_job_run(server: TestOpsServer, tmp_path: Path) -> None:
    server.visible_after_polls = 0
    campaign = published(server, tmp_path)
    # One result becomes visible only later, so verify polls several times; details are never re-fetched.
    late = stored(server, campaign, "agents/protocol/company-credential-approval")
    late["_visibleAt"] = 4
    verify = campaign.run("verify", **{"verify-depth": "detail"})
    assert verify.exit_code == 1, verify.summary
    details = [e.route for e in server.requests("GET", r"/testresult/\d+")]
    assert sorted(details) == sorted(f"/testresult/{r['id']}" for r in server.launch_results(campaign.launch["id"]))
    assert len(server.requests("GET", r"/testresult")) == 4


def test_detail_depth_refuses_a_result_of_another_job_run(server: TestOpsServer, tmp_path: Path) -> None:
    server.visible_after_polls = 0
    campaign = published(server, tmp_path)
    stored(server, campaign, "agents/protocol/get-task-context")["jobRunId"] = 999_999
    verify = campaign.run("verify", **{"verify-depth": "detail"})
    assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.mismatch")
    assert verify.failure()["field"] == "get-task-context/jobRun.id"


def test_an_invalid_depth_is_a_usage_error(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = published(server, tmp_path)
    verify = campaign.run("verify", **{"verify-depth": "deep"})
    assert (verify.exit_code, verify.outputs["error-code"]) == (2, "input.verify-depth")


def test_verify_of_1000_results_needs_a_few_dozen_requests(tmp_path: Path) -> None:
    contract = small_contract(testops=True, cases=1000)
    with TestOpsServer(token=SENTINEL, visible_after_polls=6) as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        campaign.export([cell(contract, c.key) for c in contract.cases])
        assert campaign.run("upload").exit_code == 0
        server.reset_log()
        verify = campaign.run("verify")
        assert (verify.exit_code, verify.outputs["verified-count"], verify.outputs["all-passed"]) == (0, "1000", "true")
        requests = [e for e in server.log if e.path != "/api/uaa/oauth/token"]
        assert len(requests) <= 36, len(requests)
        assert all(e.route == "/testresult" and e.param("size") == "1000" for e in requests)
        facts = json.loads((tmp_path / "state" / "verify.json").read_text())
        assert facts["requests"] == len(requests) and facts["polls"] == 7


def test_another_uploads_result_of_the_same_case_does_not_verify_this_one(server: TestOpsServer,
                                                                          tmp_path: Path) -> None:
    # The launch holds a result of budget-stop with the right test case, name and status, but TestOps
    # created it for another upload (an earlier attempt into the same job run); this upload's own result
    # is gone. Matching by case and name alone verified the stale result as this publication.
    campaign = published(server, tmp_path)
    ours = stored(server, campaign, "agents/protocol/budget-stop")
    del server.results[ours["id"]]
    stale_id = max(server.results) + 1000
    server.results[stale_id] = {**ours, "id": stale_id, "uuid": "stale-upload-uuid"}
    verify = campaign.run("verify")
    assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.mismatch")
    failure = verify.failure()
    assert (failure["field"], failure["expected"], failure["actual"]) == ("budget-stop/id", ours["id"], stale_id)
