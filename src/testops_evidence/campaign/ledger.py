"""The campaign ledger: every measured attempt of a campaign, and the remote imports behind them.

A JSON document (``schemas/ledger.schema.json``): scenarios (contract cases) with attempts that are
*reserved* (the ordinal is taken) and then *completed* (the measured outcome), plus import records keyed
by import key, measurement key and (case, ordinal) with the result, host, definition and archive
digests.

Two layers, kept apart so each is easy to reason about:

* :class:`Ledger` is pure: it works on an in-memory document with indexes (dicts built once, so an
  import of *n* cells into a ledger of *m* records costs O(n + m), not O(n·m)). A failed rule raises a
  refusal; callers always work on a :meth:`Ledger.copy`, so a refusal never leaves half a change.
* :func:`transact` is the only writer: it takes an exclusive, non-blocking ``flock`` on a sidecar lock
  file (``ledger.locked`` when held), reads and validates the ledger, applies a function to a copy and
  persists the result with :func:`safeio.write_atomic` (temp file, fsync, rename, directory fsync) only
  if the bytes changed. A crash at any instant leaves the old or the new ledger, never a mix.
"""

from __future__ import annotations

import copy
import errno
import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from testops_evidence.errors import Refusal
from testops_evidence.safeio import loads_json, read_safe_path, sha256_bytes, write_atomic

SCHEMA = "testops-evidence/ledger/v1"
LEDGER_LIMIT = 256 * 1024 * 1024

# The fields that identify a measurement. A re-import must agree on all of them to be a duplicate; the
# prior art compared only the result and archive digests, so a changed host or definition went unseen.
IDENTITY_FIELDS: tuple[str, ...] = (
    "import-key", "measurement-key", "case", "ordinal", "execution-id",
    "result-sha256", "host-sha256", "definition-sha256", "archive-sha256",
)

T = TypeVar("T")


