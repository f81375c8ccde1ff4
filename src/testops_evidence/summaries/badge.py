"""The campaign's status badge: a small SVG (passed of total, coloured by the verdict) for READMEs and sites.

Rendered from the export receipt alone, so upload (files backend: ``badge.svg`` in the publication, listed in
its manifest) and pages (``<campaign>/badge.svg`` on the site, the newest published run's) draw the same
picture from the same bound bytes. Every text is escaped for XML; the widths are estimated from the text's
length (no font metrics), which is what the common badge services do for a fixed-width look.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

NAME = "badge.svg"
GREEN, RED, ORANGE, GREY = "#2e7d32", "#c62828", "#ef6c00", "#757575"
_CHAR = 7  # pixels per character of an 11 px sans-serif, roughly
_PAD = 10


def colour(counts: Mapping[str, int]) -> str:
    """Green when every case passed, red when a case failed, orange when cases only broke, grey when empty."""
    if not counts.get("total"):
        return GREY
    if counts.get("passed") == counts.get("total"):
        return GREEN
    return RED if counts.get("failed") else ORANGE


def message(counts: Mapping[str, int]) -> str:
    text = f"{counts.get('passed', 0)}/{counts.get('total', 0)} passed"
    extra = [f"{counts[s]} {s}" for s in ("failed", "broken") if counts.get(s)]
    return text + (f", {', '.join(extra)}" if extra else "")


def svg(receipt: Mapping[str, Any], label: str | None = None) -> bytes:
    """The badge of a receipt: ``label`` (default: the campaign) on the left, the counts on the right."""
    counts = receipt["counts"]
    left, right = (label or str(receipt["campaign"]))[:60], message(counts)
    lw, rw = len(left) * _CHAR + _PAD, len(right) * _CHAR + _PAD
    width = lw + rw
    title = f"{left}: {right}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label={quoteattr(title)}>'
        f"<title>{escape(title)}</title>"
        f'<rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{rw}" height="20" fill="{colour(counts)}"/>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{lw / 2:g}" y="14">{escape(left)}</text>'
        f'<text x="{lw + rw / 2:g}" y="14">{escape(right)}</text>'
        "</g></svg>\n"
    ).encode()
