"""Adapters: cell results from JUnit XML and allure-results written by a REAL pytest run (allure-pytest)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_support import HEAD_SHA, run_pytest, small_contract
from testops_evidence.campaign.cells import Binding, CellFile, adapted_cell, admit, verdict
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import ERROR, FAILED, PASSED, SKIPPED, Outcome, build_cell, map_check
from testops_evidence.readers.adapters.allure_results import parse_result, parse_results
from testops_evidence.readers.adapters.junit import MAX_DEPTH, parse_junit
from testops_evidence.readers.adapters.layout import adapt_trials, collect_cells, read_case

CONTRACT = small_contract()
PROFILE = dict(CONTRACT.profile)
SELECTION = "5e1ec7" + "0" * 58

# A real harness: three cases in one suite, each test marked with its case (JUnit property and Allure
# label) and mapped to checks by each of the documented rules.
SUITE = '''
import allure
import pytest


def mark(record_property, case, check=None):
    record_property("case", case)
    allure.dynamic.label("case", case)
    if check is not None:
        record_property("check", check)
        allure.dynamic.label("check", check)


@pytest.fixture
def sandbox():
    raise RuntimeError("sandbox did not start")


# get-task-context: parametrisation ids name the checks; cleanup errors in its fixture.
@pytest.mark.parametrize("check", ["tool-called", "answer-grounded"])
def test_check(check, record_property):
    mark(record_property, "get-task-context")
    assert check != "answer-grounded", "the answer cited no source"


def test_cleanup(sandbox, record_property):
    mark(record_property, "get-task-context")


# budget-stop: test names map to checks (test_stopped_at_budget -> stopped-at-budget).
def test_stopped_at_budget(record_property):
    mark(record_property, "budget-stop")


def test_spend_reported(record_property):
    mark(record_property, "budget-stop")
    assert 2 + 2 == 5, "spend was not reported"


# company-credential-approval: explicit check markers; a skipped second test of a check (which keeps that
# check from passing: a test that did not run is missing evidence) and an unmapped helper test.
def test_vault_write(record_property):
    mark(record_property, "company-credential-approval", "secret-saved")


def test_board_approval(record_property):
    mark(record_property, "company-credential-approval", "approval-recorded")


@pytest.mark.skip(reason="covered by test_board_approval")
def test_approval_recorded(record_property):
    mark(record_property, "company-credential-approval")


def test_helper_sanity(record_property):
    mark(record_property, "company-credential-approval")
'''

EXPECTED = {
    "get-task-context": ("infrastructure_failure", {"tool-called": True, "answer-grounded": False, "cleanup": False}),
    "budget-stop": ("behavior_failure", {"stopped-at-budget": True, "spend-reported": False}),
    "company-credential-approval": ("infrastructure_failure", {"secret-saved": True, "approval-recorded": False}),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real pytest run writing JUnit XML and allure-results."""
    root = tmp_path_factory.mktemp("harness")
    (root / "test_harness.py").write_text(textwrap.dedent(SUITE))
    done = run_pytest(root, "--junitxml=junit.xml", "--alluredir=allure-results", "test_harness.py")
    assert done.returncode == 1, done.stdout + done.stderr  # failures and an error, as designed
    assert (root / "junit.xml").exists() and list((root / "allure-results").glob("*-result.json"))
    return root


def cells_from(root: Path) -> dict[str, tuple[str, dict[str, bool]]]:
    found = read_case(root, "")
    outcomes, inputs = found.outcomes, found.inputs
    assert inputs
    found = {}
    for case in CONTRACT.cases:
        document = build_cell(case, outcomes, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, inputs=inputs,
                              fallback_time=1_764_000_000.0, origin="test")
        result = adapted_cell(document, "reports", inputs, "test")
        found[case.key] = (result.disposition, {c["id"]: c["passed"] for c in result.document["checks"]})
    return found


