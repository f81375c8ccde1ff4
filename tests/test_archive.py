"""Safe zip extraction: hostile archives are refused with import.unsafe_archive, nothing else escapes."""

from __future__ import annotations

import io
import random
import stat
import struct
import warnings
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from import_builders import make_zip, symlink_entry
from testops_evidence.errors import Refusal
from testops_evidence.readers.archive import ArchiveLimits, check_name, extract_zip

SMALL = ArchiveLimits(max_entries=20, max_entry_bytes=64 * 1024, max_total_bytes=256 * 1024, max_ratio=50,
                      ratio_floor=16 * 1024, max_directory_bytes=64 * 1024)


def refused(data: bytes, limits: ArchiveLimits = SMALL, prefix: str = "") -> Refusal:
    with pytest.raises(Refusal) as caught:
        extract_zip(data, prefix=prefix, limits=limits)
    assert caught.value.code == "import.unsafe_archive"
    return caught.value


def test_reads_files_under_the_prefix_and_lists_every_name() -> None:
    data = make_zip([("results/a/result.json", b"{}"), ("results/host.json", b"[]"), ("other/x.bin", b"x" * 10),
                     ("results/dir/", b"")])
    archive = extract_zip(data, prefix="results/", limits=SMALL)
    assert archive.names == ("results/a/result.json", "results/host.json", "other/x.bin")
    assert sorted(archive.files) == ["results/a/result.json", "results/host.json"]
    assert archive.files["results/host.json"].data == b"[]"
    assert archive.files["results/host.json"].sha256 == (
        "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945")
    assert archive.uncompressed_bytes == 14


@pytest.mark.parametrize(("name", "reason"), [
    ("/etc/passwd", "absolute"),
    ("../escape.json", "'..'"),
    ("results/../../escape.json", "'..'"),
    ("results/./x.json", "'.'"),
    ("results//x.json", "empty"),
    ("results\\..\\x.json", "backslash"),
    ("C:/windows/x.json", "':'"),
    ("results/x\x01.json", "control"),
    ("x" * 1025, "longer"),
])
def test_unsafe_names_are_refused(name: str, reason: str) -> None:
    refusal = refused(make_zip([(name, b"{}")]))
    assert reason in refusal.message
    assert refusal.field == "entry"


def test_a_symlink_entry_is_refused_even_when_the_host_system_is_not_unix() -> None:
    info, target = symlink_entry("results/link.json", "/etc/passwd")
    refusal = refused(make_zip([(info, target)]))
    assert "symbolic link" in refusal.message
    info.create_system = 0  # a DOS-made entry with link bits: still refused
    assert "symbolic link" in refused(make_zip([(info, target)])).message


@pytest.mark.parametrize("kind", [stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK])
def test_special_files_are_refused(kind: int) -> None:
    info = zipfile.ZipInfo("results/dev")
    info.external_attr = (kind | 0o644) << 16
    assert "special file" in refused(make_zip([(info, b"")])).message


def test_duplicate_names_and_file_directory_clashes_are_refused() -> None:
    with pytest.warns(UserWarning):
        data = make_zip([("results/a.json", b"1"), ("results/a.json", b"2")])
    assert "same name" in refused(data).message
    assert "both a file and a directory" in refused(make_zip([("results/a", b"1"), ("results/a/b", b"2")])).message


def test_encrypted_and_exotic_compression_are_refused() -> None:
    data = bytearray(make_zip([("a.json", b"{}")], compression=zipfile.ZIP_STORED))
    flipped = _patch_central(bytes(data), "flag_bits", 0x1)
    assert "encrypted" in refused(flipped).message
    bz = make_zip([("a.json", b"{}" * 100)], compression=zipfile.ZIP_BZIP2)
    assert "compression method 12" in refused(bz).message


def test_entry_count_cap_applies_before_the_central_directory_is_parsed() -> None:
    data = make_zip([(f"f{i}.json", b"{}") for i in range(21)])
    refusal = refused(data)
    assert refusal.actual == 21 and "declares 21 entries" in refusal.message
    # An end record that lies about the count is caught when the entries are counted.
    lying = _patch_eocd_count(data, 1)
    assert "has 21 entries" in refused(lying).message


def test_central_directory_size_cap() -> None:
    limits = ArchiveLimits(max_entries=10_000, max_directory_bytes=1024)
    data = make_zip([(f"entry-with-a-long-name-{i:04d}.json", b"{}") for i in range(30)])
    assert "central directory" in refused(data, limits).message


