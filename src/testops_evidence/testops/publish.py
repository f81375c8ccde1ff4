"""Publishing an export to TestOps: the session upload flow (allure-testops.md §1.6, and the conformance
table ``tests/data/testops-conformance.json`` for every request and answer per server generation).

1. ``upload/start`` attaches the upload to the selection's job run (by id) and launch, under the job and
   job-run uids ``select`` confirmed with TestOps; its answer must name the selection's job run, launch and
   job, and the job run must then carry the same uid, or nothing more is sent (``upload.binding``).
2. ``upload/session`` opens a session for the launch (``{launchId, environment}``, the one body every server
   generation documents, with ``manual=true`` as Allure 3 sends it: undefined in 25.4.1, where Spring ignores
   it, and sent to every server because the generation is not known before the first results' answer).
3. The results, in the form 25.4.1 describes (upper-case statuses, flat steps), which newer servers take
   too. The first chunk holds one result, and its answer shows what the server supports: current servers
   map each uuid to its id (``{results: [{id, uuid}]}``) and take launch attachments, so the rest go in
   chunks of 100; 25.4 servers answer the ids alone (``{resultIds}``, an array whose order 25.4.1 does not
   promise) and have no launch attachment endpoint, so every result goes alone and its one id is its own.
4. The evidence: one bundle as launch attachment(s) where the server has them; otherwise each result's own
   evidence document attached to that result (one request per result, said in the summary).
5. ``upload/stop`` finishes the job run, named by the same uids as the start.

Every change is once-marked first (stages ``upload-start``, ``upload-session``, ``upload-chunk-<n>``,
``upload-evidence-<n>``, ``upload-stop``) and recorded done after; an uncertain outcome is
``testops.uncertain`` (exit 4) and ``reconcile`` takes over. Capabilities are learned from answers only:
no change is ever re-sent to find out what the server supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.campaign.receipt import Receipt, verified_bytes
from testops_evidence.errors import Refusal
from testops_evidence.safeio import parse_json_bytes, sha256_bytes
from testops_evidence.testops import api
from testops_evidence.testops.bundle import CHUNK_SIZE, bundle_name, bundle_parts, chunks, result_dto
from testops_evidence.testops.client import TestOpsClient, expect_id, expect_object
from testops_evidence.testops.stages import Marks, Stages

RESULTS_CODE = "upload.results_invalid"
# Said in the summary and the record when the evidence had to go result by result.
PER_RESULT_NOTE = ("this TestOps has no launch attachments (a 25.4 server), so each result's evidence document "
                   "was attached to that result: one request per result")


@dataclass(frozen=True)
class Prepared:
    """An export read and checked against its receipt: the upload DTOs, each result's evidence document and
    the evidence bundle parts."""

    receipt: Receipt
    dtos: list[dict[str, Any]]
    evidence: list[bytes]
    parts: list[bytes]


def prepare(receipt: Receipt, results_dir: Path) -> Prepared:
    # Every trial's result before its case's verdict result: TestOps, like Allure Report, shows the latest
    # result of a test in a launch as the test's and the earlier ones as its retries.
    rows = receipt.published_rows()
    expected = receipt.expected_files()
    dtos = [result_dto(parse_json_bytes(verified_bytes(results_dir, row["result-file"], row["result-sha256"],
                                                        RESULTS_CODE), row["result-file"], RESULTS_CODE)) for row in rows]
    evidence = [verified_bytes(results_dir, row["attachment-file"], row["attachment-sha256"], RESULTS_CODE)
                for row in rows]
    for name in (f["name"] for f in receipt.document["files"]):
        verified_bytes(results_dir, name, expected[name], RESULTS_CODE)
    return Prepared(receipt, dtos, evidence, bundle_parts(receipt, list(zip(rows, evidence, strict=True))))


def _binding_uids(testops: dict[str, Any]) -> tuple[str, str]:
    job_uid, run_uid = testops.get("job-uid"), testops.get("job-run-uid")
    if not isinstance(job_uid, str) or not job_uid or not isinstance(run_uid, str) or not run_uid:
        raise Refusal("upload.binding", "the selection does not name the uids TestOps knows the job and the job run "
                      "by (it was made by an earlier version of select)", field="testops.job-uid",
                      expected="job-uid and job-run-uid", actual={"job-uid": job_uid, "job-run-uid": run_uid},
                      hint="Run the campaign again from `select`: it confirms the job's uid with TestOps.")
    return job_uid, run_uid


@dataclass(frozen=True)
class Session:
    """An upload session open on the selection's job run and launch (the answer of steps 1 and 2)."""

    project_id: int
    job_run_id: int
    launch_id: int
    session_id: int
    job_uid: str
    run_uid: str


