"""Hostile input, round three (issue 24): each reproduction through real HTTP to the local servers or the
real CLI, failing on the main this round started from and passing now.

1. A server that echoes the token in an error message, across the cut: no piece of it survives.
2. Integers from untrusted text ("²" passes str.isdigit, int("²") raises): coded refusals, never a crash.
"""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import FakeClock, holds_secret, secret_leaks
from reliability.faults import SENTINEL, phase_world
from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence.errors import Refusal
from testops_evidence.github_run import RequestPolicy, fetch_run, request_policy
from testops_evidence.readers.integers import INT64_MAX, ascii_int, header_int, parse_int
from testops_evidence.redact import clip, scrub
from testops_evidence.testops.client import MESSAGE_LIMIT, TestOpsClient

TESTOPS_TOKEN = "tok-R3-testops-7c1e9a5f3b2d8046e1a9c7f5"  # 37 characters, no run of 8 in honest text
GITHUB_TOKEN = "ghs_R3github5e8c1a7f9b3d2046c8e1a5f7b9d3"  # 40, the length of a GitHub token
PROJECT = 12
REPO = "acme/agents"
RUN_ID = 5151

# Filler a server puts around the token: printable, no whitespace (the message is put on one line, which
# would shift the offsets), and no character of the tokens (so a piece found can only come from the token).
FILLER = st.text(alphabet="XYZWQ<>&|*_`#!.,;:", min_size=0, max_size=40)


def refusal_of(call: Any) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def shown(refusal: Refusal) -> str:
    """Everything of a refusal that reaches failure.json, the log and the summary."""
    return str(refusal) + json.dumps(refusal.to_json())


# --- the helper ----------------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=260), st.integers(min_value=10, max_value=240), FILLER)
def test_clip_never_leaves_a_piece_of_a_secret_at_any_offset_or_limit(offset: int, limit: int, filler: str) -> None:
    text = ("m" * offset) + TESTOPS_TOKEN + filler
    clipped = clip(text, limit, [TESTOPS_TOKEN])
    assert len(clipped) <= limit
    assert not holds_secret(clipped, TESTOPS_TOKEN)
    # Cut first and scrub second, as main did, and a prefix of the token survives wherever the cut splits it.
    if offset + 8 <= limit - 3 < offset + len(TESTOPS_TOKEN):
        assert holds_secret(text[: limit - 3].replace(TESTOPS_TOKEN, "***"), TESTOPS_TOKEN)


def test_scrub_removes_whole_secrets_and_pieces_and_leaves_the_rest() -> None:
    piece = TESTOPS_TOKEN[:20]
    text = f"a {TESTOPS_TOKEN} b {piece} c {TESTOPS_TOKEN[-9:]} d {TESTOPS_TOKEN[:7]} e"
    assert scrub(text, [TESTOPS_TOKEN, None, ""]) == f"a *** b *** c *** d {TESTOPS_TOKEN[:7]} e"
    assert scrub("short secret abc here", ["abc"]) == "short secret *** here"  # shorter than a piece: whole only
    assert scrub("nothing to see", [TESTOPS_TOKEN]) == "nothing to see"


# --- through the TestOps test server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def testops() -> Iterator[TestOpsServer]:
    clock = FakeClock()
    with TestOpsServer(token=TESTOPS_TOKEN, clock=clock.monotonic) as server:
        server.add_project(PROJECT)
        server.add_case(PROJECT, "Case", "suite/case", id=101)
        yield server


def make_testops_client(server: TestOpsServer, logs: list[str]) -> TestOpsClient:
    clock = FakeClock()
    return TestOpsClient(server.url, TESTOPS_TOKEN, project_id=PROJECT, clock=clock.time, monotonic=clock.monotonic,
                         sleep=clock.sleep, log=logs.append, rng=random.Random(7), read_timeout=10.0,
                         connect_timeout=2.0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=MESSAGE_LIMIT + 60), before=FILLER, after=FILLER)
@example(offset=MESSAGE_LIMIT - 3 - 31, before="", after="")  # main kept 31 of the token's characters here
@example(offset=MESSAGE_LIMIT - 3 - 8, before="", after="")
def test_1_a_testops_error_message_echoing_the_token_at_any_offset_leaks_no_piece(
        testops: TestOpsServer, offset: int, before: str, after: str) -> None:
    message = (before + "m" * offset)[:offset] + TESTOPS_TOKEN + after
    testops.clear_faults()
    testops.fail("GET", r"/testcase/101", "status", status=400, message=message)
    logs: list[str] = []
    with make_testops_client(testops, logs) as client:
        refused = refusal_of(lambda: client.get("/testcase/101"))
    assert refused.code == "testops.http_400"
    assert not holds_secret(shown(refused), TESTOPS_TOKEN), shown(refused)
    assert not any(holds_secret(line, TESTOPS_TOKEN) for line in logs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=120))
