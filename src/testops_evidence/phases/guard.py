"""``guard``: admit this run against the contract's trust policy.

The run context is never taken from environment variables alone: the event file (safe IO) and the
REST run object (PyGithub, ``GITHUB_API_URL``) are read too, and the three must agree
(``guard.run_mismatch``). The REST-checked context is then admitted against ``contract.trust``:
repository, visibility, event, branch, workflow, run attempt, actors. Every comparison is one row of
the step summary; the first failed one is the refusal (exit 3).

``local: true`` derives a rehearsal context from git instead. It is marked local and can never reach
TestOps: with an explicit ``backend: testops`` the guard refuses (``guard.local_context``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testops_evidence import __version__, summary
from testops_evidence.campaign.compiled import GUARD_COMPILED, GUARD_RECEIPT, compiled_bytes
from testops_evidence.context import (
    BindingCheck,
    RunContext,
    admit_backend,
    env_context,
    is_local,
    read_event,
    rehearsal_context,
)
from testops_evidence.contract import Contract
from testops_evidence.errors import Refusal
from testops_evidence.github_run import RunObject, request_policy
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import pretty_json, read_safe_path, sha256_bytes, write_once
from testops_evidence.trust import dispatch_request, evaluate

RECEIPT = GUARD_RECEIPT
RECEIPT_SCHEMA = "testops-evidence/guard-receipt/v1"


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    if ctx.settings.boolean("local") and is_local(ctx.env, True):  # refused on GitHub's own runners
        return _rehearsal(ctx, contract)
    if ctx.env.get("GITHUB_ACTIONS") != "true":
        raise Refusal("guard.outside_actions", "guard admits GitHub Actions runs; outside Actions only a local "
                      "rehearsal is possible", field="GITHUB_ACTIONS", expected="true",
                      actual=ctx.env.get("GITHUB_ACTIONS") or "(unset)")
    event = read_event(ctx.env)
    env_ctx = env_context(ctx.env)
    with ctx.runtime.group(f"Reading run {env_ctx.run_id} of {env_ctx.repository} from {env_ctx.api_url}"):
        admission = evaluate(ctx.env, contract, token=ctx.github_token(), policy=request_policy(ctx.env, ctx.sleep),
                             event=event)
        run_object = admission.run
        ctx.runtime.log(f"run #{run_object.run_number}, attempt {run_object.run_attempt}: {run_object.event} on "
                        f"{run_object.head_branch} at {run_object.head_sha}, workflow {run_object.path}")
    context, checks = admission.context, list(admission.checks)
    failed = admission.failed
    if failed:
        headline = (f"⛔ Run {context.run_id} of {summary.code(context.repository)} was **not admitted**: "
                    f"{len(failed)} of {len(checks)} bindings failed.")
        ctx.runtime.summary(summary.render("phase", mode=summary.code(ctx.mode), headline=summary.Markdown(headline))
                            + _bindings(checks) + "\n")
        raise failed[0].refusal()

    operation, target_sha = dispatch_request(event, context.head_sha)
    backend = ctx.backend()
    outputs = _outputs(operation, target_sha, context)
    outputs["guard-sha256"] = _write_receipt(ctx, contract,
                                             _receipt(contract, backend, operation, target_sha, context, run_object,
                                                      checks))
    headline = (f"✅ Run {summary.link(f'#{context.run_number}', context.run_url)} (attempt {context.run_attempt}) "
                f"of {summary.code(context.repository)} is admitted: {summary.code(context.event)} on "
                f"{summary.code(context.workflow_ref)} at {summary.code(context.head_sha[:12])}; operation "
                f"**{summary.text(operation)}** on {summary.code(target_sha[:12])}.")
    body = _bindings(checks) + "\n### Run context\n\n" + _context_table(context) + _outputs_table(outputs)
    return PhaseResult(headline=headline, outputs=outputs, summary=body, brief=True)


# --- local rehearsal -------------------------------------------------------------------------------------------


def _rehearsal(ctx: PhaseContext, contract: Contract) -> PhaseResult:
    explicit = ctx.settings.string("backend")
    ctx.backend()  # an unknown backend name is refused here too (input.backend)
    context = rehearsal_context(ctx.env, contract.trust.repository, contract.trust.workflows)
    if explicit is not None:
        admit_backend(context, explicit)  # an explicit `backend: testops` with `local: true` is refused
    operation, target_sha = "evaluate", context.head_sha
    outputs = {"operation": operation, "target-sha": target_sha, "workflow-id": "", "run-url": "",
               "run-attempt": context.run_attempt}
    outputs["guard-sha256"] = _write_receipt(ctx, contract,
                                             _receipt(contract, "files", operation, target_sha, context, None, []))
    headline = (f"🧪 Local rehearsal context for {summary.code(context.repository)} at "
                f"{summary.code(context.head_sha[:12])}: evidence made from it can never be published to TestOps.")
    notes = ["> [!NOTE]\n> This is a rehearsal: no GitHub run exists, so the trust policy was not evaluated "
             "and `workflow-id` and `run-url` are empty.\n"]
    if contract.testops is not None:
        notes.append("> [!IMPORTANT]\n> The contract names a TestOps server, but local evidence only goes to "
                     "the **files** backend: every phase run with `local: true` uses it (an explicit "
                     "`backend: testops` is refused, `guard.local_context`).\n")
    if context.head_sha == "0" * 40:
        notes.append("> [!WARNING]\n> No git checkout was found in the workspace; the commit is a placeholder.\n")
    body = "\n".join(notes) + "\n### Run context\n\n" + _context_table(context) + _outputs_table(outputs)
    return PhaseResult(headline=headline, outputs=outputs, summary=body, brief=True)


# --- receipt, outputs, summary --------------------------------------------------------------------------------


def _outputs(operation: str, target_sha: str, context: RunContext) -> dict[str, Any]:
    return {
        "operation": operation,
        "target-sha": target_sha,
        "workflow-id": context.workflow_id,
        "run-url": context.run_url,
        "run-attempt": context.run_attempt,
    }


def _receipt(contract: Contract, backend: str, operation: str, target_sha: str, context: RunContext,
             run_object: RunObject | None, checks: Sequence[BindingCheck]) -> dict[str, Any]:
    # Deterministic content (no clock): guarding the same run twice writes the same receipt.
    compiled = compiled_bytes(contract)
    return {
        "schema": RECEIPT_SCHEMA,
        "campaign": contract.campaign,
        "contract-sha256": contract.digest,
        # The contract file's bytes and the compiled form written beside this receipt (a YAML contract only):
        # select, run next in this job with guard-sha256, builds the contract from it (campaign/compiled.py).
        "contract-file-sha256": contract.file_sha256,
        "contract-compiled-sha256": sha256_bytes(compiled) if compiled is not None else None,
        "contract-compiled-by": __version__ if compiled is not None else None,
        "backend": backend,
        "operation": operation,
        "target-sha": target_sha,
        "context": context.to_json(),
        "run": run_object.to_json() if run_object is not None else None,
        "checks": [{"check": c.check, "field": c.field, "expected": c.expected, "actual": c.actual, "ok": c.ok}
                   for c in checks],
    }


def _write_receipt(ctx: PhaseContext, contract: Contract, document: dict[str, Any]) -> str:
    """Write the compiled contract (a YAML contract) and the receipt, each once; the SHA-256 of the receipt's
    bytes. The same guard repeated (same run, same contract) finds its own files again, byte for byte, which is
    not a conflict; any other file under either name is refused before anything is written beside it, so the
    bytes that hash to ``guard-sha256`` are always bytes this guard would write (campaign/compiled.py)."""
    receipt = pretty_json(document)
    compiled = compiled_bytes(contract)
    wanted = [(RECEIPT, receipt)] + ([(GUARD_COMPILED, compiled)] if compiled is not None else [])
    ctx.state.ensure()
    held: set[str] = set()
    for name, data in wanted:
        path = ctx.state.receipt_path(name)
        if os.path.lexists(path):
            if not _holds(path, data):
                raise Refusal("io.exists", f"{name} in the state directory is not the one this guard writes (another run's, "
                              "contract's or version's)",
                              field="state-dir", expected="no earlier guard receipt for another context",
                              actual=str(path), hint="Use a fresh `state-dir` for each run of the pipeline.")
            held.add(name)
    for name, data in reversed(wanted):  # the receipt last: no receipt names a compiled form not yet written
        if name not in held:
            write_once(ctx.state.receipt_path(name), data)
    return sha256_bytes(receipt)


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at ``path`` (read safely: no link, a regular file) is exactly ``data``."""
    try:
        return read_safe_path(path, limit=len(data)) == data
    except Refusal as exc:
        if exc.code != "io.too_large":  # a link, a directory, a FIFO: refused as they are
            raise
        return False  # longer than this guard's bytes: another run's


