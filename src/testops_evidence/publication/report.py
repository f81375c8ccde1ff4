"""Allure Report 3 as the consumer of a publication: find it, build the HTML report (with the history of
earlier reports), and prove that its statistics equal the export receipt.

The report is a view of evidence that was already checked, never evidence itself: its counts must equal
the receipt's (``summary.json`` -> ``stats``), and a history file from an earlier run only adds trends to
it. History is Allure Report 3's ``historyPath`` (one JSON line per earlier report, ``historyLimit`` lines
kept); Allure appends this report's line, so the file written beside the report is what the next run
continues from.

Where Allure Report comes from, in order: ``TESTOPS_EVIDENCE_ALLURE`` (the path of an ``allure``
executable; the composite action sets it after installing the pinned version), ``.tools/allure`` of a
checkout (``scripts/setup.sh``), an ``allure`` on ``PATH``, or one that ``npx --no`` already has (it must
never download one here). Allure Report 2 is accepted for the report alone (its statistics are read from
``widgets/summary.json``); it has no history file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from testops_evidence.errors import Refusal, input_error
from testops_evidence.readers.integers import ascii_int
from testops_evidence.safeio import loads_json

ALLURE_TOOL = Path(".tools") / "allure" / "node_modules" / ".bin" / "allure"
ALLURE_VARIABLE = "TESTOPS_EVIDENCE_ALLURE"
# The pinned Allure Report and its whole dependency tree, each package with its integrity hash (npm's
# lock file): what `install` puts into the tool cache with `npm ci`, and what scripts/setup.sh installs.
LOCK_DIR = Path(__file__).resolve().parent.parent / "allure"
INSTALL_TIMEOUT = 600
# Allure Report 3 needs Node.js 20 or newer (its package.json "engines").
NODE_MAJOR = 20
# Allure 3 generates 10,000 results in about 20 s on a quiet machine (BENCHMARKS.md); a hung generator must
# not hold the job until its own timeout.
GENERATE_TIMEOUT = 900
PROBE_TIMEOUT = 60
HISTORY_LIMIT_DEFAULT = 20
# One history line holds every result's name, status and message: about 1 KiB per result. 64 MiB keeps
# 20 reports of a few thousand results, and bounds what a tampered file can make Allure read.
HISTORY_BYTES = 64 * 1024 * 1024
STATUSES = ("passed", "failed", "broken", "skipped", "unknown")
# Allure Report runs with only these variables: it reads ALLURE_* and CI variables itself (TestOps upload,
# Slack and Jira tokens, analytics), and a job's tokens must never reach a tool that could send them on.
_TOOL_ENV = ("PATH", "HOME", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL", "LC_CTYPE", "SYSTEMROOT", "NODE_PATH",
             "NODE_EXTRA_CA_CERTS", "npm_config_cache", "NPM_CONFIG_CACHE")


def tool_env(env: Mapping[str, str]) -> dict[str, str]:
    kept = {key: value for key, value in env.items() if key in _TOOL_ENV}
    kept.setdefault("PATH", os.environ.get("PATH", os.defpath))  # node scripts start with `#!/usr/bin/env node`
    kept["ALLURE_NO_ANALYTICS"] = "1"
    return kept


@dataclass(frozen=True)
class Tool:
    """A runnable Allure Report: the command prefix, its version and where it was found."""

    command: tuple[str, ...]
    version: str
    origin: str

    @property
    def major(self) -> int:
        head = self.version.split(".", 1)[0]
        return ascii_int(head, maximum=99_999) or 0


@dataclass(frozen=True)
class Missing:
    """Why no Allure Report can run here, and what makes one available."""

    reason: str
    remedy: str


@dataclass(frozen=True)
class Built:
    """A report that was built and checked."""

    directory: Path
    stats: dict[str, int]
    tool: Tool
    history: Path | None  # the history file after this report (Allure 3), for the next run
    history_entries: int  # earlier reports the trends show


def _probe(command: list[str], cwd: Path, env: Mapping[str, str]) -> str | None:
    try:
        done = subprocess.run([*command, "--version"], cwd=cwd, env=tool_env(env), capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    version = lines[-1].strip() if lines else ""
    return version if done.returncode == 0 and version[:1].isdigit() else None


def node_version(env: Mapping[str, str]) -> str | None:
    node = shutil.which("node", path=env.get("PATH"))
    if node is None:
        return None
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              check=False, env=tool_env(env))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().lstrip("v") if done.returncode == 0 else None


def find_allure(env: Mapping[str, str], cwd: Path, roots: tuple[Path, ...] = ()) -> Tool | Missing:
    """The first Allure Report that answers ``--version``, or why there is none."""
    candidates: list[tuple[list[str], str]] = []
    configured = env.get(ALLURE_VARIABLE, "").strip()
    if configured:
        candidates.append(([configured], ALLURE_VARIABLE))
    for root in roots:
        tool = root / ALLURE_TOOL
        if tool.is_file() and os.access(tool, os.X_OK):
            candidates.append(([str(tool)], str(ALLURE_TOOL)))
    on_path = shutil.which("allure", path=env.get("PATH"))
    if on_path:
        candidates.append(([on_path], "PATH"))
    npx = shutil.which("npx", path=env.get("PATH"))
    if npx:
        candidates.append(([npx, "--no", "--", "allure"], "npx"))
    for command, origin in candidates:
        version = _probe(command, cwd, env)
        if version is not None:
            return Tool(tuple(command), version, origin)
    node = node_version(env)
    if node is None:
        return Missing("Node.js is not installed on this runner, and Allure Report 3 needs it",
                       f"install Node.js {NODE_MAJOR} or newer (actions/setup-node) and Allure Report 3 "
                       "(`npm install --global allure`), or use the composite action, which installs the pinned "
                       "version itself")
    major = node.split(".", 1)[0]
    node_major = ascii_int(major, maximum=99_999)
    if node_major is not None and node_major < NODE_MAJOR:
        return Missing(f"Node.js {node} is older than Allure Report 3 needs ({NODE_MAJOR} or newer)",
                       f"install Node.js {NODE_MAJOR} or newer (actions/setup-node)")
    if configured:
        return Missing(f"{ALLURE_VARIABLE} names {configured}, which does not run", "fix or unset the variable")
    return Missing(f"Node.js {node} is installed, but Allure Report is not",
                   "install Allure Report 3 (`npm install --global allure`), or use the composite action, which "
                   "installs the pinned version itself")


REPORT_MODES = ("auto", "always", "never")


def report_mode(value: str | None) -> str:
    """The ``report`` input: auto (the default), always or never."""
    if value is None:
        return "auto"
    if value not in REPORT_MODES:
        raise input_error("report", "report must be auto, always or never", expected=" | ".join(REPORT_MODES),
                          actual=value)
    return value


def pinned_version() -> str:
    document = loads_json((LOCK_DIR / "package.json").read_text(encoding="utf-8"))
    return str(document["dependencies"]["allure"])


def cache_root(env: Mapping[str, str]) -> Path:
    """Where installed tools are kept: the runner's tool cache (kept between jobs on self-hosted runners), else
    the user's cache directory."""
    tool_cache = env.get("RUNNER_TOOL_CACHE", "").strip()
    if tool_cache:
        return Path(tool_cache) / "testops-evidence"
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path(env.get("HOME") or "~").expanduser() / ".cache") / "testops-evidence"