@example(offset=80 - 3 - 8)
def test_1_a_server_request_id_echoing_the_token_leaks_no_piece_into_the_log(testops: TestOpsServer,
                                                                           offset: int) -> None:
    testops.clear_faults()
    testops.fail("GET", r"/testcase/101", "headers", headers={"X-Request-Id": "r" * offset + TESTOPS_TOKEN})
    logs: list[str] = []
    with make_testops_client(testops, logs) as client:
        client.get("/testcase/101")
    assert logs and not any(holds_secret(line, TESTOPS_TOKEN) for line in logs), logs


# --- through the GitHub test server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=GITHUB_TOKEN) as server:
        server.add_repo(REPO, repo_id=77)
        server.add_run(REPO, RUN_ID, head_sha="9" * 40)
        yield server


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(min_value=0, max_value=260), before=FILLER, after=FILLER)
@example(offset=200 - 23, before="", after="")  # main kept 23 of the 40 characters here
@example(offset=200 - 8, before="", after="")
def test_1_a_github_error_message_echoing_the_token_at_any_offset_leaks_no_piece(
        github: GitHubServer, offset: int, before: str, after: str) -> None:
    message = (before + "m" * offset)[:offset] + GITHUB_TOKEN + after
    github.clear_faults()
    github.fault("run", status=422, body=json.dumps({"message": message}).encode())
    refused = refusal_of(lambda: fetch_run(github.api_url(), GITHUB_TOKEN, REPO, RUN_ID,
                                           policy=RequestPolicy(retries=0, backoff_factor=0)))
    assert refused.code == "github.http_422"
    assert not holds_secret(shown(refused), GITHUB_TOKEN), shown(refused)


# --- through the CLI runner: failure.json, the log, the step summary ------------------------------------------


def test_1_testops_phase_with_the_token_across_the_cut_leaks_nothing_anywhere(tmp_path: Path) -> None:
    with phase_world("launch", tmp_path) as (act, servers):
        assert servers.testops is not None
        servers.testops.fail("*", r".*", "status", status=400, times=None,
                             message="m" * (MESSAGE_LIMIT - 3 - 20) + SENTINEL + " and more")
        run = act().run
    failure = run.failure()
    assert failure is not None and failure["code"] == "testops.http_400", run.summary
    assert secret_leaks(run, SENTINEL, tmp_path) == []


def test_1_github_phase_with_the_token_across_the_cut_leaks_nothing_anywhere(tmp_path: Path) -> None:
    with phase_world("import", tmp_path) as (act, servers):
        assert servers.github is not None
        servers.github.fault("run", status=422, times=10,
                             body=json.dumps({"message": "m" * (200 - 20) + SENTINEL + " and more"}).encode())
        run = act().run
    failure = run.failure()
    assert failure is not None and failure["code"] == "github.http_422", run.summary
    assert secret_leaks(run, SENTINEL, tmp_path) == []


# --- 2. integers from untrusted text: ASCII digits only, through one parser ----------------------------------

SRC = Path(__file__).resolve().parents[2] / "src" / "testops_evidence"
_DIGIT_TESTS = ("isdigit", "isdecimal", "isnumeric")


