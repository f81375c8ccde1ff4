"""The ``testops`` backend: cases from a TestOps job run's plan; results published into its launch.

* select — the job run comes from ``job-run-id`` / ``ALLURE_JOB_RUN_ID`` (TestOps launched the run, and its
  plan decides) or, in a manual run, from ``job-run-env`` (the output of ``allurectl job-run env``) plus the
  contract's ``testops.standing-plan`` policy. Job run, job, launch and plan must all bind to this run,
  workflow, project, plan and contract (``testops/binding.py``).
* publish — the session upload flow (``testops/publish.py``).
* verify — the launch's results, row by row (``testops/verify.py``).

Everything TestOps-specific (paths, bodies, answers) lives in ``testops/``; this module decides and
orchestrates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from testops_evidence import summary
from testops_evidence.backends import Outcome, Published, PublishOptions, SelectInputs, Services, VerifyOptions
from testops_evidence.campaign.receipt import Receipt
from testops_evidence.contract import Case, Contract
from testops_evidence.errors import Refusal
from testops_evidence.readers.testplan import PlanRow, match_rows, read_standing_plan, rows_for_cases


class Backend:
    name: ClassVar[str] = "testops"
    remote: ClassVar[bool] = True

    def __init__(self, services: Services) -> None:
        self.services = services

    # --- select ---------------------------------------------------------------------------------------
    def select(self, inputs: SelectInputs) -> Outcome:
        from testops_evidence.testops.binding import bind_job_run, planned_rows, read_job_run_env

        contract = inputs.contract
        if contract.testops is None:  # `backend: testops` chosen explicitly for a contract without a testops section
            raise Refusal("testops.not_configured", "the TestOps backend needs the contract's `testops` section",
                          field="/testops", expected="a testops section", actual=None)
        explicit, from_env, env_path, plan_path = (inputs.job_run_id, inputs.job_run_id_env, inputs.job_run_env,
                                                   inputs.standing_plan)
        if env_path is None:
            if explicit is None and from_env is None:
                raise Refusal("input.job-run-id", "the TestOps backend needs the job run: job-run-id (or "
                              "ALLURE_JOB_RUN_ID) when TestOps launched the run, or job-run-env for a manual run",
                              field="job-run-id", expected="a job run id, or a job-run-env file", actual=None)
            if plan_path is not None:
                raise Refusal("selection.mode", "a standing plan is for manual runs; this run was launched by "
                              "TestOps, whose job run plan decides", field="standing-plan", expected="(unset)",
                              actual=str(plan_path))

        with self.services.testops() as client:
            project_id = client.project_id if client.project_id is not None else contract.testops.project_id
            expected_launch: int | None = None
            if env_path is not None:
                job_run_id, expected_launch = read_job_run_env(env_path, client.endpoint, project_id)
                for name, other in (("job-run-id", explicit), ("ALLURE_JOB_RUN_ID", from_env)):
                    if other is not None and other != job_run_id:
                        raise Refusal("selection.mode", f"{name} and the job-run-env file name different job runs",
                                      field=name, expected=f"job-run-env ({job_run_id})", actual=other)
            else:
                given = explicit if explicit is not None else from_env
                assert given is not None  # refused above, before the client was built
                job_run_id = given
            manual = env_path is not None
            binding, checks = bind_job_run(client, contract, inputs.live, job_run_id, expected_launch,
                                           workflow_name=inputs.workflow_name, job_uid=inputs.job_uid)
            if manual:
                rows, origin, why = _manual_rows(contract, plan_path)
                source = "standing-plan"
            else:
                rows = tuple(planned_rows(client, job_run_id))
                origin = f"TestOps job run {job_run_id}'s plan"
                why = (f"TestOps launched this run for job run {job_run_id}, whose plan lists {len(rows)} test(s), "
                       "each matching a contract case on id and selector")
                source = "job-run"
            cases = match_rows(rows, contract, where="standing-plan" if manual and plan_path else "plan")
            if manual:
                _check_policy(contract, cases, plan_path)
            self.services.log(f"job run {job_run_id}: {len(rows)} planned rows, {len(cases)} contract cases")
        return Outcome(cases, source, origin, why, binding, checks, planned=len(rows))

    # --- publish --------------------------------------------------------------------------------------
    def publish(self, receipt: Receipt, results_dir: Path,
                options: PublishOptions) -> Published:
        from testops_evidence.testops.publish import prepare, upload

        prepared = prepare(receipt, results_dir)
        with self.services.testops() as client:
            record = upload(client, self.services.state, prepared, self.services.log, streamed=options.streamed,
                            streamed_form=options.streamed_form)
        count, requests = record["uploaded-count"], record["requests"]
        ratio = requests / max(1, count)
        headline = (f"✅ Published {count} results to TestOps launch #{record['launch-id']} (job run "
                    f"#{record['job-run-id']}) in {requests} requests ({ratio:.3f} per result).")
        if record["evidence"].get("form") == "per-result":
            headline += " The evidence went result by result: this TestOps has no launch attachments."
        return Published(record, headline)

    @staticmethod
    def publication_rows(publication: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        evidence = publication["evidence"]
        if isinstance(evidence, list):  # a record of 0.1: the bundle parts alone
            evidence = {"form": "launch-bundle", "parts": evidence}
        if evidence.get("form") == "per-result":
            shown: Any = f"attached to each of the {evidence['attached']} results ({evidence['note']})"
        else:
            shown = summary.join((summary.code(p["name"]) for p in evidence["parts"]), ", ")
        rows: list[tuple[str, Any]] = [
            ("launch", summary.link(f"#{publication['launch-id']}", publication["launch-url"])),
            ("job run", f"#{publication['job-run-id']}"), ("upload session", f"#{publication['session-id']}"),
            ("result chunks", publication["chunks"]), ("evidence", shown),
            ("requests", f"{publication['requests']} ({publication['requests'] / max(1, publication['uploaded-count']):.3f}"
                         " per result)")]
        capabilities = publication.get("capabilities")
        if isinstance(capabilities, dict):
            rows.append(("TestOps answered", f"result ids {capabilities.get('result-ids')}; launch attachments: "
                                             f"{'yes' if capabilities.get('launch-attachment') else 'no'} "
                                             f"({capabilities.get('generation')} generation)"))
        return rows

    # --- verify ---------------------------------------------------------------------------------------
    def verify(self, receipt: Receipt, publication: Mapping[str, Any], options: VerifyOptions) -> dict[str, Any]:
        from testops_evidence.testops.verify import verify_launch

        with self.services.testops() as client:
            done = verify_launch(client, receipt, publication, depth=options.depth, deadline=options.deadline,
                                 monotonic=self.services.monotonic, sleep=self.services.sleep, log=self.services.log)
        url = str(publication.get("launch-url") or "")
        return {"launch": summary.link(f"#{done.launch_id}", url) if url else f"#{done.launch_id}",
                "polls": done.polls, "requests": done.requests, "depth": options.depth,
                "details fetched": done.details, "waited (s)": done.waited}


def _manual_rows(contract: Contract, plan_path: Path | None) -> tuple[tuple[PlanRow, ...], str, str]:
    """Planned rows of a manual run, with the origin phrase and the reason sentence."""
    config = contract.testops
    assert config is not None
    policy = config.standing_plan
    if plan_path is not None:
        return (read_standing_plan(plan_path), f"the standing plan {summary.code(plan_path)}",
                f"a manual run (no TestOps launch): the standing plan {summary.code(plan_path)} decides, as the "
                f"contract's {summary.code(f'standing-plan: {policy}')} allows")
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
