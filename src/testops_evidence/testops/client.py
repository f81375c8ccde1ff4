"""The one Allure TestOps REST client (requests, imported lazily).

What it promises, because everything above it is built on these guarantees:

* **Mutations are never retried.** POST/PUT/PATCH/DELETE are sent once. If the connection fails after
  the request may have reached the server (a reset, a read timeout, a truncated or unreadable 2xx
  answer) the outcome is unknown and the call refuses ``testops.uncertain``; the caller's once-marker
  stays pending and ``mode: reconcile`` observes TestOps later. Only a failure to *connect* (nothing
  was sent) is reported as ``testops.transport``.
* **Idempotent GETs are retried** on transport errors, 408, 429 and 5xx, with exponential backoff and
  jitter (the random source is injected), honouring ``Retry-After``, inside a per-call deadline and an
  optional overall deadline (``testops.deadline``).
* **Every response is bounded**: streamed with a size cap (``testops.response_too_large``), decoded as
  JSON and shape-checked by the caller's expectations (``testops.response_invalid``), and awaited at most
  the connect and read timeouts together, however slowly its bytes come (a broken-off answer as above).
* **Requests are paced** by a token bucket (default 20 requests/s, as allurectl 2.20 and Allure 3),
  using the injected monotonic clock and sleep, so tests never really sleep.
* **The token never leaves the Authorization header**: not in logs, messages or refusals (every text
  from the server is scrubbed of it, and of the JWT, before it is cut to its limit: ``redact.clip``).
* Redirects are not followed: a 3xx is an error, so a credential is never replayed to another host.

Paths are relative to the API prefix (``/api`` or ``/api/rs``): ``client.get("/jobrun/12")``. The UAA
token endpoint is always ``{endpoint}/api/uaa/oauth/token``.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testops_evidence.errors import Refusal
from testops_evidence.readers.integers import INT64_MAX, ascii_int, header_int
from testops_evidence.redact import clip, scrub
from testops_evidence.safeio import loads_json

if TYPE_CHECKING:
    import requests

    from testops_evidence.contract import Contract, TestOpsConfig

API_PREFIXES = ("/api", "/api/rs")
AUTH_STYLES = ("api-token", "jwt")
TOKEN_PATH = "/api/uaa/oauth/token"  # noqa: S105 - a URL path, not a secret
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RETRYABLE_STATUS = frozenset({408, 429})
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
READ_CHUNK = 64 * 1024
MESSAGE_LIMIT = 200

Log = Callable[[str], None]


def _no_log(_message: str) -> None:
    return None


def testops_config(contract: Contract, mode: str) -> TestOpsConfig:
    """The contract's ``testops`` section, or ``testops.not_configured``."""
    if contract.testops is None:
        raise Refusal("testops.not_configured", f"mode {mode} needs the contract's `testops` section (there is no "
                      "TestOps instance to talk to)", field="/testops", expected="a testops section", actual=None)
    return contract.testops


# --- shape checks (shared with the phases) --------------------------------------------------------------