def utc_timestamp(seconds: float) -> str:
    """RFC 3339 UTC with a ``Z`` (what the schema and the documents use)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _invalid(source: str, message: str, *, field: str = "/", expected: Any = None, actual: Any = None) -> Refusal:
    return Refusal("ledger.invalid", f"the ledger {source} {message}", field=field, expected=expected,
                   actual=actual)


class Ledger:
    """A ledger document plus its indexes. Mutating methods keep the indexes in step."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self._attempts: dict[tuple[str, int], dict[str, Any]] = {}
        self._by_import_key: dict[str, dict[str, Any]] = {}
        self._by_measurement_key: dict[str, dict[str, Any]] = {}
        self._by_slot: dict[tuple[str, int], dict[str, Any]] = {}
        for case, scenario in document["scenarios"].items():
            for attempt in scenario["attempts"]:
                self._attempts[(case, attempt["ordinal"])] = attempt
        for record in document["imports"]:
            self._index_import(record)

    # --- construction and bytes ------------------------------------------------------------------
    @classmethod
    def new(cls, campaign: str) -> Ledger:
        return cls({"schema": SCHEMA, "campaign": campaign, "scenarios": {}, "imports": []})

    @classmethod
    def parse(cls, data: bytes, source: str = "file") -> Ledger:
        """Parse and validate (schema, then the uniqueness and consistency rules) or ``ledger.invalid``."""
        try:
            document = loads_json(data)
        except json.JSONDecodeError as exc:
            raise _invalid(source, f"is not valid JSON: {exc}", field=getattr(exc, "pointer", "/"),
                           expected="strict UTF-8 JSON") from None
        from testops_evidence.contract import schema_errors

        for where, message, expected in schema_errors("ledger", document):
            raise _invalid(source, f"does not match its schema at {where}: {message}", field=where,
                           expected=expected)
        _check_consistency(document, source)
        return cls(document)

    def to_bytes(self) -> bytes:
        """Sorted JSON with one attempt or import record per line.

        One line per record keeps a committed ledger's diffs readable (an import adds lines, it never
        reflows others).
        """
        document = self.document

        def line(value: Any) -> str:
            return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))

        def rows(values: list[Any], indent: str) -> str:
            if not values:
                return "[]"
            return "[\n" + ",\n".join(indent + "  " + line(v) for v in values) + "\n" + indent + "]"

        scenarios = [f"    {line(case)}: {{\"attempts\": {rows(document['scenarios'][case]['attempts'], '    ')}}}"
                     for case in sorted(document["scenarios"])]
        members = [
            f'  "campaign": {line(document["campaign"])}',
            f'  "imports": {rows(document["imports"], "  ")}',
            f'  "schema": {line(document["schema"])}',
            '  "scenarios": ' + ("{\n" + ",\n".join(scenarios) + "\n  }" if scenarios else "{}"),
        ]
        return ("{\n" + ",\n".join(members) + "\n}\n").encode("utf-8")

    def copy(self) -> Ledger:
        return Ledger(copy.deepcopy(self.document))

    @property
    def campaign(self) -> str:
        campaign: str = self.document["campaign"]
        return campaign

    @property
    def imports(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.document["imports"]
        return records

    def attempts(self, case: str) -> list[dict[str, Any]]:
        scenario = self.document["scenarios"].get(case)
        return [] if scenario is None else list(scenario["attempts"])

    def attempt(self, case: str, ordinal: int) -> dict[str, Any] | None:
        return self._attempts.get((case, ordinal))

    # --- attempts: reserve, then complete --------------------------------------------------------
    def reserve(self, case: str, attempt: Mapping[str, Any]) -> None:
        """Take ``attempt['ordinal']`` in scenario ``case`` (created on first use)."""
        ordinal = attempt["ordinal"]
        if (case, ordinal) in self._attempts:
            raise Refusal("ledger.conflict", f"ordinal {ordinal} of {case!r} is already reserved",
                          field=f"scenarios/{case}/ordinal", expected="a free ordinal", actual=ordinal)
        entry = {**copy.deepcopy(dict(attempt)), "state": "reserved", "completion": None}
        scenario = self.document["scenarios"].setdefault(case, {"attempts": []})
        scenario["attempts"].append(entry)
        self._attempts[(case, ordinal)] = entry

    def complete(self, case: str, ordinal: int, completion: Mapping[str, Any]) -> None:
        attempt = self._attempts.get((case, ordinal))
        if attempt is None or attempt["state"] != "reserved":
            raise Refusal("ledger.conflict", f"ordinal {ordinal} of {case!r} is not a reserved, unfinished attempt",
                          field=f"scenarios/{case}/ordinal", expected="reserved",
                          actual=None if attempt is None else attempt["state"])
        attempt["state"] = "completed"
        attempt["completion"] = copy.deepcopy(dict(completion))

    # --- imports ------------------------------------------------------------------------------------
    def _index_import(self, record: dict[str, Any]) -> None:
        self._by_import_key[record["import-key"]] = record
        self._by_measurement_key[record["measurement-key"]] = record
        self._by_slot[(record["case"], record["ordinal"])] = record

    def recorded(self, record: Mapping[str, Any]) -> bool:
        """True if ``record`` is already in the ledger (a duplicate); raise if it conflicts with one.

        A record is found by its import key, its measurement key or its (case, ordinal). Found by any of
        them, it must agree on every identity field; otherwise ``import.changed_measurement``. An ordinal
        already taken by an attempt that no import produced is a conflict as well.
        """
        found: dict[int, dict[str, Any]] = {}
        for existing in (self._by_import_key.get(record["import-key"]),
                         self._by_measurement_key.get(record["measurement-key"]),
                         self._by_slot.get((record["case"], record["ordinal"]))):
            if existing is not None:
                found[id(existing)] = existing
        if not found:
            taken = self._attempts.get((record["case"], record["ordinal"]))
            if taken is not None:
                raise Refusal("import.changed_measurement", f"ordinal {record['ordinal']} of {record['case']!r} "
                              f"is already taken by execution {taken['execution-id']!r}",
                              field="ordinal", expected="a free ordinal", actual=record["ordinal"])
            return False
        if len(found) > 1:
            keys = sorted(r["import-key"] for r in found.values())
            raise Refusal("import.changed_measurement", "the cell's keys match different recorded imports "
                          f"({', '.join(keys)})", field="import-key", expected="one recorded import",
                          actual=keys)
        (existing,) = found.values()
        for name in IDENTITY_FIELDS:
            if existing[name] != record[name]:
                raise Refusal("import.changed_measurement", f"a re-import of {existing['import-key']} differs "
                              f"from the recorded measurement in {name}", field=name, expected=existing[name],
                              actual=record[name])
        return True

    def add_import(self, record: Mapping[str, Any], attempt: Mapping[str, Any],
                   completion: Mapping[str, Any]) -> str:
        """Apply one validated cell: ``"duplicate"`` (no change) or ``"imported"`` (reserve, complete, record)."""
        if self.recorded(record):
            return "duplicate"
        case, ordinal = record["case"], record["ordinal"]
        self.reserve(case, {**attempt, "ordinal": ordinal, "import-key": record["import-key"]})
        self.complete(case, ordinal, completion)
        entry = copy.deepcopy(dict(record))
        self.imports.append(entry)
        self._index_import(entry)
        return "imported"


def _check_consistency(document: dict[str, Any], source: str) -> None:
    """The rules a schema cannot say: unique ordinals and keys, imports that point to their attempts."""
    attempts: dict[tuple[str, int], dict[str, Any]] = {}
    for case, scenario in document["scenarios"].items():
        for index, attempt in enumerate(scenario["attempts"]):
            where = f"/scenarios/{case}/attempts/{index}"
            slot = (case, attempt["ordinal"])
            if slot in attempts:
                raise _invalid(source, f"has ordinal {attempt['ordinal']} of {case!r} twice", field=where,
                               expected="unique ordinals", actual=attempt["ordinal"])
            attempts[slot] = attempt
            if (attempt["state"] == "completed") != (attempt["completion"] is not None):
                raise _invalid(source, "has an attempt whose state and completion disagree", field=where,
                               expected="completed with a completion, or reserved without",
                               actual=attempt["state"])
    seen: dict[str, set[Any]] = {"import-key": set(), "measurement-key": set(), "slot": set()}
    for index, record in enumerate(document["imports"]):
        where = f"/imports/{index}"
        slot = (record["case"], record["ordinal"])
        for name, value in (("import-key", record["import-key"]), ("measurement-key", record["measurement-key"]),
                            ("slot", slot)):
            if value in seen[name]:
                raise _invalid(source, f"records the {name} {value!r} twice", field=where,
                               expected=f"unique {name}", actual=str(value))
            seen[name].add(value)
        attempt = attempts.get(slot)
        if (attempt is None or attempt["state"] != "completed"
                or attempt.get("import-key") != record["import-key"]
                or attempt["execution-id"] != record["execution-id"]):
            raise _invalid(source, f"has import {record['import-key']!r} without its completed attempt",
                           field=where, expected="a completed attempt of the same execution",
                           actual=None if attempt is None else attempt["state"])


# --- persistence -------------------------------------------------------------------------------------

def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the ledger's sidecar lock file, or refuse ``ledger.locked`` at once.

    A sidecar (never the ledger itself) because the ledger is replaced by rename: a lock on the old
    inode would not exclude a writer that opened the new one. The lock file is never deleted, for the
    same reason. The kernel drops the lock when the process dies, so a crash never leaves it held.
    """
    sidecar = lock_path(path)
    try:
        fd = os.open(sidecar, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        code = "io.unsafe_path" if exc.errno == errno.ELOOP else "io.missing"
        raise Refusal(code, f"the ledger lock {sidecar} cannot be opened ({exc.strerror})", field="ledger",
                      expected="a writable directory without links", actual=str(sidecar)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Refusal("ledger.locked", f"another process holds the lock on {path}", field="ledger",
                          expected="no other writer", actual=str(sidecar)) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def read(path: Path) -> tuple[Ledger, bytes] | None:
    """The ledger at ``path`` and its bytes, or None if there is none yet (links and hard links refused)."""
    try:
        data = read_safe_path(path, limit=LEDGER_LIMIT)
    except Refusal as exc:
        if exc.code == "io.missing":
            return None
        raise
    return Ledger.parse(data, str(path)), data


def load(path: Path, campaign: str) -> tuple[Ledger, bytes | None]:
    """The ledger for ``campaign`` (a new, empty one if the file does not exist)."""
    found = read(path)
    if found is None:
        return Ledger.new(campaign), None
    ledger, data = found
    if ledger.campaign != campaign:
        raise Refusal("ledger.foreign_campaign", f"the ledger {path} belongs to campaign {ledger.campaign!r}",
                      field="campaign", expected=campaign, actual=ledger.campaign)
    return ledger, data


@dataclass(frozen=True)
class Transaction(Generic[T]):
    result: T
    changed: bool
    sha256_before: str | None  # None: the ledger did not exist
    sha256_after: str | None


_TEMP_RE_CACHE: dict[str, re.Pattern[str]] = {}


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files that a killed writer left (only lock holders write, so none is live)."""
    pattern = _TEMP_RE_CACHE.setdefault(path.name, re.compile(
        r"^\." + re.escape(path.name) + r"\.[0-9]+\.[0-9a-f]{8}\.tmp\Z"))
    with suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            if pattern.match(entry.name) and entry.is_file(follow_symlinks=False):
                with suppress(OSError):
                    os.unlink(entry.path)


def transact(path: Path, campaign: str, apply: Callable[[Ledger], T], *, mode: int = 0o644) -> Transaction[T]:
    """Under the lock: load, apply to a copy, persist atomically if the bytes changed.

    ``apply`` may raise a refusal at any point; the file is then untouched (byte-identical).
    """
    if not path.parent.is_dir():
        raise Refusal("io.missing", f"the ledger's directory {path.parent} does not exist", field="ledger",
                      expected="an existing directory", actual=str(path.parent))
    with locked(path):
        _remove_stale_temps(path)
        current, before = load(path, campaign)
        work = current.copy()
        result = apply(work)
        # Compared as documents, not bytes: a hand-formatted ledger is not rewritten by a no-op import.
        if work.document == current.document:
            digest = sha256_bytes(before) if before is not None else None
            return Transaction(result, False, digest, digest)
        after = work.to_bytes()
        write_atomic(path, after, mode=mode)
        return Transaction(result, True, sha256_bytes(before) if before is not None else None, sha256_bytes(after))
