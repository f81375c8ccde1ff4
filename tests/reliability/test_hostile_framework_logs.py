"""Issue #18's adapters attacked as the agent under evaluation would (#14's rules applied to them): the
agent runs in the worker, writes the Inspect AI log or promptfoo results the adapters read, and wants a
pass, a crash or the export's memory. Every attack here ends in a coded refusal, a not-pass, or escaped
text; the ones that did not on the main they were found on are marked "found:".

The hostile ``.eval`` archives are written byte by byte (tests/hostile_eval.py) so that sizes, CRCs,
names and frame headers can lie; benchmarks/zstd_decode.py measures the worst of them as whole processes.
"""

from __future__ import annotations

import copy
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

import hostile_eval as h
from evidence_support import HEAD_SHA, actions_env, example_contract, write_contract
from framework_support import CORPUS
from helpers import run_mode
from test_md import elements
from testops_evidence.errors import Refusal
from testops_evidence.readers import zstd
from testops_evidence.readers.adapters import inspect_log, promptfoo
from testops_evidence.readers.adapters.frameworks import framework_cell
from testops_evidence.readers.adapters.inspect_log import read_log, to_run

MIB = 1024 * 1024
CONTRACT = example_contract()
INSPECT = sorted(CORPUS.glob("inspect-ai-*"))[-1]
PROMPTFOO = sorted(CORPUS.glob("promptfoo-*"))[-1]
CASE = "get-task-context"
HEAD = h.header(samples=(CASE,))
RAN = h.zstd_entry(f"samples/{CASE}_epoch_1.json", b"{}")


def refused(data: bytes, source: str = "log.eval") -> Refusal:
    with pytest.raises(Refusal) as caught:
        to_run(read_log(data, source))
    assert caught.value.code != "internal.error"
    return caught.value


def verdict(data: bytes, case: str = CASE) -> dict[str, Any]:
    run = to_run(read_log(data, "log.eval"))
    return framework_cell(CONTRACT.case(case), [("log.eval", run)], source_sha=HEAD_SHA, selection_sha256="5e" * 32,
                          profile=dict(CONTRACT.profile), inputs=[], fallback_time=0.0, origin="inspect-log")


# --- decompression bombs ----------------------------------------------------------------------------------


def test_the_builder_writes_what_the_reader_reads() -> None:
    """The hostile builders are honest when asked to be: an archive they write reads as a pass."""
    cell = verdict(h.eval_archive(h.header(samples=(CASE,)), [h.summary(CASE, value="C", metadata={})]))
    assert cell["disposition"] != "passed"  # a log of one scorer does not measure every check of the case...
    run = to_run(read_log(h.eval_archive(HEAD, [h.summary(CASE)]), "log.eval"))
    assert [(o.name, o.status) for o in run.outcomes] == [("match", "passed")]  # ...but it is read as written


def test_found_a_summary_that_declares_256_mib_is_refused_before_it_is_inflated() -> None:
    """found: 270 KB of Zstandard RLE blocks declaring 256 MiB (ratio under the 1000:1 cap, CRC right)
    was inflated whole: 534 MiB and 9 s before the JSON was even parsed."""
    data = h.write_zip([h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
                        h.rle_bomb_entry("summaries.json", 256 * MIB)])
    assert len(data) < 300_000
    caught = refused(data)
    assert caught.code == "export.log_budget"
    assert caught.actual > inspect_log.SUMMARY_BUDGET and "summaries" in caught.message


def test_found_journal_summaries_cannot_add_up_past_the_budget() -> None:
    """found: every journal entry had its own 256 MiB cap against a shared 4 GiB: four of them took 1.3 GB
    and 26 s (sixteen: 4 GiB). The declared sizes of everything to inflate share one budget now."""
    entries = [h.zstd_entry("_journal/start.json", json.dumps(HEAD).encode()), RAN]
    entries += [h.rle_bomb_entry(f"_journal/summaries/{n}.json", 20 * MIB) for n in range(1, 5)]
    caught = refused(h.write_zip(entries))
    assert caught.code == "export.log_budget" and caught.actual == 80 * MIB + len(json.dumps(HEAD))


