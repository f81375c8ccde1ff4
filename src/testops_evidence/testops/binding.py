"""Binding a TestOps job run to this GitHub run (``select``, TestOps backend).

The job run, its job, its launch and the contract's test plan are read and checked against this run,
workflow, project, plan and contract, one refusal code per object:

* ``selection.job_run_binding`` — the job run answers with its own id, belongs to this GitHub run (its
  ``url``), is scheduled or in progress, and names a job and a launch;
* ``selection.job_binding`` — the job is a GitHub job of this workflow (or one of ``testops.job-urls``), and
  TestOps confirms the uid it knows the job by (see :func:`find_job_uid`);
* ``selection.launch_binding`` — the launch is the job run's, in the project, and open;
* ``selection.plan_binding`` — the plan is the contract's: id, project, name and size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from testops_evidence.campaign.selection import TestOpsBinding
from testops_evidence.context import RunContext
from testops_evidence.contract import Contract
from testops_evidence.errors import Refusal
from testops_evidence.safeio import read_safe_path
from testops_evidence.testops import api
from testops_evidence.testops.client import TestOpsClient

JOB_RUN_STAGES = ("scheduled", "in_progress")
UID_LIMIT = 1000

Check = tuple[str, str, str]  # (object, what was checked, value): a row of the summary's bindings table


def _is_id(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _bind(code: str, field: str, expected: Any, actual: Any, message: str) -> None:
    if expected != actual or type(expected) is not type(actual):  # 1 == True in Python; ids are never bools
        raise Refusal(code, message, field=field, expected=expected, actual=actual)


def accepted_job_urls(contract: Contract, live: RunContext) -> list[str]:
    """This workflow's URL in TestOps' form, plus the contract's ``testops.job-urls``."""
    extra = list(contract.testops.job_urls) if contract.testops else []
    return [live.workflow_url, *extra]


def read_job_run_env(path: Path, endpoint: str, project_id: int) -> tuple[int, int]:
    """Job run and launch of a manual run, from the saved ``allurectl job-run env`` output; the endpoint
    and project it names (when it names them) must be the ones this step talks to."""
    from testops_evidence.testops import jobrun_env

    parsed = jobrun_env.parse_job_run_env(read_safe_path(path, limit=jobrun_env.MAX_BYTES))
    job_run_id, launch_id = parsed.job_run_id, parsed.launch_id
    if job_run_id is None or launch_id is None:
        missing = [name for name, value in (("ALLURE_JOB_RUN_ID", job_run_id), ("ALLURE_LAUNCH_ID", launch_id))
                   if value is None]
        raise Refusal(jobrun_env.CODE, "the job-run env output lacks " + " and ".join(missing), field=missing[0],
                      expected="ALLURE_JOB_RUN_ID and ALLURE_LAUNCH_ID", actual="(absent)")
    if parsed.project_id is not None and parsed.project_id != project_id:
        raise Refusal(jobrun_env.CODE, "the job-run env output names another TestOps project",
                      field="ALLURE_PROJECT_ID", expected=project_id, actual=parsed.project_id)
    if parsed.endpoint is not None and parsed.endpoint.rstrip("/") != endpoint:
        raise Refusal(jobrun_env.CODE, "the job-run env output names another TestOps endpoint",
                      field="ALLURE_ENDPOINT", expected=endpoint, actual=parsed.endpoint)
    return job_run_id, launch_id


