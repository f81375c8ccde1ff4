"""All GitHub REST work: the run object, artifact lists, artifact downloads, and the REST-checked context.

This is the only module that talks to GitHub. PyGithub (and ``requests``) are imported inside the
functions that need them, so importing this module costs nothing. ``GITHUB_API_URL`` is the base URL,
so GitHub Enterprise Server (``https://HOST/api/v3``) works the same as github.com.

Errors become refusals: an HTTP status from GitHub is ``github.http_<status>``, an unreachable or silent
server is ``github.transport``, an answer still incomplete at its deadline (however slowly its bytes come)
is ``github.timeout``, a response without a field we bind is ``github.response_invalid``, and a next-page
link off ``GITHUB_API_URL`` is ``github.pagination_foreign`` (never followed).
The token is never part of a message: messages name the request, never its headers.

Answers are read as GitHub's REST description (github/rest-api-description) promises them: a field it does not
require may be absent. Where the action can do without one it reads the absence as the description means it
(a run without ``actor``: no actor known, which an actor list then refuses); where it cannot (a run without
``run_attempt``, which every binding names) the refusal is ``github.field_absent`` and names the field.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urljoin, urlsplit

from testops_evidence.context import (
    SHA_RE,
    BindingCheck,
    RunContext,
    env_context,
    first_failure,
)
from testops_evidence.errors import Refusal, input_error
from testops_evidence.readers.integers import ascii_int, header_int
from testops_evidence.redact import clip
from testops_evidence.safeio import has_lone_surrogate

if TYPE_CHECKING:
    from github import Github
    from requests import PreparedRequest, Response
    from urllib3 import BaseHTTPResponse
    from urllib3.util.retry import Retry


DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
MAX_ARTIFACTS = 5000  # GitHub keeps at most a few hundred per run; more means a broken or hostile server
MAX_REDIRECTS = 3  # the zip endpoint redirects once to storage; allow a little slack, never a loop
CHUNK = 64 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class RequestPolicy:
    """Retries (GETs only), backoff, timeouts, and the sleep used between retries (phases pass
    ``ctx.sleep``, so tests never really wait)."""

    retries: int = 3
    backoff_factor: float = 0.5  # urllib3: no wait before the first retry, then 1 s, 2 s, ...
    backoff_max: float = 10.0
    # GitHub's secondary rate limit asks for about a minute; waiting longer than this refuses instead.
    max_rate_limit_wait: int = 90
    timeout: int = 30  # seconds per request, connect and read (PyGithub insists on an int)
    sleep: Callable[[float], None] = time.sleep


DEFAULT_POLICY = RequestPolicy()

# Operator tuning of the GitHub transport, like the TestOps client's (docs/guard.md): seconds per request and
# retries of an idempotent GET. A slow GHES behind a proxy may need a longer timeout; a test a shorter one.
_POLICY_TUNING = {"TESTOPS_EVIDENCE_GITHUB_TIMEOUT": ("timeout", 1), "TESTOPS_EVIDENCE_GITHUB_RETRIES": ("retries", 0)}


def request_policy(env: Mapping[str, str], sleep: Callable[[float], None] = time.sleep) -> RequestPolicy:
    """The policy a phase uses: its sleep, and the tuning variables of its environment."""
    values: dict[str, Any] = {"sleep": sleep}
    for variable, (option, minimum) in _POLICY_TUNING.items():
        raw = (env.get(variable) or "").strip()
        if not raw:
            continue
        value = ascii_int(raw, minimum=minimum, maximum=3600)
        if value is None:
            raise input_error(variable.lower().replace("_", "-"), f"{variable} must be a whole number from "
                              f"{minimum} to 3600 in ASCII digits", expected=f"{minimum}..3600", actual=raw)
        values[option] = value
    return RequestPolicy(**values)


# --- domain objects ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferencedWorkflow:
    path: str  # owner/repo/.github/workflows/x.yml@ref
    sha: str | None
    ref: str | None


@dataclass(frozen=True)
class RunObject:
    """The fields of ``GET /repos/{o}/{r}/actions/runs/{id}`` that the action binds."""

    id: int
    name: str | None
    run_number: int
    run_attempt: int
    event: str
    status: str | None
    conclusion: str | None
    path: str  # .github/workflows/x.yml (a trailing "@ref", which some servers add, is removed)
    head_branch: str | None
    head_sha: str
    workflow_id: int
    # None when the answer has no `actor` (the description does not require it): no actor is then known, the
    # cross-checks have nothing to compare, and a trust policy with an actor list refuses (guard.actor).
    actor_id: int | None
    actor_login: str | None
    triggering_actor_id: int | None  # None on servers too old to report it (the actor check then refuses)
    triggering_actor_login: str | None
    repository: str  # full_name
    repository_id: int
    private: bool
    head_repository: str | None
    html_url: str | None
    created_at: str | None
    run_started_at: str | None
    referenced_workflows: tuple[ReferencedWorkflow, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["referenced_workflows"] = [asdict(w) for w in self.referenced_workflows]
        return {k.replace("_", "-"): v for k, v in out.items()}


@dataclass(frozen=True)
class ArtifactInfo:
    """One artifact of a run, as the Actions API lists it (provenance comes from here, not the zip)."""

    id: int
    name: str
    size_in_bytes: int
    digest: str | None  # "sha256:<hex>", or None for artifacts uploaded before GitHub recorded digests
    archive_download_url: str
    expired: bool
    run_id: int | None
    head_sha: str | None
    head_branch: str | None
    created_at: str | None

    @property
    def sha256(self) -> str | None:
        return self.digest.removeprefix("sha256:") if self.digest else None

    def to_json(self) -> dict[str, Any]:
        return {k.replace("_", "-"): v for k, v in asdict(self).items()}


# --- client and error mapping ----------------------------------------------------------------------------


def github_client(api_url: str, token: str, *, policy: RequestPolicy = DEFAULT_POLICY) -> Github:
    """A PyGithub client on ``api_url`` (``GITHUB_API_URL``): token auth, GET-only retries, timeouts.

    ``lazy=True``: objects are fetched when first read, so every request made is one we asked for. Our
    own reads go through ``client.requester`` and validate the JSON themselves: a missing or mistyped
    field is a coded refusal, not an exception from deep inside a model class.
    """
    from github import Auth, Github, GithubRetry

    sleep = policy.sleep

    class _Retry(GithubRetry):
        # urllib3 sleeps with time.sleep; route both waits through the injected sleep.
        def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
            return _retry_after_sleep(self, response, sleep)

        def _sleep_backoff(self) -> None:
            _backoff_sleep(self, sleep)

    retry = _Retry(
        total=policy.retries,
        backoff_factor=policy.backoff_factor,
        backoff_max=policy.backoff_max,
        retry_after_max=policy.max_rate_limit_wait,
        max_rate_limit_wait=policy.max_rate_limit_wait,
        allowed_methods=frozenset({"GET"}),  # only idempotent reads are ever re-sent
        raise_on_status=False,  # after the last retry, the status itself is reported (github.http_503)
    )
    gh = Github(
        auth=Auth.Token(token),
        base_url=api_url.rstrip("/"),
        timeout=policy.timeout,
        retry=retry,
        per_page=100,
        lazy=True,
        seconds_between_requests=None,  # we make a handful of serial requests; no artificial pacing
        seconds_between_writes=None,
    )
    _bound_answers(gh, api_url, answer_seconds(policy.timeout))
    return gh


def answer_seconds(timeout: float) -> float:
    """The deadline of one whole answer: a connect and a read timeout, like the TestOps client's. A server that
    stays silent trips the read timeout first (``github.transport``); only one that keeps sending too slowly
    meets this deadline (``github.timeout``)."""
    return 2 * timeout


# PyGithub's Requester picks its connection class (a requests session wrapper) from these attributes, set
# from class-wide defaults in its constructor; PyGithub's only public hook replaces them for every client
# of the process. We set them on this one requester. A PyGithub that renames them fails here, loudly.
_CONNECTION_SLOTS = ("_Requester__httpConnectionClass", "_Requester__httpsConnectionClass",
                     "_Requester__connectionClass")


def _bound_answers(gh: Github, api_url: str, seconds: float) -> None:
    """Every request of ``gh`` must be answered in full (headers and body) within ``seconds``
    (``github.timeout`` otherwise): requests' own timeout is per read, which a dripping server never trips."""
    requester = gh.requester
    missing = [slot for slot in _CONNECTION_SLOTS if not hasattr(requester, slot)]
    if missing:
        raise RuntimeError(f"PyGithub's Requester has no {', '.join(missing)}: the answer deadline cannot be set")
    plain, tls = _deadline_connections(seconds)
    https = urlsplit(api_url).scheme == "https"
    for slot, cls in zip(_CONNECTION_SLOTS, (plain, tls, tls if https else plain), strict=True):
        setattr(requester, slot, cls)


