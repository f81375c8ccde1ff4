"""Every shell command the docs give a user is run (issue 27: a doc example that fails is a failing test).

The convention: every ```bash (or ```sh, ```shell) block of README.md and docs/*.md is a runnable command. This
module runs each one as written, with `bash -euo pipefail`, in the sandbox named for it in RUN and with the exit
code the docs promise, unless EXCLUDED names the block with the reason it cannot run here (it needs GitHub, a
network, a model API or TestOps, changes the machine, or is the test suite itself) or the test that runs it instead.
A block in neither list fails `test_every_shell_block_is_run_or_excluded_with_a_reason`: a new command in the docs
must be classified. Blocks are named by their file and first line, so editing a block's first line re-classifies it.

The `testops-evidence` the blocks call is this checkout's (docs/install.md installs the same code). The sandboxes
are built from the docs themselves: the repository of docs/local.md (its `# <path>` files, committed), with a JUnit
report and an allure-results directory of the case the docs' examples name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SHELL_LANGUAGES = ("bash", "sh", "shell")


@dataclass(frozen=True)
class Block:
    file: str  # relative to the repository
    line: int  # of the opening fence
    body: str

    @property
    def key(self) -> tuple[str, str]:
        return self.file, self.body.split("\n", 1)[0]


def shell_blocks() -> list[Block]:
    blocks = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
            if match.group(1) in SHELL_LANGUAGES:
                blocks.append(Block(str(path.relative_to(REPO)), text[:match.start()].count("\n") + 1,
                                    match.group(2)))
    return blocks


# (file, first line) -> (sandbox, the exit code the docs promise)
RUN: dict[tuple[str, str], tuple[str, int]] = {
    ("docs/contract.md", "testops-evidence check --contract .github/testops-evidence.yml"): ("repository", 0),
    ("docs/evidence.md", "testops-evidence select --cases get-task-context"): ("repository", 0),
    ("docs/evidence.md", "testops-evidence verify-attestation --attestation state/publication.intoto.json "
                         "--published state/published"): ("rehearsal", 0),
    ("docs/evidence.md", "testops-evidence verify-attestation --attestation publication.intoto.json --published ."):
        ("report-artifact", 0),
    ("docs/reports.md", "testops-evidence verify-attestation --attestation publication.intoto.json --published ."):
        ("report-artifact", 0),
    ("docs/guard.md", "testops-evidence guard --local true --backend files --contract .github/testops-evidence.yml"):
        ("repository", 0),
    ("docs/inputs.md", "testops-evidence select --cases get-task-context,budget-stop"): ("repository", 0),
    # The page's example fails one case on purpose: "exits 1 when the campaign was recorded ... not every case passed".
    ("docs/local.md", "testops-evidence rehearse --case-command 'python3 evals/run_case.py'"): ("repository", 1),
}

_SETUP = "sets up a fresh machine with scripts/setup.sh (downloads, minutes)"
_LOCAL_ACT = "run as written by tests/test_act_local.py (act, minutes; marked act)"
EXCLUDED: dict[tuple[str, str], str] = {
    ("README.md", "bash scripts/rehearse.sh    # fresh machine: set up, then rehearse a whole campaign locally "
                  "(files backend)"):
        f"{_SETUP}, then the example rehearsal (tests/test_rehearse.py runs it and checks the script's last line) "
        "and the whole test suite (which cannot run itself)",
    ("docs/evidence.md", "bash scripts/rehearse.sh                       # from a fresh clone: set up, then rehearse"):
        f"{_SETUP}; the rehearsal it ends with is tests/test_rehearse.py's",
    ("docs/evidence.md", "inspect eval evals/agent.py --model anthropic/claude-sonnet-5 --log-dir logs --epochs 3"):
        "evaluates a model over its API (a key, the network, Inspect AI and promptfoo); `cell --inspect-log` and "
        "`cell --promptfoo` run on real logs in tests/test_inspect_logs.py and tests/test_promptfoo_results.py",
    ("docs/install.md", 'pipx install "git+https://github.com/testops-evidence/testops-evidence@v0.2.0"'):
        "installs the release from GitHub (network); the commands after it run above on this checkout's CLI",
    ("docs/install.md", "python3 -m venv .venv"): "installs the release from GitHub (network)",
    ("docs/install.md", "git clone --depth 1 --branch v0.2.0 https://github.com/testops-evidence/testops-evidence.git"):
        "clones the release from GitHub (network); tests/test_composite_setup.py installs from the hashed lock",
    ("docs/install.md", "npm install --global allure@3.18.0"):
        "installs into the machine's global npm (network); scripts/setup.sh installs the same pinned version",
    ("docs/install.md", "testops-evidence --version"):
        "the example rehearsal of a checkout: tests/test_rehearse.py runs it (and `--version` is "
        "tests/test_cli_entrypoint.py's)",
    ("docs/local.md", "git clone --depth 1 --branch v0.2.0 https://github.com/testops-evidence/testops-evidence.git "
                      "~/testops-evidence"):
        "clones the release from GitHub (network); tests/test_act_local.py puts a copy of this checkout there",
    ("docs/local.md", "cp -r ~/testops-evidence/examples/adopter ~/agent-evals && cd ~/agent-evals"): _LOCAL_ACT,
    ("docs/local.md", "cp ~/testops-evidence/workflows-templates/campaign.yml "
                      ".github/workflows/testops-evidence-campaign.yml"): _LOCAL_ACT,
    ("docs/local.md", "A=~/testops-evidence"): _LOCAL_ACT,
    ("docs/local.md", "cd .act-artifacts/testops-evidence-report-first-campaign-1-1"): _LOCAL_ACT,
    ("docs/security.md", "# case-command (the harness): the agent runs in a throwaway container — no runner "
                         "environment, no tokens,"):
        "a fragment of a case command: runs an agent image under Docker with a model API key",
    ("docs/security.md", ".venv/bin/python -m pytest tests/reliability -n 2                  # everything, CI profile"):
        "runs the test suite itself (and its long fuzz profile)",
    ("docs/workflows.md", "# evals/run-case.sh — case-command: bash evals/run-case.sh"):
        "case commands for Inspect AI and promptfoo: run in a worker job, against a model API (a key, the network)",
}


def test_every_shell_block_is_run_or_excluded_with_a_reason() -> None:
    blocks = shell_blocks()
    keys = {block.key for block in blocks}
    unclassified = [f"{b.file}:{b.line}: {b.key[1]}" for b in blocks if b.key not in RUN and b.key not in EXCLUDED]
    assert not unclassified, "classify these doc commands in RUN or EXCLUDED:\n" + "\n".join(unclassified)
    assert not set(RUN) & set(EXCLUDED)
    stale = sorted((set(RUN) | set(EXCLUDED)) - keys)
    assert not stale, f"no such doc block any more: {stale}"
    assert all(len(reason) > 20 for reason in EXCLUDED.values())
    # Runnable is the rule, exclusion the exception: most of the CLI's commands in the docs run.
    assert sum(1 for block in blocks if block.key in RUN) >= 8


# --- sandboxes ------------------------------------------------------------------------------------------------------

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuite name="agent" tests="2" failures="0" errors="0" time="0.4" timestamp="2026-12-01T10:00:00">
  <testcase classname="evals.test_agent" name="test_tool_called" time="0.1"/>
  <testcase classname="evals.test_agent" name="test_answer_grounded" time="0.3"/>
</testsuite>
"""


