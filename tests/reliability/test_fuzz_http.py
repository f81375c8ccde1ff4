"""Fuzz what the servers answer, over real HTTP on 127.0.0.1: only reportable refusals may come out.

* ``testops-http-read``, ``testops-http-mutation`` — a scripted server answers every request with a drawn status, headers (lying
  Content-Length, odd Retry-After, Location) and body; the TestOps client (both auth styles) GETs and
  POSTs against it. Besides the invariant: a mutation is sent once, whatever the answer (twice only
  for a 401 under JWT auth, which is answered before anything is processed).
* ``testops-bindings`` — the documents a real TestOps test server answers to select's binding reads
  (job run, job, launch, plan, job run plan) are recorded, mutated, and served back; ``bind_job_run``
  and the plan matching consume them.
* ``github-http`` — the GitHub REST test server answers the run, the artifact list and the artifact
  download with drawn statuses and bodies (PyGithub runs unmodified); what it returns is checked as
  guard and import check it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from helpers import FakeClock
from reliability import corpus
from reliability.fuzzing import (
    Targets,
    duplicate_key_json,
    fuzz_settings,
    json_bytes,
    json_values,
    mutated_bytes,
    mutated_json,
    raw_token_json,
)
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence.context import env_context
from testops_evidence.github_run import RequestPolicy, download_artifact, fetch_run, list_artifacts, rest_context
from testops_evidence.readers.archive import extract_zip
from testops_evidence.readers.testplan import match_rows, parse_jobrun_plan
from testops_evidence.testops.binding import bind_job_run
from testops_evidence.testops.client import TestOpsClient

TOKEN = "fuzz-testops-token-0c1d"
GH_TOKEN = "ghs_fuzzGitHubToken000000000000000000"

# --- a scripted server ---------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    declared_length: int | None = None  # a Content-Length that may lie about the body


@dataclass
class ScriptedServer:
    """Answers each request with ``script(method, path)``; closes every connection after answering."""

    script: Callable[[str, str], Answer] = lambda _m, _p: Answer()
    log: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                app.log.append((self.command, self.path))
                answer = app.script(self.command, self.path)
                self.close_connection = True
                self.send_response_only(answer.status)
                declared = answer.declared_length if answer.declared_length is not None else len(answer.body)
                self.send_header("Content-Length", str(declared))
                self.send_header("Connection", "close")
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.close()


def client_for(url: str, *, auth: str = "api-token") -> TestOpsClient:
    clock = FakeClock()
    # A fake clock: backoff and Retry-After advance it instead of sleeping; short timeouts bound a lying
    # Content-Length (the server closes the connection, so the read ends at once anyway).
    return TestOpsClient(url, TOKEN, project_id=12, auth=auth, max_retries=2, read_timeout=5, connect_timeout=5,
                         clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep)


# --- testops-http --------------------------------------------------------------------------------------

STATUSES = st.one_of(st.sampled_from((200, 201, 204, 301, 302, 400, 401, 403, 404, 408, 409, 429, 500, 502, 503)),
                     st.integers(100, 599))
HEADERS = st.dictionaries(
    st.sampled_from(("Retry-After", "Content-Type", "Location", "X-Request-Id", "Transfer-Encoding")),
    st.one_of(st.sampled_from(("0", "1", "120", "999999", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "soon",
                               "application/json", "text/html", "http://169.254.169.254/", "chunked",
                               "9" * 400, "1" + "0" * 309, "Fri, 31 Dec 9999 23:59:59 GMT", "\u0661\u0662")),
              st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)),
    max_size=3)
BODIES = st.one_of(
    json_values.map(json_bytes),
    mutated_json(corpus.page_document([{"id": 1, "name": "a"}])).map(json_bytes),
    mutated_json({"id": 77, "access_token": "jwt.abc.def", "expires_in": 3600}).map(json_bytes),
    raw_token_json({"id": 77, "access_token": "jwt.abc.def", "expires_in": 3600}),
    duplicate_key_json(corpus.page_document([{"id": 1, "name": "a"}])),
    st.binary(max_size=200),
)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    body = draw(BODIES)
    lie = draw(st.sampled_from((None, None, 0, len(body) + 10, max(len(body) - 1, 0))))
    return Answer(draw(STATUSES), draw(HEADERS), body, lie)


@fuzz_settings(scale=0.5)
@given(answer=answers(), auth=st.sampled_from(("api-token", "jwt")))
def test_fuzz_testops_http(fuzz: Targets, scripted: ScriptedServer, answer: Answer, auth: str) -> None:
    scripted.script = lambda _method, _path: answer
    with client_for(scripted.url, auth=auth) as client, fuzz.target("testops-http-read").example("select"):
        client.get("/testcase/194")
    scripted.log.clear()
    with client_for(scripted.url, auth=auth) as client, fuzz.target("testops-http-mutation").example("upload"):
        try:
            client.post("/upload/test-result", {"testSessionId": 1, "results": []})
        finally:
            sent = [entry for entry in scripted.log if entry == ("POST", "/api/upload/test-result")]
            allowed = 2 if auth == "jwt" and answer.status == 401 else 1
            assert len(sent) <= allowed, f"a mutation was sent {len(sent)} times"
            scripted.log.clear()


# --- testops-bindings ------------------------------------------------------------------------------------

LIVE = env_context(corpus.env())
JOB_UID = "acme/agents_Agent evals"  # the uid the job was created with (ALLURE_JOB_UID names it here)


@dataclass(frozen=True)
class Recorded:
    job_run_id: int
    documents: dict[str, Any]  # request path (with query) -> the JSON the test server answered


@functools.cache
def recorded() -> Recorded:
    """A TestOps test server seeded as a TestOps-launched run of the example contract, and the answers it
    gives to the reads select binds."""
    contract = corpus.example_contract()
    with TestOpsServer(token=TOKEN) as server:
        seeded = server.seed_contract(contract, job_url=LIVE.workflow_url, job_external_id=JOB_UID)
        launch = server.add_launch(contract.testops.project_id, "agent-protocol #42")  # type: ignore[union-attr]
        run = server.add_jobrun(seeded["job-id"], launch_id=launch["id"], stage="scheduled", url=LIVE.run_url,
                                case_ids=seeded["case-ids"])
        lookup = requests.Request("GET", server.url + "/api/job", params={
            "projectId": contract.testops.project_id, "externalId": JOB_UID}).prepare().path_url  # type: ignore[union-attr]
        paths = [f"/api/jobrun/{run['id']}", f"/api/job/{seeded['job-id']}", lookup, f"/api/launch/{launch['id']}",
                 f"/api/testplan/{seeded['plan-id']}", f"/api/jobrun/{run['id']}/plan?expected=true"]
        documents = {}
        for path in paths:
            answer = requests.get(server.url + path, headers={"Authorization": f"Api-Token {TOKEN}"}, timeout=10)
            answer.raise_for_status()
            documents[path] = answer.json()
    return Recorded(run["id"], documents)


@fuzz_settings(scale=0.5)
@given(data=st.data())
def test_fuzz_testops_bindings(fuzz: Targets, scripted: ScriptedServer, data: st.DataObject) -> None:
    target = fuzz.target("testops-bindings")
    seeds = recorded()
    served = {path: json_bytes(data.draw(mutated_json(document, max_mutations=2)))
              for path, document in seeds.documents.items()}
    scripted.script = lambda _method, path: Answer(200, {"Content-Type": "application/json"},
                                                   served.get(path, b'{"message": "not found"}'),
                                                   None) if path in served else Answer(404, {}, b"{}")
    contract = corpus.example_contract()
    with client_for(scripted.url) as client, target.example("select"):
        bind_job_run(client, contract, LIVE, seeds.job_run_id, None, job_uid=JOB_UID)
        rows = parse_jobrun_plan(client.get(f"/jobrun/{seeds.job_run_id}/plan", {"expected": "true"}))
        match_rows(rows, contract)


# --- github-http ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GitHubWorld:
    server: GitHubServer
    run_id: int
    env: dict[str, str]
    event: dict[str, Any]
    zip_data: bytes


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubWorld]:
    with GitHubServer(token=GH_TOKEN) as server:
        server.add_repo("acme/agents")
        run = server.add_run("acme/agents", head_sha=corpus.env()["GITHUB_SHA"], run_number=42)
        data = corpus.artifact_zip()
        server.add_artifact(run["id"], "cells-nightly", data)
        env = server.runner_env(run["id"], event_path="/nonexistent")
        yield GitHubWorld(server, run["id"], env, server.event_payload(run["id"]), data)


GITHUB_ROUTES = ("run", "run_artifacts", "blob")
GITHUB_STATUSES = st.sampled_from((200, 200, 200, 201, 204, 304, 400, 401, 403, 404, 410, 422, 429, 500, 502, 503))


@fuzz_settings(scale=0.5)
@given(route=st.sampled_from(GITHUB_ROUTES), status=GITHUB_STATUSES, data=st.data())
def test_fuzz_github_http(fuzz: Targets, github: GitHubWorld, route: str, status: int, data: st.DataObject) -> None:
    target = fuzz.target("github-http")
    server = github.server
    if route == "blob":
        body = data.draw(st.one_of(mutated_bytes(github.zip_data), st.binary(max_size=100)))
    else:
        seed = corpus.run_document() if route == "run" else {"total_count": 1,
                                                             "artifacts": [corpus.artifact_document()]}
        body = data.draw(st.one_of(mutated_json(seed).map(json_bytes), json_values.map(json_bytes),
                                   raw_token_json(seed), duplicate_key_json(seed), st.binary(max_size=100)))
    retry_after = data.draw(st.sampled_from((None, "0", "1", "abc", "100000", "9" * 400)))
    server.fault(route, status, retry_after=retry_after, body=body)
    policy = RequestPolicy(retries=1, sleep=lambda _seconds: None)
    api = server.api_url()
    try:
        with target.example("import" if route != "run" else "guard"):
            if route == "run":
                run = fetch_run(api, GH_TOKEN, "acme/agents", github.run_id, policy=policy)
                rest_context(github.env, github.event, run)
            else:
                artifacts = list_artifacts(api, GH_TOKEN, "acme/agents", github.run_id, policy=policy)
                for artifact in artifacts[:1]:
                    zipped = download_artifact(api, GH_TOKEN, artifact, max_bytes=1024 * 1024, policy=policy)
                    extract_zip(zipped, prefix="results/")
        assert not any(record.authorization for record in server.log if record.route == "blob")
    finally:
        server.clear_faults()  # an unconsumed fault (the request failed before reaching it) must not leak
        server.clear_log()
