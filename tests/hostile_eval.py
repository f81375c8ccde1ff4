"""Builders of hostile Inspect AI ``.eval`` archives: Zstandard frames and zips written byte by byte, so
that every field an attacker controls (declared sizes, CRC-32, local and central names, methods, frame
headers and blocks) can lie. Used by the red-team tests and by benchmarks/zstd_decode.py."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
BLOCK = 128 * 1024


def window_byte(size: int) -> int:
    """The window descriptor for a power-of-two window of ``size`` bytes (RFC 8878, 3.1.1.1.2)."""
    exponent = size.bit_length() - 1 - 10
    assert size == 1 << (exponent + 10) and 0 <= exponent < 32
    return exponent << 3


def block_header(kind: int, size: int, last: bool) -> bytes:
    return (int(last) | kind << 1 | size << 3).to_bytes(3, "little")


def rle_frame(byte: bytes, count: int, *, window: int = 1 << 20, block: int = BLOCK, fcs: bool = False) -> bytes:
    """One frame of RLE blocks repeating ``byte`` ``count`` times (4 bytes per block on the wire)."""
    descriptor = (0xC0 if fcs else 0x00)
    out = bytearray(ZSTD_MAGIC + bytes([descriptor, window_byte(window)]))
    if fcs:
        out += count.to_bytes(8, "little")
    left = count
    while True:
        size = min(block, left)
        left -= size
        out += block_header(1, size, left == 0) + byte
        if left == 0:
            return bytes(out)


def raw_frame(data: bytes, *, window: int = 1 << 20) -> bytes:
    out = bytearray(ZSTD_MAGIC + bytes([0x00, window_byte(window)]))
    chunks = [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)] or [b""]
    for index, chunk in enumerate(chunks):
        out += block_header(0, len(chunk), index == len(chunks) - 1) + chunk
    return bytes(out)


def skippable(size: int) -> bytes:
    return struct.pack("<II", 0x184D2A50, size) + b"\0" * size


@dataclass
class Entry:
    name: str
    payload: bytes  # the bytes on the wire (compressed as `method` says)
    size: int  # the declared uncompressed size
    crc: int
    method: int = 93
    local_name: str | None = None  # a local header naming another file than the central directory
    external_attr: int = 0o100644 << 16


def zstd_entry(name: str, content: bytes, **kwargs: Any) -> Entry:
    return Entry(name, raw_frame(content), len(content), zlib.crc32(content), **kwargs)


def write_zip(entries: Sequence[Entry]) -> bytes:
    """A zip of ``entries`` exactly as they say, lies included (no data descriptors, no zip64)."""
    out = bytearray()
    central = bytearray()
    for entry in entries:
        offset = len(out)
        local = (entry.local_name if entry.local_name is not None else entry.name).encode()
        name = entry.name.encode()
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 63, 0x800, entry.method, 0, 0x21, entry.crc,
                           len(entry.payload), entry.size, len(local), 0) + local + entry.payload
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 0x031E, 63, 0x800, entry.method, 0, 0x21,
                               entry.crc, len(entry.payload), entry.size, len(name), 0, 0, 0, 0,
                               entry.external_attr, offset) + name
    start = len(out)
    out += central
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def header(*, samples: Sequence[str] = ("s1",), epochs: int = 1, status: str = "success",
           version: int = 2, log_samples: bool = True) -> dict[str, Any]:
    """A minimal ``header.json`` Inspect AI 0.3 writes (the fields our schema requires)."""
    return {
        "version": version, "status": status,
        "eval": {"task": "hostile", "task_id": "t1", "run_id": "r1", "created": "2026-12-01T10:00:00+00:00",
                 "dataset": {"samples": len(samples), "sample_ids": list(samples)},
                 "model": "mockllm/model", "config": {"epochs": epochs, "log_samples": log_samples},
                 "scorers": [{"name": "match"}]},
        "stats": {"started_at": "2026-12-01T10:00:00+00:00", "completed_at": "2026-12-01T10:01:00+00:00"},
    }


def summary(sample: str, epoch: int = 1, value: Any = "C", **extra: Any) -> dict[str, Any]:
    return {"id": sample, "epoch": epoch, "input": "x", "target": "y", "scores": {"match": {"value": value}},
            "started_at": "2026-12-01T10:00:10+00:00", "completed_at": "2026-12-01T10:00:20+00:00", **extra}


def eval_archive(head: dict[str, Any], summaries: list[dict[str, Any]], *, extra: Sequence[Entry] = (),
                 transcripts: bool = True) -> bytes:
    entries = [zstd_entry("header.json", json.dumps(head).encode()),
               zstd_entry("summaries.json", json.dumps(summaries).encode())]
    if transcripts:
        entries += [zstd_entry(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s).encode())
                    for s in summaries]
    return write_zip([*entries, *extra])


def rle_bomb_entry(name: str, size: int, *, pad_to_ratio: int = 999, byte: bytes = b" ") -> Entry:
    """An entry that inflates to ``size`` bytes of ``byte`` with a correct CRC-32, padded with a skippable
    frame so that its declared ratio stays under ``pad_to_ratio``:1 (what a ratio cap admits)."""
    frame = rle_frame(byte, size)
    want = size // pad_to_ratio + 1
    pad = skippable(max(0, want - len(frame) - 8)) if want > len(frame) + 8 else b""
    return Entry(name, frame + pad, size, crc_of_run(byte, size))


def crc_of_run(byte: bytes, size: int) -> int:
    """The CRC-32 of ``byte * size``, a mebibyte at a time."""
    crc, chunk = 0, byte * (1 << 20)
    for _ in range(size >> 20):
        crc = zlib.crc32(chunk, crc)
    return zlib.crc32(byte * (size & ((1 << 20) - 1)), crc)
