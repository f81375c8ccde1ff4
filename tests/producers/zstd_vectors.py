"""Writes Zstandard test vectors with the reference implementation (python-zstandard, libzstd).

    .tools/producers/bin/python tests/producers/zstd_vectors.py OUT_DIR

For every input below and every compressor setting, OUT_DIR gets ``<name>.plain`` and ``<name>.zst``;
tests/test_zstd.py checks that the package's bounded wrapper (testops_evidence.readers.zstd) gives back
the plain bytes exactly.
The settings cover what libzstd emits in practice: every level band (fast, lazy, optimal), negative
levels, frames with and without content size and checksum, streaming (no size: what Inspect AI writes),
several frames in one stream, a skippable frame, long-distance matching and a window over 8 MiB.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import zstandard


def inputs() -> dict[str, bytes]:
    rng = random.Random(18)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(400)]
    records = [{"id": i, "epoch": i % 3 + 1, "scores": {"tool_called": rng.choice("CI")},
                "text": b" ".join(rng.choice(words) for _ in range(30)).decode()} for i in range(1500)]
    return {
        "empty": b"",
        "byte": b"x",
        "run": b"a" * 300_000,
        "random": rng.randbytes(200_000),
        "skewed": bytes(rng.choice(b"aaaaabbbc \n") for _ in range(250_000)),
        "json": json.dumps(records, indent=1).encode(),
        "all-bytes": bytes(range(256)) * 40,
        "small-json": json.dumps(records[:40]).encode(),
        "small-skewed": bytes(rng.choice(b"aaaaabbbc \n") for _ in range(6000)),
        "short-repeats": b"".join(rng.choice([b"ab", b"abc", b"abcd", b"xyzzy"]) for _ in range(60_000)),
    }


def settings() -> dict[str, dict[str, object]]:
    return {
        "l1": {"level": 1},
        "l3": {"level": 3},
        "l9": {"level": 9},
        "l19": {"level": 19},
        "l22": {"level": 22},
        "fast": {"level": -7},
        "checksum": {"level": 3, "write_checksum": True},
        "no-size": {"level": 3, "write_content_size": False},
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, data in inputs().items():
        for label, options in settings().items():
            compressed = zstandard.ZstdCompressor(**options).compress(data)  # type: ignore[arg-type]
            (out / f"{name}.{label}.plain").write_bytes(data)
            (out / f"{name}.{label}.zst").write_bytes(compressed)
        stream = zstandard.ZstdCompressor(level=3).compressobj()
        (out / f"{name}.stream.plain").write_bytes(data)
        (out / f"{name}.stream.zst").write_bytes(stream.compress(data) + stream.flush())
    data = inputs()["json"]
    half = len(data) // 2
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"12345"
    (out / "multi-frame.plain").write_bytes(data)
    (out / "multi-frame.zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(data[:half]) + skippable
                                          + zstandard.ZstdCompressor(level=3).compress(data[half:]))
    big = (inputs()["json"] * 8)[: 10 * 1024 * 1024]
    params = zstandard.ZstdCompressionParameters.from_level(19, window_log=24, enable_ldm=True)
    (out / "ldm-window.plain").write_bytes(big)
    (out / "ldm-window.zst").write_bytes(zstandard.ZstdCompressor(compression_params=params).compress(big))


if __name__ == "__main__":
    main()
