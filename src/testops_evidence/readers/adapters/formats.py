"""The report formats a cell result is built from, each declared once.

Everything else is derived from :data:`FORMATS`: the ``cell`` command's options (``--<kind>``), what the
layout reader looks for in a case directory, the per-file caps, the docs' table of formats
(scripts/gen_docs.py) and the fuzz and hostile-file suites that walk the registry. Adding a format is one
adapter module (bytes in, outcomes or a framework run out) and one entry here.

Two families: *test reports* (JUnit XML, allure-results) reduce to outcomes, and their file names are kept
as the cell's artifact paths; *framework logs* (Inspect AI, promptfoo) are read one run per file, and
their names are made safe for the artifacts list (``frameworks.artifact_name``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from testops_evidence.readers.adapters import Outcome, allure_results, inspect_log, junit, promptfoo
from testops_evidence.readers.adapters.frameworks import FrameworkRun

Files = Iterable[tuple[str, bytes]]  # (name shown in refusals, bytes), read once, in order
Parsed = tuple[list[Outcome], list[tuple[str, FrameworkRun]]]


@dataclass(frozen=True)
class ReportFormat:
    kind: str  # the `cell` option (--<kind>) and the format's name in an adapted cell's origin
    title: str  # for docs and messages
    help: str  # the `cell` option's help
    suffixes: tuple[str, ...]  # files read in a directory of this format
    limit: int  # bytes, per file (io.too_large)
    parse: Callable[[Files], Parsed]
    directory: str | None = None  # the directory reserved for it inside a case directory
    loose: tuple[str, ...] = ()  # suffixes also read outside any reserved directory of a case directory
    recursive: bool = False  # directories are read to any depth (and `directory` is found at any depth)
    framework: bool = False  # a framework log: one run per file

    def wanted(self, name: str, suffixes: tuple[str, ...] | None = None) -> bool:
        return name.endswith(suffixes or self.suffixes) and not name.startswith(".")


def _junit(files: Files) -> Parsed:
    return [outcome for name, data in files for outcome in junit.parse_junit(data, name)], []


def _allure(files: Files) -> Parsed:
    return allure_results.parse_results(files), []


def _inspect(files: Files) -> Parsed:
    return [], [(name, inspect_log.to_run(inspect_log.read_log(data, name))) for name, data in files]


def _promptfoo(files: Files) -> Parsed:
    return [], [(name, promptfoo.read_results(data, name)) for name, data in files]


FORMATS: tuple[ReportFormat, ...] = (
    ReportFormat("junit", "JUnit XML", "a JUnit XML file, or a directory of them", (".xml",), junit.JUNIT_LIMIT,
                 _junit, loose=(".xml",), recursive=True),
    ReportFormat("allure-results", "allure-results", "an allure-results directory", ("-result.json",),
                 allure_results.RESULT_LIMIT, _allure, directory="allure-results", recursive=True),
    ReportFormat("inspect-log", "Inspect AI log", "an Inspect AI log (.eval or .json), or a directory of them",
                 (".eval", ".json"), inspect_log.LOG_LIMIT, _inspect, directory="inspect-logs", loose=(".eval",),
                 framework=True),
    ReportFormat("promptfoo", "promptfoo results",
                 "a promptfoo results file (promptfoo eval -o results.json), or a directory of them", (".json",),
                 promptfoo.RESULTS_LIMIT, _promptfoo, directory="promptfoo", framework=True),
)
BY_KIND = {fmt.kind: fmt for fmt in FORMATS}
RESERVED = frozenset(fmt.directory for fmt in FORMATS if fmt.directory)
TITLES = ", ".join(fmt.title for fmt in FORMATS)