def test_per_entry_total_and_ratio_caps() -> None:
    noise = random.Random(7)  # incompressible bytes, so only the size caps can trip
    big = noise.randbytes(76_800)
    assert "over the 65536-byte cap" in refused(make_zip([("big.bin", big)])).message
    many = [(f"part{i}.bin", noise.randbytes(51_200)) for i in range(6)]  # 6 x 51,200 > 256 KiB
    assert "uncompressed bytes" in refused(make_zip(many)).message
    bomb = make_zip([("zeros.bin", b"\0" * 60_000)])
    assert "zip bomb" in refused(bomb).message
    # The same bytes below the ratio floor are fine: small files cannot amplify much.
    extract_zip(make_zip([("zeros.bin", b"\0" * 10_000)]), limits=SMALL)


def test_an_archive_of_many_small_bombs_is_caught_by_the_whole_archive_ratio() -> None:
    limits = ArchiveLimits(max_entries=100, max_entry_bytes=1 << 20, max_total_bytes=1 << 22, max_ratio=50,
                           ratio_floor=64 * 1024)
    data = make_zip([(f"z{i}.bin", b"\0" * 60_000) for i in range(20)])
    assert "inflates" in refused(data, limits).message


def test_a_size_header_that_lies_cannot_inflate_past_it() -> None:
    data = make_zip([("a.json", b"x" * 5000)])
    lying = _patch_central(data, "file_size", 100)
    refusal = refused(lying)
    assert "BadZipFile" in refusal.message or "declared size" in refusal.message


@pytest.mark.parametrize("data", [b"", b"not a zip at all", b"PK\x05\x06" + b"\0" * 10, b"PK\x03\x04" * 100])
def test_garbage_is_refused(data: bytes) -> None:
    refused(data)


def test_an_empty_zip_is_an_empty_archive() -> None:
    archive = extract_zip(make_zip([]), limits=SMALL)
    assert archive.names == () and dict(archive.files) == {}


def test_check_name_returns_components() -> None:
    assert check_name("a/b/c.json") == ["a", "b", "c.json"]
    assert check_name("a/b/") == ["a", "b"]


# --- property-based: only refusals come out ----------------------------------------------------------

def _extract_or_refuse(data: bytes, prefix: str = "") -> None:
    try:
        archive = extract_zip(data, prefix=prefix, limits=SMALL)
    except Refusal as refusal:
        assert refusal.code == "import.unsafe_archive"
        return
    for name in archive.names:
        parts = name.split("/")
        assert not name.startswith("/") and "\\" not in name and ":" not in name
        assert all(p not in ("", ".", "..") for p in parts)
    assert sum(len(f.data) for f in archive.files.values()) <= SMALL.max_total_bytes


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_only_refuse(data: bytes) -> None:
    _extract_or_refuse(data)


_VALID = make_zip([("results/a/result.json", b'{"a": 1}' * 20), ("results/host.json", b"{}"),
                   ("results/a/transcript.json", bytes(range(200)))])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_zips_only_refuse(edits: list[tuple[int, int]]) -> None:
    data = bytearray(_VALID)
    for position, value in edits:
        data[position] = value
    _extract_or_refuse(bytes(data), prefix="results/")


_NAME_PART = st.text(alphabet=st.sampled_from(list("ab.-_:\\\x00\x1f é/")), min_size=0, max_size=6)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(_NAME_PART, st.binary(max_size=64), st.integers(0, 0o177777)), min_size=1, max_size=6))
def test_generated_entries_only_refuse_and_accepted_names_are_safe(
        entries: list[tuple[str, bytes, int]]) -> None:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore", UserWarning)  # duplicate names are what we want to produce
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name or "x")
            info.external_attr = mode << 16
            archive.writestr(info, data)
    _extract_or_refuse(buffer.getvalue())


# --- helpers that damage a zip's records in place ---------------------------------------------------

def _patch_eocd_count(data: bytes, count: int) -> bytes:
    pos = data.rfind(b"PK\x05\x06")
    return data[: pos + 8] + struct.pack("<HH", count, count) + data[pos + 12:]


_CENTRAL_FIELDS = {"flag_bits": (8, "<H"), "file_size": (24, "<I")}


def _patch_central(data: bytes, field: str, value: int) -> bytes:
    """Change one field of every central-directory header (and, for flags, the local header too)."""
    offset, fmt = _CENTRAL_FIELDS[field]
    out = bytearray(data)
    pos = out.find(b"PK\x01\x02")
    while pos >= 0:
        struct.pack_into(fmt, out, pos + offset, value)
        pos = out.find(b"PK\x01\x02", pos + 4)
    if field == "flag_bits":
        local = out.find(b"PK\x03\x04")
        struct.pack_into("<H", out, local + 6, value)
    return bytes(out)
