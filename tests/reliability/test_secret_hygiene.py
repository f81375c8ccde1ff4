"""Secret hygiene: every phase runs with sentinel tokens in every variable a workflow could put them in,
and nothing it emits holds one — outputs, step summary, log (except the ``::add-mask::`` line that tells
the runner what to mask), failure.json, receipts and once-markers, the selection, Allure results and the
published copy, the ledger — nor anything the servers received outside the Authorization header.

Success paths are here; the 62 failure paths of the fault matrix run the same scan
(test_fault_matrix.py), and tests/test_sentinel.py covers the refusals before a phase starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence_support import actions_env, cell, make_selection, small_contract, write_cells, write_contract
from helpers import PhaseRun, holds_secret, run_mode, secret_leaks
from reliability.faults import SENTINEL, Servers, phase_world
from servers.github_server import DEFAULT_TOKEN as GITHUB_SERVER_TOKEN

GH_SENTINEL = "ghs_SENTINEL0hygiene7f3a9c1e5b2d8046a1e9"  # a GitHub token no server here accepts (no run
# of 8 characters of it, such as 8 zeros, may occur in honest output: the scan looks for any piece)

TESTOPS_VARIABLES = ("INPUT_TESTOPS-TOKEN", "INPUT_TESTOPS_TOKEN", "ALLURE_TOKEN", "TESTOPS_TOKEN")
GITHUB_VARIABLES = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")


def token_env(testops: str | None, github: str) -> dict[str, str]:
    env = {name: github for name in GITHUB_VARIABLES}
    if testops is not None:
        env.update({name: testops for name in TESTOPS_VARIABLES})
    return env


def scan(run: PhaseRun, tmp: Path, secrets: set[str], servers: Servers | None = None) -> list[str]:
    """Every place a secret appears: what the phase emitted, every file under ``tmp`` (setup runs'
    outputs and summaries included), and what the servers logged (tokens belong in headers only)."""
    found = []
    for secret in secrets:
        found += [f"{secret[:12]}…: {where}" for where in secret_leaks(run, secret, tmp)]
    if servers is not None and servers.testops is not None:
        logged = repr(servers.testops.log)
        found += [f"TestOps server log holds {s[:12]}…" for s in secrets if holds_secret(logged, s)]
    if servers is not None and servers.github is not None:
        for record in servers.github.log:
            text = record.path + json.dumps(dict(record.headers))
            found += [f"GitHub request {record.path} holds {s[:12]}…" for s in secrets if holds_secret(text, s)]
    return found


TESTOPS_PHASES = ("bootstrap", "launch", "select", "upload", "verify", "reconcile")


# upload and verify run on the evidence fixtures' contract (API-token auth); the JWT exchange (a second
# secret, minted by the server) is covered by the phases whose contract is built here.
TOKEN_PHASES = [(phase, "api-token") for phase in TESTOPS_PHASES] + [
    (phase, "jwt") for phase in ("bootstrap", "launch", "reconcile")]


@pytest.mark.parametrize(("phase", "auth"), TOKEN_PHASES)
def test_a_token_phase_leaks_no_token(phase: str, auth: str, tmp_path: Path) -> None:
    # The phases that read this run over REST (select, and bootstrap, launch and reconcile, which re-admit it)
    # need a token the GitHub server accepts; it is as secret as the other.
    github = GITHUB_SERVER_TOKEN if phase in ("select", "bootstrap", "launch", "reconcile") else GH_SENTINEL
    with phase_world(phase, tmp_path, extra_env=token_env(SENTINEL, github), auth=auth) as (act, servers):
        outcome = act()
        assert outcome.run.exit_code in (0, 1), outcome.run.summary  # the success path (1: a case failed)
        jwts = set(servers.testops._jwts) if servers.testops is not None else set()
        assert (auth == "jwt") == bool(jwts)
        assert scan(outcome.run, tmp_path, {SENTINEL, github, *jwts}, servers) == []
    assert "::add-mask::" + SENTINEL in outcome.run.log


@pytest.mark.parametrize("phase", ["guard", "import"])
def test_a_github_phase_leaks_no_token(phase: str, tmp_path: Path) -> None:
    # The GitHub server's token is SENTINEL here; a TestOps token lying around must not leak either.
    with phase_world(phase, tmp_path, extra_env=token_env("tok-SENTINEL-unused-testops", SENTINEL)) as (act, servers):
        outcome = act()
        assert outcome.run.exit_code == 0, outcome.run.summary
        assert scan(outcome.run, tmp_path, {SENTINEL, "tok-SENTINEL-unused-testops"}, servers) == []
        assert servers.github is not None
        assert any(r.authorization for r in servers.github.log)  # the token went where it belongs
        assert not any(r.authorization for r in servers.github.log if r.route == "blob")


def test_worker_phases_and_check_leak_no_token(tmp_path: Path) -> None:
    # Workers may see a GitHub token (never a TestOps one: test_sentinel.py); it must not reach their output.
    contract = small_contract()
    env = {**actions_env(), **token_env(None, GH_SENTINEL)}
    selection, digest = make_selection(tmp_path, contract, env)
    contract_path = write_contract(contract, tmp_path / "contract.json")
    write_cells(tmp_path / "cells", [cell(contract, key) for key in ("get-task-context", "budget-stop")], digest)
    base = {"contract": str(contract_path), "selection-path": str(selection), "selection-sha256": digest}
    runs = [
        run_mode("verify-selection", tmp_path, base, env),
        run_mode("export", tmp_path, {**base, "cell-results": str(tmp_path / "cells"),
                                      "results-dir": str(tmp_path / "allure-results")}, env),
        run_mode("check", tmp_path, {"contract": str(contract_path)}, {**env, **token_env(SENTINEL, GH_SENTINEL)}),
    ]
    # export: 1, complete evidence but company-credential-approval has no cell (not recorded, broken)
    assert [run.exit_code for run in runs] == [0, 1, 0], [run.summary for run in runs]
    assert (tmp_path / "allure-results-receipt.json").exists()
    for run in runs:
        assert scan(run, tmp_path, {SENTINEL, GH_SENTINEL}) == []


def test_the_scan_finds_a_planted_token(tmp_path: Path) -> None:
    # Guards the guard: a token in a result file, a ledger or a request body must be reported.
    from servers.testops_server import TestOpsServer
    from testops_evidence.testops.client import TestOpsClient

    (tmp_path / "allure-results").mkdir()
    (tmp_path / "allure-results" / "x-result.json").write_text(json.dumps({"name": SENTINEL}))
    run = PhaseRun(0, {"out": "clean"}, "clean", "::add-mask::" + SENTINEL + "\n", state_dir=tmp_path / "state")
    with TestOpsServer(token=SENTINEL) as server:
        server.add_project(12)
        with TestOpsClient(server.url, SENTINEL, project_id=12) as client:
            client.post("/launch", {"name": SENTINEL, "projectId": 12})
        found = scan(run, tmp_path, {SENTINEL}, Servers(server))
    assert len(found) == 2 and "x-result.json" in found[0] and "TestOps server log" in found[1]
