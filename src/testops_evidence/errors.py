"""One refusal type and one registry of stable error codes.

Every refusal the action can produce is a :class:`Refusal` whose ``code`` is registered here with its
exit code and a one-line meaning. ``docs/errors.md`` is generated from :data:`REGISTRY` and a test keeps
the two equal, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# Exit codes (docs/errors.md, "Exit codes").
EXIT_OK = 0
EXIT_CASES_FAILED = 1
EXIT_USAGE = 2
EXIT_INTEGRITY = 3
EXIT_REMOTE = 4

EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "phase done; for evaluating phases, everything passed",
    EXIT_CASES_FAILED: "phase done and recorded, but some cases did not pass (`fail-on-failed-cases: false` makes it 0)",
    EXIT_USAGE: "usage or configuration error (bad input, invalid contract)",
    EXIT_INTEGRITY: "integrity refusal (binding mismatch, digest mismatch, foreign case, token in a worker, unsafe path)",
    EXIT_REMOTE: "remote failure (TestOps or GitHub unreachable, HTTP error, timeout, uncertain mutation)",
}

# What an operator does about an exit code in general (docs/errors.md, and the step summary's "Next step" when a
# code has no hint of its own — a refusal must always say what to do next).
EXIT_ADVICE: dict[int, str] = {
    EXIT_OK: "nothing",
    EXIT_CASES_FAILED: "read the failed cases in the summary; the evidence is recorded",
    EXIT_USAGE: "fix the input or contract field the refusal names, then run again",
    EXIT_INTEGRITY: "compare *expected* and *actual* in the step summary and find out why the evidence does not "
                    "bind before running again; the check is not what needs fixing",
    EXIT_REMOTE: "check that the service is reachable and the credentials valid, then re-run the job "
                 "(after an uncertain mutation: `mode: reconcile`)",
}


# What a refusal means for an export (docs/errors.md, column "in export"): a code found in one cell either
# makes only that cell's case broken (a harness bug cannot change any other verdict), or refuses the whole
# export (the cell's origin is in doubt: it could be an attempt to change another case's verdict).
SCOPE_CASE = "case"
SCOPE_EXPORT = "export"


@dataclass(frozen=True)
class CodeSpec:
    """One registered code: its exit code, its meaning, its usual cause, the operator's next step (docs/errors.md
    and docs/troubleshooting.md are generated from these) and, for a code export meets in a cell, whether the
    case or the whole export is refused (``scope``)."""

    code: str
    exit_code: int
    meaning: str
    hint: str = ""
    cause: str = ""
    scope: str = ""


# The registry of codes lives in ``codes.py``, which builds its entries with CodeSpec from here: it is read on
# first use, so that the two modules can import each other.
if TYPE_CHECKING:
    REGISTRY: dict[str, CodeSpec]


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":
        return _registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _registry() -> dict[str, CodeSpec]:
    from testops_evidence.codes import REGISTRY

    return REGISTRY


_CODE_FORM = re.compile(r"[a-z_]+\.[a-z0-9_-]+\Z")


def _is_code_form(code: str) -> bool:
    """``<area>.<reason>``: ``[a-z_]+`` dot ``[a-z0-9_-]+``."""
    return _CODE_FORM.match(code) is not None


def lookup(code: str) -> CodeSpec:
    """Return the spec of ``code``, resolving families such as ``testops.http_503``."""
    registry = _registry()
    spec = registry.get(code)
    if spec is not None:
        return spec
    if not _is_code_form(code):  # a family member must still be `<area>.<reason>` ("input." is not)
        raise KeyError(f"unregistered error code {code!r}")
    if code.startswith("input."):
        return registry["input.<name>"]
    for family in ("testops.http_", "github.http_"):
        if code.startswith(family) and code[len(family):].isdigit():
            return registry[family + "<status>"]
    raise KeyError(f"unregistered error code {code!r}")


def is_registered(code: str) -> bool:
    try:
        lookup(code)
    except KeyError:
        return False
    return _is_code_form(code)


class Refusal(Exception):
    """A refusal with a stable code. ``expected``/``actual`` must never hold a secret."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        expected: Any = None,
        actual: Any = None,
        hint: str | None = None,
        http_status: int | None = None,
        problems: list[dict[str, Any]] | None = None,
    ) -> None:
        spec = lookup(code)  # unregistered codes are a programming error, caught by tests
        # Echoed values are capped: a 4 MB value in a document would otherwise be copied into the message,
        # the annotation, the summary and failure.json.
        message = _capped(message, MESSAGE_CAP)
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = _capped(field, VALUE_CAP) if isinstance(field, str) else field
        self.expected = _capped_value(expected)
        self.actual = _capped_value(actual)
        self.hint = hint if hint is not None else spec.hint
        self.http_status = http_status
        self.exit_code = spec.exit_code
        # Every problem found, when there are several (a contract): pointer, line, column, message.
        self.problems = [{k: _capped_value(v) for k, v in p.items()} for p in problems] if problems else None

    def detached(self) -> Refusal:
        """This refusal without the frames it was raised in and the error it was raised from, whose locals hold
        the refused input: what is kept as evidence of a refused cell or report."""
        self.__traceback__ = self.__context__ = self.__cause__ = None
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "exit-code": self.exit_code}
        if self.field is not None:
            out["field"] = self.field
            out["expected"] = self.expected
            out["actual"] = self.actual
        if self.hint:
            out["hint"] = self.hint
        if self.http_status is not None:
            out["http-status"] = self.http_status
        if self.problems:
            out["problems"] = self.problems
        return out

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.field is not None:
            text += f" (field {self.field}: expected {_shown(self.expected)}, actual {_shown(self.actual)})"
        return text


MESSAGE_CAP = 4000
VALUE_CAP = 1000


def _capped(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    return f"{text[:cap]}… ({len(text) - cap:,} more characters)"


def _capped_value(value: Any) -> Any:
    """A value a refusal echoes, bounded: long strings are cut, long lists and objects are shown shortened
    (as JSON text), so no document's size is repeated in the outputs."""
    if isinstance(value, str):
        return _capped(value, VALUE_CAP)
    if isinstance(value, list | dict):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return value if len(text) <= VALUE_CAP else _capped(text, VALUE_CAP)
    return value


def _shown(value: Any) -> str:
    """A value as the operator reads it in an annotation: a quoted string, anything else as JSON (``["A"]``,
    ``null``, ``true``), not a Python repr of a list, dict, None or bool."""
    if isinstance(value, str):
        return repr(value)  # quoted with newlines escaped; JSON would escape the quotes a message often holds
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def binding(code: str, field: str, expected: Any, actual: Any, message: str | None = None) -> None:
    """Refuse with ``code`` unless ``expected == actual``."""
    if expected != actual:
        raise Refusal(code, message or f"{field} does not match", field=field, expected=expected, actual=actual)


def input_error(name: str, message: str, *, actual: Any = None, expected: Any = None) -> Refusal:
    return Refusal(f"input.{name}", message, field=name if expected is not None else None,
                   expected=expected, actual=actual)
