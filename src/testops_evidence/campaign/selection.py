"""The selection document (``testops-evidence/selection/v1``): which contract cases this run evaluates.

``select`` builds it, writes its canonical bytes once (O_EXCL, 0600) and outputs their SHA-256 as
``selection-sha256``. Every later job (``verify-selection``, ``export``) reads the file through
:func:`load_selection`, which re-hashes the **exact bytes** against that digest (the digest travelled as
a job output, outside the artifact that carried the file) and validates the schema, then calls
:func:`validate_against` to bind it to the contract and to the job's own live run context.

Public API (stable; other phases import it):

* :func:`build_selection` → ``dict`` (the document, schema-valid)
* :func:`selection_bytes` → canonical bytes; :func:`write_selection` → path
* :func:`load_selection` → :class:`Selection`; :func:`validate_against` → ``None`` or a refusal
* :func:`worker_context` → the live context of a token-less job (env in Actions, rehearsal outside)
* :func:`check_sha256` validates a digest input
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence import __version__
from testops_evidence.campaign.compiled import compiled_bytes
from testops_evidence.campaign.gate import (
    read_document_bytes as read_document_bytes,  # re-exported: phases import it here
)
from testops_evidence.context import RunContext, check_same_run, job_context
from testops_evidence.contract import Case, Contract, validate_document
from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, canonical_text, parse_json_bytes, sha256_bytes, write_once

SCHEMA_ID = "testops-evidence/selection/v1"
# A 10,000-case selection is about 3 MB; the cap bounds what a worker reads from an artifact.
SELECTION_LIMIT = 64 * 1024 * 1024
SOURCES = ("job-run", "standing-plan", "contract", "cases", "rerun")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class TestOpsBinding:
    """The TestOps objects a selection is bound to (all checked by ``select`` before it writes)."""

    __test__ = False  # not a pytest test class, whatever its name says

    endpoint: str
    project_id: int
    plan_id: int
    plan_name: str
    job_run_id: int
    job_id: int
    launch_id: int
    # The uids TestOps knows the job and the job run by: upload/start and upload/stop must name exactly these
    # (the job's external id, confirmed by TestOps in select; the job run's own, or this GitHub run's id).
    job_uid: str | None = None
    job_run_uid: str | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "endpoint": self.endpoint,
            "project-id": self.project_id,
            "plan-id": self.plan_id,
            "plan-name": self.plan_name,
            "job-run-id": self.job_run_id,
            "job-id": self.job_id,
            "launch-id": self.launch_id,
        }
        if self.job_uid is not None:
            document["job-uid"] = self.job_uid
        if self.job_run_uid is not None:
            document["job-run-uid"] = self.job_run_uid
        return document


def build_selection(
    contract: Contract,
    context: RunContext,
    cases: Sequence[Case],
    *,
    backend: str,
    source: str,
    testops: TestOpsBinding | None = None,
    rerun_of: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
    compared: bool = False,
) -> dict[str, Any]:
    """The selection document for ``cases`` (in the given order). Raises ``selection.empty`` if none."""
    if source not in SOURCES:
        raise ValueError(source)
    if (backend == "testops") != (testops is not None):
        raise ValueError("a testops binding is required with, and only with, the testops backend")
    if not cases:
        raise Refusal("selection.empty", "nothing was selected", field="cases", expected="at least one case",
                      actual=[])
    keys = {case.key for case in cases}
    rows = [case.row() for case in cases]
    document: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "campaign": contract.campaign,
        "contract-sha256": contract.digest,
        "backend": backend,
        "context": context.to_json(),
        "testops": testops.to_json() if testops is not None else None,
        "profile": dict(contract.profile),
        "source": source,
        "full-plan": len(keys) == len(contract.cases) and all(contract.has_case(k) for k in keys),
        "cases": rows,
        "case-index": case_index(rows),
    }
    if contract.file_sha256 is not None:
        document["contract-file-sha256"] = contract.file_sha256
    compiled = compiled_bytes(contract)
    if compiled is not None:
        document["contract-compiled-sha256"] = sha256_bytes(compiled)
        document["contract-compiled-by"] = __version__  # the reader that parsed it: a later phase of another
        # version (whose reader may differ) parses the YAML itself
    if rerun_of is not None:
        document["rerun-of"] = dict(rerun_of)
    if compared:
        document["baseline"] = dict(baseline) if baseline is not None else None
    # Every row is Case.row() of a schema-validated contract, whose case schema is at least as strict as
    # the selection's row schema; one row proves the mapping, and re-validating 10,000 rows would cost
    # seconds. Readers (load_selection) validate every row: their bytes crossed a job boundary.
    validate_document("selection", {**document, "cases": rows[:1]}, "selection.invalid",
                      "the selection")
    return document


def case_index(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a worker needs to know of the rows without reading them (:mod:`campaign.gate`): how many there are,
    how many per lane, and the length in characters of the ``cases`` value as written (its canonical JSON), so a
    reader of the digest-checked bytes can step over it. Sorted keys put ``case-index`` just before ``cases``."""
    lanes: dict[str, int] = {}
    for row in rows:
        lanes[row["lane"]] = lanes.get(row["lane"], 0) + 1
    text = json.dumps(list(rows), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"count": len(rows), "lanes": lanes, "length": len(text)}


