"""The one reader of integers written as text by someone else: an input, a variable, a header, a file name.

``str.isdigit`` is true for ``"\u00b2"`` (a superscript two) and ``"\u0661"`` (an Arabic-Indic one), and
``int`` either raises on them (the superscript) or reads them (``int("\u0661") == 1``); ``int`` of thousands
of digits raises too.
So ``isdigit()`` followed by ``int()`` turns a hostile value into an unexpected exception — an
``internal.error`` — instead of a coded refusal. Here only ASCII digits are digits, the length is checked
before anything is converted, and the bounds are part of the question.
``tests/reliability/test_hostile_round_three.py`` fails on any ``isdigit``/``isdecimal``/``isnumeric`` and
``int()`` left together in one function of ``src/``.
"""

from __future__ import annotations

from testops_evidence.errors import Refusal
from testops_evidence.redact import clip

INT64_MAX = 2**63 - 1
_DIGITS = frozenset("0123456789")


def ascii_int(text: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int | None:
    """``text`` as an integer from ``minimum`` to ``maximum`` when it is ASCII digits only (no sign, no
    spaces, no underscores); ``None`` otherwise."""
    if not text or len(text.lstrip("0")) > len(str(maximum)) or not _DIGITS.issuperset(text):
        return None
    value = int(text)
    return value if minimum <= value <= maximum else None


def parse_int(text: str, *, code: str, field: str, what: str, minimum: int = 0, maximum: int = INT64_MAX,
              hint: str | None = None) -> int:
    """``text`` as an integer from ``minimum`` to ``maximum``, or a refusal with ``code`` that names ``what``
    and the range (``hint``: the next step, when the code's own is not enough)."""
    value = ascii_int(text, minimum=minimum, maximum=maximum)
    if value is None:
        raise Refusal(code, f"{what} must be a whole number from {minimum} to {maximum} written in ASCII digits",
                      field=field, expected=f"{minimum}..{maximum}", actual=clip(text, 40), hint=hint)
    return value


def header_int(value: str) -> int | None:
    """An HTTP header's count (``Content-Length``): ASCII digits; a list of equal values, which a proxy may
    send for a repeated header, counts once (RFC 9110 8.6); ``None`` for anything else."""
    values = {part.strip(" \t") for part in value.split(",")}
    return ascii_int(values.pop()) if len(values) == 1 else None
