"""The invariant of docs/security.md, checked on every ``download-artifact`` step of every template (issue 23).

*A job acts only on bytes it can bind to a digest that travelled to it outside the workers' reach, and every
artifact goes into a directory of its own that nothing else reads or runs.* A worker that reached the runtime token
can re-upload any artifact of its run (upload-artifact v4 ``overwrite: true``): downloaded by name, the replacement
is what a later job gets; extracted into the workspace, its extra files land over the checkout (a harness the next
worker runs, a cell the export job counts). So each download here must be

* **by id**: ``artifact-ids`` from an upload step's ``artifact-id`` output that travelled as a job (or step) output
  — an artifact id names one upload, and a re-upload gets a new one, so the replacement is not found;
* **into a fresh directory of its own**: under ``${{ runner.temp }}``, never the workspace root (the checkout), and
  no other download of the job writes into it or below it;
* **read through its own output**: no other step names the directory literally; the steps that use it read
  ``steps.<id>.outputs.download-path``, so what reads a directory is always the download that filled it.

The exceptions are listed below, each with why; a test keeps the list honest (an exception no longer needed fails).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = sorted((ROOT / "workflows-templates").glob("*.yml"))
DOWNLOAD = "actions/download-artifact@"
# An id that travelled out of the workers' reach: a job's output, a step's output in this job, or the caller's input
# (the import workflow's ledger-artifact-id, a job output of the calling workflow).
TRAVELLED = re.compile(r"^\$\{\{ ((needs|steps)\.[a-z0-9-]+\.outputs\.[a-z0-9-]+|inputs\.[a-z0-9-]+-artifact-id) \}\}$")
FRESH = re.compile(r"^\$\{\{ runner\.temp \}\}/testops-evidence-[a-z0-9-]+$")

# (template, job, path) -> why the download is not by id into a directory under runner.temp read via its output.
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    # The workers' cell artifacts: a matrix job has one set of outputs for all its legs (GitHub keeps one value per
    # output name), so the id of each worker's upload cannot travel as a job output. collect-cells reads each id
    # from the run's job and artifact records through the API instead (the identity binding of campaign/workers.py)
    # and the download takes exactly those ids. Under act (`local: true`) there are no job records to read: the
    # cells are taken by the artifacts' names, in a run where no one but the operator runs anything. The two
    # downloads never run in the same job (`if: !inputs.local` / `if: inputs.local`) and export reads the directory
    # as its cell-results; a workspace directory no checkout file and no other step uses.
    ("campaign.yml", "export", "testops-evidence-cells"):
        "worker cell artifacts: ids found by collect-cells in the job records; by name under act only",
}


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return document


def downloads() -> list[tuple[str, str, int, dict[str, Any]]]:
    found = []
    for path in TEMPLATES:
        for job_id, job in load(path)["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                if str(step.get("uses", "")).startswith(DOWNLOAD):
                    found.append((path.name, job_id, index, step))
    return found


def ids(items: list[tuple[str, str, int, dict[str, Any]]]) -> list[str]:
    return [f"{name}:{job}:{index}" for name, job, index, _ in items]


ALL = downloads()


def test_every_template_is_covered() -> None:
    assert [p.name for p in TEMPLATES] == ["bootstrap.yml", "campaign.yml", "import.yml"]
    assert {(name, job) for name, job, _, _ in ALL} >= {("campaign.yml", job) for job in
                                                        ("native", "external", "export", "publish", "attest", "pages")}


@pytest.mark.parametrize(("name", "job_id", "index", "step"), ALL, ids=ids(ALL))
def test_a_download_is_by_a_travelled_id_into_a_fresh_directory_of_its_own(
        name: str, job_id: str, index: int, step: dict[str, Any]) -> None:
    given = step.get("with", {})
    path = str(given.get("path", "")).rstrip("/")
    assert path not in ("", ".", "./", "${{ github.workspace }}"), (
        f"{name} {job_id} step {index} downloads into the workspace root: its files land over the checkout")
    if (name, job_id, path) in EXCEPTIONS:
        return
    assert "name" not in given and "pattern" not in given, (
        f"{name} {job_id} step {index} downloads by name: an id could travel (upload-artifact's artifact-id output "
        "as a job output), and a name finds whatever was uploaded last under it")
    assert TRAVELLED.match(str(given.get("artifact-ids", ""))), (name, job_id, index, given)
    assert FRESH.match(path), (f"{name} {job_id} step {index}: {path!r} is not a directory of its own under "
                               "runner.temp")
    # One id, its files directly in the directory (a single artifact by id otherwise lands in path/<name>/).
    assert str(given.get("merge-multiple", "")).lower() == "true", (name, job_id, index)
    assert "id" in step, f"{name} {job_id} step {index}: the readers of the directory name it by its step id"


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_no_other_step_names_a_downloaded_directory_or_writes_into_it(path: Path) -> None:
    for job_id, job in load(path)["jobs"].items():
        steps = job.get("steps", [])
        targets = {index: str(step.get("with", {}).get("path", "")).rstrip("/") for index, step in enumerate(steps)
                   if str(step.get("uses", "")).startswith(DOWNLOAD)}
        for index, target in targets.items():
            assert target not in ("", ".", "./"), f"{path.name} {job_id}: download {index} writes into the workspace root"
            excepted = (path.name, job_id, target) in EXCEPTIONS
            for other, candidate in targets.items():
                if other == index:
                    continue
                overlap = candidate == target or candidate.startswith(target + "/") or target.startswith(candidate + "/")
                if overlap and excepted:
                    # The excepted pair must never run in the same job: complementary conditions.
                    conditions = {str(steps[index].get("if", "")), str(steps[other].get("if", ""))}
                    assert conditions & {"${{ inputs.local }}"}, (path.name, job_id, conditions)
                    continue
                assert not overlap, f"{path.name} {job_id}: downloads {index} and {other} write into {target!r}"
            if excepted:
                continue
            for other, step in enumerate(steps):
                if other == index:
                    continue
                text = json.dumps({key: step.get(key) for key in ("with", "env", "run")})
                text = re.sub(r"\$\{\{ steps\.[a-z0-9-]+\.outputs\.download-path \}\}[^\s\"']*", "", text)
                name = re.escape(target.replace("${{ runner.temp }}", ""))
                assert not re.search(f"(?<![a-z0-9-]){name}(?![a-z0-9-])", text), (
                    f"{path.name} {job_id}: step {other} names the directory of download {index} ({target}): read "
                    f"it as steps.{steps[index].get('id')}.outputs.download-path")


def test_every_exception_is_still_needed() -> None:
    present = {(name, job, str(step.get("with", {}).get("path", "")).rstrip("/")) for name, job, _, step in ALL}
    assert set(EXCEPTIONS) <= present, set(EXCEPTIONS) - present


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.name for p in TEMPLATES])
def test_every_artifact_a_later_job_downloads_has_its_id_travel_as_a_job_output(path: Path) -> None:
    """The id a download takes is the output of the upload step that made the artifact, in a job that is not a
    worker (a matrix job), and it reaches the downloading job as that job's output."""
    jobs = load(path)["jobs"]
    for job_id, job in jobs.items():
        for step in job.get("steps", []):
            if not str(step.get("uses", "")).startswith(DOWNLOAD):
                continue
            source = str(step.get("with", {}).get("artifact-ids", ""))
            found = re.match(r"^\$\{\{ needs\.([a-z0-9-]+)\.outputs\.([a-z0-9-]+) \}\}$", source)
            if found is None:
                continue  # a step output (collect-cells, the excepted cells download) or checked above
            producer, output = found.groups()
            assert producer in (job.get("needs") if isinstance(job.get("needs"), list) else [job.get("needs")])
            assert "strategy" not in jobs[producer], (job_id, producer)
            value = jobs[producer]["outputs"][output]
            step_id = re.match(r"^\$\{\{ steps\.([a-z0-9-]+)\.outputs\.artifact-id \}\}$", value)
            assert step_id, (producer, output, value)
            upload = next(s for s in jobs[producer]["steps"] if s.get("id") == step_id.group(1))
            assert str(upload["uses"]).startswith("actions/upload-artifact@"), upload
