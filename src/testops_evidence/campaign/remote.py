"""Remote cells: validation of cells measured by another workflow, before they reach the ledger.

Pure functions over plain values, so every rule is testable without a network:

* :func:`admit_run` / :func:`admit_artifact` — the source run and artifact, as the GitHub API describes
  them (provenance never comes from inside the archive), against the contract's ``remote`` policy;
* :func:`parse_intent` — the operator's intent (campaign, source revision, selected executions);
* :func:`find_cells` / :func:`validate_cell` — the documents of the archive (host, result, definition),
  each hashed over its exact bytes, bound to the intent, the provenance and the contract.

A validated :class:`RemoteCell` carries the ledger record, attempt and completion it becomes. Every rule
has its own code (``import.*``); see docs/import.md for the table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.campaign import cells
from testops_evidence.contract import Contract, RemotePolicy, schema_errors
from testops_evidence.errors import Refusal
from testops_evidence.readers.archive import Archive, ArchiveFile
from testops_evidence.safeio import parse_json_bytes, sha256_bytes

INTENT_SCHEMA = "testops-evidence/import-intent/v1"
INTENT_LIMIT = 16 * 1024 * 1024
DOCUMENT_LIMIT = 4 * 1024 * 1024  # one JSON document in the archive
HOST_NAME = "host.json"
RESULT_NAME = "result.json"
DEFINITION_NAME = "definition.json"
EXECUTION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
# A measured duration may exceed its wall-clock span by clock granularity, never by more.
DURATION_SLACK_MS = 1000


# --- provenance (from the GitHub API) -----------------------------------------------------------------

@dataclass(frozen=True)
class SourceRun:
    """The measuring run as the Actions API reports it."""

    repository: str  # owner/name of the run's repository
    run_id: int
    run_attempt: int
    workflow: str  # the run's `path`, e.g. .github/workflows/e2e.yml
    head_branch: str | None
    head_sha: str
    head_repository: str | None  # owner/name the head commit came from (a fork for fork PRs)
    event: str = ""
    html_url: str = ""

    @property
    def ref(self) -> str | None:
        """The workflow's ref. The run object has no ``ref`` field; ``head_branch`` names the branch the
        workflow file was taken from, so the ref is ``refs/heads/<head_branch>``. For a tag push GitHub
        puts the tag name there, which cannot be told apart from a branch: tag refs in the policy never
        match, so such runs are refused rather than guessed."""
        return None if not self.head_branch else f"refs/heads/{self.head_branch}"


@dataclass(frozen=True)
class SourceArtifact:
    artifact_id: int
    name: str
    size: int
    digest: str | None  # as the API reports it: "sha256:<hex>", bare hex, or None for old artifacts
    expired: bool = False
    run_id: int | None = None  # workflow_run.id of the artifact
    head_sha: str | None = None

    @property
    def sha256(self) -> str | None:
        if self.digest is None:
            return None
        value = self.digest.removeprefix("sha256:").lower()
        return value if SHA256_RE.match(value) else None


def admit_run(policy: RemotePolicy, run: SourceRun) -> None:
    """The run must come from an admitted repository, workflow and ref, and an admitted attempt."""
    if run.repository.lower() != policy.repository.lower():
        raise Refusal("import.foreign_workflow", "the source run belongs to another repository",
                      field="repository", expected=policy.repository, actual=run.repository)
    if run.head_repository is None or run.head_repository.lower() != run.repository.lower():
        # A fork's pull request runs with the fork's branch name as head_branch: never admissible.
        raise Refusal("import.foreign_workflow", "the source run's head commit comes from another repository "
                      "(a fork)", field="head-repository", expected=run.repository, actual=run.head_repository)
    if run.workflow not in policy.workflows:
        raise Refusal("import.foreign_workflow", "the source run's workflow is not admitted for import",
                      field="workflow", expected=list(policy.workflows), actual=run.workflow)
    if run.ref not in policy.refs:
        raise Refusal("import.foreign_workflow", "the source run's ref is not admitted for import",
                      field="ref", expected=list(policy.refs), actual=run.ref)
    if policy.run_attempts == "first-only" and run.run_attempt != 1:
        raise Refusal("import.rerun", f"the source run is attempt {run.run_attempt}; the remote policy admits "
                      "only first attempts", field="run-attempt", expected=1, actual=run.run_attempt,
                      hint="Import from a fresh run, or set `remote.run-attempts: any`.")


def admit_artifact(policy: RemotePolicy, run: SourceRun, artifact: SourceArtifact) -> str:
    """Check an artifact before download; return the SHA-256 its archive must have."""
    if artifact.run_id is not None and artifact.run_id != run.run_id:
        raise Refusal("import.foreign_workflow", f"artifact {artifact.name!r} belongs to another run",
                      field="artifact.workflow_run.id", expected=run.run_id, actual=artifact.run_id)
    if artifact.head_sha is not None and artifact.head_sha != run.head_sha:
        raise Refusal("import.foreign_workflow", f"artifact {artifact.name!r} was made from another commit",
                      field="artifact.workflow_run.head_sha", expected=run.head_sha, actual=artifact.head_sha)
    if artifact.expired:
        raise Refusal("import.artifact", f"artifact {artifact.name!r} has expired", field="artifact",
                      expected="an unexpired artifact", actual=artifact.name)
    if artifact.size > policy.max_archive_bytes:
        raise Refusal("import.unsafe_archive", f"artifact {artifact.name!r} is {artifact.size} bytes, over the "
                      f"{policy.max_archive_bytes}-byte cap (remote.max-archive-bytes)", field="size",
                      expected=f"<= {policy.max_archive_bytes}", actual=artifact.size)
    digest = artifact.sha256
    if digest is None:
        raise Refusal("import.digest", f"the API reports no usable SHA-256 digest for artifact {artifact.name!r}",
                      field="digest", expected="sha256:<64 hex>", actual=artifact.digest,
                      hint="Artifacts uploaded before digests existed cannot be imported; upload it again.")
    return digest


def check_archive_digest(artifact: SourceArtifact, expected: str, data: bytes) -> str:
    actual = sha256_bytes(data)
    if actual != expected:
        raise Refusal("import.digest", f"artifact {artifact.name!r} does not hash to the digest the API reports",
                      field="archive-sha256", expected=expected, actual=actual)
    return actual


# --- the intent ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IntentRow:
    execution_id: str
    case: str
    ordinal: int


@dataclass(frozen=True)
class Intent:
    campaign: str
    source_revision: str
    rows: tuple[IntentRow, ...]
    by_execution: Mapping[str, tuple[IntentRow, ...]] = field(repr=False, default_factory=dict)

    def selected(self, execution_id: str) -> IntentRow:
        rows = self.by_execution.get(execution_id, ())
        if len(rows) != 1:
            raise Refusal("import.not_selected", f"execution {execution_id!r} is "
                          + ("not selected by the intent" if not rows else f"selected {len(rows)} times"),
                          field="execution-id", expected="selected exactly once", actual=execution_id)
        return rows[0]


def parse_json_object(data: bytes, code: str, what: str) -> dict[str, Any]:
    # Strict JSON: a document with two readings (a duplicate key), NaN or a 64-bit overflow is refused.
    value = parse_json_bytes(data, what, code)
    if not isinstance(value, dict):
        raise Refusal(code, f"{what} is not a JSON object", field="/", expected="a JSON object",
                      actual=type(value).__name__)
    return value


def _validate(schema: str, document: Any, code: str, what: str, base: str = "") -> None:
    for where, message, expected in schema_errors(schema, document):
        pointer = base + (where if where != "/" else "")
        raise Refusal(code, f"{what} is invalid at {pointer or '/'}: {message[:300]}", field=pointer or "/",
                      expected=expected)


@contextmanager
def _recoded(code: str, what: str) -> Iterator[None]:
    """Re-code a refusal of a shared rule (campaign.cells speaks `export.*`) as this phase's ``code``."""
    try:
        yield
    except Refusal as exc:
        if exc.code == code:
            raise
        field = exc.field
        if field is not None and what.endswith("cell"):
            field = "/cell" + field if field.startswith("/") else f"cell.{field}"
        raise Refusal(code, f"{what}: {exc.message}", field=field, expected=exc.expected,
                      actual=exc.actual) from None


