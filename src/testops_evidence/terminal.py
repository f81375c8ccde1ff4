"""A step summary as a terminal shows it: plain text, no Markdown.

Outside GitHub Actions nobody renders the summary's Markdown: a person at a terminal read backslash
escapes, backticks, pipes and ``<details>`` tags. :func:`plain` parses the Markdown the phases wrote (with
markdown-it-py, the CommonMark reader, and its GFM tables) and lays it out as text: headings as lines,
paragraphs wrapped as written, tables as aligned columns, code spans as their text, links as
``label <url>``, HTML tags dropped. What the text says is what the Markdown said: an escaped character is
the character itself, and untrusted text keeps the visible Control Pictures md put in place of line
breaks and control characters, so one value is still one line.
"""

from __future__ import annotations

import re
from typing import Any

_TAG = re.compile(r"<[^>]*>")


def _parser() -> Any:
    from markdown_it import MarkdownIt

    # "commonmark" with GFM tables and strikethrough: what GitHub renders in a step summary (cmark-gfm);
    # HTML is kept as tokens so that its tags can be dropped and its text kept.
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def plain(markdown: str) -> str:
    """``markdown`` as plain text for a terminal."""
    tokens = _parser().parse(markdown)
    out: list[str] = []
    index = 0
    lists: list[str] = []
    while index < len(tokens):
        token = tokens[index]
        kind = token.type
        if kind == "heading_open":
            text = _inline(tokens[index + 1])
            out.append(f"{text}\n{'─' * min(len(text), 72)}\n\n" if token.tag in ("h1", "h2") else f"{text}\n\n")
            index += 3
            continue
        if kind == "paragraph_open":
            text = _inline(tokens[index + 1])
            indent = "  " * len(lists)
            if lists and tokens[index - 1].type == "list_item_open":
                out.append(f"{'  ' * (len(lists) - 1)}{lists[-1]} " + text.replace("\n", "\n" + indent) + "\n")
            else:
                out.append(indent + text.replace("\n", "\n" + indent) + ("\n" if lists else "\n\n"))
            index += 3
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            lists.append("-" if kind == "bullet_list_open" else "*")
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            if not lists:
                out.append("\n")
        elif kind == "table_open":
            index = _table(tokens, index, out)
            continue
        elif kind in ("fence", "code_block"):
            out.append("".join(f"    {line}\n" for line in token.content.rstrip("\n").split("\n")) + "\n")
        elif kind == "html_block":
            text = _TAG.sub("", token.content).strip()
            if text:
                out.append(f"{text}\n\n")
        elif kind == "hr":
            out.append("─" * 40 + "\n\n")
        index += 1
    # md puts a WORD JOINER after "@" against e-mail autolinks; a terminal links nothing, and a value copied
    # from it must be the value.
    return "".join(out).rstrip("\n").replace("@\u2060", "@") + "\n"


def _inline(token: Any) -> str:
    parts: list[str] = []
    links: list[str] = []
    for child in token.children or ():
        kind = child.type
        if kind in ("text", "code_inline"):
            parts.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "link_open":
            links.append(str(child.attrs.get("href", "")))
            parts.append("\0")  # where the label starts
        elif kind == "link_close":
            href = links.pop() if links else ""
            start = max(i for i, part in enumerate(parts) if part == "\0")
            label = "".join(parts[start + 1:])
            parts[start:] = [label if not href or href == label else f"{label} <{href}>"]
        elif kind == "image":
            parts.append(child.content)
        elif kind == "html_inline" and child.content.lower() in ("<br>", "<br/>", "<br />"):
            parts.append("\n")
    return "".join(parts).strip()


def _table(tokens: list[Any], index: int, out: list[str]) -> int:
    """Lays a GFM table out as aligned columns; returns the index after it."""
    rows: list[list[str]] = []
    row: list[str] = []
    while tokens[index].type != "table_close":
        kind = tokens[index].type
        if kind == "tr_open":
            row = []
        elif kind in ("th_open", "td_open"):
            row.append(_inline(tokens[index + 1]).replace("\n", " "))
        elif kind == "tr_close":
            rows.append(row)
        index += 1
    if rows and not any(rows[0]):  # a table without headings (field / expected / actual): no heading line
        rows = rows[1:]
        headed = False
    else:
        headed = True
    widths = [max(len(r[c]) if c < len(r) else 0 for r in rows) for c in range(max(map(len, rows), default=0))]
    # A very wide column (a message) is not padded: the columns after it follow one space apart.
    widths = [min(width, 48) for width in widths]
    for number, cells in enumerate(rows):
        line = "  ".join(cell.ljust(widths[c]) for c, cell in enumerate(cells)).rstrip()
        out.append(f"  {line}\n")
        if number == 0 and headed:
            out.append("  " + "  ".join("─" * width for width in widths) + "\n")
    out.append("\n")
    return index + 1
