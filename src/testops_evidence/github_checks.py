"""The campaign's result where GitHub users look: a check run on the tested commit and a sticky PR comment.

GitHub REST work in the style of ``github_run.py`` (its client: PyGithub's requester with the answer deadline,
GET-only retries, the token never in a message, next-page links only on ``GITHUB_API_URL``). Nothing here is
retried when it writes: a POST that GitHub may have applied is never sent twice.

GitHub's REST description (``@octokit/openapi``, ``api.github.com.json``) sets the rules followed here:

* ``POST /repos/{owner}/{repo}/check-runs`` requires ``name`` and ``head_sha``; ``output`` requires ``title`` and
  ``summary`` (at most 65535 characters); each annotation requires ``path``, ``start_line``, ``end_line``,
  ``annotation_level`` (``notice``, ``warning``, ``failure``) and ``message``; "The Checks API limits the number
  of annotations to a maximum of 50 per API request. To create more than 50 annotations, you have to make
  multiple requests to the Update a check run endpoint", ``PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}``,
  whose annotations are appended to the ones already there.
* ``GET /repos/{owner}/{repo}/issues/{issue_number}/comments`` (``per_page`` at most 100, pages by ``Link``),
  ``POST`` there with a ``body``, ``PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}`` with a ``body``;
  a pull request's conversation comments are its issue's comments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from testops_evidence.errors import Refusal
from testops_evidence.github_run import (
    DEFAULT_POLICY,
    RequestPolicy,
    _encodable,
    _invalid,
    _mapped,
    _next_page,
    github_client,
)

ANNOTATIONS_PER_REQUEST = 50  # GitHub's REST description, "Create a check run": at most 50 per request
SUMMARY_LIMIT = 65535  # output.summary, maxLength in the REST description
COMMENT_LIMIT = 65536  # an issue comment's body (GitHub refuses a longer one with 422)
MAX_COMMENTS = 3000  # comments read while looking for ours; more means a broken or hostile server
CHECK_RUN_NAME = "testops-evidence"

# Which permission a 403 or 404 means is missing: GITHUB_TOKEN answers 403 "Resource not accessible by
# integration" without it, and 404 when the repository or commit is not visible to the token.
_PERMISSION = {"check-run": "checks: write", "pr-comment": "pull-requests: write"}
_CODES = {"check-run": "github.check_run_denied", "pr-comment": "github.pr_comment_denied"}


@dataclass(frozen=True)
class Posted:
    """What GitHub answered: the object's id and its page (``html_url``), and whether it was updated."""

    id: int
    url: str | None
    updated: bool = False


def _denied(what: str, refusal: Refusal, repository: str) -> Refusal:
    """A 403 or 404 as the permission it means; any other refusal unchanged."""
    if refusal.code not in ("github.http_403", "github.http_404"):
        return refusal
    permission = _PERMISSION[what]
    return Refusal(_CODES[what], f"GitHub refused the {what.replace('-', ' ')} on {repository} "
                   f"({refusal.code.removeprefix('github.')}): the job's token needs `{permission}`",
                   field=what, expected=permission, actual=refusal.code,
                   hint=f"Grant `permissions: {{{permission}}}` to the job (and to the calling job of a reusable "
                        f"workflow), or set `{what}: false`.")


def _request(gh: Any, token: str, method: str, url: str, body: Mapping[str, Any] | None,
             ) -> tuple[Mapping[str, Any], Any]:
    with _mapped(f"{method} {urlsplit(url).path}", token):
        headers, data = gh.requester.requestJsonAndCheck(method, url, input=body)
    _encodable(data, f"{method} {urlsplit(url).path}")
    return headers, data


def _posted(data: Any, what: str, *, updated: bool = False) -> Posted:
    if not isinstance(data, dict):
        raise _invalid(what, "id", type(data).__name__)
    ident = data.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int) or ident < 1:
        raise _invalid(what, "id", ident)
    url = data.get("html_url")
    return Posted(ident, url if isinstance(url, str) else None, updated)