def open_session(client: TestOpsClient, stages: Stages, testops: Mapping[str, Any], context: Mapping[str, Any],
                 campaign: str, profile: Mapping[str, Any], *, prefix: str = "upload") -> Session:
    """Steps 1 and 2: attach to the selection's job run and launch, bound to the uids ``select`` confirmed, and
    open a session for the launch; once-marked as ``<prefix>-start`` and ``<prefix>-session``. The batch upload
    and the stream (``phases/stream.py``) both open their session here."""
    job_run_id, launch_id, project_id = testops["job-run-id"], testops["launch-id"], testops["project-id"]
    job_uid, run_uid = _binding_uids(dict(testops))
    if client.project_id != project_id:
        raise Refusal("upload.binding", "the TestOps project differs from the selection's", field="project-id",
                      expected=project_id, actual=client.project_id)

    # 1. start: attach to the selection's job run and launch. No job or job-run parameters: TestOps takes
    # job.parameters as a full replacement, so even [] would erase the job's own (its branch, say).
    workflow_file = Path(str(context["workflow-path"])).name
    start = api.upload_start({
        "projectId": project_id,
        "ci": {"type": "github", "endpoint": context["server-url"]},
        "job": {"name": str(context["workflow-path"]), "uid": job_uid,
                "url": f"{context['server-url']}/{context['repository']}/actions/workflows/{workflow_file}"},
        "jobRun": {"id": job_run_id, "uid": run_uid, "name": f"{campaign} #"
                   f"{context.get('run-number', context['run-id'])}", "url": context["run-url"]},
        "launch": {"id": launch_id},
    })
    answer = expect_object(stages.send(f"{prefix}-start", "upload-start", start,
                                       facts={"job-run-id": job_run_id, "launch-id": launch_id}),
                           "upload start", ("jobRunId", "launchId"))
    got_run, got_launch = expect_id(answer["jobRunId"], "jobRunId"), expect_id(answer["launchId"], "launchId")
    got_job = answer.get("jobId")
    stages.done(f"{prefix}-start", {"outcome": "sent", "job-run-id": got_run, "launch-id": got_launch,
                                    "job-id": got_job})
    for field, want, got in (("jobRunId", job_run_id, got_run), ("launchId", launch_id, got_launch),
                             *((("jobId", testops.get("job-id"), got_job),) if got_job is not None else ())):
        if want != got:
            raise Refusal("upload.binding", f"TestOps attached the upload to another {field}", field=field,
                          expected=want, actual=got)
    # The stop names the job run by uid only: a job run TestOps knows under another uid would answer 404
    # after every result was stored, so it is checked now, before the first result is sent.
    reported = api.get_job_run(client, job_run_id).get("externalId")
    if isinstance(reported, str) and reported and reported != run_uid:
        raise Refusal("upload.binding", f"TestOps knows job run {job_run_id} under another uid than the one this "
                      "upload names", field="jobRun.uid", expected=run_uid, actual=reported)

    # 2. session
    environment = [{"key": f"profile.{k}", "value": v} for k, v in sorted(profile.items())]
    environment.append({"key": "source.sha", "value": context["head-sha"]})
    session = expect_object(stages.send(f"{prefix}-session", "upload-session",
                                        api.upload_session(launch_id, environment),
                                        facts={"job-run-id": job_run_id, "launch-id": launch_id}, replayable=False),
                            "upload session", ("id",))
    session_id = expect_id(session["id"], "session id")
    stages.done(f"{prefix}-session", {"outcome": "sent", "session-id": session_id})
    return Session(project_id, job_run_id, launch_id, session_id, job_uid, run_uid)


