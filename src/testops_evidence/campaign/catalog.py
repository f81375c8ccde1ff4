"""Catalog filter: a copy of the user's catalog that keeps only the selected cases.

A catalog is whatever the harness reads to know how to run a case (fixtures, prompts, rosters). The
filter never rewrites the input: it writes a new file next to the selection, write-once. Three shapes
are accepted, and the copy keeps the shape:

* ``{"cases": {"<key>": {...}, ...}, ...}`` — a mapping by case key; other top-level fields are kept;
* ``{"cases": [{"key": "<key>", ...}, ...], ...}`` — a list of entries with a ``key``;
* ``[{"key": "<key>", ...}, ...]`` — the list alone.

Every selected case must have exactly one entry (``selection.catalog`` otherwise); entries of cases that
are not selected, including ones the contract does not know, are dropped. Entries keep the selection's
order when the catalog is a list.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, parse_json_bytes, read_safe_path, write_once

CATALOG_LIMIT = 64 * 1024 * 1024


def _refuse(message: str, field: str, expected: Any, actual: Any) -> Refusal:
    return Refusal("selection.catalog", message, field=field, expected=expected, actual=actual)


def filter_catalog(document: Any, keys: Sequence[str]) -> Any:
    """The filtered catalog for ``keys`` (the selected case keys, in selection order)."""
    if isinstance(document, list):
        return _filter_list(document, keys, "")
    if not isinstance(document, dict) or "cases" not in document:
        raise _refuse("the catalog is neither a list of entries nor an object with `cases`", "/",
                      "{\"cases\": {...}} or {\"cases\": [...]} or [...]", type(document).__name__)
    cases = document["cases"]
    if isinstance(cases, dict):
        missing = [key for key in keys if key not in cases]
        if missing:
            raise _refuse(f"the catalog has no entry for {len(missing)} selected case(s)", "/cases",
                          "an entry for every selected case", missing[:20])
        return {**document, "cases": {key: cases[key] for key in keys}}
    if isinstance(cases, list):
        return {**document, "cases": _filter_list(cases, keys, "/cases")}
    raise _refuse("the catalog's `cases` is neither an object nor a list", "/cases", "an object or a list",
                  type(cases).__name__)


def _filter_list(entries: list[Any], keys: Sequence[str], where: str) -> list[Any]:
    wanted = set(keys)
    found: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise _refuse("a catalog entry has no string `key`", f"{where}/{index}", "an object with a key",
                          type(entry).__name__ if not isinstance(entry, dict) else sorted(entry)[:10])
        key = entry["key"]
        if key in wanted:
            if key in found:
                raise _refuse(f"the catalog lists case {key!r} twice", f"{where}/{index}/key", "each key once", key)
            found[key] = entry
    missing = [key for key in keys if key not in found]
    if missing:
        raise _refuse(f"the catalog has no entry for {len(missing)} selected case(s)", where or "/",
                      "an entry for every selected case", missing[:20])
    return [found[key] for key in keys]


def catalog_output_path(selection_path: str | os.PathLike[str]) -> Path:
    """Where the filtered copy goes: next to the selection, ``<selection stem>.catalog.json``."""
    path = Path(selection_path)
    stem = path.name[:-len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(f"{stem}.catalog.json")


def read_catalog(path: str | os.PathLike[str], *, limit: int = CATALOG_LIMIT) -> Any:
    try:
        data = read_safe_path(path, limit=limit)
    except Refusal as exc:
        if exc.code == "io.missing":
            raise _refuse(f"the catalog {os.fspath(path)} does not exist", "catalog", "an existing JSON file",
                          os.fspath(path)) from None
        raise
    try:
        return parse_json_bytes(data, "the catalog")
    except Refusal as exc:
        raise _refuse(exc.message, "catalog", "UTF-8 JSON", os.fspath(path)) from None


def filtered_catalog_bytes(source: str | os.PathLike[str], target: str | os.PathLike[str],
                           keys: Sequence[str]) -> bytes:
    """The canonical bytes of the filtered copy of ``source`` (checked before anything is written)."""
    if os.path.abspath(source) == os.path.abspath(target):
        raise _refuse("the filtered catalog would overwrite its input", "catalog", "another path",
                      os.fspath(source))
    return canonical_json(filter_catalog(read_catalog(source), keys))


def write_filtered_catalog(target: str | os.PathLike[str], data: bytes) -> Path:
    """Write the filtered copy once (O_EXCL, 0600): an existing file, the input included, is refused."""
    return write_once(target, data, mode=0o600)
