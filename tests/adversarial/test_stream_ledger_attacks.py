"""Red team, round four: the stream ledger edited between two runs of the stream job.

A re-run of the stream job continues from the ledger it finds in its stream directory (each case once). That file
travels to the re-run with no digest: whoever can write the runner's workspace (a worker on the same self-hosted
runner) can change it between the jobs. Edited, it must never make the stream publish a case a second time nor
count a pass its workers' artifacts do not hold: the re-run holds the ledger to its results directory and
re-measures every case it lists from the bound artifacts, and refuses ``stream.ledger`` on any difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evidence_support import uuid_factory
from helpers import FakeClock, PhaseRun, run_mode
from servers.github_server import GitHubServer
from test_stream import JOBS, RESULTS_DIR, Campaign, github
from testops_evidence.publication.stream import LEDGER_NAME

__all__ = ["github"]


def _files(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (tmp_path / "stream" / RESULTS_DIR).iterdir()}


def _rerun(campaign: Campaign) -> PhaseRun:
    """The stream job run again over the same stream directory, with uuids of its own (as uuid4 gives them)."""
    clock = FakeClock()
    return run_mode("stream", campaign.tmp, {**campaign.options, "stream-dir": str(campaign.tmp / "stream"),
                                             "state-dir": str(campaign.tmp / "rerun-state")}, campaign.env,
                    clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep,
                    new_uuid=uuid_factory("00000000-0000-4000-8009"))


def _edit(tmp_path: Path, change: Any) -> None:
    path = tmp_path / "stream" / LEDGER_NAME
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def test_a_case_dropped_from_the_ledger_is_not_published_twice(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    first, _clock = campaign.stream([])
    assert first.exit_code == 0, first.summary
    before = _files(tmp_path)
    _edit(tmp_path, lambda doc: doc["published"].pop(0))  # the case is forgotten, its files stay
    again = _rerun(campaign)
    # The results directory holds files the ledger does not list: refused before anything is written.
    assert (again.exit_code, again.outputs.get("error-code")) == (3, "io.extra_file"), again.summary
    assert _files(tmp_path) == before, "the case was published a second time beside its first files"


def test_a_failed_case_edited_to_passed_in_the_ledger_is_refused(tmp_path: Path, github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    job = next(iter(JOBS))
    key = JOBS[job][0][0]
    campaign.finish(job, failing=frozenset({key}))
    for other in list(JOBS)[1:]:
        campaign.finish(other)
    first, _clock = campaign.stream([])
    assert first.exit_code == 0 and first.outputs["failed-count"] == "1", first.summary

    def forge(doc: dict[str, Any]) -> None:
        for entry in doc["published"]:
            if entry["key"] == key:
                entry["status"] = "passed"
                entry.pop("code", None)

    _edit(tmp_path, forge)
    again = _rerun(campaign)
    assert (again.exit_code, again.outputs.get("error-code")) == (3, "stream.ledger"), again.summary
    assert again.outputs.get("failed-count") != "0"
    assert key in again.failure()["message"]


def test_a_case_whose_worker_never_delivered_cannot_be_added_to_the_ledger(tmp_path: Path,
                                                                           github: GitHubServer) -> None:
    campaign = Campaign(tmp_path, github)
    first_job, cancelled, *rest = list(JOBS)
    for job in (first_job, *rest):
        campaign.finish(job)
    campaign.cancel(cancelled)
    first, _clock = campaign.stream([])
    assert first.exit_code == 0, first.summary
    victim = JOBS[cancelled][0][0]
    assert victim not in [entry["key"] for entry in json.loads((tmp_path / "stream" / LEDGER_NAME).read_text())
                          ["published"]]

    def claim(doc: dict[str, Any]) -> None:
        template = dict(doc["published"][0])
        doc["published"].append({**template, "key": victim, "status": "passed", "workers": [cancelled], "files": {}})

    _edit(tmp_path, claim)
    again = _rerun(campaign)
    assert (again.exit_code, again.outputs.get("error-code")) == (3, "stream.ledger"), again.summary
    assert again.outputs.get("published-count") is None


def test_verify_stream_without_the_stream_artifact_refuses(tmp_path: Path, github: GitHubServer) -> None:
    """Something took the stream artifact's name first, so the stream's upload failed and gave no id: the template
    then downloads nothing (an empty id would download every artifact of the run) and verify-stream, finding no
    stream directory beside the digest the stream job output, refuses."""
    campaign = Campaign(tmp_path, github)
    for job in JOBS:
        campaign.finish(job)
    streamed, _clock = campaign.stream([])
    exported = campaign.export()
    verified = run_mode("verify-stream", tmp_path, {
        **campaign.options, "state-dir": str(tmp_path / "verify-state"), "results-dir": str(tmp_path / "allure-results"),
        "receipt-sha256": exported.outputs["receipt-sha256"], "stream-dir": str(tmp_path / "not-downloaded"),
        "stream-sha256": streamed.outputs["stream-sha256"]}, campaign.env)
    assert (verified.exit_code, verified.outputs.get("error-code")) == (3, "stream.ledger"), verified.summary
