"""export: cell results -> Allure results, evidence attachments, executor/environment, receipt."""

from __future__ import annotations

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
from testops_evidence.evidence.allure import derive_history_id, derive_test_case_id
from testops_evidence.evidence.receipt import load_receipt

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
    write_cells(tmp_path / "cell-results", cells)
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
    assert run.outputs == {
        "results-dir": str(results_dir), "receipt-path": f"{results_dir}-receipt.json",
        "passed-count": "1", "failed-count": "1", "broken-count": "1", "all-passed": "false",
    }
    results = results_by_key(results_dir)
    assert {k: v["status"] for k, v in results.items()} == {
        "get-task-context": "passed", "budget-stop": "failed", "company-credential-approval": "broken"}
    assert "statusDetails" not in results["get-task-context"]
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


def test_fail_on_failed_cases_false_turns_exit_one_into_zero(tmp_path: Path) -> None:
    options, env = prepare(tmp_path)
    options["fail-on-failed-cases"] = "false"
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["all-passed"]) == (0, "false")


def test_an_unsupported_pass_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [cell(CONTRACT, "budget-stop", failed=["spend-reported"])])
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.unsupported_pass")
    assert not Path(options["results-dir"]).exists()
    assert not Path(options["results-dir"] + "-receipt.json").exists()
    assert run.failure()["code"] == "export.unsupported_pass"


def test_a_cell_of_another_commit_is_refused(tmp_path: Path) -> None:
    options, env = prepare(tmp_path, [cell(CONTRACT, "budget-stop", sha="f" * 40)])
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_binding")
    assert "budget-stop/source-sha" in run.summary


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
    assert "does not exist" in run.log


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
    check_golden("export/receipt.json", normalise(Path(options["results-dir"] + "-receipt.json").read_text(),
                                                  tmp_path))


@pytest.mark.parametrize(("value", "escaped"), [
    ("plain", "plain"), ("a=b:c#d!e", "a\\=b\\:c\\#d\\!e"), (" lead", "\\ lead"), ("tab\there", "tab\\there"),
    ("new\nline", "new\\nline"), ("back\\slash", "back\\\\slash"), ("naïve", "na\\u00efve"),
    ("emoji 🤖", "emoji \\ud83e\\udd16"),
])
def test_environment_properties_are_escaped_as_java_properties(value: str, escaped: str) -> None:
    from testops_evidence.evidence.allure import escape_property

    assert escape_property(value, key=False) == escaped


def test_a_cell_measured_in_another_run_attempt_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    # The selection is of attempt 1 (first-only); the cell says a re-run (attempt 2) measured it.
    cells = [cell(CONTRACT, "get-task-context", **{"run-attempt": 2})]
    options, env = prepare(tmp_path, cells)
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_binding")
    assert run.failure() is not None and run.failure()["field"] == "get-task-context/run-attempt"  # type: ignore[index]
    assert not Path(options["results-dir"]).exists()