def test_junit_from_a_real_pytest_run_maps_to_checks(reports: Path, tmp_path: Path) -> None:
    only = tmp_path / "junit-only"
    only.mkdir()
    shutil.copy(reports / "junit.xml", only / "junit.xml")
    assert cells_from(only) == EXPECTED


def test_allure_results_from_a_real_allure_pytest_run_map_to_the_same_checks(reports: Path, tmp_path: Path) -> None:
    only = tmp_path / "allure-only"
    shutil.copytree(reports / "allure-results", only / "allure-results")
    assert cells_from(only) == EXPECTED


def test_adapted_cells_carry_messages_times_and_input_digests(reports: Path, tmp_path: Path) -> None:
    case_dir = tmp_path / "cell-results" / "budget-stop"
    case_dir.mkdir(parents=True)
    shutil.copy(reports / "junit.xml", case_dir / "junit.xml")
    [result] = adapt_trials(tmp_path / "cell-results", "budget-stop", CONTRACT.case("budget-stop"),
                           source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, fallback_time=0.0)
    assert result is not None
    checks = {c["id"]: c for c in result.document["checks"]}
    assert "spend was not reported" in checks["spend-reported"]["message"]
    assert result.document["attempt-id"].startswith("adapted-")
    assert result.inputs[0][0] == "budget-stop/junit.xml"
    assert result.started.year >= 2025  # the suite's own timestamp, not the fallback
    bound = admit([CellFile("budget-stop", case="budget-stop", adapted=result)],
                  Binding(SELECTION, HEAD_SHA, PROFILE, list(CONTRACT.cases)))
    decided = verdict(bound[("budget-stop", 1)], CONTRACT.case("budget-stop"))
    assert (decided.status, decided.failed_checks) == ("failed", ("spend-reported",))


def test_the_same_reports_give_the_same_attempt_id(reports: Path, tmp_path: Path) -> None:
    ids = set()
    for name in ("a", "b"):
        case_dir = tmp_path / name / "budget-stop"
        case_dir.mkdir(parents=True)
        shutil.copy(reports / "junit.xml", case_dir / "junit.xml")
        [result] = adapt_trials(tmp_path / name, "budget-stop", CONTRACT.case("budget-stop"), source_sha=HEAD_SHA,
                               profile=PROFILE, selection_sha256=SELECTION, fallback_time=0.0)
        assert result is not None
        ids.add(result.attempt_id)
    assert len(ids) == 1


def test_missing_checks_are_not_recorded_and_break_the_case() -> None:
    case = CONTRACT.case("get-task-context")
    outcomes = [Outcome("test_tool_called", PASSED), Outcome("test_answer_grounded", SKIPPED, "flaky")]
    document = build_cell(case, outcomes, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION,
                          inputs=[("r.xml", "0" * 64)], fallback_time=1_764_000_000.0)
    assert document["disposition"] == "infrastructure_failure"
    checks = {c["id"]: c for c in document["checks"]}
    assert checks["answer-grounded"] == {"id": "answer-grounded", "passed": False, "message":
                                         "not recorded: 1 of 1 mapped test(s) did not run (test_answer_grounded: flaky)"}
    assert checks["cleanup"] == {"id": "cleanup", "passed": False,
                                 "message": "not recorded: no test case of the report ran for this check"}
    assert "not recorded: answer-grounded, cleanup" in document["message"]


def test_a_failed_infrastructure_check_breaks_the_case() -> None:
    case = CONTRACT.case("get-task-context")
    outcomes = [Outcome("test_tool_called", PASSED), Outcome("test_answer_grounded", PASSED),
                Outcome("test_cleanup", FAILED, "left a container running")]
    document = build_cell(case, outcomes, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, inputs=[], fallback_time=0.0)
    assert document["disposition"] == "infrastructure_failure"


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome("anything", PASSED, checks=("cleanup",)), "cleanup"),
    (Outcome("test_check[cleanup]", PASSED), "cleanup"),
    (Outcome("test_tool_called", PASSED), "tool-called"),
    (Outcome("tests/test_x.py::test_tool_called", PASSED), "tool-called"),
    (Outcome("test_tool_called[sonnet]", PASSED), "tool-called"),
    (Outcome("test_unrelated", PASSED), None),
    (Outcome("test_tool_called", PASSED, checks=("not-a-check",)), None),
])
def test_mapping_rules(outcome: Outcome, expected: str | None) -> None:
    assert map_check(outcome, CONTRACT.case("get-task-context").checks) == expected


