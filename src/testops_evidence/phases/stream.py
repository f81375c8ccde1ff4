"""``stream`` (GitHub token, ``actions: read``; the backend's token, never a worker's): publish each case as soon
as the worker jobs that measured it have ended.

Runs beside the matrix (it needs select, not the workers). It re-admits the run, reads the digest-checked
selection and recomputes the matrix plan, then polls the run attempt's jobs (``GET .../attempts/{n}/jobs``)
with a bounded backoff. When a worker job of the plan has completed it takes *only* that worker's artifact,
bound as collect-cells binds it (``campaign/workers.py``: the id and digest the worker's own upload step
reported in its step record, the Actions API's digest of that id, and the downloaded zip re-hashed against
it), reads its cells as export reads a collected artifact (its worker record lists every file with its
digest), admits them against the whole selection (``campaign/cells.py``: the same attribution and refusals as
export), and publishes every case whose last trial is now in, projected by ``publication/projection.py``
exactly as export projects it:

* files backend: each case's results and evidence into ``<stream-dir>/allure-results``, create-only;
* the ledger ``<stream-dir>/stream.json`` (``publication/stream.py``) after every step: each case once —
  a case in the ledger is never published again, so a re-run of the stream job continues where it stopped.

A worker job that ended without an artifact (cancelled, timed out, its upload failed) publishes nothing; its
cases are listed as unfinished and the export receipt reports them broken. The polling ends when every worker
job of the plan has ended, or at ``stream-deadline-seconds`` (then the ledger says so: incomplete). A refusal of a
worker's artifact (replaced, forged, foreign cells) stops the stream with that refusal: what was published
before stays published, and nothing of that worker is. ``verify-stream`` later holds the ledger to the export
receipt.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.backends import backend_class
from testops_evidence.campaign import usage
from testops_evidence.campaign.cells import USAGE_ALLOWED, BoundCell, CellFile, admit
from testops_evidence.campaign.cells import Binding as CellBinding
from testops_evidence.campaign.matrix import Unit, plan_matrices
from testops_evidence.campaign.selection import Selection, load_selection, read_travelled, validate_against
from testops_evidence.campaign.trials import case_outcome
from testops_evidence.campaign.workers import WorkerArtifact, artifact_name, bind_worker_artifacts, job_display_name
from testops_evidence.contract import Case, Contract
from testops_evidence.errors import Refusal
from testops_evidence.publication import allure
from testops_evidence.publication.projection import Projected, project_case
from testops_evidence.publication.stream import (
    LEDGER_LIMIT,
    LEDGER_NAME,
    LEDGER_SCHEMA,
    RESULTS_DIR,
    check_ledger,
    published_entry,
    published_files,
)
from testops_evidence.publication.tree import check_exact, write_new
from testops_evidence.readers.adapters.layout import collect_worker_cells
from testops_evidence.readers.archive import extract_zip
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import (
    canonical_json,
    fsync_dir,
    parse_json_bytes,
    read_safe_path,
    sha256_bytes,
    write_atomic,
)

DEFAULT_DIR = Path("testops-evidence-stream")
DEFAULT_DEADLINE = 6 * 3600  # seconds: GitHub's own limit for a job on its runners
ARTIFACT_LIMIT = 512 * 1024 * 1024  # bytes of one worker's zip
FIRST_DELAY, MAX_DELAY = 10.0, 120.0  # seconds between polls: reset on progress, doubled while nothing changes


def run(ctx: PhaseContext) -> PhaseResult:
    from testops_evidence import github_run

    contract = ctx.contract()
    prefix = ctx.settings.string("artifact-prefix")
    if prefix is None:
        raise Refusal("input.artifact-prefix", "stream needs the campaign's artifact-prefix (the prefix of its worker "
                      "artifacts and job names)", field="artifact-prefix", expected="a prefix", actual=None)
    if ctx.env.get("GITHUB_ACTIONS") != "true":
        raise Refusal("guard.outside_actions", "stream watches the run's worker jobs through the Actions API; outside "
                      "Actions there is no run (export the cell-results directory instead)", field="GITHUB_ACTIONS",
                      expected="true", actual=ctx.env.get("GITHUB_ACTIONS") or "(unset)")
    backend = ctx.backend()
    live = ctx.readmit()
    path = ctx.settings.path("selection-path") or Path("testops-evidence-selection.json")
    digest, _given = read_travelled(path, ctx.settings.string("selection-sha256"), in_actions=True)
    selection = load_selection(path, digest)
    validate_against(selection, contract, live)
    cases = [contract.case(key) for key in selection.keys]
    _supported(contract, cases)
    plan = plan_matrices(cases, contract.lanes, budget=contract.budget).jobs()
    stream = Stream(ctx, contract, selection, cases, plan, prefix, ctx.settings.path("stream-dir") or DEFAULT_DIR)
    if backend_class(backend).remote:  # TestOps, the one remote backend: its launch takes each case as it comes
        if selection.testops is None or selection.document["context"].get("local"):
            raise Refusal("selection.job_run_binding", "stream to TestOps needs a selection made by the testops "
                          "backend in this run (it names the job run and launch the results go into)",
                          field="testops", expected="the selection's TestOps binding", actual=selection.backend,
                          hint="Select with the testops backend, or stream with `backend: files`.")
        stream.sink = TestOpsSink(ctx, selection)
    token = github_run.require_token(ctx.github_token())
    policy = github_run.request_policy(ctx.env, ctx.sleep)
    attempt = live.run_attempt
    deadline_seconds = ctx.settings.integer("stream-deadline-seconds")
    deadline = ctx.monotonic() + (DEFAULT_DEADLINE if deadline_seconds is None else deadline_seconds)
    delay = FIRST_DELAY
    polls = 0
    with ctx.runtime.group(f"stream: {len(cases)} cases of {len(plan)} worker jobs, run {live.run_id} attempt "
                           f"{attempt}"):
        while True:
            polls += 1
            api_jobs = github_run.list_attempt_jobs(live.api_url, token, live.repository, live.run_id, attempt,
                                                    policy=policy)
            ended = stream.ended(api_jobs)
            if ended:
                artifacts = github_run.list_artifacts(live.api_url, token, live.repository, live.run_id,
                                                      name=f"{prefix}-cells-{attempt}-*", policy=policy)
                # Bound against the whole plan (an artifact no job of the plan owns is refused now, as in
                # collect-cells), taken only for the jobs that ended.
                bound = bind_worker_artifacts(stream.case_plan, prefix=prefix, attempt=attempt, artifacts=artifacts,
                                              api_jobs=api_jobs, only=frozenset(ended))
                for worker in bound:
                    data = None
                    if worker.artifact is not None:
                        data = github_run.download_artifact(live.api_url, token, worker.artifact,
                                                            max_bytes=ARTIFACT_LIMIT, policy=policy)
                    stream.take(worker, data, attempt)
                stream.publish_ready()
                stream.confirm_resumed()
                stream.write_ledger(complete=stream.all_ended, polls=polls)  # the publication as it grows
                delay = FIRST_DELAY
            else:
                delay = min(delay * 2, MAX_DELAY)
            ctx.runtime.log(stream.progress())
            if stream.all_ended:
                break
            if ctx.monotonic() + delay > deadline:
                ctx.runtime.annotate("warning", f"stream: stream-deadline-seconds reached with {len(stream.pending)} worker "
                                     "job(s) still running; their cases are left to export, which reports any that "
                                     "never finished as broken", title="stream.incomplete")
                break
            ctx.sleep(delay)
    stream.confirm_resumed(final=True)  # a case the old ledger lists whose workers never ended: not published before
    ledger_sha = stream.write_ledger(complete=stream.all_ended, polls=polls)
    if stream.sink is not None:
        stream.sink.close()
    return stream.result(ledger_sha, polls)


class TestOpsSink:
    """The stream's results sent into the selection's TestOps launch as they come: one session (once-marked
    ``stream-start`` / ``stream-session``, opened at the first ready case), then each poll's ready cases in chunks
    of up to ``CHUNK_SIZE`` results (one at a time where the server's answer holds the ids alone, as upload sends
them), each chunk once-marked by the digest of its first case's key. The token is the
    stream job's; workers never hold it."""

    __test__ = False

    def __init__(self, ctx: PhaseContext, selection: Selection) -> None:
        from testops_evidence.testops.stages import Stages

        pending = [stage for stage in ctx.state.pending_markers() if stage.startswith("stream-")]
        if pending:
            raise Refusal("upload.already_started", f"an earlier stream in this state directory did not finish "
                          f"({len(pending)} uncertain stage(s): {', '.join(pending[:5])}); run reconcile",
                          field="once-markers", expected="none pending", actual=pending[:20])
        self.ctx, self.selection = ctx, selection
        self.client = ctx.testops_client()
        self.stages = Stages(ctx.state, self.client, gateway_uncertain=True)
        self.session: Any = None
        self.shape: str | None = None
        self.requests = 0

    def _open(self) -> Any:
        from testops_evidence.testops.publish import Session, open_session

        if self.session is None:
            state = self.ctx.state
            testops = self.selection.testops
            assert testops is not None  # a TestOps selection names its job run and launch
            if state.has("done-stream-session.json"):  # a re-run of the stream job continues its session
                start, opened = state.read_receipt("done-stream-start.json"), state.read_receipt(
                    "done-stream-session.json")
                self.session = Session(testops["project-id"], start["job-run-id"], start["launch-id"],
                                       opened["session-id"], str(testops["job-uid"]), str(testops["job-run-uid"]))
            else:
                document = self.selection.document
                self.session = open_session(self.client, self.stages, testops, document["context"],
                                            str(document["campaign"]), document["profile"], prefix="stream")
        return self.session

    def send(self, projected: Sequence[Projected]) -> list[dict[str, int]]:
        """Each projected case's results, chunked; the result ids TestOps answered, per case."""
        from testops_evidence.campaign.receipt import trial_rows
        from testops_evidence.testops.bundle import result_dto
        from testops_evidence.testops.publish import chunk_size, send_results

        session = self._open()
        items: list[tuple[int, Mapping[str, Any], dict[str, Any]]] = []
        for index, one in enumerate(projected):
            files = dict(one.files)
            for row in (*trial_rows(one.row), one.row):
                name = str(row["result-file"])
                items.append((index, row, result_dto(parse_json_bytes(files[name], name, "stream.result"))))
        ids: list[dict[str, int]] = [{} for _ in projected]
        pending = items
        while pending:
            batch, pending = pending[:chunk_size(self.shape)], pending[chunk_size(self.shape):]
            first = str(batch[0][1]["key"])
            stage = f"stream-results-{sha256_bytes(first.encode())[:24]}-{len(batch)}"
            mapped, self.shape = send_results(self.stages, session, stage, [(row, dto) for _i, row, dto in batch],
                                              f"stream chunk of {first}", self.shape)
            for index, row, _dto in batch:
                ids[index][str(row["uuid"])] = mapped[str(row["uuid"])]
        self.requests = self.client.request_count
        return ids

    def close(self) -> None:
        self.client.close()


