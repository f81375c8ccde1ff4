"""Publishing an export to TestOps: the session upload flow (allure-testops.md §1.6).

``upload/start`` attached to the selection's job run and launch, ``upload/session``, the results in chunks
of 100, the evidence bundle as launch attachment(s), ``upload/stop``. Every change is once-marked first
(stages ``upload-start``, ``upload-session``, ``upload-chunk-<n>``, ``upload-evidence-<n>``,
``upload-stop``) and recorded done after; an uncertain outcome is ``testops.uncertain`` (exit 4) and
``reconcile`` takes over.

:func:`prepare` reads and checks every file once, before the first change (a bad file must not leave half
an upload); :func:`upload` sends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.evidence.publication import CHUNK_SIZE, bundle_name, bundle_parts, chunks, result_dto
from testops_evidence.evidence.receipt import Receipt, verified_bytes
from testops_evidence.safeio import parse_json_bytes, sha256_bytes
from testops_evidence.testops import api
from testops_evidence.testops.client import TestOpsClient, expect_id, expect_object
from testops_evidence.testops.stages import Marks, Stages

RESULTS_CODE = "upload.results_invalid"


@dataclass(frozen=True)
class Prepared:
    """An export read and checked against its receipt: the upload DTOs and the evidence bundle parts."""

    receipt: Receipt
    dtos: list[dict[str, Any]]
    parts: list[bytes]


def prepare(receipt: Receipt, results_dir: Path) -> Prepared:
    rows = receipt.results
    expected = receipt.expected_files()
    dtos = [result_dto(parse_json_bytes(verified_bytes(results_dir, row["result-file"], row["result-sha256"],
                                                        RESULTS_CODE), row["result-file"], RESULTS_CODE)) for row in rows]
    evidence = [(row, verified_bytes(results_dir, row["attachment-file"], row["attachment-sha256"], RESULTS_CODE))
                for row in rows]
    for name in (f["name"] for f in receipt.document["files"]):
        verified_bytes(results_dir, name, expected[name], RESULTS_CODE)
    return Prepared(receipt, dtos, bundle_parts(receipt, evidence))


def upload(client: TestOpsClient, marks: Marks, prepared: Prepared, log: Callable[[str], None]) -> dict[str, Any]:
    """Send the prepared export; the publication record (``upload.json``)."""
    receipt = prepared.receipt
    testops = receipt.testops
    assert testops is not None  # bind_receipt refused a files-backend receipt
    context = receipt.document["context"]
    job_run_id, launch_id, project_id = testops["job-run-id"], testops["launch-id"], testops["project-id"]
    rows = receipt.results
    if client.project_id != project_id:
        raise Refusal("upload.binding", "the TestOps project differs from the selection's", field="project-id",
                      expected=project_id, actual=client.project_id)
    stages = Stages(marks, client, gateway_uncertain=True)

    # start: attach to the selection's job run and launch
    workflow_file = Path(str(context["workflow-path"])).name
    job_uid = f"{context['repository']}_{workflow_file}"
    run_uid = str(context["run-id"])
    start = api.upload_start({
        "projectId": project_id,
        "ci": {"type": "github", "endpoint": context["server-url"]},
        "job": {"name": str(context["workflow-path"]), "uid": job_uid,
                "url": f"{context['server-url']}/{context['repository']}/actions/workflows/{workflow_file}",
                "parameters": []},
        "jobRun": {"id": job_run_id, "uid": run_uid, "name": f"{receipt.document['campaign']} #"
                   f"{context.get('run-number', context['run-id'])}", "url": context["run-url"], "parameters": []},
        "launch": {"id": launch_id},
    })
    answer = expect_object(stages.send("upload-start", "upload-start", start,
                                       facts={"job-run-id": job_run_id, "launch-id": launch_id}),
                           "upload start", ("jobRunId", "launchId"))
    got_run, got_launch = expect_id(answer["jobRunId"], "jobRunId"), expect_id(answer["launchId"], "launchId")
    stages.done("upload-start", {"outcome": "sent", "job-run-id": got_run, "launch-id": got_launch})
    for field, want, got in (("jobRunId", job_run_id, got_run), ("launchId", launch_id, got_launch)):
        if want != got:
            raise Refusal("upload.binding", f"TestOps attached the upload to another {field}", field=field,
                          expected=want, actual=got)

    # session: the profile and the commit as the session's environment
    environment = [{"key": f"profile.{k}", "value": v} for k, v in sorted(receipt.document["profile"].items())]
    environment.append({"key": "source.sha", "value": context["head-sha"]})
    session = expect_object(stages.send("upload-session", "upload-session", api.upload_session(job_run_id, environment),
                                        facts={"job-run-id": job_run_id, "launch-id": launch_id}, replayable=False),
                            "upload session", ("id",))
    session_id = expect_id(session["id"], "session id")
    stages.done("upload-session", {"outcome": "sent", "session-id": session_id})

    # results, in chunks
    result_ids: dict[str, int] = {}
    batches = list(chunks(list(zip(rows, prepared.dtos, strict=True)), CHUNK_SIZE))
    for number, batch in enumerate(batches, start=1):
        stage = f"upload-chunk-{number}"
        facts = {"launch-id": launch_id, "session-id": session_id,
                 "results": [{"uuid": row["uuid"], "full-name": row["full-name"],
                              "test-case-id": row["testops-id"]} for row, _dto in batch]}
        answer = stages.send(stage, "upload-chunk", api.upload_results(session_id, [dto for _row, dto in batch]),
                             facts=facts)
        mapped = api.result_ids(answer, f"upload chunk {number}", [row["uuid"] for row, _dto in batch])
        stages.done(stage, {"outcome": "sent", "result-ids": mapped})
        result_ids.update(mapped)
        if number % 10 == 0 or number == len(batches):
            log(f"uploaded {len(result_ids)} of {len(rows)} results ({number} of {len(batches)} chunks)")

    # the evidence bundle, as launch attachment(s)
    uploaded_parts = []
    attach = api.launch_attachment(launch_id, job_run_id)
    for number, data in enumerate(prepared.parts, start=1):
        stage = f"upload-evidence-{number}"
        name = bundle_name(receipt, number, len(prepared.parts))
        digest = sha256_bytes(data)
        stages.send(stage, "upload-evidence", attach, files=[("file", (name, data, "application/json"))],
                    facts={"launch-id": launch_id, "name": name, "sha256": digest}, replayable=False)
        stages.done(stage, {"outcome": "sent", "name": name, "sha256": digest})
        uploaded_parts.append({"name": name, "sha256": digest, "bytes": len(data)})

    # stop: the job run is finished
    counts = receipt.counts
    status = "passed" if counts["passed"] == counts["total"] else "failed"
    stages.send("upload-stop", "upload-stop", api.upload_stop({"jobRunId": job_run_id, "jobRunUid": run_uid,
                                                               "jobUid": job_uid, "projectId": project_id,
                                                               "status": status}),
                facts={"job-run-id": job_run_id})
    stages.done("upload-stop", {"outcome": "sent", "status": status})
    return {
        "backend": "testops", "endpoint": client.endpoint, "project-id": project_id, "launch-id": launch_id,
        "launch-url": client.web_url("launch", launch_id), "job-run-id": job_run_id, "session-id": session_id,
        "receipt-sha256": receipt.sha256, "selection-sha256": receipt.document["selection-sha256"],
        "uploaded-count": len(result_ids), "chunks": len(batches), "evidence": uploaded_parts,
        "counts": dict(counts), "requests": client.request_count, "result-ids": result_ids,
    }

