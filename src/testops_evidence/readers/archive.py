"""Safe extraction of an artifact zip, in memory.

An artifact comes from another workflow, so its archive is hostile until proven otherwise. Nothing is
written to disk: entries are checked on their metadata first (names, types, declared sizes, compression
ratio), and only the entries under the requested prefix are decompressed, with every byte counted
against the caps. Anything suspicious is the refusal ``import.unsafe_archive``; nothing else escapes
(the hypothesis tests feed random and mutated zips to prove it).

Checks, and why:

* the end-of-central-directory record is read before :mod:`zipfile` parses the central directory, so
  a million tiny entries cannot exhaust memory before the entry-count cap applies;
* names: relative, ``/``-separated, no empty, ``.`` or ``..`` component, no backslash (Windows
  separator), no ``:`` (drive letters, NTFS streams), no control characters, bounded length, unique
  (a later duplicate would silently shadow an earlier one), and no name that is both a file and a
  directory;
* types: no symbolic links or other special files (Unix mode bits in ``external_attr``), no encrypted
  entries, only the *stored* and *deflated* methods (and *Zstandard*, method 93, where the caller allows
  it: Inspect AI's ``.eval`` logs; decoded by :mod:`testops_evidence.readers.zstd`, the local header's
  name checked against the central directory's, the CRC-32 checked like zipfile checks it);
* sizes: per-entry and total uncompressed caps on the declared sizes of every entry, a compression-ratio
  cap against zip bombs, and the bytes actually inflated are counted again (declared sizes are data).
"""

from __future__ import annotations

import hashlib
import io
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from testops_evidence.errors import Refusal

MIB = 1024 * 1024

_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_EOCD_SIZE = 22
_LOCAL = b"PK\x03\x04"
ZIP_ZSTANDARD = 93  # APPNOTE 4.4.5; zipfile names it only from Python 3.14
_MAX_COMMENT = 0xFFFF
_CHUNK = 64 * 1024

# Every exception zipfile/zlib can raise on malformed input; all of them mean "not a safe archive".
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError, OSError, EOFError,
               RuntimeError, zlib.error, struct.error, UnicodeDecodeError, KeyError, IndexError, OverflowError)


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps for one archive. The defaults fit evaluation artifacts (JSON documents, transcripts)."""

    max_entries: int = 10_000
    max_entry_bytes: int = 64 * MIB
    max_total_bytes: int = 256 * MIB
    # Deflate reaches about 1000:1 on repeated bytes; real JSON and logs stay far below 100:1.
    max_ratio: int = 100
    ratio_floor: int = 1 * MIB  # entries smaller than this cannot amplify much; the ratio is not checked
    max_name_length: int = 1024
    max_directory_bytes: int = 8 * MIB  # the central directory itself (bounds ZipInfo memory)
    zstandard: bool = False  # admit method 93 (Zstandard) entries


DEFAULT_LIMITS = ArchiveLimits()


@dataclass(frozen=True)
class ArchiveFile:
    name: str
    data: bytes
    sha256: str


@dataclass(frozen=True)
class Archive:
    """The checked archive: every regular file's name, and the bytes of those under the prefix."""

    names: tuple[str, ...]
    files: Mapping[str, ArchiveFile] = field(default_factory=dict)
    uncompressed_bytes: int = 0
    sizes: Mapping[str, int] = field(default_factory=dict)  # every file's declared (and enforced) size

    def under(self, prefix: str) -> list[ArchiveFile]:
        return [f for name, f in self.files.items() if name.startswith(prefix)]


def _unsafe(message: str, *, entry: str | None = None, expected: Any = None, actual: Any = None) -> Refusal:
    return Refusal("import.unsafe_archive", message, field="entry" if entry is not None else "archive",
                   expected=expected, actual=_shown(entry) if actual is None and entry is not None else actual)


def _shown(name: str | None) -> str | None:
    """A name as it may appear in a summary: control characters escaped, length bounded."""
    if name is None:
        return None
    text = name.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 200 else text[:197] + "..."


def _central_directory(data: bytes) -> tuple[int, int]:
    """(entry count, central directory size) from the end record, zip64 aware, without parsing entries."""
    start = max(0, len(data) - _EOCD_SIZE - _MAX_COMMENT)
    pos = data.rfind(_EOCD, start)
    if pos < 0 or pos + _EOCD_SIZE > len(data):
        raise _unsafe("the artifact is not a zip archive (no end-of-central-directory record)",
                      expected="a zip archive", actual=f"{len(data)} bytes")
    _disk, _cd_disk, _here, count, size, _offset = struct.unpack("<HHHHII", data[pos + 4: pos + 20])
    if (count == 0xFFFF or size == 0xFFFFFFFF) and pos >= 20 and data[pos - 20: pos - 16] == _EOCD64_LOCATOR:
        (offset64,) = struct.unpack("<Q", data[pos - 12: pos - 4])
        if offset64 + 56 <= len(data) and data[offset64: offset64 + 4] == _EOCD64:
            count, size = struct.unpack("<QQ", data[offset64 + 32: offset64 + 48])
    return count, size


