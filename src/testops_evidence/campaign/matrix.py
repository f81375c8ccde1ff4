"""The matrix plan: one GitHub Actions matrix per lane (``native``, ``external``), within GitHub's limits.

Limits (GitHub docs, "Usage limits" and "Defining outputs for jobs"):

* a matrix has at most **256 jobs** per workflow run. A lane with more cases is packed into shards:
  ``per = ceil(n / 256)`` cases per job, ``ceil(n / per)`` jobs, consecutive cases in plan order,
  shard sizes differing by at most one. A shard job runs its cases one after another, so its
  ``timeout-minutes`` is the **sum** of its cases' timeouts.
* a job's outputs total at most **1 MB**, and GitHub approximates their size "based on UTF-16 encoding".
  :func:`measure` counts every output of the step (name and value, exactly as written) in UTF-8 bytes
  and in UTF-16 bytes and budgets the larger, so a campaign is refused (``selection.matrix_too_large``)
  before GitHub would silently drop an output.

Units. The plan's unit is a **(case, trial)** pair: a case measured ``k`` times (the contract's ``trials``)
has ``k`` units, trial ordinals ``1..k``. A case's trials are *pieces* of their own (``jobs: per-trial``,
the default) or one piece together (``jobs: per-case``: its trials run one after another in one job).

Matrix rows (keys are kebab-case; read them as ``matrix['timeout-minutes']`` or ``matrix.keys``):

* one piece per job: ``job``, ``key``, ``testops-id``, ``full-name``, ``title``, ``lane``, ``credentials``
  (list of secret names), ``timeout-minutes`` and ``keys`` (``[key]``). The job is ``<lane>-<key>`` for a
  case measured once or all of whose trials share the job, ``<lane>-<key>-t<n>`` for trial ``n`` alone
  (then the row also has ``trial``: ``n``);
* a shard: ``job`` (``<lane>-shard-<n>``), ``shard`` (1-based), ``shards``, ``keys`` (the cases it runs,
  in order), ``lane``, ``credentials`` (union, sorted), ``timeout-minutes`` (sum).

With a contract ``budget`` every row also has ``budget``: ``job`` (its share of each campaign cap, in
proportion to the trials it runs) and ``trial`` (the cap of each trial) — campaign/budget.py.

A row that runs a case measured more than once also has ``trials``: a list parallel to ``keys`` with
the trial ordinals the job runs for each key (a row without ``trials`` runs trial 1 of each key), and
``label``, a human name for the job (``get-task-context trial 2 of 5``). Every row has ``job``,
``keys``, ``lane``, ``credentials`` and ``timeout-minutes`` (the sum over the units it runs), so one
worker template serves every form.

**The plan is the worker binding.** ``job`` names the worker job and its cell artifact
(``<artifact-prefix>-cells-<run attempt>-<job>``). The plan is a pure function of the selection's cases
(their order, lanes and trials), so a later job recomputes it from the digest-checked selection
(:func:`plan_matrices`) and accepts the cell of a (case, trial) only from the artifact of the job it
assigns that unit to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any

from testops_evidence.actions import format_output_value
from testops_evidence.contract import Budget, Case
from testops_evidence.errors import Refusal

LANES = ("native", "external")
MAX_MATRIX_JOBS = 256
# GitHub: "Outputs can be a maximum of 1 MB per job" (decimal MB: the smaller reading of "1 MB").
JOB_OUTPUT_LIMIT = 1_000_000
# Room left for outputs other steps of the select job may set (guard's outputs are a few hundred bytes).
OTHER_STEPS_RESERVE = 16 * 1024
SELECT_OUTPUT_BUDGET = JOB_OUTPUT_LIMIT - OTHER_STEPS_RESERVE
# A GitHub-hosted job is cancelled after 6 hours whatever timeout-minutes says; shards above it are flagged.
HOSTED_JOB_LIMIT_MINUTES = 360


@dataclass(frozen=True)
class LaneMatrix:
    lane: str
    include: tuple[dict[str, Any], ...]
    max_parallel: int
    case_count: int
    sharded: bool

    @property
    def jobs(self) -> int:
        return len(self.include)

    def matrix(self) -> dict[str, Any]:
        return {"include": list(self.include)}

    @property
    def units(self) -> int:
        """(case, trial) units: the cells this lane's jobs write."""
        return sum(len(units_of(row)) for row in self.include)

    def form(self) -> str:
        if self.sharded:
            return "shards"
        singles = {"trial" in row for row in self.include}
        repeated = any("trials" in row for row in self.include)
        if not repeated:
            return "one case per job"
        return {frozenset({True}): "one trial per job", frozenset({False}): "one case per job (its trials in turn)"}.get(
            frozenset(singles), "one trial or case per job")

    def over_hosted_limit(self) -> list[dict[str, Any]]:
        return [row for row in self.include if row["timeout-minutes"] > HOSTED_JOB_LIMIT_MINUTES]


