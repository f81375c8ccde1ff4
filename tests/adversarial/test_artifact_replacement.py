"""The red team, issue 23: a worker that reached the runtime token re-uploads the selection artifact.

Before issue 23 the campaign template downloaded ``<prefix>-selection-<attempt>`` by name into the workspace
root of every later job (workers, export, publish). An agent that reached the Actions runtime token could upload
that artifact again (upload-artifact v4 ``overwrite: true``) with the same selection bytes — ``verify-selection``
re-hashed that one file and was satisfied — plus files for the later jobs: an ``evals/run_case.py`` over the
checkout, run as the harness of every worker that started after it, or a cell under
``testops-evidence-cells/<verified worker's artifact>/`` for the export job to count beside the real ones.

Now every download takes the id the select job's upload step reported (a job output), into a directory of its
own, and every phase that reads the selection refuses a directory holding more than the selection's own files.
Each attack below runs the campaign template under act, as tests/adversarial/test_red_team.py does, and must end
in a specific refusal with nothing published, never a forged pass.

How act stands in for GitHub: the upload stand-in (act/upload-artifact) keeps the run's artifacts in a directory
with a record per artifact (``.meta/<name>.json``: its id), and a re-upload under the same name with
``overwrite: true`` replaces the files and the record with a new id — as the Actions service does, which deletes
the old artifact and creates another. The attacker's case command does exactly that to the store, standing for
its process calling the artifact service with the runtime token. act starts the matrix legs together (it cannot
read the template's ``max-parallel`` expression), so the jobs that certainly start after the attack are export
and publish; a worker that starts later is refused the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from test_act_e2e import CASES, ActRun, run_act, summaries_of

pytestmark = pytest.mark.act

VICTIM = "budget-stop"  # fails honestly: the agent wants it to pass
ATTACKER = "list-open-issues"  # the case whose worker runs the attack
SELECTION = "testops-evidence-selection-1"

AGENT = '''\
"""An agent under test: honest for every case; the attacker's worker also replaces the selection artifact."""
import json
import os
import shutil
import time

ATTACK = {attack!r}
VICTIM = {victim!r}
ATTACKER = {attacker!r}
SELECTION = {selection!r}
CHECKS = {checks!r}
row = json.loads(os.environ["TESTOPS_EVIDENCE_CASE_JSON"])
key = row["key"]
store = os.environ["TESTOPS_EVIDENCE_ACT_ARTIFACTS"]  # what the runtime token reaches


def cell(case, ok, attempt):
    return {{"schema": "testops-evidence/cell-result/v2",
            "selection-sha256": os.environ["TESTOPS_EVIDENCE_SELECTION_SHA256"], "case": case,
            "attempt-id": attempt, "disposition": "passed" if ok else "behavior_failure",
            "started-at": "2026-12-01T10:00:00Z", "finished-at": "2026-12-01T10:01:00Z",
            "source-sha": os.environ["TESTOPS_EVIDENCE_SOURCE_SHA"],
            "profile": json.loads(os.environ["TESTOPS_EVIDENCE_PROFILE"]),
            "checks": [{{"id": c, "passed": ok or i > 0}} for i, c in enumerate(sorted(CHECKS[case]))]}}


