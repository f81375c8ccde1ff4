"""Files that later steps read are handed to the workspace owner when a Docker action runs as root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testops_evidence.safeio import hand_over, write_once

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="ownership changes need root (the Docker action runs as root)")


def test_hand_over_gives_files_and_trees_to_the_workspace_owner_keeping_private_modes(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.chown(workspace, 1001, 121)
    results = workspace / "allure-results"
    results.mkdir(mode=0o700)
    write_once(results / "a-result.json", b"{}\n")
    receipt = write_once(workspace / "allure-results-receipt.json", b"{}\n")
    os.symlink("/etc/passwd", results / "link")  # a link is re-owned itself, its target never

    changed = hand_over([results, receipt], {"GITHUB_WORKSPACE": str(workspace)})

    assert {p.name for p in changed} == {"allure-results", "a-result.json", "allure-results-receipt.json", "link"}
    for path in (results, results / "a-result.json", receipt):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (1001, 121)
    assert (results.stat().st_mode & 0o777) == 0o700
    assert (receipt.stat().st_mode & 0o777) == 0o600
    assert Path("/etc/passwd").stat().st_uid == 0


def test_hand_over_does_nothing_when_the_workspace_is_roots_own(tmp_path: Path) -> None:
    target = write_once(tmp_path / "selection.json", b"{}\n")
    assert hand_over([target], {"GITHUB_WORKSPACE": str(tmp_path)}) == []
    assert hand_over([target], {}) == []
    assert target.stat().st_uid == 0
