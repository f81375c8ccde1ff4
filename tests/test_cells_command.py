"""`testops-evidence cell`: a worker writes its cell result from JUnit XML or allure-results."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evidence_support import HEAD_SHA, SENTINEL, actions_env, make_selection, run_pytest, small_contract, write_contract
from helpers import run_mode
from testops_evidence.campaign.cells import cell_from_bytes

CONTRACT = small_contract()

SUITE = '''
import pytest

def test_stopped_at_budget():
    pass

def test_spend_reported():
    assert False, "no spend line in the transcript"
'''


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("worker")
    (root / "test_budget.py").write_text(textwrap.dedent(SUITE))
    done = run_pytest(root, "--junitxml=report.xml", "--alluredir=allure-results", "test_budget.py")
    assert done.returncode == 1, done.stdout
    return root


DIGEST = "5e1ec7" + "0" * 58


def cell_run(tmp_path: Path, env: dict[str, str] | None = None, **options: str):
    """The cell command as a case command runs it in the campaign template: the selection's digest in its env."""
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    env = {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST} if env is None else env
    return run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop", **options}, env)


@pytest.mark.parametrize("source", ["junit", "allure-results"])
def test_cell_from_a_real_report(tmp_path: Path, reports: Path, source: str) -> None:
    report = reports / ("report.xml" if source == "junit" else "allure-results")
    out = tmp_path / "cell-results" / "budget-stop.json"
    run = cell_run(tmp_path, **{source: str(report), "out": str(out)})
    assert run.exit_code == 0, run.summary
    result = cell_from_bytes(out.read_bytes(), out.name)
    assert (result.key, result.disposition) == ("budget-stop", "behavior_failure")
    assert result.document["source-sha"] == HEAD_SHA  # GITHUB_SHA of the worker job
    assert result.document["run-attempt"] == 1
    assert result.document["selection-sha256"] == DIGEST
    assert {c["id"]: c["passed"] for c in result.document["checks"]} == {"stopped-at-budget": True,
                                                                        "spend-reported": False}
    assert "behavior failure" in run.summary


def test_the_profile_and_digest_come_from_the_selection(tmp_path: Path, reports: Path) -> None:
    selection, digest = make_selection(tmp_path, CONTRACT, actions_env())
    out = tmp_path / "cell.json"
    run = cell_run(tmp_path, actions_env(), junit=str(reports / "report.xml"), out=str(out),
                   **{"selection-path": str(selection)})
    assert run.exit_code == 0, run.summary
    written = json.loads(out.read_text())
    assert (written["profile"], written["selection-sha256"]) == (dict(CONTRACT.profile), digest)
    # With a digest too, the file is re-hashed against it: a selection file that changed is refused.
    other = tmp_path / "other.json"
    run = cell_run(tmp_path, junit=str(reports / "report.xml"), out=str(other), **{"selection-path": str(selection)})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.digest")
    assert not other.exists()


def test_a_cell_without_its_selection_digest_is_refused(tmp_path: Path, reports: Path) -> None:
    out = tmp_path / "cell.json"
    run = cell_run(tmp_path, actions_env(), junit=str(reports / "report.xml"), out=str(out))
    assert (run.exit_code, run.outputs["error-code"]) == (2, "input.selection-sha256")
    assert "TESTOPS_EVIDENCE_SELECTION_SHA256" in run.failure()["message"] and not out.exists()


def test_a_cell_is_written_once(tmp_path: Path, reports: Path) -> None:
    out = tmp_path / "cell.json"
    assert cell_run(tmp_path, junit=str(reports / "report.xml"), out=str(out)).exit_code == 0
    again = cell_run(tmp_path, junit=str(reports / "report.xml"), out=str(out))
    # A usage mistake, said before any report is read, with the way out (issue 27: it was an integrity refusal).
    assert (again.exit_code, again.outputs["error-code"]) == (2, "input.out")
    assert "a new --out path" in again.failure()["message"]  # type: ignore[index]


def test_the_worker_token_rule_applies(tmp_path: Path, reports: Path) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop", "junit": str(reports),
                                      "out": str(tmp_path / "c.json")}, {**actions_env(), "TESTOPS_TOKEN": SENTINEL})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "worker.token_present")


