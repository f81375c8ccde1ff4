"""The documented local path (docs/local.md), and nothing else: a repository written from the page's files, the
action cloned where the page clones it, the page's own shell blocks run as written, act from the dev dependencies.

A module of its own: it speaks to no TestOps server, so it runs once, not once per TestOps generation.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_act_e2e import ACT, ACT_CACHE, ROOT, git

pytestmark = pytest.mark.act


@pytest.fixture(scope="module")
def act_binary() -> Path:
    if not ACT.exists():
        pytest.skip(f"act is not installed ({ACT}); install the dev dependencies: bash scripts/setup.sh")
    return ACT


LOCAL_DOC = ROOT / "docs" / "local.md"


def clone_of_this_checkout(into: Path) -> Path:
    """What `git clone` of the release tag gives: every file of this checkout that git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def documented_blocks() -> tuple[dict[str, str], list[str]]:
    """docs/local.md's files (code blocks whose first line is `# <path>`) and its bash blocks, in order."""
    text = LOCAL_DOC.read_text(encoding="utf-8")
    files, commands = {}, []
    for language, body in re.findall(r"```(\w+)\n(.*?)```", text, flags=re.DOTALL):
        first = body.split("\n", 1)[0]
        if language in ("yaml", "python") and re.fullmatch(r"# [\w./-]+", first):
            files[first[2:]] = body.split("\n", 1)[1]
        elif language == "bash":
            commands.append(body)
    return files, commands


def block(commands: list[str], marker: str) -> str:
    """The one shell block of docs/local.md that holds ``marker``."""
    found = [command for command in commands if marker in command]
    assert len(found) == 1, (marker, found)
    return found[0]


def documented_shell(act_binary: Path, home: Path, exported: dict[str, str] | None = None) -> dict[str, str]:
    """The user's shell: HOME where the page clones the action, act on PATH, no GitHub variables."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "RUNNER_", "INPUT_"))}
    env.update(HOME=str(home), PATH=f"{act_binary.parent}{os.pathsep}{env.get('PATH', '')}",
               # act's own cache (its tool cache, where the composite keeps its venv and the pinned Allure
               # Report); the page's command is unchanged, this only keeps the downloads between test runs.
               XDG_CACHE_HOME=str(ACT_CACHE / "xdg"),
               GIT_AUTHOR_NAME="e2e", GIT_AUTHOR_EMAIL="e2e@example.invalid",
               GIT_COMMITTER_NAME="e2e", GIT_COMMITTER_EMAIL="e2e@example.invalid", **(exported or {}))
    return env


def run_documented(act_binary: Path, tmp_path: Path, changes: dict[str, str] | None = None,
                   exported: dict[str, str] | None = None) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A repository written from docs/local.md alone (``changes`` replaces the text of some of its files, as a user
    edits the page's example), the action cloned where the page clones it, then the page's two shell blocks, from a
    shell that also exports ``exported``."""
    files, commands = documented_blocks()
    assert set(files) == {".github/testops-evidence.yml", ".github/workflows/agent-evals.yml", "evals/run_case.py"}
    # The page's shell blocks: clone the action, copy the template and commit, run act (re-check comes later).
    clone = block(commands, "git clone --depth 1 --branch v")
    copy_and_commit = block(commands, "workflows-templates/campaign.yml")
    act_command = block(commands, "act workflow_dispatch")
    assert clone.startswith("git clone --depth 1 --branch v")

    # `git clone --branch v<version>` of the action: this checkout's files, where the page clones them to.
    home = tmp_path / "home"
    clone_of_this_checkout(home / "testops-evidence")
    repo = tmp_path / "repo"
    for name, text in {**files, **(changes or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    env = documented_shell(act_binary, home, exported)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", copy_and_commit], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return repo, subprocess.run(["bash", "-euo", "pipefail", "-c", act_command], cwd=repo, env=env,
                                capture_output=True, text=True, check=False)


def test_the_documented_local_path_runs_the_campaign_in_a_fresh_repository(act_binary: Path, tmp_path: Path) -> None:
    """Acceptance (issue 15): a repository written from docs/local.md alone, the template run with the page's exact
    act command, produces the publication artifact whose HTML report's statistics equal the receipt."""
    repo, done = run_documented(act_binary, tmp_path)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-8000:]

    artifacts = repo / ".act-artifacts"
    publication = artifacts / "testops-evidence-report-first-campaign-1-1"
    assert sorted(p.name for p in publication.iterdir()) == [
        "allure-report", "allure-results", "allure-results-receipt.json", "badge.svg", "history.jsonl",
        "publication.intoto.json", "publication.predicate.json", "testops-evidence-tree.json"]
    assert "1/2 passed, 1 failed" in (publication / "badge.svg").read_text()
    receipt = json.loads((publication / "allure-results-receipt.json").read_text())
    assert receipt["counts"] == {"total": 2, "passed": 1, "failed": 1, "broken": 0}
    # The statement verify wrote travels with what it attests, and re-checks against the artifact alone, with the
    # page's own command (the CLI installed as docs/install.md says: here, this checkout's).
    recheck = block(documented_blocks()[1], "verify-attestation")
    assert "verify-attestation" in recheck
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "INPUT_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    audited = subprocess.run(["bash", "-euo", "pipefail", "-c", recheck], cwd=repo, env=env, capture_output=True,
                             text=True, check=False)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert "files re-hashed" in audited.stdout
    assert receipt["context"]["local"] is True  # marked local, from git
    assert receipt["context"]["head-sha"] == git(repo, "rev-parse", "HEAD")
    stats = json.loads((publication / "allure-report" / "summary.json").read_text())["stats"]
    assert {key: stats.get(key, 0) for key in receipt["counts"]} == receipt["counts"]
    for result in (publication / "allure-results").glob("*-result.json"):
        labels = {label["name"]: label["value"] for label in json.loads(result.read_text())["labels"]}
        assert labels["host"] == "local"
    assert not list(artifacts.glob("testops-evidence-failure-*"))
    assert "Local rehearsal context" in log  # guard's summary, as act prints it


