"""github_run: the run object, artifact lists and downloads, error mapping, retries, the REST-checked
context and the context a phase re-admits (trust.readmit). Real HTTP to the GitHub test server; PyGithub and requests run unmodified."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import github
import pytest
from github import Auth
from hypothesis import given
from hypothesis import strategies as st

from helpers import FakeClock
from servers.github_server import REMOVE, GitHubServer
from testops_evidence.context import RunContext, admit_backend
from testops_evidence.contract import contract_from_document
from testops_evidence.errors import Refusal
from testops_evidence.github_run import (
    ArtifactInfo,
    RequestPolicy,
    cross_checks,
    download_artifact,
    fetch_run,
    list_artifacts,
    next_link,
    rest_context,
    run_from_json,
)
from testops_evidence.trust import readmit

TOKEN = "ghs_SENTINEL_h1_github_run_5d9a3e7c1f8b2046"
REPO = "acme/agents"
SHA = "9" * 40
RUN_ID = 5151
FAST = RequestPolicy(backoff_factor=0)  # retries without waiting (the injected sleep is never called)


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_repo(REPO, private=True, repo_id=77)
        server.add_run(REPO, RUN_ID, head_sha=SHA, run_attempt=2, triggering_actor_id=7654321,
                       referenced_workflows=[{"path": "acme/shared/.github/workflows/r.yml@refs/heads/main",
                                              "sha": "1" * 40, "ref": "refs/heads/main"}])
        yield server


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def refusal(call: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


# --- the run object ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ghes", [False, True], ids=["github.com", "ghes"])
def test_fetch_run_reads_every_bound_field_in_both_url_shapes(gh: GitHubServer, ghes: bool) -> None:
    run = fetch_run(gh.api_url(ghes=ghes), TOKEN, REPO, RUN_ID)
    assert (run.id, run.run_number, run.run_attempt, run.event) == (RUN_ID, 7, 2, "workflow_dispatch")
    assert (run.path, run.head_branch, run.head_sha, run.workflow_id) == (
        ".github/workflows/agent-evals.yml", "main", SHA, 161335)
    assert (run.actor_id, run.triggering_actor_id) == (1234567, 7654321)
    assert (run.repository, run.repository_id, run.private) == (REPO, 77, True)
    assert run.html_url == f"{gh.url}/{REPO}/actions/runs/{RUN_ID}"
    assert run.referenced_workflows[0].ref == "refs/heads/main"
    prefix = "/api/v3" if ghes else ""
    assert [r.path for r in gh.log] == [f"{prefix}/repos/{REPO}/actions/runs/{RUN_ID}"]
    assert all(r.authorization for r in gh.log)


def test_visibility_missing_from_the_run_is_read_from_the_repository(gh: GitHubServer) -> None:
    doc = gh.add_run(REPO, 6000, head_sha=SHA)
    doc["repository"] = {"id": 77, "full_name": REPO}  # an older server's minimal repository object
    run = fetch_run(gh.api_url(), TOKEN, REPO, 6000)
    assert run.private is True
    assert [r.route for r in gh.log] == ["run", "repo"]


def test_a_workflow_path_with_a_ref_suffix_is_normalised(gh: GitHubServer) -> None:
    gh.add_run(REPO, 6001, head_sha=SHA, path=".github/workflows/agent-evals.yml@refs/heads/main")
    assert fetch_run(gh.api_url(), TOKEN, REPO, 6001).path == ".github/workflows/agent-evals.yml"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"head_sha": REMOVE}, "head_sha"),
        ({"head_sha": "not-a-sha"}, "head_sha"),
        ({"workflow_id": REMOVE}, "workflow_id"),
        ({"run_attempt": "2"}, "run_attempt"),
        ({"run_number": True}, "run_number"),
        ({"event": ""}, "event"),
        ({"actor": None}, "actor"),
        ({"path": 7}, "path"),
    ],
)
def test_a_run_without_a_bound_field_is_response_invalid(gh: GitHubServer, override: dict[str, Any],
                                                         field: str) -> None:
    gh.add_run(REPO, 6002, **{"head_sha": SHA, **override})
    caught = refusal(lambda: fetch_run(gh.api_url(), TOKEN, REPO, 6002))
    assert (caught.code, caught.field, caught.exit_code) == ("github.response_invalid", field, 4)


@pytest.mark.parametrize("body", [b"{broken", b"[1, 2]", b'"text"', b"null", b"plain text"])
def test_a_success_body_that_is_not_a_run_object_is_response_invalid(gh: GitHubServer, body: bytes) -> None:
    gh.fault("run", 200, body=body)
    caught = refusal(lambda: fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID))
    assert (caught.code, caught.exit_code) == ("github.response_invalid", 4)


@pytest.mark.parametrize(("status", "requests"), [(401, 1), (403, 1), (404, 1), (503, 4)])
def test_http_errors_become_github_http_status_and_only_5xx_is_retried(gh: GitHubServer, status: int,
                                                                      requests: int) -> None:
    gh.fault("run", status, times=10)
    caught = refusal(lambda: fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID, policy=FAST))
    assert (caught.code, caught.exit_code, caught.http_status) == (f"github.http_{status}", 4, status)
    assert len(gh.requests_to("run")) == requests  # 503: the first try and three retries


def test_a_5xx_then_success_is_retried_with_backoff_on_the_injected_clock(gh: GitHubServer) -> None:
    clock = FakeClock()
    gh.fault("run", 502, times=2)
    run = fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID, policy=RequestPolicy(sleep=clock.sleep))
    assert run.id == RUN_ID
    assert [r.status for r in gh.requests_to("run")] == [502, 502, 200]
    assert clock.sleeps == [1.0]  # no wait before the first retry, 0.5 * 2 before the second


def test_a_rate_limited_403_with_retry_after_is_retried_after_the_wait(gh: GitHubServer) -> None:
    clock = FakeClock()
    gh.fault("run", 403, retry_after="7",
             body=json.dumps({"message": "You have exceeded a secondary rate limit."}).encode())
    assert fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID, policy=RequestPolicy(sleep=clock.sleep)).id == RUN_ID
    assert clock.sleeps == [7.0]


def test_a_wrong_token_is_http_401_with_a_hint_and_no_token_in_the_message(gh: GitHubServer) -> None:
    caught = refusal(lambda: fetch_run(gh.api_url(), "ghs_wrong", REPO, RUN_ID))
    assert caught.code == "github.http_401"
    assert "Bad credentials" in caught.message and "github-token" in (caught.hint or "")
    assert "ghs_wrong" not in str(caught.to_json())


def test_a_slow_server_is_a_transport_failure(gh: GitHubServer) -> None:
    gh.fault("run", 200, delay=1.5)
    caught = refusal(lambda: fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID, policy=RequestPolicy(retries=0, timeout=1)))
    assert (caught.code, caught.exit_code) == ("github.transport", 4)


def test_pygithub_runs_unmodified_against_the_server(gh: GitHubServer) -> None:
    """The server is GitHub-shaped enough for PyGithub's own models (the importer relies on it)."""
    run_doc = gh.add_run(REPO, 6003, head_sha=SHA, run_attempt=2)
    gh.add_artifact(6003, "cells", b"zip")
    client = github.Github(auth=Auth.Token(TOKEN), base_url=gh.api_url(ghes=True), seconds_between_requests=0)
    repo = client.get_repo(REPO)
    run = repo.get_workflow_run(6003)
    assert (run.run_attempt, run.head_sha, run.repository.full_name) == (2, SHA, REPO)
    assert run.get_attempt(1).run_attempt == 1
    assert [a.name for a in run.get_artifacts()] == ["cells"]
    assert [a.name for a in repo.get_artifacts("cells")] == ["cells"]
    assert repo.get_artifact(run.get_artifacts()[0].id).digest.startswith("sha256:")
    assert run_doc["id"] == run.id


