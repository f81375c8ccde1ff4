"""stream with the TestOps backend: each ready case's results go into the selection's launch while the matrix
runs (GitHub REST test server for the run's jobs, TestOps test server of both generations for the launch), through
the batch upload's session and chunk code, once-marked, so a re-run of the stream job sends nothing twice."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import test_stream
from evidence_support import (
    HEAD_SHA,
    RUN_ID,
    SENTINEL,
    TestOpsBinding,
    bound_to,
    cell,
    make_selection,
    small_contract,
    write_contract,
    write_worker_record,
)
from helpers import run_mode, secret_leaks
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence.campaign.matrix import plan_matrices
from testops_evidence.contract import Contract
from testops_evidence.publication.stream import LEDGER_NAME

CONTRACT = small_contract(cases=6, testops=True)
JOBS = plan_matrices(list(CONTRACT.cases), CONTRACT.lanes).jobs()


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=test_stream.TOKEN) as server:
        server.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        yield server


@pytest.fixture
def testops(testops_generation: str) -> Iterator[TestOpsServer]:
    with TestOpsServer(token=SENTINEL) as server:
        yield server


class TestOpsStream(test_stream.Campaign):
    """The stream's campaign bound to a job run and launch of the TestOps test server."""

    __test__ = False

    def __init__(self, tmp_path: Path, github: GitHubServer, server: TestOpsServer,
                 contract: Contract = CONTRACT) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        super().__init__(tmp_path, github)
        self.contract, self.jobs = contract, plan_matrices(list(contract.cases), contract.lanes).jobs()
        job_uid = f"acme/agents_{self.env['GITHUB_WORKFLOW']}"
        seeded = server.seed_contract(contract, job_url="https://github.com/acme/agents/actions/workflows/"
                                      "agent-evals.yml", job_external_id=job_uid)
        self.launch = server.add_launch(contract.testops.project_id, "Agent protocol evals #42")
        self.jobrun = server.add_jobrun(seeded["job-id"], launch_id=self.launch["id"],
                                        url=f"https://github.com/acme/agents/actions/runs/{RUN_ID}",
                                        case_ids=seeded["case-ids"])
        binding = TestOpsBinding(endpoint=server.url, project_id=contract.testops.project_id,
                                 plan_id=contract.testops.plan_id, plan_name=contract.testops.plan_name,
                                 job_run_id=self.jobrun["id"], job_id=seeded["job-id"], launch_id=self.launch["id"],
                                 job_uid=job_uid, job_run_uid=str(RUN_ID))
        selection, self.digest = make_selection(tmp_path, contract, self.env, testops=binding,
                                                 name="selection-testops.json")
        self.token_env = {**self.env, "ALLURE_TOKEN": SENTINEL}  # the stream and publish jobs' (never a worker's)
        self.options = {"contract": str(write_contract(contract, tmp_path / "contract.json")),
                        "selection-path": str(selection), "selection-sha256": self.digest,
                        "artifact-prefix": test_stream.PREFIX, "testops-endpoint": server.url}
        self.server = server

    def artifact_zip_as(self, job: str, where: str, failing: frozenset[str] = frozenset()) -> bytes:
        directory = self.tmp / where / job
        directory.mkdir(parents=True)
        for key, _trial in self.jobs[job]:
            failed = [next(iter(self.contract.case(key).checks))] if key in failing else []
            document = cell(self.contract, key, disposition="behavior_failure" if failed else "passed", failed=failed)
            (directory / f"{key}.json").write_text(json.dumps(bound_to(document, self.digest)))
        write_worker_record(directory, job, self.digest)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for path in sorted(directory.rglob("*")):
                archive.write(path, str(path.relative_to(directory)))
        return buffer.getvalue()

    def stream(self, script: list[Callable[[], None]], **options: str) -> tuple[Any, Any]:
        worker_env, self.env = self.env, self.token_env
        try:
            return super().stream(script, **options)
        finally:
            self.env = worker_env

    def stored(self) -> dict[str, str]:
        return {r["fullName"]: r["status"] for r in self.server.launch_results(self.launch["id"])}


