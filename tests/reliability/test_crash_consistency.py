"""Crash consistency: a writer SIGKILLed at random points never leaves a torn file.

For each target a forked child writes documents back to back with the real code — receipts
(``StateDir.write_receipt``), selections (``selection.write_selection``), whole exports (the export phase:
results directory and receipt), ledger transactions (``ledger.transact``) — and reports each completed
write on a pipe. The parent lets it complete a random number of writes, kills it with SIGKILL after a
random delay (a seeded schedule; where the kill lands still varies), and checks every file: absent, or
complete and valid (byte-equal to what the writer meant, or accepted by its own reader). Hidden temp
files (``.name.…``) may stay behind a kill; they are never read as documents, and are counted.

tests/test_ledger_crash.py proves more for the ledger (old or new state, byte for byte, and recovery).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence_support import (
    actions_env,
    cell,
    make_selection,
    small_contract,
    uuid_factory,
    write_cells,
    write_contract,
)
from helpers import FakeClock, run_mode
from reliability.integrity import torn_documents
from test_ledger_crash import step
from test_selection_support import big_document
from testops_evidence.campaign.ledger import Ledger, read, transact
from testops_evidence.campaign.receipt import check_tree, load_receipt
from testops_evidence.campaign.selection import build_selection, load_selection, selection_bytes, write_selection
from testops_evidence.context import env_context
from testops_evidence.contract import contract_from_document
from testops_evidence.safeio import StateDir, pretty_json, sha256_bytes

KILLS = 30  # per target
Report = Callable[[int], None]


@dataclass
class Tally:
    name: str
    kills: int = 0
    completed: int = 0  # writes the children reported done before they died
    in_flight_complete: int = 0  # kills that came just after a write finished but before it was reported
    temp_leftovers: int = 0  # hidden temp files kills left behind (never read as documents)

    def line(self) -> str:
        return (f"{self.name}: {self.kills} kills, {self.completed} writes completed, {self.in_flight_complete} "
                f"unreported writes found complete, {self.temp_leftovers} hidden temp files left, 0 torn")


def hammer(name: str, directory: Path, child: Callable[[Path, int, Report], None],
           check: Callable[[Path, list[int], int], bool], *, window: float) -> Tally:
    """Fork ``child(directory, first, report)`` KILLS times; it writes items ``first, first + 1, ...`` and
    reports each. After the kill, ``check(directory, reported, in_flight)`` validates every file and says
    whether the unreported in-flight item was found complete. Items never repeat across children."""
    rng = random.Random(name)
    tally = Tally(name)
    first = 0
    for _ in range(KILLS):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: write until killed, never return into pytest
            os.close(read_fd)
            try:
                child(directory, first, lambda item, fd=write_fd: os.write(fd, f"{item}\n".encode()) and None)
            finally:
                os._exit(70)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as reports:
            # A random number of completed writes, then a random delay: the kill lands before, inside
            # or between writes, at a different step each time, whatever the disk's speed.
            reported = [int(reports.readline()) for _ in range(rng.randint(0, 2))]
            time.sleep(rng.uniform(0, window))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            reported += [int(line) for line in reports.read().split()]
        in_flight = (reported[-1] + 1) if reported else first
        tally.kills += 1
        tally.completed += len(reported)
        tally.in_flight_complete += check(directory, reported, in_flight)
        first = in_flight + 1
    tally.temp_leftovers = sum(1 for p in directory.rglob(".*"))
    assert tally.completed > 0, f"{name}: no child completed a write; widen the window"
    print(tally.line())
    return tally


def _complete(present: bool, item: int, reported: list[int], in_flight: int) -> bool:
    """A file is present exactly when its write was reported, except the in-flight one, which may be."""
    if item in reported:
        assert present, f"item {item} was reported written but is missing"
    elif item != in_flight:
        assert not present, f"item {item} exists but was never written"
    return present and item == in_flight


# --- receipts ------------------------------------------------------------------------------------------


def receipt_document(item: int) -> dict[str, Any]:
    # About 200 KiB, so a kill often lands inside the write.
    return {"schema": "crash-test/receipt", "item": item, "rows": [{"n": i, "text": "x" * 60} for i in range(2500)]}


def test_receipt_writes_are_never_torn(tmp_path: Path) -> None:
    def child(directory: Path, first: int, report: Report) -> None:
        state = StateDir(directory)
        item = first
        while True:
            state.write_receipt(f"receipt-{item}.json", receipt_document(item))
            report(item)
            item += 1

    def check(directory: Path, reported: list[int], in_flight: int) -> bool:
        landed = False
        for item in [*reported, in_flight]:
            path = directory / f"receipt-{item}.json"
            landed |= _complete(path.exists(), item, reported, in_flight)
            if path.exists():
                assert path.read_bytes() == pretty_json(receipt_document(item)), f"receipt {item} is torn"
                assert path.stat().st_mode & 0o777 == 0o600
        return landed

    hammer("receipt", tmp_path / "state", child, check, window=0.02)
    assert torn_documents(tmp_path) == []


# --- selections ------------------------------------------------------------------------------------------


def drop_crash_link(path: Path) -> None:
    """No kill leaves a second link: write_once renames its complete temp file into place in one system call
    (renameat2 RENAME_NOREPLACE). Where that is not available, the fallback's crash leftover (a hidden
    ``.<name>.<pid>.<hex>.tmp`` link) is removed by the reader itself (safeio), so a check reads the file
    as every phase does."""
    from testops_evidence.safeio import create_once_mechanism

    if create_once_mechanism() != "link":
        assert path.stat().st_nlink == 1, f"{path} has {path.stat().st_nlink} links after a kill"


def test_selection_writes_are_never_torn(tmp_path: Path) -> None:
    # A 2,000-case selection (about 1 MiB of canonical JSON), as select writes it.
    document = big_document(2000)
    contract = contract_from_document(document)
    data = selection_bytes(build_selection(contract, env_context(actions_env()), list(contract.cases),
                                           backend="files", source="contract"))
    digest = sha256_bytes(data)
    out = tmp_path / "out"
    out.mkdir()

    def child(directory: Path, first: int, report: Report) -> None:
        item = first
        while True:
            write_selection(directory / f"selection-{item}.json", data)
            report(item)
            item += 1

    def check(directory: Path, reported: list[int], in_flight: int) -> bool:
        landed = False
        for item in [*reported, in_flight]:
            path = directory / f"selection-{item}.json"
            landed |= _complete(path.exists(), item, reported, in_flight)
            if path.exists():
                drop_crash_link(path)
                assert load_selection(path, digest).count == 2000  # re-hashed and schema-checked
        return landed

    hammer("selection", out, child, check, window=0.05)


# --- exports ---------------------------------------------------------------------------------------------


def test_exports_are_never_torn(tmp_path: Path) -> None:
    contract = small_contract()
    env = actions_env()
    selection, digest = make_selection(tmp_path, contract, env)
    write_cells(tmp_path / "cells", [cell(contract, "get-task-context"),
                                     cell(contract, "budget-stop", disposition="behavior_failure",
                                          failed=["spend-reported"])], digest)
    options = {"contract": str(write_contract(contract, tmp_path / "contract.json")),
               "selection-path": str(selection), "selection-sha256": digest,
               "cell-results": str(tmp_path / "cells")}
    out = tmp_path / "out"
    out.mkdir()

    def export(directory: Path, item: int) -> int:
        clock = FakeClock(1_796_119_500.0)
        run = run_mode("export", directory / f"work-{item}", {**options, "results-dir": str(directory / f"results-{item}"),
                                                             "state-dir": str(directory / f"state-{item}")},
                       env, new_uuid=uuid_factory(), clock=clock.time, monotonic=clock.monotonic, sleep=clock.sleep)
        return run.exit_code

    def child(directory: Path, first: int, report: Report) -> None:
        item = first
        while True:
            (directory / f"work-{item}").mkdir()
            assert export(directory, item) == 1  # complete evidence, one case not passed
            report(item)
            item += 1

    def check(directory: Path, reported: list[int], in_flight: int) -> bool:
        landed = False
        for item in [*reported, in_flight]:
            results = directory / f"results-{item}"
            receipt = directory / f"results-{item}-receipt.json"
            if receipt.exists():
                # The receipt is written last: with it, every file it lists is there with its digest.
                drop_crash_link(receipt)
                assert check_tree(results, load_receipt(receipt), "upload.results_invalid") > 0
            else:
                assert item not in reported, f"export {item} was reported but has no receipt"
                # Killed after the rename, before the receipt: the directory is whole (all or nothing),
                # and without a receipt nothing will publish it.
                if results.exists():
                    assert len(list(results.iterdir())) == 2 * 3 + 2
                    assert torn_documents(results) == []
            landed |= _complete(receipt.exists(), item, reported, in_flight)
        return landed

    hammer("export", out, child, check, window=0.1)


# --- ledger ----------------------------------------------------------------------------------------------


def test_ledger_transactions_are_never_torn(tmp_path: Path) -> None:
    path = tmp_path / "ledger" / "campaign-ledger.json"
    path.parent.mkdir()
    Ledger.parse(Ledger.new("agent-protocol").to_bytes())  # warm the schema before forking

    def child(_directory: Path, first: int, report: Report) -> None:
        while True:
            outcome = transact(path, "agent-protocol",
                               lambda ledger: ledger.add_import(*step(len(ledger.imports) + 1)))
            assert outcome.changed
            report(first)
            first += 1

    committed = [0]  # transactions reported by every child so far

    def check(_directory: Path, reported: list[int], _in_flight: int) -> bool:
        committed[0] += len(reported)
        found = read(path)
        if found is None:
            assert committed[0] == 0
            return False
        ledger, _data = found  # it parses and validates
        count = len(ledger.imports)
        assert count in (committed[0], committed[0] + 1), f"{count} imports, {committed[0]} reported"
        landed = count == committed[0] + 1
        committed[0] = count
        return landed

    hammer("ledger", path.parent, child, check, window=0.03)
    outcome = transact(path, "agent-protocol", lambda ledger: ledger.add_import(*step(len(ledger.imports) + 1)))
    assert outcome.changed  # the lock died with its holder; the next transaction proceeds
    assert sorted(p.name for p in path.parent.iterdir()) == ["campaign-ledger.json", "campaign-ledger.json.lock"]
