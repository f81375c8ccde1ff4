"""Red team, round four: the names ``safeio.readable_name`` widened for reading, attacked where they are recorded.

A report may be named with spaces, ``+``, ``#``, ``:`` or non-ASCII letters; the cell's ``artifacts`` list keeps
each name in ``[A-Za-z0-9._-]`` (every other character becomes ``_``). That mapping is not one-to-one, so a
worker could hand in two reports recorded under one name: the record could then no longer say which bytes a
name holds. Each such case must end broken with a refusal that names both files (``export.adapter``).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from reliability import corpus
from reliability.test_report_formats import CASE, SEEDS
from testops_evidence.readers.adapters.formats import FORMATS, ReportFormat
from testops_evidence.readers.adapters.layout import collect_cells, read_case

# Pairs of distinct file names (stems) that the artifacts list would record as one.
COLLIDING = [
    ("a b", "a_b"),  # a space, as MSTest names its reports
    ("run#1", "run+1"),  # '#' (Marathon) and '+' (older Inspect AI logs)
    ("caf\u00e9", "caf\u00fc"),  # two letters outside ASCII
    ("t:1", "t_1"),
]


def _placed(fmt: ReportFormat, stem: str) -> str:
    suffix = fmt.suffixes[0]
    if fmt.directory is not None:
        return f"{fmt.directory}/{stem}{suffix}"
    return f"{stem}{fmt.loose[0]}"


def _write(root: Path, fmt: ReportFormat, stem: str, extra: bytes = b"") -> None:
    target = root / CASE / _placed(fmt, stem)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(SEEDS[fmt.kind] + extra)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.kind)
@pytest.mark.parametrize(("first", "second"), COLLIDING, ids=lambda name: name.encode("ascii", "replace").decode())
def test_two_reports_recorded_under_one_name_break_their_case(tmp_path: Path, fmt: ReportFormat, first: str,
                                                              second: str) -> None:
    _write(tmp_path, fmt, first)
    _write(tmp_path, fmt, second, b"\n")  # other bytes under what would be the same recorded name
    contract = corpus.example_contract()
    found = collect_cells(tmp_path, {c.key: c for c in contract.cases}, source_sha=corpus.env()["GITHUB_SHA"],
                          profile=contract.profile, selection_sha256=corpus.SELECTION_SHA256, fallback_time=0.0)
    assert [f.case for f in found] == [CASE]
    [cell] = found
    assert cell.adapted is None, cell.adapted and cell.adapted.document.get("artifacts")
    assert cell.failure is not None and cell.failure.code == "export.adapter"
    assert first in str(cell.failure) and second in str(cell.failure)


def test_nfc_and_nfd_spellings_are_recorded_as_two_names(tmp_path: Path) -> None:
    """The same letter composed and decomposed is two files on Linux; the record keeps them apart."""
    junit = next(fmt for fmt in FORMATS if fmt.kind == "junit")
    composed = unicodedata.normalize("NFC", "r\u00e9sum\u00e9")
    decomposed = unicodedata.normalize("NFD", composed)
    _write(tmp_path, junit, composed)
    _write(tmp_path, junit, decomposed, b"\n")
    reports = read_case(tmp_path, CASE)
    recorded = [name for name, _sha in reports.inputs]
    assert len(recorded) == 2 and len(set(reports.recorded)) == 2


HOSTILE = "<img src=x onerror=alert(1)> [x](javascript:alert(2)) ::warning::pwn `b` *em* |pipe| &amp; @team #1.xml"


def test_a_hostile_report_name_reaches_the_summary_and_log_as_text(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A report name the widened read alphabet accepts (spaces, '#', ':', Markdown and HTML punctuation), in a
    case's directory with a broken report: the refusal that names it reaches the step summary and the log, as
    text only — no live HTML or link, no line the runner takes as a workflow command."""
    from reliability.test_hostile_files import Workspace

    ws = Workspace(tmp_path)
    monkeypatch.chdir(ws.work)
    key = [case.key for case in ws.contract.cases][1]
    (ws.work / "cells" / key).mkdir()
    (ws.work / "cells" / key / HOSTILE).write_bytes(b"<testsuite><testcase name='x'><failure/></testcase")
    run = ws.run("export", ws.options())
    assert run.exit_code == 1, run.summary  # recorded, not all passed: the case is broken, the export done
    assert "onerror=alert(1)" in run.summary, "the refusal should name the file"
    # Every piece of markup arrives escaped: no '<img' or '](' that Markdown or HTML would act on.
    assert re.search(r"(?<!\\)<img", run.summary) is None
    assert re.search(r"(?<!\\)\]\(javascript", run.summary) is None
    assert "\\<img" in run.summary
    assert not any(line.lstrip().startswith("::warning::pwn") for line in run.log.splitlines())
