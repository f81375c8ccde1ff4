"""The stream ledger: what the ``stream`` phase published, case by case, and its check against the export receipt.

``stream`` publishes each case as soon as every worker job that measured it has ended (``phases/stream.py``);
it keeps, beside what it published, one ledger (``stream.json``) rewritten atomically after every step: the
campaign, selection and run it belongs to, every case it published (once: a case in the ledger is never
published again) with the statuses and the evidence digests of its results, and the worker jobs that ended
without an artifact (their cases were never published). The ledger's digest leaves the stream job as an
output, so the job that checks it reads exactly these bytes.

:func:`compare` holds the ledger to the export receipt that the batch path computes from the same cells, after
the matrix: every published case is in the receipt once, with the receipt's status and the very same evidence
(an evidence document is a pure function of the admitted cell, so the same cell gives the same digest); a case
the receipt has but the stream never published must be one the receipt reports broken (its worker never
delivered); nothing else. A difference is a refusal, never an overwrite: what was published stays as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from testops_evidence.errors import Refusal

LEDGER_NAME = "stream.json"
LEDGER_SCHEMA = "testops-evidence/stream/v1"
LEDGER_LIMIT = 64 * 1024 * 1024
RESULTS_DIR = "allure-results"


def published_entry(row: Mapping[str, Any], workers: Sequence[str], files: Mapping[str, str]) -> dict[str, Any]:
    """A ledger entry from the case's receipt row (publication/projection.py): what a later check compares, and
    each file published for it (name -> SHA-256)."""
    trials = [{"trial": t["trial"], "status": t["status"], "evidence-sha256": t["attachment-sha256"]}
              for t in row.get("trials") or []]
    return {"key": row["key"], "status": row["status"], "reason": row["reason"],
            **({"code": row["code"]} if row.get("code") is not None else {}),
            "evidence-sha256": row["attachment-sha256"] if not trials else None,
            "trials": trials, "workers": sorted(workers),
            "files": dict(files)}


def published_files(published: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Every file the ledger says was published (name -> SHA-256); a name listed twice is ``stream.ledger``."""
    files: dict[str, str] = {}
    for entry in published:
        listed = entry.get("files")
        if not isinstance(listed, dict) or not all(isinstance(k, str) and isinstance(v, str) and "/" not in k
                                                   for k, v in listed.items()):
            raise Refusal("stream.ledger", f"the ledger's entry of case {entry['key']!r} does not list its files",
                          field=entry["key"], expected="{name: sha256}", actual=type(listed).__name__)
        for name, digest in listed.items():
            if name in files:
                raise Refusal("stream.ledger", f"the ledger lists the file {name} twice", field=name,
                              expected="each file once", actual=2)
            files[name] = digest
    return files


def _entry_of_receipt(row: Mapping[str, Any]) -> dict[str, Any]:
    trials = [{"trial": t["trial"], "status": t["status"], "evidence-sha256": t["attachment-sha256"]}
              for t in row.get("trials") or []]
    return {"status": row["status"], "evidence-sha256": row["attachment-sha256"] if not trials else None,
            "trials": trials}


def check_ledger(document: Any, *, campaign: str, selection_sha256: str) -> list[Mapping[str, Any]]:
    """The ledger's published entries, after its own shape and binding were checked (``stream.ledger``)."""
    if not isinstance(document, dict) or document.get("schema") != LEDGER_SCHEMA:
        raise Refusal("stream.ledger", "the stream ledger is not a stream ledger of this version", field="schema",
                      expected=LEDGER_SCHEMA, actual=document.get("schema") if isinstance(document, dict) else None)
    for name, want in (("campaign", campaign), ("selection-sha256", selection_sha256)):
        if document.get(name) != want:
            raise Refusal("stream.ledger", f"the stream ledger belongs to another {name}", field=name,
                          expected=want, actual=document.get(name))
    published = document.get("published")
    if not isinstance(published, list) or not all(isinstance(e, dict) and isinstance(e.get("key"), str)
                                                  for e in published):
        raise Refusal("stream.ledger", "the stream ledger's `published` is not a list of cases", field="published",
                      expected="a list of {key, status, ...}", actual=type(published).__name__)
    return published


def left_to_export(document: Mapping[str, Any]) -> set[str]:
    """The cases of the worker jobs still running when the stream stopped at its deadline (the ledger's
    ``running``): the stream never saw them end, so only the batch publication has them."""
    running = document.get("running") or []
    if not isinstance(running, list):
        raise Refusal("stream.ledger", "the stream ledger's `running` is not a list", field="running",
                      expected="a list of {job, cases}", actual=type(running).__name__)
    keys: set[str] = set()
    for item in running:
        cases = item.get("cases") if isinstance(item, dict) else None
        if not isinstance(cases, list) or not all(isinstance(key, str) for key in cases):
            raise Refusal("stream.ledger", "an entry of the stream ledger's `running` does not list its cases",
                          field="running", expected="{job, cases}", actual=str(item)[:100])
        keys.update(cases)
    return keys


def compare(published: Sequence[Mapping[str, Any]], receipt_rows: Sequence[Mapping[str, Any]],
            left: Collection[str] = ()) -> dict[str, int]:
    """Hold what the stream published to the export receipt (module docstring); the counts of what was checked.
    ``left``: cases the stream stopped before (its deadline), which it may not have published.

    Refuses ``stream.duplicate`` (a case published twice), ``stream.extra`` (published, not in the receipt),
    ``stream.mismatch`` (published with another status or other evidence than the receipt's: measured
    differently) and ``stream.missing`` (in the receipt, not broken, and never published)."""
    seen: dict[str, Mapping[str, Any]] = {}
    for entry in published:
        if entry["key"] in seen:
            raise Refusal("stream.duplicate", f"the stream published case {entry['key']!r} twice", field=entry["key"],
                          expected="each case once", actual=2)
        seen[entry["key"]] = entry
    rows = {row["key"]: row for row in receipt_rows}
    extra = sorted(set(seen) - set(rows))
    if extra:
        raise Refusal("stream.extra", f"the stream published {len(extra)} case(s) that the export receipt does not "
                      "have", field="published", expected="only the receipt's cases", actual=extra[:20])
    for key, entry in seen.items():
        want = _entry_of_receipt(rows[key])
        got = {"status": entry.get("status"), "evidence-sha256": entry.get("evidence-sha256"),
               "trials": list(entry.get("trials") or [])}
        if got != want:
            what = ("status" if got["status"] != want["status"] else "evidence")
            raise Refusal("stream.mismatch", f"case {key!r} was published by the stream with another {what} than "
                          "the export measured from the same run's cells; what was published is left as it is",
                          field=key, expected=want if what == "evidence" else want["status"],
                          actual=got if what == "evidence" else got["status"])
    missing = [key for key, row in rows.items() if key not in seen and key not in left and row["status"] != "broken"]
    if missing:
        raise Refusal("stream.missing", f"{len(missing)} case(s) of the export receipt that did not end broken were "
                      "never published by the stream", field="published", expected="every case that was measured",
                      actual=missing[:20])
    statuses = {s: sum(1 for e in seen.values() if e["status"] == s) for s in ("passed", "failed", "broken")}
    return {"published": len(seen), "receipt": len(rows), "unpublished": len(rows) - len(seen), **statuses}
