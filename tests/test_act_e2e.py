"""End to end under act: the workflow templates, called from a caller workflow, run their whole chains.

Two paths. The **documented local path** (docs/local.md) is what a user runs: the test writes the page's
repository (its contract, caller and case command, word for word), copies the template as the page says,
and runs the page's act command line unchanged, with the `local` input: no GitHub API, no faked runner
variables. The **GitHub path** below emulates what only GitHub has — the REST run object, the workflow
ref, TestOps — with the local test servers, to exercise the REST bindings and the TestOps chain:

A throw-away git repository (``acme/agents``) holds a caller workflow (``agent-evals.yml``, the one the
contract's trust policy names), a copy of ``workflows-templates/campaign.yml``, a contract and a tiny
case command. ``act workflow_dispatch`` runs it on this machine (``-P ubuntu-latest=-self-hosted``, no
Docker engine) with:

* the action itself — the composite variant of *this checkout* — through ``--local-repository``
  (``testops-evidence/testops-evidence@v<version>`` = a copy of the action's files), so the templates are
  exercised exactly as users get them, ``uses:`` lines untouched;
* ``actions/upload-artifact`` / ``download-artifact`` / ``setup-node`` / ``attest`` mapped to the local stand-ins the action ships in ``act/``
  (act cannot download actions offline; ``actions/checkout`` needs none: act copies the repository);
* ``GITHUB_API_URL`` pointing at the GitHub REST test server, which serves this run's object, so guard
  and select bind to it through PyGithub for real;
* for the TestOps chain, the contract's endpoint pointing at the TestOps test server, seeded as if
  TestOps had launched the plan (job run bound to this run's URL), with the token passed only as the
  template's ``testops-token`` secret.

act runs every step of every job for real: the composite's venv (built from ``requirements/runtime.txt``
with hashes and cached in ``.tools/act-cache``), the entrypoint, the matrix fan-out, the artifacts and
the case command. The tests assert each chain from the outside: the workflow's outputs, every matrix
cell, the artifacts, the requests the test servers saw, and each phase's step summary. Campaign on the
files backend and against TestOps; bootstrap (dry run, then real); import of remote cells.

Step summaries: act reads each step's summary file after the step, as the runner does, and reports it
in its ``--json`` log as a ``"command": "summary"`` record with the job and matrix row; the test collects
them from there, so the action under test is byte-identical to this checkout's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servers.github_server import GitHubServer
from servers.testops_server import TestOpsServer
from testops_evidence import __version__
from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP

pytestmark = pytest.mark.act

ROOT = Path(__file__).resolve().parent.parent
ACT = Path(sys.executable).parent / "act"
ACTION_REPOSITORY = "testops-evidence/testops-evidence"
REPOSITORY = "acme/agents"
WORKFLOW = ".github/workflows/agent-evals.yml"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
# The third-party actions the templates and the composite action pin, and the local stand-ins the action
# ships for act (docs/local.md), relative to the action's checkout.
STAND_INS = {
    "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02": "act/upload-artifact",
    "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093": "act/download-artifact",
    "actions/setup-node@49933ea5288caeca8642d1e84afbd3f7d6820020": "act/setup-node",
    "actions/attest@1e69f48acb82d1966a394da916b4c1698aa569d6": "act/attest",
}
# Persistent across runs (gitignored): act's tool cache, where the composite keeps its venv per lock.
ACT_CACHE = ROOT / ".tools" / "act-cache"
SENTINEL_TOKEN = "ghs_e2eSentinelTokenValue4b8e2c6a9f1d7035"
TESTOPS_TOKEN = "allure-e2e-sentinel-tok-5f1d3c8a"
PROJECT, PLAN = 12, 340
# act's defaults for the run it plays: github.com URLs, run 1.
RUN_URL = f"https://github.com/{REPOSITORY}/actions/runs/1"
WORKFLOW_URL = f"https://github.com/{REPOSITORY}/actions/workflows/agent-evals.yml"
WORKFLOW_ID = 161335  # the GitHub test server's workflow id for its runs (add_run's default)

CASES = {  # key -> (lane, checks, whether the case command makes every check pass)
    "get-task-context": ("native", ["tool-called", "answer-grounded", "cleanup"], True),
    "list-open-issues": ("native", ["tool-called", "filtered-correctly"], True),
    "budget-stop": ("native", ["stopped-at-budget", "spend-reported"], False),
    "hire-agent-approval": ("external", ["approval-requested", "agent-created-after-approval"], True),
}

def worker_job_name(artifact: str) -> str | None:
    """How GitHub names the worker job that uploads a cell artifact: `<caller job> / <prefix> <job>`."""
    prefix = "testops-evidence-cells-1-"
    return f"campaign / testops-evidence {artifact[len(prefix):]}" if artifact.startswith(prefix) else None


def report_job(job: str) -> str:
    """A last job of every caller: the called workflow's outputs, as JSON, into a file the test reads."""
    return f"""\
  report:
    needs: {job}
    runs-on: ubuntu-latest
    timeout-minutes: 5
    steps:
      - env:
          OUTPUTS: ${{{{ toJSON(needs.{job}.outputs) }}}}
        run: printf '%s' "$OUTPUTS" > "$TESTOPS_E2E_OUTPUTS"
"""


