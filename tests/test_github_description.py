"""GitHub's answers read as GitHub's REST description promises them, and the GitHub test server held to it.

The description (tests/data/github-rest, cut from @octokit/openapi by scripts/extract_github_description.py)
is the judge: every route the test server serves is exercised here on both URL shapes (api.github.com and GHES's
``/api/v3``, each judged by its own plan's description) and each answer validated with openapi-core; the
suite-wide fixture (tests/conftest.py) does the same for every answer of every test's flows. Issue 28, G1:
``run_attempt`` and ``actor`` are optional in the description's workflow run, and are read so.
"""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from servers import github_description
from servers.github_server import REMOVE, Answer, GitHubServer
from testops_evidence import github_checks
from testops_evidence.contract import Trust
from testops_evidence.errors import Refusal
from testops_evidence.github_run import (
    RequestPolicy,
    download_artifact,
    earlier_run_attempts,
    fetch_run,
    list_artifacts,
    list_attempt_jobs,
    rest_context,
)
from testops_evidence.trust import trust_checks

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "ghs_SENTINEL_ghconf_description_3c1e9a7b5d20"
REPO = "acme/agents"
SHA = "c" * 40
RUN_ID = 4242
FAST = RequestPolicy(backoff_factor=0)
# Every route of the test server that answers for GitHub's REST API (the storage host's `blob` is not GitHub's).
REST_ROUTES = {"repo", "run", "run_attempt", "run_artifacts", "workflow_runs", "attempt_jobs", "repo_artifacts",
               "artifact", "artifact_zip", "check_run_create", "check_run_update", "issue_comments",
               "issue_comment_create", "issue_comment_update"}


def refusal(call: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_repo(REPO, private=True, repo_id=77)
        yield server


def judged(gh: GitHubServer) -> list[tuple[Answer, list[str]]]:
    return [(answer, github_description.violations(answer, github_description.plan_of(answer)))
            for answer in gh.answers]


def run_env(gh: GitHubServer, run_id: int, tmp_path: Path) -> tuple[dict[str, str], dict[str, Any]]:
    payload = gh.event_payload(run_id)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return gh.runner_env(run_id, event_path=str(path)), payload


# --- G1: optional fields read as optional ---------------------------------------------------------------------


@pytest.mark.parametrize("plan", github_description.PLANS)
def test_the_description_does_not_require_run_attempt_or_actor_in_a_workflow_run(plan: str) -> None:
    run = github_description.description(plan)["components"]["schemas"]["workflow-run"]
    assert {"run_attempt", "actor", "triggering_actor"} <= set(run["properties"])
    assert not {"run_attempt", "actor", "triggering_actor"} & set(run["required"])
    assert {"id", "head_sha", "repository", "run_number", "event", "path", "workflow_id"} <= set(run["required"])


@pytest.mark.parametrize("ghes", [False, True], ids=["github.com", "ghes"])
def test_a_run_without_run_attempt_conforms_and_is_refused_naming_the_field(gh: GitHubServer, ghes: bool) -> None:
    gh.add_run(REPO, RUN_ID, head_sha=SHA, run_attempt=REMOVE)
    caught = refusal(lambda: fetch_run(gh.api_url(ghes=ghes), TOKEN, REPO, RUN_ID))
    # Not github.response_invalid: the answer is what GitHub may send; the action needs the attempt to bind.
    assert (caught.code, caught.field, caught.exit_code) == ("github.field_absent", "run_attempt", 4)
    assert "`run_attempt`" in caught.message and "does not require" in caught.message
    [(answer, wrong)] = judged(gh)
    assert answer.route == "run" and "run_attempt" not in json.loads(answer.body) and wrong == []


def test_a_run_without_actor_is_read_as_no_actor_known(gh: GitHubServer, tmp_path: Path) -> None:
    gh.add_run(REPO, RUN_ID, head_sha=SHA, actor=REMOVE, triggering_actor=REMOVE)
    run = fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID)
    assert (run.actor_id, run.actor_login, run.triggering_actor_id) == (None, None, None)
    assert all(wrong == [] for _answer, wrong in judged(gh))
    # The runner's GITHUB_ACTOR_ID and the event's sender have nothing to be compared with: no mismatch ...
    env, event = run_env(gh, RUN_ID, tmp_path)
    context = rest_context(env, event, run)
    assert context.actor_id is None and context.triggering_actor_id is None
    # ... and the environment's claim is not taken instead: an actor list refuses the unknown actor.
    listed = Trust(repository=REPO, events=("workflow_dispatch",), branches=("main",),
                   workflows=(run.path,), run_attempts="any", actors=(1234567,))
    actor_rows = [check for check in trust_checks(listed, context) if check.code == "guard.actor"]
    assert [check.ok for check in actor_rows] == [False, False]
    anyone = Trust(repository=REPO, events=("workflow_dispatch",), branches=("main",), workflows=(run.path,),
                   run_attempts="any")
    assert all(check.ok for check in trust_checks(anyone, context))


