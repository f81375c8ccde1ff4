"""Links to pages of the TestOps web UI (not API paths): ``<endpoint>/launch/7``, ``<endpoint>/jobrun/12``.

Dependency-free so that worker phases can render a link without loading the REST client.
"""

from __future__ import annotations

PAGES = ("launch", "jobrun", "testcase", "testplan", "job")


def page_url(endpoint: str, kind: str, ident: int | str) -> str:
    """The UI page of one TestOps object, e.g. ``page_url(e, "launch", 7)`` -> ``<e>/launch/7``."""
    if kind not in PAGES:
        raise ValueError(f"not a TestOps page kind: {kind!r}")
    return f"{endpoint.rstrip('/')}/{kind}/{ident}"
