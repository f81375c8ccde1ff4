"""Regression tests for answer shapes the HTTP fuzzers found mishandled below our code, and the GitHub
transport tuning the fault matrix needed."""

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


@pytest.mark.parametrize(("variable", "raw"), [("TESTOPS_EVIDENCE_GITHUB_TIMEOUT", "0"),
                                               ("TESTOPS_EVIDENCE_GITHUB_TIMEOUT", "1.5"),
                                               ("TESTOPS_EVIDENCE_GITHUB_RETRIES", "-1"),
                                               ("TESTOPS_EVIDENCE_GITHUB_RETRIES", "3601")])
def test_github_transport_tuning_refuses_bad_values(variable: str, raw: str) -> None:

    from testops_evidence.github_run import request_policy

    with pytest.raises(Refusal) as caught:
        request_policy({variable: raw}, lambda _s: None)
    assert caught.value.code == "input." + variable.lower().replace("_", "-") and caught.value.exit_code == 2


def test_github_transport_tuning_applies() -> None:

    from testops_evidence.github_run import RequestPolicy, request_policy

    def sleep(_seconds: float) -> None:
        return None

    env = {"TESTOPS_EVIDENCE_GITHUB_TIMEOUT": "7", "TESTOPS_EVIDENCE_GITHUB_RETRIES": "0"}
    policy = request_policy(env, sleep)
    assert (policy.timeout, policy.retries, policy.sleep) == (7, 0, sleep)
    assert request_policy({}, sleep) == RequestPolicy(sleep=sleep)
