"""Cell results: schema, attribution and admission (origin refuses the export, content breaks the case),
duplicates and attempts, and the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_support import HEAD_SHA, OTHER_SHA, bound_to, cell, small_contract
from testops_evidence.campaign.cells import (
    USAGE_ALLOWED,
    Binding,
    BoundCell,
    CellFile,
    CellResult,
    cell_from_bytes,
    load_cell,
    verdict,
)
from testops_evidence.errors import Refusal

CONTRACT = small_contract()
CASES = list(CONTRACT.cases)
PROFILE = dict(CONTRACT.profile)
SELECTION = "5e1ec7" + "0" * 58
OTHER_SELECTION = "0bad" + "1" * 60


def admit(files: list[CellFile], binding: Binding) -> dict[str, BoundCell]:
    """cells.admit for cases measured once: what each case's (only) trial came to, by case key."""
    from testops_evidence.campaign.cells import admit as admit_units

    bound = admit_units(files, binding)
    assert all(trial == 1 for _key, trial in bound)
    return {key: value for (key, _trial), value in bound.items()}


def data(document: dict[str, object]) -> bytes:
    return json.dumps(bound_to(document, SELECTION)).encode()


def parsed(document: dict[str, object], source: str = "cell.json") -> CellResult:
    return cell_from_bytes(data(document), source)


def binding(run_attempts: str = "first-only", run_attempt: int | None = None,
            owners: dict[str, str] | None = None) -> Binding:
    return Binding(selection_sha256=SELECTION, head_sha=HEAD_SHA, profile=PROFILE, selected=CASES,
                   run_attempts=run_attempts, run_attempt=run_attempt,
                   owners=None if owners is None else {(key, 1): job for key, job in owners.items()})


def bind(*documents: dict[str, object], run_attempts: str = "first-only",
         run_attempt: int | None = None) -> dict[str, BoundCell]:
    files = [CellFile(f"cell-{i}.json", data=data(d)) for i, d in enumerate(documents)]
    return admit(files, binding(run_attempts, run_attempt))


def rejection(bound: dict[str, BoundCell], key: str) -> Refusal:
    """The refusal that made ``key`` broken (its cell could only be wrong about its own case)."""
    rejected = bound[key].rejected
    assert rejected is not None and bound[key].cell is None, bound[key]
    return rejected.refusal


def refusal(call) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


DESIGN_EXAMPLE = """{
  "schema": "testops-evidence/cell-result/v2",
  "selection-sha256": "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
  "case": "get-task-context",
  "attempt-id": "9f1c2e7a4b3d4e5f8a9b0c1d2e3f4a5b",
  "disposition": "passed",
  "started-at": "2026-12-01T10:02:00Z",
  "finished-at": "2026-12-01T10:05:12Z",
  "source-sha": "0123456789abcdef0123456789abcdef01234567",
  "profile": {
    "id": "sonnet-default",
    "model": "claude-sonnet-5",
    "provider": "anthropic",
    "driver": "runner"
  },
  "checks": [
    {"id": "tool-called", "passed": true},
    {"id": "answer-grounded", "passed": true, "message": "cited 3 of 3 sources"},
    {"id": "cleanup", "passed": true}
  ],
  "usage": {
    "agent-turns": 4,
    "input-tokens": 18234,
    "output-tokens": 2210,
    "cost-nanodollars": 61230000
  },
  "message": "optional human-readable note from the harness",
  "artifacts": [
    {"path": "transcript.json", "sha256": "5d41402abc4b2a76b9719d911017c592ae5b6c4f2f3e1a0b9c8d7e6f5a4b3c2d"}
  ]
}"""


def test_the_design_example_is_a_valid_cell() -> None:
    result = cell_from_bytes(DESIGN_EXAMPLE.encode(), "example.json")
    assert (result.key, result.disposition, result.attempt_id) == (
        "get-task-context", "passed", "9f1c2e7a4b3d4e5f8a9b0c1d2e3f4a5b")
    assert {name: figure.value for name, figure in result.usage().items()} == {"agent-turns": 4, "input-tokens": 18234, "output-tokens": 2210,
                              "cost-nanodollars": 61230000}


def test_schema_violations_name_the_pointer() -> None:
    document = cell(CONTRACT, "get-task-context")
    document["disposition"] = "maybe"
    error = refusal(lambda: parsed(document))
    assert error.code == "export.cell_invalid"
    assert error.field == "/disposition"
    document = cell(CONTRACT, "get-task-context", unexpected=True)
    assert refusal(lambda: parsed(document)).code == "export.cell_invalid"


