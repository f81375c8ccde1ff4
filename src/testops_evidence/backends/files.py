"""The ``files`` backend: cases from the contract or a standing ``testplan.json``; the publication is a
verified copy of the results directory in the state directory, and verification re-reads that copy.

* select — the whole contract, or the standing plan's cases (each matching a contract case on id and
  selector); a TestOps job run given to this backend is refused (its evidence would never reach TestOps).
* publish — a copy into ``<state-dir>/published/<results-dir name>`` (plus the receipt beside it), every
  file checked against its receipt digest, built in a temp dir and renamed into place.
* verify — every receipt file present with its digest, every result once with the receipt's uuid, name
  and status, nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from testops_evidence import summary
from testops_evidence.backends import Outcome, Published, SelectInputs, Services, VerifyOptions
from testops_evidence.errors import Refusal
from testops_evidence.evidence.publication import publish_files
from testops_evidence.evidence.receipt import RESULT_FILE_LIMIT, Receipt
from testops_evidence.evidence.testplan import match_rows, read_standing_plan
from testops_evidence.evidence.tree import hash_file, list_dir
from testops_evidence.safeio import parse_json_bytes, read_safe


class Backend:
    name: ClassVar[str] = "files"
    remote: ClassVar[bool] = False

    def __init__(self, services: Services) -> None:
        self.services = services

    # --- select ---------------------------------------------------------------------------------------
    def select(self, inputs: SelectInputs) -> Outcome:
        if (inputs.job_run_id or inputs.job_run_id_env) is not None or inputs.job_run_env is not None:
            # Evidence of a TestOps-launched run would never reach TestOps: say so instead of ignoring it.
            raise Refusal("selection.mode", "a TestOps job run was given but the backend is files",
                          field="backend", expected="testops (or no job run id / job-run-env)", actual="files")
        contract = inputs.contract
        if inputs.standing_plan is not None:
            rows = read_standing_plan(inputs.standing_plan)
            cases = match_rows(rows, contract, where="standing-plan")
            return Outcome(cases, "standing-plan", f"the standing plan {summary.code(inputs.standing_plan)}",
                           f"the standing plan {summary.code(inputs.standing_plan)} lists {len(cases)} of the contract's "
                           f"{len(contract.cases)} cases, each matching a contract case on id and selector",
                           planned=len(rows))
        why = ("no standing plan was given, so `cases` chooses from the whole contract" if inputs.narrowed else
               "no standing plan and no `cases` were given, so the whole contract is selected")
        return Outcome(list(contract.cases), "contract", "the contract", why, planned=len(contract.cases))

    # --- publish --------------------------------------------------------------------------------------
    def publish(self, receipt: Receipt, results_dir: Path) -> Published:
        destination = self.services.state.ensure() / "published" / (results_dir.resolve().name or "allure-results")
        if destination.exists() or destination.is_symlink():
            raise Refusal("io.exists", f"{destination} exists but no publication receipt records it",
                          field="destination", expected="absent", actual=str(destination))
        copied = publish_files(results_dir, destination, receipt, receipt.raw)
        record = {"backend": self.name, "destination": str(destination), "receipt-sha256": receipt.sha256,
                  "selection-sha256": receipt.document["selection-sha256"], "uploaded-count": len(receipt.results),
                  "files": copied, "counts": dict(receipt.counts), "launch-id": None,
                  "launch-url": destination.as_uri()}
        return Published(record, f"✅ Published {len(receipt.results)} results ({copied} files, every digest "
                                 f"checked) to {summary.code(destination)}.")

    @staticmethod
    def publication_rows(publication: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        return [("published to", summary.code(publication["destination"]))]

    # --- verify ---------------------------------------------------------------------------------------
    def verify(self, receipt: Receipt, publication: Mapping[str, Any],
               options: VerifyOptions) -> dict[str, Any]:  # noqa: ARG002 - a local copy needs no depth or deadline
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
                document = parse_json_bytes(read_safe(destination, name, limit=RESULT_FILE_LIMIT), name,
                                            "verify.mismatch")
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
                raise Refusal("verify.mismatch", f"the published {name} does not hash to its receipt digest",
                              field=name, expected=digest, actual=actual)
        for row in receipt.results:
            document = parse_json_bytes(read_safe(destination, row["result-file"], limit=RESULT_FILE_LIMIT),
                                        row["result-file"], "verify.mismatch")
            for key, want, got in (("uuid", row["uuid"], document.get("uuid")),
                                   ("fullName", row["full-name"], document.get("fullName")),
                                   ("status", row["status"], document.get("status"))):
                if want != got:
                    raise Refusal("verify.mismatch", f"the published result of {row['key']} has another {key}",
                                  field=f"{row['key']}/{key}", expected=want, actual=got)
        return {"published to": summary.code(destination), "files checked": len(expected)}
