"""Untrusted text into step-summary Markdown: the one place that does it.

GitHub renders a step summary with cmark-gfm (CommonMark plus GFM tables, autolinks, strikethrough and
the tag filter), then sanitises the HTML. Text that came from outside — a case title, a worker's
attempt id, a JUnit failure message, a server's answer, a file name, an input value — must reach the
reader as the characters it is, never as Markdown structure: no link, image or tag it opens, no
``</details>`` it closes, no table cell it splits, no heading or list it starts.

The API (every summary uses it: ``summary.py``, ``templates/*.md`` through :func:`summary.render`, and
every phase's headline and tables):

* :class:`Markdown` — a ``str`` that *is* Markdown, made here or written by us. Everything else is text.
* :func:`code` — a value shown verbatim in an inline code span (the usual choice for identifiers,
  paths, digests, codes, values a refusal echoes). Survives backticks, pipes and line breaks.
* :func:`text` — a value shown as plain prose (messages, titles): every Markdown and HTML construct
  escaped, GFM autolinks (``www.``, ``https://``, ``a@b.c``) defused.
* :func:`link` — a link we make (a run, a launch) to an ``http(s)`` URL, its label escaped as text.
* :func:`cell` / :func:`table` — table cells and tables: a plain ``str`` cell is escaped as :func:`text`,
  a :class:`Markdown` cell is kept, and every cell is made safe for the table (pipes, line breaks).
* :func:`join` — Markdown pieces joined into one :class:`Markdown`.

Both :func:`code` and :func:`text` map line breaks and other control characters to their visible
Control Pictures (``␤``) and bidirectional overrides to ``�``, and cap the length (``…`` marks a cut),
so the result is always one line. The property test (tests/test_md.py) renders what they produce with
cmark-gfm — GitHub's own renderer — in every context a summary uses and checks that the text comes out
exactly and that no element but the expected ones appears.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

DEFAULT_LIMIT = 300
ELLIPSIS = "…"
# U+2060 WORD JOINER after an "@" that a domain could follow: invisible, but no e-mail or xmpp autolink
# can start there. Backslash escapes cannot do this: cmark-gfm finds e-mail addresses in the text after
# escapes are resolved.
_AT = "@\u2060"


class Markdown(str):
    """Trusted Markdown: made by this module or written by us, inserted into a summary unchanged."""

    __slots__ = ()


def _visible_controls() -> dict[int, str]:
    table = {c: chr(0x2400 + c) for c in range(0x20)}   # C0 controls -> Control Pictures (␀ … ␟)
    table[0x09] = " "
    table[0x0A] = "\u2424"                               # LF -> ␤ (SYMBOL FOR NEWLINE: the one readers know)
    table[0x7F] = "\u2421"                               # DEL -> ␡
    for c in range(0x80, 0xA0):                           # C1 controls (NEL among them)
        table[c] = "\ufffd"
    for c in (0x2028, 0x2029):                            # line and paragraph separators
        table[c] = "\u2424"
    for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0xFEFF):
        table[c] = "\ufffd"                               # bidi controls reorder what the reader sees
    return table


_CODE_TABLE = _visible_controls()
# The characters that start an inline construct anywhere in a line: code spans, emphasis, links and
# images, raw HTML and autolinks, entities, strikethrough, table pipes, GitHub's math, backslash itself.
_TEXT_SPECIAL = "\\`*_[]<>!&~|$"
_TEXT_TABLE = {**_CODE_TABLE, **{ord(c): "\\" + c for c in _TEXT_SPECIAL}}


# Characters that start a block only at the beginning of a line (heading, list, setext underline, quote).
_BLOCK_START = frozenset("#+-=>")


def _clip(value: str, limit: int | None) -> str:
    if limit is not None and len(value) > limit:
        return value[: max(limit - 1, 0)] + ELLIPSIS
    return value


def code(value: Any, *, limit: int | None = DEFAULT_LIMIT) -> Markdown:
    """``value`` (stringified) verbatim in an inline code span; ``(empty)`` for an empty string."""
    source = _clip(value if isinstance(value, str) else str(value), limit).translate(_CODE_TABLE)
    if not source:
        return Markdown("(empty)")
    fence = "`" * (max(map(len, re.findall("`+", source)), default=0) + 1)
    # A span that starts or ends with a backtick needs a space inside the fence; CommonMark strips one
    # space from each side when both are there, so a value that itself starts and ends with a space
    # keeps them too.
    pad = " " if source[0] in "` " or source[-1] in "` " else ""
    if pad and source.strip(" ") == "":
        pad = ""  # an all-space span is shown as is (CommonMark strips nothing from it)
    return Markdown(f"{fence}{pad}{source}{pad}{fence}")


def text(value: Any, *, limit: int | None = DEFAULT_LIMIT) -> Markdown:
    """``value`` (stringified) as plain inline text: nothing in it is Markdown or HTML."""
    source = _clip(value if isinstance(value, str) else str(value), limit)
    escaped = source.translate(_TEXT_TABLE)
    if "@" in escaped:
        escaped = _defuse_at(escaped)
    if "://" in escaped:
        escaped = escaped.replace("://", "\\://")     # http://, https://, ftp:// autolinks
    if "." in escaped and "www." in escaped.lower():
        escaped = re.sub(r"(?i)(www)\.", r"\1\\.", escaped)
    # Block structure: this text may be placed at the start of a line.
    stripped = escaped.lstrip(" ")
    if len(stripped) != len(escaped):
        # Leading spaces: four make an indented code block, fewer are dropped. An entity keeps the first.
        escaped = "&#32;" + escaped[1:]
    elif escaped[:1] in _BLOCK_START:
        escaped = "\\" + escaped
    else:
        digits = 0
        while digits < len(escaped) and escaped[digits].isascii() and escaped[digits].isdigit():
            digits += 1
        if 0 < digits <= 9 and digits < len(escaped) and escaped[digits] in ".)":
            escaped = escaped[:digits] + "\\" + escaped[digits:]   # "1." / "1)" would start a list
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "&#32;"  # trailing spaces are stripped from a paragraph's end
    return Markdown(escaped)


def _defuse_at(escaped: str) -> str:
    parts = escaped.split("@")
    out = [parts[0]]
    for part in parts[1:]:
        out.append(_AT if part[:1] and not part[:1].isspace() else "@")
        out.append(part)
    return "".join(out)


def _safe_url(url: str) -> str | None:
    """An ``http(s)`` URL made safe for a link destination, or None when it is not one."""
    lowered = url[:8].lower()
    if not (lowered.startswith("https://") or lowered.startswith("http://")) or len(url) > 4096:
        return None
    out = []
    for char in url:
        if char.isascii() and (char.isalnum() or char in "-._~:/?#[]@!$&*+,;=%"):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


def link(label: Any, url: str | None) -> Markdown:
    """A link to ``url`` labelled ``label`` (text, or :class:`Markdown` as given); only the label when
    ``url`` is empty or not an ``http(s)`` URL."""
    shown = label if isinstance(label, Markdown) else text(label)
    safe = _safe_url(url) if url else None
    return Markdown(f"[{shown}]({safe})") if safe else shown


def cell(value: Any) -> str:
    """One table cell: Markdown kept, text escaped, then made safe for a GFM table row."""
    if isinstance(value, Markdown):
        shown: str = value
    elif value is None:
        shown = "—"
    elif isinstance(value, bool):
        shown = "yes" if value else "no"
    elif isinstance(value, int | float):
        shown = format(value)
    elif isinstance(value, dict | list):
        shown = code(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))
    else:
        shown = text(value)
    # GFM splits a row at every unescaped "|", inside code spans too, and removes one backslash before
    # each escaped one before the cell is parsed: "\|" everywhere is exact, whatever precedes it.
    return shown.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], *, limit: int = 1000, more: int = 0) -> Markdown:
    """A Markdown table; past ``limit`` rows a line says how many were left out. ``more``: rows the caller left
    out already (it need not render 10,000 rows for the table to count 9,000 of them), counted with those."""
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    left_out = more
    for index, row in enumerate(rows):
        if index >= limit:
            left_out += 1
            continue
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    if left_out:
        lines.append(f"\n_{left_out} more rows are left out here; the receipt lists them all._")
    return Markdown("\n".join(lines) + "\n")


def join(parts: Iterable[str], separator: str = "") -> Markdown:
    """Markdown pieces (each already Markdown, or our own literal text) joined as one Markdown."""
    return Markdown(separator.join(parts))
