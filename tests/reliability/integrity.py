"""What "no partial file" means, checked the same way by the fault matrix, the hostile-file tests and the
crash tests: no temp leftovers, every JSON document whole, and a tree snapshot to prove that nothing
was written where it must not be."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path


def leftovers(root: Path) -> list[str]:
    """Temp files and directories left behind. Every writer here stages under a name starting with ``.``
    (``.<name>.<pid>.<hex>.tmp``, ``.<dir>.export-…``, ``.<dir>.publish-…``); no real output does."""
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


def torn_documents(root: Path) -> list[str]:
    """JSON files under ``root`` that do not parse (a torn or half-written document)."""
    torn = []
    if not root.is_dir():
        return torn
    for path in sorted(root.rglob("*.json")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            torn.append(str(path.relative_to(root)))
    return torn


def assert_whole(*roots: Path) -> None:
    for root in roots:
        assert leftovers(root) == [], f"temp files left under {root}"
        assert torn_documents(root) == [], f"torn JSON documents under {root}"


def snapshot(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every entry below ``root`` (top-level names starting with a prefix in ``skip`` left out): kind, mode
    and content digest or link target. Two equal snapshots mean nothing was created, changed or removed."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if not d.startswith(skip)]
            filenames = [f for f in filenames if not f.startswith(skip)]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = "link:" + os.readlink(path)
            elif stat.S_ISREG(st.st_mode) and st.st_size > 1024 * 1024:  # the sparse oversized inputs
                found[rel] = f"file:{oct(st.st_mode)}:{st.st_size}:{st.st_mtime_ns}"
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    found[rel] = f"file:{oct(st.st_mode)}:" + hashlib.sha256(handle.read()).hexdigest()
            else:
                found[rel] = f"other:{oct(st.st_mode)}"
    return found
