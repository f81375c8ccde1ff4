"""JUnit XML → outcomes, parsed with ``xml.etree`` and hardened by hand.

**What counts as a run.** JUnit has no single standard; producers mark a test that did not run in
different ways, and every one of them must fail closed (a test that did not run never makes a check
pass). A ``<testcase>`` is:

* *errored* — an ``<error>`` child, or a ``status``/``result`` attribute of the error family
  (``error``, ``errored``, ``broken``: tst, bazel);
* else *failed* — a ``<failure>`` child, or a ``status``/``result`` of the failure family (``failed``,
  ``failure``, ``fail``: NUnit, TRX and xUnit converters, tst);
* else *not run* — a ``<skipped>`` child (pytest, Surefire, jest-junit, mocha, go-junit-report), or a
  ``status`` or ``result`` attribute that is neither a run nor a failure: ``skipped``, ``disabled``
  (tst), ``notrun`` and ``suppressed`` (GoogleTest's disabled tests), ``ignored``, ``inconclusive``,
  ``notrunnable`` (NUnit), **and any value this parser does not know**;
* else *passed* — no such child and, when present, ``status`` in ``run``, ``passed``, ``pass``,
  ``success``, ``succeeded``, ``ok``, ``executed`` and ``result`` in ``completed``, ``passed``,
  ``success`` (case-insensitive).

``defusedxml`` is not a dependency, and expat expands internal entities (the "billion laughs"), so the
input is refused before parsing if it declares a DOCTYPE or an ENTITY; its size, nesting depth and
element count are capped while it is parsed incrementally. Only UTF-8 (or ASCII) input is accepted, so
the byte scan for declarations cannot be evaded by another encoding.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from testops_evidence.campaign.cells import in_time_range
from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import ERROR, FAILED, PASSED, SKIPPED, Outcome
from testops_evidence.readers.integers import ascii_int

JUNIT_LIMIT = 32 * 1024 * 1024
MAX_DEPTH = 32
MAX_ELEMENTS = 500_000
_CHUNK = 64 * 1024
_ENCODING = re.compile(rb"^\s*<\?xml[^>]*encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
_BOM_UTF8 = b"\xef\xbb\xbf"


def _refuse(source: str, message: str, actual: object = None) -> Refusal:
    return Refusal("export.adapter", f"JUnit XML {source}: {message}", field=source,
                   expected="a well-formed UTF-8 JUnit XML report without DTD", actual=actual)


def _declares_dtd(body: bytes) -> bool:
    """Whether the prolog (before the root element) declares a DTD: the only place one can be. A literal
    ``<!DOCTYPE`` later is text — Surefire's ``system-out`` holds HTML pages in CDATA — and was refused as a
    DTD, a false refusal of real reports."""
    at = 0
    while True:
        start = body.find(b"<", at)
        if start < 0:
            return False
        if body.startswith(b"<?", start):  # the XML declaration or a processing instruction
            end = body.find(b"?>", start + 2)
        elif body.startswith(b"<!--", start):
            end = body.find(b"-->", start + 4)
        else:
            # <!DOCTYPE, <!ENTITY or any other declaration before the root; else the root element starts and
            # the prolog is over.
            return body.startswith(b"<!", start)
        if end < 0:
            return False  # unterminated: the parser refuses it as malformed
        at = end + 2


def parse_xml(data: bytes, source: str = "report.xml") -> ET.Element:
    """Parse untrusted XML with the caps above; every problem is ``export.adapter``."""
    if len(data) > JUNIT_LIMIT:
        raise _refuse(source, f"larger than {JUNIT_LIMIT} bytes", len(data))
    body = data[len(_BOM_UTF8):] if data.startswith(_BOM_UTF8) else data
    if body.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in body:
        raise _refuse(source, "not UTF-8 (UTF-16 and NUL bytes are refused)")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(source, "not valid UTF-8") from None
    declared = _ENCODING.match(body)
    if declared and declared.group(1).lower() not in (b"utf-8", b"utf8", b"us-ascii", b"ascii"):
        raise _refuse(source, "declares an encoding other than UTF-8", declared.group(1).decode("ascii"))
    if _declares_dtd(body):
        raise _refuse(source, "has a DOCTYPE or ENTITY declaration, which is refused (entity expansion)")

    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    root: ET.Element | None = None
    depth = count = 0
    try:
        for offset in range(0, len(body) or 1, _CHUNK):
            parser.feed(body[offset : offset + _CHUNK])
            for item in parser.read_events():
                event, element = item if isinstance(item, tuple) and len(item) == 2 else ("", None)
                if not isinstance(element, ET.Element):  # only start/end events were asked for
                    continue
                if event == "start":
                    depth += 1
                    count += 1
                    if root is None:
                        root = element
                    if depth > MAX_DEPTH:
                        raise _refuse(source, f"nested deeper than {MAX_DEPTH} elements", depth)
                    if count > MAX_ELEMENTS:
                        raise _refuse(source, f"has more than {MAX_ELEMENTS} elements", count)
                else:
                    depth -= 1
        parser.close()
    except ET.ParseError as exc:
        raise _refuse(source, f"is not well-formed XML ({exc})") from None
    if root is None:
        raise _refuse(source, "is empty")
    return root


def _local(tag: object) -> str:
    text = tag if isinstance(tag, str) else ""
    return text.rsplit("}", 1)[-1]


def _suite_start_ms(suite: ET.Element) -> int | None:
    stamp = suite.get("timestamp")
    if not stamp:
        return None
    try:
        value = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if value.tzinfo is None:  # JUnit writers without an offset write UTC on CI runners; documented
        value = value.replace(tzinfo=UTC)
    # Out of range (9999-12-31T23:59:59-23:59 is the year 10000 in UTC) reads like no timestamp at all.
    utc = in_time_range(value)
    return int(utc.timestamp() * 1000) if utc is not None else None


def _seconds_ms(text: str | None) -> int:
    if not text:
        return 0
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return 0
    if not (0 <= value < 10**9):  # also rejects NaN and infinities
        return 0
    return int(value * 1000)


# Attribute vocabularies (lower-cased), from the producers of the corpus in tests/data/junit (README there).
_RAN = frozenset({"run", "passed", "pass", "success", "succeeded", "successful", "ok", "executed", "completed"})
_FAILED = frozenset({"failed", "failure", "fail"})
_ERRORED = frozenset({"error", "errored", "broken"})
# Worst first: one signal of a worse kind decides the test's outcome.
_RANK = {ERROR: 3, FAILED: 2, SKIPPED: 1, PASSED: 0}


def _attribute_outcome(name: str, value: str | None) -> tuple[str, str | None] | None:
    """The outcome a ``status``/``result`` attribute states, with its reason; None when it says the test ran."""
    if value is None:
        return None
    word = value.strip().lower()
    if word in _RAN:
        return None
    if word in _FAILED:
        return FAILED, f"{name}={value!r}"
    if word in _ERRORED:
        return ERROR, f"{name}={value!r}"
    # skipped, disabled, notrun, suppressed, ignored, inconclusive, ... and anything unknown: not a run.
    return SKIPPED, f"did not run ({name}={value!r})"


def _case_outcome(testcase: ET.Element, start_ms: int | None) -> Outcome:
    properties: dict[str, list[str]] = {}
    status, message = PASSED, None

    def worse(candidate: str, reason: str | None) -> None:
        nonlocal status, message
        if _RANK[candidate] > _RANK[status]:
            status, message = candidate, reason

    for child in testcase:
        tag = _local(child.tag)
        if tag == "properties":
            for prop in child:
                if _local(prop.tag) == "property":
                    properties.setdefault(prop.get("name", ""), []).append(prop.get("value", "") or "")
        elif tag in ("error", "failure", "skipped"):
            reason = child.get("message") or (child.text or "").strip() or None
            if tag == "skipped":
                reason = f"skipped: {reason}" if reason else "skipped"
            candidate = {"error": ERROR, "failure": FAILED, "skipped": SKIPPED}[tag]
            if _RANK[candidate] > _RANK[status] or (candidate == status and message is None):
                status, message = candidate, reason
    # After the children: an attribute only decides when it is worse (a child's message says more).
    for attribute in ("status", "result"):
        stated = _attribute_outcome(attribute, testcase.get(attribute))
        if stated is not None:
            worse(*stated)
    name = testcase.get("name", "") or ""
    duration = _seconds_ms(testcase.get("time"))
    cases = properties.get("case", [])
    return Outcome(
        name=name,
        status=status,
        message=message,
        case=cases[0] if cases else None,
        checks=tuple(properties.get("check", [])),
        start_ms=start_ms,
        stop_ms=start_ms + duration if start_ms is not None else None,
    )


def parse_junit(data: bytes, source: str = "report.xml") -> list[Outcome]:
    """Every ``<testcase>`` of a JUnit report (``<testsuites>`` or a bare ``<testsuite>`` root)."""
    root = parse_xml(data, source)
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise _refuse(source, "has no <testsuites> or <testsuite> root", _local(root.tag))
    outcomes: list[Outcome] = []

    def walk(suite: ET.Element, start_ms: int | None) -> None:
        first = len(outcomes)
        own = _suite_start_ms(suite)
        start = own if own is not None else start_ms
        span = _seconds_ms(suite.get("time")) if suite.get("time") is not None else None
        # JUnit gives a test case its duration, not its start: the cases of a suite are laid end to end
        # from the suite's start, in document order (how runners write them), each kept inside the suite's
        # span where one is stated. A contract case mapped to some tests of a suite so lasts as long as its
        # own tests, not as long as the whole suite (a test without a time lasts to the suite's end).
        offset = 0
        for child in suite:
            tag = _local(child.tag)
            if tag == "testsuite":
                walk(child, start)
            elif tag == "testcase":
                duration = _seconds_ms(child.get("time"))
                at = offset if span is None else min(offset, max(0, span - duration))
                outcome = _case_outcome(child, start + at if start is not None else None)
                if child.get("time") is None and span is not None and outcome.start_ms is not None \
                        and start is not None:
                    # No time of its own: all that is known is that it ran within the rest of its suite.
                    outcome = Outcome(outcome.name, outcome.status, outcome.message, outcome.case, outcome.checks,
                                      outcome.start_ms, max(outcome.start_ms, start + span))
                outcomes.append(outcome)
                offset += duration
        if _local(suite.tag) == "testsuite":  # a <testsuites> root's totals are often a converter's own sum
            _check_declared(suite, outcomes[first:], source)

    walk(root, None)
    return outcomes


# What a suite declares did not pass: a report whose suite declares more such tests than it holds has lost one,
# and a lost failing test could turn its check into a pass (two runs of a test, the failing one deleted).
_NOT_PASSED = ("failures", "errors", "skipped", "disabled")


def _check_declared(suite: ET.Element, found: list[Outcome], source: str) -> None:
    declared = [ascii_int(suite.get(name) or "", maximum=MAX_ELEMENTS) for name in _NOT_PASSED]
    promised = sum(count for count in declared if count is not None)
    held = sum(1 for outcome in found if outcome.status != PASSED)
    if promised > held:
        name = suite.get("name") or "(unnamed)"
        raise _refuse(source, f"the testsuite {name[:200]!r} declares {promised} test(s) that failed, errored or "
                      f"were skipped, and holds {held}: a test case is missing from the report, so none of its "
                      "results can be trusted", {"declared": promised, "held": held})
