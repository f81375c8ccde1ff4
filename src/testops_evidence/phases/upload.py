"""``upload`` (token phase): publish an export, exactly as its receipt describes it.

Before anything is sent, the receipt must hash to the ``receipt-sha256`` export output
(``export.receipt_digest``), be the export of the digest-checked selection — one row per selected case, in
order (``export.receipt``) — and belong to this run (``selection.context``), and the results directory must
hold exactly the receipt's files with the receipt's digests (``upload.results_invalid``). The
backend then publishes it (``backends/``): the files backend as a verified copy in the state directory,
the TestOps backend through the session upload flow, every change once-marked first so that an uncertain
outcome is left to ``reconcile``. The publication record ``upload.json`` is written last.

On the files backend the publication is a directory (``publication-dir``) that a workflow keeps as an
artifact: ``allure-results/``, its receipt, an Allure Report (``report``: auto, always, never) and the report
history (``history.jsonl``) that the next run continues. The history comes from ``report-history`` (a file,
e.g. from a Pages branch) or from the history artifact of the newest earlier run of this workflow on this
branch (``history-artifact``) — only the artifact whose id and digest that run's ``publish`` job recorded in its
step record (campaign/workers.py ``publish_reports``), since a worker could upload a history under a matching name
and the trends show each case's earlier statuses; an earlier run's history that cannot be read or bound is reported
and left out, never fatal.

A second upload of the same receipt in the same state dir is a no-op that reports the first publication.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from testops_evidence import summary, trust
from testops_evidence.backends import PublishOptions, backend_class
from testops_evidence.campaign import previous
from testops_evidence.campaign.receipt import AdmittedReceipt, Receipt, admit_receipt, check_tree, default_receipt_path
from testops_evidence.campaign.workers import PUBLISH_JOB
from testops_evidence.context import RunContext, job_context
from testops_evidence.errors import Refusal
from testops_evidence.publication.report import HISTORY_BYTES, read_history, report_mode
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import write_atomic

HISTORY_FILE = "history.jsonl"

PUBLICATION = "upload.json"
STAGE_PREFIX = "upload-"
RESULTS_CODE = "upload.results_invalid"


def paths(ctx: PhaseContext) -> tuple[Path, Path]:
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    return results_dir, ctx.settings.path("receipt-path") or default_receipt_path(results_dir)


def admitted(ctx: PhaseContext, receipt_path: Path) -> tuple[AdmittedReceipt, RunContext]:
    """The receipt and its selection, bound across jobs by their travelled digests, and the run (upload and
    verify); the run select recorded in the selection is held against the trust policy again
    (:func:`trust.readmit_recorded`) before anything is sent."""
    contract = ctx.contract()
    live = job_context(ctx.env, contract.trust.repository, contract.trust.workflows,
                       local=ctx.settings.boolean("local"))
    admission = admit_receipt(receipt_path, ctx.settings.string("receipt-sha256"),
                              ctx.settings.path("selection-path") or Path("testops-evidence-selection.json"),
                              ctx.settings.string("selection-sha256"),
                              in_actions=ctx.env.get("GITHUB_ACTIONS") == "true", contract=contract,
                              backend=ctx.backend(), live=live)
    trust.readmit_recorded(admission.selection.context, contract, ctx.mode, log=ctx.runtime.log)
    return admission, live


def run(ctx: PhaseContext) -> PhaseResult:
    results_dir, receipt_path = paths(ctx)
    admission, live = admitted(ctx, receipt_path)
    receipt = admission.receipt
    backend = ctx.backend()

    if ctx.state.has(PUBLICATION):
        return _already_published(ctx, receipt)
    pending = [stage for stage in ctx.state.pending_markers() if stage.startswith(STAGE_PREFIX)]
    if pending:
        raise Refusal("upload.already_started", f"an earlier upload in this state directory did not finish "
                      f"({len(pending)} uncertain stage(s): {', '.join(pending[:5])})", field="once-markers",
                      expected="none pending", actual=pending[:20])
    count = check_tree(results_dir, receipt, RESULTS_CODE, hash_files=False)
    options = _publish_options(ctx, receipt, live) if not backend_class(backend).remote else PublishOptions()
    if backend_class(backend).remote and ctx.settings.string("stream-sha256"):
        options = _streamed(ctx, receipt)
    with ctx.runtime.group(f"upload: {len(receipt.results)} results ({count} files) to the {backend} backend"):
        published = ctx.open_backend().publish(receipt, results_dir, options)
    ctx.state.write_receipt(PUBLICATION, published.record)
    report = published.record.get("report")
    if isinstance(report, dict) and not report.get("built") and options.report == "auto":
        # Never silent: the run page shows it, not only the summary.
        ctx.runtime.annotate("warning", f"no HTML report was built: {report.get('reason')}; "
                             f"{report.get('remedy')}", title="upload.report")
    return PhaseResult(headline=published.headline, outputs=_outputs(published.record),
                       summary=_publication_table(published.record, ctx.contract_row(ctx.contract())), brief=True)


def _streamed(ctx: PhaseContext, receipt: Receipt) -> PublishOptions:
    """What the stream job already sent into the launch: its ledger, bound by the stream job's ``stream-sha256``
    output and held to the receipt as verify-stream holds it (``stream.mismatch``, ``stream.missing``, ...), with
    the result ids TestOps answered for each streamed case."""
    from testops_evidence.publication.stream import LEDGER_NAME, check_ledger, compare, left_to_export
    from testops_evidence.safeio import parse_json_bytes, read_safe_path, sha256_bytes

    ledger_path = (ctx.settings.path("stream-dir") or Path("testops-evidence-stream")) / LEDGER_NAME
    data = read_safe_path(ledger_path, limit=64 * 1024 * 1024)
    want = ctx.settings.string("stream-sha256")
    if sha256_bytes(data) != want:
        raise Refusal("stream.ledger", f"the stream ledger {ledger_path} does not hash to stream-sha256: it changed "
                      "after the stream job wrote it", field="stream-sha256", expected=want, actual=sha256_bytes(data))
    document = parse_json_bytes(data, str(ledger_path), "stream.ledger")
    published = check_ledger(document, campaign=receipt.document["campaign"],
                             selection_sha256=receipt.document["selection-sha256"])
    compare(published, receipt.results, left_to_export(document))
    streamed: dict[str, list[int]] = {}
    for entry in published:
        ids = entry.get("testops-result-ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool)
                                                           for i in ids):
            raise Refusal("stream.ledger", f"the stream ledger names no TestOps result ids for case {entry['key']!r}: "
                          "it was not streamed to TestOps", field=str(entry["key"]), expected="testops-result-ids",
                          actual=str(ids)[:100])
        streamed[str(entry["key"])] = list(ids)
    form = document.get("testops-result-form")
    ctx.runtime.log(f"stream: {len(streamed)} case(s) were sent to TestOps by the stream job; they are not sent again")
    return PublishOptions(streamed=streamed, streamed_form=form if isinstance(form, str) else None)


# --- the files backend's report and its history -----------------------------------------------------------------


def _publish_options(ctx: PhaseContext, receipt: Receipt, live: RunContext) -> PublishOptions:
    mode = report_mode(ctx.settings.string("report"))
    limit = ctx.settings.integer("history-limit", minimum=1)
    context = receipt.document["context"]
    title = (f"{receipt.document['campaign']} · run {context.get('run-number', context['run-id'])}"
             f" (attempt {context['run-attempt']})")
    history, source = _history(ctx, live) if mode != "never" else (None, "")
    logs = Path(os.path.abspath(ctx.state.ensure()))
    return PublishOptions(report=mode, history=history, history_source=source,
                          history_limit=20 if limit is None else limit, title=title, env=ctx.env, logs=logs)


def _history(ctx: PhaseContext, live: RunContext) -> tuple[Path | None, str]:
    """The history the report continues, and where it came from; (None, "") for a new history."""
    explicit = ctx.settings.path("report-history")
    if explicit is not None:
        read_history(explicit)  # a file the operator named must be right: upload.history otherwise
        return explicit, f"the file {explicit}"
    pattern = ctx.settings.string("history-artifact")
    if pattern is None:
        return None, ""
    if live.local:
        ctx.runtime.log("history-artifact: a local run has no earlier runs to take the history from")
        return None, ""
    token = ctx.github_token()
    if not token:
        ctx.runtime.annotate("warning", "history-artifact is set but there is no github-token: the report starts a "
                             "new history", title="upload.history")
        return None, ""
    try:
        return _earlier_history(ctx, live, token, pattern)
    except Refusal as refusal:
        ctx.runtime.annotate("warning", f"the history of earlier reports was left out ({refusal.code}: "
                             f"{refusal.message}); the report starts a new history", title="upload.history")
        return None, ""


def _earlier_history(ctx: PhaseContext, live: RunContext, token: str, pattern: str) -> tuple[Path | None, str]:
    from testops_evidence import github_run
    from testops_evidence.readers.archive import ArchiveLimits, extract_zip

    policy = github_run.request_policy(ctx.env, ctx.sleep)
    workflow = Path(live.workflow_path).name
    # A name binds nothing: any job of that run that reached the runtime token could upload a history of its own
    # under a matching name, and its per-case statuses would show in this report's trends. The history is taken
    # only from an artifact whose id and digest that run's publish job recorded (campaign/workers.py).
    artifact = previous.recorded_earlier_artifact(live.api_url, token, live.repository, workflow, branch=live.branch,
                                                  before=live.run_id, pattern=pattern, job=PUBLISH_JOB, what="history",
                                                  code="upload.history", policy=policy)
    if artifact is None:
        ctx.runtime.log(f"no earlier completed run of {workflow} on {live.branch} has an artifact named like "
                        f"{pattern}: the report starts a new history")
        return None, ""
    data = previous.download_recorded(live.api_url, token, artifact, max_bytes=HISTORY_BYTES + 1024 * 1024,
                                      code="upload.history", policy=policy)
    archive = extract_zip(data, limits=ArchiveLimits(max_entries=16, max_entry_bytes=HISTORY_BYTES,
                                                     max_total_bytes=HISTORY_BYTES))
    found = archive.files.get(HISTORY_FILE)
    if found is None:
        raise Refusal("upload.history", f"the artifact {artifact.name} of run {artifact.run_id} holds no "
                      f"{HISTORY_FILE}", field="history-artifact", expected=HISTORY_FILE, actual=list(archive.names)[:10])
    path = write_atomic(ctx.state.ensure() / "history-earlier.jsonl", found.data)
    entries = read_history(path)
    ctx.runtime.log(f"history: {entries} earlier report(s) from the artifact {artifact.name} of run {artifact.run_id}")
    return path, f"the artifact {artifact.name} of run {artifact.run_id}"


def _already_published(ctx: PhaseContext, receipt: Receipt) -> PhaseResult:
    publication = ctx.state.read_receipt(PUBLICATION)
    if not isinstance(publication, dict) or publication.get("receipt-sha256") != receipt.sha256:
        raise Refusal("upload.already_started", "this state directory already holds a publication of another "
                      "export", field="receipt-sha256", expected=receipt.sha256,
                      actual=publication.get("receipt-sha256") if isinstance(publication, dict) else None)
    outputs = _outputs(publication)
    return PhaseResult(headline=f"✅ Already published: {publication.get('uploaded-count')} results "
                       f"({publication.get('backend')} backend); nothing was sent again.", outputs=outputs,
                       summary=_publication_table(publication), brief=True)


def _outputs(publication: dict[str, Any]) -> dict[str, Any]:
    outputs = {
        "launch-id": publication.get("launch-id") or "",
        "launch-url": publication.get("launch-url") or "",
        "uploaded-count": publication["uploaded-count"],
        "published": True,
    }
    if publication.get("publication-dir"):
        report = publication.get("report")
        outputs.update({"publication-dir": publication["publication-dir"],
                        "publication-name": publication.get("publication-name", ""),
                        "report-built": bool(isinstance(report, dict) and report.get("built")),
                        "report-tree-sha256": publication.get("tree-sha256") or ""})
    return outputs


def _publication_table(publication: dict[str, Any], contract: summary.Markdown | None = None) -> str:
    rows: list[tuple[str, Any]] = [("backend", publication["backend"]),
                                   ("results", publication["uploaded-count"]),
                                   ("export receipt sha256", summary.code(publication["receipt-sha256"]))]
    if contract is not None:
        rows.append(("contract", contract))
    rows += backend_class(publication["backend"]).publication_rows(publication)
    counts = publication["counts"]
    rows.append(("statuses", ", ".join(f"{summary.status_icon(s)} {counts[s]} {s}"
                                       for s in ("passed", "failed", "broken") if counts[s])))
    return summary.table(("", ""), rows)