def chunk_size(shape: str | None) -> int:
    """How many results the next chunk holds: one while the server's answer form is unknown or holds the ids alone
    (25.4: the i-th id is not bound to the i-th result, so a chunk of one is the only mapping the answer binds),
    else ``CHUNK_SIZE``."""
    return 1 if shape in (None, api.ONE_BY_ONE) else CHUNK_SIZE


def send_results(stages: Stages, session: Session, stage: str, batch: Sequence[tuple[Mapping[str, Any],
                                                                                       dict[str, Any]]],
                 what: str, shape: str | None) -> tuple[dict[str, int], str]:
    """One chunk of results (receipt rows with their upload DTOs) in one once-marked request: the result id
    TestOps answered for each uuid, and the answer's form (which must be the form of the first chunk)."""
    facts = {"launch-id": session.launch_id, "session-id": session.session_id,
             "results": [{"uuid": row["uuid"], "full-name": row["full-name"],
                          "test-case-id": row["testops-id"]} for row, _dto in batch]}
    answer = stages.send(stage, "upload-chunk", api.upload_results(session.session_id, [dto for _row, dto in batch]),
                         facts=facts)
    mapped, answered = api.result_ids(answer, what, [row["uuid"] for row, _dto in batch])
    if shape is not None and answered != shape:
        raise Refusal("testops.response_invalid", f"{what} was answered in another form than the first",
                      field=what, expected=shape, actual=answered)
    stages.done(stage, {"outcome": "sent", "result-ids": mapped})
    return mapped, answered


def upload(client: TestOpsClient, marks: Marks, prepared: Prepared, log: Callable[[str], None], *,
           streamed: Mapping[str, Sequence[int]] | None = None, streamed_form: str | None = None) -> dict[str, Any]:
    """Send the prepared export; the publication record (``upload.json``).

    ``streamed``: the cases the stream job already sent into this launch (case key -> the result ids TestOps
    answered, one per published row of the case, in the receipt's order; the ledger was held to the receipt
    before). Their results are not sent again: their ids stand in the record for verify, and only the evidence
    and the stop cover them."""
    receipt = prepared.receipt
    testops = receipt.testops
    assert testops is not None  # bind_receipt refused a files-backend receipt
    context = receipt.document["context"]
    rows = receipt.published_rows()
    stages = Stages(marks, client, gateway_uncertain=True)
    session = open_session(client, stages, testops, context, str(receipt.document["campaign"]),
                           receipt.document["profile"])
    job_run_id, launch_id, project_id = session.job_run_id, session.launch_id, session.project_id
    job_uid, run_uid, session_id = session.job_uid, session.run_uid, session.session_id

    # 3. results, in chunks; the first (of one result) shows what the server supports, and so the size of
    # the rest: 100 where the answer maps uuids to ids, one where it holds the ids alone (25.4).
    result_ids: dict[str, int] = {}
    shape: str | None = None
    streamed = streamed or {}
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_case.setdefault(str(row["key"]), []).append(row)
    for key, ids in streamed.items():
        case_rows = by_case.get(key, [])
        if len(ids) != len(case_rows):
            raise Refusal("stream.mismatch", f"the stream sent {len(ids)} result(s) of case {key!r} to TestOps, the "
                          f"export has {len(case_rows)}", field=key, expected=len(case_rows), actual=len(ids))
        result_ids.update({str(row["uuid"]): int(i) for row, i in zip(case_rows, ids, strict=True)})
    pending = [(row, dto) for row, dto in zip(rows, prepared.dtos, strict=True) if str(row["key"]) not in streamed]
    if streamed:
        log(f"{len(result_ids)} result(s) of {len(streamed)} case(s) were sent by the stream job; "
            f"{len(pending)} remain")
    shape = streamed_form  # the form the stream's answers came in, when it sent any: this server's
    number = 0
    while pending:
        batch, pending = pending[:chunk_size(shape)], pending[chunk_size(shape):]
        number += 1
        mapped, shape = send_results(stages, session, f"upload-chunk-{number}", batch, f"upload chunk {number}", shape)
        result_ids.update(mapped)
        if number % 10 == 0 or not pending:
            log(f"uploaded {len(result_ids)} of {len(rows)} results ({number} chunks)")
    capabilities = api.capabilities_from(shape)
    log(f"TestOps answered the results {capabilities['result-ids']}: "
        + ("launch attachments" if capabilities["launch-attachment"] else "no launch attachments (25.4)"))

    # 4. the evidence
    if capabilities["launch-attachment"]:
        evidence = _launch_bundle(stages, receipt, prepared, launch_id)
    else:
        evidence = _per_result(stages, rows, prepared, result_ids, launch_id, log)

    # 5. stop: the job run is finished (named by the start's uids)
    counts = receipt.counts
    status = "passed" if counts["passed"] == counts["total"] else "failed"
    stages.send("upload-stop", "upload-stop", api.upload_stop({"projectId": project_id, "jobUid": job_uid,
                                                               "jobRunUid": run_uid, "status": status}),
                facts={"job-run-id": job_run_id})
    stages.done("upload-stop", {"outcome": "sent", "status": status})
    requests = client.request_count
    return {
        "backend": "testops", "endpoint": client.endpoint, "project-id": project_id, "launch-id": launch_id,
        "launch-url": client.web_url("launch", launch_id), "job-run-id": job_run_id, "session-id": session_id,
        "job-uid": job_uid, "job-run-uid": run_uid,
        "receipt-sha256": receipt.sha256, "selection-sha256": receipt.document["selection-sha256"],
        "uploaded-count": len(result_ids), "chunks": number, "evidence": evidence,
        "counts": dict(counts), "requests": requests, "result-ids": result_ids,
        "requests-per-result": round(requests / max(1, len(rows)), 4),
        "capabilities": {**capabilities, "detected-from": "the answer to the first upload/test-result chunk"},
    }


