"""What upload sends and keeps: TestOps upload DTOs, the launch-level evidence bundle, and the files-backend
publication (a verified copy of the results directory).

**Why a bundle.** The evidence attachment of each result is what binds it to the selection. Sending it as
a per-result attachment would cost one request per result (10,000 results: 10,000 requests; the budget is
0.02 requests per result). Instead upload sends the results in chunks of 100 and *all* evidence documents
as one launch attachment (split into parts of at most :data:`BUNDLE_PART_LIMIT` bytes). Every result
carries its evidence digest as the parameter ``evidence sha256``, so a reader matches a result with its
entry in the bundle, and the bundle itself names the receipt digest it was built from.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from testops_evidence.campaign.receipt import Receipt, verified_bytes
from testops_evidence.errors import Refusal
from testops_evidence.publication.tree import check_exact, hash_file, walk_files, write_new
from testops_evidence.safeio import canonical_json, fsync_dir, parse_json_bytes, read_safe, sha256_bytes

CHUNK_SIZE = 100  # results per upload request, as Allure 3 and allurectl send them
BUNDLE_SCHEMA = "testops-evidence/evidence-bundle/v1"
# Reverse proxies in front of self-hosted TestOps commonly cap bodies (nginx client_max_body_size); 8 MiB
# parts stay under the usual settings while keeping a 10,000-result campaign to a handful of requests.
BUNDLE_PART_LIMIT = 8 * 1024 * 1024
_HEAD_ROOM = 4096  # the part's own header (digests, numbers) besides its entries


def chunks(items: list[Any], size: int = CHUNK_SIZE) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _step_dto(step: Mapping[str, Any]) -> dict[str, Any]:
    start, stop = step.get("start"), step.get("stop")
    dto: dict[str, Any] = {
        "type": "body",
        "body": step.get("name"),
        "status": step.get("status"),
        "start": start,
        "stop": stop,
        "duration": stop - start if isinstance(start, int) and isinstance(stop, int) else None,
        "steps": [_step_dto(s) for s in step.get("steps", []) if isinstance(s, Mapping)],
    }
    details = step.get("statusDetails")
    if isinstance(details, Mapping) and details.get("message"):
        dto["message"] = details["message"]
    return dto


def result_dto(result: Mapping[str, Any]) -> dict[str, Any]:
    """An Allure result file as TestOps' ``UploadTestResultDto`` (allure-testops.md §1.6).

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
        "status": result.get("status"),
        "start": start,
        "stop": stop,
        "duration": stop - start if isinstance(start, int) and isinstance(stop, int) else None,
        "hostId": by_name.get("host"),
        "threadId": by_name.get("thread"),
        "labels": labels,
        "links": [dict(link) for link in result.get("links", [])],
        "parameters": [{"name": p.get("name"), "value": p.get("value"), "excluded": bool(p.get("excluded", False)),
                        "hidden": False, "masked": False} for p in result.get("parameters", [])],
        "steps": [_step_dto(s) for s in result.get("steps", []) if isinstance(s, Mapping)],
    }
    details = result.get("statusDetails")
    if isinstance(details, Mapping) and details.get("message"):
        dto["message"] = details["message"]
    return dto


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


RESULTS_NAME = "allure-results"
RECEIPT_NAME = "allure-results-receipt.json"
_TEMP_MARK = ".publish-"
# The publication's manifest: every other file of the publication directory with its SHA-256. Its own digest
# (upload's ``report-tree-sha256``) travels as a job output, so a job that downloads the publication (pages)
# can refuse any file added, missing or changed in the artifact, report and history included.
TREE_NAME = "testops-evidence-tree.json"
TREE_SCHEMA = "testops-evidence/publication-tree/v1"
TREE_LIMIT = 64 * 1024 * 1024
TREE_FILE_LIMIT = 256 * 1024 * 1024  # a report's largest file (its data bundle) of a 10,000-result campaign


