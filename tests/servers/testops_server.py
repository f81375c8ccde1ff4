"""A stateful, Allure-TestOps-compatible HTTP server for tests (real HTTP on 127.0.0.1:0).

Use it as a context manager; seed state with the ``add_*`` helpers (or :meth:`TestOpsServer.seed_contract`),
inject faults with :meth:`TestOpsServer.fail`, and assert on :attr:`TestOpsServer.log`::

    with TestOpsServer(token="t0ken") as server:
        server.add_project(12)
        server.add_case(12, "Get task context", "agents/protocol/get-task-context", id=194)
        server.fail("GET", r"/testcase/194", "status", status=503, times=2, retry_after="1")
        client = TestOpsClient(server.url, "t0ken", sleep=clock.sleep, monotonic=clock.monotonic)
        client.get("/testcase/194")          # two 503s, then the case
        assert [e.status for e in server.requests("GET", r"/testcase/194")] == [503, 503, 200]

**Generations and conformance.** The server speaks one generation of the conformance table
(``tests/data/testops-conformance.json``; ``generation="25.4"`` or ``"current"``, by default the one the
suite's ``testops_generation`` fixture chose). Every request is checked against the table first
(``servers/conformance.py``): what it refuses is answered 400/404/415 with TestOps' error body
``{message, status, timestamp}``, and every 2xx answer keeps only the fields the generation documents.
The endpoint list below is what the handlers do; the table says what each generation accepts and answers.

**Prefixes.** Every endpoint answers under both ``/api`` and ``/api/rs`` (one shared state), unless the
constructor's ``prefixes`` narrows that. The token exchange is only at ``/api/uaa/oauth/token``.
Fault patterns and :meth:`requests` match the *route*: the path with the prefix removed (``/testcase/194``).

**Auth.** ``Authorization: Api-Token <token>`` (scheme case-insensitive) or ``Bearer <jwt>`` where the JWT
came from ``POST /api/uaa/oauth/token`` (form ``grant_type=apitoken``, ``scope=openid``, ``token=...``;
answer ``{access_token, token_type, expires_in, scope, jti}``). JWTs expire ``jwt_expires_in`` seconds
after issue on the server's ``clock`` (pass a test's fake monotonic clock to control it), or at once with
:meth:`expire_tokens`. Missing, wrong or expired credentials get 401.

**Endpoints** (``{P}`` = either prefix; pages are Spring pages ``{content, totalElements, totalPages,
number, size, last, first, numberOfElements, empty}`` with ``page`` 0-based and ``size`` capped at
``max_page_size``):

============================================  ==========================================================
``GET {P}/testcase?projectId=``               page of non-deleted cases (``deleted=true`` adds deleted)
``GET {P}/testcase/__search?projectId&rql=``  page; RQL below; fields ``id``, ``name``, ``fullName``, ``deleted``
``GET/PATCH {P}/testcase/{id}``               case ``{id, projectId, name, fullName, automated, deleted}``
``POST {P}/testcase``                         ``{projectId, name, fullName?, automated?}`` -> case
``GET {P}/testplan?projectId=``               page of plans
``GET {P}/testplan/{id}``                     ``{id, projectId, name, baseRql, treeSelection, testCasesCount}``
``POST {P}/testplan``                         ``{projectId, name, treeSelection?}`` -> plan
``PATCH {P}/testplan/{id}``                   ``{name?, treeSelection?}``: plan membership is
                                              ``treeSelection.leafsInclude`` (test case ids), replaced whole
``POST {P}/testplan/{id}/sync``               recounts the plan's test cases (``recount_later`` makes a count stale)
``POST {P}/testplan/{id}/run``                ``{launchName}`` -> launch; one job run per job of the plan
``GET {P}/job?projectId&externalId=``         the job, or 404 (as Allure 3 expects)
``GET {P}/job/{id}``                          ``{id, name, projectId, type, url, externalId, parameters}``
``GET {P}/jobrun/{id}``                       ``{id, externalId (its uid), url, launchId, stage, status, job{id,type,url,name}}``
``GET {P}/jobrun/{id}/plan?expected=true``    ``[{id, selector}]`` (selector = the case's fullName)
``GET {P}/launch?projectId=``                 page, newest first; ``__search`` with fields ``id``, ``name``, ``closed``
``GET {P}/launch/{id}``                       ``{id, projectId, name, closed, createdDate, ...}``
``POST {P}/launch``                           ``{name, projectId}`` -> launch
``POST {P}/launch/{id}/close|reopen``         -> launch
``GET {P}/launch/{id}/progress``              ``{ready}``: true once every result of the launch is visible
``POST {P}/launch/attachment?launchId``       (current only) multipart ``file`` parts
``POST {P}/upload/start``                     -> ``{jobRunId, launchId, jobId, projectId}`` (attaches to ``jobRun.id`` and
                                              sets its uid when given, else finds/creates job and job run; a
                                              ``job.parameters`` list replaces the job's parameters)
``POST {P}/upload/session``                   ``{launchId}`` with ``?manual=true`` (current; ignored on 25.4, which
                                              does not define it), or (current) ``{jobRunId}`` -> ``{id, ...}``
``POST {P}/upload/test-result``               ``{testSessionId, results:[<= max_chunk]}`` -> ``{results:[{id, uuid}]}``
                                              (current) or ``{resultIds}`` in the order sent (25.4, whose
                                              description does not promise an order); the ``ALLURE_ID`` label
                                              maps to ``testCaseId``; 409 if the launch is closed
``POST {P}/upload/test-result/{id}/attachment``  multipart ``file`` parts -> 202, no content
``POST {P}/testresult/attachment?testResultId``  multipart ``file`` parts, attached to the result -> rows with
                                              ``entity`` (required by AttachmentRow)
``POST {P}/upload/stop``                      ``{projectId, jobUid, jobRunUid, status}``: finds the job by its external
                                              id and its run by uid (404 otherwise); the job run is finished
``GET {P}/testresult?launchId=``              page of *visible* results ``{id, projectId, launchId, testCaseId,
                                              name, fullName, status, start, stop, duration, hidden}``;
                                              ``hidden``: a retry (an earlier result of the same test case and
                                              environment in the launch; the one that started last is shown)
``GET {P}/testresult/{id}``                   the same plus ``jobRun{id}``, ``message``, ``labels``, ``uuid``
============================================  ==========================================================

**RQL subset**: ``clause (and clause)*``; ``clause`` is ``field = value`` (``==`` and ``!=`` too), a numeric
``field > n`` (``>=``, ``<``, ``<=``) or ``field in [v, v, ...]``; values are integers, ``"double-quoted"`` strings (``\\"`` escapes) or
``true``/``false``. Anything else answers 400.

**Eventual consistency.** An uploaded result stays hidden for the first ``visible_after_polls`` polls of
its launch (a poll is a ``GET /testresult?launchId=`` or ``GET /launch/{id}/progress``) and appears from
the next one. With 0 it is visible at once.

**Faults** (:meth:`fail`): matched by method (or ``*``) and a regex ``fullmatch`` on the route, applied to
the next ``times`` matching requests (``None`` = all). Kinds:

* ``status`` -- answer ``status`` (with ``Retry-After`` if given) *without* processing (``commit=True``:
  process first, then answer the status anyway, like a gateway error after the backend committed);
* ``delay`` -- process, then wait ``delay`` seconds before answering (set it past the client's read timeout);
* ``truncate`` -- process, declare the full ``Content-Length``, send half the body, close the connection;
* ``oversize`` -- process, answer valid JSON of about ``size`` bytes (no ``Content-Length`` unless
  ``declare_length``), then close;
* ``invalid_json`` -- process, answer 200 with a body that is not JSON (``body=`` chooses it: a strict
  reader's refusals, such as a 5,000-digit integer or NaN, are "not JSON" too);
* ``duplicate`` -- process, then repeat the first item of the page's ``content`` (or of a JSON array);
* ``drop`` -- process ("commit"), then close the connection without any answer (the uncertain mutation).
* ``headers`` -- process, then answer as usual with ``headers=`` replacing the answer's own (a
  ``Content-Length: ²`` that ``str.isdigit`` accepts and ``int`` refuses).
* ``drip`` -- process, then send the real answer through ``drip=Drip(every, part)`` (``servers/drip.py``): a
  byte (or a one-byte chunk) every ``every`` seconds, which only a deadline over the whole answer stops.

``message=`` sets the ``status`` kind's error message (a hostile server echoing the token in it).

``commit=False`` on the processing kinds answers the fault without touching state.

**Request log.** :attr:`log` holds :class:`LoggedRequest` entries (method, full path, route, prefix, query,
JSON body, status -- ``None`` when dropped --, fault kind, auth scheme). Tokens are never logged: neither the
header nor the token-exchange form. :meth:`requests` filters it; :meth:`mutations` lists the non-GET
requests other than the token exchange.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from servers import conformance
from servers.drip import Drip

STATUSES = ("passed", "failed", "broken", "skipped", "unknown")
FAULT_KINDS = ("status", "delay", "truncate", "oversize", "invalid_json", "duplicate", "drop", "headers",
               "drip")
TOKEN_ROUTE = "/api/uaa/oauth/token"
RECORD_VARIABLE = "TESTOPS_EVIDENCE_RECORD_REQUESTS"
_RECORDINGS = itertools.count(1)


def load_recorded(folder: Path) -> dict[str, list[LoggedRequest]]:
    """Requests written by servers run with ``TESTOPS_EVIDENCE_RECORD_REQUESTS``, per generation."""
    found: dict[str, list[LoggedRequest]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line:
                continue
            item = json.loads(line)
            raw = base64.b64decode(item["raw"])
            body = json.loads(raw) if raw and item["content-type"].startswith("application/json") else None
            found.setdefault(item["generation"], []).append(LoggedRequest(
                item["method"], item["path"], item["route"], item["prefix"], item["query"], body=body,
                status=item["status"], endpoint=item["endpoint"], refused=item["refused"],
                content_type=item["content-type"], raw=raw))
    return found


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    kind: str
    times: int | None = 1
    status: int = 503
    retry_after: str | None = None
    delay: float = 5.0
    size: int = 1024 * 1024
    declare_length: bool = False
    commit: bool = True
    hits: int = 0
    body: bytes = b"{not json"
    message: str | None = None  # "status": the error body's message (a hostile server echoes a token in it)
    headers: dict[str, str] = field(default_factory=dict)  # "headers": these replace the answer's own
    drip: Drip | None = None  # kind "drip": the real answer, dripped (servers/drip.py)

    def matches(self, method: str, route: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method == "*" or self.method == method) and self.pattern.fullmatch(route) is not None


@dataclass
class LoggedRequest:
    method: str
    path: str
    route: str
    prefix: str
    query: dict[str, list[str]]
    body: Any = None
    status: int | None = None
    fault: str | None = None
    auth: str | None = None
    endpoint: str | None = None  # the conformance table's endpoint id
    refused: str | None = None  # why the conformance table refused the request
    content_type: str = ""
    raw: bytes = b""  # the body as sent (kept for the OpenAPI validation of recorded requests; never the token's)


    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class _Response:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)


# --- RQL --------------------------------------------------------------------------------------------------

_RQL_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<op>==|!=|>=|<=|=|>|<|\[|\]|,)'
                        r"|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))")


def _rql_tokens(text: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _RQL_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise HttpError(400, f"unsupported rql near position {pos}")
        pos = match.end()
        if match.group("str") is not None:
            tokens.append(("value", json.loads(match.group("str"))))
        elif match.group("num") is not None:
            tokens.append(("value", int(match.group("num"))))
        elif match.group("op") is not None:
            tokens.append(("op", match.group("op")))
        else:
            word = match.group("word")
            low = word.lower()
            if low in ("true", "false"):
                tokens.append(("value", low == "true"))
            elif low in ("and", "in", "or", "not"):
                tokens.append(("kw", low))
            else:
                tokens.append(("field", word))
    return tokens


def parse_rql(text: str, fields: Iterable[str]) -> Callable[[dict[str, Any]], bool]:
    """Compile the RQL subset into a predicate over entity dicts; 400 for anything unsupported."""
    allowed = set(fields)
    tokens = _rql_tokens(text)
    clauses: list[Callable[[dict[str, Any]], bool]] = []
    i = 0

    def take(kind: str, value: Any = None) -> Any:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind or (value is not None and tokens[i][1] != value):
            raise HttpError(400, f"unsupported rql: expected {value or kind} at token {i}")
        i += 1
        return tokens[i - 1][1]

    while True:
        name = take("field")
        if name not in allowed:
            raise HttpError(400, f"unsupported rql field {name!r}")
        if i < len(tokens) and tokens[i] == ("kw", "in"):
            i += 1
            take("op", "[")
            values = [take("value")]
            while i < len(tokens) and tokens[i] == ("op", ","):
                i += 1
                values.append(take("value"))
            take("op", "]")
            clauses.append(_rql_in(name, values))
        else:
            op = take("op")
            if op not in ("=", "==", "!=", ">", ">=", "<", "<="):
                raise HttpError(400, f"unsupported rql operator {op!r}")
            value = take("value")
            if op in ("=", "==", "!="):
                clauses.append(_rql_in(name, [value], negate=op == "!="))
            else:
                # Numeric comparison (AQL docs: id >= 100); a string or boolean value is refused.
                if isinstance(value, bool) or not isinstance(value, int):
                    raise HttpError(400, f"unsupported rql: {op} needs a number")
                clauses.append(_rql_compare(name, op, value))
        if i == len(tokens):
            break
        take("kw", "and")
    return lambda entity: all(clause(entity) for clause in clauses)


def _rql_in(name: str, values: list[Any], *, negate: bool = False) -> Callable[[dict[str, Any]], bool]:
    def clause(entity: dict[str, Any]) -> bool:
        return any(_rql_equal(entity.get(name), v) for v in values) != negate

    return clause


def _rql_compare(name: str, op: str, wanted: int) -> Callable[[dict[str, Any]], bool]:
    def clause(entity: dict[str, Any]) -> bool:
        actual = entity.get(name)
        if isinstance(actual, bool) or not isinstance(actual, int):
            return False
        return {">": actual > wanted, ">=": actual >= wanted, "<": actual < wanted, "<=": actual <= wanted}[op]

    return clause


def _rql_equal(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return isinstance(actual, bool) and isinstance(wanted, bool) and actual == wanted
    return type(actual) is type(wanted) and actual == wanted


# --- the server -------------------------------------------------------------------------------------------


class TestOpsServer:
    """The stateful TestOps emulator. See the module docstring for endpoints, faults and the log."""

    __test__ = False

    def __init__(
        self,
        *,
        token: str = "testops-test-token",  # noqa: S107 - a test server's fixed test credential
        jwt_expires_in: int = 3600,
        jwt_announces_expiry: bool = True,
        job_lookup_none: str = "404",
        visible_after_polls: int = 0,
        clock: Callable[[], float] = time.monotonic,
        prefixes: tuple[str, ...] = ("/api", "/api/rs"),
        max_page_size: int = 1000,
        max_chunk: int = 100,
        generation: str | None = None,
    ) -> None:
        # The server generation (tests/data/testops-conformance.json): which endpoints exist, what they accept
        # and what they answer. Tests that do not choose run against the suite's parametrized generation.
        self.generation = generation or conformance.DEFAULT_GENERATION
        if self.generation not in conformance.GENERATIONS:
            raise ValueError(f"generation must be one of {conformance.GENERATIONS}")
        self.token = token
        self.jwt_expires_in = jwt_expires_in
        # RFC 6749 §5.1 makes expires_in optional: False answers the exchange without it (the JWT still
        # expires after jwt_expires_in seconds).
        self.jwt_announces_expiry = jwt_announces_expiry
        # What GET /job?externalId answers when no job has the id: 25.4.1 documents only a 200 (JobDto or a
        # page), so both readings are served: "404", or "empty-page" (a page without content).
        if job_lookup_none not in ("404", "empty-page"):
            raise ValueError("job_lookup_none must be '404' or 'empty-page'")
        self.job_lookup_none = job_lookup_none
        self.visible_after_polls = visible_after_polls
        self.clock = clock
        self.prefixes = prefixes
        self.max_page_size = max_page_size
        self.max_chunk = max_chunk
        self.log: list[LoggedRequest] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self.projects: set[int] = set()
        self.cases: dict[int, dict[str, Any]] = {}
        self.plans: dict[int, dict[str, Any]] = {}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.jobruns: dict[int, dict[str, Any]] = {}
        self.launches: dict[int, dict[str, Any]] = {}
        self.sessions: dict[int, dict[str, Any]] = {}
        self.results: dict[int, dict[str, Any]] = {}
        self.launch_attachments: list[dict[str, Any]] = []
        self.syncs: list[int] = []  # plan ids recounted (changed or synced), in order
        self.polls: dict[int, int] = {}
        self._jwts: dict[str, float] = {}
        self._ids = itertools.count(1000)
        self._request_ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> TestOpsServer:
        app = self

        class Handler(_Handler):
            server_app = app

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._record()

    def _record(self) -> None:
        """With ``TESTOPS_EVIDENCE_RECORD_REQUESTS`` set to a directory, write the requests this server got
        there (one JSON line each) for tests/test_testops_openapi.py to validate against the description."""
        folder = os.environ.get(RECORD_VARIABLE)
        if not folder or not self.log:
            return
        lines = [json.dumps({"generation": self.generation, "method": e.method, "path": e.path, "route": e.route,
                             "prefix": e.prefix, "query": e.query, "status": e.status, "endpoint": e.endpoint,
                             "refused": e.refused, "content-type": e.content_type,
                             "raw": base64.b64encode(e.raw).decode("ascii")})
                 for e in self.log if e.path != TOKEN_ROUTE]
        name = f"{self.generation}-{os.getpid()}-{id(self):x}-{next(_RECORDINGS)}.jsonl"
        Path(folder, name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    def __enter__(self) -> TestOpsServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- seeding -------------------------------------------------------------------------------------
    def _new_id(self, table: dict[int, dict[str, Any]], wanted: int | None) -> int:
        if wanted is not None:
            if wanted in table:
                raise ValueError(f"id {wanted} already exists")
            return wanted
        while True:
            candidate = next(self._ids)
            if candidate not in table:
                return candidate

    def _now_ms(self) -> int:
        return int(time.time() * 1000)

    def add_project(self, project_id: int) -> int:
        with self.lock:
            self.projects.add(project_id)
        return project_id

    def add_case(self, project_id: int, name: str, full_name: str | None, *, id: int | None = None,
                 deleted: bool = False, automated: bool = True) -> dict[str, Any]:
        with self.lock:
            self.projects.add(project_id)
            case_id = self._new_id(self.cases, id)
            case = {"id": case_id, "projectId": project_id, "name": name, "fullName": full_name,
                    "automated": automated, "deleted": deleted, "createdDate": self._now_ms(),
                    "lastModifiedDate": self._now_ms()}
            self.cases[case_id] = case
            return case

    def add_plan(self, project_id: int, name: str, case_ids: Iterable[int] = (), *, id: int | None = None,
                 job_ids: Iterable[int] = ()) -> dict[str, Any]:
        with self.lock:
            self.projects.add(project_id)
            plan_id = self._new_id(self.plans, id)
            plan = {"id": plan_id, "projectId": project_id, "name": name, "baseRql": None,
                    "treeSelection": _tree(list(case_ids)), "jobIds": list(job_ids),
                    "createdDate": self._now_ms()}
            self.plans[plan_id] = plan
            return plan

    def add_job(self, project_id: int, name: str, *, external_id: str | None = None, url: str | None = None,
                type: str = "github", id: int | None = None,
                parameters: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
        with self.lock:
            self.projects.add(project_id)
            job_id = self._new_id(self.jobs, id)
            job = {"id": job_id, "name": name, "projectId": project_id, "type": type, "url": url,
                   "externalId": external_id, "parameters": list(parameters)}
            self.jobs[job_id] = job
            return job

    def add_launch(self, project_id: int, name: str, *, id: int | None = None, closed: bool = False) -> dict[str, Any]:
        with self.lock:
            self.projects.add(project_id)
            launch_id = self._new_id(self.launches, id)
            launch = {"id": launch_id, "projectId": project_id, "name": name, "closed": closed,
                      "createdDate": self._now_ms(), "lastModifiedDate": self._now_ms(), "tags": []}
            self.launches[launch_id] = launch
            return launch

    def add_jobrun(self, job_id: int, *, launch_id: int | None = None, url: str | None = None,
                   case_ids: Iterable[int] = (), id: int | None = None, stage: str = "in_progress",
                   uid: str | None = None) -> dict[str, Any]:
        with self.lock:
            job = self.jobs[job_id]
            run_id = self._new_id(self.jobruns, id)
            plan = [{"id": cid, "selector": self.cases[cid]["fullName"]} for cid in case_ids]
            run = {"id": run_id, "url": url, "launchId": launch_id, "stage": stage,
                   "projectId": job["projectId"], "jobId": job_id, "uid": uid, "plan": plan, "status": None}
            self.jobruns[run_id] = run
            return run

    def set_jobrun_url(self, jobrun_id: int, url: str) -> None:
        """What TestOps learns once GitHub has started the dispatched run."""
        with self.lock:
            self.jobruns[jobrun_id]["url"] = url

    def seed_contract(self, contract: Any, *, plan: bool = True, job_external_id: str | None = None,
                      job_url: str | None = None, job_name: str = "evaluations") -> dict[str, Any]:
        """Project, cases (ids, titles, full names), the plan (if ``plan``) and one GitHub job, from a
        ``Contract``. Returns ``{"project-id", "plan-id", "job-id", "case-ids"}``."""
        config = contract.testops
        assert config is not None, "the contract needs a testops section"
        project = self.add_project(config.project_id)
        case_ids = []
        for case in contract.cases:
            self.add_case(project, case.title, case.full_name, id=case.testops_id)
            case_ids.append(case.testops_id)
        job = self.add_job(project, job_name, external_id=job_external_id, url=job_url)
        plan_id = None
        if plan:
            plan_id = self.add_plan(project, config.plan_name, case_ids, id=config.plan_id, job_ids=[job["id"]])["id"]
        return {"project-id": project, "plan-id": plan_id, "job-id": job["id"], "case-ids": case_ids}

    def start_plan_run(self, plan_id: int, name: str, *, jobrun_url: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """What ``POST /testplan/{id}/run`` does, without HTTP: a launch and one job run per plan job."""
        with self.lock:
            return self._run_plan(plan_id, name, jobrun_url)

    def expire_tokens(self) -> None:
        with self.lock:
            self._jwts = {jwt: -math.inf for jwt in self._jwts}

    # --- inspection ----------------------------------------------------------------------------------
    def plan_case_ids(self, plan_id: int) -> list[int]:
        with self.lock:
            return list(self.plans[plan_id]["treeSelection"]["leafsInclude"])

    def launch_results(self, launch_id: int) -> list[dict[str, Any]]:
        """All results of a launch, visible or not (state, not an HTTP view)."""
        with self.lock:
            return [dict(r) for r in self.results.values() if r["launchId"] == launch_id]

    def requests(self, method: str | None = None, route: str | None = None) -> list[LoggedRequest]:
        with self.lock:
            return [entry for entry in self.log
                    if (method is None or entry.method == method)
                    and (route is None or re.fullmatch(route, entry.route) is not None)]

    def mutations(self) -> list[LoggedRequest]:
        with self.lock:
            return [e for e in self.log if e.method != "GET" and e.path != TOKEN_ROUTE]

    def reset_log(self) -> None:
        with self.lock:
            self.log.clear()

    # --- faults --------------------------------------------------------------------------------------
    def fail(self, method: str, route: str, kind: str, *, times: int | None = 1, status: int = 503,
             retry_after: str | None = None, delay: float = 5.0, size: int = 1024 * 1024,
             declare_length: bool = False, commit: bool | None = None, body: bytes = b"{not json",
             message: str | None = None, headers: dict[str, str] | None = None,
             drip: Drip | None = None) -> Fault:
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}")
        if (kind == "drip") != (drip is not None):
            raise ValueError("kind 'drip' needs a Drip, and only it takes one")
        fault = Fault(method.upper(), re.compile(route), kind, times, status, retry_after, delay, size,
                      declare_length, commit if commit is not None else kind != "status", body=body,
                      message=message, headers=dict(headers or {}), drip=drip)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def _take_fault(self, method: str, route: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(method, route):
                fault.hits += 1
                return fault
        return None

    # --- request handling ----------------------------------------------------------------------------
    def handle(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        ctype = handler.headers.get("Content-Type") or ""
        body: Any = None
        if raw and ctype.startswith("application/json"):
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                body = _BAD_JSON
        prefix, route = self._route_of(path)
        request_id = handler.headers.get("X-Request-Id") or f"srv-{next(self._request_ids)}"
        entry = LoggedRequest(handler.command, path, route or path, prefix or "", query,
                              body=None if path == TOKEN_ROUTE or body is _BAD_JSON else body,
                              content_type=ctype, raw=b"" if path == TOKEN_ROUTE else raw)
        with self.lock:
            self.log.append(entry)
            fault = self._take_fault(handler.command, entry.route)
        entry.fault = fault.kind if fault else None
        headers = {"X-Request-Id": request_id}

        if fault is not None and not fault.commit:
            # Answered by the fault alone: nothing is processed.
            if fault.kind == "status":
                extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                message = fault.message if fault.message is not None else f"injected HTTP {fault.status}"
                self._send(handler, entry, _Response(fault.status, {"message": message}, {**headers, **extra}))
            elif fault.kind == "drop":
                entry.status = None
                handler.close_connection = True
            elif fault.kind == "delay":
                self._stopping.wait(fault.delay)
                self._send(handler, entry, _Response(503, {"message": "injected delay"}, headers))
            else:
                self._apply_fault(handler, entry, fault, _Response(200, {"content": []}, headers))
            return

        try:
            if path == TOKEN_ROUTE:
                entry.auth = None
                response = self._token_exchange(handler.command, ctype, raw)
            elif route is None:
                raise HttpError(404, f"no such path {path}")
            else:
                entry.auth = self._authenticate(handler.headers.get("Authorization"))
                if body is _BAD_JSON:
                    raise HttpError(400, "the body is not JSON")
                endpoint = self._conform(entry, handler.command, route, query, body, ctype, raw)
                with self.lock:
                    response = self._dispatch(handler.command, route, query, body, ctype, raw)
                if endpoint is not None and 200 <= response.status < 300:
                    response = self._documented(endpoint, response)
        except HttpError as error:
            response = _Response(error.status, conformance.error_body(error.status, error.message, self._now_ms()))
        response.headers.update(headers)

        if fault is None:
            self._send(handler, entry, response)
        else:
            self._apply_fault(handler, entry, fault, response)

    def _conform(self, entry: LoggedRequest, method: str, route: str, query: dict[str, list[str]], body: Any,
                 ctype: str, raw: bytes) -> conformance.Endpoint | None:
        """Check the request against the generation's conformance table (400/404/415 like the real server)."""
        endpoint = conformance.endpoint(self.generation, method, route)
        if endpoint is None:  # no such route: the dispatch answers 404 or 405 (every route is tabled)
            return None
        entry.endpoint = endpoint.id
        parts = [part["name"] for part in _multipart(ctype, raw)] if ctype.startswith("multipart/form-data") else None
        if raw and body is None and parts is None and not ctype.startswith("application/json"):
            body = raw  # a body of another content type: the table decides whether that is allowed
        try:
            conformance.check_request(endpoint, query, ctype, body if raw else None, parts)
        except conformance.Refused as refused:
            entry.refused = refused.reason
            raise HttpError(refused.status, refused.reason) from None
        return endpoint

    def _documented(self, endpoint: conformance.Endpoint, response: _Response) -> _Response:
        """The answer as the generation documents it: its status, and only the fields it lists."""
        status = endpoint.answer.get("status", response.status)
        shape = conformance.answer_shape(endpoint)
        if endpoint.answer.get("or-page") and isinstance(response.payload, dict) and "content" in response.payload:
            shape = {"type": "page", "items": shape}  # GET /job: JobDto, or a page of them (25.4.1 findAll_31)
        if status == 204 or shape is None:
            return _Response(status, None, response.headers)
        documented = conformance.project(shape, response.payload)
        try:
            conformance.check_value(shape, documented, "answer")
        except conformance.Refused as broken:  # a bug of this server, never an answer to the client's request
            raise HttpError(500, f"the test server's answer to {endpoint.id} breaks the conformance table: "
                            f"{broken.reason}") from None
        return _Response(status, documented, response.headers)

    def _apply_fault(self, handler: _Handler, entry: LoggedRequest, fault: Fault, response: _Response) -> None:
        kind = fault.kind
        if kind == "status":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            message = fault.message if fault.message is not None else f"injected HTTP {fault.status}"
            self._send(handler, entry, _Response(fault.status, {"message": message}, {**response.headers, **extra}))
        elif kind == "headers":
            # The real answer, with some of its headers (Content-Length too) replaced by the fault's.
            data = b"" if response.payload is None else json.dumps(response.payload).encode()
            entry.status = response.status
            handler.send_response(response.status)
            sent = {"Content-Type": "application/json", "Content-Length": str(len(data)), **response.headers,
                    **fault.headers}
            for name, value in sent.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
            handler.close_connection = True
        elif kind == "delay":
            self._stopping.wait(fault.delay)
            with suppress(OSError):
                self._send(handler, entry, response)
        elif kind == "drop":
            entry.status = None
            handler.close_connection = True
        elif kind == "truncate":
            data = json.dumps(response.payload).encode()
            entry.status = response.status
            handler.send_response(response.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data[: max(1, len(data) // 2)])
            handler.wfile.flush()
            handler.close_connection = True
        elif kind == "oversize":
            padding = "x" * max(0, fault.size)
            data = json.dumps({"content": [], "padding": padding}).encode()
            entry.status = 200
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            if fault.declare_length:
                handler.send_header("Content-Length", str(len(data)))
            handler.send_header("Connection", "close")
            handler.end_headers()
            with suppress(OSError):
                handler.wfile.write(data)
            handler.close_connection = True
        elif kind == "invalid_json":
            self._send_raw(handler, entry, 200, fault.body, response.headers)
        elif kind == "drip":
            assert fault.drip is not None
            data = b"" if response.payload is None else json.dumps(response.payload).encode()
            entry.status = response.status
            fault.drip.serve(handler.wfile, response.status, {"Content-Type": "application/json", **response.headers},
                             data, self._stopping)
            handler.close_connection = True
        elif kind == "duplicate":
            payload = response.payload
            if isinstance(payload, dict) and isinstance(payload.get("content"), list) and payload["content"]:
                payload = {**payload, "content": [*payload["content"], payload["content"][0]]}
            elif isinstance(payload, list) and payload:
                payload = [*payload, payload[0]]
            self._send(handler, entry, _Response(response.status, payload, response.headers))

    def _send(self, handler: _Handler, entry: LoggedRequest, response: _Response) -> None:
        data = b"" if response.payload is None else json.dumps(response.payload).encode()
        self._send_raw(handler, entry, response.status, data, response.headers)

    def _send_raw(self, handler: _Handler, entry: LoggedRequest, status: int, data: bytes,
                  headers: dict[str, str]) -> None:
        entry.status = status
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()

    def _route_of(self, path: str) -> tuple[str | None, str | None]:
        if path == TOKEN_ROUTE:
            return "/api", "/uaa/oauth/token"
        for prefix in sorted(self.prefixes, key=len, reverse=True):
            if path.startswith(prefix + "/"):
                rest = path[len(prefix):]
                # "/api/rs/x" must not be read as the route "/rs/x" of the "/api" prefix.
                if prefix == "/api" and rest.startswith("/rs/"):
                    continue
                return prefix, rest
        return None, None

    def _authenticate(self, header: str | None) -> str:
        if not header or " " not in header:
            raise HttpError(401, "authentication required")
        scheme, _, credential = header.partition(" ")
        scheme = scheme.lower()
        credential = credential.strip()
        if scheme == "api-token" and secrets.compare_digest(credential, self.token):
            return "api-token"
        if scheme == "bearer":
            with self.lock:
                expires = self._jwts.get(credential)
            if expires is not None and self.clock() < expires:
                return "bearer"
            raise HttpError(401, "invalid or expired token")
        raise HttpError(401, "bad credentials")

    def _token_exchange(self, method: str, ctype: str, raw: bytes) -> _Response:
        if method != "POST":
            raise HttpError(405, "use POST")
        if ctype.startswith("application/x-www-form-urlencoded"):
            form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        elif ctype.startswith("multipart/form-data"):
            form = {part["name"]: part["data"].decode("utf-8", "replace") for part in _multipart(ctype, raw)}
        else:
            raise HttpError(415, "form body expected")
        if form.get("grant_type") != "apitoken":
            return _Response(400, {"error": "unsupported_grant_type"})
        if not secrets.compare_digest(form.get("token", ""), self.token):
            return _Response(401, {"error": "invalid_grant", "error_description": "bad token"})
        jwt = "eyJ" + secrets.token_urlsafe(24)
        with self.lock:
            self._jwts[jwt] = self.clock() + self.jwt_expires_in
        answer = {"access_token": jwt, "token_type": "bearer", "expires_in": self.jwt_expires_in,
                  "scope": "openid", "jti": secrets.token_hex(8)}
        if not self.jwt_announces_expiry:
            del answer["expires_in"]
        return _Response(200, answer)

    # --- routes --------------------------------------------------------------------------------------
    _ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
        (method, re.compile(pattern), name)
        for method, pattern, name in (
            ("GET", r"/testcase", "list_cases"),
            ("GET", r"/testcase/__search", "search_cases"),
            ("GET", r"/testcase/(\d+)", "get_case"),
            ("PATCH", r"/testcase/(\d+)", "patch_case"),
            ("POST", r"/testcase", "create_case"),
            ("GET", r"/testplan", "list_plans"),
            ("GET", r"/testplan/(\d+)", "get_plan"),
            ("POST", r"/testplan", "create_plan"),
            ("PATCH", r"/testplan/(\d+)", "patch_plan"),
            ("POST", r"/testplan/(\d+)/sync", "sync_plan"),
            ("POST", r"/testplan/(\d+)/run", "run_plan"),
            ("GET", r"/job", "find_job"),
            ("GET", r"/job/(\d+)", "get_job"),
            ("GET", r"/jobrun/(\d+)", "get_jobrun"),
            ("GET", r"/jobrun/(\d+)/plan", "get_jobrun_plan"),
            ("GET", r"/launch", "list_launches"),
            ("GET", r"/launch/__search", "search_launches"),
            ("GET", r"/launch/(\d+)", "get_launch"),
            ("POST", r"/launch", "create_launch"),
            ("POST", r"/launch/(\d+)/close", "close_launch"),
            ("POST", r"/launch/(\d+)/reopen", "reopen_launch"),
            ("GET", r"/launch/(\d+)/progress", "launch_progress"),
            ("POST", r"/launch/attachment", "launch_attachment"),
            ("POST", r"/upload/start", "upload_start"),
            ("POST", r"/upload/session", "upload_session"),
            ("POST", r"/upload/test-result", "upload_results"),
            ("POST", r"/upload/test-result/(\d+)/attachment", "upload_result_attachment"),
            ("POST", r"/upload/stop", "upload_stop"),
            ("GET", r"/testresult", "list_results"),
            ("GET", r"/testresult/(\d+)", "get_result"),
            ("POST", r"/testresult/attachment", "testresult_attachment"),
        )
    )

    def _dispatch(self, method: str, route: str, query: dict[str, list[str]], body: Any, ctype: str,
                  raw: bytes) -> _Response:
        path_matched = False
        for route_method, pattern, name in self._ROUTES:
            match = pattern.fullmatch(route)
            if match is None:
                continue
            path_matched = True
            if route_method != method:
                continue
            args = [int(g) for g in match.groups()]
            request = _Request(query, body, ctype, raw)
            status, payload = getattr(self, "_r_" + name)(request, *args)
            return _Response(status, payload)
        raise HttpError(405 if path_matched else 404, f"no route for {method} {route}")

    # test cases
    def _case_view(self, case: dict[str, Any]) -> dict[str, Any]:
        return dict(case)

    def _r_list_cases(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        deleted = r.param("deleted") == "true"
        items = [self._case_view(c) for c in sorted(self.cases.values(), key=lambda c: c["id"])
                 if c["projectId"] == project and (deleted or not c["deleted"])]
        return 200, self._page(items, r)

    def _r_search_cases(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        rql = r.param("rql") or ""
        predicate = parse_rql(rql, ("id", "name", "fullName", "deleted")) if rql.strip() else (lambda _c: True)
        include_deleted = r.param("deleted") == "true" or "deleted" in rql
        items = [self._case_view(c) for c in sorted(self.cases.values(), key=lambda c: c["id"])
                 if c["projectId"] == project and (include_deleted or not c["deleted"]) and predicate(c)]
        return 200, self._page(items, r)

    def _case(self, case_id: int) -> dict[str, Any]:
        case = self.cases.get(case_id)
        if case is None:
            raise HttpError(404, f"test case {case_id} not found")
        return case

    def _r_get_case(self, _r: _Request, case_id: int) -> tuple[int, Any]:
        return 200, self._case_view(self._case(case_id))

    def _r_patch_case(self, r: _Request, case_id: int) -> tuple[int, Any]:
        case = self._case(case_id)
        body = r.object()
        for key in ("name", "fullName"):
            if key in body:
                value = body[key]
                if not isinstance(value, str) or not value or len(value) > (255 if key == "name" else 1000):
                    raise HttpError(400, f"{key} must be a non-empty string")
        for key in ("name", "fullName", "description", "automated"):
            if key in body:
                case[key] = body[key]
        case["lastModifiedDate"] = self._now_ms()
        return 200, self._case_view(case)

    def _project_and_name(self, body: dict[str, Any]) -> tuple[Any, str]:
        """The checks TestOps makes on every create body: an existing project and a 1-255 char name."""
        project = body.get("projectId")
        name = body.get("name")
        if project not in self.projects:
            raise HttpError(400, "projectId must name a project")
        if not isinstance(name, str) or not name or len(name) > 255:
            raise HttpError(400, "name must be a non-empty string of at most 255 characters")
        return project, name

    def _r_create_case(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        project, name = self._project_and_name(body)
        case = self.add_case(project, name, body.get("fullName"), automated=bool(body.get("automated", True)))
        return 200, self._case_view(case)

    # test plans
    def _count(self, plan: dict[str, Any]) -> int:
        leafs = plan["treeSelection"]["leafsInclude"]
        return sum(1 for cid in set(leafs) if cid in self.cases and not self.cases[cid]["deleted"]
                   and self.cases[cid]["projectId"] == plan["projectId"])

    def _plan_view(self, plan: dict[str, Any]) -> dict[str, Any]:
        view = {k: v for k, v in plan.items() if k not in ("jobIds", "_count")}
        view["treeSelection"] = json.loads(json.dumps(plan["treeSelection"]))
        # The count TestOps computed when the plan was last created, changed or synced: a case deleted or
        # moved since leaves it stale until POST /testplan/{id}/sync (conformance table, testplan.sync).
        stored = plan.get("_count")
        view["testCasesCount"] = self._count(plan) if stored is None else stored
        return view

    def recount_later(self, plan_id: int, stale: int) -> None:
        """Make the plan report ``stale`` as its case count until it is synced (or changed)."""
        with self.lock:
            self.plans[plan_id]["_count"] = stale

    def _plan(self, plan_id: int) -> dict[str, Any]:
        plan = self.plans.get(plan_id)
        if plan is None:
            raise HttpError(404, f"test plan {plan_id} not found")
        return plan

    def _r_list_plans(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        items = [self._plan_view(p) for p in sorted(self.plans.values(), key=lambda p: p["id"])
                 if p["projectId"] == project]
        return 200, self._page(items, r)

    def _r_get_plan(self, _r: _Request, plan_id: int) -> tuple[int, Any]:
        return 200, self._plan_view(self._plan(plan_id))

    def _r_create_plan(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        project, name = self._project_and_name(body)
        leafs = _leafs(body.get("treeSelection"))
        plan = self.add_plan(project, name, leafs)
        plan["baseRql"] = body.get("baseRql")
        return 200, self._plan_view(plan)

    def _r_patch_plan(self, r: _Request, plan_id: int) -> tuple[int, Any]:
        plan = self._plan(plan_id)
        body = r.object()
        if "name" in body:
            name = body["name"]
            if not isinstance(name, str) or not name or len(name) > 255:
                raise HttpError(400, "name must be a non-empty string of at most 255 characters")
            plan["name"] = name
        if "treeSelection" in body:
            plan["treeSelection"] = _tree(_leafs(body["treeSelection"]))
        if body.get("baseRql") is not None:
            # A null is an unset field to Jackson: it leaves the query as it was (no source shows it clearing).
            plan["baseRql"] = body["baseRql"]
        plan.pop("_count", None)
        self.syncs.append(plan_id)
        return 200, self._plan_view(plan)

    def _r_sync_plan(self, _r: _Request, plan_id: int) -> tuple[int, Any]:
        plan = self._plan(plan_id)
        plan.pop("_count", None)
        self.syncs.append(plan_id)
        return 200, self._plan_view(plan)

    def _r_run_plan(self, r: _Request, plan_id: int) -> tuple[int, Any]:
        launch, _runs = self._run_plan(plan_id, r.object()["launchName"], None)
        return 200, dict(launch)

    def _run_plan(self, plan_id: int, name: str, jobrun_url: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        plan = self._plan(plan_id)
        launch = self.add_launch(plan["projectId"], name)
        launch["testPlanId"] = plan_id
        case_ids = [cid for cid in plan["treeSelection"]["leafsInclude"]
                    if cid in self.cases and not self.cases[cid]["deleted"]]
        runs = [self.add_jobrun(job_id, launch_id=launch["id"], url=jobrun_url, case_ids=case_ids,
                                stage="scheduled") for job_id in plan["jobIds"]]
        return launch, runs

    # jobs and job runs
    def _r_find_job(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        external = r.param("externalId")
        for job in self.jobs.values():
            if job["projectId"] == project and external is not None and job["externalId"] == external:
                return 200, dict(job)
        if self.job_lookup_none == "empty-page":
            return 200, self._page([], r)
        raise HttpError(404, "job not found")

    def _r_get_job(self, _r: _Request, job_id: int) -> tuple[int, Any]:
        job = self.jobs.get(job_id)
        if job is None:
            raise HttpError(404, f"job {job_id} not found")
        return 200, dict(job)

    def _jobrun(self, run_id: int) -> dict[str, Any]:
        run = self.jobruns.get(run_id)
        if run is None:
            raise HttpError(404, f"job run {run_id} not found")
        return run

    def _jobrun_view(self, run_id: int) -> dict[str, Any]:
        if run_id not in self.jobruns:
            return {"id": run_id}
        return self._r_get_jobrun(None, run_id)[1]  # type: ignore[arg-type]

    def _r_get_jobrun(self, _r: _Request, run_id: int) -> tuple[int, Any]:
        run = self._jobrun(run_id)
        job = self.jobs[run["jobId"]]
        return 200, {"id": run["id"], "url": run["url"], "launchId": run["launchId"], "stage": run["stage"],
                     "projectId": run["projectId"], "status": run["status"], "externalId": run["uid"],
                     "job": {"id": job["id"], "type": job["type"], "url": job["url"], "name": job["name"]}}

    def _r_get_jobrun_plan(self, _r: _Request, run_id: int) -> tuple[int, Any]:
        return 200, [dict(item) for item in self._jobrun(run_id)["plan"]]

    # launches
    def _launch(self, launch_id: int) -> dict[str, Any]:
        launch = self.launches.get(launch_id)
        if launch is None:
            raise HttpError(404, f"launch {launch_id} not found")
        return launch

    def _r_list_launches(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        items = [dict(x) for x in sorted(self.launches.values(), key=lambda x: -x["id"]) if x["projectId"] == project]
        return 200, self._page(items, r)

    def _r_search_launches(self, r: _Request) -> tuple[int, Any]:
        project = r.int_param("projectId")
        rql = r.param("rql") or ""
        predicate = parse_rql(rql, ("id", "name", "closed")) if rql.strip() else (lambda _x: True)
        items = [dict(x) for x in sorted(self.launches.values(), key=lambda x: -x["id"])
                 if x["projectId"] == project and predicate(x)]
        return 200, self._page(items, r)

    def _r_get_launch(self, _r: _Request, launch_id: int) -> tuple[int, Any]:
        return 200, dict(self._launch(launch_id))

    def _r_create_launch(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        name = body.get("name")
        project = body.get("projectId")
        if project not in self.projects:
            raise HttpError(400, "projectId must name a project")
        if not isinstance(name, str) or not name or len(name) > 255:
            raise HttpError(400, "name must be a non-empty string of at most 255 characters")
        return 200, dict(self.add_launch(project, name))

    def _r_close_launch(self, _r: _Request, launch_id: int) -> tuple[int, Any]:
        launch = self._launch(launch_id)
        launch["closed"] = True
        return 200, dict(launch)

    def _r_reopen_launch(self, _r: _Request, launch_id: int) -> tuple[int, Any]:
        launch = self._launch(launch_id)
        launch["closed"] = False
        return 200, dict(launch)

    def _poll(self, launch_id: int) -> int:
        self.polls[launch_id] = self.polls.get(launch_id, 0) + 1
        return self.polls[launch_id]

    def _r_launch_progress(self, _r: _Request, launch_id: int) -> tuple[int, Any]:
        self._launch(launch_id)
        polls = self._poll(launch_id)
        pending = [x for x in self.results.values() if x["launchId"] == launch_id and x["_visibleAt"] > polls]
        return 200, {"ready": not pending, "pending": len(pending)}

    def _r_launch_attachment(self, r: _Request) -> tuple[int, Any]:
        launch = self._launch(r.int_param("launchId"))
        if launch["closed"]:
            raise HttpError(409, "launch is closed")
        stored = []
        for part in r.files():
            item = {"id": next(self._ids), "launchId": launch["id"], **part}
            self.launch_attachments.append(item)
            stored.append({k: item[k] for k in ("id", "name", "contentLength", "contentType")})
        return 200, stored

    # upload
    def _r_upload_start(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        project = body.get("projectId")
        if project not in self.projects:
            raise HttpError(400, "projectId must name a project")
        job_doc: dict[str, Any] = body["job"] if isinstance(body.get("job"), dict) else {}
        run_doc: dict[str, Any] = body["jobRun"] if isinstance(body.get("jobRun"), dict) else {}
        if not job_doc.get("uid") or not run_doc.get("uid"):
            raise HttpError(400, "job.uid and jobRun.uid are required")
        if run_doc.get("id") is not None:
            # A job run TestOps started (ALLURE_JOB_RUN_ID): the upload attaches to it by id and names its uid;
            # the job keeps the external id it was created with, so /upload/stop finds this run only under
            # that job uid (the 404 of a mismatched uid, issue 13).
            run = self._jobrun(int(run_doc["id"]))
            if run["projectId"] != project:
                raise HttpError(400, "the job run belongs to another project")
            run["uid"] = run_doc["uid"]
            run["stage"] = "in_progress"
            if run_doc.get("url"):
                run["url"] = run_doc["url"]
            if isinstance(job_doc.get("parameters"), list):
                # A full replacement, not a merge (allure3 jobParameters.ts): [] erases the job's parameters.
                self.jobs[run["jobId"]]["parameters"] = [dict(p) for p in job_doc["parameters"]]
            return 200, {"jobRunId": run["id"], "launchId": run["launchId"], "jobId": run["jobId"],
                         "projectId": project}
        job = next((j for j in self.jobs.values()
                    if j["projectId"] == project and j["externalId"] == job_doc["uid"]), None)
        if job is None:
            job = self.add_job(project, str(job_doc.get("name") or job_doc["uid"]), external_id=job_doc["uid"],
                               url=job_doc.get("url"))
        launch_doc: dict[str, Any] = body["launch"] if isinstance(body.get("launch"), dict) else {}
        if launch_doc.get("id") is not None:
            launch_id = self._launch(int(launch_doc["id"]))["id"]
        else:
            launch_id = self.add_launch(project, str(run_doc.get("name") or job["name"]))["id"]
        run = self.add_jobrun(job["id"], launch_id=launch_id, url=run_doc.get("url"), uid=run_doc["uid"])
        return 200, {"jobRunId": run["id"], "launchId": launch_id, "jobId": job["id"], "projectId": project}

    def _r_upload_session(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        if body.get("launchId") is not None and r.param("manual") != "true" and self.generation != "25.4":
            # The launch body is the manual session's (allure3 client: ?manual=true with {launchId}).
            raise HttpError(400, "a session for a launch needs manual=true")
        if body.get("jobRunId") is not None:
            run = self._jobrun(int(body["jobRunId"]))
            launch_id, run_id, project = run["launchId"], run["id"], run["projectId"]
        elif body.get("launchId") is not None:
            launch = self._launch(int(body["launchId"]))
            launch_id, run_id, project = launch["id"], None, launch["projectId"]
        else:
            raise HttpError(400, "jobRunId or launchId is required")
        if launch_id is None or launch_id not in self.launches:
            raise HttpError(400, "the job run has no launch")
        if self.launches[launch_id]["closed"]:
            raise HttpError(409, "launch is closed")
        session_id = self._new_id(self.sessions, None)
        if run_id is None:
            # A manual session names no job run; its results still count for the job run of this launch that
            # an upload start attached to (the job run the upload finishes with /upload/stop).
            run_id = next((x["id"] for x in self.jobruns.values() if x["launchId"] == launch_id
                           and x["stage"] == "in_progress"), None)
        session = {"id": session_id, "launchId": launch_id, "jobRunId": run_id, "projectId": project,
                   "environment": body.get("environment") or [], "manual": r.param("manual") == "true"}
        self.sessions[session_id] = session
        return 200, dict(session)

    def _r_upload_results(self, r: _Request) -> tuple[int, Any]:
        body = r.object()
        session = self.sessions.get(body.get("testSessionId"))  # type: ignore[arg-type]
        if session is None:
            raise HttpError(404, "test session not found")
        results = body.get("results")
        if not isinstance(results, list) or not results:
            raise HttpError(400, "results must be a non-empty array")
        if len(results) > self.max_chunk:
            raise HttpError(400, f"at most {self.max_chunk} results per request")
        launch = self.launches[session["launchId"]]
        if launch["closed"]:
            raise HttpError(409, "launch is closed")
        for item in results:
            if not isinstance(item, dict) or not isinstance(item.get("uuid"), str) or not item["uuid"]:
                raise HttpError(400, "every result needs a uuid")
            if str(item.get("status") or "unknown").lower() not in STATUSES:
                raise HttpError(400, f"unknown status {item.get('status')!r}")
        polls = self.polls.get(launch["id"], 0)
        answer = []
        for item in results:
            result_id = self._new_id(self.results, None)
            self.results[result_id] = {
                "id": result_id, "uuid": item["uuid"], "projectId": session["projectId"],
                "launchId": launch["id"], "jobRunId": session["jobRunId"], "sessionId": session["id"],
                "name": item.get("name"), "fullName": item.get("fullName"),
                "status": str(item.get("status") or "unknown").lower(),
                "testCaseId": self._case_for(session["projectId"], item), "message": item.get("message"),
                "start": item.get("start"), "stop": item.get("stop"), "duration": item.get("duration"),
                "labels": item.get("labels") or [], "attachments": [],
                "_visibleAt": polls + self.visible_after_polls + 1,
            }
            answer.append({"id": result_id, "uuid": item["uuid"]})
        if self.generation == "25.4":
            # UploadResultsResponseDto of 25.4.1: the ids alone, in the order the results were sent.
            return 200, {"resultIds": [item["id"] for item in answer]}
        return 200, {"results": answer}

    def _case_for(self, project: int, item: dict[str, Any]) -> int | None:
        for label in item.get("labels") or []:
            if isinstance(label, dict) and label.get("name") in ("ALLURE_ID", "AS_ID"):
                value = str(label.get("value", ""))
                if value.isdigit() and int(value) in self.cases and self.cases[int(value)]["projectId"] == project:
                    return int(value)
        for case in self.cases.values():
            if case["projectId"] == project and not case["deleted"] and case["fullName"] == item.get("fullName"):
                return int(case["id"])
        return None

    def _r_upload_result_attachment(self, r: _Request, result_id: int) -> tuple[int, Any]:
        result = self.results.get(result_id)
        if result is None:
            raise HttpError(404, f"test result {result_id} not found")
        parts = r.files()
        if len(parts) > 100:
            raise HttpError(400, "at most 100 files per request")
        stored = []
        for part in parts:
            item = {"id": next(self._ids), **part}
            result["attachments"].append(item)
            stored.append({k: item[k] for k in ("id", "name", "contentLength", "contentType")})
        return 200, stored

    def _r_testresult_attachment(self, r: _Request) -> tuple[int, Any]:
        result = self.results.get(r.int_param("testResultId"))
        if result is None:
            raise HttpError(404, "test result not found")
        stored = []
        for part in r.files():
            item = {"id": next(self._ids), **part}
            result["attachments"].append(item)
            # TestResultAttachmentRowDto: AttachmentRow's entity is required (its discriminator, mapped to no
            # value in 25.4.1, so the schema's own name, OpenAPI's implicit value).
            stored.append({"id": item["id"], "name": item["name"], "contentLength": item["contentLength"],
                           "contentType": item["contentType"], "entity": "TestResultAttachmentRowDto",
                           "storageKey": f"tr/{result['id']}/{item['id']}", "missed": False, "fromTestCase": False})
        return 200, stored

    def _r_upload_stop(self, r: _Request) -> tuple[int, Any]:
        # ExternalRunStopRequestDto names the job run by (projectId, jobUid, jobRunUid) only: the job by its
        # external id, then its run by uid (conformance table, upload.stop).
        body = r.object()
        project = body["projectId"]
        job = next((j for j in self.jobs.values() if j["projectId"] == project and j["externalId"] is not None
                    and j["externalId"] == body["jobUid"]), None)
        run = None if job is None else next((x for x in self.jobruns.values() if x["jobId"] == job["id"]
                                             and x["uid"] is not None and x["uid"] == body["jobRunUid"]), None)
        if run is None:
            raise HttpError(404, "job run not found")
        run["stage"] = "finished"
        run["status"] = body.get("status")
        return 200, {"jobRunId": run["id"], "launchId": run["launchId"], "jobId": run["jobId"],
                     "projectId": run["projectId"]}

    # test results
    def _result_row(self, result: dict[str, Any], hidden: bool = False) -> dict[str, Any]:
        keys = ("id", "projectId", "launchId", "testCaseId", "name", "fullName", "status", "start", "stop", "duration")
        return {**{k: result[k] for k in keys}, "hidden": hidden}

    def _test_identity(self, result: dict[str, Any]) -> tuple[Any, ...]:
        session = self.sessions.get(result.get("sessionId"))  # type: ignore[arg-type]
        environment = json.dumps(session["environment"] if session else [], sort_keys=True)
        return (result["launchId"], result["testCaseId"] if result["testCaseId"] is not None else result["fullName"],
                environment)

    def _retries(self, results: Iterable[dict[str, Any]]) -> set[int]:
        """Ids of results that are retries: TestOps counts several results of one test (test case and
        environment) in one launch as retries ("What are retries?", docs.qameta.io/faq); the latest is the
        test's result and the earlier ones are listed with ``hidden: true`` (the field API clients read). Here
        the latest is the one that started last, later uploads winning ties (Allure Report's rule)."""
        final: dict[tuple[Any, ...], dict[str, Any]] = {}
        members: list[dict[str, Any]] = []
        for result in results:
            members.append(result)
            identity = self._test_identity(result)
            best = final.get(identity)
            if best is None or (result["start"] or 0, result["id"]) > (best["start"] or 0, best["id"]):
                final[identity] = result
        return {x["id"] for x in members if final[self._test_identity(x)]["id"] != x["id"]}

    def _r_list_results(self, r: _Request) -> tuple[int, Any]:
        launch_id = r.int_param("launchId")
        polls = self._poll(launch_id)
        visible = [x for x in sorted(self.results.values(), key=lambda x: x["id"])
                   if x["launchId"] == launch_id and x["_visibleAt"] <= polls]
        hidden = self._retries(visible)
        items = [self._result_row(x, x["id"] in hidden) for x in visible]
        return 200, self._page(items, r)

    def _r_get_result(self, _r: _Request, result_id: int) -> tuple[int, Any]:
        result = self.results.get(result_id)
        if result is None or result["_visibleAt"] > self.polls.get(result["launchId"], 0):
            raise HttpError(404, f"test result {result_id} not found")
        polls = self.polls.get(result["launchId"], 0)
        hidden = self._retries(x for x in self.results.values()
                               if x["launchId"] == result["launchId"] and x["_visibleAt"] <= polls)
        detail = self._result_row(result, result_id in hidden)
        detail.update({"uuid": result["uuid"], "message": result["message"], "labels": result["labels"],
                       "jobRun": self._jobrun_view(result["jobRunId"]) if result["jobRunId"] is not None else None})
        return 200, detail

    # pages
    def _page(self, items: list[dict[str, Any]], r: _Request) -> dict[str, Any]:
        page = r.int_param("page", default=0, minimum=0)
        size = min(r.int_param("size", default=20, minimum=1), self.max_page_size)
        total = len(items)
        total_pages = math.ceil(total / size) if total else 0
        content = items[page * size:(page + 1) * size]
        return {"content": content, "totalElements": total, "totalPages": total_pages, "number": page,
                "size": size, "last": page >= total_pages - 1, "first": page == 0,
                "numberOfElements": len(content), "empty": not content}


_BAD_JSON = object()


def _tree(leafs: list[int]) -> dict[str, Any]:
    return {"leafsInclude": list(leafs), "leafsExclude": [], "groupsInclude": [], "groupsExclude": [],
            "inverted": False}


def _leafs(selection: Any) -> list[int]:
    if selection is None:
        return []
    if not isinstance(selection, dict):
        raise HttpError(400, "treeSelection must be an object")
    leafs = selection.get("leafsInclude", [])
    if not isinstance(leafs, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in leafs):
        raise HttpError(400, "treeSelection.leafsInclude must be an array of ids")
    return leafs


def _multipart(ctype: str, raw: bytes) -> list[dict[str, Any]]:
    message = BytesParser(policy=policy.HTTP).parsebytes(b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n" + raw)
    if not message.is_multipart():
        raise HttpError(400, "multipart body expected")
    parts = []
    for part in message.iter_parts():
        data = part.get_payload(decode=True) or b""
        parts.append({"name": part.get_param("name", header="content-disposition"),
                      "filename": part.get_filename(), "contentType": part.get_content_type(), "data": data})
    return parts


@dataclass
class _Request:
    query: dict[str, list[str]]
    body: Any
    ctype: str
    raw: bytes

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def int_param(self, name: str, *, default: int | None = None, minimum: int = 1) -> int:
        value = self.param(name)
        if value is None or value == "":
            if default is None:
                raise HttpError(400, f"query parameter {name} is required")
            return default
        if not re.fullmatch(r"-?\d{1,18}", value) or int(value) < minimum:
            raise HttpError(400, f"query parameter {name} must be an integer >= {minimum}")
        return int(value)

    def object(self) -> dict[str, Any]:
        if not isinstance(self.body, dict):
            raise HttpError(400, "a JSON object body is required")
        return self.body

    def files(self) -> list[dict[str, Any]]:
        if not self.ctype.startswith("multipart/form-data"):
            raise HttpError(415, "multipart/form-data expected")
        out = []
        for part in _multipart(self.ctype, self.raw):
            if part["name"] != "file":
                continue
            data = part["data"]
            out.append({"name": part["filename"] or "file", "contentType": part["contentType"],
                        "contentLength": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_app: TestOpsServer
    timeout = 30
    # Headers and body go out in separate writes; without TCP_NODELAY the client's delayed ACK adds ~40 ms.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self.server_app.handle(self)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the request log is the record
        return None


def iter_log(server: TestOpsServer) -> Iterator[str]:
    """The request log as text lines (``METHOD path?query -> status [fault]``), for failure messages."""
    for entry in list(server.log):
        query = "&".join(f"{k}={v}" for k, values in entry.query.items() for v in values)
        yield f"{entry.method} {entry.path}{'?' + query if query else ''} -> {entry.status}" + (
            f" [{entry.fault}]" if entry.fault else "")
