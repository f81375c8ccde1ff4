#!/usr/bin/env python3
"""The hand-made parsers of untrusted input against the well-kept libraries that could replace them
(issue 26): the figures behind "keep" in BENCHMARKS.md, "The parsers we keep".

    .venv/bin/python benchmarks/parsers.py [--quick] [--smoke] [--candidates DIR]

Also run by ``benchmarks/run.py --only parsers``. Each comparison runs in this one process, the two sides
alternating round by round (a burst of load hits both alike); the figure is the median of the per-round
ratios ours / library, with their range, the best time of each side and the load average at the start:

* ``schemacheck`` (the contract's compiled schema check) against ``jsonschema``'s Draft 2020-12 validator,
  on a 10,000-case contract, both asked only "valid?";
* ``yamlread`` against PyYAML's and ruamel.yaml's C loaders (libyaml), on the same contract written as
  YAML the way people write contracts; then, each in a child process, ``examples/contract.yml`` (read, and
  equal to yamlread's reading?) and 200,000 nested ``[`` (ours: a coded refusal);
* ``strictjson.loads`` against ``json.loads`` with an ``object_pairs_hook`` refusing duplicate keys (the
  nearest the standard library comes), on the same contract as JSON;
* the JUnit reader (``adapters.junit.parse_junit``: hardened parse and every outcome) against
  ``defusedxml.ElementTree.fromstring`` (the hardened parse alone) and ``junitparser`` (parse and every
  case's result), on a 5,000-case report.

The libraries that are in no lock of the project's runtime (PyYAML, ruamel.yaml.clib, defusedxml,
junitparser) come from ``requirements/bench.txt``, installed with ``--require-hashes`` into a virtualenv
of their own (``.tools/bench-candidates``, or ``--candidates DIR``) whose site-packages is put at the end of
this process's path: a benchmark never makes them a dependency. ``--smoke`` uses that virtualenv only if
it is already there.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "benchmarks", ROOT / "tests", ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from _common import Figure, interleaved_runs, median_ratio, min_max_ratio, print_figures  # noqa: E402

LOCK = ROOT / "requirements" / "bench.txt"


def candidates_site(where: Path | None, *, install: bool) -> Path | None:
    """The candidates' site-packages, installed from requirements/bench.txt when missing (and allowed)."""
    key = hashlib.sha256(LOCK.read_bytes() + sys.version.encode()).hexdigest()[:16]
    venv = where or ROOT / ".tools" / "bench-candidates" / key
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    stamp = venv / ".installed"
    if not stamp.exists():
        if not install:
            return None
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--require-hashes", "--only-binary=:all:", "--no-deps", "-r", str(LOCK)], check=True)
        stamp.touch()
    return site


def compare(name: str, ours: Callable[[], object], theirs: Callable[[], object], rounds: int, library: str,
            load: float) -> Figure:
    ours()  # warm-up, untimed: imports, compiled patterns, first allocations
    theirs()
    mine, other = interleaved_runs(ours, theirs, rounds)
    return Figure(f"{name}: ours / {library}, in process, {rounds} interleaved rounds", median_ratio(mine, other),
                  "report", True, f"range {min_max_ratio(mine, other)}; best {min(mine) * 1000:.1f} ms / "
                  f"{min(other) * 1000:.1f} ms; load {load:.1f}")


