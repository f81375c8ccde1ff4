"""``check``: validate a contract and summarise it (cases per lane, checks, credentials, policies)."""

from __future__ import annotations

from collections import Counter

from testops_evidence.campaign import stats
from testops_evidence.contract import Contract
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
        _statistics_section(contract),
    ]
    headline = (f"✅ Contract **{text(contract.campaign)}** is valid: {len(contract.cases)} cases "
                f"({', '.join(f'{n} {lane}' for lane, n in sorted(lanes.items()))}), backend {code(backend)}.")
    return PhaseResult(headline=headline, summary="\n".join(lines), outputs={})


def _statistics_section(contract: Contract) -> str:
    """How the comparison judges change, and — for the contract's ``detect`` — the trials per case it takes."""
    policy = contract.statistics
    clusters = len({case.cluster for case in contract.cases if case.cluster is not None})
    deterministic = sum(1 for case in contract.cases if case.deterministic)
    correction = ("Benjamini–Hochberg (false discovery rate)" if policy.correction == "benjamini-hochberg"
                  else "Holm (family-wise error rate)")
    lines = ["\n### Statistics\n",
             f"Per-case flags: Fisher's exact test, {correction} at q = {policy.q:g}. "
             f"Deterministic cases (one flip is a regression): {deterministic} of {len(contract.cases)}. "
             f"Declared clusters: {clusters}."]
    if policy.detect is None:
        lines.append("\nNo `statistics.detect`: name the change in the campaign pass rate to detect (0.05: 5 points) "
                     "and this section says how many trials per case it takes.")
        return "\n".join(lines) + "\n"
    cases = len(contract.cases)
    needed = stats.trials_for(policy.detect, cases)
    counts = sorted({case.trials.count for case in contract.cases})
    now = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    line = (f"\n**Power:** to detect a change of {policy.detect * 100:g} points in the campaign pass rate with 80% "
            f"power (5% two-sided) in a paired comparison over these {cases} cases takes **{needed} trial(s) per "
            f"case** (the contract measures {now}); assumed: pass rates near 50%, the worst case — fewer trials "
            "do near 0% or 100%.")
    if needed > stats.MAX_TRIALS:
        more = stats.cases_for(policy.detect, stats.MAX_TRIALS)
        line += (f" That is more than the {stats.MAX_TRIALS} trials a case may have: at {stats.MAX_TRIALS} trials "
                 f"it takes {more} cases.")
    return "\n".join([*lines, line]) + "\n"
