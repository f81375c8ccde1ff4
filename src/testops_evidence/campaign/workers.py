"""Which worker job uploaded each cell artifact — bound by the artifact's id and digest, not taken on trust.

Artifact names are unique within a run but not bound to the job that uploads them: any job of the run
whose runtime token is reached (a process of the agent under test that outlives its step can read it from
a later step of its job) can upload under another job's name, or replace an artifact with upload-artifact's
``overwrite: true`` (delete, then upload again). This module binds every cell artifact of a campaign to the
worker job the matrix plan names by what that job's own runner recorded in GitHub's record of the run
attempt (``GET .../runs/{id}/attempts/{n}/jobs``):

* each worker job is found by its display name — ``<artifact-prefix> <job>``, as the campaign template
  names it (a reusable workflow's jobs appear as ``<caller job> / <name>``) — exactly once;
* its upload step (:data:`UPLOAD_STEP`) is followed by a step whose ``name:`` is an expression over the
  upload step's outputs, ``artifact-id`` and ``artifact-digest`` (:func:`report_step_name`). The runner
  evaluates a step's name just before the step's condition (actions/runner, ``StepsRunner`` calls
  ``TryUpdateDisplayName``; the ``steps`` context is allowed in ``steps[*].name`` by the workflow schema) and
  writes it into the job's step record, which the jobs API serves: the id and digest travel from that
  job's runner to the export job through GitHub, out of every other worker's reach;
* the artifact ``<artifact-prefix>-cells-<attempt>-<job>`` is accepted only if its id is the reported id
  (an artifact replaced with ``overwrite`` or deleted and uploaded again is a new artifact with a new id:
  ``workers.artifact_replaced``) and the Actions API's ``digest`` of that id is ``sha256:`` + the reported
  digest (``workers.artifact_digest``). Artifacts are immutable, so an id names one set of bytes, which
  download-artifact then fetches by that id. An attacker who uploads under a worker's name first makes the
  worker's own upload fail (its step did not succeed: ``workers.artifact_origin``);
* an artifact under the campaign's cell prefix that no job of the plan owns is refused, and so is a job
  name that matches twice.

What remains (docs/security.md): anything an attacker with the runtime token of the worker job *itself*
does — that job's cases are the attacker's own.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testops_evidence.errors import Refusal

UPLOAD_STEP = "testops-evidence: upload cell results"
# The step after the upload is named "<REPORT_PREFIX><artifact-id> sha256:<artifact-digest>" by an expression
# over the upload step's outputs (the campaign template; tests/test_workflow_templates.py keeps them equal).
REPORT_PREFIX = "testops-evidence: uploaded artifact "
REPORT_EXPRESSION = (REPORT_PREFIX + "${{ steps.upload.outputs.artifact-id }} "
                     "sha256:${{ steps.upload.outputs.artifact-digest }}")
# upload-artifact v4.6.2 sets artifact-id to the id FinalizeArtifact answers and artifact-digest to the hex
# SHA-256 of the zip it streamed (@actions/artifact, blob-upload.ts); the API's digest is "sha256:<hex>".
_REPORT = re.compile(re.escape(REPORT_PREFIX) + r"([1-9][0-9]{0,18}) sha256:([0-9a-f]{64})\Z")


def artifact_name(prefix: str, attempt: int, job: str) -> str:
    return f"{prefix}-cells-{attempt}-{job}"


def job_display_name(prefix: str, job: str) -> str:
    return f"{prefix} {job}"


def report_step_name(artifact_id: int, digest: str) -> str:
    """The name of a worker's report step once GitHub has evaluated :data:`REPORT_EXPRESSION`."""
    return f"{REPORT_PREFIX}{artifact_id} sha256:{digest}"


@dataclass(frozen=True)
class UploadReport:
    """What a worker's own runner recorded of its upload: the artifact id and the zip's SHA-256 (hex)."""

    artifact_id: int
    digest: str


def reported_upload(api_job: Any, display: str) -> UploadReport | None:
    """The id and digest the job's report step carries, or None when the job records none (its upload
    failed, or the job ended before the step started: the name is then left unevaluated). Two report steps
    are refused: the template has one."""
    steps = [step for step in api_job.steps if step.name.startswith(REPORT_PREFIX)]
    if len(steps) > 1:
        raise Refusal("workers.upload_unreported", f"job {display!r} has {len(steps)} steps named like its upload "
                      "report; the template has one, so which artifact it uploaded cannot be told", field=display,
                      expected=f"one step {REPORT_EXPRESSION!r}", actual=[step.name[:120] for step in steps][:5])
    match = _REPORT.match(steps[0].name) if steps else None
    return UploadReport(int(match.group(1)), match.group(2)) if match else None


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


def _index_artifacts(jobs: Mapping[str, Sequence[str]], prefix: str, attempt: int,
                     artifacts: Sequence[Any]) -> dict[str, Any]:
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
    return by_name