def test_a_refusal_on_the_documented_local_path_leaves_the_failure_artifact_and_publishes_nothing(
        act_binary: Path, tmp_path: Path) -> None:
    """Acceptance (issue 15): the page's example with a case command that replays a cell of another run (its
    selection digest is not this run's): export refuses the whole export, its job keeps failure.json and the step
    summaries as the artifact docs/local.md names, and nothing is published."""
    files, _ = documented_blocks()
    original = files["evals/run_case.py"]
    travelled = '"selection-sha256": os.environ["TESTOPS_EVIDENCE_SELECTION_SHA256"],'
    assert travelled in original
    stale = hashlib.sha256(b"the selection of an earlier run").hexdigest()
    repo, done = run_documented(act_binary, tmp_path, {
        "evals/run_case.py": original.replace(travelled, f'"selection-sha256": "{stale}",')})
    log = done.stdout + done.stderr
    assert done.returncode != 0, log[-8000:]

    artifacts = repo / ".act-artifacts"
    failure_dir = artifacts / "testops-evidence-failure-export-1"
    assert failure_dir.is_dir(), sorted(p.name for p in artifacts.iterdir())
    failure = json.loads((failure_dir / "failure.json").read_text())
    assert (failure["mode"], failure["code"], failure["exit-code"]) == ("export", "export.cell_selection", 3)
    assert stale in json.dumps(failure)  # the refusal names the digest it found
    summaries = {path.name: path.read_text() for path in (failure_dir / "summaries").glob("*.md")}
    assert "`export.cell_selection`" in summaries["export.md"]
    # Only the export job failed; nothing reached a publication.
    assert sorted(p.name for p in artifacts.glob("testops-evidence-failure-*")) == ["testops-evidence-failure-export-1"]
    assert not list(artifacts.glob("testops-evidence-report-*"))
    assert not list(artifacts.glob("testops-evidence-results-*"))


