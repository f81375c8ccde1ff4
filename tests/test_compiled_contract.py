"""The compiled contract (campaign/compiled.py): a YAML contract is parsed once per campaign, by select.

Later phases build the contract from the compiled form select wrote beside the selection only when every
digest binds it; each attack below leaves the phase exactly as it is without the compiled form (same exit
code, outputs, refusal and files), and never ``internal.error``. Real files, real phases, no mocks.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence_support import EXAMPLE_CONTRACT, actions_env, cell, make_selection, uuid_factory, write_cells
from helpers import FakeClock, PhaseRun, run_mode
from testops_evidence.campaign.compiled import COMPILED_LIMIT, compiled_bytes, compiled_path, load_compiled
from testops_evidence.contract import load_contract
from testops_evidence.safeio import canonical_json, sha256_bytes

REPO = Path(__file__).resolve().parent.parent
ENTRYPOINT = REPO / "entrypoint.py"
# Runs a script as `python -I script` would (this tree's sources first), then writes the names in sys.modules to
# a file: which modules the start loaded.
DRIVER = """
import sys
out, path, src = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, src)
sys.argv = [path]
status = 0
try:
    exec(compile(open(path, "rb").read(), path, "exec"), {"__name__": "__main__", "__file__": path})
except SystemExit as stop:
    status = stop.code
with open(out, "w") as handle:
    handle.write(str(status) + "\\n" + "\\n".join(sorted(sys.modules)))
"""

# A local campaign on the files backend: every phase runs outside Actions, no network. Paths are relative
# so that two campaign directories produce the same bytes.
OPTIONS = {"contract": "contract.yml", "backend": "files", "local": "true", "selection-path": "selection.json",
           "state-dir": "state", "report": "never"}
COMPILED = "selection-contract.json"


def phase(mode: str, directory: Path, monkeypatch: pytest.MonkeyPatch, **options: str) -> PhaseRun:
    """Run ``mode`` in-process in ``directory`` with a fixed clock and fixed UUIDs."""
    monkeypatch.chdir(directory)
    clock = FakeClock()
    return run_mode(mode, directory, {**OPTIONS, **options}, {"GITHUB_WORKSPACE": str(directory)}, actions=False,
                    clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep, new_uuid=uuid_factory())


def first(mode: str, output: str, directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The example YAML contract (its checks are not in alphabetical order) in ``directory``, and ``mode`` run
    on it: the output named."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EXAMPLE_CONTRACT, directory / "contract.yml")
    run = phase(mode, directory, monkeypatch)
    assert run.exit_code == 0, run.summary
    return run.outputs[output]


def selected(directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """select's selection of the example contract: selection-sha256."""
    return first("select", "selection-sha256", directory, monkeypatch)


def with_cells(directory: Path, digest: str) -> None:
    """A cell for every case the workers measure: the first fails two of its checks (their order shows in
    the results and in the reason), the others pass."""
    contract = load_contract(directory / "contract.yml")
    sha = json.loads((directory / "selection.json").read_bytes())["context"]["head-sha"]
    first = contract.cases[0]
    write_cells(directory / "cells", [cell(contract, c.key, sha=sha, disposition="failed" if c is first else "passed",
                                           failed=list(c.checks)[1:] if c is first else ())
                                      for c in contract.cases if not c.remote], digest)


def publish(directory: Path, digest: str, monkeypatch: pytest.MonkeyPatch) -> list[PhaseRun]:
    """export, upload and verify, each with the digests that travel as job outputs."""
    exported = phase("export", directory, monkeypatch, **{"selection-sha256": digest, "cell-results": "cells",
                                                          "results-dir": "allure-results"})
    runs = [exported]
    if exported.exit_code in (0, 1):
        travelled = {"selection-sha256": digest, "receipt-sha256": exported.outputs["receipt-sha256"],
                     "results-dir": "allure-results"}
        runs += [phase("upload", directory, monkeypatch, **travelled), phase("verify", directory, monkeypatch,
                                                                             **travelled)]
    return runs


def files(directory: Path) -> dict[str, bytes]:
    """Every file a campaign left (the run-* output dirs of the test harness aside), by relative path, with
    the campaign's directory (which upload records in its publication) named alike."""
    return {str(p.relative_to(directory)): p.read_bytes().replace(str(directory).encode(), b"<campaign>")
            for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.relative_to(directory).parts[0].startswith("run-")}