@functools.cache
def _deadline_connections(seconds: float) -> tuple[type[Any], type[Any]]:
    """PyGithub's two connection classes, with the answer deadline and its refusal."""
    from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass

    from testops_evidence.answerdeadline import AnswerDeadline, DeadlineExpired, deadline_adapter

    def bound(connection: Any, scheme: str) -> None:
        if connection.timeout is None:  # PyGithub opens a connection to a foreign host without its timeout
            connection.timeout = seconds / 2
        connection.adapter = deadline_adapter(max_retries=connection.retry, pool_connections=connection.pool_size,
                                              pool_maxsize=connection.pool_size)
        connection.session.mount(f"{scheme}://", connection.adapter)

    def answer(connection: Any, read: Callable[[], Any]) -> Any:
        try:
            with AnswerDeadline(seconds):
                return read()
        except DeadlineExpired:
            raise answer_timeout(f"{connection.verb} {urlsplit(connection.url).path}", seconds) from None

    class _Plain(HTTPRequestsConnectionClass):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            bound(self, "http")

        def getresponse(self) -> Any:
            return answer(self, super().getresponse)

    class _Tls(HTTPSRequestsConnectionClass):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            bound(self, "https")

        def getresponse(self) -> Any:
            return answer(self, super().getresponse)

    return _Plain, _Tls


def answer_timeout(what: str, seconds: float) -> Refusal:
    return Refusal("github.timeout", f"GitHub did not finish its answer to {what} within {seconds:g} s",
                   field="answer time", expected=f"<= {seconds:g} s", actual=f"> {seconds:g} s")