Unit = tuple[str, int]  # (case key, trial ordinal)


@dataclass(frozen=True)
class MatrixPlan:
    lanes: Mapping[str, LaneMatrix]

    def lane(self, name: str) -> LaneMatrix:
        return self.lanes[name]

    def jobs(self) -> dict[str, tuple[Unit, ...]]:
        """Every worker job of every lane, in plan order, with the (case, trial) units it runs."""
        return {str(row["job"]): units_of(row) for name in LANES for row in self.lanes[name].include}

    def owners(self) -> dict[Unit, str]:
        """(case key, trial) -> the worker job the plan assigned it to."""
        return {unit: job for job, units in self.jobs().items() for unit in units}

    def outputs(self) -> dict[str, Any]:
        """``<lane>-matrix``, ``<lane>-count`` (jobs; 0 lets a workflow skip the lane), ``<lane>-max-parallel``."""
        out: dict[str, Any] = {}
        for name in LANES:
            lane = self.lanes[name]
            out[f"{name}-matrix"] = lane.matrix()
            out[f"{name}-count"] = lane.jobs
            out[f"{name}-max-parallel"] = lane.max_parallel
        return out


def units_of(row: Mapping[str, Any]) -> tuple[Unit, ...]:
    """The (case, trial) units a matrix row runs, in order."""
    keys = [str(key) for key in row["keys"]]
    trials = row.get("trials") or [[1]] * len(keys)
    return tuple((key, int(n)) for key, ordinals in zip(keys, trials, strict=True) for n in ordinals)


@dataclass(frozen=True)
class Piece:
    """Units that always share a job: one trial, or every trial of a ``jobs: per-case`` case."""

    case: Case
    trials: tuple[int, ...]

    @property
    def minutes(self) -> int:
        return self.case.timeout_minutes * len(self.trials)


def pieces(cases: Sequence[Case]) -> list[Piece]:
    out: list[Piece] = []
    for case in cases:
        if case.remote:
            continue  # measured by another workflow: its cells come from the ledger, not from a job of this run
        ordinals = tuple(range(1, case.trials.count + 1))
        if case.trials.repeated and case.trials.jobs == "per-trial":
            out += [Piece(case, (n,)) for n in ordinals]
        else:
            out.append(Piece(case, ordinals))
    return out


def case_row(case: Case, trials: Sequence[int] = (1,)) -> dict[str, Any]:
    """The row of a job that runs ``trials`` of one case (all of them, or one)."""
    single = case.trials.repeated and len(trials) == 1
    row: dict[str, Any] = {
        "job": f"{case.lane}-{case.key}-t{trials[0]}" if single else f"{case.lane}-{case.key}",
        "key": case.key,
        "testops-id": case.testops_id,
        "full-name": case.full_name,
        "title": case.title,
        "lane": case.lane,
        "credentials": list(case.credentials),
        "timeout-minutes": case.timeout_minutes * len(trials),
        "keys": [case.key],
    }
    if case.trials.repeated:
        row["trials"] = [list(trials)]
        row["label"] = (f"{case.key} trial {trials[0]} of {case.trials.count}" if single
                        else f"{case.key} ({case.trials.count} trials)")
        if single:
            row["trial"] = trials[0]
    return row


def shard_sizes(count: int, max_jobs: int = MAX_MATRIX_JOBS) -> list[int]:
    """Balanced shard sizes: as few cases per job as the job cap allows, sizes differing by at most one."""
    if count <= 0:
        return []
    per = ceil(count / max_jobs)
    jobs = ceil(count / per)
    base, extra = divmod(count, jobs)
    return [base + 1 if index < extra else base for index in range(jobs)]


