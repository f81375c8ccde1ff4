"""Red team, round four: ``rehearse --case-command``, a case command that writes what is not its own.

Every case command runs as the user and can write anywhere the rehearsal's cell-results directory is. A command
that writes another case's cell there — one the rehearsal did not run (its credentials are missing), or one it
runs later and that writes nothing — must not have that cell exported as the other case's evidence, and a link
left in place of a cell or of a trial directory must never be followed.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_rehearse import ADOPTER, adopter_checkout, pinned_checkout, receipt_of, rehearse_own

__all__ = ["pinned_checkout"]

# refund-policy's command runs its own case, then writes a cell for greeting next to its own (a passing one, made by
# the real cell command over greeting's real tests, so that only where it came from is wrong).
PLANT = ('bash evals/run-case.sh; if [ "$TESTOPS_EVIDENCE_CASE" = refund-policy ]; then '
         'TESTOPS_EVIDENCE_CASE=greeting TESTOPS_EVIDENCE_ATTEMPT_ID=planted '
         'TESTOPS_EVIDENCE_CELL_RESULT="$(dirname "$TESTOPS_EVIDENCE_CELL_RESULT")/greeting.json" '
         'bash evals/run-case.sh; fi')


def _greeting_needs_a_key(checkout: Path) -> None:
    contract = (ADOPTER / ".github" / "testops-evidence.yml").read_text()
    listed = "    title: Greets by name\n    lane: native\n"
    adopter_checkout(checkout, {".github/testops-evidence.yml": contract.replace(
        listed, listed + "    credentials: [SHOP_API_KEY]\n")})


def test_a_cell_planted_for_a_case_that_was_not_run_is_not_its_evidence(tmp_path: Path,
                                                                        pinned_checkout: Path) -> None:
    _greeting_needs_a_key(pinned_checkout)
    run = rehearse_own(tmp_path, PLANT, cases="greeting,refund-policy")
    assert "case greeting: not run" in run.log, run.log[-4000:]
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt_of(tmp_path)["results"]}
    assert statuses == {"refund-policy": ("passed", "passed"), "greeting": ("broken", "not_recorded")}
    (run_dir,) = (tmp_path / "rehearsal").iterdir()
    assert sorted(p.name for p in (run_dir / "cell-results").iterdir()) == ["refund-policy.json"]


def test_a_cell_planted_for_a_case_run_before_it_does_not_replace_that_cases_own(tmp_path: Path,
                                                                                 pinned_checkout: Path) -> None:
    """greeting runs and writes nothing; refund-policy (run after it in the plan or before it: either way) plants a
    passing greeting cell. greeting stays not recorded."""
    adopter_checkout(pinned_checkout)
    command = 'if [ "$TESTOPS_EVIDENCE_CASE" = greeting ]; then exit 0; fi; ' + PLANT
    run = rehearse_own(tmp_path, command, cases="greeting,refund-policy")
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt_of(tmp_path)["results"]}
    assert statuses["greeting"] == ("broken", "not_recorded"), run.log[-4000:]
    assert statuses["refund-policy"] == ("passed", "passed")


def test_a_link_in_place_of_a_cell_is_not_followed(tmp_path: Path, pinned_checkout: Path) -> None:
    """A case command that leaves its cell as a link to a passing cell elsewhere wrote no cell of its own."""
    adopter_checkout(pinned_checkout)
    elsewhere = tmp_path / "elsewhere.json"
    command = ('if [ "$TESTOPS_EVIDENCE_CASE" = greeting ]; then '
               f'TESTOPS_EVIDENCE_CELL_RESULT={elsewhere} bash evals/run-case.sh; '
               f'ln -s {elsewhere} "$TESTOPS_EVIDENCE_CELL_RESULT"; else bash evals/run-case.sh; fi')
    run = rehearse_own(tmp_path, command, cases="greeting,refund-policy")
    assert json.loads(elsewhere.read_text())["case"] == "greeting", run.log[-4000:]
    statuses = {row["key"]: (row["status"], row["reason"]) for row in receipt_of(tmp_path)["results"]}
    assert statuses == {"refund-policy": ("passed", "passed"), "greeting": ("broken", "not_recorded")}
    assert "case greeting: exit 0, cell result MISSING" in run.log


def test_a_credential_of_a_case_left_out_of_the_selection_reaches_no_other_case(tmp_path: Path,
                                                                               pinned_checkout: Path) -> None:
    """As case-secrets on GitHub: a credential reaches only the cases whose contract entry lists it, also when that
    case is not selected for this rehearsal (`--cases`)."""
    _greeting_needs_a_key(pinned_checkout)
    seen = ('python3 -c \'import os; print(os.environ.get("SHOP_API_KEY", "-"))\' > "key-$TESTOPS_EVIDENCE_CASE"; '
            'bash evals/run-case.sh')
    run = rehearse_own(tmp_path, seen, cases="refund-policy", exported={"SHOP_API_KEY": "k-7c1d"})
    assert run.exit_code == 0, run.log[-4000:]
    assert (pinned_checkout / "key-refund-policy").read_text().strip() == "-"
