"""The files-backend publication: a verified copy of the results directory, and its tree manifest."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from testops_evidence.campaign.receipt import Receipt, verified_bytes
from testops_evidence.errors import Refusal
from testops_evidence.publication.tree import check_exact, hash_file, walk_files, write_new
from testops_evidence.safeio import canonical_json, fsync_dir, parse_json_bytes, read_safe, sha256_bytes

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