def test_an_earlier_run_listed_without_run_attempt_is_refused_not_read_as_attempt_one(gh: GitHubServer) -> None:
    """The description documents no default: reading the attempt as 1 would look for the uploads of a re-run
    among the first attempt's jobs."""
    gh.add_run(REPO, RUN_ID, head_sha=SHA, status="completed", conclusion="success", run_attempt=REMOVE)
    caught = refusal(lambda: earlier_run_attempts(gh.api_url(), TOKEN, REPO, "agent-evals.yml", branch="main",
                                                  before=RUN_ID + 1))
    assert (caught.code, caught.field, caught.exit_code) == ("github.field_absent", "run_attempt", 4)
    assert f"run {RUN_ID}" in caught.message
    [(answer, wrong)] = judged(gh)
    assert answer.route == "workflow_runs" and wrong == []


@pytest.mark.parametrize(("field", "value"), [("actor", None), ("actor", "octocat"), ("run_attempt", None)])
def test_a_field_present_with_a_type_the_description_does_not_allow_is_still_response_invalid(
        gh: GitHubServer, field: str, value: Any) -> None:
    gh.add_run(REPO, RUN_ID, head_sha=SHA, **{field: value})
    caught = refusal(lambda: fetch_run(gh.api_url(), TOKEN, REPO, RUN_ID))
    assert (caught.code, caught.field) == ("github.response_invalid", field)
    [(answer, wrong)] = judged(gh)
    assert answer.crafted and wrong  # the description refuses it too


# --- the test server held to the description --------------------------------------------------------------------


@pytest.mark.parametrize("ghes", [False, True], ids=["github.com", "ghes"])
def test_every_route_of_the_test_server_answers_as_the_description_says(gh: GitHubServer, ghes: bool,
                                                                        tmp_path: Path) -> None:
    api = gh.api_url(ghes=ghes)
    run = gh.add_run(REPO, RUN_ID, head_sha=SHA, run_attempt=2, triggering_actor_id=7654321, status="completed",
                     conclusion="success",
                     referenced_workflows=[{"path": "acme/shared/.github/workflows/r.yml@refs/heads/main",
                                            "sha": "1" * 40, "ref": "refs/heads/main"}])
    gh.add_run(REPO, RUN_ID - 1, head_sha=SHA, status="completed", conclusion="failure")
    data = zip_bytes({"cell.json": b"{}"})
    kept = gh.add_artifact(RUN_ID, "cells-a", data)
    gh.add_artifact(RUN_ID, "cells-b", data, digest="")  # an artifact from before GitHub recorded digests
    gh.add_artifact(RUN_ID, "old", data, expired=True)
    gh.add_job(RUN_ID, 2, "worker (a)", steps=[{"name": "Upload", "status": "completed", "conclusion": "success",
                                                "started_at": "2026-01-15T10:01:00Z",
                                                "completed_at": "2026-01-15T10:02:00Z"}])
    gh.add_job(RUN_ID, 2, "worker (b)", conclusion=None, steps=[{"name": "Measure", "status": "in_progress"}])

    # The project's own reads, as the phases make them.
    env, event = run_env(gh, RUN_ID, tmp_path)
    rest_context({**env, "GITHUB_API_URL": api}, event, fetch_run(api, TOKEN, REPO, RUN_ID))
    artifacts = list_artifacts(api, TOKEN, REPO, RUN_ID)
    assert len(list_artifacts(api, TOKEN, REPO, RUN_ID, name="cells-a")) == 1
    assert download_artifact(api, TOKEN, next(a for a in artifacts if a.id == kept["id"]), max_bytes=1 << 20) == data
    assert earlier_run_attempts(api, TOKEN, REPO, "agent-evals.yml", branch="main", before=RUN_ID + 1) == [
        (RUN_ID, 2), (RUN_ID - 1, 1)]
    assert [job.name for job in list_attempt_jobs(api, TOKEN, REPO, RUN_ID, 2)] == ["worker (a)", "worker (b)"]
    expired = next(a for a in artifacts if a.expired)
    assert refusal(lambda: download_artifact(api, TOKEN, expired, max_bytes=1 << 20)).code == "github.http_410"
    # verify's writes: a check run past 50 annotations (a POST and a PATCH) and a sticky comment (listed, posted,
    # then found and updated).
    annotation = {"path": "c.yml", "start_line": 1, "end_line": 1, "annotation_level": "failure", "message": "m"}
    github_checks.create_check_run(api, TOKEN, REPO, SHA, title="t", summary="s", conclusion="failure",
                                   annotations=[annotation] * 51)
    for _ in range(2):
        github_checks.upsert_pr_comment(api, TOKEN, REPO, 17, body="b", tag=github_checks.marker("c"))

    # The routes the project reaches only in other flows, and the answers GitHub gives to wrong requests.
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    for path, status in [
        (f"/repos/{REPO}", 200),
        (f"/repos/{REPO}/actions/runs/{RUN_ID}/attempts/1", 200),
        (f"/repos/{REPO}/actions/artifacts?per_page=2", 200),
        (f"/repos/{REPO}/actions/artifacts/{kept['id']}", 200),
        (f"/repos/{REPO}/actions/runs/{RUN_ID}/attempts/3", 404),
        (f"/repos/{REPO}/actions/artifacts/999999", 404),
        ("/repos/acme/unknown/actions/runs/1", 404),
        (f"/repos/{REPO}/actions/runs/{RUN_ID}/artifacts?per_page=x", 422),
    ]:
        assert session.get(api + path, timeout=30, allow_redirects=False).status_code == status, path
    assert requests.get(f"{api}/repos/{REPO}", timeout=30).status_code == 401

    answers = judged(gh)
    assert {answer.route for answer, _ in answers} >= REST_ROUTES
    assert {answer.status for answer, _ in answers} >= {200, 302, 401, 404, 410, 422}
    assert not any(answer.crafted for answer, _ in answers)
    assert [(answer.path, wrong) for answer, wrong in answers if wrong] == []
    assert run["run_attempt"] == 2


