"""Zstandard entries of Inspect AI's ``.eval`` logs, decoded by libzstd under a hard output cap.

Inspect AI writes its logs as zip archives whose entries are Zstandard-compressed (zip method 93). The
decoding is libzstd's: Python 3.14's :mod:`compression.zstd`, or on 3.11 to 3.13 its backport
``backports.zstd`` (a runtime dependency, hash-locked in requirements/runtime.txt). This module is the
bounded wrapper around it:

- the output never grows past the cap the caller gives: libzstd is asked for at most one byte more
  than what is left, so a 4-byte RLE block (or a frame that lies about its size) stops at the cap, not
  after it;
- the frame headers are read here first, so the common refusals keep one plain reason each: reserved
  bits, dictionaries (Inspect uses none), windows over 128 MiB, a declared content size over the cap;
- several frames, with skippable frames between them, share the one cap;
- every malformed input is a :class:`ZstdError` (the archive reader turns it into
  ``import.unsafe_archive``); libzstd's own error is wrapped, never passed through.

libzstd also verifies the optional XXH64 content checksum; the zip entry's CRC-32 is checked as well.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdDecompressor
    from compression.zstd import ZstdError as _LibError
else:
    from backports.zstd import ZstdDecompressor
    from backports.zstd import ZstdError as _LibError

MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE = 0x184D2A50
_WINDOW_MAX = 128 * 1024 * 1024


class ZstdError(ValueError):
    """The input is not a well-formed Zstandard stream, or it inflates past the cap."""


def _check_header(data: memoryview, pos: int, room: int) -> None:
    """Refuse a frame header (after its magic number at ``pos - 4``) that this reader will not decode."""
    end = len(data)
    if pos >= end:
        raise ZstdError("a frame header is cut short")
    descriptor = data[pos]
    fcs_flag, single, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    if descriptor & 0x08:
        raise ZstdError("a frame header's reserved bit is set")
    pos += 1
    window = 0
    if not single:
        if pos >= end:
            raise ZstdError("a frame header is cut short")
        base = 1 << (10 + (data[pos] >> 3))
        window = base + (base >> 3) * (data[pos] & 7)
        pos += 1
    dict_size = (0, 1, 2, 4)[dict_flag]
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if pos + dict_size + fcs_size > end:
        raise ZstdError("a frame header is cut short")
    if dict_size and int.from_bytes(data[pos:pos + dict_size], "little") != 0:
        raise ZstdError("the frame needs a dictionary, which is not supported")
    pos += dict_size
    if fcs_size:
        content_size = int.from_bytes(data[pos:pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
        if single:
            window = content_size
        if content_size > room:
            raise ZstdError("the frame declares more content than its cap")
    if window > _WINDOW_MAX:
        raise ZstdError(f"a frame's window of {window} bytes is over the {_WINDOW_MAX}-byte maximum")


def _frame(data: memoryview, pos: int, out: list[bytes], room: int) -> tuple[int, int]:
    """Decode the frame at ``pos`` with libzstd; returns the position after it and the room left."""
    _check_header(data, pos + 4, room)
    decoder = ZstdDecompressor()
    try:
        chunk = decoder.decompress(data[pos:], max_length=room + 1)
    except _LibError as exc:
        raise ZstdError(f"a frame is corrupt ({_reason(exc)})") from None
    if len(chunk) > room:
        raise ZstdError("the stream inflates past its cap")
    out.append(chunk)
    if not decoder.eof:
        # With output to spare, libzstd stops only at the end of the frame or of the input.
        raise ZstdError("a frame is cut short")
    return len(data) - len(decoder.unused_data), room - len(chunk)


def _reason(exc: _LibError) -> str:
    """libzstd's reason, without the binding's generic prefix."""
    text = str(exc)
    return text.rsplit(": ", 1)[-1] if ": " in text else text


def decompress(data: bytes, cap: int) -> bytes:
    """The content of one or more Zstandard frames; at most ``cap`` bytes, else :class:`ZstdError`."""
    view = memoryview(data)
    out: list[bytes] = []
    room = cap
    pos = 0
    if not data:
        raise ZstdError("the stream is empty")
    while pos < len(view):
        if pos + 4 > len(view):
            raise ZstdError("trailing bytes after the last frame")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        if magic == MAGIC:
            pos, room = _frame(view, pos, out, room)
        elif magic & _SKIPPABLE_MASK == _SKIPPABLE:
            if pos + 8 > len(view):
                raise ZstdError("a skippable frame is cut short")
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            if pos > len(view):
                raise ZstdError("a skippable frame runs past the stream")
        else:
            raise ZstdError("the stream is not Zstandard (bad magic number)")
    return b"".join(out)