# --- artifacts ------------------------------------------------------------------------------------------------------


def test_list_artifacts_reads_every_page_and_the_fields_the_importer_binds(gh: GitHubServer) -> None:
    for index in range(150):
        gh.add_artifact(RUN_ID, f"cell-{index:03d}", zip_bytes({"n": str(index).encode()}))
    artifacts = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    assert len(artifacts) == 150
    assert len(gh.requests_to("run_artifacts")) == 2  # 100 per page
    first = artifacts[-1]
    assert first.name == "cell-000" and first.run_id == RUN_ID and first.head_sha == SHA
    assert first.digest is not None and first.sha256 == first.digest.removeprefix("sha256:")


def test_list_artifacts_filters_by_exact_name_on_the_server_and_by_pattern_here(gh: GitHubServer) -> None:
    for name in ("cells-linux", "cells-mac", "logs"):
        gh.add_artifact(RUN_ID, name, b"zip")
    assert [a.name for a in list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID, name="logs")] == ["logs"]
    assert "name=logs" in gh.requests_to("run_artifacts")[-1].path
    found = list_artifacts(gh.api_url(ghes=True), TOKEN, REPO, RUN_ID, name="cells-*")
    assert sorted(a.name for a in found) == ["cells-linux", "cells-mac"]


@pytest.mark.parametrize("digest", ["md5:abc", "sha256:XYZ", "sha256:" + "a" * 63])
def test_an_artifact_with_a_malformed_digest_is_response_invalid(gh: GitHubServer, digest: str) -> None:
    gh.add_artifact(RUN_ID, "cells", b"zip", digest=digest)
    caught = refusal(lambda: list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID))
    assert (caught.code, caught.field) == ("github.response_invalid", "digest")


