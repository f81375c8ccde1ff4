#!/usr/bin/env python3
"""The YAML contract: read fast when honest, refused within budget when hostile (issues #14 and #17).

    .venv/bin/python benchmarks/yaml_load.py [--quick] [--smoke]

Also run by ``benchmarks/run.py --only yaml``. Figures, each whole processes except the one marked:

* ``select`` on a 10,000-case YAML contract (files backend, against the GitHub REST test server), the
  installed command from interpreter start to exit — target ≤ 3 s — beside the same contract as JSON;
* the contract reader (``yamlread.load``) against ``json.loads`` of the same 10,000-case document,
  in-process (the cost of YAML itself, with nothing else around it);
* a later phase's contract load (``PhaseContext.contract()`` of export, upload, verify): the compiled form
  select wrote, checked by digests, against parsing the YAML again, whole processes (medians of pairwise
  ratios), with a JSON contract of the same document beside them (the floor of a validated contract);
* ``check`` refusing hostile contracts under the 4 MiB cap: a flow list of 2 million items (4 MB) and a
  block list of 900,000 items (3.6 MB) — the issue's two reproductions — each target < 2 s and
  < 200 MB peak memory (the child's ``ru_maxrss``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "benchmarks", ROOT / "tests", ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from _common import Figure, interleaved, interleaved_runs, median_ratio, print_figures  # noqa: E402

COMMAND = [sys.executable, "-I", str(ROOT / "bin" / "testops-evidence")]


def yaml_text(document: Any) -> str:
    """The document as YAML the way people write contracts (block style, two-space indents)."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    return buffer.getvalue()


