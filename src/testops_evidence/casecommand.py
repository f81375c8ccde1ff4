"""Run a user's case command for each (case, trial) of a selection, as the campaign template's worker jobs do.

``testops-evidence rehearse --case-command CMD`` uses it: every worker job of the plan select wrote (its
``<lane>-matrix`` outputs), in plan order, runs ``bash -c CMD`` once per (case, trial) it owns, with the
environment the template gives (docs/workflows.md, "How one case runs"): ``TESTOPS_EVIDENCE_CASE``,
``_CASE_JSON``, ``_TRIAL``, ``_TRIALS``, ``_BUDGET``, ``_CELL_RESULT``, ``_SOURCE_SHA``, ``_PROFILE``,
``_ATTEMPT_ID``, ``_SELECTION`` and ``_SELECTION_SHA256``, plus the case's credentials, which locally come
from the environment the rehearsal was started with. A command that exits non-zero is not a crash: what it
wrote is the evidence, and a case that wrote no cell is reported (``case.no_cell_result``) and exported as
broken, as on GitHub. Jobs run one after another: a local rehearsal measures, it does not race.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.campaign.cells import CELL_LIMIT
from testops_evidence.campaign.matrix import LANES, units_of
from testops_evidence.errors import Refusal
from testops_evidence.safeio import read_safe, write_once

__all__ = ["LANES", "CaseRun", "cli_shim", "environment_for_cases", "run_cases", "units_of"]

# What bash answers for a command it cannot run: the case command names a program that is not installed.
_NOT_FOUND, _NOT_EXECUTABLE = 127, 126


@dataclass(frozen=True)
class CaseRun:
    """One (case, trial) the case command was asked to measure, and what came of it."""

    label: str
    key: str
    trial: int
    exit_code: int | None  # None: not run (credentials missing, budget spent) or stopped at its timeout
    wrote: bool
    log: Path | None
    code: str = ""  # the refusal this unit reports: case.no_cell_result, case.credentials, budget.exhausted
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.code in ("case.no_cell_result", "case.credentials")


def cli_shim(directory: Path) -> Path:
    """A ``testops-evidence`` command for the case command's ``PATH``: this very installation (the composite action
    puts its own CLI on the worker's ``PATH`` the same way), whatever the user's ``PATH`` holds."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "testops-evidence"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m testops_evidence \"$@\"\n", encoding="utf-8")
    shim.chmod(0o755)
    return directory


