"""``check``: validate a contract and summarise it (cases per lane, checks, credentials, policies)."""

from __future__ import annotations

from collections import Counter

from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.summary import code, join, table, text


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    lanes = Counter(case.lane for case in contract.cases)
    backend = ctx.backend()
    lines = [
        table(("field", "value"), [
            ("campaign", contract.campaign),
            ("contract", contract.source_path),
            ("contract digest", contract.digest),
            ("backend", backend),
            ("repository", contract.trust.repository),
            ("events", ", ".join(contract.trust.events)),
            ("branches", ", ".join(contract.trust.branches)),
            ("workflows", ", ".join(contract.trust.workflows)),
            ("run attempts", contract.trust.run_attempts),
            ("actors", "anyone who can start the run" if contract.trust.actors is None
             else ", ".join(str(a) for a in contract.trust.actors)),
            ("profile", ", ".join(f"{k}={v}" for k, v in contract.profile.items())),
            ("TestOps", "—" if contract.testops is None else
             f"{contract.testops.endpoint} project {contract.testops.project_id}, plan "
             f"{contract.testops.plan_name!r} ({contract.testops.plan_id or 'not yet created'})"),
            ("remote import", "—" if contract.remote is None else
             f"{', '.join(contract.remote.workflows)} @ {', '.join(contract.remote.refs)}"),
        ]),
        "\n### Lanes\n",
        table(("lane", "cases", "max-parallel"),
              [(lane, lanes.get(lane, 0), parallel) for lane, parallel in sorted(contract.lanes.items())]),
        "\n### Cases\n",
        table(("key", "TestOps id", "lane", "timeout", "checks", "credentials"),
              [(code(c.key), c.testops_id, c.lane, f"{c.timeout_minutes} min", len(c.checks),
                join((code(name) for name in c.credentials), ", ") or "—") for c in contract.cases]),
    ]
    headline = (f"✅ Contract **{text(contract.campaign)}** is valid: {len(contract.cases)} cases "
                f"({', '.join(f'{n} {lane}' for lane, n in sorted(lanes.items()))}), backend {code(backend)}.")
    return PhaseResult(headline=headline, summary="\n".join(lines), outputs={})
