"""export: cell results -> Allure results, evidence attachments, executor/environment, receipt."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    HEAD_SHA,
    SENTINEL,
    actions_env,
    bound_to,
    cell,
    check_golden,
    make_selection,
    normalise,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, PhaseRun, run_mode
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.publication.allure import derive_history_id, derive_test_case_id
from testops_evidence.safeio import canonical_json, pretty_json

CONTRACT = small_contract()


def prepare(tmp_path: Path, cells: list[dict[str, Any]] | None = None, contract=CONTRACT,
            env: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    env = env or actions_env()
    contract_path = write_contract(contract, tmp_path / "contract.json")
    selection, digest = make_selection(tmp_path, contract, env)
    if cells is None:
        cells = [
            cell(contract, "get-task-context"),
            cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
        ]
    write_cells(tmp_path / "cell-results", cells, digest)
    options = {
        "contract": str(contract_path),
        "selection-path": str(selection),
        "selection-sha256": digest,
        "cell-results": str(tmp_path / "cell-results"),
        "results-dir": str(tmp_path / "out" / "allure-results"),
    }
    return options, env


def export(tmp_path: Path, options: dict[str, str], env: dict[str, str]) -> PhaseRun:
    clock = FakeClock(1_796_119_500.0)
    return run_mode("export", tmp_path, options, env, new_uuid=uuid_factory(), clock=clock.time,
                    monotonic=clock.monotonic, sleep=clock.sleep)


def results_by_key(results_dir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in results_dir.glob("*-result.json"):
        document = json.loads(path.read_text())
        found[document["fullName"].rsplit("/", 1)[-1]] = document
    return found


def test_export_writes_one_result_per_selected_case_with_status_and_receipt(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.log + run.summary
    results_dir = Path(options["results-dir"])
    receipt_sha256 = hashlib.sha256(Path(f"{results_dir}-receipt.json").read_bytes()).hexdigest()
    assert run.outputs == {
        "results-dir": str(results_dir), "receipt-path": f"{results_dir}-receipt.json",
        "receipt-sha256": receipt_sha256,
        "passed-count": "1", "failed-count": "1", "broken-count": "1", "all-passed": "false",
        "cost-nanodollars": "", "cost-coverage": "unavailable", "comparison": "", "regressions": "[]", "comparison-difference": "",
        "pass-rate": "0.5", "pass-rate-ci": "[0.0,1.0]",  # passed 1/1, failed 0/1, 2 broken: not measured
    }
    results = results_by_key(results_dir)
    assert {k: v["status"] for k, v in results.items()} == {
        "get-task-context": "passed", "budget-stop": "failed", "company-credential-approval": "broken"}
    assert results["get-task-context"]["statusDetails"] == {}  # required by allure-js-commons' model (A1)
    assert results["budget-stop"]["statusDetails"]["message"].startswith("Behaviour failure: checks failed: spend")
    assert results["company-credential-approval"]["statusDetails"]["message"].startswith("Not recorded")
    names = sorted(p.name for p in results_dir.iterdir())
    assert len(names) == 3 * 2 + 2 and "executor.json" in names and "environment.properties" in names

    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    assert receipt.counts == {"total": 3, "passed": 1, "failed": 1, "broken": 1}
    assert receipt.document["selection-sha256"] == options["selection-sha256"]
    assert [row["key"] for row in receipt.results] == [c.key for c in CONTRACT.cases]
    assert stat.S_IMODE(results_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(receipt.path).stat().st_mode) == 0o600
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in results_dir.iterdir())
    assert not [p for p in results_dir.parent.iterdir() if p.name.startswith(".")]  # no temp dir left
    assert "❌ Exported 3 results" in run.summary and "💥" in run.summary and "✅" in run.summary


def test_result_identity_labels_links_and_steps(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    export(tmp_path, options, env)
    result = results_by_key(Path(options["results-dir"]))["get-task-context"]
    assert result["testCaseId"] == derive_test_case_id("agent-protocol", "get-task-context")
    assert result["historyId"] == derive_history_id("agent-protocol", "get-task-context", "sonnet-default")
    assert result["testCaseId"] != result["historyId"] and "/" not in result["testCaseId"]
    labels = {(label["name"], label["value"]) for label in result["labels"]}
    assert {("ALLURE_ID", "194"), ("AS_ID", "194"), ("framework", "testops-evidence"),
            ("parentSuite", "agent-protocol"), ("suite", "native lane")} <= labels
    assert result["start"] == 1_796_119_320_000 and result["stop"] == 1_796_119_512_000
    assert {p["name"]: p["value"] for p in result["parameters"]}["source sha"] == HEAD_SHA
    assert [link["url"] for link in result["links"]] == [
        f"https://github.com/acme/agents/actions/runs/{env['GITHUB_RUN_ID']}",
        f"https://github.com/acme/agents/commit/{HEAD_SHA}"]
    assert [s["name"] for s in result["steps"]] == ["tool-called (behavior)", "answer-grounded (behavior)",
                                                    "cleanup (infrastructure)"]
    attachment = Path(options["results-dir"]) / result["attachments"][0]["source"]
    evidence = json.loads(attachment.read_text())
    assert evidence["selection-sha256"] == options["selection-sha256"]
    assert evidence["case"]["key"] == "get-task-context" and evidence["recorded"] is True
    assert evidence["cell"]["usage"] == {"agent-turns": 4, "input-tokens": 18234, "output-tokens": 2210}


def test_the_server_url_comes_from_the_run_context(tmp_path: Path) -> None:
    env = actions_env(GITHUB_SERVER_URL="https://ghe.acme.example")
    options, env = prepare(tmp_path, env=env)
    export(tmp_path, options, env)
    result = results_by_key(Path(options["results-dir"]))["budget-stop"]
    assert all(link["url"].startswith("https://ghe.acme.example/acme/agents/") for link in result["links"])
    executor = json.loads((Path(options["results-dir"]) / "executor.json").read_text())
    assert executor == {"name": "GitHub Actions", "type": "github", "url": "https://ghe.acme.example",
                        "buildOrder": 42, "buildName": "agent-protocol #42",
                        "buildUrl": f"https://ghe.acme.example/acme/agents/actions/runs/{env['GITHUB_RUN_ID']}",
                        "reportName": "agent-protocol"}


def test_all_passed_exits_zero(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [cell(CONTRACT, c.key) for c in CONTRACT.cases])
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["all-passed"]) == (0, "true")
    assert run.summary.count("✅") >= 4
    # No collect-cells receipt here (a rehearsal, an export fed by hand), but the directory is there and
    # every case passed: no warning that the directory is missing (issue 24 item 6).
    assert "does not exist" not in run.log and "::warning" not in run.log and "WARNING" not in run.log


def test_fail_on_failed_cases_false_turns_exit_one_into_zero(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    options["fail-on-failed-cases"] = "false"
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["all-passed"]) == (0, "false")


def broken_by(run: PhaseRun, options: dict[str, str], key: str, code: str) -> dict[str, Any]:
    """The export went through; ``key`` is broken with ``code`` in its result, the receipt and the summary."""
    assert run.exit_code == 1, run.summary
    result = results_by_key(Path(options["results-dir"]))[key]
    assert result["status"] == "broken" and code in result["statusDetails"]["message"]
    row = next(r for r in load_receipt(options["results-dir"] + "-receipt.json").results if r["key"] == key)
    assert (row["status"], row["reason"], row["code"]) == ("broken", "invalid_cell", code)
    line = next(line for line in run.summary.splitlines() if f"| `{key}` |" in line)
    assert code in line
    return result


def test_an_unsupported_pass_breaks_its_case_and_the_others_are_exported(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [cell(CONTRACT, "budget-stop", failed=["spend-reported"]),
                                      cell(CONTRACT, "get-task-context")])
    run = export(tmp_path, options, env)
    broken_by(run, options, "budget-stop", "export.unsupported_pass")
    assert results_by_key(Path(options["results-dir"]))["get-task-context"]["status"] == "passed"
    assert (run.outputs["passed-count"], run.outputs["broken-count"]) == ("1", "2")


def test_a_cell_of_another_commit_breaks_its_case(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [cell(CONTRACT, "budget-stop", sha="f" * 40)])
    run = export(tmp_path, options, env)
    result = broken_by(run, options, "budget-stop", "export.cell_binding")
    evidence = json.loads((Path(options["results-dir"]) / result["attachments"][0]["source"]).read_text())
    assert evidence["recorded"] is False and evidence["rejected-cell"]["code"] == "export.cell_binding"


def test_a_non_empty_results_dir_is_refused_but_an_empty_one_is_used(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    results_dir = Path(options["results-dir"])
    results_dir.mkdir(parents=True)
    (results_dir / "old-result.json").write_text("{}")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "io.exists")
    (results_dir / "old-result.json").unlink()
    assert export(tmp_path, options, env).exit_code == 1


def test_an_existing_receipt_is_never_overwritten(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    Path(options["results-dir"]).parent.mkdir(parents=True)
    Path(options["results-dir"] + "-receipt.json").write_text("{}")
    run = export(tmp_path, options, env)
    assert run.outputs["error-code"] == "io.exists"


def test_the_selection_digest_binds_the_export(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    run = export(tmp_path, {**options, "selection-sha256": "0" * 64}, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.digest")
    options.pop("selection-sha256")
    run = export(tmp_path, options, env)
    assert run.outputs["error-code"] == "input.selection-sha256"


def test_a_selection_of_another_run_is_refused(tmp_path: Path) -> None:
    options, _env = prepare(tmp_path)
    run = export(tmp_path, options, actions_env(GITHUB_RUN_ID="1234"))
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.context")


def test_a_token_variable_refuses_the_worker_and_the_token_leaks_nowhere(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    run = export(tmp_path, options, {**env, "ALLURE_TOKEN": SENTINEL})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "worker.token_present")
    log = "\n".join(line for line in run.log.splitlines() if not line.startswith("::add-mask::"))
    everything = log + run.summary + json.dumps(run.outputs) + json.dumps(run.failure())
    assert SENTINEL not in everything


def test_missing_cell_results_export_every_case_as_not_recorded(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [])
    options["cell-results"] = str(tmp_path / "nowhere")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["broken-count"], run.outputs["passed-count"]) == (1, "3", "0")
    assert "does not exist" in run.log and "exported as broken" in run.log  # true here, so said


def test_run_attempts_any_exports_the_latest_attempt_and_names_the_superseded(tmp_path: Path) -> None:
    contract = small_contract(run_attempts="any")
    cells = [cell(contract, "budget-stop", attempt="first", disposition="behavior_failure",
                  failed=["spend-reported"], finished="2026-12-01T10:04:00Z"),
             cell(contract, "budget-stop", attempt="second", finished="2026-12-01T10:09:00Z")]
    options, env = prepare(tmp_path, cells, contract=contract)
    run = export(tmp_path, options, env)
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    row = next(r for r in receipt.results if r["key"] == "budget-stop")
    assert (row["status"], row["attempt-id"], row["superseded"]) == ("passed", "second", ["first"])
    assert "Superseded attempts" in run.summary


def test_adapted_junit_in_a_case_directory_is_exported(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [])
    case_dir = Path(options["cell-results"]) / "budget-stop"
    case_dir.mkdir(parents=True)
    (case_dir / "junit.xml").write_text(
        "<testsuite timestamp='2026-12-01T10:00:00+00:00' time='3'><testcase name='test_stopped_at_budget'/>"
        "<testcase name='test_spend_reported'/></testsuite>")
    export(tmp_path, options, env)
    result = results_by_key(Path(options["results-dir"]))["budget-stop"]
    assert result["status"] == "passed"
    assert result["start"] == 1_796_119_200_000 and result["stop"] == 1_796_119_203_000


def test_the_worker_phase_imports_no_network_library(tmp_path: Path) -> None:
    code = ("import sys; import testops_evidence.phases.export; "
            "print(sorted(m for m in ('requests', 'github', 'jsonschema') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")})
    assert done.stdout.strip() == "[]"


# --- golden files -------------------------------------------------------------------------------------

def test_golden_results_and_summary(tmp_path: Path) -> None:
    """Golden files for every status and reason: passed, behaviour failure, infrastructure failure and a
    selected case with no cell (not recorded). UUIDs and time are injected, so the bytes are stable."""
    contract = small_contract(cases=4)
    cells = [
        cell(contract, "get-task-context", disposition="infrastructure_failure", failed=["cleanup"]),
        cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
        cell(contract, "company-credential-approval"),
    ]
    cells[0]["checks"][2]["message"] = "container left running"
    options, env = prepare(tmp_path, cells, contract=contract)
    run = export(tmp_path, options, env)
    results_dir = Path(options["results-dir"])
    for key, document in sorted(results_by_key(results_dir).items()):
        check_golden(f"export/{key}-result.json", json.dumps(document, indent=2, sort_keys=True) + "\n")
        attachment = results_dir / document["attachments"][0]["source"]
        check_golden(f"export/{key}-attachment.json",
                     normalise(json.dumps(json.loads(attachment.read_text()), indent=2, sort_keys=True) + "\n", tmp_path))
    check_golden("export/environment.properties", (results_dir / "environment.properties").read_text())
    check_golden("export/summary.md", normalise(run.summary, tmp_path))
    written = Path(options["results-dir"] + "-receipt.json").read_bytes()
    # Written compact (a machine document: issue 17), shown indented in the golden file for review.
    assert written == canonical_json(json.loads(written))
    check_golden("export/receipt.json", normalise(pretty_json(json.loads(written)).decode(), tmp_path))


@pytest.mark.parametrize(("value", "escaped"), [
    ("plain", "plain"), ("a=b:c#d!e", "a\\=b\\:c\\#d\\!e"), (" lead", "\\ lead"), ("tab\there", "tab\\there"),
    ("new\nline", "new\\nline"), ("back\\slash", "back\\\\slash"), ("naïve", "na\\u00efve"),
    ("emoji 🤖", "emoji \\ud83e\\udd16"),
])
def test_environment_properties_are_escaped_as_java_properties(value: str, escaped: str) -> None:
    from testops_evidence.publication.allure import escape_property

    assert escape_property(value, key=False) == escaped


def test_a_cell_measured_in_another_run_attempt_breaks_its_case(tmp_path: Path) -> None:
    # The selection is of attempt 1 (first-only); the cell of this selection says attempt 2 measured it.
    cells = [cell(CONTRACT, "get-task-context", **{"run-attempt": 2})]
    options, env = prepare(tmp_path, cells)
    run = export(tmp_path, options, env)
    broken_by(run, options, "get-task-context", "export.cell_binding")
    assert "get-task-context/run-attempt" in run.summary or "run attempt 2" in run.summary


# --- issue 12: replays and per-worker artifacts -------------------------------------------------------------


def test_a_passed_cell_saved_from_an_earlier_run_is_refused_as_a_replay(tmp_path: Path) -> None:
    """Issue 12, failure 2: same commit and profile, another run; before cell v2 it was exported as passed."""
    (tmp_path / "earlier").mkdir()
    _, earlier_digest = make_selection(tmp_path / "earlier", CONTRACT, actions_env(GITHUB_RUN_ID="9100200111"))
    replayed = cell(CONTRACT, "budget-stop", selection_sha256=earlier_digest)  # passed, from the earlier run
    options, env = prepare(tmp_path, [cell(CONTRACT, "get-task-context"), replayed])
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_selection")
    assert "budget-stop/selection-sha256" in run.summary
    assert not Path(options["results-dir"]).exists()


def worker_artifacts(tmp_path: Path, artifacts: dict[str, dict[str, dict[str, Any]]]) -> tuple[dict[str, str],
                                                                                              dict[str, str]]:
    """An export whose cell-results holds one directory per worker artifact: {job: {file name: cell}}."""
    options, env = prepare(tmp_path, [])
    root = Path(options["cell-results"])
    digest = options["selection-sha256"]
    for job, files in artifacts.items():
        directory = root / f"testops-evidence-cells-1-{job}"
        directory.mkdir(parents=True)
        for name, document in files.items():
            (directory / name).write_text(json.dumps(bound_to(document, digest)))
    return {**options, "artifact-prefix": "testops-evidence"}, env


def test_per_worker_artifacts_bind_each_cell_to_the_job_that_owns_its_case(tmp_path: Path) -> None:
    options, env = worker_artifacts(tmp_path, {
        "native-get-task-context": {"get-task-context.json": cell(CONTRACT, "get-task-context")},
        "native-budget-stop": {"budget-stop.json": cell(CONTRACT, "budget-stop", disposition="behavior_failure",
                                                        failed=["spend-reported"])},
        # external-company-credential-approval uploaded nothing: its case is not recorded
    })
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    statuses = {key: r["status"] for key, r in results_by_key(Path(options["results-dir"])).items()}
    assert statuses == {"get-task-context": "passed", "budget-stop": "failed", "company-credential-approval": "broken"}
    rows = {r["key"]: r for r in load_receipt(options["results-dir"] + "-receipt.json").results}
    assert rows["budget-stop"]["worker"] == "native-budget-stop"
    # No collect-cells ran: the summary claims the names it read, not which job uploaded each artifact.
    assert "per worker, by artifact name only: 2 of 3 worker artifacts present" in run.summary
    assert "which job uploaded each artifact was not checked" in run.summary
    assert "every cell came from" not in run.summary


def test_a_worker_that_writes_another_cases_cell_refuses_the_export(tmp_path: Path) -> None:
    """Issue 12, failure 1: the worker of get-task-context writes a passed cell for budget-stop, which
    failed. Before, the merged download let the forged file replace the real one and the run was green."""
    options, env = worker_artifacts(tmp_path, {
        "native-get-task-context": {"get-task-context.json": cell(CONTRACT, "get-task-context"),
                                    "budget-stop.json": cell(CONTRACT, "budget-stop", attempt="forged")},
        "native-budget-stop": {"budget-stop.json": cell(CONTRACT, "budget-stop", disposition="behavior_failure",
                                                        failed=["spend-reported"])},
    })
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_origin")
    failure = run.failure()
    assert failure is not None and (failure["expected"], failure["actual"]) == (
        "native-budget-stop", "native-get-task-context")
    assert not Path(options["results-dir"]).exists()


@pytest.mark.parametrize(("artifacts", "code"), [
    ({"native-someone-else": {"get-task-context.json": {}}}, "export.worker_artifact"),  # not a job of the plan
    ({"native-get-task-context": {"notes.txt": {}}}, "export.worker_artifact"),  # not part of the layout
    ({"native-get-task-context": {"get-task-context.json": "budget-stop"}}, "export.cell_origin"),  # path vs content
    ({"native-get-task-context": {"case-00099.json": {"case": "case-00099"}}}, "export.foreign_cell"),  # unselected
])
def test_a_worker_artifact_outside_the_plan_or_layout_refuses_the_export(tmp_path: Path, artifacts: dict[str, Any],
                                                                        code: str) -> None:
    resolved = {job: {name: (cell(CONTRACT, doc) if isinstance(doc, str) else
                             {**cell(CONTRACT, "get-task-context"), **doc})
                      for name, doc in files.items()} for job, files in artifacts.items()}
    options, env = worker_artifacts(tmp_path, resolved)
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, code), run.summary
    assert not Path(options["results-dir"]).exists()


def test_a_shard_artifact_holds_the_cells_of_all_its_cases(tmp_path: Path) -> None:
    contract = small_contract(cases=300)  # 298 native cases: packed into shards of two
    options, env = prepare(tmp_path, [], contract=contract)
    from testops_evidence.campaign.matrix import plan_matrices

    jobs = plan_matrices(list(contract.cases), contract.lanes).jobs()
    first = next(job for job in jobs if job.startswith("native-shard-"))
    directory = Path(options["cell-results"]) / f"testops-evidence-cells-1-{first}"
    directory.mkdir(parents=True)
    for key, _trial in jobs[first]:
        (directory / f"{key}.json").write_text(json.dumps(bound_to(cell(contract, key), options["selection-sha256"])))
    run = export(tmp_path, {**options, "artifact-prefix": "testops-evidence"}, env)
    assert run.exit_code == 1, run.summary
    passed = [r["key"] for r in load_receipt(options["results-dir"] + "-receipt.json").results
              if r["status"] == "passed"]
    assert sorted(passed) == sorted(key for key, _trial in jobs[first]) and len(passed) == 2
