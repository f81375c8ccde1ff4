"""The composite action's set-up step (composite/setup.sh): uv fetched by pinned URL and hash, the venv built
from the hash-locked runtime lock, pip where uv cannot be had, and the action's CLI on the job's PATH.

The fetcher is tested against a real HTTP server on 127.0.0.1 serving wheels made here; the whole step
against PyPI (it is what every job of a campaign runs), skipped where PyPI cannot be reached.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "composite" / "setup.sh"
FETCH = ROOT / "composite" / "fetch_uv.py"
UV_LOCK = ROOT / "requirements" / "uv.txt"

sys.path.insert(0, str(ROOT / "composite"))
import fetch_uv  # noqa: E402

sys.path.remove(str(ROOT / "composite"))


@pytest.fixture
def wheel_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Serves the files of a directory over HTTP on 127.0.0.1; yields its base URL and the directory."""
    served = tmp_path / "served"
    served.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(served), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def make_wheel(directory: Path, version: str, binary: bytes) -> tuple[str, str]:
    """A wheel shaped like uv's: the executable under ``uv-<version>.data/scripts/uv``. Returns name, sha256."""
    name = f"uv-{version}-py3-none-manylinux_2_17_x86_64.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(f"uv-{version}.data/scripts/uv", binary)
        wheel.writestr(f"uv-{version}.dist-info/METADATA", f"Name: uv\nVersion: {version}\n")
    (directory / name).write_bytes(buffer.getvalue())
    return name, hashlib.sha256(buffer.getvalue()).hexdigest()


def pin(url: str, sha256: str, os_name: str = sys.platform, machine: str = platform.machine()) -> str:
    return f'uv @ {url} ; sys_platform == "{os_name}" and platform_machine == "{machine}" \\\n    --hash=sha256:{sha256}\n'


def fetch(lock: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(FETCH), str(lock), str(dest)], capture_output=True, text=True,
                          check=False, timeout=120)


