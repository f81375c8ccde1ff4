"""The reusable workflow templates: wiring, least privilege, token placement, pinning, and the case loop.

The validators (check-jsonschema, zizmor, actionlint) check syntax and known-bad patterns; these tests
check what only this project knows: which jobs may hold the TestOps token, that every ``with:`` of our
action is a real input of the mode it runs, that every ``steps.X.outputs.Y`` names an output the mode
sets, how the selection digest travels, and what the case loop actually does when it runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from testops_evidence import __version__, interface
from testops_evidence.publication.attestation import PREDICATE_TYPE

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "workflows-templates"
ACTION = "testops-evidence/testops-evidence/composite"
THIRD_PARTY = re.compile(r"^(actions/(checkout|upload-artifact|download-artifact|attest))@([0-9a-f]{40})$")
# Jobs that may see the TestOps token; every other job must not even mention it.
# A matrix row's identity: the plan's worker job (`<lane>-<key>` or `<lane>-shard-<n>`, campaign/matrix.py),
# which also names its cell artifact. (Not strategy.job-index: act leaves it empty, and export binds cells
# to the plan's job names.)
MATRIX_ID = "${{ matrix.job }}"
TOKEN_JOBS = {"campaign.yml": {"select", "stream", "publish"}, "bootstrap.yml": {"bootstrap"}, "import.yml": set()}


def load(name: str) -> dict[str, Any]:
    return YAML(typ="safe").load((TEMPLATES / name).read_text(encoding="utf-8"))


def all_templates() -> list[str]:
    return sorted(path.name for path in TEMPLATES.glob("*.yml"))


def our_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in job.get("steps", []) if str(step.get("uses", "")).startswith(ACTION + "@")]


def test_the_three_templates_exist() -> None:
    assert all_templates() == ["bootstrap.yml", "campaign.yml", "import.yml"]


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_template_is_reusable_and_least_privilege(name: str) -> None:
    workflow = load(name)
    assert list(workflow["on"]) == ["workflow_call"]
    assert workflow["permissions"] == {}  # nothing by default; each job asks for what it needs
    for job_id, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int | str), f"{job_id}: no timeout-minutes"
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{job_id}: permissions must be explicit"
        if (name, job_id) == ("campaign.yml", "pages"):
            # The one job that writes: it pushes the report to the Pages branch, only when asked to.
            assert permissions == {"contents": "write"} and job["if"].startswith("${{ inputs.pages && ")
            continue
        if (name, job_id) == ("campaign.yml", "attest"):
            # The one job that signs: a Sigstore certificate for the workflow's OIDC token, only when asked to.
            assert permissions == {"id-token": "write", "attestations": "write"}
            assert job["if"].startswith("${{ inputs.attest && !inputs.local && ")
            continue
        if (name, job_id) == ("campaign.yml", "publish"):
            # verify's check run and pull-request comment (check-run, pr-comment): GitHub's own objects, never
            # the repository's contents; verify writes them only when its input asks.
            assert permissions == {"contents": "read", "actions": "read", "checks": "write",
                                   "pull-requests": "write"}
            verify = next(s for s in our_steps(job) if s["with"]["mode"] == "verify")
            assert (verify["with"]["check-run"], verify["with"]["pr-comment"]) == (
                "${{ inputs.check-run }}", "${{ inputs.pr-comment }}")
            assert workflow["on"]["workflow_call"]["inputs"]["check-run"]["default"] is False
            assert workflow["on"]["workflow_call"]["inputs"]["pr-comment"]["default"] is False
            permissions = {k: v for k, v in permissions.items() if k not in ("checks", "pull-requests")}
        assert set(permissions.values()) <= {"read"}, f"{job_id}: writes {permissions}"
        assert set(permissions) <= {"contents", "actions"}, f"{job_id}: {sorted(permissions)}"
        group = job.get("concurrency", {}).get("group", "")
        assert group, f"{job_id}: no concurrency group"
        if "strategy" in job:  # a matrix job's group must tell its jobs apart, or they would cancel each other
            assert MATRIX_ID in group, f"{job_id}: matrix concurrency group without the row's identity"


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_no_expression_inside_run_and_everything_pinned(name: str) -> None:
    workflow = load(name)
    raw = (TEMPLATES / name).read_text(encoding="utf-8")
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in str(step.get("run", "")), f"{job_id}: expression inside run: (use env:)"
            uses = step.get("uses")
            if uses is None:
                continue
            if uses.startswith(ACTION + "@"):
                assert uses == f"{ACTION}@v{__version__}"
                continue
            match = THIRD_PARTY.match(uses)
            assert match, f"{job_id}: {uses} is not an allowed action pinned by full SHA"
            # The version comment is what reviewers and dependabot read.
            assert re.search(rf"uses: {re.escape(uses)} # v\d+\.\d+\.\d+\n", raw), f"{uses} has no version comment"
            if match.group(2) == "checkout":
                assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_only_token_jobs_see_the_testops_token(name: str) -> None:
    workflow = load(name)
    for job_id, job in workflow["jobs"].items():
        text = json.dumps(job)
        mentions = "secrets.testops-token" in text
        assert mentions == (job_id in TOKEN_JOBS[name]), f"{job_id}: token {'present' if mentions else 'absent'}"
        assert "ALLURE_TOKEN" not in text and "TESTOPS_TOKEN" not in text
        for step in our_steps(job):
            mode = step["with"]["mode"]
            if "testops-token" in step["with"]:
                assert mode in interface.TOKEN_PHASES, f"{job_id}: token given to mode {mode}"
            assert mode not in interface.WORKER_PHASES or "secrets." not in json.dumps(step)


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_action_inputs_and_outputs_exist_for_the_mode(name: str) -> None:
    workflow = load(name)
    for job_id, job in workflow["jobs"].items():
        modes: dict[str, str] = {}
        for step in our_steps(job):
            mode = step["with"]["mode"]
            assert mode in interface.MODES
            allowed = {spec.name for spec in interface.inputs_for(mode)} | {"mode"}
            assert set(step["with"]) <= allowed, f"{job_id}/{mode}: {sorted(set(step['with']) - allowed)}"
            if "id" in step:
                modes[step["id"]] = mode
        text = json.dumps(job)
        for step_id, output in re.findall(r"steps\.([a-z0-9_-]+)\.outputs\.([a-z0-9-]+)", text):
            if step_id in modes:
                names = {spec.name for spec in interface.outputs_for(modes[step_id])}
                assert output in names, f"{job_id}: mode {modes[step_id]} has no output {output}"
        for need, output in re.findall(r"needs\.([a-z0-9_-]+)\.outputs\.([a-z0-9-]+)", text):
            assert output in workflow["jobs"][need].get("outputs", {}), f"{job_id}: needs.{need}.outputs.{output}"


def test_campaign_wiring() -> None:
    jobs = load("campaign.yml")["jobs"]
    # guard and select are steps of the first job: select builds the contract guard compiled, bound by guard's
    # output, and guard never sees the TestOps token.
    assert "needs" not in jobs["select"]
    guard, select = our_steps(jobs["select"])
    assert (guard["id"], guard["with"]["mode"], select["with"]["mode"]) == ("guard", "guard", "select")
    assert select["with"]["guard-sha256"] == "${{ steps.guard.outputs.guard-sha256 }}"
    assert "testops-token" not in guard["with"] and "testops-token" in select["with"]
    assert guard["with"]["contract"] == select["with"]["contract"] and guard["with"]["local"] == select["with"]["local"]
    assert set(jobs["export"]["needs"]) == {"select", "native", "external", "stream"}
    # publish: stream — beside the matrix: it needs select, not the workers; it holds the TestOps token (it sends
    # the ready cases into the launch with the TestOps backend), the workers never do.
    stream = jobs["stream"]
    assert stream["needs"] == "select" and "inputs.publish == 'stream'" in stream["if"]
    assert stream["permissions"] == {"contents": "read", "actions": "read"}
    (streamed,) = [step for step in our_steps(stream) if step["with"]["mode"] == "stream"]
    assert streamed["with"]["testops-token"] == "${{ !inputs.local && secrets.testops-token || '' }}"
    (checked,) = [step for step in our_steps(jobs["export"]) if step["with"]["mode"] == "verify-stream"]
    assert checked["with"]["stream-sha256"] == "${{ needs.stream.outputs.stream-sha256 }}"
    assert checked["with"]["receipt-sha256"] == "${{ steps.export.outputs.receipt-sha256 }}"
    # The stream artifact is downloaded by its id only (an empty id downloads every artifact of the run), into the
    # runner's temp directory; verify-stream reads it by the step's download-path (without the download it gets
    # none, finds no stream directory at its default and refuses).
    (fetched,) = [step for step in jobs["export"]["steps"] if step.get("id") == "stream-download"]
    assert "needs.stream.outputs.stream-artifact-id != ''" in fetched["if"]
    assert fetched["with"]["artifact-ids"] == "${{ needs.stream.outputs.stream-artifact-id }}"
    assert fetched["with"]["path"] == "${{ runner.temp }}/testops-evidence-stream"
    assert checked["with"]["stream-dir"] == "${{ steps.stream-download.outputs.download-path }}"
    assert set(jobs["publish"]["needs"]) == {"select", "export", "stream"}
    (uploaded,) = [step for step in our_steps(jobs["publish"]) if step["with"]["mode"] == "upload"]
    assert uploaded["with"]["stream-sha256"] == "${{ inputs.publish == 'stream' && needs.stream.outputs.stream-sha256 || '' }}"
    for lane in ("native", "external"):
        job = jobs[lane]
        assert job["needs"] == "select"
        assert job["if"] == f"${{{{ fromJSON(needs.select.outputs.{lane}-count) > 0 }}}}"
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.select.outputs.{lane}-matrix) }}}}"
        assert job["strategy"]["max-parallel"] == f"${{{{ fromJSON(needs.select.outputs.{lane}-max-parallel) }}}}"
        assert job["strategy"]["fail-fast"] is False
        # The worker re-hashes the selection against the digest that travelled as a job output, before
        # it runs anything.
        kinds = [step.get("with", {}).get("mode") or step.get("name") or step["uses"].split("@")[0]
                 for step in job["steps"]]
        assert kinds.index("verify-selection") < kinds.index("run the cases")
        verify = next(step for step in our_steps(job) if step["with"]["mode"] == "verify-selection")
        assert verify["with"]["selection-sha256"] == "${{ needs.select.outputs.selection-sha256 }}"
    export = next(step for step in our_steps(jobs["export"]) if step["with"]["mode"] == "export")
    assert export["with"]["selection-sha256"] == "${{ needs.select.outputs.selection-sha256 }}"
    assert export["with"]["fail-on-failed-cases"] is False  # failed cases are still published
    assert "!cancelled()" in jobs["export"]["if"] and "!cancelled()" in jobs["publish"]["if"]
    modes = [step["with"]["mode"] for job in jobs.values() for step in our_steps(job)]
    assert modes == ["guard", "select", "verify-selection", "verify-selection", "stream", "collect-cells", "export",
                     "verify-stream", "upload", "verify", "pages"]
    assert jobs["pages"]["needs"] == ["select", "export", "publish"] and "!inputs.local" in jobs["pages"]["if"]
    pages_step = next(step for step in our_steps(jobs["pages"]) if step["with"]["mode"] == "pages")
    assert pages_step["with"]["receipt-sha256"] == "${{ needs.export.outputs.receipt-sha256 }}"
    # pages reads select's compiled contract from the selection artifact, bound by the selection's digest.
    assert pages_step["with"]["selection-sha256"] == "${{ needs.select.outputs.selection-sha256 }}"
    # pages serves only the publication upload listed, file by file: its manifest's digest travels from publish.
    assert pages_step["with"]["report-tree-sha256"] == "${{ needs.publish.outputs.report-tree-sha256 }}"
    assert jobs["publish"]["outputs"]["report-tree-sha256"] == "${{ steps.upload.outputs.report-tree-sha256 }}"
    downloads = {step["with"]["artifact-ids"]: step["with"].get("path") for step in jobs["pages"]["steps"]
                 if step.get("uses", "").startswith("actions/download-artifact@")}
    assert downloads["${{ needs.select.outputs.selection-artifact-id }}"] == "${{ runner.temp }}/testops-evidence-selection"
    assert pages_step["with"]["selection-dir"] == "${{ steps.selection.outputs.download-path }}"
    # Every job that reads the selection reads it from its own directory, by the id select's upload reported.
    assert jobs["select"]["outputs"]["selection-artifact-id"] == "${{ steps.selection-artifact.outputs.artifact-id }}"
    readers = [step for job in jobs.values() for step in our_steps(job)
               if step["with"]["mode"] in ("verify-selection", "collect-cells", "export", "upload", "verify", "pages")]
    assert len(readers) == 7
    for step in readers:
        assert step["with"]["selection-dir"] == "${{ steps.selection.outputs.download-path }}", step
        assert "selection-path" not in step["with"], step


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_a_job_that_writes_downloads_each_artifact_into_a_directory_of_its_own(name: str) -> None:
    """A worker can replace an artifact of its run (the runtime token uploads with overwrite): in a job that holds
    a write permission, an artifact extracted into the workspace could plant files where that job's own steps
    look (``testops-evidence-pages/.git/config`` before the step that runs git with a write token). Each is
    extracted into a directory no other step of the job uses (download-artifact refuses paths that leave it)."""
    for job_id, job in load(name)["jobs"].items():
        if "write" not in set(job.get("permissions", {}).values()):
            continue
        paths = [str(step.get("with", {}).get("path", "")).rstrip("/") for step in job["steps"]
                 if str(step.get("uses", "")).startswith("actions/download-artifact@")]
        assert all(path not in ("", ".") and not path.removeprefix("${{ runner.temp }}/").startswith(("/", "..", "$"))
                   for path in paths), (job_id, paths)
        assert len(set(paths)) == len(paths), (job_id, paths)
        for step in our_steps(job):
            for key in ("pages-dir", "state-dir", "results-dir"):
                given = str(step["with"].get(key, "")).rstrip("/")
                assert given == "" or given not in paths, (job_id, key, given)


def test_worker_artifacts_are_bound_to_their_jobs_by_names_collect_cells_knows() -> None:
    """collect-cells finds each worker by its job name and upload step (campaign/workers.py); export reads only
    the artifacts it verified, each in its own directory, and the publish job gets both travelled digests."""
    from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP

    jobs = load("campaign.yml")["jobs"]
    for lane in ("native", "external"):
        job = jobs[lane]
        assert job["name"] == "${{ inputs.artifact-prefix }} ${{ matrix.job }}"
        index = next(i for i, step in enumerate(job["steps"]) if step.get("name") == UPLOAD_STEP)
        upload, report = job["steps"][index], job["steps"][index + 1]
        assert upload["with"]["name"] == "${{ inputs.artifact-prefix }}-cells-${{ github.run_attempt }}-${{ matrix.job }}"
        assert upload["with"]["if-no-files-found"] == "error"  # the worker record is always there
        assert "overwrite" not in upload["with"]  # a second upload under the name fails: squatting shows
        # The upload's id and digest reach the job's own step record through the next step's evaluated name.
        assert upload["id"] == "upload" and upload["if"] == report["if"] == "${{ !cancelled() }}"
        assert report["name"] == REPORT_EXPRESSION
        assert "${{" not in report["run"]  # the outputs reach the shell through env only
    export = jobs["export"]
    assert export["permissions"] == {"contents": "read", "actions": "read"}
    steps = export["steps"]
    collect = next(index for index, step in enumerate(steps) if step.get("with", {}).get("mode") == "collect-cells")
    download = steps[collect + 1]
    assert download["with"] == {"artifact-ids": "${{ steps.collect.outputs.artifact-ids }}",
                                "path": "testops-evidence-cells"}
    assert download["if"] == "${{ steps.collect.outputs.artifact-ids != '' }}"  # empty would download all
    assert steps[collect]["if"] == "${{ !inputs.local }}"  # a local run has no job records: by pattern instead
    assert steps[collect + 2]["if"] == "${{ inputs.local }}" and "pattern" in steps[collect + 2]["with"]
    # Each worker's artifact in a directory of its own (path/<artifact name>/), never merged with another's.
    assert all("merge-multiple" not in step["with"] for step in (download, steps[collect + 2]))
    exporting = next(step for step in our_steps(export) if step["with"]["mode"] == "export")
    assert exporting["with"]["artifact-prefix"] == "${{ inputs.artifact-prefix }}"
    for mode in ("upload", "verify"):
        step = next(s for s in our_steps(jobs["publish"]) if s["with"]["mode"] == mode)
        assert step["with"]["receipt-sha256"] == "${{ needs.export.outputs.receipt-sha256 }}"
        assert step["with"]["selection-sha256"] == "${{ needs.select.outputs.selection-sha256 }}"


def test_native_and_external_jobs_are_the_same_but_for_the_lane() -> None:
    jobs = load("campaign.yml")["jobs"]
    native = json.dumps(jobs["native"], sort_keys=True)
    external = json.dumps(jobs["external"], sort_keys=True).replace("external", "native")
    assert native == external


def test_bootstrap_and_import_templates() -> None:
    bootstrap = load("bootstrap.yml")
    assert bootstrap["on"]["workflow_call"]["inputs"]["dry-run"]["default"] is True
    assert [step["with"]["mode"] for job in bootstrap["jobs"].values() for step in our_steps(job)] == ["guard", "bootstrap"]
    imported = load("import.yml")
    assert [step["with"]["mode"] for job in imported["jobs"].values() for step in our_steps(job)] == ["guard", "import"]
    assert "secrets" not in imported["on"]["workflow_call"]


# --- the case loop, run for real --------------------------------------------------------------------


def case_loop_script() -> str:
    job = load("campaign.yml")["jobs"]["native"]
    return next(step for step in job["steps"] if step.get("name") == "run the cases")["run"]


def write_selection(workdir: Path, cases: list[dict[str, Any]]) -> None:
    document = {"context": {"head-sha": "a" * 40}, "profile": {"id": "p1", "model": "m"}, "cases": cases}
    (workdir / "testops-evidence-selection.json").write_text(json.dumps(document))


def run_loop(workdir: Path, keys: list[str], command: str, secrets: dict[str, str],
             path: str | None = None, **matrix: Any) -> subprocess.CompletedProcess[str]:
    step = load("campaign.yml")["jobs"]["native"]["steps"]
    env_spec = next(s for s in step if s.get("name") == "run the cases")["env"]
    env = {"PATH": path or os.environ["PATH"], "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "1",
           "CASE_COMMAND": command, "CASE_KEYS": json.dumps(keys), "CASE_SECRETS": json.dumps(secrets),
           "CELLS_DIR": env_spec["CELLS_DIR"], "SELECTION_PATH": env_spec["SELECTION_PATH"].replace(
               "${{ steps.selection.outputs.download-path }}", str(workdir)),
           "SELECTION_SHA256": "5e1ec7" + "0" * 58, "STATE_DIR": str(workdir / "state"),
           "WORKER_JOB": "native-alpha",
           # toJSON of a matrix field the row does not have is "null"
           "CASE_TRIALS": json.dumps(matrix.get("trials")), "CASE_BUDGET": json.dumps(matrix.get("budget"))}
    return subprocess.run(["bash", "-c", case_loop_script()], cwd=workdir, env=env, capture_output=True,
                          text=True, check=False)


def case(key: str, credentials: list[str], timeout: int = 1) -> dict[str, Any]:
    return {"key": key, "credentials": credentials, "timeout-minutes": timeout, "lane": "native"}


def test_case_loop_gives_each_case_its_own_environment_and_credentials(tmp_path: Path) -> None:
    write_selection(tmp_path, [case("alpha", ["KEY_A"]), case("beta", ["KEY_B"])])
    command = ('python3 -c "import json,os; json.dump({k: v for k, v in os.environ.items() '
               'if k.startswith((\'TESTOPS_EVIDENCE_\', \'KEY_\', \'CASE_\'))}, '
               'open(os.environ[\'TESTOPS_EVIDENCE_CELL_RESULT\'], \'w\'))"')
    done = run_loop(tmp_path, ["alpha", "beta"], command, {"KEY_A": "secret-a", "KEY_B": "secret-b"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::add-mask::secret-a" in done.stdout and "::add-mask::secret-b" in done.stdout
    seen = {key: json.loads((tmp_path / "testops-evidence-cells" / f"{key}.json").read_text()) for key in ("alpha", "beta")}
    assert seen["alpha"]["KEY_A"] == "secret-a" and "KEY_B" not in seen["alpha"]  # only its own credentials
    assert seen["beta"]["KEY_B"] == "secret-b" and "KEY_A" not in seen["beta"]
    for key, env in seen.items():
        assert "CASE_SECRETS" not in env  # the secrets JSON itself is not passed on
        assert env["TESTOPS_EVIDENCE_CASE"] == key
        assert json.loads(env["TESTOPS_EVIDENCE_CASE_JSON"])["key"] == key
        assert env["TESTOPS_EVIDENCE_SOURCE_SHA"] == "a" * 40
        assert json.loads(env["TESTOPS_EVIDENCE_PROFILE"]) == {"id": "p1", "model": "m"}
        assert env["TESTOPS_EVIDENCE_ATTEMPT_ID"] == f"42-1-{key}"
        assert env["TESTOPS_EVIDENCE_CELL_RESULT"] == str(tmp_path / "testops-evidence-cells" / f"{key}.json")


def test_case_loop_fails_the_job_for_a_case_without_cell_result_but_runs_the_rest(tmp_path: Path) -> None:
    write_selection(tmp_path, [case("first", []), case("second", [])])
    command = '[ "$TESTOPS_EVIDENCE_CASE" = first ] && exit 3; echo "{}" > "$TESTOPS_EVIDENCE_CELL_RESULT"'
    done = run_loop(tmp_path, ["first", "second"], command, {})
    assert done.returncode == 3
    assert "::error title=case.no_cell_result::first: the case command (exit 3) wrote no cell result" in done.stdout
    assert (tmp_path / "testops-evidence-cells" / "second.json").exists()
    # The refusal is kept like an action's: failure.json and a summary copy in the state dir.
    failure = json.loads((tmp_path / "state" / "failure.json").read_text())
    assert (failure["mode"], failure["code"], failure["exit-code"]) == ("case", "case.no_cell_result", 3)
    assert [r["case"] for r in failure["refused"]] == ["first"]
    assert "`case.no_cell_result`" in (tmp_path / "state" / "summaries" / "case.md").read_text()


def test_case_loop_refuses_a_case_whose_credentials_are_missing(tmp_path: Path) -> None:
    write_selection(tmp_path, [case("needs-key", ["API_KEY"])])
    done = run_loop(tmp_path, ["needs-key"], 'echo ran > "$TESTOPS_EVIDENCE_CELL_RESULT"', {})
    assert done.returncode == 2
    assert "::error title=case.credentials::needs-key: case-secrets lacks API_KEY" in done.stdout
    assert not (tmp_path / "testops-evidence-cells" / "needs-key.json").exists()
    assert json.loads((tmp_path / "state" / "failure.json").read_text())["code"] == "case.credentials"


def test_docs_list_every_campaign_input_with_its_default_and_every_secret() -> None:
    docs = (ROOT / "docs" / "workflows.md").read_text(encoding="utf-8")
    call = load("campaign.yml")["on"]["workflow_call"]
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+) \|", docs, flags=re.MULTILINE))
    for name, spec in call["inputs"].items():
        assert name in rows, f"docs/workflows.md does not list the input {name}"
        if spec.get("required"):
            assert "required" in rows[name]
            continue
        default = spec["default"]
        shown = {True: "true", False: "false"}.get(default, str(default)) if default != "" else '""'
        assert rows[name].strip().startswith(f"`{shown}`"), f"{name}: docs say {rows[name].strip()}, template {shown}"
    for name in call["secrets"]:
        assert name in rows, f"docs/workflows.md does not list the secret {name}"
    for name in call["outputs"]:
        assert f"`{name}`" in docs, f"docs/workflows.md does not name the output {name}"


def test_annotation_titles_of_the_shipped_scripts_are_registered_codes_with_their_exit_codes() -> None:
    from testops_evidence.errors import REGISTRY

    shipped = [TEMPLATES / "campaign.yml", ROOT / "composite" / "setup.sh"]
    titles = {code for path in shipped for code in re.findall(r"::error title=([a-z_.]+)::", path.read_text())}
    assert titles == {"case.credentials", "case.no_cell_result", "setup.python", "setup.platform",
                      "artifact.extra_file"}
    for code in titles:
        assert code in REGISTRY, f"{code} is not in errors.REGISTRY"
    assert (REGISTRY["case.credentials"].exit_code, REGISTRY["case.no_cell_result"].exit_code) == (2, 3)
    setup = (ROOT / "composite" / "setup.sh").read_text()
    assert REGISTRY["setup.python"].exit_code == 2 and re.search(r"title=setup\.python::.*\n\s*exit 2\n", setup)


def test_case_loop_masks_every_line_of_a_multi_line_credential(tmp_path: Path) -> None:
    # A PEM key or a JSON service-account file in case-secrets: `::add-mask::` takes one line, so
    # printing the whole value would print its second and later lines in clear, by the masking itself.
    write_selection(tmp_path, [case("pem", ["PRIVATE_KEY"])])
    key = "-----BEGIN KEY-----\nc2VjcmV0LWxpbmUtdHdv\r\n  c2VjcmV0LWxpbmUtdGhyZWU=  \n\n-----END KEY-----\n"
    done = run_loop(tmp_path, ["pem"], 'echo "{}" > "$TESTOPS_EVIDENCE_CELL_RESULT"', {"PRIVATE_KEY": key})
    assert done.returncode == 0, done.stdout + done.stderr
    masked = [line[len("::add-mask::"):] for line in done.stdout.splitlines() if line.startswith("::add-mask::")]
    assert set(masked) == {"-----BEGIN KEY-----", "c2VjcmV0LWxpbmUtdHdv", "c2VjcmV0LWxpbmUtdGhyZWU=", "-----END KEY-----"}
    for line in done.stdout.splitlines():
        assert line.startswith("::add-mask::") or "c2VjcmV0" not in line, f"credential printed in clear: {line!r}"


def test_case_loop_starts_the_bash_found_on_path_by_its_full_path(tmp_path: Path) -> None:
    # On Windows a bare "bash" is looked up in System32 before PATH and starts WSL's bash.exe, not the Git
    # Bash the step runs in: the loop names the interpreter by the full path PATH gives it.
    import shutil

    write_selection(tmp_path, [case("which", [])])
    done = run_loop(tmp_path, ["which"], 'printf %s "$0" > "$TESTOPS_EVIDENCE_CELL_RESULT"', {})
    assert done.returncode == 0, done.stdout + done.stderr
    started = (tmp_path / "testops-evidence-cells" / "which.json").read_text()
    assert os.path.isabs(started) and started == shutil.which("bash", path=os.environ["PATH"])


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_two_calls_in_one_run_do_not_share_groups_or_artifact_names(name: str) -> None:
    # A caller may call a template twice in one run (two contracts, two source runs, a matrix over the
    # calling job), and both calls see the same `github` context. A concurrency group or artifact name
    # made only of it is shared: the second call's job waits, a third cancels it, and a second upload
    # of one artifact name fails. Each must depend on the call's own inputs.
    workflow = load(name)
    for job_id, job in workflow["jobs"].items():
        assert "${{ inputs." in job["concurrency"]["group"], f"{job_id}: group {job['concurrency']['group']}"
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
                assert "${{ inputs." in step["with"]["name"], f"{job_id}: artifact {step['with']['name']}"


def test_case_loop_skips_a_python3_that_does_not_run(tmp_path: Path) -> None:
    # Windows: `python3` on PATH is often the Microsoft Store alias, which only prints an advert and
    # exits 9009; the job's real interpreter is `python` (actions/setup-python makes no python3.exe).
    import sys

    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python3").write_text("#!/bin/sh\necho 'Python was not found; run without arguments to install from the Microsoft Store'\nexit 49\n")
    (stubs / "python3").chmod(0o755)
    (stubs / "python").symlink_to(sys.executable)
    work = tmp_path / "work"
    work.mkdir()
    write_selection(work, [case("stub", [])])
    done = run_loop(work, ["stub"], 'echo "{}" > "$TESTOPS_EVIDENCE_CELL_RESULT"', {},
                    path=f"{stubs}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "testops-evidence-cells" / "stub.json").read_text() == "{}\n"


@pytest.mark.parametrize("name", ["bootstrap.yml", "campaign.yml", "import.yml"])
def test_every_job_keeps_its_refusal_as_an_artifact(name: str) -> None:
    """A refused job's failure.json, step summaries and receipts outlive the runner (docs/troubleshooting.md)."""
    for job_id, job in load(name)["jobs"].items():
        last = job["steps"][-1]
        assert last.get("if") == "${{ failure() }}", f"{job_id}: the last step must keep the refusal"
        assert THIRD_PARTY.match(last["uses"]).group(2) == "upload-artifact", job_id  # type: ignore[union-attr]
        artifact = last["with"]
        unique = MATRIX_ID if "matrix" in job.get("strategy", {}) else job_id  # the plan's job: <lane>-<key>
        assert artifact["name"].endswith(f"-failure-{unique}-${{{{ github.run_attempt }}}}"), job_id
        paths = artifact["path"].splitlines()
        # The action's default state dir (settings.default_state_location): its JSON and the summary copies,
        # never the publication (it has an artifact of its own) nor anything outside the state dir.
        # (the logs of the tools a phase ran: Allure Report's and npm's, which name why a report failed)
        assert paths == ["${{ runner.temp }}/testops-evidence/*.json", "${{ runner.temp }}/testops-evidence/*.log",
                         "${{ runner.temp }}/testops-evidence/summaries/"]
        assert artifact["if-no-files-found"] == "ignore"