def check_name(name: str, limits: ArchiveLimits = DEFAULT_LIMITS) -> list[str]:
    """The components of a safe entry name (a trailing ``/`` marks a directory); refuse anything else."""
    if not name or len(name) > limits.max_name_length:
        raise _unsafe(f"an entry name is empty or longer than {limits.max_name_length} characters", entry=name,
                      expected=f"1..{limits.max_name_length} characters")
    if name.startswith("/"):
        raise _unsafe("an entry has an absolute path", entry=name, expected="a relative path")
    if "\\" in name:
        raise _unsafe("an entry name contains a backslash", entry=name, expected="'/' as the only separator")
    if ":" in name:
        raise _unsafe("an entry name contains ':'", entry=name, expected="no ':' (drive letters, streams)")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise _unsafe("an entry name contains a control character", entry=name,
                      expected="printable characters")
    parts = name[:-1].split("/") if name.endswith("/") else name.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise _unsafe("an entry path has an empty, '.' or '..' component", entry=name,
                          expected="no path escape")
    return parts


def _check_entry(info: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    name = info.filename
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    # The Unix mode is only meaningful when a Unix tool wrote it, but a link bit is refused whatever
    # create_system claims: an extractor elsewhere might honour it.
    if kind == stat.S_IFLNK:
        raise _unsafe("an entry is a symbolic link", entry=name, expected="regular files only")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise _unsafe("an entry is a special file (device, fifo or socket)", entry=name,
                      expected="regular files only")
    if kind == stat.S_IFDIR and not name.endswith("/"):
        raise _unsafe("a directory entry has no trailing '/'", entry=name, expected="a consistent entry type")
    if info.flag_bits & 0x1:
        raise _unsafe("an entry is encrypted", entry=name, expected="no encryption")
    methods = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, *((ZIP_ZSTANDARD,) if limits.zstandard else ()))
    if info.compress_type not in methods:
        raise _unsafe(f"an entry uses compression method {info.compress_type}", entry=name,
                      expected="stored or deflated" + (" or Zstandard" if limits.zstandard else ""))
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        # zipfile reads a stored entry's declared size and stops: the bytes after it would be read by
        # another reader as the same entry's content (two readers, two documents).
        raise _unsafe(f"a stored entry holds {info.compress_size} bytes but declares {info.file_size}", entry=name,
                      expected="a stored entry's sizes equal")
    if info.file_size > limits.max_entry_bytes:
        raise _unsafe(f"an entry declares {info.file_size} bytes, over the {limits.max_entry_bytes}-byte cap",
                      entry=name, expected=f"<= {limits.max_entry_bytes} bytes")
    if info.file_size >= limits.ratio_floor and info.file_size > limits.max_ratio * max(info.compress_size, 1):
        raise _unsafe(f"an entry inflates {info.file_size} bytes from {info.compress_size} (zip bomb?)",
                      entry=name, expected=f"a compression ratio <= {limits.max_ratio}:1")


def extract_zip(data: bytes, *, prefix: str = "", limits: ArchiveLimits = DEFAULT_LIMITS,
                select: Callable[[str], bool] | None = None) -> Archive:
    """Check every entry of the zip ``data``; inflate those whose names start with ``prefix`` (and that
    ``select`` admits, when given)."""
    try:
        return _extract(data, prefix, limits, select)
    except Refusal:
        raise
    except _ZIP_ERRORS as exc:
        raise _unsafe(f"the artifact is not a readable zip archive ({type(exc).__name__})",
                      expected="a well-formed zip archive", actual=type(exc).__name__) from None


