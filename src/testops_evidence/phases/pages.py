"""``pages``: put a files-backend publication's HTML report on a GitHub Pages site, with retention.

The publication comes from another job (the campaign template downloads its report artifact), so it is
checked again before anything is written: it must hold exactly the files of its manifest
(``testops-evidence-tree.json``, written by upload), each with its digest, and the manifest must hash to the
``report-tree-sha256`` that travelled as the publish job's output (an extra file anywhere: ``io.extra_file``;
a missing or changed one: ``pages.publication``) — so every file of the HTML report that is served, its
scripts and per-case data included, is the one upload built. Its receipt must hash to the
``receipt-sha256`` that travelled as export's output and belong to this run and contract, its
``allure-results/`` must be exactly the receipt's files with the receipt's digests, and its report's
statistics must equal the receipt's counts (``pages.publication``). Both digests are required inside
Actions. Then :mod:`publication.site` writes the
report into the checked-out Pages branch (``pages-dir``) as ``<campaign>/<run id>-<attempt>/``, keeps the
newest ``pages-keep`` reports of the campaign and rewrites the indexes. Committing and pushing the branch
is the workflow's (the campaign template's ``pages`` job); this phase needs no token and no network.
"""

from __future__ import annotations

from testops_evidence import summary, trust
from testops_evidence.campaign.receipt import RECEIPT_LIMIT, bind_receipt, check_tree, load_bound_receipt
from testops_evidence.campaign.selection import read_travelled
from testops_evidence.context import RunContext, is_local, job_context
from testops_evidence.errors import Refusal, input_error
from testops_evidence.publication import attestation, site
from testops_evidence.publication import report as report_tool
from testops_evidence.publication.files import (
    RECEIPT_NAME,
    RESULTS_NAME,
    TREE_LIMIT,
    TREE_NAME,
    check_publication_tree,
)
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import write_atomic
from testops_evidence.summaries import badge

REPORT_DIR = "allure-report"
STATUSES = ("total", "passed", "failed", "broken")


