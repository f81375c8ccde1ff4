"""The pure-Python Zstandard decoder: exact against the reference implementation, strict on hostile input.

The vectors are written by libzstd itself (python-zstandard in the producers' environment, see
tests/producers/zstd_vectors.py) at every level band and frame option; Inspect AI's real ``.eval`` logs
exercise the decoder again through the archive reader (tests/test_frameworks.py).
"""

from __future__ import annotations

import zipfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_support import PRODUCERS, need_inspect, run_producer
from import_builders import make_zip
from testops_evidence.errors import Refusal
from testops_evidence.readers.archive import ZIP_ZSTANDARD, ArchiveLimits, extract_zip
from testops_evidence.readers.zstd import MAGIC, ZstdError, decompress

CAP = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    python = need_inspect()
    out = tmp_path_factory.mktemp("zstd-vectors")
    run_producer([python, PRODUCERS / "zstd_vectors.py", out], out / "home")
    pairs = {}
    for compressed in sorted(out.glob("*.zst")):
        pairs[compressed.stem] = (compressed.read_bytes(), compressed.with_suffix(".plain").read_bytes())
    return pairs


def test_decodes_every_reference_vector_exactly(vectors: dict[str, tuple[bytes, bytes]]) -> None:
    assert len(vectors) >= 70
    wrong = [name for name, (compressed, plain) in vectors.items() if decompress(compressed, CAP) != plain]
    assert wrong == []


def test_the_reference_vectors_use_every_block_and_table_kind(vectors: dict[str, tuple[bytes, bytes]]) -> None:
    # Not a tautology: a decoder test whose vectors never reach compressed literals or FSE tables proves
    # little. The libzstd block types of a few vectors are read from their headers.
    kinds = {_first_block_type(vectors[name][0]) for name in ("random.l3", "json.l3", "byte.l3", "run.l19")}
    assert kinds == {0, 1, 2} or kinds >= {0, 2}  # raw (random) and compressed (json) blocks at least


def _first_block_type(frame: bytes) -> int:
    assert frame[:4] == MAGIC.to_bytes(4, "little")
    descriptor = frame[4]
    single = bool(descriptor & 0x20)
    content_size_bytes = (1 if single else 0, 2, 4, 8)[descriptor >> 6]
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3] + content_size_bytes
    return (int.from_bytes(frame[pos:pos + 3], "little") >> 1) & 3


@pytest.mark.parametrize("cut", [1, 7, 100])
def test_a_truncated_stream_is_refused(vectors: dict[str, tuple[bytes, bytes]], cut: int) -> None:
    compressed, _ = vectors["json.l3"]
    with pytest.raises(ZstdError):
        decompress(compressed[:-cut], CAP)


def test_output_never_passes_the_cap(vectors: dict[str, tuple[bytes, bytes]]) -> None:
    compressed, plain = vectors["run.no-size"]
    with pytest.raises(ZstdError, match="cap"):
        decompress(compressed, len(plain) - 1)
    assert decompress(compressed, len(plain)) == plain


def _rle_frame(byte: int, blocks: int, size: int = 128 * 1024) -> bytes:
    frame = MAGIC.to_bytes(4, "little") + bytes([0x00, 0x58])  # no content size, 64 MiB window
    for index in range(blocks):
        last = 1 if index == blocks - 1 else 0
        frame += ((size << 3) | (1 << 1) | last).to_bytes(3, "little") + bytes([byte])
    return frame


def test_an_rle_bomb_stops_at_the_cap() -> None:
    bomb = _rle_frame(0x41, 1000)  # 4 KiB that would inflate to 125 MiB
    with pytest.raises(ZstdError, match="cap"):
        decompress(bomb, 1024 * 1024)
    assert decompress(_rle_frame(0x41, 2), CAP) == b"A" * 256 * 1024


@pytest.mark.parametrize(("data", "message"), [
    (b"", "empty"),
    (b"\x28\xb5\x2f", "trailing"),
    (b"PK\x03\x04xxxx", "magic"),
    (MAGIC.to_bytes(4, "little") + bytes([0x08, 0x58]), "reserved"),
    (MAGIC.to_bytes(4, "little") + bytes([0x01, 0x58, 0x07]), "dictionary"),
    (MAGIC.to_bytes(4, "little") + bytes([0x00, 0xF8]) + (1 | 3 << 1).to_bytes(3, "little"), "window"),
    (MAGIC.to_bytes(4, "little") + bytes([0x00, 0x58]) + (1 | 3 << 1).to_bytes(3, "little"), "reserved type"),
    (MAGIC.to_bytes(4, "little") + bytes([0x00, 0x58]) + (1 | (200_000 << 3)).to_bytes(3, "little"), "block"),
    ((0x184D2A50).to_bytes(4, "little") + (10).to_bytes(4, "little") + b"abc", "skippable"),
])
def test_malformed_frames_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(ZstdError, match=message):
        decompress(data, CAP)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes_after_a_frame_header_never_escape(tail: bytes) -> None:
    for head in (MAGIC.to_bytes(4, "little") + bytes([0x00, 0x58]), MAGIC.to_bytes(4, "little") + b"\x20\x40"):
        try:
            out = decompress(head + tail, 256 * 1024)
        except ZstdError:
            continue
        assert len(out) <= 256 * 1024


