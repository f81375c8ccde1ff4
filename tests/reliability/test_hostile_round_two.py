"""Issue #14, "Hostile input, round two": each reproduction that ended in ``internal.error`` (or was
silently accepted) on the main it was found on, now a coded refusal of the parser's own area.

The attack classes (huge integers, NaN and Infinity, duplicate keys, extreme times, names ending in a
line break) are also drawn by every fuzz target (fuzzing.py); these are the reproductions themselves.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import cell, small_contract
from helpers import FakeClock
from servers.testops_server import TestOpsServer
from testops_evidence.errors import Refusal
from testops_evidence.testops.client import TestOpsClient

HUGE = "9" * 4400
DIGEST = "ab" * 32  # a selection digest for cell-result/v2 documents  # past Python's 4,300-digit int-string limit: json.loads raised ValueError
CONTRACT = small_contract()
TOKEN = "sentinel-token-hostile-round-two"
PROJECT = 1


def refusal_of(call: Callable[[], Any]) -> Refusal:
    with pytest.raises(Refusal) as info:
        call()
    assert info.value.code != "internal.error"
    return info.value


def with_raw(document: dict[str, Any], key: str, token: str) -> bytes:
    """``document`` serialised with the value of top-level ``key`` replaced by a raw JSON token."""
    marker = "\u0000raw\u0000"
    return json.dumps({**document, key: marker}).replace(json.dumps(marker), token).encode()


def with_duplicate(document: dict[str, Any], key: str, later: Any) -> bytes:
    """``document`` with ``key`` given a second time (``later``) at the end of the object."""
    return (json.dumps(document)[:-1] + f", {json.dumps(key)}: {json.dumps(later)}}}").encode()


# --- 1. integers of 4,300+ digits -------------------------------------------------------------------------

def test_1_a_huge_integer_in_a_json_contract_is_contract_invalid(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    path = tmp_path / "contract.json"
    path.write_bytes(with_raw(dict(CONTRACT.document), "version", HUGE))
    refusal = refusal_of(lambda: load_contract(path))
    assert (refusal.code, refusal.field) == ("contract.invalid", "/version")
    assert "an integer of 4400 digits" in refusal.message and "line 1" in refusal.message


def test_1_a_huge_integer_in_a_cell_result_is_export_cell_invalid() -> None:
    from testops_evidence.campaign.cells import cell_from_bytes

    data = with_raw(cell(CONTRACT, "budget-stop", selection_sha256=DIGEST), "run-attempt", HUGE)
    refusal = refusal_of(lambda: cell_from_bytes(data, "c.json"))
    assert refusal.code == "export.cell_invalid"
    assert "an integer of 4400 digits" in refusal.message and "line 1" in refusal.message


def test_1_a_huge_integer_in_an_allure_result_is_export_adapter() -> None:
    from testops_evidence.readers.adapters.allure_results import parse_result

    document = {"uuid": "u", "name": "test_x", "fullName": "m.test_x", "status": "passed", "start": 1, "stop": 2}
    refusal = refusal_of(lambda: parse_result(with_raw(document, "start", HUGE), "a-result.json"))
    assert refusal.code == "export.adapter"


def test_1_a_huge_integer_in_a_catalog_is_selection_catalog(tmp_path: Path) -> None:
    from testops_evidence.campaign.catalog import read_catalog

    path = tmp_path / "catalog.json"
    path.write_bytes(with_raw({"cases": {}}, "size", HUGE))
    assert refusal_of(lambda: read_catalog(path)).code == "selection.catalog"


def test_1_a_huge_integer_in_a_ledger_is_ledger_invalid() -> None:
    from testops_evidence.campaign.ledger import Ledger

    data = with_raw({"schema": "testops-evidence/ledger/v1", "campaign": "c"}, "imports", HUGE)
    refusal = refusal_of(lambda: Ledger.parse(data))
    assert (refusal.code, refusal.field) == ("ledger.invalid", "/imports")


def test_1_a_huge_integer_in_a_receipt_is_export_receipt() -> None:
    from testops_evidence.campaign.receipt import receipt_from_bytes

    data = with_raw({"schema": "testops-evidence/export-receipt/v1"}, "count", HUGE)
    assert refusal_of(lambda: receipt_from_bytes(data, "r.json")).code == "export.receipt"


@pytest.fixture
def testops() -> Iterator[tuple[TestOpsServer, FakeClock]]:
    clock = FakeClock()
    with TestOpsServer(token=TOKEN, clock=clock.monotonic) as server:
        server.add_project(PROJECT)
        server.add_case(PROJECT, "Case", "suite/case", id=100)
        yield server, clock


def client_for(server: TestOpsServer, clock: FakeClock) -> TestOpsClient:
    return TestOpsClient(server.url, TOKEN, project_id=PROJECT, clock=clock.time, monotonic=clock.monotonic,
                         sleep=clock.sleep, log=lambda _line: None, rng=random.Random(7), read_timeout=10.0)


def test_1_a_huge_integer_in_a_testops_answer_is_response_invalid(testops: tuple[TestOpsServer, FakeClock]) -> None:
    server, clock = testops
    server.fail("GET", "/testcase/100", "invalid_json", body=f'{{"id": {HUGE}}}'.encode())
    refusal = refusal_of(lambda: client_for(server, clock).get("/testcase/100"))
    assert refusal.code == "testops.response_invalid"
    assert "an integer of 4400 digits" in refusal.message


def test_1_after_a_mutation_a_huge_integer_answer_is_uncertain(testops: tuple[TestOpsServer, FakeClock]) -> None:
    server, clock = testops
    server.fail("POST", "/testcase", "invalid_json", body=f'{{"id": {HUGE}}}'.encode())
    before = len(server.cases)
    refusal = refusal_of(lambda: client_for(server, clock).post(
        "/testcase", {"projectId": PROJECT, "name": "n", "fullName": "suite/n"}))
    assert refusal.code == "testops.uncertain"  # the case was created; the answer cannot be read
    assert len(server.cases) == before + 1 and len(server.mutations()) == 1


# --- 2. Retry-After with hundreds of digits ------------------------------------------------------------------

@pytest.mark.parametrize("retry_after", ["9" * 400, "9" * 5000, "1" + "0" * 309])
def test_2_a_retry_after_of_hundreds_of_digits_is_a_deadline(testops: tuple[TestOpsServer, FakeClock],
                                                            retry_after: str) -> None:
    server, clock = testops
    server.fail("GET", "/testcase/100", "status", status=429, retry_after=retry_after)
    refusal = refusal_of(lambda: client_for(server, clock).get("/testcase/100"))
    assert (refusal.code, refusal.field) == ("testops.deadline", "Retry-After")
    assert clock.sleeps == []


# --- 11. non-standard JSON: NaN, Infinity, duplicate keys ---------------------------------------------------

@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_11_nan_and_infinity_in_a_catalog_are_refused_not_written_back(tmp_path: Path, token: str) -> None:
    from testops_evidence.campaign.catalog import read_catalog

    path = tmp_path / "catalog.json"
    path.write_bytes(with_raw({"cases": {"budget-stop": {"x": 1}}}, "weight", token))
    refusal = refusal_of(lambda: read_catalog(path))
    assert (refusal.code == "selection.catalog" and "not a JSON number" in refusal.message) or "too large" in (
        refusal.message)


def test_11_a_cell_with_two_dispositions_is_refused() -> None:
    from testops_evidence.campaign.cells import cell_from_bytes

    document = cell(CONTRACT, "budget-stop", disposition="passed", selection_sha256=DIGEST)
    data = with_duplicate(document, "disposition", "behavior_failure")
    refusal = refusal_of(lambda: cell_from_bytes(data, "c.json"))
    assert refusal.code == "export.cell_invalid"
    assert 'the key "disposition" appears twice' in refusal.message


def test_11_duplicate_keys_in_a_catalog_and_an_allure_result_are_refused(tmp_path: Path) -> None:
    from testops_evidence.campaign.catalog import read_catalog
    from testops_evidence.readers.adapters.allure_results import parse_result

    path = tmp_path / "catalog.json"
    path.write_bytes(with_duplicate({"cases": {"a": {}}}, "cases", {"b": {}}))
    assert refusal_of(lambda: read_catalog(path)).code == "selection.catalog"
    document = {"uuid": "u", "name": "test_x", "fullName": "m.test_x", "status": "failed", "start": 1, "stop": 2}
    refusal = refusal_of(lambda: parse_result(with_duplicate(document, "status", "passed"), "a-result.json"))
    assert refusal.code == "export.adapter" and "appears twice" in refusal.message


# --- 3. out-of-range times ----------------------------------------------------------------------------------

EXTREME_TIMES = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "1969-12-31T23:59:59Z"]


@pytest.mark.parametrize("moment", EXTREME_TIMES)
@pytest.mark.parametrize("field", ["started-at", "finished-at"])
def test_3_an_out_of_range_time_in_a_cell_is_export_cell_invalid(moment: str, field: str) -> None:
    from testops_evidence.campaign.cells import cell_from_bytes

    document = cell(CONTRACT, "budget-stop", started="1970-01-01T00:00:00Z", finished="9999-12-31T23:59:59Z",
                    selection_sha256=DIGEST)
    document[field] = moment
    refusal = refusal_of(lambda: cell_from_bytes(json.dumps(document).encode(), "c.json"))
    assert (refusal.code, refusal.field) == ("export.cell_invalid", field)
    assert "outside the times evidence can hold" in refusal.message


@pytest.mark.parametrize("stamp,duration,code", [
    ("9999-12-31T23:59:59-23:59", "3", None),  # not an instant in UTC: read as no timestamp (the step's clock)
    ("0001-01-01T00:00:00+23:59", "3", None),
    ("9999-12-31T23:59:00Z", "100000", "export.adapter"),  # ends after 9999-12-31T23:59:59Z
])
def test_3_an_out_of_range_junit_timestamp_never_crashes_the_cell_phase(tmp_path: Path, stamp: str, duration: str,
                                                                        code: str | None) -> None:
    from evidence_support import actions_env, write_contract
    from helpers import run_mode

    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    (tmp_path / "report.xml").write_text(f"<testsuite timestamp='{stamp}' time='{duration}'>"
                                         f"<testcase name='test_stopped_at_budget' time='{duration}'/>"
                                         "<testcase name='test_spend_reported'/></testsuite>")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop",
                                      "junit": str(tmp_path / "report.xml"), "out": str(tmp_path / "c.json")},
                   {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST})
    assert run.outputs.get("error-code") == code, run.summary
    assert run.exit_code == (0 if code is None else 2)


@pytest.mark.parametrize("moment", EXTREME_TIMES[:2])
def test_3_an_out_of_range_time_in_a_remote_host_document_is_import_host(moment: str) -> None:
    from test_import_validation import HOST, Cell, edit_json, refused  # the import validation harness

    def change(document: dict[str, Any]) -> None:
        document["qualified-at"] = moment
    assert refused("import.host", [Cell("exec-1")], entries=edit_json(HOST, change)).field == "qualified-at"


# --- 9. names ending in a line break ------------------------------------------------------------------------

def test_9_an_allure_result_named_with_a_trailing_line_break_is_refused_not_skipped(tmp_path: Path) -> None:
    from evidence_support import actions_env, write_contract
    from helpers import run_mode

    results = tmp_path / "allure-results"
    results.mkdir()
    passing = {"uuid": "a", "name": "test_stopped_at_budget", "fullName": "t.test_stopped_at_budget",
               "status": "passed", "start": 1_796_119_200_000, "stop": 1_796_119_201_000}
    failing = {**passing, "uuid": "b", "name": "test_spend_reported", "fullName": "t.test_spend_reported",
               "status": "failed"}
    (results / "a-result.json").write_text(json.dumps(passing))
    (results / "b-result.json\n").write_text(json.dumps(failing))  # the failure a `$` let through unread
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop",
                                      "allure-results": str(results), "out": str(tmp_path / "c.json")},
                   {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": DIGEST})
    assert run.outputs.get("error-code") == "io.unsafe_path", run.summary
    assert not (tmp_path / "c.json").exists()


def test_9_schema_patterns_end_at_the_end_of_the_text() -> None:
    from testops_evidence.campaign.cells import cell_from_bytes

    document = cell(CONTRACT, "budget-stop", attempt="attempt-1\n", selection_sha256=DIGEST)
    refusal = refusal_of(lambda: cell_from_bytes(json.dumps(document).encode(), "c.json"))
    assert (refusal.code, refusal.field) == ("export.cell_invalid", "/attempt-id")


# --- 4. a YAML contract under the size cap that took 90 s and 1.2 GB to refuse --------------------------------

@pytest.mark.parametrize("text", [
    "x: [" + "a," * 2_000_000 + "a]",  # 4 MB, 2 million flow items
    "x:\n" + "- a\n" * 900_000,  # 3.6 MB, 900k block items
])
def test_4_a_huge_yaml_contract_is_refused_by_the_budget_while_it_is_read(tmp_path: Path, text: str) -> None:
    from testops_evidence.contract import CONTRACT_LIMIT, load_contract

    path = tmp_path / "contract.yml"
    path.write_text(text)
    assert path.stat().st_size <= CONTRACT_LIMIT
    refusal = refusal_of(lambda: load_contract(path))
    # The budget stops the reading (benchmarks/yaml_load.py measures the time and memory: no timed test).
    assert refusal.code == "contract.invalid" and "more than 300,000 values" in refusal.message
    line = int(refusal.message.rsplit(" at line ", 1)[1].split(",")[0])
    assert line <= 300_001  # stopped at the 300,001st value, not at the end of the file


def test_1_a_huge_integer_in_a_yaml_contract_is_contract_invalid(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    path = tmp_path / "contract.yml"
    path.write_text(f"version: {HUGE}\ncampaign: c\n")
    refusal = refusal_of(lambda: load_contract(path))
    assert (refusal.code, refusal.field) == ("contract.invalid", "/version")
    assert "outside the 64-bit range" in refusal.message and "line 1, column 10" in refusal.message


# --- 13. the rest of the reproductions -----------------------------------------------------------------------------

def test_13_a_json_trailing_comma_is_reported_where_it_is(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    path = tmp_path / "contract.json"
    path.write_text('{\n  "version": 1,\n  "campaign": "c",\n}\n')
    refusal = refusal_of(lambda: load_contract(path))
    assert "a comma before } (JSON allows no trailing comma) at line 3, column 18" in refusal.message
    assert "Expecting" not in refusal.message  # our words, not Python's


def test_13_every_problem_of_a_contract_is_reported_at_once(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    document = json.loads(json.dumps(CONTRACT.document))
    document["campaign"] = "Not A Valid Id"
    document["cases"][0]["lane"] = "cloud"
    document["cases"][1]["timeout-minutes"] = "ten"
    path = tmp_path / "contract.yml"
    from ruamel.yaml import YAML

    with path.open("w") as handle:
        YAML().dump(document, handle)
    refusal = refusal_of(lambda: load_contract(path))
    assert refusal.problems is not None and len(refusal.problems) == 3
    assert [p["pointer"] for p in refusal.problems] == ["/campaign", "/cases/0/lane", "/cases/1/timeout-minutes"]
    assert all(p["line"] > 0 and p["column"] > 0 for p in refusal.problems)
    assert "and 2 more problems" in refusal.message


def test_13_a_huge_scalar_is_not_echoed_whole(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    path = tmp_path / "contract.json"
    document = json.loads(json.dumps(CONTRACT.document))
    document["campaign"] = "x" * 3_900_000  # under the 4 MiB cap
    path.write_text(json.dumps(document))
    refusal = refusal_of(lambda: load_contract(path))
    assert len(str(refusal)) < 10_000 and len(json.dumps(refusal.to_json())) < 10_000


def test_13_an_id_written_as_a_float_is_refused(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    document = small_contract(testops=True).document
    path = tmp_path / "contract.yml"
    from ruamel.yaml import YAML

    with path.open("w") as handle:
        YAML().dump(json.loads(json.dumps(document)), handle)
    path.write_text(path.read_text().replace("project-id: 12\n", "project-id: 12.0\n", 1))
    assert "project-id: 12.0" in path.read_text()
    refusal = refusal_of(lambda: load_contract(path))
    assert (refusal.code, refusal.field) == ("contract.invalid", "/testops/project-id")


def test_13_a_multi_line_mode_is_shown_as_one_code_span_in_the_heading(tmp_path: Path) -> None:
    from evidence_support import actions_env
    from helpers import run_mode

    run = run_mode("export\n## injected heading", tmp_path, {}, actions_env())
    assert run.outputs["error-code"] == "mode.unknown"
    assert "\n## injected heading" not in run.summary and "`export␤## injected heading`" in run.summary


# --- 10. a full disk -------------------------------------------------------------------------------------------------

def _limited(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return preexec


def test_10_a_disk_that_fills_while_export_writes_its_receipt_leaves_nothing_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_export import export, prepare

    options, env = prepare(tmp_path)
    probe = export(tmp_path, {**options, "results-dir": str(tmp_path / "probe" / "allure-results")}, env)
    assert probe.exit_code in (0, 1), probe.summary
    largest = max(p.stat().st_size for p in (tmp_path / "probe" / "allure-results").iterdir())
    receipt = (tmp_path / "probe" / "allure-results-receipt.json").stat().st_size
    assert receipt > largest + 200  # so a file-size limit between them fills "the disk" at the receipt
    # -B: a bytecode file truncated at the limit would break every later import of the module.
    command = [sys.executable, "-I", "-B", str(Path(__file__).resolve().parents[2] / "bin" / "testops-evidence"),
               "export", *(f"--{k}={v}" for k, v in options.items()), "--state-dir", str(tmp_path / "state-full")]
    done = subprocess.run(command, env={**env, "GITHUB_OUTPUT": str(tmp_path / "output"), "GITHUB_ACTIONS": "true",
                                        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
                                        "TESTOPS_EVIDENCE_SELECTION_SHA256": options["selection-sha256"]},
                          capture_output=True, text=True, preexec_fn=_limited((largest + receipt) // 2))
    failure = json.loads((tmp_path / "state-full" / "failure.json").read_text())
    assert (done.returncode, failure["code"]) == (4, "io.write_failed"), done.stdout + done.stderr
    assert "nothing of this export was left" in failure["message"]
    assert not (tmp_path / "out" / "allure-results").exists()  # the re-run is not blocked (io.exists)
    assert [p.name for p in (tmp_path / "out").iterdir()] == [] if (tmp_path / "out").exists() else True
    rerun = export(tmp_path, options, env)
    assert rerun.exit_code in (0, 1) and (tmp_path / "out" / "allure-results-receipt.json").exists()


# --- 6 and 7. the state dir: a symlinked parent, a read-only directory ------------------------------------------

BIN = Path(__file__).resolve().parents[2] / "bin" / "testops-evidence"


def test_6_the_default_state_dir_is_not_written_through_a_linked_parent(tmp_path: Path) -> None:
    import subprocess
    import sys

    from evidence_support import write_contract

    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    write_contract(CONTRACT, workspace / "contract.json")
    (workspace / ".testops-evidence").symlink_to(elsewhere)  # committed in a fork's checkout
    done = subprocess.run([sys.executable, "-I", str(BIN), "export", "--contract", "contract.json"], cwd=workspace,
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == 3 and "io.state_dir" in done.stderr, done.stdout + done.stderr  # refusals: stderr
    assert list(elsewhere.iterdir()) == []  # no state dir, no failure.json through the link


def _read_only(directory: Path) -> Callable[[], None]:
    """Make ``directory`` unwritable for this process (root ignores mode bits: the immutable attribute
    binds root too); returns the undo. Skips where neither is possible."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0:
        directory.chmod(0o555)
        return lambda: directory.chmod(0o755)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("as root, a read-only directory needs chattr +i (e2fsprogs) on a file system that supports it")
    return lambda: subprocess.run([chattr, "-i", str(directory)], check=True)