def test_results_reach_the_launch_before_the_last_worker_ends_and_a_rerun_sends_nothing_again(
        tmp_path: Path, github: GitHubServer, testops: TestOpsServer) -> None:
    campaign = TestOpsStream(tmp_path, github, testops)
    jobs = list(JOBS)
    assert len(jobs) >= 2
    for job in jobs:
        campaign.start(job)
    seen: list[int] = []

    def then_finish(job: str) -> Callable[[], None]:
        def step() -> None:
            seen.append(len(campaign.stored()))  # what TestOps holds before this worker ends
            campaign.finish(job, failing=frozenset({"budget-stop"}))
        return step

    run, _clock = campaign.stream([then_finish(job) for job in jobs])
    assert run.exit_code == 0, run.summary
    last = len(JOBS[jobs[-1]])
    # While the last worker still ran, every other worker's cases were already in the launch.
    assert seen[0] == 0 and seen[-1] == len(CONTRACT.cases) - last and seen == sorted(seen)
    stored = campaign.stored()
    assert len(stored) == len(CONTRACT.cases)
    assert stored["agents/protocol/budget-stop"] == "failed"
    assert list(stored.values()).count("passed") == len(CONTRACT.cases) - 1
    # One session for the whole stream; one chunk request per poll that made cases ready.
    routes = [(e.method, e.route) for e in testops.mutations()]
    assert routes[:2] == [("POST", "/upload/start"), ("POST", "/upload/session")]
    assert routes[2:] == [("POST", "/upload/test-result")] * len(jobs)
    ledger = json.loads((tmp_path / "stream" / LEDGER_NAME).read_text())
    ids = {entry["key"]: entry["testops-result-ids"] for entry in ledger["published"]}
    by_id = {r["id"]: r for r in testops.launch_results(campaign.launch["id"])}
    assert sorted(i for one in ids.values() for i in one) == sorted(by_id)
    assert secret_leaks(run, SENTINEL, tmp_path / "stream") == []

    # A re-run of the stream job (same state and stream directories) sends nothing again.
    before = len(testops.mutations())
    again, _clock = campaign.stream([])
    assert again.exit_code == 0, again.summary
    assert len(testops.mutations()) == before and len(campaign.stored()) == len(CONTRACT.cases)


def publish(campaign: TestOpsStream, stream: dict[str, str] | None) -> tuple[object, object]:
    """The publish job after the matrix: export of the same cells, upload (told what the stream sent), verify."""
    exported = campaign.export()
    assert exported.exit_code in (0, 1), exported.summary
    options = {**campaign.options, "state-dir": str(campaign.tmp / "publish-state"),
               "results-dir": str(campaign.tmp / "allure-results"), "receipt-sha256": exported.outputs["receipt-sha256"]}
    if stream is not None:
        options.update({"stream-dir": str(campaign.tmp / "stream"), "stream-sha256": stream["stream-sha256"]})
    uploaded = run_mode("upload", campaign.tmp, options, campaign.token_env)
    verified = run_mode("verify", campaign.tmp, options, campaign.token_env)
    return uploaded, verified


def test_upload_after_the_stream_sends_no_result_again_and_verifies_as_the_batch_path(
        tmp_path: Path, github: GitHubServer, testops: TestOpsServer, testops_generation: str) -> None:
    failing = frozenset({"budget-stop"})
    campaign = TestOpsStream(tmp_path / "stream-way", github, testops)
    for job in JOBS:
        campaign.start(job)
    run, _clock = campaign.stream([lambda job=job: campaign.finish(job, failing=failing) for job in JOBS])
    assert run.exit_code == 0, run.summary
    streamed = len(testops.requests("POST", "/upload/test-result"))
    uploaded, verified = publish(campaign, run.outputs)
    assert uploaded.exit_code == 0, uploaded.summary
    assert verified.exit_code == 1 and "Verified 6 published results" in verified.summary, verified.summary
    # The publish job sent no result again: only its session, the evidence and the stop.
    assert len(testops.requests("POST", "/upload/test-result")) == streamed
    assert len(campaign.stored()) == len(CONTRACT.cases)
    stream_way = campaign.stored()

    # The batch path on the same cells, against a fresh launch: the same statuses under the same names.
    with GitHubServer(token=test_stream.TOKEN) as github2, TestOpsServer(token=SENTINEL) as testops2:
        github2.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        batch = TestOpsStream(tmp_path / "batch-way", github2, testops2)
        for job in JOBS:
            batch.start(job)
            batch.finish(job, failing=failing)
        uploaded, verified = publish(batch, None)
        assert (uploaded.exit_code, verified.exit_code) == (0, 1), (uploaded.summary, verified.summary)
        assert batch.stored() == stream_way


def test_a_streamed_case_measured_differently_is_refused_not_overwritten(
        tmp_path: Path, github: GitHubServer, testops: TestOpsServer) -> None:
    campaign = TestOpsStream(tmp_path, github, testops)
    for job in JOBS:
        campaign.start(job)
    run, _clock = campaign.stream([lambda job=job: campaign.finish(job) for job in JOBS])
    assert run.exit_code == 0, run.summary
    before = len(testops.mutations())
    # The export is made from other cells than the stream published (budget-stop now failing).
    job = next(job for job, units in JOBS.items() if any(key == "budget-stop" for key, _t in units))
    campaign.zips[job] = campaign.artifact_zip_as(job, "other", frozenset({"budget-stop"}))
    uploaded, _verified = publish(campaign, run.outputs)
    assert (uploaded.exit_code, uploaded.outputs["error-code"]) == (3, "stream.mismatch"), uploaded.summary
    assert len(testops.mutations()) == before  # nothing sent, nothing overwritten
    assert campaign.stored()["agents/protocol/budget-stop"] == "passed"
