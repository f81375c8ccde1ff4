"""``select``: decide which contract cases this run evaluates, prove why, and fan them out.

Backends:

* ``testops`` — the job run comes from ``job-run-id`` / ``ALLURE_JOB_RUN_ID`` (TestOps launched the run;
  its plan is ``GET /jobrun/{id}/plan?expected=true``) or, in a manual run, from ``job-run-env`` (the
  output of ``allurectl job-run env``) plus the contract's ``testops.standing-plan`` policy. Job run,
  job, launch and plan must all bind to this run, workflow, project, plan and contract
  (:func:`bind_job_run`, one refusal code per object).
* ``files`` — the whole contract, a standing ``testplan.json``, or a ``cases`` list.

``cases`` may narrow any of these explicitly (splitting a campaign into several selections of the same
plan); nothing is ever narrowed silently, and the step summary says what was selected and why.

Writes, in this order and only after every check passed (so a refusal leaves nothing behind): the
selection (write-once, 0600), the filtered catalog copy (with ``catalog``), and the ``select.json``
receipt in the state directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from testops_evidence import summary
from testops_evidence.context import RunContext, admit_backend
from testops_evidence.contract import Case, Contract
from testops_evidence.errors import Refusal
from testops_evidence.evidence import catalog as catalog_filter
from testops_evidence.evidence.matrix import (
    HOSTED_JOB_LIMIT_MINUTES,
    LANES,
    SELECT_OUTPUT_BUDGET,
    MatrixPlan,
    OutputSize,
    check_output_budget,
    plan_matrices,
)
from testops_evidence.evidence.selection import (
    TestOpsBinding,
    build_selection,
    selection_bytes,
    write_selection,
)
from testops_evidence.evidence.testplan import (
    PlanRow,
    match_rows,
    parse_jobrun_plan,
    read_standing_plan,
    rows_for_cases,
)
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import hand_over, read_safe_path, sha256_bytes
from testops_evidence.settings import parse_int

if TYPE_CHECKING:
    from testops_evidence.testops.client import TestOpsClient

DEFAULT_SELECTION_PATH = "testops-evidence-selection.json"
JOB_RUN_STAGES = ("scheduled", "in_progress")
SUMMARY_ROWS = 500  # per table; the selection file and the receipt list every case


@dataclass
class Outcome:
    """What chose the cases, and the facts the summary shows."""

    cases: list[Case]
    source: str
    origin: str  # a noun phrase for the headline: "the standing plan `x`"
    why: str  # a sentence for the summary: why exactly these cases
    testops: TestOpsBinding | None = None
    bindings: list[tuple[str, str, str]] = field(default_factory=list)  # (object, checked, value)
    planned: int = 0


# --- entry point ---------------------------------------------------------------------------------------


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    backend = ctx.backend()
    requested = _requested_cases(ctx, contract)
    live = live_context(ctx)
    if backend == "testops":
        outcome = _select_testops(ctx, contract, live)
    else:
        _refuse_job_run_on_files(ctx)
        outcome = _select_files(ctx, contract, requested is not None)
    if requested is not None:
        outcome = _narrow(outcome, requested)

    with ctx.runtime.group(f"Build the selection and matrices for {len(outcome.cases)} cases"):
        document = build_selection(contract, live, outcome.cases, backend=backend, source=outcome.source,
                                   testops=outcome.testops)
        data = selection_bytes(document)
        digest = sha256_bytes(data)
        plan = plan_matrices(outcome.cases, contract.lanes)
        path = ctx.settings.path("selection-path") or Path(DEFAULT_SELECTION_PATH)
        outputs: dict[str, Any] = {
            "selection-path": str(path),
            "selection-sha256": digest,
            "selected-count": len(outcome.cases),
            "full-plan": bool(document["full-plan"]),
            "job-run-id": outcome.testops.job_run_id if outcome.testops else "",
            "launch-id": outcome.testops.launch_id if outcome.testops else "",
            **plan.outputs(),
        }
        sizes = check_output_budget(outputs, len(outcome.cases))
        catalog_source = ctx.settings.path("catalog")
        catalog_target = catalog_filter.catalog_output_path(path) if catalog_source is not None else None
        catalog_bytes = None
        if catalog_source is not None and catalog_target is not None:
            catalog_bytes = catalog_filter.filtered_catalog_bytes(catalog_source, catalog_target,
                                                                  [case.key for case in outcome.cases])
        ctx.runtime.log(f"selection: {len(data):,} bytes, sha256 {digest}")

    for target in (path, catalog_target):
        # write_once refuses an existing file anyway; checking both first means a second select never
        # leaves a new selection behind without its catalog copy and receipt.
        if target is not None and os.path.lexists(target):
            raise Refusal("io.exists", f"{target} already exists; select writes its files once", field="path",
                          expected="no existing file", actual=str(target))
    write_selection(path, data)
    if catalog_target is not None and catalog_bytes is not None:
        catalog_filter.write_filtered_catalog(catalog_target, catalog_bytes)
    hand_over([p for p in (path, catalog_target) if p is not None], ctx.env)
    receipt = _receipt(contract, backend, outcome, path, digest, plan, catalog_target, catalog_bytes)
    ctx.state.write_receipt("select.json", receipt)
    headline = _headline(contract, outcome, plan)
    body = _summary(contract, outcome, plan, sizes, path, digest, catalog_target)
    return PhaseResult(headline=headline, outputs=outputs, summary=body)


# --- the run context ----------------------------------------------------------------------------------


def live_context(ctx: PhaseContext) -> RunContext:
    """The context this select step runs in: inside Actions the event file and the REST run object,
    cross-checked (:func:`github_run.live_context`); outside, the local rehearsal context, which
    :func:`context.admit_backend` keeps away from TestOps (``guard.local_context``)."""
    from testops_evidence import github_run

    context = github_run.live_context(ctx)
    admit_backend(context, ctx.backend())
    return context


# --- inputs -------------------------------------------------------------------------------------------


def _requested_cases(ctx: PhaseContext, contract: Contract) -> list[Case] | None:
    """The ``cases`` input: comma- or whitespace-separated keys, returned in contract order."""
    raw = ctx.settings.string("cases")
    if raw is None:
        return None
    keys = [part for chunk in raw.split(",") for part in chunk.split()]
    if not keys:
        raise Refusal("input.cases", "input cases lists no case key", field="cases",
                      expected="comma-separated case keys", actual=raw)
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise Refusal("selection.duplicate_case", f"input cases lists {key!r} twice", field="cases",
                          expected="each key once", actual=key)
        seen.add(key)
        contract.case(key)  # contract.unknown_case
    return [case for case in contract.cases if case.key in seen]


def _id_value(name: str, raw: str | None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    return parse_int(name, raw, minimum=1)


def job_run_ids(ctx: PhaseContext) -> tuple[int | None, int | None]:
    """(the ``job-run-id`` input, ``ALLURE_JOB_RUN_ID``): read separately so they can be compared."""
    explicit = None
    if ctx.settings.sources.get("job-run-id") in ("option", "input"):
        explicit = _id_value("job-run-id", ctx.settings.string("job-run-id"))
    from_env = _id_value("job-run-id", ctx.env.get("ALLURE_JOB_RUN_ID"))
    if explicit is not None and from_env is not None and explicit != from_env:
        raise Refusal("selection.mode", "the job-run-id input and ALLURE_JOB_RUN_ID name different job runs",
                      field="job-run-id", expected=f"ALLURE_JOB_RUN_ID ({from_env})", actual=explicit)
    return explicit, from_env


def _refuse_job_run_on_files(ctx: PhaseContext) -> None:
    explicit, from_env = job_run_ids(ctx)
    given = explicit or from_env
    if given is not None or ctx.settings.path("job-run-env") is not None:
        # Evidence of a TestOps-launched run would never reach TestOps: say so instead of ignoring it.
        raise Refusal("selection.mode", "a TestOps job run was given but the backend is files",
                      field="backend", expected="testops (or no job run id / job-run-env)", actual="files")


# --- files backend ------------------------------------------------------------------------------------


def _select_files(ctx: PhaseContext, contract: Contract, narrowed: bool) -> Outcome:
    plan_path = ctx.settings.path("standing-plan")
    if plan_path is not None:
        rows = read_standing_plan(plan_path)
        cases = match_rows(rows, contract, where="standing-plan")
        return Outcome(cases, "standing-plan", f"the standing plan {summary.code(plan_path)}",
                       f"the standing plan {summary.code(plan_path)} lists {len(cases)} of the contract's "
                       f"{len(contract.cases)} cases, each matching a contract case on id and selector",
                       planned=len(rows))
    why = ("no standing plan was given, so `cases` chooses from the whole contract" if narrowed else
           "no standing plan and no `cases` were given, so the whole contract is selected")
    return Outcome(list(contract.cases), "contract", "the contract", why, planned=len(contract.cases))


def _narrow(outcome: Outcome, requested: Sequence[Case]) -> Outcome:
    chosen = {case.key for case in requested}
    available = {case.key for case in outcome.cases}
    for case in requested:
        if case.key not in available:
            raise Refusal("selection.not_planned", f"case {case.key!r} was requested with `cases` but "
                          f"{outcome.origin} does not select it", field="cases",
                          expected=f"a case selected by {outcome.origin}", actual=case.key)
    cases = [case for case in outcome.cases if case.key in chosen]
    origin = f"`cases` (narrowing {outcome.origin})"
    why = (f"{outcome.why}; then the `cases` input explicitly narrows these {len(outcome.cases)} to "
           f"{len(cases)} (a campaign split into several selections)")
    return Outcome(cases, "cases", origin, why, outcome.testops, outcome.bindings, outcome.planned)


# --- TestOps backend ----------------------------------------------------------------------------------


def _select_testops(ctx: PhaseContext, contract: Contract, live: RunContext) -> Outcome:
    from testops_evidence.testops.client import TestOpsClient

    config = contract.testops
    if config is None:  # `backend: testops` chosen explicitly for a contract without a testops section
        raise Refusal("testops.not_configured", "the TestOps backend needs the contract's `testops` section",
                      field="/testops", expected="a testops section", actual=None)
    explicit, from_env = job_run_ids(ctx)
    env_path = ctx.settings.path("job-run-env")
    plan_path = ctx.settings.path("standing-plan")
    if env_path is None:
        if explicit is None and from_env is None:
            raise Refusal("input.job-run-id", "the TestOps backend needs the job run: job-run-id (or "
                          "ALLURE_JOB_RUN_ID) when TestOps launched the run, or job-run-env for a manual run",
                          field="job-run-id", expected="a job run id, or a job-run-env file", actual=None)
        if plan_path is not None:
            raise Refusal("selection.mode", "a standing plan is for manual runs; this run was launched by TestOps, "
                          "whose job run plan decides", field="standing-plan", expected="(unset)",
                          actual=str(plan_path))

    with TestOpsClient.from_context(ctx) as client:
        project_id = client.project_id if client.project_id is not None else config.project_id
        expected_launch: int | None = None
        given = explicit if explicit is not None else from_env
        if env_path is not None:
            job_run_id, expected_launch = _read_job_run_env(env_path, client.endpoint, project_id)
            for name, other in (("job-run-id", explicit), ("ALLURE_JOB_RUN_ID", from_env)):
                if other is not None and other != job_run_id:
                    raise Refusal("selection.mode", f"{name} and the job-run-env file name different job runs",
                                  field=name, expected=f"job-run-env ({job_run_id})", actual=other)
        elif given is not None:
            job_run_id = given
        else:  # refused above, before the client was built
            raise AssertionError("no job run id")
        manual = env_path is not None
        with ctx.runtime.group(f"Bind TestOps job run {job_run_id} to this run"):
            binding, checks = bind_job_run(client, contract, live, job_run_id, expected_launch)
            if manual:
                rows, origin, why = _manual_rows(contract, plan_path)
                source = "standing-plan"
            else:
                rows = parse_jobrun_plan(client.get(f"/jobrun/{job_run_id}/plan", {"expected": "true"}))
                origin = f"TestOps job run {job_run_id}'s plan"
                why = (f"TestOps launched this run for job run {job_run_id}, whose plan lists {len(rows)} test(s), "
                       "each matching a contract case on id and selector")
                source = "job-run"
            cases = match_rows(rows, contract, where="standing-plan" if manual and plan_path else "plan")
            if manual:
                _check_policy(contract, cases, plan_path)
            ctx.runtime.log(f"job run {job_run_id}: {len(rows)} planned rows, {len(cases)} contract cases")
    return Outcome(cases, source, origin, why, binding, checks, planned=len(rows))


def _read_job_run_env(path: Path, endpoint: str, project_id: int) -> tuple[int, int]:
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


def _manual_rows(contract: Contract, plan_path: Path | None) -> tuple[tuple[PlanRow, ...], str, str]:
    """Planned rows of a manual run, with the origin phrase and the reason sentence."""
    config = contract.testops
    assert config is not None
    policy = config.standing_plan
    if plan_path is not None:
        return (read_standing_plan(plan_path), f"the standing plan {summary.code(plan_path)}",
                f"a manual run (no TestOps launch): the standing plan {summary.code(plan_path)} decides, as the contract's "
                f"{summary.code(f'standing-plan: {policy}')} allows")
    if policy == "plan-file":
        raise Refusal("input.standing-plan", "the contract's standing-plan is plan-file, so a manual run needs the "
                      "standing-plan input", field="standing-plan", expected="a testplan.json", actual=None)
    if policy == "bootstrap":
        boot = contract.case(config.bootstrap_case or "")
        return (rows_for_cases([boot]), f"the contract's bootstrap standing plan ({summary.code(boot.key)})",
                f"a manual run (no TestOps launch): the contract says `standing-plan: bootstrap`, which selects "
                f"only the bootstrap case {summary.code(boot.key)}")
    return (rows_for_cases(contract.cases), "the contract's standing plan (all cases)",
            "a manual run (no TestOps launch): the contract says `standing-plan: all`, which selects every case")


def _check_policy(contract: Contract, cases: Sequence[Case], plan_path: Path | None) -> None:
    """A standing plan file must agree with the contract's policy; it can never narrow it silently."""
    config = contract.testops
    assert config is not None
    if plan_path is None or config.standing_plan == "plan-file":
        return
    keys = {case.key for case in cases}
    if config.standing_plan == "all" and len(keys) != len(contract.cases):
        raise Refusal("selection.standing_plan", "the contract's standing-plan is all, but the standing plan file "
                      "lists only part of the contract", field="standing-plan",
                      expected=f"all {len(contract.cases)} contract cases", actual=f"{len(keys)} cases")
    if config.standing_plan == "bootstrap" and keys != {config.bootstrap_case}:
        raise Refusal("selection.standing_plan", "the contract's standing-plan is bootstrap, but the standing plan "
                      "file lists other cases", field="standing-plan", expected=[config.bootstrap_case],
                      actual=sorted(keys)[:20])


