"""pages: a verified publication's report on a GitHub Pages site, retention, a hostile branch, and the campaign
template's fetch and push scripts against a real git remote (a bare repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from evidence_support import (
    REPO,
    RUN_ID,
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import PhaseRun, left_out, run_mode
from testops_evidence.campaign.compiled import compiled_bytes, compiled_path
from testops_evidence.contract import load_contract
from testops_evidence.publication import site

ALLURE = REPO / ".tools" / "allure" / "node_modules" / ".bin" / "allure"
pytestmark = pytest.mark.skipif(not ALLURE.exists() or shutil.which("node") is None or left_out("allure") is not None,
                                reason=left_out("allure") or "Allure Report 3 is not installed: run `bash scripts/setup.sh` (needs npm)")
CONTRACT = small_contract()


def publication(tmp_path: Path, run_id: int = RUN_ID, attempt: int = 1, *,
                yaml: bool = False) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A verified files-backend publication with its report, of run ``run_id``: (its directory, the options,
    the runner variables of that run). ``yaml``: the contract is a YAML file (JSON text is YAML 1.2), and the
    selection has select's compiled form beside it."""
    work = tmp_path / f"run-{run_id}-{attempt}"
    work.mkdir()
    env = actions_env(GITHUB_RUN_ID=str(run_id), GITHUB_RUN_ATTEMPT=str(attempt))
    contract_path = write_contract(CONTRACT, tmp_path / ("contract.yml" if yaml else "contract.json"))
    contract = load_contract(contract_path) if yaml else CONTRACT
    selection, digest = make_selection(work, contract, env)
    compiled = compiled_bytes(contract)
    if compiled is not None:
        compiled_path(selection).write_bytes(compiled)
    write_cells(work / "cells", [cell(CONTRACT, "get-task-context", attempt=f"{run_id}-{attempt}-a"),
                                 cell(CONTRACT, "budget-stop", disposition="behavior_failure",
                                      failed=["spend-reported"], attempt=f"{run_id}-{attempt}-b")], digest)
    options = {"contract": str(contract_path),
               "results-dir": str(work / "allure-results"), "state-dir": str(work / "state"), "backend": "files"}
    options.update({"selection-path": str(selection), "selection-sha256": digest})
    export = run_mode("export", work, {**options, "cell-results": str(work / "cells")}, env, new_uuid=uuid_factory())
    assert export.exit_code == 1, export.summary
    options["receipt-sha256"] = export.outputs["receipt-sha256"]
    upload = run_mode("upload", work, {**options, "report": "always"}, env)
    assert upload.exit_code == 0, upload.summary + upload.log
    options["report-tree-sha256"] = upload.outputs["report-tree-sha256"]
    return Path(upload.outputs["publication-dir"]), options, env


def pages(tmp_path: Path, published: Path, options: dict[str, str], env: dict[str, str], site_dir: Path,
          **extra: str) -> PhaseRun:
    return run_mode("pages", tmp_path, {"contract": options["contract"], "state-dir": str(tmp_path / "pages-state"),
                                        "pages-dir": str(site_dir), "publication-dir": str(published),
                                        "receipt-sha256": options["receipt-sha256"],
                                        "report-tree-sha256": options["report-tree-sha256"], **extra}, env)


