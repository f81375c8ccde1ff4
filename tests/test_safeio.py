"""safeio: the one door for files from other jobs, artifacts and the state directory."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testops_evidence import safeio
from testops_evidence.errors import Refusal
from testops_evidence.safeio import (
    SafeRoot,
    StateDir,
    canonical_json,
    canonical_text,
    ensure_private_dir,
    open_safe,
    parse_json_bytes,
    read_safe,
    read_safe_path,
    relative_to_root,
    sha256_bytes,
    sha256_file,
    write_atomic,
    write_once,
)

LIMIT = 1024 * 1024


def refused(code: str, func: object, *args: object, **kwargs: object) -> Refusal:
    with pytest.raises(Refusal) as caught:
        func(*args, **kwargs)  # type: ignore[operator]
    assert caught.value.code == code, str(caught.value)
    return caught.value


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "file.json").write_bytes(b'{"a": 1}\n')
    (base / "sub" / "inner.txt").write_bytes(b"inner")
    return base


# --- read_safe ---------------------------------------------------------------------------------------------


def test_read_safe_accepts_a_normal_file(root: Path) -> None:
    assert read_safe(root, "file.json", limit=LIMIT) == b'{"a": 1}\n'
    assert read_safe(root, "sub/inner.txt", limit=LIMIT) == b"inner"
    assert read_safe(str(root), "sub/inner.txt", limit=5) == b"inner"  # exactly at the cap


def test_read_safe_refuses_a_symlink_as_the_final_component(root: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("secret")
    (root / "link.json").symlink_to(tmp_path / "outside")
    (root / "inner-link").symlink_to(root / "file.json")  # even a link that stays inside the root
    refused("io.unsafe_path", read_safe, root, "link.json", limit=LIMIT)
    refused("io.unsafe_path", read_safe, root, "inner-link", limit=LIMIT)


def test_read_safe_refuses_a_symlink_as_an_intermediate_component(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.json").write_text("{}")
    (root / "jump").symlink_to(tmp_path / "elsewhere")
    err = refused("io.unsafe_path", read_safe, root, "jump/x.json", limit=LIMIT)
    assert err.actual == "jump/x.json"


def test_read_safe_refuses_a_symlinked_root(root: Path, tmp_path: Path) -> None:
    (tmp_path / "root-link").symlink_to(root)
    refused("io.unsafe_path", read_safe, tmp_path / "root-link", "file.json", limit=LIMIT)


def test_read_safe_refuses_a_hard_link(root: Path, tmp_path: Path) -> None:
    # A hard link to a file elsewhere cannot be told from the original by name: nlink is the tell.
    os.link(root / "file.json", tmp_path / "second-name")
    err = refused("io.unsafe_path", read_safe, root, "file.json", limit=LIMIT)
    assert (err.expected, err.actual) == ("nlink == 1", 2)


@pytest.mark.parametrize("relpath", [
    "../root/file.json", "sub/../file.json", "./file.json", "sub/./inner.txt", "/etc/passwd", "",
    "sub//inner.txt", "sub/", "a\\b", "nul\x00byte", "line\nbreak", "esc\x1b[0m", "bidi\u202egnp", "..", ".",
    "x" * 256,
])
def test_read_safe_refuses_paths_outside_the_allowed_shape(root: Path, relpath: str) -> None:
    refused("io.unsafe_path", read_safe, root, relpath, limit=LIMIT)


@pytest.mark.parametrize("name", ["sp ace.xml", "2024-05-01T10-00-00+00-00_task_abc.eval", "Test#test_02.xml",
                                  "a:b.json", "é-ü.xml", "-leading.xml", "x" * 255])
def test_read_safe_reads_names_producers_write_by_default(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"{}")
    assert read_safe(tmp_path, name, limit=LIMIT) == b"{}"


def test_a_safe_root_reads_as_read_safe_does_and_refuses_what_it_refuses(root: Path, tmp_path: Path) -> None:
    # One open of the root for many reads (export's 10,000 cells), with every check of read_safe per file.
    (tmp_path / "outside").write_text("secret")
    (root / "link.json").symlink_to(tmp_path / "outside")
    (tmp_path / "elsewhere").mkdir()
    (root / "jump").symlink_to(tmp_path / "elsewhere")
    (root / "big.bin").write_bytes(b"x" * 101)
    os.link(root / "sub" / "inner.txt", tmp_path / "second-name")
    with SafeRoot(root) as files:
        assert files.read("file.json", limit=LIMIT) == b'{"a": 1}\n'
        refused("io.unsafe_path", files.read, "link.json", limit=LIMIT)
        refused("io.unsafe_path", files.read, "jump/x.json", limit=LIMIT)
        refused("io.unsafe_path", files.read, "sub/inner.txt", limit=LIMIT)  # two links
        refused("io.unsafe_path", files.read, "../root/file.json", limit=LIMIT)
        refused("io.missing", files.read, "absent.json", limit=LIMIT)
        refused("io.too_large", files.read, "big.bin", limit=100)
        # The root is pinned by its descriptor: swapped for a link to elsewhere, the original is still read.
        os.rename(root, tmp_path / "moved")
        root.symlink_to(tmp_path / "elsewhere")
        assert files.read("file.json", limit=LIMIT) == b'{"a": 1}\n'
    refused("io.unsafe_path", SafeRoot(root).read, "file.json", limit=LIMIT)  # a linked root is refused
    descriptors = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with SafeRoot(tmp_path / "moved") as files:
        for _ in range(50):
            files.read("file.json", limit=LIMIT)
            with pytest.raises(Refusal):
                files.read("link.json", limit=LIMIT)
    if descriptors is not None:
        assert len(os.listdir("/proc/self/fd")) == descriptors  # nothing leaked, refusals included


def test_read_safe_refuses_an_oversized_file(root: Path) -> None:
    (root / "big.bin").write_bytes(b"x" * 101)
    err = refused("io.too_large", read_safe, root, "big.bin", limit=100)
    assert (err.field, err.expected, err.actual) == ("size", "<= 100", 101)


def test_read_safe_refuses_a_fifo_without_hanging(root: Path) -> None:
    os.mkfifo(root / "pipe")
    result: list[BaseException | bytes] = []

    def attempt() -> None:
        try:
            result.append(read_safe(root, "pipe", limit=LIMIT))
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=20)  # a hang would be a bug; the bound only keeps a broken build from stalling CI
    assert not worker.is_alive(), "read_safe blocked opening a FIFO"
    assert isinstance(result[0], Refusal)
    assert (result[0].code, result[0].actual) == ("io.unsafe_path", "fifo")


def test_read_safe_refuses_a_character_device(root: Path) -> None:
    try:
        os.mknod(root / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a character device needs CAP_MKNOD (run the suite as root in a container)")
    err = refused("io.unsafe_path", read_safe, root, "null", limit=LIMIT)
    assert err.actual == "character device"


def test_read_safe_refuses_a_device_reached_through_a_symlink(root: Path) -> None:
    (root / "devnull").symlink_to("/dev/null")
    refused("io.unsafe_path", read_safe, root, "devnull", limit=LIMIT)


def test_read_safe_refuses_a_directory(root: Path) -> None:
    err = refused("io.unsafe_path", read_safe, root, "sub", limit=LIMIT)
    assert err.actual == "directory"


def test_read_safe_refuses_a_file_used_as_a_directory(root: Path) -> None:
    refused("io.unsafe_path", read_safe, root, "file.json/x", limit=LIMIT)


def test_read_safe_reports_a_missing_file_as_io_missing(root: Path) -> None:
    err = refused("io.missing", read_safe, root, "absent.json", limit=LIMIT)
    assert err.exit_code == 2
    refused("io.missing", read_safe, root, "no-dir/absent.json", limit=LIMIT)


def test_read_safe_refuses_a_root_that_is_not_a_directory(root: Path) -> None:
    refused("io.unsafe_path", read_safe, root / "file.json", "x", limit=LIMIT)
    refused("io.unsafe_path", read_safe, root / "missing", "x", limit=LIMIT)


def test_read_safe_closes_every_descriptor(root: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        read_safe(root, "sub/inner.txt", limit=LIMIT)
        with pytest.raises(Refusal):
            read_safe(root, "sub", limit=LIMIT)
        with pytest.raises(Refusal):
            read_safe(root, "sub/absent", limit=LIMIT)
    assert len(os.listdir("/proc/self/fd")) == before


def test_open_safe_yields_the_checked_descriptor(root: Path) -> None:
    with open_safe(root, "file.json", limit=LIMIT) as (fd, st):
        assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1
        assert safeio.sha256_fd(fd) == sha256_bytes(b'{"a": 1}\n')


def test_read_safe_path_uses_the_parent_as_root(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_safe_path(root / "sub" / "inner.txt", limit=LIMIT) == b"inner"
    monkeypatch.chdir(root)
    assert read_safe_path("file.json", limit=LIMIT) == b'{"a": 1}\n'
    (tmp_path / "ln").symlink_to(root / "file.json")
    refused("io.unsafe_path", read_safe_path, tmp_path / "ln", limit=LIMIT)


def test_relative_to_root(root: Path) -> None:
    assert relative_to_root(root, root / "sub" / "inner.txt") == "sub/inner.txt"
    refused("io.unsafe_path", relative_to_root, root, root.parent / "other")
    refused("io.unsafe_path", relative_to_root, root, root)
    refused("io.unsafe_path", relative_to_root, root, str(root) + "-sibling/x")


# --- the path splitter (property-based) ----------------------------------------------------------------

_COMPONENT = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True).filter(lambda s: s not in (".", ".."))


@settings(max_examples=300, deadline=None)
@given(st.lists(_COMPONENT, min_size=1, max_size=6))
def test_splitter_accepts_allowed_components(parts: list[str]) -> None:
    assert safeio._split_relative("/".join(parts)) == parts


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_splitter_never_yields_an_escaping_component(relpath: str) -> None:
    try:
        parts = safeio._split_relative(relpath)
    except Refusal as exc:
        assert exc.code == "io.unsafe_path"
        return
    assert parts and all(p not in ("", ".", "..") for p in parts)
    assert all(safeio.readable_name(p) for p in parts)
    assert "/".join(parts) == relpath
    assert not relpath.startswith("/")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "..", ".", "", "b.json", "/", "\\", "\x00", "\n", "\u202e", "ü", "a b"]),
                min_size=1, max_size=6))
def test_splitter_refuses_any_dot_dot_or_empty_component(pieces: list[str]) -> None:
    relpath = "/".join(pieces)
    bad = any(p in ("..", ".", "", "/", "\\", "\x00", "\n", "\u202e") for p in pieces)
    if bad:
        with pytest.raises(Refusal):
            safeio._split_relative(relpath)
    else:
        assert safeio._split_relative(relpath) == pieces


# --- write_once / write_atomic --------------------------------------------------------------------------------


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_write_once_creates_0600_and_refuses_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "receipt.json"
    write_once(target, b"first")
    assert target.read_bytes() == b"first"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    err = refused("io.exists", write_once, target, b"second")
    assert err.actual == str(target)
    assert target.read_bytes() == b"first"  # untouched
    assert _leftovers(tmp_path) == []


def test_write_once_refuses_a_dangling_symlink_in_its_place(tmp_path: Path) -> None:
    (tmp_path / "receipt.json").symlink_to(tmp_path / "elsewhere")
    refused("io.exists", write_once, tmp_path / "receipt.json", b"x")
    assert not (tmp_path / "elsewhere").exists()


# The kernel's file-size limit makes a real write fail half-way (EFBIG), like a full disk; it runs in a
# child process so the limit cannot touch the test process.
_FAILING_WRITE = """
import resource, signal, sys
from pathlib import Path
from testops_evidence import safeio
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    getattr(safeio, sys.argv[1])(Path(sys.argv[2]), b"x" * 100_000)
except OSError as exc:
    print("OSError", exc.errno)