def _supported(contract: Contract, cases: Sequence[Case]) -> None:
    """What a case's verdict depends on beyond its own cells cannot be known while the matrix runs."""
    if contract.budget is not None:
        raise Refusal("stream.unsupported", "a campaign with a budget is judged over every worker's spend, known only "
                      "after the matrix: publish it with `publish: batch`", field="/budget",
                      expected="no budget", actual="budget")
    remote = [case.key for case in cases if case.remote]
    if remote:
        raise Refusal("stream.unsupported", f"{len(remote)} selected case(s) are measured by another workflow "
                      "(their cells arrive through import, after the matrix): publish this campaign with "
                      "`publish: batch`", field="measured-by", expected="worker", actual=remote[:20])


class Stream:
    """What has been taken and published so far."""

    def __init__(self, ctx: PhaseContext, contract: Contract, selection: Selection, cases: list[Case],
                 plan: Mapping[str, Sequence[Unit]], prefix: str, directory: Path) -> None:
        self.ctx, self.contract, self.selection, self.cases = ctx, contract, selection, cases
        self.plan, self.prefix, self.directory = plan, prefix, directory
        self.case_plan = {job: tuple(dict.fromkeys(key for key, _trial in units)) for job, units in plan.items()}
        self.owners: dict[Unit, str] = {unit: job for job, units in plan.items() for unit in units}
        self.jobs_of: dict[str, set[str]] = {}
        for job, units in plan.items():
            for key, _trial in units:
                self.jobs_of.setdefault(key, set()).add(job)
        self.pending: dict[str, float | None] = {job: None for job in plan}  # job -> first seen running (monotonic)
        self.taken: dict[str, WorkerArtifact] = {}
        self.files: list[CellFile] = []
        self.results = directory / RESULTS_DIR
        self.published: dict[str, dict[str, Any]] = {}
        self.sink: TestOpsSink | None = None
        self.result_form: str | None = None  # the form TestOps answered an earlier run's results in
        self.unfinished: dict[str, str] = {}  # job -> why its cases were never published
        self.resumed: set[str] = set()  # cases an earlier run's ledger lists, not yet re-measured by this run
        self.binding = allure.Binding(
            campaign=contract.campaign, selection_sha256=selection.digest, contract_sha256=contract.digest,
            backend=selection.backend, context=selection.document["context"], testops=selection.testops,
            profile=selection.document["profile"])
        self._resume()

    # --- the ledger: each case once, across re-runs of the stream job ------------------------------------------
    def _resume(self) -> None:
        for path in (self.directory, self.results):
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                raise Refusal("io.unsafe_path", f"{path} is a link or not a directory: the stream writes only into "
                              "a directory of its own; give stream-dir a fresh path", field="stream-dir",
                              expected="a directory or nothing", actual=str(path))
        ledger = self.directory / LEDGER_NAME
        if not ledger.exists():
            if self.results.exists() and any(self.results.iterdir()):
                raise Refusal("io.exists", f"{self.results} holds results but no stream ledger beside it: they are "
                              "not this stream's", field="stream-dir", expected="an absent or empty directory",
                              actual=str(self.directory))
            return
        document = parse_json_bytes(read_safe_path(ledger, limit=LEDGER_LIMIT), str(ledger), "stream.ledger")
        entries = check_ledger(document, campaign=self.contract.campaign, selection_sha256=self.selection.digest)
        # The ledger on disk travelled to this run without a digest: it is held to what it says. Its results
        # directory holds exactly the files it lists (a case dropped from the ledger would otherwise be published
        # a second time beside its first files), and every case it lists is re-measured from the bound worker
        # artifacts before this run counts it (confirm_resumed): a status edited into it is refused, never shown.
        check_exact(self.results, published_files(entries), code="stream.ledger",
                    binding="the stream ledger of the earlier run", limit=LEDGER_LIMIT)
        selected = {case.key for case in self.cases}
        for entry in entries:
            if entry["key"] not in selected or entry["key"] in self.published:
                raise Refusal("stream.ledger", f"the stream ledger lists case {entry['key']!r} "
                              + ("twice" if entry["key"] in self.published else "that the selection does not hold"),
                              field=entry["key"], expected="each selected case at most once", actual=entry["key"])
            self.published[entry["key"]] = dict(entry)
        self.resumed = set(self.published)
        form = document.get("testops-result-form") if isinstance(document, dict) else None
        self.result_form = form if isinstance(form, str) else None
        self.ctx.runtime.log(f"stream: {len(self.published)} case(s) already published by an earlier run of this "
                             "job; they are checked against the workers' artifacts, not published again")

    def write_ledger(self, *, complete: bool, polls: int) -> str:
        context = self.selection.document["context"]
        document = {
            "schema": LEDGER_SCHEMA, "campaign": self.contract.campaign, "selection-sha256": self.selection.digest,
            "contract-sha256": self.contract.digest, "backend": self.selection.backend,
            "run-id": context["run-id"], "run-attempt": context["run-attempt"], "complete": complete,
            "selected": len(self.cases), "polls": polls,
            "published": list(self.published.values()),
            "unfinished": [{"job": job, "why": why, "cases": list(self.case_plan[job])}
                           for job, why in sorted(self.unfinished.items())],
            "running": [{"job": job, "cases": list(self.case_plan[job])} for job in sorted(self.pending)],
        }
        form = self.sink.shape if self.sink is not None and self.sink.shape is not None else self.result_form
        if form is not None:
            document["testops-result-form"] = form
        data = canonical_json(document)
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.directory / LEDGER_NAME, data)
        return sha256_bytes(data)

    # --- taking one worker's artifact ----------------------------------------------------------------------------
    def ended(self, api_jobs: Sequence[Any]) -> list[str]:
        """The plan's worker jobs that have completed since the last poll (and note when the others started)."""
        now = self.ctx.monotonic()
        ended = []
        for job in list(self.pending):
            display = job_display_name(self.prefix, job)
            matching = [j for j in api_jobs if j.name == display or j.name.endswith(f" / {display}")]
            if matching and all(j.status == "completed" for j in matching):
                ended.append(job)  # two jobs of one name are refused by the binding (workers.job_identity)
            elif matching and self.pending[job] is None:
                self.pending[job] = now
        return ended

    @property
    def all_ended(self) -> bool:
        return not self.pending

    def take(self, worker: WorkerArtifact, data: bytes | None, attempt: int) -> None:
        """One ended worker: its artifact's cells (read as export reads a collected artifact), or nothing."""
        self.pending.pop(worker.job, None)
        if worker.artifact is None or data is None:
            self.unfinished[worker.job] = f"no artifact (upload step: {worker.upload})"
            self.ctx.runtime.log(f"stream: worker {worker.job} ended without an artifact (upload step: "
                                 f"{worker.upload}); its {len(worker.cases)} case(s) are left to export")
            return
        got = sha256_bytes(data)
        if got != worker.artifact.sha256:
            raise Refusal("workers.artifact_digest", f"artifact {worker.artifact.id} of worker {worker.job!r} "
                          "downloaded as other bytes than the digest its upload step reported", field=worker.artifact.name,
                          expected=f"sha256:{worker.artifact.sha256}", actual=f"sha256:{got}")
        name = artifact_name(self.prefix, attempt, worker.job)
        # Read from this job's state directory, never from the publication: the stream directory holds only what
        # was published (its artifact is held to exactly that).
        root = self.ctx.state.ensure() / "stream-cells" / worker.job
        _extract_into(root / name, data)
        facts = {"cases": {c.key: c for c in self.contract.cases}, "source_sha": self.selection.context.head_sha,
                 "profile": self.selection.document["profile"], "selection_sha256": self.selection.digest,
                 "fallback_time": self.ctx.clock(), "run_attempts": self.contract.trust.run_attempts}
        files, _present = collect_worker_cells(root, artifact_prefix=artifact_name(self.prefix, attempt, ""),
                                               jobs={worker.job: self.plan[worker.job]}, require_files=True, **facts)
        self.files += files
        self.taken[worker.job] = worker

    # --- publishing the cases whose last trial is in --------------------------------------------------------------
    def ready(self) -> list[Case]:
        return [case for case in self.cases if (case.key not in self.published or case.key in self.resumed)
                and all(job in self.taken for job in self.jobs_of.get(case.key, ()))
                and self.jobs_of.get(case.key)]

    def publish_ready(self) -> None:
        ready = self.ready()
        if not ready:
            return
        context = self.selection.context
        # Admitted against the whole selection, as export admits them: the same attribution and refusals.
        bound: dict[Unit, BoundCell] = admit(self.files, CellBinding(
            selection_sha256=self.selection.digest, head_sha=context.head_sha,
            profile=self.selection.document["profile"], selected=self.cases,
            run_attempts=self.contract.trust.run_attempts, run_attempt=context.run_attempt, owners=self.owners))
        accounts = usage.account(((case.key, case.lane, n, _attempt_figures(bound.get((case.key, n))))
                                  for case in ready for n in range(1, case.trials.count + 1)), USAGE_ALLOWED)
        now_ms = int(self.ctx.clock() * 1000)
        projected = [project_case(self.binding, case_outcome(case, bound), accounts, now_ms, self.ctx.new_uuid,
                                  self.owners) for case in ready]
        fresh = [(case, one) for case, one in zip(ready, projected, strict=True) if case.key not in self.resumed]
        for case, one in zip(ready, projected, strict=True):
            if case.key in self.resumed:
                self._confirm(case.key, published_entry(one.row, sorted(self.jobs_of[case.key]), {}))
        new = [one for _case, one in fresh]
        self._write(new)
        sent = self.sink.send(new) if self.sink is not None else [None] * len(new)
        for (case, one), ids in zip(fresh, sent, strict=True):
            entry = published_entry(one.row, sorted(self.jobs_of[case.key]),
                                    {name: sha256_bytes(data) for name, data in one.files})
            if ids is not None:
                entry["testops-result-ids"] = list(ids.values())  # in the order of the case's rows, trials first
            self.published[case.key] = entry

    def _confirm(self, key: str, measured: Mapping[str, Any]) -> None:
        """A case an earlier run's ledger lists, re-measured now from the same bound artifacts: it must say what
        the ledger says (status, code, each trial's status, workers), or the ledger was changed after it was
        written (``stream.ledger``); nothing is published for it either way."""
        listed = self.published[key]
        fields = ("status", "code", "workers")
        got = {name: listed.get(name) for name in fields}
        want = {name: measured.get(name) for name in fields}
        got["trials"] = [(t.get("trial"), t.get("status")) for t in listed.get("trials") or [] if isinstance(t, dict)]
        want["trials"] = [(t["trial"], t["status"]) for t in measured["trials"]]
        if got != want:
            raise Refusal("stream.ledger", f"the stream ledger of an earlier run says case {key!r} was published "
                          f"{listed.get('status')!r}, but its workers' artifacts measure it {measured['status']!r}: "
                          "the ledger was changed after the stream wrote it; start the stream in an empty "
                          "stream-dir", field=key, expected=want, actual=got)
        self.resumed.discard(key)

    def confirm_resumed(self, *, final: bool = False) -> None:
        """Every case an earlier ledger lists must have been re-measured once its workers ended: a case whose
        worker this run saw end without it (no artifact) or never saw end cannot have been published before."""
        open_jobs = set() if final else set(self.pending)
        stale = sorted(key for key in self.resumed if not (self.jobs_of.get(key, set()) & open_jobs))
        if stale:
            raise Refusal("stream.ledger", f"the stream ledger of an earlier run lists {len(stale)} case(s) that no "
                          "worker artifact of this run measured: the ledger was changed after the stream wrote it; "
                          "start the stream in an empty stream-dir", field="published",
                          expected="only cases measured by the workers' artifacts", actual=stale[:20])

    def _write(self, projected: Sequence[Projected]) -> None:
        """Every file of the projected cases, created (never replaced) in the growing results directory."""
        self.results.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.results, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        try:
            for one in projected:
                for name, data in one.files:
                    write_new(name, data, dir_fd=fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.directory)

    # --- what people read ----------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        return {s: sum(1 for e in self.published.values() if e["status"] == s) for s in ("passed", "failed", "broken")}

    def progress(self) -> str:
        counts = self.counts()
        line = (f"stream: published {len(self.published)}/{len(self.cases)} cases (passed {counts['passed']}, failed "
                f"{counts['failed']}, broken {counts['broken']}); {len(self.pending)} worker job(s) still running")
        started = [(since, job) for job, since in self.pending.items() if since is not None]
        if started:
            since, job = min(started)
            line += f", the slowest {job_display_name(self.prefix, job)} ({self.ctx.monotonic() - since:.0f}s)"
        return line

    def result(self, ledger_sha: str, polls: int) -> PhaseResult:
        counts = self.counts()
        total = len(self.cases)
        done = len(self.published)
        complete = self.all_ended
        headline = (f"{'✅' if complete and done == total else '⚠️'} Streamed {done} of {total} cases to "
                    f"{summary.code(self.results)} as their workers ended ("
                    + ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "broken")) + ")"
                    + ("." if complete else f"; {len(self.pending)} worker job(s) had not ended at the deadline."))
        rows = [(summary.status_icon(entry["status"]), summary.code(entry["key"]), entry["status"],
                 summary.code(entry["code"]) if entry.get("code") else "—",
                 summary.join((summary.code(w) for w in entry["workers"]), ", "))
                for entry in list(self.published.values())[:1000]]
        parts = [summary.table(("", ""), [
            ("published", f"{done} of {total}"),
            ("worker jobs ended", f"{len(self.plan) - len(self.pending)} of {len(self.plan)}"),
            ("polls of the jobs API", polls),
            ("ledger", summary.code(self.directory / LEDGER_NAME)),
            ("ledger sha256", summary.code(ledger_sha)),
        ]), "\n### Published cases\n\n",
            summary.table(("", "case", "status", "code", "worker"), rows, limit=1000,
                          more=max(len(self.published) - 1000, 0))]
        if self.unfinished:
            parts.append("\n### Worker jobs that ended without an artifact\n\n" + summary.table(
                ("worker", "why", "cases"), [(summary.code(job), why, len(self.case_plan[job]))
                                             for job, why in sorted(self.unfinished.items())][:200]))
        return PhaseResult(headline=headline, summary="\n".join(parts), outputs={
            "stream-dir": str(self.directory), "stream-sha256": ledger_sha, "published-count": done,
            "stream-complete": complete, "passed-count": counts["passed"], "failed-count": counts["failed"],
            "broken-count": counts["broken"]}, brief=True)


def _attempt_figures(bound: BoundCell | None) -> list[usage.Item]:
    if bound is None or bound.cell is None:
        return [None]
    return [cell.usage() for cell in (*bound.superseded, bound.cell)]


def _extract_into(directory: Path, data: bytes) -> None:
    """The worker's zip, each entry checked (``readers/archive.py``), into a fresh directory."""
    archive = extract_zip(data)
    shutil.rmtree(directory, ignore_errors=True)  # this job's own scratch, left by an earlier run of it
    directory.mkdir(parents=True, mode=0o700)
    for name, item in archive.files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_new(target, item.data)

