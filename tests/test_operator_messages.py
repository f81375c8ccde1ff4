"""What an operator reads when a phase refuses: a next step in every summary, and annotations that show
values as JSON rather than Python reprs. Each case runs the real phase in-process as the runner runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_mode
from servers.testops_server import TestOpsServer
from test_selection_support import actions_env, example_document, github_with_run, select_job_env, write_contract
from test_testops_phases import contract_document
from testops_evidence.campaign.selection import build_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import contract_from_document
from testops_evidence.errors import EXIT_ADVICE, REGISTRY, Refusal
from testops_evidence.safeio import sha256_bytes
from testops_evidence.summary import refusal_section


def _concrete(code: str) -> str:
    return code.replace("<name>", "cases").replace("<status>", "503")


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_refusal_summary_states_a_next_step(code: str) -> None:
    refusal = Refusal(_concrete(code), "something did not bind", field="f", expected="a", actual="b")
    section = refusal_section(refusal, "select")
    step = section.split("**Next step:** ", 1)[1].splitlines()[0]
    advice = EXIT_ADVICE[refusal.exit_code]
    assert step == (REGISTRY[code].hint or f"{advice[0].upper()}{advice[1:]}.")


def _selection(tmp_path: Path) -> tuple[dict[str, str], str]:
    document = example_document()
    document.pop("testops")
    contract = contract_from_document(document)
    data = selection_bytes(build_selection(contract, env_context(actions_env()), contract.cases[:3],
                                           backend="files", source="cases"))
    path = write_selection(tmp_path / "selection.json", data)
    return {"contract": str(write_contract(tmp_path, document)), "selection-path": str(path)}, sha256_bytes(data)


def test_a_digest_mismatch_tells_the_operator_what_to_do(tmp_path: Path) -> None:
    options, _ = _selection(tmp_path)
    run = run_mode("verify-selection", tmp_path, {**options, "selection-sha256": "0" * 64}, actions_env())
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.digest")
    assert "**Next step:** Pass the select job's `selection-sha256` output unchanged" in run.summary
    assert f"(field selection-sha256: expected '{'0' * 64}', actual '" in run.log


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "true"), ({"b": 1, "a": [2]}, '{"a": [2], "b": 1}'),
    ("it's", '"it\'s"'), ("a\nb", "'a\\nb'"),
])
def test_annotation_values_are_json_or_quoted_strings(value: object, shown: str) -> None:
    assert str(Refusal("selection.digest", "m", field="f", expected=value, actual=1)) == (
        f"selection.digest: m (field f: expected {shown}, actual 1)")


def test_a_token_in_a_worker_is_annotated_without_a_python_repr(tmp_path: Path) -> None:
    options, digest = _selection(tmp_path)
    run = run_mode("verify-selection", tmp_path, {**options, "selection-sha256": digest},
                   {**actions_env(), "ALLURE_TOKEN": "sentinel-operator-token"})
    assert run.outputs["error-code"] == "worker.token_present"
    annotation = next(line for line in run.log.splitlines() if line.startswith("::error "))
    assert annotation.endswith("""(field environment: expected 'no TestOps token variable', actual ["ALLURE_TOKEN"])""")
    assert "['" not in annotation and "sentinel-operator-token" not in annotation


def test_testops_401_names_the_token_as_the_next_step(tmp_path: Path) -> None:
    with TestOpsServer(token="the-right-token") as server:
        server.add_project(12)
        contract = tmp_path / "contract.json"
        contract.write_text(json.dumps(contract_document(server.url)))
        with github_with_run() as github:  # bootstrap re-admits its run before it uses the TestOps token
            run = run_mode("bootstrap", tmp_path, {"contract": str(contract)},
                           {**select_job_env(github, tmp_path), "ALLURE_TOKEN": "a-wrong-token"})
    assert (run.exit_code, run.outputs["error-code"]) == (4, "testops.auth")
    assert "**Next step:** Check that the secret passed as `testops-token` is a valid API token" in run.summary
    failure = run.failure()
    assert failure is not None and failure["http-status"] == 401 and failure["hint"].startswith("Check that")


@pytest.mark.parametrize(("mode", "code", "headline"), [
    (None, "input.mode", "### ⛔ `testops-evidence` refused: `input.mode`"),
    ("deploy", "mode.unknown", "### ⛔ `deploy` refused: `mode.unknown`"),
])
def test_a_missing_or_unknown_mode_is_reported_like_every_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   mode: str | None, code: str, headline: str) -> None:
    import os

    from testops_evidence import entrypoint

    for key in list(os.environ):
        if key.startswith(("INPUT_", "GITHUB_", "ALLURE_", "TESTOPS_", "RUNNER_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "runner-temp"))
    if mode is not None:
        monkeypatch.setenv("INPUT_MODE", mode)
    assert entrypoint.main() == 2
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0] == headline  # not "`(none)` refused"
    # failure.json lands in the default state directory, as docs/errors.md promises for every refusal.
    failure = json.loads((tmp_path / "runner-temp" / "testops-evidence" / "failure.json").read_text())
    assert (failure["code"], failure["mode"]) == (code, mode or "testops-evidence")
    assert "failure.json` holds the same facts as JSON." in summary


# --- what the refusal says was changed: truthful per step (every remote mutation is once-marked first) ---


def test_a_refusal_before_any_change_says_nothing_was_sent(tmp_path: Path) -> None:
    with TestOpsServer(token="the-right-token") as server:
        server.add_project(12)
        contract = tmp_path / "contract.json"
        contract.write_text(json.dumps(contract_document(server.url)))
        with github_with_run() as github:  # bootstrap re-admits its run before it uses the TestOps token
            run = run_mode("bootstrap", tmp_path, {"contract": str(contract)},
                           {**select_job_env(github, tmp_path), "ALLURE_TOKEN": "a-wrong-token"})
        assert server.mutations() == []
    assert "Exit code 4. Nothing was published or changed by this step." in run.summary
    assert "once-markers" not in run.summary


def test_a_refusal_after_a_started_change_names_it_and_reconcile(tmp_path: Path) -> None:
    with TestOpsServer(token="the-right-token") as server:
        server.add_project(12)
        job = server.add_job(12, "agent-evals", external_id="acme/agents_agent-evals.yml")
        server.add_plan(12, "Agent protocol evals", [194, 195], id=340, job_ids=[job["id"]])
        server.fail("POST", "/testplan/340/run", "status", status=500)
        contract = tmp_path / "contract.json"
        contract.write_text(json.dumps(contract_document(server.url)))
        with github_with_run() as github:  # launch re-admits its run before it uses the TestOps token
            run = run_mode("launch", tmp_path, {"contract": str(contract)},
                           {**select_job_env(github, tmp_path), "ALLURE_TOKEN": "the-right-token"})
    assert run.exit_code == 4 and run.outputs["error-code"] != "testops.uncertain", run.summary
    assert "This step started 1 change(s) before the refusal (`launch`): each is recorded as a once-marker" in run.summary
    assert "`mode: reconcile` reviews any left uncertain." in run.summary


def test_the_consequence_without_knowing_what_started_stays_conditional() -> None:
    refusal = Refusal("upload.results_invalid", "m")
    assert "Changes this step completed before the refusal" in refusal_section(refusal, "upload")
    assert "Nothing was published by this step." in refusal_section(refusal, "export", [])


def test_an_unsafe_state_dir_names_the_fix_not_the_evidence_advice(tmp_path: Path) -> None:
    options, digest = _selection(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    run = run_mode("verify-selection", tmp_path, {**options, "selection-sha256": digest,
                                                  "state-dir": str(tmp_path / "linked")}, actions_env())
    assert run.outputs["error-code"] == "io.state_dir"
    assert "**Next step:** Point `state-dir` at a writable directory of the job's own user, reached without" in run.summary


def test_a_yaml_syntax_error_points_the_operator_at_its_line(tmp_path: Path) -> None:
    contract = tmp_path / "contract.yml"
    contract.write_text("version: 1\ncampaign: [\n")
    run = run_mode("check", tmp_path, {"contract": str(contract)}, actions_env())
    assert run.outputs["error-code"] == "contract.invalid"
    failure = run.failure()
    assert failure is not None and failure["actual"].startswith("line ")
    assert "**Next step:** Fix the contract where the refusal points: the field's JSON pointer, or the line a YAML " \
           "error names." in run.summary