def junit_report(cases: int) -> bytes:
    """A JUnit XML report shaped like Surefire's and pytest's: suites, properties, failures, skips, output."""
    suites = []
    per_suite = 50
    for s in range(max(1, cases // per_suite)):
        rows = []
        for c in range(per_suite):
            n = s * per_suite + c
            body = ""
            if n % 7 == 0:
                body = (f'<failure message="expected 200, got {n}" type="AssertionError">Traceback (most recent call '
                        f'last):\n  File "test_{s}.py", line {c}, in test_{n}\nAssertionError</failure>')
            elif n % 11 == 0:
                body = '<skipped message="not on this platform"/>'
            rows.append(f'<testcase classname="tests.test_{s}" name="test_case_{n}" time="0.{n % 1000:03d}">'
                        f"{body}<system-out>case {n} ran &amp; printed &lt;this&gt;</system-out></testcase>")
        suites.append(f'<testsuite name="tests.test_{s}" tests="{per_suite}" timestamp="2026-12-04T10:00:00" '
                      f'time="1.5"><properties><property name="python" value="3.11"/></properties>'
                      + "".join(rows) + "</testsuite>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>' + "".join(suites) + "</testsuites>").encode()


def yaml_children(site: Path) -> list[Figure]:
    """Each loader on examples/contract.yml and on 200,000 nested '[', in a child (a C loader may crash)."""
    from testops_evidence.readers import yamlread

    example = ROOT / "examples" / "contract.yml"
    expected = json.dumps(yamlread.load(example.read_text(encoding="utf-8")), sort_keys=True, default=str)
    loaders = {
        "yamlread": "from testops_evidence.readers import yamlread; load = yamlread.load",
        "PyYAML CSafeLoader": "import yaml; load = lambda t: yaml.load(t, Loader=yaml.CSafeLoader)",
        "ruamel.yaml C loader": "from ruamel.yaml import YAML; y = YAML(typ='safe', pure=False); "
                                "assert 'CParser' in type(y.parser).__name__ or y.Parser.__name__ == 'CParser'; load = y.load",
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path[1:], str(site)])}
    figures = []
    for label, setup in loaders.items():
        script = (f"import json, sys\n{setup}\ntext = open(sys.argv[1], encoding='utf-8').read()\n"
                  "try:\n    value = load(text)\nexcept Exception as exc:\n"
                  "    print('refused:', type(exc).__name__, str(exc)[:80].replace(chr(10), ' '))\n"
                  "else:\n    print('equal' if json.dumps(value, sort_keys=True, default=str) == sys.argv[2] "
                  "else 'read, but not as yamlread reads it')\n")
        example_run = subprocess.run([sys.executable, "-c", script, str(example), expected], env=env,
                                     capture_output=True, text=True, check=False, timeout=120)
        nested = Path(os.environ.get("TMPDIR", "/tmp")) / f"testops-evidence-nested-{os.getpid()}.yml"
        nested.write_text("[" * 200_000, encoding="utf-8")
        try:
            nested_run = subprocess.run([sys.executable, "-c", script, str(nested), "null"], env=env,
                                        capture_output=True, text=True, check=False, timeout=120)
        finally:
            nested.unlink()

        def said(run: subprocess.CompletedProcess[str]) -> str:
            if run.returncode < 0:
                return f"killed by signal {-run.returncode}"
            return (run.stdout.strip() or run.stderr.strip().splitlines()[-1])[:100]

        figures.append(Figure(f"yaml: {label} on examples/contract.yml | on 200,000 nested '['", 0.0, "report", True,
                              f"{said(example_run)} | {said(nested_run)}"))
    return figures


def bench_parsers(cfg: Any) -> list[Figure]:
    smoke = getattr(cfg, "smoke", False)
    rounds = 1 if smoke else (5 if getattr(cfg, "quick", False) else 9)
    cases = 100 if smoke else 10_000
    where = getattr(cfg, "candidates", None)
    site = candidates_site(Path(where) if where else None, install=not smoke)

    from test_selection_support import big_document
    from testops_evidence.contract import load_schema
    from testops_evidence.readers import strictjson, yamlread
    from testops_evidence.readers.adapters.junit import parse_junit
    from testops_evidence.readers.schemacheck import compile_schema

    load = os.getloadavg()[0]
    document = big_document(cases, testops=False)
    figures: list[Figure] = []

    # schemacheck against jsonschema (a runtime dependency: it explains what schemacheck refuses).
    from jsonschema import Draft202012Validator

    schema = load_schema("contract")
    check = compile_schema(schema)
    assert check is not None
    validator = Draft202012Validator(schema)
    assert check(document) and validator.is_valid(document)
    figures.append(compare(f"schema check of a {cases:,}-case contract", lambda: check(document),
                           lambda: validator.is_valid(document), rounds, "jsonschema Draft202012Validator.is_valid", load))

    # strictjson against json with a duplicate-refusing hook.
    text = json.dumps(document, indent=2)

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            raise ValueError("duplicate key")
        return out

    assert strictjson.loads(text) == json.loads(text, object_pairs_hook=refuse_duplicates)
    figures.append(compare(f"JSON of the same contract ({len(text) / 1e6:.1f} MB)", lambda: strictjson.loads(text),
                           lambda: json.loads(text, object_pairs_hook=refuse_duplicates), rounds,
                           "json.loads(object_pairs_hook=refuse duplicates)", load))

    report = junit_report(cases // 2)
    outcomes = parse_junit(report)
    assert len(outcomes) == (cases // 2 // 50) * 50 or smoke

    if site is None:
        figures.append(Figure("yaml, junit: the library candidates (skipped: no .tools/bench-candidates; run "
                              "benchmarks/parsers.py once without --smoke)", 0.0, "report", True))
        return figures
    sys.path.append(str(site))
    import defusedxml.ElementTree as DET
    import junitparser
    import yaml
    from ruamel.yaml import YAML
    from yaml_load import yaml_text

    ytext = yaml_text(document)
    ruamel_c = YAML(typ="safe", pure=False)
    assert yamlread.load(ytext) == yaml.load(ytext, Loader=yaml.CSafeLoader) == ruamel_c.load(ytext)
    label = f"YAML of the same contract ({len(ytext) / 1e6:.1f} MB)"
    figures.append(compare(label, lambda: yamlread.load(ytext), lambda: yaml.load(ytext, Loader=yaml.CSafeLoader),
                           rounds, "PyYAML CSafeLoader", load))
    figures.append(compare(label, lambda: yamlread.load(ytext), lambda: ruamel_c.load(ytext), rounds,
                           "ruamel.yaml C loader (typ=safe, pure=False)", load))
    figures.extend(yaml_children(site))

    def junitparser_cases() -> int:
        count = 0
        for suite in junitparser.JUnitXml.fromstring(report.decode()):
            for case in suite:
                _ = (case.name, case.classname, case.time, case.result)
                count += 1
        return count

    assert junitparser_cases() == len(outcomes)
    label = f"JUnit report of {len(outcomes):,} cases ({len(report) / 1e6:.1f} MB)"
    figures.append(compare(label, lambda: parse_junit(report), lambda: DET.fromstring(report), rounds,
                           "defusedxml.ElementTree.fromstring (parse only)", load))
    figures.append(compare(label, lambda: parse_junit(report), junitparser_cases, rounds,
                           "junitparser (parse and every case's result)", load))
    return figures


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="five rounds per comparison, not nine")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round (for the test suite)")
    parser.add_argument("--candidates", help="the candidates' virtualenv (default .tools/bench-candidates/<key>)")
    figures = bench_parsers(parser.parse_args(argv))
    print_figures(figures)
    return 1 if any(not f.ok for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
