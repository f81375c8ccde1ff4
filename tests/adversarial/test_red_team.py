"""The red team: an adversarial worker under act runs the campaign template and attacks the evidence.

The agent under evaluation runs inside a worker job and is the party with the strongest interest in a
pass (docs/security.md, threat model). Here the case command *is* that agent: for one case it behaves as an
honest harness, for another it attacks. Every attack must end with **no forged pass published** and a
**specific code** — a refusal naming the attack, or the attacked case exported as not passed.

The act stand-ins keep the artifact store in a directory (act/, docs/local.md); an attack that writes
there directly stands for a process of the agent that reached the Actions runtime token, which can upload
(and replace) artifacts of the run under any name. The GitHub test server reports the run's jobs and
artifacts from that store, as the Actions API would.

Attacks that need a process outliving its job (act runs every job as a process tree on this host and
ends it with the job) are covered below the template, in tests/adversarial/test_worker_identity.py (an
artifact replaced after its worker's upload, in its last second or later) and tests/test_upload.py (a
receipt or result forged between jobs).
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

# The honest harness of test_act_e2e, plus one attack chosen by ATTACK for the attacker's case.
AGENT = '''\
"""An agent under test: honest for every case but one, whose worker attacks the evidence (ATTACK)."""
import json
import os
import time

ATTACK = {attack!r}
VICTIM = {victim!r}
ATTACKER = {attacker!r}
row = json.loads(os.environ["TESTOPS_EVIDENCE_CASE_JSON"])
key = row["key"]
passed = key != VICTIM
digest = os.environ["TESTOPS_EVIDENCE_SELECTION_SHA256"]
cells = os.path.dirname(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"])
store = os.environ["TESTOPS_EVIDENCE_ACT_ARTIFACTS"]  # what the runtime token reaches


def cell(case, ok, selection=digest, attempt=None):
    checks = json.loads(os.environ["TESTOPS_EVIDENCE_CASE_JSON"])["checks"] if case == key else CHECKS[case]
    return {{"schema": "testops-evidence/cell-result/v2", "selection-sha256": selection, "case": case,
            "attempt-id": attempt or f"{{os.environ['TESTOPS_EVIDENCE_ATTEMPT_ID']}}-{{case}}",
            "disposition": "passed" if ok else "behavior_failure", "started-at": "2026-12-01T10:00:00Z",
            "finished-at": "2026-12-01T10:01:00Z", "source-sha": os.environ["TESTOPS_EVIDENCE_SOURCE_SHA"],
            "profile": json.loads(os.environ["TESTOPS_EVIDENCE_PROFILE"]),
            "checks": [{{"id": c, "passed": ok or i > 0}} for i, c in enumerate(sorted(checks))]}}


CHECKS = {checks!r}
document = cell(key, passed)
if key == VICTIM and ATTACK == "replay":
    # A passed cell saved from an earlier run of the same commit and profile: another selection's digest.
    document = cell(key, True, selection="0" * 64)
if key == VICTIM and ATTACK == "disabled-tests":
    # A report whose tests never ran (tst / GoogleTest markings) instead of a cell: export adapts it.
    os.makedirs(os.path.join(cells, key))
    tests = "".join(f'<testcase name="test_{{c.replace("-", "_")}}" status="notrun" result="suppressed"/>'
                    for c in row["checks"])
    with open(os.path.join(cells, key, "report.xml"), "w") as handle:
        handle.write(f"<testsuite name='agent'>{{tests}}</testsuite>")
    document = None
if document is not None:
    with open(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"], "w") as handle:
        json.dump(document, handle)

if key == ATTACKER and ATTACK == "write-other-cell":
    with open(os.path.join(cells, VICTIM + ".json"), "w") as handle:
        json.dump(cell(VICTIM, True), handle)
if key == ATTACKER and ATTACK == "forge-allure-results":
    results = os.path.join(cells, VICTIM, "allure-results")
    os.makedirs(results)
    for check in CHECKS[VICTIM]:
        with open(os.path.join(results, f"{{check}}-result.json"), "w") as handle:
            json.dump({{"name": f"test_{{check.replace('-', '_')}}", "status": "passed", "stage": "finished",
                        "labels": [{{"name": "case", "value": VICTIM}}]}}, handle)
if key == ATTACKER and ATTACK == "squat-artifact":
    # Upload first under the victim worker's artifact name, with a passed cell for the victim.
    name = "testops-evidence-cells-1-native-" + VICTIM
    os.makedirs(os.path.join(store, name))
    with open(os.path.join(store, name, VICTIM + ".json"), "w") as handle:
        json.dump(cell(VICTIM, True, attempt="squatted"), handle)
    with open(os.path.join(store, name, "testops-evidence-worker.json"), "w") as handle:
        json.dump({{"schema": "testops-evidence/worker-record/v1", "job": "native-" + VICTIM,
                    "selection-sha256": digest, "cases": [VICTIM]}}, handle)
    os.makedirs(os.path.join(store, ".meta"), exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(os.path.join(store, ".meta", name + ".json"), "w") as handle:
        json.dump({{"name": name, "id": 77777, "created_at": stamp}}, handle)
if key == ATTACKER and ATTACK == "edit-selection":
    # Rewrite the selection artifact the later jobs download (it is re-hashed against the travelled digest).
    path = os.path.join(store, "testops-evidence-selection-1", "testops-evidence-selection.json")
    text = open(path).read()
    with open(path, "w") as handle:
        handle.write(text.replace('"full-plan":true', '"full-plan":false'))
print("case", key, "attack", ATTACK if key in (ATTACKER, VICTIM) else "-")
'''

CHECKS = {key: checks for key, (_lane, checks, _ok) in CASES.items()}


def attack(act_binary: Path, tmp_path: Path, github: Any, name: str) -> ActRun:
    agent = AGENT.format(attack=name, victim=VICTIM, attacker=ATTACKER, checks=CHECKS)
    return run_act(act_binary, tmp_path, github, case_command=agent)


def published_passes(result: ActRun) -> dict[str, str]:
    """Every result the publication holds, by case: what an auditor or TestOps would read."""
    found: dict[str, str] = {}
    for path in result.artifacts.glob("testops-evidence-results-1/allure-results/*-result.json"):
        document = json.loads(path.read_text())
        found[document["fullName"].rsplit("/", 1)[-1]] = document["status"]
    return found


def assert_no_forged_pass(result: ActRun) -> None:
    assert published_passes(result).get(VICTIM) != "passed", result.log[-4000:]
    assert result.outputs.get("all-passed") != "true"


def refused_with(result: ActRun, code: str, job_mode: str) -> None:
    assert_no_forged_pass(result)
    assert result.outputs.get("published") != "true", result.outputs
    assert code in summaries_of(result, job_mode), (job_mode, sorted(result.summaries), result.log[-4000:])


def test_a_worker_that_writes_another_cases_cell_refuses_the_export(act_binary: Path, tmp_path: Path,
                                                                     github: Any) -> None:
    """Issue 12, failure 1 — before: the forged file replaced the real failing cell, the run was green."""
    result = attack(act_binary, tmp_path, github, "write-other-cell")
    refused_with(result, "export.cell_origin", "export-export")


def test_a_cell_replayed_from_an_earlier_run_refuses_the_export(act_binary: Path, tmp_path: Path,
                                                                github: Any) -> None:
    """Issue 12, failure 2 — before: a saved passed cell of the same commit and profile was exported."""
    result = attack(act_binary, tmp_path, github, "replay")
    refused_with(result, "export.cell_selection", "export-export")


def test_an_artifact_uploaded_under_another_workers_name_refuses_the_export(act_binary: Path, tmp_path: Path,
                                                                            github: Any) -> None:
    """Name squatting with the runtime token: the victim's own upload fails; collect-cells sees it."""
    result = attack(act_binary, tmp_path, github, "squat-artifact")
    meta = json.loads((result.artifacts / ".meta" / f"testops-evidence-cells-1-native-{VICTIM}.json").read_text())
    assert meta["id"] == 77777  # the attacker's upload came first: the victim's own upload failed
    refused_with(result, "workers.artifact_origin", "export-collect-cells")


def test_a_selection_edited_between_jobs_is_refused(act_binary: Path, tmp_path: Path, github: Any) -> None:
    result = attack(act_binary, tmp_path, github, "edit-selection")
    refused_with(result, "selection.digest", "export-collect-cells")


def test_allure_results_forged_for_another_case_refuse_the_export(act_binary: Path, tmp_path: Path,
                                                                  github: Any) -> None:
    result = attack(act_binary, tmp_path, github, "forge-allure-results")
    refused_with(result, "export.cell_origin", "export-export")


def test_a_report_of_tests_that_never_ran_is_not_a_pass(act_binary: Path, tmp_path: Path, github: Any) -> None:
    """Issue 12, failure 4 — before: status="notrun" result="suppressed" test cases were read as passed."""
    result = attack(act_binary, tmp_path, github, "disabled-tests")
    assert_no_forged_pass(result)
    assert published_passes(result)[VICTIM] == "broken"
    # The worker job failed (no cell result); the export and the publication still ran and say why.
    assert VICTIM in summaries_of(result, "publish-verify")
    export = summaries_of(result, "export-export")
    row = next(line for line in export.splitlines() if f"`{VICTIM}`" in line)
    assert "broken" in row and ("Infrastructure failure" in row or "Not recorded" in row), row