def test_not_a_cell_document_is_refused() -> None:
    error = refusal(lambda: cell_from_bytes(b'{"schema": "testops-evidence/cell-result/v3"}', "x.json"))
    assert (error.code, error.expected) == ("export.cell_invalid", "testops-evidence/cell-result/v2")
    assert refusal(lambda: cell_from_bytes(b"\xff\xfe", "x.json")).code == "export.cell_invalid"


def test_a_v1_cell_is_refused_with_the_way_to_migrate() -> None:
    document = cell(CONTRACT, "budget-stop")
    document["schema"] = "testops-evidence/cell-result/v1"
    del document["selection-sha256"]
    error = refusal(lambda: cell_from_bytes(json.dumps(document).encode(), "old.json"))
    assert (error.code, error.expected) == ("export.cell_version", "testops-evidence/cell-result/v2")
    assert "selection-sha256" in (error.hint or "") and "TESTOPS_EVIDENCE_SELECTION_SHA256" in (error.hint or "")
    # In an export it only makes its own case broken: it can prove nothing about this run, and nothing else.
    bound = admit([CellFile("old.json", data=json.dumps(document).encode())], binding())
    assert rejection(bound, "budget-stop").code == "export.cell_version"
    assert verdict(bound["budget-stop"], CONTRACT.case("budget-stop")).status == "broken"


def test_finished_before_started_is_refused() -> None:
    document = cell(CONTRACT, "budget-stop", started="2026-12-01T10:05:00Z", finished="2026-12-01T10:04:59Z")
    error = refusal(lambda: parsed(document))
    assert (error.code, error.field) == ("export.cell_invalid", "finished-at")


def test_impossible_dates_are_refused() -> None:
    document = cell(CONTRACT, "budget-stop", started="2026-02-30T10:05:00Z")
    assert refusal(lambda: parsed(document)).code == "export.cell_invalid"


def test_a_cell_for_an_unselected_case_refuses_the_export() -> None:
    other = small_contract(cases=4)
    document = cell(other, "case-00003")
    error = refusal(lambda: bind(document))
    assert (error.code, error.field, error.actual) == ("export.foreign_cell", "case", "case-00003")


def test_a_cell_of_another_selection_is_a_replay_and_refuses_the_export() -> None:
    """Issue 12, failure 2: a passed cell saved from an earlier run of the same commit and profile."""
    replayed = cell(CONTRACT, "budget-stop", selection_sha256=OTHER_SELECTION)
    error = refusal(lambda: bind(cell(CONTRACT, "get-task-context"), replayed))
    assert (error.code, error.field, error.expected, error.actual) == (
        "export.cell_selection", "budget-stop/selection-sha256", SELECTION, OTHER_SELECTION)
    assert error.exit_code == 3
    # Even a cell that is otherwise invalid is judged by its selection first: a replay is never "a harness bug".
    broken = cell(CONTRACT, "budget-stop", selection_sha256=OTHER_SELECTION, disposition="maybe")
    assert refusal(lambda: bind(broken)).code == "export.cell_selection"


def test_a_cell_of_another_commit_breaks_only_its_case() -> None:
    bound = bind(cell(CONTRACT, "budget-stop", sha=OTHER_SHA), cell(CONTRACT, "get-task-context"))
    error = rejection(bound, "budget-stop")
    assert (error.code, error.field, error.expected, error.actual) == (
        "export.cell_binding", "budget-stop/source-sha", HEAD_SHA, OTHER_SHA)
    assert bound["get-task-context"].cell is not None


def test_a_cell_of_another_profile_breaks_only_its_case() -> None:
    document = cell(CONTRACT, "budget-stop")
    document["profile"] = {**PROFILE, "model": "claude-haiku-9"}
    error = rejection(bind(document), "budget-stop")
    assert (error.code, error.field) == ("export.cell_binding", "budget-stop/profile")


def test_a_harness_bug_breaks_its_case_with_the_code_and_every_other_case_is_judged() -> None:
    """Issue 12, point 4: one buggy case must not hide a campaign's evidence."""
    bad_checks = cell(CONTRACT, "budget-stop")
    bad_checks["checks"] = bad_checks["checks"][:1]
    bound = bind(bad_checks, cell(CONTRACT, "get-task-context"),
                 cell(CONTRACT, "company-credential-approval", disposition="passed", failed=["secret-saved"]))
    decisions = {key: verdict(bound[key], CONTRACT.case(key)) for key in bound}
    assert (decisions["budget-stop"].status, decisions["budget-stop"].code) == ("broken", "export.check_binding")
    assert "export.check_binding" in (decisions["budget-stop"].message or "")
    assert (decisions["company-credential-approval"].status,
            decisions["company-credential-approval"].code) == ("broken", "export.unsupported_pass")
    assert decisions["get-task-context"].status == "passed"


