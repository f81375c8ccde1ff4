"""The ``cell-results`` directory layouts that export reads (docs/evidence.md, "The cell-results directory").

**Per worker** (``artifact-prefix`` given; the campaign template): one directory per worker artifact, as
``actions/download-artifact`` writes them without ``merge-multiple``. The matrix plan names each worker
job, and each job's artifact is ``<artifact-prefix>-cells-<run attempt>-<job>``::

    cell-results/
      <prefix>-cells-<attempt>-<job>/       the artifact of worker job <job>
        <case-key>.json                     the cell result of a case the plan assigned to <job>
        <case-key>/<any>.json               cell results of that case (several attempts: run-attempts any)
        <case-key>/...                      reports of that case, adapted at export: where each format's
                                            files may lie is declared in ``formats.FORMATS`` (docs/evidence.md)
        testops-evidence-worker.json        the worker record: its job and selection (the template's case
                                            loop writes it, so a worker's artifact is never empty)

A file is attributed to a case by its path, and accepted only from the job the plan assigned that case
to: a directory the plan does not know, a file the layout does not allow, or a cell for a case of
another job refuses the whole export.

**Merged** (no ``artifact-prefix``; one job, a rehearsal, or workers you trust as one domain)::

    cell-results/
      <any>.json                     a cell result (attributed by the case it names)
      <dir>/<any>.json               a cell result
      <case-key>/...                 reports of that case, adapted at export (as above)

Every ``*.json`` at the top or one directory down must be a cell result; reports in a directory not
named by a case key cannot be attributed (``export.unattributed``). Names starting with ``.`` are
ignored; other files below the top level (transcripts, logs) are left alone. A directory that holds a
cell result is not adapted again: its reports are the worker's own material.

Reports adapted at export carry no commit or profile of their own, so the adapted cell takes the
selection's: prefer writing the cell in the worker (``testops-evidence cell``), where the binding is
really checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from testops_evidence.campaign.cells import (
    CASE_KEY_RE,
    CELL_LIMIT,
    CellFile,
    CellResult,
    adapted_cell,
    is_case_scoped,
)
from testops_evidence.contract import Case
from testops_evidence.errors import Refusal
from testops_evidence.publication.tree import Entry, check_exact, list_dir
from testops_evidence.readers.adapters import Outcome, artifact_path
from testops_evidence.readers.adapters.formats import FORMATS, RESERVED, ReportFormat
from testops_evidence.readers.adapters.frameworks import FrameworkRun, artifact_name, framework_cell
from testops_evidence.safeio import SafeRoot, parse_json_bytes, read_safe, sha256_bytes

WORKER_RECORD = "testops-evidence-worker.json"
WORKER_RECORD_SCHEMA = "testops-evidence/worker-record/v1"
ARTIFACT_FILE_LIMIT = max(fmt.limit for fmt in FORMATS)  # the largest report a worker artifact may hold

MIB = 1024 * 1024
# Budgets of one case directory, checked from its listing (names and sizes, never following a link) before
# a byte of it is read: a worker's artifact is the agent's to fill, and before these a case directory of 160
# cell files of 4 MiB was read whole only to be refused as duplicates. Each file also has its own cap (a cell
# 4 MiB, a report its format's limit), checked by fstat when it is opened.
CASE_CELL_FILES = 1024  # cell results (*.json): 100 trials of a case under run-attempts any, with re-runs
CASE_CELL_BYTES = 32 * MIB  # an honest cell is a few KiB: thousands of them, or eight at the per-file cap
CASE_REPORT_FILES = 100_000  # report files of every format below one case directory
CASE_REPORT_BYTES = 512 * MIB  # one framework log at its cap, or that much of smaller reports


def check_case_budget(directory: str, what: str, files: Sequence[tuple[str, int]], max_files: int,
                      max_bytes: int, *, reader: str = "export") -> None:
    """Refuse (``export.case_budget``) a case directory whose files of one kind, as listed, exceed a budget
    (``reader``: the phase that reads them, export or a worker's cell)."""
    if len(files) > max_files:
        raise Refusal("export.case_budget", f"{directory} holds {len(files)} {what} files; {reader} reads at most "
                      f"{max_files} for one case", field=directory, expected=f"<= {max_files} {what} files",
                      actual=len(files))
    total = sum(size for _name, size in files)
    if total > max_bytes:
        raise Refusal("export.case_budget", f"{directory} holds {total:,} bytes of {what} in {len(files)} files; "
                      f"{reader} reads at most {max_bytes:,} bytes of them for one case", field=directory,
                      expected=f"<= {max_bytes} bytes of {what}", actual=total)


MAX_DEPTH = 16  # directory levels below a report root: the path rule of safe reads allows 16 components


def walk(root: str | Path, relpath: str, wanted: Callable[[str], bool], *, prune: Callable[[str], bool] | None = None,
         sizes: dict[str, int] | None = None, _depth: int = 0) -> list[str]:
    """Files below ``root/relpath`` whose name is ``wanted``, recursively, as paths relative to ``root``.

    **Order**: depth first, entries of each directory by name in byte order — so a file's position is the
    order of its relative path compared component by component. Names starting with ``.`` are skipped
    (hidden files are not reports); directories for whose path (relative to ``root``) ``prune`` is true are not
    entered. Links and
    other special files are refused by the safe listing (``io.unsafe_path``), never skipped. ``sizes``, when
    given, receives each found file's listed size (for budgets checked before reading).
    """
    if _depth > MAX_DEPTH:
        raise Refusal("io.unsafe_path", f"{relpath} is nested deeper than {MAX_DEPTH} directories", field=relpath,
                      expected=f"at most {MAX_DEPTH} levels", actual=_depth)
    prefix = f"{relpath}/" if relpath else ""
    found: list[str] = []
    for entry in list_dir(root, relpath):
        if entry.name.startswith("."):
            continue
        if entry.is_dir:
            if prune is None or not prune(prefix + entry.name):
                found += walk(root, prefix + entry.name, wanted, prune=prune, sizes=sizes, _depth=_depth + 1)
        elif wanted(entry.name):
            found.append(prefix + entry.name)
            if sizes is not None:
                sizes[prefix + entry.name] = entry.size
    return found


def _shown(root: str | Path) -> str:
    """Refusals name a report by its whole path as the operator gave it (root included), so it can be opened as
    written; the recorded inputs stay relative to root, as the cell result stores them."""
    text = os.fspath(root)
    return f"{text.rstrip('/')}/" if text not in ("", ".") else ""


def listing(root: str | Path, relpath: str, suffixes: tuple[str, ...], *, recursive: bool,
            prune: Callable[[str], bool] | None = None) -> dict[str, int]:
    """Files of ``root/relpath`` whose name ends with one of ``suffixes`` (to any depth when ``recursive``),
    as path relative to root -> listed size. Hidden names are skipped."""
    if recursive:
        sizes: dict[str, int] = {}
        walk(root, relpath, lambda name: name.endswith(suffixes), prune=prune, sizes=sizes)
        return sizes
    prefix = f"{relpath}/" if relpath else ""
    return {prefix + e.name: e.size for e in list_dir(root, relpath)
            if not e.is_dir and e.name.endswith(suffixes) and not e.name.startswith(".")}


def _directories(root: str | Path, relpath: str, name: str, recursive: bool, depth: int = 0) -> list[str]:
    prefix = f"{relpath}/" if relpath else ""
    found: list[str] = []
    for entry in list_dir(root, relpath):
        if entry.is_dir and not entry.name.startswith(".") and depth < MAX_DEPTH:
            if entry.name == name:
                found.append(prefix + entry.name)
            elif recursive:
                found += _directories(root, prefix + entry.name, name, recursive, depth + 1)
    return found


def _read_by_a_format(relpath: str) -> Callable[[str], bool]:
    """Whether a directory below the case directory ``relpath`` is one a format reads as its own (its reserved
    ``directory``: at the top of the case directory, or at any depth for a recursive format), so loose reports are
    not looked for in it. Only those: a directory merely *named* like a top-level format's directory deeper down
    (``results/promptfoo/``) is read by no format, so a report in it is still a loose report — never skipped
    unread (a failing JUnit report hidden there left the case passed on the others)."""
    def prune(path: str) -> bool:
        below = path[len(relpath) + 1:] if relpath else path
        name = below.rpartition("/")[2]
        return any(fmt.directory == name and (fmt.recursive or "/" not in below) for fmt in FORMATS)
    return prune


def case_files(root: str | Path, relpath: str, fmt: ReportFormat) -> list[tuple[str, int]]:
    """The files of ``fmt`` in the case directory ``root/relpath`` with their listed sizes: those with a
    ``loose`` suffix outside the formats' own directories, then those in this format's own directory."""
    sizes: dict[str, int] = {}
    if fmt.loose:
        sizes.update(listing(root, relpath, fmt.loose, recursive=fmt.recursive, prune=_read_by_a_format(relpath)))
    if fmt.directory:
        for directory in _directories(root, relpath, fmt.directory, fmt.recursive):
            sizes.update(listing(root, directory, fmt.suffixes, recursive=fmt.recursive))
    return list(sizes.items())


@dataclass
class Reports:
    """What the reports of one case said, before they become a cell."""

    outcomes: list[Outcome] = field(default_factory=list)
    runs: list[tuple[str, FrameworkRun]] = field(default_factory=list)  # (source, run) of framework logs
    inputs: list[tuple[str, str]] = field(default_factory=list)  # (artifact path, sha256)
    kinds: list[str] = field(default_factory=list)  # the formats read, in registry order
    recorded: dict[str, str] = field(default_factory=dict)  # name in the cell's artifacts -> the file it names

    @property
    def origin(self) -> str:
        return "+".join(self.kinds)

    def record(self, path: str, sha256: str, shown: str) -> None:
        """One input, under the name the cell's ``artifacts`` list records (``artifact_path``: characters outside
        ``[A-Za-z0-9._-]`` become ``_``). That mapping is not one-to-one (``a b.xml`` and ``a_b.xml``, ``é`` and
        ``ü``): two files recorded under one name would leave the record unable to say which bytes a name holds,
        so the second is refused (``export.adapter``: this case broken, as for any report it cannot read)."""
        name = artifact_path(path)
        first = self.recorded.setdefault(name, shown)
        if first != shown:
            raise Refusal("export.adapter", f"{first!r} and {shown!r} would both be recorded as the report "
                          f"{name!r} (names keep only [A-Za-z0-9._-]; each other character becomes '_'): rename "
                          "one of them", field=name, expected="one report per recorded name", actual=[first, shown])
        self.inputs.append((path, sha256))


def read_report(root: str | Path, relpath: str, limit: int, what: str) -> bytes:
    """A report's bytes. A report over its kind's cap is that case's problem, not the campaign's: it is
    ``export.adapter`` (the case broken, every other case exported), where every other unsafe read — a link,
    a special file — stays a refusal of the whole export."""
    try:
        return read_safe(root, relpath, limit=limit)
    except Refusal as refusal:
        if refusal.code != "io.too_large":
            raise
        raise Refusal("export.adapter", f"{_shown(root)}{relpath} is over the {limit // MIB} MiB a {what} report "
                      f"may hold ({refusal.actual} bytes): write a smaller report, or split it", field=relpath,
                      expected=f"a {what} report of at most {limit} bytes", actual=refusal.actual) from None


def read_files(root: str | Path, names: Sequence[str], fmt: ReportFormat, reports: Reports, prefix: str = "") -> None:
    """Read and parse ``names`` (relative to ``root``) as ``fmt`` into ``reports``; each input is recorded as
    ``prefix`` + its name (a framework log's file name made safe)."""
    if not names:
        return
    shown = _shown(root)

    def files() -> Iterator[tuple[str, bytes]]:
        for name in names:  # one at a time: a framework log may be 512 MiB
            data = read_report(root, name, fmt.limit, fmt.title)
            path = prefix + name
            if fmt.framework:
                directory, _, base = path.rpartition("/")
                path = (f"{directory}/" if directory else "") + artifact_name(base, fmt.kind + fmt.suffixes[0])
            reports.record(path, sha256_bytes(data), shown + name)
            yield shown + name, data

    outcomes, runs = fmt.parse(files())
    reports.outcomes += outcomes
    reports.runs += runs
    reports.kinds.append(fmt.kind)


def read_case(root: str | Path, relpath: str) -> Reports:
    """Every report of every format in the case directory ``root/relpath``; inputs relative to ``root``."""
    reports = Reports()
    for fmt in FORMATS:
        read_files(root, [name for name, _size in case_files(root, relpath, fmt)], fmt, reports)
    return reports


def listed_reports(root: str | Path, relpath: str) -> list[tuple[str, int]]:
    """Every report file export would read below ``root/relpath`` with its listed size: what the report budget
    is checked on, before any is read."""
    return [item for fmt in FORMATS for item in case_files(root, relpath, fmt)]


def check_report_budget(root: str | Path, relpath: str) -> None:
    check_case_budget(relpath or ".", "report", listed_reports(root, relpath), CASE_REPORT_FILES, CASE_REPORT_BYTES)


def adapt_trials(root: str | Path, relpath: str, case: Case, *, source_sha: str, profile: Mapping[str, str],
                 selection_sha256: str, fallback_time: float, worker: str | None = None) -> list[CellResult]:
    """The cells of a case directory from its reports: one per epoch (repeat) of a framework log that measured a
    case the contract measures several times — its epochs are its trials — else one (none without reports).
    A log with more epochs than the case has trials is refused (``export.adapter``); a directory over the
    report budget, before any report is read (``export.case_budget``)."""
    check_report_budget(root, relpath)
    reports = read_case(root, relpath)
    if not reports.inputs:
        return []
    cell = partial(framework_cell, case, reports.runs, reports.outcomes, source_sha=source_sha, profile=profile,
                   inputs=reports.inputs, selection_sha256=selection_sha256, fallback_time=fallback_time,
                   origin=reports.origin)
    ordinals = sorted({n for _, run in reports.runs for n in run.trials(case.key)}) if case.trials.repeated else []
    if len(ordinals) <= 1:
        return [adapted_cell(cell(), relpath or ".", reports.inputs, reports.origin, worker=worker)]
    if ordinals[-1] > case.trials.count:
        raise Refusal("export.adapter", f"{relpath} holds a log that measured case {case.key!r} in "
                      f"{ordinals[-1]} epochs, but the contract measures it {case.trials.count} times",
                      field=relpath, expected=f"epochs 1..{case.trials.count}", actual=ordinals)
    cells = []
    for trial in ordinals:
        document = cell(trial=trial)
        document["trial"] = trial
        document["attempt-id"] = f"{document['attempt-id'][:195]}-t{trial}"
        cells.append(adapted_cell(document, f"{relpath or '.'}#{trial}", reports.inputs, reports.origin,
                                  worker=worker))
    return cells


def _has_reports(root: Path, relpath: str, inside: Sequence[Entry]) -> bool:
    """Whether a directory holds reports: a format's own directory or a loose report at its top, or a report
    of a recursive format anywhere below."""
    if any((i.is_dir and i.name in RESERVED) or (not i.is_dir and any(f.wanted(i.name, f.loose) for f in FORMATS
                                                                       if f.loose)) for i in inside):
        return True
    return any(case_files(root, relpath, fmt) for fmt in FORMATS if fmt.recursive)


def _name_failure(refusal: Refusal, relpath: str, key: str, worker: str | None) -> CellFile:
    """A file with an unsafe name below a case's directory makes that case broken (``export.report_name``);
    any other refusal is raised again."""
    if refusal.code != "io.unsafe_path" or refusal.field != "name":
        raise refusal
    return CellFile(relpath, case=key, worker=worker, failure=Refusal(
        "export.report_name", f"case directory {relpath}: {refusal.message}; nothing in it was read",
        field=relpath, expected=refusal.expected, actual=refusal.actual))


class _Reader:
    """Reads one cell-results directory into :class:`CellFile` candidates (nothing is trusted yet)."""

    def __init__(self, root: Path, cases: Mapping[str, Case], *, source_sha: str, profile: Mapping[str, str],
                 selection_sha256: str, fallback_time: float, run_attempts: str = "any") -> None:
        self.root = root
        self.one_per_trial = run_attempts != "any"
        self.cases = cases
        self.source_sha = source_sha
        self.profile = profile
        self.selection_sha256 = selection_sha256
        self.fallback_time = fallback_time
        self.files = SafeRoot(root)  # closed by collect_cells / collect_worker_cells

    def cell_file(self, relpath: str, case: str | None, worker: str | None) -> CellFile:
        return CellFile(relpath, case=case, worker=worker, data=self.files.read(relpath, limit=CELL_LIMIT))

    def cell_files(self, relpath: str, documents: Sequence[Entry], key: str | None, worker: str | None) -> list[CellFile]:
        """The cell results of one directory, once its listing is within the budgets: no more cells than the
        case has trials when it admits one attempt each (``export.duplicate_cell``, as admission would say after
        reading them all), and the case-directory cell budget (``export.case_budget``)."""
        case = self.cases.get(key) if key is not None else None
        if case is not None and self.one_per_trial and len(documents) > case.trials.count:
            names = [f"{relpath}/{item.name}" for item in documents]
            raise Refusal("export.duplicate_cell", f"{relpath} holds {len(documents)} cell results for case {key!r}, "
                          f"which is measured {case.trials.count} time(s); the trust policy admits one attempt per "
                          "trial (run-attempts: first-only)", field=key, expected=f"at most {case.trials.count} cell "
                          "result(s)", actual=names[:10] + ([f"... {len(names) - 10} more"] if len(names) > 10 else []))
        check_case_budget(relpath, "cell result", [(item.name, item.size) for item in documents], CASE_CELL_FILES,
                          CASE_CELL_BYTES)
        return [self.cell_file(f"{relpath}/{item.name}", key, worker) for item in documents]

    def case_directory(self, relpath: str, key: str, worker: str | None) -> list[CellFile]:
        """Cells of one case's directory: its ``*.json`` cells, else its reports adapted (or the refusal). A
        file below it with an unsafe name is that case's problem (``export.report_name``), not the campaign's."""
        try:
            return self._case_directory(relpath, key, worker)
        except Refusal as refusal:
            return [_name_failure(refusal, relpath, key, worker)]

    def _case_directory(self, relpath: str, key: str, worker: str | None) -> list[CellFile]:
        inside = [item for item in list_dir(self.root, relpath) if not item.name.startswith(".")]
        documents = [item for item in inside if not item.is_dir and item.name.endswith(".json")]
        if documents:
            return self.cell_files(relpath, documents, key, worker)
        if not _has_reports(self.root, relpath, inside):
            return []
        case = self.cases.get(key)
        if case is None:
            # Not a case of the contract: attribution refuses it (export.foreign_cell) by its key.
            return [CellFile(relpath, case=key, worker=worker, failure=Refusal(
                "export.adapter", f"{relpath} holds reports for {key!r}, which is no contract case"))]
        try:
            adapted = adapt_trials(self.root, relpath, case, source_sha=self.source_sha, profile=self.profile,
                                   selection_sha256=self.selection_sha256, fallback_time=self.fallback_time,
                                   worker=worker)
        except Refusal as refusal:
            if not is_case_scoped(refusal):
                raise  # an unsafe path or an oversized file is refused, never attributed
            return [CellFile(relpath, case=key, worker=worker, failure=refusal.detached())]
        return [CellFile(cell.source, case=key, worker=worker, adapted=cell) for cell in adapted]

    def merged(self) -> list[CellFile]:
        files: list[CellFile] = []
        for entry in list_dir(self.root):
            if entry.name.startswith("."):
                continue
            if not entry.is_dir:
                if not entry.name.endswith(".json"):
                    raise Refusal("export.unattributed", f"{self.root}/{entry.name} is not a cell result (*.json) "
                                  "and the top level of the cell-results directory holds only cell results",
                                  field=entry.name, expected="*.json cell results or per-case directories",
                                  actual=entry.name)
                files.append(self.cell_file(entry.name, None, None))
                continue
            try:
                inside = [item for item in list_dir(self.root, entry.name) if not item.name.startswith(".")]
            except Refusal as refusal:
                if entry.name not in self.cases:
                    raise
                files.append(_name_failure(refusal, entry.name, entry.name, None))
                continue
            documents = [item for item in inside if not item.is_dir and item.name.endswith(".json")]
            if documents:
                files += self.cell_files(entry.name, documents, None, None)
                continue
            if not _has_reports(self.root, entry.name, inside):
                continue
            if entry.name not in self.cases:
                raise Refusal("export.unattributed", f"{self.root}/{entry.name} holds test reports but is not named "
                              "by a contract case key, so export cannot tell which case they measured",
                              field=entry.name, expected="a directory named by a case key", actual=entry.name)
            files += self.case_directory(entry.name, entry.name, None)
        return files

    def per_worker(self, artifact_prefix: str, jobs: Mapping[str, Sequence[tuple[str, int]]], *,
                   require_files: bool = False) -> tuple[list[CellFile], list[str]]:
        """The cell files of every worker artifact, and the workers whose artifact is present."""
        known = set(jobs)
        cases_of = {job: frozenset(key for key, _trial in units) for job, units in jobs.items()}
        owner_of: dict[str, str] = {}
        for name in sorted(jobs):
            for case_key in cases_of[name]:
                owner_of.setdefault(case_key, name)
        files: list[CellFile] = []
        present: list[str] = []
        for entry in list_dir(self.root):
            if entry.name.startswith("."):
                continue
            job = entry.name[len(artifact_prefix):] if entry.name.startswith(artifact_prefix) else None
            if not entry.is_dir or job not in known:
                raise Refusal("export.worker_artifact", f"{self.root}/{entry.name} is not the artifact of a worker "
                              f"job of the matrix plan (expected {artifact_prefix}<job> for one of its "
                              f"{len(known)} jobs)", field=entry.name,
                              expected=f"{artifact_prefix}<job of the matrix plan>", actual=entry.name)
            assert job is not None
            present.append(job)
            files += self.worker_artifact(entry.name, job, cases_of, owner_of, require_files=require_files)
        return files, present

    def worker_record(self, directory: str, job: str, *, require_files: bool) -> None:
        """The record a worker leaves beside its cells must name this job and this selection; anything else
        is an artifact of another worker, campaign or run (``export.worker_artifact``). When it lists the
        artifact's files (``files``: path -> SHA-256, as the campaign template writes it), the directory must
        hold exactly those, each with its digest: a file that another download extracted into it (a cell
        planted beside the worker's own) is ``io.extra_file``, never read as the worker's."""
        relpath = f"{directory}/{WORKER_RECORD}"
        try:
            data = read_safe(self.root, relpath, limit=CELL_LIMIT)
            document = parse_json_bytes(data, relpath)
        except Refusal:
            data, document = b"", None
        fields = document if isinstance(document, dict) else {}
        expected = {"schema": WORKER_RECORD_SCHEMA, "job": job, "selection-sha256": self.selection_sha256}
        for name, value in expected.items():
            if fields.get(name) != value:
                raise Refusal("export.worker_artifact", f"{relpath} is not the record of worker {job!r} for this "
                              f"selection ({name} differs)", field=f"{relpath}/{name}", expected=value,
                              actual=fields.get(name) if isinstance(fields.get(name), str | int | None) else "?")
        listed = fields.get("files")
        if listed is None:
            if not require_files:
                return
            raise Refusal("export.worker_artifact", f"{relpath} does not list the files of its artifact: without "
                          "the list, a file extracted beside the worker's own could not be told apart",
                          field=f"{relpath}/files", expected="files: path -> sha256", actual=None)
        if not (isinstance(listed, dict) and all(isinstance(v, str) for v in listed.values())
                and WORKER_RECORD not in listed):
            raise Refusal("export.worker_artifact", f"{relpath} lists its files in another form than path -> "
                          "SHA-256", field=f"{relpath}/files", expected="an object of path: sha256",
                          actual=type(listed).__name__)
        check_exact(self.root / directory, {**listed, WORKER_RECORD: sha256_bytes(data)},
                    code="export.worker_artifact", binding=f"the record of worker {job!r}", limit=ARTIFACT_FILE_LIMIT)

    def worker_artifact(self, directory: str, job: str, cases_of: Mapping[str, frozenset[str]],
                        owner_of: Mapping[str, str], *, require_files: bool = False) -> list[CellFile]:
        """The cell files of one worker's artifact. Its worker record is read first: it must name this job and
        selection, and where it lists the artifact's files the directory must hold exactly those
        (``require_files``: the list must be there — the campaign template's workers write it, and export
        requires it where collect-cells bound the artifacts). Then its listing is judged before a file of it is
        read: an entry named for a case the plan gave only to other jobs is refused as admission would refuse
        it (``export.cell_origin``), and an artifact with entries for more cases than its job ran is refused
        (``export.worker_artifact``), so what is read is bounded by the job's own cases and their budgets."""
        entries = list_dir(self.root, directory)
        if any(entry.name == WORKER_RECORD and not entry.is_dir for entry in entries):
            # First: a planted file is refused before anything is read.
            self.worker_record(directory, job, require_files=require_files)
        elif require_files:
            raise Refusal("export.worker_artifact", f"{directory} holds no worker record ({WORKER_RECORD}): "
                          "without the list of the files its worker uploaded, a file extracted beside them could "
                          "not be told apart", field=f"{directory}/{WORKER_RECORD}",
                          expected="the record the campaign template's worker writes", actual="absent")
        own = cases_of[job]
        keys = {entry.name.removesuffix(".json") for entry in entries
                if not entry.name.startswith(".") and entry.name != WORKER_RECORD}
        for other in sorted(keys - own):
            if other in owner_of:
                raise Refusal("export.cell_origin", f"{directory}/{other} is a cell for case {other!r} in the "
                              f"artifact of worker job {job!r}, but the matrix plan assigned it to "
                              f"{owner_of[other]!r}", field=f"{other}/worker", expected=owner_of[other], actual=job)
        if len(keys) > len(own):
            raise Refusal("export.worker_artifact", f"{directory} holds files for {len(keys)} cases, but the matrix "
                          f"plan assigned worker job {job!r} {len(own)}", field=directory,
                          expected=f"<= {len(own)} case entries (<case-key>.json, <case-key>/)", actual=len(keys))
        files: list[CellFile] = []
        for entry in entries:
            relpath = f"{directory}/{entry.name}"
            if entry.name.startswith(".") or (entry.name == WORKER_RECORD and not entry.is_dir):
                continue
            stem = entry.name[:-len(".json")] if not entry.is_dir and entry.name.endswith(".json") else None
            key = entry.name if entry.is_dir else stem
            if key is None or not CASE_KEY_RE.fullmatch(key):
                raise Refusal("export.worker_artifact", f"{relpath} is not part of a worker artifact's layout "
                              "(<case-key>.json and <case-key>/)", field=relpath,
                              expected="<case-key>.json or <case-key>/", actual=entry.name)
            if entry.is_dir:
                found = self.case_directory(relpath, key, job)
                # A case directory without a cell or a report is the worker's own material (logs).
                files += found
            else:
                files.append(self.cell_file(relpath, key, job))
        return files


def collect_cells(
    root: Path,
    cases: Mapping[str, Case],
    *,
    source_sha: str,
    profile: Mapping[str, str],
    selection_sha256: str,
    fallback_time: float,
    run_attempts: str = "any",
) -> list[CellFile]:
    """Every cell-file candidate of the merged layout (admission happens in ``cells.admit``)."""
    reader = _Reader(root, cases, source_sha=source_sha, profile=profile, selection_sha256=selection_sha256,
                     fallback_time=fallback_time, run_attempts=run_attempts)
    with reader.files:
        return reader.merged()


def collect_worker_cells(
    root: Path,
    cases: Mapping[str, Case],
    *,
    artifact_prefix: str,
    jobs: Mapping[str, Sequence[tuple[str, int]]],
    source_sha: str,
    profile: Mapping[str, str],
    selection_sha256: str,
    fallback_time: float,
    run_attempts: str = "any",
    require_files: bool = False,
) -> tuple[list[CellFile], list[str]]:
    """Every cell-file candidate of the per-worker layout, and the worker jobs whose artifact is present.
    ``jobs``: the matrix plan's worker jobs, each with the (case, trial) units it runs. ``require_files``:
    every artifact must hold its worker record listing its files (see ``_Reader.worker_artifact``)."""
    reader = _Reader(root, cases, source_sha=source_sha, profile=profile, selection_sha256=selection_sha256,
                     fallback_time=fallback_time, run_attempts=run_attempts)
    with reader.files:
        return reader.per_worker(artifact_prefix, jobs, require_files=require_files)
