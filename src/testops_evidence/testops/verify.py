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

from testops_evidence.campaign.receipt import Receipt
from testops_evidence.errors import Refusal
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
    # A case measured several times has one result per trial and its verdict result, under one test case and
    # full name: TestOps keeps the one that started last (the verdict) as the test's result and lists the
    # others as retries (``hidden``). Each group is matched result by result through the ids of this upload.
    groups: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for row in receipt.published_rows():
        groups.setdefault((row["testops-id"], row["full-name"]), []).append(row)
    by_name = {row["full-name"] for row in receipt.results}
    # The result ids TestOps gave this upload's chunks: a launch may also hold another upload's result of the
    # same test case (a re-run's upload into the same job run), which a match by case and name cannot tell.
    raw_ids = publication.get("result-ids")
    uploaded_ids: Mapping[str, Any] = raw_ids if isinstance(raw_ids, dict) else {}
    verified_detail: set[int] = set()
    started = monotonic()
    give_up_at = started + deadline
    wait = FIRST_WAIT
    polls = 0
    total = sum(len(rows) for rows in groups.values())
    # No single request may outlive the verification deadline (plus one request's grace).
    client.set_deadline(deadline + client.read_timeout)
    while True:
        polls += 1
        listed: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
        unmatched_names: Counter[str] = Counter()
        for item in api.list_results(client, launch_id, PAGE_SIZE):
            key = (item.get("testCaseId"), item.get("fullName"))
            if key in groups:
                listed.setdefault(key, []).append(item)
            elif item.get("fullName") in by_name:
                unmatched_names[str(item.get("fullName"))] += 1
        for key, items in sorted(listed.items(), key=lambda pair: str(pair[0])):
            rows = groups[key]
            if len(items) > len(rows):
                row = rows[-1]
                raise Refusal("verify.duplicate", f"{row['full-name']} (test case {row['testops-id']}) appears "
                              f"{len(items)} times in launch {launch_id}", field=row["key"],
                              expected="exactly once" if len(rows) == 1 else f"{len(rows)} results (its trials and "
                              "its verdict)", actual=len(items))
        pending = []
        for key, rows in groups.items():
            matched = _match(rows, listed.get(key, []), uploaded_ids, launch_id)
            for wanted, found in matched:
                status = found.get("status") if found is not None else None
                if found is None or status in (None, "unknown"):
                    pending.append(wanted)
                    continue
                if status != wanted["status"]:
                    what = (wanted["full-name"] if "trial" not in wanted
                            else f"trial {wanted['trial']} of {wanted['full-name']}")
                    raise Refusal("verify.mismatch", f"{what} is {status} in TestOps but {wanted['status']} in the "
                                  "receipt", field=f"{wanted['key']}/status", expected=wanted["status"], actual=status)
                if depth == "detail":
                    _check_detail(client, found, wanted, launch_id, job_run_id, project_id, verified_detail)
            if len(rows) > 1 and all(item is not None for _row, item in matched):
                _check_retries(matched, launch_id)
        log(f"poll {polls}: {total - len(pending)} of {total} results verified")
        if not pending:
            break
        now = monotonic()
        if now + wait > give_up_at:
            raise _missing(pending, launch_id, deadline, polls, unmatched_names)
        sleep(wait)
        wait = min(wait * 2, MAX_WAIT)
    return Verified(launch_id, polls, client.request_count, len(verified_detail), round(monotonic() - started, 1))


def _match(rows: list[Mapping[str, Any]], items: list[Mapping[str, Any]], uploaded_ids: Mapping[str, Any],
           launch_id: int) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """Each receipt row of one test with the listed result that is its upload (None: not listed yet).

    With the ids this upload was given, a listed result of the test that is none of them is another upload's
    result standing in for this one (``verify.mismatch``). Without them (a record from before ids were kept)
    a test with one row takes its one listed result."""
    wanted = {uploaded_ids.get(str(row["uuid"])): row for row in rows}
    if None in wanted:
        return [(rows[0], items[0] if items else None)] if len(rows) == 1 else [(row, None) for row in rows]
    by_id = {item.get("id"): item for item in items}
    for item in items:
        if item.get("id") not in wanted:
            row = rows[-1]
            ids = list(wanted)
            want: Any = ids[0] if len(ids) == 1 else ids
            raise Refusal("verify.mismatch", f"{row['full-name']} in launch {launch_id} is test result "
                          f"{item.get('id')}, not the result {want} this upload created: another upload's result "
                          "stands in for it", field=f"{row['key']}/id", expected=want, actual=item.get("id"))
    return [(row, by_id.get(uploaded_ids.get(str(row["uuid"])))) for row in rows]


def _check_retries(matched: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]], launch_id: int) -> None:
    """The verdict (the last row of its case) must be the result TestOps shows; every trial one of its retries.

    TestOps lists a test's earlier results in a launch with ``hidden: true``. A listing without the field
    says nothing about it, and is not refused."""
    for index, (row, item) in enumerate(matched):
        hidden = item.get("hidden") if item is not None else None
        if not isinstance(hidden, bool):
            continue
        verdict = index == len(matched) - 1
        if hidden == verdict:
            shown = "hidden as a retry" if verdict else "shown as the test's result"
            what = f"the verdict of {row['full-name']}" if verdict else f"trial {row['trial']} of {row['full-name']}"
            raise Refusal("verify.mismatch", f"{what} is {shown} in launch {launch_id}: TestOps would show a trial, "
                          "not the case's verdict", field=f"{row['key']}/hidden",
                          expected=not verdict, actual=hidden)


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