def parse_intent(data: bytes, contract: Contract, what: str = "the import intent") -> Intent:
    document = parse_json_object(data, "import.intent", what)
    _validate("import-intent", document, "import.intent", what)
    if document["campaign"] != contract.campaign:
        raise Refusal("import.intent", f"{what} is for another campaign", field="campaign",
                      expected=contract.campaign, actual=document["campaign"])
    rows: list[IntentRow] = []
    by_execution: dict[str, list[IntentRow]] = {}
    slots: dict[tuple[str, int], int] = {}
    for index, raw in enumerate(document["selected"]):
        row = IntentRow(raw["execution-id"], raw["case"], raw["ordinal"])
        if not contract.has_case(row.case):
            raise Refusal("import.intent", f"{what} selects case {row.case!r}, which the contract does not have",
                          field=f"/selected/{index}/case", expected="a contract case key", actual=row.case)
        if (row.case, row.ordinal) in slots:
            raise Refusal("import.intent", f"{what} gives ordinal {row.ordinal} of {row.case!r} to two executions",
                          field=f"/selected/{index}/ordinal", expected="each (case, ordinal) once",
                          actual=row.ordinal)
        slots[(row.case, row.ordinal)] = index
        rows.append(row)
        by_execution.setdefault(row.execution_id, []).append(row)
    return Intent(document["campaign"], document["source-revision"], tuple(rows),
                  {k: tuple(v) for k, v in by_execution.items()})


