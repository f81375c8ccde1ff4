"""``verify-selection`` (worker): prove the selection this job received is the one ``select`` wrote for this
run and this contract, before any case runs.

The runner has already refused a TestOps token variable in the environment (``worker.token_present``).
Here: the ``selection-sha256`` input must be 64 lowercase hex; the file's exact bytes must hash to it
(``selection.digest``); the document must match its schema, the contract (digest, campaign, profile,
every case row byte for byte) and the live run context (``selection.context``).

First the fast gate (:mod:`campaign.gate`) tries to accept by digests alone: the selection's bytes hash
to ``selection-sha256``, the contract file's bytes hash to the ``contract-file-sha256`` that select
recorded, and the recorded run context binds to this job's runner variables. It only ever accepts;
whenever it cannot, the full verification above runs and decides, with its refusals.

No network and no network library: the live context is the runner's environment (or the local rehearsal
context outside Actions). A test asserts that neither ``requests`` nor ``github`` is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.campaign.gate import verify_by_digests
from testops_evidence.campaign.selection import check_sha256, load_selection, validate_against, worker_context
from testops_evidence.runner import PhaseContext, PhaseResult

DEFAULT_SELECTION_PATH = "testops-evidence-selection.json"


def run(ctx: PhaseContext) -> PhaseResult:
    raw_path = ctx.settings.string("selection-path")
    gated = None
    # A local run (act with `local`) binds to git, not to the runner's variables the gate reads: full check.
    if (raw_path is None or _plain_path(raw_path)) and not ctx.settings.boolean("local"):
        gated = verify_by_digests(raw_path or DEFAULT_SELECTION_PATH, ctx.settings.string("selection-sha256"),
                                  ctx.settings.string("contract"), ctx.env)
    if gated is not None:
        document = gated.document
        return _result(raw_path or DEFAULT_SELECTION_PATH, gated.digest, document, gated.count, gated.lanes,
                       gated.live, document["campaign"])
    return _verify_fully(ctx)


def _verify_fully(ctx: PhaseContext) -> PhaseResult:
    """Parse the contract, validate the selection's schema and every row against the contract, and bind
    it to this run; every refusal of this phase comes from here."""
    expected = check_sha256(ctx.settings.string("selection-sha256"))
    path = ctx.settings.path("selection-path") or Path(DEFAULT_SELECTION_PATH)
    contract = ctx.contract()
    live = worker_context(ctx.env, contract, local=ctx.settings.boolean("local"))
    selection = load_selection(path, expected)
    validate_against(selection, contract, live)
    binding = {"repository": live.repository, "run-id": live.run_id, "run-attempt": live.run_attempt,
               "head-sha": live.head_sha, "run-url": live.run_url}
    lanes: dict[str, int] = {}
    for row in selection.cases:
        lanes[row["lane"]] = lanes.get(row["lane"], 0) + 1
    return _result(str(path), selection.digest, selection.document, selection.count, lanes, binding,
                   contract.campaign)


def _plain_path(text: str) -> bool:
    """True when ``str(Path(text)) == text`` (no empty or ``.`` components), so the summary names the
    selection exactly as the full verification (which goes through ``Path``) would."""
    return bool(text) and text != "/" and "\x00" not in text and str(Path(text)) == text


def _result(path: str, digest: str, document: Any, count: int, lanes: dict[str, int], live: dict[str, Any],
            campaign: str) -> PhaseResult:
    testops = document["testops"]
    rows = [
        ("selection", summary.code(path)),
        ("sha256", summary.code(digest)),
        ("source", str(document["source"])),
        ("backend", str(document["backend"])),
        ("run", summary.link(f"{live['repository']} #{live['run-id']} (attempt {live['run-attempt']})",
                             live["run-url"])),
        ("commit", summary.code(live['head-sha'])),
    ]
    if testops is not None:
        from testops_evidence.testops.links import page_url

        rows.append(("TestOps job run", summary.link(f"#{testops['job-run-id']}",
                                                     page_url(testops["endpoint"], "jobrun", testops["job-run-id"]))))
        rows.append(("TestOps launch", summary.link(f"#{testops['launch-id']}",
                                                    page_url(testops["endpoint"], "launch", testops["launch-id"]))))
    body: str = summary.table(("", ""), rows)
    body += "\n" + summary.table(("lane", "cases"), sorted(lanes.items()))
    headline = (f"✅ The selection is intact and bound to this run: {count} case(s) "
                f"({', '.join(f'{n} {lane}' for lane, n in sorted(lanes.items()))}), contract "
                f"**{summary.text(campaign)}**{', full plan' if document['full-plan'] else ''}.")
    return PhaseResult(headline=headline, outputs={"selected-count": count}, summary=body, brief=True)
