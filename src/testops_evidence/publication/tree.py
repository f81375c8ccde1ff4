"""Safe listing and hashing of directories that come from other jobs (cell results, allure-results).

Directories are opened component by component with ``O_NOFOLLOW`` and ``dir_fd`` and listed from the
open descriptor, so a symbolic link planted in an artifact can never redirect a read; links, devices
and unsafe names (``safeio.readable_name``: separators, control and format characters) are refused rather
than skipped, because a skipped entry would be evidence silently ignored. Such a name refusal has the field
``name``, so a reader can tell it from a link or a device.

:func:`check_exact` is the one rule for a directory a job binds by digests: it holds exactly the files they
name, at any depth, and nothing else (``io.extra_file``), because whoever reads it next (Allure Report, a
Pages site, export) reads every file there, bound or not.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from testops_evidence.errors import Refusal
from testops_evidence.safeio import open_safe, readable_name, sha256_fd

# An allure-results directory holds two files per case plus a few extras; 10,000 cases fit easily.
MAX_ENTRIES = 100_000
_NAMES = "names without separators, control or format characters, '.' or '..'"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int


def _open_dir(root: str | os.PathLike[str], relpath: str) -> int:
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        raise Refusal("io.missing", f"directory {root} does not exist", field="path",
                      expected="an existing directory", actual=str(root)) from None
    except OSError as exc:
        raise Refusal("io.unsafe_path", f"{root} cannot be opened as a directory without following links "
                      f"({exc.strerror})", field="path", expected="a real directory", actual=str(root)) from None
    for part in [p for p in relpath.split("/") if p]:
        if not readable_name(part):
            os.close(fd)
            raise Refusal("io.unsafe_path", f"path component {part!r} is not allowed", field="name",
                          expected=_NAMES, actual=relpath)
        try:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise Refusal("io.unsafe_path", f"{relpath} is not a real directory ({exc.strerror})", field="path",
                          expected="a directory, not a link", actual=relpath) from None
        finally:
            os.close(fd)
        fd = nxt
    return fd


def list_dir(root: str | os.PathLike[str], relpath: str = "") -> list[Entry]:
    """Entries of ``root/relpath`` sorted by name; regular files and directories only."""
    fd = _open_dir(root, relpath)
    entries: list[Entry] = []
    try:
        with os.scandir(fd) as scan:
            for item in scan:
                where = f"{relpath}/{item.name}" if relpath else item.name
                if not readable_name(item.name):
                    raise Refusal("io.unsafe_path", f"{where!r} has an unsafe name (a separator, a control or "
                                  "format character, not UTF-8, or over 255 bytes)", field="name", expected=_NAMES,
                                  actual=where)
                st = item.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    entries.append(Entry(item.name, True, 0))
                elif stat.S_ISREG(st.st_mode):
                    entries.append(Entry(item.name, False, st.st_size))
                else:
                    raise Refusal("io.unsafe_path", f"{where} is neither a regular file nor a directory",
                                  field="path", expected="regular files and directories only", actual=where)
                if len(entries) > MAX_ENTRIES:
                    raise Refusal("io.too_large", f"{root}/{relpath} has more than {MAX_ENTRIES} entries",
                                  field="entries", expected=f"<= {MAX_ENTRIES}", actual="more")
    finally:
        os.close(fd)
    return sorted(entries, key=lambda e: e.name)


def hash_file(root: str | os.PathLike[str], relpath: str, *, limit: int) -> tuple[str, int]:
    """SHA-256 and size of ``root/relpath``, read through the safe opener (streamed, constant memory)."""
    with open_safe(root, relpath, limit=limit) as (fd, st):
        return sha256_fd(fd), st.st_size


def walk_files(root: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Every regular file below ``root`` (relative paths joined with ``/``) and every empty directory, both
    sorted, walked through :func:`list_dir`: a link, a device or a name outside the allowed alphabet anywhere
    below refuses the walk (``io.unsafe_path``), and so do more than :data:`MAX_ENTRIES` entries in all."""
    files: list[str] = []
    empty: list[str] = []
    pending = [""]
    seen = 0
    while pending:
        relpath = pending.pop()
        entries = list_dir(root, relpath)
        seen += len(entries)
        if seen > MAX_ENTRIES:
            raise Refusal("io.too_large", f"{root} holds more than {MAX_ENTRIES} entries", field="entries",
                          expected=f"<= {MAX_ENTRIES}", actual="more")
        if not entries and relpath:
            empty.append(relpath)
        for entry in entries:
            where = f"{relpath}/{entry.name}" if relpath else entry.name
            if entry.is_dir:
                pending.append(where)
            else:
                files.append(where)
    return sorted(files), sorted(empty)


def refuse_extra(root: str | os.PathLike[str], present: Iterable[str], expected: Iterable[str], *,
                 binding: str) -> None:
    """``io.extra_file`` naming the first entry of ``present`` that ``expected`` does not list: a directory
    holds exactly the files its binding names, because a consumer (Allure Report, a Pages site) reads every
    file there, bound or not."""
    allowed = set(expected)
    extra = sorted(name for name in present if name not in allowed)
    if extra:
        raise Refusal("io.extra_file", f"{root} holds {extra[0]}, which {binding} does not list"
                      + (f" ({len(extra)} such entries)" if len(extra) > 1 else ""), field=extra[0],
                      expected=f"only the files {binding} lists", actual=extra[:10])


def check_exact(root: str | os.PathLike[str], expected: Mapping[str, str], *, code: str, binding: str,
                limit: int, hash_files: bool = True, unread: Iterable[str] = ()) -> int:
    """Refuse unless ``root`` holds exactly the files of ``expected`` (relative path -> SHA-256), nothing else
    (``io.extra_file``: an extra file or empty directory, recursively), none missing and each hashing to its
    digest (``code``). Links and special files anywhere below are refused by the walk. Returns the number of
    files. ``hash_files=False`` checks the set alone, for a caller that reads each file once against its
    digest itself (no check-then-read gap). ``unread``: files that may also be there, which the caller
    neither reads nor passes on (added after the binding was made)."""
    files, empty = walk_files(root)
    skipped = set(unread) - set(expected)
    files = [name for name in files if name not in skipped]
    refuse_extra(root, [*files, *(f"{name}/" for name in empty)], expected, binding=binding)
    missing = sorted(set(expected) - set(files))
    if missing:
        raise Refusal(code, f"{root} lacks {missing[0]}, which {binding} lists"
                      + (f" ({len(missing)} missing)" if len(missing) > 1 else ""), field=missing[0],
                      expected=f"every file {binding} lists", actual=f"{len(missing)} missing")
    if hash_files:
        for name in files:
            digest, _size = hash_file(root, name, limit=limit)
            if digest != expected[name]:
                raise Refusal(code, f"{name} in {root} does not hash to the digest {binding} names", field=name,
                              expected=expected[name], actual=digest)
    return len(files)


def is_empty_or_absent(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        return False
    return not os.listdir(path)


def write_new(path: Path | str, data: bytes, *, dir_fd: int | None = None) -> None:
    """Create ``path`` (O_EXCL, no link followed, 0600) with ``data``: for files inside a private directory
    that is renamed into place afterwards.

    Not fsynced, on purpose: the rename shows readers all files or none, and every file's SHA-256 is in
    the receipt, which is written durably, so a file torn by a crash is refused by its digest
    (``upload.results_invalid``, verify), never trusted. With ``dir_fd`` (the private directory, opened
    once) ``path`` is a name in it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600,
                 dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