def _is_id(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _bind(code: str, field: str, expected: Any, actual: Any, message: str) -> None:
    if expected != actual or type(expected) is not type(actual):  # 1 == True in Python; ids are never bools
        raise Refusal(code, message, field=field, expected=expected, actual=actual)


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refusal("testops.response_invalid", f"{what} is not a JSON object", field=what,
                      expected="a JSON object", actual=type(value).__name__)
    return value


def accepted_job_urls(contract: Contract, live: RunContext) -> list[str]:
    """This workflow's URL in TestOps' form, plus the contract's ``testops.job-urls``."""
    extra = list(contract.testops.job_urls) if contract.testops else []
    return [live.workflow_url, *extra]


def bind_job_run(client: TestOpsClient, contract: Contract, live: RunContext, job_run_id: int,
                 expected_launch: int | None) -> tuple[TestOpsBinding, list[tuple[str, str, str]]]:
    """Fetch job run, job, launch and plan and check every binding; each failure has its own code."""
    config = contract.testops
    assert config is not None
    project_id = client.project_id if client.project_id is not None else config.project_id
    accepted = accepted_job_urls(contract, live)
    checks: list[tuple[str, str, str]] = []

    run = _object(client.get(f"/jobrun/{job_run_id}"), "jobrun")
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

    job = _object(client.get(f"/job/{job_id}"), "job")
    _bind("selection.job_binding", "job.id", job_id, job.get("id"), "the job answered with another id")
    _bind("selection.job_binding", "job.type", "github", job.get("type"), "the TestOps job is not a GitHub job")
    if job.get("url") not in accepted:
        raise Refusal("selection.job_binding", "the TestOps job is not this workflow's job", field="job.url",
                      expected=accepted, actual=job.get("url"))
    checks.append(("job", "type github, this workflow", f"{job_id} · {job.get('url')}"))

    launch = _object(client.get(f"/launch/{launch_id}"), "launch")
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
    plan = _object(client.get(f"/testplan/{plan_id}"), "testplan")
    _bind("selection.plan_binding", "testplan.id", plan_id, plan.get("id"), "the test plan answered with another id")
    _bind("selection.plan_binding", "testplan.projectId", project_id, plan.get("projectId"),
          "the test plan belongs to another project")
    _bind("selection.plan_binding", "testplan.name", config.plan_name, plan.get("name"),
          "the test plan's name differs from the contract's")
    _bind("selection.plan_binding", "testplan.testCasesCount", len(contract.cases), plan.get("testCasesCount"),
          "the test plan's size differs from the contract's case count")
    checks.append(("plan", "id, name, project, size", f"{plan_id} · {config.plan_name} · {len(contract.cases)} cases"))

    binding = TestOpsBinding(endpoint=client.endpoint, project_id=project_id, plan_id=plan_id,
                             plan_name=config.plan_name, job_run_id=job_run_id, job_id=job_id, launch_id=launch_id)
    return binding, checks


# --- receipt and summary ------------------------------------------------------------------------------


def _receipt(contract: Contract, backend: str, outcome: Outcome, path: Path, digest: str, plan: MatrixPlan,
             catalog_target: Path | None, catalog_bytes: bytes | None) -> dict[str, Any]:
    return {
        "schema": "testops-evidence/select-receipt/v1",
        "campaign": contract.campaign,
        "contract-sha256": contract.digest,
        "backend": backend,
        "source": outcome.source,
        "why": outcome.why,
        "selection-path": str(path),
        "selection-sha256": digest,
        "selected-count": len(outcome.cases),
        "planned-rows": outcome.planned,
        "keys": [case.key for case in outcome.cases],
        "testops": outcome.testops.to_json() if outcome.testops else None,
        "lanes": {
            name: {"cases": plan.lane(name).case_count, "jobs": plan.lane(name).jobs,
                   "sharded": plan.lane(name).sharded, "max-parallel": plan.lane(name).max_parallel}
            for name in LANES
        },
        "catalog": None if catalog_target is None or catalog_bytes is None else {
            "path": str(catalog_target), "sha256": sha256_bytes(catalog_bytes)},
    }


def _headline(contract: Contract, outcome: Outcome, plan: MatrixPlan) -> str:
    n = len(outcome.cases)
    total = len(contract.cases)
    scope = "the full plan" if n == total else f"**not** the full plan: {total - n} contract case(s) left out"
    lanes = ", ".join(f"{plan.lane(name).case_count} {name}" for name in LANES)
    return f"✅ Selected **{n}** of {total} contract cases ({scope}) from {outcome.origin}: {lanes}."


def _summary(contract: Contract, outcome: Outcome, plan: MatrixPlan, sizes: Sequence[OutputSize], path: Path,
             digest: str, catalog_target: Path | None) -> str:
    parts: list[str] = [f"**Why these cases:** {outcome.why}.\n"]
    if outcome.testops is not None:
        t = outcome.testops
        parts.append("\n### TestOps bindings\n\n")
        links = [("job run", summary.link(f"#{t.job_run_id}", t.job_run_url)),
                 ("launch", summary.link(f"#{t.launch_id}", t.launch_url))]
        parts.append(" · ".join(f"{name} {text}" for name, text in links) + "\n\n")
        parts.append(summary.table(("object", "checked", "value"), outcome.bindings))
    parts.append("\n### Lanes\n\n")
    parts.append(summary.table(
        ("lane", "cases", "jobs", "form", "max-parallel"),
        [(name, plan.lane(name).case_count, plan.lane(name).jobs,
          "shards" if plan.lane(name).sharded else "one case per job", plan.lane(name).max_parallel)
         for name in LANES]))
    for name in LANES:
        lane = plan.lane(name)
        if lane.case_count == 0:
            continue
        parts.append(f"\n### {name.capitalize()} lane: {lane.case_count} case(s) in {lane.jobs} job(s)\n\n")
        members = [case for case in outcome.cases if case.lane == name]
        parts.append(summary.table(("key", "TestOps id", "title", "timeout", "credentials"),
                                   [(summary.code(c.key), c.testops_id, c.title, f"{c.timeout_minutes} min",
                                     summary.join((summary.code(n) for n in c.credentials), ", ") or "—")
                                    for c in members], limit=SUMMARY_ROWS))
        long_shards = lane.over_hosted_limit()
        if long_shards:
            parts.append(f"\n> [!WARNING]\n> {len(long_shards)} shard(s) of this lane add up to more than "
                         f"{HOSTED_JOB_LIMIT_MINUTES} minutes, the longest a GitHub-hosted job may run; split the "
                         "campaign with `cases:` or run these shards on self-hosted runners.\n")
    chosen = {c.key for c in outcome.cases}
    left_out = [case.key for case in contract.cases if case.key not in chosen]
    if left_out:
        shown = ", ".join(summary.code(key) for key in left_out[:50])
        more = f" and {len(left_out) - 50} more" if len(left_out) > 50 else ""
        parts.append(f"\n**Not selected ({len(left_out)}):** {shown}{more}.\n")
    total = sum(size.budgeted for size in sizes)
    parts.append("\n### Files and outputs\n\n")
    rows: list[Sequence[Any]] = [("selection", summary.code(path), summary.code(digest))]
    if catalog_target is not None:
        rows.append(("filtered catalog", summary.code(catalog_target), "keeps only the selected cases"))
    rows.append(("outputs", f"{total:,} of {SELECT_OUTPUT_BUDGET:,} bytes",
                 "largest: " + ", ".join(f"{s.name} {s.budgeted:,}" for s in
                                         sorted(sizes, key=lambda s: -s.budgeted)[:3])))
    parts.append(summary.table(("what", "where / size", "detail"), rows))
    return "".join(parts)
