"""upload and verify on the files backend: a verified copy, a publication receipt, and re-hashing."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    REPO,
    RUN_ID,
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
from helpers import FakeClock, PhaseRun, left_out, run_mode
from testops_evidence.publication import report

ALLURE = REPO / ".tools" / "allure" / "node_modules" / ".bin" / "allure"
needs_allure = pytest.mark.skipif(not ALLURE.exists() or shutil.which("node") is None or left_out("allure") is not None,
                                  reason=left_out("allure") or "Allure Report 3 is not installed: run `bash scripts/setup.sh` (needs npm)")

CONTRACT = small_contract()


@pytest.fixture
def exported(tmp_path: Path) -> dict[str, str]:
    """An export of the small contract (one passed, one failed, one not recorded); returns the options."""
    env = actions_env()
    selection, digest = make_selection(tmp_path, CONTRACT, env)
    write_cells(tmp_path / "cells", [
        cell(CONTRACT, "get-task-context"),
        cell(CONTRACT, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
    ], digest)
    options = {"contract": str(write_contract(CONTRACT, tmp_path / "contract.json")),
               "results-dir": str(tmp_path / "allure-results"), "state-dir": str(tmp_path / "state"),
               "backend": "files"}
    options.update({"selection-path": str(selection), "selection-sha256": digest})
    run = run_mode("export", tmp_path, {**options, "cell-results": str(tmp_path / "cells")}, env,
                   new_uuid=uuid_factory())
    assert run.exit_code == 1, run.summary
    # The HTML report has tests of its own below; here the publication alone (and no Node.js start per test).
    return {**options, "report": "never", "receipt-sha256": run.outputs["receipt-sha256"]}


def phase(mode: str, tmp_path: Path, options: dict[str, str], **env: str) -> PhaseRun:
    clock = FakeClock()
    return run_mode(mode, tmp_path, options, actions_env(**env), clock=clock.time, monotonic=clock.monotonic,
                    sleep=clock.sleep)


def test_upload_then_verify_on_the_files_backend(tmp_path: Path, exported: dict[str, str]) -> None:
    upload = phase("upload", tmp_path, exported)
    assert upload.exit_code == 0, upload.summary
    destination = tmp_path / "state" / "published" / "allure-results"
    assert upload.outputs == {"launch-id": "", "launch-url": destination.parent.as_uri(), "uploaded-count": "3",
                              "published": "true", "publication-dir": str(destination.parent),
                              "publication-name": f"agent-protocol-{RUN_ID}-1", "report-built": "false",
                              "report-tree-sha256": hashlib.sha256(
                                  (destination.parent / "testops-evidence-tree.json").read_bytes()).hexdigest()}
    # The manifest lists every other file of the publication with its digest (pages checks the artifact by it).
    tree = json.loads((destination.parent / "testops-evidence-tree.json").read_text())
    assert sorted(tree["files"]) == ["allure-results-receipt.json", *sorted(
        f"allure-results/{p.name}" for p in destination.iterdir()), "badge.svg"]
    # The status badge (issue 27): the counts, red for a failed case, drawn from the receipt.
    svg = (destination.parent / "badge.svg").read_text()
    assert "1/3 passed, 1 failed, 1 broken" in svg and 'fill="#c62828"' in svg
    assert tree["files"]["badge.svg"] == hashlib.sha256(svg.encode()).hexdigest()
    assert sorted(p.name for p in destination.iterdir()) == sorted(p.name for p in (tmp_path / "allure-results")
                                                                   .iterdir())
    assert (destination.parent / "allure-results-receipt.json").read_bytes() == \
        (tmp_path / "allure-results-receipt.json").read_bytes()
    publication = json.loads((tmp_path / "state" / "upload.json").read_text())
    assert publication["backend"] == "files" and publication["uploaded-count"] == 3

    verify = phase("verify", tmp_path, exported)
    assert verify.exit_code == 1, verify.summary  # verified, but not every case passed
    assert {k: v for k, v in verify.outputs.items() if not k.startswith("attestation")} == {
        "verified-count": "3", "all-passed": "false", "cost-nanodollars": "", "cost-coverage": "unavailable",
        "comparison": "", "regressions": "[]", "comparison-difference": "",
        "pass-rate": "0.5", "pass-rate-ci": "[0.0,1.0]"}  # two cases measured once: one passed
    assert "the publication is complete, but not every case passed" in verify.summary
    assert "budget-stop" in verify.summary


def test_a_second_upload_is_a_no_op(tmp_path: Path, exported: dict[str, str]) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    again = phase("upload", tmp_path, exported)
    assert again.exit_code == 0 and "Already published" in again.summary
    assert again.outputs["published"] == "true"


@pytest.mark.parametrize("tamper", ["change", "remove", "add"])
def test_upload_refuses_a_results_dir_that_differs_from_its_receipt(tmp_path: Path, exported: dict[str, str],
                                                                     tamper: str) -> None:
    results = tmp_path / "allure-results"
    victim = sorted(results.glob("*-result.json"))[1]
    if tamper == "change":
        victim.write_text(victim.read_text().replace('"failed"', '"passed"'))
    elif tamper == "remove":
        victim.unlink()
    else:
        shutil.copy(victim, results / "ffffffff-result.json")
    run = phase("upload", tmp_path, exported)
    code = "io.extra_file" if tamper == "add" else "upload.results_invalid"
    assert (run.exit_code, run.outputs["error-code"]) == (3, code)
    assert not (tmp_path / "state" / "published").exists() or not any((tmp_path / "state" / "published").iterdir())


def test_upload_refuses_a_receipt_of_another_run(tmp_path: Path, exported: dict[str, str]) -> None:
    run = phase("upload", tmp_path, exported, GITHUB_RUN_ID="77")
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.context")


def test_upload_refuses_a_tampered_receipt(tmp_path: Path, exported: dict[str, str]) -> None:
    receipt_path = tmp_path / "allure-results-receipt.json"
    receipt = json.loads(receipt_path.read_text())
    receipt["counts"]["passed"] = 3
    receipt_path.write_text(json.dumps(receipt))
    run = phase("upload", tmp_path, exported)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt_digest")
    # Without the travelled digest (outside Actions), the receipt's own checks still refuse it.
    run = run_mode("upload", tmp_path, {k: v for k, v in exported.items() if k != "receipt-sha256"}, actions=False)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt")


def forge_pass(tmp_path: Path, key: str) -> Path:
    """Issue 12, failure 3: the receipt's row of ``key`` (and its result file) say passed, every digest recomputed."""
    receipt_path = tmp_path / "allure-results-receipt.json"
    receipt = json.loads(receipt_path.read_text())
    row = next(r for r in receipt["results"] if r["key"] == key)
    result_path = tmp_path / "allure-results" / row["result-file"]
    result = json.loads(result_path.read_text())
    result["status"] = "passed"
    result["statusDetails"] = {}  # as an exported pass has it
    result_path.write_text(json.dumps(result))
    row.update(status="passed", reason="passed", **{"result-sha256": hashlib.sha256(result_path.read_bytes()).hexdigest()})
    receipt["counts"] = {"total": 3, "passed": receipt["counts"]["passed"] + 1,
                         **{s: sum(r["status"] == s for r in receipt["results"]) for s in ("failed", "broken")}}
    receipt_path.write_text(json.dumps(receipt))
    return receipt_path


