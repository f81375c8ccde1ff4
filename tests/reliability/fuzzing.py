"""Fuzzing support: the two profiles, the one invariant, mutation strategies and the example counter.

**Profiles** (environment variable ``TESTOPS_EVIDENCE_FUZZ``):

* ``ci`` (default) — few examples per target, derandomized (the same examples on every run, so CI is
  deterministic); the whole fuzz set stays well under a minute on 2 cores.
* ``long`` — at least 10,000 examples per target, random seeds; ``scripts/fuzz_long.sh`` runs it and
  records the counts. ``TESTOPS_EVIDENCE_FUZZ_EXAMPLES`` overrides the count of either profile.

**The invariant**: whatever the bytes, a parser of untrusted input either returns or raises a
:class:`Refusal` with a registered code (never ``internal.error``) that the runner can report: the
refusal is rendered through the real ``report_refusal`` (outputs, annotation, summary, failure.json)
and failure.json must read back as JSON. Any other exception fails the test with hypothesis' minimal
falsifying example.

**Counting**: the ``fuzz`` fixture counts examples, acceptances and refusals per target; with
``TESTOPS_EVIDENCE_FUZZ_REPORT=<file>`` it appends one JSON line per target (the long run's figures).
"""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from reliability.fuzz_targets import FUZZ_TARGETS
from testops_evidence.actions import Runtime
from testops_evidence.errors import Refusal, is_registered
from testops_evidence.runner import report_refusal
from testops_evidence.safeio import StateDir

PROFILE_VAR = "TESTOPS_EVIDENCE_FUZZ"
EXAMPLES_VAR = "TESTOPS_EVIDENCE_FUZZ_EXAMPLES"
REPORT_VAR = "TESTOPS_EVIDENCE_FUZZ_REPORT"
PROFILES = {"ci": 40, "long": 10_000}


def profile() -> str:
    name = os.environ.get(PROFILE_VAR, "ci").strip() or "ci"
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_VAR} must be one of {sorted(PROFILES)}, not {name!r}")
    return name


def max_examples(scale: float = 1.0) -> int:
    """Examples per target. ``scale`` trims the CI count of targets that do real HTTP per example; the long
    profile never scales below its floor."""
    override = os.environ.get(EXAMPLES_VAR, "").strip()
    if override:
        return int(override)
    if profile() == "long":
        return PROFILES["long"]
    return max(5, int(PROFILES["ci"] * scale))


def fuzz_settings(scale: float = 1.0) -> settings:
    ci = profile() == "ci"
    return settings(
        max_examples=max_examples(scale),
        deadline=None,  # no wall-clock limits: a slow machine must not fail a correct parser
        derandomize=ci,
        database=None,  # nothing written into the working tree
        print_blob=True,
        # Strategies here build whole documents; a function-scoped fixture (the counter) is meant to
        # outlive the examples.
        suppress_health_check=list(HealthCheck),
    )


# --- the invariant -------------------------------------------------------------------------------------

_SCRATCH: list[Path] = []


def _scratch() -> Path:
    if not _SCRATCH:
        # failure.json is written with fsync; on tmpfs that costs nothing, on a disk ~10 ms per refusal.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="fuzz-report-", dir=shm)))
    return _SCRATCH[0]


def cleanup_scratch() -> None:
    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)


def check_reportable(refusal: Refusal, mode: str = "fuzz") -> None:
    """The refusal is one the runner reports cleanly: a registered code, a defined exit code, and every
    channel written (output, annotation, summary, failure.json) without an exception."""
    assert is_registered(refusal.code), refusal.code
    assert refusal.code != "internal.error", str(refusal)
    assert refusal.exit_code in (2, 3, 4), (refusal.code, refusal.exit_code)
    scratch = _scratch()
    output, summary_file = scratch / "output", scratch / "summary.md"
    for path in (output, summary_file):
        path.unlink(missing_ok=True)
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary_file)}
    runtime = Runtime(env, stdout=io.StringIO())
    state = StateDir(scratch / "state")
    assert report_refusal(mode, refusal, runtime, state) == refusal.exit_code
    failure = json.loads((scratch / "state" / "failure.json").read_text(encoding="utf-8"))
    assert failure["code"] == refusal.code
    assert output.read_text(encoding="utf-8").startswith(f"error-code={refusal.code}")
    summary_file.read_text(encoding="utf-8")  # valid UTF-8