def bind_worker_artifacts(jobs: Mapping[str, Sequence[str]], *, prefix: str, attempt: int, artifacts: Sequence[Any],
                          api_jobs: Sequence[Any], only: Collection[str] | None = None) -> list[WorkerArtifact]:
    """Bind every cell artifact of the run attempt to the plan's worker job that uploaded it (module docstring).

    ``jobs``: the plan's worker job -> its case keys; ``artifacts``: the run's artifacts (ArtifactInfo);
    ``api_jobs``: the attempt's jobs (JobInfo); ``only``: bind just these jobs of the plan (the stream takes each
    worker as it ends), every artifact name still checked against the whole plan. Refuses ``workers.unknown_artifact``,
    ``workers.duplicate_artifact``, ``workers.job_identity``, ``workers.artifact_origin``,
    ``workers.upload_unreported``, ``workers.artifact_replaced`` and ``workers.artifact_digest``.
    """
    by_name = _index_artifacts(jobs, prefix, attempt, artifacts)
    bound: list[WorkerArtifact] = []
    for job, cases in jobs.items():
        if only is not None and job not in only:
            continue
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
        report = reported_upload(api_job, display) if api_job is not None else None
        if artifact is None:
            if report is not None or (step is not None and step.conclusion == "success"):
                raise Refusal("workers.artifact_origin", f"worker job {display!r} uploaded its cells (step "
                              f"{UPLOAD_STEP!r} succeeded) but the artifact {name!r} is gone: it was deleted after "
                              "the upload", field=name,
                              expected=f"artifact {report.artifact_id}" if report else "the artifact the worker "
                              "uploaded", actual="absent")
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
        if report is None:
            raise Refusal("workers.upload_unreported", f"worker job {display!r} uploaded its cells, but its job "
                          f"record has no step {REPORT_EXPRESSION!r} with the id and digest its upload step "
                          f"reported, so the artifact {name!r} cannot be bound to it", field=display,
                          expected=report_step_name(artifact.id, "<sha256 of the zip>"),
                          actual=[s.name[:120] for s in api_job.steps if s.name.startswith(REPORT_PREFIX)] or "none")
        if artifact.id != report.artifact_id:
            raise Refusal("workers.artifact_replaced", f"the artifact {name!r} is artifact {artifact.id}, but its "
                          f"worker's upload step made artifact {report.artifact_id}: it was replaced (overwritten, "
                          "or deleted and uploaded again) after the worker uploaded it", field=name,
                          expected=report.artifact_id, actual=artifact.id)
        if artifact.sha256 != report.digest:
            raise Refusal("workers.artifact_digest", f"the Actions API gives artifact {artifact.id} ({name!r}) the "
                          f"digest {artifact.digest or 'none'}, but its worker's upload step reported sha256:"
                          f"{report.digest}: these are not the bytes the worker uploaded", field=name,
                          expected=f"sha256:{report.digest}", actual=artifact.digest)
        bound.append(WorkerArtifact(job, tuple(cases), artifact, api_job.id, upload))
    return bound


# --- uploads of the coordinator jobs, recorded for later runs ------------------------------------------------

# A later run reads some artifacts of an earlier run by name pattern: the publish job's report history (upload
# continues it) and its publication, or the export job's results (select's `compare-with: previous` baseline). A
# name binds nothing — a worker of that run that reached its runtime token can upload under any matching name — so
# the campaign template names the step after each such upload by the upload's outputs, as a worker does for its
# cells (``testops-evidence: uploaded <what> <artifact-id> sha256:<digest>``), and the reader takes only an
# artifact whose id and digest a job of that name recorded: the export and publish jobs run no code of the agent,
# and only a job's own runner writes its step record.
PUBLISH_JOB = "publish"
EXPORT_JOB = "export"


def upload_report_prefix(what: str) -> str:
    return f"testops-evidence: uploaded {what} "


def upload_report_expression(what: str, step: str) -> str:
    """The ``name:`` of the step after the upload step ``step`` (its ``id``) of ``what``, in the template."""
    return (upload_report_prefix(what) + f"${{{{ steps.{step}.outputs.artifact-id }}}} "
            f"sha256:${{{{ steps.{step}.outputs.artifact-digest }}}}")


HISTORY_REPORT_PREFIX = upload_report_prefix("history")
HISTORY_REPORT_EXPRESSION = upload_report_expression("history", "history")


def recorded_uploads(api_jobs: Sequence[Any], job: str, what: str) -> set[tuple[int, str]]:
    """The ``(artifact id, sha256 hex)`` of every upload of ``what`` that a job named ``job`` (or ``<caller job> /
    <job>``, in a reusable workflow) recorded in its own step record."""
    pattern = re.compile(re.escape(upload_report_prefix(what)) + r"([1-9][0-9]{0,18}) sha256:([0-9a-f]{64})\Z")
    reported = set()
    for api_job in api_jobs:
        if api_job.name != job and not api_job.name.endswith(f" / {job}"):
            continue
        for step in api_job.steps:
            match = pattern.match(step.name)
            if match:
                reported.add((int(match.group(1)), match.group(2)))
    return reported

