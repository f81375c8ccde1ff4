"""Hostile input, round three, second red team (issue 24): attacks on what this round added — the terminal's
plain text, ``--json``, the campaign statistics and the baseline receipts they read. Each failed on the main
this pass started from and passes now.

1. A baseline receipt whose pass-rate counts no trial backs (2**40 passed) was accepted: the comparison, the
   per-case flags and the trend computed from figures nothing measured (``export.receipt`` now).
2. An escape sequence (ANSI, OSC 8, OSC 0, a clear-screen) in text the runtime printed outside Actions
   reached the terminal raw: log lines, annotations, group titles and the plain-text summary now show it as
   Control Pictures.
   Inside Actions a logged line starting with ``::`` was a workflow command; it is now inert.
3. reconcile's own refusal (``reconcile.unresolved``, reported beside its outputs) wrote failure.json past the
   runtime's scrub and left ``--json`` without its refusal.
4. ``cell`` read every Allure result it was given into memory (65 of 8 MiB: 596 MB) before any budget.
5. Transport tuning variables: ``inf``, ``1e300``, ``0``, a rate of ``1e-320`` ended in ``internal.error``.
6. An unwritable ``GITHUB_OUTPUT`` escaped as a traceback with Python's exit code 1 ("cases failed").
7. The state dir's copy of a summary past 1 MiB was cut inside a character.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from test_previous import cell, contract_of, document, earlier_export, trial_cell
from test_testops_phases import (  # noqa: F401 - fixtures
    TOKEN,
    Phases,
    clock,
    github,
    launch_phases,
    server,
)
from testops_evidence.actions import Runtime
from testops_evidence.campaign.receipt import receipt_from_bytes
from testops_evidence.errors import Refusal
from testops_evidence.runner import PhaseContext, run_phase

# --- 1. pass-rate counts no trial backs ------------------------------------------------------------------


@pytest.fixture
def baseline(tmp_path: Path) -> dict[str, object]:
    contract = contract_of(document(flaky={"count": 3, "verdict": {"at-least": 1}, "jobs": "per-case"}))
    path = earlier_export(tmp_path, contract, [*[trial_cell(contract, "flaky", n) for n in (1, 2, 3)],
                                               cell(contract, "steady")])
    receipt: dict[str, object] = json.loads(path.read_text())
    receipt_from_bytes(json.dumps(receipt).encode(), "honest")  # the honest receipt is read
    return receipt


def row(receipt: dict[str, object], key: str) -> dict[str, object]:
    rows = receipt["results"]
    assert isinstance(rows, list)
    found: dict[str, object] = next(r for r in rows if r["key"] == key)
    return found


def test_1_pass_rate_counts_that_no_trial_backs_are_refused(baseline: dict[str, object]) -> None:
    rate = row(baseline, "flaky")["pass-rate"]
    assert isinstance(rate, dict) and rate["passed"] == 3
    rate.update(passed=2**40, failed=2**40)
    with pytest.raises(Refusal) as refused:
        receipt_from_bytes(json.dumps(baseline).encode(), "forged")
    assert refused.value.code == "export.receipt" and refused.value.field == "flaky/pass-rate"
    assert refused.value.expected == {"passed": 3, "failed": 0, "broken": 0}


def test_1_a_pass_rate_on_a_case_measured_once_is_refused(baseline: dict[str, object]) -> None:
    # A row without trials and policy was never checked: its pass rate was taken as given.
    row(baseline, "steady")["pass-rate"] = {"passed": 2**40, "failed": 0, "broken": 0, "rate": 1.0,
                                            "wilson-95": None}
    with pytest.raises(Refusal) as refused:
        receipt_from_bytes(json.dumps(baseline).encode(), "forged")
    assert refused.value.code == "export.receipt" and refused.value.field == "steady/trials"


# --- 2. escape sequences on a terminal -----------------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x9b31m\rover"


@pytest.mark.parametrize("summary_file", [False, True])
def test_2_no_escape_sequence_reaches_a_terminal(tmp_path: Path, summary_file: bool) -> None:
    out, err = io.StringIO(), io.StringIO()
    runtime = Runtime({}, stdout=out, stderr=err, summary_file=str(tmp_path / "s.md") if summary_file else None)
    runtime.log(f"retrying: {ESCAPES}")
    runtime.annotate("warning", f"the report says {ESCAPES}", title=f"title {ESCAPES}")
    with runtime.group(f"group {ESCAPES}"):
        pass
    runtime.summary("```\n" + ESCAPES + "\n```\n")  # a fenced block is shown as written
    printed = out.getvalue() + err.getvalue()
    assert not any(ch in printed for ch in "\x1b\x07\x9b\r"), repr(printed)
    assert "␛]8;;https://evil.example/␇click" in printed and "␍over" in printed
    if summary_file:  # the summary file is Markdown for GitHub: its bytes are what was written
        assert "\x1b[2J" in (tmp_path / "s.md").read_text()


def test_2_inside_actions_the_log_is_left_to_the_runner() -> None:
    out = io.StringIO()
    Runtime({"GITHUB_ACTIONS": "true"}, stdout=out).log("\x1b[31mred\x1b[0m")  # the runner renders colours
    assert out.getvalue() == "\x1b[31mred\x1b[0m\n"


# --- 3. reconcile's refusal under --json ---------------------------------------------------------------------


def test_3_reconciles_refusal_is_in_the_json_document_and_failure_json_is_scrubbed(
        launch_phases: Phases, server: object) -> None:  # noqa: F811 - the fixtures imported above
    server.fail("POST", "/testplan/340/run", "status", status=503)  # type: ignore[attr-defined]
    assert launch_phases.run("launch").outputs["error-code"] == "testops.http_503"
    env = {**launch_phases.runner_env, "ALLURE_TOKEN": TOKEN}
    state = launch_phases.tmp_path / "state"
    out, err = io.StringIO(), io.StringIO()
    runtime = Runtime(env, stdout=out, stderr=err, json_output=True,
                      summary_file=str(launch_phases.tmp_path / "reconcile.md"))
    # A secret the failure must not hold: the stage name reconcile names stands in for any text it reports.
    runtime.mask("launch")

    def factory(**kwargs: object) -> PhaseContext:
        return PhaseContext(**kwargs, clock=launch_phases.clock.time, monotonic=launch_phases.clock.monotonic,
                            sleep=launch_phases.clock.sleep)  # type: ignore[arg-type]

    code = run_phase("reconcile", {"contract": str(launch_phases.contract), "state-dir": str(state)}, env,
                     runtime, context_factory=factory)
    assert code == 4
    assert runtime.refusal is not None and runtime.refusal["code"] == "reconcile.unresolved"
    failure = (state / "failure.json").read_text()
    assert json.loads(failure)["code"] == "reconcile.unresolved"
    assert "launch" not in failure and "launch" not in json.dumps(runtime.refusal)


# --- 4. the cell phase reads reports within the case budget ----------------------------------------------------


def test_4_the_cell_phase_refuses_reports_past_the_case_budget_before_reading_them(tmp_path: Path) -> None:
    from evidence_support import actions_env, small_contract, write_contract
    from helpers import run_mode
    from testops_evidence.readers.adapters.allure_results import RESULT_LIMIT
    from testops_evidence.readers.adapters.layout import CASE_REPORT_BYTES

    # Each result under its own cap (8 MiB), together past the case's 512 MiB: sparse files, no disk used.
    # Before, the cell phase read every one of them into memory before it parsed the first.
    results = tmp_path / "allure-results"
    results.mkdir()
    count = CASE_REPORT_BYTES // RESULT_LIMIT + 1
    for index in range(count):
        with (results / f"{index:04d}-result.json").open("wb") as handle:
            handle.truncate(RESULT_LIMIT)
    contract = write_contract(small_contract(), tmp_path / "contract.json")
    env = {**actions_env(), "TESTOPS_EVIDENCE_SELECTION_SHA256": "5e1ec7" + "0" * 58}
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop", "allure-results": str(results),
                                      "out": str(tmp_path / "cell.json")}, env)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "export.case_budget"), run.summary
    assert "cell reads at most" in run.summary and not (tmp_path / "cell.json").exists()


# --- 5. transport tuning variables the runner sets --------------------------------------------------------------


@pytest.mark.parametrize(("variable", "value"), [
    ("TESTOPS_EVIDENCE_READ_TIMEOUT", "inf"),         # OverflowError (the watchdog's timer)
    ("TESTOPS_EVIDENCE_CONNECT_TIMEOUT", "1e400"),    # the same, as a float() spelling of infinity
    ("TESTOPS_EVIDENCE_READ_TIMEOUT", "1e300"),       # finite, still past what a timer can hold
    ("TESTOPS_EVIDENCE_READ_TIMEOUT", "0"),           # ValueError from requests: no timeout of 0
    ("TESTOPS_EVIDENCE_CONNECT_TIMEOUT", "0"),
    ("TESTOPS_EVIDENCE_RATE_LIMIT", "1e-320"),        # 1 / rate overflows: NaN, or a wait without end
    ("TESTOPS_EVIDENCE_RATE_LIMIT", "inf"),
    ("TESTOPS_EVIDENCE_MAX_RETRIES", "\u0663"),       # an Arabic-Indic 3, taken by int()
    ("TESTOPS_EVIDENCE_READ_TIMEOUT", "1_0"),         # float() reads it as 10
    ("TESTOPS_EVIDENCE_MAX_RESPONSE_BYTES", "0"),
])
def test_5_a_transport_tuning_value_the_client_cannot_use_is_an_input_refusal(
        launch_phases: Phases, variable: str, value: str) -> None:  # noqa: F811 - the fixture imported above
    run = launch_phases.run("launch", env={variable: value})
    code = f"input.{variable.lower().replace('_', '-')}"
    assert (run.exit_code, run.outputs.get("error-code")) == (2, code), run.summary
    failure = run.failure()
    assert failure is not None and failure["actual"] == value and "ASCII digits" in failure["message"]
    assert not launch_phases.server.mutations()


# --- 6. a GITHUB_OUTPUT the step cannot write ---------------------------------------------------------------------


@pytest.mark.parametrize("fails", [False, True])
def test_6_an_unwritable_github_output_is_io_write_failed_not_a_traceback(
        launch_phases: Phases, server: object, fails: bool) -> None:  # noqa: F811 - the fixtures imported above
    if fails:  # the refusal's own error-code output cannot be written either
        server.fail("POST", "/testplan/340/run", "status", status=503)  # type: ignore[attr-defined]
    output = launch_phases.tmp_path / "output-is-a-directory"
    output.mkdir()
    summary_file = launch_phases.tmp_path / "summary.md"
    env = {**launch_phases.runner_env, "ALLURE_TOKEN": TOKEN, "GITHUB_ACTIONS": "true",
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary_file)}
    state = launch_phases.tmp_path / "state"
    out = io.StringIO()
    runtime = Runtime(env, stdout=out)

    def factory(**kwargs: object) -> PhaseContext:
        return PhaseContext(**kwargs, clock=launch_phases.clock.time, monotonic=launch_phases.clock.monotonic,
                            sleep=launch_phases.clock.sleep)  # type: ignore[arg-type]

    code = run_phase("launch", {"contract": str(launch_phases.contract), "state-dir": str(state)}, env, runtime,
                     context_factory=factory)  # before: IsADirectoryError out of run_phase, Python's exit code 1
    failure = json.loads((state / "failure.json").read_text())
    if fails:
        assert (code, failure["code"]) == (4, "testops.http_503")
        assert "::warning::the step output error-code could not be written to GITHUB_OUTPUT" in out.getvalue()
    else:
        assert (code, failure["code"]) == (4, "io.write_failed"), out.getvalue()
        assert failure["field"] == "GITHUB_OUTPUT" and "launch-id" in failure["message"]
        assert "`io.write_failed`" in summary_file.read_text()


def test_2_no_line_of_a_log_message_is_a_workflow_command_inside_actions() -> None:
    out = io.StringIO()
    runtime = Runtime({"GITHUB_ACTIONS": "true"}, stdout=out)
    runtime.log("run 7 of .github/workflows/a.yml\n::set-output name=selection-sha256::" + "0" * 64
                + "\n  ::stop-commands::x\r::add-mask::y\n##[set-output name=a;]b")
    lines = out.getvalue().splitlines()
    assert not [line for line in lines if line.lstrip().startswith(("::", "##["))], lines
    assert lines[1] == "\u2060::set-output name=selection-sha256::" + "0" * 64
    assert "\u240d::add-mask::y" in lines[2]


# --- 7. the kept copy of a long summary ----------------------------------------------------------------------------


def test_7_the_kept_copy_of_a_summary_past_its_limit_is_valid_utf_8(tmp_path: Path) -> None:
    from testops_evidence.runner import SUMMARY_COPY_LIMIT, keep_summary
    from testops_evidence.safeio import StateDir

    runtime = Runtime({}, stdout=io.StringIO(), summary_file=str(tmp_path / "summary.md"))
    line = "| ✅ | " + "é" * 60 + " |\n"  # two-byte characters: a cut by bytes lands inside one
    while sum(len(part.encode()) for part in runtime.summary_written) <= SUMMARY_COPY_LIMIT:
        runtime.summary(line * 500)
    state = StateDir(str(tmp_path / "state"), workspace=str(tmp_path))
    keep_summary(state, "export", runtime)
    kept = (tmp_path / "state" / "summaries" / "export.md").read_bytes()
    assert len(kept) <= SUMMARY_COPY_LIMIT and kept.endswith(b" |\n")
    kept.decode("utf-8")  # strict: before, the last character was cut in two
