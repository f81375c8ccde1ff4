"""The campaign summary (summaries/campaign.py): the verdict in its first lines, untrusted text never live."""

from __future__ import annotations

import re
from typing import Any

from testops_evidence.summaries import campaign
from testops_evidence.terminal import plain

HOSTILE_TITLE = "<img src=x onerror=alert(1)> [click](https://evil.example) **bold** | pipe"


def receipt(*, failed: int = 1, broken: int = 1, comparison: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = [{"key": "good", "title": "Good case", "status": "passed", "reason": "passed"}]
    rows += [{"key": f"bad-{n}", "title": HOSTILE_TITLE, "status": "failed", "reason": "behavior_failure"}
             for n in range(failed)]
    rows += [{"key": f"broke-{n}", "title": "Broke", "status": "broken", "reason": "invalid_cell",
              "code": "cell.schema"} for n in range(broken)]
    return {
        "campaign": "agent-protocol",
        "counts": {"total": len(rows), "passed": 1, "failed": failed, "broken": broken},
        "results": rows,
        "statistics": {"pass-rate": {"mean": 0.5, "interval-95": [0.1, 0.9], "cases": 2, "clusters": 2,
                                     "standard-error": 0.2}, "trials": 2, "not-measured": 1,
                       "minimal-detectable-change": 0.5},
        "usage": {"campaign": {"cost-nanodollars": {"value": 1_500_000_000, "coverage": "reported", "figures": 3,
                                                    "known": 3}}},
        **({"comparison": comparison} if comparison is not None else {}),
    }


def test_the_verdict_leads_and_the_failing_cases_follow_with_their_reasons() -> None:
    text = campaign.render(receipt(), campaign.Links(report="https://reports.example/r/1/index.html",
                                                     run="https://github.com/acme/agents/actions/runs/7"))
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[0] == "### ❌ agent-protocol: 1 of 3 passed, 1 failed, 1 broken"
    assert lines[1].startswith("**Pass rate 50.0% (95% interval 10.0%–90.0%, 2 cases)** · compared with the "
                               "baseline: not compared")
    assert "cost: " in lines[1] and "unavailable" not in lines[1]
    assert "[open the report](https://reports.example/r/1/index.html)" in lines[2]
    # failed before broken, each with its reason in words (and a broken cell's code)
    assert lines.index(next(line for line in lines if "`bad-0`" in line)) < lines.index(
        next(line for line in lines if "`broke-0`" in line))
    assert "a check failed" in text and "its cell result was refused (cell.schema)" in text


def test_all_passed_is_a_success_and_lists_nothing() -> None:
    text = campaign.render(receipt(failed=0, broken=0), campaign.Links())
    assert text.splitlines()[0] == "### ✅ agent-protocol: 1 of 1 passed"
    assert "Not passed" not in text
    assert campaign.verdict_of(receipt(failed=0, broken=0)).conclusion == "success"
    assert campaign.verdict_of(receipt()).conclusion == "failure"


def test_the_comparison_verdict_shows_the_difference_with_its_interval() -> None:
    comparison = {"state": "compared", "regressions": ["bad-0"],
                  "difference": {"mean": -0.125, "interval-95": [-0.3, 0.05], "verdict": "no detectable change",
                                 "cases": 2, "p-value": 0.2, "only-baseline": 0, "only-current": 0}}
    line = campaign.comparison_line(comparison)
    assert line == ("**no detectable change**: -12.5 points (95% interval -30.0 to +5.0) over 2 paired cases; "
                    "1 regression(s)")
    assert campaign.comparison_line({"state": "no-baseline", "regressions": []}) == "no baseline to compare with"
    text = campaign.render(receipt(comparison=comparison), campaign.Links())
    assert "-12.5 points" in [line for line in text.splitlines() if line.strip()][1]


def test_untrusted_titles_and_links_never_become_live_markdown() -> None:
    text = campaign.render(receipt(), campaign.Links(report="javascript:alert(1)"))
    assert re.search(r"(?<!\\)<img", text) is None and "](https://evil.example)" not in text
    assert "**bold**" not in text
    assert "javascript:alert(1)" not in text.replace("`javascript:alert(1)`", "")  # shown as code, never a link
    # what a reader sees: the title as it was written
    assert "<img src=x onerror=alert(1)> [click](https://evil.example) **bold** | pipe" in plain(text)


def test_one_annotation_per_case_that_did_not_pass() -> None:
    found = campaign.case_annotations(receipt(failed=2, broken=1), ".github/testops-evidence.yml")
    assert [(a["title"], a["annotation_level"]) for a in found] == [
        ("failed: bad-0", "failure"), ("failed: bad-1", "failure"), ("broken: broke-0", "warning")]
    assert all(a["path"] == ".github/testops-evidence.yml" and a["start_line"] == 1 for a in found)


def test_the_badge_is_coloured_by_the_verdict_and_its_text_escaped() -> None:
    import xml.etree.ElementTree as ET

    from testops_evidence.summaries import badge

    assert badge.colour({"total": 3, "passed": 3, "failed": 0, "broken": 0}) == badge.GREEN
    assert badge.colour({"total": 3, "passed": 1, "failed": 1, "broken": 1}) == badge.RED
    assert badge.colour({"total": 3, "passed": 2, "failed": 0, "broken": 1}) == badge.ORANGE
    assert badge.colour({"total": 0, "passed": 0, "failed": 0, "broken": 0}) == badge.GREY
    drawn = badge.svg(receipt(), label='<script>alert("x")</script> & "q"')
    root = ET.fromstring(drawn)  # noqa: S314 -- our own output; well-formed XML: every text escaped
    assert "<script>" not in drawn.decode() and not list(root.iter("{http://www.w3.org/2000/svg}script"))
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts == ['<script>alert("x")</script> & "q"', "1/3 passed, 1 failed, 1 broken"]
    assert f'fill="{badge.RED}"' in drawn.decode()