def _launch_bundle(stages: Stages, receipt: Receipt, prepared: Prepared, launch_id: int) -> dict[str, Any]:
    uploaded = []
    attach = api.launch_attachment(launch_id)
    for number, data in enumerate(prepared.parts, start=1):
        stage = f"upload-evidence-{number}"
        name = bundle_name(receipt, number, len(prepared.parts))
        digest = sha256_bytes(data)
        stages.send(stage, "upload-evidence", attach, files=[("file", (name, data, "application/json"))],
                    facts={"launch-id": launch_id, "name": name, "sha256": digest}, replayable=False)
        stages.done(stage, {"outcome": "sent", "name": name, "sha256": digest})
        uploaded.append({"name": name, "sha256": digest, "bytes": len(data)})
    return {"form": "launch-bundle", "parts": uploaded}


def _per_result(stages: Stages, rows: Sequence[Mapping[str, Any]], prepared: Prepared, result_ids: dict[str, int],
                launch_id: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Each result's own evidence document, attached to that result (one request per result); once-marked per
    chunk of results, so a 10,000-result campaign writes 100 markers, not 10,000."""
    items = list(zip(rows, prepared.evidence, strict=True))
    attached = 0
    for number, batch in enumerate(chunks(items, CHUNK_SIZE), start=1):
        stage = f"upload-evidence-{number}"
        facts = {"launch-id": launch_id, "form": "per-result",
                 "results": [{"uuid": row["uuid"], "result-id": result_ids[row["uuid"]],
                              "sha256": row["attachment-sha256"]} for row, _data in batch]}
        stages.mark(stage, "upload-evidence", None, facts)
        for row, data in batch:
            stages.call(stage, api.result_attachment(result_ids[row["uuid"]]),
                        files=[("file", (Path(str(row["attachment-file"])).name, data, "application/json"))])
            attached += 1
        stages.done(stage, {"outcome": "sent", "attached": len(batch)})
        if number % 10 == 0 or attached == len(items):
            log(f"attached the evidence of {attached} of {len(items)} results")
    return {"form": "per-result", "attached": attached, "note": PER_RESULT_NOTE}