def test_an_artifact_without_a_digest_lists_as_none(gh: GitHubServer) -> None:
    gh.add_artifact(RUN_ID, "old", b"zip", digest="")
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    assert artifact.digest is None and artifact.sha256 is None


@pytest.mark.parametrize("ghes", [False, True], ids=["github.com", "ghes"])
def test_download_follows_the_redirect_without_forwarding_the_token(gh: GitHubServer, ghes: bool) -> None:
    data = zip_bytes({"results/cell.json": b"{}"})
    gh.add_artifact(RUN_ID, "cells", data)
    (artifact,) = list_artifacts(gh.api_url(ghes=ghes), TOKEN, REPO, RUN_ID)
    gh.clear_log()
    assert download_artifact(gh.api_url(ghes=ghes), TOKEN, artifact, max_bytes=len(data)) == data
    (api_call,) = gh.requests_to("artifact_zip")
    (blob_call,) = gh.requests_to("blob")
    assert api_call.authorization and api_call.status == 302
    assert not blob_call.authorization and blob_call.status == 200


def test_download_refuses_an_advertised_size_over_the_cap_before_any_request(gh: GitHubServer) -> None:
    gh.add_artifact(RUN_ID, "big", b"x" * 2048)
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    gh.clear_log()
    caught = refusal(lambda: download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=1024))
    assert (caught.code, caught.exit_code, caught.actual) == ("io.too_large", 3, 2048)
    assert gh.log == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_download_enforces_the_cap_when_the_body_is_larger_than_advertised(gh: GitHubServer, chunked: bool) -> None:
    gh.add_artifact(RUN_ID, "liar", b"x" * (300 * 1024), size_in_bytes=10, chunked=chunked)
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    caught = refusal(lambda: download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=100 * 1024))
    assert (caught.code, caught.field) == ("io.too_large", "artifact-size")


def test_download_never_sends_the_token_to_a_url_off_the_api_host(gh: GitHubServer) -> None:
    with GitHubServer(token=TOKEN) as elsewhere:
        elsewhere.add_run(REPO, RUN_ID, head_sha=SHA)
        foreign = elsewhere.add_artifact(RUN_ID, "cells", b"zip")
        artifact = ArtifactInfo(id=foreign["id"], name="cells", size_in_bytes=3, digest=None,
                                archive_download_url=f"{elsewhere.url}/repos/{REPO}/actions/artifacts/1/zip",
                                expired=False, run_id=RUN_ID, head_sha=SHA, head_branch="main", created_at=None)
        caught = refusal(lambda: download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=100))
        assert (caught.code, caught.field) == ("github.response_invalid", "archive_download_url")
        assert elsewhere.log == []


def test_an_expired_artifact_is_http_410(gh: GitHubServer) -> None:
    gh.add_artifact(RUN_ID, "gone", b"zip", expired=True)
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    caught = refusal(lambda: download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=100))
    assert (caught.code, caught.exit_code) == ("github.http_410", 4)


def test_a_storage_hiccup_is_retried_without_the_token(gh: GitHubServer) -> None:
    gh.add_artifact(RUN_ID, "cells", b"zipdata")
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    gh.fault("blob", 503)
    assert download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=100, policy=FAST) == b"zipdata"
    assert [(r.status, r.authorization) for r in gh.requests_to("blob")] == [(503, False), (200, False)]


def test_the_request_log_never_keeps_the_token(gh: GitHubServer) -> None:
    gh.add_artifact(RUN_ID, "cells", b"zip")
    (artifact,) = list_artifacts(gh.api_url(), TOKEN, REPO, RUN_ID)
    download_artifact(gh.api_url(), TOKEN, artifact, max_bytes=100)
    assert TOKEN not in repr(gh.log)


# --- the REST-checked context -----------------------------------------------------------------------------------------