def bind_intent(intent: Intent, run: SourceRun) -> None:
    if intent.source_revision != run.head_sha:
        raise Refusal("import.intent", "the intent's source revision is not the source run's head commit",
                      field="source-revision", expected=run.head_sha, actual=intent.source_revision)


# --- documents in the archive ----------------------------------------------------------------------

@dataclass(frozen=True)
class Document:
    path: str
    sha256: str
    body: dict[str, Any]


def _document(file: ArchiveFile, code: str, what: str) -> Document:
    if len(file.data) > DOCUMENT_LIMIT:
        raise Refusal(code, f"{what} ({file.name}) is {len(file.data)} bytes", field="path",
                      expected=f"<= {DOCUMENT_LIMIT} bytes", actual=file.name)
    # Hashed over the exact bytes read from the archive; the digest is what the ledger records.
    return Document(file.name, sha256_bytes(file.data), parse_json_object(file.data, code, f"{what} {file.name}"))


@dataclass(frozen=True)
class CellFiles:
    execution_id: str
    result: ArchiveFile
    definition: ArchiveFile | None


@dataclass(frozen=True)
class ArchiveCells:
    host: ArchiveFile | None
    cells: tuple[CellFiles, ...]


def find_cells(archive: Archive, prefix: str) -> ArchiveCells:
    """Locate ``<prefix>host.json`` and every ``<prefix><execution-id>/result.json`` (archive order)."""
    host = archive.files.get(prefix + HOST_NAME)
    cells: list[CellFiles] = []
    for name in archive.names:
        if not name.startswith(prefix) or not name.endswith("/" + RESULT_NAME):
            continue
        execution_id = name[len(prefix): -len(RESULT_NAME) - 1]
        if "/" in execution_id:
            continue  # deeper result.json files belong to the harness, not to the layout
        if not EXECUTION_RE.match(execution_id):
            raise Refusal("import.document", "a result document's directory is not a valid execution id",
                          field="path", expected=f"{prefix}<execution-id>/{RESULT_NAME}", actual=name)
        definition = archive.files.get(f"{prefix}{execution_id}/{DEFINITION_NAME}")
        cells.append(CellFiles(execution_id, archive.files[name], definition))
    if not cells:
        raise Refusal("import.document", f"the archive has no result documents under {prefix!r}",
                      field="artifact-prefix", expected=f"{prefix}<execution-id>/{RESULT_NAME}",
                      actual=list(archive.names[:5]))
    return ArchiveCells(host, tuple(cells))


@dataclass(frozen=True)
class HostDocument:
    document: Document

    @property
    def body(self) -> dict[str, Any]:
        return self.document.body


