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


ARCHITECTURE = SRC.parent.parent / "docs" / "architecture.md"


def module_map() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1]
    return section.split("```", 2)[1]


def mapped_names(block: str, root: Path = SRC) -> set[str]:
    """Every module the map names. A folder line (``campaign/``) opens a folder for the lines indented below
    it; a name is resolved in the innermost open folder that holds it (the map's tree shows dependencies, so
    ``backends/`` below ``phases/`` is still a top-level folder). A name found nowhere is kept as written in
    the innermost folder, so a stale entry shows."""
    names: set[str] = set()
    folders: list[tuple[int, str]] = []
    for line in block.splitlines():
        body = line.lstrip(" │├└─")
        if not body.strip():
            continue
        indent = len(line) - len(body)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        head = body.split("  ", 1)[0]
        for token in re.findall(r"[\w/]+\.py|\w+/(?!\S)", head):
            candidates = [folder + token for _, folder in reversed(folders)] + [token]
            found = next((name for name in candidates if (root / name.rstrip("/")).exists()), candidates[0])
            if token.endswith("/"):
                folders.append((indent, found))
            else:
                names.add(found)
    return names


def test_the_module_map_names_every_module_and_nothing_else() -> None:
    modules = {str(path.relative_to(SRC)) for path in sources()
               if path.name != "__init__.py" or len(path.read_text(encoding="utf-8").splitlines()) > 3}
    named = mapped_names(module_map())
    named = {name for name in named if not name.startswith(("bin/", "<"))} - {"entrypoint.py (root)"}
    assert sorted(modules - named) == [], "modules missing from docs/architecture.md's map"
    assert sorted(name for name in named if not (SRC / name).exists() and name != "entrypoint.py") == []


def test_the_module_map_reader_sees_folders() -> None:
    block = ("phases/   docs\n  select.py   x\n  ├─ campaign/   y\n  │    cells.py   z\n  │    gone.py   z\n"
             "runner.py  w\n")
    assert mapped_names(block) == {"phases/select.py", "campaign/cells.py", "campaign/gone.py", "runner.py"}


def imports_of(path: Path) -> set[str]:
    """Modules of the package a module imports, anywhere in it (at the top, in a function, for type checking)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_circles(root: Path = SRC) -> list[list[str]]:
    """Every import circle among the package's modules (strongly connected parts of more than one module)."""
    modules = {module_name(path, root): path for path in sources(root)}
    graph = {name: sorted(imports_of(path) & modules.keys() - {name}) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


def test_no_import_circle() -> None:
    assert import_circles() == []


def test_the_circle_finder_sees_a_lazy_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.c import g\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")
    assert import_circles(package) == [["pkg.a", "pkg.b", "pkg.c"]]



def test_no_phase_function_over_80_lines() -> None:
    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sources(SRC / "phases")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and (node.end_lineno or 0) - node.lineno + 1 > 80]
    assert long == []