def test_the_publication_artifact_is_kept_after_verify_and_named_by_the_run() -> None:
    steps = load("campaign.yml")["jobs"]["publish"]["steps"]
    ids = [step.get("id") for step in steps]
    assert ids.index("upload") < ids.index("verify") < ids.index("publication")
    publication = steps[ids.index("publication")]
    assert "steps.verify.outputs.verified-count != ''" in publication["if"]
    assert publication["with"]["path"] == "${{ steps.upload.outputs.publication-dir }}"
    assert publication["with"]["name"] == "${{ inputs.artifact-prefix }}-report-${{ steps.upload.outputs.publication-name }}"
    outputs = load("campaign.yml")["jobs"]["publish"]["outputs"]
    assert outputs["launch-url"] == "${{ steps.publication.outputs.artifact-url || steps.upload.outputs.launch-url }}"


def test_local_reaches_every_phase_that_binds_a_run_context_and_keeps_the_testops_token_back() -> None:
    campaign = load("campaign.yml")
    assert campaign["on"]["workflow_call"]["inputs"]["local"] == {
        "description": campaign["on"]["workflow_call"]["inputs"]["local"]["description"], "type": "boolean",
        "default": False}
    binding = {spec for spec in interface.INPUTS_BY_NAME["local"].modes}
    seen = set()
    for job_id, job in campaign["jobs"].items():
        for step in our_steps(job):
            mode = step["with"]["mode"]
            if mode in binding:
                assert step["with"].get("local") == "${{ inputs.local }}", (job_id, mode)
                seen.add(mode)
            token = step["with"].get("testops-token")
            if token is not None:  # a local run never hands TestOps a token
                assert token == "${{ !inputs.local && secrets.testops-token || '' }}", (job_id, mode)
    assert seen == binding