# Runs the measured command as its own child and reports its wall time, exit code and peak memory. A
# small interpreter forks it: a child forked (or vforked) from this large benchmark process would count
# this process's pages in its peak until exec (Linux carries the pre-exec high-water mark over).
_MEASURE = """
import os, sys, time
devnull = os.open(os.devnull, os.O_WRONLY)
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.execve(sys.argv[1], sys.argv[1:], os.environ)
_pid, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - started, os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """Wall seconds, exit code and peak resident memory (bytes) of one whole process."""
    import subprocess

    done = subprocess.run([sys.executable, "-I", "-c", _MEASURE, *argv], env=env, capture_output=True, text=True,
                          check=True)
    seconds, code, peak = done.stdout.split()
    return float(seconds), int(code), int(peak)


def bench_yaml(cfg: Any) -> list[Figure]:
    from test_selection_support import big_document, github_with_run, select_job_env
    from testops_evidence.readers import yamlread

    smoke = getattr(cfg, "smoke", False)
    repeat = 1 if smoke else (3 if getattr(cfg, "quick", False) else 5)
    cases = 100 if smoke else 10_000
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"testops-evidence-bench-yaml-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    figures: list[Figure] = []
    document = big_document(cases, testops=False)
    text = yaml_text(document)
    as_json = json.dumps(document, indent=2)
    (work / "contract.yml").write_text(text, encoding="utf-8")
    (work / "contract.json").write_text(as_json, encoding="utf-8")

    # 1. select, whole process, YAML versus JSON.
    with github_with_run() as github:
        env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")},
               **select_job_env(github, work)}
        counter = iter(range(1_000_000))

        def select(name: str) -> Any:
            def call() -> None:
                run = work / f"run-{next(counter)}"
                run.mkdir()
                _seconds, code, _rss = run_child([*COMMAND, "select", "--contract", str(work / name),
                                                 "--selection-path", str(run / "selection.json"),
                                                 "--state-dir", str(run / "state")],
                                                {**env, "GITHUB_OUTPUT": str(run / "out"),
                                                 "GITHUB_STEP_SUMMARY": str(run / "summary.md")})
                if code != 0:
                    raise SystemExit(f"select on {name} failed with exit {code}: {(run / 'summary.md').read_text()}")
            return call

        t_yaml, t_json = interleaved(select("contract.yml"), select("contract.json"), repeat=repeat)
        # As the campaign template runs it: guard parsed the YAML earlier in the job, and select is given its
        # guard-sha256. Each timed select starts from a copy of guard's state directory (select writes its
        # own receipt there once); the copy (two small files) is inside the timing.
        guarded = work / "guarded"
        _seconds, code, _rss = run_child([*COMMAND, "guard", "--contract", str(work / "contract.yml"),
                                          "--state-dir", str(guarded)],
                                         {**env, "GITHUB_OUTPUT": str(work / "guard-out"),
                                          "GITHUB_STEP_SUMMARY": str(work / "guard-summary.md")})
        if code != 0:
            raise SystemExit(f"guard failed with exit {code}: {(work / 'guard-summary.md').read_text()}")
        guard_sha256 = step_output(work / "guard-out", "guard-sha256")

        def select_after_guard() -> None:
            run = work / f"run-{next(counter)}"
            shutil.copytree(guarded, run / "state")
            _seconds, code, _rss = run_child([*COMMAND, "select", "--contract", str(work / "contract.yml"),
                                             "--guard-sha256", guard_sha256,
                                             "--selection-path", str(run / "selection.json"),
                                             "--state-dir", str(run / "state")],
                                            {**env, "GITHUB_OUTPUT": str(run / "out"),
                                             "GITHUB_STEP_SUMMARY": str(run / "summary.md")})
            summary = (run / "summary.md").read_text()
            if code != 0 or "compiled by guard" not in summary:
                raise SystemExit(f"select after guard failed (exit {code}) or parsed the contract: {summary}")

        t_guarded, t_json_again = interleaved(select_after_guard, select("contract.json"), repeat=repeat)
    figures.append(Figure(f"select on a {cases:,}-case YAML contract, whole process (s)", t_yaml, "<= 3",
                          smoke or t_yaml <= 3.0, f"YAML {t_yaml:.2f} s / JSON {t_json:.2f} s "
                          f"({len(text):,} / {len(as_json):,} bytes)"))
    figures.append(Figure("select after guard in its job on that YAML contract / select on it as JSON, whole "
                          "processes", t_guarded / t_json_again, "report", True,
                          f"{t_guarded:.2f} s / {t_json_again:.2f} s: the campaign's one YAML parse is guard's"))

    # 2. the reader against json.loads, in-process.
    t_read, t_loads = interleaved(lambda: yamlread.load(text), lambda: json.loads(as_json), repeat=repeat)
    assert yamlread.load(text) == json.loads(as_json)
    figures.append(Figure(f"yamlread.load / json.loads, same {cases:,}-case document (in-process)",
                          t_read / t_loads, "report", True,
                          f"{t_read * 1000:.0f} ms / {t_loads * 1000:.1f} ms; "
                          f"{len(text) / t_read / 1e6:.1f} MB/s"))

    # 3. a later phase's contract: select's compiled form checked by digests, against parsing the YAML again.
    figures.append(later_phase_contract(work, document, text, repeat))

    # 4. hostile contracts under the cap, refused by the budget.
    hostile = {
        "flow list, 2 million items": "x: [" + "a," * (2_000_000 if not smoke else 2_000) + "a]\n",
        "block list, 900,000 items": "x:\n" + "- a\n" * (900_000 if not smoke else 900),
        # 4,000 aliases of a 64 KiB value: 260 KB that expand to 256 MiB (2.9 s and 521 MB before the budget
        # counted the characters aliases repeat).
        "4,000 aliases of a 64 KiB value": f"a: &a {'a' * 65_000}\n" + "".join(
            f"k{i}: *a\n" for i in range(4_000 if not smoke else 100)),
    }
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    for label, body in hostile.items():
        path = work / f"hostile-{len(body)}.yml"
        path.write_text(body, encoding="utf-8")
        runs = [run_child([*COMMAND, "check", "--contract", str(path), "--state-dir", str(work / f"s-{n}-{label[:4]}"),
                           "--summary-file", str(work / "summary.md")], base) for n in range(repeat)]
        seconds = min(r[0] for r in runs)
        peak = max(r[2] for r in runs)
        codes = {r[1] for r in runs}
        ok = codes == {2} and seconds < 2.0 and peak < 200 * 1024 * 1024
        figures.append(Figure(f"check refuses a {len(body) / 1e6:.1f} MB YAML contract ({label}), whole process (s)",
                              seconds, "< 2 s, < 200 MB", smoke or ok,
                              f"peak {peak / 1024 / 1024:.0f} MiB, exit {sorted(codes)}"))
    shutil.rmtree(work, ignore_errors=True)
    return figures


# A later phase's contract, whole process: the interpreter, the imports and the load, nothing else.
_LATER_PHASE = """
import sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "compiled":
    from testops_evidence.campaign.compiled import load_compiled
    contract, why = load_compiled(sys.argv[3], sys.argv[4], sys.argv[5])
    if contract is None:
        raise SystemExit(why)