def shard_rows(members: Sequence[Piece] | Sequence[Case], lane: str,
               max_jobs: int = MAX_MATRIX_JOBS) -> list[dict[str, Any]]:
    """Consecutive pieces (or cases, each one piece per trial set) packed into balanced shard jobs."""
    parts = [m if isinstance(m, Piece) else Piece(m, tuple(range(1, m.trials.count + 1))) for m in members]
    sizes = shard_sizes(len(parts), max_jobs)
    rows = []
    start = 0
    for index, size in enumerate(sizes):
        chunk = parts[start:start + size]
        start += size
        keys: list[str] = []
        trials: list[list[int]] = []
        for piece in chunk:
            if keys and keys[-1] == piece.case.key:
                trials[-1] += piece.trials  # consecutive trials of one case stay one entry
            else:
                keys.append(piece.case.key)
                trials.append(list(piece.trials))
        row: dict[str, Any] = {
            "job": f"{lane}-shard-{index + 1}",
            "shard": index + 1,
            "shards": len(sizes),
            "keys": keys,
            "lane": lane,
            "credentials": sorted({name for piece in chunk for name in piece.case.credentials}),
            "timeout-minutes": sum(piece.minutes for piece in chunk),
        }
        if any(piece.case.trials.repeated for piece in chunk):
            row["trials"] = trials
            row["label"] = f"shard {index + 1} of {len(sizes)}"
        rows.append(row)
    return rows


def plan_matrices(cases: Sequence[Case], lanes: Mapping[str, int], *,
                  max_jobs: int = MAX_MATRIX_JOBS, budget: Budget | None = None) -> MatrixPlan:
    """Partition ``cases`` (plan order kept) into the lanes; a lane with more than ``max_jobs`` pieces (a
    trial, or the trials of a ``per-case`` case) is packed into shards.

    ``lanes`` maps lane -> max-parallel (the contract's). A lane the contract does not declare has no
    cases (the contract schema guarantees it) and gets an empty matrix with max-parallel 1.
    """
    result: dict[str, LaneMatrix] = {}
    for name in LANES:
        members = [case for case in cases if case.lane == name]
        parts = pieces(members)
        sharded = len(parts) > max_jobs
        rows = shard_rows(parts, name, max_jobs) if sharded else [case_row(p.case, p.trials) for p in parts]
        result[name] = LaneMatrix(lane=name, include=tuple(rows), max_parallel=int(lanes.get(name, 1)),
                                  case_count=len(members), sharded=sharded)
    if budget is not None:
        total = sum(case.trials.count for case in cases if not case.remote)
        for lane in result.values():
            for row in lane.include:
                row["budget"] = budget_row(budget, len(units_of(row)), total)
    return MatrixPlan(result)


def budget_row(budget: Budget, units: int, total: int) -> dict[str, dict[str, int]]:
    """A job's ``budget``: its share of each campaign cap (``job``: in proportion to the trials it runs, rounded
    down) and the cap of each trial (``trial``)."""
    row: dict[str, dict[str, int]] = {}
    if budget.campaign:
        row["job"] = {name: cap * units // total for name, cap in sorted(budget.campaign.items())}
    if budget.trial:
        row["trial"] = dict(sorted(budget.trial.items()))
    return row


@dataclass(frozen=True)
class OutputSize:
    name: str
    utf8_bytes: int
    utf16_bytes: int

    @property
    def budgeted(self) -> int:
        return max(self.utf8_bytes, self.utf16_bytes)


def _utf16_bytes(text: str) -> int:
    # Two bytes per UTF-16 code unit; characters above U+FFFF take a surrogate pair (four bytes).
    return 2 * len(text) + 2 * sum(1 for ch in text if ord(ch) > 0xFFFF)


def measure(outputs: Mapping[str, Any]) -> list[OutputSize]:
    """Size of each output exactly as the runtime will write it (name + formatted value)."""
    sizes = []
    for name, value in outputs.items():
        text = name + format_output_value(value)
        sizes.append(OutputSize(name, len(text.encode("utf-8")), _utf16_bytes(text)))
    return sizes


def check_output_budget(outputs: Mapping[str, Any], case_count: int, *,
                        budget: int = SELECT_OUTPUT_BUDGET) -> list[OutputSize]:
    """Refuse ``selection.matrix_too_large`` when all outputs of the step together exceed ``budget``."""
    sizes = measure(outputs)
    total = sum(size.budgeted for size in sizes)
    if total > budget:
        largest = max(sizes, key=lambda size: size.budgeted)
        fits = max(1, case_count * budget // total) if case_count else 0
        raise Refusal(
            "selection.matrix_too_large",
            f"the select step's outputs would take {total:,} bytes (largest: {largest.name}, "
            f"{largest.budgeted:,}), over the {budget:,}-byte budget under GitHub's 1 MB per-job output limit",
            field="outputs", expected=f"<= {budget} bytes (UTF-16 estimate, as GitHub measures)", actual=total,
            hint=f"Split the campaign into several selections of the same plan with `cases:` "
                 f"(about {fits} of these {case_count} cases fit in one), or shorten case keys.",
        )
    return sizes

