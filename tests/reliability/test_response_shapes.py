"""Regression tests for response shapes the HTTP fuzzers found mishandled below our code."""

from __future__ import annotations

import pytest

from servers.github_server import GitHubServer
from testops_evidence.errors import Refusal
from testops_evidence.github_run import RequestPolicy, fetch_run, list_artifacts


@pytest.mark.parametrize("body", [b"true", b"[1, 2]", b"12", b'"text"'])
@pytest.mark.parametrize("route", ["run", "run_artifacts"])
def test_a_github_error_whose_body_is_not_an_object_is_a_coded_refusal(route: str, body: bytes) -> None:
    # PyGithub reads an error body with `output.get("message")`: before the fix, a 4xx answered with
    # `true` escaped as AttributeError (internal.error) instead of a refusal naming GitHub's answer.
    with GitHubServer(token="ghs_t") as server:
        run = server.add_run("acme/agents")
        server.fault(route, 400, body=body)
        policy = RequestPolicy(retries=0)
        with pytest.raises(Refusal) as caught:
            if route == "run":
                fetch_run(server.api_url(), "ghs_t", "acme/agents", run["id"], policy=policy)
            else:
                list_artifacts(server.api_url(), "ghs_t", "acme/agents", run["id"], policy=policy)
    assert caught.value.code in ("github.response_invalid", "github.http_400")
