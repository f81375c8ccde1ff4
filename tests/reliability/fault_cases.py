"""The fault matrix as data: every fault kind of the test servers against every phase that talks to them,
with the outcome the design defines. test_fault_matrix.py runs each case; scripts/gen_security_tables.py
writes the table in docs/security.md from this same list (and a test keeps the two equal).

No imports beyond the standard library: the docs generator loads this module on its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fault:
    key: str
    title: str
    kind: str  # the test servers' fault kind
    meaning: str
    status: int | None = None
    retry_after: str | None = None


FAULTS: dict[str, Fault] = {f.key: f for f in (
    Fault("5xx", "5xx", "status", "every answer is HTTP 503, before the server processes anything", 503),
    Fault("429", "429 + Retry-After", "status", "every answer is HTTP 429 with `Retry-After: 2`", 429, "2"),
    Fault("timeout", "timeout", "delay", "the server processes the request, then answers after the read timeout"),
    Fault("truncated", "truncated body", "truncate", "the full Content-Length is declared, half the body is sent"),
    Fault("oversized", "oversized body", "oversize", "a 256 KiB (GitHub: 4 MiB) answer over a 64 KiB cap"),
    Fault("invalid-json", "invalid JSON", "invalid_json", "HTTP 200 with a body that is not JSON"),
    Fault("duplicates", "duplicates", "duplicate", "a listing repeats an item"),
    Fault("drop", "commit-then-drop", "drop", "the server processes the request, then closes without an answer"),
    Fault("drip", "dripped answer", "drip", "the server processes the request, then sends its answer one byte per "
          "half read timeout, so no single read times out"),
)}

PHASES = ("bootstrap", "launch", "select", "upload", "verify", "reconcile", "guard", "import")
SERVERS = {"bootstrap": "TestOps", "launch": "TestOps", "select": "TestOps", "upload": "TestOps", "verify": "TestOps",
           "reconcile": "TestOps", "guard": "GitHub", "import": "GitHub"}


@dataclass(frozen=True)
class FaultCase:
    phase: str
    fault: str
    target: str  # "METHOD route": a route regex on the TestOps server, a route key on the GitHub server
    exit_code: int
    error_code: str | None  # None: the phase succeeds
    mutations: int  # mutating requests sent under the fault; the test also proves none is sent twice
    outcome: str  # what happens, for the table
    pending: tuple[str, ...] = ()  # once-markers left without a completion record (what reconcile resolves)

    @property
    def id(self) -> str:
        return f"{self.phase}-{self.fault}"


@dataclass(frozen=True)
class NotApplicable:
    phase: str
    fault: str
    reason: str


_U = "testops.uncertain"
_RETRIED = "retried once, then"
_REFUSED_UNSENT = "refused; the mutation was not processed and is not re-sent"
_UNCERTAIN = "uncertain: may have happened, not re-sent; the once-marker stays for reconcile"


def _mutation_cases(phase: str, target: str, sent: int, stage: str) -> list[FaultCase]:
    """A phase's first mutation under each fault: a mutation is never retried, whatever the answer."""
    pending = (stage,)
    five = (_U, _UNCERTAIN) if phase == "upload" else ("testops.http_503", "refused (gateway error); the "
                                                       "once-marker stays, so a re-run cannot re-send it blindly")
    return [
        FaultCase(phase, "5xx", target, 4, five[0], sent, five[1], pending),
        FaultCase(phase, "429", target, 4, "testops.http_429", sent, _REFUSED_UNSENT, pending),
        FaultCase(phase, "timeout", target, 4, _U, sent, _UNCERTAIN, pending),
        FaultCase(phase, "truncated", target, 4, _U, sent, _UNCERTAIN, pending),
        FaultCase(phase, "oversized", target, 4, _U, sent, _UNCERTAIN + " (2xx, but the body cannot be read)",
                  pending),
        FaultCase(phase, "invalid-json", target, 4, _U, sent, _UNCERTAIN + " (2xx, but the body cannot be read)",
                  pending),
        FaultCase(phase, "drop", target, 4, _U, sent, _UNCERTAIN, pending),
        FaultCase(phase, "drip", target, 4, _U, sent, _UNCERTAIN + " (cut off at the answer deadline)", pending),
    ]