def runner_env(gh: GitHubServer, tmp_path: Path, run_id: int = RUN_ID, **event: Any) -> tuple[dict[str, str], dict[str, Any]]:
    payload = {**gh.event_payload(run_id), **event}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return gh.runner_env(run_id, event_path=str(path)), payload


def test_rest_context_takes_attempt_actors_visibility_and_workflow_id_from_rest(gh: GitHubServer,
                                                                                tmp_path: Path) -> None:
    env, event = runner_env(gh, tmp_path)
    context = rest_context(env, event, fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID))
    assert (context.run_attempt, context.triggering_actor_id, context.repository_private) == (2, 7654321, True)
    assert (context.workflow_id, context.source, context.local) == (161335, "rest", False)
    assert context.binding_fields()["head-sha"] == SHA


def test_a_pull_request_run_binds_the_head_sha_from_the_event_not_the_merge_commit(gh: GitHubServer,
                                                                                  tmp_path: Path) -> None:
    gh.add_run(REPO, 6004, head_sha=SHA, event="pull_request", head_branch="feature")
    env, event = runner_env(gh, tmp_path, 6004, pull_request={"head": {"sha": SHA}})
    env.update(GITHUB_SHA="e" * 40, GITHUB_REF="refs/pull/3/merge")
    run = fetch_run(gh.api_url(), TOKEN, REPO, 6004)
    assert all(check.ok for check in cross_checks(env, event, run))
    caught = refusal(lambda: rest_context(env, {**event, "pull_request": {"head": {"sha": "e" * 40}}}, run))
    assert (caught.code, caught.field) == ("guard.run_mismatch", "head-sha")


def test_run_from_json_and_cross_checks_never_crash_on_arbitrary_run_documents() -> None:
    @given(st.dictionaries(st.sampled_from(["id", "run_number", "run_attempt", "event", "path", "head_sha",
                                            "workflow_id", "actor", "repository", "triggering_actor",
                                            "referenced_workflows", "head_repository"]),
                           st.none() | st.integers() | st.text(max_size=5) | st.booleans()
                           | st.dictionaries(st.sampled_from(["id", "full_name", "private", "login"]),
                                             st.none() | st.integers() | st.text(max_size=5) | st.booleans())))
    def check(document: dict[str, Any]) -> None:
        try:
            run_from_json(document)
        except Refusal as caught:
            assert caught.code == "github.response_invalid"

    check()


@given(st.text(max_size=200))
def test_next_link_parses_any_header_without_crashing(header: str) -> None:
    result = next_link(header)
    assert result is None or isinstance(result, str)


def test_next_link_finds_the_next_page() -> None:
    header = '<https://x/a?page=1>; rel="prev", <https://x/a?page=3>; rel="next", <https://x/a?page=9>; rel="last"'
    assert next_link(header) == "https://x/a?page=3"
    assert next_link('<https://x/a?page=9>; rel="last"') is None


# --- the re-admitted context and the backend rule ---------------------------------------------------------------------


def live(env: dict[str, str], token: str | None = None) -> RunContext:
    """The context a phase binds to once it re-admits its run against a policy that admits this one."""
    contract = contract_from_document({
        "version": 1, "campaign": "c",
        "trust": {"repository": REPO, "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/agent-evals.yml"], "run-attempts": "any"},
        "profile": {"id": "p"}, "lanes": {"native": {"max-parallel": 1}},
        "cases": [{"key": "k", "full-name": "a/k", "title": "K", "lane": "native", "checks": {"ok": "behavior"}}]})
    return readmit(env, contract, "select", token=token, policy=FAST)


def test_live_context_inside_actions_is_the_rest_checked_context(gh: GitHubServer, tmp_path: Path) -> None:
    env, _ = runner_env(gh, tmp_path)
    context = live(env, TOKEN)
    assert (context.source, context.run_attempt, context.repository_private) == ("rest", 2, True)


def test_live_context_outside_actions_is_a_local_context_that_testops_refuses(tmp_path: Path) -> None:
    context = live({"GITHUB_WORKSPACE": str(tmp_path)})
    assert (context.local, context.source, context.repository) == (True, "local", REPO)
    admit_backend(context, "files")
    caught = refusal(lambda: admit_backend(context, "testops"))
    assert (caught.code, caught.exit_code) == ("guard.local_context", 3)


def test_a_rest_context_is_admitted_to_testops(gh: GitHubServer, tmp_path: Path) -> None:
    env, event = runner_env(gh, tmp_path)
    context: RunContext = rest_context(env, event, fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID))
    admit_backend(context, "testops")
