#!/usr/bin/env python3
"""Writes the generated tables of ``docs/security.md`` from the data the tests run, so the page cannot
claim what the tests do not check:

* ``fault kinds`` and ``fault matrix`` from ``tests/reliability/fault_cases.py`` (the cases
  ``tests/reliability/test_fault_matrix.py`` runs);
* ``round two attacks`` from ``tests/reliability/attacks.py`` (each names the tests that reproduce it);
* ``fuzz targets`` from ``tests/reliability/fuzz_targets.py`` and the figures of the last long fuzz run,
  ``tests/reliability/fuzz-long-run.json`` (written by ``scripts/fuzz_long.sh`` through ``--record``).

    python scripts/gen_security_tables.py                     # rewrite the sections
    python scripts/gen_security_tables.py --check             # exit 1 when docs/security.md is stale
    python scripts/gen_security_tables.py --record R.jsonl --seconds 1234 --workers 2
                                                               # store a long run's figures, then rewrite

Only the text between the ``BEGIN GENERATED`` / ``END GENERATED`` markers is replaced.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reliability.attacks import ATTACKS  # noqa: E402
from reliability.fault_cases import CASES, FAULTS, NOT_APPLICABLE, PHASES, SERVERS  # noqa: E402
from reliability.fuzz_targets import FUZZ_TARGETS  # noqa: E402

DOC = ROOT / "docs" / "security.md"
LONG_RUN = ROOT / "tests" / "reliability" / "fuzz-long-run.json"
TESTS = "../tests/reliability/"
BEGIN = "<!-- BEGIN GENERATED: {name} (scripts/gen_security_tables.py; edits between these markers are overwritten) -->"
END = "<!-- END GENERATED: {name} -->"


def cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def code(text: str) -> str:
    return f"`{text}`"


# --- sections ------------------------------------------------------------------------------------------


def render_fault_kinds() -> str:
    rows = [(f.title, f.meaning) for f in FAULTS.values()]
    return table(("fault kind", "what the test server does"), rows)


def _short(case: Any) -> str:
    return f"{code(case.error_code)} ({case.exit_code})" if case.error_code else f"passes ({case.exit_code})"


def render_fault_matrix() -> str:
    by_cell = {(c.phase, c.fault): c for c in CASES}
    grid = []
    for phase in PHASES:
        row = [f"{phase} ({SERVERS[phase]})"]
        for key in FAULTS:
            if (phase, key) in by_cell:
                row.append(_short(by_cell[(phase, key)]))
            else:
                row.append("n/a")
        grid.append(row)
    overview = table(("phase", *(f.title for f in FAULTS.values())), grid)
    details = table(
        ("phase", "fault", "request faulted", "exit", "error code", "mutations sent", "left pending", "outcome"),
        [(c.phase, FAULTS[c.fault].title, code(c.target.replace("\\d+", "{id}")), c.exit_code,
          code(c.error_code) if c.error_code else "—", c.mutations,
          ", ".join(code(p) for p in c.pending) or "—", c.outcome) for c in CASES])
    not_applicable = "\n".join(f"* **{n.phase} × {FAULTS[n.fault].title}** is not applicable: {n.reason}."
                               for n in NOT_APPLICABLE)
    return (f"{len(CASES)} cases over {len(PHASES)} phases × {len(FAULTS)} fault kinds "
            f"({len(NOT_APPLICABLE)} not applicable), run by [`test_fault_matrix.py`]({TESTS}test_fault_matrix.py).\n\n"
            f"{overview}\n\n{details}\n\n{not_applicable}")


def render_fuzz_targets(record: dict[str, Any] | None) -> str:
    figures = {t["target"]: t for t in record["targets"]} if record else {}
    runs = {run["id"]: run for run in record["runs"]} if record else {}
    rows = []
    for target in FUZZ_TARGETS.values():
        fig = figures.get(target.name)
        numbers = ((f"{fig['examples']:,}", f"{fig['refused']:,} / {fig['accepted']:,}", f"{fig['seconds']:.0f}",
                    runs[fig["run"]]["date"]) if fig else ("not yet run", "—", "—", "—"))
        rows.append((code(target.name), target.source, target.chain, *numbers,
                     f"[{target.test}]({TESTS}{target.test})"))
    text = table(("target", "untrusted input", "what it goes through", "examples (long run)",
                  "refused / accepted", "seconds", "run on", "test"), rows)
    if not figures:
        return text + "\n\nNo long run is recorded yet: run `scripts/fuzz_long.sh`."
    total = sum(t["examples"] for t in figures.values())
    missing = [name for name in FUZZ_TARGETS if name not in figures]
    lines = [f"Long runs recorded: {total:,} examples over {len(figures)} of {len(FUZZ_TARGETS)} targets "
             f"(at least {min(t['examples'] for t in figures.values()):,} each)"
             + (f"; not yet run long: {', '.join(code(m) for m in missing)}." if missing else ".")]
    for run in sorted(runs.values(), key=lambda r: r["id"]):
        names = [t["target"] for t in figures.values() if t["run"] == run["id"]]
        if not names:
            continue
        lines.append(f"- {run['date']}, commit `{run['commit']}`, `{run['command']}`: {len(names)} target(s), "
                     f"{sum(figures[n]['examples'] for n in names):,} examples, {run['wall_seconds']:,} s wall time "
                     f"on {run['workers']} worker(s) ({run['machine']}); hypothesis {run['hypothesis']}, "
                     f"Python {run['python']}.")
    lines.append("No example of these runs raised anything but a reportable refusal.")
    return text + "\n\n" + "\n".join(lines)


def render_attacks() -> str:
    rows = []
    for attack in ATTACKS:
        links = []
        for name in attack.tests:
            module, _, function = name.rpartition("::")
            module = module or "test_hostile_round_two.py"
            where = TESTS + module if (ROOT / "tests" / "reliability" / module).exists() else f"../tests/{module}"
            links.append(f"[`{function}`]({where})")
        rows.append((attack.item, attack.attack, attack.where, attack.before, attack.now, ", ".join(links)))
    return table(("#", "attack", "where", "before", "now", "reproduced by"), rows)


SECTIONS = {
    "round two attacks": lambda _record: render_attacks(),
    "fault kinds": lambda _record: render_fault_kinds(),
    "fault matrix": lambda _record: render_fault_matrix(),
    "fuzz targets": render_fuzz_targets,
}


def load_record() -> dict[str, Any] | None:
    if not LONG_RUN.exists():
        return None
    record: dict[str, Any] = json.loads(LONG_RUN.read_text(encoding="utf-8"))
    return record


def update(text: str, record: dict[str, Any] | None = None) -> str:
    """``text`` (docs/security.md) with every generated section replaced."""
    record = record if record is not None else load_record()
    for name, render in SECTIONS.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"docs/security.md has no section markers for {name!r}")
        block = f"{begin}\n\n{render(record)}\n\n{end}"
        text = pattern.sub(lambda _match, block=block: block, text)
    return text


def _commit() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out or "unknown"


def record_run(report: Path, seconds: int, workers: int, command: str) -> dict[str, Any]:
    """Stores a long run's figures. A run of some targets replaces only those targets' figures; every
    target keeps the run it was last measured in (its date and commit are shown beside it)."""
    import hypothesis

    fresh: dict[str, dict[str, Any]] = {}
    for line in report.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        fresh[entry["target"]] = entry
    unknown = sorted(set(fresh) - set(FUZZ_TARGETS))
    if unknown:
        raise SystemExit(f"the long run reports unknown targets: {', '.join(unknown)}")
    if not fresh:
        raise SystemExit("the long run reported no target")
    record = load_record() or {"runs": [], "targets": []}
    run_id = max((run["id"] for run in record["runs"]), default=0) + 1
    record["runs"].append({
        "id": run_id,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": _commit(),
        "command": command,
        "wall_seconds": seconds,
        "workers": workers,
        "machine": f"{platform.machine()}, {platform.system()}",
        "hypothesis": hypothesis.__version__,
        "python": platform.python_version(),
    })
    kept = {t["target"]: t for t in record["targets"] if t["target"] not in fresh}
    kept.update({name: {**entry, "run": run_id} for name, entry in fresh.items()})
    record["targets"] = [kept[name] for name in FUZZ_TARGETS if name in kept]
    used = {t["run"] for t in record["targets"]}
    record["runs"] = [run for run in record["runs"] if run["id"] in used]
    LONG_RUN.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/security.md is stale")
    parser.add_argument("--record", type=Path, help="the JSON-lines report of a long fuzz run to store")
    parser.add_argument("--seconds", type=int, default=0, help="the long run's wall time")
    parser.add_argument("--workers", type=int, default=1, help="the long run's pytest workers")
    parser.add_argument("--command", default="scripts/fuzz_long.sh", help="how the long run was started")
    args = parser.parse_args(argv)
    record = record_run(args.record, args.seconds, args.workers, args.command) if args.record else None
    current = DOC.read_text(encoding="utf-8")
    fresh = update(current, record)
    if args.check:
        if fresh != current:
            print("docs/security.md is stale: run scripts/gen_security_tables.py", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        DOC.write_text(fresh, encoding="utf-8")
        print("rewrote docs/security.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
