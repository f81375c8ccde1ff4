"""Verifying a TestOps publication: every receipt row listed in the launch exactly once, with its status.

The launch's results are paged through until every receipt row appears exactly once (matched by test case
id *and* full name) with the expected status; results that are not visible yet are waited for with
exponential backoff up to the deadline. A listed result must be the one TestOps created for this upload
(its id from the chunk answers): a launch may also hold another upload's result of the same case. With
depth ``detail`` each matched result's detail is fetched once (cached by id) to check its job run, project
and launch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.evidence.receipt import Receipt
from testops_evidence.testops import api
from testops_evidence.testops.client import TestOpsClient

PAGE_SIZE = 1000
FIRST_WAIT = 2.0
MAX_WAIT = 30.0


@dataclass(frozen=True)
class Verified:
    launch_id: int
    polls: int
    requests: int
    details: int
    waited: float


def verify_launch(client: TestOpsClient, receipt: Receipt, publication: Mapping[str, Any], *, depth: str,
                  deadline: int, monotonic: Callable[[], float], sleep: Callable[[float], None],
                  log: Callable[[str], None]) -> Verified:
    testops = receipt.testops
    assert testops is not None  # bind_receipt refused a files-backend receipt
    launch_id = int(publication.get("launch-id") or testops["launch-id"])
    job_run_id, project_id = testops["job-run-id"], testops["project-id"]
    expected = {(row["testops-id"], row["full-name"]): row for row in receipt.results}
    by_name = {row["full-name"]: row for row in receipt.results}
    # The result ids TestOps gave this upload's chunks: a launch may also hold another upload's result of the
    # same test case (a re-run's upload into the same job run), which a match by case and name cannot tell.
    raw_ids = publication.get("result-ids")
    uploaded_ids: Mapping[str, Any] = raw_ids if isinstance(raw_ids, dict) else {}
    verified_detail: set[int] = set()
    started = monotonic()
    give_up_at = started + deadline
    wait = FIRST_WAIT
    polls = 0
    # No single request may outlive the verification deadline (plus one request's grace).
    client.set_deadline(deadline + client.read_timeout)
    while True:
        polls += 1
        seen: Counter[tuple[Any, Any]] = Counter()
        found: dict[tuple[Any, Any], Mapping[str, Any]] = {}
        unmatched_names: Counter[str] = Counter()
        for item in api.list_results(client, launch_id, PAGE_SIZE):
            key = (item.get("testCaseId"), item.get("fullName"))
            if key in expected:
                seen[key] += 1
                found[key] = item
            elif item.get("fullName") in by_name:
                unmatched_names[str(item.get("fullName"))] += 1
        duplicated = sorted((k for k, n in seen.items() if n > 1), key=str)
        if duplicated:
            row = expected[duplicated[0]]
            raise Refusal("verify.duplicate", f"{row['full-name']} (test case {row['testops-id']}) appears "
                          f"{seen[duplicated[0]]} times in launch {launch_id}", field=row["key"],
                          expected="exactly once", actual=seen[duplicated[0]])
        pending = []
        for key, row in expected.items():
            listed = found.get(key)
            want_id = uploaded_ids.get(str(row["uuid"]))
            if listed is not None and want_id is not None and listed.get("id") != want_id:
                raise Refusal("verify.mismatch", f"{row['full-name']} in launch {launch_id} is test result "
                              f"{listed.get('id')}, not the result {want_id} this upload created: another "
                              "upload's result stands in for it", field=f"{row['key']}/id", expected=want_id,
                              actual=listed.get("id"))
            status = listed.get("status") if listed is not None else None
            if listed is None or status in (None, "unknown"):
                pending.append(row)
                continue
            if status != row["status"]:
                raise Refusal("verify.mismatch", f"{row['full-name']} is {status} in TestOps but {row['status']} "
                              "in the receipt", field=f"{row['key']}/status", expected=row["status"], actual=status)
            if depth == "detail":
                _check_detail(client, listed, row, launch_id, job_run_id, project_id, verified_detail)
        log(f"poll {polls}: {len(expected) - len(pending)} of {len(expected)} results verified")
        if not pending:
            break
        now = monotonic()
        if now + wait > give_up_at:
            raise _missing(pending, launch_id, deadline, polls, unmatched_names)
        sleep(wait)
        wait = min(wait * 2, MAX_WAIT)
    return Verified(launch_id, polls, client.request_count, len(verified_detail), round(monotonic() - started, 1))


def _check_detail(client: TestOpsClient, item: Mapping[str, Any], row: Mapping[str, Any], launch_id: int,
                  job_run_id: int, project_id: int, cache: set[int]) -> None:
    """One detail request per result id, ever: job run, project and launch must be the selection's."""
    result_id = item.get("id")
    if not isinstance(result_id, int) or result_id in cache:
        return
    detail = api.get_result(client, result_id)
    raw_run = detail.get("jobRun")
    # A result of a launch session may name no job run (the session is the launch's); one it names must be
    # the selection's. The result's id, matched to its uuid, already ties it to this upload.
    checks: list[tuple[str, Any, Any]] = []
    if raw_run is not None:
        job_run: Mapping[str, Any] = raw_run if isinstance(raw_run, dict) else {}
        checks.append(("jobRun.id", job_run_id, job_run.get("id")))
    for field, want, got in (*checks, ("projectId", project_id, detail.get("projectId")),
                             ("launchId", launch_id, detail.get("launchId")),
                             ("fullName", row["full-name"], detail.get("fullName"))):
        if want != got:
            raise Refusal("verify.mismatch", f"test result {result_id} of {row['key']} has another {field}",
                          field=f"{row['key']}/{field}", expected=want, actual=got)
    cache.add(result_id)


def _missing(pending: list[Mapping[str, Any]], launch_id: int, deadline: int, polls: int,
             unmatched: Counter[str]) -> Refusal:
    keys = [row["key"] for row in pending]
    hint = ""
    mismatched = [row["full-name"] for row in pending if unmatched.get(row["full-name"])]
    if mismatched:
        hint = (f" {len(mismatched)} of them are listed by full name but under another test case id (is the "
                "ALLURE_ID label mapped to a deleted or foreign test case?)")
    return Refusal("verify.missing", f"{len(pending)} of the receipt's results did not appear in launch {launch_id} "
                   f"with a final status within {deadline} s ({polls} polls).{hint}", field="results",
                   expected="every receipt row once", actual=json.dumps(keys[:20]))
