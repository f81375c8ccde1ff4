"""Sentinel-token scan: a token value put where the runner puts tokens (INPUT_TESTOPS-TOKEN, ALLURE_TOKEN,
GITHUB_TOKEN, ...) never appears in outputs, summaries, logs (except `::add-mask::`), failure.json or any
state file — whatever the mode does, refuses or crashes.

Phase owners: add your mode's success and refusal paths here (or call helpers.secret_leaks in your own
tests) with the sentinel set the way a workflow would set it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import SENTINEL_TOKEN, FakeClock, fake_phase, run_mode, secret_leaks
from testops_evidence.errors import EXIT_INTEGRITY, EXIT_OK, Refusal
from testops_evidence.interface import MODES
from testops_evidence.runner import PhaseContext, PhaseResult

REPO = Path(__file__).resolve().parents[1]

# Every place a token can arrive from; each test sets all of them (and the worker tests only the
# variable names a worker job could inherit).
TOKEN_ENV = {
    "INPUT_TESTOPS-TOKEN": SENTINEL_TOKEN,
    "INPUT_TESTOPS_TOKEN": SENTINEL_TOKEN,
    "ALLURE_TOKEN": SENTINEL_TOKEN,
    "TESTOPS_TOKEN": SENTINEL_TOKEN,
    "INPUT_GITHUB-TOKEN": SENTINEL_TOKEN,
    "GITHUB_TOKEN": SENTINEL_TOKEN,
    "GH_TOKEN": SENTINEL_TOKEN,
}
# Anything that tries the network goes to a closed local port and fails at once.
OFFLINE_ENV = {
    "GITHUB_API_URL": "http://127.0.0.1:9",
    "ALLURE_ENDPOINT": "http://127.0.0.1:9",
    "ALLURE_PROJECT_ID": "1",
}


def test_the_leak_detector_finds_a_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Guards the guard: with masking defeated, every channel must be reported.
    def run(ctx: PhaseContext) -> PhaseResult:
        ctx.state.write_receipt("leak.json", {"token": SENTINEL_TOKEN})
        return PhaseResult(headline=SENTINEL_TOKEN, outputs={"x": SENTINEL_TOKEN})

    fake_phase(monkeypatch, "guard", run)
    leaky = run_mode("guard", tmp_path, {}, {})  # the token is in no variable: nothing is masked
    assert set(secret_leaks(leaky)) == {"output x", "step summary", str(tmp_path / "state" / "leak.json"),
                                        str(tmp_path / "state" / "summaries" / "guard.md")}


def test_the_leak_detector_finds_a_piece_of_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A message cut across an echoed token leaves a prefix: 8 characters of it are a leak (issue 24).
    piece = SENTINEL_TOKEN[3:11]

    def run(ctx: PhaseContext) -> PhaseResult:
        ctx.state.write_receipt("leak.json", {"cut": f"...{piece}"})
        return PhaseResult(headline=f"cut at {piece}")

    fake_phase(monkeypatch, "guard", run)
    leaky = run_mode("guard", tmp_path, {}, {})  # the token is in no variable: nothing is masked
    assert set(secret_leaks(leaky)) == {"step summary", str(tmp_path / "state" / "leak.json"),
                                        str(tmp_path / "state" / "summaries" / "guard.md")}


def test_a_piece_of_a_masked_token_is_scrubbed_from_every_channel(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        token = ctx.testops_token()
        ctx.runtime.log(f"server said: {token[:-5]}")  # cut before the end: no longer the whole token
        raise Refusal("testops.auth", f"refused: {token[4:]}", field="token", expected="a token", actual=token[2:14])

    fake_phase(monkeypatch, "upload", run)
    result = run_mode("upload", tmp_path, {}, {"INPUT_TESTOPS-TOKEN": SENTINEL_TOKEN})
    assert result.outputs == {"error-code": "testops.auth"}
    assert "server said: ***" in result.log and result.failure()["actual"] == "***"  # type: ignore[index]
    assert secret_leaks(result) == []


def test_check_with_tokens_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    run = run_mode("check", tmp_path, {"contract": "examples/contract.yml"}, {**TOKEN_ENV, **OFFLINE_ENV})
    assert run.exit_code == EXIT_OK
    assert secret_leaks(run) == []
    assert run.log.count("::add-mask::") == 1  # one value, masked once however many variables hold it


def test_check_masks_a_token_that_also_appears_in_the_contract(tmp_path: Path) -> None:
    # A careless contract holding the token: the summary shows the profile, scrubbed.
    text = (REPO / "examples" / "contract.yml").read_text().replace("model: claude-sonnet-5",
                                                                    f"model: {SENTINEL_TOKEN}")
    (tmp_path / "c.yml").write_text(text)
    run = run_mode("check", tmp_path, {"contract": str(tmp_path / "c.yml")}, TOKEN_ENV)
    assert run.exit_code == EXIT_OK
    assert "model=***" in run.summary
    assert secret_leaks(run) == []


def test_a_failing_check_names_no_token(tmp_path: Path) -> None:
    # The bad value *is* the token (pasted into the wrong field): refusal, summary and failure.json scrub it.
    text = (REPO / "examples" / "contract.yml").read_text().replace("repository: acme/agents\n",
                                                                    f"repository: {SENTINEL_TOKEN}\n", 1)
    (tmp_path / "c.yml").write_text(text)
    run = run_mode("check", tmp_path, {"contract": str(tmp_path / "c.yml")}, TOKEN_ENV)
    assert run.outputs == {"error-code": "contract.invalid"}
    assert run.failure()["actual"] == "***"  # type: ignore[index]
    assert secret_leaks(run) == []


@pytest.mark.parametrize("mode", ["verify-selection", "export"])
@pytest.mark.parametrize("variable", ["ALLURE_TOKEN", "TESTOPS_TOKEN", "INPUT_TESTOPS-TOKEN"])
def test_a_refused_worker_mode_names_the_variable_not_the_value(tmp_path: Path, mode: str, variable: str) -> None:
    run = run_mode(mode, tmp_path, {}, {variable: SENTINEL_TOKEN, "GITHUB_TOKEN": SENTINEL_TOKEN})
    assert (run.exit_code, run.outputs["error-code"]) == (EXIT_INTEGRITY, "worker.token_present")
    failure = run.failure()
    assert failure is not None and failure["actual"] == [variable]
    assert secret_leaks(run) == []


def test_a_phase_that_puts_the_token_into_a_refusal_is_scrubbed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        token = ctx.testops_token()
        ctx.runtime.log(f"Authorization: Api-Token {token}")
        raise Refusal("testops.auth", f"token {token} refused", field="token", expected=token,
                      actual={"header": f"Api-Token {token}", "list": [token]})

    fake_phase(monkeypatch, "upload", run)
    # Pasted secrets often end in a newline; the stripped value the phase uses must be masked too.
    result = run_mode("upload", tmp_path, {}, {"INPUT_TESTOPS-TOKEN": SENTINEL_TOKEN + "\n"})
    assert result.outputs == {"error-code": "testops.auth"}
    assert "Authorization: Api-Token ***" in result.log
    assert secret_leaks(result) == []


def test_a_crashing_phase_is_scrubbed_in_the_message_and_the_traceback(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        token = ctx.github_token()
        raise RuntimeError(f"connection to https://x:{token}@example.invalid failed")

    fake_phase(monkeypatch, "import", run)
    result = run_mode("import", tmp_path, {}, TOKEN_ENV)
    assert result.outputs == {"error-code": "internal.error"}
    assert "::debug::Traceback" in result.log
    assert secret_leaks(result) == []


def test_outputs_and_receipts_written_by_a_phase_are_scrubbed(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        token = ctx.testops_token()
        return PhaseResult(headline=f"used {token}", outputs={"launch-url": f"https://t/{token}",
                                                              "multi": f"a\n{token}"},
                           summary=f"| {token} |\n")

    fake_phase(monkeypatch, "launch", run)
    result = run_mode("launch", tmp_path, {}, {"ALLURE_TOKEN": SENTINEL_TOKEN})
    assert result.exit_code == EXIT_OK
    assert result.outputs["launch-url"] == "https://t/***"
    assert secret_leaks(result) == []


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_without_a_contract_leaks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     mode: str) -> None:
    # Whatever each real phase does first (refuse for the missing contract, the event file, a token in a
    # worker, fail to reach the closed port, or find nothing to do), the sentinel stays inside the process.
    monkeypatch.chdir(tmp_path)
    clock = FakeClock()
    run = run_mode(mode, tmp_path, {}, {**TOKEN_ENV, **OFFLINE_ENV}, clock=clock.time,
                   monotonic=clock.monotonic, sleep=clock.sleep)
    # Most refuse here; some legitimately succeed (reconcile with nothing pending). Either way: no leak.
    assert (run.exit_code == EXIT_OK) == ("error-code" not in run.outputs)
    assert secret_leaks(run, SENTINEL_TOKEN, tmp_path) == []
    assert SENTINEL_TOKEN not in json.dumps(run.failure())
