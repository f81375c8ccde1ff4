"""The adapters on real producers' files (tests/data/junit/README.md): counts per file, fail-closed on every
status that is not a run, recursive directory reading, and issue 12's failure 4 (a test that never ran
counted as passed)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from evidence_support import HEAD_SHA, actions_env, small_contract, write_contract
from helpers import run_mode
from testops_evidence.contract import contract_from_document
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import PASSED, build_cell
from testops_evidence.readers.adapters.allure_results import parse_result, parse_results
from testops_evidence.readers.adapters.junit import parse_junit
from testops_evidence.readers.adapters.layout import read_case, walk

DATA = Path(__file__).resolve().parent / "data"
CORPUS = DATA / "junit"
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))["files"]
SELECTION = "5e1ec7" + "0" * 58
KINDS = {"passed": "passed", "failed": "failed", "error": "errors", "skipped": "not-run"}


def counts(relpath: str) -> dict[str, int]:
    outcomes = parse_junit((CORPUS / relpath).read_bytes(), relpath)
    found = Counter(KINDS[outcome.status] for outcome in outcomes)
    return {"tests": len(outcomes), **{kind: found.get(kind, 0) for kind in ("passed", "failed", "errors", "not-run")}}


def test_the_manifest_covers_every_file_of_the_corpus() -> None:
    on_disk = {str(path.relative_to(CORPUS)) for path in CORPUS.rglob("*.xml")}
    assert on_disk == set(EXPECTED)
    assert len(on_disk) >= 30
    for entry in EXPECTED.values():
        assert entry["source"] and entry["oracle"]


@pytest.mark.parametrize("relpath", sorted(EXPECTED))
def test_each_real_report_reads_as_its_producer_counted_it(relpath: str) -> None:
    expected = {key: EXPECTED[relpath][key] for key in ("tests", "passed", "failed", "errors", "not-run")}
    assert counts(relpath) == expected


@pytest.mark.parametrize("relpath", sorted(EXPECTED))
def test_no_test_that_did_not_run_makes_a_check_pass(relpath: str) -> None:
    """Each test of the file alone measures a one-check case: the check passes exactly when the test ran and
    passed. A skipped, disabled, not-run, suppressed or unknown-status test never makes it pass."""
    contract = contract_from_document({
        "version": 1, "campaign": "corpus",
        "trust": {"repository": "acme/agents", "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/evals.yml"]},
        "profile": {"id": "p"}, "lanes": {"native": {"max-parallel": 1}},
        "cases": [{"key": "one", "full-name": "corpus/one", "title": "One", "lane": "native",
                   "checks": {"the-check": "behavior"}}],
    })
    case = contract.case("one")
    for outcome in parse_junit((CORPUS / relpath).read_bytes(), relpath):
        marked = dataclasses.replace(outcome, checks=("the-check",), case=None)
        cell = build_cell(case, [marked], source_sha=HEAD_SHA, profile={"id": "p"}, inputs=[],
                          selection_sha256=SELECTION, fallback_time=0.0)
        assert (cell["disposition"] == "passed") == (outcome.status == PASSED), (relpath, outcome)


def test_issue_12_failure_4_disabled_and_suppressed_tests_no_longer_pass() -> None:
    """Before: tst's status="disabled" and GoogleTest's status="notrun" result="suppressed" test cases had no
    child element, were read as passed, and made a passed cell through `cell --junit`."""
    for relpath, names in (("tst/disabled.xml", {"disabled_test", "disabled_param_test[0]"}),
                           ("googletest/outcomes.xml", {"DISABLED_StoppedAtBudget"})):
        outcomes = {o.name: o for o in parse_junit((CORPUS / relpath).read_bytes(), relpath)}
        for name in names:
            assert outcomes[name].status == "skipped", (relpath, name)
            assert "did not run" in (outcomes[name].message or "")
    gtest = {o.name: o for o in parse_junit((CORPUS / "googletest/outcomes.xml").read_bytes(), "g.xml")}
    assert gtest["SpendReported"].status == "skipped"  # GTEST_SKIP(): status="run" result="skipped"
    assert gtest["ToolCalled"].status == "passed"  # status="run" result="completed"


@pytest.mark.parametrize(("attributes", "child", "status"), [
    ('status="run" result="completed"', "", "passed"),
    ('status="Success"', "", "passed"),
    ('status="Passed"', "", "passed"),
    ('status="notrun" result="suppressed"', "", "skipped"),
    ('status="disabled"', "", "skipped"),
    ('status="Ignored"', "", "skipped"),
    ('status="Inconclusive"', "", "skipped"),
    ('status="NotRunnable"', "", "skipped"),
    ('status="pending"', "", "skipped"),
    ('status="something-new"', "", "skipped"),  # an unknown value never counts as a run
    ('result="weird"', "", "skipped"),
    ('status="run" result="skipped"', "", "skipped"),
    ('status="Failed"', "", "failed"),
    ('status="errored"', "", "error"),
    ('status="passed"', "<skipped/>", "skipped"),
    ('status="passed"', '<failure message="m"/>', "failed"),
    ('status="disabled"', '<failure message="m"/>', "failed"),
    ("", '<skipped message="later"/>', "skipped"),
])
def test_junit_status_attributes_and_children_fail_closed(attributes: str, child: str, status: str) -> None:
    report = f'<testsuite><testcase name="test_x" {attributes}>{child}</testcase></testsuite>'.encode()
    (outcome,) = parse_junit(report, "r.xml")
    assert outcome.status == status


@pytest.mark.parametrize(("document", "status"), [
    ({"name": "t", "status": "passed"}, "passed"),
    ({"name": "t", "status": "passed", "stage": "finished"}, "passed"),
    ({"name": "t", "status": "passed", "stage": "interrupted"}, "skipped"),
    ({"name": "t", "status": "passed", "stage": "running"}, "skipped"),
    ({"name": "t", "status": "skipped"}, "skipped"),
    ({"name": "t", "status": "unknown"}, "error"),
    ({"name": "t", "status": "broken"}, "error"),
    ({"name": "t"}, "error"),  # no status: Allure's default is unknown
])
def test_allure_results_fail_closed_on_every_status_that_is_not_a_run(document: dict[str, str], status: str) -> None:
    _fold, outcome = parse_result(json.dumps(document).encode(), "x-result.json")
    assert outcome.status == status


def test_an_unknown_allure_status_is_read_as_allure_3_reads_it_never_as_a_pass() -> None:
    # Allure 3's reader (packages/reader/src/allure2) reads a status it does not know as "unknown": broken here.
    _, outcome = parse_result(b'{"name": "t", "status": "green"}', "x-result.json")
    assert outcome.status == "error" and "green" in outcome.message
    with pytest.raises(Refusal) as caught:  # a status that is not even a string is refused
        parse_result(b'{"name": "t", "status": ["passed"]}', "x-result.json")
    assert caught.value.code == "export.adapter"


def test_real_allure_pytest_results_count_as_the_harness_ran() -> None:
    files = [(path.name, path.read_bytes()) for path in sorted((DATA / "allure-results" / "allure-pytest").glob(
        "*-result.json"))]
    found = Counter(outcome.status for outcome in parse_results(files))
    assert found == {"passed": 2, "failed": 1, "error": 1, "skipped": 3}


@pytest.mark.parametrize("name", ["non-junit.xml", "corrupt-xml.xml"])
def test_reports_that_are_not_junit_are_refused(name: str) -> None:
    with pytest.raises(Refusal) as caught:
        parse_junit((DATA / "junit-refused" / name).read_bytes(), name)
    assert caught.value.code == "export.adapter"


# --- directories are read recursively, in a documented order ------------------------------------------------


def test_a_directory_is_read_recursively_in_the_order_of_relative_paths(tmp_path: Path) -> None:
    root = tmp_path / "reports"
    shutil.copytree(CORPUS, root)
    names = walk(root, "", lambda name: name.endswith(".xml"))
    assert names == sorted(EXPECTED, key=lambda rel: rel.split("/"))
    assert "googletest/outcomes.xml" in names and "tst/disabled.xml" in names
    (root / "pytest" / ".hidden.xml").write_text("<not-read/>")  # hidden files are not reports
    assert walk(root, "", lambda name: name.endswith(".xml")) == names


def test_export_reads_a_case_directory_recursively_with_relative_paths(tmp_path: Path) -> None:
    root = tmp_path / "cell-results"
    (root / "budget-stop" / "nested" / "deeper").mkdir(parents=True)
    shutil.copy(CORPUS / "googletest" / "outcomes.xml", root / "budget-stop" / "nested" / "deeper" / "g.xml")
    (root / "budget-stop" / "nested" / "allure-results").mkdir()
    shutil.copy(next((DATA / "allure-results" / "allure-pytest").glob("*-result.json")),
                root / "budget-stop" / "nested" / "allure-results" / "a-result.json")
    found = read_case(root, "budget-stop")
    outcomes, inputs = found.outcomes, found.inputs
    assert [name for name, _digest in inputs] == ["budget-stop/nested/deeper/g.xml",
                                                   "budget-stop/nested/allure-results/a-result.json"]
    assert len(outcomes) == 7


def test_cell_junit_dir_reads_subdirectories_and_names_them(tmp_path: Path) -> None:
    """Issue 12: `--junit DIR` ignored subdirectories without saying so; a disabled test there now counts."""
    contract = small_contract()
    reports = tmp_path / "reports"
    (reports / "shard-2").mkdir(parents=True)
    (reports / "a.xml").write_text('<testsuite><testcase name="test_stopped_at_budget"/></testsuite>')
    (reports / "shard-2" / "b.xml").write_text(
        '<testsuite><testcase name="test_spend_reported" status="notrun" result="suppressed"/></testsuite>')
    out = tmp_path / "cell.json"
    run = run_mode("cell", tmp_path, {"contract": str(write_contract(contract, tmp_path / "contract.json")),
                                      "case": "budget-stop", "junit": str(reports), "out": str(out),
                                      "selection-sha256": SELECTION}, actions_env())
    assert run.exit_code == 0, run.summary
    cell = json.loads(out.read_text())
    assert cell["disposition"] == "infrastructure_failure"  # before: passed, the subdirectory unread
    assert [a["path"] for a in cell["artifacts"]] == ["a.xml", "shard-2/b.xml"]
    spend = next(c for c in cell["checks"] if c["id"] == "spend-reported")
    assert spend["passed"] is False and "did not run (status='notrun')" in spend["message"]


def test_a_report_nested_too_deep_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "r"
    deep = root.joinpath(*["d"] * 18)
    deep.mkdir(parents=True)
    (deep / "x.xml").write_text("<testsuite/>")
    with pytest.raises(Refusal) as caught:
        walk(root, "", lambda name: name.endswith(".xml"))
    assert caught.value.code == "io.unsafe_path"
