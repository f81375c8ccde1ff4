"""``upload`` (token phase): publish an export, exactly as its receipt describes it.

Before anything is sent, the results directory must hold exactly the receipt's files with the receipt's
digests (``upload.results_invalid``) and the receipt must belong to this run (``selection.context``). The
backend then publishes it (``backends/``): the files backend as a verified copy in the state directory,
the TestOps backend through the session upload flow, every change once-marked first so that an uncertain
outcome is left to ``reconcile``. The publication record ``upload.json`` is written last.

A second upload of the same receipt in the same state dir is a no-op that reports the first publication.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.backends import backend_class
from testops_evidence.context import job_context
from testops_evidence.errors import Refusal
from testops_evidence.evidence.receipt import Receipt, bind_receipt, check_tree, default_receipt_path, load_receipt
from testops_evidence.runner import PhaseContext, PhaseResult

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
        published = ctx.open_backend().publish(receipt, results_dir)
    ctx.state.write_receipt(PUBLICATION, published.record)
    return PhaseResult(headline=published.headline, outputs=_outputs(published.record),
                       summary=_publication_table(published.record))


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
                                   ("export receipt sha256", summary.code(publication["receipt-sha256"]))]
    rows += backend_class(publication["backend"]).publication_rows(publication)
    counts = publication["counts"]
    rows.append(("statuses", ", ".join(f"{summary.status_icon(s)} {counts[s]} {s}"
                                       for s in ("passed", "failed", "broken") if counts[s])))
    return summary.table(("", ""), rows)