def test_tests_of_other_cases_are_ignored() -> None:
    case = CONTRACT.case("budget-stop")
    outcomes = [Outcome("test_stopped_at_budget", PASSED), Outcome("test_spend_reported", PASSED),
                Outcome("test_spend_reported", ERROR, case="get-task-context")]
    document = build_cell(case, outcomes, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, inputs=[], fallback_time=0.0)
    assert document["disposition"] == "passed"


# --- JUnit hardening -------------------------------------------------------------------------------

def refused(data: bytes) -> Refusal:
    with pytest.raises(Refusal) as caught:
        parse_junit(data, "r.xml")
    assert caught.value.code == "export.adapter"
    return caught.value


def test_entity_expansion_is_refused_before_parsing() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>' \
           b"<testsuite><testcase name='&lol2;'/></testsuite>"
    assert "DOCTYPE or ENTITY" in refused(bomb).message
    assert "DOCTYPE" in refused(b"<!doctype testsuite SYSTEM 'file:///etc/passwd'><testsuite/>").message


def test_other_encodings_are_refused() -> None:
    utf16 = '<?xml version="1.0" encoding="UTF-16"?><testsuite/>'.encode("utf-16")
    refused(utf16)
    assert "encoding" in refused(b'<?xml version="1.0" encoding="ISO-8859-1"?><testsuite/>').message
    refused(b"<testsuite name='\xff'/>")


def test_depth_and_size_are_capped() -> None:
    deep = b"<testsuites>" + b"<testsuite>" * MAX_DEPTH + b"</testsuite>" * MAX_DEPTH + b"</testsuites>"
    assert "deeper" in refused(deep).message
    huge = b"<testsuite>" + b" " * (32 * 1024 * 1024) + b"</testsuite>"
    assert "larger" in refused(huge).message


def test_malformed_and_foreign_roots_are_refused() -> None:
    refused(b"<testsuite><testcase></testsuite>")
    refused(b"")
    assert "root" in refused(b"<html/>").message


def test_a_bom_and_a_bare_testsuite_root_are_read() -> None:
    data = b"\xef\xbb\xbf<?xml version='1.0' encoding='utf-8'?><testsuite timestamp='2026-12-01T10:00:00'>" \
           b"<testcase name='test_a' time='1.5'><failure message='boom'/></testcase></testsuite>"
    (outcome,) = parse_junit(data)
    assert (outcome.name, outcome.status, outcome.message) == ("test_a", FAILED, "boom")
    assert outcome.start_ms == 1_796_119_200_000  # a timestamp without offset is read as UTC


def junit_spans(data: bytes, suite_start_ms: int = 1_796_119_200_000) -> list[tuple[str, int, int]]:
    """Each test case's name, start and stop, in ms from its suite's timestamp (2026-12-01T10:00:00Z)."""
    return [(o.name, o.start_ms - suite_start_ms, o.stop_ms - suite_start_ms) for o in parse_junit(data)
            if o.start_ms is not None and o.stop_ms is not None]


