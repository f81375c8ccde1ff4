"""Hostile files, through the real phases: an input that is a symbolic link, a hard link, a path with
``..``, a FIFO, a device or an oversized file; output paths that are planted links; artifact zips with
zip-slip names, absolute names, links, duplicate entries or a bomb. Each is refused with its code, and a
snapshot of the whole workspace proves nothing was written outside the phase's state directory (no
partial output, no write through a link into a victim directory).

tests/test_safeio.py and tests/test_archive.py test the primitives; this file proves every phase reaches
its files only through them.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from evidence_support import actions_env, cell, make_selection, small_contract, write_cells, write_contract
from helpers import PhaseRun, run_mode
from import_builders import (
    CONTRACT_DOCUMENT as IMPORT_CONTRACT,
)
from import_builders import (
    HEAD_SHA as IMPORT_SHA,
)
from import_builders import (
    REPOSITORY as IMPORT_REPOSITORY,
)
from import_builders import (
    RUN_ID as IMPORT_RUN_ID,
)
from import_builders import (
    WORKFLOW as IMPORT_WORKFLOW,
)
from import_builders import (
    Cell,
    artifact_entries,
    dumps,
    intent_document,
    make_zip,
    symlink_entry,
)
from reliability.integrity import assert_whole, snapshot
from servers.github_server import GitHubServer
from testops_evidence.campaign.cells import CELL_LIMIT
from testops_evidence.campaign.selection import SELECTION_LIMIT

FILE_KINDS = ("symlink", "hardlink", "dotdot", "fifo", "device", "oversized")
CODES = {"symlink": "io.unsafe_path", "hardlink": "io.unsafe_path", "dotdot": "io.unsafe_path",
         "fifo": "io.unsafe_path", "device": "io.unsafe_path", "oversized": "io.too_large"}
# What the workspace may gain from a refused phase: its state dir (failure.json) and run_mode's own files.
ALLOWED = ("state", "run-")


def plant(kind: str, path: Path, content: bytes, outside: Path, limit: int) -> str:
    """Make ``path`` the hostile variant of a file holding ``content``; return the path to pass the phase."""
    outside.mkdir(exist_ok=True)
    if kind == "symlink":
        real = outside / f"real-{path.name}"
        real.write_bytes(content)
        path.symlink_to(real)
    elif kind == "hardlink":
        real = outside / f"real-{path.name}"
        real.write_bytes(content)
        os.link(real, path)
    elif kind == "dotdot":
        # The same bytes one level up, named through `..` from a directory of the workspace.
        (path.parent.parent / path.name).write_bytes(content)
        return os.path.join(path.parent.name, "..", "..", path.parent.parent.name, path.name)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.getuid() != 0:
            pytest.skip("creating a device node needs root (CI containers run as root)")
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # what /dev/null is
    elif kind == "oversized":
        with open(path, "wb") as handle:  # sparse: the size is real, the disk use is not
            handle.truncate(limit + 1)
    else:
        raise ValueError(kind)
    return str(path)


@dataclass
class Workspace:
    """A worker workspace of the small campaign: contract, selection and cells, run from ``work``."""

    root: Path
    env: dict[str, str] = field(default_factory=actions_env)

    def __post_init__(self) -> None:
        self.work = self.root / "work"
        self.work.mkdir()
        self.outside = self.root / "outside"  # a victim directory: it must never change
        self.outside.mkdir()
        (self.outside / "victim.json").write_text('{"victim": true}\n')
        self.contract = small_contract()
        self.contract_path = write_contract(self.contract, self.work / "contract.json")
        self.selection, self.digest = make_selection(self.work, self.contract, self.env)
        write_cells(self.work / "cells", [cell(self.contract, "get-task-context")], self.digest)

    def options(self, **changes: Any) -> dict[str, Any]:
        base = {"contract": str(self.contract_path), "selection-path": str(self.selection),
                "selection-sha256": self.digest, "cell-results": str(self.work / "cells"),
                "results-dir": str(self.work / "allure-results"), "state-dir": str(self.root / "state")}
        base.update(changes)
        return base

    def run(self, mode: str, options: dict[str, Any], env: dict[str, str] | None = None, *,
            actions: bool = True) -> PhaseRun:
        return run_mode(mode, self.root, options, env if env is not None else self.env, actions=actions)


def refused_without_writing(ws: Workspace, act: Callable[[], PhaseRun], code: str, exit_code: int = 3) -> PhaseRun:
    before = snapshot(ws.root, skip=ALLOWED)
    run = act()
    assert (run.exit_code, run.outputs.get("error-code")) == (exit_code, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["code"] == code
    assert snapshot(ws.root, skip=ALLOWED) == before, "the refused phase changed the workspace"
    assert_whole(ws.root / "state")
    return run


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    workspace = Workspace(tmp_path)
    monkeypatch.chdir(workspace.work)
    return workspace


# --- inputs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["verify-selection", "export"])
@pytest.mark.parametrize("kind", FILE_KINDS)
def test_a_hostile_selection_file_is_refused(ws: Workspace, mode: str, kind: str) -> None:
    data = ws.selection.read_bytes()
    hostile = ws.work / "sub" / "hostile-selection.json"
    hostile.parent.mkdir()
    given = plant(kind, hostile, data, ws.outside, SELECTION_LIMIT)
    refused_without_writing(ws, lambda: ws.run(mode, ws.options(**{"selection-path": given})), CODES[kind])


# `..` is refused where a path names something inside a root (a document that crossed jobs, an archive
# entry, a receipt row); the runner's GITHUB_EVENT_PATH and the operator's contract path may contain it.
PATH_KINDS = tuple(kind for kind in FILE_KINDS if kind != "dotdot")


@pytest.mark.parametrize("kind", PATH_KINDS)
def test_a_hostile_event_file_is_refused(ws: Workspace, kind: str) -> None:
    hostile = ws.work / "sub" / "event.json"
    hostile.parent.mkdir()
    given = plant(kind, hostile, b"{}", ws.outside, 64 * 1024)
    env = {**ws.env, "GITHUB_EVENT_PATH": given, "GITHUB_TOKEN": "ghs_unused"}
    refused_without_writing(ws, lambda: ws.run("guard", ws.options(), env), "guard.event_file")


@pytest.mark.parametrize("kind", PATH_KINDS)
def test_a_hostile_contract_is_refused(ws: Workspace, kind: str) -> None:
    hostile = ws.work / "sub" / "contract.json"
    hostile.parent.mkdir()
    given = plant(kind, hostile, ws.contract_path.read_bytes(), ws.outside, 4 * 1024 * 1024)
    refused_without_writing(ws, lambda: ws.run("check", {"contract": given, "state-dir": str(ws.root / "state")}),
                            "contract.invalid", exit_code=2)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo", "device", "oversized"])
def test_a_hostile_cell_result_is_refused(ws: Workspace, kind: str) -> None:
    document = json.dumps(cell(ws.contract, "budget-stop")).encode()
    plant(kind, ws.work / "cells" / "budget-stop.json", document, ws.outside, CELL_LIMIT)
    refused_without_writing(ws, lambda: ws.run("export", ws.options()), CODES[kind])


def test_a_symlinked_cell_directory_is_refused(ws: Workspace) -> None:
    real = ws.outside / "more-cells"
    write_cells(real, [cell(ws.contract, "budget-stop")], ws.digest)
    (ws.work / "cells" / "budget-stop").symlink_to(real)
    refused_without_writing(ws, lambda: ws.run("export", ws.options()), "io.unsafe_path")


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo", "oversized"])
def test_a_hostile_standing_plan_is_refused(ws: Workspace, kind: str) -> None:
    plan = json.dumps({"version": "1.0", "tests": [{"id": str(c.testops_id), "selector": c.full_name}
                                                   for c in ws.contract.cases]}).encode()
    hostile = ws.work / "sub" / "testplan.json"
    hostile.parent.mkdir()
    given = plant(kind, hostile, plan, ws.outside, 16 * 1024 * 1024)
    options = {"contract": str(ws.contract_path), "standing-plan": given, "backend": "files",
               "selection-path": str(ws.work / "new-selection.json"), "state-dir": str(ws.root / "state")}
    # Outside Actions (a rehearsal), so the files backend needs no GitHub run.
    refused_without_writing(ws, lambda: ws.run("select", options, {}, actions=False), CODES[kind])


# --- outputs: planted links ------------------------------------------------------------------------------


@pytest.mark.parametrize("points_to", ["victim.json", "not-yet-there.json"])
def test_select_does_not_write_through_a_planted_selection_link(ws: Workspace, points_to: str) -> None:
    target = ws.work / "new-selection.json"
    target.symlink_to(ws.outside / points_to)  # an existing victim, or a dangling link to create one
    options = {"contract": str(ws.contract_path), "backend": "files", "selection-path": str(target),
               "state-dir": str(ws.root / "state")}
    refused_without_writing(ws, lambda: ws.run("select", options, {}, actions=False), "io.exists")


def test_export_does_not_write_through_a_planted_results_directory_link(ws: Workspace) -> None:
    victim = ws.outside / "victim-dir"
    victim.mkdir()
    (ws.work / "allure-results").symlink_to(victim, target_is_directory=True)
    refused_without_writing(ws, lambda: ws.run("export", ws.options()), "io.exists")


def test_export_does_not_write_through_a_planted_receipt_link(ws: Workspace) -> None:
    (ws.work / "allure-results-receipt.json").symlink_to(ws.outside / "victim.json")
    refused_without_writing(ws, lambda: ws.run("export", ws.options()), "io.exists")


def test_a_linked_state_directory_is_refused_before_the_phase_writes_anything(ws: Workspace) -> None:
    # The runner checks the state dir before the phase starts: export writes no results, and nothing,
    # not even failure.json, goes through the link.
    (ws.work / "state-link").symlink_to(ws.outside, target_is_directory=True)
    before = snapshot(ws.outside)
    run = ws.run("export", ws.options(**{"state-dir": str(ws.work / "state-link")}))
    assert (run.exit_code, run.outputs.get("error-code")) == (3, "io.state_dir")
    assert snapshot(ws.outside) == before
    assert not (ws.work / "allure-results").exists()
    assert not (ws.work / "allure-results-receipt.json").exists()
    assert "failure.json could not be written" in run.log


# --- artifact zips (import) -----------------------------------------------------------------------------

IMPORT_CELLS = [Cell("exec-1")]


def _entries() -> list[Any]:
    return artifact_entries(IMPORT_CELLS)


def _bomb() -> list[Any]:
    # 64 MiB of zeros deflate to ~64 KiB: far past the 100:1 ratio an artifact may have.
    return [*_entries(), ("results/exec-1/huge.log", b"\0" * (64 * 1024 * 1024))]


HOSTILE_ZIPS: dict[str, Callable[[], list[Any]]] = {
    "zip-slip": lambda: [*_entries(), ("results/../../outside/escaped.json", b"{}")],
    "absolute": lambda: [*_entries(), ("/tmp/escaped.json", b"{}")],
    "symlink-entry": lambda: [*_entries(), symlink_entry("results/exec-1/link.json", "/etc/passwd")],
    "duplicate-entries": lambda: [*_entries(), ("results/exec-1/result.json", b'{"other": "reading"}')],
    "zip-bomb": _bomb,
    "backslash": lambda: [*_entries(), ("results\\..\\..\\escaped.json", b"{}")],
}


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("name", list(HOSTILE_ZIPS))
def test_a_hostile_artifact_is_refused_and_the_ledger_untouched(ws: Workspace, name: str) -> None:
    contract = ws.work / "import-contract.json"
    contract.write_bytes(dumps(IMPORT_CONTRACT))
    intent = ws.work / "intent.json"
    intent.write_bytes(dumps(intent_document(IMPORT_CELLS)))
    ledger = ws.work / "ledger.json"
    with GitHubServer(token="ghs_hostile") as gh:
        gh.add_run(IMPORT_REPOSITORY, IMPORT_RUN_ID, path=IMPORT_WORKFLOW, head_sha=IMPORT_SHA, head_branch="main")
        zipped = make_zip(HOSTILE_ZIPS[name]())
        gh.add_artifact(IMPORT_RUN_ID, "cells-a", zipped, artifact_id=501)
        options = {"contract": str(contract), "source-run-id": str(IMPORT_RUN_ID), "artifact-name": "cells-*",
                   "intent": str(intent), "ledger": str(ledger), "state-dir": str(ws.root / "state")}
        # The importing run, admitted by the contract's policy (import re-admits it before any download).
        importing = gh.add_run(IMPORT_REPOSITORY, IMPORT_RUN_ID + 1, path=".github/workflows/agent-evals.yml",
                               head_sha=IMPORT_SHA, head_branch="main")
        event = ws.work / "event.json"
        event.write_text(json.dumps(gh.event_payload(importing["id"])))
        env = {**gh.runner_env(importing["id"], event_path=str(event)), "INPUT_GITHUB-TOKEN": "ghs_hostile"}
        refused_without_writing(ws, lambda: ws.run("import", options, env), "import.unsafe_archive")
    assert not ledger.exists()
    assert not (ws.root / "outside" / "escaped.json").exists() and not Path("/tmp/escaped.json").exists()


# --- names inside documents ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../outside/victim.json", "/etc/hostname", "sub/../../outside/victim.json", "..",
                                  "allure-results/../../outside/victim.json"])
def test_a_receipt_naming_a_file_outside_its_directory_is_refused(ws: Workspace, name: str) -> None:
    # A crafted receipt (with the right digest) would make upload copy a file from outside the results
    # directory into the publication, or verify read it.
    exported = ws.run("export", ws.options())
    assert exported.exit_code == 1, exported.summary  # two cases have no cell: complete, not all passed
    receipt = json.loads((ws.work / "allure-results-receipt.json").read_bytes())
    receipt["files"][0].update(name=name, sha256=hashlib.sha256((ws.outside / "victim.json").read_bytes()).hexdigest())
    crafted = ws.work / "crafted-receipt.json"
    crafted.write_text(json.dumps(receipt))
    # Even with its own digest passed as receipt-sha256 (an attacker who controls the job outputs too), the
    # receipt's file names are refused.
    options = ws.options(**{"receipt-path": str(crafted), "backend": "files",
                            "receipt-sha256": hashlib.sha256(crafted.read_bytes()).hexdigest()})
    refused_without_writing(ws, lambda: ws.run("upload", options), "export.receipt")
