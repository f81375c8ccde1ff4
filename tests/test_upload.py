"""upload and verify on the files backend: a verified copy, a publication receipt, and re-hashing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evidence_support import (
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
    run = run_mode("export", tmp_path, {**options, "selection-path": str(selection), "selection-sha256": digest,
                                        "cell-results": str(tmp_path / "cells")}, env, new_uuid=uuid_factory())
    assert run.exit_code == 1, run.summary
    return options


def phase(mode: str, tmp_path: Path, options: dict[str, str], **env: str) -> PhaseRun:
    clock = FakeClock()
    return run_mode(mode, tmp_path, options, actions_env(**env), clock=clock.time, monotonic=clock.monotonic,
                    sleep=clock.sleep)


def test_upload_then_verify_on_the_files_backend(tmp_path: Path, exported: dict[str, str]) -> None:
    upload = phase("upload", tmp_path, exported)
    assert upload.exit_code == 0, upload.summary
    destination = tmp_path / "state" / "published" / "allure-results"
    assert upload.outputs == {"launch-id": "", "launch-url": destination.as_uri(), "uploaded-count": "3",
                              "published": "true"}
    assert sorted(p.name for p in destination.iterdir()) == sorted(p.name for p in (tmp_path / "allure-results")
                                                                   .iterdir())
    assert (destination.parent / "allure-results-receipt.json").read_bytes() == \
        (tmp_path / "allure-results-receipt.json").read_bytes()
    publication = json.loads((tmp_path / "state" / "upload.json").read_text())
    assert publication["backend"] == "files" and publication["uploaded-count"] == 3

    verify = phase("verify", tmp_path, exported)
    assert verify.exit_code == 1, verify.summary  # verified, but not every case passed
    assert verify.outputs == {"verified-count": "3", "all-passed": "false"}
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
    assert (run.exit_code, run.outputs["error-code"]) == (3, "upload.results_invalid")
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
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.receipt")


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
    ("duplicate", "verify.duplicate", 3),
    ("add", "verify.mismatch", 3),
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
    from testops_evidence.evidence.publication import bundle_name, bundle_parts
    from testops_evidence.evidence.receipt import load_receipt

    receipt = load_receipt(tmp_path / "allure-results-receipt.json")
    evidence = [(row, (tmp_path / "allure-results" / row["attachment-file"]).read_bytes()) for row in receipt.results]
    size = len(evidence[0][1])
    limit = len(receipt.raw) + 4096 + 2 * size  # the receipt and about two entries fit in a part
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
    upload = phase("upload", tmp_path, options)
    verify = phase("verify", tmp_path, options)
    check_golden("upload/files-upload-summary.md", normalise(upload.summary, tmp_path))
    check_golden("upload/files-verify-summary.md", normalise(verify.summary, tmp_path))
