"""``select`` on the files backend, end to end in-process: real GITHUB_OUTPUT / step-summary files, the
GitHub REST test server for the run context, and ``verify-selection`` in a worker environment."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import PhaseRun, assert_golden, run_mode
from servers.github_server import GitHubServer
from test_selection_support import (
    EXAMPLE_CONTRACT,
    EXAMPLE_PLAN,
    HEAD_SHA,
    RUN_ID,
    big_document,
    example_document,
    github_with_run,
    plan_json,
    select_job_env,
    write_contract,
)
from testops_evidence.campaign.matrix import JOB_OUTPUT_LIMIT, MAX_MATRIX_JOBS, SELECT_OUTPUT_BUDGET, measure
from testops_evidence.safeio import sha256_bytes

GOLDEN = Path(__file__).resolve().parent / "golden" / "select"


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    with github_with_run() as server:
        yield server


@pytest.fixture
def env(github: GitHubServer, tmp_path: Path) -> dict[str, str]:
    return select_job_env(github, tmp_path)


def files_contract(tmp_path: Path, document: dict[str, Any] | None = None) -> Path:
    doc = document if document is not None else example_document()
    doc.pop("testops", None)
    return write_contract(tmp_path, doc)


def select(tmp_path: Path, env: dict[str, str], contract: Path, **options: Any) -> PhaseRun:
    opts = {"contract": str(contract), "selection-path": str(tmp_path / "out" / "selection.json"), **options}
    return run_mode("select", tmp_path, opts, env)


def worker(tmp_path: Path, env: dict[str, str], contract: Path, digest: str, **extra_env: str) -> PhaseRun:
    """verify-selection as a worker job runs it: same run, no token variables, its own state dir."""
    worker_env = {k: v for k, v in env.items() if k not in ("GITHUB_TOKEN",)}
    worker_env.update(extra_env)
    opts = {"contract": str(contract), "selection-path": str(tmp_path / "out" / "selection.json"),
            "selection-sha256": digest, "state-dir": str(tmp_path / "worker-state")}
    return run_mode("verify-selection", tmp_path, opts, worker_env)


def matrix(run: PhaseRun, lane: str) -> list[dict[str, Any]]:
    include: list[dict[str, Any]] = json.loads(run.outputs[f"{lane}-matrix"])["include"]
    return include


# --- the whole contract ----------------------------------------------------------------------------------


def test_the_whole_contract_is_selected_written_once_and_verified_by_a_worker(tmp_path: Path, env: dict[str, str],
                                                                              github: GitHubServer) -> None:
    contract = files_contract(tmp_path)
    github.clear_log()
    run = select(tmp_path, env, contract)
    assert run.exit_code == 0, run.summary
    assert len(github.requests_to("run")) == 1  # the context came from the REST run object, not env alone
    out = run.outputs
    path = Path(out["selection-path"])
    assert path == tmp_path / "out" / "selection.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert out["selection-sha256"] == sha256_bytes(path.read_bytes())
    assert (out["selected-count"], out["full-plan"], out["job-run-id"], out["launch-id"]) == ("12", "true", "", "")
    assert (out["native-count"], out["native-max-parallel"], out["external-count"], out["external-max-parallel"]) \
        == ("9", "4", "3", "1")
    assert [row["key"] for row in matrix(run, "external")] == ["company-credential-approval", "hire-agent-approval",
                                                                "external-webhook-roundtrip"]
    document = json.loads(path.read_bytes())
    assert (document["source"], document["backend"], document["testops"]) == ("contract", "files", None)
    assert document["context"]["run-id"] == RUN_ID and document["context"]["head-sha"] == HEAD_SHA
    receipt = json.loads((tmp_path / "state" / "select.json").read_text())
    assert receipt["selection-sha256"] == out["selection-sha256"] and len(receipt["keys"]) == 12
    assert "the whole contract is selected" in run.summary

    verified = worker(tmp_path, env, contract, out["selection-sha256"])
    assert verified.exit_code == 0, verified.summary
    assert verified.outputs["selected-count"] == "12"


def test_a_second_select_into_the_same_path_is_refused_and_writes_nothing(tmp_path: Path,
                                                                          env: dict[str, str]) -> None:
    contract = files_contract(tmp_path)
    assert select(tmp_path, env, contract).exit_code == 0
    before = (tmp_path / "out" / "selection.json").read_bytes()
    again = select(tmp_path, env, contract, **{"state-dir": str(tmp_path / "state2")})
    assert (again.exit_code, again.outputs["error-code"]) == (3, "io.exists")
    assert (tmp_path / "out" / "selection.json").read_bytes() == before
    assert not (tmp_path / "state2" / "select.json").exists()


def test_example_outputs_and_summary_match_the_golden_files(tmp_path: Path, env: dict[str, str]) -> None:
    run = select(tmp_path, env, files_contract(tmp_path), **{"standing-plan": str(EXAMPLE_PLAN)})
    assert run.exit_code == 0
    matrices = {name: json.loads(run.outputs[name]) for name in ("native-matrix", "external-matrix")}
    assert matrices == json.loads((GOLDEN / "example-matrices.json").read_text())
    summary = run.summary.replace(run.outputs["selection-sha256"], "<sha256>")
    summary = summary.replace(str(tmp_path), "<tmp>").replace(str(EXAMPLE_PLAN), "<examples>/testplan.json")
    summary = re.sub(r"\d{1,3}(,\d{3})* of 983,616 bytes", "<size> of 983,616 bytes", summary)
    summary = re.sub(r"largest: [^|]*\|", "largest: <sizes> |", summary)
    assert_golden(GOLDEN / "example-summary.md", summary)


# --- standing plan and cases ---------------------------------------------------------------------------


def test_a_partial_standing_plan_narrows_explicitly(tmp_path: Path, env: dict[str, str]) -> None:
    plan = tmp_path / "testplan.json"
    plan.write_text(plan_json([{"id": "205", "selector": "agents/protocol/external-webhook-roundtrip"},
                               {"id": "194", "selector": "agents/protocol/get-task-context"}]))
    run = select(tmp_path, env, files_contract(tmp_path), **{"standing-plan": str(plan)})
    assert run.exit_code == 0
    assert (run.outputs["selected-count"], run.outputs["full-plan"]) == ("2", "false")
    assert (run.outputs["native-count"], run.outputs["external-count"]) == ("1", "1")
    document = json.loads(Path(run.outputs["selection-path"]).read_bytes())
    assert [row["key"] for row in document["cases"]] == ["external-webhook-roundtrip", "get-task-context"]
    assert "**not** the full plan: 10 contract case(s) left out" in run.summary
    assert "**Not selected (10):**" in run.summary


@pytest.mark.parametrize(
    ("row", "code", "exit_code"),
    [
        ({"id": "194", "selector": "agents/protocol/somebody-else"}, "selection.foreign_case", 3),
        ({"id": "999", "selector": "agents/protocol/get-task-context"}, "selection.foreign_case", 3),
        ({"id": "194"}, "selection.foreign_case", 3),
    ],
)
def test_foreign_standing_plan_rows_are_refused_in_both_directions(tmp_path: Path, env: dict[str, str],
                                                                   row: dict[str, Any], code: str,
                                                                   exit_code: int) -> None:
    plan = tmp_path / "testplan.json"
    plan.write_text(plan_json([{"id": "196", "selector": "agents/protocol/list-open-issues"}, row]))
    run = select(tmp_path, env, files_contract(tmp_path), **{"standing-plan": str(plan)})
    assert (run.exit_code, run.outputs["error-code"]) == (exit_code, code)
    failure = run.failure()
    assert failure is not None and failure["field"] == "standing-plan/1"
    assert not (tmp_path / "out" / "selection.json").exists()


def test_standing_plan_duplicates_and_shape_errors(tmp_path: Path, env: dict[str, str]) -> None:
    contract = files_contract(tmp_path)
    plan = tmp_path / "testplan.json"
    row = {"id": "194", "selector": "agents/protocol/get-task-context"}
    plan.write_text(plan_json([row, row]))
    run = select(tmp_path, env, contract, **{"standing-plan": str(plan)})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.duplicate_case")
    plan.write_text('{"version": "2.0", "tests": []}')
    run = select(tmp_path, env, contract, **{"standing-plan": str(plan)})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "selection.standing_plan")
    plan.write_text(plan_json([]))
    run = select(tmp_path, env, contract, **{"standing-plan": str(plan)})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.empty")


def test_cases_are_selected_in_contract_order(tmp_path: Path, env: dict[str, str]) -> None:
    run = select(tmp_path, env, files_contract(tmp_path), cases="hire-agent-approval, budget-stop get-task-context")
    assert run.exit_code == 0
    document = json.loads(Path(run.outputs["selection-path"]).read_bytes())
    assert [row["key"] for row in document["cases"]] == ["get-task-context", "budget-stop", "hire-agent-approval"]
    assert document["source"] == "cases" and run.outputs["full-plan"] == "false"
    assert "`cases` chooses from the whole contract" in run.summary


@pytest.mark.parametrize(
    ("cases", "code", "exit_code"),
    [
        ("budget-stop,no-such-case", "contract.unknown_case", 2),
        ("budget-stop,budget-stop", "selection.duplicate_case", 3),
        (" , ", "input.cases", 2),
    ],
)
def test_bad_cases_inputs(tmp_path: Path, env: dict[str, str], cases: str, code: str, exit_code: int) -> None:
    run = select(tmp_path, env, files_contract(tmp_path), cases=cases)
    assert (run.exit_code, run.outputs["error-code"]) == (exit_code, code)


def test_cases_narrow_a_standing_plan_but_cannot_add_to_it(tmp_path: Path, env: dict[str, str]) -> None:
    plan = tmp_path / "testplan.json"
    plan.write_text(plan_json([{"id": "194", "selector": "agents/protocol/get-task-context"},
                               {"id": "201", "selector": "agents/protocol/budget-stop"}]))
    contract = files_contract(tmp_path)
    run = select(tmp_path, env, contract, **{"standing-plan": str(plan), "cases": "budget-stop"})
    assert run.exit_code == 0 and run.outputs["selected-count"] == "1"
    assert "explicitly narrows these 2 to 1" in run.summary
    run = select(tmp_path, env, contract, **{"standing-plan": str(plan), "cases": "checkout-task",
                                             "selection-path": str(tmp_path / "other.json")})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.not_planned")


def test_a_testops_job_run_on_the_files_backend_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    contract = files_contract(tmp_path)
    run = select(tmp_path, env, contract, **{"job-run-id": "77"})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "selection.mode")
    run = run_mode("select", tmp_path, {"contract": str(contract), "selection-path": str(tmp_path / "s.json")},
                   {**env, "ALLURE_JOB_RUN_ID": "77"})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "selection.mode")
    empty = run_mode("select", tmp_path, {"contract": str(contract), "selection-path": str(tmp_path / "e.json")},
                     {**env, "ALLURE_JOB_RUN_ID": ""})  # an empty dispatch input is "not launched by TestOps"
    assert empty.exit_code == 0


# --- catalog filter ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "catalog",
    [
        {"schema": "my-harness/v1", "cases": {k: {"prompt": k.upper()} for k in ("budget-stop", "get-task-context",
                                                                                "unknown-elsewhere")}},
        {"schema": "my-harness/v1", "cases": [{"key": k, "n": i} for i, k in
                                              enumerate(("unknown-elsewhere", "budget-stop", "get-task-context"))]},
        [{"key": k} for k in ("budget-stop", "unknown-elsewhere", "get-task-context")],
    ],
)
def test_the_catalog_copy_keeps_only_selected_cases_and_its_shape(tmp_path: Path, env: dict[str, str],
                                                                   catalog: Any) -> None:
    source = tmp_path / "catalog.json"
    source.write_text(json.dumps(catalog))
    original = source.read_bytes()
    run = select(tmp_path, env, files_contract(tmp_path), cases="budget-stop,get-task-context",
                 catalog=str(source))
    assert run.exit_code == 0, run.summary
    assert source.read_bytes() == original  # never rewritten in place
    copy_path = tmp_path / "out" / "selection.catalog.json"
    filtered = json.loads(copy_path.read_text())
    entries = filtered if isinstance(filtered, list) else filtered["cases"]
    if isinstance(entries, dict):  # a mapping is written canonically (sorted keys)
        assert list(entries) == ["budget-stop", "get-task-context"]
    else:  # a list keeps the selection's order
        assert [entry["key"] for entry in entries] == ["get-task-context", "budget-stop"]
    if isinstance(filtered, dict):
        assert filtered["schema"] == "my-harness/v1"
    receipt = json.loads((tmp_path / "state" / "select.json").read_text())
    assert receipt["catalog"] == {"path": str(copy_path), "sha256": sha256_bytes(copy_path.read_bytes())}


def test_a_catalog_without_a_selected_case_refuses_before_anything_is_written(tmp_path: Path,
                                                                              env: dict[str, str]) -> None:
    source = tmp_path / "catalog.json"
    source.write_text(json.dumps({"cases": {"budget-stop": {}}}))
    run = select(tmp_path, env, files_contract(tmp_path), cases="budget-stop,get-task-context", catalog=str(source))
    assert (run.exit_code, run.outputs["error-code"]) == (2, "selection.catalog")
    assert run.failure() is not None and run.failure()["actual"] == ["get-task-context"]  # type: ignore[index]
    assert not (tmp_path / "out" / "selection.json").exists()
    assert not (tmp_path / "out" / "selection.catalog.json").exists()


# --- scale ---------------------------------------------------------------------------------------------


def test_ten_thousand_cases_select_into_matrices_within_githubs_limits(tmp_path: Path, env: dict[str, str]) -> None:
    contract = write_contract(tmp_path, big_document(10_000, external_every=4))
    run = select(tmp_path, env, contract)
    assert run.exit_code == 0, run.summary[-2000:]
    assert run.outputs["selected-count"] == "10000"
    keys: list[str] = []
    for lane, cases in (("native", 7500), ("external", 2500)):
        rows = matrix(run, lane)
        assert len(rows) <= MAX_MATRIX_JOBS and int(run.outputs[f"{lane}-count"]) == len(rows)
        assert sum(len(row["keys"]) for row in rows) == cases
        assert all(row["shards"] == len(rows) for row in rows)
        keys += [key for row in rows for key in row["keys"]]
    assert sorted(keys) == [f"case-{i:05d}" for i in range(10_000)]
    sizes = measure(run.outputs)
    assert all(size.budgeted < JOB_OUTPUT_LIMIT for size in sizes)
    assert sum(size.budgeted for size in sizes if size.name != "error-code") <= SELECT_OUTPUT_BUDGET
    written = (Path(run.env["GITHUB_OUTPUT"])).read_bytes()
    assert len(written.decode("utf-8").encode("utf-16-le")) < JOB_OUTPUT_LIMIT
    verified = worker(tmp_path, env, contract, run.outputs["selection-sha256"])
    assert (verified.exit_code, verified.outputs["selected-count"]) == (0, "10000")


def test_outputs_over_the_budget_are_refused_with_a_hint_and_nothing_is_written(tmp_path: Path,
                                                                                env: dict[str, str]) -> None:
    document = big_document(6000, external_every=10**9)
    for index, case in enumerate(document["cases"]):
        case["key"] = f"{index:05d}-" + "k" * 94  # 100-character keys: the shards' key lists outgrow 1 MB
    contract = write_contract(tmp_path, document)
    run = select(tmp_path, env, contract)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.matrix_too_large")
    assert "Split the campaign into several selections of the same plan with `cases:`" in run.summary
    assert not (tmp_path / "out" / "selection.json").exists()
    assert not (tmp_path / "state" / "select.json").exists()
    assert "native-matrix" not in run.outputs


def test_the_example_contract_file_itself_selects(tmp_path: Path, env: dict[str, str]) -> None:
    env = dict(env)
    run = run_mode("select", tmp_path, {"contract": str(EXAMPLE_CONTRACT), "backend": "files",
                                        "selection-path": str(tmp_path / "s.json")}, env)
    assert run.exit_code == 0 and run.outputs["selected-count"] == "12"


def test_shards_longer_than_a_hosted_job_may_run_are_flagged(tmp_path: Path, env: dict[str, str]) -> None:
    document = big_document(300, external_every=10**9)
    for case in document["cases"]:
        case["timeout-minutes"] = 200  # two cases per shard: 400 minutes, over GitHub-hosted's 360
    run = select(tmp_path, env, write_contract(tmp_path, document))
    assert run.exit_code == 0
    assert {row["timeout-minutes"] for row in matrix(run, "native")} == {400}
    assert "> [!WARNING]\n> 150 shard(s) of this lane add up to more than 360 minutes" in run.summary


def test_an_existing_catalog_copy_is_refused_before_the_selection_is_written(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    source = tmp_path / "catalog.json"
    source.write_text(json.dumps([{"key": "budget-stop"}]))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "selection.catalog.json").write_text("{}")
    run = select(tmp_path, env, files_contract(tmp_path), cases="budget-stop", catalog=str(source))
    assert (run.exit_code, run.outputs["error-code"]) == (3, "io.exists")
    assert not (tmp_path / "out" / "selection.json").exists()


def test_the_testops_backend_without_a_testops_section_is_not_configured(tmp_path: Path,
                                                                         env: dict[str, str]) -> None:
    run = select(tmp_path, env, files_contract(tmp_path), backend="testops", **{"job-run-id": "5"})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "testops.not_configured")


def test_local_under_act_selects_for_the_files_backend_and_a_worker_without_local_refuses(
        tmp_path: Path, env: dict[str, str]) -> None:
    import subprocess

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], cwd=checkout, check=True)
    document = example_document()
    assert document.get("testops")  # the example contract names a TestOps server
    contract = write_contract(tmp_path, document)
    act = {"GITHUB_ACTIONS": "true", "ACT": "true", "GITHUB_WORKSPACE": str(checkout),
           "GITHUB_REPOSITORY": "acme/agents", "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1"}
    run = run_mode("select", tmp_path, {"contract": str(contract), "local": "true",
                                        "selection-path": str(tmp_path / "selection.json")}, act)
    assert run.exit_code == 0, run.summary + run.log
    selection = json.loads((tmp_path / "selection.json").read_text())
    # A contract that names TestOps still selects for the files backend: local evidence never goes there.
    assert selection["backend"] == "files" and selection["context"]["local"] is True
    digest = run.outputs["selection-sha256"]
    local_worker = run_mode("verify-selection", tmp_path, {"contract": str(contract), "local": "true",
                                                          "selection-path": str(tmp_path / "selection.json"),
                                                          "selection-sha256": digest}, act)
    assert local_worker.exit_code == 0, local_worker.summary
    # A worker that is not local cannot take a local selection for a run's (and the reverse is refused too).
    mixed = run_mode("verify-selection", tmp_path, {"contract": str(contract),
                                                   "selection-path": str(tmp_path / "selection.json"),
                                                   "selection-sha256": digest}, env)
    assert (mixed.exit_code, mixed.outputs["error-code"]) == (3, "selection.context")
    # Issue 27: act cannot evaluate the template's max-parallel expression and runs a lane's jobs one at a time;
    # the summary says so under act (and only there) instead of letting the contract's limit pass silently.
    max_parallel = document["lanes"]["native"]["max-parallel"]
    assert max_parallel > 1
    assert "Under act the contract's `max-parallel` does not apply" in run.summary
    assert f"native: {run.outputs['native-count']} jobs, `max-parallel` {max_parallel}" in run.summary
    on_github = run_mode("select", tmp_path, {"contract": str(contract), "backend": "files",
                                             "selection-path": str(tmp_path / "github-selection.json"),
                                             "state-dir": str(tmp_path / "github-state")}, env)
    assert on_github.exit_code == 0, on_github.summary
    assert "max-parallel` does not apply" not in on_github.summary


def test_select_fans_out_one_job_per_trial_and_the_worker_verifies_the_selection(tmp_path: Path,
                                                                                 env: dict[str, str]) -> None:
    """Issue 16: a case measured three times is three worker jobs bound to their ordinals."""
    document = example_document()
    document["cases"][0]["trials"] = {"count": 3, "verdict": {"at-least": 2}}
    contract = files_contract(tmp_path, document)
    run = select(tmp_path, env, contract)
    assert run.exit_code == 0, run.summary
    native = matrix(run, "native")
    key = document["cases"][0]["key"]
    trial_rows = [row for row in native if row["keys"] == [key]]
    assert [(row["job"], row["trial"], row["trials"]) for row in trial_rows] == [
        (f"native-{key}-t{n}", n, [[n]]) for n in (1, 2, 3)]
    assert run.outputs["native-count"] == str(len(native)) == str(9 + 2)
    assert "trials in all" in run.summary and "at-least 2" in run.summary
    selection = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert selection["cases"][0]["trials"] == {"count": 3, "verdict": {"at-least": 2}, "jobs": "per-trial"}
    assert worker(tmp_path, env, contract, run.outputs["selection-sha256"]).exit_code == 0