def test_the_site_keeps_the_newest_reports_with_indexes_and_history(tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    runs = [publication(tmp_path, RUN_ID + number) for number in range(3)]
    for number, (published, options, env) in enumerate(runs):
        run = pages(tmp_path, published, options, env, site_dir, **{"pages-keep": "2"})
        assert run.exit_code == 0, run.summary + run.log
        assert run.outputs["pages-url"] == (f"https://acme.github.io/agents/agent-protocol/{RUN_ID + number}-1"
                                            "/index.html")
    campaign = site_dir / "agent-protocol"
    assert sorted(p.name for p in campaign.iterdir()) == sorted(
        [f"{RUN_ID + 1}-1", f"{RUN_ID + 2}-1", "badge.svg", "history.jsonl", "index.html", "reports.json"])
    # The campaign's badge is the newest run's, drawn as upload drew the publication's; each run keeps its own.
    assert (campaign / "badge.svg").read_bytes() == (runs[2][0] / "badge.svg").read_bytes()
    assert (campaign / f"{RUN_ID + 2}-1" / "badge.svg").read_bytes() == (runs[2][0] / "badge.svg").read_bytes()
    assert json.loads(run.outputs["pages-removed"]) == [f"{RUN_ID}-1"] and run.outputs["pages-kept"] == "2"
    index = json.loads((campaign / "reports.json").read_text())
    assert [r["run-id"] for r in index["reports"]] == [RUN_ID + 2, RUN_ID + 1]  # newest first
    assert index["reports"][0]["counts"] == {"total": 3, "passed": 1, "failed": 1, "broken": 1}
    stats = json.loads((campaign / f"{RUN_ID + 2}-1" / "summary.json").read_text())["stats"]
    assert {k: stats.get(k, 0) for k in ("total", "passed", "failed", "broken")} == index["reports"][0]["counts"]
    assert (site_dir / ".nojekyll").exists() and "agent-protocol/index.html" in (site_dir / "index.html").read_text()
    assert f"{RUN_ID + 2}-1/index.html" in (campaign / "index.html").read_text()
    assert (campaign / "history.jsonl").read_bytes() == (runs[2][0] / "history.jsonl").read_bytes()

    # The same attempt again (a re-run of the pages job) replaces its report, never duplicates it.
    again = pages(tmp_path, runs[2][0], runs[2][1], runs[2][2], site_dir, **{"pages-keep": "2"})
    assert again.exit_code == 0 and json.loads(again.outputs["pages-removed"]) == []
    assert len(json.loads((campaign / "reports.json").read_text())["reports"]) == 2


def test_pages_builds_a_yaml_contract_from_selects_compiled_form(tmp_path: Path) -> None:
    # The template gives pages the selection and its digest: the campaign's YAML contract is not parsed again.
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    published, options, env = publication(tmp_path, yaml=True)
    selection = {"selection-path": options["selection-path"], "selection-sha256": options["selection-sha256"]}
    run = pages(tmp_path, published, options, env, site_dir, **selection)
    assert run.exit_code == 0, run.summary + run.log
    assert "contract: compiled by select" in run.log
    assert "| contract | compiled by select, bound by digest |" in run.summary
    # Without the digest (a hand-written workflow), or with a digest the selection does not hash to, pages
    # parses the contract: the same outputs, the same site.
    index = (site_dir / "agent-protocol" / "reports.json").read_bytes()
    for extra in ({}, {**selection, "selection-sha256": "0" * 64}):
        other = pages(tmp_path, published, options, env, site_dir, **extra)
        assert other.exit_code == 0, other.summary + other.log
        assert "compiled form not used" in other.log
        assert f"| contract | parsed from `{options['contract']}` |" in other.summary
        assert {**other.outputs, "pages-removed": "[]"} == {**run.outputs, "pages-removed": "[]"}
        assert (site_dir / "agent-protocol" / "reports.json").read_bytes() == index
    # A malformed digest is a mistake in the workflow: refused, nothing written.
    before = sorted(p.relative_to(site_dir) for p in site_dir.rglob("*"))
    refused = pages(tmp_path, published, options, env, site_dir, **{**selection, "selection-sha256": "0" * 63})
    assert refused.exit_code == 2 and refused.failure()["code"] == "input.selection-sha256", refused.summary
    assert sorted(p.relative_to(site_dir) for p in site_dir.rglob("*")) == before


def test_a_publication_that_differs_from_its_receipt_is_not_put_on_pages(tmp_path: Path) -> None:
    published, options, env = publication(tmp_path)
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    summary_json = published / "allure-report" / "summary.json"
    document = json.loads(summary_json.read_text())
    document["stats"]["passed"] = 3  # a report that says all passed
    summary_json.write_text(json.dumps(document))
    run = pages(tmp_path, published, options, env, site_dir)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "pages.publication")
    result = next((published / "allure-results").glob("*-result.json"))
    result.write_text(result.read_text().replace('"failed"', '"passed"'))
    run = pages(tmp_path, published, options, env, site_dir)
    assert (run.exit_code, run.outputs["error-code"]) == (3, "pages.publication")
    forged = pages(tmp_path, published, {**options, "receipt-sha256": "0" * 64}, env, site_dir)
    assert forged.outputs["error-code"] == "export.receipt_digest"  # not the receipt export wrote
    other_run = pages(tmp_path, published, options, actions_env(GITHUB_RUN_ID="77"), site_dir)
    assert other_run.outputs["error-code"] == "selection.context"  # another run's publication
    assert list(site_dir.iterdir()) == []


