"""``verify`` (token phase): prove that the publication landed, row by row, as the receipt says.

The backend checks its publication (``backends/``): the files backend re-reads the published copy (every
receipt file with its digest, every result once with the receipt's uuid, name and status, nothing else);
the TestOps backend pages through the launch's results until every receipt row appears exactly once with
its status, waiting with exponential backoff up to ``deadline-seconds`` for results still being processed
(``verify-depth: detail`` also checks each result's job run, project and launch).

``verify.missing`` (exit 4: the publication did not become visible), ``verify.duplicate`` and
``verify.mismatch`` (exit 3). The outputs ``verified-count`` and ``all-passed`` are separate from the exit
code: exit 1 means "published and verified, but not every case passed", never "publishing broke".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testops_evidence import __version__, github_checks, summary, trust
from testops_evidence.backends import VerifyOptions
from testops_evidence.campaign import previous, stats
from testops_evidence.campaign.receipt import AdmittedReceipt, Receipt, admit_receipt, default_receipt_path
from testops_evidence.campaign.usage import COST, show
from testops_evidence.context import job_context, read_event
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal, input_error
from testops_evidence.github_run import request_policy
from testops_evidence.publication import attestation
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.summaries import campaign as campaign_summary

PUBLICATION = "upload.json"
DEPTHS = ("page", "detail")


def run(ctx: PhaseContext) -> PhaseResult:
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    receipt = _admitted(ctx, ctx.settings.path("receipt-path") or default_receipt_path(results_dir)).receipt
    depth = ctx.settings.string("verify-depth") or "page"
    if depth not in DEPTHS:
        raise Refusal("input.verify-depth", "verify-depth must be page or detail", field="verify-depth",
                      expected="page | detail", actual=depth)
    deadline = ctx.settings.integer("deadline-seconds")
    deadline = 600 if deadline is None else deadline
    publication = _publication(ctx, receipt)
    backend = ctx.backend()
    with ctx.runtime.group(f"verify: {len(receipt.results)} results on the {backend} backend"):
        facts = ctx.open_backend().verify(receipt, publication, VerifyOptions(depth, deadline))
    verified = len(receipt.results)
    all_passed = receipt.all_passed
    ctx.state.write_receipt("verify.json", {"backend": backend, "receipt-sha256": receipt.sha256,
                                            "verified-count": verified, "all-passed": all_passed, **facts})
    # The attestation of what was published, from what (publication/attestation.py): written only now that the
    # publication is proven; the predicate alone too, for actions/attest to sign.
    statement = attestation.statement(receipt, publication, str(receipt.document["results-dir"]),
                                      version=__version__)
    statement_path = ctx.state.write_receipt(attestation.STATEMENT_NAME, statement)
    predicate_path = ctx.state.write_receipt(attestation.PREDICATE_NAME, statement["predicate"])
    counts = receipt.counts
    statuses = ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "broken") if counts[s])
    headline = (f"✅ Verified {verified} published results ({statuses}); every case passed." if all_passed else
                f"❌ Verified {verified} published results ({statuses}): the publication is complete, but not every "
                "case passed.")
    cost = receipt.cost_outputs()
    rows = [("backend", backend), ("verified", verified), ("export receipt sha256", summary.code(receipt.sha256)),
            ("contract", ctx.contract_row(ctx.contract())),
            ("attestation", summary.Markdown(f"{summary.code(statement_path)} (in-toto Statement v1, "
                                             f"{len(statement['subject'])} subjects)")),
            ("cost", show(COST, receipt.cost())),
            *((name, value) for name, value in facts.items() if not isinstance(value, dict | list))]
    details: str = summary.table(("", ""), rows)
    statistics = receipt.document.get("statistics")
    if isinstance(statistics, dict):
        details += stats.render(statistics)
    comparison = receipt.document.get("comparison")
    if isinstance(comparison, dict):
        details += previous.render(comparison)
        details += previous.render_trend(previous.trend_of(receipt.document))
    body: str = campaign_summary.render(receipt.document, _links(receipt, publication), details=details)
    posted = _post(ctx, receipt, campaign_summary.render(receipt.document, _links(receipt, publication)))
    if posted:
        body += "\n" + summary.table(("posted", "where"), posted)
    return PhaseResult(headline=headline, outputs={"verified-count": verified, "all-passed": all_passed,
                                                   "attestation-path": str(statement_path),
                                                   "attestation-predicate-path": str(predicate_path), **cost,
                                                   **receipt.comparison_outputs(), **receipt.statistics_outputs()},
                       summary=body, exit_code=EXIT_OK if all_passed else EXIT_CASES_FAILED)


def _admitted(ctx: PhaseContext, receipt_path: Path) -> AdmittedReceipt:
    """As upload admits it: the receipt and its selection, bound across jobs by their travelled digests."""
    contract = ctx.contract()
    admission = admit_receipt(receipt_path, ctx.settings.string("receipt-sha256"),
                              ctx.settings.path("selection-path") or Path("testops-evidence-selection.json"),
                              ctx.settings.string("selection-sha256"),
                              in_actions=ctx.env.get("GITHUB_ACTIONS") == "true", contract=contract,
                              backend=ctx.backend(),
                              live=job_context(ctx.env, contract.trust.repository, contract.trust.workflows,
                                               local=ctx.settings.boolean("local")))
    trust.readmit_recorded(admission.selection.context, contract, ctx.mode, log=ctx.runtime.log)
    return admission


def _publication(ctx: PhaseContext, receipt: Receipt) -> dict[str, Any]:
    if not ctx.state.has(PUBLICATION):
        raise Refusal("verify.missing", "nothing was published from this state directory: there is no upload "
                      "receipt (upload.json)", field="upload.json", expected="the receipt upload writes",
                      actual="absent", hint="Run `mode: upload` first, with the same state-dir.")
    publication = ctx.state.read_receipt(PUBLICATION)
    if not isinstance(publication, dict) or publication.get("receipt-sha256") != receipt.sha256:
        raise Refusal("verify.mismatch", "the publication in this state directory is of another export",
                      field="receipt-sha256", expected=receipt.sha256,
                      actual=publication.get("receipt-sha256") if isinstance(publication, dict) else None)
    return publication


def _links(receipt: Receipt, publication: dict[str, Any]) -> campaign_summary.Links:
    """The report (the TestOps launch or the files publication's HTML report) and the run's page; a local run
    has no page on GitHub, so it links none."""
    context = receipt.document["context"]
    report = publication.get("report")
    index = report.get("index") if isinstance(report, dict) and report.get("built") else None
    url = publication.get("launch-url")
    shown = url if isinstance(url, str) and url.startswith(("http://", "https://")) else index
    run_url = context.get("run-url")
    return campaign_summary.Links(report=shown if isinstance(shown, str) else None,
                          run=None if context.get("local") or not isinstance(run_url, str) else run_url)


def _post(ctx: PhaseContext, receipt: Receipt, text: str) -> list[tuple[str, summary.Markdown]]:
    """With ``check-run``: the summary as a completed check run on the tested commit, one annotation per case
    that did not pass. With ``pr-comment``, in a pull request's run: the campaign's one comment on it, updated.
    A local run has no GitHub to post to: a notice says so."""
    wanted = [name for name in ("check-run", "pr-comment") if ctx.settings.boolean(name)]
    if not wanted:
        return []
    context = receipt.document["context"]
    if context.get("local"):
        ctx.runtime.annotate("notice", f"{' and '.join(wanted)}: a local run has no GitHub page to post to")
        return []
    token = ctx.github_token()
    if not token:
        raise input_error("github-token", f"{wanted[0]} needs a GitHub token (input github-token, default "
                          "${{ github.token }})", expected="a token", actual=None)
    api_url = (ctx.env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    policy = request_policy(ctx.env, ctx.sleep)
    repository = str(context["repository"])
    verdict = campaign_summary.verdict_of(receipt.document)
    posted: list[tuple[str, summary.Markdown]] = []
    if "check-run" in wanted:
        contract_path = str(ctx.settings.path("contract") or ".github/testops-evidence.yml")
        with ctx.runtime.group(f"check run on {context['head-sha']}"):
            check = github_checks.create_check_run(
                api_url, token, repository, str(context["head-sha"]), title=verdict.sentence(), summary=text,
                conclusion=verdict.conclusion, annotations=campaign_summary.case_annotations(receipt.document, contract_path),
                details_url=str(context.get("run-url") or ""), policy=policy)
        posted.append(("check run", summary.link(f"#{check.id}", check.url)))
    if "pr-comment" in wanted:
        number = github_checks.pull_request_number(read_event(ctx.env))
        if number is None:
            ctx.runtime.annotate("notice", "pr-comment: this run is not for a pull request; no comment was written")
        else:
            tag = github_checks.marker(str(receipt.document["campaign"]))
            with ctx.runtime.group(f"comment on pull request #{number}"):
                comment = github_checks.upsert_pr_comment(api_url, token, repository, number, body=text, tag=tag,
                                                          policy=policy)
            posted.append(("pull-request comment", summary.Markdown(
                summary.link(f"#{number}", comment.url) + (" (updated)" if comment.updated else " (new)"))))
    return posted
