"""Refused cells during export: a worker that uploads many invalid cells cannot make export keep their content
(each refusal is kept as evidence without the frames it was raised in)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

from evidence_support import actions_env, cell, make_selection, small_contract, write_cells, write_contract
from helpers import run_mode
from testops_evidence.campaign.cells import Binding, CellFile, admit

CONTRACT = small_contract(cases=3)


def binding(run_attempts: str = "first-only") -> Binding:
    return Binding(selection_sha256="0" * 64, head_sha=actions_env()["GITHUB_SHA"],
                   profile=dict(CONTRACT.profile), selected=list(CONTRACT.cases), run_attempts=run_attempts)


def invalid_cell(key: str, size: int) -> bytes:
    """A cell of the right case and selection whose schema fails on one large value: jsonschema's errors about it
    point at each other and at the value."""
    document = cell(CONTRACT, key)
    document["selection-sha256"] = "0" * 64
    document["usage"] = {"x": "b" * size}
    return json.dumps(document).encode()


def test_a_refused_cell_is_kept_without_its_frames_or_error_chain() -> None:
    key = CONTRACT.cases[0].key
    bound = admit([CellFile(f"{key}.json", case=key, data=invalid_cell(key, 10))], binding())
    rejected = bound[(key, 1)].rejected
    assert rejected is not None and rejected.refusal.code == "export.cell_invalid"
    # The refusal kept as evidence holds no frames (they held the parsed cell) and no error chain.
    assert rejected.refusal.__traceback__ is None and rejected.refusal.__context__ is None


def test_refused_cells_keep_nothing_of_their_content() -> None:
    """The attack: a worker uploads invalid cells of a megabyte each. Each refusal is kept as evidence; before, it
    kept the frames it was raised in, and with them the cell's parsed document (about its size again, per
    cell). The refusal alone stays: once the garbage is collected, what remains is a small part of the input."""
    key = CONTRACT.cases[0].key
    files = [CellFile(f"{key}/{n}.json", case=key, data=invalid_cell(key, 1_000_000)) for n in range(30)]
    given = sum(len(f.data or b"") for f in files)

    def refuse_all() -> tuple[int, object]:
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            bound = admit(files, binding("any"))  # every attempt is read (first-only refuses the second)
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - base, bound
        finally:
            tracemalloc.stop()

    kept, bound = refuse_all()
    assert bound[(CONTRACT.cases[0].key, 1)].rejected is not None  # type: ignore[index]
    assert kept < given / 4, f"{kept / 1e6:.1f} MB kept for {given / 1e6:.1f} MB of refused cells"


def test_export_still_exports_every_other_case_with_a_refused_cell(tmp_path: Path) -> None:
    env = actions_env()
    selection, digest = make_selection(tmp_path, CONTRACT, env)
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    documents = [cell(CONTRACT, c.key) for c in CONTRACT.cases]
    documents[0]["usage"] = {"x": "b" * 1000}
    cells = write_cells(tmp_path / "cells", documents, digest)
    run = run_mode("export", tmp_path, {"contract": str(contract), "selection-path": str(selection),
                                        "selection-sha256": digest, "cell-results": str(cells),
                                        "results-dir": str(tmp_path / "results"), "state-dir": str(tmp_path / "s")},
                   env)
    assert run.exit_code == 1 and run.outputs["broken-count"] == "1" and run.outputs["passed-count"] == "2"
