"""The command line and the action's entrypoint (INPUT_* -> CLI), and how the runner turns a phase, a
refusal or a crash into exit codes, outputs, summaries and failure.json."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import fake_phase, parse_output_file, run_mode
from testops_evidence import __version__, cli
from testops_evidence.errors import (
    EXIT_CASES_FAILED,
    EXIT_INTEGRITY,
    EXIT_OK,
    EXIT_REMOTE,
    EXIT_USAGE,
    REGISTRY,
    Refusal,
)
from testops_evidence.interface import COMMANDS, inputs_for, options_for
from testops_evidence.phases import PHASE_MODULES
from testops_evidence.runner import PhaseContext, PhaseResult

REPO = Path(__file__).resolve().parents[1]
SENTINEL = "tok-SENTINEL-7f3a9c1e5b"


def load_entrypoint() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("testops_entrypoint", REPO / "entrypoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


entrypoint = load_entrypoint()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """os.environ without anything a runner (or CI itself) sets, so the CLI sees only what a test sets."""
    for key in list(os.environ):
        if key.startswith(("INPUT_", "GITHUB_", "ALLURE_", "TESTOPS_", "RUNNER_")) or key in ("GH_TOKEN",):
            monkeypatch.delenv(key)
    yield monkeypatch


# --- CLI --------------------------------------------------------------------------------------------------


def test_help_lists_every_mode_and_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for command in COMMANDS:
        assert f"\n    {command}" in text, command
    assert "Exit codes: 0 done, 1 cases failed, 2 usage, 3 integrity refusal, 4 remote" in " ".join(text.split())


def test_version_matches_the_package_and_pyproject(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"testops-evidence {__version__}"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'\nversion = "{__version__}"\n' in pyproject


def test_python_dash_m_runs_the_cli() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-m", "testops_evidence", "--version"], capture_output=True, text=True,
                          env=env, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, f"testops-evidence {__version__}")


def test_no_mode_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == EXIT_USAGE
    assert "usage: testops-evidence" in capsys.readouterr().out


def test_each_mode_offers_exactly_its_inputs_and_never_a_secret() -> None:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "mode").choices  # type: ignore[attr-defined]
    assert set(subparsers) == set(COMMANDS)
    for command in COMMANDS:
        options = {o for a in subparsers[command]._actions for o in a.option_strings if o.startswith("--")}
        expected = {f"--{spec.name}" for spec in inputs_for(command) if not spec.secret}
        expected |= {f"--{spec.name}" for spec in options_for(command)}
        assert options - {"--help", "--summary-file", "--json"} == expected, command
        assert "--testops-token" not in options and "--github-token" not in options


@pytest.mark.parametrize("command", ["check", "rehearse", "cell"])
def test_the_help_of_a_cli_only_command_lists_only_its_own_options(command: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    shown = set(re.findall(r"^  (--[a-z0-9-]+)", capsys.readouterr().out, flags=re.MULTILINE))
    own = {"check": {"--contract", "--backend", "--state-dir"},
           "rehearse": {"--contract", "--state-dir", "--workdir", "--examples", "--report", "--case-command",
                        "--cases"},
           "cell": {"--contract", "--state-dir", "--selection-path", "--selection-sha256", "--case", "--junit",
                    "--allure-results", "--inspect-log", "--promptfoo",
                    "--out", "--source-sha", "--attempt-id", "--trial"}}[command]
    assert shown - {"--help", "--summary-file", "--json"} == own
    for foreign in ("--cases", "--job-run-id", "--deadline-seconds", "--ledger", "--testops-endpoint"):
        assert foreign not in shown or foreign in own


@pytest.mark.parametrize("command", ["pages", "verify-selection", "collect-cells", "import", "verify-attestation"])
def test_the_help_of_a_mode_that_never_talks_to_testops_has_no_testops_options(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    shown = set(re.findall(r"^  (--[a-z0-9-]+)", capsys.readouterr().out, flags=re.MULTILINE))
    assert not shown & {"--backend", "--testops-endpoint", "--testops-project-id", "--fail-on-failed-cases"}, shown


def test_a_secret_on_the_command_line_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["upload", "--testops-token", SENTINEL])
    assert exited.value.code == EXIT_USAGE
    assert "unrecognized arguments" in capsys.readouterr().err


def test_an_option_of_another_mode_is_rejected() -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["export", "--cases", "a"])
    assert exited.value.code == EXIT_USAGE


def test_cli_runs_a_mode_and_writes_the_summary_file(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def run(ctx: PhaseContext) -> PhaseResult:
        seen["cases"] = ctx.settings.string("cases")
        seen["extras"] = ctx.settings.extras
        return PhaseResult(headline="✅ selected 2", outputs={"selected-count": 2}, summary="| a |\n")

    fake_phase(clean_env, "select", run)
    code = cli.main(["select", "--cases", "a,b", "--state-dir", str(tmp_path / "state"),
                     "--summary-file", str(tmp_path / "summary.md")])
    assert code == EXIT_OK
    assert seen == {"cases": "a,b", "extras": {}}
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## testops-evidence · `select`\n\n✅ selected 2\n")
    # Outside Actions an output is not a line of text: `--json` gives them to a tool.
    assert "output selected-count" not in capsys.readouterr().out
    assert cli.main(["select", "--cases", "a,b", "--state-dir", str(tmp_path / "state2"), "--json",
                     "--summary-file", str(tmp_path / "summary2.md")]) == EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"mode": "select", "exit-code": 0, "outputs": {"selected-count": "2"}, "refusal": None}


def test_a_mode_not_built_exits_2_with_mode_not_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PHASE_MODULES, "future-mode", "h7_module_that_does_not_exist")
    run = run_mode("future-mode", tmp_path)
    assert run.exit_code == EXIT_USAGE
    assert run.outputs == {"error-code": "mode.not_built"}
    assert run.failure()["code"] == "mode.not_built"  # type: ignore[index]


def test_a_mode_not_built_through_the_cli(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.setitem(PHASE_MODULES, "launch", "h7_module_that_does_not_exist")
    code = cli.main(["launch", "--state-dir", str(tmp_path / "state")])
    assert code == EXIT_USAGE
    shown = capsys.readouterr()
    # On stderr, once, as plain text (no Markdown, no `output error-code=` line).
    assert "launch refused: mode.not_built" in shown.err and shown.err.count("mode.not_built") == 1
    assert shown.out == "" and "`" not in shown.err


def test_a_missing_import_inside_a_phase_is_an_internal_error_not_not_built(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        import testops_evidence.phases.h7_missing_helper  # type: ignore[import-not-found]  # noqa: F401

        raise AssertionError("unreachable")

    fake_phase(monkeypatch, "guard", run)
    result = run_mode("guard", tmp_path)
    assert (result.exit_code, result.outputs["error-code"]) == (EXIT_REMOTE, "internal.error")


def test_an_unknown_mode_in_the_runner_is_mode_unknown(tmp_path: Path) -> None:
    run = run_mode("no-such-mode", tmp_path)
    assert (run.exit_code, run.outputs) == (EXIT_USAGE, {"error-code": "mode.unknown"})
    assert run.failure()["actual"] == "no-such-mode"  # type: ignore[index]


def test_an_unexpected_exception_becomes_internal_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        raise ZeroDivisionError("division by zero")

    fake_phase(monkeypatch, "guard", run)
    result = run_mode("guard", tmp_path)
    assert result.exit_code == EXIT_REMOTE
    assert result.outputs == {"error-code": "internal.error"}
    assert "unexpected ZeroDivisionError in mode guard" in result.summary
    assert "::debug::Traceback" in result.log  # the traceback goes to the debug log only
    failure = result.failure()
    assert failure is not None and failure["code"] == "internal.error" and failure["mode"] == "guard"


def test_a_refusal_sets_every_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        raise Refusal("selection.digest", "the selection was changed", field="selection-sha256",
                      expected="a" * 64, actual="b" * 64)

    fake_phase(monkeypatch, "verify-selection", run)
    result = run_mode("verify-selection", tmp_path)
    assert result.exit_code == EXIT_INTEGRITY
    assert result.outputs == {"error-code": "selection.digest"}
    assert "::error title=selection.digest::selection.digest: the selection was changed" in result.log
    assert "### ⛔ `verify-selection` refused: `selection.digest`" in result.summary
    assert f"| expected | `{'a' * 64}` |" in result.summary
    assert f"| actual | `{'b' * 64}` |" in result.summary
    assert result.failure() == {"mode": "verify-selection", "code": "selection.digest",
                                "message": "the selection was changed", "exit-code": 3,
                                "field": "selection-sha256", "expected": "a" * 64, "actual": "b" * 64,
                                "hint": REGISTRY["selection.digest"].hint}
    assert REGISTRY["selection.digest"].hint in result.summary  # the code's own next step, in every channel
    # ...and a copy of the summary in the state dir, for the failure artifact a workflow keeps.
    assert (result.state_dir / "summaries" / "verify-selection.md").read_text() == result.summary


def test_failed_cases_exit_1_unless_fail_on_failed_cases_is_false(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ctx: PhaseContext) -> PhaseResult:
        return PhaseResult(headline="❌ 1 of 2 failed", outputs={"all-passed": False}, exit_code=EXIT_CASES_FAILED)

    fake_phase(monkeypatch, "export", run)
    failing = run_mode("export", tmp_path)
    assert (failing.exit_code, failing.outputs) == (EXIT_CASES_FAILED, {"all-passed": "false"})
    tolerant = run_mode("export", tmp_path, {"fail-on-failed-cases": "false"})
    assert tolerant.exit_code == EXIT_OK
    assert "fail-on-failed-cases is false" in tolerant.log


def test_the_worker_token_rule_applies_even_to_an_empty_variable(tmp_path: Path) -> None:
    for variables in ({"ALLURE_TOKEN": ""}, {"TESTOPS_TOKEN": "x"}, {"INPUT_TESTOPS-TOKEN": "x"}):
        for mode in ("verify-selection", "export"):
            run = run_mode(mode, tmp_path, {}, dict(variables))
            assert (run.exit_code, run.outputs["error-code"]) == (EXIT_INTEGRITY, "worker.token_present"), variables


# --- entrypoint.py (INPUT_* -> the phase) ---------------------------------------------------------------------------


def _run_entrypoint(tmp_path: Path, clean_env: pytest.MonkeyPatch, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    output = tmp_path / "output"
    clean_env.setenv("GITHUB_ACTIONS", "true")
    clean_env.setenv("GITHUB_OUTPUT", str(output))
    clean_env.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    for key, value in env.items():
        clean_env.setenv(key, value)
    code = entrypoint.main()
    return code, parse_output_file(output.read_text()) if output.exists() else {}


def test_entrypoint_unknown_mode_is_mode_unknown_with_exit_2(tmp_path: Path, clean_env: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, outputs = _run_entrypoint(tmp_path, clean_env, {"INPUT_MODE": "deploy"})
    assert (code, outputs) == (EXIT_USAGE, {"error-code": "mode.unknown"})
    assert "::error title=mode.unknown::" in capsys.readouterr().out
    assert "`mode.unknown`" in (tmp_path / "summary.md").read_text()


def test_entrypoint_refuses_cli_only_commands_as_action_modes(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    # `check` and `rehearse` are CLI conveniences, not action modes.
    code, outputs = _run_entrypoint(tmp_path, clean_env, {"INPUT_MODE": "rehearse"})
    assert (code, outputs) == (EXIT_USAGE, {"error-code": "mode.unknown"})


def test_entrypoint_missing_mode_is_input_mode(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    code, outputs = _run_entrypoint(tmp_path, clean_env, {"INPUT_MODE": ""})
    assert (code, outputs) == (EXIT_USAGE, {"error-code": "input.mode"})


def test_entrypoint_runs_a_mode_through_the_cli(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    code, outputs = _run_entrypoint(tmp_path, clean_env, {
        "INPUT_MODE": "verify-selection", "INPUT_STATE-DIR": str(tmp_path / "state"), "ALLURE_TOKEN": "",
    })
    assert (code, outputs) == (EXIT_INTEGRITY, {"error-code": "worker.token_present"})
    failure = json.loads((tmp_path / "state" / "failure.json").read_text())
    assert failure["actual"] == ["ALLURE_TOKEN"]


# --- a terminal reads like a terminal (issue 27) ---------------------------------------------------------


def test_check_at_a_terminal_writes_nothing_and_refuses_on_stderr_in_plain_text(
        tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.chdir(tmp_path)
    (tmp_path / "bad.yml").write_text("version: 1\n")
    assert cli.main(["check", "--contract", "bad.yml"]) == EXIT_USAGE
    shown = capsys.readouterr()
    assert shown.out == ""
    assert shown.err.startswith("⛔ check refused: contract.invalid\n")
    assert shown.err.count("contract.invalid") == 1  # the code once, no annotation line repeating it
    assert "It changed nothing." in shown.err and "published" not in shown.err
    for markdown in ("`", "**", "| ", "\\", "output "):
        assert markdown not in shown.err, markdown
    assert "  /campaign  1:1" in shown.err  # the problems as aligned columns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]  # no .testops-evidence/ to commit
    assert cli.main(["check", "--contract", str(REPO / "examples" / "contract.yml")]) == EXIT_OK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]


def test_json_gives_a_tool_one_document_and_the_person_the_text_on_stderr(
        tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.chdir(tmp_path)
    (tmp_path / "bad.yml").write_text("version: 1\n")
    assert cli.main(["check", "--json", "--contract", "bad.yml"]) == EXIT_USAGE
    shown = capsys.readouterr()
    document = json.loads(shown.out)
    assert (document["mode"], document["exit-code"], document["outputs"]) == ("check", 2,
                                                                             {"error-code": "contract.invalid"})
    assert document["refusal"]["code"] == "contract.invalid" and len(document["refusal"]["problems"]) == 5
    assert "check refused" in shown.err


def test_an_unknown_option_shows_the_commands_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["check", "--contrat", "c.yml"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: testops-evidence check ") and "unrecognized arguments: --contrat" in err


def test_help_marks_required_options_and_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["cell", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--case VALUE required:" in text and "--out VALUE required:" in text
    assert "(default: .github/testops-evidence.yml)" in text