def test_the_journal_is_not_read_when_the_finished_summaries_are_there() -> None:
    """An archive holding both summaries.json and the journal (as Inspect writes it) had both inflated
    (twice the memory); a journal beside the finished summaries is now never inflated at all."""
    entries = [h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
               h.zstd_entry("summaries.json", json.dumps([h.summary(CASE)]).encode()),
               h.zstd_entry("_journal/summaries/1.json", b"not json"),
               h.rle_bomb_entry("_journal/summaries/2.json", 60 * MIB)]
    run = to_run(read_log(h.write_zip(entries), "log.eval"))
    assert [o.status for o in run.outcomes] == ["passed"]


def test_found_millions_of_tiny_json_values_are_refused_before_they_are_parsed() -> None:
    """found: `[{},{},...]` in 1.8 MB of summaries took 125 s and 2.1 GB to refuse (jsonschema made an
    error object for each item before the first was reported)."""
    caught = refused(h.write_zip([h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
                                  h.zstd_entry("summaries.json", b"[" + b"{}," * 2_100_000 + b"{}]")]))
    assert caught.code == "export.log_budget" and "JSON values" in caught.message


def test_found_a_json_log_is_bounded_by_its_values_too() -> None:
    text = b'{"version": 2, "samples": [' + b"[]," * 4_100_000 + b"[]]}"
    caught = refused(text, "log.json")
    assert caught.code == "export.log_budget" and ".eval" in caught.message


def test_found_a_schema_violation_in_every_item_is_reported_without_collecting_them_all() -> None:
    """Under the value budget, a list of invalid items costs one error to report, not one per item."""
    caught = refused(h.write_zip([h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
                                  h.zstd_entry("summaries.json", b"[" + b"{}," * 300_000 + b"{}]")]))
    assert caught.code == "export.adapter" and "/samples/0/id" in caught.message


@pytest.mark.parametrize(("frame", "words"), [
    (h.ZSTD_MAGIC + bytes([0x00, 0xF8]) + h.block_header(1, 10, True) + b"x", "window"),
    (h.ZSTD_MAGIC + bytes([0x00, h.window_byte(1 << 20)]) + h.block_header(1, h.BLOCK + 1, True) + b"x",
     "maximum block size"),
    (h.rle_frame(b"x", 1000)[:-3], "cut short"),
    (h.rle_frame(b"x", 1000, fcs=True)[:6] + (999).to_bytes(8, "little") + h.rle_frame(b"x", 1000)[6:],
     "declared size"),
    (h.rle_frame(b"x", 10) + b"\0\0", "trailing bytes"),
    (h.skippable(4)[:-2], "runs past"),
    (h.ZSTD_MAGIC + bytes([0x03, h.window_byte(1 << 20)]) + b"\1\0\0\0" + h.block_header(1, 1, True) + b"x",
     "dictionary"),
    (h.ZSTD_MAGIC + bytes([0x00, h.window_byte(1 << 20)]) + h.block_header(3, 1, True) + b"x", "reserved type"),
    (b"\x28\xb5\x2f\xfe" + b"\0" * 8, "bad magic"),
])
def test_malformed_zstandard_frames_are_refused_by_name(frame: bytes, words: str) -> None:
    with pytest.raises(zstd.ZstdError, match=words):
        zstd.decompress(frame, 1 << 20)


def test_a_frame_cannot_inflate_past_its_cap_whatever_it_declares() -> None:
    with pytest.raises(zstd.ZstdError, match="past its cap"):
        zstd.decompress(h.rle_frame(b"x", 10 * MIB), 1 * MIB)
    with pytest.raises(zstd.ZstdError, match="more content than its cap"):
        zstd.decompress(h.rle_frame(b"x", 10 * MIB, fcs=True), 1 * MIB)
    # frames after frames (and skippable frames between them) share the one cap
    with pytest.raises(zstd.ZstdError, match="past its cap"):
        zstd.decompress((h.rle_frame(b"x", 600_000) + h.skippable(8)) * 2, 1 * MIB)


# --- zip tricks -------------------------------------------------------------------------------------------


