"""upload (and verify) against the TestOps test server: the session flow, once-markers, uncertainty,
the binding to the selection's job run and launch, the evidence bundle, and the request budget."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evidence_support import HEAD_SHA, RUN_ID, SENTINEL, TestOpsCampaign, cell, small_contract
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.publication.files import BUNDLE_PART_LIMIT, bundle_parts

CONTRACT = small_contract(testops=True)


@pytest.fixture
def server() -> Iterator[TestOpsServer]:
    with TestOpsServer(token=SENTINEL, visible_after_polls=3) as srv:
        yield srv


def mixed_cells(contract=CONTRACT) -> list[dict[str, object]]:
    return [cell(contract, "get-task-context"),
            cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
            cell(contract, "company-credential-approval")]


def clean_log(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if not line.startswith("::add-mask::"))


def test_upload_then_verify_with_results_that_appear_after_several_polls(server: TestOpsServer, tmp_path: Path,
                                                                         testops_generation: str) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    assert campaign.export(mixed_cells()).exit_code == 1
    upload = campaign.run("upload")
    assert upload.exit_code == 0, upload.summary
    launch_id = campaign.launch["id"]
    assert upload.outputs == {"launch-id": str(launch_id), "launch-url": f"{server.url}/launch/{launch_id}",
                              "uploaded-count": "3", "published": "true"}

    routes = [(e.method, e.route) for e in server.mutations()]
    evidence = ([("POST", "/launch/attachment")] if testops_generation == "current" else
                [("POST", "/testresult/attachment")] * 3)  # 25.4: no launch attachments, one per result
    assert routes == [("POST", "/upload/start"), ("POST", "/upload/session"), ("POST", "/upload/test-result"),
                      *evidence, ("POST", "/upload/stop")]
    start = server.requests("POST", "/upload/start")[0].body
    assert start["jobRun"]["id"] == campaign.jobrun["id"] and start["launch"] == {"id": launch_id}
    assert start["job"]["uid"] == "acme/agents_Agent evals" and start["jobRun"]["uid"] == str(campaign.env[
        "GITHUB_RUN_ID"])
    stored = {r["fullName"]: r for r in server.launch_results(launch_id)}
    assert {name: (r["status"], r["testCaseId"], r["jobRunId"]) for name, r in stored.items()} == {
        "agents/protocol/get-task-context": ("passed", 194, campaign.jobrun["id"]),
        "agents/protocol/budget-stop": ("failed", 201, campaign.jobrun["id"]),
        "agents/protocol/company-credential-approval": ("passed", 195, campaign.jobrun["id"]),
    }
    assert server.jobruns[campaign.jobrun["id"]]["status"] == "failed"

    receipt = load_receipt(tmp_path / "allure-results-receipt.json")
    evidence = [(row, (tmp_path / "allure-results" / row["attachment-file"]).read_bytes()) for row in receipt.results]
    if testops_generation == "current":
        # The evidence travels as one launch attachment holding every exported attachment document; the server
        # keeps its digest, which must be the digest of the bundle rebuilt here from the exported files.
        (bundle,) = server.launch_attachments
        assert bundle["name"] == f"testops-evidence-agent-protocol-run-{campaign.env['GITHUB_RUN_ID']}.json"
        (rebuilt,) = bundle_parts(receipt, evidence)
        assert bundle["sha256"] == hashlib.sha256(rebuilt).hexdigest()
        document = json.loads(rebuilt)
        assert document["receipt"] == receipt.document and document["receipt-sha256"] == receipt.sha256
        assert [(e["uuid"], e["sha256"], e["document"]) for e in document["evidence"]] == [
            (row["uuid"], row["attachment-sha256"], json.loads(data)) for row, data in evidence]
    else:
        # Each result carries its own evidence document, exactly the exported bytes.
        by_name = {r["fullName"]: r for r in server.launch_results(launch_id)}
        for row, data in evidence:
            (attached,) = by_name[row["full-name"]]["attachments"]
            assert (attached["name"], attached["sha256"]) == (row["attachment-file"], hashlib.sha256(data).hexdigest())
        assert "one request per result" in upload.summary and "no launch attachments" in upload.summary
    chunk = server.requests("POST", r"/upload/test-result")[0].body
    results = {dto["uuid"]: dto for dto in chunk["results"]}
    for row in receipt.results:
        params = {p["name"]: p["value"] for p in results[row["uuid"]]["parameters"]}
        assert params["evidence sha256"] == row["attachment-sha256"]  # a result names its bundle entry

    verify = campaign.run("verify")
    assert verify.exit_code == 1, verify.summary  # published and verified; one case failed
    assert {k: v for k, v in verify.outputs.items() if not k.startswith("attestation")} == {
        "verified-count": "3", "all-passed": "false", "cost-nanodollars": "", "cost-coverage": "unavailable",
        "comparison": "", "regressions": "[]", "comparison-difference": "",
        # two of the three cases passed, one trial each: a wide interval (clustered by case)
        "pass-rate": "0.666667", "pass-rate-ci": "[0.013345,1.0]"}
    statement = json.loads(Path(verify.outputs["attestation-path"]).read_text())
    assert statement["predicate"]["backend"] == "testops"
    assert statement["predicate"]["launch"]["id"] == campaign.launch["id"]
    polls = server.requests("GET", "/testresult")
    assert len(polls) == 4  # hidden for three polls, visible on the fourth
    assert campaign.clock.sleeps == [2.0, 4.0, 8.0]
    assert not campaign.leaks()
    for run in (upload, verify):
        assert SENTINEL not in clean_log(run.log) + run.summary + json.dumps(run.outputs)


def test_all_passed_verifies_with_exit_zero(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    assert campaign.export([cell(CONTRACT, c.key) for c in CONTRACT.cases]).exit_code == 0
    assert campaign.run("upload").exit_code == 0
    verify = campaign.run("verify")
    assert (verify.exit_code, verify.outputs["all-passed"]) == (0, "true")


def test_a_second_upload_sends_nothing(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    assert campaign.run("upload").exit_code == 0
    before = len(server.mutations())
    again = campaign.run("upload")
    assert again.exit_code == 0 and "Already published" in again.summary
    assert len(server.mutations()) == before


def test_a_dropped_chunk_is_uncertain_and_reconcile_resolves_it(server: TestOpsServer, tmp_path: Path) -> None:
    server.visible_after_polls = 0
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    server.fail("POST", r"/upload/test-result", "drop")
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (4, "testops.uncertain")
    assert "reconcile" in upload.summary
    assert len(server.requests("POST", r"/upload/test-result")) == 1  # never re-sent
    assert len(server.launch_results(campaign.launch["id"])) == 3  # the server had committed it
    assert "upload-chunk-1" in json.dumps(upload.failure())

    again = campaign.run("upload")
    assert (again.exit_code, again.outputs["error-code"]) == (3, "upload.already_started")
    assert len(server.requests("POST", r"/upload/test-result")) == 1

    # reconcile re-admits the run over REST before it uses the TestOps token: the run as GitHub serves it.
    with GitHubServer() as github:
        github.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        event = tmp_path / "event.json"
        event.write_text(json.dumps(github.event_payload(RUN_ID)), encoding="utf-8")
        campaign.env = {**campaign.env, "GITHUB_API_URL": github.api_url(), "GITHUB_EVENT_PATH": str(event),
                        "GITHUB_TOKEN": github.token}
        reconcile = campaign.run("reconcile")
    assert json.loads(reconcile.outputs["reconciled"]) == ["upload-chunk-1"], reconcile.summary
    assert not campaign.leaks()  # once-markers (with their replayable request), failure.json, summaries
    for run in (upload, again, reconcile):
        assert SENTINEL not in clean_log(run.log) + run.summary


@pytest.mark.parametrize(("route", "status"), [(r"/upload/stop", 502), (r"/upload/session", 504)])
def test_a_gateway_error_on_a_mutation_is_uncertain(server: TestOpsServer, tmp_path: Path, route: str,
                                                    status: int) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    server.fail("POST", route, "status", status=status, commit=True)
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (4, "testops.uncertain")
    assert len(server.requests("POST", route)) == 1


def test_a_refused_session_sends_no_results(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    server.launches[campaign.launch["id"]]["closed"] = True
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (4, "testops.http_409")
    assert not server.requests("POST", r"/upload/test-result")


def test_an_upload_attached_to_another_launch_is_refused(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    other = server.add_launch(CONTRACT.testops.project_id, "someone else's launch")
    server.jobruns[campaign.jobrun["id"]]["launchId"] = other["id"]
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (3, "upload.binding")
    assert upload.failure()["field"] == "launchId"
    assert not server.requests("POST", r"/upload/test-result")


def test_a_tampered_result_is_refused_before_anything_is_sent(server: TestOpsServer, tmp_path: Path) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    victim = next((tmp_path / "allure-results").glob("*-result.json"))
    victim.write_bytes(victim.read_bytes().replace(b'"failed"', b'"passed"').replace(b'"passed"', b'"passed" '))
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (3, "upload.results_invalid")
    assert not server.mutations()


def test_the_upload_budget_at_ten_thousand_results(tmp_path: Path, testops_generation: str) -> None:
    """Requests per uploaded result <= 0.02 for 10,000 results on current servers (server log), one more per
    result on 25.4 servers (no launch attachments: each result's evidence goes to it), and verify reads them
    in pages."""
    # 25.4 costs one request per result, which a thousand results show as well as ten thousand, in a tenth
    # of the time (benchmarks/ measures both generations at full size).
    total = 10_000 if testops_generation == "current" else 1_000
    contract = small_contract(testops=True, cases=total)
    # fsync of 20,000 result files dominates an export on a disk; tmpfs keeps this test about the requests.
    shm = Path("/dev/shm")
    work = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    try:
        with TestOpsServer(token=SENTINEL) as server:
            campaign = TestOpsCampaign(server, work, contract)
            campaign.export([cell(contract, c.key) for c in contract.cases[:500]])
            upload = campaign.run("upload")
            assert upload.exit_code == 0, upload.summary
            sent = [e for e in server.log if e.path != "/api/uaa/oauth/token"]
            assert len(server.launch_results(campaign.launch["id"])) == total
            # start, job run read, session, the chunks, the evidence, stop
            chunks = math.ceil(total / 100)
            if testops_generation == "current":
                assert len(sent) / 10_000 <= 0.02, len(sent)
                parts = len(server.launch_attachments)
                assert parts > 1 and all(a["contentLength"] <= BUNDLE_PART_LIMIT for a in server.launch_attachments)
                assert len(sent) == 4 + chunks + parts
            else:
                assert not server.launch_attachments
                assert len(sent) == 4 + chunks + total  # 1.0104 per result
                assert all(len(r["attachments"]) == 1 for r in server.launch_results(campaign.launch["id"]))
            publication = json.loads((work / "state" / "upload.json").read_text())
            assert publication["requests-per-result"] == round(len(sent) / total, 4)
            server.reset_log()
            verify = campaign.run("verify")
            assert verify.outputs["verified-count"] == str(total)
            assert len(server.log) == total // 1000  # one pass over pages of 1,000
    finally:
        if work != tmp_path:
            shutil.rmtree(work, ignore_errors=True)


# --- the real API (issue 13): each of these failed against the conformance-enforcing server before -------------


def test_the_upload_leaves_the_jobs_own_parameters_alone(server: TestOpsServer, tmp_path: Path) -> None:
    """job.parameters replaces the job's parameters (it does not merge), so the start sends none at all."""
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    job = server.jobs[campaign.jobrun["jobId"]]
    job["parameters"] = [{"id": 1, "value": "main"}]  # e.g. the branch TestOps dispatches the workflow with
    campaign.export(mixed_cells())
    assert campaign.run("upload").exit_code == 0
    start = server.requests("POST", "/upload/start")[0].body
    assert "parameters" not in start["job"] and "parameters" not in start["jobRun"]
    assert job["parameters"] == [{"id": 1, "value": "main"}]


def test_the_stop_finds_the_job_run_by_the_uids_testops_knows(server: TestOpsServer, tmp_path: Path) -> None:
    """/upload/stop names the job run by (projectId, jobUid, jobRunUid) only; the uids are the ones select
    confirmed with TestOps, so the stop finds the run the start attached to."""
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    assert campaign.run("upload").exit_code == 0
    stop = server.requests("POST", "/upload/stop")[0]
    assert stop.status == 200 and stop.body == {"projectId": CONTRACT.testops.project_id,  # type: ignore[union-attr]
                                                "jobUid": campaign.job_uid, "jobRunUid": campaign.env["GITHUB_RUN_ID"],
                                                "status": "failed"}
    run = server.jobruns[campaign.jobrun["id"]]
    assert (run["stage"], run["status"], run["uid"]) == ("finished", "failed", campaign.env["GITHUB_RUN_ID"])


def test_a_job_run_testops_knows_under_another_uid_sends_no_result(server: TestOpsServer, tmp_path: Path) -> None:
    """If the job run answers with another uid after the start, the stop could never find it: refused before
    the first result is stored."""
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    original = server._r_upload_start

    def renaming(request: object) -> tuple[int, object]:
        answer = original(request)  # type: ignore[arg-type]
        server.jobruns[campaign.jobrun["id"]]["uid"] = "another-uid"
        return answer

    server._r_upload_start = renaming  # type: ignore[method-assign]
    upload = campaign.run("upload")
    assert (upload.exit_code, upload.outputs["error-code"]) == (3, "upload.binding")
    assert [e.route for e in server.mutations()] == ["/upload/start"]
    assert not server.launch_results(campaign.launch["id"])


def test_the_publication_records_what_the_server_answered(server: TestOpsServer, tmp_path: Path,
                                                         testops_generation: str) -> None:
    campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
    campaign.export(mixed_cells())
    upload = campaign.run("upload")
    assert upload.exit_code == 0, upload.summary
    publication = json.loads((tmp_path / "state" / "upload.json").read_text())
    capabilities = publication["capabilities"]
    assert capabilities["generation"] == testops_generation
    assert capabilities["launch-attachment"] is (testops_generation == "current")
    assert capabilities["result-ids"] == ("by uuid" if testops_generation == "current" else "in the order sent")
    assert publication["evidence"]["form"] == ("launch-bundle" if testops_generation == "current" else "per-result")
    assert sorted(publication["result-ids"].values()) == sorted(r["id"] for r in
                                                               server.launch_results(campaign.launch["id"]))
    assert f"{testops_generation} generation" in upload.summary
    assert campaign.run("verify").outputs["verified-count"] == "3"


def test_a_25_4_server_that_reorders_its_result_ids_never_verifies(tmp_path: Path) -> None:
    """Attack: 25.4 answers the ids alone, so their order is the only link to the uuids. A server (or a
    proxy) that answers them in another order makes upload attach every result's evidence to the wrong
    result; verify must then refuse, never report the publication as verified."""
    with TestOpsServer(token=SENTINEL, generation="25.4") as server:
        campaign = TestOpsCampaign(server, tmp_path, CONTRACT)
        campaign.export(mixed_cells())
        original = server._r_upload_results

        def reordered(request: object) -> tuple[int, object]:
            status, answer = original(request)  # type: ignore[arg-type]
            return status, {"resultIds": list(reversed(answer["resultIds"]))}  # type: ignore[index]

        server._r_upload_results = reordered  # type: ignore[method-assign]
        assert campaign.run("upload").exit_code == 0  # nothing in the answer tells the order apart
        verify = campaign.run("verify")
        assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.mismatch"), verify.summary
        assert verify.outputs.get("verified-count") is None


def test_a_server_that_changes_its_answer_form_mid_upload_is_refused(tmp_path: Path) -> None:
    """The first chunk's answer decides what the server supports; a later chunk answered in the other form
    is not the same server and stops the upload before any evidence is sent."""
    contract = small_contract(testops=True, cases=150)  # two chunks
    with TestOpsServer(token=SENTINEL, generation="current") as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        campaign.export([cell(contract, c.key) for c in contract.cases])
        original = server._r_upload_results

        def switching(request: object) -> tuple[int, object]:
            if server.requests("POST", "/upload/test-result")[1:]:
                server.generation = "25.4"
            return original(request)  # type: ignore[arg-type]

        server._r_upload_results = switching  # type: ignore[method-assign]
        upload = campaign.run("upload")
        assert (upload.exit_code, upload.outputs["error-code"]) == (4, "testops.response_invalid"), upload.summary
        assert not server.launch_attachments and not any(r["attachments"] for r in server.results.values())