def test_each_test_case_lasts_its_own_time_laid_end_to_end_in_its_suite() -> None:
    """Issue 27: every case of one suite was given the suite's whole span (721 ms each for a 721 ms suite),
    so a contract case mapped to one quick test seemed to last as long as the suite."""
    data = (b"<testsuites><testsuite timestamp='2026-12-01T10:00:00+00:00' time='3.7'>"
            b"<testcase name='a1' time='0.5'><properties><property name='case' value='a'/></properties></testcase>"
            b"<testcase name='a2' time='0.2'><properties><property name='case' value='a'/></properties></testcase>"
            b"<testcase name='b1' time='3.0'><properties><property name='case' value='b'/></properties></testcase>"
            b"</testsuite></testsuites>")
    assert junit_spans(data) == [("a1", 0, 500), ("a2", 500, 700), ("b1", 700, 3700)]


def test_test_cases_longer_than_their_suite_stay_inside_its_span() -> None:
    # Runners that run tests in parallel state a suite time shorter than the sum of its cases' times (a real
    # pytest file of tests/data/junit/pytest has 2.481 s for 20 s of tests): no case starts before the suite
    # or, where it fits, ends after it.
    data = (b"<testsuite timestamp='2026-12-01T10:00:00+00:00' time='2'>"
            b"<testcase name='x' time='1.5'/><testcase name='y' time='1.5'/><testcase name='z' time='3'/>"
            b"</testsuite>")
    assert junit_spans(data) == [("x", 0, 1500), ("y", 500, 2000), ("z", 0, 3000)]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_ends_in_outcomes_or_an_adapter_refusal(text: str) -> None:
    try:
        parse_junit(text.encode("utf-8"), "fuzz.xml")
    except Refusal as error:
        assert error.code == "export.adapter"


junit_case = st.builds(
    lambda name, kind, message, time: f"<testcase name={json.dumps(name)} time={json.dumps(time)}>"
    + {"pass": "", "fail": f"<failure message={json.dumps(message)}/>", "error": "<error/>", "skip": "<skipped/>"}[kind]
    + "</testcase>",
    st.text(alphabet=st.characters(codec="ascii", exclude_characters='<>&"'), max_size=20),
    st.sampled_from(["pass", "fail", "error", "skip"]),
    st.text(alphabet=st.characters(codec="ascii", exclude_characters='<>&"'), max_size=20),
    st.sampled_from(["0", "1.5", "-3", "nan", "abc", "1,000.5", ""]),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(junit_case, max_size=8), st.sampled_from(["", "2026-12-01T10:00:00+00:00", "garbage"]))
def test_generated_junit_reports_parse_to_one_outcome_per_testcase(cases: list[str], stamp: str) -> None:
    data = f"<testsuites><testsuite timestamp={json.dumps(stamp)}>{''.join(cases)}</testsuite></testsuites>"
    outcomes = parse_junit(data.encode())
    assert len(outcomes) == len(cases)
    assert all(o.status in (PASSED, FAILED, ERROR, SKIPPED) for o in outcomes)


# --- allure-results ----------------------------------------------------------------------------------

def result_file(name: str, status: str, start: int, history: str = "h1") -> tuple[str, bytes]:
    body = {"name": name, "status": status, "start": start, "stop": start + 5, "historyId": history}
    return f"{start}-result.json", json.dumps(body).encode()


def test_retries_fold_to_the_latest_start() -> None:
    outcomes = parse_results([result_file("test_cleanup", "failed", 100), result_file("test_cleanup", "passed", 200),
                              result_file("test_cleanup", "broken", 50)])
    assert [(o.status, o.start_ms) for o in outcomes] == [(PASSED, 200)]


@pytest.mark.parametrize("body", [b"[]", b'{"status": "passed"}', b'{"name": "t", "status": 7}', b"{"])
def test_invalid_allure_results_are_refused(body: bytes) -> None:
    with pytest.raises(Refusal) as caught:
        parse_result(body, "x-result.json")
    assert caught.value.code == "export.adapter"


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "status", "start", "stop", "labels", "parameters", "historyId",
                                        "statusDetails", "fullName"]),
                       st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=10)
                       | st.lists(st.dictionaries(st.sampled_from(["name", "value"]), st.text(max_size=8)), max_size=3),
                       max_size=9))