def test_an_unreadable_file_is_attributed_by_its_path_or_refuses_the_export() -> None:
    unreadable = CellFile("w/budget-stop.json", case="budget-stop", data=b"{truncated")
    bound = admit([unreadable], binding())
    assert rejection(bound, "budget-stop").code == "export.cell_invalid"
    # Without a path that names its case, nobody can say whose verdict it would have been.
    error = refusal(lambda: admit([CellFile("x.json", data=b"{truncated")], binding()))
    assert (error.code, error.field) == ("export.unattributed", "x.json")


def test_a_file_holding_another_cases_cell_than_its_path_names_refuses_the_export() -> None:
    forged = CellFile("w/budget-stop.json", case="budget-stop", data=data(cell(CONTRACT, "get-task-context")))
    error = refusal(lambda: admit([forged], binding()))
    assert (error.code, error.expected, error.actual) == ("export.cell_origin", "budget-stop", "get-task-context")


def test_a_cell_from_a_worker_that_does_not_own_its_case_refuses_the_export() -> None:
    """Issue 12, failure 1: the worker of one case writes a passed cell for another case."""
    owners = {"get-task-context": "native-get-task-context", "budget-stop": "native-budget-stop",
              "company-credential-approval": "external-company-credential-approval"}
    own = CellFile("a/get-task-context.json", case="get-task-context", worker="native-get-task-context",
                   data=data(cell(CONTRACT, "get-task-context")))
    forged = CellFile("a/budget-stop.json", case="budget-stop", worker="native-get-task-context",
                      data=data(cell(CONTRACT, "budget-stop")))
    error = refusal(lambda: admit([own, forged], binding(owners=owners)))
    assert (error.code, error.field, error.expected, error.actual) == (
        "export.cell_origin", "budget-stop/worker", "native-budget-stop", "native-get-task-context")
    bound = admit([own], binding(owners=owners))
    assert bound["get-task-context"].cell is not None and bound["get-task-context"].cell.worker == (
        "native-get-task-context")


@pytest.mark.parametrize(("checks", "detail"), [
    ([{"id": "stopped-at-budget", "passed": True}], "missing: spend-reported"),
    ([{"id": "stopped-at-budget", "passed": True}, {"id": "spend-reported", "passed": True},
      {"id": "invented", "passed": True}], "not in the contract: invented"),
    ([{"id": "stopped-at-budget", "passed": True}, {"id": "stopped-at-budget", "passed": True}], "twice"),
])
def test_checks_must_be_exactly_the_contract_checks(checks: list[dict[str, object]], detail: str) -> None:
    document = cell(CONTRACT, "budget-stop")
    document["checks"] = checks
    error = rejection(bind(document), "budget-stop")
    assert error.code == "export.check_binding"
    assert detail in error.message


def test_two_cells_for_one_case_are_refused_under_first_only() -> None:
    first = cell(CONTRACT, "budget-stop", attempt="a1")
    second = cell(CONTRACT, "budget-stop", attempt="a2", finished="2026-12-01T11:00:00Z")
    error = refusal(lambda: bind(first, second))
    assert (error.code, error.field) == ("export.duplicate_cell", "budget-stop")


def test_run_attempts_any_chooses_the_latest_finished_attempt_and_records_the_others() -> None:
    early = cell(CONTRACT, "budget-stop", attempt="a1", disposition="behavior_failure", failed=["spend-reported"],
                 finished="2026-12-01T10:06:00Z", **{"run-attempt": 1})
    late = cell(CONTRACT, "budget-stop", attempt="a2", finished="2026-12-01T11:00:00Z", **{"run-attempt": 2})
    middle = cell(CONTRACT, "budget-stop", attempt="a3", finished="2026-12-01T10:30:00Z", **{"run-attempt": 2})
    bound = bind(early, late, middle, run_attempts="any")["budget-stop"]
    assert bound.cell.attempt_id == "a2"
    assert [c.attempt_id for c in bound.superseded] == ["a1", "a3"]
    assert verdict(bound, CONTRACT.case("budget-stop")).status == "passed"


def test_an_ambiguous_latest_attempt_is_refused() -> None:
    one = cell(CONTRACT, "budget-stop", attempt="a1")
    two = cell(CONTRACT, "budget-stop", attempt="a2")
    error = refusal(lambda: bind(one, two, run_attempts="any"))
    assert (error.code, error.field) == ("export.duplicate_cell", "budget-stop/finished-at")


def test_a_reused_attempt_id_is_refused_even_across_cases() -> None:
    one = cell(CONTRACT, "budget-stop", attempt="same")
    two = cell(CONTRACT, "get-task-context", attempt="same")
    assert refusal(lambda: bind(one, two, run_attempts="any")).code == "export.duplicate_cell"