def allure_result(check: str, start: int) -> dict[str, object]:
    return {"uuid": f"0000000{start}-0000-4000-8000-000000000000", "historyId": f"h-{check}",
            "name": f"test_{check.replace('-', '_')}", "fullName": f"evals.test_agent.test_{check}",
            "status": "passed", "stage": "finished", "start": 1_796_119_200_000 + start,
            "stop": 1_796_119_200_100 + start, "labels": [], "steps": [], "attachments": [], "parameters": []}


def local_md_files() -> dict[str, str]:
    """docs/local.md's repository: its code blocks whose first line is `# <path>`."""
    text = (REPO / "docs" / "local.md").read_text(encoding="utf-8")
    files = {}
    for language, body in re.findall(r"```(\w+)\n(.*?)```", text, flags=re.DOTALL):
        first = body.split("\n", 1)[0]
        if language in ("yaml", "python") and re.fullmatch(r"# [\w./-]+", first):
            files[first[2:]] = body.split("\n", 1)[1]
    return files


def shell_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell: this checkout's CLI as `testops-evidence` first on PATH, no GitHub variables, no tokens."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "testops-evidence"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m testops_evidence "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GITHUB_", "RUNNER_", "INPUT_", "ACTIONS_", "ALLURE_", "TESTOPS_"))
           and key not in ("CI", "GH_TOKEN", "ACT")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO / "src"),
               HOME=str(tmp_path / "home"), GIT_AUTHOR_NAME="docs", GIT_AUTHOR_EMAIL="docs@example.invalid",
               GIT_COMMITTER_NAME="docs", GIT_COMMITTER_EMAIL="docs@example.invalid")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def run(body: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)


def repository(tmp_path: Path, env: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    for name, text in local_md_files().items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    made = run("git init -q -b main && git add -A && git commit -q -m 'agent evals'", repo, env)
    assert made.returncode == 0, made.stderr
    # The reports the docs' `cell` examples read (the case they name, get-task-context): not committed, as
    # reports a harness just wrote.
    (repo / "report.xml").write_text(JUNIT, encoding="utf-8")
    (repo / "allure-results").mkdir()
    for index, check in enumerate(("tool-called", "answer-grounded")):
        (repo / "allure-results" / f"{index}-result.json").write_text(json.dumps(allure_result(check, index)))
    return repo


def rehearsal(tmp_path: Path, env: dict[str, str]) -> Path:
    """A rehearsal of docs/local.md's repository with its case command (docs/local.md, "Without act"): its directory."""
    repo = repository(tmp_path, env)
    done = run("testops-evidence rehearse --case-command 'python3 evals/run_case.py' --report never", repo, env)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # one case fails on purpose
    (run_dir,) = (repo / "rehearsal").iterdir()
    return run_dir


def report_artifact(tmp_path: Path, env: dict[str, str]) -> Path:
    """What the template's publish job uploads as the report artifact: the publication and, beside it, the
    statement verify wrote and its predicate."""
    run_dir = rehearsal(tmp_path, env)
    artifact = tmp_path / "testops-evidence-report-first-campaign-1-1"
    shutil.copytree(run_dir / "state" / "published", artifact)
    for name in ("publication.intoto.json", "publication.predicate.json"):
        shutil.copy2(run_dir / "state" / name, artifact / name)
    return artifact


SANDBOXES = {"repository": repository, "rehearsal": rehearsal, "report-artifact": report_artifact}


@pytest.mark.parametrize("key", sorted(RUN), ids=lambda key: f"{key[0]}:{key[1][:60]}")
def test_the_documented_command_runs(key: tuple[str, str], tmp_path: Path) -> None:
    (block,) = [b for b in shell_blocks() if b.key == key]
    sandbox, expected = RUN[key]
    env = shell_env(tmp_path)
    cwd = SANDBOXES[sandbox](tmp_path, env)
    done = run(block.body, cwd, env)
    assert done.returncode == expected, (f"{block.file}:{block.line} exited {done.returncode}, the docs promise "
                                         f"{expected}\n{block.body}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    assert "internal.error" not in done.stdout + done.stderr