def _retry_after_sleep(retry: Retry, response: BaseHTTPResponse, sleep: Callable[[float], None]) -> bool:
    seconds = retry.get_retry_after(response)
    if seconds:
        sleep(seconds)
        return True
    return False


def _backoff_sleep(retry: Retry, sleep: Callable[[float], None]) -> None:
    seconds = retry.get_backoff_time()
    if seconds > 0:
        sleep(seconds)


_HINTS = {
    401: "The GitHub token was refused: check `github-token` (default `${{ github.token }}`).",
    403: "The token lacks permission (the job needs `actions: read`), or GitHub rate-limited it.",
    404: "The repository, run or artifact is not visible to this token (wrong repository, id or GITHUB_API_URL).",
    410: "The artifact has expired; re-run the producing workflow.",
}


@contextmanager
def _mapped(what: str, token: str) -> Iterator[None]:
    """Turn PyGithub / requests failures while doing ``what`` into coded refusals. GitHub's message is
    scrubbed of ``token`` before it is cut (``redact.clip``): a server that echoes the token across the cut
    leaves no piece of it behind."""
    import requests
    from github import BadAttributeException, GithubException

    try:
        yield
    except GithubException as exc:
        status = exc.status
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise Refusal("github.response_invalid", f"GitHub gave no usable status for {what}") from None
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        detail = f": {clip(str(message), 200, (token,))}" if message else ""
        raise Refusal(f"github.http_{status}", f"GitHub answered {status} to {what}{detail}",
                      hint=_HINTS.get(status), http_status=status) from None
    except BadAttributeException:
        raise Refusal("github.response_invalid", f"GitHub's answer to {what} has a field of the wrong type") from None
    except requests.exceptions.RequestException as exc:
        raise Refusal("github.transport", f"GitHub could not be reached for {what} ({type(exc).__name__})",
                      hint="Check GITHUB_API_URL and the runner's network.") from None
    except ValueError as exc:  # a body that starts like JSON but is not
        raise Refusal("github.response_invalid", f"GitHub's answer to {what} is not JSON ({type(exc).__name__})") from None
    except OverflowError:
        # A chunked body whose chunk size is negative: urllib3 reads it with int(line, 16), sign included,
        # and http.client raises on it (found by the long fuzz run on the TestOps client).
        raise Refusal("github.response_invalid", f"GitHub's answer to {what} broke off: a chunk size that is not "
                      "a size") from None
    except (AttributeError, TypeError) as exc:
        # PyGithub reads an error body as a JSON object (`output.get("message")`); an error answered with
        # `true` or a list raises from inside it. The answer is what is wrong, so say so with a code.
        raise Refusal("github.response_invalid", f"GitHub's answer to {what} has an unexpected shape "
                      f"({type(exc).__name__})") from None


def _encodable(data: Any, what: str) -> None:
    """Refuse a lone surrogate escape ("\\ud800") in an answer: such text cannot be written to a receipt or a
    summary (PyGithub decodes JSON itself, so safeio.loads_json cannot refuse it at the parse)."""
    if has_lone_surrogate(data):
        raise Refusal("github.response_invalid", f"GitHub's answer to {what} holds a lone UTF-16 surrogate escape")


def _invalid(what: str, field: str, value: Any) -> Refusal:
    shown = value if isinstance(value, int | bool | None) else str(value)[:120]
    return Refusal("github.response_invalid", f"GitHub's {what} has no valid `{field}`", field=field,
                   expected="present, of the documented type", actual=shown)


def _absent(what: str, field: str, why: str) -> Refusal:
    """A field GitHub's description makes optional, which this reading cannot do without (and says why)."""
    return Refusal("github.field_absent", f"GitHub's {what} has no `{field}`, which GitHub's REST description "
                   f"does not require but the action cannot do without: {why}", field=field,
                   expected="present", actual="(absent)")


