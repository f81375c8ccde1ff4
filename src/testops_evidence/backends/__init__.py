"""Publication backends: where a campaign's cases come from and where its evidence is published.

A backend is one module with one class that does three things, each from plain values:

* ``select`` — which contract cases this run evaluates, and the facts that prove why (:class:`Outcome`);
* ``publish`` — send an export exactly as its receipt describes it, and return the publication record;
* ``verify`` — prove the publication landed, row by row.

The phases ``select``, ``upload`` and ``verify`` read their inputs, call the chosen backend and render what
it returns; they never branch on a backend's name. Which backend runs is the pure :func:`choose`; the
services a backend may use (the state directory for once-markers, the log, clocks, a TestOps client
factory) are passed in as :class:`Services`, built by the runner's ``PhaseContext.open_backend``. A new
backend is one module here plus one line in :data:`BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from testops_evidence.errors import Refusal

if TYPE_CHECKING:
    from testops_evidence.campaign.receipt import Receipt
    from testops_evidence.campaign.selection import TestOpsBinding
    from testops_evidence.context import RunContext
    from testops_evidence.contract import Case, Contract
    from testops_evidence.safeio import StateDir
    from testops_evidence.testops.client import TestOpsClient

# name -> module (inside this package) holding the backend class ``Backend``
BACKENDS: dict[str, str] = {
    "testops": "testops",
    "files": "files",
}


def choose(explicit: str | None, *, contract_names_testops: bool) -> str:
    """The backend's name: the explicit ``backend`` input, else TestOps when the contract names one."""
    if explicit is None:
        return "testops" if contract_names_testops else "files"
    if explicit not in BACKENDS:
        raise Refusal("input.backend", f"backend must be {' or '.join(BACKENDS)}", field="backend",
                      expected=" | ".join(BACKENDS), actual=explicit)
    return explicit


@dataclass(frozen=True)
class Services:
    """What a backend may use besides its arguments. ``testops`` builds the TestOps client (only a backend
    that talks to TestOps calls it, so the token is read only there)."""

    state: StateDir
    log: Callable[[str], None]
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]
    testops: Callable[[], TestOpsClient]


@dataclass(frozen=True)
class SelectInputs:
    """What ``select`` hands a backend: the contract, the live run context and the selection inputs."""

    contract: Contract
    live: RunContext
    job_run_id: int | None  # the job-run-id input
    job_run_id_env: int | None  # ALLURE_JOB_RUN_ID
    job_run_env: Path | None  # the job-run-env input (allurectl job-run env output)
    standing_plan: Path | None
    narrowed: bool  # the cases input narrows whatever is selected
    workflow_name: str | None = None  # GITHUB_WORKFLOW: the workflow's name
    job_uid: str | None = None  # ALLURE_JOB_UID: the uid the workflow's TestOps job was created with


@dataclass
class Outcome:
    """What chose the cases, and the facts the summary shows."""

    cases: list[Case]
    source: str
    origin: str  # a noun phrase for the headline: "the standing plan `x`"
    why: str  # a sentence for the summary: why exactly these cases
    testops: TestOpsBinding | None = None
    bindings: list[tuple[str, str, str]] = field(default_factory=list)  # (object, checked, value)
    planned: int = 0


@dataclass(frozen=True)
class VerifyOptions:
    depth: str  # page | detail
    deadline: int  # seconds


@dataclass(frozen=True)
class PublishOptions:
    """What ``upload`` hands a backend besides the export: the HTML report a files publication carries
    (``report``: auto | always | never), the history it continues (a history.jsonl, already fetched), how
    many earlier reports the history keeps, the report's title, the environment tools run in, and where
    their logs go. A backend that publishes elsewhere (TestOps) ignores them."""

    report: str = "never"
    history: Path | None = None
    history_source: str = ""  # where the history came from, for the summary
    history_limit: int = 20
    title: str = "testops-evidence"
    env: Mapping[str, str] = field(default_factory=dict)
    logs: Path | None = None
    # TestOps: the cases the stream job already sent into the launch (case key -> the result ids TestOps gave
    # its results, trials first, in the receipt's order); upload sends them no second time.
    streamed: Mapping[str, Sequence[int]] = field(default_factory=dict)
    streamed_form: str | None = None  # the form TestOps answered the stream's results in (api.result_ids)


@dataclass(frozen=True)
class Published:
    """A publication: the record upload keeps (``upload.json``) and the sentence that reports it."""

    record: dict[str, Any]
    headline: str


class Backend(Protocol):
    name: ClassVar[str]
    remote: ClassVar[bool]  # evidence leaves this machine (a local rehearsal context may never reach it)

    def __init__(self, services: Services) -> None: ...

    def select(self, inputs: SelectInputs) -> Outcome: ...

    def publish(self, receipt: Receipt, results_dir: Path, options: PublishOptions) -> Published: ...

    def verify(self, receipt: Receipt, publication: Mapping[str, Any], options: VerifyOptions) -> dict[str, Any]: ...

    @staticmethod
    def publication_rows(publication: Mapping[str, Any]) -> Sequence[tuple[str, Any]]: ...


def backend_class(name: str) -> type[Backend]:
    module = import_module(f"{__name__}.{BACKENDS[choose(name, contract_names_testops=False)]}")
    cls: type[Backend] = module.Backend
    return cls


def open_backend(name: str, services: Services) -> Backend:
    return backend_class(name)(services)
