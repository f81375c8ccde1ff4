"""Inspect AI logs become cell results: logs written by the REAL inspect-ai in this test run (both formats),
a committed corpus (one log set per supported inspect-ai version), and hostile logs.

The producer (tests/producers/inspect_eval.py) runs a campaign of examples/contract.yml cases over three
epochs with passing, failing, erroring, limit-stopped and unscored samples, and a second eval that
fail_on_error aborts (status error, samples never run).
"""

from __future__ import annotations

import copy
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_support import HEAD_SHA, actions_env, example_contract, write_contract
from framework_support import CORPUS, PRODUCERS, mutate, need_inspect, run_producer
from helpers import run_mode
from testops_evidence.campaign.cells import adapted_cell, cell_from_bytes
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters.frameworks import framework_cell
from testops_evidence.readers.adapters.inspect_log import passes, read_log, to_run
from testops_evidence.readers.adapters.layout import collect_cells

CONTRACT = example_contract()
PROFILE = dict(CONTRACT.profile)
DIGEST = "5e" * 32  # the digest of the selection the cells belong to


def worker_env() -> dict[str, str]:
    """A case command's environment in the campaign template: the selection's digest is given."""
    return {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST}
VERSIONS = sorted(path.name for path in CORPUS.glob("inspect-ai-*"))

# What the campaign must become, per case: disposition and, per check, passed or the message's start.
CAMPAIGN: dict[str, tuple[str, dict[str, str]]] = {
    "get-task-context": ("passed", {"tool-called": "", "answer-grounded": "", "cleanup": ""}),
    "list-open-issues": ("behavior_failure", {
        "tool-called": "", "filtered-correctly": "failed: sample list-open-issues epoch 2: filtered_correctly = I",
        "cleanup": ""}),
    "create-issue-comment": ("infrastructure_failure", {
        check: "error: sample create-issue-comment epoch 3 errored: RuntimeError('sandbox did not start"
        for check in ("comment-posted", "no-duplicate-comment", "cleanup")}),
    "checkout-task": ("infrastructure_failure", {
        check: "error: sample checkout-task epoch 1 hit its token limit"
        for check in ("checkout-called-first", "conflict-handled")}),
    "release-task-on-failure": ("infrastructure_failure", {
        "released": "", "reason-recorded": "",
        "cleanup": "not recorded: sample release-task-on-failure epoch 2 has no score from cleanup"}),
    "delegate-subtask": ("passed", {"subtask-created": "", "assignee-valid": "", "parent-linked": ""}),
    "budget-stop": ("passed", {"stopped-at-budget": "", "spend-reported": ""}),
    "heartbeat-resume": ("infrastructure_failure", {
        check: "not recorded: no test case" for check in ("state-restored", "no-repeated-work", "cleanup")}),
}
ABORTED: dict[str, tuple[str, dict[str, str]]] = {
    "get-task-context": ("infrastructure_failure", {
        check: "error: sample get-task-context epoch 3 errored: CancelledError"
        for check in ("tool-called", "answer-grounded", "cleanup")}),
    "list-open-issues": ("infrastructure_failure", {
        "tool-called": "not recorded: no outcome from sample list-open-issues epoch 3",
        "filtered-correctly": "failed: sample list-open-issues epoch 2",
        "cleanup": "not recorded: no outcome from sample list-open-issues epoch 3"}),
}


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """Logs written by the installed inspect-ai, now: {format: {"campaign": path, "aborted": path}}."""
    python = need_inspect()
    root = tmp_path_factory.mktemp("inspect")
    logs: dict[str, dict[str, Path]] = {}
    for form in ("eval", "json"):
        run_producer([python, PRODUCERS / "inspect_eval.py", root / form, "--format", form], root / "home")
        logs[form] = {kind: next((root / form).glob(f"*_{kind}_*.{form}")) for kind in ("campaign", "aborted")}
    return logs


def cell_of(path: Path, key: str) -> dict[str, Any]:
    run = to_run(read_log(path.read_bytes(), path.name))
    document = framework_cell(CONTRACT.case(key), [(path.name, run)], source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                              inputs=[(path.name, "0" * 64)], fallback_time=1_764_000_000.0, origin="inspect-log")
    adapted_cell(document, path.name, [], "inspect-log")  # schema-valid
    return document