def test_7_a_read_only_state_dir_refuses_before_export_writes_anything(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_export import prepare

    options, env = prepare(tmp_path)
    state = tmp_path / "state-read-only"
    state.mkdir(mode=0o700)
    undo = _read_only(state)
    try:
        done = subprocess.run([sys.executable, "-I", str(BIN), "export", *(f"--{k}={v}" for k, v in options.items()),
                               "--state-dir", str(state)],
                              env={**env, "TESTOPS_EVIDENCE_SELECTION_SHA256": options["selection-sha256"]},
                              capture_output=True, text=True)
    finally:
        undo()
    assert done.returncode == 3 and "io.state_dir" in done.stdout and "cannot be written" in done.stdout, (
        done.stdout + done.stderr)
    assert not (tmp_path / "out").exists()  # no results left to block the re-run


# --- 8 and 13. credentials and malformed URLs in the TestOps endpoint ---------------------------------------

SECRET = "tok-SENTINEL-9e4c1a7f3b5d2086"


@pytest.mark.parametrize("endpoint,says", [
    (f"http://user:{SECRET}@testops.example", "holds the TestOps token"),
    ("http://user:other-password@testops.example", "holds a user name or password"),
    (f"https://testops.example/{SECRET}/api", "holds the TestOps token"),
    ("https://testops.example/?api_token=abc123", "has a query or fragment"),
    ("http://[::1", "is not a valid URL"),
    ("http://testops.example:99999/", "is not a valid URL"),
    ("https://", "with a host"),
])
def test_8_13_a_bad_endpoint_input_is_refused_without_echoing_a_secret(endpoint: str, says: str) -> None:
    from testops_evidence.contract import TestOpsConfig

    config = TestOpsConfig(endpoint="https://testops.example", project_id=1, plan_name="p")
    refusal = refusal_of(lambda: TestOpsClient.configured(config, SECRET, endpoint=endpoint))
    assert refusal.code == "input.testops-endpoint" and says in refusal.message
    shown = json.dumps(refusal.to_json()) + str(refusal)
    assert SECRET not in shown and "other-password" not in shown and "abc123" not in shown


def test_8_a_contract_endpoint_with_credentials_is_refused(tmp_path: Path) -> None:
    from testops_evidence.contract import load_contract

    document = json.loads(json.dumps(small_contract(testops=True).document))
    document["testops"]["endpoint"] = "https://user:secret-pass@testops.example"
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(document, indent=2))
    refusal = refusal_of(lambda: load_contract(path))
    assert (refusal.code, refusal.field) == ("contract.invalid", "/testops/endpoint")
    assert "secret-pass" not in json.dumps(refusal.to_json()) + str(refusal)