def archive(*extra: h.Entry, summary_entry: h.Entry | None = None) -> bytes:
    return h.write_zip([h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
                        summary_entry or h.zstd_entry("summaries.json", json.dumps([h.summary(CASE)]).encode()),
                        *extra])


PASSING = json.dumps([h.summary(CASE)]).encode()
FAILING = json.dumps([h.summary(CASE, value="I")]).encode()


@pytest.mark.parametrize(("data", "words"), [
    # a second summaries.json after the first: a reader keeping the last would see another verdict
    (h.write_zip([h.zstd_entry("header.json", json.dumps(HEAD).encode()), RAN,
                  h.zstd_entry("summaries.json", FAILING), h.zstd_entry("summaries.json", PASSING)]), "same name"),
    (archive(h.zstd_entry("../summaries.json", PASSING)), "'..'"),
    (archive(h.zstd_entry("/summaries.json", PASSING)), "absolute"),
    (archive(h.zstd_entry("samples\\..\\x.json", PASSING)), "backslash"),
    (archive(h.zstd_entry("samples/link.json", b"/etc/passwd", external_attr=0o120777 << 16)), "symbolic link"),
    # the local header names another entry than the central directory (what a streaming reader would see)
    (archive(summary_entry=h.zstd_entry("summaries.json", PASSING, local_name="summaries.jsoN")), "local header"),
    # the declared size or CRC-32 lies about the content
    (archive(summary_entry=h.Entry("summaries.json", h.raw_frame(PASSING), len(PASSING) - 1, zlib.crc32(PASSING))),
     "declared size|past its cap|size or CRC"),
    (archive(summary_entry=h.Entry("summaries.json", h.raw_frame(PASSING), len(PASSING), zlib.crc32(FAILING))),
     "CRC-32"),
    # stored, with a declared size smaller than what is stored
    (archive(summary_entry=h.Entry("summaries.json", PASSING, 10, zlib.crc32(PASSING[:10]), method=0)),
     "stored entry holds"),
    (archive(summary_entry=h.Entry("summaries.json", PASSING, len(PASSING), zlib.crc32(PASSING), method=12)),
     "compression method 12"),
    # a zip64-sized claim: 5 GiB declared for one entry
    (archive(summary_entry=h.Entry("summaries.json", h.raw_frame(PASSING), 0xFFFFFFFE, 0)), "bytes, over"),
])
def test_zip_tricks_are_refused_as_unsafe_archives(data: bytes, words: str) -> None:
    caught = refused(data)
    assert caught.code in ("import.unsafe_archive", "export.log_budget"), caught
    assert __import__("re").search(words, caught.message), caught.message


# --- passes that were not earned ---------------------------------------------------------------------------


@pytest.mark.parametrize("edit", [
    lambda s: s.update(error={"message": "crashed", "traceback": ""}),
    lambda s: s.update(limit={"type": "token", "limit": 10, "reason": "over"}),
    lambda s: s.update(invalidation={"timestamp": "2026-12-01T10:00:00+00:00", "author": "x", "reason": "x"}),
    lambda s: s["scores"]["match"].update(value=float("nan")),
    lambda s: s["scores"]["match"].update(value=float("inf")),
    lambda s: s["scores"]["match"].update(value="I"),
    lambda s: s["scores"]["match"].update(value=[1]),
    lambda s: s["scores"]["match"].update(value={"match": "C", "extra": {"nested": 1}}),
    lambda s: s["scores"]["match"].update(value=1.0000001),
    lambda s: s["scores"]["match"].update(value="1e0 "),  # Inspect reads it as 1: a pass, for comparison
])
def test_a_sample_that_did_not_pass_never_reads_as_passed(edit: Any) -> None:
    sample = h.summary(CASE)
    edit(sample)
    try:
        run = to_run(read_log(h.eval_archive(HEAD, [sample]), "log.eval"))
    except Refusal as refusal:  # the schema may refuse an odd shape outright; that is never a pass either
        assert refusal.code.startswith("export."), refusal
        return
    statuses = {o.status for o in run.outcomes if o.name == "match"}
    if sample["scores"]["match"]["value"] == "1e0 ":
        assert statuses == {"passed"}
    else:  # a check passes only when every outcome mapped to it passed (adapters.build_cell)
        assert statuses and statuses != {"passed"}, statuses