def assert_cells(path: Path, expected: dict[str, tuple[str, dict[str, str]]]) -> None:
    for key, (disposition, checks) in expected.items():
        document = cell_of(path, key)
        assert document["disposition"] == disposition, (key, document["message"])
        got = {c["id"]: c for c in document["checks"]}
        assert set(got) == set(checks)
        for check, message in checks.items():
            assert got[check]["passed"] is (message == ""), (key, check, got[check])
            assert got[check].get("message", "").startswith(message), (key, check, got[check])


@pytest.mark.parametrize("form", ["eval", "json"])
def test_a_real_campaign_log_becomes_the_expected_cells(produced: dict[str, dict[str, Path]], form: str) -> None:
    assert_cells(produced[form]["campaign"], CAMPAIGN)


@pytest.mark.parametrize("form", ["eval", "json"])
def test_an_aborted_eval_never_passes(produced: dict[str, dict[str, Path]], form: str) -> None:
    log = read_log(produced[form]["aborted"].read_bytes(), "aborted")
    assert log.status == "error"
    assert_cells(produced[form]["aborted"], ABORTED)
    document = cell_of(produced[form]["aborted"], "create-issue-comment")
    assert "ended with status 'error': RuntimeError('sandbox did not start" in document["message"]
    assert "1 sample epoch(s) the eval promised are not in the log" in document["message"]


@pytest.mark.parametrize("form", ["eval", "json"])
def test_usage_goes_in_with_its_coverage(produced: dict[str, dict[str, Path]], form: str) -> None:
    usage = cell_of(produced[form]["campaign"], "get-task-context")["usage"]
    # the producer's model reports 120 + len(prompt) input tokens, 40 output and 16 cache reads per call
    prompt = len("What is task 42 about?")
    assert {k: usage[k] for k in ("input-tokens", "output-tokens", "cache-read-tokens", "agent-turns")} == {
        "input-tokens": 3 * (120 + prompt), "output-tokens": 3 * 40, "cache-read-tokens": 3 * 16, "agent-turns": 3}
    assert usage["duration-ms"] > 0
    # mockllm reports neither: unavailable, never zero (issue 16)
    assert usage["cost-nanodollars"] == usage["cache-write-tokens"] == {"coverage": "unavailable"}
    aborted = cell_of(produced[form]["aborted"], "list-open-issues")
    # epoch 3 never ran: what the others used is a lower bound
    assert aborted["usage"]["agent-turns"]["coverage"] == "partial" and aborted["usage"]["agent-turns"]["value"] > 0
    assert "usage not recorded by every unit, partial (a lower bound): agent-turns" in aborted["message"]


def test_both_formats_agree(produced: dict[str, dict[str, Path]]) -> None:
    for key in CAMPAIGN:
        eval_cell, json_cell = (cell_of(produced[form]["campaign"], key) for form in ("eval", "json"))
        assert eval_cell["checks"] == json_cell["checks"]
        assert eval_cell["disposition"] == json_cell["disposition"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["campaign.eval", "campaign.json"])
def test_the_committed_corpus_still_reads(version: str, name: str) -> None:
    assert_cells(CORPUS / version / name, CAMPAIGN)
    assert_cells(CORPUS / version / "aborted.eval", {k: v for k, v in ABORTED.items()})


def test_the_installed_inspect_version_has_a_corpus() -> None:
    # Bumping inspect-ai in requirements/producers.txt needs a corpus of its logs (the producer writes one):
    # then a format change in a new release fails the corpus test instead of reaching a user.
    pinned = next(line.split("==")[1].split()[0] for line in (PRODUCERS.parents[1] / "requirements" /
                  "producers.txt").read_text().splitlines() if line.startswith("inspect-ai=="))
    assert f"inspect-ai-{pinned}" in VERSIONS


# --- the cell command and export ------------------------------------------------------------------------


def test_cell_command_reads_a_log_directory(tmp_path: Path, produced: dict[str, dict[str, Path]]) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    logs = produced["eval"]["campaign"].parent
    out = tmp_path / "cell-results" / "checkout-task.json"
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "checkout-task", "inspect-log": str(logs),
                                      "out": str(out)}, worker_env())
    assert run.exit_code == 0, run.summary
    result = cell_from_bytes(out.read_bytes(), out.name)
    assert (result.disposition, result.document["source-sha"], result.document["run-attempt"]) == (
        "infrastructure_failure", HEAD_SHA, 1)
    # the directory holds the campaign and the aborted eval; only the campaign measured checkout-task,
    # and both logs are listed as the cell's inputs
    assert len(result.document["artifacts"]) == 2
    assert "token limit" in run.summary


