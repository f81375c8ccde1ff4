"""The campaign's result where GitHub users look (issue 27): verify's check run and sticky pull-request comment,
over real HTTP to the GitHub test server, which checks every body as GitHub's REST description requires."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evidence_support import (
    HEAD_SHA,
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, PhaseRun, run_mode
from servers.github_server import GitHubServer
from testops_evidence import github_checks
from testops_evidence.errors import Refusal

CONTRACT = small_contract()
TOKEN = "ghs_checksTokenThatMustNeverBeShown0000"
REPOSITORY = "acme/agents"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_repo(REPOSITORY)
        yield server


@pytest.fixture
def published(tmp_path: Path) -> dict[str, str]:
    """A real flow: export (one passed, one failed, one not recorded) and upload to the files backend."""
    env = actions_env()
    selection, digest = make_selection(tmp_path, CONTRACT, env)
    write_cells(tmp_path / "cells", [
        cell(CONTRACT, "get-task-context"),
        cell(CONTRACT, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
    ], digest)
    options = {"contract": str(write_contract(CONTRACT, tmp_path / "contract.json")),
               "results-dir": str(tmp_path / "allure-results"), "state-dir": str(tmp_path / "state"),
               "backend": "files", "selection-path": str(selection), "selection-sha256": digest}
    export = run_mode("export", tmp_path, {**options, "cell-results": str(tmp_path / "cells")}, env,
                      new_uuid=uuid_factory())
    assert export.exit_code == 1, export.summary
    options["receipt-sha256"] = export.outputs["receipt-sha256"]
    upload = verify_run(tmp_path, {**options, "report": "never"}, mode="upload")
    assert upload.exit_code == 0, upload.summary
    return options


def verify_run(tmp_path: Path, options: dict[str, str], *, mode: str = "verify", **env: str) -> PhaseRun:
    clock = FakeClock()
    return run_mode(mode, tmp_path, options, actions_env(**env), clock=clock.time, monotonic=clock.monotonic,
                    sleep=clock.sleep)


def pull_request_event(tmp_path: Path, number: int = 17) -> str:
    path = tmp_path / f"event-{number}.json"
    path.write_text(json.dumps({"action": "synchronize", "number": number, "pull_request": {"number": number}}))
    return str(path)


def test_verify_reports_a_check_run_with_one_annotation_per_case_that_did_not_pass(
        tmp_path: Path, published: dict[str, str], github: GitHubServer) -> None:
    run = verify_run(tmp_path, {**published, "check-run": "true", "github-token": TOKEN},
                     GITHUB_API_URL=github.api_url())
    assert run.exit_code == 1, run.summary  # published and verified, not every case passed
    (check,) = github.check_runs.values()
    assert check["head_sha"] == HEAD_SHA and check["status"] == "completed" and check["conclusion"] == "failure"
    assert check["output"]["title"] == "1 of 3 passed, 1 failed, 1 broken"
    assert check["output"]["summary"].startswith("### ❌ agent-protocol: 1 of 3 passed, 1 failed, 1 broken\n")
    assert [(a["title"], a["annotation_level"]) for a in check["annotations"]] == [
        ("failed: budget-stop", "failure"), ("broken: company-credential-approval", "warning")]
    assert f"| check run | [\\#{check['id']}]({check['html_url']}) |" in run.summary
    assert all(record.authorization for record in github.log)
    # the token is masked for the runner (::add-mask::) and appears nowhere else
    assert TOKEN not in run.log.replace(f"::add-mask::{TOKEN}", "") + run.summary


def test_more_than_50_annotations_go_50_per_request_and_the_server_refuses_51(github: GitHubServer) -> None:
    annotations = [{"path": "c.yml", "start_line": 1, "end_line": 1, "annotation_level": "failure",
                    "message": f"case {n}"} for n in range(120)]
    posted = github_checks.create_check_run(github.api_url(), TOKEN, REPOSITORY, HEAD_SHA, title="t", summary="s",
                                            conclusion="failure", annotations=annotations)
    assert [r.method for r in github.log] == ["POST", "PATCH", "PATCH"]
    assert [a["message"] for a in github.check_runs[posted.id]["annotations"]] == [f"case {n}" for n in range(120)]
    # The rule the client follows is enforced by the server: 51 in one request is a 422, not a quiet success.
    import requests

    answer = requests.post(f"{github.api_url()}/repos/{REPOSITORY}/check-runs", timeout=10,
                           headers={"Authorization": f"token {TOKEN}"},
                           json={"name": "n", "head_sha": HEAD_SHA, "status": "completed", "conclusion": "failure",
                                 "output": {"title": "t", "summary": "s", "annotations": annotations[:51]}})
    assert answer.status_code == 422 and "more than 50" in answer.text


def test_a_token_without_checks_write_is_a_refusal_that_names_the_permission(
        tmp_path: Path, published: dict[str, str], github: GitHubServer) -> None:
    github.permissions = {"pull-requests: write"}
    run = verify_run(tmp_path, {**published, "check-run": "true", "github-token": TOKEN},
                     GITHUB_API_URL=github.api_url())
    assert run.exit_code == 4
    assert run.outputs["error-code"] == "github.check_run_denied"
    assert "`checks: write`" in run.summary and TOKEN not in run.summary
    assert github.check_runs == {}


def test_the_pull_request_gets_one_comment_updated_by_every_later_run(
        tmp_path: Path, published: dict[str, str], github: GitHubServer) -> None:
    event = pull_request_event(tmp_path)
    # Someone copies the marker into a comment of their own: it is never edited, never taken for ours.
    decoy = github.add_comment(REPOSITORY, 17, github_checks.marker("agent-protocol") + "\nlooks like yours")
    for n in range(120):  # ours must be found past the first page (100 per page)
        github.add_comment(REPOSITORY, 17, f"review comment {n}")
    options = {**published, "pr-comment": "true", "github-token": TOKEN}
    first = verify_run(tmp_path, options, GITHUB_API_URL=github.api_url(), GITHUB_EVENT_PATH=event)
    assert first.exit_code == 1, first.summary
    ours = [c for c in github.comments.values() if c["user"]["type"] == "Bot"]
    assert len(ours) == 1 and ours[0]["body"].startswith("<!-- testops-evidence:sticky agent-protocol -->\n### ❌ ")
    assert "(new)" in first.summary
    for n in range(2):  # later runs of the campaign (verify writes its receipts once per state directory)
        again = github_checks.upsert_pr_comment(github.api_url(), TOKEN, REPOSITORY, 17, body=f"run {n}",
                                                tag=github_checks.marker("agent-protocol"))
        assert again.updated and again.id == ours[0]["id"]
    assert ours[0]["body"] == "<!-- testops-evidence:sticky agent-protocol -->\nrun 1"
    assert [c["id"] for c in github.comments.values() if c["user"]["type"] == "Bot"] == [ours[0]["id"]]
    assert github.comments[decoy["id"]]["body"].endswith("looks like yours")
    assert len(github.requests_to("issue_comment_create")) == 1
    assert len(github.requests_to("issue_comment_update")) == 2
    assert any("page=2" in r.path for r in github.requests_to("issue_comments"))


def test_a_run_not_for_a_pull_request_writes_no_comment(tmp_path: Path, published: dict[str, str],
                                                        github: GitHubServer) -> None:
    event = tmp_path / "dispatch.json"
    event.write_text(json.dumps({"inputs": {}}))
    run = verify_run(tmp_path, {**published, "pr-comment": "true", "github-token": TOKEN},
                     GITHUB_API_URL=github.api_url(), GITHUB_EVENT_PATH=str(event))
    assert run.exit_code == 1 and github.comments == {}
    assert "not for a pull request" in run.log


def test_a_read_only_token_cannot_comment_and_is_told_which_permission(
        tmp_path: Path, published: dict[str, str], github: GitHubServer) -> None:
    github.permissions = {"checks: write"}
    run = verify_run(tmp_path, {**published, "pr-comment": "true", "github-token": TOKEN},
                     GITHUB_API_URL=github.api_url(), GITHUB_EVENT_PATH=pull_request_event(tmp_path))
    assert run.outputs["error-code"] == "github.pr_comment_denied" and run.exit_code == 4
    assert "`pull-requests: write`" in run.summary


def test_a_comment_list_that_links_off_the_api_is_not_followed(github: GitHubServer) -> None:
    github.add_comment(REPOSITORY, 17, "first")
    github.next_page_link = "http://attacker.invalid/comments?page=2"
    with pytest.raises(Refusal) as refused:
        github_checks.upsert_pr_comment(github.api_url(), TOKEN, REPOSITORY, 17, body="x", tag="<!-- t -->")
    assert refused.value.code == "github.pagination_foreign"
    assert github.requests_to("issue_comment_create") == []


def test_check_run_needs_a_token(tmp_path: Path, published: dict[str, str]) -> None:
    run = verify_run(tmp_path, {**published, "check-run": "true"}, GITHUB_API_URL="http://127.0.0.1:9")
    assert run.outputs["error-code"] == "input.github-token" and run.exit_code == 2