else:
    from testops_evidence.contract import load_contract
    load_contract(sys.argv[3])
"""


def later_phase_contract(work: Path, document: Any, text: str, repeat: int) -> Figure:
    """``PhaseContext.contract()`` of export, upload or verify on a YAML contract: the compiled form select
    wrote (selection, contract file and compiled file hashed, strict JSON, schema and rules) against the
    YAML parse it replaces (the schema and rules too), as whole processes, medians of pairwise ratios."""
    from evidence_support import actions_env
    from testops_evidence.campaign.compiled import compiled_bytes, compiled_path, load_compiled
    from testops_evidence.campaign.selection import build_selection, selection_bytes
    from testops_evidence.context import env_context
    from testops_evidence.contract import load_contract

    contract_path, json_path = work / "later-contract.yml", work / "later-contract.json"
    contract_path.write_text(text, encoding="utf-8")
    contract = load_contract(contract_path)
    data = selection_bytes(build_selection(contract, env_context(actions_env()), list(contract.cases),
                                           backend="files", source="contract"))
    selection = work / "later-selection.json"
    selection.write_bytes(data)
    compiled = compiled_bytes(contract)
    assert compiled is not None
    compiled_path(selection).write_bytes(compiled)
    digest = __import__("hashlib").sha256(data).hexdigest()
    assert load_compiled(contract_path, selection, digest)[0] == contract
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}

    def child(how: str) -> Any:
        def call() -> None:
            _seconds, code, _rss = run_child([sys.executable, "-I", "-c", _LATER_PHASE, str(ROOT / "src"), how,
                                              str(json_path if how == "json" else contract_path),
                                              str(selection), digest], base)
            if code != 0:
                raise SystemExit(f"the {how} contract load failed with exit {code}")
        return call

    t_compiled, t_yaml = interleaved_runs(child("compiled"), child("yaml"), repeat=repeat)
    # The floor for a validated contract: the same document as a JSON contract (C scanner, schema, rules).
    json_path.write_text(json.dumps(document), encoding="utf-8")
    t_json, t_again = interleaved_runs(child("json"), child("compiled"), repeat=repeat)
    ratio = median_ratio(t_compiled, t_yaml)
    return Figure(f"contract load for a later phase, {len(document['cases']):,} cases: compiled form / YAML parse "
                  "(whole process)", ratio, "report", True,
                  f"{min(t_compiled) * 1000:.0f} ms / {min(t_yaml) * 1000:.0f} ms; a JSON contract "
                  f"{min(t_json) * 1000:.0f} ms (compiled / JSON {median_ratio(t_again, t_json):.2f}); compiled "
                  f"form {len(compiled):,} bytes, YAML {len(text):,} bytes")


def step_output(path: Path, name: str) -> str:
    """One output of a step, from the file GITHUB_OUTPUT named (``name=value`` or ``name<<delimiter`` records)."""
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1]
        if line.startswith(f"{name}<<"):
            return lines[index + 1]
    raise SystemExit(f"no output {name} in {path}")


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]

    class Cfg:
        smoke = "--smoke" in args
        quick = "--quick" in args

    figures = bench_yaml(Cfg())
    print_figures(figures)
    return 1 if any(not f.ok for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
