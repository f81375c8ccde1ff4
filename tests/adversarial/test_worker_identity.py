"""Worker artifacts bound by identity, not by timing (issue 23, item 4): attacks on collect-cells' binding.

The attacker is a worker job whose agent reached the Actions runtime token: it can upload, overwrite
(upload-artifact ``overwrite: true``: delete, then upload anew) or delete any artifact of the run, at any
moment. It cannot write another job's step records: those are written by each job's own runner, and the
step after a worker's upload is named with that upload's ``artifact-id`` and ``artifact-digest``
(campaign/workers.py). The GitHub test server reports what the Actions API would: step names as the runner
evaluated them, ``digest`` as ``sha256:<hex of the zip>``, a new id for every upload. Each attack below
must end in a specific refusal and nothing collected; the honest path must pass.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import HEAD_SHA, RUN_ID, cell
from helpers import PhaseRun
from servers.github_server import GitHubServer, evaluate_step_name
from test_collect_cells import CONTRACT, JOBS, PREFIX, TOKEN, collect, upload_step
from testops_evidence.campaign.workers import REPORT_EXPRESSION, report_step_name

VICTIM, ATTACKER, OTHER = list(JOBS)
# The victim's upload step, as one-second job records show it: it ran 10:05:00 to 10:05:04.
STARTED, COMPLETED = "2026-12-01T10:05:00Z", "2026-12-01T10:05:04Z"


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        server.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        yield server


def zip_of(files: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, document in files.items():
            archive.writestr(name, json.dumps(document))
    return buffer.getvalue()


def cells_of(job: str, *, forged: bool = False) -> bytes:
    """A worker's artifact: its cells and worker record (``forged``: the victim's case passed)."""
    key = JOBS[job][0][0]
    document = cell(CONTRACT, key) if forged else cell(CONTRACT, key, disposition="behavior_failure",
                                                       failed=sorted(CONTRACT.case(key).checks)[:1])
    return zip_of({f"{key}.json": document, "testops-evidence-worker.json": {"job": job, "cases": [key]}})


def artifact_name(job: str) -> str:
    return f"{PREFIX}-cells-1-{job}"


def honest_worker(github: GitHubServer, job: str) -> dict[str, Any]:
    """A worker that uploaded its own cells: the artifact, then its job's record with the upload step and the
    report step named by the runner from the upload's outputs."""
    data = cells_of(job)
    doc = github.add_artifact(RUN_ID, artifact_name(job), data)
    doc["created_at"] = "2026-12-01T10:05:03Z"
    outputs = {"artifact-id": doc["id"], "artifact-digest": hashlib.sha256(data).hexdigest()}
    report = {"name": evaluate_step_name(REPORT_EXPRESSION, {"upload": outputs}), "status": "completed",
              "conclusion": "success", "started_at": COMPLETED, "completed_at": COMPLETED}
    github.add_job(RUN_ID, 1, f"campaign / {PREFIX} {job}",
                   steps=[upload_step(started=STARTED, completed=COMPLETED), report])
    return doc


def refused(run: PhaseRun, tmp_path: Path, code: str) -> None:
    assert (run.exit_code, run.outputs.get("error-code")) == (3, code), run.summary
    assert "artifact-ids" not in run.outputs
    assert not (tmp_path / "state" / "collect-cells.json").exists()


def test_the_honest_path_collects_exactly_the_reported_artifacts(tmp_path: Path, github: GitHubServer) -> None:
    docs = [honest_worker(github, job) for job in JOBS]
    run = collect(tmp_path, github)
    assert run.exit_code == 0, run.summary
    assert run.outputs["artifact-ids"] == ",".join(str(doc["id"]) for doc in docs)
    receipt = json.loads((tmp_path / "state" / "collect-cells.json").read_text())
    assert [w["artifact"]["digest"] for w in receipt["workers"]] == [doc["digest"] for doc in docs]