def test_issue_12_failure_3_a_forged_pass_with_recomputed_digests_is_never_published(
        tmp_path: Path, exported: dict[str, str]) -> None:
    forge_pass(tmp_path, "budget-stop")
    for mode in ("upload", "verify"):
        run = phase(mode, tmp_path, exported)
        assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt_digest"), run.summary
    assert not (tmp_path / "state" / "published").exists()


def test_issue_12_failure_3_a_receipt_with_rows_dropped_is_refused(tmp_path: Path, exported: dict[str, str]) -> None:
    receipt_path = tmp_path / "allure-results-receipt.json"
    receipt = json.loads(receipt_path.read_text())
    dropped = [r for r in receipt["results"] if r["status"] != "passed"]
    receipt["results"] = [r for r in receipt["results"] if r["status"] == "passed"]
    receipt["counts"] = {"total": 1, "passed": 1, "failed": 0, "broken": 0}
    for row in dropped:
        (tmp_path / "allure-results" / row["result-file"]).unlink()
        (tmp_path / "allure-results" / row["attachment-file"]).unlink()
    receipt_path.write_text(json.dumps(receipt))
    forged_digest = hashlib.sha256(receipt_path.read_bytes()).hexdigest()
    run = phase("upload", tmp_path, exported)  # the travelled digest
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt_digest")
    # Even with a digest that matches the forged receipt, its rows are not the selection's cases.
    run = phase("upload", tmp_path, {**exported, "receipt-sha256": forged_digest})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt")
    assert "not the selection's cases" in run.summary
    run = phase("verify", tmp_path, {**exported, "receipt-sha256": forged_digest})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt")


