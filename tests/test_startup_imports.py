"""What a start imports, read from ``sys.modules`` of a real subprocess started as the action starts
(``python -I entrypoint.py``): phases that need no network import neither PyGithub nor requests, and the
worker's fast path and ``--version`` import none of the heavy modules that made a worker start cost ten
bare interpreter starts (benchmarks/run.py --only startup measures the time; this keeps the cause away).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_support import (
    EXAMPLE_CONTRACT,
    actions_env,
    cell,
    make_selection,
    small_contract,
    write_cells,
    write_contract,
)
from testops_evidence.campaign.selection import build_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import load_contract
from testops_evidence.safeio import sha256_bytes

REPO = Path(__file__).resolve().parent.parent
ENTRYPOINT = REPO / "entrypoint.py"

# Runs a script as `python -I script args...` would, then writes the names in sys.modules to a file. It
# imports nothing itself, so every module listed was imported by the start (or by the interpreter).
DRIVER = """
import sys
out, path = sys.argv[1], sys.argv[2]
sys.argv = [path, *sys.argv[3:]]
status = 0
if path:
    try:
        exec(compile(open(path, "rb").read(), path, "exec"), {"__name__": "__main__", "__file__": path})
    except SystemExit as stop:
        status = stop.code
with open(out, "w") as handle:
    handle.write(str(status) + "\\n" + "\\n".join(sorted(sys.modules)))
"""

NETWORK = {"requests", "github", "urllib3", "http.client"}
# jsonschema only explains an invalid document (contract.schema_errors); a valid one is checked by schemacheck.
NO_REST = NETWORK | {"jsonschema"}
HEAVY = {"ruamel.yaml", "jsonschema", "argparse", "re", "json", "dataclasses", "typing", "inspect", "pathlib",
         "contextlib", "traceback", "uuid", "importlib.resources", "string", "_hashlib", "subprocess"}


def started(tmp: Path, env: dict[str, str], *argv: str, script: Path | None = ENTRYPOINT) -> tuple[int, set[str]]:
    out = tmp / f"modules-{len(list(tmp.glob('modules-*')))}.txt"
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")}
    subprocess.run([sys.executable, "-I", "-c", DRIVER, str(out), str(script or ""), *argv], env={**base, **env},
                   cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    status, *modules = out.read_text().splitlines()
    return int(status or 0), set(modules)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What this interpreter imports before any of our code (site, .pth files): never held against us."""
    return started(tmp_path_factory.mktemp("bare"), {}, script=None)[1]


def imported(modules: set[str], names: set[str], bare: set[str]) -> set[str]:
    return {m for m in modules - bare if m in names or any(m.startswith(f"{n}.") for n in names)}


def worker_env(tmp: Path, **inputs: str) -> dict[str, str]:
    env = {**actions_env(), "GITHUB_OUTPUT": str(tmp / "output"), "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
           "INPUT_STATE-DIR": str(tmp / "state")}
    env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    return env


def yaml_campaign(tmp: Path) -> tuple[Path, Path, str]:
    contract_path = tmp / "contract.yml"
    shutil.copyfile(EXAMPLE_CONTRACT, contract_path)
    contract = load_contract(contract_path)
    data = selection_bytes(build_selection(contract, env_context(actions_env()), list(contract.cases),
                                           backend="files", source="contract"))
    return contract_path, write_selection(tmp / "selection.json", data), sha256_bytes(data)


def test_version_imports_nothing_heavy(tmp_path: Path, bare: set[str]) -> None:
    status, modules = started(tmp_path, {}, "--version")
    assert status == 0
    assert imported(modules, NETWORK | HEAVY, bare) == set()


def test_a_worker_verify_selection_imports_nothing_heavy_on_its_success_path(tmp_path: Path, bare: set[str]) -> None:
    contract, selection, digest = yaml_campaign(tmp_path)
    env = worker_env(tmp_path, MODE="verify-selection", CONTRACT=str(contract), **{
        "SELECTION-PATH": str(selection), "SELECTION-SHA256": digest})
    status, modules = started(tmp_path, env)
    assert status == 0, (tmp_path / "summary.md").read_text()
    assert "selected-count=12" in (tmp_path / "output").read_text()
    assert imported(modules, NETWORK | HEAVY, bare) == set()


def test_the_installed_command_starts_a_worker_as_light_as_the_entrypoint(tmp_path: Path, bare: set[str]) -> None:
    # `testops-evidence verify-selection --...` (bin/testops-evidence): the command line is parsed without
    # argparse (cli.parse_simple), so the installed command imports what the entrypoint imports (issue 17).
    contract, selection, digest = yaml_campaign(tmp_path)
    env = worker_env(tmp_path)
    status, modules = started(tmp_path, env, "verify-selection", f"--contract={contract}",
                              f"--selection-path={selection}", "--selection-sha256", digest,
                              script=REPO / "bin" / "testops-evidence")
    assert status == 0, (tmp_path / "summary.md").read_text()
    assert "selected-count=12" in (tmp_path / "output").read_text()
    assert imported(modules, NETWORK | HEAVY, bare) == set()


