"""Every report format of the registry (readers/adapters/formats.py), attacked where it is read.

The formats are not listed here: each test walks ``FORMATS``, so a format added to the registry is fuzzed and
meets the hostile files below without a change to this module — except its seed, which a test demands.
A file is placed where the registry says the format lies in a case directory, and read by the layout reader
(export's ``cell-results``) and by ``testops-evidence cell``: a bad file ends in a reportable refusal, never
in ``internal.error``, a pass, or a read past its cap.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import run_mode
from reliability import corpus
from reliability.fuzzing import Targets, fuzz_settings, mutated_bytes
from testops_evidence.errors import Refusal, is_registered
from testops_evidence.readers.adapters.formats import FORMATS, ReportFormat
from testops_evidence.readers.adapters.layout import adapt_trials, collect_cells

CASE = "company-credential-approval"

# One real report per format (written by the real producer, committed): what the fuzzer mutates.
SEEDS: dict[str, bytes] = {
    "junit": corpus.junit_report(),
    "allure-results": corpus.allure_results()[0][1],
    "inspect-log": corpus.inspect_log(),
    "promptfoo": corpus.promptfoo_results(),
}


def place(fmt: ReportFormat) -> str:
    """Where a file of ``fmt`` lies in a case directory, by the registry."""
    if fmt.directory is not None:
        return f"{fmt.directory}/report{fmt.suffixes[0]}"
    return f"report{fmt.loose[0]}"


def case_dir(root: Path, fmt: ReportFormat, data: bytes | None = None) -> Path:
    target = root / CASE / place(fmt)
    target.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        target.write_bytes(data)
    return target


def adapt(root: Path) -> None:
    contract = corpus.example_contract()
    adapt_trials(root, CASE, contract.case(CASE), source_sha=corpus.env()["GITHUB_SHA"], profile=contract.profile,
                 selection_sha256=corpus.SELECTION_SHA256, fallback_time=1_796_119_500.0)


def test_every_format_has_a_seed_and_a_place_of_its_own() -> None:
    assert set(SEEDS) == {fmt.kind for fmt in FORMATS}, "a new format needs a seed report here"
    assert len({place(fmt) for fmt in FORMATS}) == len(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.kind)
def test_a_seed_report_is_read_where_the_registry_places_it(tmp_path: Path, fmt: ReportFormat) -> None:
    case_dir(tmp_path, fmt, SEEDS[fmt.kind])
    contract = corpus.example_contract()
    [found] = collect_cells(tmp_path, {c.key: c for c in contract.cases}, source_sha=corpus.env()["GITHUB_SHA"],
                            profile=contract.profile, selection_sha256=corpus.SELECTION_SHA256, fallback_time=0.0)
    assert found.case == CASE
    assert found.adapted is not None or (found.failure is not None and is_registered(found.failure.code))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.kind)
def test_a_report_past_its_cap_is_refused_before_it_is_read(tmp_path: Path, fmt: ReportFormat) -> None:
    report = case_dir(tmp_path / "export", fmt)
    with report.open("wb") as handle:
        handle.truncate(fmt.limit + 1)  # sparse: nothing of it is ever written or read
    with pytest.raises(Refusal) as caught:
        adapt(tmp_path / "export")
    assert caught.value.code in ("io.too_large", "export.case_budget")
    # Given to `cell` directly, no case budget applies: the file's own cap does.
    run = run_mode("cell", tmp_path, {"contract": str(corpus.EXAMPLE_CONTRACT), "case": CASE, fmt.kind: str(report),
                                      "out": str(tmp_path / "cell.json"), "selection-sha256": "5e" * 32,
                                      "source-sha": corpus.env()["GITHUB_SHA"]}, {})
    assert run.outputs.get("error-code") == "io.too_large", run.outputs
    assert not (tmp_path / "cell.json").exists()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.kind)
def test_a_link_in_place_of_a_report_is_refused_not_followed(tmp_path: Path, fmt: ReportFormat) -> None:
    secret = tmp_path / "elsewhere"
    secret.write_bytes(SEEDS[fmt.kind])
    os.symlink(secret, case_dir(tmp_path / "export", fmt))
    with pytest.raises(Refusal) as caught:
        adapt(tmp_path / "export")
    assert caught.value.code == "io.unsafe_path"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.kind)
def test_a_report_in_a_directory_no_case_names_is_unattributed(tmp_path: Path, fmt: ReportFormat) -> None:
    target = tmp_path / "not-a-case" / place(fmt)
    target.parent.mkdir(parents=True)
    target.write_bytes(SEEDS[fmt.kind])
    contract = corpus.example_contract()
    with pytest.raises(Refusal) as caught:
        collect_cells(tmp_path, {c.key: c for c in contract.cases}, source_sha=corpus.env()["GITHUB_SHA"],
                      profile=contract.profile, selection_sha256=corpus.SELECTION_SHA256, fallback_time=0.0)
    assert caught.value.code == "export.unattributed"


@fuzz_settings(0.5)
@given(data=st.data())
def test_fuzz_every_format_where_the_layout_reads_it(fuzz: Targets, data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from(FORMATS))
    raw = data.draw(st.one_of(mutated_bytes(SEEDS[fmt.kind], max_mutations=4), st.binary(max_size=300)))
    target = fuzz.target("report-formats")
    with tempfile.TemporaryDirectory() as scratch:
        case_dir(Path(scratch), fmt, raw)
        with target.example("export"):
            adapt(Path(scratch))
