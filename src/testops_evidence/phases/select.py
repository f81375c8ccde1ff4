"""``select``: decide which contract cases this run evaluates, prove why, and fan them out.

The backend chooses the cases (``backends/``): the TestOps backend from a TestOps job run's plan (or, in a
manual run, the contract's standing-plan policy), bound to this run, workflow, project, plan and contract;
the files backend from the whole contract or a standing ``testplan.json``.

``cases`` may narrow any of these explicitly (splitting a campaign into several selections of the same
plan); nothing is ever narrowed silently, and the step summary says what was selected and why.

Writes, in this order and only after every check passed (so a refusal leaves nothing behind): the
selection (write-once, 0600), the filtered catalog copy (with ``catalog``), and the ``select.json``
receipt in the state directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.backends import Outcome, SelectInputs
from testops_evidence.campaign import catalog as catalog_filter
from testops_evidence.campaign import previous
from testops_evidence.campaign.compiled import compiled_bytes, compiled_path, write_compiled
from testops_evidence.campaign.matrix import (
    HOSTED_JOB_LIMIT_MINUTES,
    LANES,
    SELECT_OUTPUT_BUDGET,
    MatrixPlan,
    OutputSize,
    check_output_budget,
    plan_matrices,
)
from testops_evidence.campaign.receipt import RECEIPT_LIMIT
from testops_evidence.campaign.selection import (
    build_selection,
    check_sha256,
    read_document_bytes,
    selection_bytes,
    write_selection,
)
from testops_evidence.campaign.workers import EXPORT_JOB, PUBLISH_JOB
from testops_evidence.context import RunContext, admit_backend
from testops_evidence.contract import Case, Contract
from testops_evidence.errors import Refusal
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import hand_over, sha256_bytes, write_once
from testops_evidence.settings import parse_int
from testops_evidence.testops.links import page_url

DEFAULT_SELECTION_PATH = "testops-evidence-selection.json"
SUMMARY_ROWS = 500  # per table; the selection file and the receipt list every case


# --- entry point ---------------------------------------------------------------------------------------


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    backend = ctx.backend()
    requested = _requested_cases(ctx, contract)
    live = live_context(ctx)
    explicit, from_env = job_run_ids(ctx)
    inputs = SelectInputs(contract, live, explicit, from_env, ctx.settings.path("job-run-env"),
                          ctx.settings.path("standing-plan"), narrowed=requested is not None,
                          workflow_name=(ctx.env.get("GITHUB_WORKFLOW") or "").strip() or None,
                          job_uid=(ctx.env.get("ALLURE_JOB_UID") or "").strip() or None)
    rerun = _rerun(ctx, contract, live)
    if rerun is not None and requested is not None:
        raise Refusal("input.rerun-from", "rerun-from and cases both narrow the selection: give one of them",
                      field="rerun-from", expected="rerun-from or cases", actual="both")
    with ctx.runtime.group(f"Select the cases ({backend} backend)"):
        outcome = ctx.open_backend().select(inputs)
    if requested is not None:
        outcome = _narrow(outcome, requested)
    if rerun is not None:
        outcome = _narrow(outcome, [contract.case(key) for key in rerun.keys], source="rerun",
                          label=f"`rerun-from` (the cases run {rerun.block['run-id']} did not pass)")
    baseline, baseline_bytes = _baseline(ctx, contract, live)

    with ctx.runtime.group(f"Build the selection and matrices for {len(outcome.cases)} cases"):
        document = build_selection(contract, live, outcome.cases, backend=backend, source=outcome.source,
                                   testops=outcome.testops, rerun_of=rerun.block if rerun is not None else None,
                                   baseline=baseline, compared=ctx.settings.string("compare-with") is not None)
        data = selection_bytes(document)
        digest = sha256_bytes(data)
        plan = plan_matrices(outcome.cases, contract.lanes, budget=contract.budget)
        path = ctx.settings.path("selection-path") or Path(DEFAULT_SELECTION_PATH)
        outputs: dict[str, Any] = {
            "selection-path": str(path),
            "selection-sha256": digest,
            "selected-count": len(outcome.cases),
            "full-plan": bool(document["full-plan"]),
            "job-run-id": outcome.testops.job_run_id if outcome.testops else "",
            "launch-id": outcome.testops.launch_id if outcome.testops else "",
            **plan.outputs(),
        }
        sizes = check_output_budget(outputs, len(outcome.cases))
        catalog_source = ctx.settings.path("catalog")
        catalog_target = catalog_filter.catalog_output_path(path) if catalog_source is not None else None
        catalog_bytes = None
        if catalog_source is not None and catalog_target is not None:
            catalog_bytes = catalog_filter.filtered_catalog_bytes(catalog_source, catalog_target,
                                                                  [case.key for case in outcome.cases])
        ctx.runtime.log(f"selection: {len(data):,} bytes, sha256 {digest}")

    baseline_target = path.parent / str(baseline["receipt-file"]) if baseline_bytes is not None and baseline else None
    # The document parsed from a YAML contract, bound by the selection's contract-compiled-sha256: later
    # phases build the contract from it instead of parsing the YAML again (campaign/compiled.py).
    compiled = compiled_bytes(contract)
    compiled_target = compiled_path(path) if compiled is not None else None
    for target in (path, compiled_target, catalog_target, baseline_target):
        # write_once refuses an existing file anyway; checking both first means a second select never
        # leaves a new selection behind without its catalog copy and receipt.
        if target is not None and os.path.lexists(target):
            raise Refusal("io.exists", f"{target} already exists; select writes its files once", field="path",
                          expected="no existing file", actual=str(target))
    write_selection(path, data)
    if compiled_target is not None and compiled is not None:
        write_compiled(compiled_target, compiled)
    if catalog_target is not None and catalog_bytes is not None:
        catalog_filter.write_filtered_catalog(catalog_target, catalog_bytes)
    if baseline_target is not None and baseline_bytes is not None:
        write_once(baseline_target, baseline_bytes, mode=0o644)
    hand_over([p for p in (path, compiled_target, catalog_target, baseline_target) if p is not None], ctx.env)
    receipt = _receipt(contract, backend, outcome, path, digest, plan, catalog_target, catalog_bytes)
    ctx.state.write_receipt("select.json", receipt)
    headline = _headline(contract, outcome, plan)
    body = _previous_section(rerun, baseline, ctx.settings.string("compare-with")) + _summary(
        contract, outcome, plan, sizes, path, digest, catalog_target,
        (ctx.contract_row(contract), summary.code(compiled_target) if compiled_target is not None else "—"))
    body += _act_parallel_note(plan, ctx.env)
    return PhaseResult(headline=headline, outputs=outputs, summary=body, brief=True)


def _act_parallel_note(plan: MatrixPlan, env: Mapping[str, str]) -> str:
    """Under act (it sets ACT=true in every step), the template's ``max-parallel`` is an expression act does not
    evaluate (nektos/act#2619): act 0.2.89 logs "Failed to parse 'max-parallel' option" and runs the lane's jobs one
    at a time, whatever the contract says. Say so here rather than let it pass silently."""
    if env.get("ACT") != "true":
        return ""
    over = [(name, plan.lane(name)) for name in LANES if plan.lane(name).jobs > 1 and plan.lane(name).max_parallel > 1]
    if not over:
        return ""
    lanes = ", ".join(f"{name}: {lane.jobs} jobs, `max-parallel` {lane.max_parallel}" for name, lane in over)
    return (f"\n> [!NOTE]\n> Under act the contract's `max-parallel` does not apply ({lanes}): act cannot evaluate "
            "the template's `max-parallel` expression (its log says \"Failed to parse 'max-parallel' option\") and "
            "runs each lane's jobs one at a time. The evidence is the same; on GitHub the jobs run side by side "
            "(docs/local.md).\n")


# --- the run context ----------------------------------------------------------------------------------


def live_context(ctx: PhaseContext) -> RunContext:
    """The context this select step runs in: inside Actions the event file and the REST run object,
    cross-checked and admitted again against the trust policy (:meth:`PhaseContext.readmit`); outside, the
    local rehearsal context, which :func:`context.admit_backend` keeps away from TestOps
    (``guard.local_context``)."""
    context = ctx.readmit()
    admit_backend(context, ctx.backend())
    return context


# --- inputs -------------------------------------------------------------------------------------------


def _requested_cases(ctx: PhaseContext, contract: Contract) -> list[Case] | None:
    """The ``cases`` input: comma- or whitespace-separated keys, returned in contract order."""
    raw = ctx.settings.string("cases")
    if raw is None:
        return None
    keys = [part for chunk in raw.split(",") for part in chunk.split()]
    if not keys:
        raise Refusal("input.cases", "input cases lists no case key", field="cases",
                      expected="comma-separated case keys", actual=raw)
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise Refusal("selection.duplicate_case", f"input cases lists {key!r} twice", field="cases",
                          expected="each key once", actual=key)
        seen.add(key)
        contract.case(key)  # contract.unknown_case
    return [case for case in contract.cases if case.key in seen]


def _id_value(name: str, raw: str | None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    return parse_int(name, raw, minimum=1)


def job_run_ids(ctx: PhaseContext) -> tuple[int | None, int | None]:
    """(the ``job-run-id`` input, ``ALLURE_JOB_RUN_ID``): read separately so they can be compared."""
    explicit = None
    if ctx.settings.sources.get("job-run-id") in ("option", "input"):
        explicit = _id_value("job-run-id", ctx.settings.string("job-run-id"))
    from_env = _id_value("job-run-id", ctx.env.get("ALLURE_JOB_RUN_ID"))
    if explicit is not None and from_env is not None and explicit != from_env:
        raise Refusal("selection.mode", "the job-run-id input and ALLURE_JOB_RUN_ID name different job runs",
                      field="job-run-id", expected=f"ALLURE_JOB_RUN_ID ({from_env})", actual=explicit)
    return explicit, from_env


def _narrow(outcome: Outcome, requested: Sequence[Case], *, source: str = "cases",
            label: str = "`cases`") -> Outcome:
    chosen = {case.key for case in requested}
    available = {case.key for case in outcome.cases}
    for case in requested:
        if case.key not in available:
            raise Refusal("selection.not_planned", f"case {case.key!r} was requested with {label} but "
                          f"{outcome.origin} does not select it", field=source if source != "rerun" else "rerun-from",
                          expected=f"a case selected by {outcome.origin}", actual=case.key)
    cases = [case for case in outcome.cases if case.key in chosen]
    origin = f"{label} (narrowing {outcome.origin})"
    why = (f"{outcome.why}; then {label} explicitly narrows these {len(outcome.cases)} to {len(cases)}"
           + (" (a campaign split into several selections)" if source == "cases" else ""))
    return Outcome(cases, source, origin, why, outcome.testops, outcome.bindings, outcome.planned)


# --- the previous campaign: re-run and baseline --------------------------------------------------------


def _artifact_prefix(ctx: PhaseContext) -> str:
    return ctx.settings.string("artifact-prefix") or "testops-evidence"


def _rerun(ctx: PhaseContext, contract: Contract, live: RunContext) -> previous.Rerun | None:
    """``rerun-from``: the receipt (digest-checked) whose cases that did not pass this run selects."""
    raw = ctx.settings.string("rerun-from")
    if raw is None:
        return None
    expected = check_sha256(ctx.settings.string("rerun-from-sha256"), "rerun-from-sha256")
    if raw.startswith("run:"):
        run_id = parse_int("rerun-from", raw[4:], minimum=1)
        from testops_evidence import github_run

        prefix = _artifact_prefix(ctx)
        data, source = previous.receipt_in_run(
            live.api_url, github_run.require_token(ctx.github_token()), live.repository, run_id,
            (f"{prefix}-results-*", f"{prefix}-report-*"), expected, github_run.request_policy(ctx.env, ctx.sleep))
        where = f"the receipt in {source['artifact']} of run {run_id}"
    else:
        path = Path(raw)
        if path.is_dir():
            matching = [(name, data) for name, data in previous.receipts_in_dir(path)
                        if sha256_bytes(data) == expected]
            if not matching:
                raise Refusal("selection.rerun_digest", f"{path} holds no export receipt with the given SHA-256",
                              field="rerun-from-sha256", expected=expected, actual=str(path))
            name, data = matching[0]
            path = path / name
        else:
            data = read_document_bytes(path, RECEIPT_LIMIT)
        source = {"source": "file", "path": str(path)}
        where = f"the receipt {path}"
    receipt = previous.checked_receipt(data, where, expected, "selection.rerun_digest")
    return previous.rerun(receipt, source, campaign=contract.campaign, profile=contract.profile,
                          repository=live.repository, run_id=live.run_id, contract_has=contract.has_case)


def _baseline(ctx: PhaseContext, contract: Contract,
              live: RunContext) -> tuple[dict[str, Any] | None, bytes | None]:
    """``compare-with``: the previous campaign's receipt and its binding (None: no baseline was found).

    A baseline is informational: an earlier publication that cannot be read, or one of another contract or
    profile, is recorded as not comparable (with why), never compared and never a reason to stop the
    campaign; a receipt file the operator names must be readable."""
    raw = ctx.settings.string("compare-with")
    if raw is None:
        return None, None
    try:
        if raw == "previous":
            from testops_evidence import github_run

            token = ctx.github_token()
            if not token:
                ctx.runtime.annotate("warning", "compare-with: previous needs a github-token: no baseline",
                                     title="selection.baseline")
                return None, None
            found = previous.newest_publication(
                live.api_url, token, live.repository, Path(live.workflow_path).name, branch=live.branch,
                before=live.run_id, patterns=(
                    (f"{_artifact_prefix(ctx)}-report-{contract.campaign}-*", PUBLISH_JOB, "publication"),
                    (f"{_artifact_prefix(ctx)}-results-*", EXPORT_JOB, "results")),
                policy=github_run.request_policy(ctx.env, ctx.sleep))
            if found is None:
                return None, None
            data, source = found
        else:
            data, source = read_document_bytes(Path(raw), RECEIPT_LIMIT), {"source": "file", "path": raw}
        receipt = previous.checked_receipt(data, f"the baseline receipt ({source.get('artifact') or raw})", None,
                                           "selection.baseline")
    except Refusal as refusal:
        if raw != "previous" or refusal.code.startswith("input."):
            raise  # a file the operator named must be a valid receipt
        ctx.runtime.annotate("warning", f"the baseline cannot be read ({refusal.code}: {refusal.message}): the "
                             "summaries compare with nothing", title="selection.baseline")
        return {"comparable": False, "why-not": f"{refusal.code}: {refusal.message}", "source": raw}, None
    block = previous.source_block(source, receipt)
    why_not = previous.binding_of(block, contract_sha256=contract.digest, profile=contract.profile)
    block.update({"comparable": why_not is None, "why-not": why_not,
                  "receipt-file": f"{Path(ctx.settings.path('selection-path') or DEFAULT_SELECTION_PATH).stem}"
                                  "-baseline-receipt.json"})
    return block, data if why_not is None else None


def _previous_section(rerun: previous.Rerun | None, baseline: dict[str, Any] | None, compare: str | None) -> str:
    lines = []
    if rerun is not None:
        block = rerun.block
        run_link = summary.link(f"run {block['run-id']}", str(block["run-url"]))
        lines.append(f"**Re-run** of {run_link} (receipt "
                     f"{summary.code(block['receipt-sha256'])}): selects the {len(rerun.keys)} of its "
                     f"{block['of']} cases that did not pass there, as a new campaign of this run.")
        if rerun.dropped:
            lines.append(f"Not re-run, no longer in the contract: "
                         f"{summary.join((summary.code(k) for k in rerun.dropped[:50]), ', ')}.")
    if compare is not None:
        if baseline is None:
            lines.append("**Baseline:** none — no earlier run of this workflow on this branch has a publication "
                         "artifact; the summaries of export and verify compare with nothing.")
        elif "run-id" not in baseline:
            lines.append(f"**Baseline:** not comparable — {summary.text(str(baseline.get('why-not')))}.")
        else:
            state = ("comparable" if baseline["comparable"]
                     else f"**not comparable**: {summary.text(baseline['why-not'])}")
            run_link = summary.link(f"run {baseline['run-id']}", str(baseline["run-url"]))
            lines.append(f"**Baseline:** {run_link}, commit "
                         f"{summary.code(str(baseline['head-sha'])[:12])}, profile "
                         f"{summary.code(baseline['profile'].get('id'))}, contract "
                         f"{summary.code(str(baseline['contract-sha256'])[:12])} — {state}.")
    return "".join(f"{line}\n\n" for line in lines)


# --- receipt and summary ------------------------------------------------------------------------------


def _receipt(contract: Contract, backend: str, outcome: Outcome, path: Path, digest: str, plan: MatrixPlan,
             catalog_target: Path | None, catalog_bytes: bytes | None) -> dict[str, Any]:
    return {
        "schema": "testops-evidence/select-receipt/v1",
        "campaign": contract.campaign,
        "contract-sha256": contract.digest,
        "backend": backend,
        "source": outcome.source,
        "why": outcome.why,
        "selection-path": str(path),
        "selection-sha256": digest,
        "selected-count": len(outcome.cases),
        "planned-rows": outcome.planned,
        "keys": [case.key for case in outcome.cases],
        "testops": outcome.testops.to_json() if outcome.testops else None,
        "lanes": {
            name: {"cases": plan.lane(name).case_count, "trials": plan.lane(name).units, "jobs": plan.lane(name).jobs,
                   "sharded": plan.lane(name).sharded, "max-parallel": plan.lane(name).max_parallel}
            for name in LANES
        },
        "catalog": None if catalog_target is None or catalog_bytes is None else {
            "path": str(catalog_target), "sha256": sha256_bytes(catalog_bytes)},
    }


def _headline(contract: Contract, outcome: Outcome, plan: MatrixPlan) -> str:
    n = len(outcome.cases)
    total = len(contract.cases)
    scope = "the full plan" if n == total else f"**not** the full plan: {total - n} contract case(s) left out"
    lanes = ", ".join(f"{plan.lane(name).case_count} {name}" for name in LANES)
    units = sum(plan.lane(name).units for name in LANES)
    trials = f"; {units} trials in all" if units > n else ""
    return f"✅ Selected **{n}** of {total} contract cases ({scope}) from {outcome.origin}: {lanes}{trials}."


def _summary(contract: Contract, outcome: Outcome, plan: MatrixPlan, sizes: Sequence[OutputSize], path: Path,
             digest: str, catalog_target: Path | None, contract_rows: tuple[Any, Any]) -> str:
    parts: list[str] = [f"**Why these cases:** {outcome.why}.\n"]
    if outcome.testops is not None:
        t = outcome.testops
        parts.append("\n### TestOps bindings\n\n")
        links = [("job run", summary.link(f"#{t.job_run_id}", page_url(t.endpoint, "jobrun", t.job_run_id))),
                 ("launch", summary.link(f"#{t.launch_id}", page_url(t.endpoint, "launch", t.launch_id)))]
        parts.append(" · ".join(f"{name} {text}" for name, text in links) + "\n\n")
        parts.append(summary.table(("object", "checked", "value"), outcome.bindings))
    parts.append("\n### Lanes\n\n")
    repeated = any(case.trials.repeated for case in outcome.cases)
    parts.append(summary.table(
        ("lane", "cases", *(("trials",) if repeated else ()), "jobs", "form", "max-parallel"),
        [(name, plan.lane(name).case_count, *((plan.lane(name).units,) if repeated else ()), plan.lane(name).jobs,
          plan.lane(name).form(), plan.lane(name).max_parallel)
         for name in LANES]))
    for name in LANES:
        lane = plan.lane(name)
        if lane.case_count == 0:
            continue
        parts.append(f"\n### {name.capitalize()} lane: {lane.case_count} case(s) in {lane.jobs} job(s)\n\n")
        members = [case for case in outcome.cases if case.lane == name]
        parts.append(summary.table(("key", "TestOps id", "title", "timeout", *(("trials",) if repeated else ()),
                                    "credentials"),
                                   [(summary.code(c.key), c.testops_id, c.title, f"{c.timeout_minutes} min",
                                     *((f"{c.trials.count}, verdict {c.trials.policy()}" if c.trials.repeated
                                        else "1",) if repeated else ()),
                                     summary.join((summary.code(n) for n in c.credentials), ", ") or "—")
                                    for c in members], limit=SUMMARY_ROWS))
        long_shards = lane.over_hosted_limit()
        if long_shards:
            parts.append(f"\n> [!WARNING]\n> {len(long_shards)} shard(s) of this lane add up to more than "
                         f"{HOSTED_JOB_LIMIT_MINUTES} minutes, the longest a GitHub-hosted job may run; split the "
                         "campaign with `cases:` or run these shards on self-hosted runners.\n")
    chosen = {c.key for c in outcome.cases}
    left_out = [case.key for case in contract.cases if case.key not in chosen]
    if left_out:
        shown = ", ".join(summary.code(key) for key in left_out[:50])
        more = f" and {len(left_out) - 50} more" if len(left_out) > 50 else ""
        parts.append(f"\n**Not selected ({len(left_out)}):** {shown}{more}.\n")
    total = sum(size.budgeted for size in sizes)
    parts.append("\n### Files and outputs\n\n")
    rows: list[Sequence[Any]] = [("selection", summary.code(path), summary.code(digest)),
                                 # how select read the contract; the compiled copy later phases read instead
                                 ("contract", *contract_rows)]
    if catalog_target is not None:
        rows.append(("filtered catalog", summary.code(catalog_target), "keeps only the selected cases"))
    rows.append(("outputs", f"{total:,} of {SELECT_OUTPUT_BUDGET:,} bytes",
                 "largest: " + ", ".join(f"{s.name} {s.budgeted:,}" for s in
                                         sorted(sizes, key=lambda s: -s.budgeted)[:3])))
    parts.append(summary.table(("what", "where / size", "detail"), rows))
    return "".join(parts)