def parse_host(file: ArchiveFile | None, prefix: str, policy: RemotePolicy, run: SourceRun,
               intent: Intent) -> HostDocument:
    """The host document, checked once per archive against the policy, the run and the intent."""
    if file is None:
        raise Refusal("import.document", "the archive has no host document", field="path",
                      expected=prefix + HOST_NAME, actual=None)
    document = _document(file, "import.document", "the host document")
    body = document.body
    _validate("remote-host", body, "import.host", "the host document")
    for name, expected, actual in (("run-id", run.run_id, body["run-id"]),
                                   ("run-attempt", run.run_attempt, body["run-attempt"]),
                                   ("source-revision", intent.source_revision, body["source-revision"])):
        if expected != actual:
            raise Refusal("import.host", f"the host document was written for another {name}", field=name,
                          expected=expected, actual=actual)
    if policy.run_attempts == "first-only" and body["automatic-retries"] != 0:
        raise Refusal("import.rerun", "the host allowed automatic retries; the remote policy admits only first "
                      "attempts", field="automatic-retries", expected=0, actual=body["automatic-retries"])
    for key, expected in sorted(policy.host.items()):
        found, actual = lookup_dotted(body, key)
        if not found or not same_value(expected, actual):
            raise Refusal("import.host", f"the host does not meet the requirement {key}", field=f"host.{key}",
                          expected=expected, actual=actual if found else "(absent)")
    for image, allowed in sorted(policy.images.items()):
        reported = body["images"].get(image)
        if reported not in allowed:
            raise Refusal("import.host", f"the host ran image {image!r} with an unpinned digest",
                          field=f"images.{image}", expected=list(allowed),
                          actual=reported if reported is not None else "(absent)")
    return HostDocument(document)


