"""``collect-cells`` (GitHub token, ``actions: read``): which worker uploaded each cell artifact.

Runs in the export job, before the cells are downloaded. Reads the digest-checked selection, recomputes the
matrix plan, lists the run's artifacts and the run attempt's jobs, and binds every cell artifact to the
worker job the plan names (``campaign/workers.py``: the artifact's id and digest are the ones the job's own
upload step reported, in the step record GitHub keeps for that job). Outputs ``artifact-ids`` — exactly the
verified artifacts, for ``actions/download-artifact``'s ``artifact-ids`` — and writes ``collect-cells.json``
to the state directory, which export then holds the downloaded directories to: an artifact replaced after
this check has another id, is not downloaded, and its missing directory refuses the export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.campaign.matrix import plan_matrices
from testops_evidence.campaign.selection import load_selection, read_travelled, validate_against
from testops_evidence.campaign.workers import REPORT_PREFIX, UPLOAD_STEP, bind_worker_artifacts, job_display_name
from testops_evidence.errors import Refusal
from testops_evidence.runner import PhaseContext, PhaseResult

RECEIPT = "collect-cells.json"
RECEIPT_SCHEMA = "testops-evidence/collect-cells/v1"


def run(ctx: PhaseContext) -> PhaseResult:
    from testops_evidence import github_run

    contract = ctx.contract()
    prefix = ctx.settings.string("artifact-prefix")
    if prefix is None:
        raise Refusal("input.artifact-prefix", "collect-cells needs the campaign's artifact-prefix (the prefix of "
                      "its worker artifacts and job names)", field="artifact-prefix", expected="a prefix",
                      actual=None)
    if ctx.env.get("GITHUB_ACTIONS") != "true":
        raise Refusal("guard.outside_actions", "collect-cells reads the run's jobs and artifacts from the Actions "
                      "API; outside Actions there is no run (export the cell-results directory directly)",
                      field="GITHUB_ACTIONS", expected="true", actual=ctx.env.get("GITHUB_ACTIONS") or "(unset)")
    live = ctx.readmit()
    path = ctx.settings.path("selection-path") or Path("testops-evidence-selection.json")
    digest, _given = read_travelled(path, ctx.settings.string("selection-sha256"), in_actions=True)
    selection = load_selection(path, digest)
    validate_against(selection, contract, live)
    cases = [contract.case(key) for key in selection.keys]
    # A worker job's cases (a job of trials runs one case's trials, a shard several cases' units).
    plan = {job: tuple(dict.fromkeys(key for key, _trial in units))
            for job, units in plan_matrices(cases, contract.lanes).jobs().items()}

    token = github_run.require_token(ctx.github_token())
    policy = github_run.request_policy(ctx.env, ctx.sleep)
    attempt = live.run_attempt
    with ctx.runtime.group(f"collect-cells: {len(plan)} worker jobs of run {live.run_id}, attempt {attempt}"):
        artifacts = github_run.list_artifacts(live.api_url, token, live.repository, live.run_id,
                                              name=f"{prefix}-cells-{attempt}-*", policy=policy)
        api_jobs = github_run.list_attempt_jobs(live.api_url, token, live.repository, live.run_id, attempt,
                                                policy=policy)
        ctx.runtime.log(f"{len(artifacts)} cell artifact(s), {len(api_jobs)} job(s) in the attempt")
        bound = bind_worker_artifacts(plan, prefix=prefix, attempt=attempt, artifacts=artifacts, api_jobs=api_jobs)
    verified = [worker for worker in bound if worker.artifact is not None]
    receipt: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA, "campaign": contract.campaign, "selection-sha256": selection.digest,
        "artifact-prefix": prefix, "run-id": live.run_id, "run-attempt": attempt,
        "workers": [worker.to_json() for worker in bound],
    }
    ctx.state.write_receipt(RECEIPT, receipt)
    ids = ",".join(str(worker.artifact.id) for worker in verified if worker.artifact is not None)
    missing = [worker for worker in bound if worker.artifact is None]
    headline = (f"✅ {len(verified)} of {len(bound)} worker artifacts were uploaded by their own worker's upload "
                "step" + (f"; {len(missing)} worker(s) uploaded none (their cases are not recorded)." if missing
                          else "."))
    rows = [(summary.code(worker.job), summary.code(job_display_name(prefix, worker.job)), worker.upload,
             summary.code(worker.artifact.name) if worker.artifact is not None else "—",
             worker.artifact.id if worker.artifact is not None else "—", len(worker.cases)) for worker in bound]
    body = (f"Each artifact was bound to its worker by the run attempt's job records: its worker's step "
            f"{summary.code(UPLOAD_STEP)} succeeded, and the artifact's id and the Actions API's digest of it are "
            f"the ones that job's own report step ({summary.code(REPORT_PREFIX + '<id> sha256:<digest>')}) "
            "recorded.\n\n"
            + summary.table(("worker", "job", "upload step", "artifact", "id", "cases"), rows[:500]))
    return PhaseResult(headline=headline, summary=body,
                       outputs={"artifact-ids": ids, "collected-count": len(verified)}, brief=True)