except safeio.Refusal as refusal:
    print(refusal.code)
else:
    print("written")
"""


def _write_with_failing_disk(function: str, target: Path) -> str:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FAILING_WRITE, function, str(target)], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_write_once_never_leaves_a_partial_or_temp_file_when_writing_fails(tmp_path: Path) -> None:
    # A full disk (here: a file-size limit, EFBIG) is a coded refusal, never an OSError (internal.error).
    assert _write_with_failing_disk("write_once", tmp_path / "receipt.json") == "io.write_failed"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_write_once_custom_mode(tmp_path: Path) -> None:
    write_once(tmp_path / "shared.json", b"{}", mode=0o644)
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o644 & ~_umask()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_write_once_from_two_threads_exactly_one_wins(tmp_path: Path) -> None:
    target = tmp_path / "once.json"
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def attempt(index: int) -> None:
        barrier.wait()
        try:
            write_once(target, f"writer {index}".encode())
            outcomes.append("ok")
        except Refusal as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["io.exists"] * 7 + ["ok"]
    assert target.read_text().startswith("writer ")
    assert _leftovers(tmp_path) == []


def test_write_atomic_replaces_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "ledger.json"
    write_atomic(target, b"one")
    inode_before = target.stat().st_ino
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert target.stat().st_ino != inode_before  # a new file was renamed over: readers see old or new
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []


def test_write_atomic_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    (tmp_path / "victim").write_text("keep")
    (tmp_path / "ledger.json").symlink_to(tmp_path / "victim")
    write_atomic(tmp_path / "ledger.json", b"new")
    assert (tmp_path / "victim").read_text() == "keep"
    assert not (tmp_path / "ledger.json").is_symlink()


def test_write_atomic_failure_keeps_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "ledger.json"
    write_atomic(target, b"old")
    assert _write_with_failing_disk("write_atomic", target) == "io.write_failed"
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


# --- hashing and JSON ---------------------------------------------------------------------------------------


def test_canonical_json_is_reproducible() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}\n'.encode()
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})


def test_sha256_file_streams_and_refuses_a_symlink(tmp_path: Path) -> None:
    data = os.urandom(3 * safeio.HASH_CHUNK + 17)
    (tmp_path / "blob").write_bytes(data)
    assert sha256_file(tmp_path / "blob") == sha256_bytes(data)
    (tmp_path / "ln").symlink_to(tmp_path / "blob")
    with pytest.raises(OSError):
        sha256_file(tmp_path / "ln")


@pytest.mark.parametrize("data", [b"\xff", b"{", b"[" * 100_000, b'{"a":1', "€".encode("utf-16")])
def test_parse_json_bytes_refuses_with_io_invalid_json(data: bytes) -> None:
    refused("io.invalid_json", parse_json_bytes, data, "the receipt")


def test_parse_json_bytes_accepts_json() -> None:
    assert parse_json_bytes('{"a": "é"}'.encode(), "x") == {"a": "é"}


# --- the state directory --------------------------------------------------------------------------------------


def test_state_dir_is_created_private(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "a" / "state")
    path = state.ensure()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_state_dir_fixes_group_and_other_bits(tmp_path: Path) -> None:
    loose = tmp_path / "state"
    loose.mkdir()
    loose.chmod(0o777)
    StateDir(loose).ensure()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


def test_state_dir_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(tmp_path / "real")
    err = refused("io.state_dir", StateDir(tmp_path / "state").ensure)
    assert err.actual == "symlink"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    refused("io.state_dir", StateDir(tmp_path / "dangling").ensure)


def test_state_dir_refuses_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("")
    refused("io.state_dir", StateDir(tmp_path / "state").ensure)


def test_state_dir_refuses_a_foreign_owner(tmp_path: Path) -> None:
    foreign = tmp_path / "state"
    foreign.mkdir(mode=0o700)
    try:
        os.chown(foreign, os.getuid() + 4242, -1)
    except PermissionError:
        pytest.skip("simulating another owner needs root (chown); the suite runs as root in CI's container")
    err = refused("io.state_dir", ensure_private_dir, foreign)
    assert (err.field, err.expected, err.actual) == ("owner", os.getuid(), os.getuid() + 4242)


def test_receipts_are_write_once(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    path = state.write_receipt("select.json", {"b": 2, "a": [1]})
    assert json.loads(path.read_text()) == {"a": [1], "b": 2}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert state.has("select.json")
    assert state.read_receipt("select.json") == {"a": [1], "b": 2}
    refused("io.exists", state.write_receipt, "select.json", {})
    with pytest.raises(ValueError):
        state.receipt_path("../escape.json")
    with pytest.raises(ValueError):
        state.receipt_path("..")


def test_once_refuses_a_second_start_and_pending_markers_lists_it(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert state.pending_markers() == []  # no directory yet
    marker = state.once("upload", {"chunks": 3})
    body = json.loads(marker.read_text())
    assert body == {"stage": "upload", "status": "STARTED_NO_AUTOMATIC_RESEND", "chunks": 3}
    err = refused("once.already_started", state.once, "upload")
    assert (err.field, err.expected, err.actual) == ("once-marker", "absent", "once-upload.json")
    assert err.hint  # tells the operator to reconcile
    state.once("launch")
    assert state.pending_markers() == ["launch", "upload"]
    state.done("upload", {"uploaded": 3})
    assert state.pending_markers() == ["launch"]
    assert json.loads((state.path / "done-upload.json").read_text()) == {"stage": "upload", "uploaded": 3}
    # A second process (a re-run of the phase) sees the same marker.
    refused("once.already_started", StateDir(tmp_path / "state").once, "upload")


@pytest.mark.parametrize("stage", ["", "Upload", "a/b", "../x", "x" * 121])
def test_once_refuses_malformed_stage_names(tmp_path: Path, stage: str) -> None:
    with pytest.raises(ValueError):
        StateDir(tmp_path / "state").once(stage)


def test_failure_json_is_replaced_atomically(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    state.write_failure({"code": "a"})
    state.write_failure({"code": "b"})
    assert json.loads((state.path / "failure.json").read_text()) == {"code": "b"}
    assert _leftovers(state.path) == []


# --- round two (#14): create-once without a window, the state dir's parents, writes that cannot happen ----------


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux's; macOS uses renamex_np")
def test_write_once_renames_into_place_in_one_system_call() -> None:
    # The link-then-unlink of the old write_once left, if killed between the two, the whole file with a
    # second link that every reader refused (io.unsafe_path: 2 hard links): a re-run was blocked.
    assert safeio.create_once_mechanism() == "renameat2"


def test_a_crash_leftover_second_link_is_removed_by_the_reader(tmp_path: Path) -> None:
    # The exact state a kill between link() and unlink() leaves (the fallback where renameat2 is missing).
    target = tmp_path / "results-54-receipt.json"
    target.write_bytes(b'{"ok": true}\n')
    twin = tmp_path / ".results-54-receipt.json.4242.0a1b2c3d.tmp"
    os.link(target, twin)
    assert read_safe(tmp_path, target.name, limit=1024) == b'{"ok": true}\n'
    assert not twin.exists() and target.stat().st_nlink == 1


def test_any_other_second_link_is_still_refused(tmp_path: Path) -> None:
    target = tmp_path / "receipt.json"
    target.write_bytes(b"{}")
    for other in (tmp_path / "copy.json", tmp_path / ".receipt.json.tmp", tmp_path / ".receipt.json.1.x.tmp"):
        os.link(target, other)
        with pytest.raises(Refusal) as info:
            read_safe(tmp_path, target.name, limit=1024)
        assert info.value.code == "io.unsafe_path" and other.exists()
        other.unlink()


def test_a_state_dir_behind_a_symlinked_parent_in_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / ".testops-evidence").symlink_to(elsewhere)  # a checkout can hold this link
    state = StateDir(workspace / ".testops-evidence" / "state", workspace=str(workspace))
    with pytest.raises(Refusal) as info:
        state.check()
    assert info.value.code == "io.state_dir" and "symbolic link" in info.value.message
    assert list(elsewhere.iterdir()) == []  # nothing was created through the link
    with pytest.raises(Refusal):
        state.write_failure({"code": "x"})
    assert list(elsewhere.iterdir()) == []


def test_a_state_dir_in_the_workspace_is_created_component_by_component(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = StateDir(workspace / ".testops-evidence" / "state", workspace=str(workspace))
    state.check()
    assert (workspace / ".testops-evidence" / "state").is_dir()
    assert stat.S_IMODE((workspace / ".testops-evidence" / "state").stat().st_mode) == 0o700


_READ_ONLY_STATE = """
import os, sys
from testops_evidence.safeio import StateDir, Refusal
import testops_evidence.codes  # a refusal reads the registry: load it while the checkout is still readable
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)  # root ignores mode bits; the runner user does not
try:
    StateDir(sys.argv[1]).check()
except Refusal as refusal:
    print(refusal.code, refusal.message)
else:
    print("accepted")
"""


def test_a_read_only_state_dir_is_refused_before_the_phase_writes_anything() -> None:
    import shutil
    import subprocess
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="read-only-state-"))  # under /tmp: reachable by the dropped user
    try:
        base.chmod(0o755)
        state = base / "state"
        state.mkdir(mode=0o500)
        state.chmod(0o500)
        if os.geteuid() == 0:
            os.chown(state, 65534, 65534)
        done = subprocess.run([sys.executable, "-c", _READ_ONLY_STATE, str(state)], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.stdout.startswith("io.state_dir") and "cannot be written" in done.stdout, (
            done.stdout + done.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@settings(max_examples=400, deadline=None)
@given(value=st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20))
def test_canonical_json_is_json_dumps(value: Any) -> None:
    import json

    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    assert canonical_json(value) == expected.encode("utf-8")
    assert canonical_text(value) + "\n" == expected  # the selection's row lengths are counted in this text


def test_canonical_json_refuses_what_json_dumps_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_json({"a": object()})
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        canonical_json(looped)
