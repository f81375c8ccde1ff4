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
from test_summary_injection import assert_inert
from testops_evidence.readers.adapters.frameworks import framework_cell
from testops_evidence.readers.adapters.promptfoo import read_results

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


# --- file names ------------------------------------------------------------------------------------------------

MARATHON = DATA / "marathon" / "com.mikepenz.DummyTest3#test_01.xml"


def test_a_marathon_report_named_with_a_hash_is_read(tmp_path: Path) -> None:
    """Marathon names each report `<class>#<test>.xml`: `#` is unusual, not unsafe. Before, the name alone was
    io.unsafe_path, from `cell --junit DIR` and for the whole export."""
    from testops_evidence.readers.adapters import FAILED
    from testops_evidence.readers.adapters.layout import read_reports

    (tmp_path / MARATHON.name).write_bytes(MARATHON.read_bytes())
    outcomes, inputs = read_reports(tmp_path)
    assert [(o.name, o.status) for o in outcomes] == [("test_01", FAILED)]
    assert [name for name, _ in inputs] == [MARATHON.name]


def test_export_reads_a_marathon_report_and_records_it_by_a_listed_name(tmp_path: Path) -> None:
    from test_export import export, prepare, results_by_key

    options, env = prepare(tmp_path)
    for path in Path(options["cell-results"]).glob("budget-stop*.json"):
        path.unlink()
    case_dir = Path(options["cell-results"]) / "budget-stop"
    case_dir.mkdir()
    (case_dir / MARATHON.name).write_bytes(MARATHON.read_bytes())
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    results = results_by_key(Path(options["results-dir"]))
    assert results["get-task-context"]["status"] == "passed"
    # read, not refused: its one test maps to no check of budget-stop, so the checks are not recorded
    message = results["budget-stop"]["statusDetails"]["message"]
    assert "Infrastructure failure" in message and "io.unsafe_path" not in message, message


@pytest.mark.parametrize("name", ["line\nbreak.xml", "escape\x1b[31m.xml", "bidi\u202egnp.xml", "tab\there.xml"])
def test_an_unsafe_report_name_breaks_only_its_case_and_reaches_the_summary_escaped(tmp_path: Path,
                                                                                     name: str) -> None:
    """A control or format character in a report's name is refused (export.report_name) for that case alone."""
    from test_export import export, prepare, results_by_key

    options, env = prepare(tmp_path)
    for path in Path(options["cell-results"]).glob("budget-stop*.json"):
        path.unlink()
    case_dir = Path(options["cell-results"]) / "budget-stop"
    case_dir.mkdir()
    (case_dir / name).write_bytes(MARATHON.read_bytes())
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    results = results_by_key(Path(options["results-dir"]))
    assert results["get-task-context"]["status"] == "passed"
    assert results["budget-stop"]["status"] == "broken"
    assert "export.report_name" in results["budget-stop"]["statusDetails"]["message"]
    assert name not in run.summary, "the raw name reached the summary"
    assert_inert(run.summary)


def test_a_name_that_is_markup_reaches_the_summary_as_text(tmp_path: Path) -> None:
    """A name may hold `<`, `>`, `[`, `]`, `(`, `)` and backquotes: read as it is, shown as text."""
    from test_export import export, prepare

    options, env = prepare(tmp_path)
    for path in Path(options["cell-results"]).glob("budget-stop*.json"):
        path.unlink()
    case_dir = Path(options["cell-results"]) / "budget-stop"
    case_dir.mkdir()
    name = "x` | ![i](https:evil.example) [l](https:evil.example) <img src=x onerror=1> <details> #z.xml"
    (case_dir / name).write_bytes(b"<testsuite><testcase name='a'>")  # truncated: export.adapter names it
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    assert "export.adapter" in run.summary and "onerror" in run.summary  # the name is shown ...
    assert_inert(run.summary)  # ... as text, as GitHub's renderer reads it


# --- allure-results ----------------------------------------------------------------------------------------------

