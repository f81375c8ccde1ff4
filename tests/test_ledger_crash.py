"""Crash consistency: an importer SIGKILLed at random points leaves the old or the new ledger, never a mix.

A forked child process runs ledger transactions back to back (each imports the next cell) and reports every
commit on stdout. The parent kills it at a random instant, many times, and after each kill checks that
the file parses and is byte-equal to the state after the last reported commit or the one after it
(the transaction in flight). The expected states are computed independently in the parent.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from testops_evidence.campaign.ledger import Ledger, read, transact

KILLS = 40
SHA = "0123456789abcdef0123456789abcdef01234567"
CAMPAIGN = "agent-protocol"

def _importer(path: Path, report_fd: int) -> None:
    """The child: import the next cell, report the commit, forever (until killed). Never returns."""
    try:
        while True:
            def apply(ledger: Ledger) -> int:
                n = len(ledger.imports) + 1
                ledger.add_import(*step(n))
                return n

            outcome = transact(path, CAMPAIGN, apply)
            os.write(report_fd, f"{outcome.result}\n".encode())
    finally:
        os._exit(70)  # never fall back into pytest inside the child


def step(n: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The n-th import: a deterministic function of n, so the parent can predict every state."""
    case = f"case-{n % 5}"
    record = {
        "import-key": f"{1000 + n}/1/exec-{n}", "measurement-key": f"nightly/{n:032x}/exec-{n}",
        "case": case, "ordinal": n, "execution-id": f"exec-{n}", "result-sha256": f"{n:064x}",
        "host-sha256": "1" * 64, "definition-sha256": "2" * 64, "archive-sha256": f"{n * 7:064x}",
        "result-path": f"results/exec-{n}/result.json",
        "provenance": {"repository": "acme/agents", "workflow": ".github/workflows/e2e.yml", "ref": "refs/heads/main",
                       "run-id": 1000 + n, "run-attempt": 1, "head-sha": SHA, "artifact-id": n,
                       "artifact-name": f"cell-{n}", "artifact-size": 4096},
        "imported-at": "2026-12-01T11:00:00Z",
    }
    attempt = {"execution-id": f"exec-{n}", "source-revision": SHA, "reserved-at": "2026-12-01T11:00:00Z",
               "started-at": "2026-12-01T10:00:00Z", "profile": {"id": "p"}}
    completion = {"finished-at": "2026-12-01T10:05:00Z", "disposition": "passed", "checks": {"c": True},
                  "usage": {"tokens": n}, "evidence": [record["result-path"]]}
    return record, attempt, completion


class States:
    """The ledger bytes after k imports, computed without the file system."""

    def __init__(self) -> None:
        self.ledger = Ledger.new(CAMPAIGN)
        self.bytes: list[bytes] = [self.ledger.to_bytes()]

    def after(self, k: int) -> bytes:
        while len(self.bytes) <= k:
            self.ledger.add_import(*step(len(self.bytes)))
            self.bytes.append(self.ledger.to_bytes())
        return self.bytes[k]


def test_sigkill_at_random_points_leaves_the_old_or_the_new_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    # Warm (jsonschema loaded, first $ref resolved) before forking, so every child is at work at once.
    Ledger.parse(States().after(1))
    rng = random.Random(20261201)
    states = States()
    committed = 0
    landed = {"old": 0, "new": 0}
    for _ in range(KILLS):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _importer(path, write_fd)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as reports:
            # Let it commit a random number of transactions, then kill after a random delay: the kill
            # lands before, inside or between transactions (one takes 10-30 ms: read, validate, copy,
            # write, fsync, rename, fsync), at a different step each time. Waiting on commits rather than
            # on a clock keeps the test meaningful on a slow disk.
            reported = [int(reports.readline()) for _ in range(rng.randint(0, 2))]
            time.sleep(rng.uniform(0, 0.03))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            reported += [int(line) for line in reports.read().split()]
        if reported:
            committed = reported[-1]
        found = read(path)
        if found is None:  # killed before the first commit ever
            assert committed == 0
            continue
        ledger, data = found  # it parses and validates
        k = len(ledger.imports)
        assert k in (committed, committed + 1), f"ledger has {k} imports, last reported commit {committed}"
        assert data == states.after(k)
        landed["old" if k == committed else "new"] += 1
        committed = k
    assert committed > 0
    # The lock died with its holder, and stale temp files go with the next transaction.
    outcome = transact(path, CAMPAIGN, lambda ledger: ledger.add_import(*step(len(ledger.imports) + 1)))
    assert outcome.changed and outcome.result == "imported"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json", "ledger.json.lock"]
    assert path.read_bytes() == states.after(committed + 1)
    print(f"kills: {KILLS}; ledger at the last reported commit: {landed['old']}, "
          f"at the unreported in-flight commit: {landed['new']}; imports: {committed}")
