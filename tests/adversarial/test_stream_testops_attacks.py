"""Attacks on the stream to TestOps: a worker artifact replaced after its upload sends nothing of that worker
into the launch (the stream refuses before its cases are projected, so no result of them leaves the runner)."""

from __future__ import annotations

from pathlib import Path

from evidence_support import RUN_ID
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_stream import PREFIX, github
from test_stream_testops import JOBS, TestOpsStream, testops

__all__ = ["github", "testops"]


def test_a_replaced_worker_artifact_sends_nothing_of_that_worker_to_testops(
        tmp_path: Path, github: GitHubServer, testops: TestOpsServer) -> None:
    campaign = TestOpsStream(tmp_path, github, testops)
    first, second, *rest = list(JOBS)
    campaign.finish(first)
    for job in (second, *rest):
        campaign.start(job)

    def forge() -> None:
        # The worker uploaded its failures and ended; then something holding a runtime token overwrote its
        # artifact with a forged pass of every case (a new artifact: a new id).
        campaign.finish(second, failing=frozenset(key for key, _trial in JOBS[second]))
        github.overwrite_artifact(RUN_ID, f"{PREFIX}-cells-1-{second}", campaign.artifact_zip_as(second, "forged"))

    run, _clock = campaign.stream([forge])
    assert (run.exit_code, run.outputs["error-code"]) == (3, "workers.artifact_replaced"), run.summary
    names = {f"agents/protocol/{key}" for key, _trial in JOBS[first]}
    assert set(campaign.stored()) == names  # the first worker's cases, and nothing of the second
    sent = [r.body for r in testops.requests("POST", "/upload/test-result")]
    assert len(sent) == 1
