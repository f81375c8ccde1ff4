"""The campaign template with `publish: stream`, under act (issue 29): the stream job beside the matrix publishes
every case as its worker ends, bound through the Actions jobs API of the GitHub REST test server, and the export
job's verify-stream finds it equal to the export receipt of the same cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servers.github_server import GitHubServer
from test_act_e2e import CALLER, CASES, SENTINEL_TOKEN, act_binary, github, run_act, summaries_of

pytestmark = pytest.mark.act
__all__ = ["act_binary", "github"]  # the fixtures, shared with test_act_e2e

STREAM_CALLER = CALLER.replace("      fail-on-failed-cases: false\n",
                               "      fail-on-failed-cases: false\n      publish: stream\n")


def test_campaign_streams_every_case_and_verifies_it_against_the_receipt(act_binary: Path, tmp_path: Path,
                                                                         github: GitHubServer) -> None:
    assert STREAM_CALLER != CALLER
    result = run_act(act_binary, tmp_path, github, caller=STREAM_CALLER)
    assert result.returncode == 0, result.log[-6000:]
    stream = summaries_of(result, "stream-stream")
    assert f"Streamed {len(CASES)} of {len(CASES)} cases" in stream, result.log[-6000:]
    ledger = json.loads((result.artifacts / "testops-evidence-stream-1" / "stream.json").read_text())
    assert ledger["complete"] is True and sorted(e["key"] for e in ledger["published"]) == sorted(CASES)
    verified = summaries_of(result, "export-verify-stream")
    assert f"The stream published {len(CASES)} of {len(CASES)} cases, each exactly as the export measured it" in verified
    receipt = json.loads((result.artifacts / "testops-evidence-results-1" / "allure-results-receipt.json").read_text())
    assert {row["key"]: row["status"] for row in receipt["results"]} == {e["key"]: e["status"]
                                                                          for e in ledger["published"]}
    # The stream read the run attempt's jobs through the API, with the token, and never showed it.
    assert github.requests_to("attempt_jobs")
    assert SENTINEL_TOKEN not in stream and SENTINEL_TOKEN not in verified