def test_case_loop_runs_each_trial_and_stops_when_the_jobs_budget_share_is_spent(tmp_path: Path) -> None:
    """Issue 16: each trial gets its ordinal, its own cell path and what it may still spend; once the job's
    share of the campaign cap is spent the next trial is not started, with a warning (export records it)."""
    row = {**case("alpha", []), "trials": {"count": 3, "verdict": "all", "jobs": "per-case"}}
    write_selection(tmp_path, [row])
    command = ('python3 -c "import json,os; json.dump({\'trial\': int(os.environ[\'TESTOPS_EVIDENCE_TRIAL\']), '
               '\'budget\': json.loads(os.environ[\'TESTOPS_EVIDENCE_BUDGET\']), '
               '\'usage\': {\'cost-nanodollars\': {\'value\': 70, \'coverage\': \'estimated\'}}}, '
               'open(os.environ[\'TESTOPS_EVIDENCE_CELL_RESULT\'], \'w\'))"')
    done = run_loop(tmp_path, ["alpha"], command, {}, trials=[[1, 2, 3]],
                    budget={"job": {"cost-nanodollars": 120}, "trial": {"cost-nanodollars": 80}})
    assert done.returncode == 0, done.stdout + done.stderr
    cells = tmp_path / "testops-evidence-cells" / "alpha"
    first, second = (json.loads((cells / f"trial-{n}.json").read_text()) for n in (1, 2))
    assert (first["trial"], first["budget"]) == (1, {"cost-nanodollars": 80})  # the per-trial cap is smaller
    assert (second["trial"], second["budget"]) == (2, {"cost-nanodollars": 50})  # 120 - 70 left of the share
    assert not (cells / "trial-3.json").exists()  # 140 of 120 spent: not started
    assert "::warning title=budget.exhausted::alpha trial 3 of 3 not run" in done.stdout


