"""Red team, round four: the report-format registry (readers/adapters/formats.py) read by the layout reader.

Loose JUnit reports are looked for to any depth of a case directory, except in the directories a format reads
as its own. A directory merely *named* like a top-level format's directory deeper down (``results/promptfoo/``) is
read by no format: a report in it must still be read, not skipped — else a failing report hidden there leaves
the case passed on the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability import corpus
from reliability.test_report_formats import CASE, SEEDS
from testops_evidence.readers.adapters.formats import FORMATS
from testops_evidence.readers.adapters.layout import collect_cells, read_case

FAILING = SEEDS["junit"].replace(b'line="18" time="0.001">', b'line="18" time="0.001"><failure message="no" />', 1)
TOP_ONLY = [fmt.directory for fmt in FORMATS if fmt.directory and not fmt.recursive]


def _disposition(root: Path) -> str | None:
    contract = corpus.example_contract()
    [found] = collect_cells(root, {c.key: c for c in contract.cases}, source_sha=corpus.env()["GITHUB_SHA"],
                            profile=contract.profile, selection_sha256=corpus.SELECTION_SHA256, fallback_time=0.0)
    assert found.adapted is not None, found.failure
    return str(found.adapted.document["disposition"])


@pytest.mark.parametrize("reserved", TOP_ONLY)
def test_a_failing_report_below_a_deep_directory_named_like_a_format_is_read(tmp_path: Path, reserved: str) -> None:
    assert b"<failure" in FAILING
    case = tmp_path / CASE
    (case / "results" / reserved).mkdir(parents=True)
    (case / "report.xml").write_bytes(SEEDS["junit"])
    (case / "results" / reserved / "failing.xml").write_bytes(FAILING)
    assert [name for name, _sha in read_case(tmp_path, CASE).inputs] == [
        f"{CASE}/report.xml", f"{CASE}/results/{reserved}/failing.xml"]
    assert _disposition(tmp_path) == "behavior_failure"


def test_a_format_directory_is_still_left_to_its_format(tmp_path: Path) -> None:
    """The directories a format reads (allure-results at any depth, the others at the top) stay out of the JUnit
    walk: an XML file in them is not a loose report."""
    case = tmp_path / CASE
    for directory in (*TOP_ONLY, "allure-results", "deep/allure-results"):
        (case / directory).mkdir(parents=True)
        (case / directory / "failing.xml").write_bytes(FAILING)
    (case / "report.xml").write_bytes(SEEDS["junit"])
    assert [name for name, _sha in read_case(tmp_path, CASE).inputs] == [f"{CASE}/report.xml"]