def test_8_no_once_marker_or_receipt_is_written_with_a_token_in_the_endpoint(tmp_path: Path) -> None:
    from evidence_support import actions_env, write_contract
    from helpers import run_mode

    contract = write_contract(small_contract(testops=True), tmp_path / "contract.json")
    run = run_mode("launch", tmp_path, {"contract": str(contract)},
                   {**actions_env(), "INPUT_TESTOPS-TOKEN": SECRET,
                    "INPUT_TESTOPS-ENDPOINT": f"https://user:{SECRET}@testops.example"})
    assert run.outputs.get("error-code") == "input.testops-endpoint", run.summary
    state = tmp_path / "state"
    written = [p.read_text() for p in state.rglob("*") if p.is_file()] if state.exists() else []
    assert not [p.name for p in state.glob("once-*")] if state.exists() else True
    assert all(SECRET not in text for text in [*written, run.summary, json.dumps(run.outputs)])


# --- 12. a literal <!DOCTYPE inside a JUnit CDATA section -------------------------------------------------------

SUREFIRE_WITH_HTML = b"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Surefire writes a page its test fetched into system-out -->
<testsuite name="web" tests="2" failures="0" errors="0" timestamp="2026-12-01T10:00:00" time="3">
  <testcase name="test_stopped_at_budget" classname="budget" time="1"><system-out><![CDATA[<!DOCTYPE html>
<html><head><title>ok</title></head><body><!ENTITY x "y"></body></html>]]></system-out></testcase>
  <testcase name="test_spend_reported" classname="budget" time="2"/>
