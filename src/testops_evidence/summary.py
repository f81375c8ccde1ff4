"""Step-summary rendering: templates in ``templates/*.md``, the refusal section, status icons.

Untrusted text becomes Markdown only through :mod:`testops_evidence.md` (``code``, ``text``, ``link``,
``table``); :func:`render` escapes every value that is not already :class:`~testops_evidence.md.Markdown`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from string import Template
from typing import Any

from testops_evidence.errors import EXIT_ADVICE
from testops_evidence.md import Markdown, code, join, link, table, text

__all__ = ["Markdown", "code", "join", "link", "next_step", "refusal_section", "render", "status_icon", "table",
           "text"]


_TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@functools.cache
def _template(name: str) -> Template:
    return Template((_TEMPLATE_DIR / f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **values: Any) -> Markdown:
    """Render ``templates/<name>.md``; every placeholder must be supplied (KeyError otherwise).

    A :class:`Markdown` value is inserted as is, a number as its digits, anything else as escaped text."""
    return Markdown(_template(name).substitute({k: _markdown(v) for k, v in values.items()}))


def _markdown(value: Any) -> str:
    if isinstance(value, Markdown):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format(value)
    return text(value, limit=None)


def status_icon(status: str) -> str:
    return {"passed": "✅", "failed": "❌", "broken": "💥", "refused": "⛔", "skipped": "⏭️"}.get(status, "•")


def refusal_section(refusal: Any, mode: str, started: list[str] | None = None) -> str:
    """The summary of a refusal: code, message, field, expected versus actual, and the next step.

    ``started``: the stages this step once-marked (StateDir.started), when known; None when not.
    """
    body: str = render("refusal", mode=code(mode), code=code(refusal.code), message=text(refusal.message, limit=2000),
                  exit_code=refusal.exit_code, consequence=Markdown(_consequence(refusal.code, mode, started)))
    problems = getattr(refusal, "problems", None)
    if problems:
        body += f"\n{len(problems)} problems, each where it is:\n\n" + table(("where", "line", "problem", "expected"), [
            (code(p.get("pointer", "/")), f"{p['line']}:{p['column']}" if "line" in p else "—", p.get("message"),
             _show(p["expected"]) if p.get("expected") is not None else "—") for p in problems])
    elif refusal.field is not None:
        rows = [("field", code(refusal.field)), ("expected", _show(refusal.expected)),
                ("actual", _show(refusal.actual))]
        body += "\n" + table(("", ""), rows)
    body += f"\n**Next step:** {next_step(refusal)}\n"
    return Markdown(body)


def next_step(refusal: Any) -> str:
    """The code's own hint, else the advice for its exit code: a refusal always says what to do next."""
    if refusal.hint:
        return str(refusal.hint)
    advice = EXIT_ADVICE.get(refusal.exit_code, "")
    return f"{advice[:1].upper()}{advice[1:]}." if advice else "See docs/errors.md for this code."


# Phases that change TestOps: a refusal there may come after some changes were made.
_MUTATING_MODES = frozenset({"bootstrap", "launch", "upload", "reconcile"})


def _consequence(error_code: str, mode: str, started: list[str] | None = None) -> str:
    """What the refusal means for what was published, said truthfully per case."""
    if error_code == "testops.uncertain":
        return ("A change may or may not have reached TestOps; it is **not** re-sent automatically. "
                "Run `mode: reconcile` with the same state directory to find out.")
    if mode in _MUTATING_MODES and started == []:
        # Every remote mutation is once-marked first: no marker from this step means nothing was sent.
        return "Nothing was published or changed by this step."
    if mode in _MUTATING_MODES and started:
        shown = ", ".join(code(stage) for stage in started[:5])
        return (f"This step started {len(started)} change(s) before the refusal ({shown}"
                f"{', …' if len(started) > 5 else ''}): each is recorded as a once-marker, with a done-record "
                "once it completed, in the state directory; `mode: reconcile` reviews any left uncertain.")
    if mode in _MUTATING_MODES:
        return ("Changes this step completed before the refusal are recorded as once-markers and "
                "done-records in the state directory; `mode: reconcile` reviews any left uncertain.")
    if mode in _NEVER_PUBLISH:
        return {"check": "It changed nothing.", "cell": "No cell result was written."}.get(
            mode, "Nothing was published by it.")
    return "Nothing was published by this step."


# Commands that never publish anything: "nothing was published by this step" after `check` read as though
# it might have.
_NEVER_PUBLISH = frozenset({"check", "cell", "verify-attestation", "verify-selection"})


def _show(value: Any) -> Markdown:
    if value is None:
        return Markdown("(none)")
    if isinstance(value, str):
        return code(value)
    return code(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))
