"""The fault matrix: every fault kind of the test servers against every phase that talks to them.

Each case (fault_cases.py) runs the real phase in-process against a real local server with the fault
injected on the phase's key request, and proves:

* the defined exit code and error code (failure.json agrees);
* no duplicated mutation: the server's log holds each mutating request (method, path, body) at most once,
  and exactly as many as the case says were sent;
* the uncertain mutation is recorded: exactly the case's once-markers are pending (what reconcile resolves);
* no partial file: no temp leftovers, every JSON document whole, no selection written by a refused select;
* the sentinel token appears nowhere (outputs, summary, log, state, files).

The table in docs/security.md is generated from the same case list (scripts/gen_security_tables.py);
the last test keeps the document current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import secret_leaks
from reliability.fault_cases import CASES, FAULTS, NOT_APPLICABLE, PHASES, FaultCase
from reliability.faults import SENTINEL, Outcome, world_for
from reliability.integrity import assert_whole
from testops_evidence.safeio import StateDir

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_fault(case: FaultCase, tmp_path: Path) -> None:
    with world_for(case, tmp_path) as act:
        outcome = act()
    run = outcome.run
    assert (run.exit_code, run.outputs.get("error-code")) == (case.exit_code, case.error_code), run.summary
    if case.error_code is not None:
        failure = run.failure()
        assert failure is not None and failure["code"] == case.error_code
        assert f"`{case.error_code}`" in run.summary
    assert len(set(outcome.mutations)) == len(outcome.mutations), f"a mutation was sent twice: {outcome.mutations}"
    assert len(outcome.mutations) == case.mutations, outcome.mutations
    assert StateDir(tmp_path / "state").pending_markers() == sorted(case.pending)
    assert_whole(tmp_path)
    assert secret_leaks(run, SENTINEL, tmp_path) == []
    EXTRA.get(case.id, lambda _outcome, _tmp: None)(outcome, tmp_path)


def _select_wrote_nothing(_outcome: Outcome, tmp: Path) -> None:
    assert not (tmp / "out" / "selection.json").exists()


def _imported_once(outcome: Outcome, tmp: Path) -> None:
    ledger = json.loads((tmp / "ledger" / "campaign-ledger.json").read_bytes())
    assert [record["import-key"] for record in ledger["imports"]] == ["4242/1/exec-1", "4242/1/exec-2"]
    assert (outcome.run.outputs["imported-count"], outcome.run.outputs["duplicate-count"]) == ("2", "2")


def _ledger_untouched(_outcome: Outcome, tmp: Path) -> None:
    assert not (tmp / "ledger" / "campaign-ledger.json").exists()


EXTRA = {
    **{c.id: _select_wrote_nothing for c in CASES if c.phase == "select"},
    **{c.id: _ledger_untouched for c in CASES if c.phase == "import" and c.error_code is not None},
    "import-duplicates": _imported_once,
}


def test_the_matrix_covers_every_phase_and_fault_kind() -> None:
    cells = [(c.phase, c.fault) for c in CASES] + [(n.phase, n.fault) for n in NOT_APPLICABLE]
    assert sorted(cells) == sorted((phase, fault) for phase in PHASES for fault in FAULTS)


def test_docs_security_shows_the_current_matrix() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gen_security_tables
    finally:
        sys.path.remove(str(REPO / "scripts"))
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    assert gen_security_tables.update(text) == text, "docs/security.md is stale: run scripts/gen_security_tables.py"
