"""The campaign summary: the verdict in its first lines, then the cases that did not pass, then the rest.

One rendering of a verified receipt for every place a person looks for the campaign's result: verify's step
summary (the publish job, the campaign template's last results job), the check run on the tested commit and
the sticky pull-request comment (``github_checks.py``). Everything shown comes from the export receipt
(``campaign/receipt.py``, its statistics and comparison blocks computed by ``campaign/stats.py`` and
``campaign/previous.py``) and the publication record; every value that came from outside (a case key, a
title, a link) reaches the Markdown through :mod:`testops_evidence.md`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence import md
from testops_evidence.campaign import stats
from testops_evidence.campaign.usage import COST, Figure, show

# How many cases that did not pass the summary lists by name (the receipt and the report hold them all).
LISTED = 50

# Each reason of the receipt's schema (export-receipt.schema.json), said for a reader.
REASONS = {
    "passed": "every check passed",
    "behavior_failure": "a check failed: the agent did not behave as the case requires",
    "infrastructure_failure": "the harness or its infrastructure broke: the behaviour was not measured",
    "not_recorded": "no cell result was recorded for it",
    "invalid_cell": "its cell result was refused",
    "trials_incomplete": "too few of its trials were measured for its verdict policy",
    "budget": "stopped or refused by the campaign's budget",
}


@dataclass(frozen=True)
class Verdict:
    """The campaign's verdict, as the first line says it and the badge and check run show it."""

    passed: int
    failed: int
    broken: int
    total: int

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def conclusion(self) -> str:
        """The check run's conclusion: success only when every case passed (GitHub's check-run conclusions)."""
        return "success" if self.all_passed else "failure"

    def sentence(self) -> str:
        """``9 of 12 passed, 1 failed, 2 broken`` (no untrusted text: counts only)."""
        rest = ", ".join(f"{n} {s}" for s, n in (("failed", self.failed), ("broken", self.broken)) if n)
        return f"{self.passed} of {self.total} passed" + (f", {rest}" if rest else "")


def verdict_of(receipt: Mapping[str, Any]) -> Verdict:
    counts = receipt["counts"]
    return Verdict(int(counts["passed"]), int(counts["failed"]), int(counts["broken"]), int(counts["total"]))


def not_passed(receipt: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The receipt rows that did not pass, failed before broken, in the receipt's order otherwise."""
    rows = [row for row in receipt["results"] if row["status"] != "passed"]
    return sorted(rows, key=lambda row: row["status"] != "failed")


def reason_text(row: Mapping[str, Any]) -> str:
    """Why a case did not pass, in words (its code appended when the receipt names one)."""
    why = REASONS.get(str(row.get("reason")), str(row.get("reason")))
    return f"{why} ({row['code']})" if row.get("code") else why


def pass_rate_line(statistics: Mapping[str, Any] | None) -> str:
    """``Pass rate 90.0% (95% interval 70.4% to 100.0%, 10 cases)`` from the receipt's statistics block."""
    rate = statistics.get("pass-rate") if isinstance(statistics, Mapping) else None
    if not isinstance(rate, Mapping):
        return "Pass rate: none (no case measured anything)"
    interval = rate.get("interval-95")
    shown = (f"95% interval {interval[0] * 100:.1f}%–{interval[1] * 100:.1f}%" if interval
             else "no interval: too few cases")
    return f"Pass rate {rate['mean'] * 100:.1f}% ({shown}, {rate['cases']} cases)"


def comparison_line(comparison: Mapping[str, Any] | None) -> str:
    """The comparison verdict in one line: better, worse or no detectable change, with the interval."""
    if not isinstance(comparison, Mapping):
        return "not compared (no `compare-with`)"
    state = comparison.get("state")
    if state == "no-baseline":
        return "no baseline to compare with"
    if state == "not-comparable":
        return "the baseline is not comparable: " + md.text(str(comparison.get("why-not")), limit=200)
    difference = comparison.get("difference")
    regressions = len(comparison.get("regressions") or [])
    tail = f"; {regressions} regression(s)" if regressions else "; no regression"
    if not isinstance(difference, Mapping):
        return "no case measured by both campaigns" + tail
    interval = difference.get("interval-95")
    shown = (f"95% interval {interval[0] * 100:+.1f} to {interval[1] * 100:+.1f}" if interval
             else "no interval")
    verdict = difference["verdict"] if difference["verdict"] in (stats.BETTER, stats.WORSE) else stats.NO_CHANGE
    return f"**{verdict}**: {difference['mean'] * 100:+.1f} points ({shown}) over {difference['cases']} paired cases{tail}"


def cost_figure(receipt: Mapping[str, Any]) -> str:
    block = (receipt.get("usage") or {}).get("campaign") or {}
    cost = block.get(COST)
    if not isinstance(cost, Mapping):
        return "unavailable"
    return show(COST, Figure(cost["value"], cost["coverage"], cost["figures"], cost["known"]))


@dataclass(frozen=True)
class Links:
    """Where to look further: the report (an http(s) URL, or a path to open from disk) and the run's page
    (None for a local run, which has no page on GitHub)."""

    report: str | None = None
    run: str | None = None


def headline(receipt: Mapping[str, Any]) -> md.Markdown:
    """The first line: icon, campaign and counts — the verdict before anything else."""
    verdict = verdict_of(receipt)
    icon = "✅" if verdict.all_passed else "❌"
    return md.Markdown(f"### {icon} {md.text(str(receipt['campaign']), limit=120)}: {verdict.sentence()}")


def render(receipt: Mapping[str, Any], links: Links, *, details: str = "", limit: int = LISTED) -> md.Markdown:
    """The campaign summary: the verdict's lines first (counts, pass rate, comparison, cost, report), the cases
    that did not pass with their reasons, and ``details`` (trusted Markdown: digests, tables) folded away."""
    lines = [headline(receipt), ""]
    lines.append(f"**{pass_rate_line(receipt.get('statistics'))}** · compared with the baseline: "
                 f"{comparison_line(receipt.get('comparison'))} · cost: {cost_figure(receipt)}")
    where = []
    if links.report:
        where.append("report: " + (md.link("open the report", links.report)
                                   if links.report.startswith(("http://", "https://")) else md.code(links.report)))
    if links.run:
        where.append(md.link("the run", links.run))
    if where:
        lines += ["", " · ".join(where)]
    rows = not_passed(receipt)
    if rows:
        lines += ["", f"### Not passed ({len(rows)})", "",
                  md.table(("", "case", "title", "status", "why"), [
                      (_icon(row["status"]), md.code(row["key"]), row["title"], row["status"], reason_text(row))
                      for row in rows[:limit]], limit=limit, more=max(len(rows) - limit, 0))]
    if details:
        lines += ["", "<details><summary>Publication, digests and figures</summary>", "", details.strip(), "",
                  "</details>"]
    return md.Markdown("\n".join(lines) + "\n")


def case_annotations(receipt: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    """One check-run annotation per case that did not pass, on ``path`` (the contract, where the case is
    declared): GitHub's ``annotation_level`` is ``failure`` for a failed case, ``warning`` for a broken one."""
    found = []
    for row in not_passed(receipt):
        title = f"{row['status']}: {row['key']}"
        found.append({"path": path, "start_line": 1, "end_line": 1,
                      "annotation_level": "failure" if row["status"] == "failed" else "warning",
                      "title": title[:255], "message": f"{row['title']} — {reason_text(row)}"[:64000]})
    return found


def _icon(status: str) -> str:
    return {"passed": "✅", "failed": "❌", "broken": "💥"}.get(status, "•")
