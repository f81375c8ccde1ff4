"""collect-cells: each worker's cell artifact is bound to its own upload step by the run attempt's job records
(GitHub REST test server); export then reads only what it verified. The name-squatting attacks of issue 12."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    HEAD_SHA,
    RUN_ID,
    actions_env,
    bound_to,
    cell,
    make_selection,
    small_contract,
    write_contract,
    write_worker_record,
)
from helpers import PhaseRun, run_mode
from servers.github_server import GitHubServer, evaluate_step_name
from testops_evidence.campaign.matrix import plan_matrices
from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP

TOKEN = "ghs_collectCellsTestToken0123456789"
CONTRACT = small_contract()
JOBS = plan_matrices(list(CONTRACT.cases), CONTRACT.lanes).jobs()  # 3 jobs, one case each
PREFIX = "testops-evidence"


def upload_step(conclusion: str = "success", started: str = "2026-12-01T10:05:00Z",
                completed: str = "2026-12-01T10:05:04Z") -> dict[str, Any]:
    return {"name": UPLOAD_STEP, "status": "completed", "conclusion": conclusion, "started_at": started,
            "completed_at": completed}


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        yield server


def world(tmp_path: Path, github: GitHubServer) -> tuple[dict[str, str], dict[str, str]]:
    # The export job of an admitted run: collect-cells re-admits it over REST (its event file, the runner's
    # variables and the run object agree).
    event = tmp_path / "event.json"
    event.write_text(json.dumps(github.event_payload(RUN_ID)), encoding="utf-8")
    env = {**actions_env(), **github.runner_env(RUN_ID, event_path=str(event)), "GITHUB_TOKEN": TOKEN}
    selection, digest = make_selection(tmp_path, CONTRACT, env)
    options = {"contract": str(write_contract(CONTRACT, tmp_path / "contract.json")), "selection-path": str(selection),
               "selection-sha256": digest, "artifact-prefix": PREFIX, "state-dir": str(tmp_path / "state")}
    return options, env


EMPTY_ZIP = b"PK\x05\x06" + b"\0" * 18


def report_step(outputs: dict[str, Any]) -> dict[str, Any]:
    """The step after the upload, its name evaluated over the upload's outputs as the runner records it."""
    return {"name": evaluate_step_name(REPORT_EXPRESSION, {"upload": outputs}), "status": "completed",
            "conclusion": "success", "started_at": "2026-12-01T10:05:04Z", "completed_at": "2026-12-01T10:05:04Z"}


def worker(github: GitHubServer, job: str, *, step: dict[str, Any] | None = None, artifact: bool = True,
           created: str = "2026-12-01T10:05:02Z", caller: str = "campaign / ",
           reported: dict[str, Any] | None = None) -> int | None:
    """A worker job of the plan as GitHub records it: its upload step, (unless not) its artifact, and its
    report step with the id and digest its upload step output (``reported`` overrides them)."""
    doc = github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{job}", EMPTY_ZIP) if artifact else None
    if doc is not None:
        doc["created_at"] = created
    upload = step or upload_step()
    outputs = ({} if doc is None or upload["conclusion"] != "success" else
               {"artifact-id": doc["id"], "artifact-digest": str(doc["digest"]).removeprefix("sha256:")})
    github.add_job(RUN_ID, 1, f"{caller}{PREFIX} {job}", steps=[upload, report_step(reported or outputs)])
    return None if doc is None else int(doc["id"])


def collect(tmp_path: Path, github: GitHubServer,
            prepared: tuple[dict[str, str], dict[str, str]] | None = None) -> PhaseRun:
    options, env = prepared or world(tmp_path, github)
    return run_mode("collect-cells", tmp_path, options, env)


def test_every_worker_artifact_bound_to_its_own_upload_step_is_collected(tmp_path: Path, github: GitHubServer) -> None:
    ids = [worker(github, job) for job in list(JOBS)[:2]]
    worker(github, list(JOBS)[2], step=upload_step("failure"), artifact=False)  # its upload failed: no cells
    run = collect(tmp_path, github)
    assert run.exit_code == 0, run.summary
    assert run.outputs["artifact-ids"] == ",".join(str(i) for i in ids)
    assert run.outputs["collected-count"] == "2"
    receipt = json.loads((tmp_path / "state" / "collect-cells.json").read_text())
    assert [w["artifact"]["id"] if w["artifact"] else None for w in receipt["workers"]] == [*ids, None]
    assert "2 of 3 worker artifacts were uploaded by their own worker's upload step" in run.summary
    assert {r.route for r in github.log} >= {"run_artifacts", "attempt_jobs"}


