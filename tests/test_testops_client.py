"""The TestOps client against the TestOps test server: real HTTP, injected faults, a fake clock.

The acceptance matrix: for each fault kind and each call class (GET, paged GET, POST) the right outcome
and code, and the server log shows exactly one request per mutation whatever the fault.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import FakeClock
from servers.testops_server import TestOpsServer
from testops_evidence.errors import Refusal
from testops_evidence.testops.client import RateLimiter, TestOpsClient, parse_page

TOKEN = "SENTINEL-allure-tok-5f3a9c2e"
PROJECT = 12
SHORT_TIMEOUT = 1.0
HELD = 300.0  # seconds a delay fault holds its answer (released when the server stops)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Iterator[TestOpsServer]:
    with TestOpsServer(token=TOKEN, clock=clock.monotonic) as srv:
        srv.add_project(PROJECT)
        for n in range(5):
            srv.add_case(PROJECT, f"Case {n}", f"suite/case-{n}", id=100 + n)
        yield srv


class Logs(list[str]):
    def __call__(self, message: str) -> None:
        self.append(message)


@pytest.fixture
def logs() -> Logs:
    return Logs()


def make_client(server: TestOpsServer, clock: FakeClock, logs: Logs | None = None, **options: Any) -> TestOpsClient:
    # A delay fault holds its answer until the server stops; the client gives up after SHORT_TIMEOUT.
    # Every other test keeps a generous timeout, so a loaded machine cannot turn a slow answer into a fault.
    options.setdefault("read_timeout", 10.0)
    options.setdefault("connect_timeout", 2.0)
    return TestOpsClient(server.url, TOKEN, project_id=PROJECT, clock=clock.time, monotonic=clock.monotonic,
                         sleep=clock.sleep, log=logs if logs is not None else Logs(), rng=random.Random(7),
                         **options)


def refusal(call: Any) -> Refusal:
    with pytest.raises(Refusal) as info:
        call()
    return info.value


# --- GET -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,options", [
    ("status", {"status": 503}),
    ("status", {"status": 502}),
    ("status", {"status": 408}),
    ("status", {"status": 429}),
    ("delay", {"delay": HELD}),
    ("truncate", {}),
    ("drop", {}),
])
def test_get_retries_transient_faults_then_succeeds(server: TestOpsServer, clock: FakeClock, kind: str,
                                                    options: dict[str, Any]) -> None:
    server.fail("GET", r"/testcase/101", kind, times=2, **options)
    client = make_client(server, clock, read_timeout=SHORT_TIMEOUT if kind == "delay" else 10.0)
    case = client.get("/testcase/101")
    assert case["fullName"] == "suite/case-1"
    assert len(server.requests("GET", r"/testcase/101")) == 3
    assert len(clock.sleeps) == 2 and all(s > 0 for s in clock.sleeps)


def test_get_backoff_grows_exponentially_with_jitter(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "status", status=503, times=4)
    client = make_client(server, clock, backoff_base=1.0, rate_limit=0)
    client.get("/testcase/101")
    # Equal jitter: attempt n waits within [2^n / 2, 2^n].
    for attempt, wait in enumerate(clock.sleeps):
        assert 2 ** attempt / 2 <= wait <= 2 ** attempt
    assert len(set(clock.sleeps)) == 4


def test_get_honours_retry_after(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "status", status=429, retry_after="7", times=1)
    client = make_client(server, clock, rate_limit=0)
    client.get("/testcase/101")
    assert clock.sleeps == [7.0]


def test_get_gives_up_after_max_retries_with_the_status_code(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "status", status=503, times=None)
    client = make_client(server, clock, max_retries=3)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.http_503" and error.exit_code == 4
    assert "after 4 attempts" in error.message
    assert len(server.requests("GET", r"/testcase/101")) == 4


def test_get_transport_failure_after_retries(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "drop", times=None)
    client = make_client(server, clock, max_retries=2)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.transport"
    assert len(server.requests("GET", r"/testcase/101")) == 3


@pytest.mark.parametrize("status,code", [(404, "testops.http_404"), (400, "testops.http_400"),
                                         (401, "testops.auth"), (403, "testops.auth")])
def test_get_does_not_retry_client_errors(server: TestOpsServer, clock: FakeClock, status: int, code: str) -> None:
    server.fail("GET", r"/testcase/101", "status", status=status)
    client = make_client(server, clock)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == code and error.http_status == status
    assert len(server.requests("GET", r"/testcase/101")) == 1
    assert clock.sleeps == []


def test_get_oversized_answer_is_refused_without_retry(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "oversize", size=200_000)
    client = make_client(server, clock, max_response_bytes=64 * 1024)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.response_too_large"
    assert len(server.requests("GET", r"/testcase/101")) == 1


def test_get_oversized_declared_length_is_refused_before_reading(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "oversize", size=200_000, declare_length=True)
    client = make_client(server, clock, max_response_bytes=64 * 1024)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.response_too_large" and "declared" in error.message


def test_get_invalid_json_is_refused(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "invalid_json")
    client = make_client(server, clock)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.response_invalid"
    assert len(server.requests("GET", r"/testcase/101")) == 1


def test_get_retry_after_beyond_the_deadline_is_a_deadline_refusal(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", r"/testcase/101", "status", status=503, retry_after="100", times=None)
    client = make_client(server, clock, call_deadline=150.0)
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.deadline"
    assert len(server.requests("GET", r"/testcase/101")) == 2  # waited 100 s once, the next wait passes 150 s


def test_overall_deadline_stops_later_calls(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock)
    client.set_deadline(10)
    client.get("/testcase/101")
    clock.now += 11
    error = refusal(lambda: client.get("/testcase/101"))
    assert error.code == "testops.deadline"


def test_get_optional_returns_none_for_404(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock)
    assert client.get_optional("/testcase/999999") is None
    assert client.get_optional("/testcase/100")["id"] == 100


# --- paged GET ---------------------------------------------------------------------------------------------


def test_pages_read_every_item_across_pages(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock)
    ids = [item["id"] for item in client.pages("/testcase", {"projectId": PROJECT}, page_size=2)]
    assert ids == [100, 101, 102, 103, 104]
    assert [e.param("page") for e in server.requests("GET", "/testcase")] == ["0", "1", "2"]


@pytest.mark.parametrize("kind,options", [("status", {"status": 503}), ("status", {"status": 429}),
                                          ("delay", {"delay": HELD}), ("truncate", {}), ("drop", {})])
def test_pages_retry_a_transient_fault_on_a_later_page(server: TestOpsServer, clock: FakeClock, kind: str,
                                                       options: dict[str, Any]) -> None:
    client = make_client(server, clock, read_timeout=SHORT_TIMEOUT if kind == "delay" else 10.0)
    items = client.pages("/testcase", {"projectId": PROJECT}, page_size=2)
    first = [next(items)["id"], next(items)["id"]]
    server.fail("GET", "/testcase", kind, times=1, **options)
    rest = [item["id"] for item in items]
    assert first + rest == [100, 101, 102, 103, 104]
    assert [e.param("page") for e in server.requests("GET", "/testcase")] == ["0", "1", "1", "2"]


@pytest.mark.parametrize("kind,options,code", [
    ("status", {"status": 404}, "testops.http_404"),
    ("status", {"status": 401}, "testops.auth"),
    ("oversize", {"size": 200_000}, "testops.response_too_large"),
    ("invalid_json", {}, "testops.response_invalid"),
])
def test_pages_refuse_a_permanent_fault(server: TestOpsServer, clock: FakeClock, kind: str,
                                        options: dict[str, Any], code: str) -> None:
    server.fail("GET", "/testcase", kind, **options)
    client = make_client(server, clock, max_response_bytes=64 * 1024)
    error = refusal(lambda: list(client.pages("/testcase", {"projectId": PROJECT}, page_size=2)))
    assert error.code == code
    assert len(server.requests("GET", "/testcase")) == 1


def test_pages_pass_duplicates_through_for_the_caller_to_judge(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", "/testcase", "duplicate")
    client = make_client(server, clock)
    ids = [item["id"] for item in client.pages("/testcase", {"projectId": PROJECT}, page_size=10)]
    assert ids == [100, 101, 102, 103, 104, 100]


def test_pages_guard_stops_an_endless_listing(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock)
    error = refusal(lambda: list(client.pages("/testcase", {"projectId": PROJECT}, page_size=1, max_pages=3)))
    assert error.code == "testops.response_invalid"


def test_parse_page_refuses_a_page_that_ignores_the_page_number() -> None:
    with pytest.raises(Refusal) as info:
        parse_page({"content": [{"id": 1}], "number": 0, "last": False}, "listing", 3)
    assert info.value.code == "testops.response_invalid"
    with pytest.raises(Refusal):
        parse_page({"content": [1, 2]}, "listing", 0)
    with pytest.raises(Refusal):
        parse_page({"content": [], "last": "yes"}, "listing", 0)
    page = parse_page({"content": [{"id": 1}], "totalPages": 1}, "listing", 0)
    assert page.last and page.total_pages == 1


# --- POST (mutations): never retried, uncertain when the request may have landed -----------------------------


def create_case(client: TestOpsClient, name: str = "New case") -> Any:
    return client.post("/testcase", {"projectId": PROJECT, "name": name, "fullName": "suite/new"})


@pytest.mark.parametrize("kind,options,code,committed", [
    ("status", {"status": 503}, "testops.http_503", False),
    ("status", {"status": 500}, "testops.http_500", False),
    ("status", {"status": 429, "retry_after": "1"}, "testops.http_429", False),
    ("status", {"status": 408}, "testops.http_408", False),
    ("status", {"status": 409}, "testops.http_409", False),
    ("status", {"status": 401}, "testops.auth", False),
    ("status", {"status": 502, "commit": True}, "testops.http_502", True),
    ("delay", {"delay": HELD}, "testops.uncertain", True),
    ("truncate", {}, "testops.uncertain", True),
    ("drop", {}, "testops.uncertain", True),
    ("invalid_json", {}, "testops.uncertain", True),
    ("oversize", {"size": 200_000}, "testops.uncertain", True),
])
def test_post_is_sent_exactly_once_whatever_the_fault(server: TestOpsServer, clock: FakeClock, kind: str,
                                                      options: dict[str, Any], code: str, committed: bool) -> None:
    server.fail("POST", "/testcase", kind, **options)
    client = make_client(server, clock, max_response_bytes=64 * 1024,
                         read_timeout=SHORT_TIMEOUT if kind == "delay" else 10.0)
    before = len(server.cases)
    error = refusal(lambda: create_case(client))
    assert error.code == code and error.exit_code == 4
    assert len(server.mutations()) == 1
    assert len(server.cases) == before + (1 if committed else 0)
    assert clock.sleeps == []
    if code == "testops.uncertain":
        assert "reconcile" in error.hint


def test_post_that_cannot_connect_is_transport_not_uncertain(clock: FakeClock) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = TestOpsClient(f"http://127.0.0.1:{port}", TOKEN, sleep=clock.sleep, monotonic=clock.monotonic,
                           connect_timeout=2.0)
    error = refusal(lambda: client.post("/testcase", {"projectId": 1, "name": "x"}))
    assert error.code == "testops.transport" and "nothing was sent" in error.message


def test_post_success_returns_the_created_object(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock)
    created = create_case(client)
    assert created["name"] == "New case" and server.cases[created["id"]]["fullName"] == "suite/new"
    patched = client.patch(f"/testcase/{created['id']}", {"name": "Renamed"})
    assert patched["name"] == "Renamed"
    assert [(e.method, e.route) for e in server.mutations()] == [("POST", "/testcase"),
                                                                 ("PATCH", f"/testcase/{created['id']}")]


# --- auth, prefixes, pacing, request ids, secrecy --------------------------------------------------------------


def test_api_token_header_and_rs_prefix(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock, api_prefix="/api/rs")
    assert client.get("/testcase/100")["id"] == 100
    entry = server.requests("GET", "/testcase/100")[0]
    assert entry.prefix == "/api/rs" and entry.auth == "api-token"


def test_wrong_token_is_an_auth_refusal(server: TestOpsServer, clock: FakeClock) -> None:
    client = TestOpsClient(server.url, "wrong", sleep=clock.sleep, monotonic=clock.monotonic)
    assert refusal(lambda: client.get("/testcase/100")).code == "testops.auth"
    jwt_client = TestOpsClient(server.url, "wrong", auth="jwt", sleep=clock.sleep, monotonic=clock.monotonic)
    error = refusal(lambda: jwt_client.get("/testcase/100"))
    assert error.code == "testops.auth" and "token exchange" in error.message


def test_jwt_is_exchanged_once_and_refreshed_before_expiry(clock: FakeClock) -> None:
    with TestOpsServer(token=TOKEN, clock=clock.monotonic, jwt_expires_in=600) as server:
        server.add_case(PROJECT, "A", "a", id=1)
        masked: list[str] = []
        client = make_client(server, clock, auth="jwt", mask=masked.append)
        for _ in range(3):
            client.get("/testcase/1")
        assert len(server.requests("POST", "/uaa/oauth/token")) == 1
        clock.now += 545  # inside the last tenth of the 600 s life (60 s early refresh)
        client.get("/testcase/1")
        assert len(server.requests("POST", "/uaa/oauth/token")) == 2
        assert all(e.auth == "bearer" for e in server.requests("GET"))
        assert len(masked) == 2  # each JWT is registered as a secret


def test_jwt_rejected_early_is_refreshed_once_on_401(clock: FakeClock) -> None:
    with TestOpsServer(token=TOKEN, clock=clock.monotonic) as server:
        server.add_project(PROJECT)
        client = make_client(server, clock, auth="jwt")
        client.get("/testcase", {"projectId": PROJECT})
        server.expire_tokens()
        created = create_case(client)  # a 401 is safe to re-send: nothing was processed
        assert created["name"] == "New case"
        assert [e.status for e in server.requests("POST", "/testcase")] == [401, 200]
        assert len(server.requests("POST", "/uaa/oauth/token")) == 2


def test_rate_limit_paces_requests_with_the_injected_clock(server: TestOpsServer, clock: FakeClock) -> None:
    client = make_client(server, clock, rate_limit=20)
    for _ in range(60):
        client.get("/testcase/100")
    # A burst of 20, then one request every 1/20 s: 40 more requests need 2 s of (fake) time.
    assert sum(clock.sleeps) == pytest.approx(2.0, abs=0.06)
    assert client.request_count == 60


def test_rate_limiter_alone() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, clock.monotonic, clock.sleep)
    for _ in range(6):
        limiter.acquire()
    assert sum(clock.sleeps) == pytest.approx(2.0)
    unlimited = RateLimiter(0, clock.monotonic, clock.sleep)
    for _ in range(100):
        unlimited.acquire()
    assert sum(clock.sleeps) == pytest.approx(2.0)


def test_request_ids_are_sent_and_logged(server: TestOpsServer, clock: FakeClock, logs: Logs) -> None:
    ids = iter(["rid-1", "rid-2"])
    client = make_client(server, clock, logs, new_request_id=lambda: next(ids))
    client.get("/testcase/100")
    assert any("request id rid-1" in line for line in logs)
    server.fail("GET", "/testcase/100", "status", status=404)
    error = refusal(lambda: client.get("/testcase/100"))
    assert "rid-2" in error.message


def test_token_appears_in_no_log_line_message_or_server_record(server: TestOpsServer, clock: FakeClock,
                                                               logs: Logs) -> None:
    client = make_client(server, clock, logs, auth="jwt")
    client.get("/testcase/100")
    server.fail("GET", "/testcase/100", "status", status=500, times=None)
    messages = [refusal(lambda: client.get("/testcase/100")).message]
    server.clear_faults()
    server.fail("POST", "/testcase", "drop")
    messages.append(refusal(lambda: create_case(client)).message)
    jwt = next(iter(server._jwts))
    text = "\n".join([*logs, *messages, repr(server.log)])
    assert TOKEN not in text and jwt not in text
    assert client.request_count == len(server.log)


def test_redirects_are_not_followed(server: TestOpsServer, clock: FakeClock) -> None:
    server.fail("GET", "/testcase/100", "status", status=302)
    client = make_client(server, clock)
    assert refusal(lambda: client.get("/testcase/100")).code == "testops.http_302"


def test_paths_must_be_clean() -> None:
    client = TestOpsClient("https://testops.example", TOKEN)
    for bad in ("testcase", "/a/../b", "/a?b=1", "//x"):
        with pytest.raises(ValueError):
            client.url(bad)
    assert client.url("/launch/7") == "https://testops.example/api/launch/7"
    assert client.web_url("launch", 7) == "https://testops.example/launch/7"


def test_an_unreadable_mutation_answer_is_uncertain_not_invalid() -> None:
    from testops_evidence.testops.client import expect_mutation_id, expect_mutation_object

    assert expect_mutation_object({"id": 3}, "answer", ("id",)) == {"id": 3}
    for bad in ([], {"name": "x"}):
        with pytest.raises(Refusal) as info:
            expect_mutation_object(bad, "answer", ("id",))
        assert info.value.code == "testops.uncertain"
    assert expect_mutation_id(5, "id") == 5
    for bad_id in (0, True, "5", None):
        with pytest.raises(Refusal) as info:
            expect_mutation_id(bad_id, "id")
        assert info.value.code == "testops.uncertain"


def test_transport_tuning_from_the_environment() -> None:
    from testops_evidence.testops.client import _env_tuning

    assert _env_tuning({"TESTOPS_EVIDENCE_READ_TIMEOUT": "2.5", "TESTOPS_EVIDENCE_MAX_RETRIES": "1"}) == {
        "read_timeout": 2.5, "max_retries": 1}
    for bad in ("-1", "abc", "nan", "1.5x"):
        with pytest.raises(Refusal) as info:
            _env_tuning({"TESTOPS_EVIDENCE_RATE_LIMIT": bad})
        assert info.value.code == "input.testops-evidence-rate-limit"


def test_the_environment_proxy_is_honoured_and_no_proxy_bypasses_it(server: TestOpsServer, clock: FakeClock,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a proxy address nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead_proxy = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("HTTP_PROXY", dead_proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert make_client(server, clock).get("/testcase/100")["id"] == 100
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("no_proxy", raising=False)
    error = refusal(lambda: make_client(server, clock, max_retries=0).get("/testcase/100"))
    assert error.code == "testops.transport"