def job_uid_candidates(live: RunContext, workflow_name: str | None, explicit: str | None) -> list[tuple[str, str]]:
    """The uids this workflow's TestOps job may have been created with, each with the rule that makes it.

    TestOps creates a GitHub job on the first upload from the workflow, under the uid that uploader sends,
    and ``/upload/stop`` finds the job run only under that uid. The uploaders do not agree on it:

    * ``ALLURE_JOB_UID`` when the workflow sets it (allurectl reads it; setup-allurectl exports it);
    * Allure 3's GitHub detector: ``<owner>/<repo>_<GITHUB_WORKFLOW>`` (the workflow's name);
    * setup-allurectl: ``<owner>/<repo>/actions/workflows/<workflow id>/<run attempt>``, and without the
      attempt in its earlier versions;
    * testops-evidence 0.1: ``<owner>/<repo>_<workflow file name>``.

    Only a uid TestOps confirms for the bound job is ever used (:func:`find_job_uid`): never a guess.
    """
    if explicit:
        return [(explicit, "ALLURE_JOB_UID")]
    repo = live.repository
    found: list[tuple[str, str]] = []
    if workflow_name:
        found.append((f"{repo}_{workflow_name}", "Allure 3 GitHub detector: <repository>_<GITHUB_WORKFLOW>"))
    if live.workflow_id:
        base = f"{repo}/actions/workflows/{live.workflow_id}"
        found.append((f"{base}/{live.run_attempt}", "setup-allurectl: <repository>/actions/workflows/<id>/<attempt>"))
        found.append((base, "setup-allurectl (earlier): <repository>/actions/workflows/<id>"))
    found.append((f"{repo}_{Path(live.workflow_path).name}", "testops-evidence 0.1: <repository>_<workflow file>"))
    unique: dict[str, str] = {}
    for uid, rule in found:
        if 0 < len(uid) <= UID_LIMIT:
            unique.setdefault(uid, rule)
    return list(unique.items())


def find_job_uid(client: TestOpsClient, project_id: int, job_id: int,
                 candidates: list[tuple[str, str]]) -> tuple[str, str]:
    """The candidate uid under which TestOps lists exactly the bound job (``selection.job_binding`` if none)."""
    seen: list[str] = []
    for uid, rule in candidates:
        found = api.find_job(client, project_id, uid)
        if found == job_id:
            return uid, rule
        seen.append(f"{uid} -> {'no job' if found is None else f'job {found}'}")
    raise Refusal("selection.job_binding", f"TestOps knows job {job_id} under none of the uids this workflow's "
                  "uploaders use, so /upload/stop could not find its job run", field="job.externalId",
                  expected=f"job {job_id}", actual=seen[:6],
                  hint="Set ALLURE_JOB_UID in the workflow to the uid the job was created with (the uid the "
                       "first upload from this workflow sent), or let this action's first upload create the job.")


def job_run_uid(run: Mapping[str, Any], live: RunContext) -> tuple[str, str]:
    """The job run's uid: the one TestOps reports for it, else this GitHub run's id (Allure 3's rule)."""
    external = run.get("externalId")
    if isinstance(external, str) and 0 < len(external) <= UID_LIMIT and not any(c.isspace() for c in external):
        return external, "the job run's externalId in TestOps"
    return str(live.run_id), "Allure 3 GitHub detector: GITHUB_RUN_ID"


