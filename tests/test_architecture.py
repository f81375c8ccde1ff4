"""The module boundaries docs/architecture.md promises, checked on the source: TestOps paths live only in
``testops/``, the adapters never take a ``PhaseContext``, and phases never branch on a backend's name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "testops_evidence"
# A TestOps REST path as the action sends it (API prefix removed): /testcase, /upload/start, /jobrun/12/plan...
TESTOPS_PATH = re.compile(r"(?<![\w.-])/(testcase|testplan|testresult|jobrun|job|launch|upload|uaa)(?=[/?{}`'\"\s]|$)")


def sources(folder: Path = SRC) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module, docstrings and comments' neighbours included (comments are not
    strings, so they are read as text below)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [(node.lineno, node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    found += [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
              if "#" in line and TESTOPS_PATH.search(line.split("#", 1)[1])]
    return found


def test_no_testops_path_outside_the_testops_package() -> None:
    offenders = [f"{path.relative_to(SRC)}:{line}: {text[:80]!r}"
                 for path in sources() if "testops" not in path.relative_to(SRC).parts[:1]
                 for line, text in strings(path) if TESTOPS_PATH.search(text) and "://" not in text]
    assert offenders == []


def names_used(path: Path) -> set[str]:
    """Names a module imports or refers to in code (docstrings do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    used |= {node.value for node in ast.walk(tree)  # string annotations under `from __future__ import annotations`
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value == "PhaseContext"}
    return used


def test_adapters_take_plain_values_never_a_phase_context() -> None:
    adapters = [*sources(SRC / "testops"), SRC / "github_run.py", *sources(SRC / "backends")]
    offenders = [str(path.relative_to(SRC)) for path in adapters if "PhaseContext" in names_used(path)]
    assert offenders == []


def test_the_architecture_tests_can_fail() -> None:
    assert TESTOPS_PATH.search('client.get(f"/jobrun/{job_run_id}")')
    assert TESTOPS_PATH.search("POST /upload/test-result")
    assert not TESTOPS_PATH.search("testops-evidence/launch-receipt/v1")
    assert "PhaseContext" in names_used(SRC / "runner.py")


def test_phases_never_branch_on_a_backend_name() -> None:
    pattern = re.compile(r"""backend\s*[!=]=\s*["'](testops|files)["']|["'](testops|files)["']\s*[!=]=\s*\w*backend""")
    offenders = [f"{path.name}:{n}" for path in sources(SRC / "phases")
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if pattern.search(line)]
    assert offenders == []
