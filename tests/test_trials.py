"""Repeated trials (issue 16): the contract's trials and verdict policies, the plan's (case, trial) units, the
worker binding per trial, the policy verdict through the real export, the receipt and the pass rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidence_support import actions_env, bound_to, cell, make_selection, uuid_factory, write_contract
from helpers import FakeClock, PhaseRun, run_mode
from testops_evidence.campaign.matrix import plan_matrices, units_of
from testops_evidence.campaign.receipt import load_receipt, receipt_from_bytes
from testops_evidence.campaign.trials import policy_status, wilson
from testops_evidence.contract import Contract, contract_from_document
from testops_evidence.errors import Refusal
from testops_evidence.safeio import pretty_json


def trials_document(trials: dict[str, Any] | None = None, *, cases: int = 0, **per_case: dict[str, Any]) -> dict[str, Any]:
    """A contract whose cases ``flaky`` (native) and ``steady`` (native) and ``human`` (external) take the
    trials given per case (by key, with ``-`` as ``_``), over a contract default of ``trials``."""
    document: dict[str, Any] = {
        "version": 1,
        "campaign": "agent-protocol",
        "trust": {"repository": "acme/agents", "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/agent-evals.yml"]},
        "profile": {"id": "sonnet-default", "model": "claude-sonnet-5"},
        "lanes": {"native": {"max-parallel": 4}, "external": {"max-parallel": 1}},
        "cases": [
            {"key": "flaky", "testops-id": 11, "full-name": "agents/flaky", "title": "Flaky", "lane": "native",
             "checks": {"answer": "behavior", "cleanup": "infrastructure"}},
            {"key": "steady", "testops-id": 12, "full-name": "agents/steady", "title": "Steady", "lane": "native",
             "checks": {"answer": "behavior"}},
            {"key": "human", "testops-id": 13, "full-name": "agents/human", "title": "Human", "lane": "external",
             "checks": {"approved": "behavior"}},
        ],
    }
    for index in range(cases):
        document["cases"].append({"key": f"bulk-{index:04d}", "testops-id": 100 + index,
                                  "full-name": f"agents/bulk-{index:04d}", "title": f"Bulk {index}",
                                  "lane": "native", "checks": {"answer": "behavior"}})
    if trials is not None:
        document["trials"] = trials
    for case in document["cases"]:
        own = per_case.get(case["key"].replace("-", "_"))
        if own is not None:
            case["trials"] = own
    return document


def contract_of(document: dict[str, Any]) -> Contract:
    return contract_from_document(document, "<trials contract>")


def trial_cell(contract: Contract, key: str, trial: int | None, *, failed: tuple[str, ...] = (),
               disposition: str | None = None, **extra: Any) -> dict[str, Any]:
    document = cell(contract, key, failed=failed,
                    disposition=disposition or ("behavior_failure" if failed else "passed"),
                    attempt=f"attempt-{key}-t{trial}", **extra)
    if trial is not None:
        document["trial"] = trial
    return document


def export_run(tmp_path: Path, contract: Contract, cells: list[dict[str, Any]], *,
               workers: dict[str, list[dict[str, Any]]] | None = None) -> tuple[PhaseRun, dict[str, str]]:
    """The real export of ``cells`` (merged layout), or of ``workers`` (job -> cells, per-worker artifacts)."""
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    cell_dir = tmp_path / "cell-results"
    cell_dir.mkdir()
    options = {"contract": str(write_contract(contract, tmp_path / "contract.json")),
               "selection-path": str(selection), "selection-sha256": digest, "cell-results": str(cell_dir),
               "results-dir": str(tmp_path / "allure-results")}
    for document in cells:
        name = f"{document['case']}-t{document.get('trial', 1)}-{document['attempt-id']}.json"
        (cell_dir / name).write_text(json.dumps(bound_to(document, digest)))
    if workers is not None:
        options["artifact-prefix"] = "testops-evidence"
        write_workers(cell_dir, workers, digest)
    clock = FakeClock(1_796_119_500.0)
    run = run_mode("export", tmp_path, options, env, new_uuid=uuid_factory(), clock=clock.time,
                   monotonic=clock.monotonic, sleep=clock.sleep)
    return run, options


def write_workers(cell_dir: Path, workers: dict[str, list[dict[str, Any]]], digest: str) -> dict[str, Path]:
    """Per-worker artifact directories of ``cell_dir`` (job -> cells), bound to the selection ``digest``."""
    directories = {}
    for job, documents in workers.items():
        directory = directories[job] = cell_dir / f"testops-evidence-cells-1-{job}"
        for document in documents:
            target = directory / document["case"] / f"trial-{document.get('trial', 1)}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(bound_to(document, digest)))
    return directories


def case_row(options: dict[str, str], key: str) -> dict[str, Any]:
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    return dict(next(row for row in receipt.results if row["key"] == key))


# --- the contract ----------------------------------------------------------------------------------------


def test_a_case_takes_its_own_trials_over_the_contract_default() -> None:
    contract = contract_of(trials_document({"count": 3}, flaky={"count": 5, "verdict": {"at-least": 4}},
                                           human={"count": 1}))
    flaky, steady, human = (contract.case(k) for k in ("flaky", "steady", "human"))
    assert (flaky.trials.count, flaky.trials.required, flaky.trials.policy()) == (5, 4, "at-least 4")
    assert (steady.trials.count, steady.trials.required, steady.trials.policy()) == (3, 3, "all")
    assert not human.trials.repeated
    # The selection binds a case's trials through its row; a case measured once has the row it always had.
    assert flaky.row()["trials"] == {"count": 5, "verdict": {"at-least": 4}, "jobs": "per-trial"}
    assert "trials" not in human.row()


@pytest.mark.parametrize(("verdict", "required"), [("all", 4), ("any", 1), ({"at-least": 2}, 2)])
def test_each_policy_needs_its_number_of_passed_trials(verdict: Any, required: int) -> None:
    contract = contract_of(trials_document(steady={"count": 4, "verdict": verdict}))
    assert contract.case("steady").trials.required == required


def test_at_least_more_than_the_trials_count_is_refused() -> None:
    with pytest.raises(Refusal) as error:
        contract_of(trials_document(flaky={"count": 3, "verdict": {"at-least": 4}}))
    assert (error.value.code, error.value.field) == ("contract.invalid", "/cases/0/trials/verdict/at-least")


def test_two_cases_that_would_share_a_worker_job_are_refused() -> None:
    document = trials_document(flaky={"count": 2})
    document["cases"][1]["key"] = "flaky-t2"  # the job of flaky's trial 2 is native-flaky-t2
    with pytest.raises(Refusal) as error:
        contract_of(document)
    assert error.value.code == "contract.invalid" and "native-flaky-t2" in error.value.message


# --- the plan --------------------------------------------------------------------------------------------


def test_the_plan_fans_out_one_job_per_trial_bound_to_its_ordinal() -> None:
    contract = contract_of(trials_document(flaky={"count": 3}, human={"count": 2, "jobs": "per-case"}))
    plan = plan_matrices(contract.cases, contract.lanes)
    native = plan.lane("native").include
    assert [row["job"] for row in native] == ["native-flaky-t1", "native-flaky-t2", "native-flaky-t3",
                                              "native-steady"]
    assert (native[1]["trial"], native[1]["trials"], native[1]["label"]) == (2, [[2]], "flaky trial 2 of 3")
    assert "trials" not in native[3] and "label" not in native[3]  # a case measured once: the row it always had
    external = plan.lane("external").include
    assert [(row["job"], row["trials"], row["timeout-minutes"]) for row in external] == [
        ("external-human", [[1, 2]], 60)]  # per-case: both trials in one job, one after another
    owners = plan.owners()
    assert owners == {("flaky", 1): "native-flaky-t1", ("flaky", 2): "native-flaky-t2",
                      ("flaky", 3): "native-flaky-t3", ("steady", 1): "native-steady",
                      ("human", 1): "external-human", ("human", 2): "external-human"}
    assert plan.lane("native").units == 4 and plan.lane("native").form() == "one trial or case per job"


def test_past_256_trials_a_lane_is_sharded_and_every_unit_has_exactly_one_owner() -> None:
    contract = contract_of(trials_document({"count": 5}, cases=98))  # 100 native cases x 5 trials
    plan = plan_matrices(contract.cases, contract.lanes)
    lane = plan.lane("native")
    assert lane.sharded and lane.jobs == 250 and lane.units == 500
    units = [unit for row in lane.include for unit in units_of(row)]
    assert len(units) == len(set(units)) == 500
    assert sorted(plan.owners()) == sorted((c.key, n) for c in contract.cases for n in range(1, 6))
    assert all(len(row["keys"]) == len(row["trials"]) for row in lane.include)
    assert lane.include[0]["label"] == "shard 1 of 250"
    # Recomputing the plan (what export does) assigns every unit to the same job.
    assert plan_matrices(contract.cases, contract.lanes).owners() == plan.owners()


# --- the verdict policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("required", "statuses", "expected"), [
    (3, ["passed", "passed", "passed"], "passed"),
    (3, ["passed", "failed", "passed"], "failed"),
    (3, ["passed", "broken", "passed"], "broken"),   # the broken trial decides it
    (3, ["failed", "broken", "passed"], "failed"),   # lost whatever the broken trial says
    (1, ["failed", "broken", "passed"], "passed"),
    (1, ["failed", "broken", "failed"], "broken"),
    (1, ["failed", "failed", "failed"], "failed"),
    (2, ["passed", "failed", "broken"], "broken"),
    (2, ["failed", "failed", "broken"], "failed"),
])
def test_the_policy_decides_only_what_the_trials_decide(required: int, statuses: list[str], expected: str) -> None:
    assert policy_status(required, statuses) == expected


@pytest.mark.parametrize(("passed", "trials", "low", "high"), [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Statistics in Medicine
    # 17:857-872, table I, method 3 (the Wilson score interval without continuity correction).
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_the_wilson_interval_matches_published_values(passed: int, trials: int, low: float, high: float) -> None:
    interval = wilson(passed, trials)
    assert interval is not None
    assert (round(interval[0], 4), round(interval[1], 4)) == (low, high)


def test_the_wilson_interval_is_exact_at_the_ends_and_undefined_without_trials() -> None:
    assert wilson(5, 5) == (pytest.approx(0.5655, abs=1e-4), 1.0)
    assert wilson(0, 5) == (0.0, pytest.approx(0.4345, abs=1e-4))
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(6, 5)


# --- export ----------------------------------------------------------------------------------------------


def test_all_any_and_at_least_through_the_real_export(tmp_path: Path) -> None:
    contract = contract_of(trials_document(
        flaky={"count": 3, "verdict": "any"}, steady={"count": 3, "verdict": "all"},
        human={"count": 3, "verdict": {"at-least": 2}}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1, failed=("answer",)), trial_cell(contract, "flaky", 2),
        trial_cell(contract, "flaky", 3, failed=("answer",)),
        trial_cell(contract, "steady", 1), trial_cell(contract, "steady", 2, failed=("answer",)),
        trial_cell(contract, "steady", 3),
        trial_cell(contract, "human", 1), trial_cell(contract, "human", 2),
        trial_cell(contract, "human", 3, failed=("approved",)),
    ])
    assert run.exit_code == 1, run.summary
    statuses = {key: case_row(options, key)["status"] for key in ("flaky", "steady", "human")}
    assert statuses == {"flaky": "passed", "steady": "failed", "human": "passed"}
    steady = case_row(options, "steady")
    assert [t["status"] for t in steady["trials"]] == ["passed", "failed", "passed"]
    assert steady["pass-rate"]["passed"] == 2 and steady["pass-rate"]["failed"] == 1
    assert steady["reason"] == "behavior_failure"
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.counts == {"total": 3, "passed": 2, "failed": 1, "broken": 0}
    assert receipt.document["trial-counts"] == {"total": 9, "passed": 5, "failed": 4, "broken": 0}
    assert "2/3 passed (67%, 95% CI 21%–94%)" in run.summary


def test_a_missing_trial_is_a_broken_trial_never_skipped(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": "all"},
                                           steady={"count": 3, "verdict": {"at-least": 2}}))
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 3),            # trial 2 missing
        trial_cell(contract, "steady", 1), trial_cell(contract, "steady", 2),          # trial 3 missing
        cell(contract, "human"),
    ])
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert (flaky["status"], flaky["reason"]) == ("broken", "trials_incomplete")
    assert [(t["trial"], t["status"], t["reason"]) for t in flaky["trials"]] == [
        (1, "passed", "passed"), (2, "broken", "not_recorded"), (3, "passed", "passed")]
    # at-least 2 of 3 is met by trials 1 and 2: the missing third decides nothing.
    assert case_row(options, "steady")["status"] == "passed"
    results = [json.loads(p.read_text()) for p in Path(options["results-dir"]).glob("*-result.json")]
    missing = [r for r in results if r["fullName"] == "agents/flaky" and r["status"] == "broken"
               and {"name": "trial", "value": "2 of 3", "excluded": True} in r["parameters"]]
    assert len(missing) == 1 and "trial 2 of 3" in missing[0]["statusDetails"]["message"]


def test_an_unsupported_pass_in_one_trial_breaks_that_trial_only(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 3, "verdict": {"at-least": 2}}))
    lying = trial_cell(contract, "flaky", 2, failed=("answer",), disposition="passed")
    run, options = export_run(tmp_path, contract, [
        trial_cell(contract, "flaky", 1), lying, trial_cell(contract, "flaky", 3, failed=("answer",)),
        cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert [(t["status"], t.get("code")) for t in flaky["trials"]] == [
        ("passed", None), ("broken", "export.unsupported_pass"), ("failed", None)]
    # 1 passed, 1 failed, 1 broken of "at least 2": the broken trial decides, so the case is not verified.
    assert flaky["status"] == "broken"
    assert (case_row(options, "steady")["status"], case_row(options, "human")["status"]) == ("passed", "passed")


def test_a_cell_for_another_jobs_trial_refuses_the_export(tmp_path: Path) -> None:
    """The worker binding is exact per (case, trial): trial 1's worker cannot write trial 2's verdict."""
    contract = contract_of(trials_document(flaky={"count": 2}))
    run, _options = export_run(tmp_path, contract, [], workers={
        "native-flaky-t1": [trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 2)]})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_origin"), run.summary
    assert "native-flaky-t2" in run.summary


def test_a_cell_without_its_trial_is_trial_one_and_the_refusal_says_so(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}))
    run, _options = export_run(tmp_path, contract, [], workers={
        "native-flaky-t2": [trial_cell(contract, "flaky", None)]})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_origin"), run.summary
    assert "TESTOPS_EVIDENCE_TRIAL" in run.summary


def test_per_trial_artifacts_export_every_trial_of_their_own(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}, human={"count": 2, "jobs": "per-case"}))
    run, options = export_run(tmp_path, contract, [], workers={
        "native-flaky-t1": [trial_cell(contract, "flaky", 1)],
        "native-flaky-t2": [trial_cell(contract, "flaky", 2, failed=("answer",))],
        "native-steady": [cell(contract, "steady")],
        "external-human": [trial_cell(contract, "human", 1), trial_cell(contract, "human", 2)],
    })
    assert run.exit_code == 1, run.summary
    flaky = case_row(options, "flaky")
    assert [(t["worker"], t["status"]) for t in flaky["trials"]] == [
        ("native-flaky-t1", "passed"), ("native-flaky-t2", "failed")]
    assert case_row(options, "human")["status"] == "passed"


def test_a_trial_beyond_the_count_refuses_the_export(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}))
    run, _options = export_run(tmp_path, contract, [trial_cell(contract, "flaky", 3)])
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.foreign_cell"), run.summary


def test_the_verdict_result_outranks_every_trial_and_keeps_the_history_id(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}))
    # A worker whose clock says its failing trial started after the export must not become the case's result.
    late = trial_cell(contract, "flaky", 2, failed=("answer",), started="2099-01-01T00:00:00Z",
                      finished="2099-01-01T00:00:01Z")
    run, options = export_run(tmp_path, contract, [trial_cell(contract, "flaky", 1), late,
                                                   cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 1
    row = case_row(options, "flaky")
    results_dir = Path(options["results-dir"])
    verdict = json.loads((results_dir / row["result-file"]).read_text())
    trials = [json.loads((results_dir / t["result-file"]).read_text()) for t in row["trials"]]
    assert verdict["status"] == "failed"
    assert all(t["historyId"] == verdict["historyId"] and t["fullName"] == verdict["fullName"] for t in trials)
    assert verdict["start"] > max(t["start"] for t in trials)
    assert [s["name"] for s in verdict["steps"]] == ["trial 1 of 2 (attempt attempt-flaky-t1)",
                                                     "trial 2 of 2 (attempt attempt-flaky-t2)"]
    evidence = json.loads((results_dir / row["attachment-file"]).read_text())
    assert [t["uuid"] for t in evidence["trials"]["trials"]] == [t["uuid"] for t in row["trials"]]


def test_the_receipt_cannot_say_passed_where_its_trials_do_not(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}))
    run, options = export_run(tmp_path, contract, [trial_cell(contract, "flaky", 1),
                                                   trial_cell(contract, "flaky", 2, failed=("answer",)),
                                                   cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 1
    path = options["results-dir"] + "-receipt.json"
    document = json.loads(Path(path).read_text())
    row = next(r for r in document["results"] if r["key"] == "flaky")
    row["status"], row["reason"] = "passed", "passed"
    document["counts"] = {"total": 3, "passed": 3, "failed": 0, "broken": 0}
    with pytest.raises(Refusal) as error:
        receipt_from_bytes(pretty_json(document), path)
    assert (error.value.code, error.value.field) == ("export.receipt", "flaky/status")


# --- publication: files and TestOps ----------------------------------------------------------------------


def trials_testops_contract() -> Contract:
    document = trials_document(flaky={"count": 3, "verdict": {"at-least": 2}}, steady={"count": 2})
    document["testops"] = {"endpoint": "http://127.0.0.1:1", "project-id": 12,
                           "plan": {"id": 340, "name": "Agent protocol evals"}}
    return contract_of(document)


def test_trials_are_published_to_testops_as_retries_of_their_verdict(tmp_path: Path) -> None:
    from evidence_support import SENTINEL, TestOpsCampaign
    from servers.testops_server import TestOpsServer

    contract = trials_testops_contract()
    with TestOpsServer(token=SENTINEL, visible_after_polls=1) as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        export = campaign.export([
            trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 2, failed=("answer",)),
            trial_cell(contract, "flaky", 3), trial_cell(contract, "steady", 1), trial_cell(contract, "steady", 2),
            cell(contract, "human")])
        assert export.exit_code == 0, export.summary
        upload = campaign.run("upload")
        assert upload.exit_code == 0, upload.summary
        assert upload.outputs["uploaded-count"] == str(3 + 1 + 2 + 1 + 1)
        verify = campaign.run("verify")
        assert (verify.exit_code, verify.outputs["verified-count"]) == (0, "3"), verify.summary
        launch = [r for r in server.results.values() if r["launchId"] == campaign.launch["id"]]
        hidden = server._retries(launch)
        flaky = [r for r in launch if r["fullName"] == "agents/flaky"]
        assert len(flaky) == 4 and [r["id"] in hidden for r in flaky] == [True, True, True, False]


def test_verify_refuses_a_launch_that_shows_a_trial_instead_of_the_verdict(tmp_path: Path) -> None:
    from evidence_support import SENTINEL, TestOpsCampaign
    from servers.testops_server import TestOpsServer

    contract = trials_testops_contract()
    with TestOpsServer(token=SENTINEL, visible_after_polls=0) as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        assert campaign.export([
            trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 2, failed=("answer",)),
            trial_cell(contract, "flaky", 3, failed=("answer",)), trial_cell(contract, "steady", 1),
            trial_cell(contract, "steady", 2), cell(contract, "human")]).exit_code == 1
        assert campaign.run("upload").exit_code == 0
        # A server that ranks results by another clock: trial 3 (failed) becomes the test's shown result.
        flaky = sorted((r for r in server.results.values() if r["fullName"] == "agents/flaky"), key=lambda r: r["id"])
        flaky[2]["start"] = flaky[3]["start"] + 1
        verify = campaign.run("verify")
        assert (verify.exit_code, verify.outputs["error-code"]) == (3, "verify.mismatch"), verify.summary
        failure = verify.failure()
        assert (failure["field"], failure["expected"], failure["actual"]) == ("flaky/hidden", True, False)


def test_the_files_backend_publishes_and_verifies_every_trial(tmp_path: Path) -> None:
    contract = contract_of(trials_document(flaky={"count": 2}))
    run, options = export_run(tmp_path, contract, [trial_cell(contract, "flaky", 1), trial_cell(contract, "flaky", 2),
                                                   cell(contract, "steady"), cell(contract, "human")])
    assert run.exit_code == 0, run.summary
    env = actions_env()
    base = {"contract": options["contract"], "results-dir": options["results-dir"], "state-dir": str(tmp_path / "state"),
            "backend": "files", "receipt-sha256": run.outputs["receipt-sha256"],
            "selection-path": options["selection-path"], "selection-sha256": options["selection-sha256"]}
    upload = run_mode("upload", tmp_path, base, env)
    assert upload.exit_code == 0, upload.summary
    verify = run_mode("verify", tmp_path, base, env)
    assert (verify.exit_code, verify.outputs["verified-count"]) == (0, "3"), verify.summary
    assert "trial results checked" in verify.summary
    # A published trial result whose status was changed after publication is found.
    published = tmp_path / "state" / "published" / "allure-results"
    trial = case_row(options, "flaky")["trials"][1]
    document = json.loads((published / trial["result-file"]).read_text())
    document["status"] = "failed"
    (published / trial["result-file"]).write_text(json.dumps(document))
    again = run_mode("verify", tmp_path, {**base, "state-dir": str(tmp_path / "state")}, env)
    assert again.outputs["error-code"] == "verify.mismatch", again.summary
