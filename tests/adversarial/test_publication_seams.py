"""Red team on the seams of issue 23's exact sets, as the agent under evaluation would try them (redteam-a).

An auditor downloads a files-backend publication artifact (results, receipt, manifest, HTML report, history, and
the statement the template adds) and runs ``verify-attestation --published .`` on it. Before this module the
statement bound the receipt and the results directory only: a report page, a history or any file beside them
could be changed or added — by a worker that re-uploaded the artifact under its name, or by anyone holding the
downloaded copy — and the check said "The attestation holds" over a directory whose report showed a forged
pass. Now a files-backend statement names the publication's manifest, which binds every file of the directory,
and a statement without one (TestOps) binds a directory of the receipt and the results alone."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from helpers import run_mode
from test_upload import needs_allure, phase

FORGED_PAGE = "<html><body><h1>10 passed, 0 failed</h1></body></html>"


def attested_publication(tmp_path: Path, exported: dict[str, str]) -> tuple[Path, Path]:
    """The publication as the campaign template uploads it: upload's directory with verify's statement and
    predicate copied in. Returns the directory and the statement inside it."""
    assert phase("upload", tmp_path, exported).exit_code == 0
    verify = phase("verify", tmp_path, exported)
    assert verify.exit_code == 1, verify.summary  # complete, not every case passed
    artifact = tmp_path / "downloaded-publication"
    shutil.copytree(tmp_path / "state" / "published", artifact)
    for name in ("attestation-path", "attestation-predicate-path"):
        shutil.copy(verify.outputs[name], artifact)
    for folder in (artifact, *[p for p in artifact.rglob("*") if p.is_dir()]):
        folder.chmod(0o700)
    return artifact, artifact / "publication.intoto.json"


def audit(tmp_path: Path, statement: Path, published: Path) -> tuple[int, str | None, str]:
    check = run_mode("verify-attestation", tmp_path, {"attestation": str(statement), "published": str(published)},
                     actions=False)
    code = check.outputs.get("error-code")
    return check.exit_code, code, check.failure()["field"] if code else ""


def test_the_downloaded_publication_holds_with_its_statement_beside_it(tmp_path: Path,
                                                                      exported: dict[str, str]) -> None:
    artifact, statement = attested_publication(tmp_path, exported)
    names = {s["name"] for s in json.loads(statement.read_text())["subject"]}
    assert "testops-evidence-tree.json" in names  # the manifest is attested: it binds the whole directory
    assert audit(tmp_path, statement, artifact)[:2] == (0, None)
    # Only the statement's two files are tolerated beside the manifest's, and only as files.
    (artifact / "publication.predicate.json").unlink()
    (artifact / "publication.predicate.json").mkdir()
    (artifact / "publication.predicate.json" / "index.html").write_text(FORGED_PAGE)
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "publication.predicate.json/index.html")


def test_a_report_page_added_to_an_attested_publication_is_refused(tmp_path: Path, exported: dict[str, str]) -> None:
    """Attack: a forged `allure-report/index.html` (every case passed) beside attested results. Held before."""
    artifact, statement = attested_publication(tmp_path, exported)
    (artifact / "allure-report").mkdir()
    (artifact / "allure-report" / "index.html").write_text(FORGED_PAGE)
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "allure-report/index.html")


def test_a_manifest_rewritten_to_list_a_forged_report_is_refused(tmp_path: Path, exported: dict[str, str]) -> None:
    """Attack: the forged page and a manifest that lists it: the manifest is not the one the statement names."""
    artifact, statement = attested_publication(tmp_path, exported)
    (artifact / "allure-report").mkdir()
    page = artifact / "allure-report" / "index.html"
    page.write_text(FORGED_PAGE)
    manifest = artifact / "testops-evidence-tree.json"
    document = json.loads(manifest.read_text())
    document["files"]["allure-report/index.html"] = hashlib.sha256(page.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(document))
    assert audit(tmp_path, statement, artifact) == (3, "attestation.mismatch", "testops-evidence-tree.json")


def test_a_second_results_directory_beside_the_attested_one_is_refused(tmp_path: Path,
                                                                       exported: dict[str, str]) -> None:
    """Attack: `allure-results-2/` with a passed twin, for an auditor who points Allure at the directory."""
    artifact, statement = attested_publication(tmp_path, exported)
    shutil.copytree(artifact / "allure-results", artifact / "allure-results-2")
    code = audit(tmp_path, statement, artifact)
    assert code[:2] == (3, "io.extra_file") and code[2].startswith("allure-results-2/"), code


def test_a_statement_without_a_manifest_binds_the_receipt_and_results_alone(tmp_path: Path,
                                                                            exported: dict[str, str]) -> None:
    """A statement that names no manifest (TestOps, or one written before manifests were attested) holds only for
    a directory of the receipt and the results (and the statement beside them): anything else is refused."""
    artifact, statement = attested_publication(tmp_path, exported)
    document = json.loads(statement.read_text())
    document["subject"] = [s for s in document["subject"] if s["name"] != "testops-evidence-tree.json"]
    statement.write_text(json.dumps(document))
    # Each file the manifest bound is now extra, named in order: the badge, then the manifest itself.
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "badge.svg")
    (artifact / "badge.svg").unlink()
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "testops-evidence-tree.json")
    (artifact / "testops-evidence-tree.json").unlink()
    assert audit(tmp_path, statement, artifact)[:2] == (0, None)
    (artifact / "index.html").write_text(FORGED_PAGE)
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "index.html")
    (artifact / "index.html").unlink()
    # The statement's own names beside the results are files, never a directory of anything.
    (artifact / "publication.predicate.json").unlink()
    (artifact / "publication.predicate.json").mkdir()
    (artifact / "publication.predicate.json" / "index.html").write_text(FORGED_PAGE)
    assert audit(tmp_path, statement, artifact) == (3, "io.extra_file", "publication.predicate.json/")


# --- the report history of an earlier run: bound to that run's publish job ------------------------------------


def forged_history(line: str) -> str:
    """An earlier report's history line with every case passed (what a worker of that run would upload)."""
    entry = json.loads(line)
    for result in entry.get("testResults", {}).values():
        result["status"] = "passed"
    entry["forged"] = True
    return json.dumps(entry) + "\n"


