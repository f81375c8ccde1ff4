"""A chunked answer whose chunk size is negative: urllib3 reads the size line with ``int(line, 16)``, which
takes a sign, and hands ``-99…9`` to http.client, which raises OverflowError (or ValueError). The long fuzz
run of 2026-12-04 found it on the TestOps client (``testops-http``): an ``internal.error`` for a server's
garbage. Both transports now say the answer broke off, with a code; a change whose answer broke off is
uncertain, never re-sent."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from helpers import FakeClock
from testops_evidence.errors import Refusal
from testops_evidence.github_run import RequestPolicy, fetch_run
from testops_evidence.testops.client import TestOpsClient

TOKEN = "tok-chunk-7Qx9Lm2Vb8Nc4Zr6"  # shares no 8 characters with ordinary output
SIZES = [b"-1", b"-" + b"9" * 400, b"-FFFFFFFFFFFFFFFF"]


def serve(size_line: bytes) -> Iterator[str]:
    """A server that answers every request 200 with a chunked body whose first chunk size is ``size_line``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                                 b"Connection: close\r\n\r\n" + size_line + b"\r\n{}\r\n0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.fixture(params=SIZES, ids=["-1", "-9x400", "-F16"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from serve(request.param)


def client(url: str) -> TestOpsClient:
    clock = FakeClock()
    return TestOpsClient(url, TOKEN, project_id=12, max_retries=1, read_timeout=5, connect_timeout=5,
                         clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep)


def test_a_testops_read_with_a_negative_chunk_size_is_refused_with_a_code(server: str) -> None:
    with client(server) as testops, pytest.raises(Refusal) as caught:
        testops.get("/testcase/194")
    assert caught.value.code in ("testops.transport", "testops.unavailable", "testops.response_invalid"), caught.value
    assert TOKEN[:8] not in str(caught.value)


def test_a_testops_change_with_a_negative_chunk_size_is_uncertain(server: str) -> None:
    with client(server) as testops, pytest.raises(Refusal) as caught:
        testops.post("/launch", {"name": "x"})
    assert caught.value.code == "testops.uncertain", caught.value


def test_a_github_answer_with_a_negative_chunk_size_is_refused_with_a_code(server: str) -> None:
    with pytest.raises(Refusal) as caught:
        fetch_run(server, TOKEN, "acme/agents", 7, policy=RequestPolicy(retries=0, sleep=lambda _s: None))
    assert caught.value.code in ("github.response_invalid", "github.transport"), caught.value