def _figure(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        inner = value.get("value")
        return inner if isinstance(inner, int) and not isinstance(inner, bool) else 0
    return 0


def _spent_by(cell: bytes, names: Sequence[str]) -> dict[str, int]:
    """The usage a cell reports for the budget's counters; export judges the cell, an unreadable one spends 0."""
    try:
        usage = json.loads(cell.decode("utf-8")).get("usage") or {}
    except (ValueError, AttributeError):
        return dict.fromkeys(names, 0)
    return {name: _figure(usage.get(name)) if isinstance(usage, dict) else 0 for name in names}


def _why_no_cell(exit_code: int | None, command: str) -> str:
    if exit_code is None:
        return "stopped at the case's timeout-minutes before it wrote a cell result"
    first = (shlex.split(command, posix=True) or [""])[0] if command.strip() else ""
    if exit_code == _NOT_FOUND:
        return f"bash found no command `{first}` (exit 127): install it, or fix --case-command"
    if exit_code == _NOT_EXECUTABLE:
        return f"`{first}` is not executable (exit 126): `chmod +x` it, or run it with its interpreter"
    return f"the case command (exit {exit_code}) wrote no cell result"


def run_cases(command: str, *, outputs: Mapping[str, Any], selection_path: Path, selection_sha256: str,
              cells: Path, logs: Path, cwd: Path, env: Mapping[str, str], attempt_prefix: str,
              log: Callable[[str], None], withheld: Collection[str] = ()) -> list[CaseRun]:
    """Run ``command`` for every (case, trial) of the plan select wrote, job by job; returns what each did.

    ``withheld``: every credential the contract lists for any case, selected or not; a case gets only its own."""
    selection = json.loads(selection_path.read_text(encoding="utf-8"))
    rows = {row["key"]: row for row in selection["cases"]}
    bash = shutil.which("bash", path=env.get("PATH")) or "bash"
    logs.mkdir(parents=True, exist_ok=True)
    cells.mkdir(parents=True, exist_ok=True)
    done: list[CaseRun] = []
    taken: dict[str, bytes] = {}
    for lane in LANES:
        for job in (outputs.get(f"{lane}-matrix") or {}).get("include", []):
            done.extend(_run_job(command, job, rows, selection, selection_path, selection_sha256, cells, logs, cwd,
                                 env, attempt_prefix, bash, log, taken, frozenset(withheld)))
    _rebuild(cells, taken)
    return done


def _rebuild(cells: Path, taken: Mapping[str, bytes]) -> None:
    """The cell-results directory as the units left it, and nothing else. Every case command runs as the user and
    can write anywhere ``cells`` is: a command that wrote another case's cell there (one that was not run, or ran
    before it) would otherwise have that cell exported as the other case's evidence. Each unit's cell was read
    (no link followed) the moment its own command ended; the directory is made again from those bytes alone."""
    shutil.rmtree(cells)  # links inside are removed, never followed
    cells.mkdir(mode=0o700)
    for relpath, data in sorted(taken.items()):
        target = cells / relpath
        target.parent.mkdir(exist_ok=True, mode=0o700)
        write_once(target, data)


def _fresh_target(cells: Path, cell: Path) -> None:
    """Nothing at ``cell`` before its unit runs (a file another unit planted there is not this unit's cell), and
    its trial directory a real directory of ``cells``, not a link another unit left in its place."""
    if cell.parent != cells and (cell.parent.is_symlink() or (cell.parent.exists() and not cell.parent.is_dir())):
        cell.parent.unlink()
    cell.parent.mkdir(parents=True, exist_ok=True)
    if cell.is_dir() and not cell.is_symlink():
        shutil.rmtree(cell)
    elif cell.is_symlink() or cell.exists():
        cell.unlink()


def _take(cells: Path, cell: Path) -> bytes | None:
    """The bytes of the cell the unit wrote, read below ``cells`` without following a link; None when it wrote
    none, or put a link, a special file or an oversized file in its place (export would refuse those too)."""
    try:
        return read_safe(cells, cell.relative_to(cells).as_posix(), limit=CELL_LIMIT)
    except Refusal:
        return None


def _run_job(command: str, job: Mapping[str, Any], rows: Mapping[str, Any], selection: Mapping[str, Any],
             selection_path: Path, selection_sha256: str, cells: Path, logs: Path, cwd: Path,
             env: Mapping[str, str], attempt_prefix: str, bash: str, log: Callable[[str], None],
             taken: dict[str, bytes], withheld: frozenset[str]) -> list[CaseRun]:
    """One worker job of the plan: its units in turn, with the template's running budget (campaign/budget.py)."""
    budget = job.get("budget") or {}
    share, per_trial = budget.get("job") or {}, budget.get("trial") or {}
    spent = dict.fromkeys(share, 0)
    # Those of every case of the contract: a case left out of this selection keeps its credentials to itself too.
    others = withheld | {name for other in rows.values() for name in other.get("credentials", [])}
    done: list[CaseRun] = []
    for key, trial in units_of(job):
        row = rows[key]
        count = int((row.get("trials") or {}).get("count", 1))
        label = key if count == 1 else f"{key} trial {trial} of {count}"
        missing = [name for name in row.get("credentials", []) if not env.get(name)]
        if missing:
            note = f"its credentials are not in this shell's environment: {', '.join(missing)}"
            log(f"   case {label}: not run — {note} (case.credentials)")
            done.append(CaseRun(label, key, trial, None, False, None, "case.credentials", note))
            continue
        exhausted = [name for name, cap in share.items() if spent[name] >= cap]
        if exhausted:
            note = ("this job spent its share of the campaign budget ("
                    + ", ".join(f"{name} {spent[name]} of {share[name]}" for name in exhausted) + ")")
            log(f"   case {label}: not run — {note} (budget.exhausted)")
            done.append(CaseRun(label, key, trial, None, False, None, "budget.exhausted", note))
            continue
        allowed = {name: min([cap - spent[name]] + ([per_trial[name]] if name in per_trial else []))
                   for name, cap in share.items()}
        allowed.update({name: cap for name, cap in per_trial.items() if name not in allowed})
        cell = cells / f"{key}.json" if count == 1 else cells / key / f"trial-{trial}.json"
        _fresh_target(cells, cell)
        suffix = "" if count == 1 else f"-t{trial}"
        # As case-secrets on GitHub: a case gets its own credentials, not those other cases of the contract list.
        own = set(row.get("credentials", []))
        case_env = {name: value for name, value in env.items() if name not in others or name in own}
        case_env.update(
            TESTOPS_EVIDENCE_CASE=key,
            TESTOPS_EVIDENCE_CASE_JSON=json.dumps(row, sort_keys=True),
            TESTOPS_EVIDENCE_TRIAL=str(trial),
            TESTOPS_EVIDENCE_TRIALS=str(count),
            TESTOPS_EVIDENCE_BUDGET=json.dumps(allowed, sort_keys=True),
            TESTOPS_EVIDENCE_CELL_RESULT=str(cell),
            TESTOPS_EVIDENCE_SOURCE_SHA=str(selection["context"]["head-sha"]),
            TESTOPS_EVIDENCE_PROFILE=json.dumps(selection["profile"], sort_keys=True),
            TESTOPS_EVIDENCE_ATTEMPT_ID=f"{attempt_prefix}-{key}{suffix}",
            TESTOPS_EVIDENCE_SELECTION=str(selection_path),
            TESTOPS_EVIDENCE_SELECTION_SHA256=selection_sha256,
        )
        case_log = logs / f"{key}{suffix}.log"
        exit_code: int | None
        with case_log.open("wb") as output:
            try:
                exit_code = subprocess.run([bash, "-c", command], cwd=cwd, env=case_env, stdin=subprocess.DEVNULL,
                                           stdout=output, stderr=subprocess.STDOUT, check=False,
                                           timeout=int(row["timeout-minutes"]) * 60).returncode
            except subprocess.TimeoutExpired:
                exit_code = None
        data = _take(cells, cell)
        wrote = data is not None
        if data is not None:
            taken[cell.relative_to(cells).as_posix()] = data
        if data is not None and share:
            for name, value in _spent_by(data, list(share)).items():
                spent[name] += value
        shown = "timed out" if exit_code is None else f"exit {exit_code}"
        if wrote:
            log(f"   case {label}: {shown}, cell result written — {case_log}")
            done.append(CaseRun(label, key, trial, exit_code, True, case_log))
        else:
            note = _why_no_cell(exit_code, command)
            log(f"   case {label}: {shown}, cell result MISSING: {note} (case.no_cell_result) — {case_log}")
            done.append(CaseRun(label, key, trial, exit_code, False, case_log, "case.no_cell_result", note))
    return done


def environment_for_cases(env: Mapping[str, str], shim_dir: Path) -> dict[str, str]:
    """The rehearsal's environment with this installation's CLI first on ``PATH``."""
    out = dict(env)
    out["PATH"] = os.pathsep.join(filter(None, (str(shim_dir), env.get("PATH", ""))))
    return out