@dataclass
class Target:
    name: str
    expect_accepted: bool = True
    examples: int = 0
    accepted: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    @contextmanager
    def example(self, mode: str = "fuzz") -> Iterator[None]:
        """One example: a Refusal ends it (checked reportable); anything else escapes and fails."""
        self.examples += 1
        try:
            yield
        except Refusal as refusal:
            check_reportable(refusal, mode)
            self.refusals[refusal.code] += 1
        else:
            self.accepted += 1

    def record(self) -> dict[str, Any]:
        return {"target": self.name, "profile": profile(), "examples": self.examples, "accepted": self.accepted,
                "refused": sum(self.refusals.values()), "codes": dict(self.refusals.most_common(8)),
                "seconds": round(time.monotonic() - self.started, 2)}


class Targets:
    def __init__(self) -> None:
        self.targets: dict[str, Target] = {}

    def target(self, name: str, *, expect_accepted: bool = True) -> Target:
        assert name in FUZZ_TARGETS, f"fuzz target {name!r} is not listed in fuzz_targets.py (docs/security.md)"
        if name not in self.targets:
            self.targets[name] = Target(name, expect_accepted)
        return self.targets[name]

    def finish(self) -> None:
        report = os.environ.get(REPORT_VAR, "").strip()
        for target in self.targets.values():
            assert target.examples > 0, f"fuzz target {target.name} ran no example"
            if target.expect_accepted:
                # The seeds are valid: a target that never accepts anything exercises only its first check.
                assert target.accepted > 0, f"fuzz target {target.name} accepted no example: {target.record()}"
            if report:
                with open(report, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(target.record(), sort_keys=True) + "\n")


# --- strategies ----------------------------------------------------------------------------------------

INTERESTING_STRINGS = (
    "", " ", "a", "..", "../../etc/passwd", "/etc/passwd", "a/../../b", "C:\\x", "\x00", "\ud800", "\u202e",
    "x" * 5000, "%0A::error::injected", "${{ secrets.TOKEN }}", "ALLURE_TOKEN", "1", "-1", "0", "1e309",
    "true", "null", "NaN", "0123456789abcdef0123456789abcdef01234567", "sha256:" + "0" * 64,
    # Round two (#14): extreme times, names ending in a line break.
    "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59.999999Z",
    "0000-01-01T00:00:00Z", "2026-12-01T10:00:00+99:00", "a-result.json\n", "get-task-context\n", "x\n",
)
INTERESTING_NUMBERS = (0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 1.5, -0.0, 1e308, True, False, None)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40),
    st.sampled_from(INTERESTING_STRINGS), st.sampled_from(INTERESTING_NUMBERS),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=12), children, max_size=4)),
    max_leaves=12,
)