def lookup_dotted(document: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """``a.b.c`` reaches ``document["a"]["b"]["c"]``; each part must name a member of an object."""
    node: Any = document
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def same_value(expected: Any, actual: Any) -> bool:
    """Equality without Python's coercions: ``true`` is not ``1`` and ``"1"`` is not ``1``."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    return type(expected) is type(actual) and expected == actual


# --- one cell -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteCell:
    """A validated cell: what the ledger records, and what the summary shows."""

    execution_id: str
    case: str
    ordinal: int
    disposition: str
    record: Mapping[str, Any]
    attempt: Mapping[str, Any]
    completion: Mapping[str, Any]

    @property
    def import_key(self) -> str:
        key: str = self.record["import-key"]
        return key


def validate_cell(
    *,
    contract: Contract,
    policy: RemotePolicy,
    intent: Intent,
    run: SourceRun,
    artifact: SourceArtifact,
    archive_sha256: str,
    host: HostDocument,
    files: CellFiles,
    archive: Archive,
    prefix: str,
    imported_at: str,
) -> RemoteCell:
    """Validate one execution's documents; return the ledger entries it becomes."""
    result = _document(files.result, "import.document", "the result document")
    body = result.body
    _validate("remote-result", body, "import.document", "the result document")
    with _recoded("import.document", "the result's cell"):
        checked = cells.validate_cell(body["cell"], result.path, sha256=result.sha256, origin="remote",
                                       schema="cell-result-v1")
    cell = body["cell"]
    execution_id = files.execution_id
    if body["execution-id"] != execution_id:
        raise Refusal("import.document", "the result document names another execution than its directory",
                      field="execution-id", expected=execution_id, actual=body["execution-id"])
    row = intent.selected(execution_id)
    if cell["case"] != row.case:
        raise Refusal("import.not_selected", f"execution {execution_id!r} is selected for case {row.case!r} but "
                      f"measured {cell['case']!r}", field="cell.case", expected=row.case, actual=cell["case"])
    for name, expected, actual in (("run-id", run.run_id, body["run-id"]),
                                   ("run-attempt", run.run_attempt, body["run-attempt"]),
                                   ("cell.run-attempt", run.run_attempt, cell.get("run-attempt", run.run_attempt)),
                                   ("cell.source-sha", intent.source_revision, cell["source-sha"])):
        if expected != actual:
            raise Refusal("import.document", f"the result document was measured by another run or commit "
                          f"({name})", field=name, expected=expected, actual=actual)
    if policy.run_attempts == "first-only" and body["attempt"] != 1:
        raise Refusal("import.rerun", f"execution {execution_id!r} is an automatic retry (attempt "
                      f"{body['attempt']}); the remote policy admits only first attempts", field="attempt",
                      expected=1, actual=body["attempt"])
    profile = dict(contract.profile)
    if cell["profile"] != profile:
        raise Refusal("import.document", "the cell evaluated another profile than the contract's",
                      field="cell.profile", expected=profile, actual=cell["profile"])
    case = contract.case(row.case)
    with _recoded("import.document", "the result's cell"):
        # The same rules as export: exactly the contract's checks, and no `passed` with a failed check.
        cells.check_binding(checked, case)
        cells.verdict(cells.BoundCell(checked), case)
    started, finished = checked.started, checked.finished  # validate_cell: finished >= started
    span_ms = (finished - started).total_seconds() * 1000
    if body["duration-ms"] > span_ms + DURATION_SLACK_MS:
        raise Refusal("import.document", "the measured duration is longer than the cell's own span",
                      field="duration-ms", expected=f"<= {span_ms + DURATION_SLACK_MS:.0f}",
                      actual=body["duration-ms"])
    if execution_id not in host.body["execution-ids"]:
        raise Refusal("import.host", f"the host document does not list execution {execution_id!r}",
                      field="execution-ids", expected=execution_id, actual=host.body["execution-ids"])
    with _recoded("import.host", "the host document"):
        qualified = cells.parse_time(host.body["qualified-at"], "qualified-at")
    if qualified > started:
        raise Refusal("import.host", "the host was qualified after the cell started", field="qualified-at",
                      expected=f"<= {cell['started-at']}", actual=host.body["qualified-at"])
    definition = _definition(files, prefix, body, cell)
    _check_artifacts(archive, prefix, execution_id, cell)

    provenance = {
        "repository": run.repository, "workflow": run.workflow, "ref": run.ref or "",
        "run-id": run.run_id, "run-attempt": run.run_attempt, "head-sha": run.head_sha,
        "artifact-id": artifact.artifact_id, "artifact-name": artifact.name, "artifact-size": artifact.size,
    }
    accounting = body["accounting"]
    record = {
        "import-key": f"{run.run_id}/{run.run_attempt}/{execution_id}",
        "measurement-key": f"{accounting['campaign']}/{accounting['attempt-id']}/{execution_id}",
        "case": row.case, "ordinal": row.ordinal, "execution-id": execution_id,
        "result-sha256": result.sha256, "host-sha256": host.document.sha256,
        "definition-sha256": definition.sha256, "archive-sha256": archive_sha256,
        "result-path": result.path, "provenance": provenance, "imported-at": imported_at,
    }
    attempt = {
        "ordinal": row.ordinal, "execution-id": execution_id, "source-revision": cell["source-sha"],
        "reserved-at": imported_at, "started-at": cell["started-at"], "profile": dict(cell["profile"]),
        "definition-digest": definition.body["digest"],
    }
    completion = {
        "finished-at": cell["finished-at"], "disposition": cell["disposition"],
        "checks": {c["id"]: c["passed"] for c in cell["checks"]}, "usage": dict(cell.get("usage", {})),
        "duration-ms": body["duration-ms"],
        "evidence": [result.path, definition.path, host.document.path],
    }
    return RemoteCell(execution_id, row.case, row.ordinal, cell["disposition"], record, attempt, completion)


def _definition(files: CellFiles, prefix: str, body: Mapping[str, Any], cell: Mapping[str, Any]) -> Document:
    if files.definition is None:
        raise Refusal("import.document", f"execution {files.execution_id!r} has no definition document",
                      field="path", expected=f"{prefix}{files.execution_id}/{DEFINITION_NAME}", actual=None)
    definition = _document(files.definition, "import.document", "the definition document")
    _validate("remote-definition", definition.body, "import.definition", "the definition document")
    if definition.body["case"] != cell["case"]:
        raise Refusal("import.definition", "the definition document describes another case", field="case",
                      expected=cell["case"], actual=definition.body["case"])
    if definition.body["digest"] != body["definition-digest"]:
        raise Refusal("import.definition", "the definition's digest does not match the result's",
                      field="definition-digest", expected=body["definition-digest"],
                      actual=definition.body["digest"])
    return definition


def _check_artifacts(archive: Archive, prefix: str, execution_id: str, cell: Mapping[str, Any]) -> None:
    """Files the cell lists (transcripts, logs) must be in its directory with the digest it states."""
    artifacts: Sequence[Mapping[str, str]] = cell.get("artifacts", [])
    for entry in artifacts:
        name = f"{prefix}{execution_id}/{entry['path']}"
        file = archive.files.get(name)
        if file is None:
            raise Refusal("import.document", "a file the cell lists is not in the archive", field="cell.artifacts",
                          expected=name, actual=None)
        if file.sha256 != entry["sha256"]:
            raise Refusal("import.digest", "a file the cell lists does not hash to its stated digest",
                          field=name, expected=entry["sha256"], actual=file.sha256)
