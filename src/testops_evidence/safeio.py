"""Safe file IO: the one way files from other jobs, artifacts and the state directory are touched.

* :func:`read_safe` opens a file below a root component by component with ``O_NOFOLLOW`` and
  ``dir_fd`` (no check-then-open race), then checks the open descriptor: regular file, ``nlink == 1``,
  size cap. Names must use a small allowed alphabet and never be ``.`` or ``..``.
* :func:`write_once` creates a file with ``O_EXCL`` and mode 0600 and fsyncs it: a receipt is never
  overwritten and never half-written under its final name (it is written to a temp name and linked).
* :func:`write_atomic` replaces a file atomically (temp file, fsync, rename, directory fsync).
* :class:`StateDir` is the per-run state directory (0700, owned by us, not a link) holding receipts,
  once-markers and ``failure.json``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.readers import strictjson

# Hashing streams through a buffer that stays in the CPU's cache while SHA-256 reads it (BENCHMARKS.md, digest).
HASH_CHUNK = 64 * 1024
READ_CHUNK = 1024 * 1024  # reading a whole document into memory: fewer, larger reads
NAME_PATTERN = r"^[A-Za-z0-9._-]{1,200}\Z"  # \Z, not $: $ also matches before a final line break
NAME_RE = re.compile(NAME_PATTERN)


def valid_name(name: str) -> bool:
    """A file name of the allowed alphabet, 1 to 200 characters (the whole name: no trailing newline)."""
    return NAME_RE.match(name) is not None


# Unicode categories a name read from another job may not hold: control characters (NUL, line breaks, escapes),
# format characters (bidirectional overrides, zero-width joiners: a name that displays as another), surrogates
# (bytes that are not UTF-8) and line or paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
READ_NAME_BYTES = 255  # NAME_MAX on Linux and macOS


def readable_name(name: str) -> bool:
    """A name this project may *read* below a root it was given: what producers write by default (``+`` in
    Inspect AI's older log names, ``#`` in Marathon's JUnit reports, spaces in MSTest's, ``:``, non-ASCII
    letters) is accepted; what is unsafe is not — a separator (``/``, ``\\``), ``.`` and ``..``, a control,
    format or separator character, a name that is not UTF-8, or more than 255 bytes. Leading ``-`` is accepted:
    names never reach a command line. Names this project *writes* keep to :func:`valid_name`."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return False
    if name.isascii():
        return len(name) <= READ_NAME_BYTES and all(" " <= ch < "\x7f" for ch in name)
    if any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in name):
        return False
    return len(name.encode("utf-8")) <= READ_NAME_BYTES


def canonical_json(value: Any) -> bytes:
    """Canonical bytes: sorted keys, fixed separators, UTF-8, trailing newline (reproducible digests)."""
    return (canonical_text(value) + "\n").encode("utf-8")


