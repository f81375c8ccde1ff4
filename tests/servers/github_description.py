"""GitHub's REST description as the judge of the GitHub test server's answers.

tests/data/github-rest holds the operations the project calls, cut from GitHub's own description
(@octokit/openapi, see its README). :func:`violations` validates one answer with openapi-core against the
operation it answers: its status must be one the operation documents, with the documented body. Two kinds of
answer are judged by a narrower rule, as GitHub's description leaves them open:

- an error status the operation does not list (401, 403 and 404 on most routes, an injected 503) is GitHub's
  generic error, ``basic-error`` (every error answer of the REST API has that shape: ``message`` and
  ``documentation_url``);
- the storage host's answer to the zip download (route ``blob``) is not GitHub's REST API: not judged.

One reading is GitHub's intent rather than the letter: a schema GitHub marks ``nullable`` with an ``enum`` that
does not list null (a job's ``conclusion``, null while the job runs) admits null. OpenAPI 3.0.3's clarification
of ``nullable`` lets such an enum refuse null, but GitHub sends it, and marks the field nullable to say so.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openapi_core import OpenAPI

    from servers.github_server import Answer

DATA = Path(__file__).resolve().parent.parent / "data" / "github-rest"
PLANS = ("api.github.com", "ghes-3.17")
GHES_PREFIX = "/api/v3"
NOT_REST = frozenset({"blob"})


def description(plan: str) -> dict[str, Any]:
    """The committed cut of ``plan``'s description, as published."""
    loaded: dict[str, Any] = json.loads((DATA / f"{plan}.json").read_text(encoding="utf-8"))
    return loaded


def _nullable_enums(node: Any) -> Any:
    """``node`` with null added to each nullable enum (see the module's docstring)."""
    if isinstance(node, dict):
        out = {key: _nullable_enums(value) for key, value in node.items()}
        if out.get("nullable") is True and isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(node, list):
        return [_nullable_enums(value) for value in node]
    return node


@functools.cache
def _openapi(plan: str) -> OpenAPI:
    from openapi_core import OpenAPI

    return OpenAPI.from_dict(_nullable_enums(description(plan)))


@functools.cache
def _error_validator(plan: str) -> Any:
    from openapi_schema_validator import OAS30Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4

    whole = _nullable_enums(description(plan))
    registry: Registry[Any] = Registry().with_resource("urn:github-rest", Resource(whole, specification=DRAFT4))
    return OAS30Validator({"$ref": "urn:github-rest#/components/schemas/basic-error"}, registry=registry)


def _documented(plan: str, method: str, path: str, status: int) -> bool | None:
    """Whether the operation ``method`` ``path`` lists ``status``; None when no operation of the cut matches."""
    from openapi_core.templating.paths.exceptions import PathError
    from openapi_core.templating.paths.finders import APICallPathFinder

    spec = _openapi(plan).spec
    try:
        found = APICallPathFinder(spec).find(method.lower(), f"http://127.0.0.1{path}")
    except PathError:  # no operation of the cut
        return None
    responses = found.operation / "responses"
    return str(status) in responses or "default" in responses


def violations(answer: Answer, plan: str = "api.github.com") -> list[str]:
    """What is wrong with ``answer`` by GitHub's description (empty: it conforms)."""
    from openapi_core.exceptions import OpenAPIError
    from openapi_core.testing import MockRequest, MockResponse

    if answer.route in NOT_REST or answer.status == 0:
        return []
    path, _, query = answer.path.partition("?")
    if path == GHES_PREFIX or path.startswith(GHES_PREFIX + "/"):
        path = path[len(GHES_PREFIX):] or "/"
    documented = _documented(plan, answer.method, path, answer.status)
    if not documented:
        if answer.status < 400:
            return [f"{answer.method} {path} answered {answer.status}, which the description does not document"]
        try:
            body = json.loads(answer.body)
        except ValueError:
            return [f"{answer.method} {path} answered {answer.status} with a body that is not JSON"]
        return [f"{answer.method} {path} {answer.status}: {error.json_path}: {error.message}"
                for error in _error_validator(plan).iter_errors(body)]
    args = {k: v for k, v in (part.partition("=")[::2] for part in query.split("&") if part)}
    request = MockRequest("http://127.0.0.1", answer.method.lower(), path, args=args)
    response = MockResponse(answer.body, status_code=answer.status, headers=dict(answer.headers),
                            content_type=answer.content_type.split(";")[0].strip())
    try:
        _openapi(plan).validate_response(request, response)
    except OpenAPIError as exc:
        cause = exc.__cause__
        details = getattr(cause, "schema_errors", None) or ()
        found = [f"{error.json_path}: {error.message}" for error in details] or [str(exc)]
        return [f"{answer.method} {path} {answer.status}: {line}" for line in found]
    return []


def plan_of(answer: Answer) -> str:
    """The description an answer is judged by: GHES's for one under ``/api/v3``, api.github.com's otherwise."""
    path = answer.path.partition("?")[0]
    return PLANS[1] if path == GHES_PREFIX or path.startswith(GHES_PREFIX + "/") else PLANS[0]