ALLURE = DATA.parent / "allure-results" / "allure-pytest"
PASSED_RESULT = ALLURE / "301922c7-09fa-43a5-a60f-856c7bc5d073-result.json"  # test_tool_called, passed
FAILED_RESULT = ALLURE / "c4987427-fb2c-41db-a0c7-55c5e2cd7fe3-result.json"  # test_answer_grounded, failed


def respelled(path: Path, status: Any) -> bytes:
    """The real allure-pytest result with its status spelled otherwise. No allure-pytest writes these
    spellings; other producers' adapters do, and Allure Report 3's reader reads every one of them as below
    (allure-framework/allure3, packages/reader/src/allure2/index.ts, convertStatus: lower-cased; null or
    anything else is unknown)."""
    import json

    document = json.loads(path.read_bytes())
    document["status"] = status
    return json.dumps(document).encode()


@pytest.mark.parametrize(("path", "status", "expected"), [
    (PASSED_RESULT, "PASSED", "passed"), (PASSED_RESULT, "Passed", "passed"),
    (FAILED_RESULT, "FAILED", "failed"), (PASSED_RESULT, "SKIPPED", "skipped"),
    (PASSED_RESULT, None, "error"), (PASSED_RESULT, "passed-ish", "error"),
])
def test_allure_statuses_are_read_as_allure_report_3_reads_them(path: Path, status: Any, expected: str) -> None:
    from testops_evidence.readers.adapters.allure_results import parse_result

    _fold, outcome = parse_result(respelled(path, status), path.name)
    assert outcome.status == expected
    if expected == "error":
        assert "read as unknown" in (outcome.message or "")


def test_a_zero_byte_allure_result_file_is_no_result_and_passes_nothing() -> None:
    """A zero-byte *-result.json (a writer killed before it wrote) holds no result: Allure Report 3 shows
    none, and the check its test would have measured stays not recorded."""
    from testops_evidence.readers.adapters.allure_results import parse_results

    files = [(p.name, p.read_bytes()) for p in sorted(ALLURE.glob("*-result.json"))]
    emptied = [(name, b"" if name == PASSED_RESULT.name else data) for name, data in files]
    names = {o.name for o in parse_results(emptied)}
    assert "test_tool_called" not in names and "test_answer_grounded" in names


# --- Inspect AI --------------------------------------------------------------------------------------------------

OLD_INSPECT = next((DATA / "inspect-ai-0.3.60").glob("*.eval"))


def test_an_older_inspect_log_named_with_a_plus_is_read_with_the_usage_of_its_sample_records(tmp_path: Path) -> None:
    """inspect-ai 0.3.60 names its logs `<time>+00-00_<task>_<id>.eval` and writes sample summaries without
    model_usage; the sample records hold it. Before, the name was io.unsafe_path (from a directory) and every
    counter was unavailable."""
    from testops_evidence.readers.adapters.layout import read_framework_logs

    (tmp_path / OLD_INSPECT.name).write_bytes(OLD_INSPECT.read_bytes())
    runs, inputs = read_framework_logs(tmp_path, "", "inspect-log")
    assert [name for name, _ in inputs] == [OLD_INSPECT.name.replace("+", "_")]
    cell = framework_cell(CONTRACT.case("get-task-context"), runs, source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, inputs=inputs, fallback_time=1_764_000_000.0, origin="inspect-log")
    assert cell["disposition"] == "passed", cell["message"]
    usage = cell["usage"]
    assert (usage["input-tokens"], usage["output-tokens"]) == (100, 20), usage
    # Inspect 0.3.60 records no cache counters or cost for mockllm: unavailable, never zero
    assert usage["cost-nanodollars"] == {"coverage": "unavailable"}


