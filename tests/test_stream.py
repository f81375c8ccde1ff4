"""stream: each case is published as soon as its worker job ends, bound as collect-cells binds a worker's artifact
(GitHub REST test server serving jobs that complete while the stream polls); verify-stream then holds what was
published to the export receipt of the same cells (the batch path)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    HEAD_SHA,
    RUN_ID,
    actions_env,
    bound_to,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_contract,
    write_worker_record,
)
from helpers import FakeClock, PhaseRun, run_mode, secret_leaks
from servers.github_server import GitHubServer, evaluate_step_name
from testops_evidence.campaign.matrix import plan_matrices
from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP
from testops_evidence.publication.stream import LEDGER_NAME, RESULTS_DIR

TOKEN = "ghs_streamTestTokenQWXZplmkjnhbgvYR"
CONTRACT = small_contract(cases=6)
JOBS = plan_matrices(list(CONTRACT.cases), CONTRACT.lanes).jobs()
PREFIX = "testops-evidence"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        yield server


class Campaign:
    """A campaign's run as GitHub shows it while its matrix runs: worker jobs start, end and upload."""

    def __init__(self, tmp_path: Path, github: GitHubServer) -> None:
        self.tmp, self.github = tmp_path, github
        event = tmp_path / "event.json"
        event.write_text(json.dumps(github.event_payload(RUN_ID)), encoding="utf-8")
        self.env = {**actions_env(), **github.runner_env(RUN_ID, event_path=str(event)), "GITHUB_TOKEN": TOKEN}
        selection, self.digest = make_selection(tmp_path, CONTRACT, self.env)
        self.options = {"contract": str(write_contract(CONTRACT, tmp_path / "contract.json")),
                        "selection-path": str(selection), "selection-sha256": self.digest, "artifact-prefix": PREFIX}
        self.zips: dict[str, bytes] = {}
        self.job_ids: dict[str, int] = {}

    def display(self, job: str) -> str:
        return f"campaign / {PREFIX} {job}"

    def start(self, job: str) -> None:
        doc = self.github.add_job(RUN_ID, 1, self.display(job), conclusion=None, steps=[])
        self.job_ids[job] = int(doc["id"])

    def _drop(self, job: str) -> None:
        jobs = self.github._jobs.setdefault((RUN_ID, 1), [])
        jobs[:] = [doc for doc in jobs if doc["name"] != self.display(job)]

    def artifact_zip(self, job: str, failing: frozenset[str] = frozenset()) -> bytes:
        return self.artifact_zip_as(job, "worker", failing)

    def artifact_zip_as(self, job: str, where: str, failing: frozenset[str] = frozenset()) -> bytes:
        directory = self.tmp / where / job
        directory.mkdir(parents=True)
        for key, _trial in JOBS[job]:
            failed = [next(iter(CONTRACT.case(key).checks))] if key in failing else []
            document = cell(CONTRACT, key, disposition="behavior_failure" if failed else "passed", failed=failed)
            (directory / f"{key}.json").write_text(json.dumps(bound_to(document, self.digest)))
        write_worker_record(directory, job, self.digest)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for path in sorted(directory.rglob("*")):
                archive.write(path, str(path.relative_to(directory)))
        return buffer.getvalue()

    def finish(self, job: str, *, failing: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The worker uploads its cells and ends: its artifact, and its job record with the upload's report step."""
        data = self.artifact_zip(job, failing)
        self.zips[job] = data
        doc = self.github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{job}", data)
        outputs = {"artifact-id": doc["id"], "artifact-digest": str(doc["digest"]).removeprefix("sha256:")}
        self._drop(job)
        self.github.add_job(RUN_ID, 1, self.display(job), steps=[
            {"name": UPLOAD_STEP, "status": "completed", "conclusion": "success",
             "started_at": "2026-12-01T10:05:00Z", "completed_at": "2026-12-01T10:05:04Z"},
            {"name": evaluate_step_name(REPORT_EXPRESSION, {"upload": outputs}), "status": "completed",
             "conclusion": "success", "started_at": "2026-12-01T10:05:04Z", "completed_at": "2026-12-01T10:05:04Z"}])
        return doc

    def cancel(self, job: str) -> None:
        """The run was cancelled while the worker ran: it ends without its upload step."""
        self._drop(job)
        self.github.add_job(RUN_ID, 1, self.display(job), conclusion="cancelled", steps=[])

    def stream(self, script: list[Callable[[], None]], **options: str) -> tuple[PhaseRun, FakeClock]:
        """Run the stream job; each poll's sleep runs the next step of ``script`` (the matrix going on)."""
        clock = FakeClock()
        steps = list(script)

        def sleep(seconds: float) -> None:
            clock.sleep(seconds)
            if steps:
                steps.pop(0)()

        run = run_mode("stream", self.tmp, {**self.options, "stream-dir": str(self.tmp / "stream"),
                                            "state-dir": str(self.tmp / "stream-state"), **options}, self.env,
                       clock=clock.time, monotonic=clock.monotonic, sleep=sleep,
                       new_uuid=uuid_factory("00000000-0000-4000-8001"))
        return run, clock

    def ledger(self) -> dict[str, Any]:
        return json.loads((self.tmp / "stream" / LEDGER_NAME).read_text())

    def export(self) -> PhaseRun:
        """The batch path after the matrix: collect-cells, the verified artifacts downloaded, export."""
        options = {**self.options, "state-dir": str(self.tmp / "export-state")}
        collected = run_mode("collect-cells", self.tmp, options, self.env)
        assert collected.exit_code == 0, collected.summary
        cells = self.tmp / "cell-results"
        for job, data in self.zips.items():
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                archive.extractall(cells / f"{PREFIX}-cells-1-{job}")
        return run_mode("export", self.tmp, {**options, "cell-results": str(cells),
                                             "results-dir": str(self.tmp / "allure-results")}, self.env,
                        new_uuid=uuid_factory("00000000-0000-4000-8002"))

    def verify_stream(self, exported: PhaseRun, stream: PhaseRun | dict[str, str]) -> PhaseRun:
        outputs = stream if isinstance(stream, dict) else stream.outputs
        return run_mode("verify-stream", self.tmp, {
            **self.options, "state-dir": str(self.tmp / "verify-state"), "results-dir": str(self.tmp / "allure-results"),
            "receipt-sha256": exported.outputs["receipt-sha256"], "stream-dir": str(self.tmp / "stream"),
            "stream-sha256": outputs["stream-sha256"]}, self.env)


def published_keys(campaign: Campaign) -> list[str]:
    return [entry["key"] for entry in campaign.ledger()["published"]]


def test_cases_are_published_as_their_workers_end_and_equal_the_batch_path(tmp_path: Path,
                                                                            github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    jobs = list(JOBS)
    for job in jobs:
        campaign.start(job)
    failing = frozenset({"budget-stop"})
    seen: list[list[str]] = []

    def then_finish(job: str) -> Callable[[], None]:
        def step() -> None:
            seen.append(published_keys(campaign) if (tmp_path / "stream" / LEDGER_NAME).exists() else [])
            campaign.finish(job, failing=failing)
        return step

    # The first poll sees every worker running; the workers then end one by one, the last one last.
    run, clock = campaign.stream([then_finish(job) for job in jobs])
    assert run.exit_code == 0, run.summary
    # While the last worker still ran, every other worker's cases were already published.
    assert len(seen[-1]) == len(CONTRACT.cases) - len(JOBS[jobs[-1]])
    assert seen == sorted(seen, key=len) and seen[0] == []
    ledger = campaign.ledger()
    assert ledger["complete"] is True and len(ledger["published"]) == len(CONTRACT.cases)
    statuses = {entry["key"]: entry["status"] for entry in ledger["published"]}
    assert statuses["budget-stop"] == "failed" and list(statuses.values()).count("passed") == len(statuses) - 1
    results = sorted(p.name for p in (tmp_path / "stream" / RESULTS_DIR).iterdir())
    assert len(results) == 2 * len(CONTRACT.cases)  # a result and its evidence per case
    assert run.outputs["published-count"] == str(len(CONTRACT.cases)) and run.outputs["stream-complete"] == "true"
    assert "stream: published" in run.log and "still running, the slowest" in run.log
    # Bounded polling: the first delay, then back to it after every step with progress.
    assert clock.sleeps and max(clock.sleeps) <= 120
    assert secret_leaks(run, TOKEN, tmp_path / "stream") == []

    exported = campaign.export()
    assert exported.exit_code == 1, exported.summary  # one case failed
    verified = campaign.verify_stream(exported, run)
    assert verified.exit_code == 1, verified.summary  # verified, but not every case passed
    assert verified.outputs["published-count"] == str(len(CONTRACT.cases))
    receipt = json.loads(Path(exported.outputs["receipt-path"]).read_text())
    assert {row["key"]: row["status"] for row in receipt["results"]} == statuses


def test_a_re_run_of_the_stream_job_publishes_no_case_twice(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    first, _clock = campaign.stream([])
    assert first.exit_code == 0, first.summary
    files = sorted(p.name for p in (tmp_path / "stream" / RESULTS_DIR).iterdir())
    again, _clock = campaign.stream([])
    assert again.exit_code == 0, again.summary
    assert sorted(p.name for p in (tmp_path / "stream" / RESULTS_DIR).iterdir()) == files
    assert "already published by an earlier run of this job" in again.log
    assert len(campaign.ledger()["published"]) == len(CONTRACT.cases)


def test_a_campaign_cancelled_after_half_keeps_the_finished_half_published(tmp_path: Path,
                                                                            github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    jobs = list(JOBS)
    half = len(jobs) // 2
    for job in jobs:
        campaign.start(job)

    def finish(job: str) -> Callable[[], None]:
        def step() -> None:
            campaign.finish(job)
        return step

    def cancel_the_rest() -> None:
        for job in jobs[half:]:
            campaign.cancel(job)

    script = [*(finish(job) for job in jobs[:half]), cancel_the_rest]
    run, _clock = campaign.stream(script)
    assert run.exit_code == 0, run.summary
    finished = [key for job in jobs[:half] for key, _trial in JOBS[job]]
    assert published_keys(campaign) == finished
    ledger = campaign.ledger()
    assert [u["job"] for u in ledger["unfinished"]] == sorted(jobs[half:])
    assert "ended without an artifact" in run.summary

    exported = campaign.export()
    receipt = json.loads(Path(exported.outputs["receipt-path"]).read_text())
    never = {row["key"]: row for row in receipt["results"] if row["key"] not in finished}
    assert never and all(row["status"] == "broken" and row["code"] == "campaign.unfinished" for row in never.values())
    verified = campaign.verify_stream(exported, run)
    assert verified.exit_code == 1, verified.summary  # verified; the unfinished cases are broken
    assert verified.outputs["published-count"] == str(len(finished))


def test_the_stream_stops_at_its_deadline_and_leaves_the_rest_to_export(tmp_path: Path,
                                                                       github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    jobs = list(JOBS)
    campaign.finish(jobs[0])
    for job in jobs[1:]:
        campaign.start(job)  # never ends while the stream watches
    run, clock = campaign.stream([], **{"stream-deadline-seconds": "600"})
    assert run.exit_code == 0, run.summary
    assert run.outputs["stream-complete"] == "false"
    assert sum(clock.sleeps) <= 600
    assert [s for s in clock.sleeps] == sorted(clock.sleeps)  # backoff while nothing changes
    assert published_keys(campaign) == [key for key, _trial in JOBS[jobs[0]]]
    assert "stream-deadline-seconds reached" in run.log
    assert [r["job"] for r in campaign.ledger()["running"]] == sorted(jobs[1:])
    # The workers then end; the batch path has every case, and what the stream published equals it.
    for job in jobs[1:]:
        campaign.finish(job)
    exported = campaign.export()
    verified = campaign.verify_stream(exported, run)
    assert verified.exit_code == 0, verified.summary
    assert verified.outputs["stream-complete"] == "false"
    assert "cut short" in verified.summary
    # Without the ledger's word that those workers were still running, their cases would be missing.
    ledger = tmp_path / "stream" / LEDGER_NAME
    document = json.loads(ledger.read_text())
    document["running"] = []
    ledger.write_text(json.dumps(document))
    verified = campaign.verify_stream(exported, {**run.outputs, "stream-sha256": hashlib.sha256(
        ledger.read_bytes()).hexdigest()})
    assert (verified.exit_code, verified.outputs["error-code"]) == (3, "stream.missing"), verified.summary


def test_a_changed_ledger_or_published_file_is_refused(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    run, _clock = campaign.stream([])
    exported = campaign.export()
    published = sorted((tmp_path / "stream" / RESULTS_DIR).iterdir())[0]
    published.write_bytes(published.read_bytes() + b" ")
    verified = campaign.verify_stream(exported, run)
    assert (verified.exit_code, verified.outputs["error-code"]) == (3, "stream.ledger"), verified.summary
    published.write_bytes(published.read_bytes()[:-1])
    (tmp_path / "stream" / "planted.json").write_text("{}")  # something added to the stream artifact
    verified = campaign.verify_stream(exported, run)
    assert (verified.exit_code, verified.outputs["error-code"]) == (3, "stream.ledger"), verified.summary
    assert "planted.json" in verified.failure()["message"]
    (tmp_path / "stream" / "planted.json").unlink()
    assert campaign.verify_stream(exported, run).exit_code == 0
    ledger = tmp_path / "stream" / LEDGER_NAME
    ledger.write_bytes(ledger.read_bytes().replace(b'"passed"', b'"failed"', 1))
    verified = campaign.verify_stream(exported, run)
    assert (verified.exit_code, verified.outputs["error-code"]) == (3, "stream.ledger"), verified.summary


def test_stream_refuses_what_it_cannot_stream(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    run, _clock = campaign.stream([], backend="testops")
    assert run.outputs["error-code"] == "selection.job_run_binding", run.summary  # a files selection
    run = run_mode("stream", tmp_path, campaign.options, {**campaign.env, "GITHUB_ACTIONS": "false"})
    assert run.outputs["error-code"] == "guard.outside_actions"


def test_a_stream_dir_that_is_a_link_is_refused_not_followed(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "stream").symlink_to(elsewhere)
    run, _clock = campaign.stream([])
    assert (run.exit_code, run.outputs.get("error-code")) == (3, "io.unsafe_path"), run.summary
    assert list(elsewhere.iterdir()) == []