@needs_allure
@pytest.mark.parametrize("genuine", [True, False])
def test_a_history_a_worker_uploaded_under_a_matching_name_is_never_continued(tmp_path: Path,
                                                                               exported: dict[str, str],
                                                                               genuine: bool) -> None:
    """Attack: a worker of the earlier run reaches its runtime token and uploads
    `testops-evidence-history-<anything>` with every case passed: by name it is the newest history artifact of
    that run (or the only one, when that run's publish never ran), and the next report's trends and per-case
    history would show passes that never happened. Only the artifact the publish job recorded is continued."""
    from servers.github_server import GitHubServer
    from test_upload import RUN_ID, history_zip, recorded_history

    token = "ghs_history_sentinel_0123456789"
    first = phase("upload", tmp_path, {**exported, "report": "always", "state-dir": str(tmp_path / "first")})
    assert first.exit_code == 0, first.summary
    line = (tmp_path / "first" / "published" / "history.jsonl").read_text()
    with GitHubServer(token=token) as gh:
        gh.add_run("acme/agents", RUN_ID - 10, path=".github/workflows/agent-evals.yml", head_branch="main",
                   status="completed", conclusion="failure")
        if genuine:
            recorded_history(gh, RUN_ID - 10, gh.add_artifact(
                RUN_ID - 10, "testops-evidence-history-agent-protocol-new-1", history_zip(line)))
        forged = gh.add_artifact(RUN_ID - 10, "testops-evidence-history-zz-forged", history_zip(forged_history(line)))
        # The worker's own job may even record the forged upload: it is not the publish job.
        recorded_history(gh, RUN_ID - 10, forged, job="campaign / testops-evidence native-1")
        run = phase("upload", tmp_path, {**exported, "report": "auto", "state-dir": str(tmp_path / "second"),
                                         "history-artifact": "testops-evidence-history-*"},
                    GITHUB_API_URL=gh.api_url(), **{"INPUT_GITHUB-TOKEN": token})
    assert run.exit_code == 0, run.summary + run.log
    history = (tmp_path / "second" / "published" / "history.jsonl").read_text()
    assert '"forged"' not in history
    if genuine:
        assert len(history.splitlines()) == 2 and "testops-evidence-history-agent-protocol-new-1" in run.summary
    else:
        assert len(history.splitlines()) == 1
        assert "::warning title=upload.history::the history of earlier reports was left out (upload.history" in run.log


# --- the compare-with: previous baseline: bound to the earlier run's publish (or export) job -------------------