def test_mutated_reference_streams_never_escape(vectors: dict[str, tuple[bytes, bytes]]) -> None:
    # Deterministic mutations of real libzstd output: every byte of the headers and tables, then a
    # stride through the payload, flipped bit by bit. Either the exact content, or a ZstdError.
    for name in ("small-json.l3", "small-json.l19", "small-skewed.l9", "small-skewed.fast"):
        compressed, plain = vectors[name]
        positions = [*range(min(64, len(compressed))), *range(64, len(compressed), max(1, len(compressed) // 64))]
        for position in positions:
            for bit in (0, 3, 7):
                mutated = bytearray(compressed)
                mutated[position] ^= 1 << bit
                try:
                    out = decompress(bytes(mutated), len(plain) + 1024)
                except ZstdError:
                    continue
                assert len(out) <= len(plain) + 1024


# --- the archive reader with Zstandard entries ----------------------------------------------------------


def _raw_zstd(plain: bytes) -> bytes:
    """A valid Zstandard frame of raw blocks: written by hand, so the archive tests need no compressor."""
    frame = MAGIC.to_bytes(4, "little") + bytes([0x00, 0x58])
    chunks = [plain[i:i + 100_000] for i in range(0, len(plain), 100_000)] or [b""]
    for index, chunk in enumerate(chunks):
        last = 1 if index == len(chunks) - 1 else 0
        frame += ((len(chunk) << 3) | last).to_bytes(3, "little") + chunk
    return frame


def zstd_zip(entries: list[tuple[str, bytes]], *, payload: dict[str, bytes] | None = None,
             local_names: dict[str, str] | None = None) -> bytes:
    """A zip whose entries are method 93, as Inspect AI writes them (zipfile cannot write that method:
    the entries are stored, then their headers are rewritten)."""
    payload = payload or {}
    stored = make_zip([(name, payload.get(name, _raw_zstd(data))) for name, data in entries],
                      compression=zipfile.ZIP_STORED)
    data = bytearray(stored)
    with zipfile.ZipFile(__import__("io").BytesIO(stored)) as archive:
        infos = archive.infolist()
    plain = dict(entries)
    central = data.rfind(b"PK\x05\x06")
    cd_offset = int.from_bytes(data[central + 16:central + 20], "little")
    pos = cd_offset
    for info in infos:
        content = plain[info.filename]
        crc, size = zlib.crc32(content), len(content)
        local = info.header_offset
        data[local + 8:local + 10] = ZIP_ZSTANDARD.to_bytes(2, "little")
        data[local + 14:local + 18] = crc.to_bytes(4, "little")
        data[local + 22:local + 26] = size.to_bytes(4, "little")
        if local_names and info.filename in local_names:
            other = local_names[info.filename].encode()
            assert len(other) == len(info.filename)
            data[local + 30:local + 30 + len(other)] = other
        assert data[pos:pos + 4] == b"PK\x01\x02"
        data[pos + 10:pos + 12] = ZIP_ZSTANDARD.to_bytes(2, "little")
        data[pos + 16:pos + 20] = crc.to_bytes(4, "little")
        data[pos + 24:pos + 28] = size.to_bytes(4, "little")
        name_length, extra_length, comment_length = (int.from_bytes(data[pos + 28 + 2 * i:pos + 30 + 2 * i], "little")
                                                     for i in range(3))
        pos += 46 + name_length + extra_length + comment_length
    return bytes(data)


ZSTD_LIMITS = ArchiveLimits(zstandard=True, max_entry_bytes=1024 * 1024, max_total_bytes=4 * 1024 * 1024,
                            ratio_floor=64 * 1024)


def test_the_archive_reader_admits_zstandard_only_when_asked() -> None:
    data = zstd_zip([("header.json", b'{"version": 2}'), ("samples/a_epoch_1.json", b"{}")])
    archive = extract_zip(data, limits=ZSTD_LIMITS)
    assert archive.files["header.json"].data == b'{"version": 2}'
    with pytest.raises(Refusal, match="compression method 93") as caught:
        extract_zip(data)
    assert caught.value.code == "import.unsafe_archive"


@pytest.mark.parametrize(("build", "message"), [
    (lambda: zstd_zip([("header.json", b"{}")], payload={"header.json": _raw_zstd(b"[]")}), "CRC-32"),
    (lambda: zstd_zip([("header.json", b"{}")], payload={"header.json": b"\x00" * 9}), "not valid Zstandard"),
    (lambda: zstd_zip([("header.json", b"{}")], local_names={"header.json": "heade_.json"}), "local header"),
    (lambda: zstd_zip([("header.json", b"x" * 2000)], payload={"header.json": _rle_frame(0x78, 64)}), "Zstandard"),
])
def test_hostile_zstandard_entries_are_refused(build: object, message: str) -> None:
    with pytest.raises(Refusal, match=message) as caught:
        extract_zip(build(), limits=ZSTD_LIMITS)  # type: ignore[operator]
    assert caught.value.code == "import.unsafe_archive"


def test_the_archive_and_decoder_agree_with_zipfile_on_sizes() -> None:
    plain = bytes(range(256)) * 1000
    archive = extract_zip(zstd_zip([("big.json", plain)]), limits=ZSTD_LIMITS)
    assert archive.files["big.json"].data == plain
    assert archive.uncompressed_bytes == len(plain)