def write_tree(directory: Path, known: Mapping[str, str] | None = None) -> str:
    """Write :data:`TREE_NAME` into ``directory``, listing every file below it; returns the manifest's digest.
    ``known``: digests of files this process wrote there from bytes it had checked (the results and the
    receipt), which are not read again."""
    files, _empty = walk_files(directory)
    known = known or {}
    listed = {name: known.get(name) or hash_file(directory, name, limit=TREE_FILE_LIMIT)[0] for name in files}
    data = canonical_json({"schema": TREE_SCHEMA, "files": listed})
    write_new(directory / TREE_NAME, data)
    return sha256_bytes(data)


def check_publication_tree(directory: Path, expected_sha256: str, code: str, *, unread: Iterable[str] = ()) -> int:
    """Refuse ``code`` unless ``directory`` holds its manifest with ``expected_sha256`` and exactly the files the
    manifest lists, each with its digest (an extra entry: ``io.extra_file``), besides the ``unread`` files
    the caller never reads or serves. Returns the number of files."""
    data = read_safe(directory, TREE_NAME, limit=TREE_LIMIT)
    digest = sha256_bytes(data)
    if digest != expected_sha256:
        raise Refusal(code, f"{TREE_NAME} in {directory} is not the manifest of the publication that was built",
                      field=TREE_NAME, expected=expected_sha256, actual=digest)
    document = parse_json_bytes(data, TREE_NAME, code)
    listed = document.get("files") if isinstance(document, dict) and document.get("schema") == TREE_SCHEMA else None
    if not (isinstance(listed, dict) and all(isinstance(v, str) for v in listed.values())) or TREE_NAME in listed:
        raise Refusal(code, f"{TREE_NAME} in {directory} is not a publication manifest", field=TREE_NAME,
                      expected=TREE_SCHEMA, actual="another document")
    return check_exact(directory, {**listed, TREE_NAME: expected_sha256}, code=code,
                       binding="the publication's manifest", limit=TREE_FILE_LIMIT, unread=unread)


def publish_files(source: Path, publication: Path, receipt: Receipt, receipt_bytes: bytes,
                  complete: Callable[[Path], None] | None = None) -> tuple[int, str]:
    """Write the publication directory ``publication`` whole, or not at all: ``allure-results/`` (the receipt's
    files from ``source``, each read once and checked against its receipt digest), the receipt beside it as
    ``allure-results-receipt.json``, then whatever ``complete`` adds (the report), and last the manifest of it
    all (:data:`TREE_NAME`). It is built in a temp dir beside ``publication`` and renamed into place; a failure
    removes the temp dir, and a temp dir that an interrupted earlier attempt left (a killed job) is removed
    first, so nothing blocks a re-run. Returns the number of result files and the manifest's digest."""
    parent = publication.parent
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    for leftover in parent.glob(f".{publication.name}{_TEMP_MARK}*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
    temp = parent / f".{publication.name}{_TEMP_MARK}{os.getpid()}-{os.urandom(4).hex()}"
    temp.mkdir(mode=0o700)
    try:
        results = temp / RESULTS_NAME
        results.mkdir(mode=0o700)
        expected = receipt.expected_files()
        for name in sorted(expected):
            data = verified_bytes(source, name, expected[name], "upload.results_invalid")
            write_new(results / name, data)
        fsync_dir(results)
        write_new(temp / RECEIPT_NAME, receipt_bytes)
        if complete is not None:
            complete(temp)
        # The results were written from bytes that hash to their receipt digests, the receipt is its bytes:
        # only what ``complete`` added (the report, its history) is hashed for the manifest.
        known = {f"{RESULTS_NAME}/{name}": digest for name, digest in expected.items()}
        tree = write_tree(temp, {**known, RECEIPT_NAME: sha256_bytes(receipt_bytes)})
        fsync_dir(temp)
        os.rename(temp, publication)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_dir(parent)
    return len(expected), tree