def test_untrusted_allure_results_end_in_an_outcome_or_an_adapter_refusal(document: dict[str, object]) -> None:
    try:
        _fold, outcome = parse_result(json.dumps(document).encode(), "fuzz-result.json")
    except Refusal as error:
        assert error.code == "export.adapter"
        return
    case = CONTRACT.case("budget-stop")
    cell = build_cell(case, [outcome], source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, inputs=[], fallback_time=0.0)
    adapted_cell(cell, "fuzz", [], "allure-results")  # whatever the input, the adapted cell is schema-valid


# --- the cell-results layout --------------------------------------------------------------------------

def test_layout_reads_cells_and_adapts_case_directories(reports: Path, tmp_path: Path) -> None:
    root = tmp_path / "cell-results"
    (root / "artifact-1").mkdir(parents=True)
    document = {"schema": "testops-evidence/cell-result/v2", "selection-sha256": SELECTION,
                "case": "company-credential-approval",
                "attempt-id": "w1", "disposition": "passed", "started-at": "2026-12-01T10:00:00Z",
                "finished-at": "2026-12-01T10:01:00Z", "source-sha": HEAD_SHA, "profile": PROFILE,
                "checks": [{"id": "secret-saved", "passed": True}, {"id": "approval-recorded", "passed": True}]}
    (root / "artifact-1" / "cell.json").write_text(json.dumps(document))
    (root / "artifact-1" / "transcript.txt").write_text("kept by the worker")
    (root / "budget-stop").mkdir()
    shutil.copy(reports / "junit.xml", root / "budget-stop" / "report.xml")
    (root / ".hidden").write_text("ignored")
    files = collect_cells(root, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, profile=PROFILE,
                          selection_sha256=SELECTION, fallback_time=0.0)
    bound = admit(files, Binding(SELECTION, HEAD_SHA, PROFILE, list(CONTRACT.cases)))
    assert sorted((key, b.cell.origin) for (key, _trial), b in bound.items() if b.cell is not None) == [
        ("budget-stop", "junit"), ("company-credential-approval", "cell")]


def test_reports_in_a_directory_not_named_by_a_case_are_refused(reports: Path, tmp_path: Path) -> None:
    root = tmp_path / "cell-results" / "some-artifact"
    root.mkdir(parents=True)
    shutil.copy(reports / "junit.xml", root / "junit.xml")
    with pytest.raises(Refusal) as caught:
        collect_cells(root.parent, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, profile=PROFILE,
                      selection_sha256=SELECTION, fallback_time=0.0)
    assert (caught.value.code, caught.value.field) == ("export.unattributed", "some-artifact")


def test_unexpected_files_and_links_in_cell_results_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "cell-results"
    root.mkdir()
    (root / "notes.txt").write_text("?")
    with pytest.raises(Refusal) as caught:
        collect_cells(root, {}, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, fallback_time=0.0)
    assert caught.value.code == "export.unattributed"
    (root / "notes.txt").unlink()
    (root / "evil.json").symlink_to("/etc/hostname")
    with pytest.raises(Refusal) as caught:
        collect_cells(root, {}, source_sha=HEAD_SHA, profile=PROFILE, selection_sha256=SELECTION, fallback_time=0.0)
    assert caught.value.code == "io.unsafe_path"


@pytest.mark.parametrize("layout", ["junit.xml", "allure-results/1-result.json"])
def test_a_refused_report_in_the_cell_results_layout_is_named_by_its_whole_path(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "testops-evidence-cells"
    report = root / "budget-stop" / layout
    report.parent.mkdir(parents=True)
    report.write_text("<testsuite>" if layout.endswith(".xml") else "[]", encoding="utf-8")
    with pytest.raises(Refusal) as caught:
        read_case(root, "budget-stop")
    assert caught.value.code == "export.adapter"
    assert caught.value.field == f"{root}/budget-stop/{layout}"  # not just "junit.xml"
    assert f"{root}/budget-stop/{layout}" in caught.value.message