@pytest.mark.parametrize("hostile", ["campaign-link", "index", "report-link"])
def test_a_hostile_pages_branch_is_refused(tmp_path: Path, hostile: str) -> None:
    published, options, env = publication(tmp_path)
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    if hostile == "campaign-link":
        (site_dir / "agent-protocol").symlink_to(outside)  # would make us write outside the checkout
    elif hostile == "index":
        (site_dir / "agent-protocol").mkdir()
        (site_dir / "agent-protocol" / "reports.json").write_text(json.dumps(
            {"schema": site.INDEX_SCHEMA, "reports": [{"run-id": 1, "attempt": 1, "run-number": 1,
                                                         "created": "x", "counts": {}, "path": "../../etc"}]})
            .replace('"run-id": 1', '"run-id": "1/../../x"'))
    else:
        (published / "allure-report" / "linked").symlink_to("/etc/hostname")
    run = pages(tmp_path, published, options, env, site_dir)
    # A link in the report is refused with the publication, by the walk that checks its manifest.
    code = "io.unsafe_path" if hostile == "report-link" else "pages.site"
    assert (run.exit_code, run.outputs["error-code"]) == (3, code), run.summary
    assert list(outside.iterdir()) == []


def test_the_index_pages_escape_what_earlier_runs_wrote() -> None:
    entry = site.Entry(run_id=5, attempt=1, run_number=5, created='<script>alert(1)</script>"', counts={"total": 1})
    page = site.campaign_page("agent-protocol", [entry])
    assert "<script>" not in page and "&lt;script&gt;" in page


# --- the campaign template's scripts, against a real git remote --------------------------------------------------


def pages_scripts() -> dict[str, dict[str, Any]]:
    steps = YAML(typ="safe").load((REPO / "workflows-templates" / "campaign.yml").read_text())["jobs"]["pages"]["steps"]
    return {step["name"]: step for step in steps if "name" in step}