@pytest.mark.parametrize(("scenario", "code"), [
    # Squatting: another job uploaded under the worker's name first, so the worker's own upload failed.
    ("squatted", "workers.artifact_origin"),
    # Replaced: the worker's artifact was overwritten after its upload (a new artifact, a new id).
    ("replaced", "workers.artifact_replaced"),
    # Deleted: the worker's upload succeeded (it always uploads its record) but the artifact is gone.
    ("deleted", "workers.artifact_origin"),
    # An artifact under the cell prefix that no job of the plan owns.
    ("unknown", "workers.unknown_artifact"),
    # An artifact for a plan job that never ran in this attempt.
    ("no-job", "workers.artifact_origin"),
    # Two jobs carry the worker's name (two campaigns with one prefix).
    ("twice", "workers.job_identity"),
])
def test_an_artifact_its_worker_did_not_upload_refuses(tmp_path: Path, github: GitHubServer, scenario: str,
                                                        code: str) -> None:
    first, *others = list(JOBS)
    for job in others:
        worker(github, job)
    if scenario == "squatted":
        worker(github, first, step=upload_step("failure"))
    elif scenario == "replaced":
        worker(github, first)
        github.overwrite_artifact(RUN_ID, f"{PREFIX}-cells-1-{first}", EMPTY_ZIP)
    elif scenario == "deleted":
        worker(github, first, artifact=False)
    elif scenario == "unknown":
        worker(github, first)
        github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-native-intruder", EMPTY_ZIP)
    elif scenario == "no-job":
        github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{first}", EMPTY_ZIP)
    elif scenario == "twice":
        worker(github, first)
        worker(github, first, artifact=False, caller="other / ")
    run = collect(tmp_path, github)
    assert (run.exit_code, run.outputs["error-code"]) == (3, code), run.summary
    assert not (tmp_path / "state" / "collect-cells.json").exists()
    assert "artifact-ids" not in run.outputs


def test_collect_cells_refuses_a_testops_token_and_needs_actions(tmp_path: Path, github: GitHubServer) -> None:
    options, env = world(tmp_path, github)
    run = run_mode("collect-cells", tmp_path, options, {**env, "ALLURE_TOKEN": "x"})
    assert run.outputs["error-code"] == "worker.token_present"
    run = run_mode("collect-cells", tmp_path, options, {**env, "GITHUB_ACTIONS": "false"})
    assert run.outputs["error-code"] == "guard.outside_actions"


def test_export_reads_exactly_the_artifacts_collect_cells_verified(tmp_path: Path, github: GitHubServer) -> None:
    """An artifact replaced between the check and the download has another id: download-artifact only warns
    and leaves its directory out, and export refuses rather than report that worker's cases not recorded."""
    for job in JOBS:
        worker(github, job)
    options, env = world(tmp_path, github)
    assert collect(tmp_path, github, (options, env)).exit_code == 0
    cells = tmp_path / "cell-results"
    for job, units in list(JOBS.items())[:2]:  # the third artifact "went missing" after the check
        directory = cells / f"{PREFIX}-cells-1-{job}"
        directory.mkdir(parents=True)
        for key, _trial in units:
            (directory / f"{key}.json").write_text(json.dumps(bound_to(cell(CONTRACT, key),
                                                                       options["selection-sha256"])))
        write_worker_record(directory, job, options["selection-sha256"])
    export_options = {**options, "cell-results": str(cells), "results-dir": str(tmp_path / "out")}
    run = run_mode("export", tmp_path, export_options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.worker_artifact"), run.summary
    assert "was verified but is missing" in run.failure()["message"]
    last_job = list(JOBS)[2]
    (cells / f"{PREFIX}-cells-1-{last_job}").mkdir()
    # An artifact without the worker record that lists its files is refused where collect-cells bound it.
    run = run_mode("export", tmp_path, {**export_options, "results-dir": str(tmp_path / "out2")}, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.worker_artifact"), run.summary
    assert run.failure()["field"] == f"{PREFIX}-cells-1-{last_job}/testops-evidence-worker.json"
    write_worker_record(cells / f"{PREFIX}-cells-1-{last_job}", last_job, options["selection-sha256"])
    run = run_mode("export", tmp_path, {**export_options, "results-dir": str(tmp_path / "out2")}, env)
    assert run.exit_code == 1, run.summary  # the third worker's case: not recorded (its artifact held no cell)
    assert "bound to its worker's upload step by collect-cells" in run.summary


def test_a_next_page_on_another_host_is_refused_not_followed(tmp_path: Path, github: GitHubServer) -> None:
    # A Link rel="next" off GITHUB_API_URL was an AssertionError inside PyGithub: internal.error (issue 24).
    for job in JOBS:
        worker(github, job)
    github.next_page_link = "http://evil.example/repos/acme/agents/actions/runs/1/jobs?page=2"
    run = collect(tmp_path, github)
    assert run.outputs.get("error-code") == "github.pagination_foreign", run.summary
    assert "GITHUB_API_URL" in run.summary and not (tmp_path / "state" / "collect-cells.json").exists()
