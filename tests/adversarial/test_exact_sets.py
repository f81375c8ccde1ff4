"""Attacks by one extra (or changed) file in a directory a job binds by digests (issue 23, item 2).

A consumer reads every file of a directory, bound or not: Allure Report counts every ``*-result.json`` of an
allure-results directory, a Pages site serves every file of a report. So a job that re-hashes the files its
digests name must also refuse a directory that holds anything else: verify-attestation, verify, pages and
export each end such an attack in ``io.extra_file`` (naming the file), never in "holds" or a publication."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from helpers import run_mode
from test_upload import phase


def extra_result(results: Path, into: Path | None = None) -> Path:
    """A passed twin of a failed result of ``results``: same historyId, a later start, written into ``into``
    (default: beside it). Allure Report shows the latest result of a historyId: the case would read passed."""
    failed = next(p for p in sorted(results.glob("*-result.json")) if json.loads(p.read_text())["status"] == "failed")
    forged = json.loads(failed.read_text())
    forged.update({"uuid": str(uuid.UUID(int=99)), "status": "passed", "start": forged["start"] + 1000,
                   "stop": forged["stop"] + 1000, "statusDetails": {}})
    path = (into or results) / f"{forged['uuid']}-result.json"
    path.write_text(json.dumps(forged))
    return path


def test_an_added_result_file_does_not_let_the_attestation_hold(tmp_path: Path, exported: dict[str, str]) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    verify = phase("verify", tmp_path, exported)
    assert verify.exit_code == 1, verify.summary
    statement = verify.outputs["attestation-path"]
    holds = run_mode("verify-attestation", tmp_path, {"attestation": statement}, actions=False)
    assert holds.exit_code == 0, holds.summary

    published = tmp_path / "state" / "published" / "allure-results"
    published.chmod(0o700)
    forged = extra_result(published)
    check = run_mode("verify-attestation", tmp_path, {"attestation": statement}, actions=False)
    assert (check.exit_code, check.outputs["error-code"]) == (3, "io.extra_file"), check.summary
    assert check.failure()["field"] == forged.name
    # An empty directory is an entry the statement does not list either; a link is refused by the walk.
    forged.unlink()
    (published / "nested").mkdir()
    check = run_mode("verify-attestation", tmp_path, {"attestation": statement}, actions=False)
    assert (check.outputs["error-code"], check.failure()["field"]) == ("io.extra_file", "nested/")
    (published / "nested").rmdir()
    (published / "later-result.json").symlink_to(next(published.glob("*-result.json")).name)
    check = run_mode("verify-attestation", tmp_path, {"attestation": statement}, actions=False)
    assert check.outputs["error-code"] == "io.unsafe_path", check.summary


def test_an_attested_file_that_is_gone_does_not_let_the_attestation_hold(tmp_path: Path,
                                                                        exported: dict[str, str]) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    statement = phase("verify", tmp_path, exported).outputs["attestation-path"]
    published = tmp_path / "state" / "published" / "allure-results"
    published.chmod(0o700)
    gone = next(published.glob("*-result.json"))
    gone.unlink()
    check = run_mode("verify-attestation", tmp_path, {"attestation": statement}, actions=False)
    assert (check.exit_code, check.outputs["error-code"]) == (3, "attestation.mismatch"), check.summary
    assert check.failure()["field"] == gone.name


def test_verify_refuses_a_publication_with_an_extra_file_even_in_a_subdirectory(tmp_path: Path,
                                                                              exported: dict[str, str]) -> None:
    assert phase("upload", tmp_path, exported).exit_code == 0
    published = tmp_path / "state" / "published" / "allure-results"
    published.chmod(0o700)
    (published / "later").mkdir()
    forged = extra_result(published, published / "later")
    run = phase("verify", tmp_path, exported)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "io.extra_file"), run.summary
    assert run.failure()["field"] == f"later/{forged.name}"
    assert not (tmp_path / "state" / "publication.intoto.json").exists()  # nothing attested