def canonical_text(value: Any) -> str:
    """The text of :func:`canonical_json` (no final line break)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pretty_json(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_fd(fd: int) -> str:
    """Stream a descriptor through SHA-256 (constant memory), from its current offset."""
    with open(fd, "rb", buffering=0, closefd=False) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def _split_relative(relpath: str) -> list[str]:
    if not relpath or relpath.startswith("/") or "\\" in relpath or "\x00" in relpath:
        raise Refusal("io.unsafe_path", f"path {relpath!r} is not a relative path inside its root",
                      field="path", expected="a relative path", actual=relpath)
    parts = relpath.split("/")
    for part in parts:
        if not readable_name(part):
            raise Refusal("io.unsafe_path", f"path {relpath!r} has a disallowed component {part!r}",
                          field="name", expected="names without separators, control or format characters, "
                          "'.' or '..'", actual=relpath)
    return parts


def relative_to_root(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """Express ``path`` relative to ``root`` lexically, refusing any escape."""
    root_abs = os.path.abspath(root)
    path_abs = os.path.abspath(path)
    if os.path.commonpath([root_abs, path_abs]) != root_abs or root_abs == path_abs:
        raise Refusal("io.unsafe_path", f"{path} is not inside {root}", field="path",
                      expected=f"inside {root}", actual=str(path))
    return os.path.relpath(path_abs, root_abs).replace(os.sep, "/")


class open_safe:
    """``with open_safe(root, relpath, limit=...) as (fd, st):`` — ``root/relpath`` opened for reading
    without following links, checked on the descriptor; both descriptors are closed on exit."""

    def __init__(self, root: str | os.PathLike[str], relpath: str, *, limit: int) -> None:
        self._args = (root, relpath, limit)
        self._fds: tuple[int, int] = (-1, -1)

    def __enter__(self) -> tuple[int, os.stat_result]:
        dir_fd, fd, st = _open_below(*self._args)
        self._fds = (dir_fd, fd)
        return fd, st

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        dir_fd, fd = self._fds
        os.close(fd)
        if dir_fd >= 0:
            os.close(dir_fd)


_FLAGS_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_root(root: str | os.PathLike[str]) -> int:
    try:
        return os.open(root, _FLAGS_DIR)
    except OSError as exc:
        raise Refusal("io.unsafe_path", f"root {root} cannot be opened as a directory ({exc.strerror})",
                      field="root", expected="a real directory", actual=str(root)) from None


def _open_below(root: str | os.PathLike[str], relpath: str, limit: int,
                root_fd: int | None = None) -> tuple[int, int, os.stat_result]:
    """``(dir_fd, fd, fstat)`` of ``root/relpath``; on a refusal nothing is left open. With ``root_fd`` (the
    root already open, :class:`SafeRoot`) the walk starts there and that descriptor is never closed;
    ``dir_fd`` is then -1 when the file lies directly in the root."""
    parts = _split_relative(relpath)
    flags_dir = _FLAGS_DIR
    owned = root_fd is None
    dir_fd = _open_root(root) if root_fd is None else root_fd
    fd = -1
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags_dir, dir_fd=dir_fd)
            except OSError as exc:
                raise _open_refusal(relpath, exc) from None
            if owned:
                os.close(dir_fd)
            dir_fd, owned = nxt, True
        try:
            # O_NONBLOCK: opening a FIFO must not hang; it is refused below by the fstat check.
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                         dir_fd=dir_fd)
        except OSError as exc:
            raise _open_refusal(relpath, exc) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refusal("io.unsafe_path", f"{relpath} is not a regular file", field="path",
                          expected="a regular file", actual=_kind(st.st_mode))
        if st.st_nlink == 2 and _drop_crash_twin(dir_fd, parts[-1], st):
            st = os.fstat(fd)
        if st.st_nlink != 1:
            raise Refusal("io.unsafe_path", f"{relpath} has {st.st_nlink} hard links", field="path",
                          expected="nlink == 1", actual=st.st_nlink)
        if st.st_size > limit:
            raise Refusal("io.too_large", f"{relpath} is {st.st_size} bytes, over the {limit}-byte cap",
                          field="size", expected=f"<= {limit}", actual=st.st_size)
        os.set_blocking(fd, True)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if owned:
            os.close(dir_fd)
        raise
    return (dir_fd if owned else -1), fd, st


def _drop_crash_twin(dir_fd: int, name: str, st: os.stat_result) -> bool:
    """Remove the hidden second link a kill in :func:`write_once`'s fallback leaves beside ``name`` (the temp
    ``.<name>.<pid>.<hex>.tmp``, the same inode in the same directory): the file itself is whole, and
    nothing outside the directory shares it. Any other second link is left alone (and refused)."""
    prefix, removed = f".{name}.", False
    for entry in os.listdir(dir_fd):
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        middle = entry[len(prefix):-len(".tmp")].split(".")
        if len(middle) != 2 or not middle[0].isdigit() or len(middle[1]) != 8:
            continue
        try:
            twin = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
            if (twin.st_ino, twin.st_dev) == (st.st_ino, st.st_dev) and stat.S_ISREG(twin.st_mode):
                os.unlink(entry, dir_fd=dir_fd)
                removed = True
        except OSError:
            continue
    return removed


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symlink")):
        if test(mode):
            return name
    return "other"


def _open_refusal(relpath: str, exc: OSError) -> Refusal:
    if exc.errno == errno.ENOENT:
        return Refusal("io.missing", f"{relpath} does not exist", field="path", expected="an existing file",
                       actual=relpath)
    if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
        return Refusal("io.unsafe_path", f"{relpath} passes through a symbolic link or a non-directory",
                       field="path", expected="no links", actual=relpath)
    return Refusal("io.unsafe_path", f"{relpath} cannot be opened safely ({exc.strerror})", field="path",
                   expected="a readable regular file", actual=relpath)


def read_safe(root: str | os.PathLike[str], relpath: str, *, limit: int) -> bytes:
    """Read a whole file below ``root`` through :func:`open_safe` (the size cap bounds memory)."""
    with open_safe(root, relpath, limit=limit) as (fd, _st):
        return _read_capped(fd, relpath, limit)


class SafeRoot:
    """A directory opened once (no link followed) and read many times, each file with the checks of
    :func:`read_safe`. The descriptor pins the directory: a root swapped for a link after it was opened is not
    followed."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = root
        self._fd = -1

    def __enter__(self) -> SafeRoot:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def read(self, relpath: str, *, limit: int) -> bytes:
        if self._fd < 0:
            self._fd = _open_root(self.root)  # opened at the first read: the same refusal as read_safe's
        dir_fd, fd, _st = _open_below(self.root, relpath, limit, self._fd)
        try:
            return _read_capped(fd, relpath, limit)
        finally:
            os.close(fd)
            if dir_fd >= 0:
                os.close(dir_fd)


