"""Which worker job uploaded each cell artifact — checked against the Actions jobs API, not taken on trust.

Artifact names are unique within a run but not bound to the job that uploads them: any job of the run
whose runtime token is reached (a process of the agent under test that outlives its step can read it from
a later step of its job) can upload under another job's name. This module binds every cell artifact of a
campaign to the worker job the matrix plan names, with facts an agent cannot forge, because they come
from GitHub's own record of the run attempt (``GET .../runs/{id}/attempts/{n}/jobs``) and its artifact
list:

* each worker job is found by its display name — ``<artifact-prefix> <job>``, as the campaign template
  names it (a reusable workflow's jobs appear as ``<caller job> / <name>``) — exactly once;
* the artifact ``<artifact-prefix>-cells-<attempt>-<job>`` is accepted only if that job's upload step
  (:data:`UPLOAD_STEP`) concluded ``success`` and the artifact was created while the step ran. Names are
  immutable within a run, so an attacker who uploads first makes the worker's own upload fail (the step
  did not succeed: refused), and one who deletes the worker's artifact and uploads again creates it after
  the step completed (refused). The worker always uploads something (its worker record), so an upload
  step that succeeded always made the artifact: its absence means it was deleted (refused);
* an artifact under the campaign's cell prefix that no job of the plan owns is refused, and so is a job
  name that matches twice.

What remains (docs/security.md): a replacement inside the same second as the worker's upload step ends
(the API's timestamps have one-second resolution), and anything an attacker with the runtime token of the
worker job *itself* does before its own upload — that job's cases are the attacker's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from testops_evidence.errors import Refusal

UPLOAD_STEP = "testops-evidence: upload cell results"
# download-artifact, upload-artifact and the API agree to the second; a clock difference between the
# artifact service and the job records of up to this many seconds before the step is tolerated.
EARLY_SKEW_SECONDS = 2


def artifact_name(prefix: str, attempt: int, job: str) -> str:
    return f"{prefix}-cells-{attempt}-{job}"


def job_display_name(prefix: str, job: str) -> str:
    return f"{prefix} {job}"


def _time(value: str | None, what: str) -> datetime:
    if not value:
        raise Refusal("github.response_invalid", f"GitHub gave no time for {what}", field=what,
                      expected="an ISO 8601 time", actual=value)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Refusal("github.response_invalid", f"GitHub's time for {what} is not ISO 8601", field=what,
                      expected="an ISO 8601 time", actual=value[:60]) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class WorkerArtifact:
    """What was checked about one worker job of the plan."""

    job: str
    cases: tuple[str, ...]
    artifact: Any | None  # github_run.ArtifactInfo of the verified artifact, or None (no artifact)
    api_job_id: int | None
    upload: str  # the upload step's conclusion, or "absent" when the job has no such step (yet)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "cases": list(self.cases), "api-job-id": self.api_job_id, "upload": self.upload,
            "artifact": None if self.artifact is None else {
                "id": self.artifact.id, "name": self.artifact.name, "digest": self.artifact.digest,
                "size": self.artifact.size_in_bytes, "created-at": self.artifact.created_at},
        }


def bind_worker_artifacts(jobs: Mapping[str, Sequence[str]], *, prefix: str, attempt: int, artifacts: Sequence[Any],
                          api_jobs: Sequence[Any]) -> list[WorkerArtifact]:
    """Bind every cell artifact of the run attempt to the plan's worker job that uploaded it (module docstring).

    ``jobs``: the plan's worker job -> its case keys; ``artifacts``: the run's artifacts (ArtifactInfo);
    ``api_jobs``: the attempt's jobs (JobInfo). Refuses ``workers.unknown_artifact``,
    ``workers.duplicate_artifact``, ``workers.job_identity`` and ``workers.artifact_origin``.
    """
    cell_prefix = artifact_name(prefix, attempt, "")
    by_name: dict[str, Any] = {}
    for artifact in artifacts:
        if not artifact.name.startswith(cell_prefix):
            continue
        job = artifact.name[len(cell_prefix):]
        if job not in jobs:
            raise Refusal("workers.unknown_artifact", f"the artifact {artifact.name!r} carries the campaign's cell "
                          f"prefix but no worker job of the matrix plan is named {job!r}: something other than a "
                          "worker uploaded it", field=artifact.name, expected=f"{cell_prefix}<job of the plan>",
                          actual=artifact.name)
        if artifact.name in by_name:
            raise Refusal("workers.duplicate_artifact", f"two artifacts are named {artifact.name!r} in this run",
                          field=artifact.name, expected="one artifact per worker job",
                          actual=[by_name[artifact.name].id, artifact.id])
        by_name[artifact.name] = artifact

    bound: list[WorkerArtifact] = []
    for job, cases in jobs.items():
        name = artifact_name(prefix, attempt, job)
        display = job_display_name(prefix, job)
        matching = [j for j in api_jobs if j.name == display or j.name.endswith(f" / {display}")]
        artifact = by_name.get(name)
        if len(matching) > 1:
            raise Refusal("workers.job_identity", f"{len(matching)} jobs of this run attempt are named {display!r}; "
                          "the worker that owns its cases cannot be told apart", field=display,
                          expected="one job", actual=[j.id for j in matching])
        api_job = matching[0] if matching else None
        step = api_job.step(UPLOAD_STEP) if api_job is not None else None
        upload = step.conclusion or step.status if step is not None else "absent"
        if artifact is None:
            if step is not None and step.conclusion == "success":
                raise Refusal("workers.artifact_origin", f"worker job {display!r} uploaded its cells (step "
                              f"{UPLOAD_STEP!r} succeeded) but the artifact {name!r} is gone: it was deleted after "
                              "the upload", field=name, expected="the artifact the worker uploaded", actual="absent")
            bound.append(WorkerArtifact(job, tuple(cases), None, api_job.id if api_job else None, upload))
            continue
        if api_job is None or step is None:
            raise Refusal("workers.artifact_origin", f"the artifact {name!r} exists, but no job {display!r} with an "
                          f"upload step {UPLOAD_STEP!r} ran in this attempt: something else uploaded it",
                          field=name, expected=f"uploaded by job {display!r}", actual="no such job or step")
        if step.conclusion != "success":
            raise Refusal("workers.artifact_origin", f"the artifact {name!r} exists, but its worker's upload step "
                          f"did not succeed ({step.conclusion or step.status}): another job uploaded under the "
                          "worker's name first", field=name, expected="upload step success",
                          actual=step.conclusion or step.status)
        created = _time(artifact.created_at, f"artifact {name} created_at")
        started = _time(step.started_at, f"{display} upload step started_at")
        completed = _time(step.completed_at, f"{display} upload step completed_at")
        if not (started.timestamp() - EARLY_SKEW_SECONDS <= created.timestamp() <= completed.timestamp()):
            raise Refusal("workers.artifact_origin", f"the artifact {name!r} was created at {artifact.created_at}, "
                          f"outside its worker's upload step ({step.started_at} to {step.completed_at}): it was "
                          "replaced after the worker uploaded it", field=name,
                          expected=f"{step.started_at} .. {step.completed_at}", actual=artifact.created_at)
        bound.append(WorkerArtifact(job, tuple(cases), artifact, api_job.id, upload))
    return bound