@pytest.mark.parametrize("status", ["started", "cancelled", "error"])
def test_a_successful_sample_of_an_unfinished_eval_does_not_pass(status: str) -> None:
    run = to_run(read_log(h.eval_archive(h.header(samples=(CASE,), status=status), [h.summary(CASE)]), "log.eval"))
    assert run.incomplete is not None and status in run.incomplete


def test_an_epoch_the_eval_promised_and_does_not_hold_is_not_recorded() -> None:
    run = to_run(read_log(h.eval_archive(h.header(samples=(CASE,), epochs=2), [h.summary(CASE)]), "log.eval"))
    assert f"sample {CASE} epoch 2" in run.expected_units(CASE)
    assert not any(o.unit == f"sample {CASE} epoch 2" for o in run.outcomes)


def test_two_samples_claiming_one_case_must_both_pass() -> None:
    head = h.header(samples=(CASE, "other"))
    other = h.summary("other", value="I", metadata={"case": CASE})
    run = to_run(read_log(h.eval_archive(head, [h.summary(CASE), other]), "log.eval"))
    assert {o.status for o in run.outcomes if o.case == CASE} == {"passed", "failed"}


def test_a_spoofed_log_version_is_refused_by_name() -> None:
    for version in (3, 2.0, "2", True):
        caught = refused(h.eval_archive(h.header(samples=(CASE,), version=version), [h.summary(CASE)]))  # type: ignore[arg-type]
        assert caught.code in ("export.log_version", "export.adapter")
        if version == 3:
            assert caught.code == "export.log_version" and caught.actual == 3


@pytest.mark.parametrize("value", ["9" * 30, "1" + "0" * 5000, "-" + "9" * 20])
def test_huge_integers_in_a_log_are_refused(value: str) -> None:
    text = json.dumps([h.summary(CASE)]).replace('"epoch": 1', f'"epoch": {value}').encode()
    assert refused(archive(summary_entry=h.zstd_entry("summaries.json", text))).code == "export.adapter"


def test_deeply_nested_json_is_refused() -> None:
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    text = json.dumps([h.summary(CASE, metadata={"x": "@"})]).encode().replace(b'"@"', deep)
    assert refused(archive(summary_entry=h.zstd_entry("summaries.json", text))).code == "export.adapter"


# --- promptfoo ----------------------------------------------------------------------------------------------


def promptfoo_doc() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((PROMPTFOO / "results.json").read_bytes())
    return document