CALLER = """\
name: agent evals
on:
  workflow_dispatch:
    inputs:
      cases:
        type: string
        default: ""
      job-run-id:
        type: string
        default: ""
permissions:
  contents: read
  actions: read
jobs:
  campaign:
    uses: ./.github/workflows/testops-evidence-campaign.yml
    with:
      case-command: python3 evals/run_case.py
      cases: ${{ inputs.cases }}
      job-run-id: ${{ inputs.job-run-id }}
      fail-on-failed-cases: false
      deadline-seconds: 60
    secrets:
      testops-token: ${{ secrets.ALLURE_TOKEN }}
""" + report_job("campaign")

BOOTSTRAP_CALLER = """\
name: testops bootstrap
on:
  workflow_dispatch:
    inputs:
      dry-run:
        type: boolean
        default: true
permissions:
  contents: read
  actions: read
jobs:
  bootstrap:
    uses: ./.github/workflows/testops-evidence-bootstrap.yml
    with:
      dry-run: ${{ inputs.dry-run }}
    secrets:
      testops-token: ${{ secrets.ALLURE_TOKEN }}
""" + report_job("bootstrap")

IMPORT_CALLER = """\
name: import remote cells
on:
  workflow_dispatch:
    inputs:
      source-run-id:
        type: string
        required: true
permissions:
  contents: read
  actions: read
jobs:
  import:
    uses: ./.github/workflows/testops-evidence-import.yml
    with:
      source-run-id: ${{ inputs.source-run-id }}
      intent: evals/import-intent.json
      artifact-name: cells-*
""" + report_job("import")

CASE_COMMAND = '''\
"""The e2e harness: "evaluates" one case and writes its cell-result/v2 (budget-stop fails a check)."""
import json
import os

row = json.loads(os.environ["TESTOPS_EVIDENCE_CASE_JSON"])
passed = row["key"] != "budget-stop"
cell = {
    "schema": "testops-evidence/cell-result/v2",
    "selection-sha256": os.environ["TESTOPS_EVIDENCE_SELECTION_SHA256"],
    "case": row["key"],
    "attempt-id": os.environ["TESTOPS_EVIDENCE_ATTEMPT_ID"],
    "trial": int(os.environ["TESTOPS_EVIDENCE_TRIAL"]),
    "disposition": "passed" if passed else "behavior_failure",
    "started-at": "2026-12-01T10:00:00Z",
    "finished-at": "2026-12-01T10:01:00Z",
    "source-sha": os.environ["TESTOPS_EVIDENCE_SOURCE_SHA"],
    "profile": json.loads(os.environ["TESTOPS_EVIDENCE_PROFILE"]),
    "checks": [{"id": check, "passed": passed or index > 0} for index, check in enumerate(sorted(row["checks"]))],
}
with open(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"], "w", encoding="utf-8") as handle:
    json.dump(cell, handle)
print("case", row["key"], "lane", row["lane"], "->", cell["disposition"])
'''



