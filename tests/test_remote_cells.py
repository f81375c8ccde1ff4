"""Imported remote cells join their campaign (issue 16): the ledger's completed attempts of cases measured
remotely become cells of this export — with their provenance in the Allure result, counted in the same
verdicts and totals, the ledger's ordinal being the trial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidence_support import actions_env, make_selection, uuid_factory, write_contract
from helpers import FakeClock, PhaseRun, run_mode
from import_builders import HEAD_SHA, RUN_ID, Cell, artifact_zip, contract_document, dumps, intent_document
from servers.github_server import GitHubServer
from test_import_phase import TOKEN, Importer
from testops_evidence.campaign.receipt import load_receipt
from testops_evidence.contract import Contract, contract_from_document
from testops_evidence.safeio import sha256_bytes

CELLS = [Cell("exec-1", ordinal=1), Cell("exec-2", ordinal=2),
         Cell("exec-3", case="company-credential-approval", ordinal=1, disposition="behavior_failure"),
         Cell("exec-4", case="company-credential-approval", ordinal=2)]


def remote_contract(**edits: Any) -> dict[str, Any]:
    document = contract_document()
    cases = {case["key"]: case for case in document["cases"]}
    cases["get-task-context"].update({"measured-by": "remote", "trials": {"count": 2, "verdict": "all"}})
    cases["company-credential-approval"].update({"measured-by": "remote"})
    document["cases"].append({"key": "local-case", "full-name": "agents/local", "title": "Local", "lane": "native",
                              "checks": {"ok": "behavior"}})
    for key, value in edits.items():
        cases[key].update(value)
    return document


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    with GitHubServer(token=TOKEN) as gh:
        (tmp_path / "import").mkdir()
        importer = Importer(tmp_path / "import", gh, cells=CELLS)
        importer.contract.write_bytes(dumps(remote_contract()))
        importer.intent.write_bytes(dumps(intent_document(CELLS)))
        importer.add_run()
        gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS), artifact_id=501)
        run = importer.run()
        assert run.exit_code == 0, run.summary
        assert run.outputs["ledger-sha256"] == sha256_bytes(importer.ledger.read_bytes())
        return importer.ledger


def export(tmp_path: Path, contract: Contract, ledger: Path | None, **options: str) -> tuple[PhaseRun, Path]:
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    cells = tmp_path / "cells"
    cells.mkdir()
    local = {"schema": "testops-evidence/cell-result/v2", "selection-sha256": digest, "case": "local-case",
             "attempt-id": "local-1", "disposition": "passed", "started-at": "2026-12-01T10:00:00Z",
             "finished-at": "2026-12-01T10:01:00Z", "source-sha": HEAD_SHA, "profile": dict(contract.profile),
             "checks": [{"id": "ok", "passed": True}], "usage": {"input-tokens": 100}}
    (cells / "local.json").write_text(json.dumps(local))
    results = tmp_path / "allure-results"
    opts = {"contract": str(write_contract(contract, tmp_path / "contract.json")), "selection-path": str(selection),
            "selection-sha256": digest, "cell-results": str(cells), "results-dir": str(results), **options}
    if ledger is not None:
        opts["ledger"] = str(ledger)
    run = run_mode("export", tmp_path, opts, env, new_uuid=uuid_factory(), clock=FakeClock(1_796_119_500.0).time)
    return run, results


def test_imported_cells_are_published_with_their_provenance_and_counted(tmp_path: Path, ledger: Path) -> None:
    contract = contract_from_document(remote_contract())
    run, results = export(tmp_path, contract, ledger, **{"ledger-sha256": sha256_bytes(ledger.read_bytes())})
    assert run.exit_code == 1, run.summary  # company-credential-approval's ordinal 1 failed
    receipt = load_receipt(f"{results}-receipt.json")
    rows = {row["key"]: row for row in receipt.results}
    assert rows["get-task-context"]["status"] == "passed"
    assert [t["attempt-id"] for t in rows["get-task-context"]["trials"]] == [
        f"remote-{RUN_ID}-1-exec-1", f"remote-{RUN_ID}-1-exec-2"]
    assert rows["company-credential-approval"]["status"] == "failed"
    assert rows["local-case"]["status"] == "passed"
    assert receipt.counts == {"total": 3, "passed": 2, "failed": 1, "broken": 0}
    assert receipt.document["ledger"] == {
        "path": str(ledger), "sha256": sha256_bytes(ledger.read_bytes()), "cells": 3,
        "not-counted": [{"case": "company-credential-approval", "ordinal": 2,
                         "why": "ordinal 2 is beyond the case's 1 trial(s)"}]}
    # Usage of remote cells counts in the same totals.
    assert receipt.document["usage"]["campaign"]["input-tokens"]["value"] == 3 * 18234 + 100
    # The Allure result carries the provenance: description, a link to the source run, a label, the evidence.
    result = json.loads((results / rows["company-credential-approval"]["result-file"]).read_text())
    assert f"Measured remotely by [`run {RUN_ID}`]" in result["description"]
    assert {"name": "Remote run", "url": f"https://github.com/acme/agents/actions/runs/{RUN_ID}",
            "type": "link"} in result["links"]
    assert {"name": "remote-run", "value": f"acme/agents#{RUN_ID}"} in result["labels"]
    evidence = json.loads((results / rows["company-credential-approval"]["attachment-file"]).read_text())
    remote = evidence["cell"]["remote"]
    assert (remote["source-run-id"], remote["source-artifact-id"], remote["import-key"]) == (RUN_ID, 501,
                                                                                          f"{RUN_ID}/1/exec-3")
    assert len(remote["archive-sha256"]) == 64 and evidence["cell"]["origin"] == "remote"
    assert "### Remote cells" in run.summary and "Not counted" in run.summary


def test_a_changed_ledger_is_refused_and_a_missing_one_leaves_the_remote_cases_not_recorded(
        tmp_path: Path, ledger: Path) -> None:
    contract = contract_from_document(remote_contract())
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    refused, _results = export(tmp_path / "a", contract, ledger, **{"ledger-sha256": "0" * 64})
    assert (refused.exit_code, refused.outputs["error-code"]) == (3, "export.ledger"), refused.summary
    missing, results = export(tmp_path / "b", contract, tmp_path / "no-ledger.json")
    assert missing.exit_code == 1, missing.summary
    rows = {row["key"]: row for row in load_receipt(f"{results}-receipt.json").results}
    assert rows["company-credential-approval"]["reason"] == "not_recorded"


def test_a_worker_cell_for_a_remote_case_refuses_the_export(tmp_path: Path, ledger: Path) -> None:
    contract = contract_from_document(remote_contract())
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    cells = tmp_path / "cells"
    cells.mkdir()
    forged = {"schema": "testops-evidence/cell-result/v2", "selection-sha256": digest,
              "case": "company-credential-approval", "attempt-id": "forged", "disposition": "passed",
              "started-at": "2026-12-01T10:00:00Z", "finished-at": "2026-12-01T10:01:00Z", "source-sha": HEAD_SHA,
              "profile": dict(contract.profile),
              "checks": [{"id": "secret-saved", "passed": True}, {"id": "approval-recorded", "passed": True}]}
    (cells / "forged.json").write_text(json.dumps(forged))
    run = run_mode("export", tmp_path, {"contract": str(write_contract(contract, tmp_path / "contract.json")),
                                        "selection-path": str(selection), "selection-sha256": digest,
                                        "cell-results": str(cells), "results-dir": str(tmp_path / "out"),
                                        "ledger": str(ledger), "ledger-sha256": sha256_bytes(ledger.read_bytes())},
                   env, new_uuid=uuid_factory())
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_origin"), run.summary


def test_inside_actions_a_ledger_is_read_only_with_the_import_jobs_digest(tmp_path: Path, ledger: Path) -> None:
    """Inside Actions the ledger's bytes are bound by the digest the import job output, never taken as found on
    the runner's disk (issue 23)."""
    contract = contract_from_document(remote_contract())
    refused, results = export(tmp_path, contract, ledger)
    assert (refused.exit_code, refused.outputs["error-code"]) == (2, "input.ledger-sha256"), refused.summary
    assert not results.exists()  # refused before anything was written


def test_a_remote_case_has_no_worker_job() -> None:
    from testops_evidence.campaign.matrix import plan_matrices

    contract = contract_from_document(remote_contract())
    plan = plan_matrices(contract.cases, contract.lanes)
    assert list(plan.jobs()) == ["native-local-case"]
    assert contract.case("company-credential-approval").row()["measured-by"] == "remote"
