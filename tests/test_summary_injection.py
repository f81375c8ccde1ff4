"""Untrusted text from workers, harness reports, archives and inputs reaches the step summaries of the
real phases as text: rendered by cmark-gfm (GitHub's renderer), no link, image or tag comes from it, and
no ``</details>`` closes anything. (Issue #14, attack 5: a backtick ended the code span, so a JUnit
failure message, a refusal naming an archive entry or a mode showed up as live Markdown and HTML.)
"""

from __future__ import annotations

import json
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

from evidence_support import (
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, run_mode
from test_md import Elements

# Closes a code span, a table cell and a <details>; opens a link, an image, a tag and an autolink.
PAYLOAD = ("x` | </details> ![i](https://evil.example/i.png) [l](https://evil.example/l) <img src=x onerror=1> "
           "www.evil.example https://evil.example/a mail@evil.example\n# heading\n- item")
CONTRACT = small_contract()


def rendered(markdown: str) -> Elements:
    parsed = Elements()
    parsed.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))
    parsed.close()
    return parsed


def assert_inert(markdown: str) -> None:
    parsed = rendered(markdown)
    tags = [tag for tag, _ in parsed.starts]
    assert not {"img", "script", "h1", "del", "ul"} & set(tags), markdown
    hrefs = [str(attrs.get("href")) for tag, attrs in parsed.starts if tag == "a"]
    assert not [href for href in hrefs if "evil.example" in href], (hrefs, markdown)
    # Only the <details> the phase folds its own tables into (PhaseResult.brief, the campaign summary): each
    # opened once and closed once, none opened or closed by the payload.
    own = markdown.count("<details><summary>")
    assert tags.count("details") == own and parsed.ends.count("details") == own, markdown


def test_a_harness_message_and_a_contract_title_stay_text_in_the_export_summary(tmp_path: Path) -> None:
    document = CONTRACT.document | {"cases": [dict(c, title=PAYLOAD[:200]) for c in CONTRACT.document["cases"]]}
    contract_path = tmp_path / "contract.json"
    contract_path.write_text(json.dumps(document))
    from testops_evidence.contract import load_contract

    contract = load_contract(contract_path)
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    failing = cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"],
                   message=PAYLOAD)
    failing["checks"] = [dict(c, message=PAYLOAD) if not c["passed"] else c for c in failing["checks"]]
    write_cells(tmp_path / "cell-results", [cell(contract, "get-task-context"), failing])
    clock = FakeClock(1_796_119_500.0)
    run = run_mode("export", tmp_path, {"contract": str(contract_path), "selection-path": str(selection),
                                        "selection-sha256": digest, "cell-results": str(tmp_path / "cell-results"),
                                        "results-dir": str(tmp_path / "out")}, env,
                   new_uuid=uuid_factory(), clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep)
    assert run.exit_code == 1, run.summary
    assert "evil.example" in run.summary  # shown, as text
    assert_inert(run.summary)
    # The Allure description is Markdown too (Allure and TestOps render it).
    for result in (tmp_path / "out").glob("*-result.json"):
        assert_inert(json.loads(result.read_text())["description"])


def test_a_junit_failure_message_stays_text_in_the_cell_summary(tmp_path: Path) -> None:
    contract = write_contract(CONTRACT, tmp_path / "contract.json")
    from xml.sax.saxutils import quoteattr

    (tmp_path / "report.xml").write_text(
        "<testsuite timestamp='2026-12-01T10:00:00+00:00' time='3'><testcase name='test_stopped_at_budget'/>"
        f"<testcase name='test_spend_reported'><failure message={quoteattr(PAYLOAD)}/></testcase></testsuite>")
    run = run_mode("cell", tmp_path, {"contract": str(contract), "case": "budget-stop",
                                      "junit": str(tmp_path / "report.xml"), "out": str(tmp_path / "c.json"),
                                      "selection-sha256": "5e1ec7" + "0" * 58}, actions_env())
    assert run.exit_code == 0, run.summary
    assert "evil.example" in run.summary
    assert_inert(run.summary)


def test_a_hostile_mode_and_refusal_message_stay_text(tmp_path: Path) -> None:
    run = run_mode(PAYLOAD, tmp_path, {}, actions_env())
    assert run.outputs["error-code"] == "mode.unknown"
    assert "evil.example" in run.summary
    assert_inert(run.summary)


def test_a_refused_archive_entry_stays_text_in_the_import_summary(tmp_path: Path) -> None:
    from import_builders import PREFIX, artifact_zip
    from servers.github_server import GitHubServer
    from test_import_phase import CELLS, RUN_ID, Importer

    with GitHubServer(token="ghs_token") as gh:
        importer = Importer(tmp_path, gh)
        importer.add_run()
        hostile = f"{PREFIX}{PAYLOAD.replace('/', '_').replace(':', '')[:150]}/result.json"
        gh.add_artifact(RUN_ID, "cells-a", artifact_zip(CELLS, edit=lambda entries: [*entries, (hostile, b"{}")]),
                        artifact_id=501)
        run = importer.run(**{"INPUT_GITHUB-TOKEN": "ghs_token"})
    assert run.outputs["error-code"] in ("import.document", "import.unsafe_archive"), run.summary
    assert "evil.example" in run.summary
    assert_inert(run.summary)


def test_a_contract_title_stays_text_in_the_campaign_summary() -> None:
    from testops_evidence.summaries import campaign

    receipt = {"campaign": "agent-protocol", "counts": {"total": 1, "passed": 0, "failed": 1, "broken": 0},
               "results": [{"key": "budget-stop", "title": PAYLOAD, "status": "failed", "reason": "behavior_failure"}],
               "statistics": {"pass-rate": None}}
    text = campaign.render(receipt, campaign.Links(report=PAYLOAD, run="https://evil.example/run"),
                           details="| a | b |\n|---|---|\n| 1 | 2 |")
    assert_inert(text.replace("https://evil.example/run", "https://github.com/acme/agents/actions/runs/1"))