def bind_job_run(client: TestOpsClient, contract: Contract, live: RunContext, job_run_id: int,
                 expected_launch: int | None, *, workflow_name: str | None = None,
                 job_uid: str | None = None) -> tuple[TestOpsBinding, list[Check]]:
    """Fetch job run, job, launch and plan and check every binding; each failure has its own code."""
    config = contract.testops
    assert config is not None
    project_id = client.project_id if client.project_id is not None else config.project_id
    accepted = accepted_job_urls(contract, live)
    checks: list[Check] = []

    run = api.get_job_run(client, job_run_id)
    _bind("selection.job_run_binding", "jobrun.id", job_run_id, run.get("id"), "the job run answered with another id")
    _bind("selection.job_run_binding", "jobrun.url", live.run_url, run.get("url"),
          "the TestOps job run belongs to another GitHub run")
    if run.get("stage") not in JOB_RUN_STAGES:
        raise Refusal("selection.job_run_binding", "the job run is not scheduled or in progress (finished, or "
                      "replayed from an earlier run)", field="jobrun.stage", expected=" | ".join(JOB_RUN_STAGES),
                      actual=run.get("stage"))
    job_ref = run.get("job")
    job_ref = job_ref if isinstance(job_ref, dict) else {}
    job_id = job_ref.get("id")
    if not _is_id(job_id):
        raise Refusal("selection.job_run_binding", "the job run names no job", field="jobrun.job.id",
                      expected="a positive job id", actual=job_id)
    launch_id = run.get("launchId")
    if not _is_id(launch_id):
        raise Refusal("selection.job_run_binding", "the job run names no launch", field="jobrun.launchId",
                      expected="a positive launch id", actual=launch_id)
    checks.append(("job run", "url, stage", f"{run.get('url')} · {run.get('stage')}"))
    if expected_launch is not None:
        _bind("selection.launch_binding", "jobrun.launchId", expected_launch, launch_id,
              "the job run's launch is not the launch of the manual job-run context")
    # The job run's own view of its job must already agree (absent fields are checked on the job below).
    if job_ref.get("type") is not None:
        _bind("selection.job_binding", "jobrun.job.type", "github", job_ref.get("type"),
              "the job run's job is not a GitHub job")
    if job_ref.get("url") is not None and job_ref.get("url") not in accepted:
        raise Refusal("selection.job_binding", "the job run's job is another workflow's", field="jobrun.job.url",
                      expected=accepted, actual=job_ref.get("url"))

    job = api.get_job(client, job_id)
    _bind("selection.job_binding", "job.id", job_id, job.get("id"), "the job answered with another id")
    _bind("selection.job_binding", "job.type", "github", job.get("type"), "the TestOps job is not a GitHub job")
    if job.get("url") not in accepted:
        raise Refusal("selection.job_binding", "the TestOps job is not this workflow's job", field="job.url",
                      expected=accepted, actual=job.get("url"))
    uid, rule = find_job_uid(client, project_id, job_id, job_uid_candidates(live, workflow_name, job_uid))
    run_uid, run_rule = job_run_uid(run, live)
    checks.append(("job", "type github, this workflow", f"{job_id} · {job.get('url')}"))
    checks.append(("job uid", rule, uid))
    checks.append(("job run uid", run_rule, run_uid))

    launch = api.get_launch(client, launch_id)
    _bind("selection.launch_binding", "launch.id", launch_id, launch.get("id"),
          "the launch is not the job run's launch")
    _bind("selection.launch_binding", "launch.projectId", project_id, launch.get("projectId"),
          "the launch belongs to another project")
    if launch.get("closed") is not False and launch.get("closed") is not None:
        raise Refusal("selection.launch_binding", "the launch is closed; results cannot be added to it",
                      field="launch.closed", expected=False, actual=launch.get("closed"))
    checks.append(("launch", "the job run's, in the project, open", f"{launch_id} · project {project_id}"))

    plan_id = config.plan_id
    if plan_id is None:
        raise Refusal("selection.plan_binding", "the contract has no test plan id", field="/testops/plan/id",
                      expected="the plan id (bootstrap prints it)", actual=None,
                      hint="Run `mode: bootstrap`, then put the plan id into the contract.")
    plan = api.read_plan(client, plan_id)
    _bind("selection.plan_binding", "testplan.id", plan_id, plan.get("id"), "the test plan answered with another id")
    _bind("selection.plan_binding", "testplan.projectId", project_id, plan.get("projectId"),
          "the test plan belongs to another project")
    _bind("selection.plan_binding", "testplan.name", config.plan_name, plan.get("name"),
          "the test plan's name differs from the contract's")
    _bind("selection.plan_binding", "testplan.testCasesCount", len(contract.cases), plan.get("testCasesCount"),
          "the test plan's size differs from the contract's case count")
    checks.append(("plan", "id, name, project, size", f"{plan_id} · {config.plan_name} · {len(contract.cases)} cases"))

    binding = TestOpsBinding(endpoint=client.endpoint, project_id=project_id, plan_id=plan_id,
                             plan_name=config.plan_name, job_run_id=job_run_id, job_id=job_id, launch_id=launch_id,
                             job_uid=uid, job_run_uid=run_uid)
    return binding, checks


def planned_rows(client: TestOpsClient, job_run_id: int) -> Sequence[Any]:
    """The job run's planned rows, parsed (``selection.*`` refusals for a malformed plan)."""
    from testops_evidence.readers.testplan import parse_jobrun_plan

    return parse_jobrun_plan(api.job_run_plan(client, job_run_id))
