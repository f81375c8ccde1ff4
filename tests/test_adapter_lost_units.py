"""No adapter loses a unit (issue 23, item 3): a result or sample the producer promised and did not deliver
breaks every trial and case it could belong to — never a "trial 0" that belongs to no trial, never a case
named after a sample id.

The property, on real producers' files (tests/data): deleting any one result never turns a check, or a
trial's check, from not passed into passed — for JUnit XML, allure-results, Inspect AI and promptfoo."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_support import HEAD_SHA, example_contract
from framework_support import CORPUS
from testops_evidence.contract import contract_from_document
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import Outcome, build_cell
from testops_evidence.readers.adapters.allure_results import parse_results
from testops_evidence.readers.adapters.frameworks import FrameworkRun, framework_cell
from testops_evidence.readers.adapters.inspect_log import read_log, to_run
from testops_evidence.readers.adapters.junit import parse_junit
from testops_evidence.readers.adapters.promptfoo import read_results

DATA = Path(__file__).resolve().parent / "data"
CONTRACT = example_contract()
PROFILE = dict(CONTRACT.profile)
DIGEST = "5e" * 32
PROMPTFOO = CORPUS / "promptfoo-0.123.1" / "results.json"
INSPECT = CORPUS / "inspect-ai-0.3.285" / "campaign.json"
JUNIT = sorted(path for path in (DATA / "junit").rglob("*.xml"))
ALLURE = DATA / "allure-results" / "allure-pytest"
TRIALS = (None, 1, 2, 3)
Verdicts = dict[tuple[str, int | None, str], bool]  # (case, trial, check) -> passed


def framework_verdicts(read: Callable[[], FrameworkRun]) -> Verdicts:
    """Every check of every contract case, as a whole and per trial (epoch, repeat); a log refused as a
    whole passes nothing."""
    try:
        run = read()
    except Refusal:
        return {}
    verdicts: Verdicts = {}
    for case in CONTRACT.cases:
        for trial in TRIALS:
            document = framework_cell(case, [("log", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST,
                                      profile=PROFILE, inputs=[("log", "0" * 64)], fallback_time=1_764_000_000.0,
                                      origin="log", trial=trial)
            verdicts.update({(case.key, trial, c["id"]): c["passed"] for c in document["checks"]})
    return verdicts


def report_verdicts(outcomes: list[Outcome]) -> Verdicts:
    """Each test name of a report is a check of its own (a one-case contract): the check passes exactly when
    the report's tests of that name ran and passed."""
    names = sorted({outcome.name for outcome in outcomes})
    checks = {name: f"check-{index}" for index, name in enumerate(names)}
    if not checks:
        return {}
    contract = contract_from_document({
        "version": 1, "campaign": "lost-units",
        "trust": {"repository": "acme/agents", "events": ["workflow_dispatch"], "branches": ["main"],
                  "workflows": [".github/workflows/evals.yml"]},
        "profile": {"id": "p"}, "lanes": {"native": {"max-parallel": 1}},
        "cases": [{"key": "one", "full-name": "corpus/one", "title": "One", "lane": "native",
                   "checks": {check: "behavior" for check in checks.values()}}],
    })
    marked = [Outcome(name=o.name, status=o.status, message=o.message, checks=(checks[o.name],)) for o in outcomes]
    document = build_cell(contract.case("one"), marked, source_sha=HEAD_SHA, profile={"id": "p"}, inputs=[],
                          selection_sha256=DIGEST, fallback_time=0.0)
    by_check = {c["id"]: c["passed"] for c in document["checks"]}
    return {("one", None, name): by_check[check] for name, check in checks.items()}


def assert_nothing_gained(before: Verdicts, after: Verdicts) -> None:
    gained = sorted(str(key) for key, passed in after.items() if passed and not before.get(key, False))
    assert not gained, f"deleting one result made these pass: {gained}"


# --- the reproductions of issue 23 ----------------------------------------------------------------------------


def two_prompts() -> dict[str, Any]:
    """The corpus promptfoo file as if run with two prompts: every test has a result for each."""
    document = json.loads(PROMPTFOO.read_text())
    summary = document["results"]
    summary["prompts"].append(copy.deepcopy(summary["prompts"][0]))
    second = []
    for result in summary["results"]:
        twin = copy.deepcopy(result)
        twin["promptIdx"] = 1
        twin["id"] = twin["id"][:-4] + "beef"
        second.append(twin)
    summary["results"] += second
    for counter in ("successes", "failures", "errors"):
        summary["stats"][counter] *= 2
    return document


