"""The worker's fast gate: accept a selection by digests alone, before any case runs.

``verify-selection`` runs at the start of every matrix job, so its start-up is paid once per case. The
full verification (:mod:`campaign.selection`) parses the YAML contract (:mod:`yamlread`), validates the
selection against its schema and compares every row with the contract, where digests already prove:

* the selection's exact bytes hash to ``selection-sha256``, the digest that travelled as the select
  job's output, outside the artifact that carried the file: the bytes are the ones ``select`` wrote,
  which ``select`` built from a validated contract and checked (rows, duplicates, plan, full-plan flag);
* the worker's contract file has exactly the bytes whose SHA-256 ``select`` recorded
  (``contract-file-sha256``): it is the contract ``select`` used, so the rows, campaign, contract digest
  and profile in the selection are that contract's by construction;
* the selection's run context binds to this job's run (the runner's ``GITHUB_*`` variables, checked as
  :func:`context.env_context` checks them).

The gate reads every field of the selection but its rows: select records a case index (the row count, the
count per lane, and the rows' length in characters) just before them, and the gate steps over the rows by
that length (:func:`selection_head`). The digest already proves the bytes are select's; the index is select's
account of the rows it wrote, and the full verification refuses a selection whose index does not describe its
rows (``selection.invalid``).

The gate only ever *accepts*. Anything else — another digest, contract bytes that differ (a checkout
that rewrote line endings), a selection made before ``contract-file-sha256`` existed, a run outside
Actions (the rehearsal context needs the contract), or any doubt at all — returns ``None`` and the full
verification decides, with its refusals and their codes. So the gate changes how fast a worker starts,
never what it accepts or refuses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.readers.integers import ascii_int
from testops_evidence.safeio import read_safe, sha256_bytes

SELECTION_SCHEMA = "testops-evidence/selection/v1"
SELECTION_LIMIT = 64 * 1024 * 1024  # = campaign.selection.SELECTION_LIMIT (a test keeps them equal)
CONTRACT_LIMIT = 4 * 1024 * 1024  # = contract.CONTRACT_LIMIT
DEFAULT_CONTRACT = ".github/testops-evidence.yml"
_HEX = frozenset("0123456789abcdef")


def read_document_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """Read a document that crossed jobs: relative paths are resolved below the working directory
    component by component (no links anywhere, no ``..``); absolute paths below their parent."""
    text = os.fspath(path)
    if os.path.isabs(text):
        return read_safe(os.path.dirname(text) or "/", os.path.basename(text), limit=limit)
    normal = os.path.normpath(text).replace(os.sep, "/")
    if normal == ".." or normal.startswith("../"):
        raise Refusal("io.unsafe_path", f"{text} leaves the working directory", field="path",
                      expected="a path inside the workspace", actual=text)
    return read_safe(".", normal, limit=limit)


@dataclass(frozen=True)
class GateFacts:
    """What the gate established, for the phase's outputs and summary."""

    document: dict[str, Any]  # every field but ``cases`` (not read when the selection has its case index)
    digest: str
    live: dict[str, Any]  # repository, run-id, run-attempt, head-sha, run-url of this job's run
    count: int
    lanes: dict[str, int]


def verify_by_digests(selection_path: str, expected_sha256: str | None, contract_path: str | None,
                      env: Mapping[str, str]) -> GateFacts | None:
    """The facts if the selection is accepted by digests alone, else ``None`` (run the full check)."""
    try:
        return _verify(selection_path, expected_sha256, contract_path or DEFAULT_CONTRACT, env)
    except Exception:  # any doubt: the full verification decides, and explains
        return None