def test_promptfoo_results_without_failure_reason_are_read_by_their_grading_result() -> None:
    """Results of evals recorded before promptfoo had failureReason carry none when exported. No such real file
    was found in time: this is the committed restricted-tests file (promptfoo 0.123.1) with the field taken out
    of every result and two results made to fail and to error. A result that did not succeed is failed by its
    assertions when graded and errored when not; never passed. Before, the file was refused (export.adapter)."""
    import json

    document = json.loads((DATA / "promptfoo-0.123.1-restricted" / "results.json").read_bytes())
    summary = document["results"]
    for result in summary["results"]:
        del result["failureReason"]
    first, second = summary["results"][0], summary["results"][1]
    first["success"] = False  # graded, an assertion failed
    first["gradingResult"]["pass"] = False
    first["gradingResult"]["componentResults"][0]["pass"] = False
    second["success"] = False  # the provider errored: no grading result
    second["gradingResult"] = None
    second["error"] = "connection refused"
    summary["stats"].update(successes=summary["stats"]["successes"] - 2, failures=1, errors=1)
    run = read_results(json.dumps(document).encode(), "results.json")
    cell = framework_cell(CONTRACT.case("get-task-context"), [("results.json", run)], source_sha=HEAD_SHA,
                          selection_sha256=DIGEST, profile=PROFILE, inputs=[("results.json", "0" * 64)],
                          fallback_time=1_764_000_000.0, origin="promptfoo")
    assert cell["disposition"] == "infrastructure_failure", cell["message"]
    messages = {check["id"]: check.get("message", "") for check in cell["checks"]}
    assert messages["tool-called"].startswith("error: "), messages
    assert "without failureReason" in cell["message"]


SAMPLE_EXPORT = DATA / "promptfoo-0.118.10" / "sample-export.json"


def test_a_finished_export_of_a_promptfoo_before_0_120_7_is_counted_finished() -> None:
    """promptfoo's own export fixture (0.118.10, which writes no stats.durationMs): its config declares two
    tests, the file numbers tests 0 and 1 in both provider columns, so it finished; its results are read."""
    run = read_results(SAMPLE_EXPORT.read_bytes(), SAMPLE_EXPORT.name)
    assert run.incomplete is None
    assert {unit.name for unit in run.units} == {"test 0 prompt 0 (openai:gpt-5)", "test 0 prompt 1 (openai:gpt-5-mini)",
                                                 "test 1 prompt 0 (openai:gpt-5)", "test 1 prompt 1 (openai:gpt-5-mini)"}
    assert not any(outcome.status == "passed" and outcome.name == "latency" for outcome in run.outcomes)


def test_the_same_export_without_its_last_test_does_not_show_it_finished() -> None:
    """Never a wrong pass: the fixture as an interruption before test 1 would have left it (test 1's results
    gone, the stats counting what is there) — the config still declares two tests."""
    import json

    document = json.loads(SAMPLE_EXPORT.read_bytes())
    summary = document["results"]
    summary["results"] = [r for r in summary["results"] if r["testIdx"] == 0]
    summary["stats"]["failures"] = 2
    run = read_results(json.dumps(document).encode(), SAMPLE_EXPORT.name)
    assert run.incomplete is not None and "declares 2 test(s)" in run.incomplete, run.incomplete


def test_an_interrupted_promptfoo_eval_is_not_published_passed_by_a_pass_at_k_policy(tmp_path: Path) -> None:
    """The issue's path: the interrupted file in the case's `promptfoo/` directory, the case measured three
    times under `verdict: any`. Export adapts one cell per repeat the file holds; before, repeats 1 and 2
    passed, so the case was published passed."""
    import shutil

    from evidence_support import small_contract
    from test_export import export, prepare
    from testops_evidence.campaign.receipt import load_receipt
    from testops_evidence.contract import contract_from_document

    document = small_contract().document
    document["cases"][0] = {**document["cases"][0], "trials": {"count": 3, "verdict": "any"}}
    contract = contract_from_document(document)
    options, env = prepare(tmp_path, [], contract=contract)
    case_dir = Path(options["cell-results"]) / "get-task-context" / "promptfoo"
    case_dir.mkdir(parents=True)
    shutil.copy(DATA / "promptfoo-0.123.1-interrupted" / "results.json", case_dir / "results.json")
    run = export(tmp_path, options, env)
    assert run.exit_code == 1, run.summary
    receipt = load_receipt(options["results-dir"] + "-receipt.json")
    row = next(row for row in receipt.results if row["key"] == "get-task-context")
    assert row["status"] == "broken", row
    assert [trial["status"] for trial in row["trials"]] == ["broken", "broken", "broken"], row["trials"]
