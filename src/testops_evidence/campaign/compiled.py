"""The compiled contract: a YAML contract is parsed once per campaign, by ``guard`` (or ``select``), never again.

``select`` writes the document it parsed from a YAML contract beside the selection, as compact JSON that
keeps the file's key order (``X.json`` → ``X-contract.json``, written once, 0600), and records the SHA-256
of those exact bytes in the selection (``contract-compiled-sha256``). A later phase that reads the
selection with a travelled digest (``selection-sha256``) builds its :class:`~contract.Contract` from that
file instead of parsing the YAML again (about 1.5 s for 10,000 cases), when all of these hold:

1. the selection file's exact bytes hash to the travelled digest;
2. the phase's contract file — read exactly as :func:`contract.load_contract` reads it (same safe read,
   same size cap) and named as a YAML file (a ``*.json`` name is parsed as JSON, fast anyway) — hashes to
   the selection's ``contract-file-sha256`` (F);
3. the compiled file (no link, a regular file, at most :data:`COMPILED_LIMIT` bytes) hashes to the
   selection's ``contract-compiled-sha256`` (K);
4. it parses with the strict JSON reader, passes :func:`contract.contract_from_document` (the schema and
   every semantic rule, as for the YAML) and its canonical form hashes to ``contract-sha256`` (C).

Why that is the contract :func:`contract.load_contract` would return. The travelled digest was a job
output of ``select``, outside every artifact: bytes that hash to it are the selection ``select`` wrote
(SHA-256 is collision resistant), so F, K and C are the values ``select`` recorded. The contract file's
bytes hash to F: they are the bytes ``select`` parsed, as YAML (``select`` records K only for a YAML
contract). The compiled bytes hash to K: they are what ``select`` encoded from its parse of those bytes;
the YAML reader is deterministic and the selection records the version that parsed it
(``contract-compiled-by``, which must be this phase's own), so this phase's parse of the same bytes gives the
same document, in the same key order (which K binds too: a case's checks are listed in the contract's
order). Validation runs again on it, so acceptance is decided by the same rules. A worker — the party under
evaluation, who may replace an artifact — cannot forge a compiled form: every one of its bytes is bound
through K to a selection that must hash to the travelled digest, which it cannot change.

In ``cell`` mode the digest comes from ``TESTOPS_EVIDENCE_SELECTION_SHA256``, a variable of the case command's
own environment, so the argument above does not hold there — and need not: a cell is the worker's own output,
which export checks again against a contract it builds by the argument above; the compiled form only saves
the worker a parse.

``guard`` parses the contract before there is a selection. It writes the same compiled form in its state
directory (``guard-contract.json``) and records F, K and C in its receipt (``guard.json``), whose SHA-256 is its
step output ``guard-sha256``. ``select``, run in the same job after it (as the campaign template runs them) with
that output as its ``guard-sha256`` input, builds the contract from guard's compiled form by the argument above,
guard's receipt in the place of the selection: a step output cannot be changed by a later step, so bytes that
hash to it are the receipt guard wrote. A YAML contract then costs the campaign one parse, guard's.

Every failure — no compiled file, no travelled digest, a mismatch, a link, a directory, an oversized or
malformed file, a document the rules refuse — makes :func:`load_compiled` return ``None``, and the phase
parses the YAML, with its refusals and their line-and-column errors. The
compiled form changes how fast a phase starts, never what it accepts or refuses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testops_evidence import __version__
from testops_evidence.campaign.gate import SELECTION_LIMIT, read_document_bytes, selection_head
from testops_evidence.readers import strictjson
from testops_evidence.safeio import read_safe_path, sha256_bytes, write_once

if TYPE_CHECKING:
    from testops_evidence.contract import Contract

SUFFIX = "-contract.json"
# The compiled form of a contract within contract.CONTRACT_LIMIT (4 MiB of YAML) without aliases is at most a
# few times that size (JSON quotes every key and string a YAML file may leave bare); aliases are expanded, within
# the reader's budget (yamlread.MAX_ALIASED characters).
COMPILED_LIMIT = 16 * 1024 * 1024
# guard's receipt and its compiled form, in the state directory select shares when it runs in guard's job.
GUARD_RECEIPT = "guard.json"
GUARD_COMPILED = "guard-contract.json"
GUARD_RECEIPT_LIMIT = 4 * 1024 * 1024


def compiled_path(selection_path: str | os.PathLike[str]) -> Path:
    """Where the compiled contract of a selection is: ``<selection stem>-contract.json`` beside it (as
    ``select`` names the baseline receipt it copies)."""
    path = Path(selection_path)
    return path.parent / f"{path.stem}{SUFFIX}"


# select encodes the compiled form twice (its digest goes into the selection, its bytes into the file): the
# last contract's, kept by identity (a Contract holds dicts, so it cannot be a key), is encoded once.
_last: list[tuple[Contract, bytes | None]] = []


def compiled_bytes(contract: Contract) -> bytes | None:
    """The compiled form of a contract read from a YAML file: compact JSON, the file's key order kept,
    UTF-8, a trailing newline. ``None`` for a JSON contract (its reader is fast), a contract that was not
    read from a file, or one whose compiled form is over :data:`COMPILED_LIMIT` (aliases can make a small
    YAML file a large document): no phase would read it, so none is written, and every phase parses."""
    if contract.file_sha256 is None or is_json_name(contract.source_path):
        return None
    if _last and _last[0][0] is contract:
        return _last[0][1]
    try:
        text = json.dumps(contract.document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        encoded = (text + "\n").encode("utf-8")
        data: bytes | None = encoded if len(encoded) <= COMPILED_LIMIT else None
    except ValueError:  # an infinite or NaN number: no strict JSON reader would read it back
        data = None
    _last[:] = [(contract, data)]
    return data


def is_json_name(name: str) -> bool:
    """True when :func:`contract.parse_contract_bytes` reads a file of this name as JSON."""
    return name.endswith(".json")


def write_compiled(path: Path, data: bytes) -> Path:
    """Write the compiled contract once (O_EXCL, 0600), as the selection; ``io.exists`` rather than overwrite."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_once(path, data, mode=0o600)