def pf_refusal(document: dict[str, Any]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        promptfoo.read_results(json.dumps(document).encode(), "results.json")
    assert caught.value.code != "internal.error"
    return caught.value


def test_found_deeply_nested_assertion_results_are_refused_not_a_crash() -> None:
    """found: 200 levels of componentResults (400 of JSON, under the reader's 512) overflowed the schema
    checker's recursion: internal.error."""
    document = promptfoo_doc()
    node = document["results"]["results"][0]["gradingResult"]
    for _ in range(240):
        child = {"pass": True, "score": 1, "reason": "x", "componentResults": []}
        node["componentResults"] = [child]
        node = child
    caught = pf_refusal(document)
    assert caught.code == "export.adapter" and "nested too deeply" in caught.message


def test_success_with_a_failing_assertion_is_not_a_pass() -> None:
    document = promptfoo_doc()
    result = document["results"]["results"][0]
    result["gradingResult"]["componentResults"][0]["pass"] = False
    run = promptfoo.read_results(json.dumps(document).encode(), "results.json")
    mine = [o for o in run.outcomes if o.unit and o.unit.startswith("test 0 ")]
    assert "failed" in {o.status for o in mine}


def test_success_without_a_grading_result_leaves_its_assertions_not_recorded() -> None:
    document = promptfoo_doc()
    document["results"]["results"][0].pop("gradingResult")
    run = promptfoo.read_results(json.dumps(document).encode(), "results.json")
    mine = [o for o in run.outcomes if o.unit and o.unit.startswith("test 0 ")]
    assert mine and {o.status for o in mine} == {"missing"}


@pytest.mark.parametrize(("edit", "code"), [
    (lambda r: r[0]["response"].update(cost=-0.01), "export.adapter"),
    (lambda r: r.append(copy.deepcopy(r[0])), "export.log_inconsistent"),  # one test's repeat twice
    (lambda r: r[0].update(success=True, failureReason=2), "export.log_inconsistent"),
    (lambda r: r[4].update(success=True), "export.log_inconsistent"),  # success flipped, reason kept
])
def test_inconsistent_promptfoo_results_are_refused(edit: Any, code: str) -> None:
    document = promptfoo_doc()
    edit(document["results"]["results"])
    assert pf_refusal(document).code == code


def test_a_nan_cost_is_refused() -> None:
    text = json.dumps(promptfoo_doc()).replace('"cost": 0', '"cost": NaN', 1).encode()
    with pytest.raises(Refusal) as caught:
        promptfoo.read_results(text, "results.json")
    assert caught.value.code == "export.adapter"


# --- summaries ------------------------------------------------------------------------------------------------

HOSTILE = "`</details>` ![x](http://t.example/p.png) <img src=x onerror=1> [a](http://evil.example) | c |\n# h"


def worker_env() -> dict[str, str]:
    return {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": "5e" * 32}


def assert_inert(summary: str) -> None:
    parsed = elements(summary)
    tags = {tag for tag, _ in parsed.starts}
    assert not tags & {"img", "a", "h1", "script"}, (tags, summary)
    assert parsed.ends.count("details") == [t for t, _ in parsed.starts].count("details"), summary


@pytest.mark.parametrize("case", ["create-issue-comment", "checkout-task", "list-open-issues", "delegate-subtask"])
def test_inspect_text_in_every_field_reaches_the_summary_inert(tmp_path: Path, case: str) -> None:
    document: dict[str, Any] = json.loads((INSPECT / "campaign.json").read_bytes())
    document["status"] = "error"
    document["error"] = {"message": HOSTILE, "traceback": HOSTILE}
    document["eval"]["task"] = HOSTILE
    for sample in document["samples"]:
        if sample.get("error"):
            sample["error"]["message"] = HOSTILE
        if sample.get("limit"):
            sample["limit"]["reason"] = HOSTILE
        if sample.get("model_usage"):
            sample["model_usage"] = {HOSTILE: next(iter(sample["model_usage"].values()))}
        for score in sample["scores"].values():
            score["explanation"] = HOSTILE
            if isinstance(score["value"], dict):
                score["value"][HOSTILE] = "I"
    log = tmp_path / "log.json"
    log.write_text(json.dumps(document))
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": case, "inspect-log": str(log),
                                      "out": str(tmp_path / "cell.json")}, worker_env())
    assert run.exit_code in (0, 1, 2), run.summary
    assert "internal.error" not in run.summary
    assert_inert(run.summary)


@pytest.mark.parametrize("case", ["get-task-context", "create-issue-comment", "checkout-task"])
def test_promptfoo_text_in_every_field_reaches_the_summary_inert(tmp_path: Path, case: str) -> None:
    document = promptfoo_doc()
    document.setdefault("metadata", {})["promptfooVersion"] = HOSTILE
    for result in document["results"]["results"]:
        result["provider"] = {"id": HOSTILE, "label": HOSTILE}
        if result.get("error"):
            result["error"] = HOSTILE
        for component in (result.get("gradingResult") or {}).get("componentResults") or []:
            component["reason"] = HOSTILE
        grading = result.get("gradingResult")
        if isinstance(grading, dict):
            grading["reason"] = HOSTILE
            grading.setdefault("componentResults", []).append(
                {"pass": False, "score": 0, "reason": HOSTILE, "assertion": {"type": "contains", "metric": HOSTILE}})
    log = tmp_path / "results.json"
    log.write_text(json.dumps(document))
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": case, "promptfoo": str(log),
                                      "out": str(tmp_path / "cell.json")}, worker_env())
    assert "internal.error" not in run.summary, run.summary
    assert_inert(run.summary)