def install(env: Mapping[str, str], log: Path) -> Tool | Missing:
    """Install the pinned Allure Report with ``npm ci`` (every package checked against the lock's integrity
    hash, no install scripts) into the tool cache, once per lock; an installed copy is reused."""
    from testops_evidence.safeio import sha256_bytes

    npm = shutil.which("npm", path=env.get("PATH"))
    if npm is None:
        return Missing("npm is not installed, so the pinned Allure Report cannot be installed",
                       f"install Node.js {NODE_MAJOR} or newer with npm (actions/setup-node)")
    lock = (LOCK_DIR / "package-lock.json").read_bytes()
    target = cache_root(env) / f"allure-{pinned_version()}-{sha256_bytes(lock)[:16]}"
    binary = target / "node_modules" / ".bin" / "allure"
    if not binary.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.parent / f".{target.name}.install-{os.getpid()}-{os.urandom(4).hex()}"
        temp.mkdir()
        try:
            shutil.copyfile(LOCK_DIR / "package.json", temp / "package.json")
            (temp / "package-lock.json").write_bytes(lock)
            command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            try:
                done = subprocess.run(command, cwd=temp, env=tool_env(env), capture_output=True, text=True,
                                      timeout=INSTALL_TIMEOUT, check=False)
                output, returncode = done.stdout + done.stderr, done.returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                output, returncode = str(exc), -1
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(output, encoding="utf-8")
            if returncode != 0:
                return Missing(f"`npm ci` of Allure Report {pinned_version()} failed (exit {returncode}; its output is "
                               f"in {log})", "check that this runner reaches the npm registry (or set its mirror in "
                               "npm's configuration)")
            try:
                os.rename(temp, target)
            except OSError:
                if not binary.is_file():  # another job of this runner installed it at the same time
                    raise
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    version = _probe([str(binary)], target, env)
    if version is None:
        return Missing(f"the installed Allure Report in {target} does not run", f"delete {target} and run again")
    return Tool((str(binary),), version, "installed")