def contract_text(actor_id: int, testops_url: str | None = None, trials: dict[str, str] | None = None) -> str:
    """The e2e contract; ``trials`` gives a case (by key) a YAML ``trials`` mapping."""
    testops = [] if testops_url is None else [
        "testops:",
        f"  endpoint: {testops_url}",
        "  api-prefix: /api",
        "  auth: api-token",
        f"  project-id: {PROJECT}",
        "  plan:",
        f"    id: {PLAN}",
        "    name: Agent protocol evals",
        "  standing-plan: all",
        f"  bootstrap-case: {next(iter(CASES))}",
    ]
    lines = [
        "version: 1",
        "campaign: agent-protocol",
        "trust:",
        f"  repository: {REPOSITORY}",
        "  public-only: false",
        "  events: [workflow_dispatch]",
        "  branches: [main]",
        f"  workflows: [{WORKFLOW}]",
        "  run-attempts: first-only",
        f"  actors: [{actor_id}]",
        *testops,
        "profile:",
        "  id: sonnet-default",
        "  model: claude-sonnet-5",
        "lanes:",
        "  native:",
        "    max-parallel: 2",
        "  external:",
        "    max-parallel: 1",
        "cases:",
    ]
    for number, (key, (lane, checks, _)) in enumerate(CASES.items()):
        lines += [
            f"  - key: {key}",
            f"    testops-id: {194 + number}",
            f"    full-name: agents/protocol/{key}",
            f"    title: {key.replace('-', ' ').capitalize()}",
            f"    lane: {lane}",
            "    timeout-minutes: 5",
            *([f"    trials: {(trials or {})[key]}"] if key in (trials or {}) else []),
            "    checks:",
            *[f"      {check}: behavior" for check in checks],
        ]
    return "\n".join(lines) + "\n"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
           "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid",
           "GIT_AUTHOR_DATE": "2026-12-01T10:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T10:00:00Z"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def copy_action(into: Path) -> Path:
    """The published action's files (what a user's runner fetches for ``uses: ...@v<version>``)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    into.mkdir(parents=True)
    shutil.copy2(ROOT / "action.yml", into / "action.yml")
    shutil.copy2(ROOT / "entrypoint.py", into / "entrypoint.py")
    shutil.copytree(ROOT / "composite", into / "composite", ignore=ignore)
    shutil.copytree(ROOT / "act", into / "act", ignore=ignore)
    shutil.copytree(ROOT / "src" / "testops_evidence", into / "src" / "testops_evidence", ignore=ignore)
    (into / "requirements").mkdir()
    for lock in ("runtime.txt", "uv.txt"):
        shutil.copy2(ROOT / "requirements" / lock, into / "requirements" / lock)
    return into


def make_repo(path: Path, contract: str, caller: str, template: str, extra: dict[str, str],
              case_command: str = CASE_COMMAND) -> tuple[Path, str]:
    (path / ".github" / "workflows").mkdir(parents=True)
    (path / "evals").mkdir()
    (path / WORKFLOW).write_text(caller, encoding="utf-8")
    shutil.copy2(ROOT / "workflows-templates" / template,
                 path / ".github" / "workflows" / f"testops-evidence-{template}")
    (path / ".github" / "testops-evidence.yml").write_text(contract, encoding="utf-8")
    (path / "evals" / "run_case.py").write_text(case_command, encoding="utf-8")
    for name, text in extra.items():
        (path / name).write_text(text, encoding="utf-8")
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "agent evals")
    return path, git(path, "rev-parse", "HEAD")


@dataclass
class ActRun:
    returncode: int
    log: str
    outputs: dict[str, Any]
    summaries: dict[str, list[str]]  # "<job>-<mode>" -> step summaries (a matrix job has one per cell)
    artifacts: Path


@pytest.fixture(scope="module")
def act_binary() -> Path:
    if not ACT.exists():
        pytest.skip(f"act is not installed ({ACT}); install the dev dependencies: bash scripts/setup.sh")
    return ACT


@pytest.fixture
def github() -> Iterator[GitHubServer]:
    with GitHubServer(token=SENTINEL_TOKEN) as server:
        yield server


def run_act(act: Path, tmp_path: Path, github: GitHubServer, *, inputs: dict[str, Any] | None = None,
            testops: TestOpsServer | None = None, caller: str = CALLER, template: str = "campaign.yml",
            contract: str | None = None, extra: dict[str, str] | None = None,
            case_command: str = CASE_COMMAND) -> ActRun:
    actor_id = 1234567
    if contract is None:
        contract = contract_text(actor_id, testops.url if testops is not None else None)
    repo, sha = make_repo(tmp_path / "repo", contract, caller, template, extra or {}, case_command)
    action = copy_action(tmp_path / "action")
    run = github.add_run(REPOSITORY, 1, run_number=1, run_attempt=1, head_sha=sha, path=WORKFLOW,
                         actor_id=actor_id, actor_login="nektos/act")
    event = github.event_payload(run["id"], inputs=inputs or {})
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event), encoding="utf-8")
    artifacts, outputs = tmp_path / "artifacts", tmp_path / "outputs.json"
    artifacts.mkdir()
    # The run's artifacts and its workers' upload steps, as the Actions API reports them to collect-cells.
    github.mirror_artifact_store(run["id"], artifacts, worker_job_name, UPLOAD_STEP, REPORT_EXPRESSION)
    ACT_CACHE.mkdir(parents=True, exist_ok=True)
    command = [
        str(act), "workflow_dispatch", "-W", WORKFLOW, "-e", str(event_path),
        "-P", "ubuntu-latest=-self-hosted", "--action-offline-mode", "--no-cache-server", "--json",
        "--action-cache-path", str(ACT_CACHE),
        "--local-repository", f"{ACTION_REPOSITORY}@v{__version__}={action}",
        *[arg for ref, path in STAND_INS.items() for arg in ("--local-repository", f"{ref}={action / path}")],
        "-s", f"GITHUB_TOKEN={SENTINEL_TOKEN}",
        *(["-s", f"ALLURE_TOKEN={TESTOPS_TOKEN}"] if testops is not None else []),
        "--env", f"GITHUB_API_URL={github.api_url()}",
        "--env", f"GITHUB_WORKFLOW_REF={REPOSITORY}/{WORKFLOW}@refs/heads/main",
        "--env", f"GITHUB_ACTOR_ID={actor_id}",
        "--env", f"TESTOPS_EVIDENCE_ACT_ARTIFACTS={artifacts}",
        "--env", f"TESTOPS_E2E_OUTPUTS={outputs}",
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "RUNNER_", "INPUT_"))}
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)
    log, summaries = read_json_log(done.stdout)
    return ActRun(done.returncode, log + done.stderr,
                  json.loads(outputs.read_text()) if outputs.exists() else {}, summaries, artifacts)


def summaries_of(result: ActRun, key: str) -> str:
    return "\n".join(result.summaries.get(key, []))


def _visible_lines(text: str) -> int:
    """The non-empty lines a reader sees before unfolding anything (outside <details>)."""
    seen, depth = 0, 0
    for line in text.splitlines():
        depth += line.startswith("<details>")
        seen += depth == 0 and bool(line.strip())
        depth -= line.startswith("</details>")
    return seen


def read_json_log(stdout: str) -> tuple[str, dict[str, list[str]]]:
    """act's ``--json`` log: readable text (for failure messages) and the step summaries by job and mode."""
    lines: list[str] = []
    summaries: dict[str, list[str]] = {}
    for raw in stdout.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            lines.append(raw)
            continue
        lines.append(f"[{record.get('job', '')}] {str(record.get('msg', '')).rstrip()}")
        if record.get("command") == "summary" and len(record.get("stepID") or []) == 1:
            # act reports a composite action's summary twice: for the inner step (stepID [n, m]) and
            # again for the composite step itself (stepID [n]); the latter is what GitHub shows.
            content = str(record.get("content", ""))
            # A phase's heading, a one-line step's bold lead (PhaseResult.brief) or a refusal's heading.
            mode = re.search(r"^(?:## testops-evidence · `([a-z-]+)`|\*\*testops-evidence · `([a-z-]+)`\*\*"
                             r"|### ⛔ `([a-z-]+)` refused)", content, flags=re.MULTILINE)
            key = f"{record.get('jobID')}-{next(g for g in mode.groups() if g) if mode else 'other'}"
            summaries.setdefault(key, []).append(content)
    return "\n".join(lines), summaries