def digit_test_then_int(tree: ast.AST) -> list[tuple[str, int]]:
    """Functions that call str.isdigit/isdecimal/isnumeric and int(): the pattern that crashed on "²"."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
        tests = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr in _DIGIT_TESTS]
        if tests and any(isinstance(c.func, ast.Name) and c.func.id == "int" for c in calls):
            found.append((getattr(node, "name", "<lambda>"), tests[0].lineno))
    return found


def test_2_the_scan_finds_the_pattern_it_forbids() -> None:
    tree = ast.parse("def f(raw):\n    return int(raw) if raw.isdigit() else None\n"
                     "g = lambda s: s.isnumeric() and int(s)\n")
    assert digit_test_then_int(tree) == [("f", 2), ("<lambda>", 3)]


def test_2_no_function_in_src_tests_digits_with_isdigit_and_then_calls_int() -> None:
    left = [f"{path.relative_to(SRC)}:{line} {name}" for path in sorted(SRC.rglob("*.py"))
            for name, line in digit_test_then_int(ast.parse(path.read_text(), str(path)))]
    assert left == [], "use testops_evidence.readers.integers (ascii_int / parse_int / header_int): " + ", ".join(left)


@pytest.mark.parametrize("text", ["²", "١", "٣٤", "1²", "+1", "-1", " 1", "1 ", "1_000", "", "0x10", "9" * 5000,
                                  "9223372036854775808"])
def test_2_ascii_int_reads_only_ascii_digits_in_range(text: str) -> None:
    assert ascii_int(text) is None


def test_2_ascii_int_reads_ascii_digits_and_checks_the_bounds() -> None:
    assert ascii_int("0") == 0 and ascii_int("007") == 7 and ascii_int(str(INT64_MAX)) == INT64_MAX
    assert ascii_int("5", minimum=6) is None and ascii_int("3601", maximum=3600) is None
    assert header_int("12") == 12 and header_int("12, 12") == 12 and header_int("12, 13") is None
    refused = refusal_of(lambda: parse_int("²", code="guard.run_mismatch", field="X", what="X", minimum=1))
    assert (refused.code, refused.expected, refused.actual) == ("guard.run_mismatch", f"1..{INT64_MAX}", "²")


def inspect_corpus() -> tuple[Any, Path]:
    from framework_support import CORPUS

    versions = sorted(path.name for path in CORPUS.glob("inspect-ai-*"))
    return versions[-1], CORPUS / versions[-1] / "campaign.eval"


def test_2_an_eval_journal_entry_named_with_a_superscript_breaks_only_its_case(tmp_path: Path) -> None:
    from test_inspect_logs import CONTRACT, DIGEST, HEAD_SHA, PROFILE, rezip, rezip_entry
    from testops_evidence.readers.adapters.layout import collect_cells

    _version, campaign = inspect_corpus()
    summaries = rezip_entry(campaign, "summaries.json")
    hostile = rezip(campaign, {"summaries.json": None, "_journal/summaries/1.json": summaries,
                               "_journal/summaries/².json": summaries})
    root = tmp_path / "cell-results"
    (root / "get-task-context").mkdir(parents=True)
    (root / "get-task-context" / "campaign.eval").write_bytes(hostile)
    (root / "list-open-issues").mkdir()
    (root / "list-open-issues" / "campaign.eval").write_bytes(campaign.read_bytes())
    files = collect_cells(root, {c.key: c for c in CONTRACT.cases}, source_sha=HEAD_SHA, selection_sha256=DIGEST,
                          profile=PROFILE, fallback_time=1_764_000_000.0)
    by_case = {f.case: f for f in files}
    failure = by_case["get-task-context"].failure
    assert failure is not None and failure.code == "export.adapter" and "without a number" in failure.message
    adapted = by_case["list-open-issues"].adapted
    assert adapted is not None and adapted.disposition == "behavior_failure"


def cell_run(tmp_path: Path, options: dict[str, str], env: dict[str, str]) -> Any:
    from evidence_support import write_contract
    from helpers import run_mode
    from test_inspect_logs import CONTRACT, worker_env

    _version, campaign = inspect_corpus()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "campaign.eval").write_bytes(campaign.read_bytes())
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    return run_mode("cell", tmp_path, {"contract": str(contract), "case": "get-task-context", "inspect-log": str(logs),
                                       "out": str(tmp_path / "cell.json"), **options}, {**worker_env(), **env})


def test_2_cell_refuses_a_superscript_trial_with_its_code(tmp_path: Path) -> None:
    run = cell_run(tmp_path, {"trial": "²"}, {})
    assert run.outputs.get("error-code") == "input.trial", run.summary
    assert "ASCII digits" in run.summary and not (tmp_path / "cell.json").exists()


def test_2_cell_refuses_a_superscript_run_attempt_with_its_code(tmp_path: Path) -> None:
    run = cell_run(tmp_path, {}, {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ATTEMPT": "²"})
    assert run.outputs.get("error-code") == "guard.run_mismatch", run.summary
    assert "GITHUB_RUN_ATTEMPT" in run.summary and not (tmp_path / "cell.json").exists()


def test_2_a_superscript_github_timeout_is_refused_with_its_code() -> None:
    refused = refusal_of(lambda: request_policy({"TESTOPS_EVIDENCE_GITHUB_TIMEOUT": "²"}))
    assert (refused.code, refused.actual) == ("input.testops-evidence-github-timeout", "²")
    assert request_policy({"TESTOPS_EVIDENCE_GITHUB_TIMEOUT": "7"}).timeout == 7


def test_2_a_superscript_content_length_after_a_mutation_is_uncertain(testops: TestOpsServer) -> None:
    testops.clear_faults()
    testops.fail("POST", r"/launch", "headers", headers={"Content-Length": "²"})
    with make_testops_client(testops, []) as client:
        refused = refusal_of(lambda: client.post("/launch", {"name": "r3", "projectId": PROJECT}))
    assert refused.code == "testops.uncertain" and "Content-Length" in refused.message
    assert len([r for r in testops.mutations() if r.route == "/launch"]) >= 1  # sent once, never re-sent


def test_2_a_superscript_content_length_on_a_read_is_an_invalid_answer(testops: TestOpsServer) -> None:
    testops.clear_faults()
    testops.fail("GET", r"/testcase/101", "headers", headers={"Content-Length": "²"}, times=None)
    with make_testops_client(testops, []) as client:
        refused = refusal_of(lambda: client.get("/testcase/101"))
    testops.clear_faults()
    assert (refused.code, refused.field) == ("testops.response_invalid", "Content-Length")


# --- 3. a Link rel="next" to another host, scheme or port ------------------------------------------------------

FAST = RequestPolicy(retries=0, backoff_factor=0)


@pytest.fixture
def listing() -> Iterator[GitHubServer]:
    with GitHubServer(token=GITHUB_TOKEN) as server:
        server.add_repo(REPO, repo_id=77)
        server.add_run(REPO, RUN_ID, head_sha="9" * 40, path=".github/workflows/evals.yml", head_branch="main",
                       status="completed", conclusion="success")
        server.add_artifact(RUN_ID, "cells-a", b"PK\x05\x06" + b"\x00" * 18)
        server.add_job(RUN_ID, 1, "worker-a")
        yield server


def foreign_links(server: GitHubServer) -> list[str]:
    port = server.port
    return [f"http://evil.example:{port}/repos/{REPO}/actions/runs/{RUN_ID}/artifacts?page=2",  # another host
            f"https://127.0.0.1:{port}/repos/{REPO}/actions/runs/{RUN_ID}/artifacts?page=2",  # another scheme
            f"http://127.0.0.1:{port + 1 if port < 65535 else 1}/repos/{REPO}/actions/runs/{RUN_ID}/artifacts",
            f"http://x:y@127.0.0.1:{port}/repos/{REPO}/actions/runs/{RUN_ID}/artifacts",  # credentials
            "http://127.0.0.1:99999/repos/a/b",  # a port that is not one
            "//evil.example/repos/a/b"]  # scheme-relative: another host


def test_3_a_foreign_next_page_of_artifacts_or_jobs_is_refused_before_it_is_followed(listing: GitHubServer) -> None:
    from testops_evidence.github_run import list_artifacts, list_attempt_jobs

    for link in foreign_links(listing):
        listing.next_page_link = link
        listing.clear_log()
        for call in (lambda: list_artifacts(listing.api_url(), GITHUB_TOKEN, REPO, RUN_ID, policy=FAST),
                     lambda: list_attempt_jobs(listing.api_url(), GITHUB_TOKEN, REPO, RUN_ID, 1, policy=FAST)):
            refused = refusal_of(call)
            assert (refused.code, refused.field) == ("github.pagination_foreign", "Link"), (link, refused)
            assert "GITHUB_API_URL" in refused.message
        assert len(listing.log) == 2  # one page each; the foreign one was never asked for


def test_3_a_next_page_outside_the_ghes_api_path_is_refused_and_one_inside_is_followed(
        listing: GitHubServer) -> None:
    from testops_evidence.github_run import list_artifacts

    listing.next_page_link = f"{listing.url}/repos/{REPO}/actions/runs/{RUN_ID}/artifacts?page=1"  # no /api/v3
    refused = refusal_of(lambda: list_artifacts(listing.api_url(ghes=True), GITHUB_TOKEN, REPO, RUN_ID, policy=FAST))
    assert refused.code == "github.pagination_foreign"
    listing.next_page_link = None
    for n in range(2, 4):
        listing.add_artifact(RUN_ID, f"cells-{n}", b"PK\x05\x06" + b"\x00" * 18)
    found = list_artifacts(listing.api_url(ghes=True), GITHUB_TOKEN, REPO, RUN_ID, policy=RequestPolicy(retries=0))
    assert len(found) == 3  # GitHub's own pagination (per_page is 100 here: one page) still works


def test_3_select_s_baseline_lookup_refuses_a_foreign_next_page(listing: GitHubServer) -> None:
    from testops_evidence.github_run import earlier_artifact

    listing.next_page_link = foreign_links(listing)[0]
    refused = refusal_of(lambda: earlier_artifact(listing.api_url(), GITHUB_TOKEN, REPO, "evals.yml", branch="main",
                                                  before=RUN_ID + 1, pattern="cells-*", policy=FAST))
    assert refused.code == "github.pagination_foreign"


def test_3_import_refuses_a_foreign_next_page_with_its_code(tmp_path: Path) -> None:
    with phase_world("import", tmp_path) as (act, servers):
        assert servers.github is not None
        servers.github.next_page_link = "http://evil.example/repos/acme/agents/actions/runs/1/artifacts?page=2"
        run = act().run
    assert run.outputs.get("error-code") == "github.pagination_foreign", run.summary
    assert "evil.example" not in {r.path for r in servers.github.log}
