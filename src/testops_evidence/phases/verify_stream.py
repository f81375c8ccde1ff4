"""``verify-stream`` (no token): hold what ``stream`` published to the export receipt of the same cells.

After the matrix, export computes the receipt from every worker's cells (the batch path). This phase reads that
receipt (bound by ``receipt-sha256`` and its selection by ``selection-sha256``, as upload reads them) and the
stream's ledger (bound by ``stream-sha256``, the stream job's output), checks that the stream directory holds
exactly the files the ledger lists with their digests, and compares the two case by case
(``publication/stream.py``): every published case once, with the receipt's status and the same evidence; nothing
the receipt does not have; a case never published only where the receipt reports it broken (its worker never
delivered). A difference refuses (``stream.mismatch``, ``stream.missing``, ``stream.extra``,
``stream.duplicate``); nothing published is changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from testops_evidence import summary, trust
from testops_evidence.campaign.receipt import admit_receipt, default_receipt_path
from testops_evidence.campaign.selection import read_travelled
from testops_evidence.context import job_context
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal
from testops_evidence.publication.stream import (
    LEDGER_LIMIT,
    LEDGER_NAME,
    RESULTS_DIR,
    check_ledger,
    compare,
    left_to_export,
    published_files,
)
from testops_evidence.publication.tree import check_exact
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import parse_json_bytes, read_safe_path, sha256_bytes

STREAM_DIR = Path("testops-evidence-stream")


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    live = job_context(ctx.env, contract.trust.repository, contract.trust.workflows,
                       local=ctx.settings.boolean("local"))
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    in_actions = ctx.env.get("GITHUB_ACTIONS") == "true"
    admission = admit_receipt(ctx.settings.path("receipt-path") or default_receipt_path(results_dir),
                              ctx.settings.string("receipt-sha256"),
                              ctx.settings.path("selection-path") or Path("testops-evidence-selection.json"),
                              ctx.settings.string("selection-sha256"), in_actions=in_actions, contract=contract,
                              backend=ctx.backend(), live=live)
    trust.readmit_recorded(admission.selection.context, contract, ctx.mode, log=ctx.runtime.log)
    receipt = admission.receipt
    directory = ctx.settings.path("stream-dir") or STREAM_DIR
    ledger_path = directory / LEDGER_NAME
    # The downloaded stream artifact holds the ledger and the results it lists, nothing beside them.
    _only_the_stream(directory)
    digest, given = read_travelled(ledger_path, ctx.settings.string("stream-sha256"), in_actions=in_actions,
                                   name="stream-sha256", limit=LEDGER_LIMIT)
    data = read_safe_path(ledger_path, limit=LEDGER_LIMIT)
    if sha256_bytes(data) != digest:
        raise Refusal("stream.ledger", f"the stream ledger {ledger_path} does not hash to stream-sha256: it changed "
                      "after the stream job wrote it", field="stream-sha256", expected=digest,
                      actual=sha256_bytes(data))
    document = parse_json_bytes(data, str(ledger_path), "stream.ledger")
    published = check_ledger(document, campaign=contract.campaign, selection_sha256=receipt.document["selection-sha256"])
    files = published_files(published)
    results = directory / RESULTS_DIR
    if files or results.exists():
        check_exact(results, files, code="stream.ledger", binding="the stream ledger", limit=LEDGER_LIMIT)
    counts = compare(published, receipt.results, left_to_export(document))
    complete = bool(document.get("complete"))
    unpublished = counts["unpublished"]
    headline = (f"✅ The stream published {counts['published']} of {counts['receipt']} cases, each exactly as the "
                "export measured it" + (f"; {unpublished} case(s) that never finished are reported broken by the "
                                        "receipt." if unpublished else "."))
    rows = [("stream ledger", summary.code(ledger_path)),
            ("stream sha256", summary.Markdown(summary.code(digest) + (
                "" if given else " (computed here: no `stream-sha256` was given)"))),
            ("export receipt sha256", summary.code(receipt.sha256)),
            ("published / in the receipt", f"{counts['published']} / {counts['receipt']}"),
            ("published statuses", ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "broken"))),
            ("stream ended with the matrix", "yes" if complete else "no: cut short (deadline or cancellation)")]
    fail = ctx.settings.boolean("fail-on-failed-cases")
    return PhaseResult(headline=headline, summary=summary.table(("", ""), rows),
                       outputs={"published-count": counts["published"], "verified-count": counts["published"],
                                "all-passed": receipt.all_passed, "stream-complete": complete},
                       exit_code=EXIT_CASES_FAILED if fail and not receipt.all_passed else EXIT_OK, brief=True)


def _only_the_stream(directory: Path) -> None:
    """The downloaded stream artifact holds the ledger (a file) and the results it lists (a directory), nothing
    beside them (``stream.ledger``)."""
    kinds = {LEDGER_NAME: stat.S_ISREG, RESULTS_DIR: stat.S_ISDIR}
    try:
        with os.scandir(directory) as entries:
            extra = sorted(entry.name for entry in entries if entry.name not in kinds
                           or not kinds[entry.name](entry.stat(follow_symlinks=False).st_mode))
    except OSError as exc:
        raise Refusal("stream.ledger", f"the stream directory {directory} cannot be read ({exc.strerror}): download "
                      "the stream artifact into it by its id", field="stream-dir", expected=sorted(kinds),
                      actual=str(directory)) from None
    if extra:
        raise Refusal("stream.ledger", f"the stream directory {directory} holds {', '.join(extra[:10])} beside the "
                      "ledger and its results: the artifact was added to after the stream job made it",
                      field="stream-dir", expected=sorted(kinds), actual=extra[:20])
