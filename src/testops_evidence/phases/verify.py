"""``verify`` (token phase): prove that the publication landed, row by row, as the receipt says.

* **files backend** — re-read the published directory recorded by ``upload`` (``upload.json`` in the state
  dir): every receipt file present with its digest, every result once with the receipt's uuid, name and
  status, nothing else.
* **testops backend** — page through ``GET /testresult?launchId=&page=&size=1000`` until every receipt row
  appears exactly once (matched by test case id *and* full name) with the expected status; results that
  are not visible yet are waited for with exponential backoff up to ``deadline-seconds``. With
  ``verify-depth: detail`` each matched result's detail is fetched once (cached by id) to check its job
  run, project and launch.

``verify.missing`` (exit 4: the publication did not become visible), ``verify.duplicate`` and
``verify.mismatch`` (exit 3). The outputs ``verified-count`` and ``all-passed`` are separate from the exit
code: exit 1 means "published and verified, but not every case passed", never "publishing broke".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.context import job_context
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal
from testops_evidence.evidence.receipt import (
    RESULT_FILE_LIMIT,
    Receipt,
    bind_receipt,
    default_receipt_path,
    load_receipt,
)
from testops_evidence.evidence.tree import hash_file, list_dir
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import parse_json_bytes, read_safe

PUBLICATION = "upload.json"
PAGE_SIZE = 1000
FIRST_WAIT = 2.0
MAX_WAIT = 30.0
DEPTHS = ("page", "detail")


def run(ctx: PhaseContext) -> PhaseResult:
    results_dir = ctx.settings.path("results-dir") or Path("allure-results")
    receipt = load_receipt(ctx.settings.path("receipt-path") or default_receipt_path(results_dir))
    _bind(ctx, receipt)
    depth = ctx.settings.string("verify-depth") or "page"
    if depth not in DEPTHS:
        raise Refusal("input.verify-depth", "verify-depth must be page or detail", field="verify-depth",
                      expected="page | detail", actual=depth)
    deadline = ctx.settings.integer("deadline-seconds")
    deadline = 600 if deadline is None else deadline
    publication = _publication(ctx, receipt)
    backend = ctx.backend()
    with ctx.runtime.group(f"verify: {len(receipt.results)} results on the {backend} backend"):
        if backend == "files":
            facts = _verify_files(receipt, publication)
        else:
            facts = _verify_testops(ctx, receipt, publication, depth, deadline)
    verified = len(receipt.results)
    all_passed = receipt.all_passed
    ctx.state.write_receipt("verify.json", {"backend": backend, "receipt-sha256": receipt.sha256,
                                            "verified-count": verified, "all-passed": all_passed, **facts})
    counts = receipt.counts
    statuses = ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "broken") if counts[s])
    headline = (f"✅ Verified {verified} published results ({statuses}); every case passed." if all_passed else
                f"❌ Verified {verified} published results ({statuses}): the publication is complete, but not every "
                "case passed.")
    rows = [("backend", backend), ("verified", verified), ("export receipt sha256", summary.code(receipt.sha256)),
            *((name, value) for name, value in facts.items() if not isinstance(value, dict | list))]
    body: str = summary.table(("", ""), rows)
    not_passed = [r for r in receipt.results if r["status"] != "passed"]
    if not_passed:
        body += "\n### Cases that did not pass (published as such)\n\n" + summary.table(
            ("", "case", "status", "reason"),
            [(summary.status_icon(r["status"]), summary.code(r["key"]), r["status"], r["reason"]) for r in not_passed])
    return PhaseResult(headline=headline, outputs={"verified-count": verified, "all-passed": all_passed},
                       summary=body, exit_code=EXIT_OK if all_passed else EXIT_CASES_FAILED)


def _bind(ctx: PhaseContext, receipt: Receipt) -> None:
    contract = ctx.contract()
    live = job_context(ctx.env, contract.trust.repository, contract.trust.workflows)
    bind_receipt(receipt, campaign=contract.campaign, contract_sha256=contract.digest, live=live.binding_fields(),
                 backend=ctx.backend())


def _publication(ctx: PhaseContext, receipt: Receipt) -> dict[str, Any]:
    if not ctx.state.has(PUBLICATION):
        raise Refusal("verify.missing", "nothing was published from this state directory: there is no upload "
                      "receipt (upload.json)", field="upload.json", expected="the receipt upload writes",
                      actual="absent", hint="Run `mode: upload` first, with the same state-dir.")
    publication = ctx.state.read_receipt(PUBLICATION)
    if not isinstance(publication, dict) or publication.get("receipt-sha256") != receipt.sha256:
        raise Refusal("verify.mismatch", "the publication in this state directory is of another export",
                      field="receipt-sha256", expected=receipt.sha256,
                      actual=publication.get("receipt-sha256") if isinstance(publication, dict) else None)
    return publication


# --- files ---------------------------------------------------------------------------------------------


def _verify_files(receipt: Receipt, publication: Mapping[str, Any]) -> dict[str, Any]:
    destination = Path(str(publication["destination"]))
    expected = receipt.expected_files()
    present = {entry.name for entry in list_dir(destination) if not entry.is_dir}
    missing = sorted(set(expected) - present)
    if missing:
        raise Refusal("verify.missing", f"{len(missing)} published file(s) are missing from {destination}",
                      field=missing[0], expected="every receipt file", actual=f"{len(missing)} missing")
    extra = sorted(present - set(expected))
    names: Counter[str] = Counter()
    for name in sorted(present):
        if name.endswith("-result.json"):
            document = parse_json_bytes(read_safe(destination, name, limit=RESULT_FILE_LIMIT), name)
            names[str(document.get("fullName")) if isinstance(document, dict) else name] += 1
    duplicated = sorted(n for n, count in names.items() if count > 1)
    if duplicated:
        raise Refusal("verify.duplicate", f"{duplicated[0]} is published {names[duplicated[0]]} times",
                      field=duplicated[0], expected="once", actual=names[duplicated[0]])
    if extra:
        raise Refusal("verify.mismatch", f"{destination} holds {len(extra)} file(s) the receipt does not list",
                      field=extra[0], expected="only the receipt's files", actual=extra[:10])
    for name, digest in sorted(expected.items()):
        actual, _size = hash_file(destination, name, limit=RESULT_FILE_LIMIT)
        if actual != digest:
            raise Refusal("verify.mismatch", f"the published {name} does not hash to its receipt digest", field=name,
                          expected=digest, actual=actual)
    for row in receipt.results:
        document = parse_json_bytes(read_safe(destination, row["result-file"], limit=RESULT_FILE_LIMIT),
                                    row["result-file"])
        for field, want, got in (("uuid", row["uuid"], document.get("uuid")),
                                 ("fullName", row["full-name"], document.get("fullName")),
                                 ("status", row["status"], document.get("status"))):
            if want != got:
                raise Refusal("verify.mismatch", f"the published result of {row['key']} has another {field}",
                              field=f"{row['key']}/{field}", expected=want, actual=got)
    return {"published to": summary.code(destination), "files checked": len(expected)}


# --- TestOps -------------------------------------------------------------------------------------------


def _verify_testops(ctx: PhaseContext, receipt: Receipt, publication: Mapping[str, Any], depth: str,
                    deadline: int) -> dict[str, Any]:
    from testops_evidence.testops.client import TestOpsClient, expect_object

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
    started = ctx.monotonic()
    give_up_at = started + deadline
    wait = FIRST_WAIT
    polls = 0
    with TestOpsClient.from_context(ctx) as client:
        # No single request may outlive the verification deadline (plus one request's grace).
        client.set_deadline(deadline + client.read_timeout)
        while True:
            polls += 1
            seen: Counter[tuple[Any, Any]] = Counter()
            found: dict[tuple[Any, Any], Mapping[str, Any]] = {}
            unmatched_names: Counter[str] = Counter()
            for item in client.pages("/testresult", {"launchId": launch_id}, page_size=PAGE_SIZE):
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
                    _check_detail(client, expect_object, listed, row, launch_id, job_run_id, project_id,
                                  verified_detail)
            ctx.runtime.log(f"poll {polls}: {len(expected) - len(pending)} of {len(expected)} results verified")
            if not pending:
                break
            now = ctx.monotonic()
            if now + wait > give_up_at:
                raise _missing(pending, launch_id, deadline, polls, unmatched_names)
            ctx.sleep(wait)
            wait = min(wait * 2, MAX_WAIT)
        requests = client.request_count
    return {"launch": summary.link(f"#{launch_id}", str(publication.get("launch-url") or "")) if publication.get(
        "launch-url") else f"#{launch_id}", "polls": polls, "requests": requests, "depth": depth,
        "details fetched": len(verified_detail), "waited (s)": round(ctx.monotonic() - started, 1)}


def _check_detail(client: Any, expect_object: Any, item: Mapping[str, Any], row: Mapping[str, Any], launch_id: int,
                  job_run_id: int, project_id: int, cache: set[int]) -> None:
    """One detail request per result id, ever: job run, project and launch must be the selection's."""
    result_id = item.get("id")
    if not isinstance(result_id, int) or result_id in cache:
        return
    detail = expect_object(client.get(f"/testresult/{result_id}"), f"test result {result_id}")
    raw_run = detail.get("jobRun")
    job_run: Mapping[str, Any] = raw_run if isinstance(raw_run, dict) else {}
    for field, want, got in (("jobRun.id", job_run_id, job_run.get("id")),
                             ("projectId", project_id, detail.get("projectId")),
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