def in_docker_action(env: Mapping[str, str]) -> bool:
    """The Docker variant: the runner mounts the workspace at /github/workspace into the container."""
    return env.get("GITHUB_WORKSPACE") == "/github/workspace" and Path("/.dockerenv").exists()


def tool_roots(env: Mapping[str, str]) -> tuple[Path, ...]:
    """Checkouts whose ``.tools/allure`` may be used: this package's own checkout, and the working directory
    outside Actions (a rehearsal). Inside Actions the workspace is the repository under evaluation, whose files
    a publishing job must not execute."""
    own = Path(__file__).resolve().parents[3]
    return (own,) if env.get("GITHUB_ACTIONS") == "true" else (Path.cwd(), own)


def obtain(env: Mapping[str, str], logs: Path) -> Tool | Missing:
    """An Allure Report that runs here: one already installed (:func:`find_allure`), else the pinned version
    installed with npm (:func:`install`); or why there is none, and what makes one available."""
    logs.mkdir(parents=True, exist_ok=True)
    found = find_allure(env, logs, tool_roots(env))
    if isinstance(found, Tool):
        return found
    if in_docker_action(env):
        return Missing("the Docker action's image has no Node.js, which Allure Report 3 needs",
                       "use the composite action (testops-evidence/testops-evidence/composite), which sets up Node.js "
                       "and installs the pinned Allure Report, or build the report in a later step "
                       "(docs/reports.md)")
    node = node_version(env)
    major = ascii_int((node or "").split(".", 1)[0], maximum=99_999)
    if shutil.which("npm", path=env.get("PATH")) is None or major is None or major < NODE_MAJOR:
        return found
    return install(env, logs / "allure-install.log")