def test_campaign_runs_end_to_end_on_the_files_backend(act_binary: Path, tmp_path: Path,
                                                       github: GitHubServer) -> None:
    result = run_act(act_binary, tmp_path, github)
    assert result.returncode == 0, result.log[-6000:]

    # The workflow's outputs: every case selected, exported, published and verified; one failed case.
    outputs = result.outputs
    assert outputs["selected-count"] == str(len(CASES))
    assert (outputs["passed-count"], outputs["failed-count"], outputs["broken-count"]) == ("3", "1", "0")
    assert outputs["published"] == "true" and outputs["verified-count"] == str(len(CASES))
    assert outputs["all-passed"] == "false"

    # The selection travelled as an artifact; its digest travelled as a job output and matches.
    selection = result.artifacts / "testops-evidence-selection-1" / "testops-evidence-selection.json"
    assert hashlib.sha256(selection.read_bytes()).hexdigest() == outputs["selection-sha256"]
    document = json.loads(selection.read_text())
    assert [case["key"] for case in document["cases"]] == list(CASES)
    assert document["context"]["run-id"] == 1 and document["context"]["repository"] == REPOSITORY
    # The contract select compiled from the YAML travelled beside it, bound by the selection; the later
    # jobs built the contract from it instead of parsing the YAML again.
    compiled = selection.with_name("testops-evidence-selection-contract.json")
    assert hashlib.sha256(compiled.read_bytes()).hexdigest() == document["contract-compiled-sha256"]
    assert "contract: compiled by select" in result.log

    # Every matrix cell ran, in its lane, and left its cell result.
    cells = {path.stem: path.parent.name for path in result.artifacts.glob("testops-evidence-cells-1-*/*.json")
             if path.name != "testops-evidence-worker.json"}
    assert sorted(cells) == sorted(CASES)
    # Each worker's artifact was bound to its own upload step by collect-cells, then read by export alone.
    assert "4 of 4 worker artifacts were uploaded by their own worker's upload step" in summaries_of(result,
                                                                                                  "export-collect-cells")
    assert "bound to its worker's upload step by collect-cells" in summaries_of(result, "export-export")
    # act evaluated each worker's report step name over its upload's outputs, as GitHub's runner does, and
    # the ids collect-cells bound are exactly the ones those names carried.
    evaluated = set(re.findall(r"Run Main testops-evidence: uploaded artifact ([0-9]+) sha256:[0-9a-f]{64}\b",
                               result.log))
    bound = set(re.findall(r"`testops-evidence-cells-1-[^`]+` \| ([0-9]+) \|",
                           summaries_of(result, "export-collect-cells")))
    assert len(bound) == len(CASES) and bound == evaluated, (bound, evaluated)
    for key, artifact in cells.items():
        assert artifact.startswith(f"testops-evidence-cells-1-{CASES[key][0]}-")
    results = list((result.artifacts / "testops-evidence-results-1" / "allure-results").glob("*-result.json"))
    assert len(results) == len(CASES)

    # The publication survived the run: one artifact with the results, their receipt and the HTML report
    # (built with the pinned Allure Report 3), whose statistics equal the receipt; launch-url is its URL.
    publication = result.artifacts / "testops-evidence-report-agent-protocol-1-1"
    assert outputs["launch-url"] == publication.resolve().as_uri() and outputs["report-built"] == "true"
    receipt = json.loads((publication / "allure-results-receipt.json").read_text())
    assert len(list((publication / "allure-results").glob("*-result.json"))) == len(CASES)
    stats = json.loads((publication / "allure-report" / "summary.json").read_text())["stats"]
    assert {key: stats.get(key, 0) for key in receipt["counts"]} == receipt["counts"]
    assert (publication / "allure-report" / "index.html").is_file()
    history = result.artifacts / "testops-evidence-history-agent-protocol-1-1" / "history.jsonl"
    assert history.read_bytes() == (publication / "history.jsonl").read_bytes()
    assert not list(result.artifacts.glob("testops-evidence-failure-*"))  # nothing was refused
    # attest is off by default: the publish job hashed no statement and the attest job did not run.
    assert not list(result.artifacts.glob("testops-evidence-attestation-*"))
    assert outputs.get("attestation-url", "") == ""
    assert not any(line.startswith("[attest]") for line in result.log.splitlines())

    # guard and select read this run through PyGithub from the REST test server, with the token.
    runs = github.requests_to("run")
    assert len(runs) >= 2 and all(record.authorization for record in runs)

    # Each phase wrote its step summary; a worker's summary per matrix cell.
    summaries = result.summaries
    assert set(summaries) >= {"select-guard", "select-select", "native-verify-selection",
                              "external-verify-selection", "export-export", "publish-upload", "publish-verify"}
    assert len(summaries["native-verify-selection"]) == 3 and len(summaries["external-verify-selection"]) == 1
    select_summary = summaries["select-select"][0]
    for key in CASES:
        assert key in select_summary
    # The YAML contract was parsed once, by guard: select built it from guard's compiled form (same job), and
    # the phases after it from select's (the selection artifact).
    assert "| contract | compiled by guard, bound by digest |" in select_summary
    for job_mode in ("export-export", "publish-upload", "publish-verify"):
        assert "| contract | compiled by select, bound by digest |" in summaries[job_mode][0], job_mode
    assert "budget-stop" in summaries["export-export"][0]
    # The verdict first (issue 27): the campaign summary of the publish job's verify is the one block with a
    # heading (on main: 13 blocks for this campaign); every other step is one line, its tables in <details>.
    texts = [text for texts in summaries.values() for text in texts]
    assert sum(text.count("## testops-evidence") for text in texts) == 1
    verdict = [line for line in summaries["publish-verify"][0].splitlines() if line.strip()][:4]
    assert re.fullmatch(r"### ❌ \S+: \d+ of \d+ passed, .*", verdict[2]), verdict
    assert verdict[3].startswith("**Pass rate "), verdict
    print(f"\nsummary blocks: {len(texts)} step summaries, {sum(t.count('## testops-evidence') for t in texts)} "
          f"headings, {sum(len(t.splitlines()) for t in texts)} lines, "
          f"{sum(_visible_lines(t) for t in texts)} visible outside <details>")
    every = "\n".join(text for texts in summaries.values() for text in texts)
    assert SENTINEL_TOKEN not in every
    for path in result.artifacts.rglob("*"):
        if path.is_file():
            assert SENTINEL_TOKEN not in path.read_text(encoding="utf-8", errors="replace"), path