def pages_base(ctx: PhaseContext, repository: str) -> str:
    """The site's URL: the ``pages-url`` input, else GitHub's own Pages address for github.com."""
    explicit = ctx.settings.string("pages-url")
    if explicit is not None:
        return explicit.rstrip("/")
    server = ctx.env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    if server != "https://github.com":
        return ""  # GHES Pages addresses depend on the instance's setup: say so rather than guess
    owner, _, name = repository.partition("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}" if name.lower() == host else f"https://{host}/{name}"


def run(ctx: PhaseContext) -> PhaseResult:
    pages_dir = ctx.settings.path("pages-dir")
    publication = ctx.settings.path("publication-dir")
    if pages_dir is None or publication is None:
        raise input_error("pages-dir" if pages_dir is None else "publication-dir",
                          "pages needs pages-dir (the checked-out Pages branch) and publication-dir (the downloaded "
                          "publication)")
    keep = ctx.settings.integer("pages-keep", minimum=1) or 20
    contract = ctx.contract()
    local = ctx.settings.boolean("local")
    receipt_path = publication / RECEIPT_NAME
    # The receipt crossed jobs in an artifact: it is bound by the digest that travelled as export's output.
    digest, _travelled = read_travelled(receipt_path, ctx.settings.string("receipt-sha256"),
                                        in_actions=not is_local(ctx.env, local), name="receipt-sha256",
                                        limit=RECEIPT_LIMIT)
    receipt = load_bound_receipt(receipt_path, digest)
    live = job_context(ctx.env, contract.trust.repository, contract.trust.workflows, local=local)
    bind_receipt(receipt, campaign=contract.campaign, contract_sha256=contract.digest, live=live.binding_fields(),
                 backend="files")
    # The receipt carries the run select recorded over REST: held against the trust policy before the branch
    # is written, whether or not the workflow ran guard (its actors and visibility are not in the receipt).
    recorded = RunContext.from_json({"actor-id": None, "triggering-actor-id": None, **receipt.document["context"]})
    trust.readmit_recorded(recorded, contract, ctx.mode, receipt_only=True, log=ctx.runtime.log)
    # The whole artifact — results, receipt, report, history — is bound by the manifest whose digest travelled
    # as the publish job's output: a file added, missing or changed anywhere in it is refused, never served.
    tree_sha256, tree_given = read_travelled(publication / TREE_NAME, ctx.settings.string("report-tree-sha256"),
                                             in_actions=not is_local(ctx.env, local), name="report-tree-sha256",
                                             limit=TREE_LIMIT)
    # verify's statement is added to the publication after upload wrote the manifest; pages neither reads
    # nor serves it (the site gets the report and its history alone).
    tree_files = check_publication_tree(publication, tree_sha256, "pages.publication",
                                        unread=(attestation.STATEMENT_NAME, attestation.PREDICATE_NAME))
    files = check_tree(publication / RESULTS_NAME, receipt, "pages.publication")
    report = publication / REPORT_DIR
    stats = report_tool.statistics(report)
    want = {status: receipt.counts[status] for status in STATUSES}
    got = {status: (stats or {}).get(status) for status in STATUSES}
    if got != want:
        raise Refusal("pages.publication", f"the report in {report} does not show the receipt's counts"
                      + ("" if stats is not None else " (it has no summary.json: was it built?)"),
                      field="allure-report/summary.json", expected=want, actual=got)

    context = receipt.document["context"]
    entry = site.Entry(run_id=int(context["run-id"]), attempt=int(context["run-attempt"]),
                       run_number=int(context.get("run-number", context["run-id"])),
                       created=str(receipt.document.get("created-at", "")), counts=want,
                       local=bool(context.get("local", False)))
    history = publication / site.HISTORY_FILE
    with ctx.runtime.group(f"pages: {contract.campaign} run {entry.run_number} into {pages_dir}"):
        done = site.publish_report(pages_dir, contract.campaign, entry, report,
                                   history if history.is_file() else None, keep)
        # The status badge, drawn from the bound receipt (as upload drew the publication's): beside the run's
        # report, and as the campaign's badge while this run is its newest report.
        drawn = badge.svg(receipt.document)
        write_atomic(pages_dir / contract.campaign / entry.directory / badge.NAME, drawn, mode=0o644)
        if done.kept and done.kept[0] == entry:
            write_atomic(pages_dir / contract.campaign / badge.NAME, drawn, mode=0o644)
    base = pages_base(ctx, live.repository)
    relative = f"{contract.campaign}/{entry.directory}/index.html"
    url = f"{base}/{relative}" if base else relative
    size = site.tree_bytes(pages_dir / contract.campaign)
    rows: list[tuple[str, object]] = [
        ("report", summary.link(relative, url) if base else summary.code(relative)),
        ("campaign index", summary.code(f"{contract.campaign}/index.html")),
        ("badge", summary.link(f"{contract.campaign}/{badge.NAME}", f"{base}/{contract.campaign}/{badge.NAME}")
                  if base else summary.code(f"{contract.campaign}/{badge.NAME}")),
        ("checked", f"{files} result files against the receipt; the report's statistics equal it"),
        ("publication", f"exactly the {tree_files} files of its manifest, "
                        + ("bound by the publish job's report-tree-sha256" if tree_given
                           else "whose digest was computed here (no report-tree-sha256 was given)")),
        ("kept", f"{len(done.kept)} of at most {keep} reports ({size / 1024 / 1024:.1f} MiB)"),
        ("removed", summary.join((summary.code(name) for name in done.removed), ", ") if done.removed else "none"),
        ("contract", ctx.contract_row(contract)),
    ]
    headline = (f"✅ The report of run {entry.run_number} (attempt {entry.attempt}) is on the Pages site: "
                f"{len(done.kept)} report(s) kept, {len(done.removed)} removed by retention.")
    return PhaseResult(headline=headline, summary=summary.table(("", ""), rows),
                       outputs={"pages-url": url, "pages-kept": len(done.kept),
                                "pages-removed": list(done.removed)})