@pytest.mark.parametrize("genuine", [True, False])
def test_a_baseline_a_worker_uploaded_under_a_publication_name_is_never_compared_with(tmp_path: Path,
                                                                                      genuine: bool) -> None:
    """Attack: a worker of the earlier run uploads `testops-evidence-report-<campaign>-<anything>` holding a receipt
    forged for that run in which every case failed: as the newest artifact of that name it was the baseline, and
    this run's failures were no regressions. Only the artifact the publish job recorded is the baseline."""
    from evidence_support import cell
    from test_previous import EARLIER, REPOSITORY, WORKFLOW, document, earlier_export, select, zipped
    from test_selection_support import github_with_run
    from test_trials import contract_of

    contract = contract_of(document())
    keys = ("flaky", "steady", "human")
    for name in ("honest", "forged"):
        (tmp_path / name).mkdir()
    honest = earlier_export(tmp_path / "honest", contract, [cell(contract, key) for key in keys])
    forged = earlier_export(tmp_path / "forged", contract, [
        cell(contract, key, disposition="behavior_failure", failed=list(contract.case(key).checks)) for key in keys])
    with github_with_run() as github:
        github.add_run(REPOSITORY, EARLIER, path=WORKFLOW, head_branch="main", status="completed",
                       conclusion="failure")
        if genuine:
            artifact = github.add_artifact(EARLIER, f"testops-evidence-report-agent-protocol-{EARLIER}-1",
                                           zipped({"allure-results-receipt.json": honest.read_bytes()}))
            github.record_upload(EARLIER, artifact, job="campaign / publish", what="publication")
        planted = github.add_artifact(EARLIER, "testops-evidence-report-agent-protocol-zz-forged",
                                      zipped({"allure-results-receipt.json": forged.read_bytes()}))
        # The worker's own job may record its upload too: it is not the publish job.
        github.record_upload(EARLIER, planted, job="campaign / testops-evidence native-flaky", what="publication")
        run = select(tmp_path, github, contract, **{"compare-with": "previous"})
    assert run.exit_code == 0, run.summary
    baseline = json.loads((tmp_path / "out" / "selection.json").read_text())["baseline"]
    if genuine:
        assert (baseline["artifact"], baseline["comparable"]) == (
            f"testops-evidence-report-agent-protocol-{EARLIER}-1", True), baseline
    else:
        assert baseline["comparable"] is False and baseline["why-not"].startswith("selection.baseline"), baseline
        assert "::warning title=selection.baseline::" in run.log


# --- worker artifact names: case, look-alikes, another worker's id (held; kept as tests) ------------------------


@pytest.mark.parametrize(("name", "code"), [
    # Under the cell prefix, a job name no plan job has: another case, a look-alike letter, a trailing space.
    ("{prefix}-cells-1-{VICTIM}", "workers.unknown_artifact"),
    ("{prefix}-cells-1-{victim}\u0456", "workers.unknown_artifact"),
    ("{prefix}-cells-1-{victim} ", "workers.unknown_artifact"),
    # Outside the prefix as GitHub's names compare here (case-sensitively): never listed, never downloaded.
    ("{PREFIX}-cells-1-{victim}", None),
])
def test_a_worker_artifact_under_a_variant_of_another_workers_name_is_refused_or_ignored(
        tmp_path: Path, name: str, code: str | None) -> None:
    from adversarial.test_worker_identity import cells_of, honest_worker
    from evidence_support import HEAD_SHA, RUN_ID
    from servers.github_server import GitHubServer
    from test_collect_cells import JOBS, PREFIX, TOKEN, collect

    victim = next(iter(JOBS))
    with GitHubServer(token=TOKEN) as github:
        github.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        docs = [honest_worker(github, job) for job in JOBS]
        github.add_artifact(RUN_ID, name.format(prefix=PREFIX, PREFIX=PREFIX.upper(), victim=victim,
                                                VICTIM=victim.upper()), cells_of(victim, forged=True))
        run = collect(tmp_path, github)
    if code is None:
        assert run.exit_code == 0, run.summary
        assert run.outputs["artifact-ids"] == ",".join(str(doc["id"]) for doc in docs)  # the variant is not among them
    else:
        assert (run.exit_code, run.outputs.get("error-code")) == (3, code), run.summary


def test_a_workers_own_record_naming_another_workers_artifact_takes_nothing(tmp_path: Path) -> None:
    """The attacker makes its own job's report name the victim's artifact (id and digest): collect-cells binds an
    artifact to a job by the artifact's name first, so the attacker's own artifact is then the one that does not
    match its report (workers.artifact_replaced), and the victim's is still bound to the victim."""
    from adversarial.test_worker_identity import artifact_name, cells_of, honest_worker
    from evidence_support import HEAD_SHA, RUN_ID
    from servers.github_server import GitHubServer
    from test_collect_cells import JOBS, PREFIX, TOKEN, collect, upload_step
    from testops_evidence.campaign.workers import report_step_name

    victim, attacker, other = list(JOBS)
    with GitHubServer(token=TOKEN) as github:
        github.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        honest_worker(github, other)
        target = honest_worker(github, victim)
        github.add_artifact(RUN_ID, artifact_name(attacker), cells_of(attacker))
        github.add_job(RUN_ID, 1, f"campaign / {PREFIX} {attacker}", steps=[
            upload_step(), {"name": report_step_name(target["id"], str(target["digest"]).removeprefix("sha256:")),
                            "status": "completed", "conclusion": "success"}])
        run = collect(tmp_path, github)
    assert (run.exit_code, run.outputs.get("error-code")) == (3, "workers.artifact_replaced"), run.summary
    assert run.failure()["field"] == artifact_name(attacker)