def test_two_logs_measuring_one_case_are_refused(tmp_path: Path, produced: dict[str, dict[str, Path]]) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "get-task-context",
                                      "inspect-log": str(produced["json"]["campaign"].parent),
                                      "out": str(tmp_path / "c.json")}, worker_env())
    assert (run.exit_code, run.outputs["error-code"]) == (2, "export.adapter")
    assert "both measure case 'get-task-context'" in run.summary
    assert not (tmp_path / "c.json").exists()


def test_cell_command_with_one_log_file(tmp_path: Path, produced: dict[str, dict[str, Path]]) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    out = tmp_path / "cell.json"
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "delegate-subtask",
                                      "inspect-log": str(produced["json"]["campaign"]), "out": str(out)}, worker_env())
    assert run.exit_code == 0, run.summary
    document = json.loads(out.read_text())
    assert document["disposition"] == "passed"
    assert document["usage"]["input-tokens"] > 0
    assert "✅" in run.summary


def test_export_adapts_inspect_logs_in_the_layout(tmp_path: Path) -> None:
    root = tmp_path / "cell-results"
    (root / "get-task-context").mkdir(parents=True)
    (root / "get-task-context" / "campaign.eval").write_bytes((CORPUS / VERSIONS[-1] / "campaign.eval").read_bytes())
    (root / "list-open-issues" / "inspect-logs").mkdir(parents=True)
    (root / "list-open-issues" / "inspect-logs" / "campaign.json").write_bytes(
        (CORPUS / VERSIONS[-1] / "campaign.json").read_bytes())
    cells = collect_cells(root, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                          fallback_time=1_764_000_000.0)
    by_key = {f.case: f.adapted for f in cells if f.adapted is not None}
    assert (by_key["get-task-context"].disposition, by_key["get-task-context"].origin) == ("passed", "inspect-log")
    assert by_key["list-open-issues"].disposition == "behavior_failure"
    assert by_key["list-open-issues"].inputs[0][0] == "list-open-issues/inspect-logs/campaign.json"


# --- versions and hostile logs -----------------------------------------------------------------------


def corpus_json() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((CORPUS / VERSIONS[-1] / "campaign.json").read_bytes())
    return document


def refusal(data: bytes) -> Refusal:
    with pytest.raises(Refusal) as caught:
        to_run(read_log(data, "log.json"))
    return caught.value


def rezip(path: Path, edit: dict[str, bytes | None]) -> bytes:
    """An .eval archive with entries replaced (or removed: None), inflated with our own decoder."""
    from testops_evidence.readers.archive import ArchiveLimits, extract_zip

    archive = extract_zip(path.read_bytes(), limits=ArchiveLimits(zstandard=True, max_ratio=1000))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name in archive.names:
            data = edit.get(name, archive.files[name].data)
            if data is not None:
                target.writestr(name, data)
        for name, data in edit.items():
            if name not in archive.names and data is not None:
                target.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize("version", [1, 3, 99])
def test_an_unknown_log_version_is_refused_by_name(version: int) -> None:
    document = corpus_json()
    document["version"] = version
    caught = refusal(json.dumps(document).encode())
    assert caught.code == "export.log_version"
    assert f"log format version {version}" in caught.message and caught.actual == version


def test_an_unknown_eval_archive_version_is_refused_by_name() -> None:
    path = CORPUS / VERSIONS[-1] / "campaign.eval"
    header = json.loads(rezip_entry(path, "header.json"))
    header["version"] = 3
    with pytest.raises(Refusal) as caught:
        read_log(rezip(path, {"header.json": json.dumps(header).encode()}), "campaign.eval")
    assert (caught.value.code, caught.value.actual) == ("export.log_version", 3)


def rezip_entry(path: Path, name: str) -> bytes:
    from testops_evidence.readers.archive import ArchiveLimits, extract_zip

    return extract_zip(path.read_bytes(), limits=ArchiveLimits(zstandard=True, max_ratio=1000)).files[name].data


def test_a_result_for_a_sample_the_archive_never_ran_is_refused() -> None:
    path = CORPUS / VERSIONS[-1] / "campaign.eval"
    with pytest.raises(Refusal) as caught:
        read_log(rezip(path, {"samples/get-task-context_epoch_2.json": None}), "campaign.eval")
    assert caught.value.code == "export.log_inconsistent"
    assert "sample 'get-task-context' epoch 2" in caught.value.message