def _extract(data: bytes, prefix: str, limits: ArchiveLimits, select: Callable[[str], bool] | None) -> Archive:
    count, directory_size = _central_directory(data)
    if count > limits.max_entries:
        raise _unsafe(f"the archive declares {count} entries, over the {limits.max_entries}-entry cap",
                      expected=f"<= {limits.max_entries} entries", actual=count)
    if directory_size > limits.max_directory_bytes:
        raise _unsafe(f"the archive's central directory is {directory_size} bytes", expected=
                      f"<= {limits.max_directory_bytes} bytes", actual=directory_size)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        if len(infos) > limits.max_entries:  # the declared count is data too
            raise _unsafe(f"the archive has {len(infos)} entries, over the {limits.max_entries}-entry cap",
                          expected=f"<= {limits.max_entries} entries", actual=len(infos))
        files: list[zipfile.ZipInfo] = []
        seen: set[str] = set()
        directories: set[str] = set()
        declared = 0
        for info in infos:
            name = info.filename
            parts = check_name(name, limits)
            if name in seen:
                raise _unsafe("two entries have the same name", entry=name, expected="unique entry names")
            seen.add(name)
            _check_entry(info, limits)
            # Every parent of an entry is a directory; a file with a directory's name is ambiguous.
            for depth in range(1, len(parts)):
                directories.add("/".join(parts[:depth]))
            if name.endswith("/"):
                directories.add(name[:-1])
                continue
            declared += info.file_size
            if declared > limits.max_total_bytes:
                raise _unsafe(f"the archive declares more than {limits.max_total_bytes} uncompressed bytes",
                              expected=f"<= {limits.max_total_bytes} bytes", actual=declared)
            files.append(info)
        for info in files:
            if info.filename in directories:
                raise _unsafe("an entry is both a file and a directory", entry=info.filename,
                              expected="distinct file and directory names")
        if declared >= limits.ratio_floor and declared > limits.max_ratio * max(len(data), 1):
            raise _unsafe(f"the archive inflates {declared} bytes from {len(data)} (zip bomb?)",
                          expected=f"a compression ratio <= {limits.max_ratio}:1", actual=declared)
        read: dict[str, ArchiveFile] = {}
        budget = limits.max_total_bytes
        for info in files:
            if not info.filename.startswith(prefix) or (select is not None and not select(info.filename)):
                continue
            cap = min(limits.max_entry_bytes, budget)
            if info.compress_type == ZIP_ZSTANDARD:
                content = _inflate_zstandard(data, info, cap)
            else:
                content = _inflate(archive, info, cap)
            budget -= len(content)
            read[info.filename] = ArchiveFile(info.filename, content, hashlib.sha256(content).hexdigest())
        return Archive(names=tuple(i.filename for i in files), files=read, uncompressed_bytes=declared,
                       sizes={i.filename: i.file_size for i in files})


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    """Inflate one entry, counting bytes: a lying size header cannot make us read past ``cap``."""
    chunks: list[bytes] = []
    total = 0
    with archive.open(info) as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > cap or total > info.file_size:
                raise _unsafe("an entry inflates past its declared size or the size cap", entry=info.filename,
                              expected=f"<= {min(cap, info.file_size)} bytes")
            chunks.append(chunk)
    # zipfile has verified the CRC-32 at end of stream (BadZipFile otherwise).
    return b"".join(chunks)


def _inflate_zstandard(data: bytes, info: zipfile.ZipInfo, cap: int) -> bytes:
    """A Zstandard entry: zipfile cannot open it before Python 3.14, so its local header is read here."""
    from testops_evidence.readers.zstd import ZstdError, decompress

    offset = info.header_offset
    if data[offset:offset + 4] != _LOCAL:
        raise _unsafe("an entry's local header is missing", entry=info.filename, expected="a local file header")
    name_length, extra_length = struct.unpack("<HH", data[offset + 26:offset + 30])
    raw_name = data[offset + 30:offset + 30 + name_length]
    local_name = raw_name.decode("utf-8" if info.flag_bits & 0x800 else "cp437")
    if local_name != info.orig_filename:
        raise _unsafe("an entry's local header names another file than the central directory", entry=info.filename,
                      expected=_shown(info.orig_filename), actual=_shown(local_name))
    start = offset + 30 + name_length + extra_length
    end = start + info.compress_size
    if end > len(data):
        raise _unsafe("an entry runs past the end of the archive", entry=info.filename, expected="a complete entry")
    try:
        content = decompress(data[start:end], min(cap, info.file_size))
    except ZstdError as exc:
        raise _unsafe(f"an entry is not valid Zstandard ({exc})", entry=info.filename,
                      expected=f"a Zstandard stream of at most {min(cap, info.file_size)} bytes") from None
    if len(content) != info.file_size or zlib.crc32(content) != info.CRC:
        raise _unsafe("an entry's content does not match its size or CRC-32", entry=info.filename,
                      expected=f"{info.file_size} bytes with CRC-32 {info.CRC:08x}",
                      actual=f"{len(content)} bytes with CRC-32 {zlib.crc32(content):08x}")
    return content