def same_but_contract_row(runs: list[PhaseRun], others: list[PhaseRun]) -> None:
    """The two campaigns' phases gave the same exit codes, outputs and refusals, and left the same files (the
    campaign directory named alike); their step summaries differ at most in the row that says how the
    contract was obtained, and the first has the compiled form select wrote (or what an attack made of it)."""
    assert [r.exit_code for r in runs] == [r.exit_code for r in others]
    assert [seen(r, r.outputs) for r in runs] == [seen(r, r.outputs) for r in others]
    assert [seen(r, r.failure()) for r in runs] == [seen(r, r.failure()) for r in others]
    left, right = (files(Path(r[0].env["GITHUB_WORKSPACE"])) for r in (runs, others))
    left.pop(COMPILED, None)
    left.pop("elsewhere.json", None)  # where the symlink attack moved it
    assert sorted(left) == sorted(right)
    for name in [n for n in left if n.startswith("state/summaries/")]:  # the step summaries (outside Actions)
        left[name], right[name] = (drop_contract_row(left[name].decode()).encode(),
                                   drop_contract_row(right[name].decode()).encode())
    assert left == right  # results, receipts, publication, attestation, failure.json: byte for byte


def contract_rows(directory: Path) -> list[str]:
    """The contract row of each phase's step summary."""
    return [line for mode in ("export", "upload", "verify") if (directory / f"state/summaries/{mode}.md").exists()
            for line in (directory / f"state/summaries/{mode}.md").read_text().splitlines()
            if line.startswith("| contract |")]


def seen(run: PhaseRun, value: Any) -> str:
    return json.dumps(value, sort_keys=True).replace(run.env["GITHUB_WORKSPACE"], "<campaign>")


def drop_contract_row(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("| contract |"))


def campaigns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """Two copies of one selected campaign: ``compiled`` keeps the compiled form, ``parsed`` has none."""
    compiled, parsed = tmp_path / "compiled", tmp_path / "parsed"
    digest = selected(compiled, monkeypatch)
    with_cells(compiled, digest)
    shutil.copytree(compiled, parsed, symlinks=True)
    (parsed / COMPILED).unlink()
    return compiled, parsed, digest


# --- select writes it ------------------------------------------------------------------------------------


