"""The TestOps endpoint: one check for the contract's ``testops.endpoint`` and the ``testops-endpoint`` input.

An endpoint is a base URL: ``http(s)://host[:port][/path]``. It is written into selections, receipts and
once-markers, shown in summaries and sent in every request, so it must never carry a secret: userinfo
(``https://user:TOKEN@host``), a query, or the token itself anywhere in it is refused — the token goes in
``testops-token``. A URL Python cannot take apart (``http://[::1``) or with an impossible port is refused
too, with the caller's code, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable

from testops_evidence.errors import Refusal
from testops_evidence.redact import scrub

EXPECTED = "an http(s) base URL: https://host[:port][/path], without user, password, query or token"


def check_endpoint(text: str, *, code: str, field: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` as a clean base URL (no trailing slash), or a refusal with ``code`` that never echoes a
    secret it found."""
    from urllib.parse import urlsplit

    shown = _redacted(text, secrets)
    if not text.isprintable() or any(c.isspace() for c in text):
        raise Refusal(code, "the TestOps endpoint holds spaces or control characters", field=field,
                      expected=EXPECTED, actual=shown)
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            raise Refusal(code, "the TestOps endpoint holds the TestOps token; pass the token in testops-token "
                          "(or ALLURE_TOKEN) only", field=field, expected=EXPECTED, actual=shown)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise Refusal(code, f"the TestOps endpoint is not a valid URL ({exc})", field=field, expected=EXPECTED,
                      actual=shown) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refusal(code, "the TestOps endpoint must be an http(s) URL with a host", field=field,
                      expected=EXPECTED, actual=shown)
    if "@" in parts.netloc:
        raise Refusal(code, "the TestOps endpoint holds a user name or password; pass the token in "
                      "testops-token (or ALLURE_TOKEN), never in a URL", field=field, expected=EXPECTED,
                      actual=shown)
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise Refusal(code, "the TestOps endpoint has a query or fragment (a base URL has neither; a token "
                      "there would be written into receipts)", field=field, expected=EXPECTED, actual=shown)
    if port == 0:
        raise Refusal(code, "the TestOps endpoint's port is 0", field=field, expected=EXPECTED, actual=shown)
    return text.rstrip("/")


def _redacted(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret, any userinfo and any query replaced by ``***``, cut to 200 characters."""
    for mark in ("?", "#"):
        if mark in text:
            text = text[: text.index(mark)] + mark + "***"
    text = scrub(text, [secret for secret in secrets if secret and len(secret) >= 4])  # before the cut below
    scheme_end = text.find("://")
    if scheme_end >= 0:
        rest = text[scheme_end + 3:]
        at = rest.rfind("@", 0, min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
                                    default=len(rest)))
        if at >= 0:
            text = text[: scheme_end + 3] + "***@" + rest[at + 1:]
    return text[:200]