def selection_bytes(document: Mapping[str, Any]) -> bytes:
    """The canonical bytes (sorted keys, ``(",", ":")``, UTF-8, trailing newline) that are hashed."""
    return canonical_json(document)


def write_selection(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write the selection once (O_EXCL, 0600); refuse ``io.exists`` rather than overwrite."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_once(target, data, mode=0o600)


def check_sha256(value: str | None, name: str = "selection-sha256") -> str:
    """A digest input must be exactly 64 lowercase hex characters (refuse ``input.<name>``)."""
    if value is None or not _SHA256.match(value):
        raise Refusal(f"input.{name}", f"input {name} must be a SHA-256 as the step that made it outputs it: "
                      "64 lowercase hex characters", field=name, expected="64 lowercase hex characters",
                      actual=value if value is None or len(value) <= 80 else value[:77] + "...")
    return value


@dataclass(frozen=True)
class Selection:
    """A loaded selection whose bytes matched the expected digest and whose shape matched the schema."""

    document: Mapping[str, Any]
    digest: str
    path: str

    @property
    def cases(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.document["cases"]
        return rows

    @property
    def keys(self) -> list[str]:
        return [row["key"] for row in self.cases]

    @property
    def count(self) -> int:
        return len(self.cases)

    @property
    def context(self) -> RunContext:
        return RunContext.from_json(self.document["context"])

    @property
    def testops(self) -> dict[str, Any] | None:
        block: dict[str, Any] | None = self.document["testops"]
        return block

    @property
    def backend(self) -> str:
        return str(self.document["backend"])

    @property
    def source(self) -> str:
        return str(self.document["source"])

    @property
    def full_plan(self) -> bool:
        return bool(self.document["full-plan"])

    def row(self, key: str) -> dict[str, Any] | None:
        for row in self.cases:
            if row["key"] == key:
                return row
        return None




def load_selection(path: str | os.PathLike[str], expected_sha256: str | None,
                   limit: int = SELECTION_LIMIT) -> Selection:
    """Read the selection safely, re-hash its exact bytes (``selection.digest``), parse and validate it."""
    expected = check_sha256(expected_sha256)
    data = read_document_bytes(path, limit)
    actual = sha256_bytes(data)
    if actual != expected:
        raise Refusal("selection.digest", f"the selection file {os.fspath(path)} does not hash to the expected "
                      "digest: it was changed, or it belongs to another select step", field="selection-sha256",
                      expected=expected, actual=actual)
    document = parse_json_bytes(data, "the selection", "selection.invalid")
    validate_document("selection", document, "selection.invalid", "the selection")
    return Selection(document=document, digest=actual, path=os.fspath(path))


def worker_context(env: Mapping[str, str], contract: Contract, *, local: bool = False) -> RunContext:
    """The live context of a job that reads a selection without a token (``verify-selection``, ``export``):
    the runner's ``GITHUB_*`` variables inside Actions (no network), else (or with ``local`` on a local runner,
    :func:`context.is_local`) the local rehearsal context, made exactly as ``select`` makes it
    (:func:`context.rehearsal_context`), so a rehearsal binds on the same commit."""
    return job_context(env, contract.trust.repository, contract.trust.workflows, local=local)


def validate_against(selection: Selection, contract: Contract, live_context: RunContext) -> None:
    """Bind a loaded selection to ``contract`` and to the run this job belongs to.

    Refuses ``selection.context`` (another campaign, contract, profile or run), ``selection.plan_binding``
    (TestOps project or plan differ from the contract), ``selection.foreign_case`` (a row that is not the
    contract's row, byte for byte), ``selection.duplicate_case`` and ``selection.invalid`` (a ``full-plan``
    flag that does not match the rows).
    """
    doc = selection.document
    for field, expected, actual in (
        ("campaign", contract.campaign, doc["campaign"]),
        ("contract-sha256", contract.digest, doc["contract-sha256"]),
        ("profile", dict(contract.profile), doc["profile"]),
    ):
        if expected != actual:
            raise Refusal("selection.context", f"the selection was made for another contract ({field} differs)",
                          field=field, expected=expected, actual=actual)
    block = selection.testops
    if block is not None:
        _check_testops_block(block, contract)
    seen: dict[str, int] = {}
    lanes: dict[str, int] = {}
    length = 1  # "[" ... "]" with a "," between rows
    for index, row in enumerate(selection.cases):
        key = row["key"]
        if not contract.has_case(key):
            raise Refusal("selection.foreign_case", f"selected case {key!r} is not in the contract",
                          field=f"cases/{index}/key", expected="a contract case key", actual=key)
        if key in seen:
            raise Refusal("selection.duplicate_case", f"case {key!r} is selected twice (rows {seen[key]} and "
                          f"{index})", field=f"cases/{index}/key", expected="each case once", actual=key)
        seen[key] = index
        # Schema-valid rows hold strings, JSON integers (never booleans or floats), lists and objects, for which
        # equality is equality of canonical JSON.
        if row != contract.case(key).row():
            raise Refusal("selection.foreign_case", f"the selected row of {key!r} differs from the contract's row",
                          field=f"cases/{index}", expected=contract.case(key).row(), actual=row)
        length += len(canonical_text(row)) + 1
        lanes[row["lane"]] = lanes.get(row["lane"], 0) + 1
    _check_case_index(doc.get("case-index"), {"count": len(seen), "lanes": lanes, "length": length})
    full = len(seen) == len(contract.cases)
    if selection.full_plan != full:
        raise Refusal("selection.invalid", "the full-plan flag does not match the selected rows",
                      field="full-plan", expected=full, actual=selection.full_plan)
    check_same_run(selection.context, live_context, "selection.context")


def _check_case_index(recorded: Any, actual: dict[str, Any]) -> None:
    """The index select wrote beside the rows (absent in selections made before it existed) must describe them:
    a worker's fast gate trusts it instead of reading the rows, so a selection whose index lies is refused."""
    if recorded is not None and recorded != actual:
        raise Refusal("selection.invalid", "the selection's case index does not describe its rows: the file was not "
                      "written by select", field="case-index", expected=actual, actual=recorded)


def _check_testops_block(block: Mapping[str, Any], contract: Contract) -> None:
    config = contract.testops
    if config is None:
        raise Refusal("selection.context", "the selection is bound to TestOps but the contract has no testops "
                      "section", field="testops", expected=None, actual=dict(block))
    # The endpoint and project id may be overridden by inputs, so only the plan is compared here; the
    # contract digest above already binds the rest of the contract.
    if config.plan_id is not None and block["plan-id"] != config.plan_id:
        raise Refusal("selection.plan_binding", "the selection's test plan is not the contract's", field="plan-id",
                      expected=config.plan_id, actual=block["plan-id"])
    if block["plan-name"] != config.plan_name:
        raise Refusal("selection.plan_binding", "the selection's test plan name is not the contract's",
                      field="plan-name", expected=config.plan_name, actual=block["plan-name"])


def read_travelled(path: str | os.PathLike[str], expected_sha256: str | None, *, in_actions: bool,
                   name: str = "selection-sha256", limit: int = SELECTION_LIMIT) -> tuple[str, bool]:
    """The digest a document that crossed jobs is checked against, and whether it travelled (was given).

    Inside GitHub Actions the digest is required (``input.<name>``): it is what proves the file is the one the
    producing job wrote. Outside Actions (a rehearsal, phases run by hand) it may be omitted; the digest of the
    bytes read is then used, and the phase's summary says the document was not bound by a travelled digest.
    """
    if expected_sha256 is not None:
        return check_sha256(expected_sha256, name), True
    if in_actions:
        raise Refusal(f"input.{name}", f"input {name} is required inside GitHub Actions: it is the digest that "
                      "travelled as a job output, which binds the file this job read to the one its producer wrote",
                      field=name, expected="64 lowercase hex characters", actual=None)
    return sha256_bytes(read_document_bytes(path, limit)), False