</testsuite>
"""


def test_12_a_doctype_inside_cdata_is_text_not_a_dtd() -> None:
    from testops_evidence.readers.adapters.junit import parse_junit

    outcomes = parse_junit(SUREFIRE_WITH_HTML, "surefire.xml")
    assert [o.status for o in outcomes] == ["passed", "passed"]


@pytest.mark.parametrize("prolog", [b'<!DOCTYPE t [<!ENTITY a "aaaa">]>', b"<!DOCTYPE testsuite SYSTEM 'x.dtd'>",
                                    b'<?xml version="1.0"?>\n<!-- c --><!ENTITY a "b">'])
def test_12_a_dtd_in_the_prolog_is_still_refused(prolog: bytes) -> None:
    from testops_evidence.readers.adapters.junit import parse_junit

    data = prolog + b"<testsuite><testcase name='a'/></testsuite>"
    assert refusal_of(lambda: parse_junit(data, "r.xml")).code == "export.adapter"


def _test_module(name: str) -> Any:
    """A test module of tests/ or of tests/reliability/ (where the table's links point, as the generator finds it)."""
    import importlib

    from reliability import attacks

    here = Path(attacks.__file__).parent
    return importlib.import_module(f"reliability.{name}" if (here / f"{name}.py").exists() else name)


def test_every_attack_in_docs_security_names_tests_that_exist() -> None:

    from reliability.attacks import ATTACKS

    for attack in ATTACKS:
        for name in attack.tests:
            module, _, function = name.rpartition("::")
            holder = _test_module(module.removesuffix(".py")) if module else globals()
            found = getattr(holder, function, None) if module else holder.get(function)
            assert callable(found), f"attack {attack.item} names {name}, which is not a test"


def test_1_a_huge_integer_in_a_github_answer_is_response_invalid() -> None:
    from servers.github_server import GitHubServer
    from testops_evidence.github_run import RequestPolicy, fetch_run

    with GitHubServer() as github:
        github.add_repo("acme/agents")
        github.add_run("acme/agents", 4242, head_sha="a" * 40)
        github.fault("run", 200, body=f'{{"id": {HUGE}}}'.encode())
        refusal = refusal_of(lambda: fetch_run(github.api_url(), github.token, "acme/agents", 4242,
                                               policy=RequestPolicy(retries=0, sleep=lambda _s: None)))
    assert refusal.code == "github.response_invalid"
