"""Attacks on the stream (issue 29): the integrity issue's red-team moves, run against `publish: stream`. A worker
artifact replaced after its upload, a worker's name squatted before it, a cell for another worker's case, and
cells changed between the stream and the export: none publishes a forged pass; each ends with a specific code,
and what was published before stays as it was."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from evidence_support import RUN_ID, bound_to, cell, write_worker_record
from servers.github_server import GitHubServer, evaluate_step_name
from test_stream import CONTRACT, JOBS, PREFIX, RESULTS_DIR, Campaign, github, published_keys
from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP

__all__ = ["github"]  # the GitHub test server of test_stream, with its token


def test_a_squatted_worker_name_publishes_nothing_of_that_worker(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    first, second, *_rest = list(JOBS)
    campaign.finish(first)
    # Something holding a runtime token uploaded a forged pass under the second worker's name first; the worker's
    # own upload then failed, and its record reports no artifact.
    github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{second}", campaign.artifact_zip_as(second, "forged"))
    github.add_job(RUN_ID, 1, campaign.display(second), steps=[
        {"name": UPLOAD_STEP, "status": "completed", "conclusion": "failure"}])
    run, _clock = campaign.stream([])
    assert (run.exit_code, run.outputs["error-code"]) == (3, "workers.artifact_origin"), run.summary
    assert not any(key in _published(tmp_path, campaign) for key, _trial in JOBS[second])


def _published(tmp_path: Path, campaign: Campaign) -> list[str]:
    return published_keys(campaign) if (tmp_path / "stream" / "stream.json").exists() else []


def test_a_replaced_worker_artifact_publishes_nothing_of_that_worker(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    first, second, *rest = list(JOBS)
    campaign.finish(first)
    for job in (second, *rest):
        campaign.start(job)

    def forge() -> None:
        # The worker uploaded and ended; then something holding a runtime token overwrote its artifact with a
        # forged pass of every case (a new artifact: a new id).
        campaign.finish(second, failing=frozenset(key for key, _trial in JOBS[second]))
        forged = campaign.artifact_zip_as(second, "forged")
        github.overwrite_artifact(RUN_ID, f"{PREFIX}-cells-1-{second}", forged)

    run, _clock = campaign.stream([forge])
    assert (run.exit_code, run.outputs["error-code"]) == (3, "workers.artifact_replaced"), run.summary
    ledger = campaign.ledger()
    assert published_keys(campaign) == [key for key, _trial in JOBS[first]]
    assert not any(key in published_keys(campaign) for key, _trial in JOBS[second])
    assert ledger["complete"] is False


def test_a_cell_in_another_workers_artifact_publishes_nothing_of_it(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    first, second, *_rest = list(JOBS)
    campaign.finish(first)
    # The second worker's own artifact carries a forged pass for a case the plan gave to another job.
    directory = tmp_path / "forged"
    directory.mkdir()
    other = JOBS[list(JOBS)[2]][0][0]
    (directory / f"{other}.json").write_text(json.dumps(bound_to(cell(CONTRACT, other), campaign.digest)))
    write_worker_record(directory, second, campaign.digest)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.iterdir()):
            archive.write(path, path.name)
    doc = github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{second}", buffer.getvalue())
    outputs = {"artifact-id": doc["id"], "artifact-digest": str(doc["digest"]).removeprefix("sha256:")}
    github.add_job(RUN_ID, 1, campaign.display(second), steps=[
        {"name": UPLOAD_STEP, "status": "completed", "conclusion": "success"},
        {"name": evaluate_step_name(REPORT_EXPRESSION, {"upload": outputs}), "status": "completed",
         "conclusion": "success"}])
    run, _clock = campaign.stream([])
    assert run.exit_code == 3, run.summary
    assert run.outputs["error-code"] in {"export.worker_artifact", "export.cell_origin"}, run.summary
    assert other not in _published(tmp_path, campaign)


def test_a_case_published_then_measured_differently_is_refused_not_overwritten(tmp_path: Path,
                                                                               github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    run, _clock = campaign.stream([])
    assert run.exit_code == 0, run.summary
    before = {p.name: p.read_bytes() for p in (tmp_path / "stream" / RESULTS_DIR).iterdir()}
    # The export reads other cells for one case than the stream took (a worker artifact changed in between).
    job = next(iter(JOBS))
    key = JOBS[job][0][0]
    campaign.zips[job] = _with_failure(campaign, job, key)
    exported = campaign.export()
    verified = campaign.verify_stream(exported, run)
    assert (verified.exit_code, verified.outputs["error-code"]) == (3, "stream.mismatch"), verified.summary
    assert key in verified.failure()["message"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "stream" / RESULTS_DIR).iterdir()} == before


def _with_failure(campaign: Campaign, job: str, key: str) -> bytes:
    directory = campaign.tmp / "changed" / job
    directory.mkdir(parents=True)
    check = next(iter(CONTRACT.case(key).checks))
    document = cell(CONTRACT, key, disposition="behavior_failure", failed=[check])
    (directory / f"{key}.json").write_text(json.dumps(bound_to(document, campaign.digest)))
    write_worker_record(directory, job, campaign.digest)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.iterdir()):
            archive.write(path, path.name)
    return buffer.getvalue()





def test_a_worker_name_carried_by_two_jobs_is_refused_not_watched_forever(tmp_path: Path,
                                                                           github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    first, *_rest = list(JOBS)
    campaign.finish(first)
    # Another job of the run carries the worker's name (a second campaign with the same prefix, or a copy).
    github.add_job(RUN_ID, 1, f"other / {PREFIX} {first}", steps=[])
    run, _clock = campaign.stream([])
    assert (run.exit_code, run.outputs["error-code"]) == (3, "workers.job_identity"), run.summary
    assert _published(tmp_path, campaign) == []