with open(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"], "w") as handle:
    json.dump(cell(key, key != VICTIM, os.environ["TESTOPS_EVIDENCE_ATTEMPT_ID"]), handle)

# A harness that passes everything, and says so in the log when it runs (the marker is built, so this source
# printed in a log does not contain it).
PLANTED = """import json, os
print("PLANTED" + "-HARNESS-RAN", os.environ.get("TESTOPS_EVIDENCE_CASE"))
"""
FORGED = cell(VICTIM, True, "planted-by-" + ATTACKER)

if key == ATTACKER:
    selection = os.path.join(store, SELECTION)
    kept = {{name: open(os.path.join(selection, name), "rb").read() for name in os.listdir(selection)}}
    planted = {{"evals/run_case.py": PLANTED.encode()}}
    # For the export job: a passed cell for the victim inside the victim worker's own artifact directory, where
    # the verified artifact is later downloaded beside it (both the layouts export reads).
    victim_dir = "testops-evidence-cells/testops-evidence-cells-1-native-" + VICTIM
    planted[victim_dir + "/" + VICTIM + "/later.json"] = json.dumps(FORGED).encode()
    if ATTACK == "reupload":
        # upload-artifact with overwrite: true, as the stand-in (and the Actions service) does it: the old
        # artifact is gone, a new one with a new id holds the same selection bytes plus the planted files.
        shutil.rmtree(selection)
        identity = time.time_ns() // 1000 % 2**31
        meta = {{"name": SELECTION, "id": identity, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
        with open(os.path.join(store, ".meta", SELECTION + ".json"), "w") as handle:
            json.dump(meta, handle)
    for name, data in {{**kept, **planted}}.items():
        os.makedirs(os.path.dirname(os.path.join(selection, name)), exist_ok=True)
        with open(os.path.join(selection, name), "wb") as handle:
            handle.write(data)
print("case", key, "attack", ATTACK if key == ATTACKER else "-")
'''

CHECKS = {key: checks for key, (_lane, checks, _ok) in CASES.items()}


def attack(act_binary: Path, tmp_path: Path, github: Any, name: str) -> ActRun:
    agent = AGENT.format(attack=name, victim=VICTIM, attacker=ATTACKER, selection=SELECTION, checks=CHECKS)
    return run_act(act_binary, tmp_path, github, case_command=agent)


def assert_nothing_forged(result: ActRun) -> None:
    """No publication at all, no pass for the victim anywhere, and the planted harness never ran."""
    assert result.outputs.get("published") != "true", result.outputs
    assert result.outputs.get("all-passed") != "true"
    assert not list(result.artifacts.glob("testops-evidence-report-*")), sorted(p.name for p in result.artifacts.iterdir())
    assert not (result.artifacts / "testops-evidence-results-1").exists()  # export wrote nothing to publish
    assert "PLANTED-HARNESS-RAN" not in result.log
    # The attack did happen: the artifact under the selection's name holds the planted files.
    assert (result.artifacts / SELECTION / "evals" / "run_case.py").is_file()


def test_a_selection_artifact_uploaded_again_with_a_harness_and_a_cell_is_not_found_by_its_id(
        act_binary: Path, tmp_path: Path, github: Any) -> None:
    """The realistic attack: a re-upload is a new artifact with a new id. Every job after it asks for the id
    select's upload reported, which no longer exists: download-artifact fails the step, export never starts,
    nothing is published (before: the planted harness replaced the checkout's, the planted cell was counted)."""
    result = attack(act_binary, tmp_path, github, "reupload")
    assert_nothing_forged(result)
    meta = json.loads((result.artifacts / ".meta" / f"{SELECTION}.json").read_text())
    assert meta["id"] != 0
    assert "None of the provided artifact IDs were found" in result.log
    export_lines = [line for line in result.log.splitlines() if line.startswith("[campaign/testops-evidence campaign/export")]
    assert any("None of the provided artifact IDs were found" in line for line in export_lines), result.log[-4000:]
    assert not summaries_of(result, "export-export")  # export never ran


def test_a_selection_artifact_with_files_added_under_its_own_id_is_refused_by_the_directory_check(
        act_binary: Path, tmp_path: Path, github: Any) -> None:
    """Defence in depth: were the files added under the artifact's own id (the act store is a plain directory; the
    Actions service keeps an artifact immutable), the download finds it, the selection still hashes to its
    digest, and the directory check refuses it before a byte is used: selection.extra_file, naming the entries."""
    result = attack(act_binary, tmp_path, github, "add-under-id")
    assert_nothing_forged(result)
    refused = summaries_of(result, "export-collect-cells")
    assert "selection.extra_file" in refused, (sorted(result.summaries), result.log[-4000:])
    assert "evals" in refused and "testops-evidence-cells" in refused
