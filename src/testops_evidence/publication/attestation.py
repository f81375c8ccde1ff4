"""The publication attestation: an in-toto Statement v1 that names exactly what was published, from what.

``verify`` writes it after the publication is proven (``<state-dir>/publication.intoto.json``, its predicate
alone beside it as ``publication.predicate.json`` for ``actions/attest``),
so an auditor can later prove, with nothing but the files, what this run published:

* ``subject``: the export receipt and every file of the published results directory, each by name and
  SHA-256 (the receipt's own digest binds the rows; the files' digests bind the results), and for a
  files-backend publication its manifest (``testops-evidence-tree.json``), which binds every other file of the
  published directory (the HTML report, its history);
* ``predicateType``: :data:`PREDICATE_TYPE`;
* ``predicate``: the campaign, the run (repository, id, attempt, URL, workflow), the evaluated commit, the
  contract, selection and receipt digests, the backend, the launch (TestOps) or the published directory
  (files), and the verified counts.

The statement follows the in-toto Attestation Framework's Statement layer
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md): ``_type``
``https://in-toto.io/Statement/v1``, ``subject`` a list of resource descriptors with a ``digest`` map,
``predicateType`` a URI. It is written unsigned; the campaign template can sign and store it with
``actions/attest`` (Sigstore, GitHub's attestation store). ``verify-attestation`` re-checks a statement
against the files (:func:`check_statement`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.publication.files import TREE_NAME, check_publication_tree
from testops_evidence.publication.tree import check_exact, list_dir, refuse_extra
from testops_evidence.safeio import parse_json_bytes, read_safe, sha256_bytes

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://testops-evidence.dev/attestation/publication/v1"
STATEMENT_NAME = "publication.intoto.json"  # in the state directory
PREDICATE_NAME = "publication.predicate.json"
STATEMENT_LIMIT = 64 * 1024 * 1024
RECEIPT_SUFFIX = "-receipt.json"


def subjects(receipt: Any, results_name: str, tree_sha256: str | None = None) -> list[dict[str, Any]]:
    """The receipt and every file it lists, named as published: ``<results>-receipt.json``, ``<results>/<file>``;
    with ``tree_sha256`` (a files-backend publication) also the publication's manifest (:data:`TREE_NAME`), which
    binds every other file of the published directory — its HTML report and history included."""
    found = [{"name": f"{results_name}-receipt.json", "digest": {"sha256": receipt.sha256}}]
    if tree_sha256:
        found.append({"name": TREE_NAME, "digest": {"sha256": tree_sha256}})
    for name, digest in sorted(receipt.expected_files().items()):
        found.append({"name": f"{results_name}/{name}", "digest": {"sha256": digest}})
    return found


def predicate(receipt: Any, publication: Mapping[str, Any], *, version: str) -> dict[str, Any]:
    document = receipt.document
    context = document["context"]
    counts = dict(receipt.counts)
    return {
        "campaign": document["campaign"],
        "run": {key: context.get(key) for key in ("repository", "run-id", "run-attempt", "run-url",
                                                  "workflow-path", "workflow-ref", "event", "local")},
        "commit": context.get("head-sha"),
        "contract-sha256": document["contract-sha256"],
        "selection-sha256": document["selection-sha256"],
        "receipt-sha256": receipt.sha256,
        "backend": publication.get("backend"),
        "launch": ({"id": publication.get("launch-id"), "url": publication.get("launch-url"),
                    "job-run-id": publication.get("job-run-id")} if publication.get("backend") == "testops"
                   else None),
        "published-to": publication.get("launch-url"),
        "verified": {"results": counts["total"], **{s: counts[s] for s in ("passed", "failed", "broken")},
                     "all-passed": counts["passed"] == counts["total"]},
        "verifier": {"name": "testops-evidence", "version": version},
    }


def statement(receipt: Any, publication: Mapping[str, Any], results_name: str, *, version: str) -> dict[str, Any]:
    tree = publication.get("tree-sha256") if publication.get("backend") == "files" else None
    return {"_type": STATEMENT_TYPE, "subject": subjects(receipt, results_name, tree if isinstance(tree, str) else None),
            "predicateType": PREDICATE_TYPE,
            "predicate": predicate(receipt, publication, version=version)}


def _refuse(message: str, **details: Any) -> Refusal:
    return Refusal("attestation.mismatch", message, **details)


def load_statement(path: str | os.PathLike[str]) -> dict[str, Any]:
    from testops_evidence.campaign.selection import read_document_bytes

    document = parse_json_bytes(read_document_bytes(path, STATEMENT_LIMIT), f"the attestation {os.fspath(path)}")
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        raise Refusal("attestation.invalid", f"{os.fspath(path)} is not an in-toto Statement v1", field="_type",
                      expected=STATEMENT_TYPE, actual=document.get("_type") if isinstance(document, dict) else None)
    if document.get("predicateType") != PREDICATE_TYPE:
        raise Refusal("attestation.invalid", f"{os.fspath(path)} does not attest a testops-evidence publication",
                      field="predicateType", expected=PREDICATE_TYPE, actual=document.get("predicateType"))
    listed = document.get("subject")
    if not isinstance(listed, list) or not listed or not isinstance(document.get("predicate"), dict):
        raise Refusal("attestation.invalid", f"{os.fspath(path)} has no subjects or no predicate", field="subject",
                      expected="a list of subjects and a predicate object", actual=None)
    for item in listed:
        digest = item.get("digest") if isinstance(item, dict) else None
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(digest, dict)
                and isinstance(digest.get("sha256"), str)):
            raise Refusal("attestation.invalid", f"{os.fspath(path)} has a subject without a name and a sha256",
                          field="subject", expected="{name, digest: {sha256}}", actual=str(item)[:120])
    return document


def check_statement(document: Mapping[str, Any], base: Path) -> int:
    """Every subject, read safely below ``base``, must hash to its digest, the predicate's receipt digest must
    be the receipt subject's (``attestation.mismatch``), and ``base`` must hold exactly what the statement binds
    (``io.extra_file``, naming the first other entry): an auditor opens the directory's HTML report and Allure
    Report reads every result file there, attested or not. A statement of a files-backend publication names its
    manifest (:data:`TREE_NAME`), which binds every file of the directory, report and history included; without
    one, the directory may hold the receipt and the results directory alone. The statement and its predicate may
    lie beside them (the campaign template adds them to the publication artifact after the manifest is written).
    Returns the number of files checked."""
    subjects_by_name = {str(item["name"]): str(item["digest"]["sha256"]) for item in document["subject"]}
    receipts = [name for name in subjects_by_name if name.endswith(RECEIPT_SUFFIX) and "/" not in name]
    if len(receipts) != 1:
        raise _refuse("the attestation names no single export receipt among its subjects", field="subject",
                      expected="one <results>-receipt.json", actual=receipts[:5])
    receipt = receipts[0]
    if document["predicate"].get("receipt-sha256") != subjects_by_name[receipt]:
        raise _refuse("the predicate's receipt digest is not the receipt subject's", field="predicate/receipt-sha256",
                      expected=subjects_by_name[receipt], actual=document["predicate"].get("receipt-sha256"))
    results = receipt[:-len(RECEIPT_SUFFIX)]
    outside = sorted(name for name in subjects_by_name
                     if name not in (receipt, TREE_NAME) and not name.startswith(f"{results}/"))
    if outside:
        raise _refuse(f"the attestation names {outside[0]}, which is neither the receipt, the publication's "
                      f"manifest nor in {results}/", field="subject",
                      expected=f"{receipt}, {TREE_NAME} and files of {results}/", actual=outside[:5])
    actual = sha256_bytes(read_safe(base, receipt, limit=STATEMENT_LIMIT))
    if actual != subjects_by_name[receipt]:
        raise _refuse(f"{receipt} does not hash to the digest the attestation names", field=receipt,
                      expected=subjects_by_name[receipt], actual=actual)
    files = {name[len(results) + 1:]: digest for name, digest in subjects_by_name.items()
             if name not in (receipt, TREE_NAME)}
    checked = 1 + check_exact(base / results, files, code="attestation.mismatch", binding="the attestation",
                              limit=STATEMENT_LIMIT)
    beside = (STATEMENT_NAME, PREDICATE_NAME)
    if TREE_NAME in subjects_by_name:
        # The manifest binds the whole directory (check_publication_tree: exactly its files, each by digest).
        check_publication_tree(base, subjects_by_name[TREE_NAME], "attestation.mismatch", unread=beside)
        return checked + 1
    top = [f"{entry.name}/" if entry.is_dir and entry.name != results else entry.name
           for entry in list_dir(base) if entry.name not in beside or entry.is_dir]
    refuse_extra(base, top, (receipt, results), binding="the attestation")
    return checked