def _verify(selection_path: str, expected: str | None, contract_path: str,
            env: Mapping[str, str]) -> GateFacts | None:
    if expected is None or len(expected) != 64 or not set(expected) <= _HEX:
        return None
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    data = read_document_bytes(selection_path, SELECTION_LIMIT)
    if sha256_bytes(data) != expected:
        return None
    document = selection_head(data.decode("utf-8"))
    if document.get("schema") != SELECTION_SCHEMA:
        return None
    recorded = document.get("contract-file-sha256")
    if not isinstance(recorded, str):
        return None
    # read_document_bytes collapses ``..`` lexically, but the full verification opens the contract path as
    # the kernel resolves it (``link/../c.yml`` is beside the link's target): with a ``..`` the two may read
    # different files, so the gate must not decide.
    if ".." in contract_path.replace(os.sep, "/").split("/"):
        return None
    contract_bytes = read_document_bytes(contract_path, CONTRACT_LIMIT)
    if sha256_bytes(contract_bytes) != recorded:
        return None
    # The full verification parses a ``*.json`` contract as JSON and anything else as YAML; select may have
    # read the same bytes under another name. YAML text in a ``.json`` file is refused there
    # (``contract.invalid``), so here it must at least be one JSON object (else: raise, the full check runs).
    if contract_path.endswith(".json") and not isinstance(json.loads(contract_bytes), dict):
        return None
    live = live_binding(env)
    context = document["context"]
    for key in ("repository", "run-id", "run-attempt", "head-sha", "workflow-path", "local"):
        if context[key] != live[key] or type(context[key]) is not type(live[key]):
            return None
    index = document.get("case-index")
    if index is None:  # a selection written before select recorded its index: the rows were read
        rows = document["cases"]
        lanes: dict[str, int] = {}
        for row in rows:
            lanes[row["lane"]] = lanes.get(row["lane"], 0) + 1
        index = {"count": len(rows), "lanes": lanes}
    return GateFacts(document, expected, live, index["count"], index["lanes"])


def live_binding(env: Mapping[str, str]) -> dict[str, Any]:
    """The binding fields of this job's run from the runner's variables, accepted only where
    :func:`context.env_context` accepts them (stricter is fine: the full check runs instead)."""
    repository = _required(env, "GITHUB_REPOSITORY")
    workflow_ref = _required(env, "GITHUB_WORKFLOW_REF")
    prefix = f"{repository}/"
    if not workflow_ref.startswith(prefix) or "@" not in workflow_ref:
        raise ValueError("GITHUB_WORKFLOW_REF")
    workflow_path = workflow_ref[len(prefix):].split("@", 1)[0]
    sha = _required(env, "GITHUB_SHA")
    if len(sha) != 40 or not set(sha) <= _HEX:
        raise ValueError("GITHUB_SHA")
    run_id = _id(_required(env, "GITHUB_RUN_ID"))
    run_attempt = _id(env.get("GITHUB_RUN_ATTEMPT", "1"))
    _id(_required(env, "GITHUB_RUN_NUMBER"))
    _required(env, "GITHUB_EVENT_NAME")
    if env.get("GITHUB_ACTOR_ID"):
        _id(env["GITHUB_ACTOR_ID"])
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return {"repository": repository, "run-id": run_id, "run-attempt": run_attempt, "head-sha": sha,
            "workflow-path": workflow_path, "local": False,
            "run-url": f"{server}/{repository}/actions/runs/{run_id}"}


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ValueError(name)
    return value


def _id(value: str) -> int:
    """``context.ID_RE``: ``^[1-9][0-9]{0,17}$``."""
    number = ascii_int(value, minimum=1, maximum=10**18 - 1) if value[:1] != "0" else None
    if number is None:
        raise ValueError(value)
    return number


def selection_head(text: str) -> dict[str, Any]:
    """Every top-level field of a selection's canonical JSON, stepping over the rows when ``case-index`` (which
    sorts just before ``cases``) gives their length. Only for bytes that already hashed to the travelled digest — bytes select wrote,
    whose index select computed from the rows it wrote (and the full verification checks it against them).
    Anything unexpected raises: the gate then leaves the decision to the full verification."""
    scan = json.JSONDecoder().raw_decode
    if not text.startswith("{"):
        raise ValueError("not a JSON object")
    document: dict[str, Any] = {}
    position = 1
    while True:
        key, position = scan(text, position)
        if not isinstance(key, str) or text[position] != ":":
            raise ValueError("not a JSON object member")
        position += 1
        index = document.get("case-index")
        if key == "cases" and isinstance(index, dict) and type(index.get("length")) is int:
            end = position + index["length"]
            if index["length"] < 2 or text[position] != "[" or text[end - 1] != "]":
                raise ValueError("the case index does not frame the rows")
            value, position = None, end
        else:
            value, position = scan(text, position)
        if key in document:
            raise ValueError("duplicate key")
        document[key] = value
        if text[position] == ",":
            position += 1
        elif text[position] == "}":
            break
        else:
            raise ValueError("not a JSON object")
    if text[position + 1:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return document
