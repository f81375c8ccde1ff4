"""verify-selection's fast gate: it accepts by digests alone (selection bytes, contract file bytes, run
context) and otherwise leaves the decision to the full verification, whose refusals stay what they were."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_support import EXAMPLE_CONTRACT, actions_env
from helpers import PhaseRun, run_mode
from testops_evidence import contract as contract_module
from testops_evidence.campaign import gate
from testops_evidence.campaign import selection as selection_module
from testops_evidence.campaign.selection import build_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import load_contract
from testops_evidence.safeio import canonical_json, sha256_bytes


def make_campaign(tmp: Path, contract_text: bytes | None = None) -> tuple[Path, Path, str]:
    """The example YAML contract in ``tmp`` and the selection select writes for it (all cases)."""
    contract_path = tmp / "contract.yml"
    if contract_text is None:
        shutil.copyfile(EXAMPLE_CONTRACT, contract_path)
    else:
        contract_path.write_bytes(contract_text)
    contract = load_contract(contract_path)
    document = build_selection(contract, env_context(actions_env()), list(contract.cases), backend="files",
                               source="contract")
    data = selection_bytes(document)
    path = write_selection(tmp / "selection.json", data)
    return contract_path, path, sha256_bytes(data)


def variant(tmp: Path, name: str, edit: Any) -> tuple[Path, str]:
    """The selection select wrote in ``tmp``, its document changed by ``edit``, written canonically as ``name``."""
    document = json.loads((tmp / "selection.json").read_bytes())
    edit(document)
    data = selection_bytes(document)
    return write_selection(tmp / name, data), sha256_bytes(data)


def worker(tmp: Path, contract: Path, selection: Path, digest: str, **env: str) -> PhaseRun:
    options = {"contract": str(contract), "selection-path": str(selection), "selection-sha256": digest,
               "state-dir": str(tmp / f"state-{len(list(tmp.glob('state-*')))}")}
    return run_mode("verify-selection", tmp, options, {**actions_env(), **env})


def gate_facts(contract: Path, selection: Path, digest: str, **env: str) -> gate.GateFacts | None:
    return gate.verify_by_digests(str(selection), digest, str(contract), {**actions_env(), **env})


def test_select_records_the_contract_files_digest(tmp_path: Path) -> None:
    contract, selection, _ = make_campaign(tmp_path)
    document = json.loads(selection.read_bytes())
    assert document["contract-file-sha256"] == hashlib.sha256(contract.read_bytes()).hexdigest()
    assert load_contract(contract).file_sha256 == document["contract-file-sha256"]


def test_the_gate_accepts_the_selection_select_wrote(tmp_path: Path) -> None:
    contract, selection, digest = make_campaign(tmp_path)
    facts = gate_facts(contract, selection, digest)
    assert facts is not None
    assert facts.digest == digest and (facts.count, facts.lanes) == (12, {"native": 9, "external": 3})
    # The rows were stepped over, never parsed: the case index that select wrote says what they hold.
    assert facts.document["cases"] is None
    assert facts.document["case-index"]["count"] == 12
    assert facts.live["run-url"] == "https://github.com/acme/agents/actions/runs/9100200300"


def test_gate_and_full_verification_give_the_same_outputs_and_summary(tmp_path: Path) -> None:
    contract, selection, digest = make_campaign(tmp_path)
    fast = worker(tmp_path, contract, selection, digest)
    # Same content, other bytes (a checkout that rewrote line endings): the gate cannot decide, the full
    # verification parses the contract, finds the same canonical digest, and accepts.
    crlf = tmp_path / "contract-crlf.yml"
    crlf.write_bytes(contract.read_bytes().replace(b"\n", b"\r\n"))
    assert gate_facts(crlf, selection, digest) is None
    full = worker(tmp_path, crlf, selection, digest)
    assert (fast.exit_code, full.exit_code) == (0, 0)
    assert fast.outputs == full.outputs == {"selected-count": "12"}
    assert fast.summary == full.summary
    assert "12 case(s) (3 external, 9 native), contract **agent-protocol**, full plan" in fast.summary


@pytest.mark.parametrize(("change", "code"), [
    ("digest", "selection.digest"),
    ("run", "selection.context"),
    ("contract", "selection.context"),
    ("bad-digest-input", "input.selection-sha256"),
])
def test_whatever_the_gate_cannot_accept_is_refused_as_before(tmp_path: Path, change: str, code: str) -> None:
    contract, selection, digest = make_campaign(tmp_path)
    env: dict[str, str] = {}
    if change == "digest":
        digest = "0" * 64
    elif change == "run":
        env["GITHUB_RUN_ID"] = "9100200301"
    elif change == "contract":
        contract.write_bytes(contract.read_bytes().replace(b"campaign: agent-protocol", b"campaign: other-one"))
    else:
        digest = digest.upper()
    assert gate_facts(contract, selection, digest, **env) is None
    run = worker(tmp_path, contract, selection, digest, **env)
    assert (run.exit_code, run.outputs["error-code"]) == (2 if code.startswith("input.") else 3, code)


def test_a_selection_without_the_contract_file_digest_goes_the_full_way(tmp_path: Path) -> None:
    contract, _, _ = make_campaign(tmp_path)
    older, digest = variant(tmp_path, "older.json", lambda document: document.pop("contract-file-sha256"))
    assert gate_facts(contract, older, digest) is None
    assert worker(tmp_path, contract, older, digest).exit_code == 0


def test_outside_actions_the_gate_steps_aside(tmp_path: Path) -> None:
    contract, selection, digest = make_campaign(tmp_path)
    assert gate_facts(contract, selection, digest, GITHUB_ACTIONS="") is None


@pytest.mark.parametrize(("name", "value"), [
    ("GITHUB_SHA", "0123456789ABCDEF0123456789abcdef01234567"), ("GITHUB_RUN_ATTEMPT", "01"),
    ("GITHUB_RUN_NUMBER", ""), ("GITHUB_ACTOR_ID", "x"), ("GITHUB_WORKFLOW_REF", "other/repo/.github/w.yml@main"),
])
def test_runner_variables_the_full_check_would_refuse_are_never_accepted_by_the_gate(tmp_path: Path, name: str,
                                                                                     value: str) -> None:
    contract, selection, digest = make_campaign(tmp_path)
    assert gate_facts(contract, selection, digest, **{name: value}) is None
    assert worker(tmp_path, contract, selection, digest, **{name: value}).exit_code != 0


def test_the_gate_limits_are_the_full_verifications() -> None:
    assert gate.SELECTION_LIMIT == selection_module.SELECTION_LIMIT
    assert gate.CONTRACT_LIMIT == contract_module.CONTRACT_LIMIT


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
              st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20)


def test_a_contract_path_through_a_link_and_dot_dot_is_left_to_the_full_verification(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `link/../contract.yml` names the file beside the link's *target* for the kernel (and for the full
    # verification), but `contract.yml` for a lexical normpath. The gate read the latter, found select's
    # bytes and accepted, while the full verification read another contract and refused.
    contract, _selection, digest = make_campaign(tmp_path)
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "contract.yml").write_bytes(
        contract.read_bytes().replace(b"title: Get task context", b"title: Another title"))
    (tmp_path / "link").symlink_to("x/y")
    tricky = Path("link/../contract.yml")
    monkeypatch.chdir(tmp_path)
    options = {"contract": str(tricky), "selection-sha256": digest}
    full = run_mode("verify-selection", tmp_path, {**options, "selection-path": "./selection.json",
                                                   "state-dir": str(tmp_path / "state-full")}, actions_env())
    assert full.exit_code == 3 and full.outputs["error-code"] == "selection.context"
    gated = run_mode("verify-selection", tmp_path, {**options, "selection-path": "selection.json",
                                                    "state-dir": str(tmp_path / "state-gate")}, actions_env())
    assert (gated.exit_code, gated.outputs) == (full.exit_code, full.outputs)
    assert gate.verify_by_digests("selection.json", digest, str(tricky), actions_env()) is None


def test_yaml_bytes_under_a_json_name_are_left_to_the_full_verification(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # select read the YAML contract; the worker names the same bytes `contract.json`, which the full
    # verification parses as JSON and refuses. The gate matched the bytes' digest and accepted.
    contract, _selection, digest = make_campaign(tmp_path)
    (tmp_path / "contract.json").write_bytes(contract.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert gate.verify_by_digests("selection.json", digest, "contract.json", actions_env()) is None
    options = {"contract": "contract.json", "selection-sha256": digest}
    full = run_mode("verify-selection", tmp_path, {**options, "selection-path": "./selection.json",
                                                   "state-dir": str(tmp_path / "state-full")}, actions_env())
    gated = run_mode("verify-selection", tmp_path, {**options, "selection-path": "selection.json",
                                                    "state-dir": str(tmp_path / "state-gate")}, actions_env())
    assert (gated.exit_code, gated.outputs) == (full.exit_code, full.outputs) == (2, {"error-code": "contract.invalid"})


def test_a_json_contract_is_still_accepted_by_the_gate(tmp_path: Path) -> None:
    document = contract_module.parse_contract_bytes(EXAMPLE_CONTRACT.read_bytes(), "contract.yml")
    contract, selection, digest = make_campaign(tmp_path, json.dumps(document, indent=2).encode() + b"\n")
    json_contract = contract.rename(contract.with_name("contract.json"))
    assert gate_facts(json_contract, selection, digest) is not None
    full = run_mode("verify-selection", tmp_path, {  # a `./` in the path skips the gate: the full check
        "contract": str(json_contract), "selection-path": f"{selection.parent}/./{selection.name}",
        "selection-sha256": digest, "state-dir": str(tmp_path / "state-full")}, actions_env())
    assert (full.exit_code, full.outputs) == (0, {"selected-count": "12"})


def test_select_indexes_the_rows_it_writes(tmp_path: Path) -> None:
    _, selection, _ = make_campaign(tmp_path)
    text = selection.read_text(encoding="utf-8")
    document = json.loads(text)
    rows_text = json.dumps(document["cases"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert document["case-index"] == {"count": 12, "lanes": {"native": 9, "external": 3}, "length": len(rows_text)}
    start = text.index(',"cases":') + len(',"cases":')
    assert text[start:start + len(rows_text)] == rows_text  # the length frames the rows in the file as written


def test_the_index_steps_over_rows_in_any_script(tmp_path: Path) -> None:
    """Lengths are counted in characters: rows with titles outside ASCII are framed as exactly as ASCII ones."""
    contract, _, _ = make_campaign(tmp_path)
    text = contract.read_text(encoding="utf-8").replace("title: ", "title: Überprüfung 検証 🧪 ", 3)
    other = tmp_path / "unicode"
    other.mkdir()
    contract, selection, digest = make_campaign(other, text.encode("utf-8"))
    facts = gate_facts(contract, selection, digest)
    assert facts is not None and facts.count == 12
    assert {k: v for k, v in facts.document.items() if k != "cases"} == {
        k: v for k, v in json.loads(selection.read_bytes()).items() if k != "cases"}


def test_a_selection_without_a_case_index_is_still_gated_by_reading_its_rows(tmp_path: Path) -> None:
    contract, _, _ = make_campaign(tmp_path)
    older, digest = variant(tmp_path, "older.json", lambda document: document.pop("case-index"))
    facts = gate_facts(contract, older, digest)
    assert facts is not None and (facts.count, facts.lanes) == (12, {"native": 9, "external": 3})
    assert len(facts.document["cases"]) == 12
    fast = worker(tmp_path, contract, older, digest)
    assert fast.exit_code == 0 and fast.outputs == {"selected-count": "12"}


@pytest.mark.parametrize("lie", ["count", "lanes", "length-short", "length-long"])
def test_an_index_that_does_not_describe_the_rows_is_refused_by_the_full_verification(tmp_path: Path,
                                                                                       lie: str) -> None:
    """Only select writes selections, and its digest travels outside the artifact; a selection whose index lies
    was not written by select. The full verification (outside Actions, or whenever the gate steps aside) refuses
    it, and a length that does not frame the rows is not accepted by the gate either."""
    contract, _, _ = make_campaign(tmp_path)

    def lying(document: dict[str, Any]) -> None:
        index = document["case-index"]
        if lie == "count":
            index["count"] = 11
        elif lie == "lanes":
            index["lanes"] = {"native": 12}
        else:
            index["length"] += -1 if lie == "length-short" else 1
    forged, digest = variant(tmp_path, "forged.json", lying)
    if lie.startswith("length"):
        assert gate_facts(contract, forged, digest) is None
    run = worker(tmp_path, contract, forged, digest, GITHUB_ACTIONS="")
    assert (run.exit_code, run.outputs["error-code"]) == (3, "selection.invalid")
    failure = run.failure()
    assert failure is not None and "case index" in json.dumps(failure)


@settings(max_examples=200, deadline=None)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), rows=st.lists(json_values, max_size=4))
def test_selection_head_reads_every_field_but_the_rows(value: dict[str, Any], rows: list[Any]) -> None:
    document = {**value, "cases": rows}
    document.pop("case-index", None)
    rows_text = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    indexed = {**document, "case-index": {"length": len(rows_text)}}
    head = gate.selection_head(canonical_json(indexed).decode("utf-8"))
    assert head == {**indexed, "cases": None}
    assert gate.selection_head(canonical_json(document).decode("utf-8")) == json.loads(canonical_json(document))


@pytest.mark.parametrize("text", ["", "[]", "{}x", '{"a":1', '{"a":1,"a":2}', '{"a" 1}', '{"a":1}{}',
                                  '{"case-index":{"length":5},"cases":[1,2,3]}',
                                  '{"case-index":{"length":1},"cases":[]}'])
def test_selection_head_refuses_what_it_cannot_frame(text: str) -> None:
    with pytest.raises((ValueError, IndexError, StopIteration)):
        gate.selection_head(text)