def _int(doc: Mapping[str, Any], key: str, what: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(what, key, value)
    return value


def _str(doc: Mapping[str, Any], key: str, what: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise _invalid(what, key, value)
    return value


def _opt_str(doc: Mapping[str, Any], key: str, what: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(what, key, value)
    return value


def _obj(doc: Mapping[str, Any], key: str, what: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise _invalid(what, key, value)
    return value


# --- the run ---------------------------------------------------------------------------------------------


def fetch_run(api_url: str, token: str, repository: str, run_id: int, *,
              policy: RequestPolicy = DEFAULT_POLICY) -> RunObject:
    """``GET /repos/{repository}/actions/runs/{run_id}`` as a :class:`RunObject` (one request; two when
    the run's repository object does not say whether it is private)."""
    gh = github_client(api_url, token, policy=policy)
    raw = _get_object(gh, token, f"/repos/{repository}/actions/runs/{run_id}", "run")
    repo = raw.get("repository")
    private = None
    if isinstance(repo, dict) and not isinstance(repo.get("private"), bool):
        # Visibility is a trust binding; ask the repository itself rather than guess.
        private = _get_object(gh, token, f"/repos/{repository}", "repository").get("private")
    return run_from_json(raw, private=private)


def _get_object(gh: Github, token: str, url: str, what: str) -> dict[str, Any]:
    """One GET through PyGithub's requester (auth, base URL, retries); the answer must be a JSON object."""
    with _mapped(f"GET {url}", token):
        _headers, data = gh.requester.requestJsonAndCheck("GET", url)
    _encodable(data, f"GET {url}")
    if not isinstance(data, dict) or set(data) == {"data"}:  # PyGithub wraps a non-JSON body as {"data": ...}
        raise Refusal("github.response_invalid", f"GitHub's answer to GET {url} is not a {what} object",
                      field=what, expected="a JSON object", actual=type(data).__name__)
    return data


def run_from_json(raw: Mapping[str, Any], *, private: bool | None = None) -> RunObject:
    """Validate a run document (GitHub's JSON) into a :class:`RunObject`; refuse a missing field."""
    what = "run"
    repo = _obj(raw, "repository", what)
    head_sha = _str(raw, "head_sha", what)
    if not SHA_RE.match(head_sha):
        raise _invalid(what, "head_sha", head_sha)
    actor = raw.get("actor")
    if "actor" in raw and not isinstance(actor, dict):  # absent is allowed; null is not (not `nullable`)
        raise _invalid(what, "actor", actor)
    triggering = raw.get("triggering_actor")
    if triggering is not None and not isinstance(triggering, dict):
        raise _invalid(what, "triggering_actor", triggering)
    if "run_attempt" not in raw:
        raise _absent(what, "run_attempt", "the run attempt binds the receipts, the workers' artifacts and the "
                      "first-only trust rule, and GITHUB_RUN_ATTEMPT is only the claim GitHub's answer confirms")
    is_private = repo.get("private") if isinstance(repo.get("private"), bool) else private
    if not isinstance(is_private, bool):
        raise _invalid(what, "repository.private", is_private)
    head_repo = raw.get("head_repository")
    referenced = raw.get("referenced_workflows") or []
    if not isinstance(referenced, list) or not all(isinstance(w, dict) for w in referenced):
        raise _invalid(what, "referenced_workflows", referenced)
    return RunObject(
        id=_int(raw, "id", what),
        name=_opt_str(raw, "name", what),
        run_number=_int(raw, "run_number", what),
        run_attempt=_int(raw, "run_attempt", what),
        event=_str(raw, "event", what),
        status=_opt_str(raw, "status", what),
        conclusion=_opt_str(raw, "conclusion", what),
        path=_str(raw, "path", what).split("@", 1)[0],
        head_branch=_opt_str(raw, "head_branch", what),
        head_sha=head_sha,
        workflow_id=_int(raw, "workflow_id", what),
        actor_id=_int(actor, "id", "run's actor") if actor is not None else None,
        actor_login=_opt_str(actor, "login", "run's actor") if actor is not None else None,
        triggering_actor_id=_int(triggering, "id", "run's triggering actor") if triggering else None,
        triggering_actor_login=_opt_str(triggering, "login", "run's triggering actor") if triggering else None,
        repository=_str(repo, "full_name", "run's repository"),
        repository_id=_int(repo, "id", "run's repository"),
        private=is_private,
        head_repository=_opt_str(head_repo, "full_name", "run's head repository") if isinstance(head_repo, dict)
        else None,
        html_url=_opt_str(raw, "html_url", what),
        created_at=_opt_str(raw, "created_at", what),
        run_started_at=_opt_str(raw, "run_started_at", what),
        referenced_workflows=tuple(
            ReferencedWorkflow(path=_str(w, "path", "referenced workflow"), sha=_opt_str(w, "sha", "referenced workflow"),
                               ref=_opt_str(w, "ref", "referenced workflow"))
            for w in referenced
        ),
    )


# --- artifacts ------------------------------------------------------------------------------------------


def list_artifacts(api_url: str, token: str, repository: str, run_id: int, *, name: str | None = None,
                   policy: RequestPolicy = DEFAULT_POLICY) -> list[ArtifactInfo]:
    """The run's artifacts (all pages), newest first as GitHub lists them.

    ``name`` filters: an exact name is passed to GitHub (``?name=``) and checked again here; a pattern
    with ``*``, ``?`` or ``[`` is matched here with :func:`fnmatch.fnmatchcase` over the full list.
    """
    gh = github_client(api_url, token, policy=policy)
    is_pattern = name is not None and any(ch in name for ch in "*?[")
    params: dict[str, Any] | None = {"per_page": 100} if is_pattern or name is None else {"per_page": 100, "name": name}
    url: str | None = f"/repos/{repository}/actions/runs/{run_id}/artifacts"
    found: list[ArtifactInfo] = []
    seen = 0
    # PyGithub's requester (auth, base URL, retries) with our own paging: PaginatedList would build
    # lazy objects whose raw data costs one more request each.
    while url is not None:
        with _mapped(f"GET {urlsplit(url).path}", token):
            headers, data = gh.requester.requestJsonAndCheck("GET", url, parameters=params)
        _encodable(data, f"GET {urlsplit(url).path}")
        items = data.get("artifacts") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise _invalid("artifact list", "artifacts", None if items is None else type(items).__name__)
        for item in items:
            seen += 1
            if seen > MAX_ARTIFACTS:
                raise Refusal("github.response_invalid", f"run {run_id} lists more than {MAX_ARTIFACTS} artifacts",
                              field="artifacts", expected=f"<= {MAX_ARTIFACTS}", actual=f"> {MAX_ARTIFACTS}")
            if not isinstance(item, dict):
                raise _invalid("artifact list", "artifacts[]", type(item).__name__)
            artifact = artifact_from_json(item)
            if name is None or fnmatch.fnmatchcase(artifact.name, name):
                found.append(artifact)
        url = _next_page(api_url, headers, f"the artifact list of run {run_id}") if items else None
        params = None  # the next link carries the query
    return found


def earlier_runs(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                 count: int = 10, policy: RequestPolicy = DEFAULT_POLICY) -> list[int]:
    """The ids of the newest ``count`` completed runs of ``workflow`` (its file name or id) on ``branch``,
    newest first, without the run ``before`` and any later one (``GET .../workflows/{workflow}/runs``)."""
    return [run_id for run_id, _attempt in earlier_run_attempts(api_url, token, repository, workflow, branch=branch,
                                                                before=before, count=count, policy=policy)]


def earlier_run_attempts(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                         count: int = 10, policy: RequestPolicy = DEFAULT_POLICY) -> list[tuple[int, int]]:
    """:func:`earlier_runs` with each run's latest attempt number: ``(run id, run_attempt)``, newest first."""
    gh = github_client(api_url, token, policy=policy)
    url = f"/repos/{repository}/actions/workflows/{workflow}/runs"
    params = {"branch": branch, "status": "completed", "per_page": min(100, count + 1),
              "exclude_pull_requests": "true"}
    with _mapped(f"GET {url}", token):
        _headers, data = gh.requester.requestJsonAndCheck("GET", url, parameters=params)
    _encodable(data, f"GET {url}")
    runs = data.get("workflow_runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise _invalid("workflow run list", "workflow_runs", None if runs is None else type(runs).__name__)
    found: dict[int, int] = {}
    for item in runs:
        if not isinstance(item, dict):
            raise _invalid("workflow run list", "workflow_runs[]", type(item).__name__)
        run_id = _int(item, "id", "workflow run")
        if "run_attempt" not in item:  # optional in GitHub's description, with no default it documents
            raise _absent("workflow run", "run_attempt", f"the jobs of each attempt of run {run_id} bind its "
                          "artifacts to the job that recorded uploading them")
        attempt = item.get("run_attempt")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or not 1 <= attempt <= 1000:
            raise _invalid("workflow run", "run_attempt", attempt)
        if run_id < before:
            found[run_id] = attempt
    return sorted(found.items(), reverse=True)[:count]


def earlier_artifact(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                     pattern: str, count: int = 10,
                     policy: RequestPolicy = DEFAULT_POLICY) -> ArtifactInfo | None:
    """The newest unexpired artifact named like ``pattern`` of the ``count`` newest completed runs of
    ``workflow`` on ``branch`` before run ``before`` (one request for the runs, one per run looked at)."""
    found = earlier_artifacts(api_url, token, repository, workflow, branch=branch, before=before, pattern=pattern,
                              count=count, policy=policy)
    return found[2][0] if found is not None else None


def earlier_artifacts(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                      pattern: str, count: int = 10,
                      policy: RequestPolicy = DEFAULT_POLICY) -> tuple[int, int, list[ArtifactInfo]] | None:
    """The newest of the ``count`` newest completed runs of ``workflow`` on ``branch`` before run ``before`` that
    has an unexpired artifact named like ``pattern``: its id, its latest attempt and every such artifact (newest
    first) — a name says nothing of which job uploaded it, so the caller binds one by its uploader's record."""
    for run_id, attempt in earlier_run_attempts(api_url, token, repository, workflow, branch=branch, before=before,
                                                count=count, policy=policy):
        found = [a for a in list_artifacts(api_url, token, repository, run_id, name=pattern, policy=policy)
                 if not a.expired]
        if found:
            return run_id, attempt, found
    return None


MAX_JOBS = 5000  # a run attempt has at most 256 jobs per matrix; more means a broken or hostile server


@dataclass(frozen=True)
class StepInfo:
    name: str
    status: str
    conclusion: str | None
    started_at: str | None
    completed_at: str | None


@dataclass(frozen=True)
class JobInfo:
    """One job of a run attempt, as ``GET .../runs/{id}/attempts/{n}/jobs`` lists it."""

    id: int
    name: str
    status: str
    conclusion: str | None
    run_attempt: int | None
    steps: tuple[StepInfo, ...]

    def step(self, name: str) -> StepInfo | None:
        found = [step for step in self.steps if step.name == name]
        return found[0] if len(found) == 1 else None


def job_from_json(raw: Mapping[str, Any]) -> JobInfo:
    what = "job"
    steps_raw = raw.get("steps") or []
    if not isinstance(steps_raw, list):
        raise _invalid(what, "steps", type(steps_raw).__name__)
    steps = []
    for item in steps_raw:
        if not isinstance(item, dict):
            raise _invalid(what, "steps[]", type(item).__name__)
        steps.append(StepInfo(name=_str(item, "name", "job step"), status=_str(item, "status", "job step"),
                              conclusion=_opt_str(item, "conclusion", "job step"),
                              started_at=_opt_str(item, "started_at", "job step"),
                              completed_at=_opt_str(item, "completed_at", "job step")))
    attempt = raw.get("run_attempt")
    return JobInfo(id=_int(raw, "id", what), name=_str(raw, "name", what), status=_str(raw, "status", what),
                   conclusion=_opt_str(raw, "conclusion", what),
                   run_attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
                   steps=tuple(steps))


def list_attempt_jobs(api_url: str, token: str, repository: str, run_id: int, attempt: int, *,
                      policy: RequestPolicy = DEFAULT_POLICY) -> list[JobInfo]:
    """Every job of one run attempt with its steps (``GET /repos/{o}/{r}/actions/runs/{id}/attempts/{n}/jobs``,
    all pages; ``actions: read``)."""
    gh = github_client(api_url, token, policy=policy)
    url: str | None = f"/repos/{repository}/actions/runs/{run_id}/attempts/{attempt}/jobs"
    params: dict[str, Any] | None = {"per_page": 100}
    found: list[JobInfo] = []
    while url is not None:
        with _mapped(f"GET {urlsplit(url).path}", token):
            headers, data = gh.requester.requestJsonAndCheck("GET", url, parameters=params)
        _encodable(data, f"GET {urlsplit(url).path}")
        items = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise _invalid("job list", "jobs", None if items is None else type(items).__name__)
        for item in items:
            if not isinstance(item, dict):
                raise _invalid("job list", "jobs[]", type(item).__name__)
            found.append(job_from_json(item))
            if len(found) > MAX_JOBS:
                raise Refusal("github.response_invalid", f"run {run_id} attempt {attempt} lists more than "
                              f"{MAX_JOBS} jobs", field="jobs", expected=f"<= {MAX_JOBS}", actual=f"> {MAX_JOBS}")
        url = _next_page(api_url, headers, f"the job list of run {run_id} attempt {attempt}") if items else None
        params = None
    return found


def next_link(header: Any) -> str | None:
    """The ``rel="next"`` URL of an RFC 8288 Link header (GitHub's pagination), or None."""
    if not isinstance(header, str):
        return None
    for part in header.split(","):
        match = re.match(r'\s*<([^>]*)>\s*;(.*)$', part)
        if match and re.search(r'\brel="?next"?', match.group(2)):
            return match.group(1)
    return None


def _next_page(api_url: str, headers: Mapping[str, Any], what: str) -> str | None:
    """The next page of ``what`` from the answer's Link header, refused (``github.pagination_foreign``)
    unless it is on ``GITHUB_API_URL`` itself: the same scheme, host and port, below the API path. PyGithub
    would send the token to another host of its domain, or fail an ``assert`` (an AssertionError, which was
    an ``internal.error``) for any other; either way the next request is not made."""
    link = next_link(headers.get("link"))
    if link is None:
        return None
    target, api = urlsplit(urljoin(api_url.rstrip("/") + "/", link)), urlsplit(api_url.rstrip("/"))
    try:
        same = ((target.scheme.lower(), (target.hostname or "").lower(), _port(target))
                == (api.scheme.lower(), (api.hostname or "").lower(), _port(api))
                and target.path.startswith(api.path + "/") and not target.username and not target.password)
    except ValueError:  # a port that is not a number
        same = False
    if not same:
        raise Refusal("github.pagination_foreign", f"GitHub's answer for {what} links its next page to another "
                      "host, scheme or port than GITHUB_API_URL; it is not followed (the token would go with it)",
                      field="Link", expected=f"a URL below {api_url.rstrip('/')}", actual=clip(link, 120))
    return target.geturl()


def _port(parts: SplitResult) -> int | None:
    return parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())


def artifact_from_json(raw: Mapping[str, Any]) -> ArtifactInfo:
    what = "artifact"
    digest = raw.get("digest")
    if digest is not None and (not isinstance(digest, str) or not DIGEST_RE.match(digest)):
        raise _invalid(what, "digest", digest)
    expired = raw.get("expired")
    if not isinstance(expired, bool):
        raise _invalid(what, "expired", expired)
    size = raw.get("size_in_bytes")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise _invalid(what, "size_in_bytes", size)
    workflow_run = raw.get("workflow_run")
    run: Mapping[str, Any] = workflow_run if isinstance(workflow_run, dict) else {}
    run_id = run.get("id")
    return ArtifactInfo(
        id=_int(raw, "id", what),
        name=_str(raw, "name", what),
        size_in_bytes=size,
        digest=digest,
        archive_download_url=_str(raw, "archive_download_url", what),
        expired=expired,
        run_id=run_id if isinstance(run_id, int) and not isinstance(run_id, bool) else None,
        head_sha=_opt_str(run, "head_sha", "artifact's workflow_run"),
        head_branch=_opt_str(run, "head_branch", "artifact's workflow_run"),
        created_at=_opt_str(raw, "created_at", what),
    )


def _strip_authorization(request: PreparedRequest) -> PreparedRequest:
    """An ``auth`` hook that guarantees no Authorization header (it also stops requests' .netrc lookup)."""
    request.headers.pop("Authorization", None)
    return request


def _same_api_host(api_url: str, url: str) -> bool:
    api, target = urlsplit(api_url.rstrip("/")), urlsplit(url)
    return (target.scheme, target.netloc) == (api.scheme, api.netloc) and target.path.startswith(api.path + "/")


def download_artifact(api_url: str, token: str, artifact: ArtifactInfo, *, max_bytes: int,
                      policy: RequestPolicy = DEFAULT_POLICY) -> bytes:
    """The artifact's zip bytes, at most ``max_bytes`` (``io.too_large`` beyond, checked while streaming).

    The token goes only to the API host's ``archive_download_url``; the 302 it answers with points at a
    storage host with a signed URL, which is fetched by us **without** the token (requests would keep
    the header on a same-host redirect, and a storage host must never see it).
    """
    import requests
    from urllib3.util.retry import Retry

    from testops_evidence.answerdeadline import AnswerDeadline, DeadlineExpired, deadline_adapter

    if artifact.size_in_bytes > max_bytes:
        raise _too_large(artifact, artifact.size_in_bytes, max_bytes, "advertised")
    url = artifact.archive_download_url
    if not _same_api_host(api_url, url):
        # The URL came from a response; the token is only ever sent below GITHUB_API_URL.
        raise Refusal("github.response_invalid", f"artifact {artifact.id}'s download URL is not on the API host; "
                      "the token is not sent there", field="archive_download_url",
                      expected=f"below {api_url.rstrip('/')}/", actual=url)
    sleep = policy.sleep

    class _Retry(Retry):
        def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
            return _retry_after_sleep(self, response, sleep)

        def _sleep_backoff(self) -> None:
            _backoff_sleep(self, sleep)

    retry = _Retry(total=policy.retries, backoff_factor=policy.backoff_factor, backoff_max=policy.backoff_max,
                   retry_after_max=policy.max_rate_limit_wait, status_forcelist=(500, 502, 503, 504),
                   allowed_methods=frozenset({"GET"}), raise_on_status=False, redirect=False)
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    what = f"GET {urlsplit(url).path}"
    seconds = download_seconds(policy.timeout, max_bytes)
    try:
        # The deadline is innermost: a read it cut is reported as the deadline, not as a broken connection.
        with requests.Session() as session, _mapped(what, token), AnswerDeadline(seconds):
            session.mount("http://", deadline_adapter(max_retries=retry))
            session.mount("https://", deadline_adapter(max_retries=retry))
            response = session.get(url, headers={**headers, "Authorization": f"Bearer {token}"},
                                   allow_redirects=False, stream=True, timeout=policy.timeout)
            redirects = 0
            while response.status_code in _REDIRECTS:
                location = response.headers.get("Location", "")
                response.close()
                if redirects == MAX_REDIRECTS:
                    raise Refusal("github.response_invalid", f"artifact {artifact.id}'s download redirected more "
                                  f"than {MAX_REDIRECTS} times", field="Location",
                                  expected=f"<= {MAX_REDIRECTS} redirects", actual=location)
                redirects += 1
                url = _redirect_target(url, location)
                what = "the artifact storage download"
                response = session.get(url, auth=_strip_authorization, allow_redirects=False, stream=True,
                                       timeout=policy.timeout)
            return _read_capped(response, artifact, max_bytes, what)
    except DeadlineExpired:
        raise answer_timeout(what, seconds) from None


# An artifact may be large, so its download gets the request timeout plus time for its size cap at this rate:
# a slow link still finishes, a server that drips bytes is cut off (docs/guard.md, "GitHub transport").
DOWNLOAD_FLOOR_BYTES_PER_SECOND = 1024 * 1024


def download_seconds(timeout: float, max_bytes: int) -> float:
    """The deadline of each request of an artifact download (the API's redirect, the storage host's body)."""
    return answer_seconds(timeout) + max_bytes / DOWNLOAD_FLOOR_BYTES_PER_SECOND


def _redirect_target(current: str, location: str) -> str:
    if not location:
        raise Refusal("github.response_invalid", "a redirect without a Location header", field="Location",
                      expected="a URL", actual="(missing)")
    target = urljoin(current, location)
    scheme = urlsplit(target).scheme
    # Never downgrade: an https API must not hand the download to plain http.
    if scheme not in ("http", "https") or (urlsplit(current).scheme == "https" and scheme != "https"):
        raise Refusal("github.response_invalid", "the artifact download redirects to an unsafe scheme",
                      field="Location", expected="https (or http from an http API)", actual=scheme)
    return target


def _read_capped(response: Response, artifact: ArtifactInfo, max_bytes: int, what: str) -> bytes:
    with response:
        if response.status_code != 200:
            status = response.status_code
            raise Refusal(f"github.http_{status}", f"GitHub answered {status} to {what}", hint=_HINTS.get(status),
                          http_status=status)
        declared = response.headers.get("Content-Length")
        size = None if declared is None else header_int(declared)
        if declared is not None and size is None:
            raise Refusal("github.response_invalid", f"the answer to {what} has a Content-Length that is not a "
                          "number", field="Content-Length", expected="ASCII digits", actual=clip(declared, 40))
        if size is not None and size > max_bytes:
            raise _too_large(artifact, size, max_bytes, "declared")
        chunks: list[bytes] = []
        total = 0
        for chunk in response.iter_content(CHUNK):
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(artifact, total, max_bytes, "streamed")
            chunks.append(chunk)
    return b"".join(chunks)


def _too_large(artifact: ArtifactInfo, size: int, max_bytes: int, how: str) -> Refusal:
    shown = f"> {max_bytes}" if how == "streamed" else size
    return Refusal("io.too_large", f"artifact {artifact.name!r} ({how} size) is over the {max_bytes}-byte cap",
                   field="artifact-size", expected=f"<= {max_bytes}", actual=shown)


# --- the REST-checked run context ----------------------------------------------------------------------------

# Events whose GITHUB_SHA / GITHUB_REF are the run's head commit and branch. For pull_request events the
# runner checks out a merge commit and the ref is refs/pull/N/merge, so those bindings differ by design.
_HEAD_EVENTS = frozenset({"workflow_dispatch", "push"})
_PULL_EVENTS = frozenset({"pull_request", "pull_request_target"})


def cross_checks(env: Mapping[str, str], event: Mapping[str, Any], run: RunObject) -> list[BindingCheck]:
    """Every comparison between the runner's environment, the event file and the REST run object."""
    env_ctx = env_context(env)
    code = "guard.run_mismatch"

    def check(name: str, field: str, expected: Any, actual: Any) -> BindingCheck:
        return BindingCheck(f"{name}: environment = REST", code, field, expected, actual, expected == actual)

    checks = [
        check("run id", "run-id", env_ctx.run_id, run.id),
        check("run number", "run-number", env_ctx.run_number, run.run_number),
        check("run attempt", "run-attempt", env_ctx.run_attempt, run.run_attempt),
        check("repository", "repository", env_ctx.repository, run.repository),
    ]
    repo_id = env.get("GITHUB_REPOSITORY_ID", "").strip()
    if repo_id:
        checks.append(check("repository id", "repository-id", repo_id, str(run.repository_id)))
    checks += [
        check("event", "event", env_ctx.event, run.event),
        check("workflow path", "workflow-path", env_ctx.workflow_path, run.path),
    ]
    if run.event in _PULL_EVENTS:
        pull = event.get("pull_request")
        head = pull.get("head") if isinstance(pull, dict) else None
        sha = head.get("sha") if isinstance(head, dict) else None
        checks.append(BindingCheck("head SHA: event pull_request.head.sha = REST", code, "head-sha", sha,
                                   run.head_sha, sha == run.head_sha))
    else:
        checks.append(check("head SHA", "head-sha", env_ctx.head_sha, run.head_sha))
    if run.event in _HEAD_EVENTS:
        # The branch rule reads the workflow ref; bind it to REST. Compare names only, so a tag ref reaches
        # the branch rule (guard.branch) instead of looking like tampering.
        ref_name = re.sub(r"^refs/(heads|tags)/", "", env_ctx.workflow_ref)
        checks.append(check("head branch (workflow ref)", "head-branch", ref_name, run.head_branch))
    # A run whose answer names no actor has nothing to compare; its context then has no actor (trust_checks).
    if env_ctx.actor_id is not None and run.actor_id is not None:
        checks.append(check("actor id", "actor-id", env_ctx.actor_id, run.actor_id))
    sender = event.get("sender")
    if isinstance(sender, dict) and "id" in sender and run.actor_id is not None:
        checks.append(BindingCheck("actor id: event sender = REST", code, "sender-id", sender.get("id"),
                                   run.actor_id, sender.get("id") == run.actor_id))
    repo = event.get("repository")
    if isinstance(repo, dict) and "full_name" in repo:
        checks.append(BindingCheck("repository: event = REST", code, "event-repository", repo.get("full_name"),
                                   run.repository, repo.get("full_name") == run.repository))
    return checks


def context_from_run(env: Mapping[str, str], run: RunObject) -> RunContext:
    """The run context with REST as the source of truth (attempt, actors, visibility, workflow id)."""
    env_ctx = env_context(env)
    return RunContext(
        repository=run.repository,
        run_id=run.id,
        run_attempt=run.run_attempt,
        run_number=run.run_number,
        workflow_path=run.path,
        workflow_ref=env_ctx.workflow_ref,
        head_sha=run.head_sha,
        branch=env_ctx.branch,
        event=run.event,
        actor_id=run.actor_id,
        triggering_actor_id=run.triggering_actor_id,
        server_url=env_ctx.server_url,
        workflow_id=run.workflow_id,
        repository_private=run.private,
        api_url=env_ctx.api_url,
        local=False,
        source="rest",
    )


def rest_context(env: Mapping[str, str], event: Mapping[str, Any], run: RunObject) -> RunContext:
    """The run context from environment + event + REST run, refusing ``guard.run_mismatch`` on any
    disagreement (field, expected = environment/event, actual = REST)."""
    first_failure(cross_checks(env, event, run))
    return context_from_run(env, run)


def require_token(token: str | None) -> str:
    if not token:
        raise input_error("github-token", "a GitHub token is needed to read the run from the REST API "
                          "(input github-token, default ${{ github.token }}; or GITHUB_TOKEN)")
    return token