def test_campaign_measures_repeated_trials_end_to_end(act_binary: Path, tmp_path: Path, github: GitHubServer) -> None:
    """Issue 16: one job per trial, each trial's cell in its own artifact, and the policy's verdict published."""
    contract = contract_text(1234567, trials={"get-task-context": "{count: 2, verdict: all}",
                                              "hire-agent-approval": "{count: 2, verdict: any, jobs: per-case}"})
    result = run_act(act_binary, tmp_path, github, contract=contract)
    assert result.returncode == 0, result.log[-6000:]
    outputs = result.outputs
    assert (outputs["passed-count"], outputs["failed-count"], outputs["broken-count"]) == ("3", "1", "0")
    assert outputs["verified-count"] == str(len(CASES))
    cells = sorted(str(path.relative_to(result.artifacts)) for path in result.artifacts.glob("testops-evidence-cells-1-*/**/*.json")
                   if path.name != "testops-evidence-worker.json")
    assert cells == [
        "testops-evidence-cells-1-external-hire-agent-approval/hire-agent-approval/trial-1.json",
        "testops-evidence-cells-1-external-hire-agent-approval/hire-agent-approval/trial-2.json",
        "testops-evidence-cells-1-native-budget-stop/budget-stop.json",
        "testops-evidence-cells-1-native-get-task-context-t1/get-task-context/trial-1.json",
        "testops-evidence-cells-1-native-get-task-context-t2/get-task-context/trial-2.json",
        "testops-evidence-cells-1-native-list-open-issues/list-open-issues.json",
    ]
    receipt = json.loads((result.artifacts / "testops-evidence-results-1" / "allure-results-receipt.json").read_text())
    rows = {row["key"]: row for row in receipt["results"]}
    assert [(t["trial"], t["status"], t["worker"]) for t in rows["get-task-context"]["trials"]] == [
        (1, "passed", "native-get-task-context-t1"), (2, "passed", "native-get-task-context-t2")]
    assert receipt["trial-counts"] == {"total": 6, "passed": 5, "failed": 1, "broken": 0}
    results = list((result.artifacts / "testops-evidence-results-1" / "allure-results").glob("*-result.json"))
    assert len(results) == len(CASES) + 2 + 2  # each repeated case: its trials and its verdict
    assert len(result.summaries["native-verify-selection"]) == 4  # two trial jobs and two cases
    assert "2/2 passed" in result.summaries["export-export"][0]


