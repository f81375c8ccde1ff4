"""promptfoo results become cell results: results written by the REAL promptfoo in this test run (offline, a
local provider, three repeats), a committed corpus (one file per supported promptfoo version), and
hostile files.

The campaign is examples/promptfoo/promptfooconfig.yaml: passing, flaky (fails one repeat),
erroring, failing, and threshold-passed tests, each one case of examples/contract.yml.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_support import HEAD_SHA, actions_env, example_contract, write_contract
from framework_support import CORPUS, EXAMPLES, PRODUCERS, PROMPTFOO, mutate, need_promptfoo, run_producer
from helpers import run_mode
from testops_evidence.campaign.cells import adapted_cell, cell_from_bytes
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters.frameworks import framework_cell
from testops_evidence.readers.adapters.layout import collect_cells
from testops_evidence.readers.adapters.promptfoo import read_results

CONTRACT = example_contract()
PROFILE = dict(CONTRACT.profile)
DIGEST = "5e" * 32  # the digest of the selection the cells belong to


def worker_env() -> dict[str, str]:
    """A case command's environment in the campaign template: the selection's digest is given."""
    return {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST}
VERSIONS = sorted(path.name for path in CORPUS.glob("promptfoo-*"))
REPEATS = 3

EXPECTED: dict[str, tuple[str, dict[str, str]]] = {
    "get-task-context": ("passed", {"tool-called": "", "answer-grounded": "", "cleanup": ""}),
    "list-open-issues": ("behavior_failure", {
        "tool-called": "", "cleanup": "",
        "filtered-correctly": "failed: test 4 prompt 0 (scripted-agent): filtered-correctly: Expected output"}),
    "create-issue-comment": ("infrastructure_failure", {
        check: "error: test 6 prompt 0 (scripted-agent) errored: sandbox did not start"
        for check in ("comment-posted", "no-duplicate-comment", "cleanup")}),
    "checkout-task": ("behavior_failure", {
        "checkout-called-first": "", "conflict-handled": "failed: test 9 prompt 0 (scripted-agent): conflict-handled"}),
    # promptfoo passed this test by its threshold; the failed assertion still fails its check
    "delegate-subtask": ("behavior_failure", {
        "subtask-created": "", "assignee-valid": "", "parent-linked": "failed: test 12 prompt 0"}),
    "budget-stop": ("infrastructure_failure", {
        check: "not recorded: no test case" for check in ("stopped-at-budget", "spend-reported")}),
}


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file written by the installed promptfoo, now."""
    need_promptfoo()
    root = tmp_path_factory.mktemp("promptfoo")
    work = root / "campaign"
    shutil.copytree(EXAMPLES / "promptfoo", work)
    results = root / "results.json"
    # exit 100: some tests failed, which this campaign wants
    run_producer([PROMPTFOO, "eval", "-c", "promptfooconfig.yaml", "-o", results, "--repeat", str(REPEATS), "-j", "1",
                  "--no-cache", "--no-progress-bar", "--no-table"], root / "home", cwd=work, ok_codes=(0, 100))
    return results


