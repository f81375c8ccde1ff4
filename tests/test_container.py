"""Container tier: build the action's Dockerfile and run the image the way the GitHub runner does.

A private Docker engine comes from Debian's ``docker.io`` package (``scripts/container-engine.sh``,
confined to ``.tools/container`` and a run directory under /tmp); the base image is made with
``debootstrap`` (no registry is reachable) and passed as ``--build-arg BASE=...``, which is exactly how
an air-gapped builder uses the Dockerfile. Each phase then runs as a ``docker run`` shaped like the
runner's: workspace mounted at ``/github/workspace`` as the working directory, file commands under
``/github/file_commands``, the event under ``/github/workflow``, ``HOME=/github/home``, every declared
input as ``INPUT_<NAME>`` (hyphens kept, defaults applied) and the job's environment forwarded.

The campaign is the example contract on the files backend: guard and select bind to the run through
the GitHub REST test server (host network), a worker verifies the selection, export projects cell
results, upload publishes and verify proves it. Skips, with the reason, where no engine can start.

One test function on purpose: under pytest-xdist a second test could land on another worker, which
would start (and later stop) the same private engine concurrently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from helpers import left_out, parse_output_file
from servers.github_server import GitHubServer

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "scripts" / "container-engine.sh"
TAG = "testops-evidence:container-test"
REPOSITORY = "acme/agents"
HEAD_SHA = "5d41402abc4b2a76b9719d911017c592ae5b6c4f"
TOKEN = "ghs_containerSentinelToken00000000000000"
# Job environment a user might set, which the runner forwards into the container: the image must not
# let it choose the interpreter's path or modules.
HOSTILE_JOB_ENV = {"PYTHONPATH": "/github/workspace/hostile", "PYTHONHOME": "/nonexistent",
                   "PATH": "/github/workspace/hostile/bin:/usr/bin:/bin"}


@dataclass
class Step:
    exit_code: int
    outputs: dict[str, str]
    summary: str
    log: str


@dataclass
class Runner:
    """Plays the GitHub runner for a Docker action: one instance per workflow run."""

    docker: list[str]
    root: Path
    github: GitHubServer
    run_id: int
    defaults: dict[str, str | None]
    jobs: dict[str, Path] = field(default_factory=dict)

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def job_dir(self, job: str) -> Path:
        """Per job: file commands, home, runner temp (the state dir lives there, as on a runner)."""
        if job not in self.jobs:
            base = self.root / "jobs" / job
            for name in ("file_commands", "home", "runner_temp"):
                (base / name).mkdir(parents=True)
            self.jobs[job] = base
        return self.jobs[job]

    def step(self, job: str, inputs: dict[str, str], job_env: dict[str, str] | None = None) -> Step:
        base = self.job_dir(job)
        step_id = uuid.uuid4().hex
        output, summary = f"set_output_{step_id}", f"step_summary_{step_id}"
        for name in (output, summary, f"set_env_{step_id}", f"add_path_{step_id}", f"save_state_{step_id}"):
            (base / "file_commands" / name).touch()
        env = {
            **self.github.runner_env(self.run_id, event_path="/github/workflow/event.json"),
            "GITHUB_JOB": job, "GITHUB_WORKSPACE": "/github/workspace", "HOME": "/github/home",
            "RUNNER_TEMP": "/github/runner_temp", "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "CI": "true",
            "GITHUB_OUTPUT": f"/github/file_commands/{output}",
            "GITHUB_STEP_SUMMARY": f"/github/file_commands/{summary}",
            "GITHUB_ENV": f"/github/file_commands/set_env_{step_id}",
            "GITHUB_PATH": f"/github/file_commands/add_path_{step_id}",
            "GITHUB_STATE": f"/github/file_commands/save_state_{step_id}",
            **(job_env or {}),
        }
        # The runner sets INPUT_<NAME> for every declared input, with the default where none is given;
        # upper-cased, hyphens kept.
        for name, default in self.defaults.items():
            value = inputs.get(name, default)
            if value is not None:
                env[f"INPUT_{name.upper()}"] = TOKEN if value == "${{ github.token }}" else value
        command = [*self.docker, "run", "--rm", "--network", "host", "--workdir", "/github/workspace",
                   "-v", f"{self.workspace}:/github/workspace", "-v", f"{self.root / 'workflow'}:/github/workflow",
                   "-v", f"{base / 'file_commands'}:/github/file_commands", "-v", f"{base / 'home'}:/github/home",
                   "-v", f"{base / 'runner_temp'}:/github/runner_temp"]
        for key in env:
            command += ["-e", key]  # values through the environment, never on the command line
        command.append(TAG)
        done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=False,
                              timeout=300)
        return Step(done.returncode, parse_output_file((base / "file_commands" / output).read_text()),
                    (base / "file_commands" / summary).read_text(), done.stdout + done.stderr)


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ENGINE), *args], capture_output=True, text=True, check=False, timeout=900)


@pytest.fixture(scope="module")
def docker() -> Iterator[list[str]]:
    if reason := left_out("container"):
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("the container tier starts a private dockerd, which needs root")
    was_running = engine("docker", "version").returncode == 0
    started = engine("start")
    if started.returncode != 0:
        reason = (started.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no Docker engine could start ({reason}); it needs root, apt-get and a kernel with "
                    "overlayfs and cgroups (scripts/container-engine.sh start)")
    base = engine("base")
    if base.returncode != 0:
        reason = (base.stderr.strip().splitlines() or ["no output"])[-1]
        if not was_running:
            engine("stop")
        pytest.skip(f"no base image ({reason}); debootstrap needs Debian's archive")
    # The engine's own client, called directly (not through bash, which would drop the runner's
    # hyphenated INPUT_ names from the environment).
    host = started.stdout.strip().removeprefix("DOCKER_HOST=")
    cli = ["env", f"DOCKER_HOST={host}", engine("client").stdout.strip()]
    build = subprocess.run([*cli, "build", "--network", "host", "--build-arg", f"BASE={base.stdout.strip()}",
                            "--tag", TAG, str(ROOT)], capture_output=True, text=True, check=False, timeout=900)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    yield cli
    # Rebuilds leave the previous image untagged in the cached data root; keep .tools/ from growing.
    subprocess.run([*cli, "image", "prune", "--force"], capture_output=True, check=False, timeout=120)
    if not was_running:
        engine("stop")


@pytest.fixture
def runner(docker: list[str], tmp_path: Path) -> Iterator[Runner]:
    action = YAML(typ="safe").load((ROOT / "action.yml").read_text(encoding="utf-8"))
    defaults = {name: spec.get("default") for name, spec in action["inputs"].items()}
    with GitHubServer(token=TOKEN) as github:
        run = github.add_run(REPOSITORY, head_sha=HEAD_SHA)
        (tmp_path / "workflow").mkdir()
        (tmp_path / "workflow" / "event.json").write_text(json.dumps(github.event_payload(run["id"])))
        workspace = tmp_path / "workspace"
        (workspace / ".github").mkdir(parents=True)
        shutil.copy2(ROOT / "examples" / "contract.yml", workspace / ".github" / "testops-evidence.yml")
        hostile = workspace / "hostile" / "testops_evidence"
        hostile.mkdir(parents=True)
        (hostile / "__init__.py").write_text("raise SystemExit(99)  # must never be imported\n")
        yield Runner(docker, tmp_path, github, run["id"], defaults)


def write_cells(workspace: Path, selection: dict[str, Any], digest: str, failing: str) -> None:
    """What the matrix workers would have uploaded: one cell result per selected case."""
    cells = workspace / "cell-results"
    cells.mkdir()
    for row in selection["cases"]:
        ok = row["key"] != failing
        cell = {
            "schema": "testops-evidence/cell-result/v2", "selection-sha256": digest, "case": row["key"],
            "attempt-id": f"a-{row['key']}",
            "disposition": "passed" if ok else "behavior_failure",
            "started-at": "2026-12-01T10:00:00Z", "finished-at": "2026-12-01T10:02:00Z",
            "source-sha": selection["context"]["head-sha"], "profile": selection["profile"],
            "checks": [{"id": check, "passed": ok} for check in sorted(row["checks"])],
        }
        (cells / f"{row['key']}.json").write_text(json.dumps(cell))


def test_the_image_runs_a_files_campaign_as_the_runner_runs_it(runner: Runner) -> None:
    files = {"backend": "files"}
    guard = runner.step("guard", {"mode": "guard"}, HOSTILE_JOB_ENV)
    assert guard.exit_code == 0, guard.log + guard.summary
    assert (guard.outputs["target-sha"], guard.outputs["run-attempt"]) == (HEAD_SHA, "1")
    assert "guard" in guard.summary and "::add-mask::" in guard.log  # the token is masked first

    select = runner.step("select", {"mode": "select", **files})
    assert select.exit_code == 0, select.log + select.summary
    assert (select.outputs["selected-count"], select.outputs["native-count"], select.outputs["external-count"]) \
        == ("12", "9", "3")
    selection_path = runner.workspace / select.outputs["selection-path"].removeprefix("/github/workspace/")
    selection = json.loads(selection_path.read_text())
    assert selection["context"]["head-sha"] == HEAD_SHA and selection["backend"] == "files"
    assert "get-task-context" in select.summary

    worker = {"mode": "verify-selection", "selection-path": select.outputs["selection-path"],
              "selection-sha256": select.outputs["selection-sha256"]}
    verified = runner.step("native-1", worker, HOSTILE_JOB_ENV)
    assert (verified.exit_code, verified.outputs["selected-count"]) == (0, "12"), verified.log + verified.summary
    # The job's environment reaches the container: a TestOps token variable there, even empty, is refused.
    tokened = runner.step("native-2", worker, {"ALLURE_TOKEN": ""})
    assert (tokened.exit_code, tokened.outputs["error-code"]) == (3, "worker.token_present")
    assert "worker.token_present" in tokened.summary

    write_cells(runner.workspace, selection, select.outputs["selection-sha256"], failing="budget-stop")
    export = runner.step("export", {"mode": "export", "selection-path": select.outputs["selection-path"],
                                    "selection-sha256": select.outputs["selection-sha256"],
                                    "fail-on-failed-cases": "false"})
    assert export.exit_code == 0, export.log + export.summary
    assert (export.outputs["passed-count"], export.outputs["failed-count"], export.outputs["broken-count"]) \
        == ("11", "1", "0")
    assert export.outputs["all-passed"] == "false"
    results = runner.workspace / "allure-results"
    assert len(list(results.glob("*-result.json"))) == 12

    # The receipt and the selection are bound across jobs by the digests that travelled as job outputs.
    travelled = {"receipt-sha256": export.outputs["receipt-sha256"], "selection-path": select.outputs["selection-path"],
                 "selection-sha256": select.outputs["selection-sha256"]}
    upload = runner.step("publish", {"mode": "upload", **files, **travelled})
    assert upload.exit_code == 0, upload.log + upload.summary
    assert (upload.outputs["published"], upload.outputs["uploaded-count"]) == ("true", "12")
    # The image has no Node.js: the publication carries no HTML report, and says so (never silently).
    assert upload.outputs["report-built"] == "false"
    assert "::warning title=upload.report::no HTML report was built: the Docker action's image has no Node.js" \
        in upload.log
    verify = runner.step("publish", {"mode": "verify", **files, **travelled, "fail-on-failed-cases": "false"})
    assert verify.exit_code == 0, verify.log + verify.summary
    assert (verify.outputs["verified-count"], verify.outputs["all-passed"]) == ("12", "false")

    # Every step wrote a summary; none holds the token; the REST server saw the token on every request.
    for step in (guard, select, verified, export, upload, verify):
        assert step.summary.startswith(("## testops-evidence", "**testops-evidence · ")), step.summary[:200]
        assert TOKEN not in step.summary and TOKEN not in json.dumps(step.outputs)
    assert all(record.authorization for record in runner.github.requests_to("run"))

    # A step without a mode is a coded usage refusal, as the release workflow's smoke test expects.
    missing = runner.step("misconfigured", {})
    assert (missing.exit_code, missing.outputs) == (2, {"error-code": "input.mode"})
    assert "input.mode" in missing.summary and "::error title=input.mode::" in missing.log