def test_verify_selection_that_needs_the_full_check_still_imports_no_network_library(tmp_path: Path,
                                                                                     bare: set[str]) -> None:
    contract, selection, digest = yaml_campaign(tmp_path)
    contract.write_bytes(contract.read_bytes().replace(b"\n", b"\r\n"))  # same contract, other bytes
    env = worker_env(tmp_path, MODE="verify-selection", CONTRACT=str(contract), **{
        "SELECTION-PATH": str(selection), "SELECTION-SHA256": digest})
    status, modules = started(tmp_path, env)
    assert status == 0, (tmp_path / "summary.md").read_text()
    assert "testops_evidence.readers.yamlread" in modules  # the full check parsed the contract ...
    assert imported(modules, NO_REST, bare) == set()  # ... and still needed no network library, nor jsonschema


def test_export_imports_no_network_library(tmp_path: Path, bare: set[str]) -> None:
    contract = small_contract()
    selection, digest = make_selection(tmp_path, contract, actions_env())
    cells = write_cells(tmp_path / "cells", [cell(contract, c.key) for c in contract.cases], digest)
    env = worker_env(tmp_path, MODE="export", CONTRACT=str(write_contract(contract, tmp_path / "contract.json")),
                     **{"SELECTION-PATH": str(selection), "SELECTION-SHA256": digest, "CELL-RESULTS": str(cells),
                        "RESULTS-DIR": str(tmp_path / "allure-results")})
    status, modules = started(tmp_path, env)
    assert status == 0, (tmp_path / "summary.md").read_text()
    assert imported(modules, NO_REST, bare) == set()


def test_check_imports_no_network_library(tmp_path: Path, bare: set[str]) -> None:
    status, modules = started(tmp_path, {}, "check", "--contract", str(EXAMPLE_CONTRACT))
    assert status == 0
    assert imported(modules, NO_REST, bare) == set()


def test_the_files_backend_outside_actions_imports_no_rest_library_in_any_phase(tmp_path: Path,
                                                                                bare: set[str]) -> None:
    # A local campaign on the files backend (select, export, upload, verify with `local`, no GITHUB_ACTIONS)
    # makes no REST call, so it loads neither PyGithub nor requests nor jsonschema (issue 17).
    contract = small_contract()
    contract_path = write_contract(contract, tmp_path / "contract.json")
    base = {"GITHUB_OUTPUT": str(tmp_path / "output"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "INPUT_STATE-DIR": str(tmp_path / "state"), "INPUT_CONTRACT": str(contract_path),
            "INPUT_BACKEND": "files", "INPUT_LOCAL": "true", "GITHUB_WORKSPACE": str(tmp_path),
            "INPUT_SELECTION-PATH": str(tmp_path / "selection.json"), "INPUT_REPORT": "never"}

    def run(mode: str, **inputs: str) -> tuple[dict[str, str], set[str]]:
        (tmp_path / "output").write_text("")
        env = {**base, "INPUT_MODE": mode, **{f"INPUT_{k.upper()}": v for k, v in inputs.items()}}
        status, modules = started(tmp_path, env)
        outputs = dict(line.split("=", 1) for line in (tmp_path / "output").read_text().splitlines() if "=" in line)
        assert status in (0, 1), (mode, (tmp_path / "summary.md").read_text()[-2000:])
        return outputs, imported(modules, NO_REST, bare)

    selected, loaded = run("select")
    assert selected.get("selection-sha256"), selected
    assert loaded == set()
    digest = selected["selection-sha256"]
    write_cells(tmp_path / "cells", [cell(contract, c.key) for c in contract.cases], digest)
    exported, loaded = run("export", **{"selection-sha256": digest, "cell-results": str(tmp_path / "cells"),
                                        "results-dir": str(tmp_path / "allure-results")})
    assert exported.get("receipt-sha256"), exported
    assert loaded == set()
    travelled = {"selection-sha256": digest, "receipt-sha256": exported["receipt-sha256"],
                 "results-dir": str(tmp_path / "allure-results")}
    uploaded, loaded = run("upload", **travelled)
    assert uploaded.get("published") == "true", uploaded
    assert loaded == set()
    verified, loaded = run("verify", **travelled)
    assert verified.get("verified-count") == str(len(contract.cases)), verified
    assert loaded == set()