def cell_of(path: Path | bytes, key: str) -> dict[str, Any]:
    data = path if isinstance(path, bytes) else path.read_bytes()
    run = read_results(data, "results.json")
    document = framework_cell(CONTRACT.case(key), [("results.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                              inputs=[("results.json", "0" * 64)], fallback_time=1_764_000_000.0, origin="promptfoo")
    adapted_cell(document, "results.json", [], "promptfoo")
    return document


def assert_cells(path: Path | bytes) -> None:
    for key, (disposition, checks) in EXPECTED.items():
        document = cell_of(path, key)
        assert document["disposition"] == disposition, (key, document["message"])
        got = {c["id"]: c for c in document["checks"]}
        assert set(got) == set(checks)
        for check, message in checks.items():
            assert got[check]["passed"] is (message == ""), (key, check, got[check])
            assert got[check].get("message", "").startswith(message), (key, check, got[check])


def test_real_results_become_the_expected_cells(produced: Path) -> None:
    assert_cells(produced)


def test_every_repeat_is_a_trial_that_must_pass(produced: Path) -> None:
    run = read_results(produced.read_bytes(), "results.json")
    units = [u for u in run.units if u.case == "list-open-issues"]
    assert sorted(u.trial for u in units) == list(range(1, REPEATS + 1))
    failing = [o for o in run.outcomes if o.case == "list-open-issues" and o.status == "failed"]
    assert [(o.name, o.trial) for o in failing] == [("filtered-correctly", 2)]


def test_usage_is_what_the_provider_reported(produced: Path) -> None:
    usage = cell_of(produced, "get-task-context")["usage"]
    prompt = len("Task: what is task 42 about")
    assert {k: usage[k] for k in ("input-tokens", "output-tokens", "cost-nanodollars")} == {
        "input-tokens": REPEATS * (100 + prompt), "output-tokens": REPEATS * 25, "cost-nanodollars": REPEATS * 125_000}
    errored = cell_of(produced, "create-issue-comment")
    # The provider errored: it reported no tokens, which the cell says (unavailable), never as zero.
    assert {k: v for k, v in errored.get("usage", {}).items() if k != "duration-ms"} == {
        k: {"coverage": "unavailable"} for k in ("input-tokens", "output-tokens", "cost-nanodollars")}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_committed_corpus_still_reads(version: str) -> None:
    assert_cells(CORPUS / version / "results.json")


def test_the_installed_promptfoo_version_has_a_corpus() -> None:
    setup = (PRODUCERS.parents[1] / "scripts" / "setup.sh").read_text()
    pinned = re.search(r"promptfoo@([0-9.]+)", setup)
    assert pinned is not None and f"promptfoo-{pinned.group(1)}" in VERSIONS


def test_cell_command_and_export_layout(tmp_path: Path, produced: Path) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    out = tmp_path / "cell.json"
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "checkout-task", "promptfoo": str(produced),
                                      "out": str(out)}, worker_env())
    assert run.exit_code == 0, run.summary
    assert cell_from_bytes(out.read_bytes(), out.name).disposition == "behavior_failure"
    root = tmp_path / "cell-results"
    (root / "get-task-context" / "promptfoo").mkdir(parents=True)
    shutil.copy(produced, root / "get-task-context" / "promptfoo" / "results.json")
    cells = collect_cells(root, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                          fallback_time=1_764_000_000.0)
    assert [(f.case, f.adapted.disposition, f.adapted.origin) for f in cells if f.adapted] == [
        ("get-task-context", "passed", "promptfoo")]
    assert PROMPTFOO.exists()


# --- versions and hostile files ------------------------------------------------------------------------


def corpus() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((CORPUS / VERSIONS[-1] / "results.json").read_bytes())
    return document


def refusal(document: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        read_results(json.dumps(document).encode(), "results.json")
    return caught.value


@pytest.mark.parametrize("version", [2, 4])
def test_an_unknown_results_version_is_refused_by_name(version: int) -> None:
    document = corpus()
    document["results"]["version"] = version
    caught = refusal(document)
    assert (caught.code, caught.actual) == ("export.log_version", version)
    assert f"results version {version}" in caught.message


def _first(document: dict[str, Any], case: str) -> dict[str, Any]:
    return next(r for r in document["results"]["results"] if (r["testCase"].get("vars") or {}).get("case") == case)


def _forge_pass(document: dict[str, Any]) -> None:
    errored = _first(document, "create-issue-comment")
    errored["success"] = True
    document["results"]["stats"]["successes"] += 1
    document["results"]["stats"]["errors"] -= 1


def _drop_result(document: dict[str, Any]) -> None:
    document["results"]["results"].pop(4)


@pytest.mark.parametrize(("edit", "code", "words"), [
    (_forge_pass, "export.log_inconsistent", "success with failure reason 2"),
    (_drop_result, "export.log_inconsistent", "stats count 15 results but it holds 14"),
    (lambda d: d["results"]["stats"].update(successes=d["results"]["stats"]["successes"] + 1,
                                            failures=d["results"]["stats"]["failures"] - 1),
     "export.log_inconsistent", "successes"),
    (lambda d: d["results"]["results"].__setitem__(1, copy.deepcopy(d["results"]["results"][0])),
     "export.log_inconsistent", "two results"),
    (lambda d: d["results"]["results"][0].update(promptIdx=5), "export.log_inconsistent", "names prompt 5"),
    (lambda d: d["results"]["results"][0].update(success=False), "export.log_inconsistent", "failure reason 0"),
    (lambda d: d["results"]["results"][0]["response"]["tokenUsage"].update(prompt=2**60), "export.adapter", "range"),
    (lambda d: d["results"].update(timestamp="1970-01-01T00:00:00Z"), "export.adapter", "outside 2000-2200"),
    (lambda d: d["results"]["results"][0].update(failureReason=7), "export.adapter", "failureReason"),
    (lambda d: d.pop("results"), "export.adapter", "no results version"),
])
def test_hostile_results_are_refused(edit: Any, code: str, words: str) -> None:
    document = corpus()
    edit(document)
    caught = refusal(document)
    assert caught.code == code and words in caught.message, caught.message


def test_a_pass_claimed_for_an_assertion_that_never_ran_is_not_recorded() -> None:
    document = corpus()
    for result in document["results"]["results"]:
        if (result["testCase"].get("vars") or {}).get("case") == "get-task-context" and result["testIdx"] == 1:
            result["gradingResult"]["componentResults"] = result["gradingResult"]["componentResults"][:1]
    cell = cell_of(json.dumps(document).encode(), "get-task-context")
    assert cell["disposition"] == "infrastructure_failure"
    not_recorded = [c for c in cell["checks"] if c.get("message", "").startswith("not recorded")]
    assert len(not_recorded) == 2 and "test 1 prompt 0 (scripted-agent) has no result for assertion" in \
        not_recorded[0]["message"]


def test_a_test_promptfoo_failed_as_a_whole_fails_its_checks() -> None:
    document = corpus()
    result = _first(document, "get-task-context")
    result.update(success=False, failureReason=1)
    result["gradingResult"].update({"pass": False, "reason": "score 0.4 is below the threshold 0.5"})
    document["results"]["stats"]["successes"] -= 1
    document["results"]["stats"]["failures"] += 1
    cell = cell_of(json.dumps(document).encode(), "get-task-context")
    assert cell["disposition"] == "infrastructure_failure"  # cleanup, an infrastructure check, failed too
    assert all(not c["passed"] and "failed as a whole: score 0.4 is below" in c["message"] for c in cell["checks"])


def test_duplicate_keys_and_huge_numbers_are_refused() -> None:
    text = (CORPUS / VERSIONS[-1] / "results.json").read_text()
    with pytest.raises(Refusal, match="twice"):
        read_results(text.replace('"evalId":', '"evalId": null, "evalId":', 1).encode(), "r.json")
    with pytest.raises(Refusal, match="digits"):
        read_results(text.replace('"promptIdx": 0', '"promptIdx": ' + "1" * 50, 1).encode(), "r.json")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_mutated_results_are_read_or_refused_never_crash(data: st.DataObject) -> None:
    document = corpus()
    mutate(document["results"], data)
    try:
        run = read_results(json.dumps(document).encode(), "results.json")
    except Refusal as exc:
        assert exc.code in ("export.adapter", "export.log_version", "export.log_inconsistent")
        return
    for key in run.cases() & {c.key for c in CONTRACT.cases}:
        cell = framework_cell(CONTRACT.case(key), [("r.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE, inputs=[],
                              fallback_time=1_764_000_000.0, origin="promptfoo")
        adapted_cell(cell, "r.json", [], "promptfoo")


def test_nan_is_refused_in_promptfoo_results() -> None:
    # promptfoo writes JSON.stringify output, which never holds NaN: the strict reader refuses it.
    text = (CORPUS / VERSIONS[-1] / "results.json").read_text().replace('"latencyMs": 2', '"latencyMs": NaN', 1)
    assert "NaN" in text
    with pytest.raises(Refusal) as caught:
        read_results(text.encode(), "results.json")
    assert caught.value.code == "export.adapter"