@pytest.mark.parametrize("missing", ["receipt-sha256", "selection-sha256"])
def test_upload_and_verify_require_the_travelled_digests_inside_actions(tmp_path: Path, exported: dict[str, str],
                                                                        missing: str) -> None:
    for mode in ("upload", "verify"):
        run = phase(mode, tmp_path, {k: v for k, v in exported.items() if k != missing})
        assert (run.exit_code, run.outputs["error-code"]) == (2, f"input.{missing}")
    assert not (tmp_path / "state" / "published").exists()


def test_a_selection_changed_between_jobs_is_refused_before_anything_is_sent(tmp_path: Path,
                                                                               exported: dict[str, str]) -> None:
    selection = Path(exported["selection-path"])
    selection.chmod(0o600)
    selection.write_bytes(selection.read_bytes().replace(b'"full-plan":true', b'"full-plan":false'))
    run = phase("upload", tmp_path, exported)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.digest")


def test_a_files_backend_export_cannot_go_to_testops(tmp_path: Path, exported: dict[str, str]) -> None:
    run = phase("upload", tmp_path, {**exported, "backend": "testops"})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt")


def test_verify_without_an_upload_is_missing(tmp_path: Path, exported: dict[str, str]) -> None:
    run = phase("verify", tmp_path, exported)
    assert (run.exit_code, run.outputs["error-code"]) == (4, "verify.missing")


def published(tmp_path: Path) -> Path:
    return tmp_path / "state" / "published" / "allure-results"


@pytest.mark.parametrize(("tamper", "code", "exit_code"), [
    ("remove", "verify.missing", 4),
    ("change", "verify.mismatch", 3),
    ("duplicate", "io.extra_file", 3),
    ("add", "io.extra_file", 3),
])
def test_verify_re_reads_and_re_hashes_the_publication(tmp_path: Path, exported: dict[str, str], tamper: str,
                                                       code: str, exit_code: int) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    destination = published(tmp_path)
    victim = sorted(destination.glob("*-result.json"))[0]
    if tamper == "remove":
        victim.unlink()
    elif tamper == "change":
        victim.write_text(victim.read_text().replace('"passed"', '"failed"'))
    elif tamper == "duplicate":
        shutil.copy(victim, destination / "00000000-copy-result.json")
    else:
        (destination / "notes.txt").write_text("extra")
    run = phase("verify", tmp_path, exported)
    assert (run.exit_code, run.outputs["error-code"]) == (exit_code, code)


def test_the_evidence_bundle_splits_into_bounded_parts_in_receipt_order(tmp_path: Path,
                                                                        exported: dict[str, str]) -> None:
    from testops_evidence.campaign.receipt import load_receipt
    from testops_evidence.testops.bundle import bundle_name, bundle_parts

    receipt = load_receipt(tmp_path / "allure-results-receipt.json")
    evidence = [(row, (tmp_path / "allure-results" / row["attachment-file"]).read_bytes()) for row in receipt.results]
    size = len(evidence[0][1])
    from testops_evidence.safeio import canonical_json

    # The receipt (as the bundle carries it: canonical JSON) and about two entries fit in a part.
    limit = len(canonical_json(receipt.document)) + 4096 + 2 * size
    parts = bundle_parts(receipt, evidence, part_limit=limit)
    documents = [json.loads(part) for part in parts]
    assert [d["part"] for d in documents] == list(range(1, len(parts) + 1)) and len(parts) >= 2
    assert all(d["parts"] == len(parts) and d["receipt-sha256"] == receipt.sha256 for d in documents)
    assert documents[0]["receipt"] == receipt.document and all(d["receipt"] is None for d in documents[1:])
    assert [e["uuid"] for d in documents for e in d["evidence"]] == [row["uuid"] for row in receipt.results]
    assert all(len(part) <= limit for part in parts[1:])
    assert bundle_name(receipt, 2, 3).endswith("-part-2-of-3.json")
    (single,) = bundle_parts(receipt, evidence)
    assert json.loads(single)["parts"] == 1


