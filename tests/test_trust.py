"""Trust re-admitted where it is used: a caller that skips guard, or whose `if:` conditions let a run of one
operation reach another's jobs, is refused by each coordinator phase itself, with guard's own codes, before
any token is used.

Every phase runs in-process as its job would, against the GitHub REST test server (the run object, the
event file and the runner's variables, cross-checked) and, for the TestOps phases, the TestOps test server:
a refusal there must have sent TestOps nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
)
from helpers import PhaseRun, run_mode
from import_builders import contract_document as import_contract_document
from import_builders import dumps, intent_document
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from test_import_phase import CELLS
from test_selection_support import REPOSITORY, WORKFLOW, example_document, write_contract
from test_testops_phases import PLAN_NAME, PROJECT, TOKEN, contract_document
from testops_evidence.contract import load_contract
from testops_evidence.safeio import sha256_bytes

HEAD = "0123456789abcdef0123456789abcdef01234567"


class Runs:
    """The GitHub test server and the runs of one repository: each job of a run gets the runner's variables,
    an event file (with the dispatch inputs the run was started with) and a read token."""

    def __init__(self, github: GitHubServer, tmp_path: Path) -> None:
        self.github = github
        self.tmp_path = tmp_path
        self.next_id = 5_000_000_000

    def job_env(self, *, inputs: dict[str, Any] | None = None, **run: Any) -> dict[str, str]:
        self.next_id += 1
        values: dict[str, Any] = {"path": WORKFLOW, "head_sha": HEAD, "head_branch": "main", "run_number": 17}
        values.update(run)
        self.github.add_run(REPOSITORY, self.next_id, **values)
        event = self.tmp_path / f"event-{self.next_id}.json"
        event.write_text(json.dumps(self.github.event_payload(self.next_id, inputs=inputs)), encoding="utf-8")
        env = self.github.runner_env(self.next_id, event_path=str(event))
        env.update(GITHUB_TOKEN=self.github.token, GITHUB_WORKSPACE=str(self.tmp_path))
        return env


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    with GitHubServer() as github:
        github.add_repo(REPOSITORY)
        yield Runs(github, tmp_path)


@pytest.fixture
def testops() -> Iterator[TestOpsServer]:
    with TestOpsServer(token=TOKEN) as server:
        server.add_project(PROJECT)
        server.add_case(PROJECT, "Get task context", "agents/protocol/get-task-context", id=194)
        server.add_case(PROJECT, "Company credential setup with human approval",
                        "agents/protocol/company-credential-approval", id=195)
        job = server.add_job(PROJECT, "agent-evals", external_id="acme/agents_agent-evals.yml")
        server.add_plan(PROJECT, PLAN_NAME, [194, 195], id=340, job_ids=[job["id"]])
        yield server


def refused(run: PhaseRun, code: str, field: str | None = None) -> dict[str, Any]:
    assert (run.exit_code, run.outputs.get("error-code")) == (3, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["code"] == code
    if field is not None:
        assert failure["field"] == field
    return failure


# The runs the example policy refuses (main only, agent-evals.yml, workflow_dispatch, first attempt only,
# actors 1234567 and 7654321), each as GitHub's REST API describes it, with guard's code for it.
REFUSED_RUNS = [
    pytest.param({"head_branch": "feature"}, "guard.branch", "workflow-ref", id="another-branch"),
    pytest.param({"path": ".github/workflows/scratch.yml"}, "guard.workflow", "workflow-path", id="another-workflow"),
    pytest.param({"event": "push"}, "guard.event", "event", id="another-event"),
    pytest.param({"run_attempt": 2}, "guard.run_attempt", "run-attempt", id="a-re-run"),
    pytest.param({"actor_id": 99}, "guard.actor", "actor-id", id="another-actor"),
    pytest.param({"triggering_actor_id": 99, "triggering_actor_login": "mallory"}, "guard.actor",
                 "triggering-actor-id", id="re-run-by-another-actor"),
]


def guarded_testops_document(testops: TestOpsServer) -> dict[str, Any]:
    """The TestOps phases' contract with the example's policy (actor allow-list included)."""
    document = contract_document(testops.url, plan_id=340)
    document["trust"] = example_document()["trust"]
    return document


def run_testops_phase(mode: str, tmp_path: Path, testops: TestOpsServer, env: dict[str, str],
                      state: str = "state", **options: Any) -> PhaseRun:
    contract = write_contract(tmp_path, guarded_testops_document(testops), name="testops-contract.json")
    return run_mode(mode, tmp_path, {"contract": str(contract), "state-dir": str(tmp_path / state), **options},
                    {**env, "ALLURE_TOKEN": TOKEN})


def run_select(tmp_path: Path, env: dict[str, str]) -> PhaseRun:
    document = example_document()
    document.pop("testops", None)
    contract = write_contract(tmp_path, document, name="files-contract.json")
    return run_mode("select", tmp_path, {"contract": str(contract),
                                         "selection-path": str(tmp_path / "out" / "selection.json")}, env)


# --- the phases that start from the run: re-admitted over REST -------------------------------------------------


@pytest.mark.parametrize("run,code,field", REFUSED_RUNS)
@pytest.mark.parametrize("mode", ["bootstrap", "launch"])
def test_a_testops_phase_without_guard_refuses_a_run_the_policy_refuses_before_testops_is_asked(
        tmp_path: Path, runs: Runs, testops: TestOpsServer, mode: str, run: dict[str, Any], code: str,
        field: str) -> None:
    result = run_testops_phase(mode, tmp_path, testops, runs.job_env(**run))
    failure = refused(result, code, field)
    assert f"{mode} re-admits run" in failure["message"]
    assert testops.requests() == []  # not even a read with the TestOps token


@pytest.mark.parametrize("run,code,field", REFUSED_RUNS)
def test_select_without_guard_refuses_a_run_the_policy_refuses(tmp_path: Path, runs: Runs, run: dict[str, Any],
                                                               code: str, field: str) -> None:
    result = refused(run_select(tmp_path, runs.job_env(**run)), code, field)
    assert result["mode"] == "select"
    assert not (tmp_path / "out" / "selection.json").exists()


def test_the_admitted_run_passes_every_phase_that_re_admits_it(tmp_path: Path, runs: Runs,
                                                               testops: TestOpsServer) -> None:
    env = runs.job_env()
    assert run_select(tmp_path, env).exit_code == 0
    launched = run_testops_phase("launch", tmp_path, testops, env)
    assert launched.exit_code == 0, launched.summary
    assert "re-admitted against the trust policy" in launched.log


def test_reconcile_refuses_to_resolve_a_mutation_from_a_run_the_policy_refuses(
        tmp_path: Path, runs: Runs, testops: TestOpsServer) -> None:
    testops.fail("POST", "/testplan/340/run", "drop")  # TestOps commits the launch, then drops the connection
    failed = run_testops_phase("launch", tmp_path, testops, runs.job_env())
    assert failed.outputs["error-code"] == "testops.uncertain"
    testops.reset_log()
    # The state directory travels to a job of a run on another branch, which tries to resolve (and re-send) it.
    result = run_testops_phase("reconcile", tmp_path, testops, runs.job_env(head_branch="feature"),
                               resume="true")
    refused(result, "guard.branch", "workflow-ref")
    assert testops.requests() == []


def test_an_environment_that_claims_another_run_is_a_mismatch(tmp_path: Path, runs: Runs,
                                                              testops: TestOpsServer) -> None:
    # A step that runs the CLI with the admitted workflow's variables, in a run of another workflow file: the
    # REST run object the variables name is the one the phase holds the policy against, and they disagree.
    env = runs.job_env(path=".github/workflows/scratch.yml")
    env["GITHUB_WORKFLOW_REF"] = f"{REPOSITORY}/{WORKFLOW}@refs/heads/main"
    refused(run_testops_phase("bootstrap", tmp_path, testops, env), "guard.run_mismatch", "workflow-path")
    assert testops.requests() == []


def test_collect_cells_without_guard_refuses_a_run_the_policy_refuses(tmp_path: Path, runs: Runs) -> None:
    contract = write_contract(tmp_path, example_document(), name="contract.json")
    result = run_mode("collect-cells", tmp_path, {"contract": str(contract), "artifact-prefix": "testops-evidence",
                                                  "selection-path": str(tmp_path / "selection.json")},
                      runs.job_env(run_attempt=2))
    refused(result, "guard.run_attempt", "run-attempt")
    assert runs.github.requests_to("artifacts") == []


def test_import_without_guard_refuses_a_run_the_policy_refuses(tmp_path: Path, runs: Runs) -> None:
    contract = tmp_path / "import-contract.json"
    contract.write_bytes(dumps(import_contract_document()))
    intent = tmp_path / "intent.json"
    intent.write_bytes(dumps(intent_document(CELLS)))
    result = run_mode("import", tmp_path, {"contract": str(contract), "source-run-id": "4242", "intent": str(intent),
                                           "ledger": str(tmp_path / "ledger.json")},
                      runs.job_env(head_branch="feature"))
    refused(result, "guard.branch")
    assert not (tmp_path / "ledger.json").exists()


# --- the operation the run was dispatched for ------------------------------------------------------------------


@pytest.mark.parametrize("mode,dispatched", [("select", "bootstrap"), ("select", "import"), ("launch", "bootstrap"),
                                             ("bootstrap", "evaluate"), ("collect-cells", "launch")])
def test_a_run_dispatched_for_one_operation_cannot_run_another(tmp_path: Path, runs: Runs, testops: TestOpsServer,
                                                               mode: str, dispatched: str) -> None:
    env = runs.job_env(inputs={"operation": dispatched})
    if mode == "select":
        result = run_select(tmp_path, env)
    elif mode == "collect-cells":
        contract = write_contract(tmp_path, example_document(), name="contract.json")
        result = run_mode(mode, tmp_path, {"contract": str(contract), "artifact-prefix": "testops-evidence"}, env)
    else:
        result = run_testops_phase(mode, tmp_path, testops, env)
    failure = refused(result, "guard.operation", "operation")
    assert failure["expected"] != dispatched and failure["actual"] == dispatched
    assert testops.requests() == []


def test_a_bootstrap_run_bootstraps_and_an_evaluation_evaluates(tmp_path: Path, runs: Runs,
                                                                testops: TestOpsServer) -> None:
    bootstrap = run_testops_phase("bootstrap", tmp_path, testops,
                                  runs.job_env(inputs={"operation": "bootstrap"}), **{"dry-run": "true"})
    assert bootstrap.exit_code == 0, bootstrap.summary
    assert run_select(tmp_path, runs.job_env(inputs={"operation": "evaluate"})).exit_code == 0


def test_an_operation_that_names_nothing_is_a_usage_error_in_every_phase(tmp_path: Path, runs: Runs) -> None:
    result = run_select(tmp_path, runs.job_env(inputs={"operation": "publish-anyway"}))
    assert (result.exit_code, result.outputs["error-code"]) == (2, "input.operation")


# --- the phases that start from select's selection: the run it recorded ---------------------------------------


def exported(tmp_path: Path, env: dict[str, str], contract_document: dict[str, Any]) -> dict[str, str]:
    """A files-backend campaign exported from a selection that records the run ``env`` describes, as a
    step that wrote it (instead of an admitted select) would: the options upload and verify receive."""
    contract_path = tmp_path / "contract.json"
    contract_path.write_text(json.dumps(contract_document), encoding="utf-8")
    contract = load_contract(contract_path)
    selection, digest = make_selection(tmp_path, contract, env)
    write_cells(tmp_path / "cells", [cell(contract, key) for key in (c.key for c in contract.cases)], digest)
    options = {"contract": str(contract_path), "results-dir": str(tmp_path / "allure-results"),
               "state-dir": str(tmp_path / "state"), "backend": "files", "selection-path": str(selection),
               "selection-sha256": digest}
    export = run_mode("export", tmp_path, {**options, "cell-results": str(tmp_path / "cells")}, env,
                      new_uuid=uuid_factory())
    assert export.exit_code == 0, export.summary
    return {**options, "receipt-sha256": export.outputs["receipt-sha256"]}


def small_document(**trust: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(small_contract().document))
    document["trust"].update(trust)
    return document


@pytest.mark.parametrize("mode", ["upload", "verify"])
def test_a_selection_of_a_run_on_another_branch_publishes_nothing(tmp_path: Path, mode: str) -> None:
    env = actions_env(GITHUB_WORKFLOW_REF="acme/agents/.github/workflows/agent-evals.yml@refs/heads/feature",
                      GITHUB_REF="refs/heads/feature", GITHUB_REF_NAME="feature")
    options = exported(tmp_path, env, small_document())
    result = run_mode(mode, tmp_path, options, env)
    failure = refused(result, "guard.branch", "workflow-ref")
    assert "the run select recorded" in failure["message"]
    assert not (tmp_path / "state" / "publication.json").exists()


@pytest.mark.parametrize("mode", ["upload", "verify"])
def test_a_selection_that_never_read_the_actors_cannot_satisfy_an_allow_list(tmp_path: Path, mode: str) -> None:
    # A selection written from the runner's variables alone (no REST): its triggering actor is unknown, and an
    # unknown actor is not an allowed one.
    env = actions_env()
    options = exported(tmp_path, env, small_document(actors=[1234567]))
    refused(run_mode(mode, tmp_path, options, env), "guard.actor", "triggering-actor-id")


def test_pages_refuses_a_receipt_whose_run_the_policy_refuses(tmp_path: Path) -> None:
    # A publication whose receipt (and the digest that travels with it) a step rewrote to name a branch the
    # policy does not admit: pages holds the receipt's run against the policy before the branch is written.
    env = actions_env()
    options = exported(tmp_path, env, small_document())
    publication = tmp_path / "publication"
    (publication / "allure-results").mkdir(parents=True)
    receipt = json.loads((tmp_path / "allure-results-receipt.json").read_text())  # where export wrote it
    receipt["context"]["workflow-ref"] = "refs/heads/feature"
    data = json.dumps(receipt).encode()
    (publication / "allure-results-receipt.json").write_bytes(data)
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    result = run_mode("pages", tmp_path, {"contract": options["contract"], "state-dir": str(tmp_path / "pages-state"),
                                          "pages-dir": str(site_dir), "publication-dir": str(publication),
                                          "receipt-sha256": sha256_bytes(data)}, env)
    refused(result, "guard.branch", "workflow-ref")
    assert list(site_dir.iterdir()) == []
