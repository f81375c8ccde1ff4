"""`check`: validates a contract and summarises it; exit 0 when valid, 2 when not."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers import assert_golden, run_mode
from testops_evidence import cli
from testops_evidence.contract import parse_contract_bytes
from testops_evidence.errors import EXIT_OK, EXIT_USAGE, REGISTRY

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden" / "check"


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative contract paths, as a workflow passes them, keep the summary free of temp paths.
    monkeypatch.chdir(REPO)


def write_contract(tmp_path: Path, mutate: object = None, name: str = "contract.json") -> Path:
    document = parse_contract_bytes((REPO / "examples" / "contract.yml").read_bytes(), "contract.yml")
    document = copy.deepcopy(document)
    if callable(mutate):
        mutate(document)
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_a_valid_contract_is_summarised(tmp_path: Path, in_repo: None) -> None:
    run = run_mode("check", tmp_path, {"contract": "examples/contract.yml"})
    assert run.exit_code == EXIT_OK
    assert run.outputs == {}
    assert run.failure() is None
    assert_golden(GOLDEN / "summary.md", run.summary)


def test_the_summary_headline_counts_cases_per_lane(tmp_path: Path, in_repo: None) -> None:
    run = run_mode("check", tmp_path, {"contract": "examples/contract.yml"})
    assert ("✅ Contract **agent-protocol** is valid: 12 cases (3 external, 9 native), backend `testops`."
            in run.summary)
    assert "| native | 9 | 4 |" in run.summary
    assert ("| `heartbeat-resume` | 203 | native | 15 min | 3 | `ANTHROPIC_API_KEY`, `PAPERCLIP_RUNNER_KEY` |"
            in run.summary)


def test_without_a_testops_section_the_backend_is_files(tmp_path: Path) -> None:
    def files_only(d: dict) -> None:  # type: ignore[type-arg]
        del d["testops"]
        for case in d["cases"]:
            del case["testops-id"]

    run = run_mode("check", tmp_path, {"contract": str(write_contract(tmp_path, files_only))})
    assert run.exit_code == EXIT_OK
    assert "backend `files`" in run.summary
    assert "| TestOps | — |" in run.summary
    assert "| 194 |" not in run.summary


def test_the_backend_input_overrides_and_is_validated(tmp_path: Path, in_repo: None) -> None:
    run = run_mode("check", tmp_path, {"contract": "examples/contract.yml", "backend": "files"})
    assert (run.exit_code, "backend `files`" in run.summary) == (EXIT_OK, True)
    bad = run_mode("check", tmp_path, {"contract": "examples/contract.yml", "backend": "s3"})
    assert (bad.exit_code, bad.outputs) == (EXIT_USAGE, {"error-code": "input.backend"})


def test_values_from_the_contract_cannot_break_the_tables(tmp_path: Path) -> None:
    path = write_contract(tmp_path, lambda d: d["profile"].__setitem__("model", "a|b\\c"))
    run = run_mode("check", tmp_path, {"contract": str(path)})
    assert run.exit_code == EXIT_OK
    # md.text escapes | and \ (as \| and \\), then the table escapes every pipe once more (\\|)
    assert "model=a\\\\|b\\\\c" in run.summary


def test_a_missing_contract_exits_2_with_the_next_step(tmp_path: Path) -> None:
    run = run_mode("check", tmp_path, {"contract": str(tmp_path / "absent.yml")})
    assert run.exit_code == EXIT_USAGE
    assert run.outputs == {"error-code": "contract.missing"}
    assert "### ⛔ `check` refused: `contract.missing`" in run.summary
    assert f"**Next step:** {REGISTRY['contract.missing'].hint}" in run.summary
    assert "::error title=contract.missing::" in run.log
    failure = run.failure()
    assert failure is not None and failure["code"] == "contract.missing" and failure["mode"] == "check"


def test_an_invalid_contract_exits_2_and_names_the_pointer(tmp_path: Path) -> None:
    path = write_contract(tmp_path, lambda d: d["cases"][3].__setitem__("lane", "cloud"))
    run = run_mode("check", tmp_path, {"contract": str(path)})
    assert run.exit_code == EXIT_USAGE
    assert run.outputs == {"error-code": "contract.invalid"}
    assert "| field | `/cases/3/lane` |" in run.summary
    assert '| expected | `one of "native", "external"` |' in run.summary
    assert "| actual | `cloud` |" in run.summary
    assert run.failure()["field"] == "/cases/3/lane"  # type: ignore[index]


def test_the_default_contract_path_is_the_documented_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = run_mode("check", tmp_path)
    assert run.outputs == {"error-code": "contract.missing"}
    assert run.failure()["actual"] == ".github/testops-evidence.yml"  # type: ignore[index]
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "testops-evidence.yml").write_bytes((REPO / "examples" / "contract.yml").read_bytes())
    assert run_mode("check", tmp_path / "second").exit_code == EXIT_OK


def test_outside_actions_the_summary_is_printed(tmp_path: Path, in_repo: None) -> None:
    run = run_mode("check", tmp_path, {"contract": "examples/contract.yml"}, actions=False)
    assert run.exit_code == EXIT_OK
    # Plain text for a terminal: no Markdown heading marks, backticks or table pipes.
    assert "testops-evidence · check\n" in run.log and "`" not in run.log and "| " not in run.log


def test_check_through_the_cli_writes_the_summary_file(tmp_path: Path, in_repo: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("INPUT_", "GITHUB_")):
            monkeypatch.delenv(key)
    code = cli.main(["check", "--contract", "examples/contract.yml", "--state-dir", str(tmp_path / "state"),
                     "--summary-file", str(tmp_path / "summary.md")])
    assert code == EXIT_OK
    assert_golden(GOLDEN / "summary.md", (tmp_path / "summary.md").read_text())


def test_check_prints_the_trials_per_case_the_contracts_target_effect_takes(tmp_path: Path) -> None:
    """Issue 25: a contract naming `statistics.detect` learns the trials per case it takes (80% power, 5%
    two-sided, paired, pass rates near 50%): 2 * 0.25 * 2.801585^2 / (12 * 0.05^2) = 130.8 -> 131 > 100."""
    def target(document: dict[str, object]) -> None:
        document["statistics"] = {"detect": 0.05, "correction": "holm", "q": 0.1}
    run = run_mode("check", tmp_path, {"contract": str(write_contract(tmp_path, target))})
    assert run.exit_code == EXIT_OK, run.summary
    assert "Holm (family-wise error rate) at q = 0.1" in run.summary
    assert "over these 12 cases takes **131 trial(s) per case**" in run.summary
    # 2 * 0.25 * 2.801585^2 / (100 * 0.05^2) = 15.7 -> 16 cases at 100 trials.
    assert "at 100 trials it takes 16 cases" in run.summary
    def coarse(document: dict[str, object]) -> None:
        document["statistics"] = {"detect": 0.3}
    run = run_mode("check", tmp_path, {"contract": str(write_contract(tmp_path, coarse, "coarse.json"))})
    assert "takes **4 trial(s) per case**" in run.summary and "it takes" not in run.summary.split("**4 trial")[1]


@pytest.mark.parametrize("actors", [
    pytest.param(list(range(1, 16_001)), id="16000-ids"),
    # Objects do not sort: jsonschema's own uniqueItems compared every pair of them (minutes).
    pytest.param([{"id": i} for i in range(16_000)], id="16000-objects"),
    pytest.param([i if i % 3 else str(i) for i in range(1, 16_001)], id="16000-mixed"),
])
def test_a_contract_with_16000_actors_is_refused_without_comparing_every_pair(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actors: list[object]) -> None:
    # Issue 24 (7): a 106 KB contract with 16,000 actor ids kept `check` (and `guard`, same loader) busy past
    # 300 s: uniqueItems compared every pair. The work is counted, not timed: no pairwise equality at all.
    from jsonschema import _utils

    from testops_evidence.readers import schemacheck

    calls = {"ours": 0, "jsonschema": 0}

    def counted(name: str, real: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls[name] += 1
            return real(*args)
        return wrapper

    monkeypatch.setattr(schemacheck, "json_equal", counted("ours", schemacheck.json_equal))
    monkeypatch.setattr(_utils, "equal", counted("jsonschema", _utils.equal))
    path = write_contract(tmp_path, lambda d: d["trust"].__setitem__("actors", actors), name="contract.yml")
    assert path.stat().st_size > 100_000
    run = run_mode("check", tmp_path, {"contract": str(path)})
    assert run.exit_code == EXIT_USAGE
    assert run.outputs == {"error-code": "contract.invalid"}
    assert run.failure()["field"].startswith("/trust/actors")  # type: ignore[index]
    assert "too long" in run.failure()["message"]  # type: ignore[index]
    assert calls["ours"] < 100 and calls["jsonschema"] < 100_000, calls