# --- attest: the publication statement signed with actions/attest -------------------------------------------------


def attest_steps() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The publish job's hashing step, its artifact upload, and the attest job."""
    jobs = load("campaign.yml")["jobs"]
    steps = jobs["publish"]["steps"]
    ids = [step.get("id") for step in steps]
    statement = steps[ids.index("statement")]
    upload = steps[ids.index("statement") + 1]
    return statement, upload, jobs["attest"]


def test_attest_is_off_by_default_and_signs_only_what_verify_wrote() -> None:
    call = load("campaign.yml")["on"]["workflow_call"]
    assert call["inputs"]["attest"]["type"] == "boolean" and call["inputs"]["attest"]["default"] is False
    assert call["outputs"]["attestation-url"]["value"] == "${{ jobs.attest.outputs.attestation-url }}"
    statement, upload, attest = attest_steps()
    jobs = load("campaign.yml")["jobs"]
    publish_ids = [step.get("id") for step in jobs["publish"]["steps"]]
    # After verify (its outputs name the files), only with the input, never for a local run.
    assert publish_ids.index("verify") < publish_ids.index("statement")
    assert statement["if"].startswith("${{ inputs.attest && !inputs.local && ")
    assert "steps.verify.outputs.attestation-path != ''" in statement["if"]
    assert statement["env"] == {"STATEMENT": "${{ steps.verify.outputs.attestation-path }}",
                                "PREDICATE": "${{ steps.verify.outputs.attestation-predicate-path }}"}
    assert jobs["publish"]["outputs"]["statement-sha256"] == "${{ steps.statement.outputs.statement-sha256 }}"
    assert jobs["publish"]["outputs"]["predicate-sha256"] == "${{ steps.statement.outputs.predicate-sha256 }}"
    # The artifact the publish job uploads is the one the attest job downloads, per run attempt.
    name = "${{ inputs.artifact-prefix }}-attestation-${{ github.run_attempt }}"
    assert THIRD_PARTY.match(upload["uses"]).group(2) == "upload-artifact"  # type: ignore[union-attr]
    # The two files by name, never the folder: a replaced artifact extracted there leaves its other files behind.
    assert upload["with"]["name"] == name and upload["with"]["path"].split() == [
        "testops-evidence-attestation/publication.intoto.json", "testops-evidence-attestation/publication.predicate.json"]
    assert "steps.statement.outputs.statement-sha256 != ''" in upload["if"]
    download, check, sign = attest["steps"][:3]
    assert THIRD_PARTY.match(download["uses"]).group(2) == "download-artifact"  # type: ignore[union-attr]
    # By the id the publish job's upload reported, into a directory of its own (tests/test_template_downloads.py).
    assert upload["id"] == "attestation-artifact"
    assert jobs["publish"]["outputs"]["attestation-artifact-id"] == "${{ steps.attestation-artifact.outputs.artifact-id }}"
    assert download["with"] == {"artifact-ids": "${{ needs.publish.outputs.attestation-artifact-id }}",
                                "path": "${{ runner.temp }}/testops-evidence-attestation", "merge-multiple": True}
    assert attest["needs"] == ["publish"] and "needs.publish.outputs.statement-sha256 != ''" in attest["if"]
    assert check["env"] == {"STATEMENT_DIR": "${{ steps.attestation.outputs.download-path }}",
                            "STATEMENT_SHA256": "${{ needs.publish.outputs.statement-sha256 }}",
                            "PREDICATE_SHA256": "${{ needs.publish.outputs.predicate-sha256 }}"}
    # actions/attest, pinned by the commit of its v4.2.2 tag, with its documented inputs for a custom predicate.
    assert sign["uses"] == "actions/attest@1e69f48acb82d1966a394da916b4c1698aa569d6"
    assert sign["with"] == {"subject-path": "${{ steps.attestation.outputs.download-path }}/publication.intoto.json",
                            "predicate-type": PREDICATE_TYPE,
                            "predicate-path": "${{ steps.attestation.outputs.download-path }}/publication.predicate.json"}
    assert attest["outputs"]["attestation-url"] == "${{ steps.attest.outputs.attestation-url }}"