def _read_capped(fd: int, relpath: str, limit: int) -> bytes:
    chunks = []
    remaining = limit + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:  # the file grew after fstat
        raise Refusal("io.too_large", f"{relpath} grew past the {limit}-byte cap while read",
                      field="size", expected=f"<= {limit}", actual=len(data))
    return data


def read_safe_path(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """Read a file named by an absolute or relative path: its parent is the root, links refused."""
    p = Path(path)
    return read_safe(p.parent if str(p.parent) else ".", p.name, limit=limit)


def has_lone_surrogate(value: Any) -> bool:
    """True if a string or key of a JSON-like value holds a lone surrogate, which UTF-8 cannot encode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads_json(text: str | bytes) -> Any:
    """Strict JSON (:mod:`strictjson`): refuses NaN and Infinity, duplicate keys, integers outside 64 bits
    and lone surrogate escapes, raising :class:`strictjson.JSONProblem` — a ``json.JSONDecodeError``
    with the problem's JSON pointer, line and column."""
    return strictjson.loads(text)


def parse_json_bytes(data: bytes, what: str, code: str = "io.invalid_json") -> Any:
    """Strict JSON from bytes, or a refusal with the caller's area ``code`` naming line and column."""
    return strictjson.load_document(data, what, code)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _write_temp(directory: Path, name: str, data: bytes, mode: int) -> Path:
    tmp = directory / f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        raise _write_refusal(directory / name, exc) from None
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        _unlink_quietly(tmp)
        if isinstance(exc, OSError):
            raise _write_refusal(directory / name, exc) from None
        raise
    os.close(fd)
    return tmp


# Errors that say the file system cannot take the write (full, over quota, too large, read-only, not
# permitted): a coded refusal naming the file, never internal.error.
_WRITE_ERRORS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
                 errno.EFBIG: "the file is larger than the file system or limit allows",
                 errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                 errno.EPERM: "the operation is not permitted"}


def _write_refusal(target: Path, exc: OSError) -> Refusal:
    if exc.errno == errno.EEXIST:
        return Refusal("io.exists", f"{target} already exists", field="path", expected="no existing file",
                       actual=str(target))
    reason = _WRITE_ERRORS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return Refusal("io.write_failed", f"{target} could not be written: {reason}", field="path",
                   expected="a writable file system with free space", actual=str(target))


# Create-once by renaming a complete temp file into place only if the name is free, in one system call:
# Linux renameat2(RENAME_NOREPLACE) (3.15+, glibc 2.28+), macOS renamex_np(RENAME_EXCL) (10.12+). Where
# neither exists, or the file system refuses the flag (EINVAL; some network file systems), the fallback
# links the temp to the name (EEXIST if taken) and unlinks the temp: a kill between the two leaves the
# complete file with a second, hidden link, which readers recognise as this crash's leftover and remove
# (:func:`_drop_crash_twin`), so it can never block a re-run.
_RENAME_NOREPLACE = 1  # <linux/fs.h>
_RENAME_EXCL = 0x00000004  # <stdio.h> on macOS
_AT_FDCWD = -100
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "arm64": 276}
_NOREPLACE: list[Any] = []  # [(kind, function)] once resolved; empty list: not resolved yet


def create_once_mechanism() -> str:
    """How :func:`write_once` puts a file in place here: ``renameat2``, ``renamex_np`` or ``link``."""
    return _noreplace()[0]


def _noreplace() -> tuple[str, Any]:
    if not _NOREPLACE:
        kind: str = "link"
        function: Any = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if hasattr(libc, "renameat2"):
                kind, function = "renameat2", libc.renameat2
            elif hasattr(libc, "renamex_np"):
                kind, function = "renamex_np", libc.renamex_np
            elif os.uname().sysname == "Linux" and os.uname().machine in _SYS_RENAMEAT2:
                number = _SYS_RENAMEAT2[os.uname().machine]
                syscall = libc.syscall
                kind, function = "renameat2", lambda *args: syscall(number, *args)
        except (OSError, AttributeError, ImportError):
            pass
        _NOREPLACE.append((kind, function))
    found: tuple[str, Any] = _NOREPLACE[0]
    return found