def test_verdicts_have_a_specific_message_per_reason() -> None:
    bound = bind(
        cell(CONTRACT, "get-task-context", disposition="infrastructure_failure", failed=["cleanup"]),
        cell(CONTRACT, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
    )
    broken = verdict(bound["get-task-context"], CONTRACT.case("get-task-context"))
    failed = verdict(bound["budget-stop"], CONTRACT.case("budget-stop"))
    missing = verdict(None, CONTRACT.case("company-credential-approval"))
    assert (broken.status, broken.reason) == ("broken", "infrastructure_failure")
    assert "Infrastructure failure" in (broken.message or "") and "cleanup" in (broken.message or "")
    assert (failed.status, failed.reason, failed.failed_checks) == ("failed", "behavior_failure", ("spend-reported",))
    assert "Behaviour failure: checks failed: spend-reported" in (failed.message or "")
    assert (missing.status, missing.reason) == ("broken", "not_recorded")
    assert (missing.message or "").startswith("Not recorded")


def test_a_pass_with_a_failed_check_is_unsupported() -> None:
    document = cell(CONTRACT, "budget-stop", disposition="passed", failed=["spend-reported"])
    error = refusal(lambda: verdict(BoundCell(parsed(document)), CONTRACT.case("budget-stop")))
    assert (error.code, error.exit_code, error.actual) == ("export.unsupported_pass", 3, ["spend-reported"])
    assert rejection(bind(document), "budget-stop").code == "export.unsupported_pass"


def test_only_allow_listed_usage_reaches_evidence() -> None:
    result = parsed(cell(CONTRACT, "budget-stop"))
    assert set(result.usage()) <= set(USAGE_ALLOWED)
    assert "secret-counter" not in result.usage()
    assert result.usage()["agent-turns"].value == 4


def test_cells_are_read_without_following_links(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(data(cell(CONTRACT, "budget-stop")))
    (tmp_path / "link.json").symlink_to(target)
    assert load_cell(tmp_path, "real.json").key == "budget-stop"
    assert refusal(lambda: load_cell(tmp_path, "link.json")).code == "io.unsafe_path"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**12) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(st.sampled_from(["schema", "case", "attempt-id", "disposition", "started-at", "finished-at",
                                        "source-sha", "profile", "checks", "usage", "host", "extra"]),
                       json_values, max_size=10))
def test_untrusted_cell_documents_end_in_a_refusal_or_a_valid_cell(document: dict[str, object]) -> None:
    document.setdefault("schema", "testops-evidence/cell-result/v2")
    try:
        result = cell_from_bytes(json.dumps(document).encode(), "fuzz.json")
    except Refusal as error:
        assert error.code in ("export.cell_invalid", "export.cell_version")
        return
    assert result.finished >= result.started


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_cell_reader(data: bytes) -> None:
    try:
        cell_from_bytes(data, "fuzz.json")
    except Refusal as error:
        assert error.code in ("export.cell_invalid", "export.cell_version")


@pytest.mark.parametrize(("policy", "selection_attempt", "measured"), [
    ("first-only", 1, 2),  # a re-run's cell replayed into the first attempt's export
    ("first-only", 2, 1),  # an earlier attempt's cell where only one attempt counts
    ("any", 2, 3),  # a cell from a later attempt than the selection's cannot belong to it
])
def test_a_cell_of_another_run_attempt_is_refused(policy: str, selection_attempt: int, measured: int) -> None:
    document = cell(CONTRACT, "budget-stop", **{"run-attempt": measured})
    error = rejection(bind(document, run_attempts=policy, run_attempt=selection_attempt), "budget-stop")
    assert (error.code, error.field, error.actual) == ("export.cell_binding", "budget-stop/run-attempt", measured)


def test_cells_of_the_selections_attempt_and_under_any_of_earlier_ones_are_bound() -> None:
    same = cell(CONTRACT, "budget-stop", attempt="a1", **{"run-attempt": 2})
    unstated = cell(CONTRACT, "get-task-context")  # adapted at export, or a harness that omits it
    bound = bind(same, unstated, run_attempt=2)
    assert {key for key, b in bound.items() if b.cell is not None} == {"budget-stop", "get-task-context"}
    earlier = cell(CONTRACT, "budget-stop", attempt="a0", finished="2026-12-01T10:03:00Z", **{"run-attempt": 1})
    bound = bind(earlier, same, run_attempts="any", run_attempt=2)
    assert (bound["budget-stop"].cell.attempt_id, [c.attempt_id for c in bound["budget-stop"].superseded]) == (
        "a1", ["a0"])


def test_a_cells_times_and_usage_are_read_once() -> None:
    from testops_evidence.campaign.cells import CellResult

    document = cell(small_contract(), "get-task-context")
    result = CellResult(document, "0" * 64, "source.json")
    first = result.started
    assert result.started is first and result.finished >= first and result.usage() is result.usage()
