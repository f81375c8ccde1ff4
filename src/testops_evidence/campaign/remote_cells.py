"""Remote cells join their campaign: the ledger's completed remote attempts as cells of the export.

``import`` admits a remote cell into the campaign ledger only with provenance the Actions API vouches for
(docs/import.md). Export, given that ledger (``ledger``, its digest ``ledger-sha256`` travelling as the
import job's output like every document that crosses jobs), turns each completed attempt of a case the
contract says is ``measured-by: remote`` into a cell of its trial:

* the **ledger's ordinal is the trial**: ordinals 1..k count for a case measured k times (1 for a case
  measured once); a completed attempt with a higher ordinal, an attempt only reserved, or one of a case
  this run's workers measure is **not counted** and listed as such;
* the cell is then admitted like any other: it must have measured this campaign's commit and profile,
  exactly the case's checks, and no ``passed`` without every check passed (a remote cell of another commit
  makes its trial broken, ``export.cell_binding``); its verdict, trials policy, usage and budget are the
  same as a worker's;
* its **provenance** — the import key and measurement key, the source repository, workflow, ref, run and
  attempt, the artifact's id, name and SHA-256, and the result, host and definition digests — goes into the
  evidence, the Allure result (description, a link to the source run, labels) and the receipt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from testops_evidence.campaign.cells import CELL_SCHEMA, CellFile, adapted_cell
from testops_evidence.campaign.ledger import Ledger
from testops_evidence.contract import Case

ORIGIN = "remote"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class NotCounted:
    case: str
    ordinal: int
    why: str


def attempt_id(import_key: str) -> str:
    """A safe attempt id for a remote cell: ``remote-<run>-<attempt>-<execution>``."""
    return ("remote-" + _UNSAFE.sub("-", import_key))[:200]


def provenance(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an import record says about where a remote cell came from (all of it from the API and digests)."""
    return {
        "import-key": record["import-key"], "measurement-key": record["measurement-key"],
        "execution-id": record["execution-id"], "result-path": record["result-path"],
        "result-sha256": record["result-sha256"], "host-sha256": record["host-sha256"],
        "definition-sha256": record["definition-sha256"], "archive-sha256": record["archive-sha256"],
        "imported-at": record["imported-at"], **{f"source-{k}": v for k, v in record["provenance"].items()},
    }


def ledger_cells(ledger: Ledger, cases: Iterable[Case], selection_sha256: str,
                 ledger_source: str) -> tuple[list[CellFile], list[NotCounted]]:
    """The cells the ledger holds for the selected cases, and the attempts it holds that do not count."""
    records = {str(record["import-key"]): record for record in ledger.imports}
    selected = {case.key: case for case in cases}
    files: list[CellFile] = []
    not_counted: list[NotCounted] = []
    for key, scenario in sorted(ledger.document["scenarios"].items()):
        case = selected.get(key)
        for attempt in scenario["attempts"]:
            ordinal = int(attempt["ordinal"])
            if case is None:
                continue  # not selected in this campaign (a narrower selection): nothing to say about it
            why = None
            if not case.remote:
                why = "the contract says this case is measured by this run's workers"
            elif ordinal > case.trials.count:
                why = f"ordinal {ordinal} is beyond the case's {case.trials.count} trial(s)"
            elif attempt["state"] != "completed" or attempt.get("completion") is None:
                why = "reserved in the ledger but never completed"
            elif attempt.get("import-key") not in records:
                why = "not a remote import"
            if why is not None:
                not_counted.append(NotCounted(key, ordinal, why))
                continue
            record = records[str(attempt["import-key"])]
            files.append(_cell_file(case, attempt, record, selection_sha256, ledger_source))
    return files, not_counted


def _cell_file(case: Case, attempt: Mapping[str, Any], record: Mapping[str, Any], selection_sha256: str,
               ledger_source: str) -> CellFile:
    completion = attempt["completion"]
    document: dict[str, Any] = {
        "schema": CELL_SCHEMA,
        # Admitted into this selection by export itself: a remote cell is bound by its import, not by a worker.
        "selection-sha256": selection_sha256,
        "case": case.key,
        "attempt-id": attempt_id(str(attempt["import-key"])),
        "disposition": completion["disposition"],
        "started-at": attempt["started-at"],
        "finished-at": completion["finished-at"],
        "source-sha": attempt["source-revision"],
        "profile": dict(attempt["profile"]),
        # The checks as the ledger recorded them (the contract's order first): export's check binding then
        # says which are missing or extra, exactly as for a worker's cell.
        "checks": [{"id": check, "passed": bool(completion["checks"][check])}
                   for check in sorted(completion["checks"], key=lambda c: (c not in case.checks, list(case.checks).index(c)
                                                                            if c in case.checks else 0, c))],
    }
    if completion.get("usage"):
        document["usage"] = dict(completion["usage"])
    if case.trials.repeated:
        document["trial"] = int(attempt["ordinal"])
    source = f"{ledger_source}#{case.key}/{attempt['ordinal']}"
    cell = adapted_cell(document, source, [(str(record["result-path"]), str(record["result-sha256"]))], ORIGIN)
    cell = replace(cell, provenance=provenance(record))
    return CellFile(source, case=case.key, adapted=cell, remote=True)