def test_golden_upload_and_verify_summaries(tmp_path: Path) -> None:
    """The files-backend upload and verify summaries, byte for byte (time and UUIDs injected)."""
    env = actions_env()
    selection, digest = make_selection(tmp_path, CONTRACT, env)
    write_cells(tmp_path / "cells", [cell(CONTRACT, "get-task-context"),
                                     cell(CONTRACT, "budget-stop", disposition="behavior_failure",
                                          failed=["spend-reported"])], digest)
    options = {"contract": str(write_contract(CONTRACT, tmp_path / "contract.json")),
               "results-dir": str(tmp_path / "allure-results"), "state-dir": str(tmp_path / "state"),
               "backend": "files"}
    clock = FakeClock(1_796_119_500.0)
    export = run_mode("export", tmp_path, {**options, "selection-path": str(selection), "selection-sha256": digest,
                                           "cell-results": str(tmp_path / "cells")}, env, new_uuid=uuid_factory(),
                      clock=clock.time)
    assert export.exit_code == 1
    options.update({"selection-path": str(selection), "selection-sha256": digest,
                    "receipt-sha256": export.outputs["receipt-sha256"]})
    upload = phase("upload", tmp_path, {**options, "report": "never"})  # Allure's version would vary by machine
    verify = phase("verify", tmp_path, options)
    check_golden("upload/files-upload-summary.md", normalise(upload.summary, tmp_path))
    check_golden("upload/files-verify-summary.md", normalise(verify.summary, tmp_path))


# --- a publication that survives failures ---------------------------------------------------------------------


