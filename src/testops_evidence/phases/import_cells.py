"""``import``: remote cells from another workflow's artifacts into the campaign ledger.

Order matters for safety: the provenance is read from the Actions API first (run, then artifact list),
admitted against the contract's ``remote`` policy, and only then is anything downloaded; every archive
is checked against the digest the API reports before it is opened, and extracted in memory. All cells
are validated before the ledger is touched, and the ledger changes in one locked, atomic transaction:
any refusal leaves it byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence import summary
from testops_evidence.campaign import ledger as ledgers
from testops_evidence.campaign import remote
from testops_evidence.contract import Contract, RemotePolicy
from testops_evidence.errors import Refusal, input_error
from testops_evidence.readers.archive import extract_zip
from testops_evidence.runner import PhaseContext, PhaseResult
from testops_evidence.safeio import read_safe_path, sha256_bytes

RECEIPT_SCHEMA = "testops-evidence/import-receipt/v1"
DEFAULT_LEDGER = "campaign-ledger.json"

IMPORTED, DUPLICATE, REFUSED, READY = "imported", "duplicate", "refused", "not written"


@dataclass
class CellOutcome:
    artifact: remote.SourceArtifact
    execution_id: str
    cell: remote.RemoteCell | None = None
    status: str = REFUSED
    refusal: Refusal | None = None


@dataclass
class Progress:
    """What is known so far; rendered into the summary whether the import succeeds or is refused."""

    run: remote.SourceRun | None = None
    artifacts: list[tuple[remote.SourceArtifact, str | None, int]] | None = None  # (artifact, sha256, cells)
    outcomes: list[CellOutcome] | None = None


def run(ctx: PhaseContext) -> PhaseResult:
    contract = ctx.contract()
    policy = contract.remote
    if policy is None:
        raise Refusal("import.not_configured", f"contract {contract.source_path} has no `remote` section; importing "
                      "cells needs a remote policy", field="remote", expected="a remote policy", actual=None)
    run_id = ctx.settings.integer("source-run-id", minimum=1)
    if run_id is None:
        raise input_error("source-run-id", "input source-run-id (the run that measured the cells) is required")
    intent_path = ctx.settings.path("intent")
    if intent_path is None:
        raise input_error("intent", "input intent (the import intent file) is required")
    ledger_path = ctx.settings.path("ledger") or Path(DEFAULT_LEDGER)
    pattern = ctx.settings.string("artifact-name") or "*"

    from testops_evidence import github_run

    token = github_run.require_token(ctx.github_token())
    api_url = (ctx.env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    intent = remote.parse_intent(read_safe_path(intent_path, limit=remote.INTENT_LIMIT), contract,
                                 f"the import intent {intent_path}")
    ledgers.load(ledger_path, contract.campaign)  # an invalid or foreign ledger is refused before any download
    # This run may import only if the policy admits it, whether or not the workflow ran guard.
    ctx.readmit()

    progress = Progress()
    try:
        outcomes = _collect(ctx, contract, policy, intent, run_id, pattern, api_url, token, progress)
        transaction = _commit(ctx, contract, ledger_path, outcomes)
    except Refusal as refusal:
        if progress.run is not None:
            ctx.runtime.summary(summary.render("phase", mode=summary.code(ctx.mode), headline=_refused_headline(
                progress, refusal, ledger_path)) + _body(progress, ledger_path, None) + "\n")
        raise
    assert progress.run is not None
    imported = sum(o.status == IMPORTED for o in outcomes)
    duplicates = sum(o.status == DUPLICATE for o in outcomes)
    _write_receipt(ctx, progress, ledger_path, transaction)
    source = summary.link(f"#{progress.run.run_id}", progress.run.html_url or None)
    headline = (f"✅ Imported **{imported}** cells from run {source} of {summary.code(progress.run.repository)} into "
                f"{summary.code(ledger_path)}" + (f"; {duplicates} already recorded (no change)." if duplicates
                                                         else "."))
    if imported == 0:
        headline = (f"✅ Nothing new: all {duplicates} cells from run {source} are already in "
                    f"{summary.code(ledger_path)}; the ledger is unchanged.")
    return PhaseResult(headline=headline, summary=_body(progress, ledger_path, transaction),
                       outputs={"imported-count": imported, "duplicate-count": duplicates,
                                "ledger-path": str(ledger_path), "ledger-sha256": _ledger_digest(ledger_path)})


def _ledger_digest(path: Path) -> str:
    found = ledgers.read(path)
    return sha256_bytes(found[1]) if found is not None else ""


# --- collection and validation ---------------------------------------------------------------------------

def _collect(ctx: PhaseContext, contract: Contract, policy: RemotePolicy, intent: remote.Intent, run_id: int,
             pattern: str, api_url: str, token: str, progress: Progress) -> list[CellOutcome]:
    from testops_evidence import github_run

    request_policy = github_run.request_policy(ctx.env, ctx.sleep)
    with ctx.runtime.group(f"import: run {run_id} of {policy.repository} from {api_url}"):
        run_object = github_run.fetch_run(api_url, token, policy.repository, run_id, policy=request_policy)
        source = remote.SourceRun(
            repository=run_object.repository, run_id=run_object.id, run_attempt=run_object.run_attempt,
            workflow=run_object.path, head_branch=run_object.head_branch, head_sha=run_object.head_sha,
            head_repository=run_object.head_repository, event=run_object.event, html_url=run_object.html_url or "")
        progress.run = source
        ctx.runtime.log(f"run {source.run_id} attempt {source.run_attempt}: {source.event} of {source.workflow} "
                        f"on {source.ref} at {source.head_sha}")
        remote.admit_run(policy, source)
        remote.bind_intent(intent, source)
        listed = github_run.list_artifacts(api_url, token, policy.repository, run_id, name=pattern,
                                           policy=request_policy)
        ctx.runtime.log(f"{len(listed)} artifacts match {pattern!r}")
    if not listed:
        raise Refusal("import.artifact", f"run {run_id} has no artifact matching {pattern!r}", field="artifact-name",
                      expected="at least one matching artifact", actual=pattern)
    listed.sort(key=lambda a: (a.name, a.id))
    progress.artifacts = []
    outcomes: list[CellOutcome] = []
    progress.outcomes = outcomes
    imported_at = ledgers.utc_timestamp(ctx.clock())
    prefix = policy.artifact_prefix
    for info in listed:
        artifact = remote.SourceArtifact(artifact_id=info.id, name=info.name, size=info.size_in_bytes,
                                         digest=info.digest, expired=info.expired, run_id=info.run_id,
                                         head_sha=info.head_sha)
        row: tuple[remote.SourceArtifact, str | None, int] = (artifact, None, 0)
        progress.artifacts.append(row)
        with ctx.runtime.group(f"import: artifact {info.name!r} ({info.size_in_bytes:,} bytes)"):
            expected = remote.admit_artifact(policy, source, artifact)
            try:
                data = github_run.download_artifact(api_url, token, info, max_bytes=policy.max_archive_bytes,
                                                    policy=request_policy)
            except Refusal as exc:
                if exc.code != "io.too_large":
                    raise
                raise Refusal("import.unsafe_archive", exc.message, field="size",
                              expected=f"<= {policy.max_archive_bytes}", actual=exc.actual) from None
            archive_sha256 = remote.check_archive_digest(artifact, expected, data)
            archive = extract_zip(data, prefix=prefix)
            found = remote.find_cells(archive, prefix)
            progress.artifacts[-1] = (artifact, archive_sha256, len(found.cells))
            ctx.runtime.log(f"sha256 {archive_sha256} matches the API digest; {len(archive.names)} files, "
                            f"{len(found.cells)} cells under {prefix}")
            host = remote.parse_host(found.host, prefix, policy, source, intent)
            for files in found.cells:
                outcome = CellOutcome(artifact, files.execution_id)
                try:
                    outcome.cell = remote.validate_cell(
                        contract=contract, policy=policy, intent=intent, run=source, artifact=artifact,
                        archive_sha256=archive_sha256, host=host, files=files, archive=archive, prefix=prefix,
                        imported_at=imported_at)
                    outcome.status = READY
                except Refusal as refusal:
                    outcome.refusal = refusal
                outcomes.append(outcome)
    return outcomes


def _apply(ledger: ledgers.Ledger, outcomes: list[CellOutcome]) -> list[CellOutcome]:
    """Apply every valid cell; a cell refused by the ledger (changed measurement) is marked, not raised."""
    for outcome in outcomes:
        if outcome.cell is None:
            continue
        try:
            outcome.status = ledger.add_import(outcome.cell.record, outcome.cell.attempt, outcome.cell.completion)
        except Refusal as refusal:
            outcome.status, outcome.refusal = REFUSED, refusal
    return outcomes


def _refuse_if_any(outcomes: list[CellOutcome]) -> None:
    first = next((o.refusal for o in outcomes if o.refusal is not None), None)
    if first is not None:
        for outcome in outcomes:  # nothing is written: what would have been imported is only ready
            if outcome.status == IMPORTED:
                outcome.status = READY
        raise first


def _commit(ctx: PhaseContext, contract: Contract, path: Path,
            outcomes: list[CellOutcome]) -> ledgers.Transaction[list[CellOutcome]]:
    def transaction(ledger: ledgers.Ledger) -> list[CellOutcome]:
        _apply(ledger, outcomes)
        _refuse_if_any(outcomes)  # aborts the transaction: the ledger file is not touched
        return outcomes

    if any(o.refusal is not None for o in outcomes):
        # Already refused: classify the valid cells against the ledger for the summary (on a copy, no
        # lock, nothing written), then refuse with the first reason.
        current, _ = ledgers.load(path, contract.campaign)
        _apply(current.copy(), outcomes)
        _refuse_if_any(outcomes)
    with ctx.runtime.group(f"import: ledger transaction on {path}"):
        result = ledgers.transact(path, contract.campaign, transaction)
        ctx.runtime.log(f"ledger {'written' if result.changed else 'unchanged'}: sha256 {result.sha256_after}")
    return result


def _write_receipt(ctx: PhaseContext, progress: Progress, path: Path,
                   transaction: ledgers.Transaction[list[CellOutcome]]) -> None:
    assert progress.run is not None and progress.artifacts is not None
    run = progress.run
    document: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "source-run": {"repository": run.repository, "workflow": run.workflow, "ref": run.ref,
                       "run-id": run.run_id, "run-attempt": run.run_attempt, "head-sha": run.head_sha},
        "artifacts": [{"id": a.artifact_id, "name": a.name, "size": a.size, "sha256": sha, "cells": n}
                      for a, sha, n in progress.artifacts],
        "cells": [{"execution-id": o.execution_id, "status": o.status,
                   **({"import-key": o.cell.import_key, "case": o.cell.case, "ordinal": o.cell.ordinal,
                       "result-sha256": o.cell.record["result-sha256"]} if o.cell is not None else {})}
                  for o in transaction.result],
        "ledger": {"path": str(path), "changed": transaction.changed, "sha256-before": transaction.sha256_before,
                   "sha256-after": transaction.sha256_after},
    }
    name = f"import-{run.run_id}-{run.run_attempt}-{ctx.new_uuid()[:8]}.json"
    try:
        ctx.state.write_receipt(name, document)
    except (Refusal, OSError) as exc:
        # The ledger is the record and is already committed; a missing receipt must not turn it into a failure.
        ctx.runtime.annotate("warning", f"the import receipt could not be written: {exc}")


# --- summary ---------------------------------------------------------------------------------------------

def _refused_headline(progress: Progress, refusal: Refusal, path: Path) -> summary.Markdown:
    assert progress.run is not None
    refused = [o for o in progress.outcomes or [] if o.status == REFUSED]
    what = (f"{len(refused)} of {len(progress.outcomes or [])} cells refused" if refused
            else summary.code(refusal.code))
    return summary.Markdown(f"⛔ Import from run {summary.link(f'#{progress.run.run_id}', progress.run.html_url or None)} refused "
            f"({what}); {summary.code(path)} is unchanged.")


def _body(progress: Progress, path: Path, transaction: ledgers.Transaction[list[CellOutcome]] | None) -> str:
    run = progress.run
    assert run is not None
    parts = ["### Source run (provenance from the GitHub API)\n\n", summary.table(("field", "value"), [
        ("repository", run.repository),
        ("workflow", run.workflow),
        ("ref", run.ref),
        ("run", run.run_id),
        ("attempt", run.run_attempt),
        ("head commit", run.head_sha),
        ("event", run.event or None),
    ])]
    if progress.artifacts:
        parts += ["\n### Artifacts\n\n", summary.table(
            ("artifact", "id", "size (bytes)", "sha256 (checked)", "cells"),
            [(a.name, a.artifact_id, a.size, sha, n) for a, sha, n in progress.artifacts])]
    if progress.outcomes:
        icons = {IMPORTED: "✅", DUPLICATE: "🔁", REFUSED: "⛔", READY: "⏸️"}
        rows = []
        for o in progress.outcomes:
            reason = None
            if o.refusal is not None:
                detail = o.refusal.message
                if o.refusal.field is not None:
                    detail += f" ({o.refusal.field}: expected {o.refusal.expected!r}, actual {o.refusal.actual!r})"
                reason = summary.Markdown(f"{summary.code(o.refusal.code)}: {summary.text(detail)}")
            rows.append((f"{icons[o.status]} {o.status}", summary.code(o.execution_id),
                         summary.code(o.cell.case) if o.cell else None,
                         o.cell.ordinal if o.cell else None, o.cell.disposition if o.cell else None,
                         summary.code(o.artifact.name), reason))
        parts += ["\n### Cells\n\n", summary.table(
            ("outcome", "execution", "case", "ordinal", "disposition", "artifact", "reason"), rows)]
    if transaction is not None:
        parts += ["\n### Ledger\n\n", summary.table(("field", "value"), [
            ("path", summary.code(path)),
            ("written", transaction.changed),
            ("sha256 before", transaction.sha256_before or "(new ledger)"),
            ("sha256 after", transaction.sha256_after),
        ])]
    return "".join(parts)
