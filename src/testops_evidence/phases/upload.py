"""``upload`` (token phase): publish an export, exactly as its receipt describes it.

Before anything is sent, the results directory must hold exactly the receipt's files with the receipt's
digests (``upload.results_invalid``) and the receipt must belong to this run (``selection.context``).

* **files backend** — a verified copy into ``<state-dir>/published/<results-dir name>`` (plus the
  receipt beside it), built in a temp dir and renamed into place; a publication receipt ``upload.json``.
* **testops backend** — the session upload flow (allure-testops.md §1.6): ``upload/start`` attached to the
  selection's job run and launch, ``upload/session``, results in chunks of 100, the evidence bundle as
  launch attachment(s), ``upload/stop``. Each mutation is once-marked first (stages ``upload-start``,
  ``upload-session``, ``upload-chunk-<n>``, ``upload-evidence-<n>``, ``upload-stop``) and recorded done
  after; an uncertain outcome is ``testops.uncertain`` (exit 4) and ``reconcile`` takes over.

A second upload of the same receipt in the same state dir is a no-op that reports the first publication.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.context import job_context
from testops_evidence.errors import Refusal
from testops_evidence.evidence.publication import (
    CHUNK_SIZE,
    bundle_name,
    bundle_parts,
    chunks,
    publish_files,
    result_dto,
)
from testops_evidence.evidence.receipt import (
    Receipt,
    bind_receipt,
    check_tree,
    default_receipt_path,
    load_receipt,
    verified_bytes,
)
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import parse_json_bytes, sha256_bytes

PUBLICATION = "upload.json"
STAGE_PREFIX = "upload-"
RESULTS_CODE = "upload.results_invalid"


def paths(ctx: PhaseContext) -> tuple[Path, Path]:
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    return results_dir, ctx.settings.path("receipt-path") or default_receipt_path(results_dir)


def run(ctx: PhaseContext) -> PhaseResult:
    results_dir, receipt_path = paths(ctx)
    receipt = load_receipt(receipt_path)
    contract = ctx.contract()
    backend = ctx.backend()
    bind_receipt(receipt, campaign=contract.campaign, contract_sha256=contract.digest,
                 live=job_context(ctx.env, contract.trust.repository, contract.trust.workflows).binding_fields(), backend=backend)

    if ctx.state.has(PUBLICATION):
        return _already_published(ctx, receipt)
    pending = [stage for stage in ctx.state.pending_markers() if stage.startswith(STAGE_PREFIX)]
    if pending:
        raise Refusal("upload.already_started", f"an earlier upload in this state directory did not finish "
                      f"({len(pending)} uncertain stage(s): {', '.join(pending[:5])})", field="once-markers",
                      expected="none pending", actual=pending[:20])
    count = check_tree(results_dir, receipt, RESULTS_CODE, hash_files=False)
    with ctx.runtime.group(f"upload: {len(receipt.results)} results ({count} files) to the {backend} backend"):
        if backend == "files":
            return _upload_files(ctx, receipt, results_dir)
        return _upload_testops(ctx, receipt, results_dir)


def _already_published(ctx: PhaseContext, receipt: Receipt) -> PhaseResult:
    publication = ctx.state.read_receipt(PUBLICATION)
    if not isinstance(publication, dict) or publication.get("receipt-sha256") != receipt.sha256:
        raise Refusal("upload.already_started", "this state directory already holds a publication of another "
                      "export", field="receipt-sha256", expected=receipt.sha256,
                      actual=publication.get("receipt-sha256") if isinstance(publication, dict) else None)
    outputs = _outputs(publication)
    return PhaseResult(headline=f"✅ Already published: {publication.get('uploaded-count')} results "
                       f"({publication.get('backend')} backend); nothing was sent again.", outputs=outputs,
                       summary=_publication_table(publication))


def _outputs(publication: dict[str, Any]) -> dict[str, Any]:
    return {
        "launch-id": publication.get("launch-id") or "",
        "launch-url": publication.get("launch-url") or "",
        "uploaded-count": publication["uploaded-count"],
        "published": True,
    }


def _publication_table(publication: dict[str, Any]) -> str:
    rows: list[tuple[str, Any]] = [("backend", publication["backend"]),
                                   ("results", publication["uploaded-count"]),
                                   ("export receipt sha256", summary.code(publication['receipt-sha256']))]
    if publication["backend"] == "files":
        rows.append(("published to", summary.code(publication['destination'])))
    else:
        rows += [("launch", summary.link(f"#{publication['launch-id']}", publication["launch-url"])),
                 ("job run", f"#{publication['job-run-id']}"), ("upload session", f"#{publication['session-id']}"),
                 ("result chunks", publication["chunks"]),
                 ("evidence bundle", summary.join((summary.code(p["name"]) for p in publication["evidence"]), ", ")),
                 ("requests", publication["requests"])]
    counts = publication["counts"]
    rows.append(("statuses", ", ".join(f"{summary.status_icon(s)} {counts[s]} {s}"
                                       for s in ("passed", "failed", "broken") if counts[s])))
    return summary.table(("", ""), rows)


def _upload_files(ctx: PhaseContext, receipt: Receipt, results_dir: Path) -> PhaseResult:
    destination = ctx.state.ensure() / "published" / (results_dir.resolve().name or "allure-results")
    if destination.exists() or destination.is_symlink():
        raise Refusal("io.exists", f"{destination} exists but no publication receipt records it", field="destination",
                      expected="absent", actual=str(destination))
    copied = publish_files(results_dir, destination, receipt, receipt.raw)
    publication = {"backend": "files", "destination": str(destination), "receipt-sha256": receipt.sha256,
                   "selection-sha256": receipt.document["selection-sha256"], "uploaded-count": len(receipt.results),
                   "files": copied, "counts": dict(receipt.counts), "launch-id": None,
                   "launch-url": destination.as_uri()}
    ctx.state.write_receipt(PUBLICATION, publication)
    return PhaseResult(headline=f"✅ Published {len(receipt.results)} results ({copied} files, every digest checked) "
                       f"to {summary.code(destination)}.", outputs=_outputs(publication), summary=_publication_table(publication))


# --- TestOps -------------------------------------------------------------------------------------------


class _Stages:
    """Once-mark, send, record done; a gateway or timeout answer to a mutation is an uncertain outcome."""

    def __init__(self, ctx: PhaseContext, client: Any) -> None:
        self.ctx = ctx
        self.client = client

    def post(self, stage: str, kind: str, path: str, body: Any = None, *, files: Any = None,
             params: dict[str, Any] | None = None, facts: dict[str, Any] | None = None,
             replayable: bool = True) -> Any:
        from testops_evidence.testops.observe import marker_detail

        request = {"method": "POST", "path": path, "json": body, **({"params": params} if params else {})}
        self.ctx.state.once(stage, marker_detail(self.client, kind, request if replayable else None,
                                                 **(facts or {})))
        try:
            answer = self.client.post(path, body, files=files, params=params)
        except Refusal as refusal:
            status = refusal.http_status
            if status is not None and (status >= 500 or status == 408):
                # A gateway error or timeout does not say whether the backend applied the request.
                raise Refusal("testops.uncertain", f"stage {stage}: POST {path} answered HTTP {status}; it may or "
                              "may not have taken effect and is not re-sent automatically",
                              field="stage", expected="a definite answer", actual=stage) from None
            if refusal.code == "testops.uncertain":
                raise Refusal("testops.uncertain", f"stage {stage}: {refusal.message}", field="stage",
                              expected="a definite answer", actual=stage) from None
            raise
        return answer

    def done(self, stage: str, facts: dict[str, Any]) -> None:
        self.ctx.state.done(stage, {"outcome": "sent", **facts})


def _integer(value: Any, what: str) -> int:
    from testops_evidence.testops.client import expect_id

    return expect_id(value, what)


def _upload_testops(ctx: PhaseContext, receipt: Receipt, results_dir: Path) -> PhaseResult:
    from testops_evidence.testops.client import TestOpsClient, expect_list, expect_object

    testops = receipt.testops
    assert testops is not None  # bind_receipt refused a files-backend receipt
    context = receipt.document["context"]
    job_run_id, launch_id, project_id = testops["job-run-id"], testops["launch-id"], testops["project-id"]
    rows = receipt.results
    expected = receipt.expected_files()
    # Read and check every file once, before the first mutation: a bad file must not leave half an upload.
    dtos = [result_dto(parse_json_bytes(verified_bytes(results_dir, row["result-file"], row["result-sha256"],
                                                        RESULTS_CODE), row["result-file"])) for row in rows]
    evidence = [(row, verified_bytes(results_dir, row["attachment-file"], row["attachment-sha256"], RESULTS_CODE))
                for row in rows]
    for name in (f["name"] for f in receipt.document["files"]):
        verified_bytes(results_dir, name, expected[name], RESULTS_CODE)
    parts = bundle_parts(receipt, evidence)

    with TestOpsClient.from_context(ctx) as client:
        if client.project_id != project_id:
            raise Refusal("upload.binding", "the TestOps project differs from the selection's", field="project-id",
                          expected=project_id, actual=client.project_id)
        stages = _Stages(ctx, client)
        workflow_file = Path(str(context["workflow-path"])).name
        job_uid = f"{context['repository']}_{workflow_file}"
        run_uid = str(context["run-id"])
        start_body = {
            "projectId": project_id,
            "ci": {"type": "github", "endpoint": context["server-url"]},
            "job": {"name": str(context["workflow-path"]), "uid": job_uid,
                    "url": f"{context['server-url']}/{context['repository']}/actions/workflows/{workflow_file}",
                    "parameters": []},
            "jobRun": {"id": job_run_id, "uid": run_uid, "name": f"{receipt.document['campaign']} #"
                       f"{context.get('run-number', context['run-id'])}", "url": context["run-url"], "parameters": []},
            "launch": {"id": launch_id},
        }
        answer = expect_object(stages.post("upload-start", "upload-start", "/upload/start", start_body,
                                           facts={"job-run-id": job_run_id, "launch-id": launch_id}),
                               "upload start", ("jobRunId", "launchId"))
        got_run, got_launch = _integer(answer["jobRunId"], "jobRunId"), _integer(answer["launchId"], "launchId")
        stages.done("upload-start", {"job-run-id": got_run, "launch-id": got_launch})
        for field, want, got in (("jobRunId", job_run_id, got_run), ("launchId", launch_id, got_launch)):
            if want != got:
                raise Refusal("upload.binding", f"TestOps attached the upload to another {field}", field=field,
                              expected=want, actual=got)

        environment = [{"key": f"profile.{k}", "value": v} for k, v in sorted(receipt.document["profile"].items())]
        environment.append({"key": "source.sha", "value": context["head-sha"]})
        session = expect_object(stages.post("upload-session", "upload-session", "/upload/session",
                                            {"jobRunId": job_run_id, "environment": environment},
                                            facts={"job-run-id": job_run_id, "launch-id": launch_id},
                                            replayable=False), "upload session", ("id",))
        session_id = _integer(session["id"], "session id")
        stages.done("upload-session", {"session-id": session_id})

        result_ids: dict[str, int] = {}
        batches = list(chunks(list(zip(rows, dtos, strict=True)), CHUNK_SIZE))
        for number, batch in enumerate(batches, start=1):
            stage = f"upload-chunk-{number}"
            body = {"testSessionId": session_id, "results": [dto for _row, dto in batch]}
            facts = {"launch-id": launch_id, "session-id": session_id,
                     "results": [{"uuid": row["uuid"], "full-name": row["full-name"],
                                  "test-case-id": row["testops-id"]} for row, _dto in batch]}
            answer = expect_object(stages.post(stage, "upload-chunk", "/upload/test-result", body, facts=facts),
                                   f"upload chunk {number}", ("results",))
            mapped = {}
            for index, item in enumerate(expect_list(answer["results"], f"upload chunk {number}.results")):
                item = expect_object(item, f"upload chunk {number}.results[{index}]", ("id", "uuid"))
                mapped[str(item["uuid"])] = _integer(item["id"], f"result id of {item['uuid']}")
            sent = {row["uuid"] for row, _dto in batch}
            if set(mapped) != sent:
                raise Refusal("testops.response_invalid", f"TestOps acknowledged other results than chunk {number} "
                              "sent", field=f"upload chunk {number}", expected=f"{len(sent)} uuids sent",
                              actual=f"{len(set(mapped) & sent)} of them acknowledged, {len(set(mapped) - sent)} "
                              "others")
            stages.done(stage, {"result-ids": mapped})
            result_ids.update(mapped)
            if number % 10 == 0 or number == len(batches):
                ctx.runtime.log(f"uploaded {len(result_ids)} of {len(rows)} results ({number} of {len(batches)} chunks)")

        uploaded_parts = []
        for number, data in enumerate(parts, start=1):
            stage = f"upload-evidence-{number}"
            name = bundle_name(receipt, number, len(parts))
            digest = sha256_bytes(data)
            stages.post(stage, "upload-evidence", "/launch/attachment", None,
                        files=[("file", (name, data, "application/json"))],
                        params={"launchId": launch_id, "jobRunId": job_run_id},
                        facts={"launch-id": launch_id, "name": name, "sha256": digest}, replayable=False)
            stages.done(stage, {"name": name, "sha256": digest})
            uploaded_parts.append({"name": name, "sha256": digest, "bytes": len(data)})

        counts = receipt.counts
        status = "passed" if counts["passed"] == counts["total"] else "failed"
        stages.post("upload-stop", "upload-stop", "/upload/stop",
                    {"jobRunId": job_run_id, "jobRunUid": run_uid, "jobUid": job_uid, "projectId": project_id,
                     "status": status}, facts={"job-run-id": job_run_id})
        stages.done("upload-stop", {"status": status})
        launch_url = client.web_url("launch", launch_id)
        publication = {
            "backend": "testops", "endpoint": client.endpoint, "project-id": project_id, "launch-id": launch_id,
            "launch-url": launch_url, "job-run-id": job_run_id, "session-id": session_id,
            "receipt-sha256": receipt.sha256, "selection-sha256": receipt.document["selection-sha256"],
            "uploaded-count": len(result_ids), "chunks": len(batches), "evidence": uploaded_parts,
            "counts": dict(counts), "requests": client.request_count, "result-ids": result_ids,
        }
    ctx.state.write_receipt(PUBLICATION, publication)
    ratio = publication["requests"] / max(1, len(rows))
    return PhaseResult(
        headline=f"✅ Published {len(result_ids)} results to TestOps launch #{launch_id} (job run #{job_run_id}) in "
                 f"{publication['requests']} requests ({ratio:.3f} per result).",
        outputs=_outputs(publication), summary=_publication_table(publication))