def _rename_noreplace(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` unless ``target`` exists (``FileExistsError``); False when this platform
    or file system cannot (the caller falls back)."""
    kind, function = _noreplace()
    if function is None:
        return False
    src, dst = os.fsencode(source), os.fsencode(target)
    result = (function(_AT_FDCWD, src, _AT_FDCWD, dst, _RENAME_NOREPLACE) if kind == "renameat2"
              else function(src, dst, _RENAME_EXCL))
    if result == 0:
        return True
    error = ctypes.get_errno()
    if error == errno.EEXIST:
        raise FileExistsError(error, os.strerror(error), os.fspath(target))
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error), os.fspath(target))


def write_once(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> Path:
    """Create ``path`` exactly once (refuse ``io.exists``); readers never see a partial file, and no kill at
    any instruction leaves anything under ``path`` but the whole file (or nothing)."""
    target = Path(path)
    directory = target.parent
    tmp = _write_temp(directory, target.name, data, mode)
    try:
        if not _rename_noreplace(tmp, target):
            # link() fails with EEXIST if the name exists: create-once semantics with complete content.
            os.link(tmp, target, follow_symlinks=False)
    except FileExistsError:
        raise Refusal("io.exists", f"{target} already exists; receipts are written once", field="path",
                      expected="no existing file", actual=str(target)) from None
    except OSError as exc:
        raise _write_refusal(target, exc) from None
    finally:
        _unlink_quietly(tmp)  # gone already after a rename; the fallback's second link otherwise
    fsync_dir(directory)
    return target


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> Path:
    """Replace ``path`` atomically: temp file, fsync, rename, directory fsync."""
    target = Path(path)
    tmp = _write_temp(target.parent, target.name, data, mode)
    try:
        os.replace(tmp, target)
    except BaseException as exc:
        _unlink_quietly(tmp)
        if isinstance(exc, OSError):
            raise _write_refusal(target, exc) from None
        raise
    fsync_dir(target.parent)
    return target


def check_private_dir(path: str | os.PathLike[str], *, what: str = "state directory",
                      workspace: str | None = None) -> None:
    """Create (or accept) a directory that is ours alone and that we can write: not a link, reached
    without a link inside ``workspace``, owned by us, mode 0700, writable.

    The workspace is a checkout, and a checkout can hold symbolic links: ``.testops-evidence`` committed as
    a link to elsewhere sent the default state directory (``<workspace>/.testops-evidence/state``) there.
    Below the workspace every component is opened without following links (created if missing); above
    it the directories are the runner's own. Writability is tried with a probe file, because a
    read-only directory passed every other check and the phase failed later, half done (root ignores
    the mode bits, not a read-only mount).
    """
    location = os.path.abspath(path)
    root = os.path.abspath(workspace) if workspace else None
    try:
        if root is not None and location.startswith(root.rstrip(os.sep) + os.sep):
            _make_below(root, location[len(root.rstrip(os.sep)) + 1:], what)
        else:
            os.makedirs(location, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Refusal("io.state_dir", f"cannot create the {what} {os.fspath(path)} ({exc.strerror})",
                      field="path", expected="a directory the job can create", actual=os.fspath(path)) from None
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise Refusal("io.state_dir", f"the {what} {os.fspath(path)} is not a real directory", field="path",
                      expected="a directory, not a link", actual=_kind(st.st_mode))
    if st.st_uid != os.getuid():
        raise Refusal("io.state_dir", f"the {what} {os.fspath(path)} is owned by another user", field="owner",
                      expected=os.getuid(), actual=st.st_uid)
    if st.st_mode & 0o077:
        os.chmod(path, 0o700, follow_symlinks=False)
    probe = os.path.join(location, f".write-probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        os.unlink(probe)
    except OSError as exc:
        reason = _WRITE_ERRORS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        raise Refusal("io.state_dir", f"the {what} {os.fspath(path)} cannot be written ({reason})", field="path",
                      expected="a writable directory", actual=os.fspath(path)) from None


def _make_below(root: str, relative: str, what: str) -> None:
    """Create ``root/relative`` component by component without following a link below ``root``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    walked = root
    try:
        for part in [p for p in relative.split(os.sep) if p and p != "."]:
            walked = os.path.join(walked, part)
            if part == "..":
                raise Refusal("io.state_dir", f"the {what} path goes up with '..' inside the workspace",
                              field="path", expected="a path without '..'", actual=walked)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o700, dir_fd=fd)
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise Refusal("io.state_dir", f"the {what} path passes through {walked}, which is a symbolic "
                                  "link or not a directory (the workspace is a checkout: a link there can send "
                                  "the state elsewhere)", field="path", expected="real directories below the "
                                  "workspace", actual=walked) from None
                raise
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


def ensure_private_dir(path: str | os.PathLike[str], *, what: str = "state directory") -> Path:
    """:func:`check_private_dir`, returning the directory as a Path."""
    check_private_dir(path, what=what)
    return Path(path)


class StateDir:
    """Receipts, once-markers and failure.json for one run of the pipeline."""

    def __init__(self, path: str | os.PathLike[str], *, workspace: str | None = None) -> None:
        self.path = Path(path)
        self._workspace = workspace
        self._ready = False
        # Stages this process once-marked: a refusal's summary says truthfully whether the step changed anything.
        self.started: list[str] = []

    @property
    def location(self) -> str:
        return os.fspath(self.path)

    def ensure(self) -> Path:
        self.check()
        return self.path

    def check(self) -> None:
        """Create and check the directory."""
        if not self._ready:
            check_private_dir(self.path, workspace=self._workspace)
            self._ready = True

    def receipt_path(self, name: str) -> Path:
        if not valid_name(name) or name in (".", ".."):
            raise ValueError(name)
        return self.path / name

    def write_receipt(self, name: str, document: Any) -> Path:
        self.ensure()
        return write_once(self.receipt_path(name), pretty_json(document))

    def read_receipt(self, name: str, *, limit: int = 64 * 1024 * 1024) -> Any:
        return parse_json_bytes(read_safe(self.ensure(), name, limit=limit), name)

    def has(self, name: str) -> bool:
        return self.receipt_path(name).exists()

    # --- once-markers --------------------------------------------------------------------------------
    def once(self, stage: str, detail: dict[str, Any] | None = None) -> Path:
        """Record that a remote mutation is about to start; refuse if it already started once."""
        if not re.match(r"^[a-z0-9_.-]{1,120}\Z", stage):
            raise ValueError(stage)
        name = f"once-{stage}.json"
        self.ensure()
        body = {"stage": stage, "status": "STARTED_NO_AUTOMATIC_RESEND", **(detail or {})}
        try:
            marker = write_once(self.receipt_path(name), pretty_json(body))
        except Refusal as exc:
            raise Refusal("once.already_started", f"the mutation {stage!r} already started in an earlier run "
                          "of this phase; it is not re-sent automatically", field="once-marker",
                          expected="absent", actual=name) from exc
        self.started.append(stage)
        return marker

    def done(self, stage: str, result: dict[str, Any]) -> Path:
        """Record the completion of a once-marked mutation."""
        return self.write_receipt(f"done-{stage}.json", {"stage": stage, **result})

    def pending_markers(self) -> list[str]:
        """Stages whose once-marker has no completion record (uncertain mutations)."""
        if not self.path.is_dir():
            return []
        stages = []
        for entry in sorted(os.listdir(self.path)):
            if entry.startswith("once-") and entry.endswith(".json"):
                stage = entry[len("once-"):-len(".json")]
                if not (self.path / f"done-{stage}.json").exists():
                    stages.append(stage)
        return stages

    def write_failure(self, document: dict[str, Any]) -> Path | None:
        """failure.json is replaced atomically (a later failure of a retried phase supersedes)."""
        self.ensure()
        return write_atomic(self.path / "failure.json", pretty_json(document))


def hand_over(paths: list[Path], env: Mapping[str, str]) -> list[Path]:
    """Give files that later steps read to the owner of the workspace, when we run as root.

    A Docker action runs as root, while the steps around it (upload-artifact, the user's scripts) run
    as the runner user, who could not read our 0600/0700 files. Ownership moves to the workspace's
    owner; the private modes stay, so nobody else gains access. Links are never followed (lchown).
    Does nothing when not root or when the workspace is root's own.
    """
    if os.geteuid() != 0:
        return []
    workspace = env.get("GITHUB_WORKSPACE")
    if not workspace:
        return []
    try:
        owner = os.stat(workspace)
    except OSError:
        return []
    if owner.st_uid == 0:
        return []
    changed: list[Path] = []
    for top in paths:
        if not os.path.lexists(top):
            continue
        todo = [Path(top)]
        while todo:
            current = todo.pop()
            os.lchown(current, owner.st_uid, owner.st_gid)
            changed.append(current)
            if current.is_dir() and not current.is_symlink():
                todo.extend(current.iterdir())
    return changed