def _locations(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _locations(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _locations(value, (*path, index))


def _keys(doc: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(doc, dict):
        found |= set(doc)
        for value in doc.values():
            found |= _keys(value)
    elif isinstance(doc, list):
        for value in doc:
            found |= _keys(value)
    return found


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


@st.composite
def mutated_json(draw: st.DrawFn, seed: Any, max_mutations: int = 3) -> Any:
    """``seed`` with up to ``max_mutations`` structural changes: a value replaced (by arbitrary JSON or an
    interesting value), a key or item deleted, a key added (often one the document uses elsewhere), or an
    item duplicated. Zero mutations (the valid seed) is one of the outcomes."""
    doc = copy.deepcopy(seed)
    known = sorted(_keys(seed)) or ["x"]
    for _ in range(draw(st.integers(0, max_mutations))):
        path = draw(st.sampled_from(list(_locations(doc))))
        node = _get(doc, path)
        op = draw(st.sampled_from(("replace", "interesting", "delete", "add", "duplicate")))
        if op == "replace":
            doc = _set(doc, path, draw(json_values))
        elif op == "interesting":
            doc = _set(doc, path, draw(st.sampled_from(INTERESTING_STRINGS + INTERESTING_NUMBERS)))
        elif op == "delete" and path:
            del _get(doc, path[:-1])[path[-1]]
        elif op == "add" and isinstance(node, dict):
            node[draw(st.one_of(st.sampled_from(known), st.text(max_size=8)))] = draw(json_values)
        elif op == "add" and isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), draw(json_values))
        elif op == "duplicate" and isinstance(node, list) and node:
            node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        elif op == "duplicate" and isinstance(node, str):
            doc = _set(doc, path, node * 2)
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, seed: bytes, max_mutations: int = 4) -> bytes:
    """``seed`` with byte-level damage: flips, overwrites, truncation, insertions, deletions, repeats."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, max_mutations))):
        op = draw(st.sampled_from(("flip", "set", "truncate", "insert", "delete", "repeat")))
        if not data:
            op = "insert"
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[pos] = draw(st.sampled_from((0, 0x22, 0x2F, 0x5C, 0x7B, 0x7D, 0x80, 0xC3, 0xED, 0xFF)))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 32))]
        else:
            end = min(len(data), pos + draw(st.integers(1, 64)))
            data[pos:pos] = data[pos:end]
    return bytes(data)


# Tokens json.dumps cannot write from a Python value (or writes though JSON forbids them): integers past
# Python's 4,300-digit limit and past 64 bits, NaN and the infinities, floats that overflow.
RAW_TOKENS = ("9" * 4400, "-" + "9" * 5000, "18446744073709551616", "9223372036854775808", "1e999", "-1e400",
              "NaN", "Infinity", "-Infinity")
_MARKER = "\u0000raw-token\u0000"


@st.composite
def raw_token_json(draw: st.DrawFn, seed: Any) -> bytes:
    """``seed`` (mutated) with one value replaced by a raw token from :data:`RAW_TOKENS`."""
    doc = draw(mutated_json(seed, max_mutations=1))
    path = draw(st.sampled_from(list(_locations(doc))))
    text = json.dumps(_set(doc, path, _MARKER))
    return text.replace(json.dumps(_MARKER), draw(st.sampled_from(RAW_TOKENS)), 1).encode("utf-8")


@st.composite
def duplicate_key_json(draw: st.DrawFn, seed: Any) -> bytes:
    """``seed`` (mutated) with one object given a key twice, the second time with another value: a
    last-wins reader and a first-wins reader would see two documents."""
    doc = draw(mutated_json(seed, max_mutations=1))
    objects = [path for path in _locations(doc) if isinstance(_get(doc, path), dict) and _get(doc, path)]
    if not objects:
        return json_bytes(doc)
    node = _get(doc, draw(st.sampled_from(objects)))
    key = draw(st.sampled_from(sorted(node)))
    node[_MARKER] = draw(json_values)
    return json.dumps(doc).replace(json.dumps(_MARKER), json.dumps(key), 1).encode("utf-8")


def json_bytes(value: Any) -> bytes:
    """JSON text as an attacker may write it (NaN and lone surrogates included, as json.dumps allows)."""
    return json.dumps(value).encode("utf-8")


def document_bytes(seed: Any) -> st.SearchStrategy[bytes]:
    """Bytes of a JSON document: a mutated seed (structure), damaged seed bytes, or arbitrary JSON/bytes."""
    raw = json_bytes(seed)
    return st.one_of(
        mutated_json(seed).map(json_bytes),
        mutated_bytes(raw),
        raw_token_json(seed),
        duplicate_key_json(seed),
        json_values.map(json_bytes),
        st.binary(max_size=256),
    )
