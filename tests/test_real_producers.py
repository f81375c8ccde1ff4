"""Real producers' files read as their producers mean them (issue 28, "Real producers' files").

Each test reads a committed file that a real producer wrote (sources and licences in
tests/data/producers/README.md) and proves one finding of the issue: what the producer means is what the
cell says, and nothing the producer did not prove passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidence_support import HEAD_SHA, example_contract
from testops_evidence.evidence.adapters.frameworks import framework_cell
from testops_evidence.evidence.adapters.promptfoo import read_results

DATA = Path(__file__).resolve().parent / "data" / "producers"
CONTRACT = example_contract()
PROFILE = dict(CONTRACT.profile)
DIGEST = "5e" * 32
TRIALS = (None, 1, 2, 3)


def promptfoo_cell(path: Path, key: str, trial: int | None = None) -> dict[str, Any]:
    run = read_results(path.read_bytes(), path.name)
    return framework_cell(CONTRACT.case(key), [(path.name, run)], source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, inputs=[(path.name, "0" * 64)], fallback_time=1_764_000_000.0,
                          origin="promptfoo", trial=trial)


# --- promptfoo -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trial", TRIALS)
def test_an_interrupted_promptfoo_eval_passes_nothing_measured_once_or_as_trials(trial: int | None) -> None:
    """promptfoo 0.123.1 paused by Ctrl+C after two of get-task-context's three repeats, then exported with
    `promptfoo export eval`: its stats are consistent and the repeats it ran passed. Measured as trials,
    trials 1 and 2 used to pass (a case under `any` or `at-least: 2` was published passed)."""
    cell = promptfoo_cell(DATA / "promptfoo-0.123.1-interrupted" / "results.json", "get-task-context", trial)
    assert cell["disposition"] == "infrastructure_failure", cell
    assert all(not check["passed"] for check in cell["checks"])
    assert "did not finish" in cell["message"] and "stats.durationMs" in cell["message"], cell["message"]


@pytest.mark.parametrize("key", ["get-task-context", "list-open-issues"])
def test_promptfoo_tests_restricted_to_some_prompts_or_providers_are_not_missing_results(key: str) -> None:
    """Two prompts x two providers; get-task-context runs only with prompt `terse`, list-open-issues only on
    provider `agent-b` (test-level `prompts:` / `providers:`): every result promptfoo ran passed, and the
    columns it did not run the tests in are no results that never ran."""
    cell = promptfoo_cell(DATA / "promptfoo-0.123.1-restricted" / "results.json", key)
    assert cell["disposition"] == "passed", cell["message"]


def test_a_restriction_does_not_hide_a_result_missing_in_a_column_the_test_runs_in() -> None:
    """Never a wrong pass: the same file with list-open-issues' result for prompt column 3 (verbose on
    agent-b, which its restriction names) taken out, and the stats told, does not pass."""
    import json

    document = json.loads((DATA / "promptfoo-0.123.1-restricted" / "results.json").read_bytes())
    summary = document["results"]
    summary["results"] = [r for r in summary["results"] if (r["testIdx"], r["promptIdx"]) != (1, 3)]
    summary["stats"]["successes"] -= 1
    run = read_results(json.dumps(document).encode(), "results.json")
    cell = framework_cell(CONTRACT.case("list-open-issues"), [("results.json", run)], source_sha=HEAD_SHA,
                          selection_sha256=DIGEST, profile=PROFILE, inputs=[("results.json", "0" * 64)],
                          fallback_time=1_764_000_000.0, origin="promptfoo")
    assert cell["disposition"] == "infrastructure_failure"
    assert all("test 1 prompt 3" in check["message"] for check in cell["checks"]), cell["checks"]


# --- JUnit XML and export ----------------------------------------------------------------------------------------


def test_a_junit_report_over_its_cap_breaks_only_its_case(tmp_path: Path) -> None:
    """A real pytest report (tests/data/junit) that a long run made larger than 32 MiB — here by whitespace
    after its root element, as any XML writer may end a document: export breaks that case (export.adapter)
    and exports every other case as measured. Before, the whole export was refused (io.too_large, exit 3)."""
    from test_export import export, prepare, results_by_key

    options, env = prepare(tmp_path)
    case_dir = Path(options["cell-results"]) / "budget-stop"
    case_dir.mkdir()
    for path in Path(options["cell-results"]).glob("budget-stop*.json"):
        path.unlink()
    real = (DATA.parent / "junit" / "pytest" / "junit.fail.xml").read_bytes()
    with (case_dir / "junit.xml").open("wb") as handle:
        handle.write(real)
        handle.write(b"\n" * (32 * 1024 * 1024 + 1 - len(real)))
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    results = results_by_key(Path(options["results-dir"]))
    assert results["get-task-context"]["status"] == "passed"
    broken = results["budget-stop"]
    assert broken["status"] == "broken"
    assert "export.adapter" in broken["statusDetails"]["message"]
    assert "over the 32 MiB" in broken["statusDetails"]["message"]