def test_the_timing_window_replay_is_refused_by_identity(tmp_path: Path, github: GitHubServer) -> None:
    """The replay of issue 23: the victim's upload step completes in the second the replacement is created.
    Before, ``started - 2 s <= created_at <= completed_at`` held and the forged pass was published."""
    for job in (ATTACKER, OTHER):
        honest_worker(github, job)
    original = honest_worker(github, VICTIM)
    replacement = github.overwrite_artifact(RUN_ID, artifact_name(VICTIM), cells_of(VICTIM, forged=True))
    replacement["created_at"] = COMPLETED  # inside the victim's upload step, to the second
    run = collect(tmp_path, github)
    refused(run, tmp_path, "workers.artifact_replaced")
    failure = run.failure()
    assert (failure["expected"], failure["actual"]) == (original["id"], replacement["id"])


@pytest.mark.parametrize("created", ["2026-12-01T10:04:58Z", STARTED, COMPLETED, "2026-12-01T10:30:00Z"])
def test_a_replacement_has_a_new_id_whenever_it_is_made(tmp_path: Path, github: GitHubServer, created: str) -> None:
    """Overwrite deletes the artifact and uploads a new one: a new id, before, inside or after the step."""
    for job in JOBS:
        honest_worker(github, job)
    github.overwrite_artifact(RUN_ID, artifact_name(VICTIM), cells_of(VICTIM, forged=True))["created_at"] = created
    refused(collect(tmp_path, github), tmp_path, "workers.artifact_replaced")


@pytest.mark.parametrize("digest", ["sha256:" + "0" * 64, ""])
def test_an_artifact_whose_digest_is_not_the_reported_one_is_refused(tmp_path: Path, github: GitHubServer,
                                                                     digest: str) -> None:
    """The id is the reported one but the API's digest is not the SHA-256 the worker's upload streamed (or is
    missing): these are not the bytes the worker uploaded."""
    for job in (ATTACKER, OTHER):
        honest_worker(github, job)
    doc = honest_worker(github, VICTIM)
    doc["digest"] = digest or None
    refused(collect(tmp_path, github), tmp_path, "workers.artifact_digest")


def test_a_report_in_another_jobs_record_does_not_vouch_for_a_replacement(tmp_path: Path,
                                                                         github: GitHubServer) -> None:
    """The attacker can name steps of jobs it runs (here a job of its own whose report names the replacement):
    only the victim's own job record counts, and that still names the original."""
    for job in JOBS:
        honest_worker(github, job)
    replacement = github.overwrite_artifact(RUN_ID, artifact_name(VICTIM), cells_of(VICTIM, forged=True))
    github.add_job(RUN_ID, 1, "campaign / decoy", steps=[{
        "name": report_step_name(replacement["id"], str(replacement["digest"]).removeprefix("sha256:")),
        "status": "completed", "conclusion": "success", "started_at": COMPLETED, "completed_at": COMPLETED}])
    refused(collect(tmp_path, github), tmp_path, "workers.artifact_replaced")


@pytest.mark.parametrize("report", [
    None,  # a caller workflow without the report step (an older template)
    REPORT_EXPRESSION,  # the job ended before the step started: the runner left its name unevaluated
    "two",  # two steps named like the report
])
def test_an_upload_whose_job_reports_no_single_id_is_refused(tmp_path: Path, github: GitHubServer,
                                                            report: str | None) -> None:
    for job in (ATTACKER, OTHER):
        honest_worker(github, job)
    data = cells_of(VICTIM)
    doc = github.add_artifact(RUN_ID, artifact_name(VICTIM), data)
    steps = [upload_step(started=STARTED, completed=COMPLETED)]
    honest = report_step_name(doc["id"], hashlib.sha256(data).hexdigest())
    names = [] if report is None else [honest, honest] if report == "two" else [report]
    steps += [{"name": name, "status": "completed", "conclusion": "success"} for name in names]
    github.add_job(RUN_ID, 1, f"campaign / {PREFIX} {VICTIM}", steps=steps)
    refused(collect(tmp_path, github), tmp_path, "workers.upload_unreported")
