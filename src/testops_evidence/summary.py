"""Step-summary rendering: templates in ``templates/*.md`` plus small Markdown helpers.

Values that come from outside (case titles, server messages) are escaped for tables so that a ``|`` or
a newline can never break the layout or inject Markdown structure.
"""

from __future__ import annotations

import os

# Imported by every start: no json, string.Template (it compiles a regex at import), importlib.resources
# or typing at import time; the templates are files beside this module (tests/test_startup_imports.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

_TEMPLATES: dict[str, str] = {}
_TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")


def _template(name: str) -> str:
    if name not in _TEMPLATES:
        with open(os.path.join(_TEMPLATE_DIR, f"{name}.md"), encoding="utf-8") as handle:
            _TEMPLATES[name] = handle.read()
    return _TEMPLATES[name]


def substitute(text: str, values: dict[str, str]) -> str:
    """``string.Template(text).substitute(values)``: ``$$``, ``$name`` and ``${name}`` (ASCII identifiers);
    a missing value is a ``KeyError``, a malformed placeholder a ``ValueError``."""
    out: list[str] = []
    index = 0
    while True:
        dollar = text.find("$", index)
        if dollar < 0:
            out.append(text[index:])
            return "".join(out)
        out.append(text[index:dollar])
        after = dollar + 1
        if text.startswith("$", after):
            out.append("$")
            index = after + 1
            continue
        braced = text.startswith("{", after)
        start = after + 1 if braced else after
        end = start
        while end < len(text) and text[end] in _NAME_CHARS:
            end += 1
        name = text[start:end]
        if not name or name[0] not in _NAME_START or (braced and not text.startswith("}", end)):
            raise ValueError(f"Invalid placeholder in string: position {dollar}")
        out.append(values[name])
        index = end + 1 if braced else end


def render(name: str, **values: Any) -> str:
    """Render ``templates/<name>.md``; every placeholder must be supplied (KeyError otherwise)."""
    return substitute(_template(name), {k: str(v) for k, v in values.items()})


def cell(value: Any) -> str:
    """One Markdown table cell: stringified, pipes and newlines escaped, length bounded."""
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict | list):
        import json

        text = "`" + json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace("`", "'") + "`"
    else:
        text = str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, limit: int = 1000) -> str:
    """A Markdown table; past ``limit`` rows a line says how many were left out."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    left_out = 0
    for index, row in enumerate(rows):
        if index >= limit:
            left_out += 1
            continue
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    if left_out:
        lines.append(f"\n_{left_out} more rows are left out here; the receipt lists them all._")
    return "\n".join(lines) + "\n"


def link(text: str, url: str | None) -> str:
    if not url:
        return cell(text)
    safe_url = url.replace(")", "%29").replace(" ", "%20")
    return f"[{cell(text)}]({safe_url})"


def status_icon(status: str) -> str:
    return {"passed": "✅", "failed": "❌", "broken": "💥", "refused": "⛔", "skipped": "⏭️"}.get(status, "•")


def refusal_section(refusal: Any, mode: str, started: list[str] | None = None) -> str:
    """The summary of a refusal: code, message, field, expected versus actual, and the next step.

    ``started``: the stages this step once-marked (StateDir.started), when known; None when not.
    """
    body = render("refusal", mode=mode, code=refusal.code, message=cell(refusal.message),
                  exit_code=refusal.exit_code, consequence=_consequence(refusal.code, mode, started))
    if refusal.field is not None:
        rows = [("field", f"`{refusal.field}`"), ("expected", _show(refusal.expected)),
                ("actual", _show(refusal.actual))]
        body += "\n" + table(("", ""), rows)
    body += f"\n**Next step:** {next_step(refusal)}\n"
    return body


def next_step(refusal: Any) -> str:
    """The code's own hint, else the advice for its exit code: a refusal always says what to do next."""
    if refusal.hint:
        return str(refusal.hint)
    from testops_evidence.errors import EXIT_ADVICE

    advice = EXIT_ADVICE.get(refusal.exit_code, "")
    return f"{advice[:1].upper()}{advice[1:]}." if advice else "See docs/errors.md for this code."


# Phases that change TestOps: a refusal there may come after some changes were made.
_MUTATING_MODES = frozenset({"bootstrap", "launch", "upload", "reconcile"})


def _consequence(code: str, mode: str, started: list[str] | None = None) -> str:
    """What the refusal means for what was published, said truthfully per case."""
    if code == "testops.uncertain":
        return ("A change may or may not have reached TestOps; it is **not** re-sent automatically. "
                "Run `mode: reconcile` with the same state directory to find out.")
    if mode in _MUTATING_MODES and started == []:
        # Every remote mutation is once-marked first: no marker from this step means nothing was sent.
        return "Nothing was published or changed by this step."
    if mode in _MUTATING_MODES and started:
        return (f"This step started {len(started)} change(s) before the refusal ({', '.join(started[:5])}"
                f"{', …' if len(started) > 5 else ''}): each is recorded as a once-marker, with a done-record "
                "once it completed, in the state directory; `mode: reconcile` reviews any left uncertain.")
    if mode in _MUTATING_MODES:
        return ("Changes this step completed before the refusal are recorded as once-markers and "
                "done-records in the state directory; `mode: reconcile` reviews any left uncertain.")
    return "Nothing was published by this step."


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f"`{value}`" if value else "(empty)"
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True) if value is not None else "(none)"
