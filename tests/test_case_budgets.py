"""Budgets before reads (issue 24, item 5): a worker artifact's case directory is judged by its listing (names
and sizes) before export reads a byte of it, so the memory and time export spends follow its budgets, not the
size of what an agent left in its artifact."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import bound_to, cell, small_contract
from test_export import export, prepare, worker_artifacts
from testops_evidence import safeio
from testops_evidence.readers.adapters import layout

CONTRACT = small_contract()
MIB = 1024 * 1024
OWNER = "native-get-task-context"  # the worker job of case get-task-context in the small contract's plan


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Bytes export reads from the cell-results directory, per file (every cell is read through SafeRoot)."""
    read: dict[str, int] = {}
    real = safeio.SafeRoot.read

    def counted(self: safeio.SafeRoot, relpath: str, *, limit: int) -> bytes:
        data = real(self, relpath, limit=limit)
        read[relpath] = len(data)
        return data

    monkeypatch.setattr(safeio.SafeRoot, "read", counted)
    yield read


def padded(size: int, path: Path, document: dict[str, Any] | None = None) -> None:
    """A file of ``size`` bytes: a cell's JSON, then spaces (sparse on disk: the test writes no 640 MiB)."""
    head = b"{}" if document is None else safeio.canonical_json(document)
    with path.open("wb") as out:
        out.write(head)
        out.truncate(size)


def flooded_case(tmp_path: Path, files: int, size: int, *, contract: Any = CONTRACT) -> tuple[dict[str, str],
                                                                                               dict[str, str]]:
    """The artifact of the worker of get-task-context with ``files`` cells of ``size`` bytes in its case
    directory (each a cell of that case, padded): the reproduction of issue 24 at 160 x 4 MiB."""
    options, env = worker_artifacts(tmp_path, {OWNER: {}})
    directory = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}" / "get-task-context"
    directory.mkdir()
    for index in range(files):
        document = bound_to(cell(contract, "get-task-context", attempt=f"flood-{index}"),
                            options["selection-sha256"])
        padded(size, directory / f"cell-{index:04}.json", document)
    return options, env


ANY = small_contract(run_attempts="any")


def any_policy_case(tmp_path: Path) -> tuple[dict[str, str], dict[str, str], Path]:
    """A per-worker export under run-attempts any (many attempts per case admitted), and the empty case
    directory of get-task-context in its worker's artifact."""
    options, env = prepare(tmp_path, [], contract=ANY)
    options["artifact-prefix"] = "testops-evidence"
    directory = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}" / "get-task-context"
    directory.mkdir(parents=True)
    return options, env, directory


def test_160_cells_of_4_mib_in_one_case_directory_are_refused_before_one_is_read(
        tmp_path: Path, bytes_read: dict[str, int]) -> None:
    # Issue 24 (5): export read all 640 MiB (peak 683 MiB, 26 s), then refused export.duplicate_cell.
    options, env = flooded_case(tmp_path, 160, 4 * MIB)
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.duplicate_cell"), run.summary
    failure = run.failure()
    assert failure is not None and failure["field"] == "get-task-context"
    assert "holds 160 cell results for case 'get-task-context'" in failure["message"]
    assert not any("get-task-context/" in name for name in bytes_read), sorted(bytes_read)
    assert not Path(options["results-dir"]).exists()


def test_under_run_attempts_any_the_byte_budget_refuses_the_directory_before_it_is_read(
        tmp_path: Path, bytes_read: dict[str, int]) -> None:
    options, env, directory = any_policy_case(tmp_path)
    over = layout.CASE_CELL_BYTES // (4 * MIB) + 1  # one 4 MiB cell more than the budget holds
    for index in range(over):
        padded(4 * MIB, directory / f"attempt-{index}.json")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.case_budget"), run.summary
    failure = run.failure()
    assert failure is not None and failure["field"] == f"testops-evidence-cells-1-{OWNER}/get-task-context"
    assert failure["expected"] == f"<= {layout.CASE_CELL_BYTES} bytes of cell result"
    assert failure["actual"] == over * 4 * MIB
    assert bytes_read == {}