def seed_launched_plan(testops: TestOpsServer) -> tuple[int, int]:
    """TestOps as it is after running the plan: cases, plan, the GitHub job, a launch, and a job run that
    TestOps bound to this run's URL when GitHub started it. Returns (job run id, launch id)."""
    from testops_evidence.contract import contract_from_document, parse_contract_bytes

    text = contract_text(1234567, testops.url).encode("utf-8")
    contract = contract_from_document(parse_contract_bytes(text, "contract.yml"))
    # The job as TestOps created it on the workflow's first upload, here by allurectl under setup-allurectl's
    # uid (<repository>/actions/workflows/<workflow id>/<attempt>). Not Allure 3's <repository>_<workflow
    # name>: GitHub gives a called workflow its caller's name in GITHUB_WORKFLOW, act the called one's.
    seeded = testops.seed_contract(contract, job_url=WORKFLOW_URL,
                                   job_external_id=f"{REPOSITORY}/actions/workflows/{WORKFLOW_ID}/1")
    launch = testops.add_launch(PROJECT, "agent-protocol #1")
    job_run = testops.add_jobrun(seeded["job-id"], launch_id=launch["id"], stage="scheduled", url=RUN_URL,
                                 case_ids=seeded["case-ids"])
    return job_run["id"], launch["id"]


def test_campaign_runs_end_to_end_against_testops(act_binary: Path, tmp_path: Path, github: GitHubServer) -> None:
    with TestOpsServer(token=TESTOPS_TOKEN, visible_after_polls=1) as testops:
        job_run_id, launch_id = seed_launched_plan(testops)
        result = run_act(act_binary, tmp_path, github, inputs={"job-run-id": str(job_run_id)}, testops=testops)
        assert result.returncode == 0, result.log[-6000:]

        outputs = result.outputs
        assert outputs["selected-count"] == str(len(CASES))
        assert (outputs["passed-count"], outputs["failed-count"], outputs["broken-count"]) == ("3", "1", "0")
        assert outputs["published"] == "true" and outputs["verified-count"] == str(len(CASES))
        assert outputs["all-passed"] == "false"
        assert outputs["launch-url"] == f"{testops.url}/launch/{launch_id}"

        # The selection is bound to the job run TestOps launched, and the results landed in its launch.
        selection = result.artifacts / "testops-evidence-selection-1" / "testops-evidence-selection.json"
        document = json.loads(selection.read_text())
        assert document["backend"] == "testops" and document["source"] == "job-run"
        assert (document["testops"]["job-run-id"], document["testops"]["launch-id"]) == (job_run_id, launch_id)
        landed = testops.launch_results(launch_id)
        assert sorted(result["testCaseId"] for result in landed) == [194, 195, 196, 197]
        statuses = {result["fullName"].rsplit("/", 1)[1]: result["status"] for result in landed}
        assert statuses == {key: "passed" if ok else "failed" for key, (_, _, ok) in CASES.items()}

        # Only the publish job wrote to TestOps (the upload session API, and the evidence: launch attachments,
        # or result attachments on 25.4); every request was authenticated.
        writers = {entry.route.split("/")[1] for entry in testops.mutations()}
        assert writers <= {"upload", "launch", "testresult"}, writers
        assert all(entry.status != 401 for entry in testops.requests())

        summaries = result.summaries
        assert set(summaries) >= {"select-guard", "select-select", "native-verify-selection",
                                  "external-verify-selection", "export-export", "publish-upload", "publish-verify"}
        assert f"/jobrun/{job_run_id}" in summaries["select-select"][0]
        every = "\n".join(text for texts in summaries.values() for text in texts)
        for secret in (SENTINEL_TOKEN, TESTOPS_TOKEN):
            assert secret not in every
            for path in result.artifacts.rglob("*"):
                if path.is_file():
                    assert secret not in path.read_text(encoding="utf-8", errors="replace"), path


