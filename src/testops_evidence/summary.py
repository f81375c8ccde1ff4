"""Step-summary rendering: templates in ``templates/*.md`` plus small Markdown helpers.

Values that come from outside (case titles, server messages) are escaped for tables so that a ``|`` or
a newline can never break the layout or inject Markdown structure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from string import Template
from typing import Any


@cache
def _template(name: str) -> Template:
    text = resources.files("testops_evidence").joinpath("templates", f"{name}.md").read_text("utf-8")
    return Template(text)


def render(name: str, **values: Any) -> str:
    """Render ``templates/<name>.md``; every placeholder must be supplied (KeyError otherwise)."""
    return _template(name).substitute({k: str(v) for k, v in values.items()})


def cell(value: Any) -> str:
    """One Markdown table cell: stringified, pipes and newlines escaped, length bounded."""
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict | list):
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


def refusal_section(refusal: Any, mode: str) -> str:
    """The summary of a refusal: code, message, field, expected versus actual, and the next step."""
    body = render("refusal", mode=mode, code=refusal.code, message=cell(refusal.message),
                  exit_code=refusal.exit_code, consequence=_consequence(refusal.code, mode))
    if refusal.field is not None:
        rows = [("field", f"`{refusal.field}`"), ("expected", _show(refusal.expected)),
                ("actual", _show(refusal.actual))]
        body += "\n" + table(("", ""), rows)
    if refusal.hint:
        body += f"\n**Next step:** {refusal.hint}\n"
    return body


# Phases that change TestOps: a refusal there may come after some changes were made.
_MUTATING_MODES = frozenset({"bootstrap", "launch", "upload", "reconcile"})


def _consequence(code: str, mode: str) -> str:
    """What the refusal means for what was published, said truthfully per case."""
    if code == "testops.uncertain":
        return ("A change may or may not have reached TestOps; it is **not** re-sent automatically. "
                "Run `mode: reconcile` with the same state directory to find out.")
    if mode in _MUTATING_MODES:
        return ("Changes this step completed before the refusal are recorded as once-markers and "
                "done-records in the state directory; `mode: reconcile` reviews any left uncertain.")
    return "Nothing was published by this step."


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f"`{value}`" if value else "(empty)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if value is not None else "(none)"