def test_the_cell_count_budget_is_checked_from_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          bytes_read: dict[str, int]) -> None:
    monkeypatch.setattr(layout, "CASE_CELL_FILES", 4)
    options, env, directory = any_policy_case(tmp_path)
    for index in range(5):
        padded(10, directory / f"attempt-{index}.json")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.case_budget"), run.summary
    assert run.failure()["actual"] == 5  # type: ignore[index]
    assert bytes_read == {}


@pytest.mark.parametrize("kind", ["junit", "allure-results", "inspect-logs", "promptfoo", "eval"])
def test_reports_over_the_byte_budget_are_refused_before_one_is_read(tmp_path: Path, kind: str) -> None:
    # The same for every adapter's inputs: JUnit XML, allure-results, Inspect AI logs, promptfoo results. The
    # files are sparse and hold no report at all: reading one would refuse it with another code.
    options, env = worker_artifacts(tmp_path, {OWNER: {}})
    case_dir = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}" / "get-task-context"
    where, name = {"junit": ("reports", "run-{}.xml"), "allure-results": ("allure-results", "{}-result.json"),
                   "inspect-logs": ("inspect-logs", "log-{}.json"), "promptfoo": ("promptfoo", "results-{}.json"),
                   "eval": (".", "log-{}.eval")}[kind]
    (case_dir / where).mkdir(parents=True, exist_ok=True)
    each = 8 * MIB if kind == "allure-results" else 32 * MIB  # within each file's own cap
    count = layout.CASE_REPORT_BYTES // each + 1
    for index in range(count):
        padded(each, case_dir / where / name.format(index))
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.case_budget"), run.summary
    failure = run.failure()
    assert failure is not None and failure["actual"] == count * each
    assert "bytes of report" in failure["message"]


def test_the_report_count_budget_covers_nested_report_directories(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "CASE_REPORT_FILES", 3)
    options, env = worker_artifacts(tmp_path, {OWNER: {}})
    case_dir = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}" / "get-task-context"
    for index, where in enumerate(["a", "a/b", "allure-results", "a/allure-results"]):
        (case_dir / where).mkdir(parents=True, exist_ok=True)
        suffix = "-result.json" if where.endswith("allure-results") else ".xml"
        (case_dir / where / f"r{index}{suffix}").write_text("not read")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.case_budget"), run.summary
    assert run.failure()["actual"] == 4  # type: ignore[index]


def test_an_artifact_with_entries_for_more_cases_than_its_job_ran_is_refused_unread(
        tmp_path: Path, bytes_read: dict[str, int]) -> None:
    # Spread over case directories instead of one: 40 directories named for cases of no job, 4 MiB each.
    options, env = worker_artifacts(tmp_path, {OWNER: {"get-task-context.json": cell(CONTRACT, "get-task-context")}})
    artifact = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}"
    for index in range(40):
        (artifact / f"case-9{index:04}").mkdir()
        padded(4 * MIB, artifact / f"case-9{index:04}" / "cell.json")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.worker_artifact"), run.summary
    assert run.failure()["actual"] == 41  # type: ignore[index]
    assert bytes_read == {}


def test_a_cell_for_another_jobs_case_is_refused_from_the_listing(tmp_path: Path,
                                                                 bytes_read: dict[str, int]) -> None:
    options, env = worker_artifacts(tmp_path, {OWNER: {"get-task-context.json": cell(CONTRACT, "get-task-context")}})
    artifact = Path(options["cell-results"]) / f"testops-evidence-cells-1-{OWNER}"
    padded(4 * MIB, artifact / "budget-stop.json")
    run = export(tmp_path, options, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.cell_origin"), run.summary
    failure = run.failure()
    assert failure is not None and (failure["expected"], failure["actual"]) == ("native-budget-stop", OWNER)
    assert bytes_read == {}


def test_an_honest_case_directory_within_the_budgets_is_exported(tmp_path: Path) -> None:
    options, env, directory = any_policy_case(tmp_path)
    for index in range(3):
        document = cell(ANY, "get-task-context", attempt=f"attempt-{index}",
                        finished=f"2026-12-01T10:0{index + 5}:00Z")
        (directory / f"attempt-{index}.json").write_bytes(
            safeio.canonical_json(bound_to(document, options["selection-sha256"])))
    run = export(tmp_path, options, env)
    assert run.outputs.get("error-code") is None, run.summary
    assert os.path.exists(options["results-dir"])
