"""Every GitHub request has a deadline over its whole answer (issue 24, item 4); TestOps is in
test_answer_deadline_testops.py.

A server that sends one byte per (read timeout - ε) never trips a per-read timeout. These tests drip real
answers from the GitHub test server (``servers/drip.py``: the headers, the body, or a chunked body a byte at a
time) and run guard and select through the phase entry point, and an artifact download: each ends in
``github.timeout``, and the server saw the client hang up long before its drip was done. Nothing here asserts a
duration: the timeouts are small so that the tests are quick, and the drips long, so that a client without
the deadline fails them (it would wait for the whole drip, then be admitted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import PhaseRun, run_mode, secret_leaks
from servers.drip import Drip
from servers.github_server import GitHubServer
from test_guard import SENTINEL, Guard
from test_selection_support import example_document, github_with_run, select_job_env, write_contract
from testops_evidence import github_run
from testops_evidence.errors import Refusal

# TESTOPS_EVIDENCE_GITHUB_TIMEOUT is whole seconds (at least 1); a byte every 0.5 s keeps every read well inside it.
GITHUB_TIMEOUT = "1"
GITHUB_DRIP = 0.5


def refused(run: PhaseRun, code: str, exit_code: int = 4) -> None:
    assert (run.exit_code, run.outputs.get("error-code")) == (exit_code, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["code"] == code
    assert f"`{code}`" in run.summary


# --- GitHub ---------------------------------------------------------------------------------------------------


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer(token=SENTINEL) as server:
        yield server


@pytest.mark.parametrize("part", ["headers", "body", "chunked"])
def test_guard_refuses_github_timeout_when_the_run_is_dripped(tmp_path: Path, gh: GitHubServer, part: str) -> None:
    guard = Guard(tmp_path, gh)
    env = guard.setup()
    env["TESTOPS_EVIDENCE_GITHUB_TIMEOUT"] = GITHUB_TIMEOUT
    drip = Drip(GITHUB_DRIP, part)
    gh.fault("run", drip=drip)
    run = guard.guard(env)
    refused(run, "github.timeout")
    assert secret_leaks(run, gh.token) == []
    assert drip.left_early(), (drip.sent, drip.total)
    assert len(gh.requests_to("run")) == 1  # a request whose time is up is not sent again


def test_guard_without_a_drip_is_admitted_with_the_same_timeout(tmp_path: Path, gh: GitHubServer) -> None:
    guard = Guard(tmp_path, gh)
    env = guard.setup()
    env["TESTOPS_EVIDENCE_GITHUB_TIMEOUT"] = GITHUB_TIMEOUT
    assert guard.guard(env).exit_code == 0


def test_select_on_the_files_backend_refuses_github_timeout_when_the_run_is_dripped(tmp_path: Path) -> None:
    document = example_document()
    document.pop("testops", None)
    contract = write_contract(tmp_path, document)
    with github_with_run() as github:
        env = {**select_job_env(github, tmp_path), "TESTOPS_EVIDENCE_GITHUB_TIMEOUT": GITHUB_TIMEOUT}
        drip = Drip(GITHUB_DRIP, "body")
        github.fault("run", drip=drip)
        run = run_mode("select", tmp_path, {"contract": str(contract),
                                            "selection-path": str(tmp_path / "out" / "selection.json")}, env)
        refused(run, "github.timeout")
        assert not (tmp_path / "out" / "selection.json").exists()
        assert drip.left_early(), (drip.sent, drip.total)


def test_an_artifact_download_dripped_by_the_storage_host_is_github_timeout(gh: GitHubServer) -> None:
    gh.add_repo("acme/agents")
    run = gh.add_run("acme/agents", head_sha="ab" * 20)
    gh.add_artifact(run["id"], "cells", b"PK" + bytes(range(256)) * 8)
    artifact = github_run.list_artifacts(gh.api_url(), gh.token, "acme/agents", run["id"])[0]
    drip = Drip(GITHUB_DRIP, "body")
    gh.fault("blob", drip=drip)
    policy = github_run.RequestPolicy(timeout=1, retries=0)
    with pytest.raises(Refusal) as caught:
        github_run.download_artifact(gh.api_url(), gh.token, artifact, max_bytes=4096, policy=policy)
    assert (caught.value.code, caught.value.exit_code) == ("github.timeout", 4)
    assert gh.token not in str(caught.value.to_json())
    assert drip.left_early(), (drip.sent, drip.total)


# --- the deadline itself ----------------------------------------------------------------------------------------


def test_an_answer_cut_by_the_deadline_is_never_taken_whole_even_when_its_read_ended_cleanly() -> None:
    """A body read until the connection closes looks complete when the watchdog shuts the socket: the
    deadline still refuses it."""
    import socket

    import requests

    from testops_evidence.answerdeadline import AnswerDeadline, DeadlineExpired, deadline_adapter

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()
    sent = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")  # no length: read until close
            for _ in range(200):
                if stop.wait(0.1):
                    return
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                sent.append(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with requests.Session() as session:
            session.mount("http://", deadline_adapter(max_retries=0))
            with pytest.raises(DeadlineExpired), AnswerDeadline(0.5):
                session.get(f"http://127.0.0.1:{port}/", timeout=5).content  # noqa: B018 - reading is the point
    finally:
        stop.set()
        thread.join(10)
        listener.close()
    assert len(sent) < 200
