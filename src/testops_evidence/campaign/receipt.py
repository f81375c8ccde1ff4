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
from testops_evidence.publication.tree import check_exact
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

    def cost(self) -> Any:
        """The campaign's cost total (a :class:`usage.Figure`), unavailable when the receipt has none."""
        from testops_evidence.campaign.usage import COST, MISSING, Figure

        block = self.document.get("usage") or {}
        cost = (block.get("campaign") or {}).get(COST)
        if cost is None:
            return MISSING
        return Figure(cost["value"], cost["coverage"], cost["figures"], cost["known"])

    def cost_outputs(self) -> dict[str, Any]:
        """``cost-nanodollars`` (empty when unavailable) and ``cost-coverage`` from the receipt's totals."""
        cost = self.cost()
        return {"cost-nanodollars": "" if cost.value is None else cost.value, "cost-coverage": cost.coverage}

    def comparison_outputs(self) -> dict[str, Any]:
        """``comparison``, ``regressions`` and ``comparison-difference`` as export output them, from the receipt."""
        block = self.document.get("comparison")
        if not isinstance(block, Mapping):
            return {"comparison": "", "regressions": [], "comparison-difference": ""}
        return {"comparison": block["state"], "regressions": list(block["regressions"]),
                "comparison-difference": difference_output(block)}

    def statistics_outputs(self) -> dict[str, str]:
        """``pass-rate`` and ``pass-rate-ci`` as export output them (empty from a receipt without statistics)."""
        from testops_evidence.campaign.stats import pass_rate_outputs

        block = self.document.get("statistics")
        return pass_rate_outputs(block if isinstance(block, Mapping) else {})

    def published_rows(self) -> list[Mapping[str, Any]]:
        """Every published result's row: each case's row, and before it the rows of its trials (a case
        measured several times publishes one result per trial and its verdict result)."""
        rows: list[Mapping[str, Any]] = []
        for row in self.results:
            rows += trial_rows(row)
            rows.append(row)
        return rows

    def expected_files(self) -> dict[str, str]:
        """Every file the results directory must hold, by name, with its SHA-256."""
        files = {str(f["name"]): str(f["sha256"]) for f in self.document["files"]}
        for row in self.published_rows():
            files[str(row["result-file"])] = str(row["result-sha256"])
            files[str(row["attachment-file"])] = str(row["attachment-sha256"])
        return files


CASE_FIELDS = ("key", "testops-id", "full-name", "title")


