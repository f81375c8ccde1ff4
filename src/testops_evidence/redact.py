"""Secrets out of untrusted text: every secret scrubbed first, and only then the text cut to its limit.

A server may echo the token in an error message. Cutting that message to a limit first and scrubbing it
second leaves the part of the token before the cut (a prefix is no longer the whole secret, so a plain
replace misses it). :func:`clip` is therefore the one way untrusted text that may meet a secret is
bounded: scrub, then cut. :func:`scrub` also removes any run of :data:`FRAGMENT` or more characters of a
secret, so a piece of a token that some other cut (a summary cell, a field's ``actual``) left behind is
caught where text leaves the process (``actions.Runtime.scrub``), not only whole tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "***"
# The shortest piece of a secret that is scrubbed on its own. Shorter secrets are scrubbed whole only; a
# run of 8 characters of a random token in honest text is vanishingly rare (one in 16^8 for hex).
FRAGMENT = 8
ELLIPSIS = "..."


class Redactor:
    """A scrubber for a fixed set of secrets: the pieces of each are computed once (the runtime keeps one and
    scrubs every line it writes with it)."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        kept = {secret for secret in secrets if secret}
        self._short = sorted((s for s in kept if len(s) < FRAGMENT), key=len, reverse=True)
        self._pieces = frozenset(s[i:i + FRAGMENT] for s in kept if len(s) >= FRAGMENT
                                 for i in range(len(s) - FRAGMENT + 1))

    def __call__(self, text: str) -> str:
        """``text`` with every secret, and every run of :data:`FRAGMENT` or more characters of one, replaced
        by ``***``."""
        for secret in self._short:
            text = text.replace(secret, MASK)
        if not self._pieces or len(text) < FRAGMENT:
            return text
        spans: list[tuple[int, int]] = []
        if len(text) <= 4 * len(self._pieces):
            # A short text (a log line): one set lookup per position.
            pieces = self._pieces
            spans = [(at, at + FRAGMENT) for at in range(len(text) - FRAGMENT + 1) if text[at:at + FRAGMENT] in pieces]
        else:
            # A long text (a summary): str.find runs in C, one pass per piece.
            for piece in self._pieces:
                at = text.find(piece)
                while at >= 0:
                    spans.append((at, at + FRAGMENT))
                    at = text.find(piece, at + 1)
            spans.sort()
        if not spans:
            return text
        out: list[str] = []
        done = 0
        begin, end = spans[0]
        for low, high in spans[1:]:
            if low <= end:  # overlapping or touching pieces are one run of the secret
                end = max(end, high)
                continue
            out += [text[done:begin], MASK]
            done = end
            begin, end = low, high
        out += [text[done:begin], MASK, text[end:]]
        return "".join(out)


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret, and every run of :data:`FRAGMENT` or more characters of a secret,
    replaced by ``***``."""
    return Redactor(secrets)(text)


def clip(text: str, limit: int, secrets: Iterable[str | None] = ()) -> str:
    """Untrusted ``text`` on one line, secrets scrubbed (:func:`scrub`), then cut to ``limit`` characters
    (the last three ``...`` when cut). Scrubbing first is the point: a cut never splits a secret."""
    text = " ".join(scrub(text, secrets).split())
    return text if len(text) <= limit else text[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS
