"""A GitHub REST server for tests: runs, artifacts and the artifact zip download, in GitHub's shapes.

It speaks real HTTP on ``127.0.0.1:0`` (a ``ThreadingHTTPServer`` in a daemon thread) so that PyGithub
2.10 and ``requests`` run unmodified against it. Every route is served twice: under ``/`` (the
github.com shape, base URL ``http://127.0.0.1:PORT``) and under ``/api/v3`` (the GHES shape); URLs in
responses carry the prefix the request came in on, as a real server's do.

Routes (the name in brackets is the fault-injection key)::

    GET /repos/{o}/{r}                                   [repo]
    GET /repos/{o}/{r}/actions/runs/{id}                 [run]
    GET /repos/{o}/{r}/actions/runs/{id}/attempts/{n}    [run_attempt]
    GET /repos/{o}/{r}/actions/runs/{id}/artifacts       [run_artifacts]   per_page, page, name
    GET /repos/{o}/{r}/actions/workflows/{id|file}/runs  [workflow_runs]   branch, status, per_page, page
    GET /repos/{o}/{r}/actions/runs/{id}/attempts/{n}/jobs [attempt_jobs] per_page, page
    GET /repos/{o}/{r}/actions/artifacts                 [repo_artifacts]  per_page, page, name
    GET /repos/{o}/{r}/actions/artifacts/{id}            [artifact]
    GET /repos/{o}/{r}/actions/artifacts/{id}/zip        [artifact_zip]    302 -> blob host path
    GET /_blob/{id}?sig=...                              [blob]            403 if Authorization present
    POST /repos/{o}/{r}/check-runs                       [check_run_create]
    PATCH /repos/{o}/{r}/check-runs/{id}                 [check_run_update]
    GET /repos/{o}/{r}/issues/{n}/comments               [issue_comments]  per_page, page
    POST /repos/{o}/{r}/issues/{n}/comments              [issue_comment_create]
    PATCH /repos/{o}/{r}/issues/comments/{id}            [issue_comment_update]

The write routes check a request body as GitHub's REST description requires it (``@octokit/openapi``
23.0.2, ``generated/api.github.com.json``: operations ``checks/create``, ``checks/update``,
``issues/list-comments``, ``issues/create-comment``, ``issues/update-comment``), answering 422 with GitHub's
"Validation Failed" shape otherwise, and the token's permissions (``permissions``: a set such as
``{"checks: write"}``) as GITHUB_TOKEN does: 403 "Resource not accessible by integration" without them.

The blob route stands in for the storage host GitHub redirects to: like the real one it refuses a
request that carries an ``Authorization`` header, which is how the tests prove the token is not
forwarded across the redirect.

Usage::

    with GitHubServer(token="ghs_x") as gh:
        gh.add_repo("acme/agents", private=False)
        run = gh.add_run("acme/agents", head_sha="ab" * 20, actor_id=1234567)
        gh.add_artifact(run["id"], "cells", zip_bytes)
        gh.fault("run", status=503, times=1)
        ...  # PyGithub against gh.api_url() or gh.api_url(ghes=True)
        assert not any(r.authorization for r in gh.log if r.route == "blob")
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import secrets
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from servers.drip import Drip

GHES_PREFIX = "/api/v3"
DEFAULT_TOKEN = "ghs_testTokenForTheGitHubServer000000"
_TIMESTAMP = "2026-01-15T10:00:00Z"


class _Remove:
    """Marker for ``add_run(..., **overrides)``: delete the field from the served document."""

    def __repr__(self) -> str:
        return "REMOVE"


REMOVE: Any = _Remove()


@dataclass
class Fault:
    """An injected failure for one route: the next ``times`` requests get ``status`` (after ``delay``)."""

    status: int = 503
    times: int = 1
    retry_after: str | None = None
    delay: float = 0.0
    body: bytes | None = None
    # "truncate": declare the whole body's Content-Length, send half, close; "drop": close without answering.
    cut: str | None = None
    drip: Drip | None = None  # the route's real answer, dripped (servers/drip.py)


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str  # the path with query, as requested (prefix included)
    route: str  # the fault-injection key, or "unknown"
    authorization: bool  # whether an Authorization header was present (its value is never kept)
    headers: Mapping[str, str]  # every other request header, names lower-cased
    status: int


@dataclass(frozen=True)
class Answer:
    """One answer the server gave, kept (unlike :attr:`GitHubServer.log`, never cleared) so that the tests can
    validate it against GitHub's REST description (servers/github_description.py)."""

    method: str
    path: str  # as requested: prefix and query included
    route: str
    status: int  # 0: the connection was closed without an answer
    content_type: str
    headers: Mapping[str, str]
    body: bytes
    # Shaped by the test to be wrong on purpose: a fault's own body or a cut answer, or an answer holding a run
    # given ``overrides`` (or REMOVE) in add_run. Only such answers may differ from the description.
    crafted: bool


@dataclass
class _Artifact:
    doc: dict[str, Any]
    data: bytes
    repository: str
    run_id: int
    chunked: bool
    sig: str = field(default_factory=lambda: secrets.token_hex(8))


def _user(user_id: int, login: str) -> dict[str, Any]:
    """A ``simple-user`` with every field GitHub's description requires."""
    api = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": "User",
        "site_admin": False,
    }


# The URL fields of a ``minimal-repository`` (GitHub's description requires each), relative to the repository's
# API URL; ``{...}`` are GitHub's own URI-template placeholders, served as they are.
_REPO_URLS = {
    "archive_url": "/{archive_format}{/ref}", "assignees_url": "/assignees{/user}", "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}", "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}", "commits_url": "/commits{/sha}", "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}", "contributors_url": "/contributors", "deployments_url": "/deployments",
    "downloads_url": "/downloads", "events_url": "/events", "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}", "git_refs_url": "/git/refs{/sha}", "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks", "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}", "issues_url": "/issues{/number}", "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}", "languages_url": "/languages", "merges_url": "/merges",
    "milestones_url": "/milestones{/number}", "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}", "releases_url": "/releases{/id}", "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}", "subscribers_url": "/subscribers", "subscription_url": "/subscription",
    "tags_url": "/tags", "teams_url": "/teams", "trees_url": "/git/trees{/sha}",
}


class GitHubServer:
    """The stateful server. Add state with ``add_repo``/``add_run``/``add_artifact``; read ``log``.

    Every server started is kept in :attr:`started` (until the suite's fixture takes it), so that each
    test's answers are validated against GitHub's description (tests/conftest.py)."""

    started: list[GitHubServer] = []  # noqa: RUF012 - a registry shared by every instance, on purpose

    def __init__(self, token: str = DEFAULT_TOKEN, *, host: str = "127.0.0.1") -> None:
        self.token = token
        self._host = host
        self._lock = threading.RLock()  # handlers record the request while holding it
        self._repos: dict[str, dict[str, Any]] = {}
        self._runs: dict[int, dict[str, Any]] = {}
        self._artifacts: dict[int, _Artifact] = {}
        self._faults: dict[str, list[Fault]] = {}
        self._jobs: dict[tuple[int, int], list[dict[str, Any]]] = {}  # (run id, attempt) -> job documents
        self._stores: dict[int, tuple[Path, Callable[[str], str | None], str]] = {}
        self._next_id = 10_000
        self.log: list[RequestRecord] = []
        self.answers: list[Answer] = []
        self.judged = 0  # how many of `answers` the suite's fixture has validated (tests/conftest.py)
        self._handed_out: dict[int, str] = {}  # id(document) -> its shape when a test was given it
        # A hostile server: every artifact or job list page links its next page here (another host, scheme
        # or port), whether or not there is one.
        self.next_page_link: str | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # The port, kept after stop(): a handler thread still answering a request the client gave up on (a
        # timeout test) builds its links from it after the server was stopped.
        self._port: int | None = None
        self._stopping = threading.Event()  # ends a drip still going when the server stops
        # What the token may write (GITHUB_TOKEN's `permissions:`); the write routes answer 403 without it.
        self.permissions: set[str] = {"checks: write", "pull-requests: write"}
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, dict[str, Any]] = {}  # comment id -> {"issue": (repo, number), ...document}

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> GitHubServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer((self._host, 0), Handler)
        self._httpd.daemon_threads = True
        self._port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="github-server",
                                        daemon=True)
        self._thread.start()
        GitHubServer.started.append(self)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def lock(self) -> threading.RLock:
        """The lock the handlers record under: hold it to read ``log`` or ``answers`` as a whole."""
        return self._lock

    @property
    def port(self) -> int:
        assert self._port is not None, "server not started"
        return self._port

    @property
    def url(self) -> str:
        """The server root (what GITHUB_SERVER_URL-style links and the blob host use)."""
        return f"http://{self._host}:{self.port}"

    def api_url(self, *, ghes: bool = False) -> str:
        """The REST base URL: ``http://127.0.0.1:PORT`` or, GHES-style, ``.../api/v3``."""
        return self.url + (GHES_PREFIX if ghes else "")

    # --- state --------------------------------------------------------------------------------------
    def _hand_out(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Note the shape of a document given to a test: one the test changed afterwards is crafted."""
        self._handed_out[id(doc)] = _shape(doc)
        return doc

    def _tampered(self, *docs: Mapping[str, Any]) -> bool:
        """Whether a test changed one of ``docs`` after the server handed it out (called with the lock held)."""
        return any(self._handed_out.get(id(doc)) not in (None, _shape(doc)) for doc in docs)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def add_repo(self, full_name: str, *, private: bool = False, repo_id: int | None = None,
                 owner_id: int | None = None) -> dict[str, Any]:
        """Register a repository (``owner/name``); returns its stored document (mutable)."""
        owner, name = full_name.split("/", 1)
        with self._lock:
            rid = repo_id if repo_id is not None else self._new_id()
            oid = owner_id if owner_id is not None else self._new_id()
            doc = {
                "id": rid,
                "node_id": f"R_{rid}",
                "name": name,
                "full_name": full_name,
                "private": private,
                "visibility": "private" if private else "public",
                "owner": {**_user(oid, owner), "type": "Organization"},
                "fork": False,
                "default_branch": "main",
                "description": None,
            }
            self._repos[full_name.lower()] = doc
        return self._hand_out(doc)

    def add_run(
        self,
        repository: str,
        run_id: int | None = None,
        *,
        name: str = "Agent evals",
        run_number: int = 7,
        run_attempt: int = 1,
        event: str = "workflow_dispatch",
        status: str = "in_progress",
        conclusion: str | None = None,
        workflow_id: int = 161335,
        path: str = ".github/workflows/agent-evals.yml",
        head_branch: str | None = "main",
        head_sha: str = "a" * 40,
        actor_id: int = 1234567,
        actor_login: str = "octocat",
        triggering_actor_id: int | None = None,
        triggering_actor_login: str | None = None,
        head_repository: str | None = None,
        referenced_workflows: list[dict[str, str]] | None = None,
        created_at: str = _TIMESTAMP,
        run_started_at: str = _TIMESTAMP,
        **overrides: Any,
    ) -> dict[str, Any]:
        """Register a workflow run of ``repository`` (added, public, if unknown); returns its document.

        ``overrides`` replace top-level fields of the served JSON; the value ``REMOVE`` deletes one.
        URLs inside the document are rewritten per request to the prefix the client used.
        """
        if repository.lower() not in self._repos:
            self.add_repo(repository)
        with self._lock:
            rid = run_id if run_id is not None else self._new_id()
            repo = self._repos[repository.lower()]
            head_repo = self._repos.get((head_repository or repository).lower(), repo)
            doc: dict[str, Any] = {
                "id": rid,
                "name": name,
                "node_id": f"WFR_{rid}",
                "check_suite_id": rid + 1,
                "check_suite_node_id": f"CS_{rid + 1}",
                "head_branch": head_branch,
                "head_sha": head_sha,
                "path": path,
                "display_title": name,
                "run_number": run_number,
                "run_attempt": run_attempt,
                "event": event,
                "status": status,
                "conclusion": conclusion,
                "workflow_id": workflow_id,
                "pull_requests": [],
                "created_at": created_at,
                "updated_at": created_at,
                "run_started_at": run_started_at,
                "actor": _user(actor_id, actor_login),
                "triggering_actor": _user(
                    triggering_actor_id if triggering_actor_id is not None else actor_id,
                    triggering_actor_login or actor_login,
                ),
                "referenced_workflows": list(referenced_workflows or []),
                "head_commit": {
                    "id": None if head_sha is REMOVE else head_sha,
                    "tree_id": "f" * 40,
                    "message": "Evaluate",
                    "timestamp": created_at,
                    "author": {"name": actor_login, "email": f"{actor_login}@example.com"},
                    "committer": {"name": actor_login, "email": f"{actor_login}@example.com"},
                },
                "_actor": _user(actor_id, actor_login),  # the runner knows it even when the answer leaves it out
                # filled per request by _render_run (they depend on the URL prefix)
                "_repository": repo["full_name"],
                "_head_repository": head_repo["full_name"],
            }
            doc.update(overrides)
            removed = {key for key, value in doc.items() if value is REMOVE}  # named arguments may be REMOVE too
            for key in removed:
                del doc[key]
            doc["_removed"] = removed
            typed = {"name": str, "run_number": int, "run_attempt": int, "event": str, "status": str,
                     "workflow_id": int, "path": str, "head_sha": str, "created_at": str, "run_started_at": str}
            ill_typed = any(not isinstance(doc.get(key), kind) or isinstance(doc.get(key), bool)
                            for key, kind in typed.items() if key not in removed)
            doc["_crafted"] = bool(overrides or removed or ill_typed)
            self._runs[rid] = doc
        return self._hand_out(doc)

    def add_artifact(
        self,
        run_id: int,
        name: str,
        data: bytes,
        digest: str | None = None,
        *,
        artifact_id: int | None = None,
        expired: bool = False,
        size_in_bytes: int | None = None,
        chunked: bool = False,
        head_sha: str | None = None,
    ) -> dict[str, Any]:
        """Attach an artifact with arbitrary zip bytes to a run; returns its stored document.

        ``digest`` defaults to ``sha256:<hex of data>`` (pass ``""`` for an artifact without one, as
        older artifacts have): the REST API's ``digest`` is the hash upload-artifact sent at FinalizeArtifact,
        ``sha256:`` + the hex SHA-256 of the zip it streamed (@actions/artifact, upload-artifact.ts and
        blob-upload.ts). Every artifact gets a new id (ids come from FinalizeArtifact and are not reused).
        ``size_in_bytes`` overrides the advertised size; ``chunked`` serves the blob without a
        Content-Length, so only a streaming byte cap can stop an oversized body.
        """
        with self._lock:
            run = self._runs[run_id]
            aid = artifact_id if artifact_id is not None else self._new_id()
            repository = run["_repository"]
            repo = self._repos[repository.lower()]
            doc = {
                "id": aid,
                "node_id": f"MDg6QXJ0aWZhY3Q{aid}",
                "name": name,
                "size_in_bytes": len(data) if size_in_bytes is None else size_in_bytes,
                "expired": expired,
                "digest": ("sha256:" + hashlib.sha256(data).hexdigest()) if digest is None else (digest or None),
                "created_at": run["created_at"],
                "updated_at": run["created_at"],
                "expires_at": "2026-04-15T10:00:00Z",
                "workflow_run": {
                    "id": run_id,
                    "repository_id": repo["id"],
                    "head_repository_id": self._repos[run["_head_repository"].lower()]["id"],
                    "head_branch": run.get("head_branch"),
                    "head_sha": head_sha or run.get("head_sha"),
                },
            }
            self._artifacts[aid] = _Artifact(doc, data, repository, run_id, chunked)
        return self._hand_out(doc)

    def overwrite_artifact(self, run_id: int, name: str, data: bytes, **options: Any) -> dict[str, Any]:
        """upload-artifact with ``overwrite: true``: "an artifact with a matching name will be deleted before a
        new one is uploaded" (upload-artifact v4.6.2 action.yml) — so the name now belongs to a new artifact
        with a new id, and the old id is gone from the run."""
        with self._lock:
            for aid in [a for a, art in self._artifacts.items() if art.run_id == run_id and art.doc["name"] == name]:
                del self._artifacts[aid]
        return self.add_artifact(run_id, name, data, **options)

    def add_job(self, run_id: int, attempt: int, name: str, *, conclusion: str | None = "success",
                steps: list[dict[str, Any]] | None = None, job_id: int | None = None) -> dict[str, Any]:
        """A job of one run attempt, as ``GET .../runs/{id}/attempts/{n}/jobs`` lists it (REST docs, "Workflow
        jobs"): ``steps`` are ``{name, status, conclusion, number, started_at, completed_at}``, each ``name``
        as the runner evaluated it (:func:`evaluate_step_name`), never the workflow's expression."""
        with self._lock:
            run = self._runs[run_id]
            jid = job_id if job_id is not None else self._new_id()
            # GitHub's description requires each step's conclusion (null while it runs) and number.
            steps = [{"conclusion": None, **step, "number": step.get("number", index + 1)}
                     for index, step in enumerate(steps or [])]
            times = [t for step in steps for t in (step.get("started_at"), step.get("completed_at")) if t]
            doc = {
                "id": jid, "run_id": run_id, "run_attempt": attempt, "node_id": f"CR_{jid}",
                "head_sha": run.get("head_sha"), "head_branch": run.get("head_branch"),
                "url": f"/repos/{run['_repository']}/actions/jobs/{jid}",
                "run_url": f"/repos/{run['_repository']}/actions/runs/{run_id}",
                "check_run_url": f"/repos/{run['_repository']}/check-runs/{jid}",
                "created_at": run["created_at"], "runner_id": 2, "runner_group_id": 1,
                "runner_group_name": "GitHub Actions",
                "html_url": f"https://github.com/{run['_repository']}/actions/runs/{run_id}/job/{jid}",
                "status": "completed" if conclusion is not None else "in_progress", "conclusion": conclusion,
                "started_at": min(times) if times else run["created_at"],
                "completed_at": max(times) if times and conclusion is not None else None,
                "name": name, "steps": steps, "labels": ["ubuntu-latest"], "runner_name": "GitHub Actions 2",
                "workflow_name": run.get("name", "workflow"),
            }
            self._jobs.setdefault((run_id, attempt), []).append(doc)
        return self._hand_out(doc)

    def record_upload(self, run_id: int, artifact: dict[str, Any], *, job: str, what: str,
                      attempt: int = 1) -> dict[str, Any]:
        """The job ``job`` of ``run_id`` as GitHub records it after the campaign template uploaded ``artifact``
        (a document :meth:`add_artifact` returned) and ran the step named by the upload's outputs
        (``testops-evidence: uploaded <what> <id> sha256:<digest>``, campaign/workers.py)."""
        name = f"testops-evidence: uploaded {what} {artifact['id']} {artifact['digest']}"
        return self.add_job(run_id, attempt, job, steps=[{"name": name, "status": "completed",
                                                          "conclusion": "success"}])

    def mirror_artifact_store(self, run_id: int, store: Path, job_name: Callable[[str], str | None],
                              upload_step: str, report_step: str | None = None) -> None:
        """Serve the artifacts the act upload stand-in writes into ``store`` (act/upload-artifact) as this
        run's artifacts, and its upload records as the run's jobs: each cell artifact's upload becomes a job
        named ``job_name(artifact name)`` whose step ``upload_step`` has the recorded times and conclusion,
        followed (with ``report_step``, the next step's ``name:`` expression) by that step with its name
        evaluated over the upload's outputs. An artifact's bytes are the zip the stand-in uploaded
        (``.zips/<id>.zip``), or, for one an attack wrote straight into the store, a zip of its directory.
        Read again at every request, so what an act run uploads (or an attack writes) shows up as it happens."""
        with self._lock:
            self._stores[run_id] = (store, job_name, upload_step, report_step)

    def _sync_store(self, run_id: int) -> None:
        """Bring the artifacts and jobs of a mirrored store up to date (called under the lock)."""
        mirrored = self._stores.get(run_id)
        if mirrored is None:
            return
        store, job_name, upload_step, report_step = mirrored
        run = self._runs[run_id]
        metas = {}
        for meta in sorted((store / ".meta").glob("*.json")) if (store / ".meta").is_dir() else []:
            record = json.loads(meta.read_text(encoding="utf-8"))
            if (store / record["name"]).is_dir():
                metas[int(record["id"])] = record
        for aid in [a for a, art in self._artifacts.items() if art.run_id == run_id and a not in metas]:
            del self._artifacts[aid]  # deleted from the store: gone from the run
        for aid, record in metas.items():
            if aid in self._artifacts:
                continue
            uploaded = store / ".zips" / f"{aid}.zip"
            data = uploaded.read_bytes() if uploaded.is_file() else _zip_directory(store / record["name"])
            doc = self.add_artifact(run_id, record["name"], data, artifact_id=aid)
            doc["created_at"] = doc["updated_at"] = record["created_at"]
            self._hand_out(doc)
        jobs = []
        for upload in sorted((store / ".uploads").glob("*.json")) if (store / ".uploads").is_dir() else []:
            record = json.loads(upload.read_text(encoding="utf-8"))
            name = job_name(record["artifact"])
            if name is None:
                continue
            jid = int(hashlib.sha256(upload.name.encode()).hexdigest()[:8], 16)
            steps = [{"name": upload_step, "status": "completed", "conclusion": record["conclusion"],
                      "started_at": record["started_at"], "completed_at": record["completed_at"]}]
            if report_step is not None:
                # The template runs it `if: !cancelled()`: after a failed upload too, with empty outputs.
                outputs = {"artifact-id": record.get("artifact-id"), "artifact-digest": record.get("artifact-digest")}
                steps.append({"name": evaluate_step_name(report_step, {"upload": outputs}), "status": "completed",
                              "conclusion": "success", "started_at": record["completed_at"],
                              "completed_at": record["completed_at"]})
            jobs.append((name, record["conclusion"], steps, jid))
        attempt = int(run.get("run_attempt") or 1)
        self._jobs[(run_id, attempt)] = []
        for name, conclusion, steps, jid in jobs:
            self.add_job(run_id, attempt, name, conclusion=conclusion, steps=steps, job_id=jid)

    def fault(self, route: str, status: int = 503, *, times: int = 1, retry_after: str | None = None,
              delay: float = 0.0, body: bytes | None = None, cut: str | None = None,
              drip: Drip | None = None) -> None:
        """Make the next ``times`` requests to ``route`` fail with ``status`` (after ``delay`` seconds).

        ``status=200`` with only a ``delay`` slows a route down; ``body`` replaces the response document
        (with ``status=200``: a broken or odd success body). ``cut="truncate"`` sends half of the answer
        under the full Content-Length and closes; ``cut="drop"`` closes the connection without an answer.
        ``drip`` serves the route's real answer (``status`` is ignored) through the given :class:`Drip`.
        """
        if cut not in (None, "truncate", "drop"):
            raise ValueError(f"cut must be truncate or drop, not {cut!r}")
        with self._lock:
            self._faults.setdefault(route, []).append(Fault(status, times, retry_after, delay, body, cut, drip))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def add_comment(self, repository: str, number: int, body: str, *, login: str = "octocat",
                    bot: bool = False) -> dict[str, Any]:
        """A comment on pull request ``number`` of ``repository`` (added if unknown), by a person or a bot."""
        if repository.lower() not in self._repos:
            self.add_repo(repository)
        with self._lock:
            ident = self._new_id()
            full_name = self._repos[repository.lower()]["full_name"]
            user = _bot() if bot else _user(self._new_id(), login)
            comment = {"id": ident, "body": body, "user": user, "_issue": (full_name, number),
                       "html_url": f"https://github.com/{full_name}/pull/{number}#issuecomment-{ident}"}
            self.comments[ident] = comment
        return comment

    def requests_to(self, route: str) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.log if r.route == route]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    # --- helpers for tests that play the runner -------------------------------------------------------
    def event_payload(self, run_id: int, *, inputs: Mapping[str, Any] | None = None,
                      sender_id: int | None = None) -> dict[str, Any]:
        """A ``workflow_dispatch`` event payload consistent with the run (what GITHUB_EVENT_PATH holds)."""
        run = self._runs[run_id]
        repo = self._repos[run["_repository"].lower()]
        actor = _runner_actor(run)
        return {
            "inputs": dict(inputs or {}),
            "ref": f"refs/heads/{run.get('head_branch')}",
            "repository": {k: repo[k] for k in ("id", "name", "full_name", "private", "owner")},
            "sender": _user(sender_id if sender_id is not None else actor["id"], actor["login"]),
            "workflow": run.get("path"),
        }

    def runner_env(self, run_id: int, *, event_path: str, ghes: bool = False) -> dict[str, str]:
        """The ``GITHUB_*`` variables a runner sets for a job of this run."""
        run = self._runs[run_id]
        repo = self._repos[run["_repository"].lower()]
        branch = run.get("head_branch") or "main"
        return {
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": repo["full_name"],
            "GITHUB_REPOSITORY_ID": str(repo["id"]),
            "GITHUB_REPOSITORY_OWNER": repo["owner"]["login"],
            "GITHUB_RUN_ID": str(run["id"]),
            "GITHUB_RUN_NUMBER": str(run["run_number"]),
            "GITHUB_RUN_ATTEMPT": str(run["run_attempt"]),
            "GITHUB_WORKFLOW": str(run.get("name")),
            "GITHUB_WORKFLOW_REF": f"{repo['full_name']}/{run.get('path')}@refs/heads/{branch}",
            "GITHUB_WORKFLOW_SHA": str(run.get("head_sha")),
            "GITHUB_SHA": str(run.get("head_sha")),
            "GITHUB_REF": f"refs/heads/{branch}",
            "GITHUB_REF_NAME": branch,
            "GITHUB_REF_TYPE": "branch",
            "GITHUB_EVENT_NAME": str(run.get("event")),
            "GITHUB_EVENT_PATH": event_path,
            "GITHUB_ACTOR": _runner_actor(run)["login"],
            "GITHUB_ACTOR_ID": str(_runner_actor(run)["id"]),
            "GITHUB_TRIGGERING_ACTOR": (run.get("triggering_actor") or _runner_actor(run))["login"],
            "GITHUB_SERVER_URL": self.url,
            "GITHUB_API_URL": self.api_url(ghes=ghes),
        }

    # --- rendering (called with the lock held) ------------------------------------------------------
    def _minimal_repo(self, full_name: str, base: str) -> dict[str, Any]:
        """The repository as a run embeds it (``minimal-repository``)."""
        repo = self._repos[full_name.lower()]
        api = f"{base}/repos/{repo['full_name']}"
        urls = {key: api + suffix for key, suffix in _REPO_URLS.items()}
        return {**urls, **copy.deepcopy(repo), "url": api, "html_url": f"{self.url}/{repo['full_name']}"}

    def _full_repo(self, full_name: str, base: str) -> dict[str, Any]:
        """The repository as ``GET /repos/{owner}/{repo}`` answers it (``full-repository``)."""
        minimal = self._minimal_repo(full_name, base)
        host = urlsplit(self.url).netloc
        counts = dict.fromkeys(("forks", "forks_count", "open_issues", "open_issues_count", "size", "stargazers_count",
                                "watchers", "watchers_count", "network_count", "subscribers_count"), 0)
        features = dict.fromkeys(("has_issues", "has_projects", "has_wiki", "has_pages", "has_discussions",
                                  "archived", "disabled"), False)
        return {
            **counts, **features,
            "clone_url": f"{self.url}/{full_name}.git", "git_url": f"git://{host}/{full_name}.git",
            "ssh_url": f"git@{host}:{full_name}.git", "svn_url": f"{self.url}/{full_name}", "mirror_url": None,
            "homepage": None, "language": None, "license": None,
            "pushed_at": _TIMESTAMP, "created_at": _TIMESTAMP, "updated_at": _TIMESTAMP,
            **minimal,
        }

    def _render_run(self, doc: Mapping[str, Any], base: str, attempt: int | None = None) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in doc.items() if not k.startswith("_")}
        repository = doc["_repository"]
        rid = doc["id"]
        api = f"{base}/repos/{repository}/actions/runs/{rid}"
        urls = {
            "url": api,
            "html_url": f"{self.url}/{repository}/actions/runs/{rid}",
            "jobs_url": f"{api}/jobs",
            "logs_url": f"{api}/logs",
            "check_suite_url": f"{base}/repos/{repository}/check-suites/{rid + 1}",
            "artifacts_url": f"{api}/artifacts",
            "cancel_url": f"{api}/cancel",
            "rerun_url": f"{api}/rerun",
            "workflow_url": f"{base}/repos/{repository}/actions/workflows/{doc.get('workflow_id')}",
            "repository": self._minimal_repo(repository, base),
            "head_repository": self._minimal_repo(doc["_head_repository"], base),
        }
        for key, value in urls.items():
            if key not in doc and key not in doc["_removed"]:  # an override (or REMOVE) of a URL field wins
                out[key] = value
        current = doc.get("run_attempt")
        shown = attempt if attempt is not None else current
        if isinstance(shown, int):
            out["run_attempt"] = shown
            out["previous_attempt_url"] = f"{api}/attempts/{shown - 1}" if shown > 1 else None
        if attempt is not None and attempt != current:
            out["url"] = f"{api}/attempts/{attempt}"
        return out

    def _render_artifact(self, art: _Artifact, base: str) -> dict[str, Any]:
        out = copy.deepcopy(art.doc)
        api = f"{base}/repos/{art.repository}/actions/artifacts/{art.doc['id']}"
        out["url"] = api
        out["archive_download_url"] = f"{api}/zip"
        return out


_DOCS = "https://docs.github.com/rest"


class _Handler(BaseHTTPRequestHandler):
    owner: GitHubServer
    _pending: tuple[str, str] = ("GET", "unknown")
    _drip: Drip | None = None
    _crafted = False  # the answer being served was shaped by the test (see Answer.crafted)
    protocol_version = "HTTP/1.1"  # keep-alive, as PyGithub's connection pool expects
    server_version = "GitHub.com"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the request log replaces stderr noise

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # --- plumbing ---------------------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        path = parts.path
        prefix = ""
        if path == GHES_PREFIX or path.startswith(GHES_PREFIX + "/"):
            prefix = GHES_PREFIX
            path = path[len(GHES_PREFIX):] or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        route, params = _route(method, path)
        self._pending = (method, route)
        self._crafted = False
        self._serve(route, params, prefix, query)

    def _record(self, status: int, body: bytes = b"", content_type: str = "",
                headers: Mapping[str, str] | None = None) -> None:
        """Log the request before the response goes out, so a client that has its answer sees the record;
        keep the answer for the description check."""
        method, route = self._pending
        answer = Answer(method=method, path=self.path, route=route, status=status, content_type=content_type,
                        headers=dict(headers or {}), body=body, crafted=self._crafted)
        record = RequestRecord(
            method=method,
            path=self.path,
            route=route,
            authorization="Authorization" in self.headers,
            headers={k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"},
            status=status,
        )
        with self.owner._lock:
            self.owner.log.append(record)
            self.owner.answers.append(answer)

    def _serve(self, route: str, params: dict[str, str], prefix: str, query: dict[str, str]) -> int:
        owner = self.owner
        with owner._lock:
            queue = owner._faults.get(route, [])
            fault = queue[0] if queue else None
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    queue.pop(0)
        self._drip = fault.drip if fault is not None else None
        self._crafted = fault is not None and (fault.body is not None or fault.cut is not None)
        if fault is not None and fault.drip is None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.cut == "drop":
                self._record(0)
                self.close_connection = True
                return 0
            if fault.cut == "truncate":
                body = fault.body if fault.body is not None else b'{"message": "' + b"x" * 64 + b'"}'
                self._record(fault.status, body, "application/json; charset=utf-8")
                self.send_response(fault.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return fault.status
            if fault.status != 200 or fault.body is not None:
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                body = fault.body if fault.body is not None else _json_bytes(
                    {"message": f"injected {fault.status}", "documentation_url": _DOCS})
                return self._send(fault.status, body, headers=headers)

        if route == "unknown":
            return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
        if route == "blob":
            return self._blob(params, query)
        if not self._authorized():
            return self._json(401, {"message": "Bad credentials", "documentation_url": _DOCS, "status": "401"})

        base = owner.url + prefix
        with owner._lock:
            repo = owner._repos.get(f"{params['owner']}/{params['repo']}".lower())
            if repo is None:
                return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
            self._crafted = self._crafted or owner._tampered(repo)
            if route == "repo":
                return self._json(200, owner._full_repo(repo["full_name"], base))
            if route in ("run", "run_attempt", "run_artifacts", "attempt_jobs"):
                run = owner._runs.get(int(params["run_id"]))
                if run is None or run["_repository"].lower() != repo["full_name"].lower():
                    return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
                owner._sync_store(run["id"])
                if route == "attempt_jobs":
                    jobs = owner._jobs.get((run["id"], int(params["attempt"])), [])
                    self._crafted = self._crafted or owner._tampered(*jobs)
                    return self._job_page(jobs, query)
                head_repo = owner._repos.get(run["_head_repository"].lower(), repo)
                self._crafted = self._crafted or bool(run.get("_crafted")) or owner._tampered(run, head_repo)
                if route == "run":
                    return self._json(200, owner._render_run(run, base))
                if route == "run_attempt":
                    attempt = int(params["attempt"])
                    current = run.get("run_attempt")
                    if not 1 <= attempt <= (current if isinstance(current, int) else 1):
                        return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
                    return self._json(200, owner._render_run(run, base, attempt))
                items = [a for a in owner._artifacts.values() if a.run_id == run["id"]]
                return self._page(items, query, base)
            if route == "workflow_runs":
                return self._workflow_runs(repo, params["workflow"], query, base)
            if route == "repo_artifacts":
                items = [a for a in owner._artifacts.values() if a.repository.lower() == repo["full_name"].lower()]
                return self._page(items, query, base)
            if route in _WRITE_ROUTES:
                return self._write(route, params, repo, query, base)
            for run_id in list(owner._stores):
                owner._sync_store(run_id)
            art = owner._artifacts.get(int(params["artifact_id"]))
            if art is None or art.repository.lower() != repo["full_name"].lower():
                return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
            if route == "artifact":
                self._crafted = self._crafted or owner._tampered(art.doc)
                return self._json(200, owner._render_artifact(art, base))
            # artifact_zip
            if art.doc.get("expired"):
                return self._json(410, {"message": "Artifact has expired", "documentation_url": _DOCS})
            location = f"{owner.url}/_blob/{art.doc['id']}?sig={art.sig}"
            return self._send(302, b"", headers={"Location": location})

    def _workflow_runs(self, repo: dict[str, Any], workflow: str, query: dict[str, str], base: str) -> int:
        """``GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs`` (REST "List workflow runs for a
        workflow"): ``workflow_id`` is the numeric id or the workflow's file name; ``branch`` filters on the
        head branch, ``status`` on status (``completed``, ...) or conclusion (``success``, ``failure``, ...);
        newest first, paged by ``per_page`` (at most 100) and ``page``. The caller holds the lock."""
        runs = [r for r in self.owner._runs.values() if r["_repository"].lower() == repo["full_name"].lower()
                and (str(r.get("workflow_id")) == workflow if workflow.isdigit()
                     else str(r.get("path", "")).rsplit("/", 1)[-1] == workflow)]
        if not runs and not any(str(r.get("path", "")).rsplit("/", 1)[-1] == workflow or
                                str(r.get("workflow_id")) == workflow for r in self.owner._runs.values()):
            return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
        if "branch" in query:
            runs = [r for r in runs if r.get("head_branch") == query["branch"]]
        if "status" in query:
            wanted = query["status"]
            runs = [r for r in runs if r.get("status") == wanted or r.get("conclusion") == wanted]
        runs.sort(key=lambda r: r["id"], reverse=True)
        try:
            per_page = max(1, min(100, int(query.get("per_page", "30"))))
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS})
        chunk = runs[(page - 1) * per_page: page * per_page]
        self._crafted = self._crafted or any(r.get("_crafted") for r in chunk) or self.owner._tampered(*chunk)
        return self._json(200, {"total_count": len(runs),
                                "workflow_runs": [self.owner._render_run(r, base) for r in chunk]})

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() in ("token", "bearer") and secrets.compare_digest(value.strip(), self.owner.token)

    def _page(self, items: list[_Artifact], query: dict[str, str], base: str) -> int:
        name = query.get("name")
        if name is not None:
            items = [a for a in items if a.doc["name"] == name]
        items.sort(key=lambda a: a.doc["id"], reverse=True)  # newest first, as GitHub lists them
        try:
            per_page = max(1, min(100, int(query.get("per_page", "30"))))
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS})
        total = len(items)
        chunk = items[(page - 1) * per_page: page * per_page]
        self._crafted = self._crafted or self.owner._tampered(*(a.doc for a in chunk))
        body = {"total_count": total, "artifacts": [self.owner._render_artifact(a, base) for a in chunk]}
        last = max(1, -(-total // per_page))
        links = []
        here = urlsplit(self.path).path

        def link(p: int, rel: str) -> str:
            q = {k: v for k, v in query.items() if k not in ("page", "per_page")}
            q.update({"per_page": str(per_page), "page": str(p)})
            return f'<{self.owner.url}{here}?{urlencode(q)}>; rel="{rel}"'

        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if self.owner.next_page_link is not None:
            links = [f'<{self.owner.next_page_link}>; rel="next"']
        return self._json(200, body, headers={"Link": ", ".join(links)} if links else None)

    def _slice(self, items: list[dict[str, Any]], query: dict[str, str],
               ) -> tuple[list[dict[str, Any]], dict[str, str] | None] | None:
        """One page of ``items`` (``per_page`` at most 100, ``page``) and its ``Link`` to the next; None for a
        query that is not a number (GitHub: 422)."""
        try:
            per_page = max(1, min(100, int(query.get("per_page", "30"))))
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            return None
        chunk = items[(page - 1) * per_page: page * per_page]
        last = max(1, -(-len(items) // per_page))
        headers = None
        if page < last:
            here = urlsplit(self.path).path
            headers = {"Link": f'<{self.owner.url}{here}?per_page={per_page}&page={page + 1}>; rel="next"'}
        if self.owner.next_page_link is not None:
            headers = {"Link": f'<{self.owner.next_page_link}>; rel="next"'}
        return chunk, headers

    def _job_page(self, jobs: list[dict[str, Any]], query: dict[str, str]) -> int:
        sliced = self._slice(jobs, query)
        if sliced is None:
            return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS})
        chunk, headers = sliced
        return self._json(200, {"total_count": len(jobs), "jobs": copy.deepcopy(chunk)}, headers=headers)

    # --- check runs and issue comments (the caller holds the lock) -------------------------------------------
    def _write(self, route: str, params: dict[str, str], repo: dict[str, Any], query: dict[str, str],
               base: str) -> int:
        owner = self.owner
        full_name = repo["full_name"]
        needed = "checks: write" if route.startswith("check_run") else "pull-requests: write"
        if route != "issue_comments" and needed not in owner.permissions:
            # GITHUB_TOKEN without the permission: GitHub's answer to an integration token.
            return self._json(403, {"message": "Resource not accessible by integration", "documentation_url": _DOCS,
                                    "status": "403"})
        body: Any = None
        if route != "issue_comments":
            try:
                body = json.loads(self._body or b"null")
            except ValueError:
                return self._json(400, {"message": "Problems parsing JSON", "documentation_url": _DOCS})
            if not isinstance(body, dict):
                return self._invalid("the body must be an object")
        if route == "check_run_create":
            problem = _check_run_problem(body, create=True)
            if problem:
                return self._invalid(problem)
            ident = owner._new_id()
            run = {"id": ident, "name": body["name"], "head_sha": body["head_sha"],
                   "status": body.get("status", "queued"), "conclusion": body.get("conclusion"),
                   "details_url": body.get("details_url"),
                   "html_url": f"https://github.com/{full_name}/runs/{ident}",
                   "output": {k: v for k, v in body.get("output", {}).items() if k != "annotations"},
                   "annotations": list(body.get("output", {}).get("annotations", [])), "_repository": full_name}
            owner.check_runs[ident] = run
            return self._json(201, _render_check_run(run, base))
        if route == "check_run_update":
            run = owner.check_runs.get(int(params["check_run_id"]))
            if run is None or run["_repository"] != full_name:
                return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
            problem = _check_run_problem(body, create=False)
            if problem:
                return self._invalid(problem)
            output = body.get("output") or {}
            # checks/update: "annotations are appended to the list of annotations that already exist".
            run["annotations"] += list(output.get("annotations", []))
            run["output"].update({k: v for k, v in output.items() if k != "annotations"})
            return self._json(200, _render_check_run(run, base))
        if route == "issue_comments":
            issue = (full_name, int(params["issue_number"]))
            found = [c for _, c in sorted(owner.comments.items()) if c["_issue"] == issue]
            return self._comment_page(found, query, base)
        if not isinstance(body.get("body"), str):  # issues/create-comment, issues/update-comment: required body
            return self._invalid("body is required and must be a string")
        if len(body["body"]) > 65536:
            return self._invalid("Body is too long (maximum is 65536 characters)")
        if route == "issue_comment_create":
            ident = owner._new_id()
            comment = {"id": ident, "body": body["body"], "user": _bot(),
                       "html_url": f"https://github.com/{full_name}/pull/{params['issue_number']}#issuecomment-{ident}",
                       "_issue": (full_name, int(params["issue_number"]))}
            owner.comments[ident] = comment
            return self._json(201, _render_comment(comment, base))
        comment = owner.comments.get(int(params["comment_id"]))
        if comment is None or comment["_issue"][0] != full_name:
            return self._json(404, {"message": "Not Found", "documentation_url": _DOCS})
        comment["body"] = body["body"]
        return self._json(200, _render_comment(comment, base))

    def _comment_page(self, comments: list[dict[str, Any]], query: dict[str, str], base: str) -> int:
        sliced = self._slice(comments, query)  # issues/list-comments: per_page at most 100
        if sliced is None:
            return self._json(422, {"message": "Validation Failed", "documentation_url": _DOCS})
        chunk, headers = sliced
        return self._json(200, [_render_comment(c, base) for c in chunk], headers=headers)

    def _invalid(self, message: str) -> int:
        return self._json(422, {"message": "Validation Failed", "errors": [{"message": message}],
                                "documentation_url": _DOCS, "status": "422"})

    def _blob(self, params: dict[str, str], query: dict[str, str]) -> int:
        if "Authorization" in self.headers:
            # Storage hosts reject a second credential next to the signed URL; so do we.
            return self._send(403, b"<Error><Code>AuthenticationFailed</Code><Message>Authorization header "
                              b"is not allowed with a signed URL</Message></Error>",
                              content_type="application/xml")
        with self.owner._lock:
            art = self.owner._artifacts.get(int(params["artifact_id"]))
        if art is None or not secrets.compare_digest(query.get("sig", ""), art.sig):
            return self._send(404, b"<Error><Code>BlobNotFound</Code></Error>", content_type="application/xml")
        if art.chunked:
            return self._send_chunked(200, art.data, content_type="application/zip")
        return self._send(200, art.data, content_type="application/zip")

    def _json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> int:
        return self._send(status, _json_bytes(body), headers=headers)

    def _send(self, status: int, body: bytes, *, headers: Mapping[str, str] | None = None,
              content_type: str = "application/json; charset=utf-8") -> int:
        if self._drip is not None:
            return self._send_dripped(status, body, {"Content-Type": content_type, **(headers or {})})
        self._record(status, body, content_type, headers)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        self.send_header("X-RateLimit-Limit", "5000")
        self.send_header("X-RateLimit-Remaining", "4999")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        return status

    def _send_dripped(self, status: int, body: bytes, headers: Mapping[str, str]) -> int:
        assert self._drip is not None
        self._record(status, body, headers.get("Content-Type", ""), headers)
        self._drip.serve(self.wfile, status, headers, body, self.owner._stopping)
        self.close_connection = True
        return status

    def _send_chunked(self, status: int, body: bytes, *, content_type: str) -> int:
        if self._drip is not None:
            return self._send_dripped(status, body, {"Content-Type": content_type})
        self._record(status, body, content_type)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in _chunks(body, 16 * 1024):
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        return status


_STEP_OUTPUT = re.compile(r"\$\{\{\s*steps\.([A-Za-z_][A-Za-z0-9_-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


def evaluate_step_name(expression: str, outputs: Mapping[str, Mapping[str, Any]]) -> str:
    """A step's ``name:`` as the jobs API reports it: the runner evaluates the name (``steps`` context
    included: workflow-v1.0.json types ``name`` as string-steps-context) just before the step's condition and
    writes the result into the step's record (actions/runner StepsRunner -> ``TryUpdateDisplayName`` ->
    ``UpdateTimelineRecordDisplayName``). An output a step did not set is null, which a string shows as ''.
    Only ``steps.<id>.outputs.<name>`` is modelled: the templates' step names use no other expression."""
    def value(match: re.Match[str]) -> str:
        found = outputs.get(match.group(1), {}).get(match.group(2))
        return "" if found is None else str(found)
    evaluated = _STEP_OUTPUT.sub(value, expression)
    if "${{" in evaluated:
        raise ValueError(f"the test server models only steps.<id>.outputs.<name> in step names: {expression!r}")
    return evaluated


def _zip_directory(root: Path) -> bytes:
    """A deterministic zip of a directory (sorted names, fixed times): the same files, the same digest."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=(2026, 1, 1, 0, 0, 0))
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def _runner_actor(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """The actor the runner names in GITHUB_ACTOR and the event: the run's, or the one it was added with."""
    actor = run.get("actor")
    return actor if isinstance(actor, dict) else run["_actor"]


def _shape(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, default=repr)


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


_WRITE_ROUTES = ("check_run_create", "check_run_update", "issue_comments", "issue_comment_create",
                 "issue_comment_update")
_ANNOTATION_LEVELS = ("notice", "warning", "failure")  # checks/create, annotations[].annotation_level
_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")


def _write_route(method: str, rest: list[str], params: dict[str, str]) -> str | None:
    if method == "POST" and rest == ["check-runs"]:
        return "check_run_create"
    if method == "PATCH" and len(rest) == 2 and rest[0] == "check-runs" and rest[1].isdigit():
        params["check_run_id"] = rest[1]
        return "check_run_update"
    if len(rest) == 3 and rest[0] == "issues" and rest[1].isdigit() and rest[2] == "comments":
        params["issue_number"] = rest[1]
        return {"GET": "issue_comments", "POST": "issue_comment_create"}.get(method)
    if method == "PATCH" and len(rest) == 3 and rest[:2] == ["issues", "comments"] and rest[2].isdigit():
        params["comment_id"] = rest[2]
        return "issue_comment_update"
    return None


def _check_run_problem(body: dict[str, Any], *, create: bool) -> str | None:
    """What GitHub's REST description (checks/create, checks/update) refuses in a check-run body, or None."""
    if create and not all(isinstance(body.get(k), str) and body[k] for k in ("name", "head_sha")):
        return "name and head_sha are required"  # checks/create: required [name, head_sha]
    if create and not re.fullmatch(r"[0-9a-f]{40}", body["head_sha"]):
        return "No commit found for SHA: " + str(body["head_sha"])[:50]
    if (body.get("status") == "completed" or "completed_at" in body) and body.get("conclusion") is None and create:
        return "conclusion is required when status is completed"  # "Required if you provide ... completed"
    if "conclusion" in body and body["conclusion"] not in _CONCLUSIONS:
        return "conclusion is not one of the documented values"
    output = body.get("output")
    if output is None:
        return None
    if not isinstance(output, dict):
        return "output must be an object"
    # checks/create: output requires title and summary; checks/update: output requires summary.
    for key in (("title", "summary") if create else ("summary",)):
        if not isinstance(output.get(key), str):
            return f"output.{key} is required"
    if len(output["summary"]) > 65535:  # output.summary maxLength 65535
        return "output.summary is too long (maximum is 65535 characters)"
    annotations = output.get("annotations", [])
    if not isinstance(annotations, list):
        return "output.annotations must be an array"
    if len(annotations) > 50:
        # "The Checks API limits the number of annotations to a maximum of 50 per API request."
        return "output.annotations has more than 50 items"
    for annotation in annotations:
        # annotations[]: required [path, start_line, end_line, annotation_level, message]
        if not isinstance(annotation, dict) or not all(k in annotation for k in (
                "path", "start_line", "end_line", "annotation_level", "message")):
            return "an annotation lacks a required field"
        if annotation["annotation_level"] not in _ANNOTATION_LEVELS:
            return "annotation_level must be notice, warning or failure"
    return None


def _bot() -> dict[str, Any]:
    return {**_user(41898282, "github-actions[bot]"), "type": "Bot"}


def _render_check_run(run: dict[str, Any], base: str) -> dict[str, Any]:
    """A stored check run as GitHub answers it: every field the ``check-run`` schema requires, the annotations
    counted and linked rather than inlined (as GitHub does)."""
    url = f"{base}/repos/{run['_repository']}/check-runs/{run['id']}"
    completed = run["status"] == "completed" or run["conclusion"] is not None
    return {
        "id": run["id"], "node_id": f"CR_{run['id']}", "head_sha": run["head_sha"], "name": run["name"], "url": url,
        "html_url": run["html_url"], "details_url": run["details_url"],
        "status": "completed" if completed else run["status"], "conclusion": run["conclusion"],
        "started_at": _TIMESTAMP, "completed_at": _TIMESTAMP if completed else None, "external_id": None,
        "check_suite": {"id": run["id"] + 1}, "app": None, "pull_requests": [],
        "output": {"title": run["output"].get("title"), "summary": run["output"].get("summary"),
                   "text": run["output"].get("text"), "annotations_count": len(run["annotations"]),
                   "annotations_url": f"{url}/annotations"},
    }


def _render_comment(comment: dict[str, Any], base: str) -> dict[str, Any]:
    """A stored comment as GitHub answers it: every field the ``issue-comment`` schema requires."""
    repository, number = comment["_issue"]
    return {"id": comment["id"], "node_id": f"IC_{comment['id']}", "body": comment["body"], "user": comment["user"],
            "html_url": comment["html_url"], "issue_url": f"{base}/repos/{repository}/issues/{number}",
            "url": f"{base}/repos/{repository}/issues/comments/{comment['id']}",
            "created_at": _TIMESTAMP, "updated_at": _TIMESTAMP, "author_association": "NONE"}


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def _route(method: str, path: str) -> tuple[str, dict[str, str]]:
    """Map a path (prefix removed) to a route name and its parameters."""
    parts = [p for p in path.split("/") if p]
    if method == "GET" and len(parts) == 2 and parts[0] == "_blob" and parts[1].isdigit():
        return "blob", {"artifact_id": parts[1]}
    if len(parts) < 3 or parts[0] != "repos":
        return "unknown", {}
    params = {"owner": parts[1], "repo": parts[2]}
    rest = parts[3:]
    written = _write_route(method, rest, params)
    if written is not None:
        return written, params
    if method != "GET":
        return "unknown", {}
    if not rest:
        return "repo", params
    if rest[:2] == ["actions", "runs"] and len(rest) >= 3 and rest[2].isdigit():
        params["run_id"] = rest[2]
        if len(rest) == 3:
            return "run", params
        if len(rest) == 4 and rest[3] == "artifacts":
            return "run_artifacts", params
        if len(rest) == 5 and rest[3] == "attempts" and rest[4].isdigit():
            params["attempt"] = rest[4]
            return "run_attempt", params
        if len(rest) == 6 and rest[3] == "attempts" and rest[4].isdigit() and rest[5] == "jobs":
            params["attempt"] = rest[4]
            return "attempt_jobs", params
        return "unknown", {}
    if len(rest) == 4 and rest[:2] == ["actions", "workflows"] and rest[3] == "runs" and rest[2]:
        params["workflow"] = rest[2]
        return "workflow_runs", params
    if rest[:2] == ["actions", "artifacts"]:
        if len(rest) == 2:
            return "repo_artifacts", params
        if rest[2].isdigit():
            params["artifact_id"] = rest[2]
            if len(rest) == 3:
                return "artifact", params
            if len(rest) == 4 and rest[3] == "zip":
                return "artifact_zip", params
    return "unknown", {}