def expect_object(value: Any, what: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``value`` must be a JSON object holding ``required`` keys (``testops.response_invalid``)."""
    if not isinstance(value, dict):
        raise Refusal("testops.response_invalid", f"{what} is not a JSON object", field=what,
                      expected="a JSON object", actual=type(value).__name__)
    missing = [key for key in required if key not in value]
    if missing:
        raise Refusal("testops.response_invalid", f"{what} lacks {', '.join(missing)}", field=what,
                      expected="fields " + ", ".join(required), actual="missing " + ", ".join(missing))
    return value


def expect_mutation_object(value: Any, what: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """Like :func:`expect_object`, for the answer to a mutation: the server said 2xx, so the change most
    likely happened, but without the fields we cannot tell what it made; that is ``testops.uncertain``."""
    try:
        return expect_object(value, what, required)
    except Refusal as refusal:
        raise Refusal("testops.uncertain", f"TestOps accepted the change but {what} is unreadable "
                      f"({refusal.message}); it is not re-sent automatically") from None


def expect_mutation_id(value: Any, what: str) -> int:
    """:func:`expect_id` for an id the server made: unreadable means ``testops.uncertain`` (see above)."""
    try:
        return expect_id(value, what)
    except Refusal as refusal:
        raise Refusal("testops.uncertain", f"TestOps accepted the change but {what} is unreadable "
                      f"({refusal.message}); it is not re-sent automatically") from None


def expect_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise Refusal("testops.response_invalid", f"{what} is not a JSON array", field=what,
                      expected="a JSON array", actual=type(value).__name__)
    return value


def expect_id(value: Any, what: str) -> int:
    """A TestOps id: a positive integer (``bool`` is not an integer here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refusal("testops.response_invalid", f"{what} is not a positive integer id", field=what,
                      expected="a positive integer", actual=_short(repr(value)))
    return value


def _short(text: str, limit: int = MESSAGE_LIMIT) -> str:
    # A value from an answer, where no secret is at hand: the runtime scrubs any piece of a token in it
    # (redact.scrub) before it leaves the process; the client's own messages clip with its secrets.
    return clip(text, limit)


# --- pacing -------------------------------------------------------------------------------------------


class RateLimiter:
    """Token bucket: ``rate`` requests per second with a burst of ``max(1, rate)``; ``rate <= 0`` disables."""

    def __init__(self, rate: float, monotonic: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._tokens = self.capacity
        self._monotonic = monotonic
        self._sleep = sleep
        self._last = monotonic()
        self.waited = 0.0

    def acquire(self) -> None:
        if self.rate <= 0:
            return
        self._refill()
        if self._tokens < 1.0:
            wait = (1.0 - self._tokens) / self.rate
            self.waited += wait
            self._sleep(wait)
            self._refill()
            # A fake or coarse clock may not have advanced by the full wait: never go negative.
            self._tokens = max(self._tokens, 1.0)
        self._tokens -= 1.0

    def _refill(self) -> None:
        now = self._monotonic()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)


# --- pages -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One Spring Data page."""

    content: list[dict[str, Any]]
    number: int
    total_pages: int | None
    total_elements: int | None
    last: bool


def parse_page(value: Any, what: str, requested: int) -> Page:
    body = expect_object(value, what, ("content",))
    content = expect_list(body["content"], f"{what}.content")
    for index, item in enumerate(content):
        expect_object(item, f"{what}.content[{index}]")
    number = body.get("number", requested)
    if isinstance(number, bool) or not isinstance(number, int) or number != requested:
        # A server that ignores `page` would otherwise be read forever (or the same page twice).
        raise Refusal("testops.response_invalid", f"{what} answered page {number!r} when page {requested} "
                      "was asked for", field=f"{what}.number", expected=requested, actual=_short(repr(number)))
    total_pages = _optional_count(body.get("totalPages"), f"{what}.totalPages")
    total_elements = _optional_count(body.get("totalElements"), f"{what}.totalElements")
    last_raw = body.get("last")
    if last_raw is not None and not isinstance(last_raw, bool):
        raise Refusal("testops.response_invalid", f"{what}.last is not a boolean", field=f"{what}.last",
                      expected="true | false", actual=_short(repr(last_raw)))
    if isinstance(last_raw, bool):
        last = last_raw
    elif total_pages is not None:
        last = requested + 1 >= total_pages
    else:
        last = not content
    return Page(content, requested, total_pages, total_elements, last)


def _optional_count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refusal("testops.response_invalid", f"{what} is not a count", field=what,
                      expected="a non-negative integer", actual=_short(repr(value)))
    return value


# --- the client ----------------------------------------------------------------------------------------


class _Transport(Exception):
    """A transport failure; ``sent`` says whether the request may have reached the server, ``deadline``
    whether the answer's deadline cut it off."""

    def __init__(self, reason: str, *, sent: bool, deadline: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent
        self.deadline = deadline


@dataclass
class _Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes
    request_id: str


class TestOpsClient:
    """A paced, bounded, fail-closed client for one TestOps instance. See the module docstring."""

    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(
        self,
        endpoint: str,
        token: str,
        *,
        project_id: int | None = None,
        api_prefix: str = "/api",
        auth: str = "api-token",
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        retry_after_cap: float = 120.0,
        call_deadline: float = 300.0,
        rate_limit: float = 20.0,
        max_pages: int = 10_000,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        log: Log = _no_log,
        mask: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
        new_request_id: Callable[[], str] | None = None,
    ) -> None:
        if api_prefix not in API_PREFIXES:
            raise ValueError(f"api_prefix must be one of {API_PREFIXES}")
        if auth not in AUTH_STYLES:
            raise ValueError(f"auth must be one of {AUTH_STYLES}")
        if not token:
            raise ValueError("a TestOps token is required")
        self.endpoint = endpoint.rstrip("/")
        self.project_id = project_id
        self.api_prefix = api_prefix
        self.auth = auth
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_response_bytes = max_response_bytes
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.call_deadline = call_deadline
        self.max_pages = max_pages
        self.request_count = 0
        self._token = token
        self._secrets = [token]
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._log = log
        self._mask = mask
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._new_request_id = new_request_id or (lambda: uuid.uuid4().hex)
        self._limiter = RateLimiter(rate_limit, monotonic, sleep)
        self._deadline_at: float | None = None
        self._jwt: str | None = None
        self._jwt_refresh_at = 0.0
        self._session: requests.Session | None = None

    # --- construction from settings -----------------------------------------------------------------
    @classmethod
    def configured(cls, config: TestOpsConfig, token: str, *, endpoint: str | None = None,
                   project_id: int | None = None, env: Mapping[str, str] | None = None,
                   **options: Any) -> TestOpsClient:
        """The client for the contract's ``testops`` section, with the ``testops-endpoint`` /
        ``testops-project-id`` inputs (which also read ``ALLURE_ENDPOINT`` / ``ALLURE_PROJECT_ID``) in front.

        Operators may tune the transport with environment variables (documented in docs/testops.md):
        ``TESTOPS_EVIDENCE_CONNECT_TIMEOUT``, ``TESTOPS_EVIDENCE_READ_TIMEOUT``,
        ``TESTOPS_EVIDENCE_RATE_LIMIT``, ``TESTOPS_EVIDENCE_MAX_RETRIES``,
        ``TESTOPS_EVIDENCE_MAX_RESPONSE_BYTES``; ``options`` (clock, sleep, log, mask, ...) override them.
        """
        from testops_evidence.endpoints import check_endpoint

        # Userinfo, a query, the token itself, or a URL that cannot be taken apart: refused, never written.
        endpoint = check_endpoint(endpoint or config.endpoint, code="input.testops-endpoint",
                                  field="testops-endpoint", secrets=(token,))
        settings: dict[str, Any] = {"project_id": project_id or config.project_id, "api_prefix": config.api_prefix,
                                    "auth": config.auth}
        settings.update(_env_tuning(env or {}))
        settings.update(options)
        return cls(endpoint, token, **settings)

    # --- public calls --------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return self.endpoint + self.api_prefix + _clean_path(path)

    def web_url(self, kind: str, ident: int) -> str:
        """A page of the TestOps UI, e.g. ``web_url("launch", 7)`` -> ``<endpoint>/launch/7``."""
        from testops_evidence.testops.links import page_url

        return page_url(self.endpoint, kind, ident)

    def set_deadline(self, seconds: float) -> None:
        """An overall deadline for every later call (``testops.deadline`` once it has passed)."""
        self._deadline_at = self._monotonic() + seconds

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._call("GET", path, params=params)

    def get_optional(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """Like :meth:`get`, but ``None`` for a 404 (a thing that does not exist is an answer here)."""
        try:
            return self.get(path, params)
        except Refusal as refusal:
            if refusal.http_status == 404:
                return None
            raise

    def post(self, path: str, json: Any = None, *, data: Any = None, files: Any = None,
             params: Mapping[str, Any] | None = None) -> Any:
        return self._call("POST", path, params=params, json_body=json, data=data, files=files)

    def patch(self, path: str, json: Any, *, params: Mapping[str, Any] | None = None) -> Any:
        return self._call("PATCH", path, params=params, json_body=json)

    def fetch_page(self, path: str, params: Mapping[str, Any] | None, page: int, size: int) -> Page:
        query = dict(params or {})
        query.update({"page": page, "size": size})
        return parse_page(self.get(path, query), f"page {page} of {_clean_path(path)}", page)

    def pages(self, path: str, params: Mapping[str, Any] | None = None, page_size: int = 100, *,
              max_pages: int | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a Spring-paged listing, page after page, until ``last`` (or ``totalPages``).

        Refuses ``testops.response_invalid`` past ``max_pages`` pages, so a misbehaving server cannot
        keep the phase reading forever.
        """
        limit = max_pages if max_pages is not None else self.max_pages
        number = 0
        while True:
            if number >= limit:
                raise Refusal("testops.response_invalid", f"{_clean_path(path)} has more than {limit} pages",
                              field="pages", expected=f"<= {limit} pages", actual=f"> {limit}")
            page = self.fetch_page(path, params, number, page_size)
            if page.total_pages is not None and page.total_pages > limit:
                raise Refusal("testops.response_invalid", f"{_clean_path(path)} announces {page.total_pages} "
                              f"pages, over the {limit}-page guard", field="totalPages",
                              expected=f"<= {limit}", actual=page.total_pages)
            yield from page.content
            if page.last or not page.content:
                return
            number += 1

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> TestOpsClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- the request loop ----------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None,
              data: Any = None, files: Any = None) -> Any:
        clean = _clean_path(path)
        url = self.endpoint + self.api_prefix + clean
        started = self._monotonic()
        attempt = 0
        reauthenticated = False
        while True:
            self._check_deadline(method, clean, started, None)
            try:
                answer = self._send_bounded(started, method, url, clean, params, json_body, data, files,
                                            authorization=self._authorization())
            except _Transport as failure:
                if method in MUTATING:
                    if failure.sent:
                        raise self._uncertain(method, clean, failure.reason) from None
                    raise Refusal("testops.deadline" if failure.deadline else "testops.transport",
                                  f"{method} {clean} could not reach TestOps ({failure.reason}); nothing was sent") from None
                if attempt >= self.max_retries:
                    raise Refusal("testops.deadline" if failure.deadline else "testops.transport",
                                  f"GET {clean} failed ({_attempts(attempt + 1)}); last: {failure.reason}") from None
                self._backoff(method, clean, started, attempt, None, failure.reason)
                attempt += 1
                continue

            status = answer.status
            if status == 401 and self.auth == "jwt" and not reauthenticated:
                # A 401 is an answer given before the request was processed, so re-sending it once with a
                # fresh JWT is safe even for a mutation (the JWT may have expired early or been revoked).
                reauthenticated = True
                self._jwt = None
                continue
            if 200 <= status < 300:
                return self._decode(method, clean, answer)
            if method not in MUTATING and (status in RETRYABLE_STATUS or status >= 500):
                if attempt >= self.max_retries:
                    raise self._status_refusal(method, clean, answer, attempts=attempt + 1)
                self._backoff(method, clean, started, attempt, answer, f"HTTP {status}")
                attempt += 1
                continue
            raise self._status_refusal(method, clean, answer, attempts=attempt + 1)

    def _send_bounded(self, started: float, method: str, url: str, clean: str, *args: Any,
                      authorization: str | None) -> _Answer:
        """:meth:`_send` with a deadline over the whole answer: status, headers and body. The read timeout alone
        is per read, and a server that drips a byte per (read timeout - ε) would never trip it."""
        from testops_evidence.answerdeadline import AnswerDeadline, DeadlineExpired

        seconds = self._answer_seconds(started)
        try:
            with AnswerDeadline(seconds):
                return self._send(method, url, clean, *args, authorization=authorization)
        except DeadlineExpired as expired:
            raise _Transport(f"no whole answer within {seconds:g} s", sent=expired.sent, deadline=True) from None

    def _answer_seconds(self, started: float) -> float:
        """How long one answer may take: the connect and read timeouts together, and never past the per-call or
        overall deadline. Those are kept on the injected clock; what is left of them becomes real seconds here,
        because a socket waits in real time (see answerdeadline)."""
        now = self._monotonic()
        seconds = self.connect_timeout + self.read_timeout
        seconds = min(seconds, started + self.call_deadline - now)
        if self._deadline_at is not None:
            seconds = min(seconds, self._deadline_at - now)
        return max(0.0, seconds)

    def _send(self, method: str, url: str, clean: str, params: Mapping[str, Any] | None, json_body: Any,
              data: Any, files: Any, *, authorization: str | None) -> _Answer:
        import requests

        self._limiter.acquire()
        request_id = self._new_request_id()
        headers = {"Accept": "application/json", "X-Request-Id": request_id,
                   "User-Agent": _user_agent()}
        if authorization is not None:
            headers["Authorization"] = authorization
        session = self._get_session()
        self.request_count += 1
        began = self._monotonic()
        self._log(f"TestOps {method} {clean} (request id {request_id})")
        try:
            response = session.request(method, url, params=_query(params), json=json_body, data=data,
                                       files=files, headers=headers, stream=True, allow_redirects=False,
                                       timeout=(self.connect_timeout, self.read_timeout))
        except requests.exceptions.ConnectTimeout:
            raise _Transport("connect timeout", sent=False) from None
        except requests.exceptions.SSLError as exc:
            # TLS fails in the handshake, before the request is written.
            raise _Transport(f"TLS error: {clip(str(exc), MESSAGE_LIMIT, self._secrets)}", sent=False) from None
        except requests.exceptions.ReadTimeout:
            raise _Transport(f"no answer within the {self.read_timeout:g} s read timeout", sent=True) from None
        except requests.exceptions.ConnectionError as exc:
            sent = not _never_connected(exc)
            raise _Transport(self._connection_reason(exc, sent), sent=sent) from None
        except requests.exceptions.RequestException as exc:
            raise _Transport(f"{type(exc).__name__}", sent=True) from None
        try:
            body = self._read_body(method, clean, response)
        finally:
            response.close()
        server_id = response.headers.get("X-Request-Id")
        elapsed_ms = int((self._monotonic() - began) * 1000)
        self._log(f"TestOps {method} {clean} -> {response.status_code} in {elapsed_ms} ms "
                  f"(request id {request_id}{'' if not server_id or server_id == request_id else ', server ' + clip(server_id, 80, self._secrets)})")
        return _Answer(response.status_code, response.headers, body, request_id)

    def _read_body(self, method: str, clean: str, response: requests.Response) -> bytes:
        import requests

        declared = response.headers.get("Content-Length")
        size = None if declared is None else header_int(declared)
        if declared is not None and size is None:
            # "²" passes str.isdigit and makes int() raise (issue 24): the answer is broken, whatever it says.
            reason = f"HTTP {response.status_code} was answered with a Content-Length that is not a number"
            if method in MUTATING:
                raise self._uncertain(method, clean, reason)
            raise Refusal("testops.response_invalid", f"{method} {clean}: {reason}", field="Content-Length",
                          expected="ASCII digits", actual=clip(declared, 40))
        if size is not None and size > self.max_response_bytes:
            raise self._too_large(method, clean, response.status_code, f"declared {size} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(READ_CHUNK):
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise self._too_large(method, clean, response.status_code, f"more than {size - len(chunk)} bytes")
                chunks.append(chunk)
        except requests.exceptions.RequestException as exc:
            # The answer broke off (truncated body, reset, read timeout while streaming).
            raise _Transport(f"the answer broke off ({type(exc).__name__})", sent=True) from None
        except (OverflowError, ValueError):
            # A chunked body whose chunk size is negative ("-99…9"): urllib3 reads the size with int(line, 16),
            # which takes the sign, and hands it to http.client, which raises (the long fuzz run found it).
            raise _Transport("the answer broke off (a chunk size that is not a size)", sent=True) from None
        return b"".join(chunks)

    def _too_large(self, method: str, clean: str, status: int, size: str) -> Refusal:
        if method in MUTATING and 200 <= status < 300:
            return self._uncertain(method, clean, f"HTTP {status} was answered, but the body ({size}) is over the "
                                   f"{self.max_response_bytes}-byte cap, so its result cannot be read")
        return Refusal("testops.response_too_large", f"{method} {clean}: the answer ({size}) is over the "
                       f"{self.max_response_bytes}-byte cap", field="response size",
                       expected=f"<= {self.max_response_bytes} bytes", actual=size)

    def _decode(self, method: str, clean: str, answer: _Answer) -> Any:
        if not answer.body.strip():
            return None
        try:
            return loads_json(answer.body)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            reason = f"the answer to {method} {clean} is not valid JSON ({exc})"
            if method in MUTATING:
                raise self._uncertain(method, clean, f"HTTP {answer.status} was answered, but {reason}") from None
            raise Refusal("testops.response_invalid", reason, field="body", expected="JSON",
                          actual=f"{len(answer.body)} bytes, request id {answer.request_id}") from None

    def _uncertain(self, method: str, clean: str, reason: str) -> Refusal:
        return Refusal("testops.uncertain", f"{method} {clean} may or may not have taken effect: {reason}. "
                       "It is not re-sent automatically.")

    def _status_refusal(self, method: str, clean: str, answer: _Answer, *, attempts: int) -> Refusal:
        detail = _server_message(answer.body)
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        text = f"TestOps answered HTTP {answer.status} to {method} {clean}{tries} (request id {answer.request_id})"
        if detail:
            text += f": {clip(detail, MESSAGE_LIMIT, self._secrets)}"
        code = "testops.auth" if answer.status in (401, 403) else f"testops.http_{answer.status}"
        return Refusal(code, text, http_status=answer.status)

    # --- retries and deadlines -----------------------------------------------------------------------
    def _backoff(self, method: str, clean: str, started: float, attempt: int, answer: _Answer | None,
                 reason: str) -> None:
        wait = None
        if answer is not None:
            wait = _retry_after(answer.headers.get("Retry-After"), self._clock())
        if wait is None:
            ceiling = min(self.backoff_cap, self.backoff_base * (2 ** attempt))
            wait = ceiling / 2 + self._rng.random() * ceiling / 2  # "equal jitter": never zero, never in step
        elif wait > self.retry_after_cap:
            raise Refusal("testops.deadline", f"{method} {clean}: TestOps asked to retry after {wait:g} s "
                          f"({reason}), longer than the {self.retry_after_cap:g} s the client waits",
                          field="Retry-After", expected=f"<= {self.retry_after_cap:g} s", actual=f"{wait:g} s")
        self._check_deadline(method, clean, started, wait, reason)
        self._log(f"TestOps {method} {clean}: {reason}; retry {attempt + 1} of {self.max_retries} in {wait:.2f} s")
        self._sleep(wait)

    def _check_deadline(self, method: str, clean: str, started: float, wait: float | None,
                        reason: str = "") -> None:
        now = self._monotonic()
        after = now + (wait or 0.0)
        limits = [("per-call", started + self.call_deadline)]
        if self._deadline_at is not None:
            limits.append(("overall", self._deadline_at))
        for name, limit in limits:
            if after > limit:
                last = f"; last: {reason}" if reason else ""
                raise Refusal("testops.deadline", f"{method} {clean}: the {name} deadline runs out before the "
                              f"next attempt{last}", field="deadline", expected=f"done by {name} deadline",
                              actual=f"{after - limit:.1f} s past it")

    # --- auth ----------------------------------------------------------------------------------------
    def _authorization(self) -> str:
        if self.auth == "api-token":
            return f"Api-Token {self._token}"
        if self._jwt is None or self._monotonic() >= self._jwt_refresh_at:
            self._exchange()
        assert self._jwt is not None
        return f"Bearer {self._jwt}"

    def _exchange(self) -> None:
        """Exchange the API token for a JWT at the UAA endpoint (always ``/api/uaa/oauth/token``)."""
        url = self.endpoint + TOKEN_PATH
        form = {"grant_type": "apitoken", "scope": "openid", "token": self._token}
        started = self._monotonic()
        attempt = 0
        while True:
            self._check_deadline("POST", TOKEN_PATH, started, None)
            try:
                answer = self._send_bounded(started, "POST", url, TOKEN_PATH, None, None, form, None,
                                            authorization=None)
            except _Transport as failure:
                # The exchange mutates nothing in TestOps, so it is retried like a GET.
                if attempt >= self.max_retries:
                    raise Refusal("testops.deadline" if failure.deadline else "testops.transport",
                                  f"the token exchange failed ({_attempts(attempt + 1)}); last: {failure.reason}") from None
                self._backoff("POST", TOKEN_PATH, started, attempt, None, failure.reason)
                attempt += 1
                continue
            if answer.status in RETRYABLE_STATUS or answer.status >= 500:
                if attempt >= self.max_retries:
                    raise self._status_refusal("POST", TOKEN_PATH, answer, attempts=attempt + 1)
                self._backoff("POST", TOKEN_PATH, started, attempt, answer, f"HTTP {answer.status}")
                attempt += 1
                continue
            if answer.status in (400, 401, 403):
                raise Refusal("testops.auth", f"TestOps refused the token exchange (HTTP {answer.status}, "
                              f"request id {answer.request_id}); check the token and its permissions",
                              http_status=answer.status)
            if not 200 <= answer.status < 300:
                raise self._status_refusal("POST", TOKEN_PATH, answer, attempts=attempt + 1)
            break
        try:
            body = loads_json(answer.body)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise Refusal("testops.response_invalid", "the token exchange answer is not JSON") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token or any(c.isspace() for c in token):
            raise Refusal("testops.response_invalid", "the token exchange answer has no access_token",
                          field="access_token", expected="a JWT", actual="(missing)")
        expires_in = body.get("expires_in")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
            raise Refusal("testops.response_invalid", "the token exchange answer has no positive expires_in",
                          field="expires_in", expected="seconds > 0", actual=_short(repr(expires_in)))
        if self._mask is not None:
            self._mask(token)
        self._secrets.append(token)
        self._jwt = token
        # Refresh before it runs out: a tenth of its life early, at most a minute.
        self._jwt_refresh_at = self._monotonic() + float(expires_in) - min(60.0, float(expires_in) / 10)
        self._log(f"TestOps: exchanged the API token for a JWT valid {expires_in} s")

    # --- plumbing ------------------------------------------------------------------------------------
    def _get_session(self) -> requests.Session:
        if self._session is None:
            import requests

            from testops_evidence.answerdeadline import deadline_adapter

            session = requests.Session()
            # No urllib3-level retries at all: this class decides what may be re-sent. The adapter lets the
            # answer deadline (see _send_bounded) cut a connection that is still answering.
            session.mount("http://", deadline_adapter(max_retries=0))
            session.mount("https://", deadline_adapter(max_retries=0))
            # trust_env would let a ~/.netrc entry replace our Authorization header; turn it off, then take
            # back from the environment only what self-hosted runners need: the proxy (honouring
            # NO_PROXY) and a custom CA bundle for a TestOps behind an internal CA.
            session.trust_env = False
            session.proxies.update(requests.utils.get_environ_proxies(self.endpoint))
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            if bundle:
                session.verify = bundle
            self._session = session
        return self._session

    def _connection_reason(self, exc: Exception, sent: bool) -> str:
        """A readable cause: what happened, and the innermost error's type (its text can be noisy)."""
        cause: Any = exc.args[0] if exc.args else exc
        cause = getattr(cause, "reason", cause)  # urllib3 MaxRetryError -> its reason
        if len(getattr(cause, "args", ())) == 2 and isinstance(cause.args[1], BaseException):
            cause = cause.args[1]  # ProtocolError("Connection aborted.", RemoteDisconnected(...))
        what = "the connection broke before an answer came" if sent else "the connection could not be opened"
        return self._scrub(f"{what} ({type(cause).__name__})")

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


def _never_connected(exc: Exception) -> bool:
    """True when a ConnectionError happened while connecting (DNS, refused): nothing was sent."""
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError

    inner = exc.args[0] if exc.args else None
    if isinstance(inner, MaxRetryError):
        inner = inner.reason
    # NewConnectionError and NameResolutionError are ConnectTimeoutError subclasses in urllib3 2.
    return isinstance(inner, ConnectTimeoutError)


def _retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds or an HTTP date; ``None`` when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text and text.isascii() and text.isdigit():
        # delay-seconds (RFC 9110 10.2.3): any number of digits; past 15 it is longer than any cap, and
        # int() or float() of hundreds of digits would raise instead of answering.
        seconds = ascii_int(text, maximum=10**15 - 1)
        return float(seconds) if seconds is not None else math.inf
    try:
        when = email.utils.parsedate_to_datetime(text)
        return max(0.0, when.timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _server_message(body: bytes) -> str:
    """The ``message`` (or ``error``) a TestOps error body carries, uncut: the caller scrubs it of secrets
    and only then cuts it (``redact.clip``), so a cut never splits a token the server echoed; never the
    raw body."""
    try:
        value = loads_json(body)
    except ValueError:
        return ""
    if isinstance(value, dict):
        for key in ("message", "error_description", "error"):
            text = value.get(key)
            if isinstance(text, str) and text.strip():
                return text
    return ""


def _clean_path(path: str) -> str:
    if not path.startswith("/") or "//" in path or ".." in path.split("/") or any(c in path for c in "?#\r\n"):
        raise ValueError(f"not a clean API path: {path!r}")
    return path


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    if params is None:
        return None
    query: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            query.append((key, _query_value(item)))
    return query


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _user_agent() -> str:
    from testops_evidence import __version__

    return f"testops-evidence/{__version__}"


# variable -> (option, kind, minimum, maximum). Seconds and rates are ASCII decimals, counts ASCII integers: what
# float() and int() also take (``inf``, ``1e400``, ``nan``, ``1_0``, Arabic-Indic digits) is refused, and so is a
# value the transport cannot use (a zero or an hour-long timeout, a pace of one request in 10^320 seconds), which
# ended in internal.error or in a wait without end.
_ENV_TUNING: dict[str, tuple[str, type, float, float]] = {
    "TESTOPS_EVIDENCE_CONNECT_TIMEOUT": ("connect_timeout", float, 0.001, 3600),
    "TESTOPS_EVIDENCE_READ_TIMEOUT": ("read_timeout", float, 0.001, 3600),
    "TESTOPS_EVIDENCE_RATE_LIMIT": ("rate_limit", float, 0.01, 10_000),  # 0 turns pacing off
    "TESTOPS_EVIDENCE_MAX_RETRIES": ("max_retries", int, 0, 100),
    "TESTOPS_EVIDENCE_MAX_RESPONSE_BYTES": ("max_response_bytes", int, 1, INT64_MAX),
}
_DECIMAL = re.compile(r"(?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})\Z")


def _env_tuning(env: Mapping[str, str]) -> dict[str, Any]:
    tuning: dict[str, Any] = {}
    for variable, (option, kind, minimum, maximum) in _ENV_TUNING.items():
        raw = env.get(variable)
        if raw is None or raw.strip() == "":
            continue
        text = raw.strip()
        value: float | int | None
        if kind is int:
            value = ascii_int(text, minimum=int(minimum), maximum=int(maximum))
        else:
            value = float(text) if _DECIMAL.match(text) else None
            if value is not None and not (minimum <= value <= maximum or (option == "rate_limit" and value == 0)):
                value = None
        if value is None:
            shown = f"{minimum:g} to {maximum:g}" if kind is float else f"{int(minimum)} to {int(maximum)}"
            extra = " (0 turns pacing off)" if option == "rate_limit" else ""
            raise Refusal(f"input.{variable.lower().replace('_', '-')}", f"{variable} must be a "
                          f"{'decimal number' if kind is float else 'whole number'} from {shown}{extra}, in ASCII "
                          "digits", field=variable, expected=f"{shown}{extra}", actual=raw[:100])
        tuning[option] = value
    return tuning