def test_bootstrap_template_shows_the_difference_then_reconciles_testops(act_binary: Path, tmp_path: Path,
                                                                        github: GitHubServer) -> None:
    drifted = "list-open-issues"
    with TestOpsServer(token=TESTOPS_TOKEN) as testops:
        testops.add_project(PROJECT)
        for number, key in enumerate(CASES):
            title = "An old title" if key == drifted else key.replace("-", " ").capitalize()
            testops.add_case(PROJECT, title, f"agents/protocol/{key}", id=194 + number)
        testops.add_plan(PROJECT, "Agent protocol evals", [194], id=PLAN)  # a plan that lost three cases

        # The event payload carries dispatch inputs as strings, as GitHub writes it.
        dry = run_act(act_binary, tmp_path / "dry", github, inputs={"dry-run": "true"}, testops=testops,
                      caller=BOOTSTRAP_CALLER, template="bootstrap.yml")
        assert dry.returncode == 0, dry.log[-6000:]
        assert testops.mutations() == []  # a dry run only reads
        assert json.loads(dry.outputs["updated-cases"]) == [drifted]
        assert set(dry.summaries) >= {"guard-guard", "bootstrap-bootstrap"}
        assert drifted in dry.summaries["bootstrap-bootstrap"][0]

        real = run_act(act_binary, tmp_path / "real", github, inputs={"dry-run": "false"}, testops=testops,
                       caller=BOOTSTRAP_CALLER, template="bootstrap.yml")
        assert real.returncode == 0, real.log[-6000:]
        assert json.loads(real.outputs["updated-cases"]) == [drifted]
        assert (json.loads(real.outputs["created-cases"]), real.outputs["plan-id"]) == ([], str(PLAN))
        assert testops.cases[195]["name"] == drifted.replace("-", " ").capitalize()
        assert sorted(testops.plan_case_ids(PLAN)) == [194, 195, 196, 197]
        every = "\n".join(text for run in (dry, real) for texts in run.summaries.values() for text in texts)
        assert TESTOPS_TOKEN not in every and SENTINEL_TOKEN not in every


def test_import_template_imports_remote_cells_with_provenance_into_the_ledger(act_binary: Path, tmp_path: Path,
                                                                             github: GitHubServer) -> None:
    import import_builders as remote

    cells = [remote.Cell("exec-1"), remote.Cell("exec-2", case="company-credential-approval", ordinal=1)]
    github.add_run(REPOSITORY, remote.RUN_ID, path=remote.WORKFLOW, head_sha=remote.HEAD_SHA, head_branch="main")
    github.add_artifact(remote.RUN_ID, "cells-a", remote.artifact_zip(cells), artifact_id=501)
    result = run_act(act_binary, tmp_path, github, inputs={"source-run-id": str(remote.RUN_ID)},
                     caller=IMPORT_CALLER, template="import.yml",
                     contract=json.dumps(remote.contract_document()),
                     extra={"evals/import-intent.json": json.dumps(remote.intent_document(cells))})
    assert result.returncode == 0, result.log[-6000:]
    assert (result.outputs["imported-count"], result.outputs["duplicate-count"]) == ("2", "0")

    # The updated ledger is the run's artifact; its provenance came from the API, not from the archive.
    ledger = json.loads((result.artifacts / "testops-evidence-ledger-1" / "campaign-ledger.json").read_text())
    assert [record["provenance"]["run-id"] for record in ledger["imports"]] == [remote.RUN_ID] * 2
    assert {record["provenance"]["artifact-id"] for record in ledger["imports"]} == {501}
    assert [record.authorization for record in github.requests_to("blob")] == [False]  # token not forwarded
    assert set(result.summaries) >= {"guard-guard", "import-import"}
    every = "\n".join(text for texts in result.summaries.values() for text in texts)
    assert SENTINEL_TOKEN not in every


