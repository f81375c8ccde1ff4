"""The campaign ledger: reserve/complete, idempotent imports, locking, atomic persistence, validation."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testops_evidence.campaign import ledger as ledger_module
from testops_evidence.campaign.ledger import IDENTITY_FIELDS, Ledger, load, lock_path, transact
from testops_evidence.errors import Refusal

SHA = "0123456789abcdef0123456789abcdef01234567"


def record(n: int, *, case: str = "get-task-context", ordinal: int | None = None, **changes: Any) -> dict[str, Any]:
    body = {
        "import-key": f"4242/1/exec-{n}",
        "measurement-key": f"nightly/{n:032x}/exec-{n}",
        "case": case,
        "ordinal": n if ordinal is None else ordinal,
        "execution-id": f"exec-{n}",
        "result-sha256": f"{n:064x}",
        "host-sha256": "1" * 64,
        "definition-sha256": "2" * 64,
        "archive-sha256": "3" * 64,
        "result-path": f"results/exec-{n}/result.json",
        "provenance": {"repository": "acme/agents", "workflow": ".github/workflows/e2e.yml", "ref": "refs/heads/main",
                       "run-id": 4242, "run-attempt": 1, "head-sha": SHA, "artifact-id": 7, "artifact-name": "cells",
                       "artifact-size": 1000},
        "imported-at": "2026-12-01T11:00:00Z",
    }
    body.update(changes)
    return body


def attempt(n: int) -> dict[str, Any]:
    return {"execution-id": f"exec-{n}", "source-revision": SHA, "reserved-at": "2026-12-01T11:00:00Z",
            "started-at": "2026-12-01T10:00:00Z", "profile": {"id": "p"}, "definition-digest": "4" * 64}


def completion(n: int) -> dict[str, Any]:
    return {"finished-at": "2026-12-01T10:05:00Z", "disposition": "passed", "checks": {"c": True},
            "usage": {"tokens": n}, "duration-ms": 1000, "evidence": [f"results/exec-{n}/result.json"]}


def imported(ledger: Ledger, n: int, **changes: Any) -> str:
    rec = record(n, **changes)
    return ledger.add_import(rec, {**attempt(n), "execution-id": rec["execution-id"]}, completion(n))


def test_an_import_reserves_and_completes_an_attempt_and_records_it() -> None:
    ledger = Ledger.new("agent-protocol")
    assert imported(ledger, 1) == "imported"
    (entry,) = ledger.attempts("get-task-context")
    assert entry["state"] == "completed" and entry["ordinal"] == 1 and entry["import-key"] == "4242/1/exec-1"
    assert entry["completion"]["disposition"] == "passed"
    assert ledger.imports[0]["host-sha256"] == "1" * 64
    # What it persists is valid and parses back to the same document.
    assert Ledger.parse(ledger.to_bytes()).document == ledger.document


def test_bytes_are_sorted_json_with_one_record_per_line() -> None:
    empty = Ledger.new("agent-protocol")
    assert json.loads(empty.to_bytes()) == empty.document
    ledger = Ledger.new("agent-protocol")
    for n in range(1, 4):
        imported(ledger, n, case=f"case-{n % 2}")
    data = ledger.to_bytes()
    assert json.loads(data) == ledger.document and data.endswith(b"\n")
    lines = data.decode().splitlines()
    assert sum(line.lstrip().startswith('{"completion"') for line in lines) == 3  # attempts
    assert sum(line.lstrip().startswith('{"archive-sha256"') for line in lines) == 3  # imports
    assert Ledger.parse(data).to_bytes() == data  # a fixed point: parse, then write, gives the same bytes


def test_the_same_measurement_again_is_a_duplicate_and_changes_nothing() -> None:
    ledger = Ledger.new("agent-protocol")
    imported(ledger, 1)
    before = ledger.to_bytes()
    assert imported(ledger, 1, **{"imported-at": "2027-01-01T00:00:00Z"}) == "duplicate"
    assert ledger.to_bytes() == before


@pytest.mark.parametrize("name", [f for f in IDENTITY_FIELDS if f not in ("case", "execution-id")])
def test_a_changed_measurement_is_refused_field_by_field(name: str) -> None:
    ledger = Ledger.new("agent-protocol")
    imported(ledger, 1)
    changed = {"import-key": "4242/2/exec-1", "measurement-key": "nightly/x/exec-1", "ordinal": 1,
               "result-sha256": "f" * 64, "host-sha256": "e" * 64, "definition-sha256": "d" * 64,
               "archive-sha256": "c" * 64}
    # Keep the other keys so the record is still found; an ordinal change is found by the import key.
    with pytest.raises(Refusal) as caught:
        imported(ledger, 1, **{name: changed[name] if name != "ordinal" else 2})
    assert caught.value.code == "import.changed_measurement"
    assert caught.value.field == name


def test_keys_matching_two_different_records_are_refused() -> None:
    ledger = Ledger.new("agent-protocol")
    imported(ledger, 1)
    imported(ledger, 2)
    with pytest.raises(Refusal) as caught:
        imported(ledger, 3, **{"import-key": "4242/1/exec-1", "measurement-key": f"nightly/{2:032x}/exec-2"})
    assert caught.value.code == "import.changed_measurement" and caught.value.field == "import-key"


def test_an_ordinal_taken_by_a_local_attempt_is_a_changed_measurement() -> None:
    ledger = Ledger.new("agent-protocol")
    ledger.reserve("get-task-context", {**attempt(9), "ordinal": 1})
    with pytest.raises(Refusal) as caught:
        imported(ledger, 1)
    assert caught.value.code == "import.changed_measurement" and caught.value.field == "ordinal"


def test_reserve_then_complete_rules() -> None:
    ledger = Ledger.new("agent-protocol")
    ledger.reserve("get-task-context", {**attempt(1), "ordinal": 1})
    with pytest.raises(Refusal) as twice:
        ledger.reserve("get-task-context", {**attempt(2), "ordinal": 1})
    assert twice.value.code == "ledger.conflict"
    with pytest.raises(Refusal) as unreserved:
        ledger.complete("get-task-context", 2, completion(2))
    assert unreserved.value.code == "ledger.conflict"
    ledger.complete("get-task-context", 1, completion(1))
    with pytest.raises(Refusal) as again:
        ledger.complete("get-task-context", 1, completion(1))
    assert again.value.code == "ledger.conflict"
    assert Ledger.parse(ledger.to_bytes()).attempt("get-task-context", 1) is not None


# --- validation of an existing ledger ---------------------------------------------------------------

def _valid_document() -> dict[str, Any]:
    ledger = Ledger.new("agent-protocol")
    imported(ledger, 1)
    imported(ledger, 2)
    return json.loads(ledger.to_bytes())


def _break(path: str, value: Any) -> dict[str, Any]:
    document = _valid_document()
    node: Any = document
    parts = path.split("/")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return document


@pytest.mark.parametrize(("path", "value", "field"), [
    ("schema", "testops-evidence/ledger/v0", "/schema"),
    ("campaign", "Not A Key", "/campaign"),
    ("imports/0/archive-sha256", "nothex", "/imports/0/archive-sha256"),
    ("scenarios/get-task-context/attempts/0/state", "started", "/scenarios/get-task-context/attempts/0/state"),
    ("imports/1/import-key", "4242/1/exec-1", "/imports/1"),  # duplicate import key
    ("imports/1/measurement-key", "nightly/00000000000000000000000000000001/exec-1", "/imports/1"),
    ("scenarios/get-task-context/attempts/1/ordinal", 1, "/scenarios/get-task-context/attempts/1"),
    ("scenarios/get-task-context/attempts/0/completion", None, "/scenarios/get-task-context/attempts/0"),
    ("imports/0/execution-id", "exec-9", "/imports/0"),  # points to another execution's attempt
])
def test_an_inconsistent_ledger_is_invalid(path: str, value: Any, field: str) -> None:
    with pytest.raises(Refusal) as caught:
        Ledger.parse(json.dumps(_break(path, value)).encode())
    assert caught.value.code == "ledger.invalid"
    assert caught.value.field == field


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_arbitrary_json_is_a_ledger_or_ledger_invalid(value: Any) -> None:
    for candidate in (value, {**_valid_document(), "imports": value}, {**_valid_document(), "scenarios": value}):
        try:
            Ledger.parse(json.dumps(candidate).encode())
        except Refusal as refusal:
            assert refusal.code == "ledger.invalid"


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_ledger_invalid(data: bytes) -> None:
    with pytest.raises(Refusal) as caught:
        Ledger.parse(data)
    assert caught.value.code == "ledger.invalid"


# --- persistence -----------------------------------------------------------------------------------

def _import_one(n: int) -> Any:
    def apply(ledger: Ledger) -> str:
        return imported(ledger, n)
    return apply


def test_transact_creates_then_appends_atomically(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    first = transact(path, "agent-protocol", _import_one(1))
    assert first.result == "imported" and first.changed and first.sha256_before is None
    second = transact(path, "agent-protocol", _import_one(2))
    assert second.sha256_before == first.sha256_after and second.changed
    loaded, data = load(path, "agent-protocol")
    assert [r["import-key"] for r in loaded.imports] == ["4242/1/exec-1", "4242/1/exec-2"]
    assert data == loaded.to_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json", "ledger.json.lock"]
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_a_duplicate_transaction_does_not_touch_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    transact(path, "agent-protocol", _import_one(1))
    # Hand-formatted (compact) JSON of the same document stays as it is: no rewrite for a no-op.
    compact = json.dumps(json.loads(path.read_bytes())).encode()
    path.write_bytes(compact)
    stat_before = os.stat(path)
    outcome = transact(path, "agent-protocol", _import_one(1))
    assert outcome.result == "duplicate" and not outcome.changed
    assert path.read_bytes() == compact and os.stat(path).st_ino == stat_before.st_ino


def test_a_refusal_inside_the_transaction_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    transact(path, "agent-protocol", _import_one(1))
    before = path.read_bytes()

    def apply(ledger: Ledger) -> None:
        imported(ledger, 2)  # applied to the copy ...
        imported(ledger, 1, **{"result-sha256": "f" * 64})  # ... then refused

    with pytest.raises(Refusal) as caught:
        transact(path, "agent-protocol", apply)
    assert caught.value.code == "import.changed_measurement"
    assert path.read_bytes() == before


def test_a_held_lock_refuses_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Refusal) as caught:
            transact(path, "agent-protocol", _import_one(1))
        assert caught.value.code == "ledger.locked" and caught.value.exit_code == 4
        assert not path.exists()
    finally:
        os.close(fd)
    transact(path, "agent-protocol", _import_one(1))  # released: works


def test_a_ledger_of_another_campaign_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    transact(path, "agent-protocol", _import_one(1))
    before = path.read_bytes()
    with pytest.raises(Refusal) as caught:
        transact(path, "other-campaign", _import_one(2))
    assert caught.value.code == "ledger.foreign_campaign"
    assert path.read_bytes() == before


def test_an_invalid_ledger_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_bytes(b'{"schema": "something else"}\n')
    with pytest.raises(Refusal) as caught:
        transact(path, "agent-protocol", _import_one(1))
    assert caught.value.code == "ledger.invalid"
    assert path.read_bytes() == b'{"schema": "something else"}\n'


def test_links_are_refused_for_the_ledger_and_its_lock(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    transact(real, "agent-protocol", _import_one(1))
    link = tmp_path / "ledger.json"
    link.symlink_to(real)
    with pytest.raises(Refusal) as caught:
        transact(link, "agent-protocol", _import_one(2))
    assert caught.value.code == "io.unsafe_path"
    other = tmp_path / "other.json"
    lock_path(other).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Refusal) as lock_caught:
        transact(other, "agent-protocol", _import_one(1))
    assert lock_caught.value.code == "io.unsafe_path"
    assert not (tmp_path / "elsewhere").exists()


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Refusal) as caught:
        transact(tmp_path / "absent" / "ledger.json", "agent-protocol", _import_one(1))
    assert caught.value.code == "io.missing"


def test_temp_files_of_a_killed_writer_are_cleaned_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    # Made by safeio's own temp-file writer, so a change of its naming cannot slip past this test.
    from testops_evidence.safeio import _write_temp

    stale = _write_temp(tmp_path, "ledger.json", b"half a ledger", 0o600)
    unrelated = tmp_path / ".other.json.12345.0badcafe.tmp"
    unrelated.write_bytes(b"not ours")
    transact(path, "agent-protocol", _import_one(1))
    assert not stale.exists() and unrelated.exists()


def test_lookups_are_indexed() -> None:
    # Import cost must not grow with the ledger: the indexes answer without scanning the records.
    ledger = Ledger.new("agent-protocol")
    for n in range(1, 2001):
        imported(ledger, n, case=f"case-{n % 7}", ordinal=n)
    assert len(ledger._by_import_key) == len(ledger._by_measurement_key) == len(ledger._by_slot) == 2000
    ledger.document["imports"] = _Exploding(ledger.document["imports"])  # any scan would raise
    assert imported(ledger, 1500, case=f"case-{1500 % 7}", ordinal=1500) == "duplicate"


class _Exploding(list[Any]):
    def __iter__(self) -> Any:
        raise AssertionError("a lookup scanned the import records")


def test_module_has_no_heavy_imports_at_top() -> None:
    source = Path(ledger_module.__file__).read_text()
    assert "\nimport jsonschema" not in source and "\nfrom jsonschema" not in source