def test_select_writes_the_compiled_form_once_beside_the_selection(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    digest = selected(tmp_path, monkeypatch)
    data = (tmp_path / COMPILED).read_bytes()
    selection = json.loads((tmp_path / "selection.json").read_bytes())
    assert sha256_bytes((tmp_path / "selection.json").read_bytes()) == digest
    contract = load_contract(tmp_path / "contract.yml")
    # Bound by the selection, and the very document select parsed, in the file's key order.
    assert selection["contract-compiled-sha256"] == sha256_bytes(data)
    assert sha256_bytes(canonical_json(json.loads(data))) == selection["contract-sha256"] == contract.digest
    assert list(json.loads(data)["cases"][0]["checks"]) == list(contract.cases[0].checks)
    assert list(contract.cases[0].checks) != sorted(contract.cases[0].checks)  # so the order is really kept
    assert stat.S_IMODE(os.stat(tmp_path / COMPILED).st_mode) == 0o600
    assert compiled_path(tmp_path / "selection.json") == tmp_path / COMPILED

    # A second select refuses before writing anything: the files stay those of the first.
    (tmp_path / "selection.json").rename(tmp_path / "first-selection.json")
    again = phase("select", tmp_path, monkeypatch)
    assert again.exit_code != 0
    assert again.failure()["code"] == "io.exists"
    assert COMPILED in again.failure()["message"]
    assert not (tmp_path / "selection.json").exists()
    assert (tmp_path / COMPILED).read_bytes() == data


def test_a_json_contract_has_no_compiled_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its reader is CPython's C scanner: parsing it again costs little, and a compiled form would add nothing.
    (tmp_path / "contract.json").write_text(json.dumps(load_contract(EXAMPLE_CONTRACT).document))
    run = phase("select", tmp_path, monkeypatch, contract="contract.json")
    assert run.exit_code == 0, run.summary
    assert not (tmp_path / COMPILED).exists()
    assert "contract-compiled-sha256" not in json.loads((tmp_path / "selection.json").read_bytes())


# --- later phases use it, with the same results ---------------------------------------------------------


def test_export_upload_verify_give_the_same_bytes_from_the_compiled_form(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    runs = publish(compiled, digest, monkeypatch)
    others = publish(parsed, digest, monkeypatch)
    assert [r.exit_code for r in runs] == [1, 0, 1]  # a case failed
    same_but_contract_row(runs, others)
    for run, other in zip(runs, others, strict=True):
        assert "contract: compiled by select" in run.log
        assert "compiled form not used: " in other.log
    assert contract_rows(compiled) == ["| contract | compiled by select, bound by digest |"] * 3
    assert contract_rows(parsed) == ["| contract | parsed from `contract.yml` |"] * 3


def test_verify_selection_checks_every_row_against_the_compiled_form(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside Actions the digest gate steps aside and the full verification compares every row with the
    # contract: the compiled one, with the same verdict and summary as the parsed one.
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    runs = [phase("verify-selection", d, monkeypatch, **{"selection-sha256": digest}) for d in (compiled, parsed)]
    assert [r.exit_code for r in runs] == [0, 0]
    assert "contract: compiled by select" in runs[0].log and "compiled form not used" in runs[1].log
    same_but_contract_row(runs[:1], runs[1:])


def started(directory: Path, mode: str, **inputs: str) -> tuple[int, set[str]]:
    out = directory / "modules.txt"
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")}
    env.update({"GITHUB_OUTPUT": str(directory / "output"), "GITHUB_STEP_SUMMARY": str(directory / "summary.md"),
                "GITHUB_WORKSPACE": str(directory), "INPUT_MODE": mode})
    env.update({f"INPUT_{k.upper()}": v for k, v in {**OPTIONS, **inputs}.items()})
    subprocess.run([sys.executable, "-I", "-c", DRIVER, str(out), str(ENTRYPOINT), str(REPO / "src")], env=env,
                   cwd=directory, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    status, *modules = out.read_text().splitlines()
    return int(status or 0), set(modules)


def published_modules(directory: Path, digest: str) -> list[tuple[int, set[str]]]:
    exported = started(directory, "export", **{"selection-sha256": digest, "cell-results": "cells",
                                               "results-dir": "allure-results"})
    outputs = dict(line.split("=", 1) for line in (directory / "output").read_text().splitlines() if "=" in line)
    travelled = {"selection-sha256": digest, "receipt-sha256": outputs["receipt-sha256"],
                 "results-dir": "allure-results"}
    return [exported, started(directory, "upload", **travelled), started(directory, "verify", **travelled)]


def test_later_phases_never_load_the_yaml_reader_when_the_compiled_form_binds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    fast = published_modules(compiled, digest)
    # Without it, the same phases parse the YAML (so the check below can fail).
    slow = published_modules(parsed, digest)
    assert [status for status, _ in fast] == [status for status, _ in slow] == [1, 0, 1]  # a case failed
    assert [m for _, modules in fast for m in modules if m == "testops_evidence.readers.yamlread"] == []
    assert all("testops_evidence.readers.yamlread" in modules for _, modules in slow)
    assert contract_rows(compiled) == ["| contract | compiled by select, bound by digest |"] * 3


# --- attacks: each leaves the phases exactly as they are without the compiled form ------------------------


def _edit_checks(path: Path) -> None:
    document = json.loads(path.read_bytes())
    document["cases"][0]["checks"] = {"anything": "infrastructure"}
    path.write_text(json.dumps(document, separators=(",", ":")) + "\n")


def _other_contract(path: Path) -> None:
    document = json.loads(path.read_bytes())
    document["cases"] = document["cases"][:1]
    path.write_text(json.dumps(document, separators=(",", ":")) + "\n")


def _symlink(path: Path) -> None:
    target = path.with_name("elsewhere.json")
    path.rename(target)
    path.symlink_to(target.name)


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _oversized(path: Path) -> None:
    with path.open("ab") as handle:
        handle.truncate(COMPILED_LIMIT + 1)


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"', b'"\xff', 1))


def _duplicate_key(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:1] + data[1:].replace(b'"campaign":', b'"campaign":"x","campaign":', 1))


ATTACKS = {"checks edited": _edit_checks, "another contract's": _other_contract, "a symlink": _symlink,
           "a directory": _directory, "oversized": _oversized, "not UTF-8": _not_utf8,
           "a duplicate key": _duplicate_key, "removed": Path.unlink}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_tampered_compiled_form_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attack: str) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    ATTACKS[attack](compiled / COMPILED)
    runs = publish(compiled, digest, monkeypatch)
    assert [r.exit_code for r in runs] == [1, 0, 1]  # a case failed
    same_but_contract_row(runs, publish(parsed, digest, monkeypatch))
    # Refused by the safe read (a link, not a regular file, over the cap, missing), else by the digest.
    why = ("unusable (Refusal)" if attack in ("a symlink", "a directory", "oversized", "removed")
           else f"{COMPILED} is not the compiled form select wrote")
    assert all(f"compiled form not used: {why})" in run.log for run in runs), runs[0].log
    assert contract_rows(compiled) == ["| contract | parsed from `contract.yml` |"] * 3


def test_a_contract_edited_after_select_is_refused_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    for directory in (compiled, parsed):
        path = directory / "contract.yml"
        path.write_text(path.read_text().replace("cleanup: infrastructure", "cleaned-up: infrastructure", 1))
    runs, others = publish(compiled, digest, monkeypatch), publish(parsed, digest, monkeypatch)
    assert runs[0].failure()["code"] == "selection.context", runs[0].summary
    same_but_contract_row(runs, others)
    assert "the contract file is not the one select read" in runs[0].log


def test_an_invalid_contract_edited_after_select_keeps_its_line_and_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    for directory in (compiled, parsed):
        path = directory / "contract.yml"
        path.write_text(path.read_text().replace("cleanup: infrastructure", "cleanup: [infrastructure", 1))
    runs, others = publish(compiled, digest, monkeypatch), publish(parsed, digest, monkeypatch)
    failure = runs[0].failure()
    assert failure["code"] == "contract.invalid" and "line " in failure["message"], failure
    same_but_contract_row(runs, others)


def test_a_tampered_selection_is_refused_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, parsed, digest = campaigns(tmp_path, monkeypatch)
    for directory in (compiled, parsed):
        path = directory / "selection.json"
        path.write_bytes(path.read_bytes().replace(b'"full-plan":true', b'"full-plan":false'))
    runs, others = publish(compiled, digest, monkeypatch), publish(parsed, digest, monkeypatch)
    assert runs[0].failure()["code"] == "selection.digest", runs[0].summary
    same_but_contract_row(runs, others)
    assert "the selection does not hash to selection-sha256" in runs[0].log


def test_no_travelled_digest_means_the_yaml_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside Actions a phase may run without selection-sha256; nothing then binds the selection to select's
    # output, so nothing binds the compiled form either.
    compiled, _parsed, _digest = campaigns(tmp_path, monkeypatch)
    run = phase("export", compiled, monkeypatch, **{"cell-results": "cells", "results-dir": "allure-results"})
    assert run.exit_code == 1 and run.failure() is None  # a case failed
    assert "compiled form not used: no selection-sha256 travelled" in run.log


# --- the checks of the compiled form itself, for a selection that records one select did not write ------


@pytest.fixture
def bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """A campaign, and a function that makes its selection record the compiled form given (as a select of
    another version might), returning the new travelled digest."""
    digest = selected(tmp_path, monkeypatch)
    assert digest

    def record(data: bytes) -> str:
        (tmp_path / COMPILED).write_bytes(data)
        selection = json.loads((tmp_path / "selection.json").read_bytes())
        selection["contract-compiled-sha256"] = sha256_bytes(data)
        raw = canonical_json(selection)
        (tmp_path / "selection.json").write_bytes(raw)
        return sha256_bytes(raw)

    yield tmp_path, record


def _compiled_document(directory: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((directory / COMPILED).read_bytes())
    return document


@pytest.mark.parametrize("variant", ["duplicate key", "not UTF-8", "schema-invalid", "another document",
                                     "NaN", "huge integer", "not JSON", "empty"])
def test_a_bound_but_unusable_compiled_form_falls_back(bound: tuple[Path, Any], variant: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    directory, record = bound
    document = _compiled_document(directory)
    text = json.dumps(document, separators=(",", ":"))
    data = {
        "duplicate key": ('{"campaign":"x",' + text[1:]).encode(),
        "not UTF-8": text.encode().replace(b'"', b'"\xff', 1),
        "schema-invalid": json.dumps({**document, "lanes": 12}).encode(),
        "another document": json.dumps({**document, "cases": document["cases"][:1]}).encode(),
        "NaN": json.dumps({**document, "profile": {**document["profile"], "t": float("nan")}}).encode(),
        "huge integer": json.dumps({**document, "cases": [{**document["cases"][0], "testops-id": 2**70},
                                                          *document["cases"][1:]]}).encode(),
        "not JSON": b"campaign: x\n",
        "empty": b"",
    }[variant]
    digest = record(data)
    contract, why = load_compiled(directory / "contract.yml", directory / "selection.json", digest)
    assert contract is None
    assert why == {"another document": "the compiled form does not hash to contract-sha256",
                   "not UTF-8": "unusable (UnicodeDecodeError)",
                   "schema-invalid": "unusable (Refusal)"}.get(variant, "unusable (JSONProblem)")
    # The phase itself parses the YAML and goes on exactly as before.
    with_cells(directory, digest)
    run = phase("export", directory, monkeypatch, **{"selection-sha256": digest, "cell-results": "cells",
                                                     "results-dir": "allure-results"})
    assert run.exit_code == 1 and run.failure() is None  # a case failed
    assert "compiled form not used" in run.log


def test_the_compiled_form_is_used_when_bound(bound: tuple[Path, Any]) -> None:
    # The control of the test above: the same recording with the bytes select wrote is accepted.
    directory, record = bound
    digest = record((directory / COMPILED).read_bytes())
    contract, why = load_compiled(directory / "contract.yml", directory / "selection.json", digest)
    assert contract is not None, why
    expected = load_contract(directory / "contract.yml")
    assert contract == expected
    assert json.dumps(contract.document) == json.dumps(expected.document)  # every key in the file's order


# The example with what it lacks: trials (default and per case, flow style) and a budget, at the end.
TRIALS_AND_BUDGET = """
trials: {count: 5, verdict: {at-least: 4}}
budget:
  campaign: {cost-nanodollars: 50000000000, agent-turns: 900}
  trial: {cost-nanodollars: 500000000}
"""


@pytest.mark.parametrize("source", ["examples/contract.yml", "tests/data/contract-example.yml", "with trials"])
def test_the_compiled_form_is_the_contract_a_parse_gives(tmp_path: Path, source: str) -> None:
    # Hand-written contracts (comments, TestOps and remote sections, checks in no particular order, trials,
    # a budget): the contract built from select's compiled form equals the parsed one, field for field and
    # key order for key order.
    path = tmp_path / "contract.yml"
    if source == "with trials":
        text = EXAMPLE_CONTRACT.read_text()
        path.write_text(text.replace("    checks:\n      tool-called: behavior\n",
                                     "    trials: {count: 3, verdict: any, jobs: per-case}\n    checks:\n"
                                     "      tool-called: behavior\n", 1) + TRIALS_AND_BUDGET)
        assert "jobs: per-case" in path.read_text()
    else:
        shutil.copyfile(REPO / source, path)
    parsed = load_contract(path)
    selection, digest = make_selection(tmp_path, parsed, actions_env())
    compiled = compiled_bytes(parsed)
    assert compiled is not None
    compiled_path(selection).write_bytes(compiled)
    contract, why = load_compiled(path, selection, digest)
    assert contract is not None, why
    assert contract == parsed
    assert json.dumps(contract.document) == json.dumps(parsed.document)
    assert [list(c.checks) for c in contract.cases] == [list(c.checks) for c in parsed.cases]
    if source == "with trials":
        assert parsed.budget is not None and parsed.cases[0].trials.count == 3


def test_a_json_named_contract_is_parsed_as_json(bound: tuple[Path, Any]) -> None:
    # The same bytes under a *.json name are read by the JSON parser (YAML text is refused there): the compiled
    # form of select's YAML parse must not decide for it.
    directory, record = bound
    digest = record((directory / COMPILED).read_bytes())
    shutil.copyfile(directory / "contract.yml", directory / "contract.json")
    contract, why = load_compiled(directory / "contract.json", directory / "selection.json", digest)
    assert contract is None and why == "a JSON contract"


# --- guard compiles it for select in the same job -------------------------------------------------------
# The campaign template runs guard and select as two steps of one job: guard writes the compiled form in the
# state directory, records its digests in its receipt and gives the receipt's digest as its `guard-sha256`
# output; select, given that output, builds the contract from it. A campaign then parses its YAML once.

GUARD_COMPILED = "state/guard-contract.json"


def guarded(directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """guard (the local rehearsal) run on the example contract: guard-sha256."""
    return first("guard", "guard-sha256", directory, monkeypatch)


def guard_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """Two copies of one guarded campaign: select runs with guard-sha256 in the first, without in the second."""
    given, plain = tmp_path / "given", tmp_path / "plain"
    digest = guarded(given, monkeypatch)
    shutil.copytree(given, plain, symlinks=True)
    return given, plain, digest


def same_selection(run: PhaseRun, other: PhaseRun) -> None:
    """Two selects gave the same exit code, outputs, refusal and files (the state directory, where guard's
    files and the step summaries are, aside): the compiled form changed nothing they decided."""
    assert run.exit_code == other.exit_code
    assert seen(run, run.outputs) == seen(other, other.outputs)
    assert seen(run, run.failure()) == seen(other, other.failure())
    left, right = ({name: data for name, data in files(Path(r.env["GITHUB_WORKSPACE"])).items()
                    if not name.startswith("state/")} for r in (run, other))
    assert left == right


def test_guard_writes_the_compiled_form_and_binds_it_in_its_receipt(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    digest = guarded(tmp_path, monkeypatch)
    receipt = (tmp_path / "state/guard.json").read_bytes()
    assert sha256_bytes(receipt) == digest
    recorded = json.loads(receipt)
    contract = load_contract(tmp_path / "contract.yml")
    data = (tmp_path / GUARD_COMPILED).read_bytes()
    assert data == compiled_bytes(contract)
    assert recorded["contract-file-sha256"] == sha256_bytes((tmp_path / "contract.yml").read_bytes())
    assert recorded["contract-compiled-sha256"] == sha256_bytes(data)
    assert recorded["contract-sha256"] == contract.digest
    assert stat.S_IMODE(os.stat(tmp_path / GUARD_COMPILED).st_mode) == 0o600
    # The same guard again (same run, same contract) finds its own files: not a conflict, the same digest.
    again = phase("guard", tmp_path, monkeypatch)
    assert again.exit_code == 0 and again.outputs["guard-sha256"] == digest


def test_guard_refuses_a_state_dir_holding_another_contracts_compiled_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guarded(tmp_path, monkeypatch)
    (tmp_path / GUARD_COMPILED).write_bytes(b'{"campaign":"another"}\n')
    again = phase("guard", tmp_path, monkeypatch)
    assert again.exit_code != 0 and again.failure()["code"] == "io.exists"
    assert "guard-contract.json" in again.failure()["message"]


@pytest.mark.parametrize("receipt", [b"not json\n", b"\xff\xfe", b'{"schema":"another run"}\n'])
def test_guard_refuses_another_receipt_and_writes_nothing_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    receipt: bytes) -> None:
    (tmp_path / "state").mkdir(parents=True)
    (tmp_path / "state/guard.json").write_bytes(receipt)
    shutil.copyfile(EXAMPLE_CONTRACT, tmp_path / "contract.yml")
    run = phase("guard", tmp_path, monkeypatch)
    assert run.exit_code != 0 and run.failure()["code"] == "io.exists", run.summary
    assert not (tmp_path / GUARD_COMPILED).exists()
    assert (tmp_path / "state/guard.json").read_bytes() == receipt


def test_guard_writes_no_compiled_form_for_a_json_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "contract.json").write_text(json.dumps(load_contract(EXAMPLE_CONTRACT).document))
    run = phase("guard", tmp_path, monkeypatch, contract="contract.json")
    assert run.exit_code == 0, run.summary
    assert not (tmp_path / GUARD_COMPILED).exists()
    assert json.loads((tmp_path / "state/guard.json").read_bytes())["contract-compiled-sha256"] is None


def test_a_compiled_form_over_the_cap_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A compiled form over the cap every reader applies could not be read, so neither guard nor select writes one
    # (a repeated guard would otherwise be refused for its own file), and select parses, as for any unusable
    # compiled form. The YAML reader's budgets now keep any contract under the 4 MiB file cap below it (aliases
    # repeat at most 4 Mi characters; JSON at most doubles a character), so the cap is lowered to this contract.
    from testops_evidence.campaign import compiled

    text = EXAMPLE_CONTRACT.read_text()
    size = len(json.dumps(yaml_document(text), ensure_ascii=False, separators=(",", ":")).encode()) + 1
    monkeypatch.setattr(compiled, "COMPILED_LIMIT", size - 1)
    given = tmp_path / "given"
    given.mkdir()
    (given / "contract.yml").write_text(text)
    run = phase("guard", given, monkeypatch)
    assert run.exit_code == 0, run.summary
    assert json.loads((given / "state/guard.json").read_bytes())["contract-compiled-sha256"] is None
    assert not (given / GUARD_COMPILED).exists()
    again = phase("guard", given, monkeypatch)
    assert again.exit_code == 0 and again.outputs["guard-sha256"] == run.outputs["guard-sha256"], again.summary
    plain = tmp_path / "plain"
    shutil.copytree(given, plain)
    selected_run = phase("select", given, monkeypatch, **{"guard-sha256": run.outputs["guard-sha256"]})
    same_selection(selected_run, phase("select", plain, monkeypatch))
    assert selected_run.exit_code == 0 and "the guard receipt records no compiled contract" in selected_run.log
    assert not (given / COMPILED).exists()
    assert "contract-compiled-sha256" not in json.loads((given / "selection.json").read_bytes())


def yaml_document(text: str) -> Any:
    from testops_evidence.readers import yamlread

    value, problems = yamlread.read(text, limit=1)
    assert not problems
    return value


def test_select_builds_the_contract_guard_compiled_with_the_same_selection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given, plain, digest = guard_pair(tmp_path, monkeypatch)
    run = phase("select", given, monkeypatch, **{"guard-sha256": digest})
    other = phase("select", plain, monkeypatch)
    assert run.exit_code == 0, run.summary
    same_selection(run, other)
    # select's own compiled form, for the phases after it, is byte for byte guard's.
    assert (given / COMPILED).read_bytes() == (given / GUARD_COMPILED).read_bytes()
    assert "contract: compiled by guard" in run.log
    summary_rows = [line for line in (given / "state/summaries/select.md").read_text().splitlines()
                    if line.startswith("| contract |")]
    assert summary_rows == [f"| contract | compiled by guard, bound by digest | `{COMPILED}` |"]
    assert [line for line in (plain / "state/summaries/select.md").read_text().splitlines()
            if line.startswith("| contract |")] == [f"| contract | parsed from `contract.yml` | `{COMPILED}` |"]


def test_select_with_guard_sha256_never_loads_the_yaml_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given, plain, digest = guard_pair(tmp_path, monkeypatch)
    fast = started(given, "select", **{"guard-sha256": digest})
    slow = started(plain, "select")  # so the check below can fail
    assert fast[0] == slow[0] == 0
    assert "testops_evidence.readers.yamlread" not in fast[1]
    assert "testops_evidence.readers.yamlread" in slow[1]


def _forged_receipt(directory: Path) -> None:
    # The attack that matters: a compiled form of another contract, and a receipt that records it and the real
    # contract file. Every digest inside agrees; only guard-sha256, a step output, tells them apart.
    data = json.dumps({**_guard_compiled(directory), "cases": _guard_compiled(directory)["cases"][:1]},
                      separators=(",", ":")).encode()
    (directory / GUARD_COMPILED).write_bytes(data)
    receipt = json.loads((directory / "state/guard.json").read_bytes())
    receipt["contract-compiled-sha256"] = sha256_bytes(data)
    receipt["contract-sha256"] = sha256_bytes(canonical_json(json.loads(data)))
    (directory / "state/guard.json").write_bytes(json.dumps(receipt, indent=2).encode())


def _guard_compiled(directory: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((directory / GUARD_COMPILED).read_bytes())
    return document


def _on_guard_compiled(attack: Any, directory: Path) -> None:
    attack(directory / GUARD_COMPILED)


def _contract_edited(directory: Path) -> None:
    path = directory / "contract.yml"
    path.write_text(path.read_text().replace("cleanup: infrastructure", "cleaned-up: infrastructure", 1))


GUARD_ATTACKS: dict[str, Any] = {
    **{f"compiled form: {name}": functools.partial(_on_guard_compiled, attack) for name, attack in ATTACKS.items()},
    "a forged receipt": _forged_receipt,
    "receipt removed": lambda d: (d / "state/guard.json").unlink(),
    "contract edited after guard": _contract_edited,
}


@pytest.mark.parametrize("attack", sorted(GUARD_ATTACKS))
def test_a_tampered_guard_state_changes_nothing_select_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               attack: str) -> None:
    given, plain, digest = guard_pair(tmp_path, monkeypatch)
    for directory in (given, plain):
        GUARD_ATTACKS[attack](directory)
    run = phase("select", given, monkeypatch, **{"guard-sha256": digest})
    other = phase("select", plain, monkeypatch)
    same_selection(run, other)
    assert "compiled form not used: " in run.log, run.log
    if attack == "contract edited after guard":
        assert "the contract file is not the one guard read" in run.log
        assert run.exit_code == 0  # a valid contract, parsed: the selection is of the edited one, as without guard
    if attack == "a forged receipt":
        assert "guard.json in the state directory does not hash to guard-sha256" in run.log


def test_a_guard_sha256_from_another_job_means_the_yaml_is_parsed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # guard ran in another job (a hand-written workflow) and its output was passed on: this state directory
    # has no guard receipt, so select parses the contract.
    given, _plain, digest = guard_pair(tmp_path, monkeypatch)
    shutil.rmtree(given / "state")
    run = phase("select", given, monkeypatch, **{"guard-sha256": digest})
    assert run.exit_code == 0, run.summary
    assert "compiled form not used: unusable (Refusal)" in run.log


def test_a_malformed_guard_sha256_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given, _plain, digest = guard_pair(tmp_path, monkeypatch)
    run = phase("select", given, monkeypatch, **{"guard-sha256": digest.upper()})
    assert run.exit_code == 2, run.summary
    assert run.failure()["code"] == "input.guard-sha256"
    assert not (given / "selection.json").exists() and not (given / COMPILED).exists()


@pytest.mark.parametrize("form", ["re-indented", "a duplicate key"])
def test_guard_adopts_only_its_own_receipt_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         form: str) -> None:
    # A receipt left in the state directory (a self-hosted runner's RUNNER_TEMP) that says what guard would say,
    # in other bytes: guard refuses it rather than give its digest as guard-sha256, so bytes that hash to that
    # output are always bytes guard writes (a duplicate key would otherwise hide a second compiled digest from
    # every reader but the strictest).
    digest = guarded(tmp_path, monkeypatch)
    path = tmp_path / "state/guard.json"
    document = json.loads(path.read_bytes())
    if form == "re-indented":
        data = json.dumps(document, indent=4).encode()
    else:
        data = ('{"contract-compiled-sha256": "' + "0" * 64 + '", ' + json.dumps(document)[1:]).encode()
    assert json.loads(data) == document and sha256_bytes(data) != digest
    path.write_bytes(data)
    again = phase("guard", tmp_path, monkeypatch)
    assert again.exit_code == 3 and again.failure()["code"] == "io.exists", again.summary
    assert path.read_bytes() == data


@pytest.mark.parametrize("kind", ["a directory", "a FIFO", "a symlink to the right bytes", "a hard link"])
def test_guard_refuses_a_planted_compiled_form_and_writes_no_receipt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     kind: str) -> None:
    # What an earlier job on a self-hosted runner could leave where guard writes its compiled form: refused as an
    # unsafe path (never read through, never waited on), before the receipt that would name it is written.
    (tmp_path / "state").mkdir(mode=0o700)
    shutil.copyfile(EXAMPLE_CONTRACT, tmp_path / "contract.yml")
    (tmp_path / "right").write_bytes(compiled_bytes(load_contract(tmp_path / "contract.yml")) or b"")
    planted = tmp_path / GUARD_COMPILED
    {"a directory": lambda: planted.mkdir(), "a FIFO": lambda: os.mkfifo(planted),
     "a symlink to the right bytes": lambda: planted.symlink_to(tmp_path / "right"),
     "a hard link": lambda: os.link(tmp_path / "right", planted)}[kind]()
    run = phase("guard", tmp_path, monkeypatch)
    assert run.exit_code == 3 and run.failure()["code"] == "io.unsafe_path", run.summary
    assert not (tmp_path / "state/guard.json").exists() and "guard-sha256" not in run.outputs


def test_two_guards_in_one_job_with_different_contracts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The second guard (another contract, the same state directory) is refused and leaves the first one's files;
    # a select of the second contract given the first guard's output parses its own contract.
    digest = guarded(tmp_path, monkeypatch)
    before = {name: (tmp_path / "state" / name).read_bytes() for name in ("guard.json", "guard-contract.json")}
    _contract_edited(tmp_path)
    (tmp_path / "contract.yml").rename(tmp_path / "other.yml")
    shutil.copyfile(EXAMPLE_CONTRACT, tmp_path / "contract.yml")
    second = phase("guard", tmp_path, monkeypatch, contract="other.yml")
    assert second.exit_code == 3 and second.failure()["code"] == "io.exists", second.summary
    assert {name: (tmp_path / "state" / name).read_bytes() for name in before} == before
    run = phase("select", tmp_path, monkeypatch, contract="other.yml", **{"guard-sha256": digest})
    assert run.exit_code == 0, run.summary
    assert "compiled form not used: the contract file is not the one guard read" in run.log
    selection = json.loads((tmp_path / "selection.json").read_bytes())
    assert selection["contract-sha256"] == load_contract(tmp_path / "other.yml").digest != load_contract(
        tmp_path / "contract.yml").digest


@pytest.mark.parametrize(("receipt", "why"), [
    (b"[]\n", "guard.json is not an object"),
    (b'{"contract-sha256": 1}\n', "the guard receipt records no compiled contract"),
    (b"\xff\xfe\n", "unusable (UnicodeDecodeError)"),
    (b'{"a": 1, "a": 2}\n', "unusable (JSONProblem)"),
])
def test_a_receipt_that_hashes_to_guard_sha256_but_binds_nothing_means_a_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receipt: bytes, why: str) -> None:
    # A digest given by hand (a workflow's mistake) for a file that is not a guard receipt: select parses.
    given, plain, _digest = guard_pair(tmp_path, monkeypatch)
    (given / "state/guard.json").unlink()
    (given / "state/guard.json").write_bytes(receipt)
    run = phase("select", given, monkeypatch, **{"guard-sha256": sha256_bytes(receipt)})
    same_selection(run, phase("select", plain, monkeypatch))
    assert run.exit_code == 0 and f"compiled form not used: {why})" in run.log, run.log


@pytest.mark.parametrize("version", ["0.1.0", None])
def test_a_form_compiled_by_another_version_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        version: str | None) -> None:
    # Another version's reader may parse the same bytes differently: its compiled form (recorded by a selection
    # or a guard receipt of that version, or by none) is never used, and the phase parses the YAML itself.
    from testops_evidence import __version__

    digest = selected(tmp_path, monkeypatch)
    selection = json.loads((tmp_path / "selection.json").read_bytes())
    assert selection["contract-compiled-by"] == __version__
    assert load_compiled(tmp_path / "contract.yml", tmp_path / "selection.json", digest)[0] is not None  # control
    if version is None:
        del selection["contract-compiled-by"]
    else:
        selection["contract-compiled-by"] = version
    raw = canonical_json(selection)
    (tmp_path / "selection.json").write_bytes(raw)
    contract, why = load_compiled(tmp_path / "contract.yml", tmp_path / "selection.json", sha256_bytes(raw))
    assert contract is None and why == f"compiled by another version of testops-evidence than {__version__}"

    given = tmp_path / "guarded"
    guard_digest = guarded(given, monkeypatch)
    receipt = json.loads((given / "state/guard.json").read_bytes())
    assert receipt["contract-compiled-by"] == __version__
    receipt["contract-compiled-by"] = version
    data = json.dumps(receipt).encode()
    (given / "state/guard.json").write_bytes(data)
    run = phase("select", given, monkeypatch, **{"guard-sha256": sha256_bytes(data)})
    assert guard_digest != sha256_bytes(data) and run.exit_code == 0, run.summary
    assert f"compiled form not used: compiled by another version of testops-evidence than {__version__}" in run.log