def read_history(path: Path, code: str = "upload.history") -> int:
    """Check a history file before Allure reads it: UTF-8 JSON lines, each an object, under the size cap.
    Returns the number of entries."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise Refusal(code, f"the report history {path} cannot be read ({exc.strerror})", field="report-history",
                      expected="a history.jsonl file", actual=str(path)) from None
    if size > HISTORY_BYTES:
        raise Refusal(code, f"the report history {path} is larger than {HISTORY_BYTES} bytes", field="report-history",
                      expected=f"<= {HISTORY_BYTES} bytes", actual=size)
    entries = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                document = loads_json(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise Refusal(code, f"line {number} of the report history {path} is not UTF-8 JSON "
                              f"({type(exc).__name__})", field="report-history", expected="one JSON object per line",
                              actual=f"line {number}") from None
            if not isinstance(document, dict) or not isinstance(document.get("testResults", {}), dict):
                raise Refusal(code, f"line {number} of the report history {path} is not an Allure history entry",
                              field="report-history", expected="a JSON object with testResults",
                              actual=f"line {number}: {type(document).__name__}")
            entries += 1
    return entries


def statistics(report: Path) -> dict[str, int] | None:
    """The report's counts: Allure 3 ``summary.json`` -> ``stats``; Allure 2 ``widgets/summary.json`` ->
    ``statistic``. Allure 3 leaves out zero counts."""
    for name, key in (("summary.json", "stats"), (os.path.join("widgets", "summary.json"), "statistic")):
        path = report / name
        if path.is_file():
            try:
                document = loads_json(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                return None
            stats = document.get(key) if isinstance(document, dict) else None
            if not isinstance(stats, dict):
                return None
            return {status: int(stats.get(status) or 0) for status in (*STATUSES, "total")}
    return None


def build(tool: Tool, results: Path, out: Path, *, name: str, counts: Mapping[str, int], work: Path, log: Path,
          env: Mapping[str, str], history: Path | None = None, history_limit: int = HISTORY_LIMIT_DEFAULT,
          code: str = "upload.report") -> Built:
    """Generate the report of ``results`` into ``out`` and check its statistics against ``counts`` (the
    receipt's). ``history`` (Allure 3) is continued in place: Allure appends this report to it."""
    work.mkdir(parents=True, exist_ok=True)
    command = [*tool.command, "generate", str(results.resolve()), "-o", str(out.resolve())]
    entries = 0
    if tool.major >= 3:
        # A config of our own in an empty working directory: no allurerc.* of the repository is picked up.
        # One self-contained index.html (the awesome plugin's single-file mode): a report in several files
        # fetches its data at load time, which a browser refuses for a page opened from disk (file://), so
        # a downloaded publication showed an empty spinner. The single file opens from a double-click.
        config: dict[str, object] = {"name": name, "plugins": {"awesome": {"options": {"singleFile": True}}}}
        if history is not None:
            entries = read_history(history) if history.exists() else 0
            config.update(historyPath=str(history.resolve()), historyLimit=history_limit)
        (work / "allurerc.json").write_text(json.dumps(config), encoding="utf-8")
        command += ["--config", str((work / "allurerc.json").resolve())]
    try:
        done = subprocess.run(command, cwd=work, env=tool_env(env), capture_output=True, text=True, timeout=GENERATE_TIMEOUT,
                              check=False)
        output, returncode = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        partial = b"".join(part if isinstance(part, bytes) else str(part).encode() for part in (exc.stdout, exc.stderr)
                           if part)
        output, returncode = partial.decode("utf-8", "replace") + f"\n(timed out after {GENERATE_TIMEOUT} s)", -1
    except OSError as exc:
        output, returncode = f"{tool.command[0]}: {exc}", -1
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(output, encoding="utf-8")
    stats = statistics(out) if returncode == 0 else None
    if stats is None:
        raise Refusal(code, f"Allure Report {tool.version} failed (exit {returncode}); its output is in {log}",
                      field="allure", expected="exit 0 and summary.json", actual=returncode)
    shown = {status: stats.get(status, 0) for status in counts}
    if shown != dict(counts):
        raise Refusal(code, f"the Allure Report's statistics differ from the receipt's counts ({out})",
                      field="Allure Report statistics", expected=dict(counts), actual=shown)
    return Built(out, stats, tool, history if tool.major >= 3 and history is not None else None, entries)