def promptfoo_cell(document: dict[str, Any], key: str, trial: int | None) -> dict[str, Any]:
    run = read_results(json.dumps(document).encode(), "results.json")
    return framework_cell(CONTRACT.case(key), [("results.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, inputs=[("results.json", "0" * 64)], fallback_time=1_764_000_000.0,
                          origin="promptfoo", trial=trial)


def test_a_promptfoo_result_missing_for_one_prompt_breaks_its_own_trial() -> None:
    """list-open-issues is tests 3, 4, 5 (its repeats): trial 3 is test 5. With test 5's result for prompt 1
    gone, trial 3 used to pass on prompt 0 alone: the missing unit was "trial 0", part of no trial."""
    document = two_prompts()
    assert promptfoo_cell(document, "list-open-issues", 3)["disposition"] == "passed"
    summary = document["results"]
    summary["results"] = [r for r in summary["results"] if (r["testIdx"], r["promptIdx"]) != (5, 1)]
    summary["stats"]["successes"] -= 1  # a self-consistent file: only the result is missing
    cell = promptfoo_cell(document, "list-open-issues", 3)
    assert cell["disposition"] == "infrastructure_failure", cell["message"]
    assert all(not c["passed"] and "test 5 prompt 1" in c["message"] for c in cell["checks"]), cell["checks"]
    # Trial 1 (test 3) is whole: it still passes; the missing unit is charged to its own trial only.
    assert promptfoo_cell(document, "list-open-issues", 1)["disposition"] == "passed"


def test_a_promptfoo_test_missing_in_every_prompt_breaks_every_case() -> None:
    """Test 4 (list-open-issues, repeat 2, failed) gone with all its results: its number is a gap, and the case
    it measured is written in the test alone. Before, list-open-issues passed as two repeats of two."""
    document = json.loads(PROMPTFOO.read_text())
    summary = document["results"]
    summary["results"] = [r for r in summary["results"] if r["testIdx"] != 4]
    summary["stats"]["failures"] -= 1
    for key in ("list-open-issues", "get-task-context"):
        for trial in TRIALS:
            cell = promptfoo_cell(document, key, trial)
            assert cell["disposition"] != "passed", (key, trial)
    assert "test(s) 4 that promptfoo numbered left no result" in promptfoo_cell(document, "get-task-context",
                                                                                 None)["message"]


def inspect_with_a_metadata_sample() -> dict[str, Any]:
    """The corpus campaign log with a second sample of delegate-subtask (id 8, its case named by metadata, as
    sample 7's is), which fails in epoch 2."""
    document = json.loads(INSPECT.read_text())
    extra = []
    for sample in document["samples"]:
        if sample["id"] == 7:
            twin = copy.deepcopy(sample)
            twin["id"] = 8
            twin["uuid"] = str(twin.get("uuid", ""))[:-1] + "8"
            if twin["epoch"] == 2:
                twin["scores"]["subtask"]["value"]["parent_linked"] = "I"
            extra.append(twin)
    document["samples"] += extra
    document["eval"]["dataset"]["sample_ids"].append(8)
    document["eval"]["dataset"]["samples"] += 1
    return document


def inspect_cell(document: dict[str, Any], key: str, trial: int | None = None) -> dict[str, Any]:
    run = to_run(read_log(json.dumps(document).encode(), "campaign.json"))
    return framework_cell(CONTRACT.case(key), [("campaign.json", run)], source_sha=HEAD_SHA,
                          selection_sha256=DIGEST, profile=PROFILE, inputs=[("campaign.json", "0" * 64)],
                          fallback_time=1_764_000_000.0, origin="inspect-log", trial=trial)


def test_an_inspect_sample_dropped_from_the_log_is_not_charged_to_a_case_named_after_its_id() -> None:
    document = inspect_with_a_metadata_sample()
    assert inspect_cell(document, "delegate-subtask")["disposition"] == "behavior_failure"
    document["samples"] = [s for s in document["samples"] if s["id"] != 8]
    for trial in TRIALS:
        cell = inspect_cell(document, "delegate-subtask", trial)
        assert cell["disposition"] == "infrastructure_failure", (trial, cell["message"])
        assert "sample(s) '8' of the eval's dataset are not in the log in any epoch" in cell["message"]
    # It could have measured any case: none of the log passes.
    assert inspect_cell(document, "get-task-context")["disposition"] == "infrastructure_failure"


# --- the property, per adapter ----------------------------------------------------------------------------------

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read_inspect(document: dict[str, Any]) -> Callable[[], FrameworkRun]:
    return lambda: to_run(read_log(json.dumps(document).encode(), "campaign.json"))


def read_promptfoo(document: dict[str, Any]) -> Callable[[], FrameworkRun]:
    return lambda: read_results(json.dumps(document).encode(), "results.json")


INSPECT_BEFORE = framework_verdicts(read_inspect(json.loads(INSPECT.read_text())))
PROMPTFOO_BEFORE = framework_verdicts(read_promptfoo(json.loads(PROMPTFOO.read_text())))
TWO_PROMPTS_BEFORE = framework_verdicts(read_promptfoo(two_prompts()))


@PROPERTY
@given(st.data())
def test_deleting_an_inspect_sample_epoch_never_makes_a_check_pass(data: st.DataObject) -> None:
    document = json.loads(INSPECT.read_text())
    index = data.draw(st.integers(0, len(document["samples"]) - 1))
    del document["samples"][index]
    assert_nothing_gained(INSPECT_BEFORE, framework_verdicts(read_inspect(document)))


@PROPERTY
@given(st.data(), st.booleans(), st.booleans())
def test_deleting_a_promptfoo_result_never_makes_a_check_pass(data: st.DataObject, twice: bool,
                                                              consistent: bool) -> None:
    """One result gone, from the file or from its two-prompt form; ``consistent``: its stats adjusted as well
    (a file that no longer counts the result), else the file contradicts itself and is refused."""
    document = two_prompts() if twice else json.loads(PROMPTFOO.read_text())
    summary = document["results"]
    index = data.draw(st.integers(0, len(summary["results"]) - 1))
    gone = summary["results"].pop(index)
    if consistent:
        kind = "successes" if gone["success"] else "errors" if gone["failureReason"] == 2 else "failures"
        summary["stats"][kind] -= 1
    assert_nothing_gained(TWO_PROMPTS_BEFORE if twice else PROMPTFOO_BEFORE,
                          framework_verdicts(read_promptfoo(document)))


def junit_without(path: Path, index: int) -> bytes | None:
    """The report with its ``index``-th test case removed (None: it has fewer)."""
    root = ET.fromstring(path.read_bytes())  # noqa: S314 - the committed corpus, not untrusted input
    parents = [(parent, child) for parent in root.iter() for child in parent if child.tag == "testcase"]
    if index >= len(parents):
        return None
    parent, child = parents[index]
    parent.remove(child)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8").split(b"?>", 1)[-1]


@PROPERTY
@given(st.sampled_from(JUNIT), st.integers(0, 60))
def test_deleting_a_junit_test_case_never_makes_a_check_pass(path: Path, index: int) -> None:
    reduced = junit_without(path, index)
    if reduced is None:
        return
    before = report_verdicts(parse_junit(path.read_bytes(), path.name))
    try:
        after = report_verdicts(parse_junit(reduced, path.name))
    except Refusal:  # a suite that declares more failed, errored or skipped tests than it holds: nothing passes
        after = {}
    assert_nothing_gained(before, after)


def test_a_suite_that_lost_its_failing_run_of_a_test_passes_nothing() -> None:
    """Found by the property above: two passing runs and one failing run of a test, the failing one deleted. The
    suite still declares its failure, so the report is refused (that case broken) instead of read as passed."""
    fixie = DATA / "junit" / "xunit-converted" / "fixie.xml"
    reduced = junit_without(fixie, 2)
    assert reduced is not None and b'failures="1"' in reduced
    assert report_verdicts(parse_junit(fixie.read_bytes(), fixie.name))[("one", None, "ShouldBeString")] is False
    with pytest.raises(Refusal) as caught:
        parse_junit(reduced, fixie.name)
    assert caught.value.code == "export.adapter" and "declares 1 test(s) that failed" in caught.value.message


def test_deleting_any_allure_result_never_makes_a_check_pass() -> None:
    files = sorted((p.name, p.read_bytes()) for p in ALLURE.glob("*-result.json"))
    before = report_verdicts(parse_results(files))
    for index in range(len(files)):
        after = report_verdicts(parse_results(files[:index] + files[index + 1:]))
        assert_nothing_gained(before, after)
