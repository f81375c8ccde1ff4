"""``reconcile``: resolve mutations whose once-marker has no completion record, by observing TestOps.

For each pending marker: observe (testops/observe.py). *Done* -> write the completion record
(``reconciled``). *Absent* (proved not to have happened) -> with ``resume: true`` and a replayable request,
once-mark a re-send (stage ``<stage>.resend``), send it exactly once, and record both (``reconciled``);
otherwise it stays ``still-uncertain``. *Unknown* -> ``still-uncertain``. Nothing is ever re-sent on a
guess, and a re-send that itself became uncertain is never re-sent again by reconcile.

Exit 0 when nothing is left uncertain; otherwise exit 4 with ``error-code: reconcile.unresolved`` (and
``failure.json``), after the outputs and summary are written.
"""

from __future__ import annotations

from typing import Any

from testops_evidence import summary
from testops_evidence.errors import REGISTRY, Refusal
from testops_evidence.runner import PhaseContext, PhaseResult, record_refusal
from testops_evidence.testops.client import TestOpsClient
from testops_evidence.testops.observe import ABSENT, DONE, Observation, observe, replay, replayable

RESEND_SUFFIX = ".resend"
UNRESOLVED = "reconcile.unresolved"


def run(ctx: PhaseContext) -> PhaseResult:
    resume = ctx.settings.boolean("resume")
    pending = ctx.state.pending_markers()
    if not pending:
        return PhaseResult(headline="✅ Nothing to reconcile: every once-marked mutation has its completion record.",
                           outputs={"reconciled": [], "still-uncertain": []})
    reconciled: list[str] = []
    uncertain: list[str] = []
    rows: list[tuple[Any, ...]] = []
    with ctx.testops_client() as client, ctx.runtime.group(f"reconcile: {len(pending)} pending mutations"):
        ctx.readmit()  # inputs and token checked, nothing sent yet: the run must be one the policy admits
        for stage in pending:
            marker = ctx.state.read_receipt(f"once-{stage}.json")
            kind = marker.get("kind") if isinstance(marker, dict) else None
            observation = _observe(client, marker if isinstance(marker, dict) else {})
            outcome, action = _resolve(ctx, client, stage, marker, observation, resume, pending)
            (reconciled if outcome else uncertain).append(stage)
            rows.append((stage, kind, observation.state, observation.reason, action))
            ctx.runtime.log(f"{stage}: {observation.state} — {action}")
    table = summary.table(("stage", "kind", "observed", "evidence", "outcome"), rows)
    outputs: dict[str, Any] = {"reconciled": reconciled, "still-uncertain": uncertain}
    if not uncertain:
        return PhaseResult(headline=f"✅ Reconciled {len(reconciled)} uncertain mutation(s) by observing TestOps.",
                           outputs=outputs, summary=table)
    hint = REGISTRY[UNRESOLVED].hint or ("Observe again later (TestOps may still be processing); with `resume: "
                                         "true` a mutation proved absent is re-sent once.")
    refusal = Refusal(UNRESOLVED, f"{len(uncertain)} of {len(pending)} mutations are still uncertain: "
                      + ", ".join(uncertain), field="still-uncertain", expected="[]", actual=uncertain, hint=hint)
    # The outputs matter here (which stages are resolved), so the refusal is reported beside them rather
    # than raised (a raised refusal would set error-code only).
    outputs["error-code"] = UNRESOLVED
    ctx.runtime.annotate("error", str(refusal), title=UNRESOLVED)
    # failure.json and the `--json` refusal, scrubbed, as for every raised refusal (runner.record_refusal).
    record_refusal(ctx.mode, refusal, ctx.runtime, ctx.state)
    # The refusal section the runner shows for a raised refusal (code, field, expected/actual, next step), so
    # an operator reading this summary sees the error code like every other refusal's.
    return PhaseResult(headline=f"⚠️ {len(uncertain)} of {len(pending)} mutations are still uncertain; "
                       f"{len(reconciled)} reconciled.", outputs=outputs,
                       summary=table + "\n" + summary.refusal_section(refusal, ctx.mode), exit_code=refusal.exit_code)


def _observe(client: TestOpsClient, marker: dict[str, Any]) -> Observation:
    try:
        return observe(client, marker)
    except Refusal as refusal:
        if refusal.code in ("testops.auth", "testops.not_configured"):
            raise  # every other marker would fail the same way: say so once, clearly
        return Observation("unknown", f"TestOps could not be observed ({refusal.code}: {refusal.message})")


def _resolve(ctx: PhaseContext, client: TestOpsClient, stage: str, marker: Any, observation: Observation,
             resume: bool, pending: list[str]) -> tuple[bool, str]:
    """Returns (resolved, what was done)."""
    if observation.state == DONE:
        ctx.state.done(stage, {"outcome": "observed", "evidence": observation.reason, **observation.facts})
        return True, "done: completion recorded, nothing re-sent"
    if observation.state != ABSENT:
        return False, "still uncertain: nothing re-sent"
    if not resume:
        return False, "proved absent: run reconcile with `resume: true` to re-send it once"
    if stage.endswith(RESEND_SUFFIX) or f"{stage}{RESEND_SUFFIX}" in pending or ctx.state.has(
            f"once-{stage}{RESEND_SUFFIX}.json"):
        return False, "proved absent, but an earlier re-send exists: not re-sent again (check TestOps by hand)"
    if not isinstance(marker, dict) or not replayable(marker):
        return False, "proved absent, but the marker holds no replayable request: re-run its phase"
    resend = f"{stage}{RESEND_SUFFIX}"
    ctx.state.once(resend, {**{k: v for k, v in marker.items() if k not in ("stage", "status")},
                            "resend-of": stage})
    try:
        answer = replay(client, marker)
    except Refusal as refusal:
        return False, f"re-send failed ({refusal.code}); its marker {resend} is pending"
    facts: dict[str, Any] = {"outcome": "re-sent", "evidence": observation.reason}
    if isinstance(answer, dict) and isinstance(answer.get("id"), int):
        facts["id"] = answer["id"]
        if marker.get("kind") == "launch":
            facts["launch-id"] = answer["id"]
            facts["launch-url"] = client.web_url("launch", answer["id"])
    ctx.state.done(resend, facts)
    ctx.state.done(stage, facts)
    return True, "proved absent, re-sent once" + (f" (id {facts['id']})" if "id" in facts else "")
