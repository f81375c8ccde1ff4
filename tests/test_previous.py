"""The previous campaign (issue 16): ``rerun-from`` selects what did not pass as a new campaign of this run,
and ``compare-with`` binds a baseline whose changes the export and verify summaries show."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import actions_env, bound_to, cell, make_selection, uuid_factory, write_contract
from helpers import FakeClock, PhaseRun, run_mode
from servers.github_server import GitHubServer
from test_selection_support import REPOSITORY, RUN_ID, WORKFLOW, github_with_run, select_job_env
from test_trials import contract_of, trial_cell, trials_document
from testops_evidence.campaign.previous import compare, newcombe
from testops_evidence.campaign.receipt import receipt_from_bytes
from testops_evidence.contract import Contract
from testops_evidence.safeio import sha256_bytes

EARLIER = RUN_ID - 7


def document(**trials: dict[str, Any]) -> dict[str, Any]:
    return trials_document(**trials)


def earlier_export(tmp_path: Path, contract: Contract, cells: list[dict[str, Any]],
                   run_id: int = EARLIER) -> Path:
    """The receipt an export of an earlier run of the same workflow wrote."""
    work = tmp_path / f"run-{run_id}"
    work.mkdir()
    env = actions_env(GITHUB_RUN_ID=str(run_id))
    selection, digest = make_selection(work, contract, env)
    cell_dir = work / "cells"
    cell_dir.mkdir()
    for index, item in enumerate(cells):
        (cell_dir / f"{index}.json").write_text(json.dumps(bound_to(item, digest)))
    results = work / "allure-results"
    run = run_mode("export", work, {"contract": str(write_contract(contract, work / "contract.json")),
                                    "selection-path": str(selection), "selection-sha256": digest,
                                    "cell-results": str(cell_dir), "results-dir": str(results)},
                   env, new_uuid=uuid_factory("11111111-0000-4000-8000"), clock=FakeClock(1_796_000_000.0).time)
    assert run.exit_code in (0, 1), run.summary
    return Path(f"{results}-receipt.json")


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with github_with_run() as server:
        yield server


def select(tmp_path: Path, github: GitHubServer, contract: Contract, **options: str) -> PhaseRun:
    env = select_job_env(github, tmp_path)
    opts = {"contract": str(write_contract(contract, tmp_path / "contract.json")),
            "selection-path": str(tmp_path / "out" / "selection.json"), **options}
    return run_mode("select", tmp_path, opts, env)


def export(tmp_path: Path, github: GitHubServer, contract: Contract, cells: list[dict[str, Any]],
           digest: str) -> tuple[PhaseRun, Path]:
    env = {k: v for k, v in select_job_env(github, tmp_path).items() if k != "GITHUB_TOKEN"}
    cell_dir = tmp_path / "cells"
    cell_dir.mkdir()
    for index, item in enumerate(cells):
        (cell_dir / f"{index}.json").write_text(json.dumps(bound_to(item, digest)))
    results = tmp_path / "allure-results"
    run = run_mode("export", tmp_path, {"contract": str(tmp_path / "contract.json"),
                                        "selection-path": str(tmp_path / "out" / "selection.json"),
                                        "selection-sha256": digest, "cell-results": str(cell_dir),
                                        "results-dir": str(results)}, env, new_uuid=uuid_factory(),
                   clock=FakeClock(1_796_119_500.0).time)
    return run, results


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# --- rerun-from ------------------------------------------------------------------------------------------


def test_rerun_from_selects_only_the_cases_that_did_not_pass_as_a_new_campaign(tmp_path: Path,
                                                                               github: GitHubServer) -> None:
    contract = contract_of(document())
    receipt = earlier_export(tmp_path, contract, [
        cell(contract, "flaky", disposition="behavior_failure", failed=["answer"]), cell(contract, "steady")])
    digest = sha256_bytes(receipt.read_bytes())
    run = select(tmp_path, github, contract, **{"rerun-from": str(receipt), "rerun-from-sha256": digest})
    assert run.exit_code == 0, run.summary
    selection = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert [case["key"] for case in selection["cases"]] == ["flaky", "human"]  # failed, and not recorded
    assert selection["source"] == "rerun"
    rerun = selection["rerun-of"]
    assert (rerun["run-id"], rerun["receipt-sha256"], rerun["cases"], rerun["of"]) == (
        EARLIER, digest, ["flaky", "human"], 3)
    assert selection["context"]["run-id"] == RUN_ID  # a new campaign, bound to this run
    assert f"**Re-run** of [run {EARLIER}]" in run.summary and "selects the 2 of its 3 cases" in run.summary
    # The export of the re-run links the two campaigns in its summary and receipt.
    again, results = export(tmp_path, github, contract, [cell(contract, "flaky"), cell(contract, "human")],
                            run.outputs["selection-sha256"])
    assert again.exit_code == 0, again.summary
    assert f"re-run of | [run {EARLIER}]" in again.summary
    assert json.loads(Path(f"{results}-receipt.json").read_text())["rerun-of"]["receipt-sha256"] == digest


@pytest.mark.parametrize(("change", "code"), [
    ("digest", "selection.rerun_digest"),
    ("profile", "selection.rerun_from"),
    ("all-passed", "selection.empty"),
    ("with-cases", "input.rerun-from"),
])
def test_rerun_from_refuses_what_it_cannot_re_run(tmp_path: Path, github: GitHubServer, change: str,
                                                  code: str) -> None:
    contract = contract_of(document())
    earlier = contract
    if change == "profile":
        other = document()
        other["profile"]["model"] = "another-model"
        earlier = contract_of(other)
    cells = ([cell(earlier, key) for key in ("flaky", "steady", "human")] if change == "all-passed"
             else [cell(earlier, "flaky", disposition="behavior_failure", failed=["answer"])])
    receipt = earlier_export(tmp_path, earlier, cells)
    digest = sha256_bytes(receipt.read_bytes()) if change != "digest" else "0" * 64
    options = {"rerun-from": str(receipt), "rerun-from-sha256": digest}
    if change == "with-cases":
        options["cases"] = "flaky"
    run = select(tmp_path, github, contract, **options)
    assert run.outputs["error-code"] == code, run.summary
    assert not (tmp_path / "out" / "selection.json").exists()


def test_rerun_from_a_run_finds_its_receipt_in_that_runs_artifacts(tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_of(document())
    receipt = earlier_export(tmp_path, contract, [cell(contract, "flaky"), cell(contract, "steady")])
    data = receipt.read_bytes()
    github.add_run(REPOSITORY, EARLIER, path=WORKFLOW, status="completed", conclusion="failure")
    github.add_artifact(EARLIER, "testops-evidence-cells-1-native-flaky", zipped({"flaky.json": b"{}"}))
    archive = zipped({"allure-results-receipt.json": data, "allure-results/x-result.json": b"{}"})
    github.add_artifact(EARLIER, "testops-evidence-results-1", archive)
    run = select(tmp_path, github, contract, **{"rerun-from": f"run:{EARLIER}", "rerun-from-sha256": sha256_bytes(data)})
    assert run.exit_code == 0, run.summary
    rerun = json.loads((tmp_path / "out" / "selection.json").read_text())["rerun-of"]
    assert (rerun["source"], rerun["artifact"], rerun["cases"]) == ("artifact", "testops-evidence-results-1", ["human"])
    assert rerun["artifact-sha256"] == sha256_bytes(archive)


# --- compare-with ----------------------------------------------------------------------------------------


def publish_earlier(github: GitHubServer, receipt: Path, run_id: int = EARLIER) -> None:
    github.add_run(REPOSITORY, run_id, path=WORKFLOW, head_branch="main", status="completed", conclusion="failure")
    artifact = github.add_artifact(run_id, f"testops-evidence-report-agent-protocol-{run_id}-1",
                                   zipped({"allure-results-receipt.json": receipt.read_bytes(), "history.jsonl": b""}))
    github.record_upload(run_id, artifact, job="campaign / publish", what="publication")


def test_the_comparison_shows_every_category_and_lists_the_regressions(tmp_path: Path, github: GitHubServer) -> None:
    doc = document(flaky={"count": 10, "verdict": {"at-least": 1}, "jobs": "per-case"})
    doc["cases"].append({"key": "extra", "testops-id": 14, "full-name": "agents/extra", "title": "Extra",
                         "lane": "native", "checks": {"answer": "behavior"}})
    next(c for c in doc["cases"] if c["key"] == "steady")["deterministic"] = True  # one flip is a regression
    contract = contract_of(doc)
    usage = {"cost-nanodollars": 1_000_000_000}
    before = earlier_export(tmp_path, contract, [
        *[{**trial_cell(contract, "flaky", n), "usage": usage} for n in range(1, 11)],  # 10/10
        {**cell(contract, "steady"), "usage": usage},                                       # passed
        cell(contract, "human", disposition="behavior_failure", failed=["approved"]),        # failed
        # extra: not recorded (broken)
    ])
    publish_earlier(github, before)
    run = select(tmp_path, github, contract, **{"compare-with": "previous", "cases": "flaky,steady,human,extra"})
    assert run.exit_code == 0, run.summary
    selection = json.loads((tmp_path / "out" / "selection.json").read_text())
    baseline = selection["baseline"]
    assert (baseline["run-id"], baseline["comparable"], baseline["contract-sha256"]) == (EARLIER, True, contract.digest)
    assert (tmp_path / "out" / baseline["receipt-file"]).read_bytes() == before.read_bytes()
    assert "**Baseline:** [run" in run.summary and "comparable" in run.summary
    current = [
        *[{**trial_cell(contract, "flaky", n, failed=() if n <= 2 else ("answer",)), "usage": usage}
          for n in range(1, 11)],                                                            # 2/10: beyond noise
        cell(contract, "steady", disposition="behavior_failure", failed=["answer"]),         # newly failing
        cell(contract, "human"),                                                              # fixed
        # extra: still not recorded                                                           # still failing
    ]
    exported, results = export(tmp_path, github, contract, current, run.outputs["selection-sha256"])
    assert exported.exit_code == 1, exported.summary
    comparison = json.loads(Path(f"{results}-receipt.json").read_text())["comparison"]
    categories = comparison["categories"]
    assert [e["key"] for e in categories["newly-failing"]] == ["steady"]
    assert [e["key"] for e in categories["fixed"]] == ["human"]
    assert [e["key"] for e in categories["still-failing"]] == ["extra"]
    assert [(e["key"], e["baseline"], e["current"]) for e in categories["pass-rate-drop"]] == [("flaky", "10/10", "2/10")]
    assert comparison["regressions"] == [
        {"key": "steady", "kind": "newly-failing", "baseline": "passed", "current": "failed"},
        {"key": "flaky", "kind": "pass-rate-drop", "baseline": "10/10", "current": "2/10"}]
    assert comparison["cost"]["change"] == (10 - 11) * 1_000_000_000 + 0  # steady reported no cost this time
    # Fisher's exact test of 10/10 against 2/10 (p = 0.000714), Benjamini-Hochberg across the 3 cases both
    # measured (flaky, steady 1/1 -> 0/1, human 0/1 -> 1/1): adjusted 0.00214.
    flaky = categories["pass-rate-drop"][0]
    assert (flaky["p-value"], flaky["adjusted-p-value"]) == (0.0007145, 0.002143)
    assert comparison["flags"] == {"test": "fisher-exact", "correction": "benjamini-hochberg", "q": 0.05,
                                   "compared": 3, "flagged": 1}
    # Paired over the same 3 cases: flaky -0.8, steady -1, human +1 -> mean -0.266667
    difference = comparison["difference"]
    assert (difference["mean"], difference["cases"], difference["verdict"]) == (-0.266667, 3, "no detectable change")
    assert (difference["only-baseline"], difference["only-current"]) == (0, 0)
    assert json.loads(exported.outputs["comparison-difference"]) == difference
    assert "Campaign pass rate: no detectable change" in exported.summary
    assert json.loads(exported.outputs["regressions"]) == comparison["regressions"]
    assert exported.outputs["comparison"] == "compared"
    assert "2 regression(s)." in exported.summary and "pass rate dropped beyond noise" in exported.summary


def test_new_and_not_selected_cases_are_named(tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_of(document())
    publish_earlier(github, earlier_export(tmp_path, contract, [cell(contract, "flaky"), cell(contract, "steady")]))
    run = select(tmp_path, github, contract, **{"compare-with": "previous", "cases": "steady,human"})
    exported, results = export(tmp_path, github, contract, [cell(contract, "steady"), cell(contract, "human")],
                               run.outputs["selection-sha256"])
    categories = json.loads(Path(f"{results}-receipt.json").read_text())["comparison"]["categories"]
    assert [e["key"] for e in categories["not-selected"]] == ["flaky"]
    assert categories["new"] == [] and [e["key"] for e in categories["fixed"]] == ["human"]
    assert exported.outputs["regressions"] == "[]"
    # verify shows the same comparison, from the receipt it verified.
    env = {k: v for k, v in select_job_env(github, tmp_path).items() if k != "GITHUB_TOKEN"}
    base = {"contract": str(tmp_path / "contract.json"), "results-dir": str(results), "backend": "files",
            "state-dir": str(tmp_path / "state"), "report": "never",
            "receipt-sha256": exported.outputs["receipt-sha256"],
            "selection-path": str(tmp_path / "out" / "selection.json"),
            "selection-sha256": run.outputs["selection-sha256"]}
    assert run_mode("upload", tmp_path, base, env).exit_code == 0
    verify = run_mode("verify", tmp_path, base, env)
    assert (verify.exit_code, verify.outputs["comparison"], verify.outputs["regressions"]) == (0, "compared", "[]")
    assert "### Compared with the previous campaign" in verify.summary
    # The pass rate over the last runs (issue 25): the baseline's and this run's, as a Mermaid chart with only
    # our labels, and a table.
    assert "### Pass rate over the last runs" in verify.summary, verify.summary
    assert f'x-axis ["run {EARLIER}", "run {RUN_ID}"]' in verify.summary
    assert "    line [100.0, 100.0]" in verify.summary  # every measured case passed in both runs
    assert verify.outputs["pass-rate"] == "1.0" and json.loads(verify.outputs["pass-rate-ci"]) == [1.0, 1.0]
    # The trend travels down the chain of baselines: a run comparing with this one sees both earlier runs.
    receipt = receipt_from_bytes(Path(f"{results}-receipt.json").read_bytes(), "receipt")
    later = compare(receipt.results, receipt, None, cases={c.key: c for c in contract.cases},
                    policy=contract.statistics)
    assert [p["run-id"] for p in later["trend"]] == [EARLIER, RUN_ID]


def test_a_baseline_of_another_contract_is_not_comparable(tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_of(document())
    other = document()
    other["cases"][0]["title"] = "Flaky, renamed"
    publish_earlier(github, earlier_export(tmp_path, contract_of(other), [cell(contract_of(other), "flaky")]))
    run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    assert run.exit_code == 0, run.summary
    baseline = json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"]
    assert baseline["comparable"] is False and "another contract" in baseline["why-not"]
    assert "**not comparable**" in run.summary
    exported, _results = export(tmp_path, github, contract, [cell(contract, key) for key in ("flaky", "steady", "human")],
                               run.outputs["selection-sha256"])
    assert (exported.outputs["comparison"], exported.outputs["regressions"]) == ("not-comparable", "[]")
    assert "**Not comparable:**" in exported.summary and "nothing is compared" in exported.summary


def test_no_earlier_publication_means_no_baseline(tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_of(document())
    run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    assert run.exit_code == 0, run.summary
    assert json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"] is None
    assert "**Baseline:** none" in run.summary


def test_a_changed_baseline_file_refuses_the_export(tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_of(document())
    publish_earlier(github, earlier_export(tmp_path, contract, [cell(contract, "flaky")]))
    run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    baseline = json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"]
    path = tmp_path / "out" / baseline["receipt-file"]
    path.write_bytes(path.read_bytes().replace(b'"failed"', b'"passed"'))
    exported, _results = export(tmp_path, github, contract, [cell(contract, "flaky")], run.outputs["selection-sha256"])
    assert (exported.exit_code, exported.outputs["error-code"]) == (3, "selection.baseline"), exported.summary


def test_the_difference_interval_matches_newcombes_published_values() -> None:
    # Newcombe (1998), "Interval estimation for the difference between independent proportions", Statistics
    # in Medicine 17:873-890, table II, method 10: 56/70 - 48/80 -> 0.0524 to 0.3339; 5/56 - 0/29 ->
    # -0.0381 to 0.1926.
    low, high = newcombe(48, 80, 56, 70)  # the change from 48/80 to 56/70
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    low, high = newcombe(0, 29, 5, 56)
    assert (round(low, 4), round(high, 4)) == (-0.0381, 0.1926)


def test_without_a_publication_artifact_the_baseline_is_the_earlier_exports_results(tmp_path: Path,
                                                                                    github: GitHubServer) -> None:
    """The TestOps backend publishes no report artifact; every campaign uploads its export (results + receipt)."""
    contract = contract_of(document())
    receipt = earlier_export(tmp_path, contract, [cell(contract, "flaky")])
    github.add_run(REPOSITORY, EARLIER, path=WORKFLOW, head_branch="main", status="completed", conclusion="failure")
    artifact = github.add_artifact(EARLIER, "testops-evidence-results-1",
                                   zipped({"allure-results-receipt.json": receipt.read_bytes()}))
    github.record_upload(EARLIER, artifact, job="campaign / export", what="results")
    run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    assert run.exit_code == 0, run.summary
    baseline = json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"]
    assert (baseline["artifact"], baseline["run-id"], baseline["comparable"]) == (
        "testops-evidence-results-1", EARLIER, True)


def test_a_stochastic_single_trial_flip_is_shown_but_is_no_regression(tmp_path: Path, github: GitHubServer) -> None:
    """Issue 25: with one trial per case every stochastic flip used to be "newly failing", a regression. Now a
    flip is listed as changed; only the contract's deterministic cases make it a regression. The contract's
    statistics (Holm at q = 0.01) and clusters reach the receipt."""
    doc = trials_document(cases=40)
    doc["statistics"] = {"q": 0.01, "correction": "holm"}
    for case in doc["cases"]:
        if case["key"] < "bulk-0010":
            case["cluster"] = "shared-sandbox"
    next(c for c in doc["cases"] if c["key"] == "bulk-0039")["deterministic"] = True
    contract = contract_of(doc)
    keys = [case.key for case in contract.cases]
    publish_earlier(github, earlier_export(tmp_path, contract, [cell(contract, key) for key in keys]))
    run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    assert run.exit_code == 0, run.summary
    failing = {"bulk-0000", "bulk-0039"}
    current = [cell(contract, key, disposition="behavior_failure",
                    failed=["approved"] if key == "human" else ["answer"]) if key in failing else cell(contract, key)
               for key in keys]
    exported, results = export(tmp_path, github, contract, current, run.outputs["selection-sha256"])
    receipt = json.loads(Path(f"{results}-receipt.json").read_text())
    comparison = receipt["comparison"]
    assert sorted(e["key"] for e in comparison["categories"]["newly-failing"]) == sorted(failing)
    assert comparison["regressions"] == [
        {"key": "bulk-0039", "kind": "newly-failing", "baseline": "passed", "current": "failed"}]
    assert comparison["flags"] == {"test": "fisher-exact", "correction": "holm", "q": 0.01, "compared": 43,
                                   "flagged": 0}
    assert "Holm at q = 0.01 across the 43 cases" in exported.summary
    # 41 of 43 cases passed; bulk-0000..0009 are one cluster: 43 - 10 + 1 groups.
    rate = receipt["statistics"]["pass-rate"]
    assert (rate["mean"], rate["cases"], rate["clusters"]) == (round(41 / 43, 6), 43, 34)
    assert exported.outputs["pass-rate"] == str(round(41 / 43, 6))
    assert json.loads(exported.outputs["pass-rate-ci"]) == rate["interval-95"]
    assert json.loads(exported.outputs["comparison-difference"])["verdict"] == "no detectable change"
