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

Matrix rows (keys are kebab-case; read them as ``matrix['timeout-minutes']`` or ``matrix.keys``):

* one case per job: ``job`` (``<lane>-<key>``), ``key``, ``testops-id``, ``full-name``, ``title``,
  ``lane``, ``credentials`` (list of secret names), ``timeout-minutes`` and ``keys`` (``[key]``);
* a shard: ``job`` (``<lane>-shard-<n>``), ``shard`` (1-based), ``shards``, ``keys`` (the cases it runs,
  in order), ``lane``, ``credentials`` (union, sorted), ``timeout-minutes`` (sum).

Every row has ``job``, ``keys``, ``lane``, ``credentials`` and ``timeout-minutes``, so one worker template
serves both forms.

**The plan is the worker binding.** ``job`` names the worker job and its cell artifact
(``<artifact-prefix>-cells-<run attempt>-<job>``). The plan is a pure function of the selection's cases
(their order and lanes), so a later job recomputes it from the digest-checked selection
(:func:`plan_matrices`) and accepts a cell for a case only from the artifact of the job it assigns the case to.
A unit of the plan is a case today; a later version may make it a (case, trial) pair, each still owned by
exactly one job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any

from testops_evidence.actions import format_output_value
from testops_evidence.contract import Case
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

    def over_hosted_limit(self) -> list[dict[str, Any]]:
        return [row for row in self.include if row["timeout-minutes"] > HOSTED_JOB_LIMIT_MINUTES]


@dataclass(frozen=True)
class MatrixPlan:
    lanes: Mapping[str, LaneMatrix]

    def lane(self, name: str) -> LaneMatrix:
        return self.lanes[name]

    def jobs(self) -> dict[str, tuple[str, ...]]:
        """Every worker job of every lane, in plan order, with the case keys it runs."""
        return {str(row["job"]): tuple(row["keys"]) for name in LANES for row in self.lanes[name].include}

    def owners(self) -> dict[str, str]:
        """Case key -> the worker job the plan assigned it to."""
        return {key: job for job, keys in self.jobs().items() for key in keys}

    def outputs(self) -> dict[str, Any]:
        """``<lane>-matrix``, ``<lane>-count`` (jobs; 0 lets a workflow skip the lane), ``<lane>-max-parallel``."""
        out: dict[str, Any] = {}
        for name in LANES:
            lane = self.lanes[name]
            out[f"{name}-matrix"] = lane.matrix()
            out[f"{name}-count"] = lane.jobs
            out[f"{name}-max-parallel"] = lane.max_parallel
        return out


def case_row(case: Case) -> dict[str, Any]:
    return {
        "job": f"{case.lane}-{case.key}",
        "key": case.key,
        "testops-id": case.testops_id,
        "full-name": case.full_name,
        "title": case.title,
        "lane": case.lane,
        "credentials": list(case.credentials),
        "timeout-minutes": case.timeout_minutes,
        "keys": [case.key],
    }


def shard_sizes(count: int, max_jobs: int = MAX_MATRIX_JOBS) -> list[int]:
    """Balanced shard sizes: as few cases per job as the job cap allows, sizes differing by at most one."""
    if count <= 0:
        return []
    per = ceil(count / max_jobs)
    jobs = ceil(count / per)
    base, extra = divmod(count, jobs)
    return [base + 1 if index < extra else base for index in range(jobs)]


def shard_rows(cases: Sequence[Case], lane: str, max_jobs: int = MAX_MATRIX_JOBS) -> list[dict[str, Any]]:
    sizes = shard_sizes(len(cases), max_jobs)
    rows = []
    start = 0
    for index, size in enumerate(sizes):
        chunk = cases[start:start + size]
        start += size
        rows.append({
            "job": f"{lane}-shard-{index + 1}",
            "shard": index + 1,
            "shards": len(sizes),
            "keys": [case.key for case in chunk],
            "lane": lane,
            "credentials": sorted({name for case in chunk for name in case.credentials}),
            "timeout-minutes": sum(case.timeout_minutes for case in chunk),
        })
    return rows


def plan_matrices(cases: Sequence[Case], lanes: Mapping[str, int], *,
                  max_jobs: int = MAX_MATRIX_JOBS) -> MatrixPlan:
    """Partition ``cases`` (plan order kept) into the lanes; shard a lane above ``max_jobs`` cases.

    ``lanes`` maps lane -> max-parallel (the contract's). A lane the contract does not declare has no
    cases (the contract schema guarantees it) and gets an empty matrix with max-parallel 1.
    """
    result: dict[str, LaneMatrix] = {}
    for name in LANES:
        members = [case for case in cases if case.lane == name]
        sharded = len(members) > max_jobs
        rows = shard_rows(members, name, max_jobs) if sharded else [case_row(case) for case in members]
        result[name] = LaneMatrix(lane=name, include=tuple(rows), max_parallel=int(lanes.get(name, 1)),
                                  case_count=len(members), sharded=sharded)
    return MatrixPlan(result)


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

