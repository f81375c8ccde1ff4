"""mode import, end to end against the GitHub REST test server: provenance from the API, a redirecting zip
download, validation, and one ledger transaction. Every refusal leaves the ledger byte-identical."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeClock, PhaseRun, run_mode
from import_builders import (
    HEAD_SHA,
    PREFIX,
    REPOSITORY,
    RUN_ID,
    WORKFLOW,
    Cell,
    artifact_entries,
    artifact_zip,
    contract_document,
    dumps,
    host_document,
    intent_document,
    make_zip,
    replace_entry,
    result_document,
    symlink_entry,
)
from servers.github_server import GitHubServer
from testops_evidence.campaign.ledger import lock_path

TOKEN = "ghs_SENTINELimportToken8e3b1f9c7a2d5e06"
GOLDEN = Path(__file__).parent / "golden" / "import"
CELLS = [Cell("exec-1"), Cell("exec-2", case="company-credential-approval", ordinal=1,
                              disposition="behavior_failure")]


IMPORTING_RUN_ID = 9_100_200_301


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer(token=TOKEN) as server:
        yield server


class Importer:
    """One workspace: contract, intent and ledger files, and the runner environment for mode import."""

    def __init__(self, tmp_path: Path, gh: GitHubServer, cells: list[Cell] = CELLS, **remote: Any) -> None:
        self.tmp_path = tmp_path
        self.gh = gh
        self.contract = tmp_path / "contract.json"
        self.contract.write_bytes(dumps(contract_document(**remote)))
        self.intent = tmp_path / "intent.json"
        self.intent.write_bytes(dumps(intent_document(cells)))
        self.ledger = tmp_path / "campaign-ledger.json"
        self.clock = FakeClock(1_796_000_000.0)
        # The run that imports, as the contract's trust policy admits it: import re-admits it over REST.
        gh.add_run(REPOSITORY, IMPORTING_RUN_ID, path=".github/workflows/agent-evals.yml", head_sha=HEAD_SHA,
                   head_branch="main")
        event = tmp_path / "importing-event.json"
        event.write_text(json.dumps(gh.event_payload(IMPORTING_RUN_ID)), encoding="utf-8")
        self.runner_env = gh.runner_env(IMPORTING_RUN_ID, event_path=str(event))

    def add_run(self, run_id: int = RUN_ID, **changes: Any) -> dict[str, Any]:
        values: dict[str, Any] = {"path": WORKFLOW, "head_sha": HEAD_SHA, "head_branch": "main"}
        values.update(changes)
        return self.gh.add_run(REPOSITORY, run_id, **values)

    def run(self, run_id: int = RUN_ID, artifact_name: str = "cells-*", **env: str) -> PhaseRun:
        options = {"contract": str(self.contract), "source-run-id": str(run_id), "artifact-name": artifact_name,
                   "intent": str(self.intent), "ledger": str(self.ledger),
                   "state-dir": str(self.tmp_path / f"state-{len(list(self.tmp_path.glob('state-*')))}")}
        full_env = {**self.runner_env, "GITHUB_API_URL": self.gh.api_url(), "INPUT_GITHUB-TOKEN": TOKEN, **env}
        return run_mode("import", self.tmp_path, options, full_env, clock=self.clock.time, sleep=self.clock.sleep,
                        new_uuid=lambda: "0123abcd-0000-4000-8000-000000000000")


def assert_secret_free(result: PhaseRun) -> None:
    """The token reaches nothing a user or another job reads (the runner learns it only to mask it)."""
    log = "\n".join(line for line in result.log.splitlines() if not line.startswith("::add-mask::"))
    texts = [result.summary, log, json.dumps(result.outputs)]
    state = result.state_dir
    if state is not None and state.exists():
        texts += [p.read_text() for p in state.iterdir() if p.is_file()]
    texts += [p.read_text() for p in state.parent.glob("campaign-ledger.json")] if state is not None else []
    for text in texts:
        assert TOKEN not in text


def imported_ledger(importer: Importer) -> dict[str, Any]:
    return json.loads(importer.ledger.read_bytes())


# --- the happy path and idempotency -------------------------------------------------------------------

def test_imports_cells_with_provenance_and_is_idempotent(tmp_path: Path, gh: GitHubServer) -> None:
    importer = Importer(tmp_path, gh)
    importer.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS), artifact_id=501)
    gh.add_artifact(RUN_ID, "unrelated-logs", b"not even a zip", artifact_id=502)

    first = importer.run()
    assert first.exit_code == 0, first.summary
    assert first.outputs == {"imported-count": "2", "duplicate-count": "0", "ledger-path": str(importer.ledger),
                             "ledger-sha256": hashlib.sha256(importer.ledger.read_bytes()).hexdigest()}
    ledger = imported_ledger(importer)
    assert [r["import-key"] for r in ledger["imports"]] == [f"{RUN_ID}/1/exec-1", f"{RUN_ID}/1/exec-2"]
    provenance = ledger["imports"][0]["provenance"]
    assert provenance == {"repository": REPOSITORY, "workflow": WORKFLOW, "ref": "refs/heads/main", "run-id": RUN_ID,
                          "run-attempt": 1, "head-sha": HEAD_SHA, "artifact-id": 501, "artifact-name": "cells-a",
                          "artifact-size": provenance["artifact-size"]}
    assert ledger["scenarios"]["company-credential-approval"]["attempts"][0]["completion"]["disposition"] == (
        "behavior_failure")
    # The zip came through the 302 without the token; the API calls carried it.
    assert [r.authorization for r in gh.requests_to("blob")] == [False]
    assert all(r.authorization for r in gh.requests_to("artifact_zip"))
    assert gh.requests_to("blob")[0].status == 200
    receipt = json.loads((first.state_dir / f"import-{RUN_ID}-1-0123abcd.json").read_text())  # type: ignore[operator]
    assert receipt["ledger"]["changed"] is True and [c["status"] for c in receipt["cells"]] == ["imported"] * 2
    assert_secret_free(first)
    golden(first.summary, "imported.md", gh, tmp_path)

    before = importer.ledger.read_bytes()
    again = importer.run()
    assert again.exit_code == 0
    assert again.outputs["imported-count"] == "0" and again.outputs["duplicate-count"] == "2"
    assert importer.ledger.read_bytes() == before
    assert "Nothing new" in again.summary


def test_the_ghes_api_prefix_works(tmp_path: Path, gh: GitHubServer) -> None:
    importer = Importer(tmp_path, gh, [CELLS[0]])
    importer.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip([CELLS[0]]))
    result = importer.run(GITHUB_API_URL=gh.api_url(ghes=True))
    assert result.exit_code == 0, result.summary
    assert all(r.path.startswith("/api/v3/") for r in gh.log if r.route != "blob")


def test_cells_spread_over_several_artifacts_import_in_one_transaction(tmp_path: Path, gh: GitHubServer) -> None:
    cells = [Cell(f"exec-{n}", ordinal=n) for n in range(1, 4)]
    importer = Importer(tmp_path, gh, cells)
    importer.add_run()
    for cell in cells:
        gh.add_artifact(RUN_ID, f"cells-{cell.execution_id}", make_zip(artifact_entries([cell])))
    result = importer.run()
    assert result.exit_code == 0, result.summary
    assert result.outputs["imported-count"] == "3"
    assert [a["ordinal"] for a in imported_ledger(importer)["scenarios"]["get-task-context"]["attempts"]] == [1, 2, 3]


# --- acceptance: each refused with its code, the ledger byte-identical afterwards ------------------------

@pytest.fixture
def seeded(tmp_path: Path, gh: GitHubServer) -> Importer:
    """A ledger that already holds one import (run 4000), so 'byte-identical' compares real content."""
    importer = Importer(tmp_path, gh, [Cell("seed-1", ordinal=9)])
    importer.add_run(4000)
    gh.add_artifact(4000, "cells-seed", artifact_zip([Cell("seed-1", ordinal=9)], run_id=4000))
    assert importer.run(4000).exit_code == 0
    importer.intent.write_bytes(dumps(intent_document(CELLS)))
    gh.clear_log()
    return importer


def refused(importer: Importer, code: str, run_id: int = RUN_ID) -> PhaseRun:
    before = importer.ledger.read_bytes()
    result = importer.run(run_id)
    assert result.outputs.get("error-code") == code, result.summary
    assert result.exit_code == 3 if code != "ledger.locked" else result.exit_code == 4
    assert importer.ledger.read_bytes() == before
    failure = result.failure()
    assert failure is not None and failure["code"] == code
    assert_secret_free(result)
    return result


def test_a_tampered_archive_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    genuine = artifact_zip(CELLS)
    tampered = artifact_zip(CELLS, edit=replace_entry(f"{PREFIX}exec-2/result.json",
                                                      dumps(result_document(Cell("exec-2", disposition="passed")))))
    gh.add_artifact(RUN_ID, "cells-a", tampered, digest="sha256:" + __import__("hashlib").sha256(genuine).hexdigest())
    result = refused(seeded, "import.digest")
    assert "sha256 (checked)" in result.summary  # the provenance tables are shown with the refusal


def test_a_foreign_workflow_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run(path=".github/workflows/someone-elses.yml")
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS))
    refused(seeded, "import.foreign_workflow")
    assert gh.requests_to("artifact_zip") == []  # nothing was downloaded


def test_a_fork_branch_named_main_is_a_foreign_workflow(seeded: Importer, gh: GitHubServer) -> None:
    gh.add_repo("mallory/agents")
    seeded.add_run(head_repository="mallory/agents", event="pull_request")
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS))
    assert refused(seeded, "import.foreign_workflow").failure()["field"] == "head-repository"  # type: ignore[index]


def test_a_rerun_attempt_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run(run_attempt=2)
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS, run_attempt=2))
    refused(seeded, "import.rerun")


def test_a_path_escape_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", make_zip([*artifact_entries(CELLS), ("results/../../etc/cron.d/x", b"*")]))
    result = refused(seeded, "import.unsafe_archive")
    assert "'..'" in result.summary


def test_a_symlink_entry_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", make_zip([*artifact_entries(CELLS),
                                                 symlink_entry("results/exec-1/notes.txt", "/etc/shadow")]))
    refused(seeded, "import.unsafe_archive")


def test_an_oversized_archive_is_refused_before_download(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS) + b"\0" * (1024 * 1024))  # over max-archive-bytes
    refused(seeded, "import.unsafe_archive")
    assert gh.requests_to("blob") == []


def test_an_oversized_archive_that_lies_about_its_size_is_cut_off_while_streaming(
        seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS) + os.urandom(1024 * 1024), size_in_bytes=4000,
                    chunked=True)
    result = refused(seeded, "import.unsafe_archive")
    assert result.failure()["field"] == "size"  # type: ignore[index]


def test_an_unqualified_host_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    on_demand = host_document(CELLS, lifecycle="on-demand")
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS, host=on_demand))
    result = refused(seeded, "import.host")
    assert result.failure()["field"] == "host.lifecycle"  # type: ignore[index]


def test_a_changed_reimport_is_refused(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS))
    assert seeded.run().exit_code == 0
    # The same run's artifact is uploaded again (overwrite: true) with a different measurement.
    changed = [CELLS[0], Cell("exec-2", case="company-credential-approval", disposition="infrastructure_failure")]
    gh.add_artifact(RUN_ID, "cells-b", artifact_zip(changed))
    result = refused(seeded, "import.changed_measurement")
    assert "🔁 duplicate" in result.summary and "⛔ refused" in result.summary
    golden(result.summary, "changed.md", gh, seeded.tmp_path)


def test_a_cell_refusal_lists_every_cell_and_writes_nothing(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    cells = [CELLS[0], Cell("exec-2", case="company-credential-approval", result={"run-id": 1})]
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(cells))
    result = refused(seeded, "import.document")
    assert "⏸️ not written" in result.summary and "1 of 2 cells refused" in result.summary


# --- other refusals --------------------------------------------------------------------------------------

def test_no_matching_artifact(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "logs", b"x")
    refused(seeded, "import.artifact")


def test_a_held_ledger_lock_refuses(seeded: Importer, gh: GitHubServer) -> None:
    seeded.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS))
    fd = os.open(lock_path(seeded.ledger), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        refused(seeded, "ledger.locked")
    finally:
        os.close(fd)


def test_a_contract_without_remote_policy_is_refused(tmp_path: Path, gh: GitHubServer) -> None:
    importer = Importer(tmp_path, gh)
    document = contract_document()
    del document["remote"]
    importer.contract.write_bytes(dumps(document))
    result = importer.run()
    assert result.outputs["error-code"] == "import.not_configured" and result.exit_code == 2
    assert gh.log == [] and not importer.ledger.exists()


@pytest.mark.parametrize(("option", "code"), [("source-run-id", "input.source-run-id"), ("intent", "input.intent")])
def test_required_inputs(tmp_path: Path, gh: GitHubServer, option: str, code: str) -> None:
    importer = Importer(tmp_path, gh)
    options = {"contract": str(importer.contract), "source-run-id": "1", "intent": str(importer.intent)}
    del options[option]
    result = run_mode("import", tmp_path, options, {"GITHUB_API_URL": gh.api_url(), "INPUT_GITHUB-TOKEN": TOKEN})
    assert result.outputs["error-code"] == code and result.exit_code == 2


def test_an_invalid_ledger_is_refused_before_any_download(tmp_path: Path, gh: GitHubServer) -> None:
    importer = Importer(tmp_path, gh)
    importer.add_run()
    gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS))
    importer.ledger.write_bytes(b'{"schema": "not a ledger"}\n')
    result = importer.run()
    assert result.outputs["error-code"] == "ledger.invalid"
    assert gh.log == [] and importer.ledger.read_bytes() == b'{"schema": "not a ledger"}\n'


def test_an_unknown_run_is_github_404(tmp_path: Path, gh: GitHubServer) -> None:
    importer = Importer(tmp_path, gh)
    result = importer.run(999)
    assert result.outputs["error-code"] == "github.http_404" and result.exit_code == 4
    assert_secret_free(result)


# --- golden summaries ---------------------------------------------------------------------------------------

def golden(summary: str, name: str, gh: GitHubServer, tmp_path: Path) -> None:
    """Compare with tests/golden/import/<name> (the server port and the temp dir replaced).

    Set UPDATE_GOLDEN=1 to rewrite the file after an intended change, then review the diff.
    """
    text = summary.replace(str(gh.port), "PORT").replace(str(tmp_path), "TMP")
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