def test_a_testops_token_in_the_shell_that_starts_act_is_refused_and_kept_out_of_every_artifact(
        act_binary: Path, tmp_path: Path) -> None:
    """act's host execution hands every job the environment of the shell that started it (docs/local.md says so):
    a TestOps token exported there reaches the worker jobs, which refuse to run beside it, as on GitHub, and the
    token reaches none of the artifacts the run keeps."""
    token = "testops-local-shell-token-7c2e90"
    repo, done = run_documented(act_binary, tmp_path, exported={"ALLURE_TOKEN": token})
    log = done.stdout + done.stderr
    assert done.returncode != 0, log[-8000:]
    artifacts = repo / ".act-artifacts"
    refused = sorted(artifacts.glob("testops-evidence-failure-native-*"))
    assert refused, sorted(p.name for p in artifacts.iterdir())
    for directory in refused:
        failure = json.loads((directory / "failure.json").read_text())
        assert (failure["code"], failure["exit-code"]) == ("worker.token_present", 3), failure
    assert not list(artifacts.glob("testops-evidence-report-*"))
    for path in artifacts.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(encoding="utf-8", errors="replace"), path


def test_the_adopter_example_runs_under_act_exactly_as_docs_local_md_says(act_binary: Path, tmp_path: Path) -> None:
    """Issue 27 item 6: examples/adopter/ copied as the page says (a fresh git repository beside the action's clone),
    the template copied and committed with the page's block, then the page's act command unchanged. Its pytest suite
    writes JUnit, `cell --junit` turns it into each case's cell: the failing test's case is reported failed, the
    others passed, and the files-backend publication holds the HTML report. A second run, as the page warns, stops
    at its first upload and says to remove .act-artifacts/."""
    _, commands = documented_blocks()
    adopt = block(commands, "examples/adopter")
    copy_and_commit = block(commands, "workflows-templates/campaign.yml")
    act_command = block(commands, "act workflow_dispatch")
    home = tmp_path / "home"
    clone_of_this_checkout(home / "testops-evidence")
    env = documented_shell(act_binary, home)
    made = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{adopt}\n{copy_and_commit}"], cwd=home, env=env,
                          capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stdout + made.stderr
    repo = home / "agent-evals"
    assert git(repo, "status", "--porcelain") == ""  # everything the example holds is committed

    done = subprocess.run(["bash", "-euo", "pipefail", "-c", act_command], cwd=repo, env=env, capture_output=True,
                          text=True, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-8000:]  # the caller sets fail-on-failed-cases: false
    artifacts = repo / ".act-artifacts"
    assert not list(artifacts.glob("testops-evidence-failure-*")), sorted(p.name for p in artifacts.iterdir())
    publication = artifacts / "testops-evidence-report-adopter-1-1"
    receipt = json.loads((publication / "allure-results-receipt.json").read_text())
    assert receipt["counts"] == {"total": 3, "passed": 2, "failed": 1, "broken": 0}
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt["results"]}
    assert statuses == {"order-total": ("failed", "behavior_failure"), "refund-policy": ("passed", "passed"),
                        "greeting": ("passed", "passed")}
    assert receipt["context"]["local"] is True and receipt["context"]["head-sha"] == git(repo, "rev-parse", "HEAD")
    # Each cell came from pytest's JUnit report through `cell --junit`, in the worker job that ran the case.
    cell = json.loads((artifacts / "testops-evidence-cells-1-native-order-total" / "order-total.json").read_text())
    assert {c["id"]: c["passed"] for c in cell["checks"]} == {"sums-lines": True, "applies-discount": False}
    assert [a["path"] for a in cell["artifacts"]] == ["junit.xml"]
    assert cell["message"].startswith("adapted from junit: 2 test(s) mapped to 2 check(s)")
    assert (publication / "allure-report" / "index.html").is_file()
    stats = json.loads((publication / "allure-report" / "summary.json").read_text())["stats"]
    assert {key: stats.get(key, 0) for key in receipt["counts"]} == receipt["counts"]
    # act runs the lane's three jobs one at a time whatever the contract's max-parallel (2) says: the select
    # step's summary says so (act prints it in its log).
    assert "Under act the contract's `max-parallel` does not apply" in log

    again = subprocess.run(["bash", "-euo", "pipefail", "-c", act_command], cwd=repo, env=env, capture_output=True,
                           text=True, check=False)
    second = again.stdout + again.stderr
    assert again.returncode != 0, second[-4000:]
    assert "already exists" in second and f"remove {artifacts} and run act again" in second, second[-4000:]