def test_the_shipped_uv_lock_pins_one_wheel_per_runner_platform_of_one_version() -> None:
    pins = list(fetch_uv.LINE.finditer(UV_LOCK.read_text(encoding="utf-8")))
    platforms = {(m["os"], m["machine"]) for m in pins}
    assert platforms == {("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "x86_64"), ("darwin", "arm64")}
    assert len(pins) == len(platforms) and len({m["version"] for m in pins}) == 1
    for m in pins:
        assert m["url"].startswith("https://files.pythonhosted.org/packages/")
        tag = m["wheel"].removesuffix(".whl")
        assert ("macosx" if m["os"] == "darwin" else "manylinux") in tag and m["machine"] in tag, m["wheel"]
    # Every line of the file is a comment or part of a pin: nothing the fetcher would skip in silence.
    lines = [line for line in UV_LOCK.read_text().splitlines() if line and not line.startswith("#")]
    assert len(lines) == 2 * len(pins)


def test_fetch_takes_the_executable_of_the_wheel_whose_bytes_have_the_pinned_digest(
        wheel_server: tuple[str, Path], tmp_path: Path) -> None:
    base, served = wheel_server
    name, digest = make_wheel(served, "9.9.9", b"#!/bin/sh\necho uv 9.9.9\n")
    lock = tmp_path / "uv.txt"
    lock.write_text("# a comment\n" + pin(f"{base}/other.whl", "0" * 64, "plan9", "mips") + pin(f"{base}/{name}", digest))
    done = fetch(lock, tmp_path / "uv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"uv 9.9.9 from {name}" in done.stdout
    uv = tmp_path / "uv" / "bin" / "uv"
    assert os.access(uv, os.X_OK) and subprocess.run([str(uv)], capture_output=True, text=True).stdout == "uv 9.9.9\n"


def test_fetch_refuses_a_wheel_whose_bytes_differ_from_the_pin_and_writes_nothing(
        wheel_server: tuple[str, Path], tmp_path: Path) -> None:
    base, served = wheel_server
    name, digest = make_wheel(served, "9.9.9", b"#!/bin/sh\necho replaced\n")
    pinned = hashlib.sha256(b"the wheel the lock was made from").hexdigest()
    lock = tmp_path / "uv.txt"
    lock.write_text(pin(f"{base}/{name}", pinned))
    done = fetch(lock, tmp_path / "uv")
    assert done.returncode == 1
    assert f"sha256 {digest}, the lock pins {pinned}" in done.stderr
    assert not (tmp_path / "uv").exists()


@pytest.mark.parametrize("problem", ["no pin for this platform", "no such file on the server", "not a wheel"])
def test_fetch_fails_with_a_reason_where_no_uv_can_be_had(problem: str, wheel_server: tuple[str, Path],
                                                        tmp_path: Path) -> None:
    base, served = wheel_server
    lock = tmp_path / "uv.txt"
    if problem == "no pin for this platform":
        lock.write_text(pin(f"{base}/uv-1.0.0-py3-none-any.whl", "0" * 64, "plan9", "mips"))
        reason = "pins no uv wheel for"
    elif problem == "no such file on the server":
        lock.write_text(pin(f"{base}/uv-1.0.0-py3-none-any.whl", "0" * 64))
        reason = "uv could not be fetched: HTTP Error 404"
    else:
        (served / "uv-1.0.0-py3-none-any.whl").write_bytes(b"not a zip")
        lock.write_text(pin(f"{base}/uv-1.0.0-py3-none-any.whl", hashlib.sha256(b"not a zip").hexdigest()))
        reason = "uv could not be fetched: File is not a zip file"
    done = fetch(lock, tmp_path / "uv")
    assert done.returncode == 1 and reason in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "uv" / "bin" / "uv").exists()


# --- the whole step -----------------------------------------------------------------------------------------


def run_step(tmp_path: Path, action_root: Path = ROOT, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    for name in ("tool-cache", "temp"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "output").touch()
    (tmp_path / "path").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "TESTOPS_EVIDENCE_INSTALLER"}
    env.update({"GITHUB_ACTION_PATH": str(action_root / "composite"), "GITHUB_OUTPUT": str(tmp_path / "output"),
                "GITHUB_PATH": str(tmp_path / "path"), "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"),
                "RUNNER_TEMP": str(tmp_path / "temp"), **extra})
    done = subprocess.run(["bash", str(action_root / "composite" / "setup.sh")], env=env, capture_output=True,
                          text=True, check=False, timeout=600)
    return done, tmp_path / "output"


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


needs_pypi = pytest.mark.skipif(not pypi_reachable(), reason="PyPI is not reachable: the set-up step installs from it")


def installed(python: str) -> set[str]:
    code = "import importlib.metadata as m; print('\\n'.join(sorted(d.metadata['Name'].lower() for d in m.distributions())))"
    names = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {normalized(name) for name in names}


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``backports.zstd`` is ``backports-zstd``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> set[str]:
    text = (ROOT / "requirements" / "runtime.txt").read_text()
    return {normalized(line.split("==")[0]) for line in text.splitlines() if line and line[0].isalpha()}


@needs_pypi
def test_the_step_builds_the_locked_venv_with_the_pinned_uv_and_puts_the_cli_on_the_path(tmp_path: Path) -> None:
    done, output = run_step(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "venv built with uv" in done.stdout and "uv 0." in done.stdout
    python = output.read_text().strip().removeprefix("python=")
    assert installed(python) == locked()  # the lock, all of it, nothing else (no pip, no setuptools)
    # The CLI for later steps: one launcher alone in a directory added to GITHUB_PATH.
    cli_dir = (tmp_path / "path").read_text().strip()
    assert cli_dir == str(tmp_path / "temp" / "testops-evidence-cli")
    assert os.listdir(cli_dir) == ["testops-evidence"]
    hostile = {**os.environ, "PYTHONPATH": str(tmp_path / "hostile")}
    (tmp_path / "hostile" / "testops_evidence").mkdir(parents=True)
    (tmp_path / "hostile" / "testops_evidence" / "__init__.py").write_text("raise SystemExit(99)\n")
    version = subprocess.run([f"{cli_dir}/testops-evidence", "--version"], capture_output=True, text=True, env=hostile,
                             check=False)
    assert (version.returncode, version.stdout.strip()) == (0, "testops-evidence 0.2.0"), version.stderr
    # A later composite step of the same job reuses the venv and adds the directory to PATH only once.
    again, _ = run_step(tmp_path, PATH=f"{cli_dir}:{os.environ['PATH']}")
    assert again.returncode == 0 and "reusing the venv" in again.stdout
    assert (tmp_path / "path").read_text() == ""


@needs_pypi
@pytest.mark.slow
def test_pip_builds_the_venv_where_no_uv_is_pinned_for_the_runner_and_the_log_says_why(tmp_path: Path) -> None:
    # The action as a user copies it, with a uv lock that pins no wheel for this platform.
    action = tmp_path / "action"
    for part in ("composite", "src"):
        shutil.copytree(ROOT / part, action / part)
    (action / "requirements").mkdir()
    shutil.copy2(ROOT / "requirements" / "runtime.txt", action / "requirements")
    (action / "requirements" / "uv.txt").write_text(pin("https://example.invalid/uv-1.0.0-py3-none-any.whl", "0" * 64,
                                                        "plan9", "mips"))
    done, output = run_step(tmp_path / "job", action)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pins no uv wheel for" in done.stderr and "pip builds the venv instead" in done.stderr
    assert "venv built with pip" in done.stdout
    python = output.read_text().strip().removeprefix("python=")
    assert locked() <= installed(python)  # pip's venv also holds pip itself