def run_step(step: dict[str, Any], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], **env}
    return subprocess.run(["bash", "-c", step["run"]], cwd=cwd, env=full, capture_output=True, text=True,
                          check=False)


def test_attest_hashes_verifys_files_and_refuses_to_sign_one_replaced_between_the_jobs(tmp_path: Path) -> None:
    statement_step, _upload, attest = attest_steps()
    state = tmp_path / "state"
    state.mkdir()
    (state / "publication.intoto.json").write_text('{"_type": "https://in-toto.io/Statement/v1"}\n')
    (state / "publication.predicate.json").write_text('{"campaign": "agent-protocol"}\n')
    publish, output = tmp_path / "publish", tmp_path / "output"
    publish.mkdir()
    done = run_step(statement_step, publish, {"STATEMENT": str(state / "publication.intoto.json"),
                                              "PREDICATE": str(state / "publication.predicate.json"),
                                              "GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0, done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    copied = publish / "testops-evidence-attestation"
    assert outputs == {"statement-sha256": hashlib.sha256((copied / "publication.intoto.json").read_bytes()).hexdigest(),
                       "predicate-sha256": hashlib.sha256((copied / "publication.predicate.json").read_bytes()).hexdigest()}
    check = attest["steps"][1]
    env = {"STATEMENT_DIR": str(copied), "STATEMENT_SHA256": outputs["statement-sha256"],
           "PREDICATE_SHA256": outputs["predicate-sha256"]}
    assert run_step(check, publish, env).returncode == 0
    # A third file beside them (the artifact uploaded again with one added): refused before anything is hashed.
    (copied / "publication.extra.json").write_text("{}")
    added = run_step(check, publish, env)
    assert added.returncode == 3 and "::error title=artifact.extra_file::" in added.stdout, added.stdout
    (copied / "publication.extra.json").unlink()
    # A worker that reached the runtime token replaced the artifact's statement: the attest job stops there.
    (copied / "publication.intoto.json").write_text('{"_type": "https://in-toto.io/Statement/v1", "forged": 1}\n')
    refused = run_step(check, publish, env)
    assert refused.returncode != 0 and "FAILED" in refused.stdout


def test_export_takes_the_imported_ledger_by_id_alone_in_its_directory_and_bound_by_its_digest(tmp_path: Path) -> None:
    """Issue 23, item 5: the ledger export reads crossed jobs by the import workflow's ledger-artifact-id into a
    directory of its own that must hold the ledger alone, and export re-hashes it against ledger-sha256."""
    call = load("campaign.yml")["on"]["workflow_call"]["inputs"]
    assert call["ledger-sha256"]["default"] == "" and call["ledger-artifact-id"]["default"] == ""
    steps = load("campaign.yml")["jobs"]["export"]["steps"]
    download = next(step for step in steps if step.get("id") == "ledger-download")
    check = next(step for step in steps if step.get("id") == "ledger")
    exporting = next(step for step in steps if step.get("id") == "export")
    assert download["with"]["artifact-ids"] == "${{ inputs.ledger-artifact-id }}"
    assert download["if"] == check["if"] == "${{ inputs.ledger-artifact-id != '' }}"
    assert check["env"] == {"LEDGER_DIR": "${{ steps.ledger-download.outputs.download-path }}"}
    assert exporting["with"]["ledger"] == "${{ steps.ledger.outputs.path || inputs.ledger }}"
    assert exporting["with"]["ledger-sha256"] == "${{ inputs.ledger-sha256 }}"
    imported = load("import.yml")
    assert imported["on"]["workflow_call"]["outputs"]["ledger-artifact-id"]["value"] == (
        "${{ jobs.import.outputs.ledger-artifact-id }}")
    assert imported["jobs"]["import"]["outputs"]["ledger-artifact-id"] == "${{ steps.ledger-artifact.outputs.artifact-id }}"
    assert imported["jobs"]["import"]["outputs"]["ledger-sha256"] == "${{ steps.import.outputs.ledger-sha256 }}"
    # The step itself: the one file is the ledger; anything beside it (or a link) stops the job.
    ledger_dir, output = tmp_path / "ledger", tmp_path / "output"
    ledger_dir.mkdir()
    (ledger_dir / "campaign-ledger.json").write_text("{}")
    done = run_step(check, tmp_path, {"LEDGER_DIR": str(ledger_dir), "GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0, done.stderr
    assert output.read_text() == f"path={ledger_dir / 'campaign-ledger.json'}\n"
    (ledger_dir / ".later.json").write_text("{}")
    refused = run_step(check, tmp_path, {"LEDGER_DIR": str(ledger_dir), "GITHUB_OUTPUT": str(output)})
    assert refused.returncode == 3 and "::error title=artifact.extra_file::" in refused.stdout, refused.stdout
    (ledger_dir / ".later.json").unlink()
    (ledger_dir / "campaign-ledger.json").unlink()
    (ledger_dir / "campaign-ledger.json").symlink_to(tmp_path / "output")
    assert run_step(check, tmp_path, {"LEDGER_DIR": str(ledger_dir), "GITHUB_OUTPUT": str(output)}).returncode == 3


def test_the_worker_record_lists_every_file_of_the_artifact_with_its_digest(tmp_path: Path) -> None:
    """Export reads a worker's artifact directory only when it holds exactly the files the record lists (issue 23):
    the record lists each cell and report the worker left, with its SHA-256, but not itself nor hidden files
    (upload-artifact leaves those out)."""
    write_selection(tmp_path, [case("alpha", []), case("beta", [])])
    command = ('python3 -c "import os; p = os.environ[\'TESTOPS_EVIDENCE_CELL_RESULT\']; open(p, \'w\').write(\'{}\'); '
               'd = os.path.join(os.path.dirname(p), os.environ[\'TESTOPS_EVIDENCE_CASE\'] + \'-report\'); '
               'os.makedirs(d, exist_ok=True); open(os.path.join(d, \'junit.xml\'), \'w\').write(\'<x/>\'); '
               'open(os.path.join(d, \'.hidden\'), \'w\').write(\'h\')"')
    done = run_loop(tmp_path, ["alpha", "beta"], command, {})
    assert done.returncode == 0, done.stdout + done.stderr
    cells = tmp_path / "testops-evidence-cells"
    record = json.loads((cells / "testops-evidence-worker.json").read_text())
    expected = {path.relative_to(cells).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
                for path in cells.rglob("*") if path.is_file() and not path.name.startswith(".")
                and path.name != "testops-evidence-worker.json"}
    assert record["files"] == expected
    assert set(expected) == {"alpha.json", "beta.json", "alpha-report/junit.xml", "beta-report/junit.xml"}


def test_the_coordinator_jobs_record_the_uploads_later_runs_bind() -> None:
    """A later run reads the history (upload) and the publication or results (select's baseline) of an earlier run
    only from an artifact the uploading job recorded (campaign/workers.py recorded_uploads): the step after each
    upload is named by its id and digest, in a job whose name is the one the reader looks for."""
    from testops_evidence.campaign.workers import EXPORT_JOB, PUBLISH_JOB, upload_report_expression

    jobs = load("campaign.yml")["jobs"]
    for job_id, step_id, what in ((PUBLISH_JOB, "history", "history"), (PUBLISH_JOB, "publication", "publication"),
                                  (EXPORT_JOB, "results-artifact", "results")):
        job = jobs[job_id]
        assert job["name"] == job_id
        index = next(i for i, step in enumerate(job["steps"]) if step.get("id") == step_id)
        upload, report = job["steps"][index], job["steps"][index + 1]
        assert upload["uses"].startswith("actions/upload-artifact@")
        assert report["name"] == upload_report_expression(what, step_id)
        assert "${{" not in report["run"]
    # No other job is named so that recorded_uploads would read its record.
    for name in (PUBLISH_JOB, EXPORT_JOB):
        assert [job_id for job_id, job in jobs.items() if str(job.get("name", job_id)).endswith(name)] == [name]


def test_every_documented_caller_grants_what_the_campaign_templates_jobs_ask_for() -> None:
    """GitHub checks every job of a reusable workflow against the calling job's grant when the run starts, also
    the jobs whose `if:` is false: a caller that grants less than any job lists does not start at all. So each
    caller the docs show grants at least the union of the campaign template's job permissions."""
    asked: dict[str, str] = {}
    for job in load("campaign.yml")["jobs"].values():
        for scope, level in job["permissions"].items():
            asked[scope] = "write" if "write" in (level, asked.get(scope)) else "read"
    fence = re.compile(r"```yaml\n(.*?)```", re.S)
    callers = []
    adopter = ROOT / "examples" / "adopter" / ".github" / "workflows" / "agent-evals.yml"
    for doc in (ROOT / "README.md", ROOT / "docs" / "workflows.md", ROOT / "docs" / "local.md", adopter):
        text = doc.read_text(encoding="utf-8")
        for block in [text] if doc.suffix == ".yml" else fence.findall(text):
            if "testops-evidence-campaign.yml" not in block or "jobs:" not in block:
                continue
            workflow = YAML(typ="safe").load(block)
            for job in workflow["jobs"].values():
                if str(job.get("uses", "")).endswith("testops-evidence-campaign.yml"):
                    callers.append((doc.name, job.get("permissions", workflow.get("permissions"))))
    assert len(callers) >= 4, callers
    for doc, granted in callers:
        missing = {scope: level for scope, level in asked.items()
                   if not isinstance(granted, dict) or granted.get(scope) not in ({level, "write"})}
        assert missing == {}, (doc, granted)
