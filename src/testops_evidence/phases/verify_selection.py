"""``verify-selection`` (worker): prove the selection this job received is the one ``select`` wrote for this
run and this contract, before any case runs.

The runner has already refused a TestOps token variable in the environment (``worker.token_present``).
Here: the ``selection-sha256`` input must be 64 lowercase hex; the file's exact bytes must hash to it
(``selection.digest``); the document must match its schema, the contract (digest, campaign, profile,
every case row byte for byte) and the live run context (``selection.context``).

No network and no network library: the live context is the runner's environment (or the local rehearsal
context outside Actions). A test asserts that neither ``requests`` nor ``github`` is imported.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from testops_evidence import summary
from testops_evidence.evidence.selection import check_sha256, load_selection, validate_against, worker_context
from testops_evidence.runner import PhaseContext, PhaseResult

DEFAULT_SELECTION_PATH = "testops-evidence-selection.json"


def run(ctx: PhaseContext) -> PhaseResult:
    expected = check_sha256(ctx.settings.string("selection-sha256"))
    path = ctx.settings.path("selection-path") or Path(DEFAULT_SELECTION_PATH)
    contract = ctx.contract()
    live = worker_context(ctx.env, contract)
    selection = load_selection(path, expected)
    validate_against(selection, contract, live)

    lanes = Counter(row["lane"] for row in selection.cases)
    testops = selection.testops
    rows = [
        ("selection", f"`{path}`"),
        ("sha256", f"`{selection.digest}`"),
        ("source", selection.source),
        ("backend", selection.backend),
        ("run", summary.link(f"{live.repository} #{live.run_id} (attempt {live.run_attempt})", live.run_url)),
        ("commit", f"`{live.head_sha}`"),
    ]
    if testops is not None:
        rows.append(("TestOps job run", summary.link(f"#{testops['job-run-id']}",
                                                     f"{testops['endpoint']}/jobrun/{testops['job-run-id']}")))
        rows.append(("TestOps launch", summary.link(f"#{testops['launch-id']}",
                                                    f"{testops['endpoint']}/launch/{testops['launch-id']}")))
    body = summary.table(("", ""), rows)
    body += "\n" + summary.table(("lane", "cases"), sorted(lanes.items()))
    headline = (f"✅ The selection is intact and bound to this run: {selection.count} case(s) "
                f"({', '.join(f'{n} {lane}' for lane, n in sorted(lanes.items()))}), contract "
                f"**{contract.campaign}**{', full plan' if selection.full_plan else ''}.")
    return PhaseResult(headline=headline, outputs={"selected-count": selection.count}, summary=body)
