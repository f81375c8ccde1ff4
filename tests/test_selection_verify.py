"""``verify-selection``, the worker side: no token variable, exact-byte digest, live-context binding,
and no network library in the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import PhaseRun, run_mode
from test_selection_support import actions_env, example_document, write_contract
from testops_evidence.campaign.selection import build_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import contract_from_document
from testops_evidence.safeio import sha256_bytes

SENTINEL = "sentinel-allure-tok-4f1d8b3e"  # no 8 characters of it in honest output


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, Path, str]:
    """A files-backend contract and the selection ``select`` would have written for the Actions run."""
    document = example_document()
    document.pop("testops")
    contract_path = write_contract(tmp_path, document)
    contract = contract_from_document(document)
    selection = build_selection(contract, env_context(actions_env()), contract.cases[:5], backend="files",
                                source="cases")
    data = selection_bytes(selection)
    path = write_selection(tmp_path / "selection.json", data)
    return contract_path, path, sha256_bytes(data)


def verify(tmp_path: Path, contract: Path, selection: Path, digest: str | None, **env: str) -> PhaseRun:
    options = {"contract": str(contract), "selection-path": str(selection)}
    if digest is not None:
        options["selection-sha256"] = digest
    return run_mode("verify-selection", tmp_path, options, {**actions_env(), **env})


def test_an_intact_selection_for_this_run_is_verified(tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    run = verify(tmp_path, contract, selection, digest)
    assert run.exit_code == 0, run.summary
    assert run.outputs == {"selected-count": "5"}
    assert "The selection is intact and bound to this run: 5 case(s)" in run.summary
    assert digest in run.summary


@pytest.mark.parametrize("variable", ["ALLURE_TOKEN", "TESTOPS_TOKEN"])
@pytest.mark.parametrize("value", ["", SENTINEL])
def test_a_token_variable_in_the_worker_is_refused_even_empty(tmp_path: Path, made: tuple[Path, Path, str],
                                                              variable: str, value: str) -> None:
    contract, selection, digest = made
    run = verify(tmp_path, contract, selection, digest, **{variable: value})
    assert (run.exit_code, run.outputs["error-code"]) == (3, "worker.token_present")
    failure = run.failure()
    assert failure is not None and variable in failure["actual"]
    # The one place the value may appear is the ::add-mask:: command that tells the runner to hide it.
    log = "\n".join(line for line in run.log.splitlines() if not line.startswith("::add-mask::"))
    everything = run.summary + log + json.dumps(failure) + json.dumps(run.outputs)
    assert SENTINEL not in everything


def test_one_changed_byte_is_refused(tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    data = bytearray(selection.read_bytes())
    data[data.index(b'"title":"') + 9] ^= 0x20  # a title's first letter changes case
    selection.write_bytes(bytes(data))
    run = verify(tmp_path, contract, selection, digest)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.digest")
    assert run.failure() is not None and run.failure()["expected"] == digest  # type: ignore[index]


@pytest.mark.parametrize("digest", [None, "0" * 63, "A" * 64, "sha256:" + "0" * 64])
def test_the_digest_input_must_be_64_lowercase_hex(tmp_path: Path, made: tuple[Path, Path, str],
                                                   digest: str | None) -> None:
    contract, selection, _ = made
    run = verify(tmp_path, contract, selection, digest)
    assert (run.exit_code, run.outputs["error-code"]) == (2, "input.selection-sha256")


def test_a_selection_of_another_run_attempt_is_refused(tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    run = verify(tmp_path, contract, selection, digest, GITHUB_RUN_ATTEMPT="2")
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.context")
    assert run.failure() is not None and run.failure()["field"] == "run-attempt"  # type: ignore[index]


def test_a_selection_with_a_link_in_its_place_is_refused(tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    link = tmp_path / "linked.json"
    link.symlink_to(selection)
    run = verify(tmp_path, contract, link, digest)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "io.unsafe_path")


def test_the_worker_imports_no_network_library(tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    script = (
        "import json, sys\n"
        "from testops_evidence.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('requests', 'github', 'urllib3'))\n"
        "print('MODULES=' + json.dumps({'code': code, 'loaded': loaded}))\n"
    )
    env = {**actions_env(), "PATH": os.environ.get("PATH", ""), "GITHUB_OUTPUT": str(tmp_path / "out.txt"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    done = subprocess.run(
        [sys.executable, "-c", script, "verify-selection", "--contract", str(contract), "--selection-path",
         str(selection), "--selection-sha256", digest, "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    line = next(line for line in done.stdout.splitlines() if line.startswith("MODULES="))
    report = json.loads(line[len("MODULES="):])
    assert report == {"code": 0, "loaded": []}, done.stdout + done.stderr
    assert "selected-count=5" in (tmp_path / "out.txt").read_text()


def _artifact_dir(tmp_path: Path, selection: Path) -> Path:
    """The selection artifact as download-artifact extracts it into a fresh directory of its own."""
    directory = tmp_path / "downloaded"
    directory.mkdir()
    (directory / "testops-evidence-selection.json").write_bytes(selection.read_bytes())
    return directory


def test_a_selection_directory_holding_only_the_selection_is_verified(
        tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    directory = _artifact_dir(tmp_path, selection)
    (directory / "testops-evidence-selection-contract.json").write_text("{}")  # select's compiled copy may be there
    run = run_mode("verify-selection", tmp_path, {"contract": str(contract), "selection-dir": str(directory),
                                                  "selection-sha256": digest}, actions_env())
    assert run.exit_code == 0, run.summary
    assert str(directory / "testops-evidence-selection.json") in run.summary  # read from the directory


@pytest.mark.parametrize("planted", ["evals/run-case.sh", "testops-evidence-cells/native-a/a/later.json", ".hidden",
                                     "testops-evidence-selection-contract.json/"])
def test_a_selection_directory_with_anything_more_is_refused_naming_it(
        tmp_path: Path, made: tuple[Path, Path, str], planted: str) -> None:
    """A worker that re-uploads the selection artifact (upload-artifact v4 `overwrite: true`) with the same
    selection bytes plus a harness or a cell for a later job: the selection still hashes, the directory does not
    (issue 23)."""
    contract, selection, digest = made
    directory = _artifact_dir(tmp_path, selection)
    target = directory / planted
    if planted.endswith("/"):
        target.mkdir()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\necho forged\n")
    run = run_mode("verify-selection", tmp_path, {"contract": str(contract), "selection-dir": str(directory),
                                                  "selection-sha256": digest}, actions_env())
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.extra_file"), run.summary
    assert planted.split("/")[0] in run.summary


def test_a_selection_path_outside_its_selection_directory_is_refused(
        tmp_path: Path, made: tuple[Path, Path, str]) -> None:
    contract, selection, digest = made
    directory = _artifact_dir(tmp_path, selection)
    run = run_mode("verify-selection", tmp_path, {"contract": str(contract), "selection-dir": str(directory),
                                                  "selection-path": str(selection), "selection-sha256": digest},
                   actions_env())
    assert (run.exit_code, run.outputs["error-code"]) == (2, "input.selection-dir"), run.summary