def trial_rows(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trial rows of a case row (none for a case measured once), each with its case's key, TestOps id,
    full name and title, so every published row names the test it is a result of."""
    trials: list[Mapping[str, Any]] = row.get("trials") or []
    return [{**trial, **{field: row[field] for field in CASE_FIELDS}} for trial in trials]


def _refuse(message: str, **details: Any) -> Refusal:
    return Refusal("export.receipt", message, **details)


def receipt_from_bytes(data: bytes, path: str) -> Receipt:
    """The receipt in ``data``, checked as upload and verify check it (export checks its own before it writes
    them)."""
    document = parse_json_bytes(data, f"the export receipt {path}", "export.receipt")
    validate_document("export-receipt", document, "export.receipt", f"the export receipt {path}")
    rows = document["results"]
    repeated_key = [value for value, n in Counter(row["key"] for row in rows).items() if n > 1]
    if repeated_key:
        raise _refuse(f"the export receipt {path} repeats key {repeated_key[0]!r}", field="results/key",
                      expected="unique values", actual=repeated_key[0])
    published = [r for row in rows for r in (*trial_rows(row), row)]
    for field in ("uuid", "result-file", "attachment-file"):
        repeated = [value for value, n in Counter(row[field] for row in published).items() if n > 1]
        if repeated:
            raise _refuse(f"the export receipt {path} repeats {field} {repeated[0]!r}", field=f"results/{field}",
                          expected="unique values", actual=repeated[0])
    for index, row in enumerate(published):
        for field, suffix in (("result-file", "-result.json"), ("attachment-file", "-attachment.json")):
            if row[field] != f"{row['uuid']}{suffix}":
                raise _refuse(f"the export receipt {path} names an unexpected {field}", field=f"results/{index}/{field}",
                              expected=f"{row['uuid']}{suffix}", actual=row[field])
    for row in rows:
        _check_trials(row, path)
    counted = Counter(row["status"] for row in rows)
    counts = document["counts"]
    actual = {"total": len(rows), **{status: counted.get(status, 0) for status in STATUSES}}
    if dict(counts) != actual:
        raise _refuse(f"the export receipt {path} counts do not match its rows", field="counts", expected=actual,
                      actual=dict(counts))
    if "trial-counts" in document:
        statuses = Counter(t["status"] for row in rows for t in (trial_rows(row) or [row]))
        want = {"total": sum(statuses.values()), **{status: statuses.get(status, 0) for status in STATUSES}}
        if dict(document["trial-counts"]) != want:
            raise _refuse(f"the export receipt {path} trial counts do not match its trial rows", field="trial-counts",
                          expected=want, actual=dict(document["trial-counts"]))
    names = [f["name"] for f in document["files"]]
    listed = set(names) | {row["result-file"] for row in published} | {row["attachment-file"] for row in published}
    if len(listed) != len(names) + 2 * len(published):
        raise _refuse(f"the export receipt {path} names a file twice", field="files", expected="unique names",
                      actual=sorted(names))
    return Receipt(document, sha256_bytes(data), path, data)


def _check_trials(row: Mapping[str, Any], path: str) -> None:
    """A case measured several times: its policy, one row per trial in ordinal order, and its status is what
    the policy makes of its trials' statuses (the receipt cannot say passed where its trials do not)."""
    trials = trial_rows(row)
    policy = row.get("policy")
    if not trials and policy is None and "pass-rate" not in row:
        return
    from testops_evidence.campaign.trials import policy_status  # here: most rows are of cases measured once
    if not trials or policy is None or "pass-rate" not in row:
        raise _refuse(f"the export receipt {path} row {row['key']!r} has trials without a policy, or a policy "
                      "without trials", field=f"{row['key']}/trials", expected="policy, pass-rate and trials together",
                      actual=sorted(k for k in ("policy", "pass-rate", "trials") if k in row))
    ordinals = [t["trial"] for t in trials]
    if ordinals != list(range(1, policy["count"] + 1)):
        raise _refuse(f"the export receipt {path} row {row['key']!r} does not list trials 1..{policy['count']}",
                      field=f"{row['key']}/trials", expected=list(range(1, policy["count"] + 1)), actual=ordinals)
    # The pass rate is what the trials say: a baseline's figures feed the comparison and the trend (stats.py),
    # and counts no trial backs would make any change look like noise, or noise like a regression.
    rate = row["pass-rate"]
    counted = Counter(t["status"] for t in trials)
    claimed = {status: rate[status] for status in ("passed", "failed", "broken")}
    if claimed != {status: counted.get(status, 0) for status in claimed}:
        raise _refuse(f"the export receipt {path} row {row['key']!r} gives a pass rate its trials do not make",
                      field=f"{row['key']}/pass-rate", expected={s: counted.get(s, 0) for s in claimed}, actual=claimed)
    verdict = policy["verdict"]
    required = {"all": policy["count"], "any": 1}.get(verdict) if isinstance(verdict, str) else verdict["at-least"]
    assert required is not None
    status = policy_status(required, [t["status"] for t in trials], [t.get("code") for t in trials])
    if row["status"] != status:
        raise _refuse(f"the export receipt {path} says {row['key']!r} {row['status']}, but its trials make it "
                      f"{status} under its policy", field=f"{row['key']}/status", expected=status, actual=row["status"])


def load_receipt(path: str | os.PathLike[str]) -> Receipt:
    """Read a receipt that crossed jobs: no links, size-capped, schema-valid and self-consistent."""
    from testops_evidence.campaign.selection import read_document_bytes

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

    Returns the number of files checked. Extra files, empty directories too, are refused (``io.extra_file``):
    whatever is published must be what the export wrote, nothing more.
    """
    return check_exact(directory, receipt.expected_files(), code=code, binding="the receipt",
                       limit=RESULT_FILE_LIMIT, hash_files=hash_files)


def verified_bytes(directory: str | os.PathLike[str], name: str, expected_sha256: str, code: str) -> bytes:
    """Read a file once and refuse ``code`` unless those very bytes hash to ``expected_sha256``."""
    data = read_safe(directory, name, limit=RESULT_FILE_LIMIT)
    digest = sha256_bytes(data)
    if digest != expected_sha256:
        raise Refusal(code, f"{name} in {directory} does not hash to its receipt digest", field=name,
                      expected=expected_sha256, actual=digest)
    return data


# --- the receipt bound across jobs ---------------------------------------------------------------------------


def load_bound_receipt(path: str | os.PathLike[str], expected_sha256: str) -> Receipt:
    """The receipt, whose exact bytes must hash to the ``receipt-sha256`` export output (``export.receipt_digest``):
    that digest travelled as a job output, outside the artifact that carried the file, so a receipt with rows
    dropped or a status changed — even with every file digest recomputed — is refused before it is parsed."""
    from testops_evidence.campaign.selection import check_sha256, read_document_bytes

    expected = check_sha256(expected_sha256, "receipt-sha256")
    data = read_document_bytes(path, RECEIPT_LIMIT)
    actual = sha256_bytes(data)
    if actual != expected:
        raise Refusal("export.receipt_digest", f"the export receipt {os.fspath(path)} does not hash to the "
                      "receipt-sha256 that export output: it was changed after export, or it is another export's",
                      field="receipt-sha256", expected=expected, actual=actual)
    return receipt_from_bytes(data, os.fspath(path))


def bind_to_selection(receipt: Receipt, selection: Any) -> None:
    """The receipt must be the export of ``selection`` (a digest-checked :class:`Selection`): same digest, same
    campaign, contract, backend, run, TestOps binding and profile, and one row per selected case, in the
    selection's order, naming the same case (``export.receipt``)."""
    document = receipt.document
    expected_fields = (("selection-sha256", selection.digest), ("campaign", selection.document["campaign"]),
                       ("contract-sha256", selection.document["contract-sha256"]),
                       ("backend", selection.backend), ("testops", selection.document["testops"]),
                       ("profile", selection.document["profile"]))
    for field, expected in expected_fields:
        if document[field] != expected:
            raise _refuse(f"the export receipt was not made from this selection ({field} differs)", field=field,
                          expected=expected, actual=document[field])
    for key, value in document["context"].items():
        if selection.document["context"].get(key) != value:
            raise _refuse(f"the export receipt names another run context than the selection ({key} differs)",
                          field=f"context/{key}", expected=selection.document["context"].get(key), actual=value)
    cases = selection.document["cases"]
    keys = [row["key"] for row in receipt.results]
    if keys != [case["key"] for case in cases]:
        missing = [case["key"] for case in cases if case["key"] not in set(keys)]
        extra = [key for key in keys if key not in {case["key"] for case in cases}]
        raise _refuse(f"the export receipt's rows are not the selection's cases in order ({len(keys)} rows, "
                      f"{len(cases)} selected; missing {missing[:5]}, not selected {extra[:5]})", field="results",
                      expected=f"{len(cases)} rows in selection order", actual=f"{len(keys)} rows")
    for index, (row, case) in enumerate(zip(receipt.results, cases, strict=True)):
        for field in ("testops-id", "full-name", "title"):
            if row[field] != case[field]:
                raise _refuse(f"the export receipt's row of {case['key']!r} names another {field} than the "
                              "selection", field=f"results/{index}/{field}", expected=case[field], actual=row[field])


@dataclass(frozen=True)
class AdmittedReceipt:
    """A receipt bound across jobs: its digest, its selection and the run (what upload and verify start from)."""

    receipt: Receipt
    selection: Any  # campaign.selection.Selection
    receipt_digest_given: bool
    selection_digest_given: bool


def admit_receipt(receipt_path: str | os.PathLike[str], receipt_sha256: str | None,
                  selection_path: str | os.PathLike[str], selection_sha256: str | None, *, in_actions: bool,
                  contract: Any, live: Any, backend: str) -> AdmittedReceipt:
    """Everything upload and verify check before they trust a receipt, before anything is sent:

    1. the receipt's exact bytes against ``receipt-sha256`` (``export.receipt_digest``) and the selection's
       against ``selection-sha256`` (``selection.digest``) — both required inside Actions, where they
       travelled as job outputs;
    2. the selection against the contract and this job's run (``selection.context``);
    3. the receipt against the selection: same digest, campaign, contract, run, binding and profile, one row
       per selected case in order (``export.receipt``), and against this run and backend (:func:`bind_receipt`).
    """
    from testops_evidence.campaign.selection import load_selection, read_travelled, validate_against

    receipt_digest, receipt_given = read_travelled(receipt_path, receipt_sha256, in_actions=in_actions,
                                                   name="receipt-sha256", limit=RECEIPT_LIMIT)
    receipt = load_bound_receipt(receipt_path, receipt_digest)
    selection_digest, selection_given = read_travelled(selection_path, selection_sha256, in_actions=in_actions)
    selection = load_selection(selection_path, selection_digest)
    validate_against(selection, contract, live)
    bind_to_selection(receipt, selection)
    bind_receipt(receipt, campaign=contract.campaign, contract_sha256=contract.digest,
                 live=live.binding_fields(), backend=backend)
    return AdmittedReceipt(receipt, selection, receipt_given, selection_given)


def difference_output(block: Mapping[str, Any] | None) -> str:
    """The ``comparison-difference`` output: the paired difference as one line of JSON, empty when none."""
    import json

    difference = block.get("difference") if block else None
    return json.dumps(difference, separators=(",", ":"), sort_keys=True) if difference else ""