@pytest.mark.parametrize(("options", "code"), [
    ({"out": "x.json"}, "input.junit"),
    ({"junit": "r.xml"}, "input.out"),
    ({"junit": "r.xml", "out": "x.json", "attempt-id": "../evil"}, "input.attempt-id"),
    ({"junit": "r.xml", "out": "x.json", "source-sha": "HEAD"}, "input.source-sha"),
])
def test_usage_errors(tmp_path: Path, reports: Path, options: dict[str, str], code: str) -> None:
    options = {k: (str(reports / "report.xml") if v == "r.xml" else str(tmp_path / v) if k == "out" else v)
               for k, v in options.items()}
    run = cell_run(tmp_path, **options)
    assert (run.exit_code, run.outputs["error-code"]) == (2, code)


def test_an_unknown_case_is_refused(tmp_path: Path, reports: Path) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "nope", "junit": str(reports / "report.xml"),
                                      "out": str(tmp_path / "c.json")}, actions_env())
    assert run.outputs["error-code"] == "contract.unknown_case"


def test_a_directory_without_reports_is_refused_naming_what_was_searched(tmp_path: Path) -> None:
    empty = tmp_path / "allure-results"
    (empty / "allure-results").mkdir(parents=True)  # a report directory nested one level too deep
    run = cell_run(tmp_path, **{"allure-results": str(empty), "out": str(tmp_path / "cell.json")})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "export.adapter")
    failure = run.failure()
    assert failure is not None and failure["actual"] == str(empty)  # the path given, not a list with a null
    assert "| actual | `" + str(empty) + "` |" in run.summary


def test_a_refused_report_is_named_by_its_whole_path_not_its_base_name(tmp_path: Path) -> None:
    reports = tmp_path / "reports" / "nightly"
    reports.mkdir(parents=True)
    (reports / "junit.xml").write_text("<testsuite><testcase name='x'>", encoding="utf-8")  # not well-formed
    run = cell_run(tmp_path, junit=str(reports), out=str(tmp_path / "cell.json"))
    assert (run.exit_code, run.outputs["error-code"]) == (2, "export.adapter")
    failure = run.failure()
    assert failure is not None and failure["field"] == str(reports / "junit.xml")
    assert str(reports / "junit.xml") in failure["message"]


def test_a_trial_of_a_repeated_case_names_its_ordinal(tmp_path: Path, reports: Path) -> None:
    """Issue 16: the cell of a trial carries its ordinal, from --trial or the template's TESTOPS_EVIDENCE_TRIAL."""
    from testops_evidence.contract import contract_from_document

    document = json.loads(json.dumps(CONTRACT.document))
    document["trials"] = {"count": 3, "verdict": "any"}
    contract = write_contract(contract_from_document(document), tmp_path / "contract.json")
    env = {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST}
    base = {"contract": str(contract), "case": "budget-stop", "junit": str(reports / "report.xml")}
    first = run_mode("cell", tmp_path, {**base, "out": str(tmp_path / "t1.json")}, {**env, "TESTOPS_EVIDENCE_TRIAL": "1"})
    second = run_mode("cell", tmp_path, {**base, "out": str(tmp_path / "t2.json"), "trial": "2"}, env)
    assert (first.exit_code, second.exit_code) == (0, 0), first.summary + second.summary
    one, two = (json.loads((tmp_path / name).read_text()) for name in ("t1.json", "t2.json"))
    assert (one["trial"], two["trial"]) == (1, 2)
    assert one["attempt-id"] != two["attempt-id"]  # the same reports, yet two trials
    assert "trial 2 of" in second.summary
    unnamed = run_mode("cell", tmp_path, {**base, "out": str(tmp_path / "t3.json")}, env)
    assert (unnamed.exit_code, unnamed.outputs["error-code"]) == (2, "input.trial")
    beyond = run_mode("cell", tmp_path, {**base, "out": str(tmp_path / "t4.json"), "trial": "4"}, env)
    assert beyond.outputs["error-code"] == "input.trial"
