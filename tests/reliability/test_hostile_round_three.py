"""Hostile input, round three (issue 24): each reproduction through real HTTP to the local servers or the
real CLI, failing on the main this round started from and passing now.

1. A server that echoes the token in an error message, across the cut: no piece of it survives.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import FakeClock, holds_secret, secret_leaks
from reliability.faults import SENTINEL, phase_world
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence.errors import Refusal
from testops_evidence.github_run import RequestPolicy, fetch_run
from testops_evidence.redact import clip, scrub
from testops_evidence.testops.client import MESSAGE_LIMIT, TestOpsClient

TESTOPS_TOKEN = "tok-R3-testops-7c1e9a5f3b2d8046e1a9c7f5"  # 37 characters, no run of 8 in honest text
GITHUB_TOKEN = "ghs_R3github5e8c1a7f9b3d2046c8e1a5f7b9d3"  # 40, the length of a GitHub token
PROJECT = 12
REPO = "acme/agents"
RUN_ID = 5151

# Filler a server puts around the token: printable, no whitespace (the message is put on one line, which
# would shift the offsets), and no character of the tokens (so a piece found can only come from the token).
FILLER = st.text(alphabet="XYZWQ<>&|*_`#!.,;:", min_size=0, max_size=40)


def refusal_of(call: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def shown(refusal: Refusal) -> str:
    """Everything of a refusal that reaches failure.json, the log and the summary."""
    return str(refusal) + json.dumps(refusal.to_json())


# --- the helper ----------------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=260), st.integers(min_value=10, max_value=240), FILLER)
def test_clip_never_leaves_a_piece_of_a_secret_at_any_offset_or_limit(offset: int, limit: int, filler: str) -> None:
    text = ("m" * offset) + TESTOPS_TOKEN + filler
    clipped = clip(text, limit, [TESTOPS_TOKEN])
    assert len(clipped) <= limit
    assert not holds_secret(clipped, TESTOPS_TOKEN)
    # Cut first and scrub second, as main did, and a prefix of the token survives wherever the cut splits it.
    if offset + 8 <= limit - 3 < offset + len(TESTOPS_TOKEN):
        assert holds_secret(text[: limit - 3].replace(TESTOPS_TOKEN, "***"), TESTOPS_TOKEN)


def test_scrub_removes_whole_secrets_and_pieces_and_leaves_the_rest() -> None:
    piece = TESTOPS_TOKEN[:20]
    text = f"a {TESTOPS_TOKEN} b {piece} c {TESTOPS_TOKEN[-9:]} d {TESTOPS_TOKEN[:7]} e"
    assert scrub(text, [TESTOPS_TOKEN, None, ""]) == f"a *** b *** c *** d {TESTOPS_TOKEN[:7]} e"
    assert scrub("short secret abc here", ["abc"]) == "short secret *** here"  # shorter than a piece: whole only
    assert scrub("nothing to see", [TESTOPS_TOKEN]) == "nothing to see"


# --- through the TestOps test server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def testops() -> Iterator[TestOpsServer]:
    clock = FakeClock()
    with TestOpsServer(token=TESTOPS_TOKEN, clock=clock.monotonic) as server:
        server.add_project(PROJECT)
        server.add_case(PROJECT, "Case", "suite/case", id=101)
        yield server


def make_testops_client(server: TestOpsServer, logs: list[str]) -> TestOpsClient:
    clock = FakeClock()
    return TestOpsClient(server.url, TESTOPS_TOKEN, project_id=PROJECT, clock=clock.time, monotonic=clock.monotonic,
                         sleep=clock.sleep, log=logs.append, rng=random.Random(7), read_timeout=10.0,
                         connect_timeout=2.0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=MESSAGE_LIMIT + 60), before=FILLER, after=FILLER)
@example(offset=MESSAGE_LIMIT - 3 - 31, before="", after="")  # main kept 31 of the token's characters here
@example(offset=MESSAGE_LIMIT - 3 - 8, before="", after="")
def test_1_a_testops_error_message_echoing_the_token_at_any_offset_leaks_no_piece(
        testops: TestOpsServer, offset: int, before: str, after: str) -> None:
    message = (before + "m" * offset)[:offset] + TESTOPS_TOKEN + after
    testops.clear_faults()
    testops.fail("GET", r"/testcase/101", "status", status=400, message=message)
    logs: list[str] = []
    with make_testops_client(testops, logs) as client:
        refused = refusal_of(lambda: client.get("/testcase/101"))
    assert refused.code == "testops.http_400"
    assert not holds_secret(shown(refused), TESTOPS_TOKEN), shown(refused)
    assert not any(holds_secret(line, TESTOPS_TOKEN) for line in logs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=120))
@example(offset=80 - 3 - 8)
def test_1_a_server_request_id_echoing_the_token_leaks_no_piece_into_the_log(testops: TestOpsServer,
                                                                           offset: int) -> None:
    testops.clear_faults()
    testops.fail("GET", r"/testcase/101", "headers", headers={"X-Request-Id": "r" * offset + TESTOPS_TOKEN})
    logs: list[str] = []
    with make_testops_client(testops, logs) as client:
        client.get("/testcase/101")
    assert logs and not any(holds_secret(line, TESTOPS_TOKEN) for line in logs), logs


# --- through the GitHub test server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=GITHUB_TOKEN) as server:
        server.add_repo(REPO, repo_id=77)
        server.add_run(REPO, RUN_ID, head_sha="9" * 40)
        yield server


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=260), before=FILLER, after=FILLER)
@example(offset=200 - 23, before="", after="")  # main kept 23 of the 40 characters here
@example(offset=200 - 8, before="", after="")
def test_1_a_github_error_message_echoing_the_token_at_any_offset_leaks_no_piece(
        github: GitHubServer, offset: int, before: str, after: str) -> None:
    message = (before + "m" * offset)[:offset] + GITHUB_TOKEN + after
    github.clear_faults()
    github.fault("run", status=422, body=json.dumps({"message": message}).encode())
    refused = refusal_of(lambda: fetch_run(github.api_url(), GITHUB_TOKEN, REPO, RUN_ID,
                                           policy=RequestPolicy(retries=0, backoff_factor=0)))
    assert refused.code == "github.http_422"
    assert not holds_secret(shown(refused), GITHUB_TOKEN), shown(refused)


# --- through the CLI runner: failure.json, the log, the step summary ------------------------------------------


def test_1_testops_phase_with_the_token_across_the_cut_leaks_nothing_anywhere(tmp_path: Path) -> None:
    with phase_world("launch", tmp_path) as (act, servers):
        assert servers.testops is not None
        servers.testops.fail("*", r".*", "status", status=400, times=None,
                             message="m" * (MESSAGE_LIMIT - 3 - 20) + SENTINEL + " and more")
        run = act().run
    failure = run.failure()
    assert failure is not None and failure["code"] == "testops.http_400", run.summary
    assert secret_leaks(run, SENTINEL, tmp_path) == []


def test_1_github_phase_with_the_token_across_the_cut_leaks_nothing_anywhere(tmp_path: Path) -> None:
    with phase_world("import", tmp_path) as (act, servers):
        assert servers.github is not None
        servers.github.fault("run", status=422, times=10,
                             body=json.dumps({"message": "m" * (200 - 20) + SENTINEL + " and more"}).encode())
        run = act().run
    failure = run.failure()
    assert failure is not None and failure["code"] == "github.http_422", run.summary
    assert secret_leaks(run, SENTINEL, tmp_path) == []