def test_every_operation_of_the_description_is_one_the_server_serves(gh: GitHubServer) -> None:
    """The cut holds the operations the project calls; each is a route of the test server (the route table)."""
    from servers.github_server import _route

    for plan in github_description.PLANS:
        paths = github_description.description(plan)["paths"]
        concrete = {path.replace("{owner}", "acme").replace("{repo}", "agents").replace("{run_id}", "1")
                    .replace("{attempt_number}", "1").replace("{artifact_id}", "2").replace("{archive_format}", "zip")
                    .replace("{workflow_id}", "agent-evals.yml").replace("{issue_number}", "17")
                    .replace("{check_run_id}", "3").replace("{comment_id}", "4"): path for path in paths}
        served = {_route(method.upper(), path)[0] for path, template in concrete.items()
                  for method in paths[template]}
        assert served == REST_ROUTES, plan


def test_the_check_fails_an_answer_unlike_the_description(gh: GitHubServer) -> None:
    run = gh.add_run(REPO, RUN_ID, head_sha=SHA)
    run["run_number"] = "7"  # a test's change after the server handed the document out: crafted, and wrong
    artifact = gh.add_artifact(RUN_ID, "cells", b"zip")
    fetch_run_answer = requests.get(f"{gh.api_url()}/repos/{REPO}/actions/runs/{RUN_ID}", timeout=30,
                                    headers={"Authorization": f"Bearer {TOKEN}"})
    assert fetch_run_answer.status_code == 200
    gh.fault("artifact", 200, body=b'{"id": "not a number"}')
    requests.get(f"{gh.api_url()}/repos/{REPO}/actions/artifacts/{artifact['id']}", timeout=30,
                 headers={"Authorization": f"Bearer {TOKEN}"})
    [(run_answer, run_wrong), (artifact_answer, artifact_wrong)] = judged(gh)
    assert run_answer.crafted and artifact_answer.crafted
    assert run_wrong == [f"GET /repos/{REPO}/actions/runs/{RUN_ID} 200: $.run_number: '7' is not of type 'integer'"]
    assert any("'id'" in line or "$.id" in line for line in artifact_wrong), artifact_wrong
    # An error body that is not GitHub's basic-error, and a status an operation does not document.
    broken = Answer("GET", f"/repos/{REPO}/actions/runs/1", "run", 503, "text/plain", {}, b"busy", False)
    assert github_description.violations(broken) == [f"GET /repos/{REPO}/actions/runs/1 answered 503 with a body "
                                                     "that is not JSON"]
    moved = Answer("GET", f"/repos/{REPO}/actions/runs/1", "run", 301, "application/json", {}, b"{}", False)
    assert "does not document" in github_description.violations(moved)[0]


def test_the_committed_description_is_the_scripts_cut_with_its_licence_and_source() -> None:
    spec = importlib.util.spec_from_file_location("extract", ROOT / "scripts" / "extract_github_description.py")
    assert spec is not None and spec.loader is not None
    extract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extract)
    assert extract.PLANS == github_description.PLANS
    for plan in github_description.PLANS:
        description = github_description.description(plan)
        assert list(description["paths"]) == list(dict.fromkeys([*extract.OPERATIONS,
                                                                  *(path for path, _ in extract.WRITES)]))
        assert (description["info"]["version"], description["info"]["license"]["name"]) == ("23.0.2", "MIT")
        assert description["info"]["x-github-plan"] == plan.split("-")[0]
    readme = (github_description.DATA / "README.md").read_text(encoding="utf-8")
    assert "@octokit/openapi` **23.0.2**" in readme and "MIT" in (github_description.DATA / "LICENSE").read_text()
