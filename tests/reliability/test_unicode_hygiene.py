"""Regression tests for what the fuzzers found: a JSON ``\\ud800`` escape (a lone UTF-16 surrogate) decodes
to a Python string that UTF-8 cannot encode. Before the fix, such a value crashed the runner while it
reported the very refusal that named it (failure.json, the step summary), and a ledger holding one was
accepted and then failed to be written back. Now every emitted text is encodable, and the JSON readers
of untrusted documents refuse lone surrogates at the boundary with their own codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from helpers import run_mode
from reliability import corpus
from testops_evidence.actions import Runtime
from testops_evidence.campaign.ledger import Ledger
from testops_evidence.context import read_event
from testops_evidence.errors import Refusal
from testops_evidence.readers.testplan import parse_standing_plan
from testops_evidence.safeio import has_lone_surrogate, loads_json, parse_json_bytes

LONE = '"\\ud800"'  # JSON text of a lone surrogate escape
PAIR = '"\\ud83d\\ude00"'  # a surrogate pair: one real character (U+1F600)
ESCAPED = '"\\\\ud800"'  # a backslash followed by "ud800": plain text


def test_loads_json_refuses_a_lone_surrogate_but_not_a_pair_or_an_escaped_backslash() -> None:
    with pytest.raises(json.JSONDecodeError, match="lone UTF-16 surrogate"):
        loads_json(f'{{"a": [1, {LONE}]}}')
    with pytest.raises(json.JSONDecodeError):
        loads_json(f'{{{LONE}: 1}}')  # in a key as well
    assert loads_json(PAIR) == "\U0001f600"
    assert loads_json(ESCAPED) == "\\ud800"
    assert has_lone_surrogate({"k": ["\udfff"]}) and not has_lone_surrogate({"k": ["\U0001f600", 1, None]})


def test_each_reader_refuses_it_with_its_own_code(tmp_path: Path) -> None:
    with pytest.raises(Refusal) as caught:
        parse_json_bytes(LONE.encode(), "a cell result")
    assert caught.value.code == "io.invalid_json"

    ledger = corpus.ledger_bytes().decode().replace('"cell-1"', LONE, 1).encode()
    with pytest.raises(Refusal) as caught:
        Ledger.parse(ledger)
    assert caught.value.code == "ledger.invalid"

    event = tmp_path / "event.json"
    event.write_text(json.dumps(corpus.event_payload()).replace('"octo"', LONE))
    with pytest.raises(Refusal) as caught:
        read_event({"GITHUB_EVENT_PATH": str(event)})
    assert caught.value.code == "guard.event_file"

    with pytest.raises(Refusal) as caught:
        parse_standing_plan(f'{{"version": "1.0", "tests": [{{"id": "1", "selector": {LONE}}}]}}'.encode())
    assert caught.value.code == "selection.standing_plan"


def test_a_refusal_naming_a_lone_surrogate_is_reported_not_crashed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The readers refuse such text now; the runner must still survive any value that slips through.
    from test_sentinel import fake_phase

    def run(_ctx: object) -> None:
        raise Refusal("contract.invalid", "bad \ud800 value", field="/x\udfff", expected={"k\ud800": 1},
                      actual="\ud800")

    fake_phase(monkeypatch, "check", run)
    result = run_mode("check", tmp_path, {}, {})
    assert (result.exit_code, result.outputs) == (2, {"error-code": "contract.invalid"})
    failure = result.failure()
    assert failure is not None
    assert (failure["field"], failure["expected"], failure["actual"]) == ("/x\\udfff", {"k\\ud800": 1}, "\\ud800")
    assert "bad \\ud800 value" in result.summary and "bad \\ud800 value" in result.log


def test_every_runtime_channel_writes_encodable_text(tmp_path: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "out"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    stdout = io.StringIO()
    runtime = Runtime(env, stdout=stdout)
    text = "case \ud800 title"
    runtime.set_output("name", text)
    runtime.set_output("multi", text + "\nline two")
    runtime.summary(f"| {text} |")
    runtime.annotate("error", text, title=text)
    runtime.log(text)
    with runtime.group(text):
        runtime.debug(text)
    for path in (tmp_path / "out", tmp_path / "summary.md"):
        assert "case \\ud800 title" in path.read_bytes().decode("utf-8")
    stdout.getvalue().encode("utf-8")
    assert stdout.getvalue().count("case \\ud800 title") == 5


@pytest.mark.parametrize("name, text", [("contract.json", '{"version": 1, "campaign": "\\ud800"}'),
                                        ("contract.yml", 'version: 1\ncampaign: "\\ud800"\n')])
def test_a_contract_with_a_lone_surrogate_is_invalid(tmp_path: Path, name: str, text: str) -> None:
    from testops_evidence.contract import load_contract

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(Refusal) as caught:
        load_contract(path)
    assert caught.value.code == "contract.invalid" and "surrogate" in caught.value.message


def test_a_github_answer_with_a_lone_surrogate_is_refused() -> None:
    from servers.github_server import GitHubServer
    from testops_evidence.github_run import RequestPolicy, fetch_run

    with GitHubServer(token="ghs_t") as server:
        run = server.add_run("acme/agents", head_branch="\ud800")
        with pytest.raises(Refusal) as caught:
            fetch_run(server.api_url(), "ghs_t", "acme/agents", run["id"], policy=RequestPolicy(retries=0))
    assert caught.value.code == "github.response_invalid" and "surrogate" in caught.value.message