def _read_cases(phase: str, target: str) -> list[FaultCase]:
    """A phase's key read under each fault: an idempotent GET is retried (one retry in the matrix)."""
    return [
        FaultCase(phase, "5xx", target, 4, "testops.http_503", 0, f"{_RETRIED} refused; nothing written"),
        FaultCase(phase, "429", target, 4, "testops.http_429", 0, f"{_RETRIED} refused (Retry-After honoured)"),
        FaultCase(phase, "timeout", target, 4, "testops.transport", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "truncated", target, 4, "testops.transport", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "oversized", target, 4, "testops.response_too_large", 0,
                  "refused while streaming, at the cap"),
        FaultCase(phase, "invalid-json", target, 4, "testops.response_invalid", 0, "refused"),
        FaultCase(phase, "drop", target, 4, "testops.transport", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "drip", target, 4, "testops.deadline", 0,
                  f"each attempt cut off at the answer deadline; {_RETRIED} refused"),
    ]


def _github_cases(phase: str, target: str) -> list[FaultCase]:
    return [
        FaultCase(phase, "5xx", target, 4, "github.http_503", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "429", target, 4, "github.http_429", 0, f"{_RETRIED} refused (Retry-After honoured)"),
        FaultCase(phase, "timeout", target, 4, "github.transport", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "truncated", target, 4, "github.transport", 0, "refused"),
        FaultCase(phase, "invalid-json", target, 4, "github.response_invalid", 0, "refused"),
        FaultCase(phase, "drop", target, 4, "github.transport", 0, f"{_RETRIED} refused"),
        FaultCase(phase, "drip", target, 4, "github.timeout", 0, "cut off at the answer deadline; not retried"),
    ]


_RESEND = ("launch", "launch.resend")

CASES: tuple[FaultCase, ...] = (
    *_mutation_cases("bootstrap", "PATCH /testcase/195", 1, "bootstrap-case-195"),
    FaultCase("bootstrap", "duplicates", "GET /testcase/__search", 0, None, 2,
              "a case listed twice is one case: one PATCH and one POST, as without the fault"),
    # launch sends the plan sync (which only recomputes the plan), then the run: two requests, each once
    *_mutation_cases("launch", r"POST /testplan/\d+/run", 2, "launch"),
    FaultCase("launch", "duplicates", "GET /testplan", 0, None, 2,
              "the plan listed twice is one plan (same id): synced once, launched once"),
    *_read_cases("select", r"GET /jobrun/\d+"),
    FaultCase("select", "duplicates", r"GET /jobrun/\d+/plan", 3, "selection.duplicate_case", 0,
              "a case planned twice is refused; no selection is written"),
    *_mutation_cases("upload", "POST /upload/test-result", 3, "upload-chunk-1"),
    *_read_cases("verify", "GET /testresult"),
    FaultCase("verify", "duplicates", "GET /testresult", 3, "verify.duplicate", 0,
              "a result listed twice is refused (exactly once is the rule)"),
    # reconcile: the launch answered 503 unprocessed, so it is proved absent and re-sent once (resume).
    FaultCase("reconcile", "5xx", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the one re-send fails: still uncertain, never re-sent again", _RESEND),
    FaultCase("reconcile", "429", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the one re-send is refused: still uncertain, never re-sent again", _RESEND),
    FaultCase("reconcile", "timeout", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's outcome is unknown: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "truncated", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's outcome is unknown: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "oversized", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's answer is unreadable: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "invalid-json", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's answer is unreadable: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "drop", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's outcome is unknown: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "drip", r"POST /testplan/\d+/run", 4, "reconcile.unresolved", 1,
              "the re-send's answer is cut off: its own marker stays; never re-sent again", _RESEND),
    FaultCase("reconcile", "duplicates", "GET /launch/__search", 0, None, 0,
              "(launch made, answer lost) the launch found twice is one launch: done, nothing re-sent"),
    *_github_cases("guard", "GET run"),
    FaultCase("guard", "oversized", "GET run", 4, "github.response_invalid", 0,
              "read whole (no cap on REST JSON, see the limits), then refused by shape"),
    *_github_cases("import", "GET run_artifacts"),
    FaultCase("import", "oversized", "GET blob", 3, "import.unsafe_archive", 0,
              "the zip download is refused at the archive cap; the ledger is untouched"),
    FaultCase("import", "duplicates", "GET run_artifacts", 0, None, 0,
              "an artifact listed twice is imported once: the second copy's cells are duplicates in the ledger"),
)

NOT_APPLICABLE: tuple[NotApplicable, ...] = (
    NotApplicable("upload", "duplicates", "upload reads no listing; each answer it reads is one object"),
    NotApplicable("guard", "duplicates", "guard reads one object (the run), no listing"),
)