def _bindings(checks: Sequence[BindingCheck]) -> str:
    return "### Bindings\n\n" + summary.table(("check", "expected", "actual", ""), [c.row() for c in checks])


def _context_table(context: RunContext) -> str:
    def actor(value: int | None) -> Any:
        return value if value is not None else "—"

    rows: list[tuple[str, Any]] = [
        ("repository", context.repository),
        ("visibility", "—" if context.repository_private is None else
         ("private" if context.repository_private else "public")),
        ("run", f"{context.run_id} (#{context.run_number}, attempt {context.run_attempt})"),
        ("workflow", f"{context.workflow_path} (id {context.workflow_id if context.workflow_id else '—'})"),
        ("workflow ref", context.workflow_ref),
        ("head SHA", context.head_sha),
        ("event", context.event),
        ("actor / triggering actor", f"{actor(context.actor_id)} / {actor(context.triggering_actor_id)}"),
        ("source", {"rest": "environment + event file + REST run, cross-checked",
                    "local": "git (local rehearsal)"}.get(context.source, context.source)),
    ]
    return summary.table(("field", "value"), rows)


def _outputs_table(outputs: Mapping[str, Any]) -> str:
    return "\n### Outputs\n\n" + summary.table(("output", "value"), [
        (summary.code(k), summary.code(v) if isinstance(v, str) and v else v) for k, v in outputs.items()])