def test_a_relative_state_dir_publishes_and_verifies(tmp_path: Path, exported: dict[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 17: a relative state-dir copied every file, then failed with internal.error (as_uri of a relative
    # path), and the published/ it left made every re-run fail with io.exists.
    monkeypatch.chdir(tmp_path)
    options = {**exported, "state-dir": "relative-state"}
    upload = phase("upload", tmp_path, options)
    assert upload.exit_code == 0, upload.summary + upload.log
    publication = tmp_path / "relative-state" / "published"
    assert upload.outputs["publication-dir"] == str(publication)
    assert upload.outputs["launch-url"] == publication.as_uri()
    verify = phase("verify", tmp_path, options)
    assert verify.exit_code == 1, verify.summary


def test_what_an_interrupted_upload_left_does_not_block_a_re_run(tmp_path: Path, exported: dict[str, str]) -> None:
    # A job killed after the rename but before upload.json: the directory is there, no record of it.
    state = tmp_path / "state"
    (state / "published" / "allure-results").mkdir(parents=True, mode=0o700)
    (state / "published" / "allure-results" / "half.json").write_text("{}")
    (state / ".published.publish-1-dead").mkdir()  # and a temp dir of a job killed while copying
    upload = phase("upload", tmp_path, exported)
    assert upload.exit_code == 0, upload.summary
    assert not (state / "published" / "allure-results" / "half.json").exists()
    assert not list(state.glob(".published.publish-*"))
    assert "left by an upload that did not finish" in upload.log
    assert phase("verify", tmp_path, exported).exit_code == 1


def test_a_refused_publication_leaves_nothing_and_a_re_run_succeeds(tmp_path: Path, exported: dict[str, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "tool_roots", lambda _env: ())  # no checkout's .tools/allure, and no PATH below
    run = phase("upload", tmp_path, {**exported, "report": "always"}, PATH=str(tmp_path / "no-tools"))
    assert (run.exit_code, run.outputs["error-code"]) == (2, "upload.report")
    failure = run.failure()
    assert failure is not None and "Node.js" in failure["message"] and "actions/setup-node" in failure["hint"]
    state = tmp_path / "state"
    assert not (state / "published").exists() and not list(state.glob(".published*"))
    assert not (state / "upload.json").exists()
    again = phase("upload", tmp_path, exported)
    assert again.exit_code == 0, again.summary


def test_without_node_the_missing_report_is_a_warning_and_a_summary_row(tmp_path: Path, exported: dict[str, str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "tool_roots", lambda _env: ())
    run = phase("upload", tmp_path, {**exported, "report": "auto"}, PATH=str(tmp_path / "no-tools"))
    assert run.exit_code == 0, run.summary
    assert run.outputs["report-built"] == "false"
    assert "::warning title=upload.report::no HTML report was built: Node.js is not installed" in run.log
    assert "⚠️ not built: Node.js is not installed" in run.summary
    assert "without an HTML report" in run.summary


@needs_allure
def test_the_publication_carries_an_allure_report_whose_statistics_equal_the_receipt(
        tmp_path: Path, exported: dict[str, str]) -> None:
    upload = phase("upload", tmp_path, {**exported, "report": "always"})
    assert upload.exit_code == 0, upload.summary + upload.log
    publication = tmp_path / "state" / "published"
    assert sorted(p.name for p in publication.iterdir()) == ["allure-report", "allure-results",
                                                             "allure-results-receipt.json", "badge.svg",
                                                             "history.jsonl", "testops-evidence-tree.json"]
    assert upload.outputs["report-built"] == "true"
    assert upload.outputs["launch-url"] == (publication / "allure-report" / "index.html").as_uri()
    receipt = json.loads((publication / "allure-results-receipt.json").read_text())
    stats = json.loads((publication / "allure-report" / "summary.json").read_text())["stats"]
    assert {k: stats.get(k, 0) for k in ("total", "passed", "failed", "broken")} == receipt["counts"]
    assert len((publication / "history.jsonl").read_text().splitlines()) == 1  # this report, for the next run
    verify = phase("verify", tmp_path, {**exported, "report": "always"})
    assert verify.exit_code == 1 and "Allure Report statistics | equal to the receipt" in verify.summary

    # A report that no longer shows the receipt's counts is caught by verify.
    summary_json = publication / "allure-report" / "summary.json"
    document = json.loads(summary_json.read_text())
    document["stats"]["passed"] = 3
    summary_json.write_text(json.dumps(document))
    tampered = phase("verify", tmp_path, {**exported, "state-dir": str(tmp_path / "state")})
    assert (tampered.exit_code, tampered.outputs["error-code"]) == (3, "verify.mismatch")


@needs_allure
def test_the_report_continues_the_history_of_an_earlier_report(tmp_path: Path, exported: dict[str, str]) -> None:
    first = phase("upload", tmp_path, {**exported, "report": "always", "state-dir": str(tmp_path / "first")})
    assert first.exit_code == 0, first.summary
    earlier = tmp_path / "first" / "published" / "history.jsonl"
    second = phase("upload", tmp_path, {**exported, "report": "always", "state-dir": str(tmp_path / "second"),
                                        "report-history": str(earlier), "history-limit": "5"})
    assert second.exit_code == 0, second.summary
    assert "trends over 1 earlier report(s)" in second.summary
    history = tmp_path / "second" / "published" / "history.jsonl"
    assert len(history.read_text().splitlines()) == 2
    assert earlier.read_text() in history.read_text()  # continued, the earlier file itself untouched


@pytest.mark.parametrize("content", ["not json\n", "[1, 2]\n", '{"testResults": []}\n'])
def test_a_report_history_that_is_not_allure_history_is_refused(tmp_path: Path, exported: dict[str, str],
                                                                content: str) -> None:
    bad = tmp_path / "history.jsonl"
    bad.write_text(content)
    run = phase("upload", tmp_path, {**exported, "report": "auto", "report-history": str(bad)})
    assert (run.exit_code, run.outputs["error-code"]) == (2, "upload.history")
    assert str(bad) in run.failure()["message"]  # type: ignore[index]


# --- the history of earlier runs, through the Actions API ------------------------------------------------------


def history_zip(text: str) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("history.jsonl", text)
    return buffer.getvalue()


def recorded_history(gh: Any, run_id: int, artifact: dict[str, Any], *, job: str = "campaign / publish") -> None:
    """The publish job of ``run_id`` as GitHub records it once the template's history upload and the step named by
    its outputs ran (campaign/workers.py ``HISTORY_REPORT_EXPRESSION``)."""
    gh.record_upload(run_id, artifact, job=job, what="history")


@needs_allure
@pytest.mark.parametrize("earlier", ["valid", "not-history", "none"])
def test_the_history_comes_from_the_newest_earlier_run_with_a_history_artifact(tmp_path: Path, exported: dict[str, str],
                                                                              earlier: str) -> None:
    from servers.github_server import GitHubServer

    token = "ghs_history_sentinel_0123456789"
    first = phase("upload", tmp_path, {**exported, "report": "always", "state-dir": str(tmp_path / "first")})
    assert first.exit_code == 0, first.summary
    line = (tmp_path / "first" / "published" / "history.jsonl").read_text()
    with GitHubServer(token=token) as gh:
        workflow = ".github/workflows/agent-evals.yml"
        gh.add_run("acme/agents", RUN_ID - 20, path=workflow, head_branch="main", status="completed",
                   conclusion="success")
        gh.add_run("acme/agents", RUN_ID - 10, path=workflow, head_branch="main", status="completed",
                   conclusion="failure")  # a run whose cases failed still has a report and a history
        gh.add_run("acme/agents", RUN_ID - 5, path=workflow, head_branch="feature", status="completed")
        gh.add_run("acme/agents", RUN_ID - 1, path=".github/workflows/other.yml", head_branch="main",
                   status="completed")
        if earlier != "none":
            for run_id, name, text in (
                    (RUN_ID - 20, "testops-evidence-history-agent-protocol-old-1", line),
                    (RUN_ID - 10, "testops-evidence-history-agent-protocol-new-1",
                     line if earlier == "valid" else "<html>not history</html>\n")):
                recorded_history(gh, run_id, gh.add_artifact(run_id, name, history_zip(text)))
        for other in (RUN_ID - 5, RUN_ID - 1):  # another branch, another workflow: never used
            gh.add_artifact(other, "testops-evidence-history-agent-protocol-x-1", history_zip("junk\n"))
        run = phase("upload", tmp_path, {**exported, "report": "auto", "state-dir": str(tmp_path / "second"),
                                         "history-artifact": "testops-evidence-history-*"},
                    GITHUB_API_URL=gh.api_url(), **{"INPUT_GITHUB-TOKEN": token})
        requests = [r.route for r in gh.log]
    assert run.exit_code == 0, run.summary + run.log
    history = (tmp_path / "second" / "published" / "history.jsonl").read_text().splitlines()
    if earlier == "valid":
        assert len(history) == 2 and "trends over 1 earlier report(s)" in run.summary
        assert "testops-evidence-history-agent-protocol-new-1" in run.summary  # the newest, not the older one
    elif earlier == "not-history":
        assert len(history) == 1  # left out, with a warning: it only adds trends
        assert "::warning title=upload.history::the history of earlier reports was left out (upload.history" in run.log
    else:
        assert len(history) == 1 and "starts a new history" in run.log
    assert requests.count("workflow_runs") == 1
    assert token not in run.summary and token not in (tmp_path / "second" / "upload.json").read_text()


# --- the publication attestation (issue 12, point 7) ---------------------------------------------------------


def test_verify_attests_the_publication_and_the_attestation_is_rechecked_later(tmp_path: Path,
                                                                              exported: dict[str, str]) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    verify = phase("verify", tmp_path, exported)
    assert verify.exit_code == 1, verify.summary
    statement_path = Path(verify.outputs["attestation-path"])
    assert statement_path == tmp_path / "state" / "publication.intoto.json"
    statement = json.loads(statement_path.read_text())
    receipt_bytes = (tmp_path / "allure-results-receipt.json").read_bytes()
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://testops-evidence.dev/attestation/publication/v1"
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert names["allure-results-receipt.json"] == hashlib.sha256(receipt_bytes).hexdigest()
    published = tmp_path / "state" / "published" / "allure-results"
    assert {n for n in names if n.startswith("allure-results/")} == {f"allure-results/{p.name}"
                                                                      for p in published.iterdir()}
    predicate = statement["predicate"]
    assert (predicate["selection-sha256"], predicate["receipt-sha256"], predicate["backend"]) == (
        exported["selection-sha256"], exported["receipt-sha256"], "files")
    assert predicate["verified"] == {"results": 3, "passed": 1, "failed": 1, "broken": 1, "all-passed": False}
    assert predicate["commit"] == actions_env()["GITHUB_SHA"] and predicate["run"]["run-attempt"] == 1
    assert json.loads(Path(verify.outputs["attestation-predicate-path"]).read_text()) == predicate

    # An auditor, later, with nothing but the files and the statement:
    check = run_mode("verify-attestation", tmp_path, {"attestation": str(statement_path)}, actions=False)
    assert check.exit_code == 0, check.summary
    assert f"{len(names)} files" in check.log
    victim = next(published.glob("*-result.json"))
    victim.chmod(0o600)
    victim.write_text(victim.read_text().replace('"failed"', '"passed"'))
    check = run_mode("verify-attestation", tmp_path, {"attestation": str(statement_path)}, actions=False)
    assert (check.exit_code, check.outputs["error-code"]) == (3, "attestation.mismatch")


def test_verify_attestation_refuses_a_statement_of_another_kind(tmp_path: Path) -> None:
    other = tmp_path / "other.intoto.json"
    other.write_text(json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": [],
                                 "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}))
    check = run_mode("verify-attestation", tmp_path, {"attestation": str(other)}, actions=False)
    assert (check.exit_code, check.outputs["error-code"]) == (3, "attestation.invalid")
