"""The export receipt (``testops-evidence/export-receipt/v1``) and the checks built on it.

``export`` writes it once next to the results directory (``<results-dir>-receipt.json``): every selected
case with its result uuid, status and the SHA-256 of its result and attachment files, bound to the
selection digest. ``upload`` and ``verify`` trust nothing in the results directory that the receipt
does not name with the same digest (:func:`check_tree`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.contract import validate_document
from testops_evidence.errors import Refusal
from testops_evidence.evidence.tree import hash_file, list_dir
from testops_evidence.safeio import parse_json_bytes, read_safe, sha256_bytes

RECEIPT_SCHEMA = "testops-evidence/export-receipt/v1"
RECEIPT_LIMIT = 256 * 1024 * 1024
# A result file is a few kilobytes; the cap bounds what upload and verify read from an artifact.
RESULT_FILE_LIMIT = 16 * 1024 * 1024
STATUSES = ("passed", "failed", "broken")


def default_receipt_path(results_dir: str | os.PathLike[str]) -> Path:
    text = os.fspath(results_dir).rstrip("/") or "."
    return Path(text + "-receipt.json")


@dataclass(frozen=True)
class Receipt:
    document: Mapping[str, Any]
    sha256: str
    path: str
    raw: bytes = dataclasses.field(default=b"", repr=False)  # the exact bytes read (copied on publication)

    @property
    def results(self) -> list[Mapping[str, Any]]:
        rows: list[Mapping[str, Any]] = self.document["results"]
        return rows

    @property
    def counts(self) -> Mapping[str, int]:
        counts: Mapping[str, int] = self.document["counts"]
        return counts

    @property
    def all_passed(self) -> bool:
        return self.counts["passed"] == self.counts["total"]

    @property
    def testops(self) -> Mapping[str, Any] | None:
        block: Mapping[str, Any] | None = self.document["testops"]
        return block

    def expected_files(self) -> dict[str, str]:
        """Every file the results directory must hold, by name, with its SHA-256."""
        files = {str(f["name"]): str(f["sha256"]) for f in self.document["files"]}
        for row in self.results:
            files[str(row["result-file"])] = str(row["result-sha256"])
            files[str(row["attachment-file"])] = str(row["attachment-sha256"])
        return files


def _refuse(message: str, **details: Any) -> Refusal:
    return Refusal("export.receipt", message, **details)


def receipt_from_bytes(data: bytes, path: str) -> Receipt:
    document = parse_json_bytes(data, f"the export receipt {path}", "export.receipt")
    validate_document("export-receipt", document, "export.receipt", f"the export receipt {path}")
    rows = document["results"]
    for field in ("key", "uuid", "result-file", "attachment-file"):
        repeated = [value for value, n in Counter(row[field] for row in rows).items() if n > 1]
        if repeated:
            raise _refuse(f"the export receipt {path} repeats {field} {repeated[0]!r}", field=f"results/{field}",
                          expected="unique values", actual=repeated[0])
    for index, row in enumerate(rows):
        for field, suffix in (("result-file", "-result.json"), ("attachment-file", "-attachment.json")):
            if row[field] != f"{row['uuid']}{suffix}":
                raise _refuse(f"the export receipt {path} names an unexpected {field}", field=f"results/{index}/{field}",
                              expected=f"{row['uuid']}{suffix}", actual=row[field])
    counted = Counter(row["status"] for row in rows)
    counts = document["counts"]
    actual = {"total": len(rows), **{status: counted.get(status, 0) for status in STATUSES}}
    if dict(counts) != actual:
        raise _refuse(f"the export receipt {path} counts do not match its rows", field="counts", expected=actual,
                      actual=dict(counts))
    names = [f["name"] for f in document["files"]]
    listed = set(names) | {row["result-file"] for row in rows} | {row["attachment-file"] for row in rows}
    if len(listed) != len(names) + 2 * len(rows):
        raise _refuse(f"the export receipt {path} names a file twice", field="files", expected="unique names",
                      actual=sorted(names))
    return Receipt(document, sha256_bytes(data), path, data)


def load_receipt(path: str | os.PathLike[str]) -> Receipt:
    """Read a receipt that crossed jobs: no links, size-capped, schema-valid and self-consistent."""
    from testops_evidence.evidence.selection import read_document_bytes

    data = read_document_bytes(path, RECEIPT_LIMIT)
    return receipt_from_bytes(data, os.fspath(path))


def bind_receipt(receipt: Receipt, *, campaign: str, contract_sha256: str, live: Mapping[str, Any],
                 backend: str) -> None:
    """The receipt must be of this contract (``export.receipt``) and this run (``selection.context``: the
    receipt carries the selection's context); a rehearsal export never reaches TestOps
    (``guard.local_context``), and a files-backend export has no TestOps launch to publish into."""
    for field, expected, actual in (("campaign", campaign, receipt.document["campaign"]),
                                    ("contract-sha256", contract_sha256, receipt.document["contract-sha256"])):
        if expected != actual:
            raise _refuse(f"the export receipt was made for another contract ({field} differs)", field=field,
                          expected=expected, actual=actual)
    recorded = receipt.document["context"]
    for key, actual in live.items():
        if recorded.get(key) != actual:
            raise Refusal("selection.context", f"the export receipt was made for another run ({key} differs)",
                          field=key, expected=recorded.get(key), actual=actual)
    if recorded.get("local") and backend == "testops":
        raise Refusal("guard.local_context", "a local rehearsal export can never be published to TestOps",
                      field="backend", expected="files", actual=backend, hint="Use `backend: files` for a rehearsal.")
    if backend == "testops" and receipt.testops is None:
        raise _refuse("the export was made from a files-backend selection and has no TestOps job run or launch to "
                      "publish into", field="testops", expected="the selection's TestOps binding", actual=None,
                      hint="Select with the testops backend, or upload with `backend: files`.")


def check_tree(directory: str | os.PathLike[str], receipt: Receipt, code: str, *, hash_files: bool = True) -> int:
    """Refuse ``code`` unless ``directory`` holds exactly the receipt's files with the receipt's digests.

    Returns the number of files checked. Extra files are refused too: whatever is published must be
    what the export wrote, nothing more.
    """
    expected = receipt.expected_files()
    present = {}
    for entry in list_dir(directory):
        if entry.is_dir:
            raise Refusal(code, f"{directory} holds a directory {entry.name!r} the receipt does not list",
                          field=entry.name, expected="only the receipt's files", actual="a directory")
        present[entry.name] = entry
    extra = sorted(set(present) - set(expected))
    if extra:
        raise Refusal(code, f"{directory} holds {len(extra)} file(s) the receipt does not list", field=extra[0],
                      expected="only the receipt's files", actual=extra[:10])
    missing = sorted(set(expected) - set(present))
    if missing:
        raise Refusal(code, f"{directory} lacks {len(missing)} file(s) the receipt lists", field=missing[0],
                      expected="every receipt file", actual=f"{len(missing)} missing")
    if not hash_files:  # the caller reads each file once through verified_bytes (no check-then-read gap)
        return len(expected)
    for name in sorted(expected):
        digest, _size = hash_file(directory, name, limit=RESULT_FILE_LIMIT)
        if digest != expected[name]:
            raise Refusal(code, f"{name} in {directory} does not hash to its receipt digest", field=name,
                          expected=expected[name], actual=digest)
    return len(expected)


def verified_bytes(directory: str | os.PathLike[str], name: str, expected_sha256: str, code: str) -> bytes:
    """Read a file once and refuse ``code`` unless those very bytes hash to ``expected_sha256``."""
    data = read_safe(directory, name, limit=RESULT_FILE_LIMIT)
    digest = sha256_bytes(data)
    if digest != expected_sha256:
        raise Refusal(code, f"{name} in {directory} does not hash to its receipt digest", field=name,
                      expected=expected_sha256, actual=digest)
    return data
