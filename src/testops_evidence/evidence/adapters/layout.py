"""The ``cell-results`` directory layout that export reads (docs/evidence.md, "Cell results layout").

::

    cell-results/
      <any>.json                      a cell-result/v1 document
      <dir>/<any>.json                a cell-result/v1 document (download-artifact puts each artifact in
                                      its own directory unless merge-multiple is set)
      <case-key>/<any>.xml            JUnit XML of that case, adapted at export
      <case-key>/allure-results/      allure-results of that case (``*-result.json``), adapted at export

Every ``*.json`` directly in ``cell-results/`` or one directory below must be a cell result (fail
closed: a document export cannot read is refused, never skipped). A directory that holds a cell result
is not adapted again: its reports are the worker's own material. Reports in a directory not named by
a contract case key are refused (``export.adapter``). Names starting with ``.`` are ignored; other
files (transcripts, logs) below the top level are left alone.

Reports adapted at export carry no commit or profile of their own, so the adapted cell takes the
selection's head SHA and profile: prefer writing the cell in the worker (``testops-evidence cell``),
where the binding is really checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from testops_evidence.contract import Case
from testops_evidence.errors import Refusal
from testops_evidence.evidence.adapters import Outcome, build_cell
from testops_evidence.evidence.adapters.allure_results import RESULT_LIMIT, parse_results
from testops_evidence.evidence.adapters.junit import JUNIT_LIMIT, parse_junit
from testops_evidence.evidence.cells import CellResult, adapted_cell, load_cell
from testops_evidence.evidence.tree import list_dir
from testops_evidence.safeio import read_safe, sha256_bytes

ALLURE_DIR = "allure-results"


def read_reports(root: str | Path, relpath: str = "") -> tuple[list[Outcome], list[tuple[str, str]]]:
    """Outcomes of the JUnit files and the allure-results directory in ``root/relpath``; input digests."""
    prefix = f"{relpath}/" if relpath else ""
    # Refusals name a report by its whole path as the operator gave it (root included), so it can be opened as
    # written; the recorded inputs stay relative to root, as the cell result stores them.
    shown = f"{os.fspath(root).rstrip('/')}/" if os.fspath(root) not in ("", ".") else ""
    outcomes: list[Outcome] = []
    inputs: list[tuple[str, str]] = []
    for entry in list_dir(root, relpath):
        if not entry.is_dir and entry.name.endswith(".xml") and not entry.name.startswith("."):
            data = read_safe(root, prefix + entry.name, limit=JUNIT_LIMIT)
            inputs.append((prefix + entry.name, sha256_bytes(data)))
            outcomes += parse_junit(data, shown + prefix + entry.name)
        elif entry.is_dir and entry.name == ALLURE_DIR:
            files = []
            for item in list_dir(root, prefix + ALLURE_DIR):
                if not item.is_dir and item.name.endswith("-result.json"):
                    name = f"{prefix}{ALLURE_DIR}/{item.name}"
                    data = read_safe(root, name, limit=RESULT_LIMIT)
                    inputs.append((name, sha256_bytes(data)))
                    files.append((shown + name, data))
            outcomes += parse_results(files)
    return outcomes, inputs


def adapt_reports(
    root: str | Path,
    relpath: str,
    case: Case,
    *,
    source_sha: str,
    profile: Mapping[str, str],
    fallback_time: float,
    attempt_id: str | None = None,
) -> CellResult | None:
    """A cell for ``case`` from the reports in ``root/relpath``; None when there are no reports."""
    outcomes, inputs = read_reports(root, relpath)
    if not inputs:
        return None
    kinds = sorted({"junit" if name.endswith(".xml") else "allure-results" for name, _ in inputs})
    origin = "+".join(kinds)
    document = build_cell(case, outcomes, source_sha=source_sha, profile=profile, inputs=inputs,
                          fallback_time=fallback_time, attempt_id=attempt_id, origin=origin)
    return adapted_cell(document, relpath or ".", inputs, origin)


def collect_cells(
    root: Path,
    cases: Mapping[str, Case],
    *,
    source_sha: str,
    profile: Mapping[str, str],
    fallback_time: float,
) -> list[CellResult]:
    """Every cell result of the layout above (binding to the selection happens in ``bind_cells``)."""
    cells: list[CellResult] = []
    for entry in list_dir(root):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir:
            if not entry.name.endswith(".json"):
                raise Refusal("export.cell_invalid", f"{root}/{entry.name} is not a cell result (*.json) and the "
                              "top level of the cell-results directory holds only cell results",
                              field=entry.name, expected="*.json cell results or per-case directories",
                              actual=entry.name)
            cells.append(load_cell(root, entry.name))
            continue
        inside = [item for item in list_dir(root, entry.name) if not item.name.startswith(".")]
        documents = [item for item in inside if not item.is_dir and item.name.endswith(".json")]
        for item in documents:
            cells.append(load_cell(root, f"{entry.name}/{item.name}"))
        if documents:
            continue
        has_reports = any((not i.is_dir and i.name.endswith(".xml")) or (i.is_dir and i.name == ALLURE_DIR)
                          for i in inside)
        if not has_reports:
            continue
        case = cases.get(entry.name)
        if case is None:
            raise Refusal("export.adapter", f"{root}/{entry.name} holds test reports but is not named by a contract "
                          "case key, so export cannot tell which case they measured", field=entry.name,
                          expected="a directory named by a case key", actual=entry.name)
        adapted = adapt_reports(root, entry.name, case, source_sha=source_sha, profile=profile,
                                fallback_time=fallback_time)
        if adapted is not None:
            cells.append(adapted)
    return cells
