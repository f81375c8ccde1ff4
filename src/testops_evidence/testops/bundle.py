"""What upload sends to TestOps: results as its upload DTOs, in chunks, and the launch-level evidence bundle.

**Why a bundle.** The evidence attachment of each result is what binds it to the selection. Sending it as
a per-result attachment would cost one request per result (10,000 results: 10,000 requests; the budget is
0.02 requests per result). Instead upload sends the results in chunks of 100 and *all* evidence documents
as one launch attachment (split into parts of at most :data:`BUNDLE_PART_LIMIT` bytes). Every result
carries its evidence digest as the parameter ``evidence sha256``, so a reader matches a result with its
entry in the bundle, and the bundle itself names the receipt digest it was built from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from testops_evidence.campaign.receipt import Receipt
from testops_evidence.safeio import canonical_json, parse_json_bytes

CHUNK_SIZE = 100  # results per upload request, as Allure 3 and allurectl send them
BUNDLE_SCHEMA = "testops-evidence/evidence-bundle/v1"
# Reverse proxies in front of self-hosted TestOps commonly cap bodies (nginx client_max_body_size); 8 MiB
# parts stay under the usual settings while keeping a 10,000-result campaign to a handful of requests.
BUNDLE_PART_LIMIT = 8 * 1024 * 1024
_HEAD_ROOM = 4096  # the part's own header (digests, numbers) besides its entries


def chunks(items: list[Any], size: int = CHUNK_SIZE) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# UploadTestStatus of allure-testops-service 25.4.1 (report-service.json, components/schemas/UploadTestStatus):
# the Java enum names, which a server binds exactly unless it was told to ignore case. Allure 3 sends the
# lower-case names to newer servers, which therefore accept both (docs/testops.md, "What is sent").
UPLOAD_STATUS = {"passed": "PASSED", "failed": "FAILED", "broken": "BROKEN", "skipped": "SKIPPED",
                 "unknown": "UNKNOWN"}
STEP_PATH_SEPARATOR = " > "  # a folded step's name: its parents' names, then its own


def upload_status(status: Any) -> str:
    """The ``UploadTestStatus`` of an Allure status; anything unknown is ``UNKNOWN`` (never a pass)."""
    return UPLOAD_STATUS.get(status, "UNKNOWN") if isinstance(status, str) else "UNKNOWN"


def _present(dto: dict[str, Any]) -> dict[str, Any]:
    # An unset field is left out: the description types every field (string, integer, ...) and none as null.
    return {key: value for key, value in dto.items() if value is not None}


def _step_dtos(steps: Iterable[Any], parents: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Allure steps as 25.4.1's ``UploadTestResultBodyStepDto`` rows, depth first and flat: the description's
    step DTOs have no ``steps``, so a server of that generation would drop whatever is nested. Each nested
    step (a trial's checks) becomes a step of its own named for its path (``trial 1 of 3 > tests pass``),
    right after its parent, so nothing is lost and the order shows the tree."""
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        start, stop = step.get("start"), step.get("stop")
        name = str(step.get("name"))
        dto: dict[str, Any] = {
            "type": "body",
            "body": STEP_PATH_SEPARATOR.join((*parents, name)),
            "status": upload_status(step.get("status")),
            "start": start,
            "stop": stop,
            "duration": stop - start if isinstance(start, int) and isinstance(stop, int) else None,
        }
        details = step.get("statusDetails")
        if isinstance(details, Mapping) and details.get("message"):
            dto["message"] = details["message"]
        yield _present(dto)
        yield from _step_dtos(step.get("steps") or (), (*parents, name))


def result_dto(result: Mapping[str, Any]) -> dict[str, Any]:
    """An Allure result file as TestOps' ``UploadTestResultDto`` (allure-testops.md §1.6), in the form
    allure-testops-service 25.4.1 describes, which newer servers take too: upper-case statuses, flat steps,
    no null fields.

    The per-result attachment is deliberately not listed: its content travels in the evidence bundle.
    """
    start, stop = result.get("start"), result.get("stop")
    labels = [dict(label) for label in result.get("labels", [])]
    by_name = {label.get("name"): label.get("value") for label in labels}
    dto: dict[str, Any] = {
        "uuid": result["uuid"],
        "historyId": result.get("historyId"),
        "testCaseId": result.get("testCaseId"),
        "name": result.get("name"),
        "fullName": result.get("fullName"),
        "description": result.get("description"),
        "status": upload_status(result.get("status")),
        "start": start,
        "stop": stop,
        "duration": stop - start if isinstance(start, int) and isinstance(stop, int) else None,
        "hostId": by_name.get("host"),
        "threadId": by_name.get("thread"),
        "labels": labels,
        "links": [dict(link) for link in result.get("links", [])],
        "parameters": [{"name": p.get("name"), "value": p.get("value"), "excluded": bool(p.get("excluded", False)),
                        "hidden": False, "masked": False} for p in result.get("parameters", [])],
        "steps": list(_step_dtos(result.get("steps") or ())),
    }
    details = result.get("statusDetails")
    if isinstance(details, Mapping) and details.get("message"):
        dto["message"] = details["message"]
    return _present(dto)


def bundle_parts(receipt: Receipt, evidence: Iterable[tuple[Mapping[str, Any], bytes]],
                 part_limit: int = BUNDLE_PART_LIMIT) -> list[bytes]:
    """The evidence bundle in parts of at most ``part_limit`` bytes (a single oversized entry gets its own).

    Each part is canonical JSON naming the campaign, the selection and receipt digests, its number and the
    part count; the first part also carries the whole receipt.
    """
    budget = part_limit - _HEAD_ROOM
    entries: list[list[bytes]] = [[]]
    sizes = [len(canonical_json(receipt.document))]  # the first part also carries the receipt
    for row, data in evidence:
        entry = canonical_json({"key": row["key"], "uuid": row["uuid"], "sha256": row["attachment-sha256"],
                                "document": parse_json_bytes(data, str(row["attachment-file"]),
                                                             "upload.results_invalid")})
        if entries[-1] and sizes[-1] + len(entry) > budget:
            entries.append([])
            sizes.append(0)
        entries[-1].append(entry)
        sizes[-1] += len(entry)
    parts = []
    for number, items in enumerate(entries, start=1):
        head: dict[str, Any] = {
            "schema": BUNDLE_SCHEMA,
            "campaign": receipt.document["campaign"],
            "selection-sha256": receipt.document["selection-sha256"],
            "receipt-sha256": receipt.sha256,
            "part": number,
            "parts": len(entries),
            "receipt": receipt.document if number == 1 else None,
        }
        # The entries are already canonical JSON; splice them in rather than re-encode 10,000 documents.
        prefix = canonical_json(head)[:-2]  # drop the closing brace and the newline
        body = b",".join(e.rstrip(b"\n") for e in items)
        parts.append(prefix + b',"evidence":[' + body + b"]}\n")
    return parts


def bundle_name(receipt: Receipt, number: int, total: int) -> str:
    context = receipt.document["context"]
    suffix = f"-part-{number}-of-{total}" if total > 1 else ""
    return f"testops-evidence-{receipt.document['campaign']}-run-{context['run-id']}{suffix}.json"