def create_check_run(api_url: str, token: str, repository: str, head_sha: str, *, title: str, summary: str,
                     conclusion: str, annotations: Sequence[Mapping[str, Any]], details_url: str | None = None,
                     name: str = CHECK_RUN_NAME, policy: RequestPolicy = DEFAULT_POLICY) -> Posted:
    """A completed check run on ``head_sha`` with the summary and every annotation: the first 50 with the
    POST, the rest 50 at a time with PATCHes (each appends). Refuses ``github.check_run_denied`` when the
    token lacks ``checks: write``."""
    gh = github_client(api_url, token, policy=policy)
    batches = [list(annotations[i:i + ANNOTATIONS_PER_REQUEST])
               for i in range(0, len(annotations), ANNOTATIONS_PER_REQUEST)] or [[]]
    output = {"title": title[:255], "summary": _cut(summary, SUMMARY_LIMIT)}
    body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": "completed", "conclusion": conclusion,
                            "output": {**output, "annotations": batches[0]}}
    if details_url and details_url.startswith(("http://", "https://")):
        body["details_url"] = details_url
    try:
        _headers, data = _request(gh, token, "POST", f"/repos/{repository}/check-runs", body)
        posted = _posted(data, "check run")
        for batch in batches[1:]:
            _request(gh, token, "PATCH", f"/repos/{repository}/check-runs/{posted.id}",
                     {"output": {**output, "annotations": batch}})
    except Refusal as refusal:
        raise _denied("check-run", refusal, repository) from None
    return posted


def marker(campaign: str) -> str:
    """The hidden line that finds this campaign's comment again (an HTML comment GitHub does not show); a
    campaign name matches the contract's pattern, so it can never close the comment."""
    return f"<!-- testops-evidence:sticky {campaign} -->"


def upsert_pr_comment(api_url: str, token: str, repository: str, number: int, *, body: str, tag: str,
                      policy: RequestPolicy = DEFAULT_POLICY) -> Posted:
    """The campaign's one comment on pull request ``number``: the earlier comment a bot wrote with ``tag`` is
    updated; only when there is none is a comment posted. A comment by a person that copies the tag is never
    edited (nor counted): only a ``Bot`` account's comments are ours."""
    gh = github_client(api_url, token, policy=policy)
    text = _cut(f"{tag}\n{body}", COMMENT_LIMIT)
    try:
        found = _find_comment(gh, api_url, token, repository, number, tag)
        if found is not None:
            _headers, data = _request(gh, token, "PATCH", f"/repos/{repository}/issues/comments/{found}",
                                      {"body": text})
            return _posted(data, "comment", updated=True)
        _headers, data = _request(gh, token, "POST", f"/repos/{repository}/issues/{number}/comments",
                                  {"body": text})
        return _posted(data, "comment")
    except Refusal as refusal:
        raise _denied("pr-comment", refusal, repository) from None


def _find_comment(gh: Any, api_url: str, token: str, repository: str, number: int, tag: str) -> int | None:
    """The newest bot comment of the pull request that carries ``tag`` (all pages read), or None."""
    url: str | None = f"/repos/{repository}/issues/{number}/comments"
    params: dict[str, Any] | None = {"per_page": 100}
    found: int | None = None
    seen = 0
    while url is not None:
        with _mapped(f"GET {urlsplit(url).path}", token):
            headers, data = gh.requester.requestJsonAndCheck("GET", url, parameters=params)
        _encodable(data, f"GET {urlsplit(url).path}")
        if not isinstance(data, list):
            raise _invalid("comment list", "[]", type(data).__name__)
        for item in data:
            seen += 1
            if seen > MAX_COMMENTS:
                raise Refusal("github.response_invalid", f"pull request {number} lists more than {MAX_COMMENTS} "
                              "comments", field="comments", expected=f"<= {MAX_COMMENTS}", actual=f"> {MAX_COMMENTS}")
            if not isinstance(item, dict):
                raise _invalid("comment list", "[]", type(item).__name__)
            user = item.get("user")
            text = item.get("body")
            if (isinstance(user, dict) and user.get("type") == "Bot" and isinstance(text, str)
                    and text.startswith(tag + "\n")):
                found = _posted(item, "comment").id
        url = _next_page(api_url, headers, f"the comments of pull request {number}") if data else None
        params = None  # the next link carries the query
    return found


def pull_request_number(event: Mapping[str, Any]) -> int | None:
    """The pull request a run is for, from its event payload (``pull_request.number``), or None."""
    pull = event.get("pull_request")
    number = pull.get("number") if isinstance(pull, dict) else None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        return None
    return number


def _cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a line break with a line that says so."""
    if len(text) <= limit:
        return text
    note = "\n\n… (cut: the full summary is in the run's step summary)\n"
    head = text[:limit - len(note)]
    return head[:head.rfind("\n") + 1 or len(head)] + note