def test_a_sample_dropped_from_a_successful_log_is_not_recorded_never_passed() -> None:
    document = corpus_json()
    document["samples"] = [s for s in document["samples"] if (s["id"], s["epoch"]) != ("get-task-context", 3)]
    run = to_run(read_log(json.dumps(document).encode(), "log.json"))
    cell = framework_cell(CONTRACT.case("get-task-context"), [("log.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, inputs=[], fallback_time=0.0, origin="inspect-log")
    assert cell["disposition"] == "infrastructure_failure"
    assert all(not c["passed"] and "sample get-task-context epoch 3" in c["message"] for c in cell["checks"])


def test_a_forged_pass_on_an_errored_sample_stays_an_error() -> None:
    document = corpus_json()
    errored = next(s for s in document["samples"] if s.get("error"))
    good = next(s for s in document["samples"] if s["id"] == errored["id"] and not s.get("error"))
    errored["scores"] = copy.deepcopy(good["scores"])
    run = to_run(read_log(json.dumps(document).encode(), "log.json"))
    cell = framework_cell(CONTRACT.case(errored["id"]), [("log.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                          inputs=[], fallback_time=0.0, origin="inspect-log")
    assert cell["disposition"] == "infrastructure_failure"


@pytest.mark.parametrize(("edit", "code", "words"), [
    (lambda d: d["samples"].append(copy.deepcopy(d["samples"][0])), "export.log_inconsistent", "appears twice"),
    (lambda d: d["samples"][0].update(epoch=4), "export.log_inconsistent", "ran 3 epoch(s)"),
    (lambda d: d["samples"][0].update(id="not-in-the-dataset"), "export.log_inconsistent", "not in the eval's dataset"),
    (lambda d: d["eval"]["dataset"]["sample_ids"].append(d["eval"]["dataset"]["sample_ids"][0]),
     "export.log_inconsistent", "twice"),
    (lambda d: d["samples"][0].update(started_at="1901-01-01T00:00:00+00:00"), "export.adapter", "outside 2000-2200"),
    (lambda d: d["samples"][0].update(completed_at="2001-01-01T00:00:00+00:00"), "export.adapter", "before it started"),
    (lambda d: d["samples"][0]["model_usage"]["mockllm/model"].update(input_tokens=2**60), "export.adapter",
     "out of range"),
    (lambda d: d["samples"][0]["model_usage"]["mockllm/model"].update(total_cost=-1.0), "export.adapter", "invalid"),
    (lambda d: d.update(status="finished"), "export.adapter", "/status"),
    (lambda d: d["samples"][0].update(epoch=0), "export.adapter", "/samples/0/epoch"),
    (lambda d: d.pop("eval"), "export.adapter", "eval"),
])
def test_hostile_json_logs_are_refused(edit: Any, code: str, words: str) -> None:
    document = corpus_json()
    edit(document)
    caught = refusal(json.dumps(document).encode())
    assert caught.code == code and words in caught.message, caught.message


@pytest.mark.parametrize(("data", "words"), [
    (b'{"version": 2, "version": 2}', "twice"),
    (b'{"version": 2, "eval": {"task": "t", "config": {"epochs": ' + b"9" * 60 + b"}}}", "digits"),
    (b'{"version": 2, "eval": {"task": "\\ud800"}}', "surrogate"),
    (b"\xff\xfe{}", "neither"),
    (b"{" * 100_000, "not valid"),
    (b"not a log", "neither"),
])
def test_malformed_json_is_refused(data: bytes, words: str) -> None:
    caught = refusal(data)
    assert caught.code == "export.adapter" and words in caught.message, caught.message


@pytest.mark.parametrize("name", ["../escape.json", "/abs.json", "samples/a\\b.json"])
def test_an_eval_archive_with_an_unsafe_entry_is_refused(name: str) -> None:
    path = CORPUS / VERSIONS[-1] / "campaign.eval"
    with pytest.raises(Refusal) as caught:
        read_log(rezip(path, {name: b"{}"}), "campaign.eval")
    assert caught.value.code == "import.unsafe_archive"


def test_a_crashed_eval_archive_without_header_is_incomplete() -> None:
    path = CORPUS / VERSIONS[-1] / "campaign.eval"
    summaries = rezip_entry(path, "summaries.json")
    data = rezip(path, {"header.json": None, "summaries.json": None, "_journal/summaries/1.json": summaries,
                        "_journal/summaries/2.json": None, "_journal/summaries/3.json": None})
    run = to_run(read_log(data, "campaign.eval"))
    assert run.incomplete is not None and "status 'started'" in run.incomplete


@pytest.mark.parametrize(("value", "ok"), [
    ("C", True), ("c", True), ("yes", True), ("TRUE", True), (True, True), (1, True), (1.0, True), ("1", True),
    ("I", False), ("P", False), ("N", False), (0.999, False), (False, False), (float("nan"), False), ("maybe", False),
    ([1], False), ({"a": "C"}, False), (None, False), ("inf", False),
])
def test_a_score_passes_only_when_inspect_reads_it_as_one(value: Any, ok: bool) -> None:
    assert passes(value) is ok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_mutated_logs_are_read_or_refused_never_crash(data: st.DataObject) -> None:
    document = corpus_json()
    document["samples"] = document["samples"][:4]
    mutate(document, data)
    try:
        run = to_run(read_log(json.dumps(document).encode(), "log.json"))
    except Refusal as exc:
        assert exc.code in ("export.adapter", "export.log_version", "export.log_inconsistent")
        return
    for key in run.cases():
        if key in {c.key for c in CONTRACT.cases}:
            cell = framework_cell(CONTRACT.case(key), [("log.json", run)], source_sha=HEAD_SHA, selection_sha256=DIGEST, profile=PROFILE,
                                  inputs=[], fallback_time=1_764_000_000.0, origin="inspect-log")
            adapted_cell(cell, "log.json", [], "inspect-log")


def test_log_text_reaches_the_summary_as_text_never_markup(tmp_path: Path) -> None:
    document = corpus_json()
    hostile = "<img src=x onerror=alert(1)> [click](https://evil.example) | @everyone ![x](https://t.example/p.png)"
    for sample in document["samples"]:
        if sample["id"] == "list-open-issues" and sample["epoch"] == 2:
            sample["scores"]["filtered_correctly"]["explanation"] = hostile
    log = tmp_path / "log.json"
    log.write_text(json.dumps(document))
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "list-open-issues", "inspect-log": str(log),
                                      "out": str(tmp_path / "cell.json")}, worker_env())
    assert run.exit_code == 0, run.summary
    assert "onerror=alert" in json.loads((tmp_path / "cell.json").read_text())["checks"][1]["message"]
    for live in (r"(?<!\\)<img", r"\]\(https://evil", r"(?<!\\)!\[x", "@everyone"):
        assert re.search(live, run.summary) is None, live


def test_an_inconsistent_log_at_export_breaks_only_its_case(tmp_path: Path) -> None:
    root = tmp_path / "cell-results"
    (root / "get-task-context").mkdir(parents=True)
    forged = rezip(CORPUS / VERSIONS[-1] / "campaign.eval", {"samples/get-task-context_epoch_1.json": None})
    (root / "get-task-context" / "campaign.eval").write_bytes(forged)
    (root / "list-open-issues").mkdir()
    (root / "list-open-issues" / "campaign.eval").write_bytes((CORPUS / VERSIONS[-1] / "campaign.eval").read_bytes())
    files = collect_cells(root, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, fallback_time=1_764_000_000.0)
    by_case = {f.case: f for f in files}
    failure = by_case["get-task-context"].failure
    assert failure is not None and failure.code == "export.log_inconsistent"
    adapted = by_case["list-open-issues"].adapted
    assert adapted is not None and adapted.disposition == "behavior_failure"


def test_nan_metrics_are_read_as_inspect_writes_them_and_never_pass() -> None:
    # Inspect serialises non-finite floats as NaN/Infinity on purpose (undefined metrics); the strict reader
    # of every other document refuses them, this one reads them, and a NaN score fails its check.
    document = corpus_json()
    for sample in document["samples"]:
        if sample["id"] == "get-task-context" and sample["epoch"] == 1:
            sample["scores"]["tool_called"]["value"] = float("nan")
    text = json.dumps(document)
    assert "NaN" in text
    run = to_run(read_log(text.encode(), "log.json"))
    cell = framework_cell(CONTRACT.case("get-task-context"), [("log.json", run)], source_sha=HEAD_SHA,
                          selection_sha256=DIGEST, profile=PROFILE, inputs=[], fallback_time=0.0, origin="inspect-log")
    assert cell["disposition"] == "behavior_failure"
    assert "tool_called = nan" in next(c for c in cell["checks"] if c["id"] == "tool-called")["message"]