REFUSING_CASE_COMMAND = CASE_COMMAND.replace(
    'with open(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"], "w", encoding="utf-8") as handle:',
    'if row["key"] == "list-open-issues":\n'
    '    raise SystemExit(1)  # crashes before writing its cell result: case.no_cell_result\n'
    'with open(os.environ["TESTOPS_EVIDENCE_CELL_RESULT"], "w", encoding="utf-8") as handle:')


def failure_artifact(result: ActRun, name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The failure.json and the step summaries a refused job kept as its artifact."""
    directory = result.artifacts / name
    assert directory.is_dir(), f"no artifact {name}: {sorted(p.name for p in result.artifacts.iterdir())}"
    summaries = {path.name: path.read_text() for path in (directory / "summaries").glob("*.md")}
    return json.loads((directory / "failure.json").read_text()), summaries


def test_a_refused_matrix_job_leaves_its_failure_artifact_and_the_case_is_published_broken(
        act_binary: Path, tmp_path: Path, github: GitHubServer) -> None:
    assert REFUSING_CASE_COMMAND != CASE_COMMAND
    result = run_act(act_binary, tmp_path, github, extra={"evals/run_case.py": REFUSING_CASE_COMMAND})
    # The matrix job's refusal, kept like the action's, with the worker's own step summaries.
    failure, summaries = failure_artifact(result, "testops-evidence-failure-native-list-open-issues-1")
    assert (failure["mode"], failure["code"], failure["exit-code"]) == ("case", "case.no_cell_result", 3)
    assert "`case.no_cell_result`" in summaries["case.md"] and "verify-selection.md" in summaries
    # Only that job failed; the campaign went on and published the case as broken, not recorded.
    assert sorted(p.name for p in result.artifacts.glob("testops-evidence-failure-*")) == [
        "testops-evidence-failure-native-list-open-issues-1"]
    receipt = json.loads((result.artifacts / "testops-evidence-report-agent-protocol-1-1"
                          / "allure-results-receipt.json").read_text())
    assert {row["key"]: row["status"] for row in receipt["results"]}["list-open-issues"] == "broken"
    for path in result.artifacts.rglob("*"):
        if path.is_file():
            assert SENTINEL_TOKEN not in path.read_text(encoding="utf-8", errors="replace"), path


def test_a_refused_select_job_leaves_its_failure_artifact(act_binary: Path, tmp_path: Path,
                                                          github: GitHubServer) -> None:
    # select holds both tokens (GitHub's and TestOps'): neither may reach its failure artifact.
    with TestOpsServer(token=TESTOPS_TOKEN) as testops:
        result = run_act(act_binary, tmp_path, github, inputs={"cases": "no-such-case"}, testops=testops,
                         contract=contract_text(1234567))
    assert result.returncode != 0
    failure, summaries = failure_artifact(result, "testops-evidence-failure-select-1")
    assert (failure["mode"], failure["code"]) == ("select", "contract.unknown_case")
    assert "contract.unknown_case" in summaries["select.md"]
    assert sorted(p.name for p in result.artifacts.iterdir() if not p.name.startswith(".")) == [
        "testops-evidence-failure-select-1"]
    for path in result.artifacts.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert SENTINEL_TOKEN not in text and TESTOPS_TOKEN not in text, path


def test_a_refused_guard_leaves_its_failure_artifact(act_binary: Path, tmp_path: Path, github: GitHubServer) -> None:
    contract = contract_text(1234567).replace(f"workflows: [{WORKFLOW}]", "workflows: [.github/workflows/other.yml]")
    result = run_act(act_binary, tmp_path, github, contract=contract)
    assert result.returncode != 0
    # guard is the first step of the select job: that job keeps the refusal, and select never ran.
    failure, summaries = failure_artifact(result, "testops-evidence-failure-select-1")
    assert (failure["mode"], failure["code"], failure["exit-code"]) == ("guard", "guard.workflow", 3)
    assert "not admitted" in summaries["guard.md"] and "guard.workflow" in summaries["guard.md"]
    assert sorted(p.name for p in result.artifacts.iterdir() if not p.name.startswith(".")) == [
        "testops-evidence-failure-select-1"]
    assert "select.md" not in summaries
    for path in result.artifacts.rglob("*"):
        if path.is_file():
            assert SENTINEL_TOKEN not in path.read_text(encoding="utf-8", errors="replace"), path