def run_script(step: dict[str, Any], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", **env}
    return subprocess.run(["bash", "-c", step["run"]], cwd=cwd, env=full, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("history", ["squash", "keep"])
def test_the_template_fetches_and_pushes_a_pages_branch_whose_size_stays_bounded(tmp_path: Path,
                                                                                history: str) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    scripts = pages_scripts()
    variables = {"REMOTE": f"file://{remote}", "BRANCH": "gh-pages", "TOKEN": "ghs_pages_sentinel_token",
                 "HISTORY": history, "MESSAGE": "testops-evidence: report"}
    runs = [publication(tmp_path, RUN_ID + number) for number in range(3)]
    for number, (published, options, env) in enumerate(runs):
        job = tmp_path / f"job-{number}"
        job.mkdir()
        fetched = run_script(scripts["fetch the Pages branch"], job, **variables)
        assert fetched.returncode == 0, fetched.stderr
        assert ("does not exist yet" in fetched.stdout) == (number == 0)
        run = pages(job, published, options, env, job / "testops-evidence-pages", **{"pages-keep": "2"})
        assert run.exit_code == 0, run.summary
        pushed = run_script(scripts["push the Pages branch"], job, **variables)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert "ghs_pages_sentinel_token" not in (job / "testops-evidence-pages" / ".git" / "config").read_text()
    listing = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "--name-only", "gh-pages",
                              "agent-protocol/"], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(listing) == sorted(f"agent-protocol/{name}" for name in (
        f"{RUN_ID + 1}-1", f"{RUN_ID + 2}-1", "badge.svg", "history.jsonl", "index.html", "reports.json"))
    commits = subprocess.run(["git", "--git-dir", str(remote), "rev-list", "--count", "gh-pages"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert commits == ("1" if history == "squash" else "3")
    # squash: the removed report is gone from the branch entirely; keep: its history still holds it.
    removed = subprocess.run(["git", "--git-dir", str(remote), "log", "--all", "--format=%H", "--",
                              f"agent-protocol/{RUN_ID}-1"], capture_output=True, text=True, check=True).stdout.split()
    assert (len(removed) == 0) == (history == "squash")


def test_a_push_never_lands_over_a_branch_that_moved_meanwhile(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    scripts = pages_scripts()
    variables = {"REMOTE": f"file://{remote}", "BRANCH": "gh-pages", "TOKEN": "t", "HISTORY": "squash",
                 "MESSAGE": "m"}
    published, options, env = publication(tmp_path)
    job = tmp_path / "job"
    job.mkdir()
    assert run_script(scripts["fetch the Pages branch"], job, **variables).returncode == 0
    assert pages(job, published, options, env, job / "testops-evidence-pages").exit_code == 0
    # Another job pushed to the branch after this one fetched it (the branch did not exist then).
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "x").write_text("x")
    subprocess.run(["git", "-C", str(other), "add", "x"], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.name=o", "-c", "user.email=o@example.invalid", "commit",
                    "-q", "-m", "other"], check=True)
    subprocess.run(["git", "-C", str(other), "push", "-q", str(remote), "HEAD:refs/heads/gh-pages"], check=True)
    pushed = run_script(scripts["push the Pages branch"], job, **variables)
    assert pushed.returncode != 0 and "stale info" in pushed.stderr + pushed.stdout


def test_an_unreachable_remote_fails_the_fetch_instead_of_starting_a_new_branch(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    fetched = run_script(pages_scripts()["fetch the Pages branch"], job, REMOTE=f"file://{tmp_path}/absent.git",
                         BRANCH="gh-pages", TOKEN="t")
    assert fetched.returncode != 0 and "does not exist yet" not in fetched.stdout


def test_a_replaced_selection_artifact_never_reaches_the_pages_checkout(tmp_path: Path) -> None:
    # A worker can replace the selection artifact (the runtime token uploads with overwrite), with any files in
    # it. The pages job extracts it where the template's download step says, then runs git in the Pages checkout
    # with its contents: write token in the environment: a `.git/config` planted there would survive `git init`
    # and run its core.fsmonitor with that token. Extracted into a directory of its own, it reaches nothing.
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    steps = YAML(typ="safe").load((REPO / "workflows-templates" / "campaign.yml").read_text())["jobs"]["pages"]["steps"]
    download = next(step for step in steps if str(step.get("uses", "")).startswith("actions/download-artifact@")
                    and step["with"]["artifact-ids"] == "${{ needs.select.outputs.selection-artifact-id }}")
    scripts = pages_scripts()
    variables = {"REMOTE": f"file://{remote}", "BRANCH": "gh-pages", "TOKEN": "ghs_pages_sentinel_token",
                 "HISTORY": "keep", "MESSAGE": "m"}
    published, options, env = publication(tmp_path)
    job = tmp_path / "job"
    job.mkdir()
    # The branch exists (git checks it out, which reads the index through core.fsmonitor).
    first = tmp_path / "first"
    first.mkdir()
    assert run_script(scripts["fetch the Pages branch"], first, **variables).returncode == 0
    assert pages(first, published, options, env, first / "testops-evidence-pages").exit_code == 0
    assert run_script(scripts["push the Pages branch"], first, **variables).returncode == 0
    # Where the template extracts it: its own directory under the runner's temp directory (outside the job's
    # workspace); were it the workspace, the planted files would land in the Pages checkout.
    runner_temp = tmp_path / "runner-temp"
    extracted = Path(download["with"]["path"].replace("${{ runner.temp }}", str(runner_temp)))
    assert runner_temp in extracted.parents
    planted = extracted / "testops-evidence-pages" / ".git" / "config"
    planted.parent.mkdir(parents=True)
    planted.write_text('[core]\n\tfsmonitor = "echo \\"$TOKEN\\" > ../stolen; false"\n')
    (extracted / "testops-evidence-pages" / "planted.html").write_text("<script>alert(1)</script>")
    fetched = run_script(scripts["fetch the Pages branch"], job, **variables)
    assert fetched.returncode == 0, fetched.stderr
    run = pages(job, published, options, env, job / "testops-evidence-pages")
    assert run.exit_code == 0, run.summary
    pushed = run_script(scripts["push the Pages branch"], job, **variables)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert not list(tmp_path.rglob("stolen"))
    listing = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "gh-pages"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "planted.html" not in listing and listing