def load_compiled(contract_path: str | os.PathLike[str], selection_path: str | os.PathLike[str],
                  travelled: str | None) -> tuple[Contract | None, str]:
    """The contract built from the compiled form and why, or ``None`` and why not (then parse the YAML)."""
    try:
        return _load(Path(contract_path), selection_path, travelled)
    except Exception as exc:  # any doubt at all: the YAML is parsed, and decides
        return None, f"unusable ({type(exc).__name__})"


def _load(path: Path, selection_path: str | os.PathLike[str], travelled: str | None) -> tuple[Contract | None, str]:
    if travelled is None:
        return None, "no selection-sha256 travelled"
    if is_json_name(str(path)):
        return None, "a JSON contract"
    # The selection as load_selection reads it: the same safe read, the same cap, the exact bytes hashed.
    selection = read_document_bytes(selection_path, SELECTION_LIMIT)
    if sha256_bytes(selection) != travelled:
        return None, "the selection does not hash to selection-sha256"
    document = selection_head(selection.decode("utf-8"))  # the rows are not needed here: stepped over
    return _bind(path, document, compiled_path(selection_path), "select")


def load_guarded(contract_path: str | os.PathLike[str], state_path: str | os.PathLike[str],
                 travelled: str | None) -> tuple[Contract | None, str]:
    """For ``select`` run in the job of ``guard``: the contract built from the compiled form guard wrote in the
    state directory, bound by guard's ``guard-sha256`` step output, and why; or ``None`` and why not."""
    try:
        return _load_guarded(Path(contract_path), Path(state_path), travelled)
    except Exception as exc:  # any doubt at all: the YAML is parsed, and decides
        return None, f"unusable ({type(exc).__name__})"


def _load_guarded(path: Path, state_path: Path, travelled: str | None) -> tuple[Contract | None, str]:
    if travelled is None:
        return None, "no guard-sha256 given"
    if is_json_name(str(path)):
        return None, "a JSON contract"
    receipt = read_document_bytes(state_path / GUARD_RECEIPT, GUARD_RECEIPT_LIMIT)
    if sha256_bytes(receipt) != travelled:
        return None, f"{GUARD_RECEIPT} in the state directory does not hash to guard-sha256"
    document = strictjson.loads(receipt.decode("utf-8"))
    if not isinstance(document, dict):
        return None, f"{GUARD_RECEIPT} is not an object"
    return _bind(path, document, state_path / GUARD_COMPILED, "guard")


def _bind(path: Path, document: dict[str, Any], compiled_file: Path, by: str) -> tuple[Contract | None, str]:
    """The contract of a compiled file, when the digests of a bound document (the selection, guard's receipt)
    tie it to this contract file: the file's bytes (F), the compiled bytes (K) and the canonical contract (C)."""
    from testops_evidence.contract import CONTRACT_LIMIT, contract_from_document

    recorded = {name: document.get(f"contract-{name}-sha256") for name in ("file", "compiled")}
    contract_sha256 = document.get("contract-sha256")
    if not all(isinstance(v, str) for v in (*recorded.values(), contract_sha256)):
        return None, f"the {_BINDER[by]} records no compiled contract"
    # The argument below rests on this version's reader giving the same document: another version's parse
    # (an older select, a workflow that mixes versions) is not used.
    if document.get("contract-compiled-by") != __version__:
        return None, f"compiled by another version of testops-evidence than {__version__}"
    # The contract file as load_contract reads it (it refuses a missing file first: so does the fallback).
    if not path.exists():
        return None, "no contract file"
    if sha256_bytes(read_safe_path(path, limit=CONTRACT_LIMIT)) != recorded["file"]:
        return None, f"the contract file is not the one {by} read"
    data = read_document_bytes(compiled_file, COMPILED_LIMIT)
    if sha256_bytes(data) != recorded["compiled"]:
        return None, f"{compiled_file} is not the compiled form {by} wrote"
    compiled: Any = strictjson.loads(data.decode("utf-8"))
    contract = contract_from_document(compiled, str(path), file_sha256=recorded["file"], name=str(path))
    if contract.digest != contract_sha256:
        return None, "the compiled form does not hash to contract-sha256"
    return contract, f"compiled by {by} ({compiled_file}), bound by digest"


_BINDER = {"select": "selection", "guard": "guard receipt"}
